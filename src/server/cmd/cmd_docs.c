/*
 * cmd_docs.c -- a command's documentation as COMMAND DOCS and COMMAND INFO
 * tell it: summary, group, syntax turned into Redis's argument tree.
 *
 * Each cmd_def_t carries its own docs (cmd.h): a one-line summary, a group
 * and a syntax string in the notation of Redis's manual, without the
 * command's name: "key value [NX|XX] [PX ms|EX s|KEEPTTL]". Keeping the
 * syntax beside the handler, as text a reader checks at a glance, is what
 * stops it drifting; this file turns it into the nested argument maps that
 * redis-cli reads for `help CMD` and its hints.
 *
 * The notation:
 *   word        an argument (lower case); "key" is typed key, the rest string
 *   WORD        a literal token (no lower-case letter: NX, 2, ...); a token
 *               followed by an argument is one argument with that token
 *               ("PX ms"), alone a pure token
 *   [ ... ]     optional; a sequence inside becomes a block
 *   a|b         one of; each side a sequence
 *   x [x ...]   x repeated (flag "multiple"); "[x ...]" alone: optional, repeated
 *
 * Invariants: a syntax string is checked when the command is registered
 * (cmd_docs_check(); cmd_table_add() aborts start-up on a malformed one), so
 * parsing at COMMAND DOCS time cannot fail; a parse uses at most
 * DOC_NODES_MAX nodes, on the stack. A command registered without docs
 * still runs (its COMMAND DOCS fields are empty), and
 * tests/integration/test_compat.py fails naming it: a missing doc is a test
 * failure, not a server that cannot start.
 */
#include "cmd.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most argument nodes one syntax string may describe. The longest
 * today (Q.CONFIG) needs about 20; 64 leaves room and keeps a parse on the
 * stack. A longer syntax fails cmd_docs_check() at start-up. */
#define DOC_NODES_MAX 64

enum node_kind { N_ARG, N_PURE, N_ONEOF, N_BLOCK };

typedef struct node_s {
    int kind;
    const char *name;   /* argument name, or the token for N_PURE */
    size_t nlen;
    const char *token;  /* N_ARG with a token: "PX" */
    size_t tlen;
    bool optional, multiple;
    int first, next;    /* children (N_ONEOF, N_BLOCK), siblings; -1 ends */
} node_t;

typedef struct parser_s {
    const char *p, *end;
    node_t n[DOC_NODES_MAX];
    int count;
    bool bad;
} parser_t;

static int node_new(parser_t *ps, int kind)
{
    if (ps->count >= DOC_NODES_MAX) {
        ps->bad = true;
        return -1;
    }
    node_t *n = &ps->n[ps->count];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->first = n->next = -1;
    return ps->count++;
}

static void skip_space(parser_t *ps)
{
    while (ps->p < ps->end && *ps->p == ' ')
        ps->p++;
}

/* A word runs to a space, bracket or bar. */
static size_t word_len(const parser_t *ps)
{
    size_t k = 0;
    while (ps->p + k < ps->end && !strchr(" []|", ps->p[k]))
        k++;
    return k;
}

static bool is_literal(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (islower((unsigned char)w[i]))
            return false;
    return true;
}

static int parse_alt(parser_t *ps);

/* A sequence of items up to ']', '|' or the end. Returns the index of its
 * first item (a sibling chain), -1 if empty; *count_out: how many. */
