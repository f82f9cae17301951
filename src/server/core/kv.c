/*
 * kv.c -- the multi-version key store; see kv.h for the contract.
 *
 * Data layout
 * -----------
 * A key is one allocation, kv_key_t:
 *
 *     hnode (16) | newest (8) | klen (4) | level (1) | key bytes (klen) | pad | tower (8 * level)
 *
 * hnode links it in the keyed hash table (exact lookup; the SipHash key is
 * per table, so client-chosen keys cannot build long chains). newest is the
 * head of its version chain. The tower is the key's node in the ordered index
 * (below); it sits after the key bytes, rounded up to 8, so the key bytes are
 * at a fixed offset and a version can find its key from kv_version_t.key
 * alone (KEY_OF()), which saves a pointer per version.
 *
 * A version is one allocation, kv_ver_t:
 *
 *     kv_version_t (64, the public face) | older (8) | value bytes (vlen)
 *
 * The chain is singly linked newest -> oldest through `older`. The public
 * struct is embedded rather than built on demand because kv.h promises that
 * the pointers it returns stay valid until the next mutation; a version's
 * value and key pointers point into the two allocations above. There is no
 * `newer` pointer: compaction never needs to walk forwards (see below). A
 * few freed small versions are kept as spares for the next put (ver_get), so
 * the steady state of a write allocating one version and its compaction step
 * freeing another costs neither a malloc nor a free.
 *
 * Ordered index: a skiplist whose nodes are the key structs themselves (p =
 * 1/4, at most KV_LEVEL_MAX levels), ordered by memcmp and then shorter
 * first. Chosen over a B+tree of key pointers because it allocates nothing
 * beyond the key, deletes without rebalancing, and costs 8 * 4/3 = 10.7
 * bytes per key on average, the same as a B+tree leaf at 75% fill. Levels
 * come from a per-store xorshift generator seeded from the kernel, so a
 * client cannot arrange for keys to be tall or short. The index holds every
 * key that has retained history, live or tombstoned, because kv_range() at an
 * old revision must see keys deleted since. While a log is replayed the index
 * is deferred (kv_index_defer(); see "deferred indexing" below): new keys
 * wait unordered and are linked in one sorted pass at the end, which is what
 * makes a replay's key creation cheap.
 *
 * Change log: a ring buffer (power-of-two array deque) of version pointers in
 * revision order. Revisions are sparse (the core spends them on other things),
 * so finding one is a binary search on the versions' mod_rev. Entries carry
 * no data of their own: the change's new version is the entry, and the
 * version it replaced is that version's `older` (if not a tombstone). Cursor
 * positions are absolute (`base` counts entries ever popped from the front),
 * so a cursor survives appends and compactions that do not reach it.
 *
 * Measured cost (x86-64 glibc, 16-byte malloc granularity; test_srv_kv prints
 * it): a million 11-byte keys with a 3-byte value each cost 178 bytes per key
 * as kv_stats() counts them: ~66 for the key struct (48-56 bytes used, tower
 * included), 96 for the version (75 used), 8 for its log slot and 8 for its
 * hash bucket; 170 once the log is compacted. An extra version costs ~106
 * (version + log slot). Most of it is the 64-byte public kv_version_t, the
 * price of handing out stable pointers with the key and value pointers
 * inside; Redis spends ~90 on the same key.
 *
 * Compaction at point R
 * ---------------------
 * Invariants, for the compaction point P (kv->oldest_rev):
 *   I1 the log holds, in revision order, every version ever made with
 *      mod_rev >= P (none of them is ever freed) and nothing else;
 *   I2 every key's chain holds its versions with mod_rev >= P plus at most
 *      one older version, the one visible at P; hence reads at revisions
 *      >= P are exact, and the version replaced by the change at P (its
 *      PREVVAL) is still there;
 *   I3 a key is in the hash table iff it is in the index iff its chain is
 *      non-empty; a key whose chain is only a tombstone older than P is gone.
 *
 * Compaction pops log entries with rev < R in order. For a popped version v,
 * every version older than v is unreachable by reads at >= R (v is newer and
 * still <= R), and is already popped (it is older), so it is freed. v itself
 * is kept: if a newer version of its key is also below R, that one is popped
 * later in the same pass and frees v then; otherwise v is what a read between
 * R and the newer revision sees. If v is a tombstone and the newest version
 * of its key, the key is removed entirely. Since each pop frees what the
 * previous pop of that key left behind, a pop frees at most two versions
 * (one older version, and a newest tombstone), which is what makes
 * kv_compact_step() bounded. A partial step leaves the point at the revision
 * of the first entry not popped: every invariant holds there.
 */
