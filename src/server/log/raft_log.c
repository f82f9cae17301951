/*
 * raft_log.c -- the log seam over the C raft engine, driven by ordod
 * (raft_step); the design is in raft_log.h.
 *
 * Owns: the raft engine (struct raft, with no legacy raft_io: ordod does
 * all its I/O), the store (raft_store.h: term, vote, entries, snapshot
 * metadata), the transport (raft_net.h), the engine's timer, the data
 * directory's lock, the entry being built (appended since the last flush),
 * the FIFO of this member's proposals not yet committed (entries, barriers
 * and read rounds, in position order), the snapshot being written, and the
 * membership change or transfer running. Loop thread only.
 *
 * Invariants:
 *   - positions are handed out in proposal order and committed in that
 *     order: the FIFO's head is the oldest uncommitted one, and
 *     committed_pos only grows, committed_pos <= proposed_pos;
 *   - an entry or barrier in the FIFO names the raft index it was given
 *     at submit; it commits when raft applies that index with the same
 *     term here (anything else there: this member's state is ahead of
 *     the log, diverged);
 *   - a read round commits when every position before it is committed
 *     and a majority of voters (this member included) answered a ping
 *     sent after the round began with this member's term, while it still
 *     leads in that term (raft_log.h, READS);
 *   - applied_index only grows, except when a snapshot from the leader
 *     replaces the state; records at or below committed_rev are never
 *     applied again (a snapshot newer than its metadata is harmless);
 *   - raft_step() is never called from inside the handling of its own
 *     update before the update's messages are handed to the net (the
 *     engine reuses its message array at the next step);
 *   - once failed (fail()) nothing more is applied and the member never
 *     serves: leading stays false.
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
#include "raft_net.h"
#include "raft_store.h"
#include "snapshot.h"

#define ENTRY_MAGIC "ORDB"
#define ENTRY_HEADER_BYTES 8u
#define BARRIER_BYTES 8u          /* a barrier entry's data: its position, for the logs */
#define SNAPSHOT_SUBDIR "snapshot"
#define RECV_SUBDIR "recv"
/* A transfer is started again this many times in all when raft gives it
 * up while this member still leads: libraft 0.22.1 sends TimeoutNow as
 * soon as the target acknowledges any append while a transfer waits for
 * it to catch up, so under writes the target, still persisting the last
 * entries, ignores it. Started again, with nothing proposed since (this
 * member stopped serving), raft finds the target caught up at once. */
#define TRANSFER_ATTEMPTS 3
/* CLUSTER ADD makes the new member a voter once its log is within this
 * many entries of the leader's (under continuous writes it is never
 * exactly level): a voter a few entries behind only catches up. */
#define CATCH_UP_SLACK 64u
/* Records a member applies from committed entries per loop turn: a
 * follower catching up on a large backlog (a leader fed a long pipeline)
 * still answers heartbeats in between, so the leader keeps its majority.
 * About 10-20 ms of applying on this machine. */
#define APPLY_BUDGET_RECORDS 8192u

enum pend_kind { PEND_ENTRY, PEND_BARRIER, PEND_ROUND };

typedef struct pend_s {
    enum pend_kind kind;
    log_pos_t pos;
    uint64_t index, term;     /* entry, barrier: where raft put it */
    uint64_t last_rev;        /* entry: the revision its last record reaches */
    uint64_t seq;             /* round: its ping */
    size_t len;               /* entry: bytes */
    bool lead;                /* barrier: the one a new leader waits for */
    bool done;                /* round: confirmed (commits once it is the head) */
} pend_t;

enum change_state { CHANGE_NONE, CHANGE_CATCH_UP, CHANGE_COMMIT, CHANGE_ROLLBACK };

typedef struct raft_log_s raft_log_t;

typedef struct peer_ack_s {
    uint64_t id;
    uint64_t seq;             /* the highest round it confirmed in the current term */
} peer_ack_t;

struct raft_log_s {
    log_t base;
    raft_log_options_t opt;
    raft_log_fsm_t fsm_hooks;
    struct raft raft;
    bool raft_inited, started, stopping, closed_net;
    bool bootstrapping;           /* raft_log_open() waits for entry 1 to be durable */
    bool in_check;                /* check_change() runs (it may step the engine) */
    raft_store_t *store;
    raft_net_t *net;
    uv_timer_t timer;             /* the engine's next timeout */
    uv_timer_t round_timer;       /* pings again for rounds not yet confirmed */
    uv_idle_t nudge;              /* a timeout is due: the next poll must not block */
    uv_check_t after_io;          /* steps a due timeout after the loop's I/O */
    bool timeout_due;
    bool apply_more;              /* committed entries wait: applied on the next loop turns */
    bool timers_inited;
    int dir_fd;                   /* flocked while the log lives */
    char raftdir[1100], snapdir[1200], recvdir[1200], snapfile[1300];
    /* the entry being built: ENTRY header, then batches */
    ordo_buf_t building;
    uint32_t building_records;
    uint64_t building_last_rev;
    /* this member's proposals not yet committed (a ring) */
    pend_t *fifo;
    size_t fhead, fcount, fcap;
    uint64_t inflight_bytes;
    log_pos_t proposed_pos, committed_pos;
    uint64_t committed_rev;       /* the revision the applied entries (or the snapshot) reach */
    uint64_t applied_index;       /* the last raft index applied here */
    bool need_round;
    bool leading;
    bool was_leader;              /* raft_state() was LEADER at the last update */
    bool diverged;
    /* read rounds */
    uint64_t round_seq;           /* the last ping sent */
    uint64_t round_term;          /* the term acks are counted for */
    peer_ack_t acks[RAFT_LOG_MAX_MEMBERS];
    int nacks;
    uint64_t rounds_started, rounds_confirmed, rounds_pinged;
    /* snapshots */
    bool snap_on;                 /* a snapshot is being written (persist drives it) */
    bool snap_keys_done;          /* every key written: waiting for its revision to commit */
    bool snap_abort;              /* a snapshot from the leader replaces the state: give this one up */
    snap_writer_t snap;
    uint64_t snap_index;          /* the last committed index whose records are all in the snapshot */
    bool install_pending;         /* a leader's snapshot is stored: restore it when raft commits its index */
    uint64_t install_index;
    /* membership */
    enum change_state change;
    bool change_running;
    uint64_t change_id;
    uint64_t change_index;        /* the configuration entry that finishes it */
    uint64_t change_started;      /* uv_now when the catch-up began */
    char change_err[200];
    bool transferring;            /* a CLUSTER TRANSFER runs: this member serves nothing */
    bool transfer_pending;        /* ... to start at the turn's flush, for transfer_target */
    uint64_t transfer_target;
    int transfer_attempts;
    uint64_t store_failing_since; /* uv_now when the store's writes began to fail (0: they do not) */
    bool meta_unsaved;            /* the engine's term or vote is not durable yet: send nothing */
    char failed[256];             /* non-empty: the log failed for good (fail()) */
    uint64_t entries_proposed, barriers_proposed, snapshots_taken, snapshots_restored;
    uint64_t records_written, bytes_proposed, records_skipped;
};

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


/* ---- the FIFO of proposals -------------------------------------------------- */

