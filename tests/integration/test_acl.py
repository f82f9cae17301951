"""Users and permissions (docs/protocol.md, "Users and permissions")
against a real ordod: every rule allows what it should and refuses what
it should not, through redis-cli, redis-py (username=), MULTI/EXEC and
HTTP (curl); AUTH, HELLO AUTH, the ACL subcommands and ACL LOG; users
surviving a restart and a snapshot; the aclfile; the default user
standing for --requirepass; the ordo tool's --user and ORDO_USER."""
import base64
import subprocess

import pytest
import redis

from clientlib import prog
from ordoproc import poll

ADMIN_PW = "adm1n"


@pytest.fixture
def srv(ordod_factory):
    return ordod_factory("--requirepass", ADMIN_PW)


def admin(srv):
    return srv.client()


def user_client(srv, name, pw):
    return redis.Redis(host="127.0.0.1", port=srv.port, username=name, password=pw, socket_timeout=10)


def cli(srv, user, pw, *args):
    """redis-cli as user; its output, stripped."""
    p = subprocess.run(["redis-cli", "-p", str(srv.port), "--user", user, "--pass", pw, "--no-auth-warning"]
                       + [str(a) for a in args], capture_output=True, timeout=30)
    return p.stdout.decode().strip()


def cannot_login(srv, name, pw):
    """AUTH name pw answers -WRONGPASS."""
    with srv.raw(auth=False) as c:
        r = c.call("AUTH", name, pw)
        assert getattr(r, "code", None) == "WRONGPASS", r


def setuser(srv, name, *rules):
    with admin(srv) as a:
        assert a.execute_command("ACL", "SETUSER", name, *rules) == b"OK"


def allowed(c, *cmd):
    """cmd runs (any reply but -NOPERM)."""
    try:
        c.execute_command(*cmd)
    except redis.exceptions.ResponseError as e:
        assert not str(e).startswith("NOPERM") and "no permissions" not in str(e), (cmd, str(e))
    except redis.exceptions.NoPermissionError as e:
        raise AssertionError("%r refused: %s" % (cmd, e))


def refused(c, *cmd, naming=None):
    """cmd answers -NOPERM (naming that text, if given)."""
    with pytest.raises(redis.exceptions.NoPermissionError) as ei:
        c.execute_command(*cmd)
    if naming is not None:
        assert naming in str(ei.value), str(ei.value)


# (rules, commands allowed, commands refused): categories and commands.
CATEGORY_CASES = [
    (["+@read"], [["GET", "k"], ["MGET", "k"], ["KV.GET", "k"], ["Q.LEN", "q"]],
     [["SET", "k", "v"], ["KV.PUT", "k", "v"], ["Q.PUSH", "q", "k", "p"]]),
    (["+@write"], [["SET", "k", "v"], ["KV.PUT", "k", "v"], ["Q.PUSH", "q", "k", "p"], ["LEASE.GRANT", "1000"]],
     [["GET", "k"], ["KV.GET", "k"], ["Q.LEN", "q"]]),
    (["+@keyspace"], [["SET", "k", "v"], ["GET", "k"], ["KV.RANGE", "k"], ["KV.GET", "k"]],
     [["Q.PUSH", "q", "k", "p"], ["LOCK.INFO", "l"]]),
    (["+@kv"], [["INCR", "n"], ["KV.PUT", "k", "v"]], [["Q.LEN", "q"], ["Q.PUSH", "q", "k", "p"]]),
    (["+@queue"], [["Q.PUSH", "q", "k", "p"], ["Q.LEN", "q"], ["Q.LIST"]],
     [["SET", "k", "v"], ["GET", "k"], ["KV.GET", "k"]]),
    (["+@coord"], [["LEASE.GRANT", "1000"], ["LOCK.ACQUIRE", "l", "1000"], ["ELECT.LEADER", "e"]],
     [["GET", "k"], ["Q.LEN", "q"], ["KV.GET", "k"]]),
    (["+@watch"], [["KV.UNWATCH"]], [["GET", "k"], ["KV.GET", "k"]]),
    (["+@admin"], [["SNAPSHOT"], ["INFO"], ["CONFIG", "GET", "port"]], [["GET", "k"], ["KV.GET", "k"]]),
    (["+@all", "-@dangerous"], [["GET", "k"], ["SET", "k", "v"], ["Q.PUSH", "q", "k", "p"]],
     [["CONFIG", "GET", "port"], ["DEBUG", "DIGEST"], ["Q.DROP", "q"], ["INFO"], ["KV.COMPACT", "1"]]),
    (["+@connection"], [["ECHO", "x"], ["CLIENT", "ID"], ["TIME"], ["ACL", "WHOAMI"]],
     [["GET", "k"], ["CLIENT", "LIST"], ["KV.PUT", "k", "v"], ["INFO"]]),
    (["+@transaction"], [["MULTI"], ["DISCARD"]], [["GET", "k"], ["KV.GET", "k"]]),
    (["+@all"], [["GET", "k"], ["SET", "k", "v"], ["ACL", "LIST"], ["DEBUG", "DIGEST"], ["KV.PUT", "k", "v"],
                 ["INFO"]], []),
    (["+get"], [["GET", "k"]], [["MGET", "k"], ["SET", "k", "v"], ["KV.GET", "k"]]),
    (["+@read", "-get"], [["MGET", "k"], ["EXISTS", "k"], ["KV.GET", "k"]], [["GET", "k"], ["KV.PUT", "k", "v"]]),
    (["-@all"], [["PING"]], [["GET", "k"], ["ECHO", "x"], ["KV.GET", "k"], ["INFO"]]),
]


