"""The producer (examples/producer_spill.c on ordo_producer_*) under a
server killed with SIGKILL and restarted, and itself killed and restarted
on the same spill file. The checker drains the queue and requires:
every message the producer accepted is delivered exactly once, nothing is
delivered that was never sent, and each key's messages come in the order
they were sent -- 0 violations."""
import collections

from clientlib import Proc, prog

COUNT = 6000
KEYS = 13


def producer(srv, spill, count=COUNT, pace_us=200):
    # paced so that the kills below land mid-stream
    return Proc([prog("example_producer_spill"), "-p", srv.port, "-q", "pq", "-f", spill, "-n", count,
                 "-k", KEYS, "-l", "2", "-w", pace_us])


def accepted(lines):
    return {int(l.split()[1]) for l in lines if l.startswith("accepted ")}


def drain(srv):
    """Every message in the queue, in delivery order per key."""
    per_key = collections.defaultdict(list)
    with srv.raw() as c:
        while True:
            got = c.call("Q.PULL", "pq", "COUNT", "1000", "NOACK")
            if not got:
                waiting, inflight, delayed = c.call("Q.LEN", "pq")
                if waiting == 0 and inflight == 0 and delayed == 0:
                    return per_key
                continue
            for mid, key, payload, attempt, token in got:
                per_key[key.decode()].append(int(payload))


def check(per_key, acc):
    violations = []
    seen = collections.Counter()
    for key, payloads in per_key.items():
        for a, b in zip(payloads, payloads[1:]):
            if a >= b:
                violations.append("key %s: %d before %d" % (key, a, b))
        for p in payloads:
            seen[p] += 1
            if "k%d" % (p % KEYS) != key:
                violations.append("payload %d under key %s" % (p, key))
            if not 0 <= p < COUNT:
                violations.append("payload %d was never sent" % p)
    violations += ["%d delivered %d times" % (p, n) for p, n in seen.items() if n > 1]
    violations += ["accepted %d never delivered" % p for p in sorted(acc - set(seen))[:20]]
    return violations


def test_producer_survives_server_kill_and_own_crash(server, tmp_path):
    spill = tmp_path / "producer.spill"
    p1 = producer(server, spill)
    p1.wait_line(lambda l: l == "accepted 1000")
    server.kill()                                # server crash mid-stream
    server.restart()
    p1.wait_line(lambda l: l == "accepted 3000")
    p1.kill()                                    # producer crash mid-stream
    acc = accepted(p1.lines)
    assert "done" not in p1.lines
    server.kill()                                # and the server again, while no producer runs
    server.restart()
    p2 = producer(server, spill)                 # resumes from the spill file
    p2.wait_line(lambda l: l == "done")
    assert p2.finish() == 0, p2.stderr()
    acc |= accepted(p2.lines)
    assert not [l for l in p1.lines + p2.lines if l.startswith("failed")]
    # Everything the second run accepted plus what the first did before it
    # was killed covers every message (the second run starts where the
    # spill file ends).
    assert max(acc) == COUNT - 1
    violations = check(drain(server), acc)
    assert violations == [], violations[:20]


def test_producer_buffers_while_server_is_down(ordod_factory, tmp_path):
    srv = ordod_factory()
    spill = tmp_path / "s2"
    p = producer(srv, spill, count=500)
    p.wait_line(lambda l: l == "accepted 10")
    # SIGKILL the server and keep it down until the producer has accepted
    # everything: the buffer (and spill file) hold it all.
    srv.kill()
    p.wait_line(lambda l: l == "accepted 499")
    assert "done" not in p.lines
    srv.restart()
    p.wait_line(lambda l: l == "done")
    assert p.finish() == 0
    per_key = drain(srv)
    global COUNT
    saved, COUNT = COUNT, 500
    try:
        assert check(per_key, set(range(500))) == []
    finally:
        COUNT = saved
