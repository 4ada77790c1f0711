/*
 * select.c - Go's select (select.go): wait on many channel operations,
 * complete exactly one.
 *
 * The protocol:
 *   1. Poll order: the cases with a channel, shuffled uniformly (per-M
 *      PRNG; a thread-local one on plain threads). Lock order: the same
 *      cases sorted by channel address, so that two selects over the same
 *      channels always lock them in one order and cannot deadlock.
 *   2. Lock every channel (once each, in lock order). Pass 1: the first
 *      ready case in poll order completes, exactly as a plain send or
 *      receive would (a waiting peer, the buffer, or closed).
 *   3. Nothing ready and polling: unlock, GMP_EAGAIN.
 *      With a positive timeout the wait in step 4 has a deadline: its
 *      timer competes with the wakers for the claimed flag, and if it
 *      wins, pass 3 unlinks every record and the select times out.
 *   4. Pass 2: queue one record per case on its channel, all naming one
 *      wctx, and park; the park's callback unlocks the channels (after
 *      the G is off its stack, so a waker cannot run it early).
 *   5. A waker (a peer operation, or close) dequeues one of the records.
 *      Several may find our records at once; the wctx's claimed flag,
 *      CAS 0 -> 1, elects exactly one of them, and the others skip our
 *      records (gmp__waitq_dequeue). The winner completes its case
 *      into/from the record and names it in wctx->param.
 *   6. Pass 3: lock every channel again and unlink the records that did
 *      not fire; the fired one says which case completed and how.
 * Why exactly one case commits: a case commits either in pass 1 (under
 * all the locks, before anything is queued) or through the one elected
 * waker; nothing else touches the caller's elements.
 *
 * Records are unlinked in pass 3 under the same locks the wakers take, so
 * no waker can see a record after the select returned. The unlock loop of
 * step 4 reads each record's channel before releasing the one before: a
 * woken select blocks in pass 3 on any lock still held, so its records
 * and stack stay put until the loop's last unlock.
 */
#include <stdlib.h>

#include "chan.h"
#include "timer.h"
#include "alloc.h"

#define SELECT_STACK 16             /* cases whose bookkeeping fits on the
                                       stack; more is malloc'd */

/* A uniform draw in [0, n). Context: any. */
static uint32_t fastrandn(uint32_t n)
{
    static __thread uint64_t tstate;
    struct m *mp = gmp__getm();
    uint32_t r;
    if (mp) {
        r = gmp__fastrand(mp);
    } else {
        if (!tstate)
            tstate = (uintptr_t)&tstate ^ (uint64_t)gmp__nanotime() ^ 1;
        r = gmp__fastrand_step(&tstate);
    }
    return (uint32_t)(((uint64_t)r * n) >> 32);
}

static void sellock(gmp_case_t *cases, const uint32_t *lockorder, size_t n)
{
    struct gmp_chan *last = NULL;
    for (size_t i = 0; i < n; i++) {
        struct gmp_chan *c = cases[lockorder[i]].chan;
        if (c != last)
            gmp__spin_lock(&c->lock);
        last = c;
    }
}

static void selunlock(gmp_case_t *cases, const uint32_t *lockorder, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        struct gmp_chan *c = cases[lockorder[i]].chan;
        if (i > 0 && c == cases[lockorder[i - 1]].chan)
            continue;
        gmp__spin_unlock(&c->lock);
    }
}

/* The park callback: unlocks the channels of the chained records (lock
 * order), reading each record's successor before letting its channel go.
 * Context: g0 of the parking G, or the thread itself. */
static bool selparkcommit(struct g *gp, void *first)
{
    (void)gp;
    struct gmp_chan *last = NULL;
    for (struct sudog *sg = first; sg; sg = sg->waitlink) {
        if (sg->c != last && last)
            gmp__spin_unlock(&last->lock);
        last = sg->c;
    }
    if (last)
        gmp__spin_unlock(&last->lock);
    return true;
}

