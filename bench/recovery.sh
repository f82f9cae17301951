#!/usr/bin/env bash
# bench/recovery.sh -- how long ordod takes to come back on a big log.
#
# Builds a log of RECORDS records (default 1,000,000 SETs over 100,000 keys,
# redis-benchmark -P 32) against ordod with --fsync no and a snapshot
# threshold so large that no snapshot is taken: recovery replays the whole
# log. Then SIGTERM, and RUNS restarts, each measured two ways:
#   - the server's own figure: "recovered to revision N (M log records) in T ms";
#   - wall time from spawning ordod until PING answers (process start,
#     replay, listen).
# Checks that every restart recovers the same revision, covering every record.
# Goal: <= 1 s for 1M records.
#   bench/recovery.sh [RECORDS] [RUNS]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init recovery
RECORDS=${1:-1000000}
RUNS=${2:-3}
DATA="$BENCH_TMP/data"
FLAGS=(--dir "$DATA" --fsync no --snapshot-log-bytes 1024g)

now_ns() { date +%s%N; }

PORT=$(bench_free_port)
bench_spawn "$BENCH_TMP/load.log" "$ORDOD" --port "$PORT" "${FLAGS[@]}"
LOAD_PID=$LAST_PID
bench_wait_port "$LOAD_PID" "$PORT" || { cat "$BENCH_TMP/load.log"; exit 1; }
echo "recovery: writing $RECORDS records (redis-benchmark -t set -r 100000 -P 32) ..."
t0=$(now_ns)
redis-benchmark -p "$PORT" -t set -n "$RECORDS" -r 100000 -P 32 -q >/dev/null
t1=$(now_ns)
WROTE=$(redis-cli -p "$PORT" KV.REV | head -1)
redis-cli -p "$PORT" INFO persistence | tr -d '\r' | grep -E '^(wal_bytes|wal_segments|snapshots_taken):'
echo "recovery: wrote to revision $WROTE in $(( (t1 - t0) / 1000000 )) ms; log: $(du -sh "$DATA/wal" | cut -f1)"
bench_stop "$LOAD_PID"

server_ms=()
wall_ms=()
for run in $(seq 1 "$RUNS"); do
    PORT=$(bench_free_port)
    log="$BENCH_TMP/run$run.log"
    t0=$(now_ns)
    bench_spawn "$log" "$ORDOD" --port "$PORT" "${FLAGS[@]}"
    pid=$LAST_PID
    # Bounded wait for the first PONG (redis-cli fails fast while the port is closed).
    ok=0
    for _ in $(seq 1 20000); do
        if [ "$(redis-cli -p "$PORT" PING 2>/dev/null)" = "PONG" ]; then ok=1; break; fi
        kill -0 "$pid" 2>/dev/null || break
    done
    t1=$(now_ns)
    [ "$ok" = 1 ] || { echo "recovery: ordod did not answer"; cat "$log"; exit 1; }
    line=$(grep -m1 'recovered to revision' "$log")
    rev=$(sed -E 's/.*revision ([0-9]+) .*/\1/' <<<"$line")
    ms=$(sed -E 's/.* in ([0-9]+) ms.*/\1/' <<<"$line")
    if [ "$rev" != "$WROTE" ]; then
        echo "recovery: recovered to revision $rev, expected $WROTE"; exit 1
    fi
    echo "run $run: $line; PING after $(( (t1 - t0) / 1000000 )) ms"
    server_ms+=("$ms")
    wall_ms+=("$(( (t1 - t0) / 1000000 ))")
    bench_stop "$pid"
done
read -r sm smin smax <<<"$(bench_stats "${server_ms[@]}")"
read -r wm wmin wmax <<<"$(bench_stats "${wall_ms[@]}")"
echo "recovery of $WROTE log records: server ${sm} ms (min ${smin}, max ${smax}); until PING ${wm} ms (min ${wmin}, max ${wmax}); goal <= 1000 ms"
