/*
 * test_timer.c - timers: gmp_sleep and the timer machinery under it, at
 * procs 1, 2 and 4, in goroutines and on plain threads (the timed waits
 * of select and cond: test_timedwait.c):
 *   - sleepers wake in the order of their deadlines, across goroutines
 *     and Ps;
 *   - a sleep is never shorter than asked, by gmp_nanotime and by
 *     CLOCK_MONOTONIC, for small and odd durations, many times;
 *   - 10,000 sleepers at once all wake, each exactly once;
 *   - durations <= 0 return at once; a goroutine in gmp_sleep(INT64_MAX)
 *     neither wakes early nor holds up gmp_main's return (forked child);
 *     on a plain thread gmp_sleep sleeps that thread, with or without a
 *     runtime;
 *   - timers fire while every P is busy with goroutines that yield, and
 *     with goroutines that spin without a runtime call (preemption); and
 *     with preemption off, on a P held by such a spinner while the other
 *     Ps stay busy (other Ps run timers their own P left overdue);
 *   - a new, earlier timer wakes an idle poller that sleeps for a later
 *     one: a 20 ms sleeper started while a 2 s one sleeps (every P idle)
 *     wakes before the 2 s one is even due;
 *   - the coarse-clock check (timer.h) never judges a time that has come
 *     to be in the future; and with a timer ten minutes off on the P,
 *     10,000 yields, and at procs=1 10,000 channel round trips, make
 *     almost no precise clock reads (counted by a clock put in the
 *     runtime's place; not in sanitized builds); a clock_gettime the
 *     program defines is never the runtime's;
 *   - deadlock detection with timers (forked children): goroutines asleep
 *     on timers, or waiting with a timeout, are no deadlock; once every
 *     timer has fired or been cancelled by an early wake and main blocks
 *     for ever, it is one.
 *
 * No assertion bounds how long anything took from above. Durations are
 * checked from below only ("no earlier than"), and orders only between
 * wakes whose deadlines lie far apart (30 ms in the order test, 2 s
 * against 20 ms in the idle-poller test).
 *
 * Goroutines and helper threads only record (atomics, and G_CHECK for a
 * failed expectation); the test thread waits and asserts. The forking
 * tests run first, while no runtime runs in this process.
 */
#include "harness.h"

#include <pthread.h>

#include "internal.h"

/* ---- Forked children: gmp_main, deadlock detection ---------------------- */

/* A goroutine asleep for INT64_MAX (and for other durations whose
 * deadline overflows int64_t) does not wake while the others come and
 * go, and does not keep gmp_main from returning once main returns: it is
 * abandoned, as Go abandons goroutines when main returns. */
static _Atomic int64_t huge_in, huge_woke;
static gmp_wg_t huge_wg;

static void huge_sleeper(void *arg)
{
    int64_t ns = *(const int64_t *)arg;
    atomic_fetch_add(&huge_in, 1);
    gmp_sleep(ns);
    atomic_fetch_add(&huge_woke, 1);
    printf("woke from %lld\n", (long long)ns);
    fflush(stdout);
}

static void huge_worker(void *arg)
{
    gmp_sleep((int64_t)(intptr_t)arg * MS);
    gmp_wg_done(&huge_wg);
}

static const int64_t huge_ns[] = {INT64_MAX, INT64_MAX - 1, INT64_MAX / 2,
                                  INT64_MAX - 1000000000LL};

static void huge_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++)
        gmp_go(huge_sleeper, (void *)&huge_ns[i]);
    while (atomic_load(&huge_in) < 4)
        gmp_yield();
    gmp_yield();
    /* Others sleep and finish meanwhile: the timer heap turns over. */
    gmp_wg_add(&huge_wg, 40);
    for (int i = 0; i < 40; i++)
        gmp_go(huge_worker, (void *)(intptr_t)(1 + i % 7));
    gmp_wg_wait(&huge_wg);
    gmp_sleep(30 * MS);
    if (atomic_load(&huge_woke) == 0 && gmp_num_goroutines() >= 5)
        printf("ok\n");
    else
        printf("bad: woke %lld, goroutines %lld\n",
               (long long)atomic_load(&huge_woke),
               (long long)gmp_num_goroutines());
    fflush(stdout);
}

static void test_sleep_forever_abandoned_when_main_returns(void **state)
{
    for (int procs = 1; procs <= 2; procs++) {
        atomic_store(&huge_in, 0);
        atomic_store(&huge_woke, 0);
        expect_clean_with(huge_main, NULL, procs);
    }
}

/* A goroutine asleep on a timer is no deadlock: main waits on a channel
 * that a sleeper sends on when it wakes. */
static void nodl_sleeper(void *arg)
{
    gmp_sleep(100 * MS);
    int v = 42;
    gmp_chan_send(arg, &v);
}

static void nodl_sleep_main(void *arg)
{
    (void)arg;
    int v = 0;
    gmp_chan_t *c = gmp_chan_make(sizeof v, 0);
    gmp_go(nodl_sleeper, c);
    if (gmp_chan_recv(c, &v) == 0 && v == 42)
        printf("ok\n");
}

static void test_timer_no_deadlock_while_goroutine_sleeps(void **state)
{
    expect_clean_with(nodl_sleep_main, NULL, 1);
    expect_clean_with(nodl_sleep_main, NULL, 2);
}

