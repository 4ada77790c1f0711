/*
 * sync.h - the runtime half of the sync primitives: the semaphore table
 * (sema.c, Go's sema.go) that gmp_mutex_t, gmp_rwmutex_t, gmp_wg_t and
 * gmp_cond_t sleep on, and the mutex unlock cond.c needs (mutex.c).
 */
#ifndef GMP_SYNC_H
#define GMP_SYNC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gmprt.h"
#include "base.h"

/* The semaphore table (sema.c): Go's semacquire / semrelease on a 32-bit
 * count at addr. lifo queues the waiter at the front (it waited before).
 * handoff gives the token straight to the woken waiter; semrelease then
 * returns true, and the caller should yield to it (gmp__goyield) unless
 * it holds a runtime lock. Context: any G or thread; no locks held
 * (semrelease: none that its waiters need). */
GMP_HIDDEN void gmp__semacquire(_Atomic uint32_t *addr, bool lifo,
                                uint32_t reason);
GMP_HIDDEN bool gmp__semrelease(_Atomic uint32_t *addr, bool handoff);

/* gmp_mutex_unlock that never yields the caller's P (a starving mutex's
 * handoff readies the next owner without switching to it): for cond.c,
 * which unlocks the caller's mutex while holding its own list lock.
 * Context: any G or thread. */
GMP_HIDDEN void gmp__mutex_unlock_noyield(gmp_mutex_t *mu);

#endif /* GMP_SYNC_H */
