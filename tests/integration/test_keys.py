"""Plain keys (GET SET DEL EXISTS MGET INCR INCRBY) and versioned keys
(KV.PUT KV.GET KV.DEL KV.RANGE KV.REV KV.COMPACT), with their errors and
the size limits."""
import time

import pytest
import redis

from ordoproc import poll
from resp import RespError

BIN_KEY = b"k\x00\xff\r\n *$-1"
BIN_VAL = bytes(range(256)) * 3


def rev(c):
    return c.call("KV.REV")


def test_get_set_binary(server):
    with server.raw() as c:
        assert c.call("GET", "nope") is None
        assert c.call("SET", BIN_KEY, BIN_VAL) == "OK"
        assert c.call("GET", BIN_KEY) == BIN_VAL
        assert c.call("SET", "", "") == "OK"  # empty key and value
        assert c.call("GET", "") == b""
        assert c.call("SET", "k").code == "ERR"
        assert c.call("GET").code == "ERR"
        assert c.call("GET", "a", "b").code == "ERR"
        assert c.call("SET", "k", "v", "BOGUS").msg.startswith("ERR syntax error")


def test_set_nx_xx(server):
    with server.raw() as c:
        assert c.call("SET", "k", "1", "XX") is None
        assert c.call("GET", "k") is None
        assert c.call("SET", "k", "1", "NX") == "OK"
        r0 = rev(c)[0]
        assert c.call("SET", "k", "2", "NX") is None
        assert rev(c)[0] == r0  # a failed condition takes no revision
        assert c.call("GET", "k") == b"1"
        assert c.call("SET", "k", "3", "XX") == "OK"
        assert c.call("GET", "k") == b"3"
        assert c.call("SET", "k", "4", "NX", "XX").msg.startswith("ERR syntax error")
        assert c.call("SET", "k", "4", "xx", "nx").msg.startswith("ERR syntax error")


# A TTL that must still be running after a few more round trips: long enough
# for a loaded (ASan, 2-core) machine, short enough to wait out.
TTL_MS = 1000


def wait_gone(c, key):
    """Poll until GET key is nil."""
    poll(lambda: c.call("GET", key) is None, "key %s to expire" % key)


def test_set_px_ex_expiry(server):
    with server.raw() as c:
        t0 = time.monotonic()
        assert c.call("SET", "k", "v", "PX", TTL_MS) == "OK"
        assert c.call("EXISTS", "k") == 1
        wait_gone(c, "k")
        assert time.monotonic() - t0 >= TTL_MS / 1000.0  # never early: t0 was taken before the request left
        assert c.call("EXISTS", "k") == 0 and c.call("MGET", "k") == [None]
        assert c.call("KV.GET", "k") is None
        # the expiry is a revision of its own: a del in the history
        cur = rev(c)[0]
        assert c.call("KV.GET", "k", "REV", cur - 1)[0] == b"v"
        assert c.call("SET", "e", "v", "EX", "100") == "OK"
        assert c.call("DBSIZE") == 1
        assert c.call("SET", "k", "v", "PX", "0") == RespError("ERR invalid expire time in 'set' command")
        assert c.call("SET", "k", "v", "EX", "-1").code == "ERR"
        assert c.call("SET", "k", "v", "PX", "abc").msg.startswith("ERR value is not an integer or out of range")
        assert c.call("SET", "k", "v", "PX").code == "ERR"
        assert c.call("SET", "k", "v", "PX", "10", "EX", "10").msg.startswith("ERR syntax error")
        assert c.call("SET", "k", "v", "PX", "10", "KEEPTTL").msg.startswith("ERR syntax error")
        assert c.call("SET", "k", "v", "EX", "9223372036854775807").code == "ERR"


def test_expiry_reaped_without_reads(server):
    """The server deletes the key at its deadline by itself: DBSIZE and the
    revision move without any read of the key."""
    with server.raw() as c:
        c.call("SET", "k", "v", "PX", "50")
        r0 = rev(c)[0]
        poll(lambda: c.call("DBSIZE") == 0, "DBSIZE 0")
        assert rev(c)[0] == r0 + 1


