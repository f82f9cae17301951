"""One ordod process, and the bounded wait, for every Python suite
(tests/integration, tests/crash, tests/cluster).

Owns:
  - poll: pred()'s first true value, tried until a deadline; at the
    deadline an AssertionError naming what was awaited and the last value
    pred returned;
  - Ordod: one ordod process on loopback: its binary, arguments, data
    directory and log file (stdout and stderr, appended across starts,
    with a "--- ordoproc: starting ..." line per start); start on a free
    port (or a given one), wait until ready, stop (SIGTERM, then SIGKILL
    past a deadline), kill (SIGKILL, for crash tests), restart in place
    (the same port, arguments and data directory), the tail of its log,
    and the exits it was not asked for (crashes);
  - free_port, tail: a free loopback port, the last bytes of a file.

Suites extend Ordod for what is theirs (the integration suite's redis-py
client and password, a cluster member's --cluster options and CLUSTER
INFO); they override options() to add arguments and is_ours() to change
how readiness is asked.

Invariants: only the PID an Ordod started is ever signalled; a start
returns only once the server answering on the port reports that PID in
INFO server (a free port is released before ordod binds it, so another
process may take it: such a start fails with "address already in use" and
is retried on a new port, or reported); every wait has a deadline; sleeps
are only poll intervals.
"""
import os
import signal
import socket
import subprocess
import time

from resp import Closed, Conn

HOST = "127.0.0.1"
POLL_DEADLINE_S = 20.0     # poll's default: every awaited state comes in well under a second
POLL_EVERY_S = 0.02        # poll's default interval: short against the waits, light on 2 cores and
                           # on a cluster leader, where every command polled appends a raft entry
READY_EVERY_S = 0.005      # readiness probes: restart_to_ping_ms (tests/crash) is measured with them
START_DEADLINE_S = 30.0    # start to ready; generous for sanitizer builds on a loaded machine
STOP_DEADLINE_S = 20.0     # SIGTERM to exit before SIGKILL (a sanitizer build's exit report takes time)
KILL_DEADLINE_S = 30.0     # SIGKILL to reaped: the kernel's part only
START_ATTEMPTS = 5         # starts on new ports after a lost port race
READY_PROBE_TIMEOUT_S = 5.0  # socket timeout of one readiness probe
LOG_TAIL_BYTES = 6000      # what a failure message quotes of a log
PORT_TAKEN = "address already in use"   # ordod's log when its bind failed
FREE = "free"              # http_port=FREE: a free port, picked anew with each new client port


def poll(pred, what, deadline_s=POLL_DEADLINE_S, every_s=POLL_EVERY_S):
    """pred()'s first true value, tried every every_s seconds (at least
    once, and once more at the deadline); when deadline_s runs out, an
    AssertionError naming what was awaited (what: a string, or a function
    giving one, which may describe the state seen) and the last value pred
    returned."""
    assert deadline_s > 0 and every_s > 0
    deadline = time.monotonic() + deadline_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s (last value seen: %r)"
                                 % (deadline_s, what() if callable(what) else what, v))
        time.sleep(every_s)  # poll interval of a bounded wait, not synchronisation


