"""Membership: CLUSTER ADD of a fourth member (started with --cluster
naming the members and itself: it joins) that then holds the same state,
CLUSTER REMOVE of it; CLUSTER TRANSFER to a named id makes that member the
leader."""
from clusterlib import ClusterClient, poll


def _members(m):
    r = m.call("CLUSTER", "MEMBERS")
    assert isinstance(r, list), "node %d: CLUSTER MEMBERS -> %r" % (m.id, r)
    return {e[0]: e for e in r}


def test_add_then_remove_member(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    assert leader.call("SET", "before-add", "1") == "OK"
    m4 = cl.new_member(4)
    assert m4.start()
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


def test_transfer_to_named_member(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    for _ in range(2):
        target = cl.others(leader)[0]
        term = cl.term(leader)
        r = leader.call("CLUSTER", "TRANSFER", target.id, timeout=30)
        assert r == "OK", "CLUSTER TRANSFER %d -> %r" % (target.id, r)
        new = cl.leader(min_term=term + 1)
        assert new.id == target.id, "transfer to %d, leader is %d" % (target.id, new.id)
        assert cl.wait_ready().id == target.id
        assert new.call("SET", "t", str(target.id)) == "OK"
        leader = new
    # a transfer to an id that is not a member is refused
    r = leader.call("CLUSTER", "TRANSFER", 99)
    assert r.__class__.__name__ == "RespError", r
