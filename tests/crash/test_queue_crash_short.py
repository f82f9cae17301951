"""The short queue crash run (5 kills, ~20 s) as a test, and the checker's
own sanity: on hand-made histories it must flag every kind of violation,
and accept an ack whose reply was lost once Q.RESULT shows it applied."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import queue_crash_test as qc  # noqa: E402
from crashlib import run_script  # noqa: E402

ZERO = "lost=0 order_violations=0 overlaps=0 acked_redelivered=0 stuck=0 phantom=0 regressions=0"


def test_queue_crash_short():
    rc, out = run_script("queue_crash_test.py", "--kills", "5", "--seconds", "15", timeout=240)
    assert rc == 0, out
    assert ZERO in out, out


LEASE = 0.3


def _hist(msgs, deliveries):
    h = qc.History(LEASE)
    for key, seq, mid in msgs:
        m = qc.Msg(key, seq, b"%s:%d" % (key.encode(), seq))
        if mid is not None:
            m.state, m.id = "acked", mid
        h.msgs[m.payload] = m
    for q, mid, key, seq, token, t0, t1, verb, outcome, a0, a1 in deliveries:
        d = qc.Delivery(q, mid, key.encode(), b"%s:%d" % (key.encode(), seq), token, 1, t0, t1)
        d.verb, d.outcome, d.a0, d.a1 = verb, outcome, a0, a1
        h.deliveries.append(d)
    return h


EMPTY = {qc.Q: [0, 0, 0], qc.DLQ: [0, 0, 0]}
MSGS = [("k", 1, 10), ("k", 2, 11)]
D1 = (qc.Q, 10, "k", 1, 20, 0.00, 0.01, "ACK", 1, 0.02, 0.03)
D2 = (qc.Q, 11, "k", 2, 30, 0.03, 0.04, "ACK", 1, 0.05, 0.06)
RES = {(qc.Q, 10): b"r20", (qc.Q, 11): b"r30"}


def _check(msgs=MSGS, deliveries=(D1, D2), results=None, qlen=EMPTY):
    st = qc.Stats()
    qc.check(_hist(msgs, deliveries), dict(RES if results is None else results), qlen, st)
    return {k: getattr(st, k) for k in qc.Stats.KINDS if getattr(st, k)}, st.problems


def _with(d, **kw):
    names = ["q", "id", "key", "seq", "token", "t0", "t1", "verb", "outcome", "a0", "a1"]
    d = list(d)
    for k, v in kw.items():
        d[names.index(k)] = v
    return tuple(d)


def test_checker_accepts_correct_histories():
    assert _check() == ({}, [])
    # the ack of D1 lost its reply in a crash; Q.RESULT shows it applied
    assert _check(deliveries=(_with(D1, outcome="doubt", a1=None), D2))[0] == {}
    # the ack in doubt did not apply: redelivered after the lease, acked then
    d1 = _with(D1, outcome="doubt", a1=None)
    d1b = (qc.Q, 10, "k", 1, 25, 0.40, 0.41, "ACK", 1, 0.42, 0.43)
    d2 = _with(D2, t0=0.43, t1=0.44, a0=0.45, a1=0.46)
    assert _check(deliveries=(d1, d1b, d2), results={(qc.Q, 10): b"r25", (qc.Q, 11): b"r30"})[0] == {}
    # a stale ack (0) after the lease ran out; an in-doubt push never delivered
    d1 = _with(D1, outcome=0, a0=0.5, a1=0.51)
    d1b = (qc.Q, 10, "k", 1, 25, 0.31, 0.32, "ACK", 1, 0.33, 0.34)
    d2 = _with(D2, t0=0.34, t1=0.35, a0=0.36, a1=0.37)
    assert _check(msgs=MSGS + [("k", 3, None)], deliveries=(d1, d1b, d2),
                  results={(qc.Q, 10): b"r25", (qc.Q, 11): b"r30"})[0] == {}
    # dead-lettered, then acked from the dead-letter queue; the key moved on
    d1 = _with(D1, verb="NACK")
    dl = (qc.DLQ, 26, "k", 1, 40, 0.05, 0.06, "ACK", 1, 0.07, 0.08)
    assert _check(deliveries=(d1, dl, D2),
                  results={(qc.Q, 10): "DEADLETTER", (qc.Q, 11): b"r30", (qc.DLQ, 26): b"r40"})[0] == {}


def test_checker_flags_violations():
    assert _check(results={(qc.Q, 10): b"r20", (qc.Q, 11): None})[0] == {"lost": 1}
    assert _check(deliveries=(D1,), results={(qc.Q, 10): b"r20"})[0] == {"lost": 1}  # never delivered
    assert _check(results={(qc.Q, 10): "DEADLETTER", (qc.Q, 11): b"r30"})[0] == {"lost": 1, "acked_redelivered": 1}
    # the second message delivered (token 15) before the first (token 20)
    got = _check(deliveries=(D1, _with(D2, token=15)), results={(qc.Q, 10): b"r20", (qc.Q, 11): b"r15"})[0]
    assert got.get("order_violations", 0) >= 1
    # acks that returned 1 in the wrong order by the clock
    assert _check(deliveries=(D1, _with(D2, t0=0.0, t1=0.001, a0=0.002, a1=0.003, token=30)))[0].get(
        "order_violations", 0) >= 1
    # two in flight: D2 arrived before D1's ack was sent
    assert _check(deliveries=(D1, _with(D2, t0=0.0, t1=0.015)))[0] == {"overlaps": 1}
    # D1's ack was stale: D2 arrived before D1's lease could have run out
    d1 = _with(D1, outcome=0, a0=0.5, a1=0.51)
    d1b = (qc.Q, 10, "k", 1, 25, 0.05, 0.06, "ACK", 1, 0.07, 0.08)
    assert _check(deliveries=(d1, d1b, _with(D2, t0=0.08, t1=0.09, a0=0.1, a1=0.11)),
                  results={(qc.Q, 10): b"r25", (qc.Q, 11): b"r30"})[0] == {"overlaps": 1}
    # acked (1), then delivered again
    again = (qc.Q, 10, "k", 1, 25, 0.035, 0.036, None, None, None, None)
    assert _check(deliveries=(D1, again, _with(D2, t0=0.9, t1=0.91, a0=0.92, a1=0.93)))[0] == \
        {"acked_redelivered": 2}
    # stuck, phantom, a result that names no ack of ours
    assert _check(qlen={qc.Q: [1, 0, 0], qc.DLQ: [0, 0, 0]})[0] == {"stuck": 1}
    assert _check(deliveries=(D1, D2, (qc.Q, 12, "k", 9, 31, 0.1, 0.11, "ACK", 1, 0.12, 0.13)),
                  results=dict(RES, **{}))[0].get("phantom") == 1
    assert _check(results={(qc.Q, 10): b"r20", (qc.Q, 11): b"r99"})[0].get("phantom") == 1


def test_checker_ack_sent_to_a_dead_server_ends_nothing():
    d1 = _with(D1, outcome="doubt", a0=0.02, a1=None)
    d1b = (qc.Q, 10, "k", 1, 25, 0.05, 0.06, "ACK", 1, 0.07, 0.08)  # before D1's lease could run out
    d2 = _with(D2, t0=0.08, t1=0.09, a0=0.1, a1=0.11)
    res = {(qc.Q, 10): b"r25", (qc.Q, 11): b"r30"}
    for killed, want in ((0.5, {}), (0.015, {"overlaps": 1})):  # the ack reached a live server / a dead one
        h = _hist(MSGS, (d1, d1b, d2))
        h.killed_at[0] = killed
        st = qc.Stats()
        qc.check(h, res, EMPTY, st)
        assert {k: getattr(st, k) for k in qc.Stats.KINDS if getattr(st, k)} == want, st.problems
