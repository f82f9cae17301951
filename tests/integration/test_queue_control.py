"""Queue controls against a real ordod: retry policies (BACKOFF, MAXAGE).

Each feature is checked by what a client sees over the wire, and the
per-key order promise by a checker that counts violations over a run with
consumers that nack at random (orderchecker below): it must count 0.
Restarts use SIGKILL, so what survives is what the log and the snapshot
hold.

Synchronisation is by the protocol (BLOCK replies) or by polling server
state with a deadline (ordoproc.poll).
"""
import random
import re
import signal
import threading
import time

from ordoproc import poll
from resp import Conn, RespError

DEADLINE_S = 20.0


def fields(r):
    assert not isinstance(r, RespError), r
    return {r[i].decode(): r[i + 1] for i in range(0, len(r), 2)}


def keyinfo(c, q, k):
    return fields(c.call("Q.KEYINFO", q, k))


def qinfo(c, q):
    return fields(c.call("Q.INFO", q))


def now_ms(c):
    sec, usec = c.call("TIME")
    return int(sec) * 1000 + int(usec) // 1000


def crash_restart(srv):
    srv.kill()
    srv.start(srv.port)


class OrderChecker:
    """Counts violations of the per-key promise with N = 1 from what the
    consumers saw: a delivery of a key while another message of that key
    is held by a consumer (two in flight), and a key's messages finishing
    out of their push order. Producers push payloads "<key>:<seq>" with
    seq increasing per key; consumers report each delivery and each
    finish (ack) in the order the server answered them, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.inflight = {}     # key -> msg id held
        self.last_done = {}    # key -> last seq acked
        self.violations = []

    def delivered(self, key, msg_id):
        with self.lock:
            if key in self.inflight and self.inflight[key] != msg_id:
                self.violations.append("key %r: %d delivered while %d in flight" % (key, msg_id, self.inflight[key]))
            self.inflight[key] = msg_id

    def released(self, key, msg_id):
        with self.lock:
            if self.inflight.get(key) == msg_id:
                del self.inflight[key]

    def acked(self, key, seq):
        with self.lock:
            if seq <= self.last_done.get(key, -1):
                self.violations.append("key %r: seq %d done after %d" % (key, seq, self.last_done[key]))
            self.last_done[key] = seq


def run_consumers(port, q, checker, total, nack_p, n=3, lease_ms=30000, on_message=None, until_empty=False):
    """n consumers pull one message at a time and ack it, or nack it
    (without DELAY: the queue's policy decides) with probability nack_p,
    until `total` messages are acked (or, until_empty, until the queue has
    nothing waiting or in flight). The checker hears of each delivery
    before the ack or nack is sent and of its release after the answer, so
    a second delivery of a key it sees is one the server made while the
    first was still held."""
    done = [0]
    lock = threading.Lock()
    errors = []

    def work(seed):
        rnd = random.Random(seed)
        with Conn(port, timeout=40.0) as c:
            while True:
                with lock:
                    if done[0] >= total:
                        return
                m = c.call("Q.PULL", q, "BLOCK", 200, "LEASE", lease_ms)
                if isinstance(m, RespError):
                    errors.append(m)
                    return
                if not m:
                    if until_empty and c.call("Q.LEN", q)[:2] == [0, 0]:
                        return
                    continue
                mid, key, payload, _attempt, tok = m[0]
                checker.delivered(key, mid)
                if on_message is not None and on_message(c, m[0]):
                    continue
                if rnd.random() < nack_p:
                    checker.released(key, mid)
                    c.call("Q.NACK", q, mid, tok)
                    continue
                seq = int(payload.split(b":")[1])
                # Release before acking: once the ack is answered another
                # consumer may get the key's next message at once.
                checker.released(key, mid)
                checker.acked(key, seq)
                if c.call("Q.ACK", q, mid, tok) == 1:
                    with lock:
                        done[0] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return done[0]


def push_sequences(c, q, keys, per_key):
    for seq in range(per_key):
        for k in keys:
            c.call("Q.PUSH", q, k, "%s:%d" % (k, seq))


# ---- retry policies --------------------------------------------------------------------


def test_config_rejects_bad_policy(server):
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "BACKOFF", "sometimes").code == "ERR"
        assert c.call("Q.CONFIG", "q", "BACKOFFBASE", 0).code == "ERR"
        r = c.call("Q.CONFIG", "q", "BACKOFF", "exponential", "BACKOFFBASE", 500, "BACKOFFCAP", 100)
        assert isinstance(r, RespError) and "BACKOFFCAP" in str(r), r
        assert c.call("Q.CONFIG", "q", "BACKOFF", "exponential", "BACKOFFBASE", 50, "BACKOFFCAP", 800,
                      "MAXAGE", 9000) == "OK"
        i = qinfo(c, "q")
        assert (i["backoff"], i["backoff_base"], i["backoff_cap"], i["maxage"]) == (b"exponential", 50, 800, 9000)


def test_fixed_backoff_holds_the_key(server):
    """A nack without DELAY under BACKOFF fixed holds the key BACKOFFBASE
    ms: KEYINFO shows when the next attempt comes, the key's next message
    waits, and the retry is never early."""
    base = 1000
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "BACKOFF", "fixed", "BACKOFFBASE", base) == "OK"
        a = c.call("Q.PUSH", "q", "k", "a")
        c.call("Q.PUSH", "q", "k", "b")
        (m,) = c.call("Q.PULL", "q")
        t0 = time.monotonic()
        assert c.call("Q.NACK", "q", a, m[4]) == 1
        ki = keyinfo(c, "q", "k")
        assert ki["state"] == b"processing" and ki["token"] == 0, ki
        assert ki["next_attempt"] == ki["deadline"] > 0
        assert base - 50 <= ki["next_attempt"] - now_ms(c) <= base
        assert c.call("Q.PULL", "q") == []   # a is held, b waits behind it
        (m2,) = c.call("Q.PULL", "q", "BLOCK", 10000)
        assert time.monotonic() - t0 >= base / 1000.0
        assert (m2[0], m2[2], m2[3]) == (a, b"a", 2)


def test_exponential_backoff_draws_full_jitter(server):
    """Exponential with full jitter: each retry's delay is drawn in
    [0, min(cap, base * 2^(attempt-1))], by the writer, and the draws
    differ."""
    base, cap = 4000, 6000
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "BACKOFF", "exponential", "BACKOFFBASE", base, "BACKOFFCAP", cap) == "OK"
        keys = ["k%d" % i for i in range(24)]
        for k in keys:
            c.call("Q.PUSH", "q", k, "x")
        msgs = c.call("Q.PULL", "q", "COUNT", 100)
        assert len(msgs) == len(keys)
        delays = []
        for m in msgs:
            t = now_ms(c)
            assert c.call("Q.NACK", "q", m[0], m[4]) == 1
            ki = keyinfo(c, "q", m[1])
            d = ki["next_attempt"] - t
            assert -1 <= d <= base + 50, (m[1], d)
            delays.append(d)
        assert len(set(delays)) > 5, delays


def test_lease_out_follows_the_policy(server):
    """A lease that runs out under a policy comes back as a nack would: the
    key is held for the backoff, not redelivered at once."""
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "BACKOFF", "fixed", "BACKOFFBASE", 60000) == "OK"
        c.call("Q.PUSH", "q", "k", "a")
        (m,) = c.call("Q.PULL", "q", "LEASE", 50)
        poll(lambda: keyinfo(c, "q", "k")["token"] == 0, "the lease to run out into a backoff", DEADLINE_S)
        ki = keyinfo(c, "q", "k")
        assert ki["next_attempt"] - now_ms(c) > 50000
        assert qinfo(c, "q")["redelivered"] == 1
        assert c.call("Q.PULL", "q") == []


def test_maxage_deadletters_and_is_never_early(server):
    """MAXAGE: a message that comes back older than MAXAGE (since its push)
    is dead-lettered instead of retried, whatever MAXATTEMPTS says, and
    never before MAXAGE has passed."""
    maxage = 300
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "MAXAGE", maxage, "MAXATTEMPTS", 0, "DEADLETTER", "dlq") == "OK"
        t0 = time.monotonic()
        a = c.call("Q.PUSH", "q", "k", "a")
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "never dead-lettered"
            (m,) = c.call("Q.PULL", "q", "BLOCK", 5000)
            assert m[0] == a
            c.call("Q.NACK", "q", a, m[4])
            r = c.call("Q.RESULT", "q", a)
            if isinstance(r, RespError):
                assert r.code == "DEADLETTER", r
                break
        assert time.monotonic() - t0 >= maxage / 1000.0
        assert c.call("Q.LEN", "dlq") == [1, 0, 0]


def test_per_key_order_across_backoff(server):
    """Checker: consumers nack a third of their deliveries under an
    exponential backoff; per key, never two in flight and acks in push
    order: 0 violations."""
    keys = ["k%d" % i for i in range(8)]
    per_key = 25
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "BACKOFF", "exponential", "BACKOFFBASE", 2, "BACKOFFCAP", 40,
                      "MAXATTEMPTS", 0) == "OK"
        push_sequences(c, "q", keys, per_key)
    chk = OrderChecker()
    assert run_consumers(server.port, "q", chk, len(keys) * per_key, nack_p=0.33) == len(keys) * per_key
    assert chk.violations == []
    assert all(chk.last_done[k.encode()] == per_key - 1 for k in keys)


def test_policy_and_held_retry_survive_kill(server):
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "BACKOFF", "fixed", "BACKOFFBASE", 3600000, "MAXAGE", 7000000) == "OK"
        a = c.call("Q.PUSH", "q", "k", "a")
        (m,) = c.call("Q.PULL", "q")
        c.call("Q.NACK", "q", a, m[4])
        before = keyinfo(c, "q", "k")
    crash_restart(server)
    with server.raw() as c:
        i = qinfo(c, "q")
        assert (i["backoff"], i["backoff_base"], i["maxage"]) == (b"fixed", 3600000, 7000000)
        ki = keyinfo(c, "q", "k")
        assert ki["next_attempt"] == before["next_attempt"] and ki["token"] == 0
        assert c.call("Q.PULL", "q") == []


def test_plain_nack_unchanged_without_policy(server):
    """A queue without a policy: a nack without DELAY is ready at once, as
    before policies existed (the writer makes the plain record)."""
    with server.raw() as c:
        a = c.call("Q.PUSH", "q", "k", "a")
        (m,) = c.call("Q.PULL", "q")
        assert c.call("Q.NACK", "q", a, m[4]) == 1
        assert keyinfo(c, "q", "k")["next_attempt"] == 0
        (m2,) = c.call("Q.PULL", "q")
        assert m2[0] == a and m2[3] == 2



# ---- pause and resume ------------------------------------------------------------------


def info_section(c, section):
    text = c.call("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def test_pause_key_keeps_order_and_others_flow(server):
    with server.raw() as c:
        a1 = c.call("Q.PUSH", "q", "a", "a1")
        b1 = c.call("Q.PUSH", "q", "b", "b1")
        a2 = c.call("Q.PUSH", "q", "a", "a2")
        assert c.call("Q.PAUSE", "q", "KEY", "a") == 1
        assert c.call("Q.PAUSE", "q", "KEY", "a") == 0          # paused so already
        assert [m[0] for m in c.call("Q.PEEK", "q", "COUNT", 10)] == [b1]
        msgs = c.call("Q.PULL", "q", "COUNT", 10)
        assert [m[0] for m in msgs] == [b1]
        ki = keyinfo(c, "q", "a")
        assert ki["paused"] == 1 and ki["paused_until"] == 0 and ki["state"] == b"waiting" and ki["waiting"] == 2
        i = qinfo(c, "q")
        assert (i["paused"], i["paused_keys"], i["ready_keys"]) == (0, 1, 0)
        assert info_section(c, "queues")["paused_keys"] == "1"
        assert c.call("Q.RESUME", "q", "KEY", "a") == 1
        assert c.call("Q.RESUME", "q", "KEY", "a") == 0
        assert keyinfo(c, "q", "a")["paused"] == 0
        (m,) = c.call("Q.PULL", "q")
        assert m[0] == a1
        c.call("Q.ACK", "q", a1, m[4])
        (m,) = c.call("Q.PULL", "q")
        assert m[0] == a2


def test_pause_for_ends_by_itself_never_early(server):
    """FOR ms: the key's pause ends by the server's timer, not before, and
    a puller blocked meanwhile gets the message then."""
    for_ms = 600
    with server.raw() as c:
        a = c.call("Q.PUSH", "q", "a", "a1")
        t0 = time.monotonic()
        assert c.call("Q.PAUSE", "q", "KEY", "a", "FOR", for_ms) == 1
        ki = keyinfo(c, "q", "a")
        assert 0 < ki["paused_until"] - now_ms(c) <= for_ms
        (m,) = c.call("Q.PULL", "q", "BLOCK", 10000)
        assert m[0] == a and time.monotonic() - t0 >= for_ms / 1000.0
        assert keyinfo(c, "q", "a")["paused"] == 0


def test_pause_until_and_queue_pause(server):
    """The queue's own pause stops every key (a parked pull waits), UNTIL
    takes ms since the epoch (a Retry-After date), and Q.RESUME serves the
    parked puller at once."""
    with server.raw() as c, server.raw() as puller:
        c.call("Q.PUSH", "q", "a", "a1")
        until = now_ms(c) + 3600000
        assert c.call("Q.PAUSE", "q", "UNTIL", until) == 1
        i = qinfo(c, "q")
        assert (i["paused"], i["paused_until"]) == (1, until)
        assert c.call("Q.PULL", "q") == [] and c.call("Q.PEEK", "q") == []
        assert info_section(c, "queues")["paused_queues"] == "1"
        puller.send("Q.PULL", "q", "BLOCK", 20000)
        poll(lambda: int(info_section(c, "clients")["blocked_pull"]) == 1, "the pull to park")
        assert c.call("Q.RESUME", "q") == 1
        (m,) = puller.read()
        assert m[2] == b"a1"
        assert c.call("Q.PAUSE", "q", "FOR", 0).code == "ERR"
        assert c.call("Q.PAUSE", "q", "UNTIL", 0).code == "ERR"
        assert c.call("Q.PAUSE", "q", "KEY").code == "ERR"
        assert c.call("Q.RESUME", "q", "FOR", 5).code == "ERR"


def test_pause_before_first_push_and_kill(server):
    """A pause set before the work arrives holds (it creates the queue),
    and pauses survive kill -9: key and queue, timed and not."""
    with server.raw() as c:
        assert c.call("Q.PAUSE", "q", "KEY", "tenant-1") == 1
        c.call("Q.PUSH", "q", "tenant-1", "x")
        c.call("Q.PUSH", "q", "tenant-2", "y")
        assert c.call("Q.PAUSE", "p", "FOR", 3600000) == 1
        c.call("Q.PUSH", "p", "k", "z")
        until = qinfo(c, "p")["paused_until"]
        assert [m[2] for m in c.call("Q.PULL", "q", "COUNT", 10)] == [b"y"]
    crash_restart(server)
    with server.raw() as c:
        assert keyinfo(c, "q", "tenant-1")["paused"] == 1
        assert c.call("Q.PULL", "q", "COUNT", 10) == []
        i = qinfo(c, "p")
        assert (i["paused"], i["paused_until"]) == (1, until)
        assert c.call("Q.PULL", "p") == []
        assert info_section(c, "queues")["paused_keys"] == "1"


def test_per_key_order_across_pauses(server):
    """Checker: consumers pause the key of a tenth of their deliveries for
    a few ms (and nack them), as a handler told "retry later" would; per
    key, never two in flight and acks in push order: 0 violations."""
    keys = ["k%d" % i for i in range(8)]
    per_key = 25
    with server.raw() as c:
        push_sequences(c, "q", keys, per_key)
    chk = OrderChecker()
    rnd = random.Random(7)
    pauses = [0]

    def maybe_pause(c, m):
        if rnd.random() >= 0.1:
            return False
        mid, key, _payload, _attempt, tok = m
        assert c.call("Q.PAUSE", "q", "KEY", key, "FOR", 5) in (0, 1)
        chk.released(key, mid)
        c.call("Q.NACK", "q", mid, tok)
        pauses[0] += 1
        return True

    assert run_consumers(server.port, "q", chk, len(keys) * per_key, nack_p=0.0,
                         on_message=maybe_pause) == len(keys) * per_key
    assert chk.violations == []
    assert pauses[0] > 0


def test_consumer_runner_pauses_the_key(server, tmp_path):
    """The C consumer runner (through `ordo consume --tempfail-pause`): a
    handler that answers "pause this key" pauses its key for the time it
    gave and nacks; the key's messages wait, other keys go on."""
    from clientlib import Proc, prog
    script = tmp_path / "h.sh"
    script.write_text("#!/bin/sh\nif [ \"$ORDO_KEY\" = slow ] && [ \"$ORDO_ATTEMPT\" = 1 ]; then exit 75; fi\n"
                      "cat\n")
    script.chmod(0o755)
    with server.raw() as c:
        s1 = c.call("Q.PUSH", "q", "slow", "s1")
        c.call("Q.PUSH", "q", "slow", "s2")
        f1 = c.call("Q.PUSH", "q", "fast", "f1")
        p = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--tempfail-pause", 3600000, "--", str(script)])
        try:
            poll(lambda: c.call("Q.RESULT", "q", f1) == b"f1", "the fast key to be done")
            # Paused first, then nacked: both are seen once waiting counts s1 again.
            poll(lambda: keyinfo(c, "q", "slow")["waiting"] == 2, "the slow key's message to be nacked")
            ki = keyinfo(c, "q", "slow")
            assert ki["paused"] == 1 and ki["paused_until"] - now_ms(c) > 3500000
            assert c.call("Q.RESULT", "q", s1) is None
            assert c.call("Q.RESUME", "q", "KEY", "slow") == 1
            poll(lambda: c.call("Q.RESULT", "q", s1) == b"s1", "the slow key's first message after resume")
        finally:
            assert p.kill(signal.SIGTERM) == 0, p.stderr()


def test_tool_tempfail_pauses_only_when_asked(server, tmp_path):
    """`ordo consume`: exit 75 without --tempfail-pause is a failure like
    any other (a nack, the key not paused); with it and --exactly-once, the
    key is paused as with the plain handler."""
    from clientlib import Proc, prog
    script = tmp_path / "h.sh"
    script.write_text("#!/bin/sh\nexit 75\n")
    script.chmod(0o755)
    with server.raw() as c:
        c.call("Q.PUSH", "q", "k", "x")
        p = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--nack-delay", 3600000, "--", str(script)])
        try:
            poll(lambda: qinfo(c, "q")["nacked"] == 1, "the nack")
            assert keyinfo(c, "q", "k")["paused"] == 0
        finally:
            assert p.kill(signal.SIGTERM) == 0, p.stderr()
        c.call("Q.PUSH", "r", "k", "y")
        p = Proc([prog("ordo"), "-p", server.port, "consume", "r", "--exactly-once", "--tempfail-pause", 3600000,
                  "--", str(script)])
        try:
            poll(lambda: qinfo(c, "r")["nacked"] == 1, "the nack after the pause")
            ki = keyinfo(c, "r", "k")
            assert ki["paused"] == 1 and ki["paused_until"] - now_ms(c) > 3500000
        finally:
            assert p.kill(signal.SIGTERM) == 0, p.stderr()


# ---- redrive, cancel, expire -----------------------------------------------------------


def deadletter_all(c, q, n):
    """Pull and nack n messages of q (MAXATTEMPTS 1: each goes to the dead
    letters), in whatever order the queue gives them."""
    for _ in range(n):
        (m,) = c.call("Q.PULL", q, "BLOCK", 5000)
        assert c.call("Q.NACK", q, m[0], m[4]) == 1


def test_redrive_moves_dead_letters_back_in_key_order(server):
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "MAXATTEMPTS", 1, "DEADLETTER", "dlq") == "OK"
        first = None
        for seq in range(3):
            for k in ("a", "b"):
                mid = c.call("Q.PUSH", "q", k, "%s:%d" % (k, seq))
                first = first or mid
        deadletter_all(c, "q", 6)
        assert c.call("Q.LEN", "dlq") == [6, 0, 0]
        r = c.call("Q.RESULT", "q", first)
        assert isinstance(r, RespError) and r.code == "DEADLETTER" and "exhausted" in str(r)
        # By id: one message of b; by key: the rest of a; then all that is left.
        dl = c.call("Q.PEEK", "dlq", "COUNT", 10)
        b_ids = [m[0] for m in sorted(dl, key=lambda m: m[0]) if m[1] == b"b"]
        assert len(b_ids) == 1  # PEEK shows each key's head
        assert c.call("Q.REDRIVE", "q", "ID", b_ids[0]) == 1
        assert c.call("Q.REDRIVE", "q", "ID", b_ids[0]) == 0
        assert c.call("Q.REDRIVE", "q", "KEY", "a") == 3
        assert c.call("Q.REDRIVE", "q", "FROM", "dlq") == 2
        assert c.call("Q.REDRIVE", "q") == 0
        assert c.call("Q.LEN", "dlq") == [0, 0, 0] and c.call("Q.LEN", "q") == [6, 0, 0]
        got = {b"a": [], b"b": []}
        for _ in range(6):
            (m,) = c.call("Q.PULL", "q")
            assert m[3] == 1  # attempts start over
            got[m[1]].append(m[2])
            assert c.call("Q.ACK", "q", m[0], m[4]) == 1
        assert got == {b"a": [b"a:0", b"a:1", b"a:2"], b"b": [b"b:0", b"b:1", b"b:2"]}
        assert c.call("Q.REDRIVE", "nodl").code == "ERR"
        assert c.call("Q.REDRIVE", "q", "FROM", "q").code == "ERR"
        assert c.call("Q.REDRIVE", "q", "ID", 0).code == "ERR"


