#!/usr/bin/env bash
# bench/durable.sh -- durable writes: ordod --fsync always against Redis with
# appendfsync always and against etcd, plus how many writes ordod's group
# commit puts behind each sync.
#
# All three servers run at once, each on free loopback ports with a temp
# data dir (so on the same file system). Per round:
#   - redis-benchmark -t set -r 100000 -P 1, at -c 50 (-n N50) and at -c 1
#     (-n N1), and -P 16 at -c 50 (-n N16), against ordod and against
#     redis-server;
#   - build/put_load (bench/put_load.c): CLIENTS connections (default 16),
#     one put in flight each, DURATION seconds, against ordod (RESP SET) and
#     against etcd (HTTP/1.1 keep-alive POST /v3/kv/put, JSON, to the gRPC
#     gateway on the client port).
# The order of the servers flips every round so that load from other work
# on the machine falls on both sides alike. We report per workload the
# median (and min..max) of each server and the ratio of the medians.
#
# Around every ordod run we read INFO persistence (wal_records_written,
# wal_batches, wal_syncs) and print, for c=1, c=50 (redis-benchmark) and
# c=CLIENTS (put_load): acknowledged writes/s (the load tool's figure),
# syncs/s (writes/s x syncs/record over the run) and the mean batch
# (records per sync); "50x16" is c=50 at -P 16.
#
# Fairness notes, printed with the results:
#   - ordod --fsync always: a reply leaves only once its record is
#     fdatasync'ed; concurrent writes share a sync (group commit, defaults
#     fsync-interval-ms 0 and fsync-batch-max 0).
#   - redis-server --appendonly yes --appendfsync always --save "": every
#     event-loop turn writes the AOF and fsyncs it before its replies go out
#     (group commit too). AOF rewrite and ordod's snapshot both run at their
#     defaults, and may land inside a run.
#   - etcd 3.4 (Debian) fsyncs its WAL for every raft batch before it
#     answers, like ordod always; 3.4 has no --unsafe-no-fsync. It is driven
#     through its HTTP/JSON gateway (the same client shape as ordod's), which
#     translates to gRPC inside etcd and so costs etcd some CPU a native gRPC
#     client would not. The load tool is one thread; it prints its CPU use.
#
# Env: N50 (requests per c=50 run, 200000), N1 (per c=1 run, 20000),
#      N16 (per c=50 -P 16 run, 1000000),
#      R (rounds, 3), CLIENTS (put_load connections, 16),
#      DURATION (seconds per put_load run, 10).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init durable

N50="${N50:-200000}"
N1="${N1:-20000}"
N16="${N16:-1000000}"
R="${R:-3}"
CLIENTS="${CLIENTS:-16}"
DURATION="${DURATION:-10}"
LOAD="$ROOT/build/put_load"
[ -x "$LOAD" ] || { echo "bench: $LOAD is missing; run make first" >&2; exit 1; }

start_ordod() {
    bench_start_ordod ordod --fsync always
    if ! redis-cli -p "$ORDO_PORT" INFO persistence | grep -q '^fsync:always'; then
        echo "bench: ordod does not report fsync:always" >&2
        exit 1
    fi
}

start_redis() { bench_start_redis aof; }

start_etcd() {
    bench_start_etcd
    # Which gateway path puts go to: /v3/kv/put in 3.4, /v3beta/kv/put in
    # some older releases. One real put answers it.
    ETCD_PATH=""
    local p
    for p in /v3/kv/put /v3beta/kv/put; do
        if curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
            -d '{"key":"cHJvYmU=","value":"MQ=="}' "http://127.0.0.1:$ETCD_PORT$p"; then
            ETCD_PATH="$p"
            break
        fi
    done
    if [ -z "$ETCD_PATH" ]; then
        echo "bench: etcd's gateway accepts neither /v3/kv/put nor /v3beta/kv/put" >&2
        exit 1
    fi
}

# ordo_wal: prints "records batches syncs" from ordod's INFO persistence.
ordo_wal() { bench_ordo_info "$ORDO_PORT" wal_records_written wal_batches wal_syncs; }

# rb PORT CLIENTS N [PIPELINE]: redis-benchmark SET requests/s.
rb() {
    local out
    # redis-benchmark warns that it cannot read ordod's CONFIG (save,
    # appendonly); that is expected, so only that line is dropped.
    out="$(redis-benchmark -h 127.0.0.1 -p "$1" -t set -n "$3" -c "$2" -r 100000 -P "${4:-1}" --csv \
        2> >(grep -v 'Could not fetch server CONFIG' >&2))"
    awk -F'"' '$2 == "SET" { print $4 }' <<<"$out"
}


declare -A res   # res[SERVER,WORKLOAD]: per-run figures
declare -A sync  # sync[CLIENTS,wps|sps|rps|rpb]: per-run figures of ordod's log

