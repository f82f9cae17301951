"""The dashboard's actions (docs/http.md, "The dashboard"): retry dead
letters (POST /v1/queues/{q}/redrive), drop a queue (DELETE
/v1/queues/{q}), unpark a key (POST /v1/queues/{q}/keys/{k}/unpark), each
a route of its own under the API's credentials; the page shows a button
for each where the state calls for it (the DOM after its scripts, in
headless Chromium). Leadership transfer is in tests/cluster/test_http.py."""
import json
import re

from test_http import req
from test_http_dashboard import chromium


def dead_letter(r, queue, key, payload, dlq=None):
    """Push one message and fail its only attempt: dead-lettered into dlq,
    or parked (ONPOISON park) without one."""
    args = ["Q.CONFIG", queue, "MAXATTEMPTS", 1] + (["DEADLETTER", dlq] if dlq else ["ONPOISON", "park"])
    r.execute_command(*args)
    r.execute_command("Q.PUSH", queue, key, payload)
    (mid, _, _, _, token), = r.execute_command("Q.PULL", queue)
    assert r.execute_command("Q.NACK", queue, mid, token) == 1


def test_redrive_moves_dead_letters_back_in_key_order(server, r):
    for p in ("a", "b"):
        dead_letter(r, "pay", "user-1", p, dlq="pay-dead")
    assert r.execute_command("Q.LEN", "pay-dead")[0] == 2
    st, _, body = req(server, "POST", "/v1/queues/pay/redrive")
    assert (st, json.loads(body)) == (200, {"moved": 2})
    assert r.execute_command("Q.LEN", "pay")[0] == 2 and r.execute_command("Q.LEN", "pay-dead")[0] == 0
    (m1,) = r.execute_command("Q.PULL", "pay")
    assert m1[2] == b"a"  # the key's order kept
    st, _, body = req(server, "POST", "/v1/queues/pay/redrive?key=k&id=3")
    assert st == 400 and b"exclude" in body
    st, _, body = req(server, "POST", "/v1/queues/pay/redrive?kee=k")
    assert st == 400 and b"'kee'" in body


def test_unpark_and_drop(server, r):
    dead_letter(r, "jobs", "img-7", "x")
    st, _, body = req(server, "POST", "/v1/queues/jobs/keys/img-7/unpark")
    assert (st, json.loads(body)) == (200, {"changed": 1})
    st, _, body = req(server, "POST", "/v1/queues/jobs/keys/img-7/unpark")
    assert (st, json.loads(body)) == (200, {"changed": 0})
    st, _, body = req(server, "DELETE", "/v1/queues/jobs")
    assert (st, json.loads(body)) == (200, {"changed": 1})
    assert r.execute_command("Q.LEN", "jobs") == [0, 0, 0]
    st, _, body = req(server, "DELETE", "/v1/queues/jobs")
    assert (st, json.loads(body)) == (200, {"changed": 0})


def test_transfer_on_a_single_server_says_why(server):
    st, h, body = req(server, "POST", "/v1/cluster/transfer")
    assert st in (400, 503) and h["content-type"] == "application/problem+json"
    assert json.loads(body)["detail"]


def test_dashboard_shows_the_actions_where_they_apply(server, r, tmp_path):
    dead_letter(r, "pay", "user-1", "a", dlq="pay-dead")
    dead_letter(r, "jobs", "img-7", "x")
    dom = chromium("http://127.0.0.1:%d/" % server.http_port, tmp_path / "profile", "--dump-dom")
    assert 'data-ready="1"' in dom, dom[:2000]
    actions = set(re.findall(r'<button class="act[^"]*" type="button" data-action="([^"]*)"', dom))
    assert actions == {"POST /v1/queues/pay/redrive", "DELETE /v1/queues/pay-dead",
                       "POST /v1/queues/jobs/keys/img-7/unpark"}, actions


def test_cancel_a_waiting_message_over_http(server, r):
    mid = r.execute_command("Q.PUSH", "cq", "k", "first")
    r.execute_command("Q.PUSH", "cq", "k", "second")
    st, _, body = req(server, "DELETE", "/v1/queues/cq/messages/%d" % mid)
    assert (st, json.loads(body)) == (200, {"changed": 1})
    (m,) = r.execute_command("Q.PULL", "cq")
    assert m[2] == b"second"
    st, _, body = req(server, "DELETE", "/v1/queues/cq/messages/%d" % mid)
    assert (st, json.loads(body)) == (200, {"changed": 0})


def test_schedules_over_http(server, r):
    st, _, body = req(server, "PUT", "/v1/schedules/tick?queue=sq&key=k&every=50", body=b"ping")
    assert (st, json.loads(body)) == (200, {"ok": True}), body
    (s,) = r.execute_command("Q.SCHEDULE", "LIST")
    got = dict(zip(s[0::2], s[1::2])) if isinstance(s, list) else s
    assert got[b"queue"] == b"sq" and got[b"payload"] == b"ping" and got[b"every"] == 50
    st, _, body = req(server, "PUT", "/v1/schedules/bad?queue=sq&key=k", body=b"x")
    assert st == 400 and b"every=" in body
    st, _, body = req(server, "PUT", "/v1/schedules/bad?queue=sq&key=k&every=5&cron=*%20*%20*%20*%20*", body=b"x")
    assert st == 400
    st, _, body = req(server, "PUT", "/v1/schedules/nightly?queue=sq&key=n&cron=0%203%20*%20*%20*&missed=skip",
                      body=b"report")
    assert st == 200, body
    st, _, body = req(server, "DELETE", "/v1/schedules/tick")
    assert (st, json.loads(body)) == (200, {"changed": 1})
    st, _, body = req(server, "DELETE", "/v1/schedules/tick")
    assert (st, json.loads(body)) == (200, {"changed": 0})
    assert [x for x in r.execute_command("Q.SCHEDULE", "LIST")]  # nightly stays


def test_a_call_whose_message_is_cancelled_is_gone(server, r):
    import threading
    out = {}

    def call():
        out["r"] = req(server, "POST", "/v1/queues/gq/keys/k/call?timeout=20000", body=b"job")
    t = threading.Thread(target=call)
    t.start()
    from ordoproc import poll
    poll(lambda: r.execute_command("Q.LEN", "gq")[0] == 1, "the call's message queued")
    (mid, _key, _p, _a, _t), = r.execute_command("Q.PEEK", "gq")
    st, _, body = req(server, "DELETE", "/v1/queues/gq/messages/%d" % mid)
    assert (st, json.loads(body)) == (200, {"changed": 1})
    t.join(20)
    st, h, body = out["r"]
    assert st == 410 and json.loads(body)["code"] == "CANCELLED", body