/* main alone, waiting with timeouts that nothing but the timer ends. */
static void nodl_timeouts_main(void *arg)
{
    (void)arg;
    gmp_chan_t *c = gmp_chan_make(sizeof(int), 0);
    gmp_mutex_t mu = GMP_MUTEX_INIT;
    gmp_cond_t cv = GMP_COND_INIT;
    int v = 0;
    gmp_case_t k = {c, GMP_RECV, &v, 0};
    gmp_sleep(50 * MS);
    int r1 = gmp_select(NULL, 0, 50 * MS);
    int r2 = gmp_select(&k, 1, 50 * MS);
    gmp_mutex_lock(&mu);
    int r3 = gmp_cond_timedwait(&cv, &mu, 50 * MS);
    gmp_mutex_unlock(&mu);
    if (r1 == GMP_ETIMEDOUT && r2 == GMP_ETIMEDOUT && r3 == GMP_ETIMEDOUT)
        printf("ok\n");
    else
        printf("bad: %d %d %d\n", r1, r2, r3);
}

static void test_timer_no_deadlock_while_main_waits_with_timeout(void **state)
{
    expect_clean_with(nodl_timeouts_main, NULL, 1);
    expect_clean_with(nodl_timeouts_main, NULL, 2);
}

/* Timers that fired leave nothing behind: once they are done and main
 * blocks for ever, that is a deadlock. */
static gmp_wg_t fired_wg;

static void fired_sleeper(void *arg)
{
    gmp_sleep((int64_t)(intptr_t)arg * MS);
    gmp_wg_done(&fired_wg);
}

static void dl_fired_main(void *arg)
{
    (void)arg;
    gmp_chan_t *c = gmp_chan_make(sizeof(int), 0);
    gmp_mutex_t mu = GMP_MUTEX_INIT;
    gmp_cond_t cv = GMP_COND_INIT;
    gmp_wg_add(&fired_wg, 8);
    for (int i = 0; i < 8; i++)
        gmp_go(fired_sleeper, (void *)(intptr_t)(1 + i * 3));
    gmp_wg_wait(&fired_wg);
    gmp_sleep(5 * MS);
    gmp_select(NULL, 0, 5 * MS);
    gmp_mutex_lock(&mu);
    gmp_cond_timedwait(&cv, &mu, 5 * MS);
    gmp_mutex_unlock(&mu);
    announce("chan receive");
    gmp_chan_recv(c, NULL);
    printf("recv returned\n");
}

static void test_timer_deadlock_once_timers_fired(void **state)
{
    expect_deadlock(dl_fired_main);
}

/* A select and a cond wait with a 1 s timeout, both woken early by a
 * goroutine; then main blocks for ever: a deadlock, reported although
 * timers were pending a moment ago. Not necessarily at once: an M may
 * still sleep in the poller until the cancelled timeouts would have
 * expired (so may Go's), which is why they are short. A timer left
 * behind after the early wake would run on a select or wait that has
 * returned. */
static struct {
    gmp_chan_t *c;
    gmp_mutex_t mu;
    gmp_cond_t cv;
    int flag;                       /* under mu */
} early;

static void early_waker(void *arg)
{
    (void)arg;
    int v = 7;
    gmp_chan_send(early.c, &v);
    /* main holds the mutex until its timed cond wait releases it. */
    gmp_mutex_lock(&early.mu);
    early.flag = 1;
    gmp_cond_signal(&early.cv);
    gmp_mutex_unlock(&early.mu);
}

static void dl_early_main(void *arg)
{
    (void)arg;
    const int64_t tmo = 1000 * MS;
    int v = 0;
    early.c = gmp_chan_make(sizeof v, 0);
    gmp_chan_t *never = gmp_chan_make(sizeof v, 0);
    gmp_go(early_waker, NULL);
    gmp_mutex_lock(&early.mu);
    gmp_case_t k = {early.c, GMP_RECV, &v, 0};
    if (gmp_select(&k, 1, tmo) != 0 || v != 7)
        return;
    while (!early.flag)
        if (gmp_cond_timedwait(&early.cv, &early.mu, tmo) != 0)
            break;
    gmp_mutex_unlock(&early.mu);
    announce("chan receive");
    gmp_chan_recv(never, NULL);
    printf("recv returned\n");
}

static void test_timer_deadlock_after_timed_waits_woken_early(void **state)
{
    expect_deadlock(dl_early_main);
}

/* ---- Sleep: order ------------------------------------------------------- */

#define ORD_N    6
#define ORD_STEP (30 * MS)

static struct {
    int64_t base;           /* sleeper k is due at base + (k+1) * step */
    int perm[ORD_N];
    _Atomic int64_t seq, done, late;
    _Atomic int64_t rank[ORD_N];
} ord;

static void ord_sleeper(void *arg)
{
    int k = (int)(intptr_t)arg;
    int64_t when = ord.base + (k + 1) * ORD_STEP;
    /* Asleep only near or after the first deadline: the round says
     * nothing about order (an emulated CPU can start a goroutine that
     * late). Half a step covers a stall between this and the sleep. */
    if (gmp_nanotime() >= ord.base + ORD_STEP / 2)
        atomic_store(&ord.late, 1);
    gmp_sleep(when - gmp_nanotime());
    int64_t woke = gmp_nanotime();
    G_CHECK(woke >= when);
    atomic_store(&ord.rank[k], atomic_fetch_add(&ord.seq, 1));
    /* Nor a round in which a sleeper got its CPU half a step late (a
     * host that starved the process): the next one may have overtaken
     * it between its wake-up and its rank. */
    if (gmp_nanotime() - when >= ORD_STEP / 2 || woke - when >= ORD_STEP / 2)
        atomic_store(&ord.late, 1);
    atomic_fetch_add(&ord.done, 1);
}