def test_keepttl_and_plain_set_clears_ttl(server):
    with server.raw() as c:
        assert c.call("SET", "k", "v1", "PX", "100000") == "OK"
        assert c.call("SET", "k", "v2", "KEEPTTL") == "OK"
        assert server.info("keyspace")["db0"] == "keys=1,expires=1"
        assert c.call("SET", "k", "v3") == "OK"
        assert server.info("keyspace")["db0"] == "keys=1,expires=0"
        t0 = time.monotonic()
        assert c.call("SET", "t", "v", "PX", TTL_MS) == "OK"
        assert c.call("SET", "t", "v2", "KEEPTTL") == "OK"
        assert c.call("SET", "n", "v", "PX", TTL_MS) == "OK"
        assert c.call("SET", "n", "v2") == "OK"  # clears the TTL
        # the TTLs were still running when KEEPTTL and the plain SET ran
        assert time.monotonic() - t0 < TTL_MS / 1000.0, "too slow to test KEEPTTL"
        wait_gone(c, "t")
        # still there well after the old deadline: a later-expiring probe
        # marks "well after" instead of a sleep
        c.call("SET", "probe", "x", "PX", "300")
        wait_gone(c, "probe")
        assert c.call("GET", "n") == b"v2"


def test_del_exists_mget(server):
    with server.raw() as c:
        for k in ("a", "b", BIN_KEY):
            c.call("SET", k, k)
        assert c.call("EXISTS", "a", "a", "zz", BIN_KEY) == 3
        assert c.call("MGET", "a", "zz", BIN_KEY) == [b"a", None, BIN_KEY]
        r0 = rev(c)[0]
        assert c.call("DEL", "a", "zz", "b", "a") == 2
        assert rev(c)[0] == r0 + 2  # one revision per deleted key
        assert c.call("EXISTS", "a", "b") == 0
        assert c.call("DEL").code == "ERR"
        assert c.call("EXISTS").code == "ERR"
        assert c.call("MGET").code == "ERR"


def test_incr(server):
    with server.raw() as c:
        assert c.call("INCR", "n") == 1
        assert c.call("INCRBY", "n", "41") == 42
        assert c.call("INCRBY", "n", "-50") == -8
        assert c.call("GET", "n") == b"-8"
        c.call("SET", "s", "abc")
        notint = RespError("ERR value is not an integer or out of range")
        assert c.call("INCR", "s") == notint
        for bad in (" 1", "01", "1 ", "+1", "", "1.5", "99999999999999999999"):
            c.call("SET", "s", bad)
            assert c.call("INCR", "s") == notint, bad
        assert c.call("INCRBY", "n", "x").msg.startswith(notint.msg)
        assert c.call("INCRBY", "n", "9223372036854775808").msg.startswith(notint.msg)
        c.call("SET", "m", "9223372036854775807")
        r0 = rev(c)[0]
        assert c.call("INCR", "m") == RespError("ERR increment or decrement would overflow")
        c.call("SET", "m", "-9223372036854775808")
        assert c.call("INCRBY", "m", "-1") == RespError("ERR increment or decrement would overflow")
        assert c.call("INCRBY", "m", "9223372036854775807") == -1
        assert rev(c)[0] == r0 + 2
        assert c.call("INCR").code == "ERR"


def test_incr_keeps_ttl(server):
    with server.raw() as c:
        c.call("SET", "n", "1", "PX", TTL_MS)
        assert c.call("INCR", "n") == 2
        wait_gone(c, "n")


def test_redis_py_plain(r):
    assert r.set("a", b"\x00\x01") is True
    assert r.get("a") == b"\x00\x01"
    assert r.set("a", "x", nx=True) is None
    assert r.mget(["a", "b"]) == [b"\x00\x01", None]
    assert r.incr("c") == 1 and r.incrby("c", 5) == 6
    assert r.exists("a", "c", "d") == 2
    assert r.delete("a", "c", "d") == 2
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.incr("s")


# ---- versioned keys ----------------------------------------------------------

