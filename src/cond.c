/*
 * cond.c - gmp_cond_t, Go's sync.Cond, with timed waits.
 *
 * The problem: a waiter unlocks the caller's mutex and then sleeps; a
 * signal that comes between the two must not be lost, and must wake the
 * oldest waiter. With timed waits, a waiter may also leave without being
 * signalled, and must not take a later signal with it.
 *
 * The rule: a waiter links itself at the tail of the list, under the
 * list's lock, while it still holds the caller's mutex; it unlocks that
 * mutex with the list lock still held, and the list lock is released only
 * once it has parked (the park's callback) or, for a thread, just before
 * it sleeps on its note. So a signal that follows the wait (ordered by the
 * caller's mutex, or by whatever made the signaller decide) finds the
 * waiter linked, and cannot wake it before it has parked. A signal pops
 * waiters from the head and wakes the first it can claim: every waiter's
 * wctx has a claim flag (gmp__wctx_claim) that the signaller and the waiter's
 * deadline race for; a waiter whose deadline won is skipped, and unlinks
 * itself (if still linked) under the lock once it runs.
 *
 * Go takes a ticket under the caller's mutex and links after unlocking
 * it (notifyList); a waiter that could leave on a timeout would strand
 * its ticket, so timed waits need the waiter on the list from the start.
 * The caller's mutex is unlocked without a yield (a starving mutex hands
 * itself over without switching: gmp__mutex_unlock_noyield), as no switch
 * may happen under the list lock.
 *
 * Layout of the caller's storage: the list's lock and the list.
 */
#include "runtime.h"
#include "park.h"
#include "sync.h"
#include "timer.h"

struct cond {
    struct gmp__mutex lock;
    _Atomic(struct sudog *) head;   /* lock; an acquire read without it
                                       tells a signal there is nobody */
    struct sudog *tail;             /* lock */
};

_Static_assert(sizeof(struct cond) <= sizeof(gmp_cond_t), "gmp_cond_t");
_Static_assert(_Alignof(struct cond) <= _Alignof(gmp_cond_t), "align");

static bool unlock_list(struct g *gp, void *lock)
{
    (void)gp;
    gmp__unlock(lock);
    return true;
}

/* Pops the head. Context: holds cv->lock, the list is not empty. */
static struct sudog *pop(struct cond *cv)
{
    /* Relaxed, both: under the lock. */
    struct sudog *s = atomic_load_explicit(&cv->head, memory_order_relaxed);
    atomic_store_explicit(&cv->head, s->next, memory_order_relaxed);
    if (cv->tail == s)
        cv->tail = NULL;
    s->next = NULL;
    return s;
}

/* Unlinks s if it is still on the list. Context: holds cv->lock. */
static void unlink_if_there(struct cond *cv, struct sudog *s)
{
    struct sudog *prev = NULL;
    /* Relaxed, all: under the lock. */
    for (struct sudog *x = atomic_load_explicit(&cv->head,
                                                memory_order_relaxed);
         x; prev = x, x = x->next) {
        if (x != s)
            continue;
        if (prev)
            prev->next = s->next;
        else
            atomic_store_explicit(&cv->head, s->next, memory_order_relaxed);
        if (cv->tail == s)
            cv->tail = prev;
        s->next = NULL;
        return;
    }
}

/* Waits on cv with mu held on entry and on return. deadline: 0 for none.
 * Returns whether it was signalled. */
static bool wait(struct cond *cv, gmp_mutex_t *mu, int64_t deadline)
{
    struct sudog local, *s = gmp__sudog_acquire();
    if (!s)
        s = &local;
    struct gmp__wctx w;
    gmp__wctx_init(&w);
    s->w = &w;
    s->next = NULL;
    gmp__lock(&cv->lock);
    if (cv->tail)
        cv->tail->next = s;
    else
        /* Release: pairs with the signal's acquire fast-path read. */
        atomic_store_explicit(&cv->head, s, memory_order_release);
    cv->tail = s;
    gmp__mutex_unlock_noyield(mu);
    bool signalled = gmp__wctx_block_until(&w, unlock_list, &cv->lock,
                                           WAIT_COND, deadline);
    if (!signalled) {
        gmp__lock(&cv->lock);
        unlink_if_there(cv, s);
        gmp__unlock(&cv->lock);
    }
    if (s != &local)
        gmp__sudog_release(s);
    gmp_mutex_lock(mu);
    return signalled;
}

void gmp_cond_wait(gmp_cond_t *p, gmp_mutex_t *mu)
{
    if (!p || !mu)
        return;
    gmp__preempt_check();
    wait((struct cond *)p, mu, 0);
}

int gmp_cond_timedwait(gmp_cond_t *p, gmp_mutex_t *mu, int64_t timeout_ns)
{
    if (!p || !mu)
        return GMP_EINVAL;
    if (timeout_ns == GMP_FOREVER) {
        gmp_cond_wait(p, mu);
        return 0;
    }
    if (timeout_ns <= 0)
        return GMP_ETIMEDOUT;       /* a poll: nothing can have signalled */
    gmp__preempt_check();
    int64_t deadline = gmp__deadline(gmp__nanotime(), timeout_ns);
    return wait((struct cond *)p, mu, deadline) ? 0 : GMP_ETIMEDOUT;
}

/* Nobody is linked: nothing to wake, and no lock taken to find out.
 * Acquire: a waiter linked before this signal (ordered by the caller's
 * mutex, or by whatever made the signaller decide) is seen. */
static bool nobody_waits(struct cond *cv)
{
    return atomic_load_explicit(&cv->head, memory_order_acquire) == NULL;
}

void gmp_cond_signal(gmp_cond_t *p)
{
    if (!p)
        return;
    gmp__preempt_check();
    struct cond *cv = (struct cond *)p;
    if (nobody_waits(cv))
        return;
    struct gmp__wctx *w = NULL;
    gmp__lock(&cv->lock);
    /* Relaxed: under the lock. A waiter whose deadline won is skipped;
     * it unlinks nothing then (it is already off the list). */
    while (atomic_load_explicit(&cv->head, memory_order_relaxed)) {
        struct sudog *s = pop(cv);
        if (gmp__wctx_claim(s->w)) {
            w = s->w;
            break;
        }
    }
    gmp__unlock(&cv->lock);
    if (w)
        gmp__wctx_ready(w);         /* parked: the list lock was its */
}

void gmp_cond_broadcast(gmp_cond_t *p)
{
    if (!p)
        return;
    gmp__preempt_check();
    struct cond *cv = (struct cond *)p;
    if (nobody_waits(cv))
        return;
    struct sudog *wake = NULL, *last = NULL;
    gmp__lock(&cv->lock);
    /* Relaxed: under the lock. */
    while (atomic_load_explicit(&cv->head, memory_order_relaxed)) {
        struct sudog *s = pop(cv);
        if (!gmp__wctx_claim(s->w))
            continue;
        if (last)
            last->next = s;
        else
            wake = s;
        last = s;
    }
    gmp__unlock(&cv->lock);
    while (wake) {
        struct sudog *next = wake->next;    /* before the waiter may run */
        gmp__wctx_ready(wake->w);
        wake = next;
    }
}
