/*
 * park.c - the only way a G waits: gopark / goready; waiter contexts that
 * let a plain OS thread wait on the same queues (it sleeps on a note
 * instead of parking); and the per-P cache of waiter records (Go's
 * acquireSudog / releaseSudog).
 *
 * gopark(unlockf, lock): the G switches to g0 with SW_PARK; g0 marks it
 * waiting and only then calls unlockf(gp, lock), which typically releases
 * the wait queue's lock. From that moment a waker may goready() the G; it
 * cannot run before it has fully left its stack, because it was not on any
 * queue until unlockf published it. If unlockf returns false the park is
 * called off and the G runs again at once.
 *
 * Record cache: each P keeps up to SUDOG_CACHE records on a list of its
 * own (no lock: only the owner touches it); past that half go to a central
 * list under sched.sudoglock, and an empty cache refills half from there.
 * Records are carved from malloc'd chunks listed in sched, freed when the
 * runtime stops.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "exectrace.h"
#include "metrics.h"
#include "park.h"
#include "alloc.h"

#define SUDOG_CACHE 128
#define SUDOG_CHUNK 64

const char *const gmp__waitreason_names[WAIT_NREASONS] = {
    [WAIT_NONE] = "waiting",
    [WAIT_CHAN_RECV] = "chan receive",
    [WAIT_CHAN_SEND] = "chan send",
    [WAIT_SELECT] = "select",
    [WAIT_SELECT_NO_CASES] = "select (no cases)",
    [WAIT_MUTEX] = "sync.Mutex.Lock",
    [WAIT_RWMUTEX_R] = "sync.RWMutex.RLock",
    [WAIT_RWMUTEX_W] = "sync.RWMutex.Lock",
    [WAIT_COND] = "sync.Cond.Wait",
    [WAIT_WG] = "sync.WaitGroup.Wait",
    [WAIT_SLEEP] = "sleep",
    [WAIT_IO] = "IO wait",
};

void gmp__gopark(bool (*unlockf)(struct g *, void *), void *lock,
                 uint32_t reason)
{
    struct m *mp = gmp__getm();
    struct g *gp = mp->curg;
    mp->waitunlockf = unlockf;
    mp->waitlock = lock;
    /* Relaxed atomic stores (plain moves): sysmon's schedtrace reads
     * them (trace.c). waitsince: a coarse clock, to within sysmon's
     * period. */
    __atomic_store_n(&gp->waitreason, reason, __ATOMIC_RELAXED);
    __atomic_store_n(&gp->waitsince,
                     atomic_load_explicit(&mp->sched->coarse_ns,
                                          memory_order_relaxed),
                     __ATOMIC_RELAXED);
    if (!gmp__park_direct(mp, gp))
        gmp__mcall(mp, gp, SW_PARK);
}

/* Makes a waiting G runnable: into the caller's runnext (it runs next on
 * this P, as Go's ready; the old runnext goes to the ring), then wakes an
 * idle P if nobody is looking for work; from a thread without a P, into
 * the global queue with an M started for it (gmp__globrunqput_wake).
 * Context: any. */
void gmp__goready(struct g *gp)
{
    struct m *mp = gmp__getm();
    /* Acquire: as in cursched() of g.c. */
    struct schedt *s = mp ? mp->sched
                          : atomic_load_explicit(&gmp__sched,
                                                 memory_order_acquire);
    gmp__trace_gounblock(mp ? mp->p : NULL, gp);
    /* Relaxed: informational; the queue publishes the G. */
    atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
    gmp__metrics_runnable(gp);
    if (!mp || !mp->p) {
        gmp__globrunqput_wake(s, gp);
        return;
    }
    gmp__runqput(s, mp->p, gp, true);
    if (gmp__procs(s) == 1)
        return;
    /* Publish, then look for spinners. With more than one P the runnext
     * put was an exchange: see gmp__storeload_fence_after_rmw. */
    gmp__storeload_fence_after_rmw();
    gmp__wakep(s);
}

void gmp__goyield(void)
{
    struct m *mp = gmp__getm();
    if (!mp || !mp->curg || !mp->p)
        return;
    gmp__mcall(mp, mp->curg, SW_GOYIELD);
}

void gmp__wctx_block(struct gmp__wctx *w, bool (*unlockf)(struct g *, void *),
                     void *lock, uint32_t reason)
{
    if (w->gp) {
        gmp__gopark(unlockf, lock, reason);
        return;
    }
    unlockf(NULL, lock);
    gmp__notesleep(&w->note);
}

void gmp__wctx_ready(struct gmp__wctx *w)
{
    struct g *gp = w->gp;           /* read before w may vanish */
    if (gp)
        gmp__goready(gp);
    else
        gmp__notewakeup(&w->note);
}

