/*
 * deadlock.c - Go's checkdead: when no goroutine can ever run again, say
 * so and abort, instead of hanging for ever.
 *
 * When: the last M goes idle (stopm, under sched.lock). Then nothing
 * runs: no G is running, none is in a system call (its M would not be
 * idle), no M is starting or spinning. If moreover no G is queued, every
 * live G is waiting, and only something outside the runtime's threads
 * could wake one.
 *
 * What could still wake one, and how it is ruled out:
 *   - A thread that is not the runtime's (it may send on a channel,
 *     unlock a mutex, call gmp_go at any time, or is itself blocked on a
 *     runtime object and may be woken from outside). The runtime cannot
 *     know what such a thread will do, so any thread in the process
 *     beyond the Ms, sysmon and gmp_main's caller means "maybe not dead".
 *     Counted from /proc/self/stat at this moment; while the count is
 *     off, idle sysmon repeats the check every 100 ms (a thread may
 *     leave without touching the runtime). Sanitizer runtimes (TSan)
 *     keep threads of their own: no report there.
 *   - Under gmp_init the host thread keeps running and may act: no
 *     detection at all, as Go's c-archive / c-shared builds.
 *   - A pending timer (a sleeper, a select or wait with a timeout) or a
 *     waiter on an fd: the timer will fire, the fd may become ready.
 *     An M blocked in the poller is not idle anyway, so the check does
 *     not even run while either exists. A G that a poll (sysmon's too)
 *     has woken still counts as a waiter until it is queued, and when
 *     the last waiter goes, an M blocked in the poller for it alone is
 *     woken (netpoll.c).
 * So a report is never false: every thread that could act is asleep in
 * the runtime, and nothing is queued.
 */
#include <fcntl.h>
#include <unistd.h>

#include "runtime.h"
#include "exectrace.h"
#include "park.h"
#include "netpoll.h"
#include "timer.h"
#include "trace.h"

/* Threads in the process, from /proc/self/stat (field 20), or -1. A
 * thread that pthread_join has reaped may still be counted for a moment:
 * an undecided check is repeated by sysmon (sysmon.c). */
static long process_threads(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = GMP_LIBC(read)(fd, buf, sizeof buf - 1);
    GMP_LIBC(close)(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* Field 2, the command, is in parentheses and may hold anything:
     * count from the last ')'. Field 3 follows it. */
    char *p = NULL;
    for (char *q = buf; *q; q++)
        if (*q == ')')
            p = q;
    if (!p)
        return -1;
    p++;
    for (int field = 3; field < 20; field++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    while (*p == ' ')
        p++;
    long v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (*p - '0');
    return v > 0 ? v : -1;
}

/* The report: every goroutine with its wait reason, backtrace and start
 * function (trace.c). Context: sched.lock held, every M asleep. */
static _Noreturn void report(struct schedt *s)
{
    gmp__fatal_begin("all goroutines are asleep - deadlock!\n");
    gmp__dump_fatal(s);
    gmp__flightrec_report(true, true);
    gmp__fatal_end();
}

void gmp__checkdead(struct schedt *s)
{
    if (s->nmidle + s->nmidlelocked != s->mcount)
        return;                     /* an M runs: it may wake the rest */
    /* Relaxed: under the lock that writes it. Stopped by the host, whose
     * gmp_start_world will wake them. */
    if (atomic_load_explicit(&s->stopping, memory_order_relaxed))
        return;
    /* Relaxed, all: under sched.lock, with every M asleep. */
    s->deadcheck_retry = false;
    if (!s->main_mode || gmp__exiting(s))
        return;
    /* gmp_main has not made its main goroutine yet (a trace started
     * with the runtime stops and idles every M first), or it is on its
     * way into a queue, which takes this lock. */
    struct g *mg = atomic_load_explicit(&s->maing, memory_order_relaxed);
    if (!mg || atomic_load_explicit(&mg->status, memory_order_relaxed) ==
                   G_RUNNABLE)
        return;
    if (atomic_load_explicit(&s->runqsize, memory_order_relaxed) != 0)
        return;
    for (int i = 0; i < gmp__procs(s); i++)
        if (!gmp__runqempty(&s->allp[i]))
            return;
    /* A pending timer will ready its sleeper; a waiter on an fd can be
     * woken by the world outside. (With either, an M would be blocked
     * in the poller rather than idle; this is the belt to those braces.) */
    if (gmp__timers_next(s) != 0 || gmp__netpoll_waiting(s))
        return;
    /* The tracer's writer thread (exectrace.c) is the runtime's too.
     * Relaxed: a stale flag only leaves the check undecided a round. */
    long known = s->mcount + 1 + (s->sysmon_ticks ? 1 : 0) +
                 (atomic_load_explicit(&gmp__tracing, memory_order_relaxed)
                      ? 1 : 0);
    /* Undecided while another thread lives; it may exit without ever
     * touching the runtime, so sysmon asks again now and then. */
    s->deadcheck_retry = process_threads() != known;
    if (!s->deadcheck_retry)
        report(s);
}
