#!/usr/bin/env bash
# bench/watch.sh -- watch fan-out: events delivered per second to 100 prefix
# watchers while one writer puts, ordod against etcd.
#
# Both servers run at once on free loopback ports with temp data dirs.
# build/watch_load (bench/watch_load.c) drives the same load shape against
# each: W watchers (one connection each, one prefix watch each), one writer
# with INFLIGHT puts outstanding, DURATION seconds of measurement. It counts
# the events every watcher receives; the figure is their sum per second.
# The servers alternate within each of R rounds (the order flips every
# round); we print the median, min..max and the ratio of the medians.
#
# Fairness notes, printed with the results:
#   - etcd 3.4 (Debian) fsyncs its WAL for every raft batch and has no
#     --unsafe-no-fsync (that came in 3.5). ordod runs with --fsync always:
#     its log syncs every batch too, and an event leaves only once the put
#     it reports is durable. The writer keeps INFLIGHT
#     puts outstanding so etcd can batch many puts per fsync.
#   - etcd is measured two ways. "etcd-grpc" (the figure the ratio uses):
#     the W watches are opened by one `etcdctl watch -i` process on one gRPC
#     stream (native protocol; etcd's own client multiplexes watches that
#     way), the writer is watch_load with a single gateway watcher, and the
#     events are the PUT lines etcdctl prints, over the writer's duration
#     (the drain after it ends is included, which favours etcd slightly).
#     Its "delivered" is the events etcdctl printed over the writer's puts
#     times W: well under 1.000 means etcdctl, not etcd, set the ceiling
#     (raising INFLIGHT does that: etcd's put rate grows but etcdctl does
#     not keep up, which would flatter ordod).
#     "etcd-http": every watcher on its own connection through the HTTP/JSON
#     gateway, the same shape as ordod's, but the gateway's JSON and
#     internal gRPC hop cost etcd about 10x, so it is printed for reference.
#   - The load tool runs the writer on a thread of its own (so the next put
#     goes out as soon as a reply arrives, not after every watcher's input
#     is parsed) and the watchers on THREADS epoll threads; both servers get
#     exactly the same tool and threads (etcd-grpc's writer too). It prints
#     its CPU use over all threads (tool_cpu, 1.00 = one core busy): on a
#     2-core machine, tool_cpu plus the server's CPU near 2.00 means the
#     machine, not the server, set the ceiling. (The tool used to be one
#     thread, with its parsing on the writer's critical path.)
#   - With --fsync always and INFLIGHT puts outstanding, each put waits for
#     the sync of its batch, and each watcher gets its batch's events in one
#     write: events/s is bounded by INFLIGHT * W / (sync + fan-out time), for
#     etcd and ordod alike. Both get the same INFLIGHT.
#
# Then the fan-out of one large write, ordod alone: FANOUT_W watchers
# (100), over RESP (KV.WATCH) and over HTTP (Server-Sent Events), one
# write of FANOUT_BYTES (1 MiB, binary: base64 in the events' JSON); a
# fresh ordod per run; bench/fanout.py prints the time until the last
# watcher has the whole event and the server's peak RSS. The kinds
# alternate within each of R rounds; medians and the SSE/RESP ratios.
#
# Env: W (watchers, 100), DURATION (seconds per run, 10), R (rounds, 3),
#      INFLIGHT (16), KEYS (1000), VALUE_BYTES (16), THREADS (watcher
#      threads in the load tool, 2), FANOUT_W (100), FANOUT_BYTES
#      (1048576), FANOUT_ONLY (1: the fan-out lines alone, no etcd).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init watch

W="${W:-100}"
DURATION="${DURATION:-10}"
R="${R:-3}"
INFLIGHT="${INFLIGHT:-16}"
KEYS="${KEYS:-1000}"
VALUE_BYTES="${VALUE_BYTES:-16}"
THREADS="${THREADS:-2}"
LOAD="$ROOT/build/watch_load"
[ -x "$LOAD" ] || { echo "bench: $LOAD is missing; run make first" >&2; exit 1; }

start_ordod() { bench_start_ordod ordod --fsync always; }

start_etcd() { bench_start_etcd; }

# run_one ordo|etcd PORT [WATCHERS]: prints watch_load's key=value line.
run_one() {
    timeout $((DURATION + 60)) "$LOAD" "$1" "$2" -w "${3:-$W}" -d "$DURATION" -i "$INFLIGHT" \
        -k "$KEYS" -v "$VALUE_BYTES" -t "$THREADS"
}

# run_etcd_grpc: W watches in one etcdctl process, writer from watch_load;
# sets GRPC_LINE to "events=... events_per_s=..." plus the writer's line.
# Not run in a $(...) subshell, so that bench_spawn records the PID here.
run_etcd_grpc() {
    local fifo="$BENCH_TMP/etcdctl.in" out="$BENCH_TMP/etcdctl.out" line n pid
    rm -f "$fifo"
    mkfifo "$fifo"
    exec 7<>"$fifo"
    # Started here rather than by bench_spawn: a background command's stdin
    # is /dev/null unless the redirection is on the command itself.
    etcdctl --endpoints "127.0.0.1:$ETCD_PORT" watch -i <&7 >"$out" 2>&1 &
    pid=$!
    BENCH_PIDS+=("$pid")
    for _ in $(seq 1 "$W"); do echo "watch wbench/ --prefix" >&7; done
    sleep 2 # etcdctl prints nothing when a watch is created
    line="$(run_one etcd "$ETCD_PORT" 1)"
    sleep 2 # let etcdctl drain
    bench_stop "$pid"
    exec 7>&-
    n="$(grep -c '^PUT$' "$out" || true)"
    local puts
    puts="$(bench_field puts "$line")"
    GRPC_LINE="events=$n events_per_s=$(awk -v n="$n" -v d="$DURATION" 'BEGIN { printf "%.0f", n / d }')"
    GRPC_LINE+=" delivered=$(awk -v n="$n" -v p="$puts" -v w="$W" 'BEGIN { printf "%.3f", (p > 0 ? n / (p * w) : 0) }')"
    GRPC_LINE+=" writer: ${line//=/:}"
}


