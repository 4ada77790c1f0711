/*
 * pool.c - gmp_pool_t, a pool of reusable worker goroutines with a
 * capacity (the idea of Go's ants library). It owns the pool object, the
 * worker records, the LIFO stack of idle workers and the list they come
 * back on, the FIFO queue of submitters waiting at capacity, the purger
 * goroutine that retires workers idle longer than the expiry, and
 * release.
 *
 * Invariants, all under pool->lock:
 *   - Idle workers are on the idle stack (nidle) or on the return list,
 *     and running == nworkers - idle: the workers that hold a task. A
 *     retiring worker counts in neither.
 *   - nworkers <= cap, except after a tune lowered cap while the excess
 *     was busy: such a worker retires when its task returns, before it
 *     takes another (tune retires the idle excess itself).
 *   - The waiter queue is empty unless the idle stack is, and the return
 *     list then holds the mark (RET_ATTN) and no worker: a submitter
 *     waits only when no worker is idle, and a worker coming back serves
 *     the first waiter before it would go idle.
 *   - The mark is set whenever a returning worker has something to do
 *     under the lock: a waiter to serve, the pool closed, more workers
 *     than the capacity (attend).
 *   - A worker on the idle stack or the return list is parked or on its
 *     way to park; its state word (below) settles which, so whoever pops
 *     it hands it the task and readies it only if it did park.
 *   - nalive counts what may still touch the pool: every worker
 *     goroutine until its last unlock (retiring ones too), the purger,
 *     and a worker slot a woken submitter has yet to start. Release frees
 *     the pool only at 0.
 * Locks: pool->lock, a spinlock (lock.h). Its sections are a few dozen
 * instructions and never switch, except the parks of a waiting submitter
 * and of release, which release it in the park's commit, as a channel's
 * park does. Only the rare ones walk the idle array: the purger, tune and
 * release retiring workers, and its growth copying it. Every wake-up is
 * made after the unlock. A worker coming back takes the lock only when
 * the mark tells it to (The return).
 *
 * The hand-off. A task goes to a worker in one of three ways, and in each
 * the waker writes the task, then readies after the unlock (park.h's
 * rule):
 *   1. submit pops the top idle worker, unlocks, stores fn/arg in its
 *      record and hands it over (The idle park): popped, the worker is the
 *      submitter's alone until the hand-over, so nothing of its record is
 *      touched under the lock. No allocation: the record was made with the
 *      worker.
 *   2. below the capacity and with nobody idle, submit reserves a slot
 *      (nworkers, nalive) under the lock and starts a worker with the
 *      task in its new record.
 *   3. at the capacity the submitter queues a waiter record on its own
 *      stack and parks (a thread sleeps). A worker whose task returns
 *      takes the first waiter's task itself, without parking, and readies
 *      the submitter with W_TAKEN. A tune that raises the capacity hands
 *      waiters reserved slots instead (W_SLOT): each starts its worker.
 * A worker with nothing to do goes on the idle stack (through the return
 * list) and parks; most recently used first, so hot stacks are reused and
 * the longest idle sit at the bottom, where the purger takes them. The
 * stack is an array of slots (a worker and its idle stamp), grown
 * (doubling) outside the lock whenever a new worker would not find a slot,
 * so a push or pop under the lock touches the pool and one slot, never
 * another worker's record: with a list through the records, every pop
 * wrote the next worker's back link, a line last written on the core that
 * pushed it, while every other submitter and returning worker waited on
 * the lock.
 *
 * The idle park. The worker stores state PARKING, pushes itself (The
 * return), and parks; the park's commit (on g0, once it is off its stack)
 * CASes PARKING -> PARKED. Whoever pops it stores the task (fn == NULL:
 * exit) and, after the unlock, swaps in HANDED: if the swap returns PARKED
 * the worker is parked and gets readied; if PARKING, its commit's CAS
 * fails, the park is called off and it runs the task at once. Exactly one
 * of the two sides sees the other's value, so there is no lost and no
 * double wake-up. The lock is not held across the switch: parking with it
 * held (the commit unlocking, as a channel does) made every submitter on
 * another P wait out the switch and, while a timer is pending, gopark's
 * clock read.
 *
 * The return. A worker whose task returned pushes itself with a CAS on
 * the return list (p->returns, a Treiber stack through the records'
 * next, on a line of its own) instead of taking the lock: with a lock
 * taken by every submit and every returning worker, its line crossed
 * between cores twice a task and the workers of many Ps queued on it
 * behind the one submitter. Only lock holders take the list, all of it
 * at once with an exchange (so no ABA), and move it onto the idle stack
 * newest on top (absorb): a submit when the stack is empty, the purger,
 * tune, release and gmp_pool_running. Whenever a returning worker has
 * something to do under the lock (attend), the list holds the mark
 * RET_ATTN instead, set by an exchange that takes what was pushed
 * before it: a worker's CAS then fails on the mark, and it comes back
 * under the lock as before, to serve a waiter or retire. One word holds
 * both the list and the mark, so a worker cannot push itself after a
 * submitter decided to wait and be missed: the submitter sets the mark
 * before it looks at the stack a last time and queues itself. Taking
 * the list reads each record's next, a line its hand-over writes
 * anyway; the idle stack itself stays an array (above).
 *
 * Growth and backpressure. A readied or new worker goes to the submitter's
 * runnext (the old one to its P's ring), as any ready does. A goroutine
 * submitting in a loop would run far ahead of the workers it feeds: finding
 * none idle, it would start one per submit until the capacity. Fed by one
 * loop, a pool of capacity 10,000 grew to 10,000 workers: a touched page of
 * stack each, 40 MB where Go's 10,000 goroutines take 27, and every switch
 * into one missed the cache (the bench case pool ran about 1.5x as long as
 * it does now). So after a hand-off a goroutine yields its P (gmp__goyield:
 * to the tail of its ring) once POOL_BACKLOG goroutines wait in that ring:
 * those workers run, or other Ps steal them (a thief takes half), before it
 * hands over more, and most are idle again by then. The pool grows only
 * while tasks outrun the workers it has, and the working set stays small
 * and warm. A plain thread holds no P and does not yield.
 *
 * Expiry. The purger takes the return list, parks until the bottom worker
 * is due (or for one expiry when the stack is empty), retires every idle
 * worker stamped expiry_ns ago or more, and waits again. The stamp is one
 * reading of the coarse clock (timer.h) by the lock holder that moves the
 * return list onto the stack, for the whole list, not one by every
 * returning worker. It is never earlier than the push, so it can only make
 * a worker expire later, by the time it waited on the list: at most one
 * expiry, since the purger takes the list on each wake. The purger adds
 * the coarse clock's resolution twice (to the age it requires and to its
 * sleep) so that no worker expires early. A retired worker is popped under
 * the lock and handed fn == NULL: it exits.
 *
 * Release. closed is set under the lock, and the mark with it: later
 * submits get GMP_ECLOSED, waiting ones are woken with it, idle workers
 * and the purger are told to exit, and busy workers retire when their
 * tasks return (under the lock, as the mark tells them). The releaser
 * then parks until nalive is 0: the last one out unlocks, touching
 * nothing of the pool afterwards (a spinlock's unlock is one store), and
 * readies the releaser, whose wait context is on its own stack.
 *
 * Wait reasons in a deadlock report: an idle worker shows "chan receive"
 * (ants' workers wait on their task channel), a submitter at capacity
 * "sync.Cond.Wait" (ants waits on a cond), release "sync.WaitGroup.Wait",
 * the purger "sleep".
 */
