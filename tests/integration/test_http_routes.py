"""The HTTP door's routes for consumers (pull with a lease, ack with a
result, nack with a delay, extend), key listing by prefix with a cursor
over one revision, locks (acquire waiting within the call timeout,
release, extend, info) and elections (campaign, proclaim, keepalive,
resign, the leader once), each with every error it can give
(docs/http.md). Clients: http.client, curl (a serverless worker's loop),
and RESP (redis-py) for what the routes must agree with."""
import json
import subprocess
import threading
import time

from test_http import DEADLINE_S, problem, q, req


def post(srv, path, body=b"", headers=None):
    return req(srv, "POST", path, body=body, headers=headers)


def pull(srv, queue, query=""):
    st, h, body = post(srv, "/v1/queues/%s/pull%s" % (queue, query))
    assert st == 200, body
    assert h["content-type"] == "application/json"
    return json.loads(body)


def assert_error(resp, status, *texts):
    """resp is a problem+json error of status whose detail has each of texts."""
    assert resp[0] == status, resp
    p = problem(resp)
    for t in texts:
        assert t in p["detail"], (t, p)
    return p


# ---- consumers ---------------------------------------------------------------

def test_pull_ack_with_a_result_answers_the_call(server):
    """A call waits while an HTTP worker pulls the message and acks it with
    a result: the call gets the result, as with a RESP consumer."""
    out = {}
    t = threading.Thread(target=lambda: out.update(call=post(server, "/v1/queues/w/keys/k1/call", b"2+2")))
    t.start()
    deadline = time.monotonic() + DEADLINE_S
    msgs = []
    while not msgs and time.monotonic() < deadline:
        msgs = pull(server, "w", "?wait=200")
    assert len(msgs) == 1
    m = msgs[0]
    assert (m["key"], m["payload"], m["attempt"]) == ("k1", "2+2", 1)
    st, _, body = post(server, "/v1/queues/w/messages/%d/ack?token=%d" % (m["id"], m["token"]), b'{"sum":4}')
    assert (st, body) == (204, b"")
    t.join(DEADLINE_S)
    st, h, body = out["call"]
    assert (st, json.loads(body)) == (200, {"sum": 4})
    # The ack was the delivery's end: the same token again is stale.
    assert_error(post(server, "/v1/queues/w/messages/%d/ack?token=%d" % (m["id"], m["token"])), 409,
                 "token %d is not the current delivery" % m["token"])


def test_pull_json_binary_as_base64_count_and_empty(server, r):
    r.execute_command("Q.PUSH", "bq", "a", b"text")
    r.execute_command("Q.PUSH", "bq", b"\xffk", b"\x00\x01")
    r.execute_command("Q.PUSH", "bq", "a", b"second of a")  # a's next: not while a is in flight
    msgs = pull(server, "bq", "?count=10")
    assert [(m.get("key"), m.get("key_b64"), m.get("payload"), m.get("payload_b64")) for m in msgs] == [
        ("a", None, "text", None), (None, "/2s=", None, "AAE=")]
    assert all(m["attempt"] == 1 and m["token"] > 0 for m in msgs)
    assert pull(server, "bq") == []  # nothing deliverable: [] at once


def test_pull_waits_for_a_push(server, r):
    def later():
        time.sleep(0.2)  # the pull is parked by then, or it finds the message at once: either passes
        r.execute_command("Q.PUSH", "wq", "k", "late")
    t = threading.Thread(target=later)
    t.start()
    msgs = pull(server, "wq", "?wait=%d" % (DEADLINE_S * 1000))
    t.join()
    assert [m["payload"] for m in msgs] == ["late"]
    t0 = time.monotonic()
    assert pull(server, "wq", "?wait=150") == []
    assert time.monotonic() - t0 >= 0.15


