#!/usr/bin/env bash
# bench/cluster.sh -- replicated durable writes and failover: a 3-member
# ordod cluster against a 3-member etcd cluster, on loopback, in one run.
#
# Started by the script, each on free loopback ports with its data under
# the bench temp dir: ordod members 1..3 (--node-id, --cluster, --fsync
# always, --http-port 0, raft on client port + OFFSET), etcd members
# m1..m3 (Debian's etcd-server 3.4, defaults), and one single-member ordod
# --fsync always (no --cluster), for the ">= 0.5x single member" goal.
#
# 1. Writes/s. Per round, build/put_load (bench/put_load.c; the client of
#    bench/durable.sh): CLIENTS connections (default 16), one put in
#    flight each, DURATION seconds, sent to the leader:
#      - ordod cluster: RESP SET to the leader found with CLUSTER INFO
#        (put_load -f also follows -NOTLEADER if leadership moves);
#      - etcd cluster: HTTP/1.1 POST /v3/kv/put (gRPC gateway) to the
#        leader found with /v3/maintenance/status (any member would
#        forward; the leader spares the hop, as for ordod);
#      - the single ordod: RESP SET.
#    The order of ordod and etcd flips every round; the single member runs
#    last. Medians (min..max) over R rounds.
# 2. Reads/s. Per round, build/put_load -g at 1 and CLIENTS connections:
#      - ordod cluster: RESP GET to the leader: linearizable (the leader
#        confirms its leadership with a ping round to the voters, no log
#        write, before it answers);
#      - etcd cluster: POST /v3/kv/range to the leader, linearizable (etcd's
#        default; it confirms leadership with ReadIndex);
#      - the single ordod: RESP GET.
# 3. Failover. KILLS times per system (order flipping): wait until the
#    cluster is healthy (every member answers, one leader agreed on, every
#    member applied what the leader committed), then build/failover_probe
#    (bench/failover_probe.c) connects to the two survivors, SIGKILLs the
#    leader and writes to both survivors (several lanes each, a write
#    abandoned after 200 ms, retried 10 ms after an error such as
#    -NOTLEADER) until one acknowledges; the time from the kill to that
#    acknowledgement is the figure. The killed member is then restarted on
#    its data and the cluster waited for again. Medians over the kills.
#
# 4. A real state (STATE_KEYS, default 1000000; 0 skips it), on the ordod
#    cluster only: STATE_KEYS keys of 16 bytes loaded through the leader
#    (redis-cli --pipe); then STATE_SECONDS of steady writes at c=CLIENTS
#    (redis-benchmark runs of 2 s over those keys) while a prober PINGs the
#    leader every 2 ms (the longest PING: the longest the leader kept a
#    client waiting, its loop's turns or the CPU it waited for; the
#    leader's own longest turn, INFO stats, is printed beside it) and the
#    leader's snapshot_in_progress is sampled around each run: the p99 of
#    runs with a snapshot at either sample against runs with none at both, and the leader
#    changes (term moves); then a follower SIGKILLed and restarted with the
#    whole state (time until it has applied what the leader committed),
#    and a follower down while CATCHUP_WRITES writes are made (time until
#    it caught up, and DEBUG DIGEST equal on every member).
#
# Fairness notes, printed with the results:
#   - Both sides acknowledge a put only once a majority (2 of 3) has it
#     in its log on disk: ordod members (run with --fsync always) keep
#     their raft log in ordod's own store, which syncs an entry before it
#     counts towards a commit; etcd fsyncs its WAL likewise (3.4 has no switch to
#     turn that off). The single ordod syncs its own log (--fsync always).
#   - etcd is driven through its HTTP/JSON gateway (the same client shape
#     as ordod), which costs etcd some CPU a gRPC client would not.
#   - Failover is bounded below by each side's election timeout: ordod's
#     default (--cluster-election-timeout-ms, printed) against etcd's
#     defaults (--heartbeat-interval 100, --election-timeout 1000). Neither
#     is tuned here.
#   - All seven processes and the load tools share the machine's cores.
#
# The last lines are the headline ratios:
#   cluster ordod/single put ratio: X          (goal >= 0.6)
#   cluster ordod/etcd put ratio: X            (median writes/s; goal >= 10)
#   get c=1 ordod cluster/single ratio: X      (goal >= 0.7)
#   get c=CLIENTS ordod/etcd ratio: X          (linearizable reads; goal >= 3)
#   failover ordod/etcd ratio: Y               (median failover ms, ordod / etcd)
#
# Env: R (rounds, 3), DURATION (seconds per put_load run, 10), CLIENTS
#      (put_load connections, 16), KILLS (leader kills per system, 5),
#      OFFSET (ordod raft port = client port + OFFSET, 6000, so both stay
#      below the ephemeral range), ONLY=ordod|etcd (run one side only; the
#      ratios then print nan), STATE_KEYS (1000000; 0 skips part 4),
#      STATE_SECONDS (60), CATCHUP_WRITES (200000).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init cluster

