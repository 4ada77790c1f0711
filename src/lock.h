/*
 * lock.h - the runtime's own locks and one-shot events, on Linux futexes.
 *
 * gmp__mutex: Go's futex lock (lock_futex.go), one word: 0 unlocked, 1
 *   locked, 2 locked and a thread may be asleep on it. Lock is a CAS 0 -> 1;
 *   a waiter spins briefly, then swaps in 2 and sleeps on the futex until
 *   its swap finds 0. Unlock swaps in 0 and wakes one sleeper if the old
 *   value was 2. The swap reads and releases in one step: no wake-up can
 *   be missed, and nothing of *l is touched after the release (once it is
 *   0 the next holder may free the lock's memory; the futex call uses only
 *   the address). A thread that took the lock after sleeping stores 2, as
 *   others may still sleep: at worst one spurious wake-up.
 *   Used for sched.lock and the free-list locks; never held across a
 *   switch, and only for short critical sections.
 * gmp__spinlock: one word, 0 free, 1 held. Lock is a CAS 0 -> 1; a waiter
 *   retries with exponential backoff (reading, not writing, the word),
 *   then yields its thread to the OS between tries. Unlock is a plain release store: one locked
 *   instruction per critical section instead of the futex lock's two,
 *   which is most of the cost of an uncontended channel operation. It
 *   never sleeps, so it guards only sections of a few dozen instructions
 *   that never block or switch: channel state (chan.c, select.c).
 * gmp__note: Go's note, a one-shot wake-up on one word. One sleeper,
 *   one waker; noteclear re-arms it once the sleeper has woken.
 */
#ifndef GMP_LOCK_H
#define GMP_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base.h"

enum { GMP_MUTEX_UNLOCKED, GMP_MUTEX_LOCKED, GMP_MUTEX_SLEEPING };

struct gmp__mutex {
    _Atomic uint32_t key;           /* GMP_MUTEX_* */
};

struct gmp__spinlock {
    _Atomic uint32_t key;
};

struct gmp__note {
    _Atomic uint32_t key;
};

GMP_HIDDEN void gmp__lock_slow(struct gmp__mutex *l);
GMP_HIDDEN void gmp__unlock_slow(struct gmp__mutex *l);

static inline void gmp__lock(struct gmp__mutex *l)
{
    uint32_t z = GMP_MUTEX_UNLOCKED;
    /* Acquire: the critical section sees what the last holder wrote
     * (pairs with the release in gmp__unlock). */
    if (__builtin_expect(atomic_compare_exchange_strong_explicit(
            &l->key, &z, GMP_MUTEX_LOCKED, memory_order_acquire,
            memory_order_relaxed), 1))
        return;
    gmp__lock_slow(l);
}

static inline void gmp__unlock(struct gmp__mutex *l)
{
    /* Release: publishes the critical section to the next acquirer. The
     * old value says, in the same step, whether anyone sleeps. */
    uint32_t v = atomic_exchange_explicit(&l->key, GMP_MUTEX_UNLOCKED,
                                          memory_order_release);
    if (__builtin_expect(v == GMP_MUTEX_SLEEPING, 0))
        gmp__unlock_slow(l);        /* only a futex call on the address */
}

GMP_HIDDEN void gmp__spin_lock_slow(struct gmp__spinlock *l);

static inline void gmp__spin_lock(struct gmp__spinlock *l)
{
    uint32_t z = 0;
    /* Acquire: pairs with the release in gmp__spin_unlock. */
    if (__builtin_expect(atomic_compare_exchange_strong_explicit(
            &l->key, &z, 1, memory_order_acquire, memory_order_relaxed), 1))
        return;
    gmp__spin_lock_slow(l);
}

static inline void gmp__spin_unlock(struct gmp__spinlock *l)
{
    /* Release: publishes the critical section to the next holder. */
    atomic_store_explicit(&l->key, 0, memory_order_release);
}

GMP_HIDDEN void gmp__notesleep(struct gmp__note *n);
/* Sleeps until woken or ns nanoseconds passed; true when woken. */
GMP_HIDDEN bool gmp__notetsleep(struct gmp__note *n, int64_t ns);
GMP_HIDDEN void gmp__notewakeup(struct gmp__note *n);

static inline void gmp__noteclear(struct gmp__note *n)
{
    /* Relaxed: only the sleeper clears, after it woke; the next wakeup's
     * release store orders everything that matters. */
    atomic_store_explicit(&n->key, 0, memory_order_relaxed);
}

/* futex(2) on a 32-bit word, private to the process. */
GMP_HIDDEN int gmp__futex_wait(_Atomic uint32_t *addr, uint32_t val,
                                 int64_t timeout_ns);
GMP_HIDDEN void gmp__futex_wake(_Atomic uint32_t *addr, int n);

#endif /* GMP_LOCK_H */
