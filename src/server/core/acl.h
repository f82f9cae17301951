/*
 * acl.h -- users and their permissions: the users table the core owns, the
 * rule language that describes a user, and the checks the command layer
 * asks before it runs a command.
 *
 * Users are replicated state. REC_ACL_SETUSER carries a user's whole
 * description in its canonical form (acl_user_describe(): passwords only
 * as SHA-256 hashes, never in clear), and applying it replaces the user;
 * REC_ACL_DELUSER removes one. So the table is a function of the log, a
 * snapshot holds each user as that same text, and a cluster's members
 * agree on it.
 *
 * A user is:
 *   - on or off (an off user cannot authenticate);
 *   - nopass, or a set of password hashes (any one authenticates);
 *   - a list of command rules, in order: a base (+@all or -@all), then
 *     +/- a category or a command; the last rule that covers a command
 *     decides (so "-@all +@read -kv.range" allows every read but
 *     KV.RANGE). A rule repeated for the same target replaces the earlier
 *     one, which changes nothing of what is allowed and bounds the list;
 *   - three pattern lists, one per kind of name a command can touch: KV
 *     keys (~pattern), queue names (%Q~pattern) and coordination names,
 *     locks and elections (%C~pattern). A name is allowed if a pattern of
 *     its kind matches it (ordo_glob_match(), base/glob.h: Redis's glob:
 *     * ? [a-z] [^a] and \ escapes). Leases have no name and need no
 *     pattern.
 *
 * The rule words (acl_user_rule()) are Redis's where Redis has one: on,
 * off, nopass, resetpass, >pw, <pw, #hash, !hash, ~pattern, allkeys,
 * resetkeys, +@cat, -@cat, +cmd, -cmd, allcommands, nocommands, reset;
 * ordo adds %Q~pattern, allqueues, %C~pattern, allcoord.
 *
 * Invariants: a user's name is 1..ACL_NAME_MAX bytes of printable ASCII
 * but space; its patterns are 1..ACL_PATTERN_MAX printable bytes but
 * space; it has at most ACL_PASSWORDS_MAX hashes, ACL_RULES_MAX command
 * rules and ACL_PATTERNS_MAX patterns of each kind; nopass and a hash are
 * never both set. The table's generation increases with every change, so
 * a connection may cache the user it found until it changes.
 *
 * Not thread-safe: owned by the core thread.
 */
#ifndef ORDO_ACL_H
#define ORDO_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Why these values: a user name or pattern is read by people and sits in
 * every ACL LOG entry; 64 hashes, 1024 rules and patterns are far past a
 * hand-written user and keep a user's description, the record that
 * carries it, well under max-value-bytes' default. */
#define ACL_NAME_MAX 128
#define ACL_PATTERN_MAX 512
#define ACL_PASSWORDS_MAX 64
#define ACL_RULES_MAX 1024
#define ACL_PATTERNS_MAX 1024
#define ACL_HASH_BYTES 32      /* SHA-256 */
#define ACL_CMD_NAME_MAX 31    /* a command rule's name, as cmd/table.c's names */

/* Command categories: a bit each; a command carries those it belongs to
 * (cmd/table.c). @all is every command, tagged or not. */
enum acl_cat {
    ACL_CAT_READ = 1u << 0,        /* reads the state */
    ACL_CAT_WRITE = 1u << 1,       /* makes a record */
    ACL_CAT_KEYSPACE = 1u << 2,    /* the versioned keys (KV, the Redis string commands); alias @kv */
    ACL_CAT_QUEUE = 1u << 3,       /* the keyed work queues */
    ACL_CAT_COORD = 1u << 4,       /* leases, locks, elections */
    ACL_CAT_WATCH = 1u << 5,       /* streams of changes and events */
    ACL_CAT_ADMIN = 1u << 6,       /* the server, the cluster, the users */
    ACL_CAT_DANGEROUS = 1u << 7,   /* can harm the service or read every secret */
    ACL_CAT_CONNECTION = 1u << 8,  /* the connection itself (PING, AUTH, HELLO...) */
    ACL_CAT_TRANSACTION = 1u << 9, /* MULTI, EXEC, DISCARD, WATCH */
};
#define ACL_NCATS 10

/* The kinds of names a command can name, each with its own patterns. */
enum acl_kind { ACL_KEYS = 0, ACL_QUEUES = 1, ACL_COORD = 2, ACL_NKINDS = 3 };

/* acl_cat_name() -- category bit i's name without the @ ("read"), i <
 * ACL_NCATS. acl_cat_parse() -- the bit a name (without @, any case;
 * "kv" is "keyspace") stands for, 0 if none; "all" is not a category. */
