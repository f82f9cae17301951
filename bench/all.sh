#!/usr/bin/env bash
# bench/all.sh -- every server benchmark in sequence, then one table of
# their ratio lines: the whole picture in one command (`make bench`).
#
# Each bench runs as it does alone (its own peers, started and stopped by
# it, on a quiet machine: run nothing beside this), its whole output kept
# in OUT/<name>.txt. At the end, every line of every output that states a
# ratio (each bench prints ordod against its peer from the same run) is
# printed again, prefixed with the bench's name:
#     kv: SET P=1  ...  ratio ordod/redis: 1.12
# (and bench/limits.sh's "limit:" lines, the machine's limits in that run)
# A bench that fails is listed as FAILED with its file, the others still
# run, and the script exits 1.
#
# BENCH_QUICK=1: a smoke run, every bench one round at a small size, for
# checking that each runs and prints its ratios; its figures are not
# measurements.
#
# Env: BENCHES (the list, default below), BENCH_QUICK, OUT.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCHES="${BENCHES:-limits kv watch memory durable lock queue http client tls cluster cluster_tls}"
OUT="${OUT:-$ROOT/bench/out/all-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"

# quick NAME: the environment of NAME's smoke run (one round, small sizes).
quick() {
    case "$1" in
        limits) echo "S=0.5" ;;
        kv | tls) echo "R=1 N=50000" ;;
        watch) echo "R=1 DURATION=2 W=10 FANOUT_W=10" ;;
        memory) echo "KEYS=100000" ;;
        durable) echo "R=1 N50=20000 N1=2000 N16=50000 DURATION=2" ;;
        lock) echo "R=1 D=2" ;;
        queue) echo "R=1 D=2" ;;
        http) echo "R=1 D=2 NRESP=10000" ;;
        client) echo "R=1 NP=20000 N1=2000 NC=10000 NM=20000" ;;
        cluster | cluster_tls) echo "R=1 DURATION=2" ;;
        *) echo "" ;;
    esac
}

failed=0
for b in $BENCHES; do
    script="$ROOT/bench/$b.sh"
    [ -x "$script" ] || { echo "all: no bench/$b.sh" >&2; failed=1; continue; }
    env_line=""
    [ -n "${BENCH_QUICK:-}" ] && env_line="$(quick "$b")"
    echo "all: $b ${env_line:+($env_line) }-> $OUT/$b.txt"
    # shellcheck disable=SC2086 # env_line is words of VAR=value
    if ! env $env_line "$script" >"$OUT/$b.txt" 2>&1; then
        echo "FAILED (exit code; see $OUT/$b.txt)" >"$OUT/$b.failed"
        failed=1
    fi
done

echo
echo "all: ratio lines${BENCH_QUICK:+ (BENCH_QUICK: a smoke run, not measurements)}"
for b in $BENCHES; do
    [ -f "$OUT/$b.txt" ] || continue
    if [ -f "$OUT/$b.failed" ]; then
        echo "$b: $(cat "$OUT/$b.failed")"
        continue
    fi
    lines="$(grep -iE 'ratio|^limit:' "$OUT/$b.txt" | grep -v '^#' || true)"
    if [ -z "$lines" ]; then
        echo "$b: (no ratio line; see $OUT/$b.txt)"
        continue
    fi
    while IFS= read -r line; do
        echo "$b: $line"
    done <<<"$lines"
done
exit "$failed"