@pytest.mark.parametrize("rules,ok,no", CATEGORY_CASES, ids=[" ".join(c[0]) for c in CATEGORY_CASES])
def test_command_rules(srv, rules, ok, no):
    setuser(srv, "u", "on", ">pw", "allkeys", "allqueues", "allcoord", *rules)
    with user_client(srv, "u", "pw") as c:
        for cmd in ok:
            allowed(c, *cmd)
        for cmd in no:
            refused(c, *cmd, naming="'%s' command" % cmd[0].lower())


# Every rule through every door: redis-cli, MULTI (refused at queue time,
# EXEC then aborts) and HTTP (the commands a route becomes). Each case:
# the user's whole rules, commands allowed, and (command, text of the
# -NOPERM) refused.
NAMES = ["allkeys", "allqueues", "allcoord"]
DOOR_CASES = [(c[0] + NAMES, c[1], [(cmd, "'%s' command" % cmd[0].lower()) for cmd in c[2]])
              for c in CATEGORY_CASES] + [
    (["+@all", "~cart:*", "allqueues", "allcoord"],
     [["GET", "cart:1"], ["KV.PUT", "cart:1", "v"], ["KV.DEL", "cart:1"], ["MGET", "cart:1", "cart:2"]],
     [(["KV.GET", "other"], "the key 'other'"), (["KV.PUT", "other", "v"], "the key 'other'"),
      (["KV.DEL", "x"], "the key 'x'"), (["MGET", "cart:1", "zz"], "the key 'zz'")]),
    (["+@all", "allkeys", "%Q~jobs*", "allcoord"],
     [["Q.PUSH", "jobs", "k", "p"], ["Q.LEN", "jobs2"]],
     [(["Q.PUSH", "other", "k", "p"], "the queue 'other'"), (["Q.LIST"], "the queue '*'")]),
    (["+@all", "allkeys", "allqueues", "%C~lk"],
     [["LOCK.INFO", "lk"], ["ELECT.LEADER", "lk"], ["KV.GET", "k"]],
     [(["LOCK.INFO", "other"], "the lock or election 'other'")]),
]
DOOR_IDS = [" ".join(c[0]) for c in DOOR_CASES]
NOT_IN_MULTI = {"MULTI", "DISCARD", "EXEC", "WATCH"}


@pytest.mark.parametrize("rules,ok,no", DOOR_CASES, ids=DOOR_IDS)
def test_rules_through_redis_cli(srv, rules, ok, no):
    setuser(srv, "u", "on", ">pw", *rules)
    for cmd in ok:
        out = cli(srv, "u", "pw", *cmd)
        assert not out.startswith("NOPERM") and not out.startswith("NOAUTH"), (cmd, out)
    for cmd, naming in no:
        out = cli(srv, "u", "pw", *cmd)
        assert out.startswith("NOPERM") and naming in out, (cmd, out)


@pytest.mark.parametrize("rules,ok,no", DOOR_CASES, ids=DOOR_IDS)
def test_rules_through_multi(srv, rules, ok, no):
    # +@transaction last: MULTI itself allowed, no other command changed.
    setuser(srv, "u", "on", ">pw", *rules, "+@transaction")
    with srv.raw(auth=False) as c:
        assert c.call("AUTH", "u", "pw") == "OK"
        assert c.call("MULTI") == "OK"
        for cmd in ok:
            if cmd[0] not in NOT_IN_MULTI:
                r = c.call(*cmd)
                assert getattr(r, "code", None) != "NOPERM", (cmd, r)
        assert c.call("DISCARD") == "OK"
        for cmd, naming in no:
            assert c.call("MULTI") == "OK"
            r = c.call(*cmd)
            assert r.code == "NOPERM" and naming in r.msg, (cmd, r)
            assert c.call("EXEC").code == "EXECABORT"


