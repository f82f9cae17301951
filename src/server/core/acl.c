/*
 * acl.c -- the users table, the rule language and the checks (acl.h says
 * what a user is and the invariants).
 *
 * Passwords are hashed with SHA-256 from OpenSSL's libcrypto (EVP_Digest),
 * the library the server links for TLS too: a library call, not a layer
 * (the core calls nothing of ordod but base/). The hash of a rule's >pw
 * is made where the rule is parsed, and the record carries only the hash
 * (#hex), so the log and snapshots never hold a password.
 *
 * Users are few and looked up at AUTH and when a connection's cached user
 * went stale (acl_gen()), so the table is an array sorted by name: binary
 * search, and ACL LIST comes out in order.
 */
#include "acl.h"

#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <openssl/evp.h>

#include "base/glob.h"

static const char *const cat_names[ACL_NCATS] = {
    "read", "write", "keyspace", "queue", "coord", "watch", "admin", "dangerous", "connection", "transaction",
};

const char *acl_cat_name(unsigned i)
{
    assert(i < ACL_NCATS);
    return cat_names[i];
}

static bool word_eq(const char *w, size_t len, const char *lit)
{
    return strlen(lit) == len && strncasecmp(w, lit, len) == 0;
}

unsigned acl_cat_parse(const char *name, size_t len)
{
    if (word_eq(name, len, "kv"))
        return ACL_CAT_KEYSPACE;
    for (unsigned i = 0; i < ACL_NCATS; i++)
        if (word_eq(name, len, cat_names[i]))
            return 1u << i;
    return 0;
}

/* ---- users -------------------------------------------------------------------- */

void acl_hash(const char *pw, size_t len, uint8_t out[ACL_HASH_BYTES])
{
    unsigned int n = 0;
    int ok = EVP_Digest(pw, len, out, &n, EVP_sha256(), NULL);
    assert(ok == 1 && n == ACL_HASH_BYTES);
    (void)ok;
}

static bool printable_word(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] > '~')
            return false;
    return true;
}

