"""Watches: the concurrent checker (every acked matching revision exactly
once, in order, with its value), resumption, snapshots, PREVVAL, progress,
slow readers, and RESP2 watch mode."""
import random
import socket
import threading
import time

import pytest

from ordoproc import poll
from resp import Conn, Push, RespError, encode
from watchlib import WatchConn, WriteLog, check_watch

KEYS = [b"w/k%d" % i for i in range(8)] + [b"x/k%d" % i for i in range(4)]


def writer(port, tid, n_ops, log, errors):
    rnd = random.Random(tid)
    try:
        with Conn(port, timeout=30) as c:
            for i in range(n_ops):
                key = rnd.choice(KEYS)
                val = b"t%d-%d-" % (tid, i) + b"v" * rnd.randrange(0, 50)
                op = rnd.randrange(10)
                if op < 4:
                    rev = c.call("KV.PUT", key, val)
                    assert isinstance(rev, int), rev
                    log.kv_put.append((rev, key, val))
                elif op < 7:
                    assert c.call("SET", key, val) == "OK"
                    log.set.append((key, val))
                elif op < 8:
                    rev = c.call("KV.DEL", key)
                    assert isinstance(rev, int), rev
                    if rev > 0:
                        log.kv_del.append((rev, key))
                elif op < 9:
                    n = c.call("DEL", key)
                    if n == 1:
                        log.dels.append(key)
                else:
                    # a conditional put that may conflict: conflicts make no event
                    cur = c.call("KV.GET", key)
                    rev = c.call("KV.PUT", key, val, "IFREV", cur[2] if cur else 0)
                    if isinstance(rev, int):
                        log.kv_put.append((rev, key, val))
                    else:
                        assert rev.code == "CONFLICT"
    except Exception as e:  # reported by the main thread
        errors.append(e)