static int parse_seq(parser_t *ps, int *count_out)
{
    int head = -1, tail = -1, count = 0;
    for (;;) {
        skip_space(ps);
        if (ps->p >= ps->end || *ps->p == ']' || *ps->p == '|' || ps->bad)
            break;
        int it;
        if (*ps->p == '[') {
            ps->p++;
            it = parse_alt(ps);
            skip_space(ps);
            if (it < 0 || ps->p >= ps->end || *ps->p != ']') {
                ps->bad = true;
                break;
            }
            ps->p++;
            node_t *n = &ps->n[it];
            if (n->optional) { /* [[x]]: wrap, so each level keeps its flag */
                int b = node_new(ps, N_BLOCK);
                if (b < 0)
                    break;
                ps->n[b].first = it;
                ps->n[b].name = n->name, ps->n[b].nlen = n->nlen;
                it = b;
            }
            ps->n[it].optional = true;
            /* "x [x ...]": fold the repetition into x. */
            node_t *m = &ps->n[it];
            if (tail >= 0 && m->multiple && m->kind == ps->n[tail].kind && m->nlen == ps->n[tail].nlen &&
                memcmp(m->name, ps->n[tail].name, m->nlen) == 0) {
                ps->n[tail].multiple = true;
                continue;
            }
        } else {
            size_t k = word_len(ps);
            const char *w = ps->p;
            ps->p += k;
            if (k == 3 && memcmp(w, "...", 3) == 0) {
                if (tail < 0) {
                    ps->bad = true;
                    break;
                }
                ps->n[tail].multiple = true;
                continue;
            }
            if (is_literal(w, k)) {
                /* A token followed by an argument word is that argument. */
                skip_space(ps);
                size_t k2 = word_len(ps);
                if (k2 > 0 && !is_literal(ps->p, k2) && !(k2 == 3 && memcmp(ps->p, "...", 3) == 0)) {
                    it = node_new(ps, N_ARG);
                    if (it < 0)
                        break;
                    ps->n[it].token = w, ps->n[it].tlen = k;
                    ps->n[it].name = ps->p, ps->n[it].nlen = k2;
                    ps->p += k2;
                } else {
                    it = node_new(ps, N_PURE);
                    if (it < 0)
                        break;
                    ps->n[it].name = w, ps->n[it].nlen = k;
                }
            } else {
                it = node_new(ps, N_ARG);
                if (it < 0)
                    break;
                ps->n[it].name = w, ps->n[it].nlen = k;
            }
        }
        if (tail >= 0)
            ps->n[tail].next = it;
        else
            head = it;
        tail = it;
        count++;
    }
    *count_out = count;
    return head;
}

/* A sequence as one node: itself if it has one item, else a block. */
static int seq_node(parser_t *ps, int head, int count)
{
    if (count <= 1)
        return head;
    int b = node_new(ps, N_BLOCK);
    if (b < 0)
        return -1;
    ps->n[b].first = head;
    ps->n[b].name = ps->n[head].name, ps->n[b].nlen = ps->n[head].nlen;
    return b;
}

/* Sequences separated by '|': one node (a oneof if more than one). */
static int parse_alt(parser_t *ps)
{
    int count;
    int head = parse_seq(ps, &count);
    head = seq_node(ps, head, count);
    if (head < 0 || ps->bad || ps->p >= ps->end || *ps->p != '|')
        return ps->bad ? -1 : head;
    int o = node_new(ps, N_ONEOF);
    if (o < 0)
        return -1;
    ps->n[o].first = head;
    ps->n[o].name = ps->n[head].name, ps->n[o].nlen = ps->n[head].nlen;
    int tail = head;
    while (!ps->bad && ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        int it = parse_seq(ps, &count);
        it = seq_node(ps, it, count);
        if (it < 0) {
            ps->bad = true;
            return -1;
        }
        ps->n[tail].next = it;
        tail = it;
    }
    return o;
}

/* Parse the whole syntax: returns the first top-level node (-1 if none),
 * *ok false if malformed. */
static int parse(parser_t *ps, const char *syntax, bool *ok)
{
    ps->p = syntax;
    ps->end = syntax + strlen(syntax);
    ps->count = 0;
    ps->bad = false;
    int count;
    int head = parse_seq(ps, &count);
    if (!ps->bad && ps->p < ps->end && *ps->p == '|') {
        /* "a|b" at the top: one argument, a oneof of the sequences. */
        ps->p = syntax;
        ps->count = 0;
        head = parse_alt(ps);
    }
    *ok = !ps->bad && ps->p == ps->end;
    return head;
}