#include "kv.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/htab.h"
#include "base/siphash.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KV_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define KV_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define KV_POISON(p, n) ((void)(p), (void)(n))
#define KV_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Skiplist height limit: with p = 1/4, 16 levels index 4^16 (4 billion) keys
 * before the top level stops thinning the search. */
#define KV_LEVEL_MAX 16
/* Spare versions: freed small versions kept for the next put (see ver_get). */
#define KV_SPARE_MAX 8
#define KV_SPARE_BYTES_MAX 256
/* Smallest change log ring; it doubles when full; a compaction that
 * leaves it less than 1/8 full halves it until it is not. */
#define KV_LOG_MIN 64

typedef struct kv_ver_s kv_ver_t;

typedef struct kv_key_s {
    ordo_hnode_t hnode;
    kv_ver_t *newest;
    uint32_t klen;
    uint8_t level;      /* tower height, 1..KV_LEVEL_MAX */
    char bytes[];       /* klen key bytes, then padding, then the tower */
} kv_key_t;

struct kv_ver_s {
    kv_version_t pub;
    kv_ver_t *older;
    char value[];
};

struct kv_s {
    ordo_htab_t keys;
    kv_key_t *head[KV_LEVEL_MAX]; /* skiplist head tower */
    int level;                    /* levels in use */
    uint64_t rng;                 /* xorshift64 state for tower heights */

    kv_ver_t **log;               /* ring of log_cap slots */
    size_t log_cap, log_head, log_len;
    size_t log_base;              /* absolute position of log[log_head] */
    size_t log_bytes;             /* key and value bytes of the changes in the log (kv_trim_step()) */

    uint64_t last_rev;
    uint64_t oldest_rev;
    uint64_t epoch;               /* bumped by each compaction that pops */

    /* Deferred indexing (kv_index_defer): keys created meanwhile wait here,
     * unordered, instead of in the index; NULL marks one removed since. */
    bool deferring;
    kv_key_t **pending;
    size_t npending, pending_cap;

    kv_ver_t *spare[KV_SPARE_MAX]; /* freed versions kept for reuse (ver_get) */
    int nspare;

    size_t live;                  /* keys whose newest version is a value */
    size_t nversions;
    size_t bytes;                 /* estimated heap bytes of keys and versions */
};

#define KEY_OF(kp) ((kv_key_t *)(void *)((char *)(uintptr_t)(kp) - offsetof(kv_key_t, bytes)))

static void *kv_xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "ordod: out of memory allocating %zu bytes (kv)\n", n);
        abort();
    }
    return p;
}

/* Estimated heap cost of an n-byte malloc: glibc adds an 8-byte header and
 * rounds to 16, with a 32-byte minimum. Good enough for INFO and the
 * per-key comparison with Redis. */
static size_t alloc_cost(size_t n)
{
    size_t c = (n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

/* ---- keys and the ordered index -------------------------------------------------- */

static size_t tower_offset(uint32_t klen)
{
    return (offsetof(kv_key_t, bytes) + klen + 7) & ~(size_t)7;
}

static kv_key_t **tower(const kv_key_t *k)
{
    return (kv_key_t **)(void *)((char *)(uintptr_t)k + tower_offset(k->klen));
}

static size_t key_size(uint32_t klen, int level)
{
    return tower_offset(klen) + (size_t)level * sizeof(kv_key_t *);
}

/* Byte order: memcmp on the common part, then the shorter first. */
static int keycmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return alen < blen ? -1 : alen > blen;
}

static bool key_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const kv_key_t *k = (const kv_key_t *)n;
    return k->klen == len && memcmp(k->bytes, key, len) == 0;
}

/* What a key counts toward kv->bytes: its allocation with a one-level
 * tower, plus the expected rest of the tower (1/3 of a pointer at p = 1/4).
 * Not the actual height: heights are drawn from a per-process seed, and the
 * figure must be the same after a restart replays the same records. */
static size_t key_cost(uint32_t klen)
{
    return alloc_cost(key_size(klen, 1)) + sizeof(kv_key_t *) / 3;
}

static int random_level(kv_t *kv)
{
    uint64_t x = kv->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    kv->rng = x;
    int level = 1;
    while (level < KV_LEVEL_MAX && (x & 3) == 0) {
        level++;
        x >>= 2;
    }
    return level;
}

