/*
 * raft_log.c -- the log seam over C raft; the design is in raft_log.h.
 *
 * Owns: the raft instance, its libuv I/O and transport, the data
 * directory's lock, the entry being built (appended since the last flush),
 * the FIFO of this leader's entries in flight, the positions (proposed,
 * committed), and the role last seen. Loop thread only: C raft runs on
 * ordod's loop, and hooks.wake is called from the loop too.
 *
 * Invariants:
 *   - positions are handed out in proposal order and committed in that
 *     order (raft applies entries and barriers in log order), so
 *     committed_pos only grows, and committed_pos <= proposed_pos;
 *   - the FIFO holds exactly this member's entries proposed and not yet
 *     delivered by raft, oldest first; it is empty unless the member led
 *     in this process's life;
 *   - a follower applies only entries that are not its own (the FIFO is
 *     empty, or the entry is the FIFO's head and is skipped);
 *   - once failed (fail(): a proposal raft could not store, a committed
 *     entry that does not apply) nothing more is applied and the member
 *     never serves: leading stays false.
 */
#include "raft_log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/siphash.h"
#include "raft_transport.h"

#define ENTRY_MAGIC "ORDB"
#define ENTRY_HEADER_BYTES 8u

typedef struct inflight_s {
    log_pos_t pos;
    uint64_t last_rev;        /* the revision its last record reaches */
    uint64_t hash;
    size_t len;
} inflight_t;

typedef struct raft_log_s raft_log_t;

typedef struct req_s {
    union {
        struct raft_apply apply;
        struct raft_barrier barrier;
        struct raft_change change;
        struct raft_transfer transfer;
    } u;
    raft_log_t *rl;
    log_pos_t pos;
    bool lead_barrier;        /* the barrier a new leader waits for */
    uint64_t promote_id;      /* CLUSTER ADD: after the add, make it a voter */
} req_t;

struct raft_log_s {
    log_t base;
    raft_log_options_t opt;
    raft_log_fsm_t fsm_hooks;
    struct raft raft;
    struct raft_io io;
    struct raft_uv_transport transport;
    struct raft_fsm fsm;
    bool io_inited, transport_inited, raft_inited, started, stopping;
    int dir_fd;                   /* flocked while the log lives */
    char raftdir[1100];
    /* the entry being built: ENTRY header, then batches */
    ordo_buf_t building;
    uint32_t building_records;
    uint64_t building_last_rev;
    uint64_t committed_rev;       /* the revision the committed entries reach */
    /* in flight (leader) */
    inflight_t *fifo;
    size_t fhead, fcount, fcap;
    uint64_t inflight_bytes;
    log_pos_t proposed_pos, committed_pos; /* the last proposal's, the last committed one's */
    bool need_barrier;
    bool leading;
    bool was_leader;              /* raft_state() was LEADER at the last look */
    bool diverged;
    bool snap_wanted;
    bool change_running;
    bool transferring;            /* a CLUSTER TRANSFER runs: raft takes no entry, this member serves nothing */
    bool transfer_pending;        /* ... to start at the turn's flush (rl_flush), for transfer_target */
    uint64_t transfer_target;
    int transfer_attempts;        /* raft_transfer() calls given up so far (TRANSFER_ATTEMPTS) */
    uv_check_t watch;
    char failed[256];             /* non-empty: the log failed for good (fail()) */
    bool handing_off;             /* failed, and a transfer of leadership away runs */
    uint64_t entries_proposed, barriers_proposed, snapshots_taken, snapshots_restored;
    uint64_t records_written, bytes_proposed;
};

static const uint8_t hash_key[ORDO_SIPHASH_KEY_LEN] = "ordo-raft-entry";

static const log_ops_t raft_ops;

/* The raft log behind a log_t. raft_log.h's calls take a log_t, which
 * could be another log: each checks it is this one before the cast. */
static raft_log_t *rl_of(log_t *l)
{
    assert(l != NULL && l->ops == &raft_ops);
    return (raft_log_t *)l;
}

static const raft_log_t *rl_of_c(const log_t *l)
{
    assert(l != NULL && l->ops == &raft_ops);
    return (const raft_log_t *)l;
}

/* ---- members ---------------------------------------------------------------- */

static int split_hostport(const char *s, size_t n, char *host, size_t hlen, long *port)
{
    const char *colon = memrchr(s, ':', n);
    if (colon == NULL || colon == s || (size_t)(colon - s) >= hlen)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char digits[8];
    size_t dl = n - (size_t)(colon + 1 - s);
    if (dl == 0 || dl >= sizeof digits)
        return -1;
    memcpy(digits, colon + 1, dl);
    digits[dl] = '\0';
    if (strspn(digits, "0123456789") != dl)
        return -1;
    *port = strtol(digits, NULL, 10);
    return *port >= 1 && *port <= 65535 ? 0 : -1;
}

static int member_of(const char *client, size_t n, uint16_t offset, raft_log_member_t *m, char *err, size_t elen)
{
    char host[200];
    long port;
    if (split_hostport(client, n, host, sizeof host, &port) != 0) {
        snprintf(err, elen, "'%.*s' is not HOST:PORT", (int)n, client);
        return -1;
    }
    if (port + offset > 65535) {
        snprintf(err, elen, "port %ld plus cluster-port-offset %u is past 65535", port, (unsigned)offset);
        return -1;
    }
    snprintf(m->client, sizeof m->client, "%s:%ld", host, port);
    snprintf(m->raft, sizeof m->raft, "%s:%ld", host, port + offset);
    return 0;
}