def test_cancel_answers_the_caller(server):
    with server.raw() as c, server.raw() as caller:
        assert c.call("Q.PAUSE", "q", "KEY", "k") == 1     # nobody takes it meanwhile
        caller.send("Q.CALL", "q", "k", "work", "TIMEOUT", 20000)
        poll(lambda: int(info_section(c, "clients")["blocked_call"]) == 1, "the call to park")
        # The id is the revision of the call's push: the newest revision.
        rev = int(info_section(c, "kv")["revision"])
        assert c.call("Q.CANCEL", "q", rev) == 1
        r = caller.read()
        assert isinstance(r, RespError) and r.code == "CANCELLED", r
        assert c.call("Q.RESULT", "q", rev).code == "CANCELLED"
        assert c.call("Q.CANCEL", "q", rev) == 0
        assert keyinfo(c, "q", "k")["waiting"] == 0
        # In flight: not cancelled. Delayed: cancelled.
        a = c.call("Q.PUSH", "q", "x", "a")
        c.call("Q.PULL", "q")
        assert c.call("Q.CANCEL", "q", a) == 0
        d = c.call("Q.PUSH", "q", "y", "d", "DELAY", 3600000)
        assert c.call("Q.CANCEL", "q", d) == 1
        assert c.call("Q.LEN", "q") == [0, 1, 0]