#include <string.h>

#include "runtime.h"
#include "park.h"
#include "timer.h"
#include "alloc.h"

#define POOL_EXPIRY_DEFAULT_NS 1000000000LL
/* Goroutines queued on a submitter's P (besides runnext) at which it
 * yields after a hand-off (see Growth): half the ring. A thief takes half
 * of it, so this sets how long the other Ps keep busy while the submitter
 * refills its ring; with a quarter, the other P on 2 CPUs ran dry at each
 * refill, parked and was woken again (bench/README.md, "The pool's
 * backlog"). Less keeps fewer workers taking turns, which helps only
 * while the other Ps are near: with 32, bench pool on 2 CPUs took 1% less
 * time with the vCPUs on cores that share a cache but 5% more with them
 * apart. */
#define POOL_BACKLOG (GMP_RUNQ_SIZE / 2)

/* What a waiting submitter finds in its record when it is woken. */
enum { W_TAKEN = 1, W_SLOT, W_CLOSED };

/* One per worker, from gmp__alloc (cache-line aligned). The first line
 * holds all that a submitter touches (the task, the state word, the wait
 * context's G), so that a hand-off moves one
 * line to the worker's core and back; the second line stays with the
 * worker. */
struct worker {
    /* The task. Written by whoever popped the worker, before the
     * hand-over (or by the worker itself, from a waiter); NULL tells an
     * idle worker to exit. */
    void           (*fn)(void *);
    void            *arg;
    struct worker   *next;          /* a wake list (lock) */
    /* WK_PARKING (stored by the worker before its push, under the lock),
     * WK_PARKED (its commit), WK_HANDED (whoever popped it). */
    _Atomic uint32_t state;
    struct gmp__wctx w;             /* it parks here while idle */
    /* Second line. */
    struct gmp_pool *pool;
};