FANOUT_W="${FANOUT_W:-100}"
FANOUT_BYTES="${FANOUT_BYTES:-1048576}"

# fanout_one resp|sse: a fresh ordod (with an HTTP port), one fan-out,
# fanout.py's key=value line.
fanout_one() {
    local http line
    http="$(bench_free_port)"
    bench_start_ordod "fanout-$1" --fsync always --http-port "$http"
    bench_wait_port "$ORDO_PID" "$http" || exit 1
    line="$(timeout 180 /usr/bin/python3 "$ROOT/bench/fanout.py" "$1" "$ORDO_PORT" "$http" "$ORDO_PID" \
        -w "$FANOUT_W" -b "$FANOUT_BYTES")"
    bench_stop "$ORDO_PID"
    echo "$line"
}

fanout() {
    local r kind line t_resp=() t_sse=() m_resp=() m_sse=()
    echo "fan-out: one ${FANOUT_BYTES}-byte binary write to $FANOUT_W watchers, RESP (KV.WATCH) and SSE (GET /v1/watch),"
    echo "fan-out: a fresh ordod --fsync always per run, $R rounds; time until the last watcher has the event, peak RSS"
    for r in $(seq 1 "$R"); do
        for kind in $([ $((r % 2)) -eq 1 ] && echo "resp sse" || echo "sse resp"); do
            line="$(fanout_one "$kind")"
            echo "  round $r $kind: $line"
            if [ "$kind" = resp ]; then
                t_resp+=("$(bench_field last_watcher_ms "$line")"); m_resp+=("$(bench_field peak_rss_mb "$line")")
            else
                t_sse+=("$(bench_field last_watcher_ms "$line")"); m_sse+=("$(bench_field peak_rss_mb "$line")")
            fi
        done
    done
    read -r trm _ _ <<<"$(bench_stats "${t_resp[@]}")"
    read -r tsm _ _ <<<"$(bench_stats "${t_sse[@]}")"
    read -r mrm _ _ <<<"$(bench_stats "${m_resp[@]}")"
    read -r msm _ _ <<<"$(bench_stats "${m_sse[@]}")"
    echo
    echo "fan-out RESP: last watcher ${trm} ms, peak RSS ${mrm} MB"
    echo "fan-out SSE:  last watcher ${tsm} ms, peak RSS ${msm} MB"
    echo "ratio SSE/RESP: time $(bench_ratio "$tsm" "$trm"), peak RSS $(bench_ratio "$msm" "$mrm")"
}

if [ "${FANOUT_ONLY:-0}" = 1 ]; then
    fanout
    exit 0
fi

start_ordod
start_etcd
echo "watch: $W prefix watchers (one connection each), 1 writer with $INFLIGHT puts in flight,"
echo "watch: $KEYS keys, ${VALUE_BYTES}-byte values, ${DURATION}s per run, $R rounds, load tool: writer thread + $THREADS watcher threads"
echo "watch: etcd $(etcd --version | awk '/etcd Version/ {print $3}') fsyncs its WAL per batch (3.4 has no --unsafe-no-fsync);"
echo "watch: ordod --fsync always (events wait for their puts to be synced). etcd-grpc: one etcdctl with $W watches on one gRPC stream;"
echo "watch: etcd-http: $W watchers through etcd's HTTP/JSON gateway (same shape as ordod's, costs etcd ~10x)."

ev_ordo=()
ev_grpc=()
ev_http=()
for r in $(seq 1 "$R"); do
    if [ $((r % 2)) -eq 1 ]; then order="ordo etcd-grpc etcd-http"; else order="etcd-http etcd-grpc ordo"; fi
    for srv in $order; do
        case "$srv" in
        ordo) line="$(run_one ordo "$ORDO_PORT")"; ev_ordo+=("$(bench_field events_per_s "$line")") ;;
        etcd-grpc) run_etcd_grpc; line="$GRPC_LINE"; ev_grpc+=("$(bench_field events_per_s "$line")") ;;
        etcd-http) line="$(run_one etcd "$ETCD_PORT")"; ev_http+=("$(bench_field events_per_s "$line")") ;;
        esac
        echo "  round $r $srv: $line"
    done
done

read -r om omin omax <<<"$(bench_stats "${ev_ordo[@]}")"
read -r gm gmin gmax <<<"$(bench_stats "${ev_grpc[@]}")"
read -r hm hmin hmax <<<"$(bench_stats "${ev_http[@]}")"
echo
echo "events/s ordod:     $om ($omin..$omax)"
echo "events/s etcd-grpc: $gm ($gmin..$gmax)"
echo "events/s etcd-http: $hm ($hmin..$hmax)"
echo "ratio ordod/etcd: $(bench_ratio "$om" "$gm")   (vs etcd-http: $(bench_ratio "$om" "$hm"))"
echo
bench_stop "$ORDO_PID"
bench_stop "$ETCD_PID"
fanout
