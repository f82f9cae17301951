#!/usr/bin/env bash
# bench/instr.sh -- ordod's user-space instructions per SET and per GET,
# counted by valgrind's callgrind: a figure that does not depend on the
# machine's load, so a refactor can be judged by it ("Ir per SET and per
# GET go down, not up").
#
# What is counted: every instruction ordod executes in user space, in its
# own code and in the libraries it calls (libc, libuv), on all its threads,
# while a measured phase runs (callgrind's Ir). Not counted: the kernel's
# work inside syscalls (read, write, epoll_wait, fsync), so this is not a
# measure of time; bench/kv.sh and bench/durable.sh are.
#
# Method, per pipeline depth P in PIPES, on a fresh server each time:
#   1. ordod starts under callgrind with --instr-atstart=no on a free
#      loopback port (bench_start_ordod) with a temp data dir, --fsync
#      $FSYNC and --history-revs $HIST: start-up and recovery are not
#      counted.
#   2. Warm-up, not counted: N SETs over KEYS keys (redis-benchmark -r), so
#      every key exists (checked with DBSIZE) and the history is full.
#   3. SET phase: `callgrind_control -i on`, redis-benchmark -t set -n N
#      -c 1 -P P -r KEYS, `callgrind_control -i off`, `callgrind_control -d`.
#      Each SET overwrites a live key, and, the history being full, each
#      write's automatic compaction frees a version: the steady state of a
#      long-running server. Checked: the revision grew by exactly N.
#   4. GET phase, likewise: N GETs of live keys (every one a hit).
#      Checked: the revision did not move.
#   Ir per op is the phase's total Ir over N. It includes redis-benchmark's
#   two connections per phase (one asks CONFIG GET) and the cron's 10
#   wake-ups a second (about 1,200 Ir each, so about 12,000 Ir a second):
#   together under 0.1% of a phase at N=20000.
#
# Choices, and why:
#   - FSYNC=no (default) isolates the CPU work: every write still goes to
#     the log (write(2) into the page cache, from the loop thread, which
#     writes any batch itself under no and everysec). FSYNC=always adds the
#     fsync calls, whose cost is in the kernel and so mostly not counted;
#     its figures are a little above those of no.
#   - HIST=1000 (ordod's default is 100000) so that the warm-up fills the
#     history and compaction runs during the measured SETs, as it does on
#     any server that has run for a while.
#   - One connection (-c 1): P=1 is one request per loop turn, the per-
#     request cost with nothing amortised; P=16 amortises the reads, the
#     turn and the log write over 16 requests.
# Repeatability: on one build, rounds and runs agree to within 3 Ir per op
# (0.1%): what varies is how requests fall into loop turns, and the cron.
# R rounds (default 2) give median (min..max).
#
# Comparing two builds: build each (e.g. `git worktree add /tmp/before
# <commit> && make -C /tmp/before build`), then
#     ORDOD=/tmp/before/build/ordod bench/instr.sh
#     ORDOD=build/ordod bench/instr.sh          (or: bench/instr.sh PATH)
# and compare the two `instr:` lines; a change smaller than the min..max
# spread is noise. The top functions of each phase (self and inclusive
# cost, callgrind_annotate) and the callgrind files themselves are kept in
# bench/out/instr-<time>/ (gitignored); `callgrind_annotate FILE` or
# kcachegrind opens them.
#
# Usage: bench/instr.sh [ORDOD]   (default $ORDOD, else build/ordod: `make build`)
# Env: N (requests per phase, 20000), KEYS (keyspace, 1000), PIPES
#      ("1 16"), FSYNC (no), HIST (1000), R (rounds, 2), OUT (output dir).
# Needs valgrind and redis-tools (Debian packages). The last line is the
# headline, for the first P in PIPES:
#     instr: SET 4,9xx Ir/op, GET 2,2xx Ir/op (N=20000, P=1)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ORDOD="${1:-${ORDOD:-$ROOT/build/ordod}}"
N="${N:-20000}"
KEYS="${KEYS:-1000}"
PIPES="${PIPES:-1 16}"
FSYNC="${FSYNC:-no}"
HIST="${HIST:-1000}"
R="${R:-2}"
OUT="${OUT:-$ROOT/bench/out/instr-$(date +%Y%m%d-%H%M%S)}"
# Functions listed per phase in the output files.
TOP=10