def http_request(cmd):
    """The HTTP request a route makes of cmd (docs/http.md), or None."""
    name, args = cmd[0], cmd[1:]
    if name == "KV.GET" and len(args) == 1:
        return ["/v1/kv/" + args[0]]
    if name == "KV.PUT" and len(args) == 2:
        return ["-X", "PUT", "--data", args[1], "/v1/kv/" + args[0]]
    if name == "KV.DEL" and len(args) == 1:
        return ["-X", "DELETE", "/v1/kv/" + args[0]]
    if name == "Q.PUSH" and len(args) == 3:
        return ["-X", "POST", "--data", args[2], "/v1/queues/%s/keys/%s" % (args[0], args[1])]
    if name == "INFO" and not args:
        return ["/metrics"]
    return None


def curl_as(srv, user, pw, req):
    """(status, body) of req (curl arguments, the path last) as user."""
    url = "http://127.0.0.1:%d%s" % (srv.http_port, req[-1])
    p = subprocess.run(["curl", "-s", "-u", "%s:%s" % (user, pw), "-w", "\n%{http_code}"] + req[:-1] + [url],
                       capture_output=True, timeout=30)
    body, _, code = p.stdout.decode().rpartition("\n")
    return int(code), body


@pytest.mark.parametrize("rules,ok,no", DOOR_CASES, ids=DOOR_IDS)
def test_rules_through_http(srv, rules, ok, no):
    setuser(srv, "u", "on", ">pw", *rules)
    tried = 0
    for cmd in ok:
        req = http_request(cmd)
        if req is not None:
            tried += 1
            status, body = curl_as(srv, "u", "pw", req)
            assert status not in (401, 403), (cmd, status, body)
    for cmd, naming in no:
        req = http_request(cmd)
        if req is not None:
            tried += 1
            status, body = curl_as(srv, "u", "pw", req)
            assert status == 403, (cmd, status, body)
            assert naming in body or cmd[0] == "INFO", (cmd, body)
    if tried == 0:
        pytest.skip("no HTTP route becomes these commands")


def test_key_patterns(srv):
    setuser(srv, "u", "on", ">pw", "+@all", "~cart:*", "~user:?")
    with user_client(srv, "u", "pw") as c:
        allowed(c, "SET", "cart:1", "v")
        allowed(c, "GET", "user:1")
        allowed(c, "MGET", "cart:1", "cart:2")
        allowed(c, "KV.RANGE", "cart:")
        allowed(c, "KV.RANGE", "cart:12")
        refused(c, "GET", "other", naming="the key 'other'")
        refused(c, "GET", "user:12", naming="the key 'user:12'")
        refused(c, "MGET", "cart:1", "zzz", naming="the key 'zzz'")  # any key of several
        refused(c, "DEL", "cart:1", "zzz")
        refused(c, "KV.RANGE", "car", naming="prefix")
        refused(c, "KV.RANGE", "user:", naming="prefix")  # ? limits the names under it
        refused(c, "KV.COMPACT", "1")                      # every key
        refused(c, "Q.PUSH", "cart:1", "k", "p", naming="the queue")  # a key pattern is no queue pattern
    # allkeys opens them all; resetkeys closes them.
    setuser(srv, "u", "allkeys")
    with user_client(srv, "u", "pw") as c:
        allowed(c, "GET", "other")
        allowed(c, "KV.RANGE", "")
    setuser(srv, "u", "resetkeys")
    with user_client(srv, "u", "pw") as c:
        refused(c, "GET", "cart:1", naming="the key")


def test_kv_watch_prefix(srv):
    setuser(srv, "u", "on", ">pw", "+@all", "~app:*")
    assert cli(srv, "u", "pw", "KV.WATCH", "other").startswith("NOPERM")
    assert "prefix" in cli(srv, "u", "pw", "KV.WATCH", "ap", "PREFIX")
    with srv.raw(auth=False) as c:
        assert c.call("AUTH", "u", "pw") == "OK"
        r = c.call("KV.WATCH", "app:x", "PREFIX")
        assert getattr(r, "code", None) is None, r


def test_queue_patterns(srv):
    setuser(srv, "u", "on", ">pw", "+@all", "%Q~jobs:*")
    with user_client(srv, "u", "pw") as c:
        allowed(c, "Q.PUSH", "jobs:a", "k", "p")
        allowed(c, "Q.LEN", "jobs:a")
        allowed(c, "Q.PULL", "jobs:a")
        refused(c, "Q.PUSH", "other", "k", "p", naming="the queue 'other'")
        refused(c, "Q.LIST", naming="the queue")
        refused(c, "Q.CONFIG", "jobs:a", "DEADLETTER", "other", naming="the queue 'other'")
        allowed(c, "Q.CONFIG", "jobs:a", "DEADLETTER", "jobs:dead")
        refused(c, "GET", "jobs:a", naming="the key")
    setuser(srv, "u", "allqueues")
    with user_client(srv, "u", "pw") as c:
        allowed(c, "Q.LIST")
        allowed(c, "Q.PUSH", "other", "k", "p")