static uintptr_t chan_key(gmp_case_t *cases, const uint32_t *order, size_t i)
{
    return (uintptr_t)cases[order[i]].chan;
}

/* Moves order[r] down the max-heap order[0..end). */
static void sift(gmp_case_t *cases, uint32_t *order, size_t r, size_t end)
{
    for (;;) {
        size_t ch = 2 * r + 1;
        if (ch >= end)
            return;
        if (ch + 1 < end &&
            chan_key(cases, order, ch) < chan_key(cases, order, ch + 1))
            ch++;
        if (chan_key(cases, order, r) >= chan_key(cases, order, ch))
            return;
        uint32_t t = order[r];
        order[r] = order[ch];
        order[ch] = t;
        r = ch;
    }
}

/* Sorts order[0..n) by channel address: heap sort, no recursion and no
 * allocation, n log n for large selects (Go's choice too). */
static void sort_by_chan(gmp_case_t *cases, uint32_t *order, size_t n)
{
    for (size_t start = n / 2; start > 0; start--)
        sift(cases, order, start - 1, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = order[0];
        order[0] = order[end];
        order[end] = t;
        sift(cases, order, 0, end);
    }
}

/* Blocks for ever (Go's select {} and a select of only nil channels). */
static _Noreturn void block_forever(void)
{
    struct gmp__wctx w;
    gmp__wctx_init(&w);
    for (;;) {
        if (w.gp)
            gmp__gopark(NULL, NULL, WAIT_SELECT_NO_CASES);
        else
            gmp__notesleep(&w.note);
    }
}

static bool valid(const gmp_case_t *cs)
{
    if (cs->op != GMP_SEND && cs->op != GMP_RECV)
        return false;
    return !(cs->op == GMP_SEND && cs->chan && cs->chan->elemsize &&
             !cs->elem);
}

/* Pass 1: completes the first ready case in poll order. Returns its
 * index, or -1; the channels are unlocked when it returns an index, still
 * locked otherwise. */
static long pass1(gmp_case_t *cases, const uint32_t *pollorder,
                  const uint32_t *lockorder, size_t norder)
{
    for (size_t k = 0; k < norder; k++) {
        uint32_t i = pollorder[k];
        gmp_case_t *cs = &cases[i];
        struct gmp_chan *c = cs->chan;
        struct gmp__wctx *w = NULL;
        /* Relaxed, qcount and closed: under the lock. */
        size_t n = atomic_load_explicit(&c->qcount, memory_order_relaxed);
        bool closed = atomic_load_explicit(&c->closed, memory_order_relaxed);
        struct sudog *sg;
        if (cs->op == GMP_RECV) {
            if ((sg = gmp__waitq_dequeue(&c->sendq)))
                w = gmp__chan_recv_from(c, sg, cs->elem);
            else if (n > 0)
                gmp__chan_bufget(c, cs->elem);
            else if (closed) {
                selunlock(cases, lockorder, norder);
                if (cs->elem)
                    memset(cs->elem, 0, c->elemsize);
                cs->result = GMP_ECLOSED;
                return i;
            } else
                continue;
        } else {
            if (closed) {
                selunlock(cases, lockorder, norder);
                cs->result = GMP_ECLOSED;
                return i;
            }
            if ((sg = gmp__waitq_dequeue(&c->recvq)))
                w = gmp__chan_send_to(c, sg, cs->elem);
            else if (n < c->dataqsiz)
                gmp__chan_bufput(c, cs->elem);
            else
                continue;
        }
        selunlock(cases, lockorder, norder);
        if (w)
            gmp__wctx_ready(w);
        cs->result = 0;
        return i;
    }
    return -1;
}

/* Steps 1 to 6 of the file comment for a select with norder > 0 cases
 * that have a channel, on order's 2 * n words. Returns as gmp_select.
 * Context: as gmp_select. */
