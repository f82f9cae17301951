#!/usr/bin/env bash
# scripts/check-layers.sh -- the layers stay layers (docs/architecture.md).
#
# Reads every #include and every uv_* call in src/ and counts the lines that
# break a rule; prints each one and exits 1 if there is any. Run by
# `make test` (through ctest, label unit), so a change that crosses a layer
# fails the suite instead of slowly turning the folders back into one.
#
# The rules (an arrow only points down):
#   base/   includes only base/ and the C library: no ordo knowledge.
#   lib/    includes base/, lib/ and include/ordo/; nothing of the server.
#   core/   includes base/ and core/ only: no libuv, no connections, no
#           RESP, no log, no writer.
#   log/    includes base/, core/ and log/ only, and no <uv.h>; the raft
#           log (log/raft*) alone may use libuv: it runs on ordod's loop.
#   cmd/    calls no uv_* function (it parses, makes records, speaks RESP;
#           timers and wait lists belong to writer/).
#   writer/ includes nothing from cmd/, and from net/ only conn.h (the
#           connection record it parks and releases); what it must ask of
#           net or cmd goes through hooks the server installs.
#   net/    includes nothing from core/ or log/, and not server.h (whose
#           parts are the core's): net -> cmd -> writer is the way down.
#   client/ and tools/ include nothing from src/server/ or src/lib/.
#   The log seam is closed: only log/ and writer/cluster.c include
#   log/raft_log.h; everything else asks log.h or writer/cluster.h.
set -euo pipefail
cd "$(dirname "$0")/.."

bad=0
fail() { echo "layers: $1" >&2; bad=$((bad + 1)); }

# includes FILE: the quoted includes of FILE, one per line ("core/kv.h").
includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }
# sys_includes FILE: the angle-bracket includes ("uv.h").
sys_includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/\1/p' "$1"; }

# allow FILE PATTERN: every quoted include of FILE that names a folder must
# match the extended regex PATTERN; bare names are the file's own folder.
allow() {
    local f=$1 pat=$2 inc
    while IFS= read -r inc; do
        case "$inc" in */*) ;; *) continue ;; esac
        [[ "$inc" =~ $pat ]] || fail "$f includes \"$inc\""
    done < <(includes "$f")
}
no_uv_h() {
    if sys_includes "$1" | grep -qx 'uv.h'; then fail "$1 includes <uv.h>"; fi
}
# files DIR: the C sources and headers under DIR, if it exists.
files() { [ -d "$1" ] && find "$1" -name '*.[ch]' | sort || true; }

for f in $(files src/base); do
    allow "$f" '^base/'; no_uv_h "$f"
done
for f in $(files src/lib); do
    allow "$f" '^(base|lib|ordo)/'; no_uv_h "$f"
done
for f in $(files src/server/core); do
    allow "$f" '^(base|core)/'; no_uv_h "$f"
done
for f in $(files src/server/log); do
    allow "$f" '^(base|core|log)/'
    case "$(basename "$f")" in raft*) ;; *) no_uv_h "$f" ;; esac
done
for f in $(files src/server/cmd); do
    # A uv_ call: an identifier uv_something followed by "(", outside comments
    # (comment lines start with " *" or "/*" in this code base).
    while IFS= read -r line; do
        fail "$f:$line: cmd/ calls libuv"
    done < <(grep -nE '(^|[^A-Za-z0-9_])uv_[a-z_]+[[:space:]]*\(' "$f" \
             | grep -vE '^[0-9]+:[[:space:]]*(/?\*|//)' || true)
done
for f in $(files src/server/writer); do
    allow "$f" '^(base|core|log|writer|ordo)/|^net/conn\.h$|^server\.h$|^config\.h$'
done
for f in $(files src/server/net); do
    allow "$f" '^(base|net|cmd|writer|ordo)/|^config\.h$'
    if includes "$f" | grep -qx 'server.h'; then fail "$f includes \"server.h\""; fi
done
for f in $(files src/client) $(files src/tools); do
    allow "$f" '^(base|client|ordo)/'
done
for f in $(files src/server); do
    case "$f" in src/server/log/*|src/server/writer/cluster.c) continue ;; esac
    if includes "$f" | grep -qx 'log/raft_log.h'; then fail "$f includes \"log/raft_log.h\""; fi
done

if [ "$bad" -ne 0 ]; then
    echo "layers: $bad violation(s); see the rules at the top of $0" >&2
    exit 1
fi
echo "layers: ok"
