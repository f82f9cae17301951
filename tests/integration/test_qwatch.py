"""Q.WATCH: a queue's message events (pushed, delivered, acked with result,
nacked, dead-lettered, parked) as pushes, on the revision timeline KV.WATCH
uses; KEY filter; FROM over the retained history, rebuilt by replay after
a restart."""
import pytest

from ordoproc import poll
from resp import RespError
from watchlib import WatchConn


def qwatch(w, *args):
    wid = w.cmd("Q.WATCH", *args)
    assert isinstance(wid, int), wid
    return wid


def ev(w):
    e = w.next_event()
    assert e[0] == b"qwatch", e
    return e


@pytest.mark.parametrize("proto", [2, 3])
def test_lifecycle_events(server, proto):
    w = WatchConn(server.port, proto=proto)
    wid = qwatch(w, "jobs")
    with server.raw() as c:
        id1 = c.call("Q.PUSH", "jobs", "k1", "p1")
        id2 = c.call("Q.PUSH", "jobs", "k2", "p2")
        c.call("Q.PUSH", "other", "k1", "x")  # another queue: not seen
        [[mid, key, payload, attempt, tok1]] = c.call("Q.PULL", "jobs")
        assert (mid, key, attempt) == (id1, b"k1", 1)
        assert c.call("Q.ACK", "jobs", id1, tok1, "RESULT", "done-1") == 1
        [[mid2, _, _, _, tok2]] = c.call("Q.PULL", "jobs")
        assert mid2 == id2
        assert c.call("Q.NACK", "jobs", id2, tok2) == 1
        [[_, _, _, attempt2, tok3]] = c.call("Q.PULL", "jobs")
        assert attempt2 == 2
        assert c.call("Q.ACK", "jobs", id2, tok3) == 1
    got = [ev(w) for _ in range(8)]
    assert [e[1] for e in got] == [wid] * 8
    assert [(e[3], e[5], e[6]) for e in got] == [
        (b"pushed", b"k1", id1), (b"pushed", b"k2", id2), (b"delivered", b"k1", id1), (b"acked", b"k1", id1),
        (b"delivered", b"k2", id2), (b"nacked", b"k2", id2), (b"delivered", b"k2", id2), (b"acked", b"k2", id2)]
    assert all(e[4] == b"jobs" for e in got)
    revs = [e[2] for e in got]
    assert revs == sorted(revs) and len(set(revs)) == 8
    assert got[0][2] == id1 and got[0][7] == b"p1"      # a push's revision is its id
    assert got[2][2] == tok1 and got[2][7] == 1          # a delivery's revision is its token
    assert got[3][7] == b"done-1" and got[7][7] is None  # acked with / without a result
    assert got[6][7] == 2
    assert w.no_event_within(0.05)
    w.close()


def test_key_filter_and_unwatch(server):
    w = WatchConn(server.port, proto=3)
    wid = qwatch(w, "q", "KEY", "a")
    with server.raw() as c:
        c.call("Q.PUSH", "q", "b", "1")
        ida = c.call("Q.PUSH", "q", "a", "2")
        e = ev(w)
        assert e[3] == b"pushed" and e[5] == b"a" and e[6] == ida
        assert w.cmd("KV.UNWATCH", wid) == 1
        c.call("Q.PUSH", "q", "a", "3")
        assert c.call("PING") == "PONG"
    assert w.no_event_within(0.05)
    w.close()


def test_deadletter_and_park(server):
    w = WatchConn(server.port, proto=3)
    qwatch(w, "work")
    qwatch(w, "dlq")
    qwatch(w, "parkq")
    with server.raw() as c:
        assert c.call("Q.CONFIG", "work", "MAXATTEMPTS", 1, "DEADLETTER", "dlq") == "OK"
        assert c.call("Q.CONFIG", "parkq", "MAXATTEMPTS", 1, "ONPOISON", "park") == "OK"
        mid = c.call("Q.PUSH", "work", "k", "bad")
        [[_, _, _, _, tok]] = c.call("Q.PULL", "work")
        assert c.call("Q.NACK", "work", mid, tok) == 1
        pid = c.call("Q.PUSH", "parkq", "pk", "poison")
        [[_, _, _, _, ptok]] = c.call("Q.PULL", "parkq")
        assert c.call("Q.NACK", "parkq", pid, ptok) == 1
    got = [ev(w) for _ in range(9)]
    kinds = [(e[3], e[4]) for e in got]
    assert kinds == [(b"pushed", b"work"), (b"delivered", b"work"), (b"nacked", b"work"),
                     (b"deadlettered", b"work"), (b"pushed", b"dlq"),
                     (b"pushed", b"parkq"), (b"delivered", b"parkq"), (b"nacked", b"parkq"), (b"parked", b"parkq")]
    dl_id = got[3][7]
    assert dl_id > mid and got[4][6] == dl_id and got[4][7] == b"bad" and got[3][2] == got[4][2]
    assert got[8][6] == pid and got[8][5] == b"pk"
    w.close()


