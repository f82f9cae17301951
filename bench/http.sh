#!/usr/bin/env bash
# bench/http.sh -- per-key calls over HTTP against ordod's own Q.CALL over
# RESP, on the same server, the same consumers and the same durability.
#
# One ordod (--fsync always, HTTP on its own free port). M consumers pull
# and ack with RESULT for the whole run: build/ordo_bench in call mode on
# queue Q (its single RESP caller, -c 1, adds the same small load to both
# sides). Per round, in alternating order:
#   - HTTP: wrk (Debian's wrk, C with LuaJIT; bench/http_call.lua) with C
#     keep-alive connections, each one call in flight, POST
#     /v1/queues/Q/keys/k<random of K>/call, for D seconds, --latency;
#   - RESP: redis-benchmark -c C -n NRESP -r K: Q.CALL Q k:<rand> <payload>
#     TIMEOUT 30000, --csv (rps and p50/p99).
# Reported: calls/s, p50 and p99 (ms), medians over R rounds, and the ratio
# HTTP/RESP of calls/s (goal >= 0.7).
#
# Fairness notes: both load tools are single-process C with one thread
# each (wrk -t 1, as redis-benchmark has one): on a two-core machine a
# second wrk thread took CPU from ordod and the consumers and cost the
# HTTP side about 12% (9,050 calls/s with one thread, 8,000 with two, in
# one run here). They share the cores with ordod and the consumers. A waiting
# HTTP call holds its connection as a RESP Q.CALL does; neither costs a
# thread in ordod. Both tools build their requests once (http_call.lua
# formats its K requests at init) and pick one per call.
#
# Env: C (connections/callers, 32), M (consumers, 8), D (seconds per wrk
#      run, 10), NRESP (Q.CALLs per redis-benchmark run, 100000), R
#      (rounds, 3), K (keys, 1000), V (payload bytes, 64).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init http

C="${C:-32}"
M="${M:-8}"
D="${D:-10}"
NRESP="${NRESP:-100000}"
R="${R:-3}"
K="${K:-1000}"
V="${V:-64}"
Q="httpbench"
LOAD="$ROOT/build/ordo_bench"
[ -x "$LOAD" ] || { echo "bench: $LOAD is missing; run make first" >&2; exit 1; }
command -v wrk >/dev/null || { echo "bench: wrk is missing (scripts/deps.sh bench)" >&2; exit 1; }

HTTP_PORT="$(bench_free_port)"
bench_start_ordod ordod --fsync always --http-port "$HTTP_PORT"
bench_wait_port "$ORDO_PID" "$HTTP_PORT" || { echo "bench: no HTTP listener" >&2; exit 1; }
PAYLOAD="$(head -c "$V" /dev/zero | tr '\0' p)"

# Consumers for the whole run (the rounds plus slack); ordo_bench drains and
# drops the queue when its time is up.
total=$(( R * (D + NRESP / 2000 + 30) + 60 ))
bench_spawn "$BENCH_TMP/consumers.log" "$LOAD" call "$ORDO_PORT" -c 1 -m "$M" -k "$K" -v "$V" -q "$Q" -d "$total"
CONSUMERS_PID="$LAST_PID"

# to_ms VALUE: wrk's "1.23ms" / "850.00us" / "1.02s" in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000
        printf "%.3f\n", n }'
}

declare -A res

run_http() {
    local out rps p50 p99
    out="$(Q="$Q" K="$K" V="$V" timeout $((D + 60)) wrk -t 1 -c "$C" -d "${D}s" --latency \
        -s "$ROOT/bench/http_call.lua" "http://127.0.0.1:$HTTP_PORT")"
    if grep -q "Non-2xx" <<<"$out"; then
        echo "bench: HTTP calls failed:" >&2
        echo "$out" >&2
        exit 1
    fi
    rps="$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")"
    p50="$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")"
    p99="$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")"
    res[http,rps]+="$rps "
    res[http,p50]+="$p50 "
    res[http,p99]+="$p99 "
    printf '  round %d http  calls/s %s p50 %s ms p99 %s ms\n' "$r" "$rps" "$p50" "$p99"
}

run_resp() {
    local out line rps p50 p99
    out="$(timeout 600 redis-benchmark -p "$ORDO_PORT" -c "$C" -n "$NRESP" -r "$K" --csv --precision 3 \
        Q.CALL "$Q" "k:__rand_int__" "$PAYLOAD" TIMEOUT 30000)"
    # CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",...
    line="$(tail -n 1 <<<"$out" | tr -d '"')"
    rps="$(cut -d, -f2 <<<"$line")"
    p50="$(cut -d, -f5 <<<"$line")"
    p99="$(cut -d, -f7 <<<"$line")"
    res[resp,rps]+="$rps "
    res[resp,p50]+="$p50 "
    res[resp,p99]+="$p99 "
    printf '  round %d resp  calls/s %s p50 %s ms p99 %s ms\n' "$r" "$rps" "$p50" "$p99"
}

echo "http: C=$C connections/callers, M=$M consumers, K=$K keys, ${V}-byte payloads, fsync always, R=$R rounds"
for r in $(seq 1 "$R"); do
    if [ $((r % 2)) -eq 1 ]; then run_http; run_resp; else run_resp; run_http; fi
    kill -0 "$CONSUMERS_PID" 2>/dev/null || { echo "bench: the consumers exited early" >&2; exit 1; }
done

med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f\n", m }'; }
echo
printf '%-24s %-12s %-10s %s\n' "per-key calls" "calls/s" "p50 ms" "p99 ms"
for s in http resp; do
    # shellcheck disable=SC2086
    printf '%-24s %-12s %-10s %s\n' "$s" "$(med ${res[$s,rps]})" "$(med ${res[$s,p50]})" "$(med ${res[$s,p99]})"
done
# shellcheck disable=SC2086
echo "ratio http/resp calls/s: $(bench_ratio "$(med ${res[http,rps]})" "$(med ${res[resp,rps]})") (goal >= 0.7)"
