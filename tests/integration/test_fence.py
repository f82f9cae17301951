"""Fencing beyond locks: KV.PUT, KV.DEL and Q.PUSH conditional on a lock
token (as before), an election term still leading, or a queue delivery
still current; -NOTHOLDER names what no longer holds."""
from resp import RespError


def err(v, prefix):
    assert isinstance(v, RespError), v
    assert str(v).startswith(prefix), str(v)
    return str(v)


def test_fence_election(server):
    c = server.raw()
    t1 = c.call("ELECT.CAMPAIGN", "E", "me", 60000)
    assert isinstance(t1, int)
    assert isinstance(c.call("KV.PUT", "k", "v", "FENCE", "ELECTION", "E", t1), int)
    assert isinstance(c.call("Q.PUSH", "q", "k", "p", "FENCE", "ELECTION", "E", t1), int)
    assert isinstance(c.call("KV.DEL", "k", "FENCE", "ELECTION", "E", t1), int)
    assert c.call("ELECT.RESIGN", "E", t1) == 1
    msg = err(c.call("KV.PUT", "k", "w", "FENCE", "ELECTION", "E", t1), "NOTHOLDER")
    assert "election 'E'" in msg and str(t1) in msg
    err(c.call("KV.DEL", "k", "FENCE", "ELECTION", "E", t1), "NOTHOLDER")
    err(c.call("Q.PUSH", "q", "k", "p2", "FENCE", "ELECTION", "E", t1), "NOTHOLDER")
    assert c.call("GET", "k") is None
    assert c.call("Q.LEN", "q")[0] == 1


def test_fence_delivery(server):
    c = server.raw()
    c.call("Q.PUSH", "in", "k", "p")
    (mid, _k, _p, _a, tok), = c.call("Q.PULL", "in")
    assert isinstance(c.call("KV.PUT", "s", "1", "FENCE", "DELIVERY", "in", mid, tok), int)
    assert isinstance(c.call("Q.PUSH", "out", "k", "p", "FENCE", "DELIVERY", "in", mid, tok), int)
    assert c.call("Q.ACK", "in", mid, tok) == 1
    msg = err(c.call("KV.PUT", "s", "2", "FENCE", "DELIVERY", "in", mid, tok), "NOTHOLDER")
    assert "queue 'in'" in msg and "no longer current" in msg
    err(c.call("KV.DEL", "s", "FENCE", "DELIVERY", "in", mid, tok), "NOTHOLDER")
    err(c.call("Q.PUSH", "out", "k", "p", "FENCE", "DELIVERY", "in", mid, tok), "NOTHOLDER")
    err(c.call("KV.PUT", "s", "2", "FENCE", "DELIVERY", "nosuch", 1, 1), "NOTHOLDER")
    assert c.call("GET", "s") == b"1"


def test_fence_lock_names_the_lock(server):
    c = server.raw()
    t = c.call("LOCK.ACQUIRE", "L", 60000)
    assert isinstance(c.call("Q.PUSH", "q", "k", "p", "FENCE", "L", t), int)
    msg = err(c.call("KV.PUT", "k", "v", "FENCE", "L", t + 1), "NOTHOLDER")
    assert "lock 'L'" in msg
    err(c.call("Q.PUSH", "q", "k", "p", "FENCE", "L", t + 1), "NOTHOLDER")
    err(c.call("KV.PUT", "k", "v", "FENCE", "ELECTION", "E"), "ERR")  # too few words: a lock named ELECTION with token E


def test_fence_in_transaction(server):
    c = server.raw()
    t = c.call("ELECT.CAMPAIGN", "E", "me", 60000)
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "a", "1") == "QUEUED"
    assert c.call("KV.PUT", "b", "1", "FENCE", "ELECTION", "E", t + 1) == "QUEUED"
    err(c.call("EXEC"), "CONFLICT 2 NOTHOLDER")
    assert c.call("GET", "a") is None