missing=()
for c in valgrind:valgrind callgrind_control:valgrind callgrind_annotate:valgrind \
    redis-benchmark:redis-tools redis-cli:redis-tools; do
    command -v "${c%%:*}" >/dev/null 2>&1 || missing+=("${c##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "instr: needs $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')(Debian: apt-get install valgrind redis-tools)" >&2
    exit 1
fi
if [ ! -x "$ORDOD" ]; then
    echo "instr: $ORDOD is missing; run make build first" >&2
    exit 1
fi
if [ "$N" -lt $((KEYS * 10)) ]; then
    # With N draws over KEYS keys, a key is missed with probability about
    # e^(-N/KEYS); at 10 draws a key that is e^-10, rare but the check in
    # warm_up() would stop the run.
    echo "instr: N ($N) should be at least 10 times KEYS ($KEYS), so the warm-up sets every key" >&2
    exit 1
fi
ORDOD="$(cd "$(dirname "$ORDOD")" && pwd)/$(basename "$ORDOD")"
BENCH_TMP="$(mktemp -d /tmp/ordo-bench-instr.XXXXXX)"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$OUT"

# commas N: N rounded to an integer, with thousands separators.
commas() {
    printf '%.0f\n' "$1" | sed -e ':a' -e 's/^\([0-9]\+\)\([0-9]\{3\}\)/\1,\2/' -e 'ta'
}

# info PORT FIELD: one field of the INFO of the ordod on PORT.
info() {
    redis-cli -p "$1" INFO | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# load TEST P: N requests of TEST over KEYS keys, one connection, P deep.
# redis-benchmark warns that it cannot read ordod's CONFIG (save,
# appendonly); that is expected, so only that line is dropped.
load() {
    redis-benchmark -h 127.0.0.1 -p "$ORDO_PORT" -t "$1" -n "$N" -c 1 -P "$2" -r "$KEYS" -q \
        2> >(grep -v 'Could not fetch server CONFIG' >&2) >/dev/null
}

# cg CMD...: a callgrind_control command to the ordod under test; its
# chatter goes to a log, a failure stops the run.
cg() {
    if ! callgrind_control "$@" "$ORDO_PID" >>"$BENCH_TMP/callgrind_control.log" 2>&1; then
        cat "$BENCH_TMP/callgrind_control.log" >&2
        exit 1
    fi
}

# top FILE MODE: the TOP most costly functions of a callgrind file, by
# self cost (MODE no) or inclusive cost (MODE yes), each with its Ir per
# request first. Inclusively,
# callgrind_annotate lists a function once more under the file its
# inlined code came from, without an object ("[...]"); those repeats are
# dropped.
top() {
    callgrind_annotate --inclusive="$2" "$1" | awk -v n="$TOP" -v incl="$2" -v ops="$N" '
        /file:function/ { on = 1; next }
        on && /^-+$/ { next }
        on && incl == "yes" && !/ \[[^]]*\]$/ { next }
        on && NF > 0 && k < n { ir = $1; gsub(",", "", ir); printf "%8.1f/op  %s\n", ir / ops, $0; k++ }'
}

# The callgrind dumps of the server under test so far; they are numbered
# from 1 in the order taken.
DUMPS=0
# phase NAME TEST P: count one phase; sets PHASE_IR to its total Ir. (No
# function here runs in a $(...) subshell: a server it started would be
# missing from BENCH_PIDS, and its exit would not end the script.)
phase() {
    local name="$1" test="$2" p="$3" file total
    cg -z
    cg -i on
    load "$test" "$p"
    cg -i off
    cg -d "$name"
    DUMPS=$((DUMPS + 1))
    file="$BENCH_TMP/callgrind.out.$DUMPS"
    if ! grep -qx "desc: Trigger: dump $name" "$file" 2>/dev/null; then
        echo "instr: callgrind dump $file is not phase $name" >&2
        exit 1
    fi
    cp "$file" "$OUT/$name.callgrind"
    {
        echo "# $name: top $TOP functions by self cost (Ir)"
        top "$file" no
        echo
        echo "# $name: top $TOP functions by inclusive cost (Ir)"
        top "$file" yes
    } >"$OUT/$name.top.txt"
    total="$(awk '/^totals:/ { print $2 }' "$file")"
    if [ -z "$total" ] || [ "$total" -le 0 ]; then
        echo "instr: no Ir in $file" >&2
        exit 1
    fi
    PHASE_IR="$total"
}

# run_round ROUND P: one fresh server, warm-up, the SET and GET phases;
# sets SET_OP and GET_OP to their Ir per request.
run_round() {
    local round="$1" p="$2" rev0 rev1 rev2 set_ir get_ir n_keys
    DUMPS=0
    # shellcheck disable=SC2034 # bench_start_ordod reads it
    BENCH_WRAP=(valgrind --tool=callgrind --instr-atstart=no
        --callgrind-out-file="$BENCH_TMP/callgrind.out")
    bench_start_ordod "ordod-$round-P$p" --fsync "$FSYNC" --history-revs "$HIST"
    # shellcheck disable=SC2034
    BENCH_WRAP=()
    load set "$p"
    n_keys="$(redis-cli -p "$ORDO_PORT" DBSIZE)"
    if [ "$n_keys" != "$KEYS" ]; then
        echo "instr: the warm-up left $n_keys keys, not $KEYS; GETs would miss" >&2
        exit 1
    fi
    rev0="$(info "$ORDO_PORT" revision)"
    phase "r$round-set-P$p" set "$p"
    set_ir="$PHASE_IR"
    rev1="$(info "$ORDO_PORT" revision)"
    phase "r$round-get-P$p" get "$p"
    get_ir="$PHASE_IR"
    rev2="$(info "$ORDO_PORT" revision)"
    if [ $((rev1 - rev0)) -ne "$N" ] || [ "$rev2" -ne "$rev1" ]; then
        echo "instr: revisions $rev0 -> $rev1 -> $rev2: the SET phase did not apply exactly $N writes" >&2
        exit 1
    fi
    bench_stop "$ORDO_PID"
    SET_OP="$(awk -v v="$set_ir" -v n="$N" 'BEGIN { printf "%.1f", v / n }')"
    GET_OP="$(awk -v v="$get_ir" -v n="$N" 'BEGIN { printf "%.1f", v / n }')"
}

echo "instr: $ORDOD ($(valgrind --version), redis-benchmark $(redis-benchmark --version | awk '{print $2}'))"
echo "instr: N=$N per phase, KEYS=$KEYS, one connection, --fsync $FSYNC --history-revs $HIST, R=$R rounds"
echo "instr: user-space instructions of ordod (all threads, libc and libuv included); the kernel's syscall work is not counted"

declare -A res
for r in $(seq 1 "$R"); do
    for p in $PIPES; do
        run_round "$r" "$p"
        res[set,$p]+="$SET_OP "
        res[get,$p]+="$GET_OP "
        printf '  round %d P=%-2s SET %8.1f Ir/op  GET %8.1f Ir/op\n' "$r" "$p" "$SET_OP" "$GET_OP"
    done
done

# bench_stats rounds to integers; the spread is worth one decimal here.
stats1() {
    printf '%s\n' "$@" | sort -g | awk '
        { v[NR] = $1 }
        END {
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.1f %.1f %.1f\n", m, v[1], v[NR]
        }'
}

echo
{
    echo "instr: $ORDOD, N=$N KEYS=$KEYS --fsync $FSYNC --history-revs $HIST R=$R"
    for p in $PIPES; do
        for t in set get; do
            # shellcheck disable=SC2086
            read -r m lo hi <<<"$(stats1 ${res[$t,$p]})"
            printf '%s P=%-2s median %8.1f Ir/op (min %.1f, max %.1f)\n' "${t^^}" "$p" "$m" "$lo" "$hi"
        done
    done
} | tee "$OUT/summary.txt"
echo "instr: per-phase top functions and callgrind files in $OUT"
# The headline last: the first P in PIPES.
# shellcheck disable=SC2086 # PIPES is a list
for p in $(printf '%s\n' $PIPES | tac); do
    # shellcheck disable=SC2086
    read -r sm _ _ <<<"$(stats1 ${res[set,$p]})"
    # shellcheck disable=SC2086
    read -r gm _ _ <<<"$(stats1 ${res[get,$p]})"
    echo "instr: SET $(commas "$sm") Ir/op, GET $(commas "$gm") Ir/op (N=$N, P=$p)" | tee -a "$OUT/summary.txt"
done
