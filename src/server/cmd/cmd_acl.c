/*
 * cmd_acl.c -- users at the door: who a connection is, whether it may run
 * a command on the names it gives, and the ACL command (SETUSER, GETUSER,
 * DELUSER, LIST, USERS, WHOAMI, CAT, LOG, DRYRUN).
 *
 * The users are the core's (core/acl.h: records, so they replicate and
 * survive restarts). What is not state lives here, in s->acl:
 *   - the implicit default user: until a record defines `default`, the
 *     default user is `on`, allowed everything, with --requirepass as its
 *     password (nopass if none), as a server without users behaves;
 *   - the ACL LOG: refused commands, names and authentications, newest
 *     first, identical ones (reason, context, object, user) counted in one
 *     entry, at most acl-log-max-len. It is this member's, as Redis's is.
 *
 * A connection names its user (c->user, NULL: default) and caches the
 * user found with the table's generation, so a command costs a
 * comparison until the users change. A user deleted or switched off
 * loses its connections' authentication: their next command is answered
 * -NOAUTH, and those that only listen (watches, parked commands) are
 * closed at the next cron (drop_gone_listeners()).
 *
 * The check (cmd_acl_permits()) runs in dispatch after the arity, before
 * a command is queued in MULTI, and again for every queued command at
 * EXEC (the user may have changed in between). Commands allowed before
 * authentication (PING, QUIT, AUTH, HELLO) are not checked: a user who
 * cannot run them could not change who it is.
 *
 * Also here: AUTH's and HTTP's credentials checked against the users
 * (cmd_acl_login(), cmd_acl_http_login()), and the aclfile's users made
 * into records on a first start (cmd_acl_seed()).
 *
 * Invariant: the ACL LOG holds at most acl-log-max-len entries, no two
 * with the same reason, context, object and user.
 */
#include "cmd.h"
#include "core/acl.h"
#include "writer/apply.h"
#include "writer/cluster.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* An ACL LOG entry. object is quoted (quote()), so it is one printable line. */
typedef struct acl_log_entry_s {
    uint64_t count;
    uint64_t id;
    const char *reason;       /* "command", "key", "queue", "coord", "auth" */
    const char *context;      /* "toplevel", "multi", "http" */
    char object[300];         /* the command, the name, or the user tried (auth) */
    char user[ACL_NAME_MAX + 1];
    char client[1024];        /* the last one's CLIENT LIST line (cmd_client_describe()) */
    uint64_t created_ms, updated_ms;
} acl_log_entry_t;

typedef struct cmd_acl_state_s {
    acl_user_t *implicit_default;
    acl_log_entry_t **log;    /* newest first */
    size_t nlog;
    uint64_t next_log_id;
    bool seed_judged;         /* cluster mode: the aclfile was considered once this member led */
    uint64_t swept_gen;       /* the users' generation drop_gone_listeners() last looked at */
} cmd_acl_state_t;

static const char default_name[] = "default";
#define DEFAULT_NLEN (sizeof default_name - 1)

void cmd_acl_init(server_t *s)
{
    cmd_acl_state_t *st = ordo_xcalloc(1, sizeof *st);
    acl_user_t *u = acl_user_new(default_name, DEFAULT_NLEN);
    const char *err;
    static const char all[] = "on allkeys allqueues allcoord +@all";
    int rc = acl_user_rules(u, all, sizeof all - 1, &err);
    assert(rc == 0);
    if (s->cfg.requirepass[0] == '\0') {
        rc = acl_user_rule(u, "nopass", 6, &err);
    } else {
        uint8_t h[ACL_HASH_BYTES];
        acl_hash(s->cfg.requirepass, strlen(s->cfg.requirepass), h);
        char word[2 * ACL_HASH_BYTES + 2] = "#";
        for (size_t i = 0; i < ACL_HASH_BYTES; i++)
            snprintf(word + 1 + 2 * i, 3, "%02x", h[i]);
        rc = acl_user_rule(u, word, strlen(word), &err);
    }
    assert(rc == 0);
    (void)rc;
    st->implicit_default = u;
    s->acl = st;
}

void cmd_acl_destroy(server_t *s)
{
    cmd_acl_state_t *st = s->acl;
    if (st == NULL)
        return;
    acl_user_free(st->implicit_default);
    for (size_t i = 0; i < st->nlog; i++)
        free(st->log[i]);
    free(st->log);
    free(st);
    s->acl = NULL;
}

/* The user called name: the table's, else for `default` the implicit one. */
static const acl_user_t *find_user(server_t *s, const char *name, size_t nlen)
{
    const acl_user_t *u = acl_find(core_acl(s->core), name, nlen);
    if (u == NULL && nlen == DEFAULT_NLEN && memcmp(name, default_name, nlen) == 0)
        u = s->acl->implicit_default;
    return u;
}