R="${R:-3}"
DURATION="${DURATION:-10}"
CLIENTS="${CLIENTS:-16}"
KILLS="${KILLS:-5}"
OFFSET="${OFFSET:-6000}"
ONLY="${ONLY:-}"
STATE_KEYS="${STATE_KEYS:-1000000}"
STATE_SECONDS="${STATE_SECONDS:-60}"
CATCHUP_WRITES="${CATCHUP_WRITES:-200000}"
LOAD="$ROOT/build/put_load"
PROBE="$ROOT/build/failover_probe"
HEALTHY_S=60 # the longest we wait for a cluster to be healthy
for t in "$LOAD" "$PROBE"; do
    [ -x "$t" ] || { echo "bench: $t is missing; run make first" >&2; exit 1; }
done
case "$ONLY" in "" | ordod | etcd) ;; *) echo "bench: ONLY is ordod or etcd" >&2; exit 2 ;; esac
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# (grep -q reads the help whole: in a pipe it may stop early, and ordod,
# cut off mid-write, would fail the pipe.)
ORDOD_HELP="$("$ORDOD" --help 2>&1 || true)"
if want ordod && ! grep -q -- '--cluster' <<<"$ORDOD_HELP"; then
    echo "bench: $ORDOD has no cluster mode (--cluster); build a newer ordod" >&2
    exit 1
fi

# ---- ports ------------------------------------------------------------------

TAKEN=" "
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && [[ "$TAKEN" != *" $1 "* ]]; }

# pick_port VAR [OFF]: set VAR to a free port p (with p+OFF free too when
# OFF is given), not handed out before in this run (the servers bind them
# later). Drawn from 20000..25999 so that p+OFF (OFF <= 6000) stays below
# the kernel's ephemeral range (see lib.sh). Not in $(...): TAKEN must grow.
pick_port() {
    local var="$1" off="${2:-}" p
    for _ in $(seq 1 500); do
        p=$((20000 + RANDOM % 6000))
        port_free "$p" || continue
        if [ -n "$off" ]; then
            port_free $((p + off)) || continue
            TAKEN+="$((p + off)) "
        fi
        TAKEN+="$p "
        printf -v "$var" '%s' "$p"
        return 0
    done
    echo "bench: no free port found" >&2
    return 1
}

# ---- ordod cluster ------------------------------------------------------------

IDS="1 2 3"
declare -A OPORT OPID OSTARTS
OLIST=""
for id in $IDS; do
    pick_port "OPORT[$id]" "$OFFSET"
    OSTARTS[$id]=0
    OLIST+="${OLIST:+,}$id=127.0.0.1:${OPORT[$id]}"
done

# ordo_start ID: start (or restart, on its data) member ID.
ordo_start() {
    local id="$1" log
    OSTARTS[$id]=$((OSTARTS[$id] + 1))
    log="$BENCH_TMP/ordo$id.${OSTARTS[$id]}.log"
    mkdir -p "$BENCH_TMP/ordo$id"
    bench_spawn "$log" "$ORDOD" --bind 127.0.0.1 --port "${OPORT[$id]}" --http-port 0 \
        --dir "$BENCH_TMP/ordo$id" --fsync always \
        --node-id "$id" --cluster "$OLIST" --cluster-port-offset "$OFFSET"
    OPID[$id]="$LAST_PID"
    bench_wait_port "${OPID[$id]}" "${OPORT[$id]}" || { echo "bench: ordod member $id did not start" >&2; cat "$log" >&2; exit 1; }
}

# ordo_ci PORT: CLUSTER INFO of the member on PORT as name=value words.
ordo_ci() { redis-cli -p "$1" CLUSTER INFO 2>/dev/null | tr -d '\r' | tr ':' '=' | tr '\n' ' '; }


