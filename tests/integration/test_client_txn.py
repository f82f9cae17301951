"""Exactly-once effects with the C client (examples/exactly_once.c, the
consumer runner's txn_handler option): each message adds 1 to its key's
counter in one transaction with its ack. One consumer takes a message and
is stopped (SIGSTOP: its lease keeper stops too) past its lease; the
message is redelivered to a second consumer, which counts it; the first
is resumed and its transaction is refused whole (stale token). Every
counter ends equal to the number of messages pushed for its key: none
lost, none doubled. Synchronisation is by output lines and server state
(ordoproc.poll polls a condition), bounded by clientlib.DEADLINE_S."""
import signal
import subprocess

from clientlib import DEADLINE_S, Proc, prog
from ordoproc import poll

KEYS = 5
PER_KEY = 20
QUEUE = "eo"
STALL_LEASE_MS = 500


def counters(server):
    with server.raw() as c:
        return [int(c.call("GET", "count:k%d" % i) or 0) for i in range(KEYS)]


def stats(proc):
    line = proc.wait_line(lambda l: l.startswith("acked "))
    w = line.split()
    return {w[i]: int(w[i + 1]) for i in range(0, len(w), 2)}


def test_stalled_consumer_counts_once(server):
    with server.raw() as c:
        for n in range(PER_KEY):
            for i in range(KEYS):
                assert isinstance(c.call("Q.PUSH", QUEUE, "k%d" % i, "m%d" % n), int)
    base = ["-p", server.port, "-q", QUEUE] + (["-a", server.password] if server.password else [])

    # A takes the first message and holds it inside its handler.
    a = Proc([prog("example_exactly_once")] + base + ["-c", 1, "-l", STALL_LEASE_MS, "-s"],
             stdin=subprocess.PIPE)
    b = None
    try:
        held = a.wait_line(lambda l: l.startswith("holding ")).split()
        held_key = held[1]
        a.p.send_signal(signal.SIGSTOP)   # no keeper either: the lease runs out

        # B counts everything, the held message included once its lease ends.
        b = Proc([prog("example_exactly_once")] + base + ["-c", 2, "-l", 5000], stdin=subprocess.PIPE)
        b.wait_line(lambda l: l == "ready")
        poll(lambda: counters(server) == [PER_KEY] * KEYS, "every message counted by B", DEADLINE_S)

        # A resumes and tries to apply the message it held: refused whole.
        aborted0 = int(server.info("stats").get("transactions_aborted", 0))
        a.p.send_signal(signal.SIGCONT)
        a.p.stdin.write(b"go\n")
        a.p.stdin.flush()
        poll(lambda: int(server.info("stats").get("transactions_aborted", 0)) > aborted0,
             "A's transaction refused", DEADLINE_S)
        a.p.stdin.close()
        sa = stats(a)
        assert a.finish() == 0, a.stderr()
        b.p.stdin.close()
        sb = stats(b)
        assert b.finish() == 0, b.stderr()
    finally:
        for p in (a, b):
            if p is not None and p.p.poll() is None:
                p.p.send_signal(signal.SIGCONT)
                p.kill()

    assert sa == {"acked": 0, "nacked": 0, "stale": 1}, (sa, held_key)
    assert sb["acked"] == KEYS * PER_KEY and sb["stale"] == 0 and sb["nacked"] == 0, sb
    assert counters(server) == [PER_KEY] * KEYS
    with server.raw() as c:
        assert c.call("Q.PULL", QUEUE, "COUNT", 10) in (None, [])