int raft_cluster_parse(const char *spec, uint16_t port_offset, raft_log_member_t *members, int max, char *err,
                       size_t elen)
{
    int n = 0;
    const char *p = spec;
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq == NULL || eq == p) {
            snprintf(err, elen, "cluster: '%.*s' is not ID=HOST:PORT", (int)len, p);
            return -1;
        }
        if (n == max) {
            snprintf(err, elen, "cluster: more than %d members", max);
            return -1;
        }
        char idtext[24];
        size_t il = (size_t)(eq - p);
        if (il >= sizeof idtext || strspn(p, "0123456789") != il) {
            snprintf(err, elen, "cluster: member id '%.*s' is not a positive integer", (int)il, p);
            return -1;
        }
        memcpy(idtext, p, il);
        idtext[il] = '\0';
        members[n].id = strtoull(idtext, NULL, 10);
        if (members[n].id == 0) {
            snprintf(err, elen, "cluster: member id 0 is not allowed");
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (members[i].id == members[n].id) {
                snprintf(err, elen, "cluster: member id %llu appears twice", (unsigned long long)members[n].id);
                return -1;
            }
        char why[300];
        if (member_of(eq + 1, len - il - 1, port_offset, &members[n], why, sizeof why) != 0) {
            snprintf(err, elen, "cluster: %s", why);
            return -1;
        }
        n++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (n == 0)
        snprintf(err, elen, "cluster: no members");
    return n > 0 ? n : -1;
}

/* The client address of a raft address: the port less the offset. */
static void client_of(const raft_log_t *rl, const char *raftaddr, char *out, size_t olen)
{
    char host[200];
    long port;
    if (raftaddr == NULL || split_hostport(raftaddr, strlen(raftaddr), host, sizeof host, &port) != 0 ||
        port <= rl->opt.port_offset) {
        snprintf(out, olen, "%s", raftaddr ? raftaddr : "");
        return;
    }
    snprintf(out, olen, "%s:%ld", host, port - rl->opt.port_offset);
}

/* ---- the FIFO of entries in flight ------------------------------------------ */

static void fifo_push(raft_log_t *rl, inflight_t e)
{
    if (rl->fcount == rl->fcap) {
        size_t ncap = rl->fcap ? rl->fcap * 2 : 64;
        inflight_t *n = ordo_xmalloc(ncap * sizeof *n);
        for (size_t i = 0; i < rl->fcount; i++)
            n[i] = rl->fifo[(rl->fhead + i) % rl->fcap];
        free(rl->fifo);
        rl->fifo = n;
        rl->fcap = ncap;
        rl->fhead = 0;
    }
    rl->fifo[(rl->fhead + rl->fcount) % rl->fcap] = e;
    rl->fcount++;
}

static inflight_t *fifo_head(raft_log_t *rl) { return rl->fcount ? &rl->fifo[rl->fhead] : NULL; }

static void fifo_pop(raft_log_t *rl)
{
    assert(rl->fcount > 0);
    rl->fhead = (rl->fhead + 1) % rl->fcap;
    rl->fcount--;
}

/* ---- committing ----------------------------------------------------------------- */

static void wake(raft_log_t *rl) { rl->base.hooks.wake(rl->base.hooks.arg); }

static void committed(raft_log_t *rl, log_pos_t pos)
{
    assert(!log_pos_before(rl->proposed_pos, pos));
    if (log_pos_before(rl->committed_pos, pos))
        rl->committed_pos = pos;
    wake(rl);
}

/* The log failed for good (log_failed()): raft could not store this
 * member's proposal, or a committed entry does not apply here. The
 * server turns read-only with the reason, as a single server whose WAL
 * failed; this member applies nothing more and never serves again in
 * this process (its state may lack committed records, or hold records
 * raft never stored): an operator restarts it once the cause is fixed. */
static void fail(raft_log_t *rl, const char *why)
{
    if (rl->failed[0] != '\0')
        return;
    snprintf(rl->failed, sizeof rl->failed, "%s", why);
    fprintf(stderr, "ordod: cluster: the log failed: %s\n", why);
    bool was_leading = rl->leading;
    rl->leading = false;
    if (was_leading)
        rl->fsm_hooks.role(rl->fsm_hooks.arg, false, false);
    wake(rl);
}

