/*
 * cmd_cluster.c -- CLUSTER INFO / MEMBERS / ADD / REMOVE / TRANSFER and
 * DEBUG DIGEST / PARTITION: argument parsing and RESP; the work is the
 * writer's (writer/cluster.h).
 *
 * Served on every member (CMD_NOSTATE: they answer about the member, not
 * from the replicated state; DEBUG DIGEST reads this member's state as it
 * is, which is the point of comparing it across members).
 */
#include <stdio.h>
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
    if (arg_is(x, 1, "DIGEST") && x->argc == 2) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)snap_digest(s->core));
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
    reply_err(x, "ERR DEBUG DIGEST | PARTITION [id ...]");
}

const cmd_def_t cmd_cluster_defs[] = {
    {"CLUSTER", -2, CMD_NOSTATE, cmd_cluster,
     "Cluster mode: INFO (name:value lines), MEMBERS ([id, host:port, role, voter] each), ADD a member, "
     "REMOVE one, TRANSFER leadership; ADD, REMOVE and TRANSFER answer once done",
     "INFO | MEMBERS | ADD id host:port | REMOVE id | TRANSFER [id]", "ordo-cluster"},
    {"DEBUG", -2, CMD_NOSTATE, cmd_debug,
     "DIGEST: a digest of this member's state (equal on members that applied the same entries); "
     "PARTITION: cut raft traffic to members (tests, --debug-cluster-faults)",
     "DIGEST | PARTITION [id ...]", "server"},
};

const size_t cmd_cluster_ndefs = sizeof cmd_cluster_defs / sizeof cmd_cluster_defs[0];
