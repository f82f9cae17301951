"""What the crash tests share (crash_test.py, txn_crash_test.py, queue_crash_test.py, and
their pytest wrappers test_crash_short.py, test_queue_crash_short.py):

  - the RESP client: tests/pylib/resp.py, imported from there (Conn,
    Closed, RespError); a dead server shows as Closed or OSError;
  - new_run: the run's temporary directory and the one ordod it starts,
    restarts, SIGKILLs and SIGTERMs on its data directory (an Ordod of
    tests/pylib/ordoproc.py: --fsync always, 127.0.0.1, a free port each
    start, its log in the run's directory);
  - the command line both scripts share (--kills, --seconds, --ordod,
    --seed, --keep, --verbose, ordod options after --) and the end of a run
    (keep the data directory when it failed or was asked to, else remove it);
  - kill_round: one round of writer threads ended by a SIGKILL;
  - run_script: a script run as a subprocess, for the short runs under pytest.

Invariants (Ordod's): only the PID this process started is ever
signalled; a start returns only once the server that answers on the port
reports that PID (a port lost to another process before ordod bound it is
retried on a new one); every wait has a deadline.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))

from ordoproc import Ordod  # noqa: E402
from resp import Closed, Conn, RespError  # noqa: E402

__all__ = ["Closed", "Conn", "RespError", "client", "parse_args", "new_run",
           "kill_round", "restart_summary", "finish", "run_script"]

CLIENT_TIMEOUT_S = 10.0   # a crash-test client's socket timeout
STOP_DEADLINE_S = 30.0    # the final SIGTERM to exit (recovery state written out under --fsync always)
# ordod options when none are given: small log segments and snapshot
# threshold, so kills also land in segment rolls and snapshots
DEFAULT_EXTRA = ["--wal-segment-bytes", "64k", "--snapshot-log-bytes", "128k", "--history-revs", "500"]


# ---- the server -------------------------------------------------------------

def client(port, timeout=CLIENT_TIMEOUT_S):
    """A new RESP connection to 127.0.0.1:port."""
    return Conn(port, timeout=timeout)


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
    """A fresh temporary directory and the Ordod that will use it: (base,
    Ordod). Its start() picks a new free port each time and returns the
    seconds to ready; kill() is the SIGKILL of a round, stop() the final
    SIGTERM."""
    base = tempfile.mkdtemp(prefix=prefix)
    return base, Ordod(args.ordod, os.path.join(base, "data"), os.path.join(base, "ordod.log"),
                       ["--fsync", "always"] + args.extra, name="crash_test ordod", stop_deadline_s=STOP_DEADLINE_S)


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
