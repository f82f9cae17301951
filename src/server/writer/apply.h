/*
 * apply.h -- the writer's door into the core: every record, a command's or
 * one the writer makes itself (an expiry, a delivery to a parked puller, a
 * lock grant), is applied here, logged, and followed by serving the
 * waiters it freed. Loop thread only.
 */
#ifndef ORDO_WRITER_APPLY_H
#define ORDO_WRITER_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"

/* writer_apply() -- stamp rec with the writer's clock and apply it: the one
 * door through which every record (commands' and timers') enters the core.
 * Returns false if the record changed the state but the log refused it
 * (the server is now read-only): its effect must not be acknowledged. */
bool writer_apply(server_t *s, record_t *rec, apply_result_t *res);

/* The apply latency histogram (s->stats.apply_hist, /metrics): upper
 * bounds in nanoseconds of its buckets; one more bucket holds the rest.
 * From a plain put (~1 us) to a record that walks much state (> 10 ms). */
#define WRITER_APPLY_BUCKETS 9
extern const uint64_t writer_apply_bucket_ns[WRITER_APPLY_BUCKETS];

/* writer_rev() -- the revision the applied state has reached: what output
 * written now may depend on (net.c marks it, and sends it once durable). */
uint64_t writer_rev(const server_t *s);

/* writer_data_bytes() -- the stored data max-memory-bytes bounds: the
 * versioned store (keys, values, history) plus the queues (messages,
 * payloads, per-key state, deliveries, dedup entries, results) plus
 * coordination (coord_wait_bytes(): leases, attachments, locks, elections,
 * values, hand-overs, parked lock and election waiters). O(1). */
size_t writer_data_bytes(const server_t *s);
/* writer_memory_refused() -- if max-memory-bytes is set and stored data is
 * above it, write the -LIMIT error into out and return true: a write that
 * grows the data is refused (cmd_write() for commands; blocked pushers
 * served later get it too). */
bool writer_memory_refused(server_t *s, ordo_buf_t *out);

#endif /* ORDO_WRITER_APPLY_H */
