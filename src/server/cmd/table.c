/*
 * table.c -- the command table: the commands by lower-case name (s->commands),
 * looked up for every request, listed for COMMAND, and counted for /metrics.
 *
 * It knows no family: cmd_table_add() adds a family's definitions, and the
 * families that read the table (COMMAND, /metrics) call down into it.
 * It also holds the ACL tags (cmd_acl_tag()): each command's categories
 * and where its arguments name keys, queues, locks or elections.
 *
 * Invariant: every entry's name is its definition's name in lower case, at
 * most CMD_NAME_MAX bytes, no two entries share a name, and every
 * definition's docs syntax is well-formed (start-up aborts otherwise).
 */
#include "cmd.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/acl.h"

typedef struct cmd_entry_s {
    ordo_hnode_t node;
    const cmd_def_t *def;
    size_t nlen;
    char name[32];   /* lower case */
    char upper[32];  /* upper case: a hinted lookup compares both (cmd_find_hinted()) */
    uint64_t calls;  /* times dispatched (looked up), for /metrics */
} cmd_entry_t;

#define CMD_NAME_MAX 31

/* The command table's hash: FNV-1a of the lower-cased name. Not SipHash
 * (ordo_htab_hash): the table holds only our own command names, fixed at
 * startup, so a client cannot build chains in it (an unknown name is a miss
 * in a short chain), and hashing the name of every command with SipHash
 * cost more than the lookup. */
#define NAME_HASH_SEED 0xcbf29ce484222325ULL

static inline uint64_t name_hash_step(uint64_t h, unsigned char ch)
{
    return (h ^ ch) * 0x100000001b3ULL;
}

static uint64_t name_hash(const char *name, size_t len)
{
    uint64_t h = NAME_HASH_SEED;
    for (size_t i = 0; i < len; i++)
        h = name_hash_step(h, (unsigned char)name[i]);
    return h;
}

static bool entry_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const cmd_entry_t *e = (const cmd_entry_t *)n;
    return e->nlen == len && memcmp(e->name, key, len) == 0;
}

void cmd_table_add(server_t *s, const cmd_def_t *defs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cmd_entry_t *e = ordo_xcalloc(1, sizeof *e);
        e->def = &defs[i];
        e->nlen = strlen(defs[i].name);
        if (e->nlen > CMD_NAME_MAX) {
            fprintf(stderr, "ordod: command name too long: %s\n", defs[i].name);
            abort();
        }
        if (!cmd_docs_check(&defs[i])) {
            fprintf(stderr, "ordod: command %s: malformed syntax in its docs: %s\n", defs[i].name, defs[i].syntax);
            abort();
        }
        for (size_t j = 0; j < e->nlen; j++) {
            e->name[j] = (char)tolower((unsigned char)defs[i].name[j]);
            e->upper[j] = (char)toupper((unsigned char)defs[i].name[j]);
        }
        uint64_t h = name_hash(e->name, e->nlen);
        if (ordo_htab_find(&s->commands, h, e->name, e->nlen) != NULL) {
            fprintf(stderr, "ordod: command %s defined twice\n", defs[i].name);
            abort();
        }
        ordo_htab_insert(&s->commands, &e->node, h);
    }
}

static bool tags_sorted(void);

int cmd_table_init(server_t *s)
{
    if (!tags_sorted()) {
        fprintf(stderr, "ordod: cmd/table.c's ACL tags are not in name order\n");
        abort();
    }
    return ordo_htab_init(&s->commands, entry_eq);
}

