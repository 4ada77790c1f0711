/*
 * park.h - how anything waits: waiter contexts and waiter records (Go's
 * sudog), on gopark/goready.
 *
 * A blocking call (channel, select, semaphore, cond) is made by a G or by
 * a plain OS thread. Either way the caller puts a struct gmp__wctx on its
 * own stack: it names who waits (the G, or NULL and a note the thread
 * sleeps on) and carries what the waker hands back (the record that fired;
 * select's one-winner flag). Stacks never move in this runtime, so
 * everything on a waiter's stack stays valid until it is woken.
 *
 * A struct sudog is one entry in one wait queue: a channel's send or
 * receive queue, a semaphore's list, a cond's list. A select makes one per
 * case, all pointing to the same wctx. A G takes records from its P's
 * cache (refilled from and spilled to a central list under a lock; the
 * memory is freed when the runtime stops); a plain thread, or a G inside a
 * syscall bracket (no P), keeps them on its stack or in malloc'd memory
 * (gmp__sudogs_get).
 *
 * The waker's rule: unlink the record under the queue's lock, write what
 * the waiter will read (element, success, wctx->param), release the lock,
 * then gmp__wctx_ready(w). After the ready the waiter may run and its
 * stack may go: the waker touches neither w nor the record again.
 */
#ifndef GMP_PARK_H
#define GMP_PARK_H

#include "runtime.h"

/* Why a G waits (g->waitreason), named in the deadlock report. */
enum waitreason {
    WAIT_NONE,
    WAIT_CHAN_RECV, WAIT_CHAN_SEND, WAIT_SELECT, WAIT_SELECT_NO_CASES,
    WAIT_MUTEX, WAIT_RWMUTEX_R, WAIT_RWMUTEX_W, WAIT_COND, WAIT_WG,
    WAIT_SLEEP, WAIT_IO,
    WAIT_NREASONS,
};

GMP_HIDDEN extern const char *const gmp__waitreason_names[WAIT_NREASONS];

struct gmp__wctx {
    struct g         *gp;           /* NULL: a plain thread */
    struct gmp__note  note;         /* the thread sleeps here */
    /* select, timed waits, fd waits: 0 while the waiter may be woken by
     * any of several parties; the first to CAS it to 1 (gmp__wctx_claim)
     * owns the wake-up, the others leave the waiter alone. See select.c,
     * netpoll.c. */
    _Atomic uint32_t  claimed;
    struct sudog     *param;        /* the record that fired (select) */
};

struct sudog {
    struct sudog     *next, *prev;  /* the queue it is on */
    struct gmp__wctx *w;
    void             *elem;         /* element to send, or to receive into */
    struct gmp_chan  *c;            /* select: its channel */
    struct sudog     *waitlink;     /* select: the waiter's next record;
                                       sema: next waiter on the address;
                                       free lists */
    struct sudog     *waittail;     /* sema: last waiter on the address */
    const void       *addr;         /* sema: the key */
    uint32_t          ticket;       /* sema: handed the token; cond: turn */
    bool              isselect;
    bool              success;      /* chan: woken by a value, not a close */
};

/* Go's gopark (park.c): the calling G waits (reason: enum waitreason)
 * until gmp__goready; unlockf(gp, lock), if not NULL, runs on g0 once the
 * G is off its stack, and false from it calls the wait off (the G runs
 * again at once). Context: a G whose M holds a P. */
GMP_HIDDEN void gmp__gopark(bool (*unlockf)(struct g *, void *), void *lock,
                            uint32_t reason);

/* Makes a waiting G runnable (park.c says where it goes). Context: any. */
GMP_HIDDEN void gmp__goready(struct g *gp);

/* Fills in w for the calling G or thread. Context: any. */
static inline void gmp__wctx_init(struct gmp__wctx *w)
{
    struct m *mp = gmp__getm();
    /* A G inside a syscall bracket has no P: it waits as a thread. */
    w->gp = mp && mp->curg && mp->p ? mp->curg : NULL;
    gmp__noteclear(&w->note);
    /* Relaxed: nobody sees w before it is queued under a lock. */
    atomic_store_explicit(&w->claimed, 0, memory_order_relaxed);
    w->param = NULL;
}

/* Claims the wake-up of w's waiter against every other party that may
 * wake it (wakers, its deadline's timer): true for exactly one caller,
 * which alone then wakes it; the others leave it alone. Acq_rel: the
 * winner's writes to the waiter's record (why it woke) and what the
 * losers wrote before their CAS are ordered with the wake-up; pairs with
 * the other claimants' CAS on the same flag. (A channel waker of a select
 * claims with a relaxed CAS instead: gmp__waitq_dequeue says why.)
 * Context: any. */
static inline bool gmp__wctx_claim(struct gmp__wctx *w)
{
    uint32_t zero = 0;
    return atomic_compare_exchange_strong_explicit(
        &w->claimed, &zero, 1, memory_order_acq_rel, memory_order_relaxed);
}

/* Blocks the caller of w until gmp__wctx_ready(w): a G parks, with
 * unlockf(lock) run on g0 once it is off its stack; a thread runs
 * unlockf(lock) and sleeps on the note. unlockf must not fail.
 * Context: the G or thread w was made for, holding what unlockf releases. */
GMP_HIDDEN void gmp__wctx_block(struct gmp__wctx *w,
                                bool (*unlockf)(struct g *, void *),
                                void *lock, uint32_t reason);

/* gmp__wctx_block with a deadline (absolute gmp_nanotime; 0: none).
 * Wakers of a waiter with a deadline must win gmp__wctx_claim(w)
 * before they wake it, as select's do. Returns true when woken, false
 * when the deadline won (the waiter is then still on its queue: the
 * caller unlinks it). unlockf must not fail. Context: as
 * gmp__wctx_block. Defined in timer.c. */
GMP_HIDDEN bool gmp__wctx_block_until(struct gmp__wctx *w,
                                      bool (*unlockf)(struct g *, void *),
                                      void *lock, uint32_t reason,
                                      int64_t deadline);

/* Wakes the waiter of w. Context: any, no queue lock held. */
GMP_HIDDEN void gmp__wctx_ready(struct gmp__wctx *w);

/* One record from the calling G's P cache, NOT zeroed: the caller sets
 * every field its queue uses. NULL for a thread or a G without a P (it
 * uses a record on its stack), or out of memory.
 * gmp__sudog_release returns it to the cache of the P the G holds then.
 * Context: any. */
GMP_HIDDEN struct sudog *gmp__sudog_acquire(void);
GMP_HIDDEN void gmp__sudog_release(struct sudog *sg);

/* n records chained by waitlink (select): from the P cache for a G, else
 * in stackbuf (nstack records) or one malloc'd array. False only when
 * malloc fails. Context: any. */
struct sudogs {
    struct sudog *first;
    bool          cached;           /* from the P cache */
    void         *heap;             /* gmp__alloc'd array, or NULL */
    size_t        heapsize;         /* its size in bytes */
};
GMP_HIDDEN bool gmp__sudogs_get(struct sudogs *set, size_t n,
                                struct sudog *stackbuf, size_t nstack);
GMP_HIDDEN void gmp__sudogs_put(struct sudogs *set);
/* The records' memory, when the runtime stops. Context: lifecycle. */
GMP_HIDDEN void gmp__sudog_release_all(struct schedt *s);

/* Go's goyield: the caller goes to its P's local queue (not the global
 * one) and whatever is in runnext runs. Context: any G. */
GMP_HIDDEN void gmp__goyield(void);

#endif /* GMP_PARK_H */
