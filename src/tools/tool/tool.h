/*
 * tool/tool.h -- what the files of the `ordo` tool (src/tools/ordo.c and
 * src/tools/tool/) share: its option parser (tool/opt.c), each command's
 * usage line, its exit statuses, and the commands kept in tool/. The tool is built on the client
 * library only.
 *
 * Options are tables: each command lists the options it takes (name,
 * kind, where the value goes, and for a number its range and what it
 * measures), and tool_parse() walks argv against the table, so a new
 * option is one row. Every usage error is one line on stderr that names
 * the command, the argument and the fault, followed by the pointer line
 * TOOL_USAGE_POINTER; the whole usage is printed only when asked for
 * (--help, `ordo help`) or when no command is given.
 */
#ifndef ORDO_TOOL_H
#define ORDO_TOOL_H

#include <stdint.h>

#include "ordo/client.h"

/* Exit statuses: success; an error reply, a timeout or a lost server; a
 * usage error. TOOL_HELP is no exit status: tool_parse() returns it when
 * it met --help, and the caller prints the usage on stdout and exits 0. */
#define TOOL_EXIT_OK 0
#define TOOL_EXIT_FAIL 1
#define TOOL_EXIT_USAGE 2
#define TOOL_HELP (-1)

#define TOOL_USAGE_POINTER "run 'ordo --help' for usage"

typedef enum {
    TOOL_OPT_FLAG, /* no value; dest is an int, set to 1 */
    TOOL_OPT_STR,  /* a value; dest is a const char *, pointing into argv */
    TOOL_OPT_INT,  /* a decimal integer within [min, max]; dest is an int64_t */
} tool_opt_kind_t;

typedef struct tool_opt {
    const char *name;     /* as typed: "--timeout", "-p"; NULL ends a table */
    const char *alias;    /* another spelling ("-n" for "--iterations"), or NULL */
    tool_opt_kind_t kind;
    void *dest;           /* see tool_opt_kind_t */
    const char *what;     /* TOOL_OPT_INT: what the value is, "a number of milliseconds" */
    int64_t min, max;     /* TOOL_OPT_INT: the range, both included */
} tool_opt_t;

/* One command's arguments: its options, then its positional arguments by
 * name ("QUEUE", "KEY"), of which the first pos_min are required and at
 * most pos_max taken; dashdash_rest: a `--` ends the arguments and what
 * follows it is the command's (consume's PROGRAM), else a `--` only ends
 * the options (a key or payload that begins with `--` comes after it). */
typedef struct tool_cmd {
    const char *name;            /* "call"; "" for the options before the command */
    const char *synopsis;        /* "call QUEUE KEY PAYLOAD [--id ID] [--timeout MS]" */
    const tool_opt_t *opts;
    const char *const *pos_names;
    int pos_min, pos_max;
    int dashdash_rest;
} tool_cmd_t;

/* tool_parse() -- parse argv[0..argc) for cmd. Positional arguments are
 * stored in pos[] (cmd->pos_max entries) and counted in *npos (output);
 * with dashdash_rest, *rest (output) is the index after `--`, or argc
 * when there was none. `global` is the table of the options that go
 * before the command, used to say so when one is given after it.
 * Returns 0, TOOL_HELP, or TOOL_EXIT_USAGE after printing the fault. */
int tool_parse(const tool_cmd_t *cmd, const tool_opt_t *global, int argc, char **argv, const char **pos, int *npos,
               int *rest);

/* tool_parse_global() -- the options before the command: parses from
 * argv[*i] up to the first argument that is not an option (the command),
 * leaving *i (in and out) there. Returns 0, TOOL_HELP or TOOL_EXIT_USAGE
 * (printed). */
int tool_parse_global(const tool_opt_t *global, int argc, char **argv, int *i);

/* tool_int_arg() -- v, the value of the argument `as` ("--for", "ID"), as
 * a decimal integer within [min, max] into *out: 0, or TOOL_EXIT_USAGE
 * after printing the fault as an option's ("ID: 'x' is not a message id
 * (1..N)"). For a positional argument that is a number. */
int tool_int_arg(const char *cmd, const char *as, const char *v, const char *what, int64_t min, int64_t max,
                 int64_t *out);

/* tool_usage_error() -- print "ordo CMD: <formatted>" and the pointer
 * line on stderr; returns TOOL_EXIT_USAGE. cmd may be "" (no command). */
int tool_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* tool_usage_missing() -- print "ordo CMD: missing WHAT", the command's
 * line of the usage (synopsis) and the pointer line on stderr; returns
 * TOOL_EXIT_USAGE. */
int tool_usage_missing(const char *cmd, const char *what, const char *synopsis);

/* tool_fail() -- print "ordo WHAT: <error>[: <client's detail>]" on
 * stderr; returns TOOL_EXIT_FAIL. c may be NULL. */
int tool_fail(ordo_client_t *c, const char *what, int rc);

/* `ordo status` and `ordo top` (tool/stats.c); argc/argv are the
 * arguments after the command's name. Return an exit status or TOOL_HELP. */
int tool_status(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv);
int tool_top(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv);

/* Each command's line of the usage, used by the usage text and by the
 * error that says an argument is missing. */
#define TOOL_SYN_WATCH "watch KEY | --prefix P [--from REV]"
#define TOOL_SYN_CALL "call QUEUE KEY PAYLOAD [--id ID] [--timeout MS]"
#define TOOL_SYN_PUSH "push QUEUE KEY PAYLOAD [--id ID]"
#define TOOL_SYN_PAUSE "pause QUEUE [--key KEY] [--for MS]"
#define TOOL_SYN_RESUME "resume QUEUE [--key KEY]"
#define TOOL_SYN_REDRIVE "redrive QUEUE [--from DLQ] [--key KEY|--id ID]"
#define TOOL_SYN_CANCEL "cancel QUEUE ID"
#define TOOL_SYN_SCHEDULE_ADD "schedule add NAME QUEUE KEY PAYLOAD --every MS [--start MS] | --cron EXPR [--skip-missed]"
#define TOOL_SYN_SCHEDULE_DEL "schedule del NAME"
#define TOOL_SYN_SCHEDULE_LIST "schedule list"
#define TOOL_SYN_CONSUME                                                                                    \
    "consume QUEUE [--concurrency N] [--lease MS] [--nack-delay MS|--queue-backoff] [--timeout MS]\n" \
    "          [--tempfail-pause MS] [--exactly-once] -- PROGRAM [ARGS...]"
#define TOOL_SYN_TOP "top [QUEUE] [--interval MS] [--once | --iterations N | -n N] [--count N]"
#define TOOL_SYN_STATUS "status [--raw]"

#endif
