/*
 * test_lua_module.c - the Lua module of examples/lua (lgmp.c): Lua
 * scripts (tests/real/lua/) run as the main goroutine of a fresh
 * gmp_main each, with interpreters made by lgmp_newstate as the host
 * gmplua makes them. The scripts check values with assert-like checks
 * and return what this file checks again; an error in a goroutine ends
 * the process with status 2 and its traceback (the module's rule), which
 * fails the test too.
 *
 * Claims:
 *   - 10,000 goroutines, each an interpreter, pass 1,000,000 messages
 *     round a ring of unbuffered channels at procs 1 and 2: the
 *     goroutines' own counts sum to exactly 1,000,000, and so do the
 *     final values of the tokens (integers counting their hops), all of
 *     which come back (ring.lua; a tenth of the goroutines and a
 *     hundredth of the messages when sanitized or emulated);
 *   - every kind of value a channel carries gets there the same (nested
 *     and cyclic tables, shared subtables, integers and floats apart,
 *     strings with NULs, functions, channels over channels, wait groups,
 *     atomics), within an interpreter, through another one and as
 *     arguments of gmp.go; what cannot be copied is an error the sender
 *     catches (values.lua);
 *   - closed channels give nil, false after their values; select chooses
 *     among several ready cases, at random, and honours default, timeouts,
 *     nil channels and closed ones; wait groups wait (sync.lua);
 *   - both scripts pass RUNS times at procs 1, 2 and 4, each run a fresh
 *     runtime, and leave nothing behind: every channel, wait group, atomic
 *     and message is freed once the interpreters are closed, including
 *     the messages channels still buffered (lgmp_live);
 *   - Lua's own limit on C recursion comes before the end of a goroutine's
 *     stack: pcall nested as deep as Lua allows and recursing string.gsub
 *     callbacks end in Lua's "C stack overflow" error, in the main
 *     goroutine and another one (stack.lua; 128 KiB stacks end in the
 *     runtime's fatal overflow, 256 KiB ones too for gsub);
 *   - a CPU-bound Lua loop shares its P through the count hook: at procs
 *     1 with preemption by signal off, a loop that makes no runtime call
 *     sees a ticker goroutine tick; with the hook off the same loop runs
 *     its whole bounded length and sees none (cpu.lua). How late the
 *     ticker's wake-ups come is printed, not asserted.
 */
#include "harness.h"

#include <lauxlib.h>
#include <lua.h>

#include "lgmp.h"

#define RUNS        (H_SLOW ? 20 : 100)
#define STACK_SIZE  (512 * 1024)        /* as gmplua (see there) */
#define MAX_RES     8

/* ring.lua: 10,000 goroutines, 10 tokens, 10 laps. */
#define RING_N      (H_SLOW ? 1000 : 10000)
#define RING_K      10
#define RING_LAPS   (H_SLOW ? 1 : 10)

/* One script's run, and what it returned. */
static struct run {
    const char *script;
    int nargs;
    lua_Number args[4];
    bool failed;
    char err[4096];
    int nres;
    lua_Number res[MAX_RES];
    bool isint[MAX_RES];
    int64_t left;                   /* goroutines still there at the end */
} lr;

static void script_main(void *arg)
{
    (void)arg;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", GMPT_LUA_DIR, lr.script);
    lua_State *L = lgmp_newstate();
    if (!L) {
        lr.failed = true;
        snprintf(lr.err, sizeof lr.err, "no interpreter");
        return;
    }
    lua_pushcfunction(L, lgmp_traceback);
    if (luaL_loadfile(L, path) != LUA_OK) {
        lr.failed = true;
        snprintf(lr.err, sizeof lr.err, "%s", lua_tostring(L, -1));
    } else {
        for (int i = 0; i < lr.nargs; i++)
            lua_pushnumber(L, lr.args[i]);
        if (lua_pcall(L, lr.nargs, LUA_MULTRET, 1) != LUA_OK) {
            lr.failed = true;
            snprintf(lr.err, sizeof lr.err, "%s", lua_tostring(L, -1));
        } else {
            lr.nres = lua_gettop(L) - 1;
            for (int i = 0; i < lr.nres && i < MAX_RES; i++) {
                lr.res[i] = lua_tonumber(L, i + 2);
                lr.isint[i] = lua_isinteger(L, i + 2);
            }
        }
    }
    lua_close(L);
    /* Until the script's goroutines have left (gmp_main would abandon
     * them, and their interpreters with them); a deadline turns one that
     * never leaves into a failure. */
    int64_t deadline = gmp_nanotime() + H_DEADLINE_NS;
    while (gmp_num_goroutines() > 1 && gmp_nanotime() < deadline)
        gmp_sleep(100 * 1000);
    lr.left = gmp_num_goroutines() - 1;
}

/* Runs script with the arguments on a fresh runtime; the results are in
 * lr. */