def test_maxwait_deadletters_untaken_messages(server):
    """MAXWAIT: a message nobody took within MAXWAIT of its push is
    dead-lettered with its reason, never early; one taken in time is not."""
    maxwait = 300
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "MAXWAIT", maxwait, "DEADLETTER", "dlq") == "OK"
        assert qinfo(c, "q")["maxwait"] == maxwait
        t0 = time.monotonic()
        a = c.call("Q.PUSH", "q", "slow", "a")
        c.call("Q.PAUSE", "q", "KEY", "slow")
        b = c.call("Q.PUSH", "q", "fast", "b")
        (m,) = c.call("Q.PULL", "q")
        assert m[0] == b
        poll(lambda: c.call("Q.LEN", "dlq") == [1, 0, 0], "the untaken message to expire", 20)
        assert time.monotonic() - t0 >= maxwait / 1000.0
        r = c.call("Q.RESULT", "q", a)
        assert isinstance(r, RespError) and r.code == "DEADLETTER" and "MAXWAIT" in str(r), r
        assert keyinfo(c, "q", "fast")["state"] == b"processing"   # in flight: not expired
        assert c.call("Q.ACK", "q", b, m[4]) == 1


def test_per_key_order_across_redrive(server):
    """Checker: a run where a third of the deliveries are nacked into the
    dead letters (MAXATTEMPTS 1), then a redrive and a second run: in each
    run, per key, never two in flight and acks in push order: 0
    violations, and every message is done once."""
    keys = ["k%d" % i for i in range(6)]
    per_key = 20
    total = len(keys) * per_key
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "MAXATTEMPTS", 1, "DEADLETTER", "dlq") == "OK"
        push_sequences(c, "q", keys, per_key)
    first = OrderChecker()
    done1 = run_consumers(server.port, "q", first, 10 ** 9, nack_p=0.33, until_empty=True)
    with server.raw() as c:
        dead = c.call("Q.LEN", "dlq")[0]
        assert dead > 0 and done1 + dead == total
        moved = 0
        while True:
            n = c.call("Q.REDRIVE", "q")
            if n == 0:
                break
            moved += n
        assert moved == dead
        assert c.call("Q.CONFIG", "q", "MAXATTEMPTS", 0) == "OK"
    second = OrderChecker()
    assert run_consumers(server.port, "q", second, dead, nack_p=0.0) == dead
    assert first.violations == [] and second.violations == []


