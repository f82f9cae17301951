"""Cluster mode as production runs it (issue 19): ordod drives the raft
engine, so these check what that design promises, each at small snapshot
settings so snapshots are taken, sent and installed all the time:

  - chaos: leader kills, follower kills while snapshots are written,
    a partition that heals, a SIGSTOPped leader, every member killed at
    once; the checkers count acknowledged writes lost, stale reads and
    reused revisions (0 each), the fixture counts members that died on
    their own (0), and every member ends with the same DEBUG DIGEST;
  - a leader compacts its log under continuous writes (its snapshot index
    moves while the writes go on);
  - reads write nothing to the log (no entry per read), and a SIGSTOPped
    old leader answers no read from its stale state;
  - CLUSTER ADD that fails changes nothing and says why; ids are checked;
  - CLUSTER MEMBERS shows a dead member as not live, and a live one again;
  - a member whose disk fills (tests/shim/diskfull.c) says so, takes no
    writes, hands leadership away, and catches up once space returns, with
    no acknowledged write lost;
  - a member whose wall clock runs an hour ahead takes leadership over
    without shortening any TTL or lock (tests/shim/clockstep.c).
"""
import http.client
import json
import os
import signal
import struct
import subprocess
import threading
import time

import pytest

import checkers
from clusterlib import ORDOD, ClusterClient, Sampler, poll
from resp import Closed, RespError
from workloads import GatedKVWriters, Recorder, Workers, kv_observations, kv_reader, read_final

SMALL = ["--cluster-snapshot-entries", "32", "--cluster-snapshot-trailing", "8"]
SHIM_DIR = os.path.dirname(ORDOD)
DISKFULL = os.path.join(SHIM_DIR, "libdiskfull.so")
CLOCKSTEP = os.path.join(SHIM_DIR, "libclockstep.so")
WRITERS = 3
KEYS_PER_WRITER = 3
PROGRESS_S = 30.0


def _acked(rec):
    return rec.count("write", lambda w: w["status"] == "ok")


def _grow(cl, rec, work, need):
    base = _acked(rec)

    def grown():
        cl.check_crashes()
        work.check()
        return _acked(rec) >= base + need
    poll(grown, "%d more acknowledged writes (have %d)" % (need, base), PROGRESS_S)


def _members(m):
    r = m.call("CLUSTER", "MEMBERS")
    assert isinstance(r, list), r
    return {row[0]: row for row in r}


def test_chaos_at_small_snapshot_settings(make_cluster):
    cl = make_cluster(3, extra=SMALL)
    rec = Recorder()
    sampler = Sampler(cl)
    sampler.start()
    work = Workers()
    writers = GatedKVWriters(cl, rec, work, "x", WRITERS, KEYS_PER_WRITER)
    all_keys = writers.all_keys
    sweep = writers.sweep
    work.spawn(kv_reader, cl, all_keys, rec, 7)
    steps = []
    taken = 0
    t_step = [time.monotonic()]

    def step(what):
        """Each step named with the seconds it took (a slow one shows where)."""
        now = time.monotonic()
        steps.append("%s (%.1f s)" % (what, now - t_step[0]))
        t_step[0] = now
    try:
        _grow(cl, rec, work, 50)
        # 1. the leader killed, restarted
        old, new, _ = cl.kill_leader()
        sweep()
        old.restart()
        cl.wait_ready()
        step("leader %d killed" % old.id)
        _grow(cl, rec, work, 100)
        # 2. a follower killed while snapshots are written (every 32 entries)
        leader = cl.leader()
        f = cl.others(leader)[0]
        f.kill()
        _grow(cl, rec, work, 200)
        f.restart()
        cl.wait_ready()
        step("follower %d killed" % f.id)
        _grow(cl, rec, work, 50)
        # 3. the leader cut off, then healed
        leader = cl.leader()
        term = cl.term(leader)
        cl.partition([leader], cl.others(leader))
        cl.leader(members=cl.others(leader), min_term=term + 1)
        sweep()
        _grow(cl, rec, work, 50)
        cl.heal()
        cl.wait_ready()
        step("leader %d partitioned" % leader.id)
        _grow(cl, rec, work, 50)
        # 4. the leader stopped (SIGSTOP) past the election timeout, then resumed
        leader = cl.leader()
        term = cl.term(leader)
        os.kill(leader.pid, signal.SIGSTOP)
        try:
            # (clients stuck on the stopped member's socket wait for it: the
            # others elect a leader meanwhile; the stopped one's answers,
            # once it runs again, are judged by the checkers)
            cl.leader(members=cl.others(leader), min_term=term + 1)
            sweep()
        finally:
            os.kill(leader.pid, signal.SIGCONT)
        cl.wait_ready()
        step("leader %d stopped" % leader.id)
        _grow(cl, rec, work, 50)
        taken = sum(int((m.info() or {}).get("cluster_snapshots_taken", 0)) for m in cl.members.values())
        # 5. every member killed at once
        for m in cl.members.values():
            m.kill()
        for m in cl.members.values():
            m.restart()
        cl.wait_ready()
        step("all killed")
        _grow(cl, rec, work, 50)
    finally:
        work.stop()
        samples = sampler.stop()
    final = read_final(cl, all_keys)
    writes = rec.get("write")
    lost = checkers.lost_acks(writes, final) + checkers.stale_reads(writes, rec.get("sweep"))
    stale = checkers.stale_reads(writes, rec.get("read"))
    reused = checkers.reused_revisions(kv_observations(rec, final))
    two = checkers.two_leaders(samples)
    print("steps=%s writes=%d acked=%d reads=%d lost=%d stale=%d reused=%d two_leaders=%d snapshots=%d"
          % (steps, len(writes), _acked(rec), len(rec.get("read")), lost, stale, reused, two, taken))
    assert (lost, stale, reused, two) == (0, 0, 0, 0)
    assert taken > 0, "no snapshot was taken at these settings"
    cl.assert_digests_equal()


