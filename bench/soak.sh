#!/usr/bin/env bash
# bench/soak.sh -- an hour of mixed load on one ordod, memory and latency
# sampled each minute, and the trend of memory at the end.
#
# ordod runs with --fsync always on a fresh data directory, with its HTTP
# listener. bench/soak_load.py drives every kind of client at once at a
# paced, moderate rate over a bounded key space: KV reads and writes
# (some of 1 MiB, some expiring), transactions, a queue with producers and
# consumers, 5 RESP watchers and 5 SSE streams reading every change, HTTP
# PUT and GET. Each minute it prints the server's RSS and used_memory, a
# PING's latency from a connection of its own (p50/p99/max of 100), and
# the minute's operations with their p99 latency. At the end: the RSS
# trend (least squares) over the last 3/4 of the run -- the last 45
# minutes of an hour -- and whether it stayed within 5% ("flat").
#
# Env: SOAK_MINUTES (60).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init soak

MINUTES="${SOAK_MINUTES:-60}"
HTTP_PORT="$(bench_free_port)"
bench_start_ordod soak --fsync always --http-port "$HTTP_PORT"
bench_wait_port "$ORDO_PID" "$HTTP_PORT" || { cat "$BENCH_TMP/soak.log" >&2; exit 1; }
echo "soak: ordod --fsync always (pid $ORDO_PID), $MINUTES minutes of mixed load, one line per minute"
/usr/bin/python3 "$ROOT/bench/soak_load.py" "$ORDO_PORT" "$HTTP_PORT" "$ORDO_PID" "$MINUTES"
kill -0 "$ORDO_PID" || { echo "soak: ordod died"; tail -20 "$BENCH_TMP/soak.log"; exit 1; }
