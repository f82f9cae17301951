# bench/lib.sh -- helpers shared by the server benchmarks (sourced, not run).
#
# Every peer a benchmark starts goes through bench_spawn, which records its
# PID; the EXIT trap installed by bench_init kills exactly those PIDs (never
# by name) and removes the temp directory. Servers listen on 127.0.0.1 only,
# on a free port chosen by bench_free_port.

BENCH_PIDS=()
BENCH_TMP=""
# A command bench_start_ordod puts before ordod (bench/instr.sh: valgrind and
# its options); empty for every other benchmark.
BENCH_WRAP=()

bench_cleanup() {
    local pid
    for pid in "${BENCH_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        # Give each a moment to exit cleanly, then insist.
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    BENCH_PIDS=()
    [ -n "$BENCH_TMP" ] && rm -rf "$BENCH_TMP"
}

# bench_init NAME: deps, temp dir, EXIT trap. Sets ROOT and BENCH_TMP.
bench_init() {
    ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    "$ROOT/scripts/deps.sh" bench
    BENCH_TMP="$(mktemp -d "/tmp/ordo-bench-$1.XXXXXX")"
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    ORDOD="${ORDOD:-$ROOT/build/ordod}"   # ORDOD=path compares another build
    if [ ! -x "$ORDOD" ]; then
        echo "bench: $ORDOD is missing; run make first" >&2
        exit 1
    fi
}

# bench_free_port: print a TCP port on 127.0.0.1 that nobody listens on now.
# It is drawn below the kernel's ephemeral range (32768 and up by default),
# so no outgoing connection of the load tools can be holding it when a
# server binds it. A race with another process is possible; bench_wait_port
# catches it, because the server we start then exits instead of listening.
bench_free_port() {
    local p
    for _ in $(seq 1 200); do
        p=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    echo "bench: no free port found" >&2
    return 1
}

# bench_spawn LOGFILE CMD...: start CMD in the background, record its PID
# in BENCH_PIDS and in LAST_PID.
bench_spawn() {
    local log="$1"
    shift
    "$@" >"$log" 2>&1 &
    LAST_PID=$!
    BENCH_PIDS+=("$LAST_PID")
}

# bench_stop PID: kill one PID that bench_spawn started and forget it.
bench_stop() {
    local pid="$1" keep=() p
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in "${BENCH_PIDS[@]}"; do
        [ "$p" = "$pid" ] || keep+=("$p")
    done
    BENCH_PIDS=("${keep[@]}")
}

# bench_wait_port PID PORT [SECONDS]: wait until PORT accepts connections;
# fail if PID exits first or the time runs out.
bench_wait_port() {
    local pid="$1" port="$2" secs="${3:-20}" i
    for i in $(seq 1 $((secs * 10))); do
        if ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# bench_rss_bytes PID: resident set size from /proc/PID/status, in bytes.
bench_rss_bytes() {
    awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"
}

# bench_stats V...: print "median min max" of the numbers given.
bench_stats() {
    printf '%s\n' "$@" | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "nan nan nan"; exit }
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.0f %.0f %.0f\n", m, v[1], v[NR]
        }'
}

# bench_ratio A B: A/B with two decimals.
bench_ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b; else print "nan" }'
}

# bench_start_ordod NAME [FLAG...]: start ordod (behind BENCH_WRAP, if set)
# on a free port with its data in $BENCH_TMP/NAME and its log in
# $BENCH_TMP/NAME.log; wait until it listens. Sets ORDO_PORT and ORDO_PID.
bench_start_ordod() {
    local name="$1"
    shift
    ORDO_PORT="$(bench_free_port)"
    mkdir -p "$BENCH_TMP/$name"
    # No HTTP listener (its default port would clash), on builds that have one:
    # ORDOD may name an older build, to compare.
    # (--help is read whole first: `--help | grep -q` under pipefail fails
    # when grep stops reading early and ordod gets SIGPIPE.)
    local http=() help
    help="$("$ORDOD" --help 2>/dev/null || true)"
    case "$help" in *--http-port*) http=(--http-port 0) ;; esac
    bench_spawn "$BENCH_TMP/$name.log" "${BENCH_WRAP[@]}" "$ORDOD" --bind 127.0.0.1 --port "$ORDO_PORT" \
        "${http[@]}" --dir "$BENCH_TMP/$name" "$@"
    ORDO_PID="$LAST_PID"
    bench_wait_port "$ORDO_PID" "$ORDO_PORT" || { cat "$BENCH_TMP/$name.log" >&2; exit 1; }
}

