#!/usr/bin/python3
"""Queue crash test: producers and (misbehaving) consumers of a keyed work
queue against a real ordod that is SIGKILLed at random moments and
restarted on the same data directory, many times. The clients reconnect and
carry on; a checker then asserts the queue's promises across all restarts
from what the clients were told (tests/crash/README.md, "Queues").

Producers push, per key, payloads "<key>:<seq>" with seq increasing (unique
over the run). Consumers `Q.PULL ... BLOCK LEASE` and mostly `Q.ACK` with
`RESULT r<token>`; some nack (now or with DELAY), stall past their lease
then ack, or walk away without acking; every 97th message of a key is
poison (always nacked). Messages that exhaust MAXATTEMPTS go to a
dead-letter queue whose consumer acks them the same way. The results
are kept for an hour (RESULTTTL), so `Q.RESULT` tells afterwards which
delivery's ack the server applied: an ack whose reply was lost in a crash is
resolved exactly, not guessed.

The checker (check(); all counts must be 0):
  lost:             a push that returned an id (or a message that was seen
                    delivered) is, after the final drain, neither acked
                    (Q.RESULT r<token> of one of its deliveries) nor
                    dead-lettered and delivered from the dead-letter queue;
  order_violations: per key, in token (= revision) order, deliveries go
                    back in push order; the applied acks (tokens from
                    Q.RESULT) or dead-lettering of a key's messages are not
                    in push order; or of two acks that returned 1 the later
                    message's reply came before the earlier's was sent;
  overlaps:         a delivery of a key arrived before the previous delivery
                    of that key (by token) could have ended: before its
                    ack/nack (that returned 1, or was in doubt) was sent, or
                    before its lease could have run out;
  acked_redelivered: a message delivered again after an ack of it returned
                    1 (pull sent after the ack's reply, or a token above the
                    applied ack's), acked twice, dead-lettered after an ack
                    returned 1, or whose applied ack is not the one that
                    returned 1;
  stuck:            Q.LEN of the queue or its dead-letter queue is not
                    [0, 0, 0] once the drain after the last restart ends;
  phantom:          a delivered payload that was never pushed, an id that is
                    not the one its push returned, a result naming a token
                    never delivered;
  regressions:      KV.REV after a restart is below a revision (id, token)
                    a client was told before the kill.

Usage: queue_crash_test.py [--kills N] [--seconds S] [--producers P]
         [--keys K] [--consumers C] [--lease MS] [--seed X] [--keep] [-- ordod options]
"""
import random
import sys
import threading
import time

import crashlib
from crashlib import Closed, RespError, client
from ordoproc import poll

Q, DLQ = "work", "work-dl"
MAXATTEMPTS = 4
POISON_EVERY = 97       # a key's every 97th message is nacked until it is dead-lettered
RESULTTTL_MS = 3600 * 1000
TOL_S = 0.015           # clock rounding between the client's and the server's clock
DRAIN_DEADLINE_S = 90.0
OUTSTANDING_MAX = 300   # producers pause while the queue holds more messages than this


# ---- what the clients saw ------------------------------------------------------

class Msg:
    """One push (work queue), by its unique payload."""
    __slots__ = ("key", "seq", "payload", "state", "id")

    def __init__(self, key, seq, payload):
        self.key, self.seq, self.payload = key, seq, payload
        self.state = "doubt"   # "doubt" (sent, no reply) | "acked" (id returned)
        self.id = None


class Delivery:
    """One message of one Q.PULL reply, and what its consumer did with it.
    outcome: None (no call: walked away or the connection died first),
    1 / 0 (the reply), "doubt" (the call was sent, no reply)."""
    __slots__ = ("q", "id", "key", "payload", "token", "attempt", "t0", "t1", "verb", "outcome", "a0", "a1", "gen",
                 "retried")

    def __init__(self, q, id_, key, payload, token, attempt, t0, t1):
        self.q, self.id, self.key, self.payload = q, id_, key, payload
        self.token, self.attempt, self.t0, self.t1 = token, attempt, t0, t1
        self.verb = self.outcome = self.a0 = self.a1 = None
        self.gen = 0   # which server process the ack/nack was sent to
        self.retried = None  # the reply to a retry of an ack in doubt, after reconnecting