def test_coord_patterns(srv):
    setuser(srv, "u", "on", ">pw", "+@coord", "%C~lk*")
    with user_client(srv, "u", "pw") as c:
        allowed(c, "LOCK.ACQUIRE", "lk1", "5000")
        allowed(c, "ELECT.LEADER", "lkx")
        allowed(c, "LEASE.GRANT", "1000")  # leases have no name
        refused(c, "LOCK.ACQUIRE", "other", "5000", naming="the lock or election 'other'")
        refused(c, "ELECT.CAMPAIGN", "other", "v", "1000", naming="the lock or election")
    setuser(srv, "u", "allcoord")
    with user_client(srv, "u", "pw") as c:
        allowed(c, "LOCK.INFO", "other")


def test_passwords_on_off_nopass_reset(srv):
    setuser(srv, "u", "on", ">one", ">two", "+@all", "allkeys")
    assert cli(srv, "u", "one", "PING") == "PONG"
    assert cli(srv, "u", "two", "GET", "k") == ""
    cannot_login(srv, "u", "three")
    setuser(srv, "u", "<one")
    cannot_login(srv, "u", "one")
    user_client(srv, "u", "two").ping()
    # A connection in as u loses its authentication when u is switched off.
    c = user_client(srv, "u", "two")
    c.set("k", "v")
    setuser(srv, "u", "off")
    with pytest.raises(redis.exceptions.AuthenticationError):
        c.get("k")  # -NOAUTH
    cannot_login(srv, "u", "two")
    setuser(srv, "u", "on", "nopass")
    user_client(srv, "u", "anything").ping()
    setuser(srv, "u", "resetpass")
    cannot_login(srv, "u", "anything")
    setuser(srv, "u", ">x")
    user_client(srv, "u", "x").ping()
    setuser(srv, "u", "reset")
    cannot_login(srv, "u", "x")
    with admin(srv) as a:
        assert a.execute_command("ACL", "LIST")[1] == b"user u off -@all"


def _closed(conn):
    """The server closed conn (it reads end of stream)."""
    from resp import Closed
    conn.settimeout(0.05)
    try:
        while True:
            conn.read()
    except Closed:
        return True
    except OSError:  # the timeout: still open
        return False


def test_listeners_of_a_deleted_user_are_closed(srv):
    """A user's connections that only listen (a watch, a parked command)
    send no command to be refused: deleting or disabling the user closes
    them; a connection of another user stays."""
    setuser(srv, "u", "on", ">pw", "+@all", "allkeys", "allqueues", "allcoord")
    setuser(srv, "v", "on", ">pw", "+@all", "allkeys", "allqueues", "allcoord")
    watcher, puller, other = srv.raw(auth=False), srv.raw(auth=False), srv.raw(auth=False)
    try:
        for c, who in ((watcher, "u"), (puller, "u"), (other, "v")):
            assert c.call("AUTH", who, "pw") == "OK"
        assert watcher.call("HELLO", "3")[b"proto"] == 3
        assert getattr(watcher.call("KV.WATCH", "k"), "code", None) is None
        puller.send("Q.PULL", "q", "BLOCK", "0")
        assert getattr(other.call("KV.WATCH", "k"), "code", None) is None
        with admin(srv) as a:
            assert a.execute_command("ACL", "DELUSER", "u") == 1
        poll(lambda: _closed(watcher), "the deleted user's watch to be closed")
        poll(lambda: _closed(puller), "the deleted user's parked Q.PULL to be closed")
        assert not _closed(other)
        setuser(srv, "v", "off")
        poll(lambda: _closed(other), "the disabled user's watch to be closed")
    finally:
        for c in (watcher, puller, other):
            c.close()


def test_auth_and_hello_auth(srv):
    setuser(srv, "u", "on", ">pw", "+@all", "allkeys")
    with srv.raw(auth=False) as c:
        assert c.call("GET", "k").code == "NOAUTH"
        assert c.call("AUTH", "u", "bad").code == "WRONGPASS"
        assert c.call("AUTH", "nosuch", "pw").code == "WRONGPASS"
        assert c.call("AUTH", "u", "pw") == "OK"
        assert c.call("ACL", "WHOAMI") == b"u"
        assert b" user=u " in c.call("CLIENT", "INFO")
        assert c.call("AUTH", ADMIN_PW) == "OK"  # AUTH pass: the default user
        assert c.call("ACL", "WHOAMI") == b"default"
    with srv.raw(auth=False) as c:
        assert c.call("HELLO", "3", "AUTH", "u", "bad").code == "WRONGPASS"
        hello = c.call("HELLO", "3", "AUTH", "u", "pw")
        assert hello[b"proto"] == 3
        assert c.call("ACL", "WHOAMI") == b"u"