def test_one_timeline_with_kv_watch(server):
    """KV changes and queue events on one connection arrive in revision
    order: job history and state changes share one timeline."""
    w = WatchConn(server.port, proto=3)
    w.watch("state/", "PREFIX")
    qwatch(w, "jobs")
    with server.raw() as c:
        for i in range(5):
            c.call("SET", "state/%d" % i, "v")
            c.call("Q.PUSH", "jobs", "k%d" % i, "p")
    got = [w.next_event() for _ in range(10)]
    assert [e[0] for e in got] == [b"watch", b"qwatch"] * 5
    revs = [e[2] for e in got]
    assert revs == list(range(revs[0], revs[0] + 10))
    w.close()


def test_from_and_errors(server):
    w = WatchConn(server.port, proto=3)
    with server.raw() as c:
        c.call("Q.PUSH", "q", "k", "v")
        cur = c.call("KV.REV")[0]
        assert isinstance(w.cmd("Q.WATCH", "q", "FROM", cur), int)  # nothing to replay: live from here
        assert w.no_event_within(0.05)
        assert w.cmd("Q.WATCH", "q", "KEY").code == "ERR"
        assert w.cmd("Q.WATCH", "q", "BOGUS").code == "ERR"
        assert w.cmd("Q.WATCH", "q", "FROM", "x").code == "ERR"
        assert w.cmd("Q.WATCH", "q", "FROM", 1, "FROM", 2).code == "ERR"
        assert w.cmd("Q.WATCH").code == "ERR"
        idn = c.call("Q.PUSH", "q", "k", "v2")
        e = ev(w)
        assert e[6] == idn and e[2] == idn
    w.close()


def test_from_replays_retained_history(server):
    """FROM rev replays the events after rev, then goes on live: a watcher
    that reconnects with its last revision misses nothing and sees nothing
    twice."""
    live = WatchConn(server.port, proto=3)
    qwatch(live, "jobs")
    with server.raw() as c:
        start = c.call("KV.REV")[0]
        ids = [c.call("Q.PUSH", "jobs", "k%d" % (i % 2), "p%d" % i) for i in range(6)]
        [[mid, _, _, _, tok]] = c.call("Q.PULL", "jobs")
        assert c.call("Q.ACK", "jobs", mid, tok, "RESULT", "r") == 1
        c.call("SET", "unrelated", "x")
        c.call("Q.PUSH", "other", "k0", "x")
        seen = [ev(live) for _ in range(8)]
        mid_rev = seen[3][2]
        w = WatchConn(server.port, proto=3)
        wid = qwatch(w, "jobs", "FROM", start)
        replay = [ev(w) for _ in range(8)]
        assert [e[2:] for e in replay] == [e[2:] for e in seen] and {e[1] for e in replay} == {wid}
        w2 = WatchConn(server.port, proto=3)
        qwatch(w2, "jobs", "FROM", mid_rev)  # resume after the 4th event
        assert [e[2:] for e in (ev(w2) for _ in range(4))] == [e[2:] for e in seen[4:]]
        w3 = WatchConn(server.port, proto=3)
        qwatch(w3, "jobs", "KEY", "k1", "FROM", start)
        got = [ev(w3) for _ in range(3)]
        assert [e[6] for e in got] == ids[1::2] and all(e[5] == b"k1" for e in got)
        assert w3.no_event_within(0.05)
        # then live, after the replay
        nid = c.call("Q.PUSH", "jobs", "k1", "later")
        for x in (w, w2, w3):
            e = ev(x)
            assert e[6] == nid and e[2] > seen[-1][2]
            x.close()
    live.close()


