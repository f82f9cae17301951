"""Leases, locks and leader election against a real ordod: every command
and error, FIFO waiters (one wake-up per release, disconnects, WAIT
timeouts), fencing with a paused holder (SIGSTOP) and across restarts
(SIGTERM and SIGKILL), an election checker over ELECT.OBSERVE, and the
lateness of lease expiry as a watcher sees it."""
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

import pytest

from ordoproc import poll
from resp import Conn, Push, RespError
from watchlib import WatchConn

PYLIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib")   # resp.py, for PAUSED_HOLDER


def err(v, code):
    assert isinstance(v, RespError), "expected -%s, got %r" % (code, v)
    assert v.code == code, v
    return True


def run_threads(body, n):
    """Run body(i) for i in range(n), each on its own thread; join them
    (120 s each) and return the exceptions they raised."""
    errors = []

    def run(i):
        try:
            body(i)
        except Exception as e:
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    return errors


# The deadline of a wait (ordoproc.poll) for a server-side state: waiters
# parked, leases and terms run out (the longest TTLs here are seconds).
WAIT_S = 30.0


def blocked(c, kind=None):
    """INFO clients: blocked_clients, or blocked_<kind> (lock, elect, ...)."""
    text = c.call("INFO", "clients").decode()
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields["blocked_clients" if kind is None else "blocked_" + kind])


# ---- leases -----------------------------------------------------------------


def elapsed_ms(t0):
    """Milliseconds since t0 (time.monotonic()), rounded up: what a TTL
    read after t0 may have lost at most, however slow the machine."""
    return int((time.monotonic() - t0) * 1000) + 2


def test_lease_commands(server):
    with server.raw() as c:
        t0 = time.monotonic()
        lid = c.call("LEASE.GRANT", 10000)
        assert isinstance(lid, int) and lid > 0
        rem, nkeys = c.call("LEASE.TTL", lid)
        assert 10000 - elapsed_ms(t0) <= rem <= 10000 and nkeys == 0
        assert isinstance(c.call("KV.PUT", "lk/a", "1", "LEASE", lid), int)
        assert isinstance(c.call("KV.PUT", "lk/b", "2", "LEASE", lid), int)
        assert c.call("LEASE.TTL", lid)[1] == 2
        assert c.call("KV.GET", "lk/a")[4] == lid
        # a put without LEASE detaches the key
        assert isinstance(c.call("KV.PUT", "lk/b", "3"), int)
        assert c.call("LEASE.TTL", lid)[1] == 1
        assert c.call("LEASE.KEEPALIVE", lid) == 10000
        assert c.call("LEASE.REVOKE", lid) == 1
        assert c.call("GET", "lk/a") is None
        assert c.call("GET", "lk/b") == b"3"
        assert c.call("LEASE.REVOKE", lid) == 0
        err(c.call("LEASE.KEEPALIVE", lid), "NOTFOUND")
        err(c.call("LEASE.TTL", lid), "NOTFOUND")
        err(c.call("KV.PUT", "lk/c", "x", "LEASE", lid), "NOTFOUND")
        err(c.call("KV.PUT", "lk/c", "x", "LEASE", 999999), "NOTFOUND")
        assert c.call("GET", "lk/c") is None
        # argument errors
        for bad in ("0", "-1", "x", "31536000001", ""):
            err(c.call("LEASE.GRANT", bad), "ERR")
        err(c.call("LEASE.GRANT"), "ERR")
        err(c.call("LEASE.KEEPALIVE", "abc"), "ERR")
        err(c.call("LEASE.REVOKE", "-3"), "ERR")
        err(c.call("LEASE.TTL", 1, 2), "ERR")
        err(c.call("KV.DEL", "lk/a", "LEASE", 1), "ERR")
        err(c.call("KV.PUT", "lk/a", "v", "LEASE"), "ERR")
        err(c.call("KV.PUT", "lk/a", "v", "LEASE", 1, "LEASE", 1), "ERR")


