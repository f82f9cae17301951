#!/usr/bin/env bash
# bench/watch_history.sh -- a watcher resumes after a million queue
# operations (issue 24: watch history must not be eaten by queue traffic).
#
# One ordod (default --history-revs, so the window is 100000 key changes):
# two puts under w/ (the watcher's last revision R), a deletion of w/a,
# OPS queue messages pushed and delivered (Q.PUSH, then Q.PULL COUNT 1000
# NOACK: two revisions a message), then UNRELATED puts of keys outside w/.
# A KV.WATCH w/ PREFIX FROM R must then answer the deletion as its first
# event, not COMPACTED or a reset, however far the revision moved. Prints
# the revisions spent, the history's size (INFO kv) and how long each
# phase took. Loads go through redis-cli --pipe.
#
# Env: OPS (default 1000000), UNRELATED (default 3000), HIST (default
# 100000, --history-revs).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init watch_history

OPS="${OPS:-1000000}"
UNRELATED="${UNRELATED:-3000}"
HIST="${HIST:-100000}"
PULLS=$(((OPS + 999) / 1000))

cli() { redis-cli -h 127.0.0.1 -p "$ORDO_PORT" "$@"; }

# pipe FILE N: redis-cli --pipe FILE, which must get N replies and no error.
pipe() {
    local out
    out="$(redis-cli -h 127.0.0.1 -p "$ORDO_PORT" --pipe <"$1" 2>&1)"
    grep -q "errors: 0, replies: $2" <<<"$out" || { echo "bench: load failed: $out" >&2; exit 1; }
}

gen() { # gen FILE N FORMAT: N RESP commands from FORMAT's words, %d replaced by the index
    /usr/bin/python3 - "$2" "$3" >"$1" <<'PY'
import sys
n, words = int(sys.argv[1]), sys.argv[2].split()
out = sys.stdout.buffer
head = b"*%d\r\n" % len(words)
for i in range(n):
    parts = [head]
    for w in words:
        a = w.replace("%d", str(i)).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    out.write(b"".join(parts))
PY
}

gen "$BENCH_TMP/push.resp" "$OPS" "Q.PUSH jobs k%d payload"
gen "$BENCH_TMP/pull.resp" "$PULLS" "Q.PULL jobs COUNT 1000 NOACK"
gen "$BENCH_TMP/other.resp" "$UNRELATED" "SET other/%d v"

bench_start_ordod ordod --fsync no --history-revs "$HIST"
cli KV.PUT w/a 1 >/dev/null
R="$(cli KV.PUT w/b 2)"
cli KV.DEL w/a >/dev/null
t0=$(date +%s.%N)
pipe "$BENCH_TMP/push.resp" "$OPS"
t1=$(date +%s.%N)
pipe "$BENCH_TMP/pull.resp" "$PULLS"
t2=$(date +%s.%N)
pipe "$BENCH_TMP/other.resp" "$UNRELATED"
t3=$(date +%s.%N)
[ "$(cli Q.LEN jobs | head -1)" = 0 ] || { echo "bench: the queue was not drained" >&2; exit 1; }

first="$(python3 - "$ORDO_PORT" "$R" "$ROOT" <<'PY'
import sys
sys.path.insert(0, sys.argv[3] + "/tests/pylib")
from resp import Conn, Push
with Conn(int(sys.argv[1]), timeout=60) as c:
    c.call("HELLO", "3")
    wid = c.call("KV.WATCH", "w/", "PREFIX", "FROM", sys.argv[2])
    if not isinstance(wid, int):
        print("refused: %r" % (wid,))
        sys.exit(0)
    ev = c.read()
    print(" ".join(x.decode() if isinstance(x, bytes) else str(x) for x in ev))
PY
)"
info="$(cli INFO kv | tr -d '\r' | grep -E '^(revision|history_changes|history_bytes|watch_resumable_revision):' | tr '\n' ' ')"
echo "watch_history: OPS=$OPS queue messages (push + NOACK delivery), UNRELATED=$UNRELATED puts, --history-revs $HIST"
echo "  watcher's revision R=$R; $info"
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v n="$OPS" 'BEGIN {
    printf "  push %.2fs (%.0f/s), deliver %.2fs (%.0f/s), unrelated puts %.2fs\n", b - a, n / (b - a), c - b, n / (c - b), d - c }'
echo "  KV.WATCH w/ PREFIX FROM $R, first event: $first"
case "$first" in
    *" del w/a"*) echo "watch_history: resumed with the deletion, no reset" ;;
    *) echo "watch_history: FAILED: the watcher did not resume" >&2; exit 1 ;;
esac