def run_writers(port, n_threads=4, n_ops=300):
    logs = [WriteLog() for _ in range(n_threads)]
    errors = []
    ts = [threading.Thread(target=writer, args=(port, t, n_ops, logs[t], errors)) for t in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not errors, errors
    log = WriteLog()
    for l in logs:
        log.extend(l)
    return log


def collect(conn, done_pred, out, errors):
    try:
        out.extend(conn.events_until(done_pred, timeout=60))
    except Exception as e:
        errors.append(e)


def test_watch_checker_concurrent(server):
    """Watchers of every kind over concurrent SET/KV.PUT/DEL/KV.DEL writers."""
    w1 = WatchConn(server.port, proto=2)       # RESP2, prefix, PREVVAL
    id1 = w1.watch("w/", "PREFIX", "PREVVAL")
    w2 = WatchConn(server.port, proto=3)       # RESP3, prefix
    id2 = w2.watch("w/", "PREFIX")
    w3 = WatchConn(server.port, proto=2)       # RESP2, one key
    id3 = w3.watch("w/k3")
    w4 = WatchConn(server.port, proto=3)       # RESP3, one key and everything, on one connection
    id4a = w4.watch("w/k5", "PREVVAL")
    id4b = w4.watch("", "PREFIX")
    assert len({id1, id2, id3, id4a, id4b}) == 5

    def end_of(wid, key):
        return lambda e: e[0] == b"watch" and e[1] == wid and e[4] == key and e[5] == b"END"

    def end_all(*pairs):
        seen = set()

        def pred(e):
            for wid, key in pairs:
                if end_of(wid, key)(e):
                    seen.add(wid)
            return len(seen) == len(pairs)
        return pred

    outs = [[] for _ in range(4)]
    errors = []
    readers = [
        threading.Thread(target=collect, args=(w1, end_of(id1, b"w/k5"), outs[0], errors)),
        threading.Thread(target=collect, args=(w2, end_of(id2, b"w/k5"), outs[1], errors)),
        threading.Thread(target=collect, args=(w3, end_of(id3, b"w/k3"), outs[2], errors)),
        threading.Thread(target=collect, args=(w4, end_all((id4a, b"w/k5"), (id4b, b"w/k5")), outs[3], errors)),
    ]
    for t in readers:
        t.start()
    log = run_writers(server.port)
    with server.raw() as c:
        c.call("KV.PUT", "w/k3", "END")
        c.call("KV.PUT", "w/k5", "END")
    for t in readers:
        t.join(timeout=90)
    assert not errors, errors
    total = len(log.kv_put) + len(log.kv_del) + len(log.set) + len(log.dels)
    assert total > 1000
    evs = check_watch(outs[0], id1, b"w/", True, log, prevval=True)
    assert len(evs) > 500
    check_watch(outs[1], id2, b"w/", True, log)
    check_watch(outs[2], id3, b"w/k3", False, log)
    check_watch(outs[3], id4a, b"w/k5", False, log, prevval=True)
    evs = check_watch(outs[3], id4b, b"", True, log)
    assert len(evs) == total
    for w in (w1, w2, w3, w4):
        w.close()


def test_resume_after_disconnect(server):
    """Disconnect mid-stream while writers run; FROM the last revision seen
    gives the rest with no gap and no duplicate."""
    w = WatchConn(server.port)
    wid = w.watch("w/", "PREFIX")
    first = []
    stop = threading.Event()
    log_holder = []

    def bg():
        log_holder.append(run_writers(server.port, n_threads=3, n_ops=200))
        stop.set()

    t = threading.Thread(target=bg)
    t.start()
    while len(first) < 50:
        e = w.next_event()
        first.append(e)
    w.close()
    last = first[-1][2]
    t.join(timeout=120)
    assert stop.is_set()
    with server.raw() as c:
        c.call("KV.PUT", "w/k5", "END")
    w2 = WatchConn(server.port, proto=3)
    wid2 = w2.watch("w/", "PREFIX", "FROM", last)
    rest = w2.events_until(lambda e: e[0] == b"watch" and e[5] == b"END")
    w2.close()
    assert rest[0][2] > last
    combined = first + [[e[0], wid] + e[2:] for e in rest]
    check_watch(combined, wid, b"w/", True, log_holder[0])


def test_from_history_and_compacted(server):
    with server.raw() as c:
        revs = [c.call("KV.PUT", "k", "v%d" % i) for i in range(10)]
        c.call("KV.PUT", "other", "x")
        w = WatchConn(server.port)
        wid = w.watch("k", "FROM", revs[4])
        evs = [w.next_event() for _ in range(5)]
        assert [e[2] for e in evs] == revs[5:]
        assert [e[5] for e in evs] == [b"v%d" % i for i in range(5, 10)]
        # FROM 0 is all retained history
        w0 = WatchConn(server.port)
        w0.watch("k", "FROM", 0)
        assert [w0.next_event()[2] for _ in range(10)] == revs
        # then live events follow the replayed history
        r = c.call("KV.PUT", "k", "live")
        assert w.next_event()[2:6] == [r, b"put", b"k", b"live"]
        assert w0.next_event()[2] == r
        assert c.call("KV.COMPACT", revs[6]) == "OK"
        w2 = WatchConn(server.port)
        assert w2.cmd("KV.WATCH", "k", "FROM", revs[3]) == RespError("COMPACTED %d" % revs[6])
        # FROM oldest-1 is still complete (changes after it are retained)
        wid = w2.watch("k", "FROM", revs[6] - 1)
        assert w2.next_event()[2] == revs[6]
        # RESYNC: a snapshot instead of an error
        w3 = WatchConn(server.port)
        wid3 = w3.watch("k", "FROM", revs[0], "RESYNC")
        e = w3.next_event()
        assert e == [b"watch", wid3, r, b"put", b"k", b"live"]
        cur = c.call("KV.REV")[0]
        assert w3.next_event() == [b"watch-synced", wid3, cur]
        for bad in (["FROM", "1", "SNAPSHOT"], ["RESYNC"], ["SNAPSHOT", "RESYNC"], ["FROM"], ["FROM", "x"],
                    ["BOGUS"]):
            assert w3.cmd("KV.WATCH", "k", *bad).code == "ERR", bad
        for x in (w, w0, w2, w3):
            x.close()


def test_snapshot(server):
    with server.raw() as c:
        mods = {}
        for i in range(20):
            k = b"s/%02d" % i
            mods[k] = c.call("KV.PUT", k, b"v%d" % i)
        c.call("KV.DEL", "s/05")
        del mods[b"s/05"]
        c.call("KV.PUT", "t/x", "outside")
        snap_rev = c.call("KV.REV")[0]
        w = WatchConn(server.port, proto=3)
        wid = w.watch("s/", "PREFIX", "SNAPSHOT", "PREVVAL")
        c.call("KV.PUT", "s/99", "after")   # a change after the snapshot
        evs = w.events_until(lambda e: e[0] == b"watch-synced")
        assert evs[-1] == [b"watch-synced", wid, snap_rev]
        snap = evs[:-1]
        assert [e[4] for e in snap] == sorted(mods)
        for e in snap:
            assert e[3] == b"put" and e[2] == mods[e[4]] and e[5] == b"v%d" % int(e[4][2:])
        e = w.next_event()
        assert e[2] > snap_rev and e[3:] == [b"put", b"s/99", b"after", None]
        # snapshot of one absent key: just the marker
        w2 = WatchConn(server.port)
        wid2 = w2.watch("nokey", "SNAPSHOT")
        assert w2.next_event() == [b"watch-synced", wid2, c.call("KV.REV")[0]]
        w.close()
        w2.close()


def test_snapshot_under_concurrent_writes(server):
    """A snapshot is the keys as of one revision: replaying it plus the
    following events reproduces the final state."""
    with server.raw() as c:
        for k in KEYS:
            c.call("SET", k, "init")
    done = []
    t = threading.Thread(target=lambda: done.append(run_writers(server.port, n_threads=2, n_ops=200)))
    t.start()
    w = WatchConn(server.port, proto=3)
    wid = w.watch("", "PREFIX", "SNAPSHOT")
    t.join(timeout=120)
    with server.raw() as c:
        end = c.call("KV.PUT", "zz-end", "END")
        final = {e[0]: e[1] for e in c.call("KV.RANGE", "")}
    evs = w.events_until(lambda e: e[0] == b"watch" and e[5] == b"END")
    state = {}
    synced = False
    last = 0
    for e in evs:
        if e[0] == b"watch-synced":
            synced = True
            assert e[2] >= last
            last = e[2]
            continue
        if synced:
            assert e[2] > last
            last = e[2]
        if e[3] == b"put":
            state[e[4]] = e[5]
        else:
            state.pop(e[4], None)
    assert synced
    assert state == final
    w.close()


def test_prevval(server):
    w = WatchConn(server.port)
    wid = w.watch("k", "PREVVAL")
    with server.raw() as c:
        c.call("SET", "k", "a")
        c.call("KV.PUT", "k", "b")
        c.call("DEL", "k")
        c.call("SET", "k", "c")
        c.call("INCR", "n")  # not watched
        c.call("SET", "k", "5")
        c.call("INCR", "k")
    evs = [w.next_event() for _ in range(6)]
    assert [e[3:] for e in evs] == [
        [b"put", b"k", b"a", None], [b"put", b"k", b"b", b"a"], [b"del", b"k", None, b"b"],
        [b"put", b"k", b"c", None], [b"put", b"k", b"5", b"c"], [b"put", b"k", b"6", b"5"]]
    w.close()


def test_one_change_many_watchers_each_own_frame(server):
    """A change is encoded once per (protocol, PREVVAL) and copied to every
    watcher: each watch still gets its own id, its protocol's frame and nil,
    and the previous value only if it asked."""
    conns = []
    for proto in (2, 3):
        for prevval in (False, True):
            w = WatchConn(server.port, proto=proto)
            extra = ("PREVVAL",) if prevval else ()
            ids = [w.watch("f/", "PREFIX", *extra), w.watch("f/k", *extra)]  # two watches per connection
            conns.append((w, prevval, ids))
    with server.raw() as c:
        r1 = c.call("KV.PUT", "f/k", "a")
        r2 = c.call("KV.PUT", "f/k", "bb")
        r3 = c.call("KV.DEL", "f/k")
    seen_ids = set()
    for w, prevval, ids in conns:
        evs = [w.next_event() for _ in range(6)]
        for wid in ids:
            mine = [e for e in evs if e[1] == wid]
            want = [[b"watch", wid, r1, b"put", b"f/k", b"a"], [b"watch", wid, r2, b"put", b"f/k", b"bb"],
                    [b"watch", wid, r3, b"del", b"f/k", None]]
            if prevval:
                for ev, prev in zip(want, (None, b"a", b"bb")):
                    ev.append(prev)
            assert mine == want
            seen_ids.add(wid)
        assert w.no_event_within(0.2)
        w.close()
    assert len(seen_ids) == 8


def test_shared_event_bytes_per_protocol(server):
    """The bytes of an event shared by watchers of both protocols: each gets
    its own frame type, id and nil encoding (RESP3 "_", RESP2 "$-1")."""
    w2 = WatchConn(server.port, proto=2)
    id2 = w2.watch("g/", "PREFIX", "PREVVAL")
    w3 = WatchConn(server.port, proto=3)
    id3 = w3.watch("g/", "PREFIX", "PREVVAL")
    with server.raw() as c:
        rp = c.call("KV.PUT", "g/k", "v")
        rd = c.call("KV.DEL", "g/k")
    for w, wid, frame, nil in ((w2, id2, b"*", b"$-1"), (w3, id3, b">", b"_")):
        head = frame + b"7\r\n$5\r\nwatch\r\n:%d\r\n" % wid
        want = (head + b":%d\r\n$3\r\nput\r\n$3\r\ng/k\r\n$1\r\nv\r\n%s\r\n" % (rp, nil) +
                head + b":%d\r\n$3\r\ndel\r\n$3\r\ng/k\r\n%s\r\n$1\r\nv\r\n" % (rd, nil))
        assert not w.events
        assert w.recv_exact(len(want)) == want
        w.close()


def test_expiry_fires_del_event(server):
    w = WatchConn(server.port)
    wid = w.watch("e")
    with server.raw() as c:
        c.call("SET", "e", "v", "PX", "50")
    e1 = w.next_event()
    e2 = w.next_event(timeout=20)
    assert e1[3:6] == [b"put", b"e", b"v"] and e2[3:6] == [b"del", b"e", None] and e2[2] == e1[2] + 1
    w.close()


def test_watch_progress(ordod_factory):
    srv = ordod_factory("--watch-progress-ms", "200")
    w = WatchConn(srv.port, proto=3)
    wid = w.watch("idle")
    with srv.raw() as c:
        r = 0
        for i in range(5):
            r = c.call("KV.PUT", "busy", str(i))
    t0 = time.monotonic()
    e = w.events_until(lambda e: e[0] == b"watch-progress" and e[2] >= r, timeout=10)
    assert all(x[0] == b"watch-progress" for x in e)
    assert e[-1][1] == wid
    # resuming FROM the progress revision gives exactly the later changes
    with srv.raw() as c:
        r2 = c.call("KV.PUT", "idle", "now")
    w2 = WatchConn(srv.port)
    w2.watch("idle", "FROM", e[-1][2])
    assert w2.next_event()[2] == r2
    w.close()
    w2.close()


def test_resp2_watch_mode(server):
    w = WatchConn(server.port, proto=2)
    assert w.cmd("GET", "k") is None
    wid = w.watch("k")
    e = w.cmd("GET", "k")
    assert e.code == "ERR" and "KV.WATCH" in e.msg
    assert w.cmd("SET", "k", "v").code == "ERR"
    assert w.cmd("HELLO", "3").code == "ERR"
    assert w.cmd("PING") == [b"pong", b""]
    assert w.cmd("PING", "x") == [b"pong", b"x"]
    wid2 = w.watch("k2", "PREFIX")
    with server.raw() as c:
        rev = c.call("SET", "k", "v") and c.call("KV.REV")[0]
    assert w.next_event() == [b"watch", wid, rev, b"put", b"k", b"v"]
    assert w.cmd("KV.UNWATCH", wid) == 1
    assert w.cmd("KV.UNWATCH", wid) == 0
    assert w.cmd("KV.UNWATCH", "x").code == "ERR"
    assert w.cmd("GET", "k").code == "ERR"  # still has wid2
    assert w.cmd("KV.UNWATCH") == 1
    assert w.cmd("GET", "k") == b"v"  # out of watch mode
    with server.raw() as c:
        c.call("SET", "k", "again")
    assert w.no_event_within(0.3)
    assert w.cmd("QUIT") == "OK"
    assert w.is_closed()


def test_resp3_mixes_commands_and_events(server):
    w = WatchConn(server.port, proto=3)
    wid = w.watch("k")
    with server.raw() as c:
        r1 = c.call("KV.PUT", "k", "1")
    assert w.cmd("GET", "k") == b"1"  # the event arrived before this reply: queued
    assert w.next_event() == [b"watch", wid, r1, b"put", b"k", b"1"]
    r2 = w.cmd("KV.PUT", "k", "2")  # own writes are watched too
    assert w.next_event() == [b"watch", wid, r2, b"put", b"k", b"2"]
    assert w.cmd("PING") == "PONG"
    w.close()


def test_max_watches_per_client(ordod_factory):
    srv = ordod_factory("--max-watches-per-client", "3")
    w = WatchConn(srv.port, proto=3)
    for i in range(3):
        w.watch("k%d" % i)
    e = w.cmd("KV.WATCH", "k9")
    assert e.code == "LIMIT" and "max-watches-per-client" in e.msg
    assert w.cmd("KV.UNWATCH", "1") in (0, 1)
    w.cmd("KV.UNWATCH")
    w.watch("again")
    assert int(srv.info("clients")["watches"]) == 1
    w.close()


def test_watches_freed_on_disconnect(server):
    ws = [WatchConn(server.port) for _ in range(5)]
    for w in ws:
        w.watch("k", "PREFIX")
    assert int(server.info("clients")["watches"]) == 5
    for w in ws:
        w.close()
    poll(lambda: int(server.info("clients")["watches"]) == 0, "no watches left")
    with server.raw() as c:
        c.call("SET", "k", "v")  # no watch left to deliver to


def slow_reader_setup(srv):
    w = WatchConn(srv.port, proto=2, timeout=30)
    w.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 128 * 1024)
    wid = w.watch("big/", "PREFIX")
    return w, wid


