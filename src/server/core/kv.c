/*
 * kv.c -- the multi-version key store; see kv.h for the contract.
 *
 * Data layout
 * -----------
 * The common key has one version and nothing older (a key written once, or
 * one whose history was compacted), so a key and one version of it share
 * one allocation, the key node (kv_key_t):
 *
 *     hnext (8) | newest (8) | slot header (18) | tower (8 * level) | key bytes | slot extras | slot value
 *
 * hnext chains it in the store's hash table (below). The slot header is the
 * embedded version's mod_rev (8), vlen (4), the key's klen (4), flags (1)
 * and the tower height (1); the tower is the key's node in the ordered
 * index (below), unaligned, read and written through memcpy. A version
 * stores only what it cannot derive: its "extras" are create_rev and
 * version (16) unless it is a key's first version (VF_FIRST: version 1,
 * create_rev = mod_rev) or a tombstone, and a lease id (8) only when one is
 * attached (VF_LEASE). So a key of k bytes with a v-byte value written once
 * is one malloc of 34 + 8 * level + k + v bytes.
 *
 * Older and newer versions are separate allocations (kv_ver_t):
 *
 *     older (8) | key (8) | header (18) | extras | value
 *
 * The chain runs newest -> oldest: k->newest is the newest separate version
 * (NULL when the slot is the newest), each one's `older` the next separate
 * one, and after the last of them the slot, if it is live. The slot, when
 * live, is always the key's oldest version: a put to an existing key makes
 * a separate version, and a version moves into the slot only when it is
 * the last one left (below). A slot whose version compaction freed is dead
 * (VF_LIVE clear) and keeps its vlen and flags as the size of its bytes.
 *
 * Versions never move while the change log holds them, so the log is a ring
 * of header pointers. When compaction pops a key's newest version (the key
 * is cold: nothing newer in the history), every older version is freed and
 * that one moves into the slot (the node is realloc'ed if the sizes differ;
 * should it move, its hash chain link and index predecessors are repointed,
 * one O(log n) index search), so a cold key is one allocation again.
 *
 * Public versions (kv_version_t) are built on demand into the caller's
 * storage: the store keeps no 64-byte public struct per version. Their key
 * and value pointers point into the nodes and versions above, hence valid
 * until the next mutation or compaction. Decoding a header costs a few
 * dozen instructions, so the hot paths avoid it: a put or delete (mutate())
 * writes its change's new version straight into the caller's kv_change_t
 * from what it wrote, reading only the replaced version's create_rev and
 * version; the change holds the replaced version by reference, decoded
 * only if kv_change_prev() asks (a watch with PREVVAL); GET reads the
 * value's place with kv_get_value(); WATCH compares kv_last_change().
 *
 * Hash table: chained, a bucket array of node pointers, doubling when keys
 * outnumber buckets and halving below 1/8. Nodes store no hash: a lookup
 * compares klen and then the key bytes inline, last word first (key_eq),
 * which a short key's node has in its first cache line with the link, and
 * a resize hashes every key again (SipHash, keyed per store, so
 * client-chosen keys cannot build long chains). A resize is incremental:
 * the new array replaces `buckets` at once and the old one stays as `old`
 * while its chains move over, a few per insert or removal
 * (KV_REHASH_STEP), so no single write pays for rehashing the whole store
 * (at a million keys that was a stop of about 100 ms). Invariant: a key
 * of hash h is in old[h & old_mask] if old != NULL and (h & old_mask) >=
 * moved, and in buckets[h & mask] otherwise (tab_head()); old buckets
 * below `moved` are empty. A resize that comes due while one is under way
 * first finishes it; the steps outpace growth (a doubling moves all of
 * the old array before the keys can double again), so that happens only
 * when removals shrink the table faster than they move it.
 *
 * Ordered index: a skiplist whose nodes are the key nodes themselves (p =
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
 * Change log: a ring buffer (power-of-two array deque) of version header
 * pointers in revision order. Revisions are sparse (the core spends them on
 * other things), so finding one is a binary search on the versions'
 * mod_rev. Entries carry no data of their own: the change's new version is
 * the entry, and the version it replaced is the next older one in its chain
 * (if not a tombstone). Cursor positions are absolute (`base` counts entries
 * ever popped from the front), so a cursor survives appends and compactions
 * that do not reach it.
 *
 * Cost per key (x86-64 glibc: 8-byte header, 16-byte rounding, 32-byte
 * minimum), for the load bench/memory.sh measures, a million 11-byte keys
 * with a 16-byte value written once: the node is 69 bytes at level 1, an
 * 80-byte chunk (96 at levels 2-3, a quarter of the keys; 84 on average);
 * its hash bucket 8.4 (2^20 buckets); its log slot 8 while the change is in
 * the history (100,000 changes by default, so about 1 per key). About 94
 * bytes per key in all, where the layout with a separate 96-byte version
 * (holding a full kv_version_t) and a 64-byte key struct took 172; Redis
 * spends 113. Each further version of a key is a separate 34 + 16 + vlen
 * bytes plus its log slot. test_srv_kv prints the same figures for 3-byte
 * values as kv_stats() counts them.
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
 * of its key, the key is removed entirely; if it is a value and the newest
 * (and not the slot already), it is now the key's only version and moves
 * into the node's slot, out of a log that no longer holds it. Since each pop
 * frees what the previous pop of that key left behind, a pop frees at most
 * two versions (one older version, and a newest tombstone) and copies at
 * most one, which is what makes kv_compact_step() bounded. A partial step
 * leaves the point at the revision of the first entry not popped: every
 * invariant holds there.
 */
#include "kv.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
/* Smallest hash table: a small store stays in one cache-friendly array. */
#define KV_TAB_MIN 16
/* Old buckets moved per insert or removal during an incremental resize
 * (empty ones count a tenth each, so a step reads at most ten times as
 * many). Two per insert finish a doubling long before the next one. */
#define KV_REHASH_STEP 2

