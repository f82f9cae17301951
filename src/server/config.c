/*
 * config.c -- the option table and its parsers; see config.h.
 *
 * The table is the single source of truth: --help, CONFIG GET, the config
 * file and the flags all read it, so an option cannot exist in one place and
 * be missing in another. Sizes accept the suffixes k, m, g (powers of 1024)
 * so `max-value-bytes 8m` reads as it would in redis.conf.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum opt_type { OPT_INT, OPT_SIZE, OPT_BOOL, OPT_STR, OPT_FSYNC };

typedef struct option_def {
    const char *name;
    enum opt_type type;
    size_t offset;           /* into ordo_config_t */
    size_t str_len;          /* OPT_STR: capacity */
    const char *def;         /* default, in text form */
    int64_t min, max;        /* numeric bounds */
    const char *help;
} option_def_t;

#define INT_OPT(n, field, d, lo, hi, h) {n, OPT_INT, offsetof(ordo_config_t, field), 0, d, lo, hi, h}
#define SIZE_OPT(n, field, d, lo, hi, h) {n, OPT_SIZE, offsetof(ordo_config_t, field), 0, d, lo, hi, h}
#define BOOL_OPT(n, field, d, h) {n, OPT_BOOL, offsetof(ordo_config_t, field), 0, d, 0, 1, h}
#define STR_OPT(n, field, d, h) \
    {n, OPT_STR, offsetof(ordo_config_t, field), sizeof(((ordo_config_t *)0)->field), d, 0, 0, h}

#define KiB (1024LL)
#define MiB (1024LL * 1024)
#define GiB (1024LL * 1024 * 1024)

