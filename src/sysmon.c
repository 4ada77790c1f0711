/*
 * sysmon.c - the system monitor: one thread with no P (Go's sysmon).
 *
 * It sleeps 20 us, doubling after 50 idle rounds up to 10 ms, and on each
 * wake looks at every P (retake):
 *   - a P whose G has run 10 ms (its schedtick unchanged that long) is
 *     marked for preemption, and its thread signalled (preempt.c): the G
 *     yields at its next runtime call or at the signal, whichever is
 *     first; the signal is sent again every round while the mark stands;
 *   - a P in P_SYSCALL is retaken, once it has been seen in the same
 *     syscall for one round, when it has work or no M is spinning or idle
 *     to notice new work, and after 10 ms regardless, and handed to
 *     another M (gmp__handoffp); at once, without the round, when its G
 *     has used up its slice and another G waits.
 * With GMP_DEBUG=stall=N it also reports, once per slice, a G that has
 * run N ms without a scheduling point: stall_ask has the P's thread name
 * the G and take its backtrace in the preemption signal's handler
 * (preempt.c, stall_take), and a later round prints it (stall_collect).
 * It also polls the network when nobody has for 10 ms (every M busy
 * running goroutines), and hands what it finds to idle Ps. While every
 * P is busy it sleeps in the poller itself and preempts Ps for Gs that
 * timers and the poller ready (sysmon_sleep, hurry_all; docs/design.md,
 * "Wake-ups while every P is busy"). Once a second, when procs is the
 * default, it reads the cgroup's CPU limit again (cgroup.c), records
 * the default it gives in sched.procs_default, and resizes the Ps to it
 * (gmp__procresize).
 * When every P is idle it sleeps on its note until a P is taken again
 * (pidleget wakes it) or the runtime stops, and then goes on at the period
 * it had reached: that wake is not activity (docs/design.md).
 *
 * Its record of each P (sched.sysmon_ticks) is its own; what it reads of
 * the Ps is atomics (status, schedtick, syscalltick) read relaxed: a stale
 * value delays a decision by a round, and the CAS on status decides who
 * owns a P in a syscall.
 */
#include <stdlib.h>

#include "runtime.h"
#include "exectrace.h"
#include "netpoll.h"
#include "cgroup.h"
#include "timer.h"
#include "alloc.h"
#include "preempt.h"
#include "trace.h"

/* How often an idle sysmon repeats an undecided deadlock check. */
#define DEADCHECK_RETRY_NS 100000000

#define SYSMON_MIN_NS 20000         /* 20 us */
#define SYSMON_MAX_NS 10000000      /* 10 ms */
#define PREEMPT_NS    10000000      /* a G's time slice */
#define POLL_NS       10000000      /* poll if nobody has for this long */
#define COARSE_NS     1000000       /* the parks' clock's resolution */
#define PROCS_NS      1000000000    /* read the CPU limit again (Go's) */
#define WAIT_SLICE_NS 200000        /* least gap between two preemptions
                                       of a P for a woken G (hurry) */
#define POLL_TAKE_NS  1000000       /* take the poller if nobody has polled
                                       for this long and every P is busy */

/* What sysmon last saw of a P, and since when. */
struct sysmontick {
    uint32_t schedtick;
    uint32_t syscalltick;
    int64_t  schedwhen;
    int64_t  turnwhen;              /* the earliest the G now running can
                                       have started (hurry_all) */
    int64_t  syscallwhen;
    int64_t  hurrywhen;             /* when hurry() last preempted it */
    int64_t  stallwhen;             /* schedwhen, for GMP_DEBUG=stall */
    bool     stalled;               /* this slice was reported a stall */
};

#define STALL_WAIT_NS 100000000     /* for the handler's backtrace */

/* GMP_DEBUG=stall: asks pp's thread, through the preemption signal, for
 * the G that has run since sysmon saw schedtick tick, and its backtrace
 * (struct gmp__stall); reports at once, without them, where no handler
 * can answer. Once per slice: pd->stalled. */
