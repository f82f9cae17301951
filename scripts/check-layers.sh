#!/usr/bin/env bash
# scripts/check-layers.sh -- the layers stay layers (docs/architecture.md).
#
#   scripts/check-layers.sh [--graph] [BUILD_DIR]
#
# Judges what the code calls, not only what it includes: it reads the
# symbols every object file CMake built references (nm) and finds the unit
# that defines each, so a call up a layer fails even when the header that
# declares it came in through a lower one. It also checks the #include
# lines of src/ (cheap, and they catch a header's dependency before any code
# uses it). Each break prints one line,
#
#   layers: <file.o> (<unit>) calls <symbol> defined in <unit2> (<file2.o>)
#
# and the script exits 1. Run by ctest (test `layers`, label unit) with the
# build tree as its argument, so a change that crosses a layer fails the
# suite. BUILD_DIR defaults to $ORDO_BUILD_DIR, else build/. --graph prints
# the graph of units instead: edges with counts, and the symbols of every
# edge that breaks a rule. scripts/layers.py holds the mechanics.
#
# The allow-list, scripts/layers-allow.txt, names the calls that break a
# rule today (`unit symbol` a line) while the code moves to the rules; it
# only shrinks. An entry that no longer excuses any call is itself a
# finding: delete the line, so the list cannot rot.
#
# The rules. A unit is a folder (src/server/ left out), a file pattern in a
# folder ("log/raft*"; "net/conn.[c]" is conn.c alone; the most specific
# unit wins), or `server`: the files
# directly in src/server/. A unit may call itself and the units it lists;
# listing a folder covers its file-pattern units when seen from another
# folder (a folder and its own file-pattern units list each other where
# they call each other); `uv` is libuv. A unit may include ("-": not
# checked) the headers it lists, as the #include writes them ("base/" is a
# folder, "server.h" one header), and always its own folder's; <uv.h> only
# if it may call uv. The tree of calls is
#   net -> cmd -> writer -> {core, log} -> base
# (log may use core's records); an arrow points only down, and skips a
# floor only where the table says so.
RULES=$(cat <<'EOF'
unit            | calls                                            | includes
base            | -                                                | base/
    The bottom: buffers, hashes, lists. No ordo knowledge, so libordo, the
    client and the server all build on it.
lib             | base                                             | base/ lib/ ordo/
    libordo: the in-process primitives know nothing of the server.
client          | base                                             | base/ client/ ordo/
    The client ships in libordo and needs nothing of lib/ or the server.
client/uv       | client base uv                                   | base/ client/ ordo/
    The asynchronous client runs on the caller's libuv loop.
tools           | client lib base tools/tool                       | base/ client/ ordo/ tool/
    The ordo tool is a client like any other (libordo's ordo_strerror()
    names every error code, the client's included).
tools/tool      | client lib base                                  | base/ client/ ordo/
    The parts of the ordo tool beside its main file (option parsing,
    status, top): a client too, and they call nothing of ordo.c.
core            | base                                             | base/ core/
    The state machine is a function of the log: no loop, no connections,
    no RESP, no log, no writer.
log             | core base                                        | base/ core/ log/
    The log stores records (core's byte form) and never drives the
    writer: it reports through the hooks the writer gave it.
log/raft*       | log core base uv                                 | base/ core/ log/
    The raft log runs on ordod's loop, so it alone of log/ uses libuv.
writer          | core log base uv                                 | base/ core/ log/ writer/ ordo/ net/conn.h server.h config.h
    The single writer applies records and drives the log. It never
    writes RESP or looks into a connection: what it tells a client is an
    outcome (writer/outcome.h), and what it needs of net or cmd (answer,
    park and resume a client, flush, drop unsure connections) goes through
    hooks main.c installs.
cmd             | writer core log base net/resp.* net/conn.[c] server/config.* | -
    Commands parse arguments, make records and speak RESP: timers and wait
    lists are the writer's (no libuv here); of a connection they use only
    its bookkeeping (net/conn.c), never its I/O.
cmd/registry.*  | cmd writer core log base net/resp.* net/conn.[c] server/config.* | -
    The table of families and dispatch, the top of cmd/: it names every
    family, so no family calls it (they read the command table through
    cmd/table.c, below them), or the families would form a circle again.
net/resp.*      | base                                             | base/
    RESP's byte form: parsing and encoding over buffers, no connection,
    so the command layer can write replies without calling up into net.
net/conn.[c]    | base                                             | base/ net/ server.h
    A connection's bookkeeping: its pending output, the shared blobs in
    it, the dirty list, the memory connections hold. No I/O, so cmd/ may
    queue output into a connection; it reaches the owner only for net's
    lists (server.h).
net             | net/resp.* net/conn.[c] cmd writer base uv         | base/ net/ cmd/ writer/ ordo/ config.h
    net moves bytes and hands requests to cmd. It may skip cmd to ask the
    writer for what decides when bytes move (durability marks,
    back-pressure, the per-turn tick, a closed connection's waits), but
    never the core or the log (so not server.h either).
server/config.* | base                                             | -
    Options: parsed by main.c, read through s->cfg, listed and changed by
    CONFIG in cmd/; they call nothing of ordod.
server          | *                                                | -
    main.c owns every part: it starts them, installs their hooks and stops
    them.
EOF
)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

graph=()
if [ "${1:-}" = "--graph" ]; then graph=(--graph); shift; fi
build=${1:-${ORDO_BUILD_DIR:-$root/build}}
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")
cd "$root"

# The log seam is closed: only log/ and writer/cluster.c name the raft log
# (include log/raft_log.h); everything else asks log.h or writer/cluster.h.
seam=0
if [ ${#graph[@]} -eq 0 ]; then
    while IFS= read -r f; do
        case "$f" in src/server/log/*|src/server/writer/cluster.c) continue ;; esac
        echo "layers: $f includes \"log/raft_log.h\": only log/ and writer/cluster.c name the raft log" >&2
        seam=1
    done < <(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"log/raft_log\.h"' src/server || true)
fi

python3 scripts/layers.py --root . --build "$build" --rules "$RULES" \
    --allow scripts/layers-allow.txt "${graph[@]}" || exit $?
exit $seam
