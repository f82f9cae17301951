"""The HTTP door keeps the small promises HTTP makes (docs/http.md):
conditional GET (304) and If-Match: *, unknown query parameters and
malformed conditional headers refused by name, a default call timeout, a
bad Last-Event-ID refused, results of an unknown queue 404, results that
are JSON served as JSON, CORS for configured origins (preflight and
responses), OPTIONS answered, and no Content-Length on 204/304. Clients:
http.client, curl, and a RESP consumer (redis-py)."""
import json
import subprocess
import time

from test_http import DEADLINE_S, problem, raw_exchange, req

ORIGIN = "https://app.example:8443"


def put(srv, key, body, headers=None):
    st, h, b = req(srv, "PUT", "/v1/kv/" + key, body=body, headers=headers)
    return st, h, b


def test_conditional_get_answers_304_while_the_copy_is_current(server):
    st, h, _ = put(server, "doc", b"v1")
    etag = h["etag"]
    st, h, body = req(server, "GET", "/v1/kv/doc", headers={"If-None-Match": etag})
    assert (st, body, h["etag"]) == (304, b"", etag)
    assert "content-length" not in h
    # A list naming it, weak form included, matches too; another does not.
    assert req(server, "GET", "/v1/kv/doc", headers={"If-None-Match": '"1", W/' + etag})[0] == 304
    assert req(server, "GET", "/v1/kv/doc", headers={"If-None-Match": "*"})[0] == 304
    st, h2, body = req(server, "GET", "/v1/kv/doc", headers={"If-None-Match": '"999999"'})
    assert (st, body) == (200, b"v1")
    # Once it changed, the old ETag gets the new value.
    put(server, "doc", b"v2")
    st, _, body = req(server, "GET", "/v1/kv/doc", headers={"If-None-Match": etag})
    assert (st, body) == (200, b"v2")
    p = problem(req(server, "GET", "/v1/kv/doc", headers={"If-None-Match": "12"}))
    assert p["status"] == 400 and "If-None-Match must be" in p["detail"]


def test_if_match_star_writes_only_an_existing_key(server):
    p = problem(put(server, "m", b"x", headers={"If-Match": "*"}))
    assert p["status"] == 412 and "no such key" in p["detail"]
    assert req(server, "GET", "/v1/kv/m")[0] == 404  # nothing written
    put(server, "m", b"first")
    st, h, _ = put(server, "m", b"second", headers={"If-Match": "*"})
    assert st == 200
    assert req(server, "GET", "/v1/kv/m")[2] == b"second"
    st, _, _ = req(server, "DELETE", "/v1/kv/m", headers={"If-Match": "*"})
    assert st == 200
    assert req(server, "DELETE", "/v1/kv/m", headers={"If-Match": "*"})[0] == 412
    p = problem(put(server, "m", b"x", headers={"If-None-Match": '"3"'}))
    assert p["status"] == 400 and "must be *" in p["detail"]


def test_unknown_query_parameters_are_named(server):
    p = problem(req(server, "POST", "/v1/queues/q/keys/k/call?timout=50", body=b"p"))
    assert p["status"] == 400
    assert p["detail"] == "unknown query parameter 'timout'; this route takes timeout"
    p = problem(req(server, "GET", "/v1/kv/x?rev=3"))
    assert p["status"] == 400 and "'rev'" in p["detail"] and "takes none" in p["detail"]
    p = problem(req(server, "GET", "/v1/watch?key=a&prefx=b"))
    assert p["status"] == 400 and "'prefx'" in p["detail"]
    p = problem(req(server, "GET", "/v1/queues/q/results/1?wiat=1"))
    assert p["status"] == 400 and "'wiat'" in p["detail"]
    # Nothing was pushed by the refused call.
    with server.raw() as c:
        assert c.call("Q.LEN", "q") == [0, 0, 0]


