/*
 * snapshot.c -- write and load snapshot files; the format is in snapshot.h.
 * Also DEBUG DIGEST's digest of the replicated state, hashed entry by entry
 * from the same encoders (see "digest" below): it covers the live keys, not
 * the retained history a file holds.
 *
 * Asserts: before an entry is written, that it is one the loader accepts
 * (known kinds, states and fates, byte strings that fit their u32 length,
 * bases below the compaction point, changes in revision order up to the
 * snapshot's revision): a snapshot this code writes always loads. After
 * reading, the loader never trusts the file -- every malformed byte is an
 * error returned, never an assert -- and asserts only its own invariants
 * (the cursor stays inside the file; a load that succeeds reaches the
 * snapshot's revision).
 */
#include "snapshot.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/siphash.h"
#include "core/coord.h"
#include "core/acl.h"
#include "core/schedule.h"
#include "wal.h"

#define SNAP_MAGIC "ORDOSNAP"
#define SNAP_HEADER_BYTES 36
#define SNAP_TRAILER_BYTES 13

static void add_u8(ordo_buf_t *b, unsigned v)
{
    char c = (char)v;
    ordo_buf_append(b, &c, 1);
}

static void add_u64(ordo_buf_t *b, uint64_t v)
{
    put_u64(ordo_buf_reserve(b, 8), v);
    b->len += 8;
}

static void add_bytes(ordo_buf_t *b, const void *p, size_t n)
{
    assert(n <= UINT32_MAX && (n == 0 || p != NULL));
    put_u32(ordo_buf_reserve(b, 4), (uint32_t)n);
    b->len += 4;
    if (n)
        ordo_buf_append(b, p, n);
}

/* One entry is encoded: count it, and in digest mode fold its bytes into
 * the digest. The digest is a sum of per-entry hashes, so it does not
 * depend on the order tables are walked in; an entry of a queue ('M', 'U',
 * 'I', 'R') is hashed with its queue's entry, so moving one to another
 * queue changes it. */
static void entry_end(snap_writer_t *w)
{
    w->entries++;
    if (!w->digest_on)
        return;
    static const uint8_t key[ORDO_SIPHASH_KEY_LEN] = "ordo-state-hash";
    assert(w->entry_at < w->buf.len);
    const char *e = w->buf.data + w->entry_at;
    uint64_t h = ordo_siphash(key, e, w->buf.len - w->entry_at);
    if (e[0] == 'Q')
        w->digest_queue = h;
    else if (e[0] == 'M' || e[0] == 'U' || e[0] == 'I' || e[0] == 'R')
        h = (h ^ w->digest_queue) * 0x9E3779B97F4A7C15ull;
    w->digest += h;
    w->entry_at = w->buf.len;
}

/* Write the whole buffer, folding it into the running checksum. In memory
 * mode (no file) the bytes stay in w->buf. */
