/*
 * kv.h -- the multi-version key store: every key's current value and its
 * history, an ordered index for ranges, and the change log that watches read.
 *
 * The store is a pure data structure owned by the core: it never reads the
 * clock, never allocates revisions (the core assigns each mutation's
 * revision and passes it in, strictly increasing), never speaks RESP.
 * Not thread-safe: the core thread is its only user.
 *
 * Model (etcd's, which users of versioned stores know):
 *   - a key's life is a series of versions: a put creates a version with
 *     mod_rev = the put's revision; the first put after absence also sets
 *     create_rev = mod_rev and version = 1, each later put keeps create_rev
 *     and increments version. A delete appends a tombstone (deleted = 1,
 *     version = 0) and the key is absent until the next put.
 *   - history: every version whose revision is >= the compaction point
 *     (kv_oldest_rev()) is retained, plus for each key the version visible
 *     at the compaction point, so reads at any revision >= that point are
 *     exact. kv_get_at() below the point returns KV_ECOMPACTED.
 *   - change log: the versions in revision order, from the compaction point
 *     on. A watch that resumes from revision r reads the log after r; each
 *     entry gives the new version and the one it replaced (for PREVVAL).
 *
 * Complexity: get, put, del are O(1) expected plus O(log n) for the ordered
 * index on a key's first put and last removal; get_at is O(versions of that
 * key retained); range is O(log n + keys visited); compaction is O(versions
 * freed) (amortised O(1) per mutation) plus, when it leaves a key a single
 * version of another size than its node holds, O(log n) if the node moves;
 * finding a revision in the change log is O(log n).
 *
 * Versions are handed out as copies (kv_version_t) that the store fills
 * into the caller's storage; the key and value pointers inside them point
 * into the store and stay valid until the next mutation or compaction.
 */
#ifndef ORDO_KV_H
#define ORDO_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    KV_OK = 0,
    KV_ECOMPACTED = -1,     /* the requested revision is older than the retained history */
    KV_EREV = -2,           /* a mutation's revision is not above the last applied one */
};

typedef struct kv_s kv_t;

/* One version of a key: a value, or a tombstone. The store fills it in
 * (it keeps its versions in a compact form of its own); key and value point
 * into the store, valid until the next mutation or compaction. */
typedef struct kv_version_s {
    uint64_t mod_rev;       /* revision that made this version */
    uint64_t create_rev;    /* revision of the put that created the key's current life; 0 for a tombstone */
    uint64_t version;       /* puts since creation (1 for the first); 0 for a tombstone */
    uint64_t lease;         /* lease id the key is attached to, 0 for none */
    bool deleted;           /* tombstone */
    uint32_t vlen;          /* value length (0 for a tombstone) */
    const char *value;      /* value bytes (binary-safe), vlen long */
    const char *key;        /* the key's bytes */
    uint32_t klen;
} kv_version_t;

/* One change from the log: the version a mutation made, and a reference
 * to the version it replaced, which kv_change_prev() reads on demand (most
 * changes are never asked for it: only a watch with PREVVAL does). Both
 * are valid until the next mutation or compaction. */
typedef struct kv_change_s {
    kv_version_t cur;       /* put: the new value; del: the tombstone */
    const void *prev_ref;   /* internal: the replaced live version; NULL if the key was absent */
} kv_change_t;

/* kv_change_prev() -- the version ch replaced, filled into *buf; returns
 * buf, or NULL if the key was absent before (none, or a tombstone). */
const kv_version_t *kv_change_prev(const kv_change_t *ch, kv_version_t *buf);

/* Memory accounting for INFO and benchmarks. */
typedef struct kv_stats_s {
    size_t keys;            /* live keys */
    size_t versions;        /* retained versions incl. tombstones */
    size_t log_entries;     /* change log length: the changes retained */
    size_t log_bytes;       /* their key and value bytes (kv_trim_step()'s byte bound) */
    size_t bytes;           /* bytes allocated by the store (approximate, incl. overheads) */
    bool rehashing;         /* a resize of the hash table is moving keys over, a few a write */
} kv_stats_t;

/* kv_create() -- an empty store; NULL if out of memory. */
kv_t *kv_create(void);
void kv_destroy(kv_t *kv);

/* kv_get() -- the key's current live version, filled into *buf; returns
 * buf, or NULL if the key is absent. */
const kv_version_t *kv_get(const kv_t *kv, const void *key, size_t klen, kv_version_t *buf);

/* kv_get_value() -- the key's current value and its length in *vlen, or
 * NULL if the key is absent: kv_get() for a reader that needs nothing else
 * (GET), without building the version. The bytes stay valid until the
 * next mutation or compaction. */
const char *kv_get_value(const kv_t *kv, const void *key, size_t klen, size_t *vlen);

/* kv_last_change() -- the revision of the key's newest version, a deletion
 * included (0 if the store holds no version of it): what WATCH compares. */
uint64_t kv_last_change(const kv_t *kv, const void *key, size_t klen);

/* kv_get_at() -- the key's version visible at revision rev (the newest with
 * mod_rev <= rev), filled into *buf, with *out = buf; *out is NULL if the
 * key was absent at rev (never existed, or deleted). Returns KV_OK or
 * KV_ECOMPACTED (rev < kv_oldest_rev()). */
int kv_get_at(const kv_t *kv, const void *key, size_t klen, uint64_t rev, kv_version_t *buf,
              const kv_version_t **out);

/* kv_put() -- apply a put at revision rev (> every revision applied before).
 * *change_out (may be NULL) receives the change just made.
 * Returns KV_OK or KV_EREV. */
int kv_put(kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen,
           uint64_t lease, uint64_t rev, kv_change_t *change_out);