_Static_assert(offsetof(struct worker, pool) <= GMP_CACHELINE,
               "the hand-off fields of struct worker fit one line");

/* A slot of the idle stack: a worker, and the coarse clock when it came on
 * the stack (a lock holder's reading, never before the worker's push). */
struct idle_slot {
    struct worker   *wk;
    int64_t          since;
};

enum { WK_PARKING, WK_PARKED, WK_HANDED };

/* The return list's mark (never a record's address): come back under the
 * lock. Set only while the list is empty. */
#define RET_ATTN ((uintptr_t)1)

/* A submitter waiting at capacity: on its own stack while it waits. */
struct waiter {
    struct waiter   *next;          /* queue; then a wake list (lock) */
    void           (*fn)(void *);
    void            *arg;
    int              result;        /* W_*, written before the ready */
    struct gmp__wctx w;
};

/* The first line holds what every submit and every returning worker
 * touches; the rest is for waiting, the purger and release. */
struct gmp_pool {
    struct gmp__spinlock lock;
    bool             closed;        /* lock */
    bool             nonblocking;   /* fixed */
    /* The idle stack: idle[0] the longest idle, idle[nidle - 1] the top.
     * An array, not a list through the workers' records, so that a push
     * or a pop under the lock writes no other worker's line (lock). */
    struct idle_slot *idle;
    size_t           nidle;         /* lock */
    size_t           nworkers;      /* started, not retired (lock) */
    struct waiter   *whead;         /* submitters at capacity (lock) */
    /* Written under the lock; read under it, and without it by
     * gmp_pool_cap. */
    _Atomic size_t   cap;
    /* Second line. */
    struct waiter   *wtail;         /* lock */
    size_t           idle_cap;      /* idle's slots, >= every worker that
                                       may push itself (lock) */
    size_t           nwaiting;      /* lock */
    size_t           nalive;        /* see the invariants (lock) */
    struct gmp__wctx *purger_w;     /* the purger's, while it waits (lock) */
    struct gmp__wctx *release_w;    /* the releaser's, while it waits
                                       (lock) */
    int64_t          expiry_ns;     /* fixed, > 0 */
    /* Own line: the workers coming back without the lock (see The
     * return). A list through their records, newest first, or
     * RET_ATTN. */
    GMP_ALIGNED _Atomic uintptr_t returns;
};

_Static_assert(offsetof(struct gmp_pool, wtail) <= GMP_CACHELINE,
               "the hot fields of struct gmp_pool fit one line");

/* Ready after the unlock: workers told their task or to exit, waiters
 * told their result, and at most one purger and one releaser. */
struct wakes {
    struct worker    *workers;      /* chained by next */
    struct waiter    *waiters;      /* chained by next */
    struct gmp__wctx *purger, *releaser;
};

/* Hands a popped worker what its record now holds (a task, or NULL to
 * exit): readies it if it parked, else its commit calls the park off (see
 * The idle park). After this the caller must not touch wk. Context: any,
 * no lock held. */
