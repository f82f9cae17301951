#!/usr/bin/env bash
# bench/client.sh -- the C client against ordod --fsync always, one run,
# same machine:
#   1. producer messages/s with batching (ordo_producer_*, default linger
#      and batch) versus one Q.PUSH per round trip (goal >= 10x);
#   2. the same producer versus redis-benchmark pipelining Q.PUSH at P=16
#      on one connection (goal >= 1x);
#   3. the consumer runner's acked messages/s (N pre-pushed messages, C
#      workers, trivial handler acking with no result) versus
#      bench/queue.sh's hand-written push/pull/ack cycle (ordo_bench ordo,
#      N producers and M consumers; goal >= 1x). The shapes differ: the
#      runner drains a full queue, ordo_bench cycles with a bounded window;
#      both count acks per second;
#   4. resident memory per buffered message in a producer whose server is
#      unreachable (V-byte payloads).
# Each figure is the median (min..max) of R rounds; the order of the
# producer variants rotates every round.
#
# Fairness notes, printed with the results:
#   - Every push is one log record, fdatasync'ed before its reply (group
#     commit shares a sync among the records that arrive together); the
#     producer gains by having many pushes in flight per round trip, not by
#     a server-side batch command (there is none, by design for now).
#   - The producer pushes with ID (dedup) -- one more hash entry per
#     message on the server -- which the one-per-round-trip loop and
#     redis-benchmark do not.
#
# Env: NP (producer messages, 200000), N1 (one-per-round-trip messages,
#      20000), NC (consumer messages, 100000), C (runner workers, 8),
#      V (payload bytes, 64), K (keys, 1000), R (rounds, 3),
#      NM (messages for the memory figure, 200000).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init client

NP="${NP:-200000}"
N1="${N1:-20000}"
NC="${NC:-100000}"
C="${C:-8}"
V="${V:-64}"
K="${K:-1000}"
R="${R:-3}"
NM="${NM:-200000}"
LOAD="$ROOT/build/client_load"
QLOAD="$ROOT/build/ordo_bench"
for t in "$LOAD" "$QLOAD"; do
    [ -x "$t" ] || { echo "bench: $t is missing; run make first" >&2; exit 1; }
done
command -v redis-benchmark >/dev/null || { echo "bench: redis-benchmark is missing" >&2; exit 1; }

bench_start_ordod ordod --fsync always
PORT="$ORDO_PORT"
redis-cli -p "$PORT" INFO persistence | grep -q '^fsync:always' || { echo "bench: not fsync:always" >&2; exit 1; }


declare -A res
run_variant() {
    local v="$1" line
    case "$v" in
    batched) line="$("$LOAD" produce "$PORT" -n "$NP" -v "$V" -k "$K")"; res[$v]+="$(bench_field msgs_per_s "$line") " ;;
    one) line="$("$LOAD" produce1 "$PORT" -n "$N1" -v "$V" -k "$K")"; res[$v]+="$(bench_field msgs_per_s "$line") " ;;
    redis-p16)
        line="$(redis-benchmark -p "$PORT" -n "$NP" -c 1 -P 16 -r "$K" -q \
            Q.PUSH "rb-$r" "key:__rand_int__" "$(head -c "$V" /dev/zero | tr '\0' x)" 2>&1 |
            tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i < NF; i++) if ($(i + 1) == "requests") v = $i } END { print v }')"
        res[$v]+="${line%.*} " ;;
    esac
    printf '  round %d %-10s %s msgs/s\n' "$r" "$v" "$(awk '{ print $NF }' <<<"${res[$v]}")"
}

echo "client: ordod --fsync always on $(df -P "$BENCH_TMP" | awk 'NR == 2 { print $1 }'); ${V}-byte payloads over $K keys"
echo "client: producer defaults: linger 5 ms, 1000 pushes per pipeline, pushes carry ID"
variants=(batched one redis-p16)
for r in $(seq 1 "$R"); do
    for i in 0 1 2; do
        run_variant "${variants[$(((i + r - 1) % 3))]}"
    done
done
for r in $(seq 1 "$R"); do
    line="$("$LOAD" consume "$PORT" -n "$NC" -c "$C" -v "$V" -k "$K")"
    res[runner]+="$(bench_field acked_per_s "$line") "
    line="$(timeout 120 "$QLOAD" ordo "$PORT" -n 8 -m "$C" -d 10 -k "$K" -w 1000 -v "$V")"
    res[cycle]+="$(bench_field acked_per_s "$line") "
    printf '  round %d runner %s acked/s, queue.sh cycle %s acked/s\n' "$r" \
        "$(awk '{ print $NF }' <<<"${res[runner]}")" "$(awk '{ print $NF }' <<<"${res[cycle]}")"
done
mem="$("$LOAD" memory -n "$NM" -v "$V" -k "$K")"

summary() { read -r m lo hi <<<"$(bench_stats ${res[$1]})"; echo "$m ($lo..$hi)"; }
med() { bench_stats ${res[$1]} | awk '{ print $1 }'; }
echo "client: producer batched    $(summary batched) msgs/s"
echo "client: one push per trip   $(summary one) msgs/s   ratio $(bench_ratio "$(med batched)" "$(med one)") (goal >= 10)"
echo "client: redis-benchmark P16 $(summary redis-p16) msgs/s   ratio $(bench_ratio "$(med batched)" "$(med redis-p16)") (goal >= 1)"
echo "client: consumer runner     $(summary runner) acked/s (C=$C)"
echo "client: queue.sh cycle      $(summary cycle) acked/s   ratio $(bench_ratio "$(med runner)" "$(med cycle)") (goal >= 1)"
echo "client: producer memory     $(bench_field bytes_per_msg "$mem") bytes per buffered ${V}-byte message"
