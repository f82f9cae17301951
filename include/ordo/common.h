/*
 * ordo/common.h -- error codes and small shared definitions of libordo.
 *
 * Every libordo function that can fail returns an int: ORDO_OK (0) on
 * success, or one of the negative ORDO_E* codes below. The codes are stable
 * and are the only errors a libordo function returns; ordo_strerror() names
 * them. No function sets errno as part of its contract.
 */
#ifndef ORDO_COMMON_H
#define ORDO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. Negative so that a function may return a count or 0 on
 * success and an error below zero. */
enum {
    ORDO_OK = 0,
    ORDO_EINVAL = -1,     /* an argument is out of its documented range */
    ORDO_ENOMEM = -2,     /* an allocation failed; nothing was changed */
    ORDO_EFULL = -3,      /* a bound was reached and the caller chose not to wait */
    ORDO_ETIMEDOUT = -4,  /* a timed wait ran out */
    ORDO_ECANCELED = -5,  /* the work was accepted, then cancelled by a stop */
    ORDO_ESTOPPED = -6,   /* the object is stopping or stopped: nothing accepted */
    ORDO_EHANDLER = -7,   /* the user's handler reported a failure */
    ORDO_ENOTFOUND = -8,  /* no entry for that key */
    ORDO_EDECLINED = -9,  /* a dedup arrival declined: one holder and one waiter exist */
    ORDO_EBUSY = -10,     /* the object is in a state that forbids the call */
    ORDO_ESYS = -11,      /* a system call failed (thread creation, clock) */
};

/* ordo_strerror() -- a static, human-readable name for an ORDO_E* code,
 * these and the client's (ordo/client.h) alike. Returns "unknown error"
 * for any other value. Never NULL. Thread-safe. */
const char *ordo_strerror(int err);

/* Timeout conventions shared by every blocking call:
 *   ORDO_WAIT_FOREVER  block until the condition holds (or a stop);
 *   0                  never block: fail at once with ORDO_EFULL or
 *                      ORDO_ETIMEDOUT as the call documents;
 *   n > 0              block at most n milliseconds. */
#define ORDO_WAIT_FOREVER (-1)

#ifdef __cplusplus
}
#endif
#endif /* ORDO_COMMON_H */
