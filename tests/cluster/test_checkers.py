"""The checkers' own tests (tests/cluster/checkers.py): for each, hand-made
histories that must be flagged and ones that must not. Runs without ordod."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkers import (double_acks, lock_token_violations, lost_acks, minority_acks,  # noqa: E402
                      queue_lost, queue_order_violations, reused_revisions, stale_reads, two_leaders,
                      watch_violations)


def w(key, value, status="ok", rev=None, t0=0.0, t1=0.0):
    return {"key": key, "value": value, "status": status, "rev": rev, "t0": t0, "t1": t1}


def rd(key, value, rev, t0, t1=None):
    return {"key": key, "value": value, "rev": rev, "t0": t0, "t1": t0 if t1 is None else t1}


# ---- lost acks ----------------------------------------------------------------

WRITES = [w("a", "a1", rev=5, t0=1, t1=2), w("a", "a2", rev=7, t0=3, t1=4), w("a", "a3", "doubt", t0=5),
          w("b", "b1", "doubt", t0=1)]


def test_lost_acks_allows_last_acked_or_later_doubt():
    assert lost_acks(WRITES, {"a": ("a2", 7)}) == 0
    assert lost_acks(WRITES, {"a": ("a3", 9)}) == 0            # the in-doubt one landed
    assert lost_acks(WRITES, {"a": ("a2", 7), "b": ("b1", 3)}) == 0
    assert lost_acks(WRITES, {"a": ("a2", 7)}) == 0            # b never acked: absent is fine


def test_lost_acks_flags_older_missing_and_rev_regression():
    assert lost_acks(WRITES, {"a": ("a1", 5)}) == 1            # older than the last ack
    assert lost_acks(WRITES, {}) == 1                          # acked key missing
    assert lost_acks(WRITES, {"a": (None, 0)}) == 1
    assert lost_acks(WRITES, {"a": ("zz", 9)}) == 1            # a value never written there
    assert lost_acks(WRITES, {"a": ("a2", 6)}) == 1            # below the revision acked
    assert lost_acks([w("s", "x1", t0=1, t1=2), w("s", "x2", t0=3, t1=4)], {"s": ("x1", None)}) == 1  # SET: no rev


def test_lost_acks_held_doubt_may_land_after_a_later_ack():
    held = [w("a", "a0", "doubt", t0=0.5)] + WRITES
    assert lost_acks(held, {"a": ("a0", 9)}) == 1                   # by default: older than the last ack
    assert lost_acks(held, {"a": ("a0", 9)}, held_doubt=True) == 0  # held, applied after a2 (rev 7)
    assert lost_acks(held, {"a": ("a0", 7)}, held_doubt=True) == 1  # not after a2: a2's value is gone
    assert lost_acks(held, {"a": ("a1", 9)}, held_doubt=True) == 1  # a1 was acked, not in doubt
    assert lost_acks(held, {"b": ("b1", 9)}, held_doubt=True) == 1  # a missing still counts


# ---- reused revisions ---------------------------------------------------------

def test_reused_revisions():
    assert reused_revisions([(5, "a", "a1"), (7, "a", "a2"), (5, "a", "a1"), (9, "b", "b1")]) == 0
    assert reused_revisions([(5, "a", "a1"), (5, "a", "a2")]) == 1      # one rev, two values
    assert reused_revisions([(5, "a", "a1"), (5, "b", "a1")]) == 1      # one rev, two keys
    assert reused_revisions([(5, "a", "x"), (5, "a", "y"), (5, "a", "z"), (6, "b", "p"), (6, "c", "p")]) == 2
    assert reused_revisions([(0, "a", None), (0, "b", None), (None, "c", "v")]) == 0   # absent keys


# ---- stale reads --------------------------------------------------------------

def test_stale_reads_by_revision():
    ws = [w("k", "v1", rev=10, t0=0, t1=1), w("k", "v2", rev=12, t0=2, t1=3), w("k", "v3", "doubt", t0=4)]
    ok = [rd("k", "v2", 12, t0=3.5), rd("k", "v1", 10, t0=2.5),     # v2 not acked yet when it began
          rd("k", "v3", 15, t0=3.5), rd("k", None, 0, t0=0.5),      # nothing acked before it began
          rd("k", "v2", 12, t0=1.5, t1=9)]
    assert stale_reads(ws, ok) == 0
    assert stale_reads(ws, [rd("k", "v1", 10, t0=3.5)]) == 1         # began after v2's ack
    assert stale_reads(ws, [rd("k", None, 0, t0=1.5)]) == 1          # missing after an ack
    assert stale_reads(ws, [rd("k", "v1", 10, t0=3.5), rd("k", "v2", 12, t0=4), rd("k", "v1", 10, t0=9)]) == 2


def test_stale_reads_by_value_for_set():
    ws = [w("s", "x1", t0=0, t1=1), w("s", "x2", t0=2, t1=3), w("s", "x3", "doubt", t0=4)]
    assert stale_reads(ws, [rd("s", "x2", None, t0=3.5), rd("s", "x3", None, t0=5),
                            rd("s", "x1", None, t0=2.5)]) == 0
    assert stale_reads(ws, [rd("s", "x1", None, t0=3.5)]) == 1
    assert stale_reads(ws, [rd("s", None, None, t0=1.5)]) == 1


# ---- two leaders in a term ------------------------------------------------------

def s(node, term, role, leader, t=0.0):
    return {"t": t, "node": node, "term": term, "role": role, "leader": leader}


def test_two_leaders():
    ok = [s(1, 2, "leader", 1), s(2, 2, "follower", 1), s(3, 3, "candidate", 0), s(2, 3, "leader", 2),
          s(1, 2, "leader", 1), s(3, 3, "follower", 2), s(1, 3, "follower", 2)]
    assert two_leaders(ok) == 0
    assert two_leaders(ok + [s(3, 3, "leader", 3)]) == 1              # 2 and 3 both lead term 3
    assert two_leaders([s(1, 4, "leader", 1), s(2, 4, "leader", 2), s(3, 4, "leader", 3),
                        s(1, 5, "leader", 1), s(2, 5, "leader", 2)]) == 2
    assert two_leaders([s(1, 4, "leader", 2)]) == 1                   # a leader naming another
    assert two_leaders([s(1, 4, "follower", 2), s(2, 4, "follower", 3)]) == 0   # followers only


# ---- queues -------------------------------------------------------------------

def push(key, seq, status="ok", id_=None):
    return {"key": key, "seq": seq, "status": status, "id": id_ if id_ is not None else 100 + seq}


def dl(key, seq, token, id_=None):
    return {"key": key, "seq": seq, "id": id_ if id_ is not None else 100 + seq, "token": token}


def ack(id_, token, status="ok", reply=1):
    return {"id": id_, "token": token, "status": status, "reply": reply}


PUSHES = [push("k", 0), push("k", 1), push("k", 2), push("j", 0, id_=200)]


def test_queue_order_allows_redelivery_in_order():
    # 1 delivered twice (its first delivery's ack was lost), tokens increasing
    ds = [dl("k", 0, 10), dl("k", 1, 12), dl("k", 1, 15), dl("k", 2, 16), dl("j", 0, 11, 200)]
    assert queue_order_violations(PUSHES, ds) == 0
    assert queue_order_violations(PUSHES, list(reversed(ds))) == 0    # sorted by token
    # a push in doubt that never landed may be skipped
    assert queue_order_violations([push("q", 0), push("q", 1, "doubt"), push("q", 2)],
                                  [dl("q", 0, 1), dl("q", 2, 3)]) == 0


def test_queue_order_flags_going_back_and_skipping():
    assert queue_order_violations(PUSHES, [dl("k", 0, 10), dl("k", 2, 12), dl("k", 1, 13)]) == 2  # skip, back
    assert queue_order_violations(PUSHES, [dl("k", 1, 10), dl("k", 0, 12)]) == 2  # skip 0, then back
    assert queue_order_violations(PUSHES, [dl("k", 0, 10), dl("k", 1, 11), dl("k", 0, 12)]) == 1


def test_queue_lost():
    ds = [dl("k", 0, 10), dl("k", 1, 12), dl("k", 2, 16)]
    acks = [ack(100, 10), ack(101, 12, "doubt", None), ack(102, 16)]
    assert queue_lost(PUSHES[:3], acks, ds) == 0
    assert queue_lost(PUSHES[:3], acks[:2], ds) == 1                      # 102 never acked
    assert queue_lost(PUSHES[:3], [ack(100, 10), ack(101, 12, reply=0), ack(102, 16)], ds) == 1
    assert queue_lost([push("k", 5, "doubt")], [], []) == 0               # never acked push


def test_double_acks():
    assert double_acks([ack(100, 10), ack(100, 10, reply=0), ack(101, 11), ack(101, 13, "doubt", None)]) == 0
    assert double_acks([ack(100, 10), ack(100, 12)]) == 1                 # two deliveries, both acked 1
    assert double_acks([ack(100, 10), ack(100, 10), ack(101, 11), ack(101, 11)]) == 2


# ---- lock tokens --------------------------------------------------------------

def g(token, t0, t1):
    return {"token": token, "t0": t0, "t1": t1}


def test_lock_tokens():
    assert lock_token_violations([g(5, 0, 1), g(9, 2, 3), g(20, 4, 5)]) == 0
    assert lock_token_violations([g(9, 0, 3), g(5, 1, 2)]) == 0          # concurrent: no order
    assert lock_token_violations([g(9, 0, 1), g(5, 2, 3)]) == 1          # went down after failover
    assert lock_token_violations([g(9, 0, 1), g(9, 2, 3)]) == 2          # a token handed out twice
    assert lock_token_violations([g(5, 0, 1), g(9, 2, 3), g(7, 4, 5), g(8, 6, 7)]) == 2


# ---- partitioned minority -----------------------------------------------------

def a(node, status, t0):
    return {"node": node, "status": status, "t0": t0}


def test_minority_acks():
    hist = [a(1, "ok", 0.5), a(1, "doubt", 1.5), a(1, "err", 2), a(2, "ok", 2), a(3, "ok", 2.5), a(1, "ok", 6)]
    assert minority_acks(hist, {1}, 1.0, 5.0) == 0   # before the cut, after the heal, majority side
    assert minority_acks(hist + [a(1, "ok", 3)], {1}, 1.0, 5.0) == 1
    assert minority_acks(hist + [a(1, "ok", 1.0), a(1, "ok", 4.9)], {1}, 1.0, 5.0) == 2


# ---- a watch across failovers ---------------------------------------------------

def ev(rev, key, value, kind="put"):
    return {"rev": rev, "kind": kind, "key": key, "value": value}


def test_watch_violations():
    ws = [w("a", "a1", rev=5), w("b", "b1", rev=6), w("a", "a2"), w("b", "b2", "doubt")]
    evs = [ev(5, "a", "a1"), ev(6, "b", "b1"), ev(7, "a", "a2"), ev(9, "x", "other")]
    assert watch_violations(ws, evs) == 0
    assert watch_violations(ws + [w("c", "c1", rev=20)], evs) == 0     # beyond the last event: not yet due
    assert watch_violations(ws, [evs[0], evs[2], evs[3]]) == 1        # a gap: rev 6 missing
    assert watch_violations(ws, evs[:2] + [ev(6, "b", "b1")] + evs[2:]) == 1   # a duplicate
    assert watch_violations(ws, [evs[1], evs[0], evs[2], evs[3]]) == 1         # going back
    assert watch_violations(ws, [evs[0], ev(6, "b", "zz"), evs[2], evs[3]]) == 1   # another value at 6
    assert watch_violations(ws, evs[:2] + [evs[3]]) == 1              # the SET's value never seen
