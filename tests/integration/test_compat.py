"""Redis compatibility (issue 11 part B): COMMAND DOCS / INFO / COUNT /
LIST read by redis-cli's help and hints and by redis-py; every command has
docs."""
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios

import pytest
import redis
import time


from ordoproc import poll
from resp import RespError

REDIS_CLI = "/usr/bin/redis-cli"
CLI_DEADLINE_S = 15.0


def pairs(flat):
    """A RESP2 map (flat array) as a dict with str keys."""
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(flat[::2], flat[1::2])}


def render(args):
    """The parameter string redis-cli builds from COMMAND DOCS arguments
    (its cliAddArgument), so the test checks the tree, not just its presence."""
    out = []
    for a in args:
        a = pairs(a)
        typ = a["type"].decode()
        name = a["name"].decode()
        flags = a.get("flags", [])
        tok = a["token"].decode() if "token" in a else ""
        if typ == "oneof":
            rep = "|".join(render([x]) for x in a["arguments"])
        elif typ == "block":
            rep = render(a["arguments"])
        elif typ == "pure-token":
            rep = ""
        else:
            rep = name
        s = tok + (" " if tok and typ != "pure-token" else "") + rep
        if "multiple" in flags:
            s += " [%s ...]" % rep
        if "optional" in flags:
            s = "[%s]" % s
        out.append(s)
    return " ".join(out)


def cli(server, *args):
    p = subprocess.run([REDIS_CLI, "-p", str(server.port)] + list(args), capture_output=True,
                       timeout=CLI_DEADLINE_S)
    assert p.returncode == 0, p.stderr
    return re.sub(rb"\x1b\[[0-9;]*m", b"", p.stdout).decode()


def test_every_command_has_docs(server):
    with server.raw() as c:
        names = c.call("COMMAND", "LIST")
        assert len(names) == c.call("COMMAND", "COUNT") and len(names) >= 50
        docs = pairs(c.call("COMMAND", "DOCS"))
        assert set(docs) == {n.decode() for n in names}
        for name, d in docs.items():
            d = pairs(d)
            assert d["summary"] and d["group"] and d["since"], name
            render(d.get("arguments", []))  # every tree well-formed
        kv = pairs(docs["kv.put"])
        assert kv["group"] == b"ordo-kv"
        assert render(kv["arguments"]) == ("key value [IFREV rev] [LEASE id] "
                                           "[FENCE lock token|FENCE ELECTION name term|FENCE DELIVERY queue id token]")
        assert render(pairs(docs["set"])["arguments"]) == ("key value [NX|XX] [GET] [EX seconds|PX milliseconds|"
                                                           "EXAT unix-time-seconds|PXAT unix-time-milliseconds|"
                                                           "KEEPTTL]")
        assert render(pairs(docs["del"])["arguments"]) == "key [key ...]"
        assert render(pairs(docs["client"])["arguments"]).startswith("ID|SETNAME name|GETNAME")
        assert pairs(docs["q.push"])["group"] == b"ordo-queue"
        # Named: only the known ones, in a map.
        some = pairs(c.call("COMMAND", "DOCS", "get", "NOPE", "Q.PULL"))
        assert set(some) == {"get", "q.pull"}
        assert c.call("COMMAND", "DOCS", "nope") == []


def test_command_info_and_resp3(server):
    with server.raw() as c:
        info = c.call("COMMAND", "INFO", "get", "nope", "DEL", "kv.put", "ping")
        assert info[1] is None
        get, dele, put, ping = info[0], info[2], info[3], info[4]
        assert get[:2] == [b"get", 2] and get[3:6] == [1, 1, 1] and get[6] == ["@string"]
        assert dele[1] == -2 and "write" in dele[2] and dele[3:6] == [1, -1, 1]
        assert put[6] == ["@ordo-kv"] and put[3:6] == [1, 1, 1]
        assert ping[3:6] == [0, 0, 0]
        assert len(c.call("COMMAND", "INFO")) == c.call("COMMAND", "COUNT")
        assert isinstance(c.call("COMMAND", "LIST", "extra"), RespError)
        c.call("HELLO", "3")
        docs = c.call("COMMAND", "DOCS", "SET")
        assert isinstance(docs, dict) and docs[b"set"][b"group"] == b"string"


def test_redis_py_command(server, r):
    table = r.command()
    assert table["get"]["arity"] == 2 and table["set"]["arity"] == -3
    assert table["q.push"]["first_key_pos"] == 0
    assert len(table) == r.command_count()


