/*
 * test_lua.c - Lua 5.4 interpreters (Debian's liblua5.4, unmodified) on
 * goroutines, one lua_State per goroutine.
 *
 * Claims, at procs 1, 2 and 4, each run a fresh gmp_main:
 *   - a CPU-bound Lua goroutine shares its P: a count hook
 *     (lua_sethook, LUA_MASKCOUNT) calls gmp_yield. The preemption signal
 *     never stops liblua's code (a shared object, under the default
 *     policy), so without the hook a Lua loop keeps its P for as long as it
 *     runs. The loop here runs until it has seen a ticker goroutine (a
 *     gmp_sleep loop) tick NT times, as the hook reports the count into
 *     the global TICKS; at procs 1 it can only end if the hook's yields
 *     let the ticker run (a bound on its iterations turns a starved
 *     ticker into a failed check rather than a hang);
 *   - beside it, other interpreters compute (a sieve, an error raised
 *     through pcall after yields, so across threads at procs > 1), two
 *     play ping-pong through C functions that park on channels (an
 *     interpreter parked in the middle of a call while another runs), and
 *     one uses Lua's own collector (collectgarbage: full collections,
 *     generational and incremental modes) and coroutines (a generator, a
 *     resumed accumulator); every result is checked against C's;
 *   - no hang, crash or corrupted interpreter state over 100 runs at each
 *     P count;
 *   - what makes the P shared is the hook's yield: at procs 1 with
 *     preemption by signal off, the same loop with a hook that does not
 *     yield runs its whole bounded length with the ticker's count
 *     unchanged, and with the yielding hook sees it tick.
 *
 * The hook is this program's code, called by liblua mid-instruction; a
 * goroutine switch there is safe because no lua_State is shared between
 * goroutines and liblua keeps no other state (no lock, no thread-local
 * variable) that the switch could leave to another goroutine, or carry
 * to another thread. Lua raises errors with longjmp within the goroutine's
 * own stack, which is right even when the goroutine resumed on another
 * thread between the setjmp and the longjmp.
 */
#include "harness.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#define RUNS        (H_SLOW ? 50 : 100)
#define HOOK_COUNT  1000            /* VM instructions between hook calls */
#define TICK_NS     (200 * US)
#define NT          3               /* ticks the CPU loop waits for */
#define NMIN        20000           /* and iterations it runs at least */
#define NMAX        200000000       /* the bound: a starved ticker */
#define PINGS       200
#define SIEVE_N     20000
#define SIEVE_WANT  2262            /* primes up to 20000 */
#define BUSY        3

/* ---- Lua programs ---------------------------------------------------- */

static const char cpu_src[] =
    "local nt, nmin, nmax = ...\n"
    "local start = TICKS\n"
    "local n, acc = 0, 0\n"
    "while (TICKS - start < nt or n < nmin) and n < nmax do\n"
    "  for i = 1, 1000 do\n"
    "    n = n + 1\n"
    "    acc = (acc * 31 + n) % 1000000007\n"
    "  end\n"
    "end\n"
    "return n, acc, TICKS - start\n";

static const char ping_src[] =
    "local n = ...\n"
    "local x = 1\n"
    "for i = 1, n do\n"
    "  send(x)\n"
    "  x = (recv() * 3 + 1) % 65537\n"
    "end\n"
    "return x\n";

static const char pong_src[] =
    "local n = ...\n"
    "local s = 0\n"
    "for i = 1, n do\n"
    "  local v = recv()\n"
    "  s = s + v\n"
    "  send((v * 7 + 2) % 65537)\n"
    "end\n"
    "return s\n";

static const char sieve_src[] =
    "local n = ...\n"
    "local comp, count = {}, 0\n"
    "for i = 2, n do\n"
    "  if not comp[i] then\n"
    "    count = count + 1\n"
    "    for j = i * i, n, i do comp[j] = true end\n"
    "  end\n"
    "end\n"
    "local ok, err = pcall(function()\n"
    "  local s = 0\n"
    "  for i = 1, 100000 do s = s + i end\n"
    "  error('boom ' .. s)\n"
    "end)\n"
    "return count, ok, err\n";

