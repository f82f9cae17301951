"""Keyed work queues (Q.*) against a real ordod.

Every command and error; blocking (pull, call, result, ONFULL block) with
waiters parked server-side; lease expiry and redelivery; dead letters and
parking; coalescing and delays; restarts after SIGTERM and SIGKILL; and a
checker-driven run where producers and misbehaving consumers (crashing,
stalling past their lease, nacking) race, after which a checker asserts
the queue's promises from what the clients saw.

Synchronisation is by the protocol (BLOCK replies) or by polling server
state with a deadline; sleeps only stand in for consumer work.
"""
import random
import signal
import threading
import time

import pytest

from ordoproc import poll
from resp import Conn, RespError

DEADLINE_S = 20.0
# A delay the test must observe as not yet over after two more round trips:
# long enough for a loaded (ASan, 2-core) machine, short enough to wait out.
NACK_DELAY_MS = 1000


def blocked(c, kind=None):
    """INFO clients: blocked_clients, or blocked_<kind> (pull, push, call,
    result, lock, elect): how many connections are parked."""
    text = c.call("INFO", "clients").decode()
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields["blocked_clients" if kind is None else "blocked_" + kind])


def info(c, q):
    r = c.call("Q.INFO", q)
    assert not isinstance(r, RespError), r
    return {r[i].decode(): r[i + 1] for i in range(0, len(r), 2)}


def keyinfo(c, q, k):
    r = c.call("Q.KEYINFO", q, k)
    return {r[i].decode(): r[i + 1] for i in range(0, len(r), 2)}


def err(r, code):
    assert isinstance(r, RespError), "expected -%s, got %r" % (code, r)
    assert r.code == code, r
    return r


def restart(srv, sig):
    """Stop srv with sig and start it again on its data dir (on the same
    port unless another process took it meanwhile; srv.port says which).
    SIGKILL is a crash; SIGTERM a clean stop (SIGKILL if it hangs)."""
    if sig == signal.SIGKILL:
        srv.kill()
    else:
        assert sig == signal.SIGTERM, sig
        srv.stop()
    srv.start(srv.port)


@pytest.fixture
def c(server):
    with server.raw(timeout=40.0) as conn:
        yield conn


# ---- basics -------------------------------------------------------------------------


def test_push_pull_ack_per_key_order(c):
    ids = [c.call("Q.PUSH", "q", k, p) for k, p in [("a", "a1"), ("a", "a2"), ("b", "b1")]]
    assert ids[0] < ids[1] < ids[2]
    assert c.call("Q.LEN", "q") == [3, 0, 0]
    assert c.call("Q.PEEK", "q", "COUNT", 10) == [[ids[0], b"a", b"a1", 0, 0], [ids[2], b"b", b"b1", 0, 0]]
    msgs = c.call("Q.PULL", "q", "COUNT", 10)
    # one message of a key in flight at a time, oldest key first
    assert [(m[0], m[1], m[2], m[3]) for m in msgs] == [(ids[0], b"a", b"a1", 1), (ids[2], b"b", b"b1", 1)]
    tok_a = msgs[0][4]
    assert tok_a > ids[2] and msgs[1][4] > tok_a  # tokens are revisions
    assert c.call("Q.LEN", "q") == [1, 2, 0]
    assert c.call("Q.PULL", "q") == []  # a2 waits behind a1
    ki = keyinfo(c, "q", "a")
    assert ki["state"] == b"processing" and ki["id"] == ids[0] and ki["token"] == tok_a
    assert ki["attempt"] == 1 and ki["waiting"] == 1 and ki["deadline"] > ki["since"] > 0
    assert keyinfo(c, "q", "zz")["state"] == b"idle"
    assert c.call("Q.ACK", "q", ids[0], tok_a + 1000) == 0  # not this delivery
    assert c.call("Q.ACK", "q", ids[0], 0) == 0
    assert c.call("Q.ACK", "q", ids[0], tok_a, "RESULT", "r1") == 1
    assert c.call("Q.ACK", "q", ids[0], tok_a) == 0  # once
    assert c.call("Q.RESULT", "q", ids[0]) == b"r1"
    nxt = c.call("Q.PULL", "q")
    assert [m[:4] for m in nxt] == [[ids[1], b"a", b"a2", 1]]
    assert c.call("Q.ACK", "q", ids[1], nxt[0][4]) == 1
    assert c.call("Q.RESULT", "q", ids[1]) is None  # acked without a result
    assert c.call("Q.ACK", "q", msgs[1][0], msgs[1][4]) == 1
    assert c.call("Q.LEN", "q") == [0, 0, 0]
    assert c.call("Q.LIST") == [b"q"]
    i = info(c, "q")
    assert (i["pushed"], i["delivered"], i["acked"], i["results"]) == (3, 3, 3, 1)
    assert c.call("Q.DROP", "q") == 1
    assert c.call("Q.DROP", "q") == 0
    assert c.call("Q.LIST") == []
    assert c.call("Q.LEN", "q") == [0, 0, 0]