/* Fill update[l] with the forward array whose level-l link is the first key
 * >= key (the predecessor's tower, or the head). */
static void index_find(kv_t *kv, const void *key, size_t klen, kv_key_t **update[KV_LEVEL_MAX])
{
    kv_key_t **fwd = kv->head;
    for (int l = kv->level - 1; l >= 0; l--) {
        while (fwd[l] != NULL && keycmp(fwd[l]->bytes, fwd[l]->klen, key, klen) < 0)
            fwd = tower(fwd[l]);
        update[l] = fwd;
    }
}

static void index_insert(kv_t *kv, kv_key_t *k)
{
    kv_key_t **update[KV_LEVEL_MAX];
    index_find(kv, k->bytes, k->klen, update);
    for (int l = kv->level; l < k->level; l++)
        update[l] = kv->head;
    if (k->level > kv->level)
        kv->level = k->level;
    kv_key_t **t = tower(k);
    for (int l = 0; l < k->level; l++) {
        t[l] = update[l][l];
        update[l][l] = k;
    }
}

static bool pending_has(const kv_t *kv, const kv_key_t *k);

static void index_remove(kv_t *kv, kv_key_t *k)
{
    if (pending_has(kv, k)) {
        kv->pending[(uintptr_t)tower(k)[0]] = NULL;
        return;
    }
    kv_key_t **update[KV_LEVEL_MAX];
    index_find(kv, k->bytes, k->klen, update);
    kv_key_t **t = tower(k);
    for (int l = 0; l < k->level; l++) {
        assert(update[l][l] == k);
        update[l][l] = t[l];
    }
    while (kv->level > 1 && kv->head[kv->level - 1] == NULL)
        kv->level--;
}

/* The first key in the index that is > key (strict) or >= key. */
static kv_key_t *index_seek(const kv_t *kv, const void *key, size_t klen, bool strict)
{
    kv_key_t *const *fwd = kv->head;
    for (int l = kv->level - 1; l >= 0; l--) {
        while (fwd[l] != NULL) {
            int c = keycmp(fwd[l]->bytes, fwd[l]->klen, key, klen);
            if (c > 0 || (c == 0 && !strict))
                break;
            fwd = tower(fwd[l]);
        }
    }
    return fwd[0];
}

/* ---- deferred indexing -----------------------------------------------------------
 * Inserting a key into the skiplist costs a dozen cache misses when keys
 * arrive in random order, as they do when a log is replayed. While deferring,
 * a new key goes to the pending array instead, and its tower[0] (unused
 * until it is linked) holds its position there, so removing it is O(1).
 * kv_index_settle() sorts the pending keys and links them in one ordered
 * pass (a finger per level: each insertion starts from the previous one's
 * predecessors), touching each node of the index a bounded number of times. */

static void pending_add(kv_t *kv, kv_key_t *k)
{
    if (kv->npending == kv->pending_cap) {
        size_t cap = kv->pending_cap ? kv->pending_cap * 2 : 1024;
        kv_key_t **n = realloc(kv->pending, cap * sizeof *n);
        if (n == NULL) {
            fprintf(stderr, "ordod: out of memory allocating %zu bytes (kv)\n", cap * sizeof *n);
            abort();
        }
        kv->pending = n;
        kv->pending_cap = cap;
    }
    tower(k)[0] = (kv_key_t *)(uintptr_t)kv->npending;
    kv->pending[kv->npending++] = k;
}

/* Is k waiting in the pending array? An indexed key's tower[0] is a pointer
 * (or NULL), never a position whose slot holds k itself. */
static bool pending_has(const kv_t *kv, const kv_key_t *k)
{
    uintptr_t i = (uintptr_t)tower(k)[0];
    return kv->deferring && i < kv->npending && kv->pending[i] == k;
}

static int keyp_cmp(const void *a, const void *b)
{
    const kv_key_t *x = *(kv_key_t *const *)a, *y = *(kv_key_t *const *)b;
    return keycmp(x->bytes, x->klen, y->bytes, y->klen);
}

void kv_index_defer(kv_t *kv)
{
    kv->deferring = true;
}

