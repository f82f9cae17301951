"""Catch-up: a follower that was down while a few thousand writes were
made (pipelined) comes back and converges: every member reaches the same
applied index with the same DEBUG DIGEST; the same holds after leadership
moves (CLUSTER TRANSFER) and more writes. The SIGKILLed-follower variant
runs with raft snapshots every few entries (when the binary has
--cluster-snapshot-entries), so the follower is sent a snapshot rather
than the entries it missed."""
from clusterlib import ordod_has_option
from watchlib import WatchConn



WRITES = 3000
BATCH = 250


def _pipelined_sets(member, prefix, n, batch=BATCH):
    """n SETs in pipelined batches on one connection to member; all OK."""
    with member.conn(timeout=30) as c:
        for start in range(0, n, batch):
            cmds = range(start, min(n, start + batch))
            for i in cmds:
                c.send("SET", "%s%d" % (prefix, i % 500), "v%d" % i)
            replies = [c.read() for _ in cmds]
            bad = [r for r in replies if r != "OK"]
            assert not bad, "pipelined SETs on node %d: %r" % (member.id, bad[:3])


def test_follower_catches_up(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    follower = cl.others(leader)[0]
    assert follower.stop() == 0
    _pipelined_sets(leader, "a", WRITES)
    follower.restart()
    cl.wait_ready()
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests

    # leadership moves (to whichever member CLUSTER TRANSFER picks)
    assert leader.call("CLUSTER", "TRANSFER", timeout=30) == "OK"
    new = cl.leader(exclude=(leader.id,))
    _pipelined_sets(new, "b", WRITES // 3)
    digests2 = cl.wait_synced()
    assert len(set(digests2.values())) == 1, digests2
    assert digests2 != digests


def test_killed_follower_catches_up_from_snapshot(make_cluster):
    small = ["--cluster-snapshot-entries", "16", "--cluster-snapshot-trailing", "0"]
    cl = make_cluster(3, extra=small if ordod_has_option("cluster-snapshot-entries") else [])
    leader = cl.wait_ready()
    follower = cl.others(leader)[1]
    follower.kill()
    _pipelined_sets(leader, "c", WRITES, batch=10)   # many small batches: many raft entries
    follower.restart()
    cl.wait_ready()
    digests = cl.wait_synced()
    print("follower %d: %s" % (follower.id, {k: v for k, v in follower.info().items() if "snapshot" in k}))
    assert len(set(digests.values())) == 1, digests

    # The restored member leads next: what waits on its state must still be
    # woken (a core replaced by a snapshot once forgot whom to tell).
    assert follower.info().get("cluster_snapshots_restored", 0) >= 1
    assert leader.call("CLUSTER", "TRANSFER", follower.id, timeout=30) == "OK"
    assert cl.leader(exclude=(leader.id,)).id == follower.id
    w = WatchConn(follower.port, timeout=15, tls=follower.tls)
    try:
        w.watch("after-restore")
        assert follower.call("KV.PUT", "after-restore", "seen") is not None
        ev = w.next_event(timeout=10)
        assert b"seen" in repr(ev).encode(), ev
    finally:
        w.close()


def test_whole_cluster_restart_keeps_state(make_cluster):
    """Every member SIGKILLed at once, then all restarted on their --dir:
    they recover (no bootstrap again), elect a leader, and hold the same
    state as before (DEBUG DIGEST), the last writes included."""
    cl = make_cluster(3)
    leader = cl.wait_ready()
    _pipelined_sets(leader, "d", 500)
    before = set(cl.wait_synced().values())
    assert len(before) == 1
    for m in cl.members.values():
        m.kill()
    for m in cl.members.values():
        m.restart()
    leader = cl.wait_ready()
    after = cl.wait_synced()
    assert set(after.values()) == before, (before, after)
    assert leader.call("GET", "d499") == b"v499"
