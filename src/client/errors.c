/*
 * errors.c -- what the server's error replies mean to the client, read in
 * one place for the blocking client (conn.c, calls.c, txn.c) and the
 * asynchronous one (uv/aclient.c): the `-NOTLEADER host:port` redirect,
 * whether a handshake reply refuses the password, and the map from an
 * error reply's first word to an ORDO_E* code (one table for every path:
 * typed calls, transactions, the producer, the redirect loops).
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
    /* "ERR AUTH <password> called without any password configured": a
     * password given to a server that has none is refused for good too. */
    return r->type == ORDO_REPLY_ERROR &&
           (client_error_code(r->str, NULL) == ORDO_EAUTH || strstr(r->str, "password") != NULL);
}

/* The first word of every error code in docs/protocol.md ("Errors"), and
 * what it means to a caller. ERR, EXECABORT and NOPROTO say "refused" and
 * nothing more specific (EXECABORT's reason is the refused command's own
 * error, which ordo_txn_exec() maps). DENIED is protected mode refusing a
 * client that has no password to give: a password is the cure, so it is
 * an authentication failure, as the handshake already took it. */
const client_error_map_t client_error_map[] = {
    { "ERR", ORDO_ESERVER },          { "CONFLICT", ORDO_ECONFLICT },
    { "EXECABORT", ORDO_ESERVER },    { "COMPACTED", ORDO_ECOMPACTED },
    { "LIMIT", ORDO_ELIMIT },         { "NOTFOUND", ORDO_ENOTFOUND },
    { "NOTHOLDER", ORDO_ENOTHOLDER }, { "BUSY", ORDO_EBUSY },
    { "TIMEOUT", ORDO_ETIMEDOUT },    { "DEADLETTER", ORDO_EDEADLETTER },
    { "NOAUTH", ORDO_EAUTH },         { "WRONGPASS", ORDO_EAUTH },
    { "NOPROTO", ORDO_ESERVER },      { "DENIED", ORDO_EAUTH },
    { "NOTLEADER", ORDO_ENOTLEADER }, { "READONLY", ORDO_EREADONLY },
};
const size_t client_error_map_len = sizeof client_error_map / sizeof client_error_map[0];

int client_error_code(const char *text, int64_t *rev)
{
    assert(text != NULL);
    if (rev)
        *rev = 0;
    size_t n = strcspn(text, " ");
    for (size_t i = 0; i < client_error_map_len; i++) {
        const client_error_map_t *e = &client_error_map[i];
        if (strlen(e->word) != n || memcmp(text, e->word, n) != 0)
            continue;
        if (rev && (e->code == ORDO_ECONFLICT || e->code == ORDO_ECOMPACTED))
            *rev = strtoll(text + n, NULL, 10);
        return e->code;
    }
    return ORDO_ESERVER;
}

int ordo_client_reply_error(ordo_client_t *c, const ordo_reply_t *r)
{
    assert(c != NULL && r != NULL);
    c->err_rev = 0;
    if (r->type != ORDO_REPLY_ERROR)
        return ORDO_OK;
    client_seterr(c, 0, "%s", r->str);
    return client_error_code(r->str, &c->err_rev);
}
