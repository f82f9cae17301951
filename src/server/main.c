/*
 * main.c -- ordod's entry point: read the configuration, build the server
 * (core, command table, listeners, timers), run the event loop until SIGINT
 * or SIGTERM, then close every connection and free everything.
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

#include "cmd/cmd.h"
#include "net/conn.h"
#include "net/net.h"
#include "writer/persist.h"
#include "writer/writer.h"
#include "server.h"

/* Allocations at least this large are mapped and unmapped on their own.
 * glibc otherwise raises its threshold after large frees and serves big
 * connection buffers from the heap, where freed ones stay resident: a
 * burst of large requests would pin the server's memory long after the
 * clients left. Fixing it keeps memory following the live data. */
#define MALLOC_MMAP_THRESHOLD_BYTES (256 * 1024)

static void on_signal(uv_signal_t *h, int signum)
{
    server_t *s = h->data;
    if (s->stopping)
        return;
    fprintf(stderr, "ordod: %s received, shutting down\n", signum == SIGINT ? "SIGINT" : "SIGTERM");
    s->stopping = true;
    net_close_all(s);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    persist_close_handles(s);
    writer_close_handles(s);
}

static int make_dir(const char *dir)
{
    if (mkdir(dir, 0755) == 0)
        return 0;
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

int main(int argc, char **argv)
{
    static server_t srv; /* the one owner; static only to keep it off the stack */
    server_t *s = &srv;
    char err[1024];
    int exit_now = 0, rc = 1;

    config_defaults(&s->cfg);
    if (config_parse_args(&s->cfg, argc, argv, &exit_now, stdout, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: %s\n", err);
        return 2;
    }
    if (exit_now)
        return 0;
    signal(SIGPIPE, SIG_IGN);
    mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES);
    if (make_dir(s->cfg.dir) != 0) {
        fprintf(stderr, "ordod: cannot use data directory %s\n", s->cfg.dir);
        return 1;
    }
    s->loop = uv_default_loop();
    s->start_ms = server_now_ms();
    s->core = core_create((uint64_t)s->cfg.history_revs);
    if (s->core == NULL) {
        fprintf(stderr, "ordod: out of memory\n");
        return 1;
    }
    if (watch_registry_init(&s->watches) != 0)
        goto fail_core;
    writer_init(s);
    if (cmd_init(s) != 0)
        goto fail_writer;
    server_tick(s);
    if (persist_open(s, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: cannot recover from %s: %s\n", s->cfg.dir, err);
        goto fail_cmds_early;
    }
    s->hooks = (server_hooks_t){.run_resumed = conn_run_resumed, .flush = conn_flush_dirty,
                                .net_cron = net_cron, .cmd_cron = cmd_cron};
    writer_start(s);
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    if (net_listen(s, err, sizeof err) != 0) {
        fprintf(stderr, "ordod: %s\n", err);
        on_signal(&s->sigterm, SIGTERM);
        uv_run(s->loop, UV_RUN_DEFAULT);
        goto fail_cmds;
    }
    fprintf(stderr, "ordod %s ready: %s:%lld%s%s (data in %s, fsync %s)\n", ORDO_VERSION, s->cfg.bind,
            (long long)s->cfg.port, s->cfg.unixsocket[0] ? ", unix " : "", s->cfg.unixsocket, s->cfg.dir,
            s->cfg.fsync == FSYNC_ALWAYS ? "always" : s->cfg.fsync == FSYNC_EVERYSEC ? "everysec" : "no");
    uv_run(s->loop, UV_RUN_DEFAULT);
    rc = 0;
fail_cmds:
    persist_close(s);
fail_cmds_early:
    cmd_destroy(s);
fail_writer:
    writer_destroy(s);
    watch_registry_destroy(&s->watches);
fail_core:
    core_destroy(s->core);
    uv_loop_close(s->loop);
    return rc;
}