int raft_entry_batch(const void *entry, size_t len, log_batch_t *out)
{
    const char *p = entry;
    memset(out, 0, sizeof *out);
    if (len < ENTRY_HEADER_BYTES || memcmp(p, ENTRY_MAGIC, 4) != 0)
        return RAFT_ENTRY_FOREIGN;
    /* The batch, then up to 7 bytes of padding (propose_entry). */
    size_t blen = get_u32(p + 4);
    if (blen > len - ENTRY_HEADER_BYTES)
        return RAFT_ENTRY_MALFORMED;
    const char *b = p + ENTRY_HEADER_BYTES;
    /* Every entry of the batch whole, so log_batch_next() (which asserts
     * it) can walk it. */
    uint32_t records = 0;
    uint64_t last_rev = 0;
    for (size_t pos = 0; pos < blen; records++) {
        if (blen - pos < LOG_ENTRY_HEADER_BYTES || get_u32(b + pos) > blen - pos - LOG_ENTRY_HEADER_BYTES)
            return RAFT_ENTRY_MALFORMED;
        last_rev = get_u64(b + pos + 8);
        pos += LOG_ENTRY_HEADER_BYTES + (size_t)get_u32(b + pos);
    }
    out->buf.data = (char *)b;
    out->buf.len = blen;
    out->buf.cap = blen;
    out->records = records;
    out->last_rev = last_rev;
    return 0;
}

/* raft delivers a committed entry, on every member. */
static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    raft_log_t *rl = fsm->data;
    *result = NULL;
    if (rl->diverged)
        return 0; /* the state is rebuilt from raft's files (the restart) */
    if (rl->failed[0] != '\0')
        return 0; /* the state stops where the log failed (fail()) */
    inflight_t *head = fifo_head(rl);
    if (head != NULL) {
        if (head->len == buf->len && head->hash == ordo_siphash(hash_key, buf->base, buf->len)) {
            /* This leader's own entry: applied when it was proposed. */
            log_pos_t pos = head->pos;
            rl->committed_rev = head->last_rev;
            rl->inflight_bytes -= head->len;
            fifo_pop(rl);
            committed(rl, pos);
            return 0;
        }
        /* Another leader's entry where ours was: ours were cut. */
        fprintf(stderr, "ordod: cluster: an entry of another leader replaced this member's own; rebuilding "
                        "the state from the log\n");
        rl->diverged = true;
        rl->leading = false;
        rl->fsm_hooks.role(rl->fsm_hooks.arg, false, true);
        return 0;
    }
    log_batch_t b;
    char why[200];
    int rc = raft_entry_batch(buf->base, buf->len, &b);
    if (rc == RAFT_ENTRY_FOREIGN) {
        snprintf(why, sizeof why, "a committed entry is not an ordo entry (%zu bytes)", buf->len);
        fail(rl, why);
        return 0;
    }
    if (rc != 0) {
        fail(rl, "a committed entry is malformed (a record runs past its batch)");
        return 0;
    }
    size_t pos = 0;
    uint64_t rev;
    const void *rec;
    size_t len;
    while (log_batch_next(&b, &pos, &rev, &rec, &len)) {
        if (rl->base.hooks.deliver(rl->base.hooks.arg, rev, rec, len) != 0) {
            /* Stop here rather than diverge: committed_rev stays the last
             * record that applied. */
            snprintf(why, sizeof why, "the committed record of revision %llu does not apply here",
                     (unsigned long long)rev);
            fail(rl, why);
            return 0;
        }
        rl->committed_rev = rev;
    }
    wake(rl);
    return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    raft_log_t *rl = fsm->data;
    if (rl->fcount > 0 || rl->building_records > 0) {
        /* The state is ahead of the log: wait for the entries in flight
         * (log_backlogged() holds new input meanwhile). */
        rl->snap_wanted = true;
        return RAFT_BUSY;
    }
    ordo_buf_t out = ORDO_BUF_INIT;
    rl->fsm_hooks.snapshot(rl->fsm_hooks.arg, &out);
    *bufs = raft_malloc(sizeof **bufs);
    void *data = raft_malloc(out.len);
    if (*bufs == NULL || data == NULL) {
        raft_free(*bufs);
        raft_free(data);
        ordo_buf_free(&out);
        return RAFT_NOMEM;
    }
    memcpy(data, out.data, out.len);
    (*bufs)[0].base = data;
    (*bufs)[0].len = out.len;
    *n_bufs = 1;
    ordo_buf_free(&out);
    rl->snapshots_taken++;
    if (rl->snap_wanted) {
        rl->snap_wanted = false;
        wake(rl); /* no longer backlogged */
    }
    return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    raft_log_t *rl = fsm->data;
    uint64_t rev = 0;
    int rc = rl->fsm_hooks.restore(rl->fsm_hooks.arg, buf->base, buf->len, &rev);
    raft_free(buf->base);
    if (rc != 0)
        return RAFT_CORRUPT;
    /* Everything a snapshot holds was committed. */
    rl->committed_rev = rev;
    rl->snapshots_restored++;
    wake(rl);
    return 0;
}

/* ---- proposals ------------------------------------------------------------------ */

/* A proposal's status that says raft could not store it here (a disk
 * error, no space, no memory), as opposed to this member no longer
 * leading (the role watch sees that) or raft closing. */
static bool store_failed(int status)
{
    return status != 0 && status != RAFT_NOTLEADER && status != RAFT_LEADERSHIPLOST && status != RAFT_SHUTDOWN &&
           status != RAFT_CANCELED;
}

static void fail_store(raft_log_t *rl, const char *what, int status)
{
    char why[256];
    snprintf(why, sizeof why, "raft could not store %s: %s (%s)", what, raft_strerror(status), raft_errmsg(&rl->raft));
    fail(rl, why);
}