def test_lease_runs_out_then_extend_keeps_it(server, r):
    r.execute_command("Q.PUSH", "lq", "k", "p")
    m = pull(server, "lq", "?lease=100")[0]
    deadline = time.monotonic() + DEADLINE_S
    again = []
    while not again and time.monotonic() < deadline:
        again = pull(server, "lq", "?wait=100&lease=60000")
    assert (again[0]["id"], again[0]["attempt"]) == (m["id"], 2)
    # The first delivery's token is stale for ack, nack and extend alike.
    for verb in ("ack", "nack", "extend"):
        extra = "&lease=1000" if verb == "extend" else ""
        assert_error(post(server, "/v1/queues/lq/messages/%d/%s?token=%d%s" % (m["id"], verb, m["token"], extra)),
                     409, "nothing changed")
    tok = again[0]["token"]
    assert post(server, "/v1/queues/lq/messages/%d/extend?token=%d&lease=60000" % (m["id"], tok))[0] == 204
    ki = r.execute_command("Q.KEYINFO", "lq", "k")
    assert dict(zip(ki[::2], ki[1::2]))[b"state"] == b"processing"


def test_nack_with_delay_redelivers_later(server, r):
    r.execute_command("Q.PUSH", "nq", "k", "p")
    m = pull(server, "nq")[0]
    t0 = time.monotonic()
    st, _, _ = post(server, "/v1/queues/nq/messages/%d/nack?token=%d&delay=300" % (m["id"], m["token"]))
    assert st == 204
    assert pull(server, "nq") == []  # held for the delay
    again = pull(server, "nq", "?wait=%d" % (DEADLINE_S * 1000))
    assert time.monotonic() - t0 >= 0.3
    assert (again[0]["id"], again[0]["attempt"]) == (m["id"], 2)
    # An ack without a body keeps no result: the result route says 204.
    assert post(server, "/v1/queues/nq/messages/%d/ack?token=%d" % (m["id"], again[0]["token"]))[0] == 204
    assert req(server, "GET", "/v1/queues/nq/results/%d" % m["id"])[0] == 204


def test_consumer_route_errors(server, r):
    r.execute_command("Q.PUSH", "eq", "k", "p")
    for path, status, text in [
            ("/pull?count=0", 400, "count must be a number of messages, 1..1000"),
            ("/pull?count=1001", 400, "1..1000"),
            ("/pull?count=x", 400, "count must be"),
            ("/pull?lease=-1", 400, "lease must be a number of milliseconds"),
            ("/pull?lease=0", 400, "LEASE must be at least 1 ms"),
            ("/pull?wiat=1", 400, "unknown query parameter 'wiat'"),
            ("/messages/1/ack", 400, "token= is required"),
            ("/messages/one/ack?token=1", 400, "the message id in the path"),
            ("/messages/1/ack?token=t", 400, "token must be"),
            ("/messages/1/nack?token=1&delay=soon", 400, "delay must be"),
            ("/messages/1/extend?token=1", 400, "lease= is required"),
            ("/messages/1/ack?token=1&result=x", 400, "'result'")]:
        assert_error(post(server, "/v1/queues/eq" + path), status, text)
    assert_error(post(server, "/v1/queues/nosuch/messages/1/ack?token=1"), 404, "no such queue")
    resp = req(server, "GET", "/v1/queues/eq/pull")
    assert resp[1]["allow"] == "POST" and assert_error(resp, 405, "GET is not served here")
    # None of these took the message.
    assert r.execute_command("Q.LEN", "eq") == [1, 0, 0]


def test_bodies_above_max_value_bytes_are_413_naming_size_and_limit(ordod_factory):
    srv = ordod_factory("--max-value-bytes", "10")
    with srv.raw() as c:
        c.call("Q.PUSH", "vq", "k", "p")
    m = pull(srv, "vq")[0]
    big = b"x" * 11
    for path, what in (("/v1/queues/vq/messages/%d/ack?token=%d" % (m["id"], m["token"]), "result"),
                       ("/v1/queues/vq/keys/k", "payload"), ("/v1/elections/e/campaign?ttl=1000", "value"),
                       ("/v1/elections/e/proclaim?term=1", "value")):
        assert_error(post(srv, path, big), 413, "%s of 11 bytes above max-value-bytes (10)" % what)
    assert_error(req(srv, "PUT", "/v1/kv/k", body=big), 413, "value of 11 bytes above max-value-bytes (10)")
    # The refused ack changed nothing: the delivery is still current.
    assert post(srv, "/v1/queues/vq/messages/%d/ack?token=%d" % (m["id"], m["token"]), b"ok")[0] == 204


