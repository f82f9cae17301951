#!/usr/bin/env python3
"""scripts/check-openapi.py -- the HTTP route table and the OpenAPI
description agree (a unit test: ctest -L unit -R openapi).

Usage: check-openapi.py src/server/net/http.c src/server/net/api/openapi.json

Reads the rows of routes[] in http.c ({HTTP_<METHOD>, "<path>", rest,
open, <params>, <handler>}) and the parameter lists they name
(static const char *const p_x[] = {"a", "b", NULL};), and checks, both
ways, that every method and path of the table is an operation of the
description and every operation a row of the table; that the query
parameters of each operation are the ones its row takes; that each {name}
of a path is a path parameter of its operation; that the open routes (no
token) are the operations with `security: []`; and that every $ref
resolves. The dashboard's files are not in the table: the description
has "/" for them. Exits 1 naming each difference."""
import json
import re
import sys

ROW = re.compile(r'\{HTTP_(GET|PUT|POST|DELETE), "([^"]+)", (true|false), (true|false), (\w+), \w+\}')
PARAMS = re.compile(r'static const char \*const (p_\w+)\[\] = \{([^}]*)\};')
NOT_IN_TABLE = {("get", "/")}  # the dashboard's page (http_assets)


def table(src):
    lists = {name: re.findall(r'"([^"]+)"', body) for name, body in PARAMS.findall(src)}
    start = src.index("static const route_t routes[] = {")
    end = src.index("};", start)
    rows = {}
    for method, path, _rest, open_, params in ROW.findall(src[start:end]):
        key = (method.lower(), path)
        assert key not in rows, "duplicate row %s %s" % key
        rows[key] = {"open": open_ == "true", "params": None if params == "NULL" else set(lists[params])}
    return rows


def resolve(doc, ref):
    node = doc
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def main(http_c, openapi_json):
    src = open(http_c).read()
    doc = json.load(open(openapi_json))
    rows = table(src)
    errors = []
    if doc.get("openapi") != "3.1.0":
        errors.append("openapi must be 3.1.0")
    for ref in set(refs(doc)):
        try:
            resolve(doc, ref)
        except (KeyError, TypeError):
            errors.append("unresolved $ref " + ref)
    ops = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            ops[(method, path)] = op
    for key in sorted(set(rows) - set(ops)):
        errors.append("route %s %s is in http.c but not in the description" % (key[0].upper(), key[1]))
    for key in sorted(set(ops) - set(rows) - NOT_IN_TABLE):
        errors.append("%s %s is described but http.c has no such route" % (key[0].upper(), key[1]))
    for key in sorted(set(ops) & set(rows)):
        op, row = ops[key], rows[key]
        name = "%s %s" % (key[0].upper(), key[1])
        params = [resolve(doc, p["$ref"]) if "$ref" in p else p for p in op.get("parameters", [])]
        query = {p["name"] for p in params if p["in"] == "query"}
        if row["params"] is not None and query != row["params"]:
            errors.append("%s: query parameters %s described, %s taken" % (name, sorted(query), sorted(row["params"])))
        in_path = {p["name"] for p in params if p["in"] == "path"}
        if in_path != set(re.findall(r"\{(\w+)\}", key[1])):
            errors.append("%s: path parameters %s described" % (name, sorted(in_path)))
        if row["open"] != (op.get("security") == []):
            errors.append("%s: open (no token) in http.c is %s, the description says otherwise" % (name, row["open"]))
        if not op.get("responses"):
            errors.append("%s: no responses described" % name)
    for e in errors:
        print("check-openapi: " + e, file=sys.stderr)
    print("check-openapi: %d routes, %d operations, %d differences" % (len(rows), len(ops), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
