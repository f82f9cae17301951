"""The OpenAPI description (/v1/openapi.json, docs/http.md) is served
without a token, is the file in the tree, and describes the routes that
exist: every operation it has is answered by its route (never 404 'no such
route' nor 405), with a status the operation lists. The other direction (a
route of http.c the description lacks) is scripts/check-openapi.py, a unit
test. Client: http.client."""
import json
import os
import re

from test_http import problem, req

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


def operations(doc):
    """(method, path, operation, a target with sample path parameters)."""
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield method, path, op, re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path)


def test_every_path_refuses_other_methods_with_allow(server):
    """Each described path answers a method it does not take with 405 and
    Allow naming the ones it does (problem details under /v1)."""
    doc = json.load(open(SPEC))
    for path, item in doc["paths"].items():
        target = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path)
        for method in {"get", "put", "post", "delete"} - set(item):
            st, h, body = req(server, method.upper(), target)
            if path == "/":
                assert st == 404, (method, path, st)  # the dashboard's page is a file: no route to refuse
                continue
            assert st == 405, (method, path, st, body)
            assert set(h["allow"].lower().split(", ")) == set(item), (method, path, h["allow"])
            if path.startswith("/v1/"):
                problem((st, h, body))


def test_every_v1_operation_names_an_unknown_parameter(server):
    doc = json.load(open(SPEC))
    for method, path, op, target in operations(doc):
        if not path.startswith("/v1/"):
            continue
        p = problem(req(server, method.upper(), target + "?bogus=1", body=b"1" if "requestBody" in op else None))
        assert p["status"] == 400 and p["detail"].startswith("unknown query parameter 'bogus'"), (method, path, p)
        # ... and lists the ones it takes, as the description does.
        taken = {deref(doc, q)["name"] for q in op.get("parameters", []) if deref(doc, q)["in"] == "query"}
        listed = p["detail"].split("; this route takes ")[1]
        assert (set(listed.split(", ")) if listed != "none" else set()) == taken, (method, path, p, taken)


def test_every_operation_needs_the_token_unless_described_open(ordod_factory):
    srv = ordod_factory("--requirepass", "pw")
    doc = json.load(open(SPEC))
    for method, path, op, target in operations(doc):
        st, h, body = req(srv, method.upper(), target, headers={"Authorization": "Bearer wrong"})
        if op.get("security") == []:
            assert st != 401, (method, path)
        else:
            assert st == 401 and "www-authenticate" in h, (method, path, st)
            if path.startswith("/v1/"):
                problem((st, h, body))
