#!/bin/sh
# The long power-loss run: hundreds of power losses of a real ordod under
# concurrent writers (each kill is followed by putting the data directory
# back as the disk would have kept it: files as of their last fsync,
# directory entries as of the directory's; tests/crash/README.md), with
# --fsync always, then again with group commit; snapshots throughout.
#   scripts/crash-powerloss-long.sh [KILLS [SECONDS]]
# Defaults: 300 power losses over ~300 s per mode. Exit status 0 only if
# nothing acknowledged was lost in either mode.
set -eu
cd "$(dirname "$0")/.."
KILLS=${1:-300}
SECONDS_=${2:-300}
make --no-print-directory build >/dev/null
SMALL="--wal-segment-bytes 64k --snapshot-log-bytes 128k --history-revs 500"
/usr/bin/python3 tests/crash/crash_test.py --powerloss --kills "$KILLS" --seconds "$SECONDS_" --threads 8
# shellcheck disable=SC2086 # SMALL is words on purpose
exec /usr/bin/python3 tests/crash/crash_test.py --powerloss --kills "$KILLS" --seconds "$SECONDS_" --threads 8 \
    -- $SMALL --fsync-interval-ms 5 --fsync-batch-max 64
