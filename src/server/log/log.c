/*
 * log.c -- the batch of log.h: entries back to back in one buffer, shared
 * by every log implementation. Invariant: b->buf holds exactly b->records
 * whole entries (LOG_ENTRY_HEADER_BYTES + len each) between calls, with
 * non-decreasing revisions, the last of them b->last_rev. Also the data
 * directory's lock, which every implementation takes first.
 */
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"

/* The batch buffer is kept between turns up to this size. */
#define LOG_BATCH_KEEP_BYTES (1u << 20)

size_t log_batch_begin(log_batch_t *b, uint64_t rev)
{
    assert(b->records == 0 || rev >= b->last_rev);
    size_t at = b->buf.len;
    char *p = ordo_buf_reserve(&b->buf, LOG_ENTRY_HEADER_BYTES);
    put_u32(p, 0);     /* the length, once known (log_batch_end) */
    put_u32(p + 4, 0); /* reserved for the log (the WAL's checksum) */
    put_u64(p + 8, rev);
    b->buf.len += LOG_ENTRY_HEADER_BYTES;
    return at;
}

size_t log_batch_end(log_batch_t *b, size_t at)
{
    assert(at + LOG_ENTRY_HEADER_BYTES <= b->buf.len);
    size_t len = b->buf.len - at - LOG_ENTRY_HEADER_BYTES;
    assert(len <= UINT32_MAX);
    put_u32(b->buf.data + at, (uint32_t)len);
    b->last_rev = get_u64(b->buf.data + at + 8);
    b->records++;
    return len;
}

void log_batch_cancel(log_batch_t *b, size_t at)
{
    assert(at <= b->buf.len);
    b->buf.len = at;
}

bool log_batch_next(const log_batch_t *b, size_t *pos, uint64_t *rev, const void **rec, size_t *len)
{
    if (*pos >= b->buf.len)
        return false;
    assert(*pos + LOG_ENTRY_HEADER_BYTES <= b->buf.len);
    const char *p = b->buf.data + *pos;
    *len = get_u32(p);
    *rev = get_u64(p + 8);
    *rec = p + LOG_ENTRY_HEADER_BYTES;
    assert(*pos + LOG_ENTRY_HEADER_BYTES + *len <= b->buf.len);
    *pos += LOG_ENTRY_HEADER_BYTES + *len;
    return true;
}

void log_batch_clear(log_batch_t *b)
{
    ordo_buf_reset(&b->buf, LOG_BATCH_KEEP_BYTES);
    b->records = 0;
    b->last_rev = 0;
}

void log_batch_free(log_batch_t *b)
{
    ordo_buf_free(&b->buf);
    b->records = 0;
    b->last_rev = 0;
}

int log_lock_dir(const char *dir, char *err, size_t elen)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, elen, "cannot open data directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            snprintf(err, elen, "data directory %s is in use by another process", dir);
        else
            snprintf(err, elen, "cannot lock data directory %s: %s", dir, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int log_file_read(int fd, unsigned char **out, size_t *size_out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    size_t size = (size_t)st.st_size;
    unsigned char *b = ordo_xmalloc(size ? size : 1);
    for (size_t got = 0; got < size;) {
        ssize_t k = pread(fd, b + got, size - got, (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO; /* shrank under us */
            free(b);
            return -1;
        }
        got += (size_t)k;
    }
    *out = b;
    *size_out = size;
    return 0;
}
