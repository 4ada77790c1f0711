/*
 * chan.c - channels (Go's chan.go): a ring buffer of dataqsiz elements,
 * a queue of blocked receivers and one of blocked senders, one lock.
 *
 * Invariants (under the lock):
 *   - recvq is empty unless the buffer is empty; sendq is empty unless the
 *     buffer is full (an unbuffered channel is always both).
 *   - A closed channel has no waiter in sendq, and none in recvq once
 *     close has run.
 * So a sender that finds a receiver waiting copies straight into the
 * receiver's buffer, and a receiver that finds a sender waiting on a full
 * buffer takes the head and refills the tail with the sender's element:
 * FIFO holds, nothing detours through the ring.
 *
 * Every operation takes the lock once, except that trysend / tryrecv (and
 * select's poll) first look without it, as Go's non-blocking paths do: a
 * send on a channel that is not closed and is full, or a receive on one
 * that is empty and not closed, fails without touching the lock. The
 * lock is a spinlock (lock.h): nothing blocks or switches under it; a
 * waiter to be readied is readied after the unlock.
 *
 * Waiters are goroutines (they park) or plain threads (they sleep on
 * their wctx's note); the queues do not care which.
 */
#include <stdlib.h>

#include "chan.h"
#include "alloc.h"

/* ---- Wait queues ---------------------------------------------------------- */

/* Removes and returns the first waiter that may still be woken: a select's
 * record whose select another case already won is dropped on the way (its
 * select removes the rest of its records itself). Context: holds the
 * channel's lock. */
struct sudog *gmp__waitq_dequeue(struct waitq *q)
{
    for (;;) {
        /* Relaxed: under the lock. */
        struct sudog *sg = atomic_load_explicit(&q->first,
                                                memory_order_relaxed);
        if (!sg)
            return NULL;
        struct sudog *y = sg->next;
        if (!y) {
            atomic_store_explicit(&q->first, NULL, memory_order_relaxed);
            q->last = NULL;
        } else {
            y->prev = NULL;
            atomic_store_explicit(&q->first, y, memory_order_relaxed);
            sg->next = NULL;
        }
        if (sg->isselect) {
            uint32_t zero = 0;
            /* Relaxed: it only elects the one waker of this select; what
             * the waker hands over travels by the wake-up's release and,
             * for the losers' records, by the channel locks the select
             * takes again. */
            if (!atomic_compare_exchange_strong_explicit(
                    &sg->w->claimed, &zero, 1, memory_order_relaxed,
                    memory_order_relaxed))
                continue;
        }
        return sg;
    }
}

/* Unlinks sg if it is still queued (Go's dequeueSudoG). A record that is
 * neither first nor linked was already taken by gmp__waitq_dequeue.
 * Context: holds the channel's lock. */
void gmp__waitq_remove(struct waitq *q, struct sudog *sg)
{
    struct sudog *x = sg->prev, *y = sg->next;
    if (x) {
        x->next = y;
        if (y)
            y->prev = x;
        else
            q->last = x;
    } else if (y) {
        y->prev = NULL;
        /* Relaxed: under the lock. */
        atomic_store_explicit(&q->first, y, memory_order_relaxed);
    } else if (atomic_load_explicit(&q->first, memory_order_relaxed) == sg) {
        atomic_store_explicit(&q->first, NULL, memory_order_relaxed);
        q->last = NULL;
    }
    sg->next = sg->prev = NULL;
}

/* ---- Matched halves --------------------------------------------------------- */

struct gmp__wctx *gmp__chan_send_to(struct gmp_chan *c, struct sudog *sg,
                                    const void *ep)
{
    if (sg->elem)
        gmp__elem_copy(sg->elem, ep, c->elemsize);
    sg->success = true;
    sg->w->param = sg;
    return sg->w;
}

struct gmp__wctx *gmp__chan_recv_from(struct gmp_chan *c, struct sudog *sg,
                                      void *ep)
{
    if (c->dataqsiz == 0) {
        if (ep)
            gmp__elem_copy(ep, sg->elem, c->elemsize);
    } else {
        /* The buffer is full: take its head, and the sender's element
         * takes the freed slot, which is now the tail. */
        char *slot = gmp__chanbuf(c, c->recvx);
        if (ep)
            gmp__elem_copy(ep, slot, c->elemsize);
        gmp__elem_copy(slot, sg->elem, c->elemsize);
        if (++c->recvx == c->dataqsiz)
            c->recvx = 0;
        c->sendx = c->recvx;
    }
    sg->success = true;
    sg->w->param = sg;
    return sg->w;
}