def test_cancel_and_maxwait_survive_kill(server):
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "MAXWAIT", 3600000) == "OK"
        c.call("Q.PAUSE", "q", "KEY", "k")
        a = c.call("Q.PUSH", "q", "k", "a")
        b = c.call("Q.PUSH", "q", "k", "b")
        assert c.call("Q.CANCEL", "q", a) == 1
    crash_restart(server)
    with server.raw() as c:
        assert qinfo(c, "q")["maxwait"] == 3600000
        assert c.call("Q.RESULT", "q", a).code == "CANCELLED"
        assert keyinfo(c, "q", "k")["waiting"] == 1
        assert c.call("Q.RESUME", "q", "KEY", "k") == 1
        (m,) = c.call("Q.PULL", "q")
        assert m[0] == b


# ---- rate limits -----------------------------------------------------------------------


def test_keyrate_throttles_a_key_and_others_flow(server):
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "KEYRATE", 2, "PER", 1000) == "OK"
        for i in range(4):
            c.call("Q.PUSH", "q", "a", "a%d" % i)
        c.call("Q.PUSH", "q", "b", "b0")
        got = [m[2] for m in c.call("Q.PULL", "q", "COUNT", 10, "NOACK")]
        assert sorted(got) == [b"a0", b"a1", b"b0"], got
        ki = keyinfo(c, "q", "a")
        assert ki["throttled_until"] > 0 and ki["waiting"] == 2
        i = qinfo(c, "q")
        assert (i["keyrate"], i["keyrate_per"], i["throttled_keys"]) == (2, 1000, 1)
        t0 = time.monotonic()
        (m,) = c.call("Q.PULL", "q", "BLOCK", 10000, "NOACK")
        assert m[2] == b"a2" and time.monotonic() - t0 >= 0.4  # a token every 500 ms
        assert c.call("Q.CONFIG", "q", "KEYRATE", 2).code == "ERR"
        assert c.call("Q.CONFIG", "q", "RATE", 1, "PER", 0).code == "ERR"
        assert c.call("Q.CONFIG", "q", "KEYRATE", 0) == "OK"
        assert c.call("Q.PULL", "q", "BLOCK", 10000, "NOACK")[0][2] == b"a3"


