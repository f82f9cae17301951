"""Catch-up: a follower that was down while a few thousand writes were
made (pipelined) comes back and converges: every member reaches the same
applied index with the same DEBUG DIGEST; the same holds after leadership
moves (CLUSTER TRANSFER) and more writes. The SIGKILLed-follower variant
runs with raft snapshots every few entries (when the binary has
--cluster-snapshot-entries), so the follower is sent a snapshot rather
than the entries it missed."""
from clusterlib import ordod_has_option
from resp import RespError
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


def _kv_info(member):
    """INFO kv of member as {name: int} (any member answers INFO)."""
    text = member.call("INFO", "kv")
    assert isinstance(text, bytes), text
    pairs = (l.split(":", 1) for l in text.decode().splitlines() if ":" in l)
    return {k: int(v) for k, v in pairs if v.lstrip("-").isdigit()}


def test_members_keep_their_own_history_and_agree(make_cluster):
    """Each member compacts its history on its own: here each keeps
    another number of key changes (history-revs 100, 200, 300: "{node}00"),
    and a follower SIGKILLed while the others write comes back through the
    leader's raft snapshot, which brings the leader's window. The members
    apply the same entries and hold different windows; DEBUG DIGEST leaves
    the window out, so all agree. DEBUG DIGEST HISTORY from a revision
    every member still holds agrees too, and one below the shortest window
    is COMPACTED on that member."""
    flags = ["--history-revs", "{node}00"]
    if ordod_has_option("cluster-snapshot-entries"):
        flags += ["--cluster-snapshot-entries", "16", "--cluster-snapshot-trailing", "0"]
    cl = make_cluster(3, extra=flags)
    leader = cl.wait_ready()
    follower = cl.others(leader)[1]
    follower.kill()
    _pipelined_sets(leader, "h", WRITES, batch=10)
    follower.restart()
    cl.wait_ready()
    digests = cl.wait_synced()
    kv = {m.id: _kv_info(m) for m in cl.live()}
    oldest = {i: k["oldest_revision"] for i, k in kv.items()}
    assert len({k["revision"] for k in kv.values()}) == 1, kv
    assert len(set(oldest.values())) > 1, "every member kept the same history: %r" % oldest
    assert len(set(digests.values())) == 1, "DEBUG DIGEST differs: %r (oldest revisions kept: %r)" % (digests, oldest)
    held = max(oldest.values()) - 1
    history = {m.id: m.call("DEBUG", "DIGEST", "HISTORY", held) for m in cl.live()}
    assert len(set(history.values())) == 1 and set(history.values()) != set(digests.values()), history
    shortest = max(cl.live(), key=lambda m: oldest[m.id])
    e = shortest.call("DEBUG", "DIGEST", "HISTORY", held - 1)
    assert isinstance(e, RespError) and e.code == "COMPACTED", e


def test_compaction_between_members_windows_applies_everywhere(make_cluster):
    """KV.COMPACT to a revision inside the leader's history but already
    behind a follower's (each keeps its own: history-revs 100, 200, 300)
    took a revision on the leader and none on that follower, which then
    refused every later entry (READONLY) and the cluster lost its leader.
    A committed compaction takes its revision on every member."""
    cl = make_cluster(3, extra=["--history-revs", "{node}00"])
    leader = cl.wait_ready()
    _pipelined_sets(leader, "k", WRITES)
    cl.wait_synced()
    oldest = {m.id: _kv_info(m)["oldest_revision"] for m in cl.live()}
    longest = min(cl.live(), key=lambda m: oldest[m.id])
    if leader.id != longest.id:
        assert leader.call("CLUSTER", "TRANSFER", longest.id, timeout=30) == "OK"
        leader = cl.leader(exclude=(leader.id,))
    assert leader.id == longest.id
    point = max(oldest.values()) - 10
    assert oldest[leader.id] < point
    assert leader.call("KV.COMPACT", point) == "OK"
    assert leader.call("SET", "after", "1") == "OK"
    digests = cl.wait_synced()
    kv = {m.id: _kv_info(m) for m in cl.live()}
    assert len({k["revision"] for k in kv.values()}) == 1, kv
    assert len(set(digests.values())) == 1, digests
    assert kv[leader.id]["oldest_revision"] >= point, kv
