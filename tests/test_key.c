/*
 * test_key.c - goroutine-local storage (gmp_key_*, gmp_{get,set}specific)
 * and locking a goroutine to its thread (gmp_lock_os_thread), at procs 1,
 * 2 and 4: values follow a goroutine across threads and stay its own,
 * destructors run once at exit with the value (and repeat pthread's way),
 * bad keys are refused, plain threads have tables of their own; a locked
 * goroutine keeps its thread through yields, channel and mutex waits,
 * sleeps and a syscall bracket while no other goroutine ever runs there,
 * locks nest, exiting while locked frees the thread, and a runtime with a
 * locked goroutine parked still stops (gmp_main) and still reports a
 * deadlock.
 *
 * Goroutines record (atomics, G_CHECK); the test thread waits, then
 * asserts. Thread changes of an unlocked goroutine are counted and
 * printed, never asserted: nothing promises a move. The one white-box
 * look is at the M's lockedg, to check the nesting count.
 */
#include "harness.h"

#include <sys/syscall.h>

#include "internal.h"

/* Goroutines that spin through yields until stop is set, so that a
 * yielding goroutine has somewhere to go and threads have work. Each
 * checks, every round, that it is not on the locked thread (locked_tid,
 * 0 while none is locked), with preemption off so that the thread it
 * compares is the one it runs on. */
static _Atomic int spin_stop;
static _Atomic long locked_tid;
static _Atomic int64_t spin_violations;
static _Atomic int64_t spin_rounds;
static _Atomic int64_t spin_done;

static void spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&spin_stop)) {
        gmp_preempt_disable();
        long t = (long)h_tid();
        long lt = atomic_load(&locked_tid);
        gmp_preempt_enable();
        if (lt != 0 && t == lt)
            atomic_fetch_add(&spin_violations, 1);
        atomic_fetch_add_explicit(&spin_rounds, 1, memory_order_relaxed);
        gmp_yield();
    }
    atomic_fetch_add(&spin_done, 1);
}

