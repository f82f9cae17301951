"""Helpers for the client's integration tests (test_client_*.py).

The programs under test are the `ordo` tool and the examples, found next
to $ORDOD (build/ by default). Their stdout is read line by line on a
thread so a test can wait for a line with a deadline instead of sleeping.
The ordod they talk to is the suite's (conftest.py); its SIGKILL and
restart are the server's kill() and restart().
"""
import os
import queue
import signal
import subprocess
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.dirname(os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod")))
DEADLINE_S = 60.0


def prog(name):
    return os.path.join(BUILD, name)


def ordo(srv, *args, timeout=30, stdin=None):
    """Run the ordo tool once; returns the CompletedProcess."""
    cmd = [prog("ordo"), "-p", str(srv.port)]
    if srv.password is not None:
        cmd += ["-a", srv.password]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, timeout=timeout, input=stdin)


class Proc:
    """A program whose stdout lines are collected as they come."""

    def __init__(self, argv, env=None, stdin=None):
        self.argv = [str(a) for a in argv]
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  start_new_session=True, stdin=stdin)
        self.lines = []
        self._q = queue.Queue()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        self._err = []
        self._te = threading.Thread(target=self._read_err, daemon=True)
        self._te.start()

    def _read(self):
        for raw in self.p.stdout:
            self._q.put(raw.decode(errors="replace").rstrip("\n"))
        self._q.put(None)

    def _read_err(self):
        for raw in self.p.stderr:
            self._err.append(raw.decode(errors="replace"))

    def stderr(self):
        return "".join(self._err)

    def wait_line(self, pred, timeout=DEADLINE_S):
        """Collect lines until one satisfies pred; returns it (AssertionError
        at the deadline or when the program's output ends)."""
        for line in self.lines:
            if pred(line):
                return line
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "no matching line from %s within %ss; last lines %r; stderr %s" % (
                self.argv[0], timeout, self.lines[-5:], self.stderr()[-2000:])
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self._q.put(None)
                raise AssertionError("%s ended (rc %s) before a matching line; last %r; stderr %s" % (
                    self.argv[0], self.p.poll(), self.lines[-5:], self.stderr()[-2000:]))
            self.lines.append(line)
            if pred(line):
                return line

    def poll(self):
        """Take the lines that have arrived, without waiting; returns all."""
        while True:
            try:
                line = self._q.get_nowait()
            except queue.Empty:
                return self.lines
            if line is None:
                self._q.put(None)
                return self.lines
            self.lines.append(line)

    def finish(self, timeout=DEADLINE_S):
        """Wait for exit; returns the exit code with every line collected."""
        rc = self.p.wait(timeout=timeout)
        self._t.join(timeout)
        while True:
            try:
                line = self._q.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.lines.append(line)
        return rc

    def kill(self, sig=signal.SIGKILL):
        """Signal the program's whole process group (it and its children)."""
        if self.p.poll() is None:
            os.killpg(self.p.pid, sig)
        return self.finish()