bool cmd_acl_default_nopass(server_t *s)
{
    const acl_user_t *u = find_user(s, default_name, DEFAULT_NLEN);
    return u->on && u->nopass;
}

void cmd_acl_set_user(conn_t *c, const char *name, size_t nlen)
{
    free(c->user);
    c->user = NULL;
    if (!(nlen == DEFAULT_NLEN && memcmp(name, default_name, nlen) == 0)) {
        c->user = ordo_xmalloc(nlen + 1);
        memcpy(c->user, name, nlen);
        c->user[nlen] = '\0';
    }
    c->acl_user = NULL;
}

uint64_t cmd_acl_users_gen(server_t *s) { return acl_gen(core_acl(s->core)); }

bool cmd_acl_cert_login(conn_t *c, const char *name, size_t nlen)
{
    const acl_user_t *u = find_user(c->srv, name, nlen);
    if (u == NULL || !u->on)
        return false;
    cmd_acl_set_user(c, name, nlen);
    c->authed = true;
    return true;
}

/* c's user now, NULL if it is gone or off (c is then no longer
 * authenticated). */
static const acl_user_t *conn_user(conn_t *c)
{
    server_t *s = c->srv;
    uint64_t gen = acl_gen(core_acl(s->core));
    if (c->acl_user != NULL && c->acl_gen == gen)
        return c->acl_user;
    const acl_user_t *u =
        c->user != NULL ? find_user(s, c->user, strlen(c->user)) : find_user(s, default_name, DEFAULT_NLEN);
    if (u == NULL || !u->on) {
        c->authed = false;
        cmd_acl_set_user(c, default_name, DEFAULT_NLEN);
        return NULL;
    }
    c->acl_user = u;
    c->acl_gen = gen;
    return u;
}

static const char *conn_user_name(const conn_t *c) { return c->user != NULL ? c->user : default_name; }

/* ---- the log -------------------------------------------------------------------- */

/* At most 64 bytes of a client's word, printable, for a message or the log. */
static void quote(char *dst, size_t dlen, const char *p, size_t len)
{
    size_t j = 0, n = len < 64 ? len : 64;
    for (size_t i = 0; i < n && j + 5 < dlen; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (isprint(ch) && ch != '\'')
            dst[j++] = (char)ch;
        else
            j += (size_t)snprintf(dst + j, dlen - j, "\\x%02x", ch);
    }
    if (len > n && j + 4 < dlen) {
        memcpy(dst + j, "...", 3);
        j += 3;
    }
    dst[j] = '\0';
}

static void log_add(server_t *s, conn_t *c, const char *reason, const char *context, const char *object,
                    const char *user)
{
    cmd_acl_state_t *st = s->acl;
    size_t max = (size_t)s->cfg.acl_log_max_len;
    if (max == 0)
        return;
    acl_log_entry_t *e = NULL;
    size_t at = st->nlog;
    for (size_t i = 0; i < st->nlog; i++)
        if (strcmp(st->log[i]->reason, reason) == 0 && strcmp(st->log[i]->context, context) == 0 &&
            strcmp(st->log[i]->object, object) == 0 && strcmp(st->log[i]->user, user) == 0) {
            e = st->log[i];
            at = i;
            break;
        }
    if (e == NULL) {
        if (st->nlog >= max) { /* the oldest goes (and any past a lowered limit) */
            while (st->nlog >= max)
                free(st->log[--st->nlog]);
        } else {
            st->log = ordo_xrealloc(st->log, (st->nlog + 1) * sizeof *st->log);
        }
        e = ordo_xcalloc(1, sizeof *e);
        e->id = st->next_log_id++;
        e->reason = reason;
        e->context = context;
        snprintf(e->object, sizeof e->object, "%s", object);
        snprintf(e->user, sizeof e->user, "%s", user);
        e->created_ms = s->now_ms;
        at = st->nlog++;
    }
    assert(st->nlog <= max);
    e->count++;
    e->updated_ms = s->now_ms;
    ordo_buf_t line = {0};
    cmd_client_describe(&line, c, server_tick(s));
    snprintf(e->client, sizeof e->client, "%.*s", (int)line.len, line.data);
    ordo_buf_free(&line);
    memmove(&st->log[1], &st->log[0], at * sizeof *st->log); /* to the front */
    st->log[0] = e;
}

/* ---- the check ------------------------------------------------------------------ */

static const char *const kind_word[ACL_NKINDS] = {"key", "queue", "coord"};
static const char *const kind_text[ACL_NKINDS] = {"the key", "the queue", "the lock or election"};

