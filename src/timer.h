/*
 * timer.h - per-P timer heaps (Go 1.14+'s design, time.go).
 *
 * A timer is a struct gmp__timer owned by whoever waits on it, usually on
 * the waiter's stack: the heaps hold pointers and never allocate per
 * timer. Each P has a 4-ary min-heap ordered by `when` (absolute
 * gmp_nanotime), under its own lock, and publishes the earliest `when`
 * in timer0when (0: empty) so that anyone can see without the lock
 * whether a heap has anything due.
 *
 * Who runs timers: an M holding a P, in schedule() and findrunnable()
 * (its own P's heap), and a spinning M in its last stealing round (any
 * victim's heap). The callback runs there, on g0 (or, after a direct
 * park, on the next G's stack), with the heap's lock held: it must not
 * block or take a timer lock; it may ready a G (goready takes sched.lock,
 * which comes after every timer lock in lock order).
 *
 * Deleting: gmp__timer_del takes the heap's lock, so once it returns the
 * callback is neither running nor going to: the owner may then let the
 * timer's memory go. A callback that woke its owner must be the last
 * thing to touch the timer.
 */
#ifndef GMP_TIMER_H
#define GMP_TIMER_H

#include <time.h>

#include "runtime.h"

struct gmp__timer {
    int64_t   when;                 /* absolute, gmp__nanotime() */
    void    (*f)(struct gmp__timer *t);
    void     *arg, *arg2;           /* the callback's */
    struct p *pp;                   /* heap it is in: set by the add,
                                       moved with a resize (timer.c) */
    int32_t   idx;                  /* heap slot; -1 when in no heap (pp's
                                       timer lock) */
};

/* A heap slot: the timer and a copy of its when, which never changes
 * while it is in the heap. */
struct gmp__tslot {
    int64_t   when;
    uintptr_t t;                    /* struct gmp__timer *, or a sleeping
                                       struct g * | 1 (timer.c) */
};

/*
 * The coarse clock, CLOCK_MONOTONIC_COARSE: the monotonic clock as of the
 * last tick, a plain read of the vDSO's data (6 ns on x86-64 under KVM,
 * where gmp__nanotime() reads the TSC in 28). It never runs ahead of
 * gmp__nanotime() and lags it by a tick, its resolution, or more
 * (gmp__timer_surely_before). gmp__coarse_res holds that resolution in
 * ns, or 0 where the system has no usable coarse clock (a resolution of
 * a second or worse). Relaxed everywhere: a constant of the system,
 * written before any M of a runtime starts (gmp__timers_setup), with the
 * same value each time.
 * Not sched.coarse_ns, the stamp sysmon refreshes for parked Gs' wait
 * times: sysmon sleeps up to 10 ms between rounds and not at all while
 * every P is idle, so that stamp has no bound on its lag to decide a
 * deadline by.
 */
extern _Atomic int64_t gmp__coarse_res GMP_HIDDEN;