/* ---- Lock-free looks (non-blocking paths only) -------------------------- */

/* Go's full() and empty(). Acquire loads: a look that sees the channel
 * closed must also see everything buffered before the close (the close's
 * release store), so the checks below read in the order that makes each
 * answer true at some instant. */
static bool chan_full(struct gmp_chan *c)
{
    if (c->dataqsiz == 0)
        return atomic_load_explicit(&c->recvq.first,
                                    memory_order_acquire) == NULL;
    return atomic_load_explicit(&c->qcount, memory_order_acquire) ==
           c->dataqsiz;
}

static bool chan_empty(struct gmp_chan *c)
{
    if (c->dataqsiz == 0)
        return atomic_load_explicit(&c->sendq.first,
                                    memory_order_acquire) == NULL;
    return atomic_load_explicit(&c->qcount, memory_order_acquire) == 0;
}

static bool chan_closed(struct gmp_chan *c)
{
    /* Acquire: pairs with the release store in gmp_chan_close. */
    return atomic_load_explicit(&c->closed, memory_order_acquire) != 0;
}

/* ---- Operations ------------------------------------------------------------ */

static bool unlock_chan(struct g *gp, void *c)
{
    (void)gp;
    gmp__spin_unlock(&((struct gmp_chan *)c)->lock);
    return true;
}

/* Parks the caller on q until a peer or close serves its record. Returns
 * whether a peer did (false: closed). Context: holds c->lock; returns
 * without it. */
static bool chan_wait(struct gmp_chan *c, struct waitq *q, void *elem,
                      uint32_t reason)
{
    struct sudog local, *sg = gmp__sudog_acquire();
    if (!sg)
        sg = &local;
    struct gmp__wctx w;
    gmp__wctx_init(&w);
    sg->elem = elem;
    sg->w = &w;
    sg->c = c;
    sg->isselect = false;
    sg->success = false;
    gmp__waitq_enqueue(q, sg);
    gmp__wctx_block(&w, unlock_chan, c, reason);
    bool ok = sg->success;
    if (sg != &local)
        gmp__sudog_release(sg);
    return ok;
}

static int chansend(struct gmp_chan *c, const void *ep, bool block)
{
    if (GMP_UNLIKELY(!c || (!ep && c->elemsize)))
        return GMP_EINVAL;
    gmp__preempt_check();
    /* Relaxed would do for closed here (Go reads it plainly); acquire
     * keeps one helper for both paths. */
    if (!block && !chan_closed(c) && chan_full(c))
        return GMP_EAGAIN;
    gmp__spin_lock(&c->lock);
    /* Relaxed: under the lock. */
    if (atomic_load_explicit(&c->closed, memory_order_relaxed)) {
        gmp__spin_unlock(&c->lock);
        return GMP_ECLOSED;
    }
    struct sudog *sg = gmp__waitq_dequeue(&c->recvq);
    if (sg) {
        struct gmp__wctx *w = gmp__chan_send_to(c, sg, ep);
        gmp__spin_unlock(&c->lock);
        gmp__wctx_ready(w);
        return 0;
    }
    /* Relaxed: under the lock. */
    if (atomic_load_explicit(&c->qcount, memory_order_relaxed) <
        c->dataqsiz) {
        gmp__chan_bufput(c, ep);
        gmp__spin_unlock(&c->lock);
        return 0;
    }
    if (!block) {
        gmp__spin_unlock(&c->lock);
        return GMP_EAGAIN;
    }
    return chan_wait(c, &c->sendq, (void *)ep, WAIT_CHAN_SEND)
               ? 0 : GMP_ECLOSED;
}

static int chanrecv(struct gmp_chan *c, void *ep, bool block)
{
    if (GMP_UNLIKELY(!c))
        return GMP_EINVAL;
    gmp__preempt_check();
    if (!block && chan_empty(c)) {
        if (!chan_closed(c))
            return GMP_EAGAIN;
        /* Closed: a value sent before the close may still be there. */
        if (chan_empty(c)) {
            if (ep)
                memset(ep, 0, c->elemsize);
            return GMP_ECLOSED;
        }
    }
    gmp__spin_lock(&c->lock);
    /* Relaxed, both: under the lock. */
    size_t n = atomic_load_explicit(&c->qcount, memory_order_relaxed);
    if (atomic_load_explicit(&c->closed, memory_order_relaxed) && n == 0) {
        gmp__spin_unlock(&c->lock);
        if (ep)
            memset(ep, 0, c->elemsize);
        return GMP_ECLOSED;
    }
    struct sudog *sg = gmp__waitq_dequeue(&c->sendq);
    if (sg) {
        struct gmp__wctx *w = gmp__chan_recv_from(c, sg, ep);
        gmp__spin_unlock(&c->lock);
        gmp__wctx_ready(w);
        return 0;
    }
    if (n > 0) {
        gmp__chan_bufget(c, ep);
        gmp__spin_unlock(&c->lock);
        return 0;
    }
    if (!block) {
        gmp__spin_unlock(&c->lock);
        return GMP_EAGAIN;
    }
    /* A close zeroes *ep for us. */
    return chan_wait(c, &c->recvq, ep, WAIT_CHAN_RECV) ? 0 : GMP_ECLOSED;
}

