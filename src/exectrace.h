/*
 * exectrace.h - the execution tracer's hooks (exectrace.c has the essay).
 * Each hook is an inline that tests one flag and, only when tracing is on,
 * calls out of line: with tracing off a hook costs one relaxed load of a
 * read-mostly line and a branch predicted not taken.
 * Invariants:
 *   - A hook given a P is called by that P's owner, or by whoever owns the
 *     P by winning the CAS out of P_SYSCALL; a hook given NULL writes to
 *     the shared buffer under its lock (threads without a P).
 *   - An event that makes a G visible to others (unblock, create, stop,
 *     block) is recorded before the G is published, and an event of the G
 *     that takes it (start, syscall exit) after: each event's timestamp
 *     then follows the events it depends on, which Go's parser checks.
 */
#ifndef GMP_EXECTRACE_H
#define GMP_EXECTRACE_H

#include "runtime.h"

/* Go 1.19's event types (runtime/trace.go's numbering), those we write. */
enum {
    TEV_BATCH = 1, TEV_FREQUENCY = 2, TEV_STACK = 3, TEV_GOMAXPROCS = 4,
    TEV_PROCSTART = 5, TEV_PROCSTOP = 6, TEV_GOCREATE = 13,
    TEV_GOEND = 15, TEV_GOSCHED = 17, TEV_GOPREEMPT = 18, TEV_GOSLEEP = 19,
    TEV_GOBLOCK = 20, TEV_GOBLOCKSEND = 22, TEV_GOBLOCKRECV = 23,
    TEV_GOBLOCKSELECT = 24, TEV_GOBLOCKSYNC = 25, TEV_GOBLOCKCOND = 26,
    TEV_GOBLOCKNET = 27, TEV_GOSYSCALL = 28, TEV_GOSYSBLOCK = 30,
    TEV_GOWAITING = 31, TEV_GOINSYSCALL = 32, TEV_GOSTARTLOCAL = 38,
    TEV_GOUNBLOCKLOCAL = 39, TEV_GOSYSEXITLOCAL = 40, TEV_STRING = 37,
};

/* Nonzero while a trace records. Written under the tracer's locks with
 * the world stopped; read (relaxed) by every hook: the Ps that run after
 * a start or stop learn of it through gmp_start_world's hand-over, and
 * threads without a P re-read it under the shared buffer's lock. Alone
 * on its line, which only a start or stop writes. */
GMP_HIDDEN extern _Atomic int gmp__tracing;

/* Records event ev of pp's running goroutine (or of the thread, pp NULL)
 * at ts (0: now) with args a and b (the event's own count of them). */
GMP_HIDDEN void gmp__trace_ev(struct p *pp, int ev, int64_t ts, uint64_t a,
                              uint64_t b);
/* gp parks with reason (park.h): the matching GoBlock kind. */
GMP_HIDDEN void gmp__trace_block(struct p *pp, uint32_t reason);
/* A P taken from its M's system call (sysmon, the world's stopper): the
 * G's GoSysBlock and the P's ProcStop at t0, read before the CAS. */
GMP_HIDDEN void gmp__trace_sysblock(struct p *pp, int64_t t0);
/* The Gs of a list chained by schedlink, readied by the poller. */
GMP_HIDDEN void gmp__trace_unblock_list(struct p *pp, struct g *head);
/* Frees what a trace left when the runtime stops (lifecycle.c);
 * gmp__trace_env starts GMP_TRACE's trace at runtime start. */
GMP_HIDDEN void gmp__trace_free(struct schedt *s);
GMP_HIDDEN void gmp__trace_env(struct schedt *s);
/* The flight recorder's window into GMP_FLIGHTREC's file, for a report,
 * if one records: quiet, no goroutine runs (the deadlock report); dying,
 * the process ends after it. Context: sysmon, or a fatal report. */
GMP_HIDDEN void gmp__flightrec_report(bool quiet, bool dying);

/* Built with -DGMP_EXECTRACE=OFF (CMake; GMP_NO_EXECTRACE here), every
 * hook compiles to nothing and no trace starts: the build that bench/'s
 * trace-off comparison measures the hooks' cost against. */
static inline bool gmp__trace_on(void)
{
#ifdef GMP_NO_EXECTRACE
    return false;
#else
    /* Relaxed: see gmp__tracing. */
    return GMP_UNLIKELY(atomic_load_explicit(&gmp__tracing,
                                             memory_order_relaxed));
#endif
}

#define GMP_TRACE_EV(pp, ev, a, b)                                         \
    do {                                                                   \
        if (gmp__trace_on())                                               \
            gmp__trace_ev((pp), (ev), 0, (a), (b));                        \
    } while (0)

/* The hooks, one line at each call site. */
/* gp's GoCreate, its start function as its stack (exectrace.c). */
GMP_HIDDEN void gmp__trace_create(struct p *pp, struct g *gp);
static inline void gmp__trace_gocreate(struct p *pp, struct g *gp)
{
    if (gmp__trace_on())
        gmp__trace_create(pp, gp);
}
static inline void gmp__trace_gostart(struct p *pp, struct g *gp)
{
    GMP_TRACE_EV(pp, TEV_GOSTARTLOCAL, gp->goid, 0);
}
static inline void gmp__trace_gostop(struct p *pp, int ev)
{
    GMP_TRACE_EV(pp, ev, 0, 0);
}
static inline void gmp__trace_goblock(struct p *pp, uint32_t reason)
{
    if (gmp__trace_on())
        gmp__trace_block(pp, reason);
}
static inline void gmp__trace_gounblock(struct p *pp, struct g *gp)
{
    GMP_TRACE_EV(pp, TEV_GOUNBLOCKLOCAL, gp->goid, 0);
}
static inline void gmp__trace_syscall(struct p *pp)
{
    GMP_TRACE_EV(pp, TEV_GOSYSCALL, 0, 0);
}
/* A G back from a system call whose P was taken. Go 1.19's parser
 * takes a GoSysExit's goroutine from its sequence number (the Local kind
 * names none it reads), which a G has no room for: it is a GoUnblock. */
static inline void gmp__trace_sysexit(struct p *pp, struct g *gp)
{
    GMP_TRACE_EV(pp, TEV_GOUNBLOCKLOCAL, gp->goid, 0);
}
static inline void gmp__trace_procstart(struct p *pp, struct m *mp)
{
    GMP_TRACE_EV(pp, TEV_PROCSTART, (uint64_t)mp->tid, 0);
}
static inline void gmp__trace_procstop(struct p *pp)
{
    GMP_TRACE_EV(pp, TEV_PROCSTOP, 0, 0);
}
/* The clock for gmp__trace_sysblock, 0 while tracing is off. */
static inline int64_t gmp__trace_now(void)
{
    return gmp__trace_on() ? gmp__nanotime() : 0;
}
static inline void gmp__trace_retaken(struct p *pp, int64_t t0)
{
    if (gmp__trace_on())
        gmp__trace_sysblock(pp, t0);
}
static inline void gmp__trace_injected(struct p *pp, struct g *head)
{
    if (gmp__trace_on())
        gmp__trace_unblock_list(pp, head);
}

#endif /* GMP_EXECTRACE_H */