static void ord_spawner(void *arg)
{
    (void)arg;
    for (int i = 0; i < ORD_N; i++)
        G_CHECK(gmp_go(ord_sleeper, (void *)(intptr_t)ord.perm[i]) == 0);
}

/* Sleepers started in a shuffled order, from the test thread (global
 * queue: they spread over the Ps) or from one goroutine (its P), wake in
 * the order of their deadlines, which lie 30 ms apart. A round in which
 * one of them went to sleep near or after the first deadline is run
 * again. */
static void test_sleep_wakes_in_deadline_order(void **state)
{
    bad_reset();
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int round = 0;
    for (int tries = 0; round < 4 && tries < 40; tries++) {
        atomic_store(&ord.seq, 0);
        atomic_store(&ord.done, 0);
        atomic_store(&ord.late, 0);
        for (int i = 0; i < ORD_N; i++) {
            atomic_store(&ord.rank[i], -1);
            ord.perm[i] = i;
        }
        for (int i = ORD_N - 1; i > 0; i--) {
            int j = (int)(xorshift(&x) % (uint64_t)(i + 1));
            int t = ord.perm[i];
            ord.perm[i] = ord.perm[j];
            ord.perm[j] = t;
        }
        ord.base = gmp_nanotime() + 5 * MS;
        if (round & 1)
            assert_int_equal(gmp_go(ord_spawner, NULL), 0);
        else
            for (int i = 0; i < ORD_N; i++)
                assert_int_equal(
                    gmp_go(ord_sleeper, (void *)(intptr_t)ord.perm[i]), 0);
        assert_int_equal(h_wait(&ord.done, ORD_N), 0);
        if (atomic_load(&ord.late))
            continue;
        for (int k = 0; k < ORD_N; k++)
            assert_int_equal(atomic_load(&ord.rank[k]), k);
        round++;
    }
    assert_int_equal(round, 4);
    h_assert_quiet_timers();
}

/* ---- Sleep: never shorter than asked ------------------------------------ */

static const int64_t odd_ns[] = {1,      2,      3,       999,     1000,
                                 1001,   4999,   12345,   65537,   99999,
                                 100003, 333333, 1000003, 1999999};
#define ODD_N ((int)(sizeof odd_ns / sizeof odd_ns[0]))

static struct {
    _Atomic int64_t done, sleeps, shorts;
} ns_;

static void sleep_odd(int seed, int iters)
{
    for (int i = 0; i < iters; i++) {
        int64_t ns = odd_ns[(i * 7 + seed) % ODD_N];
        struct span s = span_start();
        gmp_sleep(ns);
        bool ok = span_at_least(s, ns);
        if (!ok)
            atomic_fetch_add(&ns_.shorts, 1);
        G_CHECK(ok);
        atomic_fetch_add(&ns_.sleeps, 1);
    }
}

#define ODD_ITERS (H_SLOW ? 28 : 280)

static void odd_sleeper(void *arg)
{
    sleep_odd((int)(intptr_t)arg, ODD_ITERS);
    atomic_fetch_add(&ns_.done, 1);
}

/* Goroutines (and two plain threads, and the test thread) sleep every
 * duration of the table many times; each sleep lasted at least what it
 * asked, by both clocks. */
static void test_sleep_never_shorter_than_asked(void **state)
{
    bad_reset();
    atomic_store(&ns_.done, 0);
    atomic_store(&ns_.sleeps, 0);
    atomic_store(&ns_.shorts, 0);
    struct th t[2];
    for (int i = 0; i < 8; i++)
        assert_int_equal(gmp_go(odd_sleeper, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 2; i++)
        th_start(&t[i], odd_sleeper, (void *)(intptr_t)(100 + i));
    sleep_odd(55, ODD_ITERS / 4);
    assert_int_equal(h_wait(&ns_.done, 10), 0);
    for (int i = 0; i < 2; i++)
        th_join(&t[i]);
    assert_int_equal(atomic_load(&ns_.shorts), 0);
    assert_int_equal(atomic_load(&ns_.sleeps), 10 * ODD_ITERS + ODD_ITERS / 4);
    h_assert_quiet_timers();
}

/* ---- Sleep: many sleepers ----------------------------------------------- */

static struct {
    _Atomic int64_t woke, spawned;
} many;

static int64_t many_ns(long i)
{
    return (1 + (i * 7919) % 20) * MS + i % 1000;
}

static void many_sleeper(void *arg)
{
    int64_t ns = many_ns((long)(intptr_t)arg);
    struct span s = span_start();
    gmp_sleep(ns);
    G_CHECK(span_at_least(s, ns));
    atomic_fetch_add(&many.woke, 1);
}

static void many_spawner(void *arg)
{
    long n = (long)(intptr_t)arg;
    for (long i = n / 2; i < n; i++)
        if (gmp_go(many_sleeper, (void *)(intptr_t)i) == 0)
            atomic_fetch_add(&many.spawned, 1);
}

/* 10,000 goroutines asleep at once, with deadlines spread over 20 ms: all
 * wake, each once, none early. Half are started by the test thread, half
 * by a goroutine. */
static void test_sleep_many_sleepers_all_wake(void **state)
{
    bad_reset();
    long n = H_LIVE(10000L);
    atomic_store(&many.woke, 0);
    atomic_store(&many.spawned, 0);
    assert_int_equal(gmp_go(many_spawner, (void *)(intptr_t)n), 0);
    for (long i = 0; i < n / 2; i++) {
        assert_int_equal(gmp_go(many_sleeper, (void *)(intptr_t)i), 0);
        atomic_fetch_add(&many.spawned, 1);
    }
    assert_int_equal(h_wait(&many.woke, n), 0);
    h_assert_quiet_timers();
    assert_int_equal(atomic_load(&many.spawned), n);
    assert_int_equal(atomic_load(&many.woke), n);
    ASSERT_NO_BAD();
}

/* ---- Sleep: zero, negative, plain threads ------------------------------- */

/* gmprt.h: ns <= 0 returns at once; -1 is no GMP_FOREVER here. */
static const int64_t nonpos[] = {0, -1, -5, -1000000000LL, INT64_MIN};

static void nonpos_sleeper(void *arg)
{
    (void)arg;
    for (int i = 0; i < 500; i++)
        for (int k = 0; k < 5; k++)
            gmp_sleep(nonpos[k]);
}

/* Goroutines, a plain thread and the test thread call gmp_sleep with 0
 * and negative durations many times: every call returns (the wait's
 * deadline turns one that does not into a failure). */
static void test_sleep_zero_and_negative_return(void **state)
{
    assert_int_equal(h_everywhere(nonpos_sleeper, NULL,
                                  gmp_procs() > 0 ? 4 : 0), 0);
    h_assert_quiet_timers();
}

static _Atomic int64_t pt_bad;

static void plain_sleeps(void *arg)
{
    (void)arg;
    static const int64_t d[] = {1, 1000, 1000000, 2000001, 7 * MS};
    if (gmp_id() != 0)
        atomic_fetch_add(&pt_bad, 1);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 5; k++) {
            struct span s = span_start();
            gmp_sleep(d[k]);
            if (!span_at_least(s, d[k]))
                atomic_fetch_add(&pt_bad, 1);
        }
}