# ordo_healthy: true when every member answers, all name the same leader
# (state ok), and every member has applied what the leader has committed.
# Sets OLEADER (the leader's id).
ordo_healthy() {
    local id lead="" commit applied
    declare -A ci
    for id in $IDS; do
        ci[$id]="$(ordo_ci "${OPORT[$id]}")"
        [ "$(bench_field cluster_state "${ci[$id]}")" = ok ] || return 1
        [ -n "$lead" ] || lead="$(bench_field cluster_leader_id "${ci[$id]}")"
        [ "$(bench_field cluster_leader_id "${ci[$id]}")" = "$lead" ] || return 1
    done
    [ -n "$lead" ] && [ "$lead" != 0 ] && [ -n "${OPORT[$lead]:-}" ] || return 1
    # A leader serves once its first barrier commits (cluster_serving, where reported).
    case "$(bench_field cluster_serving "${ci[$lead]}")" in "" | 1) ;; *) return 1 ;; esac
    commit="$(bench_field cluster_commit_index "${ci[$lead]}")"
    for id in $IDS; do
        applied="$(bench_field cluster_applied_index "${ci[$id]}")"
        [ -n "$applied" ] && [ -n "$commit" ] && [ "$applied" -ge "$commit" ] || return 1
    done
    OLEADER="$lead"
}

# wait_healthy WHAT HEALTHY DESCRIBE LOGS: returns once the function
# HEALTHY succeeds, polled for HEALTHY_S seconds; else prints the function
# DESCRIBE's account of each member and the tail of the logs LOGS (a glob
# under the bench temp dir), and exits.
wait_healthy() {
    local what="$1" healthy="$2" describe="$3" logs="$4"
    for _ in $(seq 1 $((HEALTHY_S * 10))); do
        "$healthy" && return 0
        sleep 0.1
    done
    echo "bench: the $what cluster did not become healthy within ${HEALTHY_S}s" >&2
    "$describe" >&2
    # shellcheck disable=SC2086 # $logs is a glob
    tail -n 20 "$BENCH_TMP"/$logs >&2
    exit 1
}

ordo_describe() {
    for id in $IDS; do echo "member $id (port ${OPORT[$id]}): $(ordo_ci "${OPORT[$id]}")"; done
}

ordo_wait_healthy() { wait_healthy ordod ordo_healthy ordo_describe 'ordo*.log'; }

start_ordo_cluster() {
    local id
    for id in $IDS; do ordo_start "$id"; done
    ordo_wait_healthy
    for id in $IDS; do
        if ! redis-cli -p "${OPORT[$id]}" INFO persistence | grep -q '^fsync:always'; then
            echo "bench: ordod member $id does not report fsync:always" >&2
            exit 1
        fi
    done
}

# ---- etcd cluster -------------------------------------------------------------

declare -A EPORT EPEER EPID ESTARTS
EIC=""
for id in $IDS; do
    pick_port "EPORT[$id]"
    pick_port "EPEER[$id]"
    ESTARTS[$id]=0
    EIC+="${EIC:+,}m$id=http://127.0.0.1:${EPEER[$id]}"
done

etcd_start() {
    local id="$1" log
    ESTARTS[$id]=$((ESTARTS[$id] + 1))
    log="$BENCH_TMP/etcd$id.${ESTARTS[$id]}.log"
    bench_spawn "$log" etcd --name "m$id" --data-dir "$BENCH_TMP/etcd$id" \
        --initial-cluster "$EIC" \
        --listen-peer-urls "http://127.0.0.1:${EPEER[$id]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${EPEER[$id]}" \
        --listen-client-urls "http://127.0.0.1:${EPORT[$id]}" \
        --advertise-client-urls "http://127.0.0.1:${EPORT[$id]}" \
        --listen-metrics-urls "" --log-level warn
    EPID[$id]="$LAST_PID"
    bench_wait_port "${EPID[$id]}" "${EPORT[$id]}" || { echo "bench: etcd member m$id did not start" >&2; cat "$log" >&2; exit 1; }
}

