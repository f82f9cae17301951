/*
 * errors.c -- what the server's error replies mean to the client, read in
 * one place for the blocking client (conn.c, calls.c, txn.c) and the
 * asynchronous one (uv/aclient.c): the `-NOTLEADER host:port` redirect,
 * whether a handshake reply refuses the password, and the map from an
 * error reply's first word to an ORDO_E* code.
 *
 * The redirect's address is `host:port`, `[v6 address]:port`, or `?` while
 * no leader is known (docs/protocol.md, "Errors"); anything else -- a port
 * outside 1..65535, not a number, a host longer than the client keeps --
 * is refused, so a garbled line never sends a client somewhere wrong.
 *
 * These are pure functions of the reply text: they neither read nor change
 * a connection, so both clients and the unit tests call them alike.
 */
#include "client_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int client_parse_notleader(const char *err, char *host, size_t host_cap, int *port)
{
    assert(err != NULL && host != NULL && port != NULL);
    assert(host_cap > 0);
    size_t word = strlen("NOTLEADER");
    if (strncmp(err, "NOTLEADER", word) != 0 || (err[word] != ' ' && err[word] != '\0'))
        return CLIENT_REDIRECT_BAD;
    const char *a = err + word;
    while (*a == ' ')
        a++;
    if (*a == '?')
        return CLIENT_REDIRECT_UNKNOWN;
    const char *colon = strrchr(a, ':');
    if (colon == NULL || colon == a || (size_t)(colon - a) >= host_cap)
        return CLIENT_REDIRECT_BAD;
    const char *digits = colon + 1;
    if (*digits < '0' || *digits > '9')
        return CLIENT_REDIRECT_BAD; /* strtol would take a sign or spaces */
    char *end;
    long p = strtol(digits, &end, 10);
    if (p <= 0 || p > CLIENT_PORT_MAX || (*end != '\0' && *end != ' '))
        return CLIENT_REDIRECT_BAD;
    const char *h = a;
    size_t hl = (size_t)(colon - a);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [v6]:port */
        h++;
        hl -= 2;
    }
    if (hl == 0)
        return CLIENT_REDIRECT_BAD;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return CLIENT_REDIRECT_TO;
}

int client_is_auth_error(const ordo_reply_t *r)
{
    assert(r != NULL);
    return r->type == ORDO_REPLY_ERROR &&
           (strncmp(r->str, "WRONGPASS", 9) == 0 || strncmp(r->str, "NOAUTH", 6) == 0 ||
            strstr(r->str, "password") != NULL);
}

int ordo_client_reply_error(ordo_client_t *c, const ordo_reply_t *r)
{
    c->err_rev = 0;
    if (r->type != ORDO_REPLY_ERROR)
        return ORDO_OK;
    client_seterr(c, 0, "%s", r->str);
    static const struct { const char *word; int code; } map[] = {
        { "CONFLICT", ORDO_ECONFLICT }, { "NOTHOLDER", ORDO_ENOTHOLDER },
        { "NOTFOUND", ORDO_ENOTFOUND }, { "TIMEOUT", ORDO_ETIMEDOUT },
        { "BUSY", ORDO_EFULL },         { "COMPACTED", ORDO_ECOMPACTED },
        { "LIMIT", ORDO_ELIMIT },       { "DEADLETTER", ORDO_EDEADLETTER },
        { "NOAUTH", ORDO_EAUTH },       { "WRONGPASS", ORDO_EAUTH },
        { "READONLY", ORDO_EREADONLY }, { "NOTLEADER", ORDO_ENOTLEADER },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i].word);
        if (strncmp(r->str, map[i].word, n) == 0 && (r->str[n] == ' ' || r->str[n] == '\0')) {
            if (map[i].code == ORDO_ECONFLICT || map[i].code == ORDO_ECOMPACTED)
                c->err_rev = strtoll(r->str + n, NULL, 10);
            return map[i].code;
        }
    }
    return ORDO_ESERVER;
}
