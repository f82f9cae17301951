/*
 * tool/opt.c -- the `ordo` tool's option parser and its usage errors
 * (tool.h says how tables describe a command's arguments).
 *
 * What counts as an option: an argument that begins with `--` (but is
 * not `--` itself), or one that is exactly a name of the table (`-p`, `-n`).
 * Anything else is a positional argument, so a payload such as `-1` needs
 * no quoting; a key or payload that begins with `--` goes after `--`. An
 * option that takes a value takes the next argument whatever it looks like
 * (`-p -1` is a bad port, not a missing one); at the end of argv it is
 * missing, and that is an error, never a wait for more input.
 *
 * Every fault is one line naming the command and the argument, then the
 * pointer line: the whole usage is for --help.
 */
#include "tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tool_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ordo%s%s: ", *cmd ? " " : "", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s\n", TOOL_USAGE_POINTER);
    return TOOL_EXIT_USAGE;
}

int tool_fail(ordo_client_t *c, const char *what, int rc)
{
    const char *detail = c ? ordo_client_errstr(c) : "";
    fprintf(stderr, "ordo %s: %s%s%s\n", what, ordo_strerror(rc), *detail ? ": " : "", detail);
    return TOOL_EXIT_FAIL;
}

int tool_usage_missing(const char *cmd, const char *what, const char *synopsis)
{
    fprintf(stderr, "ordo %s: missing %s\nusage: ordo %s\n%s\n", cmd, what, synopsis, TOOL_USAGE_POINTER);
    return TOOL_EXIT_USAGE;
}

static int looks_like_option(const char *a)
{
    return a[0] == '-' && a[1] == '-' && a[2] != '\0';
}

static const tool_opt_t *find_opt(const tool_opt_t *opts, const char *a)
{
    for (const tool_opt_t *o = opts; o && o->name; o++)
        if (strcmp(o->name, a) == 0 || (o->alias && strcmp(o->alias, a) == 0))
            return o;
    return NULL;
}

/* parse_int() -- a decimal integer, strictly: an optional sign and digits,
 * nothing else, within int64_t. 0 or -1. */
static int parse_int(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

int tool_int_arg(const char *cmd, const char *as, const char *v, const char *what, int64_t min, int64_t max,
                 int64_t *out)
{
    int64_t n;
    if (parse_int(v, &n) != 0 || n < min || n > max)
        return tool_usage_error(cmd, "%s: '%.100s' is not %s (%" PRId64 "..%" PRId64 ")", as, v, what, min, max);
    *out = n;
    return 0;
}

/* take() -- the option o, met at argv[*i] as `as`: stores its value and
 * moves *i past it. 0 or TOOL_EXIT_USAGE (printed). */
static int take(const char *cmd, const tool_opt_t *o, const char *as, int argc, char **argv, int *i)
{
    if (o->kind == TOOL_OPT_FLAG) {
        *(int *)o->dest = 1;
        return 0;
    }
    if (*i + 1 >= argc)
        return tool_usage_error(cmd, "%s needs a value", as);
    const char *v = argv[++*i];
    if (o->kind == TOOL_OPT_STR) {
        *(const char **)o->dest = v;
        return 0;
    }
    return tool_int_arg(cmd, as, v, o->what, o->min, o->max, (int64_t *)o->dest);
}

static int is_help(const char *a)
{
    return strcmp(a, "--help") == 0;
}

int tool_parse_global(const tool_opt_t *global, int argc, char **argv, int *i)
{
    for (; *i < argc; ++*i) {
        const char *a = argv[*i];
        if (is_help(a))
            return TOOL_HELP;
        const tool_opt_t *o = find_opt(global, a);
        if (o == NULL && !looks_like_option(a) && a[0] != '-')
            return 0; /* the command */
        if (o == NULL)
            return tool_usage_error("", "unknown option '%.100s'", a);
        int rc = take("", o, a, argc, argv, i);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int tool_parse(const tool_cmd_t *cmd, const tool_opt_t *global, int argc, char **argv, const char **pos, int *npos,
               int *rest)
{
    int options_end = 0;
    *npos = 0;
    if (rest)
        *rest = argc;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!options_end && strcmp(a, "--") == 0) {
            if (cmd->dashdash_rest) {
                if (rest)
                    *rest = i + 1;
                break;
            }
            options_end = 1;
            continue;
        }
        const tool_opt_t *o = options_end ? NULL : find_opt(cmd->opts, a);
        if (o != NULL) {
            int rc = take(cmd->name, o, a, argc, argv, &i);
            if (rc != 0)
                return rc;
            continue;
        }
        if (!options_end && is_help(a))
            return TOOL_HELP;
        int optlike = !options_end && looks_like_option(a);
        if (optlike || *npos >= cmd->pos_max) {
            if (!options_end && find_opt(global, a) != NULL)
                return tool_usage_error(cmd->name, "%s goes before the command (ordo %s ... %s)", a, a, cmd->name);
            if (optlike)
                return tool_usage_error(cmd->name, "unknown option '%.100s'%s", a,
                                        cmd->pos_max > 0 ? " (an argument that begins with -- goes after --)" : "");
            return tool_usage_error(cmd->name, "unexpected argument '%.100s'", a);
        }
        pos[(*npos)++] = a;
    }
    if (*npos < cmd->pos_min)
        return tool_usage_missing(cmd->name, cmd->pos_names[*npos], cmd->synopsis);
    if (cmd->dashdash_rest && (rest == NULL || *rest >= argc))
        return tool_usage_missing(cmd->name, "-- PROGRAM", cmd->synopsis);
    return 0;
}