# run WORKLOAD SERVER: one run; records its figure (and ordod's log deltas).
run() {
    local w="$1" srv="$2" port c v line r0 b0 s0 r1 b1 s1 u0 k0 u1 k1
    case "$srv" in ordod) port="$ORDO_PORT" ;; redis) port="$REDIS_PORT" ;; etcd) port="$ETCD_PORT" ;; esac
    if [ "$srv" = ordod ]; then
        read -r r0 b0 s0 <<<"$(ordo_wal)"
        read -r u0 k0 <<<"$(bench_cpu_us "$ORDO_PID")"
    fi
    case "$w" in
    c50) c=50; v="$(rb "$port" 50 "$N50")"; line="SET/s $v" ;;
    c1) c=1; v="$(rb "$port" 1 "$N1")"; line="SET/s $v" ;;
    p16) c=50x16; v="$(rb "$port" 50 "$N16" 16)"; line="SET/s $v" ;;
    put)
        c="$CLIENTS"
        if [ "$srv" = ordod ]; then
            line="$(timeout $((DURATION + 60)) "$LOAD" ordo "$port" -c "$CLIENTS" -d "$DURATION")"
        else
            line="$(timeout $((DURATION + 60)) "$LOAD" etcd "$port" -c "$CLIENTS" -d "$DURATION" -p "$ETCD_PATH")"
        fi
        v="$(bench_field puts_per_s "$line")"
        ;;
    esac
    res[$srv,$w]+="$v "
    if [ "$srv" = ordod ]; then
        read -r r1 b1 s1 <<<"$(ordo_wal)"
        read -r u1 k1 <<<"$(bench_cpu_us "$ORDO_PID")"
        local dr=$((r1 - r0)) db=$((b1 - b0)) ds=$((s1 - s0)) sps rps rpb
        sps="$(awk -v v="$v" -v r="$dr" -v s="$ds" 'BEGIN { printf "%.0f", (r > 0 ? v * s / r : 0) }')"
        rps="$(awk -v r="$dr" -v s="$ds" 'BEGIN { printf "%.1f", (s > 0 ? r / s : 0) }')"
        rpb="$(awk -v r="$dr" -v b="$db" 'BEGIN { printf "%.1f", (b > 0 ? r / b : 0) }')"
        sync[$c,wps]+="$v "
        sync[$c,sps]+="$sps "
        sync[$c,rps]+="$rps "
        sync[$c,rpb]+="$rpb "
        line="$line | log: records +$dr batches +$db syncs +$ds -> syncs/s $sps records/sync $rps | cpu: $(bench_cpu_per_op "$u0" "$k0" "$u1" "$k1" "$dr")"
    fi
    printf '  round %d %-4s %-5s %s\n' "$r" "$w" "$srv" "$line"
}

# median1 V...: median with one decimal (bench_stats rounds to integers).
median1() {
    printf '%s\n' "$@" | sort -g | awk '
        { v[NR] = $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f\n", m }'
}

start_ordod
start_redis
start_etcd
echo "durable: rounds=$R; redis-benchmark SET -r 100000: -P 1 c=50 n=$N50, -P 1 c=1 n=$N1, -P 16 c=50 n=$N16 (redis-benchmark $(redis-benchmark --version | awk '{print $2}'));"
echo "durable: put_load: $CLIENTS connections x 1 put in flight, ${DURATION}s, 16-byte values, 100000 keys"
echo "durable: ordod --fsync always (reply after fdatasync of its record; group commit)"
echo "durable: redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//') --appendonly yes --appendfsync always --save \"\" (AOF fsync before replies, per event-loop turn)"
echo "durable: etcd $(etcd --version | awk '/etcd Version/ {print $3}') defaults: WAL fsync per raft batch before the reply (3.4 has no --unsafe-no-fsync);"
echo "durable: etcd is driven through its HTTP/JSON gateway (POST $ETCD_PATH), which costs it some CPU a gRPC client would not"
echo "durable: all three data dirs on $(df -P "$BENCH_TMP" | awk 'NR == 2 { print $1 }') ($(findmnt -n -o FSTYPE -T "$BENCH_TMP" 2>/dev/null || stat -f -c %T "$BENCH_TMP"))"

for r in $(seq 1 "$R"); do
    for w in c50 c1 p16 put; do
        if [ "$w" = put ]; then other=etcd; else other=redis; fi
        if [ $((r % 2)) -eq 1 ]; then order="ordod $other"; else order="$other ordod"; fi
        for srv in $order; do
            run "$w" "$srv"
        done
    done
done

echo
printf '%-22s %-30s %-30s\n' workload "ordod median (min..max)" "other median (min..max)"
for w in c50 c1 p16 put; do
    case "$w" in
    c50) label="SET c=50 P=1"; other=redis ;;
    c1) label="SET c=1 P=1"; other=redis ;;
    p16) label="SET c=50 P=16"; other=redis ;;
    put) label="put c=$CLIENTS (put_load)"; other=etcd ;;
    esac
    # shellcheck disable=SC2086
    read -r om omin omax <<<"$(bench_stats ${res[ordod,$w]})"
    # shellcheck disable=SC2086
    read -r xm xmin xmax <<<"$(bench_stats ${res[$other,$w]})"
    printf '%-22s %-30s %-30s ratio ordod/%s: %s\n' "$label" "$om ($omin..$omax)" \
        "$other $xm ($xmin..$xmax)" "$other" "$(bench_ratio "$om" "$xm")"
done

echo
echo "ordod --fsync always, acknowledged writes against syncs (medians over rounds):"
printf '%-8s %-26s %-22s %-14s %s\n' clients "writes/s (min..max)" "syncs/s (min..max)" records/sync records/batch
for c in 1 "$CLIENTS" 50 50x16; do
    # shellcheck disable=SC2086
    read -r wm wmin wmax <<<"$(bench_stats ${sync[$c,wps]})"
    # shellcheck disable=SC2086
    read -r sm smin smax <<<"$(bench_stats ${sync[$c,sps]})"
    # shellcheck disable=SC2086
    printf '%-8s %-26s %-22s %-14s %s\n' "$c" "$wm ($wmin..$wmax)" "$sm ($smin..$smax)" \
        "$(median1 ${sync[$c,rps]})" "$(median1 ${sync[$c,rpb]})"
done
