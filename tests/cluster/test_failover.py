"""Failover under load: the leader is SIGKILLed several times in a row (and
restarted each time) while clients that follow -NOTLEADER keep working;
the checkers (checkers.py) then judge what the clients were told:

  - KV writers: no acknowledged write lost, no revision reused with
    another value, one leader per term (CLUSTER INFO sampled throughout);
  - readers beside writers on five members: no stale read;
  - a keyed queue: per-key order and no message acked twice;
  - a lock and an election: fencing tokens and terms strictly increase;
  - a watch resumed FROM its last revision on each new leader: no gap, no
    duplicate.

After each run every member must reach the same applied index with the
same DEBUG DIGEST. Also here: clients parked on a leader that hands over
hear of it; a key's expiry (PX) set on one leader happens on the next;
a member left without a leader keeps answering while replicated deadlines
pass, and the next leader ends them.
"""
import time

import checkers
from clusterlib import ClusterClient, Sampler, poll
from resp import Closed, RespError
from workloads import (QUEUE, QUEUE_LEASE_MS, GatedKVWriters, Recorder, Workers, kill_rounds, kv_observations,
                       kv_reader, kv_watcher, kv_writer, elect_client, lock_client, q_consumer, q_len, q_producer,
                       read_final, watch_last)

KILLS = 5
QUEUE_PER_KEY_MAX = 2000   # pushes per key at most (the producers run until the kills are done)
WRITERS = 4
KEYS_PER_WRITER = 4


def _acked(rec):
    return rec.count("write", lambda w: w["status"] == "ok")


def test_leader_kills_lose_no_acked_write(make_cluster):
    cl = make_cluster(3)
    rec = Recorder()
    sampler = Sampler(cl)
    sampler.start()
    work = Workers()
    writers = GatedKVWriters(cl, rec, work, "k", WRITERS, KEYS_PER_WRITER)
    all_keys = writers.all_keys
    try:
        killed = kill_rounds(cl, KILLS, lambda: _acked(rec), need=40, workers=[work], after_kill=writers.sweep)
    finally:
        work.stop()
        samples = sampler.stop()
    final = read_final(cl, all_keys)
    writes = rec.get("write")
    # lost: in the final state, or (a lost write may be overwritten later)
    # in a sweep of every key right after each new leader took over
    lost = checkers.lost_acks(writes, final) + checkers.stale_reads(writes, rec.get("sweep"))
    reused = checkers.reused_revisions(kv_observations(rec, final))
    two = checkers.two_leaders(samples)
    errs = [w for w in writes if w["status"] == "err"]
    print("killed=%s writes=%d acked=%d doubt=%d err=%d samples=%d lost=%d reused=%d two_leaders=%d"
          % (killed, len(writes), _acked(rec), sum(w["status"] == "doubt" for w in writes), len(errs),
             len(samples), lost, reused, two))
    assert (lost, reused, two) == (0, 0, 0)
    assert not errs, "error replies to writes: %r" % [w["reply"] for w in errs[:5]]
    cl.assert_digests_equal()


def test_linearizable_reads_across_kills(make_cluster):
    cl = make_cluster(5)
    rec = Recorder()
    keys = [["r%d-%d" % (t, i) for i in range(2)] for t in range(3)]
    all_keys = [k for ks in keys for k in ks]
    sampler = Sampler(cl)
    sampler.start()
    work = Workers()
    for t in range(3):
        work.spawn(kv_writer, cl, t, keys[t], rec)
    for t in range(2):
        work.spawn(kv_reader, cl, all_keys, rec, t)
    try:
        killed = kill_rounds(cl, 3, lambda: min(_acked(rec), rec.count("read")), need=30,
                             what="acknowledged writes and reads", workers=[work], followers=1)
    finally:
        work.stop()
        samples = sampler.stop()
    final = read_final(cl, all_keys)
    stale = checkers.stale_reads(rec.get("write"), rec.get("read"))
    reused = checkers.reused_revisions(kv_observations(rec, final))
    lost = checkers.lost_acks(rec.get("write"), final)
    two = checkers.two_leaders(samples)
    print("killed=%s writes=%d reads=%d stale=%d reused=%d lost=%d two_leaders=%d"
          % (killed, len(rec.get("write")), len(rec.get("read")), stale, reused, lost, two))
    assert (stale, reused, lost, two) == (0, 0, 0, 0)
    cl.assert_digests_equal()


