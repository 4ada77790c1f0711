/*
 * mutex.c - gmp_mutex_t, gmp_rwmutex_t and gmp_once_t: Go's sync.Mutex,
 * sync.RWMutex and sync.Once, on the semaphore table (sema.c).
 *
 * Mutex state word (Go's layout):
 *   bit 0      locked
 *   bit 1      woken: a waiter is awake and trying, so unlock need not
 *              wake another
 *   bit 2      starving
 *   bits 31..3 waiters parked (or about to park) on the semaphore
 * Normal mode: a woken waiter competes with newcomers, which usually win
 * (they are on a CPU already): good throughput. A newcomer that finds the
 * lock held spins for up to SPIN_NS, with exponential backoff between
 * looks, while spinning can pay: more than one CPU and another P running
 * (it may hold the lock and let go soon). Go spins only about a hundred
 * pauses, and not at all while other Gs wait on its P. Spinning longer,
 * and backing off, is what lets a holder that re-locks in a loop run a
 * burst with the lock's cache line at home instead of bouncing it between
 * cores on every operation, and spares the waiter a park that would only
 * switch to another G contending for the same lock (1,000 Gs hammering
 * one mutex: 0.3x Go's time per operation on 2 CPUs, 0.45x on 16). The
 * cost is bounded: at most SPIN_NS of a P's time before each park.
 * A waiter that fails to get the lock for over 1 ms switches the mutex
 * to starvation mode: unlock hands ownership straight to the first waiter
 * (the semaphore's handoff), newcomers queue at the back without trying,
 * and the mode ends when the last waiter, or one that waited less than
 * 1 ms, takes the lock.
 * The uncontended lock is one CAS, the uncontended unlock one atomic add.
 *
 * Every state change is a seq_cst read-modify-write: the word carries
 * both the lock (acquire on taking it, release on giving it up) and the
 * waiter count that the semaphore handshake depends on.
 */
#include <unistd.h>

#include "runtime.h"
#include "park.h"
#include "sync.h"

#define MUTEX_LOCKED    1u
#define MUTEX_WOKEN     2u
#define MUTEX_STARVING  4u
#define MUTEX_SHIFT     3
#define STARVATION_NS   1000000
#define SPIN_NS         10000   /* how long a newcomer may spin */
#define SPIN_BACKOFF_MIN 64
#define SPIN_BACKOFF_MAX 1024

struct mutex {
    _Atomic uint32_t state;
    _Atomic uint32_t sema;
};

_Static_assert(sizeof(struct mutex) <= sizeof(gmp_mutex_t), "gmp_mutex_t");
_Static_assert(_Alignof(struct mutex) <= _Alignof(gmp_mutex_t), "align");

/* Online CPUs, read once. Relaxed: every thread computes the same value. */
static int ncpu(void)
{
    static _Atomic int n;
    int v = atomic_load_explicit(&n, memory_order_relaxed);
    if (!v) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        v = c > 0 ? (int)c : 1;
        atomic_store_explicit(&n, v, memory_order_relaxed);
    }
    return v;
}

/* Whether a waiter that began spinning at spin_start (0: not yet) may spin
 * once more. Context: any. */
static bool canspin(int64_t spin_start)
{
    if (ncpu() <= 1)
        return false;
    if (spin_start && gmp__nanotime() - spin_start > SPIN_NS)
        return false;
    struct m *mp = gmp__getm();
    if (!mp || !mp->p)
        return true;                /* a thread: nothing else to run */
    struct schedt *s = mp->sched;
    /* Relaxed: hints. Some other P must be running for the holder to be
     * on a CPU. */
    return gmp__procs(s) >
           atomic_load_explicit(&s->npidle, memory_order_relaxed) +
               atomic_load_explicit(&s->nmspinning, memory_order_relaxed) +
               1;
}

/* Backs off for n pause steps, then doubles n up to SPIN_BACKOFF_MAX. */
static void dospin(unsigned *n)
{
    for (unsigned i = 0; i < *n; i++)
        gmp__cpu_relax();
    if (*n < SPIN_BACKOFF_MAX)
        *n *= 2;
}