static const char gc_src[] =
    "local function gen(n)\n"
    "  return coroutine.wrap(function()\n"
    "    for i = 1, n do coroutine.yield(i * i) end\n"
    "  end)\n"
    "end\n"
    "local squares = 0\n"
    "for v in gen(1000) do squares = squares + v end\n"
    "local co = coroutine.create(function(a)\n"
    "  local sum = a\n"
    "  while true do sum = sum + coroutine.yield(sum) end\n"
    "end)\n"
    "local _, r = coroutine.resume(co, 1)\n"
    "for i = 1, 100 do _, r = coroutine.resume(co, i) end\n"
    "collectgarbage('collect')\n"
    "local base = collectgarbage('count')\n"
    "local t = {}\n"
    "for i = 1, 20000 do t[i] = { i, tostring(i) } end\n"
    "local peak = collectgarbage('count')\n"
    "t = nil\n"
    "collectgarbage('collect')\n"
    "local after = collectgarbage('count')\n"
    "collectgarbage('generational')\n"
    "local u, kept = {}, 0\n"
    "for i = 1, 20000 do\n"
    "  u[#u + 1] = { i }\n"
    "  if #u == 100 then kept = kept + u[100][1]; u = {} end\n"
    "end\n"
    "collectgarbage('incremental')\n"
    "collectgarbage('step')\n"
    "return squares, r, base, peak, after, kept\n";

/* ---- One run --------------------------------------------------------- */

static struct {
    int procs;
    bool hook_yields;           /* the count hook calls gmp_yield */
    bool cpu_only;              /* only the ticker and the CPU loop */
    int64_t nt, nmin, nmax;     /* the CPU loop's arguments */
    gmp_chan_t *ping, *pong;    /* ping -> pong, pong -> ping */
    gmp_wg_t wg;                /* every goroutine but the ticker */
    gmp_wg_t ticker_wg;
    /* The ticker's count: written by the ticker, read by hooks on any
     * thread. Relaxed: a count; nothing is published through it. */
    _Atomic int64_t ticks;
    _Atomic int stop;           /* the ticker stops (relaxed: a hint) */
    /* Results, read by the test thread after gmp_main, which joins every
     * goroutine: relaxed counters, and plain fields each written by one
     * goroutine. */
    _Atomic int64_t ok, failed;
    int64_t cpu_n, cpu_seen;
    _Atomic int err_set;
    char err[512];
} lr;

/* A failed check in a goroutine: counted, the first one described. */
__attribute__((format(printf, 1, 2))) static void lfail(const char *fmt, ...)
{
    /* Relaxed: a counter. */
    atomic_fetch_add_explicit(&lr.failed, 1, memory_order_relaxed);
    int z = 0;
    /* Acquire-release on the claim only: one writer of err, which the test
     * thread reads after gmp_main. */
    if (atomic_compare_exchange_strong_explicit(&lr.err_set, &z, 1,
                                                memory_order_acq_rel,
                                                memory_order_relaxed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(lr.err, sizeof lr.err, fmt, ap);
        va_end(ap);
    }
}

static void passed(void)
{
    /* Relaxed: a counter. */
    atomic_fetch_add_explicit(&lr.ok, 1, memory_order_relaxed);
}

/* Every HOOK_COUNT instructions: give up the P (when asked to), then tell
 * the script the ticker's count. */
static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (lr.hook_yields)
        gmp_yield();
    /* Relaxed: see lr.ticks. */
    lua_pushinteger(L, (lua_Integer)atomic_load_explicit(
                           &lr.ticks, memory_order_relaxed));
    lua_setglobal(L, "TICKS");
}

/* send(v) and recv(): the channel is the closure's upvalue. Both park the
 * goroutine inside the call. */
static int l_send(lua_State *L)
{
    gmp_chan_t *ch = lua_touserdata(L, lua_upvalueindex(1));
    int64_t v = (int64_t)luaL_checkinteger(L, 1);
    if (gmp_chan_send(ch, &v) != 0)
        return luaL_error(L, "send: channel closed");
    return 0;
}