def test_queue_rate_short_window(server):
    """RATE 10 PER 200 (50 a second after a burst of 10): pullers that want
    more get at most the bucket's allowance, and close to it."""
    n, per_ms, run_s = 10, 200, 1.5
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "RATE", n, "PER", per_ms) == "OK"
        for i in range(400):
            c.call("Q.PUSH", "q", "k%d" % (i % 40), "x")
    stamps = []
    lock = threading.Lock()

    def pull():
        with Conn(server.port, timeout=20.0) as c:
            end = time.monotonic() + run_s
            while time.monotonic() < end:
                r = c.call("Q.PULL", "q", "BLOCK", 100, "NOACK", "COUNT", 5)
                with lock:
                    stamps.extend([time.monotonic()] * len(r))

    t0 = time.monotonic()
    threads = [threading.Thread(target=pull) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    elapsed = max(stamps) - t0
    allowed = n + n * elapsed * 1000.0 / per_ms
    assert len(stamps) <= allowed + 1, (len(stamps), allowed)
    assert len(stamps) >= 0.8 * (n + n * (run_s - 0.3) * 1000.0 / per_ms), len(stamps)


def test_per_key_order_across_rate_limits(server):
    """Checker: KEYRATE and RATE throttle a run where consumers nack a
    fifth of their deliveries: per key, never two in flight and acks in
    push order: 0 violations."""
    keys = ["k%d" % i for i in range(6)]
    per_key = 15
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "KEYRATE", 4, "PER", 40, "RATE", 200, "PER", 100) == "OK"
        push_sequences(c, "q", keys, per_key)
    chk = OrderChecker()
    assert run_consumers(server.port, "q", chk, len(keys) * per_key, nack_p=0.2) == len(keys) * per_key
    assert chk.violations == []


