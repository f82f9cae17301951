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
