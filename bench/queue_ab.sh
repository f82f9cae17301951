#!/usr/bin/env bash
# bench/queue_ab.sh -- the plain queue cycle (push -> pull -> ack, the
# figure of bench/queue.sh) of two ordod builds in one run: does a change
# make a queue that uses none of it slower? Each build gets a fresh server
# (--fsync always, data in one temp dir, so the same file system), the two
# alternate for R rounds, ordo-bench drives both the same way; medians,
# the ratio B/A, and the spread of each side (the noise).
#
# Usage: bench/queue_ab.sh ORDOD_A ORDOD_B
# Env: N (producers, 8), M (consumers, 8), D (seconds per run, 10),
#      R (rounds, 3), K (keys, 1000), W (window, 1000), V (payload, 64).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 ORDOD_A ORDOD_B" >&2; exit 2; }
A="$1" B="$2"
bench_init queue_ab
N="${N:-8}" M="${M:-8}" D="${D:-10}" R="${R:-3}" K="${K:-1000}" W="${W:-1000}" V="${V:-64}"
LOAD="$ROOT/build/ordo_bench"
[ -x "$LOAD" ] || { echo "bench: $LOAD is missing; run make first" >&2; exit 1; }

# run BIN NAME: one fresh server of BIN, one ordo-bench run; prints acked/s.
run() {
    local saved="$ORDOD" line v
    ORDOD="$1"
    bench_start_ordod "$2" --fsync always
    ORDOD="$saved"
    line="$(timeout $((D + 60)) "$LOAD" ordo "$ORDO_PORT" -n "$N" -m "$M" -d "$D" -k "$K" -w "$W" -v "$V")"
    bench_stop "$ORDO_PID"
    v="$(bench_field acked_per_s "$line")"
    [ -n "$v" ] || { echo "bench: ordo-bench gave no figure: $line" >&2; exit 1; }
    echo "$v"
}

a=() b=()
for r in $(seq 1 "$R"); do
    if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
    for s in $order; do
        if [ "$s" = A ]; then v="$(run "$A" "a$r")"; a+=("$v"); else v="$(run "$B" "b$r")"; b+=("$v"); fi
        echo "queue_ab: round $r $s $v cycles/s"
    done
done
read -r am amin amax <<<"$(bench_stats "${a[@]}")"
read -r bm bmin bmax <<<"$(bench_stats "${b[@]}")"
echo "queue_ab: A $A: $am ($amin..$amax) cycles/s"
echo "queue_ab: B $B: $bm ($bmin..$bmax) cycles/s"
echo "queue_ab: ratio B/A: $(bench_ratio "$bm" "$am")"
