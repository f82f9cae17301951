"""Transactions (MULTI/EXEC/DISCARD/WATCH/UNWATCH) against a real ordod.

All or nothing: guards are judged before anything applies (-CONFLICT i
reason), one log record per EXEC (checked by restarting after SIGKILL),
WATCH answers nil after a change, redis-py's pipeline() works unmodified,
and the misuse cases (nested MULTI, EXEC/DISCARD without MULTI, blocking
forms, limits, a connection closing mid-MULTI) answer as documented.
"""

import os

import pytest
import redis

from ordoproc import poll
from resp import RespError


def err(v, prefix):
    """v is an error reply (RespError, returned by Conn.call) starting with prefix."""
    assert isinstance(v, RespError), v
    assert str(v).startswith(prefix), str(v)
    return str(v)


def test_multi_exec_queued_and_array(r):
    p = r.pipeline(transaction=True)
    p.set("a", "1").incr("a").get("a").execute_command("KV.PUT", "b", "x")
    res = p.execute()
    assert res[0] is True and res[1] == 2 and res[2] == b"2"
    assert r.get("b") == b"x"
    assert int(r.info("stats")["transactions_total"]) == 1


def test_pipeline_without_transaction(r):
    p = r.pipeline(transaction=False)
    for i in range(50):
        p.set("k%d" % i, i)
    p.get("k49")
    assert p.execute()[-1] == b"49"


def test_reads_see_state_as_of_their_position(server):
    c = server.raw()
    assert c.call("SET", "k", "old") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("GET", "k") == "QUEUED"
    assert c.call("SET", "k", "new") == "QUEUED"
    assert c.call("GET", "k") == "QUEUED"
    assert c.call("SET", "k", "again", "NX") == "QUEUED"
    assert c.call("EXEC") == [b"old", "OK", b"new", None]


def test_guard_failure_applies_nothing(server, r):
    r.set("n", "notanumber")
    c = server.raw()
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "x", "1") == "QUEUED"
    assert c.call("INCR", "n") == "QUEUED"
    err(c.call("EXEC"), "CONFLICT 2 ")
    assert r.get("x") is None
    assert int(r.info("stats")["transactions_aborted"]) == 1
    # a guard on a key the same transaction wrote is judged on that write
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "m", "5") == "QUEUED"
    assert c.call("INCR", "m") == "QUEUED"
    assert c.call("EXEC") == ["OK", 6]


def test_stale_delivery_token_aborts(server, r):
    r.execute_command("Q.PUSH", "q", "k", "p")
    (mid, key, payload, attempt, token), = r.execute_command("Q.PULL", "q")
    c = server.raw()
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "state", "done") == "QUEUED"
    assert c.call("Q.ACK", "q", mid, int(token) + 1000) == "QUEUED"
    err(c.call("EXEC"), "CONFLICT 2 stale delivery token")
    assert r.get("state") is None
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "state", "done") == "QUEUED"
    assert c.call("Q.ACK", "q", mid, token) == "QUEUED"
    assert c.call("EXEC") == ["OK", 1]
    assert r.get("state") == b"done"


def test_watch(server, r):
    c = server.raw()
    other = server.raw()
    for change in (("SET", "w", "2"), ("DEL", "w")):
        r.set("w", "1")
        assert c.call("WATCH", "w") == "OK"
        other.call(*change)
        assert c.call("MULTI") == "OK"
        assert c.call("SET", "out", "x") == "QUEUED"
        assert c.call("EXEC") is None
        assert r.get("out") is None
    # unchanged: applies; and EXEC ended the watch
    assert c.call("WATCH", "w") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "out", "y") == "QUEUED"
    assert c.call("EXEC") == ["OK"]
    other.call("SET", "w", "3")
    assert c.call("MULTI") == "OK"
    assert c.call("EXEC") == []
    # UNWATCH forgets
    assert c.call("WATCH", "w") == "OK"
    other.call("SET", "w", "4")
    assert c.call("UNWATCH") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("EXEC") == []