def test_leader_compacts_under_continuous_writes(make_cluster):
    cl = make_cluster(3, extra=SMALL)
    leader = cl.wait_ready()
    halt = threading.Event()
    errors = []

    def writer():
        try:
            with leader.conn(timeout=10) as c:
                i = 0
                while not halt.is_set():
                    for j in range(20):
                        c.send("SET", "c%d" % ((i + j) % 200), "v%d" % (i + j))
                    for _ in range(20):
                        r = c.read()
                        if r != "OK":
                            errors.append(r)
                    i += 20
        except (OSError, Closed) as e:
            errors.append(e)
    th = threading.Thread(target=writer, daemon=True)
    th.start()
    try:
        first = poll(lambda: int(leader.info().get("cluster_snapshot_index", 0)) or None,
                     "the leader's first snapshot under load", 30)
        poll(lambda: int(leader.info().get("cluster_snapshot_index", 0)) > first + 64,
             "the leader's snapshot index to move on while writes continue", 30)
    finally:
        halt.set()
        th.join(timeout=30)
    assert not errors, errors[:3]
    info = leader.info()
    assert info["cluster_role"] == "leader" and int(info["cluster_term"]) == cl.term(leader)
    cl.assert_digests_equal()


def test_reads_write_nothing_to_the_log(make_cluster):
    cl = make_cluster(3)
    leader = cl.wait_ready()
    assert leader.call("SET", "r", "1") == "OK"
    cl.wait_synced()
    before = leader.info()
    with leader.conn() as c:
        for _ in range(200):
            assert c.call("GET", "r") == b"1"
    after = leader.info()
    assert after["cluster_last_index"] == before["cluster_last_index"], (before, after)
    assert int(after["cluster_read_rounds"]) >= int(before["cluster_read_rounds"]) + 200


# How long a deposed leader may take to answer (or close) a read it took in
# while it still led: it learns of the new term from the first message of
# the new leader after SIGCONT, milliseconds away.
DEPOSED_ANSWER_S = 5.0
STOPPED_LEADER_ROUNDS = 4