def test_errors_and_limits(ordod_factory):
    srv = ordod_factory("--max-name-bytes", "16", "--max-value-bytes", "64")
    with srv.raw() as c:
        err(c.call("Q.PUSH", "q", "k"), "ERR")  # arity
        err(c.call("Q.PUSH", "q", "k", "p", "BOGUS"), "ERR")
        err(c.call("Q.PUSH", "q", "k", "p", "DELAY", "x"), "ERR")
        err(c.call("Q.PUSH", "q", "k", "p", "DELAY", "-1"), "ERR")
        err(c.call("Q.PUSH", "q", "k", "p", "DELAY"), "ERR")
        err(c.call("Q.PUSH", "", "k", "p"), "ERR")
        err(c.call("Q.PUSH", "q" * 17, "k", "p"), "LIMIT")
        err(c.call("Q.PUSH", "q", "k" * 17, "p"), "LIMIT")
        err(c.call("Q.PUSH", "q", "k", "p" * 65), "LIMIT")
        err(c.call("Q.PUSH", "q", "k", "p", "ID", "i" * 17), "LIMIT")
        err(c.call("Q.CALL", "q", "k", "p", "COALESCE"), "ERR")
        err(c.call("Q.PULL", "q", "COUNT", "0"), "ERR")
        err(c.call("Q.PULL", "q", "COUNT", "1001"), "ERR")
        err(c.call("Q.PULL", "q", "LEASE", "0"), "ERR")
        err(c.call("Q.PULL", "q", "BLOCK"), "ERR")
        err(c.call("Q.PULL", "q", "NOPE"), "ERR")
        err(c.call("Q.ACK", "q", "x", "1"), "ERR")
        err(c.call("Q.ACK", "q", "1", "1", "RESULT"), "ERR")
        err(c.call("Q.ACK", "q", "1", "1", "RESULT", "r" * 65), "LIMIT")
        err(c.call("Q.NACK", "q", "1", "1", "DELAY", "x"), "ERR")
        err(c.call("Q.EXTEND", "q", "1", "1", "0"), "ERR")
        err(c.call("Q.RESULT", "q", "-5"), "ERR")
        err(c.call("Q.CONFIG", "q", "MAXLEN", "0"), "ERR")
        err(c.call("Q.CONFIG", "q", "MAXLEN", str(1 << 30)), "ERR")
        err(c.call("Q.CONFIG", "q", "ONFULL", "maybe"), "ERR")
        err(c.call("Q.CONFIG", "q", "ONPOISON", "ignore"), "ERR")
        err(c.call("Q.CONFIG", "q", "LEASE", "0"), "ERR")
        err(c.call("Q.CONFIG", "q", "DEADLETTER", "q"), "ERR")
        err(c.call("Q.CONFIG", "q", "FROB", "1"), "ERR")
        err(c.call("Q.PEEK", "q", "COUNT", "0"), "ERR")
        err(c.call("Q.TOPKEYS", "q", "COUNT", "x"), "ERR")
        err(c.call("Q.INFO", "nope"), "NOTFOUND")
        assert c.call("Q.LIST") == []  # refused commands created nothing
        # stale or unknown deliveries: 0, not errors
        assert c.call("Q.ACK", "nope", 1, 1) == 0
        assert c.call("Q.NACK", "nope", 1, 1) == 0
        assert c.call("Q.EXTEND", "nope", 1, 1, 100) == 0
        assert c.call("Q.UNPARK", "nope", "k") == 0
        assert c.call("Q.RESULT", "nope", 1) is None
        assert c.call("Q.PEEK", "nope") == [] and c.call("Q.TOPKEYS", "nope") == []
        # binary-safe names, keys and payloads
        bid = c.call("Q.PUSH", b"q\x00\r\n", b"\x00k", b"\xff\x00p")
        assert c.call("Q.PULL", b"q\x00\r\n")[0][:3] == [bid, b"\x00k", b"\xff\x00p"]
        assert c.call("PING") == "PONG"


def test_config_and_info(c):
    assert c.call("Q.CONFIG", "q") == "OK"  # creates it with the defaults
    i = info(c, "q")
    assert (i["maxlen"], i["maxperkey"], i["onfull"], i["onpoison"]) == (1000000, 0, b"reject", b"deadletter")
    assert (i["maxattempts"], i["lease"], i["dedup"], i["resultttl"], i["deadletter"]) == (10, 30000, 60000, 60000, None)
    assert c.call("Q.CONFIG", "q", "MAXLEN", 5, "MAXPERKEY", 2, "ONFULL", "block", "LEASE", 1000, "MAXATTEMPTS", 3,
                  "DEADLETTER", "dlq", "ONPOISON", "park", "DEDUP", 0, "RESULTTTL", 10) == "OK"
    i = info(c, "q")
    assert (i["maxlen"], i["maxperkey"], i["onfull"], i["onpoison"]) == (5, 2, b"block", b"park")
    assert (i["maxattempts"], i["lease"], i["dedup"], i["resultttl"], i["deadletter"]) == (3, 1000, 0, 10, b"dlq")
    assert c.call("Q.CONFIG", "q", "DEADLETTER", "") == "OK"  # removed
    assert info(c, "q")["deadletter"] is None
    assert info(c, "q")["maxlen"] == 5  # options not given are kept