def test_watch_with_redis_py(r):
    r.set("ctr", 0)
    with r.pipeline() as p:
        p.watch("ctr")
        v = int(p.get("ctr"))
        r.set("ctr", 100)  # another client
        p.multi()
        p.set("ctr", v + 1)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("ctr") == b"100"


def test_misuse(server):
    c = server.raw()
    assert "EXEC without MULTI" in err(c.call("EXEC"), "")
    assert "DISCARD without MULTI" in err(c.call("DISCARD"), "")
    assert c.call("MULTI") == "OK"
    assert "nested" in err(c.call("MULTI"), "")
    assert "WATCH inside MULTI" in err(c.call("WATCH", "x"), "")
    assert c.call("SET", "d", "1") == "QUEUED"
    assert c.call("DISCARD") == "OK"
    assert c.call("GET", "d") is None
    # arity, unknown command, syntax error, blocking forms: at once, then EXECABORT
    for bad in (("GET",), ("NOSUCH",), ("KV.PUT", "k", "v", "BOGUS"), ("Q.PULL", "q", "BLOCK", "10"),
                ("LOCK.ACQUIRE", "l", "1000", "WAIT", "10"), ("Q.CALL", "q", "k", "p"), ("KV.WATCH", "k")):
        assert c.call("MULTI") == "OK"
        assert c.call("SET", "e", "1") == "QUEUED"
        err(c.call(*bad), "")
        err(c.call("EXEC"), "EXECABORT")
        assert c.call("GET", "e") is None


def test_limits(ordod_factory):
    s = ordod_factory("--max-multi-commands", "3", "--max-multi-bytes", "2k")
    c = s.raw()
    assert c.call("MULTI") == "OK"
    for i in range(3):
        assert c.call("SET", "k%d" % i, "v") == "QUEUED"
    assert "max-multi-commands" in err(c.call("SET", "k3", "v"), "")
    assert "EXECABORT" in err(c.call("EXEC"), "")
    assert c.call("MULTI") == "OK"
    assert "max-multi-bytes" in err(c.call("SET", "big", "x" * 4096), "")
    assert "EXECABORT" in err(c.call("EXEC"), "")
    assert c.call("DBSIZE") == 0
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "k0", "v") == "QUEUED"
    assert c.call("EXEC") == ["OK"]


def test_close_mid_multi_and_restart(ordod_factory):
    s = ordod_factory()
    c = s.raw()
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "half", "1") == "QUEUED"
    c.close()
    r = s.client()
    p = r.pipeline()
    p.set("a", "1").set("b", "1").incr("a")
    assert p.execute() == [True, True, 2]
    s.kill()
    s.start()
    r = s.client()
    assert r.get("half") is None
    assert r.get("a") == b"2" and r.get("b") == b"1"


def test_huge_transaction_past_the_default_limit(r):
    p = r.pipeline(transaction=True)
    for i in range(10001):  # max-multi-commands defaults to 10000
        p.set("h%d" % i, "v")
    with pytest.raises(redis.ResponseError) as e:
        p.execute()
    assert "EXECABORT" in str(e.value) or "max-multi-commands" in str(e.value)
    assert r.dbsize() == 0
    p = r.pipeline(transaction=True)
    for i in range(10000):
        p.set("h%d" % i, "v")
    assert len(p.execute()) == 10000
    assert r.dbsize() == 10000


def test_transaction_of_large_values_up_to_max_multi_bytes(ordod_factory):
    """A transaction the limits admit is one record the log takes: two 5 MB
    values (10 MB, past one value's max-value-bytes of 8 MB, within
    max-multi-bytes' 16 MB) commit, the server stays writable, and both are
    there after a SIGKILL and a restart. (The log's record limit used to be
    one command's, so this EXEC made the server read-only.)"""
    s = ordod_factory()
    r = s.client()
    a, b = b"a" * 5000000, b"b" * 5000000
    p = r.pipeline(transaction=True)
    p.set("big-a", a).set("big-b", b)
    assert p.execute() == [True, True]
    assert r.set("after", "1") is True
    s.kill()
    s.start()
    r = s.client()
    assert r.get("big-a") == a and r.get("big-b") == b and r.get("after") == b"1"