static int l_recv(lua_State *L)
{
    gmp_chan_t *ch = lua_touserdata(L, lua_upvalueindex(1));
    int64_t v;
    if (gmp_chan_recv(ch, &v) != 0)
        return luaL_error(L, "recv: channel closed");
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
}

/* A fresh interpreter with the standard libraries, the hook and TICKS;
 * send and recv on the given channels when they are not NULL. */
static lua_State *new_state(gmp_chan_t *out, gmp_chan_t *in)
{
    lua_State *L = luaL_newstate();
    if (!L)
        return NULL;
    luaL_openlibs(L);
    /* Relaxed: see lr.ticks. */
    lua_pushinteger(L, (lua_Integer)atomic_load_explicit(
                           &lr.ticks, memory_order_relaxed));
    lua_setglobal(L, "TICKS");
    if (out) {
        lua_pushlightuserdata(L, out);
        lua_pushcclosure(L, l_send, 1);
        lua_setglobal(L, "send");
        lua_pushlightuserdata(L, in);
        lua_pushcclosure(L, l_recv, 1);
        lua_setglobal(L, "recv");
    }
    lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_COUNT);
    return L;
}

/* Runs src with the integer arguments, leaving nres results on the stack.
 * False (and a failure recorded) on an error. */
static bool run_src(lua_State *L, const char *name, const char *src,
                    const int64_t *args, int nargs, int nres)
{
    if (luaL_loadbuffer(L, src, strlen(src), name) != LUA_OK) {
        lfail("%s: load: %s", name, lua_tostring(L, -1));
        return false;
    }
    for (int i = 0; i < nargs; i++)
        lua_pushinteger(L, (lua_Integer)args[i]);
    if (lua_pcall(L, nargs, nres, 0) != LUA_OK) {
        lfail("%s: %s", name, lua_tostring(L, -1));
        return false;
    }
    return true;
}

static int64_t int_at(lua_State *L, int idx, bool *ok)
{
    int isnum = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isnum);
    if (!isnum)
        *ok = false;
    return (int64_t)v;
}

static void ticker(void *arg)
{
    (void)arg;
    /* Relaxed: a hint (see lr.stop). */
    while (!atomic_load_explicit(&lr.stop, memory_order_relaxed)) {
        gmp_sleep(TICK_NS);
        /* Relaxed: see lr.ticks. */
        atomic_fetch_add_explicit(&lr.ticks, 1, memory_order_relaxed);
    }
    gmp_wg_done(&lr.ticker_wg);
}

static void cpu_lua(void *arg)
{
    (void)arg;
    lua_State *L = new_state(NULL, NULL);
    int64_t args[3] = {lr.nt, lr.nmin, lr.nmax};
    if (!L) {
        lfail("cpu: no state");
    } else if (run_src(L, "cpu", cpu_src, args, 3, 3)) {
        bool ok = true;
        int64_t n = int_at(L, -3, &ok), acc = int_at(L, -2, &ok);
        int64_t seen = int_at(L, -1, &ok);
        int64_t want = 0;
        for (int64_t k = 1; k <= n; k++)
            want = (want * 31 + k) % 1000000007;
        lr.cpu_n = n;
        lr.cpu_seen = seen;
        if (!ok || n % 1000 != 0 || acc != want)
            lfail("cpu: n=%lld acc=%lld, want %lld", (long long)n,
                 (long long)acc, (long long)want);
        else
            passed();
    }
    if (L)
        lua_close(L);
    gmp_wg_done(&lr.wg);
}

static void ping_lua(void *arg)
{
    bool is_ping = arg != NULL;
    lua_State *L = is_ping ? new_state(lr.ping, lr.pong)
                           : new_state(lr.pong, lr.ping);
    int64_t args[1] = {PINGS};
    if (!L) {
        lfail("pingpong: no state");
    } else if (run_src(L, is_ping ? "ping" : "pong",
                       is_ping ? ping_src : pong_src, args, 1, 1)) {
        int64_t x = 1, s = 0;
        for (int i = 0; i < PINGS; i++) {
            s += x;
            x = ((x * 7 + 2) % 65537 * 3 + 1) % 65537;
        }
        bool ok = true;
        int64_t got = int_at(L, -1, &ok);
        if (!ok || got != (is_ping ? x : s))
            lfail("%s: %lld, want %lld", is_ping ? "ping" : "pong",
                 (long long)got, (long long)(is_ping ? x : s));
        else
            passed();
    }
    if (L)
        lua_close(L);
    gmp_wg_done(&lr.wg);
}

