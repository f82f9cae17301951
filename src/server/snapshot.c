/*
 * snapshot.c -- write and load snapshot files; the format is in snapshot.h.
 */
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wal.h"

#define SNAP_MAGIC "ORDOSNAP"
#define SNAP_HEADER_BYTES 28
#define SNAP_ENTRY_FIXED 49 /* tag, klen, vlen, five u64 */
#define SNAP_TRAILER_BYTES 13

static void put_u64(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (8 * i));
}

static void put_u32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Write the whole buffer, folding it into the running checksum. */
static int flush_buf(snap_writer_t *w, char *err, size_t elen)
{
    w->crc = ordo_crc32c(w->crc, w->buf.data, w->buf.len);
    size_t off = 0;
    while (off < w->buf.len) {
        ssize_t n = write(w->fd, w->buf.data + off, w->buf.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, elen, "write %s: %s", w->tmp_path, strerror(errno));
            return -1;
        }
        off += (size_t)n;
    }
    w->buf.len = 0;
    return 0;
}

int snap_writer_begin(snap_writer_t *w, const char *dir, uint64_t rev, uint64_t now_ms, char *err, size_t elen)
{
    memset(w, 0, sizeof *w);
    w->rev = rev;
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s/%s", dir, SNAP_TMP_FILE);
    snprintf(w->path, sizeof w->path, "%s/%s", dir, SNAP_FILE);
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        snprintf(err, elen, "create %s: %s", w->tmp_path, strerror(errno));
        return -1;
    }
    char *p = ordo_buf_reserve(&w->buf, SNAP_HEADER_BYTES);
    memcpy(p, SNAP_MAGIC, 8);
    put_u32(p + 8, SNAP_FORMAT);
    put_u64(p + 12, rev);
    put_u64(p + 20, now_ms);
    w->buf.len += SNAP_HEADER_BYTES;
    return 0;
}

typedef struct step_ctx_s {
    snap_writer_t *w;
    const core_t *core;
} step_ctx_t;

static int encode_entry(void *arg, const kv_version_t *v)
{
    step_ctx_t *x = arg;
    snap_writer_t *w = x->w;
    char *p = ordo_buf_reserve(&w->buf, SNAP_ENTRY_FIXED + v->klen + v->vlen);
    p[0] = 'K';
    put_u32(p + 1, v->klen);
    memcpy(p + 5, v->key, v->klen);
    p += 5 + v->klen;
    put_u32(p, v->vlen);
    if (v->vlen)
        memcpy(p + 4, v->value, v->vlen);
    p += 4 + v->vlen;
    put_u64(p, v->create_rev);
    put_u64(p + 8, v->mod_rev);
    put_u64(p + 16, v->version);
    put_u64(p + 24, v->lease);
    /* The deadline the key has now: see DESIGN in core.h -- replaying the
     * records after w->rev sets or clears it wherever it changed since. */
    put_u64(p + 32, core_expiry_of(x->core, v->key, v->klen));
    w->buf.len += SNAP_ENTRY_FIXED + v->klen + v->vlen;
    w->entries++;
    w->after.len = 0;
    ordo_buf_append(&w->after, v->key, v->klen);
    w->have_after = true;
    return 0;
}

int snap_writer_step(snap_writer_t *w, const core_t *core, size_t max_keys, char *err, size_t elen)
{
    if (w->finished)
        return 1;
    step_ctx_t x = {w, core};
    /* Copy the resume key: encode_entry overwrites w->after as it goes. */
    ordo_buf_t after = ORDO_BUF_INIT;
    if (w->have_after)
        ordo_buf_append(&after, w->after.data, w->after.len);
    long n = kv_range(core_kv(core), "", 0, w->have_after ? after.data : NULL, after.len, w->rev, max_keys,
                      encode_entry, &x);
    ordo_buf_free(&after);
    if (n < 0) {
        snprintf(err, elen, "snapshot revision %llu was compacted while writing", (unsigned long long)w->rev);
        return -1;
    }
    if ((size_t)n == max_keys && max_keys != 0)
        return flush_buf(w, err, elen) < 0 ? -1 : 0;
    char *p = ordo_buf_reserve(&w->buf, 9);
    p[0] = 'E';
    put_u64(p + 1, w->entries);
    w->buf.len += 9;
    if (flush_buf(w, err, elen) < 0)
        return -1;
    char crc[4];
    put_u32(crc, w->crc);
    if (write(w->fd, crc, 4) != 4) {
        snprintf(err, elen, "write %s: %s", w->tmp_path, strerror(errno));
        return -1;
    }
    w->finished = true;
    return 1;
}