static void stall_ask(struct schedt *s, struct p *pp, struct sysmontick *pd,
                      int64_t now)
{
    struct gmp__stall *st = &s->stalls[pp->id];
    pd->stalled = true;
    /* Relaxed: only sysmon leaves STALL_IDLE. */
    if (atomic_load_explicit(&st->state, memory_order_relaxed) != STALL_IDLE)
        return;                     /* the previous one is still out */
    st->tick = pd->schedtick;
    st->asked_ns = now;
    st->ran_ns = now - pd->stallwhen;
    /* Release: the handler's acquire CAS sees tick. */
    atomic_store_explicit(&st->state, STALL_ASKED, memory_order_release);
    if (gmp__stall_signal(s, pp))
        return;
    /* Relaxed: nobody else moves it from STALL_ASKED without a signal. */
    atomic_store_explicit(&st->state, STALL_IDLE, memory_order_relaxed);
    gmp__stall_report(s, pp->id, st, STALL_IDLE);
    gmp__flightrec_report(false, false);
}

/* Reports what a handler took for pp, or gives up on it after
 * STALL_WAIT_NS (signal blocked on that thread). */
static void stall_collect(struct schedt *s, struct p *pp, int64_t now)
{
    struct gmp__stall *st = &s->stalls[pp->id];
    /* Acquire: pairs with the handler's release, for the G's fields. */
    int state = atomic_load_explicit(&st->state, memory_order_acquire);
    if (state == STALL_TAKEN || state == STALL_GONE) {
        gmp__stall_report(s, pp->id, st, state);
        /* Relaxed: the handler moves only STALL_ASKED. */
        atomic_store_explicit(&st->state, STALL_IDLE, memory_order_relaxed);
        gmp__flightrec_report(false, false);
    } else if (state == STALL_ASKED && now - st->asked_ns > STALL_WAIT_NS &&
               atomic_compare_exchange_strong_explicit(
                   &st->state, &state, STALL_IDLE, memory_order_relaxed,
                   memory_order_relaxed)) {
        /* Relaxed both: nothing was written for us to read. */
        gmp__stall_report(s, pp->id, st, STALL_ASKED);
        gmp__flightrec_report(false, false);
    }
}

/* Whether a G waits for pp: in its ring or in the global queue. Relaxed
 * hints, as everything retake reads. */
static bool has_work(struct schedt *s, struct p *pp)
{
    return !gmp__runqempty(pp) ||
           atomic_load_explicit(&s->runqsize, memory_order_relaxed) != 0;
}

/* One look at every P. Returns how many Ps it retook from syscalls.
 * round: sysmon's period (20 us, doubling to 10 ms while nothing
 * happens). A syscall is given a whole round, even when sysmon looks
 * more often for the sake of woken Gs (hurry_all): a look every 1 ms
 * would otherwise hand off a P whose M the host stalled for 1 ms, in a
 * call of a microsecond, where a look every round would not. */
static int retake(struct schedt *s, int64_t now, int64_t round)
{
    int n = 0;
    for (int i = 0; i < gmp__procs(s); i++) {
        struct p *pp = &s->allp[i];
        struct sysmontick *pd = &s->sysmon_ticks[i];
        if (s->stalls)
            stall_collect(s, pp, now);
        /* Relaxed, here and below: see the top of the file. */
        int st = atomic_load_explicit(&pp->status, memory_order_relaxed);
        bool sysretake = false;
        if (st == P_RUNNING || st == P_SYSCALL) {
            uint32_t t = atomic_load_explicit(&pp->schedtick,
                                              memory_order_relaxed);
            /* stallwhen 0: never looked at this P, whose first slice has
             * tick 0 as our record (the preemption below counts that
             * slice from time 0, as it always has). */
            if (pd->schedtick != t || pd->stallwhen == 0) {
                pd->stallwhen = now;
                pd->stalled = false;
            } else if (st == P_RUNNING && s->stall_ns > 0 && !pd->stalled &&
                       now - pd->stallwhen >= s->stall_ns) {
                stall_ask(s, pp, pd, now);
            }
            if (pd->schedtick != t) {
                /* A tick that moved after a hurry moved for it: the G
                 * that runs now started after that hurry, whenever we
                 * look. Otherwise it started some time since our last
                 * look, and now is the safe guess. */
                pd->turnwhen = pd->hurrywhen > pd->schedwhen ? pd->hurrywhen
                                                             : now;
                pd->schedtick = t;
                pd->schedwhen = now;
            } else if (now - pd->schedwhen >= PREEMPT_NS) {
                gmp__preemptone(s, pp);
                /* A G that used up its slice inside a syscall sees the
                 * mark only when it returns: its P is taken at once if
                 * another G waits for it. Go's retake takes it even when
                 * none does; then the hand-off only made the G, on its
                 * return, wait for a newly woken M, once a slice. Without
                 * waiting work the usual rule below decides. */
                sysretake = st == P_SYSCALL && has_work(s, pp);
            }
        }
        /* The P a goroutine holding the world keeps: its system calls
         * are the stopper's own. Relaxed: see struct schedt. */
        if (st != P_SYSCALL ||
            pp == atomic_load_explicit(&s->stwp, memory_order_relaxed))
            continue;
        uint32_t t = atomic_load_explicit(&pp->syscalltick,
                                          memory_order_relaxed);
        if (!sysretake && pd->syscalltick != t) {
            pd->syscalltick = t;    /* a new syscall: give it one round */
            pd->syscallwhen = now;
            continue;
        }
        if (!sysretake && now - pd->syscallwhen < round)
            continue;
        if (gmp__runqempty(pp) &&
            atomic_load_explicit(&s->nmspinning, memory_order_relaxed) +
                    atomic_load_explicit(&s->npidle, memory_order_relaxed) >
                0 &&
            now - pd->syscallwhen < SYSMON_MAX_NS)
            continue;
        int expect = P_SYSCALL;
        int64_t t0 = gmp__trace_now();
        /* Acquire: pairs with gmp_syscall_enter's release; we own the P
         * now, and the M in the syscall will not get it back. */
        if (atomic_compare_exchange_strong_explicit(&pp->status, &expect,
                                                    P_IDLE,
                                                    memory_order_acquire,
                                                    memory_order_relaxed)) {
            gmp__trace_retaken(pp, t0);
            n++;
            gmp__handoffp(s, pp);
        }
    }
    return n;
}