def test_pulls_count_their_deliveries_against_max_multi_bytes(ordod_factory):
    """Q.PULL COUNT n makes up to n records, each naming the queue: a MULTI
    counts them when the pull is queued, so pulls that would make a record
    past the log's limit are refused with -LIMIT and the server stays
    writable."""
    s = ordod_factory("--max-multi-bytes", "1m")
    c = s.raw()
    q = "q" * 4000                       # 1000 deliveries x (4000 + 96) bytes: about 4 MB
    assert c.call("Q.PUSH", q, "k", "m") > 0
    assert c.call("MULTI") == "OK"
    assert "max-multi-bytes" in err(c.call("Q.PULL", q, "COUNT", 1000), "LIMIT")
    assert "EXECABORT" in err(c.call("EXEC"), "")
    assert c.call("MULTI") == "OK"
    assert c.call("Q.PULL", q, "COUNT", 10) == "QUEUED"   # about 40 KB: admitted
    got = c.call("EXEC")
    assert len(got) == 1 and len(got[0]) == 1 and got[0][0][2] == b"m", got
    assert c.call("SET", "after", "1") == "OK"


def test_events_in_order_at_consecutive_revisions(server):
    w = server.raw()
    w.call("HELLO", 3)
    assert isinstance(w.call("KV.WATCH", "t:", "PREFIX"), int)
    c = server.raw()
    assert c.call("MULTI") == "OK"
    for k in ("t:1", "t:2", "t:3"):
        assert c.call("KV.PUT", k, "v") == "QUEUED"
    revs = c.call("EXEC")
    assert revs == [revs[0], revs[0] + 1, revs[0] + 2]
    seen = []
    while len(seen) < 3:
        ev = w.read()
        seen.append(ev)
    text = repr(seen)
    for rev in revs:
        assert str(rev) in text
    assert text.index("t:1") < text.index("t:2") < text.index("t:3")


def test_push_without_room_is_a_guard(server, r):
    c = server.raw()
    for onfull in ("reject", "block"):
        q = "q" + onfull
        assert c.call("Q.CONFIG", q, "MAXLEN", 2, "MAXPERKEY", 1, "ONFULL", onfull) == "OK"
        assert c.call("MULTI") == "OK"
        assert c.call("SET", "a", onfull) == "QUEUED"
        assert c.call("Q.PUSH", q, "k1", "p") == "QUEUED"
        assert c.call("Q.PUSH", q, "k1", "p") == "QUEUED"  # MAXPERKEY 1, counting the push before
        err(c.call("EXEC"), "CONFLICT 3 LIMIT")
        assert c.call("MULTI") == "OK"
        for k in ("k1", "k2", "k3"):  # MAXLEN 2
            assert c.call("Q.PUSH", q, k, "p") == "QUEUED"
        err(c.call("EXEC"), "CONFLICT 3 BUSY")
        assert r.get("a") is None and c.call("Q.LEN", q) == [0, 0, 0]
        assert c.call("MULTI") == "OK"
        assert c.call("Q.PUSH", q, "k1", "p") == "QUEUED"
        assert c.call("Q.PUSH", q, "k2", "p") == "QUEUED"
        assert c.call("EXEC")[1] > 0
        assert c.call("Q.LEN", q) == [2, 0, 0]