static void sieve_lua(void *arg)
{
    (void)arg;
    lua_State *L = new_state(NULL, NULL);
    int64_t args[1] = {SIEVE_N};
    if (!L) {
        lfail("sieve: no state");
    } else if (run_src(L, "sieve", sieve_src, args, 1, 3)) {
        bool ok = true;
        int64_t count = int_at(L, -3, &ok);
        bool raised = !lua_toboolean(L, -2);
        const char *err = lua_tostring(L, -1);
        if (!ok || count != SIEVE_WANT || !raised || !err ||
            !strstr(err, "boom 5000050000"))
            lfail("sieve: %lld primes, pcall %s: %s", (long long)count,
                 raised ? "raised" : "did not raise", err ? err : "(none)");
        else
            passed();
    }
    if (L)
        lua_close(L);
    gmp_wg_done(&lr.wg);
}

static void gc_lua(void *arg)
{
    (void)arg;
    lua_State *L = new_state(NULL, NULL);
    if (!L) {
        lfail("gc: no state");
    } else if (run_src(L, "gc", gc_src, NULL, 0, 6)) {
        bool ok = true;
        int64_t squares = int_at(L, -6, &ok), r = int_at(L, -5, &ok);
        double base = lua_tonumber(L, -4), peak = lua_tonumber(L, -3);
        double after = lua_tonumber(L, -2);
        int64_t kept = int_at(L, -1, &ok);
        int64_t want_kept = 0;
        for (int64_t i = 100; i <= 20000; i += 100)
            want_kept += i;
        /* 20,000 small tables and strings: well over 1 MB (Lua counts in
         * KB); collected, the heap is back near where it started. */
        if (!ok || squares != 333833500 || r != 1 + 5050 ||
            peak - base < 1000 || after > base + (peak - base) / 4 ||
            kept != want_kept)
            lfail("gc: squares %lld r %lld base %.0f KB peak %.0f KB after "
                 "%.0f KB kept %lld", (long long)squares, (long long)r, base,
                 peak, after, (long long)kept);
        else
            passed();
    }
    if (L)
        lua_close(L);
    gmp_wg_done(&lr.wg);
}

static void run_main(void *arg)
{
    (void)arg;
    gmp_wg_add(&lr.ticker_wg, 1);
    if (gmp_go(ticker, NULL) != 0) {
        lfail("no ticker");
        gmp_wg_done(&lr.ticker_wg);
    }
    int n = lr.cpu_only ? 1 : 1 + 2 + BUSY + 1;
    gmp_wg_add(&lr.wg, n);
    if (!lr.cpu_only) {
        lr.ping = gmp_chan_make(sizeof(int64_t), 0);
        lr.pong = gmp_chan_make(sizeof(int64_t), 0);
    }
    int started = 0;
    started += gmp_go(cpu_lua, NULL) == 0;
    if (!lr.cpu_only && lr.ping && lr.pong) {
        started += gmp_go(ping_lua, (void *)1) == 0;
        started += gmp_go(ping_lua, NULL) == 0;
        for (int i = 0; i < BUSY; i++)
            started += gmp_go(sieve_lua, NULL) == 0;
        started += gmp_go(gc_lua, NULL) == 0;
    }
    if (started != n) {
        lfail("%d of %d goroutines started", started, n);
        gmp_wg_add(&lr.wg, started - n);
    }
    gmp_wg_wait(&lr.wg);
    /* Relaxed: a hint (see lr.stop). */
    atomic_store_explicit(&lr.stop, 1, memory_order_relaxed);
    gmp_wg_wait(&lr.ticker_wg);
    gmp_chan_free(lr.ping);
    gmp_chan_free(lr.pong);
    /* Until the others have left: gmp_main would abandon one still on its
     * way out. */
    while (gmp_num_goroutines() > 1)
        gmp_yield();
}

