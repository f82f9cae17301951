"""The exactly-once recipe (docs/exactly-once.md) checked end to end.

Producers push messages for a few keys; consumer processes apply each
message as a counter increment and ack its delivery in one transaction.
The test SIGKILLs consumers at random points and restarts them, and one
consumer in this process stalls past its lease: its transaction must be
refused (-CONFLICT ... stale delivery token) once the message went to
another consumer. At the end each key's counter must equal the number of
messages pushed for it: lost and doubled counts are reported, and both
must be 0.
"""
import os
import random
import signal
import subprocess
import sys

from ordoproc import poll
from resp import RespError

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLINE_S = 60.0
KEYS = 8
MESSAGES = 400
CONSUMERS = 3
LEASE_MS = 500


def start_consumer(port):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "eo_consumer.py"), str(port), "eo"],
                            cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stalled_consumer(server, c):
    """Pull with a short lease, wait until the message was redelivered to
    someone else, then try the recipe: it must be refused whole."""
    got = poll(lambda: c.call("Q.PULL", "eo", "LEASE", 200), "a message for the stalled consumer", DEADLINE_S)
    mid, key, _p, _a, token = got[0]
    poll(lambda: _token_moved(c, key, token), "the stalled delivery to end", DEADLINE_S)
    before = c.call("GET", b"ctr:" + key)
    assert c.call("MULTI") == "OK"
    assert c.call("INCR", b"ctr:" + key) == "QUEUED"
    assert c.call("Q.ACK", "eo", mid, token) == "QUEUED"
    res = c.call("EXEC")
    assert isinstance(res, RespError) and str(res).startswith("CONFLICT 2 stale delivery token"), res
    after = c.call("GET", b"ctr:" + key)
    assert before is None or after is None or int(after) >= int(before)
    return key


def _token_moved(c, key, token):
    """Q.KEYINFO's token (a map in RESP3, pairs in RESP2) is no longer ours."""
    info = c.call("Q.KEYINFO", "eo", key)
    fields = dict(zip(info[::2], info[1::2])) if isinstance(info, list) else info
    return fields.get(b"token", fields.get("token")) != token


def test_exactly_once_under_kills_and_a_stall(server):
    rng = random.Random()
    c = server.raw()
    assert c.call("Q.CONFIG", "eo", "LEASE", LEASE_MS, "MAXATTEMPTS", 1000) == "OK"
    pushed = {}
    # the stalled consumer takes the first message before anyone else
    c.call("Q.PUSH", "eo", "k0", "m")
    pushed[b"k0"] = 1
    consumers = [start_consumer(server.port) for _ in range(CONSUMERS)]
    try:
        stalled_key = stalled_consumer(server, c)
        kills = 0
        for i in range(1, MESSAGES):
            key = b"k%d" % rng.randrange(KEYS)
            c.call("Q.PUSH", "eo", key, "m%d" % i)
            pushed[key] = pushed.get(key, 0) + 1
            if i % 40 == 0:  # a consumer dies at a random point of its loop
                j = rng.randrange(CONSUMERS)
                consumers[j].send_signal(signal.SIGKILL)
                consumers[j].wait(timeout=30)
                consumers[j] = start_consumer(server.port)
                kills += 1
        poll(lambda: c.call("Q.LEN", "eo") == [0, 0, 0], "the queue to drain", DEADLINE_S)
        for p in consumers:
            assert p.poll() is None, p.stderr.read()
    finally:
        for p in consumers:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
    lost = doubled = 0
    for key, n in pushed.items():
        got = c.call("GET", b"ctr:" + key)
        got = int(got) if got is not None else 0
        lost += max(0, n - got)
        doubled += max(0, got - n)
    print("exactly-once: messages=%d keys=%d consumer_kills=%d stalled_key=%r lost=%d doubled=%d"
          % (MESSAGES, len(pushed), kills, stalled_key, lost, doubled))
    assert (lost, doubled) == (0, 0)
    info = server.info("stats")
    assert int(info["transactions_aborted"]) >= 1
