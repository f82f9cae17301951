#!/usr/bin/python3
"""Crash test: concurrent writers against a real ordod that is SIGKILLed at
random moments and restarted, many times; after every restart a checker
compares the recovered state with what the clients were told.

Each writer thread owns a disjoint set of keys and keeps one request in
flight at a time: `SET k v` (then `KV.GET k` to learn the key's mod
revision) or `KV.PUT k v IFREV r` with the mod revision it last learned.
Every value is unique over the run ("w<thread>-r<round>-<seq>"). A request is *acknowledged* when
its reply arrived (OK / a revision); when the connection dies with a request
outstanding, that request is *in doubt* (sent, maybe applied, not
acknowledged).

After each restart, for every key (see check_key):
  - lost:       the value present is older than the last acknowledged one,
                or the key is missing although a write to it was acknowledged;
  - phantom:    the value present was never sent (or was refused);
  - chain:      the key's mod_rev is not the revision the last acknowledged
                KV.PUT returned (value unchanged), or a write in doubt
                became visible with a mod_rev not above it; or an IFREV
                that followed the chain got -CONFLICT;
  - regression: KV.REV's current revision is below the highest revision any
                client was acknowledged, or below the previous recovery's.
The recovered state then becomes the baseline for the next round. The run
fails (exit 1) if any count is non-zero.

With --powerloss the kill is a power loss: ordod runs with
tests/shim/powerloss.c preloaded, and before each restart the data
directory is put back as the disk would have kept it (files as of their
last fsync, directory entries as of the directory's fsync; powerloss.py),
so the run tests what the log syncs, not only the order of its writes.

Usage: crash_test.py [--kills N] [--seconds S] [--threads T] [--keys K]
                     [--powerloss] [--ordod PATH] [--seed X] [--keep]
The kills are spread over about S seconds: each round lasts a random time
(uniform up to 2*S/N), which is the experiment, not synchronisation.
"""
import os
import random
import sys
import threading
import time

import crashlib
import powerloss
from crashlib import Closed, RespError, client


# ---- model of what each key may hold ----------------------------------------

class Key:
    """Writes to one key since the last baseline, in order. baseline:
    (value, mod_rev) recovered at the last check (None: absent)."""

    def __init__(self, name):
        self.name = name
        self.baseline = None       # (value bytes, mod_rev) or None
        self.writes = []           # [value, state, rev]; state: "acked" | "doubt"
        self.known_rev = 0         # the mod_rev the owner believes (for IFREV)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.acked = 0
        self.doubt = 0
        self.doubt_applied = 0
        self.conflicts = 0
        self.readonly = 0
        self.max_acked_rev = 0
        self.lost = 0
        self.phantom = 0
        self.chain = 0
        self.regressions = 0
        self.unsynced_files = 0     # --powerloss: files named durably whose contents were never synced
        self.problems = []

    def note(self, kind, msg):
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.problems) < 50:
            self.problems.append("%s: %s" % (kind, msg))


def writer(tid, rnd, port, keys, stats, rng, stop):
    try:
        c = client(port)
    except OSError:
        return
    seq = 0
    try:
        while not stop.is_set():
            k = rng.choice(keys)
            seq += 1
            val = b"w%d-r%d-%d" % (tid, rnd, seq)  # unique over the whole run
            use_put = rng.random() < 0.5
            entry = [val, "doubt", 0]
            k.writes.append(entry)  # sent, from here on, until a reply says otherwise
            if use_put:
                rep = c.call("KV.PUT", k.name, val, "IFREV", k.known_rev)
                if isinstance(rep, int):
                    entry[1], entry[2] = "acked", rep
                    k.known_rev = rep
                elif isinstance(rep, RespError) and rep.msg.startswith("CONFLICT"):
                    k.writes.pop()  # refused: never applied
                    with stats.lock:
                        stats.note("chain", "%s: IFREV %d got %s" % (k.name.decode(), k.known_rev, rep.msg))
                        stats.conflicts += 1
                    k.known_rev = int(rep.msg.split()[1])
                    continue
                else:
                    raise Closed("unexpected reply %r" % (rep,))
            else:
                rep = c.call("SET", k.name, val)
                if rep != "OK":
                    raise Closed("unexpected reply %r" % (rep,))
                entry[1] = "acked"
                entry[2] = None  # revision unknown until the KV.GET below answers
                with stats.lock:
                    stats.acked += 1
                got = c.call("KV.GET", k.name)
                if not isinstance(got, list) or got[0] != val:
                    with stats.lock:
                        stats.note("lost", "%s: read %r right after SET %r" % (k.name.decode(), got, val))
                    continue
                entry[2] = k.known_rev = got[2]
                with stats.lock:
                    stats.max_acked_rev = max(stats.max_acked_rev, entry[2])
                continue
            with stats.lock:
                stats.acked += 1
                stats.max_acked_rev = max(stats.max_acked_rev, entry[2])
    except (Closed, OSError, ValueError):
        pass  # the server died: whatever is outstanding stays "doubt"
    finally:
        c.close()