def test_queue_order_and_acks_across_failover(make_cluster):
    cl = make_cluster(3)
    rec = Recorder()
    st = cl.leader().call("Q.CONFIG", QUEUE, "LEASE", QUEUE_LEASE_MS)
    assert st == "OK", st
    producers, consumers = Workers(), Workers()
    keys = [["qk%d-%d" % (p, i) for i in range(3)] for p in range(2)]
    for p in range(2):
        producers.spawn(q_producer, cl, keys[p], QUEUE_PER_KEY_MAX, rec, p)
    for c in range(3):
        consumers.spawn(q_consumer, cl, rec, 10 + c)
    try:
        killed = kill_rounds(cl, 2, lambda: rec.count("ack", lambda a: a["reply"] == 1), need=20,
                             what="successful acks", workers=[producers, consumers])
        producers.stop()   # a push cut short here is in doubt: the checkers only count acknowledged ones

        def drained():
            cl.check_crashes()
            consumers.check()
            return q_len(cl) == [0, 0, 0]
        poll(drained, "the queue drained", 60, every_s=0.1)
    finally:
        producers.stop()
        consumers.stop()
    pushes, deliveries, acks = rec.get("push"), rec.get("delivery"), rec.get("ack")
    order = checkers.queue_order_violations(pushes, deliveries)
    double = checkers.double_acks(acks)
    lost = checkers.queue_lost(pushes, acks, deliveries)
    print("killed=%s pushes=%d deliveries=%d acks=%d order=%d double_acks=%d lost=%d"
          % (killed, len(pushes), len(deliveries), len(acks), order, double, lost))
    assert (order, double, lost) == (0, 0, 0)
    cl.assert_digests_equal()


def test_lock_tokens_increase_across_failover(make_cluster):
    cl = make_cluster(3)
    rec = Recorder()
    work = Workers()
    for c in range(3):
        work.spawn(lock_client, cl, rec, c)
    for c in range(2):
        work.spawn(elect_client, cl, rec, 20 + c)
    try:
        killed = kill_rounds(cl, 2, lambda: min(rec.count("grant"), rec.count("term")), need=10,
                             what="lock grants and election terms", workers=[work])
    finally:
        work.stop()
    grants, terms = rec.get("grant"), rec.get("term")
    bad = checkers.lock_token_violations(grants)
    bad_terms = checkers.lock_token_violations(terms)
    print("killed=%s grants=%d token_violations=%d terms=%d term_violations=%d"
          % (killed, len(grants), bad, len(terms), bad_terms))
    assert (bad, bad_terms) == (0, 0)
    cl.assert_digests_equal()


def _blocked(member):
    text = member.call("INFO", "clients")
    for line in text.decode().splitlines():
        if line.startswith("blocked_clients:"):
            return int(line.split(":", 1)[1])
    raise AssertionError("INFO clients has no blocked_clients: %r" % text)


def test_blocked_clients_hear_of_leader_change(make_cluster):
    """Clients parked on the leader (Q.PULL BLOCK 0, LOCK.ACQUIRE WAIT on a
    held lock) when leadership moves (CLUSTER TRANSFER) get -NOTLEADER or
    a closed connection, never a reply as if nothing had happened."""
    cl = make_cluster(3)
    leader = cl.wait_ready()
    tok = leader.call("LOCK.ACQUIRE", "bl", 60000)
    assert isinstance(tok, int), tok
    pull, wait = leader.conn(timeout=20), leader.conn(timeout=20)
    try:
        pull.send("Q.PULL", "bq", "BLOCK", 0)
        wait.send("LOCK.ACQUIRE", "bl", 60000, "WAIT", 60000)
        poll(lambda: _blocked(leader) >= 2, "both clients parked on node %d" % leader.id)
        target = cl.others(leader)[0]
        assert leader.call("CLUSTER", "TRANSFER", target.id, timeout=30) == "OK"
        for what, c in (("Q.PULL BLOCK 0", pull), ("LOCK.ACQUIRE WAIT", wait)):
            try:
                r = c.read()
            except (OSError, Closed):
                continue   # closed: allowed
            assert isinstance(r, RespError) and r.code == "NOTLEADER", "%s parked on the old leader got %r" % (what, r)
    finally:
        pull.close()
        wait.close()
    assert cl.leader().id == target.id


EXPIRY_MS = 3000
CLOCK_TOLERANCE_S = 0.015   # the client's and the server's clocks round differently


def test_key_expiry_across_failover(make_cluster):
    """A key set with PX on one leader expires on the next one: not before
    its deadline, and not never (the new leader takes the timers over)."""
    cl = make_cluster(3)
    leader = cl.wait_ready()
    t0 = time.monotonic()      # before the SET: its deadline is no earlier than t0 + EXPIRY_MS
    assert leader.call("SET", "ttl-key", "v", "PX", EXPIRY_MS) == "OK"
    assert leader.call("SET", "plain-key", "v") == "OK"
    cl.kill_leader()
    cc = ClusterClient(list(cl.members.values()))
    try:
        def gone():
            st, r = cc.call("GET", "ttl-key")
            t_end = time.monotonic()   # the server answered no later than this
            assert st == "ok", (st, r)
            assert r in (b"v", None), r
            if r is None:
                return t_end
            return None
        t_end = poll(gone, "ttl-key to expire on the new leader", EXPIRY_MS / 1000.0 + 20, every_s=0.05)
        assert t_end - t0 >= EXPIRY_MS / 1000.0 - CLOCK_TOLERANCE_S, "expired %.3fs early" % (
            EXPIRY_MS / 1000.0 - (t_end - t0))
        assert cc.call("GET", "plain-key") == ("ok", b"v")
    finally:
        cc.close()


