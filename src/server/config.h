/*
 * config.h -- ordod's options: one table of every option with its name,
 * default, meaning and bounds; parsed from long flags (--name value or
 * --name=value) and from a config file of `name value` lines.
 *
 * Every limit the server enforces is an option here, so every limit has a
 * name, a default, a way to change it and (in the command layer) an error.
 * The parsed values live in an ordo_config_t owned by the server; nothing
 * here is global.
 */
#ifndef ORDO_CONFIG_H
#define ORDO_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum fsync_policy { FSYNC_ALWAYS, FSYNC_EVERYSEC, FSYNC_NO };

typedef struct ordo_config_s {
    /* network */
    char bind[256];
    int64_t port;
    char unixsocket[256];
    char requirepass[512];
    int64_t protected_mode;          /* refuse non-loopback clients while no password is set */
    /* TLS (net/net_tls.c): on when tls_port or tls_http is set */
    int64_t tls_port;                /* RESP over TLS on bind:tls_port; 0: off */
    int64_t tls_http;                /* the HTTP listener speaks HTTPS */
    int64_t tls_cluster;             /* members talk raft over mutual TLS (log/raft_net.h) */
    char tls_cert_file[1024];        /* the server's certificate chain (PEM) */
    char tls_key_file[1024];         /* its private key (PEM) */
    char tls_ca_cert_file[1024];     /* CA that client (and member) certificates are verified against */
    char tls_auth_clients[16];       /* no | yes | optional: client certificates */
    char tls_auth_clients_user[8];   /* off | CN: a verified certificate's common name logs in as that user */
    char tls_protocols[64];          /* "TLSv1.2 TLSv1.3" */
    char tls_ciphers[512];           /* TLS 1.2 cipher list */
    char tls_ciphersuites[512];      /* TLS 1.3 suites */
    int64_t tls_handshake_timeout_ms; /* a TLS handshake must finish within this */
    /* users (core/acl.h, cmd/cmd_acl.c) */
    char aclfile[1024];              /* users to create on a first start (empty: none) */
    int64_t acl_log_max_len;         /* ACL LOG entries kept */
    int64_t acl_max_users;           /* users at most (ACL SETUSER of a new one past it: -LIMIT) */
    /* data */
    char dir[1024];
    int64_t fsync;                   /* enum fsync_policy */
    int64_t fsync_batch_max;         /* always: sync early once this many records wait (0: off) */
    int64_t fsync_interval_ms;       /* always: wait up to this long to gather a batch (0: sync at once) */
    int64_t fsync_gather_max_us;     /* always: after a sync, wait this long at most for the writers it answered */
    int64_t fsync_parallel;          /* always: syncs in flight at once (WAL_SYNC_PARALLEL_MAX at most) */
    int64_t fsync_inline_max;        /* always: the core syncs a batch this small itself if the log thread idles */
    int64_t wal_segment_bytes;       /* roll the log to a new file past this size */
    int64_t wal_pending_max_bytes;   /* log bytes not yet on disk above which clients are not read */
    int64_t wal_repair;              /* at start, cut a corrupt log at its first bad record (wal.h) */
    int64_t snapshot_log_bytes;      /* take a snapshot when the log on disk passes this */
    int64_t history_revs;            /* automatic compaction keeps this many key changes ... */
    int64_t history_bytes;           /* ... and at most this many key and value bytes of them (0: any) */
    int64_t watch_progress_ms;       /* idle watches get a progress event this often */
    /* cluster (log/raft_log.c, writer/cluster.c); node_id 0: a single server */
    int64_t node_id;                 /* this member's id in --cluster */
    char cluster[4096];              /* ID=HOST:PORT[,...]: every member's client address */
    int64_t cluster_port_offset;     /* raft traffic on the client port + this */
    int64_t cluster_election_timeout_ms; /* a follower that hears no leader this long (plus up to as much again, at random) stands */
    int64_t cluster_snapshot_entries; /* raft entries between snapshots */
    int64_t cluster_snapshot_trailing; /* entries kept after a snapshot, for followers a little behind */
    int64_t cluster_catch_up_timeout_ms; /* CLUSTER ADD gives up after this without a caught-up member */
    int64_t cluster_join;            /* a first start waits to be added (CLUSTER ADD) instead of bootstrapping */
    int64_t debug_cluster_faults;    /* tests only: DEBUG PARTITION */
    /* limits */
    int64_t max_clients;
    int64_t http_port;               /* HTTP listener on bind (net/http.c); 0: off */
    int64_t http_max_clients;        /* HTTP connections at once */
    int64_t http_header_max_bytes;   /* request line and headers of one HTTP request */
    int64_t http_body_max_bytes;     /* body of one HTTP request */
    int64_t http_request_timeout_ms; /* a begun HTTP request must arrive whole within this */
    int64_t http_idle_ms;            /* a keep-alive HTTP connection with nothing to do is closed after this */
    int64_t http_idempotency_ms;     /* an idempotency key is kept this long */
    int64_t http_idempotency_keys_max; /* idempotency keys kept at most (all queues) */
    int64_t http_call_timeout_ms;    /* a call (POST .../call) with no timeout= waits this long, then 202 */
    char http_cors_origins[4096];    /* origins a browser may call the HTTP API from ("*": any; "": none) */
    int64_t max_args;                /* arguments per command */
    int64_t max_bulk_bytes;          /* bytes per argument (the parser's bound) */
    int64_t max_inline_bytes;        /* bytes per inline command line */
    int64_t max_args_unauth;         /* the same bounds before AUTH succeeds */
    int64_t max_bulk_bytes_unauth;
    int64_t max_name_bytes;          /* keys, and later queue/lock/election names */
    int64_t max_value_bytes;         /* values and payloads */
    int64_t max_reply_bytes;         /* one reply that gathers many values (MGET, KV.RANGE, Q.PULL COUNT) */
    int64_t max_watches_per_client;
    int64_t max_multi_commands;      /* commands one MULTI may queue */
    int64_t max_multi_bytes;         /* argument bytes (plus a per-argument overhead) one MULTI may queue */
    int64_t max_scan_cursors;        /* SCAN cursors kept (all clients), the oldest forgotten first */
    int64_t queue_watch_history_bytes; /* Q.WATCH FROM: queue events kept (all queues) */
    int64_t max_schedules;           /* Q.SCHEDULE: schedules at most */
    int64_t output_hard_bytes;       /* a client whose pending output passes this is closed */
    int64_t output_soft_bytes;       /* ... or stays above this for output_soft_seconds */
    int64_t output_soft_seconds;
    int64_t max_memory_bytes;        /* 0: no limit; above it writes get -LIMIT */
    /* diagnostics */
    int64_t verbose;
    char debug_wal_fault[64];        /* tests only: make the log's I/O fail (persist.c) */
    char debug_wal_stall[1024];      /* tests only: the log's I/O waits while this file exists */
} ordo_config_t;

/* config_defaults() -- every option at its default. */
void config_defaults(ordo_config_t *cfg);

/* config_parse_args() -- apply argv (argv[0] is the program). --config FILE
 * is read where it appears; later options override earlier ones. --help
 * prints the option list to out and sets *exit_now. On error writes a
 * message to err_out (size err_len) and returns -1; else 0. */
int config_parse_args(ordo_config_t *cfg, int argc, char **argv, int *exit_now,
                      FILE *out, char *err_out, size_t err_len);

/* config_set() -- set one option by name from its text form. Returns 0, or
 * -1 with a message in err_out. */
int config_set(ordo_config_t *cfg, const char *name, const char *value, char *err_out, size_t err_len);

/* config_get() -- the text form of option name into out; -1 if unknown. */
int config_get(const ordo_config_t *cfg, const char *name, char *out, size_t out_len);

/* config_foreach() -- visit every option name matching a glob pattern
 * (fnmatch), for CONFIG GET. */
void config_foreach(const ordo_config_t *cfg, const char *pattern,
                    void (*fn)(void *arg, const char *name, const char *value), void *arg);

/* config_usage() -- the --help text. */
void config_usage(FILE *out);

#endif /* ORDO_CONFIG_H */