/* ---- Record cache --------------------------------------------------------- */

struct sudogchunk {
    struct sudogchunk *next;
    struct sudog       sg[SUDOG_CHUNK];
};

/* Refills pp's empty cache: half a cache from the central list, or a new
 * chunk. False when malloc fails. Context: owner of pp. */
static bool sudog_refill(struct schedt *s, struct p *pp)
{
    gmp__lock(&s->sudoglock);
    while (s->sudogfree && pp->nsudog < SUDOG_CACHE / 2) {
        struct sudog *sg = s->sudogfree;
        s->sudogfree = sg->waitlink;
        sg->waitlink = pp->sudogcache;
        pp->sudogcache = sg;
        pp->nsudog++;
    }
    if (pp->nsudog == 0) {
        struct sudogchunk *ch = gmp__alloc(sizeof *ch);
        if (!ch) {
            gmp__unlock(&s->sudoglock);
            return false;
        }
        ch->next = s->sudogchunks;
        s->sudogchunks = ch;
        for (int i = 0; i < SUDOG_CHUNK; i++) {
            ch->sg[i].waitlink = pp->sudogcache;
            pp->sudogcache = &ch->sg[i];
        }
        pp->nsudog = SUDOG_CHUNK;
    }
    gmp__unlock(&s->sudoglock);
    return true;
}

/* One record from the caller's P, or NULL (no P, or no memory). */
struct sudog *gmp__sudog_acquire(void)
{
    struct m *mp = gmp__getm();
    if (!mp || !mp->curg || !mp->p)
        return NULL;
    struct p *pp = mp->p;
    if (GMP_UNLIKELY(!pp->sudogcache) && !sudog_refill(mp->sched, pp))
        return NULL;
    struct sudog *sg = pp->sudogcache;
    pp->sudogcache = sg->waitlink;
    pp->nsudog--;
    return sg;
}

void gmp__sudog_release(struct sudog *sg)
{
    struct m *mp = gmp__getm();
    struct p *pp = mp->p;
    sg->waitlink = pp->sudogcache;
    pp->sudogcache = sg;
    if (GMP_LIKELY(++pp->nsudog < SUDOG_CACHE))
        return;
    struct schedt *s = mp->sched;
    gmp__lock(&s->sudoglock);
    while (pp->nsudog > SUDOG_CACHE / 2) {
        struct sudog *x = pp->sudogcache;
        pp->sudogcache = x->waitlink;
        pp->nsudog--;
        x->waitlink = s->sudogfree;
        s->sudogfree = x;
    }
    gmp__unlock(&s->sudoglock);
}

/* Records for a thread (or a G out of cache memory): the caller's stack
 * buffer when they fit, else one malloc'd array. */
static bool sudogs_uncached(struct sudogs *set, size_t n,
                            struct sudog *stackbuf, size_t nstack)
{
    struct sudog *arr = stackbuf;
    if (n > nstack) {
        if (!(arr = set->heap = gmp__alloc(n * sizeof *arr)))
            return false;
        set->heapsize = n * sizeof *arr;
    }
    memset(arr, 0, n * sizeof *arr);
    for (size_t i = 0; i + 1 < n; i++)
        arr[i].waitlink = &arr[i + 1];
    set->first = n ? arr : NULL;
    return true;
}

bool gmp__sudogs_get(struct sudogs *set, size_t n, struct sudog *stackbuf,
                     size_t nstack)
{
    set->first = NULL;
    set->heap = NULL;
    set->cached = false;
    struct sudog **link = &set->first;
    for (size_t i = 0; i < n; i++) {
        struct sudog *sg = gmp__sudog_acquire();
        if (!sg) {
            if (i > 0)
                gmp__sudogs_put(set);
            return sudogs_uncached(set, n, stackbuf, nstack);
        }
        set->cached = true;
        *link = sg;
        link = &sg->waitlink;
        *link = NULL;
    }
    return true;
}

void gmp__sudogs_put(struct sudogs *set)
{
    if (set->cached) {
        for (struct sudog *sg = set->first, *next; sg; sg = next) {
            next = sg->waitlink;
            gmp__sudog_release(sg);
        }
    }
    gmp__free(set->heap, set->heapsize);
    set->first = NULL;
    set->heap = NULL;
    set->cached = false;
}

void gmp__sudog_release_all(struct schedt *s)
{
    while (s->sudogchunks) {
        struct sudogchunk *ch = s->sudogchunks;
        s->sudogchunks = ch->next;
        gmp__free(ch, sizeof *ch);
    }
    s->sudogfree = NULL;
}
