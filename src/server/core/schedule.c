/*
 * schedule.c -- named schedules; see schedule.h for the contract.
 *
 * A set is a hash table of schedules by name and a min-heap of those with
 * a next tick, by (next_ms, name), so the writer finds the next due tick
 * in O(1) and a tick moves its schedule in O(log n). Each schedule is one
 * allocation: the struct, then its name, queue, key, cron and payload
 * bytes.
 *
 * Cron is kept parsed as bit masks (minute 0-59, hour 0-23, day 1-31,
 * month 1-12, weekday 0-6), and the next tick is found by walking the
 * calendar forward a month, a day, an hour or a minute at a time,
 * whichever field fails first; a search ends after
 * SCHED_CRON_SEARCH_YEARS years (an expression like 30 February never
 * matches). Calendar arithmetic is the proleptic Gregorian calendar on
 * days since 1970-01-01 (civil_from_days() and days_from_civil(),
 * integer-only), so no time zone or library enters a tick's time.
 */
#include "schedule.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "base/heap.h"
#include "base/htab.h"

/* A cron search gives up after this many years: every valid expression
 * matches within four (29 February) and five covers it with room. */
#define SCHED_CRON_SEARCH_YEARS 5
#define MS_PER_MIN 60000ull
#define MIN_PER_DAY 1440ull

typedef struct cron_s {
    uint64_t minutes;         /* bit m: minute m */
    uint32_t hours, days;     /* bit h; bit d (1..31) */
    uint16_t months;          /* bit m (1..12) */
    uint8_t weekdays;         /* bit w (0..6, Sunday 0) */
    bool days_any, weekdays_any;
} cron_t;

typedef struct sched_s {
    ordo_hnode_t hnode;       /* in the set, by name */
    ordo_heap_node_t hn;      /* in the due heap iff next_ms > 0 */
    uint64_t next_ms, pushed, skipped;
    uint64_t every_ms, start_ms;
    uint8_t missed;
    cron_t cron;              /* if cron_len > 0 */
    uint32_t nlen, qlen, klen, cron_len, plen;
    char bytes[];             /* name | queue | key | cron | payload */
} sched_t;

struct sched_set_s {
    ordo_htab_t byname;
    ordo_heap_t due;
};

#define SCHED_OF(n) ((sched_t *)(void *)((char *)(n) - offsetof(sched_t, hn)))

static const char *s_name(const sched_t *x) { return x->bytes; }
static const char *s_queue(const sched_t *x) { return x->bytes + x->nlen; }
static const char *s_key(const sched_t *x) { return s_queue(x) + x->qlen; }
static const char *s_cron(const sched_t *x) { return s_key(x) + x->klen; }
static const char *s_payload(const sched_t *x) { return s_cron(x) + x->cron_len; }

/* ---- the calendar -------------------------------------------------------------- */

/* Days since 1970-01-01 of y-m-d, and back (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* ---- cron ----------------------------------------------------------------------- */

/* Parse an unsigned number at *p (< end); false if there is none. */
static bool num(const char **p, const char *end, unsigned *out)
{
    const char *q = *p;
    unsigned v = 0;
    while (q < end && *q >= '0' && *q <= '9' && v < 1000)
        v = v * 10 + (unsigned)(*q++ - '0');
    if (q == *p)
        return false;
    *p = q;
    *out = v;
    return true;
}

/* One field (s..end): its bits within lo..hi into *bits; *any if `*`. */
static bool cron_field(const char *s, const char *end, unsigned lo, unsigned hi, uint64_t *bits, bool *any)
{
    *bits = 0;
    *any = end - s == 1 && *s == '*';
    while (s < end) {
        const char *item_end = memchr(s, ',', (size_t)(end - s));
        if (item_end == NULL)
            item_end = end;
        unsigned a = lo, b = hi, step = 1;
        const char *p = s;
        if (p < item_end && *p == '*') {
            p++;
        } else {
            if (!num(&p, item_end, &a))
                return false;
            b = a;
            if (p < item_end && *p == '-') {
                p++;
                if (!num(&p, item_end, &b))
                    return false;
            }
        }
        if (p < item_end && *p == '/') {
            p++;
            if (!num(&p, item_end, &step) || step == 0)
                return false;
            if (s[0] != '*' && a == b)
                b = hi; /* "a/n": from a to the end, as cron reads it */
        }
        if (p != item_end || a < lo || b > hi || a > b)
            return false;
        for (unsigned v = a; v <= b; v += step)
            *bits |= 1ull << v;
        s = item_end < end ? item_end + 1 : end;
        if (item_end < end && s == end)
            return false; /* a trailing comma */
    }
    return *bits != 0;
}

