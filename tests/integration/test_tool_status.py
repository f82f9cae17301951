"""`ordo status` (issue 24): a summary, not a dump of INFO -- role,
revision, how far durability trails, the log's size, the queues' totals
(count, waiting, in flight, dead-lettered), clients and watches -- checked
against what the server says by its own commands; `status --raw` keeps the
full dump for scripts."""
import re
import subprocess

from clientlib import DEADLINE_S, Proc, ordo, prog
from ordoproc import poll


def fields(out):
    """The summary's `name: text` lines as a dict."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^([a-z]+):\s+(.*)$", out, re.M)}


def test_status_summarises_the_server(server):
    with server.raw() as r:
        for i in range(5):
            r.call("Q.PUSH", "jobs", "k%d" % i, "p")
        r.call("Q.PUSH", "other", "k", "p")
        r.call("Q.CONFIG", "poison", "MAXATTEMPTS", "1", "DEADLETTER", "poison.dead")
        r.call("Q.PUSH", "poison", "k", "p")
        msg = r.call("Q.PULL", "poison")[0]
        r.call("Q.NACK", "poison", msg[0], msg[4])  # its only attempt: dead-lettered
        r.call("Q.PULL", "jobs", "COUNT", "2")  # two in flight
        r.call("KV.PUT", "a", "1")
        rev = int(r.call("KV.REV")[0])
    watcher = Proc([prog("ordo"), "-p", server.port, "watch", "--prefix", "a"])
    try:
        with server.raw() as r:
            poll(lambda: b"watches:1\r\n" in _raw_info(r), "the watch registered", DEADLINE_S)
        p = ordo(server, "status")
        assert p.returncode == 0, p.stderr
        out = p.stdout.decode()
        f = fields(out)
        assert out.startswith("ordo ") and ("127.0.0.1:%d" % server.port) in out.splitlines()[0], out
        assert f["role"].startswith("single (fsync "), out
        assert f["revision"].startswith("%d (oldest resumable " % rev), out
        assert re.match(r"\d+ \(\d+ revisions not yet synced, \d+ B pending\)", f["durable"]), out
        assert re.match(r"[\d.]+ (B|KiB|MiB) in \d+ segments?", f["log"]), out
        # jobs, other, poison and poison's dead-letter queue
        queues = int(f["queues"].split()[0])
        with server.raw() as r:
            assert queues == len(r.call("Q.LIST"))
        # 3 jobs, 1 other and the dead letter in poison's dead-letter queue
        assert "5 waiting" in f["queues"], out
        assert "2 in flight" in f["queues"] and "1 dead-lettered" in f["queues"], out
        assert re.match(r"\d+ connected \(\d+ blocked\), 1 watches", f["clients"]), out
        assert "members" not in out and "# Server" not in out  # a summary, not INFO
    finally:
        watcher.kill()


def _raw_info(r):
    v = r.call("INFO", "clients")
    return v if isinstance(v, bytes) else str(v).replace("\n", "\r\n").encode()


def test_status_raw_keeps_the_full_dump(server):
    p = ordo(server, "status", "--raw")
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "revision:" in out and "# Server" in out and "cluster_enabled:0" in out
    assert "connected_clients:" in out and "wal_bytes:" in out


def test_status_of_a_down_server_fails_naming_it():
    from ordoproc import free_port
    port = free_port()
    p = subprocess.run([prog("ordo"), "--timeout", "300", "-p", str(port), "status"], capture_output=True,
                       timeout=30)
    assert p.returncode == 1 and ("127.0.0.1:%d" % port).encode() in p.stderr, p.stderr