def test_lease_expiry_ends_everything(server):
    with server.raw() as c:
        # long enough that the lease is still live for the attaches below
        # on a loaded machine; the test then waits it out
        lid = c.call("LEASE.GRANT", 1000)
        assert isinstance(c.call("KV.PUT", "le/k", "v", "LEASE", lid), int)
        tok = c.call("LOCK.ACQUIRE", "le-lock", 0, "LEASE", lid)
        assert isinstance(tok, int) and tok > lid
        assert c.call("LOCK.INFO", "le-lock")[0] == tok
        # ttl 0 needs a lease
        err(c.call("LOCK.ACQUIRE", "le-lock2", 0), "ERR")
        poll(lambda: c.call("GET", "le/k") is None, "lease expiry", WAIT_S)
        assert c.call("LOCK.INFO", "le-lock") == [None, 0, 0]
        err(c.call("LEASE.TTL", lid), "NOTFOUND")
        err(c.call("LOCK.ACQUIRE", "le-lock", 100, "LEASE", lid), "NOTFOUND")


def test_lease_expiry_lateness(server):
    """Actual expiry - TTL, seen by a watcher of lease-attached keys: never
    negative (t0 is taken before the grant is sent, so t_del - t0 - ttl is
    an upper bound of the lateness and must still be >= 0)."""
    n = 40
    w = WatchConn(server.port, proto=3)
    w.watch("lt/", "PREFIX")
    seen = {}
    done = threading.Event()

    def reader():
        while len(seen) < n:
            e = w.next_event(timeout=30)
            if e[0] == b"watch" and e[3] == b"del":
                seen[e[4]] = time.time()
        done.set()

    th = threading.Thread(target=reader)
    th.start()
    grants = {}
    rnd = random.Random(7)
    with server.raw() as c:
        for i in range(n):
            ttl = rnd.randrange(20, 400)
            key = b"lt/%d" % i
            t0 = time.time()  # the server's clock is the wall clock too
            lid = c.call("LEASE.GRANT", ttl)
            assert c.call("KV.PUT", key, "v", "LEASE", lid) > 0
            grants[key] = (t0, ttl)
    th.join(timeout=60)
    assert done.is_set(), "only %d of %d deletions seen" % (len(seen), n)
    late = sorted((seen[k] - t0) * 1000.0 - ttl for k, (t0, ttl) in grants.items())
    print("lease expiry lateness (ms): min %.2f median %.2f max %.2f (n=%d)"
          % (late[0], statistics.median(late), late[-1], n))
    assert late[0] >= 0, "a lease ended early: %r" % late[:5]
    w.close()


# ---- locks -----------------------------------------------------------------------


def test_lock_commands(server):
    with server.raw() as c:
        t0 = time.monotonic()
        t1 = c.call("LOCK.ACQUIRE", "L", 10000)
        assert isinstance(t1, int)
        assert c.call("LOCK.ACQUIRE", "L", 10000) is None
        assert c.call("LOCK.ACQUIRE", "L", 10000, "WAIT", 0) is None
        tok, rem, waiters = c.call("LOCK.INFO", "L")
        assert tok == t1 and 10000 - elapsed_ms(t0) <= rem <= 10000 and waiters == 0
        assert c.call("LOCK.CHECK", "L", t1) == 1
        assert c.call("LOCK.CHECK", "L", t1 + 1) == 0
        assert c.call("LOCK.EXTEND", "L", t1, 20000) == 1
        assert c.call("LOCK.INFO", "L")[1] > 10000
        assert c.call("LOCK.EXTEND", "L", t1 + 1, 20000) == 0
        # fencing
        rev = c.call("KV.PUT", "fk", "a", "FENCE", "L", t1)
        assert isinstance(rev, int)
        err(c.call("KV.PUT", "fk", "b", "FENCE", "L", t1 - 1), "NOTHOLDER")
        err(c.call("KV.PUT", "fk", "b", "FENCE", "other", t1), "NOTHOLDER")
        err(c.call("KV.DEL", "fk", "FENCE", "L", t1 + 5), "NOTHOLDER")
        assert c.call("KV.GET", "fk")[0] == b"a"
        assert c.call("KV.DEL", "fk", "FENCE", "L", t1) > rev
        assert c.call("LOCK.RELEASE", "L", t1 + 1) == 0
        assert c.call("LOCK.RELEASE", "L", t1) == 1
        assert c.call("LOCK.RELEASE", "L", t1) == 0
        assert c.call("LOCK.CHECK", "L", t1) == 0
        assert c.call("LOCK.INFO", "L") == [None, 0, 0]
        err(c.call("KV.PUT", "fk", "b", "FENCE", "L", t1), "NOTHOLDER")
        t2 = c.call("LOCK.ACQUIRE", "L", 50)
        assert t2 > t1
        # expiry: lapsed at the deadline (no longer honoured), then freed by
        # its expire record
        assert poll(lambda: c.call("LOCK.CHECK", "L", t2) == 0, "lock lapse", WAIT_S)
        assert poll(lambda: c.call("LOCK.INFO", "L")[0] is None, "lock expiry", WAIT_S)
        t3 = c.call("LOCK.ACQUIRE", "L", 1000)
        assert t3 > t2
        # argument errors
        err(c.call("LOCK.ACQUIRE", "L"), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", 0), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", -5), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", 31536000001), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", 10, "WAIT"), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", 10, "WAIT", -1), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", 10, "WAIT", 1, "WAIT", 1), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", 10, "BOGUS"), "ERR")
        err(c.call("LOCK.ACQUIRE", "L", 10, "LEASE", 424242), "NOTFOUND")
        err(c.call("LOCK.RELEASE", "L"), "ERR")
        err(c.call("LOCK.RELEASE", "L", "x"), "ERR")
        err(c.call("LOCK.EXTEND", "L", t3, 0), "ERR")
        err(c.call("LOCK.INFO"), "ERR")
        err(c.call("LOCK.CHECK", "L", "-1"), "ERR")
        err(c.call("KV.PUT", "fk", "v", "FENCE", "L"), "ERR")
        err(c.call("KV.PUT", "fk", "v", "FENCE", "L", "x"), "ERR")
        err(c.call("LOCK.ACQUIRE", "n" * 20000, 10), "LIMIT")


