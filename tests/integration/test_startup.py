"""Start-up refusals: ordod that cannot start says why in one line, exits
non-zero, and leaves nothing behind.

- A taken port: the message says it could not listen (not "SIGTERM
  received"), and a data directory that did not exist is not left behind.
- A busy data directory (another ordod holds it): refused before anything
  in it is read; the first server's snapshot is not loaded by the second
  (no "loaded snapshot" line), and the first goes on unharmed.

No timing assertions: "refuses quickly" is checked by what the second
server did not do (load, replay), not by a clock.
"""
import os
import socket
import subprocess

from conftest import ORDOD
from ordoproc import poll
from resp import Conn

RUN_DEADLINE_S = 20.0


def run_ordod(*args):
    """Run ordod to its exit; (exit status, stderr text)."""
    p = subprocess.run([ORDOD, "--http-port", "0"] + [str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=RUN_DEADLINE_S)
    return p.returncode, p.stderr.decode(errors="replace")


def test_taken_port_says_so_and_leaves_no_directory(tmp_path):
    data = tmp_path / "never-made"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        rc, err = run_ordod("--port", port, "--dir", data, "--fsync", "no")
    lines = err.strip().splitlines()
    assert rc != 0, err
    assert len(lines) == 1 and "cannot listen on 127.0.0.1:%d" % port in lines[0], err
    assert "address already in use" in err.lower(), err
    assert "SIGTERM" not in err and "recovered" not in err, err
    assert not data.exists(), "ordod left %s behind: %s" % (data, os.listdir(str(data)))


def test_taken_port_keeps_an_existing_directory(ordod_factory, tmp_path):
    """A directory that held data stays as it was: only one made for the
    failed start is removed."""
    srv = ordod_factory()
    with srv.raw() as c:
        assert c.call("KV.PUT", "k", "v") is not None
    assert srv.stop() == 0
    before = sorted(os.listdir(str(srv.dir)))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        rc, err = run_ordod("--port", taken.getsockname()[1], "--dir", srv.dir, "--fsync", "no")
    assert rc != 0 and "cannot listen" in err, err
    assert sorted(os.listdir(str(srv.dir))) == before


def test_busy_directory_is_refused_before_loading(ordod_factory, tmp_path):
    srv = ordod_factory()
    with srv.raw() as c:
        for i in range(200):
            assert c.call("KV.PUT", "key-%d" % i, "value-%d" % i) is not None
        assert c.call("SNAPSHOT") is not None
    poll(lambda: srv.info("persistence")["snapshots_taken"] != "0", "the snapshot")
    assert os.path.exists(os.path.join(str(srv.dir), "snapshot.ordo"))

    rc, err = run_ordod("--port", 0, "--unixsocket", tmp_path / "second.sock", "--dir", srv.dir, "--fsync", "no")
    lines = err.strip().splitlines()
    assert rc != 0, err
    assert len(lines) == 1 and "in use by another process" in lines[0] and str(srv.dir) in lines[0], err
    assert "loaded snapshot" not in err and "recovered" not in err, err
    assert not (tmp_path / "second.sock").exists()
    # The first server is unharmed.
    with srv.raw() as c:
        assert c.call("KV.GET", "key-7") is not None
        assert c.call("PING") == "PONG"


def test_failed_recovery_exits_cleanly_and_closes_the_listeners(tmp_path):
    """Recovery fails after the listeners are open (a damaged snapshot):
    ordod says why, exits 1 (not a crash), removes its unix socket and
    leaves the directory as it found it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "snapshot.ordo").write_bytes(b"not a snapshot at all, not even close")
    sock = tmp_path / "ordod.sock"
    rc, err = run_ordod("--port", 0, "--unixsocket", sock, "--dir", data, "--fsync", "no")
    assert rc == 1, (rc, err)
    assert "cannot recover from" in err and "snapshot.ordo" in err, err
    assert not sock.exists()
    assert sorted(os.listdir(str(data))) == ["snapshot.ordo"]