# etcd_status PORT: "member_id leader raftIndex raftAppliedIndex" of the
# member on PORT (from the gateway's /v3/maintenance/status), or nothing.
etcd_status() {
    curl -s -m 1 -X POST -d '{}' "http://127.0.0.1:$1/v3/maintenance/status" 2>/dev/null |
        awk '{
            n = split("member_id leader raftIndex raftAppliedIndex", k, " ")
            for (i = 1; i <= n; i++) {
                if (match($0, "\"" k[i] "\":\"?[0-9]+")) {
                    s = substr($0, RSTART, RLENGTH); sub(/.*:"?/, "", s); v[i] = s
                } else { exit }
            }
            print v[1], v[2], v[3], v[4]
        }'
}

# etcd_healthy: as ordo_healthy. Sets ELEADER (the leader's member number).
etcd_healthy() {
    local id lead="" commit=""
    declare -A mid ld idx app
    for id in $IDS; do
        read -r "mid[$id]" "ld[$id]" "idx[$id]" "app[$id]" <<<"$(etcd_status "${EPORT[$id]}")"
        [ -n "${app[$id]}" ] && [ "${ld[$id]}" != 0 ] || return 1
        [ -n "$lead" ] || lead="${ld[$id]}"
        [ "${ld[$id]}" = "$lead" ] || return 1
    done
    for id in $IDS; do
        [ "${mid[$id]}" = "$lead" ] && { ELEADER="$id"; commit="${idx[$id]}"; }
    done
    [ -n "$commit" ] || return 1
    for id in $IDS; do [ "${app[$id]}" -ge "$commit" ] || return 1; done
}

etcd_describe() {
    for id in $IDS; do echo "m$id (port ${EPORT[$id]}): $(etcd_status "${EPORT[$id]}")"; done
}

etcd_wait_healthy() { wait_healthy etcd etcd_healthy etcd_describe 'etcd*.log'; }

start_etcd_cluster() {
    local id
    for id in $IDS; do etcd_start "$id"; done
    etcd_wait_healthy
    if ! curl -sf -o /dev/null -X POST -d '{"key":"cHJvYmU=","value":"MQ=="}' \
        "http://127.0.0.1:${EPORT[$ELEADER]}/v3/kv/put"; then
        echo "bench: etcd's gateway does not accept POST /v3/kv/put" >&2
        exit 1
    fi
}

# ---- runs -------------------------------------------------------------------

declare -A res # res[SYSTEM]: per-run figures (writes/s, or failover ms)

# others_of ID: the client ports (ordod or etcd, per $2) of the other members.
others_of() {
    local id o out=""
    for o in $IDS; do
        [ "$o" = "$1" ] && continue
        if [ "$2" = ordod ]; then out+="${out:+,}${OPORT[$o]}"; else out+="${out:+,}${EPORT[$o]}"; fi
    done
    echo "$out"
}

# put SYSTEM: one put_load run against ordod3, etcd3 or ordod1.
put() {
    local sys="$1" line v
    case "$sys" in
    ordod3)
        ordo_wait_healthy
        line="$(timeout $((DURATION + 60)) "$LOAD" ordo "${OPORT[$OLEADER]},$(others_of "$OLEADER" ordod)" \
            -c "$CLIENTS" -d "$DURATION" -f || true)"
        line="leader $OLEADER: $line"
        ;;
    etcd3)
        etcd_wait_healthy
        line="$(timeout $((DURATION + 60)) "$LOAD" etcd "${EPORT[$ELEADER]}" -c "$CLIENTS" -d "$DURATION" \
            -p /v3/kv/put || true)"
        line="leader m$ELEADER: $line"
        ;;
    ordod1)
        line="$(timeout $((DURATION + 60)) "$LOAD" ordo "$ORDO_PORT" -c "$CLIENTS" -d "$DURATION" || true)"
        ;;
    esac
    v="$(bench_field puts_per_s "${line#*: }")"
    if [ -z "$v" ]; then
        echo "bench: put_load against $sys gave no figure: $line" >&2
        exit 1
    fi
    res[$sys]+="$v "
    printf '  round %d put %-6s %s\n' "$r" "$sys" "$line"
}

