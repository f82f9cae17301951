"""Cluster basics: three members start and agree on one leader; followers
redirect with -NOTLEADER host:port (the leader's client address) and still
answer PING, HELLO, INFO, CLUSTER ..., COMMAND, DEBUG DIGEST and QUIT; the
shape of CLUSTER INFO and CLUSTER MEMBERS; without a majority there is no
leader (-NOTLEADER ?)."""
import redis

from clusterlib import parse_info, poll
from resp import Closed, RespError

INFO_FIELDS = ("cluster_state", "cluster_node_id", "cluster_leader_id", "cluster_term", "cluster_members",
               "cluster_commit_index", "cluster_applied_index", "cluster_role", "cluster_revision")


def test_three_members_one_leader_and_info_shape(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    infos = cl.infos()
    for nid, inf in infos.items():
        missing = [f for f in INFO_FIELDS if f not in inf]
        assert not missing, "node %d: CLUSTER INFO lacks %s: %r" % (nid, missing, inf)
        assert inf["cluster_state"] == "ok"
        assert inf["cluster_node_id"] == nid
        assert inf["cluster_leader_id"] == leader.id
        assert inf["cluster_members"] == 3
        assert inf["cluster_role"] == ("leader" if nid == leader.id else "follower")
        assert 0 < inf["cluster_applied_index"] <= inf["cluster_commit_index"], inf
    assert len({inf["cluster_term"] for inf in infos.values()}) == 1


def test_members_shape(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    want = {m.id: m.addr for m in cl.members.values()}
    for m in cl.members.values():
        r = m.call("CLUSTER", "MEMBERS")
        assert isinstance(r, list) and len(r) == 3, "node %d: CLUSTER MEMBERS -> %r" % (m.id, r)
        got = {}
        roles = {}
        for e in r:
            assert isinstance(e, list) and len(e) >= 4, e
            mid, addr, role, voter = e[:4]
            assert isinstance(mid, int), e
            addr = addr.decode() if isinstance(addr, bytes) else addr
            role = role.decode() if isinstance(role, bytes) else role
            assert voter in (0, 1), e
            assert voter == 1, "a bootstrapped member is a voter: %r" % e
            got[mid] = addr
            roles[mid] = role
        assert got == want, "node %d: %r" % (m.id, r)
        assert [i for i, ro in roles.items() if ro == "leader"] == [leader.id], "node %d: %r" % (m.id, r)
        assert all(ro == "follower" for i, ro in roles.items() if i != leader.id), r


def test_follower_redirects_to_leader(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    assert leader.call("SET", "k", "v") == "OK"
    want = RespError("NOTLEADER %s" % leader.addr)
    for f in cl.others(leader):
        with f.conn() as c:
            assert c.call("PING") == "PONG"
            for cmd in (("SET", "k", "w"), ("GET", "k"), ("KV.PUT", "k", "w"), ("KV.GET", "k"), ("Q.LEN", "q"),
                        ("LOCK.ACQUIRE", "l", 1000)):
                assert c.call(*cmd) == want, "node %d: %r" % (f.id, cmd)
            assert isinstance(c.call("CLUSTER", "INFO"), bytes)
            assert isinstance(c.call("INFO", "server"), bytes)
            assert not isinstance(c.call("HELLO"), RespError)
            assert isinstance(c.call("COMMAND", "COUNT"), int)
            assert isinstance(c.call("DEBUG", "DIGEST"), bytes)
            assert c.call("QUIT") == "OK"
        # an ordinary Redis client sees the error and its text
        r = redis.Redis(socket_timeout=5, **cl.redis_kwargs(f))
        try:
            r.set("k", "x")
            raise AssertionError("a follower took a SET")
        except redis.ResponseError as e:
            assert str(e) == "NOTLEADER %s" % leader.addr
        finally:
            r.close()
    assert leader.call("GET", "k") == b"v"
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests


def test_no_majority_no_leader(make_cluster):
    """With both followers SIGKILLed the last member stops leading:
    cluster_state:fail, cluster_leader_id:0, and a write is answered
    -NOTLEADER ? (or its connection closed), never +OK. With the two back
    a leader is elected and writes go through."""
    cl = make_cluster(3)
    leader = cl.wait_ready()
    for f in cl.others(leader):
        f.kill()
    poll(lambda: (leader.info() or {}).get("cluster_state") == "fail", "node %d to say cluster_state:fail" % leader.id)
    inf = leader.info()
    assert inf["cluster_leader_id"] == 0 and inf["cluster_role"] != "leader", inf
    try:
        r = leader.call("SET", "k", "v")
        assert r == RespError("NOTLEADER ?"), r
    except (OSError, Closed):
        pass   # closed: allowed (the fate of a held reply is unknown)
    for f in cl.others(leader):
        f.restart()
    new = cl.wait_ready()
    assert new.call("SET", "k", "v2") == "OK"


def test_cluster_commands_on_a_single_server(single_ordod):
    """Without --cluster: CLUSTER INFO says cluster_enabled:0 and
    cluster_state:ok; MEMBERS, ADD, REMOVE, TRANSFER are errors; DEBUG
    DIGEST works; DEBUG PARTITION needs --debug-cluster-faults yes."""
    m = single_ordod
    info = parse_info(m.call("CLUSTER", "INFO"))
    assert info.get("cluster_enabled") == 0 and info.get("cluster_state") == "ok", info
    for cmd in (("CLUSTER", "MEMBERS"), ("CLUSTER", "ADD", 2, "127.0.0.1:1"), ("CLUSTER", "REMOVE", 2),
                ("CLUSTER", "TRANSFER")):
        r = m.call(*cmd)
        assert isinstance(r, RespError) and r.msg.startswith("ERR this server is not in cluster mode"), \
            "%r -> %r" % (cmd, r)
    assert isinstance(m.call("DEBUG", "DIGEST"), bytes)
    r = m.call("DEBUG", "PARTITION", 2)
    assert isinstance(r, RespError) and r.code == "ERR", r