class History:
    def __init__(self, lease_s):
        self.lock = threading.Lock()
        self.lease_s = lease_s
        self.msgs = {}          # payload -> Msg
        self.deliveries = []    # Delivery, both queues
        self.max_rev = 0        # highest id/token any client was told
        self.killed_at = {}     # server generation -> when it got SIGKILL (client clock)
        self.problems_seen = []  # unexpected replies (an error, not a count)

    def see_rev(self, r):
        if r > self.max_rev:
            self.max_rev = r


class Stats:
    KINDS = ("lost", "order_violations", "overlaps", "acked_redelivered", "stuck", "phantom", "regressions")

    def __init__(self):
        for k in self.KINDS:
            setattr(self, k, 0)
        self.problems = []

    def note(self, kind, msg):
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.problems) < 50:
            self.problems.append("%s: %s" % (kind, msg))

    def bad(self):
        return any(getattr(self, k) for k in self.KINDS)


def parse_payload(p):
    key, seq = p.decode().rsplit(":", 1)
    return key, int(seq)


def end_lower(d, lease_s, killed_at):
    """The earliest (client clock) delivery d can have ended: a call that
    returned 1 ended it, no sooner than it was sent; otherwise only its
    lease could (a stale ack, a consumer that walked away, a call sent after
    its server was killed), or either (a call in doubt)."""
    lease_end = d.t0 + lease_s - TOL_S
    if d.outcome == 1:
        return d.a0
    if d.outcome == "doubt" and d.a0 < killed_at.get(d.gen, float("inf")):
        return min(d.a0, lease_end)
    return lease_end


