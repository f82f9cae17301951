#!/usr/bin/env bash
# bench/queue.sh -- durable work queues: push -> pull -> ack cycles per
# second, ordod against beanstalkd and Redis streams; then ordod's Q.CALL
# round trips per second; and ordod's exactly-once cycle beside its plain
# one (docs/exactly-once.md).
#
# All three servers run at once, each on a free loopback port with a temp
# data dir (so on the same file system). build/ordo_bench (ordo-bench,
# bench/ordo_bench.c) drives one, then the next, for R rounds, the order
# rotating every round so that load from other work on the machine falls
# on all alike. The client shape is the same for all: N producer and M
# consumer connections, each with one request in flight, for D seconds;
# producers stop while W messages are pushed and not yet acked, so the
# backlog stays bounded. Per cycle:
#   - ordod:         Q.PUSH (keys spread over K keys) / Q.PULL BLOCK / Q.ACK
#   - beanstalkd:    put / reserve-with-timeout / delete
#   - redis-streams: XADD / XREADGROUP GROUP g c<i> BLOCK / XACK
# We report the median (min..max) acked cycles/s of each and the ratios of
# the medians (goals: ordo/beanstalkd >= 5, ordo/redis-streams >= 2).
# ordo-eo is ordod's exactly-once cycle: Q.PUSH / Q.PULL BLOCK / then MULTI,
# SET eo:<key> <payload>, Q.ACK, EXEC pipelined in one round trip (the
# state write and the ack are one log record); its ratio to the plain
# cycle has the goal ordo-eo/ordo >= 0.8.
# Around every ordod run we read INFO persistence and print log records per
# cycle and records per sync. Then C callers do Q.CALL round trips against
# ordod while M consumers pull and ack with RESULT: calls/s.
#
# Fairness notes, printed with the results:
#   - ordod --fsync always: a reply leaves only once its record is
#     fdatasync'ed; concurrent requests share a sync (group commit). A push,
#     a delivery and an ack are each a record.
#   - beanstalkd -b DIR -f0: binlog, fsync after every write; it logs puts
#     and deletes, not reserves, and does no group commit.
#   - redis-server --appendonly yes --appendfsync always --save "": AOF fsync
#     per event-loop turn before the replies (group commit); XADD,
#     XREADGROUP (the PEL entry) and XACK all go to the AOF. XACK leaves the
#     entry in the stream (no XDEL, no trimming): less work than a delete.
#   - Neither beanstalkd nor Redis streams has ordo's per-key ordering
#     (one message of a key in flight at a time) or its fencing tokens.
#
# Env: N (producers, 8), M (consumers, 8), D (seconds per run, 10),
#      R (rounds, 3), K (ordo keys, 1000), W (window, 1000),
#      V (payload bytes, 64), C (Q.CALL callers, default N),
#      NO_EO=1 (skip ordo-eo: to measure a build without transactions).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init queue

N="${N:-8}"
M="${M:-8}"
D="${D:-10}"
R="${R:-3}"
K="${K:-1000}"
W="${W:-1000}"
V="${V:-64}"
C="${C:-$N}"
LOAD="$ROOT/build/ordo_bench"
[ -x "$LOAD" ] || { echo "bench: $LOAD is missing; run make first" >&2; exit 1; }

start_ordod() {
    bench_start_ordod ordod --fsync always
    PORT_ordo="$ORDO_PORT"
    PID_ordo="$ORDO_PID"
    if ! redis-cli -p "$PORT_ordo" INFO persistence | grep -q '^fsync:always'; then
        echo "bench: ordod does not report fsync:always" >&2
        exit 1
    fi
}

start_beanstalkd() {
    PORT_beanstalkd="$(bench_free_port)"
    mkdir -p "$BENCH_TMP/beanstalkd"
    bench_spawn "$BENCH_TMP/beanstalkd.log" beanstalkd -l 127.0.0.1 -p "$PORT_beanstalkd" \
        -b "$BENCH_TMP/beanstalkd" -f0
    bench_wait_port "$LAST_PID" "$PORT_beanstalkd" || { cat "$BENCH_TMP/beanstalkd.log" >&2; exit 1; }
}

start_redis() {
    bench_start_redis aof
    PORT_redis="$REDIS_PORT"
}

# ordo_wal: prints "records syncs sync_us" from ordod's INFO persistence.
ordo_wal() { bench_ordo_log "$PORT_ordo"; }


