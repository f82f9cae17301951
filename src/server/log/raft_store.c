/*
 * raft_store.c -- a cluster member's durable raft state (raft_store.h).
 *
 * ON-DISK FORMAT
 *
 * The directory holds "meta" and the segments "seg-<seq>", seq in 20
 * decimal digits ("seg-00000000000000000001"), so the names sort in log
 * order; other names are ignored. Every integer is little-endian.
 *
 * meta: two slots, slot i at offset i * RS_META_SLOT_BYTES; a write of
 * sequence number q goes to slot q % 2, so it never touches the slot
 * holding the state it replaces. A slot, RS_META_HEADER_BYTES = 80 and
 * the configuration:
 *
 *    offset  size  field
 *         0     8  magic "ORDORMT\0"
 *         8     4  format version, 1
 *        12     4  conf_len: bytes of the encoded configuration,
 *                  <= RAFT_STORE_CONF_BYTES_MAX
 *        16     8  seq: the slot's sequence number, >= 1
 *        24     8  term
 *        32     8  vote (0: none)
 *        40     8  snapshot index (0: no snapshot)
 *        48     8  snapshot term
 *        56     8  index of the snapshot's configuration
 *        64     8  first_seg: the first segment of the log; segments
 *                  numbered below it are garbage (see below)
 *        72     4  CRC-32C of bytes 0..71 and the configuration
 *        76     4  zero
 *        80   len  the snapshot's configuration, raft_configuration_encode()
 *
 * The valid slot (magic, version, length within bounds, crc) with the
 * higher seq is the state. The file is created whole at the first open
 * (meta.tmp, synced, renamed, directory synced), so it is either absent
 * (a new store) or was once valid.
 *
 * A segment: a header, RS_SEG_HEADER_BYTES = 32, then records back to back.
 *
 *    offset  size  field
 *         0     8  magic "ORDORSG\0"
 *         8     4  format version, 1
 *        12     4  header size, 32
 *        16     8  seq, equal to the one in the name (a renamed or copied
 *                  file does not pass for another segment)
 *        24     4  CRC-32C of bytes 0..23
 *        28     4  zero
 *
 * A record, RS_REC_HEADER_BYTES = 32 and the entry's data:
 *
 *    offset  size  field
 *         0     4  CRC-32C of the segment's seq (8 bytes) and bytes 4..end
 *         4     4  len: data bytes, <= RAFT_STORE_ENTRY_BYTES_MAX
 *         8     8  index
 *        16     8  term
 *        24     4  type (enum raft_entry_type)
 *        28     4  zero
 *        32   len  data
 *
 * Invariants, on disk once every write queued is done, and in memory at
 * every moment:
 *   - the log is the segments first_seg, first_seg + 1, ... with no gap;
 *     each holds consecutive indexes, and each begins where the one before
 *     ended (a segment may be empty only if it is the last);
 *   - the first entry of the log is at or below snapshot index + 1, and
 *     if there are entries the last is at or above the snapshot index;
 *   - every entry held in memory is in the log, at the place locs[] says.
 * first_seg is what makes installing a snapshot and compaction atomic:
 * the meta write that records the snapshot also moves first_seg past the
 * segments that go, so a crash before they are unlinked leaves garbage a
 * later open deletes, never entries of an older history.
 *
 * WRITING
 *
 * The loop thread owns the plan: which segment each entry goes to and at
 * what offset (segs[] and locs[] describe the files as they will be once
 * every queued operation is done). Each change adds operations to the
 * pending batch: CREATE a segment (with its header), WRITE bytes at an
 * offset, TRUNCATE a segment at an offset, UNLINK a segment. One batch at
 * a time runs on a pool thread (uv_queue_work); an idle handle hands the
 * pending batch over at the end of the loop turn that made it, or the
 * completion of the batch before does. The worker runs the operations in
 * order and then syncs: a segment it moves away from is synced first (so
 * only the last can have a torn tail), the directory is synced before a
 * CREATE or TRUNCATE that follows an UNLINK or CREATE (a truncated
 * segment must never be followed, after a crash, by a segment that was
 * unlinked before it), and whatever is left dirty at the end.
 *
 * Every operation is absolute (bytes at an offset, a size, a name), so a
 * batch that failed is retried whole, after RAFT_STORE_RETRY_MS: every
 * byte it wrote is written again before the next sync, so a sync that
 * failed (after which the kernel may have dropped the dirty pages and
 * marked them clean) is never trusted for data it did not see written
 * again. Later changes queue behind it in the pending batch.
 *
 * Truncation (an append at an index held): segments after the one
 * holding the index are unlinked (newest first), then that one is
 * truncated at the record's offset, before the new entries are written:
 * once the new entries are reported durable, the old ones are gone from
 * the disk too.
 *
 * RECOVERY
 *
 * raft_store_open() reads meta, deletes segments below first_seg, checks
 * that the rest are numbered without a gap from first_seg, and reads their
 * records in order. At the first bad record (short, over the length limit,
 * crc mismatch, unknown type) or bad header, that segment is cut there
 * (a bad header: the file removed) and every later segment removed: after
 * a torn write nothing later is believed. A good record with an index out
 * of sequence is a gap (a segment lost or swapped): refused.
 */
#include "raft_store.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "base/crc32c.h"
#include "log.h"

#define RS_META_NAME "meta"
#define RS_META_TMP "meta.tmp"
#define RS_META_MAGIC "ORDORMT"       /* with its NUL: 8 bytes */
#define RS_SEG_MAGIC "ORDORSG"        /* with its NUL: 8 bytes */
#define RS_VERSION 1u
#define RS_META_HEADER_BYTES 80u
/* A slot has room for the header and the largest configuration. */
#define RS_META_SLOT_BYTES (4096u + RAFT_STORE_CONF_BYTES_MAX)
#define RS_SEG_HEADER_BYTES 32u
#define RS_REC_HEADER_BYTES 32u
#define RS_SEG_PREFIX "seg-"
#define RS_SEG_NAME_BYTES 24u         /* "seg-" and 20 digits */
/* The batch buffer is kept between batches up to this size. */
#define RS_BATCH_KEEP_BYTES (1u << 20)

enum rs_op_kind { OP_CREATE, OP_WRITE, OP_TRUNCATE, OP_UNLINK };

/* One file operation of a batch. WRITE: data[at..at+len) at off. */
typedef struct rs_op_s {
    int kind;
    uint64_t seq;
    uint64_t off;
    size_t at, len;
} rs_op_t;

/* A batch of operations, handed to the worker whole. */
typedef struct rs_batch_s {
    uv_work_t req;
    raft_store_t *s;               /* NULL once raft_store_close() left it to the loop */
    rs_op_t *ops;
    size_t nops, ops_cap;
    ordo_buf_t data;
    uint64_t first, last;          /* entries it writes; first 0: none */
    uint64_t floor;                /* lowest index replaced since it was handed over (UINT64_MAX: none) */
    bool dropped;                  /* raft_store_install(): report nothing, do not retry */
    bool queued;                   /* with uv; its completion has not run */
    raft_store_seam_t seam;        /* the worker's copy */
    /* Set by whoever runs it. */
    bool done;                     /* under s->mu: the worker finished it */
    int err;                       /* 0, or the errno of the failure */
    char why[640];
    uint64_t writes, syncs;
} rs_batch_t;

