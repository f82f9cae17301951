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
 * The parser is zero-copy and resumable: given the unconsumed input of a
 * connection it either returns one complete command whose arguments point
 * into that input (valid until the caller consumes or moves those bytes), or
 * says it needs more bytes, or reports a protocol error. An incomplete
 * command consumes nothing, but resp_cmd_t remembers how far the parser got,
 * so the next call continues there instead of starting over: the total work
 * for one command is linear in its size however it is split into reads. The
 * parser also reports how many bytes it needs at least (need_bytes) so the
 * caller need not call it at all while a large bulk is outstanding.
 *
 * Contract for callers, because of that progress state:
 *   - every call with the same cmd passes input that starts at the first
 *     byte of the same command, with at least the bytes passed last time
 *     (more may have arrived). The bytes may have moved (a buffer that grew
 *     or was compacted): positions are kept as offsets from the command's
 *     first byte, and argument pointers are made from them only when the
 *     command completes. A connection satisfies this by consuming only
 *     complete commands and passing its unconsumed input from its start;
 *   - after RESP_COMMAND, RESP_EMPTY or RESP_PROTO_ERROR the progress state
 *     is reset: the next call starts a new command at in[0];
 *   - to abandon a partial command (drop the input, reuse cmd elsewhere),
 *     call resp_cmd_reset().
 *
 * A protocol error means the stream cannot be resynchronised: the caller
 * replies with the error text and closes the connection.
 */
#ifndef ORDO_RESP_H
#define ORDO_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Limits the parser enforces; each is a server option (see config.h). */
typedef struct resp_limits_s {
    size_t args_max;        /* arguments per command (multibulk length) */
    size_t bulk_max;        /* bytes in one argument */
    size_t inline_max;      /* bytes in one inline command line */
} resp_limits_t;

typedef struct resp_arg_s {
    union {
        const char *ptr;    /* points into the caller's input, or into argbuf for inline */
        size_t off;         /* parser-private: offset from the command start while partial */
    };
    size_t len;
} resp_arg_t;

/* One parsed command. argv is owned by the command (grown as needed and
 * reused across parses); free it with resp_cmd_free(). For inline commands
 * the unescaped words live in argbuf. argc is 0 unless the last call
 * returned RESP_COMMAND. Zero-initialise ({0}) before the first call.
 *
 * The mb_* and inline_scanned fields are the parser's progress through a
 * partial command (all 0 when none); callers never touch them. While a
 * multibulk command is partial, argv[0..mb_done) hold offsets (.off), not
 * pointers. */
typedef struct resp_cmd_s {
    resp_arg_t *argv;
    size_t argc;
    size_t argv_cap;
    ordo_buf_t argbuf;
    size_t mb_count;        /* multibulk: argument count from "*<n>", 0 until it is parsed */
    size_t mb_done;         /* multibulk: arguments complete */
    size_t mb_pos;          /* multibulk: offset of the next argument's '$' */
    size_t mb_body;         /* multibulk: offset of its body once its header is parsed, else 0 */
    size_t mb_blen;         /* multibulk: its length, valid when mb_body != 0 */
    size_t inline_scanned;  /* inline: leading bytes known to hold no '\n' */
    int mb_fast_declined;   /* multibulk: the one-pass fast path declined this command */
    /* After RESP_PROTO_ERROR: which limit the request passed (enum
     * resp_over; RESP_OVER_NONE if it was malformed rather than too
     * large), the count or length that passed it (0 for an inline line,
     * whose length is not known), and for RESP_OVER_BULK the offset of
     * that argument's body (bytes of it still to come: over_body +
     * over_limit + 2 - input length). Lets the caller name the limit. */
    int over;
    uint64_t over_limit;
    size_t over_body;
    /* Debug counter: input bytes the parser examined, summed over every
     * call; bulk bodies are skipped by length and not counted. Never reset
     * by the parser (resp_cmd_free zeroes it); tests use it to check that a
     * command costs O(its size) however it arrives. */
    uint64_t scanned_bytes;
} resp_cmd_t;

enum resp_over {
    RESP_OVER_NONE = 0,
    RESP_OVER_ARGS,         /* arguments: args_max */
    RESP_OVER_BULK,         /* one argument's bytes: bulk_max */
    RESP_OVER_INLINE,       /* an inline line's bytes: inline_max */
};

enum resp_status {
    RESP_NEED_MORE = 0,     /* incomplete: nothing consumed; see *need_bytes */
    RESP_COMMAND = 1,       /* one command in *cmd; *consumed bytes used */
    RESP_EMPTY = 2,         /* an empty inline line or "*0\r\n"/"*-1\r\n": consume, no command */
    RESP_PROTO_ERROR = -1,  /* *err is a static message: reply "-ERR Protocol error: <err>", close;
                             * cmd->over_limit says if a limit was passed */
};

/* resp_parse() -- parse at most one command from in[0..len), continuing a
 * partial command recorded in cmd (see the contract above).
 * Outputs: *consumed (bytes of in used; 0 for RESP_NEED_MORE), *need_bytes
 * (for RESP_NEED_MORE: the input length at which parsing can progress,
 * len + 1 if unknown), *err (for RESP_PROTO_ERROR).
 * Returns a resp_status. Never reads past in[len). Limits may differ from
 * call to call (a configuration change); a partial command is checked
 * against the limits of each call. */
int resp_parse(const char *in, size_t len, const resp_limits_t *lim, resp_cmd_t *cmd,
               size_t *consumed, size_t *need_bytes, const char **err);

/* resp_cmd_reset() -- forget any partial command (keeps the allocations):
 * the next resp_parse() starts a new command at in[0]. */
void resp_cmd_reset(resp_cmd_t *cmd);

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
