#!/usr/bin/env python3
"""scripts/layers.py -- the mechanics of scripts/check-layers.sh.

check-layers.sh owns the rules (the table at its head) and passes them in
with --rules; this file only applies them. It judges two things:

  calls     every global symbol an object file references (nm -u) and
            another unit defines (nm --defined-only), read from the
            objects CMake built: what the code really calls, whatever it
            includes. A symbol none of our objects defines belongs to the C
            library or another library and is not judged, except libuv's
            (uv_*), which is the unit `uv`.
  includes  every #include "..." of every source and header under src/: a
            folder-qualified name ("core/kv.h") or a top-level header
            ("server.h") must be one the unit's rule lists; a bare name of
            the file's own folder always may. #include <uv.h> only in a
            unit that may call uv.

A unit is a folder (src/server/ left out: "cmd", "base", "client/uv"), a
file pattern inside one that its own rule names ("log/raft*", "net/resp.*"),
or "server": the files directly in src/server/. The most specific unit
wins. A reference from one unit to another is allowed if the caller's rule
lists the callee, or the callee's folder when the callee is a file pattern
of another folder (listing "log" covers "log/raft*"); references inside a
unit are always allowed.

Output, on stderr, one line per finding:

  layers: <file.o> (<unit>) calls <symbol> defined in <unit2> (<file2.o>)
  layers: <file> (<unit>) includes "<header>"
  layers: <allow-list>:<n>: <unit> <symbol> is no longer needed ...

The allow-list (--allow) holds known violations, `unit symbol` a line; an
entry excuses every reference of that unit to that symbol, and an entry
that excuses nothing is itself a finding, so the list cannot rot. Exit 1 if
anything was found, 2 on a usage or build-tree error. --graph prints the
unit graph instead (edges with counts, and the symbols of each edge that
breaks a rule).
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

# Objects outside src/ that belong to a unit: generated sources (the
# dashboard's files, embedded for net/http.c).
GENERATED = {"http_assets": "net"}
# Symbols none of our objects define, judged as a unit: prefix -> unit.
EXTERNAL = {"uv_": "uv"}
EXTERNAL_OBJ = {"uv": "libuv"}


def is_pattern(unit):
    return any(c in unit for c in "*?[")


def folder_of(unit):
    """The folder a unit is part of ("log" for "log/raft*")."""
    return unit.rsplit("/", 1)[0] if is_pattern(unit) else unit


class Rule:
    def __init__(self, unit, calls, includes, why):
        self.unit, self.calls, self.includes, self.why = unit, calls, includes, why

    def may_call(self, callee):
        if "*" in self.calls or callee in self.calls:
            return True
        # Listing a folder covers its file-pattern units, seen from another folder.
        return is_pattern(callee) and folder_of(callee) in self.calls and folder_of(callee) != folder_of(self.unit)

    def may_include(self, header):
        if self.includes is None:
            return True
        return any(header == i or (i.endswith("/") and header.startswith(i)) for i in self.includes)


def parse_rules(text):
    """The table: `unit | calls | includes` lines, each followed by one or
    more lines starting with whitespace: its reason. '-' is an empty list
    (for includes: not checked). Returns {unit: Rule}, in table order."""
    rules, last = {}, None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace():
            if last is None:
                sys.exit("layers: the rules table starts with a reason")
            last.why += " " + line.strip()
            continue
        cols = [c.strip() for c in line.split("|")]
        if len(cols) != 3:
            sys.exit(f"layers: rules: want `unit | calls | includes`, got {line!r}")
        if cols[0] == "unit":
            continue  # the table's header
        calls = set(w for w in cols[1].split() if w != "-")
        includes = None if cols[2] == "-" else set(cols[2].split())
        last = rules[cols[0]] = Rule(cols[0], calls, includes, "")
    for r in rules.values():
        if not r.why:
            sys.exit(f"layers: rules: {r.unit} says no why")
    return rules


def unit_of(path, rules):
    """The unit of a source path relative to the repository (src/...)."""
    if path.startswith("<generated>/"):
        return GENERATED[path.split("/", 1)[1]]
    p = path[len("src/"):]
    if p.startswith("server/"):
        p = p[len("server/"):]
    folder, name = os.path.split(p)
    folder = folder or "server"
    for unit in rules:
        if is_pattern(unit) and folder_of(unit) == folder and fnmatch.fnmatch(name, unit.rsplit("/", 1)[1]):
            return unit
    return folder


def short(path):
    """src/server/cmd/cmd.c -> cmd.o: the object's name as the report gives it."""
    return os.path.basename(path).rsplit(".", 1)[0] + ".o"


def source_of(root, build, obj):
    """The repository path of obj's source (src/server/cmd/cmd.c), or None
    if it is not one of ours. Objects whose source is gone are skipped:
    CMake leaves them behind when a file is renamed or removed."""
    parts = os.path.relpath(obj, os.path.join(build, "CMakeFiles")).split(os.sep)
    if len(parts) < 2 or not parts[0].endswith(".dir"):
        return None
    src = "/".join(parts[1:])[:-len(".o")]
    stem = os.path.basename(src).rsplit(".", 1)[0]
    if len(parts) == 2 and stem in GENERATED:
        return "<generated>/" + stem
    if not src.startswith("src/") or not os.path.exists(os.path.join(root, src)):
        return None
    return src


