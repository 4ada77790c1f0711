/*
 * metrics.h - the timed scheduling metrics behind gmp_metrics (trace.c):
 * how long each goroutine waited between becoming runnable and running
 * (a histogram per P), and the time spent inside system-call brackets.
 *
 * Both cost a clock read where none is read today, two per round trip
 * of a channel ping-pong, so they are recorded only when the runtime was
 * started with them (gmp_config_t.sched_metrics, GMP_DEBUG=schedmetrics=1);
 * off, each hook is one relaxed load of a read-mostly line and a branch
 * predicted not taken, as the tracer's (exectrace.h).
 * Invariants:
 *   - A G becoming runnable stores minus the time in its waitsince, which
 *     a park had set to the (positive) coarse time it parked at: the dump
 *     shows a wait time only for a waiting G, and the sign tells a start
 *     whether the G was stamped. The start that counts it stores 0, so a
 *     G made runnable by a path that does not stamp is not counted, never
 *     counted with a stale time.
 *   - The per-P sums are written by the P's owner only, relaxed, on lines
 *     of their own (struct p); gmp_metrics adds them up.
 */
#ifndef GMP_METRICS_H
#define GMP_METRICS_H

#include "runtime.h"

/* Nonzero while the running runtime records the timed metrics. Written
 * before the runtime's threads start and after they stopped; read
 * (relaxed) by every hook. Alone on its line. */
GMP_HIDDEN extern _Atomic int gmp__metrics_on;

/* The start of gp, stamped runnable, on pp: its wait into pp's
 * histogram. Context: owner of pp. */
GMP_HIDDEN void gmp__metrics_started(struct p *pp, struct g *gp);

static inline bool gmp__metrics_enabled(void)
{
    /* Relaxed: see gmp__metrics_on. */
    return GMP_UNLIKELY(atomic_load_explicit(&gmp__metrics_on,
                                             memory_order_relaxed));
}

/* gp becomes runnable now. Context: whoever makes it so. */
static inline void gmp__metrics_runnable(struct g *gp)
{
    if (gmp__metrics_enabled())
        /* Relaxed: as the park's store (park.c); the queue that
         * publishes gp orders it for the start that reads it. */
        __atomic_store_n(&gp->waitsince, -gmp__nanotime(), __ATOMIC_RELAXED);
}

/* gp starts running on pp. Context: owner of pp. */
static inline void gmp__metrics_start(struct p *pp, struct g *gp)
{
    if (gmp__metrics_enabled())
        gmp__metrics_started(pp, gp);
}

/* The clock at a system call's entry (0: not recorded). */
static inline int64_t gmp__metrics_now(void)
{
    return gmp__metrics_enabled() ? gmp__nanotime() : 0;
}

/* A system call of dt ns ended on a G that now holds pp. Context: owner
 * of pp. */
static inline void gmp__metrics_syscall(struct p *pp, int64_t dt)
{
    if (dt > 0)
        /* Relaxed: a statistic; see struct p. */
        gmp__owner_inc_by(&pp->syscall_ns, (uint64_t)dt);
}

#endif /* GMP_METRICS_H */
