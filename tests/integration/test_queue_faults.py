"""Queue commands when the log refuses their record, and queue memory under
max-memory-bytes, against a real ordod.

The refusal comes from the fault seam (`--debug-wal-fault append-eio:N`:
the Nth record handed to the log is refused at once, as when the log failed
an instant before). A refused queue record changed memory only, so the
command must answer -READONLY, never 0 or an empty array, and a restart
without the fault must show the state from before it.
"""
import pytest

from test_queue import err, info, wait_until


def restarted(ordod_factory, srv):
    """srv stopped (exit 0), then a server on its data directory without the fault."""
    rc = srv.stop()
    assert rc == 0, srv.stderr()[-5000:]
    return ordod_factory("--dir", str(srv.dir))


def setup_push(c):
    assert c.call("Q.PUSH", "q", "k", "p") > 0


def setup_pull(c):
    setup_push(c)
    return c.call("Q.PULL", "q")[0]


# Each case: the records the setup logs (the next one, the command's, is
# refused), the setup, the command, and Q.LEN after a restart: as before
# the command.
CASES = {
    "pull": (1, setup_push, lambda m: ("Q.PULL", "q", "COUNT", 5), [1, 0, 0]),
    "pull-noack": (1, setup_push, lambda m: ("Q.PULL", "q", "NOACK"), [1, 0, 0]),
    "ack": (2, setup_pull, lambda m: ("Q.ACK", "q", m[0], m[4], "RESULT", "r"), [0, 1, 0]),
    "nack": (2, setup_pull, lambda m: ("Q.NACK", "q", m[0], m[4]), [0, 1, 0]),
    "extend": (2, setup_pull, lambda m: ("Q.EXTEND", "q", m[0], m[4], 60000), [0, 1, 0]),
    "drop": (1, setup_push, lambda m: ("Q.DROP", "q"), [1, 0, 0]),
    "push": (1, setup_push, lambda m: ("Q.PUSH", "q", "j", "p2"), [1, 0, 0]),
    "call": (1, setup_push, lambda m: ("Q.CALL", "q", "j", "p2", "TIMEOUT", 5000), [1, 0, 0]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_queue_record_answers_readonly(ordod_factory, case):
    logged, setup, command, qlen_after = CASES[case]
    srv = ordod_factory("--debug-wal-fault", "append-eio:%d" % (logged + 1))
    with srv.raw() as c:
        m = setup(c)
        r = err(c.call(*command(m)), "READONLY")
        assert "refused a record" in r.msg, r
        # the refused change is in memory only: reads of it are refused too
        err(c.call("Q.LEN", "q"), "READONLY")
        # and so is every later write
        err(c.call("Q.PUSH", "q", "x", "y"), "READONLY")
    assert srv.info("persistence")["readonly"] == "yes"
    srv2 = restarted(ordod_factory, srv)
    with srv2.raw() as c:
        assert c.call("Q.LEN", "q") == qlen_after
