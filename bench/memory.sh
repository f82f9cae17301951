#!/usr/bin/env bash
# bench/memory.sh -- resident memory per key: ordod against redis-server.
#
# Each server starts fresh on a free loopback port; we read its RSS
# (VmRSS in /proc/PID/status), load KEYS keys "key:%07d" with VALUE_BYTES-byte
# values through `redis-cli --pipe` (one pipelined stream of SET commands,
# the same bytes for both servers), read the RSS again and report
# (after - before) / KEYS.
#
# ordod keeps past versions for KV.GET REV and watch resumption
# (--history-revs, default 100000, trimmed a little on every write), Redis
# keeps only the latest value. So ordod is measured twice: with the default
# history settings, as loaded, and with history off: after KV.COMPACT to the
# current revision (from KV.REV; history-revs has no "off"). RSS falls only
# if the allocator hands the freed pages back, so the second figure can
# overstate what compaction leaves live; ordod's INFO memory figure is
# printed alongside for that reason.
#
# The load passes snapshot-log-bytes, so ordod is writing a snapshot when it
# ends: its buffers are not per-key memory, and while it runs automatic
# compaction is held back (the pin) and KV.COMPACT refuses with BUSY. Each
# ordod figure is therefore read once no snapshot is in progress.
#
# The ratio lines (bench/all.sh collects them): "memory ordod/redis ratio:"
# with the default history (the figure the goal, <= 1.0, is about), then
# the same with history compacted.
#
# Env: KEYS (default 1000000), VALUE_BYTES (default 16).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init memory

KEYS="${KEYS:-1000000}"
VALUE_BYTES="${VALUE_BYTES:-16}"

# The load, generated once: SET key:%07d <value>, in RESP.
gen_load() {
    awk -v n="$KEYS" -v vb="$VALUE_BYTES" 'BEGIN {
        v = sprintf("%0" vb "d", 0); gsub(/0/, "v", v)
        for (i = 0; i < n; i++) {
            k = sprintf("key:%07d", i)
            printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, vb, v
        }
    }' >"$BENCH_TMP/load.resp"
}

# load PORT: pipes the load in; fails unless every reply was OK.
load() {
    local out
    out="$(redis-cli -h 127.0.0.1 -p "$1" --pipe <"$BENCH_TMP/load.resp" 2>&1)"
    if ! grep -q "errors: 0, replies: $KEYS" <<<"$out"; then
        echo "bench: load failed on port $1: $out" >&2
        exit 1
    fi
}

cli() { redis-cli -h 127.0.0.1 -p "$@"; }

# settle PORT: wait (up to a minute) until ordod writes no snapshot.
settle() {
    local i
    for ((i = 0; i < 600; i++)); do
        [ "$(bench_ordo_info "$1" snapshot_in_progress)" = 0 ] && return 0
        sleep 0.1
    done
    echo "bench: ordod on port $1 still writes a snapshot after a minute" >&2
    exit 1
}

per_key() { awk -v a="$1" -v b="$2" -v n="$KEYS" 'BEGIN { printf "%.1f", (b - a) / n }'; }

gen_load
echo "memory: $KEYS keys key:%07d, ${VALUE_BYTES}-byte values, loaded with redis-cli --pipe"

# ---- ordod ----
bench_start_ordod ordod
o0="$(bench_rss_bytes "$ORDO_PID")"
load "$ORDO_PORT"
[ "$(cli "$ORDO_PORT" DBSIZE)" = "$KEYS" ] || { echo "bench: ordod DBSIZE is not $KEYS" >&2; exit 1; }
settle "$ORDO_PORT"
o1="$(bench_rss_bytes "$ORDO_PID")"
o1_info="$(cli "$ORDO_PORT" INFO memory | tr -d '\r' | grep -E '^[a-z_]+:' | tr '\n' ' ')"
rev="$(cli "$ORDO_PORT" KV.REV | head -1)"
reply="$(cli "$ORDO_PORT" KV.COMPACT "$rev")"
[ "$reply" = OK ] || { echo "bench: KV.COMPACT $rev: $reply" >&2; exit 1; }
settle "$ORDO_PORT"
o2="$(bench_rss_bytes "$ORDO_PID")"
o2_info="$(cli "$ORDO_PORT" INFO memory | tr -d '\r' | grep -E '^[a-z_]+:' | tr '\n' ' ')"

# ---- redis ----
bench_start_redis
r0="$(bench_rss_bytes "$REDIS_PID")"
load "$REDIS_PORT"
[ "$(cli "$REDIS_PORT" DBSIZE)" = "$KEYS" ] || { echo "bench: redis DBSIZE is not $KEYS" >&2; exit 1; }
r1="$(bench_rss_bytes "$REDIS_PID")"

ob="$(per_key "$o0" "$o1")"
oc="$(per_key "$o0" "$o2")"
rb="$(per_key "$r0" "$r1")"
# kv_per_key INFO_LINE: used_memory_kv per key.
kv_per_key() { per_key 0 "$(sed -E 's/.*used_memory_kv:([0-9]+).*/\1/' <<<"$1")"; }
echo "ordod:  RSS $o0 -> $o1 bytes: $ob bytes/key (default history, revision $rev; the store counts $(kv_per_key "$o1_info"))"
echo "        INFO memory: $o1_info"
echo "ordod:  after KV.COMPACT $rev: RSS $o2 bytes: $oc bytes/key (the store counts $(kv_per_key "$o2_info"))"
echo "        INFO memory: $o2_info"
echo "redis:  RSS $r0 -> $r1 bytes: $rb bytes/key"
echo "memory ordod/redis ratio: $(bench_ratio "$ob" "$rb") (default history; goal <= 1.0)"
echo "memory ordod/redis ratio, history compacted: $(bench_ratio "$oc" "$rb")"
