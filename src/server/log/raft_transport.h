/*
 * raft_transport.h -- C raft's TCP transport with TCP_NODELAY on every
 * stream and a partition seam for tests (raft_transport.c). Loop thread.
 */
#ifndef ORDO_RAFT_TRANSPORT_H
#define ORDO_RAFT_TRANSPORT_H

#include <raft.h>
#include <raft/uv.h>
#include <stdint.h>

/* raft_transport_init() -- a transport over raft_uv_tcp on loop. Returns
 * 0 or a raft error code. */
int raft_transport_init(struct raft_uv_transport *t, uv_loop_t *loop);
/* raft_transport_bind() -- listen on this address rather than the one
 * raft gives init (raft_uv_tcp_set_bind_address). */
int raft_transport_bind(struct raft_uv_transport *t, const char *address);
/* raft_transport_free() -- after raft closed it (its close callback). */
void raft_transport_free(struct raft_uv_transport *t);
/* raft_transport_partition() -- from now on, no raft traffic to or from
 * these member ids (n == 0: none blocked). Returns 0, or -1 if n is
 * above 16. */
int raft_transport_partition(struct raft_uv_transport *t, const uint64_t *ids, int n);

#endif /* ORDO_RAFT_TRANSPORT_H */
