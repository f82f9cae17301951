/*
 * resp.h -- the RESP2/RESP3 wire format: the request parser and the reply
 * encoder. Only the command layer (and the connection that feeds it) uses
 * this module; the core never sees RESP.
 *
 * Requests are either multibulk ("*<n>\r\n$<len>\r\n<bytes>\r\n..."), as
 * every client library sends, or inline ("PING\r\n", what telnet and
 * redis-cli's interactive mode send): words split on blanks, with "double
 * quoted" strings (escapes \n \r \t \b \a \\ \" \xHH) and 'single quoted'
 * strings (only \' escaped), as redis-cli quotes.
 *
 * The parser is zero-copy and restartable: given the unconsumed input of a
 * connection it either returns one complete command whose arguments point
 * into that input (valid until the caller consumes or moves those bytes), or
 * says it needs more bytes, or reports a protocol error. An incomplete
 * command consumes nothing; the parser reports how many bytes it needs at
 * least (need_bytes) so the caller does not re-parse a large bulk on every
 * read.
 *
 * A protocol error means the stream cannot be resynchronised: the caller
 * replies with the error text and closes the connection.
 */
#ifndef ORDO_RESP_H
#define ORDO_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Limits the parser enforces; each is a server option (see config.h). */
typedef struct resp_limits_s {
    size_t args_max;        /* arguments per command (multibulk length) */
    size_t bulk_max;        /* bytes in one argument */
    size_t inline_max;      /* bytes in one inline command line */
} resp_limits_t;

typedef struct resp_arg_s {
    const char *ptr;        /* points into the caller's input, or into argbuf for inline */
    size_t len;
} resp_arg_t;

/* One parsed command. argv is owned by the command (grown as needed and
 * reused across parses); free it with resp_cmd_free(). For inline commands
 * the unescaped words live in argbuf. */
typedef struct resp_cmd_s {
    resp_arg_t *argv;
    size_t argc;
    size_t argv_cap;
    ordo_buf_t argbuf;
} resp_cmd_t;

enum resp_status {
    RESP_NEED_MORE = 0,     /* incomplete: nothing consumed; see *need_bytes */
    RESP_COMMAND = 1,       /* one command in *cmd; *consumed bytes used */
    RESP_EMPTY = 2,         /* an empty inline line or "*0\r\n"/"*-1\r\n": consume, no command */
    RESP_PROTO_ERROR = -1,  /* *err is a static message: reply "-ERR Protocol error: <err>", close */
};

/* resp_parse() -- parse at most one command from in[0..len).
 * Outputs: *consumed (bytes of in used; 0 for RESP_NEED_MORE), *need_bytes
 * (for RESP_NEED_MORE: the input length at which parsing can progress,
 * len + 1 if unknown), *err (for RESP_PROTO_ERROR).
 * Returns a resp_status. Never reads past in[len). */
int resp_parse(const char *in, size_t len, const resp_limits_t *lim, resp_cmd_t *cmd,
               size_t *consumed, size_t *need_bytes, const char **err);

void resp_cmd_free(resp_cmd_t *cmd);

/* ---- replies ------------------------------------------------------------
 * Each function appends one RESP value (or an aggregate's header) to out.
 * proto is 2 or 3: where RESP3 has a type RESP2 lacks, the RESP2 form is the
 * one Redis sends (null -> "$-1", null array -> "*-1", map -> flat array of
 * 2n, push -> array, double -> bulk string, bool -> integer 0/1).
 */
void resp_add_simple(ordo_buf_t *out, const char *s);         /* +s (s has no CR/LF) */
void resp_add_error(ordo_buf_t *out, const char *msg);        /* -msg; CR/LF in msg become spaces */
void resp_add_errorf(ordo_buf_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void resp_add_int(ordo_buf_t *out, int64_t v);                /* :v */
void resp_add_uint(ordo_buf_t *out, uint64_t v);              /* :v, for revisions */
void resp_add_bulk(ordo_buf_t *out, const void *p, size_t n); /* $n payload */
void resp_add_bulk_str(ordo_buf_t *out, const char *s);
void resp_add_null(ordo_buf_t *out, int proto);               /* $-1 / _ */
void resp_add_null_array(ordo_buf_t *out, int proto);         /* *-1 / _ */
void resp_add_array(ordo_buf_t *out, size_t n);               /* *n */
void resp_add_map(ordo_buf_t *out, int proto, size_t n);      /* %n / *2n */
void resp_add_set(ordo_buf_t *out, int proto, size_t n);      /* ~n / *n */
void resp_add_push(ordo_buf_t *out, int proto, size_t n);     /* >n / *n */
void resp_add_double(ordo_buf_t *out, int proto, double v);   /* ,v / $bulk */
void resp_add_bool(ordo_buf_t *out, int proto, int v);        /* #t|#f / :1|:0 */
void resp_add_verbatim(ordo_buf_t *out, int proto, const char *s, size_t n); /* =n txt:... / $n */

#endif /* ORDO_RESP_H */
