"""Queue commands when the log refuses their record, and queue memory under
max-memory-bytes, against a real ordod.

The refusal comes from the fault seam (`--debug-wal-fault append-eio:N`:
the Nth record handed to the log is refused at once, as when the log failed
an instant before). A refused queue record changed memory only, so the
command must answer -READONLY, never 0 or an empty array, and a restart
without the fault must show the state from before it.
"""
import signal
import time

import pytest

from ordoproc import poll
from test_queue import blocked, err, info, restart


def restarted(ordod_factory, srv):
    """srv stopped (exit 0), then a server on its data directory without the fault."""
    rc = srv.stop()
    assert rc == 0, srv.log_tail(5000)
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


# ---- max-memory-bytes covers queues -----------------------------------------------------

MAX_MEMORY = 300000


def memory(srv):
    m = srv.info("memory")
    return {k: int(m[k]) for k in ("used_memory", "used_memory_kv", "used_memory_queues", "used_memory_coord")}


def queues_bytes(c):
    """The sum of Q.INFO bytes over every queue."""
    return sum(info(c, q.decode())["bytes"] for q in c.call("Q.LIST"))


def check_accounting(srv, c):
    m = memory(srv)
    assert m["used_memory"] == m["used_memory_kv"] + m["used_memory_queues"] + m["used_memory_coord"], m
    assert m["used_memory_queues"] == queues_bytes(c), m
    return m