static const option_def_t options[] = {
    STR_OPT("bind", bind, "127.0.0.1", "address to listen on (TCP)"),
    INT_OPT("port", port, "7379", 0, 65535, "TCP port; 0 disables TCP"),
    STR_OPT("unixsocket", unixsocket, "", "also listen on this Unix socket path"),
    STR_OPT("requirepass", requirepass, "", "password clients must give with AUTH or HELLO"),
    BOOL_OPT("protected-mode", protected_mode, "yes",
             "while no password is set, refuse clients that are not on loopback"),
    INT_OPT("tls-port", tls_port, "0", 0, 65535, "RESP over TLS on bind:tls-port (0: off); needs tls-cert-file"),
    BOOL_OPT("tls-http", tls_http, "no", "the HTTP listener (http-port) speaks HTTPS with the same certificate"),
    BOOL_OPT("tls-cluster", tls_cluster, "no",
             "cluster mode: members talk raft over mutual TLS with tls-cert-file (common name node-<id>) and "
             "tls-ca-cert-file"),
    STR_OPT("tls-cert-file", tls_cert_file, "", "TLS: the server's certificate chain (PEM)"),
    STR_OPT("tls-key-file", tls_key_file, "", "TLS: the private key of tls-cert-file (PEM, unencrypted)"),
    STR_OPT("tls-ca-cert-file", tls_ca_cert_file, "",
            "TLS: the CA (PEM) client certificates are verified against"),
    STR_OPT("tls-auth-clients", tls_auth_clients, "no",
            "TLS: client certificates: no (not asked), optional (verified if shown), yes (required)"),
    STR_OPT("tls-auth-clients-user", tls_auth_clients_user, "off",
            "TLS: off, or CN: a client whose verified certificate's common name is a user that is on is "
            "authenticated as that user, with no password"),
    STR_OPT("tls-protocols", tls_protocols, "TLSv1.2 TLSv1.3", "TLS: the protocol versions allowed"),
    STR_OPT("tls-ciphers", tls_ciphers, "", "TLS: the TLS 1.2 cipher list, OpenSSL syntax (empty: OpenSSL's)"),
    STR_OPT("tls-ciphersuites", tls_ciphersuites, "",
            "TLS: the TLS 1.3 cipher suites, OpenSSL syntax (empty: OpenSSL's)"),
    /* Long enough for a client across an ocean to make its two round
     * trips; short enough that a connection which never finishes holds
     * its descriptor briefly. */
    INT_OPT("tls-handshake-timeout-ms", tls_handshake_timeout_ms, "10000", 100, 3600000,
            "TLS: a connection whose handshake has not finished within this is closed"),
    STR_OPT("aclfile", aclfile, "",
            "users to create on a first start (an empty data directory), one 'user NAME RULES...' a line; "
            "afterwards the log holds the users and the file is not read again"),
    /* Redis's default: enough to see a pattern of refusals, small enough
     * (an entry is under 1 KiB) that a client cannot grow it. */
    INT_OPT("acl-log-max-len", acl_log_max_len, "128", 0, 100000,
            "refused commands and authentications kept for ACL LOG (identical ones are counted in one entry)"),
    /* Users are looked up at AUTH and each is a record in every snapshot:
     * a thousand is far past a hand-written list. */
    INT_OPT("acl-max-users", acl_max_users, "1024", 1, 1000000, "users at most (ACL SETUSER past it: -LIMIT)"),
    STR_OPT("dir", dir, "./data", "data directory"),
    {"fsync", OPT_FSYNC, offsetof(ordo_config_t, fsync), 0, "always", 0, 2,
     "durability policy: always | everysec | no"},
    INT_OPT("fsync-batch-max", fsync_batch_max, "0", 0, 1000000,
            "fsync always: sync as soon as this many records wait, even inside fsync-interval-ms (0: no count trigger)"),
    INT_OPT("fsync-interval-ms", fsync_interval_ms, "0", 0, 1000,
            "fsync always: let a batch gather this long before its sync (0: sync as soon as records wait)"),
    INT_OPT("fsync-gather-max-us", fsync_gather_max_us, "100", 0, 100000,
            "fsync always: after a sync, wait up to this many microseconds (never longer than that sync took) for "
            "the writers it answered to send their next records, so that one sync carries them with the rest "
            "(0: never wait)"),
    INT_OPT("fsync-parallel", fsync_parallel, "1", 1, 4,
            "fsync always: syncs in flight at once, each on a log thread of its own; records that arrive while one "
            "runs start the next at once instead of waiting for it (1: one at a time)"),
    INT_OPT("fsync-inline-max", fsync_inline_max, "1", 0, 1000000,
            "fsync always: a batch of at most this many records, finding the log thread idle, is written and synced "
            "by the main thread itself (saves two thread wake-ups per write at low concurrency); under everysec and "
            "no any such batch is written by it; 0: never"),
    SIZE_OPT("wal-segment-bytes", wal_segment_bytes, "64m", 64 * KiB, 4 * GiB, "size at which the log rolls to a new file"),
    SIZE_OPT("wal-pending-max-bytes", wal_pending_max_bytes, "64m", 64 * KiB, INT64_MAX,
             "log records not yet on disk above which ordod stops reading clients until the disk catches up"),
    BOOL_OPT("wal-repair", wal_repair, "no",
             "at start, cut a corrupt log at its first bad record, keeping the cut bytes in <dir>/wal/*.cut*"),
    SIZE_OPT("snapshot-log-bytes", snapshot_log_bytes, "64m", 64 * KiB, INT64_MAX,
             "take a snapshot (and drop old log files) when the log on disk passes this"),
    /* The watch resume window, counted in key changes (puts, deletions,
     * expiries) whatever else spends revisions: queue traffic never
     * shortens it (core.c, "Automatic compaction"). The byte bound keeps
     * a history of large values from holding gigabytes; 256 MiB is far
     * above what the default count of small values takes. */
    INT_OPT("history-revs", history_revs, "100000", 1, INT64_MAX,
            "key changes of history kept for KV.GET REV and watch resumption (automatic compaction); revisions "
            "of queues, leases, locks and elections do not count"),
    SIZE_OPT("history-bytes", history_bytes, "256m", 0, INT64_MAX,
             "key and value bytes of the key changes kept in history at most (0: no bound)"),
    INT_OPT("watch-progress-ms", watch_progress_ms, "5000", 10, 86400000,
            "an idle watch gets a watch-progress event this often"),
    INT_OPT("node-id", node_id, "0", 0, 1000000000, "cluster mode: this member's id in --cluster (0: a single server)"),
    STR_OPT("cluster", cluster, "",
            "cluster mode: every member as ID=HOST:PORT[,ID=HOST:PORT...] (HOST:PORT: its client address)"),
    INT_OPT("cluster-port-offset", cluster_port_offset, "10000", 1, 65535,
            "cluster mode: members talk raft on their client port plus this"),
    INT_OPT("cluster-election-timeout-ms", cluster_election_timeout_ms, "300", 50, 60000,
            "cluster mode: a follower that hears no leader for this long (plus a random part up to as long again) "
            "starts an election; the leader's heartbeat is a tenth of it"),
    INT_OPT("cluster-snapshot-entries", cluster_snapshot_entries, "8192", 16, 100000000,
            "cluster mode: raft entries (one per loop turn of writes) applied between snapshots; a snapshot is "
            "written a slice per loop turn, never holding the loop"),
    INT_OPT("cluster-snapshot-trailing", cluster_snapshot_trailing, "4096", 0, 100000000,
            "cluster mode: entries kept after a snapshot, so a follower a little behind catches up from the log"),
    INT_OPT("cluster-catch-up-timeout-ms", cluster_catch_up_timeout_ms, "60000", 100, 86400000,
            "cluster mode: CLUSTER ADD gives up (and removes the new member again) if it has not caught up with "
            "the leader's log within this long"),
    BOOL_OPT("cluster-join", cluster_join, "no",
             "cluster mode: on a first start, wait to be added with CLUSTER ADD instead of forming the cluster"),
    BOOL_OPT("debug-cluster-faults", debug_cluster_faults, "no",
             "tests only: allow DEBUG PARTITION (cut raft traffic to chosen members)"),
    INT_OPT("max-clients", max_clients, "10000", 1, 1000000, "connected clients at most"),
    INT_OPT("http-port", http_port, "7380", 0, 65535, "HTTP listener port on bind (0: off)"),
    INT_OPT("http-max-clients", http_max_clients, "1024", 1, 1000000, "HTTP connections at most (503 past it)"),
    SIZE_OPT("http-header-max-bytes", http_header_max_bytes, "16k", 1024, 1 * MiB,
             "request line and headers of one HTTP request (431 past it)"),
    SIZE_OPT("http-body-max-bytes", http_body_max_bytes, "8m", 1024, 512 * MiB,
             "body of one HTTP request (413 past it)"),
    INT_OPT("http-request-timeout-ms", http_request_timeout_ms, "10000", 100, 3600000,
            "a begun HTTP request must arrive whole within this (408 and close past it)"),
    INT_OPT("http-idle-ms", http_idle_ms, "60000", 100, 86400000,
            "a keep-alive HTTP connection with no request is closed after this"),
    /* A day, as payment APIs keep theirs: long enough for a client to
     * retry across an outage. Each key costs about 100 bytes plus its
     * bytes; the bound below caps the total (queue.h, "Idempotency keys"). */
    INT_OPT("http-idempotency-ms", http_idempotency_ms, "86400000", 1, 10ll * 366 * 86400000,
            "an Idempotency-Key (HTTP) or IDEMPOTENCY key is kept this long after its first request"),
    INT_OPT("http-idempotency-keys-max", http_idempotency_keys_max, "1000000", 0, 1000000000,
            "idempotency keys kept at most (all queues); past it a request with a new key is refused (429) until "
            "older keys end"),
    /* Long enough for work a caller waits on; past it the caller gets
     * 202 and the result's Location, and the message still runs. */
    INT_OPT("http-call-timeout-ms", http_call_timeout_ms, "30000", 1, 86400000,
            "a call (POST /v1/queues/<q>/keys/<k>/call) with no timeout= waits this long for its result, then "
            "answers 202 with the result's Location (timeout=0 waits with no limit); a lock acquire or a "
            "campaign with no timeout= waits this long, then answers 409"),
    STR_OPT("http-cors-origins", http_cors_origins, "",
            "origins a browser may call the HTTP API from: * (any), or a comma-separated list of exact origins "
            "(https://app.example:8443); empty: no CORS headers"),
    INT_OPT("max-args", max_args, "65536", 1, 16777216, "arguments per command"),
    SIZE_OPT("max-bulk-bytes", max_bulk_bytes, "16m", 1024, 2 * GiB, "bytes per command argument"),
    SIZE_OPT("max-inline-bytes", max_inline_bytes, "64k", 256, 64 * MiB, "bytes per inline command line"),
    INT_OPT("max-args-unauth", max_args_unauth, "10", 1, 16777216,
            "arguments per command before authentication"),
    SIZE_OPT("max-bulk-bytes-unauth", max_bulk_bytes_unauth, "16k", 256, 2 * GiB,
             "bytes per argument before authentication"),
    SIZE_OPT("max-name-bytes", max_name_bytes, "16k", 1, 64 * MiB, "bytes in a key or other name"),
    /* At most 512 MiB (Redis's proto-max-bulk-len): a record carries a
     * value and up to three names (at most 64 MiB each), and the log takes
     * records of up to 1 GiB (WAL_RECORD_BYTES_LIMIT), so every value this
     * range allows can be stored; 2g once passed the option check and then
     * stopped the server with the log's message instead. */
    SIZE_OPT("max-value-bytes", max_value_bytes, "8m", 0, 512 * MiB, "bytes in a value or payload"),
    /* One reply of many values is built whole before it is sent: a bound
     * on it is a bound on what one command can make the server allocate
     * (MGET of a thousand 8 MiB values once took the server out of memory).
     * 64 MiB is eight default-sized values; a larger value alone always
     * fits (a GET of a 512 MiB value is one value). */
    SIZE_OPT("max-reply-bytes", max_reply_bytes, "64m", 1 * MiB, 4 * GiB,
             "bytes of one reply gathering many values: MGET and KV.RANGE past it answer -LIMIT; Q.PULL COUNT and "
             "Q.PEEK return fewer messages"),
    /* A transaction is one log record and its queued arguments are held
     * until EXEC. Each argument also counts 96 bytes for the record header
     * it may become, and a queued Q.PULL its deliveries (cmd_txn.c), so
     * the record stays within max-multi-bytes + 84: the log's record limit
     * is at least that (persist_record_bytes_max()). */
    INT_OPT("max-multi-commands", max_multi_commands, "10000", 1, 1000000, "commands one MULTI may queue"),
    SIZE_OPT("max-multi-bytes", max_multi_bytes, "16m", 1024, 32 * MiB,
             "bytes one MULTI may queue (arguments plus 96 per argument, plus a Q.PULL's deliveries)"),
    /* A SCAN cursor is the last key a walk examined, kept by the server
     * (cmd_keyspace.c): at most this many, so at most this many times
     * max-name-bytes. 1024 serves a thousand walks at once. */
    INT_OPT("max-scan-cursors", max_scan_cursors, "1024", 1, 10000000,
            "SCAN cursors kept for all clients; an older cursor answers an error (start again from 0)"),
    INT_OPT("max-watches-per-client", max_watches_per_client, "1024", 1, 1000000,
            "watches and observations one connection may hold"),
    /* A schedule is a few hundred bytes plus its payload and a timer entry:
     * ten thousand is far more than operators name by hand, and bounds
     * what a client adding schedules in a loop can make the server keep. */
    INT_OPT("max-schedules", max_schedules, "10000", 0, 10000000,
            "schedules (Q.SCHEDULE) at most; past it adding a new one is refused"),
    /* Q.WATCH FROM replays from this history; 4 MiB holds some tens of
     * thousands of small events, and a catch-up (at most this much at once)
     * stays far below output-soft-bytes' default. 0 keeps none. */
    SIZE_OPT("queue-watch-history-bytes", queue_watch_history_bytes, "4m", 0, 1024 * MiB,
             "queue events kept for Q.WATCH FROM (all queues)"),
    SIZE_OPT("output-hard-bytes", output_hard_bytes, "256m", 64 * KiB, INT64_MAX,
             "a client whose unsent replies pass this is disconnected"),
    SIZE_OPT("output-soft-bytes", output_soft_bytes, "64m", 64 * KiB, INT64_MAX,
             "... or whose unsent replies stay above this for output-soft-seconds"),
    INT_OPT("output-soft-seconds", output_soft_seconds, "60", 1, 86400, "see output-soft-bytes"),
    SIZE_OPT("max-memory-bytes", max_memory_bytes, "0", 0, INT64_MAX,
             "stored data (keys, history, queues, leases, locks, elections) above this refuses writes with -LIMIT; 0 means no limit"),
    BOOL_OPT("verbose", verbose, "no", "log every connection and more"),
    STR_OPT("debug-wal-fault", debug_wal_fault, "",
            "tests only: write-eio:N, write-enospc:N, sync-eio:N or append-eio:N makes the log's Nth such call "
            "and every later one fail"),
    STR_OPT("debug-wal-stall", debug_wal_stall, "",
            "tests only: while this file exists, every write and sync of the log waits (a stalled disk)"),
};
#define NOPTIONS (sizeof options / sizeof options[0])