static const char *context_of(const conn_t *c, const char *context)
{
    return c->http != NULL ? "http" : context;
}

/* Why a user may not run a command: the command itself, or one name it
 * gives (of kind, a prefix of names if prefix). */
typedef struct refusal_s {
    bool by_name;
    int kind;
    resp_arg_t name;
    bool prefix;
} refusal_t;

static bool refuse_name_r(refusal_t *r, int kind, resp_arg_t name, bool prefix)
{
    *r = (refusal_t){.by_name = true, .kind = kind, .name = name, .prefix = prefix};
    return false;
}

static bool names_ok(const acl_user_t *u, const cmd_acl_t *t, size_t argc, const resp_arg_t *argv, refusal_t *r)
{
    if (t->untagged) { /* no tag: only a user allowed every name */
        for (int k = 0; k < ACL_NKINDS; k++)
            if (!u->all_names[k]) {
                *r = (refusal_t){.by_name = false};
                return false;
            }
        return true;
    }
    switch (t->names) {
    case NAMES_NONE:
        break;
    case NAMES_ALL:
        if (!u->all_names[t->kind])
            return refuse_name_r(r, t->kind, (resp_arg_t){.ptr = "*", .len = 1}, false);
        break;
    case NAMES_PREFIX:
        if ((size_t)t->first < argc &&
            !acl_prefix_allowed(u, t->kind, argv[t->first].ptr, argv[t->first].len))
            return refuse_name_r(r, t->kind, argv[t->first], true);
        break;
    case NAMES_ARGS: {
        bool prefix = false;
        if (t->prefix_word != NULL)
            for (size_t i = (size_t)t->first + 1; i < argc; i++)
                prefix |= argv[i].len == strlen(t->prefix_word) &&
                          strncasecmp(argv[i].ptr, t->prefix_word, argv[i].len) == 0;
        size_t last = t->last < 0 ? argc - 1 : (size_t)t->last;
        for (size_t i = (size_t)t->first; i <= last && i < argc; i += (size_t)t->step) {
            bool ok = prefix ? acl_prefix_allowed(u, t->kind, argv[i].ptr, argv[i].len)
                             : acl_name_allowed(u, t->kind, argv[i].ptr, argv[i].len);
            if (!ok)
                return refuse_name_r(r, t->kind, argv[i], prefix);
        }
        break;
    }
    default:
        assert(0);
    }
    if (t->opt_word != NULL)
        for (size_t i = (size_t)t->first + 1; i + 1 < argc; i++)
            if (argv[i].len == strlen(t->opt_word) && strncasecmp(argv[i].ptr, t->opt_word, argv[i].len) == 0 &&
                argv[i + 1].len > 0 && !acl_name_allowed(u, t->opt_kind, argv[i + 1].ptr, argv[i + 1].len))
                return refuse_name_r(r, t->opt_kind, argv[i + 1], false);
    return true;
}

/* judge() -- may u run d with these arguments? If not, *r says why. Pure:
 * nothing is logged or replied. */
static bool judge(const acl_user_t *u, const cmd_def_t *d, size_t argc, const resp_arg_t *argv, refusal_t *r)
{
    if (u->all_cmds && u->all_names[ACL_KEYS] && u->all_names[ACL_QUEUES] && u->all_names[ACL_COORD])
        return true; /* the common case: no rule to walk */
    const cmd_acl_t *t = cmd_acl_tag(d, argc, argv);
    /* +cmd / -cmd rules name the command (a subcommand's tag gives only
     * the categories). */
    char lname[ACL_CMD_NAME_MAX + 1];
    size_t n = strlen(d->name);
    assert(n <= ACL_CMD_NAME_MAX);
    for (size_t i = 0; i <= n; i++)
        lname[i] = (char)tolower((unsigned char)d->name[i]);
    if (!acl_cmd_ok(u, lname, n, t->cats)) {
        *r = (refusal_t){.by_name = false};
        return false;
    }
    return names_ok(u, t, argc, argv, r);
}

/* The -NOPERM text of r for user and command d (no code), into buf. For a
 * name, also its quoted form into q (the ACL LOG's object). */
