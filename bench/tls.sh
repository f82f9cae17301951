#!/usr/bin/env bash
# bench/tls.sh -- GET/SET throughput over TLS: ordod's tls-port against
# redis-server's tls-port, in the same run.
#
# Both servers run at once, each with the same certificate (made by
# scripts/make-certs.sh into the temp directory) on a free loopback port;
# redis-benchmark --tls (-t set,get -n N -c C -r 100000) runs against one,
# then the other, at -P 1 and -P 16, for R rounds, the order flipping every
# round. We report per workload the median (and min..max) requests/s of
# each server and the ratio of the medians.
#
# Fairness notes, printed with the results:
#   - Both speak TLS 1.3 with OpenSSL's default suite (the same library),
#     without client certificates; the handshake is paid once per
#     connection, so these figures are the steady state.
#   - redis-server runs with --save "" --appendonly no: memory only.
#   - ordod runs with --fsync no: every write still goes to its log
#     (write(2) into the page cache, never fsync'ed), which Redis does not
#     do at all; ordod also keeps history.
#
# Env: N (requests per run, default 1000000), R (rounds, default 3),
#      C (clients, default 50), PIPES (default "1 16").
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init tls

N="${N:-1000000}"
R="${R:-3}"
C="${C:-50}"
PIPES="${PIPES:-1 16}"
CERTS="$BENCH_TMP/certs"
"$ROOT/scripts/make-certs.sh" "$CERTS"
TLS_FILES=(--tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key"
           --tls-ca-cert-file "$CERTS/ca.crt")

ORDO_TLS_PORT="$(bench_free_port)"
bench_start_ordod ordod --fsync no --tls-port "$ORDO_TLS_PORT" "${TLS_FILES[@]}"
bench_wait_port "$ORDO_PID" "$ORDO_TLS_PORT" || { cat "$BENCH_TMP/ordod.log" >&2; exit 1; }

REDIS_TLS_PORT="$(bench_free_port)"
mkdir -p "$BENCH_TMP/redis"
bench_spawn "$BENCH_TMP/redis.log" redis-server --bind 127.0.0.1 --port 0 --tls-port "$REDIS_TLS_PORT" \
    "${TLS_FILES[@]}" --tls-auth-clients no --dir "$BENCH_TMP/redis" --save "" --appendonly no --daemonize no
REDIS_PID="$LAST_PID"
bench_wait_port "$REDIS_PID" "$REDIS_TLS_PORT" || { cat "$BENCH_TMP/redis.log" >&2; exit 1; }

# run_one PORT PIPE: prints "set_rps get_rps".
run_one() {
    local out
    out="$(redis-benchmark -h localhost -p "$1" --tls --cacert "$CERTS/ca.crt" -t set,get -n "$N" -c "$C" \
        -r 100000 -P "$2" --csv 2> >(grep -v 'Could not fetch server CONFIG' >&2))"
    awk -F'"' '$2 == "SET" { s = $4 } $2 == "GET" { g = $4 } END { print s, g }' <<<"$out"
}

echo "tls: N=$N clients=$C rounds=$R keyspace=100000 (redis-benchmark $(redis-benchmark --version | awk '{print $2}'))"
echo "tls: both over TLS 1.3 with the same certificate (OpenSSL $(openssl version | awk '{print $2}')), no client certificates"
echo "tls: redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//') with --save \"\" --appendonly no (in memory);"
echo "tls: ordod with --fsync no (it writes its log to the page cache, never fsync'ed; Redis writes none)"

bench_setget_rounds "$ORDO_TLS_PORT" "$REDIS_TLS_PORT" " TLS"
