/*
 * http.h -- the HTTP/1.1 listener (docs/http.md): an HTTP connection is a
 * conn_t like a RESP one (same accept, output, durability holds, parking
 * of blocking commands), with c->http set. Its requests are turned into
 * the commands the RESP layer makes and handed to cmd_dispatch(); the RESP
 * reply the command writes into c->out is rewritten into an HTTP response
 * before any byte of it is sent. net.c calls these hooks; nothing else
 * does. Loop thread only.
 */
#ifndef ORDO_HTTP_H
#define ORDO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "net/conn.h"

/* http_listen() -- open the HTTP listener on bind:http-port (nothing if
 * http-port is 0); accepted connections go to on_connection, which calls
 * http_conn_init() for them. Returns 0, or -1 with a message in err. */
int http_listen(server_t *s, uv_connection_cb on_connection, char *err, size_t elen);
/* http_is_listener() -- l is the HTTP listener. */
bool http_is_listener(server_t *s, const uv_stream_t *l);
/* http_close() -- close the listener (shutdown). */
void http_close(server_t *s);

/* http_conn_init() -- make the freshly accepted c an HTTP connection.
 * Returns 0, or -1 when http-max-clients is reached (a 503 is written and
 * c closes once it is sent). */
int http_conn_init(conn_t *c);
/* http_conn_free() -- free c's HTTP state (from the close callback). */
void http_conn_free(conn_t *c);
/* http_process_input() -- parse c->in and run the complete requests, one
 * at a time (a request that waits holds the ones pipelined behind it). */
void http_process_input(conn_t *c);
/* http_before_flush() -- rewrite the RESP written into c->out since the
 * last call (a reply, watch events) into HTTP. */
void http_before_flush(conn_t *c);
/* http_cron() -- close connections past http-request-timeout-ms (408)
 * or http-idle-ms. */
void http_cron(server_t *s);

#endif /* ORDO_HTTP_H */