def test_default_user_stands_for_requirepass(srv):
    with srv.raw(auth=False) as c:
        assert c.call("AUTH", "default", ADMIN_PW) == "OK"
    with admin(srv) as a:
        line = [l for l in a.execute_command("ACL", "LIST") if l.startswith(b"user default ")][0]
        assert b" on #" in line and b"+@all" in line
        assert a.execute_command("ACL", "SETUSER", "default", "resetpass", ">newpw") == b"OK"
    with srv.raw(auth=False) as c:
        assert c.call("AUTH", ADMIN_PW).code == "WRONGPASS"  # the record holds the password now
        assert c.call("AUTH", "newpw") == "OK"


def test_default_user_off_requires_a_user(ordod_factory):
    s = ordod_factory()
    with s.client() as a:
        assert a.execute_command("ACL", "SETUSER", "root", "on", ">r", "+@all", "allkeys", "allqueues",
                                 "allcoord") == b"OK"
        assert a.execute_command("ACL", "SETUSER", "default", "off") == b"OK"
    with s.raw(auth=False) as c:
        assert c.call("GET", "k").code == "NOAUTH"
        assert c.call("AUTH", "root", "r") == "OK"
        assert c.call("GET", "k") is None
    with user_client(s, "root", "r") as a:
        with pytest.raises(redis.exceptions.ResponseError, match="cannot be removed"):
            a.execute_command("ACL", "DELUSER", "default")


def test_multi_exec(srv):
    setuser(srv, "u", "on", ">pw", "+@all", "-q.drop", "~k*", "allqueues")
    with srv.raw(auth=False) as c:
        assert c.call("AUTH", "u", "pw") == "OK"
        # A refused command inside MULTI: -NOPERM at once, then EXECABORT.
        assert c.call("MULTI") == "OK"
        assert c.call("SET", "k1", "a") == "QUEUED"
        assert c.call("Q.DROP", "q").code == "NOPERM"
        assert c.call("EXEC").code == "EXECABORT"
        # A refused key inside MULTI: the same.
        assert c.call("MULTI") == "OK"
        assert c.call("SET", "k1", "a") == "QUEUED"
        r = c.call("GET", "other")
        assert r.code == "NOPERM" and "'other'" in r.msg
        assert c.call("EXEC").code == "EXECABORT"
        assert c.call("GET", "k1") is None
        # Allowed commands run.
        assert c.call("MULTI") == "OK"
        assert c.call("SET", "k1", "a") == "QUEUED"
        assert c.call("GET", "k1") == "QUEUED"
        assert c.call("EXEC") == ["OK", b"a"]
        # The rules change between MULTI and EXEC: EXEC is refused whole.
        assert c.call("MULTI") == "OK"
        assert c.call("SET", "k2", "b") == "QUEUED"
        setuser(srv, "u", "-set")
        r = c.call("EXEC")
        assert r.code == "NOPERM" and "'set'" in r.msg
    with admin(srv) as a:
        assert a.get("k2") is None
        log = [as_dict(e) for e in a.execute_command("ACL", "LOG")]
        assert any(e[b"context"] == b"multi" and e[b"object"] == b"set" for e in log)
        assert any(e[b"context"] == b"multi" and e[b"object"] == b"q.drop" for e in log)  # at queue time


def curl(srv, *args):
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"] + list(args), capture_output=True,
                       timeout=30)
    return int(p.stdout)


