/*
 * cluster.c -- the writer in cluster mode; see cluster.h.
 *
 * Owns: s->cluster (server.h): the arguments to restart in place with,
 * the one client parked for a membership change or a transfer (and its
 * wait list), and what INFO shows of this member (terms led, the last
 * snapshot's encoding time and size). Whether this member leads is not
 * kept here: cluster_leads() asks the raft log every time, so the two
 * cannot disagree.
 *
 * What the raft log calls lands here: a committed record this member did
 * not apply is applied by persist_apply_stored(), as in recovery; a
 * snapshot is encoded or restored in memory; a new role either re-arms
 * the timers from the replicated deadlines (leading) or answers the
 * parked clients -NOTLEADER and has net drop the connections it cannot
 * vouch for (hooks.drop_unsure). Loop thread only.
 */
#include "cluster.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply.h"
#include "block.h"
#include "coord_wait.h"
#include "core/record.h"
#include "expire.h"
#include "log/raft_log.h"
#include "log/snapshot.h"
#include "persist.h"
#include "queue_wait.h"
#include "turn.h"

/* A snapshot stream to a member is started again (by raft) after this
 * long without an answer: the net ignores the request while the stream
 * runs, so it only matters when a stream broke. */
#define CLUSTER_INSTALL_SNAPSHOT_TIMEOUT_MS 30000u
/* The largest snapshot a member takes from its leader: far above any
 * state that fits in memory, so it only stops a peer streaming garbage
 * for ever. */
#define CLUSTER_SNAPSHOT_MAX_BYTES (256ull << 30)

/* ---- what the raft log calls --------------------------------------------------- */

/* A committed entry's record, on a member that did not apply it at
 * propose: the same apply as recovery, checked against the revision the
 * leader reached with it. */
/* The replicated clock as this member last saw it: the latest record
 * time applied, and when (monotonic). live: seen from a leader in this
 * process's life (a record delivered, a snapshot installed), not only
 * loaded at start. */
static void saw_time(server_t *s, bool live)
{
    uint64_t t = core_last_time_ms(s->core);
    if (t > s->cluster.time_ms || s->cluster.time_mono_ms == 0) {
        s->cluster.time_ms = t;
        s->cluster.time_mono_ms = server_mono_ms();
    }
    if (live && t != 0)
        s->cluster.time_live = true;
}

static int deliver_one(void *arg, uint64_t rev, const void *bytes, size_t len)
{
    char err[256];
    server_t *s = arg;
    if (persist_apply_stored(arg, rev, bytes, len, err, sizeof err) == 0) {
        saw_time(s, true);
        return 0;
    }
    fprintf(stderr, "ordod: cluster: a committed entry does not apply here: %s\n", err);
    return -1;
}

/* The snapshot in dir becomes the state (a leader's snapshot, or this
 * member's own at start). A snapshot being written covers the old state:
 * the raft log refuses to install while one runs, so none does here. */
static int fsm_restore(void *arg, const char *dir, uint64_t *rev_out)
{
    server_t *s = arg;
    core_t *fresh = core_create((uint64_t)s->cfg.history_revs);
    if (fresh != NULL)
        core_set_history(fresh, (uint64_t)s->cfg.history_revs, (uint64_t)s->cfg.history_bytes);
    uint64_t rev = 0, entries = 0, t0 = server_mono_ms();
    char err[512];
    /* The new core tells the writer and the watches what the old one did
     * (set at start-up: cmd_watch.c, coord_wait.c); without them a member
     * restored from a snapshot would, once it leads, serve no watch, lock
     * waiter or parked puller. */
    if (fresh != NULL)
        core_copy_callbacks(fresh, s->core);
    if (fresh == NULL || snap_load(fresh, dir, &rev, &entries, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: cluster: cannot restore a snapshot: %s\n", fresh ? err : "out of memory");
        if (fresh)
            core_destroy(fresh);
        return -1;
    }
    /* Nothing refers into the old core on a member that does not lead:
     * no client is parked and no watch is open (they get -NOTLEADER). */
    core_destroy(s->core);
    s->core = fresh;
    s->cluster.time_mono_ms = 0;
    saw_time(s, s->cluster.started);
    s->persist.snapshot_loaded_rev = rev;
    s->cluster.last_snapshot_ms = server_mono_ms() - t0;
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, SNAP_FILE);
    s->cluster.last_snapshot_bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    *rev_out = rev;
    fprintf(stderr, "ordod: cluster: state restored from a snapshot at revision %llu (%llu entries) in %llu ms\n",
            (unsigned long long)rev, (unsigned long long)entries, (unsigned long long)s->cluster.last_snapshot_ms);
    return 0;
}