def test_redis_cli_help(server):
    out = cli(server, "help", "SET")
    assert "SET key value [NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|" in out
    assert "summary: Set the value of a key" in out and "group: string" in out
    out = cli(server, "help", "Q.PUSH")
    assert "Q.PUSH queue key payload [ID dedup-id|IDEMPOTENCY key] [COALESCE] [DELAY ms] [TIMEOUT ms]" in out
    assert "group: ordo-queue" in out
    out = cli(server, "help", "@ordo-elect")
    assert "ELECT.CAMPAIGN" in out and "ELECT.OBSERVE" in out


def test_redis_cli_hints(server, tmp_path):
    """Interactive redis-cli shows the hint (the arguments still to type)
    after a command name: drive it through a pseudo-terminal."""
    fd, slave = pty.openpty()
    # A 200-column terminal, so linenoise has room for the hint.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
    env = dict(os.environ, HOME=str(tmp_path), TERM="xterm", REDISCLI_HISTFILE="/dev/null")
    proc = subprocess.Popen([REDIS_CLI, "-p", str(server.port)], stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True)
    os.close(slave)
    buf = b""
    try:
        def read_until(pattern):
            nonlocal buf
            deadline = time.monotonic() + CLI_DEADLINE_S
            while pattern not in re.sub(rb"\x1b\[[0-9;]*[A-Za-z]", b"", buf):
                left = deadline - time.monotonic()
                assert left > 0, buf
                ready, _, _ = select.select([fd], [], [], left)
                if ready:
                    data = os.read(fd, 4096)
                    # linenoise asks where the cursor is (to size the line): answer.
                    for _ in range(data.count(b"\x1b[6n")):
                        os.write(fd, b"\x1b[1;1R")
                    buf += data.replace(b"\x1b[6n", b"")
        read_until(b"> ")
        os.write(fd, b"KV.PUT ")
        read_until(b"key value [IFREV rev]")
        os.write(fd, b"k ")
        read_until(b"value [IFREV rev] [LEASE id]")
    finally:
        proc.kill()
        proc.wait(timeout=CLI_DEADLINE_S)
        os.close(fd)


# ---- TTL, PTTL, EXPIRE, PEXPIRE, PERSIST ------------------------------------

def restart(srv):
    """SIGTERM srv (it must exit 0) and start it again on a new port."""
    assert srv.stop() == 0
    srv.start()


def wait_gone(r, key):
    poll(lambda: not r.exists(key), "key %s to expire" % key)


def test_ttl_replies(server, r):
    assert r.ttl("none") == -2 and r.pttl("none") == -2
    r.set("k", "v")
    assert r.ttl("k") == -1 and r.pttl("k") == -1
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100 and 99000 < r.pttl("k") <= 100000
    assert r.pexpire("k", 50000) is True
    assert 49000 < r.pttl("k") <= 50000 and r.ttl("k") == 50
    assert r.persist("k") is True and r.ttl("k") == -1
    assert r.persist("k") is False and r.persist("none") is False
    assert r.expire("none", 10) is False and r.pexpire("none", 10) is False
    # SET without KEEPTTL clears it, KEEPTTL keeps it; INCR keeps it
    r.expire("k", 100)
    r.set("k", "w", keepttl=True)
    assert r.ttl("k") > 0
    r.set("k", "1")
    assert r.ttl("k") == -1
    r.expire("k", 100)
    r.incr("k")
    assert r.ttl("k") > 0
    assert server.info("keyspace")["db0"] == "keys=1,expires=1"


def test_expire_conditions(server, r):
    r.set("k", "v")
    assert r.expire("k", 100, xx=True) is False and r.ttl("k") == -1
    assert r.expire("k", 100, gt=True) is False  # no expiry counts as infinite
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 200, nx=True) is False and r.ttl("k") == 100
    assert r.expire("k", 50, gt=True) is False and r.ttl("k") == 100
    assert r.expire("k", 200, gt=True) is True and r.ttl("k") == 200
    assert r.expire("k", 300, lt=True) is False and r.ttl("k") == 200
    assert r.expire("k", 150, lt=True) is True and r.ttl("k") == 150
    assert r.expire("k", 120, xx=True) is True and r.ttl("k") == 120
    r.persist("k")
    assert r.expire("k", 100, lt=True) is True  # infinite > 100
    with server.raw() as c:
        assert c.call("EXPIRE", "k", "10", "NX", "XX").msg.startswith("ERR NX and XX, GT or LT")
        assert c.call("EXPIRE", "k", "10", "GT", "LT").msg.startswith("ERR GT and LT")
        assert c.call("EXPIRE", "k", "10", "BOGUS").code == "ERR"
        assert c.call("EXPIRE", "k", "x").msg.startswith("ERR value is not an integer or out of range: seconds is 'x'")
        assert c.call("EXPIRE", "k", "9223372036854775807").msg == "ERR invalid expire time in 'expire' command"
        assert c.call("TTL").code == "ERR" and c.call("PERSIST", "a", "b").code == "ERR"