static void apply_done(struct raft_apply *req, int status, void *result)
{
    /* A commit is seen in fsm_apply; leadership lost, in the role watch. */
    (void)result;
    req_t *r = req->data;
    if (store_failed(status))
        fail_store(r->rl, "an entry", status);
    free(r);
}

static void barrier_done(struct raft_barrier *req, int status)
{
    req_t *r = req->data;
    raft_log_t *rl = r->rl;
    if (store_failed(status))
        fail_store(rl, "a barrier", status);
    if (status == 0) {
        committed(rl, r->pos);
        if (r->lead_barrier && raft_state(&rl->raft) == RAFT_LEADER && !rl->diverged && rl->failed[0] == '\0') {
            rl->leading = true;
            fprintf(stderr, "ordod: cluster: leading (term %llu)\n",
                    (unsigned long long)raft_current_term(&rl->raft));
            rl->fsm_hooks.role(rl->fsm_hooks.arg, true, false);
        }
    }
    free(r);
}

static int propose_barrier(raft_log_t *rl, bool lead)
{
    req_t *r = ordo_xcalloc(1, sizeof *r);
    r->rl = rl;
    r->pos = LOG_POS(rl->proposed_pos.v + 1); /* taken only once raft has the barrier */
    r->lead_barrier = lead;
    r->u.barrier.data = r;
    int rv = raft_barrier(&rl->raft, &r->u.barrier, barrier_done);
    if (rv != 0) {
        free(r);
        return -1;
    }
    rl->proposed_pos.v++;
    rl->barriers_proposed++;
    return 0;
}

static int propose_entry(raft_log_t *rl)
{
    assert(rl->building_records > 0);
    put_u32(rl->building.data + 4, (uint32_t)(rl->building.len - ENTRY_HEADER_BYTES));
    /* raft_uv takes entries whose length is a multiple of 8: pad (the
     * header gives the batch's length, so the reader stops before). */
    while (rl->building.len % 8 != 0)
        ordo_buf_append(&rl->building, "", 1);
    size_t len = rl->building.len;
    void *data = raft_malloc(len);
    if (data == NULL)
        return -1;
    memcpy(data, rl->building.data, len);
    struct raft_buffer buf = {.base = data, .len = len};
    req_t *r = ordo_xcalloc(1, sizeof *r);
    r->rl = rl;
    r->u.apply.data = r;
    inflight_t e = {.pos = LOG_POS(rl->proposed_pos.v + 1), .last_rev = rl->building_last_rev,
                    .hash = ordo_siphash(hash_key, data, len), .len = len};
    int rv = raft_apply(&rl->raft, &r->u.apply, &buf, 1, apply_done);
    if (rv != 0) {
        /* raft_apply() frees the entry's buffer when it fails (0.22.1). */
        fprintf(stderr, "ordod: cluster: raft_apply: %s (%s)\n", raft_strerror(rv), raft_errmsg(&rl->raft));
        free(r);
        return -1;
    }
    rl->proposed_pos.v++;
    fifo_push(rl, e);
    rl->inflight_bytes += len;
    rl->entries_proposed++;
    rl->records_written += rl->building_records;
    rl->bytes_proposed += len;
    rl->building.len = 0;
    rl->building_records = 0;
    return 0;
}

/* ---- the role watch ------------------------------------------------------------- */

/* Snapshot thresholds. Encoding a snapshot holds the loop (raft_log.h),
 * so members must not all do it at once: a follower's threshold is
 * staggered by its id (up to 7/8 more), so two followers rarely stall
 * together and the leader keeps a majority; the leader's is four times
 * as long, since a long stall of the leader starts an election. */
static void set_threshold(raft_log_t *rl, bool leader)
{
    uint64_t n = rl->opt.snapshot_entries;
    n = leader ? n * 4 : n + n * (rl->opt.id % 8) / 8;
    raft_set_snapshot_threshold(&rl->raft, (unsigned)(n > UINT32_MAX ? UINT32_MAX : n));
}

static void handoff_done(struct raft_transfer *req)
{
    req_t *r = req->data;
    r->rl->handing_off = false;
    free(r);
}

/* A failed member (fail()) that raft elects serves nothing: it hands
 * leadership to another at once (raft picks; tried again at the next look
 * if raft refuses). */
static void hand_off(raft_log_t *rl)
{
    if (rl->handing_off || rl->transferring)
        return;
    req_t *r = ordo_xcalloc(1, sizeof *r);
    r->rl = rl;
    r->u.transfer.data = r;
    if (raft_transfer(&rl->raft, &r->u.transfer, 0, handoff_done) != 0) {
        free(r);
        return;
    }
    rl->handing_off = true;
}

