#!/usr/bin/env bash
# bench/lock.sh -- lock acquire+release cycles per second: ordod against
# redis-server and etcd.
#
# All three run at once, each on free loopback ports; build/lock_load
# (bench/lock_load.c) drives one, then the next, for R rounds, the order
# rotating every round so that load from other work on the machine falls
# on all alike. The client shape is the same for all: C connections, each
# on its own lock name, each with one request in flight, doing
# acquire -> release -> acquire ... for D seconds:
#   - ordod: LOCK.ACQUIRE name ttl / LOCK.RELEASE name token
#   - redis: SET name token NX PX ttl / EVALSHA of the compare-and-delete
#     script (the single-instance pattern Redis documents; no fencing token)
#   - etcd:  its lock service (v3lock) through the HTTP/JSON gateway:
#     /v3/lock/lock with a per-connection lease, /v3/lock/unlock
# We report the median (min..max) cycles/s of each and the ratios of the
# medians. Goals: ordod >= 1.0x redis, >= 100x etcd.
#
# Fairness notes, printed with the results:
#   - redis-server runs with --save "" --appendonly no: memory only.
#   - ordod runs with --fsync no: every acquire and release is still a
#     record written to its log (page cache, never fsync'ed).
#   - etcd 3.4 fsyncs its WAL for every raft batch (it has no way not to),
#     and the JSON gateway costs it CPU a native gRPC client would not; the
#     etcd figure is what a lock service built that way delivers, not
#     etcd's best case. ordod with --fsync always is also measured
#     (LOCK_DURABLE=1, default on) to compare durable with durable.
#
# Env: D (seconds per run, default 5), R (rounds, default 3), C (connections,
#      default 16), TTL (ms, default 10000), LOCK_DURABLE (default 1).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init lock

D="${D:-5}"
R="${R:-3}"
C="${C:-16}"
TTL="${TTL:-10000}"
LOCK_DURABLE="${LOCK_DURABLE:-1}"
LOAD="$ROOT/build/lock_load"
[ -x "$LOAD" ] || { echo "bench: $LOAD is missing; run make first" >&2; exit 1; }

start_ordod() { # NAME FSYNC -> sets PORT_<NAME>
    bench_start_ordod "$1" --fsync "$2"
    eval "PORT_$1=$ORDO_PORT"
    eval "PID_$1=$ORDO_PID"
}

start_redis() {
    bench_start_redis
    PORT_redis="$REDIS_PORT"
}

start_etcd() {
    bench_start_etcd
    PORT_etcd="$ETCD_PORT"
}

SERVERS="ordod redis etcd"
start_ordod ordod no
if [ "$LOCK_DURABLE" = 1 ]; then
    start_ordod ordod_always always
    SERVERS="ordod ordod_always redis etcd"
fi
start_redis
start_etcd

proto_of() { case "$1" in ordod*) echo ordo ;; *) echo "$1" ;; esac; }

echo "lock: C=$C connections (one lock name each), D=${D}s per run, R=$R rounds, ttl ${TTL} ms"
echo "lock: redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//') --save \"\" --appendonly no (memory only)"
echo "lock: etcd $(etcd --version | awk '/etcd Version/ {print $3}') v3lock via the HTTP/JSON gateway (WAL fsync per raft batch)"
echo "lock: ordod --fsync no (log to the page cache); ordod_always: --fsync always"

declare -A res
set -- $SERVERS
n=$#
for r in $(seq 1 "$R"); do
    # rotate the order by one each round
    order=()
    for i in $(seq 0 $((n - 1))); do
        j=$(( (i + r - 1) % n + 1 ))
        order+=("${!j}")
    done
    for srv in "${order[@]}"; do
        port_var="PORT_$srv"
        pid_var="PID_$srv"
        prof=""
        if [ -n "${!pid_var:-}" ]; then
            read -r u0 k0 <<<"$(bench_cpu_us "${!pid_var}")"
            read -r lr0 ls0 lu0 <<<"$(bench_ordo_log "${!port_var}")"
        fi
        line="$(timeout $((D + 60)) "$LOAD" "$(proto_of "$srv")" "${!port_var}" -c "$C" -d "$D" -t "$TTL")"
        v="$(sed -n 's/.*cycles_per_s=\([0-9]*\).*/\1/p' <<<"$line")"
        cpu="$(sed -n 's/.*tool_cpu=\([0-9.]*\).*/\1/p' <<<"$line")"
        res[$srv]+="$v "
        if [ -n "${!pid_var:-}" ]; then
            read -r u1 k1 <<<"$(bench_cpu_us "${!pid_var}")"
            read -r lr1 ls1 lu1 <<<"$(bench_ordo_log "${!port_var}")"
            prof=" | $srv cpu per cycle: $(bench_cpu_per_op "$u0" "$k0" "$u1" "$k1" "$((v * D))")"
            prof+=" | log per cycle: $(bench_log_per_op "$lr0" "$ls0" "$lu0" "$lr1" "$ls1" "$lu1" "$((v * D))" "$D")"
        fi
        printf '  round %d %-13s %10s cycles/s (lock_load cpu %s)%s\n' "$r" "$srv" "$v" "$cpu" "$prof"
    done
done

echo
printf '%-13s %s\n' server "acquire+release cycles/s: median (min..max)"
for srv in $SERVERS; do
    # shellcheck disable=SC2086
    read -r m mn mx <<<"$(bench_stats ${res[$srv]})"
    eval "MED_$srv=$m"
    printf '%-13s %s (%s..%s)\n' "$srv" "$m" "$mn" "$mx"
done
echo
echo "ratio ordod/redis: $(bench_ratio "$MED_ordod" "$MED_redis")   (goal >= 1.0)"
echo "ratio ordod/etcd:  $(bench_ratio "$MED_ordod" "$MED_etcd")   (goal >= 100)"
if [ "$LOCK_DURABLE" = 1 ]; then
    echo "ratio ordod_always/etcd (both fsync): $(bench_ratio "$MED_ordod_always" "$MED_etcd")"
fi