def test_expire_deletes_and_past_deadline(server, r):
    r.set("k", "v")
    assert r.pexpire("k", 100) is True
    wait_gone(r, "k")
    assert r.ttl("k") == -2
    r.set("j", "v")
    rev0 = r.execute_command("KV.REV")[0]
    assert r.expire("j", 0) is True  # not in the future: deleted now, as Redis
    assert r.exists("j") == 0 and r.execute_command("KV.REV")[0] == rev0 + 1
    r.set("j", "v")
    assert r.expire("j", -5) is True and r.exists("j") == 0


def test_expire_is_a_record(server):
    """EXPIRE and PERSIST are logged: a restart replays them (and a
    snapshot taken after them keeps them)."""
    r = server.client()
    for k in ("a", "b", "c", "d"):
        r.set(k, "v")
    r.expire("a", 1000)
    r.pexpire("b", 500000)
    r.expire("c", 1000)
    r.persist("c")
    r.set("s", "v", ex=1000)
    rev0 = r.execute_command("KV.REV")[0]
    r.close()
    restart(server)
    r = server.client()
    assert 990 <= r.ttl("a") <= 1000 and 490000 < r.pttl("b") <= 500000
    assert r.ttl("c") == -1 and r.ttl("d") == -1 and r.ttl("s") > 0
    assert r.execute_command("KV.REV")[0] == rev0
    r.execute_command("SNAPSHOT")
    poll(lambda: server.info("persistence").get("snapshot_in_progress") == "0", "the snapshot to finish")
    r.persist("a")
    r.close()
    restart(server)
    r = server.client()
    assert r.ttl("a") == -1 and r.ttl("b") > 0
    r.close()


# ---- scripting, INFO sections -----------------------------------------------

def test_scripting_refused(server, r):
    for args in (("EVAL", "return 1", "0"), ("EVALSHA", "abc", "0"), ("SCRIPT", "LOAD", "return 1"),
                 ("SCRIPT", "FLUSH"), ("FUNCTION", "LIST"), ("FCALL", "f", "0"), ("EVAL_RO", "x", "0"),
                 ("EVAL",)):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*args)
        msg = str(e.value)
        assert "ordo runs no" in msg and "MULTI" in msg and "WATCH" in msg and "FENCE" in msg, msg
    with pytest.raises(redis.ResponseError, match="ordo runs no scripts"):
        r.eval("return 1", 0)
    with pytest.raises(redis.ResponseError, match="ordo runs no scripts"):
        r.register_script("return 1")(keys=[], args=[])
    assert r.ping()  # the connection is still usable


def test_info_sections(server, r):
    with server.raw() as c:
        e = c.call("INFO", "cpu")
        assert isinstance(e, RespError) and e.msg.startswith("ERR unknown INFO section 'cpu'")
        assert "keyspace" in e.msg and "replication" in e.msg
        assert isinstance(c.call("INFO", "server", "nope"), RespError)
        both = c.call("INFO", "server", "KV").decode()
        assert "# Server" in both and "# KV" in both and "# Clients" not in both
        assert "# Keyspace" in c.call("INFO", "everything").decode()
    assert "redis_version" in r.info("server")
    with pytest.raises(redis.ResponseError, match="unknown INFO section"):
        r.info("commandstats")


# ---- elections: LEASE, and the last value of a term that ended unhanded ------

