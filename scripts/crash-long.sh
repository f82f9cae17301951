#!/bin/sh
# The long crash run: hundreds of SIGKILLs of a real ordod under concurrent
# writers, each followed by a restart and a full check (tests/crash/README.md).
#   scripts/crash-long.sh [KILLS [SECONDS]] [-- ordod options]
# Defaults: 300 kills over ~300 s. Exit status 0 only if nothing was lost.
set -eu
cd "$(dirname "$0")/.."
KILLS=${1:-300}
SECONDS_=${2:-300}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && [ "$1" != "--" ] && shift
make --no-print-directory build >/dev/null
exec /usr/bin/python3 tests/crash/crash_test.py --kills "$KILLS" --seconds "$SECONDS_" --threads 8 "$@"
