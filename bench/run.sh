#!/usr/bin/env bash
#
# run.sh - builds gmprt's benchmark program and its peers, runs the suite
# defined in docs/BENCHMARKS.md (summarised in bench/README.md) and prints a
# markdown table of medians with the ratio gmprt / peer.
#
# Usage: bench/run.sh [-r RUNS] [-b BUILD_DIR] [-a aarch64] [-n] [-P PROG]
#                     [case ...]
#   -r RUNS       runs per program, case and procs setting (default 5)
#   -b BUILD_DIR  CMake build directory (default build-bench, or
#                 build-bench-aarch64 with -a; relative to the repository
#                 root); the peers are built under it too
#   -a aarch64    cross-build everything for 64-bit Arm (gmprt with
#                 cmake/aarch64-linux-gnu.cmake, Go with GOARCH=arm64, Boost
#                 with aarch64-linux-gnu-g++ if libboost-context-dev:arm64 is
#                 there) and run it under qemu-aarch64. This shows that the
#                 suite builds and runs on arm64; figures under emulation say
#                 nothing about speed.
#   -n            build nothing: time the programs an earlier run left in
#                 BUILD_DIR (for a machine with no compilers, given a copy
#                 of that directory); a missing one gets '-' as usual
#   -P PROG       the peer column is PROG, another gmprt-bench, for every
#                 case, instead of Go and Boost: e.g. a build configured
#                 with -DGMP_EXECTRACE=OFF, to see what the tracer's hooks
#                 cost while off (bench/README.md). http's net/http rows
#                 and the trace case are then left out.
#   case ...      default: switch yield spawn skynet pingpong chan mpmc
#                 steal mutex timers idle syscall pool spawnwork echo http
#                 latency trace
#
# Programs, all run as `<prog> <name> <procs|all> [port]`:
#   gmprt  $BUILD_DIR/bench/gmprt-bench (CMake, Release)
#   Go     bench/peers/go, built with `go build` (skipped if go is missing)
#   Boost  bench/peers/boost/switch.cpp, the peer for `switch` only (skipped
#          without boost/context headers or libboost_context)
# Each program prints lines `bench=<name> procs=<P> n=<n> value=<v> unit=<u>`.
# `echo` is the exception: the program is a server (`<prog> echo all
# <port>`, on a free port) that $BUILD_DIR/bench/gmprt-echo-client (CMake,
# libc only) drives and then stops with SIGTERM; the client's line is the
# result for that server.
# `http` is a server the same way (`<prog> http all <port>`), loaded by
# wrk (Debian's wrk, on PATH; without it the cells are '-'): `wrk -t1
# -c100 -d5s --latency` and again with -c1000. Each run alternates gmprt,
# the Go peer's raw server (case http) and Go's net/http (case
# http-nethttp); this script prints wrk's Requests/sec and 99% latency
# as `bench=http ... unit=req/s` and `unit=us_p99` lines into the raw
# output, and the table has a row per connection count and unit for each
# Go server.
# `trace` times the execution tracers: pingpong, chan and spawn, each run
# with tracing off and on (GMP_TRACE=/dev/null for gmprt, BENCH_TRACE=
# /dev/null for the Go peer's runtime/trace), the four alternated; rows
# "<case>, traced" and a row "trace cost" of traced/untraced per program,
# whose gmprt/Go says how gmprt's tracer costs against Go's.
# Before each case, $BUILD_DIR/bench/gmprt-xcore (CMake, libc and pthreads,
# no gmprt) times one cache line's round trip between two CPUs; the figures
# are printed under the table (not under emulation): on a VM they move when
# the host moves the vCPUs, and so do the cases that pass work between
# cores.
# After the first of pool and spawnwork, `gmprt-bench work-floor all` runs
# RUNS times: their tasks alone on plain threads, no runtime; the median
# is printed under the table too (not under emulation). Each run of
# latency is followed by one of `gmprt-bench latency-floor`, the same load
# on plain threads; its medians are printed under the table likewise.
# For each case and procs setting the runs alternate gmprt, peer, gmprt, ...
# A program that is missing, fails (non-zero exit, timeout) or leaves out a
# unit in any run gets `-` in that cell; the suite goes on.
#
# Environment: BENCH_TIMEOUT (seconds per run, default 600).
# Needs bash, awk, sort; cmake and a C compiler for gmprt. No Python.