def check(h, results, qlen, stats):
    """h: History; results: {(queue, id): bytes | "DEADLETTER" | None} for
    every id seen; qlen: {queue: Q.LEN reply} after the drain."""
    by_id = {Q: {}, DLQ: {}}   # id -> [Delivery]
    for d in h.deliveries:
        by_id[d.q].setdefault(d.id, []).append(d)

    # phantoms: every delivered payload was pushed, with the id its push returned
    dl_of = {}   # work payload -> dead-letter id(s) seen delivered
    for d in h.deliveries:
        m = h.msgs.get(d.payload)
        if m is None:
            stats.note("phantom", "%s delivered %r, never pushed" % (d.q, d.payload))
            continue
        if d.key != m.key.encode():
            stats.note("phantom", "%s delivered %r under key %r" % (d.q, d.payload, d.key))
        if d.q == Q and m.id is not None and d.id != m.id:
            stats.note("phantom", "%r delivered as id %d, its push returned %d" % (d.payload, d.id, m.id))
        if d.q == DLQ:
            dl_of.setdefault(d.payload, set()).add(d.id)

    # per queue: what happened to each id
    applied = {}   # (queue, id) -> token of the applied ack, or ("dl", dl id)
    for q in (Q, DLQ):
        for mid, ds in by_id[q].items():
            res = results.get((q, mid))
            ones = [d for d in ds if d.verb == "ACK" and d.outcome == 1]
            if len(ones) > 1:
                stats.note("acked_redelivered", "%s id %d: %d acks returned 1" % (q, mid, len(ones)))
            if isinstance(res, bytes):
                tok = int(res[1:])
                if not any(d.token == tok and d.verb == "ACK" and d.outcome in (1, "doubt") for d in ds):
                    stats.note("phantom", "%s id %d: result %r names no ack we sent" % (q, mid, res))
                if ones and ones[0].token != tok:
                    stats.note("acked_redelivered", "%s id %d: ack of token %d returned 1, applied was %d"
                               % (q, mid, ones[0].token, tok))
                applied[(q, mid)] = tok
                for d in ds:
                    if d.token > tok:
                        stats.note("acked_redelivered", "%s id %d delivered at token %d after its ack of %d"
                                   % (q, mid, d.token, tok))
            elif res == "DEADLETTER":
                if q == DLQ:
                    stats.note("phantom", "a dead letter was dead-lettered (MAXATTEMPTS 0 there)")
                if ones:
                    stats.note("acked_redelivered", "%s id %d dead-lettered after an ack returned 1" % (q, mid))
                dls = dl_of.get(ds[0].payload, set())
                if len(dls) > 1:
                    stats.note("phantom", "%s id %d dead-lettered, seen in %s as %r" % (q, mid, DLQ, sorted(dls)))
                elif dls:  # (never seen in the dead-letter queue: counted as lost below)
                    dl = min(dls)
                    applied[(q, mid)] = ("dl", dl)
                    for d in ds:
                        if d.token > dl:
                            stats.note("acked_redelivered", "%s id %d delivered at %d, dead-lettered at %d"
                                       % (q, mid, d.token, dl))
            # acked (reply 1) and delivered again, by the client's clock
            for a in ones:
                for d in ds:
                    if d.t0 > a.a1:
                        stats.note("acked_redelivered", "%s id %d pulled again at +%.3fs after its ack returned 1"
                                   % (q, mid, d.t0 - a.a1))

    # lost: every acknowledged push, and every message seen to exist, is done
    for m in h.msgs.values():
        if m.state != "acked":
            continue
        if m.id not in by_id[Q]:
            stats.note("lost", "push %r (id %d) never delivered" % (m.payload, m.id))
        elif (Q, m.id) not in applied:
            stats.note("lost", "push %r (id %d) delivered but never acked, nor dead-lettered and seen in %s "
                       "(result %r)"
                       % (m.payload, m.id, DLQ, results.get((Q, m.id))))
    for mid, ds in by_id[Q].items():
        if h.msgs.get(ds[0].payload) is not None and h.msgs[ds[0].payload].state == "doubt" \
                and (Q, mid) not in applied:
            stats.note("lost", "in-doubt push %r (id %d) was delivered, then never done" % (ds[0].payload, mid))
    for mid, ds in by_id[DLQ].items():
        if (DLQ, mid) not in applied:
            stats.note("lost", "dead letter %r (id %d) never acked (result %r)"
                       % (ds[0].payload, mid, results.get((DLQ, mid))))

    # per key: order and overlap
    for q in (Q, DLQ):
        keys = {}
        for d in h.deliveries:
            if d.q == q and d.payload in h.msgs:
                keys.setdefault(d.key, []).append(d)
        for key, ds in keys.items():
            ds.sort(key=lambda d: d.token)
            seqs = [h.msgs[d.payload].seq for d in ds]
            for i in range(1, len(ds)):
                if seqs[i] < seqs[i - 1]:
                    stats.note("order_violations", "%s key %s: token %d delivered seq %d after token %d seq %d"
                               % (q, key.decode(), ds[i].token, seqs[i], ds[i - 1].token, seqs[i - 1]))
            # overlap: a later delivery (by token) received before an earlier could have ended
            suffix_min = [None] * len(ds)
            best = None
            for i in range(len(ds) - 1, -1, -1):
                suffix_min[i] = best
                best = ds[i] if best is None or ds[i].t1 < best.t1 else best
            for i, d in enumerate(ds):
                nxt = suffix_min[i]
                if nxt is not None and nxt.t1 < end_lower(d, h.lease_s, h.killed_at):
                    stats.note("overlaps", "%s key %s: token %d (id %d, %s=%r) still in flight when token %d "
                               "(id %d) arrived %.3fs after the first was pulled"
                               % (q, key.decode(), d.token, d.id, d.verb, d.outcome, nxt.token, nxt.id,
                                  nxt.t1 - d.t0))
            # applied acks / dead-letterings in push order
            done = {}
            for d in ds:
                a = applied.get((q, d.id))
                if a is not None:
                    done[h.msgs[d.payload].seq] = a[1] if isinstance(a, tuple) else a
            order = [done[s] for s in sorted(done)]
            for i in range(1, len(order)):
                if order[i] < order[i - 1]:
                    stats.note("order_violations", "%s key %s: message done at %d after a later one at %d"
                               % (q, key.decode(), order[i - 1], order[i]))
            # acks that returned 1, by the client's clock
            ones = sorted((d for d in ds if d.verb == "ACK" and d.outcome == 1), key=lambda d: h.msgs[d.payload].seq)
            for i in range(1, len(ones)):
                if ones[i].a1 < ones[i - 1].a0:
                    stats.note("order_violations", "%s key %s: seq %d acked before seq %d"
                               % (q, key.decode(), h.msgs[ones[i].payload].seq, h.msgs[ones[i - 1].payload].seq))
    for q in (Q, DLQ):
        if qlen.get(q) != [0, 0, 0]:
            stats.note("stuck", "%s: Q.LEN %r after the drain" % (q, qlen.get(q)))


# ---- the clients ------------------------------------------------------------------

class Server:
    """The current ordod's port, for clients that reconnect."""

    def __init__(self):
        self.port = None
        self.gen = 0
        self.up = threading.Event()