def check_key(k, got, stats):
    """got: KV.GET reply after the restart. Returns the new baseline."""
    name = k.name.decode()
    last_acked = max((i for i, w in enumerate(k.writes) if w[1] == "acked"), default=-1)
    if got is None:
        if last_acked >= 0:
            stats.note("lost", "%s missing; last acked %r" % (name, k.writes[last_acked][0]))
        elif k.baseline is not None:
            stats.note("lost", "%s missing; it held %r before the crash" % (name, k.baseline[0]))
        return None
    val, mod_rev = got[0], got[2]
    allowed = {}
    if last_acked < 0 and k.baseline is not None:
        allowed[k.baseline[0]] = ("baseline", k.baseline[1])
    for i, w in enumerate(k.writes):
        if i >= max(last_acked, 0) and (i == last_acked or w[1] == "doubt"):
            allowed[w[0]] = (w[1], w[2])
    if val not in allowed:
        older = any(w[0] == val for w in k.writes) or (k.baseline is not None and k.baseline[0] == val)
        if older:
            stats.note("lost", "%s holds the older %r; last acked %r" % (name, val, k.writes[last_acked][0]))
        else:
            stats.note("phantom", "%s holds %r, never sent" % (name, val))
        return (val, mod_rev)
    state, rev = allowed[val]
    if state in ("acked", "baseline") and rev is not None and rev != mod_rev:
        stats.note("chain", "%s: mod_rev %d, but %r was acknowledged at %d" % (name, mod_rev, val, rev))
    if state == "doubt":
        floor = k.writes[last_acked][2] if last_acked >= 0 else (k.baseline[1] if k.baseline else 0)
        if mod_rev <= (floor or 0):
            stats.note("chain", "%s: in-doubt %r applied at %d, not above %d" % (name, val, mod_rev, floor))
        stats.doubt_applied += 1
    return (val, mod_rev)


def run(args):
    rng = random.Random(args.seed)
    base, srv = crashlib.new_run("ordo-crash-", args)
    shadow = os.path.join(base, "shadow")
    if args.powerloss:
        shim = os.path.join(os.path.dirname(args.ordod), powerloss.SHIM_NAME)
        if not os.path.exists(shim):
            raise SystemExit("missing %s: build the test shims (make)" % shim)
        srv.env = powerloss.env(shim, srv.dir, shadow)
    stats = Stats()
    keys = [[Key(b"c%d:%d" % (t, i)) for i in range(args.keys)] for t in range(args.threads)]
    prev_rev = 0
    starts = []
    round_s = 2.0 * args.seconds / max(1, args.kills)
    t_begin = time.monotonic()
    starts.append(srv.start())
    for kill_no in range(1, args.kills + 1):
        crashlib.kill_round(srv, rng, round_s, writer, kill_no, keys, stats)
        for ks in keys:
            for k in ks:
                stats.doubt += sum(1 for w in k.writes if w[1] == "doubt")
        if args.powerloss:
            got = powerloss.rebuild(srv.dir, shadow)
            stats.unsynced_files += got["empty"]
        starts.append(srv.start())
        c = client(srv.port)
        cur = c.call("KV.REV")[0]
        if cur < stats.max_acked_rev:
            stats.note("regressions", "after kill %d: revision %d < acknowledged %d" % (kill_no, cur, stats.max_acked_rev))
        if cur < prev_rev:
            stats.note("regressions", "after kill %d: revision %d < %d recovered before" % (kill_no, cur, prev_rev))
        prev_rev = cur
        for ks in keys:
            for k in ks:
                k.baseline = check_key(k, c.call("KV.GET", k.name), stats)
                k.writes = []
                k.known_rev = k.baseline[1] if k.baseline else 0
        c.close()
        if args.verbose:
            print("kill %d: revision %d, acked %d so far" % (kill_no, cur, stats.acked), flush=True)
    rc = srv.stop()
    elapsed = time.monotonic() - t_begin
    print("crash test: kills=%d%s acked_writes=%d in_doubt=%d (applied %d) lost=%d phantom=%d regressions=%d "
          "chain_errors=%d final_revision=%d elapsed=%.1fs %s clean_exit=%s"
          % (args.kills, " (power losses: %d files unsynced)" % stats.unsynced_files if args.powerloss else "",
             stats.acked, stats.doubt, stats.doubt_applied, stats.lost, stats.phantom,
             stats.regressions, stats.chain, prev_rev, elapsed, crashlib.restart_summary(starts), rc == 0))
    bad = stats.lost or stats.phantom or stats.regressions or stats.chain or rc != 0 or stats.acked == 0
    return crashlib.finish(base, bad, stats.problems, args.keep)


def main():
    def own(ap):
        ap.add_argument("--threads", type=int, default=4)
        ap.add_argument("--keys", type=int, default=8, help="keys per thread")
        ap.add_argument("--powerloss", action="store_true",
                        help="each kill is a power loss: only what was synced survives (powerloss.py)")

    args = crashlib.parse_args(__doc__, own)
    print("crash test: seed %d, %d kills over ~%.0fs, %d threads x %d keys, %s"
          % (args.seed, args.kills, args.seconds, args.threads, args.keys, args.ordod), flush=True)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
