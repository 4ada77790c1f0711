/*
 * test_pool.c - gmp_pool_t at procs 1, 2 and 4: bad input; every task of
 * a million (scaled) runs exactly once; the capacity bounds the tasks
 * running at any instant and is reached; a submit at capacity waits until
 * a worker comes back, a non-blocking one fails with GMP_EAGAIN; idle
 * workers expire, never before their expiry; tune up and down under load;
 * release with tasks in flight and with submitters waiting; submits from
 * plain threads and from inside tasks.
 *
 * States are made, not waited out: tasks hold their workers on a gate
 * (a mutex, a cond and a flag) until the test opens it; the test waits on
 * counters the tasks and submitters keep, and on gmp__pool_waiting (the
 * number of submitters parked at capacity) to know a submitter is blocked.
 */
#include "harness.h"
#include "internal.h"                /* gmp__pool_waiting */

/* ---- Shared pieces ------------------------------------------------------- */

/* Tasks wait here until the test opens it. */
struct gate {
    gmp_mutex_t mu;
    gmp_cond_t  cv;
    bool        open;           /* mu */
};

static struct gate gate;

static void gate_reset(void)
{
    memset(&gate, 0, sizeof gate);
}

static void gate_wait(void)
{
    gmp_mutex_lock(&gate.mu);
    while (!gate.open)
        gmp_cond_wait(&gate.cv, &gate.mu);
    gmp_mutex_unlock(&gate.mu);
}

static void gate_open(void)
{
    gmp_mutex_lock(&gate.mu);
    gate.open = true;
    gmp_cond_broadcast(&gate.cv);
    gmp_mutex_unlock(&gate.mu);
}

static bool gate_is_open(void)
{
    gmp_mutex_lock(&gate.mu);
    bool o = gate.open;
    gmp_mutex_unlock(&gate.mu);
    return o;
}

/* Tasks counted in and out; peak is the most that ran at once. */
static _Atomic int64_t started, finished, cur, peak;

static void counters_reset(void)
{
    atomic_store(&started, 0);
    atomic_store(&finished, 0);
    atomic_store(&cur, 0);
    atomic_store(&peak, 0);
    bad_reset();
}

static void enter(gmp_pool_t *p)
{
    int64_t c = atomic_fetch_add(&cur, 1) + 1;
    int64_t m = atomic_load(&peak);
    while (c > m && !atomic_compare_exchange_weak(&peak, &m, c))
        ;
    atomic_fetch_add(&started, 1);
    if (p)
        G_CHECK(gmp_pool_running(p) <= gmp_pool_cap(p));
}

static void leave(void)
{
    atomic_fetch_sub(&cur, 1);
    atomic_fetch_add(&finished, 1);
}

/* A task that holds its worker until the gate opens. */
static void gated_task(void *arg)
{
    (void)arg;
    enter(NULL);
    gate_wait();
    leave();
}

static void quick_task(void *arg)
{
    (void)arg;
    enter(NULL);
    leave();
}

static gmp_pool_t *new_pool(size_t cap, int64_t expiry_ns, int nonblocking)
{
    gmp_pool_opts_t o = {.expiry_ns = expiry_ns, .nonblocking = nonblocking};
    return gmp_pool_new(cap, &o);
}

/* Submits n gated tasks from the test thread and waits until all hold a
 * worker. */
static void fill_gated(gmp_pool_t *p, int n)
{
    int64_t base = atomic_load(&started);
    for (int i = 0; i < n; i++)
        assert_int_equal(gmp_pool_submit(p, gated_task, NULL), 0);
    assert_int_equal(h_wait(&started, base + n), 0);
}

/* A pool count to wait for: count(p) == n. */
struct waitn {
    size_t (*count)(gmp_pool_t *);
    gmp_pool_t *p;
    size_t n;
};

static bool count_is(void *arg)
{
    struct waitn *w = arg;
    return w->count(w->p) == w->n;
}

static size_t running_of(gmp_pool_t *p)
{
    return gmp_pool_running(p);
}

/* Waits until exactly n submitters are parked at capacity. */
static int wait_waiting(gmp_pool_t *p, size_t n)
{
    struct waitn w = {gmp__pool_waiting, p, n};
    return h_wait_until(count_is, &w, "submitters waiting at capacity");
}

