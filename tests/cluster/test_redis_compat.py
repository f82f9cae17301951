"""Redis's commands of issue 24 in cluster mode: writes (MSET, APPEND,
FLUSHALL, GETDEL, SETEX...) run on the leader only and reach every member
(equal digests); followers answer -NOTLEADER for them and for SCAN/KEYS
(their state may lag); ROLE and INFO replication answer on every member
in Redis's form."""
from clusterlib import poll
from resp import RespError


def test_writes_leader_only_and_replicated(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    assert leader.call("MSET", "a", "1", "b", "2", "c", "3") == "OK"
    assert leader.call("APPEND", "a", "x") == 2
    assert leader.call("GETDEL", "b") == b"2"
    assert leader.call("SETEX", "t", "100", "v") == "OK"
    assert leader.call("MSETNX", "a", "9", "z", "9") == 0
    want = RespError("NOTLEADER %s" % leader.addr)
    for f in cl.others(leader):
        with f.conn() as c:
            for cmd in (("MSET", "a", "2"), ("APPEND", "a", "y"), ("FLUSHALL",), ("GETDEL", "a"), ("SCAN", "0"),
                        ("KEYS", "*"), ("DECR", "n"), ("EXPIREAT", "a", "1")):
                assert c.call(*cmd) == want, "node %d: %r" % (f.id, cmd)
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests
    assert leader.call("FLUSHALL") == "OK"
    assert leader.call("DBSIZE") == 0
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests


def test_role_and_info_replication(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    role = leader.call("ROLE")
    assert role[0] == b"master" and isinstance(role[1], int) and len(role[2]) == 2, role
    ports = sorted(int(e[1]) for e in role[2])
    assert ports == sorted(f.port for f in cl.others(leader)), role
    for f in cl.others(leader):
        def follower_role():
            r = f.call("ROLE")
            return r if r[0] == b"slave" and r[3] == b"connected" else None
        r = poll(follower_role, "node %d's ROLE to name its leader" % f.id)
        assert r[2] == leader.port and isinstance(r[4], int), r
        text = f.call("INFO", "replication").decode()
        assert "role:slave" in text and "master_port:%d" % leader.port in text, text
    text = leader.call("INFO", "replication").decode()
    assert "role:master" in text and "connected_slaves:2" in text, text
