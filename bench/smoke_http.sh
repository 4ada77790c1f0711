#!/usr/bin/env bash
#
# smoke_http.sh - CI's check that the http case serves: starts
# `BUILD_DIR/bench/gmprt-bench http all <port>` on a free loopback port,
# loads it with wrk for 1 s at -c100 and again at -c1000, and fails unless
# each run completed some requests with no socket error and no response
# other than 2xx/3xx. It asserts nothing about speed (bench/run.sh
# measures that).
#
# Usage: bench/smoke_http.sh BUILD_DIR
# Needs wrk on PATH (Debian: wrk).

set -u

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
PROG=$1/bench/gmprt-bench
[ -x "$PROG" ] || { echo "smoke_http: no $PROG" >&2; exit 1; }
command -v wrk >/dev/null || { echo "smoke_http: wrk not found" >&2; exit 1; }

# A port that no socket uses now (going by /proc/net/tcp), below Linux's
# ephemeral range.
used=" $(awk 'FNR > 1 { split($2, a, ":"); print a[2] }' \
         /proc/net/tcp /proc/net/tcp6 2>/dev/null | tr '\n' ' ') "
for ((i = 0; i < 100; i++)); do
    port=$((20000 + RANDOM % 12768))
    case $used in *" $(printf '%04X' "$port") "*) continue ;; esac
    break
done

# The server holds an fd per connection too.
ulimit -n 4096 2>/dev/null ||
    [ "$(ulimit -n)" -ge 1100 ] ||
    { echo "smoke_http: cannot raise the fd limit to 4096" >&2; exit 1; }

"$PROG" http all "$port" &
server=$!
trap 'kill -TERM "$server" 2>/dev/null' EXIT

listening=
for ((i = 0; i < 100; i++)); do
    if awk -v a="$(printf '0100007F:%04X' "$port")" \
           'FNR > 1 && $2 == a && $4 == "0A" { f = 1 } END { exit !f }' \
           /proc/net/tcp; then
        listening=1
        break
    fi
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
[ -n "$listening" ] ||
    { echo "smoke_http: the server did not listen on $port" >&2; exit 1; }

status=0
for conns in 100 1000; do
    out=$(timeout 60 wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$port/")
    rc=$?
    printf '%s\n' "$out"
    n=$(printf '%s\n' "$out" | awk '/ requests in / { print $1 }')
    if [ $rc -ne 0 ] || [ -z "$n" ] || [ "$n" -eq 0 ]; then
        echo "smoke_http: -c$conns: no requests completed (wrk exit $rc)" >&2
        status=1
    fi
    case $out in *"Socket errors"* | *"Non-2xx"*)
        echo "smoke_http: -c$conns: errors reported by wrk" >&2
        status=1
    esac
done

kill -TERM "$server"
wait "$server"
src=$?
trap - EXIT
if [ $src -ne 0 ]; then
    echo "smoke_http: the server exited with $src" >&2
    status=1
fi
[ $status -eq 0 ] && echo "smoke_http: ok"
exit $status