/* kv_del() -- apply a delete at revision rev if the key is live.
 * Returns 1 if a tombstone was written (and *change_out filled), 0 if the key
 * was absent (nothing changes; the core does not spend the revision), or
 * KV_EREV. */
int kv_del(kv_t *kv, const void *key, size_t klen, uint64_t rev, kv_change_t *change_out);

/* kv_range() -- visit, in byte order, every key starting with prefix (plen 0:
 * every key) that is strictly after `after` (NULL: from the start), as of
 * revision at_rev (0: current), at most limit keys (0: no limit). The
 * callback gets the visible version (the struct valid during the call, its
 * key and value pointers as kv_version_t says); returning non-zero stops
 * the walk.
 * Returns the number of keys visited, or KV_ECOMPACTED. */
typedef int (*kv_range_cb)(void *arg, const kv_version_t *v);
long kv_range(const kv_t *kv, const void *prefix, size_t plen, const void *after, size_t alen,
              uint64_t at_rev, size_t limit, kv_range_cb cb, void *arg);

/* kv_count() -- live keys. */
size_t kv_count(const kv_t *kv);

/* Revisions: kv_last_rev() is the newest revision applied to the store (0
 * for none); kv_oldest_rev() is the compaction point: history at revisions
 * below it is gone (1 until the first compaction). */
uint64_t kv_last_rev(const kv_t *kv);
uint64_t kv_oldest_rev(const kv_t *kv);

/* kv_compact() -- drop history before rev (rev <= kv_last_rev() + 1; a rev
 * at or below the current point does nothing). Afterwards kv_oldest_rev() ==
 * rev. Keys whose newest version is a tombstone older than rev disappear.
 * Returns KV_OK or KV_EREV for a rev beyond the last revision + 1. */
int kv_compact(kv_t *kv, uint64_t rev);

/* kv_compact_step() -- incremental form for automatic compaction: move the
 * point towards rev, freeing at most max_versions versions (each call makes
 * progress: it always processes at least one change, which frees at most two
 * versions). Returns 1 if the point reached rev, 0 if more work remains (the
 * point then sits at a revision between the old point and rev), or KV_EREV
 * as kv_compact(). */
int kv_compact_step(kv_t *kv, uint64_t rev, size_t max_versions);

/* kv_trim_step() -- automatic compaction by what the history holds: pop
 * the oldest changes while more than keep_changes are retained or (if
 * keep_bytes is not 0) their key and value bytes pass keep_bytes, but none
 * at or above below_rev (a snapshot's pin; UINT64_MAX: none), freeing at
 * most about max_versions versions. The point then sits at the first
 * change kept (kv_last_rev() + 1 if none is). Only key changes count, so
 * revisions spent elsewhere (queues, leases) never shorten the history.
 * Returns 1 if the history is within the bounds (or the pin stops it), 0
 * if more work remains. */
int kv_trim_step(kv_t *kv, size_t keep_changes, size_t keep_bytes, uint64_t below_rev, size_t max_versions);
/* Change log cursor: the position of the first change with revision > rev.
 * kv_log_seek() returns KV_ECOMPACTED if changes after rev may be gone
 * (rev + 1 < kv_oldest_rev()). kv_log_next() fills *out with the next change
 * and advances, returning 1, or 0 at the end of the log. A cursor is a plain
 * value; it stays valid across mutations (new changes appear at the end) and
 * across compactions that leave the changes it has yet to read; if a
 * compaction dropped them, kv_log_next() returns KV_ECOMPACTED and the caller
 * resumes (or cancels the watch) from cur->after_rev, the last revision it
 * consumed. */
typedef struct kv_cursor_s {
    uint64_t after_rev;     /* the last revision consumed */
    size_t pos;             /* internal */
    uint64_t epoch;         /* internal: compaction epoch the position belongs to */
} kv_cursor_t;
int kv_log_seek(const kv_t *kv, uint64_t rev, kv_cursor_t *cur);
int kv_log_next(const kv_t *kv, kv_cursor_t *cur, kv_change_t *out);

void kv_stats(const kv_t *kv, kv_stats_t *out);

/* Deferred indexing, for bulk loading (log replay): after kv_index_defer(),
 * keys created join the ordered index only at kv_index_settle(), in one
 * sorted pass instead of one random-order skiplist insertion each. Every
 * other operation works as usual meanwhile, except kv_range() and
 * kv_base_step(), which must not be called until the index is settled.
 * kv_index_settle() without a defer does nothing; kv_destroy() settles. */
void kv_index_defer(kv_t *kv);
void kv_index_settle(kv_t *kv);

/* Snapshots store the retained history as: each key's base (the value
 * visible just below the compaction point, if any), then the change log.
 *
 * kv_base_step() -- visit up to limit keys in byte order, after `after`
 * (if have_after): cb gets each key and its base version (NULL if it has
 * none; the struct valid during the call). Returns the number of keys
 * visited; fewer than limit means done.
 *
 * Loading, into a fresh store: kv_load() each base (mod_rev < the point),
 * kv_load_done(point), then kv_put()/kv_del() each logged change in
 * revision order, which rebuilds the log, versions and create revisions
 * exactly. Both return KV_OK, or KV_EREV if the store already has changes,
 * the key is already loaded, or the revisions are inconsistent. */
typedef void (*kv_base_cb)(void *arg, const char *key, size_t klen, const kv_version_t *base);
long kv_base_step(const kv_t *kv, const void *after, size_t alen, bool have_after, size_t limit, kv_base_cb cb,
                  void *arg);
int kv_load(kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen, uint64_t create_rev,
            uint64_t mod_rev, uint64_t version, uint64_t lease);
int kv_load_done(kv_t *kv, uint64_t oldest);

#endif /* ORDO_KV_H */