void kv_index_settle(kv_t *kv)
{
    if (!kv->deferring)
        return;
    size_t n = 0;
    for (size_t i = 0; i < kv->npending; i++)
        if (kv->pending[i] != NULL)
            kv->pending[n++] = kv->pending[i];
    if (n > 1) /* (the array is NULL if nothing was created) */
        qsort(kv->pending, n, sizeof *kv->pending, keyp_cmp);
    kv_key_t **update[KV_LEVEL_MAX];
    for (int l = 0; l < KV_LEVEL_MAX; l++)
        update[l] = kv->head;
    for (size_t i = 0; i < n; i++) {
        kv_key_t *k = kv->pending[i];
        kv_key_t **t = tower(k);
        for (int l = 0; l < k->level; l++) {
            /* update[l] precedes every key still to insert: walk on from it. */
            while (update[l][l] != NULL && keycmp(update[l][l]->bytes, update[l][l]->klen, k->bytes, k->klen) < 0)
                update[l] = tower(update[l][l]);
            t[l] = update[l][l];
            update[l][l] = k;
            update[l] = t;
        }
        if (k->level > kv->level)
            kv->level = k->level;
    }
    free(kv->pending);
    kv->pending = NULL;
    kv->npending = kv->pending_cap = 0;
    kv->deferring = false;
}

static kv_key_t *key_find(const kv_t *kv, const void *key, size_t klen)
{
    uint64_t h = ordo_htab_hash(&kv->keys, key, klen);
    return (kv_key_t *)ordo_htab_find(&kv->keys, h, key, klen);
}

/* A new key; hash is ordo_htab_hash() of it (the caller's failed lookup
 * computed it already). */
static kv_key_t *key_create(kv_t *kv, const void *key, size_t klen, uint64_t hash)
{
    int level = random_level(kv);
    size_t size = key_size((uint32_t)klen, level);
    kv_key_t *k = kv_xmalloc(size);
    k->newest = NULL;
    k->klen = (uint32_t)klen;
    k->level = (uint8_t)level;
    if (klen)
        memcpy(k->bytes, key, klen);
    ordo_htab_insert(&kv->keys, &k->hnode, hash);
    if (kv->deferring)
        pending_add(kv, k);
    else
        index_insert(kv, k);
    kv->bytes += key_cost((uint32_t)klen);
    return k;
}

static void key_free(kv_t *kv, kv_key_t *k)
{
    kv->bytes -= key_cost(k->klen);
    free(k);
}

/* ---- versions ----------------------------------------------------------------- */

static size_t ver_size(uint32_t vlen)
{
    return sizeof(kv_ver_t) + vlen;
}

/* Spare versions. In steady state every put allocates a version and the
 * compaction step after it frees one (the version a history ago), mostly of
 * the same size. ver_free keeps up to KV_SPARE_MAX small freed versions and
 * ver_get reuses one whose allocation is at least as large (ver_size of its
 * last vlen, an underestimate of what was malloc'd) and of the same malloc
 * size class, so memory and its accounting are what malloc would give; this
 * saves a malloc and a free per write. Spares are not counted in bytes or
 * nversions; under ASan they are poisoned while they wait. */
static kv_ver_t *ver_get(kv_t *kv, size_t vlen)
{
    size_t need = ver_size((uint32_t)vlen);
    for (int i = kv->nspare - 1; i >= 0; i--) {
        kv_ver_t *v = kv->spare[i];
        size_t have = ver_size(v->pub.vlen); /* readable: vlen is not poisoned */
        if (have >= need && alloc_cost(have) == alloc_cost(need)) {
            kv->spare[i] = kv->spare[--kv->nspare];
            KV_UNPOISON(v, have);
            return v;
        }
    }
    return kv_xmalloc(need);
}

static void ver_free(kv_t *kv, kv_ver_t *v)
{
    size_t size = ver_size(v->pub.vlen);
    kv->bytes -= alloc_cost(size);
    kv->nversions--;
    if (size <= KV_SPARE_BYTES_MAX && kv->nspare < KV_SPARE_MAX) {
        kv->spare[kv->nspare++] = v;
        /* Poison all but vlen, which ver_get reads. */
        KV_POISON(v, offsetof(kv_ver_t, pub.vlen));
        KV_POISON((char *)v + offsetof(kv_ver_t, pub.vlen) + sizeof v->pub.vlen,
                  size - offsetof(kv_ver_t, pub.vlen) - sizeof v->pub.vlen);
        return;
    }
    free(v);
}

/* The newest version of the chain starting at v with mod_rev <= rev. */
static const kv_ver_t *ver_at(const kv_ver_t *v, uint64_t rev)
{
    while (v != NULL && v->pub.mod_rev > rev)
        v = v->older;
    return v;
}

static const kv_version_t *live_or_null(const kv_ver_t *v)
{
    return v != NULL && !v->pub.deleted ? &v->pub : NULL;
}

