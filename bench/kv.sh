#!/usr/bin/env bash
# bench/kv.sh -- plain GET/SET throughput: ordod against redis-server.
#
# Both servers run at once, each on a free loopback port; redis-benchmark
# (-t set,get -n N -c 50 -r 100000) runs against one, then the other, at
# -P 1 and -P 16, for R rounds. The order flips every round so that load
# from other work on the machine falls on both sides alike. We report per
# workload the median (and min..max) requests/s of each server and the
# ratio of the medians.
#
# Fairness notes, printed with the results:
#   - redis-server runs with --save "" --appendonly no: memory only.
#   - ordod runs with --fsync no: every write still goes to its log
#     (write(2) into the page cache, never fsync'ed; snapshots at their
#     default threshold), which Redis does not do at all, so ordod does more
#     work per write. Durable writes are measured by bench/durable.sh
#     (ordod --fsync always against Redis with appendfsync always).
#   - ordod keeps history (--history-revs, default 100000) and compacts a
#     little on every write; Redis keeps only the latest value.
#
# Env: N (requests per run, default 1000000), R (rounds, default 3),
#      C (clients, default 50), PIPES (default "1 16").
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init kv

N="${N:-1000000}"
R="${R:-3}"
C="${C:-50}"
PIPES="${PIPES:-1 16}"

start_servers() {
    bench_start_ordod ordod --fsync no

    bench_start_redis
}

# run_one PORT PIPE: prints "set_rps get_rps".
run_one() {
    local out
    # redis-benchmark warns that it cannot read ordod's CONFIG (save,
    # appendonly); that is expected, so only that line is dropped.
    out="$(redis-benchmark -h 127.0.0.1 -p "$1" -t set,get -n "$N" -c "$C" -r 100000 -P "$2" --csv \
        2> >(grep -v 'Could not fetch server CONFIG' >&2))"
    awk -F'"' '$2 == "SET" { s = $4 } $2 == "GET" { g = $4 } END { print s, g }' <<<"$out"
}

start_servers
echo "kv: N=$N clients=$C rounds=$R keyspace=100000 (redis-benchmark $(redis-benchmark --version | awk '{print $2}'))"
echo "kv: redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//') with --save \"\" --appendonly no (in memory);"
echo "kv: ordod with --fsync no (it writes its log to the page cache, never fsync'ed; Redis writes none);"
echo "kv: durable writes are in bench/durable.sh"

bench_setget_rounds "$ORDO_PORT" "$REDIS_PORT" ""