# ---- blocking ---------------------------------------------------------------------------


def test_pull_block_is_served_by_a_push(server, c):
    c.call("Q.CONFIG", "q")
    with server.raw() as w:
        w.send("Q.PULL", "q", "BLOCK", 0)
        poll(lambda: info(c, "q")["blocked_pullers"] == 1, "puller parked")
        mid = c.call("Q.PUSH", "q", "k", "hello")
        m = w.read()
        assert m[0][:4] == [mid, b"k", b"hello", 1]
        assert w.call("PING") == "PONG"  # the connection resumed
    assert c.call("Q.PULL", "q", "BLOCK", 50) == []  # timeout: empty array
    # a puller that disconnects leaves the wait list
    w2 = server.raw()
    w2.send("Q.PULL", "q", "BLOCK", 0)
    poll(lambda: info(c, "q")["blocked_pullers"] == 1, "puller parked")
    w2.close()
    poll(lambda: info(c, "q")["blocked_pullers"] == 0, "puller removed")
    c.call("Q.PUSH", "q", "k2", "x")
    assert c.call("Q.LEN", "q") == [1, 1, 0]  # nobody took it


def test_pullers_are_served_first_come_first_served(server, c):
    c.call("Q.CONFIG", "q")
    ws = [server.raw() for _ in range(3)]
    for i, w in enumerate(ws):
        w.send("Q.PULL", "q", "BLOCK", 60000)
        poll(lambda: info(c, "q")["blocked_pullers"] == i + 1, "puller %d parked" % (i + 1))
    ids = [c.call("Q.PUSH", "q", "k%d" % i, "p%d" % i) for i in range(3)]
    assert [w.read()[0][0] for w in ws] == ids
    for w in ws:
        w.close()


def test_lease_expiry_redelivers_and_fences_the_stale_consumer(c):
    # Only the first delivery has a short lease; the redelivery gets the
    # queue's 60 s, so the stale/current checks below cannot race its end.
    c.call("Q.CONFIG", "q", "LEASE", 60000)
    mid = c.call("Q.PUSH", "q", "k", "p")
    first = c.call("Q.PULL", "q", "LEASE", 100)[0]
    again = c.call("Q.PULL", "q", "BLOCK", 30000)[0]  # the lease runs out
    assert again[0] == mid and again[3] == 2 and again[4] > first[4]
    assert c.call("Q.ACK", "q", mid, first[4]) == 0  # the stale consumer changes nothing
    assert c.call("Q.EXTEND", "q", mid, first[4], 1000) == 0
    assert c.call("Q.EXTEND", "q", mid, again[4], 600000) == 1
    ki = keyinfo(c, "q", "k")
    assert ki["token"] == again[4] and ki["deadline"] - ki["since"] > 120000
    assert c.call("Q.ACK", "q", mid, again[4]) == 1
    assert info(c, "q")["redelivered"] == 1


def test_pull_lease_option_and_noack(c):
    mid = c.call("Q.PUSH", "q", "k", "p1")
    c.call("Q.PUSH", "q", "k", "p2")
    m = c.call("Q.PULL", "q", "LEASE", 80)[0]
    assert c.call("Q.PULL", "q", "BLOCK", 30000)[0][:4] == [mid, b"k", b"p1", 2]
    n = c.call("Q.PULL", "q", "NOACK")  # the first is in flight again
    assert n == []
    c.call("Q.PUSH", "q", "j", "x")
    n = c.call("Q.PULL", "q", "NOACK")
    assert n[0][1:3] == [b"j", b"x"]
    assert c.call("Q.LEN", "q") == [1, 1, 0]  # j is done at once
    assert m[4] > 0


def test_nack_and_nack_delay(c):
    mid = c.call("Q.PUSH", "q", "k", "p")
    c.call("Q.PUSH", "q", "k", "p2")
    m = c.call("Q.PULL", "q")[0]
    assert c.call("Q.NACK", "q", mid, m[4] + 1) == 0
    assert c.call("Q.NACK", "q", mid, m[4]) == 1
    m2 = c.call("Q.PULL", "q")[0]
    assert m2[0] == mid and m2[3] == 2  # back at its key's head
    # The delay is long enough that the two checks inside it cannot be
    # overtaken by its end even on a loaded machine.
    t0 = time.monotonic()
    assert c.call("Q.NACK", "q", mid, m2[4], "DELAY", NACK_DELAY_MS) == 1
    ki = keyinfo(c, "q", "k")
    assert ki["state"] == b"processing" and ki["token"] == 0  # the key stays held
    assert c.call("Q.PULL", "q") == []
    m3 = c.call("Q.PULL", "q", "BLOCK", 30000)[0]
    assert time.monotonic() - t0 >= NACK_DELAY_MS / 1000.0  # never early
    assert m3[0] == mid and m3[3] == 3