/* ---- the change log ------------------------------------------------------------- */

static void log_resize(kv_t *kv, size_t cap)
{
    assert(cap >= kv->log_len && (cap & (cap - 1)) == 0);
    kv_ver_t **n = kv_xmalloc(cap * sizeof *n);
    for (size_t i = 0; i < kv->log_len; i++)
        n[i] = kv->log[(kv->log_head + i) & (kv->log_cap - 1)];
    free(kv->log);
    kv->log = n;
    kv->log_cap = cap;
    kv->log_head = 0;
}

static kv_ver_t *log_at(const kv_t *kv, size_t i)
{
    assert(i < kv->log_len);
    return kv->log[(kv->log_head + i) & (kv->log_cap - 1)];
}

/* What a change counts against the history's byte bound: its key and
 * value bytes. */
static size_t change_bytes(const kv_ver_t *v) { return (size_t)v->pub.klen + v->pub.vlen; }

static void log_push(kv_t *kv, kv_ver_t *v)
{
    if (kv->log_len == kv->log_cap)
        log_resize(kv, kv->log_cap * 2);
    kv->log[(kv->log_head + kv->log_len) & (kv->log_cap - 1)] = v;
    kv->log_len++;
    kv->log_bytes += change_bytes(v);
}

static kv_ver_t *log_pop(kv_t *kv)
{
    kv_ver_t *v = kv->log[kv->log_head];
    kv->log_head = (kv->log_head + 1) & (kv->log_cap - 1);
    kv->log_len--;
    kv->log_base++;
    assert(kv->log_bytes >= change_bytes(v));
    kv->log_bytes -= change_bytes(v);
    return v;
}

/* Index (relative to the head) of the first entry with mod_rev > rev. */
static size_t log_search(const kv_t *kv, uint64_t rev)
{
    size_t lo = 0, hi = kv->log_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log_at(kv, mid)->pub.mod_rev <= rev)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void change_of(const kv_ver_t *v, kv_change_t *out)
{
    out->cur = &v->pub;
    out->prev = live_or_null(v->older);
}

/* ---- create, destroy, read ------------------------------------------------------ */

kv_t *kv_create(void)
{
    kv_t *kv = calloc(1, sizeof *kv);
    if (kv == NULL)
        goto fail;
    if (ordo_htab_init(&kv->keys, key_eq) != 0)
        goto fail_kv;
    kv->log = malloc(KV_LOG_MIN * sizeof *kv->log);
    if (kv->log == NULL)
        goto fail_htab;
    kv->log_cap = KV_LOG_MIN;
    kv->level = 1;
    uint8_t seed[ORDO_SIPHASH_KEY_LEN];
    ordo_random_key(seed);
    memcpy(&kv->rng, seed, sizeof kv->rng);
    kv->rng |= 1; /* xorshift must not start at 0 */
    kv->oldest_rev = 1;
    return kv;

fail_htab:
    ordo_htab_destroy(&kv->keys);
fail_kv:
    free(kv);
fail:
    return NULL;
}

void kv_destroy(kv_t *kv)
{
    if (kv == NULL)
        return;
    kv_index_settle(kv); /* pending keys join the index, freed below */
    kv_key_t *k = kv->head[0];
    while (k != NULL) {
        kv_key_t *next = tower(k)[0];
        kv_ver_t *v = k->newest;
        while (v != NULL) {
            kv_ver_t *older = v->older;
            free(v);
            v = older;
        }
        free(k);
        k = next;
    }
    for (int i = 0; i < kv->nspare; i++) {
        KV_UNPOISON(kv->spare[i], ver_size(kv->spare[i]->pub.vlen));
        free(kv->spare[i]);
    }
    free(kv->log);
    ordo_htab_destroy(&kv->keys);
    free(kv);
}

const kv_version_t *kv_get(const kv_t *kv, const void *key, size_t klen)
{
    const kv_key_t *k = key_find(kv, key, klen);
    return k != NULL ? live_or_null(k->newest) : NULL;
}

uint64_t kv_last_change(const kv_t *kv, const void *key, size_t klen)
{
    const kv_key_t *k = key_find(kv, key, klen);
    return k != NULL && k->newest != NULL ? k->newest->pub.mod_rev : 0;
}

int kv_get_at(const kv_t *kv, const void *key, size_t klen, uint64_t rev, const kv_version_t **out)
{
    *out = NULL;
    if (rev < kv->oldest_rev)
        return KV_ECOMPACTED;
    const kv_key_t *k = key_find(kv, key, klen);
    if (k != NULL)
        *out = live_or_null(ver_at(k->newest, rev));
    return KV_OK;
}

