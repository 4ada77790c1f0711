/*
 * syscall.c - the system-call bracket (Go's entersyscall/exitsyscall) and
 * its cooperative preemption point.
 *
 * gmp_syscall_enter gives up the P without handing it to anyone: the P
 * goes to P_SYSCALL with no M, its run queue untouched. If the call is
 * short, gmp_syscall_exit takes the same P back with one CAS and nothing
 * else happened. If it blocks, sysmon (sysmon.c) wins the CAS instead and
 * hands the P to another M, so the other goroutines keep running. On the
 * way out the G then takes an idle P if there is one, else it goes to the
 * global queue and its M parks (the g0 side, exitsyscall0 in sched.c).
 *
 * Between enter and exit the goroutine's thread counts as a plain thread:
 * gmp_go from it queues globally, gmp_yield yields the thread, a wait
 * group wait sleeps the thread. Brackets do not nest: an enter inside a
 * bracket and an exit outside one do nothing.
 */
#include <errno.h>

#include "runtime.h"
#include "exectrace.h"
#include "metrics.h"

/* errno lives in thread-local storage, and a G may leave gmp_syscall_exit
 * on another thread than it entered: the value is carried across, and
 * written back through a call the compiler cannot merge with the read
 * (glibc and musl both declare __errno_location const, so a location
 * computed before the switch could be reused after it). */
__attribute__((noinline)) void gmp__errno_put(int e)
{
    errno = e;
}

void gmp_syscall_enter(void)
{
    struct m *mp = gmp__tls_m;
    if (!mp || !mp->curg || !mp->p)
        return;                     /* a plain thread, or already inside */
    struct p *pp = mp->p;
    gmp__trace_syscall(pp);
    mp->syscall_t0 = gmp__metrics_now();
    /* Relaxed: a statistic (trace.c). */
    gmp__owner_inc(&pp->nsyscall, memory_order_relaxed);
    /* Relaxed: informational. */
    atomic_store_explicit(&mp->curg->status, G_SYSCALL, memory_order_relaxed);
    mp->oldp = pp;
    mp->p = NULL;
    pp->m = NULL;
    /* Release: whoever takes the P over by CAS (sysmon, or another M
     * leaving its own syscall) sees everything this M did as its owner. */
    atomic_store_explicit(&pp->status, P_SYSCALL, memory_order_release);
}

/* Everything but the fast path: no P to take back, or a preemption due.
 * Either may switch threads or sleep in a lock, so errno is carried. Kept
 * out of line: after a system call every code page and data page touched
 * costs a TLB miss on machines that flush it at each kernel entry, and the
 * fast path touches only its own code, the M, the G and the P.
 * Context: the G that left a bracket; mp holds pp when have_p. */
static __attribute__((noinline)) void exit_slow(struct m *mp, struct g *gp,
                                                bool have_p, int64_t dt)
{
    int saved_errno = errno;
    if (!have_p) {
        if (!gmp__exitsyscall_pidle(mp->sched, mp)) {
            /* No P: g0 queues gp and parks this M; gp resumes on whichever
             * M takes it, with a P. */
            gmp__mcall(mp, gp, SW_SYSCALL);
            gmp__metrics_syscall(gmp__getm()->p, dt);
            gmp__errno_put(saved_errno);
            return;
        }
        gmp__metrics_syscall(mp->p, dt);
        /* Relaxed: informational. */
        atomic_store_explicit(&gp->status, G_RUNNING, memory_order_relaxed);
        gmp__trace_sysexit(mp->p, gp);
        gmp__trace_gostart(mp->p, gp);
    }
    gmp__preempt_point(mp);
    gmp__errno_put(saved_errno);
}

void gmp_syscall_exit(void)
{
    struct m *mp = gmp__tls_m;
    if (!mp || !mp->oldp)
        return;                     /* not inside a bracket */
    struct g *gp = mp->curg;
    struct p *pp = mp->oldp;
    mp->oldp = NULL;
    int64_t dt = 0;                 /* the call's time, when timed */
    if (GMP_UNLIKELY(mp->syscall_t0)) {
        dt = gmp__nanotime() - mp->syscall_t0;
        mp->syscall_t0 = 0;
    }
    int st = P_SYSCALL;
    /* Fast path: our P is still free. Acquire: pairs with the release
     * that put it in P_SYSCALL (ours, or that of another M that took it
     * meanwhile and is now in a syscall itself). */
    if (GMP_LIKELY(atomic_compare_exchange_strong_explicit(
            &pp->status, &st, P_RUNNING, memory_order_acquire,
            memory_order_relaxed))) {
        mp->p = pp;
        pp->m = mp;
        /* Relaxed: where sysmon's signals go (see struct p). */
        atomic_store_explicit(&pp->tid, mp->tid, memory_order_relaxed);
        /* Relaxed: tells sysmon a syscall ended here. */
        gmp__owner_inc(&pp->syscalltick, memory_order_relaxed);
        /* Relaxed: informational. */
        atomic_store_explicit(&gp->status, G_RUNNING, memory_order_relaxed);
        if (GMP_UNLIKELY(dt))
            gmp__metrics_syscall(pp, dt);
        /* Relaxed: sysmon's mark is a request. */
        if (GMP_UNLIKELY(atomic_load_explicit(&pp->preempt,
                                              memory_order_relaxed)))
            exit_slow(mp, gp, true, 0);
        return;
    }
    exit_slow(mp, gp, false, dt);
}