static void hand_over(struct worker *wk)
{
    /* Acq_rel. Release: a worker whose commit then fails reads the task
     * we stored (its CAS failure is an acquire). Acquire: pairs with the
     * commit's CAS, so a PARKED we read means it is off its stack. */
    if (atomic_exchange_explicit(&wk->state, WK_HANDED,
                                 memory_order_acq_rel) == WK_PARKED)
        gmp__wctx_ready(&wk->w);
}

static void wake_all(struct wakes *wl)
{
    for (struct worker *wk = wl->workers, *next; wk; wk = next) {
        next = wk->next;            /* before wk may run */
        hand_over(wk);
    }
    for (struct waiter *wt = wl->waiters, *next; wt; wt = next) {
        next = wt->next;            /* before wt's stack may go */
        gmp__wctx_ready(&wt->w);
    }
    if (wl->purger)
        gmp__wctx_ready(wl->purger);
    if (wl->releaser)
        gmp__wctx_ready(wl->releaser);
}

/* A park's commit: releases the pool lock once the waiter is off its
 * stack. Context: g0 (or the next G after a direct park). */
static bool unlock_pool(struct g *gp, void *lock)
{
    (void)gp;
    gmp__spin_unlock(lock);
    return true;
}

/* An idle worker's commit: parked, unless it was handed something
 * meanwhile (The idle park). Context: g0 (or the next G after a direct
 * park), or the worker itself when it waits as a thread. */
static bool commit_idle(struct g *gp, void *arg)
{
    (void)gp;
    struct worker *wk = arg;
    uint32_t parking = WK_PARKING;
    /* Acq_rel: release pairs with hand_over's acquire (we are off our
     * stack); acquire, on failure, with its release (we see the task). */
    return atomic_compare_exchange_strong_explicit(
        &wk->state, &parking, WK_PARKED, memory_order_acq_rel,
        memory_order_acquire);
}

static size_t cap_of(const struct gmp_pool *p)
{
    /* Relaxed: under the lock (written under it too), or a snapshot. */
    return atomic_load_explicit(&p->cap, memory_order_relaxed);
}

/* ---- The idle stack and the waiter queue (all: holds lock) --------------- */

static void idle_push(struct gmp_pool *p, struct worker *wk, int64_t now)
{
    /* Room: see idle_reserve. */
    p->idle[p->nidle++] = (struct idle_slot){wk, now};
}

static struct worker *idle_pop_top(struct gmp_pool *p)
{
    return p->idle[--p->nidle].wk;
}

/* ---- The return list (see The return) ----------------------------------- */

/* Pushes a worker that has stored its state. False while the mark is set:
 * the worker must come back under the lock. Context: the worker, no lock
 * held. */
static bool return_push(struct gmp_pool *p, struct worker *wk)
{
    /* Relaxed: the CAS checks it. */
    uintptr_t r = atomic_load_explicit(&p->returns, memory_order_relaxed);
    while (r != RET_ATTN) {
        wk->next = (struct worker *)r;
        /* Release: the absorbing exchange sees our record whole. */
        if (atomic_compare_exchange_weak_explicit(&p->returns, &r,
                                                  (uintptr_t)wk,
                                                  memory_order_release,
                                                  memory_order_relaxed))
            return true;
    }
    return false;
}

/* Puts a taken list (newest first) on the idle stack, the newest on top,
 * all stamped now: one clock reading for the list, not one per worker. */
static void absorb_list(struct gmp_pool *p, struct worker *wk)
{
    if (!wk)
        return;
    int64_t now = gmp__coarse_nanotime();
    size_t lo = p->nidle;
    for (; wk; wk = wk->next)
        idle_push(p, wk, now);
    for (size_t hi = p->nidle; lo + 1 < hi; lo++, hi--) {
        struct worker *t = p->idle[lo].wk;
        p->idle[lo].wk = p->idle[hi - 1].wk;
        p->idle[hi - 1].wk = t;
    }
}

/* Takes the return list onto the idle stack, leaving `with` in its place:
 * 0, or RET_ATTN to set the mark (from then on every worker comes back
 * under the lock). */
static void take_returns(struct gmp_pool *p, uintptr_t with)
{
    /* Acquire: pairs with return_push's release. */
    uintptr_t r = atomic_exchange_explicit(&p->returns, with,
                                           memory_order_acquire);
    if (r != RET_ATTN)
        absorb_list(p, (struct worker *)r);
}

