/*
 * lock.h - the runtime's own locks and one-shot events, on Linux futexes.
 *
 * gmp__mutex: a test-and-set lock whose unlock is a plain release store,
 *   so an uncontended lock/unlock pair costs one locked instruction, not
 *   two (sched.lock is taken on every gmp_yield). A waiter spins briefly,
 *   then sleeps on the futex after counting itself in `sleepers`; the
 *   unlocker wakes one sleeper when it sees the count. The unlocker reads
 *   the count just before its store, with no full barrier between (that
 *   would cost the locked instruction we saved), so a waiter that
 *   registers in that instant can miss its wake-up: it sleeps with a
 *   timeout (SLEEP_NS in lock.c) and re-checks, so it is late, never lost.
 *   Used for sched.lock and the free-list locks; never held across a
 *   switch, and only for short critical sections.
 * gmp__note: Go's note, a one-shot wake-up on one word. One sleeper,
 *   one waker; noteclear re-arms it once the sleeper has woken.
 */
#ifndef GMP_LOCK_H
#define GMP_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

#define GMP_LOCK_API __attribute__((visibility("hidden")))

struct gmp__mutex {
    _Atomic uint32_t key;           /* 0 unlocked, 1 locked */
    _Atomic uint32_t sleepers;      /* waiters asleep (or about to be) */
};

struct gmp__note {
    _Atomic uint32_t key;
};

GMP_LOCK_API void gmp__lock_slow(struct gmp__mutex *l);
GMP_LOCK_API void gmp__unlock_slow(struct gmp__mutex *l);

static inline void gmp__lock(struct gmp__mutex *l)
{
    uint32_t z = 0;
    /* Acquire: the critical section sees what the last holder wrote
     * (pairs with the release in gmp__unlock). */
    if (__builtin_expect(atomic_compare_exchange_strong_explicit(
            &l->key, &z, 1, memory_order_acquire, memory_order_relaxed), 1))
        return;
    gmp__lock_slow(l);
}

static inline void gmp__unlock(struct gmp__mutex *l)
{
    /* Look for sleepers before letting go: once key is 0 the next holder
     * may free the lock's memory (the last thread out of a stopping
     * runtime does), so nothing of *l is read after the store. Relaxed: a
     * hint, see above; a stale 0 delays a sleeper, no more. */
    uint32_t sleepers = atomic_load_explicit(&l->sleepers,
                                             memory_order_relaxed);
    /* Release: publishes the critical section to the next acquirer. */
    atomic_store_explicit(&l->key, 0, memory_order_release);
    if (__builtin_expect(sleepers != 0, 0))
        gmp__unlock_slow(l);        /* only a futex call on the address */
}

GMP_LOCK_API void gmp__notesleep(struct gmp__note *n);
GMP_LOCK_API void gmp__notewakeup(struct gmp__note *n);

static inline void gmp__noteclear(struct gmp__note *n)
{
    /* Relaxed: only the sleeper clears, after it woke; the next wakeup's
     * release store orders everything that matters. */
    atomic_store_explicit(&n->key, 0, memory_order_relaxed);
}

/* futex(2) on a 32-bit word, private to the process. */
GMP_LOCK_API int gmp__futex_wait(_Atomic uint32_t *addr, uint32_t val,
                                 int64_t timeout_ns);
GMP_LOCK_API void gmp__futex_wake(_Atomic uint32_t *addr, int n);

#endif /* GMP_LOCK_H */