static int wait_running(gmp_pool_t *p, size_t n)
{
    struct waitn w = {running_of, p, n};
    return h_wait_until(count_is, &w, "gmp_pool_running");
}

static int64_t goroutines_want;

static bool goroutines_are(void *arg)
{
    (void)arg;
    return gmp_num_goroutines() == goroutines_want;
}

/* Waits until exactly n goroutines are alive (workers exiting count until
 * they are gone). */
static int wait_goroutines(int64_t n)
{
    goroutines_want = n;
    return h_wait_until(goroutines_are, NULL, "the goroutine count");
}

/* A submitter (goroutine or thread) of one task: records its result. */
struct submitter {
    gmp_pool_t *p;
    void (*fn)(void *);
    _Atomic int64_t done;
    _Atomic int rc;
};

static void submit_one(void *arg)
{
    struct submitter *s = arg;
    atomic_store(&s->rc, gmp_pool_submit(s->p, s->fn, NULL));
    atomic_store(&s->done, 1);
}

/* ---- Bad input ----------------------------------------------------------- */

static void test_pool_bad_input_is_refused(void **state)
{
    gmp_pool_opts_t neg = {.expiry_ns = -1};
    assert_null(gmp_pool_new(0, NULL));
    assert_null(gmp_pool_new(4, &neg));
    assert_int_equal(gmp_pool_submit(NULL, quick_task, NULL), GMP_EINVAL);
    assert_int_equal(gmp_pool_tune(NULL, 3), GMP_EINVAL);
    assert_int_equal(gmp_pool_release(NULL), GMP_EINVAL);
    assert_int_equal(gmp_pool_running(NULL), 0);
    assert_int_equal(gmp_pool_cap(NULL), 0);

    gmp_pool_t *p = gmp_pool_new(2, NULL);
    assert_non_null(p);
    assert_int_equal(gmp_pool_cap(p), 2);
    assert_int_equal(gmp_pool_running(p), 0);
    assert_int_equal(gmp_pool_submit(p, NULL, NULL), GMP_EINVAL);
    assert_int_equal(gmp_pool_tune(p, 0), GMP_EINVAL);
    assert_int_equal(gmp_pool_cap(p), 2);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Without a runtime there is nobody to run workers. */
static void test_pool_new_without_runtime_is_null(void **state)
{
    assert_int_equal(gmp_procs(), 0);
    assert_null(gmp_pool_new(4, NULL));
}

/* ---- Every task once ----------------------------------------------------- */

#define ONCE_N H_SCALE(1000000)

static _Atomic unsigned char *once_flags;
static _Atomic int64_t once_done;
static gmp_pool_t *once_pool;

/* How many of the n tasks that marked flags did not run exactly once. */
static int64_t not_once(_Atomic unsigned char *flags, size_t n)
{
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += atomic_load(&flags[i]) != 1;
    return bad;
}

static void once_task(void *arg)
{
    atomic_fetch_add_explicit(&once_flags[(uintptr_t)arg], 1,
                              memory_order_relaxed);
    atomic_fetch_add(&once_done, 1);
}

static void once_submitter(void *arg)
{
    (void)arg;
    for (uintptr_t i = 0; i < ONCE_N; i++)
        G_CHECK(gmp_pool_submit(once_pool, once_task, (void *)i) == 0);
}

static void test_pool_runs_each_task_exactly_once(void **state)
{
    bad_reset();
    once_flags = calloc(ONCE_N, 1);
    assert_non_null(once_flags);
    atomic_store(&once_done, 0);
    once_pool = gmp_pool_new(1000, NULL);
    assert_non_null(once_pool);
    assert_int_equal(gmp_go(once_submitter, NULL), 0);
    assert_int_equal(h_wait(&once_done, ONCE_N), 0);
    assert_int_equal(gmp_pool_release(once_pool), 0);
    ASSERT_NO_BAD();
    assert_int_equal(not_once(once_flags, ONCE_N), 0);
    assert_int_equal(atomic_load(&once_done), ONCE_N);
    free((void *)once_flags);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- The capacity -------------------------------------------------------- */

#define CAP_TASKS H_SCALE(20000)

static gmp_pool_t *cap_pool;

static void busy_task(void *arg)
{
    (void)arg;
    enter(cap_pool);
    gmp_yield();                /* let others interleave */
    G_CHECK(gmp_pool_running(cap_pool) <= gmp_pool_cap(cap_pool));
    gmp_yield();
    leave();
}

static void cap_submitter(void *arg)
{
    for (intptr_t i = 0; i < (intptr_t)arg; i++)
        G_CHECK(gmp_pool_submit(cap_pool, busy_task, NULL) == 0);
}

static void test_pool_never_runs_more_than_cap(void **state)
{
    for (size_t cap = 1; cap <= 8; cap *= 2) {
        counters_reset();
        cap_pool = gmp_pool_new(cap, NULL);
        assert_non_null(cap_pool);
        /* Two goroutine submitters and the test thread. */
        assert_int_equal(gmp_go(cap_submitter, (void *)(intptr_t)CAP_TASKS),
                         0);
        assert_int_equal(gmp_go(cap_submitter, (void *)(intptr_t)CAP_TASKS),
                         0);
        for (int i = 0; i < CAP_TASKS; i++)
            assert_int_equal(gmp_pool_submit(cap_pool, busy_task, NULL), 0);
        assert_int_equal(h_wait(&finished, 3 * CAP_TASKS), 0);
        assert_int_equal(gmp_pool_release(cap_pool), 0);
        ASSERT_NO_BAD();
        assert_true(atomic_load(&peak) >= 1);
        assert_true(atomic_load(&peak) <= (int64_t)cap);
        assert_int_equal(atomic_load(&started), 3 * CAP_TASKS);
        assert_int_equal(h_wait_quiet(), 0);
    }
}

/* cap tasks that each wait for all cap to have arrived: they finish only
 * if the pool runs cap of them at once. */
static gmp_wg_t arrive;

static void barrier_task(void *arg)
{
    (void)arg;
    enter(NULL);
    gmp_wg_done(&arrive);
    gmp_wg_wait(&arrive);
    leave();
}

static void test_pool_runs_cap_tasks_at_once(void **state)
{
    enum { CAP = 16 };
    counters_reset();
    memset(&arrive, 0, sizeof arrive);
    gmp_wg_add(&arrive, CAP);
    gmp_pool_t *p = gmp_pool_new(CAP, NULL);
    assert_non_null(p);
    for (int i = 0; i < CAP; i++)
        assert_int_equal(gmp_pool_submit(p, barrier_task, NULL), 0);
    assert_int_equal(h_wait(&finished, CAP), 0);
    assert_int_equal(atomic_load(&peak), CAP);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Waiting at capacity ------------------------------------------------- */

/* The extra task records whether the gate was open when it ran. */
static _Atomic int extra_ran, extra_saw_open;

static void extra_task(void *arg)
{
    (void)arg;
    atomic_store(&extra_saw_open, gate_is_open());
    atomic_store(&extra_ran, 1);
}

static void blocking_submit_case(bool from_thread)
{
    enum { CAP = 3 };
    counters_reset();
    gate_reset();
    atomic_store(&extra_ran, 0);
    atomic_store(&extra_saw_open, 0);
    gmp_pool_t *p = gmp_pool_new(CAP, NULL);
    assert_non_null(p);
    fill_gated(p, CAP);
    assert_int_equal(gmp_pool_running(p), CAP);

    struct submitter s = {.p = p, .fn = extra_task};
    struct runner r;
    run_as(&r, from_thread, submit_one, &s);
    assert_int_equal(wait_waiting(p, 1), 0);
    /* Parked at capacity: not returned, its task not run. */
    assert_int_equal(atomic_load(&s.done), 0);
    assert_int_equal(atomic_load(&extra_ran), 0);
    assert_int_equal(gmp_pool_running(p), CAP);

    gate_open();
    assert_int_equal(h_wait(&s.done, 1), 0);
    run_join(&r);
    assert_int_equal(atomic_load(&s.rc), 0);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(atomic_load(&extra_ran), 1);
    assert_int_equal(atomic_load(&extra_saw_open), 1);
    assert_int_equal(atomic_load(&finished), CAP);
    assert_int_equal(h_wait_quiet(), 0);
}

static void test_pool_submit_at_capacity_waits_for_a_worker(void **state)
{
    blocking_submit_case(false);        /* a goroutine parks */
    blocking_submit_case(true);         /* a plain thread sleeps */
}

static _Atomic int nb_rc;
static _Atomic int64_t nb_done;

static void nb_submitter(void *arg)
{
    atomic_store(&nb_rc, gmp_pool_submit(arg, quick_task, NULL));
    atomic_store(&nb_done, 1);
}

static void test_pool_nonblocking_submit_at_capacity_fails(void **state)
{
    enum { CAP = 2 };
    counters_reset();
    gate_reset();
    gmp_pool_t *p = new_pool(CAP, 0, 1);
    assert_non_null(p);
    fill_gated(p, CAP);
    assert_int_equal(gmp_pool_submit(p, quick_task, NULL), GMP_EAGAIN);
    /* And from a goroutine. */
    atomic_store(&nb_done, 0);
    assert_int_equal(gmp_go(nb_submitter, p), 0);
    assert_int_equal(h_wait(&nb_done, 1), 0);
    assert_int_equal(atomic_load(&nb_rc), GMP_EAGAIN);
    assert_int_equal(gmp_pool_running(p), CAP);
    assert_int_equal(gmp__pool_waiting(p), 0);
    assert_int_equal(atomic_load(&started), CAP);
    gate_open();
    assert_int_equal(h_wait(&finished, CAP), 0);
    assert_int_equal(wait_running(p, 0), 0);
    assert_int_equal(gmp_pool_submit(p, quick_task, NULL), 0);
    assert_int_equal(h_wait(&finished, CAP + 1), 0);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Reuse --------------------------------------------------------------- */

/* Submits one task at a time, alternately from a goroutine and from a
 * plain thread, each after the last task's worker went idle: every
 * submit must hand its task to that worker rather than start another.
 * The expiry is long, so the count can only stay put by reuse. */
static void test_pool_idle_worker_is_reused(void **state)
{
    enum { ROUNDS = 50 };
    counters_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_pool_t *p = new_pool(8, (int64_t)600 * 1000 * MS, 0);
    assert_non_null(p);
    int64_t base = gmp_num_goroutines();        /* the purger */
    for (int i = 1; i <= ROUNDS; i++) {
        struct submitter s = {.p = p, .fn = quick_task};
        struct runner r;
        run_as(&r, i % 2 == 0, submit_one, &s);
        assert_int_equal(h_wait(&s.done, 1), 0);
        run_join(&r);
        assert_int_equal(atomic_load(&s.rc), 0);
        assert_int_equal(h_wait(&finished, i), 0);
        assert_int_equal(wait_running(p, 0), 0);
        /* One worker, idle, and nothing else of ours. */
        assert_int_equal(wait_goroutines(base + 1), 0);
    }
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* The idle stack's order. Tasks hold their workers on gates of their own,
 * opened one at a time, each after the last worker went idle: the idle
 * stack is then known, oldest first. More workers than the stack's first
 * allocation, so that it also grows. */
enum { ORDER_N = 100, ORDER_KEEP = 25 };

static gmp_mutex_t order_mu;
static gmp_cond_t order_cv;
static bool order_open[ORDER_N];        /* order_mu */
static _Atomic uint64_t order_id[ORDER_N];

static void order_task(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    atomic_store(&order_id[i], gmp_id());
    enter(NULL);
    gmp_mutex_lock(&order_mu);
    while (!order_open[i])
        gmp_cond_wait(&order_cv, &order_mu);
    gmp_mutex_unlock(&order_mu);
    leave();
}

static void order_release(int i)
{
    gmp_mutex_lock(&order_mu);
    order_open[i] = true;
    gmp_cond_broadcast(&order_cv);
    gmp_mutex_unlock(&order_mu);
}

/* Submits tasks [0, n) and waits until each holds a worker. */
static void order_fill(gmp_pool_t *p, int n)
{
    gmp_mutex_lock(&order_mu);
    memset(order_open, 0, sizeof order_open);
    gmp_mutex_unlock(&order_mu);
    int64_t base = atomic_load(&started);
    for (uintptr_t i = 0; i < (uintptr_t)n; i++)
        assert_int_equal(gmp_pool_submit(p, order_task, (void *)i), 0);
    assert_int_equal(h_wait(&started, base + n), 0);
}

static void test_pool_reuses_newest_and_retires_oldest(void **state)
{
    uint64_t idle_order[ORDER_N];       /* bottom (longest idle) first */
    counters_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_pool_t *p = new_pool(ORDER_N, (int64_t)600 * 1000 * MS, 0);
    assert_non_null(p);
    int64_t base = gmp_num_goroutines();        /* the purger */
    order_fill(p, ORDER_N);
    assert_int_equal(gmp_num_goroutines(), base + ORDER_N);
    for (int i = 0; i < ORDER_N; i++) {
        idle_order[i] = atomic_load(&order_id[i]);
        order_release(i);
        assert_int_equal(wait_running(p, (size_t)(ORDER_N - 1 - i)), 0);
    }

    /* The last to go idle takes the next task, and goes back on top. */
    order_fill(p, 1);
    assert_int_equal(atomic_load(&order_id[0]), idle_order[ORDER_N - 1]);
    order_release(0);
    assert_int_equal(wait_running(p, 0), 0);

    /* Shrinking retires the longest idle: the newest ORDER_KEEP stay, and
     * take the next tasks without a new worker. */
    assert_int_equal(gmp_pool_tune(p, ORDER_KEEP), 0);
    assert_int_equal(wait_goroutines(base + ORDER_KEEP), 0);
    order_fill(p, ORDER_KEEP);
    assert_int_equal(gmp_num_goroutines(), base + ORDER_KEEP);
    for (int i = 0; i < ORDER_KEEP; i++) {
        /* Newest first: task i got the i-th from the top. */
        assert_int_equal(atomic_load(&order_id[i]),
                         idle_order[ORDER_N - 1 - i]);
    }
    for (int i = 0; i < ORDER_KEEP; i++)
        order_release(i);
    assert_int_equal(h_wait(&finished, ORDER_N + 1 + ORDER_KEEP), 0);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Expiry -------------------------------------------------------------- */

static void test_pool_idle_workers_expire(void **state)
{
    enum { N = 8 };
    counters_reset();
    gate_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_pool_t *p = new_pool(N, 5 * MS, 0);
    assert_non_null(p);
    int64_t base = gmp_num_goroutines();        /* the purger */
    fill_gated(p, N);
    assert_int_equal(gmp_num_goroutines(), base + N);
    gate_open();
    assert_int_equal(h_wait(&finished, N), 0);
    /* Idle now; each exits once 5 ms idle: the count falls back. */
    assert_int_equal(wait_goroutines(base), 0);
    assert_int_equal(gmp_pool_running(p), 0);

    /* A busy worker never expires: hold one, let a second go idle. */
    gate_reset();
    fill_gated(p, 1);
    assert_int_equal(gmp_pool_submit(p, quick_task, NULL), 0);
    assert_int_equal(h_wait(&finished, N + 1), 0);
    assert_int_equal(wait_goroutines(base + 1), 0);     /* the idle one left */
    assert_int_equal(atomic_load(&started), N + 2);
    assert_int_equal(gmp_pool_running(p), 1);
    gate_open();
    assert_int_equal(h_wait(&finished, N + 2), 0);
    assert_int_equal(wait_goroutines(base), 0);
    /* The pool still works with no worker left. */
    assert_int_equal(gmp_pool_submit(p, quick_task, NULL), 0);
    assert_int_equal(h_wait(&finished, N + 3), 0);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* A worker expires once idle expiry_ns, never before. The task notes when
 * it returns; the test waits for the goroutine count to fall back and
 * checks that this came at least expiry_ns later. Only a lower bound: a
 * busy host can delay the exit or its sighting, never advance them. Each
 * round submits a little later after the last exit, so that the returns
 * fall at different points of the purger's sleep (it sleeps one expiry
 * when no worker is idle). */
static _Atomic int64_t returned_at;

static void timed_task(void *arg)
{
    (void)arg;
    enter(NULL);
    atomic_store(&returned_at, gmp_nanotime());
    leave();
}

static void test_pool_idle_worker_lives_its_expiry(void **state)
{
    enum { ROUNDS = 6 };
    const int64_t expiry = 20 * MS;
    counters_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_pool_t *p = new_pool(4, expiry, 0);
    assert_non_null(p);
    int64_t base = gmp_num_goroutines();        /* the purger */
    for (int i = 0; i < ROUNDS; i++) {
        struct timespec later = {0, i * expiry / ROUNDS};
        nanosleep(&later, NULL);
        assert_int_equal(gmp_pool_submit(p, timed_task, NULL), 0);
        assert_int_equal(h_wait(&finished, i + 1), 0);
        assert_int_equal(wait_goroutines(base), 0);
        assert_true(gmp_nanotime() - atomic_load(&returned_at) >= expiry);
    }
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Tune ---------------------------------------------------------------- */

static void test_pool_tune_grows_and_shrinks_under_load(void **state)
{
    counters_reset();
    gate_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_pool_t *p = gmp_pool_new(2, NULL);
    assert_non_null(p);
    int64_t base = gmp_num_goroutines();
    fill_gated(p, 2);

    /* Two submitters, a goroutine and a thread, wait at capacity. */
    struct submitter s1 = {.p = p, .fn = gated_task};
    struct submitter s2 = {.p = p, .fn = gated_task};
    struct runner r1, r2;
    run_as(&r1, false, submit_one, &s1);
    run_as(&r2, true, submit_one, &s2);
    assert_int_equal(wait_waiting(p, 2), 0);
    assert_int_equal(atomic_load(&started), 2);

    /* Growing hands them the room at once. */
    assert_int_equal(gmp_pool_tune(p, 4), 0);
    assert_int_equal(gmp_pool_cap(p), 4);
    assert_int_equal(h_wait(&started, 4), 0);
    assert_int_equal(h_wait(&s1.done, 1), 0);
    assert_int_equal(h_wait(&s2.done, 1), 0);
    run_join(&r2);
    assert_int_equal(atomic_load(&s1.rc), 0);
    assert_int_equal(atomic_load(&s2.rc), 0);
    assert_int_equal(gmp__pool_waiting(p), 0);
    assert_int_equal(gmp_pool_running(p), 4);
    assert_int_equal(wait_goroutines(base + 4), 0);     /* s1 has left */

    /* Shrinking interrupts nothing: four still run. */
    assert_int_equal(gmp_pool_tune(p, 1), 0);
    assert_int_equal(gmp_pool_cap(p), 1);
    assert_int_equal(gmp_pool_running(p), 4);
    assert_int_equal(atomic_load(&finished), 0);
    gate_open();
    assert_int_equal(h_wait(&finished, 4), 0);
    /* Three retire as they come back, one stays idle. */
    assert_int_equal(wait_goroutines(base + 1), 0);
    assert_int_equal(wait_running(p, 0), 0);

    /* From now on one task at a time. */
    counters_reset();
    cap_pool = p;
    assert_int_equal(gmp_go(cap_submitter, (void *)(intptr_t)1000), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(gmp_pool_submit(p, busy_task, NULL), 0);
    assert_int_equal(h_wait(&finished, 2000), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&peak), 1);

    /* Grow again with idle room, then shrink: idle workers beyond the
     * new capacity retire at once. */
    counters_reset();
    gate_reset();
    assert_int_equal(gmp_pool_tune(p, 6), 0);
    fill_gated(p, 6);
    assert_int_equal(wait_goroutines(base + 6), 0);     /* the submitter left */
    gate_open();
    assert_int_equal(h_wait(&finished, 6), 0);
    assert_int_equal(wait_running(p, 0), 0);
    assert_int_equal(gmp_pool_tune(p, 2), 0);
    assert_int_equal(wait_goroutines(base + 2), 0);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Shrinking while every worker is busy, in a pool where no submitter has
 * waited: each worker beyond the new capacity retires as its task
 * returns (workers come back to an idle pool without its lock unless it
 * tells them otherwise, pool.c's The return). The long expiry keeps the
 * purger out of it. */
static void test_pool_shrink_retires_busy_workers_as_they_return(void **state)
{
    enum { N = 4 };
    counters_reset();
    gate_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_pool_t *p = new_pool(N, (int64_t)600 * 1000 * MS, 0);
    assert_non_null(p);
    int64_t base = gmp_num_goroutines();
    fill_gated(p, N);
    assert_int_equal(gmp_pool_tune(p, 1), 0);
    assert_int_equal(gmp_pool_running(p), N);
    gate_open();
    assert_int_equal(h_wait(&finished, N), 0);
    assert_int_equal(wait_goroutines(base + 1), 0);
    assert_int_equal(wait_running(p, 0), 0);
    /* The one left takes the next task. */
    struct submitter s = {.p = p, .fn = quick_task};
    submit_one(&s);
    assert_int_equal(atomic_load(&s.rc), 0);
    assert_int_equal(h_wait(&finished, N + 1), 0);
    assert_int_equal(wait_running(p, 0), 0);
    assert_int_equal(gmp_num_goroutines(), base + 1);
    assert_int_equal(gmp_pool_release(p), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Release ------------------------------------------------------------- */

#define FLIGHT_N H_SCALE(20000)

static _Atomic int64_t flight_done;

static void flight_task(void *arg)
{
    (void)arg;
    if ((uintptr_t)arg & 1)
        gmp_yield();
    atomic_fetch_add(&flight_done, 1);
}

/* Submits FLIGHT_N tasks, releases at once, then checks that every one
 * has run by the time release returns. */
static void flight_case(void *arg)
{
    gmp_pool_t *p = arg;
    for (uintptr_t i = 0; i < FLIGHT_N; i++)
        G_CHECK(gmp_pool_submit(p, flight_task, (void *)i) == 0);
    G_CHECK(gmp_pool_release(p) == 0);
    G_CHECK(atomic_load(&flight_done) == FLIGHT_N);
}

static _Atomic int64_t flight_over;

static void flight_goroutine(void *arg)
{
    flight_case(arg);
    atomic_store(&flight_over, 1);
}

static void test_pool_release_waits_for_tasks_in_flight(void **state)
{
    bad_reset();
    /* From the test thread (a plain thread). */
    atomic_store(&flight_done, 0);
    gmp_pool_t *p = gmp_pool_new(4, NULL);
    assert_non_null(p);
    flight_case(p);
    ASSERT_NO_BAD();
    assert_int_equal(h_wait_quiet(), 0);

    /* From a goroutine. */
    atomic_store(&flight_done, 0);
    atomic_store(&flight_over, 0);
    p = gmp_pool_new(4, NULL);
    assert_non_null(p);
    assert_int_equal(gmp_go(flight_goroutine, p), 0);
    assert_int_equal(h_wait(&flight_over, 1), 0);
    ASSERT_NO_BAD();
    assert_int_equal(h_wait_quiet(), 0);
}

static struct {
    gmp_pool_t *p;
    _Atomic int64_t done;
    _Atomic int rc;
} rel;

static void releaser(void *arg)
{
    (void)arg;
    atomic_store(&rel.rc, gmp_pool_release(rel.p));
    atomic_store(&rel.done, 1);
}

static void test_pool_release_refuses_new_and_waiting_submits(void **state)
{
    counters_reset();
    gate_reset();
    atomic_store(&extra_ran, 0);
    gmp_pool_t *p = gmp_pool_new(2, NULL);
    assert_non_null(p);
    fill_gated(p, 2);
    struct submitter s = {.p = p, .fn = extra_task};
    struct runner r;
    run_as(&r, false, submit_one, &s);
    assert_int_equal(wait_waiting(p, 1), 0);

    /* Release on a thread: it waits for the gated tasks. */
    rel.p = p;
    atomic_store(&rel.done, 0);
    struct th t;
    th_start(&t, releaser, NULL);
    assert_int_equal(h_wait(&s.done, 1), 0);
    assert_int_equal(atomic_load(&s.rc), GMP_ECLOSED);
    /* The pool lives until the gate opens: new calls are refused. */
    assert_int_equal(gmp_pool_submit(p, extra_task, NULL), GMP_ECLOSED);
    assert_int_equal(gmp_pool_tune(p, 8), GMP_ECLOSED);
    assert_int_equal(atomic_load(&rel.done), 0);
    assert_int_equal(atomic_load(&finished), 0);
    gate_open();
    th_join(&t);
    assert_int_equal(atomic_load(&rel.rc), 0);
    assert_int_equal(atomic_load(&finished), 2);
    assert_int_equal(atomic_load(&extra_ran), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Submitters that are plain threads, or tasks ------------------------ */

#define THR_N       4
#define THR_PER     H_SCALE(50000)

static _Atomic unsigned char *thr_flags;
static _Atomic int64_t thr_done;
static gmp_pool_t *thr_pool;

static void thr_task(void *arg)
{
    atomic_fetch_add_explicit(&thr_flags[(uintptr_t)arg], 1,
                              memory_order_relaxed);
    if ((uintptr_t)arg % 7 == 0)
        gmp_yield();
    atomic_fetch_add(&thr_done, 1);
}

static void thr_submitter(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    for (uintptr_t i = k * THR_PER; i < (k + 1) * THR_PER; i++)
        G_CHECK(gmp_pool_submit(thr_pool, thr_task, (void *)i) == 0);
}

static void test_pool_submit_from_plain_threads(void **state)
{
    bad_reset();
    thr_flags = calloc(THR_N * THR_PER, 1);
    assert_non_null(thr_flags);
    atomic_store(&thr_done, 0);
    thr_pool = gmp_pool_new(3, NULL);   /* small: the threads wait often */
    assert_non_null(thr_pool);
    struct th t[THR_N];
    for (uintptr_t k = 0; k < THR_N; k++)
        th_start(&t[k], thr_submitter, (void *)k);
    for (int k = 0; k < THR_N; k++)
        th_join(&t[k]);
    assert_int_equal(gmp_pool_release(thr_pool), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&thr_done), THR_N * THR_PER);
    assert_int_equal(not_once(thr_flags, THR_N * THR_PER), 0);
    free((void *)thr_flags);
    assert_int_equal(h_wait_quiet(), 0);
}

/* Chains: each task submits the next link of its chain to the same pool.
 * With fewer chains than the capacity a link's submit always finds room
 * eventually (the chain's own worker is the only one it holds). */
#define CHAINS     3
#define CHAIN_LEN  H_SCALE(20000)

static gmp_pool_t *chain_pool;
static _Atomic int64_t chain_links;

static void chain_task(void *arg)
{
    uintptr_t left = (uintptr_t)arg;
    atomic_fetch_add(&chain_links, 1);
    if (left > 1)
        G_CHECK(gmp_pool_submit(chain_pool, chain_task,
                                (void *)(left - 1)) == 0);
}

static void test_pool_submit_from_tasks(void **state)
{
    bad_reset();
    atomic_store(&chain_links, 0);
    chain_pool = gmp_pool_new(CHAINS + 1, NULL);
    assert_non_null(chain_pool);
    for (int c = 0; c < CHAINS; c++)
        assert_int_equal(gmp_pool_submit(chain_pool, chain_task,
                                         (void *)(uintptr_t)CHAIN_LEN), 0);
    assert_int_equal(h_wait(&chain_links, CHAINS * CHAIN_LEN), 0);
    assert_int_equal(gmp_pool_release(chain_pool), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&chain_links), CHAINS * CHAIN_LEN);
    assert_int_equal(h_wait_quiet(), 0);
}

int main(void)
{
    const struct CMUnitTest nort[] = {
        cmocka_unit_test(test_pool_new_without_runtime_is_null),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_pool_bad_input_is_refused),
        cmocka_unit_test(test_pool_runs_each_task_exactly_once),
        cmocka_unit_test(test_pool_never_runs_more_than_cap),
        cmocka_unit_test(test_pool_runs_cap_tasks_at_once),
        cmocka_unit_test(test_pool_submit_at_capacity_waits_for_a_worker),
        cmocka_unit_test(test_pool_nonblocking_submit_at_capacity_fails),
        cmocka_unit_test(test_pool_idle_worker_is_reused),
        cmocka_unit_test(test_pool_reuses_newest_and_retires_oldest),
        cmocka_unit_test(test_pool_idle_workers_expire),
        cmocka_unit_test(test_pool_idle_worker_lives_its_expiry),
        cmocka_unit_test(test_pool_tune_grows_and_shrinks_under_load),
        cmocka_unit_test(test_pool_shrink_retires_busy_workers_as_they_return),
        cmocka_unit_test(test_pool_release_waits_for_tasks_in_flight),
        cmocka_unit_test(test_pool_release_refuses_new_and_waiting_submits),
        cmocka_unit_test(test_pool_submit_from_plain_threads),
        cmocka_unit_test(test_pool_submit_from_tasks),
    };
    return cmocka_run_group_tests_name("pool no runtime", nort, NULL, NULL)
         + cmocka_run_group_tests_name("pool procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("pool procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("pool procs=4", t, h_up_4, h_down);
}
