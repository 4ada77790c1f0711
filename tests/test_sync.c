/*
 * test_sync.c - Go's sync package as gmprt has it: gmp_mutex_t,
 * gmp_rwmutex_t, gmp_cond_t, gmp_once_t, and what test_wg.c leaves out of
 * gmp_wg_t, at procs 1, 2 and 4, shared by goroutines and plain threads.
 *
 * Black-box: only the public API. Goroutines and helper threads record
 * into atomics; the test thread waits for them and asserts. Where a test
 * must know that a goroutine or thread is really blocked (not merely about
 * to block), it either uses the mutex a condition wait releases (a waiter
 * that set a flag under the mutex has queued itself once the mutex is
 * free again), or waits until the process is still (every other thread
 * asleep, twice, with no context switch in between: see h_still below);
 * neither is a timing assumption.
 *
 * The fatal misuse (unlock of an unlocked mutex) runs in forked children,
 * first, while no runtime runs in this process.
 */
#include "harness.h"

#include <dirent.h>
#include <pthread.h>

/* ---- Helpers ------------------------------------------------------------ */

/* ---- Mutex: zero value, trylock ----------------------------------------- */

static struct {
    _Atomic int64_t rc, done;
} tl;

static void trylock_fn(void *arg)
{
    gmp_mutex_t *mu = arg;
    int rc = gmp_mutex_trylock(mu);
    if (rc == 0)
        gmp_mutex_unlock(mu);
    atomic_store(&tl.rc, rc);
    atomic_fetch_add(&tl.done, 1);
}

/* gmp_mutex_trylock from a goroutine, as the test thread sees it. */
static int trylock_in_goroutine(gmp_mutex_t *mu)
{
    int64_t want = atomic_load(&tl.done) + 1;
    atomic_store(&tl.rc, 12345);
    assert_int_equal(gmp_go(trylock_fn, mu), 0);
    assert_int_equal(h_wait(&tl.done, want), 0);
    return (int)atomic_load(&tl.rc);
}

static gmp_mutex_t static_mu;       /* static storage: zero */

static void test_mutex_zero_value_and_trylock(void **state)
{
    gmp_mutex_t init = GMP_MUTEX_INIT, zeroed;
    memset(&zeroed, 0x5a, sizeof zeroed);
    memset(&zeroed, 0, sizeof zeroed);
    gmp_mutex_t *heap = calloc(1, sizeof *heap);
    assert_non_null(heap);
    gmp_mutex_t *mus[] = {&init, &zeroed, &static_mu, heap};
    for (size_t i = 0; i < sizeof mus / sizeof mus[0]; i++) {
        gmp_mutex_t *mu = mus[i];
        assert_int_equal(trylock_in_goroutine(mu), 0);   /* unlocked */
        assert_int_equal(gmp_mutex_trylock(mu), 0);
        assert_int_equal(gmp_mutex_trylock(mu), GMP_EBUSY);   /* not reentrant */
        assert_int_equal(trylock_in_goroutine(mu), GMP_EBUSY);
        gmp_mutex_unlock(mu);
        assert_int_equal(trylock_in_goroutine(mu), 0);
        gmp_mutex_lock(mu);                 /* a plain thread, uncontended */
        assert_int_equal(gmp_mutex_trylock(mu), GMP_EBUSY);
        assert_int_equal(trylock_in_goroutine(mu), GMP_EBUSY);
        gmp_mutex_unlock(mu);
        assert_int_equal(gmp_mutex_trylock(mu), 0);
        gmp_mutex_unlock(mu);
    }
    free(heap);
    assert_int_equal(gmp_mutex_trylock(NULL), GMP_EINVAL);
    gmp_mutex_lock(NULL);                   /* a NULL object is ignored */
    gmp_mutex_unlock(NULL);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Mutex: hammering --------------------------------------------------- */

static struct {
    gmp_mutex_t mu;
    long counter;                   /* plain: only the mutex orders it */
    _Atomic int in_cs;
    _Atomic int64_t overlaps, done;
    long iters;
} ham;

/* iters increments of a plain counter under the mutex, with a check that
 * nobody else is inside. Every 128th time it yields while holding the
 * mutex, so that others block on it (park or sleep) meanwhile. */
static void ham_body(long iters)
{
    for (long i = 0; i < iters; i++) {
        gmp_mutex_lock(&ham.mu);
        if (atomic_exchange_explicit(&ham.in_cs, 1, memory_order_relaxed))
            atomic_fetch_add(&ham.overlaps, 1);
        long c = ham.counter;
        if ((i & 127) == 0)
            gmp_yield();
        ham.counter = c + 1;
        atomic_store_explicit(&ham.in_cs, 0, memory_order_relaxed);
        gmp_mutex_unlock(&ham.mu);
    }
}

static void ham_goroutine(void *arg)
{
    (void)arg;
    ham_body(ham.iters);
    atomic_fetch_add(&ham.done, 1);
}

static void *ham_thread(void *arg)
{
    ham_body((long)(intptr_t)arg);
    atomic_fetch_add(&ham.done, 1);
    return NULL;
}

/* 2000 goroutines x 1000 increments: the count is exact and no two were
 * ever inside at once. Sanitized, 20 x 100: under TSan every switch
 * between goroutines that park on the mutex is a fiber switch, and 2000
 * of them contending took half a minute. */
static void test_mutex_hammer_goroutines(void **state)
{
    long n = H_SCALE(2000), iters = H_SANITIZED ? 100 : 1000;
    memset(&ham, 0, sizeof ham);
    ham.iters = iters;
    for (long i = 0; i < n; i++)
        assert_int_equal(gmp_go(ham_goroutine, NULL), 0);
    assert_int_equal(h_wait(&ham.done, n), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(atomic_load(&ham.overlaps), 0);
    assert_int_equal(ham.counter, n * iters);
    assert_int_equal(gmp_mutex_trylock(&ham.mu), 0);
    gmp_mutex_unlock(&ham.mu);
}

/* Goroutines and plain threads on one mutex: the threads block by
 * sleeping, goroutines by parking, and each kind wakes the other. */
static void test_mutex_shared_with_threads(void **state)
{
    enum { THREADS = 3 };
    long n = H_SCALE(100), iters = H_SCALE(2000), titers = H_SCALE(30000);
    pthread_t t[THREADS];
    memset(&ham, 0, sizeof ham);
    ham.iters = iters;
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, ham_thread,
                                        (void *)(intptr_t)titers), 0);
    for (long i = 0; i < n; i++)
        assert_int_equal(gmp_go(ham_goroutine, NULL), 0);
    ham_body(titers);                       /* the test thread too */
    assert_int_equal(h_wait(&ham.done, n + THREADS), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(atomic_load(&ham.overlaps), 0);
    assert_int_equal(ham.counter, n * iters + (THREADS + 1) * titers);
}

/* ---- Mutex: not owned --------------------------------------------------- */

static struct {
    gmp_mutex_t mu;
    _Atomic int64_t seq;
    _Atomic int64_t a_done, w_try, w_seq, w_done, u_seq, u_done;
} own;

static void own_locker(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&own.mu);                /* and leaves it locked */
    atomic_store(&own.a_done, 1);
}

static void own_waiter(void *arg)
{
    (void)arg;
    atomic_store(&own.w_try, 1);
    gmp_mutex_lock(&own.mu);
    atomic_store(&own.w_seq, atomic_fetch_add(&own.seq, 1) + 1);
    gmp_mutex_unlock(&own.mu);
    atomic_store(&own.w_done, 1);
}

static void own_unlocker(void *arg)
{
    (void)arg;
    atomic_store(&own.u_seq, atomic_fetch_add(&own.seq, 1) + 1);
    gmp_mutex_unlock(&own.mu);              /* locked by someone else */
    atomic_store(&own.u_done, 1);
}

/* A goroutine locks and exits; a blocked waiter gets the mutex when a
 * third party (goroutine or plain thread) unlocks it, and not before.
 * Then the test thread unlocks a mutex a goroutine locked. */
static void test_mutex_unlock_by_another(void **state)
{
    for (int round = 0; round < 8; round++) {
        struct runner w, u;
        memset(&own, 0, sizeof own);
        assert_int_equal(gmp_go(own_locker, NULL), 0);
        assert_int_equal(h_wait(&own.a_done, 1), 0);
        assert_int_equal(gmp_mutex_trylock(&own.mu), GMP_EBUSY);
        run_as(&w, round & 1, own_waiter, NULL);
        assert_int_equal(h_wait(&own.w_try, 1), 0);
        assert_int_equal(h_still(), 0);     /* the waiter is blocked */
        assert_int_equal(atomic_load(&own.w_seq), 0);
        run_as(&u, round & 2, own_unlocker, NULL);
        assert_int_equal(h_wait(&own.w_done, 1), 0);
        assert_int_equal(h_wait(&own.u_done, 1), 0);
        run_join(&w);
        run_join(&u);
        assert_true(atomic_load(&own.u_seq) > 0);
        assert_true(atomic_load(&own.w_seq) > atomic_load(&own.u_seq));
        assert_int_equal(gmp_mutex_trylock(&own.mu), 0);
        gmp_mutex_unlock(&own.mu);

        /* The test thread unlocks what a goroutine locked. */
        atomic_store(&own.a_done, 0);
        assert_int_equal(gmp_go(own_locker, NULL), 0);
        assert_int_equal(h_wait(&own.a_done, 1), 0);
        assert_int_equal(trylock_in_goroutine(&own.mu), GMP_EBUSY);
        gmp_mutex_unlock(&own.mu);
        assert_int_equal(trylock_in_goroutine(&own.mu), 0);
        assert_int_equal(h_wait_quiet(), 0);
    }
}

/* ---- Mutex: starvation -------------------------------------------------- */

static struct {
    gmp_mutex_t mu;
    _Atomic int stop;
    _Atomic int64_t hogs_in, hogs_out, got;
    long sink;                      /* plain, under mu */
} sv;

/* Re-locks in a tight loop, holding the mutex most of the time; never
 * yields. */
static void sv_hog(void *arg)
{
    (void)arg;
    atomic_fetch_add(&sv.hogs_in, 1);
    for (long n = 1; !atomic_load_explicit(&sv.stop, memory_order_relaxed);
         n++) {
        gmp_mutex_lock(&sv.mu);
        for (int i = 0; i < 200; i++)
            __atomic_store_n(&sv.sink, sv.sink + 1, __ATOMIC_RELAXED);
#if defined(H_TSAN)
        /* No preemption by signal under TSan: let the scheduler in now
         * and then, with the mutex held so that the waiter finds it
         * taken. */
        if (n % 1000 == 0)
            gmp_yield();
#endif
        gmp_mutex_unlock(&sv.mu);
    }
    atomic_fetch_add(&sv.hogs_out, 1);
}

static void sv_waiter(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&sv.mu);
    atomic_fetch_add(&sv.got, 1);
    gmp_mutex_unlock(&sv.mu);
}

static void *sv_hog_thread(void *arg)
{
    sv_hog(arg);
    return NULL;
}

/* One goroutine per P (and in odd rounds a plain thread too) re-locks in
 * a tight loop; a goroutine, or in some rounds a plain thread, that needs
 * the mutex once must get it (starvation mode hands it over). The test
 * only waits for that; the hogs stop once it happened. */
static void test_mutex_waiter_not_starved(void **state)
{
    struct h_env *env = *state;
    int rounds = H_SLOW ? 4 : 16;
    for (int round = 0; round < rounds; round++) {
        struct runner w;
        pthread_t ht;
        bool thread_hog = round & 1;
        int hogs = env->procs + (thread_hog ? 1 : 0);
        memset(&sv, 0, sizeof sv);
        for (int i = 0; i < env->procs; i++)
            assert_int_equal(gmp_go(sv_hog, NULL), 0);
        if (thread_hog)
            assert_int_equal(pthread_create(&ht, NULL, sv_hog_thread, NULL), 0);
        assert_int_equal(h_wait(&sv.hogs_in, hogs), 0);
        run_as(&w, round & 2, sv_waiter, NULL);
        int rc = h_wait(&sv.got, 1);
        atomic_store(&sv.stop, 1);
        assert_int_equal(h_wait(&sv.hogs_out, hogs), 0);
        if (thread_hog)
            assert_int_equal(pthread_join(ht, NULL), 0);
        assert_int_equal(rc, 0);
        assert_int_equal(h_wait(&sv.got, 1), 0);
        run_join(&w);
        assert_int_equal(h_wait_quiet(), 0);
    }
}

/* ---- RWMutex: readers share --------------------------------------------- */

static struct {
    gmp_rwmutex_t rw;
    int n;
    _Atomic int64_t inside, out, w_done;
} rs;

/* Holds its read lock until n readers hold one: completes only if they
 * can all be inside at once. */
static void rs_reader(void *arg)
{
    (void)arg;
    gmp_rwmutex_rlock(&rs.rw);
    atomic_fetch_add(&rs.inside, 1);
    while (atomic_load(&rs.inside) < rs.n)
        gmp_yield();
    gmp_rwmutex_runlock(&rs.rw);
    atomic_fetch_add(&rs.out, 1);
}

static void rs_writer(void *arg)
{
    (void)arg;
    gmp_rwmutex_lock(&rs.rw);
    gmp_rwmutex_unlock(&rs.rw);
    atomic_store(&rs.w_done, 1);
}

/* The test thread holds a read lock; 8 goroutines and a plain thread take
 * read locks too and all hold them at once. Then a writer gets in. */
static void test_rwmutex_readers_share(void **state)
{
    enum { GOROUTINES = 8 };
    for (int round = 0; round < 20; round++) {
        struct runner t;
        memset(&rs, 0, sizeof rs);
        if (round & 1)
            memset(&rs.rw, 0, sizeof rs.rw);
        else
            rs.rw = (gmp_rwmutex_t)GMP_RWMUTEX_INIT;
        rs.n = GOROUTINES + 1;
        gmp_rwmutex_rlock(&rs.rw);
        for (int i = 0; i < GOROUTINES; i++)
            assert_int_equal(gmp_go(rs_reader, NULL), 0);
        run_as(&t, true, rs_reader, NULL);
        assert_int_equal(h_wait(&rs.out, rs.n), 0);
        run_join(&t);
        assert_int_equal(atomic_load(&rs.inside), rs.n);
        gmp_rwmutex_runlock(&rs.rw);
        assert_int_equal(gmp_go(rs_writer, NULL), 0);
        assert_int_equal(h_wait(&rs.w_done, 1), 0);
        assert_int_equal(h_wait_quiet(), 0);
    }
    gmp_rwmutex_rlock(NULL);                /* a NULL object is ignored */
    gmp_rwmutex_runlock(NULL);
    gmp_rwmutex_lock(NULL);
    gmp_rwmutex_unlock(NULL);
}

/* ---- RWMutex: hammering ------------------------------------------------- */

static struct {
    gmp_rwmutex_t rw;
    _Atomic int64_t readers_in, writers_in, bad, done;
    long a, b, writes;              /* plain: a writer keeps a == b outside */
    long r_iters, w_iters;
} rh;

static void rh_write(long i)
{
    gmp_rwmutex_lock(&rh.rw);
    if (atomic_fetch_add_explicit(&rh.writers_in, 1, memory_order_relaxed) ||
        atomic_load_explicit(&rh.readers_in, memory_order_relaxed))
        atomic_fetch_add(&rh.bad, 1);
    rh.a++;
    if ((i & 31) == 0)
        gmp_yield();
    rh.b++;
    rh.writes++;
    atomic_fetch_sub_explicit(&rh.writers_in, 1, memory_order_relaxed);
    gmp_rwmutex_unlock(&rh.rw);
}

static void rh_read(long i)
{
    gmp_rwmutex_rlock(&rh.rw);
    atomic_fetch_add_explicit(&rh.readers_in, 1, memory_order_relaxed);
    if (atomic_load_explicit(&rh.writers_in, memory_order_relaxed))
        atomic_fetch_add(&rh.bad, 1);
    long a = __atomic_load_n(&rh.a, __ATOMIC_RELAXED);
    if ((i & 63) == 0)
        gmp_yield();
    long b = __atomic_load_n(&rh.b, __ATOMIC_RELAXED);
    if (a != b)
        atomic_fetch_add(&rh.bad, 1);
    atomic_fetch_sub_explicit(&rh.readers_in, 1, memory_order_relaxed);
    gmp_rwmutex_runlock(&rh.rw);
}

static void rh_reader(void *arg)
{
    (void)arg;
    for (long i = 0; i < rh.r_iters; i++)
        rh_read(i);
    atomic_fetch_add(&rh.done, 1);
}

static void rh_writer(void *arg)
{
    (void)arg;
    for (long i = 0; i < rh.w_iters; i++)
        rh_write(i);
    atomic_fetch_add(&rh.done, 1);
}

/* 32 reader and 4 writer goroutines, a reader and a writer thread: a
 * writer is alone (no reader, no writer), readers never see a write half
 * done, and no write is lost. */
static void test_rwmutex_hammer(void **state)
{
    enum { READERS = 32, WRITERS = 4 };
    struct runner tr, tw;
    memset(&rh, 0, sizeof rh);
    rh.r_iters = H_SCALE(4000);
    rh.w_iters = H_SCALE(2000);
    run_as(&tr, true, rh_reader, NULL);
    run_as(&tw, true, rh_writer, NULL);
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(gmp_go(rh_reader, NULL), 0);
        if (i < WRITERS)
            assert_int_equal(gmp_go(rh_writer, NULL), 0);
    }
    assert_int_equal(h_wait(&rh.done, READERS + WRITERS + 2), 0);
    run_join(&tr);
    run_join(&tw);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(atomic_load(&rh.bad), 0);
    assert_int_equal(rh.writes, (WRITERS + 1) * rh.w_iters);
    assert_int_equal(rh.a, rh.writes);
    assert_int_equal(rh.b, rh.writes);
}

/* ---- RWMutex: a waiting writer keeps new readers out --------------------- */

static struct {
    gmp_rwmutex_t rw;
    _Atomic int64_t seq;
    _Atomic int64_t w_try, w_seq, w_done, r_try, r_seq, r_done;
} wr;

static void wr_writer(void *arg)
{
    (void)arg;
    atomic_store(&wr.w_try, 1);
    gmp_rwmutex_lock(&wr.rw);
    atomic_store(&wr.w_seq, atomic_fetch_add(&wr.seq, 1) + 1);
    gmp_rwmutex_unlock(&wr.rw);
    atomic_store(&wr.w_done, 1);
}

static void wr_reader(void *arg)
{
    (void)arg;
    atomic_store(&wr.r_try, 1);
    gmp_rwmutex_rlock(&wr.rw);
    atomic_store(&wr.r_seq, atomic_fetch_add(&wr.seq, 1) + 1);
    gmp_rwmutex_runlock(&wr.rw);
    atomic_store(&wr.r_done, 1);
}

/* The test thread holds a read lock (R1). A writer W calls lock and
 * blocks; once it is blocked a new reader R2 calls rlock: R2 must not get
 * in alongside R1 (W is waiting) and gets in only after W had the lock.
 * W and R2 are goroutines or plain threads, in every combination. */
static void test_rwmutex_waiting_writer_blocks_new_readers(void **state)
{
    for (int round = 0; round < 12; round++) {
        struct runner w, r;
        memset(&wr, 0, sizeof wr);
        gmp_rwmutex_rlock(&wr.rw);
        run_as(&w, round & 1, wr_writer, NULL);
        assert_int_equal(h_wait(&wr.w_try, 1), 0);
        assert_int_equal(h_still(), 0);     /* W blocked in lock */
        assert_int_equal(atomic_load(&wr.w_seq), 0);
        run_as(&r, round & 2, wr_reader, NULL);
        assert_int_equal(h_wait(&wr.r_try, 1), 0);
        assert_int_equal(h_still(), 0);     /* R2 blocked in rlock, or in */
        assert_int_equal(atomic_load(&wr.r_seq), 0);
        assert_int_equal(atomic_load(&wr.w_seq), 0);
        gmp_rwmutex_runlock(&wr.rw);
        assert_int_equal(h_wait(&wr.w_done, 1), 0);
        assert_int_equal(h_wait(&wr.r_done, 1), 0);
        run_join(&w);
        run_join(&r);
        assert_int_equal(atomic_load(&wr.w_seq), 1);
        assert_int_equal(atomic_load(&wr.r_seq), 2);
        assert_int_equal(h_wait_quiet(), 0);
    }
}

/* ---- Cond: signal wakes one, broadcast wakes all ------------------------- */

#define CW_GOROUTINES 8
#define CW_THREADS    2
#define CW_N          (CW_GOROUTINES + CW_THREADS)

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    int tokens;                     /* under mu */
    _Atomic int64_t registered, wakes, proceeded;
} cw;

/* The classic predicate loop: proceeds only with a token. Counts every
 * return from the wait. */
static void cw_waiter(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&cw.mu);
    atomic_fetch_add(&cw.registered, 1);
    while (cw.tokens == 0) {
        gmp_cond_wait(&cw.cv, &cw.mu);
        atomic_fetch_add(&cw.wakes, 1);
    }
    cw.tokens--;
    atomic_fetch_add(&cw.proceeded, 1);
    gmp_mutex_unlock(&cw.mu);
}

/* Starts the waiters and returns once all are in the wait: each counted
 * itself under the mutex, which only the wait releases. */
static void cw_start(struct runner *r)
{
    memset(&cw, 0, sizeof cw);
    for (int i = 0; i < CW_N; i++)
        run_as(&r[i], i < CW_THREADS, cw_waiter, NULL);
    assert_int_equal(h_wait(&cw.registered, CW_N), 0);
    gmp_mutex_lock(&cw.mu);
    gmp_mutex_unlock(&cw.mu);
}

static void cw_join(struct runner *r)
{
    for (int i = 0; i < CW_N; i++)
        run_join(&r[i]);
    assert_int_equal(h_wait_quiet(), 0);
}

/* With 10 waiters, each signal (with one token) wakes exactly one: once
 * the process is still, wakes and proceeded both equal the signals sent.
 * Half the signals are sent with the mutex held, half without. */
static void test_cond_signal_wakes_exactly_one(void **state)
{
    for (int round = 0; round < 3; round++) {
        struct runner r[CW_N];
        cw_start(r);
        for (int k = 1; k <= CW_N; k++) {
            gmp_mutex_lock(&cw.mu);
            cw.tokens++;
            if (k & 1)
                gmp_cond_signal(&cw.cv);
            gmp_mutex_unlock(&cw.mu);
            if (!(k & 1))
                gmp_cond_signal(&cw.cv);
            assert_int_equal(h_wait(&cw.proceeded, k), 0);
            assert_int_equal(h_still(), 0);
            assert_int_equal(atomic_load(&cw.proceeded), k);
            assert_int_equal(atomic_load(&cw.wakes), k);
        }
        cw_join(r);
        assert_int_equal(cw.tokens, 0);
    }
}

/* Broadcast with no token wakes every waiter (each goes back to wait);
 * broadcast with enough tokens releases them all. */
static void test_cond_broadcast_wakes_all(void **state)
{
    for (int round = 0; round < 3; round++) {
        struct runner r[CW_N];
        cw_start(r);
        gmp_cond_broadcast(&cw.cv);
        assert_int_equal(h_wait(&cw.wakes, CW_N), 0);
        assert_int_equal(h_still(), 0);     /* all back in the wait */
        assert_int_equal(atomic_load(&cw.wakes), CW_N);
        assert_int_equal(atomic_load(&cw.proceeded), 0);
        gmp_mutex_lock(&cw.mu);
        cw.tokens = CW_N;
        gmp_cond_broadcast(&cw.cv);
        gmp_mutex_unlock(&cw.mu);
        assert_int_equal(h_wait(&cw.proceeded, CW_N), 0);
        cw_join(r);
        assert_int_equal(atomic_load(&cw.wakes), 2 * CW_N);
        assert_int_equal(cw.tokens, 0);
    }
}

/* ---- Cond: a signal with no waiter is lost ------------------------------- */

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    _Atomic int64_t registered, wakes;
} lost;

static void lost_waiter(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&lost.mu);
    atomic_fetch_add(&lost.registered, 1);
    gmp_cond_wait(&lost.cv, &lost.mu);
    atomic_fetch_add(&lost.wakes, 1);
    gmp_mutex_unlock(&lost.mu);
}

/* Signals and broadcasts sent while nobody waits do not wake a later
 * waiter; the next signal does. Over rounds, a signal that arrives after
 * the previous waiter left is lost too. */
static void test_cond_signal_without_waiter_is_lost(void **state)
{
    memset(&lost, 0, sizeof lost);
    for (int round = 0; round < 6; round++) {
        struct runner w;
        gmp_cond_signal(&lost.cv);
        gmp_cond_broadcast(&lost.cv);
        gmp_mutex_lock(&lost.mu);
        gmp_cond_signal(&lost.cv);
        gmp_cond_signal(&lost.cv);
        gmp_mutex_unlock(&lost.mu);
        run_as(&w, round & 1, lost_waiter, NULL);
        assert_int_equal(h_wait(&lost.registered, round + 1), 0);
        gmp_mutex_lock(&lost.mu);           /* it is in the wait */
        assert_int_equal(atomic_load(&lost.wakes), round);
        gmp_mutex_unlock(&lost.mu);
        assert_int_equal(h_still(), 0);
        assert_int_equal(atomic_load(&lost.wakes), round);
        gmp_cond_signal(&lost.cv);
        assert_int_equal(h_wait(&lost.wakes, round + 1), 0);
        run_join(&w);
        assert_int_equal(h_wait_quiet(), 0);
        assert_int_equal(atomic_load(&lost.wakes), round + 1);
    }
    gmp_cond_signal(NULL);                  /* a NULL object is ignored */
    gmp_cond_broadcast(NULL);
}

/* ---- Cond: timed waits --------------------------------------------------- */

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    _Atomic int64_t rc0, rcneg, rcpos, held0, heldneg, heldpos, after, done;
    _Atomic int64_t registered, rcf, heldf, longenough;
} tw;

/* timedwait with timeouts 0, -5 and 1 ms, then the mutex's state. */
static void tw_poller(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&tw.mu);
    atomic_store(&tw.rc0, gmp_cond_timedwait(&tw.cv, &tw.mu, 0));
    atomic_store(&tw.held0, gmp_mutex_trylock(&tw.mu));
    atomic_store(&tw.rcneg, gmp_cond_timedwait(&tw.cv, &tw.mu, -5));
    atomic_store(&tw.heldneg, gmp_mutex_trylock(&tw.mu));
    int64_t m0 = h_now(), g0 = gmp_nanotime();
    atomic_store(&tw.rcpos, gmp_cond_timedwait(&tw.cv, &tw.mu, 1000000));
    atomic_store(&tw.longenough, gmp_nanotime() - g0 >= 1000000 &&
                                     h_now() - m0 >= 1000000);
    atomic_store(&tw.heldpos, gmp_mutex_trylock(&tw.mu));
    gmp_mutex_unlock(&tw.mu);
    atomic_store(&tw.after, gmp_mutex_trylock(&tw.mu));
    if (atomic_load(&tw.after) == 0)
        gmp_mutex_unlock(&tw.mu);
    atomic_fetch_add(&tw.done, 1);
}

static void tw_forever(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&tw.mu);
    atomic_store(&tw.registered, 1);
    atomic_store(&tw.rcf, gmp_cond_timedwait(&tw.cv, &tw.mu, GMP_FOREVER));
    atomic_store(&tw.heldf, gmp_mutex_trylock(&tw.mu));
    gmp_mutex_unlock(&tw.mu);
    atomic_fetch_add(&tw.done, 1);
}

/* A timeout <= 0 (not GMP_FOREVER) returns GMP_ETIMEDOUT at once, with
 * the mutex held again; a positive one with nobody signalling returns
 * GMP_ETIMEDOUT no earlier than the timeout, the mutex held again. On the
 * test thread, in a goroutine and on another plain thread. GMP_FOREVER
 * waits for a signal and returns 0 with the mutex held. (test_timer.c
 * has timed waits against signals and broadcasts.) */
static void test_cond_timedwait(void **state)
{
    for (int where = 0; where < 3; where++) {
        struct runner r;
        memset(&tw, 0, sizeof tw);
        if (where == 0)
            tw_poller(NULL);
        else
            run_as(&r, where == 2, tw_poller, NULL);
        assert_int_equal(h_wait(&tw.done, 1), 0);
        if (where)
            run_join(&r);
        assert_int_equal(atomic_load(&tw.rc0), GMP_ETIMEDOUT);
        assert_int_equal(atomic_load(&tw.held0), GMP_EBUSY);
        assert_int_equal(atomic_load(&tw.rcneg), GMP_ETIMEDOUT);
        assert_int_equal(atomic_load(&tw.heldneg), GMP_EBUSY);
        assert_int_equal(atomic_load(&tw.rcpos), GMP_ETIMEDOUT);
        assert_int_equal(atomic_load(&tw.longenough), 1);
        assert_int_equal(atomic_load(&tw.heldpos), GMP_EBUSY);
        assert_int_equal(atomic_load(&tw.after), 0);
    }

    /* Held again means held against others too. */
    memset(&tw, 0, sizeof tw);
    gmp_mutex_lock(&tw.mu);
    assert_int_equal(gmp_cond_timedwait(&tw.cv, &tw.mu, 0), GMP_ETIMEDOUT);
    assert_int_equal(trylock_in_goroutine(&tw.mu), GMP_EBUSY);
    gmp_mutex_unlock(&tw.mu);
    assert_int_equal(trylock_in_goroutine(&tw.mu), 0);

    /* NULL objects: bad arguments, the mutex stays held. */
    gmp_mutex_lock(&tw.mu);
    assert_int_equal(gmp_cond_timedwait(NULL, &tw.mu, 0), GMP_EINVAL);
    assert_int_equal(gmp_mutex_trylock(&tw.mu), GMP_EBUSY);
    gmp_mutex_unlock(&tw.mu);
    assert_int_equal(gmp_cond_timedwait(&tw.cv, NULL, 0), GMP_EINVAL);
    gmp_mutex_lock(&tw.mu);
    gmp_cond_wait(NULL, &tw.mu);            /* ignored: returns, still held */
    assert_int_equal(gmp_mutex_trylock(&tw.mu), GMP_EBUSY);
    gmp_mutex_unlock(&tw.mu);
    gmp_cond_wait(&tw.cv, NULL);            /* ignored */
    assert_int_equal(gmp_mutex_trylock(&tw.mu), 0);
    gmp_mutex_unlock(&tw.mu);

    for (int where = 0; where < 2; where++) {
        struct runner r;
        memset(&tw, 0, sizeof tw);
        run_as(&r, where, tw_forever, NULL);
        assert_int_equal(h_wait(&tw.registered, 1), 0);
        gmp_mutex_lock(&tw.mu);             /* it is in the wait */
        gmp_mutex_unlock(&tw.mu);
        gmp_cond_signal(&tw.cv);
        assert_int_equal(h_wait(&tw.done, 1), 0);
        run_join(&r);
        assert_int_equal(atomic_load(&tw.rcf), 0);
        assert_int_equal(atomic_load(&tw.heldf), GMP_EBUSY);
    }
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Cond: FIFO wakes ---------------------------------------------------- */

#define FIFO_N 10

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    _Atomic int64_t registered, woken;
    _Atomic int order[FIFO_N];
} fifo;

static void fifo_waiter(void *arg)
{
    int me = (int)(intptr_t)arg;
    gmp_mutex_lock(&fifo.mu);
    atomic_fetch_add(&fifo.registered, 1);
    gmp_cond_wait(&fifo.cv, &fifo.mu);
    int64_t pos = atomic_fetch_add(&fifo.woken, 1);
    if (pos < FIFO_N)
        atomic_store(&fifo.order[pos], me);
    gmp_mutex_unlock(&fifo.mu);
}

/* Waiters queue one after another (goroutines and plain threads mixed);
 * signals wake them in that order. */
static void test_cond_wakes_in_fifo_order(void **state)
{
    for (int round = 0; round < 6; round++) {
        struct runner r[FIFO_N];
        memset(&fifo, 0, sizeof fifo);
        for (int i = 0; i < FIFO_N; i++) {
            bool thread = ((i + round) % 3) == 0;
            run_as(&r[i], thread, fifo_waiter, (void *)(intptr_t)i);
            assert_int_equal(h_wait(&fifo.registered, i + 1), 0);
            gmp_mutex_lock(&fifo.mu);       /* waiter i is queued */
            gmp_mutex_unlock(&fifo.mu);
        }
        for (int k = 0; k < FIFO_N; k++) {
            if (round & 1) {
                gmp_mutex_lock(&fifo.mu);
                gmp_cond_signal(&fifo.cv);
                gmp_mutex_unlock(&fifo.mu);
            } else {
                gmp_cond_signal(&fifo.cv);
            }
            assert_int_equal(h_wait(&fifo.woken, k + 1), 0);
        }
        for (int i = 0; i < FIFO_N; i++)
            run_join(&r[i]);
        assert_int_equal(h_wait_quiet(), 0);
        for (int k = 0; k < FIFO_N; k++)
            assert_int_equal(atomic_load(&fifo.order[k]), k);
    }
}

/* ---- Cond: goroutines and threads take turns ---------------------------- */

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    long turn;                      /* under mu */
    long rounds;
    int parties;
    bool broadcast;
    _Atomic int64_t done;
} turn;

static void turn_party(void *arg)
{
    long me = (long)(intptr_t)arg;
    for (long r = 0; r < turn.rounds; r++) {
        gmp_mutex_lock(&turn.mu);
        while (turn.turn % turn.parties != me)
            gmp_cond_wait(&turn.cv, &turn.mu);
        turn.turn++;
        if (turn.broadcast)
            gmp_cond_broadcast(&turn.cv);
        else
            gmp_cond_signal(&turn.cv);
        gmp_mutex_unlock(&turn.mu);
    }
    atomic_fetch_add(&turn.done, 1);
}

/* A plain thread and a goroutine hand a turn back and forth with signal
 * (each waits on a condition the other signals); then two threads and
 * two goroutines in a ring with broadcast, every handoff between kinds. */
static void test_cond_threads_and_goroutines_take_turns(void **state)
{
    for (int ring = 0; ring < 2; ring++) {
        struct runner r[4];
        memset(&turn, 0, sizeof turn);
        turn.parties = ring ? 4 : 2;
        turn.broadcast = ring;
        turn.rounds = H_SCALE(ring ? 3000 : 10000);
        for (int i = 0; i < turn.parties; i++)
            run_as(&r[i], (i & 1) == 0, turn_party, (void *)(intptr_t)i);
        assert_int_equal(h_wait(&turn.done, turn.parties), 0);
        for (int i = 0; i < turn.parties; i++)
            run_join(&r[i]);
        assert_int_equal(h_wait_quiet(), 0);
        assert_int_equal(turn.turn, turn.rounds * turn.parties);
    }
}

/* ---- Once --------------------------------------------------------------- */

static struct {
    gmp_once_t once;
    _Atomic int64_t calls, other_calls, fn_done, bad, finished;
} on;

static void once_fn(void)
{
    atomic_fetch_add(&on.calls, 1);
    for (int i = 0; i < 20; i++)    /* the others arrive meanwhile */
        gmp_yield();
    atomic_store(&on.fn_done, 1);
}

static void once_other(void)
{
    atomic_fetch_add(&on.other_calls, 1);
}

static void once_caller(void *arg)
{
    (void)arg;
    gmp_once(&on.once, once_fn);
    if (!atomic_load(&on.fn_done))
        atomic_fetch_add(&on.bad, 1);
    atomic_fetch_add(&on.finished, 1);
}

/* 2000 goroutines (20 sanitized: under TSan each new goroutine stack is
 * costly), two plain threads and the test thread race to gmp_once: fn
 * runs once, and nobody returns before it has returned (it yields 20
 * times meanwhile). A later call with another fn runs nothing. */
static void test_once_runs_fn_once(void **state)
{
    long n = H_SCALE(2000);
    for (int round = 0; round < 5; round++) {
        struct runner t[2];
        memset(&on, 0, sizeof on);
        if (round & 1)
            on.once = (gmp_once_t)GMP_ONCE_INIT;
        for (long i = 0; i < n; i++) {
            assert_int_equal(gmp_go(once_caller, NULL), 0);
            if (i == n / 2) {
                run_as(&t[0], true, once_caller, NULL);
                run_as(&t[1], true, once_caller, NULL);
            }
        }
        once_caller(NULL);
        assert_int_equal(h_wait(&on.finished, n + 3), 0);
        run_join(&t[0]);
        run_join(&t[1]);
        assert_int_equal(h_wait_quiet(), 0);
        assert_int_equal(atomic_load(&on.calls), 1);
        assert_int_equal(atomic_load(&on.bad), 0);
        gmp_once(&on.once, once_other);
        gmp_once(&on.once, once_fn);
        assert_int_equal(atomic_load(&on.other_calls), 0);
        assert_int_equal(atomic_load(&on.calls), 1);
    }
}

/* A NULL once is ignored (fn does not run); a NULL fn is a bad argument,
 * which changes nothing: the once still runs the next real fn. */
static void test_once_null_arguments(void **state)
{
    gmp_once_t o = GMP_ONCE_INIT;
    memset(&on, 0, sizeof on);
    gmp_once(NULL, once_other);
    assert_int_equal(atomic_load(&on.other_calls), 0);
    gmp_once(&o, NULL);
    gmp_once(&o, once_other);
    assert_int_equal(atomic_load(&on.other_calls), 1);
    gmp_once(&o, NULL);
    gmp_once(&o, once_other);
    assert_int_equal(atomic_load(&on.other_calls), 1);
}

/* ---- WaitGroup: what test_wg.c does not cover ---------------------------- */

#define WGX_DONERS  4               /* 2 goroutines, 2 threads */
#define WGX_WAITERS 6               /* 4 goroutines, 2 threads (+ the test) */

static struct {
    gmp_wg_t wg;
    _Atomic int64_t pre, released, bad;
} wgx;

static void wgx_doner(void *arg)
{
    (void)arg;
    atomic_fetch_add(&wgx.pre, 1);
    gmp_wg_done(&wgx.wg);
}

static void wgx_waiter(void *arg)
{
    (void)arg;
    gmp_wg_wait(&wgx.wg);
    if (atomic_load(&wgx.pre) != WGX_DONERS)
        atomic_fetch_add(&wgx.bad, 1);
    atomic_fetch_add(&wgx.released, 1);
}

/* Plain threads and goroutines both wait on one group while plain threads
 * and goroutines both call done, racing, round after round: no waiter
 * returns before every done is in. */
