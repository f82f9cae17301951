"""An exactly-once consumer for test_exactly_once.py, run as its own
process so the test can SIGKILL it at any point: it pulls a message,
then in one transaction increments the message key's counter and acks
the delivery (docs/exactly-once.md). A stale token aborts the whole
transaction (-CONFLICT): nothing is applied and the message's current
holder counts it instead.

usage: eo_consumer.py port queue
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

from resp import Conn, RespError  # noqa: E402


def main():
    port, queue = int(sys.argv[1]), sys.argv[2]
    c = Conn(port, timeout=30.0)
    while True:
        got = c.call("Q.PULL", queue, "BLOCK", 1000)
        if not got:
            continue
        mid, key, _payload, _attempt, token = got[0]
        c.send("MULTI")
        c.send("INCR", b"ctr:" + key)
        c.send("Q.ACK", queue, mid, token)
        c.send("EXEC")
        replies = [c.read() for _ in range(4)]
        res = replies[3]
        if isinstance(res, RespError) and not str(res).startswith("CONFLICT"):
            raise SystemExit("EXEC answered %s" % res)


if __name__ == "__main__":
    main()
