/*
 * cmd_cluster.c -- CLUSTER INFO / MEMBERS / ADD / REMOVE / TRANSFER,
 * DEBUG DIGEST / PARTITION, and the replication views Redis clients read
 * (ROLE, INFO replication): argument parsing and RESP; the work is the
 * writer's (writer/cluster.h).
 *
 * Replication in Redis's words: the leader is the master, the other
 * members its replicas ("slave"); an offset is a position in the log,
 * raft's index in cluster mode and the revision on a single server (a
 * master without replicas).
 *
 * Served on every member (CMD_NOSTATE: they answer about the member, not
 * from the replicated state; DEBUG DIGEST reads this member's state as it
 * is, which is the point of comparing it across members). DEBUG DIGEST
 * walks every key (snap_digest()), so it holds the loop for O(state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "log/snapshot.h"
#include "writer/cluster.h"

static bool need_cluster(cmd_ctx_t *x)
{
    if (cluster_enabled(x->srv))
        return true;
    reply_err(x, "ERR this server is not in cluster mode (start it with --node-id and --cluster)");
    return false;
}

static void cluster_members(cmd_ctx_t *x)
{
    server_t *s = x->srv;
    cluster_member_t m;
    int n = 0;
    while (cluster_member(s, n, &m))
        n++;
    resp_add_array(x->out, (size_t)n);
    for (int i = 0; i < n && cluster_member(s, i, &m); i++) {
        resp_add_array(x->out, 7);
        resp_add_uint(x->out, m.id);
        resp_add_bulk_str(x->out, m.addr);
        resp_add_bulk_str(x->out, strcmp(m.role, "leader") == 0 ? "leader" : "follower");
        resp_add_int(x->out, strcmp(m.role, "leader") == 0 || strcmp(m.role, "voter") == 0 ? 1 : 0);
        resp_add_int(x->out, m.live ? 1 : 0);
        resp_add_int(x->out, m.last_contact_ms);
        resp_add_int(x->out, m.lag_entries);
    }
}

static void cmd_cluster(cmd_ctx_t *x)
{
    server_t *s = x->srv;
    char err[300];
    uint64_t id = 0;
    if (arg_is(x, 1, "INFO") && x->argc == 2) {
        ordo_buf_t b = ORDO_BUF_INIT;
        if (cluster_enabled(s))
            cluster_info(s, &b);
        else
            ordo_buf_printf(&b, "cluster_enabled:0\r\ncluster_state:ok\r\n");
        resp_add_verbatim(x->out, x->proto, b.data ? b.data : "", b.len);
        ordo_buf_free(&b);
        return;
    }
    if (arg_is(x, 1, "MEMBERS") && x->argc == 2) {
        if (need_cluster(x))
            cluster_members(x);
        return;
    }
    enum cluster_change op;
    if (arg_is(x, 1, "ADD") && x->argc == 4)
        op = CLUSTER_ADD;
    else if (arg_is(x, 1, "REMOVE") && x->argc == 3)
        op = CLUSTER_REMOVE;
    else if (arg_is(x, 1, "TRANSFER") && (x->argc == 2 || x->argc == 3))
        op = CLUSTER_TRANSFER;
    else {
        reply_err(x, "ERR CLUSTER INFO | MEMBERS | ADD id host:port | REMOVE id | TRANSFER [id]");
        return;
    }
    if (!need_cluster(x))
        return;
    if (!cluster_leads(s)) {
        reply_notleader(x);
        return;
    }
    if (x->argc >= 3 && !arg_u64(x, 2, &id))
        return;
    char addr[256] = "";
    if (op == CLUSTER_ADD)
        snprintf(addr, sizeof addr, "%.*s", (int)(x->argv[3].len < 255 ? x->argv[3].len : 255), x->argv[3].ptr);
    if (cluster_change(s, x->conn, op, id, addr, err, sizeof err) != 0)
        reply_errf(x, "ERR %s", err);
}

static void cmd_debug(cmd_ctx_t *x)
{
    server_t *s = x->srv;
    if (arg_is(x, 1, "DIGEST") && (x->argc == 2 || (x->argc == 4 && arg_is(x, 2, "HISTORY")))) {
        uint64_t d, from_rev;
        if (x->argc == 2) {
            d = snap_digest(s->core);
        } else {
            if (!arg_u64(x, 3, &from_rev))
                return;
            if (snap_digest_history(s->core, from_rev, &d) != 0) {
                reply_errf(x, "COMPACTED %llu this member no longer holds the changes after revision %llu",
                           (unsigned long long)kv_oldest_rev(core_kv(s->core)), (unsigned long long)from_rev);
                return;
            }
        }
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)d);
        resp_add_bulk_str(x->out, hex);
        return;
    }
    if (arg_is(x, 1, "PARTITION")) {
        if (!s->cfg.debug_cluster_faults) {
            reply_err(x, "ERR DEBUG PARTITION needs --debug-cluster-faults yes (a test seam)");
            return;
        }
        if (!need_cluster(x))
            return;
        uint64_t ids[16];
        if (x->argc - 2 > 16) {
            reply_err(x, "ERR at most 16 member ids");
            return;
        }
        for (size_t i = 2; i < x->argc; i++)
            if (!arg_u64(x, i, &ids[i - 2]))
                return;
        cluster_partition(s, ids, (int)(x->argc - 2));
        resp_add_simple(x->out, "OK");
        return;
    }
    reply_err(x, "ERR DEBUG DIGEST [HISTORY from-rev] | PARTITION [id ...]");
}

/* Split "host:port" at its last colon into host (hlen bytes) and *port. */
static void split_addr(const char *addr, char *host, size_t hlen, long *port)
{
    const char *c = strrchr(addr, ':');
    size_t n = c ? (size_t)(c - addr) : strlen(addr);
    snprintf(host, hlen, "%.*s", (int)n, addr);
    *port = c ? strtol(c + 1, NULL, 10) : 0;
}

