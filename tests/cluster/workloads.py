"""The clients the cluster tests run while members die, and what they
record (the histories tests/cluster/checkers.py reads; the record shapes
are documented there).

Owns: Recorder (thread-safe lists of records), Gate (writers held between
requests), the KV writers and readers, sweep_reads, GatedKVWriters
(writers on their own keys, swept while they hold still),
the queue producers and consumers, the lock and election clients, a
watcher that follows the leader, Workers (threads
started together and stopped, bounded), read_final, and kill_rounds (the
leader SIGKILLed and restarted, round after round, once the workload made
progress since the previous round).

Every client is a clusterlib.ClusterClient: it follows -NOTLEADER and
reconnects after connection errors. A write counts as acknowledged only on
a success reply.
"""
import random
import threading
import time

from clusterlib import NOLEADER_PAUSE_S, ClusterClient, poll
from resp import Closed, RespError

JOIN_DEADLINE_S = 30.0        # a worker thread ends after stop is set
WRITE_DEADLINE_S = 15.0       # a write is retried (redirects, reconnects) for this long
PROGRESS_DEADLINE_S = 30.0    # the workload's progress after a failover


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.lists = {}

    def add(self, kind, rec):
        with self.lock:
            self.lists.setdefault(kind, []).append(rec)

    def get(self, kind):
        with self.lock:
            return list(self.lists.get(kind, ()))

    def count(self, kind, pred=None):
        with self.lock:
            return sum(1 for r in self.lists.get(kind, ()) if pred is None or pred(r))


class Workers:
    """Threads started together; stop() sets the event and joins them all
    (bounded), failing if one is stuck or one raised."""

    def __init__(self):
        self.halt = threading.Event()
        self.threads = []
        self.errors = []

    def spawn(self, fn, *args):
        def run():
            try:
                fn(*args, self.halt)
            except Exception as e:  # noqa: BLE001 -- reported by stop()
                self.errors.append("%s: %r" % (fn.__name__, e))
                raise
        th = threading.Thread(target=run, daemon=True)
        self.threads.append(th)
        th.start()

    def check(self):
        """Fail now if a worker raised."""
        assert not self.errors, "worker errors: %s" % self.errors

    def stop(self):
        """Idempotent."""
        self.halt.set()
        deadline = time.monotonic() + JOIN_DEADLINE_S
        for th in self.threads:
            th.join(timeout=max(0.1, deadline - time.monotonic()))
        stuck = sum(1 for th in self.threads if th.is_alive())
        assert not stuck, "%d worker threads did not stop" % stuck
        assert not self.errors, "worker errors: %s" % self.errors


class Gate:
    """Lets a test hold its writers between requests: pause() returns once
    every one of n workers is parked at its checkpoint (none has a request
    in flight), resume() lets them go on."""

    def __init__(self, n):
        self.n = n
        self.cv = threading.Condition()
        self.paused = False
        self.parked = 0

    def checkpoint(self, halt):
        """Called by a worker between two requests."""
        with self.cv:
            if not self.paused:
                return
            self.parked += 1
            self.cv.notify_all()
            while self.paused and not halt.is_set():
                self.cv.wait(0.1)   # bounded wait on the condition (halt is an Event, not this condition)
            self.parked -= 1

    def pause(self, deadline_s=PROGRESS_DEADLINE_S):
        with self.cv:
            self.paused = True
            ok = self.cv.wait_for(lambda: self.parked == self.n, timeout=deadline_s)
        assert ok, "%d of %d writers parked within %ss" % (self.parked, self.n, deadline_s)

    def resume(self):
        with self.cv:
            self.paused = False
            self.cv.notify_all()


# ---- KV -------------------------------------------------------------------------