def test_campaign_lease(server):
    with server.raw() as c:
        lid = c.call("LEASE.GRANT", 60000)
        t1 = c.call("ELECT.CAMPAIGN", "E", "v1", 0, "LEASE", lid)  # ttl 0: as long as the lease
        assert isinstance(t1, int)
        assert c.call("ELECT.LEADER", "E") == [b"v1", t1]
        assert c.call("ELECT.PROCLAIM", "E", t1, "state-7") == 1
        assert c.call("LEASE.REVOKE", lid) == 1  # revoking the lease ends the term
        assert c.call("ELECT.LEADER", "E") is None
        assert c.call("ELECT.PROCLAIM", "E", t1, "late") == 0
        t2, hv, handed = c.call("ELECT.CAMPAIGN", "E", "v2", 60000, "HANDOVER")
        assert t2 > t1 and hv == b"state-7" and handed == 0
        # a resign's hand-over keeps the two-element reply; a plain resign leaves nothing
        assert c.call("ELECT.RESIGN", "E", t2, "HANDOVER", "given") == 1
        t3, hv = c.call("ELECT.CAMPAIGN", "E", "v3", 60000, "HANDOVER")
        assert hv == b"given"
        assert c.call("ELECT.RESIGN", "E", t3) == 1
        assert c.call("ELECT.CAMPAIGN", "E", "v4", 60000, "HANDOVER")[1:] == [None]
        # errors: ttl 0 needs a lease; a dead lease is NOTFOUND
        assert c.call("ELECT.CAMPAIGN", "F", "v", 0).code == "ERR"
        assert c.call("ELECT.CAMPAIGN", "F", "v", 1000, "LEASE", lid).code == "NOTFOUND"
        assert c.call("ELECT.CAMPAIGN", "F", "v", 1000, "LEASE").code == "ERR"
        assert c.call("ELECT.CAMPAIGN", "F", "v", 1000, "LEASE", 1, "LEASE", 2).code == "ERR"
        assert c.call("ELECT.LEADER", "F") is None


def test_expired_term_value_reaches_next_leader(server):
    """A leader that crashes (stops its keepalives) loses its term at the
    deadline; a candidate parked with HANDOVER then leads and gets the last
    value the old leader proclaimed, marked 0 (not handed over)."""
    with server.raw() as a, server.raw() as b:
        la = a.call("LEASE.GRANT", 300)
        t1 = a.call("ELECT.CAMPAIGN", "E", "a", 0, "LEASE", la)
        assert a.call("ELECT.PROCLAIM", "E", t1, "checkpoint-12") == 1
        lb = b.call("LEASE.GRANT", 60000)
        b.send("ELECT.CAMPAIGN", "E", "b", 0, "WAIT", 20000, "HANDOVER", "LEASE", lb)
        t2, hv, handed = b.read()  # served when a's lease expires
        assert t2 > t1 and hv == b"checkpoint-12" and handed == 0
        assert b.call("ELECT.LEADER", "E") == [b"b", t2]
        # its own ttl expiring does the same
        assert b.call("ELECT.RESIGN", "E", t2) == 1
        t3 = b.call("ELECT.CAMPAIGN", "E", "c", 100)
        assert b.call("ELECT.PROCLAIM", "E", t3, "c-state") == 1
        poll(lambda: b.call("ELECT.LEADER", "E") is None, "term expiry")
        # a campaign without HANDOVER consumes it unseen
        t4 = b.call("ELECT.CAMPAIGN", "E", "d", 100)
        poll(lambda: b.call("ELECT.LEADER", "E") is None, "term expiry")
        assert b.call("ELECT.CAMPAIGN", "E", "e", 60000, "HANDOVER")[1:] == [b"d", 0]
        assert t4 > t3


def test_lapsed_handover_survives_restart(server):
    """The lapsed value and its mark come back from the log and from a snapshot."""
    with server.raw() as c:
        for name in ("L", "S"):
            t = c.call("ELECT.CAMPAIGN", name, "v-" + name, 50)
            assert c.call("ELECT.PROCLAIM", name, t, "last-" + name) == 1
        poll(lambda: c.call("ELECT.LEADER", "L") is None and c.call("ELECT.LEADER", "S") is None, "expiry")
        assert c.call("ELECT.RESIGN", "R", c.call("ELECT.CAMPAIGN", "R", "r", 60000), "HANDOVER", "given") == 1
    restart(server)  # from the log
    with server.raw() as c:
        assert c.call("ELECT.CAMPAIGN", "L", "x", 60000, "HANDOVER")[1:] == [b"last-L", 0]
        assert c.call("SNAPSHOT") > 0
        poll(lambda: server.info("persistence")["snapshot_in_progress"] == "0", "snapshot")
    restart(server)  # from the snapshot
    assert int(server.info("persistence")["snapshot_loaded_revision"]) > 0
    with server.raw() as c:
        assert c.call("ELECT.CAMPAIGN", "S", "x", 60000, "HANDOVER")[1:] == [b"last-S", 0]
        assert c.call("ELECT.CAMPAIGN", "R", "x", 60000, "HANDOVER")[1:] == [b"given"]