def test_http(srv):
    setuser(srv, "u", "on", ">pw", "+@read", "+kv.put", "~app:*")
    base = "http://127.0.0.1:%d" % srv.http_port
    assert curl(srv, "-u", "u:pw", "-X", "PUT", "--data", "v", base + "/v1/kv/app:1") in (200, 201, 204)
    assert curl(srv, "-u", "u:pw", base + "/v1/kv/app:1") == 200
    assert curl(srv, "-u", "u:pw", base + "/v1/kv/other") == 403           # a key refused
    assert curl(srv, "-u", "u:pw", "-X", "DELETE", base + "/v1/kv/app:1") == 403  # a command refused
    assert curl(srv, "-u", "u:bad", base + "/v1/kv/app:1") == 401
    assert curl(srv, "-H", "Authorization: Bearer u:pw", base + "/v1/kv/app:1") == 200
    assert curl(srv, "-H", "Authorization: Bearer " + ADMIN_PW, base + "/v1/kv/other") == 404  # default: all
    assert curl(srv, base + "/v1/kv/app:1") == 401
    assert curl(srv, "-u", "u:pw", base + "/metrics") == 403               # judged as INFO
    assert curl(srv, "-H", "Authorization: Bearer " + ADMIN_PW, base + "/metrics") == 200
    assert curl(srv, "-u", "u:pw", "-X", "POST", "--data", "p", base + "/v1/queues/q/keys/k") == 403
    # The dashboard's data: a user with +info may read it, with user:password as its bearer token.
    assert curl(srv, "-H", "Authorization: Bearer u:pw", base + "/v1/status") == 403
    setuser(srv, "u", "+info")
    assert curl(srv, "-H", "Authorization: Bearer u:pw", base + "/v1/status") == 200
    hdr = "Authorization: Basic " + base64.b64encode(b"u:pw").decode()
    assert curl(srv, "-H", hdr, base + "/v1/kv/app:1") == 200
    with admin(srv) as a:
        log = a.execute_command("ACL", "LOG")
        contexts = {(e[b"reason"], e[b"context"]) for e in (dict(zip(l[::2], l[1::2])) if isinstance(l, list)
                                                            else l for l in log)}
        assert (b"key", b"http") in contexts and (b"command", b"http") in contexts


def test_http_keep_alive_follows_user_changes(srv, ordod_factory):
    """A keep-alive HTTP connection whose credentials held is judged afresh
    once the users change (the door keeps the decision only while they do
    not): a new password, a user switched off or deleted, and the default
    user given a password all refuse its next request, 401."""
    import http.client

    def get(conn, auth=None):
        conn.request("GET", "/v1/kv/app:1", headers={"Authorization": auth} if auth else {})
        r = conn.getresponse()
        r.read()
        return r.status

    bearer = "Bearer u:pw"
    for change in (("resetpass", ">pw2"), ("off",), None):
        setuser(srv, "u", "reset", "on", ">pw", "+@read", "~app:*")
        conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=20)
        try:
            assert get(conn, bearer) == 404 and get(conn, bearer) == 404  # held, twice
            if change is None:
                with admin(srv) as a:
                    assert a.execute_command("ACL", "DELUSER", "u") == 1
            else:
                setuser(srv, "u", *change)
            assert get(conn, bearer) == 401
        finally:
            conn.close()
    setuser(srv, "u", "reset", "on", ">pw", "+@read", "~app:*")
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=20)
    try:
        assert get(conn, bearer) == 404
        setuser(srv, "u", "-@read")  # rules: the command is refused, the user still holds
        assert get(conn, bearer) == 403
    finally:
        conn.close()
    # No header: the default user, nopass until a password is set.
    open_srv = ordod_factory()
    conn = http.client.HTTPConnection("127.0.0.1", open_srv.http_port, timeout=20)
    try:
        assert get(conn) == 404 and get(conn) == 404
        with open_srv.client() as a:
            assert a.execute_command("ACL", "SETUSER", "default", "resetpass", ">x") == b"OK"
        assert get(conn) == 401
    finally:
        conn.close()


def as_dict(e):
    return e if isinstance(e, dict) else dict(zip(e[::2], e[1::2]))


def test_acl_log(ordod_factory):
    s = ordod_factory("--requirepass", ADMIN_PW, "--acl-log-max-len", "3")
    setuser(s, "u", "on", ">pw", "+get", "~k")
    with user_client(s, "u", "pw") as c:
        for _ in range(3):
            refused(c, "SET", "k", "v")
        refused(c, "GET", "zz")
    cannot_login(s, "u", "bad")
    with admin(s) as a:
        log = [as_dict(e) for e in a.execute_command("ACL", "LOG")]
        assert log[0][b"reason"] == b"auth" and log[0][b"username"] == b"u"
        assert log[1][b"reason"] == b"key" and log[1][b"object"] == b"zz"
        assert log[2][b"reason"] == b"command" and log[2][b"object"] == b"set" and log[2][b"count"] == 3
        assert log[2][b"context"] == b"toplevel"
        refused_twice = [as_dict(e) for e in a.execute_command("ACL", "LOG", "1")]
        assert len(refused_twice) == 1
    with user_client(s, "u", "pw") as c:
        refused(c, "DEL", "k")  # a fourth kind: the oldest goes (acl-log-max-len 3)
    with admin(s) as a:
        log = [as_dict(e) for e in a.execute_command("ACL", "LOG")]
        assert len(log) == 3 and log[0][b"object"] == b"del"
        assert not any(e[b"object"] == b"set" for e in log)
        assert a.execute_command("ACL", "LOG", "RESET") == b"OK"
        assert a.execute_command("ACL", "LOG") == []
    stats = s.info("stats")  # counted apart from the log, which RESET emptied
    assert int(stats["acl_access_denied_cmd"]) == 4 and int(stats["acl_access_denied_key"]) == 1
    assert int(stats["auth_failures"]) == 1
    metrics = subprocess.run(["curl", "-s", "-H", "Authorization: Bearer " + ADMIN_PW,
                              "http://127.0.0.1:%d/metrics" % s.http_port], capture_output=True, timeout=30).stdout
    assert b"ordo_acl_denied_commands_total 4" in metrics and b"ordo_acl_denied_names_total 1" in metrics