static void free_entry(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

void cmd_destroy(server_t *s)
{
    cmd_keyspace_destroy(s);
    cmd_acl_destroy(s);
    ordo_htab_foreach(&s->commands, free_entry, NULL);
    ordo_htab_destroy(&s->commands);
    cmd_history_destroy(s->history);
    s->history = NULL;
}

typedef struct foreach_ctx_s {
    void (*fn)(void *arg, const cmd_def_t *d);
    void *arg;
} foreach_ctx_t;

static void foreach_entry(ordo_hnode_t *n, void *arg)
{
    foreach_ctx_t *f = arg;
    f->fn(f->arg, ((cmd_entry_t *)n)->def);
}

void cmd_foreach(server_t *s, void (*fn)(void *arg, const cmd_def_t *d), void *arg)
{
    foreach_ctx_t f = {fn, arg};
    ordo_htab_foreach(&s->commands, foreach_entry, &f);
}

size_t cmd_count(server_t *s) { return s->commands.count; }

typedef struct calls_ctx_s {
    void (*fn)(void *arg, const char *name, uint64_t calls);
    void *arg;
} calls_ctx_t;

static void calls_entry(ordo_hnode_t *n, void *arg)
{
    calls_ctx_t *f = arg;
    const cmd_entry_t *e = (const cmd_entry_t *)n;
    f->fn(f->arg, e->name, e->calls);
}

void cmd_foreach_calls(server_t *s, void (*fn)(void *arg, const char *name, uint64_t calls), void *arg)
{
    calls_ctx_t f = {fn, arg};
    ordo_htab_foreach(&s->commands, calls_entry, &f);
}

typedef struct def_calls_ctx_s {
    void (*fn)(void *arg, const cmd_def_t *d, uint64_t calls);
    void *arg;
} def_calls_ctx_t;

static void def_calls_entry(ordo_hnode_t *n, void *arg)
{
    def_calls_ctx_t *f = arg;
    const cmd_entry_t *e = (const cmd_entry_t *)n;
    f->fn(f->arg, e->def, e->calls);
}

void cmd_foreach_def_calls(server_t *s, void (*fn)(void *arg, const cmd_def_t *d, uint64_t calls), void *arg)
{
    def_calls_ctx_t f = {fn, arg};
    ordo_htab_foreach(&s->commands, def_calls_entry, &f);
}

static cmd_entry_t *lookup(server_t *s, const resp_arg_t *a)
{
    char name[CMD_NAME_MAX + 1];
    if (a->len == 0 || a->len > CMD_NAME_MAX)
        return NULL;
    /* Lower-case (ASCII, as tolower() in the "C" locale the server runs
     * in) and hash in one pass: this runs for every command. */
    uint64_t h = NAME_HASH_SEED;
    for (size_t i = 0; i < a->len; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        ch = (unsigned char)((unsigned)(ch - 'A') < 26u ? ch + ('a' - 'A') : ch);
        name[i] = (char)ch;
        h = name_hash_step(h, ch);
    }
    ORDO_DEBUG_ASSERT(h == name_hash(name, a->len));
    return (cmd_entry_t *)ordo_htab_find(&s->commands, h, name, a->len);
}

const cmd_def_t *cmd_lookup(server_t *s, const char *name, size_t len)
{
    const cmd_entry_t *e = lookup(s, &(resp_arg_t){{name}, len});
    return e != NULL ? e->def : NULL;
}

const cmd_def_t *cmd_find(server_t *s, const resp_arg_t *a)
{
    cmd_entry_t *e = lookup(s, a);
    if (e == NULL)
        return NULL;
    e->calls++;
    return e->def;
}

/* Is a e's name in any case (ASCII)? Each byte is its lower- or its
 * upper-case form, which for a non-letter are the same byte. */
static bool same_name(const cmd_entry_t *e, const resp_arg_t *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] != e->upper[i] && a->ptr[i] != e->name[i])
            return false;
    return true;
}

const cmd_def_t *cmd_find_hinted(server_t *s, const resp_arg_t *a, const void **hint)
{
    cmd_entry_t *e = (cmd_entry_t *)*hint;
    if (e == NULL || e->nlen != a->len || !same_name(e, a)) {
        e = lookup(s, a);
        if (e == NULL)
            return NULL;
        *hint = e;
    }
    e->calls++;
    return e->def;
}

/* ---- ACL tags -----------------------------------------------------------------
 * Every command's categories and named arguments (cmd.h, cmd_acl_t), in
 * name order (cmd_table_init() aborts start-up otherwise: lookups are a
 * binary search). A command added to a family needs a row here; the
 * integration tests check that every command has one. */

#define R ACL_CAT_READ
#define W ACL_CAT_WRITE
#define KS ACL_CAT_KEYSPACE
#define QU ACL_CAT_QUEUE
#define CO ACL_CAT_COORD
#define WA ACL_CAT_WATCH
#define AD ACL_CAT_ADMIN
#define DA ACL_CAT_DANGEROUS
#define CN ACL_CAT_CONNECTION
#define TX ACL_CAT_TRANSACTION
/* Names: one at argv[1], all from argv[1] on, a prefix at argv[1], every one. */
#define KEY1 .names = NAMES_ARGS, .kind = ACL_KEYS, .first = 1, .last = 1, .step = 1
#define KEYS .names = NAMES_ARGS, .kind = ACL_KEYS, .first = 1, .last = -1, .step = 1
#define QUEUE1 .names = NAMES_ARGS, .kind = ACL_QUEUES, .first = 1, .last = 1, .step = 1
#define COORD1 .names = NAMES_ARGS, .kind = ACL_COORD, .first = 1, .last = 1, .step = 1

