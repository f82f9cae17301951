#!/usr/bin/env bash
# scripts/fuzz.sh -- build and run ordo's libFuzzer targets (tests/fuzz/).
#
# Usage: scripts/fuzz.sh [seconds]      fuzz every target that long (default 60)
#        scripts/fuzz.sh --smoke        every target briefly, as a test (`make test`,
#                                       ctest label fuzz): FUZZ_SMOKE_SECONDS each (3)
#        FUZZ_TARGET=name scripts/fuzz.sh ...   one target only
#
# The targets (tests/fuzz/fuzz_<name>.c):
#   resp        the server's RESP request parser   (net/resp.c)
#   record      the record decoder                 (core/record.c)
#   wal         the WAL's recovery of segment files (log/wal.c: wal_open on a directory)
#   raft_entry  a committed raft entry into records, applied to a core
#                                                   (log/raft_log.c: raft_entry_batch)
#   raft_wire   frames members send each other      (log/raft_wire.c: raft_wire_header,
#                                                   raft_wire_decode)
#   snapshot    the snapshot loader                 (log/snapshot.c: snap_load_mem, snap_load)
#   http        HTTP requests up to their dispatch  (net/http.c, with the command layer stubbed)
#   cresp       the client's RESP reply parser     (client/cresp.c)
#
# Everything is compiled with clang -fsanitize=fuzzer,address,undefined (no
# CMake) into build-fuzz/: the sources the targets read become one archive
# (objects rebuilt when a source or any header under src/ is newer), each
# target links what it needs from it. Seeds are written by each target
# itself from valid encodings (ORDO_FUZZ_SEEDS, tests/fuzz/fuzz.h) into
# fuzz-corpus/<name> (gitignored; --smoke: a fresh build-fuzz/smoke/<name>),
# with tests/fuzz/<name>.dict where there is one. Each target runs on one
# core; a line per target gives its execs, execs/s and crash artifacts.
# Crash inputs land in build-fuzz/artifacts/<name>/; reproduce one with
#   build-fuzz/fuzz_<name> build-fuzz/artifacts/<name>/crash-...
#
# Exit status: 0, 1 if a target failed (crash, leak, UB, failed check) or
# did not build, 77 if clang's libFuzzer is missing and scripts/deps.sh
# could not install it (ctest counts that as skipped).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

smoke=false
secs=60
case "${1:-}" in
  --smoke) smoke=true; secs="${FUZZ_SMOKE_SECONDS:-3}" ;;
  "") ;;
  *) secs="$1" ;;
esac
all_targets=(resp record wal raft_entry raft_wire snapshot http cresp)
targets=("${all_targets[@]}")
if [ -n "${FUZZ_TARGET:-}" ]; then
  case " ${all_targets[*]} " in
    *" $FUZZ_TARGET "*) targets=("$FUZZ_TARGET") ;;
    *) echo "fuzz: no target '$FUZZ_TARGET' (targets: ${all_targets[*]})" >&2; exit 2 ;;
  esac
fi

out=build-fuzz
mkdir -p "$out/obj"

# ---- clang and libFuzzer -------------------------------------------------------

fuzzer_works() {
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\n'\
'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    > "$out/probe.c"
  clang -fsanitize=fuzzer,address,undefined "$out/probe.c" -o "$out/probe" >/dev/null 2>&1
}
if ! scripts/deps.sh fuzz; then
  if ! fuzzer_works; then
    echo "fuzz: SKIPPED: clang with libFuzzer (Debian: clang, libclang-rt-14-dev) is not installed and" \
         "scripts/deps.sh fuzz could not install it" >&2
    exit 77
  fi
fi
if ! fuzzer_works; then
  echo "fuzz: clang -fsanitize=fuzzer does not link, though scripts/deps.sh fuzz found its packages" >&2
  exit 1
fi

# ---- build ---------------------------------------------------------------------

warn=(-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes)
cflags=(-std=c11 -D_GNU_SOURCE -DORDO_DEBUG -g -O1 -fno-omit-frame-pointer -fno-sanitize-recover=all
        "${warn[@]}" -Isrc -Isrc/server -Iinclude -Itests/fuzz)
lib_sources=(src/base/*.c src/server/core/*.c
             src/server/log/log.c src/server/log/wal.c src/server/log/snapshot.c
             src/server/log/raft_log.c src/server/log/raft_store.c src/server/log/raft_net.c src/server/log/raft_wire.c
             src/server/net/resp.c src/server/net/http.c src/client/cresp.c
             tests/fuzz/fuzz_common.c tests/fuzz/fuzz_records.c)
libs=(-lraft -luv -lhttp_parser -lcrypto -lpthread -lm)

# The flags are part of every object: a change of them rebuilds all.
stamp="$out/obj/flags"
if [ "$(cat "$stamp" 2>/dev/null)" != "${cflags[*]}" ]; then
  rm -f "$out"/obj/*.o
  echo "${cflags[*]}" > "$stamp"
fi
newest_header=$(find src include tests/fuzz -name '*.h' -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2)
objs=()
pids=()
for src in "${lib_sources[@]}"; do
  obj="$out/obj/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')"
  objs+=("$obj")
  if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_header" -nt "$obj" ]; then
    clang "${cflags[@]}" -fsanitize=fuzzer-no-link,address,undefined -c "$src" -o "$obj" &
    pids+=($!)
    # Two compilers at a time: the machine is shared.
    if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
rm -f "$out/libfuzzdeps.a"
ar rcs "$out/libfuzzdeps.a" "${objs[@]}"
for t in "${targets[@]}"; do
  clang "${cflags[@]}" -fsanitize=fuzzer,address,undefined "tests/fuzz/fuzz_$t.c" "$out/libfuzzdeps.a" \
    "${libs[@]}" -o "$out/fuzz_$t"
done

# ---- run -----------------------------------------------------------------------

# Files the targets make (WAL segments, snapshots) go to a directory of
# this run, on tmpfs where there is one.
tmp_base=/dev/shm
[ -d "$tmp_base" ] && [ -w "$tmp_base" ] || tmp_base="${TMPDIR:-/tmp}"
export ORDO_FUZZ_TMP
ORDO_FUZZ_TMP=$(mktemp -d "$tmp_base/ordo-fuzz.XXXXXX")
trap 'rm -rf "$ORDO_FUZZ_TMP"' EXIT

failed=0
for t in "${targets[@]}"; do
  if $smoke; then
    corpus="$out/smoke/$t"
    rm -rf "$corpus"
    runopts=(-seed=1)
  else
    corpus="fuzz-corpus/$t"
    runopts=()
  fi
  art="$out/artifacts/$t"
  mkdir -p "$corpus" "$art"
  ORDO_FUZZ_SEEDS="$corpus" "$out/fuzz_$t"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  log="$out/fuzz_$t.log"
  set +e
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$out/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
    "${runopts[@]}" "${dict[@]}" -artifact_prefix="$art/" "$corpus" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  crashes=$(find "$art" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)
  echo "fuzz_$t: ${secs}s, execs ${execs:-?}, execs/s ${rate:-?}, corpus $(ls "$corpus" | wc -l) files," \
       "crash artifacts ${crashes} (exit ${rc})"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz_$t: FAILED; last lines of $log:" >&2
    tail -40 "$log" >&2
    failed=$((failed + 1))
  fi
done
echo "fuzz: $((${#targets[@]} - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