/* A segment as it will be once every queued operation is done. */
typedef struct rs_seg_s {
    uint64_t seq;
    uint64_t bytes;                /* file size, header included */
    uint64_t first, count;         /* its entries' indexes: first..first+count-1 */
} rs_seg_t;

/* Where an entry held is on disk. */
typedef struct rs_loc_s {
    uint64_t seq, off;
} rs_loc_t;

/* The loop handles, apart from the store: their close callbacks run after
 * raft_store_close() returned. */
typedef struct rs_handles_s {
    uv_idle_t idle;                /* hands the pending batch over at the end of the turn */
    uv_timer_t retry;              /* retries a failed batch */
    int open;                      /* handles not yet closed */
} rs_handles_t;

struct raft_store_s {
    bool quiesced;                 /* shutting down: no more retries (close() makes the last attempt) */
    char *dir;
    int dir_fd, meta_fd;
    uv_loop_t *loop;
    raft_store_persisted_cb cb;
    void *arg;
    rs_handles_t *h;
    raft_store_seam_t seam;
    uint64_t seg_bytes_max;        /* RAFT_STORE_SEGMENT_BYTES unless the seam says */

    /* As last written to meta. */
    uint64_t term, vote, meta_seq, first_seg;
    raft_store_snap_t snap;        /* snap.conf owned */
    void *conf_enc;                /* snap.conf encoded (malloc'd), conf_len bytes */
    size_t conf_len;

    /* Entries held: ents[head..head+n) are indexes first..first+n-1. */
    struct raft_entry *ents;
    rs_loc_t *locs;
    size_t head, n, cap;
    uint64_t first;
    uint64_t bytes;

    /* The plan: segments oldest first. */
    rs_seg_t *segs;
    size_t nsegs, segs_cap;

    rs_batch_t *pending;           /* being filled on the loop */
    rs_batch_t *inflight;          /* with the worker, or failed and waiting for the retry */
    char failing[640];             /* "" unless the last write failed */
    raft_store_stats_t stats;
    uint64_t cut;

    pthread_mutex_t mu;            /* guards rs_batch_t.done */
    pthread_cond_t cv;

    /* The worker's, while a batch runs (close: after it finished). */
    int w_fd;                      /* the segment last used, or -1 */
    uint64_t w_seq;
    bool w_dirty, w_dir_dirty;
};

/* ---- small helpers ---------------------------------------------------------- */

static const char *errstr(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n); /* GNU: returns the message */
}

static void seg_name(char out[RS_SEG_NAME_BYTES + 1], uint64_t seq)
{
    snprintf(out, RS_SEG_NAME_BYTES + 1, RS_SEG_PREFIX "%020" PRIu64, seq);
}

/* Sequence number of a segment file name, or 0 if name is not one. */
static uint64_t seg_parse_name(const char *name)
{
    if (strlen(name) != RS_SEG_NAME_BYTES || memcmp(name, RS_SEG_PREFIX, 4) != 0)
        return 0;
    uint64_t seq = 0;
    for (int i = 4; i < (int)RS_SEG_NAME_BYTES; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        uint64_t d = (uint64_t)(name[i] - '0');
        if (seq > (UINT64_MAX - d) / 10)
            return 0;
        seq = seq * 10 + d;
    }
    return seq;
}

static uint64_t store_last(const raft_store_t *s)
{
    return s->first + s->n - 1;
}

/* The seq the next new segment gets. */
static uint64_t seg_next_seq(const raft_store_t *s)
{
    return s->nsegs > 0 ? s->segs[s->nsegs - 1].seq + 1 : s->first_seg;
}

static ssize_t io_pwrite(const raft_store_seam_t *m, int fd, const void *buf, size_t n, off_t off)
{
    if (m->pwrite_fn != NULL)
        return m->pwrite_fn(m->ctx, fd, buf, n, off);
    return pwrite(fd, buf, n, off);
}

static int io_fsync(const raft_store_seam_t *m, int fd, bool dir)
{
    if (m->fsync_fn != NULL)
        return m->fsync_fn(m->ctx, fd);
    return dir ? fsync(fd) : fdatasync(fd);
}

/* Write all n bytes at off (a short write is continued). Returns 0, or -1
 * with errno. */
