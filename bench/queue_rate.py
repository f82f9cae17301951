#!/usr/bin/python3
"""bench/queue_rate.py -- a queue's rate limits measured over a window:
the deliveries a second that RATE n PER ms (the queue's) and KEYRATE n PER
ms (each key's) let through, against their settings.

  queue_rate.py PORT [-d seconds] [-r rate_per_s] [-k keyrate_per_s]
                     [-K keys] [-c consumers]

A producer keeps every key of queue `rate` at least a few hundred messages
deep (so the limit, not the backlog, is what stops delivery); c consumers
pull with BLOCK and NOACK as fast as they are answered. The first window
(one second) is the burst the buckets hold, and is not counted: the
measurement is the d seconds after it. For KEYRATE, one key's count over
the same window. A measure is within tolerance when it is within 10% of
its setting.

Output: one line of key=value pairs, then PASS or FAIL.
"""
import argparse
import threading
import time

import redis

TOLERANCE = 0.10          # the bound on a measured rate
WARMUP_S = 1.0            # the buckets' burst, before the window
DEPTH = 300               # messages a key keeps waiting


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("-d", type=float, default=60.0, help="seconds measured")
    ap.add_argument("-r", type=int, default=500, help="RATE: deliveries a second for the queue")
    ap.add_argument("-k", type=int, default=20, help="KEYRATE: deliveries a second for each key")
    ap.add_argument("-K", type=int, default=40, help="keys")
    ap.add_argument("-c", type=int, default=4, help="consumers")
    a = ap.parse_args()

    admin = redis.Redis(port=a.port)
    admin.execute_command("Q.DROP", "rate")
    admin.execute_command("Q.CONFIG", "rate", "MAXLEN", 1000000, "RATE", a.r, "PER", 1000,
                          "KEYRATE", a.k, "PER", 1000)
    keys = ["k%d" % i for i in range(a.K)]
    stop = threading.Event()

    def produce():
        p = redis.Redis(port=a.port)
        while not stop.is_set():
            pipe = p.pipeline(transaction=False)
            for k in keys:
                pipe.execute_command("Q.KEYINFO", "rate", k)
            infos = pipe.execute()
            pipe = p.pipeline(transaction=False)
            for k, info in zip(keys, infos):
                waiting = dict(zip(info[::2], info[1::2]))[b"waiting"]
                for _ in range(max(0, DEPTH - waiting)):
                    pipe.execute_command("Q.PUSH", "rate", k, "x")
            pipe.execute()
            stop.wait(0.05)

    stamps = []          # (time, key) per delivery
    lock = threading.Lock()

    def consume():
        c = redis.Redis(port=a.port, socket_timeout=10)
        while not stop.is_set():
            got = c.execute_command("Q.PULL", "rate", "COUNT", 100, "BLOCK", 200, "NOACK")
            now = time.monotonic()
            with lock:
                stamps.extend((now, m[1]) for m in got)

    prod = threading.Thread(target=produce)
    prod.start()
    time.sleep(0.5)  # the first fill, so the burst is taken from a full queue
    t0 = time.monotonic()
    cons = [threading.Thread(target=consume) for _ in range(a.c)]
    for t in cons:
        t.start()
    time.sleep(WARMUP_S + a.d)
    stop.set()
    for t in cons + [prod]:
        t.join(30)
    lo, hi = t0 + WARMUP_S, t0 + WARMUP_S + a.d
    window = [k for (t, k) in stamps if lo <= t < hi]
    queue_rate = len(window) / a.d
    per_key = {}
    for k in window:
        per_key[k] = per_key.get(k, 0) + 1
    # With RATE below KEYRATE * keys the queue's limit binds: each key then
    # gets its share, RATE / keys, and KEYRATE is checked only when it binds.
    key_bound = a.k * a.K <= a.r
    want_queue = min(a.r, a.k * a.K)
    key_rate = (per_key.get(b"k0", 0) / a.d) if key_bound else None
    ok = abs(queue_rate - want_queue) <= TOLERANCE * want_queue
    if key_bound:
        ok = ok and abs(key_rate - a.k) <= TOLERANCE * a.k
    print("seconds=%.1f rate_setting=%d keyrate_setting=%d keys=%d queue_rate=%.1f expected=%d key_rate=%s" %
          (a.d, a.r, a.k, a.K, queue_rate, want_queue, "%.1f" % key_rate if key_rate is not None else "-"))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