def test_a_call_without_timeout_waits_the_default_then_202(ordod_factory):
    srv = ordod_factory("--http-call-timeout-ms", "300")
    t0 = time.monotonic()
    st, h, body = req(srv, "POST", "/v1/queues/dq/keys/k/call", body=b"work")
    elapsed = time.monotonic() - t0
    assert st == 202, body
    assert h["location"].startswith("/v1/queues/dq/results/")
    assert 0.3 <= elapsed < DEADLINE_S
    mid = json.loads(body)["id"]
    # The message is still queued and runs: its result appears at Location.
    with srv.raw() as c:
        msgs = c.call("Q.PULL", "dq")
        assert int(msgs[0][0]) == mid
        assert c.call("Q.ACK", "dq", msgs[0][0], msgs[0][4], "RESULT", '{"ok": true}') == 1
    st, h, body = req(srv, "GET", h["location"])
    assert (st, json.loads(body)) == (200, {"ok": True})
    assert h["content-type"] == "application/json"


def test_results_json_or_bytes_and_unknown_queue(server):
    p = problem(req(server, "GET", "/v1/queues/nosuch/results/1"))
    assert (p["status"], p["detail"]) == (404, "no such queue") and "code" not in p
    with server.raw() as c:
        results = {}
        for payload, result in ((b"a", b'{"n": [1, 2.5e3, "x\\u00e9"], "t": null}'), (b"b", b"plain text"),
                                (b"c", b'{"unclosed": 1'), (b"d", b"\xff\xfe")):
            mid = c.call("Q.PUSH", "rq", payload.decode("latin-1"), payload)
            m = c.call("Q.PULL", "rq")[0]
            assert c.call("Q.ACK", "rq", m[0], m[4], "RESULT", result) == 1
            results[mid] = result
    want = {b'{"n": [1, 2.5e3, "x\\u00e9"], "t": null}': "application/json", b"plain text":
            "application/octet-stream", b'{"unclosed": 1': "application/octet-stream",
            b"\xff\xfe": "application/octet-stream"}
    for mid, result in results.items():
        st, h, body = req(server, "GET", "/v1/queues/rq/results/%d" % mid)
        assert (st, body) == (200, result)
        assert h["content-type"] == want[result], result
    # A result not there yet, on a queue that exists: 204, with no length.
    st, h, body = req(server, "GET", "/v1/queues/rq/results/999999")
    assert (st, body) == (204, b"")
    assert "content-length" not in h


def test_last_event_id_must_be_a_revision(server):
    p = problem(req(server, "GET", "/v1/watch?key=a", headers={"Last-Event-ID": "abc"}))
    assert p["status"] == 400 and "Last-Event-ID must be" in p["detail"]


def test_cors_for_configured_origins(ordod_factory):
    srv = ordod_factory("--http-cors-origins", ORIGIN + ",http://localhost:3000", "--requirepass", "pw")
    # Preflight: no credentials, the methods and headers a page may use.
    st, h, _ = req(srv, "OPTIONS", "/v1/kv/x", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "PUT", "Authorization": "none"})
    assert st == 204
    assert h["access-control-allow-origin"] == ORIGIN
    assert "PUT" in h["access-control-allow-methods"]
    assert "If-Match" in h["access-control-allow-headers"]
    assert "Authorization" in h["access-control-allow-headers"]
    # The response itself says the origin may read it, and its ETag.
    st, h, _ = req(srv, "PUT", "/v1/kv/x", body=b"1", headers={"Origin": ORIGIN})
    assert st == 200
    assert h["access-control-allow-origin"] == ORIGIN and h["vary"] == "Origin"
    assert "ETag" in h["access-control-expose-headers"]
    # A 401 carries them too, so the page can read why.
    resp = req(srv, "GET", "/v1/kv/x", headers={"Origin": ORIGIN, "Authorization": "Bearer no"})
    assert resp[0] == 401 and resp[1]["access-control-allow-origin"] == ORIGIN
    assert problem(resp)["status"] == 401
    # Another origin: preflight refused by name, responses without CORS.
    p = problem(req(srv, "OPTIONS", "/v1/kv/x", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "PUT", "Authorization": "none"}))
    assert p["status"] == 403 and "http-cors-origins" in p["detail"]
    st, h, _ = req(srv, "GET", "/v1/kv/x", headers={"Origin": "https://evil.example"})
    assert st == 200 and "access-control-allow-origin" not in h