static void on_watch(uv_check_t *h)
{
    raft_log_t *rl = h->data;
    if (!rl->started || rl->diverged)
        return;
    bool leader = raft_state(&rl->raft) == RAFT_LEADER;
    if (rl->failed[0] != '\0') {
        if (leader)
            hand_off(rl);
        return;
    }
    if (leader && !rl->was_leader && !rl->transferring) {
        rl->was_leader = true;
        set_threshold(rl, true);
        if (propose_barrier(rl, true) != 0) {
            /* Tried again at the next look (the loop's next turn). */
            fprintf(stderr, "ordod: cluster: cannot propose the new leader's barrier: %s\n", raft_errmsg(&rl->raft));
            rl->was_leader = false;
        }
    } else if (!leader && rl->was_leader) {
        rl->was_leader = false;
        set_threshold(rl, false);
        /* After a transfer this member stopped serving already (it answered
         * its parked clients then); its held output is dropped now. */
        bool had_lead = rl->leading || rl->transferring;
        rl->leading = false;
        bool diverged = rl->fcount > 0 || rl->building_records > 0;
        if (diverged)
            rl->diverged = true;
        fprintf(stderr, "ordod: cluster: no longer the leader (term %llu)%s\n",
                (unsigned long long)raft_current_term(&rl->raft),
                diverged ? "; entries in flight: rebuilding the state from the log" : "");
        if (had_lead || diverged)
            rl->fsm_hooks.role(rl->fsm_hooks.arg, false, diverged);
        /* Output that waited for positions never to be committed: the
         * server closes those connections (its role hook). */
    }
}

/* ---- the seam ------------------------------------------------------------------- */

static int rl_load_snapshot(log_t *l, core_t *core, uint64_t *rev_out, uint64_t *entries_out, char *err, size_t elen)
{
    (void)l, (void)core, (void)err, (void)elen;
    *rev_out = 0; /* raft restores its snapshot itself, at raft_log_start() */
    *entries_out = 0;
    return 0;
}

static int rl_replay(log_t *l, uint64_t after_rev, log_record_fn fn, void *arg, char *err, size_t elen)
{
    (void)l, (void)after_rev, (void)fn, (void)arg, (void)err, (void)elen;
    return 0; /* committed entries come from raft as the leader reports them */
}

static int rl_append(log_t *l, const log_batch_t *b)
{
    raft_log_t *rl = rl_of(l);
    if (rl->failed[0] != '\0')
        return -1;
    if (b->records == 0)
        return 0;
    if (rl->building.len == 0) {
        ordo_buf_append(&rl->building, ENTRY_MAGIC, 4);
        ordo_buf_append(&rl->building, "\0\0\0\0", 4);
    }
    ordo_buf_append(&rl->building, b->buf.data, b->buf.len);
    rl->building_records += b->records;
    rl->building_last_rev = b->last_rev;
    return 0;
}

static void start_transfer(raft_log_t *rl, raft_id target); /* membership, below */

static int rl_flush(log_t *l)
{
    raft_log_t *rl = rl_of(l);
    if (rl->building_records > 0) {
        if (propose_entry(rl) != 0) {
            /* Not the leader any more (or out of memory): these records
             * were applied here and will never be committed. */
            rl->building.len = 0;
            rl->building_records = 0;
            if (!rl->diverged) {
                rl->diverged = true;
                rl->leading = false;
                fprintf(stderr, "ordod: cluster: cannot propose (%s); rebuilding the state from the log\n",
                        raft_errmsg(&rl->raft));
                rl->fsm_hooks.role(rl->fsm_hooks.arg, false, true);
            }
            return 0;
        }
        rl->need_barrier = false;
    } else if (rl->need_barrier && rl->leading) {
        /* Refused (out of memory): output waits for it, so it is tried
         * again at the next flush. */
        if (propose_barrier(rl, false) == 0)
            rl->need_barrier = false;
    } else {
        rl->need_barrier = false;
    }
    if (rl->transfer_pending) {
        rl->transfer_pending = false;
        start_transfer(rl, rl->transfer_target);
    }
    return 0;
}

static log_pos_t rl_poll(log_t *l) { return rl_of(l)->committed_pos; }

static uint64_t rl_committed_rev(const log_t *l) { return rl_of_c(l)->committed_rev; }

/* The position the end of this turn proposes (an entry, or else a
 * barrier); rev is not needed: raft's positions are not revisions. */
static log_pos_t rl_mark(log_t *l, uint64_t rev)
{
    (void)rev;
    raft_log_t *rl = rl_of(l);
    if (!rl->leading)
        return rl->committed_pos; /* a follower answers nothing that depends on state */
    rl->need_barrier = true;
    return LOG_POS(rl->proposed_pos.v + 1);
}

static const char *rl_failed(const log_t *l)
{
    const raft_log_t *rl = rl_of_c(l);
    return rl->failed[0] ? rl->failed : NULL;
}

static bool rl_backlogged(log_t *l)
{
    raft_log_t *rl = rl_of(l);
    if (rl->failed[0] != '\0')
        return false; /* nothing more will be committed: clients are read, to be refused */
    return rl->snap_wanted || rl->inflight_bytes + rl->building.len > rl->opt.pending_bytes_max;
}

static int rl_snapshot_begin(log_t *l, const core_t *core, uint64_t now_ms, log_snapshot_t *out, char *err,
                             size_t elen)
{
    (void)l, (void)core, (void)now_ms, (void)out;
    snprintf(err, elen, "in cluster mode raft takes snapshots (every cluster-snapshot-entries entries)");
    return -1;
}

static int rl_snapshot_slice(log_t *l, const core_t *core, size_t max_keys, char *err, size_t elen)
{
    (void)l, (void)core, (void)max_keys, (void)err, (void)elen;
    return -1;
}