def connect(srv, stop):
    while not stop.is_set():
        if srv.up.wait(0.05):
            try:
                gen = srv.gen
                c = client(srv.port)
                c.gen = gen
                return c
            except OSError:
                pass
            time.sleep(0.01)  # the server is going down or coming up: retry
    return None


def producer(tid, nkeys, srv, h, rng, stop, rate):
    seqs = [0] * nkeys
    n = 0
    while not stop.is_set():
        c = connect(srv, stop)
        if c is None:
            return
        try:
            while not stop.is_set():
                n += 1
                if n % 20 == 0:
                    while not stop.is_set():
                        ln = c.call("Q.LEN", Q)
                        if not isinstance(ln, list):
                            raise Closed("unexpected reply %r" % (ln,))
                        if sum(ln) <= OUTSTANDING_MAX:
                            break
                        time.sleep(0.02)  # consumers are behind: let them catch up
                time.sleep(rng.uniform(0, 2.0 / rate))  # the pace: keeps the history checkable
                k = rng.randrange(nkeys)
                key = "p%d-k%d" % (tid, k)
                seqs[k] += 1
                payload = b"%s:%d" % (key.encode(), seqs[k])
                m = Msg(key, seqs[k], payload)
                with h.lock:
                    h.msgs[payload] = m   # sent, from here on, until a reply says otherwise
                rep = c.call("Q.PUSH", Q, key, payload)
                if not isinstance(rep, int):
                    with h.lock:
                        h.problems_seen.append("Q.PUSH: %r" % (rep,))
                    raise Closed("unexpected reply")
                with h.lock:
                    m.state, m.id = "acked", rep
                    h.see_rev(rep)
        except (Closed, OSError, ValueError):
            pass  # the server died: the outstanding push stays in doubt
        finally:
            c.close()


def retry_ack(c, d):
    """Send an ack whose reply was lost again, on a new connection. 1: the
    first did not apply and this one did (it ended the delivery); 0: the
    first applied, or the lease ran out. A second loss leaves it in doubt."""
    a0 = time.monotonic()
    rep = c.call("Q.ACK", d.q, d.id, d.token, "RESULT", b"r%d" % d.token)
    a1 = time.monotonic()
    if rep not in (0, 1):
        raise Closed("unexpected reply %r" % (rep,))
    d.retried = rep
    if rep == 1:
        d.outcome, d.a0, d.a1 = 1, a0, a1


def consumer(q, srv, h, rng, stop, drain, behave):
    lease_ms = int(h.lease_s * 1000)
    retry = None
    while not stop.is_set():
        c = connect(srv, stop)
        if c is None:
            return
        cur = None
        try:
            if retry is not None:
                d, retry = retry, None
                retry_ack(c, d)
            while not stop.is_set():
                t0 = time.monotonic()
                ms = c.call("Q.PULL", q, "COUNT", rng.randint(1, 3), "BLOCK", 200, "LEASE", lease_ms)
                t1 = time.monotonic()
                if not isinstance(ms, list):
                    with h.lock:
                        h.problems_seen.append("Q.PULL: %r" % (ms,))
                    raise Closed("unexpected reply")
                ds = [Delivery(q, m[0], m[1], m[2], m[4], m[3], t0, t1) for m in ms]
                with h.lock:
                    h.deliveries.extend(ds)
                    for d in ds:
                        h.see_rev(d.token)
                walked = False
                for d in ds:
                    roll = rng.random() if behave and not drain.is_set() else 1.0
                    if roll < 1.0 and int(d.payload.rsplit(b":", 1)[1]) % POISON_EVERY == 0:
                        roll = 0.04  # poison: always nacked, dead-lettered after MAXATTEMPTS
                    if walked or roll < 0.02:  # walk away: close without acking
                        walked = True
                        continue
                    if roll < 0.03:  # stall past the lease, then ack
                        time.sleep(h.lease_s * 1.5)  # simulated slow work
                    if roll < 0.03 or roll >= 0.07:
                        d.verb, args = "ACK", ("Q.ACK", q, d.id, d.token, "RESULT", b"r%d" % d.token)
                    elif roll < 0.05:
                        d.verb, args = "NACK", ("Q.NACK", q, d.id, d.token)
                    else:
                        d.verb, args = "NACK", ("Q.NACK", q, d.id, d.token, "DELAY", 50)
                    d.outcome, d.gen = "doubt", c.gen
                    d.a0 = time.monotonic()
                    cur = d
                    rep = c.call(*args)
                    cur = None
                    d.a1 = time.monotonic()
                    if rep not in (0, 1):
                        with h.lock:
                            h.problems_seen.append("%s: %r" % (d.verb, rep))
                        raise Closed("unexpected reply")
                    d.outcome = rep
                if walked:
                    c.close()
                    c = connect(srv, stop)
                    if c is None:
                        return
        except (Closed, OSError, ValueError):
            # the server died: a call outstanding stays "doubt"; half the
            # acks in doubt are sent again once reconnected
            if cur is not None and cur.verb == "ACK" and rng.random() < 0.5:
                retry = cur
        finally:
            if c is not None:
                c.close()