#define T(n, c, ...) {.name = n, .cats = c, __VA_ARGS__}

static const cmd_acl_t acl_tags[] = {
    T("acl", AD | DA, .subs = true),
    T("acl|cat", CN),
    T("acl|whoami", CN),
    T("append", W | KS, KEY1),
    T("auth", CN),
    T("client", CN, .subs = true),
    T("client|kill", AD | DA),
    T("client|list", AD | DA),
    T("cluster", AD | DA),
    T("command", CN),
    T("config", AD | DA),
    T("dbsize", R | KS),
    T("debug", AD | DA),
    T("decr", W | KS, KEY1),
    T("decrby", W | KS, KEY1),
    T("del", W | KS, KEYS),
    T("discard", TX),
    T("echo", CN),
    T("elect.campaign", W | CO, COORD1),
    T("elect.keepalive", W | CO, COORD1),
    T("elect.leader", R | CO, COORD1),
    T("elect.observe", R | CO | WA, COORD1),
    T("elect.proclaim", W | CO, COORD1),
    T("elect.resign", W | CO, COORD1),
    T("eval", CN),      /* the scripting commands only answer an error */
    T("eval_ro", CN),
    T("evalsha", CN),
    T("evalsha_ro", CN),
    T("exec", TX),      /* its commands are checked one by one (cmd_txn.c) */
    T("exists", R | KS, KEYS),
    T("expire", W | KS, KEY1),
    T("expireat", W | KS, KEY1),
    T("expiretime", R | KS, KEY1),
    T("fcall", CN),
    T("fcall_ro", CN),
    T("flushall", W | KS | DA, .names = NAMES_ALL, .kind = ACL_KEYS),
    T("flushdb", W | KS | DA, .names = NAMES_ALL, .kind = ACL_KEYS),
    T("function", CN),
    T("get", R | KS, KEY1),
    T("getdel", W | KS, KEY1),
    T("getex", W | KS, KEY1),
    T("hello", CN),
    T("incr", W | KS, KEY1),
    T("incrby", W | KS, KEY1),
    T("info", AD | DA),
    T("keys", R | KS | DA, .names = NAMES_ALL, .kind = ACL_KEYS),   /* names every key it may match */
    T("kv.compact", W | KS | DA, .names = NAMES_ALL, .kind = ACL_KEYS),
    T("kv.del", W | KS, KEY1),
    T("kv.get", R | KS, KEY1),
    T("kv.put", W | KS, KEY1),
    T("kv.range", R | KS, .names = NAMES_PREFIX, .kind = ACL_KEYS, .first = 1),
    T("kv.rev", R | KS),
    T("kv.unwatch", WA),
    T("kv.watch", R | KS | WA, KEY1, .prefix_word = "PREFIX"),
    T("lease.grant", W | CO),
    T("lease.keepalive", W | CO),
    T("lease.revoke", W | CO),
    T("lease.ttl", R | CO),
    T("lock.acquire", W | CO, COORD1),
    T("lock.check", R | CO, COORD1),
    T("lock.extend", W | CO, COORD1),
    T("lock.info", R | CO, COORD1),
    T("lock.release", W | CO, COORD1),
    T("mget", R | KS, KEYS),
    T("mset", W | KS, .names = NAMES_ARGS, .kind = ACL_KEYS, .first = 1, .last = -1, .step = 2),
    T("msetnx", W | KS, .names = NAMES_ARGS, .kind = ACL_KEYS, .first = 1, .last = -1, .step = 2),
    T("multi", TX),
    T("persist", W | KS, KEY1),
    T("pexpire", W | KS, KEY1),
    T("pexpireat", W | KS, KEY1),
    T("pexpiretime", R | KS, KEY1),
    T("ping", CN),
    T("psetex", W | KS, KEY1),
    T("pttl", R | KS, KEY1),
    T("q.ack", W | QU, QUEUE1),
    T("q.call", W | QU, QUEUE1),
    T("q.cancel", W | QU, QUEUE1),
    T("q.config", W | QU | AD, QUEUE1, .opt_word = "DEADLETTER", .opt_kind = ACL_QUEUES),
    T("q.drop", W | QU | DA, QUEUE1),
    T("q.extend", W | QU, QUEUE1),
    T("q.info", R | QU, QUEUE1),
    T("q.keyinfo", R | QU, QUEUE1),
    T("q.len", R | QU, QUEUE1),
    T("q.list", R | QU, .names = NAMES_ALL, .kind = ACL_QUEUES),
    T("q.nack", W | QU, QUEUE1),
    T("q.pause", W | QU, QUEUE1),
    T("q.peek", R | QU, QUEUE1),
    T("q.pull", W | QU, QUEUE1),
    T("q.push", W | QU, QUEUE1),
    T("q.redrive", W | QU, QUEUE1, .opt_word = "FROM", .opt_kind = ACL_QUEUES),
    T("q.result", R | QU, QUEUE1),
    T("q.resume", W | QU, QUEUE1),
    T("q.schedule", W | QU | AD, .subs = true),
    T("q.schedule|add", W | QU, .names = NAMES_ARGS, .kind = ACL_QUEUES, .first = 3, .last = 3, .step = 1),
    T("q.schedule|del", W | QU | AD),
    T("q.schedule|list", R | QU),
    T("q.topkeys", R | QU, QUEUE1),
    T("q.unpark", W | QU, QUEUE1),
    T("q.watch", R | QU | WA, QUEUE1),
    T("quit", CN),
    T("role", AD | DA),
    T("scan", R | KS, .names = NAMES_ALL, .kind = ACL_KEYS),
    T("script", CN),
    T("set", W | KS, KEY1),
    T("setex", W | KS, KEY1),
    T("snapshot", AD),
    T("strlen", R | KS, KEY1),
    T("time", CN),
    T("ttl", R | KS, KEY1),
    T("type", R | KS, KEY1),
    T("unlink", W | KS, KEYS),
    T("unwatch", TX),
    T("watch", R | TX, KEYS),
};

