"""Watch helpers: a connection that separates watch events from replies,
and the checker that compares a watch's events with what writers were told.
"""
import socket
import time

from resp import Conn, Push, RespError

EVENT_KINDS = (b"watch", b"watch-synced", b"watch-progress", b"watch-cancelled", b"leader", b"qwatch")


class WatchConn(Conn):
    """A raw connection that may hold watches. Events (RESP3 pushes, or on
    RESP2 arrays whose first element is an event kind) are queued in
    self.events; reply() returns the next ordinary reply."""

    def __init__(self, port, proto=2, timeout=10.0, password=None, rcvbuf=None, tls=None):
        super().__init__(port, timeout=timeout, rcvbuf=rcvbuf, tls=tls)
        self.proto = proto
        self.events = []
        if password is not None:
            assert self.call("AUTH", password) == "OK"
        if proto == 3:
            assert isinstance(self.call("HELLO", "3"), dict)

    def _is_event(self, v):
        if self.proto == 3:
            return isinstance(v, Push)
        return isinstance(v, list) and len(v) >= 3 and v[0] in EVENT_KINDS

    def reply(self):
        while True:
            v = self.read()
            if self._is_event(v):
                self.events.append(list(v))
            else:
                return v

    def cmd(self, *args):
        self.send(*args)
        return self.reply()

    def watch(self, *args):
        wid = self.cmd("KV.WATCH", *args)
        assert isinstance(wid, int), wid
        return wid

    def next_event(self, timeout=10.0):
        """The next event, waiting at most timeout (then AssertionError)."""
        if self.events:
            return self.events.pop(0)
        self.settimeout(timeout)
        try:
            v = self.read()
        except socket.timeout:
            raise AssertionError("no watch event within %ss" % timeout)
        assert self._is_event(v), "expected an event, got %r" % (v,)
        return list(v)

    def no_event_within(self, seconds):
        """True if nothing arrives for `seconds` (a negative check, bounded)."""
        if self.events:
            return False
        self.settimeout(seconds)
        try:
            self._fill()
        except socket.timeout:
            return True
        return False

    def events_until(self, pred, timeout=30.0):
        """Read events until pred(event) is true for one; returns them all
        (including that one)."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "condition not reached; got %d events, last %r" % (len(out), out[-3:])
            e = self.next_event(timeout=left)
            out.append(e)
            if pred(e):
                return out


def covers(key, name, prefix):
    return key.startswith(name) if prefix else key == name


class WriteLog:
    """What writers did and were told, for one run."""

    def __init__(self):
        self.kv_put = []   # (rev, key, value)
        self.kv_del = []   # (rev, key) with rev > 0
        self.set = []      # (key, value) acked OK
        self.dels = []     # key, for each DEL that answered 1

    def extend(self, other):
        self.kv_put += other.kv_put
        self.kv_del += other.kv_del
        self.set += other.set
        self.dels += other.dels


def check_watch(events, wid, name, prefix, log, prevval=False, end_value=b"END"):
    """Assert the watch's events are exactly the acked matching writes:
    strictly increasing revisions, every acked KV.PUT/KV.DEL revision once
    with its key and value, every SET value once, as many extra dels per key
    as DELs that answered 1, nothing else; under PREVVAL each prev value is
    the key's previous event's value."""
    evs = [e for e in events if e[0] == b"watch" and e[1] == wid and e[5] != end_value]
    revs = [e[2] for e in evs]
    assert all(a < b for a, b in zip(revs, revs[1:])), "revisions not strictly increasing"
    for e in evs:
        assert covers(e[4], name, prefix), "event for a key the watch does not cover: %r" % (e,)
        assert len(e) == (7 if prevval else 6)
    by_rev = {e[2]: e for e in evs}
    explained = set()
    for rev, key, val in log.kv_put:
        if covers(key, name, prefix):
            e = by_rev.get(rev)
            assert e is not None, "gap: acked KV.PUT at rev %d (%r) missing" % (rev, key)
            assert e[3] == b"put" and e[4] == key and e[5] == val, e
            explained.add(rev)
    for rev, key in log.kv_del:
        if covers(key, name, prefix):
            e = by_rev.get(rev)
            assert e is not None, "gap: acked KV.DEL at rev %d (%r) missing" % (rev, key)
            assert e[3] == b"del" and e[4] == key and e[5] is None, e
            explained.add(rev)
    by_val = {}
    for e in evs:
        if e[3] == b"put":
            by_val.setdefault(e[5], []).append(e)
    for key, val in log.set:
        if covers(key, name, prefix):
            got = by_val.get(val, [])
            assert len(got) == 1, "SET %r=%r seen %d times" % (key, val, len(got))
            assert got[0][4] == key
            explained.add(got[0][2])
    want_dels = {}
    for key in log.dels:
        if covers(key, name, prefix):
            want_dels[key] = want_dels.get(key, 0) + 1
    got_dels = {}
    for e in evs:
        if e[2] not in explained:
            assert e[3] == b"del", "unexplained event %r" % (e,)
            got_dels[e[4]] = got_dels.get(e[4], 0) + 1
    assert got_dels == want_dels
    if prevval:
        last = {}
        for e in evs:
            assert e[6] == last.get(e[4]), "prev value of %r" % (e,)
            last[e[4]] = e[5]
    return evs
