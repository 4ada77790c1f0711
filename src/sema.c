/*
 * sema.c - Go's semaphore table (sema.go): sleep until a 32-bit count at
 * some address is positive, then take one. Under the mutex, the rwmutex
 * and the wait group.
 *
 * The count lives in the caller's object; the waiters live here, in a
 * fixed table of SEMTABSZ roots hashed by address. Each root has a lock,
 * a count of waiters (nwait), and a list of heads, one per address that
 * has waiters; a head chains the other waiters on its address through
 * waitlink, the last of them in waittail (Go uses a treap of heads; a
 * list is enough while few distinct addresses share a root).
 *
 * The table is the runtime's one process-wide mutable structure, on
 * purpose: sync objects work without a running runtime (plain threads
 * sharing a gmp_mutex_t) and across runtime restarts. It owns no memory
 * and is empty whenever nobody waits.
 *
 * No lost wake-up: an acquirer counts itself in nwait, then tries the
 * count again; a releaser adds to the count, then reads nwait. All four
 * are seq_cst, so in their single total order either the acquirer's retry
 * sees the release, or the releaser sees the waiter and takes the lock to
 * wake it (the classic two-flag handshake; acquire/release would allow
 * both to miss each other). The uncontended release is one locked add and
 * one plain load.
 *
 * Handoff (the mutex's starvation mode): the releaser takes the token for
 * the woken waiter (ticket = 1) so nobody can barge in, and yields to it.
 */
#include "runtime.h"
#include "park.h"
#include "sync.h"

#define SEMTABSZ 251

struct semaroot {
    GMP_ALIGNED struct gmp__mutex lock;
    _Atomic uint32_t nwait;         /* waiters on this root; see above */
    struct sudog *heads;            /* one per address (lock) */
};

static struct semaroot semtable[SEMTABSZ];

static struct semaroot *semroot(const void *addr)
{
    return &semtable[((uintptr_t)addr >> 3) % SEMTABSZ];
}

/* Takes one from *addr if it is positive. */
static bool cansemacquire(_Atomic uint32_t *addr)
{
    /* Seq_cst, load and CAS: the acquirer's half of the handshake above;
     * the successful CAS also acquires what the releaser published. */
    uint32_t v = atomic_load(addr);
    while (v != 0)
        if (atomic_compare_exchange_weak(addr, &v, v - 1))
            return true;
    return false;
}

/* Adds s to the waiters on addr: at the front when lifo. Context: holds
 * root->lock. */
static void queue(struct semaroot *root, const void *addr, struct sudog *s,
                  bool lifo)
{
    s->addr = addr;
    s->next = NULL;
    s->waitlink = NULL;
    s->waittail = NULL;
    for (struct sudog **pt = &root->heads, *t; (t = *pt); pt = &t->next) {
        if (t->addr != addr)
            continue;
        if (lifo) {                 /* s becomes the head */
            s->next = t->next;
            s->waitlink = t;
            s->waittail = t->waittail ? t->waittail : t;
            t->next = NULL;
            t->waittail = NULL;
            *pt = s;
        } else {
            if (t->waittail)
                t->waittail->waitlink = s;
            else
                t->waitlink = s;
            t->waittail = s;
        }
        return;
    }
    s->next = root->heads;
    root->heads = s;
}

/* Removes and returns the first waiter on addr, or NULL. Context: holds
 * root->lock. */
static struct sudog *dequeue(struct semaroot *root, const void *addr)
{
    for (struct sudog **pt = &root->heads, *s; (s = *pt); pt = &s->next) {
        if (s->addr != addr)
            continue;
        struct sudog *t = s->waitlink;
        if (t) {                    /* the next waiter becomes the head */
            t->next = s->next;
            t->waittail = s->waittail == t ? NULL : s->waittail;
            *pt = t;
        } else {
            *pt = s->next;
        }
        s->next = NULL;
        s->waitlink = NULL;
        s->waittail = NULL;
        return s;
    }
    return NULL;
}

static bool unlock_root(struct g *gp, void *lock)
{
    (void)gp;
    gmp__unlock(lock);
    return true;
}

void gmp__semacquire(_Atomic uint32_t *addr, bool lifo, uint32_t reason)
{
    if (cansemacquire(addr))
        return;
    struct semaroot *root = semroot(addr);
    struct sudog local, *s = gmp__sudog_acquire();
    if (!s)
        s = &local;
    struct gmp__wctx w;
    gmp__wctx_init(&w);
    s->w = &w;
    for (;;) {
        gmp__lock(&root->lock);
        /* Seq_cst: see the file comment. */
        atomic_fetch_add(&root->nwait, 1);
        if (cansemacquire(addr)) {
            /* Relaxed: under the lock every writer holds; the seq_cst
             * increment above already did its part of the handshake. */
            atomic_fetch_sub_explicit(&root->nwait, 1, memory_order_relaxed);
            gmp__unlock(&root->lock);
            break;
        }
        s->ticket = 0;
        queue(root, addr, s, lifo);
        gmp__wctx_block(&w, unlock_root, &root->lock, reason);
        if (s->ticket != 0 || cansemacquire(addr))
            break;
        gmp__noteclear(&w.note);    /* a thread sleeps again */
    }
    if (s != &local)
        gmp__sudog_release(s);
}

bool gmp__semrelease(_Atomic uint32_t *addr, bool handoff)
{
    struct semaroot *root = semroot(addr);
    /* Seq_cst, both: see the file comment. */
    atomic_fetch_add(addr, 1);
    if (atomic_load(&root->nwait) == 0)
        return false;
    gmp__lock(&root->lock);
    /* Relaxed: under the lock; a waiter counted itself under it. */
    if (atomic_load_explicit(&root->nwait, memory_order_relaxed) == 0) {
        gmp__unlock(&root->lock);
        return false;
    }
    struct sudog *s = dequeue(root, addr);
    if (s)
        /* Relaxed: under the lock, as above. */
        atomic_fetch_sub_explicit(&root->nwait, 1, memory_order_relaxed);
    gmp__unlock(&root->lock);
    if (!s)
        return false;
    /* The waiter is asleep until we ready it: its record is still ours. */
    bool handed = handoff && cansemacquire(addr);
    if (handed)
        s->ticket = 1;
    gmp__wctx_ready(s->w);
    return handed;
}
