"""Errors that say what went wrong (issue 24), one test per message
family: an unknown command names the ordo family that does its job; a
bad integer names its argument, its value and the range; a syntax error
names the token and the command's syntax; an argument over a limit gets
an error naming the limit before the connection closes. The first word
and the text Redis clients match on stay Redis's (ERR, "value is not an
integer or out of range", "syntax error", "Protocol error")."""
import subprocess

import pytest

from resp import RespError


def err(v, prefix):
    assert isinstance(v, RespError) and v.msg.startswith(prefix), v
    return v.msg


@pytest.mark.parametrize("cmd,family", [
    (("LPUSH", "l", "x"), "Q.PUSH"),
    (("BRPOP", "l", "0"), "Q.*"),
    (("XADD", "s", "*", "f", "v"), "Q.PUSH"),
    (("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"), "Q.PULL"),
    (("HSET", "h", "f", "v"), "KV.RANGE"),
    (("hgetall", "h"), "KV.PUT"),
    (("SADD", "s", "m"), "KV.RANGE"),
    (("ZADD", "z", "1", "m"), "KV.RANGE"),
    (("SUBSCRIBE", "c"), "KV.WATCH"),
    (("PUBLISH", "c", "m"), "Q.WATCH"),
    (("SETNX", "k", "v"), "SET key value NX"),
    (("GETSET", "k", "v"), "SET key value GET"),
    (("RENAME", "a", "b"), "MULTI"),
    (("SELECT", "1"), "one database"),
    (("BGSAVE",), "SNAPSHOT"),
    (("REPLICAOF", "h", "1"), "CLUSTER ADD"),
])
def test_unknown_command_names_the_ordo_way(server, cmd, family):
    with server.raw() as c:
        msg = err(c.call(*cmd), "ERR unknown command '%s'" % cmd[0])
        assert family in msg, msg


def test_unknown_command_without_a_counterpart(server):
    with server.raw() as c:
        assert c.call("FROBNICATE").msg == "ERR unknown command 'FROBNICATE'"
        assert c.call("PFADD", "h", "x").msg == "ERR unknown command 'PFADD'"
        # inside MULTI the hint comes too, and EXEC then aborts
        assert c.call("MULTI") == "OK"
        err(c.call("LPUSH", "l", "x"), "ERR unknown command 'LPUSH': ordo has no lists")
        err(c.call("EXEC"), "EXECABORT")