/* Restart in place: the state holds records the cluster may never commit. */
static void restart_in_place(server_t *s)
{
    fprintf(stderr, "ordod: cluster: restarting in place to rebuild the state from the log\n");
    fflush(stderr);
    execv("/proc/self/exe", s->cluster.argv);
    fprintf(stderr, "ordod: cluster: cannot restart (%s); exiting\n", strerror(errno));
    _exit(1);
}

/* Leadership ended with nothing in flight: connections whose output
 * waits for a position that may never commit, or was made from the state
 * this member led and not yet marked, are closed (their outcome is unknown
 * here); watchers are closed (they resume, FROM their last revision, on
 * the new leader); then parked clients are answered -NOTLEADER (after the
 * closing, which would take that answer for unsure output). */
static void drop_clients(server_t *s)
{
    char buf[256];
    s->hooks.drop_unsure(s);
    block_notleader(s, cluster_leader(s, buf, sizeof buf));
}

/* This member leads no more, or is handing leadership over (the raft log
 * says so already: cluster_leads() is false). */
static void stop_serving(server_t *s)
{
    assert(!cluster_leads(s));
    drop_clients(s);
}

static void on_role(void *arg, bool leading, bool diverged)
{
    server_t *s = arg;
    /* A failed log (an entry raft could not store) stays failed and
     * read-only, as a single server's: the state is not rebuilt, and this
     * member serves nothing (raft_log.c hands leadership away). */
    if (diverged && log_failed(s->persist.log) == NULL)
        restart_in_place(s);
    if (leading) {
        s->cluster.terms_led++;
        /* The deadlines are replicated state: take them over where the
         * last leader left them. A member that followed a leader in this
         * process's life continues the replicated clock (the last record's
         * time, advanced by its monotonic clock since it saw it), never its
         * wall clock, which may be off by any amount. One that has seen
         * nothing since it started (the whole cluster restarted) has no
         * measure of the time that passed but its wall clock: it resumes
         * as a single server does after recovery, from the later of the
         * two (nothing then expires before its time on a correct clock). */
        saw_time(s, false);
        if (s->cluster.time_live)
            server_clock_continue(s, s->cluster.time_ms + (server_mono_ms() - s->cluster.time_mono_ms));
        else
            server_clock_resume(s, core_last_time_ms(s->core));
        server_tick(s);
        expire_schedule(s);
        coord_wait_schedule(s);
        qwait_rearm(s);
        return;
    }
    stop_serving(s);
}

static void on_change_done(void *arg, int status, const char *msg)
{
    server_t *s = arg;
    waiter_t *w = s->cluster.change_waiter;
    s->cluster.change_waiter = NULL;
    if (w == NULL)
        return; /* its connection went away */
    if (status == 0) {
        block_answer(s, w, &(outcome_t){.kind = OUTCOME_OK});
        return;
    }
    char text[WRITER_REFUSAL_MAX];
    snprintf(text, sizeof text, "ERR cluster change failed: %s", msg ? msg : "unknown");
    block_answer_error(s, w, text);
}

static void change_cancel(waiter_t *w)
{
    server_t *s = w->data;
    if (s->cluster.change_waiter == w)
        s->cluster.change_waiter = NULL;
}

static void change_timeout(waiter_t *w, outcome_t *o, char *buf, size_t blen)
{
    /* Only when the server turns read-only (no deadline is set). */
    change_cancel(w);
    snprintf(buf, blen, "ERR the cluster change's outcome is unknown here: see CLUSTER INFO");
    *o = (outcome_t){.kind = OUTCOME_ERROR, .error.text = buf};
}

/* ---- opening ------------------------------------------------------------------ */

/* Mutual TLS between members from cfg's tls-* options: the member's
 * certificate (its common name node-<id>, log/raft_net.h) and the
 * cluster's CA (strings point into cfg). 0, or -1 with err. */
static int members_tls(const ordo_config_t *cfg, ordo_tls_config_t *out, char *err, size_t elen)
{
    *out = (ordo_tls_config_t){.cert_file = cfg->tls_cert_file, .key_file = cfg->tls_key_file,
                               .ca_file = cfg->tls_ca_cert_file, .protocols = cfg->tls_protocols,
                               .ciphers = cfg->tls_ciphers, .ciphersuites = cfg->tls_ciphersuites};
    if (cfg->tls_ca_cert_file[0] == '\0') {
        snprintf(err, elen, "tls-cluster needs tls-ca-cert-file (the CA members' certificates are verified against)");
        return -1;
    }
    return 0;
}

int cluster_tls_reload(server_t *s, const ordo_config_t *cfg, char *err, size_t elen)
{
    if (!cluster_enabled(s) || !s->cfg.tls_cluster || s->persist.log == NULL)
        return 0;
    ordo_tls_config_t tls;
    if (members_tls(cfg, &tls, err, elen) != 0)
        return -1;
    return raft_log_tls_reload(s->persist.log, &tls, &tls, err, elen);
}