def read_objects(root, build, rules):
    """{source path: (unit, defined symbols, undefined symbols)}."""
    objs = {}
    for dirpath, _, files in os.walk(os.path.join(build, "CMakeFiles")):
        for f in sorted(files):
            if not f.endswith(".o"):
                continue
            obj = os.path.join(dirpath, f)
            src = source_of(root, build, obj)
            if src is None:
                continue
            out = subprocess.run(["nm", "-g", obj], check=True, capture_output=True, text=True).stdout
            defined, undefined = set(), set()
            for line in out.splitlines():
                w = line.split()
                if len(w) == 2 and w[0] == "U":
                    undefined.add(w[1])
                elif len(w) == 3 and w[1] not in "Uvw":
                    defined.add(w[2])
            objs[src] = (unit_of(src, rules), defined, undefined)
    return objs


def references(objs):
    """Every reference from one unit to another, sorted:
    [(src, unit, symbol, src2 or the library, unit2)]."""
    where = {}
    for src, (unit, defined, _) in sorted(objs.items()):
        for sym in defined:
            where.setdefault(sym, (src, unit))
    out = []
    for src, (unit, _, undefined) in sorted(objs.items()):
        for sym in sorted(undefined):
            if sym in where:
                src2, unit2 = where[sym]
            else:
                ext = [u for p, u in EXTERNAL.items() if sym.startswith(p)]
                if not ext:
                    continue
                src2, unit2 = EXTERNAL_OBJ[ext[0]], ext[0]
            if unit2 != unit:
                out.append((src, unit, sym, src2, unit2))
    return out


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]*)[>"]')


def check_includes(root, rules):
    """Findings of the include rules, as report lines."""
    found = []
    for dirpath, _, files in sorted(os.walk(os.path.join(root, "src"))):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                found += check_file_includes(root, path, rules)
    return found


def check_file_includes(root, path, rules):
    unit = unit_of(path, rules)
    rule = rules.get(unit)
    found = []
    with open(os.path.join(root, path), errors="replace") as fh:
        for line in fh:
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            if kind == "<":
                if name == "uv.h" and (rule is None or not rule.may_call("uv")):
                    found.append(f"{path} ({unit}) includes <uv.h>")
                continue
            if "/" not in name and os.path.exists(os.path.join(root, os.path.dirname(path), name)):
                continue  # a header of its own folder
            if rule is None or not rule.may_include(name):
                found.append(f'{path} ({unit}) includes "{name}"')
    return found


def read_allow(path):
    """The allow-list: [(line number, unit, symbol)]."""
    entries = []
    if not os.path.exists(path):
        return entries
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            w = line.split()
            if len(w) != 2:
                sys.exit(f"layers: {path}:{n}: want `unit symbol`, got {line!r}")
            entries.append((n, w[0], w[1]))
    return entries


def print_graph(refs, rules):
    """Unit -> unit with the number of distinct symbols and of objects
    referencing them; an edge that breaks a rule lists its symbols."""
    edges = {}
    for src, unit, sym, _, unit2 in refs:
        e = edges.setdefault((unit, unit2), (set(), set()))
        e[0].add(sym)
        e[1].add(src)
    print("unit -> unit: distinct symbols referenced (objects referencing them); '!' breaks a rule")
    for (u, u2), (syms, srcs) in sorted(edges.items()):
        bad = u not in rules or not rules[u].may_call(u2)
        print(f"{'!' if bad else ' '} {u:>15} -> {u2:<15} {len(syms):3d} ({len(srcs)})")
        if bad:
            words, line = sorted(syms), "      "
            for w in words:
                if len(line) + len(w) > 100:
                    print(line)
                    line = "      "
                line += " " + w
            print(line)


def main():
    ap = argparse.ArgumentParser(description="check the layers (scripts/check-layers.sh)")
    ap.add_argument("--root", required=True, help="the repository")
    ap.add_argument("--build", required=True, help="the CMake build tree")
    ap.add_argument("--rules", required=True, help="the rules table's text")
    ap.add_argument("--allow", required=True, help="the allow-list file")
    ap.add_argument("--graph", action="store_true", help="print the unit graph")
    a = ap.parse_args()

    rules = parse_rules(a.rules)
    if not os.path.isdir(os.path.join(a.build, "CMakeFiles")):
        print(f"layers: no CMake build tree at {a.build} (build first, or name it)", file=sys.stderr)
        return 2
    objs = read_objects(a.root, a.build, rules)
    if not any(u == "cmd" for u, _, _ in objs.values()):
        print(f"layers: no objects of src/server/cmd under {a.build} (build ordod first)", file=sys.stderr)
        return 2
    refs = references(objs)
    if a.graph:
        print_graph(refs, rules)
        return 0

    findings = check_includes(a.root, rules)
    allow = read_allow(a.allow)
    used = set()
    for src, unit, sym, src2, unit2 in refs:
        if unit in rules and rules[unit].may_call(unit2):
            continue
        hit = [n for n, u, s in allow if u == unit and s == sym]
        if hit:
            used.update(hit)
            continue
        where = short(src2) if unit2 not in EXTERNAL_OBJ else EXTERNAL_OBJ[unit2]
        findings.append(f"{short(src)} ({unit}) calls {sym} defined in {unit2} ({where})")
    rel = os.path.relpath(a.allow, a.root)
    for n, u, s in allow:
        if n not in used:
            findings.append(f"{rel}:{n}: {u} {s} is no longer needed (no call of it breaks a rule): delete the line")
    for f in findings:
        print("layers: " + f, file=sys.stderr)
    if findings:
        print(f"layers: {len(findings)} finding(s); the rules are at the head of scripts/check-layers.sh",
              file=sys.stderr)
        return 1
    print(f"layers: ok ({len(objs)} objects, {len(refs)} references between units, "
          f"{len(allow)} allowed for now)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
