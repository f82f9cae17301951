/*
 * members.c -- the addresses a client may talk to (client_members_t, in
 * client_int.h), shared by the blocking and the asynchronous client.
 *
 * A client starts from its seeds -- the list of opts.addrs, else
 * opts.host:opts.port -- and adds the members a server names in its
 * `CLUSTER MEMBERS` reply. Nothing else enters the list: a `-NOTLEADER
 * host:port` that names an address not on it is not followed (the client
 * asks `CLUSTER MEMBERS` of the member that sent it, and goes there only if
 * that lists it), so the password is only ever sent to a member the
 * application configured or one a configured member's list names.
 *
 * Invariants: 0 < nseeds <= n <= CLIENT_MEMBERS_MAX; entries [0, nseeds)
 * are the seeds, in the order given, and are never replaced; no address is
 * listed twice; 0 <= cur < n.
 */
#include "client_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int client_parse_addr(const char *s, size_t n, char *host, size_t host_cap, int *port)
{
    assert(s != NULL && host != NULL && host_cap > 0 && port != NULL);
    const char *colon = NULL;
    for (size_t i = n; i > 0; i--) {
        if (s[i - 1] == ':') {
            colon = s + i - 1;
            break;
        }
    }
    if (colon == NULL || colon == s)
        return -1;
    size_t pl = n - (size_t)(colon + 1 - s);
    if (pl == 0 || pl > 5)
        return -1;
    long p = 0;
    for (size_t i = 0; i < pl; i++) {
        char d = colon[1 + i];
        if (d < '0' || d > '9')
            return -1;
        p = p * 10 + (d - '0');
    }
    if (p <= 0 || p > CLIENT_PORT_MAX)
        return -1;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [v6]:port */
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= host_cap)
        return -1;
    for (size_t i = 0; i < hl; i++)
        if ((unsigned char)h[i] <= ' ' || h[i] == ',')
            return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

int client_members_find(const client_members_t *ms, const char *host, int port)
{
    assert(ms != NULL && host != NULL);
    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].port == port && strcmp(ms->m[i].host, host) == 0)
            return i;
    return -1;
}

int client_members_add(client_members_t *ms, const char *host, int port)
{
    assert(ms != NULL && host != NULL && port > 0 && port <= CLIENT_PORT_MAX);
    int i = client_members_find(ms, host, port);
    if (i >= 0)
        return i;
    if (ms->n == CLIENT_MEMBERS_MAX || strlen(host) >= CLIENT_HOST_MAX)
        return -1;
    snprintf(ms->m[ms->n].host, sizeof ms->m[ms->n].host, "%s", host);
    ms->m[ms->n].port = port;
    return ms->n++;
}

int client_members_init(client_members_t *ms, const char *addrs, const char *host, int port)
{
    assert(ms != NULL);
    memset(ms, 0, sizeof *ms);
    if (addrs == NULL || addrs[0] == '\0') {
        if (host == NULL)
            host = "127.0.0.1";
        if (port == 0)
            port = ORDO_CLIENT_PORT_DEFAULT;
        if (host[0] == '\0' || strlen(host) >= CLIENT_HOST_MAX || port < 0 || port > CLIENT_PORT_MAX)
            return ORDO_EINVAL;
        client_members_add(ms, host, port);
        ms->nseeds = ms->n;
        return ORDO_OK;
    }
    const char *s = addrs;
    for (;;) {
        size_t len = strcspn(s, ",");
        char h[CLIENT_HOST_MAX];
        int p;
        if (client_parse_addr(s, len, h, sizeof h, &p) != 0)
            return ORDO_EINVAL;
        if (client_members_add(ms, h, p) < 0)
            return ORDO_EINVAL; /* more seeds than CLIENT_MEMBERS_MAX */
        if (s[len] == '\0')
            break;
        s += len + 1;
    }
    ms->nseeds = ms->n;
    assert(ms->n > 0);
    return ORDO_OK;
}

void client_members_next(client_members_t *ms)
{
    assert(ms->n > 0 && ms->cur >= 0 && ms->cur < ms->n);
    ms->cur = (ms->cur + 1) % ms->n;
}

int client_members_learn(client_members_t *ms, const ordo_reply_t *r)
{
    assert(ms != NULL && r != NULL);
    if (r->type != ORDO_REPLY_ARRAY)
        return -1;
    int leader = -1;
    for (size_t i = 0; i < r->n; i++) {
        const ordo_reply_t *e = r->elem[i];
        if (e->type != ORDO_REPLY_ARRAY || e->n < 3 || e->elem[1]->type != ORDO_REPLY_STRING)
            continue;
        char h[CLIENT_HOST_MAX];
        int p;
        if (client_parse_addr(e->elem[1]->str, e->elem[1]->len, h, sizeof h, &p) != 0)
            continue;
        int k = client_members_add(ms, h, p);
        const ordo_reply_t *role = e->elem[2];
        if (k >= 0 && role->str != NULL && strcmp(role->str, "leader") == 0)
            leader = k;
    }
    return leader;
}

void client_members_format(const client_members_t *ms, char *out, size_t cap)
{
    assert(ms != NULL && out != NULL && cap > 0);
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < ms->n && at < cap; i++) {
        int k = snprintf(out + at, cap - at, "%s%s%s%s:%d", i ? "," : "",
                         strchr(ms->m[i].host, ':') ? "[" : "", ms->m[i].host,
                         strchr(ms->m[i].host, ':') ? "]" : "", ms->m[i].port);
        if (k < 0)
            break;
        at += (size_t)k;
    }
}
