/*
 * table.c -- the command table: the commands by lower-case name (s->commands),
 * looked up for every request, listed for COMMAND, and counted for /metrics.
 *
 * It knows no family: cmd_table_add() adds a family's definitions, and the
 * families that read the table (COMMAND, /metrics) call down into it.
 * Invariant: every entry's name is its definition's name in lower case, at
 * most CMD_NAME_MAX bytes, no two entries share a name, and every
 * definition's docs syntax is well-formed (start-up aborts otherwise).
 */
#include "cmd.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int cmd_table_init(server_t *s) { return ordo_htab_init(&s->commands, entry_eq); }

static void free_entry(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

void cmd_destroy(server_t *s)
{
    cmd_keyspace_destroy(s);
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