static void test_wg_mixed_threads_and_goroutines(void **state)
{
    long rounds = H_SCALE(300);
    memset(&wgx, 0, sizeof wgx);
    for (long round = 0; round < rounds; round++) {
        struct runner w[WGX_WAITERS], d[WGX_DONERS];
        atomic_store(&wgx.pre, 0);
        atomic_store(&wgx.released, 0);
        gmp_wg_add(&wgx.wg, WGX_DONERS);
        for (int i = 0; i < WGX_WAITERS; i++)
            run_as(&w[i], i < 2, wgx_waiter, NULL);
        for (int i = 0; i < WGX_DONERS; i++)
            run_as(&d[i], i & 1, wgx_doner, NULL);
        wgx_waiter(NULL);
        assert_int_equal(h_wait(&wgx.released, WGX_WAITERS + 1), 0);
        for (int i = 0; i < WGX_WAITERS; i++)
            run_join(&w[i]);
        for (int i = 0; i < WGX_DONERS; i++)
            run_join(&d[i]);
    }
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(atomic_load(&wgx.bad), 0);
}

/* Goroutines blocked in wait are released by plain threads' dones alone,
 * several threads racing to the last done. */
static void test_wg_threads_done_together(void **state)
{
    enum { THREADS = 3 };
    for (int round = 0; round < 50; round++) {
        struct runner w[WGX_WAITERS], d[THREADS];
        memset(&wgx, 0, sizeof wgx);
        gmp_wg_add(&wgx.wg, THREADS);
        for (int i = 0; i < WGX_WAITERS; i++)
            run_as(&w[i], false, wgx_waiter, NULL);
        assert_int_equal(h_still(), 0);     /* they all wait */
        assert_int_equal(atomic_load(&wgx.released), 0);
        /* pre counts THREADS of WGX_DONERS: top it up so the check holds */
        atomic_store(&wgx.pre, WGX_DONERS - THREADS);
        for (int i = 0; i < THREADS; i++)
            run_as(&d[i], true, wgx_doner, NULL);
        assert_int_equal(h_wait(&wgx.released, WGX_WAITERS), 0);
        for (int i = 0; i < THREADS; i++)
            run_join(&d[i]);
        assert_int_equal(h_wait_quiet(), 0);
        assert_int_equal(atomic_load(&wgx.bad), 0);
    }
}

/* NULL is ignored. */
static void test_wg_null_ignored(void **state)
{
    gmp_wg_add(NULL, 1);
    gmp_wg_done(NULL);
    gmp_wg_wait(NULL);
    gmp_wg_add(NULL, -5);
}

/* ---- Fatal misuse -------------------------------------------------------- */

#define UNLOCK_LINE "gmprt: fatal error: sync: unlock of unlocked mutex"

static void unlock_plain_child(void *arg)
{
    (void)arg;
    gmp_mutex_t mu = GMP_MUTEX_INIT;
    gmp_mutex_lock(&mu);
    gmp_mutex_unlock(&mu);
    gmp_mutex_unlock(&mu);
    _exit(3);
}

static void unlock_goroutine(void *arg)
{
    (void)arg;
    gmp_mutex_t mu = GMP_MUTEX_INIT;
    gmp_mutex_unlock(&mu);
    _exit(4);
}

static void unlock_goroutine_child(void *arg)
{
    (void)arg;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    gmp_main(unlock_goroutine, NULL, &cfg);
    _exit(5);
}

static void check_unlock_fatal(void (*child)(void *))
{
    struct h_child res;
    assert_int_equal(h_fork(child, NULL, &res), 0);
    h_assert_killed_by(&res, SIGABRT);
    if (!h_has_line(res.err, UNLOCK_LINE))
        print_error("stderr lacks the line:\n%s\n", res.err);
    assert_true(h_has_line(res.err, UNLOCK_LINE));
}

static void test_mutex_unlock_of_unlocked_aborts_thread(void **state)
{
    check_unlock_fatal(unlock_plain_child);
}

static void test_mutex_unlock_of_unlocked_aborts_goroutine(void **state)
{
    check_unlock_fatal(unlock_goroutine_child);
}

int main(void)
{
    const struct CMUnitTest fatal[] = {
        cmocka_unit_test(test_mutex_unlock_of_unlocked_aborts_thread),
        cmocka_unit_test(test_mutex_unlock_of_unlocked_aborts_goroutine),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_mutex_zero_value_and_trylock),
        cmocka_unit_test(test_mutex_hammer_goroutines),
        cmocka_unit_test(test_mutex_shared_with_threads),
        cmocka_unit_test(test_mutex_unlock_by_another),
        cmocka_unit_test(test_mutex_waiter_not_starved),
        cmocka_unit_test(test_rwmutex_readers_share),
        cmocka_unit_test(test_rwmutex_hammer),
        cmocka_unit_test(test_rwmutex_waiting_writer_blocks_new_readers),
        cmocka_unit_test(test_cond_signal_wakes_exactly_one),
        cmocka_unit_test(test_cond_broadcast_wakes_all),
        cmocka_unit_test(test_cond_signal_without_waiter_is_lost),
        cmocka_unit_test(test_cond_timedwait),
        cmocka_unit_test(test_cond_wakes_in_fifo_order),
        cmocka_unit_test(test_cond_threads_and_goroutines_take_turns),
        cmocka_unit_test(test_once_runs_fn_once),
        cmocka_unit_test(test_once_null_arguments),
        cmocka_unit_test(test_wg_mixed_threads_and_goroutines),
        cmocka_unit_test(test_wg_threads_done_together),
        cmocka_unit_test(test_wg_null_ignored),
    };
    /* The forking tests first, while no runtime runs in this process. */
    return cmocka_run_group_tests_name("sync fatal", fatal, NULL, NULL)
         + cmocka_run_group_tests_name("sync procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("sync procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("sync procs=4", t, h_up_4, h_down);
}
