/*
 * cmd.h -- the command layer: the command table, dispatch, and the hooks the
 * net layer calls. This is the only layer that speaks RESP replies; it turns
 * requests into records for the core and results into replies. From the
 * top: registry.c (the families, dispatch), the families (cmd_*.c), then
 * table.c (the command table) and cmd.c (the handlers' helpers).
 *
 * Each command is a cmd_def_t: name, arity (Redis's convention: n > 0 means
 * exactly n arguments including the name, n < 0 means at least -n), flags,
 * handler. Handlers validate arguments before making a record, so a record
 * that reaches the core is well-formed; they reply through the cmd_reply_*
 * helpers, which write the error and return, keeping handlers short.
 */
#ifndef ORDO_CMD_H
#define ORDO_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "net/conn.h"
#include "net/resp.h"
#include "server.h"

enum cmd_flags {
    CMD_NOAUTH = 1 << 0,      /* allowed before authentication */
    CMD_WATCHMODE = 1 << 1,   /* allowed on a RESP2 connection that has watches */
    CMD_WRITE = 1 << 2,       /* makes a record */
    CMD_NOSTATE = 1 << 3,     /* the reply reads no stored key or value: still answered after the
                               * log failed with revisions in memory that it could not store */
};

typedef struct cmd_ctx_s {
    server_t *srv;
    conn_t *conn;
    ordo_buf_t *out;          /* where the reply goes */
    int proto;
    size_t argc;
    const resp_arg_t *argv;
} cmd_ctx_t;

typedef void (*cmd_fn)(cmd_ctx_t *ctx);

typedef struct cmd_def_s {
    const char *name;
    int arity;
    unsigned flags;
    cmd_fn fn;
    const char *summary;      /* one line: what it does and answers (COMMAND DOCS, redis-cli help) */
    const char *syntax;       /* the arguments after the name, in Redis's manual notation
                               * ("key value [NX|XX]"); cmd_docs.c states the notation */
    const char *group;        /* redis-cli's help group: Redis's ("string", "generic",
                               * "connection", "server") or ordo's ("ordo-kv", "ordo-queue", ...) */
} cmd_def_t;

/* cmd_init() -- build the command table from every family (registry.c).
 * Returns 0 or -1. cmd_destroy() frees it. */
int cmd_init(server_t *s);
void cmd_destroy(server_t *s);

/* The command table (table.c), which knows no family: cmd_table_init()
 * makes it empty (0 or -1), cmd_table_add() adds n definitions, which must
 * outlive the table (start-up aborts on a name too long for it or on
 * malformed docs). */
int cmd_table_init(server_t *s);
void cmd_table_add(server_t *s, const cmd_def_t *defs, size_t n);

/* Each family's commands, and their number; registry.c alone names the
 * families. cmd_watch_init() -- send the core's changes to the watches. */
extern const cmd_def_t cmd_server_defs[];
extern const size_t cmd_server_ndefs;
extern const cmd_def_t cmd_kv_defs[];
extern const size_t cmd_kv_ndefs;
extern const cmd_def_t cmd_watch_defs[];
extern const size_t cmd_watch_ndefs;
extern const cmd_def_t cmd_coord_defs[];
extern const size_t cmd_coord_ndefs;
extern const cmd_def_t cmd_queue_defs[];
extern const size_t cmd_queue_ndefs;
extern const cmd_def_t cmd_txn_defs[];
extern const size_t cmd_txn_ndefs;
extern const cmd_def_t cmd_cluster_defs[];
extern const size_t cmd_cluster_ndefs;
void cmd_watch_init(server_t *s);

/* Transactions (cmd_txn.c). cmd_txn_queue() -- if c is in MULTI, queue d
 * (or refuse it) and answer; returns false if d must run now.
 * cmd_txn_refused() -- an unknown command or wrong arity inside MULTI:
 * EXEC will answer -EXECABORT. cmd_txn_conn_closed() -- drop c's
 * transaction and watched keys. */
struct cmd_def_s;
bool cmd_txn_queue(struct cmd_ctx_s *x, const struct cmd_def_s *d);
void cmd_txn_refused(conn_t *c);
void cmd_txn_conn_closed(conn_t *c);