static void mutex_lock_slow(struct mutex *m)
{
    int64_t wait_start = 0;
    bool starving = false, awoke = false;
    int64_t spin_start = 0;
    unsigned backoff = SPIN_BACKOFF_MIN;
    uint32_t old = atomic_load(&m->state);
    for (;;) {
        /* Spin only in normal mode and while it is held. */
        if ((old & (MUTEX_LOCKED | MUTEX_STARVING)) == MUTEX_LOCKED &&
            canspin(spin_start)) {
            if (!spin_start)
                spin_start = gmp__nanotime();
            /* Tell unlock not to wake another waiter while we try. */
            if (!awoke && !(old & MUTEX_WOKEN) && old >> MUTEX_SHIFT &&
                atomic_compare_exchange_weak(&m->state, &old,
                                             old | MUTEX_WOKEN))
                awoke = true;
            dospin(&backoff);
            old = atomic_load(&m->state);
            continue;
        }
        uint32_t new = old;
        if (!(old & MUTEX_STARVING))
            new |= MUTEX_LOCKED;    /* starving: newcomers queue instead */
        if (old & (MUTEX_LOCKED | MUTEX_STARVING))
            new += 1u << MUTEX_SHIFT;
        if (starving && (old & MUTEX_LOCKED))
            new |= MUTEX_STARVING;
        if (awoke) {
            if (!(new & MUTEX_WOKEN))
                gmp__throw("sync: inconsistent mutex state");
            new &= ~MUTEX_WOKEN;
        }
        if (!atomic_compare_exchange_weak(&m->state, &old, new))
            continue;
        if (!(old & (MUTEX_LOCKED | MUTEX_STARVING)))
            return;                 /* took it */
        /* Waited before: back to the front of the queue. */
        bool lifo = wait_start != 0;
        if (!wait_start)
            wait_start = gmp__nanotime();
        gmp__semacquire(&m->sema, lifo, WAIT_MUTEX);
        starving = starving || gmp__nanotime() - wait_start > STARVATION_NS;
        old = atomic_load(&m->state);
        if (old & MUTEX_STARVING) {
            /* Handed to us: the lock is ours, the word not yet. */
            if (old & (MUTEX_LOCKED | MUTEX_WOKEN) || !(old >> MUTEX_SHIFT))
                gmp__throw("sync: inconsistent mutex state");
            uint32_t delta = MUTEX_LOCKED - (1u << MUTEX_SHIFT);
            if (!starving || old >> MUTEX_SHIFT == 1)
                delta -= MUTEX_STARVING;    /* leave starvation mode */
            atomic_fetch_add(&m->state, delta);
            return;
        }
        awoke = true;
        spin_start = 0;
        backoff = SPIN_BACKOFF_MIN;
    }
}

static void mutex_unlock_slow(struct mutex *m, uint32_t new, bool yield)
{
    if (!((new + MUTEX_LOCKED) & MUTEX_LOCKED))
        gmp__fatal("sync: unlock of unlocked mutex", 0, false);
    if (new & MUTEX_STARVING) {
        /* Hand over to the first waiter; it finds the word still
         * unlocked but starving, and newcomers keep out. */
        if (gmp__semrelease(&m->sema, true) && yield)
            gmp__goyield();         /* let the new owner run now */
        return;
    }
    uint32_t old = new;
    for (;;) {
        /* Nobody to wake, or someone already awake / holding it. */
        if (!(old >> MUTEX_SHIFT) ||
            old & (MUTEX_LOCKED | MUTEX_WOKEN | MUTEX_STARVING))
            return;
        new = (old - (1u << MUTEX_SHIFT)) | MUTEX_WOKEN;
        if (atomic_compare_exchange_weak(&m->state, &old, new)) {
            gmp__semrelease(&m->sema, false);
            return;
        }
    }
}

static inline void mutex_lock(struct mutex *m)
{
    uint32_t zero = 0;
    /* Seq_cst: see the file comment (it is the acquire that matters). */
    if (GMP_LIKELY(atomic_compare_exchange_strong(&m->state, &zero,
                                                  MUTEX_LOCKED)))
        return;
    mutex_lock_slow(m);
}

static inline void mutex_unlock(struct mutex *m, bool yield)
{
    /* Seq_cst: releases the critical section; the result says in the
     * same step whether anyone waits. */
    uint32_t new = atomic_fetch_sub(&m->state, MUTEX_LOCKED) - MUTEX_LOCKED;
    if (GMP_UNLIKELY(new != 0))
        mutex_unlock_slow(m, new, yield);
}

void gmp_mutex_lock(gmp_mutex_t *mu)
{
    if (!mu)
        return;
    gmp__preempt_check();
    mutex_lock((struct mutex *)mu);
}

int gmp_mutex_trylock(gmp_mutex_t *mu)
{
    if (!mu)
        return GMP_EINVAL;
    gmp__preempt_check();
    struct mutex *m = (struct mutex *)mu;
    uint32_t old = atomic_load(&m->state);
    if (old & (MUTEX_LOCKED | MUTEX_STARVING))
        return GMP_EBUSY;
    /* Seq_cst: as in gmp_mutex_lock. */
    return atomic_compare_exchange_strong(&m->state, &old,
                                          old | MUTEX_LOCKED) ? 0 : GMP_EBUSY;
}

