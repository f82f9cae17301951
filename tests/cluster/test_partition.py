"""A partition (DEBUG PARTITION): the leader is cut from the two others (of
three), or the leader and one follower from the three others (of five).
The minority side (the old leader) must acknowledge no write sent to it
while cut off, and must not answer a read from stale state; the majority
elects a new leader and takes writes; CLUSTER INFO sampled throughout
shows one leader per term; after healing the old leader rejoins
as a follower and every member converges to the same DEBUG DIGEST."""
import threading
import time

import pytest

import checkers
from clusterlib import ClusterClient, Sampler, poll
from resp import Closed, RespError
from workloads import kv_get

MINORITY_TIMEOUT_S = 1.5      # a request to a cut-off member: its reply, or give up
WRITE_PAUSE_S = 0.05          # between write attempts on the minority (a rate, not synchronisation)
READ_PAUSE_S = 0.005          # between reads on the minority: tight, to hit the window before it steps down


def _minority_writer(member, attempts, halt):
    """KV.PUTs sent to member only, never redirected: records each
    attempt's fate (ok / err / doubt)."""
    n = 0
    c = None
    while not halt.is_set():
        t0 = time.monotonic()
        status = "doubt"
        value = "m%d-%d" % (member.id, n)
        try:
            if c is None:
                c = member.conn(MINORITY_TIMEOUT_S)
            r = c.call("KV.PUT", "minority", value)
            status = "err" if isinstance(r, RespError) else "ok"
        except (OSError, Closed):
            if c is not None:
                c.close()
            c = None
        attempts.append({"node": member.id, "status": status, "t0": t0, "value": value})
        n += 1
        halt.wait(WRITE_PAUSE_S)
    if c is not None:
        c.close()


def _minority_reader(member, reads, halt):
    """KV.GET of the majority's key sent to member only: records each read
    that returned a value (or nil)."""
    c = None
    while not halt.is_set():
        t0 = time.monotonic()
        try:
            if c is None:
                c = member.conn(MINORITY_TIMEOUT_S)
            g = c.call("KV.GET", "majority")
            if not isinstance(g, RespError):
                reads.append({"key": "majority", "value": g[0].decode() if g else None,
                              "rev": g[2] if g else 0, "t0": t0, "t1": time.monotonic(), "node": member.id})
        except (OSError, Closed):
            if c is not None:
                c.close()
            c = None
        halt.wait(READ_PAUSE_S)
    if c is not None:
        c.close()


@pytest.mark.parametrize("n", [3, 5])
def test_partitioned_leader_takes_no_writes(make_cluster, n):
    """n=3: the leader alone is cut off; n=5: the leader and one follower
    (a minority of two, which still talk to each other) are cut from three."""
    cl = make_cluster(n)
    old = cl.wait_ready()
    buddy = cl.others(old)[:n // 2 - 1]          # minority members besides the old leader
    side = [old] + buddy
    rest = [m for m in cl.others(old) if m not in buddy]
    sampler = Sampler(cl)
    sampler.start()
    old_term = cl.term(old)
    t0 = time.monotonic()
    r0 = old.call("KV.PUT", "majority", "before")
    assert isinstance(r0, int) and r0 > 0, r0
    before = {"key": "majority", "value": "before", "status": "ok", "rev": r0, "t0": t0, "t1": time.monotonic()}
    cl.partition(side, rest)
    t_cut = time.monotonic()

    attempts, reads, halt = [], [], threading.Event()
    threads = [threading.Thread(target=_minority_writer, args=(m, attempts, halt), daemon=True) for m in side]
    threads += [threading.Thread(target=_minority_reader, args=(m, reads, halt), daemon=True) for m in side]
    for th in threads:
        th.start()
    try:
        # the majority's writes start at once: they go through as soon as it has a leader
        cc = ClusterClient(rest)
        writes = [before]
        for i in range(20):
            t0 = time.monotonic()
            st, r = cc.call("KV.PUT", "majority", "v%d" % i)
            writes.append({"key": "majority", "value": "v%d" % i, "status": st, "rev": r if st == "ok" else None,
                           "t0": t0, "t1": time.monotonic()})
        cc.close()
        assert all(w["status"] == "ok" for w in writes), writes
        new = cl.leader(members=rest, min_term=old_term + 1)
        assert new.id != old.id
        # the minority keeps trying for a while after the majority moved on
        base = len(attempts)
        poll(lambda: cl.check_crashes() or len(attempts) >= base + 3 * len(side),
             "%d more write attempts on the cut-off side" % (3 * len(side)), 30)
    finally:
        halt.set()
        for th in threads:
            th.join(timeout=30)
    assert not any(th.is_alive() for th in threads)
    t_heal = time.monotonic()
    cl.heal()
    leader = cl.wait_ready()
    two = checkers.two_leaders(sampler.stop())

    acks = checkers.minority_acks(attempts, {m.id for m in side}, t_cut, t_heal)
    stale = checkers.stale_reads(writes, reads)
    print("old=%d new=%d attempts=%d minority_acks=%d minority_reads=%d stale=%d two_leaders=%d"
          % (old.id, new.id, len(attempts), acks, len(reads), stale, two))
    assert acks == 0, [a for a in attempts if a["status"] == "ok"]
    assert stale == 0
    assert two == 0

    # the old leader rejoins as a follower of the new one
    assert leader.id != old.id or cl.term(leader) > old_term
    poll(lambda: (old.info() or {}).get("cluster_role") == "follower" or leader.id == old.id,
         "node %d back as a follower" % old.id)
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1, digests
    cc = ClusterClient(list(cl.members.values()))
    st, v, _ = kv_get(cc, "majority")
    assert (st, v) == ("ok", "v19")
    st, v, _ = kv_get(cc, "minority")     # nothing the minority was sent was ever committed
    cc.close()
    assert (st, v) == ("ok", None), v