static void refusal_text(char *buf, size_t blen, char *q, size_t qlen, const char *user, const cmd_def_t *d,
                         const refusal_t *r)
{
    if (!r->by_name) {
        snprintf(q, qlen, "%s", d->name);
        for (char *p = q; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        snprintf(buf, blen, "User %s has no permissions to run the '%s' command", user, q);
        return;
    }
    quote(q, qlen, r->name.ptr, r->name.len);
    snprintf(buf, blen, "User %s has no permissions to access %s%s '%s'", user,
             r->prefix ? "every name under the prefix of " : "", kind_text[r->kind], q);
}

bool cmd_acl_permits(cmd_ctx_t *x, const cmd_def_t *d, const char *context)
{
    if (d->flags & CMD_NOAUTH)
        return true;
    const acl_user_t *u = conn_user(x->conn);
    if (u == NULL) {
        reply_err(x, "NOAUTH Authentication required.");
        return false;
    }
    refusal_t r;
    if (judge(u, d, x->argc, x->argv, &r))
        return true;
    char why[512], q[300];
    refusal_text(why, sizeof why, q, sizeof q, conn_user_name(x->conn), d, &r);
    if (r.by_name)
        x->srv->stats.acl_denied_name++;
    else
        x->srv->stats.acl_denied_cmd++;
    log_add(x->srv, x->conn, r.by_name ? kind_word[r.kind] : "command", context_of(x->conn, context), q,
            conn_user_name(x->conn));
    reply_errf(x, "NOPERM %s", why);
    return false;
}

bool cmd_acl_route_allowed(conn_t *c, const char *cmd)
{
    const acl_user_t *u = conn_user(c);
    if (u == NULL)
        return false;
    const cmd_def_t d = {.name = cmd};
    const resp_arg_t argv[1] = {{{cmd}, strlen(cmd)}};
    refusal_t r;
    if (judge(u, &d, 1, argv, &r))
        return true;
    char why[512], q[300];
    refusal_text(why, sizeof why, q, sizeof q, conn_user_name(c), &d, &r);
    c->srv->stats.acl_denied_cmd++;
    log_add(c->srv, c, "command", "http", q, conn_user_name(c));
    return false;
}

/* ---- authentication --------------------------------------------------------------- */

bool cmd_acl_login(cmd_ctx_t *x, const resp_arg_t *user, const resp_arg_t *pass)
{
    const char *name = user != NULL ? user->ptr : default_name;
    size_t nlen = user != NULL ? user->len : DEFAULT_NLEN;
    const acl_user_t *u = acl_name_ok(name, nlen) ? find_user(x->srv, name, nlen) : NULL;
    if (u != NULL && acl_pass_ok(u, pass->ptr, pass->len))
        return true;
    if (u == NULL) { /* hash all the same, so the time taken does not tell which users exist */
        uint8_t h[ACL_HASH_BYTES];
        acl_hash(pass->ptr, pass->len, h);
    }
    char q[300];
    quote(q, sizeof q, name, nlen);
    log_add(x->srv, x->conn, "auth", context_of(x->conn, "toplevel"), q, q);
    return false;
}

bool cmd_acl_http_login(conn_t *c, const char *user, size_t ulen, const char *pass, size_t plen)
{
    const char *name = user != NULL ? user : default_name;
    size_t nlen = user != NULL ? ulen : DEFAULT_NLEN;
    const acl_user_t *u = acl_name_ok(name, nlen) ? find_user(c->srv, name, nlen) : NULL;
    if (u == NULL || !acl_pass_ok(u, pass, plen))
        return false;
    cmd_acl_set_user(c, name, nlen);
    return true;
}

/* One rule of ACL SETUSER or the aclfile to u, refusing a +cmd / -cmd
 * that names no command (a typo would otherwise allow or refuse nothing).
 * Returns 0, or -1 with *err. */
static int apply_rule(server_t *s, acl_user_t *u, const char *w, size_t len, const char **err)
{
    if (len >= 2 && (w[0] == '+' || w[0] == '-') && w[1] != '@' && cmd_lookup(s, w + 1, len - 1) == NULL) {
        *err = "Unknown command";
        return -1;
    }
    return acl_user_rule(u, w, len, err);
}

/* ---- the ACL command ----------------------------------------------------------------- */

static void add_user_line(ordo_buf_t *out, const acl_user_t *u)
{
    ordo_buf_t b = {0};
    ordo_buf_puts(&b, "user ");
    ordo_buf_append(&b, u->name, u->nlen);
    acl_user_describe(u, &b);
    resp_add_bulk(out, b.data, b.len);
    ordo_buf_free(&b);
}

/* Every user by name, the implicit default among them when no record made one. */
static size_t users_count(server_t *s)
{
    const acl_t *a = core_acl(s->core);
    return acl_count(a) + (acl_find(a, default_name, DEFAULT_NLEN) == NULL);
}

static void foreach_user(server_t *s, void (*fn)(void *arg, const acl_user_t *u), void *arg)
{
    const acl_t *a = core_acl(s->core);
    bool implicit = acl_find(a, default_name, DEFAULT_NLEN) == NULL;
    for (size_t i = 0; i < acl_count(a); i++) {
        const acl_user_t *u = acl_user_at(a, i);
        if (implicit && strcmp(u->name, default_name) > 0) {
            fn(arg, s->acl->implicit_default);
            implicit = false;
        }
        fn(arg, u);
    }
    if (implicit)
        fn(arg, s->acl->implicit_default);
}

static void list_one(void *arg, const acl_user_t *u) { add_user_line(((cmd_ctx_t *)arg)->out, u); }

static void name_one(void *arg, const acl_user_t *u) { resp_add_bulk(((cmd_ctx_t *)arg)->out, u->name, u->nlen); }

static void acl_list(cmd_ctx_t *x)
{
    resp_add_array(x->out, users_count(x->srv));
    foreach_user(x->srv, list_one, x);
}

static void acl_users(cmd_ctx_t *x)
{
    resp_add_array(x->out, users_count(x->srv));
    foreach_user(x->srv, name_one, x);
}

static bool user_arg_ok(cmd_ctx_t *x, size_t i)
{
    if (acl_name_ok(x->argv[i].ptr, x->argv[i].len))
        return true;
    reply_err(x, "ERR a user name is 1 to 128 printable bytes without spaces");
    return false;
}

static void acl_setuser(cmd_ctx_t *x)
{
    server_t *s = x->srv;
    if (x->argc < 3) {
        reply_errf(x, "ERR wrong number of arguments for 'acl|setuser' command");
        return;
    }
    if (!user_arg_ok(x, 2))
        return;
    const resp_arg_t *name = &x->argv[2];
    const acl_user_t *cur = find_user(s, name->ptr, name->len);
    if (cur == NULL && acl_count(core_acl(s->core)) >= (size_t)s->cfg.acl_max_users) {
        reply_errf(x, "LIMIT %lld users exist already (acl-max-users)", (long long)s->cfg.acl_max_users);
        return;
    }
    acl_user_t *u = cur != NULL ? acl_user_copy(cur) : acl_user_new(name->ptr, name->len);
    for (size_t i = 3; i < x->argc; i++) {
        const char *err;
        if (apply_rule(s, u, x->argv[i].ptr, x->argv[i].len, &err) != 0) {
            char q[300];
            /* A password is never echoed: >pw and <pw show their first byte. */
            bool secret = x->argv[i].len > 0 && (x->argv[i].ptr[0] == '>' || x->argv[i].ptr[0] == '<');
            quote(q, sizeof q, x->argv[i].ptr, secret ? 1 : x->argv[i].len);
            reply_errf(x, "ERR Error in ACL SETUSER modifier '%s': %s", q, err);
            acl_user_free(u);
            return;
        }
    }
    ordo_buf_t rules = {0};
    acl_user_describe(u, &rules);
    acl_user_free(u);
    if (rules.len > (size_t)s->cfg.max_value_bytes) {
        reply_errf(x, "LIMIT the user's description is %zu bytes, above max-value-bytes", rules.len);
        ordo_buf_free(&rules);
        return;
    }
    record_t rec = {.type = REC_ACL_SETUSER,
                    .acl = {.name = name->ptr, .nlen = (uint32_t)name->len, .rules = rules.data,
                            .rlen = (uint32_t)rules.len}};
    apply_result_t res;
    if (cmd_write(x, &rec, &res))
        reply_ok(x);
    ordo_buf_free(&rules);
}

static void acl_deluser(cmd_ctx_t *x)
{
    if (x->argc < 3) {
        reply_errf(x, "ERR wrong number of arguments for 'acl|deluser' command");
        return;
    }
    for (size_t i = 2; i < x->argc; i++) {
        if (x->argv[i].len == DEFAULT_NLEN && memcmp(x->argv[i].ptr, default_name, DEFAULT_NLEN) == 0) {
            reply_err(x, "ERR The 'default' user cannot be removed");
            return;
        }
    }
    int64_t n = 0;
    for (size_t i = 2; i < x->argc; i++) {
        if (acl_find(core_acl(x->srv->core), x->argv[i].ptr, x->argv[i].len) == NULL)
            continue;
        record_t rec = {.type = REC_ACL_DELUSER, .acl = {.name = x->argv[i].ptr, .nlen = (uint32_t)x->argv[i].len}};
        apply_result_t res;
        if (!cmd_write(x, &rec, &res))
            return;
        n += res.status == AP_OK;
    }
    resp_add_int(x->out, n);
}

static void add_patterns(cmd_ctx_t *x, const acl_user_t *u, int kind, const char *prefix)
{
    ordo_buf_t b = {0};
    for (size_t i = 0; i < u->npats[kind]; i++) {
        if (b.len > 0)
            ordo_buf_puts(&b, " ");
        ordo_buf_puts(&b, prefix);
        ordo_buf_puts(&b, u->pats[kind][i]);
    }
    resp_add_bulk(x->out, b.data ? b.data : "", b.len);
    ordo_buf_free(&b);
}

/* ACL GETUSER: flags, passwords (hashes), commands, keys, queues, coord. */
static void acl_getuser(cmd_ctx_t *x)
{
    if (x->argc != 3) {
        reply_errf(x, "ERR wrong number of arguments for 'acl|getuser' command");
        return;
    }
    const acl_user_t *u = find_user(x->srv, x->argv[2].ptr, x->argv[2].len);
    if (u == NULL) {
        resp_add_null(x->out, x->proto);
        return;
    }
    resp_add_map(x->out, x->proto, 6);
    resp_add_bulk_str(x->out, "flags");
    resp_add_array(x->out, 1 + (u->nopass ? 1 : 0));
    resp_add_bulk_str(x->out, u->on ? "on" : "off");
    if (u->nopass)
        resp_add_bulk_str(x->out, "nopass");
    resp_add_bulk_str(x->out, "passwords");
    resp_add_array(x->out, u->nhashes);
    for (size_t i = 0; i < u->nhashes; i++) {
        char hex[2 * ACL_HASH_BYTES + 1];
        for (size_t b = 0; b < ACL_HASH_BYTES; b++)
            snprintf(hex + 2 * b, 3, "%02x", u->hashes[i][b]);
        resp_add_bulk(x->out, hex, 2 * ACL_HASH_BYTES);
    }
    /* The command rules: the canonical description's tail from the base on. */
    ordo_buf_t b = {0};
    acl_user_describe(u, &b);
    const char *base = NULL;
    for (size_t i = 0; i + 5 <= b.len; i++)
        if ((i == 0 || b.data[i - 1] == ' ') && (memcmp(b.data + i, "+@all", 5) == 0 || memcmp(b.data + i, "-@all", 5) == 0)) {
            base = b.data + i;
            break;
        }
    assert(base != NULL);
    resp_add_bulk_str(x->out, "commands");
    resp_add_bulk(x->out, base, b.len - (size_t)(base - b.data));
    ordo_buf_free(&b);
    resp_add_bulk_str(x->out, "keys");
    add_patterns(x, u, ACL_KEYS, "~");
    resp_add_bulk_str(x->out, "queues");
    add_patterns(x, u, ACL_QUEUES, "%Q~");
    resp_add_bulk_str(x->out, "coord");
    add_patterns(x, u, ACL_COORD, "%C~");
}

typedef struct cat_ctx_s {
    cmd_ctx_t *x;
    unsigned cat;
    size_t n;
    bool count_only;
} cat_ctx_t;

static void cat_one(void *arg, const cmd_acl_t *t)
{
    cat_ctx_t *c = arg;
    if (!(t->cats & c->cat))
        return;
    c->n++;
    if (!c->count_only)
        resp_add_bulk_str(c->x->out, t->name);
}

/* ACL CAT: the categories; ACL CAT cat: the commands (and subcommands
 * with tags of their own, "acl|whoami") in it. */
static void acl_cat(cmd_ctx_t *x)
{
    if (x->argc == 2) {
        resp_add_array(x->out, ACL_NCATS);
        for (unsigned i = 0; i < ACL_NCATS; i++)
            resp_add_bulk_str(x->out, acl_cat_name(i));
        return;
    }
    if (x->argc != 3) {
        reply_errf(x, "ERR wrong number of arguments for 'acl|cat' command");
        return;
    }
    unsigned cat = acl_cat_parse(x->argv[2].ptr, x->argv[2].len);
    if (cat == 0) {
        char q[300];
        quote(q, sizeof q, x->argv[2].ptr, x->argv[2].len);
        reply_errf(x, "ERR Unknown category '%s'", q);
        return;
    }
    cat_ctx_t c = {x, cat, 0, true};
    cmd_acl_foreach_tag(cat_one, &c);
    resp_add_array(x->out, c.n);
    c.count_only = false;
    cmd_acl_foreach_tag(cat_one, &c);
}

static void add_field_str(cmd_ctx_t *x, const char *name, const char *v)
{
    resp_add_bulk_str(x->out, name);
    resp_add_bulk_str(x->out, v);
}

static void add_field_int(cmd_ctx_t *x, const char *name, int64_t v)
{
    resp_add_bulk_str(x->out, name);
    resp_add_int(x->out, v);
}

/* ACL LOG [count | RESET]: entries newest first, Redis's fields. */
static void acl_log(cmd_ctx_t *x)
{
    cmd_acl_state_t *st = x->srv->acl;
    size_t want = 10;
    if (x->argc == 3 && arg_is(x, 2, "RESET")) {
        for (size_t i = 0; i < st->nlog; i++)
            free(st->log[i]);
        st->nlog = 0;
        reply_ok(x);
        return;
    }
    if (x->argc == 3) {
        uint64_t n;
        if (!arg_u64(x, 2, &n))
            return;
        want = n;
    } else if (x->argc > 3) {
        reply_syntax(x);
        return;
    }
    size_t n = want < st->nlog ? want : st->nlog;
    resp_add_array(x->out, n);
    uint64_t now = x->srv->now_ms;
    for (size_t i = 0; i < n; i++) {
        const acl_log_entry_t *e = st->log[i];
        resp_add_map(x->out, x->proto, 10);
        add_field_int(x, "count", (int64_t)e->count);
        add_field_str(x, "reason", e->reason);
        add_field_str(x, "context", e->context);
        add_field_str(x, "object", e->object);
        add_field_str(x, "username", e->user);
        resp_add_bulk_str(x->out, "age-seconds");
        resp_add_double(x->out, x->proto, now > e->created_ms ? (double)(now - e->created_ms) / 1000.0 : 0.0);
        add_field_str(x, "client-info", e->client);
        add_field_int(x, "entry-id", (int64_t)e->id);
        add_field_int(x, "timestamp-created", (int64_t)e->created_ms);
        add_field_int(x, "timestamp-last-updated", (int64_t)e->updated_ms);
    }
}

static void acl_whoami(cmd_ctx_t *x) { resp_add_bulk_str(x->out, conn_user_name(x->conn)); }

/* ACL DRYRUN user command [arg ...]: OK if user's rules allow it, else the
 * refusal's text as a bulk string, as Redis answers; nothing is run,
 * logged or counted. */
static void acl_dryrun(cmd_ctx_t *x)
{
    if (x->argc < 4) {
        reply_errf(x, "ERR wrong number of arguments for 'acl|dryrun' command");
        return;
    }
    const acl_user_t *u = find_user(x->srv, x->argv[2].ptr, x->argv[2].len);
    char q[300];
    if (u == NULL) {
        quote(q, sizeof q, x->argv[2].ptr, x->argv[2].len);
        reply_errf(x, "ERR User '%s' not found", q);
        return;
    }
    const cmd_def_t *d = cmd_lookup(x->srv, x->argv[3].ptr, x->argv[3].len);
    if (d == NULL) {
        quote(q, sizeof q, x->argv[3].ptr, x->argv[3].len);
        reply_errf(x, "ERR Command '%s' not found", q);
        return;
    }
    refusal_t r;
    if ((d->flags & CMD_NOAUTH) || judge(u, d, x->argc - 3, x->argv + 3, &r)) {
        reply_ok(x);
        return;
    }
    char why[512];
    refusal_text(why, sizeof why, q, sizeof q, u->name, d, &r);
    resp_add_bulk_str(x->out, why);
}

static void cmd_acl(cmd_ctx_t *x)
{
    static const struct {
        const char *name;
        cmd_fn fn;
    } subs[] = {
        {"SETUSER", acl_setuser}, {"GETUSER", acl_getuser}, {"DELUSER", acl_deluser}, {"LIST", acl_list},
        {"USERS", acl_users},     {"WHOAMI", acl_whoami},   {"CAT", acl_cat},         {"LOG", acl_log},
        {"DRYRUN", acl_dryrun},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (arg_is(x, 1, subs[i].name)) {
            if ((subs[i].fn == acl_list || subs[i].fn == acl_users || subs[i].fn == acl_whoami) && x->argc != 2) {
                reply_syntax(x);
                return;
            }
            subs[i].fn(x);
            return;
        }
    char q[300];
    quote(q, sizeof q, x->argv[1].ptr, x->argv[1].len);
    reply_errf(x, "ERR unknown subcommand '%s'. Try SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG or "
                  "DRYRUN.", q);
}

/* ---- the aclfile ----------------------------------------------------------------------- */

/* One line, "user NAME RULES...": applied as ACL SETUSER would from a new
 * user. Returns 0, or -1 with err. */
static int seed_line(server_t *s, const char *line, size_t len, ordo_buf_t *rules, char *err, size_t elen)
{
    const char *p = line, *end = line + len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p == '#')
        return 0;
    if ((size_t)(end - p) < 5 || strncmp(p, "user ", 5) != 0) {
        snprintf(err, elen, "a line must be 'user NAME RULES...'");
        return -1;
    }
    p += 5;
    const char *name = p;
    while (p < end && *p != ' ')
        p++;
    size_t nlen = (size_t)(p - name);
    if (!acl_name_ok(name, nlen)) {
        snprintf(err, elen, "a user name is 1 to 128 printable bytes without spaces");
        return -1;
    }
    acl_user_t *u = acl_user_new(name, nlen);
    const char *why = NULL;
    while (p < end) {
        while (p < end && *p == ' ')
            p++;
        const char *w = p;
        while (p < end && *p != ' ')
            p++;
        if (p > w && apply_rule(s, u, w, (size_t)(p - w), &why) != 0) {
            snprintf(err, elen, "user %.*s: %.200s", (int)nlen, name, why);
            acl_user_free(u);
            return -1;
        }
    }
    rules->len = 0;
    acl_user_describe(u, rules);
    acl_user_free(u);
    record_t rec = {.type = REC_ACL_SETUSER,
                    .acl = {.name = name, .nlen = (uint32_t)nlen, .rules = rules->data, .rlen = (uint32_t)rules->len}};
    apply_result_t res;
    char why_w[WRITER_REFUSAL_MAX];
    if (writer_submit(s, &rec, WRITER_CLIENT, &res, why_w, sizeof why_w) != WRITER_APPLIED) {
        snprintf(err, elen, "user %.*s: %.200s", (int)nlen, name, why_w);
        return -1;
    }
    return 0;
}

int cmd_acl_seed(server_t *s, char *err, size_t elen)
{
    if (s->cfg.aclfile[0] == '\0')
        return 0;
    if (core_rev(s->core) != 0) {
        fprintf(stderr, "ordod: aclfile %s not read: the data directory holds state already, and the users are "
                        "the log's (ACL LIST)\n", s->cfg.aclfile);
        return 0;
    }
    FILE *f = fopen(s->cfg.aclfile, "r");
    if (f == NULL) {
        snprintf(err, elen, "aclfile %s: %s", s->cfg.aclfile, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0, users = 0;
    ssize_t n;
    ordo_buf_t rules = {0};
    int rc = 0;
    char why[512];
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            n--;
        size_t before = acl_count(core_acl(s->core));
        if (seed_line(s, line, (size_t)n, &rules, why, sizeof why) != 0) {
            snprintf(err, elen, "aclfile %.200s line %zu: %.300s", s->cfg.aclfile, lineno, why);
            rc = -1;
            break;
        }
        users += acl_count(core_acl(s->core)) > before;
    }
    free(line);
    ordo_buf_free(&rules);
    fclose(f);
    if (rc == 0)
        fprintf(stderr, "ordod: aclfile %s: %zu users created\n", s->cfg.aclfile, users);
    return rc;
}

/* A connection whose user was deleted or switched off gets -NOAUTH at
 * its next command (conn_user()); one that only listens (a watch, an
 * observation, a parked command) sends none, so it is closed, once, when
 * the users change (on every member: a follower applies the records). */
static void drop_gone_listeners(server_t *s)
{
    cmd_acl_state_t *st = s->acl;
    uint64_t gen = acl_gen(core_acl(s->core));
    if (gen == st->swept_gen)
        return;
    st->swept_gen = gen;
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c)) {
        if (c->closing || c->close_after_write || (c->nwatches == 0 && c->waiter == NULL) ||
            (!c->authed && c->http == NULL))
            continue;
        if (conn_user(c) == NULL) {
            c->close_after_write = true;
            conn_mark_dirty(c);
        }
    }
}

void cmd_acl_cron(server_t *s)
{
    cmd_acl_state_t *st = s->acl;
    drop_gone_listeners(s);
    if (s->cfg.node_id == 0 || s->cfg.aclfile[0] == '\0' || st->seed_judged || !cluster_leads(s))
        return;
    st->seed_judged = true;
    char err[600];
    if (cmd_acl_seed(s, err, sizeof err) != 0)
        fprintf(stderr, "ordod: %s (no user was created from it past that line)\n", err);
}

const cmd_def_t cmd_acl_defs[] = {
    {"ACL", -2, 0, cmd_acl,
     "Users and permissions: SETUSER name rules, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT [category], "
     "LOG [count|RESET], DRYRUN user command args",
     "SETUSER username [rule [rule ...]] | GETUSER username | DELUSER username [username ...] | LIST | USERS | "
     "WHOAMI | CAT [category] | LOG [count|RESET] | DRYRUN username command [arg [arg ...]]",
     "server"},
};

const size_t cmd_acl_ndefs = sizeof cmd_acl_defs / sizeof cmd_acl_defs[0];