/* Moves the returned workers onto the idle stack. */
static void absorb(struct gmp_pool *p)
{
    /* Relaxed: a peek, to spare the exchange when there is nothing. */
    uintptr_t r = atomic_load_explicit(&p->returns, memory_order_relaxed);
    if (r != 0 && r != RET_ATTN)
        take_returns(p, 0);
}

/* Sets the mark while a returning worker has something to do under the
 * lock (serve a waiter, retire), and clears it otherwise. Called after
 * every change to what decides it. */
static void attend(struct gmp_pool *p)
{
    bool want = p->whead || p->closed || p->nworkers > cap_of(p);
    /* Relaxed: only lock holders set or clear the mark. */
    uintptr_t r = atomic_load_explicit(&p->returns, memory_order_relaxed);
    if (want && r != RET_ATTN)
        take_returns(p, RET_ATTN);
    else if (!want && r == RET_ATTN)
        /* Relaxed: publishes nothing; pushes after it are taken by an
         * acquiring exchange. */
        atomic_store_explicit(&p->returns, 0, memory_order_relaxed);
}

/* Tells the n longest idle workers to exit, and closes the gap. */
static void retire_oldest(struct gmp_pool *p, size_t n, struct wakes *wl)
{
    if (n == 0)
        return;                     /* idle may be NULL: no memmove */
    for (size_t i = 0; i < n; i++) {
        struct worker *wk = p->idle[i].wk;
        wk->fn = NULL;
        wk->next = wl->workers;
        wl->workers = wk;
    }
    p->nworkers -= n;
    p->nidle -= n;
    memmove(p->idle, p->idle + n, p->nidle * sizeof *p->idle);
}

static struct waiter *waitq_pop(struct gmp_pool *p)
{
    struct waiter *wt = p->whead;
    p->whead = wt->next;
    if (!p->whead)
        p->wtail = NULL;
    p->nwaiting--;
    return wt;
}

/* Hands waiters reserved worker slots while the capacity allows. */
static void grant_slots(struct gmp_pool *p, struct wakes *wl)
{
    size_t cap = cap_of(p);
    while (p->whead && p->nworkers < cap) {
        struct waiter *wt = waitq_pop(p);
        wt->result = W_SLOT;
        p->nworkers++;
        p->nalive++;
        wt->next = wl->waiters;
        wl->waiters = wt;
    }
}

/* One of nalive leaves: returns the releaser to ready after the unlock if
 * it was the last and release waits. After that unlock the caller must
 * not touch the pool: it may be freed at once. */
static struct gmp__wctx *leave(struct gmp_pool *p)
{
    if (--p->nalive > 0 || !p->release_w)
        return NULL;
    struct gmp__wctx *w = p->release_w;
    p->release_w = NULL;
    return w;
}

/* Yields the caller's P when POOL_BACKLOG or more goroutines wait in its
 * ring: the workers it readied there run before it hands over more (see
 * Growth). Nothing for a plain thread. Context: any G or thread, no lock
 * held. */
static void backpressure(void)
{
    struct m *mp = gmp__getm();
    if (!mp || !mp->curg || !mp->p)
        return;
    struct p *pp = mp->p;
    /* Relaxed, both: a hint. The tail is ours; a thief may advance the
     * head after we read it, which only makes us yield a little early. */
    uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_relaxed);
    uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
    if (t - h >= POOL_BACKLOG)
        gmp__goyield();
}

/* ---- Workers ------------------------------------------------------------- */

/* Parks an idle worker until it is popped. True if it was handed a task,
 * false if told to exit. Context: the worker's G, no lock held. */
static bool idle_wait(struct worker *wk)
{
    if (wk->w.gp)
        gmp__gopark(commit_idle, wk, WAIT_CHAN_RECV);
    else if (commit_idle(NULL, wk))     /* a G inside a syscall bracket */
        gmp__notesleep(&wk->w.note);
    return wk->fn != NULL;
}

/* After a task: takes the next one, from the first waiting submitter or,
 * after an idle park, from whoever pops this worker. False when the worker
 * must exit; it has then left the pool and freed its record.
 * Context: the worker's G. */