/* The address the list gives this member is the one every member sends
 * its clients to (-NOTLEADER, CLUSTER MEMBERS, ROLE): a port that is
 * neither its port nor its tls-port leads them nowhere. Logged, not
 * refused: a member behind a port mapping is reached on another port than
 * it listens on. */
static void check_own_address(const server_t *s, const raft_log_options_t *opt)
{
    for (int i = 0; i < opt->nmembers; i++) {
        if (opt->members[i].id != (uint64_t)s->cfg.node_id)
            continue;
        const char *colon = strrchr(opt->members[i].client, ':');
        assert(colon != NULL); /* raft_cluster_parse() made it HOST:PORT */
        long port = strtol(colon + 1, NULL, 10);
        if (port != s->cfg.port && port != s->cfg.tls_port)
            fprintf(stderr,
                    "ordod: cluster: member %lld's address %s in --cluster is neither its port (%lld) nor its "
                    "tls-port (%lld): clients sent there reach no door of it\n",
                    (long long)s->cfg.node_id, opt->members[i].client, (long long)s->cfg.port,
                    (long long)s->cfg.tls_port);
    }
}

int cluster_open(server_t *s, const log_hooks_t *wake, char *err, size_t elen)
{
    raft_log_options_t opt = {
        .dir = s->cfg.dir,
        .loop = s->loop,
        .id = (uint64_t)s->cfg.node_id,
        .port_offset = (uint16_t)s->cfg.cluster_port_offset,
        .election_timeout_ms = (unsigned)s->cfg.cluster_election_timeout_ms,
        .snapshot_entries = (unsigned)s->cfg.cluster_snapshot_entries,
        .snapshot_trailing = (unsigned)s->cfg.cluster_snapshot_trailing,
        .install_snapshot_timeout_ms = CLUSTER_INSTALL_SNAPSHOT_TIMEOUT_MS,
        .catch_up_timeout_ms = (uint64_t)s->cfg.cluster_catch_up_timeout_ms,
        .snapshot_max_bytes = CLUSTER_SNAPSHOT_MAX_BYTES,
        .pending_bytes_max = (uint64_t)s->cfg.wal_pending_max_bytes,
        .record_bytes_max = persist_record_bytes_max(s),
    };
    if (s->cfg.cluster[0] == '\0') {
        snprintf(err, elen, "--node-id needs --cluster (every member as ID=HOST:PORT)");
        return -1;
    }
    opt.nmembers = raft_cluster_parse(s->cfg.cluster, opt.port_offset, opt.members, RAFT_LOG_MAX_MEMBERS, err, elen);
    if (opt.nmembers < 0)
        return -1;
    check_own_address(s, &opt);
    if (s->cfg.cluster_join)
        opt.nmembers_bootstrap = 0;
    else
        opt.nmembers_bootstrap = opt.nmembers;
    ordo_tls_config_t tls;
    if (s->cfg.tls_cluster) {
        if (members_tls(&s->cfg, &tls, err, elen) != 0)
            return -1;
        opt.tls_server = opt.tls_client = &tls;
    }
    log_hooks_t hooks = *wake;
    hooks.deliver = deliver_one;
    raft_log_fsm_t fsm = {.restore = fsm_restore, .role = on_role,
                          .change_done = on_change_done, .arg = s};
    s->persist.log = raft_log_open(&opt, &hooks, &fsm, err, elen);
    return s->persist.log != NULL ? 0 : -1;
}

int cluster_start(server_t *s, char *err, size_t elen)
{
    core_replay_begin(s->core);
    int rc = raft_log_start(s->persist.log, err, elen);
    core_replay_end(s->core);
    saw_time(s, false);
    s->cluster.started = true;
    return rc;
}

/* ---- what the other layers ask ---------------------------------------------- */

bool cluster_leads(const server_t *s)
{
    return !cluster_enabled(s) || (s->persist.log != NULL && raft_log_leading(s->persist.log));
}

const char *cluster_leader(server_t *s, char *buf, size_t blen)
{
    raft_log_info_t in;
    raft_log_info(s->persist.log, &in);
    if (in.leader_id == 0 || in.leader_client[0] == '\0' || (in.leader_id == (uint64_t)s->cfg.node_id && !in.leading))
        return "?";
    snprintf(buf, blen, "%s", in.leader_client);
    return buf;
}