static const option_def_t *find_option(const char *name)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strcasecmp(options[i].name, name) == 0)
            return &options[i];
    return NULL;
}

/* Parse a decimal integer with an optional k/m/g suffix (sizes only). */
static int parse_number(const char *s, int sized, int64_t *out)
{
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno != 0)
        return -1;
    int64_t mult = 1;
    if (sized && *end != '\0') {
        switch (tolower((unsigned char)*end)) {
        case 'k': mult = KiB; break;
        case 'm': mult = MiB; break;
        case 'g': mult = GiB; break;
        default: return -1;
        }
        end++;
        if (tolower((unsigned char)*end) == 'b')
            end++;
    }
    if (*end != '\0')
        return -1;
    if (v > INT64_MAX / mult || v < INT64_MIN / mult)
        return -1;
    *out = (int64_t)v * mult;
    return 0;
}

static int set_option(ordo_config_t *cfg, const option_def_t *o, const char *value, char *err, size_t elen)
{
    char *base = (char *)cfg + o->offset;
    int64_t v = 0;
    switch (o->type) {
    case OPT_STR:
        if (strlen(value) >= o->str_len) {
            snprintf(err, elen, "option %s: value longer than %zu bytes", o->name, o->str_len - 1);
            return -1;
        }
        strcpy(base, value);
        return 0;
    case OPT_BOOL:
        if (strcasecmp(value, "yes") == 0 || strcmp(value, "1") == 0 || strcasecmp(value, "true") == 0)
            v = 1;
        else if (strcasecmp(value, "no") == 0 || strcmp(value, "0") == 0 || strcasecmp(value, "false") == 0)
            v = 0;
        else {
            snprintf(err, elen, "option %s: expected yes or no, got '%s'", o->name, value);
            return -1;
        }
        break;
    case OPT_FSYNC:
        if (strcasecmp(value, "always") == 0)
            v = FSYNC_ALWAYS;
        else if (strcasecmp(value, "everysec") == 0)
            v = FSYNC_EVERYSEC;
        else if (strcasecmp(value, "no") == 0)
            v = FSYNC_NO;
        else {
            snprintf(err, elen, "option fsync: expected always, everysec or no, got '%s'", value);
            return -1;
        }
        break;
    case OPT_INT:
    case OPT_SIZE:
        if (parse_number(value, o->type == OPT_SIZE, &v) != 0) {
            snprintf(err, elen, "option %s: '%s' is not a %s", o->name, value,
                     o->type == OPT_SIZE ? "size (N, Nk, Nm, Ng)" : "number");
            return -1;
        }
        if (v < o->min || v > o->max) {
            snprintf(err, elen, "option %s: %lld is outside %lld..%lld", o->name, (long long)v,
                     (long long)o->min, (long long)o->max);
            return -1;
        }
        break;
    }
    memcpy(base, &v, sizeof v);
    return 0;
}