# get SYSTEM C: one put_load -g run (reads) at C connections.
get() {
    local sys="$1" c="$2" line v
    case "$sys" in
    ordod3)
        ordo_wait_healthy
        line="$(timeout $((DURATION + 60)) "$LOAD" ordo "${OPORT[$OLEADER]},$(others_of "$OLEADER" ordod)" \
            -c "$c" -d "$DURATION" -f -g || true)"
        line="leader $OLEADER: $line"
        ;;
    etcd3)
        etcd_wait_healthy
        line="$(timeout $((DURATION + 60)) "$LOAD" etcd "${EPORT[$ELEADER]}" -c "$c" -d "$DURATION" \
            -p /v3/kv/range -g || true)"
        line="leader m$ELEADER: $line"
        ;;
    ordod1)
        line="$(timeout $((DURATION + 60)) "$LOAD" ordo "$ORDO_PORT" -c "$c" -d "$DURATION" -g || true)"
        ;;
    esac
    v="$(bench_field puts_per_s "${line#*: }")"
    if [ -z "$v" ]; then
        echo "bench: put_load -g against $sys gave no figure: $line" >&2
        exit 1
    fi
    res[$sys-get$c]+="$v "
    printf '  round %d get c=%-3s %-6s %s\n' "$r" "$c" "$sys" "$line"
}

# failover SYSTEM: kill the leader of ordod or etcd, time the first
# acknowledged write, restart the member, wait until healthy again.
failover() {
    local sys="$1" id pid line v
    if [ "$sys" = ordod ]; then
        ordo_wait_healthy
        id="$OLEADER" pid="${OPID[$OLEADER]}"
        disown "$pid" # no "Killed" notice from bash; still reaped, and killed on exit if alive
        line="$(timeout 60 "$PROBE" ordo "$pid" "$(others_of "$id" ordod)" || true)"
    else
        etcd_wait_healthy
        id="$ELEADER" pid="${EPID[$ELEADER]}"
        disown "$pid"
        line="$(timeout 60 "$PROBE" etcd "$pid" "$(others_of "$id" etcd)" -p /v3/kv/put || true)"
    fi
    bench_stop "$pid" # reaps it (the probe killed it) and forgets its PID
    v="$(bench_field failover_ms "$line")"
    printf '  kill %d %-5s leader %s (pid %s): %s\n' "$k" "$sys" "$id" "$pid" "$line"
    if [ -z "$v" ] || [ "$v" = nan ]; then
        echo "bench: no write acknowledged by the $sys survivors after the leader was killed" >&2
        exit 1
    fi
    res[$sys-failover]+="$v "
    if [ "$sys" = ordod ]; then
        ordo_start "$id"
        ordo_wait_healthy
    else
        etcd_start "$id"
        etcd_wait_healthy
    fi
}

T0=$SECONDS
if want ordod; then start_ordo_cluster; fi
if want etcd; then start_etcd_cluster; fi
# Last, once every port above is bound (bench_free_port knows no TAKEN).
if want ordod; then bench_start_ordod single --fsync always; fi

etimeout="$(awk '$1 == "--cluster-election-timeout-ms" { sub(/.*\(default: /, ""); sub(/[;)].*/, ""); print }' <<<"$ORDOD_HELP")"
echo "cluster: rounds=$R; put_load: $CLIENTS connections x 1 put in flight, ${DURATION}s, 16-byte values, 100000 keys, to the leader"
echo "cluster: ordod 3 members on loopback (--fsync always, raft on client port + $OFFSET), election timeout: ${etimeout:-?} ms (its default)"
echo "cluster: ordod 1 member (no --cluster), --fsync always"
echo "cluster: etcd $(etcd --version | awk '/etcd Version/ {print $3}') 3 members on loopback, defaults (heartbeat 100 ms, election timeout 1000 ms, WAL fsync before a reply),"
echo "cluster: driven through its HTTP/JSON gateway (POST /v3/kv/put), which costs it some CPU a gRPC client would not"
echo "cluster: failover: SIGKILL the leader, time to the first write a survivor acknowledges (build/failover_probe), $KILLS kills each"
echo "cluster: all data dirs on $(df -P "$BENCH_TMP" | awk 'NR == 2 { print $1 }') ($(findmnt -n -o FSTYPE -T "$BENCH_TMP" 2>/dev/null || stat -f -c %T "$BENCH_TMP"))"

