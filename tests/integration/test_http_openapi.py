"""The OpenAPI description (/v1/openapi.json, docs/http.md) is served
without a token, is the file in the tree, and describes the routes that
exist: every operation it has is answered by its route (never 404 'no such
route' nor 405), with a status the operation lists. The other direction (a
route of http.c the description lacks) is scripts/check-openapi.py, a unit
test. Client: http.client."""
import json
import os
import re

from test_http import req

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SPEC = os.path.join(ROOT, "src", "server", "net", "api", "openapi.json")
SAMPLES = {"queue": "oq", "key": "k", "id": "1", "name": "n"}


def deref(doc, node):
    """node, or what its $ref names."""
    if "$ref" not in node:
        return node
    out = doc
    for part in node["$ref"].lstrip("#/").split("/"):
        out = out[part]
    return out


def test_served_without_a_token_and_the_tree_s_file(ordod_factory):
    srv = ordod_factory("--requirepass", "pw")
    st, h, body = req(srv, "GET", "/v1/openapi.json", headers={"Authorization": "none"})
    assert (st, h["content-type"]) == (200, "application/json")
    assert json.loads(body) == json.load(open(SPEC))
    st, h, _ = req(srv, "POST", "/v1/openapi.json", headers={"Authorization": "Bearer pw"})
    assert (st, h["allow"]) == (405, "GET")


def test_every_described_operation_is_a_route(ordod_factory):
    srv = ordod_factory("--http-call-timeout-ms", "100")
    doc = json.load(open(SPEC))
    called = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            params = [deref(doc, p) for p in op.get("parameters", [])]
            query = "&".join("%s=1" % p["name"] for p in params if p["in"] == "query" and p.get("required"))
            target = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path) + ("?" + query if query else "")
            st, h, body = req(srv, method.upper(), target, body=b"1" if "requestBody" in op else None)
            where = "%s %s -> %d %r" % (method.upper(), target, st, body[:200])
            assert st != 405, where
            assert not (st == 404 and b"no such route" in body), where
            assert str(st) in op["responses"], where
            called += 1
    assert called == sum(len(i) for i in doc["paths"].values()) >= 25
