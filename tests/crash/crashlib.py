"""What the crash tests share (crash_test.py, txn_crash_test.py, queue_crash_test.py, and
their pytest wrappers test_crash_short.py, test_queue_crash_short.py):

  - the RESP client: tests/pylib/resp.py, imported from there (Conn,
    Closed, RespError); a dead server shows as Closed or OSError;
  - Ordod: the one ordod a run starts, restarts, SIGKILLs and SIGTERMs on
    its data directory (--fsync always, 127.0.0.1, a free port each start);
  - the command line both scripts share (--kills, --seconds, --ordod,
    --seed, --keep, --verbose, ordod options after --) and the end of a run
    (keep the data directory when it failed or was asked to, else remove it);
  - kill_round: one round of writer threads ended by a SIGKILL;
  - run_script: a script run as a subprocess, for the short runs under pytest.

Invariants: only the PID this process started is ever signalled; a start
returns only once the server that answers PING on the port reports that
PID (another process may take a free port before ordod binds it: such a
start is retried on a new port); every wait has a deadline.
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
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))

from resp import Closed, Conn, RespError  # noqa: E402

__all__ = ["Closed", "Conn", "RespError", "Ordod", "client", "free_port", "tail", "parse_args", "new_run",
           "kill_round", "restart_summary", "finish", "run_script"]

START_DEADLINE_S = 30.0
START_ATTEMPTS = 5
CLIENT_TIMEOUT_S = 10.0   # a crash-test client's socket timeout
# ordod options when none are given: small log segments and snapshot
# threshold, so kills also land in segment rolls and snapshots
DEFAULT_EXTRA = ["--wal-segment-bytes", "64k", "--snapshot-log-bytes", "128k", "--history-revs", "500"]


# ---- the server -------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(port, timeout=CLIENT_TIMEOUT_S):
    """A new RESP connection to 127.0.0.1:port."""
    return Conn(port, timeout=timeout)


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
                c = client(self.port, timeout=5.0)
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


# ---- a run ------------------------------------------------------------------

def parse_args(doc, add_own):
    """The command line: --kills, --seconds, then the script's own options
    (add_own(parser)), then --ordod, --seed, --keep, --verbose and ordod
    options after --. Fills in the default ordod options and a random seed."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20.0)
    add_own(ap)
    ap.add_argument("--ordod", default=os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod")))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("extra", nargs="*", help="ordod options, after -- (default: small log segments and "
                    "snapshot threshold, so kills also land in segment rolls and snapshots)")
    args = ap.parse_args()
    if not args.extra:
        args.extra = list(DEFAULT_EXTRA)
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    return args


def new_run(prefix, args):
    """A fresh temporary directory and the Ordod that will use it: (base, Ordod)."""
    base = tempfile.mkdtemp(prefix=prefix)
    return base, Ordod(args.ordod, os.path.join(base, "data"), os.path.join(base, "ordod.log"), args.extra)


def kill_round(srv, rng, round_s, writer, kill_no, shares, stats):
    """One round of a run: a writer thread per share, each called as
    writer(t, kill_no, port, shares[t], stats, its own Random, stop); a
    SIGKILL at a random moment within round_s; then every writer stopped
    and joined (the server stays down: the caller checks and restarts)."""
    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(t, kill_no, srv.port, share, stats,
                                                     random.Random(rng.random()), stop))
               for t, share in enumerate(shares)]
    for th in threads:
        th.start()
    time.sleep(rng.uniform(0.02, round_s))  # the random kill moment: the experiment itself
    srv.kill()
    stop.set()
    for th in threads:
        th.join(timeout=60)
        if th.is_alive():
            raise SystemExit("a writer did not finish after the kill")


def restart_summary(starts):
    """The summary line's field for the start times (seconds to first PONG)."""
    s = sorted(starts)
    return "restart_to_ping_ms(median/max)=%.0f/%.0f" % (1000 * s[len(s) // 2], 1000 * s[-1])


def finish(base, bad, problems, keep):
    """Print the problems, then keep the run's directory (failed, or
    --keep) or remove it. Returns the exit status: 1 if bad, else 0."""
    for p in problems:
        print("  " + p)
    if bad:
        print("FAILED; data and log kept in %s" % base)
    elif not keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print("data kept in %s" % base)
    return 1 if bad else 0


def run_script(name, *argv, timeout):
    """Run tests/crash/<name> with argv under this Python; prints and
    returns (exit status, its output)."""
    p = subprocess.run([sys.executable, os.path.join(HERE, name)] + list(argv),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    print(out)
    return p.returncode, out