def test_kv_put_get_versions(server):
    with server.raw() as c:
        r1 = c.call("KV.PUT", BIN_KEY, "v1")
        assert isinstance(r1, int) and r1 >= 1
        assert c.call("KV.GET", BIN_KEY) == [b"v1", r1, r1, 1, 0]
        r2 = c.call("KV.PUT", BIN_KEY, BIN_VAL)
        assert r2 == r1 + 1
        assert c.call("KV.GET", BIN_KEY) == [BIN_VAL, r1, r2, 2, 0]
        assert c.call("GET", BIN_KEY) == BIN_VAL  # plain view of the same store
        assert c.call("SET", BIN_KEY, "s") == "OK"
        assert c.call("KV.GET", BIN_KEY) == [b"s", r1, r2 + 1, 3, 0]
        d = c.call("KV.DEL", BIN_KEY)
        assert d == r2 + 2
        assert c.call("KV.GET", BIN_KEY) is None
        assert c.call("KV.DEL", BIN_KEY) == 0
        assert rev(c)[0] == d  # deleting an absent key takes no revision
        r5 = c.call("KV.PUT", BIN_KEY, "again")
        assert c.call("KV.GET", BIN_KEY) == [b"again", r5, r5, 1, 0]  # a new life
        assert c.call("KV.GET", BIN_KEY, "REV", r1) == [b"v1", r1, r1, 1, 0]
        assert c.call("KV.GET", BIN_KEY, "REV", r2) == [BIN_VAL, r1, r2, 2, 0]
        assert c.call("KV.GET", BIN_KEY, "REV", d) is None
        assert c.call("KV.GET", BIN_KEY, "REV", r1 - 1) is None if r1 > 1 else True
        # A revision not reached yet is refused (it once answered the current value).
        assert c.call("KV.GET", BIN_KEY, "REV", 10 ** 6).msg.startswith("ERR revision 1000000 is in the future")
        assert c.call("KV.GET", "k", "REV").msg.startswith("ERR syntax error")
        assert c.call("KV.GET", "k", "REV", "x").code == "ERR"
        assert c.call("KV.GET", "k", "REV", "-1").code == "ERR"
        assert c.call("KV.GET", "k", "BOGUS", "1").msg.startswith("ERR syntax error")
        assert c.call("KV.PUT", "k").code == "ERR"
        assert c.call("KV.PUT", "k", "v", "BOGUS").code == "ERR"
        # LEASE / FENCE exist now (test_coord.py): a missing lease, a lock not held
        assert c.call("KV.PUT", "k", "v", "LEASE", "999999").code == "NOTFOUND"
        assert c.call("KV.PUT", "k", "v", "FENCE", "l", "1").code == "NOTHOLDER"


def test_kv_put_ifrev(server):
    with server.raw() as c:
        assert c.call("KV.PUT", "k", "v", "IFREV", "5") == RespError("CONFLICT 0")
        r1 = c.call("KV.PUT", "k", "v1", "IFREV", "0")
        assert c.call("KV.PUT", "k", "v", "IFREV", "0") == RespError("CONFLICT %d" % r1)
        r0 = rev(c)[0]
        assert c.call("KV.PUT", "k", "v", "IFREV", str(r1 + 7)) == RespError("CONFLICT %d" % r1)
        assert rev(c)[0] == r0  # conflicts take no revision
        r2 = c.call("KV.PUT", "k", "v2", "IFREV", str(r1))
        assert r2 == r1 + 1 and c.call("GET", "k") == b"v2"
        assert c.call("KV.PUT", "k", "v3", "IFREV", str(r1)) == RespError("CONFLICT %d" % r2)
        assert c.call("KV.DEL", "k", "IFREV", str(r1)) == RespError("CONFLICT %d" % r2)
        assert c.call("KV.DEL", "k", "IFREV", str(r2)) == r2 + 1
        assert c.call("KV.DEL", "k", "IFREV", "0") == 0
        assert c.call("KV.DEL", "k", "IFREV", "3") == RespError("CONFLICT 0")
        assert c.call("KV.PUT", "k", "v", "IFREV", "x").code == "ERR"
        assert c.call("KV.PUT", "k", "v", "IFREV").code == "ERR"
        assert c.call("KV.PUT", "k", "v", "IFREV", "1", "IFREV", "1").code == "ERR"


def test_kv_cas_counter_contention(server):
    """Two clients doing read-modify-write with IFREV: every increment
    lands exactly once."""
    import threading

    n_each = 100

    def worker():
        with server.raw() as c:
            done = 0
            while done < n_each:
                cur = c.call("KV.GET", "ctr")
                val, mod = (int(cur[0]), cur[2]) if cur else (0, 0)
                r = c.call("KV.PUT", "ctr", str(val + 1), "IFREV", str(mod))
                if isinstance(r, int):
                    done += 1
                else:
                    assert r.code == "CONFLICT"

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with server.raw() as c:
        assert c.call("GET", "ctr") == str(3 * n_each).encode()