size_t kv_count(const kv_t *kv)
{
    return kv->live;
}

uint64_t kv_last_rev(const kv_t *kv)
{
    return kv->last_rev;
}

uint64_t kv_oldest_rev(const kv_t *kv)
{
    return kv->oldest_rev;
}

/* ---- mutations ------------------------------------------------------------------ */

/* Make a version of k at rev, link it as the newest and log it. */
static kv_ver_t *ver_append(kv_t *kv, kv_key_t *k, const void *val, size_t vlen, bool deleted,
                            uint64_t lease, uint64_t rev)
{
    kv_ver_t *prev = k->newest;
    kv_ver_t *v = ver_get(kv, vlen);
    v->pub.mod_rev = rev;
    v->pub.lease = lease;
    v->pub.deleted = deleted;
    if (deleted) {
        v->pub.create_rev = 0;
        v->pub.version = 0;
    } else if (prev != NULL && !prev->pub.deleted) {
        v->pub.create_rev = prev->pub.create_rev;
        v->pub.version = prev->pub.version + 1;
    } else {
        v->pub.create_rev = rev;
        v->pub.version = 1;
    }
    v->pub.vlen = (uint32_t)vlen;
    v->pub.value = v->value; /* never NULL, even when empty */
    if (vlen)
        memcpy(v->value, val, vlen);
    v->pub.key = k->bytes;
    v->pub.klen = k->klen;
    v->older = prev;
    k->newest = v;
    log_push(kv, v);
    kv->last_rev = rev;
    kv->nversions++;
    kv->bytes += alloc_cost(ver_size((uint32_t)vlen));
    return v;
}

/* ---- loading a snapshot ----------------------------------------------------------
 * A snapshot holds the live keys as of its revision R. They are loaded as
 * base versions: linked as their key's only version, but not logged, since
 * their mod_revs are <= R and the compaction point becomes R + 1 (I1, I2). */

int kv_load(kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen, uint64_t create_rev,
            uint64_t mod_rev, uint64_t version, uint64_t lease)
{
    uint64_t h = ordo_htab_hash(&kv->keys, key, klen);
    if (kv->log_len != 0 || mod_rev == 0 || create_rev > mod_rev || version == 0 ||
        ordo_htab_find(&kv->keys, h, key, klen) != NULL)
        return KV_EREV;
    if (mod_rev > kv->last_rev)
        kv->last_rev = mod_rev;
    kv_key_t *k = key_create(kv, key, klen, h);
    kv_ver_t *v = kv_xmalloc(ver_size((uint32_t)vlen));
    v->pub.mod_rev = mod_rev;
    v->pub.create_rev = create_rev;
    v->pub.version = version;
    v->pub.lease = lease;
    v->pub.deleted = false;
    v->pub.vlen = (uint32_t)vlen;
    v->pub.value = v->value;
    if (vlen)
        memcpy(v->value, val, vlen);
    v->pub.key = k->bytes;
    v->pub.klen = k->klen;
    v->older = NULL;
    k->newest = v;
    kv->live++;
    kv->nversions++;
    kv->bytes += alloc_cost(ver_size((uint32_t)vlen));
    return KV_OK;
}

int kv_load_done(kv_t *kv, uint64_t oldest)
{
    if (kv->log_len != 0 || oldest <= kv->last_rev || oldest == 0)
        return KV_EREV;
    kv->oldest_rev = oldest;
    return KV_OK;
}

/* The version of k visible just below the compaction point, if it is a
 * value: what a snapshot stores as the key's base. */
static const kv_ver_t *base_of(const kv_t *kv, const kv_key_t *k)
{
    const kv_ver_t *v = k->newest;
    while (v != NULL && v->pub.mod_rev >= kv->oldest_rev)
        v = v->older;
    return v != NULL && !v->pub.deleted ? v : NULL;
}

long kv_base_step(const kv_t *kv, const void *after, size_t alen, bool have_after, size_t limit, kv_base_cb cb,
                  void *arg)
{
    assert(!kv->deferring);
    const kv_key_t *k = have_after ? index_seek(kv, after, alen, true) : kv->head[0];
    long n = 0;
    for (; k != NULL && (size_t)n < limit; k = tower(k)[0], n++) {
        const kv_ver_t *b = base_of(kv, k);
        cb(arg, k->bytes, k->klen, b ? &b->pub : NULL);
    }
    return n;
}

