"""Redis's string commands (issue 24): SETEX, PSETEX, GETEX, GETDEL, MSET,
MSETNX, APPEND, STRLEN, DECR, DECRBY and SET's GET, EXAT and PXAT.

Every test but the last ones runs twice (the `either` fixture), against
ordod and against a real redis-server, with the same assertions: the
replies are Redis's. The ordod-only tests at the end check what is ordo's
own: each write is a record (MSET one record, kept whole across a crash),
and APPEND's log record carries the appended bytes only.
"""
import time

import pytest
import redis

from ordoproc import poll
from resp import RespError
from watchlib import WatchConn


def err(v, prefix):
    assert isinstance(v, RespError) and v.msg.startswith(prefix), v
    return v.msg


def test_setex_psetex(either):
    r = either.client()
    assert r.setex("k", 100, "v") is True
    assert r.get("k") == b"v" and 95 <= r.ttl("k") <= 100
    assert r.psetex("p", 100000, "w") is True
    assert 95000 <= r.pttl("p") <= 100000
    with either.raw() as c:
        assert err(c.call("SETEX", "k", "0", "v"), "ERR invalid expire time in 'setex' command")
        assert err(c.call("SETEX", "k", "-5", "v"), "ERR invalid expire time in 'setex' command")
        assert err(c.call("PSETEX", "k", "0", "v"), "ERR invalid expire time in 'psetex' command")
        assert err(c.call("SETEX", "k", "abc", "v"), "ERR value is not an integer or out of range")
        assert err(c.call("SETEX", "k", "10"), "ERR wrong number of arguments")
    r.psetex("short", 50, "x")
    poll(lambda: r.get("short") is None, "the PSETEX key to expire")


def test_getex(either):
    r = either.client()
    assert r.getex("none") is None
    r.set("k", "v")
    assert r.getex("k") == b"v" and r.ttl("k") == -1
    assert r.getex("k", ex=100) == b"v" and 95 <= r.ttl("k") <= 100
    assert r.getex("k", px=200000) == b"v" and 195000 <= r.pttl("k") <= 200000
    at = int(time.time()) + 1000
    assert r.getex("k", exat=at) == b"v" and r.expiretime("k") == at
    assert r.getex("k", persist=True) == b"v" and r.ttl("k") == -1
    assert r.getex("k", pxat=int(time.time() * 1000) - 1000) == b"v"  # in the past: deleted
    assert r.get("k") is None and r.exists("k") == 0
    with either.raw() as c:
        c.call("SET", "k", "v")
        assert err(c.call("GETEX", "k", "EX", "0"), "ERR invalid expire time in 'getex' command")
        assert err(c.call("GETEX", "k", "EX"), "ERR syntax error")
        assert err(c.call("GETEX", "k", "PERSIST", "EX", "10"), "ERR syntax error")
        assert err(c.call("GETEX", "k", "BOGUS"), "ERR syntax error")


def test_getdel(either):
    r = either.client()
    r.set("k", "v")
    assert r.getdel("k") == b"v"
    assert r.get("k") is None and r.getdel("k") is None


def test_mset_msetnx(either):
    r = either.client()
    assert r.mset({"a": "1", "b": "2", "c": "3"}) is True
    assert r.mget("a", "b", "c") == [b"1", b"2", b"3"]
    r.expire("a", 100)
    r.mset({"a": "x"})
    assert r.ttl("a") == -1  # MSET clears an expiry, as SET does
    assert r.msetnx({"a": "9", "d": "4"}) is False
    assert r.get("d") is None and r.get("a") == b"x"
    assert r.msetnx({"d": "4", "e": "5"}) is True
    assert r.mget("d", "e") == [b"4", b"5"]
    with either.raw() as c:
        assert err(c.call("MSET", "a"), "ERR wrong number of arguments")
        assert err(c.call("MSET", "a", "1", "b"), "ERR wrong number of arguments for 'mset' command")
        assert err(c.call("MSETNX", "a", "1", "b"), "ERR wrong number of arguments for 'msetnx' command")


def test_append_strlen(either):
    r = either.client()
    assert r.strlen("s") == 0
    assert r.append("s", "Hello") == 5
    assert r.append("s", " World") == 11
    assert r.get("s") == b"Hello World" and r.strlen("s") == 11
    r.set("t", "x", ex=100)
    assert r.append("t", "yz") == 3
    assert 95 <= r.ttl("t") <= 100  # APPEND keeps the expiry
    assert r.append("u", "") == 0 and r.exists("u") == 1


