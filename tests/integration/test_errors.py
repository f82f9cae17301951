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


# ---- integers: the argument, its value, the range ---------------------------


def test_integer_error_names_the_argument(server):
    with server.raw() as c:
        msg = err(c.call("KV.PUT", "k", "v", "IFREV", "-5"), "ERR value is not an integer or out of range: ")
        assert "IFREV is '-5'" in msg and "from 0 to 18446744073709551615" in msg, msg
        msg = err(c.call("Q.PUSH", "q", "k", "p", "DELAY", "-1"), "ERR value is not an integer or out of range: ")
        assert "DELAY is '-1'" in msg, msg
        # a positional argument: named by the command's syntax
        msg = err(c.call("INCRBY", "n", "ten"), "ERR value is not an integer or out of range: ")
        assert "increment is 'ten'" in msg and "-9223372036854775808" in msg, msg
        msg = err(c.call("EXPIRE", "k", "1.5"), "ERR value is not an integer or out of range: ")
        assert "seconds is '1.5'" in msg, msg
        # junk is quoted safely: control bytes escaped, long words cut
        msg = err(c.call("KV.GET", "k", "REV", b"\r\nx" + b"9" * 500), "ERR value is not an integer")
        assert "\\x0d\\x0ax" in msg and len(msg) < 400, msg


# ---- syntax: the token and the command's syntax ---------------------------------


def test_syntax_error_names_the_token(server):
    with server.raw() as c:
        msg = err(c.call("KV.PUT", "k", "v", "BOGUS", "1"), "ERR syntax error")
        assert "at 'BOGUS' (argument 3)" in msg and "syntax: KV.PUT key value [IFREV rev]" in msg, msg
        msg = err(c.call("SET", "k", "v", "NX", "XX"), "ERR syntax error")
        assert "at 'XX' (argument 4)" in msg, msg
        msg = err(c.call("Q.PULL", "q", "SOON"), "ERR syntax error")
        assert "at 'SOON'" in msg and "Q.PULL" in msg, msg
        msg = err(c.call("KV.WATCH", "k", "FROMM", "3"), "ERR syntax error")
        assert "at 'FROMM'" in msg, msg
        msg = err(c.call("LOCK.ACQUIRE", "l", "1000", "WAITT", "1"), "ERR syntax error")
        assert "at 'WAITT'" in msg, msg
        # an option without its value is named
        msg = err(c.call("Q.PULL", "q", "COUNT"), "ERR syntax error")
        assert "at 'COUNT' (argument 2)" in msg, msg
        msg = err(c.call("Q.NACK", "q", "1", "2", "3"), "ERR syntax error")
        assert "at '3' (argument 4); syntax: Q.NACK queue id token [DELAY ms]" in msg, msg


# ---- limits: named before the connection closes -------------------------------


def test_oversized_argument_names_the_limit_and_redis_cli_shows_it(ordod_factory, tmp_path):
    """redis-cli writes the whole command before it reads: the server
    drops the rest of the refused argument, so the client reads the error
    instead of 'Connection reset by peer'."""
    srv = ordod_factory("--max-bulk-bytes", "65536")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 3_000_000)
    with open(big, "rb") as f:
        p = subprocess.run(["redis-cli", "-p", str(srv.port), "-x", "SET", "k"], stdin=f, capture_output=True,
                           timeout=30)
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert "an argument of 3000000 bytes, above max-bulk-bytes (65536)" in out, out
    assert "reset" not in out, out
    # redis-py too (it also writes first)
    r = srv.client()
    with pytest.raises(Exception, match="above max-bulk-bytes \\(65536\\)"):
        r.set("k", b"y" * 200_000)
    assert srv.alive()


def test_too_many_arguments_and_before_auth(ordod_factory):
    srv = ordod_factory("--max-args", "10", "--requirepass", "pw")
    with srv.raw(auth=False) as c:
        c.send_raw(b"*1\r\n$20000\r\n")
        (e,) = c.read_until_closed()
        assert e.msg == ("ERR Protocol error: invalid bulk length: an argument of 20000 bytes, above "
                         "max-bulk-bytes-unauth (before AUTH) (16384)"), e
    with srv.raw() as c:
        c.send_raw(b"*11\r\n")
        (e,) = c.read_until_closed()
        assert e.msg == "ERR Protocol error: invalid multibulk length: 11 arguments, above max-args (10)", e
    assert srv.alive()


def test_inline_limits_are_named(ordod_factory):
    srv = ordod_factory("--max-inline-bytes", "256", "--max-bulk-bytes", "1024")
    with srv.raw() as c:
        c.send_raw(b"SET k " + b"v" * 300)
        (e,) = c.read_until_closed()
        assert e.msg == ("ERR Protocol error: too big inline request: a line longer than max-inline-bytes (256)"), e
    srv2 = ordod_factory("--max-inline-bytes", "4096", "--max-bulk-bytes", "1024")
    with srv2.raw() as c:
        c.send_raw(b"SET k " + b"v" * 2000 + b"\r\n")
        (e,) = c.read_until_closed()
        assert e.msg == ("ERR Protocol error: too big inline request: an argument of 2000 bytes, above "
                         "max-bulk-bytes (1024)"), e


def test_limit_errors_name_the_option(ordod_factory):
    srv = ordod_factory("--max-name-bytes", "8", "--max-value-bytes", "16")
    with srv.raw() as c:
        assert err(c.call("SET", "k" * 9, "v"), "LIMIT name is 9 bytes, above max-name-bytes (8)")
        assert err(c.call("MSET", "a", "v" * 17), "LIMIT value is 17 bytes, above max-value-bytes (16)")
        assert err(c.call("SETEX", "a", "10", "v" * 17), "LIMIT value is 17 bytes, above max-value-bytes (16)")
