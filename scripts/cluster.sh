#!/usr/bin/env bash
# scripts/cluster.sh -- `make cluster`: a three-member ordod cluster on
# loopback, in the foreground, until Ctrl-C (or SIGTERM).
#
#   member  client (RESP)    raft (client + 10000)  HTTP     data                 log
#   1       127.0.0.1:7001   127.0.0.1:17001        :7381    data/cluster/1/      data/cluster/1.log
#   2       127.0.0.1:7002   127.0.0.1:17002        :7382    data/cluster/2/      data/cluster/2.log
#   3       127.0.0.1:7003   127.0.0.1:17003        :7383    data/cluster/3/      data/cluster/3.log
#
# The first start forms the cluster; later starts recover each member from
# its directory (rm -rf data/cluster to begin afresh). Once a leader is
# known it prints how to connect, then one line whenever the leader changes
# or a member exits, nothing else (each member's output goes to its log).
# Ctrl-C or SIGTERM stops the three members it started, by PID (SIGTERM,
# then SIGKILL for any still there after 5 s), waits for them and exits 0.
#
# Env: ORDOD (default build/ordod), CLUSTER_DIR (default ./data/cluster),
#      ORDO_CLUSTER_ARGS (more options for every member, e.g.
#      "--fsync everysec"), CLUSTER_PORT_BASE (default 7000: client ports
#      BASE+1..3, raft BASE+10001..3, HTTP BASE+381..3; another base runs a
#      second cluster beside the first).
set -euo pipefail
cd "$(dirname "$0")/.."

ORDOD="${ORDOD:-build/ordod}"
DIR="${CLUSTER_DIR:-./data/cluster}"
IDS=(1 2 3)
OFFSET=10000 # ordod's default --cluster-port-offset
read -r -a EXTRA <<<"${ORDO_CLUSTER_ARGS:-}"

[ -x "$ORDOD" ] || { echo "cluster: $ORDOD is missing; run make first" >&2; exit 1; }
# (grep -q reads the help whole: in a pipe it may stop early, and ordod,
# cut off mid-write, would fail the pipe.)
ORDOD_HELP="$("$ORDOD" --help 2>&1 || true)"
if ! grep -q -- '--cluster' <<<"$ORDOD_HELP"; then
    echo "cluster: $ORDOD has no cluster mode (--cluster)" >&2
    exit 1
fi

BASE="${CLUSTER_PORT_BASE:-7000}"
client_port() { echo $((BASE + $1)); }
http_port() { echo $((BASE + 380 + $1)); }

LIST=""
for id in "${IDS[@]}"; do LIST+="${LIST:+,}$id=127.0.0.1:$(client_port "$id")"; done

# Every port must be free before anything starts.
for id in "${IDS[@]}"; do
    for p in "$(client_port "$id")" $(($(client_port "$id") + OFFSET)) "$(http_port "$id")"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "cluster: port $p on 127.0.0.1 is in use (another 'make cluster'?); nothing started" >&2
            exit 1
        fi
    done
done

declare -A PID
stop_all() {
    local id pid alive
    trap - INT TERM EXIT
    for id in "${!PID[@]}"; do kill "${PID[$id]}" 2>/dev/null || true; done
    # Up to 5 s for all of them to exit cleanly, then SIGKILL what is left.
    for _ in $(seq 1 50); do
        alive=0
        for id in "${!PID[@]}"; do
            if kill -0 "${PID[$id]}" 2>/dev/null; then alive=1; fi
        done
        [ "$alive" = 1 ] || break
        sleep 0.1
    done
    for id in "${!PID[@]}"; do
        pid="${PID[$id]}"
        if kill -0 "$pid" 2>/dev/null; then
            echo "cluster: member $id (pid $pid) did not exit within 5 s of SIGTERM; SIGKILL" >&2
            kill -9 "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    [ ${#PID[@]} -gt 0 ] && echo "cluster: stopped"
    PID=()
}
trap stop_all EXIT
trap 'exit 0' INT TERM # a requested stop, as ordod exits 0 on SIGINT/SIGTERM

# shell_words ARG...: the arguments as one shell command line.
shell_words() {
    local a out=""
    for a in "$@"; do
        [[ "$a" =~ ^[A-Za-z0-9_./:=,@+-]+$ ]] || a="$(printf '%q' "$a")"
        out+="${out:+ }$a"
    done
    echo "$out"
}

# member_cmd ID: set CMD to the command line of member ID.
member_cmd() {
    local id="$1"
    CMD=("$ORDOD" --bind 127.0.0.1 --port "$(client_port "$id")" --http-port "$(http_port "$id")"
        --dir "$DIR/$id" --node-id "$id" --cluster "$LIST" "${EXTRA[@]}")
}

