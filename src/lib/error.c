/*
 * error.c -- names for every error code libordo returns: those of
 * ordo/common.h and the client's own (ordo/client.h), in one function so
 * a caller never has to know which part of the library a code came from.
 */
#include "ordo/client.h"
#include "ordo/common.h"

const char *ordo_strerror(int err)
{
    switch (err) {
    case ORDO_OK: return "ok";
    case ORDO_EINVAL: return "invalid argument";
    case ORDO_ENOMEM: return "out of memory";
    case ORDO_EFULL: return "queue full";
    case ORDO_ETIMEDOUT: return "timed out";
    case ORDO_ECANCELED: return "cancelled";
    case ORDO_ESTOPPED: return "stopped";
    case ORDO_EHANDLER: return "handler failed";
    case ORDO_ENOTFOUND: return "not found";
    case ORDO_EDECLINED: return "declined";
    case ORDO_EBUSY: return "busy";
    case ORDO_ESYS: return "system call failed";
    case ORDO_ECONN: return "connection failed";
    case ORDO_EPROTO: return "protocol error";
    case ORDO_ESERVER: return "server error";
    case ORDO_ECONFLICT: return "conflict";
    case ORDO_ENOTHOLDER: return "not holder";
    case ORDO_ECOMPACTED: return "compacted";
    case ORDO_ELIMIT: return "limit";
    case ORDO_EDEADLETTER: return "dead letter";
    case ORDO_EAUTH: return "authentication failed";
    case ORDO_EREADONLY: return "read-only";
    case ORDO_ENOTLEADER: return "not leader";
    case ORDO_ESTALE: return "stale token";
    case ORDO_ETLS: return "TLS failed";
    default: return "unknown error";
    }
}