static const char *arg_type(const node_t *n)
{
    switch (n->kind) {
    case N_PURE: return "pure-token";
    case N_ONEOF: return "oneof";
    case N_BLOCK: return "block";
    default: return n->nlen == 3 && memcmp(n->name, "key", 3) == 0 ? "key" : "string";
    }
}

static void add_lower(ordo_buf_t *out, const char *s, size_t n)
{
    char tmp[64];
    if (n >= sizeof tmp)
        n = sizeof tmp - 1;
    for (size_t i = 0; i < n; i++)
        tmp[i] = (char)tolower((unsigned char)s[i]);
    resp_add_bulk(out, tmp, n);
}

static void emit_list(ordo_buf_t *out, int proto, const parser_t *ps, int head);

static void emit_node(ordo_buf_t *out, int proto, const parser_t *ps, int i)
{
    const node_t *n = &ps->n[i];
    bool tok = n->kind == N_PURE || n->token != NULL;
    size_t nflags = (size_t)n->optional + (size_t)n->multiple;
    bool kids = n->kind == N_ONEOF || n->kind == N_BLOCK;
    resp_add_map(out, proto, 2 + (size_t)tok + (nflags > 0) + (size_t)kids);
    resp_add_bulk_str(out, "name");
    add_lower(out, n->name, n->nlen);
    resp_add_bulk_str(out, "type");
    resp_add_bulk_str(out, arg_type(n));
    if (tok) {
        resp_add_bulk_str(out, "token");
        if (n->kind == N_PURE)
            resp_add_bulk(out, n->name, n->nlen);
        else
            resp_add_bulk(out, n->token, n->tlen);
    }
    if (nflags > 0) {
        resp_add_bulk_str(out, "flags");
        resp_add_set(out, proto, nflags);
        if (n->optional)
            resp_add_simple(out, "optional");
        if (n->multiple)
            resp_add_simple(out, "multiple");
    }
    if (kids) {
        resp_add_bulk_str(out, "arguments");
        emit_list(out, proto, ps, n->first);
    }
}

static void emit_list(ordo_buf_t *out, int proto, const parser_t *ps, int head)
{
    size_t count = 0;
    for (int i = head; i >= 0; i = ps->n[i].next)
        count++;
    resp_add_array(out, count);
    for (int i = head; i >= 0; i = ps->n[i].next)
        emit_node(out, proto, ps, i);
}

bool cmd_docs_check(const cmd_def_t *d)
{
    if (d->syntax == NULL)
        return true; /* undocumented: COMMAND DOCS shows empty fields, and test_compat.py fails */
    parser_t ps;
    bool ok;
    parse(&ps, d->syntax, &ok);
    return ok;
}

void cmd_docs_name(ordo_buf_t *out, const cmd_def_t *d) { add_lower(out, d->name, strlen(d->name)); }

void cmd_docs_entry(ordo_buf_t *out, int proto, const cmd_def_t *d)
{
    parser_t ps;
    bool ok;
    int head = parse(&ps, d->syntax ? d->syntax : "", &ok);
    assert(ok); /* checked at registration */
    cmd_docs_name(out, d);
    resp_add_map(out, proto, head >= 0 ? 4 : 3);
    resp_add_bulk_str(out, "summary");
    resp_add_bulk_str(out, d->summary ? d->summary : "");
    resp_add_bulk_str(out, "since");
    resp_add_bulk_str(out, ORDO_VERSION);
    resp_add_bulk_str(out, "group");
    resp_add_bulk_str(out, d->group ? d->group : "");
    if (head >= 0) {
        resp_add_bulk_str(out, "arguments");
        emit_list(out, proto, &ps, head);
    }
}

int cmd_docs_first_key(const cmd_def_t *d, bool *multiple)
{
    parser_t ps;
    bool ok;
    int head = parse(&ps, d->syntax ? d->syntax : "", &ok);
    *multiple = false;
    if (!ok || head < 0 || ps.n[head].kind != N_ARG || ps.n[head].optional || ps.n[head].token != NULL ||
        strcmp(arg_type(&ps.n[head]), "key") != 0)
        return 0;
    *multiple = ps.n[head].multiple;
    return 1;
}