def write_big(srv, n, size):
    revs = []
    with srv.raw(timeout=30) as c:
        for i in range(n):
            revs.append(c.call("KV.PUT", b"big/%d" % (i % 13), b"%d:" % i + b"x" * size))
    return revs


def test_slow_reader_gets_everything(server):
    """A reader that does not read while ~8 MB of events are written gets
    every event in order once it reads (the server catches it up from
    history rather than buffering without bound)."""
    w, wid = slow_reader_setup(server)
    revs = write_big(server, 800, 10000)
    assert server.alive()
    # the stalled watcher's unsent output stays bounded (catch-up, not a queue)
    with server.raw() as c:
        lines = c.call("CLIENT", "LIST").decode().splitlines()
    omem = [int(f.split("=")[1]) for l in lines if "watches=1" in l for f in l.split() if f.startswith("omem=")]
    assert len(omem) == 1 and omem[0] < 2 * 1024 * 1024, lines
    evs = [w.next_event() for _ in range(len(revs))]
    assert [e[2] for e in evs] == revs
    assert all(e[5].startswith(b"%d:" % i) for i, e in enumerate(evs))
    assert int(server.info("stats")["watch_cancelled"]) == 0
    w.close()


def test_slow_reader_cancelled_then_resumes(ordod_factory):
    """With little history kept, a reader that falls behind is cancelled
    with its last delivered revision; everything up to it arrived without
    gaps, and resuming from it (RESYNC, as the history is gone) gives the
    current state."""
    srv = ordod_factory("--history-revs", "100")
    w, wid = slow_reader_setup(srv)
    revs = write_big(srv, 800, 10000)
    evs = w.events_until(lambda e: e[0] == b"watch-cancelled", timeout=60)
    cancel = evs[-1]
    assert cancel[1] == wid and cancel[3] == b"compacted"
    last = cancel[2]
    got = [e[2] for e in evs[:-1]]
    assert got == [r for r in revs if r <= last]
    assert last < revs[-1]
    # the watch is gone: later writes do not reach it
    assert w.cmd("KV.UNWATCH", wid) == 0
    w2 = WatchConn(srv.port)
    assert w2.cmd("KV.WATCH", "big/", "PREFIX", "FROM", last).code == "COMPACTED"
    wid2 = w2.watch("big/", "PREFIX", "FROM", last, "RESYNC")
    snap = w2.events_until(lambda e: e[0] == b"watch-synced")
    with srv.raw() as c:
        assert {e[4]: e[5] for e in snap[:-1]} == {e[0]: e[1] for e in c.call("KV.RANGE", "big/")}
    w.close()
    w2.close()