void config_defaults(ordo_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char err[256];
    for (size_t i = 0; i < NOPTIONS; i++) {
        int rc = set_option(cfg, &options[i], options[i].def, err, sizeof err);
        (void)rc;
    }
}

int config_set(ordo_config_t *cfg, const char *name, const char *value, char *err, size_t elen)
{
    const option_def_t *o = find_option(name);
    if (o == NULL) {
        snprintf(err, elen, "unknown option '%s' (ordod --help lists them)", name);
        return -1;
    }
    return set_option(cfg, o, value, err, elen);
}

int config_get(const ordo_config_t *cfg, const char *name, char *out, size_t olen)
{
    const option_def_t *o = find_option(name);
    if (o == NULL)
        return -1;
    const char *base = (const char *)cfg + o->offset;
    int64_t v;
    memcpy(&v, base, sizeof v);
    switch (o->type) {
    case OPT_STR: snprintf(out, olen, "%s", base); break;
    case OPT_BOOL: snprintf(out, olen, "%s", v ? "yes" : "no"); break;
    case OPT_FSYNC: snprintf(out, olen, "%s", v == FSYNC_ALWAYS ? "always" : v == FSYNC_EVERYSEC ? "everysec" : "no"); break;
    default: snprintf(out, olen, "%lld", (long long)v); break;
    }
    return 0;
}