/* The command table, for COMMAND. */
void cmd_foreach(server_t *s, void (*fn)(void *arg, const cmd_def_t *d), void *arg);
size_t cmd_count(server_t *s);
/* Each command's lower-case name and how often it was dispatched (/metrics). */
void cmd_foreach_calls(server_t *s, void (*fn)(void *arg, const char *name, uint64_t calls), void *arg);
/* Error replies the command layer made, by code ("other" for the rest); the
 * writer's replies to parked clients (TIMEOUT, DEADLETTER, ...) are not in
 * these, only in errors_total. */
void cmd_foreach_error_code(server_t *s, void (*fn)(void *arg, const char *code, uint64_t n), void *arg);

/* Docs (cmd_docs.c). cmd_docs_check(): is the syntax, if any, well-formed?
 * cmd_table_add() aborts start-up if not. (A command without docs runs; the
 * integration test requires docs for every command.) cmd_docs_entry() writes the name and the
 * COMMAND DOCS map of d; cmd_docs_name() the lower-case name;
 * cmd_docs_first_key() returns 1 if the first argument is a key (*multiple:
 * repeated), else 0, for COMMAND INFO's key positions. */
bool cmd_docs_check(const cmd_def_t *d);
void cmd_docs_entry(ordo_buf_t *out, int proto, const cmd_def_t *d);
void cmd_docs_name(ordo_buf_t *out, const cmd_def_t *d);
int cmd_docs_first_key(const cmd_def_t *d, bool *multiple);
/* cmd_find() -- the command named a (any case), or NULL. */
const cmd_def_t *cmd_find(server_t *s, const resp_arg_t *a);
/* cmd_find_hinted() -- cmd_find() for dispatch: *hint (NULL at first) is
 * the table entry this connection named last, compared before the table
 * is hashed (a pipeline repeats one command), and set to the one found. An
 * entry lives as long as the table, so a hint never dangles. */
const cmd_def_t *cmd_find_hinted(server_t *s, const resp_arg_t *a, const void **hint);

/* Hooks for the net layer (and cmd_cron for the writer's cron, through
 * s->hooks.cmd_cron). */
void cmd_dispatch(conn_t *c, const resp_cmd_t *cmd);
void cmd_limits(const conn_t *c, resp_limits_t *lim);
void cmd_conn_closed(conn_t *c);     /* drop the connection's watches */
void cmd_conn_drained(conn_t *c);    /* output drained: resume watches catching up */
void cmd_cron(server_t *s);          /* periodic: progress events */
/* For net/http.c (cmd_http.c): why the server does not serve writes
 * (NULL: it does), and the Prometheus text of /metrics appended to out. */
const char *cmd_http_unhealthy(conn_t *c);
void cmd_http_metrics(conn_t *c, ordo_buf_t *out);
/* The JSON of /v1/status (the dashboard's data), appended to out. */
void cmd_http_status(conn_t *c, ordo_buf_t *out);
/* Does queue name[0..n) exist? (true on a member that does not lead: the
 * command then answers, -NOTLEADER.) */
bool cmd_http_queue_exists(conn_t *c, const char *name, size_t n);
/* Is key[0..n) live? Its mod revision in *rev (on a member that does not
 * lead: true and 0, and the write that follows is refused -NOTLEADER). */
bool cmd_http_key_rev(conn_t *c, const char *key, size_t n, uint64_t *rev);
/* The current revision: what a first page of GET /v1/kv is read at. */
uint64_t cmd_http_rev(conn_t *c);
/* Is s[0..n) one JSON text (RFC 8259, nesting at most CMD_JSON_DEPTH_MAX)?
 * A result that is gets Content-Type: application/json. */
#define CMD_JSON_DEPTH_MAX 64
bool cmd_http_is_json(const char *s, size_t n);
/* "name":"s" when s[0..n) is UTF-8 with no control byte but \t, \n, \r,
 * else "name_b64":"<base64>" (docs/http.md): at most twice n, plus quotes. */
void cmd_http_json_field(ordo_buf_t *b, const char *name, const char *s, size_t n);
/* s[0..n) as one JSON string, for text meant to be read (an error's
 * detail): escaped, and a byte that is not UTF-8 becomes U+FFFD. */
void cmd_http_json_text(ordo_buf_t *b, const char *s, size_t n);
/* Server-Sent Events of a watch (docs/http.md), appended to b, the same
 * bytes for every watcher: a change (value NULL: a deletion), "id: rev"
 * first when with_id; a marker (synced, progress, cancelled) with its
 * revision. */