void gmp_mutex_unlock(gmp_mutex_t *mu)
{
    if (mu)
        mutex_unlock((struct mutex *)mu, true);
}

void gmp__mutex_unlock_noyield(gmp_mutex_t *mu)
{
    if (mu)
        mutex_unlock((struct mutex *)mu, false);
}

/* ---- RWMutex -------------------------------------------------------------- */

/*
 * Go's RWMutex. readercount counts readers in or waiting; a writer
 * subtracts RW_MAX_READERS from it, which makes it negative: new readers
 * see that and sleep on readersem. readerwait counts the readers that
 * were inside when the writer arrived; the last of them to leave wakes
 * the writer on writersem. Writers exclude each other with a mutex.
 */
#define RW_MAX_READERS (1 << 30)

struct rwmutex {
    struct mutex     w;
    _Atomic uint32_t writersem;
    _Atomic uint32_t readersem;
    _Atomic int32_t  readercount;
    _Atomic int32_t  readerwait;
};

_Static_assert(sizeof(struct rwmutex) <= sizeof(gmp_rwmutex_t), "rwmutex");
_Static_assert(_Alignof(struct rwmutex) <= _Alignof(gmp_rwmutex_t), "align");

/* Seq_cst throughout, as Go's: the counts hand the lock between readers
 * and writers, and each sleeper relies on the semaphore handshake. */

void gmp_rwmutex_rlock(gmp_rwmutex_t *p)
{
    if (!p)
        return;
    struct rwmutex *rw = (struct rwmutex *)p;
    gmp__preempt_check();
    if (atomic_fetch_add(&rw->readercount, 1) + 1 < 0)
        gmp__semacquire(&rw->readersem, false, WAIT_RWMUTEX_R);
}

void gmp_rwmutex_runlock(gmp_rwmutex_t *p)
{
    if (!p)
        return;
    struct rwmutex *rw = (struct rwmutex *)p;
    int32_t r = atomic_fetch_sub(&rw->readercount, 1) - 1;
    if (GMP_LIKELY(r >= 0))
        return;
    if (r + 1 == 0 || r + 1 == -RW_MAX_READERS)
        gmp__fatal("sync: RUnlock of unlocked RWMutex", 0, false);
    /* A writer waits: the last reader it waits for wakes it. */
    if (atomic_fetch_sub(&rw->readerwait, 1) - 1 == 0)
        gmp__semrelease(&rw->writersem, false);
}

void gmp_rwmutex_lock(gmp_rwmutex_t *p)
{
    if (!p)
        return;
    struct rwmutex *rw = (struct rwmutex *)p;
    gmp__preempt_check();
    mutex_lock(&rw->w);
    /* Announce the writer; r readers are still inside. */
    int32_t r = atomic_fetch_sub(&rw->readercount, RW_MAX_READERS);
    if (r != 0 && atomic_fetch_add(&rw->readerwait, r) + r != 0)
        gmp__semacquire(&rw->writersem, false, WAIT_RWMUTEX_W);
}

void gmp_rwmutex_unlock(gmp_rwmutex_t *p)
{
    if (!p)
        return;
    struct rwmutex *rw = (struct rwmutex *)p;
    int32_t r = atomic_fetch_add(&rw->readercount, RW_MAX_READERS) +
                RW_MAX_READERS;
    if (r >= RW_MAX_READERS)
        gmp__fatal("sync: Unlock of unlocked RWMutex", 0, false);
    /* Let in the readers that queued behind us. */
    for (int32_t i = 0; i < r; i++)
        gmp__semrelease(&rw->readersem, false);
    mutex_unlock(&rw->w, true);
}

/* ---- Once ----------------------------------------------------------------- */

struct once {
    _Atomic uint32_t done;
    uint32_t         pad_;
    struct mutex     m;
};

_Static_assert(sizeof(struct once) <= sizeof(gmp_once_t), "gmp_once_t");
_Static_assert(_Alignof(struct once) <= _Alignof(gmp_once_t), "align");

void gmp_once(gmp_once_t *p, void (*fn)(void))
{
    if (!p || !fn)
        return;
    gmp__preempt_check();
    struct once *o = (struct once *)p;
    /* Acquire: pairs with the release below; a caller that sees done sees
     * everything fn did. */
    if (GMP_LIKELY(atomic_load_explicit(&o->done, memory_order_acquire)))
        return;
    mutex_lock(&o->m);
    /* Relaxed: under the mutex, which orders it against the store. */
    if (!atomic_load_explicit(&o->done, memory_order_relaxed)) {
        fn();
        /* Release: see above. */
        atomic_store_explicit(&o->done, 1, memory_order_release);
    }
    mutex_unlock(&o->m, true);
}
