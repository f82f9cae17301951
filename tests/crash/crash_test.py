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

Usage: crash_test.py [--kills N] [--seconds S] [--threads T] [--keys K]
                     [--ordod PATH] [--seed X] [--keep]
The kills are spread over about S seconds: each round lasts a random time
(uniform up to 2*S/N), which is the experiment, not synchronisation.
"""
import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
START_DEADLINE_S = 30.0
START_ATTEMPTS = 5


# ---- a minimal RESP2 client (one request in flight) ------------------------

class Closed(Exception):
    pass


class Err(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self):
        try:
            d = self.sock.recv(65536)
        except OSError as e:
            raise Closed(str(e))
        if not d:
            raise Closed("eof")
        self.buf += d

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Err(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            d, self.buf = self.buf[:n], self.buf[n + 2:]
            return d
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise Closed("unexpected reply %r" % line[:60])

    def call(self, *args):
        try:
            self.sock.sendall(encode(*args))
        except OSError as e:
            raise Closed(str(e))
        return self.read()


# ---- the server -------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ordod:
    def __init__(self, binary, data_dir, log_path, extra):
        self.binary, self.dir, self.log_path, self.extra = binary, data_dir, log_path, extra
        self.proc = None
        self.port = None

    def start(self):
        """Start ordod on a free port; returns the seconds to its first PONG.
        The port is free when chosen but released before ordod binds it: a
        start that lost it to another process ("address already in use") is
        retried on a new port."""
        t0 = time.monotonic()
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            log = open(self.log_path, "ab")
            log.write(b"--- crash_test: starting on port %d\n" % self.port)
            log.flush()
            self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--dir", self.dir,
                                          "--fsync", "always"] + self.extra, stdout=log, stderr=log)
            log.close()
            if self._wait_ready(t0):
                return time.monotonic() - t0
        raise SystemExit("ordod could not bind a free port in %d attempts; see %s" % (START_ATTEMPTS, self.log_path))

    def _wait_ready(self, t0):
        """True once it answers PING as this process; False if the port was taken."""
        deadline = t0 + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "address already in use" in tail(self.log_path, 300).lower():
                    return False
                raise SystemExit("ordod exited %s during start; see %s:\n%s"
                                 % (self.proc.returncode, self.log_path, tail(self.log_path)))
            try:
                c = Conn(self.port, timeout=5.0)
                ok = c.call("PING") == "PONG"
                info = c.call("INFO", "server") if ok else None
                c.close()
                if ok and isinstance(info, bytes) and b"process_id:%d\r\n" % self.proc.pid in info:
                    return True
            except (OSError, Closed):
                pass
            time.sleep(0.005)  # poll interval while the port opens (bounded by the deadline)
        raise SystemExit("ordod not ready within %ss" % START_DEADLINE_S)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)  # exactly the process we started
        self.proc.wait(timeout=30)

    def term(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


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
        self.problems = []

    def note(self, kind, msg):
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.problems) < 50:
            self.problems.append("%s: %s" % (kind, msg))


def writer(tid, rnd, port, keys, stats, rng, stop):
    try:
        c = Conn(port)
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
                elif isinstance(rep, Err) and rep.msg.startswith("CONFLICT"):
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
    base = tempfile.mkdtemp(prefix="ordo-crash-")
    data_dir, log_path = os.path.join(base, "data"), os.path.join(base, "ordod.log")
    srv = Ordod(args.ordod, data_dir, log_path, args.extra)
    stats = Stats()
    keys = [[Key(b"c%d:%d" % (t, i)) for i in range(args.keys)] for t in range(args.threads)]
    prev_rev = 0
    starts = []
    round_s = 2.0 * args.seconds / max(1, args.kills)
    t_begin = time.monotonic()
    starts.append(srv.start())
    for kill_no in range(1, args.kills + 1):
        stop = threading.Event()
        threads = [threading.Thread(target=writer, args=(t, kill_no, srv.port, keys[t], stats,
                                                         random.Random(rng.random()), stop))
                   for t in range(args.threads)]
        for th in threads:
            th.start()
        time.sleep(rng.uniform(0.02, round_s))  # the random kill moment: the experiment itself
        srv.kill()
        stop.set()
        for th in threads:
            th.join(timeout=60)
            if th.is_alive():
                raise SystemExit("a writer did not finish after the kill")
        for ks in keys:
            for k in ks:
                stats.doubt += sum(1 for w in k.writes if w[1] == "doubt")
        starts.append(srv.start())
        c = Conn(srv.port)
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
    rc = srv.term()
    elapsed = time.monotonic() - t_begin
    recov = sorted(starts)
    print("crash test: kills=%d acked_writes=%d in_doubt=%d (applied %d) lost=%d phantom=%d regressions=%d "
          "chain_errors=%d final_revision=%d elapsed=%.1fs restart_to_ping_ms(median/max)=%.0f/%.0f clean_exit=%s"
          % (args.kills, stats.acked, stats.doubt, stats.doubt_applied, stats.lost, stats.phantom,
             stats.regressions, stats.chain, prev_rev, elapsed, 1000 * recov[len(recov) // 2],
             1000 * recov[-1], rc == 0))
    for p in stats.problems:
        print("  " + p)
    bad = stats.lost or stats.phantom or stats.regressions or stats.chain or rc != 0 or stats.acked == 0
    if bad:
        print("FAILED; data and log kept in %s" % base)
    elif not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print("data kept in %s" % base)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--keys", type=int, default=8, help="keys per thread")
    ap.add_argument("--ordod", default=os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod")))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("extra", nargs="*", help="ordod options, after -- (default: small log segments and "
                    "snapshot threshold, so kills also land in segment rolls and snapshots)")
    args = ap.parse_args()
    if not args.extra:
        args.extra = ["--wal-segment-bytes", "64k", "--snapshot-log-bytes", "128k", "--history-revs", "500"]
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    print("crash test: seed %d, %d kills over ~%.0fs, %d threads x %d keys, %s"
          % (args.seed, args.kills, args.seconds, args.threads, args.keys, args.ordod), flush=True)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
