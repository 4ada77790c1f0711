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
 *     sees a ticker goroutine tick, RUNS times, and each tick comes within
 *     one hook period: every poll that finds the ticker's timer due gives
 *     the P to the ticker before the loop runs on; with the hook off the
 *     same loop runs its whole bounded length and sees none (cpu.lua).
 *     How late the ticks come in time is printed, not asserted.
 */
#include "harness.h"

#include <lauxlib.h>
#include <lua.h>

#include "lgmp.h"
#include "internal.h"

#define RUNS        (H_SLOW ? 20 : 100)
#define STACK_SIZE  (512 * 1024)        /* as gmplua (see there) */
#define MAX_RES     8
#define HOOK_COUNT  1000                /* lgmp's default */

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

/* The main interpreter's count hook in place of lgmp's, if not NULL. */
static lua_Hook main_hook;

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
    if (main_hook)
        lua_sethook(L, main_hook, LUA_MASKCOUNT, HOOK_COUNT);
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

/* What check_hook saw over the runs of cpu.lua. */
static struct {
    int64_t polls;                  /* calls of the hook */
    int64_t due;                    /* polls that found a timer due */
    int64_t late;                   /* ... and came back before it ran */
    int64_t gap;                    /* the longest time between two polls */
    int64_t last;                   /* the time of the last poll */
} hk;

/* lgmp's count hook, checking what it relies on. A poll that finds a
 * timer of its P due (read before gmp_should_yield reads the clock, so
 * that it must say 1) yields, and the loop comes back only once the G the
 * timer woke has run: no timer due at the poll is left on the P, and no G
 * waits in runnext. The ticker is then late by at most one hook period,
 * whatever the scheduler's turn. Procs 1: the poller's P is the ticker's. */
static void check_hook(lua_State *L, lua_Debug *ar)
{
    (void)L;
    (void)ar;
    struct p *pp = gmp__getm()->p;
    int64_t now = gmp_nanotime();
    /* Relaxed, both loads here: the owner's own P (procs 1). */
    int64_t tw = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
    bool due = tw != 0 && tw <= now;
    hk.polls++;
    if (hk.last && now - hk.last > hk.gap)
        hk.gap = now - hk.last;
    if (gmp_should_yield())
        gmp_yield();
    hk.last = gmp_nanotime();
    if (!due)
        return;
    hk.due++;
    tw = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
    if ((tw != 0 && tw <= now) ||
        atomic_load_explicit(&pp->runnext, memory_order_relaxed))
        hk.late++;
}

static int cmp_num(const void *a, const void *b)
{
    lua_Number x = *(const lua_Number *)a, y = *(const lua_Number *)b;
    return (x > y) - (x < y);
}

/* At procs 1 with preemption by signal off, only the count hook can give
 * the ticker the P while the loop runs. With the hook, RUNS runs of the
 * loop each see NT ticks long before its bound, every tick within one
 * hook period of its timer (check_hook); without it the loop runs to its
 * bound (2 * 10^6 iterations, tens of milliseconds, while the ticker's
 * 200 us timer is due) and sees none. How late the ticks come in time is
 * printed: one hook period is microseconds, and what the OS takes from
 * the thread comes on top. */
static void test_lua_module_hook_shares_the_p(void **state)
{
    enum { NT = 20 };
    const lua_Number with[3] = {NT, 200000000, 0.0002};
    const lua_Number without[3] = {1, 2000000, 0.0002};
    static lua_Number worst[RUNS];

    memset(&hk, 0, sizeof hk);
    for (int i = 0; i < RUNS; i++) {
        hk.last = 0;
        main_hook = check_hook;
        run_script("cpu.lua", 1, 1, HOOK_COUNT, 3, with);
        main_hook = NULL;
        assert_int_equal(lr.nres, 5);
        int64_t n = res_int(0), seen = res_int(1);
        assert_true(seen >= NT);
        assert_true(n < 200000000);
        assert_int_equal(res_int(2), cpu_acc(n));
        worst[i] = lr.res[3];
    }
    qsort(worst, RUNS, sizeof worst[0], cmp_num);
    print_message("hook every %d instructions, %d runs: %lld polls, %lld "
                  "found a timer due, %lld of those came back before its G "
                  "ran; the ticker's worst lateness per run %.0f us median, "
                  "%.0f us max; the longest gap between two polls %.0f us\n",
                  HOOK_COUNT, RUNS, (long long)hk.polls, (long long)hk.due,
                  (long long)hk.late, worst[RUNS / 2] * 1e6,
                  worst[RUNS - 1] * 1e6, (double)hk.gap / 1e3);
    assert_int_equal(hk.late, 0);
    assert_true(hk.due >= RUNS);    /* the check above was not vacuous */

    run_script("cpu.lua", 1, 1, 0, 3, without);
    int64_t n = res_int(0), seen = res_int(1);
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