static int rl_snapshot_commit(log_t *l, char *err, size_t elen)
{
    (void)l, (void)err, (void)elen;
    return -1;
}

static void rl_snapshot_end(log_t *l, bool ok, log_snapshot_t *out)
{
    (void)l, (void)ok;
    memset(out, 0, sizeof *out);
}

static void rl_stats(const log_t *l, log_stats_t *out)
{
    const raft_log_t *rl = rl_of_c(l);
    memset(out, 0, sizeof *out);
    out->records_written = rl->records_written;
    out->batches = rl->entries_proposed;
    out->pending_bytes = rl->inflight_bytes + rl->building.len;
}

static void on_closed(struct raft *r)
{
    raft_log_t *rl = r->data;
    raft_uv_close(&rl->io);
    raft_transport_free(&rl->transport);
    rl->raft_inited = rl->io_inited = rl->transport_inited = false;
}

static void on_watch_closed(uv_handle_t *h) { (void)h; }

void raft_log_stop(log_t *l)
{
    raft_log_t *rl = rl_of(l);
    if (!rl->started || rl->stopping)
        return;
    rl->stopping = true;
    uv_close((uv_handle_t *)&rl->watch, on_watch_closed);
    raft_close(&rl->raft, on_closed);
}

static void rl_close(log_t *l)
{
    raft_log_t *rl = rl_of(l);
    if (rl->raft_inited) {
        if (rl->started)
            raft_log_stop(l); /* a no-op if shutdown started it */
        else
            raft_close(&rl->raft, on_closed);
        /* The loop runs the close to its end (on_closed) before ordod exits. */
        while (rl->raft_inited)
            uv_run(rl->opt.loop, UV_RUN_ONCE);
    }
    /* What raft_init() never took over (a failed open). */
    if (rl->io_inited)
        raft_uv_close(&rl->io);
    if (rl->transport_inited)
        raft_transport_free(&rl->transport);
    if (rl->dir_fd >= 0)
        close(rl->dir_fd);
    ordo_buf_free(&rl->building);
    free(rl->fifo);
    free(rl);
}

static const log_ops_t raft_ops = {
    .load_snapshot = rl_load_snapshot,
    .replay = rl_replay,
    .append = rl_append,
    .flush = rl_flush,
    .poll = rl_poll,
    .committed_rev = rl_committed_rev,
    .mark = rl_mark,
    .failed = rl_failed,
    .backlogged = rl_backlogged,
    .snapshot_begin = rl_snapshot_begin,
    .snapshot_slice = rl_snapshot_slice,
    .snapshot_commit = rl_snapshot_commit,
    .snapshot_end = rl_snapshot_end,
    .stats = rl_stats,
    .close = rl_close,
};

/* Does raft's directory hold anything yet (a first start bootstraps)? */
static bool dir_empty(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/metadata1", dir);
    struct stat st;
    if (stat(path, &st) == 0)
        return false;
    snprintf(path, sizeof path, "%s/metadata2", dir);
    return stat(path, &st) != 0;
}

log_t *raft_log_open(const raft_log_options_t *opt, const log_hooks_t *hooks, const raft_log_fsm_t *fsmh, char *err,
                     size_t elen)
{
    raft_log_t *rl = ordo_xcalloc(1, sizeof *rl);
    rl->base.ops = &raft_ops;
    rl->base.hooks = *hooks;
    rl->base.record_bytes_max = opt->record_bytes_max;
    rl->opt = *opt;
    rl->fsm_hooks = *fsmh;
    rl->dir_fd = -1;
    const raft_log_member_t *me = NULL;
    for (int i = 0; i < opt->nmembers; i++)
        if (opt->members[i].id == opt->id)
            me = &opt->members[i];
    if (me == NULL) {
        snprintf(err, elen, "node-id %llu is not in --cluster", (unsigned long long)opt->id);
        goto fail;
    }
    rl->dir_fd = log_lock_dir(opt->dir, err, elen);
    if (rl->dir_fd < 0)
        goto fail;
    snprintf(rl->raftdir, sizeof rl->raftdir, "%s/raft", opt->dir);
    if (mkdir(rl->raftdir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, elen, "cannot create %s: %s", rl->raftdir, strerror(errno));
        goto fail;
    }
    bool fresh = dir_empty(rl->raftdir);
    int rv = raft_transport_init(&rl->transport, opt->loop);
    if (rv != 0) {
        snprintf(err, elen, "raft transport: %s", raft_strerror(rv));
        goto fail;
    }
    rl->transport_inited = true;
    rv = raft_uv_init(&rl->io, opt->loop, rl->raftdir, &rl->transport);
    if (rv != 0) {
        snprintf(err, elen, "raft storage in %s: %s", rl->raftdir, rl->io.errmsg);
        goto fail;
    }
    rl->io_inited = true;
    rl->fsm.version = 1;
    rl->fsm.data = rl;
    rl->fsm.apply = fsm_apply;
    rl->fsm.snapshot = fsm_snapshot;
    rl->fsm.restore = fsm_restore;
    rv = raft_init(&rl->raft, &rl->io, &rl->fsm, opt->id, me->raft);
    if (rv != 0) {
        snprintf(err, elen, "raft: %s", raft_errmsg(&rl->raft));
        goto fail;
    }
    rl->raft_inited = true;
    rl->raft.data = rl;
    raft_set_election_timeout(&rl->raft, opt->election_timeout_ms);
    raft_set_heartbeat_timeout(&rl->raft, opt->election_timeout_ms / 10 ? opt->election_timeout_ms / 10 : 1);
    raft_set_pre_vote(&rl->raft, true);
    set_threshold(rl, false);
    raft_set_snapshot_trailing(&rl->raft, opt->snapshot_trailing);
    raft_uv_set_connect_retry_delay(&rl->io, 50);
    if (fresh && opt->nmembers_bootstrap > 0) {
        struct raft_configuration conf;
        raft_configuration_init(&conf);
        for (int i = 0; i < opt->nmembers; i++)
            if (raft_configuration_add(&conf, opt->members[i].id, opt->members[i].raft, RAFT_VOTER) != 0) {
                raft_configuration_close(&conf);
                snprintf(err, elen, "raft: cannot build the configuration");
                goto fail;
            }
        rv = raft_bootstrap(&rl->raft, &conf);
        raft_configuration_close(&conf);
        if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) {
            snprintf(err, elen, "raft bootstrap: %s", raft_errmsg(&rl->raft));
            goto fail;
        }
        fprintf(stderr, "ordod: cluster: bootstrapped a %d-member cluster in %s\n", opt->nmembers, rl->raftdir);
    }
    return &rl->base;
