/*
 * main.c -- ordod's entry point: read the configuration, build the server
 * (core, command table, listeners, timers), run the event loop until SIGINT
 * or SIGTERM, then close every connection and free everything.
 *
 * SIGHUP reloads the TLS certificate, key and CA from their files
 * (net/net_tls.h); a reload that fails is logged and the old ones serve on.
 *
 * Start-up that fails part-way unwinds through labels named for the step
 * they undo.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "core/core.h"
#include "net/conn.h"
#include "net/net.h"
#include "net/net_tls.h"
#include "writer/cluster.h"
#include "writer/persist.h"
#include "writer/writer.h"
#include "server.h"

/* Allocations at least this large are mapped and unmapped on their own.
 * glibc otherwise raises its threshold after large frees and serves big
 * connection buffers from the heap, where freed ones stay resident: a
 * burst of large requests would pin the server's memory long after the
 * clients left. Fixing it keeps memory following the live data. */
#define MALLOC_MMAP_THRESHOLD_BYTES (256 * 1024)

/* Close every loop handle, so uv_run() returns once they are closed. */
static void close_handles(server_t *s)
{
    s->stopping = true;
    net_close_all(s);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sighup, NULL);
    persist_close_handles(s);
    writer_close_handles(s);
}

/* Start-up failed after net_listen(): close the listeners and let the loop
 * run their close callbacks once (the command layer's per-turn handle, if
 * started, keeps it from ending by itself). */
static void stop_listening(server_t *s, bool *listening)
{
    if (!*listening)
        return;
    *listening = false;
    net_close_all(s);
    uv_run(s->loop, UV_RUN_NOWAIT);
}

static void on_signal(uv_signal_t *h, int signum)
{
    server_t *s = h->data;
    if (s->stopping)
        return;
    fprintf(stderr, "ordod: %s received, shutting down\n", signum == SIGINT ? "SIGINT" : "SIGTERM");
    close_handles(s);
}

/* The tls_reload hook (CONFIG SET tls-...), and SIGHUP's work: the
 * doors' context (net/net_tls.h), then the members' (tls-cluster). Each
 * is swapped only if it loads; if the doors' loads and the members' does
 * not, the doors keep the new one and the error says so. */
static int tls_reload(server_t *s, const ordo_config_t *cfg, char *err, size_t elen)
{
    bool doors = s->net.tls.ctx != NULL, members = cluster_enabled(s) && s->cfg.tls_cluster;
    if (!doors && !members) {
        snprintf(err, elen, "TLS is off (tls-port, tls-http and tls-cluster are set at start)");
        return -1;
    }
    if (doors && net_tls_reload(s, cfg, err, elen) != 0)
        return -1;
    char why[512];
    if (members && cluster_tls_reload(s, cfg, why, sizeof why) != 0) {
        snprintf(err, elen, "%s%s", doors ? "the client doors reloaded, the members' connections did not: " : "",
                 why);
        return -1;
    }
    return 0;
}

static void on_sighup(uv_signal_t *h, int signum)
{
    (void)signum;
    server_t *s = h->data;
    char err[1024];
    if (tls_reload(s, &s->cfg, err, sizeof err) != 0)
        fprintf(stderr, "ordod: SIGHUP received: TLS reload failed, the old certificate serves on: %s\n", err);
    else
        fprintf(stderr, "ordod: SIGHUP received: TLS certificate, key and CA reloaded from %s, %s, %s\n",
                s->cfg.tls_cert_file, s->cfg.tls_key_file,
                s->cfg.tls_ca_cert_file[0] ? s->cfg.tls_ca_cert_file : "(no CA)");
}

/* make_dir() -- create dir unless it exists; *created says whether this
 * call made it (then a start that fails removes it again). */
