/*
 * test_wg.c - gmp_wg_t, Go's sync.WaitGroup, at procs 1, 2 and 4: waits
 * from the test thread (a plain thread sleeps) and from goroutines (they
 * park), many waiters at once, reuse, a tree of goroutines each waiting
 * for its children, the race of the last done against a new wait, and the
 * fatal error on a negative counter (in a forked child).
 */
#include "harness.h"

/* ---- Zero --------------------------------------------------------------- */

static _Atomic int64_t zero_done;

static void zero_waiter(void *arg)
{
    gmp_wg_t *wg = arg;
    gmp_wg_wait(wg);
    gmp_wg_wait(wg);
    atomic_fetch_add(&zero_done, 1);
}

static void test_wg_wait_on_zero_returns_at_once(void **state)
{
    gmp_wg_t wg = GMP_WG_INIT, zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    gmp_wg_wait(&wg);
    gmp_wg_wait(&zeroed);
    gmp_wg_add(&wg, 3);
    gmp_wg_add(&wg, -3);
    gmp_wg_wait(&wg);
    gmp_wg_add(&wg, 0);             /* a zero delta on zero wakes nobody */
    gmp_wg_wait(&wg);
    atomic_store(&zero_done, 0);
    assert_int_equal(gmp_go(zero_waiter, &wg), 0);
    assert_int_equal(h_wait(&zero_done, 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Many done, one wait ------------------------------------------------ */

#define WORKERS_MAX 10000
#define WORKERS     H_LIVE(WORKERS_MAX)

static struct {
    gmp_wg_t wg;
    long out[WORKERS_MAX];          /* plain stores: wait must order them */
    _Atomic int64_t waiter_done;
    _Atomic int64_t waiter_saw_all;
} many;

static void many_worker(void *arg)
{
    long i = (long)(intptr_t)arg;
    if (i & 1)
        gmp_yield();
    many.out[i] = i + 1;
    gmp_wg_done(&many.wg);
}

static bool many_all_out(void)
{
    for (long i = 0; i < WORKERS; i++)
        if (many.out[i] != i + 1)
            return false;
    return true;
}

/* The test thread waits for 10^4 workers; every worker's plain store is
 * visible once gmp_wg_wait returns (Done happens before Wait returns). */
static void test_wg_test_thread_waits_for_workers(void **state)
{
    memset(&many, 0, sizeof many);
    gmp_wg_add(&many.wg, WORKERS);
    for (long i = 0; i < WORKERS; i++)
        assert_int_equal(gmp_go(many_worker, (void *)(intptr_t)i), 0);
    gmp_wg_wait(&many.wg);
    assert_true(many_all_out());
    assert_int_equal(h_wait_quiet(), 0);
}

static void many_waiter(void *arg)
{
    (void)arg;
    gmp_wg_wait(&many.wg);
    if (many_all_out())
        atomic_fetch_add(&many.waiter_saw_all, 1);
    atomic_fetch_add(&many.waiter_done, 1);
}

static void many_spawner(void *arg)
{
    (void)arg;
    for (long i = 0; i < WORKERS; i++)
        gmp_go(many_worker, (void *)(intptr_t)i);
}

/* A goroutine waits (parks) while workers spawned by another finish. */
static void test_wg_goroutine_waits_for_workers(void **state)
{
    memset(&many, 0, sizeof many);
    gmp_wg_add(&many.wg, WORKERS);
    assert_int_equal(gmp_go(many_waiter, NULL), 0);
    assert_int_equal(gmp_go(many_spawner, NULL), 0);
    assert_int_equal(h_wait(&many.waiter_done, 1), 0);
    assert_int_equal(atomic_load(&many.waiter_saw_all), 1);
    assert_true(many_all_out());
    assert_int_equal(h_wait_quiet(), 0);
}

/* 100 goroutines and the test thread all wait on one group; one done
 * releases every one of them. */
static struct {
    gmp_wg_t wg;
    _Atomic int64_t waiting, released;
} herd;

static void herd_waiter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&herd.waiting, 1);
    gmp_wg_wait(&herd.wg);
    atomic_fetch_add(&herd.released, 1);
}

static void herd_release(void *arg)
{
    (void)arg;
    while (atomic_load(&herd.waiting) < 100)
        gmp_yield();
    gmp_wg_done(&herd.wg);
}

static void test_wg_done_releases_every_waiter(void **state)
{
    memset(&herd, 0, sizeof herd);
    gmp_wg_add(&herd.wg, 1);
    for (int i = 0; i < 100; i++)
        assert_int_equal(gmp_go(herd_waiter, NULL), 0);
    assert_int_equal(gmp_go(herd_release, NULL), 0);
    gmp_wg_wait(&herd.wg);
    assert_int_equal(h_wait(&herd.released, 100), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(atomic_load(&herd.released), 100);
}

/* Goroutines park on a group; a plain thread's Done readies them (the
 * foreign goready path: global queue, then wakep). */
static void test_wg_thread_done_wakes_goroutines(void **state)
{
    for (int round = 0; round < 50; round++) {
        memset(&herd, 0, sizeof herd);
        gmp_wg_add(&herd.wg, 3);
        for (int i = 0; i < 100; i++)
            assert_int_equal(gmp_go(herd_waiter, NULL), 0);
        assert_int_equal(h_wait(&herd.waiting, 100), 0);
        gmp_wg_done(&herd.wg);
        gmp_wg_add(&herd.wg, -1);
        gmp_wg_done(&herd.wg);
        assert_int_equal(h_wait(&herd.released, 100), 0);
        assert_int_equal(h_wait_quiet(), 0);
    }
}

/* ---- Reuse and the last-done race --------------------------------------- */

static _Atomic int64_t race_n;

static void race_done(void *arg)
{
    atomic_fetch_add(&race_n, 1);
    gmp_wg_done(arg);
}

/* Add k, spawn k goroutines that call done, wait: over and over on the
 * same group, so a round's final done races the waiter returning and the
 * next round's Add and Wait. Each wait must return only once its own
 * round's dones are all in (a done still finishing its round must not
 * release the next one); a lost wake-up shows as a wait that never
 * returns (the ctest timeout). */
static void test_wg_reuse_each_wait_waits_its_round(void **state)
{
    gmp_wg_t wg = GMP_WG_INIT;
    long rounds = H_SCALE(20000L), early = 0;
    int64_t want = 0;
    atomic_store(&race_n, 0);
    for (long r = 0; r < rounds; r++) {
        int k = 1 + (int)(r % 3);
        want += k;
        gmp_wg_add(&wg, k);
        for (int i = 0; i < k; i++)
            assert_int_equal(gmp_go(race_done, &wg), 0);
        gmp_wg_wait(&wg);
        if (atomic_load(&race_n) != want) {
            /* Returned early: let the round finish before the next Add. */
            early++;
            while (atomic_load(&race_n) != want)
                sched_yield();
            gmp_wg_wait(&wg);
        }
    }
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(early, 0);
    assert_int_equal(atomic_load(&race_n), want);
}

/* The same race with both sides goroutines: a pair ping-pongs through
 * two groups. */
static struct {
    gmp_wg_t ping, pong;
    long rounds;
    _Atomic int64_t done;
} pp;

static void pp_b(void *arg)
{
    (void)arg;
    for (long r = 0; r < pp.rounds; r++) {
        gmp_wg_wait(&pp.ping);      /* A armed pong, then released ping */
        gmp_wg_add(&pp.ping, 1);    /* re-arm for the next round ... */
        gmp_wg_done(&pp.pong);      /* ... before A may wait on it */
    }
    atomic_fetch_add(&pp.done, 1);
}

static void pp_a(void *arg)
{
    (void)arg;
    for (long r = 0; r < pp.rounds; r++) {
        gmp_wg_add(&pp.pong, 1);
        gmp_wg_done(&pp.ping);
        gmp_wg_wait(&pp.pong);
    }
    atomic_fetch_add(&pp.done, 1);
}

static void test_wg_goroutines_ping_pong(void **state)
{
    memset(&pp, 0, sizeof pp);
    pp.rounds = H_SCALE(50000L);
    gmp_wg_add(&pp.ping, 1);
    assert_int_equal(gmp_go(pp_b, NULL), 0);
    assert_int_equal(gmp_go(pp_a, NULL), 0);
    assert_int_equal(h_wait(&pp.done, 2), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- A tree of waiters -------------------------------------------------- */

#define TREE_FANOUT 4
#define TREE_DEPTH  6               /* 5461 nodes, 1365 of them waiting */

struct tnode {
    gmp_wg_t *parent;
    int depth;
};

static _Atomic int64_t tree_count, tree_bad;

static void tree_fn(void *arg)
{
    struct tnode *me = arg;
    if (me->depth > 0) {
        gmp_wg_t wg = GMP_WG_INIT;
        struct tnode kids[TREE_FANOUT];
        gmp_wg_add(&wg, TREE_FANOUT);
        for (int i = 0; i < TREE_FANOUT; i++) {
            kids[i] = (struct tnode){&wg, me->depth - 1};
            if (gmp_go(tree_fn, &kids[i]) != 0) {
                atomic_fetch_add(&tree_bad, 1);
                gmp_wg_done(&wg);
            }
        }
        gmp_wg_wait(&wg);           /* kids live on this stack: must wait */
    }
    atomic_fetch_add(&tree_count, 1);
    gmp_wg_done(me->parent);
}

static void test_wg_tree_of_waiting_goroutines(void **state)
{
    int64_t nodes = 0, level = 1;
    for (int d = 0; d <= TREE_DEPTH; d++) {
        nodes += level;
        level *= TREE_FANOUT;
    }
    for (int round = 0; round < 3; round++) {
        gmp_wg_t root = GMP_WG_INIT;
        struct tnode top = {&root, TREE_DEPTH};
        atomic_store(&tree_count, 0);
        atomic_store(&tree_bad, 0);
        gmp_wg_add(&root, 1);
        assert_int_equal(gmp_go(tree_fn, &top), 0);
        gmp_wg_wait(&root);
        assert_int_equal(atomic_load(&tree_count), nodes);
        assert_int_equal(atomic_load(&tree_bad), 0);
        assert_int_equal(h_wait_quiet(), 0);
    }
}

/* ---- Negative counter --------------------------------------------------- */

#define NEG_LINE "gmprt: fatal error: sync: negative WaitGroup counter"

static void neg_plain_child(void *arg)
{
    (void)arg;
    gmp_wg_t wg = GMP_WG_INIT;
    gmp_wg_add(&wg, 2);
    gmp_wg_done(&wg);
    gmp_wg_add(&wg, -2);            /* 1 - 2 < 0 */
    _exit(3);
}

static void neg_goroutine(void *arg)
{
    (void)arg;
    gmp_wg_t wg = GMP_WG_INIT;
    gmp_wg_done(&wg);
    _exit(4);
}

static void neg_goroutine_child(void *arg)
{
    (void)arg;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    gmp_main(neg_goroutine, NULL, &cfg);
    _exit(5);
}

static void check_neg(void (*child)(void *))
{
    struct h_child res;
    assert_int_equal(h_fork(child, NULL, &res), 0);
    h_assert_killed_by(&res, SIGABRT);
    if (!h_has_line(res.err, NEG_LINE))
        print_error("stderr lacks the line:\n%s\n", res.err);
    assert_true(h_has_line(res.err, NEG_LINE));
}

/* On a plain thread: no runtime needed. */
static void test_wg_negative_counter_aborts_thread(void **state)
{
    check_neg(neg_plain_child);
}

static void test_wg_negative_counter_aborts_goroutine(void **state)
{
    check_neg(neg_goroutine_child);
}

int main(void)
{
    const struct CMUnitTest fatal[] = {
        cmocka_unit_test(test_wg_negative_counter_aborts_thread),
        cmocka_unit_test(test_wg_negative_counter_aborts_goroutine),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_wg_wait_on_zero_returns_at_once),
        cmocka_unit_test(test_wg_test_thread_waits_for_workers),
        cmocka_unit_test(test_wg_goroutine_waits_for_workers),
        cmocka_unit_test(test_wg_done_releases_every_waiter),
        cmocka_unit_test(test_wg_reuse_each_wait_waits_its_round),
        cmocka_unit_test(test_wg_goroutines_ping_pong),
        cmocka_unit_test(test_wg_tree_of_waiting_goroutines),
        cmocka_unit_test(test_wg_thread_done_wakes_goroutines),
    };
    /* The forking tests first, while no runtime runs in this process. */
    return cmocka_run_group_tests_name("wg fatal", fatal, NULL, NULL)
         + cmocka_run_group_tests_name("wg procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("wg procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("wg procs=4", t, h_up_4, h_down);
}
