"""The short crash run (5 kills, ~20 s) as a test, and the checker's own
sanity: it must flag lost, phantom and chain violations."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crash_test  # noqa: E402
from crashlib import run_script  # noqa: E402


def test_crash_short():
    rc, out = run_script("crash_test.py", "--kills", "5", "--seconds", "20", timeout=180)
    assert rc == 0, out
    assert "lost=0 phantom=0 regressions=0 chain_errors=0" in out, out


def _key(baseline, writes):
    k = crash_test.Key(b"k")
    k.baseline = baseline
    k.writes = [list(w) for w in writes]
    return k


def _check(k, got):
    st = crash_test.Stats()
    crash_test.check_key(k, got, st)
    return st


def test_checker_flags_violations():
    w = [(b"a", "acked", 5), (b"b", "acked", 7), (b"c", "doubt", 0)]
    ok = _check(_key(None, w), [b"b", 5, 7, 2, 0])
    assert (ok.lost, ok.phantom, ok.chain) == (0, 0, 0)
    ok = _check(_key(None, w), [b"c", 5, 9, 3, 0])  # the in-doubt one landed
    assert (ok.lost, ok.phantom, ok.chain, ok.doubt_applied) == (0, 0, 0, 1)
    assert _check(_key(None, w), [b"a", 5, 5, 1, 0]).lost == 1      # older than acked
    assert _check(_key(None, w), None).lost == 1                    # acked key missing
    assert _check(_key((b"z", 3), []), None).lost == 1              # recovered key vanished
    assert _check(_key(None, w), [b"zz", 5, 9, 3, 0]).phantom == 1  # never sent
    assert _check(_key(None, w), [b"b", 5, 8, 2, 0]).chain == 1     # wrong mod_rev
    assert _check(_key(None, w), [b"c", 5, 6, 3, 0]).chain == 1     # in-doubt below acked