def test_dead_letter_and_call_gets_deadletter(server, c):
    c.call("Q.CONFIG", "q", "MAXATTEMPTS", 2, "DEADLETTER", "dlq")
    with server.raw() as caller:
        caller.send("Q.CALL", "q", "k", "poison", "TIMEOUT", 10000)
        m = c.call("Q.PULL", "q", "BLOCK", 30000)[0]
        assert c.call("Q.NACK", "q", m[0], m[4]) == 1
        m = c.call("Q.PULL", "q")[0]
        assert m[3] == 2
        c.call("Q.PUSH", "q", "k", "next")
        assert c.call("Q.NACK", "q", m[0], m[4]) == 1  # attempts exhausted
        err(caller.read(), "DEADLETTER")
    err(c.call("Q.RESULT", "q", m[0]), "DEADLETTER")
    d = c.call("Q.PULL", "dlq")[0]
    assert d[1:3] == [b"k", b"poison"] and d[0] > m[0]
    assert c.call("Q.PULL", "q")[0][2] == b"next"  # the key moved on
    assert info(c, "q")["deadlettered"] == 1


def test_onpoison_park_and_unpark(c):
    c.call("Q.CONFIG", "q", "MAXATTEMPTS", 1, "ONPOISON", "park")
    bad = c.call("Q.PUSH", "q", "bad", "b1")
    c.call("Q.PUSH", "q", "bad", "b2")
    m = c.call("Q.PULL", "q")[0]
    assert c.call("Q.NACK", "q", bad, m[4]) == 1
    ki = keyinfo(c, "q", "bad")
    assert ki["state"] == b"parked" and ki["id"] == bad and ki["waiting"] == 2
    good = c.call("Q.PUSH", "q", "good", "g")
    assert c.call("Q.PULL", "q", "COUNT", 5)[0][0] == good  # other keys flow
    assert c.call("Q.UNPARK", "q", "good") == 0
    assert c.call("Q.UNPARK", "q", "bad") == 1
    m = c.call("Q.PULL", "q")[0]
    assert m[0] == bad and m[3] == 1  # starts over
    assert c.call("Q.ACK", "q", bad, m[4]) == 1
    assert c.call("Q.PULL", "q")[0][2] == b"b2"


def test_coalesce_keeps_one_waiting(c):
    a = c.call("Q.PUSH", "q", "k", "v1", "COALESCE")
    m = c.call("Q.PULL", "q")[0]
    b = c.call("Q.PUSH", "q", "k", "v2", "COALESCE")  # a is in flight: a new one
    assert b != a
    assert c.call("Q.PUSH", "q", "k", "v3", "COALESCE") == b
    assert c.call("Q.PUSH", "q", "k", "v4", "COALESCE") == b
    assert c.call("Q.LEN", "q") == [1, 1, 0]
    c.call("Q.ACK", "q", a, m[4])
    assert c.call("Q.PULL", "q")[0][:3] == [b, b"k", b"v4"]
    assert info(c, "q")["merged"] == 2


def test_delay(c):
    t0 = time.monotonic()
    mid = c.call("Q.PUSH", "q", "k", "later", "DELAY", NACK_DELAY_MS)
    assert c.call("Q.LEN", "q") == [0, 0, 1]
    assert c.call("Q.PULL", "q") == []
    m = c.call("Q.PULL", "q", "BLOCK", 30000)
    assert m[0][0] == mid and time.monotonic() - t0 >= NACK_DELAY_MS / 1000.0  # never early


def test_dedup_id(c):
    a = c.call("Q.PUSH", "q", "k", "p", "ID", "x")
    assert c.call("Q.PUSH", "q", "k", "other", "ID", "x") == a
    assert c.call("Q.LEN", "q") == [1, 0, 0]
    assert info(c, "q")["deduped"] == 1
    c.call("Q.CONFIG", "q2", "DEDUP", 100)
    b = c.call("Q.PUSH", "q2", "k", "p", "ID", "x")
    poll(lambda: info(c, "q2")["dedup_entries"] == 0, "dedup window end")
    assert c.call("Q.PUSH", "q2", "k", "p", "ID", "x") != b


def test_maxlen_reject_block_and_maxperkey(server, c):
    c.call("Q.CONFIG", "q", "MAXLEN", 2)
    c.call("Q.PUSH", "q", "a", "1")
    c.call("Q.PUSH", "q", "b", "2")
    err(c.call("Q.PUSH", "q", "c", "3"), "BUSY")
    err(c.call("Q.CALL", "q", "c", "3"), "BUSY")
    assert c.call("Q.PUSH", "q", "a", "1b", "COALESCE") > 0  # merging needs no room
    c.call("Q.CONFIG", "q", "ONFULL", "block")
    err(c.call("Q.PUSH", "q", "c", "3", "TIMEOUT", 50), "TIMEOUT")
    with server.raw() as p:
        p.send("Q.PUSH", "q", "c", "3")
        poll(lambda: info(c, "q")["blocked_pushers"] == 1, "pusher parked")
        m = c.call("Q.PULL", "q")  # a delivery makes room
        cid = p.read()
        assert isinstance(cid, int) and cid > m[0][0]
    assert c.call("Q.LEN", "q") == [2, 1, 0]
    with server.raw() as p:  # a larger MAXLEN makes room too
        p.send("Q.PUSH", "q", "d", "4")
        poll(lambda: info(c, "q")["blocked_pushers"] == 1, "pusher parked")
        assert c.call("Q.CONFIG", "q", "MAXLEN", 10) == "OK"
        assert isinstance(p.read(), int)
    c.call("Q.CONFIG", "q", "MAXPERKEY", 1)
    c.call("Q.PUSH", "q", "e", "1")
    err(c.call("Q.PUSH", "q", "e", "2"), "LIMIT")