static bool worker_next(struct gmp_pool *p, struct worker *wk)
{
    gmp__wctx_init(&wk->w);
    /* Relaxed: published by the push or the unlock; nobody pops us
     * before either. */
    atomic_store_explicit(&wk->state, WK_PARKING, memory_order_relaxed);
    bool idle = return_push(p, wk);
    if (GMP_UNLIKELY(!idle)) {      /* the mark: come back under the lock */
        gmp__spin_lock(&p->lock);
        if (GMP_UNLIKELY(p->closed || p->nworkers > cap_of(p))) {
            p->nworkers--;          /* retire: released, or tuned down */
            attend(p);
        } else if (p->whead) {
            struct waiter *wt = waitq_pop(p);
            attend(p);
            wk->fn = wt->fn;
            wk->arg = wt->arg;
            wt->result = W_TAKEN;
            gmp__spin_unlock(&p->lock);
            gmp__wctx_ready(&wt->w);
            return true;
        } else {                    /* the mark went meanwhile */
            idle_push(p, wk, gmp__coarse_nanotime());
            gmp__spin_unlock(&p->lock);
            idle = true;
        }
    }
    if (idle) {
        if (GMP_LIKELY(idle_wait(wk)))
            return true;
        gmp__spin_lock(&p->lock);   /* told to exit */
    }
    /* Retired, or told to exit (the purger, a tune or release counted us
     * out). */
    struct gmp__wctx *rel = leave(p);
    gmp__spin_unlock(&p->lock);
    gmp__free(wk, sizeof *wk);
    if (rel)
        gmp__wctx_ready(rel);
    return false;
}

static void worker_main(void *arg)
{
    struct worker *wk = arg;
    struct gmp_pool *p = wk->pool;
    bool more;
    do {
        wk->fn(wk->arg);
        more = worker_next(p, wk);
    } while (more);
}

/* Grows the idle stack to a slot for every counted worker, the new one
 * included, so that a push never lacks room: every worker that may push
 * itself was counted in nworkers when it (or a later worker) got here.
 * The array doubles, so this allocates O(log n) times over a pool's life.
 * False if memory runs out. Context: any G or thread, no lock held. */
static bool idle_reserve(struct gmp_pool *p)
{
    for (;;) {
        gmp__spin_lock(&p->lock);
        size_t need = p->nworkers, have = p->idle_cap;
        gmp__spin_unlock(&p->lock);
        if (need <= have)
            return true;
        size_t n = have > need / 2 ? have * 2 : need;
        if (n < 64)
            n = 64;
        if (n > SIZE_MAX / sizeof *p->idle)
            return false;
        struct idle_slot *a = gmp__alloc(n * sizeof *a);
        if (!a)
            return false;
        struct idle_slot *old = a;
        size_t oldn = n;
        gmp__spin_lock(&p->lock);
        if (p->idle_cap < n) {      /* else another grew it meanwhile */
            if (p->nidle)
                memcpy(a, p->idle, p->nidle * sizeof *a);
            old = p->idle;
            oldn = p->idle_cap;
            p->idle = a;
            p->idle_cap = n;
        }
        gmp__spin_unlock(&p->lock);
        gmp__free(old, oldn * sizeof *old);
    }
}

/* Starts a worker for fn(arg) in a slot the caller reserved (nworkers and
 * nalive counted); gives the slot back if it cannot. Context: any G or
 * thread, no lock held. */
static int start_worker(struct gmp_pool *p, void (*fn)(void *), void *arg)
{
    struct worker *wk = idle_reserve(p) ? gmp__alloc(sizeof *wk) : NULL;
    int err = GMP_ENOMEM;
    if (wk) {
        wk->pool = p;
        wk->fn = fn;
        wk->arg = arg;
        err = gmp_go(worker_main, wk);
        if (GMP_LIKELY(err == 0)) {
            backpressure();
            return 0;
        }
        gmp__free(wk, sizeof *wk);
    }
    struct wakes wl = {0};
    gmp__spin_lock(&p->lock);
    p->nworkers--;
    grant_slots(p, &wl);            /* a waiter may take the slot */
    attend(p);
    wl.releaser = leave(p);
    gmp__spin_unlock(&p->lock);
    wake_all(&wl);
    return err;
}

