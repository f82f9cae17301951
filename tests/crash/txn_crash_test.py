#!/usr/bin/env python3
"""Transactions under SIGKILL: writers update pairs of keys in MULTI/EXEC,
ordod is killed at random moments, and after every restart no pair is
half-written.

Each of --threads writer threads owns --pairs pairs (a:<t>:<i>,
b:<t>:<i>) and loops: MULTI, SET a v, SET b v, INCR n:<t>:<i>, EXEC, with
v unique over the run. After each restart the checker reads every pair:

  torn     a and b differ (one written without the other), or n (the
           number of EXECs applied to the pair) does not match the value's
           sequence number -- a transaction was split by the crash
  lost     the pair holds a value older than its last acknowledged EXEC
  phantom  the pair holds a value never sent

Allowed: the last acknowledged value or the one in doubt (sent, no reply).
Exits 1 if any count is non-zero, or nothing was acknowledged, or the final
SIGTERM does not exit 0. Like crash_test.py: --kills, --seconds, ordod
options after --.
"""
import random
import sys
import threading
import time

import crashlib
from crashlib import Closed, RespError, client


class Pair:
    def __init__(self, t, i):
        self.a, self.b, self.n = b"a:%d:%d" % (t, i), b"b:%d:%d" % (t, i), b"n:%d:%d" % (t, i)
        self.seq = 0          # EXECs applied to the pair, as last known for certain
        self.acked = None     # (value, seq) of the last acknowledged EXEC, or the baseline
        self.doubt = None     # (value, seq) sent without a reply


class Stats:
    def __init__(self):
        self.acked = self.doubt = self.torn = self.lost = self.phantom = 0
        self.problems = []
        self.lock = threading.Lock()

    def note(self, what, msg):
        with self.lock:
            setattr(self, what, getattr(self, what) + 1)
            if len(self.problems) < 20:
                self.problems.append("%s: %s" % (what, msg))


def writer(t, kill_no, port, pairs, stats, rng, stop):
    try:
        c = client(port)
    except (OSError, Closed):
        return
    round_no = 0
    while not stop.is_set():
        p = rng.choice(pairs)
        round_no += 1
        v = b"w%d-k%d-r%d-s%d" % (t, kill_no, round_no, p.seq + 1)
        p.doubt = (v, p.seq + 1)
        try:
            c.send("MULTI")
            c.send("SET", p.a, v)
            c.send("SET", p.b, v)
            c.send("INCR", p.n)
            c.send("EXEC")
            replies = [c.read() for _ in range(5)]
        except (OSError, Closed):
            return  # the server died: p.doubt stays in doubt
        res = replies[4]
        if isinstance(res, RespError) or not isinstance(res, list):
            stats.note("lost", "EXEC answered %r" % (res,))
            return
        if res[2] != p.seq + 1:
            stats.note("torn", "%r: INCR answered %r, expected %d" % (p.n, res[2], p.seq + 1))
        p.seq += 1
        p.acked, p.doubt = (v, p.seq), None
        with stats.lock:
            stats.acked += 1


def check(p, c, stats):
    a, b, n = c.call("GET", p.a), c.call("GET", p.b), c.call("GET", p.n)
    n = int(n) if n is not None else 0
    if a != b:
        stats.note("torn", "%r=%r but %r=%r" % (p.a, a, p.b, b))
        return
    allowed = {}
    if p.acked is not None:
        allowed[p.acked[0]] = p.acked[1]
    if p.doubt is not None:
        allowed[p.doubt[0]] = p.doubt[1]
        with stats.lock:
            stats.doubt += 1
    if a is None:
        if p.acked is not None:
            stats.note("lost", "%r missing, %r was acknowledged" % (p.a, p.acked[0]))
    elif a not in allowed:
        stats.note("lost" if a.startswith(b"w") else "phantom", "%r holds %r" % (p.a, a))
    elif allowed[a] != n:
        stats.note("torn", "%r holds the value of EXEC %d but %r=%d" % (p.a, allowed[a], p.n, n))
    p.seq = n
    p.acked = (a, n) if a is not None else None
    p.doubt = None


def run(args):
    rng = random.Random(args.seed)
    base, srv = crashlib.new_run("ordo-txn-crash-", args)
    stats = Stats()
    pairs = [[Pair(t, i) for i in range(args.pairs)] for t in range(args.threads)]
    starts = [srv.start()]
    round_s = 2.0 * args.seconds / max(1, args.kills)
    t_begin = time.monotonic()
    for kill_no in range(1, args.kills + 1):
        crashlib.kill_round(srv, rng, round_s, writer, kill_no, pairs, stats)
        starts.append(srv.start())
        c = client(srv.port)
        for ps in pairs:
            for p in ps:
                check(p, c, stats)
        c.close()
    rc = srv.stop()
    print("txn crash test: kills=%d acked_execs=%d in_doubt=%d torn=%d lost=%d phantom=%d elapsed=%.1fs %s "
          "clean_exit=%s" % (args.kills, stats.acked, stats.doubt, stats.torn, stats.lost, stats.phantom,
                             time.monotonic() - t_begin, crashlib.restart_summary(starts), rc == 0))
    bad = stats.torn or stats.lost or stats.phantom or rc != 0 or stats.acked == 0
    return crashlib.finish(base, bad, stats.problems, args.keep)


def main():
    def own(ap):
        ap.add_argument("--threads", type=int, default=3)
        ap.add_argument("--pairs", type=int, default=6, help="pairs per thread")

    args = crashlib.parse_args(__doc__, own)
    print("txn crash test: seed %d, %d kills over ~%.0fs, %d threads x %d pairs, %s"
          % (args.seed, args.kills, args.seconds, args.threads, args.pairs, args.ordod), flush=True)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
