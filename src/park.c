/*
 * park.c - the only way a G waits: gopark / goready, and waiter records
 * that let a plain OS thread wait on the same queues (it sleeps on a note
 * instead of parking).
 *
 * gopark(unlockf, lock): the G switches to g0 with SW_PARK; g0 marks it
 * waiting and only then calls unlockf(gp, lock), which typically releases
 * the wait queue's lock. From that moment a waker may goready() the G; it
 * cannot run before it has fully left its stack, because it was not on any
 * queue until unlockf published it. If unlockf returns false the park is
 * called off and the G runs again at once.
 */
#include "runtime.h"
#include "park.h"

void gmp__gopark(bool (*unlockf)(struct g *, void *), void *lock,
                 uint32_t reason)
{
    struct m *mp = gmp__getm();
    struct g *gp = mp->curg;
    mp->waitunlockf = unlockf;
    mp->waitlock = lock;
    gp->waitreason = reason;
    gmp__mcall(mp, gp, SW_PARK);
}

/* Makes a waiting G runnable: into the caller's runnext (it runs next on
 * this P, as Go's ready), or the global queue from a foreign thread; then
 * wakes an idle P if nobody is looking for work. Context: any. */
void gmp__goready(struct g *gp)
{
    struct m *mp = gmp__getm();
    /* Acquire: as in cursched() of g.c. */
    struct schedt *s = mp ? mp->sched
                          : atomic_load_explicit(&gmp__sched,
                                                 memory_order_acquire);
    /* Relaxed: informational; the queue publishes the G. */
    atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
    if (mp && mp->p) {
        gmp__runqput(s, mp->p, gp, true);
        if (s->procs == 1)
            return;
    } else {
        gmp__lock(&s->lock);
        gmp__globrunqput(s, gp);
        gmp__unlock(&s->lock);
    }
    gmp__storeload_fence();         /* publish, then look for spinners */
    gmp__wakep(s);
}

static bool unlock_mutex(struct g *gp, void *lock)
{
    (void)gp;
    gmp__unlock(lock);
    return true;
}

void gmp__waiter_block(struct gmp__waiter *w, struct gmp__mutex *lock,
                       uint32_t reason)
{
    struct m *mp = gmp__getm();
    if (mp && mp->curg && mp->p) {  /* a G, not inside a syscall bracket */
        w->gp = mp->curg;
        gmp__gopark(unlock_mutex, lock, reason);
        return;
    }
    w->gp = NULL;
    gmp__noteclear(&w->note);
    gmp__unlock(lock);
    gmp__notesleep(&w->note);
}

void gmp__waiter_wake(struct gmp__waiter *w)
{
    struct g *gp = w->gp;           /* read before w may vanish */
    if (gp)
        gmp__goready(gp);
    else
        gmp__notewakeup(&w->note);
}
