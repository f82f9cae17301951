/*
 * coord_wait.h -- the writer's side of leases, locks and elections: parked
 * LOCK.ACQUIRE WAIT / ELECT.CAMPAIGN requests, served one per release with
 * a record of their own; ELECT.OBSERVE observers; the timer that applies
 * an expire record when a lease, lock or leadership runs out. See
 * coord_wait.c for the design.
 *
 * Owner: s->writer.coord (coord_wait_init() .. coord_wait_destroy());
 * the loop thread only.
 */
#ifndef ORDO_COORD_WAIT_H
#define ORDO_COORD_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/list.h"
#include "server.h"
#include "writer/outcome.h"

/* What a parked request waits for. */
enum { COORD_WAIT_LOCK = 0, COORD_WAIT_ELECT = 1 };

/* coord_wait_init() -- the empty tables, and the core's coordination
 * callback (before recovery); coord_wait_start() -- after recovery: the
 * deadline timer; coord_wait_close_handles() at shutdown;
 * coord_wait_destroy() after the loop ends. */
void coord_wait_init(server_t *s);
void coord_wait_start(server_t *s);
void coord_wait_close_handles(server_t *s);
void coord_wait_destroy(server_t *s);

/* coord_wait_bytes() -- coordination memory: the state's coord_bytes()
 * plus parked LOCK.ACQUIRE / ELECT.CAMPAIGN requests and their wait lists
 * (INFO used_memory_coord). O(1). */
size_t coord_wait_bytes(const server_t *s);
/* coord_wait_after_apply() -- the door (apply.h) calls it after every record:
 * serves lock waiters and candidates whose lock / election the record
 * freed (each with a record of its own); if schedule (a record that may
 * move a coordination deadline: any but a KV record's), re-arms the
 * deadline timer. */
void coord_wait_after_apply(server_t *s, bool schedule);
/* coord_wait_expire_due() -- apply an expire record for every lease, lock
 * and leadership whose deadline is < s->now_ms; re-arm the timer. */
void coord_wait_expire_due(server_t *s);
void coord_wait_schedule(server_t *s);

/* coord_wait_sweep() -- free wait lists left empty (call before looking). */
void coord_wait_sweep(server_t *s);
/* coord_wait_len() -- requests parked on lock / election name. */
size_t coord_wait_len(server_t *s, int kind, const char *name, size_t nlen);
/* coord_wait_park() -- park client c on lock / election name (kind) with
 * the request's arguments, wait_ms 0: no deadline; it is told the grant
 * (OUTCOME_UINT, OUTCOME_CAMPAIGN), nil at its deadline, or -NOTFOUND if
 * its lease ended. Returns false, with the refusal's text ("CODE ...") in
 * refusal, if the server is read-only or past max-memory-bytes. */
bool coord_wait_park(server_t *s, struct conn_s *c, int kind, const char *name, size_t nlen, uint64_t wait_ms,
                     uint64_t ttl_ms, uint64_t lease, bool handover, const char *value, size_t vlen, char *refusal,
                     size_t rlen);
/* coord_wait_lease_gone_text() -- the -NOTFOUND text for an ended lease. */
void coord_wait_lease_gone_text(char *buf, size_t blen, uint64_t lease);

/* coord_wait_observe() -- add an ELECT.OBSERVE observer of name for
 * client c, also linked on list (the client's observers, owned by the
 * caller, who counts them); returns its id. Events reach c as
 * OUTCOME_LEADER through hooks.answer. */
uint64_t coord_wait_observe(server_t *s, struct conn_s *c, ordo_list_t *list, const char *name, size_t nlen);
/* coord_wait_qwatch() -- add a Q.WATCH observer of queue for client c (on
 * list, removed as ELECT.OBSERVE's are); key NULL: every key, else only
 * that message key's events. Returns its id. Events reach c as
 * OUTCOME_QEVENT. */
uint64_t coord_wait_qwatch(server_t *s, struct conn_s *c, ordo_list_t *list, const char *queue, size_t qlen,
                           const char *key, size_t klen);
/* The queue event history (queue-watch-history-bytes, oldest dropped
 * first) holds every event with a revision above coord_wait_qwatch_floor()
 * (the revision at start, or of the last event dropped).
 * coord_wait_qwatch_catchup() writes to c, as watch id's, the retained
 * events of queue (of key, if not NULL) after revision from (>= the floor);
 * returns how many. */
uint64_t coord_wait_qwatch_floor(const server_t *s);
/* coord_wait_qwatch_history_bytes() -- what that history holds now. */
size_t coord_wait_qwatch_history_bytes(const server_t *s);
size_t coord_wait_qwatch_catchup(server_t *s, struct conn_s *c, uint64_t id, const char *queue, size_t qlen,
                                 const char *key, size_t klen, uint64_t from);
/* coord_wait_unobserve() -- of the observers on list (a client's), remove
 * the one with id (0: all); returns how many. */
size_t coord_wait_unobserve(server_t *s, ordo_list_t *list, uint64_t id);

#endif /* ORDO_COORD_WAIT_H */
