/*
 * runq.c - the per-P run queue: a 256-slot ring of runnable Gs plus the
 * runnext slot, the spill of half a full ring to the global queue, and the
 * global queue itself (Go's runqput/runqget/runqgrab/runqsteal and
 * globrunqput/globrunqget).
 * Invariants:
 *   - Only the owner P writes runqtail or puts a G into runnext; any P may
 *     advance runqhead or empty runnext, always by CAS.
 *   - Slots are atomics accessed relaxed: a thief may read a slot the owner
 *     is about to overwrite; the CAS on runqhead decides whether what it
 *     read counts, so a stale read is discarded, never used.
 *   - A thief that computes more than half a ring to take read a torn
 *     head/tail pair; it retries instead of trusting it.
 *   - A G is in at most one queue: the ring, runnext or the global list.
 *   - With one P (pp->solo) there are no thieves: only Ps steal, and only
 *     from other Ps. The owner then updates runnext and runqhead with plain
 *     (relaxed) loads and stores instead of locked read-modify-writes.
 *
 * The global queue is two FIFO lists (docs/design.md, Scheduling): a spill
 * sends the Gs that have run to GQ_SPILLED, which batch pulls serve first,
 * and those that never ran to GQ_FIFO, which also takes every direct put
 * (yield, preemption, a G from another thread). So a G woken while its P
 * is swamped does not queue behind every G created and not yet started,
 * and a yielding or preempted G still goes behind everyone, as in Go. The
 * 61st-tick single pull alternates between the lists: neither starves.
 * Locks: none on the ring; sched.lock for the global queue and the spill.
 */
#include <time.h>

#include "runtime.h"

#define RUNQ_MASK (GMP_RUNQ_SIZE - 1)

/* Adds n to the global count. Relaxed: written under lock; lock-free
 * readers use it as a hint and take the lock before trusting it. */
