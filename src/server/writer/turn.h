/*
 * turn.h -- the writer's rhythm: the per-turn hook and cron.
 *
 * The per-turn hook (a uv_check, after every loop turn's I/O) runs the
 * input of connections whose wait ended, flushes (every connection the
 * turn wrote events into, and held output the log committed since), and
 * hands the turn's records to the log as one batch (persist_kick()),
 * flushing again if the log committed them on the loop thread. Cron
 * (every TURN_CRON_INTERVAL_MS) reads the clock, lets persist start a
 * snapshot, then runs the net layer's and the command layer's periodic
 * work through the hooks.
 *
 * Each turn is timed: the loop's busy time, from the turn's start to its
 * poll for I/O and from the poll's return to the end of the per-turn hook
 * (to the millisecond: libuv's loop clock marks both starts), the longest kept in
 * INFO stats (loop_turn_max_us) with the number of turns longer than
 * TURN_SLOW_MS (loop_turns_slow); a turn longer than TURN_LOG_MS is
 * logged. A client waits at least as long as the turn its request fell
 * behind.
 *
 * The writer calls nothing of cmd/ or net/ (check-layers.sh): what it
 * must ask of them as a whole -- run resumed input, flush, their cron --
 * goes through the hooks main.c installs in s->hooks (server.h) before
 * the loop runs.
 * turn_run_resumed() and turn_flush() are how the writer's other
 * callbacks (timers) end.
 *
 * Owner: the server (s->writer.flusher, s->writer.cron); loop thread only.
 */
#ifndef ORDO_WRITER_TURN_H
#define ORDO_WRITER_TURN_H

#include "server.h"

/* How often cron runs: watch progress, output limits, snapshots and
 * allocator trims are checked at this granularity. */
#define TURN_CRON_INTERVAL_MS 100

/* Turns at least this long count in loop_turns_slow; at least
 * TURN_LOG_MS, one line on stderr (at most one a second). */
#define TURN_SLOW_MS 10
#define TURN_LOG_MS 100

/* turn_start() -- start the per-turn hook and cron (after recovery);
 * turn_close_handles() at shutdown. */
void turn_start(server_t *s);
void turn_close_handles(server_t *s);

/* turn_run_resumed() -- run the pending input of every connection whose
 * wait ended (s->hooks.run_resumed). */
void turn_run_resumed(server_t *s);
/* turn_flush() -- send what was written into connections (s->hooks.flush). */
void turn_flush(server_t *s);

#endif /* ORDO_WRITER_TURN_H */
