"""The power-loss runs (crash_test.py --powerloss) as tests: each kill is a
power loss, after which only what ordod synced survives (files as of their
last fsync, directory entries as of the directory's fsync; the shim
tests/shim/powerloss.c and powerloss.py). Under --fsync always, with
snapshots (the crash runs' small thresholds), and with group commit, no
acknowledged write may be lost; under --fsync no the same model must see
losses, or it tests nothing. scripts/crash-powerloss-long.sh runs many
more rounds."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crashlib  # noqa: E402
import powerloss  # noqa: E402
from crashlib import DEFAULT_EXTRA, client, run_script  # noqa: E402

GROUP_COMMIT = ["--fsync-interval-ms", "5", "--fsync-batch-max", "64"]


def _run(*extra, kills=5, seconds=10):
    argv = ["--kills", str(kills), "--seconds", str(seconds), "--powerloss"]
    if extra:
        argv += ["--"] + DEFAULT_EXTRA + list(extra)
    return run_script("crash_test.py", *argv, timeout=240)


def test_powerloss_fsync_always_with_snapshots():
    rc, out = _run()
    assert rc == 0, out
    assert "lost=0 phantom=0 regressions=0 chain_errors=0" in out, out


def test_powerloss_group_commit_with_snapshots():
    rc, out = _run(*GROUP_COMMIT)
    assert rc == 0, out
    assert "lost=0 phantom=0 regressions=0 chain_errors=0" in out, out


def test_powerloss_model_sees_losses_without_fsync():
    """The harness's own check: nothing is synced under --fsync no, so a
    power loss takes acknowledged writes, and the run must say so."""
    rc, out = _run("--fsync", "no", kills=3, seconds=4)
    assert rc == 1, out
    lost = int(re.search(r" lost=(\d+) ", out).group(1))
    assert lost > 0, out