static int make_dir(const char *dir, bool *created)
{
    *created = false;
    if (mkdir(dir, 0755) == 0) {
        *created = true;
        return 0;
    }
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

int main(int argc, char **argv)
{
    static server_t srv; /* the one owner; static only to keep it off the stack */
    server_t *s = &srv;
    char err[1024];
    int exit_now = 0, rc = 1;
    bool dir_created = false, listening = false;

    config_defaults(&s->cfg);
    if (config_parse_args(&s->cfg, argc, argv, &exit_now, stdout, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: %s\n", err);
        return 2;
    }
    if (exit_now)
        return 0;
    s->cluster.argv = argv; /* a cluster member may restart in place (writer/cluster.h) */
    signal(SIGPIPE, SIG_IGN);
    mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES);
    if (make_dir(s->cfg.dir, &dir_created) != 0) {
        fprintf(stderr, "ordod: cannot use data directory %s\n", s->cfg.dir);
        return 1;
    }
    s->loop = uv_default_loop();
    s->start_ms = server_mono_ms();
    /* The data directory's lock, then the listeners, then everything else:
     * a busy directory or a taken port is refused before anything is read
     * or written (a directory made for this start is removed again).
     * Clients that connect during recovery wait in the listen backlog. */
    if (persist_open(s, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: %s\n", err);
        goto fail_log;
    }
    listening = true; /* even if it fails: net_close_all() closes what it opened */
    if (net_listen(s, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: %s\n", err);
        goto fail_listen;
    }
    s->core = core_create((uint64_t)s->cfg.history_revs);
    if (s->core == NULL) {
        fprintf(stderr, "ordod: out of memory\n");
        goto fail_listen;
    }
    core_set_history(s->core, (uint64_t)s->cfg.history_revs, (uint64_t)s->cfg.history_bytes);
    if (watch_registry_init(&s->watches) != 0)
        goto fail_core;
    /* Before anything can apply a record: replay and a cluster's delivery
     * may tell observers and waiters already. */
    s->hooks = (server_hooks_t){.run_resumed = conn_run_resumed, .flush = net_flush,
                                .net_cron = net_cron, .cmd_cron = cmd_cron, .answer = net_answer,
                                .park = net_park, .resume = net_resume, .drop_unsure = net_drop_unsure,
                                .drop_unmarked = net_drop_unmarked, .tls_reload = tls_reload};
    writer_init(s);
    if (cmd_init(s) != 0)
        goto fail_writer;
    server_tick(s);
    if (persist_recover(s, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: cannot recover from %s: %s\n", s->cfg.dir, err);
        goto fail_cmds;
    }
    /* Record times never go back, across restarts too: if the wall clock
     * is behind the last record, the writer's clock continues from it. */
    server_clock_resume(s, core_last_time_ms(s->core));
    writer_start(s);
    /* A single server seeds its users from the aclfile now; a cluster's
     * leader does when it first leads (cmd_cron()). */
    if (s->cfg.node_id == 0 && cmd_acl_seed(s, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: %s\n", err);
        rc = 1;
        goto fail_cmds;
    }
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    uv_signal_init(s->loop, &s->sighup);
    s->sigint.data = s->sigterm.data = s->sighup.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sighup, on_sighup, SIGHUP);
    char tls_note[96] = "";
    if (s->cfg.tls_port != 0)
        snprintf(tls_note, sizeof tls_note, ", TLS port %lld", (long long)s->cfg.tls_port);
    if (s->cfg.tls_http)
        snprintf(tls_note + strlen(tls_note), sizeof tls_note - strlen(tls_note), ", HTTPS");
    fprintf(stderr, "ordod %s ready: %s:%lld%s%s%s (data in %s, fsync %s)\n", ORDO_VERSION, s->cfg.bind,
            (long long)s->cfg.port, s->cfg.unixsocket[0] ? ", unix " : "", s->cfg.unixsocket, tls_note, s->cfg.dir,
            s->cfg.fsync == FSYNC_ALWAYS ? "always" : s->cfg.fsync == FSYNC_EVERYSEC ? "everysec" : "no");
    uv_run(s->loop, UV_RUN_DEFAULT);
    listening = false; /* closed by close_handles() */
    rc = 0;
fail_cmds:
    stop_listening(s, &listening);
    persist_close(s);
    cmd_destroy(s);
fail_writer:
    writer_destroy(s);
    watch_registry_destroy(&s->watches);
fail_core:
    core_destroy(s->core);
fail_listen:
    stop_listening(s, &listening);
fail_log:
    persist_close(s);
    if (rc != 0 && dir_created)
        rmdir(s->cfg.dir); /* only if still empty: nothing was written in it */
    uv_loop_close(s->loop);
    return rc;
}