static int spinners_start(int n)
{
    atomic_store(&spin_stop, 0);
    atomic_store(&spin_violations, 0);
    atomic_store(&spin_rounds, 0);
    atomic_store(&spin_done, 0);
    atomic_store(&locked_tid, 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(gmp_go(spinner, NULL), 0);
    return n;
}

static void spinners_stop(int n)
{
    atomic_store(&spin_stop, 1);
    assert_int_equal(h_wait(&spin_done, n), 0);
}

/* ---- Keys ----------------------------------------------------------------- */

struct kc {
    gmp_key_t k1, k2;
    int iters;
    _Atomic int64_t done;
    _Atomic int64_t moved;          /* goroutines that changed threads */
    _Atomic int64_t moves;          /* thread changes seen, all told */
    gmp_wg_t wg;
};

/* A goroutine that never sets a key reads NULL for it, and so does one
 * that set another key. */
static void unset_g(void *arg)
{
    struct kc *c = arg;
    G_CHECK(gmp_getspecific(c->k1) == NULL);
    G_CHECK(gmp_getspecific(c->k2) == NULL);
    G_CHECK(gmp_setspecific(c->k2, &c->k2) == 0);
    G_CHECK(gmp_getspecific(c->k1) == NULL);
    G_CHECK(gmp_getspecific(c->k2) == &c->k2);
    G_CHECK(gmp_setspecific(c->k2, NULL) == 0);
    G_CHECK(gmp_getspecific(c->k2) == NULL);
    atomic_fetch_add(&c->done, 1);
}

static void test_key_unset_reads_null(void **state)
{
    struct kc c = {0};
    bad_reset();
    assert_int_equal(gmp_key_create(&c.k1, NULL), 0);
    assert_int_equal(gmp_key_create(&c.k2, NULL), 0);
    assert_int_not_equal(c.k1, 0);
    assert_int_not_equal(c.k1, c.k2);
    for (int i = 0; i < 8; i++)
        assert_int_equal(gmp_go(unset_g, &c), 0);
    assert_int_equal(h_wait(&c.done, 8), 0);
    ASSERT_NO_BAD();
    assert_int_equal(gmp_key_delete(c.k1), 0);
    assert_int_equal(gmp_key_delete(c.k2), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Sets its values, then yields, sleeps and passes a channel token many
 * times while spinners keep every thread busy: each time the values are
 * its own, whatever thread it is on. */
struct migr {
    struct kc *c;
    gmp_chan_t *ch;                 /* token passed between pairs */
    long id;
};

static void migrate_g(void *arg)
{
    struct migr *m = arg;
    struct kc *c = m->c;
    char mine1;                     /* a distinct address per goroutine */
    G_CHECK(gmp_setspecific(c->k1, &mine1) == 0);
    G_CHECK(gmp_setspecific(c->k2, (void *)(intptr_t)(m->id + 1)) == 0);
    long last = (long)h_tid(), moves = 0;
    for (int i = 0; i < c->iters; i++) {
        switch (i % 4) {
        case 0:
        case 1:
            gmp_yield();
            break;
        case 2:
            if (i % 64 == 2) {
                /* Long enough for sysmon to hand the P off: the
                 * goroutine may come back on another thread, even with
                 * one P. */
                (void)GMP_SYSCALL(usleep(200));     /* EINTR is fine */
            } else {
                gmp_sleep(1000);
            }
            break;
        case 3: {
            int v = 0;
            /* Pairs: even ids send, odd ids receive. */
            if (m->id % 2 == 0)
                G_CHECK(gmp_chan_send(m->ch, &v) == 0);
            else
                G_CHECK(gmp_chan_recv(m->ch, &v) == 0);
            break;
        }
        }
        G_CHECK(gmp_getspecific(c->k1) == &mine1);
        G_CHECK(gmp_getspecific(c->k2) == (void *)(intptr_t)(m->id + 1));
        long now = (long)h_tid();
        if (now != last)
            moves++;
        last = now;
    }
    if (moves)
        atomic_fetch_add(&c->moved, 1);
    atomic_fetch_add(&c->moves, moves);
    atomic_fetch_add(&c->done, 1);
}

static void test_key_values_follow_goroutine_across_threads(void **state)
{
    struct h_env *env = *state;
    struct kc c = {0};
    bad_reset();
    c.iters = (int)H_SCALE(4000);
    if (c.iters < 40)
        c.iters = 40;
    assert_int_equal(gmp_key_create(&c.k1, NULL), 0);
    assert_int_equal(gmp_key_create(&c.k2, NULL), 0);
    int nsp = spinners_start(2 * env->procs);
    enum { NG = 16 };
    struct migr m[NG];
    gmp_chan_t *ch[NG / 2];
    for (int i = 0; i < NG / 2; i++)
        assert_non_null(ch[i] = gmp_chan_make(sizeof(int), 0));
    for (int i = 0; i < NG; i++) {
        m[i] = (struct migr){&c, ch[i / 2], i};
        assert_int_equal(gmp_go(migrate_g, &m[i]), 0);
    }
    assert_int_equal(h_wait(&c.done, NG), 0);
    spinners_stop(nsp);
    ASSERT_NO_BAD();
    printf("procs=%d: %lld of %d goroutines changed threads, %lld moves "
           "in all\n", env->procs, (long long)atomic_load(&c.moved), NG,
           (long long)atomic_load(&c.moves));
    for (int i = 0; i < NG / 2; i++)
        gmp_chan_free(ch[i]);
    assert_int_equal(gmp_key_delete(c.k1), 0);
    assert_int_equal(gmp_key_delete(c.k2), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Many goroutines at once, each with its own values for three keys (one
 * made after the others, at a higher index: the table grows). */
struct many {
    gmp_key_t k[3];
    _Atomic int64_t done;
};

static struct many *g_many;

static void many_g(void *arg)
{
    struct many *c = g_many;
    uintptr_t id = (uintptr_t)arg;
    for (int j = 0; j < 3; j++)
        G_CHECK(gmp_setspecific(c->k[j], (void *)(id * 4 + (uintptr_t)j + 1))
                == 0);
    for (int r = 0; r < 4; r++) {
        gmp_yield();
        for (int j = 0; j < 3; j++)
            G_CHECK(gmp_getspecific(c->k[j]) ==
                    (void *)(id * 4 + (uintptr_t)j + 1));
    }
    atomic_fetch_add(&c->done, 1);
}

static void test_key_many_goroutines_distinct_values(void **state)
{
    static struct many c;
    memset(&c, 0, sizeof c);
    g_many = &c;
    bad_reset();
    gmp_key_t fill[20];
    assert_int_equal(gmp_key_create(&c.k[0], NULL), 0);
    assert_int_equal(gmp_key_create(&c.k[1], NULL), 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(gmp_key_create(&fill[i], NULL), 0);
    assert_int_equal(gmp_key_create(&c.k[2], NULL), 0);    /* index >= 22 */
    long n = H_LIVE(20000);
    for (long i = 0; i < n; i++)
        assert_int_equal(gmp_go(many_g, (void *)(uintptr_t)i), 0);
    assert_int_equal(h_wait(&c.done, n), 0);
    ASSERT_NO_BAD();
    for (int i = 0; i < 20; i++)
        assert_int_equal(gmp_key_delete(fill[i]), 0);
    for (int j = 0; j < 3; j++)
        assert_int_equal(gmp_key_delete(c.k[j]), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Destructors: once per value left non-NULL at exit, with that value;
 * none for a value cleared, or for a key without a destructor. Each
 * goroutine adds what it expects to the expected counts. */
static _Atomic int64_t d_calls, d_sum, d_want_calls, d_want_sum;
static gmp_key_t d_key, d_key2;

static void count_dtor(void *v)
{
    atomic_fetch_add(&d_calls, 1);
    atomic_fetch_add(&d_sum, (int64_t)(intptr_t)v);
    /* On the goroutine that owned it, its slot already cleared. */
    G_CHECK(gmp_getspecific(d_key) == NULL);
    G_CHECK(gmp_id() != 0);
}

struct dg {
    _Atomic int64_t done;
};

static void dtor_g(void *arg)
{
    struct dg *c = arg;
    intptr_t id = (intptr_t)gmp_id();
    G_CHECK(gmp_setspecific(d_key, (void *)id) == 0);
    gmp_yield();
    if (id % 2 == 0) {
        G_CHECK(gmp_setspecific(d_key, NULL) == 0);     /* no call */
    } else {
        atomic_fetch_add(&d_want_calls, 1);
        atomic_fetch_add(&d_want_sum, (int64_t)id);
    }
    G_CHECK(gmp_setspecific(d_key2, (void *)id) == 0);  /* no destructor */
    atomic_fetch_add(&c->done, 1);
}

static void test_key_destructors_run_once_at_exit(void **state)
{
    bad_reset();
    atomic_store(&d_calls, 0);
    atomic_store(&d_sum, 0);
    atomic_store(&d_want_calls, 0);
    atomic_store(&d_want_sum, 0);
    assert_int_equal(gmp_key_create(&d_key, count_dtor), 0);
    assert_int_equal(gmp_key_create(&d_key2, NULL), 0);
    struct dg c = {0};
    long n = H_LIVE(5000);
    for (long i = 0; i < n; i++)
        assert_int_equal(gmp_go(dtor_g, &c), 0);
    assert_int_equal(h_wait(&c.done, n), 0);
    assert_int_equal(h_wait_quiet(), 0);    /* every destructor has run */
    ASSERT_NO_BAD();
    assert_true(atomic_load(&d_want_calls) > 0);
    assert_int_equal(atomic_load(&d_calls), atomic_load(&d_want_calls));
    assert_int_equal(atomic_load(&d_sum), atomic_load(&d_want_sum));
    assert_int_equal(gmp_key_delete(d_key), 0);
    assert_int_equal(gmp_key_delete(d_key2), 0);
}

/* The same with values known in advance: value i+1 for goroutine i, so
 * the calls and their sum are exact. */
static _Atomic int64_t e_calls, e_sum;
static gmp_key_t e_key;

static void sum_dtor(void *v)
{
    atomic_fetch_add(&e_calls, 1);
    atomic_fetch_add(&e_sum, (int64_t)(intptr_t)v);
}

static void exact_g(void *arg)
{
    G_CHECK(gmp_setspecific(e_key, arg) == 0);
    gmp_yield();
    G_CHECK(gmp_getspecific(e_key) == arg);
}

static bool e_all(void *arg)
{
    return atomic_load(&e_calls) >= *(long *)arg;
}

static void test_key_destructor_gets_each_value_exactly_once(void **state)
{
    bad_reset();
    atomic_store(&e_calls, 0);
    atomic_store(&e_sum, 0);
    assert_int_equal(gmp_key_create(&e_key, sum_dtor), 0);
    long n = H_LIVE(10000);
    for (long i = 0; i < n; i++)
        assert_int_equal(gmp_go(exact_g, (void *)(intptr_t)(i + 1)), 0);
    assert_int_equal(h_wait_until(e_all, &n, "destructor calls"), 0);
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&e_calls), n);
    assert_int_equal(atomic_load(&e_sum), (int64_t)n * (n + 1) / 2);
    assert_int_equal(gmp_key_delete(e_key), 0);
}

/* A destructor that sets its value again is called again, at most
 * GMP_KEY_DESTRUCTOR_ITERATIONS times; one that sets it twice, 3 times. */
static _Atomic int64_t r_calls_forever, r_calls_twice;
static gmp_key_t r_forever, r_twice;

static void again_forever(void *v)
{
    atomic_fetch_add(&r_calls_forever, 1);
    G_CHECK(gmp_setspecific(r_forever, v) == 0);
}

static void again_twice(void *v)
{
    atomic_fetch_add(&r_calls_twice, 1);
    intptr_t left = (intptr_t)v;
    if (left > 1)
        G_CHECK(gmp_setspecific(r_twice, (void *)(left - 1)) == 0);
}

static void rounds_g(void *arg)
{
    struct dg *c = arg;
    G_CHECK(gmp_setspecific(r_forever, (void *)1) == 0);
    G_CHECK(gmp_setspecific(r_twice, (void *)3) == 0);
    atomic_fetch_add(&c->done, 1);
}

static void test_key_destructor_rounds_are_bounded(void **state)
{
    bad_reset();
    atomic_store(&r_calls_forever, 0);
    atomic_store(&r_calls_twice, 0);
    assert_int_equal(gmp_key_create(&r_forever, again_forever), 0);
    assert_int_equal(gmp_key_create(&r_twice, again_twice), 0);
    struct dg c = {0};
    assert_int_equal(gmp_go(rounds_g, &c), 0);
    assert_int_equal(h_wait(&c.done, 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&r_calls_forever),
                     GMP_KEY_DESTRUCTOR_ITERATIONS);
    assert_int_equal(atomic_load(&r_calls_twice), 3);
    assert_int_equal(gmp_key_delete(r_forever), 0);
    assert_int_equal(gmp_key_delete(r_twice), 0);
}

/* Bad input, from a goroutine and from the test thread. */
struct badk {
    gmp_key_t live, dead;
    _Atomic int64_t done;
};

static void bad_g(void *arg)
{
    struct badk *c = arg;
    G_CHECK(gmp_setspecific(0, c) == GMP_EINVAL);
    G_CHECK(gmp_getspecific(0) == NULL);
    G_CHECK(gmp_setspecific(c->dead, c) == GMP_EINVAL);
    G_CHECK(gmp_getspecific(c->dead) == NULL);
    G_CHECK(gmp_setspecific(c->live, c) == 0);
    G_CHECK(gmp_getspecific(c->live) == c);
    /* Deleted while set: reads NULL at once. */
    G_CHECK(gmp_key_delete(c->live) == 0);
    G_CHECK(gmp_getspecific(c->live) == NULL);
    G_CHECK(gmp_setspecific(c->live, c) == GMP_EINVAL);
    /* A new key in the same registry entry starts NULL here too. */
    gmp_key_t again;
    G_CHECK(gmp_key_create(&again, NULL) == 0);
    G_CHECK(again != c->live);
    G_CHECK(gmp_getspecific(again) == NULL);
    G_CHECK(gmp_key_delete(again) == 0);
    atomic_fetch_add(&c->done, 1);
}

static void test_key_bad_input_refused(void **state)
{
    struct badk c = {0};
    bad_reset();
    assert_int_equal(gmp_key_create(NULL, NULL), GMP_EINVAL);
    assert_int_equal(gmp_key_delete(0), GMP_EINVAL);
    assert_int_equal(gmp_setspecific(0, &c), GMP_EINVAL);
    assert_null(gmp_getspecific(0));
    assert_null(gmp_getspecific(0xffffffffu));
    assert_int_equal(gmp_key_create(&c.dead, NULL), 0);
    assert_int_equal(gmp_key_delete(c.dead), 0);
    assert_int_equal(gmp_key_delete(c.dead), GMP_EINVAL);
    assert_int_equal(gmp_setspecific(c.dead, &c), GMP_EINVAL);
    assert_null(gmp_getspecific(c.dead));
    assert_int_equal(gmp_key_create(&c.live, NULL), 0);
    assert_int_equal(gmp_go(bad_g, &c), 0);
    assert_int_equal(h_wait(&c.done, 1), 0);
    ASSERT_NO_BAD();

    /* GMP_KEYS_MAX keys at most (none other is live now). */
    gmp_key_t ks[GMP_KEYS_MAX];
    for (int i = 0; i < GMP_KEYS_MAX; i++)
        assert_int_equal(gmp_key_create(&ks[i], NULL), 0);
    gmp_key_t extra = 0;
    assert_int_equal(gmp_key_create(&extra, NULL), GMP_EAGAIN);
    assert_int_equal(extra, 0);
    for (int i = 0; i < GMP_KEYS_MAX; i++)
        assert_int_equal(gmp_key_delete(ks[i]), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Plain threads: a table of their own, destructors at thread exit. */
static _Atomic int64_t t_calls, t_sum;
static gmp_key_t t_key;

static void thread_dtor(void *v)
{
    atomic_fetch_add(&t_calls, 1);
    atomic_fetch_add(&t_sum, (int64_t)(intptr_t)v);
}

struct tk {
    _Atomic int64_t g_done;
    intptr_t val;
};

static void from_thread_g(void *arg)
{
    struct tk *c = arg;
    /* Spawned by the thread, but a goroutine: the thread's value is not
     * its own. */
    G_CHECK(gmp_getspecific(t_key) == NULL);
    atomic_fetch_add(&c->g_done, 1);
}

static void thread_fn(void *arg)
{
    struct tk *c = arg;
    G_CHECK(gmp_getspecific(t_key) == NULL);
    G_CHECK(gmp_setspecific(t_key, (void *)c->val) == 0);
    G_CHECK(gmp_getspecific(t_key) == (void *)c->val);
    G_CHECK(gmp_go(from_thread_g, c) == 0);
    gmp_yield();                    /* sched_yield here */
    G_CHECK(gmp_getspecific(t_key) == (void *)c->val);
    /* Lock and unlock do nothing on a plain thread. */
    gmp_lock_os_thread();
    gmp_unlock_os_thread();
    gmp_unlock_os_thread();
}

static void test_key_plain_threads_have_their_own(void **state)
{
    bad_reset();
    atomic_store(&t_calls, 0);
    atomic_store(&t_sum, 0);
    assert_int_equal(gmp_key_create(&t_key, thread_dtor), 0);
    enum { NT = 4 };
    struct th t[NT];
    struct tk c[NT];
    for (int i = 0; i < NT; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].val = 100 + i;
        th_start(&t[i], thread_fn, &c[i]);
    }
    for (int i = 0; i < NT; i++)
        th_join(&t[i]);
    for (int i = 0; i < NT; i++)
        assert_int_equal(h_wait(&c[i].g_done, 1), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&t_calls), NT);
    assert_int_equal(atomic_load(&t_sum), 100 * NT + NT * (NT - 1) / 2);
    /* The test thread too; set back to NULL so nothing runs at its
     * exit. */
    assert_null(gmp_getspecific(t_key));
    assert_int_equal(gmp_setspecific(t_key, &c[0]), 0);
    assert_ptr_equal(gmp_getspecific(t_key), &c[0]);
    assert_int_equal(gmp_setspecific(t_key, NULL), 0);
    assert_null(gmp_getspecific(t_key));
    assert_int_equal(gmp_key_delete(t_key), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Locked threads -------------------------------------------------------- */

struct lk {
    int iters;
    gmp_chan_t *ping, *pong;
    gmp_mutex_t mu;
    _Atomic int holder_go;          /* 1: the holder takes mu for a while */
    _Atomic int64_t mismatches;     /* tid changed while locked */
    _Atomic int64_t not_locked;     /* lockedg not us while locked */
    _Atomic int64_t steps;
    _Atomic int64_t after_moves;    /* thread changes after unlock */
    _Atomic int64_t done;
    _Atomic int64_t partner_done;
};

static bool is_locked_here(void)
{
    struct m *mp = gmp__getm();
    return mp && mp->curg && mp->lockedg == mp->curg;
}

/* Answers the locked goroutine's pings, and holds the mutex across a
 * sleep when asked, so that the locked goroutine's lock waits. */
static void partner_g(void *arg)
{
    struct lk *c = arg;
    int v;
    while (gmp_chan_recv(c->ping, &v) == 0) {
        if (v == 1) {               /* hold the mutex for a while */
            gmp_mutex_lock(&c->mu);
            atomic_store(&c->holder_go, 1);
            gmp_sleep(20000);
            gmp_yield();
            gmp_mutex_unlock(&c->mu);
        }
        if (gmp_chan_send(c->pong, &v) != 0)
            break;
    }
    atomic_fetch_add(&c->partner_done, 1);
}

static void check_tid(struct lk *c, long want)
{
    if ((long)h_tid() != want)
        atomic_fetch_add(&c->mismatches, 1);
    if (!is_locked_here())
        atomic_fetch_add(&c->not_locked, 1);
    atomic_fetch_add_explicit(&c->steps, 1, memory_order_relaxed);
}

static void locked_g(void *arg)
{
    struct lk *c = arg;
    gmp_lock_os_thread();
    long me = (long)h_tid();
    atomic_store(&locked_tid, me);
    for (int i = 0; i < c->iters; i++) {
        gmp_yield();
        check_tid(c, me);
        int v = 0;                  /* channel ping-pong */
        G_CHECK(gmp_chan_send(c->ping, &v) == 0);
        G_CHECK(gmp_chan_recv(c->pong, &v) == 0);
        check_tid(c, me);
        if (i % 8 == 0) {
            gmp_sleep(2000);
            check_tid(c, me);
            /* A mutex wait: the partner holds it across a sleep. */
            v = 1;
            atomic_store(&c->holder_go, 0);
            G_CHECK(gmp_chan_send(c->ping, &v) == 0);
            while (!atomic_load(&c->holder_go))
                gmp_yield();
            gmp_mutex_lock(&c->mu);
            check_tid(c, me);
            gmp_mutex_unlock(&c->mu);
            G_CHECK(gmp_chan_recv(c->pong, &v) == 0);
            check_tid(c, me);
        }
        if (i % 16 == 0) {
            /* A call that blocks long enough for sysmon to hand the P
             * off: it comes back on this thread regardless. */
            (void)GMP_SYSCALL(usleep(3000));    /* EINTR is fine */
            check_tid(c, me);
        }
    }
    atomic_store(&locked_tid, 0);
    gmp_unlock_os_thread();
    G_CHECK(!is_locked_here());
    /* Unlocked: free to move; counted, not asserted. */
    long last = (long)h_tid();
    for (int i = 0; i < c->iters; i++) {
        gmp_yield();
        long now = (long)h_tid();
        if (now != last)
            atomic_fetch_add(&c->after_moves, 1);
        last = now;
    }
    atomic_fetch_add(&c->done, 1);
}

static void test_lock_goroutine_keeps_its_thread_alone(void **state)
{
    struct h_env *env = *state;
    struct lk c;
    memset(&c, 0, sizeof c);
    bad_reset();
    c.iters = H_SANITIZED ? 48 : 320;
    assert_non_null(c.ping = gmp_chan_make(sizeof(int), 0));
    assert_non_null(c.pong = gmp_chan_make(sizeof(int), 0));
    int nsp = spinners_start(2 * env->procs + 2);
    assert_int_equal(gmp_go(partner_g, &c), 0);
    assert_int_equal(gmp_go(locked_g, &c), 0);
    assert_int_equal(h_wait(&c.done, 1), 0);
    int64_t rounds = atomic_load(&spin_rounds);
    spinners_stop(nsp);
    gmp_chan_close(c.ping);
    assert_int_equal(h_wait(&c.partner_done, 1), 0);
    ASSERT_NO_BAD();
    printf("procs=%d: %lld checks on the locked thread, spinners ran %lld "
           "rounds, %lld moves after unlock\n", env->procs,
           (long long)atomic_load(&c.steps), (long long)rounds,
           (long long)atomic_load(&c.after_moves));
    assert_int_equal(atomic_load(&c.mismatches), 0);
    assert_int_equal(atomic_load(&c.not_locked), 0);
    assert_int_equal(atomic_load(&spin_violations), 0);
    assert_true(atomic_load(&c.steps) > 0);
    gmp_chan_free(c.ping);
    gmp_chan_free(c.pong);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Many locked goroutines at once, each ping-ponging with a partner of
 * its own and yielding, sleeping: every one keeps its thread. */
struct pair {
    gmp_chan_t *a, *b;
    struct lk *c;
};

static void pair_partner(void *arg)
{
    struct pair *p = arg;
    int v;
    while (gmp_chan_recv(p->a, &v) == 0)
        if (gmp_chan_send(p->b, &v) != 0)
            break;
    atomic_fetch_add(&p->c->partner_done, 1);
}

static void pair_locked(void *arg)
{
    struct pair *p = arg;
    gmp_lock_os_thread();
    long me = (long)h_tid();
    for (int i = 0; i < p->c->iters; i++) {
        int v = i;
        G_CHECK(gmp_chan_send(p->a, &v) == 0);
        G_CHECK(gmp_chan_recv(p->b, &v) == 0);
        G_CHECK(v == i);
        check_tid(p->c, me);
        if (i % 4 == 0)
            gmp_yield();
        else if (i % 4 == 1)
            gmp_sleep(500);
        check_tid(p->c, me);
    }
    gmp_unlock_os_thread();
    gmp_chan_close(p->a);
    atomic_fetch_add(&p->c->done, 1);
}

static void test_lock_many_locked_goroutines(void **state)
{
    struct lk c;
    memset(&c, 0, sizeof c);
    bad_reset();
    c.iters = H_SANITIZED ? 40 : 400;
    enum { NP = 12 };
    struct pair p[NP];
    for (int i = 0; i < NP; i++) {
        p[i].c = &c;
        assert_non_null(p[i].a = gmp_chan_make(sizeof(int), 0));
        assert_non_null(p[i].b = gmp_chan_make(sizeof(int), 0));
        assert_int_equal(gmp_go(pair_partner, &p[i]), 0);
        assert_int_equal(gmp_go(pair_locked, &p[i]), 0);
    }
    assert_int_equal(h_wait(&c.done, NP), 0);
    assert_int_equal(h_wait(&c.partner_done, NP), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&c.mismatches), 0);
    assert_int_equal(atomic_load(&c.not_locked), 0);
    for (int i = 0; i < NP; i++) {
        gmp_chan_free(p[i].a);
        gmp_chan_free(p[i].b);
    }
    assert_int_equal(h_wait_quiet(), 0);
}

/* Locks nest: locked until as many unlocks as locks; an extra unlock
 * does nothing. */
struct nest {
    _Atomic int64_t done;
    _Atomic int64_t mismatches;
};

static void nest_g(void *arg)
{
    struct nest *c = arg;
    G_CHECK(!is_locked_here());
    gmp_unlock_os_thread();         /* not locked: nothing */
    G_CHECK(!is_locked_here());
    gmp_lock_os_thread();
    gmp_lock_os_thread();
    gmp_lock_os_thread();
    long me = (long)h_tid();
    atomic_store(&locked_tid, me);
    gmp_unlock_os_thread();
    gmp_unlock_os_thread();
    G_CHECK(is_locked_here());      /* one lock left */
    for (int i = 0; i < 200; i++) {
        gmp_yield();
        if ((long)h_tid() != me)
            atomic_fetch_add(&c->mismatches, 1);
        G_CHECK(is_locked_here());
    }
    atomic_store(&locked_tid, 0);
    gmp_unlock_os_thread();
    G_CHECK(!is_locked_here());
    gmp_unlock_os_thread();         /* one too many: nothing */
    G_CHECK(!is_locked_here());
    gmp_lock_os_thread();           /* and locking again works */
    G_CHECK(is_locked_here());
    gmp_unlock_os_thread();
    G_CHECK(!is_locked_here());
    atomic_fetch_add(&c->done, 1);
}

static void test_lock_nests_by_count(void **state)
{
    struct h_env *env = *state;
    struct nest c = {0};
    bad_reset();
    int nsp = spinners_start(2 * env->procs);
    assert_int_equal(gmp_go(nest_g, &c), 0);
    assert_int_equal(h_wait(&c.done, 1), 0);
    spinners_stop(nsp);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&c.mismatches), 0);
    assert_int_equal(atomic_load(&spin_violations), 0);
    /* From the test thread, a plain thread: nothing happens. */
    gmp_lock_os_thread();
    gmp_unlock_os_thread();
    assert_int_equal(h_wait_quiet(), 0);
}

/* A goroutine that returns while locked: its destructors run on the
 * locked thread, then the thread runs other goroutines again. */
static gmp_key_t x_key;
static _Atomic int64_t x_dtor_calls, x_dtor_wrong;

static void exit_dtor(void *v)
{
    if ((long)(intptr_t)v != (long)h_tid())
        atomic_fetch_add(&x_dtor_wrong, 1);
    atomic_fetch_add(&x_dtor_calls, 1);
}

static void exit_locked_g(void *arg)
{
    struct dg *c = arg;
    gmp_lock_os_thread();
    if (gmp_id() % 2)
        gmp_lock_os_thread();       /* some twice */
    G_CHECK(gmp_setspecific(x_key, (void *)(intptr_t)(long)h_tid()) == 0);
    gmp_yield();
    atomic_fetch_add(&c->done, 1);
}

static void after_g(void *arg)
{
    struct dg *c = arg;
    gmp_yield();
    atomic_fetch_add(&c->done, 1);
}

static void test_lock_exit_while_locked_frees_thread(void **state)
{
    bad_reset();
    atomic_store(&x_dtor_calls, 0);
    atomic_store(&x_dtor_wrong, 0);
    assert_int_equal(gmp_key_create(&x_key, exit_dtor), 0);
    struct dg c = {0};
    enum { N = 32 };
    for (int i = 0; i < N; i++)
        assert_int_equal(gmp_go(exit_locked_g, &c), 0);
    assert_int_equal(h_wait(&c.done, N), 0);
    assert_int_equal(h_wait_quiet(), 0);
    /* Every thread is free again: plenty of goroutines all finish. */
    struct dg d = {0};
    long n = H_SCALE(10000);
    for (long i = 0; i < n; i++)
        assert_int_equal(gmp_go(after_g, &d), 0);
    assert_int_equal(h_wait(&d.done, n), 0);
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&x_dtor_calls), N);
    assert_int_equal(atomic_load(&x_dtor_wrong), 0);
    assert_int_equal(gmp_key_delete(x_key), 0);
}

/* ---- Stopping and deadlock with a locked goroutine (forked) -------------- */

static gmp_chan_t *never;

static void parked_locked_g(void *arg)
{
    gmp_wg_t *wg = arg;
    gmp_lock_os_thread();
    gmp_wg_done(wg);
    gmp_chan_recv(never, NULL);     /* for ever */
}

static void spin_locked_g(void *arg)
{
    gmp_wg_t *wg = arg;
    gmp_lock_os_thread();
    gmp_wg_done(wg);
    for (;;)
        gmp_yield();
}

/* main returns while one locked goroutine is parked for ever and
 * another yields for ever: gmp_main must still return. */
static void main_returns_main(void *arg)
{
    (void)arg;
    static gmp_wg_t wg = GMP_WG_INIT;
    never = gmp_chan_make(0, 0);
    gmp_wg_add(&wg, 2);
    gmp_go(parked_locked_g, &wg);
    gmp_go(spin_locked_g, &wg);
    gmp_wg_wait(&wg);
    gmp_sleep(1000000);             /* let them park / spin a while */
    printf("ok\n");
    fflush(stdout);
}

static void test_lock_gmp_main_returns_with_locked_goroutines(void **state)
{
    expect_clean_with(main_returns_main, NULL, 1);
    expect_clean_with(main_returns_main, NULL, 2);
    expect_clean_with(main_returns_main, NULL, 4);
}

/* The runtime that main left behind, with a locked goroutine yielding
 * for ever on an abandoned thread, is freed: that thread stops at the
 * goroutine's next yield, so a second gmp_main (which waits for the
 * first runtime's stragglers) runs. */
static void trivial_main(void *arg)
{
    (void)arg;
    printf("second ok\n");
    fflush(stdout);
}

static void twice_child(void *arg)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = (int)(intptr_t)arg;
    int rc1 = gmp_main(main_returns_main, NULL, &cfg);
    int rc2 = gmp_main(trivial_main, NULL, &cfg);
    printf("returned %d %d\n", rc1, rc2);
    fflush(stdout);
    _exit(0);
}

static void test_lock_runtime_freed_after_locked_stragglers(void **state)
{
    for (int procs = 1; procs <= 4; procs *= 2) {
        struct h_child res;
        assert_int_equal(h_fork(twice_child, (void *)(intptr_t)procs, &res),
                         0);
        h_child_exited(&res, 0, procs);
        assert_true(h_has_line(res.out, "second ok"));
        assert_true(h_has_line(res.out, "returned 0 0"));
    }
}

/* Every goroutine waits for ever, two of them locked (main among them):
 * the locked Ms count as idle, and the deadlock is reported. */
static void dl_locked_g(void *arg)
{
    (void)arg;
    gmp_lock_os_thread();
    announce("chan receive");
    gmp_chan_recv(never, NULL);
}

static void dl_locked_main(void *arg)
{
    (void)arg;
    never = gmp_chan_make(0, 0);
    gmp_lock_os_thread();
    gmp_go(dl_locked_g, NULL);
    gmp_yield();
    gmp_sleep(1000000);
    announce("chan receive");
    gmp_chan_recv(never, NULL);
}

static void test_lock_deadlock_still_reported(void **state)
{
    expect_deadlock(dl_locked_main);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_key_unset_reads_null),
        cmocka_unit_test(test_key_values_follow_goroutine_across_threads),
        cmocka_unit_test(test_key_many_goroutines_distinct_values),
        cmocka_unit_test(test_key_destructors_run_once_at_exit),
        cmocka_unit_test(test_key_destructor_gets_each_value_exactly_once),
        cmocka_unit_test(test_key_destructor_rounds_are_bounded),
        cmocka_unit_test(test_key_bad_input_refused),
        cmocka_unit_test(test_key_plain_threads_have_their_own),
        cmocka_unit_test(test_lock_goroutine_keeps_its_thread_alone),
        cmocka_unit_test(test_lock_many_locked_goroutines),
        cmocka_unit_test(test_lock_nests_by_count),
        cmocka_unit_test(test_lock_exit_while_locked_frees_thread),
    };
    /* Forked children: no runtime may run in this process meanwhile. */
    const struct CMUnitTest forked[] = {
        cmocka_unit_test(test_lock_gmp_main_returns_with_locked_goroutines),
        cmocka_unit_test(test_lock_runtime_freed_after_locked_stragglers),
        cmocka_unit_test(test_lock_deadlock_still_reported),
    };
    return cmocka_run_group_tests_name("key forked", forked, NULL, NULL)
         + cmocka_run_group_tests_name("key procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("key procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("key procs=4", t, h_up_4, h_down);
}