static void run_script(const char *script, int procs, int async_off,
                       int hook_count, int nargs, const lua_Number *args)
{
    memset(&lr, 0, sizeof lr);
    lr.script = script;
    lr.nargs = nargs;
    for (int i = 0; i < nargs; i++)
        lr.args[i] = args[i];
    lgmp_set_hook_count(hook_count);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    cfg.stack_size = STACK_SIZE;
    cfg.async_preempt_off = async_off;
    assert_int_equal(gmp_main(script_main, NULL, &cfg), 0);
    lgmp_set_hook_count(1000);
    if (lr.failed)
        print_error("%s procs=%d: %s\n", script, procs, lr.err);
    assert_false(lr.failed);
    assert_int_equal(lr.left, 0);
    /* Every interpreter is closed: nothing of the module's is left. */
    assert_int_equal(lgmp_live(), 0);
}

static int64_t res_int(int i)
{
    assert_true(i < lr.nres && lr.isint[i]);
    return (int64_t)lr.res[i];
}

/* ---- Tests ------------------------------------------------------------- */

static void ring_at(int procs)
{
    const lua_Number args[3] = {RING_N, RING_K, RING_LAPS};
    const int64_t want = (int64_t)RING_N * RING_K * RING_LAPS;
    int64_t t0 = h_now();
    run_script("ring.lua", procs, 0, 1000, 3, args);
    print_message("ring procs=%d: %d goroutines, %lld messages, %.2f s\n",
                  procs, RING_N, (long long)res_int(0),
                  (double)(h_now() - t0) / 1e9);
    assert_int_equal(lr.nres, 3);
    assert_int_equal(res_int(0), want);     /* messages passed */
    assert_int_equal(res_int(1), want);     /* the tokens' values */
    assert_int_equal(res_int(2), RING_K);   /* tokens back */
}

static void test_lua_module_ring_procs_1(void **state)
{
    ring_at(1);
}

static void test_lua_module_ring_procs_2(void **state)
{
    ring_at(2);
}

/* script RUNS times at procs 1, 2 and 4; it returns its count of checks,
 * at least min. */
static void runs_of(const char *script, int64_t min)
{
    static const int procs[] = {1, 2, 4};
    int64_t t0 = h_now();
    for (int p = 0; p < 3; p++) {
        for (int i = 0; i < RUNS; i++) {
            run_script(script, procs[p], 0, 1000, 0, NULL);
            assert_int_equal(lr.nres, 1);
            assert_true(res_int(0) >= min);
        }
    }
    print_message("%s: %d runs at procs 1, 2, 4, %lld checks each, %.1f s\n",
                  script, RUNS, (long long)res_int(0),
                  (double)(h_now() - t0) / 1e9);
}

static void test_lua_module_values_round_trip(void **state)
{
    runs_of("values.lua", 150);
}

static void test_lua_module_close_select_waitgroup(void **state)
{
    runs_of("sync.lua", 40);
}

static void test_lua_module_c_recursion_fits_the_stack(void **state)
{
    run_script("stack.lua", 2, 0, 1000, 0, NULL);
    assert_int_equal(lr.nres, 2);
    print_message("pcall depth reached: %lld in the main goroutine, %lld "
                  "in another\n", (long long)res_int(0),
                  (long long)res_int(1));
    assert_true(res_int(0) > 150 && res_int(1) > 150);
}

/* The loop's checksum over n iterations, as cpu.lua computes it. */
static int64_t cpu_acc(int64_t n)
{
    int64_t acc = 0;
    for (int64_t k = 1; k <= n; k++)
        acc = (acc * 31 + k) % 1000000007;
    return acc;
}

/* At procs 1 with preemption by signal off, only the count hook can give
 * the ticker the P while the loop runs. With the hook the loop sees NT
 * ticks long before its bound (each within a hook period or so of its
 * timer: gmp_should_yield says 1 once it is due); without
 * it the loop runs to its bound (2 * 10^6 iterations, tens of
 * milliseconds, while the ticker's 200 us timer is due) and sees none. */
static void test_lua_module_hook_shares_the_p(void **state)
{
    const lua_Number with[3] = {3, 200000000, 0.0002};
    const lua_Number without[3] = {1, 2000000, 0.0002};

    run_script("cpu.lua", 1, 1, 1000, 3, with);
    assert_int_equal(lr.nres, 5);
    int64_t n = res_int(0), seen = res_int(1);
    print_message("hook every 1000 instructions: %lld iterations, %lld "
                  "ticks seen, the ticker's worst lateness %.2f ms over "
                  "%lld ticks\n", (long long)n, (long long)seen,
                  lr.res[3] * 1e3, (long long)res_int(4));
    assert_true(seen >= 3);
    assert_true(n < 200000000);
    assert_int_equal(res_int(2), cpu_acc(n));

    run_script("cpu.lua", 1, 1, 0, 3, without);
    n = res_int(0);
    seen = res_int(1);
    print_message("no hook: %lld iterations, %lld ticks seen\n",
                  (long long)n, (long long)seen);
    assert_int_equal(n, 2000000);
    assert_int_equal(seen, 0);
    assert_int_equal(res_int(2), cpu_acc(n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lua_module_values_round_trip),
        cmocka_unit_test(test_lua_module_close_select_waitgroup),
        cmocka_unit_test(test_lua_module_c_recursion_fits_the_stack),
        cmocka_unit_test(test_lua_module_hook_shares_the_p),
        cmocka_unit_test(test_lua_module_ring_procs_1),
        cmocka_unit_test(test_lua_module_ring_procs_2),
    };
    return cmocka_run_group_tests_name("lua_module", tests, NULL, NULL);
}