def test_rate_state_survives_kill(server):
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "KEYRATE", 1, "PER", 3600000, "RATE", 7, "PER", 1000) == "OK"
        c.call("Q.PUSH", "q", "a", "a0")
        c.call("Q.PUSH", "q", "a", "a1")
        assert len(c.call("Q.PULL", "q", "NOACK")) == 1
        assert c.call("Q.PULL", "q", "NOACK") == []      # a is throttled for an hour
        until = keyinfo(c, "q", "a")["throttled_until"]
        assert until > 0
    crash_restart(server)
    with server.raw() as c:
        i = qinfo(c, "q")
        assert (i["rate"], i["rate_per"], i["keyrate"], i["keyrate_per"]) == (7, 1000, 1, 3600000)
        assert keyinfo(c, "q", "a")["throttled_until"] == until
        assert c.call("Q.PULL", "q", "NOACK") == []


# ---- schedules -------------------------------------------------------------------------


def by_name(listed):
    """A Q.SCHEDULE LIST reply as {name: fields}."""
    return {fields(s)["name"]: fields(s) for s in listed}


def schedules(c):
    return by_name(c.call("Q.SCHEDULE", "LIST"))


def test_interval_schedule_pushes_each_tick_once(server):
    every = 200
    with server.raw() as c, server.raw() as puller:
        assert c.call("Q.SCHEDULE", "ADD", "beat", "q", "k", "tick", "EVERY", every) == "OK"
        t0 = time.monotonic()
        got = []
        while len(got) < 5:
            got += puller.call("Q.PULL", "q", "BLOCK", 5000, "NOACK", "COUNT", 10)
        elapsed = time.monotonic() - t0
        assert elapsed >= 4 * every / 1000.0         # five ticks take four intervals at least
        assert all(m[1] == b"k" and m[2] == b"tick" for m in got)
        assert len({m[0] for m in got}) == len(got)
        s = schedules(c)[b"beat"]
        assert s["every"] == every and s["cron"] is None and s["missed"] == b"fire"
        assert s["next"] > now_ms(c) - every
        assert c.call("Q.SCHEDULE", "DEL", "beat") == 1
        assert c.call("Q.SCHEDULE", "DEL", "beat") == 0
        assert c.call("Q.SCHEDULE", "LIST") == []


def test_schedule_errors(server):
    with server.raw() as c:
        for args in (["ADD", "s", "q", "k", "p"], ["ADD", "s", "q", "k", "p", "EVERY", 5],
                     ["ADD", "s", "q", "k", "p", "CRON", "61 * * * *"],
                     ["ADD", "s", "q", "k", "p", "CRON", "0 0 30 2 *"],
                     ["ADD", "s", "q", "k", "p", "EVERY", 100, "CRON", "* * * * *"],
                     ["ADD", "s", "q", "k", "p", "CRON", "* * * * *", "START", 5],
                     ["ADD", "s", "", "k", "p", "EVERY", 100], ["NOPE"], ["DEL"]):
            r = c.call("Q.SCHEDULE", *args)
            assert isinstance(r, RespError) and r.code == "ERR", (args, r)
        assert c.call("Q.SCHEDULE", "ADD", "c", "q", "k", "p", "CRON", "*/5 * * * *", "MISSED", "skip") == "OK"
        s = schedules(c)[b"c"]
        assert s["cron"] == b"*/5 * * * *" and s["missed"] == b"skip" and s["next"] % 300000 == 0


def run_down(server, seconds):
    """kill -9, stay down `seconds`, start again on the same data."""
    server.kill()
    time.sleep(seconds)  # the outage itself is what the test measures
    server.start(server.port)


def test_schedule_ticks_once_across_kills(server):
    """A schedule's ticks are records: across kill -9 and restarts, every
    message it pushed is there once (the queue holds exactly what LIST
    says it pushed), and the next tick resumes from the state, not from
    the start."""
    with server.raw() as c:
        assert c.call("Q.SCHEDULE", "ADD", "s", "q", "k", "x", "EVERY", 100) == "OK"
        poll(lambda: schedules(c)[b"s"]["pushed"] >= 3, "three ticks")
    for _ in range(3):
        crash_restart(server)
        with server.raw() as c:
            # The count and the queue in one transaction: a tick (every
            # 100 ms) between two separate reads would tell them apart.
            assert c.call("MULTI") == "OK"
            assert c.call("Q.SCHEDULE", "LIST") == "QUEUED"
            assert c.call("Q.LEN", "q") == "QUEUED"
            listed, qlen = c.call("EXEC")
            before = by_name(listed)[b"s"]["pushed"]
            assert qlen[0] == before
            poll(lambda: schedules(c)[b"s"]["pushed"] >= before + 2, "ticks after the restart")
    with server.raw() as c:
        c.call("Q.SCHEDULE", "DEL", "s")
        s_pushed = c.call("Q.LEN", "q")[0]
        ids = [m[0] for m in c.call("Q.PULL", "q", "NOACK", "COUNT", 1000)]
        assert len(ids) == len(set(ids)) == s_pushed


