/*
 * park.h - waiter records (Go's sudog, reduced): a G or a plain thread
 * queued on some wait list. The record lives on the waiter's own stack and
 * is valid until it is woken.
 */
#ifndef GMP_PARK_H
#define GMP_PARK_H

#include "runtime.h"

enum waitreason {
    WAIT_NONE, WAIT_WG,
};

struct gmp__waiter {
    struct gmp__waiter *next;
    struct g           *gp;         /* NULL for a plain thread */
    struct gmp__note    note;       /* a plain thread sleeps here */
};

/* Queues nothing itself: the caller has linked w into its list under
 * lock; this releases lock and blocks until gmp__waiter_wake(w).
 * Context: any G (parks) or a foreign thread (sleeps). */
GMP_HIDDEN void gmp__waiter_block(struct gmp__waiter *w,
                                  struct gmp__mutex *lock, uint32_t reason);

/* Wakes a waiter the caller has unlinked. Context: any. */
GMP_HIDDEN void gmp__waiter_wake(struct gmp__waiter *w);

#endif /* GMP_PARK_H */