static void fifo_push(raft_log_t *rl, pend_t e)
{
    if (rl->fcount == rl->fcap) {
        size_t ncap = rl->fcap ? rl->fcap * 2 : 64;
        pend_t *n = ordo_xmalloc(ncap * sizeof *n);
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

static pend_t *fifo_at(raft_log_t *rl, size_t i) { return &rl->fifo[(rl->fhead + i) % rl->fcap]; }
static pend_t *fifo_head(raft_log_t *rl) { return rl->fcount ? fifo_at(rl, 0) : NULL; }

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

/* Proposals at the FIFO's head that are done (an entry or barrier raft
 * committed, a read round confirmed) commit now, in position order. */
static void advance(raft_log_t *rl)
{
    pend_t *h;
    while ((h = fifo_head(rl)) != NULL && h->done) {
        log_pos_t pos = h->pos;
        fifo_pop(rl);
        committed(rl, pos);
    }
}

/* The log failed for good (log_failed()): this member could not store or
 * apply what the cluster committed. The server turns read-only with the
 * reason, as a single server whose WAL failed; this member applies
 * nothing more and never serves again in this process: an operator
 * restarts it once the cause is fixed. */
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

/* This member's state holds records the cluster may never commit. */
static void diverge(raft_log_t *rl, const char *why)
{
    if (rl->diverged)
        return;
    fprintf(stderr, "ordod: cluster: %s; rebuilding the state from the log\n", why);
    rl->diverged = true;
    rl->leading = false;
    rl->fsm_hooks.role(rl->fsm_hooks.arg, false, true);
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


/* ---- driving the engine ------------------------------------------------------------ */

static int conf_copy(const struct raft_configuration *src, struct raft_configuration *dst)
{
    raft_configuration_init(dst);
    for (unsigned i = 0; i < src->n; i++)
        if (raft_configuration_add(dst, src->servers[i].id, src->servers[i].address, src->servers[i].role) != 0) {
            raft_configuration_close(dst);
            return -1;
        }
    return 0;
}

static void handle_update(raft_log_t *rl, struct raft_update *u);

/* One event into the engine, and what it asks done. Returns raft_step()'s
 * code (the update is handled only on success). */
static int step(raft_log_t *rl, struct raft_event *ev)
{
    if (rl->stopping)
        return RAFT_SHUTDOWN;
    uv_update_time(rl->opt.loop);
    ev->time = uv_now(rl->opt.loop);
    ev->capacity = 0;
    memset(ev->reserved, 0, sizeof ev->reserved);
    struct raft_update u;
    int rv = raft_step(&rl->raft, ev, &u);
    if (rv != 0)
        return rv;
    handle_update(rl, &u);
    return 0;
}

static void hand_off(raft_log_t *rl);

/* The store retries a write that failed (a full disk) until it succeeds.
 * Meanwhile this member says so once, stops taking writes
 * (rl_backlogged()), and, if it leads for more than an election timeout
 * in that state, hands leadership to a member that can store. */
static void watch_store(raft_log_t *rl)
{
    raft_store_stats_t st;
    raft_store_stats(rl->store, &st);
    uint64_t now = uv_now(rl->opt.loop);
    if (st.failing == NULL) {
        if (rl->store_failing_since != 0) {
            fprintf(stderr, "ordod: cluster: the raft log is written again after %llu ms\n",
                    (unsigned long long)(now - rl->store_failing_since));
            rl->store_failing_since = 0;
            wake(rl); /* no longer backlogged */
        }
        return;
    }
    if (rl->store_failing_since == 0) {
        rl->store_failing_since = now;
        fprintf(stderr, "ordod: cluster: the raft log cannot be written (%s); retrying, taking no writes\n",
                st.failing);
    }
    if (raft_state(&rl->raft) == RAFT_LEADER && now - rl->store_failing_since > rl->opt.election_timeout_ms)
        hand_off(rl);
}

/* The engine's timeout is stepped after the loop's I/O phase, not in the
 * timer callback: libuv runs timers before it polls, so after a long loop
 * turn (a client's huge pipeline) the timer would fire with the members'
 * answers still unread in their sockets, and a leader would find no
 * majority heard from and step down. The timer only marks the timeout due
 * and keeps the next poll from blocking (an idle handle); the check
 * handle, which runs after the poll's callbacks, steps it. */
static void on_idle(uv_idle_t *h) { (void)h; }

static void on_timer(uv_timer_t *t)
{
    raft_log_t *rl = t->data;
    rl->timeout_due = true;
    uv_idle_start(&rl->nudge, on_idle);
}

static void apply_committed(raft_log_t *rl);

static void on_after_io(uv_check_t *h)
{
    raft_log_t *rl = h->data;
    if (rl->apply_more && !rl->stopping) {
        rl->apply_more = false;
        if (!rl->timeout_due)
            uv_idle_stop(&rl->nudge);
        apply_committed(rl); /* may set apply_more again */
    }
    if (!rl->timeout_due)
        return;
    rl->timeout_due = false;
    if (!rl->apply_more)
        uv_idle_stop(&rl->nudge);
    watch_store(rl);
    struct raft_event ev = {.type = RAFT_TIMEOUT};
    int rv = step(rl, &ev);
    if (rv != 0 && rv != RAFT_SHUTDOWN)
        fprintf(stderr, "ordod: cluster: raft timeout: %s\n", raft_strerror(rv));
}

static void arm_timer(raft_log_t *rl)
{
    if (rl->stopping || !rl->timers_inited)
        return;
    uint64_t at = raft_timeout(&rl->raft), now = uv_now(rl->opt.loop);
    uv_timer_start(&rl->timer, on_timer, at > now ? at - now : 0, 0);
}

/* Send the engine's messages: append entries get their entries from the
 * store (the engine keeps none), install snapshot streams the snapshot
 * file with the configuration the store recorded for it. */
static void send_messages(raft_log_t *rl, struct raft_message *msgs, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct raft_message *m = &msgs[i];
        if (m->type == RAFT_INSTALL_SNAPSHOT) {
            const raft_store_snap_t *sn = raft_store_snapshot(rl->store);
            if (sn->index == 0)
                continue; /* nothing to send: raft asks again */
            struct raft_message mm = *m;
            mm.install_snapshot.conf = sn->conf;
            mm.install_snapshot.conf_index = sn->conf_index;
            mm.install_snapshot.last_index = sn->index;
            mm.install_snapshot.last_term = sn->term;
            if (raft_net_send_snapshot(rl->net, &mm, rl->snapfile) != 0)
                fprintf(stderr, "ordod: cluster: cannot send the snapshot %s to member %llu\n", rl->snapfile,
                        (unsigned long long)m->server_id);
            continue;
        }
        if (m->type == RAFT_APPEND_ENTRIES && m->append_entries.n_entries > 0) {
            struct raft_append_entries *ae = &m->append_entries;
            struct raft_entry *es = ordo_xmalloc(ae->n_entries * sizeof *es);
            unsigned got = 0;
            for (; got < ae->n_entries; got++) {
                const struct raft_entry *e = raft_store_entry(rl->store, ae->prev_log_index + 1 + got);
                if (e == NULL)
                    break;
                es[got] = *e;
            }
            struct raft_message mm = *m;
            mm.append_entries.entries = es;
            mm.append_entries.n_entries = got;
            raft_net_send(rl->net, &mm);
            free(es);
            continue;
        }
        raft_net_send(rl->net, m);
    }
}

static void apply_committed(raft_log_t *rl);
static void state_changed(raft_log_t *rl);
static void change_finish(raft_log_t *rl, int status, const char *msg);
static void check_change(raft_log_t *rl);

static void handle_snapshot_update(raft_log_t *rl, struct raft_update *u)
{
    /* The leader's snapshot, received whole by the net into a file whose
     * path is the data: it becomes this member's snapshot file, then the
     * store's metadata (raft_store_install), so at every moment the
     * metadata names a snapshot file at or past it. The configuration is
     * ours until it goes back to the engine with the event. */
    const char *path = u->snapshot.chunk.base;
    char err[300];
    if (path == NULL || u->snapshot.chunk.len == 0 || memchr(path, '\0', u->snapshot.chunk.len) == NULL) {
        raft_configuration_close(&u->snapshot.metadata.configuration);
        fail(rl, "a snapshot from the leader arrived without its file");
        return;
    }
    if (rename(path, rl->snapfile) != 0) {
        snprintf(err, sizeof err, "cannot move the received snapshot into place: %s", strerror(errno));
        raft_configuration_close(&u->snapshot.metadata.configuration);
        fail(rl, err);
        return;
    }
    int dfd = open(rl->snapdir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    raft_store_snap_t sn = {.index = u->snapshot.metadata.index, .term = u->snapshot.metadata.term,
                            .conf_index = u->snapshot.metadata.configuration_index,
                            .conf = u->snapshot.metadata.configuration};
    if (raft_store_install(rl->store, &sn, err, sizeof err) != 0) {
        raft_configuration_close(&u->snapshot.metadata.configuration);
        fail(rl, err);
        return;
    }
    rl->install_pending = true;
    rl->install_index = sn.index;
    struct raft_event ev = {.type = RAFT_PERSISTED_SNAPSHOT};
    ev.persisted_snapshot.metadata = u->snapshot.metadata;
    ev.persisted_snapshot.offset = 0;
    ev.persisted_snapshot.last = true;
    int rv = step(rl, &ev);
    if (rv != 0)
        fprintf(stderr, "ordod: cluster: raft persisted snapshot: %s\n", raft_strerror(rv));
}

static void handle_update(raft_log_t *rl, struct raft_update *u)
{
    char err[300];
    bool mute = false;
    if ((u->flags & (RAFT_UPDATE_CURRENT_TERM | RAFT_UPDATE_VOTED_FOR)) || rl->meta_unsaved) {
        if (raft_store_set_term_vote(rl->store, raft_current_term(&rl->raft), raft_voted_for(&rl->raft), err,
                                     sizeof err) != 0) {
            /* A term or vote that is not durable must not be acted on: this
             * member sends nothing (no vote, no answer) until it is, and
             * tries again at every later event (a full disk frees up). Not
             * answering is always safe in raft. */
            if (!rl->meta_unsaved)
                fprintf(stderr, "ordod: cluster: cannot store the term and vote (%s); silent until it can\n", err);
            rl->meta_unsaved = true;
            mute = true;
        } else if (rl->meta_unsaved) {
            rl->meta_unsaved = false;
            fprintf(stderr, "ordod: cluster: the term and vote are stored again\n");
        }
    }
    if (u->flags & RAFT_UPDATE_ENTRIES) {
        int rc = raft_store_append(rl->store, u->entries.index, u->entries.batch, u->entries.n, err, sizeof err);
        /* Entries received from the leader come in the message's batch,
         * which the engine handed over with them (on_receive); submitted
         * ones are this member's own (no batch). The store copied them. */
        if (u->entries.n > 0 && u->entries.batch[0].batch != NULL)
            raft_free(u->entries.batch[0].batch);
        if (rc != 0) {
            fail(rl, err);
            return;
        }
    }
    if ((u->flags & RAFT_UPDATE_MESSAGES) && !mute)
        send_messages(rl, u->messages.batch, u->messages.n);
    /* From here on the engine may be stepped again. */
    if (u->flags & RAFT_UPDATE_SNAPSHOT) {
        void *path = u->snapshot.chunk.base;
        handle_snapshot_update(rl, u);
        raft_free(path);
    }
    if (u->flags & RAFT_UPDATE_STATE)
        state_changed(rl);
    if (u->flags & RAFT_UPDATE_COMMIT_INDEX)
        apply_committed(rl);
    check_change(rl);
    arm_timer(rl);
}

/* The store says entries up to last are durable. */
static void on_persisted(void *arg, uint64_t first, uint64_t last)
{
    raft_log_t *rl = arg;
    (void)first;
    if (rl->bootstrapping) {
        rl->bootstrapping = false;
        return;
    }
    if (!rl->started || rl->stopping)
        return;
    uint64_t top = raft_last_index(&rl->raft);
    if (last > top)
        last = top;
    if (last <= rl->raft.last_stored)
        return;
    struct raft_event ev = {.type = RAFT_PERSISTED_ENTRIES};
    ev.persisted_entries.index = last;
    int rv = step(rl, &ev);
    if (rv != 0 && rv != RAFT_SHUTDOWN)
        fprintf(stderr, "ordod: cluster: raft persisted entries: %s\n", raft_strerror(rv));
}

/* The net hands over a message (it frees m after: what the engine keeps
 * is copied). */
static void on_receive(void *arg, struct raft_message *m)
{
    raft_log_t *rl = arg;
    if (!rl->started || rl->stopping || rl->failed[0] != '\0')
        return;
    struct raft_event ev = {.type = RAFT_RECEIVE};
    struct raft_message copy = *m;
    if (m->type == RAFT_INSTALL_SNAPSHOT) {
        /* The engine owns the configuration and data it is given: it frees
         * them, or hands them to the update (handle_snapshot_update), except
         * while it installs another, when it would drop them: not given. */
        /* This member's own snapshot gives way (it would cover a state
         * about to be replaced), unless its file may be being renamed into
         * place right now (every key written and its revision committed:
         * the commit runs on a worker). */
        if (rl->snap_on && !(rl->snap_keys_done && rl->committed_rev >= rl->snap.rev))
            rl->snap_abort = true;
        if (rl->raft.snapshot.installing || (rl->snap_on && !rl->snap_abort)) {
            /* Not now: raft sends it again (install-snapshot timeout). */
            if (m->install_snapshot.data.base != NULL && m->install_snapshot.data.len > 0 &&
                memchr(m->install_snapshot.data.base, '\0', m->install_snapshot.data.len) != NULL)
                (void)unlink(m->install_snapshot.data.base);
            return;
        }
        if (conf_copy(&m->install_snapshot.conf, &copy.install_snapshot.conf) != 0)
            return;
        void *p = raft_malloc(m->install_snapshot.data.len ? m->install_snapshot.data.len : 1);
        if (p == NULL) {
            raft_configuration_close(&copy.install_snapshot.conf);
            return;
        }
        memcpy(p, m->install_snapshot.data.base, m->install_snapshot.data.len);
        copy.install_snapshot.data.base = p;
    }
    ev.receive.message = &copy;
    int rv = step(rl, &ev);
    if (m->type == RAFT_APPEND_ENTRIES) {
        /* The engine took the entries' batch (raft_wire decodes the array
         * and the data as one raft_malloc'd batch): it frees it when it
         * needs nothing (a heartbeat's, entries it has, a rejection), or
         * hands it to the update, after which handle_update() frees it.
         * The net must not free it again. */
        m->append_entries.entries = NULL;
        m->append_entries.n_entries = 0;
    }
    if (rv != 0 && rv != RAFT_SHUTDOWN)
        fprintf(stderr, "ordod: cluster: raft receive: %s\n", raft_strerror(rv));
}

/* raft_net's is_member hook: id is in the latest configuration. Before
 * the engine runs, or while this member knows no configuration yet (one
 * waiting to be added learns it from the leader's connection), the
 * certificate's name alone vouches. */
static bool on_is_member(void *arg, uint64_t id)
{
    raft_log_t *rl = arg;
    if (!rl->started || rl->raft.configuration.n == 0)
        return true;
    for (unsigned i = 0; i < rl->raft.configuration.n; i++)
        if (rl->raft.configuration.servers[i].id == id)
            return true;
    return false;
}

static uint64_t on_term(void *arg)
{
    raft_log_t *rl = arg;
    return rl->started ? raft_current_term(&rl->raft) : 0;
}


/* ---- applying what raft committed ----------------------------------------------- */

/* The leader's snapshot stored here (install_pending) becomes the state
 * once raft commits its index. */
static void restore_installed(raft_log_t *rl)
{
    uint64_t rev = 0;
    if (rl->fsm_hooks.restore(rl->fsm_hooks.arg, rl->snapdir, &rev) != 0) {
        fail(rl, "the snapshot from the leader cannot be loaded");
        return;
    }
    rl->install_pending = false;
    rl->applied_index = rl->install_index;
    rl->committed_rev = rev;
    /* The state is the leader's now: this member's own entries still in
     * flight from when it led are gone with the state they were in. */
    rl->fcount = 0;
    rl->inflight_bytes = 0;
    rl->snapshots_restored++;
    wake(rl);
}

/* A committed command entry, on a member that did not propose it: its
 * records past committed_rev go to the writer (hooks.deliver). */
static size_t deliver_entry(raft_log_t *rl, uint64_t index, const struct raft_entry *e)
{
    size_t applied = 0;
    log_batch_t b;
    char why[200];
    int rc = raft_entry_batch(e->buf.base, e->buf.len, &b);
    if (rc == RAFT_ENTRY_FOREIGN) {
        snprintf(why, sizeof why, "the committed entry %llu is not an ordo entry (%zu bytes)",
                 (unsigned long long)index, e->buf.len);
        fail(rl, why);
        return applied;
    }
    if (rc != 0) {
        snprintf(why, sizeof why, "the committed entry %llu is malformed (a record runs past its batch)",
                 (unsigned long long)index);
        fail(rl, why);
        return applied;
    }
    size_t pos = 0;
    uint64_t rev;
    const void *rec;
    size_t len;
    while (log_batch_next(&b, &pos, &rev, &rec, &len)) {
        if (rev <= rl->committed_rev) {
            rl->records_skipped++; /* in the snapshot already */
            continue;
        }
        if (rl->base.hooks.deliver(rl->base.hooks.arg, rev, rec, len) != 0) {
            snprintf(why, sizeof why, "the committed record of revision %llu does not apply here",
                     (unsigned long long)rev);
            fail(rl, why);
            return applied;
        }
        rl->committed_rev = rev;
        applied++;
    }
    return applied;
}

/* One of this member's proposals came back committed: it is done, and
 * commits (its position) once everything before it has (advance()). */
static void own_committed(raft_log_t *rl, pend_t *p)
{
    p->done = true;
    if (p->kind == PEND_ENTRY) {
        rl->committed_rev = p->last_rev;
        rl->inflight_bytes -= p->len;
    }
    if (p->kind == PEND_BARRIER && p->lead && raft_state(&rl->raft) == RAFT_LEADER && !rl->diverged &&
        rl->failed[0] == '\0' && !rl->transferring) {
        rl->leading = true;
        fprintf(stderr, "ordod: cluster: leading (term %llu)\n", (unsigned long long)raft_current_term(&rl->raft));
        rl->fsm_hooks.role(rl->fsm_hooks.arg, true, false);
    }
    advance(rl);
}

static void apply_change(raft_log_t *rl, uint64_t index, const struct raft_entry *e)
{
    struct raft_event ev = {.type = RAFT_CONFIGURATION};
    ev.configuration.index = index;
    if (raft_configuration_decode(&e->buf, &ev.configuration.conf) != 0) {
        fail(rl, "a committed configuration entry cannot be decoded");
        return;
    }
    if (rl->change_running && rl->change_index == index)
        rl->change_index = 0; /* committed: check_change() finishes it */
    int rv = step(rl, &ev);
    if (rv != 0 && rv != RAFT_SHUTDOWN)
        fprintf(stderr, "ordod: cluster: raft configuration: %s\n", raft_strerror(rv));
}

/* Where the oldest proposal of this member not yet committed is in the
 * FIFO, or rl->fcount if there is none. */
static size_t first_proposal_at(const raft_log_t *rl)
{
    size_t i = 0;
    for (; i < rl->fcount; i++) {
        const pend_t *p = &rl->fifo[(rl->fhead + i) % rl->fcap];
        if (p->kind != PEND_ROUND && !p->done)
            break;
    }
    return i;
}

/* The oldest proposal of this member not yet committed, or NULL. */
static pend_t *first_proposal(raft_log_t *rl)
{
    size_t at = first_proposal_at(rl);
    return at < rl->fcount ? fifo_at(rl, at) : NULL;
}

static void apply_committed(raft_log_t *rl)
{
    if (rl->diverged || rl->failed[0] != '\0')
        return;
    uint64_t commit = raft_commit_index(&rl->raft);
    if (rl->install_pending) {
        if (commit < rl->install_index)
            return;
        restore_installed(rl);
        if (rl->failed[0] != '\0')
            return;
    }
    size_t budget = APPLY_BUDGET_RECORDS;
    while (rl->applied_index < commit && !rl->diverged && rl->failed[0] == '\0') {
        if (budget == 0) {
            /* The rest on the next loop turn: the loop answers the leader's
             * heartbeats and its clients in between. */
            rl->apply_more = true;
            uv_idle_start(&rl->nudge, on_idle);
            break;
        }
        uint64_t index = rl->applied_index + 1;
        const struct raft_entry *e = raft_store_entry(rl->store, index);
        if (e == NULL)
            break; /* not held here (a snapshot from the leader comes) */
        rl->applied_index = index;
        pend_t *p = first_proposal(rl);
        if (p != NULL && p->index == index) {
            if (p->term != e->term) {
                diverge(rl, "an entry of another leader replaced this member's own");
                return;
            }
            own_committed(rl, p);
            if (rl->snap_on && rl->committed_rev <= rl->snap.rev)
                rl->snap_index = index;
            continue;
        }
        if (p != NULL && p->index < index) {
            diverge(rl, "an entry of this member was not committed where it was proposed");
            return;
        }
        /* Not this member's: a follower's entry, or an earlier leader's
         * before this one's first proposal. */
        if (e->type == RAFT_COMMAND) {
            size_t n = deliver_entry(rl, index, e);
            budget = n >= budget ? 0 : budget - n;
        }
        else if (e->type == RAFT_CHANGE)
            apply_change(rl, index, e);
        /* RAFT_BARRIER: nothing to apply. */
        if (rl->snap_on && rl->committed_rev <= rl->snap.rev)
            rl->snap_index = index; /* every record so far is in the snapshot */
    }
    wake(rl);
}


/* ---- proposals ------------------------------------------------------------------ */

/* Submit one entry (its data is copied by the store). Returns 0 with
 * *index the raft index it took, or a raft error (not the leader, or
 * transferring). */
static int submit(raft_log_t *rl, enum raft_entry_type type, const void *data, size_t len, uint64_t *index)
{
    struct raft_entry e = {.term = raft_current_term(&rl->raft), .type = type,
                           .buf = {.base = (void *)data, .len = len}, .batch = NULL};
    uint64_t at = raft_last_index(&rl->raft) + 1;
    struct raft_event ev = {.type = RAFT_SUBMIT};
    ev.submit.entries = &e;
    ev.submit.n = 1;
    int rv = step(rl, &ev);
    if (rv != 0)
        return rv;
    *index = at;
    return 0;
}

static int propose_barrier(raft_log_t *rl, bool lead)
{
    uint8_t data[BARRIER_BYTES];
    put_u64(data, rl->proposed_pos.v + 1);
    uint64_t index;
    int rv = submit(rl, RAFT_BARRIER, data, sizeof data, &index);
    if (rv != 0)
        return rv;
    rl->proposed_pos.v++;
    fifo_push(rl, (pend_t){.kind = PEND_BARRIER, .pos = rl->proposed_pos, .index = index,
                           .term = raft_current_term(&rl->raft), .lead = lead});
    rl->barriers_proposed++;
    /* A one-member cluster commits on its own persistence; nothing else to do. */
    return 0;
}

static int propose_entry(raft_log_t *rl)
{
    assert(rl->building_records > 0);
    put_u32(rl->building.data + 4, (uint32_t)(rl->building.len - ENTRY_HEADER_BYTES));
    size_t len = rl->building.len;
    uint64_t index;
    int rv = submit(rl, RAFT_COMMAND, rl->building.data, len, &index);
    if (rv != 0) {
        fprintf(stderr, "ordod: cluster: raft submit: %s\n", raft_strerror(rv));
        return -1;
    }
    rl->proposed_pos.v++;
    fifo_push(rl, (pend_t){.kind = PEND_ENTRY, .pos = rl->proposed_pos, .index = index,
                           .term = raft_current_term(&rl->raft), .last_rev = rl->building_last_rev, .len = len});
    rl->inflight_bytes += len;
    rl->entries_proposed++;
    rl->records_written += rl->building_records;
    rl->bytes_proposed += len;
    rl->building.len = 0;
    rl->building_records = 0;
    return 0;
}

/* ---- read rounds ------------------------------------------------------------------ */

static bool is_voter(const struct raft_server *sv) { return sv->role == RAFT_VOTER; }

/* Rounds confirmed by a majority of voters: done (they commit in order). */
static void count_rounds(raft_log_t *rl)
{
    const struct raft_configuration *c = &rl->raft.configuration;
    unsigned voters = 0;
    for (unsigned i = 0; i < c->n; i++)
        voters += is_voter(&c->servers[i]);
    for (size_t k = 0; k < rl->fcount; k++) {
        pend_t *p = fifo_at(rl, k);
        if (p->kind != PEND_ROUND || p->done)
            continue;
        unsigned yes = 0;
        for (unsigned i = 0; i < c->n; i++) {
            const struct raft_server *sv = &c->servers[i];
            if (!is_voter(sv))
                continue;
            if (sv->id == rl->opt.id) {
                yes++;
                continue;
            }
            for (int j = 0; j < rl->nacks; j++)
                if (rl->acks[j].id == sv->id && rl->acks[j].seq >= p->seq)
                    yes++;
        }
        if (yes * 2 > voters) {
            p->done = true;
            rl->rounds_confirmed++;
        }
    }
    advance(rl);
}

/* Ping every other voter with a new round number: the rounds waiting
 * take it (a pong to it was sent after each of them began). */
static void ping(raft_log_t *rl)
{
    if (raft_state(&rl->raft) != RAFT_LEADER)
        return;
    uint64_t term = raft_current_term(&rl->raft);
    if (rl->round_term != term) {
        rl->round_term = term;
        rl->nacks = 0;
    }
    rl->round_seq++;
    for (size_t k = 0; k < rl->fcount; k++) {
        pend_t *p = fifo_at(rl, k);
        if (p->kind == PEND_ROUND && !p->done)
            p->seq = rl->round_seq;
    }
    const struct raft_configuration *c = &rl->raft.configuration;
    uint64_t ids[RAFT_LOG_MAX_MEMBERS];
    const char *addrs[RAFT_LOG_MAX_MEMBERS];
    int n = 0;
    for (unsigned i = 0; i < c->n && n < RAFT_LOG_MAX_MEMBERS; i++)
        if (is_voter(&c->servers[i]) && c->servers[i].id != rl->opt.id) {
            ids[n] = c->servers[i].id;
            addrs[n] = c->servers[i].address;
            n++;
        }
    rl->rounds_pinged++;
    if (n > 0)
        raft_net_ping(rl->net, ids, n, addrs, rl->round_seq);
    count_rounds(rl); /* a one-voter cluster confirms at once */
}

static void arm_round_timer(raft_log_t *rl);

static void on_round_timer(uv_timer_t *t)
{
    raft_log_t *rl = t->data;
    for (size_t k = 0; k < rl->fcount; k++) {
        pend_t *p = fifo_at(rl, k);
        if (p->kind == PEND_ROUND && !p->done) {
            ping(rl); /* a ping or pong was lost, or a member is slow: again */
            arm_round_timer(rl);
            return;
        }
    }
}

static void arm_round_timer(raft_log_t *rl)
{
    unsigned ms = rl->raft.heartbeat_timeout ? rl->raft.heartbeat_timeout : 10;
    uv_timer_start(&rl->round_timer, on_round_timer, ms, 0);
}

static void start_round(raft_log_t *rl)
{
    rl->proposed_pos.v++;
    fifo_push(rl, (pend_t){.kind = PEND_ROUND, .pos = rl->proposed_pos});
    rl->rounds_started++;
    ping(rl);
    if (!uv_is_active((uv_handle_t *)&rl->round_timer))
        arm_round_timer(rl);
}

static void on_pong(void *arg, uint64_t id, uint64_t seq, uint64_t term)
{
    raft_log_t *rl = arg;
    if (!rl->started || raft_state(&rl->raft) != RAFT_LEADER)
        return;
    uint64_t cur = raft_current_term(&rl->raft);
    if (term != cur || rl->round_term != cur || seq > rl->round_seq)
        return; /* an answer for another term confirms nothing */
    int j = 0;
    for (; j < rl->nacks; j++)
        if (rl->acks[j].id == id)
            break;
    if (j == rl->nacks) {
        if (rl->nacks == RAFT_LOG_MAX_MEMBERS)
            return;
        rl->acks[rl->nacks++] = (peer_ack_t){.id = id, .seq = 0};
    }
    if (seq > rl->acks[j].seq)
        rl->acks[j].seq = seq;
    count_rounds(rl);
}


/* ---- roles ---------------------------------------------------------------------- */

/* The engine's state changed (RAFT_UPDATE_STATE). */
static void state_changed(raft_log_t *rl)
{
    bool leader = raft_state(&rl->raft) == RAFT_LEADER;
    if (rl->diverged)
        return;
    if (rl->failed[0] != '\0') {
        if (leader)
            hand_off(rl);
        return;
    }
    if (leader && !rl->was_leader) {
        rl->was_leader = true;
        rl->nacks = 0;
        rl->round_term = raft_current_term(&rl->raft);
        int rv = propose_barrier(rl, true);
        if (rv != 0)
            fprintf(stderr, "ordod: cluster: cannot propose the new leader's barrier: %s\n", raft_strerror(rv));
    } else if (!leader && rl->was_leader) {
        rl->was_leader = false;
        bool had_lead = rl->leading || rl->transferring;
        rl->leading = false;
        /* Records applied but never proposed can never be committed. */
        if (rl->building_records > 0) {
            rl->building.len = 0;
            rl->building_records = 0;
            diverge(rl, "leadership lost with this turn's records unproposed");
            return;
        }
        /* Entries in flight may still be committed by the next leader (a
         * transfer's target has them all): they stay in the FIFO and are
         * matched by index and term as they commit; another entry
         * committed where one of them was makes the state diverge then
         * (apply_committed). Read rounds are never confirmed now. */
        size_t kept = 0;
        for (size_t i = 0; i < rl->fcount; i++) {
            pend_t p = *fifo_at(rl, i);
            if (p.kind != PEND_ROUND)
                rl->fifo[(rl->fhead + kept++) % rl->fcap] = p;
        }
        rl->fcount = kept;
        uv_timer_stop(&rl->round_timer);
        fprintf(stderr, "ordod: cluster: no longer the leader (term %llu)%s\n",
                (unsigned long long)raft_current_term(&rl->raft),
                kept ? "; its entries in flight commit or not under the next leader" : "");
        if (had_lead)
            rl->fsm_hooks.role(rl->fsm_hooks.arg, false, false);
        if (rl->change_running && !rl->transferring) {
            snprintf(rl->change_err, sizeof rl->change_err, "leadership lost");
            change_finish(rl, -1, rl->change_err);
        }
    }
}

/* A failed member (fail()), or one that cannot write its log, leads
 * nothing: it hands leadership to another at once (raft picks). */
static void hand_off(raft_log_t *rl)
{
    if (rl->transferring || raft_transferee(&rl->raft) != 0)
        return;
    struct raft_event ev = {.type = RAFT_TRANSFER};
    ev.transfer.server_id = 0;
    int rv = step(rl, &ev);
    if (rv != 0 && rv != RAFT_SHUTDOWN)
        fprintf(stderr, "ordod: cluster: cannot hand leadership over: %s\n", raft_strerror(rv));
}

/* ---- membership ------------------------------------------------------------------ */

static const struct raft_server *conf_get(const struct raft_configuration *c, uint64_t id)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->servers[i].id == id)
            return &c->servers[i];
    return NULL;
}

/* Submit a configuration: the current one changed by the caller. */
static int submit_conf(raft_log_t *rl, const struct raft_configuration *c, char *err, size_t elen)
{
    struct raft_buffer buf;
    if (raft_configuration_encode(c, &buf) != 0) {
        snprintf(err, elen, "out of memory encoding the configuration");
        return -1;
    }
    uint64_t index;
    int rv = submit(rl, RAFT_CHANGE, buf.base, buf.len, &index);
    raft_free(buf.base);
    if (rv != 0) {
        snprintf(err, elen, "%s", raft_strerror(rv));
        return -1;
    }
    rl->change_index = index;
    return 0;
}

/* The current configuration with id set to role (or removed: role -1). */
static int conf_with(raft_log_t *rl, uint64_t id, const char *address, int role, struct raft_configuration *out)
{
    raft_configuration_init(out);
    const struct raft_configuration *c = &rl->raft.configuration;
    bool found = false;
    for (unsigned i = 0; i < c->n; i++) {
        const struct raft_server *sv = &c->servers[i];
        if (sv->id == id) {
            found = true;
            if (role < 0)
                continue;
            if (raft_configuration_add(out, sv->id, sv->address, role) != 0)
                goto oom;
            continue;
        }
        if (raft_configuration_add(out, sv->id, sv->address, sv->role) != 0)
            goto oom;
    }
    if (!found && role >= 0 && raft_configuration_add(out, id, address, role) != 0)
        goto oom;
    return 0;
oom:
    raft_configuration_close(out);
    return -1;
}

static void change_finish(raft_log_t *rl, int status, const char *msg)
{
    rl->change = CHANGE_NONE;
    rl->change_running = false;
    rl->change_index = 0;
    rl->fsm_hooks.change_done(rl->fsm_hooks.arg, status, msg);
}

/* Roll back a member added as a spare whose catch-up failed, so a failed
 * CLUSTER ADD leaves the configuration as it was. */
static void rollback_add(raft_log_t *rl, const char *why)
{
    snprintf(rl->change_err, sizeof rl->change_err, "%s", why);
    struct raft_configuration c;
    char err[200];
    if (conf_with(rl, rl->change_id, NULL, -1, &c) != 0 || submit_conf(rl, &c, err, sizeof err) != 0) {
        if (c.servers != NULL || c.n)
            raft_configuration_close(&c);
        change_finish(rl, -1, rl->change_err);
        return;
    }
    raft_configuration_close(&c);
    rl->change = CHANGE_ROLLBACK;
}

/* After each update: how the membership change or transfer running stands. */
static void check_change_step(raft_log_t *rl);

static void check_change(raft_log_t *rl)
{
    if (rl->in_check)
        return;
    rl->in_check = true;
    check_change_step(rl);
    rl->in_check = false;
}

static void check_change_step(raft_log_t *rl)
{
    if (rl->transferring && !rl->transfer_pending && raft_transferee(&rl->raft) == 0) {
        /* The transfer ended: done if the target leads (or this member
         * does not lead any more: another does), else again or given up. */
        raft_id lid = 0;
        const char *laddr = NULL;
        raft_leader(&rl->raft, &lid, &laddr);
        bool leads = raft_state(&rl->raft) == RAFT_LEADER;
        if (leads && rl->transfer_target != 0 && ++rl->transfer_attempts < TRANSFER_ATTEMPTS) {
            struct raft_event ev = {.type = RAFT_TRANSFER};
            ev.transfer.server_id = rl->transfer_target;
            if (step(rl, &ev) == 0 && raft_transferee(&rl->raft) != 0)
                return;
        }
        if (!leads && lid == 0)
            return; /* wait until a leader is known */
        rl->transferring = false;
        if (leads) {
            fprintf(stderr, "ordod: cluster: the transfer did not happen; leading again\n");
            rl->was_leader = false; /* leads again from a new barrier */
            state_changed(rl);
        }
        change_finish(rl, !leads && (rl->transfer_target == 0 || lid == rl->transfer_target) ? 0 : -1,
                      leads ? "the transfer did not happen" : "another member was elected");
        return;
    }
    if (!rl->change_running || rl->transferring)
        return;
    if (rl->change == CHANGE_CATCH_UP) {
        /* The new member is a standby (it is sent the log, it does not
         * vote): it becomes a voter once it is within CATCH_UP_SLACK
         * entries of the leader's log, or the ADD is undone after
         * catch_up_timeout_ms. (Raft's own catch-up, RAFT_CATCH_UP, cannot
         * be cancelled in 0.22.1: a member that never answers would block
         * every later change.) */
        raft_index match = 0;
        uint64_t last = raft_last_index(&rl->raft);
        if (raft_match_index(&rl->raft, rl->change_id, &match) == 0 && match + CATCH_UP_SLACK >= last &&
            match > 0) {
            struct raft_configuration c;
            char err[200];
            if (conf_with(rl, rl->change_id, NULL, RAFT_VOTER, &c) != 0) {
                rollback_add(rl, "out of memory");
                return;
            }
            int rv = submit_conf(rl, &c, err, sizeof err);
            raft_configuration_close(&c);
            if (rv != 0) {
                rollback_add(rl, err);
                return;
            }
            rl->change = CHANGE_COMMIT;
            return;
        }
        if (uv_now(rl->opt.loop) - rl->change_started > rl->opt.catch_up_timeout_ms) {
            char why[200];
            snprintf(why, sizeof why,
                     "member %llu did not catch up within %llu ms (is it running, reachable, and started with "
                     "--cluster-join yes?)",
                     (unsigned long long)rl->change_id, (unsigned long long)rl->opt.catch_up_timeout_ms);
            rollback_add(rl, why);
        }
        return;
    }
    if (rl->change_index != 0)
        return; /* its configuration entry is not committed yet */
    if (rl->change == CHANGE_ROLLBACK) {
        change_finish(rl, -1, rl->change_err);
        return;
    }
    if (rl->change == CHANGE_COMMIT) {
        change_finish(rl, 0, NULL);
        return;
    }
    /* CHANGE_NONE with change_running: an add's standby entry committed:
     * the member is being sent the log; wait for it to catch up. */
    rl->change = CHANGE_CATCH_UP;
    rl->change_started = uv_now(rl->opt.loop);
}


/* ---- the seam ------------------------------------------------------------------- */

static int rl_load_snapshot(log_t *l, core_t *core, uint64_t *rev_out, uint64_t *entries_out, char *err, size_t elen)
{
    (void)l, (void)core, (void)err, (void)elen;
    *rev_out = 0; /* raft_log_start() restores the snapshot (fsm->restore) */
    *entries_out = 0;
    return 0;
}

static int rl_replay(log_t *l, uint64_t after_rev, log_record_fn fn, void *arg, char *err, size_t elen)
{
    (void)l, (void)after_rev, (void)fn, (void)arg, (void)err, (void)elen;
    return 0; /* committed entries are applied as raft learns they are */
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

static int rl_flush(log_t *l)
{
    raft_log_t *rl = rl_of(l);
    if (rl->building_records > 0) {
        if (propose_entry(rl) != 0) {
            /* Not the leader any more (or transferring): these records were
             * applied here and will never be committed. */
            rl->building.len = 0;
            rl->building_records = 0;
            diverge(rl, "cannot propose this turn's records");
            return 0;
        }
    }
    if (rl->need_round) {
        rl->need_round = false;
        if (rl->leading)
            start_round(rl);
    }
    if (rl->transfer_pending) {
        rl->transfer_pending = false;
        struct raft_event ev = {.type = RAFT_TRANSFER};
        ev.transfer.server_id = rl->transfer_target;
        int rv = step(rl, &ev);
        if (rv != 0) {
            fprintf(stderr, "ordod: cluster: transfer: %s\n", raft_strerror(rv));
            rl->transferring = false;
            rl->was_leader = false;
            state_changed(rl); /* leads again, from a new barrier */
            change_finish(rl, -1, raft_strerror(rv));
        }
    }
    return 0;
}

static log_pos_t rl_poll(log_t *l) { return rl_of(l)->committed_pos; }

static uint64_t rl_committed_rev(const log_t *l) { return rl_of_c(l)->committed_rev; }

/* The position output made now waits for: this turn's entry if it has
 * records, and a read round after it (flushed at the turn's end), so a
 * read is answered only once a majority confirmed, after it arrived, that
 * this member still leads. */
static log_pos_t rl_mark(log_t *l, uint64_t rev)
{
    (void)rev;
    raft_log_t *rl = rl_of(l);
    if (!rl->leading)
        return rl->committed_pos; /* a follower answers nothing that depends on state */
    rl->need_round = true;
    return LOG_POS(rl->proposed_pos.v + (rl->building_records > 0 ? 2 : 1));
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
    if (rl->started)
        watch_store(rl);
    if (!rl->leading)
        return false; /* it takes no writes: clients are read, and sent to the leader */
    return rl->store_failing_since != 0 || rl->inflight_bytes + rl->building.len > rl->opt.pending_bytes_max;
}

/* ---- snapshots: ordod's own, sliced, taken when persist_cron says ------------- */

static int rl_snapshot_begin(log_t *l, const core_t *core, uint64_t now_ms, log_snapshot_t *out, char *err,
                             size_t elen)
{
    raft_log_t *rl = rl_of(l);
    if (rl->snap_on) {
        snprintf(err, elen, "a snapshot is being written already");
        return -1;
    }
    if (rl->install_pending || rl->diverged || rl->failed[0] != '\0') {
        snprintf(err, elen, "the state is being replaced");
        return -1;
    }
    if (snap_writer_begin(&rl->snap, rl->snapdir, core, now_ms, err, elen) != 0)
        return -1;
    rl->snap_on = true;
    rl->snap_keys_done = false;
    rl->snap_index = rl->committed_rev <= rl->snap.rev ? rl->applied_index : 0;
    memset(out, 0, sizeof *out);
    out->rev = rl->snap.rev;
    out->point = rl->snap.point;
    return 0;
}

/* Write a slice; once every key is written, wait (returning 0) until the
 * snapshot's revision is committed: a leader's state runs ahead of the
 * log, and a snapshot must hold only what the cluster committed. That
 * wait lasts a commit round, at most until leadership is lost. */
static int rl_snapshot_slice(log_t *l, const core_t *core, size_t max_keys, char *err, size_t elen)
{
    raft_log_t *rl = rl_of(l);
    if (rl->snap_abort || rl->install_pending || rl->diverged || rl->failed[0] != '\0' || !rl->snap_on) {
        snprintf(err, elen, "the state is being replaced");
        return -1;
    }
    if (!rl->snap_keys_done) {
        int rc = snap_writer_step(&rl->snap, core, max_keys, err, elen);
        if (rc <= 0)
            return rc;
        rl->snap_keys_done = true;
    }
    if (rl->committed_rev >= rl->snap.rev)
        return 1;
    if (!rl->leading) {
        /* Records of this member's own that the cluster has not committed
         * (it led, and lost leadership with entries in flight): they may
         * never be, so the snapshot is given up rather than waited on. */
        snprintf(err, elen, "its revision %llu is not committed and this member no longer leads",
                 (unsigned long long)rl->snap.rev);
        return -1;
    }
    return 0;
}

static int rl_snapshot_commit(log_t *l, char *err, size_t elen)
{
    return snap_writer_commit(&rl_of(l)->snap, err, elen);
}

/* A committed snapshot file: its metadata to the store (which compacts
 * the log), then to the engine. */
static void report_snapshot(raft_log_t *rl)
{
    uint64_t index = rl->snap_index;
    const struct raft_entry *e = index ? raft_store_entry(rl->store, index) : NULL;
    if (e == NULL || index <= raft_store_snapshot(rl->store)->index || rl->install_pending)
        return; /* nothing new, or the log moved under it: the next one reports */
    if (rl->raft.configuration_committed_index > index)
        return; /* a configuration committed after it: the next one reports */
    raft_store_snap_t sn = {.index = index, .term = e->term,
                            .conf_index = rl->raft.configuration_committed_index,
                            .conf = rl->raft.configuration_committed};
    char err[300];
    if (raft_store_set_snapshot(rl->store, &sn, rl->opt.snapshot_trailing, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: cluster: cannot record the snapshot: %s\n", err);
        return;
    }
    struct raft_event ev = {.type = RAFT_SNAPSHOT};
    ev.snapshot.metadata.index = sn.index;
    ev.snapshot.metadata.term = sn.term;
    ev.snapshot.metadata.configuration_index = sn.conf_index;
    if (conf_copy(&sn.conf, &ev.snapshot.metadata.configuration) != 0)
        return;
    ev.snapshot.trailing = (unsigned)rl->opt.snapshot_trailing;
    int rv = step(rl, &ev);
    if (rv != 0)
        fprintf(stderr, "ordod: cluster: raft snapshot: %s\n", raft_strerror(rv));
    rl->snapshots_taken++;
}

static void rl_snapshot_end(log_t *l, bool ok, log_snapshot_t *out)
{
    raft_log_t *rl = rl_of(l);
    memset(out, 0, sizeof *out);
    if (!rl->snap_on)
        return;
    out->rev = rl->snap.rev;
    out->point = rl->snap.point;
    out->entries = rl->snap.entries;
    if (ok)
        report_snapshot(rl);
    snap_writer_abort(&rl->snap); /* frees buffers; after a commit the file is already renamed */
    rl->snap_on = false;
    rl->snap_abort = false;
}

static void rl_stats(const log_t *l, log_stats_t *out)
{
    const raft_log_t *rl = rl_of_c(l);
    memset(out, 0, sizeof *out);
    raft_store_stats_t st;
    raft_store_stats(rl->store, &st);
    out->bytes = st.disk_bytes;
    out->records_written = rl->records_written;
    out->batches = st.writes;
    out->syncs = st.syncs;
    out->pending_bytes = rl->inflight_bytes + rl->building.len;
    /* A member that led and lost leadership with entries in flight holds
     * records that may never be committed: no snapshot until they are
     * settled (committed, or the state rebuilt). */
    bool own_pending = !rl->leading && first_proposal_at(rl) < rl->fcount;
    uint64_t since = rl->applied_index - raft_store_snapshot(rl->store)->index;
    out->snapshot_wanted = !rl->snap_on && !rl->install_pending && rl->started && !own_pending &&
                           raft_store_snapshot(rl->store)->index <= rl->applied_index &&
                           since >= rl->opt.snapshot_entries;
}


static void on_net_closed(void *arg)
{
    raft_log_t *rl = arg;
    rl->closed_net = true;
}

static void on_timer_closed(uv_handle_t *h) { (void)h; }

void raft_log_stop(log_t *l)
{
    raft_log_t *rl = rl_of(l);
    if (rl->stopping)
        return;
    rl->stopping = true;
    if (rl->timers_inited) {
        uv_close((uv_handle_t *)&rl->timer, on_timer_closed);
        uv_close((uv_handle_t *)&rl->round_timer, on_timer_closed);
        uv_close((uv_handle_t *)&rl->nudge, on_timer_closed);
        uv_close((uv_handle_t *)&rl->after_io, on_timer_closed);
        rl->timers_inited = false;
    }
    if (rl->net != NULL) {
        raft_net_close(rl->net, on_net_closed, rl);
        rl->net = NULL;
    }
    if (rl->store != NULL)
        raft_store_quiesce(rl->store);
}

static void rl_close(log_t *l)
{
    raft_log_t *rl = rl_of(l);
    raft_log_stop(l);
    /* The loop runs the handles' closes to their end before ordod exits;
     * the store waits for a write in flight. */
    while (!rl->closed_net && rl->started)
        uv_run(rl->opt.loop, UV_RUN_ONCE);
    if (rl->store != NULL)
        raft_store_close(rl->store);
    if (rl->raft_inited)
        raft_close(&rl->raft, NULL);
    if (rl->snap_on)
        snap_writer_abort(&rl->snap);
    if (rl->dir_fd >= 0)
        close(rl->dir_fd);
    ordo_buf_free(&rl->building);
    free(rl->fifo);
    free(rl);
}

/* Files libraft's legacy storage wrote, with none of this store's: a
 * directory from a build before ordod drove the engine itself. */
static bool legacy_files(const char *dir)
{
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/meta", dir);
    if (stat(path, &st) == 0)
        return false;
    snprintf(path, sizeof path, "%s/metadata1", dir);
    if (stat(path, &st) == 0)
        return true;
    snprintf(path, sizeof path, "%s/metadata2", dir);
    return stat(path, &st) == 0;
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

/* Create path if absent; a directory made here is synced into its parent,
 * so a power loss cannot take away a directory whose files were synced. */
static int make_dir(const char *path, char *err, size_t elen)
{
    if (mkdir(path, 0755) != 0) {
        if (errno == EEXIST)
            return 0;
        snprintf(err, elen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    char parent[1200];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, "%s", slash == parent ? "/" : ".");
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        snprintf(err, elen, "cannot sync %s after creating %s: %s", parent, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* The first start of a bootstrapping member: term 1, and the
 * configuration of every listed member as entry 1, durable before raft
 * starts (every member writes the same, so entry 1 matches everywhere). */
static int bootstrap(raft_log_t *rl, char *err, size_t elen)
{
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    for (int i = 0; i < rl->opt.nmembers; i++)
        if (raft_configuration_add(&conf, rl->opt.members[i].id, rl->opt.members[i].raft, RAFT_VOTER) != 0) {
            raft_configuration_close(&conf);
            snprintf(err, elen, "raft: cannot build the configuration");
            return -1;
        }
    struct raft_buffer buf;
    int rv = raft_configuration_encode(&conf, &buf);
    raft_configuration_close(&conf);
    if (rv != 0) {
        snprintf(err, elen, "raft: cannot encode the configuration");
        return -1;
    }
    struct raft_entry e = {.term = 1, .type = RAFT_CHANGE, .buf = buf, .batch = NULL};
    rv = raft_store_set_term_vote(rl->store, 1, 0, err, elen);
    if (rv == 0)
        rv = raft_store_append(rl->store, 1, &e, 1, err, elen);
    raft_free(buf.base);
    if (rv != 0)
        return -1;
    rl->bootstrapping = true;
    while (rl->bootstrapping)
        uv_run(rl->opt.loop, UV_RUN_ONCE); /* on_persisted ends it */
    fprintf(stderr, "ordod: cluster: bootstrapped a %d-member cluster in %s\n", rl->opt.nmembers, rl->raftdir);
    return 0;
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
    snprintf(rl->snapdir, sizeof rl->snapdir, "%s/" SNAPSHOT_SUBDIR, rl->raftdir);
    snprintf(rl->recvdir, sizeof rl->recvdir, "%s/" RECV_SUBDIR, rl->raftdir);
    snprintf(rl->snapfile, sizeof rl->snapfile, "%s/" SNAP_FILE, rl->snapdir);
    if (legacy_files(rl->raftdir)) {
        snprintf(err, elen,
                 "%s holds raft files of an earlier ordod (libraft's own storage: metadata1, metadata2): this "
                 "build keeps its own format and does not read them (docs/operations.md, Upgrading)",
                 rl->raftdir);
        goto fail;
    }
    if (make_dir(rl->raftdir, err, elen) != 0 || make_dir(rl->snapdir, err, elen) != 0 ||
        make_dir(rl->recvdir, err, elen) != 0)
        goto fail;
    if (raft_store_open(rl->raftdir, opt->loop, on_persisted, rl, &rl->store, err, elen) != 0)
        goto fail;
    if (raft_store_cut(rl->store) > 0)
        fprintf(stderr, "ordod: cluster: cut %llu bytes of a torn log tail in %s\n",
                (unsigned long long)raft_store_cut(rl->store), rl->raftdir);
    int rv = raft_init(&rl->raft, NULL, NULL, opt->id, me->raft);
    if (rv != 0) {
        snprintf(err, elen, "raft: %s", raft_strerror(rv));
        goto fail;
    }
    rl->raft_inited = true;
    rl->raft.data = rl;
    raft_seed(&rl->raft, (unsigned)(opt->id * 2654435761u) ^ (unsigned)getpid());
    raft_set_election_timeout(&rl->raft, opt->election_timeout_ms);
    raft_set_heartbeat_timeout(&rl->raft, opt->election_timeout_ms / 10 ? opt->election_timeout_ms / 10 : 1);
    raft_set_install_snapshot_timeout(&rl->raft, opt->install_snapshot_timeout_ms);
    raft_set_pre_vote(&rl->raft, true);
    bool fresh = raft_store_term(rl->store) == 0 && raft_store_last(rl->store) == 0;
    if (fresh && opt->nmembers_bootstrap > 0 && bootstrap(rl, err, elen) != 0)
        goto fail;
    raft_net_options_t no = {.loop = opt->loop, .id = opt->id, .address = me->raft, .bind = me->raft,
                             .recv_dir = rl->recvdir, .snapshot_max_bytes = opt->snapshot_max_bytes,
                             .tls_server = opt->tls_server, .tls_client = opt->tls_client};
    if (raft_net_open(&no, &(raft_net_hooks_t){.receive = on_receive, .term = on_term, .pong = on_pong,
                                            .is_member = on_is_member, .arg = rl},
                      &rl->net, err, elen) != 0)
        goto fail;
    uv_timer_init(opt->loop, &rl->timer);
    uv_timer_init(opt->loop, &rl->round_timer);
    uv_idle_init(opt->loop, &rl->nudge);
    uv_check_init(opt->loop, &rl->after_io);
    rl->timer.data = rl->round_timer.data = rl;
    rl->nudge.data = rl->after_io.data = rl;
    uv_check_start(&rl->after_io, on_after_io);
    uv_unref((uv_handle_t *)&rl->after_io);
    rl->timers_inited = true;
    return &rl->base;
fail:
    rl_close(&rl->base);
    return NULL;
}

int raft_log_start(log_t *l, char *err, size_t elen)
{
    raft_log_t *rl = rl_of(l);
    const raft_store_snap_t *sn = raft_store_snapshot(rl->store);
    struct raft_snapshot_metadata meta;
    struct raft_event ev = {.type = RAFT_START};
    ev.start.term = raft_store_term(rl->store);
    ev.start.voted_for = raft_store_vote(rl->store);
    ev.start.metadata = NULL;
    if (sn->index > 0) {
        /* The snapshot file (at or past the metadata) is the state. */
        uint64_t rev = 0;
        if (rl->fsm_hooks.restore(rl->fsm_hooks.arg, rl->snapdir, &rev) != 0) {
            snprintf(err, elen, "cannot load the snapshot in %s", rl->snapdir);
            return -1;
        }
        rl->committed_rev = rev;
        rl->applied_index = sn->index;
        meta.index = sn->index;
        meta.term = sn->term;
        meta.configuration_index = sn->conf_index;
        if (conf_copy(&sn->conf, &meta.configuration) != 0) {
            snprintf(err, elen, "out of memory");
            return -1;
        }
        ev.start.metadata = &meta;
    }
    uint64_t first = raft_store_first(rl->store), last = raft_store_last(rl->store);
    unsigned n = last >= first ? (unsigned)(last - first + 1) : 0;
    struct raft_entry *es = n ? raft_malloc(n * sizeof *es) : NULL;
    for (unsigned i = 0; i < n; i++)
        es[i] = *raft_store_entry(rl->store, first + i);
    ev.start.start_index = n ? first : sn->index + 1;
    ev.start.entries = es;
    ev.start.n_entries = n;
    rl->started = true;
    int rv = step(rl, &ev);
    raft_free(es);
    if (rv != 0) {
        snprintf(err, elen, "raft start: %s (%s)", raft_strerror(rv), raft_errmsg(&rl->raft));
        return -1;
    }
    arm_timer(rl);
    fprintf(stderr, "ordod: cluster: started at term %llu, entries %llu..%llu, snapshot %llu\n",
            (unsigned long long)ev.start.term, (unsigned long long)first, (unsigned long long)last,
            (unsigned long long)sn->index);
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
        out->applied_index = rl->applied_index;
        out->last_index = raft_last_index(&rl->raft);
        out->members = (int)rl->raft.configuration.n;
    }
    out->entries_proposed = rl->entries_proposed;
    out->barriers_proposed = rl->barriers_proposed;
    out->snapshots_taken = rl->snapshots_taken;
    out->snapshots_restored = rl->snapshots_restored;
    out->inflight_entries = rl->fcount;
    out->inflight_bytes = rl->inflight_bytes;
    out->read_rounds = rl->rounds_started;
    raft_store_stats_t ss;
    raft_store_stats(rl->store, &ss);
    out->store_failing = ss.failing ? ss.failing : rl->meta_unsaved ? "the term and vote cannot be stored" : NULL;
    out->snapshot_index = raft_store_snapshot(rl->store)->index;
}

bool raft_log_leading(const log_t *l) { return rl_of_c(l)->leading; }

bool raft_log_member(log_t *l, int i, raft_log_member_info_t *out)
{
    raft_log_t *rl = rl_of(l);
    if (!rl->started || i < 0 || (unsigned)i >= rl->raft.configuration.n)
        return false;
    const struct raft_server *sv = &rl->raft.configuration.servers[i];
    memset(out, 0, sizeof *out);
    out->id = sv->id;
    client_of(rl, sv->address, out->client, sizeof out->client);
    raft_id lid = 0;
    const char *laddr = NULL;
    raft_leader(&rl->raft, &lid, &laddr);
    out->role = sv->id == lid ? "leader" : sv->role == RAFT_VOTER ? "voter" : sv->role == RAFT_STANDBY ? "standby"
                                                                                                    : "spare";
    out->self = sv->id == rl->opt.id;
    if (out->self) {
        out->live = true;
        out->match_index = raft_last_index(&rl->raft);
        return true;
    }
    raft_net_peer_t p;
    raft_net_peer(rl->net, sv->id, &p);
    uint64_t now = uv_now(rl->opt.loop);
    out->last_contact_ms = p.last_recv_ms ? now - p.last_recv_ms : UINT64_MAX;
    out->live = p.last_recv_ms != 0 && now - p.last_recv_ms <= rl->opt.election_timeout_ms;
    raft_index m = 0;
    if (raft_state(&rl->raft) == RAFT_LEADER && raft_match_index(&rl->raft, sv->id, &m) == 0) {
        out->match_index = m;
        out->lag_entries = raft_last_index(&rl->raft) > m ? raft_last_index(&rl->raft) - m : 0;
    }
    return true;
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
    if (id > RAFT_LOG_MAX_ID) {
        snprintf(err, elen, "member id %llu is past the largest allowed (%llu)", (unsigned long long)id,
                 (unsigned long long)RAFT_LOG_MAX_ID);
        return -1;
    }
    const struct raft_server *cur = conf_get(&rl->raft.configuration, id);
    if (op == RAFT_LOG_TRANSFER) {
        if (id != 0 && (cur == NULL || cur->role != RAFT_VOTER || id == rl->opt.id)) {
            snprintf(err, elen, "member %llu is not another voter of this cluster", (unsigned long long)id);
            return -1;
        }
        /* Until a transfer ends raft takes no entry (0.22.1 refuses them
         * while a transferee is set), so nothing could be answered: this
         * member stops serving now (the caller drops its clients as a
         * deposed leader's), and they go to the next one. The transfer
         * starts at this turn's flush, after the turn's records are
         * proposed; what is in flight still commits. */
        rl->change_running = true;
        rl->transferring = true;
        rl->transfer_pending = true;
        rl->transfer_target = id;
        rl->transfer_attempts = 0;
        rl->leading = false;
        return 0;
    }
    if (id == 0) {
        snprintf(err, elen, "member id 0 is not allowed");
        return -1;
    }
    struct raft_configuration c;
    if (op == RAFT_LOG_ADD) {
        if (cur != NULL) {
            snprintf(err, elen, "member %llu is already in the configuration (as %s)", (unsigned long long)id,
                     raft_role_name(cur->role));
            return -1;
        }
        raft_log_member_t m;
        if (member_of(client, strlen(client), rl->opt.port_offset, &m, err, elen) != 0)
            return -1;
        for (unsigned i = 0; i < rl->raft.configuration.n; i++)
            if (strcmp(rl->raft.configuration.servers[i].address, m.raft) == 0) {
                snprintf(err, elen, "member %llu has the address %s already",
                         (unsigned long long)rl->raft.configuration.servers[i].id, m.raft);
                return -1;
            }
        if (conf_with(rl, id, m.raft, RAFT_STANDBY, &c) != 0) {
            snprintf(err, elen, "out of memory");
            return -1;
        }
    } else {
        if (cur == NULL) {
            snprintf(err, elen, "member %llu is not in the configuration", (unsigned long long)id);
            return -1;
        }
        if (conf_with(rl, id, NULL, -1, &c) != 0) {
            snprintf(err, elen, "out of memory");
            return -1;
        }
    }
    int rv = submit_conf(rl, &c, err, elen);
    raft_configuration_close(&c);
    if (rv != 0)
        return -1;
    rl->change_running = true;
    rl->change_id = id;
    rl->change = op == RAFT_LOG_ADD ? CHANGE_NONE : CHANGE_COMMIT;
    return 0;
}

int raft_log_tls_reload(log_t *l, const ordo_tls_config_t *server, const ordo_tls_config_t *client, char *err,
                        size_t elen)
{
    return raft_net_tls_reload(rl_of(l)->net, server, client, err, elen);
}

int raft_log_partition(log_t *l, const uint64_t *ids, int n)
{
    raft_log_t *rl = rl_of(l);
    return raft_net_partition(rl->net, ids, n);
}