def test_queue_memory_counts_towards_max_memory(ordod_factory):
    srv = ordod_factory("--max-memory-bytes", MAX_MEMORY)
    payload = "p" * 1000
    with srv.raw() as c, srv.raw() as p:
        assert memory(srv)["used_memory_queues"] == 0
        # a pusher parked on a full queue before memory runs out
        c.call("Q.CONFIG", "small", "MAXLEN", 1, "ONFULL", "block")
        c.call("Q.PUSH", "small", "k", "first")
        p.send("Q.PUSH", "small", "k", "second")
        poll(lambda: info(c, "small")["blocked_pushers"] == 1, "pusher parked")
        # pushes fill memory until the limit refuses them (dedup entries and
        # results kept for a second, so consuming frees them soon)
        c.call("Q.CONFIG", "big", "DEDUP", 1000, "RESULTTTL", 1000)
        ids, refused = [], None
        for i in range(MAX_MEMORY // 1000 + 10):
            r = c.call("Q.PUSH", "big", "k%d" % (i % 20), payload, "ID", "d%d" % i)
            if not isinstance(r, int):
                refused = r
                break
            ids.append(r)
        r = err(refused, "LIMIT")
        assert "max-memory-bytes" in r.msg and "stored data" in r.msg, r
        m = check_accounting(srv, c)
        assert m["used_memory"] > MAX_MEMORY and m["used_memory_queues"] > MAX_MEMORY - m["used_memory_kv"], m
        # every push is refused now, a call too, and so are key writes: one limit
        err(c.call("Q.PUSH", "big", "x", "y"), "LIMIT")
        err(c.call("Q.CALL", "big", "x", "y", "TIMEOUT", 1000), "LIMIT")
        err(c.call("Q.CONFIG", "new-queue", "MAXLEN", 5), "LIMIT")
        err(c.call("SET", "key", "v"), "LIMIT")
        assert c.call("Q.LEN", "big") == [len(ids), 0, 0]
        # a parked pusher waits while its queue stays full (Q.CONFIG serves the line)
        assert c.call("Q.CONFIG", "small", "MAXATTEMPTS", 3) == "OK"
        assert info(c, "small")["blocked_pushers"] == 1
        # room in the small queue: the parked pusher is refused as a new push would be
        m = c.call("Q.PULL", "small")[0]
        err(p.read(), "LIMIT")
        assert c.call("Q.LEN", "small") == [0, 1, 0]
        assert c.call("Q.ACK", "small", m[0], m[4]) == 1
        # pulls, acks, nacks and config still work past the limit
        got = c.call("Q.PULL", "big", "COUNT", 20)
        assert len(got) == 20
        assert c.call("Q.NACK", "big", got[0][0], got[0][4]) == 1
        for m in got[1:]:
            assert c.call("Q.ACK", "big", m[0], m[4], "RESULT", "r" * 100) == 1
        assert c.call("Q.CONFIG", "big", "MAXATTEMPTS", 5) == "OK"
        check_accounting(srv, c)
        # consuming frees room: acked messages go, and so do their results
        # and dedup entries once their retention ends
        while True:
            got = c.call("Q.PULL", "big", "COUNT", 50)
            if not got:
                break
            for m in got:
                assert c.call("Q.ACK", "big", m[0], m[4]) == 1
        poll(lambda: info(c, "big")["results"] == 0 and info(c, "big")["dedup_entries"] == 0,
             "results and dedup entries gone")
        m = check_accounting(srv, c)
        assert m["used_memory"] < MAX_MEMORY, m
        assert isinstance(c.call("Q.PUSH", "big", "x", "y"), int)
        assert c.call("SET", "key", "v") == "OK"
        # a drop frees everything the queue held
        assert c.call("Q.DROP", "big") == 1
        check_accounting(srv, c)
        c.call("Q.DROP", "small")
        assert memory(srv)["used_memory_queues"] == 0


@pytest.mark.parametrize("snapshot", [False, True])
def test_queue_memory_is_counted_after_recovery(ordod_factory, snapshot):
    srv = ordod_factory()
    with srv.raw() as c:
        c.call("Q.CONFIG", "q", "DEADLETTER", "dlq", "MAXATTEMPTS", 1)
        for i in range(30):
            c.call("Q.PUSH", "q", "k%d" % (i % 7), "x" * i, "ID", "id%d" % i)
        c.call("Q.PUSH", "q", "later", "d", "DELAY", 600000)
        got = c.call("Q.PULL", "q", "COUNT", 7)
        c.call("Q.ACK", "q", got[0][0], got[0][4], "RESULT", "done")
        c.call("Q.NACK", "q", got[1][0], got[1][4])  # dead-lettered: dlq exists now
        if snapshot:
            assert c.call("SNAPSHOT") >= 0
            poll(lambda: srv.info("persistence")["snapshot_in_progress"] == "0", "snapshot")
        before = check_accounting(srv, c)
        assert before["used_memory_queues"] > 0
    restart(srv, signal.SIGTERM)
    with srv.raw() as c:
        after = check_accounting(srv, c)
        assert c.call("Q.LEN", "dlq") == [1, 0, 0]
        assert after["used_memory_queues"] > 0


# ---- parked clients when the log fails --------------------------------------------------


def test_parked_clients_answered_readonly_when_log_fails(ordod_factory):
    """Every parked client -- Q.PULL BLOCK, a blocked Q.PUSH, Q.CALL,
    Q.RESULT BLOCK, LOCK.ACQUIRE WAIT, ELECT.CAMPAIGN -- is answered
    -READONLY with the reason as soon as the log fails, not at its timeout:
    nothing it waits for can happen on a read-only server."""
    setup_records = 5
    srv = ordod_factory("--debug-wal-fault", "append-eio:%d" % (setup_records + 1))
    wait_ms = 120000  # far beyond the read timeout below: only the failure can answer in time
    with srv.raw() as c:
        c.call("Q.CONFIG", "full", "MAXLEN", 1, "ONFULL", "block")
        c.call("Q.PUSH", "full", "k", "1")
        mid = c.call("Q.PUSH", "other", "k", "m")
        c.call("LOCK.ACQUIRE", "L", 600000)
        c.call("ELECT.CAMPAIGN", "E", "a", 600000)
        parked = [
            ("pull", ["Q.PULL", "empty", "BLOCK", wait_ms]),
            ("push", ["Q.PUSH", "full", "k", "2", "TIMEOUT", wait_ms]),
            ("call", ["Q.CALL", "full", "k", "3", "TIMEOUT", wait_ms]),
            ("result", ["Q.RESULT", "other", mid, "BLOCK", wait_ms]),
            ("lock", ["LOCK.ACQUIRE", "L", 60000, "WAIT", wait_ms]),
            ("elect", ["ELECT.CAMPAIGN", "E", "b", 60000]),  # no WAIT: as long as it takes
        ]
        conns = []
        for n, (kind, cmd) in enumerate(parked, 1):
            w = srv.raw(timeout=10.0)
            w.send(*cmd)
            conns.append(w)
            poll(lambda: blocked(c, kind) == 1, kind + " parked")
        assert blocked(c) == len(parked)
        # the next record is refused: the server turns read-only
        err(c.call("KV.PUT", "x", "y"), "READONLY")
        assert srv.info("persistence")["readonly"] == "yes"
        t0 = time.monotonic()
        for (kind, _), w in zip(parked, conns):
            r = err(w.read(), "READONLY")  # a read timeout (10 s) fails the test
            assert "refused a record" in r.msg, (kind, r)
        assert time.monotonic() - t0 < 10.0
        assert blocked(c) == 0
        # the connections go on: their next command is refused the same way
        for w in conns:
            err(w.call("Q.LEN", "other"), "READONLY")
            w.close()


def test_readonly_server_answers_while_holdings_pass_their_deadline(ordod_factory):
    """A read-only server ends no lock, election or lease (it could not log
    the record), and it keeps answering while their deadlines pass. (Its
    coordination timer used to re-arm itself for the passed deadline with
    no delay, and libuv 1.44 then ran it again at once, forever.)"""
    ttl_ms = 200
    srv = ordod_factory("--debug-wal-fault", "append-eio:3")
    with srv.raw(timeout=5.0) as c:
        t0 = time.monotonic()
        assert c.call("LOCK.ACQUIRE", "L", ttl_ms) > 0
        assert c.call("ELECT.CAMPAIGN", "E", "a", ttl_ms) > 0
        err(c.call("KV.PUT", "x", "y"), "READONLY")
        answered = 0
        until = max(t0 + 3 * ttl_ms / 1000.0, time.monotonic() + 0.2)
        while time.monotonic() < until:
            assert c.call("PING") == "PONG"   # a read timeout (5 s) fails the test
            answered += 1
        assert answered > 0
        assert srv.info("persistence")["readonly"] == "yes"