/* The members other than the leader, with their offsets (the leader's
 * view): fn per member. Returns how many. */
static int replicas(server_t *s, const cluster_status_t *st,
                    void (*fn)(void *arg, int i, const cluster_member_t *m, uint64_t offset), void *arg)
{
    cluster_member_t m;
    int n = 0;
    for (int i = 0; cluster_member(s, i, &m); i++) {
        if (m.id == st->leader_id)
            continue;
        int64_t lag = m.lag_entries > 0 ? m.lag_entries : 0;
        uint64_t off = st->commit_index > (uint64_t)lag ? st->commit_index - (uint64_t)lag : 0;
        if (fn != NULL)
            fn(arg, n, &m, off);
        n++;
    }
    return n;
}

static void role_replica(void *arg, int i, const cluster_member_t *m, uint64_t offset)
{
    (void)i;
    ordo_buf_t *out = arg;
    char host[256], num[24];
    long port;
    split_addr(m->addr, host, sizeof host, &port);
    resp_add_array(out, 3);
    resp_add_bulk_str(out, host);
    snprintf(num, sizeof num, "%ld", port);
    resp_add_bulk_str(out, num);
    snprintf(num, sizeof num, "%llu", (unsigned long long)offset);
    resp_add_bulk_str(out, num);
}

/* ROLE: ["master", offset, [[host, port, offset] ...]] on the leader or a
 * single server; ["slave", host, port, state, offset] on a follower
 * (state "connected" while a leader is known, else "connect"). */
