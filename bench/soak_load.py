#!/usr/bin/python3
"""bench/soak_load.py -- the mixed load of bench/soak.sh, and its samples.

  soak_load.py PORT HTTP_PORT PID MINUTES

Runs, for MINUTES, at a steady moderate rate (paced, so the run measures
a server under load, not a saturated machine), every kind of client at
once, over a bounded key space (so stored data stays flat and memory
may too):
  - KV: SET/GET/KV.PUT/DEL over 20,000 keys, values of 16 B to 64 KiB,
    one in 500 of 1 MiB, some with PX (expiry churn);
  - transactions: MULTI, SET x3, GET, EXEC;
  - a queue: Q.PUSH over 1,000 keys, consumers Q.PULL ... Q.ACK;
  - watches: 5 RESP watchers (KV.WATCH PREFIX) and 5 SSE streams
    (GET /v1/watch?prefix=), reading everything;
  - HTTP: PUT and GET /v1/kv/<key>.
Every minute it prints one line: the server's RSS, used_memory, a PING's
latency from a connection of its own (100 in a row: p50, p99, max), and
the operations done in the minute with their p99 latency. At the end, the
RSS trend over the last 3/4 of the run (45 minutes of an hour): the slope
of a least-squares line and its change over that window relative to its
start, "flat" within 5%.
"""
import http.client
import random
import socket
import sys
import threading
import time

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/tests/pylib")
from resp import Conn  # noqa: E402

KEYS = 20000
QKEYS = 1000
BIG_EVERY = 500           # one KV write in this many is 1 MiB
TARGET_OPS_PER_S = 400    # per KV client thread (paced)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = 0
        self.lat = []
        self.errors = 0

    def add(self, dt):
        with self.lock:
            self.ops += 1
            if len(self.lat) < 200000:
                self.lat.append(dt)

    def take(self):
        with self.lock:
            ops, lat, err = self.ops, self.lat, self.errors
            self.ops, self.lat, self.errors = 0, [], 0
        return ops, lat, err


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


def paced(stop, rate, fn):
    """Call fn at about rate per second until stop."""
    period = 1.0 / rate
    nxt = time.monotonic()
    while not stop.is_set():
        fn()
        nxt += period
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        else:
            nxt = time.monotonic()


def kv_client(port, seed, stop, st):
    rng = random.Random(seed)
    c = Conn(port, timeout=30)

    def one():
        k = "k%d" % rng.randrange(KEYS)
        r = rng.random()
        t0 = time.monotonic()
        if r < 0.4:
            c.call("GET", k)
        elif r < 0.8:
            n = 1 << 20 if rng.randrange(BIG_EVERY) == 0 else rng.choice([16, 200, 4096, 65536])
            args = ["SET", k, b"v" * n] + (["PX", str(rng.randrange(1000, 60000))] if rng.random() < 0.2 else [])
            c.call(*args)
        elif r < 0.9:
            c.call("KV.PUT", k, "p%d" % rng.randrange(1 << 30))
        elif r < 0.95:
            c.call("DEL", k)
        else:
            c.send("MULTI")
            for i in range(3):
                c.send("SET", "t%d" % rng.randrange(KEYS), "x%d" % i)
            c.send("GET", k)
            c.send("EXEC")
            for _ in range(6):
                c.read()
        st.add(time.monotonic() - t0)

    paced(stop, TARGET_OPS_PER_S, one)
    c.close()


def queue_producer(port, seed, stop, st):
    rng = random.Random(seed)
    c = Conn(port, timeout=30)

    def one():
        t0 = time.monotonic()
        c.call("Q.PUSH", "soakq", "q%d" % rng.randrange(QKEYS), b"m" * rng.choice([32, 512, 8192]))
        st.add(time.monotonic() - t0)

    paced(stop, 200, one)
    c.close()


def queue_consumer(port, stop, st):
    c = Conn(port, timeout=30)
    while not stop.is_set():
        t0 = time.monotonic()
        got = c.call("Q.PULL", "soakq", "COUNT", "10", "BLOCK", "500")
        if isinstance(got, list):
            for m in got:
                c.call("Q.ACK", "soakq", m[0], m[4])
        st.add(time.monotonic() - t0)
    c.close()