def test_lock_wait_timeout(server):
    with server.raw() as a, server.raw() as b:
        t1 = a.call("LOCK.ACQUIRE", "W", 60000)
        t0 = time.monotonic()
        assert b.call("LOCK.ACQUIRE", "W", 1000, "WAIT", 150) is None
        assert (time.monotonic() - t0) * 1000 >= 150
        info = a.call("LOCK.INFO", "W")
        assert info[0] == t1 and info[2] == 0
        # the connection works on after its timeout
        assert b.call("PING") == "PONG"


def _park(port, name, ttl=60000, wait=30000):
    c = Conn(port, timeout=30)
    c.send("LOCK.ACQUIRE", name, ttl, "WAIT", wait)
    return c


def test_lock_waiters_fifo_one_wakeup(server):
    n = 8
    with server.raw() as c:
        tok = c.call("LOCK.ACQUIRE", "F", 60000)
        waiters = []
        for i in range(n):
            waiters.append(_park(server.port, "F"))
            poll(lambda: c.call("LOCK.INFO", "F")[2] == i + 1, "waiter %d parked" % i, WAIT_S)
        prev = tok
        for i in range(n):
            assert c.call("LOCK.RELEASE", "F", prev) == 1
            # exactly one wake-up: the head of the queue, and the rest still wait
            got = waiters[i].read()
            assert isinstance(got, int) and got > prev, got
            info = c.call("LOCK.INFO", "F")
            assert info[0] == got and info[2] == n - i - 1, info
            for w in waiters[i + 1:]:
                w.settimeout(0.0)
                try:
                    data = w.sock.recv(1)
                except (BlockingIOError, OSError):
                    data = None
                assert not data, "a second waiter was woken"
                w.settimeout(30)
            prev = got
        for w in waiters:
            w.close()


def test_lock_waiter_disconnect_leaves_queue(server):
    with server.raw() as c:
        tok = c.call("LOCK.ACQUIRE", "D", 60000)
        a = _park(server.port, "D")
        poll(lambda: c.call("LOCK.INFO", "D")[2] == 1, "1 waiter on D", WAIT_S)
        b = _park(server.port, "D")
        poll(lambda: c.call("LOCK.INFO", "D")[2] == 2, "2 waiters on D", WAIT_S)
        d = _park(server.port, "D")
        poll(lambda: c.call("LOCK.INFO", "D")[2] == 3, "3 waiters on D", WAIT_S)
        b.close()
        poll(lambda: c.call("LOCK.INFO", "D")[2] == 2, "disconnected waiter removed", WAIT_S)
        assert c.call("LOCK.RELEASE", "D", tok) == 1
        ta = a.read()
        assert isinstance(ta, int)
        a.close()  # the holder disconnecting does not release: holding is by TTL
        assert c.call("LOCK.INFO", "D")[0] == ta
        assert c.call("LOCK.RELEASE", "D", ta) == 1
        td = d.read()
        assert td > ta
        info = c.call("LOCK.INFO", "D")
        assert info[0] == td and info[2] == 0
        d.close()