/* Preempts the G running on allp[i] for a G that a timer or the poller
 * readied and that waits behind it, unless it did so less than
 * WAIT_SLICE_NS ago. Returns 0 when it preempted, else when it may. */
static int64_t hurry(struct schedt *s, int i, int64_t now)
{
    struct sysmontick *pd = &s->sysmon_ticks[i];
    if (now - pd->hurrywhen < WAIT_SLICE_NS)
        return pd->hurrywhen + WAIT_SLICE_NS;
    pd->hurrywhen = now;
    gmp__preemptone(s, &s->allp[i]);
    return 0;
}

static int64_t earlier(int64_t a, int64_t b)
{
    return a == 0 || (b != 0 && b < a) ? b : a;
}

/* While every P is busy: preempts each P that has a due timer (its M
 * runs it in schedule(), and the woken G runs next), and the Ps for the
 * *owed Gs sysmon's poll put on the global queue; only Ps whose G has
 * run POLL_TAKE_NS or more. Returns when to look
 * again (a pending timer, the end of a P's WAIT_SLICE_NS), 0 for no
 * reason. With a P idle it does nothing: the M blocked in the poller
 * wakes for the timers, and idle Ms take the queued Gs. Relaxed loads:
 * hints, as in retake; the P's M settles what is due under its timer
 * lock. */
static int64_t hurry_all(struct schedt *s, int64_t now, int32_t *owed)
{
    if (atomic_load_explicit(&s->npidle, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&s->runqsize, memory_order_relaxed) == 0)
        *owed = 0;
    if (atomic_load_explicit(&s->npidle, memory_order_relaxed) != 0)
        return 0;
    int64_t next = 0;
    for (int i = 0; i < gmp__procs(s); i++) {
        struct p *pp = &s->allp[i];
        if (atomic_load_explicit(&pp->status, memory_order_relaxed) !=
            P_RUNNING)
            continue;
        /* A P whose G has run less than POLL_TAKE_NS (by retake's
         * stamps, just before) passes through schedule() often: its M
         * runs the timer and the queue without being pushed, and no
         * signal interrupts short turns. Look again when it would have
         * run that long, and not before its timer is due. */
        int64_t ripe = s->sysmon_ticks[i].turnwhen + POLL_TAKE_NS;
        int64_t w = atomic_load_explicit(&pp->timer0when,
                                         memory_order_relaxed);
        if (w != 0 && w > now) {
            next = earlier(next, w > ripe ? w : ripe);
            w = 0;
        }
        if ((w != 0 || *owed > 0) && now < ripe) {
            next = earlier(next, ripe);
            continue;
        }
        if (w != 0 || *owed > 0) {
            int64_t t = hurry(s, i, now);
            if (t == 0 && *owed > 0)
                --*owed;
            next = earlier(next, t);
        }
    }
    return next;
}

/* When to look again, at the latest `until`, for the earliest timer:
 * when it is due, but not before POLL_TAKE_NS from now (hurry_all then
 * plans for the P's turn). */