def test_stopped_leader_answers_no_stale_read(make_cluster):
    # A read that reaches a leader just before it is deposed is answered
    # -NOTLEADER or its connection is closed, at once, and never with the
    # state from before the new leader's write: over RESP and over HTTP.
    # Whether the old leader takes the read in before or after the new
    # term's first message varies from run to run (both come in the same
    # loop turn after SIGCONT), hence several rounds.
    cl = make_cluster(3, http=True)
    for rnd in range(STOPPED_LEADER_ROUNDS):
        old = cl.wait_ready()
        assert old.call("SET", "s", "old%d" % rnd) == "OK"
        cl.wait_synced()
        term = cl.term(old)
        c = old.conn(timeout=DEPOSED_ANSWER_S)
        h = cl.http_conn(old, timeout=DEPOSED_ANSWER_S)
        h.connect()
        os.kill(old.pid, signal.SIGSTOP)
        try:
            c.send("GET", "s")                   # waits in the stopped leader's socket
            h.putrequest("GET", "/v1/kv/s")
            h.endheaders()
            new = cl.leader(members=cl.others(old), min_term=term + 1)
            assert new.call("SET", "s", "new%d" % rnd) == "OK"
        finally:
            os.kill(old.pid, signal.SIGCONT)
        try:
            r = c.read()
        except (Closed, ConnectionResetError):
            r = "closed"
        finally:
            c.close()
        # A timeout (socket.timeout, an OSError) is a failure: the read hung.
        assert r != b"old%d" % rnd, "a deposed leader answered a read from its stale state"
        assert r == "closed" or str(r).startswith("NOTLEADER"), r
        try:
            resp = h.getresponse()
            hr = (resp.status, resp.read())
        except (http.client.RemoteDisconnected, ConnectionResetError, http.client.IncompleteRead):
            hr = "closed"
        finally:
            h.close()
        assert hr == "closed" or (hr[0] != 200 and b"old%d" % rnd not in hr[1]), hr
        cl.wait_ready()


def test_failed_add_changes_nothing(make_cluster):
    cl = make_cluster(3, extra=["--cluster-catch-up-timeout-ms", "1500"])
    leader = cl.wait_ready()
    before = sorted(_members(leader))
    # nothing listens there
    m = cl.new_member(9)
    r = leader.call("CLUSTER", "ADD", 9, m.addr, timeout=30)
    assert isinstance(r, RespError) and "did not catch up" in str(r), r
    poll(lambda: sorted(_members(leader)) == before, "the configuration back to %s" % before, 10)
    # an id already there, 0, past 2^63-1
    r = leader.call("CLUSTER", "ADD", before[1], "127.0.0.1:1")
    assert isinstance(r, RespError) and "already" in str(r), r
    r = leader.call("CLUSTER", "ADD", 18446744073709551615, "127.0.0.1:1")
    assert isinstance(r, RespError) and str(r).strip() != "ERR", r
    r = leader.call("CLUSTER", "REMOVE", 77)
    assert isinstance(r, RespError) and "not in the configuration" in str(r), r
    assert sorted(_members(leader)) == before


def _status_json(cl, m):
    c = cl.http_conn(m)
    try:
        c.request("GET", "/v1/status")
        r = c.getresponse()
        return json.loads(r.read())
    finally:
        c.close()


def test_members_show_liveness(make_cluster):
    cl = make_cluster(3, http=True)
    leader = cl.wait_ready()
    f = cl.others(leader)[0]
    rows = _members(leader)
    assert all(len(row) == 7 for row in rows.values()), rows
    assert all(row[4] == 1 for row in rows.values()), rows
    f.kill()
    poll(lambda: _members(leader)[f.id][4] == 0, "node %d shown as not live" % f.id, 10)
    assert _members(leader)[f.id][5] > 0
    # the same in /v1/status (the dashboard's source), /metrics and `ordo status`
    st = {m["id"]: m for m in _status_json(cl, leader)["cluster"]["members"]}
    assert st[f.id]["live"] is False and st[leader.id]["live"] is True, st
    c = cl.http_conn(leader)
    c.request("GET", "/metrics")
    metrics = c.getresponse().read().decode()
    c.close()
    assert 'ordo_cluster_member_live{id="%d"} 0' % f.id in metrics
    out = subprocess.run(cl.tool("-h", leader.addr, "status"), capture_output=True,
                         text=True, timeout=30).stdout
    assert "member:%d " % f.id in out and "live=0" in out, out
    f.restart()
    poll(lambda: _members(leader)[f.id][4] == 1, "node %d live again" % f.id, 20)
    lag = poll(lambda: (lambda row: row[6] == 0 or None)(_members(cl.leader())[f.id]), "no lag", 20)
    assert lag


def _shim_env(**extra):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    env.update(extra)
    return env