static int flush_buf(snap_writer_t *w, char *err, size_t elen)
{
    assert(!w->digest_on); /* the digest drops its entries itself (digest_drop()) */
    if (w->mem)
        return 0;
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

static void encode_coord(void *arg, const coord_item_t *it)
{
    snap_writer_t *w = arg;
    assert(it->kind == COORD_ITEM_LEASE || it->kind == COORD_ITEM_KEY || it->kind == COORD_ITEM_LOCK ||
           it->kind == COORD_ITEM_ELECT);
    add_u8(&w->buf, 'C');
    add_u8(&w->buf, (unsigned)it->kind);
    add_u64(&w->buf, it->id);
    add_u64(&w->buf, it->lease);
    add_u64(&w->buf, it->ttl_ms);
    add_u64(&w->buf, it->deadline_ms);
    add_bytes(&w->buf, it->name, it->name ? it->nlen : 0);
    add_bytes(&w->buf, it->value, it->value ? it->vlen : 0);
    add_u8(&w->buf, it->handover == NULL ? 0 : it->handover_lapsed ? 2 : 1); /* 2: lapsed, not handed over */
    add_bytes(&w->buf, it->handover, it->handover ? it->hlen : 0);
    entry_end(w);
}

static void encode_qmsg(void *arg, const queue_snap_msg_t *m)
{
    snap_writer_t *w = arg;
    assert(m->state >= QUEUE_MSG_WAITING && m->state <= QUEUE_MSG_DELAYED);
    add_u8(&w->buf, 'M');
    add_u8(&w->buf, (unsigned)m->state);
    add_u64(&w->buf, m->id);
    add_bytes(&w->buf, m->key, m->klen);
    add_bytes(&w->buf, m->payload, m->plen);
    add_u64(&w->buf, m->attempt);
    add_u8(&w->buf, m->parked);
    add_u64(&w->buf, m->token);
    add_u64(&w->buf, m->since_ms);
    add_u64(&w->buf, m->deadline_ms);
    entry_end(w);
}

static void encode_qdedup(void *arg, const char *dedup_id, size_t dlen, uint64_t msg_id, uint64_t end_ms)
{
    snap_writer_t *w = arg;
    add_u8(&w->buf, 'U');
    add_bytes(&w->buf, dedup_id, dlen);
    add_u64(&w->buf, msg_id);
    add_u64(&w->buf, end_ms);
    entry_end(w);
}

static void encode_qidem(void *arg, const char *key, size_t klen, const char *idem, size_t ilen,
                         const queue_idem_t *e)
{
    snap_writer_t *w = arg;
    add_u8(&w->buf, 'I');
    add_bytes(&w->buf, key, klen);
    add_bytes(&w->buf, idem, ilen);
    add_u64(&w->buf, e->hash);
    add_u64(&w->buf, e->msg_id);
    add_u64(&w->buf, e->end_ms);
    entry_end(w);
}

static void encode_qresult(void *arg, uint64_t id, const queue_result_t *r)
{
    snap_writer_t *w = arg;
    assert(r->fate == QUEUE_FATE_DONE || r->fate == QUEUE_FATE_DEADLETTER || r->fate == QUEUE_FATE_CANCELLED);
    add_u8(&w->buf, 'R');
    add_u64(&w->buf, id);
    add_u8(&w->buf, (unsigned)r->fate);
    add_bytes(&w->buf, r->result, r->result ? r->rlen : 0);
    add_u64(&w->buf, r->expire_ms);
    add_u64(&w->buf, r->dl_id);
    entry_end(w);
}

static void encode_qpause(void *arg, const char *key, size_t klen, uint64_t until_ms)
{
    snap_writer_t *w = arg;
    add_u8(&w->buf, 'Z');
    add_u8(&w->buf, key != NULL);
    add_u64(&w->buf, until_ms);
    add_bytes(&w->buf, key, key ? klen : 0);
    entry_end(w);
}

static void encode_qbucket(void *arg, const char *key, size_t klen, const queue_bucket_t *b)
{
    snap_writer_t *w = arg;
    add_u8(&w->buf, 'T');
    add_u8(&w->buf, (key != NULL) | (b->throttled ? 2u : 0u));
    add_u64(&w->buf, b->level);
    add_u64(&w->buf, b->last_ms);
    add_u64(&w->buf, b->release_ms);
    add_bytes(&w->buf, key, key ? klen : 0);
    entry_end(w);
}

static void encode_qready(void *arg, const char *key, size_t klen)
{
    snap_writer_t *w = arg;
    add_bytes(&w->buf, key, klen);
}

static void encode_queue(void *arg, queue_t *q)
{
    snap_writer_t *w = arg;
    size_t nlen;
    const char *name = queue_name(q, &nlen);
    queue_config_t cfg;
    queue_config(q, &cfg);
    char blob[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, blob);
    assert(nlen > 0);
    add_u8(&w->buf, 'Q');
    add_bytes(&w->buf, name, nlen);
    add_bytes(&w->buf, blob, sizeof blob);
    add_bytes(&w->buf, cfg.deadletter, cfg.deadletter ? cfg.dl_len : 0);
    entry_end(w);
    queue_foreach_msg(q, encode_qmsg, w);
    queue_foreach_dedup(q, encode_qdedup, w);
    queue_foreach_idem(q, encode_qidem, w);
    queue_foreach_result(q, encode_qresult, w);
    queue_foreach_pause(q, encode_qpause, w);
    queue_foreach_bucket(q, encode_qbucket, w);
    if (cfg.fairness == QUEUE_FAIR_ROUNDROBIN) { /* the turn order, after what decides readiness */
        queue_info_t in;
        queue_info(q, &in);
        add_u8(&w->buf, 'O');
        add_u64(&w->buf, in.ready_keys);
        queue_foreach_ready(q, encode_qready, w);
        entry_end(w);
    }
}

static void encode_sched(void *arg, const sched_view_t *v)
{
    snap_writer_t *w = arg;
    add_u8(&w->buf, 'S');
    add_bytes(&w->buf, v->name, v->nlen);
    add_bytes(&w->buf, v->queue, v->qlen);
    add_bytes(&w->buf, v->key, v->klen);
    add_bytes(&w->buf, v->payload, v->plen);
    add_u8(&w->buf, v->spec.missed);
    add_u64(&w->buf, v->spec.every_ms);
    add_u64(&w->buf, v->spec.start_ms);
    add_bytes(&w->buf, v->spec.cron, v->spec.cron ? v->spec.cron_len : 0);
    add_u64(&w->buf, v->next_ms);
    add_u64(&w->buf, v->pushed);
    add_u64(&w->buf, v->skipped);
    entry_end(w);
}

static void encode_users(snap_writer_t *w, const acl_t *acl)
{
    ordo_buf_t rules = {0};
    for (size_t i = 0; i < acl_count(acl); i++) {
        const acl_user_t *u = acl_user_at(acl, i);
        rules.len = 0;
        acl_user_describe(u, &rules);
        add_u8(&w->buf, 'A');
        add_bytes(&w->buf, u->name, u->nlen);
        add_bytes(&w->buf, rules.data, rules.len);
        entry_end(w);
    }
    ordo_buf_free(&rules);
}

/* The header and the coordination, queue and user state, captured at once. */
static void begin_common(snap_writer_t *w, const core_t *core, uint64_t now_ms)
{
    char *p = ordo_buf_reserve(&w->buf, SNAP_HEADER_BYTES);
    memcpy(p, SNAP_MAGIC, 8);
    put_u32(p + 8, SNAP_FORMAT);
    put_u64(p + 12, w->rev);
    put_u64(p + 20, w->point);
    put_u64(p + 28, now_ms);
    w->buf.len += SNAP_HEADER_BYTES;
    w->entry_at = w->buf.len; /* the digest leaves the header (its time) out */
    coord_snapshot(core_coord(core), encode_coord, w);
    queue_set_foreach(core_queues(core), encode_queue, w);
    encode_users(w, core_acl(core));
    sched_foreach(core_scheds(core), encode_sched, w);
}

static void init_writer(snap_writer_t *w, const core_t *core)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->rev = core_rev(core);
    w->point = kv_oldest_rev(core_kv(core));
    w->log_after = w->point > 0 ? w->point - 1 : 0;
}

