"""One real redis-server on loopback, for the tests that run the same
assertions against ordod and Redis (tests/integration, the `either`
fixture of conftest.py).

Owns: the redis-server process it started (only that PID is signalled),
its free port, and its working directory and log file in the test's tmp
dir. Nothing is persisted (no RDB, no AOF). A start returns once the
server on the port answers PING and reports our PID in INFO server; a
port lost to another process before Redis bound it is retried on a new
one. Every wait has a deadline.
"""
import os
import signal
import subprocess
import time

import redis

from ordoproc import HOST, POLL_EVERY_S, free_port, tail

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
START_DEADLINE_S = 20.0
STOP_DEADLINE_S = 20.0
START_ATTEMPTS = 5


class RedisServer:
    def __init__(self, work_dir, log_path, name="redis-server"):
        self.dir, self.log_path, self.name = str(work_dir), str(log_path), name
        self.port = None
        self.proc = None

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            argv = [REDIS_SERVER, "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no",
                    "--dir", self.dir, "--daemonize", "no", "--protected-mode", "no", "--logfile", self.log_path]
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
            if self._ready():
                return
            self._reap()
        raise AssertionError("%s did not start in %d attempts; log %s:\n%s"
                             % (self.name, START_ATTEMPTS, self.log_path, tail(self.log_path)))

    def _ready(self):
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # exited: the port was taken, say
            try:
                c = redis.Redis(host=HOST, port=self.port, socket_timeout=2)
                ok = int(c.info("server")["process_id"]) == self.proc.pid
                c.close()
                if ok:
                    return True
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                pass
            time.sleep(POLL_EVERY_S)  # poll interval of a bounded wait
        return False

    def _reap(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=STOP_DEADLINE_S)

    def client(self, **kw):
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host=HOST, port=self.port, **kw)

    def stop(self):
        """SIGTERM, then SIGKILL past the deadline; the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=STOP_DEADLINE_S)