mkdir -p "$DIR"
for id in "${IDS[@]}"; do
    mkdir -p "$DIR/$id"
    member_cmd "$id"
    "${CMD[@]}" >>"$DIR/$id.log" 2>&1 &
    PID[$id]=$!
done

# cluster_info PORT: CLUSTER INFO of the member on PORT, as name:value
# lines (over /dev/tcp, so that redis-cli is not needed); nothing if it
# does not answer within a second.
cluster_info() {
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
        # shellcheck disable=SC2016
        printf '*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n' >&3
        IFS= read -r -t 1 head <&3 || exit 0
        head="${head%$'\r'}"
        [ "${head:0:1}" = '$' ] || exit 0
        IFS= read -r -t 1 -N "${head:1}" body <&3 || exit 0
        printf '%s\n' "${body//$'\r'/}"
    ) 2>/dev/null
}
info_field() { awk -F: -v k="$1" '$1 == k { print $2; exit }'; }

# leader: "ID TERM" of the leader most members that answer name, or nothing.
# Every member's port is asked, ours or restarted by hand.
leader() {
    local id info l t
    for id in "${IDS[@]}"; do
        info="$(cluster_info "$(client_port "$id")")"
        l="$(info_field cluster_leader_id <<<"$info")"
        t="$(info_field cluster_term <<<"$info")"
        if [ -n "$l" ] && [ "$l" != 0 ]; then echo "$l $t"; fi
    done | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2, $3 }'
}

echo "cluster: starting 3 members (logs: $DIR/<id>.log) ..."
lead=""
for _ in $(seq 1 300); do
    for id in "${IDS[@]}"; do
        if ! kill -0 "${PID[$id]}" 2>/dev/null; then
            echo "cluster: member $id exited at start; the end of $DIR/$id.log:" >&2
            tail -n 15 "$DIR/$id.log" >&2
            exit 1
        fi
    done
    lead="$(leader)"
    [ -n "$lead" ] && break
    sleep 0.1
done
[ -n "$lead" ] || { echo "cluster: no leader after 30 s; see $DIR/*.log" >&2; exit 1; }
read -r lid lterm <<<"$lead"

echo
printf '  %-7s %-16s %-16s %-22s %-22s %s\n' member client raft dashboard data pid
for id in "${IDS[@]}"; do
    printf '  %-7s %-16s %-16s %-22s %-22s %s\n' "$id" "127.0.0.1:$(client_port "$id")" \
        "127.0.0.1:$(($(client_port "$id") + OFFSET))" "http://127.0.0.1:$(http_port "$id")/" "$DIR/$id/" "${PID[$id]}"
done
echo
echo "leader: member $lid (127.0.0.1:$(client_port "$lid")), term $lterm"
echo
printf '  %-36s %s\n' "redis-cli -p $(client_port "$lid")" "the leader: every command" \
    "redis-cli -p $(client_port 1) CLUSTER INFO" "any member: cluster_leader_id, cluster_role, indexes" \
    "redis-cli -p $(client_port 1) CLUSTER MEMBERS" "ids, addresses, roles" \
    "redis-cli -p $(client_port "$lid") CLUSTER TRANSFER" "on the leader: hand leadership to another member"
echo "A follower answers data commands with -NOTLEADER 127.0.0.1:<the leader's port>."
echo
echo "Ctrl-C stops all three."

# Watch: a line when the leader changes or a member exits; nothing else.
while :; do
    sleep 1 &
    wait $! || true
    for id in "${!PID[@]}"; do
        if ! kill -0 "${PID[$id]}" 2>/dev/null; then
            st=0
            wait "${PID[$id]}" 2>/dev/null || st=$?
            unset "PID[$id]"
            member_cmd "$id"
            echo "cluster: $(date +%T) member $id exited (status $st; $DIR/$id.log). To start it again, in another shell, in $PWD:"
            echo "  $(shell_words "${CMD[@]}")"
        fi
    done
    [ ${#PID[@]} -gt 0 ] || { echo "cluster: every member has exited"; exit 1; }
    now="$(leader)"
    if [ "$now" != "$lead" ]; then
        if [ -n "$now" ]; then
            read -r lid lterm <<<"$now"
            echo "cluster: $(date +%T) leader: member $lid (127.0.0.1:$(client_port "$lid")), term $lterm"
        else
            echo "cluster: $(date +%T) no leader known (a majority of members must be up)"
        fi
        lead="$now"
    fi
done