# ---- request / reply -----------------------------------------------------------------------


def consumer(port, q, n, result=lambda p: b"re:" + p):
    """Serve n messages of q in a thread, acking with a result."""
    def run():
        with Conn(port, timeout=10.0) as w:
            for _ in range(n):
                m = w.call("Q.PULL", q, "BLOCK", 10000)
                if not m:
                    return
                w.call("Q.ACK", q, m[0][0], m[0][4], "RESULT", result(m[0][2]))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_call_round_trip(server, c):
    t = consumer(server.port, "rpc", 3)
    poll(lambda: blocked(c, "pull") == 1, "consumer parked")  # the call wakes a parked puller
    assert c.call("Q.CALL", "rpc", "k", "ping") == b"re:ping"
    assert c.call("Q.CALL", "rpc", "k", "again", "TIMEOUT", 10000) == b"re:again"
    assert c.call("Q.CALL", "rpc", "j", "x", "ID", "req-1") == b"re:x"
    t.join(DEADLINE_S)
    # a repeat inside the dedup window replays the result, nothing is queued
    assert c.call("Q.CALL", "rpc", "j", "different", "ID", "req-1") == b"re:x"
    assert c.call("Q.LEN", "rpc") == [0, 0, 0]


def test_call_repeat_waits_for_the_first(server, c):
    with server.raw() as a, server.raw() as b:
        a.send("Q.CALL", "rpc", "k", "work", "ID", "same")
        poll(lambda: c.call("Q.LEN", "rpc") == [1, 0, 0], "the first call queued")
        b.send("Q.CALL", "rpc", "k", "work", "ID", "same")
        m = c.call("Q.PULL", "rpc", "BLOCK", 30000)[0]
        poll(lambda: info(c, "rpc")["deduped"] == 1, "the repeat deduplicated")
        assert c.call("Q.ACK", "rpc", m[0], m[4], "RESULT", "once") == 1
        assert a.read() == b"once" and b.read() == b"once"
    assert info(c, "rpc")["pushed"] == 1


def test_call_timeout_and_caller_disconnect(server, c):
    r = err(c.call("Q.CALL", "rpc", "k", "slow", "TIMEOUT", 50), "TIMEOUT")
    mid = int(r.msg.split()[2])
    assert c.call("Q.RESULT", "rpc", mid) is None
    m = c.call("Q.PULL", "rpc")[0]  # still queued, still processed
    assert m[0] == mid
    c.call("Q.ACK", "rpc", mid, m[4], "RESULT", "late")
    assert c.call("Q.RESULT", "rpc", mid) == b"late"
    # a caller that goes away: the message is processed all the same
    gone = server.raw()
    gone.send("Q.CALL", "rpc", "k", "orphan")
    m = c.call("Q.PULL", "rpc", "BLOCK", 30000)[0]
    gone.close()
    assert c.call("Q.ACK", "rpc", m[0], m[4], "RESULT", "kept") == 1
    assert c.call("Q.RESULT", "rpc", m[0]) == b"kept"


def test_call_waits_for_room_under_onfull_block(server, c):
    c.call("Q.CONFIG", "q", "MAXLEN", 1, "ONFULL", "block")
    a = c.call("Q.PUSH", "q", "a", "1")
    # a consumer frees room: the call's push goes in, then it gets its result
    with server.raw() as p:
        p.send("Q.CALL", "q", "c", "work", "TIMEOUT", 20000)
        poll(lambda: info(c, "q")["blocked_pushers"] == 1, "call parked for room")
        assert c.call("Q.LEN", "q") == [1, 0, 0]
        m = c.call("Q.PULL", "q")[0]  # a delivery makes room
        assert m[0] == a
        assert c.call("Q.LEN", "q") == [1, 1, 0]  # the call's message is in
        assert info(c, "q")["blocked_pushers"] == 0
        assert c.call("Q.ACK", "q", a, m[4]) == 1
        m = c.call("Q.PULL", "q")[0]
        assert m[1:3] == [b"c", b"work"]
        assert c.call("Q.ACK", "q", m[0], m[4], "RESULT", "done") == 1
        assert p.read() == b"done"
    # still full when TIMEOUT runs out: -TIMEOUT, nothing pushed
    x = c.call("Q.PUSH", "q", "x", "fill")
    pushed = info(c, "q")["pushed"]
    r = err(c.call("Q.CALL", "q", "t", "late", "TIMEOUT", 50), "TIMEOUT")
    assert "still full" in r.msg and "nothing was pushed" in r.msg, r
    assert info(c, "q")["pushed"] == pushed and c.call("Q.LEN", "q") == [1, 0, 0]
    # a caller that disconnects while waiting for room pushes nothing
    gone = server.raw()
    gone.send("Q.CALL", "q", "g", "orphan")
    poll(lambda: info(c, "q")["blocked_pushers"] == 1, "call parked for room")
    gone.close()
    poll(lambda: info(c, "q")["blocked_pushers"] == 0, "caller gone from the line")
    m = c.call("Q.PULL", "q")[0]  # room now, and nobody waits for it
    assert m[0] == x
    assert c.call("Q.LEN", "q") == [0, 1, 0] and info(c, "q")["pushed"] == pushed
    assert c.call("Q.ACK", "q", x, m[4]) == 1
    # TIMEOUT bounds the whole call: time spent waiting for room counts
    c.call("Q.PUSH", "q", "x", "fill")
    timeout_ms = 1500
    with server.raw(timeout=10.0) as p:
        t0 = time.monotonic()
        p.send("Q.CALL", "q", "s", "slow", "TIMEOUT", timeout_ms)
        poll(lambda: info(c, "q")["blocked_pushers"] == 1, "call parked for room")
        # let most of the TIMEOUT go by in the line before room appears
        poll(lambda: time.monotonic() - t0 >= 0.6 * timeout_ms / 1000, "time in the line")
        c.call("Q.PULL", "q")
        r = err(p.read(), "TIMEOUT")
        elapsed = time.monotonic() - t0
    assert "not done" in r.msg, r  # it was pushed; it timed out waiting for its result
    assert elapsed < 1.5 * timeout_ms / 1000, elapsed  # not a fresh TIMEOUT after the push
    assert c.call("Q.LEN", "q") == [1, 1, 0]


