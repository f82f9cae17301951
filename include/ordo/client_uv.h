/*
 * ordo/client_uv.h -- the asynchronous client: one connection driven by a
 * libuv loop the caller owns (library ordo_uv, `-lordo_uv -lordo -luv`).
 *
 * Same protocol behaviour as the blocking client (ordo/client.h): HELLO 3
 * with AUTH (RESP2 + AUTH fallback), pipelining (commands are written as
 * they are issued, replies come back in order), a deadline per command,
 * reconnection with jittered exponential backoff, and -NOTLEADER
 * redirects. Options are ordo_client_opts_t.
 *
 * Commands and callbacks
 *   - ordo_aclient_command() queues a command and returns at once. Its
 *     callback is called exactly once, on the loop thread: status ORDO_OK
 *     with the reply (possibly an error reply), or ORDO_ETIMEDOUT (its
 *     deadline passed; the connection is then reset, as a late reply would
 *     otherwise be taken for the next command's), ORDO_ECONN (the
 *     connection broke after the command was written: it may or may not
 *     have run; or no connection could be made within the reconnect
 *     budget), ORDO_ECANCELED (ordo_aclient_free()).
 *   - Commands not yet written when a connection breaks are kept and
 *     written on the next connection; written ones are never resent except
 *     after -NOTLEADER (which says the command did not run): the client
 *     stops writing on that connection, lets the commands in flight answer,
 *     then reconnects to the named leader and sends the redirected commands
 *     first, in their order.
 *   - The reply passed to a callback belongs to the client and is valid
 *     during the callback only (ordo_reply_t, ordo/client.h). Argument
 *     bytes are copied by ordo_aclient_command().
 *   - Push frames (RESP3 `>`: watch events) go to the push callback, in
 *     arrival order, valid during the call only.
 *   - The connect callback (if set) is called after each successful
 *     handshake with status ORDO_OK (so watches can be set up again), and
 *     with an error when a connect attempt fails.
 *
 * Threads: every function must be called on the loop's thread; callbacks
 * run there too, and may issue commands or call ordo_aclient_free().
 *
 * Lifetime: ordo_aclient_new() and ordo_aclient_free(), the shape of every
 * client object (ordo/client.h, "Objects"). ordo_aclient_free() cancels
 * every queued command (ORDO_ECANCELED) and closes the libuv handles at
 * once; the memory goes when libuv has run their close callbacks, so the
 * loop must keep running until then. The closed callback
 * (ordo_aclient_on_closed(), may be unset) says when: after it, the loop
 * holds nothing of the client. The client must not be used after
 * ordo_aclient_free(), except that its callbacks still run (with
 * ORDO_ECANCELED) during the call.
 */
#ifndef ORDO_CLIENT_UV_H
#define ORDO_CLIENT_UV_H

#include <uv.h>

#include "ordo/client.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ordo_aclient ordo_aclient_t;

typedef void (*ordo_areply_cb)(ordo_aclient_t *c, int status, const ordo_reply_t *reply, void *arg);
typedef void (*ordo_apush_cb)(ordo_aclient_t *c, const ordo_reply_t *push, void *arg);
typedef void (*ordo_aconnect_cb)(ordo_aclient_t *c, int status, void *arg);

/* ordo_aclient_new() -- a client on loop; opts may be NULL (all defaults).
 * ORDO_OK with *out; ORDO_ENOMEM; ORDO_ESYS (a libuv handle could not be
 * initialised), with *out NULL. Connecting starts at once, in the loop. */
int ordo_aclient_new(ordo_aclient_t **out, uv_loop_t *loop, const ordo_client_opts_t *opts);
/* ordo_aclient_free() -- cancel and close (see Lifetime); NULL is fine. */
void ordo_aclient_free(ordo_aclient_t *c);
/* ordo_aclient_on_closed() -- cb(arg) once the client's memory is gone. */
void ordo_aclient_on_closed(ordo_aclient_t *c, void (*cb)(void *arg), void *arg);
void ordo_aclient_on_push(ordo_aclient_t *c, ordo_apush_cb cb, void *arg);
void ordo_aclient_on_connect(ordo_aclient_t *c, ordo_aconnect_cb cb, void *arg);
/* timeout_ms: 0 the options' call timeout, ORDO_WAIT_FOREVER none.
 * ORDO_OK (cb will be called), ORDO_EINVAL, ORDO_ENOMEM, ORDO_ESTOPPED
 * (closing). */
int ordo_aclient_command(ordo_aclient_t *c, int timeout_ms, int argc, const char *const *argv,
                         const size_t *lens, ordo_areply_cb cb, void *arg);
/* 3 or 2 while connected and past the handshake, else 0. */
int ordo_aclient_proto(const ordo_aclient_t *c);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_CLIENT_UV_H */
