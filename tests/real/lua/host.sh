#!/bin/sh
# host.sh - gmplua, the host of examples/lua, run as a user runs it:
#   host.sh <gmplua> <directory of the scripts> <GMP_SANITIZE>
# It runs the scripts from their directory, by their file names, which
# are then the names the reports give (Lua shortens long paths).
#   - a script gets its arguments and the Ps asked for (a small ring.lua
#     on 2 Ps prints its exact message count) and exits with 0;
#   - its goroutine stacks hold Lua's deepest C recursion (stack.lua);
#   - an error no pcall catches, in a goroutine, is printed with the
#     goroutine, its traceback, and ends the process with status 2 before
#     the waiting main goroutine goes on;
#   - the deadlock report names each goroutine by its Lua function (not
#     under ThreadSanitizer, where the runtime never reports a deadlock).
set -u
gmplua=$1
sanitize=${3:-}
cd "$2" || exit 1

fail() {
    echo "host.sh: $*" >&2
    exit 1
}

out=$("$gmplua" -p 2 ring.lua 100 10 10 2>&1) ||
    fail "ring.lua exited with $?: $out"
echo "$out"
case $out in
*"ring: 100 goroutines, 10000 messages, procs 2"*) ;;
*) fail "ring.lua printed: $out" ;;
esac

out=$("$gmplua" stack.lua 2>&1) ||
    fail "stack.lua exited with $? (gmplua's goroutine stacks too small?): $out"

out=$("$gmplua" error.lua 2>&1)
st=$?
echo "$out"
[ "$st" = 2 ] || fail "error.lua exited with $st, want 2"
for want in "gmplua: error in goroutine" "lua error.lua:6" \
            "boom from a goroutine 42" "stack traceback:" "in local 'inner'"; do
    case $out in
    *"$want"*) ;;
    *) fail "error.lua's report lacks '$want'" ;;
    esac
done
case $out in
*"not reached"*) fail "the main goroutine went on after the error" ;;
esac

if [ "$sanitize" != thread ]; then
    out=$("$gmplua" deadlock.lua 2>&1)
    st=$?
    echo "$out"
    [ "$st" != 0 ] || fail "deadlock.lua exited with 0"
    for want in "all goroutines are asleep - deadlock!" \
                "\"lua main deadlock.lua\"" \
                "\"lua deadlock.lua:4\""; do
        case $out in
        *"$want"*) ;;
        *) fail "the deadlock report lacks '$want'" ;;
        esac
    done
fi
echo "host.sh: passed"
