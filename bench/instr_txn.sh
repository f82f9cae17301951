#!/usr/bin/env bash
# bench/instr_txn.sh -- ordod's user-space instructions per Q.PUSH when the
# pushes come in MULTI ... EXEC batches (as the C client's producer sends
# them) and when they come pipelined one by one, counted by callgrind: a
# figure that does not depend on the machine's load (bench/instr.sh says
# what Ir counts and what it leaves out).
#
# Method, for each form on a fresh server (--fsync no, no HTTP listener):
# ordod starts under callgrind with --instr-atstart=no; `callgrind_control
# -i on`; redis-cli --pipe sends N pushes with ID (dedup), over KEYS keys,
# PAYLOAD bytes each, either as N/B transactions of B pushes or as N plain
# commands; `-i off`, dump. Checked: every push was answered without an
# error, and the queue holds N messages.
#
# Why: the transaction's guard check once scanned the transaction's earlier
# pushes for every push (30x the pushes' own cost at B = 1000); it is a
# hash lookup now. The ratio printed is what a batch costs over plain
# pipelining; its parts are in the top functions kept in OUT.
#
# Env: N (pushes, 50000), B (pushes per transaction, 1000), KEYS (1000),
#      PAYLOAD (64), OUT (output dir).
# The last line is the headline:
#     instr_txn: MULTI x,xxx Ir/push, pipelined y,yyy Ir/push: z.zzx
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init instr_txn
N="${N:-50000}"
B="${B:-1000}"
KEYS="${KEYS:-1000}"
PAYLOAD="${PAYLOAD:-64}"
OUT="${OUT:-$ROOT/bench/out/instr_txn-$(date +%Y%m%d-%H%M%S)}"
for c in valgrind callgrind_control callgrind_annotate redis-cli; do
    command -v "$c" >/dev/null || { echo "instr_txn: needs $c (Debian: valgrind, redis-tools)" >&2; exit 1; }
done
mkdir -p "$OUT"

# pushes FORM: the RESP stream of N pushes, FORM multi or plain.
pushes() {
    /usr/bin/python3 - "$1" "$N" "$B" "$KEYS" "$PAYLOAD" <<'EOF'
import sys
form, n, b, keys, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
out = sys.stdout.buffer
def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    out.write(b"".join(parts))
payload = b"p" * size
for i in range(n):
    if form == "multi" and i % b == 0:
        cmd("MULTI")
    cmd("Q.PUSH", "bq", "k%d" % (i % keys), payload, "ID", "id%d" % i)
    if form == "multi" and (i % b == b - 1 or i == n - 1):
        cmd("EXEC")
EOF
}

# measure FORM: Ir per push of FORM; sets PER_PUSH.
measure() {
    local form="$1" file="$BENCH_TMP/callgrind.$1" total len
    pushes "$form" >"$BENCH_TMP/$form.resp"
    BENCH_WRAP=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$file")
    bench_start_ordod "$form" --fsync no
    BENCH_WRAP=()
    callgrind_control -i on "$ORDO_PID" >/dev/null 2>&1
    local res
    res="$(redis-cli -p "$ORDO_PORT" --pipe <"$BENCH_TMP/$form.resp" | tail -1)"
    callgrind_control -i off "$ORDO_PID" >/dev/null 2>&1
    case "$res" in
        "errors: 0, replies: "*) ;;
        *) echo "instr_txn: $form: $res" >&2; exit 1 ;;
    esac
    len="$(redis-cli -p "$ORDO_PORT" Q.LEN bq | head -1)"
    [ "$len" = "$N" ] || { echo "instr_txn: $form: the queue holds $len messages, not $N" >&2; exit 1; }
    callgrind_control -d "$ORDO_PID" >/dev/null 2>&1
    bench_stop "$ORDO_PID"
    # The dump (file.1) holds the pushes; the file written at exit holds
    # nothing counted (instrumentation was off).
    [ -s "$file.1" ] || { echo "instr_txn: no callgrind dump for $form" >&2; exit 1; }
    total="$(awk '/^totals:/ { print $2 }' "$file.1")"
    [ "${total:-0}" -gt 0 ] || { echo "instr_txn: no Ir counted for $form" >&2; exit 1; }
    cp "$file.1" "$OUT/$form.callgrind"
    callgrind_annotate --inclusive=no "$file.1" >"$OUT/$form.top.txt"
    PER_PUSH=$((total / N))
}

measure multi
multi="$PER_PUSH"
measure plain
plain="$PER_PUSH"
echo "instr_txn: N=$N pushes, B=$B per transaction, $KEYS keys, $PAYLOAD-byte payloads; files in $OUT"
echo "instr_txn: MULTI $multi Ir/push, pipelined $plain Ir/push: $(bench_ratio "$multi" "$plain")x"