void config_foreach(const ordo_config_t *cfg, const char *pattern,
                    void (*fn)(void *arg, const char *name, const char *value), void *arg)
{
    char val[1100];
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (fnmatch(pattern, options[i].name, FNM_CASEFOLD) != 0)
            continue;
        config_get(cfg, options[i].name, val, sizeof val);
        fn(arg, options[i].name, val);
    }
}

/* Read `name value` lines; '#' starts a comment; the value is the rest of
 * the line, trimmed, optionally in double quotes. */
static int parse_file(ordo_config_t *cfg, const char *path, char *err, size_t elen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, elen, "cannot open config file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[4096];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
        lineno++;
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '#' || *p == '\0')
            continue;
        char *name = p;
        while (*p != '\0' && !isspace((unsigned char)*p))
            p++;
        if (*p != '\0')
            *p++ = '\0';
        while (isspace((unsigned char)*p))
            p++;
        char *value = p;
        size_t vl = strlen(value);
        while (vl > 0 && isspace((unsigned char)value[vl - 1]))
            value[--vl] = '\0';
        if (vl >= 2 && value[0] == '"' && value[vl - 1] == '"') {
            value[vl - 1] = '\0';
            value++;
        }
        char msg[512];
        if (config_set(cfg, name, value, msg, sizeof msg) != 0) {
            snprintf(err, elen, "%s:%d: %s", path, lineno, msg);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}

