#!/usr/bin/env bash
# bench/queue_fairness.sh -- the fairness rule at the issue's scale (the
# suite checks it scaled down): one key holding HOT (100,000) waiting
# messages, pushed first, and SMALL (100) keys holding PER (10) each. A
# consumer takes one message at a time and acks it. Under FAIRNESS
# roundrobin the rule (docs/protocol.md, "Rate limits and fairness") is
# that every ready key gets a delivery before any key gets a second, so
# the small keys are done within (SMALL + 1) x PER deliveries; under
# oldest (the default) they wait behind the hot key's older messages.
# Prints both counts and whether the rule held; exits 1 if not.
#
# Env: HOT (100000), SMALL (100), PER (10).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_init queue_fairness
bench_start_ordod ordod --fsync no
/usr/bin/python3 - "$ORDO_PORT" "${HOT:-100000}" "${SMALL:-100}" "${PER:-10}" <<'PY'
import sys, time
import redis
port, hot, small, per = (int(a) for a in sys.argv[1:5])
r = redis.Redis(port=port)

def run(q, fairness):
    assert r.execute_command("Q.CONFIG", q, "FAIRNESS", fairness, "MAXLEN", hot + small * per + 1) == b"OK"
    p = r.pipeline(transaction=False)
    for i in range(hot):
        p.execute_command("Q.PUSH", q, "hot", "h")
        if len(p) >= 5000:
            p.execute()
    for j in range(per):
        for k in range(small):
            p.execute_command("Q.PUSH", q, "s%d" % k, "s")
    p.execute()
    left, n, t0 = small * per, 0, time.monotonic()
    while left > 0:
        (m,) = r.execute_command("Q.PULL", q)
        n += 1
        left -= m[1] != b"hot"
        assert r.execute_command("Q.ACK", q, m[0], m[4]) == 1
    return n, time.monotonic() - t0

bound = (small + 1) * per
rr, rr_s = run("rr", "roundrobin")
old, old_s = run("old", "oldest")
print("queue_fairness: %d hot messages, %d keys x %d" % (hot, small, per))
print("queue_fairness: roundrobin: small keys done after %d deliveries (%.2f s); the rule's bound %d: %s"
      % (rr, rr_s, bound, "held" if rr <= bound else "BROKEN"))
print("queue_fairness: oldest: after %d deliveries (%.2f s)" % (old, old_s))
sys.exit(0 if rr <= bound else 1)
PY