const char *acl_cat_name(unsigned i);
unsigned acl_cat_parse(const char *name, size_t len);


/* acl_hash() -- SHA-256 of pw into out. */
void acl_hash(const char *pw, size_t len, uint8_t out[ACL_HASH_BYTES]);

typedef struct acl_rule_s {
    bool allow;
    unsigned cats;                 /* a category rule: one bit; 0 for a command rule */
    char cmd[ACL_CMD_NAME_MAX + 1]; /* a command rule: the lower-case name */
} acl_rule_t;

typedef struct acl_user_s {
    char *name;                    /* NUL-terminated, owned */
    size_t nlen;
    bool on;
    bool nopass;
    uint8_t (*hashes)[ACL_HASH_BYTES];
    size_t nhashes;
    bool base_allow;               /* the first rule: +@all (true) or -@all */
    acl_rule_t *rules;             /* after the base, in order */
    size_t nrules;
    char **pats[ACL_NKINDS];       /* NUL-terminated, owned */
    size_t npats[ACL_NKINDS];
    /* Derived after every change: every command allowed; every name of
     * a kind allowed (a "*" pattern). */
    bool all_cmds;
    bool all_names[ACL_NKINDS];
} acl_user_t;

/* acl_user_new() -- a user as Redis makes one: off, no password (so it
 * cannot authenticate), no command, no name. name must be valid
 * (acl_name_ok()). acl_user_copy() -- a deep copy. acl_user_free()
 * accepts NULL. */
acl_user_t *acl_user_new(const char *name, size_t nlen);
acl_user_t *acl_user_copy(const acl_user_t *u);
void acl_user_free(acl_user_t *u);
/* acl_name_ok() -- may a user be called this? */
bool acl_name_ok(const char *name, size_t nlen);

/* acl_user_rule() -- apply one rule word to u. Returns 0, or -1 with *err
 * (a static sentence) and u unchanged. */
int acl_user_rule(acl_user_t *u, const char *w, size_t len, const char **err);
/* acl_user_rules() -- apply the space-separated words of text in order
 * (the canonical form, or an ACL file's line after the name). Returns 0,
 * or -1 with *err; u may then hold the words before the bad one. */
int acl_user_rules(acl_user_t *u, const char *text, size_t len, const char **err);
/* acl_user_describe() -- u's canonical description appended to out:
 * on|off, nopass or #hashes, the patterns (~, %Q~, %C~), then the command
 * rules from the base. acl_user_rules() on a new user gives u back. */
void acl_user_describe(const acl_user_t *u, ordo_buf_t *out);

/* acl_pass_ok() -- may u authenticate with this password? (on, and
 * nopass or one of its hashes; compared without an early exit.) */
bool acl_pass_ok(const acl_user_t *u, const char *pw, size_t len);
/* acl_cmd_ok() -- may u run the command with this lower-case name and
 * these categories? */
bool acl_cmd_ok(const acl_user_t *u, const char *lname, size_t nlen, unsigned cats);
/* acl_name_allowed() -- may u touch this name of this kind? */
bool acl_name_allowed(const acl_user_t *u, int kind, const char *name, size_t len);
/* acl_prefix_allowed() -- may u read every name of this kind under the
 * prefix (KV.RANGE, a prefix watch)? True if a pattern is "*", or is a
 * prefix of it without glob characters followed by a last "*". */
bool acl_prefix_allowed(const acl_user_t *u, int kind, const char *prefix, size_t len);

/* The users table. acl_find() returns the user (valid until the next
 * change) or NULL; acl_set() takes u and replaces the user of its name;
 * acl_del() returns true if there was one. acl_user_at() walks the users
 * in name order, i < acl_count(). acl_gen() changes with every change;
 * acl_set_gen() is for a table that replaces another (core_copy_callbacks()),
 * so caches of the old one see a change. */
typedef struct acl_s acl_t;
acl_t *acl_create(void);
void acl_destroy(acl_t *a);
const acl_user_t *acl_find(const acl_t *a, const char *name, size_t nlen);
void acl_set(acl_t *a, acl_user_t *u);
bool acl_del(acl_t *a, const char *name, size_t nlen);
size_t acl_count(const acl_t *a);
const acl_user_t *acl_user_at(const acl_t *a, size_t i);
uint64_t acl_gen(const acl_t *a);
void acl_set_gen(acl_t *a, uint64_t gen);

#endif /* ORDO_ACL_H */
