#!/usr/bin/env bash
# scripts/fuzz.sh -- build and run the RESP parser fuzzer (libFuzzer).
#
# Usage: scripts/fuzz.sh [seconds]      (default 60)
#
# Compiles tests/fuzz/fuzz_resp.c with src/server/net/resp.c and src/base/buf.c (and
# src/base/heap.c, which buf.c uses) using
# clang -fsanitize=fuzzer,address,undefined (no CMake), seeds the corpus
# fuzz-corpus/resp (gitignored) with a few valid commands, runs for the
# given time on one core, and prints total execs, execs/s and crashes.
# Crash inputs land in build-fuzz/artifacts/; reproduce one with
#   build-fuzz/fuzz_resp build-fuzz/artifacts/crash-...
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/deps.sh fuzz

out=build-fuzz
corpus=fuzz-corpus/resp
mkdir -p "$out/artifacts" "$corpus"

clang -std=c11 -D_GNU_SOURCE -DORDO_DEBUG -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
  -Isrc -Isrc/server tests/fuzz/fuzz_resp.c src/server/net/resp.c src/base/buf.c src/base/heap.c -lm \
  -o "$out/fuzz_resp"

# Seeds: byte 0 selects how the stream is chunked (see fuzz_resp.c), then
# the stream.
seed() { printf "$2" > "$corpus/seed-$1"; }
seed ping      '\x00*1\r\n$4\r\nPING\r\n'
seed set       '\x03*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n'
seed pipeline  '\x01*2\r\n$3\r\nGET\r\n$1\r\na\r\n*0\r\n*-1\r\nPING\r\n\r\n'
seed inline    '\x05set k "a b\\x41\\n" '"'"'it\\'"'"'s'"'"'\r\n'
seed binary    '\x02*1\r\n$5\r\na\x00\r\nb\r\n'
seed error     '\x00*1\r\n*1\r\n$1\r\na\r\n'
seed trickle   '\x01*8\r\n$1\r\na\r\n$1\r\nb\r\n$0\r\n\r\n$2\r\ncd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n'
seed varied    '\x37*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\nPING\r\n*1\r\n$4\r\nPING\r\n'

log="$out/fuzz.log"
set +e
ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$out/fuzz_resp" -max_total_time="$secs" -print_final_stats=1 -max_len=4096 \
  -dict=tests/fuzz/resp.dict -artifact_prefix="$out/artifacts/" "$corpus" > "$log" 2>&1
rc=$?
set -e

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
crashes=$(find "$out/artifacts" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)
echo "fuzz_resp: ${secs}s, execs ${execs:-?}, execs/s ${rate:-?}, corpus $(ls "$corpus" | wc -l) files, crash artifacts ${crashes} (exit ${rc})"
if [ "$rc" -ne 0 ]; then
  echo "fuzz_resp: failure; last lines of $log:" >&2
  tail -40 "$log" >&2
  exit 1
fi
