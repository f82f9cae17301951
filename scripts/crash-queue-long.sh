#!/bin/sh
# The long queue crash run: hundreds of SIGKILLs of a real ordod under queue
# producers and misbehaving consumers, then a drain and the checker
# (tests/crash/README.md, "Queues").
#   scripts/crash-queue-long.sh [KILLS [SECONDS]] [-- ordod options]
# Defaults: 150 kills over ~300 s. Exit status 0 only if every count is 0.
set -eu
cd "$(dirname "$0")/.."
KILLS=${1:-150}
SECONDS_=${2:-300}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && [ "$1" != "--" ] && shift
make --no-print-directory build >/dev/null
exec /usr/bin/python3 tests/crash/queue_crash_test.py --kills "$KILLS" --seconds "$SECONDS_" --producers 4 --consumers 8 "$@"
