/*
 * timer.c - per-P timer heaps (timer.h) and gmp_sleep.
 *
 * The heap is 4-ary, as Go's: shallower than a binary heap, so a push or
 * pop touches fewer cache lines, and a node's four children sit side by
 * side. Slot i's children are 4i+1 .. 4i+4, its parent (i-1)/4. Each
 * slot carries a copy of its timer's `when` (as Go 1.23 does): timers sit
 * on their waiters' stacks, a page apart, and comparing through the
 * pointers cost a cache and TLB miss per child (with 100,000 sleepers,
 * most of the time spent running timers). Now the comparisons read the
 * array alone. A timer is written when it moves (its idx, for deletion).
 * A sleep has no timer: its slot holds the G, which running the slot
 * readies, so 100,000 sleeps never touch their sleepers' stacks from the
 * heap at all. Go 1.23 goes further and keeps no index at all, deleting
 * lazily; that needs the timer to outlive its heap slot, and ours live on
 * their waiters' stacks.
 *
 * timer0when mirrors heap[0]->when (0 when empty). It is written under
 * the heap's lock and read without it (relaxed): a reader that sees a
 * stale value either takes the lock for nothing or looks again at its
 * next scheduling point; whoever adds a timer that becomes the earliest
 * also wakes the poller (netpoll.c), so a sleeping M never misses it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timer.h"
#include "netpoll.h"
#include "park.h"
#include "alloc.h"

/* A slot's word is a timer, or, for a sleep, the sleeping G itself,
 * marked by the low bit. A sleep needs no timer record: running it
 * readies the G, so the heap never reads the sleeper's stack (a page
 * that has gone cold while it slept). */
#define SLEEPER ((uintptr_t)1)

static struct gmp__timer *slot_timer(struct gmp__tslot x)
{
    return (struct gmp__timer *)x.t;
}

static void heap_set(struct gmp__tslot *h, int32_t i, struct gmp__tslot x)
{
    h[i] = x;
    if (!(x.t & SLEEPER))
        slot_timer(x)->idx = i;
}

/* Returns the slot where h[i] came to rest. */
static int32_t siftup(struct gmp__tslot *h, int32_t i)
{
    struct gmp__tslot x = h[i];
    while (i > 0) {
        int32_t parent = (i - 1) / 4;
        if (h[parent].when <= x.when)
            break;
        heap_set(h, i, h[parent]);
        i = parent;
    }
    heap_set(h, i, x);
    return i;
}

static void siftdown(struct gmp__tslot *h, int32_t n, int32_t i)
{
    struct gmp__tslot x = h[i];
    for (;;) {
        int32_t c = 4 * i + 1, best = -1;
        int64_t bw = x.when;
        for (int32_t k = c; k < c + 4 && k < n; k++)
            if (h[k].when < bw) {
                bw = h[k].when;
                best = k;
            }
        if (best < 0)
            break;
        heap_set(h, i, h[best]);
        i = best;
    }
    heap_set(h, i, x);
}

/* Removes slot i and returns it. Context: holds pp's timer lock. */
static struct gmp__tslot heap_remove(struct p *pp, int32_t i)
{
    struct gmp__tslot *h = pp->timers, x = h[i];
    if (!(x.t & SLEEPER))
        slot_timer(x)->idx = -1;
    int32_t last = --pp->ntimers;
    if (i != last) {
        heap_set(h, i, h[last]);
        siftdown(h, last, i);
        siftup(h, i);
    }
    return x;
}

/* Relaxed store: see the file comment. Context: holds pp's timer lock. */
static void publish_first(struct p *pp)
{
    atomic_store_explicit(&pp->timer0when,
                          pp->ntimers ? pp->timers[0].when : 0,
                          memory_order_relaxed);
}

/* Context: holds pp's timer lock. */
static bool grow(struct p *pp)
{
    if (pp->ntimers < pp->timercap)
        return true;
    int32_t cap = pp->timercap ? 2 * pp->timercap : 64;
    struct gmp__tslot *h = gmp__alloc((size_t)cap * sizeof *h);
    if (!h)
        return false;
    if (pp->timers)
        memcpy(h, pp->timers, (size_t)pp->ntimers * sizeof *h);
    gmp__free(pp->timers, (size_t)pp->timercap * sizeof *h);
    pp->timers = h;
    pp->timercap = cap;
    return true;
}

void gmp__timer_reserve(struct p *pp)
{
    gmp__lock(&pp->timerlock);
    bool ok = grow(pp);
    gmp__unlock(&pp->timerlock);
    if (!ok)
        gmp__throw("out of memory: timer heap");
}