static void cmd_role(cmd_ctx_t *x)
{
    server_t *s = x->srv;
    if (!cluster_enabled(s)) {
        resp_add_array(x->out, 3);
        resp_add_bulk_str(x->out, "master");
        resp_add_uint(x->out, core_rev(s->core));
        resp_add_array(x->out, 0);
        return;
    }
    cluster_status_t st;
    cluster_status(s, &st);
    if (st.serving) {
        resp_add_array(x->out, 3);
        resp_add_bulk_str(x->out, "master");
        resp_add_uint(x->out, st.applied_index);
        resp_add_array(x->out, (size_t)replicas(s, &st, NULL, NULL));
        replicas(s, &st, role_replica, x->out);
        return;
    }
    char leader[256], host[256];
    long port;
    cluster_leader(s, leader, sizeof leader);
    split_addr(leader, host, sizeof host, &port);
    resp_add_array(x->out, 5);
    resp_add_bulk_str(x->out, "slave");
    resp_add_bulk_str(x->out, host);
    resp_add_int(x->out, port);
    resp_add_bulk_str(x->out, st.leader_id != 0 ? "connected" : "connect");
    resp_add_uint(x->out, st.applied_index);
}

static void info_replica(void *arg, int i, const cluster_member_t *m, uint64_t offset)
{
    char host[256];
    long port;
    split_addr(m->addr, host, sizeof host, &port);
    ordo_buf_printf(arg, "slave%d:ip=%s,port=%ld,state=%s,offset=%llu,lag=%lld\r\n", i, host, port,
                    m->live ? "online" : "wait_bgsave", (unsigned long long)offset,
                    (long long)(m->last_contact_ms > 0 ? m->last_contact_ms / 1000 : 0));
}

void cmd_replication_info(server_t *s, ordo_buf_t *b)
{
    ordo_buf_printf(b, "# Replication\r\n");
    if (!cluster_enabled(s)) {
        ordo_buf_printf(b, "role:master\r\nconnected_slaves:0\r\nmaster_repl_offset:%llu\r\n\r\n",
                        (unsigned long long)core_rev(s->core));
        return;
    }
    cluster_status_t st;
    cluster_status(s, &st);
    if (st.serving) {
        ordo_buf_printf(b, "role:master\r\nconnected_slaves:%d\r\n", replicas(s, &st, NULL, NULL));
        replicas(s, &st, info_replica, b);
        ordo_buf_printf(b, "master_repl_offset:%llu\r\n\r\n", (unsigned long long)st.applied_index);
        return;
    }
    char leader[256], host[256];
    long port;
    cluster_leader(s, leader, sizeof leader);
    split_addr(leader, host, sizeof host, &port);
    ordo_buf_printf(b, "role:slave\r\nmaster_host:%s\r\nmaster_port:%ld\r\nmaster_link_status:%s\r\n"
                       "slave_repl_offset:%llu\r\nslave_read_only:1\r\nmaster_repl_offset:%llu\r\n\r\n",
                    host, port, st.leader_id != 0 ? "up" : "down", (unsigned long long)st.applied_index,
                    (unsigned long long)st.commit_index);
}

const cmd_def_t cmd_cluster_defs[] = {
    {"ROLE", 1, CMD_NOSTATE, cmd_role,
     "This member's replication role, Redis's form: master with its replicas, or slave with its master",
     "", "server"},
    {"CLUSTER", -2, CMD_NOSTATE, cmd_cluster,
     "Cluster mode: INFO (name:value lines), MEMBERS ([id, host:port, role, voter] each), ADD a member, "
     "REMOVE one, TRANSFER leadership; ADD, REMOVE and TRANSFER answer once done",
     "INFO | MEMBERS | ADD id host:port | REMOVE id | TRANSFER [id]", "ordo-cluster"},
    {"DEBUG", -2, CMD_NOSTATE, cmd_debug,
     "DIGEST: a digest of the replicated state (revision, live keys, deadlines, leases, locks, elections, "
     "queues, users, schedules), equal on members that applied the same entries; not the history each member "
     "keeps, which HISTORY from-rev adds from that revision on (COMPACTED if this member no longer holds it); "
     "walks every key on the loop thread; "
     "PARTITION: cut raft traffic to members (tests, --debug-cluster-faults)",
     "DIGEST [HISTORY from-rev] | PARTITION [id ...]", "server"},
};

const size_t cmd_cluster_ndefs = sizeof cmd_cluster_defs / sizeof cmd_cluster_defs[0];
