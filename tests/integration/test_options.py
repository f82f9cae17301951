"""Every option starts the server at both ends of the range `ordod --help`
prints for it (issue 14, item 8): a value the option check accepts must not
stop the server later with another module's message. And a value one past
an end is refused with a message naming the option."""
import re
import subprocess

import pytest

from conftest import ORDOD
from ordoproc import Ordod, free_port

RANGE = re.compile(r"^\s+--([a-z-]+)\s.*\(default: [^;]*; range (\S+)\.\.(\S+)\)$")
# Options whose ends the loopback harness cannot use: the harness owns the
# port; tls-port needs a certificate, and test_tls.py starts it with one.
SKIP = {"port", "tls-port"}
UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def number(text):
    if text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def ranges():
    out = subprocess.run([ORDOD, "--help"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = RANGE.match(line)
        if m and m.group(1) not in SKIP:
            found.append((m.group(1), number(m.group(2)), number(m.group(3))))
    return found


def test_help_prints_ranges():
    names = {n for n, _, _ in ranges()}
    assert {"max-value-bytes", "max-name-bytes", "history-revs", "max-clients"} <= names


class PingOrdod(Ordod):
    """ordod with --name value. Ready once it answers PING (max-args 1
    refuses the INFO that Ordod's readiness asks); a --node-id other than
    0 needs a cluster to be in: a one-member one, whose raft port (client
    port + offset) is another free port above the client port."""

    def __init__(self, tmp_path, name, value):
        tag = "%s-%s" % (name, value)
        super().__init__(ORDOD, tmp_path / ("d-" + tag), tmp_path / ("ordod-%s.log" % tag),
                         ["--fsync", "no", "--" + name, value], http_port=0, name="ordod --%s %s" % (name, value))
        self.node_id = value if name == "node-id" and value != 0 else None

    def options(self):
        if self.node_id is None:
            return []
        raft = free_port()
        while raft <= self.port:
            raft = free_port()
        return ["--cluster", "%d=127.0.0.1:%d" % (self.node_id, self.port),
                "--cluster-port-offset", str(raft - self.port)]

    def is_ours(self, conn):
        return conn.call("PING") == "PONG"


def start_and_ping(tmp_path, name, value):
    """Start ordod with --name value, answer PING, stop with SIGTERM: it
    must exit 0."""
    srv = PingOrdod(tmp_path, name, value)
    try:
        srv.start()
    finally:
        rc = srv.stop()
    assert rc == 0, "--%s %s: rc %s\n%s" % (name, value, rc, srv.log_tail())


@pytest.mark.parametrize("name,lo,hi", ranges())
def test_option_starts_at_both_ends(tmp_path, name, lo, hi):
    for value in (lo, hi):
        start_and_ping(tmp_path, name, value)


@pytest.mark.parametrize("name,lo,hi", ranges())
def test_option_past_its_ends_is_refused_by_name(tmp_path, name, lo, hi):
    for value in (lo - 1, hi + 1):
        if value < 0 and lo == 0 and name.endswith("bytes"):
            value = -1
        p = subprocess.run([ORDOD, "--dir", str(tmp_path / "d"), "--" + name, str(value)],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0
        assert "option %s" % name in p.stderr, p.stderr
        assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("value", ["2g", "513m"])
def test_too_large_value_limit_is_refused_by_name(tmp_path, value):
    """Before: --max-value-bytes 2g passed the option check, then stopped the
    server with the log's "wal: invalid options". Now the option itself is
    refused, naming it, before anything is created."""
    p = subprocess.run([ORDOD, "--dir", str(tmp_path / "d"), "--max-value-bytes", value],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "option max-value-bytes" in p.stderr, p.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("spec", ["write-eio:-1", "write-eio:0", "sync-eio:99999999999999999999",
                                  "append-eio:18446744073709551617", "write-eio:5x", "write-eio:", "nosuch:3"])
def test_fault_seam_with_a_count_that_cannot_fire_is_refused(tmp_path, spec):
    """A negative, zero or overflowing count was accepted and the seam never
    fired, so a test using it checked nothing."""
    p = subprocess.run([ORDOD, "--dir", str(tmp_path / "d"), "--port", "0", "--unixsocket", str(tmp_path / "s"),
                        "--debug-wal-fault", spec], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "debug-wal-fault" in p.stderr and spec in p.stderr, p.stderr
    assert not (tmp_path / "d").exists()