SYSTEMS="${ONLY:-ordod etcd}"
# in_order N: the systems, flipped on even N.
in_order() {
    if [ $(($1 % 2)) -eq 1 ]; then echo "$SYSTEMS"; else tr ' ' '\n' <<<"$SYSTEMS" | tac | tr '\n' ' '; fi
}
for r in $(seq 1 "$R"); do
    for s in $(in_order "$r"); do
        if [ "$s" = ordod ]; then put ordod3; else put etcd3; fi
    done
    if want ordod; then put ordod1; fi
    for c in 1 "$CLIENTS"; do
        for s in $(in_order "$r"); do
            if [ "$s" = ordod ]; then get ordod3 "$c"; else get etcd3 "$c"; fi
        done
        if want ordod; then get ordod1 "$c"; fi
    done
done
for k in $(seq 1 "$KILLS"); do
    for s in $(in_order "$k"); do failover "$s"; done
done

# ---- part 4: a real state ------------------------------------------------------

# ping_prober PORT SECONDS: PING every 2 ms; prints "max_ms pings".
ping_prober() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import socket, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
worst, n, end = 0.0, 0, time.monotonic() + secs
while time.monotonic() < end:
    t = time.monotonic()
    s.sendall(b"PING\r\n")
    got = b""
    while not got.endswith(b"\r\n"):
        got += s.recv(64)
    worst = max(worst, time.monotonic() - t)
    n += 1
    time.sleep(0.002)
print("%.1f %d" % (worst * 1000, n))
PY
}

snap_running() { redis-cli -p "$1" INFO persistence 2>/dev/null | tr -d '\r' | awk -F: '$1 == "snapshot_in_progress" { print $2 }'; }

# caught_up_s ID T0: seconds from T0 until member ID applied the leader's commit index.
caught_up_s() {
    local id="$1" t0="$2" ci lci
    while :; do
        ci="$(ordo_ci "${OPORT[$id]}")"
        lci="$(ordo_ci "${OPORT[$OLEADER]}")"
        if [ -n "$ci" ] && [ "$(bench_field cluster_state "$ci")" = ok ] &&
            [ "$(bench_field cluster_applied_index "$ci")" = "$(bench_field cluster_commit_index "$lci")" ]; then
            break
        fi
        sleep 0.05
    done
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }'
}