/* gmp_sleep on a plain thread (the test thread and a new one) sleeps that
 * thread at least as long; with or without a runtime running. */
static void test_sleep_plain_thread(void **state)
{
    atomic_store(&pt_bad, 0);
    assert_int_equal(h_everywhere(plain_sleeps, NULL, 0), 0);
    assert_int_equal(atomic_load(&pt_bad), 0);
}

/* ---- Timers while the Ps are busy --------------------------------------- */

static struct {
    _Atomic int stop;
    _Atomic int64_t started, done, spins;
} busy;

static void busy_yielder(void *arg)
{
    (void)arg;
    atomic_fetch_add(&busy.started, 1);
    while (!atomic_load(&busy.stop))
        gmp_yield();
    atomic_fetch_add(&busy.done, 1);
}

static void busy_spinner(void *arg)
{
    (void)arg;
    atomic_fetch_add(&busy.started, 1);
    /* No runtime call: only preemption takes the P from it. */
    while (!atomic_load_explicit(&busy.stop, memory_order_relaxed))
        atomic_fetch_add_explicit(&busy.spins, 1, memory_order_relaxed);
    atomic_fetch_add(&busy.done, 1);
}

static void busy_sleeper(void *arg)
{
    (void)arg;
    struct span s = span_start();
    gmp_sleep(20 * MS);
    G_CHECK(span_at_least(s, 20 * MS));
    atomic_store(&busy.stop, 1);
    atomic_fetch_add(&busy.done, 1);
}

static void busy_reset(void)
{
    atomic_store(&busy.stop, 0);
    atomic_store(&busy.started, 0);
    atomic_store(&busy.done, 0);
    atomic_store(&busy.spins, 0);
}

/* Waits for the busy goroutines and the sleeper; on a hang it stops the
 * busy ones first, so that one failure does not leave them running into
 * the tests after it. */
static int busy_wait(int64_t n)
{
    int rc = h_wait(&busy.done, n);
    if (rc != 0) {
        atomic_store(&busy.stop, 1);
        h_wait(&busy.done, n);
    }
    return rc;
}

/* Goroutines yield in a loop until a sleeper wakes, one per P (each P's
 * own queue empty: a yield finds only itself to run again) or two per P:
 * the run queues are never empty, and the timer must still fire. */
static void test_sleep_fires_while_ps_yield(void **state)
{
    bad_reset();
    int procs = h_env_procs(state);
    for (int round = 0; round < 4; round++) {
        int n = (round & 1) ? 2 * procs : procs;
        busy_reset();
        for (int i = 0; i < n; i++)
            assert_int_equal(gmp_go(busy_yielder, NULL), 0);
        assert_int_equal(h_wait(&busy.started, n), 0);
        assert_int_equal(gmp_go(busy_sleeper, NULL), 0);
        assert_int_equal(busy_wait(n + 1), 0);
    }
    h_assert_quiet_timers();
}

/* As many goroutines as Ps spin without a runtime call until a sleeper
 * wakes: only preemption by signal lets the sleeper start and its timer
 * run. Needs preemption by signal (x86-64; not under TSan, in a static
 * binary or with asyncpreemptoff=1, gmprt.h). */
static void test_sleep_fires_while_ps_spin(void **state)
{
#if defined(H_TSAN) || !defined(__x86_64__)
    skip();
#endif
    SKIP_IF_STATIC("no preemption by signal");
    const char *dbg = getenv("GMP_DEBUG");
    if (dbg && strstr(dbg, "asyncpreemptoff=1"))
        skip();
    bad_reset();
    int procs = h_env_procs(state);
    for (int round = 0; round < 2; round++) {
        busy_reset();
        assert_int_equal(gmp_go(busy_sleeper, NULL), 0);
        for (int i = 0; i < procs; i++)
            assert_int_equal(gmp_go(busy_spinner, NULL), 0);
        assert_int_equal(busy_wait(procs + 1), 0);
    }
    h_assert_quiet_timers();
}

/* ---- Timers of a P whose M never schedules ------------------------------ */

#define STUCK_SLEEPERS 64           /* per P */