def test_acl_subcommands(srv):
    with admin(srv) as a:
        assert a.execute_command("ACL", "SETUSER", "bob", "on", ">pw", "~x", "%Q~q", "%C~l", "-@all", "+@read")
        g = as_dict(a.execute_command("ACL", "GETUSER", "bob"))
        assert g[b"flags"] == [b"on"]
        assert g[b"passwords"] == [b"30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4"]
        assert g[b"commands"] == b"-@all +@read"
        assert g[b"keys"] == b"~x" and g[b"queues"] == b"%Q~q" and g[b"coord"] == b"%C~l"
        assert a.execute_command("ACL", "GETUSER", "nosuch") is None
        assert a.execute_command("ACL", "USERS") == [b"bob", b"default"]
        assert b"user bob on #30c952" in a.execute_command("ACL", "LIST")[0]
        assert a.execute_command("ACL", "WHOAMI") == b"default"
        assert b"queue" in a.execute_command("ACL", "CAT")
        assert b"q.push" in a.execute_command("ACL", "CAT", "queue")
        with pytest.raises(redis.exceptions.ResponseError, match="Unknown category"):
            a.execute_command("ACL", "CAT", "nosuch")
        with pytest.raises(redis.exceptions.ResponseError, match="modifier '<':"):
            a.execute_command("ACL", "SETUSER", "bob", "<secretnotthere")  # never echoes a password
        with pytest.raises(redis.exceptions.ResponseError, match="modifier 'bogus'"):
            a.execute_command("ACL", "SETUSER", "bob", "on", "bogus")
        with pytest.raises(redis.exceptions.ResponseError, match="modifier '\\+nosuch': Unknown command"):
            a.execute_command("ACL", "SETUSER", "bob", "+nosuch")  # a typo would allow nothing
        with pytest.raises(redis.exceptions.ResponseError):
            a.execute_command("ACL", "SETUSER", "has space")
        assert a.execute_command("ACL", "DELUSER", "bob", "nosuch") == 1
        assert a.execute_command("ACL", "USERS") == [b"default"]
        with pytest.raises(redis.exceptions.ResponseError, match="cannot be removed"):
            a.execute_command("ACL", "DELUSER", "default")
    with srv.raw() as c:  # COMMAND DOCS knows it (redis-py would parse the reply its own way)
        docs = c.call("COMMAND", "DOCS", "acl")
        assert docs[0] == b"acl" and b"summary" in docs[1]


def test_redis_py_acl_helpers(srv):
    """redis-py's own ACL calls parse ordo's replies (its ACL LOG parser
    reads every number of Redis's client-info line, as does CLIENT INFO's)."""
    with admin(srv) as a:
        assert a.acl_setuser("x", enabled=True, passwords=["+pw"], keys=["a*"],
                             commands=["+@read", "-kv.range", "+client"])
        g = a.acl_getuser("x")
        assert g["enabled"] and g["keys"] == ["~a*"] and g["categories"] == ["-@all", "+@read"]
        assert g["commands"] == ["-kv.range", "+client"]
        assert a.acl_users() == ["default", "x"] and a.acl_whoami() == "default"
        with user_client(srv, "x", "pw") as u:
            refused(u, "SET", "a1", "v")
            assert u.client_info()["user"] == "x"
        log = a.acl_log()
        assert log[0]["object"] == "set" and log[0]["client-info"]["user"] == "x"
        assert "coord" in a.acl_cat() and "lock.acquire" in a.acl_cat("coord")
        assert a.acl_log_reset() and a.acl_deluser("x") == 1


def test_acl_dryrun(srv):
    setuser(srv, "u", "on", ">pw", "+@read", "~k*")
    with admin(srv) as a:
        assert a.execute_command("ACL", "DRYRUN", "u", "GET", "k1") == b"OK"
        assert a.execute_command("ACL", "DRYRUN", "u", "SET", "k1", "v") == \
            b"User u has no permissions to run the 'set' command"
        assert a.execute_command("ACL", "DRYRUN", "u", "GET", "zz") == \
            b"User u has no permissions to access the key 'zz'"
        assert a.execute_command("ACL", "DRYRUN", "u", "PING") == b"OK"
        with pytest.raises(redis.exceptions.ResponseError, match="not found"):
            a.execute_command("ACL", "DRYRUN", "nosuch", "GET", "k")
        with pytest.raises(redis.exceptions.ResponseError, match="not found"):
            a.execute_command("ACL", "DRYRUN", "u", "NOSUCHCMD")
        assert a.execute_command("ACL", "LOG") == []  # a dry run logs nothing