static int64_t timer_look(struct schedt *s, int64_t now, int64_t until)
{
    int64_t tn = gmp__timers_next(s);
    if (tn == 0 || tn >= until)
        return until;
    if (tn < now + POLL_TAKE_NS)
        tn = now + POLL_TAKE_NS;
    return tn < until ? tn : until;
}

/*
 * Sleeps on the note until `until`. While every P is busy, a timer added
 * meanwhile and due more than POLL_TAKE_NS before then wakes it
 * (gmp__sysmon_wake_for), so that it can hurry the timer's P; so sysmon
 * need not look every POLL_TAKE_NS while the only timers are far off (a
 * pool's purger; docs/design.md, "Wake-ups while every P is busy"). With
 * a P idle, the Ms look after the timers themselves.
 */
static void note_sleep(struct schedt *s, int64_t now, int64_t until)
{
    if (atomic_load_explicit(&s->npidle, memory_order_relaxed) != 0) {
        gmp__notetsleep(&s->sysmon_note, until - now);
        return;
    }
    /* Seq_cst, then a full barrier before the timers' relaxed loads:
     * pairs with the adder's heap update, barrier and load of
     * sysmon_until, so that it sees our sleep or we see its timer. */
    atomic_store(&s->sysmon_until, until);
    gmp__storeload_fence();
    int64_t t = timer_look(s, now, until);
    if (t != until) {
        until = t;
        atomic_store(&s->sysmon_until, until);  /* seq_cst: as above */
    }
    bool woken = gmp__notetsleep(&s->sysmon_note, until - now);
    /* Seq_cst: 0 means an adder took this sleep and wakes the note (or
     * has): wait for that, so that it cannot end a later sleep. */
    if (atomic_exchange(&s->sysmon_until, 0) == 0 && !woken)
        gmp__notesleep(&s->sysmon_note);
    gmp__noteclear(&s->sysmon_note);
}

void gmp__sysmon_wake_for(struct schedt *s, int64_t when)
{
    /* Seq_cst: see note_sleep. The exchange makes one adder the waker. */
    int64_t su = atomic_load(&s->sysmon_until);
    if (su != 0 && su - when > POLL_TAKE_NS &&
        atomic_exchange(&s->sysmon_until, 0) != 0)
        gmp__notewakeup(&s->sysmon_note);
}

/*
 * Sleeps until `until`: in the poller, while every P is busy and no M
 * has polled for POLL_TAKE_NS (or since sysmon's own last poll), else on
 * its note (note_sleep). As the poller it learns at once of a ready fd
 * (it queues the Gs and hurries Ps for them) and of a new timer earlier
 * than `until` (gmp__netpoll_wake_for breaks the poll), and costs no
 * more than the note's sleep. *ownpoll: the lastpoll sysmon itself stored;
 * *owed: Gs queued for which no P was hurried yet.
 */
static void sysmon_sleep(struct schedt *s, int64_t now, int64_t until,
                         int64_t *ownpoll, int32_t *owed)
{
    int64_t delay = until - now;
    if (delay <= 0)
        return;
    /* Seq_cst: the load and the CAS keep a blocking M's 0 intact. */
    int64_t lp = atomic_load(&s->lastpoll);
    if (lp == 0 ||
        atomic_load_explicit(&s->npidle, memory_order_relaxed) != 0 ||
        (lp != *ownpoll && now - lp < POLL_TAKE_NS)) {
        note_sleep(s, now, until);
        return;
    }
    /* Seq_cst, the flag before the CAS: an M that idles its P later sees
     * our 0 in its exchange of lastpoll, then the flag, and breaks the
     * poll (findrunnable). */
    atomic_store(&s->sysmonpoll, true);
    if (!atomic_compare_exchange_strong(&s->lastpoll, &lp, 0)) {
        atomic_store(&s->sysmonpoll, false);    /* seq_cst: as above */
        note_sleep(s, now, until);
        return;
    }
    /* Seq_cst: see gmp__netpoll_wake_for. */
    atomic_store(&s->poll_until, until);
    struct g *list = NULL, *tail = NULL;
    int32_t n = 0, held = 0;
    /* The exit breaks the poll. */
    if (!gmp__exiting(s))
        list = gmp__netpoll(s, delay, &tail, &n, &held);
    atomic_store(&s->poll_until, 0);             /* seq_cst: as above */
    now = gmp__nanotime();
    *ownpoll = now;
    atomic_store(&s->sysmonpoll, false);        /* seq_cst: as above */
    atomic_store(&s->lastpoll, now);            /* seq_cst: as above */
    if (list) {
        gmp__trace_injected(NULL, list);
        gmp__injectglist(s, NULL, list, tail, n);
        *owed += n;
    }
    gmp__netpoll_release(s, held);
    /* A P went idle while we held the poller, and its M did not block
     * there: wake one that will. Full barrier before wakep's loads, as
     * every submitter's. */
    if (atomic_load_explicit(&s->npidle, memory_order_relaxed) != 0) {
        gmp__storeload_fence();
        gmp__wakep(s);
    }
}

/* The coarse clock a park stamps its G with (trace.c), the coarse
 * clock's lag (timer.h), and the schedtrace report when one is due. */
static void tick(struct schedt *s, int64_t now, int64_t *lasttrace)
{
    gmp__coarse_observe(now);
    /* Relaxed: a clock reading, published with nothing else. Every park
     * reads this line, so it is written at most once a millisecond, not
     * on each of sysmon's 20 us rounds. */
    if (now - atomic_load_explicit(&s->coarse_ns, memory_order_relaxed) >=
        COARSE_NS)
        atomic_store_explicit(&s->coarse_ns, now, memory_order_relaxed);
    if (s->schedtrace_ms > 0 &&
        now - *lasttrace >= (int64_t)s->schedtrace_ms * 1000000) {
        *lasttrace = now;
        gmp__schedtrace(s, now);
    }
}

/* Once a second: the default procs as the cgroup's limit and the
 * affinity mask give it now (Go's sysmonUpdateGOMAXPROCS), and the Ps
 * resized to it when it changed (at most to the CPUs there were at the
 * start: allp's length). A few small file reads on sysmon's own thread;
 * nothing else waits for them. The resize stops the world, as Go's
 * does; with the world held by the host it waits for the next second.
 * Only while sysmon is awake: a runtime with every P idle reads it when
 * a P is taken again. */
static void update_procs(struct schedt *s, int64_t now, int64_t *last)
{
    if (!s->cgroup || now - *last < PROCS_NS)
        return;
    *last = now;
    int n = gmp__cgroup_procs(gmp__ncpu(), gmp__cgroup_limit(s->cgroup));
    if (n > s->maxprocs)
        n = s->maxprocs;
    /* Relaxed: a hint, see struct schedt. */
    atomic_store_explicit(&s->procs_default, n, memory_order_relaxed);
    if (n != gmp__procs(s))
        (void)gmp__procresize(s, n);    /* busy: the next second */
}

static void *sysmon_loop(struct schedt *s);

static void *sysmon(void *arg)
{
    gmp__thread_started();
    sysmon_loop(arg);
    gmp__thread_stopping();
    return NULL;
}