set -u

usage() {
    echo "usage: $0 [-r RUNS] [-b BUILD_DIR] [-a aarch64] [-n] [-P PROG]" \
         "[case ...]" >&2
    exit 2
}

RUNS=5
BUILD_DIR=
ARCH=
NOBUILD=
PEER_PROG=
while getopts "r:b:a:nP:h" opt; do
    case $opt in
    r) RUNS=$OPTARG ;;
    b) BUILD_DIR=$OPTARG ;;
    a) ARCH=$OPTARG ;;
    n) NOBUILD=1 ;;
    P) PEER_PROG=$OPTARG ;;
    *) usage ;;
    esac
done
case $ARCH in
'') BUILD_DIR=${BUILD_DIR:-build-bench} ;;
aarch64) BUILD_DIR=${BUILD_DIR:-build-bench-aarch64} ;;
*) echo "run.sh: -a takes aarch64" >&2; usage ;;
esac
shift $((OPTIND - 1))
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: RUNS must be >= 1" >&2; usage; }
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] ||
    CASES=(switch yield spawn skynet pingpong chan mpmc steal mutex timers
           idle syscall pool spawnwork echo http latency trace)
TIMEOUT=${BENCH_TIMEOUT:-600}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
OUT=$BUILD_DIR/bench-peers     # peers' binaries, build logs, raw results
mkdir -p "$OUT" || exit 1

note() { echo "run.sh: $*" >&2; }

# ---- build ------------------------------------------------------------

# Cross settings: how to configure, compile the peers and run a program.
CMAKE_CROSS=()
GO_ENV=()
CXX=g++
EMU=()
if [ "$ARCH" = aarch64 ]; then
    CMAKE_CROSS=(-DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake")
    GO_ENV=(GOARCH=arm64)
    CXX=aarch64-linux-gnu-g++
    qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static) || {
        echo "run.sh: -a aarch64 needs qemu-aarch64 (Debian: qemu-user)" >&2
        exit 1
    }
    EMU=("$qemu")
    export QEMU_CPU=max,sve=off,sme=off # see cmake/aarch64-linux-gnu.cmake
    note "aarch64 under $qemu: the figures show that it runs, not its speed"
fi

# build_helper TARGET: builds one CMake target of BUILD_DIR, a program in
# its bench/; false, with a note, if that leaves no program to run.
build_helper() {
    cmake --build "$BUILD_DIR" --target "$1" >"$OUT/$1-build.log" 2>&1 &&
        [ -x "$BUILD_DIR/bench/$1" ] && return
    note "$1 build failed (see $OUT/$1-build.log)"
    return 1
}

GMPRT=$BUILD_DIR/bench/gmprt-bench
ECHO_CLIENT=$BUILD_DIR/bench/gmprt-echo-client
XCORE=$BUILD_DIR/bench/gmprt-xcore
[ -n "$ARCH" ] && XCORE=                # emulated: no figure of the machine
GO_BIN=$OUT/go-bench
BOOST_BIN=$OUT/boost-switch
WRK=$(command -v wrk) ||
    note "wrk not found (Debian: wrk); http cells will be '-'"

if [ -n "$NOBUILD" ]; then
    note "-n: timing the programs already in $BUILD_DIR"
    [ -x "$GMPRT" ] || { note "no $GMPRT"; GMPRT=; }
    [ -x "$ECHO_CLIENT" ] || ECHO_CLIENT=
    [ -x "$XCORE" ] || XCORE=
    [ -x "$GO_BIN" ] || { note "no $GO_BIN"; GO_BIN=; }
    [ -x "$BOOST_BIN" ] || BOOST_BIN=