def test_result_block(server, c):
    mid = c.call("Q.PUSH", "q", "k", "p")
    assert c.call("Q.RESULT", "q", mid, "BLOCK", 30) is None
    with server.raw() as w:
        w.send("Q.RESULT", "q", mid, "BLOCK", 10000)
        poll(lambda: blocked(c, "result") == 1, "Q.RESULT parked")  # else the ack may come first
        m = c.call("Q.PULL", "q")[0]
        c.call("Q.ACK", "q", mid, m[4], "RESULT", "r")
        assert w.read() == b"r"


def test_call_noack_and_drop(server, c):
    t = threading.Thread(target=lambda: Conn(server.port).call("Q.PULL", "rpc", "NOACK", "BLOCK", 10000),
                         daemon=True)
    t.start()
    poll(lambda: blocked(c, "pull") == 1, "NOACK puller parked")  # the call's push wakes it
    assert c.call("Q.CALL", "rpc", "k", "fire", "TIMEOUT", 10000) is None  # done at delivery, no result
    t.join(DEADLINE_S)
    with server.raw() as w:
        w.send("Q.CALL", "rpc", "k", "lost")
        poll(lambda: c.call("Q.LEN", "rpc") == [1, 0, 0], "the call queued")
        assert c.call("Q.DROP", "rpc") == 1
        err(w.read(), "NOTFOUND")


def test_keyinfo_topkeys(c):
    for k, n in [("a", 1), ("b", 3), ("c", 2)]:
        for i in range(n):
            c.call("Q.PUSH", "q", k, str(i))
    assert c.call("Q.TOPKEYS", "q") == [[b"b", 3], [b"c", 2], [b"a", 1]]
    assert c.call("Q.TOPKEYS", "q", "COUNT", 1) == [[b"b", 3]]
    assert keyinfo(c, "q", "b")["state"] == b"waiting"
    c.call("Q.PULL", "q", "COUNT", 3)
    assert c.call("Q.TOPKEYS", "q", "COUNT", 2) == [[b"b", 2], [b"c", 1]]


# ---- restarts --------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
@pytest.mark.parametrize("snapshot", [False, True])
def test_state_survives_restart(ordod_factory, sig, snapshot):
    srv = ordod_factory("--fsync", "always")
    with srv.raw() as c:
        c.call("Q.CONFIG", "q", "LEASE", 300, "MAXATTEMPTS", 5, "DEDUP", 600000)
        waiting = c.call("Q.PUSH", "q", "w", "waits", "ID", "d1")
        flying = c.call("Q.PUSH", "q", "f", "flies")
        done = c.call("Q.PUSH", "q", "d", "done")
        delayed = c.call("Q.PUSH", "q", "z", "later", "DELAY", 400)
        ms = {m[0]: m for m in c.call("Q.PULL", "q", "COUNT", 3)}
        assert set(ms) == {waiting, flying, done}
        c.call("Q.ACK", "q", done, ms[done][4], "RESULT", "res")
        c.call("Q.NACK", "q", waiting, ms[waiting][4])
        if snapshot:
            assert c.call("SNAPSHOT") > 0
            poll(lambda: srv.info("persistence")["snapshot_in_progress"] == "0", "snapshot")
            c.call("Q.PUSH", "q", "after", "snap")  # and a log after it
        rev_before = c.call("KV.REV")[0]
    restart(srv, sig)
    with srv.raw() as c:
        assert c.call("KV.REV")[0] >= rev_before
        assert c.call("Q.RESULT", "q", done) == b"res"
        assert c.call("Q.PUSH", "q", "w", "dup", "ID", "d1") == waiting  # dedup window kept
        got = {}
        end = time.monotonic() + DEADLINE_S
        want = {waiting, flying, delayed} | ({c.call("Q.PEEK", "q", "COUNT", 10)[-1][0]} if snapshot else set())
        while set(got) != want and time.monotonic() < end:
            for m in c.call("Q.PULL", "q", "COUNT", 10, "BLOCK", 1000):
                got[m[0]] = m
                assert c.call("Q.ACK", "q", m[0], m[4]) == 1
        assert set(got) == want
        assert got[flying][3] == 2  # redelivered after its lease ran out
        assert got[waiting][3] == 2  # the nack spent an attempt
        assert got[delayed][2] == b"later"
        assert c.call("Q.LEN", "q") == [0, 0, 0]
        # ids and tokens keep increasing across the restart
        assert c.call("Q.PUSH", "q", "n", "new") > max(got)
        i = info(c, "q")
        assert (i["lease"], i["maxattempts"]) == (300, 5)