/* ---- The purger ---------------------------------------------------------- */

static void purger(void *arg)
{
    struct gmp_pool *p = arg;
    struct gmp__wctx w;
    /* The idle stamps' clock's resolution (1 ns: the precise clock). And
     * the age at which it proves expiry_ns have passed. Relaxed: see
     * timer.h. */
    int64_t res = atomic_load_explicit(&gmp__coarse_res, memory_order_relaxed);
    if (res == 0)
        res = 1;
    int64_t span = gmp__add_sat(p->expiry_ns, res);
    gmp__spin_lock(&p->lock);
    while (!p->closed) {
        int64_t now = gmp__coarse_nanotime();
        struct wakes wl = {0};
        size_t n = 0;
        absorb(p);
        while (n < p->nidle && now - p->idle[n].since >= span)
            n++;
        retire_oldest(p, n, &wl);
        if (wl.workers) {
            gmp__spin_unlock(&p->lock);
            wake_all(&wl);
            gmp__spin_lock(&p->lock);
            continue;
        }
        int64_t wait_ns = p->expiry_ns;
        if (p->nidle)   /* until the bottom is due, by the coarse clock */
            wait_ns = gmp__add_sat(span - (now - p->idle[0].since), res);
        gmp__wctx_init(&w);
        p->purger_w = &w;
        bool woken = gmp__wctx_block_until(
            &w, unlock_pool, &p->lock, WAIT_SLEEP,
            gmp__deadline(gmp__nanotime(), wait_ns));
        gmp__spin_lock(&p->lock);
        if (!woken && p->purger_w == &w)
            p->purger_w = NULL;     /* the deadline won */
    }
    struct gmp__wctx *rel = leave(p);
    gmp__spin_unlock(&p->lock);
    if (rel)
        gmp__wctx_ready(rel);
}

/* ---- The API ------------------------------------------------------------- */

gmp_pool_t *gmp_pool_new(size_t capacity, const gmp_pool_opts_t *opts)
{
    gmp__preempt_check();
    int64_t expiry = opts ? opts->expiry_ns : 0;
    if (capacity == 0 || expiry < 0)
        return NULL;
    struct gmp_pool *p = gmp__alloc(sizeof *p);
    if (!p)
        return NULL;
    p->expiry_ns = expiry ? expiry : POOL_EXPIRY_DEFAULT_NS;
    p->nonblocking = opts && opts->nonblocking;
    /* Relaxed: nobody else sees p yet. */
    atomic_store_explicit(&p->cap, capacity, memory_order_relaxed);
    p->nalive = 1;                  /* the purger */
    if (gmp_go(purger, p) != 0) {   /* GMP_EPERM without a runtime */
        gmp__free(p, sizeof *p);
        return NULL;
    }
    return p;
}

/* At capacity, with the lock held and the mark set: queues a waiter and
 * parks until a worker takes its task, a tune grants it a slot, or release
 * closes the pool. */
static int submit_wait(struct gmp_pool *p, void (*fn)(void *), void *arg)
{
    struct waiter wt = {.fn = fn, .arg = arg};
    gmp__wctx_init(&wt.w);
    if (p->wtail)
        p->wtail->next = &wt;
    else
        p->whead = &wt;
    p->wtail = &wt;
    p->nwaiting++;
    gmp__wctx_block(&wt.w, unlock_pool, &p->lock, WAIT_COND);
    switch (wt.result) {
    case W_TAKEN:
        return 0;
    case W_SLOT:
        return start_worker(p, fn, arg);
    default:
        return GMP_ECLOSED;
    }
}