static int select_chans(gmp_case_t *cases, size_t n, size_t norder,
                        uint32_t *order, bool block, int64_t deadline)
{
    uint32_t *pollorder = order, *lockorder = order + n;

    /* Poll order: an inside-out shuffle of the cases that have a channel. */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cases[i].chan)
            continue;
        uint32_t j = fastrandn((uint32_t)k + 1);
        pollorder[k] = pollorder[j];
        pollorder[j] = (uint32_t)i;
        k++;
    }
    memcpy(lockorder, pollorder, norder * sizeof *lockorder);
    sort_by_chan(cases, lockorder, norder);

    sellock(cases, lockorder, norder);
    long casi = pass1(cases, pollorder, lockorder, norder);
    if (casi >= 0)
        return (int)casi;
    if (!block) {
        selunlock(cases, lockorder, norder);
        return GMP_EAGAIN;
    }

    /* Pass 2: a record on every channel, chained in lock order. */
    struct sudog stackrecs[4];      /* a thread's records, when few */
    struct sudogs set;
    if (!gmp__sudogs_get(&set, norder, stackrecs,
                         sizeof stackrecs / sizeof stackrecs[0])) {
        selunlock(cases, lockorder, norder);
        return GMP_ENOMEM;
    }
    struct gmp__wctx w;
    gmp__wctx_init(&w);
    struct sudog *sg = set.first;
    for (k = 0; k < norder; k++, sg = sg->waitlink) {
        gmp_case_t *cs = &cases[lockorder[k]];
        sg->w = &w;
        sg->c = cs->chan;
        sg->elem = cs->elem;
        sg->isselect = true;
        sg->success = false;
        gmp__waitq_enqueue(cs->op == GMP_SEND ? &cs->chan->sendq
                                              : &cs->chan->recvq, sg);
    }
    bool woken = gmp__wctx_block_until(&w, selparkcommit, set.first,
                                       WAIT_SELECT, deadline);

    /* Pass 3: unlink every record but the one that fired. */
    sellock(cases, lockorder, norder);
    struct sudog *fired = w.param;
    casi = -1;
    sg = set.first;
    for (k = 0; k < norder; k++, sg = sg->waitlink) {
        gmp_case_t *cs = &cases[lockorder[k]];
        if (sg == fired)
            casi = lockorder[k];
        else
            gmp__waitq_remove(cs->op == GMP_SEND ? &cs->chan->sendq
                                                 : &cs->chan->recvq, sg);
    }
    selunlock(cases, lockorder, norder);
    if (casi < 0 && woken)
        gmp__throw("select: woken without a case");
    if (casi >= 0)
        /* A receive woken by close found its element zeroed by the
         * closer. */
        cases[casi].result = fired->success ? 0 : GMP_ECLOSED;
    gmp__sudogs_put(&set);
    return casi >= 0 ? (int)casi : GMP_ETIMEDOUT;
}

int gmp_select(gmp_case_t *cases, size_t n, int64_t timeout_ns)
{
    bool block = timeout_ns == GMP_FOREVER || timeout_ns > 0;
    if (n > 0 && !cases)
        return GMP_EINVAL;
    if (n > UINT32_MAX / 2)
        return GMP_EINVAL;
    size_t norder = 0;              /* cases with a channel */
    for (size_t i = 0; i < n; i++) {
        if (!valid(&cases[i]))
            return GMP_EINVAL;
        norder += cases[i].chan != NULL;
    }
    gmp__preempt_check();
    int64_t deadline = 0;
    if (timeout_ns > 0)
        deadline = gmp__deadline(gmp__nanotime(), timeout_ns);
    if (norder == 0) {
        if (deadline) {
            gmp_sleep(timeout_ns);
            return GMP_ETIMEDOUT;
        }
        if (block)
            block_forever();
        return GMP_EAGAIN;
    }

    uint32_t stackorder[2 * SELECT_STACK];
    uint32_t *order = stackorder;
    if (n > SELECT_STACK && !(order = gmp__alloc(2 * n * sizeof *order)))
        return GMP_ENOMEM;
    int ret = select_chans(cases, n, norder, order, block, deadline);
    if (order != stackorder)
        gmp__free(order, 2 * n * sizeof *order);
    return ret;
}