def test_lock_waiter_with_ended_lease_is_skipped(server):
    with server.raw() as c:
        tok = c.call("LOCK.ACQUIRE", "S", 60000)
        lid = c.call("LEASE.GRANT", 60000)
        a = Conn(server.port, timeout=30)
        a.send("LOCK.ACQUIRE", "S", 0, "WAIT", 30000, "LEASE", lid)
        poll(lambda: c.call("LOCK.INFO", "S")[2] == 1, "1 waiter on S", WAIT_S)
        b = _park(server.port, "S")
        poll(lambda: c.call("LOCK.INFO", "S")[2] == 2, "2 waiters on S", WAIT_S)
        assert c.call("LEASE.REVOKE", lid) == 1
        assert c.call("LOCK.RELEASE", "S", tok) == 1
        err(a.read(), "NOTFOUND")
        tb = b.read()
        assert isinstance(tb, int) and c.call("LOCK.INFO", "S")[0] == tb
        a.close()
        b.close()


PAUSED_HOLDER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from resp import Conn
c = Conn(int(sys.argv[1]), timeout=30)
tok = c.call("LOCK.ACQUIRE", "P", 200)
print(tok, flush=True)
sys.stdin.readline()            # paused (SIGSTOP) before this returns
r = c.call("KV.PUT", "guarded", "stale-%d" % tok, "FENCE", "P", tok)
print(getattr(r, "code", r), flush=True)
"""


def test_fencing_sigstopped_holder(server):
    """A holder stopped past its TTL while another client acquires: its
    fenced write is refused."""
    stale_accepted = 0
    tokens = []
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-c", PAUSED_HOLDER, str(server.port), PYLIB],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            t1 = int(p.stdout.readline())
            os.kill(p.pid, signal.SIGSTOP)
            with server.raw(timeout=30) as c:
                # waits server-side for the stopped holder's TTL to end
                t2 = c.call("LOCK.ACQUIRE", "P", 60000, "WAIT", 20000)
                assert isinstance(t2, int) and t2 > t1
                assert c.call("KV.PUT", "guarded", "fresh-%d" % t2, "FENCE", "P", t2) > t2
                os.kill(p.pid, signal.SIGCONT)
                p.stdin.write("go\n")
                p.stdin.flush()
                outcome = p.stdout.readline().strip()
                if outcome != "NOTHOLDER":
                    stale_accepted += 1
                assert c.call("GET", "guarded") == b"fresh-%d" % t2
                assert c.call("LOCK.RELEASE", "P", t2) == 1
            tokens += [t1, t2]
        finally:
            os.kill(p.pid, signal.SIGCONT)
            p.wait(timeout=20)
    assert stale_accepted == 0
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


def test_fencing_concurrent_checker(server):
    """Threads take a short lock, write fenced, sometimes 'pause' past the
    TTL (a GC pause, simulated by sleeping) and write again. Checker: the
    token of every accepted write still held at the write's revision (no
    later token was granted before it); tokens never regress."""
    n_threads, rounds, ttl = 5, 25, 60
    granted, accepted = [], []
    lock = threading.Lock()

    def worker(tid):
        rnd = random.Random(tid)
        with Conn(server.port, timeout=30) as c:
            last = 0
            for i in range(rounds):
                tok = c.call("LOCK.ACQUIRE", "CF", ttl, "WAIT", 20000)
                if tok is None:
                    continue
                assert tok > last
                last = tok
                with lock:
                    granted.append(tok)
                for attempt in range(2):
                    r = c.call("KV.PUT", "cf-res", "%d" % tok, "FENCE", "CF", tok)
                    if isinstance(r, int):
                        with lock:
                            accepted.append((r, tok))
                    else:
                        assert r.code == "NOTHOLDER", r
                    if attempt == 0 and rnd.random() < 0.3:
                        time.sleep(ttl * 1.5 / 1000.0)  # the fault: a pause past the TTL
                c.call("LOCK.RELEASE", "CF", tok)

    errors = run_threads(worker, n_threads)
    assert not errors, errors
    granted.sort()
    assert len(set(granted)) == len(granted)
    stale = [(r, t) for (r, t) in accepted if any(t < g < r for g in granted)]
    print("fencing: %d grants, %d accepted writes, %d stale accepted" % (len(granted), len(accepted), len(stale)))
    assert stale == []
    # the resource's history never goes back to an older token
    with server.raw() as c:
        vals = [int(t) for (r, t) in sorted(accepted)]
        assert vals == sorted(vals)
        assert int(c.call("GET", "cf-res")) == vals[-1]


def _restart(ordod_factory, srv, how, data_dir):
    if how == "kill":
        srv.kill()
    else:
        assert srv.stop() == 0
    return ordod_factory("--dir", data_dir, "--fsync", "always")


@pytest.mark.parametrize("how", ["term", "kill"])
def test_tokens_across_restart(ordod_factory, tmp_path, how):
    data_dir = str(tmp_path / "coord-data")
    srv = ordod_factory("--dir", data_dir, "--fsync", "always")
    before = []
    with srv.raw() as c:
        held = c.call("LOCK.ACQUIRE", "R", 600000)
        before.append(held)
        for i in range(20):
            t = c.call("LOCK.ACQUIRE", "R%d" % i, 600000)
            before.append(t)
            assert c.call("LOCK.RELEASE", "R%d" % i, t) == 1
        term = c.call("ELECT.CAMPAIGN", "RE", "leader-1", 600000)
        before.append(term)
        lid = c.call("LEASE.GRANT", 600000)
        c.call("KV.PUT", "rk", "v", "LEASE", lid)
    srv = _restart(ordod_factory, srv, how, data_dir)
    with srv.raw() as c:
        # holdings survive: the same holder, the same term, the same lease
        assert c.call("LOCK.INFO", "R")[0] == held
        assert c.call("LOCK.CHECK", "R", held) == 1
        assert c.call("ELECT.LEADER", "RE") == [b"leader-1", term]
        assert c.call("LEASE.TTL", lid)[1] == 1
        err(c.call("KV.PUT", "x", "v", "FENCE", "R", held - 1), "NOTHOLDER")
        after = []
        for i in range(20):
            t = c.call("LOCK.ACQUIRE", "R%d" % i, 600000)
            after.append(t)
        assert c.call("LOCK.RELEASE", "R", held) == 1
        after.append(c.call("LOCK.ACQUIRE", "R", 600000))
        assert min(after) > max(before), (before, after)
        assert after == sorted(after)


# ---- elections ----------------------------------------------------------------


def test_elect_commands(server):
    with server.raw() as c:
        assert c.call("ELECT.LEADER", "E") is None
        t1 = c.call("ELECT.CAMPAIGN", "E", "v1", 10000)
        assert isinstance(t1, int)
        assert c.call("ELECT.LEADER", "E") == [b"v1", t1]
        assert c.call("ELECT.CAMPAIGN", "E", "v2", 10000, "WAIT", 0) is None
        assert c.call("ELECT.CAMPAIGN", "E", "v2", 10000, "WAIT", 50) is None
        assert c.call("ELECT.PROCLAIM", "E", t1, "v1b") == 1
        assert c.call("ELECT.PROCLAIM", "E", t1 + 1, "x") == 0
        assert c.call("ELECT.LEADER", "E") == [b"v1b", t1]
        t0 = time.monotonic()
        assert 10000 - elapsed_ms(t0) <= c.call("ELECT.KEEPALIVE", "E", t1) <= 10000
        err(c.call("ELECT.KEEPALIVE", "E", t1 + 1), "NOTHOLDER")
        assert c.call("ELECT.RESIGN", "E", t1 + 1) == 0
        assert c.call("ELECT.RESIGN", "E", t1, "HANDOVER", "state-42") == 1
        assert c.call("ELECT.LEADER", "E") is None
        t2, hv = c.call("ELECT.CAMPAIGN", "E", "v2", 10000, "HANDOVER")
        assert t2 > t1 and hv == b"state-42"
        assert c.call("ELECT.RESIGN", "E", t2) == 1
        t3, hv = c.call("ELECT.CAMPAIGN", "E", "v3", 10000, "HANDOVER")
        assert t3 > t2 and hv is None
        err(c.call("ELECT.KEEPALIVE", "E", t2), "NOTHOLDER")
        # a term that expires
        assert c.call("ELECT.RESIGN", "E", t3) == 1
        t4 = c.call("ELECT.CAMPAIGN", "E", "v4", 40)
        poll(lambda: c.call("ELECT.LEADER", "E") is None, "term expiry", WAIT_S)
        err(c.call("ELECT.KEEPALIVE", "E", t4), "NOTHOLDER")
        assert c.call("ELECT.PROCLAIM", "E", t4, "late") == 0
        # argument errors
        err(c.call("ELECT.CAMPAIGN", "E", "v", 0), "ERR")
        err(c.call("ELECT.CAMPAIGN", "E", "v"), "ERR")
        err(c.call("ELECT.CAMPAIGN", "E", "v", 10, "WAIT"), "ERR")
        err(c.call("ELECT.CAMPAIGN", "E", "v", 10, "HANDOVER", "HANDOVER"), "ERR")
        err(c.call("ELECT.CAMPAIGN", "E", "v", 10, "NOPE"), "ERR")
        err(c.call("ELECT.PROCLAIM", "E", "x", "v"), "ERR")
        err(c.call("ELECT.RESIGN", "E", 1, "HANDOVER"), "ERR")
        err(c.call("ELECT.RESIGN", "E", 1, "BOGUS", "v"), "ERR")
        err(c.call("ELECT.LEADER"), "ERR")
        err(c.call("ELECT.OBSERVE"), "ERR")
        err(c.call("ELECT.CAMPAIGN", "n" * 20000, "v", 10), "LIMIT")


def test_elect_campaign_waits_without_wait(server):
    """ELECT.CAMPAIGN without WAIT answers once the candidate leads."""
    with server.raw() as c:
        t1 = c.call("ELECT.CAMPAIGN", "EW", "a", 60000)
        b = Conn(server.port, timeout=30)
        b.send("ELECT.CAMPAIGN", "EW", "b", 60000)
        # resign only once b is parked: otherwise its campaign could find
        # the election vacant and the wait would never be exercised
        poll(lambda: blocked(c, "elect") == 1, "candidate parked", WAIT_S)
        assert c.call("ELECT.RESIGN", "EW", t1) == 1
        t2 = b.read()
        assert t2 > t1
        assert c.call("ELECT.LEADER", "EW") == [b"b", t2]
        b.close()


def test_elect_observe_resp2_watch_mode(ordod_factory):
    srv = ordod_factory("--max-watches-per-client", 2)
    o = WatchConn(srv.port, proto=2)
    oid = o.cmd("ELECT.OBSERVE", "O")
    assert isinstance(oid, int)
    assert o.next_event() == [b"leader", b"O", 0, None]
    err(o.cmd("GET", "x"), "ERR")  # RESP2 watch mode
    with srv.raw() as c:
        t = c.call("ELECT.CAMPAIGN", "O", "me", 10000)
        assert o.next_event() == [b"leader", b"O", t, b"me"]
        c.call("ELECT.PROCLAIM", "O", t, "me2")
        assert o.next_event() == [b"leader", b"O", t, b"me2"]
        c.call("ELECT.RESIGN", "O", t)
        assert o.next_event() == [b"leader", b"O", 0, None]
    wid = o.watch("somekey")
    err(o.cmd("ELECT.OBSERVE", "O2"), "LIMIT")
    assert o.cmd("KV.UNWATCH", oid) == 1
    assert o.cmd("KV.UNWATCH") == 1
    assert o.cmd("GET", "x") is None  # out of watch mode
    o.close()


def test_election_checker(server):
    """Candidates in threads campaign (HANDOVER), lead, proclaim, then
    resign (with or without a hand-over value) or stop keepalives and
    expire. Checked against what two observers saw: terms strictly
    increase, no two leaders overlap (a vacancy between any two terms),
    observers see every term, every proclaim and every vacancy, and each
    hand-over value reaches exactly the next leader."""
    name = "CK"
    n_threads, rounds, ttl = 6, 6, 80
    observers = [WatchConn(server.port, proto=p) for p in (2, 3)]
    for o in observers:
        assert isinstance(o.cmd("ELECT.OBSERVE", name), int)
        assert o.next_event() == [b"leader", name.encode(), 0, None]
    lock = threading.Lock()
    terms = {}      # term -> dict(value, hv, proclaimed, handover, end)

    def candidate(tid):
        rnd = random.Random(100 + tid)
        with Conn(server.port, timeout=30) as c:
            for i in range(rounds):
                val = "c%d-%d" % (tid, i)
                r = c.call("ELECT.CAMPAIGN", name, val, ttl, "WAIT", 20000, "HANDOVER")
                if r is None:
                    continue
                term, hv = r[0], r[1]
                rec = {"value": val.encode(), "hv": hv, "lapsed": len(r) == 3 and r[2] == 0, "proclaimed": [],
                       "handover": None, "end": None}
                if rnd.random() < 0.5:
                    pv = ("p-%d" % term).encode()
                    if c.call("ELECT.PROCLAIM", name, term, pv) == 1:
                        rec["proclaimed"].append(pv)
                action = rnd.randrange(3)
                if action == 0:
                    h = ("h-%d" % term).encode()
                    if c.call("ELECT.RESIGN", name, term, "HANDOVER", h) == 1:
                        rec["handover"], rec["end"] = h, "resign"
                elif action == 1:
                    if c.call("ELECT.RESIGN", name, term) == 1:
                        rec["end"] = "resign"
                else:
                    rec["end"] = "expire"  # stop keepalives
                if rec["end"] is None:
                    rec["end"] = "expire"  # lapsed before it could resign
                with lock:
                    terms[term] = rec

    errors = run_threads(candidate, n_threads)
    assert not errors, errors
    last = max(terms)
    results = []
    for o in observers:
        seen_last = []

        def pred(e):
            if e[2] == last:
                seen_last.append(1)
            return seen_last and e[2] == 0

        results.append(o.events_until(pred, timeout=30))
    for evs in results:
        check_observed(evs, terms, name.encode())
    assert results[0] == results[1]
    print("election: %d terms, %d observed events, %d hand-overs"
          % (len(terms), len(results[0]), sum(1 for r in terms.values() if r["handover"])))
    for o in observers:
        o.close()


def check_observed(evs, terms, name):
    cur = 0          # the term leading now (0: vacant)
    prev_term = 0
    order = []
    for e in evs:
        assert e[0] == b"leader" and e[1] == name, e
        t, v = e[2], e[3]
        if t == 0:
            assert cur != 0, "a vacancy without a leader"
            cur = 0
            continue
        if t == cur:
            assert v in terms[t]["proclaimed"], (t, v)
            continue
        assert cur == 0, "term %d began while term %d led" % (t, cur)
        assert t > prev_term, "terms went back: %d after %d" % (t, prev_term)
        assert v == terms[t]["value"], (t, v)
        cur = prev_term = t
        order.append(t)
    assert cur == 0
    assert order == sorted(terms), "observers missed terms: %r vs %r" % (order, sorted(terms))
    for a, b in zip(order, order[1:]):
        if terms[a]["handover"] is not None or terms[a]["end"] == "resign":
            assert terms[b]["hv"] == terms[a]["handover"] and not terms[b]["lapsed"], (a, b, terms[a], terms[b])
        else:  # it expired: its last value reaches the next leader, marked not handed over
            last = terms[a]["proclaimed"][-1] if terms[a]["proclaimed"] else terms[a]["value"]
            assert terms[b]["hv"] == last and terms[b]["lapsed"], (a, b, terms[a], terms[b])
    assert terms[order[0]]["hv"] is None


# ---- coordination memory under max-memory-bytes --------------------------------


COORD_MAX_MEMORY = 40000


def coord_memory(srv):
    m = srv.info("memory")
    m = {k: int(m[k]) for k in ("used_memory", "used_memory_kv", "used_memory_queues", "used_memory_coord")}
    assert m["used_memory"] == m["used_memory_kv"] + m["used_memory_queues"] + m["used_memory_coord"], m
    return m


def restart_kill(srv):
    """SIGKILL srv and start it again on its data directory (on its port
    unless another process took it meanwhile)."""
    srv.kill()
    srv.start(srv.port)


def test_coord_memory_counts_towards_max_memory(ordod_factory):
    """Leases, locks, elections, their values and hand-overs, and parked
    waiters count in used_memory_coord and towards max-memory-bytes: past
    it, growing coordination writes get -LIMIT, releases still work, and a
    restart (log replay, snapshot) reaches the same total."""
    srv = ordod_factory("--max-memory-bytes", COORD_MAX_MEMORY, "--fsync", "always")
    with srv.raw() as c:
        assert coord_memory(srv)["used_memory_coord"] == 0
        lid = c.call("LEASE.GRANT", 60000)
        m1 = coord_memory(srv)["used_memory_coord"]
        assert m1 > 0
        tok = c.call("LOCK.ACQUIRE", "lock-" + "n" * 500, 60000, "LEASE", lid)
        m2 = coord_memory(srv)["used_memory_coord"]
        assert m2 > m1 + 500
        term = c.call("ELECT.CAMPAIGN", "E", "v" * 2000, 60000)
        m3 = coord_memory(srv)["used_memory_coord"]
        assert m3 > m2 + 2000
        assert c.call("KV.PUT", "attached", "x", "LEASE", lid) > 0
        # a parked candidate counts while it waits, and not after
        w = srv.raw()
        w.send("ELECT.CAMPAIGN", "E", "w" * 3000, 60000, "WAIT", 60000)
        poll(lambda: blocked(c, "elect") == 1, "candidate parked", WAIT_S)
        assert coord_memory(srv)["used_memory_coord"] > m3 + 3000
        w.close()
        poll(lambda: blocked(c) == 0, "candidate gone", WAIT_S)
        # a lock waiter parked before the limit keeps its place
        lw = srv.raw()
        lw.send("LOCK.ACQUIRE", "lock-" + "n" * 500, 1000, "WAIT", 60000)
        poll(lambda: blocked(c, "lock") == 1, "lock waiter parked", WAIT_S)
        # fill with leaderships until the limit refuses one
        terms = []
        for i in range(200):
            r = c.call("ELECT.CAMPAIGN", "fill%d" % i, "f" * 1000, 60000)
            if isinstance(r, RespError):
                err(r, "LIMIT")
                break
            terms.append(("fill%d" % i, r))
        else:
            raise AssertionError("max-memory-bytes never refused a campaign")
        full = coord_memory(srv)
        assert full["used_memory"] > COORD_MAX_MEMORY
        assert "max-memory-bytes" in r.msg
        # every growing coordination write is refused...
        err(c.call("LEASE.GRANT", 1000), "LIMIT")
        err(c.call("LOCK.ACQUIRE", "other", 1000), "LIMIT")
        err(c.call("ELECT.CAMPAIGN", "other", "v", 1000), "LIMIT")
        err(c.call("ELECT.PROCLAIM", "E", term, "bigger"), "LIMIT")
        # ...and so is queueing behind a waiter (the request would be kept)
        err(c.call("LOCK.ACQUIRE", "lock-" + "n" * 500, 1000, "WAIT", 5000), "LIMIT")
        assert blocked(c) == 1
        assert coord_memory(srv) == full  # refusals change nothing
        # keepalives, releases, resigns (with a hand-over) and revokes work
        assert c.call("ELECT.KEEPALIVE", "E", term) > 0
        assert c.call("LEASE.KEEPALIVE", lid) > 0
        assert c.call("LOCK.EXTEND", "lock-" + "n" * 500, tok, 60000) == 1
        for name, t in terms[: len(terms) // 2]:
            assert c.call("ELECT.RESIGN", name, t) == 1
        assert c.call("ELECT.RESIGN", "E", term, "HANDOVER", "h" * 700) == 1
        assert coord_memory(srv)["used_memory_coord"] < full["used_memory_coord"]
        # room again: growing writes work
        assert isinstance(c.call("LEASE.GRANT", 60000), int)
        lw.close()
        poll(lambda: blocked(c) == 0, "lock waiter gone", WAIT_S)
        # churn that ends where it started leaves the total where it was
        before = coord_memory(srv)["used_memory_coord"]
        for i in range(20):
            l2 = c.call("LEASE.GRANT", 60000)
            t2 = c.call("LOCK.ACQUIRE", "churn%d" % i, 0, "LEASE", l2)
            assert isinstance(t2, int)
            assert c.call("LEASE.REVOKE", l2) == 1
        assert coord_memory(srv)["used_memory_coord"] == before
        state = coord_memory(srv)
    # a restart replaying the log, then one loading a snapshot, reach the same total
    restart_kill(srv)
    assert coord_memory(srv) == state
    with srv.raw() as c:
        assert c.call("SNAPSHOT") > 0
        poll(lambda: srv.info("persistence")["snapshot_in_progress"] == "0", "snapshot", WAIT_S)
    restart_kill(srv)
    assert int(srv.info("persistence")["snapshot_loaded_revision"]) > 0  # this time from the snapshot
    assert coord_memory(srv) == state
    with srv.raw() as c:
        # the hand-over is still there, and is consumed by the next campaign
        assert c.call("ELECT.CAMPAIGN", "E", "x", 60000, "HANDOVER")[1] == b"h" * 700
