/*
 * wg.c - gmp_wg_t, Go's sync.WaitGroup, on park/ready.
 *
 * The problem: "the counter reached zero, wake the waiters" must wake only
 * the waiters of that round. A Done that reaches zero may be delayed
 * before it wakes anyone; meanwhile the group can be reused (Add, a new
 * Wait), and a waiter of the new round must not be woken by the old Done.
 *
 * The rule (Go's): counter and waiter count share one 64-bit state word,
 *   bits 63..32  counter (signed 32-bit)
 *   bits 31..0   waiters that passed the counter check
 * A waiter registers by CAS on the whole word, so it counts only while the
 * counter is non-zero. The Done that takes the counter to zero sees, in
 * the same atomic result, exactly how many waiters belong to this round,
 * resets the word to zero (a new round starts clean) and releases that
 * many tokens of the group's semaphore word (sema.c's table): a token
 * released before its waiter got there is kept for it. Reusing the group
 * while a previous Wait has not returned is a misuse, as in Go.
 */
#include <limits.h>

#include "runtime.h"
#include "park.h"
#include "sync.h"

struct wg {
    _Atomic uint64_t state;
    _Atomic uint32_t sema;
};

_Static_assert(sizeof(struct wg) <= sizeof(gmp_wg_t), "gmp_wg_t too small");
_Static_assert(_Alignof(struct wg) <= _Alignof(gmp_wg_t), "gmp_wg_t align");

#define WG_COUNTER(st) ((int32_t)((st) >> 32))
#define WG_WAITERS(st) ((uint32_t)(st))

void gmp_wg_add(gmp_wg_t *wgp, int64_t delta)
{
    if (!wgp)
        return;
    gmp__preempt_check();
    struct wg *wg = (struct wg *)wgp;
    if (delta < INT32_MIN || delta > INT32_MAX)
        gmp__fatal("sync: WaitGroup counter overflow", 0, false);
    uint64_t d = (uint64_t)delta << 32;
    /* Acq_rel: a waiter released by the zero sees all work done before
     * each Done (Go: Done "synchronizes before" Wait returns); the acquire
     * half orders this Done after the waiters' registrations it counts. */
    uint64_t st = atomic_fetch_add_explicit(&wg->state, d,
                                            memory_order_acq_rel) + d;
    int32_t v = WG_COUNTER(st);
    uint32_t w = WG_WAITERS(st);
    if (v < 0)
        gmp__fatal("sync: negative WaitGroup counter", 0, false);
    if (v > 0 || w == 0)
        return;
    /* Counter zero with waiters: nobody may change the state now (an Add
     * or a Wait would be a concurrent misuse); start the next round clean.
     * Relaxed, but it must stay a read-modify-write: an RMW continues the
     * release sequences of every Done before it, so a Wait that reads the
     * 0 it leaves still synchronises with all of them. A plain store would
     * cut them off. */
    if (!atomic_compare_exchange_strong_explicit(&wg->state, &st, 0,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        gmp__fatal("sync: WaitGroup misuse: Add called concurrently with Wait",
                   0, false);
    while (w-- > 0)
        gmp__semrelease(&wg->sema, false);
}

void gmp_wg_done(gmp_wg_t *wg)
{
    gmp_wg_add(wg, -1);
}

void gmp_wg_wait(gmp_wg_t *wgp)
{
    if (!wgp)
        return;
    struct wg *wg = (struct wg *)wgp;
    gmp__preempt_check();
    /* Acquire: pairs with the acq_rel Done that reached zero. */
    uint64_t st = atomic_load_explicit(&wg->state, memory_order_acquire);
    for (;;) {
        if (WG_COUNTER(st) == 0)
            return;
        /* Acq_rel on success: registers us in this round; failure reloads
         * st (acquire) and tries again. */
        if (atomic_compare_exchange_weak_explicit(&wg->state, &st, st + 1,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    gmp__semacquire(&wg->sema, false, WAIT_WG);
}