# ---- the run ---------------------------------------------------------------------

def configure(port, lease_ms):
    c = client(port)
    for args in (("Q.CONFIG", Q, "LEASE", lease_ms, "MAXATTEMPTS", MAXATTEMPTS, "DEADLETTER", DLQ,
                  "RESULTTTL", RESULTTTL_MS),
                 ("Q.CONFIG", DLQ, "LEASE", lease_ms, "MAXATTEMPTS", 0, "RESULTTTL", RESULTTTL_MS)):
        rep = c.call(*args)
        if rep != "OK":
            raise SystemExit("%r: %r" % (args, rep))
    c.close()


def fetch_results(port, h):
    c = client(port)
    out = {}
    ids = {(d.q, d.id) for d in h.deliveries} | {(Q, m.id) for m in h.msgs.values() if m.id is not None}
    for q, mid in sorted(ids):
        r = c.call("Q.RESULT", q, mid)
        if isinstance(r, RespError):
            r = "DEADLETTER" if r.msg.startswith("DEADLETTER") else r
        out[(q, mid)] = r
    c.close()
    return out


def all_done(port, h):
    """Drained: both queues empty and every acked push's fate settled."""
    c = client(port)
    try:
        if c.call("Q.LEN", Q) != [0, 0, 0] or c.call("Q.LEN", DLQ) != [0, 0, 0]:
            return False
    finally:
        c.close()
    return True