DEADLINE_MS = 300


def test_deadlines_passing_without_a_leader(make_cluster):
    """A member that does not lead while replicated deadlines pass (a lock's
    and an election's TTL, a key's PX, a delivery's lease) keeps answering,
    and the next leader ends them all. (With libuv 1.44 a timer re-armed
    from its own callback for a deadline already past ran again at once,
    forever: the member answered nothing and could not even be stopped.)"""
    cl = make_cluster(3)
    leader = cl.wait_ready()
    t0 = time.monotonic()      # before the writes: every deadline below is after t0 + DEADLINE_MS
    lock_tok = leader.call("LOCK.ACQUIRE", "dl-lock", DEADLINE_MS)
    assert isinstance(lock_tok, int), lock_tok
    term = leader.call("ELECT.CAMPAIGN", "dl-elect", "a", DEADLINE_MS)
    assert isinstance(term, int), term
    assert leader.call("SET", "dl-key", "v", "PX", DEADLINE_MS) == "OK"
    assert isinstance(leader.call("Q.PUSH", "dlq", "k", "m"), int)
    pulled = leader.call("Q.PULL", "dlq", "LEASE", DEADLINE_MS)
    assert len(pulled) == 1, pulled
    cl.wait_synced()
    survivor = cl.others(leader)[0]
    down = [m for m in cl.members.values() if m is not survivor]
    for m in down:
        m.kill()
    # The survivor cannot lead alone; it must answer while every deadline
    # passes on its clock, and well after (half a second at least, however
    # long the set-up took).
    answered = 0
    until = max(t0 + 3 * DEADLINE_MS / 1000.0, time.monotonic() + 0.5)
    while time.monotonic() < until:
        assert survivor.call("PING", timeout=2.0) == "PONG"
        answered += 1
    assert answered > 0
    for m in down:
        m.restart()
    cl.leader()
    cc = ClusterClient(list(cl.members.values()))
    try:
        st, tok = cc.call("LOCK.ACQUIRE", "dl-lock", 10000, "WAIT", 20000)
        assert st == "ok" and tok > lock_tok, (st, tok, lock_tok)
        st, t2 = cc.call("ELECT.CAMPAIGN", "dl-elect", "b", 10000, "WAIT", 20000)
        assert st == "ok" and t2 > term, (st, t2, term)
        assert cc.call("GET", "dl-key") == ("ok", None)
        st, again = cc.call("Q.PULL", "dlq", "BLOCK", 20000)
        assert st == "ok" and len(again) == 1 and again[0][0] == pulled[0][0] and again[0][3] == 2, (st, again)
    finally:
        cc.close()
    cl.assert_digests_equal()


def test_watch_resumes_across_failover(make_cluster):
    cl = make_cluster(3)
    rec = Recorder()
    writers, watcher = Workers(), Workers()
    keys = [["wk%d-%d" % (t, i) for i in range(3)] for t in range(2)]
    watcher.spawn(kv_watcher, cl, "wk", rec)
    for t in range(2):
        writers.spawn(kv_writer, cl, t, keys[t], rec)
    try:
        # Progress counts events as well as acks: each round then waits
        # until the watch runs on the current leader (started before the
        # first kill, resumed after each), not only until writes go on.
        killed = kill_rounds(cl, 2, lambda: min(_acked(rec), len(rec.get("event"))), need=30,
                             what="acknowledged writes and watch events", workers=[writers, watcher])
        writers.stop()
        # The revision to wait for: a KV.PUT made now, above every
        # acknowledged write. The highest acknowledged KV.PUT is not enough:
        # SETs acknowledged after it carry no revision, and the watch could
        # reach it before their events, which the checker would then count.
        cc = ClusterClient(list(cl.members.values()))
        try:
            st, top = cc.call("KV.PUT", "wk-end", "end")
        finally:
            cc.close()
        assert st == "ok" and isinstance(top, int), (st, top)

        def caught_up():
            cl.check_crashes()
            watcher.check()
            return watch_last(rec) >= top
        poll(caught_up, lambda: "the watch to reach revision %d (at %d)" % (top, watch_last(rec)), 30)
    finally:
        writers.stop()
        watcher.stop()
    events, starts = rec.get("event"), rec.get("watch_start")
    bad = checkers.watch_violations(rec.get("write"), events)
    print("killed=%s writes=%d events=%d watch_starts=%d watch_violations=%d"
          % (killed, _acked(rec), len(events), len(starts), bad))
    assert bad == 0
    assert len(starts) >= 3, "the watch was resumed %d times over 2 kills" % (len(starts) - 1)