int kv_put(kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen,
           uint64_t lease, uint64_t rev, kv_change_t *change_out)
{
    if (rev <= kv->last_rev)
        return KV_EREV;
    assert(klen <= UINT32_MAX && vlen <= UINT32_MAX);
    uint64_t h = ordo_htab_hash(&kv->keys, key, klen);
    kv_key_t *k = (kv_key_t *)ordo_htab_find(&kv->keys, h, key, klen);
    if (k == NULL)
        k = key_create(kv, key, klen, h);
    if (k->newest == NULL || k->newest->pub.deleted)
        kv->live++;
    kv_ver_t *v = ver_append(kv, k, val, vlen, false, lease, rev);
    if (change_out != NULL)
        change_of(v, change_out);
    return KV_OK;
}

int kv_del(kv_t *kv, const void *key, size_t klen, uint64_t rev, kv_change_t *change_out)
{
    if (rev <= kv->last_rev)
        return KV_EREV;
    kv_key_t *k = key_find(kv, key, klen);
    if (k == NULL || k->newest->pub.deleted)
        return 0;
    kv->live--;
    kv_ver_t *v = ver_append(kv, k, NULL, 0, true, 0, rev);
    if (change_out != NULL)
        change_of(v, change_out);
    return 1;
}

/* ---- ranges -------------------------------------------------------------------- */

long kv_range(const kv_t *kv, const void *prefix, size_t plen, const void *after, size_t alen,
              uint64_t at_rev, size_t limit, kv_range_cb cb, void *arg)
{
    assert(!kv->deferring);
    if (at_rev != 0 && at_rev < kv->oldest_rev)
        return KV_ECOMPACTED;
    /* Keys with the prefix are contiguous in byte order; start at the first
     * one that is also strictly after `after`. */
    kv_key_t *k;
    if (after != NULL && keycmp(after, alen, prefix, plen) >= 0)
        k = index_seek(kv, after, alen, true);
    else
        k = index_seek(kv, prefix, plen, false);
    long n = 0;
    for (; k != NULL; k = tower(k)[0]) {
        if (k->klen < plen || (plen && memcmp(k->bytes, prefix, plen) != 0))
            break;
        const kv_version_t *v = live_or_null(at_rev ? ver_at(k->newest, at_rev) : k->newest);
        if (v == NULL)
            continue;
        n++;
        if (cb(arg, v) != 0 || (limit != 0 && (size_t)n == limit))
            break;
    }
    return n;
}

/* ---- compaction ------------------------------------------------------------------ */

/* Versions that popping the log's first entry would free (see the opening
 * comment: at most two once the store is in steady state). */
static size_t pop_cost(const kv_ver_t *v)
{
    size_t n = 0;
    for (const kv_ver_t *o = v->older; o != NULL; o = o->older)
        n++;
    if (v->pub.deleted && KEY_OF(v->pub.key)->newest == v)
        n++;
    return n;
}

/* Compaction reads each popped version and the one before it in its chain.
 * Both were written a whole history ago (history-revs key changes), so they are
 * long out of cache, and each write pays for them. The log says which
 * versions come next: fetch the version KV_PREFETCH_AHEAD entries on, and the
 * older version of the one half as far (whose own fetch was issued a few pops
 * before), so both are in cache when their turn comes. A hint only. */
#define KV_PREFETCH_AHEAD 8

static void compact_prefetch(const kv_t *kv)
{
    if (kv->log_len <= KV_PREFETCH_AHEAD)
        return;
    __builtin_prefetch(log_at(kv, KV_PREFETCH_AHEAD));
    const kv_ver_t *mid = log_at(kv, KV_PREFETCH_AHEAD / 2);
    if (mid->older != NULL)
        __builtin_prefetch(mid->older);
}

/* Pop the first log entry and free what it makes unreachable. */
static void pop_one(kv_t *kv)
{
    kv_ver_t *v = log_pop(kv);
    kv_ver_t *o = v->older;
    v->older = NULL;
    while (o != NULL) {
        kv_ver_t *next = o->older;
        ver_free(kv, o);
        o = next;
    }
    kv_key_t *k = KEY_OF(v->pub.key);
    if (v->pub.deleted && k->newest == v) {
        ordo_htab_remove(&kv->keys, &k->hnode);
        index_remove(kv, k);
        ver_free(kv, v);
        key_free(kv, k);
    }
}

/* Pop first entries while keep(front) says so and their revision is below
 * rev, freeing at most about max_versions versions (at least one entry is
 * popped if any may be). Returns true if it stopped for keep or rev, false
 * if for the work bound. */