bool acl_name_ok(const char *name, size_t nlen)
{
    return nlen > 0 && nlen <= ACL_NAME_MAX && printable_word(name, nlen);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = ordo_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void derive(acl_user_t *u)
{
    u->all_cmds = u->base_allow && u->nrules == 0;
    for (int k = 0; k < ACL_NKINDS; k++) {
        u->all_names[k] = false;
        for (size_t i = 0; i < u->npats[k]; i++)
            if (strcmp(u->pats[k][i], "*") == 0)
                u->all_names[k] = true;
    }
}

acl_user_t *acl_user_new(const char *name, size_t nlen)
{
    assert(acl_name_ok(name, nlen));
    acl_user_t *u = ordo_xcalloc(1, sizeof *u);
    u->name = dup_bytes(name, nlen);
    u->nlen = nlen;
    derive(u);
    return u;
}

static void clear_pats(acl_user_t *u, int k)
{
    for (size_t i = 0; i < u->npats[k]; i++)
        free(u->pats[k][i]);
    free(u->pats[k]);
    u->pats[k] = NULL;
    u->npats[k] = 0;
}

static void clear_passwords(acl_user_t *u)
{
    free(u->hashes);
    u->hashes = NULL;
    u->nhashes = 0;
    u->nopass = false;
}

static void clear_rules(acl_user_t *u, bool base_allow)
{
    free(u->rules);
    u->rules = NULL;
    u->nrules = 0;
    u->base_allow = base_allow;
}

void acl_user_free(acl_user_t *u)
{
    if (u == NULL)
        return;
    for (int k = 0; k < ACL_NKINDS; k++)
        clear_pats(u, k);
    free(u->hashes);
    free(u->rules);
    free(u->name);
    free(u);
}

acl_user_t *acl_user_copy(const acl_user_t *u)
{
    acl_user_t *c = ordo_xmalloc(sizeof *c);
    *c = *u;
    c->name = dup_bytes(u->name, u->nlen);
    c->hashes = NULL;
    if (u->nhashes > 0) {
        c->hashes = ordo_xmalloc(u->nhashes * ACL_HASH_BYTES);
        memcpy(c->hashes, u->hashes, u->nhashes * ACL_HASH_BYTES);
    }
    c->rules = NULL;
    if (u->nrules > 0) {
        c->rules = ordo_xmalloc(u->nrules * sizeof *c->rules);
        memcpy(c->rules, u->rules, u->nrules * sizeof *c->rules);
    }
    for (int k = 0; k < ACL_NKINDS; k++) {
        c->pats[k] = NULL;
        if (u->npats[k] == 0)
            continue;
        c->pats[k] = ordo_xmalloc(u->npats[k] * sizeof *c->pats[k]);
        for (size_t i = 0; i < u->npats[k]; i++)
            c->pats[k][i] = dup_bytes(u->pats[k][i], strlen(u->pats[k][i]));
    }
    return c;
}

static int fail(const char **err, const char *msg)
{
    *err = msg;
    return -1;
}

static ssize_t find_hash(const acl_user_t *u, const uint8_t h[ACL_HASH_BYTES])
{
    for (size_t i = 0; i < u->nhashes; i++)
        if (memcmp(u->hashes[i], h, ACL_HASH_BYTES) == 0)
            return (ssize_t)i;
    return -1;
}

static int add_hash(acl_user_t *u, const uint8_t h[ACL_HASH_BYTES], const char **err)
{
    if (find_hash(u, h) >= 0) {
        u->nopass = false;
        return 0;
    }
    if (u->nhashes >= ACL_PASSWORDS_MAX)
        return fail(err, "too many passwords for one user (ACL_PASSWORDS_MAX, 64)");
    u->hashes = ordo_xrealloc(u->hashes, (u->nhashes + 1) * ACL_HASH_BYTES);
    memcpy(u->hashes[u->nhashes++], h, ACL_HASH_BYTES);
    u->nopass = false;
    return 0;
}

static int del_hash(acl_user_t *u, const uint8_t h[ACL_HASH_BYTES], const char **err)
{
    ssize_t i = find_hash(u, h);
    if (i < 0)
        return fail(err, "no such password for this user");
    memmove(u->hashes[i], u->hashes[i + 1], (u->nhashes - (size_t)i - 1) * ACL_HASH_BYTES);
    u->nhashes--;
    return 0;
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool parse_hex_hash(const char *s, size_t len, uint8_t out[ACL_HASH_BYTES])
{
    if (len != 2 * ACL_HASH_BYTES)
        return false;
    for (size_t i = 0; i < ACL_HASH_BYTES; i++) {
        int hi = hex_val(s[2 * i]), lo = hex_val(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static int add_pattern(acl_user_t *u, int k, const char *p, size_t len, const char **err)
{
    if (len == 0 || len > ACL_PATTERN_MAX || !printable_word(p, len))
        return fail(err, "a pattern is 1 to 512 printable bytes without spaces");
    for (size_t i = 0; i < u->npats[k]; i++)
        if (strlen(u->pats[k][i]) == len && memcmp(u->pats[k][i], p, len) == 0)
            return 0;
    if (u->npats[k] >= ACL_PATTERNS_MAX)
        return fail(err, "too many patterns of one kind for one user (ACL_PATTERNS_MAX, 1024)");
    u->pats[k] = ordo_xrealloc(u->pats[k], (u->npats[k] + 1) * sizeof *u->pats[k]);
    u->pats[k][u->npats[k]++] = dup_bytes(p, len);
    return 0;
}

static void all_names(acl_user_t *u, int k)
{
    clear_pats(u, k);
    const char *e;
    int rc = add_pattern(u, k, "*", 1, &e);
    assert(rc == 0);
    (void)rc;
}

/* A +/- rule for a category (cats != 0) or a command. */
static int add_rule(acl_user_t *u, bool allow, unsigned cats, const char *cmd, size_t clen, const char **err)
{
    acl_rule_t r = {.allow = allow, .cats = cats};
    if (cats == 0) {
        if (clen == 0 || clen > ACL_CMD_NAME_MAX || !printable_word(cmd, clen) || memchr(cmd, '|', clen) != NULL)
            return fail(err, "unknown command name in a +/- rule (subcommands are not supported)");
        for (size_t i = 0; i < clen; i++)
            r.cmd[i] = (char)tolower((unsigned char)cmd[i]);
    }
    for (size_t i = 0; i < u->nrules; i++)
        if (u->rules[i].cats == r.cats && strcmp(u->rules[i].cmd, r.cmd) == 0) {
            /* The same target: the new rule overrides the old one wherever it applies. */
            memmove(&u->rules[i], &u->rules[i + 1], (u->nrules - i - 1) * sizeof r);
            u->nrules--;
            break;
        }
    if (u->nrules >= ACL_RULES_MAX)
        return fail(err, "too many command rules for one user (ACL_RULES_MAX, 1024)");
    u->rules = ordo_xrealloc(u->rules, (u->nrules + 1) * sizeof r);
    u->rules[u->nrules++] = r;
    return 0;
}

static void reset_user(acl_user_t *u)
{
    u->on = false;
    clear_passwords(u);
    clear_rules(u, false);
    for (int k = 0; k < ACL_NKINDS; k++)
        clear_pats(u, k);
}

/* The rule, u changed only if it returns 0. */
static int rule(acl_user_t *u, const char *w, size_t len, const char **err)
{
    uint8_t h[ACL_HASH_BYTES];
    if (len == 0)
        return fail(err, "an empty rule");
    if (word_eq(w, len, "on")) { u->on = true; return 0; }
    if (word_eq(w, len, "off")) { u->on = false; return 0; }
    if (word_eq(w, len, "nopass")) { clear_passwords(u); u->nopass = true; return 0; }
    if (word_eq(w, len, "resetpass")) { clear_passwords(u); return 0; }
    if (word_eq(w, len, "reset")) { reset_user(u); return 0; }
    if (word_eq(w, len, "allkeys")) { all_names(u, ACL_KEYS); return 0; }
    if (word_eq(w, len, "allqueues")) { all_names(u, ACL_QUEUES); return 0; }
    if (word_eq(w, len, "allcoord")) { all_names(u, ACL_COORD); return 0; }
    if (word_eq(w, len, "resetkeys")) {
        for (int k = 0; k < ACL_NKINDS; k++)
            clear_pats(u, k);
        return 0;
    }
    if (word_eq(w, len, "allcommands") || word_eq(w, len, "+@all")) { clear_rules(u, true); return 0; }
    if (word_eq(w, len, "nocommands") || word_eq(w, len, "-@all")) { clear_rules(u, false); return 0; }
    switch (w[0]) {
    case '>':
        acl_hash(w + 1, len - 1, h);
        return add_hash(u, h, err);
    case '<':
        acl_hash(w + 1, len - 1, h);
        return del_hash(u, h, err);
    case '#': case '!':
        if (!parse_hex_hash(w + 1, len - 1, h))
            return fail(err, "a #hash or !hash is 64 hexadecimal digits (a SHA-256)");
        return w[0] == '#' ? add_hash(u, h, err) : del_hash(u, h, err);
    case '~':
        return add_pattern(u, ACL_KEYS, w + 1, len - 1, err);
    case '%':
        if (len >= 3 && (w[1] == 'Q' || w[1] == 'q') && w[2] == '~')
            return add_pattern(u, ACL_QUEUES, w + 3, len - 3, err);
        if (len >= 3 && (w[1] == 'C' || w[1] == 'c') && w[2] == '~')
            return add_pattern(u, ACL_COORD, w + 3, len - 3, err);
        return fail(err, "a % pattern is %Q~pattern (queues) or %C~pattern (locks and elections)");
    case '+': case '-':
        if (len >= 2 && w[1] == '@') {
            unsigned cat = acl_cat_parse(w + 2, len - 2);
            if (cat == 0)
                return fail(err, "unknown category (ACL CAT lists them)");
            return add_rule(u, w[0] == '+', cat, NULL, 0, err);
        }
        return add_rule(u, w[0] == '+', 0, w + 1, len - 1, err);
    default:
        return fail(err, "syntax error in an ACL rule");
    }
}

int acl_user_rule(acl_user_t *u, const char *w, size_t len, const char **err)
{
    /* Every rule that can fail does so before it changes anything. */
    int rc = rule(u, w, len, err);
    derive(u);
    return rc;
}

int acl_user_rules(acl_user_t *u, const char *text, size_t len, const char **err)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && text[i] == ' ')
            i++;
        size_t j = i;
        while (j < len && text[j] != ' ')
            j++;
        if (j > i && acl_user_rule(u, text + i, j - i, err) != 0)
            return -1;
        i = j;
    }
    return 0;
}

static void put_word(ordo_buf_t *out, const char *w)
{
    if (out->len > 0 && out->data[out->len - 1] != ' ')
        ordo_buf_append(out, " ", 1);
    ordo_buf_puts(out, w);
}

void acl_user_describe(const acl_user_t *u, ordo_buf_t *out)
{
    static const char *const kind_prefix[ACL_NKINDS] = {"~", "%Q~", "%C~"};
    size_t start = out->len;
    put_word(out, u->on ? "on" : "off");
    if (u->nopass)
        put_word(out, "nopass");
    for (size_t i = 0; i < u->nhashes; i++) {
        char hex[2 * ACL_HASH_BYTES + 2];
        hex[0] = '#';
        for (size_t b = 0; b < ACL_HASH_BYTES; b++) {
            static const char digits[] = "0123456789abcdef";
            hex[1 + 2 * b] = digits[u->hashes[i][b] >> 4];
            hex[2 + 2 * b] = digits[u->hashes[i][b] & 15];
        }
        hex[sizeof hex - 1] = '\0';
        put_word(out, hex);
    }
    for (int k = 0; k < ACL_NKINDS; k++)
        for (size_t i = 0; i < u->npats[k]; i++) {
            put_word(out, kind_prefix[k]);
            ordo_buf_puts(out, u->pats[k][i]);
        }
    put_word(out, u->base_allow ? "+@all" : "-@all");
    for (size_t i = 0; i < u->nrules; i++) {
        const acl_rule_t *r = &u->rules[i];
        put_word(out, r->allow ? "+" : "-");
        if (r->cats != 0) {
            ordo_buf_puts(out, "@");
            ordo_buf_puts(out, acl_cat_name((unsigned)__builtin_ctz(r->cats)));
        } else {
            ordo_buf_puts(out, r->cmd);
        }
    }
    assert(out->len > start);
    (void)start;
}

bool acl_pass_ok(const acl_user_t *u, const char *pw, size_t len)
{
    uint8_t h[ACL_HASH_BYTES];
    acl_hash(pw, len, h); /* first: an off user takes the time of a wrong password */
    if (!u->on)
        return false;
    if (u->nopass)
        return true;
    bool ok = false;
    for (size_t i = 0; i < u->nhashes; i++) {
        unsigned char diff = 0;
        for (size_t b = 0; b < ACL_HASH_BYTES; b++)
            diff |= (unsigned char)(h[b] ^ u->hashes[i][b]);
        ok |= diff == 0;
    }
    return ok;
}

bool acl_cmd_ok(const acl_user_t *u, const char *lname, size_t nlen, unsigned cats)
{
    if (u->all_cmds)
        return true;
    bool allow = u->base_allow;
    for (size_t i = 0; i < u->nrules; i++) {
        const acl_rule_t *r = &u->rules[i];
        if (r->cats != 0 ? (r->cats & cats) != 0 : strlen(r->cmd) == nlen && memcmp(r->cmd, lname, nlen) == 0)
            allow = r->allow;
    }
    return allow;
}

bool acl_name_allowed(const acl_user_t *u, int kind, const char *name, size_t len)
{
    assert(kind >= 0 && kind < ACL_NKINDS);
    if (u->all_names[kind])
        return true;
    for (size_t i = 0; i < u->npats[kind]; i++)
        if (ordo_glob_match(u->pats[kind][i], strlen(u->pats[kind][i]), name, len))
            return true;
    return false;
}

bool acl_prefix_allowed(const acl_user_t *u, int kind, const char *prefix, size_t len)
{
    assert(kind >= 0 && kind < ACL_NKINDS);
    if (u->all_names[kind])
        return true;
    for (size_t i = 0; i < u->npats[kind]; i++) {
        const char *p = u->pats[kind][i];
        size_t plen = strlen(p);
        if (plen == 0 || p[plen - 1] != '*' || strcspn(p, "*?[\\") != plen - 1)
            continue; /* not a literal followed by one '*' */
        if (plen - 1 <= len && memcmp(p, prefix, plen - 1) == 0)
            return true;
    }
    return false;
}

/* ---- the table ------------------------------------------------------------------ */

struct acl_s {
    acl_user_t **users;       /* sorted by name (bytes, then length) */
    size_t n, cap;
    uint64_t gen;
};

acl_t *acl_create(void) { return ordo_xcalloc(1, sizeof(acl_t)); }

void acl_destroy(acl_t *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->n; i++)
        acl_user_free(a->users[i]);
    free(a->users);
    free(a);
}

static int name_cmp(const acl_user_t *u, const char *name, size_t nlen)
{
    size_t m = u->nlen < nlen ? u->nlen : nlen;
    int c = memcmp(u->name, name, m);
    return c != 0 ? c : (u->nlen > nlen) - (u->nlen < nlen);
}

/* The index of name, or where it would go (*found false). */
static size_t search(const acl_t *a, const char *name, size_t nlen, bool *found)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = name_cmp(a->users[mid], name, nlen);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

const acl_user_t *acl_find(const acl_t *a, const char *name, size_t nlen)
{
    bool found;
    size_t i = search(a, name, nlen, &found);
    return found ? a->users[i] : NULL;
}

void acl_set(acl_t *a, acl_user_t *u)
{
    bool found;
    size_t i = search(a, u->name, u->nlen, &found);
    a->gen++;
    if (found) {
        acl_user_free(a->users[i]);
        a->users[i] = u;
        return;
    }
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 8;
        a->users = ordo_xrealloc(a->users, a->cap * sizeof *a->users);
    }
    memmove(&a->users[i + 1], &a->users[i], (a->n - i) * sizeof *a->users);
    a->users[i] = u;
    a->n++;
}

bool acl_del(acl_t *a, const char *name, size_t nlen)
{
    bool found;
    size_t i = search(a, name, nlen, &found);
    if (!found)
        return false;
    a->gen++;
    acl_user_free(a->users[i]);
    memmove(&a->users[i], &a->users[i + 1], (a->n - i - 1) * sizeof *a->users);
    a->n--;
    return true;
}

size_t acl_count(const acl_t *a) { return a->n; }

const acl_user_t *acl_user_at(const acl_t *a, size_t i)
{
    assert(i < a->n);
    return a->users[i];
}

uint64_t acl_gen(const acl_t *a) { return a->gen; }

void acl_set_gen(acl_t *a, uint64_t gen) { a->gen = gen; }
