"""Membership: CLUSTER ADD of a fourth member (started with --cluster
naming the members and itself: it joins) that then holds the same state,
CLUSTER REMOVE of it; CLUSTER TRANSFER to a named id makes that member the
leader, also under writes (the old leader hands over without restarting,
no acknowledged write is lost); a transfer that cannot happen (its target
is down) fails and the leader serves again."""
import checkers
from clusterlib import ClusterClient, poll
from workloads import Recorder, Workers, kv_writer, read_final


def _members(m):
    r = m.call("CLUSTER", "MEMBERS")
    assert isinstance(r, list), "node %d: CLUSTER MEMBERS -> %r" % (m.id, r)
    return {e[0]: e for e in r}


def test_add_then_remove_member(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    assert leader.call("SET", "before-add", "1") == "OK"
    m4 = cl.new_member(4)
    assert m4.start_on(m4.port)
    cc = ClusterClient(list(cl.members.values()))
    st, r = cc.call("CLUSTER", "ADD", 4, m4.addr, deadline_s=30)
    assert (st, r) == ("ok", "OK"), r
    cl.members[4] = m4
    leader = cl.leader()
    poll(lambda: _members(leader).get(4, [0, 0, 0, 0])[3] == 1, "node 4 a voter in the leader's CLUSTER MEMBERS")
    cl.wait_ready()
    poll(lambda: all((m.info() or {}).get("cluster_members") == 4 for m in cl.members.values()),
         "cluster_members:4 everywhere")
    st, r = cc.call("SET", "after-add", "2")
    assert (st, r) == ("ok", "OK")
    digests = cl.wait_synced()
    assert set(digests) == {1, 2, 3, 4} and len(set(digests.values())) == 1, digests

    st, r = cc.call("CLUSTER", "REMOVE", 4, deadline_s=30)
    assert (st, r) == ("ok", "OK"), r
    del cl.members[4]
    leader = cl.leader()
    poll(lambda: 4 not in _members(leader), "node 4 gone from the leader's CLUSTER MEMBERS")
    poll(lambda: all((m.info() or {}).get("cluster_members") == 3 for m in cl.members.values()),
         "cluster_members:3 everywhere")
    assert m4.stop() in (0, None)
    st, r = cc.call("SET", "after-remove", "3")
    cc.close()
    assert (st, r) == ("ok", "OK")
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests


def _transfer(cl, leader):
    """CLUSTER TRANSFER from leader to another member: +OK, and that member
    is the leader a majority agrees on, at a higher term. Returns it."""
    target = cl.others(leader)[0]
    term = cl.term(leader)
    r = leader.call("CLUSTER", "TRANSFER", target.id, timeout=30)
    assert r == "OK", "CLUSTER TRANSFER %d -> %r" % (target.id, r)
    new = cl.leader(min_term=term + 1)
    assert new.id == target.id, "transfer to %d, leader is %d" % (target.id, new.id)
    return new


def test_transfer_to_named_member(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    for _ in range(2):
        new = _transfer(cl, leader)
        assert cl.wait_ready().id == new.id
        assert new.call("SET", "t", str(new.id)) == "OK"
        leader = new
    # a transfer to an id that is not a member is refused
    r = leader.call("CLUSTER", "TRANSFER", 99)
    assert r.__class__.__name__ == "RespError", r


def _restarts(m):
    return m.log_tail(1 << 20).count("restarting in place")


def test_transfer_under_writes(make_cluster):
    """Writers keep writing while leadership is transferred three times:
    each CLUSTER TRANSFER answers +OK, the target leads, no member had to
    restart in place (raft takes no entry while a transfer runs; the old
    leader stops serving at its start instead of proposing into it), and
    no acknowledged write is lost."""
    cl = make_cluster(3)
    leader = cl.wait_ready()
    rec = Recorder()
    keys = [["tw%d-%d" % (t, i) for i in range(3)] for t in range(3)]
    work = Workers()
    for t in range(3):
        work.spawn(kv_writer, cl, t, keys[t], rec)

    def acked():
        return rec.count("write", lambda w: w["status"] == "ok")
    try:
        for _ in range(3):
            base = acked()
            poll(lambda: acked() >= base + 50, "50 more acknowledged writes", 30)
            leader = _transfer(cl, leader)
        base = acked()
        poll(lambda: acked() >= base + 50, "50 more acknowledged writes after the transfers", 30)
    finally:
        work.stop()
    restarts = {m.id: _restarts(m) for m in cl.members.values()}
    assert not any(restarts.values()), "members restarted in place: %r" % restarts
    final = read_final(cl, [k for ks in keys for k in ks])
    lost = checkers.lost_acks(rec.get("write"), final)
    errs = [w["reply"] for w in rec.get("write") if w["status"] == "err"]
    assert (lost, errs) == (0, []), (lost, errs[:5])
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests


def test_transfer_that_cannot_happen(make_cluster):
    """A transfer to a member that is down cannot complete: it answers an
    error, and the leader, which stopped serving while it ran, serves again
    (a write and a read) without an election."""
    cl = make_cluster(3)
    leader = cl.wait_ready()
    assert leader.call("SET", "k", "1") == "OK"
    target = cl.others(leader)[0]
    target.kill()
    term = cl.term(leader)
    r = leader.call("CLUSTER", "TRANSFER", target.id, timeout=30)
    assert r.__class__.__name__ == "RespError" and "cluster change failed" in str(r), r
    cc = ClusterClient([leader])
    try:
        assert cc.call("SET", "k", "2") == ("ok", "OK")
        assert cc.call("GET", "k") == ("ok", b"2")
    finally:
        cc.close()
    assert cl.term(leader) == term and cl.leader(members=[m for m in cl.members.values() if m is not target]).id == leader.id
    assert _restarts(leader) == 0
    target.restart()
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests
