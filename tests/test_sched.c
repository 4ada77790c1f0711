/*
 * test_sched.c - the scheduler through the public API, at procs 1, 2, 4
 * and 8: every goroutine runs exactly once whoever spawns it, spawn trees,
 * gmp_yield's hand-off on one P, real parallelism, foreign-thread spawns
 * (global queue + wakep), ids, counts, and an idle runtime waking for new
 * work again and again (the lost-wakeup hunt).
 *
 * Goroutines only record (atomics, arrays); the test thread waits with a
 * deadline and asserts. The one white-box look is at sched.npidle, to
 * submit work exactly when every M has parked.
 */
#include "harness.h"

#include <pthread.h>

#include "internal.h"

/* ---- Every goroutine runs exactly once ---------------------------------- */

struct once {
    long n;
    _Atomic uint32_t *hits;         /* per index */
    _Atomic int64_t done;
    _Atomic int64_t spawn_errs;
    _Atomic int64_t bad_id;
};

static struct once *once_new(long n)
{
    struct once *o = calloc(1, sizeof *o);
    assert_non_null(o);
    o->n = n;
    o->hits = calloc((size_t)n, sizeof *o->hits);
    assert_non_null(o->hits);
    return o;
}

static void once_check_free(struct once *o)
{
    assert_int_equal(h_wait(&o->done, o->n), 0);
    long bad = 0, first = -1;
    for (long i = 0; i < o->n; i++)
        if (atomic_load(&o->hits[i]) != 1 && bad++ == 0)
            first = i;
    if (bad)
        print_error("%ld of %ld goroutines ran != 1 times; first: %ld ran "
                    "%u times\n", bad, o->n, first,
                    atomic_load(&o->hits[first]));
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&o->done), o->n);
    assert_int_equal(atomic_load(&o->spawn_errs), 0);
    assert_int_equal(atomic_load(&o->bad_id), 0);
    free(o->hits);
    free(o);
}

static struct once *g_once;

static void once_child(void *arg)
{
    long i = (long)(intptr_t)arg;
    if (gmp_id() == 0)
        atomic_fetch_add(&g_once->bad_id, 1);
    atomic_fetch_add_explicit(&g_once->hits[i], 1, memory_order_relaxed);
    atomic_fetch_add(&g_once->done, 1);
}

static void once_spawner(void *arg)
{
    struct once *o = arg;
    for (long i = 0; i < o->n; i++)
        if (gmp_go(once_child, (void *)(intptr_t)i) != 0) {
            atomic_fetch_add(&o->spawn_errs, 1);
            atomic_fetch_add(&o->done, 1);
        }
}

/* 10^6 goroutines spawned from one goroutine (runnext, ring spills to the
 * global queue, thieves) each run exactly once. */
static void test_sched_million_goroutines_run_once(void **state)
{
    g_once = once_new(H_SCALE(1000000L));
    assert_int_equal(gmp_go(once_spawner, g_once), 0);
    once_check_free(g_once);
    g_once = NULL;
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Foreign threads spawning at once ----------------------------------- */

#define FOREIGN_THREADS 4

struct foreign_arg {
    struct once *o;
    long from, to;
    _Atomic int *go;
};

static void *foreign_spawner(void *arg)
{
    struct foreign_arg *fa = arg;
    while (!atomic_load(fa->go))
        sched_yield();
    for (long i = fa->from; i < fa->to; i++)
        if (gmp_go(once_child, (void *)(intptr_t)i) != 0) {
            atomic_fetch_add(&fa->o->spawn_errs, 1);
            atomic_fetch_add(&fa->o->done, 1);
        }
    return NULL;
}

/* Four plain threads gmp_go 10^5 goroutines each, at the same time: all go
 * through the global queue and wakep; none is lost, none runs twice. */
static void test_sched_foreign_threads_spawn_run_once(void **state)
{
    long per = H_SCALE(100000L);
    g_once = once_new(per * FOREIGN_THREADS);
    _Atomic int go = 0;
    pthread_t th[FOREIGN_THREADS];
    struct foreign_arg fa[FOREIGN_THREADS];
    for (int t = 0; t < FOREIGN_THREADS; t++) {
        fa[t] = (struct foreign_arg){g_once, per * t, per * (t + 1), &go};
        assert_int_equal(pthread_create(&th[t], NULL, foreign_spawner,
                                        &fa[t]), 0);
    }
    atomic_store(&go, 1);
    for (int t = 0; t < FOREIGN_THREADS; t++)
        pthread_join(th[t], NULL);
    once_check_free(g_once);
    g_once = NULL;
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Spawn trees -------------------------------------------------------- */

#define TREE_FANOUT 4
#if H_SANITIZED
#define TREE_DEPTH  6               /* 4096 leaves, 5461 nodes */
#else
#define TREE_DEPTH  7               /* 16384 leaves, 21845 nodes */
#endif

static _Atomic int64_t tree_nodes, tree_leaves, tree_errs;

static void tree_node(void *arg)
{
    int depth = (int)(intptr_t)arg;
    atomic_fetch_add(&tree_nodes, 1);
    if (depth == 0) {
        atomic_fetch_add(&tree_leaves, 1);
        return;
    }
    for (int i = 0; i < TREE_FANOUT; i++)
        if (gmp_go(tree_node, (void *)(intptr_t)(depth - 1)) != 0)
            atomic_fetch_add(&tree_errs, 1);
    /* Let the children start while their parent still runs. */
    if (depth & 1)
        gmp_yield();
}

static void test_sched_spawn_tree_counts_every_node(void **state)
{
    int64_t leaves = 1, nodes = 0;
    for (int d = 0; d < TREE_DEPTH; d++) {
        nodes += leaves;
        leaves *= TREE_FANOUT;
    }
    nodes += leaves;
    for (int round = 0; round < 3; round++) {
        atomic_store(&tree_nodes, 0);
        atomic_store(&tree_leaves, 0);
        atomic_store(&tree_errs, 0);
        assert_int_equal(gmp_go(tree_node, (void *)(intptr_t)TREE_DEPTH), 0);
        assert_int_equal(h_wait(&tree_leaves, leaves), 0);
        assert_int_equal(h_wait(&tree_nodes, nodes), 0);
        assert_int_equal(atomic_load(&tree_leaves), leaves);
        assert_int_equal(atomic_load(&tree_errs), 0);
        assert_int_equal(h_wait_quiet(), 0);
        assert_int_equal(atomic_load(&tree_nodes), nodes);
    }
}

/* A chain: each goroutine spawns the next and exits (10^5 links). */
static _Atomic int64_t chain_done;

static void chain_link(void *arg)
{
    long left = (long)(intptr_t)arg;
    if (left > 1 && gmp_go(chain_link, (void *)(intptr_t)(left - 1)) != 0)
        return;                     /* shows as a short count */
    atomic_fetch_add(&chain_done, 1);
}

static void test_sched_spawn_chain_completes(void **state)
{
    long n = H_SCALE(100000L);
    atomic_store(&chain_done, 0);
    assert_int_equal(gmp_go(chain_link, (void *)(intptr_t)n), 0);
    assert_int_equal(h_wait(&chain_done, n), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(atomic_load(&chain_done), n);
}

/* ---- gmp_yield on one P ------------------------------------------------- */

/*
 * Three goroutines A, B and C on one P take turns through a shared
 * variable: each waits for its turn with gmp_yield(), records its name,
 * passes the turn on. Only gmp_yield can hand the single P over, so
 * finishing at all proves a yield lets the others run. Go's Gosched puts
 * the yielder at the global queue's tail, behind every runnable G: both
 * others run before it does again, so a wait costs one yield; every 61st
 * schedule takes the global head first, which can be the yielder once, so
 * twice at most: total yields <= 2 per turn. (With two players a yield
 * that skipped a runnable G could still pass: the one it ran would be the
 * other.) They are spawned by a parent that holds the P until all exist,
 * so none waits for another's mere creation.
 */
#define ALT_PLAYERS 3
#define ALT_TURNS   2000            /* per player */
#define ALT_CAP     1000000         /* yields per wait before giving up */

static struct {
    _Atomic int turn;               /* the player whose turn it is */
    _Atomic int pos;
    char seq[ALT_PLAYERS * ALT_TURNS];
    _Atomic int64_t yields[ALT_PLAYERS];
    _Atomic int64_t maxwait[ALT_PLAYERS];
    _Atomic int64_t gaveup;
    _Atomic int64_t done;
} alt;

static void alt_player(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int k = 0; k < ALT_TURNS; k++) {
        int64_t w = 0;
        while (atomic_load(&alt.turn) != me) {
            if (++w > ALT_CAP) {
                atomic_fetch_add(&alt.gaveup, 1);
                atomic_store(&alt.turn, me);    /* unblock the others */
                break;
            }
            gmp_yield();
        }
        atomic_fetch_add(&alt.yields[me], w);
        if (w > atomic_load(&alt.maxwait[me]))
            atomic_store(&alt.maxwait[me], w);
        alt.seq[atomic_fetch_add(&alt.pos, 1) % (ALT_PLAYERS * ALT_TURNS)] =
            (char)('A' + me);
        atomic_store(&alt.turn, (me + 1) % ALT_PLAYERS);
    }
    atomic_fetch_add(&alt.done, 1);
}

static void alt_parent(void *arg)
{
    (void)arg;
    for (int i = 0; i < ALT_PLAYERS; i++)
        gmp_go(alt_player, (void *)(intptr_t)i);
}

static void test_sched_yield_alternates_on_one_p(void **state)
{
    memset(&alt, 0, sizeof alt);
    assert_int_equal(gmp_go(alt_parent, NULL), 0);
    assert_int_equal(h_wait(&alt.done, ALT_PLAYERS), 0);
    assert_int_equal(atomic_load(&alt.gaveup), 0);
    assert_int_equal(atomic_load(&alt.pos), ALT_PLAYERS * ALT_TURNS);
    for (int i = 0; i < ALT_PLAYERS * ALT_TURNS; i++)
        assert_int_equal(alt.seq[i], 'A' + i % ALT_PLAYERS);
    int64_t total = 0;
    for (int i = 0; i < ALT_PLAYERS; i++) {
        print_message("%c: yields %lld, longest wait %lld\n", 'A' + i,
                      (long long)atomic_load(&alt.yields[i]),
                      (long long)atomic_load(&alt.maxwait[i]));
        assert_true(atomic_load(&alt.maxwait[i]) <= 2);
        total += atomic_load(&alt.yields[i]);
    }
    assert_true(total <= 2 * ALT_PLAYERS * ALT_TURNS);
    assert_int_equal(h_wait_quiet(), 0);
}

/* On one P a goroutine spawned from a goroutine goes to runnext, kicking
 * the previous one to the ring's tail: after the parent finishes, the
 * newest runs first, then the others in spawn order. */
static _Atomic int64_t order_pos, order_done;
static int order_seen[4];

static void order_child(void *arg)
{
    order_seen[atomic_fetch_add(&order_pos, 1) & 3] = (int)(intptr_t)arg;
    atomic_fetch_add(&order_done, 1);
}

static void order_parent(void *arg)
{
    (void)arg;
    for (int i = 1; i <= 4; i++)
        gmp_go(order_child, (void *)(intptr_t)i);
}

static void test_sched_runnext_runs_newest_first(void **state)
{
    atomic_store(&order_pos, 0);
    atomic_store(&order_done, 0);
    assert_int_equal(gmp_go(order_parent, NULL), 0);
    assert_int_equal(h_wait(&order_done, 4), 0);
    assert_int_equal(atomic_load(&order_pos), 4);
    assert_int_equal(h_wait_quiet(), 0);
    const int want[4] = {4, 1, 2, 3};
    for (int i = 0; i < 4; i++)
        assert_int_equal(order_seen[i], want[i]);
}

/* A goroutine that yields lets one just spawned run within two yields
 * (the second only if the 61-tick fairness check picked it first). */
static _Atomic int64_t spawned_ran, yields_needed;

static void spawned_fn(void *arg)
{
    (void)arg;
    atomic_store(&spawned_ran, 1);
}

static void yielder_fn(void *arg)
{
    (void)arg;
    int64_t n = 0;
    gmp_go(spawned_fn, NULL);
    while (!atomic_load(&spawned_ran) && n < ALT_CAP) {
        gmp_yield();
        n++;
    }
    atomic_store(&yields_needed, n);
}

static void test_sched_yield_lets_spawned_run(void **state)
{
    for (int round = 0; round < 200; round++) {
        atomic_store(&spawned_ran, 0);
        atomic_store(&yields_needed, -1);
        assert_int_equal(gmp_go(yielder_fn, NULL), 0);
        assert_int_equal(h_wait_quiet(), 0);
        assert_int_equal(atomic_load(&spawned_ran), 1);
        assert_in_range(atomic_load(&yields_needed), 1, 2);
    }
}

/* Gosched's "behind every runnable G" includes the global queue: a G that
 * a plain thread queues there (gmp_go off the runtime) runs before either
 * of two yielding goroutines runs a third time, though both sit on the
 * P's own queue. A yield that put the yielder on the local queue instead
 * would keep the two alternating until the 61st tick looked globally. */
#define GQ_ROUNDS 200

static struct {
    _Atomic int64_t queued, ran;    /* rounds whose G was queued, ran */
    _Atomic int64_t worst;          /* yields between seeing it queued
                                       and seeing it ran */
    _Atomic int64_t done;
} gq;

static void gq_target(void *arg)
{
    (void)arg;
    atomic_fetch_add(&gq.ran, 1);
}

static void gq_yielder(void *arg)
{
    (void)arg;
    for (int64_t r = 0; r < GQ_ROUNDS; r++) {
        while (atomic_load(&gq.queued) <= r)
            gmp_yield();
        int64_t n = 0;
        while (atomic_load(&gq.ran) <= r && n < ALT_CAP) {
            gmp_yield();
            n++;
        }
        if (n > atomic_load(&gq.worst))
            atomic_store(&gq.worst, n);
    }
    atomic_fetch_add(&gq.done, 1);
}

static void test_sched_yield_goes_behind_global_queue(void **state)
{
    memset(&gq, 0, sizeof gq);
    assert_int_equal(gmp_go(gq_yielder, NULL), 0);
    assert_int_equal(gmp_go(gq_yielder, NULL), 0);
    for (int64_t r = 0; r < GQ_ROUNDS; r++) {
        assert_int_equal(gmp_go(gq_target, NULL), 0);  /* global queue */
        atomic_store(&gq.queued, r + 1);
        assert_int_equal(h_wait(&gq.ran, r + 1), 0);
    }
    assert_int_equal(h_wait(&gq.done, 2), 0);
    assert_int_equal(h_wait_quiet(), 0);
    print_message("most yields before the global G ran: %lld\n",
                  (long long)atomic_load(&gq.worst));
    assert_true(atomic_load(&gq.worst) <= 3);
}

/* ---- Parallelism -------------------------------------------------------- */

/*
 * Go's TestGoroutineParallelism: procs goroutines pass a counter around in
 * lock-step without ever yielding: goroutine p waits for x == procs*i + p
 * and stores x + 1. They run in groups with asynchronous preemption off,
 * so they finish only if all run at the same time, each on its own P: a
 * goroutine left on a run queue while a P idles and no M spins (a lost
 * wake-up, sched.c) is never rescued, and the spin deadline turns that
 * "never" into a failure. Many tries, since each lasts microseconds and
 * the window is narrow: the Ms of one try are still looking for work
 * when the next try's goroutines arrive.
 */
#define PAR_ROUNDS 3
#define PAR_TRIES  (H_SLOW ? 100 : 1000)    /* at procs=2; fewer above */

static struct {
    int procs;
    _Atomic uint32_t x;
    _Atomic int64_t done;
    _Atomic int64_t failed;
    int64_t deadline;
} par;

static void par_worker(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < PAR_ROUNDS; i++) {
        uint32_t want = (uint32_t)(par.procs * i + p);
        for (unsigned k = 0; atomic_load(&par.x) != want; k++) {
            if ((k & 1023) == 0 &&
                (atomic_load(&par.failed) || gmp_nanotime() > par.deadline)) {
                if (!atomic_exchange(&par.failed, 1))
                    gmp_dump(stderr);   /* where the others are */
                atomic_fetch_add(&par.done, 1);
                return;
            }
            gmp__cpu_relax();
        }
        atomic_store(&par.x, want + 1);
    }
    atomic_fetch_add(&par.done, 1);
}

static void par_spawner(void *arg)
{
    (void)arg;
    for (int p = 0; p < par.procs; p++)
        gmp_go(par_worker, (void *)(intptr_t)p);
}

static void test_sched_goroutines_run_in_parallel(void **state)
{
    struct h_env *env = *state;
    /* Above two Ps, on a machine of two cores, every hand-off waits for
     * the kernel to run the right thread: a try takes milliseconds. */
    int tries = PAR_TRIES * 8 / (env->procs * env->procs * env->procs);
    for (int try = 0; try < tries; try++) {
        memset(&par, 0, sizeof par);
        par.procs = env->procs;
        par.deadline = gmp_nanotime() + H_DEADLINE_NS / 2;
        assert_int_equal(gmp_go(par_spawner, NULL), 0);
        assert_int_equal(h_wait(&par.done, env->procs), 0);
        if (atomic_load(&par.failed))
            fail_msg("try %d: the goroutines never all ran at once", try);
        assert_int_equal(atomic_load(&par.x),
                         (uint32_t)(env->procs * PAR_ROUNDS));
        assert_int_equal(h_wait_quiet(), 0);
    }
}

/* ---- Ids, counts, procs ------------------------------------------------- */

#define NIDS_MAX 10000
#define NIDS     H_LIVE(NIDS_MAX)   /* all alive at once (they yield) */

static uint64_t ids_before[NIDS_MAX], ids_after[NIDS_MAX];
static _Atomic int64_t ids_done;

static void id_fn(void *arg)
{
    long i = (long)(intptr_t)arg;
    ids_before[i] = gmp_id();
    gmp_yield();                    /* may resume on another M */
    ids_after[i] = gmp_id();
    atomic_fetch_add(&ids_done, 1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_sched_id_unique_nonzero_zero_outside(void **state)
{
    assert_int_equal(gmp_id(), 0);
    atomic_store(&ids_done, 0);
    for (long i = 0; i < NIDS; i++)
        assert_int_equal(gmp_go(id_fn, (void *)(intptr_t)i), 0);
    assert_int_equal(h_wait(&ids_done, NIDS), 0);
    for (long i = 0; i < NIDS; i++) {
        assert_true(ids_before[i] != 0);
        assert_true(ids_before[i] == ids_after[i]);
    }
    qsort(ids_before, NIDS, sizeof ids_before[0], cmp_u64);
    for (long i = 1; i < NIDS; i++)
        assert_true(ids_before[i - 1] < ids_before[i]);
    assert_int_equal(gmp_id(), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

static struct {
    _Atomic int64_t started, finished;
    _Atomic int release;
    _Atomic int64_t procs_seen;
} live;

static void live_fn(void *arg)
{
    (void)arg;
    atomic_store(&live.procs_seen, gmp_procs());
    atomic_fetch_add(&live.started, 1);
    while (!atomic_load(&live.release))
        gmp_yield();
    atomic_fetch_add(&live.finished, 1);
}

/* While n goroutines live, gmp_num_goroutines() counts exactly them; after
 * they finish it drops to 0. */
static void test_sched_num_goroutines_counts_and_drops(void **state)
{
    const int64_t n = 1000;
    memset(&live, 0, sizeof live);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(gmp_num_goroutines(), 0);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(gmp_go(live_fn, NULL), 0);
    assert_int_equal(h_wait(&live.started, n), 0);
    assert_int_equal(gmp_num_goroutines(), n);
    atomic_store(&live.release, 1);
    assert_int_equal(h_wait(&live.finished, n), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(gmp_num_goroutines(), 0);
}

static void test_sched_procs_is_configured(void **state)
{
    struct h_env *env = *state;
    assert_int_equal(gmp_procs(), env->procs);
    memset(&live, 0, sizeof live);
    atomic_store(&live.release, 1);
    assert_int_equal(gmp_go(live_fn, NULL), 0);
    assert_int_equal(h_wait(&live.finished, 1), 0);
    assert_int_equal(atomic_load(&live.procs_seen), env->procs);
    assert_int_equal(h_wait_quiet(), 0);
}

static void test_sched_yield_outside_goroutine_returns(void **state)
{
    for (int i = 0; i < 100; i++)
        gmp_yield();
    assert_int_equal(gmp_id(), 0);
}

/* ---- Waking an idle runtime --------------------------------------------- */

static bool all_ps_idle(void *arg)
{
    struct schedt *s = h_sched();
    (void)arg;
    return s && atomic_load(&s->npidle) == s->procs;
}

static _Atomic int64_t wake_ran;

static void wake_child(void *arg)
{
    (void)arg;
    atomic_fetch_add(&wake_ran, 1);
}

static void wake_fn(void *arg)
{
    /* Half the rounds spawn once more from the goroutine: the runnext
     * path's wakep. */
    if ((intptr_t)arg & 1)
        gmp_go(wake_child, NULL);
    atomic_fetch_add(&wake_ran, 1);
}

/*
 * Rounds of "spawn from the test thread, wait until it ran". Each round
 * starts at a different point of the Ms' way to sleep: every P idle (all
 * Ms parked or parking), at once after the last round (Ms spinning or
 * giving up their P), or after a short random spin. A submission stranded
 * in the global queue while every M sleeps shows as a wait that never
 * ends.
 */
static void test_sched_idle_runtime_wakes_for_new_work(void **state)
{
    int rounds = H_SANITIZED ? 300 : 3000;
    uint64_t x = 88172645463325252ULL;
    int64_t want = 0;
    atomic_store(&wake_ran, 0);
    for (int r = 0; r < rounds; r++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        switch (r % 3) {
        case 0:
            assert_int_equal(h_wait_until(all_ps_idle, NULL, "all Ps idle"),
                             0);
            break;
        case 1:
            break;
        default:
            for (unsigned k = (unsigned)(x % 20000); k > 0; k--)
                gmp__cpu_relax();
            break;
        }
        assert_int_equal(gmp_go(wake_fn, (void *)(intptr_t)(x >> 32)), 0);
        want += 1 + (int64_t)((x >> 32) & 1);
        if (h_wait(&wake_ran, want) != 0)
            fail_msg("round %d: the goroutine never ran", r);
    }
    assert_int_equal(atomic_load(&wake_ran), want);
    assert_int_equal(h_wait_quiet(), 0);
}

int main(void)
{
#define COMMON                                                          \
    cmocka_unit_test(test_sched_procs_is_configured),                  \
    cmocka_unit_test(test_sched_yield_outside_goroutine_returns),      \
    cmocka_unit_test(test_sched_million_goroutines_run_once),          \
    cmocka_unit_test(test_sched_foreign_threads_spawn_run_once),       \
    cmocka_unit_test(test_sched_spawn_tree_counts_every_node),         \
    cmocka_unit_test(test_sched_spawn_chain_completes),                \
    cmocka_unit_test(test_sched_id_unique_nonzero_zero_outside),       \
    cmocka_unit_test(test_sched_num_goroutines_counts_and_drops),      \
    cmocka_unit_test(test_sched_idle_runtime_wakes_for_new_work)

    const struct CMUnitTest one[] = {
        COMMON,
    };
    /* The orders these check are gmp_yield's and gmp_go's; a goroutine
     * preempted by signal (its thread descheduled past a slice, on a
     * loaded machine) goes behind the others too and shifts them. */
    const struct CMUnitTest order[] = {
        cmocka_unit_test(test_sched_yield_alternates_on_one_p),
        cmocka_unit_test(test_sched_runnext_runs_newest_first),
        cmocka_unit_test(test_sched_yield_lets_spawned_run),
        cmocka_unit_test(test_sched_yield_goes_behind_global_queue),
    };
    const struct CMUnitTest many[] = {
        COMMON,
    };
    const struct CMUnitTest parallel[] = {
        cmocka_unit_test(test_sched_goroutines_run_in_parallel),
    };
    return cmocka_run_group_tests_name("sched procs=1", one, h_up_1, h_down)
         + cmocka_run_group_tests_name("sched order procs=1", order,
                                       h_up_nopreempt_1, h_down)
         + cmocka_run_group_tests_name("sched procs=2", many, h_up_2, h_down)
         + cmocka_run_group_tests_name("sched procs=4", many, h_up_4, h_down)
         + cmocka_run_group_tests_name("sched procs=8", many, h_up_8, h_down)
         + cmocka_run_group_tests_name("sched parallel procs=2", parallel,
                                       h_up_nopreempt_2, h_down)
         + cmocka_run_group_tests_name("sched parallel procs=4", parallel,
                                       h_up_nopreempt_4, h_down)
         + cmocka_run_group_tests_name("sched parallel procs=8", parallel,
                                       h_up_nopreempt_8, h_down);
}