def test_decr_decrby(either):
    r = either.client()
    assert r.decr("n") == -1
    assert r.decrby("n", 10) == -11
    assert r.decrby("n", -20) == 9
    r.set("m", "-9223372036854775808")
    with either.raw() as c:
        assert err(c.call("DECR", "m"), "ERR increment or decrement would overflow")
        assert err(c.call("DECRBY", "n", "-9223372036854775808"), "ERR decrement would overflow")
        assert err(c.call("DECRBY", "n", "x"), "ERR value is not an integer or out of range")
        c.call("SET", "s", "abc")
        assert err(c.call("DECR", "s"), "ERR value is not an integer or out of range")


def test_set_get_exat_pxat(either):
    r = either.client()
    assert r.set("k", "1", get=True) is None
    assert r.set("k", "2", get=True) == b"1"
    assert r.set("k", "3", nx=True, get=True) == b"2"  # not set: NX failed
    assert r.get("k") == b"2"
    assert r.set("new", "1", xx=True, get=True) is None and r.get("new") is None
    at = int(time.time()) + 1000
    assert r.set("k", "4", exat=at) is True and r.expiretime("k") == at
    pat = int(time.time() * 1000) + 500000
    assert r.set("k", "5", pxat=pat) is True and r.pexpiretime("k") == pat
    assert r.set("gone", "x", pxat=int(time.time() * 1000) - 10) is True
    assert r.get("gone") is None
    with either.raw() as c:
        assert err(c.call("SET", "k", "v", "EXAT", "0"), "ERR invalid expire time in 'set' command")
        assert err(c.call("SET", "k", "v", "EX", "10", "PXAT", "10"), "ERR syntax error")
        assert err(c.call("SET", "k", "v", "KEEPTTL", "EXAT", "10"), "ERR syntax error")


def test_in_multi(either):
    r = either.client()
    p = r.pipeline(transaction=True)
    p.mset({"a": "1", "b": "2"}).append("a", "x").getdel("b").decr("c").strlen("a")
    assert p.execute() == [True, 2, b"2", -1, 2]
    assert r.get("a") == b"1x" and r.get("b") is None


# ---- ordo's own ------------------------------------------------------------


def test_mset_is_one_record_across_a_crash(ordod_factory):
    """MSET's puts are one log record (REC_TXN): after a SIGKILL the
    restarted server replays one record and has every key."""
    srv = ordod_factory("--fsync", "always")
    r = srv.client()
    rev0 = int(srv.info("kv")["revision"])
    assert r.mset({"k%d" % i: str(i) for i in range(50)}) is True
    assert int(srv.info("kv")["revision"]) == rev0 + 50  # one revision per key
    srv.kill()
    srv.start(srv.port)
    recovered = [l for l in srv.log_tail().splitlines() if "recovered to revision" in l][-1]
    assert "recovered to revision %d (1 log records)" % (rev0 + 50) in recovered, recovered
    r = srv.client()
    assert r.mget(["k%d" % i for i in range(50)]) == [str(i).encode() for i in range(50)]


def test_writes_fire_watches(server):
    """Each write is a revision watchers see: APPEND a put with the whole
    value, GETDEL a deletion, SETEX a put."""
    w = WatchConn(server.port)
    w.watch("p/", "PREFIX")
    r = server.client()
    r.append("p/a", "xy")
    r.append("p/a", "z")
    r.getdel("p/a")
    r.setex("p/b", 100, "v")
    seen = []
    while len(seen) < 4:
        e = w.next_event()
        if e[0] == b"watch" and len(e) > 5:
            seen.append((e[3], e[4], e[5]))
    w.close()
    assert seen == [(b"put", b"p/a", b"xy"), (b"put", b"p/a", b"xyz"), (b"del", b"p/a", None),
                    (b"put", b"p/b", b"v")]


def test_append_limit(ordod_factory):
    srv = ordod_factory("--max-value-bytes", "10")
    with srv.raw() as c:
        assert c.call("APPEND", "k", "12345") == 5
        assert err(c.call("APPEND", "k", "123456"), "LIMIT value would be 11 bytes, above max-value-bytes (10)")
        assert c.call("GET", "k") == b"12345"
