/*
 * blob.h -- immutable bytes shared by a reference count.
 *
 * One change watched by many connections is encoded once into a blob, and
 * every watcher's output holds a reference instead of a copy (net/conn.h),
 * so fifty non-reading watchers of an 8 MiB value cost 8 MiB, not 400.
 *
 * A blob's bytes never change after ordo_blob_new(); it is freed when the
 * last reference goes. Not thread-safe: one thread (the loop) owns every
 * reference.
 */
#ifndef ORDO_BLOB_H
#define ORDO_BLOB_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ordo_blob_s {
    uint32_t refs;   /* > 0 while the blob exists */
    size_t len;
    char data[];
} ordo_blob_t;

/* ordo_blob_new() -- a blob holding a copy of data[0..len), one reference
 * (the caller's). Aborts if out of memory, as ordo_xmalloc() does. */
ordo_blob_t *ordo_blob_new(const void *data, size_t len);

/* ordo_blob_ref() -- one more reference; returns b. */
static inline ordo_blob_t *ordo_blob_ref(ordo_blob_t *b)
{
    assert(b->refs > 0 && b->refs < UINT32_MAX);
    b->refs++;
    return b;
}

/* ordo_blob_unref() -- drop a reference; the last one frees the blob. */
void ordo_blob_unref(ordo_blob_t *b);

#endif /* ORDO_BLOB_H */
