/*
 * log_wal.h -- the local log: the log seam (log.h) implemented by the
 * write-ahead log (wal.h) in <dir>/wal and the snapshot file (snapshot.h)
 * in <dir>. Committed means durable under the fsync policy; the writer
 * applies at propose (log.h).
 *
 * The data directory is locked (flock) by log_wal_open(), before anything
 * in it is read: a second server on a busy directory is refused at once,
 * not after loading the snapshot.
 */
#ifndef ORDO_LOG_WAL_H
#define ORDO_LOG_WAL_H

#include <stddef.h>

#include "log/log.h"
#include "log/wal.h"

typedef struct log_wal_options_s {
    const char *dir;              /* the data directory; must exist */
    /* The WAL's options; log_wal_open() sets wal.dir (<dir>/wal) and
     * wal.on_durable (hooks->wake) itself. */
    wal_options_t wal;
} log_wal_options_t;

/* log_wal_open() -- lock the data directory and return the log, ready for
 * log_load_snapshot() then log_replay(). Reads nothing. Returns NULL with a
 * message in err ("data directory X is in use by another process" if
 * locked). */
log_t *log_wal_open(const log_wal_options_t *opt, const log_hooks_t *hooks, char *err, size_t elen);

#endif /* ORDO_LOG_WAL_H */
