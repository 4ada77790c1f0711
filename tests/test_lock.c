/*
 * test_lock.c - the runtime's own futex mutex and notes (src/lock.h),
 * white-box, on plain threads: mutual exclusion and no lost wake-up with
 * more threads than cores and holders that get descheduled inside the
 * critical section (so waiters reach the futex sleep), and a note
 * ping-pong that re-arms each note every round.
 *
 * A lost wake-up leaves a waiter asleep for good: the test thread sees the
 * finished count stall and h_wait reports the hang.
 */
#include "harness.h"

#include <pthread.h>

#include "internal.h"

/* ---- Mutex -------------------------------------------------------------- */

#define LOCK_THREADS 8
#define LOCK_ITERS   H_SCALE(200000L)

static struct {
    struct gmp__mutex mu;
    long counter;                   /* plain: guarded by mu */
    _Atomic int inside;             /* holders at once, checked by each */
    _Atomic int64_t overlaps, finished;
} lk;

static void *lock_worker(void *arg)
{
    uint64_t x = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
    for (long i = 0; i < LOCK_ITERS; i++) {
        gmp__lock(&lk.mu);
        /* Relaxed: the lock orders these; a second holder shows as 2. */
        if (atomic_fetch_add_explicit(&lk.inside, 1, memory_order_relaxed))
            atomic_fetch_add(&lk.overlaps, 1);
        lk.counter++;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (x % 512 == 0)
            sched_yield();          /* hold it long: waiters go to sleep */
        atomic_fetch_sub_explicit(&lk.inside, 1, memory_order_relaxed);
        gmp__unlock(&lk.mu);
    }
    atomic_fetch_add(&lk.finished, 1);
    return NULL;
}

static void test_lock_mutex_excludes_and_wakes_every_waiter(void **state)
{
    pthread_t t[LOCK_THREADS];
    memset(&lk, 0, sizeof lk);
    for (uintptr_t i = 0; i < LOCK_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, lock_worker,
                                        (void *)(i + 1)), 0);
    int hung = h_wait(&lk.finished, LOCK_THREADS);
    assert_int_equal(hung, 0);
    for (int i = 0; i < LOCK_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&lk.overlaps), 0);
    assert_int_equal(lk.counter, (long)LOCK_THREADS * LOCK_ITERS);
    assert_int_equal(atomic_load(&lk.mu.key), GMP_MUTEX_UNLOCKED);
}

/* ---- Notes -------------------------------------------------------------- */

#define NOTE_ROUNDS H_SCALE(100000L)

static struct {
    struct gmp__note ping, pong;
    long value;                     /* plain: handed over by the notes */
    long bad;
    _Atomic int64_t finished;
} nt;

/* Waits for ping, checks the value the other side wrote before its
 * wakeup, answers with pong. */
static void *note_echo(void *arg)
{
    (void)arg;
    for (long i = 0; i < NOTE_ROUNDS; i++) {
        gmp__notesleep(&nt.ping);
        gmp__noteclear(&nt.ping);
        if (nt.value != 2 * i + 1)
            nt.bad++;
        nt.value++;
        gmp__notewakeup(&nt.pong);
    }
    atomic_fetch_add(&nt.finished, 1);
    return NULL;
}

static void *note_driver(void *arg)
{
    (void)arg;
    for (long i = 0; i < NOTE_ROUNDS; i++) {
        if (nt.value != 2 * i)
            nt.bad++;
        nt.value++;
        gmp__notewakeup(&nt.ping);
        gmp__notesleep(&nt.pong);
        gmp__noteclear(&nt.pong);
    }
    atomic_fetch_add(&nt.finished, 1);
    return NULL;
}

/* Each note passes the plain value across threads (release/acquire) and
 * re-arms after every round. */
static void test_lock_note_ping_pong(void **state)
{
    pthread_t a, b;
    memset(&nt, 0, sizeof nt);
    assert_int_equal(pthread_create(&a, NULL, note_echo, NULL), 0);
    assert_int_equal(pthread_create(&b, NULL, note_driver, NULL), 0);
    assert_int_equal(h_wait(&nt.finished, 2), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_int_equal(nt.bad, 0);
    assert_int_equal(nt.value, 2 * NOTE_ROUNDS);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_lock_mutex_excludes_and_wakes_every_waiter),
        cmocka_unit_test(test_lock_note_ping_pong),
    };
    return cmocka_run_group_tests_name("lock", t, NULL, NULL);
}