static void *sysmon_loop(struct schedt *s)
{
    int64_t delay = SYSMON_MIN_NS;
    int idle = 0;
    int64_t lasttrace = s->start_ns;
    int64_t lastprocs = s->start_ns;
    int64_t next = 0;               /* from hurry_all */
    int64_t ownpoll = 0;            /* see sysmon_sleep */
    int32_t owed = 0;
    for (;;) {
        if (idle == 0)
            delay = SYSMON_MIN_NS;
        else if (idle > 50 && delay < SYSMON_MAX_NS)
            delay = delay * 2 < SYSMON_MAX_NS ? delay * 2
                                                  : SYSMON_MAX_NS;
        int64_t now = gmp__nanotime();
        int64_t until = now + delay;
        /* Every P busy and a G waiting in the poller: look again by
         * POLL_TAKE_NS, to take the poller; a G waiting on a timer only:
         * by the timer (timer_look). Only then: looking more often for
         * nothing would also shorten the round a syscall is given before
         * its P is retaken (retake). */
        if (atomic_load_explicit(&s->npidle, memory_order_relaxed) == 0 &&
            delay > POLL_TAKE_NS)
            until = gmp__netpoll_waiting(s) ? now + POLL_TAKE_NS
                                            : timer_look(s, now, until);
        if (next != 0 && next < until)
            until = next;
        sysmon_sleep(s, now, until, &ownpoll, &owed);
        /* The exit also wakes the note. */
        if (gmp__exiting(s))
            break;
        /* Relaxed hint, settled under the lock. */
        if (atomic_load_explicit(&s->npidle, memory_order_relaxed) ==
            gmp__procs(s)) {
            gmp__lock(&s->lock);
            if (atomic_load_explicit(&s->npidle, memory_order_relaxed) ==
                    gmp__procs(s) &&
                !gmp__exiting(s)) {
                s->sysmonwait = true;
                bool recheck = s->deadcheck_retry;
                gmp__unlock(&s->lock);
                bool woken = true;
                /* With schedtrace on, wake for each report (as Go's
                 * sysmon, which then never sleeps deeply). */
                int64_t wait = recheck ? DEADCHECK_RETRY_NS : 0;
                int64_t trace = (int64_t)s->schedtrace_ms * 1000000;
                if (trace > 0 && (wait == 0 || trace < wait))
                    wait = trace;
                if (wait > 0)
                    woken = gmp__notetsleep(&s->sysmon_note, wait);
                else
                    gmp__notesleep(&s->sysmon_note);
                gmp__lock(&s->lock);
                s->sysmonwait = false;
                /* The deadlock check was undecided (another thread was
                 * alive, deadlock.c): that thread may have exited since
                 * without touching the runtime, so look again. */
                if (!woken && recheck)
                    gmp__checkdead(s);
            }
            gmp__noteclear(&s->sysmon_note);
            gmp__unlock(&s->lock);
            now = gmp__nanotime();
            tick(s, now, &lasttrace);
            update_procs(s, now, &lastprocs);
            next = 0;
            owed = 0;
            continue;
        }
        now = gmp__nanotime();
        tick(s, now, &lasttrace);
        update_procs(s, now, &lastprocs);
        /* Nobody has polled for 10 ms (every M busy): poll for them.
         * Seq_cst: the CAS keeps a blocking poller's 0 intact. */
        int64_t lp = atomic_load(&s->lastpoll);
        if (gmp__netpoll_waiting(s) && lp != 0 && now - lp > POLL_NS &&
            atomic_compare_exchange_strong(&s->lastpoll, &lp, now)) {
            struct g *tail;
            int32_t n, held;
            ownpoll = now;
            struct g *list = gmp__netpoll(s, 0, &tail, &n, &held);
            if (list) {
                gmp__trace_injected(NULL, list);
                gmp__injectglist(s, NULL, list, tail, n);
                owed += n;
                idle = 0;
            }
            gmp__netpoll_release(s, held);
        }
        if (retake(s, now, delay) > 0)
            idle = 0;
        else
            idle++;
        next = hurry_all(s, now, &owed);
    }
    return NULL;
}

int gmp__sysmon_start(struct schedt *s)
{
    struct sysmontick *ticks = gmp__alloc((size_t)s->maxprocs * sizeof *ticks);
    if (!ticks)
        return GMP_ENOMEM;
    if (s->stall_ns > 0 &&
        !(s->stalls = gmp__alloc((size_t)s->maxprocs * sizeof *s->stalls))) {
        gmp__free(ticks, (size_t)s->maxprocs * sizeof *ticks);
        return GMP_ENOMEM;
    }
    s->sysmon_ticks = ticks;        /* before the thread reads it */
    int err, tries = 0;
    while ((err = pthread_create(&s->sysmon_thread, NULL, sysmon, s)) != 0 &&
           gmp__thread_retry(err, tries++))
        ;
    if (err != 0) {
        s->sysmon_ticks = NULL;
        gmp__free(ticks, (size_t)s->maxprocs * sizeof *ticks);
        if (s->stalls)
            gmp__free(s->stalls, (size_t)s->maxprocs * sizeof *s->stalls);
        s->stalls = NULL;
        return GMP_EAGAIN;
    }
    return 0;
}

/* Context: after sched.exiting is set, when the runtime is freed. */
void gmp__sysmon_stop(struct schedt *s)
{
    if (!s->sysmon_ticks)
        return;                     /* never started */
    gmp__lock(&s->lock);
    s->sysmonwait = false;
    gmp__notewakeup(&s->sysmon_note);
    gmp__unlock(&s->lock);
    gmp__netpoll_break(s);          /* if it polls */
    pthread_join(s->sysmon_thread, NULL);
    gmp__free(s->sysmon_ticks, (size_t)s->maxprocs * sizeof *s->sysmon_ticks);
    s->sysmon_ticks = NULL;
    /* No M is left to take a signal that reads it. */
    if (s->stalls)
        gmp__free(s->stalls, (size_t)s->maxprocs * sizeof *s->stalls);
    s->stalls = NULL;
}