#define CHAN_HEAD ((sizeof(struct gmp_chan) + GMP_CACHELINE - 1) &            \
                   ~(size_t)(GMP_CACHELINE - 1))

/* A channel's size: its header and buffer, whole cache lines; 0 when it
 * would overflow. */
static size_t chan_bytes(size_t elem_size, size_t cap)
{
    size_t bytes;
    if (__builtin_mul_overflow(elem_size, cap, &bytes) ||
        __builtin_add_overflow(bytes, CHAN_HEAD + GMP_CACHELINE - 1, &bytes))
        return 0;
    return bytes & ~(size_t)(GMP_CACHELINE - 1);
}

gmp_chan_t *gmp_chan_make(size_t elem_size, size_t cap)
{
    gmp__preempt_check();
    size_t head = CHAN_HEAD;
    size_t bytes = chan_bytes(elem_size, cap);
    if (bytes == 0)
        return NULL;
    /* Lines of its own: a channel is shared between cores by design. */
    struct gmp_chan *c = gmp__alloc(bytes);
    if (!c)
        return NULL;
    c->dataqsiz = cap;
    c->elemsize = elem_size;
    c->buf = (char *)c + head;
    return c;
}

int gmp_chan_send(gmp_chan_t *c, const void *elem)
{
    return chansend(c, elem, true);
}

int gmp_chan_trysend(gmp_chan_t *c, const void *elem)
{
    return chansend(c, elem, false);
}

int gmp_chan_recv(gmp_chan_t *c, void *elem)
{
    return chanrecv(c, elem, true);
}

int gmp_chan_tryrecv(gmp_chan_t *c, void *elem)
{
    return chanrecv(c, elem, false);
}

int gmp_chan_close(gmp_chan_t *c)
{
    if (!c)
        return GMP_EINVAL;
    gmp__preempt_check();
    gmp__spin_lock(&c->lock);
    /* Relaxed: under the lock. */
    if (atomic_load_explicit(&c->closed, memory_order_relaxed)) {
        gmp__spin_unlock(&c->lock);
        return GMP_ECLOSED;
    }
    /* Release: a lock-free look that sees it closed sees the buffer as it
     * was at the close (chan_closed). */
    atomic_store_explicit(&c->closed, 1, memory_order_release);
    /* Every waiter leaves with nothing (receivers with a zeroed
     * element), woken in queue order, receivers first. */
    struct sudog *woken = NULL, **tail = &woken, *sg;
    while ((sg = gmp__waitq_dequeue(&c->recvq))) {
        if (sg->elem)
            memset(sg->elem, 0, c->elemsize);
        *tail = sg;
        tail = &sg->next;
    }
    while ((sg = gmp__waitq_dequeue(&c->sendq))) {
        *tail = sg;
        tail = &sg->next;
    }
    *tail = NULL;
    for (sg = woken; sg; sg = sg->next) {
        sg->success = false;
        sg->w->param = sg;
    }
    gmp__spin_unlock(&c->lock);
    while (woken) {
        sg = woken;
        woken = sg->next;           /* before the waiter may run */
        gmp__wctx_ready(sg->w);
    }
    return 0;
}

void gmp_chan_free(gmp_chan_t *c)
{
    gmp__preempt_check();
    if (c)
        gmp__free(c, chan_bytes(c->elemsize, c->dataqsiz));
}

size_t gmp_chan_len(const gmp_chan_t *c)
{
    gmp__preempt_check();           /* a loop on the length is a wait */
    /* Relaxed: a snapshot, as Go's len(ch). */
    return c ? atomic_load_explicit(&c->qcount, memory_order_relaxed) : 0;
}

size_t gmp_chan_cap(const gmp_chan_t *c)
{
    return c ? c->dataqsiz : 0;
}
