"""Fixtures that run a real ordod (tests/pylib/ordoproc.py's Ordod).

Each test gets its own server on a free loopback port, with its data
directory and log file (the server's stdout and stderr) in the test's tmp
dir, and an HTTP listener on a free port of its own (so servers of
parallel tests do not share the default 7380) unless the test passes
--http-port. Ordod starts it: a port lost to another process before ordod
bound it is retried on a new one, and the server counts as ready only once
the server answering reports our ordod's PID. Teardown sends SIGTERM to
exactly that process and asserts it exited 0 (or was ended by the test),
so a crash or a sanitizer report at exit fails the test. The binary is
$ORDOD (default build/ordod), so the same suite runs against the ASan
build. A failing test's report carries each server's log.

The `either` fixture runs a test twice, against ordod and against a real
redis-server (tests/pylib/redisproc.py), each on a free port: a test of
Redis compatibility makes the same assertions pass on both. Its value has
.client() (redis-py), .raw() (tests/pylib/resp.py's Conn), .port and
.is_ordod.

tests/pylib is put on sys.path here, so test modules import ordoproc
(poll, the bounded wait every test shares) and resp from there.
"""
import os
import sys

import pytest
import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

from ordoproc import FREE, Ordod  # noqa: E402
from redisproc import RedisServer  # noqa: E402
from resp import Conn  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ORDOD = os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod"))
LOG_REPORT_BYTES = 20000   # what a failing test's report shows of each server's log


class Server(Ordod):
    """An ordod of the integration suite: --fsync no unless the test's
    flags say otherwise (later flags win), its password (--requirepass)
    used by readiness, client() and raw()."""

    def __init__(self, tmp_path, index, args):
        args = [str(a) for a in args]
        http_port = FREE
        if "--http-port" in args:
            i = args.index("--http-port")
            http_port = int(args[i + 1])
            del args[i:i + 2]
        password = args[args.index("--requirepass") + 1] if "--requirepass" in args else None
        super().__init__(ORDOD, tmp_path / ("data-%d" % index), tmp_path / ("ordod-%d.log" % index),
                         ["--fsync", "no"] + args, http_port=http_port, password=password,
                         name="ordod #%d" % index)

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
        """The server still answers PING on a new connection (running(): the process runs)."""
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for srv in getattr(item, "_ordod_servers", []):
            rep.sections.append(("%s :%s log (%s)" % (srv.name, srv.port, srv.log_path),
                                 srv.log_tail(LOG_REPORT_BYTES)))


@pytest.fixture
def ordod_factory(request, tmp_path):
    """start(*flags) -> a started Server; every server started is stopped
    at teardown and must exit 0 (unless the test ended it itself)."""
    servers = []
    request.node._ordod_servers = servers

    def start(*flags):
        srv = Server(tmp_path, len(servers), flags)
        servers.append(srv)
        srv.start()
        return srv

    yield start
    bad = []
    for srv in servers:
        rc = srv.stop()
        if rc not in (0, None):
            bad.append("%s :%s exited %r\n%s" % (srv.name, srv.port, rc, srv.log_tail(LOG_REPORT_BYTES)))
    assert not bad, "\n".join(bad)


@pytest.fixture
def server(ordod_factory):
    return ordod_factory()


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()


class RedisTarget:
    """A redis-server seen as a test sees a Server: client(), raw(), port."""

    def __init__(self, proc):
        self.proc = proc
        self.port = proc.port
        self.is_ordod = False

    def client(self, **kw):
        return self.proc.client(**kw)

    def raw(self, timeout=20.0):
        return Conn(self.port, timeout=timeout)


@pytest.fixture(params=["ordod", "redis"])
def either(request, tmp_path):
    """The same test against ordod and against redis-server (see above)."""
    if request.param == "ordod":
        srv = request.getfixturevalue("server")
        srv.is_ordod = True
        yield srv
        return
    proc = RedisServer(tmp_path / "redis", tmp_path / "redis.log")
    proc.start()
    try:
        yield RedisTarget(proc)
    finally:
        rc = proc.stop()
        assert rc == 0, "redis-server exited %r\n%s" % (rc, open(proc.log_path, errors="replace").read()[-4000:])