else
    if ! command -v cmake >/dev/null; then
        note "cmake not found; gmprt column will be '-'"
        GMPRT=
        ECHO_CLIENT=
        XCORE=
    elif ! { cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
                   ${CMAKE_CROSS[@]+"${CMAKE_CROSS[@]}"} &&
             cmake --build "$BUILD_DIR" -j; } >"$OUT/gmprt-build.log" 2>&1; then
        # A binary left by an earlier build would be stale: do not time it.
        note "gmprt build failed (see $OUT/gmprt-build.log);" \
             "gmprt column will be '-'"
        GMPRT=
    fi
    if [ -n "$GMPRT" ] && [ ! -x "$GMPRT" ]; then
        note "no $GMPRT after the build; gmprt column will be '-'"
        GMPRT=
    fi
    # The echo client and the probe need nothing of gmprt: each is built
    # on its own, so that a gmprt that fails to build still leaves the
    # peer's server measured and the placement known.
    [ -n "$ECHO_CLIENT" ] && ! build_helper gmprt-echo-client && ECHO_CLIENT=
    [ -n "$XCORE" ] && ! build_helper gmprt-xcore && XCORE=

    rm -f "$GO_BIN" "$BOOST_BIN"
    if ! command -v go >/dev/null; then
        note "go not found (Debian: golang-go); Go column will be '-'"
    else
        # go needs a writable build cache; HOME may not be.
        if [ -z "${GOCACHE:-}" ] && ! { [ -n "${HOME:-}" ] && [ -w "$HOME" ]; }
        then
            export GOCACHE=$OUT/go-cache GOPATH=$OUT/go-path
        fi
        # The peer has no dependencies: never reach for the network.
        if ! (cd bench/peers/go &&
              env ${GO_ENV[@]+"${GO_ENV[@]}"} GOPROXY=off GOTOOLCHAIN=local \
                  go build -o "$GO_BIN" .) \
                >"$OUT/go-build.log" 2>&1; then
            note "Go peer build failed (see $OUT/go-build.log)"
        fi
    fi
    [ -x "$GO_BIN" ] || GO_BIN=

    if ! command -v "$CXX" >/dev/null; then
        note "$CXX not found; Boost.Context peer skipped"
    elif ! echo '#include <boost/context/detail/fcontext.hpp>' |
            "$CXX" -fsyntax-only -x c++ - >/dev/null 2>&1; then
        note "boost/context headers not found (Debian: libboost-context-dev);" \
             "Boost.Context peer skipped"
    elif ! "$CXX" -O2 -o "$BOOST_BIN" bench/peers/boost/switch.cpp \
            -lboost_context >"$OUT/boost-build.log" 2>&1; then
        note "Boost.Context peer build failed, libboost_context missing?" \
             "(see $OUT/boost-build.log)"
    fi
    [ -x "$BOOST_BIN" ] || BOOST_BIN=
fi

