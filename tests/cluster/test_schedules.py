"""Schedules across leader kills: each tick is a record the leader makes
(docs/protocol.md, "Schedules"), so however often the leader is SIGKILLed
and restarted a tick pushes once: every message in the schedule's queue is
one tick, the queue holds exactly what the schedule counts as pushed, no
id twice, and every member reaches the same state (DEBUG DIGEST). The
same on one server killed and restarted, in the single_ordod case.
"""
import time

from clusterlib import ClusterClient, poll
from resp import RespError
from workloads import kill_rounds

KILLS = 5
EVERY_MS = 100


def fields(r):
    return {r[i].decode(): r[i + 1] for i in range(0, len(r), 2)}


def named(listed, name):
    """The fields of schedule name in a Q.SCHEDULE LIST reply, or None."""
    for s in listed:
        f = fields(s)
        if f["name"] == name.encode():
            return f
    return None


def schedule(c, name):
    return named(c.call("Q.SCHEDULE", "LIST"), name)


def list_and_delete(raw, name):
    """The schedule's state and its deletion in one transaction, so no tick
    lands between the count read and the deletion (one every 100 ms would,
    now and then); None if the member leads no more (EXEC refused)."""
    assert raw.call("MULTI") == "OK"
    for args in (("Q.SCHEDULE", "LIST"), ("Q.SCHEDULE", "DEL", name)):
        q = raw.call(*args)
        assert q == "QUEUED" or (isinstance(q, RespError) and q.code == "NOTLEADER"), q
    r = raw.call("EXEC")
    if isinstance(r, RespError):
        assert r.code in ("NOTLEADER", "EXECABORT"), r
        return None
    listed, deleted = r
    assert deleted == 1, r
    f = named(listed, name)
    assert f is not None, "no schedule %s in %r" % (name, listed)
    return f


def check_once(c, s, queue, elapsed_s):
    """s, the schedule's state read as it was deleted: the queue holds one
    message per tick that pushed, each id once, and no more ticks than the
    time allowed (one per interval, plus one for the ticks missed in each
    outage)."""
    msgs = []
    while True:
        got = c.call("Q.PULL", queue, "COUNT", 1000, "NOACK")
        if not got:
            break
        msgs += got
    ids = [m[0] for m in msgs]
    assert len(ids) == len(set(ids)) == s["pushed"], (len(ids), len(set(ids)), s)
    assert s["pushed"] <= elapsed_s * 1000 / EVERY_MS + KILLS + 1, (s, elapsed_s)
    return s


class Follower:
    """A ClusterClient (it follows the leader) answering like a Conn."""

    def __init__(self, members):
        self.c = ClusterClient(members)

    def call(self, *args):
        status, reply = self.c.call(*args)
        assert status == "ok", (args, status, reply)
        return reply

    def close(self):
        self.c.close()


def test_schedule_ticks_once_across_leader_kills(make_cluster):
    cl = make_cluster(3)
    c = Follower(cl.live())
    t0 = time.monotonic()
    assert c.call("Q.SCHEDULE", "ADD", "beat", "sq", "k", "tick", "EVERY", EVERY_MS) == "OK"

    def pushed():
        s = schedule(c, "beat")
        return s["pushed"] if s else 0

    try:
        killed = kill_rounds(cl, KILLS, pushed, need=3, what="ticks")
        s = None
        while s is None:
            with cl.leader().conn() as raw:
                s = list_and_delete(raw, "beat")
        check_once(c, s, "sq", time.monotonic() - t0)
    finally:
        c.close()
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, "DEBUG DIGEST differs: %r" % digests
    print("killed=%s pushed=%d skipped=%d" % (killed, s["pushed"], s["skipped"]))


def test_schedule_ticks_once_across_kills_single(single_ordod):
    m = single_ordod
    t0 = time.monotonic()
    assert m.call("Q.SCHEDULE", "ADD", "beat", "sq", "k", "tick", "EVERY", EVERY_MS) == "OK"
    for _ in range(KILLS):
        with m.conn() as c:
            base = schedule(c, "beat")["pushed"]
            poll(lambda: schedule(c, "beat")["pushed"] >= base + 3, "three more ticks")
        m.kill()
        m.restart()
    with m.conn() as c:
        check_once(c, list_and_delete(c, "beat"), "sq", time.monotonic() - t0)
