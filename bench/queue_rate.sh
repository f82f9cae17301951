#!/usr/bin/env bash
# bench/queue_rate.sh -- are a queue's rate limits what they say? One
# ordod (fsync everysec: the limit, not the disk, is measured), then
# bench/queue_rate.py: RATE and KEYRATE settings against the deliveries a
# second measured over D seconds, each within 10% (docs/protocol.md, "Rate
# limits and fairness").
#
# Two runs: the queue's limit binding (RATE below KEYRATE x keys), then
# each key's (KEYRATE x keys below RATE).
#
# Env: D (seconds measured, 60), C (consumers, 4), K (keys, 40).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/bench/lib.sh"
# No peers here: only ordod and python3-redis (scripts/deps.sh test).
BENCH_TMP="$(mktemp -d /tmp/ordo-bench-queue-rate.XXXXXX)"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM
ORDOD="${ORDOD:-$ROOT/build/ordod}"
[ -x "$ORDOD" ] || { echo "bench: $ORDOD is missing; run make first" >&2; exit 1; }

D="${D:-60}"
C="${C:-4}"
K="${K:-40}"

# --http-port 0 here too: lib.sh reads ordod's --help from stdout, where ordod does not print it.
bench_start_ordod ordod --fsync everysec --http-port 0
rc=0
echo "== RATE 500/s, KEYRATE 50/s x $K keys (the queue's limit binds when K > 10)"
/usr/bin/python3 "$ROOT/bench/queue_rate.py" "$ORDO_PORT" -d "$D" -c "$C" -K "$K" -r 500 -k 50 || rc=1
echo "== KEYRATE 5/s x $K keys, RATE 100000/s (each key's limit binds)"
/usr/bin/python3 "$ROOT/bench/queue_rate.py" "$ORDO_PORT" -d "$D" -c "$C" -K "$K" -r 100000 -k 5 || rc=1
exit "$rc"
