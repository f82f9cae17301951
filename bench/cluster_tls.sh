#!/usr/bin/env bash
# bench/cluster_tls.sh -- a three-member ordod cluster with its members
# talking raft over mutual TLS (--tls-cluster) against the same cluster in
# plaintext, in one run: acknowledged writes per second (put_load, CLIENTS
# connections, each SET durable on a majority), medians of R rounds, the
# two kinds alternating, and the ratio TLS/plaintext (goal >= 0.8). Clients
# talk plaintext to the members in both: what is measured is the cost of
# encrypting the replication.
#
# Each round starts a fresh cluster (--fsync always, data in a temp dir),
# waits until a leader is agreed, runs put_load for DURATION seconds, and
# stops it. Certificates come from scripts/make-certs.sh (node-1..node-3).
#
# Env: R (rounds, 3), DURATION (seconds per run, 10), CLIENTS (16),
#      OFFSET (raft port = client port + OFFSET, 6000).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init cluster_tls
R="${R:-3}"
DURATION="${DURATION:-10}"
CLIENTS="${CLIENTS:-16}"
OFFSET="${OFFSET:-6000}"
LOAD="$ROOT/build/put_load"
[ -x "$LOAD" ] || { echo "bench: $LOAD is missing; run make first" >&2; exit 1; }
bash "$ROOT/scripts/make-certs.sh" "$BENCH_TMP/certs" node-1 node-2 node-3 >/dev/null

# A port p with p+OFFSET free too, below the ephemeral range.
pick() {
    local p
    for _ in $(seq 1 500); do
        p=$((20000 + RANDOM % 6000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + OFFSET))") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# run KIND ROUND: one fresh cluster of KIND (plain or tls), one put_load
# run; prints puts/s.
run() {
    local kind="$1" round="$2" id list="" ports="" pids=() p line
    declare -A port
    for id in 1 2 3; do
        p="$(pick)"
        port[$id]=$p
        list+="${list:+,}$id=127.0.0.1:$p"
        ports+="${ports:+,}$p"
    done
    for id in 1 2 3; do
        local tls=()
        [ "$kind" = tls ] && tls=(--tls-cluster yes --tls-cert-file "$BENCH_TMP/certs/node-$id.crt"
            --tls-key-file "$BENCH_TMP/certs/node-$id.key" --tls-ca-cert-file "$BENCH_TMP/certs/ca.crt")
        mkdir -p "$BENCH_TMP/$kind$round-$id"
        bench_spawn "$BENCH_TMP/$kind$round-$id.log" "$ORDOD" --bind 127.0.0.1 --port "${port[$id]}" --http-port 0 \
            --dir "$BENCH_TMP/$kind$round-$id" --fsync always --node-id "$id" --cluster "$list" \
            --cluster-port-offset "$OFFSET" "${tls[@]}"
        pids+=("$LAST_PID")
    done
    for id in 1 2 3; do
        bench_wait_port "${pids[$((id - 1))]}" "${port[$id]}" || { cat "$BENCH_TMP/$kind$round-$id.log" >&2; exit 1; }
    done
    for _ in $(seq 1 300); do
        redis-cli -p "${port[1]}" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' && break
        sleep 0.1
    done
    line="$(timeout $((DURATION + 60)) "$LOAD" ordo "$ports" -c "$CLIENTS" -d "$DURATION" -f || true)"
    for p in "${pids[@]}"; do bench_stop "$p"; done
    v="$(bench_field puts_per_s "$line")"
    [ -n "$v" ] || { echo "bench: put_load gave no figure ($kind): $line" >&2; exit 1; }
    echo "$v"
}

plain=() tls=()
for r in $(seq 1 "$R"); do
    if [ $((r % 2)) -eq 1 ]; then order="plain tls"; else order="tls plain"; fi
    for k in $order; do
        v="$(run "$k" "$r")"
        echo "cluster_tls: round $r $k $v puts/s"
        if [ "$k" = plain ]; then plain+=("$v"); else tls+=("$v"); fi
    done
done
read -r pm pmin pmax <<<"$(bench_stats "${plain[@]}")"
read -r tm tmin tmax <<<"$(bench_stats "${tls[@]}")"
echo "cluster_tls: $CLIENTS clients, ${DURATION}s runs, $R rounds, --fsync always"
echo "cluster_tls: plaintext $pm ($pmin..$pmax) puts/s, mutual TLS $tm ($tmin..$tmax) puts/s"
echo "cluster_tls: ratio mTLS/plaintext: $(bench_ratio "$tm" "$pm") (goal >= 0.8)"
