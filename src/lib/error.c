/*
 * error.c -- names for libordo's error codes (ordo/common.h).
 */
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
    default: return "unknown error";
    }
}