# median1 V...: median with one decimal (bench_stats rounds to integers).
median1() {
    printf '%s\n' "$@" | sort -g | awk '
        { v[NR] = $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f\n", m }'
}

declare -A res  # res[BACKEND]: per-run figures
declare -A wal  # wal[rpc|rps|sps]: ordod's log per run

# run BACKEND: one run of ordo-bench; records its figure.
run() {
    local b="$1" port line v key r0 s0 us0 r1 s1 us1 u0 k0 u1 k1 extra=""
    case "$b" in
    ordo | ordo-eo | call) port="$PORT_ordo" ;;
    beanstalkd) port="$PORT_beanstalkd" ;;
    redis-streams) port="$PORT_redis" ;;
    esac
    if [ "$port" = "$PORT_ordo" ]; then
        read -r r0 s0 us0 <<<"$(ordo_wal)"
        read -r u0 k0 <<<"$(bench_cpu_us "$PID_ordo")"
    fi
    line="$(timeout $((D + 60)) "$LOAD" "$b" "$port" -n "$N" -m "$M" -c "$C" -d "$D" -k "$K" \
        -w "$W" -v "$V")" || { echo "bench: ordo-bench $b failed: $line" >&2; exit 1; }
    if [ "$b" = call ]; then key=calls_per_s; else key=acked_per_s; fi
    v="$(bench_field "$key" "$line")"
    res[$b]+="$v "
    if [ "$port" = "$PORT_ordo" ]; then
        read -r r1 s1 us1 <<<"$(ordo_wal)"
        read -r u1 k1 <<<"$(bench_cpu_us "$PID_ordo")"
        local dr=$((r1 - r0)) ds=$((s1 - s0)) n rpc rps sps
        n="$(bench_field "$( [ "$b" = call ] && echo calls_all || echo acked_all)" "$line")"
        rpc="$(awk -v r="$dr" -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? r / n : 0) }')"
        rps="$(awk -v r="$dr" -v s="$ds" 'BEGIN { printf "%.1f", (s > 0 ? r / s : 0) }')"
        sps="$(awk -v v="$v" -v n="$n" -v s="$ds" 'BEGIN { printf "%.0f", (n > 0 ? v * s / n : 0) }')"
        # records/op and syncs/s count the whole run (window fill and drain
        # too, and the Q.DROP): ordo-bench's acked_all / calls_all.
        wal[$b,rpc]+="$rpc "
        wal[$b,rps]+="$rps "
        wal[$b,sps]+="$sps "
        extra=" | log: records/op $rpc records/sync $rps syncs/s $sps sync_mean_us $(awk -v u="$((us1 - us0))" -v s="$ds" -v d="$D" 'BEGIN { printf "%.0f disk_busy %.0f%%", (s > 0 ? u / s : 0), 100 * u / (d * 1e6) }') | ordod cpu: $(bench_cpu_per_op "$u0" "$k0" "$u1" "$k1" "$n")"
    fi
    printf '  round %d %-13s %s/s %s (tool_cpu %s)%s\n' "$r" "$b" "${key%%_per_s}" "$v" \
        "$(bench_field tool_cpu "$line")" "$extra"
}

start_ordod
start_beanstalkd
start_redis
echo "queue: N=$N producers, M=$M consumers, ${D}s per run, R=$R rounds, window W=$W, ${V}-byte payloads, ordo keys K=$K"
echo "queue: ordod --fsync always (reply after fdatasync of its record; group commit)"
echo "queue: $(beanstalkd -v 2>&1 | head -1) -b DIR -f0 (binlog fsync'ed after every write; puts and deletes are logged)"
echo "queue: redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//') --appendonly yes --appendfsync always --save \"\" (XACK leaves entries in the stream)"
echo "queue: all three data dirs on $(df -P "$BENCH_TMP" | awk 'NR == 2 { print $1 }') ($(findmnt -n -o FSTYPE -T "$BENCH_TMP" 2>/dev/null || stat -f -c %T "$BENCH_TMP"))"

backends=(ordo ordo-eo beanstalkd redis-streams)
[ -n "${NO_EO:-}" ] && backends=(ordo beanstalkd redis-streams)
nb=${#backends[@]}
for r in $(seq 1 "$R"); do
    for i in $(seq 0 $((nb - 1))); do
        run "${backends[$(((i + r - 1) % nb))]}"
    done
done
echo "queue: Q.CALL, C=$C callers, M=$M consumers acking with RESULT, ${D}s per run, R=$R rounds"
for r in $(seq 1 "$R"); do
    run call
done

echo
printf '%-26s %-28s %s\n' "push->pull->ack" "cycles/s median (min..max)" "ordod log (medians)"
for b in "${backends[@]}" call; do
    # shellcheck disable=SC2086
    read -r m mn mx <<<"$(bench_stats ${res[$b]})"
    label="$b"
    [ "$b" = call ] && label="Q.CALL c=$C (calls/s)"
    if [ -n "${wal[$b,rpc]:-}" ]; then
        # shellcheck disable=SC2086
        w="records/op $(median1 ${wal[$b,rpc]}) records/sync $(median1 ${wal[$b,rps]}) syncs/s $(bench_stats ${wal[$b,sps]} | awk '{print $1}')"
    else
        w=""
    fi
    printf '%-26s %-28s %s\n' "$label" "$m ($mn..$mx)" "$w"
    eval "med_${b//-/_}=$m"
done
echo
# shellcheck disable=SC2154
echo "ratio ordo/beanstalkd:    $(bench_ratio "$med_ordo" "$med_beanstalkd") (goal >= 5)"
# shellcheck disable=SC2154
echo "ratio ordo/redis-streams: $(bench_ratio "$med_ordo" "$med_redis_streams") (goal >= 2)"
# shellcheck disable=SC2154
[ -z "${NO_EO:-}" ] && echo "ratio ordo-eo/ordo:       $(bench_ratio "$med_ordo_eo" "$med_ordo") (exactly-once cycle / plain cycle; goal >= 0.8)"
true
