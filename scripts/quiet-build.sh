#!/usr/bin/env bash
# scripts/quiet-build.sh -- `cmake --build DIR ARGS...` with one line per
# step: `make build` and the targets that build through it (run, cluster,
# asan, tsan) call it unless V=1.
#
#   CC      src/base/blob.c          a file compiled
#   LD      ordod                    a library or program linked
#   [ 21%] Embedding the dashboard   a custom step, as CMake words it
#
# Make's "Entering/Leaving directory" lines (--no-print-directory), CMake's
# "Built target", "Scanning dependencies" and "Consolidate ..." lines are
# dropped; anything else -- a warning, an error, a compiler's notes -- is
# passed through as it comes. A build with nothing to do prints nothing.
# The exit status is the build's.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [cmake --build options...]" >&2; exit 2; }
dir=$1
shift
cmake --build "$dir" "$@" -- --no-print-directory 2>&1 | awk '
    / Built target |Scanning dependencies of target|Consolidate compiler generated dependencies/ { next }
    /: (Entering|Leaving) directory / { next }
    /\] Building (C|CXX) object / {
        s = $NF
        sub(/^CMakeFiles\/[^\/]*\.dir\//, "", s)
        sub(/\.o$/, "", s)
        printf "  CC      %s\n", s
        fflush()
        next
    }
    /\] Linking (C|CXX) / { printf "  LD      %s\n", $NF; fflush(); next }
    { print; fflush() }
'
