/*
 * test_stw.c - gmp_stop_world and gmp_start_world, the host's
 * stop-the-world.
 *
 * Claims, each for a runtime with 1, 2 and 4 Ps:
 *   - stopped from a plain thread, goroutines in tight loops (preempted by
 *     signal), locked to their threads, sleeping on timers, parked on a
 *     channel and blocked in a system call all stay put: their counters do
 *     not move, and every runtime thread comes to sleep in the kernel;
 *     started again, each goes on;
 *   - what the stopper does meanwhile waits: a value it sends to a parked
 *     goroutine, a goroutine it spawns, a system call it lets return are
 *     acted on only after gmp_start_world;
 *   - stopped from a goroutine, that goroutine runs on alone (its yields
 *     return at once) and the others are still, at every P count;
 *   - stoppers on several goroutines and a thread at once take turns: never
 *     two hold the world, and each finds the spinners still;
 *   - misuse is an error: starting a world not stopped or stopped by
 *     another, stopping twice, stopping inside a system-call bracket or
 *     with no runtime, gmp_shutdown while stopped.
 * "Stays put" is checked where nothing could move it if the runtime were
 * right: with every other thread asleep (h_still), which a goroutine that
 * still ran would not be.
 */
#include "harness.h"

#include <sys/ioctl.h>

#define ROUNDS      (H_SLOW ? 10 : 50)
#define MAXSPIN     8

/* ---- Spinners: goroutines in tight loops ---------------------------------- */

static _Atomic int64_t spins[MAXSPIN];
static _Atomic int spin_stop;
static int nspin;
static gmp_wg_t spin_wg;

/* Without preemption by signal (H_NO_ASYNC) only a runtime call stops a
 * loop: there the spinners make one (gmp_nanotime checks the mark on
 * entry) every 1024 rounds. Relaxed: counters read by the test thread. */
static void spinner(void *arg)
{
    _Atomic int64_t *c = arg;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) {
        int64_t n = atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
#if H_NO_ASYNC
        if (n % 1024 == 0)
            (void)gmp_nanotime();
#else
        (void)n;
#endif
    }
    gmp_wg_done(&spin_wg);
}

static void locked_spinner(void *arg)
{
    gmp_lock_os_thread();
    spinner(arg);
}

static bool spinners_all_ran(void *arg)
{
    const int64_t *since = arg;
    for (int i = 0; i < nspin; i++)
        if (atomic_load(&spins[i]) <= since[i])
            return false;
    return true;
}

static void spin_start(int n, bool locked_first)
{
    nspin = n;
    atomic_store(&spin_stop, 0);
    gmp_wg_add(&spin_wg, n);
    int64_t zero[MAXSPIN] = {0};
    for (int i = 0; i < n; i++) {
        atomic_store(&spins[i], 0);
        assert_int_equal(gmp_go(i == 0 && locked_first ? locked_spinner
                                                       : spinner,
                                (void *)&spins[i]), 0);
    }
    assert_int_equal(h_wait_until(spinners_all_ran, zero,
                                  "every spinner ran"), 0);
}

static void spin_end(void)
{
    atomic_store(&spin_stop, 1);
    gmp_wg_wait(&spin_wg);
}

static void spin_snap(int64_t *snap)
{
    for (int i = 0; i < nspin; i++)
        snap[i] = atomic_load(&spins[i]);
}

static bool spin_same(const int64_t *snap)
{
    for (int i = 0; i < nspin; i++)
        if (atomic_load(&spins[i]) != snap[i])
            return false;
    return true;
}

static int nprocs(void **state)
{
    return ((struct h_env *)*state)->procs;
}

/* ---- Stopped from a plain thread ------------------------------------------ */

static void test_stw_thread_stops_spinners(void **state)
{
    int procs = nprocs(state);
    spin_start(2 * procs, true);
    for (int r = 0; r < ROUNDS; r++) {
        assert_int_equal(gmp_stop_world(), 0);
        int64_t snap[MAXSPIN];
        spin_snap(snap);
        assert_int_equal(h_still(), 0);
        assert_true(spin_same(snap));
        assert_int_equal(gmp_start_world(), 0);
        assert_int_equal(h_wait_until(spinners_all_ran, snap,
                                      "every spinner ran again"), 0);
    }
    spin_end();
}

/* A goroutine that parks on a channel, one that sleeps on a timer, and one
 * blocked in a system call; the stopper wakes all three while stopped. */