int config_parse_args(ordo_config_t *cfg, int argc, char **argv, int *exit_now,
                      FILE *out, char *err, size_t elen)
{
    *exit_now = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            config_usage(out);
            *exit_now = 1;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, elen, "unexpected argument '%s' (options are --name value)", a);
            return -1;
        }
        char name[128];
        const char *value;
        const char *eq = strchr(a + 2, '=');
        if (eq != NULL) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a - 2), a + 2);
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a + 2);
            if (i + 1 >= argc) {
                snprintf(err, elen, "option --%s needs a value", name);
                return -1;
            }
            value = argv[++i];
        }
        int rc = strcmp(name, "config") == 0 ? parse_file(cfg, value, err, elen)
                                             : config_set(cfg, name, value, err, elen);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* Print v as a size with the largest suffix that divides it (64k, 2g). */
static void format_size(char *out, size_t olen, int64_t v)
{
    static const struct { int64_t mult; char suffix; } units[] = {{GiB, 'g'}, {MiB, 'm'}, {KiB, 'k'}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (v != 0 && v != INT64_MAX && v % units[i].mult == 0) {
            snprintf(out, olen, "%lld%c", (long long)(v / units[i].mult), units[i].suffix);
            return;
        }
    snprintf(out, olen, "%lld", (long long)v);
}

void config_usage(FILE *out)
{
    fprintf(out, "usage: ordod [--config FILE] [--name value]...\n\n"
                 "Options (also accepted as `name value` lines in a config file):\n");
    for (size_t i = 0; i < NOPTIONS; i++) {
        const option_def_t *o = &options[i];
        char range[80] = "";
        if (o->type == OPT_INT || o->type == OPT_SIZE) {
            char lo[32], hi[32];
            if (o->type == OPT_SIZE) {
                format_size(lo, sizeof lo, o->min);
                format_size(hi, sizeof hi, o->max);
            } else {
                snprintf(lo, sizeof lo, "%lld", (long long)o->min);
                snprintf(hi, sizeof hi, "%lld", (long long)o->max);
            }
            snprintf(range, sizeof range, "; range %s..%s", lo, hi);
        }
        fprintf(out, "  --%-24s %s (default: %s%s)\n", o->name, o->help, o->def[0] ? o->def : "\"\"", range);
    }
    fprintf(out, "  --%-24s %s\n", "config FILE", "read options from FILE where this flag appears");
}