int snap_writer_begin(snap_writer_t *w, const char *dir, const core_t *core, uint64_t now_ms, char *err,
                      size_t elen)
{
    init_writer(w, core);
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s/%s", dir, SNAP_TMP_FILE);
    snprintf(w->path, sizeof w->path, "%s/%s", dir, SNAP_FILE);
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        snprintf(err, elen, "create %s: %s", w->tmp_path, strerror(errno));
        return -1;
    }
    begin_common(w, core, now_ms);
    return 0;
}

/* The whole snapshot in one pass, into memory. */
static int encode_all(snap_writer_t *w, const core_t *core, uint64_t now_ms)
{
    init_writer(w, core);
    w->mem = true;
    begin_common(w, core, now_ms);
    int rc;
    char err[256];
    while ((rc = snap_writer_step(w, core, SIZE_MAX, err, sizeof err)) == 0)
        ;
    return rc;
}

int snap_encode_mem(const core_t *core, uint64_t now_ms, ordo_buf_t *out)
{
    snap_writer_t w;
    int rc = encode_all(&w, core, now_ms);
    assert(rc == 1); /* nothing to fail in memory: the history is whole on the loop thread */
    *out = w.buf;
    w.buf = (ordo_buf_t)ORDO_BUF_INIT;
    snap_writer_abort(&w);
    return rc == 1 ? 0 : -1;
}

