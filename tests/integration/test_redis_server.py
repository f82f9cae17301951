"""Connection and replication views Redis clients read (issue 24): ROLE,
INFO replication, CLIENT SETNAME / GETNAME / ID / LIST / INFO / KILL.

Each test runs against ordod and a real redis-server (the `either`
fixture) with the same assertions. ROLE and INFO replication in cluster
mode are in tests/cluster.
"""
import socket

import pytest
import redis

from ordoproc import poll
from resp import Closed, RespError


def err(v, prefix):
    assert isinstance(v, RespError) and v.msg.startswith(prefix), v
    return v.msg


def test_role_single(either):
    with either.raw() as c:
        role = c.call("ROLE")
    assert role[0] == b"master" and isinstance(role[1], int) and role[2] == []


def test_info_replication(either):
    info = either.client().info("replication")
    assert info["role"] == "master" and info["connected_slaves"] == 0
    assert isinstance(info["master_repl_offset"], int)


def test_client_name_id_list_info(either):
    r = either.client(single_connection_client=True)
    assert r.client_getname() is None
    assert r.client_setname("worker-1") is True
    assert r.client_getname() == "worker-1"
    cid = r.client_id()
    assert isinstance(cid, int) and cid > 0
    mine = [c for c in r.client_list() if int(c["id"]) == cid]
    assert len(mine) == 1 and mine[0]["name"] == "worker-1"
    info = r.client_info()
    assert int(info["id"]) == cid and info["name"] == "worker-1"
    with either.raw() as c:
        assert err(c.call("CLIENT", "SETNAME", "has space"), "ERR Client names cannot contain spaces")
        assert err(c.call("CLIENT", "BOGUS"), "ERR unknown subcommand")


def alive(c):
    try:
        return c.call("PING") == "PONG"
    except (Closed, ConnectionError, OSError):
        return False


def closed(c):
    """The server closed c: a read ends (or fails) instead of waiting."""
    try:
        c.sock.settimeout(5)
        return c.sock.recv(1) == b""
    except (ConnectionError, OSError):
        return True


def test_client_kill(either):
    killer = either.client(single_connection_client=True)
    with either.raw() as a, either.raw() as b, either.raw() as d:
        a_id, b_id = a.call("CLIENT", "ID"), b.call("CLIENT", "ID")
        assert killer.client_kill_filter(_id=a_id) == 1
        assert closed(a)
        b_addr = [c for c in killer.client_list() if int(c["id"]) == b_id][0]["addr"]
        assert killer.client_kill(b_addr) is True  # the old form: OK
        assert closed(b)
        with pytest.raises(redis.ResponseError, match="No such client"):
            killer.client_kill("127.0.0.1:1")
        assert killer.client_kill_filter(_id=999999999) == 0
        assert killer.client_kill_filter(_type="pubsub") == 0
        assert alive(d)
        # SKIPME yes (the default) spares the caller even when it matches
        my_id = killer.client_id()
        assert killer.client_kill_filter(_id=my_id) == 0
        assert killer.ping()
        assert err(d.call("CLIENT", "KILL", "ID", "x"), "ERR client-id should be greater than 0")
        assert err(d.call("CLIENT", "KILL", "TYPE", "bogus"), "ERR Unknown client type 'bogus'")
        assert err(d.call("CLIENT", "KILL", "SKIPME", "maybe"), "ERR syntax error")
        assert err(d.call("CLIENT", "KILL", "BOGUS", "1"), "ERR syntax error")
        d_id = d.call("CLIENT", "ID")
        assert d.call("CLIENT", "KILL", "ID", str(d_id), "SKIPME", "no") == 1  # answered, then closed
        assert closed(d)