def test_kv_range(server):
    keys = [b"p/b", b"p/a", b"p/\xff", b"p/", b"p/a\x00", b"p/aa", b"p/A", b"q", b"p", b"o\xff"]
    with server.raw() as c:
        revs = {}
        for k in keys:
            revs[k] = c.call("KV.PUT", k, b"v" + k)
        got = c.call("KV.RANGE", "p/")
        want = sorted(k for k in keys if k.startswith(b"p/"))
        assert [e[0] for e in got] == want  # unsigned byte order, shorter first
        assert want == [b"p/", b"p/A", b"p/a", b"p/a\x00", b"p/aa", b"p/b", b"p/\xff"]
        for e in got:
            assert e == [e[0], b"v" + e[0], revs[e[0]], revs[e[0]], 1, 0]
        assert [e[0] for e in c.call("KV.RANGE", "")] == sorted(keys)
        assert [e[0] for e in c.call("KV.RANGE", "p/", "LIMIT", "2")] == want[:2]
        assert [e[0] for e in c.call("KV.RANGE", "p/", "LIMIT", "0")] == want
        assert [e[0] for e in c.call("KV.RANGE", "p/", "AFTER", "p/a")] == want[3:]
        assert [e[0] for e in c.call("KV.RANGE", "p/", "AFTER", "p/a0", "LIMIT", "1")] == [b"p/aa"]
        assert c.call("KV.RANGE", "p/", "AFTER", b"p/\xff") == []
        assert c.call("KV.RANGE", "zzz") == []
        # paging at one revision sees a consistent view despite writes between pages
        snap = rev(c)[0]
        page1 = c.call("KV.RANGE", "p/", "LIMIT", "3", "REV", snap)
        c.call("KV.DEL", want[3])
        c.call("KV.PUT", "p/ab", "new")
        c.call("KV.PUT", "p/b", "changed")
        page2 = c.call("KV.RANGE", "p/", "AFTER", page1[-1][0], "REV", snap)
        assert [e[0] for e in page1 + page2] == want
        assert [e for e in page2 if e[0] == b"p/b"][0][1] == b"vp/b"
        now = [e[0] for e in c.call("KV.RANGE", "p/")]
        assert want[3] not in now and b"p/ab" in now
        assert [e[0] for e in c.call("KV.RANGE", "p/", "REV", revs[b"p/a"])] == [b"p/a", b"p/b"]
        assert len(c.call("KV.RANGE", "p/", "REV", revs[b"p/a"])) == 2
        assert c.call("KV.RANGE", "p/", "LIMIT", "-1").code == "ERR"
        assert c.call("KV.RANGE", "p/", "LIMIT").code == "ERR"
        assert c.call("KV.RANGE", "p/", "BOGUS").msg.startswith("ERR syntax error")
        assert c.call("KV.RANGE").code == "ERR"


def test_kv_rev_compact(server):
    with server.raw() as c:
        assert rev(c) == [0, 1]
        r1 = c.call("KV.PUT", "k", "v1")
        r2 = c.call("KV.PUT", "k", "v2")
        r3 = c.call("KV.PUT", "k", "v3")
        c.call("KV.PUT", "gone", "x")
        rd = c.call("KV.DEL", "gone")
        assert rev(c) == [rd, 1]
        assert c.call("KV.COMPACT", str(rd + 1)).code == "ERR"  # the future
        assert c.call("KV.COMPACT", str(r3)) == "OK"
        assert rev(c) == [rd + 1, r3]  # a compaction is a change: it takes a revision
        assert c.call("KV.GET", "k", "REV", str(r2)) == RespError("COMPACTED %d" % r3)
        assert c.call("KV.GET", "k", "REV", str(r3)) == [b"v3", r1, r3, 3, 0]
        assert c.call("KV.RANGE", "", "REV", str(r1)) == RespError("COMPACTED %d" % r3)
        assert c.call("KV.COMPACT", str(r2)) == RespError("COMPACTED %d" % r3)
        assert c.call("KV.COMPACT", str(r3)) == "OK"  # same point: no-op
        assert c.call("KV.COMPACT", str(rd)) == "OK"
        assert c.call("KV.GET", "gone", "REV", str(rd)) is None
        assert c.call("KV.GET", "k") == [b"v3", r1, r3, 3, 0]  # live data untouched
        assert c.call("KV.COMPACT", "x").code == "ERR"
        assert c.call("KV.COMPACT").code == "ERR"
        assert c.call("KV.REV", "x").code == "ERR"