def test_a_curl_worker_loop(server, r, tmp_path):
    """The loop a serverless worker runs, in curl: pull, work, ack with a
    result; the producer's call gets each result."""
    base = "http://127.0.0.1:%d/v1/queues/jobs" % server.http_port
    ids = [r.execute_command("Q.PUSH", "jobs", "k%d" % i, "n=%d" % i) for i in range(3)]
    done = 0
    deadline = time.monotonic() + DEADLINE_S
    while done < 3 and time.monotonic() < deadline:
        out = subprocess.run(["curl", "-sf", "-X", "POST", base + "/pull?count=2&wait=200&lease=30000"],
                             capture_output=True, check=True, timeout=DEADLINE_S).stdout
        for m in json.loads(out):
            result = tmp_path / "result"
            result.write_bytes(m["payload"].upper().encode())
            st = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                                 "--data-binary", "@%s" % result,
                                 base + "/messages/%d/ack?token=%d" % (m["id"], m["token"])],
                                capture_output=True, check=True, timeout=DEADLINE_S).stdout
            assert st == b"204"
            done += 1
    assert done == 3
    for i, mid in enumerate(ids):
        assert r.execute_command("Q.RESULT", "jobs", mid) == b"N=%d" % i


# ---- key listing ----------------------------------------------------------------

def test_kv_range_pages_one_revision_with_a_cursor(server, r):
    for i in range(5):
        r.execute_command("KV.PUT", "app/%d" % i, "v%d" % i)
    r.execute_command("KV.PUT", "other", "x")
    r.execute_command("KV.PUT", b"app/\xff", b"\x00bin")
    st, h, body = req(server, "GET", "/v1/kv?prefix=app%2F&limit=2")
    assert st == 200 and h["content-type"] == "application/json"
    page = json.loads(body)
    rev = page["revision"]
    assert [i["key"] for i in page["items"]] == ["app/0", "app/1"]
    first = page["items"][0]
    assert (first["value"], first["version"], first["lease"]) == ("v0", 1, 0)
    assert first["create_revision"] == first["mod_revision"] <= rev
    # Changes after the first page do not show in the next ones.
    r.execute_command("KV.PUT", "app/2", "changed")
    r.execute_command("KV.DEL", "app/3")
    r.execute_command("KV.PUT", "app/25", "new")
    keys, values = [], []
    cursor = page["cursor"]
    while cursor is not None:
        st, _, body = req(server, "GET", "/v1/kv?prefix=app%2F&limit=2&cursor=" + cursor)
        assert st == 200, body
        page = json.loads(body)
        assert page["revision"] == rev
        keys += [i.get("key") or i.get("key_b64") for i in page["items"]]
        values += [i.get("value") or i.get("value_b64") for i in page["items"]]
        cursor = page["cursor"]
    assert keys == ["app/2", "app/3", "app/4", "YXBwL/8="]
    assert values == ["v2", "v3", "v4", "AGJpbg=="]
    # Without a limit, a page of up to 100; the whole list: no cursor.
    page = json.loads(req(server, "GET", "/v1/kv")[2])
    assert len(page["items"]) == 7 and page["cursor"] is None
    assert page["revision"] == r.execute_command("KV.REV")[0]
    # rev= reads as of a past revision.
    page = json.loads(req(server, "GET", "/v1/kv?prefix=app%%2F2&rev=%d" % rev)[2])
    assert [(i["key"], i["value"]) for i in page["items"]] == [("app/2", "v2")]


def test_kv_range_errors(server, r):
    r.execute_command("KV.PUT", "a", "1")
    assert_error(req(server, "GET", "/v1/kv?limit=0"), 400, "limit must be a number of keys, 1..1000")
    assert_error(req(server, "GET", "/v1/kv?limit=1001"), 400, "1..1000")
    assert_error(req(server, "GET", "/v1/kv?cursor=zz"), 400, "cursor must be one this server gave")
    assert_error(req(server, "GET", "/v1/kv?cursor=5.6"), 400, "cursor must be")
    assert_error(req(server, "GET", "/v1/kv?cursor=1.61&rev=2"), 400, "rev= and cursor= name two revisions")
    assert_error(req(server, "GET", "/v1/kv?rev=999999"), 400, "is in the future")
    assert_error(req(server, "GET", "/v1/kv?prefx=a"), 400, "unknown query parameter 'prefx'")
    st, h, _ = req(server, "POST", "/v1/kv")
    assert (st, h["allow"]) == (405, "GET")


