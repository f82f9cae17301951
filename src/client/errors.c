/*
 * errors.c -- what the server's error replies mean to the client, read in
 * one place for the blocking client (conn.c, calls.c, txn.c) and the
 * asynchronous one (uv/aclient.c): the `-NOTLEADER host:port` redirect,
 * whether a handshake reply refuses the password, and the map from an
 * error reply's first word to an ORDO_E* code.
 *
 * These are pure functions of the reply text: they neither read nor change
 * a connection, so both clients and the unit tests call them alike.
 */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

/* parse "NOTLEADER host:port" into c->host/c->port; 0 if the leader is
 * unknown ("?") or the text is malformed. */
int client_take_redirect(ordo_client_t *c, const char *err)
{
    const char *a = err + strlen("NOTLEADER");
    while (*a == ' ')
        a++;
    const char *colon = strrchr(a, ':');
    if (*a == '?' || colon == NULL || colon == a || (size_t)(colon - a) >= CLIENT_HOST_MAX)
        return 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (port <= 0 || port > 65535 || (*end != '\0' && *end != ' '))
        return 0;
    const char *h = a;
    size_t hl = (size_t)(colon - a);
    if (h[0] == '[' && h[hl - 1] == ']') { /* [v6]:port */
        h++;
        hl -= 2;
    }
    memcpy(c->host, h, hl);
    c->host[hl] = '\0';
    c->port = (int)port;
    return 1;
}

int client_is_auth_error(const ordo_reply_t *r)
{
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
