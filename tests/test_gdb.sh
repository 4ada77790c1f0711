#!/bin/sh
# test_gdb.sh GDB TARGET SCRIPT - tools/gdb/gmprt-gdb.py against a live
# program (tests/gdb_target.c): `info goroutines` before the runtime
# starts and at a breakpoint where goroutines are parked, `goroutine N bt`
# of parked goroutines and of the running one, and the selected thread's
# registers unchanged afterwards, also after a command that fails.
#
# Exits 77 (ctest's SKIP_RETURN_CODE) where gdb cannot do its part: no
# Python in it, no ptrace (a container without the capability), or a
# library built without debug info (-DCMAKE_BUILD_TYPE=Release), which the
# script needs.
set -u
GDB=$1
TARGET=$2
SCRIPT=$3

out=$(mktemp)
trap 'rm -f "$out"' EXIT

TO=""
if command -v timeout >/dev/null 2>&1; then TO="timeout 120"; fi

gdbrun() {
    $TO "$GDB" -nx -batch -iex 'set debuginfod enabled off' \
        -iex 'set startup-with-shell off' "$@" 2>&1
}

# gdb with Python?
if ! gdbrun -ex 'python print("gmprt-py-" + "ok")' | grep -q gmprt-py-ok; then
    echo "SKIP: $GDB has no Python support"
    exit 77
fi
# Was gmprt built with debug info?
if ! gdbrun -ex 'info line gmp_go' "$TARGET" | grep -q '^Line [0-9]'; then
    echo "SKIP: gmprt was built without debug info (-g), which the script needs"
    exit 77
fi
# Can gdb run a program here (ptrace)?
if ! gdbrun -ex run "$TARGET" >"$out" || ! grep -q 'exited normally' "$out"
then
    if "$TARGET" >/dev/null 2>&1; then
        echo "SKIP: gdb cannot run programs here (ptrace restricted?):"
        cat "$out"
        exit 77
    fi
    echo "FAIL: $TARGET fails on its own:"
    cat "$out"
    exit 1
fi

gdbrun -ex "source $SCRIPT" \
    -ex 'info goroutines' \
    -ex 'break main' -ex 'break gdb_stop_here' -ex run \
    -ex 'echo ==before-start\n' -ex 'info goroutines' \
    -ex continue \
    -ex 'echo ==info\n' -ex 'info goroutines' \
    -ex 'echo ==regs-before\n' -ex 'p/x $pc' -ex 'p/x $sp' \
    -ex 'echo ==bt-recv\n' -ex 'goroutine gdb_recv_goid bt' \
    -ex 'echo ==bt-sleep\n' -ex 'goroutine gdb_sleep_goid bt' \
    -ex 'echo ==bt-main\n' -ex 'goroutine gdb_main_goid bt' \
    -ex 'echo ==bt-missing\n' -ex 'goroutine 999999 bt' \
    -ex 'echo ==cmd-error\n' -ex 'goroutine gdb_recv_goid print no_such_sym' \
    -ex 'echo ==regs-after\n' -ex 'p/x $pc' -ex 'p/x $sp' \
    -ex 'echo ==end\n' \
    -ex kill \
    "$TARGET" >"$out"

fail=0
section() {     # the lines between ==$1 and the next ==
    sed -n "/^==$1\$/,/^==/p" "$out" | sed '1d;$d'
}
check() {       # check DESCRIPTION SECTION ERE
    if section "$2" | grep -Eq -- "$3"; then
        echo "ok:   $1"
    else
        echo "FAIL: $1 (no /$3/ in section $2)"
        fail=1
    fi
}

if ! grep -q 'gdb_stop_here ()' "$out"; then
    echo "FAIL: gdb did not stop in gdb_stop_here"
    cat "$out"
    exit 1
fi

check "no runtime before gmp_main" before-start '^no gmprt runtime running'
check "main goroutine running, marked" info \
    '^\* +[0-9]+ +running +thread [0-9]+ \(LWP [0-9]+\) +main_goroutine$'
check "receiver 1 listed" info \
    '^  [0-9]+ +waiting +chan receive +gdb_recv_worker "gdb-recv"$'
check "receiver 2 listed" info \
    '^  [0-9]+ +waiting +chan receive +gdb_recv_worker2$'
check "sleeper listed" info '^  [0-9]+ +waiting +sleep +gdb_sleeper$'
check "wait group waiter listed" info \
    '^  [0-9]+ +waiting +sync\.WaitGroup\.Wait +gdb_wg_waiter$'
n=$(section info | grep -c '^[ *] [0-9]')
if [ "$n" != 5 ]; then
    echo "FAIL: $n goroutines listed, want 5"
    fail=1
fi

check "recv bt: the receive path" bt-recv \
    '^#[0-9]+ .* in (gmp_chan_recv|chanrecv|chan_wait) '
check "recv bt: the park" bt-recv '^#[0-9]+ .* in gmp__gopark '
check "recv bt: the start function" bt-recv \
    '^#[0-9]+ .* in gdb_recv_worker \(arg=0x0\) at .*gdb_target\.c:[0-9]+$'
# Innermost first: the receive path above the start function.
recv_re=' in (gmp_chan_recv|chanrecv|chan_wait) '
recv_at=$(section bt-recv | grep -En "$recv_re" | head -1 | cut -d: -f1)
start_at=$(section bt-recv | grep -En ' in gdb_recv_worker ' | head -1 |
           cut -d: -f1)
if [ -z "$recv_at" ] || [ -z "$start_at" ] || [ "$recv_at" -ge "$start_at" ]
then
    echo "FAIL: recv bt: receive path not above the start function"
    fail=1
fi
check "sleep bt: gmp_sleep" bt-sleep '^#[0-9]+ .* in gmp_sleep '
check "sleep bt: the start function" bt-sleep \
    '^#[0-9]+ .* in gdb_sleeper \(arg=0x0\) at '
check "running G: its thread" bt-main \
    '^goroutine [0-9]+ is running on thread [0-9]+ \(LWP [0-9]+\)$'
check "running G: its stack" bt-main '^#0 +gdb_stop_here \(\) at '
check "running G: its start function" bt-main ' in main_goroutine '
check "unknown id" bt-missing '^goroutine 999999 not found$'
check "a failing command" cmd-error 'No symbol "no_such_sym"'

before=$(section regs-before)
after=$(section regs-after)
if [ -z "$before" ] || [ "$(echo "$before" | sed 's/^\$[0-9]* //')" != \
                          "$(echo "$after" | sed 's/^\$[0-9]* //')" ]; then
    echo "FAIL: registers not restored: before [$before] after [$after]"
    fail=1
else
    echo "ok:   registers restored"
fi

if [ "$fail" != 0 ]; then
    echo "---- gdb output"
    cat "$out"
    exit 1
fi
echo "---- gdb output"
sed -n '/^==info$/,/^==end$/p' "$out"
exit 0
