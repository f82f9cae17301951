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
    const struct cmd_def_s *def; /* the command running, NULL if none (errors name its tokens) */
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

/* What the ACL rules (core/acl.h) see of a command: its categories and
 * where its arguments name keys, queues, locks or elections. cmd/table.c
 * tags every command (a subcommand may have a tag of its own,
 * "acl|whoami"); a command without a tag counts as @write or @read by its
 * CMD_WRITE flag and needs a user allowed every name. */
enum cmd_names {
    NAMES_NONE = 0,    /* names nothing */
    NAMES_ARGS,        /* argv[first..last] by step (last -1: to the end) are names of kind */
    NAMES_PREFIX,      /* argv[first] is a prefix of names of kind (KV.RANGE) */
    NAMES_ALL,         /* touches every name of kind (Q.LIST, KV.COMPACT) */
};
typedef struct cmd_acl_s {
    const char *name;       /* lower case; "name|sub" for a subcommand's own tag */
    unsigned cats;          /* enum acl_cat */
    uint8_t names;          /* enum cmd_names */
    uint8_t kind;           /* enum acl_kind */
    int8_t first, last, step;
    const char *prefix_word; /* NAMES_ARGS: if this word follows argv[first], it is a prefix (KV.WATCH) */
    const char *opt_word;   /* and the argument after this word (DEADLETTER) is a name of opt_kind too */
    uint8_t opt_kind;
    bool subs;              /* some subcommands have tags of their own */
    bool untagged;          /* no tag: the fallback described above */
} cmd_acl_t;

/* cmd_acl_tag() -- d's tag, the subcommand's if argv[1] names one with
 * its own (argc, argv: the command's arguments). Never NULL. */
const cmd_acl_t *cmd_acl_tag(const cmd_def_t *d, size_t argc, const resp_arg_t *argv);
/* cmd_acl_foreach_tag() -- every tag of the table, for ACL CAT. */
void cmd_acl_foreach_tag(void (*fn)(void *arg, const cmd_acl_t *t), void *arg);

/* Users (cmd_acl.c). cmd_acl_init() -- the implicit default user (from
 * requirepass) and an empty ACL LOG; cmd_acl_destroy() frees them.
 * cmd_acl_default_nopass() -- does a new connection start authenticated
 * (the default user is on and nopass)? cmd_acl_permits() -- may x's user
 * run d with x's arguments? If not, replies -NOPERM (or -NOAUTH if its
 * user was deleted or switched off), logs it (ACL LOG, context
 * "toplevel" or "multi"; "http" on an HTTP connection) and returns false.
 * cmd_acl_login() -- do user (NULL: default) and pass authenticate? A
 * failure is logged; nothing is replied. cmd_acl_set_user() -- c is now
 * this user. cmd_acl_http_login() -- the same from an HTTP request's
 * credentials (user NULL: default); sets c's user if they hold.
 * cmd_acl_users_gen() -- the users' generation: it changes whenever a
 * user is set, deleted or replaced (a snapshot), so a decision made on
 * the users holds while it stays the same (the HTTP door keeps a
 * connection's last credentials that held, with it).
 * cmd_acl_route_allowed() -- may c's user run the command called cmd (an
 * HTTP route that is no command is judged as one)? A refusal is logged.
 * cmd_acl_seed() -- the aclfile's users, as records, if the state is new
 * (revision 0); 0, or -1 with err. cmd_acl_cron() -- close the listening
 * connections (watches, parked commands) of users deleted or switched
 * off; in cluster mode, the first time this member leads, cmd_acl_seed()
 * (a failure is logged). */
void cmd_acl_init(server_t *s);
void cmd_acl_destroy(server_t *s);
bool cmd_acl_default_nopass(server_t *s);
struct cmd_ctx_s;
bool cmd_acl_permits(struct cmd_ctx_s *x, const struct cmd_def_s *d, const char *context);
bool cmd_acl_login(struct cmd_ctx_s *x, const resp_arg_t *user, const resp_arg_t *pass);
void cmd_acl_set_user(conn_t *c, const char *name, size_t nlen);
uint64_t cmd_acl_users_gen(server_t *s);
/* cmd_acl_cert_login() -- a verified client certificate names user
 * name[0..nlen) (tls-auth-clients-user CN): if that user exists and is
 * on, c is now authenticated as it (true); else nothing changes (false). */
bool cmd_acl_cert_login(conn_t *c, const char *name, size_t nlen);
bool cmd_acl_http_login(conn_t *c, const char *user, size_t ulen, const char *pass, size_t plen);
bool cmd_acl_route_allowed(conn_t *c, const char *cmd);
int cmd_acl_seed(server_t *s, char *err, size_t elen);
void cmd_acl_cron(server_t *s);

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
extern const cmd_def_t cmd_string_defs[];
extern const size_t cmd_string_ndefs;
extern const cmd_def_t cmd_keyspace_defs[];
extern const size_t cmd_keyspace_ndefs;
extern const cmd_def_t cmd_acl_defs[];
extern const size_t cmd_acl_ndefs;
void cmd_watch_init(server_t *s);
/* cmd_keyspace_destroy() -- free SCAN's cursors (cmd_destroy()). */
void cmd_keyspace_destroy(server_t *s);

/* Transactions (cmd_txn.c). cmd_txn_queue() -- if c is in MULTI, queue d
 * (or refuse it) and answer; returns false if d must run now.
 * cmd_txn_refused() -- an unknown command or wrong arity inside MULTI:
 * EXEC will answer -EXECABORT. cmd_txn_conn_closed() -- drop c's
 * transaction and watched keys. */