int snap_writer_commit(snap_writer_t *w, char *err, size_t elen)
{
    if (fdatasync(w->fd) != 0) {
        snprintf(err, elen, "fdatasync %s: %s", w->tmp_path, strerror(errno));
        return -1;
    }
    close(w->fd);
    w->fd = -1;
    if (rename(w->tmp_path, w->path) != 0) {
        snprintf(err, elen, "rename %s: %s", w->tmp_path, strerror(errno));
        return -1;
    }
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        snprintf(err, elen, "fsync directory %s: %s", w->dir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        return -1;
    }
    close(dfd);
    return 0;
}

void snap_writer_abort(snap_writer_t *w)
{
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp_path);
    }
    w->fd = -1;
    ordo_buf_free(&w->buf);
    ordo_buf_free(&w->after);
}

/* Read the whole file; snapshots are loaded once, at start-up. */
static char *read_file(const char *path, size_t *len, char *err, size_t elen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        snprintf(err, elen, "stat %s: %s", path, strerror(errno));
        return NULL;
    }
    char *data = ordo_xmalloc((size_t)st.st_size + 1);
    *len = fread(data, 1, (size_t)st.st_size, f);
    fclose(f);
    return data;
}

int snap_load(core_t *core, const char *dir, uint64_t *rev_out, uint64_t *entries_out, char *err, size_t elen)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, SNAP_FILE);
    *rev_out = 0;
    *entries_out = 0;
    err[0] = '\0';
    size_t len = 0;
    char *data = read_file(path, &len, err, elen);
    if (data == NULL)
        return err[0] ? -1 : 0; /* no snapshot: start from the log alone */
    const unsigned char *p = (const unsigned char *)data;
    int rc = -1;
    if (len < SNAP_HEADER_BYTES + SNAP_TRAILER_BYTES || memcmp(p, SNAP_MAGIC, 8) != 0 ||
        get_u32(p + 8) != SNAP_FORMAT) {
        snprintf(err, elen, "%s: not an ordo snapshot (bad header)", path);
        goto out;
    }
    if (ordo_crc32c(0, p, len - 4) != get_u32(p + len - 4)) {
        snprintf(err, elen, "%s: checksum mismatch: the snapshot is damaged", path);
        goto out;
    }
    uint64_t rev = get_u64(p + 12);
    size_t off = SNAP_HEADER_BYTES, end = len - 4;
    uint64_t n = 0;
    while (off < end && p[off] == 'K') {
        if (end - off < SNAP_ENTRY_FIXED)
            break;
        uint32_t klen = get_u32(p + off + 1);
        if (klen > end - off - SNAP_ENTRY_FIXED)
            break;
        const unsigned char *key = p + off + 5;
        uint32_t vlen = get_u32(key + klen);
        if (vlen > end - off - SNAP_ENTRY_FIXED - klen)
            break;
        const unsigned char *val = key + klen + 4, *f = val + vlen;
        if (core_load_key(core, key, klen, val, vlen, get_u64(f), get_u64(f + 8), get_u64(f + 16), get_u64(f + 24),
                          get_u64(f + 32)) != 0 ||
            get_u64(f + 8) > rev) {
            snprintf(err, elen, "%s: inconsistent entry at offset %zu", path, off);
            goto out;
        }
        off += SNAP_ENTRY_FIXED + klen + vlen;
        n++;
    }
    if (off + 9 != end || p[off] != 'E' || get_u64(p + off + 1) != n) {
        snprintf(err, elen, "%s: malformed entries or trailer at offset %zu", path, off);
        goto out;
    }
    if (core_load_done(core, rev) != 0) {
        snprintf(err, elen, "%s: cannot load at revision %llu", path, (unsigned long long)rev);
        goto out;
    }
    *rev_out = rev;
    *entries_out = n;
    rc = 0;
out:
    free(data);
    return rc;
}