static int write_all(const raft_store_seam_t *m, int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = io_pwrite(m, fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            errno = EIO; /* no progress: do not spin */
            return -1;
        }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* ---- encoding ------------------------------------------------------------------ */

static void seg_header_encode(unsigned char h[RS_SEG_HEADER_BYTES], uint64_t seq)
{
    memset(h, 0, RS_SEG_HEADER_BYTES);
    memcpy(h, RS_SEG_MAGIC, 8);
    put_u32(h + 8, RS_VERSION);
    put_u32(h + 12, RS_SEG_HEADER_BYTES);
    put_u64(h + 16, seq);
    put_u32(h + 24, ordo_crc32c(0, h, 24));
}

static bool seg_header_good(const unsigned char *h, size_t size, uint64_t seq)
{
    return size >= RS_SEG_HEADER_BYTES && memcmp(h, RS_SEG_MAGIC, 8) == 0 && get_u32(h + 8) == RS_VERSION &&
           get_u32(h + 12) == RS_SEG_HEADER_BYTES && get_u64(h + 16) == seq && get_u32(h + 24) == ordo_crc32c(0, h, 24);
}

static uint32_t rec_crc(uint64_t seq, const unsigned char *rec, uint32_t len)
{
    unsigned char q[8];
    put_u64(q, seq);
    return ordo_crc32c(ordo_crc32c(0, q, sizeof q), rec + 4, RS_REC_HEADER_BYTES - 4 + (size_t)len);
}

static bool type_valid(uint32_t type)
{
    return type == RAFT_COMMAND || type == RAFT_BARRIER || type == RAFT_CHANGE;
}

/* The record at b[off..size) of segment seq, if good: its entry in *e
 * (buf pointing into b) and its index in *index. */
static bool rec_decode(const unsigned char *b, size_t size, size_t off, uint64_t seq, struct raft_entry *e,
                       uint64_t *index)
{
    if (size - off < RS_REC_HEADER_BYTES)
        return false;
    const unsigned char *r = b + off;
    uint32_t len = get_u32(r + 4);
    if (len > RAFT_STORE_ENTRY_BYTES_MAX || len > size - off - RS_REC_HEADER_BYTES)
        return false;
    if (get_u32(r) != rec_crc(seq, r, len) || !type_valid(get_u32(r + 24)) || get_u64(r + 8) == 0)
        return false;
    *index = get_u64(r + 8);
    e->term = get_u64(r + 16);
    e->type = (enum raft_entry_type)get_u32(r + 24);
    e->buf.base = (void *)(r + RS_REC_HEADER_BYTES);
    e->buf.len = len;
    e->batch = NULL;
    return true;
}

/* Append the record of e (index, in segment seq) to out. */
static void rec_encode(ordo_buf_t *out, uint64_t seq, uint64_t index, const struct raft_entry *e)
{
    assert(e->buf.len <= RAFT_STORE_ENTRY_BYTES_MAX && type_valid((uint32_t)e->type) && index > 0);
    size_t at = out->len;
    unsigned char *r = (unsigned char *)ordo_buf_reserve(out, RS_REC_HEADER_BYTES + e->buf.len);
    memset(r, 0, RS_REC_HEADER_BYTES);
    put_u32(r + 4, (uint32_t)e->buf.len);
    put_u64(r + 8, index);
    put_u64(r + 16, e->term);
    put_u32(r + 24, (uint32_t)e->type);
    if (e->buf.len > 0)
        memcpy(r + RS_REC_HEADER_BYTES, e->buf.base, e->buf.len);
    put_u32(r, rec_crc(seq, r, (uint32_t)e->buf.len));
    out->len += RS_REC_HEADER_BYTES + e->buf.len;
    struct raft_entry check;
    uint64_t check_index;
    assert(rec_decode((unsigned char *)out->data, out->len, at, seq, &check, &check_index) &&
           check_index == index && check.term == e->term && check.buf.len == e->buf.len);
    (void)check;
    (void)check_index;
    (void)at;
}

/* ---- meta ------------------------------------------------------------------------ */

/* Encode a slot of sequence seq into m (RS_META_HEADER_BYTES + conf_len
 * bytes); returns its length. */
static size_t meta_encode(unsigned char *m, uint64_t seq, uint64_t term, uint64_t vote, const raft_store_snap_t *snap,
                          uint64_t first_seg, const void *conf, size_t conf_len)
{
    assert(conf_len <= RAFT_STORE_CONF_BYTES_MAX && seq >= 1 && first_seg >= 1);
    memset(m, 0, RS_META_HEADER_BYTES);
    memcpy(m, RS_META_MAGIC, 8);
    put_u32(m + 8, RS_VERSION);
    put_u32(m + 12, (uint32_t)conf_len);
    put_u64(m + 16, seq);
    put_u64(m + 24, term);
    put_u64(m + 32, vote);
    put_u64(m + 40, snap->index);
    put_u64(m + 48, snap->term);
    put_u64(m + 56, snap->conf_index);
    put_u64(m + 64, first_seg);
    if (conf_len > 0)
        memcpy(m + RS_META_HEADER_BYTES, conf, conf_len);
    put_u32(m + 72, ordo_crc32c(ordo_crc32c(0, m, 72), m + RS_META_HEADER_BYTES, conf_len));
    return RS_META_HEADER_BYTES + conf_len;
}

/* A slot read back: valid if it checks. */
typedef struct rs_slot_s {
    bool valid;
    uint64_t seq, term, vote, snap_index, snap_term, conf_index, first_seg;
    const unsigned char *conf;
    size_t conf_len;
} rs_slot_t;

static rs_slot_t meta_decode(const unsigned char *m, size_t avail)
{
    rs_slot_t sl = {0};
    if (avail < RS_META_HEADER_BYTES || memcmp(m, RS_META_MAGIC, 8) != 0 || get_u32(m + 8) != RS_VERSION)
        return sl;
    uint32_t conf_len = get_u32(m + 12);
    if (conf_len > RAFT_STORE_CONF_BYTES_MAX || conf_len > avail - RS_META_HEADER_BYTES)
        return sl;
    if (get_u32(m + 72) != ordo_crc32c(ordo_crc32c(0, m, 72), m + RS_META_HEADER_BYTES, conf_len))
        return sl;
    sl.seq = get_u64(m + 16);
    sl.term = get_u64(m + 24);
    sl.vote = get_u64(m + 32);
    sl.snap_index = get_u64(m + 40);
    sl.snap_term = get_u64(m + 48);
    sl.conf_index = get_u64(m + 56);
    sl.first_seg = get_u64(m + 64);
    sl.conf = m + RS_META_HEADER_BYTES;
    sl.conf_len = conf_len;
    sl.valid = sl.seq >= 1 && sl.first_seg >= 1 && (sl.snap_index > 0 || conf_len == 0);
    return sl;
}

/* Write the next slot: term, vote, snap (conf encoded as conf/conf_len)
 * and first_seg, then sync. Returns 0 (s->meta_seq advanced), or -1 with
 * err set and the state on disk unchanged (the other slot). */
static int meta_write(raft_store_t *s, uint64_t term, uint64_t vote, const raft_store_snap_t *snap,
                      uint64_t first_seg, const void *conf, size_t conf_len, char *err, size_t elen)
{
    char eb[128];
    unsigned char m[RS_META_HEADER_BYTES + RAFT_STORE_CONF_BYTES_MAX];
    uint64_t seq = s->meta_seq + 1;
    size_t len = meta_encode(m, seq, term, vote, snap, first_seg, conf, conf_len);
    rs_slot_t check = meta_decode(m, len);
    assert(check.valid && check.seq == seq && check.term == term && check.first_seg == first_seg);
    (void)check;
    uint64_t off = (seq % 2) * RS_META_SLOT_BYTES;
    if (write_all(&s->seam, s->meta_fd, m, len, off) != 0 || io_fsync(&s->seam, s->meta_fd, false) != 0) {
        snprintf(err, elen, "raft_store: writing %s/%s failed: %s", s->dir, RS_META_NAME, errstr(errno, eb, sizeof eb));
        return -1;
    }
    s->meta_seq = seq;
    return 0;
}

/* Copy snap into s->snap (conf decoded from its encoding, which s keeps).
 * Takes conf_enc (malloc'd). */
static void snap_take(raft_store_t *s, const raft_store_snap_t *snap, void *conf_enc, size_t conf_len)
{
    raft_configuration_close(&s->snap.conf);
    raft_configuration_init(&s->snap.conf);
    free(s->conf_enc);
    s->snap.index = snap->index;
    s->snap.term = snap->term;
    s->snap.conf_index = snap->conf_index;
    s->conf_enc = conf_enc;
    s->conf_len = conf_len;
    if (conf_len > 0) {
        struct raft_buffer b = {conf_enc, conf_len};
        int rv = raft_configuration_decode(&b, &s->snap.conf);
        if (rv != 0) { /* it was just encoded, or it checked on disk */
            fprintf(stderr, "raft_store: cannot decode a configuration (%d): out of memory\n", rv);
            abort();
        }
    }
}

/* Encode snap's configuration into *out (malloc'd; NULL and 0 when it has
 * no member). Returns 0, or -1 with err set. */
static int conf_encode(const raft_store_snap_t *snap, void **out, size_t *len, char *err, size_t elen)
{
    *out = NULL;
    *len = 0;
    if (snap->conf.n == 0)
        return 0;
    struct raft_buffer b;
    if (raft_configuration_encode(&snap->conf, &b) != 0) {
        snprintf(err, elen, "raft_store: cannot encode the configuration");
        return -1;
    }
    if (b.len > RAFT_STORE_CONF_BYTES_MAX) {
        snprintf(err, elen, "raft_store: the configuration takes %zu bytes, over %u", b.len,
                 RAFT_STORE_CONF_BYTES_MAX);
        raft_free(b.base);
        return -1;
    }
    *out = malloc(b.len);
    if (*out == NULL) {
        raft_free(b.base);
        snprintf(err, elen, "raft_store: out of memory");
        return -1;
    }
    memcpy(*out, b.base, b.len);
    *len = b.len;
    raft_free(b.base);
    return 0;
}

/* ---- the worker ------------------------------------------------------------------ */

static void w_fail(raft_store_t *s, rs_batch_t *b, const char *call, uint64_t seq, uint64_t off)
{
    char eb[128], name[RS_SEG_NAME_BYTES + 1];
    b->err = errno != 0 ? errno : EIO;
    if (seq == 0)
        snprintf(b->why, sizeof b->why, "%s of %s failed: %s", call, s->dir, errstr(b->err, eb, sizeof eb));
    else {
        seg_name(name, seq);
        snprintf(b->why, sizeof b->why, "%s of %s/%s at offset %" PRIu64 " failed: %s", call, s->dir, name, off,
                 errstr(b->err, eb, sizeof eb));
    }
}

static int w_sync_dir(raft_store_t *s, rs_batch_t *b)
{
    if (!s->w_dir_dirty)
        return 0;
    if (io_fsync(&b->seam, s->dir_fd, true) != 0) {
        w_fail(s, b, "fsync", 0, 0);
        return -1;
    }
    b->syncs++;
    s->w_dir_dirty = false;
    return 0;
}

/* Sync the segment last used if it was written, and forget it. */
static int w_release(raft_store_t *s, rs_batch_t *b)
{
    if (s->w_fd < 0)
        return 0;
    if (s->w_dirty) {
        if (io_fsync(&b->seam, s->w_fd, false) != 0) {
            w_fail(s, b, "fdatasync", s->w_seq, 0);
            return -1;
        }
        b->syncs++;
        s->w_dirty = false;
    }
    close(s->w_fd);
    s->w_fd = -1;
    return 0;
}

/* Make segment seq the one in use (opening it; create: created afresh
 * with its header, synced). */
static int w_use(raft_store_t *s, rs_batch_t *b, uint64_t seq, bool create)
{
    if (s->w_fd >= 0 && s->w_seq == seq && !create)
        return 0;
    if (w_release(s, b) != 0)
        return -1;
    char name[RS_SEG_NAME_BYTES + 1];
    seg_name(name, seq);
    int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
    int fd = openat(s->dir_fd, name, flags, 0644);
    if (fd < 0) {
        w_fail(s, b, "open", seq, 0);
        return -1;
    }
    s->w_fd = fd;
    s->w_seq = seq;
    s->w_dirty = false;
    if (!create)
        return 0;
    unsigned char h[RS_SEG_HEADER_BYTES];
    seg_header_encode(h, seq);
    assert(seg_header_good(h, sizeof h, seq));
    if (write_all(&b->seam, fd, h, sizeof h, 0) != 0) {
        w_fail(s, b, "pwrite", seq, 0);
        return -1;
    }
    b->writes++;
    s->w_dirty = true;
    s->w_dir_dirty = true;
    return 0;
}

static int w_op(raft_store_t *s, rs_batch_t *b, const rs_op_t *op)
{
    char name[RS_SEG_NAME_BYTES + 1];
    switch (op->kind) {
    case OP_CREATE:
        return w_sync_dir(s, b) != 0 ? -1 : w_use(s, b, op->seq, true);
    case OP_WRITE:
        assert(op->off >= RS_SEG_HEADER_BYTES && op->at + op->len <= b->data.len);
        if (w_use(s, b, op->seq, false) != 0)
            return -1;
        if (write_all(&b->seam, s->w_fd, b->data.data + op->at, op->len, op->off) != 0) {
            w_fail(s, b, "pwrite", op->seq, op->off);
            return -1;
        }
        b->writes++;
        s->w_dirty = true;
        return 0;
    case OP_TRUNCATE:
        assert(op->off >= RS_SEG_HEADER_BYTES);
        if (w_sync_dir(s, b) != 0 || w_use(s, b, op->seq, false) != 0)
            return -1;
        if (ftruncate(s->w_fd, (off_t)op->off) != 0) {
            w_fail(s, b, "ftruncate", op->seq, op->off);
            return -1;
        }
        s->w_dirty = true;
        return 0;
    case OP_UNLINK:
        if (s->w_fd >= 0 && s->w_seq == op->seq) {
            close(s->w_fd); /* going: no sync needed */
            s->w_fd = -1;
            s->w_dirty = false;
        }
        seg_name(name, op->seq);
        if (unlinkat(s->dir_fd, name, 0) != 0 && errno != ENOENT) {
            w_fail(s, b, "unlink", op->seq, 0);
            return -1;
        }
        s->w_dir_dirty = true;
        return 0;
    }
    assert(!"unknown operation");
    return -1;
}

/* Run batch b: its operations in order, then the syncs. Sets b->err. */
static void w_run(raft_store_t *s, rs_batch_t *b)
{
    b->err = 0;
    b->why[0] = '\0';
    for (size_t i = 0; i < b->nops; i++)
        if (w_op(s, b, &b->ops[i]) != 0)
            return;
    if (s->w_fd >= 0 && s->w_dirty) {
        if (io_fsync(&b->seam, s->w_fd, false) != 0) {
            w_fail(s, b, "fdatasync", s->w_seq, 0);
            return;
        }
        b->syncs++;
        s->w_dirty = false;
    }
    (void)w_sync_dir(s, b);
}

static void work_cb(uv_work_t *req)
{
    rs_batch_t *b = req->data;
    raft_store_t *s = b->s;
    w_run(s, b);
    pthread_mutex_lock(&s->mu);
    b->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- batches (loop thread) ---------------------------------------------------- */

static rs_batch_t *batch_new(void)
{
    rs_batch_t *b = ordo_xcalloc(1, sizeof *b);
    b->req.data = b;
    b->floor = UINT64_MAX;
    return b;
}

static void batch_free(rs_batch_t *b)
{
    if (b == NULL)
        return;
    ordo_buf_free(&b->data);
    free(b->ops);
    free(b);
}

static rs_batch_t *pending_get(raft_store_t *s)
{
    if (s->pending == NULL)
        s->pending = batch_new();
    return s->pending;
}

static void op_push(rs_batch_t *b, int kind, uint64_t seq, uint64_t off, size_t at, size_t len)
{
    if (kind == OP_WRITE && b->nops > 0) { /* one pwrite for consecutive records */
        rs_op_t *o = &b->ops[b->nops - 1];
        if (o->kind == OP_WRITE && o->seq == seq && o->off + o->len == off && o->at + o->len == at) {
            o->len += len;
            return;
        }
    }
    if (b->nops == b->ops_cap) {
        b->ops_cap = b->ops_cap ? 2 * b->ops_cap : 8;
        b->ops = ordo_xrealloc(b->ops, b->ops_cap * sizeof *b->ops);
    }
    b->ops[b->nops++] = (rs_op_t){.kind = kind, .seq = seq, .off = off, .at = at, .len = len};
}

static void after_work_cb(uv_work_t *req, int status);

static void submit(raft_store_t *s, rs_batch_t *b)
{
    assert(s->inflight == NULL || s->inflight == b);
    s->inflight = b;
    b->s = s;
    b->seam = s->seam;
    b->done = false;
    b->queued = true;
    b->writes = b->syncs = 0;
    int rv = uv_queue_work(s->loop, &b->req, work_cb, after_work_cb);
    assert(rv == 0);
    (void)rv;
}

/* Hand the pending batch to the worker if it is idle. */
static void kick(raft_store_t *s)
{
    if (s->inflight != NULL || s->pending == NULL || s->pending->nops == 0)
        return;
    rs_batch_t *b = s->pending;
    s->pending = NULL;
    submit(s, b);
}

static void idle_cb(uv_idle_t *idle)
{
    raft_store_t *s = idle->data;
    uv_idle_stop(idle);
    kick(s);
}

/* Make sure kick() runs at the end of this loop turn: an active idle
 * handle also keeps the loop from blocking in poll before it runs. */
static void kick_soon(raft_store_t *s)
{
    if (s->inflight == NULL && !uv_is_active((uv_handle_t *)&s->h->idle))
        uv_idle_start(&s->h->idle, idle_cb);
}

static void retry_cb(uv_timer_t *t)
{
    raft_store_t *s = t->data;
    assert(s->inflight != NULL && !s->inflight->queued && !s->inflight->dropped);
    submit(s, s->inflight);
}

static void after_work_cb(uv_work_t *req, int status)
{
    rs_batch_t *b = req->data;
    raft_store_t *s = b->s;
    (void)status; /* never cancelled: the store does not call uv_cancel() */
    if (s == NULL) { /* left behind by raft_store_close() */
        batch_free(b);
        return;
    }
    assert(s->inflight == b && b->queued);
    b->queued = false;
    s->stats.writes += b->writes;
    s->stats.syncs += b->syncs;
    if (b->err != 0) {
        s->stats.write_errors++;
        if (!b->dropped) {
            if (s->failing[0] == '\0')
                fprintf(stderr, "raft_store: %s; retrying every %u ms\n", b->why, RAFT_STORE_RETRY_MS);
            memcpy(s->failing, b->why, sizeof s->failing);
            if (!s->quiesced)
                uv_timer_start(&s->h->retry, retry_cb, RAFT_STORE_RETRY_MS, 0);
            return;
        }
    } else if (s->failing[0] != '\0') {
        fprintf(stderr, "raft_store: writing %s works again\n", s->dir);
        s->failing[0] = '\0';
    }
    uint64_t first = b->first, last = b->last;
    bool report = !b->dropped && b->err == 0 && first != 0;
    if (report && b->floor <= last)
        last = b->floor - 1;
    report = report && last >= first;
    s->inflight = NULL;
    batch_free(b);
    kick(s);
    if (report)
        s->cb(s->arg, first, last);
}

/* ---- the plan (loop thread) ----------------------------------------------------- */

static void segs_push(raft_store_t *s, const rs_seg_t *g)
{
    if (s->nsegs == s->segs_cap) {
        s->segs_cap = s->segs_cap ? 2 * s->segs_cap : 8;
        s->segs = ordo_xrealloc(s->segs, s->segs_cap * sizeof *s->segs);
    }
    s->segs[s->nsegs++] = *g;
}

/* Plan the record of e at index (the next one) into the log. */
static void plan_entry(raft_store_t *s, uint64_t index, const struct raft_entry *e, rs_loc_t *loc)
{
    rs_batch_t *b = pending_get(s);
    rs_seg_t *g = s->nsegs > 0 ? &s->segs[s->nsegs - 1] : NULL;
    if (g == NULL || g->bytes >= s->seg_bytes_max) {
        rs_seg_t fresh = {.seq = seg_next_seq(s), .bytes = RS_SEG_HEADER_BYTES};
        op_push(b, OP_CREATE, fresh.seq, 0, 0, 0);
        segs_push(s, &fresh);
        g = &s->segs[s->nsegs - 1];
    }
    assert(g->count == 0 || g->first + g->count == index);
    size_t at = b->data.len;
    rec_encode(&b->data, g->seq, index, e);
    size_t len = b->data.len - at;
    op_push(b, OP_WRITE, g->seq, g->bytes, at, len);
    *loc = (rs_loc_t){g->seq, g->bytes};
    if (g->count == 0)
        g->first = index;
    g->count++;
    g->bytes += len;
}

/* Plan the removal of every entry from index on (index held). */
static void plan_truncate(raft_store_t *s, uint64_t index)
{
    assert(index >= s->first && index <= store_last(s));
    rs_loc_t at = s->locs[s->head + (index - s->first)];
    rs_batch_t *b = pending_get(s);
    while (s->nsegs > 0 && s->segs[s->nsegs - 1].seq > at.seq) {
        op_push(b, OP_UNLINK, s->segs[s->nsegs - 1].seq, 0, 0, 0);
        s->nsegs--;
    }
    assert(s->nsegs > 0);
    rs_seg_t *g = &s->segs[s->nsegs - 1];
    assert(g->seq == at.seq && index >= g->first && index < g->first + g->count);
    g->count = index - g->first;
    g->bytes = at.off;
    op_push(b, OP_TRUNCATE, at.seq, at.off, 0, 0);
}

/* Plan the removal of the first k segments. */
static void plan_drop_segs(raft_store_t *s, size_t k)
{
    assert(k <= s->nsegs);
    if (k == 0)
        return;
    rs_batch_t *b = pending_get(s);
    for (size_t i = 0; i < k; i++)
        op_push(b, OP_UNLINK, s->segs[i].seq, 0, 0, 0);
    memmove(s->segs, s->segs + k, (s->nsegs - k) * sizeof *s->segs);
    s->nsegs -= k;
}

/* ---- entries in memory -------------------------------------------------------- */

/* Room for k more entries at the end. Returns 0 or -1 (no memory). */
static int ents_reserve(raft_store_t *s, size_t k)
{
    if (s->head + s->n + k <= s->cap)
        return 0;
    if (s->head > 0) {
        memmove(s->ents, s->ents + s->head, s->n * sizeof *s->ents);
        memmove(s->locs, s->locs + s->head, s->n * sizeof *s->locs);
        s->head = 0;
        if (s->n + k <= s->cap)
            return 0;
    }
    size_t cap = s->cap ? 2 * s->cap : 64;
    if (cap < s->n + k)
        cap = s->n + k;
    struct raft_entry *e = realloc(s->ents, cap * sizeof *e);
    if (e == NULL)
        return -1;
    s->ents = e;
    rs_loc_t *l = realloc(s->locs, cap * sizeof *l);
    if (l == NULL)
        return -1; /* ents grew; harmless */
    s->locs = l;
    s->cap = cap;
    return 0;
}

static void ent_free(raft_store_t *s, struct raft_entry *e)
{
    s->bytes -= e->buf.len;
    free(e->buf.base);
    e->buf.base = NULL;
}

/* Drop the entries from index on (memory only). */
static void ents_drop_from(raft_store_t *s, uint64_t index)
{
    assert(index >= s->first);
    for (uint64_t i = index; i <= store_last(s); i++)
        ent_free(s, &s->ents[s->head + (i - s->first)]);
    if (index <= store_last(s))
        s->n = (size_t)(index - s->first);
}

/* Drop the entries up to index (memory only); first becomes index + 1. */
static void ents_drop_to(raft_store_t *s, uint64_t index)
{
    if (index < s->first)
        return;
    uint64_t k = index - s->first + 1;
    if (k > s->n)
        k = s->n;
    for (uint64_t i = 0; i < k; i++)
        ent_free(s, &s->ents[s->head + i]);
    s->head += (size_t)k;
    s->n -= (size_t)k;
    s->first = index + 1;
    if (s->n == 0)
        s->head = 0;
}

/* Hold a copy of e (data copied into *data, already allocated) at the end. */
static void ents_push(raft_store_t *s, const struct raft_entry *e, void *data, rs_loc_t loc)
{
    assert(s->head + s->n < s->cap);
    struct raft_entry *d = &s->ents[s->head + s->n];
    d->term = e->term;
    d->type = e->type;
    d->buf.base = data;
    d->buf.len = e->buf.len;
    d->batch = NULL;
    s->locs[s->head + s->n] = loc;
    s->n++;
    s->bytes += e->buf.len;
}

/* ---- the calls -------------------------------------------------------------------- */

uint64_t raft_store_term(const raft_store_t *s)
{
    return s->term;
}

uint64_t raft_store_vote(const raft_store_t *s)
{
    return s->vote;
}

const raft_store_snap_t *raft_store_snapshot(const raft_store_t *s)
{
    return &s->snap;
}

uint64_t raft_store_first(const raft_store_t *s)
{
    return s->first;
}

uint64_t raft_store_last(const raft_store_t *s)
{
    return store_last(s);
}

const struct raft_entry *raft_store_entry(const raft_store_t *s, uint64_t index)
{
    if (index < s->first || index > store_last(s))
        return NULL;
    return &s->ents[s->head + (index - s->first)];
}

uint64_t raft_store_cut(const raft_store_t *s)
{
    return s->cut;
}

int raft_store_set_term_vote(raft_store_t *s, uint64_t term, uint64_t vote, char *err, size_t elen)
{
    assert(term >= s->term);
    if (meta_write(s, term, vote, &s->snap, s->first_seg, s->conf_enc, s->conf_len, err, elen) != 0)
        return -1;
    s->term = term;
    s->vote = vote;
    return 0;
}

int raft_store_append(raft_store_t *s, uint64_t index, const struct raft_entry *entries, unsigned n, char *err,
                      size_t elen)
{
    assert(index >= s->first && index > s->snap.index && index <= store_last(s) + 1);
    void **data = n > 0 ? calloc(n, sizeof *data) : NULL;
    if (n > 0 && data == NULL)
        goto fail_memory;
    for (unsigned i = 0; i < n; i++) {
        if (entries[i].buf.len > RAFT_STORE_ENTRY_BYTES_MAX) {
            snprintf(err, elen, "raft_store: an entry of %zu bytes, over %u", entries[i].buf.len,
                     RAFT_STORE_ENTRY_BYTES_MAX);
            goto fail_data;
        }
        if (entries[i].buf.len > 0 && (data[i] = malloc(entries[i].buf.len)) == NULL)
            goto fail_data_memory;
        if (entries[i].buf.len > 0)
            memcpy(data[i], entries[i].buf.base, entries[i].buf.len);
    }
    if (index <= store_last(s) && index - s->first + n > s->n) {
        if (ents_reserve(s, (size_t)(index - s->first + n) - s->n) != 0)
            goto fail_data_memory;
    } else if (index > store_last(s) && ents_reserve(s, n) != 0)
        goto fail_data_memory;

    if (index <= store_last(s)) {
        plan_truncate(s, index);
        ents_drop_from(s, index);
        if (s->inflight != NULL && s->inflight->floor > index)
            s->inflight->floor = index;
        rs_batch_t *p = s->pending; /* its writes from index on are undone by the truncation */
        if (p->first != 0 && p->last >= index)
            p->last = index - 1;
        if (p->first != 0 && p->last < p->first)
            p->first = p->last = 0;
    }
    for (unsigned i = 0; i < n; i++) {
        rs_loc_t loc;
        plan_entry(s, index + i, &entries[i], &loc);
        ents_push(s, &entries[i], data[i], loc);
    }
    if (n > 0) {
        rs_batch_t *p = s->pending;
        if (p->first == 0 || p->first > index)
            p->first = index;
        p->last = index + n - 1;
    }
    free(data);
    assert(store_last(s) == index + n - 1);
    kick_soon(s);
    return 0;
fail_data_memory:
    snprintf(err, elen, "raft_store: out of memory");
fail_data:
    for (unsigned i = 0; i < n; i++)
        free(data[i]);
    free(data);
    return -1;
fail_memory:
    snprintf(err, elen, "raft_store: out of memory");
    return -1;
}

int raft_store_set_snapshot(raft_store_t *s, const raft_store_snap_t *snap, uint64_t trailing, char *err,
                            size_t elen)
{
    assert(snap->index >= s->snap.index && snap->index <= store_last(s) && snap->index > 0);
    uint64_t cut = snap->index > trailing ? snap->index - trailing : 0;
    size_t k = 0; /* segments whose every entry goes */
    while (k < s->nsegs && s->segs[k].count > 0 && s->segs[k].first + s->segs[k].count - 1 <= cut)
        k++;
    uint64_t first_seg = k < s->nsegs ? s->segs[k].seq : seg_next_seq(s);
    void *conf;
    size_t conf_len;
    if (conf_encode(snap, &conf, &conf_len, err, elen) != 0)
        return -1;
    if (meta_write(s, s->term, s->vote, snap, first_seg, conf, conf_len, err, elen) != 0) {
        free(conf);
        return -1;
    }
    snap_take(s, snap, conf, conf_len);
    s->first_seg = first_seg;
    plan_drop_segs(s, k);
    ents_drop_to(s, cut);
    kick_soon(s);
    return 0;
}

int raft_store_install(raft_store_t *s, const raft_store_snap_t *snap, char *err, size_t elen)
{
    assert(snap->index > 0);
    uint64_t first_seg = seg_next_seq(s);
    void *conf;
    size_t conf_len;
    if (conf_encode(snap, &conf, &conf_len, err, elen) != 0)
        return -1;
    if (meta_write(s, s->term, s->vote, snap, first_seg, conf, conf_len, err, elen) != 0) {
        free(conf);
        return -1;
    }
    snap_take(s, snap, conf, conf_len);
    s->first_seg = first_seg;
    /* Nothing queued or in flight is reported, or retried. */
    batch_free(s->pending);
    s->pending = NULL;
    if (s->inflight != NULL) {
        s->inflight->dropped = true;
        if (!s->inflight->queued) { /* failed, waiting for its retry */
            uv_timer_stop(&s->h->retry);
            batch_free(s->inflight);
            s->inflight = NULL;
            s->failing[0] = '\0';
        }
    }
    plan_drop_segs(s, s->nsegs);
    ents_drop_from(s, s->first);
    s->first = snap->index + 1;
    s->head = 0;
    kick_soon(s);
    return 0;
}

void raft_store_stats(const raft_store_t *s, raft_store_stats_t *out)
{
    *out = s->stats;
    out->entries = s->n;
    out->bytes = s->bytes;
    out->disk_bytes = 0;
    for (size_t i = 0; i < s->nsegs; i++)
        out->disk_bytes += s->segs[i].bytes;
    out->segments = s->nsegs;
    out->failing = s->failing[0] != '\0' ? s->failing : NULL;
}

void raft_store_set_seam(raft_store_t *s, const raft_store_seam_t *seam)
{
    s->seam = *seam;
    s->seg_bytes_max = seam->segment_bytes != 0 ? seam->segment_bytes : RAFT_STORE_SEGMENT_BYTES;
}

/* ---- close ------------------------------------------------------------------------ */

static void handle_closed(uv_handle_t *h)
{
    rs_handles_t *hs = h->data;
    if (--hs->open == 0)
        free(hs);
}

/* Run b on this thread, once; a failure is printed. */
static void run_now(raft_store_t *s, rs_batch_t *b)
{
    b->seam = s->seam;
    w_run(s, b);
    if (b->err != 0)
        fprintf(stderr, "raft_store: closing: %s\n", b->why);
}

static void store_free(raft_store_t *s)
{
    if (s->w_fd >= 0)
        close(s->w_fd);
    if (s->meta_fd >= 0)
        close(s->meta_fd);
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    if (s->ents != NULL)
        ents_drop_from(s, s->first);
    free(s->ents);
    free(s->locs);
    free(s->segs);
    free(s->conf_enc);
    raft_configuration_close(&s->snap.conf);
    batch_free(s->pending);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    if (s->h != NULL) {
        s->h->idle.data = s->h;
        s->h->retry.data = s->h;
        uv_close((uv_handle_t *)&s->h->idle, handle_closed);
        uv_close((uv_handle_t *)&s->h->retry, handle_closed);
    }
    free(s->dir);
    free(s);
}

void raft_store_quiesce(raft_store_t *s)
{
    uv_timer_stop(&s->h->retry);
    s->quiesced = true;
}

void raft_store_close(raft_store_t *s)
{
    if (s == NULL)
        return;
    rs_batch_t *b = s->inflight;
    if (b != NULL && b->queued) {
        /* uv_queue_work() cannot take back a running request: wait for the
         * worker, then leave the request to the loop (its completion frees
         * the batch). */
        pthread_mutex_lock(&s->mu);
        while (!b->done)
            pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
        if (b->err != 0 && !b->dropped)
            run_now(s, b);
        b->s = NULL;
    } else if (b != NULL) { /* failed, waiting for its retry */
        uv_timer_stop(&s->h->retry);
        run_now(s, b);
        batch_free(b);
    }
    s->inflight = NULL;
    if (s->pending != NULL && s->pending->nops > 0)
        run_now(s, s->pending);
    store_free(s);
}

/* ---- open ------------------------------------------------------------------------- */

/* Create meta for a new store: term 0, no vote, no snapshot. */
static int meta_create(raft_store_t *s, char *err, size_t elen)
{
    char eb[128];
    unsigned char m[RS_META_HEADER_BYTES];
    raft_store_snap_t none = {0};
    size_t len = meta_encode(m, 1, 0, 0, &none, 1, NULL, 0);
    int fd = openat(s->dir_fd, RS_META_TMP, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        goto fail;
    if (write_all(&s->seam, fd, m, len, RS_META_SLOT_BYTES) != 0 || io_fsync(&s->seam, fd, false) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        goto fail;
    }
    close(fd);
    if (renameat(s->dir_fd, RS_META_TMP, s->dir_fd, RS_META_NAME) != 0 || io_fsync(&s->seam, s->dir_fd, true) != 0)
        goto fail;
    return 0;
fail:
    snprintf(err, elen, "raft_store: cannot create %s/%s: %s", s->dir, RS_META_NAME, errstr(errno, eb, sizeof eb));
    return -1;
}

/* Read meta into s (creating it if the store is new: no meta, no
 * segment). Returns 0 or -1 with err set. */
static int meta_load(raft_store_t *s, bool have_segs, char *err, size_t elen)
{
    char eb[128];
    (void)unlinkat(s->dir_fd, RS_META_TMP, 0); /* a creation that died */
    s->meta_fd = openat(s->dir_fd, RS_META_NAME, O_RDWR | O_CLOEXEC);
    if (s->meta_fd < 0 && errno == ENOENT && !have_segs) {
        if (meta_create(s, err, elen) != 0)
            return -1;
        s->meta_fd = openat(s->dir_fd, RS_META_NAME, O_RDWR | O_CLOEXEC);
    }
    if (s->meta_fd < 0) {
        snprintf(err, elen, "raft_store: cannot open %s/%s: %s", s->dir, RS_META_NAME, errstr(errno, eb, sizeof eb));
        return -1;
    }
    unsigned char *b;
    size_t size;
    if (log_file_read(s->meta_fd, &b, &size) != 0) {
        snprintf(err, elen, "raft_store: cannot read %s/%s: %s", s->dir, RS_META_NAME, errstr(errno, eb, sizeof eb));
        return -1;
    }
    rs_slot_t sl[2] = {meta_decode(b, size),
                       size > RS_META_SLOT_BYTES ? meta_decode(b + RS_META_SLOT_BYTES, size - RS_META_SLOT_BYTES)
                                                 : (rs_slot_t){0}};
    const rs_slot_t *best = sl[0].valid && (!sl[1].valid || sl[0].seq > sl[1].seq) ? &sl[0] : &sl[1];
    if (!best->valid) {
        snprintf(err, elen, "raft_store: %s/%s is damaged: neither of its slots checks (%zu bytes)", s->dir,
                 RS_META_NAME, size);
        free(b);
        return -1;
    }
    s->meta_seq = best->seq;
    s->term = best->term;
    s->vote = best->vote;
    s->first_seg = best->first_seg;
    raft_store_snap_t snap = {.index = best->snap_index, .term = best->snap_term, .conf_index = best->conf_index};
    void *conf = NULL;
    if (best->conf_len > 0) {
        conf = ordo_xmalloc(best->conf_len);
        memcpy(conf, best->conf, best->conf_len);
    }
    free(b);
    snap_take(s, &snap, conf, best->conf_len);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The segment numbers in the directory, sorted (*out malloc'd). */
static int segs_list(raft_store_t *s, uint64_t **out, size_t *n_out, char *err, size_t elen)
{
    char eb[128];
    int fd = dup(s->dir_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        snprintf(err, elen, "raft_store: cannot list %s: %s", s->dir, errstr(errno, eb, sizeof eb));
        return -1;
    }
    rewinddir(d);
    uint64_t *seqs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t seq = seg_parse_name(e->d_name);
        if (seq == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            seqs = ordo_xrealloc(seqs, cap * sizeof *seqs);
        }
        seqs[n++] = seq;
    }
    closedir(d);
    if (n > 0)
        qsort(seqs, n, sizeof *seqs, cmp_u64);
    *out = seqs;
    *n_out = n;
    return 0;
}

static int unlink_seg(raft_store_t *s, uint64_t seq, char *err, size_t elen)
{
    char eb[128], name[RS_SEG_NAME_BYTES + 1];
    seg_name(name, seq);
    if (unlinkat(s->dir_fd, name, 0) != 0 && errno != ENOENT) {
        snprintf(err, elen, "raft_store: cannot remove %s/%s: %s", s->dir, name, errstr(errno, eb, sizeof eb));
        return -1;
    }
    return 0;
}

/* Load one segment's records into s. Returns 0 (whole), 1 (cut at *cut_at:
 * 0 for a bad header), or -1 with err set. */
static int seg_load(raft_store_t *s, uint64_t seq, uint64_t *cut_at, uint64_t *size_out, char *err, size_t elen)
{
    char eb[128], name[RS_SEG_NAME_BYTES + 1];
    seg_name(name, seq);
    int fd = openat(s->dir_fd, name, O_RDONLY | O_CLOEXEC);
    unsigned char *b;
    size_t size;
    if (fd < 0 || log_file_read(fd, &b, &size) != 0) {
        snprintf(err, elen, "raft_store: cannot read %s/%s: %s", s->dir, name, errstr(errno, eb, sizeof eb));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    *size_out = size;
    if (!seg_header_good(b, size, seq)) {
        free(b);
        *cut_at = 0;
        return 1;
    }
    rs_seg_t g = {.seq = seq, .bytes = RS_SEG_HEADER_BYTES};
    int rc = 0;
    size_t off = RS_SEG_HEADER_BYTES;
    while (off < size) {
        struct raft_entry e;
        uint64_t index;
        if (!rec_decode(b, size, off, seq, &e, &index)) {
            *cut_at = off;
            rc = 1;
            break;
        }
        bool first_ever = s->n == 0;
        if ((first_ever && index > s->snap.index + 1) || (!first_ever && index != store_last(s) + 1)) {
            snprintf(err, elen, "raft_store: %s/%s at offset %zu holds entry %" PRIu64 " where %" PRIu64
                     " was expected: a gap in the log", s->dir, name, off, index,
                     first_ever ? s->snap.index + 1 : store_last(s) + 1);
            rc = -1;
            break;
        }
        void *data = e.buf.len > 0 ? ordo_xmalloc(e.buf.len) : NULL;
        if (e.buf.len > 0)
            memcpy(data, e.buf.base, e.buf.len);
        if (ents_reserve(s, 1) != 0) {
            fprintf(stderr, "raft_store: out of memory loading %s/%s\n", s->dir, name);
            abort();
        }
        if (first_ever)
            s->first = index;
        ents_push(s, &e, data, (rs_loc_t){seq, off});
        if (g.count == 0)
            g.first = index;
        g.count++;
        off += RS_REC_HEADER_BYTES + e.buf.len;
        g.bytes = off;
    }
    free(b);
    if (rc >= 0)
        segs_push(s, &g);
    return rc;
}

/* Cut the log at segment seqs[i], offset at (0: remove the file), and
 * remove every later segment. */
static int cut_log(raft_store_t *s, const uint64_t *seqs, size_t n, size_t i, uint64_t at, uint64_t size, char *err,
                   size_t elen)
{
    char eb[128], name[RS_SEG_NAME_BYTES + 1];
    s->cut += size - at;
    for (size_t j = n; j-- > i + 1;) {
        char path[4200];
        struct stat st;
        seg_name(name, seqs[j]);
        snprintf(path, sizeof path, "%s/%s", s->dir, name);
        if (stat(path, &st) == 0)
            s->cut += (uint64_t)st.st_size;
        if (unlink_seg(s, seqs[j], err, elen) != 0)
            return -1;
    }
    seg_name(name, seqs[i]);
    if (at == 0) {
        if (unlink_seg(s, seqs[i], err, elen) != 0)
            return -1;
    } else {
        int fd = openat(s->dir_fd, name, O_RDWR | O_CLOEXEC);
        int rc = fd >= 0 && ftruncate(fd, (off_t)at) == 0 && fdatasync(fd) == 0 ? 0 : -1;
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (rc != 0) {
            snprintf(err, elen, "raft_store: cannot cut %s/%s at offset %" PRIu64 ": %s", s->dir, name, at,
                     errstr(e, eb, sizeof eb));
            return -1;
        }
    }
    if (fsync(s->dir_fd) != 0) {
        snprintf(err, elen, "raft_store: fsync of %s failed: %s", s->dir, errstr(errno, eb, sizeof eb));
        return -1;
    }
    return 0;
}

/* Read the segments: delete those below first_seg, check the rest for
 * gaps, load their entries, cut a bad tail. */
static int log_load(raft_store_t *s, uint64_t *seqs, size_t n, char *err, size_t elen)
{
    size_t i0 = 0;
    bool removed = false;
    for (; i0 < n && seqs[i0] < s->first_seg; i0++) {
        if (unlink_seg(s, seqs[i0], err, elen) != 0)
            return -1;
        removed = true;
    }
    if (removed && fsync(s->dir_fd) != 0) {
        snprintf(err, elen, "raft_store: fsync of %s failed", s->dir);
        return -1;
    }
    s->first = s->snap.index + 1;
    for (size_t i = i0; i < n; i++) {
        uint64_t want = i == i0 ? s->first_seg : seqs[i - 1] + 1;
        if (seqs[i] != want) {
            char name[RS_SEG_NAME_BYTES + 1];
            seg_name(name, want);
            snprintf(err, elen, "raft_store: %s/%s is missing: a gap in the log", s->dir, name);
            return -1;
        }
    }
    for (size_t i = i0; i < n; i++) {
        uint64_t at, size;
        int rc = seg_load(s, seqs[i], &at, &size, err, elen);
        if (rc < 0)
            return -1;
        if (rc == 1)
            return cut_log(s, seqs, n, i, at, size, err, elen);
    }
    return 0;
}

/* After a load whose every entry is below the snapshot (the snapshot
 * outran the local writes), start the log afresh past it, as install
 * does: the entries on disk cannot be continued at snapshot index + 1. */
static int log_restart(raft_store_t *s, char *err, size_t elen)
{
    uint64_t first_seg = seg_next_seq(s);
    if (meta_write(s, s->term, s->vote, &s->snap, first_seg, s->conf_enc, s->conf_len, err, elen) != 0)
        return -1;
    s->first_seg = first_seg;
    for (size_t i = 0; i < s->nsegs; i++)
        if (unlink_seg(s, s->segs[i].seq, err, elen) != 0)
            return -1;
    s->nsegs = 0;
    ents_drop_from(s, s->first);
    s->first = s->snap.index + 1;
    s->head = 0;
    return fsync(s->dir_fd) == 0 ? 0 : -1;
}

int raft_store_open(const char *dir, uv_loop_t *loop, raft_store_persisted_cb cb, void *arg, raft_store_t **out,
                    char *err, size_t elen)
{
    char eb[128];
    *out = NULL;
    raft_store_t *s = ordo_xcalloc(1, sizeof *s);
    s->dir = ordo_xmalloc(strlen(dir) + 1);
    strcpy(s->dir, dir);
    s->dir_fd = s->meta_fd = s->w_fd = -1;
    s->loop = loop;
    s->cb = cb;
    s->arg = arg;
    s->seg_bytes_max = RAFT_STORE_SEGMENT_BYTES;
    s->first = 1;
    raft_configuration_init(&s->snap.conf);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    uint64_t *seqs = NULL;
    size_t nseqs = 0;

    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, elen, "raft_store: cannot create %s: %s", dir, errstr(errno, eb, sizeof eb));
        goto fail_free;
    }
    s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0) {
        snprintf(err, elen, "raft_store: cannot open %s: %s", dir, errstr(errno, eb, sizeof eb));
        goto fail_free;
    }
    if (segs_list(s, &seqs, &nseqs, err, elen) != 0)
        goto fail_free;
    if (meta_load(s, nseqs > 0, err, elen) != 0)
        goto fail_free;
    if (log_load(s, seqs, nseqs, err, elen) != 0)
        goto fail_free;
    if (s->n > 0 && store_last(s) < s->snap.index && log_restart(s, err, elen) != 0)
        goto fail_free;
    free(seqs);
    seqs = NULL;

    s->h = ordo_xcalloc(1, sizeof *s->h);
    uv_idle_init(loop, &s->h->idle);
    uv_timer_init(loop, &s->h->retry);
    s->h->open = 2;
    s->h->idle.data = s;
    s->h->retry.data = s;
    *out = s;
    return 0;
fail_free:
    free(seqs);
    store_free(s);
    return -1;
}