static void runqsize_add(struct schedt *s, int32_t n)
{
    atomic_store_explicit(&s->runqsize,
                          atomic_load_explicit(&s->runqsize,
                                               memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static void gq_append(struct gmp__gqueue *q, struct g *head, struct g *tail,
                      int32_t n)
{
    tail->schedlink = NULL;
    if (q->tail)
        q->tail->schedlink = head;
    else
        q->head = head;
    q->tail = tail;
    q->n += n;
}

/* Moves half the full ring plus gp to the global queue. Returns false when
 * a thief took some of the ring meanwhile (the caller retries the fast
 * path). Context: owner of pp. Takes sched.lock. */
static bool runqputslow(struct schedt *s, struct p *pp, struct g *gp,
                        uint32_t h, uint32_t t)
{
    struct g *batch[GMP_RUNQ_SIZE / 2 + 1];
    uint32_t n = (t - h) / 2;

    if (n != GMP_RUNQ_SIZE / 2)
        gmp__throw("runqputslow: queue is not full");
    for (uint32_t i = 0; i < n; i++)
        batch[i] = atomic_load_explicit(&pp->runq[(h + i) & RUNQ_MASK],
                                        memory_order_relaxed);
    /* Release on success (Go's CasRel): our reads of the slots happen
     * before head moves past them, so they cannot see a later reuse. */
    if (!atomic_compare_exchange_strong_explicit(&pp->runqhead, &h, h + n,
                                                 memory_order_release,
                                                 memory_order_relaxed))
        return false;
    batch[n] = gp;
    /* Gs that have run (readied, or yielded to this ring) go to the list
     * served first; Gs that never ran, to the FIFO (see the file
     * comment). Each keeps the ring's order. */
    struct gmp__gqueue part[2] = {{0}};
    for (uint32_t i = 0; i <= n; i++)
        gq_append(&part[batch[i]->stk ? GQ_SPILLED : GQ_FIFO], batch[i],
                  batch[i], 1);
    gmp__lock(&s->lock);
    for (int k = 0; k < 2; k++)
        if (part[k].n)
            gq_append(&s->runq[k], part[k].head, part[k].tail, part[k].n);
    runqsize_add(s, (int32_t)n + 1);
    gmp__unlock(&s->lock);
    return true;
}

/* Puts gp on pp's queue: into runnext when next (kicking the old runnext
 * to the ring's tail), else at the ring's tail, spilling half the ring to
 * the global queue when full. Context: owner of pp. Never blocks. */
void gmp__runqput(struct schedt *s, struct p *pp, struct g *gp, bool next)
{
    if (next) {
        struct g *old;
        if (pp->solo) {
            /* Relaxed: no other thread writes a solo P's runnext (only Ps
             * steal, and there is no other P); a spinning M's runqempty
             * may read it, which is why it stays an atomic. */
            old = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
            atomic_store_explicit(&pp->runnext, gp, memory_order_relaxed);
        } else {
            /* Acq_rel: a thief's CAS on runnext may race us; the exchange
             * both publishes gp (release) and lets us use the old G
             * (acquire). */
            old = atomic_exchange_explicit(&pp->runnext, gp,
                                           memory_order_acq_rel);
        }
        if (!old)
            return;
        gp = old;
    }
    for (;;) {
        /* Acquire: pairs with thieves' release CAS on runqhead, so the
         * slots they read are free before we overwrite them. */
        uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
        /* Relaxed: only we write runqtail. */
        uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
        if (t - h < GMP_RUNQ_SIZE) {
            atomic_store_explicit(&pp->runq[t & RUNQ_MASK], gp,
                                  memory_order_relaxed);
            /* Release: a thief that sees the new tail sees the G in the
             * slot (pairs with the acquire load of runqtail in grab). */
            atomic_store_explicit(&pp->runqtail, t + 1, memory_order_release);
            return;
        }
        if (runqputslow(s, pp, gp, h, t))
            return;
    }
}

/* Takes a G from pp: runnext first (then *inherit: the G inherits the time
 * slice, schedtick does not advance), else the ring's head.
 * Context: owner of pp. Never blocks. */
struct g *gmp__runqget(struct p *pp, bool *inherit)
{
    /* Relaxed load as a cheap test; the CAS orders what matters. */
    struct g *next = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
    if (next && pp->solo) {
        /* Relaxed: no other thread writes a solo P's runnext. */
        atomic_store_explicit(&pp->runnext, NULL, memory_order_relaxed);
        *inherit = true;
        return next;
    }
    /* Acq_rel on success, Go's full-barrier cas: acquire pairs with the
     * release exchange that put the G there; release makes the runnext
     * emptying carry our earlier runqtail store with it, so a runqempty
     * that reads NULL here also reads the tail that received a G kicked
     * from runnext before. */
    if (next && atomic_compare_exchange_strong_explicit(
                    &pp->runnext, &next, NULL, memory_order_acq_rel,
                    memory_order_relaxed)) {
        *inherit = true;
        return next;
    }
    *inherit = false;
    for (;;) {
        /* Acquire: pairs with a thief's release CAS. */
        uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
        /* Relaxed: only we write runqtail. */
        uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
        if (t == h)
            return NULL;
        /* Relaxed: we wrote the slot ourselves (or copied it in). */
        struct g *gp = atomic_load_explicit(&pp->runq[h & RUNQ_MASK],
                                            memory_order_relaxed);
        if (pp->solo) {
            /* Relaxed: no thief moves a solo P's head; runqempty may read
             * it, as a hint. */
            atomic_store_explicit(&pp->runqhead, h + 1, memory_order_relaxed);
            return gp;
        }
        /* Release: the slot may be reused once head has passed it. */
        if (atomic_compare_exchange_weak_explicit(&pp->runqhead, &h, h + 1,
                                                  memory_order_release,
                                                  memory_order_relaxed))
            return gp;
    }
}

/* The G gmp__runqget would return, left in place; NULL if none. Only for
 * a solo P, whose queue nobody else takes from. Context: owner of pp. */
struct g *gmp__runqpeek_solo(struct p *pp)
{
    /* Relaxed, all: only the owner writes a solo P's runnext, tail and
     * head (see gmp__runqget). */
    struct g *next = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
    if (next)
        return next;
    uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_relaxed);
    if (atomic_load_explicit(&pp->runqtail, memory_order_relaxed) == h)
        return NULL;
    return atomic_load_explicit(&pp->runq[h & RUNQ_MASK],
                                memory_order_relaxed);
}

/* True when pp has nothing in its ring or runnext. Exact only for the
 * owner; for others a hint. Context: any. */
bool gmp__runqempty(struct p *pp)
{
    /* Go's loop: read head, tail, runnext, then tail again, so that a G
     * moving from runnext to the ring is not missed between the reads.
     * Acquire throughout: these back the final re-check of a parking M. */
    for (;;) {
        uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
        uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_acquire);
        struct g *next = atomic_load_explicit(&pp->runnext,
                                              memory_order_acquire);
        if (t == atomic_load_explicit(&pp->runqtail, memory_order_acquire))
            return h == t && next == NULL;
    }
}

/* Sleep about 3 us, as Go's usleep(3), before taking a running victim's
 * runnext: a G that readies another and then blocks at once (a channel
 * ping-pong) should get to run it itself. A real sleep, not a spin: the
 * kernel's timer slack makes it tens of microseconds, during which this M
 * still counts as spinning, so the wakep() of every further ready sees a
 * spinner and costs no futex wake-up. Spinning on the clock for 3 us
 * instead left the M idle again at once, and each ready of a ping-pong on
 * two Ps then paid a thread wake-up (about 2x slower). */
#define RUNNEXT_GRACE_NS 3000
static void runnext_grace(void)
{
    struct timespec ts = {0, RUNNEXT_GRACE_NS};
    GMP_LIBC(nanosleep)(&ts, NULL);
}

/* Copies half of victim's ring into pp's ring, starting at pp's tail, and
 * returns how many. Takes victim's runnext only when stealnext and the
 * ring is empty. Context: owner of pp (any P as a thief of victim). */
static uint32_t runqgrab(struct p *pp, struct p *victim, bool stealnext)
{
    /* Relaxed: our own tail, only we write it. */
    uint32_t ptail = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
    for (;;) {
        /* Acquire on both: see the slots the victim published before its
         * tail store, and the frees other thieves released. */
        uint32_t h = atomic_load_explicit(&victim->runqhead,
                                          memory_order_acquire);
        uint32_t t = atomic_load_explicit(&victim->runqtail,
                                          memory_order_acquire);
        uint32_t n = t - h;
        n = n - n / 2;
        if (n == 0) {
            if (!stealnext)
                return 0;
            struct g *next = atomic_load_explicit(&victim->runnext,
                                                  memory_order_acquire);
            if (!next)
                return 0;
            /* Relaxed: a hint; a wrong guess only changes whether we
             * wait before taking the G. */
            if (atomic_load_explicit(&victim->status, memory_order_relaxed) ==
                P_RUNNING) {
                runnext_grace();
                next = atomic_load_explicit(&victim->runnext,
                                            memory_order_acquire);
                if (!next)
                    return 0;
            }
            /* Acquire: we now own next, published by the owner's release
             * exchange. */
            if (!atomic_compare_exchange_strong_explicit(
                    &victim->runnext, &next, NULL, memory_order_acquire,
                    memory_order_relaxed))
                continue;
            atomic_store_explicit(&pp->runq[ptail & RUNQ_MASK], next,
                                  memory_order_relaxed);
            return 1;
        }
        if (n > GMP_RUNQ_SIZE / 2)
            continue;               /* torn read of head and tail */
        for (uint32_t i = 0; i < n; i++) {
            struct g *gp = atomic_load_explicit(
                &victim->runq[(h + i) & RUNQ_MASK], memory_order_relaxed);
            atomic_store_explicit(&pp->runq[(ptail + i) & RUNQ_MASK], gp,
                                  memory_order_relaxed);
        }
        /* Release: the victim may reuse the slots once head moves; the
         * copies above are ours only if this CAS wins. */
        if (atomic_compare_exchange_strong_explicit(&victim->runqhead, &h,
                                                    h + n,
                                                    memory_order_release,
                                                    memory_order_relaxed))
            return n;
    }
}

/* Steals half of victim's queue into pp's; returns one stolen G to run now
 * (the rest stay in pp's ring), or NULL. Context: owner of pp. */
struct g *gmp__runqsteal(struct p *pp, struct p *victim, bool stealnext)
{
    /* Relaxed: our own tail, and the slot runqgrab just wrote. */
    uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
    uint32_t n = runqgrab(pp, victim, stealnext);
    if (n == 0)
        return NULL;
    n--;
    struct g *gp = atomic_load_explicit(&pp->runq[(t + n) & RUNQ_MASK],
                                        memory_order_relaxed);
    if (n == 0)
        return gp;
    /* Acquire, as in runqput (Go's LoadAcq): only an overflow check. */
    uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
    if (t - h + n >= GMP_RUNQ_SIZE)
        gmp__throw("runqsteal: runq overflow");
    /* Release: publish the copied slots to our own thieves. */
    atomic_store_explicit(&pp->runqtail, t + n, memory_order_release);
    return gp;
}

/* ---- The global run queue (sched.lock held for all of these) ----------- */

void gmp__globrunqput(struct schedt *s, struct g *gp)
{
    gmp__globrunqputbatch(s, gp, gp, 1);
}

void gmp__globrunqputbatch(struct schedt *s, struct g *head, struct g *tail,
                           int32_t n)
{
    gq_append(&s->runq[GQ_FIFO], head, tail, n);
    runqsize_add(s, n);
}

static struct g *gq_pop(struct gmp__gqueue *q)
{
    struct g *gp = q->head;
    if (gp) {
        q->head = gp->schedlink;
        if (!q->head)
            q->tail = NULL;
        q->n--;
    }
    return gp;
}

/* Takes a batch of min(len/procs + 1, max, 128) Gs: returns the first and
 * puts the rest on pp's ring, which must have room (it is empty whenever
 * max != 1). The spilled list comes first; the single-G pull of every
 * 61st tick (max == 1) serves the two lists in turn, so neither starves.
 * Context: owner of pp, holds sched.lock. */
struct g *gmp__globrunqget(struct schedt *s, struct p *pp, int32_t max)
{
    int32_t size = atomic_load_explicit(&s->runqsize, memory_order_relaxed);
    if (size == 0)
        return NULL;
    int32_t n = size / gmp__procs(s) + 1;
    if (n > size)
        n = size;
    if (max > 0 && n > max)
        n = max;
    if (n > GMP_RUNQ_SIZE / 2)
        n = GMP_RUNQ_SIZE / 2;
    int first = GQ_SPILLED;
    if (max == 1 && (pp->globturn ^= 1))
        first = GQ_FIFO;
    /* Relaxed: as in gmp__globrunqputbatch. */
    atomic_store_explicit(&s->runqsize, size - n, memory_order_relaxed);
    struct g *gp = NULL;
    for (int32_t i = 0; i < n; i++) {
        struct g *g1 = gq_pop(&s->runq[first]);
        if (!g1)
            g1 = gq_pop(&s->runq[!first]);
        if (!gp)
            gp = g1;
        else
            gmp__runqput(s, pp, g1, false);
    }
    return gp;
}