static bool cron_parse(const char *s, size_t n, cron_t *c)
{
    static const unsigned lo[5] = {0, 0, 1, 1, 0}, hi[5] = {59, 23, 31, 12, 7};
    uint64_t bits[5];
    bool any[5];
    const char *p = s, *end = s + n;
    for (int f = 0; f < 5; f++) {
        while (p < end && *p == ' ')
            p++;
        const char *q = p;
        while (q < end && *q != ' ')
            q++;
        if (q == p || !cron_field(p, q, lo[f], hi[f], &bits[f], &any[f]))
            return false;
        p = q;
    }
    while (p < end && *p == ' ')
        p++;
    if (p != end)
        return false;
    c->minutes = bits[0];
    c->hours = (uint32_t)bits[1];
    c->days = (uint32_t)bits[2];
    c->months = (uint16_t)bits[3];
    c->weekdays = (uint8_t)((bits[4] | bits[4] >> 7) & 0x7f); /* 7 is Sunday too */
    c->days_any = any[2];
    c->weekdays_any = any[4];
    return true;
}

static bool cron_day_ok(const cron_t *c, unsigned day, unsigned weekday)
{
    bool d = (c->days >> day) & 1, w = (c->weekdays >> weekday) & 1;
    if (c->days_any || c->weekdays_any)
        return d && w; /* the unrestricted one is all ones */
    return d || w;
}

/* The first minute boundary strictly after t_ms that c matches, or 0. */
static uint64_t cron_next(const cron_t *c, uint64_t t_ms)
{
    uint64_t min = t_ms / MS_PER_MIN + 1, limit = min + SCHED_CRON_SEARCH_YEARS * 366ull * MIN_PER_DAY;
    while (min < limit) {
        int64_t day = (int64_t)(min / MIN_PER_DAY), y;
        unsigned mo, d, h = (unsigned)(min % MIN_PER_DAY / 60), mi = (unsigned)(min % 60);
        civil_from_days(day, &y, &mo, &d);
        if (!((c->months >> mo) & 1)) { /* to the first day of the next month */
            int64_t ny = mo == 12 ? y + 1 : y;
            unsigned nm = mo == 12 ? 1 : mo + 1;
            min = (uint64_t)days_from_civil(ny, nm, 1) * MIN_PER_DAY;
            continue;
        }
        unsigned weekday = (unsigned)((day % 7 + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
        if (!cron_day_ok(c, d, weekday)) {
            min = (uint64_t)(day + 1) * MIN_PER_DAY;
            continue;
        }
        if (!((c->hours >> h) & 1)) {
            min = (min / 60 + 1) * 60;
            continue;
        }
        if (!((c->minutes >> mi) & 1)) {
            min++;
            continue;
        }
        return min * MS_PER_MIN;
    }
    return 0;
}

const char *sched_spec_valid(const sched_spec_t *spec)
{
    cron_t c;
    if ((spec->every_ms > 0) == (spec->cron != NULL))
        return "a schedule has EVERY or CRON, one of them";
    if (spec->missed > SCHED_MISSED_SKIP)
        return "MISSED is fire or skip";
    if (spec->cron != NULL)
        return spec->cron_len <= SCHED_CRON_BYTES_MAX && cron_parse(spec->cron, spec->cron_len, &c)
                   ? NULL
                   : "CRON takes five fields (minute hour day month weekday), each *, n, a-b, */n, a-b/n "
                     "or a list of them";
    if (spec->every_ms < SCHED_EVERY_MS_MIN)
        return "EVERY must be at least 10 ms";
    return NULL;
}

static uint64_t interval_next(uint64_t every, uint64_t start, uint64_t t_ms)
{
    if (t_ms < start)
        return start; /* the first tick is the start itself */
    return start + ((t_ms - start) / every + 1) * every;
}

uint64_t sched_next_after(const sched_spec_t *spec, uint64_t t_ms)
{
    if (spec->cron == NULL)
        return interval_next(spec->every_ms, spec->start_ms, t_ms);
    cron_t c;
    if (!cron_parse(spec->cron, spec->cron_len, &c))
        return 0;
    return cron_next(&c, t_ms);
}

static uint64_t next_of(const sched_t *x, uint64_t t_ms)
{
    return x->cron_len > 0 ? cron_next(&x->cron, t_ms) : interval_next(x->every_ms, x->start_ms, t_ms);
}

/* ---- the set -------------------------------------------------------------------- */

static bool name_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const sched_t *x = (const sched_t *)n;
    return x->nlen == len && memcmp(s_name(x), key, len) == 0;
}

static bool due_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const sched_t *x = SCHED_OF(a), *y = SCHED_OF(b);
    if (x->next_ms != y->next_ms)
        return x->next_ms < y->next_ms;
    size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
    int c = memcmp(s_name(x), s_name(y), n);
    return c != 0 ? c < 0 : x->nlen < y->nlen;
}

