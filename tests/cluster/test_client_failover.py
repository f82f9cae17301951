"""The C client's producer against a three-member cluster whose leader is
killed (issue 20): given every member's address it finds each new leader
by itself; given one address that is then killed for good, it has learned
the others from CLUSTER MEMBERS. Either way every message arrives exactly
once, in per-key order (the spill file and the push ids see to it across
retries). The queue is read back through the leader afterwards.
"""
import os
import subprocess

from clusterlib import ClusterClient, poll

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.dirname(os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod")))
COUNT = 3000
KEYS = 10
PACE_US = 500          # about 1.5 s of sending: the kills land mid-stream
KILLS = 2              # a few: the suite's time is short
DONE_DEADLINE_S = 60.0


def start_producer(tmp_path, addrs, queue):
    spill = tmp_path / ("%s.spill" % queue)
    return subprocess.Popen([os.path.join(BUILD, "example_producer_spill"), "-a", addrs, "-q", queue,
                             "-f", str(spill), "-n", str(COUNT), "-k", str(KEYS), "-w", str(PACE_US)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def call(c, *args):
    status, r = c.call(*args)
    assert status == "ok", (args, status, r)
    return r


def drain(cl, queue):
    """Every message of queue, pulled and acked through the leader; returns
    {key: [payload ints in delivery order]}."""
    c = ClusterClient(cl.live())
    got = {}
    try:
        while True:
            msgs = call(c, "Q.PULL", queue, "COUNT", 1000, "LEASE", 60000)
            if not msgs:
                return got
            for mid, key, payload, _attempt, token in msgs:
                k = key.decode() if isinstance(key, bytes) else key
                got.setdefault(k, []).append(int(payload))
                assert call(c, "Q.ACK", queue, mid, token) == 1
    finally:
        c.close()


def check_exactly_once_in_order(got):
    seen = sorted(p for ps in got.values() for p in ps)
    assert seen == list(range(COUNT)), "lost %d, duplicated %d" % (
        len(set(range(COUNT)) - set(seen)), len(seen) - len(set(seen)))
    for key, ps in got.items():
        assert ps == sorted(ps), "key %s out of order" % key


def test_producer_follows_the_leader_through_kills(make_cluster, tmp_path):
    cl = make_cluster(3)
    addrs = ",".join(m.addr for m in cl.live())
    p = start_producer(tmp_path, addrs, "fq")
    try:
        for _ in range(KILLS):
            assert p.poll() is None, "the producer finished before the kill: raise COUNT"
            old, _new, _ = cl.kill_leader()
            old.restart()
        out, err = p.communicate(timeout=DONE_DEADLINE_S)
        assert p.returncode == 0, err
        assert out.decode().splitlines()[-1] == "done", err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    cl.wait_ready()
    check_exactly_once_in_order(drain(cl, "fq"))


def test_producer_given_one_address_that_dies_for_good(make_cluster, tmp_path):
    cl = make_cluster(3)
    leader = cl.leader()
    p = start_producer(tmp_path, leader.addr, "oq")
    try:
        # Once it has delivered something it has met the leader, and
        # learned the others; then its only address goes away for good.
        c = ClusterClient(cl.live())
        poll(lambda: sum(int(x) for x in call(c, "Q.LEN", "oq")) > 0, "the first pushes", DONE_DEADLINE_S)
        c.close()
        assert p.poll() is None, "the producer finished before the kill: raise COUNT"
        cl.kill_leader()
        out, err = p.communicate(timeout=DONE_DEADLINE_S)
        assert p.returncode == 0, err
        assert out.decode().splitlines()[-1] == "done", err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check_exactly_once_in_order(drain(cl, "oq"))
