/*
 * expire.h -- the writer's side of key expiry: one timer at the earliest
 * key deadline, and the REC_EXPIRE records it makes. Loop thread only.
 */
#ifndef ORDO_WRITER_EXPIRE_H
#define ORDO_WRITER_EXPIRE_H

#include "server.h"

/* expire_due() -- expire every key due by the writer's clock (deadline <
 * s->now_ms), one record per key; re-arm the timer. */
void expire_due(server_t *s);
/* expire_schedule() -- a put may have set an earlier deadline: re-arm. */
void expire_schedule(server_t *s);
/* expire_start() -- the timer (after recovery); expire_close_handles() at
 * shutdown. */
void expire_start(server_t *s);
void expire_close_handles(server_t *s);

#endif /* ORDO_WRITER_EXPIRE_H */