sched_set_t *sched_set_create(void)
{
    sched_set_t *s = ordo_xcalloc(1, sizeof *s);
    if (ordo_htab_init(&s->byname, name_eq) != 0)
        abort();
    ordo_heap_init(&s->due, due_less, 16, ORDO_HEAP_SHRINK);
    return s;
}

static void free_cb(ordo_hnode_t *n, void *arg)
{
    sched_set_t *s = arg;
    ordo_htab_remove(&s->byname, n);
    free(n);
}

void sched_set_destroy(sched_set_t *s)
{
    if (s == NULL)
        return;
    ordo_htab_foreach(&s->byname, free_cb, s);
    ordo_htab_destroy(&s->byname);
    ordo_heap_destroy(&s->due);
    free(s);
}

size_t sched_count(const sched_set_t *s) { return s->byname.count; }

static sched_t *find(const sched_set_t *s, const void *name, size_t nlen)
{
    return (sched_t *)ordo_htab_find(&s->byname, ordo_htab_hash(&s->byname, name, nlen), name, nlen);
}

/* Set x's next tick, keeping the due heap (x in it iff next_ms > 0). */
static void set_next(sched_set_t *s, sched_t *x, uint64_t next_ms)
{
    bool in = ordo_heap_linked(&x->hn);
    x->next_ms = next_ms;
    if (next_ms == 0 && in)
        ordo_heap_remove(&s->due, &x->hn);
    else if (next_ms != 0 && in)
        ordo_heap_update(&s->due, &x->hn);
    else if (next_ms != 0)
        ordo_heap_xpush(&s->due, &x->hn);
}

static void fill(const sched_t *x, sched_view_t *v)
{
    *v = (sched_view_t){.name = s_name(x), .nlen = x->nlen, .queue = s_queue(x), .qlen = x->qlen,
                        .key = s_key(x), .klen = x->klen, .payload = s_payload(x), .plen = x->plen,
                        .next_ms = x->next_ms, .pushed = x->pushed, .skipped = x->skipped};
    v->spec = (sched_spec_t){.every_ms = x->every_ms, .start_ms = x->start_ms, .missed = x->missed,
                             .cron = x->cron_len ? s_cron(x) : NULL, .cron_len = x->cron_len};
}

static sched_t *put(sched_set_t *s, const sched_view_t *v)
{
    assert(sched_spec_valid(&v->spec) == NULL);
    sched_del(s, v->name, v->nlen);
    size_t n = v->nlen + v->qlen + v->klen + v->spec.cron_len + v->plen;
    sched_t *x = ordo_xcalloc(1, sizeof *x + n);
    x->nlen = (uint32_t)v->nlen;
    x->qlen = (uint32_t)v->qlen;
    x->klen = (uint32_t)v->klen;
    x->cron_len = (uint32_t)(v->spec.cron ? v->spec.cron_len : 0);
    x->plen = (uint32_t)v->plen;
    char *p = x->bytes;
    const struct { const void *b; size_t n; } parts[] = {{v->name, v->nlen}, {v->queue, v->qlen}, {v->key, v->klen},
                                                         {v->spec.cron, x->cron_len}, {v->payload, v->plen}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (parts[i].n)
            memcpy(p, parts[i].b, parts[i].n);
        p += parts[i].n;
    }
    x->every_ms = v->spec.every_ms;
    x->start_ms = v->spec.start_ms;
    x->missed = v->spec.missed;
    if (x->cron_len > 0) {
        bool ok = cron_parse(s_cron(x), x->cron_len, &x->cron);
        assert(ok); /* sched_spec_valid() said so */
        (void)ok;
    }
    ordo_heap_node_init(&x->hn);
    ordo_htab_insert(&s->byname, &x->hnode, ordo_htab_hash(&s->byname, v->name, v->nlen));
    return x;
}

