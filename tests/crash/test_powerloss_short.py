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
def test_powerloss_on_a_first_start_keeps_acknowledged_writes(tmp_path):
    """A fresh server made its log directory and never synced its parent: a
    power loss before the first snapshot took the whole log (every write
    acknowledged under --fsync always)."""
    class Args:
        ordod = os.path.join(crashlib.ROOT, os.environ.get("ORDOD", "build/ordod"))
        extra = []
    base, srv = crashlib.new_run(str(tmp_path) + "/pl-", Args)
    shadow = os.path.join(base, "shadow")
    srv.env = powerloss.env(os.path.join(os.path.dirname(Args.ordod), powerloss.SHIM_NAME), srv.dir, shadow)
    srv.start()
    c = client(srv.port)
    revs = [c.call("KV.PUT", "k%d" % i, "v%d" % i) for i in range(20)]
    c.close()
    srv.kill()
    powerloss.rebuild(srv.dir, shadow)
    srv.start()
    c = client(srv.port)
    try:
        assert c.call("KV.REV")[0] >= revs[-1]
        assert c.call("GET", "k19") == b"v19"
    finally:
        c.close()
        assert srv.stop() == 0