/* Adds slot x; returns whether it is now pp's earliest. */
static bool heap_add(struct p *pp, struct gmp__tslot x)
{
    gmp__lock(&pp->timerlock);
    if (!grow(pp))                  /* reserved: cannot fail */
        gmp__throw("timer heap: no room after gmp__timer_reserve");
    int32_t i = pp->ntimers++;
    pp->timers[i] = x;
    bool first = siftup(pp->timers, i) == 0;
    publish_first(pp);
    gmp__unlock(&pp->timerlock);
    return first;
}

bool gmp__timer_add(struct p *pp, struct gmp__timer *t)
{
    /* 0 means "no timer" in timer0when: a when of 0 is long past anyway. */
    if (t->when <= 0)
        t->when = 1;
    /* Relaxed: see gmp__timer_del. */
    __atomic_store_n(&t->pp, pp, __ATOMIC_RELAXED);
    return heap_add(pp, (struct gmp__tslot){t->when, (uintptr_t)t});
}

bool gmp__timer_del(struct gmp__timer *t)
{
    /* Relaxed: set by the add, before anyone could ask to delete the
     * timer, and changed only by gmp__timers_move holding this heap's
     * lock: the deleter that finds another heap under it looks again. */
    struct p *pp = __atomic_load_n(&t->pp, __ATOMIC_RELAXED);
    if (!pp)
        return false;
    gmp__lock(&pp->timerlock);
    struct p *now = __atomic_load_n(&t->pp, __ATOMIC_RELAXED);
    if (GMP_UNLIKELY(now != pp)) {
        gmp__unlock(&pp->timerlock);
        return gmp__timer_del(t);
    }
    bool removed = t->idx >= 0;
    if (removed) {
        heap_remove(pp, t->idx);
        publish_first(pp);
    }
    gmp__unlock(&pp->timerlock);
    return removed;
}

_Atomic int64_t gmp__coarse_res;
_Atomic int64_t gmp__coarse_margin;

void gmp__timers_setup(void)
{
    struct timespec res;
    int64_t ns = 0;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0)
        ns = res.tv_nsec;
    /* Relaxed, both: see timer.h. No M of a runtime runs yet. */
    atomic_store_explicit(&gmp__coarse_res, ns, memory_order_relaxed);
    int64_t m = atomic_load_explicit(&gmp__coarse_margin,
                                     memory_order_relaxed);
    if (ns == 0)
        m = 0;
    else if (m < 3 * ns)
        m = 3 * ns;
    atomic_store_explicit(&gmp__coarse_margin, m, memory_order_relaxed);
}