state_phase() {
    ordo_wait_healthy
    local lp="${OPORT[$OLEADER]}" t0 term0 term1 during="" without="" before after p99 line f
    t0=$(date +%s.%N)
    # In chunks of 50,000 (each waits for its replies): one unbounded
    # pipeline of millions can hold the leader's loop long enough to lose
    # its majority (noted in docs/operations.md).
    local at=0 chunk=50000
    while [ "$at" -lt "$STATE_KEYS" ]; do
        awk -v a="$at" -v n="$chunk" -v max="$STATE_KEYS" 'BEGIN { for (i = a; i < a + n && i < max; i++) printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\nvvvvvvvvvvvvvvvv\r\n", i }' |
            redis-cli -p "$lp" --pipe --pipe-timeout 0 >"$BENCH_TMP/load.out" 2>&1 || {
            echo "bench: loading $STATE_KEYS keys failed at $at: $(tail -3 "$BENCH_TMP/load.out")" >&2
            exit 1
        }
        at=$((at + chunk))
    done
    STATE_LOAD_S="$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }')"
    ordo_wait_healthy
    lp="${OPORT[$OLEADER]}"
    term0="$(bench_field cluster_term "$(ordo_ci "$lp")")"
    local turn0 turn1
    turn0="$(bench_ordo_section stats "$lp" loop_turn_max_us loop_turns_slow)"
    ping_prober "$lp" "$STATE_SECONDS" >"$BENCH_TMP/prober.out" 2>"$BENCH_TMP/prober.err" &
    local prober=$!
    local end=$((SECONDS + STATE_SECONDS))
    while [ $SECONDS -lt $end ]; do
        before="$(snap_running "$lp")"
        line="$(redis-benchmark -p "$lp" -t set -c "$CLIENTS" -n 40000 -r "$STATE_KEYS" -d 16 --csv 2>/dev/null | tail -1)"
        after="$(snap_running "$lp")"
        p99="$(awk -F'","' '{ gsub(/"/, "", $7); print $7 }' <<<"$line")"
        [ -n "$p99" ] || continue
        if [ "$before" = 1 ] || [ "$after" = 1 ]; then during+="$p99 "; elif [ "$before" = 0 ] && [ "$after" = 0 ]; then without+="$p99 "; fi
    done
    wait "$prober" || true
    read -r STATE_STALL_MS STATE_PINGS <"$BENCH_TMP/prober.out" || {
        echo "bench: the PING prober gave no figure: $(cat "$BENCH_TMP/prober.err")" >&2
        STATE_STALL_MS=nan STATE_PINGS=0
    }
    turn1="$(bench_ordo_section stats "$lp" loop_turn_max_us loop_turns_slow)"
    # The leader's own view (INFO stats): its longest loop turn since it
    # started, before and after the phase, and its turns of 10 ms or more
    # during it; a PING slower than any turn waited for the CPU, not for
    # ordod.
    read -r tm0 ts0 <<<"$turn0"
    read -r tm1 ts1 <<<"$turn1"
    STATE_TURNS="longest turn since start ${tm0:-?} -> ${tm1:-?} us, turns >= 10 ms during the writes: $(( ${ts1:-0} - ${ts0:-0} ))"
    term1="$(bench_field cluster_term "$(ordo_ci "$lp")")"
    STATE_LEADER_CHANGES=$(( ${term1:-0} - ${term0:-0} ))
    # shellcheck disable=SC2086
    STATE_P99_DURING="$(median1 $during)" STATE_P99_WITHOUT="$(median1 $without)"
    STATE_RUNS="during $(wc -w <<<"$during"), without $(wc -w <<<"$without")"
    # a follower restarted with the whole state
    ordo_wait_healthy
    f="$(for id in $IDS; do if [ "$id" != "$OLEADER" ]; then echo "$id"; fi; done | head -1)"
    kill -9 "${OPID[$f]}"; bench_stop "${OPID[$f]}"
    t0=$(date +%s.%N)
    ordo_start "$f"
    STATE_RESTART_S="$(caught_up_s "$f" "$t0")"
    # a follower down while CATCHUP_WRITES writes are made
    ordo_wait_healthy
    f="$(for id in $IDS; do if [ "$id" != "$OLEADER" ]; then echo "$id"; fi; done | tail -1)"
    kill -9 "${OPID[$f]}"; bench_stop "${OPID[$f]}"
    redis-benchmark -p "${OPORT[$OLEADER]}" -t set -c "$CLIENTS" -n "$CATCHUP_WRITES" -r "$STATE_KEYS" -d 16 -q >/dev/null 2>&1
    t0=$(date +%s.%N)
    ordo_start "$f"
    STATE_CATCHUP_S="$(caught_up_s "$f" "$t0")"
    # Digests compare only at one applied index: every member's applied
    # index is read before and after its digests, and a round in which any
    # moved (the cluster committed an entry meanwhile) or they differ is
    # taken again, up to 20 times. "no" then means different states at the
    # same index, never a read that raced an entry.
    # DEBUG DIGEST covers the replicated state, not the history each member
    # happens to retain (its own snapshots and the one it installed decide
    # its window), so a "no" is a real divergence; the oldest revisions kept
    # and the revisions are printed with it to tell where to look.
    local d ds a0 a1 tries
    STATE_DIGESTS_EQUAL=no
    for tries in $(seq 1 20); do
        ordo_wait_healthy
        a0="" a1="" ds=""
        for id in $IDS; do a0+="$(bench_field cluster_applied_index "$(ordo_ci "${OPORT[$id]}")") "; done
        for id in $IDS; do d="$(redis-cli -p "${OPORT[$id]}" DEBUG DIGEST)"; ds+="$d "; done
        for id in $IDS; do a1+="$(bench_field cluster_applied_index "$(ordo_ci "${OPORT[$id]}")") "; done
        [ "$a0" = "$a1" ] || continue
        [ "$(tr ' ' '\n' <<<"$a0" | grep -v '^$' | sort -u | wc -l)" = 1 ] || continue
        # (an if, not `[ ] && ...`: a false test as a function's last
        # command would end the script under set -e, with no figure printed)
        if [ "$(tr ' ' '\n' <<<"$ds" | grep -v '^$' | sort -u | wc -l)" = 1 ]; then
            STATE_DIGESTS_EQUAL=yes
            break
        fi
        local olds="" revs=""
        for id in $IDS; do
            olds+="$(bench_ordo_section kv "${OPORT[$id]}" oldest_revision) "
            revs+="$(bench_ordo_section kv "${OPORT[$id]}" revision) "
        done
        STATE_DIGESTS_EQUAL="no (at applied index $(awk '{ print $1 }' <<<"$a0"): $ds; revisions: $revs; oldest revisions kept: $olds)"
    done
}

