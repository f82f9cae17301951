"""Deadlines follow a monotonic clock, not the wall clock (issue 14, item 2).

The writer's clock was CLOCK_REALTIME, kept from going back: a forward step
of 60 s ended a 30 s lock 0.15 s after it was granted (another client got
it) and expired a 30 s key; a backward step froze the clock, so a BLOCK
300 waited until the wall clock caught up. These tests step the wall clock
of the ordod process alone, with an LD_PRELOAD shim (tests/shim/
clockstep.c, built beside ordod as libclockstep.so), and check that every
deadline still runs its real length."""
import os
import struct
import time

import pytest

from conftest import ORDOD

SHIM = os.path.join(os.path.dirname(ORDOD), "libclockstep.so")


@pytest.fixture
def stepped(ordod_factory, tmp_path, monkeypatch):
    """start(*flags) -> (server, step(seconds)): an ordod whose wall clock
    the test moves by `seconds` (cumulative; negative goes back)."""
    if not os.path.exists(SHIM):
        pytest.fail("missing %s: build the test shim (make)" % SHIM)
    step_file = tmp_path / "clock-step"
    step_file.write_bytes(struct.pack("<q", 0))
    monkeypatch.setenv("LD_PRELOAD", SHIM)
    monkeypatch.setenv("ORDO_TEST_CLOCK_STEP_FILE", str(step_file))
    # The ASan runtime wants to come first among preloaded libraries.
    monkeypatch.setenv("ASAN_OPTIONS", os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    total = [0]

    def step(seconds):
        total[0] += int(seconds * 1e9)
        with open(step_file, "r+b") as f:
            f.write(struct.pack("<q", total[0]))

    def start(*flags):
        return ordod_factory(*flags), step

    return start


def test_forward_step_ends_no_deadline_early(stepped):
    srv, step = stepped()
    with srv.raw() as a, srv.raw() as b:
        token = a.call("LOCK.ACQUIRE", "lk", "30000")
        assert isinstance(token, int) and token > 0
        assert a.call("SET", "ttl-key", "v", "PX", "30000") == "OK"
        lease = a.call("LEASE.GRANT", "30000")
        assert a.call("KV.PUT", "leased", "v", "LEASE", str(lease)) > 0
        wall = a.call("TIME")
        step(60)
        # Every command runs the writer's due deadlines first: with the
        # wall clock as the writer's clock, these saw 60 s pass.
        assert b.call("LOCK.ACQUIRE", "lk", "30000") is None  # still held by a
        assert b.call("GET", "ttl-key") == b"v"
        assert b.call("KV.GET", "leased")[0] == b"v"
        # TIME still tells the (stepped) wall clock: only deadlines ignore steps.
        assert int(b.call("TIME")[0]) >= int(wall[0]) + 59


def test_backward_step_freezes_no_deadline(stepped):
    srv, step = stepped()
    with srv.raw(timeout=20.0) as c:
        assert c.call("SET", "ttl-key", "v", "PX", "200") == "OK"
        step(-300)
        t0 = time.monotonic()
        assert c.call("Q.PULL", "q", "BLOCK", "300") == []
        waited = time.monotonic() - t0
        # 300 ms of real time, not the 300 s it takes the stepped-back
        # wall clock to catch up (bounded well below the client timeout).
        assert 0.29 <= waited < 10, waited
        # The key's 200 ms passed in real time, whatever the wall clock says.
        assert c.call("GET", "ttl-key") is None


def test_restart_after_backward_step_keeps_time_moving(stepped, tmp_path):
    """Record times never go back: a restart while the wall clock is an hour
    behind the last record continues from the last record's time; a key
    set before keeps its remaining time, and new deadlines run their real
    length."""
    data = str(tmp_path / "data")
    srv, step = stepped("--dir", data)
    with srv.raw() as c:
        assert c.call("SET", "k", "v", "PX", "10000") == "OK"
    step(-3600)
    assert srv.stop() == 0
    srv, _ = stepped("--dir", data)
    with srv.raw() as c:
        assert c.call("GET", "k") == b"v"   # not expired by the restart
        assert c.call("SET", "k2", "v", "PX", "100") == "OK"
    t0 = time.monotonic()
    with srv.raw(timeout=20.0) as c:
        assert c.call("Q.PULL", "q", "BLOCK", "300") == []
        assert time.monotonic() - t0 < 10
        assert c.call("GET", "k2") is None