def free_port():
    """A loopback port free at the time of the call (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def tail(path, n=LOG_TAIL_BYTES):
    """The last n bytes of the file at path, as text ("" if unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class Ordod:
    """One ordod: binary --port P --dir D [--http-port H] options() args.

    http_port: an int passes it (0, the default: no HTTP listener; ordod's
    own default is a fixed port, which two servers, or anything else on the
    machine, would fight over), None passes none (whatever args say), FREE
    picks a free port with every new client port. password: sent with AUTH before readiness
    is asked. name: how logs and failures call it.
    """

    def __init__(self, binary, data_dir, log_path, args=(), http_port=0, password=None, name="ordod",
                 stop_deadline_s=STOP_DEADLINE_S):
        self.binary, self.dir, self.log_path = str(binary), str(data_dir), str(log_path)
        self.args = [str(a) for a in args]
        self.http_port = http_port
        self._http_free = http_port == FREE
        self.password = password
        self.name = name
        self.stop_deadline_s = stop_deadline_s
        self.port = None
        self.proc = None
        self.expect_exit = True   # False while it runs: an exit we did not cause is a crash
        self.crashes = []         # exits we did not cause: (exit code, log tail)
        self.env = None           # the process's environment (None: ours), e.g. a preloaded shim

    # -- the command line

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def options(self):
        """Arguments between --http-port and args (a subclass's own)."""
        return []

    def listen_args(self):
        """The arguments that make it listen on self.port."""
        return ["--port", str(self.port)]

    def connect(self, timeout):
        """A connection to self.port (the readiness probe's)."""
        return Conn(self.port, timeout=timeout)

    def argv(self):
        cmd = [self.binary] + self.listen_args() + ["--dir", self.dir]
        if self.http_port is not None:
            cmd += ["--http-port", str(self.http_port)]
        return cmd + self.options() + self.args

    # -- starting

    def start(self, port=None):
        """Start on port (None: a free one) and wait until ready; a port
        lost to another process before ordod bound it is retried on a new
        free port (self.port says which). Returns the seconds from the
        start to ready; AssertionError after START_ATTEMPTS lost races."""
        t0 = time.monotonic()
        for attempt in range(START_ATTEMPTS):
            p = port if port is not None and attempt == 0 else free_port()
            if self.start_on(p, new_port=attempt > 0 or p != self.port):
                return time.monotonic() - t0
        raise AssertionError("%s could not bind a free port in %d attempts; log %s:\n%s"
                             % (self.name, START_ATTEMPTS, self.log_path, self.log_tail()))

    def start_on(self, port, new_port=False):
        """One start on exactly port; True once ready, False if it exited
        because its port was taken. new_port: a FREE http port is picked
        anew (a lost race may have been for it)."""
        assert not self.running(), "%s is already running (pid %d)" % (self.name, self.proc.pid)
        self.port = port
        if self._http_free and (new_port or self.http_port == FREE):
            self.http_port = free_port()
        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(b"--- ordoproc: starting %s on port %d (%s)\n"
                      % (self.name.encode(), port, time.strftime("%H:%M:%S").encode()))
            log.flush()
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=log, env=self.env)
        self.expect_exit = False
        return self._wait_ready()

    def restart(self):
        """Start again in place: the same port, arguments and data
        directory (after kill() or stop())."""
        if not self.start_on(self.port):
            raise AssertionError("%s: port %d was taken while it was down" % (self.name, self.port))

    def is_ours(self, conn):
        """The server on conn is the process we started: AUTH (with a
        password), then INFO server must name our PID."""
        if self.password is not None and conn.call("AUTH", self.password) != "OK":
            return False
        info = conn.call("INFO", "server")
        return isinstance(info, bytes) and (b"process_id:%d\r\n" % self.proc.pid) in info

    def _wait_ready(self):
        def ready():
            if self.proc.poll() is not None:
                return "exited"
            try:
                with self.connect(READY_PROBE_TIMEOUT_S) as c:
                    return "ours" if self.is_ours(c) else None
            except (OSError, Closed):
                return None
        try:
            state = poll(ready, lambda: "%s (pid %d) to answer on port %d" % (self.name, self.proc.pid, self.port),
                         START_DEADLINE_S, every_s=READY_EVERY_S)
        except AssertionError as e:
            self.kill()   # a failed start leaves no process behind
            raise AssertionError("%s; log %s:\n%s" % (e, self.log_path, self.log_tail())) from None
        if state == "ours":
            return True
        self.expect_exit = True
        if PORT_TAKEN in tail(self.log_path, 600).lower():
            return False
        raise AssertionError("%s exited %s during start; log %s:\n%s"
                             % (self.name, self.proc.returncode, self.log_path, self.log_tail()))

    # -- ending

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def check_crash(self):
        """Record an exit we did not cause (once). True if there is one."""
        if self.proc is not None and not self.expect_exit and self.proc.poll() is not None:
            self.expect_exit = True
            self.crashes.append((self.proc.returncode, self.log_tail()))
        return bool(self.crashes)

    def kill(self):
        """SIGKILL exactly the process we started (a crash); waits for it."""
        self.check_crash()
        self.expect_exit = True
        if self.running():
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=KILL_DEADLINE_S)

    def sigterm(self):
        """Send SIGTERM to exactly our process; False if it was not running."""
        self.check_crash()
        if not self.running():
            return False
        self.expect_exit = True
        self.proc.send_signal(signal.SIGTERM)
        return True

    def reap(self, deadline):
        """Wait for the exit after sigterm() until deadline (monotonic), then
        SIGKILL. Returns the exit code, or "hung" if it had to be killed."""
        try:
            return self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=KILL_DEADLINE_S)
            return "hung"

    def stop(self):
        """SIGTERM, then SIGKILL past stop_deadline_s. Returns the exit
        code ("hung" if it had to be killed); if it was not running, the
        code of an exit we did not cause (a crash), else None."""
        if not self.sigterm():
            return self.crashes[-1][0] if self.crashes else None
        return self.reap(time.monotonic() + self.stop_deadline_s)

    # -- its log

    def log_tail(self, n=LOG_TAIL_BYTES):
        """The last n bytes of its log, as text."""
        return tail(self.log_path, n)

    def log_text(self):
        """Its whole log (every start), as text."""
        return tail(self.log_path, os.path.getsize(self.log_path)) if os.path.exists(self.log_path) else ""