# median1 V...: median with one decimal (bench_stats rounds to integers).
median1() {
    [ $# -gt 0 ] || { echo nan; return; }
    printf '%s\n' "$@" | sort -g | awk '
        { v[NR] = $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f\n", m }'
}
# shellcheck disable=SC2086
stats() { if [ -n "${res[$1]:-}" ]; then bench_stats ${res[$1]}; else echo "nan nan nan"; fi; }
# ratio A B: bench_ratio, nan when a side did not run.
ratio() { if [ "$1" = nan ] || [ "$2" = nan ]; then echo nan; else bench_ratio "$1" "$2"; fi; }

if want ordod && [ "$STATE_KEYS" -gt 0 ]; then state_phase; fi

echo
echo "run took $((SECONDS - T0)) s"
printf '%-34s %s\n' "" "median (min..max)"
read -r o3 o3min o3max <<<"$(stats ordod3)"
read -r e3 e3min e3max <<<"$(stats etcd3)"
read -r o1 o1min o1max <<<"$(stats ordod1)"
printf '%-34s %s\n' "put c=$CLIENTS, ordod 3 members (w/s)" "$o3 ($o3min..$o3max)"
printf '%-34s %s\n' "put c=$CLIENTS, etcd 3 members (w/s)" "$e3 ($e3min..$e3max)"
printf '%-34s %s\n' "put c=$CLIENTS, ordod 1 member (w/s)" "$o1 ($o1min..$o1max)"
# shellcheck disable=SC2086
of="$(median1 ${res[ordod-failover]:-})"
# shellcheck disable=SC2086
ef="$(median1 ${res[etcd-failover]:-})"
# shellcheck disable=SC2086
printf '%-34s %s\n' "failover, ordod (ms)" "$of (each: $(xargs <<<"${res[ordod-failover]:-}"))"
# shellcheck disable=SC2086
printf '%-34s %s\n' "failover, etcd (ms)" "$ef (each: $(xargs <<<"${res[etcd-failover]:-}"))"
for c in 1 "$CLIENTS"; do
    for sys in ordod3 etcd3 ordod1; do
        read -r g gmin gmax <<<"$(stats "$sys-get$c")"
        printf '%-34s %s\n' "get c=$c, $sys (r/s)" "$g ($gmin..$gmax)"
        eval "g_${sys}_$c=$g"
    done
done
echo "cluster ordod/single put ratio: $(ratio "$o3" "$o1") (goal >= 0.6)"
echo "cluster ordod/etcd put ratio: $(ratio "$o3" "$e3") (goal >= 10)"
echo "get c=1 ordod cluster/single ratio: $(ratio "$g_ordod3_1" "$g_ordod1_1") (goal >= 0.7)"
eval "gc_o=\$g_ordod3_$CLIENTS gc_e=\$g_etcd3_$CLIENTS"
echo "get c=$CLIENTS ordod/etcd ratio: $(ratio "$gc_o" "$gc_e") (linearizable reads; goal >= 3)"
echo "failover ordod/etcd ratio: $(ratio "$of" "$ef")"
if want ordod && [ "$STATE_KEYS" -gt 0 ]; then
    echo "state: $STATE_KEYS keys loaded in ${STATE_LOAD_S} s; ${STATE_SECONDS} s of writes at c=$CLIENTS: leader changes: $STATE_LEADER_CHANGES (goal 0)"
    echo "state: longest loop stall (PING every 2 ms, $STATE_PINGS pings): $STATE_STALL_MS ms (goal < 20)"
    echo "state: the leader's loop turns (INFO stats): $STATE_TURNS"
    echo "state: write p99 during snapshots / without: $STATE_P99_DURING / $STATE_P99_WITHOUT ms ($STATE_RUNS runs of 2 s)"
    echo "state p99 during/without snapshots ratio: $(ratio "$STATE_P99_DURING" "$STATE_P99_WITHOUT") (goal <= 2)"
    echo "state: a follower restarted with $STATE_KEYS keys caught up in $STATE_RESTART_S s (goal <= 5)"
    echo "state: a follower down for $CATCHUP_WRITES writes caught up in $STATE_CATCHUP_S s (goal <= 30); digests equal: $STATE_DIGESTS_EQUAL"
fi