static gmp_chan_t *park_ch;
static int sys_pipe[2];
static _Atomic int64_t parked_got, ticks, sys_done, spawned_ran;
static _Atomic int tick_stop;

static void parked(void *arg)
{
    (void)arg;
    int64_t v = 0;
    if (gmp_chan_recv(park_ch, &v) == 0)
        atomic_store(&parked_got, v);
}

static void ticker(void *arg)
{
    (void)arg;
    while (!atomic_load(&tick_stop)) {
        gmp_sleep(200 * US);
        atomic_fetch_add(&ticks, 1);
    }
}

static void in_syscall(void *arg)
{
    (void)arg;
    char c;
    if (GMP_SYSCALL(read(sys_pipe[0], &c, 1)) == 1)
        atomic_store(&sys_done, 1);
}

static void spawned(void *arg)
{
    (void)arg;
    atomic_store(&spawned_ran, 1);
}

static bool pipe_drained(void *arg)
{
    (void)arg;
    int n = -1;
    return ioctl(sys_pipe[0], FIONREAD, &n) == 0 && n == 0;
}

static bool all_woke(void *arg)
{
    (void)arg;
    return atomic_load(&parked_got) == 42 && atomic_load(&sys_done) == 1 &&
           atomic_load(&spawned_ran) == 1;
}

static bool ticked(void *arg)
{
    return atomic_load(&ticks) > *(int64_t *)arg;
}

static void test_stw_thread_holds_wakeups(void **state)
{
    (void)state;
    int rounds = H_SLOW ? 3 : 10;
    for (int r = 0; r < rounds; r++) {
        park_ch = gmp_chan_make(sizeof(int64_t), 1);   /* never blocks the stopper */
        assert_non_null(park_ch);
        assert_int_equal(pipe(sys_pipe), 0);
        atomic_store(&parked_got, 0);
        atomic_store(&sys_done, 0);
        atomic_store(&spawned_ran, 0);
        atomic_store(&ticks, 0);
        atomic_store(&tick_stop, 0);
        assert_int_equal(gmp_go(parked, NULL), 0);
        assert_int_equal(gmp_go(in_syscall, NULL), 0);
        assert_int_equal(gmp_go(ticker, NULL), 0);
        int64_t zero = 0;
        assert_int_equal(h_wait_until(ticked, &zero, "a tick"), 0);

        assert_int_equal(gmp_stop_world(), 0);
        int64_t t0 = atomic_load(&ticks);
        /* The reader is in read(2) or stopped before it: let it return
         * only if it is in it, which h_still after the write tells. */
        int64_t v = 42;
        assert_int_equal(gmp_chan_send(park_ch, &v), 0);
        assert_int_equal(gmp_go(spawned, NULL), 0);
        assert_int_equal(write(sys_pipe[1], "x", 1), 1);
        assert_int_equal(h_still(), 0);
        assert_int_equal(atomic_load(&parked_got), 0);
        assert_int_equal(atomic_load(&spawned_ran), 0);
        assert_int_equal(atomic_load(&sys_done), 0);
        assert_int_equal(atomic_load(&ticks), t0);
        assert_int_equal(gmp_start_world(), 0);

        assert_int_equal(h_wait_until(all_woke, NULL,
                                      "every goroutine woken while stopped "
                                      "ran"), 0);
        assert_int_equal(h_wait_until(ticked, &t0, "a tick after"), 0);
        assert_true(pipe_drained(NULL));
        atomic_store(&tick_stop, 1);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(park_ch);
        close(sys_pipe[0]);
        close(sys_pipe[1]);
    }
}

/* ---- Stopped from a goroutine ---------------------------------------------- */

static gmp_wg_t ctl_wg;

static void controller(void *arg)
{
    int rounds = (int)(intptr_t)arg;
    for (int r = 0; r < rounds; r++) {
        G_CHECK(gmp_stop_world() == 0);
        int64_t snap[MAXSPIN];
        spin_snap(snap);
        for (int i = 0; i < 1000; i++)
            gmp_yield();            /* returns at once: nobody else runs */
        G_CHECK(spin_same(snap));
        G_CHECK(gmp_stop_world() == GMP_EBUSY);
        G_CHECK(gmp_start_world() == 0);
        G_CHECK(gmp_start_world() == GMP_EPERM);
        while (!spinners_all_ran(snap))
            gmp_yield();
    }
    gmp_wg_done(&ctl_wg);
}