def test_acl_max_users(ordod_factory):
    s = ordod_factory("--requirepass", ADMIN_PW, "--acl-max-users", "2")
    setuser(s, "a", "on")
    setuser(s, "b", "on")
    with admin(s) as a:
        with pytest.raises(redis.exceptions.ResponseError, match="acl-max-users"):
            a.execute_command("ACL", "SETUSER", "c", "on")
        assert a.execute_command("ACL", "SETUSER", "a", "off") == b"OK"  # changing one still works


def test_every_command_is_tagged(srv):
    """A command without a row in cmd/table.c's ACL tags would be in no
    category (and refused to every user with a pattern)."""
    with srv.raw() as c:
        tagged = set()
        for cat in c.call("ACL", "CAT"):
            tagged |= {n.split(b"|")[0] for n in c.call("ACL", "CAT", cat)}
        names = set(c.call("COMMAND", "LIST"))
    assert len(names) > 50 and names - tagged == set()


def test_users_survive_restart_and_snapshot(srv):
    setuser(srv, "u", "on", ">pw", "+@read", "~k*")
    srv.stop()
    srv.restart()
    with user_client(srv, "u", "pw") as c:
        allowed(c, "GET", "k1")
        refused(c, "SET", "k1", "v")
        refused(c, "GET", "other")
    with admin(srv) as a:
        assert a.execute_command("SNAPSHOT") > 0
        poll(lambda: srv.info("persistence").get("snapshot_in_progress") == "0", "the snapshot to end")
        a.execute_command("ACL", "SETUSER", "v", "on", ">pw2", "+@all", "allkeys")
    srv.stop()
    srv.restart()
    with user_client(srv, "u", "pw") as c:
        allowed(c, "GET", "k1")
        refused(c, "GET", "other")
    with user_client(srv, "v", "pw2") as c:
        allowed(c, "SET", "any", "v")


def test_aclfile_seeds_a_first_start_only(ordod_factory, tmp_path):
    f = tmp_path / "users.acl"
    f.write_text("# users\nuser svc on >s1 ~svc:* +@read\n\nuser ops on >o1 +@all allkeys allqueues allcoord\n")
    s = ordod_factory("--requirepass", ADMIN_PW, "--aclfile", str(f))
    with user_client(s, "svc", "s1") as c:
        allowed(c, "GET", "svc:1")
        refused(c, "SET", "svc:1", "v")
    with user_client(s, "ops", "o1") as c:
        c.execute_command("ACL", "SETUSER", "svc", "on", "+set")
        c.execute_command("ACL", "DELUSER", "ops")
    # The file and the log disagree: the log wins, the file is not read again.
    f.write_text("user svc on >s1 ~svc:* +@read -set\nuser extra on >e +@all\n")
    s.stop()
    s.restart()
    assert "aclfile" in s.log_tail() and "not read" in s.log_tail()
    with user_client(s, "svc", "s1") as c:
        allowed(c, "SET", "svc:1", "v")
    cannot_login(s, "ops", "o1")
    cannot_login(s, "extra", "e")


def test_aclfile_bad_line_stops_the_start(ordod_factory, tmp_path):
    f = tmp_path / "bad.acl"
    f.write_text("user ok on >x\nuser broken on bogusrule\n")
    p = subprocess.run([prog("ordod"), "--port", "0", "--http-port", "0", "--unixsocket", str(tmp_path / "s"),
                        "--dir", str(tmp_path / "d"), "--aclfile", str(f)], capture_output=True, timeout=30)
    assert p.returncode != 0
    assert b"line 2" in p.stderr and b"syntax error" in p.stderr, p.stderr


def test_ordo_tool_user(srv):
    setuser(srv, "svc", "on", ">s1", "%Q~jobs", "+q.push")
    base = [prog("ordo"), "-p", str(srv.port), "-a", "s1"]
    p = subprocess.run(base + ["--user", "svc", "push", "jobs", "k", "v"], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(base + ["--user", "svc", "push", "other", "k", "v"], capture_output=True, timeout=30)
    assert p.returncode == 1 and b"NOPERM" in p.stderr
    env = {"ORDO_USER": "svc", "PATH": "/usr/bin:/bin"}
    p = subprocess.run(base + ["push", "jobs", "k", "v"], capture_output=True, timeout=30, env=env)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(base + ["push", "jobs", "k", "v"], capture_output=True, timeout=30)  # default user: wrong pw
    assert p.returncode == 1