def test_no_cors_by_default_and_options_lists_the_methods(server):
    st, h, _ = req(server, "OPTIONS", "/v1/kv/x", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"})
    assert st == 403
    st, h, body = req(server, "OPTIONS", "/v1/kv/x")
    assert (st, body) == (204, b"")
    assert "PUT" in h["allow"] and "content-length" not in h
    st, h, _ = req(server, "GET", "/v1/status", headers={"Origin": ORIGIN})
    assert st == 200 and "access-control-allow-origin" not in h


def test_curl_preflight_and_keep_alive_after_204(ordod_factory):
    # A 204 without Content-Length must not confuse a client reusing the
    # connection: curl sends two requests on one connection.
    srv = ordod_factory("--http-cors-origins", "*")
    url = "http://127.0.0.1:%d" % srv.http_port
    p = subprocess.run(["curl", "-s", "-i", "-X", "OPTIONS", "-H", "Origin: http://x.example", "-H",
                        "Access-Control-Request-Method: POST", url + "/v1/kv/a", "--next", "-s", "-i",
                        url + "/v1/kv/a"], capture_output=True, timeout=DEADLINE_S)
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    assert out.count("HTTP/1.1 ") == 2
    assert "HTTP/1.1 204" in out and "access-control-allow-origin: http://x.example" in out.lower()
    assert "HTTP/1.1 404" in out


def test_a_bare_304_keeps_the_connection_usable(server):
    _, h, _ = put(server, "k304", b"v")
    etag = h["etag"]
    data = ("GET /v1/kv/k304 HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n\r\n"
            "GET /v1/kv/k304 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % etag).encode()
    out = raw_exchange(server, data)
    assert out.startswith(b"HTTP/1.1 304 Not Modified\r\n")
    assert out.count(b"HTTP/1.1 200 OK") == 1 and out.endswith(b"\r\n\r\nv")


def test_a_request_line_refused_midway_answers_the_same_however_it_was_read(server):
    """A /v1 URL refused inside the request line (a NUL byte) gets the same
    answer however the bytes arrived: problem+json, judged on the bytes
    before the refusal, not on how much of the URL the parser had handed
    over, which depends on the reads (found by the HTTP fuzz target's split
    check)."""
    import socket
    data = b"POST /v1/queues/q/keys/k\x00/x HTTP/1.1\r\nHost: x\r\n\r\n"

    def exchange(chunk):
        s = socket.create_connection(("127.0.0.1", server.http_port), timeout=10)
        try:
            for i in range(0, len(data), chunk):
                try:
                    s.sendall(data[i:i + chunk])
                except (BrokenPipeError, ConnectionResetError):
                    break  # refused and closed: the rest is not read
            out = b""
            while True:
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    return out
                if not b:
                    return out
                out += b
        finally:
            s.close()
    whole, dripped = exchange(len(data)), exchange(3)
    assert whole.startswith(b"HTTP/1.1 400 ") and b"application/problem+json" in whole, whole
    assert dripped == whole


def test_head_answers_the_gets_headers_without_the_body(server):
    """HEAD of a GET route: the same status and headers, Content-Length
    the body's, no body; the connection stays usable. An event stream is
    405 for HEAD."""
    put(server, "hk", b"twelve bytes")
    st, h, body = req(server, "HEAD", "/v1/kv/hk")
    assert (st, body) == (200, b"")
    assert h["content-length"] == "12" and h["etag"]
    assert req(server, "HEAD", "/v1/kv/nokey")[0] == 404
    st, h, _ = req(server, "HEAD", "/v1/status")
    assert st == 200 and int(h["content-length"]) > 0
    st, h, _ = req(server, "HEAD", "/v1/watch?key=a")
    assert st == 405 and h["allow"] == "GET"
    data = b"HEAD /v1/kv/hk HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/kv/hk HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    out = raw_exchange(server, data)
    assert out.count(b"HTTP/1.1 200 OK") == 2 and out.endswith(b"\r\n\r\ntwelve bytes")