static void remember_key(snap_writer_t *w, const char *key, size_t klen)
{
    w->after.len = 0;
    ordo_buf_append(&w->after, key, klen);
    w->have_after = true;
}

/* One whole version as an entry: 'B' (a base) in a file, 'K' (a live key)
 * in the digest. */
static void encode_version(snap_writer_t *w, unsigned tag, const kv_version_t *v)
{
    add_u8(&w->buf, tag);
    add_bytes(&w->buf, v->key, v->klen);
    add_bytes(&w->buf, v->value, v->vlen);
    add_u64(&w->buf, v->create_rev);
    add_u64(&w->buf, v->mod_rev);
    add_u64(&w->buf, v->version);
    add_u64(&w->buf, v->lease);
    entry_end(w);
}

static void encode_base(void *arg, const char *key, size_t klen, const kv_version_t *v)
{
    snap_writer_t *w = arg;
    if (v != NULL) {
        assert(v->mod_rev < w->point); /* the loader refuses a base at or above the point */
        encode_version(w, 'B', v);
    }
    remember_key(w, key, klen);
}

/* Changes after log_after up to w->rev, at most max of them. Returns 1 when
 * the log is exhausted up to w->rev, 0 if more remain, -1 if compacted. */
static int encode_changes(snap_writer_t *w, const core_t *core, size_t max)
{
    kv_cursor_t cur;
    kv_change_t ch;
    if (kv_log_seek(core_kv(core), w->log_after, &cur) != KV_OK)
        return -1;
    for (size_t n = 0; n < max; n++) {
        int rc = kv_log_next(core_kv(core), &cur, &ch);
        if (rc < 0)
            return -1;
        if (rc == 0 || ch.cur.mod_rev > w->rev)
            return 1;
        const kv_version_t *v = &ch.cur;
        assert(v->mod_rev > w->log_after && v->mod_rev <= w->rev); /* in revision order, up to rev */
        add_u8(&w->buf, v->deleted ? 'D' : 'P');
        add_bytes(&w->buf, v->key, v->klen);
        add_bytes(&w->buf, v->value, v->deleted ? 0 : v->vlen);
        add_u64(&w->buf, v->lease);
        add_u64(&w->buf, v->mod_rev);
        entry_end(w);
        w->log_after = v->mod_rev;
    }
    return 0;
}

static void encode_expiry(void *arg, const char *key, size_t klen, uint64_t deadline_ms)
{
    snap_writer_t *w = arg;
    add_u8(&w->buf, 'X');
    add_bytes(&w->buf, key, klen);
    add_u64(&w->buf, deadline_ms);
    entry_end(w);
}

typedef struct dl_ctx_s {
    snap_writer_t *w;
    const core_t *core;
} dl_ctx_t;

static int encode_deadline(void *arg, const kv_version_t *v)
{
    dl_ctx_t *x = arg;
    uint64_t d = core_expiry_of(x->core, v->key, v->klen);
    if (d != 0)
        encode_expiry(x->w, v->key, v->klen, d);
    remember_key(x->w, v->key, v->klen);
    return 0;
}