static void test_stw_goroutine_stops_spinners(void **state)
{
    int procs = nprocs(state);
    bad_reset();
    spin_start(procs + 1, false);
    gmp_wg_add(&ctl_wg, 1);
    assert_int_equal(gmp_go(controller,
                            (void *)(intptr_t)(procs == 1 ? ROUNDS / 5
                                                          : ROUNDS)), 0);
    gmp_wg_wait(&ctl_wg);
    spin_end();
    ASSERT_NO_BAD();
}

/* ---- Several stoppers ------------------------------------------------------- */

static _Atomic int inside;
static _Atomic int64_t turns;

static void one_turn(void)
{
    G_CHECK(gmp_stop_world() == 0);
    G_CHECK(atomic_fetch_add(&inside, 1) == 0);
    int64_t snap[MAXSPIN];
    spin_snap(snap);
    for (volatile int i = 0; i < 2000; i++)
        ;
    G_CHECK(spin_same(snap));
    atomic_fetch_sub(&inside, 1);
    atomic_fetch_add(&turns, 1);
    G_CHECK(gmp_start_world() == 0);
}

static void stopper_g(void *arg)
{
    for (int r = 0; r < (int)(intptr_t)arg; r++) {
        one_turn();
        gmp_yield();
    }
    gmp_wg_done(&ctl_wg);
}

static void stopper_t(void *arg)
{
    for (int r = 0; r < (int)(intptr_t)arg; r++)
        one_turn();
}

static void test_stw_stoppers_take_turns(void **state)
{
    int procs = nprocs(state);
    int rounds = procs == 1 ? ROUNDS / 5 : ROUNDS;
    bad_reset();
    atomic_store(&turns, 0);
    spin_start(procs, false);
    gmp_wg_add(&ctl_wg, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gmp_go(stopper_g, (void *)(intptr_t)rounds), 0);
    struct th t;
    th_start(&t, stopper_t, (void *)(intptr_t)rounds);
    th_join(&t);
    gmp_wg_wait(&ctl_wg);
    spin_end();
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&turns), 4 * rounds);
}

/* ---- Misuse ---------------------------------------------------------------- */

static _Atomic int g_start_err, g_bracket_err;

static void start_from_other(void *arg)
{
    (void)arg;
    atomic_store(&g_start_err, gmp_start_world());
    gmp_syscall_enter();
    atomic_store(&g_bracket_err, gmp_stop_world());
    gmp_syscall_exit();
    gmp_wg_done(&ctl_wg);
}

static void test_stw_misuse(void **state)
{
    (void)state;
    assert_int_equal(gmp_start_world(), GMP_EPERM);
    assert_int_equal(gmp_stop_world(), 0);
    assert_int_equal(gmp_stop_world(), GMP_EBUSY);
    assert_int_equal(gmp_shutdown(), GMP_EBUSY);
    assert_int_equal(gmp_start_world(), 0);
    assert_int_equal(gmp_start_world(), GMP_EPERM);

    /* A goroutine cannot start a world a thread stopped; inside a bracket
     * it cannot stop one (it holds no P to keep). */
    atomic_store(&g_start_err, 1);
    atomic_store(&g_bracket_err, 1);
    gmp_wg_add(&ctl_wg, 1);
    assert_int_equal(gmp_go(start_from_other, NULL), 0);
    gmp_wg_wait(&ctl_wg);
    assert_int_equal(atomic_load(&g_start_err), GMP_EPERM);
    assert_int_equal(atomic_load(&g_bracket_err), GMP_EPERM);
}

static void test_stw_without_runtime(void **state)
{
    (void)state;
    assert_int_equal(gmp_stop_world(), GMP_EPERM);
    assert_int_equal(gmp_start_world(), GMP_EPERM);
}

int main(void)
{
    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_stw_without_runtime),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_stw_misuse),
        cmocka_unit_test(test_stw_thread_stops_spinners),
        cmocka_unit_test(test_stw_thread_holds_wakeups),
        cmocka_unit_test(test_stw_goroutine_stops_spinners),
        cmocka_unit_test(test_stw_stoppers_take_turns),
    };
    return cmocka_run_group_tests_name("stw, no runtime", none, NULL, NULL)
         + cmocka_run_group_tests_name("stw procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("stw procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("stw procs=4", t, h_up_4, h_down);
}
