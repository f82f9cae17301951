/*
 * buf.h -- a growable byte buffer: connection input, reply output, record
 * encoding.
 *
 * A buf owns its memory (data[0..len) is valid, cap bytes allocated). The
 * server treats running out of memory as fatal, as Redis does: the append
 * functions print a message and abort rather than return an error that every
 * caller would have to thread through. Memory use is bounded by the limits
 * that decide what may be appended (request, reply and output-buffer limits),
 * not here.
 *
 * Not thread-safe: one owner at a time.
 *
 * ordo_buf_reserve() and ordo_buf_append() are inline: every request and
 * reply goes through them several times, and when the room is already there
 * (nearly always) they are a compare and a copy. The growth path
 * (ordo_buf_grow) stays in buf.c and checks the buffer's invariants every
 * time; the inline fast path checks them only in debug builds
 * (ORDO_DEBUG_ASSERT), since they are established by this module alone.
 */
#ifndef ORDO_BUF_H
#define ORDO_BUF_H

#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* ORDO_DEBUG_ASSERT(x) -- an assertion that only re-checks what the code
 * just established (a module's own invariant, a caller's precondition that
 * a plain assert() checked just before), on a path every request takes.
 * Checked in Debug builds (ORDO_DEBUG: the ASan/TSan builds and the fuzzer);
 * compiled out of Release. Anything that guards memory safety or the disk
 * stays a plain assert(), which Release keeps. */
#ifdef ORDO_DEBUG
#define ORDO_DEBUG_ASSERT(x) assert(x)
#else
#define ORDO_DEBUG_ASSERT(x) ((void)0)
#endif

typedef struct ordo_buf_s {
    char *data;
    size_t len;
    size_t cap;
} ordo_buf_t;

#define ORDO_BUF_INIT {NULL, 0, 0}

/* The growth path of ordo_buf_reserve(): make room for extra more bytes,
 * reallocating; returns data + len. */
char *ordo_buf_grow(ordo_buf_t *b, size_t extra);

/* Make room for extra more bytes; returns data + len (where they go), never
 * NULL. */
static inline char *ordo_buf_reserve(ordo_buf_t *b, size_t extra)
{
    ORDO_DEBUG_ASSERT(b != NULL && b->len <= b->cap && (b->data == NULL) == (b->cap == 0));
    if (b->cap != 0 && extra <= b->cap - b->len)
        return b->data + b->len;
    return ordo_buf_grow(b, extra);
}

/* Append n bytes. */
static inline void ordo_buf_append(ordo_buf_t *b, const void *p, size_t n)
{
    char *dst = ordo_buf_reserve(b, n);
    if (n > 0)
        memcpy(dst, p, n);
    b->len += n;
}
/* Append a NUL-terminated string (without the NUL). */
void ordo_buf_puts(ordo_buf_t *b, const char *s);
/* Append printf-style text. */
void ordo_buf_printf(ordo_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append printf-style text from a va_list (ap is consumed, as by vsnprintf). */
void ordo_buf_vprintf(ordo_buf_t *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Drop the first n bytes (n <= len), moving the rest to the front. */
void ordo_buf_consume(ordo_buf_t *b, size_t n);
/* Forget the contents; keep the allocation if it is at most keep_max bytes,
 * else free it (so one huge reply does not pin memory for the connection's
 * life). */
void ordo_buf_reset(ordo_buf_t *b, size_t keep_max);
/* Free the memory. */
void ordo_buf_free(ordo_buf_t *b);

/* Allocation that aborts with a message on failure (see the note above). */
void *ordo_xmalloc(size_t n);
void *ordo_xcalloc(size_t n, size_t size);
void *ordo_xrealloc(void *p, size_t n);

/* ordo_heap_push() (base/heap.h) that aborts, as ordo_xrealloc() does,
 * when the heap's array cannot grow. */
struct ordo_heap_s;
struct ordo_heap_node_s;
void ordo_heap_xpush(struct ordo_heap_s *h, struct ordo_heap_node_s *n);

#endif /* ORDO_BUF_H */