#undef T
#undef R
#undef W
#undef KS
#undef QU
#undef CO
#undef WA
#undef AD
#undef DA
#undef CN
#undef TX
#undef KEY1
#undef KEYS
#undef QUEUE1
#undef COORD1

#define NTAGS (sizeof acl_tags / sizeof acl_tags[0])

static bool tags_sorted(void)
{
    for (size_t i = 1; i < NTAGS; i++)
        if (strcasecmp(acl_tags[i - 1].name, acl_tags[i].name) >= 0)
            return false;
    return true;
}

static int tag_cmp(const void *key, const void *row)
{
    return strcasecmp(key, ((const cmd_acl_t *)row)->name);
}

static const cmd_acl_t *find_tag(const char *name)
{
    return bsearch(name, acl_tags, NTAGS, sizeof acl_tags[0], tag_cmp);
}

/* The fallbacks for a command without a tag (cmd.h). */
static const cmd_acl_t untagged_read = {.name = "", .cats = ACL_CAT_READ, .untagged = true};
static const cmd_acl_t untagged_write = {.name = "", .cats = ACL_CAT_WRITE, .untagged = true};

const cmd_acl_t *cmd_acl_tag(const cmd_def_t *d, size_t argc, const resp_arg_t *argv)
{
    const cmd_acl_t *t = find_tag(d->name);
    if (t == NULL)
        return d->flags & CMD_WRITE ? &untagged_write : &untagged_read;
    if (t->subs && argc >= 2 && argv[1].len <= 32) {
        char sub[CMD_NAME_MAX + 1 + 32 + 1];
        int n = snprintf(sub, sizeof sub, "%s|%.*s", t->name, (int)argv[1].len, argv[1].ptr);
        const cmd_acl_t *st = n > 0 && (size_t)n < sizeof sub ? find_tag(sub) : NULL;
        if (st != NULL)
            return st;
    }
    return t;
}

void cmd_acl_foreach_tag(void (*fn)(void *arg, const cmd_acl_t *t), void *arg)
{
    for (size_t i = 0; i < NTAGS; i++)
        fn(arg, &acl_tags[i]);
}
