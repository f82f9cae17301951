"""Fixtures that run a real ordod.

Each test gets its own server on a free loopback port with its data
directory in a tmp dir. The port is found free and then released before
ordod binds it, so another process may take it in between: a start that
fails with "address already in use" is retried on a new port, and
readiness (polled with a deadline) requires the server that answers to
report our ordod's pid, not just any PONG on that port. Teardown sends SIGTERM to exactly that process and asserts it
exited 0, so a crash or a sanitizer report at exit fails the test. The
binary is $ORDOD (default build/ordod), so the same suite runs against the
ASan build. The server's stderr goes to a file that is attached to the
report of a failing test. Also here: poll, the bounded wait for a
condition that test modules share.
"""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

from resp import Closed, Conn  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ORDOD = os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod"))
START_DEADLINE_S = 20.0
STOP_DEADLINE_S = 20.0
START_ATTEMPTS = 5
POLL_DEADLINE_S = 20.0


def poll(pred, what, deadline_s=POLL_DEADLINE_S, every_s=0.01):
    """pred()'s first true value, tried every every_s seconds until
    deadline_s runs out; then an AssertionError naming what was awaited."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every_s)  # poll interval of a bounded wait, not synchronisation
    raise AssertionError("timed out waiting for %s" % what)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp_path, args):
        self.port = free_port()
        self.dir = tmp_path / ("data-%d" % self.port)
        self.stderr_path = tmp_path / ("ordod-%d.stderr" % self.port)
        self.args = list(args)
        self.password = None
        if "--requirepass" in self.args:
            self.password = self.args[self.args.index("--requirepass") + 1]
        self._err = open(self.stderr_path, "ab")
        # The HTTP listener (default 7380) gets a free port of its own, so
        # servers of parallel tests do not share it; 0 if a test says so.
        self.http_port = None
        self.spawn(self.port)

    def spawn(self, port=None):
        """Start ordod on port (a new free one if None) with this server's
        data directory and flags, and wait until it is ready. A bind that
        lost the race for the port is retried on another."""
        for attempt in range(START_ATTEMPTS):
            self.port = port if port is not None and attempt == 0 else free_port()
            if "--http-port" in self.args:
                self.http_port = int(self.args[self.args.index("--http-port") + 1])
            elif self.http_port is None or attempt > 0:
                self.http_port = free_port()
            self._err.write(b"--- conftest: starting on port %d\n" % self.port)
            self._err.flush()
            cmd = [ORDOD, "--port", str(self.port), "--dir", str(self.dir), "--fsync", "no"] + self.args
            if "--http-port" not in self.args:
                cmd += ["--http-port", str(self.http_port)]
            self.proc = subprocess.Popen(cmd, stdout=self._err, stderr=self._err)
            self.pid = self.proc.pid
            if self._wait_ready():
                return
        raise AssertionError("ordod could not bind a free port in %d attempts:\n%s" % (START_ATTEMPTS, self.stderr()))

    def _is_ours(self, c):
        """The server on this port is the process we started."""
        if self.password is not None:
            r = c.call("AUTH", self.password)
            if r != "OK":
                return False
        text = c.call("INFO", "server")
        return isinstance(text, bytes) and (b"process_id:%d\r\n" % self.pid) in text

    def _wait_ready(self):
        """True once ready; False if it exited because the port was taken."""
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "address already in use" in self.stderr().lower():
                    return False
                raise AssertionError("ordod exited with %s during start:\n%s" % (self.proc.returncode, self.stderr()))
            try:
                with Conn(self.port, timeout=5.0) as c:
                    r = c.call("PING")
                    if (r == "PONG" or getattr(r, "code", "") == "NOAUTH") and self._is_ours(c):
                        return True
            except (OSError, Closed):
                pass
            time.sleep(0.01)  # poll interval while waiting for the port to open
        # Not ready in time: end the process we started, so a failed test
        # leaves no server behind.
        self.proc.kill()
        self.proc.wait(timeout=STOP_DEADLINE_S)
        raise AssertionError("ordod not ready within %ss:\n%s" % (START_DEADLINE_S, self.stderr()))

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def client(self, **kw):
        if self.password is not None:
            kw.setdefault("password", self.password)
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def raw(self, timeout=20.0, auth=True):
        c = Conn(self.port, timeout=timeout)
        if auth and self.password is not None:
            assert c.call("AUTH", self.password) == "OK"
        return c

    def alive(self):
        """The server still answers PING on a new connection."""
        with self.raw() as c:
            return c.call("PING") == "PONG"

    def info(self, section):
        with self.raw() as c:
            text = c.call("INFO", section).decode()
        out = {}
        for line in text.splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def stop(self):
        """SIGTERM exactly this process; returns its exit code."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait()
            rc = "hung (killed)"
        self._err.close()
        return rc


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for srv in getattr(item, "_ordod_servers", []):
            rep.sections.append(("ordod :%d stderr" % srv.port, srv.stderr()[-20000:]))


@pytest.fixture
def ordod_factory(request, tmp_path):
    """start(*flags) -> Server; every server started is stopped at teardown
    and must exit 0."""
    servers = []
    request.node._ordod_servers = servers

    def start(*flags):
        srv = Server(tmp_path, [str(f) for f in flags])
        servers.append(srv)
        return srv

    yield start
    bad = []
    for srv in servers:
        rc = srv.stop()
        if rc != 0:
            bad.append("ordod :%d exited %r\n%s" % (srv.port, rc, srv.stderr()[-20000:]))
    assert not bad, "\n".join(bad)


@pytest.fixture
def server(ordod_factory):
    return ordod_factory()


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()