# ---- locks ----------------------------------------------------------------------

def test_lock_acquire_waits_within_the_timeout_then_409(server):
    st, _, body = post(server, "/v1/locks/job/acquire?ttl=60000")
    assert st == 200
    token = json.loads(body)["token"]
    t0 = time.monotonic()
    assert_error(post(server, "/v1/locks/job/acquire?ttl=60000&timeout=0"), 409, "lock 'job' is held")
    assert_error(post(server, "/v1/locks/job/acquire?ttl=60000&timeout=200"), 409, "waited 200 ms")
    assert time.monotonic() - t0 >= 0.2
    info = json.loads(req(server, "GET", "/v1/locks/job")[2])
    assert info["token"] == token and 0 < info["remaining_ms"] <= 60000 and info["waiters"] == 0
    # A waiting acquire gets the lock when it is released.
    out = {}
    t = threading.Thread(target=lambda: out.update(r=post(server, "/v1/locks/job/acquire?ttl=60000&timeout=%d" %
                                                              (DEADLINE_S * 1000))))
    t.start()
    deadline = time.monotonic() + DEADLINE_S
    while json.loads(req(server, "GET", "/v1/locks/job")[2])["waiters"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert post(server, "/v1/locks/job/release?token=%d" % token)[0] == 204
    t.join(DEADLINE_S)
    st, _, body = out["r"]
    token2 = json.loads(body)["token"]
    assert st == 200 and token2 > token
    # The old token holds nothing now.
    assert_error(post(server, "/v1/locks/job/release?token=%d" % token), 409, "does not hold lock 'job'")
    assert_error(post(server, "/v1/locks/job/extend?token=%d&ttl=1000" % token), 409, "does not hold")
    assert post(server, "/v1/locks/job/extend?token=%d&ttl=120000" % token2)[0] == 204
    assert json.loads(req(server, "GET", "/v1/locks/job")[2])["remaining_ms"] > 60000
    assert post(server, "/v1/locks/job/release?token=%d" % token2)[0] == 204
    assert json.loads(req(server, "GET", "/v1/locks/job")[2]) == {"token": None, "remaining_ms": 0, "waiters": 0}


def test_lock_acquire_without_timeout_waits_the_call_timeout(ordod_factory):
    srv = ordod_factory("--http-call-timeout-ms", "300")
    assert post(srv, "/v1/locks/x/acquire?ttl=60000")[0] == 200
    t0 = time.monotonic()
    assert_error(post(srv, "/v1/locks/x/acquire?ttl=60000"), 409, "waited 300 ms")
    assert 0.3 <= time.monotonic() - t0 < DEADLINE_S


def test_lock_route_errors(server):
    # The door's own errors have no code; a command's carry its RESP code.
    assert "code" not in assert_error(post(server, "/v1/locks/x/acquire"), 400, "ttl= is required")
    assert assert_error(post(server, "/v1/locks/x/acquire?ttl=0"), 400, "ttl must be between 1 and")["code"] == "ERR"
    assert_error(post(server, "/v1/locks/x/acquire?ttl=10&timeout=x"), 400, "timeout must be a number of milliseconds")
    assert_error(post(server, "/v1/locks/x/acquire?ttl=10&wait=1"), 400, "unknown query parameter 'wait'")
    assert_error(post(server, "/v1/locks/x/release"), 400, "token= is required")
    assert_error(post(server, "/v1/locks/x/extend?token=1"), 400, "ttl= is required")
    st, h, _ = req(server, "DELETE", "/v1/locks/x")
    assert (st, h["allow"]) == (405, "GET")


# ---- elections -------------------------------------------------------------------

def test_election_campaign_proclaim_keepalive_resign(server):
    assert json.loads(req(server, "GET", "/v1/elections/primary")[2]) == {"term": 0, "value": None}
    st, _, body = post(server, "/v1/elections/primary/campaign?ttl=60000", b"node-a")
    assert st == 200
    term = json.loads(body)["term"]
    assert json.loads(req(server, "GET", "/v1/elections/primary")[2]) == {"term": term, "value": "node-a"}
    assert_error(post(server, "/v1/elections/primary/campaign?ttl=60000&timeout=0", b"node-b"), 409,
                 "another candidate leads election 'primary'")
    assert post(server, "/v1/elections/primary/proclaim?term=%d" % term, b"\xffnode-a2")[0] == 204
    assert json.loads(req(server, "GET", "/v1/elections/primary")[2]) == {"term": term, "value_b64": "/25vZGUtYTI="}
    st, _, body = post(server, "/v1/elections/primary/keepalive?term=%d" % term)
    assert st == 200 and 0 < json.loads(body)["remaining_ms"] <= 60000
    # A waiting candidate wins when the leader resigns.
    out = {}
    t = threading.Thread(target=lambda: out.update(r=post(
        server, "/v1/elections/primary/campaign?ttl=60000&timeout=%d" % (DEADLINE_S * 1000), b"node-b")))
    t.start()
    time.sleep(0.1)  # parked or not yet sent: the campaign wins after the resign either way
    assert post(server, "/v1/elections/primary/resign?term=%d" % term)[0] == 204
    t.join(DEADLINE_S)
    st, _, body = out["r"]
    term2 = json.loads(body)["term"]
    assert st == 200 and term2 > term
    assert json.loads(req(server, "GET", "/v1/elections/primary")[2]) == {"term": term2, "value": "node-b"}
    # The old term leads nothing.
    for verb in ("proclaim", "resign", "keepalive"):
        assert_error(post(server, "/v1/elections/primary/%s?term=%d" % (verb, term), b"x"), 409,
                     "term %d does not lead election 'primary'" % term)


def test_election_route_errors(server):
    assert_error(post(server, "/v1/elections/e/campaign", b"v"), 400, "ttl= is required")
    assert_error(post(server, "/v1/elections/e/campaign?ttl=1&timeout=-5", b"v"), 400, "timeout must be")
    assert_error(post(server, "/v1/elections/e/proclaim", b"v"), 400, "term= is required")
    assert_error(post(server, "/v1/elections/e/resign?term=x"), 400, "term must be")
    assert_error(post(server, "/v1/elections/e/keepalive?term=1&ttl=5"), 400, "unknown query parameter 'ttl'")
    st, h, _ = req(server, "PUT", "/v1/elections/e/campaign")
    assert (st, h["allow"]) == (405, "POST")
    assert_error(req(server, "GET", "/v1/elections/e/nope"), 404, "no such route")


def test_binary_names_in_lock_and_election_paths(server):
    name = b"a/b\xff"
    st, _, body = post(server, "/v1/locks/%s/acquire?ttl=60000" % q(name))
    assert st == 200
    with server.raw() as c:
        assert c.call("LOCK.CHECK", name, json.loads(body)["token"]) == 1
    # A detail naming bytes that are not UTF-8 stays a JSON string: U+FFFD for each.
    stale = json.loads(body)["token"] + 1000
    p = assert_error(post(server, "/v1/locks/%s/release?token=%d" % (q(name), stale)), 409, "does not hold lock")
    assert "lock 'a/b\ufffd'" in p["detail"]


def test_errors_of_the_first_routes_named(server, r):
    """The errors of the push, result, KV and watch routes not covered in
    test_http.py and test_http_promises.py, each with its text."""
    r.execute_command("Q.PUSH", "rq", "k", "p")
    assert_error(req(server, "GET", "/v1/queues/rq/results/1?wait=soon"), 400, "wait must be a number of milliseconds")
    assert_error(post(server, "/v1/queues/rq/keys/k/call?timeout=-1"), 400, "timeout must be a number of milliseconds")
    assert_error(req(server, "GET", "/v1/watch"), 400, "key= or prefix= is required")
    assert_error(req(server, "PUT", "/v1/kv/k", body=b"v", headers={"If-Match": "abc"}), 400,
                 "If-Match must be * or an ETag")
    assert assert_error(req(server, "GET", "/v1/kv/k?x"), 400, "unknown query parameter 'x'")
    assert r.execute_command("Q.LEN", "rq") == [1, 0, 0]  # the refused call pushed nothing