static int write_trailer(snap_writer_t *w, char *err, size_t elen)
{
    assert(w->phase == 3 && !w->finished);
    add_u8(&w->buf, 'E');
    add_u64(&w->buf, w->entries);
    if (w->mem) {
        char crc[4];
        put_u32(crc, ordo_crc32c(0, w->buf.data, w->buf.len));
        ordo_buf_append(&w->buf, crc, 4);
        w->finished = true;
        return 1;
    }
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

int snap_writer_step(snap_writer_t *w, const core_t *core, size_t max_keys, char *err, size_t elen)
{
    if (w->finished)
        return 1;
    ordo_buf_t after = ORDO_BUF_INIT; /* the callbacks overwrite w->after */
    if (w->have_after)
        ordo_buf_append(&after, w->after.data, w->after.len);
    long n;
    int rc;
    switch (w->phase) {
    case 0:
        n = kv_base_step(core_kv(core), after.data, after.len, w->have_after, max_keys, encode_base, w);
        if ((size_t)n < max_keys) {
            w->phase = 1;
            w->have_after = false;
        }
        break;
    case 1:
        rc = encode_changes(w, core, max_keys);
        if (rc < 0) {
            ordo_buf_free(&after);
            snprintf(err, elen, "history after revision %llu was compacted while the snapshot was written",
                     (unsigned long long)w->log_after);
            return -1;
        }
        if (rc == 1)
            w->phase = 2;
        break;
    default: {
        if (w->mem) {
            /* All at once (nothing changes between slices): walk the
             * deadlines, not every key. */
            core_foreach_expiry(core, encode_expiry, w);
            w->phase = 3;
            break;
        }
        dl_ctx_t x = {w, core};
        n = kv_range(core_kv(core), "", 0, w->have_after ? after.data : NULL, after.len, 0, max_keys,
                     encode_deadline, &x);
        if (n >= 0 && (size_t)n < max_keys)
            w->phase = 3;
        break;
    }
    }
    ordo_buf_free(&after);
    if (w->phase == 3)
        return write_trailer(w, err, elen);
    return flush_buf(w, err, elen) < 0 ? -1 : 0;
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
    if (w->fd >= 0)
        close(w->fd);
    /* Whatever failed (a write, the sync, the rename), no half-written
     * temporary file stays behind; after a commit it was renamed away. */
    if (w->tmp_path[0] != '\0')
        unlink(w->tmp_path);
    w->fd = -1;
    ordo_buf_free(&w->buf);
    ordo_buf_free(&w->after);
}

/* ---- digest ----------------------------------------------------------------------
 * DEBUG DIGEST hashes the state that raft replicates deterministically:
 * what begin_common() encodes (coordination, queues, users, schedules),
 * every live key's current version ('K', an entry of the digest only, never
 * written to a file), the key deadlines and the revision. It leaves out the
 * retained history (bases and changes) and tombstones: which of them a
 * member still holds follows its own automatic compaction (its
 * history-revs, its snapshot's pin, the snapshot it installed), so members
 * that applied the same entries hold different windows. snap_digest_history()
 * adds the changes after a revision, for a caller that picks one every
 * member still holds. */

/* Changes hashed per pass of the history digest: the buffer holds one
 * pass's entries before they are dropped. */
#define DIGEST_CHANGES_STEP 1024

/* Digest mode keeps nothing: the entries hashed so far are dropped. */
static void digest_drop(snap_writer_t *w)
{
    assert(w->mem && w->digest_on && w->entry_at == w->buf.len);
    w->buf.len = 0;
    w->entry_at = 0;
}

static int digest_live(void *arg, const kv_version_t *v)
{
    snap_writer_t *w = arg;
    assert(!v->deleted && v->version > 0 && v->create_rev <= v->mod_rev && v->mod_rev <= w->rev);
    encode_version(w, 'K', v);
    digest_drop(w);
    return 0;
}

static void digest_expiry(void *arg, const char *key, size_t klen, uint64_t deadline_ms)
{
    snap_writer_t *w = arg;
    encode_expiry(w, key, klen, deadline_ms);
    digest_drop(w);
}

/* The digest of everything but the history, into w (left open: the
 * history digest adds to it). */
static void digest_state(snap_writer_t *w, const core_t *core)
{
    init_writer(w, core);
    w->mem = true;
    w->digest_on = true;
    begin_common(w, core, 0);
    digest_drop(w);
    long n = kv_range(core_kv(core), "", 0, NULL, 0, 0, 0, digest_live, w);
    assert(n >= 0 && (size_t)n == kv_count(core_kv(core))); /* the current versions are never compacted */
    (void)n;
    core_foreach_expiry(core, digest_expiry, w);
}

uint64_t snap_digest(const core_t *core)
{
    snap_writer_t w;
    digest_state(&w, core);
    uint64_t d = w.digest ^ core_rev(core);
    snap_writer_abort(&w);
    return d;
}

int snap_digest_history(const core_t *core, uint64_t from_rev, uint64_t *digest_out)
{
    snap_writer_t w;
    digest_state(&w, core);
    w.log_after = from_rev;
    int rc;
    while ((rc = encode_changes(&w, core, DIGEST_CHANGES_STEP)) == 0)
        digest_drop(&w);
    if (rc == 1)
        *digest_out = w.digest ^ core_rev(core);
    snap_writer_abort(&w);
    return rc == 1 ? 0 : -1;
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

/* A cursor over the file's bytes for the loader: every read is checked
 * against the end, so a damaged file is reported, never overrun. */
typedef struct rd_s {
    const unsigned char *p, *end;
    bool bad;
} rd_t;

static uint64_t rd_u64(rd_t *r)
{
    if (r->bad || r->end - r->p < 8) {
        r->bad = true;
        return 0;
    }
    uint64_t v = get_u64(r->p);
    r->p += 8;
    return v;
}

static unsigned rd_u8(rd_t *r)
{
    if (r->bad || r->end - r->p < 1) {
        r->bad = true;
        return 0;
    }
    return *r->p++;
}

static const char *rd_bytes(rd_t *r, size_t *len)
{
    if (r->bad || r->end - r->p < 4) {
        r->bad = true;
        return NULL;
    }
    uint32_t n = get_u32(r->p);
    if ((size_t)(r->end - r->p - 4) < (size_t)n) {
        r->bad = true;
        return NULL;
    }
    const char *b = (const char *)r->p + 4;
    r->p += 4 + n;
    *len = n;
    return b;
}

/* Queue entries: 'Q' opens a queue, the 'M', 'U', 'I', 'R', 'Z', 'T', 'O' after it fill it. */
static int load_queue_entry(core_t *core, rd_t *r, unsigned tag, queue_t **cur)
{
    size_t nlen = 0, clen = 0, dlen = 0;
    if (tag == 'Q') {
        const char *name = rd_bytes(r, &nlen), *blob = rd_bytes(r, &clen), *dl = rd_bytes(r, &dlen);
        queue_config_t cfg;
        queue_config_defaults(&cfg);
        if (r->bad || nlen == 0 || core_qconfig_decode(blob, clen, &cfg) != 0 ||
            queue_get(core_queues(core), name, nlen) != NULL)
            return -1;
        cfg.deadletter = dlen ? dl : NULL;
        cfg.dl_len = dlen;
        *cur = queue_open(core_queues_load(core), name, nlen);
        return queue_configure(*cur, &cfg) == QUEUE_OK ? 0 : -1;
    }
    if (*cur == NULL)
        return -1;
    if (tag == 'M') {
        queue_snap_msg_t m = {0};
        m.state = (int)rd_u8(r);
        m.id = rd_u64(r);
        m.key = rd_bytes(r, &m.klen);
        m.payload = rd_bytes(r, &m.plen);
        uint64_t attempt = rd_u64(r);
        m.attempt = (uint32_t)attempt;
        m.parked = rd_u8(r) != 0;
        m.token = rd_u64(r);
        m.since_ms = rd_u64(r);
        m.deadline_ms = rd_u64(r);
        if (r->bad || m.state < QUEUE_MSG_WAITING || m.state > QUEUE_MSG_DELAYED || attempt > UINT32_MAX)
            return -1;
        return queue_load_msg(*cur, &m);
    }
    if (tag == 'U') {
        const char *id = rd_bytes(r, &dlen);
        uint64_t msg_id = rd_u64(r), end_ms = rd_u64(r);
        if (r->bad)
            return -1;
        queue_load_dedup(*cur, id, dlen, msg_id, end_ms);
        return 0;
    }
    if (tag == 'I') {
        size_t klen = 0, ilen = 0;
        const char *key = rd_bytes(r, &klen), *idem = rd_bytes(r, &ilen);
        queue_idem_t e = {0};
        e.hash = rd_u64(r);
        e.msg_id = rd_u64(r);
        e.end_ms = rd_u64(r);
        if (r->bad || ilen == 0 || klen > UINT32_MAX - 4 - ilen)
            return -1;
        queue_load_idem(*cur, key, klen, idem, ilen, &e);
        return 0;
    }
    if (tag == 'Z') {
        size_t klen = 0;
        unsigned is_key = rd_u8(r);
        uint64_t until_ms = rd_u64(r);
        const char *key = rd_bytes(r, &klen);
        if (r->bad || is_key > 1 || (!is_key && klen != 0))
            return -1;
        queue_load_pause(*cur, is_key ? (key ? key : "") : NULL, klen, until_ms);
        return 0;
    }
    if (tag == 'O') {
        uint64_t n = rd_u64(r);
        if (r->bad || n > (uint64_t)(r->end - r->p) / 4)
            return -1;
        const char **keys = ordo_xmalloc((n ? n : 1) * sizeof *keys);
        size_t *lens = ordo_xmalloc((n ? n : 1) * sizeof *lens);
        for (uint64_t i = 0; i < n; i++) {
            keys[i] = rd_bytes(r, &lens[i]);
            if (keys[i] == NULL)
                keys[i] = "";
        }
        int rc = r->bad ? -1 : queue_load_ready(*cur, keys, lens, (size_t)n);
        free(keys);
        free(lens);
        return rc;
    }
    if (tag == 'T') {
        size_t klen = 0;
        unsigned flags = rd_u8(r);
        queue_bucket_t b = {0};
        b.level = rd_u64(r);
        b.last_ms = rd_u64(r);
        b.release_ms = rd_u64(r);
        b.throttled = (flags & 2) != 0;
        const char *key = rd_bytes(r, &klen);
        if (r->bad || flags > 3 || (!(flags & 1) && (klen != 0 || b.throttled)))
            return -1;
        queue_load_bucket(*cur, (flags & 1) ? (key ? key : "") : NULL, klen, &b);
        return 0;
    }
    queue_result_t res = {0};
    uint64_t id = rd_u64(r);
    res.fate = (int)rd_u8(r);
    res.result = rd_bytes(r, &res.rlen);
    res.expire_ms = rd_u64(r);
    res.dl_id = rd_u64(r);
    if (r->bad || (res.fate != QUEUE_FATE_DONE && res.fate != QUEUE_FATE_DEADLETTER && res.fate != QUEUE_FATE_CANCELLED))
        return -1;
    queue_load_result(*cur, id, &res);
    return 0;
}

/* A user: made from its description as REC_ACL_SETUSER's apply does. */
static int load_user(core_t *core, rd_t *r)
{
    size_t nlen = 0, rlen = 0;
    const char *name = rd_bytes(r, &nlen), *rules = rd_bytes(r, &rlen), *err;
    if (r->bad || !acl_name_ok(name, nlen) || acl_find(core_acl(core), name, nlen) != NULL)
        return -1;
    acl_user_t *u = acl_user_new(name, nlen);
    if (acl_user_rules(u, rules, rlen, &err) != 0) {
        acl_user_free(u);
        return -1;
    }
    acl_set(core_acl_load(core), u);
    return 0;
}

static bool is_queue_tag(unsigned tag)
{
    return tag == 'Q' || tag == 'M' || tag == 'U' || tag == 'I' || tag == 'R' || tag == 'Z' || tag == 'T' ||
           tag == 'O';
}

/* Load one entry of kind tag; returns 0, or -1 if it is malformed or
 * contradicts what was loaded. */
static int load_entry(core_t *core, rd_t *r, unsigned tag, bool *bases_done, uint64_t point, queue_t **cur_q)
{
    size_t klen = 0, vlen = 0, hlen = 0;
    const char *key, *val, *ho;
    if (is_queue_tag(tag))
        return load_queue_entry(core, r, tag, cur_q);
    if (tag == 'A')
        return load_user(core, r);
    if (tag != 'B' && tag != 'C' && tag != 'S' && !*bases_done) {
        if (core_load_bases_done(core, point) != 0)
            return -1;
        *bases_done = true;
    }
    switch (tag) {
    case 'C': {
        coord_item_t it = {0};
        it.kind = (int)rd_u8(r);
        it.id = rd_u64(r);
        it.lease = rd_u64(r);
        it.ttl_ms = rd_u64(r);
        it.deadline_ms = rd_u64(r);
        it.name = rd_bytes(r, &it.nlen);
        it.value = rd_bytes(r, &it.vlen);
        unsigned has_ho = rd_u8(r);
        ho = rd_bytes(r, &hlen);
        if (has_ho > 2)
            return -1;
        it.handover = has_ho ? ho : NULL;
        it.handover_lapsed = has_ho == 2;
        it.hlen = hlen;
        return r->bad ? -1 : core_load_coord(core, &it);
    }
    case 'S': {
        sched_view_t v = {0};
        v.name = rd_bytes(r, &v.nlen);
        v.queue = rd_bytes(r, &v.qlen);
        v.key = rd_bytes(r, &v.klen);
        v.payload = rd_bytes(r, &v.plen);
        v.spec.missed = rd_u8(r);
        v.spec.every_ms = rd_u64(r);
        v.spec.start_ms = rd_u64(r);
        v.spec.cron = rd_bytes(r, &v.spec.cron_len);
        if (v.spec.cron_len == 0)
            v.spec.cron = NULL;
        v.next_ms = rd_u64(r);
        v.pushed = rd_u64(r);
        v.skipped = rd_u64(r);
        if (r->bad || v.qlen == 0 || sched_spec_valid(&v.spec) != NULL ||
            sched_get(core_scheds(core), v.name, v.nlen, &(sched_view_t){0}))
            return -1;
        sched_load(core_scheds_load(core), &v);
        return 0;
    }
    case 'B': {
        key = rd_bytes(r, &klen);
        val = rd_bytes(r, &vlen);
        uint64_t cr = rd_u64(r), mr = rd_u64(r), ver = rd_u64(r), lease = rd_u64(r);
        return r->bad || mr >= point ? -1 : core_load_base(core, key, klen, val, vlen, cr, mr, ver, lease);
    }
    case 'P':
    case 'D': {
        key = rd_bytes(r, &klen);
        val = rd_bytes(r, &vlen);
        uint64_t lease = rd_u64(r), rev = rd_u64(r);
        return r->bad ? -1 : core_load_change(core, key, klen, val, vlen, lease, rev, tag == 'D');
    }
    case 'X': {
        key = rd_bytes(r, &klen);
        uint64_t d = rd_u64(r);
        if (r->bad)
            return -1;
        core_load_deadline(core, key, klen, d);
        return 0;
    }
    default:
        return -1;
    }
}

int snap_load_mem(core_t *core, const void *data, size_t len, const char *what, uint64_t *rev_out,
                  uint64_t *entries_out, char *err, size_t elen)
{
    const unsigned char *p = data;
    *rev_out = 0;
    *entries_out = 0;
    if (len < SNAP_HEADER_BYTES + SNAP_TRAILER_BYTES || memcmp(p, SNAP_MAGIC, 8) != 0 ||
        (get_u32(p + 8) != SNAP_FORMAT && get_u32(p + 8) != SNAP_FORMAT_V4 && get_u32(p + 8) != SNAP_FORMAT_V3 &&
         get_u32(p + 8) != SNAP_FORMAT_V2)) {
        snprintf(err, elen, "%s: not an ordo snapshot of format %d (bad header)", what, SNAP_FORMAT);
        return -1;
    }
    if (ordo_crc32c(0, p, len - 4) != get_u32(p + len - 4)) {
        snprintf(err, elen, "%s: checksum mismatch: the snapshot is damaged", what);
        return -1;
    }
    uint64_t rev = get_u64(p + 12), point = get_u64(p + 20), n = 0;
    rd_t r = {p + SNAP_HEADER_BYTES, p + len - 4, false};
    bool bases_done = false;
    queue_t *cur_q = NULL;
    for (;;) {
        const unsigned char *at = r.p;
        unsigned tag = rd_u8(&r);
        if (r.bad || tag == 'E')
            break;
        int bad = load_entry(core, &r, tag, &bases_done, point, &cur_q);
        assert(r.p <= r.end);
        if (bad != 0) {
            snprintf(err, elen, "%s: malformed or inconsistent entry at offset %zu", what, (size_t)(at - p));
            return -1;
        }
        n++;
    }
    if (r.bad || rd_u64(&r) != n || r.p != r.end) {
        snprintf(err, elen, "%s: malformed trailer", what);
        return -1;
    }
    if ((!bases_done && core_load_bases_done(core, point) != 0) || core_load_done(core, rev) != 0) {
        snprintf(err, elen, "%s: cannot load at revision %llu", what, (unsigned long long)rev);
        return -1;
    }
    assert(core_rev(core) == rev);
    *rev_out = rev;
    *entries_out = n;
    return 0;
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
    int rc = snap_load_mem(core, data, len, path, rev_out, entries_out, err, elen);
    free(data);
    return rc;
}