/* CLOCK_MONOTONIC_COARSE in ns, where gmp__coarse_res says it is usable. */
static inline int64_t gmp__coarse_read(void)
{
    struct timespec ts;
    /* Relaxed: as in gmp__nanotime. */
    atomic_load_explicit(&gmp__clock_gettime, memory_order_relaxed)(
        CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The coarse clock in ns; gmp__nanotime() where there is none. */
static inline int64_t gmp__coarse_nanotime(void)
{
    if (atomic_load_explicit(&gmp__coarse_res, memory_order_relaxed) == 0)
        return gmp__nanotime();
    return gmp__coarse_read();
}

/*
 * Whether a timer at `when` is surely not due yet, by the coarse clock.
 * Every scheduling point on a P with a pending timer asks whether it is
 * due, and a precise read each time cost the pool bench with empty tasks
 * half its time at procs=1 (two reads a task). While coarse + the margin
 * is still before `when`, it is not; only within the margin of it does
 * the caller read the precise clock. The margin must exceed the coarse
 * clock's lag, which is not one tick everywhere: on a 2-CPU KVM VM
 * (HZ=250) it ran from 0 to 8.17 ms over 54 million samples in 2 s, so
 * a margin of two ticks judged a due timer not due whenever the lag
 * passed 8 ms: a sleeper beside an interpreter's count hook then waited
 * out up to 150 us of polls that said "not due"
 * (tests/real/test_lua_module.c). So the margin starts at three ticks
 * and sysmon raises it past every lag it samples, plus a tick
 * (gmp__coarse_observe), up to GMP_COARSE_MARGIN_MAX_NS: a longer lag is
 * a host that stopped the VM, and makes a timer late by that stop, as it
 * does every thread. gmp__coarse_margin is 0 without a coarse clock: the
 * answer is then always false. Relaxed: a reader with an older, smaller
 * margin is as late as that margin allowed, and no later.
 */
extern _Atomic int64_t gmp__coarse_margin GMP_HIDDEN;
#define GMP_COARSE_MARGIN_MAX_NS (64 * 1000000LL)

static inline bool gmp__timer_surely_before(int64_t when)
{
    int64_t m = atomic_load_explicit(&gmp__coarse_margin,
                                     memory_order_relaxed);
    return m != 0 && gmp__coarse_read() < when - m;
}

/* Whether the first timer of pp is due: a relaxed hint (timer.c's
 * timer0when), the precise clock read only when the coarse one cannot
 * tell. What schedule() would run first; asked where a G would rather
 * not go through it (the direct park and yield, gmp_should_yield). */
static inline bool gmp__timer_due(struct p *pp)
{
    /* Relaxed: see timer.c. */
    int64_t tw = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
    return tw != 0 && !gmp__timer_surely_before(tw) && tw <= gmp__nanotime();
}

/* Sets gmp__coarse_res, and gmp__coarse_margin unless an earlier runtime
 * of this process raised it. Context: starting a runtime. */
GMP_HIDDEN void gmp__timers_setup(void);
/* Raises gmp__coarse_margin past the coarse clock's lag behind now, a
 * precise reading just taken. Context: sysmon, each round. */
GMP_HIDDEN void gmp__coarse_observe(int64_t now);
/* Makes room for one more timer in pp's heap, so that the next
 * gmp__timer_add on pp cannot fail. Out of memory is a fatal error, as
 * in Go: a timed wait without its timer would wait for ever, and every
 * caller has promised its caller a deadline. Context: the owner of pp. */
GMP_HIDDEN void gmp__timer_reserve(struct p *pp);
/* Adds t (when, f, args set) to pp's heap. Returns whether t is now pp's
 * earliest timer: the caller then calls gmp__netpoll_wake_for(when), once
 * it holds no lock (t may be gone by then: pass its when). Call
 * gmp__timer_reserve first. Context: the owner of pp (a G or g0). */
GMP_HIDDEN bool gmp__timer_add(struct p *pp, struct gmp__timer *t);
/* Removes t unless it has run (or is running: then waits for it). True
 * when it removed it before it ran. Context: any, no timer lock held. */
GMP_HIDDEN bool gmp__timer_del(struct gmp__timer *t);
/* Moves every timer of from's heap to to's (a P taken out of use).
 * Context: the world stopped; any timer lock free. */
GMP_HIDDEN void gmp__timers_move(struct p *from, struct p *to);
/* Runs pp's due timers. *now: 0, or a clock reading to reuse (updated
 * when read here). Returns how many ran. Context: an M holding a P. */
GMP_HIDDEN int gmp__checktimers(struct p *pp, int64_t *now);
/* The earliest when over every P, 0 if no timer is pending. Relaxed:
 * a snapshot. Context: any. */
GMP_HIDDEN int64_t gmp__timers_next(struct schedt *s);
/* Frees pp's heap array. Context: runtime teardown. */
GMP_HIDDEN void gmp__timers_free(struct p *pp);

#endif /* GMP_TIMER_H */