static struct {
    int64_t sleep_ns;               /* bound before the sleepers start */
    _Atomic int64_t in, woke;
} stuck;

static void stuck_sleeper(void *arg)
{
    (void)arg;
    struct span s = span_start();
    atomic_fetch_add(&stuck.in, 1);
    gmp_sleep(stuck.sleep_ns);
    G_CHECK(span_at_least(s, stuck.sleep_ns));
    atomic_fetch_add(&stuck.woke, 1);
}

/* Starts the spinner, which goes to this P's runnext, then sleeps: the
 * P runs the spinner next, its timer on it. */
static void stuck_trap(void *arg)
{
    G_CHECK(gmp_go(busy_spinner, NULL) == 0);
    stuck_sleeper(arg);
}

/* One try of the test below with sleeps of sleep_ns. Returns 1 when the
 * trap was not set before the first timer was due (a machine too slow
 * for sleep_ns: the try shows nothing), else 0 or -1 from the wait. */
static int stuck_try(int procs, int64_t sleep_ns)
{
    int64_t nsleep = STUCK_SLEEPERS * procs + 1, nbusy = 2 * procs + 1;
    stuck.sleep_ns = sleep_ns;
    atomic_store(&stuck.in, 0);
    atomic_store(&stuck.woke, 0);
    busy_reset();
    for (int64_t i = 1; i < nbusy; i++)
        assert_int_equal(gmp_go(busy_yielder, NULL), 0);
    assert_int_equal(h_wait(&busy.started, nbusy - 1), 0);
    int64_t t0 = gmp_nanotime();    /* no sleeper is due before t0 + sleep */
    for (int64_t i = 1; i < nsleep; i++)
        assert_int_equal(gmp_go(stuck_sleeper, NULL), 0);
    /* Every sleeper in its sleep, none left in a queue that the trapped
     * P would hold. */
    assert_int_equal(h_wait(&stuck.in, nsleep - 1), 0);
    assert_int_equal(gmp_go(stuck_trap, NULL), 0);
    assert_int_equal(h_wait(&busy.started, nbusy), 0);
    /* The spinner runs. If no timer was due yet, none readied a sleeper
     * onto the trapped P's queue before it started. */
    int rc = gmp_nanotime() < t0 + sleep_ns ? h_wait(&stuck.woke, nsleep) : 1;
    atomic_store(&busy.stop, 1);
    assert_int_equal(busy_wait(nbusy), 0);
    assert_int_equal(h_wait(&stuck.woke, nsleep), 0);
    return rc;
}

/* Twice as many goroutines as Ps yield in a loop, so every P always has
 * work and none goes idle to steal timers. Sleepers, their timers on
 * whichever Ps ran them; once all sleep, a goroutine starts one that
 * spins without a runtime call and sleeps, so that its P runs the
 * spinner with its timer on it. With async_preempt_off (this group) the
 * spinner is never preempted: that P never reaches a scheduling point
 * again. The sleepers with timers there wake only because a busy P runs
 * timers that their own P has left overdue (sched.c, rescue_timers);
 * then everything stops. A sleeper whose timer fired before the trap
 * was set could be queued on the trapped P, as it would be in Go: such
 * a try is repeated with longer sleeps. */
static void test_sleep_fires_while_a_p_never_schedules(void **state)
{
    bad_reset();
    int procs = h_env_procs(state);
    int rc = 1;
    for (int64_t ns = 100 * MS; rc == 1 && ns <= 6400 * MS; ns *= 4)
        rc = stuck_try(procs, ns);
    assert_int_equal(rc, 0);
    h_assert_quiet_timers();
}

/* ---- An earlier timer wakes the idle poller ----------------------------- */

#define EW_LONG  (2000 * MS)
#define EW_SHORT (20 * MS)

static struct {
    int64_t long_due;               /* the long sleeper's deadline, bound */
    gmp_chan_t *kick;
    _Atomic int64_t long_in, long_woke, short_woke, seq;
    _Atomic int64_t long_seq, short_seq[2], short_before_due[2];
} ew;

static void ew_long(void *arg)
{
    (void)arg;
    ew.long_due = gmp_nanotime() + EW_LONG;
    atomic_store(&ew.long_in, 1);
    gmp_sleep(EW_LONG);
    atomic_store(&ew.long_seq, atomic_fetch_add(&ew.seq, 1));
    atomic_store(&ew.long_woke, 1);
}

static void ew_short(void *arg)
{
    int i = (int)(intptr_t)arg;
    gmp_sleep(EW_SHORT);
    /* Before the long one is even due: its timer cannot have woken the
     * poller for us. */
    atomic_store(&ew.short_before_due[i], gmp_nanotime() < ew.long_due);
    atomic_store(&ew.short_seq[i], atomic_fetch_add(&ew.seq, 1));
    atomic_fetch_add(&ew.short_woke, 1);
}

static void ew_spawner(void *arg)
{
    (void)arg;
    G_CHECK(gmp_chan_recv(ew.kick, NULL) == 0);
    G_CHECK(gmp_go(ew_short, (void *)(intptr_t)1) == 0);
}

/* Every P idle, the only timer 2 s away, the process still (its threads
 * asleep in the kernel, the poller among them). A goroutine started then
 * sleeps 20 ms: it wakes while the 2 s sleeper is not yet due. Once with
 * the goroutine started by the test thread, once by a goroutine that the
 * test thread wakes through a channel. */