def kv_writer(cluster, tid, keys, rec, halt, gate=None):
    """Round robin over its own keys: KV.PUT (the revision comes back) and
    SET alternately, each value unique. A write whose connection died is
    sent again (same value) until a reply or WRITE_DEADLINE_S. Between
    writes it stops at gate's checkpoint (if any)."""
    cc = ClusterClient(list(cluster.members.values()), rng=random.Random(tid))
    n = 0
    try:
        while not halt.is_set():
            if gate is not None:
                gate.checkpoint(halt)
                if halt.is_set():
                    break
            key = keys[n % len(keys)]
            value = "w%d-%d" % (tid, n)
            use_put = (n // len(keys)) % 2 == 0
            t0 = time.monotonic()
            if use_put:
                st, r = cc.call("KV.PUT", key, value, deadline_s=WRITE_DEADLINE_S)
            else:
                st, r = cc.call("SET", key, value, deadline_s=WRITE_DEADLINE_S)
            t1 = time.monotonic()
            rev = r if (st == "ok" and use_put) else None
            if st == "ok" and use_put and not isinstance(r, int):
                st = "err"   # an unexpected reply is not an ack
            if st == "ok" and not use_put and r != "OK":
                st = "err"
            rec.add("write", {"key": key, "value": value, "status": st, "rev": rev, "t0": t0, "t1": t1,
                              "reply": r})
            n += 1
    finally:
        cc.close()


def kv_get(cc, key, deadline_s=WRITE_DEADLINE_S):
    """KV.GET through cc: (status, value, mod_rev); value None, rev 0 if absent."""
    st, r = cc.call("KV.GET", key, deadline_s=deadline_s)
    if st != "ok":
        return st, None, None
    if r is None:
        return st, None, 0
    v = r[0].decode() if isinstance(r[0], bytes) else r[0]
    return st, v, r[2]


def kv_reader(cluster, keys, rec, seed, halt):
    """KV.GET of random keys; records every successful read."""
    rng = random.Random(seed)
    cc = ClusterClient(list(cluster.members.values()), rng=rng)
    try:
        while not halt.is_set():
            key = rng.choice(keys)
            t0 = time.monotonic()
            st, v, rev = kv_get(cc, key)
            t1 = time.monotonic()
            if st == "ok":
                rec.add("read", {"key": key, "value": v, "rev": rev, "t0": t0, "t1": t1})
    finally:
        cc.close()


def read_final(cluster, keys):
    """{key: (value, mod_rev)} read through the leader after the run."""
    cc = ClusterClient(list(cluster.members.values()))
    out = {}
    try:
        for k in keys:
            st, v, rev = kv_get(cc, k)
            assert st == "ok", "final KV.GET %s: %s" % (k, st)
            if v is not None:
                out[k] = (v, rev)
    finally:
        cc.close()
    return out


def sweep_reads(cluster, keys, rec, kind="sweep"):
    """KV.GET of every key through the leader, each recorded as a read of
    kind kind (right after a failover: an acknowledged write that the new
    leader lacks shows as a stale read)."""
    cc = ClusterClient(list(cluster.members.values()))
    try:
        for k in keys:
            t0 = time.monotonic()
            st, v, rev = kv_get(cc, k)
            if st == "ok":
                rec.add(kind, {"key": k, "value": v, "rev": rev, "t0": t0, "t1": time.monotonic()})
    finally:
        cc.close()


class GatedKVWriters:
    """writers kv_writer threads (spawned on work), writer t on keys
    "<prefix><t>-<i>" for i < keys_per_writer, all held by one Gate; keys
    (per writer) and all_keys say which. sweep() reads every key through
    the leader while the writers hold still (no write in flight), so a
    read that misses an acknowledged write is a lost write, not a race."""

    def __init__(self, cluster, rec, work, prefix, writers, keys_per_writer):
        self.cluster, self.rec = cluster, rec
        self.keys = [["%s%d-%d" % (prefix, t, i) for i in range(keys_per_writer)] for t in range(writers)]
        self.all_keys = [k for ks in self.keys for k in ks]
        self.gate = Gate(writers)
        for t in range(writers):
            work.spawn(lambda *a: kv_writer(*a, gate=self.gate), cluster, t, self.keys[t], rec)

    def sweep(self):
        self.gate.pause()
        try:
            sweep_reads(self.cluster, self.all_keys, self.rec)
        finally:
            self.gate.resume()


def kv_observations(rec, final):
    """(rev, key, value) triples for reused_revisions: acked KV.PUTs, reads,
    the final state."""
    obs = [(w["rev"], w["key"], w["value"]) for w in rec.get("write") if w["status"] == "ok" and w["rev"]]
    obs += [(r["rev"], r["key"], r["value"]) for r in rec.get("read") + rec.get("sweep") if r["value"] is not None]
    obs += [(rev, k, v) for k, (v, rev) in final.items()]
    return obs


# ---- failover rounds --------------------------------------------------------------

def kill_rounds(cluster, kills, progress, need, what="acknowledged writes", workers=(), followers=0,
                after_kill=None):
    """kills times: wait until progress() grew by need (the workload goes on
    under the current leader), SIGKILL the leader (and as many random
    followers as followers, at the same moment), wait for a new leader,
    restart the killed ones and wait until every member is ready again.
    after_kill(), if given, runs once each new leader is elected (before
    the killed ones restart). Returns the leader ids killed, in order. A
    worker of workers that raised fails the run at once."""
    def grown(base):
        cluster.check_crashes()
        for w in workers:
            w.check()
        return progress() >= base + need

    killed = []
    for _ in range(kills):
        base = progress()
        poll(lambda: grown(base), "%d more %s (have %d)" % (need, what, base), PROGRESS_DEADLINE_S)
        old, new, also = cluster.kill_leader(followers)
        assert new.id != old.id
        killed.append(old.id)
        if after_kill is not None:
            after_kill()
        for m in [old] + also:
            m.restart()
        cluster.wait_ready()
    base = progress()
    poll(lambda: grown(base), "%d more %s after the last restart" % (need, what), PROGRESS_DEADLINE_S)
    return killed


# ---- queues ---------------------------------------------------------------------

QUEUE = "cq"
QUEUE_LEASE_MS = 2000          # a delivery lost with a dead leader comes back after this


def q_producer(cluster, keys, per_key, rec, seed, halt):
    """Pushes "<key>:<seq>" with dedup ID "<key>:<seq>", keys round robin,
    seq 0.. per key up to per_key; a push is repeated (same ID) until it is
    acknowledged, then the key's next seq goes."""
    cc = ClusterClient(list(cluster.members.values()), rng=random.Random(seed))
    try:
        for seq in range(per_key):
            for key in keys:
                while True:
                    if halt.is_set():
                        return
                    payload = "%s:%d" % (key, seq)
                    st, r = cc.call("Q.PUSH", QUEUE, key, payload, "ID", payload, deadline_s=WRITE_DEADLINE_S)
                    if st == "ok" and isinstance(r, int):
                        rec.add("push", {"key": key, "seq": seq, "status": "ok", "id": r})
                        break
                    if st == "err":
                        raise AssertionError("Q.PUSH %s -> %r" % (payload, r))
    finally:
        cc.close()


def q_consumer(cluster, rec, seed, halt):
    """Q.PULL COUNT 1 BLOCK LEASE, then Q.ACK with the token; neither is
    repeated when its connection dies (a pull in doubt comes back after the
    lease; an ack in doubt too, if it did not apply)."""
    cc = ClusterClient(list(cluster.members.values()), rng=random.Random(seed))
    try:
        while not halt.is_set():
            st, r = cc.call("Q.PULL", QUEUE, "COUNT", 1, "BLOCK", 200, "LEASE", QUEUE_LEASE_MS,
                            retry=False, deadline_s=WRITE_DEADLINE_S)
            if st == "err":
                raise AssertionError("Q.PULL -> %r" % r)
            if st != "ok" or not r:
                continue
            for msg in r:
                mid, key, payload, _attempt, token = msg
                key = key.decode()
                seq = int(payload.decode().rsplit(":", 1)[1])
                rec.add("delivery", {"key": key, "seq": seq, "id": mid, "token": token, "t": time.monotonic()})
                st, a = cc.call("Q.ACK", QUEUE, mid, token, retry=False, deadline_s=WRITE_DEADLINE_S)
                if st == "err":
                    raise AssertionError("Q.ACK -> %r" % a)
                rec.add("ack", {"id": mid, "token": token, "status": st, "reply": a})
    finally:
        cc.close()


def q_len(cluster):
    cc = ClusterClient(list(cluster.members.values()))
    try:
        st, r = cc.call("Q.LEN", QUEUE)
        return r if st == "ok" else None
    finally:
        cc.close()


# ---- locks ----------------------------------------------------------------------

LOCK = "clk"
LOCK_TTL_MS = 1500             # a holder lost with a dead leader frees the lock after this


def lock_client(cluster, rec, seed, halt):
    """LOCK.ACQUIRE WAIT, a fenced KV.PUT, LOCK.RELEASE; records grants."""
    cc = ClusterClient(list(cluster.members.values()), rng=random.Random(seed))
    try:
        while not halt.is_set():
            t0 = time.monotonic()
            st, tok = cc.call("LOCK.ACQUIRE", LOCK, LOCK_TTL_MS, "WAIT", 1000, retry=False,
                              deadline_s=WRITE_DEADLINE_S)
            t1 = time.monotonic()
            if st == "err":
                raise AssertionError("LOCK.ACQUIRE -> %r" % tok)
            if st != "ok" or tok is None:
                continue
            rec.add("grant", {"token": tok, "t0": t0, "t1": t1})
            st, r = cc.call("KV.PUT", "fenced", "t%d" % tok, "FENCE", LOCK, tok, retry=False)
            if st == "err" and not (isinstance(r, RespError) and r.code == "NOTHOLDER"):
                raise AssertionError("fenced KV.PUT -> %r" % r)
            cc.call("LOCK.RELEASE", LOCK, tok, retry=False)
    finally:
        cc.close()


ELECTION = "cel"


def elect_client(cluster, rec, seed, halt):
    """ELECT.CAMPAIGN WAIT, then ELECT.RESIGN; records each term won (as a
    grant of kind "term": terms are fencing tokens too)."""
    cc = ClusterClient(list(cluster.members.values()), rng=random.Random(seed))
    try:
        while not halt.is_set():
            t0 = time.monotonic()
            st, term = cc.call("ELECT.CAMPAIGN", ELECTION, "c%d" % seed, LOCK_TTL_MS, "WAIT", 1000, retry=False,
                               deadline_s=WRITE_DEADLINE_S)
            t1 = time.monotonic()
            if st == "err":
                raise AssertionError("ELECT.CAMPAIGN -> %r" % term)
            if st != "ok" or term is None:
                continue
            rec.add("term", {"token": term, "t0": t0, "t1": t1})
            cc.call("ELECT.RESIGN", ELECTION, term, retry=False)
    finally:
        cc.close()


# ---- a watch that follows the leader ----------------------------------------------

WATCH_READ_TIMEOUT_S = 1.0     # an idle (or half-read) watch connection is dropped and resumed after this


def watch_event(e):
    """A KV.WATCH push (["watch", id, rev, kind, key, value, ...]) as the
    dict watch_violations() reads."""
    return {"rev": e[2], "kind": e[3].decode(), "key": e[4].decode(),
            "value": e[5].decode() if e[5] is not None else None}


def kv_watcher(cluster, prefix, rec, halt):
    """KV.WATCH prefix PREFIX FROM <last revision received> on the leader
    (following -NOTLEADER); when the connection dies (the leader was
    killed), times out, or the watch is cancelled, it resumes FROM the last
    revision on whichever member leads. Records each event ("event") and
    each (re)start ("watch_start")."""
    ports = [m.port for m in cluster.members.values()]
    rng = random.Random(7)
    port = ports[0]
    last = 0
    while not halt.is_set():
        try:
            c = cluster.connect(port, timeout=WATCH_READ_TIMEOUT_S)
        except OSError:
            port = rng.choice(ports)
            halt.wait(NOLEADER_PAUSE_S)   # that member is down: try another after a pause
            continue
        try:
            c.send("KV.WATCH", prefix, "PREFIX", "FROM", last)
            r = c.read()
            if isinstance(r, RespError):
                where = r.msg.split(" ", 1)[1] if r.code == "NOTLEADER" and " " in r.msg else "?"
                if r.code != "NOTLEADER":
                    raise AssertionError("KV.WATCH FROM %d -> %r" % (last, r))
                port = int(where.rsplit(":", 1)[1]) if ":" in where else rng.choice(ports)
                halt.wait(NOLEADER_PAUSE_S)
                continue
            rec.add("watch_start", {"from": last, "port": port, "t": time.monotonic()})
            while not halt.is_set():
                e = c.read()
                if not isinstance(e, list) or not e:
                    continue
                if e[0] == b"watch":
                    ev = watch_event(e)
                    rec.add("event", ev)
                    last = ev["rev"]
                elif e[0] == b"watch-cancelled":
                    break
        except (OSError, Closed):
            pass   # killed, closed by a deposed leader, or a read timed out: resume FROM last
        finally:
            c.close()


def watch_last(rec):
    evs = rec.get("event")
    return evs[-1]["rev"] if evs else 0