# bench_start_redis [aof]: start redis-server on a free port with its data
# in $BENCH_TMP/redis, memory only, or with "aof" appendonly yes and
# appendfsync always (checked once it runs); wait until it listens. Sets
# REDIS_PORT and REDIS_PID.
bench_start_redis() {
    local persist=(--appendonly no)
    [ "${1:-}" = aof ] && persist=(--appendonly yes --appendfsync always)
    REDIS_PORT="$(bench_free_port)"
    mkdir -p "$BENCH_TMP/redis"
    bench_spawn "$BENCH_TMP/redis.log" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" \
        --dir "$BENCH_TMP/redis" --save "" "${persist[@]}" --daemonize no
    REDIS_PID="$LAST_PID"
    bench_wait_port "$REDIS_PID" "$REDIS_PORT" || { cat "$BENCH_TMP/redis.log" >&2; exit 1; }
    if [ "${1:-}" = aof ] && { [ "$(redis-cli -p "$REDIS_PORT" CONFIG GET appendfsync | tail -1)" != always ] ||
        ! redis-cli -p "$REDIS_PORT" INFO persistence | grep -q '^aof_enabled:1'; }; then
        echo "bench: redis-server is not running with appendfsync always" >&2
        exit 1
    fi
}

# bench_field KEY LINE: the value of KEY in a load tool's output line of
# key=value words ("puts_per_s=37070 conns=16 ..."), empty if absent.
bench_field() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k { print $2; exit }'; }

# bench_cpu_us PID: the user and the system CPU time PID has used so far,
# in microseconds, on one line ("user sys"); the kernel counts it in clock
# ticks (10 ms), so a run should use a second or more for the difference
# to mean anything. Where a server's time goes: its own work (user) against
# the kernel's on its behalf (syscalls, the network stack, the file system).
bench_cpu_us() {
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%d %d\n", $12 * 1000000 / hz, $13 * 1000000 / hz }' \
        "/proc/$1/stat"
}

# bench_cpu_per_op U0 S0 U1 S1 OPS: "user X us/op sys Y us/op" between two
# bench_cpu_us readings.
bench_cpu_per_op() {
    awk -v u="$(($3 - $1))" -v s="$(($4 - $2))" -v n="$5" \
        'BEGIN { if (n > 0) printf "user %.1f us/op sys %.1f us/op", u / n, s / n; else printf "no ops" }'
}

# bench_ordo_section SECTION PORT FIELD...: the values of these fields of
# INFO SECTION of the ordod on PORT, on one line, in the order given.
bench_ordo_section() {
    local section="$1" port="$2"
    shift 2
    redis-cli -p "$port" INFO "$section" | tr -d '\r' | awk -F: -v want="$*" '
        BEGIN { n = split(want, f, " ") }
        { v[$1] = $2 }
        END { for (i = 1; i <= n; i++) printf "%s%s", v[f[i]], (i < n ? " " : "\n") }'
}

# bench_ordo_info PORT FIELD...: the same for INFO persistence.
bench_ordo_info() { bench_ordo_section persistence "$@"; }

# bench_ordo_log PORT: prints "records syncs sync_us" from ordod's INFO
# persistence (wal_records_written, wal_syncs, wal_sync_us_sum).
bench_ordo_log() { bench_ordo_info "$1" wal_records_written wal_syncs wal_sync_us_sum; }