def test_from_future_revision_refused(server):
    """FROM beyond the current revision would deliver revisions at or below
    FROM; it is refused, and FROM the current revision is fine."""
    with server.raw() as c:
        for i in range(3):
            c.call("KV.PUT", "k", str(i))
        w = WatchConn(server.port)
        e = w.cmd("KV.WATCH", "k", "FROM", "10")
        assert e.code == "ERR" and "future" in e.msg
        assert w.cmd("KV.WATCH", "k", "FROM", "10", "RESYNC").code == "ERR"
        wid = w.watch("k", "FROM", "3")
        r = c.call("KV.PUT", "k", "x")
        assert w.next_event()[1:3] == [wid, r] and r == 4
        w.close()


def test_snapshot_larger_than_output_limit(ordod_factory):
    """A SNAPSHOT bigger than the output hard limit is sent a page at a time
    as the client reads, all as of one revision, instead of being built in
    one go and closing the client; changes made while it streams follow
    watch-synced without gaps."""
    srv = ordod_factory("--output-hard-bytes", "2m")
    value = b"v" * 4000
    n = 3000  # 12 MB of snapshot, six times the hard limit
    with srv.raw() as c:
        c.send_raw(b"".join(encode("KV.PUT", b"big/%05d" % i, value) for i in range(n)))
        revs = [c.read() for _ in range(n)]
        assert all(isinstance(r, int) for r in revs)
        snap_rev = c.call("KV.REV")[0]
        w = WatchConn(srv.port, proto=3)
        wid = w.watch("big/", "PREFIX", "SNAPSHOT")
        first = w.next_event()
        assert first[:5] == [b"watch", wid, revs[0], b"put", b"big/00000"]
        # While the rest streams: change a key already sent, one not yet
        # sent, delete one not yet sent, add one at the end.
        r1 = c.call("KV.PUT", "big/00000", "new0")
        r2 = c.call("KV.PUT", "big/02999", "new2999")
        r3 = c.call("KV.DEL", "big/01500")
        r4 = c.call("KV.PUT", "big/99999", "tail")
    evs = [first] + w.events_until(lambda e: e[0] == b"watch" and e[4] == b"big/99999", timeout=60)
    synced = [i for i, e in enumerate(evs) if e[0] == b"watch-synced"]
    assert len(synced) == 1 and evs[synced[0]] == [b"watch-synced", wid, snap_rev]
    snap, after = evs[:synced[0]], evs[synced[0] + 1:]
    assert [e[4] for e in snap] == [b"big/%05d" % i for i in range(n)]
    assert all(e[3] == b"put" and e[5] == value and e[2] == revs[i] for i, e in enumerate(snap))
    assert [(e[2], e[3], e[4]) for e in after] == [
        (r1, b"put", b"big/00000"), (r2, b"put", b"big/02999"), (r3, b"del", b"big/01500"),
        (r4, b"put", b"big/99999")]
    assert srv.alive()
    assert int(srv.info("stats")["clients_closed_output_limit"]) == 0
    w.close()