def test_missed_ticks_fire_once_or_skip(server):
    """While the server is down ticks are missed (2.5 s: a dozen ticks of
    200 ms): under MISSED fire the first record after the restart pushes
    once for all of them; under skip it pushes nothing and counts one
    skip. Either way the next tick is the first after now."""
    with server.raw() as c:
        assert c.call("Q.SCHEDULE", "ADD", "f", "qf", "k", "x", "EVERY", 200, "MISSED", "fire") == "OK"
        assert c.call("Q.SCHEDULE", "ADD", "s", "qs", "k", "x", "EVERY", 200, "MISSED", "skip") == "OK"
        poll(lambda: all(v["pushed"] >= 1 for v in schedules(c).values()), "a tick of each")
        before = {k: v["pushed"] for k, v in schedules(c).items()}
    run_down(server, 2.5)
    with server.raw() as c:
        t = now_ms(c)
        poll(lambda: schedules(c)[b"f"]["next"] > t and schedules(c)[b"s"]["next"] > t, "the missed ticks settled")
        after = schedules(c)
        # At most one on-time tick between the LIST and the kill, and one
        # after the restart, beside the one push for all the missed ones.
        assert 1 <= after[b"f"]["pushed"] - before[b"f"] <= 3, (before, after)
        assert after[b"s"]["skipped"] == 1 and after[b"f"]["skipped"] == 0
        assert after[b"s"]["pushed"] - before[b"s"] <= 2


def test_tool_and_client_calls(server):
    """The `ordo` tool (on the C client's typed calls): pause/resume,
    redrive, cancel, schedule add/list/del."""
    from clientlib import ordo
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "MAXATTEMPTS", 1, "DEADLETTER", "dlq") == "OK"
        a = c.call("Q.PUSH", "q", "k", "a")
        (m,) = c.call("Q.PULL", "q")
        c.call("Q.NACK", "q", a, m[4])
        b = c.call("Q.PUSH", "q", "j", "b", "DELAY", 3600000)

    def run(*args):
        p = ordo(server, *args)
        assert p.returncode == 0, (args, p.stderr)
        return p.stdout.decode().strip()

    assert run("pause", "q", "--key", "k", "--for", 60000) == "1"
    assert run("resume", "q", "--key", "k") == "1"
    assert run("resume", "q") == "0"
    assert run("redrive", "q") == "1"
    assert run("cancel", "q", b) == "1"
    assert run("cancel", "q", b) == "0"
    assert run("schedule", "add", "s", "q", "k", "x", "--cron", "0 3 * * *", "--skip-missed") == "OK"
    line = run("schedule", "list")
    assert line.startswith("s q next=") and 'cron="0 3 * * *"' in line, line
    assert run("schedule", "del", "s") == "1"
    assert run("schedule", "del", "s") == "0"
    assert ordo(server, "schedule", "add", "s", "q", "k", "x").returncode == 2
    p = ordo(server, "schedule", "add", "s", "q", "k", "x", "--cron", "bad")
    assert p.returncode == 1 and b"CRON" in p.stderr


def test_tool_redrives_every_key_and_lists_intervals(server):
    """`ordo redrive` without --key or --id moves every key's dead letters
    and prints the total; a whole queue pauses once; `schedule list` shows
    an interval schedule's every=MS."""
    from clientlib import ordo
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "MAXATTEMPTS", 1, "DEADLETTER", "dlq") == "OK"
        for k in ("a", "b", "c"):
            c.call("Q.PUSH", "q", k, k)
        deadletter_all(c, "q", 3)

    def run(*args):
        p = ordo(server, *args)
        assert p.returncode == 0, (args, p.stderr)
        return p.stdout.decode().strip()

    assert run("redrive", "q", "--from", "dlq") == "3"
    assert run("redrive", "q") == "0"
    assert run("pause", "q") == "1"
    assert run("pause", "q") == "0"
    assert run("resume", "q") == "1"
    assert run("schedule", "add", "beat", "q", "k", "x", "--every", 60000) == "OK"
    line = run("schedule", "list")
    assert line.startswith("beat q next=") and line.endswith(" pushed=0 skipped=0 every=60000"), line


# ---- per-key concurrency ---------------------------------------------------------------


class ConcChecker:
    """Counts violations of KEYCONCURRENCY n from what consumers saw: a key
    with more than n deliveries held at once (a consumer counts a delivery
    from after its pull is answered until before it acks or nacks, inside
    the server's in-flight span, so the count never exceeds what the
    server had), and a key's first deliveries starting out of push order,
    judged by their tokens (the server's delivery order) once the run is
    over."""

    def __init__(self, n):
        self.n = n
        self.lock = threading.Lock()
        self.held = {}           # key -> set of msg ids held
        self.first = {}          # msg id -> (key, token, seq) of its first delivery
        self.max_held = 0
        self.violations = []

    def delivered(self, key, mid, seq, token):
        with self.lock:
            h = self.held.setdefault(key, set())
            h.add(mid)
            self.max_held = max(self.max_held, len(h))
            if len(h) > self.n:
                self.violations.append("key %r: %d in flight (limit %d)" % (key, len(h), self.n))
            if mid not in self.first or token < self.first[mid][1]:
                self.first[mid] = (key, token, seq)

    def released(self, key, mid):
        with self.lock:
            self.held.get(key, set()).discard(mid)

    def check_start_order(self):
        by_key = {}
        for key, token, seq in self.first.values():
            by_key.setdefault(key, []).append((token, seq))
        for key, starts in by_key.items():
            seqs = [seq for _, seq in sorted(starts)]
            if seqs != sorted(seqs):
                self.violations.append("key %r: first starts out of order %r" % (key, seqs))


def test_keyconcurrency_never_more_than_n_in_flight(server):
    """Checker: KEYCONCURRENCY 3, consumers that hold their messages a
    while and nack a fifth: never more than 3 of a key in flight, and a
    key's first starts in push order: 0 violations; and the limit is used
    (some key had 3 at once)."""
    n, keys, per_key = 3, ["k%d" % i for i in range(4)], 20
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "KEYCONCURRENCY", n, "MAXATTEMPTS", 0) == "OK"
        assert qinfo(c, "q")["keyconcurrency"] == n
        push_sequences(c, "q", keys, per_key)
    chk = ConcChecker(n)
    total = len(keys) * per_key
    done = [0]
    lock = threading.Lock()

    def work(seed):
        rnd = random.Random(seed)
        with Conn(server.port, timeout=40.0) as c:
            while True:
                with lock:
                    if done[0] >= total:
                        return
                m = c.call("Q.PULL", "q", "BLOCK", 200)
                if not m:
                    continue
                mid, key, payload, _attempt, tok = m[0]
                chk.delivered(key, mid, int(payload.split(b":")[1]), tok)
                time.sleep(rnd.random() * 0.005)  # the work itself
                chk.released(key, mid)
                if rnd.random() < 0.2:
                    c.call("Q.NACK", "q", mid, tok)
                elif c.call("Q.ACK", "q", mid, tok) == 1:
                    with lock:
                        done[0] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert done[0] == total
    chk.check_start_order()
    assert chk.violations == []
    assert chk.max_held == n