def test_automatic_compaction(ordod_factory):
    srv = ordod_factory("--history-revs", "50")
    with srv.raw() as c:
        for i in range(300):
            c.call("KV.PUT", "k%d" % (i % 7), str(i))
        cur, oldest = rev(c)
        assert cur == 300
        assert oldest > 1 and cur - oldest + 1 <= 50 + 8
        assert c.call("KV.GET", "k0", "REV", "1").code == "COMPACTED"
        assert c.call("KV.GET", "k0", "REV", str(cur - 40))[0] is not None


# ---- limits ----------------------------------------------------------------------

def test_name_and_value_limits(ordod_factory):
    srv = ordod_factory("--max-name-bytes", "300", "--max-value-bytes", "2000")
    with srv.raw() as c:
        assert c.call("SET", "k" * 300, "v" * 2000) == "OK"
        assert c.call("KV.PUT", "k" * 300, "v" * 2000) > 0
        r0 = rev(c)[0]
        for cmd in (["SET", "k" * 301, "v"], ["KV.PUT", "k" * 301, "v"], ["INCR", "k" * 301],
                    ["SET", "k", "v" * 2001], ["KV.PUT", "k", "v" * 2001], ["KV.WATCH", "k" * 301]):
            e = c.call(*cmd)
            assert isinstance(e, RespError) and e.code == "LIMIT", cmd[0]
            assert ("max-name-bytes" in e.msg) or ("max-value-bytes" in e.msg)
        assert rev(c)[0] == r0
        assert c.call("GET", "k") is None
        assert c.call("PING") == "PONG"  # the connection stays usable


def test_max_memory(ordod_factory):
    srv = ordod_factory("--max-memory-bytes", "200000")
    with srv.raw() as c:
        err = None
        for i in range(1000):
            r = c.call("SET", "k%d" % i, "v" * 1000)
            if r != "OK":
                err = r
                break
        assert err is not None and err.code == "LIMIT" and "max-memory-bytes" in err.msg
        assert c.call("DEL", "k0") == 1  # deletes are still allowed
        assert c.call("GET", "k1") == b"v" * 1000


def test_expiry_reads_agree(server):
    """Once one read says a key has expired, every read in the same breath
    agrees: KV.RANGE, DBSIZE and KV.GET at the current revision never show a
    key that GET just called gone. The commands go in one write so no timer
    can run between them."""
    batch = b"".join(__import__("resp").encode(*a) for a in (
        ["GET", "k"], ["KV.RANGE", "k"], ["DBSIZE"], ["KV.REV"]))
    for attempt in range(5):
        with server.raw() as c:
            c.call("SET", "k", "v", "PX", "30")
            deadline = time.monotonic() + 20
            while True:
                c.send_raw(batch)
                get, rng, dbsize, (cur, _) = c.read(), c.read(), c.read(), c.read()
                assert (get is None) == (rng == []) == (dbsize == 0), (get, rng, dbsize)
                if get is None:
                    assert c.call("KV.GET", "k", "REV", cur) is None
                    break
                assert time.monotonic() < deadline


def test_read_at_future_revision_is_refused(server):
    """KV.GET/KV.RANGE REV above the current revision once answered the
    current value, and a later write changed what the same read answered.
    Now refused; REV 0 is the current revision."""
    with server.raw() as c:
        r1 = c.call("KV.PUT", "acct", "100")
        future = r1 + 2
        e = c.call("KV.GET", "acct", "REV", str(future))
        assert e == RespError("ERR revision %d is in the future (current revision %d)" % (future, r1))
        e = c.call("KV.RANGE", "", "REV", str(future))
        assert e == RespError("ERR revision %d is in the future (current revision %d)" % (future, r1))
        assert c.call("KV.GET", "acct", "REV", "0")[0] == b"100"
        assert c.call("KV.GET", "acct", "REV", str(r1))[0] == b"100"
        c.call("KV.PUT", "acct", "50")
        r3 = c.call("KV.PUT", "acct", "0")
        assert r3 == future
        assert c.call("KV.GET", "acct", "REV", str(future))[0] == b"0"
        assert c.call("KV.GET", "acct", "REV", str(r1))[0] == b"100"