typedef struct kv_ver_s kv_ver_t;
typedef struct kv_key_s kv_key_t;

/* Version flags. */
enum {
    VF_DEL = 1,   /* a tombstone: no extras, no value */
    VF_FIRST = 2, /* version 1 with create_rev = mod_rev: neither is stored */
    VF_LEASE = 4, /* a lease id is stored in the extras */
    VF_SLOT = 8,  /* this header is a key node's slot */
    VF_LIVE = 16, /* (slot) it holds a version; dead, its vlen and flags keep its size */
};

/* A version's header, in a key node (the slot) or in a kv_ver_t. Only the
 * first HDR_USED bytes are used: what follows the header starts right
 * after `level`, in the struct's padding. */
typedef struct kv_vh_s {
    uint64_t mod_rev;
    uint32_t vlen;
    uint32_t klen;  /* the key's length */
    uint8_t flags;
    uint8_t level;  /* (node) tower height, 1..KV_LEVEL_MAX; 0 in a kv_ver_t */
} kv_vh_t;

#define HDR_USED (offsetof(kv_vh_t, level) + 1)

struct kv_key_s {
    kv_key_t *hnext; /* hash chain */
    kv_ver_t *newest; /* the newest separate version; NULL: the slot is the newest */
    kv_vh_t vh;      /* the slot, then tower, key bytes, slot extras and value */
};

struct kv_ver_s {
    kv_ver_t *older; /* the next older separate version; NULL: the slot if live, else none */
    kv_key_t *key;
    kv_vh_t vh;      /* then extras and value */
};

_Static_assert(offsetof(kv_key_t, vh) == offsetof(kv_ver_t, vh), "a header finds its container one way");
#define REST_OFF (offsetof(kv_key_t, vh) + HDR_USED) /* 34: where the bytes after a header start */

struct kv_s {
    kv_key_t **buckets;           /* hash table: mask + 1 chains */
    size_t mask, nkeys;
    kv_key_t **old;               /* during a resize: the previous array, old_mask + 1 chains */
    size_t old_mask, moved;       /* old buckets below moved are empty (moved over) */
    uint8_t sipkey[ORDO_SIPHASH_KEY_LEN];

    kv_key_t *head[KV_LEVEL_MAX]; /* skiplist head tower */
    int level;                    /* levels in use */
    uint64_t rng;                 /* xorshift64 state for tower heights */

    kv_vh_t **log;                /* ring of log_cap slots */
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
    size_t nversions;             /* live slots and separate versions */
    size_t bytes;                 /* estimated heap bytes of nodes and versions */
};

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