void sched_add(sched_set_t *s, const sched_view_t *v, uint64_t now_ms)
{
    sched_t *x = put(s, v);
    set_next(s, x, next_of(x, now_ms));
}

void sched_load(sched_set_t *s, const sched_view_t *v)
{
    sched_t *x = put(s, v);
    x->pushed = v->pushed;
    x->skipped = v->skipped;
    set_next(s, x, v->next_ms);
}

int sched_del(sched_set_t *s, const void *name, size_t nlen)
{
    sched_t *x = find(s, name, nlen);
    if (x == NULL)
        return 0;
    if (ordo_heap_linked(&x->hn))
        ordo_heap_remove(&s->due, &x->hn);
    ordo_htab_remove(&s->byname, &x->hnode);
    free(x);
    return 1;
}

bool sched_get(const sched_set_t *s, const void *name, size_t nlen, sched_view_t *out)
{
    const sched_t *x = find(s, name, nlen);
    if (x != NULL)
        fill(x, out);
    return x != NULL;
}

bool sched_next_due(const sched_set_t *s, sched_view_t *out)
{
    const ordo_heap_node_t *n = ordo_heap_peek(&s->due);
    if (n != NULL)
        fill(SCHED_OF(n), out);
    return n != NULL;
}

struct foreach_arg {
    void (*fn)(void *arg, const sched_view_t *v);
    void *arg;
};

static void foreach_cb(ordo_hnode_t *n, void *arg)
{
    struct foreach_arg *a = arg;
    sched_view_t v;
    fill((const sched_t *)n, &v);
    a->fn(a->arg, &v);
}

void sched_foreach(const sched_set_t *s, void (*fn)(void *arg, const sched_view_t *v), void *arg)
{
    struct foreach_arg a = {fn, arg};
    ordo_htab_foreach((ordo_htab_t *)(uintptr_t)&s->byname, foreach_cb, &a);
}

int sched_tick(sched_set_t *s, const void *name, size_t nlen, uint64_t tick_ms, uint64_t now_ms, bool *push)
{
    sched_t *x = find(s, name, nlen);
    *push = false;
    if (x == NULL || x->next_ms == 0 || x->next_ms != tick_ms || tick_ms >= now_ms)
        return 0;
    bool missed = now_ms - tick_ms > SCHED_LATE_MS;
    *push = !missed || x->missed == SCHED_MISSED_FIRE;
    if (!*push)
        x->skipped++;
    set_next(s, x, next_of(x, now_ms));
    return 1;
}

void sched_count_outcome(sched_set_t *s, const void *name, size_t nlen, bool pushed)
{
    sched_t *x = find(s, name, nlen);
    if (x == NULL)
        return;
    if (pushed)
        x->pushed++;
    else
        x->skipped++;
}

/* ---- the add record's value ------------------------------------------------------ */

#define SCHED_SPEC_BYTES 21 /* missed u8 | every u64 | start u64 | cron_len u32 */

void sched_encode(const sched_spec_t *spec, const void *payload, size_t plen, ordo_buf_t *out)
{
    size_t clen = spec->cron ? spec->cron_len : 0;
    char *p = ordo_buf_reserve(out, SCHED_SPEC_BYTES + clen + plen);
    p[0] = (char)spec->missed;
    put_u64(p + 1, spec->every_ms);
    put_u64(p + 9, spec->start_ms);
    put_u32(p + 17, (uint32_t)clen);
    if (clen)
        memcpy(p + SCHED_SPEC_BYTES, spec->cron, clen);
    if (plen)
        memcpy(p + SCHED_SPEC_BYTES + clen, payload, plen);
    out->len += SCHED_SPEC_BYTES + clen + plen;
}

int sched_decode(const void *bytes, size_t len, sched_spec_t *spec, const char **payload, size_t *plen)
{
    const char *p = bytes;
    if (len < SCHED_SPEC_BYTES)
        return -1;
    uint32_t clen = get_u32(p + 17);
    if (clen > len - SCHED_SPEC_BYTES)
        return -1;
    *spec = (sched_spec_t){.missed = (uint8_t)p[0], .every_ms = get_u64(p + 1), .start_ms = get_u64(p + 9),
                           .cron = clen ? p + SCHED_SPEC_BYTES : NULL, .cron_len = clen};
    *payload = p + SCHED_SPEC_BYTES + clen;
    *plen = len - SCHED_SPEC_BYTES - clen;
    return 0;
}