# ---- the checker -------------------------------------------------------------------------


def test_checker_concurrent_producers_and_misbehaving_consumers(server):
    """Producers push per-key sequences; consumers pull with BLOCK and
    sometimes crash (close without acking), stall past their lease or nack.
    The checker then asserts: per-key order, never two deliveries of one key
    in flight, no acknowledged push lost, nothing delivered after its ack,
    nothing stuck."""
    Q, DLQ, LEASE_MS = "work", "work-dl", 250
    PRODUCERS, KEYS_PER_PRODUCER, PER_KEY, CONSUMERS = 4, 4, 25, 6
    with server.raw() as c:
        c.call("Q.CONFIG", Q, "LEASE", LEASE_MS, "MAXATTEMPTS", 4, "DEADLETTER", DLQ)
    lock = threading.Lock()
    pushed = {}        # id -> (key, seq)
    deliveries = []    # (key, id, seq, token, t_sent, t_recv)
    acks = []          # (key, id, seq, token, t_sent, t_recv, ok)
    dead = set()       # (key, seq) found in the dead-letter queue
    stop = threading.Event()
    errors = []
    rnd = random.Random(1234)
    behaviours = {"ack": 0, "nack": 0, "crash": 0, "stall": 0, "stale_ack_refused": 0}

    def producer(p):
        try:
            with server.raw(timeout=10.0) as w:
                seqs = {k: 0 for k in range(KEYS_PER_PRODUCER)}
                order = [k for k in range(KEYS_PER_PRODUCER) for _ in range(PER_KEY)]
                random.Random(p).shuffle(order)
                for k in order:
                    key = "p%d-k%d" % (p, k)
                    seq = seqs[k]
                    seqs[k] += 1
                    mid = w.call("Q.PUSH", Q, key, "%s:%d" % (key, seq))
                    assert isinstance(mid, int), mid
                    with lock:
                        pushed[mid] = (key, seq)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(repr(e))

    def consumer_thread(i):
        r = random.Random(i)
        w = server.raw(timeout=10.0)
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                ms = w.call("Q.PULL", Q, "BLOCK", 100)
                t1 = time.monotonic()
                if isinstance(ms, RespError):
                    errors.append(repr(ms))
                    return
                for m in ms:
                    mid, key, payload, attempt, token = m
                    k, seq = payload.decode().rsplit(":", 1)
                    assert k == key.decode()
                    with lock:
                        deliveries.append((k, mid, int(seq), token, t0, t1))
                    roll = r.random()
                    if roll < 0.06:  # crash: go away without acking
                        with lock:
                            behaviours["crash"] += 1
                        w.close()
                        w = server.raw(timeout=10.0)
                        continue
                    if roll < 0.12:  # stall past the lease, then try to ack
                        with lock:
                            behaviours["stall"] += 1
                        time.sleep(LEASE_MS * 1.6 / 1000)  # simulated slow work
                    verb = "Q.NACK" if roll > 0.93 else "Q.ACK"
                    a0 = time.monotonic()
                    ok = w.call(verb, Q, mid, token)
                    a1 = time.monotonic()
                    with lock:
                        if verb == "Q.ACK":
                            acks.append((k, mid, int(seq), token, a0, a1, ok == 1))
                            behaviours["ack" if ok == 1 else "stale_ack_refused"] += 1
                        else:
                            behaviours["nack"] += 1
                            acks.append((k, mid, int(seq), token, a0, a1, None if ok == 1 else False))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
        finally:
            w.close()

    def dead_letters():
        try:
            with server.raw(timeout=10.0) as w:
                while not stop.is_set():
                    for m in w.call("Q.PULL", DLQ, "BLOCK", 100, "NOACK", "COUNT", 100):
                        k, seq = m[2].decode().rsplit(":", 1)
                        with lock:
                            dead.add((k, int(seq)))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=consumer_thread, args=(i,)) for i in range(CONSUMERS)]
    threads.append(threading.Thread(target=dead_letters))
    prods = [threading.Thread(target=producer, args=(p,)) for p in range(PRODUCERS)]
    for t in threads + prods:
        t.start()
    for t in prods:
        t.join(60)
    total = PRODUCERS * KEYS_PER_PRODUCER * PER_KEY

    def settled():
        with lock:
            acked = {(k, s) for (k, _, s, _, _, _, ok) in acks if ok}
            return len(acked | dead) >= total

    try:
        poll(settled, "every pushed message acked or dead-lettered", 90)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    assert len(pushed) == total

    # 1. acknowledged pushes lost = 0
    acked_ok = [a for a in acks if a[6]]
    done = {(k, s) for (k, _, s, _, _, _, _) in acked_ok} | dead
    lost = [v for v in pushed.values() if v not in done]
    assert lost == [], "lost %d acknowledged pushes: %r" % (len(lost), lost[:10])

    # 2. per-key order: a key's acked messages, in ack order, are in push
    #    order. Acks are ordered by when they were sent: the next message of
    #    a key is delivered only after the server applied the previous ack,
    #    which was sent before (its reply may be read later, so not by that).
    order_violations = 0
    by_key = {}
    for a in sorted(acked_ok, key=lambda a: a[4]):
        by_key.setdefault(a[0], []).append(a)
    for k, lst in by_key.items():
        ids = [a[1] for a in lst]
        seqs = [a[2] for a in lst]
        if ids != sorted(ids) or seqs != sorted(seqs):
            order_violations += 1
            print("order violation on", k, [(a[1], a[2], a[3]) for a in lst])
    assert order_violations == 0

    # 3. two deliveries of one key in flight at once: a delivery D2 received
    #    before an ack/nack of an earlier delivery D1 of the same key was even
    #    sent, while that ack still succeeded
    dels_by_key = {}
    for d in deliveries:
        dels_by_key.setdefault(d[0], []).append(d)
    overlap = 0
    for (k, mid, seq, token, a0, a1, ok) in acks:
        if ok is False:
            continue
        for d in dels_by_key.get(k, []):
            if d[3] > token and d[5] < a0:
                overlap += 1
    assert overlap == 0

    # 4. acked and then delivered again = 0
    acked_at = {a[1]: a[5] for a in acked_ok}
    redelivered_after_ack = [d for d in deliveries if d[1] in acked_at and d[4] > acked_at[d[1]]]
    assert redelivered_after_ack == []
    assert len(acked_at) == len(acked_ok)  # no message acked twice

    # 5. nothing stuck
    with server.raw() as c:
        assert c.call("Q.LEN", Q) == [0, 0, 0]
        assert c.call("Q.LEN", DLQ) == [0, 0, 0]
        i = info(c, Q)
    # the run exercised what it claims to
    assert behaviours["crash"] > 0 and behaviours["stall"] > 0 and behaviours["nack"] > 0, behaviours
    assert i["redelivered"] > 0 and i["nacked"] > 0