static void test_earlier_timer_wakes_idle_poller(void **state)
{
    bad_reset();
    atomic_store(&ew.long_in, 0);
    atomic_store(&ew.long_woke, 0);
    atomic_store(&ew.short_woke, 0);
    atomic_store(&ew.seq, 0);
    for (int i = 0; i < 2; i++)
        atomic_store(&ew.short_before_due[i], 0);
    ew.kick = h_chan(0, 0);
    assert_int_equal(gmp_go(ew_spawner, NULL), 0);
    assert_int_equal(gmp_go(ew_long, NULL), 0);
    assert_int_equal(h_wait(&ew.long_in, 1), 0);
    assert_int_equal(h_still(), 0);

    assert_int_equal(gmp_go(ew_short, (void *)(intptr_t)0), 0);
    assert_int_equal(h_wait(&ew.short_woke, 1), 0);
    assert_int_equal(atomic_load(&ew.short_before_due[0]), 1);
    assert_int_equal(atomic_load(&ew.long_woke), 0);

    assert_int_equal(h_still(), 0);
    assert_int_equal(gmp_chan_send(ew.kick, NULL), 0);
    assert_int_equal(h_wait(&ew.short_woke, 2), 0);
    assert_int_equal(atomic_load(&ew.short_before_due[1]), 1);

    assert_int_equal(h_wait(&ew.long_woke, 1), 0);
    assert_true(atomic_load(&ew.long_seq) > atomic_load(&ew.short_seq[0]));
    assert_true(atomic_load(&ew.long_seq) > atomic_load(&ew.short_seq[1]));
    h_assert_quiet_timers();
    gmp_chan_free(ew.kick);
    ASSERT_NO_BAD();
}

/* ---- What a pending timer costs a scheduling point ---------------------- */

/* Every scheduling point on a P with a pending timer asks whether it is
 * due. When the coarse clock shows it is far off (timer.h), the answer
 * must not cost a precise clock read: those are counted per thread by a
 * counting clock put in the runtime's place (gmp__clock_gettime, libc.h)
 * for the test. The counter is program code that the runtime calls
 * inside parks, which a preemption signal must not stop: these run with
 * asynchronous preemption off. Not in sanitized builds (their slower
 * runs make more reads for their own reasons).
 *
 * The program also defines clock_gettime itself, as a program may (a
 * time mock, a test double): the runtime's reads never reach it
 * (libc.h), which gmp_nanotime shows here, and every test of this file
 * shows too, since a signal that stopped a goroutine in that definition
 * inside a park would break the park (it did, before). */
#if !H_SANITIZED
#include <dlfcn.h>

static int (*libc_clock_gettime)(clockid_t, struct timespec *);
static _Atomic long program_reads;

__attribute__((constructor)) static void find_clock_gettime(void)
{
    *(void **)&libc_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
}

int clock_gettime(clockid_t c, struct timespec *ts)
{
    atomic_fetch_add(&program_reads, 1);
    if (libc_clock_gettime)
        return libc_clock_gettime(c, ts);
    return (int)syscall(SYS_clock_gettime, c, ts);
}

static void test_runtime_clock_is_not_the_programs(void **state)
{
    SKIP_IF_STATIC("the runtime reads the program's clock_gettime "
                   "(src/libc.h)");
    long r0 = atomic_load(&program_reads);
    struct timespec ts;
    assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
    assert_int_equal(atomic_load(&program_reads), r0 + 1);  /* it counts */
    for (int i = 0; i < 100; i++)
        (void)gmp_nanotime();
    assert_int_equal(atomic_load(&program_reads), r0 + 1);
}

static int (*runtime_clock)(clockid_t, struct timespec *);
static __thread long precise_reads;

static int counting_clock(clockid_t c, struct timespec *ts)
{
    if (c == CLOCK_MONOTONIC)
        precise_reads++;
    return runtime_clock(c, ts);
}

#define FAR_ROUNDS 10000
/* Reads a scheduler may make for its own reasons in FAR_ROUNDS rounds
 * (a wake-up of a sleeping M, a stop): far below one per round. */
#define FAR_READS_MAX 100

static struct {
    gmp_chan_t *ping, *pong;
    long reads_locked, reads_pingpong;
    bool interposed;
    _Atomic int64_t done;
} far;

static void noop_timer(struct gmp__timer *t)
{
    (void)t;
}

/* Adds t, due in ten minutes, to the caller's own P. */
static void far_timer_add(struct gmp__timer *t)
{
    memset(t, 0, sizeof *t);
    t->f = noop_timer;
    gmp_preempt_disable();              /* stay the owner of pp */
    struct p *pp = gmp__getm()->p;
    gmp__timer_reserve(pp);
    t->when = gmp_nanotime() + 600 * 1000000000LL;
    gmp__timer_add(pp, t);              /* far: no poller to wake early */
    gmp_preempt_enable();
}

static void far_echo(void *arg)
{
    (void)arg;
    long v;
    for (int i = 0; i < FAR_ROUNDS; i++) {
        G_CHECK(gmp_chan_recv(far.ping, &v) == 0);
        G_CHECK(gmp_chan_send(far.pong, &v) == 0);
    }
}

static void far_main(void *arg)
{
    (void)arg;
    struct gmp__timer t;
    /* Yields, locked to this thread so that every read is counted on
     * it. */
    gmp_lock_os_thread();
    far_timer_add(&t);
    long r0 = precise_reads;
    for (int i = 0; i < FAR_ROUNDS; i++)
        gmp_yield();
    far.reads_locked = precise_reads - r0;
    gmp__timer_del(&t);
    /* The count works: a read of the clock here is seen. */
    r0 = precise_reads;
    (void)gmp_nanotime();
    far.interposed = precise_reads == r0 + 1;
    gmp_unlock_os_thread();
    /* Channel round trips, each side parking in turn: at procs=1 both
     * goroutines run on this one thread. */
    if (gmp_procs() == 1) {
        far_timer_add(&t);
        G_CHECK(gmp_go(far_echo, NULL) == 0);
        r0 = precise_reads;
        for (long i = 0; i < FAR_ROUNDS; i++) {
            long v = -1;
            G_CHECK(gmp_chan_send(far.ping, &i) == 0);
            G_CHECK(gmp_chan_recv(far.pong, &v) == 0 && v == i);
        }
        far.reads_pingpong = precise_reads - r0;
        gmp__timer_del(&t);
    }
    atomic_store(&far.done, 1);
}

