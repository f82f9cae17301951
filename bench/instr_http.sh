#!/usr/bin/env bash
# bench/instr_http.sh -- ordod's user-space instructions (callgrind) and
# syscalls (strace -c) per per-key call, over HTTP and over RESP: the
# figures behind bench/http.sh's ratio that do not depend on the machine's
# load (bench/instr.sh says what Ir counts and what it leaves out).
#
# Method: one ordod (--fsync always, an HTTP port), under callgrind with
# --instr-atstart=no (MODE=instr) or plain with strace attached per phase
# (MODE=syscalls). M consumers for the whole run (build/ordo_bench call
# -c 0: Q.PULL BLOCK, Q.ACK RESULT, as in bench/http.sh). A warm-up of W
# RESP calls over the K keys, not counted. Then per door, alternately
# (http, resp, http, resp for R=2):
#   - http: wrk -t 1 -c C with bench/http_call.lua, STOP=N (the thread
#     stops after N responses);
#   - resp: redis-benchmark -c C -n N -r K Q.CALL Q k:<rand> <payload>
#     TIMEOUT 30000.
# The counting starts before the tool and ends once the queue is idle
# again (no waiting, no in-flight message), so every call of the phase is
# counted whole; the calls are the queue's acked counter's growth (wrk's
# stop leaves up to C-1 calls in flight, which still complete). Per call:
# the phase's Ir (or syscalls) over its calls, consumers' pulls and acks
# included (the same on both doors), plus the tool's C connections set up
# and closed, and the cron's ticks (small beside N calls).
#
# Output: per phase, Ir/call (or syscalls/call by name), and for MODE=instr
# the functions whose self cost differs most between the doors, from the
# last round (callgrind_annotate); the callgrind files are kept in OUT.
# Comparing builds: ORDOD=/path/to/other/ordod bench/instr_http.sh.
#
# Env: MODE (instr | syscalls), N (calls per phase, 5000), C (connections,
#      32), M (consumers, 8), K (keys, 1000), V (payload bytes, 64), W
#      (warm-up calls, 2000), R (rounds, 1), TOP (functions listed, 25),
#      OUT (output dir).
# The last line is the headline:
#     instr_http: http 3x,xxx Ir/call, resp 2x,xxx Ir/call: 1.xxx
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init instr_http

MODE="${MODE:-instr}"
N="${N:-5000}"
C="${C:-32}"
M="${M:-8}"
K="${K:-1000}"
V="${V:-64}"
W="${W:-2000}"
R="${R:-1}"
TOP="${TOP:-25}"
OUT="${OUT:-$ROOT/bench/out/instr_http-$(date +%Y%m%d-%H%M%S)}"
Q="httpinstr"
LOAD="$ROOT/build/ordo_bench"
[ -x "$LOAD" ] || { echo "instr_http: $LOAD is missing; run make first" >&2; exit 1; }
for c in valgrind callgrind_control callgrind_annotate redis-cli redis-benchmark wrk strace; do
    command -v "$c" >/dev/null || { echo "instr_http: needs $c (Debian: valgrind, redis-tools, wrk, strace)" >&2; exit 1; }
done
case "$MODE" in instr | syscalls) ;; *) echo "instr_http: MODE is instr or syscalls" >&2; exit 1 ;; esac
mkdir -p "$OUT"

HTTP_PORT="$(bench_free_port)"
if [ "$MODE" = instr ]; then
    # shellcheck disable=SC2034 # bench_start_ordod reads it
    BENCH_WRAP=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$BENCH_TMP/callgrind.out")
fi
bench_start_ordod ordod --fsync always --http-port "$HTTP_PORT"
BENCH_WRAP=()
bench_wait_port "$ORDO_PID" "$HTTP_PORT" || { echo "instr_http: no HTTP listener" >&2; exit 1; }
PAYLOAD="$(head -c "$V" /dev/zero | tr '\0' p)"
bench_spawn "$BENCH_TMP/consumers.log" "$LOAD" call "$ORDO_PORT" -c 0 -m "$M" -k "$K" -v "$V" -q "$Q" -d 100000

# qinfo FIELD: a counter of the queue's Q.INFO.
qinfo() {
    redis-cli -p "$ORDO_PORT" Q.INFO "$Q" | awk -v f="$1" 'p { print; exit } $0 == f { p = 1 }'
}

# settle: wait until the queue has no waiting and no in-flight message.
settle() {
    local i
    for i in $(seq 1 1200); do
        if [ "$(qinfo waiting)" = 0 ] && [ "$(qinfo inflight)" = 0 ]; then
            return 0
        fi
        sleep 0.25
    done
    echo "instr_http: the queue did not drain" >&2
    exit 1
}

resp_load() {
    redis-benchmark -p "$ORDO_PORT" -c "$C" -n "$1" -r "$K" -q Q.CALL "$Q" "k:__rand_int__" "$PAYLOAD" TIMEOUT 30000 \
        2> >(grep -v 'Could not fetch server CONFIG' >&2) >/dev/null
}

