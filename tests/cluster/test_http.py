"""HTTP in cluster mode (docs/http.md): /healthz is 200 on the serving
leader and 503 on a follower; a command sent to a follower over HTTP is a
503 naming the leader; /metrics parses (prometheus_client) and carries the
ordo_cluster_* series with this member's view; /v1/status lists the
members, the same on every member."""
import json

from prometheus_client.parser import text_string_to_metric_families


def get(cl, member, method, path, body=None):
    c = cl.http_conn(member)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def samples(cl, member):
    status, body = get(cl, member, "GET", "/metrics")
    assert status == 200
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            if not s.labels:
                out[s.name] = s.value
    return out


def test_http_knows_the_role(make_cluster):
    cl = make_cluster(3, http=True)
    leader = cl.wait_ready()
    follower = cl.others(leader)[0]

    assert get(cl, leader, "GET", "/healthz")[0] == 200
    status, body = get(cl, follower, "GET", "/healthz")
    assert status == 503 and b"leader" in body, (status, body)

    assert get(cl, leader, "PUT", "/v1/kv/h", b"v")[0] == 200
    status, body = get(cl, follower, "PUT", "/v1/kv/h", b"w")
    problem = json.loads(body)  # application/problem+json, the RESP error in detail and its code
    assert status == 503 and problem["code"] == "NOTLEADER", (status, body)
    assert problem["detail"].startswith("NOTLEADER 127.0.0.1:%d" % leader.port), (status, body)

    ml, mf = samples(cl, leader), samples(cl, follower)
    assert ml["ordo_cluster_leader"] == 1 and mf["ordo_cluster_leader"] == 0
    assert ml["ordo_cluster_leader_id"] == mf["ordo_cluster_leader_id"] == leader.id
    assert ml["ordo_cluster_members"] == 3
    assert ml["ordo_cluster_entries_proposed_total"] >= 1

    for m in (leader, follower):
        status, body = get(cl, m, "GET", "/v1/status")
        assert status == 200
        c = json.loads(body)["cluster"]
        assert c["node_id"] == m.id and c["leader_id"] == leader.id
        assert sorted(x["id"] for x in c["members"]) == [1, 2, 3]
        assert [x["role"] for x in c["members"] if x["id"] == leader.id] == ["leader"]


def post(cl, member, path, body, key):
    c = cl.http_conn(member)
    try:
        c.request("POST", path, body=body, headers={"Idempotency-Key": key})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_idempotency_keys_replicate_to_the_next_leader(make_cluster):
    """An Idempotency-Key is replicated state: the member that leads after
    the first leader dies answers a repeat with the first push's id and
    another request with the key with 422; every member holds the same
    state (the digest covers the kept keys)."""
    cl = make_cluster(3, http=True)
    leader = cl.wait_ready()
    first = post(cl, leader, "/v1/queues/cart/keys/c1", b"add", "op-1")
    assert first[0] == 202
    digests = cl.wait_synced()
    assert len(set(digests.values())) == 1
    _, new, _ = cl.kill_leader()
    assert post(cl, new, "/v1/queues/cart/keys/c1", b"add", "op-1") == first
    status, body = post(cl, new, "/v1/queues/cart/keys/c1", b"remove", "op-1")
    assert status == 422 and b"op-1" in body
    other = post(cl, new, "/v1/queues/cart/keys/c2", b"add", "op-1")
    assert other[0] == 202 and other[1] != first[1]


def test_dashboard_charts_full_on_first_paint_with_the_followers_lag(make_cluster, tmp_path):
    """The leader's dashboard, opened after a few seconds of writes, draws
    every chart from the server's history on its first poll, the follower
    lag chart included (a screenshot is saved and its path printed)."""
    import re
    import os
    import sys
    import time
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
    from test_http_dashboard import chromium  # noqa: E402
    cl = make_cluster(3, http=True)
    leader = cl.wait_ready()
    t_end = time.monotonic() + 60
    i = 0
    while True:
        assert leader.call("SET", "k%d" % (i % 20), i) == "OK"
        i += 1
        status, body = get(cl, leader, "GET", "/v1/status?history=1")
        ring = json.loads(body)["history"]["seconds"]
        if len(ring["t"]) >= 5 and max(ring["lag_entries"]) >= 0 and sum(ring["kv_per_s"]) > 0:
            break
        assert time.monotonic() < t_end, ring
    url = cl.url(leader)
    dom = chromium(url, tmp_path / "profile", "--dump-dom", "--virtual-time-budget=900", *cl.browser_args())
    for chart in ("ch-throughput", "ch-latency", "ch-depth", "ch-oldest", "ch-errors", "ch-lag"):
        m = re.search(r'<figure class="chart" id="%s" data-points="(\d+)"' % chart, dom)
        assert m and int(m.group(1)) >= 5, (chart, dom[:2000])
    assert not re.search(r'<figure class="chart" id="ch-lag" hidden', dom)
    shot = tmp_path / "dashboard-cluster.png"
    chromium(url, tmp_path / "profile2", "--screenshot=%s" % shot, "--window-size=1280,1400", *cl.browser_args())
    assert shot.stat().st_size > 1000
    print("cluster dashboard screenshot: %s" % shot)


def test_transfer_route_hands_leadership_to_the_member_named(make_cluster, tmp_path):
    """POST /v1/cluster/transfer?to=id (the dashboard's "make leader")
    answers once that member leads; the leader's page offers it for each
    live voter."""
    import re
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
    from test_http_dashboard import chromium  # noqa: E402
    cl = make_cluster(3, http=True)
    leader = cl.wait_ready()
    dom = chromium(cl.url(leader), tmp_path / "profile", "--dump-dom", *cl.browser_args())
    offered = set(re.findall(r'data-action="POST /v1/cluster/transfer\?to=(\d+)"', dom))
    assert offered == {str(m.id) for m in cl.others(leader)}, offered
    target = cl.others(leader)[0]
    status, body = get(cl, leader, "POST", "/v1/cluster/transfer?to=%d" % target.id)
    assert (status, json.loads(body)) == (200, {"ok": True}), body
    assert cl.leader(min_term=1).id == target.id
    status, body = get(cl, target, "POST", "/v1/cluster/transfer?to=99")
    assert status in (400, 404, 503) and json.loads(body)["detail"], (status, body)