static void test_far_timer_costs_no_precise_clock_read(void **state)
{
    memset(&far, 0, sizeof far);
    far.ping = h_chan(sizeof(long), 0);
    far.pong = h_chan(sizeof(long), 0);
    runtime_clock = atomic_load(&gmp__clock_gettime);
    atomic_store(&gmp__clock_gettime, counting_clock);
    assert_int_equal(gmp_go(far_main, NULL), 0);
    assert_int_equal(h_wait(&far.done, 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
    atomic_store(&gmp__clock_gettime, runtime_clock);
    assert_true(far.interposed);
    if (far.reads_locked > FAR_READS_MAX ||
        far.reads_pingpong > FAR_READS_MAX)
        print_error("precise clock reads in %d rounds: %ld yielding, "
                    "%ld in round trips\n", FAR_ROUNDS, far.reads_locked,
                    far.reads_pingpong);
    assert_true(far.reads_locked <= FAR_READS_MAX);
    assert_true(far.reads_pingpong <= FAR_READS_MAX);
    gmp_chan_free(far.ping);
    gmp_chan_free(far.pong);
}
#endif

/* ---- A due timer asks the host to yield --------------------------------- */

/* gmp_should_yield says 1 as soon as a timer of the caller's P is due,
 * or a goroutine waits in its runnext, without waiting for sysmon's mark
 * (a host polling it, an interpreter's count hook, then wakes a sleeper
 * within one poll): a timer put on the P already due, in a fresh slice,
 * makes it say 1, and the yield runs the timer; so does a goroutine just
 * made, which the yield runs. At procs=1 only: with more Ps another M may run the timer
 * first (rescue_timers), and the answer would rightly be 0. */
static _Atomic int due_fired;
static _Atomic int64_t due_done;

static void due_fire(struct gmp__timer *t)
{
    (void)t;
    atomic_store(&due_fired, 1);
}

static void due_child(void *arg)
{
    (void)arg;
    atomic_store(&due_fired, 1);
}

static void due_sleeper(void *arg)
{
    (void)arg;
    gmp_sleep(20 * 1000);
    atomic_store(&due_fired, 1);
}

static void due_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        struct gmp__timer t;
        memset(&t, 0, sizeof t);
        t.f = due_fire;
        atomic_store(&due_fired, 0);
        gmp_yield();                    /* a fresh slice, unmarked */
        gmp_preempt_disable();          /* stay the owner of pp */
        struct p *pp = gmp__getm()->p;
        gmp__timer_reserve(pp);
        t.when = gmp_nanotime() - 1;
        gmp__timer_add(pp, &t);
        G_CHECK(gmp_should_yield() == 1);
        G_CHECK(!atomic_load(&due_fired));
        gmp_preempt_enable();
        gmp_yield();
        G_CHECK(atomic_load(&due_fired));
    }
    /* A goroutine just made waits in runnext: that asks too. */
    for (int i = 0; i < 100; i++) {
        atomic_store(&due_fired, 0);
        gmp_yield();
        G_CHECK(gmp_go(due_child, NULL) == 0);
        G_CHECK(gmp_should_yield() == 1);
        gmp_yield();
        G_CHECK(atomic_load(&due_fired));
    }
    /* A sleeper beside a loop that polls, as an interpreter's count hook
     * does: the first poll that finds its timer due yields to it. */
    for (int i = 0; i < 100; i++) {
        atomic_store(&due_fired, 0);
        G_CHECK(gmp_go(due_sleeper, NULL) == 0);
        gmp_yield();                    /* it runs, and sleeps */
        while (!gmp_should_yield())
            ;
        gmp_yield();
        G_CHECK(atomic_load(&due_fired));
    }
    atomic_store(&due_done, 1);
}

static void test_should_yield_when_a_timer_is_due(void **state)
{
    (void)state;
    atomic_store(&due_done, 0);
    assert_int_equal(gmp_go(due_main, NULL), 0);
    assert_int_equal(h_wait(&due_done, 1), 0);
    h_assert_quiet_timers();
}

/* The coarse check never judges a time that has come to be still ahead:
 * a timer is never judged not due once it is. Its margin holds while the
 * coarse clock lags by less (timer.h); a VM whose vCPU the host stops for
 * longer leaves the coarse clock behind for as long (seen under
 * qemu-user), and the timer is then late by that stop, as every thread
 * is. The margin and the coarse clock are read just before each sample:
 * the check's own reads come no earlier (and the margin never shrinks),
 * so a sample judged ahead while that earlier read was within the margin
 * is the logic's fault, and one judged ahead while it lagged by more is a
 * stall, counted, not failed. (Reading the lag after the check instead
 * misjudges a stall that ends in between.) */
