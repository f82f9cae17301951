/*
 * writer.h -- the single writer's machinery, as one part of the server:
 * applying records (apply.h), parked connections (block.h), the wait lists
 * and timers of each family (queue_wait.h, coord_wait.h, expire.h).
 * main.c brings the part up and down with four calls; the order matters
 * and is said here once.
 *
 *   writer_init()          before recovery: empty wait lists, the core's
 *                          callbacks (replay already fires them)
 *   writer_start()         after recovery: the timers, armed for the
 *                          deadlines the state holds
 *   writer_close_handles() at shutdown, so the loop can end
 *   writer_destroy()       after the loop ended (connections are gone)
 */
#ifndef ORDO_WRITER_H
#define ORDO_WRITER_H

#include "server.h"

void writer_init(server_t *s);
void writer_start(server_t *s);
void writer_close_handles(server_t *s);
void writer_destroy(server_t *s);

#endif /* ORDO_WRITER_H */
