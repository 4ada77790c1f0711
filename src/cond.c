/*
 * cond.c - gmp_cond_t, Go's sync.Cond, on a ticket list (Go's notifyList,
 * sema.go).
 *
 * The problem: a waiter unlocks the caller's mutex and then sleeps; a
 * signal that comes between the two must not be lost, and must wake the
 * oldest waiter, never one that started waiting after the signal.
 *
 * The rule: each wait takes a ticket (wait++) while still holding the
 * caller's mutex, so tickets follow the order of the waits. notify is the
 * next ticket to wake; a signal wakes ticket notify (and moves it on), a
 * broadcast wakes every ticket below wait. A waiter that gets to the list
 * and finds its ticket already passed by notify returns at once: its
 * signal came early. Both counters wrap: tickets compare by signed
 * difference.
 *
 * Layout of the caller's storage: wait and notify (atomics: signal with
 * nobody waiting reads them without the lock), the list's lock, and the
 * list of sleeping waiters in ticket order... nearly: they may arrive out
 * of order, so a signal searches for its ticket.
 */
#include "runtime.h"
#include "park.h"

struct cond {
    _Atomic uint32_t wait;          /* next ticket to hand out */
    _Atomic uint32_t notify;        /* next ticket to wake (lock) */
    struct gmp__mutex lock;
    struct sudog *head, *tail;      /* sleeping waiters (lock) */
};

_Static_assert(sizeof(struct cond) <= sizeof(gmp_cond_t), "gmp_cond_t");
_Static_assert(_Alignof(struct cond) <= _Alignof(gmp_cond_t), "align");

static bool before(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;
}

static bool unlock_list(struct g *gp, void *lock)
{
    (void)gp;
    gmp__unlock(lock);
    return true;
}

/* Sleeps until ticket t is notified. Context: any G or thread. */
static void notify_wait(struct cond *cv, uint32_t t)
{
    gmp__lock(&cv->lock);
    /* Relaxed: written under this lock. */
    if (before(t, atomic_load_explicit(&cv->notify, memory_order_relaxed))) {
        gmp__unlock(&cv->lock);
        return;
    }
    struct sudog local, *s = gmp__sudog_acquire();
    if (!s)
        s = &local;
    struct gmp__wctx w;
    gmp__wctx_init(&w);
    s->w = &w;
    s->ticket = t;
    s->next = NULL;
    if (cv->tail)
        cv->tail->next = s;
    else
        cv->head = s;
    cv->tail = s;
    gmp__wctx_block(&w, unlock_list, &cv->lock, WAIT_COND);
    if (s != &local)
        gmp__sudog_release(s);
}

void gmp_cond_wait(gmp_cond_t *p, gmp_mutex_t *mu)
{
    if (!p || !mu)
        return;
    struct cond *cv = (struct cond *)p;
    gmp__preempt_check();
    /* Relaxed: the caller's mutex orders tickets against each other; the
     * list lock orders them against notify. */
    uint32_t t = atomic_fetch_add_explicit(&cv->wait, 1, memory_order_relaxed);
    gmp_mutex_unlock(mu);
    notify_wait(cv, t);
    gmp_mutex_lock(mu);
}

int gmp_cond_timedwait(gmp_cond_t *p, gmp_mutex_t *mu, int64_t timeout_ns)
{
    if (!p || !mu)
        return GMP_EINVAL;
    if (timeout_ns == GMP_FOREVER) {
        gmp_cond_wait(p, mu);
        return 0;
    }
    if (timeout_ns > 0)
        return GMP_EINVAL;          /* positive timeouts come with timers */
    return GMP_ETIMEDOUT;           /* a poll: nothing can have signalled */
}

/* Every ticket handed out has been notified: nobody to wake, and no lock
 * taken to find out. Acquire on wait: a wait that took its ticket before
 * this signal (ordered by the caller's mutex, or by whatever made the
 * signaller decide) is seen. Relaxed on notify: ours to compare only. */
static bool nobody_waits(struct cond *cv)
{
    return atomic_load_explicit(&cv->wait, memory_order_acquire) ==
           atomic_load_explicit(&cv->notify, memory_order_relaxed);
}

void gmp_cond_signal(gmp_cond_t *p)
{
    if (!p)
        return;
    struct cond *cv = (struct cond *)p;
    if (nobody_waits(cv))
        return;
    gmp__lock(&cv->lock);
    /* Relaxed: notify is written only under the lock; acquire on wait
     * as in nobody_waits. */
    uint32_t t = atomic_load_explicit(&cv->notify, memory_order_relaxed);
    if (t == atomic_load_explicit(&cv->wait, memory_order_acquire)) {
        gmp__unlock(&cv->lock);
        return;
    }
    atomic_store_explicit(&cv->notify, t + 1, memory_order_relaxed);
    /* Ticket t's waiter may not be on the list yet: it then finds its
     * ticket passed and returns without sleeping. */
    struct sudog *s = cv->head, *prev = NULL;
    for (; s; prev = s, s = s->next) {
        if (s->ticket != t)
            continue;
        if (prev)
            prev->next = s->next;
        else
            cv->head = s->next;
        if (cv->tail == s)
            cv->tail = prev;
        s->next = NULL;
        break;
    }
    gmp__unlock(&cv->lock);
    if (s)
        gmp__wctx_ready(s->w);
}

void gmp_cond_broadcast(gmp_cond_t *p)
{
    if (!p)
        return;
    struct cond *cv = (struct cond *)p;
    if (nobody_waits(cv))
        return;
    gmp__lock(&cv->lock);
    struct sudog *s = cv->head;
    cv->head = cv->tail = NULL;
    /* Relaxed: under the lock. */
    atomic_store_explicit(&cv->notify,
                          atomic_load_explicit(&cv->wait,
                                               memory_order_acquire),
                          memory_order_relaxed);
    gmp__unlock(&cv->lock);
    while (s) {
        struct sudog *next = s->next;   /* before the waiter may run */
        gmp__wctx_ready(s->w);
        s = next;
    }
}
