"""Users in a cluster (docs/protocol.md, "Users and permissions"): the
aclfile seeds a new cluster through its first leader; ACL SETUSER is a
write (the leader runs it, a follower answers -NOTLEADER); users
replicate, so a follower authenticates them and refuses what their rules
refuse; a follower that missed the change gets it from a raft snapshot;
every member's DEBUG DIGEST (which covers the users) agrees."""
from clusterlib import ordod_has_option
from ordoproc import poll


def _auth_ok(member, user, pw):
    with member.conn() as c:
        return c.call("AUTH", user, pw) == "OK"


def test_users_replicate(make_cluster, tmp_path):
    f = tmp_path / "users.acl"
    f.write_text("user seeded on >s1 ~s:* +@read\n")
    small = ["--cluster-snapshot-entries", "16", "--cluster-snapshot-trailing", "0"]
    extra = ["--aclfile", str(f)] + (small if ordod_has_option("cluster-snapshot-entries") else [])
    cl = make_cluster(3, extra=extra)
    leader = cl.wait_ready()
    # The first leader seeds the file's users; every member gets them.
    for m in cl.members.values():
        poll(lambda: _auth_ok(m, "seeded", "s1"), "node %d to know the aclfile's user" % m.id)

    follower, other = cl.others(leader)
    r = follower.call("ACL", "SETUSER", "alice", "on", ">pw")
    assert getattr(r, "code", None) == "NOTLEADER", r
    assert leader.call("ACL", "SETUSER", "alice", "on", ">pw", "~a:*", "+@all") == "OK"
    poll(lambda: _auth_ok(follower, "alice", "pw"), "the follower to know alice")
    with follower.conn() as c:
        assert c.call("AUTH", "alice", "pw") == "OK"
        r = c.call("GET", "other")          # the rules are checked before leadership
        assert r.code == "NOPERM" and "'other'" in r.msg, r
        assert c.call("GET", "a:1").code == "NOTLEADER"
    with leader.conn() as c:
        assert c.call("AUTH", "alice", "pw") == "OK"
        assert c.call("SET", "a:1", "v") == "OK"
        assert c.call("SET", "b:1", "v").code == "NOPERM"

    # A follower that was down while users changed catches up (from a
    # snapshot when the binary takes small snapshot intervals).
    other.kill()
    assert leader.call("ACL", "SETUSER", "alice", "resetpass", ">pw2") == "OK"
    assert leader.call("ACL", "SETUSER", "bob", "on", ">b", "+@read", "allkeys") == "OK"
    with leader.conn() as c:
        for i in range(200):                # many raft entries: a snapshot past them
            c.send("SET", "k%d" % i, "v")
        assert [c.read() for _ in range(200)] == ["OK"] * 200
    other.restart()
    cl.wait_ready()
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests
    assert _auth_ok(other, "bob", "b")
    assert _auth_ok(other, "alice", "pw2") and not _auth_ok(other, "alice", "pw")