fail:
    rl_close(&rl->base);
    return NULL;
}

int raft_log_start(log_t *l, char *err, size_t elen)
{
    raft_log_t *rl = rl_of(l);
    uv_check_init(rl->opt.loop, &rl->watch);
    rl->watch.data = rl;
    uv_check_start(&rl->watch, on_watch);
    uv_unref((uv_handle_t *)&rl->watch);
    rl->started = true;
    int rv = raft_start(&rl->raft);
    if (rv != 0) {
        snprintf(err, elen, "raft start: %s (%s)", raft_strerror(rv), raft_errmsg(&rl->raft));
        return -1;
    }
    return 0;
}

void raft_log_info(log_t *l, raft_log_info_t *out)
{
    raft_log_t *rl = rl_of(l);
    memset(out, 0, sizeof *out);
    int st = rl->started ? raft_state(&rl->raft) : RAFT_UNAVAILABLE;
    out->role = st == RAFT_LEADER ? "leader" : st == RAFT_FOLLOWER ? "follower"
                : st == RAFT_CANDIDATE ? "candidate" : "unavailable";
    out->leading = rl->leading;
    if (rl->started) {
        raft_id id = 0;
        const char *addr = NULL;
        raft_leader(&rl->raft, &id, &addr);
        out->leader_id = id;
        if (id != 0)
            client_of(rl, addr, out->leader_client, sizeof out->leader_client);
        out->term = raft_current_term(&rl->raft);
        out->commit_index = raft_commit_index(&rl->raft);
        out->applied_index = raft_last_applied(&rl->raft);
        out->last_index = raft_last_index(&rl->raft);
        out->members = (int)rl->raft.configuration.n;
    }
    out->entries_proposed = rl->entries_proposed;
    out->barriers_proposed = rl->barriers_proposed;
    out->snapshots_taken = rl->snapshots_taken;
    out->snapshots_restored = rl->snapshots_restored;
    out->inflight_entries = rl->fcount;
    out->inflight_bytes = rl->inflight_bytes;
}

bool raft_log_leading(const log_t *l) { return rl_of_c(l)->leading; }

bool raft_log_member(log_t *l, int i, uint64_t *id, char *client, size_t clen, const char **role)
{
    raft_log_t *rl = rl_of(l);
    if (!rl->started || i < 0 || (unsigned)i >= rl->raft.configuration.n)
        return false;
    const struct raft_server *sv = &rl->raft.configuration.servers[i];
    *id = sv->id;
    client_of(rl, sv->address, client, clen);
    raft_id lid = 0;
    const char *laddr = NULL;
    raft_leader(&rl->raft, &lid, &laddr);
    *role = sv->id == lid ? "leader" : sv->role == RAFT_VOTER ? "voter" : sv->role == RAFT_STANDBY ? "standby" : "spare";
    return true;
}

/* ---- membership ------------------------------------------------------------------ */

static bool is_other_voter(const raft_log_t *rl, uint64_t id)
{
    for (unsigned i = 0; i < rl->raft.configuration.n; i++) {
        const struct raft_server *sv = &rl->raft.configuration.servers[i];
        if (sv->id == id)
            return sv->role == RAFT_VOTER && id != rl->opt.id;
    }
    return false;
}

static void change_finished(raft_log_t *rl, int status)
{
    rl->change_running = false;
    rl->fsm_hooks.change_done(rl->fsm_hooks.arg, status, status ? raft_strerror(status) : NULL);
}

/* The end of a change that has nothing more to do (an assign, a remove). */
static void change_done(struct raft_change *req, int status)
{
    req_t *r = req->data;
    raft_log_t *rl = r->rl;
    free(r);
    change_finished(rl, status);
}