def test_history_is_bounded(ordod_factory, tmp_path):
    srv = ordod_factory("--queue-watch-history-bytes", "2k")
    with srv.raw() as c:
        ids = [c.call("Q.PUSH", "q", "k", "p" * 50) for _ in range(100)]
        e = c.call("Q.WATCH", "q", "FROM", 0)
        assert isinstance(e, RespError) and e.code == "COMPACTED"
        floor = int(e.msg.split()[1])
        assert ids[0] <= floor < ids[-1]
    w = WatchConn(srv.port, proto=3)
    qwatch(w, "q", "FROM", floor)
    got = w.events_until(lambda e: e[6] == ids[-1], timeout=10)
    assert [e[6] for e in got] == [i for i in ids if i > floor] and len(got) >= 5
    w.close()
    # a restart rebuilds the history from the log (bounded the same way)
    assert srv.stop() == 0
    srv.start()
    w = WatchConn(srv.port, proto=3)
    qwatch(w, "q", "FROM", ids[-1] - 1)
    assert [e[6] for e in w.events_until(lambda e: e[6] == ids[-1], timeout=10)] == [ids[-1]]
    w.close()
    with srv.raw() as c:
        e = c.call("Q.WATCH", "q", "FROM", 0)
        assert e.code == "COMPACTED" and ids[0] <= int(e.msg.split()[1]) < ids[-1]


def test_watch_limit(ordod_factory):
    srv = ordod_factory("--max-watches-per-client", "2")
    w = WatchConn(srv.port, proto=3)
    qwatch(w, "a")
    qwatch(w, "b")
    assert w.cmd("Q.WATCH", "c").code == "LIMIT"
    w.close()


def test_no_history(ordod_factory):
    srv = ordod_factory("--queue-watch-history-bytes", "0")
    w = WatchConn(srv.port, proto=3)
    with srv.raw() as c:
        mid = c.call("Q.PUSH", "q", "k", "v")
        e = w.cmd("Q.WATCH", "q", "FROM", mid - 1)
        assert e.code == "COMPACTED" and int(e.msg.split()[1]) == mid
        qwatch(w, "q", "FROM", mid)
        nid = c.call("Q.PUSH", "q", "k", "v2")
        assert ev(w)[6] == nid
    w.close()


def test_from_resumes_across_a_restart(ordod_factory, tmp_path):
    """The history after the last snapshot is rebuilt by replaying the log,
    so a watcher that reconnects to a restarted server with its last
    revision gets the events it missed; before the snapshot, -COMPACTED."""
    data = str(tmp_path / "data")
    srv = ordod_factory("--dir", data)
    live = WatchConn(srv.port, proto=3)
    qwatch(live, "jobs")
    with srv.raw() as c:
        start = c.call("KV.REV")[0]
        ids = [c.call("Q.PUSH", "jobs", "k%d" % i, "p%d" % i) for i in range(3)]
        [[mid, _, _, _, tok]] = c.call("Q.PULL", "jobs")
        assert c.call("Q.ACK", "jobs", mid, tok, "RESULT", "r") == 1
    seen = [ev(live) for _ in range(5)]
    live.close()
    assert srv.stop() == 0
    srv = ordod_factory("--dir", data)
    w = WatchConn(srv.port, proto=3)
    qwatch(w, "jobs", "FROM", start)
    replay = [ev(w) for _ in range(5)]
    assert [e[2:] for e in replay] == [e[2:] for e in seen]
    assert [e[6] for e in replay[:3]] == ids
    with srv.raw() as c:
        assert c.call("SNAPSHOT") is not None
        snap_rev = c.call("KV.REV")[0]
    poll(lambda: srv.info("persistence")["snapshots_taken"] == "1", "the snapshot written")
    w.close()
    assert srv.stop() == 0
    srv = ordod_factory("--dir", data)
    w = WatchConn(srv.port, proto=3)
    e = w.cmd("Q.WATCH", "jobs", "FROM", start)
    assert isinstance(e, RespError) and e.code == "COMPACTED", e
    assert isinstance(w.cmd("Q.WATCH", "jobs", "FROM", snap_rev), int)
    w.close()


def test_from_a_future_revision_is_refused(server):
    """It was accepted, and then delivered events at or below it; KV.WATCH
    refuses it, and so does Q.WATCH now."""
    w = WatchConn(server.port, proto=3)
    with server.raw() as c:
        c.call("Q.PUSH", "q", "k", "v")
        cur = c.call("KV.REV")[0]
        e = w.cmd("Q.WATCH", "q", "FROM", cur + 10)
        assert e.code == "ERR" and "in the future" in str(e), e
    w.close()
