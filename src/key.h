/*
 * key.h - goroutine keys and threads locked to goroutines (key.c).
 */
#ifndef GMP_KEY_H
#define GMP_KEY_H

#include "runtime.h"

/* Goroutine-local values and thread locking hang off struct g's ext. */
struct gmp__gext;
/* At the end of gp's fn, on gp: runs its key destructors, unlocks it from
 * its thread, frees ext. Context: gp, just returned from fn (may switch). */
GMP_HIDDEN void gmp__gext_exit(struct g *gp);
/* The M gp is locked to (gp->locked is nonzero). Context: g0, gp queued. */
GMP_HIDDEN struct m *gmp__lockedm(struct g *gp);
/* Frees the ext of every G left (goroutines gmp_main abandoned).
 * Context: runtime teardown, no runtime thread left. */
GMP_HIDDEN void gmp__gext_release_all(struct schedt *s);

#endif /* GMP_KEY_H */