static void add_done(struct raft_change *req, int status)
{
    req_t *r = req->data;
    raft_log_t *rl = r->rl;
    if (status != 0) {
        free(r);
        change_finished(rl, status);
        return;
    }
    /* Added as a spare: now a voter (raft catches it up first). */
    memset(&r->u, 0, sizeof r->u);
    r->u.change.data = r;
    int rv = raft_assign(&rl->raft, &r->u.change, r->promote_id, RAFT_VOTER, change_done);
    if (rv != 0) {
        free(r);
        change_finished(rl, rv);
    }
}

/* A transfer is started again this many times in all when raft gives it
 * up while this member still leads. libraft 0.22.1 sends TimeoutNow as
 * soon as the target acknowledges any append while a transfer waits for it
 * to catch up, so under writes the target, still persisting the last
 * entries, ignores it, and raft gives the transfer up after an election
 * timeout. Started again, with nothing proposed since (this member stopped
 * serving), raft finds the target caught up and sends TimeoutNow at once. */
#define TRANSFER_ATTEMPTS 3

static bool still_leads(raft_log_t *rl)
{
    return raft_state(&rl->raft) == RAFT_LEADER && rl->was_leader && !rl->diverged;
}

/* The transfer's end: done if target leads now; else, if this member still
 * leads, it leads again, from a new barrier, as a new leader does (on_watch
 * at the next look). */
static void transfer_end(raft_log_t *rl, raft_id target, int failed)
{
    rl->transferring = false;
    raft_id lid = 0;
    const char *laddr = NULL;
    raft_leader(&rl->raft, &lid, &laddr);
    if (still_leads(rl)) {
        fprintf(stderr, "ordod: cluster: the transfer did not happen; leading again\n");
        rl->was_leader = false;
    }
    change_finished(rl, failed ? failed : target != 0 && lid == target ? 0 : RAFT_NOTLEADER);
}

static void transfer_done(struct raft_transfer *req);

/* raft_transfer(); on a refusal the transfer ends with its code. */
static void start_transfer(raft_log_t *rl, raft_id target)
{
    req_t *r = ordo_xcalloc(1, sizeof *r);
    r->rl = rl;
    r->u.transfer.data = r;
    int rv = raft_transfer(&rl->raft, &r->u.transfer, target, transfer_done);
    if (rv != 0) {
        free(r);
        fprintf(stderr, "ordod: cluster: raft_transfer: %s\n", raft_strerror(rv));
        transfer_end(rl, target, rv);
    }
}

static void transfer_done(struct raft_transfer *req)
{
    req_t *r = req->data;
    raft_log_t *rl = r->rl;
    raft_id target = req->id;
    free(r);
    if (still_leads(rl) && target != 0 && ++rl->transfer_attempts < TRANSFER_ATTEMPTS) {
        start_transfer(rl, target); /* given up while the target caught up: again */
        return;
    }
    transfer_end(rl, target, 0);
}

int raft_log_change(log_t *l, enum raft_log_change op, uint64_t id, const char *client, char *err, size_t elen)
{
    raft_log_t *rl = rl_of(l);
    if (!rl->leading) {
        snprintf(err, elen, "not the leader");
        return -1;
    }
    if (rl->change_running) {
        snprintf(err, elen, "another membership change or transfer is running");
        return -1;
    }
    raft_log_member_t m;
    if (op == RAFT_LOG_ADD) {
        if (id == 0) {
            snprintf(err, elen, "member id 0 is not allowed");
            return -1;
        }
        if (member_of(client, strlen(client), rl->opt.port_offset, &m, err, elen) != 0)
            return -1;
    }
    if (op == RAFT_LOG_TRANSFER) {
        if (id != 0 && !is_other_voter(rl, id)) {
            snprintf(err, elen, "member %llu is not another voter of this cluster", (unsigned long long)id);
            return -1;
        }
        /* Until a transfer ends raft takes no entry and no barrier (0.22.1
         * refuses them while a transferee is set), so nothing could be
         * answered: this member stops serving now (the caller drops its
         * clients as a deposed leader's; raft_log.h), and they go to the
         * next one. The transfer itself starts at this turn's flush, after
         * the turn's records are proposed (rl_flush); what is in flight
         * still commits. */
        rl->change_running = true;
        rl->transferring = true;
        rl->transfer_pending = true;
        rl->transfer_target = id;
        rl->transfer_attempts = 0;
        rl->leading = false;
        return 0;
    }
    req_t *r = ordo_xcalloc(1, sizeof *r);
    r->rl = rl;
    r->promote_id = id;
    r->u.change.data = r;
    int rv = op == RAFT_LOG_ADD ? raft_add(&rl->raft, &r->u.change, id, m.raft, add_done)
                                : raft_remove(&rl->raft, &r->u.change, id, change_done);
    if (rv != 0) {
        free(r);
        snprintf(err, elen, "%s", raft_errmsg(&rl->raft));
        return -1;
    }
    rl->change_running = true;
    return 0;
}

int raft_log_partition(log_t *l, const uint64_t *ids, int n)
{
    raft_log_t *rl = rl_of(l);
    return raft_transport_partition(&rl->transport, ids, n);
}
