"""The short transaction crash run (5 kills, ~10 s) as a test: no pair
written in one MULTI/EXEC is ever half-written after a SIGKILL."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from crashlib import run_script  # noqa: E402


def test_txn_crash_short():
    rc, out = run_script("txn_crash_test.py", "--kills", "5", "--seconds", "10", timeout=180)
    assert rc == 0, out
    assert "torn=0 lost=0 phantom=0" in out, out


class _Fake:
    def __init__(self, kv):
        self.kv = kv

    def call(self, cmd, key):
        return self.kv.get(key)


def test_checker_flags_torn_lost_phantom():
    import txn_crash_test as t

    def check(kv, acked=(b"w1", 1), doubt=None):
        p = t.Pair(0, 0)
        p.acked, p.doubt = acked, doubt
        st = t.Stats()
        t.check(p, _Fake(kv), st)
        return (st.torn, st.lost, st.phantom)

    ok = {b"a:0:0": b"w1", b"b:0:0": b"w1", b"n:0:0": b"1"}
    assert check(ok) == (0, 0, 0)
    assert check({b"a:0:0": b"w2", b"b:0:0": b"w2", b"n:0:0": b"2"}, doubt=(b"w2", 2)) == (0, 0, 0)
    assert check({b"a:0:0": b"w1", b"b:0:0": b"w0", b"n:0:0": b"1"}) == (1, 0, 0)   # half-written
    assert check({b"a:0:0": b"w1", b"b:0:0": b"w1", b"n:0:0": b"2"}) == (1, 0, 0)   # INCR without the SETs
    assert check({}) == (0, 1, 0)                                                    # acked pair missing
    assert check({b"a:0:0": b"w0", b"b:0:0": b"w0", b"n:0:0": b"0"}) == (0, 1, 0)   # older than acked
    assert check({b"a:0:0": b"zz", b"b:0:0": b"zz", b"n:0:0": b"1"}) == (0, 0, 1)   # never sent