def test_full_disk_member_steps_aside_and_recovers(make_cluster, tmp_path):
    if not os.path.exists(DISKFULL):
        pytest.fail("missing %s: build the test shims (make)" % DISKFULL)
    ctl = tmp_path / "diskfull"
    ctl.write_bytes(b"0")
    cl = make_cluster(3)
    leader = cl.wait_ready()
    leader.stop()
    leader.env = _shim_env(LD_PRELOAD=DISKFULL, ORDO_TEST_DISKFULL_FILE=str(ctl),
                           ORDO_TEST_DISKFULL_PREFIX=os.path.abspath(os.path.join(leader.dir, "raft")))
    leader.restart()
    full = cl.wait_ready()
    if full.id != leader.id:
        assert full.call("CLUSTER", "TRANSFER", leader.id, timeout=30) == "OK"
    full = cl.leader()
    assert full.id == leader.id
    cc = ClusterClient(list(cl.members.values()))
    acked = []
    try:
        for i in range(50):
            st, r = cc.call("SET", "d%d" % i, "a")
            assert st == "ok", (st, r)
            acked.append("d%d" % i)
        ctl.write_bytes(b"1")   # the leader's disk is full
        # The next write fails to store on the leader (the followers store
        # it: it commits); the leader takes no more writes and, an election
        # timeout later, hands leadership away; writes go on through the others.
        for i in range(50, 100):
            for _ in range(5):   # a write in flight when leadership moves is in doubt: sent again
                st, r = cc.call("SET", "d%d" % i, "b", deadline_s=30)
                if st != "doubt":
                    break
            assert st == "ok", (st, r)
            acked.append("d%d" % i)
        cl.leader(members=cl.others(full), exclude=(full.id,), deadline_s=30)
        info = full.info()
        assert info.get("cluster_store_failing"), info
        assert "cannot be written" in full.log_text()
        ctl.write_bytes(b"0")   # space again
        poll(lambda: not (full.info() or {}).get("cluster_store_failing"), "the store writing again", 30)
    finally:
        cc.close()
    cl.wait_ready()
    cl.assert_digests_equal()
    leader = cl.leader()
    assert leader.call("GET", "d99") == b"b"
    missing = [k for k in acked if leader.call("EXISTS", k) != 1]
    assert not missing, "acknowledged writes lost: %s" % missing[:5]


def test_leader_clock_an_hour_ahead_keeps_deadlines(make_cluster, tmp_path):
    if not os.path.exists(CLOCKSTEP):
        pytest.fail("missing %s: build the test shims (make)" % CLOCKSTEP)
    step = tmp_path / "clock-step"
    step.write_bytes(struct.pack("<q", 3600 * 10**9))
    cl = make_cluster(3)
    leader = cl.wait_ready()
    fast = cl.others(leader)[0]
    fast.stop()
    fast.env = _shim_env(LD_PRELOAD=CLOCKSTEP, ORDO_TEST_CLOCK_STEP_FILE=str(step))
    fast.restart()
    leader = cl.wait_ready()
    if leader.id == fast.id:
        assert fast.call("CLUSTER", "TRANSFER", cl.others(fast)[0].id, timeout=30) == "OK"
        leader = cl.leader(exclude=(fast.id,))
    assert leader.call("SET", "ttl", "v", "PX", 120000) == "OK"
    tok = leader.call("LOCK.ACQUIRE", "L", 120000)
    assert isinstance(tok, int), tok
    cl.wait_synced()
    assert leader.call("CLUSTER", "TRANSFER", fast.id, timeout=30) == "OK"
    assert cl.leader().id == fast.id
    pttl = fast.call("PTTL", "ttl")
    assert isinstance(pttl, int) and pttl > 100000, "PTTL %r on the member an hour ahead" % pttl
    assert fast.call("GET", "ttl") == b"v"
    assert fast.call("LOCK.CHECK", "L", tok) == 1, "the lock lapsed on the member an hour ahead"
    assert fast.call("LOCK.ACQUIRE", "L", 1000, "WAIT", 0) is None, "another client took a held lock"
    info = fast.call("LOCK.INFO", "L")
    assert info[1] > 100000, "the lock's remaining time on the member an hour ahead: %r" % info
    assert "wall clock is" in fast.log_text()