PEER_NAME=Go
if [ -n "$PEER_PROG" ]; then
    case $PEER_PROG in /*) ;; *) PEER_PROG=$ROOT/$PEER_PROG ;; esac
    [ -x "$PEER_PROG" ] || { echo "run.sh: -P: no program $PEER_PROG" >&2; exit 1; }
    GO_BIN=$PEER_PROG
    BOOST_BIN=$PEER_PROG
    PEER_NAME=peer
    note "peer column: $PEER_PROG"
fi

# ---- what each case runs ----------------------------------------------

# procs settings per case (BENCHMARKS.md's table).
procs_for() {
    case $1 in
    switch | yield | syscall) echo 1 ;;
    spawn | pingpong | chan | steal | latency | trace*) echo 1 all ;;
    skynet | mpmc | mutex | timers | idle | pool | spawnwork | echo) echo all ;;
    http | http-c*) echo all ;;
    esac
}

# The units a case reports, one table row each, in this order.
units_for() {
    case $1 in
    switch) echo ns/switch ;;
    yield) echo ns/yield ;;
    spawn) echo ns/goroutine ;;
    skynet | steal) echo ms ;;
    pingpong) echo ns/roundtrip ;;
    chan | mpmc) echo ns/item ;;
    mutex) echo ns/op ;;
    timers) echo ms us_late ;;
    idle) echo bytes/goroutine ;;
    syscall) echo ns/syscall ns/bare ns/own slowdown ;;
    pool | spawnwork) echo ms KiB ;;
    echo) echo roundtrips/s ;;
    latency) echo sleep_us_p50 sleep_us_p99 ping_us_p50 ping_us_p99 \
                  hog_steps/s ;;
    http-c*) echo req/s us_p99 ;;
    trace-*) local c=${1#trace-}; units_for "${c%-on}" ;;
    esac
}

# The cases whose tracer cost `trace` times.
TRACED_CASES="pingpong chan spawn"

# ---- runs --------------------------------------------------------------

# Every accepted result line becomes "<rt> <case> <procs> <unit> <value> <P>"
# in $RESULTS (rt: gmprt or peer; procs as asked: 1 or all; P as printed).
RESULTS=$OUT/results.txt
RAW=$OUT/raw.txt
: >"$RESULTS"
: >"$RAW"

TIMEOUT_CMD=()
SERVER_TIMEOUT_CMD=()   # the same, and SIGKILL 10 s after any signal
if command -v timeout >/dev/null; then
    TIMEOUT_CMD=(timeout "$TIMEOUT")
    SERVER_TIMEOUT_CMD=(timeout -k 10 "$TIMEOUT")
fi

# run_one RT PROG CASE PROCS [KEY]: one process, with $RUN_ENV (one
# NAME=VALUE, or empty) in its environment; its lines go to $RESULTS
# under KEY (default CASE).
RUN_ENV=
run_one() {
    local rt=$1 prog=$2 name=$3 procs=$4 key=${5:-$3} out rc
    out=$(env $RUN_ENV ${TIMEOUT_CMD[@]+"${TIMEOUT_CMD[@]}"} \
          ${EMU[@]+"${EMU[@]}"} "$prog" "$name" "$procs" 2>"$OUT/stderr.txt")
    rc=$?
    printf '# %s %s %s %s rc=%d\n%s\n' "$rt" "$name" "$procs" "$RUN_ENV" \
        "$rc" "$out" >>"$RAW"
    record "$rt" "$name" "$procs" "$rc" "$out" "$key"
}

# The echo server being driven, for the exit trap.
SERVER=
trap '[ -n "$SERVER" ] && kill -TERM "$SERVER" 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

. "$(dirname "$0")/ports.sh"     # free_port

# run_echo RT PROG echo PROCS: one run of the echo case. PROG serves on a
# free port in the background while the load client drives it; then the
# server gets SIGTERM and is waited for (killed 10 s later if it is still
# there). The client's line goes to $RESULTS; a server that stops badly
# only gets a note, its figure stands.
run_echo() {
    local rt=$1 prog=$2 name=$3 procs=$4 port out rc src
    port=$(free_port)
    ${SERVER_TIMEOUT_CMD[@]+"${SERVER_TIMEOUT_CMD[@]}"} ${EMU[@]+"${EMU[@]}"} \
        "$prog" "$name" "$procs" "$port" \
        >"$OUT/server-stdout.txt" 2>"$OUT/server-stderr.txt" &
    SERVER=$!
    # The client waits for the server to listen; it labels the line with
    # the CPUs it may use, which is what the server's `all` resolves to.
    out=$(${TIMEOUT_CMD[@]+"${TIMEOUT_CMD[@]}"} ${EMU[@]+"${EMU[@]}"} \
          "$ECHO_CLIENT" "$port" 2>"$OUT/stderr.txt")
    rc=$?
    kill -TERM "$SERVER" 2>/dev/null
    wait "$SERVER" 2>/dev/null
    src=$?
    SERVER=
    printf '# %s %s %s port=%d rc=%d server-rc=%d\n%s\n' "$rt" "$name" \
        "$procs" "$port" "$rc" "$src" "$out" >>"$RAW"
    if [ $src -ne 0 ]; then
        note "$rt $name $procs: server exit $src:" \
             "$(tail -n 1 "$OUT/server-stderr.txt")"
    fi
    if [ -s "$OUT/server-stdout.txt" ]; then
        note "$rt $name: stray server output:" \
             "$(head -n 1 "$OUT/server-stdout.txt")"
    fi
    record "$rt" "$name" "$procs" "$rc" "$out"
}

# wait_listen PORT PID: true once 127.0.0.1:PORT listens (going by
# /proc/net/tcp), false if PID exits first or 10 s pass.
wait_listen() {
    local hex i
    hex=$(printf '0100007F:%04X' "$1")
    for ((i = 0; i < 100; i++)); do
        awk -v a="$hex" 'FNR > 1 && $2 == a && $4 == "0A" { f = 1 }
            END { exit !f }' /proc/net/tcp && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# wrk_lines PROCS: wrk's report on stdin, as the suite's two lines for
# http: Requests/sec, and the 99% latency converted to us; n= is the
# requests completed. Nothing if wrk printed either one badly.
wrk_lines() {
    awk -v procs="$1" '
        / requests in / { n = $1 }
        /^Requests\/sec:/ { rps = $2 }
        $1 == "99%" {
            v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
            m = -1
            if (u == "us") m = 1
            if (u == "ms") m = 1e3
            if (u == "s") m = 1e6
            if (u == "m") m = 6e7
            if (m > 0 && v ~ /^[0-9.]+$/) p99 = v * m
        }
        END {
            if (n == "" || rps == "" || p99 == "") exit
            printf "bench=http procs=%s n=%s value=%.3f unit=req/s\n", procs, n, rps
            printf "bench=http procs=%s n=%s value=%.3f unit=us_p99\n", procs, n, p99
        }'
}

# run_http RT PROG SCASE PROCS CONNS: one run of the http case. PROG
# serves SCASE (http, or the Go peer's http-nethttp) on a free port in the
# background; once it listens, wrk loads it with CONNS connections for 5 s;
# then the server gets SIGTERM as in run_echo. wrk's figures go to
# $RESULTS under the case http-c<CONNS>. Socket errors are noted (the
# figure stands); a response that is not 2xx or 3xx voids the run.
run_http() {
    local rt=$1 prog=$2 scase=$3 procs=$4 conns=$5 port out rc=0 src lines
    port=$(free_port)
    ${SERVER_TIMEOUT_CMD[@]+"${SERVER_TIMEOUT_CMD[@]}"} ${EMU[@]+"${EMU[@]}"} \
        "$prog" "$scase" "$procs" "$port" \
        >"$OUT/server-stdout.txt" 2>"$OUT/server-stderr.txt" &
    SERVER=$!
    if wait_listen "$port" "$SERVER"; then
        # wrk holds an fd per connection.
        out=$( (ulimit -n $((conns + 64)) 2>/dev/null
                ${TIMEOUT_CMD[@]+"${TIMEOUT_CMD[@]}"} "$WRK" -t1 -c"$conns" \
                    -d5s --latency "http://127.0.0.1:$port/") \
              2>"$OUT/stderr.txt")
        rc=$?
    else
        echo "the server did not listen on port $port" >"$OUT/stderr.txt"
        rc=1
    fi
    kill -TERM "$SERVER" 2>/dev/null
    wait "$SERVER" 2>/dev/null
    src=$?
    SERVER=
    printf '# %s %s %s -c%d port=%d rc=%d server-rc=%d\n%s\n' "$rt" \
        "$scase" "$procs" "$conns" "$port" "$rc" "$src" "$out" >>"$RAW"
    if [ $src -ne 0 ]; then
        note "$rt $scase $procs: server exit $src:" \
             "$(tail -n 1 "$OUT/server-stderr.txt")"
    fi
    if [ -s "$OUT/server-stdout.txt" ]; then
        note "$rt $scase: stray server output:" \
             "$(head -n 1 "$OUT/server-stdout.txt")"
    fi
    case $out in *"Socket errors"*)
        note "$rt $scase -c$conns:" \
             "$(printf '%s\n' "$out" | grep -m1 'Socket errors' | sed 's/^ *//')"
    esac
    case $out in *"Non-2xx"*)
        note "$rt $scase -c$conns: run voided:" \
             "$(printf '%s\n' "$out" | grep -m1 'Non-2xx' | sed 's/^ *//')"
        return
    esac
    lines=$(printf '%s\n' "$out" | wrk_lines "$(nproc)")
    printf '%s\n' "$lines" >>"$RAW"
    if [ "$rc" -eq 0 ] && [ -z "$lines" ]; then
        note "$rt $scase -c$conns: no figures in wrk's output"
        return
    fi
    record "$rt" http "$procs" "$rc" "$lines" "http-c$conns"
}

