#!/usr/bin/env bash
# bench/limits.sh -- this machine's limits, the yardstick of every other
# bench's figure: small durable appends per second (fdatasync) in the
# directory the benches keep their data in, the loopback round trip and
# bandwidth, memory bandwidth (build/limits, bench/limits.c, says how each
# is measured). bench/all.sh runs it first, so the table of ratios comes
# with the limits of the run it was measured in.
#
# Env: S (seconds per figure, default 2).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init limits
LIMITS="$ROOT/build/limits"
[ -x "$LIMITS" ] || { echo "bench: $LIMITS is missing; run make first" >&2; exit 1; }
"$LIMITS" -d "$BENCH_TMP" -s "${S:-2}"
