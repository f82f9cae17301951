/*
 * timer.h -- a deadline timer on the loop: the one way the writer waits
 * for a wall-clock deadline (key expiry, queue deadlines, coordination
 * deadlines, parked clients' timeouts).
 *
 * Deadlines are absolute ms on the writer's clock (server_clock_ms(),
 * server.h: set from the wall clock at start, then advanced by the
 * monotonic clock, so a step of the wall clock changes no deadline), and
 * a deadline fires once that clock is *past* it: a timer armed at d fires
 * when now > d, i.e. after d + 1 - now ms (after 1 ms if that is already
 * so, never 0: see timer.c). The writer's records then treat "due" as
 * deadline < now_ms, and nothing ends early in real time. A part whose
 * deadlines nobody can act on now (writer_makes_records() false: a member
 * that does not lead, a read-only or stopping server; apply.h) stops its
 * timer rather than re-arm it for a deadline already past.
 *
 * Ownership: the timer is a member of the part that uses it (its owner
 * struct); writer_timer_init() after recovery, writer_timer_close() at
 * shutdown. Arming a timer that is not initialised, or already closed, is
 * a no-op, so a part may re-arm from any path (replay, a command running
 * while the server stops) without checking. The callback runs with the
 * timer disarmed (armed == false) and finds its owner in t->data.
 *
 * Loop thread only.
 */
#ifndef ORDO_WRITER_TIMER_H
#define ORDO_WRITER_TIMER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct server_s server_t;

typedef struct writer_timer_s writer_timer_t;
typedef void (*writer_timer_fn)(writer_timer_t *t);

struct writer_timer_s {
    uv_timer_t uv;
    const server_t *clock;     /* deadlines are read on its writer's clock (server_clock_ms) */
    writer_timer_fn fn;
    void *data;                /* the owner's */
    uint64_t at_ms;            /* the deadline armed for (valid while armed) */
    bool armed;
    bool on;                   /* initialised and not closed */
};

/* writer_timer_init() -- a disarmed timer on loop calling fn(t) when it
 * fires; its deadlines are times of clock's writer clock. */
void writer_timer_init(writer_timer_t *t, uv_loop_t *loop, const server_t *clock, writer_timer_fn fn, void *data);
/* writer_timer_arm() -- fire once the clock is past at_ms (at_ms 0: at
 * once), replacing any earlier arming. No-op if already armed for at_ms. */
void writer_timer_arm(writer_timer_t *t, uint64_t at_ms);
/* writer_timer_arm_earlier() -- arm for at_ms unless already armed for a
 * deadline at or before it (that firing re-arms for the rest). */
void writer_timer_arm_earlier(writer_timer_t *t, uint64_t at_ms);
/* writer_timer_stop() -- disarm. */
void writer_timer_stop(writer_timer_t *t);
/* writer_timer_close() -- disarm and close the handle (at shutdown). */
void writer_timer_close(writer_timer_t *t);

#endif /* ORDO_WRITER_TIMER_H */