def run(args):
    rng = random.Random(args.seed)
    base, ordod = crashlib.new_run("ordo-qcrash-", args)
    h = History(args.lease / 1000.0)
    stats = Stats()
    srv = Server()
    stop, drain = threading.Event(), threading.Event()
    starts = []
    round_s = 2.0 * args.seconds / max(1, args.kills)
    t_begin = time.monotonic()

    starts.append(ordod.start())
    configure(ordod.port, args.lease)
    srv.port = ordod.port
    srv.up.set()
    prods = [threading.Thread(target=producer, args=(t, args.keys, srv, h, random.Random(rng.random()), drain,
                                                     args.rate / max(1, args.producers)))
             for t in range(args.producers)]
    cons = [threading.Thread(target=consumer, args=(Q, srv, h, random.Random(rng.random()), stop, drain, True))
            for _ in range(args.consumers)]
    cons.append(threading.Thread(target=consumer, args=(DLQ, srv, h, random.Random(rng.random()), stop, drain,
                                                        False)))
    for t in prods + cons:
        t.start()
    kill_no = 0
    try:
        for kill_no in range(1, args.kills + 1):
            time.sleep(rng.uniform(0.02, round_s))  # the random kill moment: the experiment itself
            srv.up.clear()
            ordod.kill()  # returns once the process is gone
            # Stamped after the death, not before the signal: this thread
            # can lose the GIL between the two, a consumer's ack can reach
            # the live server meanwhile and be synced, and an ack sent after
            # a stamp taken too early would count as unable to end anything
            # (a false overlap). Any ack sent before this moment may have
            # been applied; none sent after it was.
            h.killed_at[srv.gen] = time.monotonic()
            time.sleep(0.01)  # let clients read what the dead server had already sent
            if rng.random() < 0.3:  # stay down past some leases: they run out while no server runs
                time.sleep(rng.uniform(0, 2 * h.lease_s))
            with h.lock:
                told = h.max_rev
            starts.append(ordod.start())
            c = client(ordod.port)
            cur = c.call("KV.REV")[0]
            c.close()
            if cur < told:
                stats.note("regressions", "after kill %d: revision %d < %d told to a client" % (kill_no, cur, told))
            srv.port = ordod.port
            srv.gen += 1
            srv.up.set()
            if args.verbose:
                print("kill %d: revision %d, %d pushes, %d deliveries"
                      % (kill_no, cur, len(h.msgs), len(h.deliveries)), flush=True)
        # the drain: no more pushes, consumers ack everything
        t_drain = time.monotonic()
        drain.set()
        for t in prods:
            t.join(30)
        try:
            poll(lambda: all_done(ordod.port, h), "the consumers to drain both queues", DRAIN_DEADLINE_S,
                 every_s=0.05)
            drained = True
        except AssertionError:   # reported below: stuck
            drained = False
        drain_s = time.monotonic() - t_drain
    finally:
        stop.set()
        for t in prods + cons:
            t.join(30)
    c = client(ordod.port)
    qlen = {Q: c.call("Q.LEN", Q), DLQ: c.call("Q.LEN", DLQ)}
    info = c.call("Q.INFO", Q)
    info = {info[i].decode(): info[i + 1] for i in range(0, len(info), 2)} if isinstance(info, list) else {}
    c.close()
    results = fetch_results(ordod.port, h)
    check(h, results, qlen, stats)
    rc = ordod.stop()
    elapsed = time.monotonic() - t_begin

    pushed = sum(1 for m in h.msgs.values() if m.state == "acked")
    doubt = [m for m in h.msgs.values() if m.state == "doubt"]
    delivered_payloads = {d.payload for d in h.deliveries}
    doubt_applied = sum(1 for m in doubt if m.payload in delivered_payloads)
    acks1 = sum(1 for d in h.deliveries if d.verb == "ACK" and d.outcome == 1)
    ack_doubt = [d for d in h.deliveries if d.verb == "ACK" and (d.outcome == "doubt" or d.retried is not None)]
    ack_doubt_applied = sum(1 for d in ack_doubt if results.get((d.q, d.id)) == b"r%d" % d.token)
    retried = [d for d in h.deliveries if d.retried is not None]
    ack_doubt_dead = sum(1 for d in ack_doubt if d.a0 >= h.killed_at.get(d.gen, float("inf")))
    stale = sum(1 for d in h.deliveries if d.outcome == 0)
    nacks = sum(1 for d in h.deliveries if d.verb == "NACK" and d.outcome == 1)
    dead = sum(1 for v in results.items() if v[0][0] == Q and v[1] == "DEADLETTER")
    print("queue crash test: kills=%d pushes_acked=%d push_in_doubt=%d (applied %d) deliveries=%d acks=%d "
          "ack_in_doubt=%d (applied %d, sent after the kill %d, retried %d: %d got 1) stale_acks=%d nacks=%d redeliveries=%d dead_lettered=%d "
          "lost=%d order_violations=%d overlaps=%d acked_redelivered=%d stuck=%d phantom=%d regressions=%d "
          "drain=%.1fs elapsed=%.1fs %s clean_exit=%s"
          % (kill_no, pushed, len(doubt), doubt_applied, len(h.deliveries), acks1, len(ack_doubt),
             ack_doubt_applied, ack_doubt_dead, len(retried), sum(1 for d in retried if d.retried == 1), stale, nacks, sum(1 for d in h.deliveries if d.attempt > 1), dead, stats.lost, stats.order_violations,
             stats.overlaps, stats.acked_redelivered, stats.stuck, stats.phantom, stats.regressions, drain_s,
             elapsed, crashlib.restart_summary(starts), rc == 0))
    bad = stats.bad() or h.problems_seen or rc != 0 or pushed == 0 or acks1 == 0 or not drained
    return crashlib.finish(base, bad, stats.problems + ["unexpected reply: " + p for p in h.problems_seen[:20]],
                           args.keep)


def main():
    def own(ap):
        ap.add_argument("--producers", type=int, default=3)
        ap.add_argument("--keys", type=int, default=6, help="keys per producer")
        ap.add_argument("--consumers", type=int, default=6)
        ap.add_argument("--rate", type=float, default=2000.0, help="pushes per second, all producers")
        ap.add_argument("--lease", type=int, default=300, help="lease of a delivery, ms")

    args = crashlib.parse_args(__doc__, own)
    print("queue crash test: seed %d, %d kills over ~%.0fs, %d producers x %d keys, %d consumers, lease %d ms, %s"
          % (args.seed, args.kills, args.seconds, args.producers, args.keys, args.consumers, args.lease,
             args.ordod), flush=True)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