static void test_coarse_check_never_ahead(void **state)
{
    int n = H_SCALE(200000), stalls = 0;
    for (int i = 0; i < n; i++) {
        int64_t margin = atomic_load(&gmp__coarse_margin);
        int64_t before = gmp__coarse_read();
        int64_t now = gmp_nanotime();
        if (!gmp__timer_surely_before(now))
            continue;
        int64_t lag = now - before;
        if (lag >= margin) {
            stalls++;
            continue;
        }
        print_error("at %lld: judged in the future (coarse lag %lld ns)\n",
                    (long long)now, (long long)lag);
        fail();
    }
    if (stalls)
        print_message("%d of %d samples while the coarse clock stalled\n",
                      stalls, n);
    /* Stalls are the host's, and rare: 2.5% of samples with four qemu-user
     * runs of this test on two CPUs. Most samples must still test the
     * logic. */
    assert_true(stalls <= n / 10);
    /* Nor is the check vacuous where the system has a coarse clock: ten
     * seconds ahead is far enough for any tick. */
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0)
        assert_true(gmp__timer_surely_before(gmp_nanotime() +
                                             10 * 1000000000LL));
}

/* The margin starts at three ticks of the coarse clock, and a lag that
 * sysmon samples raises it to that lag and a tick more, never down, and
 * not past its bound: a longer lag is a stopped VM. */
static void test_coarse_margin_follows_the_lag(void **state)
{
    int64_t res = atomic_load(&gmp__coarse_res);
    int64_t m0 = atomic_load(&gmp__coarse_margin);
    if (res == 0) {
        assert_int_equal(m0, 0);
        skip();
    }
    assert_true(m0 >= 3 * res);
    /* A "now" lag ahead of a coarse reading c1: observe's own reading c2
     * lies in [c1, c3], so it sees a lag of at least lag - (c3 - c1) and
     * at most lag, within the bound. */
    int64_t lag = GMP_COARSE_MARGIN_MAX_NS - res;
    int64_t c1 = gmp__coarse_read();
    gmp__coarse_observe(c1 + lag);
    int64_t c3 = gmp__coarse_read();
    int64_t m1 = atomic_load(&gmp__coarse_margin);
    assert_true(m1 >= lag + res - (c3 - c1));
    assert_true(m1 > m0);
    gmp__coarse_observe(gmp_nanotime());
    assert_true(atomic_load(&gmp__coarse_margin) >= m1);
    gmp__coarse_observe(gmp_nanotime() + 2 * GMP_COARSE_MARGIN_MAX_NS);
    assert_true(atomic_load(&gmp__coarse_margin) <= GMP_COARSE_MARGIN_MAX_NS);
    atomic_store(&gmp__coarse_margin, m0);
}

int main(void)
{
    const struct CMUnitTest fork[] = {
        cmocka_unit_test(test_sleep_forever_abandoned_when_main_returns),
        cmocka_unit_test(test_timer_no_deadlock_while_goroutine_sleeps),
        cmocka_unit_test(test_timer_no_deadlock_while_main_waits_with_timeout),
        cmocka_unit_test(test_timer_deadlock_once_timers_fired),
        cmocka_unit_test(test_timer_deadlock_after_timed_waits_woken_early),
    };
    /* Plain threads only, no runtime: every blocking call works there. */
    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_sleep_zero_and_negative_return),
        cmocka_unit_test(test_sleep_plain_thread),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_sleep_wakes_in_deadline_order),
        cmocka_unit_test(test_sleep_never_shorter_than_asked),
        cmocka_unit_test(test_sleep_many_sleepers_all_wake),
        cmocka_unit_test(test_sleep_zero_and_negative_return),
        cmocka_unit_test(test_sleep_plain_thread),
        cmocka_unit_test(test_sleep_fires_while_ps_yield),
        cmocka_unit_test(test_sleep_fires_while_ps_spin),
        cmocka_unit_test(test_earlier_timer_wakes_idle_poller),
        cmocka_unit_test(test_coarse_check_never_ahead),
        cmocka_unit_test(test_coarse_margin_follows_the_lag),
#if !H_SANITIZED
        cmocka_unit_test(test_runtime_clock_is_not_the_programs),
#endif
    };
    const struct CMUnitTest nopreempt[] = {
        cmocka_unit_test(test_sleep_fires_while_a_p_never_schedules),
    };
    /* procs=1 only: see the test. */
    const struct CMUnitTest solo[] = {
        cmocka_unit_test(test_should_yield_when_a_timer_is_due),
    };
#if !H_SANITIZED
    /* Asynchronous preemption off: see the test. */
    const struct CMUnitTest reads[] = {
        cmocka_unit_test(test_far_timer_costs_no_precise_clock_read),
    };
#endif
    /* The forking tests first, while no runtime runs in this process. */
    return cmocka_run_group_tests_name("timer fork", fork, NULL, NULL)
         + cmocka_run_group_tests_name("timer no runtime", none, NULL, NULL)
         + cmocka_run_group_tests_name("timer procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("timer solo procs=1", solo, h_up_1,
                                       h_down)
         + cmocka_run_group_tests_name("timer procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("timer procs=4", t, h_up_4, h_down)
         + cmocka_run_group_tests_name("timer procs=2, async_preempt_off",
                                       nopreempt, h_up_nopreempt_2, h_down)
         + cmocka_run_group_tests_name("timer procs=4, async_preempt_off",
                                       nopreempt, h_up_nopreempt_4, h_down)
#if !H_SANITIZED
         + cmocka_run_group_tests_name("timer reads procs=1, no async",
                                       reads, h_up_nopreempt_1, h_down)
         + cmocka_run_group_tests_name("timer reads procs=2, no async",
                                       reads, h_up_nopreempt_2, h_down)
         + cmocka_run_group_tests_name("timer reads procs=4, no async",
                                       reads, h_up_nopreempt_4, h_down)
#endif
        ;
}