# http_load A0: wrk until the queue acked N calls past A0 (its thread stops
# at N responses, STOP; wrk itself runs until told, -d being a bound).
http_load() {
    local a0="$1" wpid i
    Q="$Q" K="$K" V="$V" STOP="$N" wrk -t 1 -c "$C" -d 3600s -s "$ROOT/bench/http_call.lua" \
        "http://127.0.0.1:$HTTP_PORT" >"$BENCH_TMP/wrk.out" 2>&1 &
    wpid=$!
    for i in $(seq 1 7200); do
        [ $(($(qinfo acked) - a0)) -ge "$N" ] && break
        kill -0 "$wpid" 2>/dev/null || break
        sleep 0.5
    done
    kill -INT "$wpid" 2>/dev/null || true
    wait "$wpid" || true
    if grep -q "Non-2xx\|Socket errors" "$BENCH_TMP/wrk.out"; then
        echo "instr_http: HTTP calls failed:" >&2
        cat "$BENCH_TMP/wrk.out" >&2
        exit 1
    fi
}

cg() {
    callgrind_control "$@" "$ORDO_PID" >>"$BENCH_TMP/callgrind_control.log" 2>&1 || {
        cat "$BENCH_TMP/callgrind_control.log" >&2
        exit 1
    }
}

# The callgrind dumps taken so far, numbered from 1.
DUMPS=0
# phase NAME DOOR: count one phase; sets CALLS and PER_CALL.
phase() {
    local name="$1" door="$2" a0 a1 spid
    a0="$(qinfo acked)"
    if [ "$MODE" = instr ]; then
        cg -z
        cg -i on
    else
        strace -c -f -q -o "$OUT/$name.strace" -p "$ORDO_PID" &
        spid=$!
        sleep 1 # strace attaches to every thread
    fi
    if [ "$door" = http ]; then http_load "$a0"; else resp_load "$N"; fi
    settle
    a1="$(qinfo acked)"
    CALLS=$((a1 - a0))
    if [ "$MODE" = instr ]; then
        cg -i off
        cg -d "$name"
        DUMPS=$((DUMPS + 1))
        cp "$BENCH_TMP/callgrind.out.$DUMPS" "$OUT/$name.callgrind"
        PER_CALL="$(awk -v n="$CALLS" '/^totals:/ { printf "%.0f", $2 / n }' "$OUT/$name.callgrind")"
    else
        kill -INT "$spid"
        wait "$spid" || true
        PER_CALL="$(awk -v n="$CALLS" '$NF == "total" { printf "%.2f", $4 / n }' "$OUT/$name.strace")"
    fi
}

# per_fn FILE CALLS: "Ir/call function" of every function, by self cost.
per_fn() {
    callgrind_annotate --inclusive=no --auto=no --threshold=100 "$1" | awk -v n="$2" '
        /file:function/ { on = 1; next }
        on && /^-+$/ { next }
        on && NF == 0 { exit }
        on { ir = $1; gsub(",", "", ir); sub(/^ *[0-9,]+ +(\( *[0-9.]+%\) +)?/, ""); sub(/ \[[^]]*\]$/, "")
             printf "%.1f %s\n", ir / n, $0 }'
}

echo "instr_http: $ORDOD, MODE=$MODE N=$N C=$C M=$M K=$K V=$V --fsync always"
resp_load "$W"
settle
declare -A res calls
for r in $(seq 1 "$R"); do
    for door in http resp; do
        phase "r$r-$door" "$door"
        res[$door]+="$PER_CALL "
        calls[$door]="$CALLS"
        printf '  round %d %-4s %6d calls  %s %s/call\n' "$r" "$door" "$CALLS" "$PER_CALL" \
            "$([ "$MODE" = instr ] && echo Ir || echo syscalls)"
    done
done

med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# shellcheck disable=SC2086
h="$(med ${res[http]})"
# shellcheck disable=SC2086
p="$(med ${res[resp]})"
if [ "$MODE" = instr ]; then
    per_fn "$OUT/r$R-http.callgrind" "${calls[http]}" >"$OUT/http.fn"
    per_fn "$OUT/r$R-resp.callgrind" "${calls[resp]}" >"$OUT/resp.fn"
    echo
    echo "Ir/call by function, self cost, the $TOP largest differences (last round; all in $OUT/diff.txt):"
    printf '%10s %10s %10s  %s\n' http resp http-resp function
    awk 'FNR == 1 { f++ } { v = $1; $1 = ""; sub(/^ /, ""); if (f == 1) h[$0] = v; else r[$0] = v; seen[$0] = 1 }
         END { for (k in seen) { d = h[k] - r[k]; printf "%.1f %10.1f %10.1f %10.1f  %s\n", d < 0 ? -d : d, h[k], r[k], d, k } }' \
        "$OUT/http.fn" "$OUT/resp.fn" | sort -g -r | cut -d' ' -f2- >"$OUT/diff.txt"
    head -n "$TOP" "$OUT/diff.txt"
    echo "instr_http: http $h Ir/call, resp $p Ir/call: $(awk -v a="$h" -v b="$p" 'BEGIN { printf "%.3f", a / b }')" | tee "$OUT/summary.txt"
else
    echo
    echo "syscalls/call by name (last round): http resp"
    for door in http resp; do
        awk -v n="${calls[$door]}" -v d="$door" '$1 ~ /^[0-9.]+$/ && $NF != "total" {
            printf "%s %s %.3f\n", d, $NF, $4 / n }' "$OUT/r$R-$door.strace"
    done | awk '{ v[$2, $1] = $3; s[$2] = 1 } END { for (k in s) printf "%8.3f %8.3f  %s\n", v[k, "http"], v[k, "resp"], k }' |
        sort -g -r | tee "$OUT/diff.txt"
    echo "instr_http: http $h syscalls/call, resp $p syscalls/call" | tee "$OUT/summary.txt"
fi