def test_info_blocked_clients_by_kind(server, c):
    """INFO clients counts every parked connection, by what it waits for,
    and forgets each one when it is answered or goes away."""
    kinds = ("pull", "push", "call", "result", "lock", "elect")
    assert blocked(c) == 0 and all(blocked(c, k) == 0 for k in kinds)
    c.call("Q.CONFIG", "full", "MAXLEN", 1, "ONFULL", "block")
    c.call("Q.PUSH", "full", "k", "1")
    mid = c.call("Q.PUSH", "other", "k", "m")
    tok = c.call("LOCK.ACQUIRE", "L", 60000)
    term = c.call("ELECT.CAMPAIGN", "E", "a", 60000)
    parked = [
        ("pull", ["Q.PULL", "empty", "BLOCK", 60000]),
        ("push", ["Q.PUSH", "full", "k", "2"]),
        ("call", ["Q.CALL", "full", "k", "3", "TIMEOUT", 60000]),
        ("result", ["Q.RESULT", "other", mid, "BLOCK", 60000]),
        ("lock", ["LOCK.ACQUIRE", "L", 60000, "WAIT", 60000]),
        ("elect", ["ELECT.CAMPAIGN", "E", "b", 60000]),
    ]
    conns = []
    for n, (kind, cmd) in enumerate(parked, 1):
        w = server.raw()
        w.send(*cmd)
        conns.append(w)
        poll(lambda: blocked(c, kind) == 1, kind + " parked")
        assert blocked(c) == n
    # answered: the lock waiter gets the lock, and is no longer counted
    assert c.call("LOCK.RELEASE", "L", tok) == 1
    assert conns[4].read() > tok
    assert blocked(c, "lock") == 0 and blocked(c) == len(parked) - 1
    # gone: a closed connection's waiter is dropped
    for w in conns:
        w.close()
    poll(lambda: blocked(c) == 0, "every waiter dropped")
    assert all(blocked(c, k) == 0 for k in kinds)
    assert c.call("ELECT.RESIGN", "E", term) == 1


def test_config_keeps_deadletter_across_a_restart(server):
    """Q.CONFIG without DEADLETTER keeps the queue's: the record it logs
    names it (a copy: the apply frees the name the command read it from,
    which the log then encoded after the apply; ASan saw it)."""
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "DEADLETTER", "dlq-name") == "OK"
        assert c.call("Q.CONFIG", "q", "MAXLEN", 5) == "OK"
    restart(server, signal.SIGKILL)
    with server.raw() as c:
        assert info(c, "q")["deadletter"] == b"dlq-name"