struct cmd_def_s;
bool cmd_txn_queue(struct cmd_ctx_s *x, const struct cmd_def_s *d);
void cmd_txn_refused(conn_t *c);
/* cmd_txn_multi() -- is c between MULTI and EXEC/DISCARD?
 * cmd_txn_queued() -- then the commands it queued, else -1. */
bool cmd_txn_multi(const conn_t *c);
long cmd_txn_queued(const conn_t *c);
/* cmd_client_describe() -- c as a line of CLIENT LIST, without its
 * newline (cmd_server.c), appended to b; now: the writer's clock. */
void cmd_client_describe(ordo_buf_t *b, const conn_t *c, uint64_t now);
void cmd_txn_conn_closed(conn_t *c);

/* The command table, for COMMAND. */
void cmd_foreach(server_t *s, void (*fn)(void *arg, const cmd_def_t *d), void *arg);
size_t cmd_count(server_t *s);
/* Each command's lower-case name and how often it was dispatched (/metrics). */
void cmd_foreach_calls(server_t *s, void (*fn)(void *arg, const char *name, uint64_t calls), void *arg);
/* The same with each command's definition (its help group, say). */
void cmd_foreach_def_calls(server_t *s, void (*fn)(void *arg, const cmd_def_t *d, uint64_t calls), void *arg);
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
/* cmd_lookup() -- the command of this name (any case), or NULL; not
 * counted as a call (ACL SETUSER's +cmd, ACL DRYRUN). */
const cmd_def_t *cmd_lookup(server_t *s, const char *name, size_t len);
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
void cmd_cron(server_t *s);          /* periodic: progress events, the history's samples, a cluster leader's aclfile */
void cmd_watch_cron(server_t *s);    /* cmd_watch.c: watch progress events */
/* The dashboard's history (cmd_history.c): made by cmd_init(), freed by
 * cmd_destroy(); a sample each second from cmd_cron(); its JSON appended
 * to out ({"seconds":{columns},"minutes":{columns}}, docs/http.md): the
 * seconds from unix time since on, the minutes from two minutes before. */
cmd_history_t *cmd_history_create(void);
void cmd_history_destroy(cmd_history_t *h);
void cmd_history_sample(server_t *s);
void cmd_history_json(server_t *s, ordo_buf_t *out, uint64_t since);
/* For net/http.c (cmd_http.c): why the server does not serve writes
 * (NULL: it does), and the Prometheus text of /metrics appended to out. */
const char *cmd_http_unhealthy(conn_t *c);
void cmd_http_metrics(conn_t *c, ordo_buf_t *out);
/* cmd_kv_resumable() -- the oldest revision KV.WATCH FROM accepts: the
 * history holds every key change after it (cmd_kv.c). */
uint64_t cmd_kv_resumable(server_t *s);
/* cmd_replication_info() -- INFO's "# Replication" section, Redis's
 * fields (cmd_cluster.c), appended to b. */
void cmd_replication_info(server_t *s, ordo_buf_t *b);
/* The JSON of /v1/status (the dashboard's data), appended to out; with
 * history_since > 0, its "history" member too (cmd_history_json()). */
void cmd_http_status(conn_t *c, ordo_buf_t *out, uint64_t history_since);
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

/* cmd_quote() -- at most 64 bytes of a client's word a into dst (dlen
 * bytes, at least 6), printable, a quote or other byte as \xNN: an error
 * message may quote it without CR/LF injection or a flood. */
void cmd_quote(char *dst, size_t dlen, const resp_arg_t *a);
/* Argument i equals word (ASCII case-insensitive)? */
bool arg_is(const cmd_ctx_t *x, size_t i, const char *word);
/* Parse argument i as a signed / unsigned 64-bit integer; on failure reply
 * "-ERR value is not an integer or out of range: <name> is '<value>'
 * (<range>)" and return false. The name is the option token before it
 * (IFREV), or the syntax's placeholder (increment), or "argument i". */
bool arg_i64(cmd_ctx_t *x, size_t i, int64_t *out);
bool arg_u64(cmd_ctx_t *x, size_t i, uint64_t *out);
/* Expiry options of SET, SETEX, GETEX (cmd_kv.c): cmd_expiry_unit() is
 * the option argument i names (EX, PX, EXAT, PXAT), 0 if none;
 * cmd_expiry_at() parses argument i, a positive count in that unit, into
 * an absolute deadline *at_ms, or replies Redis's "invalid expire time in
 * '<cmd>' command" (or the integer error) and returns false. */
enum cmd_expiry_unit { EXPIRY_EX = 1, EXPIRY_PX, EXPIRY_EXAT, EXPIRY_PXAT };
int cmd_expiry_unit(const cmd_ctx_t *x, size_t i);
bool cmd_expiry_at(cmd_ctx_t *x, size_t i, int unit, const char *cmd, uint64_t *at_ms);
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
/* reply_syntax_at() -- "-ERR syntax error" naming argument i, the token
 * the parser could not place. */
void reply_syntax_at(cmd_ctx_t *x, size_t i);

/* cmd_write() -- a command's record through the writer's one door,
 * writer_submit() (writer/apply.h): true if applied (res says how); else
 * the door's refusal (-NOTLEADER, -READONLY, -LIMIT past max-memory-bytes,
 * or -READONLY for a record the log refused) is the reply, and false. */
bool cmd_write(cmd_ctx_t *x, record_t *rec, apply_result_t *res);
#endif /* ORDO_CMD_H */