typedef bool (*pop_pred)(const kv_t *kv, const void *arg);

static bool pop_while(kv_t *kv, uint64_t rev, pop_pred keep, const void *arg, size_t max_versions)
{
    size_t work = 0;
    bool popped = false, bounded = false;
    while (kv->log_len > 0 && log_at(kv, 0)->pub.mod_rev < rev && (keep == NULL || keep(kv, arg))) {
        compact_prefetch(kv);
        size_t cost = pop_cost(log_at(kv, 0));
        size_t units = cost ? cost : 1;
        if (popped && work + units > max_versions) {
            bounded = true;
            break;
        }
        pop_one(kv);
        popped = true;
        work += units;
    }
    if (popped)
        kv->epoch++;
    size_t cap = kv->log_cap;
    while (cap > KV_LOG_MIN && kv->log_len < cap / 8)
        cap /= 2;
    if (cap != kv->log_cap)
        log_resize(kv, cap);
    return !bounded;
}

int kv_compact_step(kv_t *kv, uint64_t rev, size_t max_versions)
{
    if (rev > kv->last_rev + 1)
        return KV_EREV;
    if (rev <= kv->oldest_rev)
        return 1;
    pop_while(kv, rev, NULL, NULL, max_versions);
    bool done = kv->log_len == 0 || log_at(kv, 0)->pub.mod_rev >= rev;
    kv->oldest_rev = done ? rev : log_at(kv, 0)->pub.mod_rev;
    assert(kv->oldest_rev <= rev);
    return done ? 1 : 0;
}

typedef struct trim_bounds_s {
    size_t changes, bytes;
} trim_bounds_t;

static bool over_bounds(const kv_t *kv, const void *arg)
{
    const trim_bounds_t *b = arg;
    return kv->log_len > b->changes || (b->bytes != 0 && kv->log_bytes > b->bytes);
}

int kv_trim_step(kv_t *kv, size_t keep_changes, size_t keep_bytes, uint64_t below_rev, size_t max_versions)
{
    trim_bounds_t b = {keep_changes, keep_bytes};
    if (!over_bounds(kv, &b))
        return 1;
    bool stopped = pop_while(kv, below_rev, over_bounds, &b, max_versions);
    /* The point moves to the first change kept (all before it are gone),
     * or past the last revision when none is kept. */
    uint64_t point = kv->log_len > 0 ? log_at(kv, 0)->pub.mod_rev : kv->last_rev + 1;
    if (point > kv->oldest_rev)
        kv->oldest_rev = point;
    return stopped ? 1 : 0;
}

int kv_compact(kv_t *kv, uint64_t rev)
{
    int rc = kv_compact_step(kv, rev, SIZE_MAX);
    if (rc < 0)
        return rc;
    assert(rc == 1);
    return KV_OK;
}

/* ---- change log cursors --------------------------------------------------------- */

int kv_log_seek(const kv_t *kv, uint64_t rev, kv_cursor_t *cur)
{
    if (rev < kv->oldest_rev - 1)
        return KV_ECOMPACTED;
    cur->after_rev = rev;
    cur->pos = kv->log_base + log_search(kv, rev);
    cur->epoch = kv->epoch;
    return KV_OK;
}

int kv_log_next(const kv_t *kv, kv_cursor_t *cur, kv_change_t *out)
{
    if (cur->epoch != kv->epoch) {
        /* Positions are absolute: the cursor is still good unless the
         * entries it had yet to read were compacted away. */
        if (cur->pos < kv->log_base)
            return KV_ECOMPACTED;
        cur->epoch = kv->epoch;
    }
    assert(cur->pos >= kv->log_base && cur->pos <= kv->log_base + kv->log_len);
    size_t i = cur->pos - kv->log_base;
    if (i == kv->log_len)
        return 0;
    const kv_ver_t *v = log_at(kv, i);
    change_of(v, out);
    cur->pos++;
    cur->after_rev = v->pub.mod_rev;
    return 1;
}

void kv_stats(const kv_t *kv, kv_stats_t *out)
{
    out->keys = kv->live;
    out->versions = kv->nversions;
    out->log_entries = kv->log_len;
    out->log_bytes = kv->log_bytes;
    out->bytes = sizeof *kv + alloc_cost(kv->log_cap * sizeof *kv->log) +
                 alloc_cost((kv->keys.mask + 1) * sizeof *kv->keys.buckets) + kv->bytes;
}