void gmp__coarse_observe(int64_t now)
{
    /* Relaxed: see timer.h. */
    int64_t res = atomic_load_explicit(&gmp__coarse_res, memory_order_relaxed);
    if (res == 0)
        return;
    int64_t need = now - gmp__coarse_read() + res;
    if (need > GMP_COARSE_MARGIN_MAX_NS)
        return;
    /* Relaxed: see timer.h. sysmon is the one writer while a runtime
     * runs; the loop only keeps the value from going down. */
    int64_t m = atomic_load_explicit(&gmp__coarse_margin,
                                     memory_order_relaxed);
    while (need > m &&
           !atomic_compare_exchange_weak_explicit(&gmp__coarse_margin, &m,
                                                  need,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

void gmp__timers_move(struct p *from, struct p *to)
{
    /* By id, the one order of two heap locks. */
    struct p *a = from->id < to->id ? from : to, *b = a == from ? to : from;
    gmp__lock(&a->timerlock);
    gmp__lock(&b->timerlock);
    while (from->ntimers > 0) {
        struct gmp__tslot x = heap_remove(from, from->ntimers - 1);
        if (!grow(to))
            gmp__throw("out of memory: timer heap");
        int32_t i = to->ntimers++;
        to->timers[i] = x;
        if (!(x.t & SLEEPER))
            /* Relaxed: see gmp__timer_del. */
            __atomic_store_n(&slot_timer(x)->pp, to, __ATOMIC_RELAXED);
        siftup(to->timers, i);
    }
    publish_first(from);
    publish_first(to);
    gmp__unlock(&b->timerlock);
    gmp__unlock(&a->timerlock);
}

int gmp__checktimers(struct p *pp, int64_t *now)
{
    /* Relaxed: see the file comment. */
    int64_t next = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
    if (next == 0)
        return 0;
    if (*now == 0) {
        if (gmp__timer_surely_before(next))
            return 0;
        *now = gmp__nanotime();
    }
    if (*now < next)
        return 0;
    int ran = 0;
    gmp__lock(&pp->timerlock);
    while (pp->ntimers > 0 && pp->timers[0].when <= *now) {
        struct gmp__tslot x = heap_remove(pp, 0);
        publish_first(pp);
        if (x.t & SLEEPER) {
            gmp__goready((struct g *)(x.t & ~SLEEPER));
        } else {
            struct gmp__timer *t = slot_timer(x);
            t->f(t);                /* may wake t's owner: t is done */
        }
        ran++;
    }
    gmp__unlock(&pp->timerlock);
    return ran;
}

int64_t gmp__timers_next(struct schedt *s)
{
    int64_t next = 0;
    for (int i = 0; i < gmp__procs(s); i++) {
        /* Relaxed: see the file comment. */
        int64_t w = atomic_load_explicit(&s->allp[i].timer0when,
                                         memory_order_relaxed);
        if (w != 0 && (next == 0 || w < next))
            next = w;
    }
    return next;
}

void gmp__timers_free(struct p *pp)
{
    gmp__free(pp->timers, (size_t)pp->timercap * sizeof *pp->timers);
    pp->timers = NULL;
    pp->ntimers = pp->timercap = 0;
}

/* ---- gmp_sleep ----------------------------------------------------------- */

/* Adds the sleeper to the heap once its G is off its stack, so that the
 * heap cannot ready it while it still runs. */
static bool sleep_commit(struct g *gp, void *arg)
{
    int64_t when = *(int64_t *)arg;
    struct m *mp = gmp__getm();
    if (heap_add(mp->p, (struct gmp__tslot){when, (uintptr_t)gp | SLEEPER}))
        gmp__netpoll_wake_for(mp->sched, when);
    return true;
}

/* A thread (or a G without a P) sleeps on the monotonic clock. */
static void thread_sleep_until(int64_t when)
{
    struct timespec ts = {.tv_sec = when / 1000000000,
                          .tv_nsec = when % 1000000000};
    while (GMP_LIBC(clock_nanosleep)(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;                           /* EINTR: the deadline stands */
}

void gmp_sleep(int64_t ns)
{
    struct m *mp = gmp__getm();
    bool g = mp && mp->curg && mp->p;
    if (ns <= 0) {
        if (g)
            gmp__preempt_check();
        return;
    }
    int64_t when = gmp__deadline(gmp__nanotime(), ns);
    if (!g) {
        thread_sleep_until(when);
        return;
    }
    gmp__timer_reserve(mp->p);
    gmp__gopark(sleep_commit, &when, WAIT_SLEEP);
}

/* ---- Waiting with a deadline ---------------------------------------------- */

struct timedpark {
    struct gmp__timer  t;
    struct gmp__wctx  *w;
    bool             (*unlockf)(struct g *, void *);
    void              *lock;
    bool               timedout;    /* the timer won the claim */
};

static void timedpark_fire(struct gmp__timer *t)
{
    struct timedpark *tp = t->arg;
    if (gmp__wctx_claim(tp->w)) {
        tp->timedout = true;
        gmp__goready(tp->w->gp);    /* the last touch: tp may go now */
    }
}

/* Arms the timer before the caller's unlock publishes the waiter. The
 * timer needs no lock to fire, so the G may be woken and return as soon
 * as it is added: nothing of tp is read after that. The poller is told
 * afterwards. */
static bool timedpark_commit(struct g *gp, void *arg)
{
    struct timedpark *tp = arg;
    struct m *mp = gmp__getm();
    struct schedt *s = mp->sched;
    /* Read before the add: from then on the timer may fire on another M
     * and the G return, taking tp with it; only the unlock's own objects
     * (not on the G's stack) are used after. */
    int64_t when = tp->t.when;
    bool (*unlockf)(struct g *, void *) = tp->unlockf;
    void *lock = tp->lock;
    bool first = gmp__timer_add(mp->p, &tp->t);
    bool parked = unlockf(gp, lock);
    if (first)
        gmp__netpoll_wake_for(s, when);
    return parked;
}

bool gmp__wctx_block_until(struct gmp__wctx *w,
                           bool (*unlockf)(struct g *, void *), void *lock,
                           uint32_t reason, int64_t deadline)
{
    if (!deadline) {
        gmp__wctx_block(w, unlockf, lock, reason);
        return true;
    }
    if (w->gp) {
        gmp__timer_reserve(gmp__getm()->p);
        struct timedpark tp = {
            .t = {.when = deadline, .f = timedpark_fire, .idx = -1},
            .w = w, .unlockf = unlockf, .lock = lock,
        };
        tp.t.arg = &tp;
        gmp__gopark(timedpark_commit, &tp, reason);
        if (!tp.timedout)
            gmp__timer_del(&tp.t);
        return !tp.timedout;
    }
    unlockf(NULL, lock);
    int64_t left = deadline - gmp__nanotime();
    if (left > 0 && gmp__notetsleep(&w->note, left))
        return true;
    if (gmp__wctx_claim(w))
        return false;
    gmp__notesleep(&w->note);       /* a waker won: it wakes us */
    return true;
}