int gmp_pool_submit(gmp_pool_t *p, void (*fn)(void *), void *arg)
{
    if (!p || !fn)
        return GMP_EINVAL;
    gmp__preempt_check();
    gmp__spin_lock(&p->lock);
    if (p->nidle == 0)
        absorb(p);
    if (GMP_UNLIKELY(p->nidle == 0)) {
        if (p->closed) {            /* release empties the idle stack */
            gmp__spin_unlock(&p->lock);
            return GMP_ECLOSED;
        }
        if (p->nworkers < cap_of(p)) {
            p->nworkers++;
            p->nalive++;
            gmp__spin_unlock(&p->lock);
            return start_worker(p, fn, arg);
        }
        if (p->nonblocking) {
            gmp__spin_unlock(&p->lock);
            return GMP_EAGAIN;
        }
        /* From here on workers come back under the lock, and serve the
         * waiter; one that came back meanwhile takes the task now. */
        take_returns(p, RET_ATTN);
        if (p->nidle == 0)
            return submit_wait(p, fn, arg);
        attend(p);
    }
    /* The hot path: an idle worker. */
    struct worker *wk = idle_pop_top(p);
    gmp__spin_unlock(&p->lock);
    /* Ours now: nobody else pops it, and the worker reads its task only
     * after hand_over's exchange. */
    wk->fn = fn;
    wk->arg = arg;
    hand_over(wk);
    backpressure();
    return 0;
}

int gmp_pool_tune(gmp_pool_t *p, size_t capacity)
{
    if (!p || capacity == 0)
        return GMP_EINVAL;
    gmp__preempt_check();
    struct wakes wl = {0};
    gmp__spin_lock(&p->lock);
    if (p->closed) {
        gmp__spin_unlock(&p->lock);
        return GMP_ECLOSED;
    }
    /* Relaxed: written under the lock; see struct gmp_pool. */
    atomic_store_explicit(&p->cap, capacity, memory_order_relaxed);
    absorb(p);
    size_t excess = p->nworkers > capacity ? p->nworkers - capacity : 0;
    retire_oldest(p, excess < p->nidle ? excess : p->nidle, &wl);
    grant_slots(p, &wl);
    attend(p);
    gmp__spin_unlock(&p->lock);
    wake_all(&wl);
    return 0;
}

size_t gmp_pool_running(const gmp_pool_t *cp)
{
    if (!cp)
        return 0;
    gmp__preempt_check();
    /* The pool is never const to us: counting absorbs the return list. */
    struct gmp_pool *p = (struct gmp_pool *)cp;
    gmp__spin_lock(&p->lock);
    absorb(p);
    size_t n = p->nworkers - p->nidle;
    gmp__spin_unlock(&p->lock);
    return n;
}

size_t gmp_pool_cap(const gmp_pool_t *p)
{
    return p ? cap_of(p) : 0;
}

int gmp_pool_release(gmp_pool_t *p)
{
    if (!p)
        return GMP_EINVAL;
    gmp__preempt_check();
    struct wakes wl = {0};
    struct gmp__wctx w;
    gmp__wctx_init(&w);
    gmp__spin_lock(&p->lock);
    if (p->closed) {                /* a concurrent second release */
        gmp__spin_unlock(&p->lock);
        return GMP_ECLOSED;
    }
    p->closed = true;
    attend(p);                      /* sets the mark: all come back here */
    retire_oldest(p, p->nidle, &wl);
    while (p->whead) {
        struct waiter *wt = waitq_pop(p);
        wt->result = W_CLOSED;
        wt->next = wl.waiters;
        wl.waiters = wt;
    }
    if (p->purger_w) {
        if (gmp__wctx_claim(p->purger_w))
            wl.purger = p->purger_w;
        p->purger_w = NULL;
    }
    gmp__spin_unlock(&p->lock);
    wake_all(&wl);
    gmp__spin_lock(&p->lock);
    if (p->nalive > 0) {
        p->release_w = &w;
        gmp__wctx_block(&w, unlock_pool, &p->lock, WAIT_WG);
    } else {
        gmp__spin_unlock(&p->lock);
    }
    gmp__free(p->idle, p->idle_cap * sizeof *p->idle);
    gmp__free(p, sizeof *p);
    return 0;
}

/* For the tests: submitters waiting at capacity now. Context: any. */
GMP_HIDDEN size_t gmp__pool_waiting(gmp_pool_t *p);
size_t gmp__pool_waiting(gmp_pool_t *p)
{
    gmp__spin_lock(&p->lock);
    size_t n = p->nwaiting;
    gmp__spin_unlock(&p->lock);
    return n;
}