# bench_log_per_op R0 S0 U0 R1 S1 U1 OPS SECONDS: ordod's log over a run
# (two bench_ordo_log readings), per operation and against the disk:
# "records/op A syncs/op B records/sync C syncs/s D sync_mean_us E
# disk_busy F%" (disk_busy: the share of the run's seconds spent inside
# fdatasync; near 100% the run is bound by the disk's sync rate).
bench_log_per_op() {
    awk -v r="$(($4 - $1))" -v s="$(($5 - $2))" -v u="$(($6 - $3))" -v n="$7" -v t="$8" 'BEGIN {
        printf "records/op %.2f syncs/op %.3f records/sync %.1f syncs/s %.0f sync_mean_us %.0f disk_busy %.0f%%\n",
            (n > 0 ? r / n : 0), (n > 0 ? s / n : 0), (s > 0 ? r / s : 0), (t > 0 ? s / t : 0),
            (s > 0 ? u / s : 0), (t > 0 ? 100 * u / (t * 1e6) : 0) }'
}

# bench_start_etcd: a one-member etcd on free loopback ports with its data in
# $BENCH_TMP/etcd; returns once the member has elected itself leader (the
# client port opens before that). Sets ETCD_PORT and ETCD_PID.
bench_start_etcd() {
    local peer
    ETCD_PORT="$(bench_free_port)"
    peer="$(bench_free_port)"
    bench_spawn "$BENCH_TMP/etcd.log" etcd --name bench --data-dir "$BENCH_TMP/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "bench=http://127.0.0.1:$peer" \
        --listen-metrics-urls "" --log-level warn
    ETCD_PID="$LAST_PID"
    bench_wait_port "$ETCD_PID" "$ETCD_PORT" || { cat "$BENCH_TMP/etcd.log" >&2; exit 1; }
    for _ in $(seq 1 100); do
        etcdctl --endpoints "127.0.0.1:$ETCD_PORT" endpoint health >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "bench: etcd did not become healthy" >&2
    cat "$BENCH_TMP/etcd.log" >&2
    exit 1
}

# bench_setget_rounds ORDO_PORT REDIS_PORT LABEL: R rounds over PIPES of
# the caller's run_one PORT PIPE (prints "set_rps get_rps"), ordod and
# redis alternating first, then a table of medians (min..max) and the
# ratios ordod/redis; LABEL follows each server's name in the header
# ("" or " TLS"). bench/kv.sh and bench/tls.sh.
bench_setget_rounds() {
    local oport="$1" rport="$2" label="$3" r p srv port order s g t om omin omax rm rmin rmax
    declare -A res
    for r in $(seq 1 "$R"); do
        for p in $PIPES; do
            if [ $((r % 2)) -eq 1 ]; then order="ordod redis"; else order="redis ordod"; fi
            for srv in $order; do
                if [ "$srv" = ordod ]; then port="$oport"; else port="$rport"; fi
                read -r s g <<<"$(run_one "$port" "$p")"
                res[$srv,set,$p]+="$s "
                res[$srv,get,$p]+="$g "
                printf '  round %d P=%-2s %-5s SET %10.0f GET %10.0f\n' "$r" "$p" "$srv" "$s" "$g"
            done
        done
    done
    echo
    printf '%-9s %-30s %-30s\n' workload "ordod$label median (min..max)" "redis$label median (min..max)"
    for p in $PIPES; do
        for t in set get; do
            # shellcheck disable=SC2086
            read -r om omin omax <<<"$(bench_stats ${res[ordod,$t,$p]})"
            # shellcheck disable=SC2086
            read -r rm rmin rmax <<<"$(bench_stats ${res[redis,$t,$p]})"
            printf '%-9s %-30s %-30s ratio ordod/redis: %s\n' \
                "${t^^} P=$p" "$om ($omin..$omax)" "$rm ($rmin..$rmax)" "$(bench_ratio "$om" "$rm")"
        done
    done
}