void cmd_http_sse_change(ordo_buf_t *b, bool with_id, const char *key, size_t klen, const char *value, size_t vlen,
                         uint64_t rev);
void cmd_http_sse_marker(ordo_buf_t *b, const char *event, uint64_t rev, bool with_id);

/* Outcomes as RESP (cmd_outcome.c; writer/outcome.h). cmd_render()
 * writes o into out for protocol proto (an error counts in errors_total,
 * an event in watch_events_total); cmd_render_message() one delivered
 * message. */
struct outcome_s;
void cmd_render(server_t *s, ordo_buf_t *out, int proto, const struct outcome_s *o);
void cmd_render_message(ordo_buf_t *out, const queue_delivery_t *d);

/* ---- helpers for handlers ---------------------------------------------- */

/* Argument i equals word (ASCII case-insensitive)? */
bool arg_is(const cmd_ctx_t *x, size_t i, const char *word);
/* Parse argument i as a signed / unsigned 64-bit integer; on failure reply
 * "-ERR value is not an integer or out of range" and return false. */
bool arg_i64(cmd_ctx_t *x, size_t i, int64_t *out);
bool arg_u64(cmd_ctx_t *x, size_t i, uint64_t *out);
/* Check a name (key) / value against max-name-bytes / max-value-bytes;
 * replies -LIMIT and returns false if too long. */
bool arg_name_ok(cmd_ctx_t *x, size_t i);
bool arg_value_ok(cmd_ctx_t *x, size_t i);
/* reply_fits() -- may a reply of about `bytes` be built (max-reply-bytes)?
 * If not, replies -LIMIT with hint (what to ask instead) and returns
 * false. Commands that gather many values ask before building anything. */
bool reply_fits(cmd_ctx_t *x, size_t bytes, const char *hint);

/* Fences (KV.PUT, KV.DEL, Q.PUSH): FENCE lock token, FENCE ELECTION name
 * term, FENCE DELIVERY queue id token. A lock fence is carried by the
 * record and checked by apply (REC_F_FENCE); election and delivery fences
 * are checked by the handler just before it makes its record (the writer
 * thread, so nothing runs in between, and a record made only while the
 * fence holds needs to carry nothing for replay). */
enum cmd_fence_kind { FENCE_NONE = 0, FENCE_LOCK, FENCE_ELECTION, FENCE_DELIVERY };
typedef struct cmd_fence_s {
    int kind;                 /* enum cmd_fence_kind */
    const char *name;         /* the lock, election or queue */
    size_t nlen;
    uint64_t id;              /* DELIVERY: the message id */
    uint64_t token;           /* the lock token, the term, the delivery token */
} cmd_fence_t;
/* cmd_fence_parse() -- argv[i] is FENCE: parse its words into *f. Returns
 * how many arguments it took (FENCE included), or 0 after replying. */
size_t cmd_fence_parse(cmd_ctx_t *x, size_t i, cmd_fence_t *f);
/* cmd_fence_holds() -- an ELECTION or DELIVERY fence holds now (true for
 * none or a lock: apply checks those); else reply -NOTHOLDER naming what no
 * longer holds and return false. */
bool cmd_fence_holds(cmd_ctx_t *x, const cmd_fence_t *f);
/* reply_notholder_lock() -- -NOTHOLDER for a lock fence apply refused. */
void reply_notholder_lock(cmd_ctx_t *x, const cmd_fence_t *f);

void reply_ok(cmd_ctx_t *x);
void reply_err(cmd_ctx_t *x, const char *msg);
void reply_errf(cmd_ctx_t *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* -NOTLEADER host:port (the leader's client address), or -NOTLEADER ? */
void reply_notleader(cmd_ctx_t *x);
void reply_syntax(cmd_ctx_t *x);

/* cmd_write() -- a command's record through the writer's one door,
 * writer_submit() (writer/apply.h): true if applied (res says how); else
 * the door's refusal (-NOTLEADER, -READONLY, -LIMIT past max-memory-bytes,
 * or -READONLY for a record the log refused) is the reply, and false. */
bool cmd_write(cmd_ctx_t *x, record_t *rec, apply_result_t *res);
#endif /* ORDO_CMD_H */