def test_snapshot_page_ending_at_the_empty_key(server):
    """A snapshot page that ends right after the empty key (its value fills
    the output) resumes after it, not from the start again."""
    big = b"x" * (1200 * 1024)
    with server.raw() as c:
        r0 = c.call("KV.PUT", "", big)
        r1 = c.call("KV.PUT", "a", "1")
    w = WatchConn(server.port, proto=3)
    wid = w.watch("", "PREFIX", "SNAPSHOT")
    evs = w.events_until(lambda e: e[0] == b"watch-synced", timeout=30)
    assert [e[:5] for e in evs[:-1]] == [[b"watch", wid, r0, b"put", b""], [b"watch", wid, r1, b"put", b"a"]]
    assert evs[0][5] == big and evs[-1] == [b"watch-synced", wid, r1]
    w.close()


def test_many_idle_watchers_of_a_large_value_share_its_bytes(ordod_factory):
    """One 8 MiB SET with 50 watchers that do not read cost 428 MB: a copy of
    the event per watcher. A large event is now one shared blob that every
    watcher's output references, so their buffered output stays near one
    copy; each watcher still gets the whole event when it reads."""
    srv = ordod_factory("--fsync", "no")
    value = bytes(random.getrandbits(8) for _ in range(4096)) * 1024  # 4 MiB
    base_mem = int(srv.info("memory")["mem_clients"])
    base_events = int(srv.info("stats")["watch_events"])
    watchers = []
    for _ in range(50):
        w = WatchConn(srv.port, proto=3, timeout=30.0, rcvbuf=16 * 1024)
        w.watch("big")
        watchers.append(w)
    r = srv.client()
    assert r.set("big", value) is True
    poll(lambda: int(srv.info("stats")["watch_events"]) >= base_events + 50, "the events encoded", 30)
    held = int(srv.info("memory")["mem_clients"]) - base_mem - 50 * 2048  # connection structures
    assert held < 3 * len(value), held  # one copy shared, not fifty
    for w in watchers:
        e = w.next_event(timeout=30)
        assert e[0] == b"watch" and e[3] == b"put" and e[4] == b"big" and e[5] == value
        w.close()
    # r, and INFO's own connection
    poll(lambda: int(srv.info("clients")["connected_clients"]) <= 2, "the watchers gone", 30)
    assert int(srv.info("memory")["mem_clients"]) < base_mem + len(value) // 4