static uint64_t load_u64(const unsigned char *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

static void store_u64(unsigned char *p, uint64_t x) { memcpy(p, &x, sizeof x); }

/* ---- the layout: headers, nodes and versions --------------------------------------- */

/* Bytes of a version's extras, by its flags' low three bits (VF_DEL,
 * VF_FIRST, VF_LEASE): a table, since every read of a value and every
 * size computation asks. */
static const uint8_t extras_bytes[8] = {16, 0, 0, 0, 24, 8, 8, 8};
_Static_assert(VF_DEL == 1 && VF_FIRST == 2 && VF_LEASE == 4, "extras_bytes is indexed by these flags");

static size_t extras_size(uint8_t flags) { return extras_bytes[flags & 7]; }

/* Bytes after a version's header: extras and value. */
static size_t payload_size(const kv_vh_t *h) { return extras_size(h->flags) + h->vlen; }

static unsigned char *rest_of(const kv_vh_t *h) { return (unsigned char *)(uintptr_t)h + HDR_USED; }

static kv_key_t *node_of(const kv_vh_t *h)
{
    assert(h->flags & VF_SLOT);
    return (kv_key_t *)(void *)((char *)(uintptr_t)h - offsetof(kv_key_t, vh));
}

static kv_ver_t *ver_of(const kv_vh_t *h)
{
    assert(!(h->flags & VF_SLOT));
    return (kv_ver_t *)(void *)((char *)(uintptr_t)h - offsetof(kv_ver_t, vh));
}

static kv_key_t *key_of(const kv_vh_t *h) { return (h->flags & VF_SLOT) ? node_of(h) : ver_of(h)->key; }

static unsigned char *tower(const kv_key_t *k) { return rest_of(&k->vh); }

static const char *key_bytes(const kv_key_t *k)
{
    return (const char *)tower(k) + (size_t)k->vh.level * sizeof(kv_key_t *);
}

static unsigned char *payload_of(const kv_vh_t *h)
{
    if (h->flags & VF_SLOT)
        return (unsigned char *)(uintptr_t)key_bytes(node_of(h)) + h->klen;
    return rest_of(h);
}

/* Allocation sizes: never below the struct, whose tail the header's
 * padding overlaps. */
static size_t node_size(uint32_t klen, int level, size_t payload)
{
    size_t n = REST_OFF + (size_t)level * sizeof(kv_key_t *) + klen + payload;
    return n < sizeof(kv_key_t) ? sizeof(kv_key_t) : n;
}

static size_t ver_size(size_t payload)
{
    size_t n = REST_OFF + payload;
    return n < sizeof(kv_ver_t) ? sizeof(kv_ver_t) : n;
}

/* What a node counts toward kv->bytes: its allocation with a one-level
 * tower, plus the expected rest of the tower (1/3 of a pointer at p = 1/4).
 * Not the actual height: heights are drawn from a per-process seed, and the
 * figure must be the same after a restart replays the same records. */
static size_t node_cost(uint32_t klen, size_t payload)
{
    return alloc_cost(node_size(klen, 1, payload)) + sizeof(kv_key_t *) / 3;
}

/* The flags that store spec's fields (a kv_version_t used as input). */
static uint8_t flags_for(const kv_version_t *s)
{
    if (s->deleted)
        return VF_DEL;
    uint8_t f = (s->version == 1 && s->create_rev == s->mod_rev) ? VF_FIRST : 0;
    return f | (s->lease != 0 ? VF_LEASE : 0);
}

/* Write spec into header h (klen and, in a node, level already set).
 * Returns where the value went. */
static const char *vh_write(kv_vh_t *h, const kv_version_t *s, uint8_t flags)
{
    h->mod_rev = s->mod_rev;
    h->vlen = s->vlen;
    h->flags = flags;
    unsigned char *p = payload_of(h);
    if (!(flags & (VF_DEL | VF_FIRST))) {
        store_u64(p, s->create_rev);
        store_u64(p + 8, s->version);
        p += 16;
    }
    if (flags & VF_LEASE) {
        store_u64(p, s->lease);
        p += 8;
    }
    if (s->vlen)
        memcpy(p, s->value, s->vlen);
    return (const char *)p;
}

/* Build the public face of h into *out. */
static void vh_read(const kv_vh_t *h, kv_version_t *out)
{
    const kv_key_t *k = key_of(h);
    const unsigned char *p = payload_of(h);
    out->mod_rev = h->mod_rev;
    out->deleted = (h->flags & VF_DEL) != 0;
    if (h->flags & VF_DEL) {
        out->create_rev = out->version = 0;
    } else if (h->flags & VF_FIRST) {
        out->create_rev = h->mod_rev;
        out->version = 1;
    } else {
        out->create_rev = load_u64(p);
        out->version = load_u64(p + 8);
        p += 16;
    }
    out->lease = 0;
    if (h->flags & VF_LEASE) {
        out->lease = load_u64(p);
        p += 8;
    }
    out->vlen = h->vlen;
    out->value = (const char *)p; /* never NULL, even when empty */
    out->key = key_bytes(k);
    out->klen = k->vh.klen;
}

/* The key's newest version (every key in the table has one). */
static kv_vh_t *newest_of(const kv_key_t *k)
{
    if (k->newest != NULL)
        return &k->newest->vh;
    assert(k->vh.flags & VF_LIVE);
    return (kv_vh_t *)(uintptr_t)&k->vh;
}

/* The version just older than h in its key's chain, or NULL. */
static kv_vh_t *older_of(const kv_vh_t *h)
{
    if (h->flags & VF_SLOT)
        return NULL; /* the slot is the oldest */
    const kv_ver_t *v = ver_of(h);
    if (v->older != NULL)
        return &v->older->vh;
    return (v->key->vh.flags & VF_LIVE) ? &v->key->vh : NULL;
}

/* The newest version of k with mod_rev <= rev, or NULL. */
static const kv_vh_t *ver_at(const kv_key_t *k, uint64_t rev)
{
    const kv_vh_t *h = newest_of(k);
    while (h != NULL && h->mod_rev > rev)
        h = older_of(h);
    return h;
}

/* h's public face in *buf if it is a value; NULL for none or a tombstone. */
static const kv_version_t *live_or_null(const kv_vh_t *h, kv_version_t *buf)
{
    if (h == NULL || (h->flags & VF_DEL))
        return NULL;
    vh_read(h, buf);
    return buf;
}

/* ---- the hash table -------------------------------------------------------------- */

static uint64_t tab_hash(const kv_t *kv, const void *key, size_t klen)
{
    return ordo_siphash(kv->sipkey, key, klen);
}

static uint32_t load_u32(const unsigned char *p)
{
    uint32_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* Are the n bytes at a and b equal? Inline, in words, last word first:
 * a chain's keys of one length often share a prefix ("user:1234"), so a
 * key that differs tends to differ at the end, and the common match is
 * short enough that calling memcmp costs more than comparing. (A long key
 * costs a word compare per 8 bytes here, a fraction of hashing it.) */
static bool key_eq(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    if (n >= 8) {
        if (load_u64(x + n - 8) != load_u64(y + n - 8))
            return false;
        for (size_t i = 0; i + 8 < n; i += 8)
            if (load_u64(x + i) != load_u64(y + i))
                return false;
        return true;
    }
    if (n >= 4) /* two words that overlap when n < 8 */
        return load_u32(x + n - 4) == load_u32(y + n - 4) && load_u32(x) == load_u32(y);
    /* n <= 3: bytes 0, n / 2 and n - 1 are every byte */
    return n == 0 || (x[0] == y[0] && x[n / 2] == y[n / 2] && x[n - 1] == y[n - 1]);
}

/* The chain a key of this hash is in (see "Hash table" above). */
static kv_key_t **tab_head(const kv_t *kv, uint64_t hash)
{
    if (kv->old != NULL && (hash & kv->old_mask) >= kv->moved)
        return &kv->old[hash & kv->old_mask];
    return &kv->buckets[hash & kv->mask];
}

static kv_key_t *tab_find(const kv_t *kv, uint64_t hash, const void *key, size_t klen)
{
    for (kv_key_t *k = *tab_head(kv, hash); k != NULL; k = k->hnext)
        if (k->vh.klen == klen && key_eq(key_bytes(k), key, klen))
            return k;
    return NULL;
}

/* Move old buckets into the new array, `work` of them (an empty one counts
 * a tenth), or all that are left; ends the resize after the last. */
static void tab_rehash(kv_t *kv, size_t work)
{
    size_t budget = work >= SIZE_MAX / 10 ? SIZE_MAX : work * 10; /* in tenths of a bucket */
    while (kv->old != NULL && budget > 0) {
        kv_key_t *k = kv->old[kv->moved];
        kv->old[kv->moved] = NULL;
        size_t cost = k != NULL ? 10 : 1;
        budget = budget > cost ? budget - cost : 0;
        while (k != NULL) {
            kv_key_t *next = k->hnext;
            size_t b = tab_hash(kv, key_bytes(k), k->vh.klen) & kv->mask;
            k->hnext = kv->buckets[b];
            kv->buckets[b] = k;
            k = next;
        }
        if (kv->moved++ == kv->old_mask) {
            free(kv->old);
            kv->old = NULL;
            kv->moved = 0;
        }
    }
}

/* Start moving every node into nbuckets chains (finishing a resize under
 * way first); on allocation failure keep the array (the table still
 * works, only with longer chains). */
static void tab_resize(kv_t *kv, size_t nbuckets)
{
    tab_rehash(kv, SIZE_MAX);
    kv_key_t **nb = calloc(nbuckets, sizeof *nb);
    if (nb == NULL)
        return;
    kv->old = kv->buckets;
    kv->old_mask = kv->mask;
    kv->moved = 0;
    kv->buckets = nb;
    kv->mask = nbuckets - 1;
}

static void tab_insert(kv_t *kv, kv_key_t *k, uint64_t hash)
{
    kv_key_t **head = tab_head(kv, hash);
    k->hnext = *head;
    *head = k;
    if (++kv->nkeys > kv->mask + 1)
        tab_resize(kv, (kv->mask + 1) * 2);
    else
        tab_rehash(kv, KV_REHASH_STEP);
}

/* The link that points at the node at address old, in the chain of the
 * key node k (k may be old's reallocation: old is an address, compared but
 * never read). */
static kv_key_t **tab_link(const kv_t *kv, uintptr_t old, const kv_key_t *k)
{
    kv_key_t **pp = tab_head(kv, tab_hash(kv, key_bytes(k), k->vh.klen));
    while ((uintptr_t)*pp != old) {
        assert(*pp != NULL);
        pp = &(*pp)->hnext;
    }
    return pp;
}

static void tab_remove(kv_t *kv, kv_key_t *k)
{
    *tab_link(kv, (uintptr_t)k, k) = k->hnext;
    kv->nkeys--;
    size_t nb = kv->mask + 1;
    if (nb > KV_TAB_MIN && kv->nkeys < nb / 8)
        tab_resize(kv, nb / 2);
    else
        tab_rehash(kv, KV_REHASH_STEP);
}

/* ---- the ordered index -------------------------------------------------------------
 * A forward array is a tower (or the head): level l's link is the pointer
 * at byte 8 * l, unaligned in a node. */

static kv_key_t *fwd_get(const unsigned char *t, int l)
{
    kv_key_t *p;
    memcpy(&p, t + (size_t)l * sizeof p, sizeof p);
    return p;
}

static void fwd_set(unsigned char *t, int l, const kv_key_t *p)
{
    memcpy(t + (size_t)l * sizeof p, &p, sizeof p);
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

static int nodecmp(const kv_key_t *k, const void *key, size_t klen)
{
    return keycmp(key_bytes(k), k->vh.klen, key, klen);
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
 * >= key (the predecessor's tower, or the head). A link to the address
 * self (a node holding key that has moved; 0: none) stops the walk without
 * being read. */
static void index_find(kv_t *kv, const void *key, size_t klen, uintptr_t self,
                       unsigned char *update[KV_LEVEL_MAX])
{
    unsigned char *fwd = (unsigned char *)kv->head;
    for (int l = kv->level - 1; l >= 0; l--) {
        kv_key_t *n;
        while ((n = fwd_get(fwd, l)) != NULL && (uintptr_t)n != self && nodecmp(n, key, klen) < 0)
            fwd = tower(n);
        update[l] = fwd;
    }
}

static void index_insert(kv_t *kv, kv_key_t *k)
{
    unsigned char *update[KV_LEVEL_MAX];
    index_find(kv, key_bytes(k), k->vh.klen, 0, update);
    for (int l = kv->level; l < k->vh.level; l++)
        update[l] = (unsigned char *)kv->head;
    if (k->vh.level > kv->level)
        kv->level = k->vh.level;
    unsigned char *t = tower(k);
    for (int l = 0; l < k->vh.level; l++) {
        fwd_set(t, l, fwd_get(update[l], l));
        fwd_set(update[l], l, k);
    }
}

static bool pending_has(const kv_t *kv, uintptr_t old, const kv_key_t *k, size_t *pos);

static void index_remove(kv_t *kv, kv_key_t *k)
{
    size_t pos;
    if (pending_has(kv, (uintptr_t)k, k, &pos)) {
        kv->pending[pos] = NULL;
        return;
    }
    unsigned char *update[KV_LEVEL_MAX];
    index_find(kv, key_bytes(k), k->vh.klen, 0, update);
    unsigned char *t = tower(k);
    for (int l = 0; l < k->vh.level; l++) {
        assert(fwd_get(update[l], l) == k);
        fwd_set(update[l], l, fwd_get(t, l));
    }
    while (kv->level > 1 && kv->head[kv->level - 1] == NULL)
        kv->level--;
}

/* Point the index at k, the reallocation of the node at address old. */
static void index_relink(kv_t *kv, uintptr_t old, kv_key_t *k)
{
    size_t pos;
    if (pending_has(kv, old, k, &pos)) {
        kv->pending[pos] = k;
        return;
    }
    unsigned char *update[KV_LEVEL_MAX];
    index_find(kv, key_bytes(k), k->vh.klen, old, update);
    for (int l = 0; l < k->vh.level; l++) {
        assert((uintptr_t)fwd_get(update[l], l) == old);
        fwd_set(update[l], l, k);
    }
}

/* The first key in the index that is > key (strict) or >= key. */
static kv_key_t *index_seek(const kv_t *kv, const void *key, size_t klen, bool strict)
{
    const unsigned char *fwd = (const unsigned char *)kv->head;
    for (int l = kv->level - 1; l >= 0; l--) {
        kv_key_t *n;
        while ((n = fwd_get(fwd, l)) != NULL) {
            int c = nodecmp(n, key, klen);
            if (c > 0 || (c == 0 && !strict))
                break;
            fwd = tower(n);
        }
    }
    return fwd_get(fwd, 0);
}

static kv_key_t *index_next(const kv_key_t *k) { return fwd_get(tower(k), 0); }

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
    fwd_set(tower(k), 0, (kv_key_t *)(uintptr_t)kv->npending);
    kv->pending[kv->npending++] = k;
}

/* Is the key node k, which was at address old, waiting in the pending
 * array (at *pos)? An indexed key's tower[0] is a pointer (or NULL), never
 * a position whose slot holds the node itself. */
static bool pending_has(const kv_t *kv, uintptr_t old, const kv_key_t *k, size_t *pos)
{
    uintptr_t i = (uintptr_t)fwd_get(tower(k), 0);
    *pos = i;
    return kv->deferring && i < kv->npending && (uintptr_t)kv->pending[i] == old;
}

static int keyp_cmp(const void *a, const void *b)
{
    const kv_key_t *x = *(kv_key_t *const *)a, *y = *(kv_key_t *const *)b;
    return keycmp(key_bytes(x), x->vh.klen, key_bytes(y), y->vh.klen);
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
    unsigned char *update[KV_LEVEL_MAX];
    for (int l = 0; l < KV_LEVEL_MAX; l++)
        update[l] = (unsigned char *)kv->head;
    for (size_t i = 0; i < n; i++) {
        kv_key_t *k = kv->pending[i];
        unsigned char *t = tower(k);
        for (int l = 0; l < k->vh.level; l++) {
            /* update[l] precedes every key still to insert: walk on from it. */
            kv_key_t *next;
            while ((next = fwd_get(update[l], l)) != NULL && keyp_cmp(&next, &k) < 0)
                update[l] = tower(next);
            fwd_set(t, l, next);
            fwd_set(update[l], l, k);
            update[l] = t;
        }
        if (k->vh.level > kv->level)
            kv->level = k->vh.level;
    }
    free(kv->pending);
    kv->pending = NULL;
    kv->npending = kv->pending_cap = 0;
    kv->deferring = false;
}

/* ---- key nodes ------------------------------------------------------------------- */

static kv_key_t *key_find(const kv_t *kv, const void *key, size_t klen)
{
    return tab_find(kv, tab_hash(kv, key, klen), key, klen);
}

/* A new key whose first version, spec, goes in its slot; hash is
 * tab_hash() of it (the caller's failed lookup computed it already).
 * *value is where the value went. */
static kv_key_t *key_create(kv_t *kv, const void *key, size_t klen, uint64_t hash, const kv_version_t *spec,
                            const char **value)
{
    int level = random_level(kv);
    uint8_t flags = flags_for(spec) | VF_SLOT | VF_LIVE;
    size_t payload = extras_size(flags) + spec->vlen;
    kv_key_t *k = kv_xmalloc(node_size((uint32_t)klen, level, payload));
    k->newest = NULL;
    k->vh.klen = (uint32_t)klen;
    k->vh.level = (uint8_t)level;
    if (klen)
        memcpy((char *)(uintptr_t)key_bytes(k), key, klen);
    *value = vh_write(&k->vh, spec, flags);
    tab_insert(kv, k, hash);
    if (kv->deferring)
        pending_add(kv, k);
    else
        index_insert(kv, k);
    kv->bytes += node_cost((uint32_t)klen, payload);
    kv->nversions++;
    return k;
}

/* Unlink k from the table and the index and free it, with its slot. */
static void key_free(kv_t *kv, kv_key_t *k)
{
    assert(k->newest == NULL);
    tab_remove(kv, k);
    index_remove(kv, k);
    if (k->vh.flags & VF_LIVE)
        kv->nversions--;
    kv->bytes -= node_cost(k->vh.klen, payload_size(&k->vh));
    free(k);
}

/* Give k's slot room for exactly payload bytes; returns the node, which may
 * have moved (its hash link and index links then follow it). */
static kv_key_t *key_resize(kv_t *kv, kv_key_t *k, size_t payload)
{
    size_t old = payload_size(&k->vh);
    if (payload == old)
        return k;
    uintptr_t was = (uintptr_t)k;
    kv_key_t *n = realloc(k, node_size(k->vh.klen, k->vh.level, payload));
    if (n == NULL) {
        fprintf(stderr, "ordod: out of memory reallocating a key (kv)\n");
        abort();
    }
    kv->bytes += node_cost(n->vh.klen, payload) - node_cost(n->vh.klen, old);
    if ((uintptr_t)n != was) {
        *tab_link(kv, was, n) = n;
        index_relink(kv, was, n);
    }
    return n;
}

/* ---- separate versions ------------------------------------------------------------ */

/* Spare versions. In steady state every put allocates a version and the
 * compaction step after it frees one (the version a history ago), mostly of
 * the same size. ver_free keeps up to KV_SPARE_MAX small freed versions and
 * ver_get reuses one whose allocation is at least as large (ver_size of its
 * last payload, an underestimate of what was malloc'd) and of the same
 * malloc size class, so memory and its accounting are what malloc would
 * give; this saves a malloc and a free per write. Spares are not counted in
 * bytes or nversions; under ASan they are poisoned while they wait. */
static kv_ver_t *ver_get(kv_t *kv, size_t need)
{
    size_t cost = alloc_cost(need);
    for (int i = kv->nspare - 1; i >= 0; i--) {
        kv_ver_t *v = kv->spare[i];
        size_t have = ver_size(payload_size(&v->vh)); /* readable: vlen and flags are not poisoned */
        if (have >= need && alloc_cost(have) == cost) {
            kv->spare[i] = kv->spare[--kv->nspare];
            KV_UNPOISON(v, have);
            return v;
        }
    }
    return kv_xmalloc(need);
}

static void ver_free(kv_t *kv, kv_ver_t *v)
{
    size_t size = ver_size(payload_size(&v->vh));
    kv->bytes -= alloc_cost(size);
    kv->nversions--;
    if (size <= KV_SPARE_BYTES_MAX && kv->nspare < KV_SPARE_MAX) {
        kv->spare[kv->nspare++] = v;
        /* Poison all but vlen, klen and flags, which ver_get reads. */
        size_t keep_from = offsetof(kv_ver_t, vh.vlen), keep_to = offsetof(kv_ver_t, vh.flags) + 1;
        KV_POISON(v, keep_from);
        KV_POISON((char *)v + keep_to, size - keep_to);
        return;
    }
    free(v);
}

/* ---- the change log ------------------------------------------------------------- */

static void log_resize(kv_t *kv, size_t cap)
{
    assert(cap >= kv->log_len && (cap & (cap - 1)) == 0);
    kv_vh_t **n = kv_xmalloc(cap * sizeof *n);
    for (size_t i = 0; i < kv->log_len; i++)
        n[i] = kv->log[(kv->log_head + i) & (kv->log_cap - 1)];
    free(kv->log);
    kv->log = n;
    kv->log_cap = cap;
    kv->log_head = 0;
}

static kv_vh_t *log_at(const kv_t *kv, size_t i)
{
    assert(i < kv->log_len);
    return kv->log[(kv->log_head + i) & (kv->log_cap - 1)];
}

/* The oldest change's revision, if the log is not empty. */
static uint64_t log_front_rev(const kv_t *kv)
{
    assert(kv->log_len > 0);
    return kv->log[kv->log_head]->mod_rev;
}

/* What a change counts against the history's byte bound: its key and
 * value bytes. */
static size_t change_bytes(const kv_vh_t *h) { return (size_t)h->klen + h->vlen; }

static void log_push(kv_t *kv, kv_vh_t *h)
{
    if (kv->log_len == kv->log_cap)
        log_resize(kv, kv->log_cap * 2);
    kv->log[(kv->log_head + kv->log_len) & (kv->log_cap - 1)] = h;
    kv->log_len++;
    kv->log_bytes += change_bytes(h);
}

static kv_vh_t *log_pop(kv_t *kv)
{
    kv_vh_t *h = kv->log[kv->log_head];
    kv->log_head = (kv->log_head + 1) & (kv->log_cap - 1);
    kv->log_len--;
    kv->log_base++;
    assert(kv->log_bytes >= change_bytes(h));
    kv->log_bytes -= change_bytes(h);
    return h;
}

/* Index (relative to the head) of the first entry with mod_rev > rev. */
static size_t log_search(const kv_t *kv, uint64_t rev)
{
    size_t lo = 0, hi = kv->log_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log_at(kv, mid)->mod_rev <= rev)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The change that made h: its version, and a reference to the live one it
 * replaced (the next older in its chain, if not a tombstone). */
static void change_of(const kv_vh_t *h, kv_change_t *out)
{
    vh_read(h, &out->cur);
    const kv_vh_t *o = older_of(h);
    out->prev_ref = o != NULL && !(o->flags & VF_DEL) ? o : NULL;
}

const kv_version_t *kv_change_prev(const kv_change_t *ch, kv_version_t *buf)
{
    if (ch->prev_ref == NULL)
        return NULL;
    vh_read(ch->prev_ref, buf);
    return buf;
}

/* ---- create, destroy, read ------------------------------------------------------ */

kv_t *kv_create(void)
{
    kv_t *kv = calloc(1, sizeof *kv);
    if (kv == NULL)
        goto fail;
    kv->buckets = calloc(KV_TAB_MIN, sizeof *kv->buckets);
    if (kv->buckets == NULL)
        goto fail_kv;
    kv->mask = KV_TAB_MIN - 1;
    kv->log = malloc(KV_LOG_MIN * sizeof *kv->log);
    if (kv->log == NULL)
        goto fail_tab;
    kv->log_cap = KV_LOG_MIN;
    kv->level = 1;
    ordo_random_key(kv->sipkey);
    uint8_t seed[ORDO_SIPHASH_KEY_LEN];
    ordo_random_key(seed);
    memcpy(&kv->rng, seed, sizeof kv->rng);
    kv->rng |= 1; /* xorshift must not start at 0 */
    kv->oldest_rev = 1;
    return kv;

fail_tab:
    free(kv->buckets);
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
        kv_key_t *next = index_next(k);
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
        KV_UNPOISON(kv->spare[i], ver_size(payload_size(&kv->spare[i]->vh)));
        free(kv->spare[i]);
    }
    free(kv->log);
    free(kv->buckets);
    free(kv->old);
    free(kv);
}

const kv_version_t *kv_get(const kv_t *kv, const void *key, size_t klen, kv_version_t *buf)
{
    const kv_key_t *k = key_find(kv, key, klen);
    return k != NULL ? live_or_null(newest_of(k), buf) : NULL;
}

const char *kv_get_value(const kv_t *kv, const void *key, size_t klen, size_t *vlen)
{
    const kv_key_t *k = key_find(kv, key, klen);
    if (k == NULL)
        return NULL;
    const kv_vh_t *h = newest_of(k);
    if (h->flags & VF_DEL)
        return NULL;
    *vlen = h->vlen;
    return (const char *)payload_of(h) + extras_size(h->flags);
}

uint64_t kv_last_change(const kv_t *kv, const void *key, size_t klen)
{
    const kv_key_t *k = key_find(kv, key, klen);
    return k != NULL ? newest_of(k)->mod_rev : 0;
}

int kv_get_at(const kv_t *kv, const void *key, size_t klen, uint64_t rev, kv_version_t *buf,
              const kv_version_t **out)
{
    *out = NULL;
    if (rev < kv->oldest_rev)
        return KV_ECOMPACTED;
    const kv_key_t *k = key_find(kv, key, klen);
    if (k != NULL)
        *out = live_or_null(ver_at(k, rev), buf);
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

/* Apply a put or (spec->deleted) a delete of key at spec->mod_rev: make
 * spec, its create_rev and version filled in here, the key's newest
 * version, creating the key if it has none, and log it. spec is the
 * caller's change_out->cur when it wants the change, so the change is
 * built in place from what was written and nothing is decoded; its key
 * and value pointers are set here. Returns 1, 0 for a delete of an absent
 * key (nothing changes), or KV_EREV. */
static int mutate(kv_t *kv, const void *key, size_t klen, kv_version_t *spec, kv_change_t *out)
{
    if (spec->mod_rev <= kv->last_rev)
        return KV_EREV;
    assert(klen <= UINT32_MAX);
    uint64_t hash = tab_hash(kv, key, klen);
    kv_key_t *k = tab_find(kv, hash, key, klen);
    const kv_vh_t *prev = k != NULL ? newest_of(k) : NULL;
    bool had = prev != NULL && !(prev->flags & VF_DEL);
    uint8_t flags = spec->lease != 0 ? VF_LEASE : 0; /* flags_for(spec), known here */
    if (spec->deleted) {
        if (!had)
            return 0;
        kv->live--;
        spec->create_rev = spec->version = 0;
        flags = VF_DEL;
    } else if (had && (prev->flags & VF_FIRST)) {
        spec->create_rev = prev->mod_rev;
        spec->version = 2;
    } else if (had) {
        const unsigned char *p = payload_of(prev);
        spec->create_rev = load_u64(p);
        spec->version = load_u64(p + 8) + 1;
    } else {
        kv->live++;
        spec->create_rev = spec->mod_rev;
        spec->version = 1;
        flags |= VF_FIRST;
    }
    const char *value;
    kv_vh_t *h;
    if (k == NULL) {
        k = key_create(kv, key, klen, hash, spec, &value);
        h = &k->vh;
    } else {
        size_t size = ver_size(extras_size(flags) + spec->vlen);
        kv_ver_t *v = ver_get(kv, size);
        v->older = k->newest;
        v->key = k;
        v->vh.klen = k->vh.klen;
        v->vh.level = 0;
        value = vh_write(&v->vh, spec, flags);
        k->newest = v;
        kv->nversions++;
        kv->bytes += alloc_cost(size);
        h = &v->vh;
    }
    log_push(kv, h);
    kv->last_rev = spec->mod_rev;
    spec->value = value;
    spec->key = key_bytes(k);
    spec->klen = (uint32_t)klen;
    if (out != NULL)
        out->prev_ref = had ? prev : NULL;
    return 1;
}

/* ---- loading a snapshot ----------------------------------------------------------
 * A snapshot holds the live keys as of its revision R. They are loaded as
 * base versions: the key's only version, in its slot, but not logged, since
 * their mod_revs are <= R and the compaction point becomes R + 1 (I1, I2). */

int kv_load(kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen, uint64_t create_rev,
            uint64_t mod_rev, uint64_t version, uint64_t lease)
{
    uint64_t h = tab_hash(kv, key, klen);
    if (kv->log_len != 0 || mod_rev == 0 || create_rev > mod_rev || version == 0 ||
        tab_find(kv, h, key, klen) != NULL)
        return KV_EREV;
    assert(klen <= UINT32_MAX && vlen <= UINT32_MAX);
    if (mod_rev > kv->last_rev)
        kv->last_rev = mod_rev;
    kv_version_t spec = {.mod_rev = mod_rev, .create_rev = create_rev, .version = version, .lease = lease,
                         .vlen = (uint32_t)vlen, .value = val};
    const char *value;
    key_create(kv, key, klen, h, &spec, &value);
    kv->live++;
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
static const kv_vh_t *base_of(const kv_t *kv, const kv_key_t *k)
{
    const kv_vh_t *h = newest_of(k);
    while (h != NULL && h->mod_rev >= kv->oldest_rev)
        h = older_of(h);
    return h != NULL && !(h->flags & VF_DEL) ? h : NULL;
}

long kv_base_step(const kv_t *kv, const void *after, size_t alen, bool have_after, size_t limit, kv_base_cb cb,
                  void *arg)
{
    assert(!kv->deferring);
    const kv_key_t *k = have_after ? index_seek(kv, after, alen, true) : kv->head[0];
    long n = 0;
    for (; k != NULL && (size_t)n < limit; k = index_next(k), n++) {
        const kv_vh_t *b = base_of(kv, k);
        kv_version_t v;
        if (b != NULL)
            vh_read(b, &v);
        cb(arg, key_bytes(k), k->vh.klen, b != NULL ? &v : NULL);
    }
    return n;
}

int kv_put(kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen,
           uint64_t lease, uint64_t rev, kv_change_t *change_out)
{
    assert(vlen <= UINT32_MAX);
    kv_version_t local, *spec = change_out != NULL ? &change_out->cur : &local;
    *spec = (kv_version_t){.mod_rev = rev, .lease = lease, .vlen = (uint32_t)vlen, .value = val};
    return mutate(kv, key, klen, spec, change_out) < 0 ? KV_EREV : KV_OK;
}

int kv_del(kv_t *kv, const void *key, size_t klen, uint64_t rev, kv_change_t *change_out)
{
    kv_version_t local, *spec = change_out != NULL ? &change_out->cur : &local;
    *spec = (kv_version_t){.mod_rev = rev, .deleted = true, .value = ""};
    return mutate(kv, key, klen, spec, change_out);
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
    const kv_key_t *k;
    if (after != NULL && keycmp(after, alen, prefix, plen) >= 0)
        k = index_seek(kv, after, alen, true);
    else
        k = index_seek(kv, prefix, plen, false);
    long n = 0;
    for (; k != NULL; k = index_next(k)) {
        if (k->vh.klen < plen || (plen && memcmp(key_bytes(k), prefix, plen) != 0))
            break;
        kv_version_t buf;
        const kv_version_t *v = live_or_null(at_rev ? ver_at(k, at_rev) : newest_of(k), &buf);
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
static size_t pop_cost(const kv_vh_t *h)
{
    size_t n = 0;
    for (const kv_vh_t *o = older_of(h); o != NULL; o = older_of(o))
        n++;
    if ((h->flags & VF_DEL) && newest_of(key_of(h)) == h)
        n++;
    return n;
}

/* Compaction reads each popped version, the one before it in its chain and
 * its key node. They were written a whole history ago (history-revs key
 * changes), so they are long out of cache, and each write pays for them.
 * The log says which versions come next: fetch the version
 * KV_PREFETCH_AHEAD entries on, and the older version and the key node of
 * the one half as far (whose own fetch was issued a few pops before), so
 * all are in cache when their turn comes. A hint only. */
#define KV_PREFETCH_AHEAD 8

static void compact_prefetch(const kv_t *kv)
{
    if (kv->log_len <= KV_PREFETCH_AHEAD)
        return;
    __builtin_prefetch(log_at(kv, KV_PREFETCH_AHEAD));
    const kv_vh_t *mid = log_at(kv, KV_PREFETCH_AHEAD / 2);
    if (!(mid->flags & VF_SLOT)) {
        const kv_ver_t *v = ver_of(mid);
        if (v->older != NULL)
            __builtin_prefetch(v->older);
        __builtin_prefetch(v->key);
    }
}

/* Move v, the last version of its key, into the key's (dead) slot. */
static void slot_fill(kv_t *kv, kv_ver_t *v)
{
    kv_key_t *k = v->key;
    assert(k->newest == v && v->older == NULL && !(k->vh.flags & VF_LIVE) && !(v->vh.flags & VF_DEL));
    size_t payload = payload_size(&v->vh);
    k = key_resize(kv, k, payload);
    k->vh.mod_rev = v->vh.mod_rev;
    k->vh.vlen = v->vh.vlen;
    k->vh.flags = (uint8_t)(v->vh.flags | VF_SLOT | VF_LIVE);
    if (payload)
        memcpy(payload_of(&k->vh), payload_of(&v->vh), payload);
    k->newest = NULL;
    ver_free(kv, v);
    kv->nversions++; /* the version lives on in the slot */
}

/* Pop the first log entry and free what it makes unreachable. Returns
 * the versions freed, as pop_cost() counted them. */
static size_t pop_one(kv_t *kv)
{
    kv_vh_t *h = log_pop(kv);
    if (h->flags & VF_SLOT)
        return 0; /* the oldest version: nothing older to free, never a tombstone */
    kv_ver_t *v = ver_of(h);
    kv_key_t *k = v->key;
    kv_ver_t *o = v->older;
    size_t freed = 0;
    v->older = NULL;
    while (o != NULL) {
        kv_ver_t *next = o->older;
        ver_free(kv, o);
        freed++;
        o = next;
    }
    if (k->vh.flags & VF_LIVE) {
        k->vh.flags &= (uint8_t)~VF_LIVE; /* its vlen and flags still give its size */
        kv->nversions--;
        freed++;
    }
    if (k->newest != v)
        return freed;
    if (h->flags & VF_DEL) {
        k->newest = NULL;
        ver_free(kv, v);
        key_free(kv, k);
        freed++;
    } else {
        slot_fill(kv, v);
    }
    return freed;
}

/* What the log may keep: at most `changes` changes and, unless `bytes`
 * is 0, at most `bytes` of their keys and values. {0, 0} keeps nothing. */
typedef struct trim_bounds_s {
    size_t changes, bytes;
} trim_bounds_t;

static bool over_bounds(const kv_t *kv, const trim_bounds_t *b)
{
    return kv->log_len > b->changes || (b->bytes != 0 && kv->log_bytes > b->bytes);
}

/* Pop first entries while the log is over the bounds b and their revision
 * is below rev, freeing at most about max_versions versions (at least one
 * entry is popped if any may be; an entry counts its versions freed, at
 * least 1). Returns true if it stopped for the bounds or rev, false if for
 * the work bound. The common step pops one entry, so pop_cost() is only
 * asked from the second on. */
static bool pop_while(kv_t *kv, uint64_t rev, const trim_bounds_t *b, size_t max_versions)
{
    size_t work = 0;
    bool popped = false, bounded = false;
    while (kv->log_len > 0 && log_front_rev(kv) < rev && over_bounds(kv, b)) {
        compact_prefetch(kv);
        if (popped) {
            size_t cost = pop_cost(log_at(kv, 0));
            if (work + (cost ? cost : 1) > max_versions) {
                bounded = true;
                break;
            }
        }
        size_t freed = pop_one(kv);
        work += freed ? freed : 1;
        popped = true;
    }
    if (!popped)
        return !bounded;
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
    pop_while(kv, rev, &(trim_bounds_t){0, 0}, max_versions);
    bool done = kv->log_len == 0 || log_front_rev(kv) >= rev;
    kv->oldest_rev = done ? rev : log_front_rev(kv);
    assert(kv->oldest_rev <= rev);
    return done ? 1 : 0;
}

int kv_trim_step(kv_t *kv, size_t keep_changes, size_t keep_bytes, uint64_t below_rev, size_t max_versions)
{
    trim_bounds_t b = {keep_changes, keep_bytes};
    if (!over_bounds(kv, &b))
        return 1;
    bool stopped = pop_while(kv, below_rev, &b, max_versions);
    /* The point moves to the first change kept (all before it are gone),
     * or past the last revision when none is kept. */
    uint64_t point = kv->log_len > 0 ? log_front_rev(kv) : kv->last_rev + 1;
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
    const kv_vh_t *h = log_at(kv, i);
    change_of(h, out);
    cur->pos++;
    cur->after_rev = h->mod_rev;
    return 1;
}

void kv_stats(const kv_t *kv, kv_stats_t *out)
{
    out->keys = kv->live;
    out->versions = kv->nversions;
    out->log_entries = kv->log_len;
    out->log_bytes = kv->log_bytes;
    out->bytes = sizeof *kv + alloc_cost(kv->log_cap * sizeof *kv->log) +
                 alloc_cost((kv->mask + 1) * sizeof *kv->buckets) +
                 (kv->old != NULL ? alloc_cost((kv->old_mask + 1) * sizeof *kv->old) : 0) + kv->bytes;
    out->rehashing = kv->old != NULL;
}
