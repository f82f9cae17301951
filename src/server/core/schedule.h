/*
 * schedule.h -- named schedules that push a message into a queue on an
 * interval or a cron expression (Q.SCHEDULE).
 *
 * A schedule is state like a queue: a name, the push it makes (queue, key,
 * payload), when (EVERY ms from a start, or a five-field cron expression
 * in UTC) and what to do with a tick that comes late (MISSED fire|skip),
 * with the time of its next tick. The module never reads a clock: a tick
 * happens when the writer, seeing next_ms pass on its clock, logs a tick
 * record naming the schedule and the tick's time; its apply
 * (sched_tick()) re-checks that this is still the schedule's next tick,
 * decides whether it pushes, and moves next_ms past the record's time.
 * So a tick is applied once per schedule and time whatever replays,
 * restarts or leader changes come: a record for a tick already applied
 * finds next_ms moved on and changes nothing.
 *
 * Missed ticks. A tick whose record comes more than SCHED_LATE_MS after
 * its time was missed (no leader, a stopped server). The next tick is
 * always the first after the record's time, so however many ticks were
 * missed one record settles them: under MISSED fire it pushes once, under
 * MISSED skip it pushes nothing.
 *
 * Cron: minute hour day-of-month month day-of-week, each `*`, a number, a
 * range a-b, a step (`*` or a range)/n, or a comma list of those; days of
 * the week 0-7 (0 and 7 are Sunday); when both day fields are restricted
 * a day matches either (as cron does). Times are UTC, computed with
 * integer calendar arithmetic (no time zone, no libc), so every member
 * gets the same next tick.
 *
 * Not thread-safe: the core thread owns it.
 */
#ifndef ORDO_SCHEDULE_H
#define ORDO_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A tick whose record comes later than this after its time was missed: a
 * second is far above a working timer's lateness (a millisecond or two)
 * and far below an outage. */
#define SCHED_LATE_MS 1000u
/* An interval of at least 10 ms: shorter is a busy loop of records. */
#define SCHED_EVERY_MS_MIN 10u
/* A cron expression of at most this many bytes (five fields fit in far less). */
#define SCHED_CRON_BYTES_MAX 200u

enum sched_missed { SCHED_MISSED_FIRE = 0, SCHED_MISSED_SKIP = 1 };

/* When a schedule ticks. Exactly one of every_ms > 0 and cron is set. */
typedef struct sched_spec_s {
    uint64_t every_ms;        /* interval: ticks at start_ms + k * every_ms, k >= 1 */
    uint64_t start_ms;
    const char *cron;         /* cron expression (cron_len bytes), or NULL */
    size_t cron_len;
    uint8_t missed;           /* enum sched_missed */
} sched_spec_t;

/* A schedule as read (sched_get(), sched_foreach(), snapshots) or as
 * added. Pointers are into the set, valid until it next changes. */
typedef struct sched_view_s {
    const char *name;
    size_t nlen;
    const char *queue;
    size_t qlen;
    const char *key;
    size_t klen;
    const char *payload;
    size_t plen;
    sched_spec_t spec;
    uint64_t next_ms;         /* the next tick's time; 0: none (a cron date that never comes) */
    uint64_t pushed;          /* ticks that pushed */
    uint64_t skipped;         /* ticks that did not (missed under skip, or the queue refused) */
} sched_view_t;

typedef struct sched_set_s sched_set_t;

sched_set_t *sched_set_create(void);
void sched_set_destroy(sched_set_t *s);
size_t sched_count(const sched_set_t *s);

/* sched_spec_valid() -- the spec is well formed (its cron parses).
 * Returns NULL, or a sentence saying what is wrong. */
const char *sched_spec_valid(const sched_spec_t *spec);
/* sched_next_after() -- the spec's first tick strictly after t_ms (0 if
 * there is none within SCHED_CRON_SEARCH_YEARS years). Pure. */
uint64_t sched_next_after(const sched_spec_t *spec, uint64_t t_ms);

/* sched_add() -- add the schedule v describes (its bytes copied),
 * replacing one of the same name; its next tick is the first after
 * now_ms (counters start at 0). The spec must be valid. */
void sched_add(sched_set_t *s, const sched_view_t *v, uint64_t now_ms);
/* sched_del() -- remove a schedule. Returns 1, or 0 if none. */
int sched_del(sched_set_t *s, const void *name, size_t nlen);
/* sched_get() -- the schedule called name into *out: true, or false. */
bool sched_get(const sched_set_t *s, const void *name, size_t nlen, sched_view_t *out);
/* sched_next_due() -- the schedule with the earliest next tick: true and
 * *out, or false if none has one. O(1). */
bool sched_next_due(const sched_set_t *s, sched_view_t *out);
/* sched_foreach() -- every schedule, in no order. */
void sched_foreach(const sched_set_t *s, void (*fn)(void *arg, const sched_view_t *v), void *arg);

/* sched_tick() -- apply of a tick record: if tick_ms is still the
 * schedule's next tick, decide (*push: push now, by MISSED and lateness
 * now_ms - tick_ms) and move the next tick past now_ms. Returns 1, or 0
 * for a stale record (no such schedule, or that tick is past). */
int sched_tick(sched_set_t *s, const void *name, size_t nlen, uint64_t tick_ms, uint64_t now_ms, bool *push);
/* sched_count_outcome() -- after a tick that meant to push: pushed (the
 * queue took it) or skipped. */
void sched_count_outcome(sched_set_t *s, const void *name, size_t nlen, bool pushed);

/* sched_load() -- a snapshot's schedule, with its next tick and counters. */
void sched_load(sched_set_t *s, const sched_view_t *v);

/* A tick record's value: the spec and the payload, in one byte string
 * (little-endian): missed u8 | every_ms u64 | start_ms u64 | cron_len u32 |
 * cron | payload. sched_encode() appends it to *out (the caller frees
 * out->data); sched_decode() reads one into *spec and *payload (pointers
 * into p), returning 0 or -1 if it is malformed. */
struct ordo_buf_s;
void sched_encode(const sched_spec_t *spec, const void *payload, size_t plen, struct ordo_buf_s *out);
int sched_decode(const void *p, size_t len, sched_spec_t *spec, const char **payload, size_t *plen);

#endif /* ORDO_SCHEDULE_H */