# record RT CASE PROCS RC OUT [KEY]: a run's exit status and output; its
# result lines go to $RESULTS, under the case KEY (default CASE).
record() {
    local rt=$1 name=$2 procs=$3 rc=$4 out=$5 key=${6:-$2}
    if [ "$rc" -eq 124 ] && [ ${#TIMEOUT_CMD[@]} -gt 0 ]; then
        note "$rt $name $procs: timed out after ${TIMEOUT}s"
        return
    elif [ "$rc" -ne 0 ]; then
        note "$rt $name $procs: exit $rc: $(tail -n 1 "$OUT/stderr.txt")"
        return
    fi
    printf '%s\n' "$out" |
        awk -v rt="$rt" -v name="$name" -v key="$key" -v procs="$procs" '
        /^bench=/ {
            delete f
            for (i = 1; i <= NF; i++) {
                eq = index($i, "=")
                if (eq) f[substr($i, 1, eq - 1)] = substr($i, eq + 1)
            }
            if (f["bench"] != name || f["value"] !~ /^-?[0-9.eE+-]+$/) {
                print "run.sh: " rt " " name ": ignored: " $0 > "/dev/stderr"
                next
            }
            print rt, key, procs, f["unit"], f["value"], f["procs"]
            next
        }
        { print "run.sh: " rt " " name ": stray output: " $0 > "/dev/stderr" }
        ' >>"$RESULTS"
}

peer_for() {
    if [ "$1" = switch ]; then echo "$BOOST_BIN"; else echo "$GO_BIN"; fi
}

# run RT PROG CASE PROCS: one run of any case.
run() {
    if [ "$3" = echo ]; then run_echo "$@"; else run_one "$@"; fi
}

# xcore CASE: the probe's round trip before CASE, as "CASE NS", into XCORES.
XCORES=
xcore() {
    local v
    [ -n "$XCORE" ] || return 0
    v=$(timeout 60 "$XCORE" 2>/dev/null | sed -n 's/^xcore=\([0-9][0-9]*\)$/\1/p')
    [ -n "$v" ] && XCORES="$XCORES${XCORES:+, }$1 $v"
}

declare -a RUN_CASES=()
WORK_FLOOR=yes
[ -n "$ARCH" ] && WORK_FLOOR=           # emulated: no figure of the machine
for name in "${CASES[@]}"; do
    if [ -z "$(procs_for "$name")" ]; then
        note "unknown case '$name' (see BENCHMARKS.md)"
        continue
    fi
    xcore "$name"
    if [ "$name" = http ]; then
        # Connection counts first: each gets its rows in the table.
        for conns in 100 1000; do
            RUN_CASES+=("http-c$conns")
            [ -n "$WRK" ] || continue
            note "http -c$conns procs=all: $RUNS runs each"
            for ((i = 1; i <= RUNS; i++)); do
                [ -n "$GMPRT" ] && run_http gmprt "$GMPRT" http all "$conns"
                [ -n "$GO_BIN" ] && run_http peer "$GO_BIN" http all "$conns"
                [ -n "$GO_BIN" ] && [ -z "$PEER_PROG" ] &&
                    run_http nethttp "$GO_BIN" http-nethttp all "$conns"
            done
        done
        continue
    fi
    if [ "$name" = trace ]; then
        if [ -n "$PEER_PROG" ]; then
            note "trace: left out with -P"
            continue
        fi
        for c in $TRACED_CASES; do
            RUN_CASES+=("trace-$c" "trace-$c-on")
            for procs in $(procs_for "$c"); do
                note "trace: $c procs=$procs: $RUNS runs each, off and on"
                for ((i = 1; i <= RUNS; i++)); do
                    [ -n "$GMPRT" ] &&
                        run_one gmprt "$GMPRT" "$c" "$procs" "trace-$c"
                    [ -n "$GMPRT" ] && RUN_ENV=GMP_TRACE=/dev/null \
                        run_one gmprt "$GMPRT" "$c" "$procs" "trace-$c-on"
                    [ -n "$GO_BIN" ] &&
                        run_one peer "$GO_BIN" "$c" "$procs" "trace-$c"
                    [ -n "$GO_BIN" ] && RUN_ENV=BENCH_TRACE=/dev/null \
                        run_one peer "$GO_BIN" "$c" "$procs" "trace-$c-on"
                done
            done
        done
        continue
    fi
    RUN_CASES+=("$name")
    peer=$(peer_for "$name")
    gm=$GMPRT
    if [ "$name" = echo ] && [ -z "$ECHO_CLIENT" ]; then
        note "echo: no load client ($BUILD_DIR/bench/gmprt-echo-client);" \
             "its cells will be '-'"
        gm=
        peer=
    fi
    for procs in $(procs_for "$name"); do
        note "$name procs=$procs: $RUNS runs each"
        for ((i = 1; i <= RUNS; i++)); do
            [ -n "$gm" ] && run gmprt "$gm" "$name" "$procs"
            [ -n "$peer" ] && run peer "$peer" "$name" "$procs"
            # The same load on plain threads, alternated with the two
            # (gmprt_bench.c, latency-floor).
            [ "$name" = latency ] && [ -z "$ARCH" ] && [ -n "$GMPRT" ] &&
                run_one gmprt "$GMPRT" latency-floor "$procs"
        done
    done
    # After the first of pool and spawnwork, the floor of both: their
    # tasks alone on plain threads (gmprt_bench.c, work-floor).
    if [ -n "$WORK_FLOOR" ] && [ -n "$GMPRT" ] &&
       { [ "$name" = pool ] || [ "$name" = spawnwork ]; }; then
        note "work-floor: $RUNS runs"
        for ((i = 1; i <= RUNS; i++)); do
            run_one gmprt "$GMPRT" work-floor all
        done
        WORK_FLOOR=
    fi
done

# ---- table -------------------------------------------------------------

# median RT CASE PROCS UNIT: the median of that cell's values, or nothing
# unless every one of the RUNS runs produced one.
median() {
    awk -v rt="$1" -v c="$2" -v p="$3" -v u="$4" \
        '$1 == rt && $2 == c && $3 == p && $4 == u { print $5 }' "$RESULTS" |
        sort -g |
        awk -v runs="$RUNS" '{ v[NR] = $1 }
            END {
                if (NR != runs) exit
                if (NR % 2) printf "%.6g\n", v[(NR + 1) / 2]
                else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
            }'
}

# fmt V: a cell; '-' when empty.
fmt() {
    if [ -z "$1" ]; then echo -; return; fi
    awk -v v="$1" 'BEGIN {
        a = v < 0 ? -v : v
        f = a >= 100 ? "%.1f\n" : a >= 1 ? "%.2f\n" : "%.3g\n"
        printf f, v }'
}

# div A B: A/B to 6 significant digits, or nothing if either is missing
# or B is 0.
div() {
    [ -n "$1" ] && [ -n "$2" ] &&
        awk -v a="$1" -v b="$2" 'BEGIN { if (b != 0) printf "%.6g\n", a / b }'
}

# sub A B: A-B, or nothing if either is missing.
sub() {
    [ -n "$1" ] && [ -n "$2" ] &&
        awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6g\n", a - b }'
}

# procs_label CASE PROCS: "1", or "all (P)" with P as the programs printed.
procs_label() {
    local p
    if [ "$2" != all ]; then echo "$2"; return; fi
    p=$(awk -v c="$1" '$2 == c && $3 == "all" { print $6 }' "$RESULTS" |
        sort -u | paste -sd/ -)
    [ -n "$p" ] || p=$(nproc 2>/dev/null)
    echo "all ($p)"
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
gover=$(command -v go >/dev/null && go version | awk '{ print $3 }')
echo
echo "Medians of $RUNS runs; $(nproc) CPUs${cpu:+ ($cpu)};" \
     "$(uname -sm)${gover:+; $gover}."
[ -n "$ARCH" ] && echo "Built for $ARCH and run under ${EMU[0]}: not a speed figure."
[ -n "$PEER_PROG" ] && echo "Peer column: $PEER_PROG."
echo "gmprt/$PEER_NAME below 1 means gmprt is faster or smaller, except for" \
     "speedup, roundtrips/s, req/s and hog_steps/s, where above 1 means" \
     "gmprt does better."
echo
echo "| case | procs | unit | gmprt | $PEER_NAME | gmprt/$PEER_NAME |"
echo "|---|---|---|---|---|---|"
for name in ${RUN_CASES[@]+"${RUN_CASES[@]}"}; do
    label=$name
    [ "$name" = switch ] && [ -z "$PEER_PROG" ] &&
        label="switch (Go column: Boost.Context)"
    case $name in
    http-c*) label="http -c${name#http-c}" ;;
    trace-*-on) label="${name#trace-}"; label="${label%-on}, traced" ;;
    trace-*) label="${name#trace-}, untraced" ;;
    esac
    # Expected units first, then any other unit a program printed.
    units=$(units_for "$name")
    extra=$(awk -v c="$name" '$2 == c { print $4 }' "$RESULTS" | awk '!s[$0]++')
    for u in $extra; do
        case " $units " in *" $u "*) ;; *) units="$units $u" ;; esac
    done
    for procs in $(procs_for "$name"); do
        for u in $units; do
            g=$(median gmprt "$name" "$procs" "$u")
            p=$(median peer "$name" "$procs" "$u")
            echo "| $label | $(procs_label "$name" "$procs") | $u |" \
                 "$(fmt "$g") | $(fmt "$p") | $(fmt "$(div "$g" "$p")") |"
            case $name in http-c*)
                [ -n "$PEER_PROG" ] && continue
                # The second Go server: net/http.
                p=$(median nethttp "$name" "$procs" "$u")
                echo "| $label (Go column: net/http) |" \
                     "$(procs_label "$name" "$procs") | $u | $(fmt "$g") |" \
                     "$(fmt "$p") | $(fmt "$(div "$g" "$p")") |"
            esac
        done
    done
    if [ "$name" = steal ]; then
        # Speedup = median time at procs=1 / median time at procs=all.
        g=$(div "$(median gmprt steal 1 ms)" "$(median gmprt steal all ms)")
        p=$(div "$(median peer steal 1 ms)" "$(median peer steal all ms)")
        echo "| steal | 1 / $(procs_label steal all) | speedup |" \
             "$(fmt "$g") | $(fmt "$p") | $(fmt "$(div "$g" "$p")") |"
    fi
    case $name in trace-*-on)
        # The tracer's cost: traced / untraced, per program.
        base=${name%-on}
        for procs in $(procs_for "$name"); do
            for u in $(units_for "$name"); do
                g=$(div "$(median gmprt "$name" "$procs" "$u")" \
                        "$(median gmprt "$base" "$procs" "$u")")
                p=$(div "$(median peer "$name" "$procs" "$u")" \
                        "$(median peer "$base" "$procs" "$u")")
                echo "| ${base#trace-}, trace cost |" \
                     "$(procs_label "$name" "$procs") | traced/untraced |" \
                     "$(fmt "$g") | $(fmt "$p") | $(fmt "$(div "$g" "$p")") |"
            done
        done
    esac
    if [ "$name" = pool ] || [ "$name" = spawnwork ]; then
        # The runtime's own cost: median ms minus the tasks' floor (below
        # the table), the same floor for both.
        floor=$(median gmprt work-floor all ms)
        g=$(sub "$(median gmprt "$name" all ms)" "$floor")
        p=$(sub "$(median peer "$name" all ms)" "$floor")
        echo "| $label | $(procs_label "$name" all) | ms_own |" \
             "$(fmt "$g") | $(fmt "$p") | $(fmt "$(div "$g" "$p")") |"
    fi