static int lua_run(int procs, bool async_off, bool hook_yields, bool cpu_only,
                   int64_t nt, int64_t nmin, int64_t nmax)
{
    memset(&lr, 0, sizeof lr);
    lr.procs = procs;
    lr.hook_yields = hook_yields;
    lr.cpu_only = cpu_only;
    lr.nt = nt;
    lr.nmin = nmin;
    lr.nmax = nmax;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    cfg.async_preempt_off = async_off;
    return gmp_main(run_main, NULL, &cfg);
}

static void assert_run_passed(int procs, int i, int64_t want_ok)
{
    if (atomic_load(&lr.failed) || atomic_load(&lr.ok) != want_ok)
        print_error("procs=%d run %d: %lld passed of %lld, %lld failed; "
                    "first: %s\n", procs, i, (long long)atomic_load(&lr.ok),
                    (long long)want_ok, (long long)atomic_load(&lr.failed),
                    lr.err);
    assert_int_equal(atomic_load(&lr.failed), 0);
    assert_int_equal(atomic_load(&lr.ok), want_ok);
}

/* ---- Tests ------------------------------------------------------------- */

static void runs_at(int procs)
{
    int64_t t0 = h_now(), ticks = 0, iters = 0;
    for (int i = 0; i < RUNS; i++) {
        assert_int_equal(lua_run(procs, false, true, false, NT, NMIN, NMAX),
                         0);
        assert_run_passed(procs, i, 1 + 2 + BUSY + 1);
        /* The ticker ticked while the loop ran: the loop saw it. */
        if (lr.cpu_seen < NT)
            print_error("procs=%d run %d: the loop saw %lld ticks in %lld "
                        "iterations\n", procs, i, (long long)lr.cpu_seen,
                        (long long)lr.cpu_n);
        assert_true(lr.cpu_seen >= NT);
        assert_true(lr.cpu_n < NMAX);
        ticks += lr.cpu_seen;
        iters += lr.cpu_n;
    }
    print_message("procs=%d: %d runs, the CPU-bound loop saw %lld ticks in "
                  "%lld iterations, %.1f s\n", procs, RUNS, (long long)ticks,
                  (long long)iters, (double)(h_now() - t0) / 1e9);
}

static void test_lua_interpreters_share_procs_1(void **state)
{
    (void)state;
    runs_at(1);
}

static void test_lua_interpreters_share_procs_2(void **state)
{
    (void)state;
    runs_at(2);
}

static void test_lua_interpreters_share_procs_4(void **state)
{
    (void)state;
    runs_at(4);
}

/* At procs 1 with no preemption by signal, only the hook's yield can give
 * the ticker the P while the loop runs. Without it the loop runs to its
 * bound (2 * 10^6 iterations, tens of milliseconds, while the ticker's
 * 200 us timer is due) and sees no tick; with it the loop sees one and
 * stops early. */
static void test_lua_hook_yield_is_what_shares_the_p(void **state)
{
    (void)state;
    const int64_t bound = 2000000;
    assert_int_equal(lua_run(1, true, false, true, 1, 0, bound), 0);
    assert_run_passed(1, 0, 1);
    print_message("hook without yield: %lld iterations, %lld ticks seen\n",
                  (long long)lr.cpu_n, (long long)lr.cpu_seen);
    assert_int_equal(lr.cpu_n, bound);
    assert_int_equal(lr.cpu_seen, 0);

    assert_int_equal(lua_run(1, true, true, true, 1, 0, bound), 0);
    assert_run_passed(1, 0, 1);
    print_message("hook with yield: %lld iterations, %lld ticks seen\n",
                  (long long)lr.cpu_n, (long long)lr.cpu_seen);
    assert_true(lr.cpu_seen >= 1);
    assert_true(lr.cpu_n < bound);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lua_interpreters_share_procs_1),
        cmocka_unit_test(test_lua_interpreters_share_procs_2),
        cmocka_unit_test(test_lua_interpreters_share_procs_4),
        cmocka_unit_test(test_lua_hook_yield_is_what_shares_the_p),
    };
    return cmocka_run_group_tests_name("lua", tests, NULL, NULL);
}
