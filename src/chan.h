/*
 * chan.h - the channel object (Go's hchan), shared by chan.c and select.c.
 *
 * Guarded by lock: everything but elemsize/dataqsiz/buf (fixed). closed,
 * qcount and recvq/sendq.first are atomics so that the non-blocking paths
 * can look without the lock (Go's "is it full / empty and not closed"
 * checks); they are written only under the lock.
 */
#ifndef GMP_CHAN_H
#define GMP_CHAN_H

#include <string.h>

#include "runtime.h"
#include "park.h"

struct waitq {
    _Atomic(struct sudog *) first;  /* lock; relaxed reads without it */
    struct sudog *last;             /* lock */
};

struct gmp_chan {
    struct gmp__spinlock lock;
    _Atomic uint32_t closed;        /* 0, then 1 forever (lock) */
    _Atomic size_t qcount;          /* buffered elements (lock) */
    size_t       dataqsiz;          /* capacity */
    size_t       elemsize;
    size_t       sendx, recvx;      /* ring indices (lock) */
    struct waitq recvq, sendq;      /* blocked receivers, senders (lock) */
    char        *buf;               /* dataqsiz * elemsize bytes */
};

/* Copies one element; the common sizes inline to a move or two. */
static inline void gmp__elem_copy(void *dst, const void *src, size_t n)
{
    switch (n) {
    case 0:  break;
    case 4:  memcpy(dst, src, 4); break;
    case 8:  memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, n); break;
    }
}

static inline char *gmp__chanbuf(struct gmp_chan *c, size_t i)
{
    return c->buf + i * c->elemsize;
}

/* Appends sg. Context: holds c->lock. */
static inline void gmp__waitq_enqueue(struct waitq *q, struct sudog *sg)
{
    sg->next = NULL;
    sg->prev = q->last;
    if (q->last)
        q->last->next = sg;
    else
        /* Relaxed: under the lock; lock-free readers only test for NULL. */
        atomic_store_explicit(&q->first, sg, memory_order_relaxed);
    q->last = sg;
}

GMP_HIDDEN struct sudog *gmp__waitq_dequeue(struct waitq *q);
GMP_HIDDEN void gmp__waitq_remove(struct waitq *q, struct sudog *sg);

/* The halves of a matched send or receive, under c->lock: copy the
 * element, mark the waiter's record as served and name it in its wctx.
 * Return the wctx for the caller to ready once it has released its
 * lock(s). */
GMP_HIDDEN struct gmp__wctx *gmp__chan_send_to(struct gmp_chan *c,
                                               struct sudog *sg,
                                               const void *ep);
GMP_HIDDEN struct gmp__wctx *gmp__chan_recv_from(struct gmp_chan *c,
                                                 struct sudog *sg, void *ep);
/* Buffer halves. Context: holds c->lock, with room / an element there. */
static inline void gmp__chan_bufput(struct gmp_chan *c, const void *ep)
{
    gmp__elem_copy(gmp__chanbuf(c, c->sendx), ep, c->elemsize);
    if (++c->sendx == c->dataqsiz)
        c->sendx = 0;
    /* Relaxed: under the lock; lock-free readers see a whole value. */
    atomic_store_explicit(&c->qcount,
                          atomic_load_explicit(&c->qcount,
                                               memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static inline void gmp__chan_bufget(struct gmp_chan *c, void *ep)
{
    if (ep)
        gmp__elem_copy(ep, gmp__chanbuf(c, c->recvx), c->elemsize);
    if (++c->recvx == c->dataqsiz)
        c->recvx = 0;
    /* Relaxed: as in gmp__chan_bufput. */
    atomic_store_explicit(&c->qcount,
                          atomic_load_explicit(&c->qcount,
                                               memory_order_relaxed) - 1,
                          memory_order_relaxed);
}

#endif /* GMP_CHAN_H */