def resp_watcher(port, stop):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*3\r\n$8\r\nKV.WATCH\r\n$1\r\nk\r\n$6\r\nPREFIX\r\n")
    s.settimeout(0.5)
    while not stop.is_set():
        try:
            if not s.recv(1 << 20):
                break
        except socket.timeout:
            pass
    s.close()


def sse_watcher(http_port, stop):
    s = socket.create_connection(("127.0.0.1", http_port))
    s.sendall(b"GET /v1/watch?prefix=k HTTP/1.1\r\nHost: soak\r\n\r\n")
    s.settimeout(0.5)
    while not stop.is_set():
        try:
            if not s.recv(1 << 20):
                break
        except socket.timeout:
            pass
    s.close()


def http_client(http_port, seed, stop, st):
    rng = random.Random(seed)
    c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=30)

    def one():
        k = "/v1/kv/h%d" % rng.randrange(KEYS)
        t0 = time.monotonic()
        if rng.random() < 0.5:
            c.request("PUT", k, body=b"h" * rng.choice([16, 1024, 32768]))
        else:
            c.request("GET", k)
        c.getresponse().read()
        st.add(time.monotonic() - t0)

    paced(stop, 100, one)
    c.close()


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def ping_latency(port):
    c = Conn(port, timeout=30)
    lat = []
    for _ in range(100):
        t0 = time.monotonic()
        c.call("PING")
        lat.append(time.monotonic() - t0)
    used = c.call("INFO", "memory").decode()
    c.close()
    um = [ln.split(":")[1] for ln in used.splitlines() if ln.startswith("used_memory:")]
    return lat, int(um[0]) if um else 0


def trend(samples):
    """Least-squares slope of (minute, rss) and the change it makes over the
    window relative to its start."""
    n = len(samples)
    if n < 2:
        return 0.0, 0.0
    xs = [s[0] for s in samples]
    ys = [s[1] for s in samples]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    start = my + slope * (xs[0] - mx)
    return slope, (slope * (xs[-1] - xs[0])) / start if start else 0.0


def main():
    port, http_port, pid, minutes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    stop = threading.Event()
    kv, q, h = Stats(), Stats(), Stats()
    threads = [threading.Thread(target=kv_client, args=(port, i, stop, kv)) for i in range(3)]
    threads += [threading.Thread(target=queue_producer, args=(port, 100 + i, stop, q)) for i in range(2)]
    threads += [threading.Thread(target=queue_consumer, args=(port, stop, q)) for _ in range(2)]
    threads += [threading.Thread(target=resp_watcher, args=(port, stop)) for _ in range(5)]
    threads += [threading.Thread(target=sse_watcher, args=(http_port, stop)) for _ in range(5)]
    threads += [threading.Thread(target=http_client, args=(http_port, 200 + i, stop, h)) for i in range(2)]
    for t in threads:
        t.daemon = True
        t.start()
    samples = []
    t_start = time.monotonic()
    for minute in range(1, int(minutes) + 1):
        while time.monotonic() < t_start + 60 * minute:
            time.sleep(min(1.0, t_start + 60 * minute - time.monotonic()))
            if not all(t.is_alive() for t in threads[:7] + threads[-2:]):
                raise SystemExit("soak: a load client stopped (the server failed?)")
        rss = status(pid)
        lat, used = ping_latency(port)
        line = "minute %d: rss_mb=%.1f used_memory_mb=%.1f ping_ms(p50/p99/max)=%.2f/%.2f/%.2f" % (
            minute, rss / 1e6, used / 1e6, 1000 * pct(lat, 0.5), 1000 * pct(lat, 0.99), 1000 * max(lat))
        for name, st in (("kv", kv), ("queue", q), ("http", h)):
            ops, ol, err = st.take()
            line += " %s_ops=%d %s_p99_ms=%.1f" % (name, ops, name, 1000 * pct(ol, 0.99))
        print(line, flush=True)
        samples.append((minute, rss))
    stop.set()
    for t in threads:
        t.join(10)
    window = samples[len(samples) // 4:] if len(samples) >= 4 else samples
    slope, change = trend(window)
    print("rss trend over minutes %d..%d: %+.2f MB/min, %+.1f%% over the window: %s"
          % (window[0][0], window[-1][0], slope / 1e6, 100 * change, "flat" if abs(change) <= 0.05 else "NOT flat"))


if __name__ == "__main__":
    main()