def test_transactions_across_a_snapshot_and_replay(ordod_factory):
    """Transactions before a snapshot are in it; those after it replay
    from the log; a SIGKILL restart reaches the same state."""
    s = ordod_factory("--fsync", "always")
    r = s.client()
    for i in range(20):
        p = r.pipeline()
        p.set("sa%d" % i, i).incr("ctr").execute_command("Q.PUSH", "sq", "k%d" % i, "p")
        p.execute()
    assert r.execute_command("SNAPSHOT") > 0
    poll(lambda: not int(s.info("persistence")["snapshot_in_progress"]), "the snapshot written")
    assert not int(s.info("persistence")["snapshot_in_progress"])
    for i in range(20, 30):
        p = r.pipeline()
        p.set("sa%d" % i, i).incr("ctr").execute_command("Q.PUSH", "sq", "k%d" % i, "p")
        p.execute()
    rev = r.execute_command("KV.REV")
    s.kill()
    s.start()
    r = s.client()
    assert r.execute_command("KV.REV") == rev
    assert r.get("ctr") == b"30"
    assert all(r.get("sa%d" % i) == str(i).encode() for i in range(30))
    assert r.execute_command("Q.LEN", "sq")[0] == 30


def peak_rss_bytes(srv):
    """The server's peak resident set (VmHWM): what a burst cost at its worst."""
    with open("/proc/%d/status" % srv.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/%d/status" % srv.pid)


def test_exec_reply_bounded_by_max_reply_bytes(server, r):
    """MULTI, 100 x GET of an 8 MiB value, EXEC on a connection that does not
    read: the reply would be 800 MiB, built whole before any output bound
    applied (1.48 GB of RSS). It is refused before anything runs, with
    -LIMIT, and the server's peak memory stays near one reply."""
    big = b"v" * (8 << 20)
    r.set("big", big)
    r.set("other", "1")
    base = peak_rss_bytes(server)
    c = server.raw(timeout=60)
    n = 100
    c.send_raw(b"".join([b"*1\r\n$5\r\nMULTI\r\n", b"*3\r\n$3\r\nSET\r\n$5\r\nother\r\n$1\r\n2\r\n"] +
                        [b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n"] * n + [b"*1\r\n$4\r\nEXEC\r\n"]))
    poll(lambda: sum(int(v) for k, v in server.info("stats").items() if k.startswith("transactions_")) >= 1,
         "the EXEC ran")
    if "ASAN_OPTIONS" not in os.environ:  # ASan's quarantine keeps freed memory mapped on purpose
        assert peak_rss_bytes(server) < base + (200 << 20), (base, peak_rss_bytes(server))
    assert c.read() == "OK"
    assert c.read() == "QUEUED"
    for _ in range(n):
        assert c.read() == "QUEUED"
    e = err(c.read(), "LIMIT ")
    assert "max-reply-bytes" in e and "nothing was applied" in e, e
    assert r.get("other") == b"1"  # the write queued before the reads did not apply
    assert server.alive()


def test_exec_reply_of_own_writes_bounded(ordod_factory):
    """Phase 1 measures reads against the state before the transaction, so
    reads of a value the transaction itself writes are bounded as EXEC
    builds its reply: the read that would carry it past max-reply-bytes
    answers -LIMIT in its slot, the others (and every write) stand."""
    srv = ordod_factory("--max-reply-bytes", "16m")
    c = srv.raw(timeout=60)
    big = b"w" * (8 << 20)
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "k", big) == "QUEUED"
    for _ in range(3):
        assert c.call("GET", "k") == "QUEUED"
    assert c.call("INCR", "n") == "QUEUED"
    res = c.call("EXEC")
    assert res[0] == "OK" and res[1] == big, res[0]
    err(res[2], "LIMIT reply of command 3 ")
    err(res[3], "LIMIT reply of command 4 ")
    assert res[4] == 1
    assert c.call("GET", "n") == b"1"
    assert len(c.call("GET", "k")) == len(big)


def test_qwatch_refused_in_multi(server):
    c = server.raw()
    assert c.call("MULTI") == "OK"
    err(c.call("Q.WATCH", "q"), "ERR Q.WATCH blocks or streams")
    err(c.call("EXEC"), "EXECABORT")