done
if [ -n "$XCORES" ]; then
    echo
    echo "Cross-core round trip of one cache line before each case" \
         "(gmprt-xcore, ns): $XCORES."
fi
floor=$(median gmprt work-floor all ms)
if [ -n "$floor" ]; then
    echo
    echo "The tasks of pool and spawnwork alone, on plain threads with no" \
         "runtime (gmprt-bench work-floor $(procs_label work-floor all), ms):" \
         "$(fmt "$floor")."
fi
if [ -n "$(median gmprt latency-floor 1 hog_steps/s)" ]; then
    echo
    echo "The latency load on plain threads with no runtime (gmprt-bench" \
         "latency-floor), p99 sleep / ping (us), the hogs' steps/s and" \
         "their ratio to the peer's hogs:"
    for procs in $(procs_for latency); do
        echo "procs=$(procs_label latency "$procs"):" \
             "$(fmt "$(median gmprt latency-floor "$procs" sleep_us_p99)") /" \
             "$(fmt "$(median gmprt latency-floor "$procs" ping_us_p99)")," \
             "$(fmt "$(median gmprt latency-floor "$procs" hog_steps/s)")," \
             "$(fmt "$(div "$(median gmprt latency-floor "$procs" hog_steps/s)" \
                          "$(median peer latency "$procs" hog_steps/s)")")x" \
             "the peer's."
    done
fi
echo
note "raw output: $RAW"
