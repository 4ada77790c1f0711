/*
 * lock.c - futex mutex and note slow paths (see lock.h), and the futex
 * wrappers. Context: any thread, any G, g0. The mutex may sleep the thread,
 * so it is only for short critical sections that never switch.
 */
#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* The kernel's headers (Debian: linux-libc-dev) are outside musl-gcc's
 * search path: there the two operations, fixed by the system call's ABI,
 * are spelled out. */
#if __has_include(<linux/futex.h>)
#include <linux/futex.h>
#else
#define FUTEX_WAIT_PRIVATE (0 | 128)    /* FUTEX_WAIT | FUTEX_PRIVATE_FLAG */
#define FUTEX_WAKE_PRIVATE (1 | 128)    /* FUTEX_WAKE | FUTEX_PRIVATE_FLAG */
#endif

#include "lock.h"

#define SPIN_TRIES 64

/* gmp__spin_lock_slow's backoff, in gmp__cpu_relax steps: it doubles from
 * MIN after each failed try; past MAX the waiter yields its thread. */
#define SPIN_BACKOFF_MIN 16
#define SPIN_BACKOFF_MAX 1024

#ifdef GMP_TSAN
_Atomic unsigned gmp__fence_word;  /* see gmp__storeload_fence */
#endif

int gmp__futex_wait(_Atomic uint32_t *addr, uint32_t val, int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tp = &ts;
    }
    long r = syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, tp, NULL, 0);
    return r < 0 ? -errno : 0;
}

void gmp__futex_wake(_Atomic uint32_t *addr, int n)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void gmp__lock_slow(struct gmp__mutex *l)
{
    /* Spin while the holder is likely to let go soon. */
    for (int i = 0; i < SPIN_TRIES; i++) {
        uint32_t z = GMP_MUTEX_UNLOCKED;
        /* Relaxed load: a hint; the CAS carries the acquire. */
        if (atomic_load_explicit(&l->key, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->key, &z,
                                                  GMP_MUTEX_LOCKED,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        gmp__cpu_relax();
    }
    /* Sleep. The swap marks the lock contended before we sleep, so the
     * holder's unlock sees 2 and wakes us; if it finds 0 the lock is
     * ours. Acquire: as in gmp__lock. The futex sleeps only while the
     * word is still 2: an unlock in between makes it return at once. */
    while (atomic_exchange_explicit(&l->key, GMP_MUTEX_SLEEPING,
                                    memory_order_acquire) != GMP_MUTEX_UNLOCKED)
        gmp__futex_wait(&l->key, GMP_MUTEX_SLEEPING, -1);
}

void gmp__unlock_slow(struct gmp__mutex *l)
{
    gmp__futex_wake(&l->key, 1);
}

void gmp__spin_lock_slow(struct gmp__spinlock *l)
{
    /* Exponential backoff between tries: two threads that take turns
     * on a channel through a free-running spin bounce its cache line on
     * every operation; a waiter that backs off lets the holder run a burst
     * of operations with the line at home (on 16 cores this took the
     * chan benchmark from 120 to 33 ns per item). */
    unsigned backoff = SPIN_BACKOFF_MIN;
    for (;;) {
        uint32_t z = 0;
        /* Relaxed load: a hint; the CAS carries the acquire. */
        if (atomic_load_explicit(&l->key, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->key, &z, 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        if (backoff > SPIN_BACKOFF_MAX) {
            /* Held this long: the holder may have lost its CPU. */
            sched_yield();
            continue;
        }
        for (unsigned i = 0; i < backoff; i++)
            gmp__cpu_relax();
        backoff *= 2;
    }
}

void gmp__notesleep(struct gmp__note *n)
{
    /* Acquire: after waking we see everything the waker did before its
     * release store (e.g. m->nextp). */
    while (atomic_load_explicit(&n->key, memory_order_acquire) == 0)
        gmp__futex_wait(&n->key, 0, -1);
}

bool gmp__notetsleep(struct gmp__note *n, int64_t ns)
{
    int64_t end = gmp__deadline(gmp__nanotime(), ns);
    /* Acquire: as in gmp__notesleep. */
    while (atomic_load_explicit(&n->key, memory_order_acquire) == 0) {
        int64_t left = end - gmp__nanotime();
        if (left <= 0)
            return false;
        gmp__futex_wait(&n->key, 0, left);
    }
    return true;
}

void gmp__notewakeup(struct gmp__note *n)
{
    /* Release: pairs with the acquire load in gmp__notesleep. */
    atomic_store_explicit(&n->key, 1, memory_order_release);
    gmp__futex_wake(&n->key, 1);
}