void cluster_info(server_t *s, ordo_buf_t *b)
{
    raft_log_info_t in;
    raft_log_info(s->persist.log, &in);
    ordo_buf_printf(b,
                    "cluster_enabled:1\r\ncluster_state:%s\r\ncluster_node_id:%lld\r\ncluster_leader_id:%llu\r\n"
                    "cluster_leader:%s\r\ncluster_role:%s\r\ncluster_serving:%d\r\ncluster_term:%llu\r\n"
                    "cluster_members:%d\r\ncluster_commit_index:%llu\r\ncluster_applied_index:%llu\r\n"
                    "cluster_last_index:%llu\r\ncluster_revision:%llu\r\ncluster_entries_proposed:%llu\r\n"
                    "cluster_barriers_proposed:%llu\r\ncluster_inflight_entries:%llu\r\ncluster_inflight_bytes:%llu\r\n"
                    "cluster_snapshots_taken:%llu\r\ncluster_snapshots_restored:%llu\r\n"
                    "cluster_last_snapshot_ms:%llu\r\ncluster_last_snapshot_bytes:%llu\r\ncluster_terms_led:%llu\r\n"
                    "cluster_read_rounds:%llu\r\ncluster_snapshot_index:%llu\r\ncluster_store_failing:%s\r\n",
                    in.leader_id != 0 ? "ok" : "fail", (long long)s->cfg.node_id,
                    (unsigned long long)in.leader_id, in.leader_client[0] ? in.leader_client : "?", in.role,
                    in.leading ? 1 : 0, (unsigned long long)in.term, in.members,
                    (unsigned long long)in.commit_index, (unsigned long long)in.applied_index,
                    (unsigned long long)in.last_index, (unsigned long long)core_rev(s->core),
                    (unsigned long long)in.entries_proposed, (unsigned long long)in.barriers_proposed,
                    (unsigned long long)in.inflight_entries, (unsigned long long)in.inflight_bytes,
                    (unsigned long long)in.snapshots_taken, (unsigned long long)in.snapshots_restored,
                    (unsigned long long)s->cluster.last_snapshot_ms,
                    (unsigned long long)s->cluster.last_snapshot_bytes, (unsigned long long)s->cluster.terms_led,
                    (unsigned long long)in.read_rounds, (unsigned long long)in.snapshot_index,
                    in.store_failing ? in.store_failing : "");
}

void cluster_status(server_t *s, cluster_status_t *out)
{
    raft_log_info_t in;
    raft_log_info(s->persist.log, &in);
    *out = (cluster_status_t){.role = in.role, .serving = in.leading, .leader_id = in.leader_id, .term = in.term,
                              .commit_index = in.commit_index, .applied_index = in.applied_index,
                              .members = in.members, .entries_proposed = in.entries_proposed,
                              .barriers_proposed = in.barriers_proposed, .snapshots_taken = in.snapshots_taken,
                              .read_rounds = in.read_rounds, .store_failing = in.store_failing != NULL};
}

bool cluster_member(server_t *s, int i, cluster_member_t *out)
{
    raft_log_member_info_t m;
    if (!raft_log_member(s->persist.log, i, &m))
        return false;
    out->id = m.id;
    snprintf(out->addr, sizeof out->addr, "%s", m.client);
    out->role = m.role;
    out->live = m.live;
    out->last_contact_ms = m.self ? 0 : m.last_contact_ms == UINT64_MAX ? -1 : (int64_t)m.last_contact_ms;
    raft_log_info_t in;
    raft_log_info(s->persist.log, &in);
    out->lag_entries = strcmp(in.role, "leader") == 0 ? (int64_t)m.lag_entries : -1;
    return true;
}

int cluster_partition(server_t *s, const uint64_t *ids, int n) { return raft_log_partition(s->persist.log, ids, n); }

void cluster_stop(server_t *s)
{
    if (s->persist.log != NULL)
        raft_log_stop(s->persist.log);
}

int cluster_change(server_t *s, conn_t *c, enum cluster_change op, uint64_t id, const char *addr, char *err,
                   size_t elen)
{
    static const enum raft_log_change raft_op[] = {
        [CLUSTER_ADD] = RAFT_LOG_ADD, [CLUSTER_REMOVE] = RAFT_LOG_REMOVE, [CLUSTER_TRANSFER] = RAFT_LOG_TRANSFER};
    assert((size_t)op < sizeof raft_op / sizeof raft_op[0]);
    if (s->cluster.change_waiter != NULL) {
        snprintf(err, elen, "another membership change or transfer is running");
        return -1;
    }
    if (raft_log_change(s->persist.log, raft_op[op], id, addr, err, elen) != 0)
        return -1;
    /* The reply comes when raft finishes: the connection waits parked. */
    waiter_t *w = block_wait(s, c, &s->cluster.change_list, 0, BLOCK_CLUSTER);
    w->on_timeout = change_timeout;
    w->on_cancel = change_cancel;
    w->data = s;
    s->cluster.change_waiter = w;
    /* A transfer: raft takes nothing more here until it ends, so the
     * other clients are answered -NOTLEADER now (the caller, parked, waits
     * for the outcome). If it does not happen, the raft log leads again
     * from a new barrier (on_role). */
    if (op == CLUSTER_TRANSFER)
        stop_serving(s);
    return 0;
}
