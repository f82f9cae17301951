"""`ordo status` and `ordo top` against a 3-member cluster (issue 24):
asked of a follower, they follow the leader and show its role and term,
the indexes durability is measured by, and one line per member."""
import re
import subprocess


def test_status_of_a_cluster_shows_the_leader_and_members(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    follower = cl.others(leader)[0]
    assert leader.call("Q.PUSH", "jobs", "k", "p")
    p = subprocess.run(cl.tool("-h", follower.addr, "status"), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    term = int(leader.info()["cluster_term"])
    assert re.search(r"^role:\s+leader, term %d \(member %d of 3; leader %s\)$" % (term, leader.id, leader.addr),
                     out, re.M), out
    assert re.search(r"^durable:\s+commit index \d+, applied \d+ \(\d+ to apply\), last \d+ \(\d+ uncommitted\)$",
                     out, re.M), out
    assert re.search(r"^queues:\s+1 \(1 waiting, ", out, re.M), out
    for m in cl.members.values():
        assert re.search(r"^  member:%d addr=%s role=\w+ voter=1 live=1 " % (m.id, re.escape(m.addr)), out, re.M), out


def test_top_once_on_a_cluster_shows_the_members(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    follower = cl.others(leader)[0]
    p = subprocess.run(cl.tool("-h", follower.addr, "top", "--once", "--interval", "200"), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("ordo top -- %s, leader, " % leader.addr), out
    assert re.search(r"^durable:\s+commit index \d+", out, re.M), out
    assert out.count("\n  member:") == 3, out