def test_keyconcurrency_survives_kill_and_bounds_config(server):
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "KEYCONCURRENCY", 2) == "OK"
        ids = [c.call("Q.PUSH", "q", "k", "m%d" % i) for i in range(3)]
        got = c.call("Q.PULL", "q", "COUNT", 10)
        assert [m[0] for m in got] == ids[:2]         # two of the key at once, in order
        assert keyinfo(c, "q", "k")["inflight"] == 2
        r = c.call("Q.CONFIG", "q", "KEYCONCURRENCY", 1)
        assert isinstance(r, RespError) and "KEYCONCURRENCY" in str(r)
        assert c.call("Q.CONFIG", "q", "KEYCONCURRENCY", 0).code == "ERR"
    crash_restart(server)
    with server.raw() as c:
        ki = keyinfo(c, "q", "k")
        assert (ki["inflight"], ki["waiting"], ki["id"]) == (2, 1, ids[0])
        assert c.call("Q.PULL", "q") == []
        assert c.call("Q.ACK", "q", got[1][0], got[1][4]) == 1   # the second first
        (m,) = c.call("Q.PULL", "q")
        assert m[0] == ids[2]


def test_fairness_roundrobin_small_keys_are_not_starved(server):
    """The fairness rule, checked: under FAIRNESS roundrobin a consumer
    that takes one message at a time and acks it gets every ready key once
    before any key twice, so with one key 500 deep (pushed first) and 20
    keys of 3, the small keys are done within (20 + 1) x 3 deliveries;
    under oldest (the default) the deep key's older messages go first."""
    small, per = 20, 3

    def deliveries_until_small_done(q, fairness):
        with server.raw() as c:
            assert c.call("Q.CONFIG", q, "FAIRNESS", fairness) == "OK"
            assert qinfo(c, q)["fairness"] == fairness.encode()
            for i in range(500):
                c.call("Q.PUSH", q, "hot", "h")
            for j in range(per):
                for k in range(small):
                    c.call("Q.PUSH", q, "s%d" % k, "s")
            left, n = small * per, 0
            while left > 0:
                (m,) = c.call("Q.PULL", q)
                n += 1
                left -= m[1] != b"hot"
                assert c.call("Q.ACK", q, m[0], m[4]) == 1
            return n

    assert deliveries_until_small_done("rr", "roundrobin") <= (small + 1) * per
    assert deliveries_until_small_done("old", "oldest") == 500 + small * per
    with server.raw() as c:
        assert c.call("Q.CONFIG", "rr", "FAIRNESS", "lottery").code == "ERR"


def test_metrics_show_pauses_throttles_and_schedules(server):
    import urllib.request
    with server.raw() as c:
        c.call("Q.PUSH", "q", "a", "x")
        assert c.call("Q.PAUSE", "q", "KEY", "a") == 1
        assert c.call("Q.PAUSE", "p") == 1
        assert c.call("Q.SCHEDULE", "ADD", "beat", "q", "k", "x", "EVERY", 3600000) == "OK"
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % server.http_port, timeout=10).read().decode()
    assert 'ordo_queue_paused_keys{queue="q"} 1' in text
    assert 'ordo_queue_paused{queue="p"} 1' in text
    assert 'ordo_queue_throttled_keys{queue="q"} 0' in text
    assert "ordo_schedules 1" in text
    assert 'ordo_schedule_pushed_total{schedule="beat"} 0' in text
    nxt = float(re.search(r'ordo_schedule_next_tick_seconds\{schedule="beat"\} (\S+)', text).group(1))
    assert 3500 < nxt <= 3600


def test_max_schedules(ordod_factory):
    srv = ordod_factory("--max-schedules", 2)
    with srv.raw() as c:
        for n in ("a", "b"):
            assert c.call("Q.SCHEDULE", "ADD", n, "q", "k", "x", "EVERY", 60000) == "OK"
        r = c.call("Q.SCHEDULE", "ADD", "c", "q", "k", "x", "EVERY", 60000)
        assert isinstance(r, RespError) and r.code == "LIMIT" and "max-schedules" in str(r)
        assert c.call("Q.SCHEDULE", "ADD", "a", "q", "k", "y", "EVERY", 1000) == "OK"   # replacing is fine
        assert c.call("Q.SCHEDULE", "DEL", "b") == 1
        assert c.call("Q.SCHEDULE", "ADD", "c", "q", "k", "x", "EVERY", 60000) == "OK"


def test_tool_consume_leaves_the_delay_to_the_queue(server):
    """`ordo consume --queue-backoff`: a failing PROGRAM's message is
    nacked without a delay, so the queue's BACKOFF holds its key."""
    from clientlib import Proc, prog
    with server.raw() as c:
        assert c.call("Q.CONFIG", "q", "BACKOFF", "fixed", "BACKOFFBASE", 3600000) == "OK"
        c.call("Q.PUSH", "q", "k", "x")
        p = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--queue-backoff", "--", "/bin/false"])
        try:
            poll(lambda: keyinfo(c, "q", "k")["next_attempt"] > 0, "the nack to hold the key")
            assert keyinfo(c, "q", "k")["next_attempt"] - now_ms(c) > 3500000
            assert qinfo(c, "q")["nacked"] == 1
        finally:
            assert p.kill(signal.SIGTERM) == 0, p.stderr()
