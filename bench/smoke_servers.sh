#!/usr/bin/env bash
#
# smoke_servers.sh - CI's check that the two server cases serve: each of
# `BUILD_DIR/bench/gmprt-bench http all <port>` and `... echo all <port>`
# on a free loopback port. http is loaded by wrk for 1 s at -c100 and
# again at -c1000, and must complete some requests with no socket error
# and no response other than 2xx/3xx; echo is driven by BUILD_DIR's
# gmprt-echo-client, which checks every byte echoed. Then each server must
# exit 0 on SIGTERM. It asserts nothing about speed (bench/run.sh measures
# that).
#
# Usage: [EMULATOR="qemu-aarch64 ..."] bench/smoke_servers.sh BUILD_DIR
# EMULATOR, when set, is the command that runs BUILD_DIR's programs (a
# cross build's); wrk runs natively. Needs wrk on PATH (Debian: wrk).

set -u

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
PROG=$1/bench/gmprt-bench
CLIENT=$1/bench/gmprt-echo-client
for p in "$PROG" "$CLIENT"; do
    [ -x "$p" ] || { echo "smoke_servers: no $p" >&2; exit 1; }
done
command -v wrk >/dev/null ||
    { echo "smoke_servers: wrk not found" >&2; exit 1; }
read -r -a emu <<<"${EMULATOR:-}"

# The server holds an fd per connection too.
ulimit -n 4096 2>/dev/null ||
    [ "$(ulimit -n)" -ge 1100 ] ||
    { echo "smoke_servers: cannot raise the fd limit to 4096" >&2; exit 1; }

. "$(dirname "$0")/ports.sh"     # free_port

server=
trap '[ -n "$server" ] && kill -TERM "$server" 2>/dev/null' EXIT

# start CASE: runs the server of CASE on a new $port, as $server, and
# waits until it listens.
start() {
    port=$(free_port)
    "${emu[@]}" "$PROG" "$1" all "$port" &
    server=$!
    local i
    for ((i = 0; i < 300; i++)); do
        if awk -v a="$(printf '0100007F:%04X' "$port")" \
               'FNR > 1 && $2 == a && $4 == "0A" { f = 1 } END { exit !f }' \
               /proc/net/tcp; then
            return 0
        fi
        kill -0 "$server" 2>/dev/null || break
        sleep 0.1
    done
    echo "smoke_servers: $1 did not listen on $port" >&2
    exit 1
}

# stop CASE: SIGTERM to the server, which must exit 0.
stop() {
    kill -TERM "$server"
    wait "$server"
    local src=$?
    server=
    if [ $src -ne 0 ]; then
        echo "smoke_servers: the $1 server exited with $src" >&2
        status=1
    fi
}

status=0
start http
for conns in 100 1000; do
    out=$(timeout 60 wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$port/")
    rc=$?
    printf '%s\n' "$out"
    n=$(printf '%s\n' "$out" | awk '/ requests in / { print $1 }')
    if [ $rc -ne 0 ] || [ -z "$n" ] || [ "$n" -eq 0 ]; then
        echo "smoke_servers: http -c$conns: no requests completed (wrk exit $rc)" >&2
        status=1
    fi
    case $out in *"Socket errors"* | *"Non-2xx"*)
        echo "smoke_servers: http -c$conns: errors reported by wrk" >&2
        status=1
    esac
done
stop http

start echo
if ! timeout 300 "${emu[@]}" "$CLIENT" "$port"; then
    echo "smoke_servers: the echo client failed" >&2
    status=1
fi
stop echo

trap - EXIT
[ $status -eq 0 ] && echo "smoke_servers: ok"
exit $status
