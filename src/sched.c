/*
 * sched.c - the scheduler loop on g0: schedule, findrunnable, work
 * stealing, spinning and parking Ms, wakep (Go's proc.go, in its order).
 *
 * Spinning Ms and the lost-wakeup problem
 * ----------------------------------------
 * The problem: work can be published (a G put on a run queue) just as the
 * last M looking for work gives up and parks. Both sides look at the other's
 * state, so each needs to see the other's latest write: a StoreLoad pattern.
 *
 * The rule (Go's): an M looking for work is "spinning" and counted in
 * sched.nmspinning. A submitter publishes its work, then a full barrier,
 * then reads npidle and nmspinning in wakep(): if a P is idle and no M is
 * spinning, it starts one (CAS 0 -> 1 on nmspinning, so at most one
 * submitter does). A spinning M that finds nothing releases its P, then
 * decrements nmspinning, then a full barrier, then re-checks every P's run
 * queue and the global queue. Either the submitter sees nmspinning == 0
 * and wakes an M, or the M's re-check sees the work: never neither.
 *
 * Spinning Ms are capped at half the busy Ps (2 * nmspinning < procs -
 * npidle), so a burst of wakeups does not turn every idle thread into a
 * spinner. A spinning M that finds work stops spinning and calls wakep()
 * again: if there may be more work, another M takes up the search.
 *
 * Two holes in that rule, which Go leaves to preemption to paper over (a
 * goroutine stranded behind one that never yields waits for sysmon), and
 * which gmprt closes so that the rule holds without it:
 *   - An M that skipped the search because of the cap idles its P without
 *     the re-check: the spinner it counted on may find other work, stop
 *     spinning, and, in its wakep(), see no idle P yet, while the
 *     submitter, earlier still, also saw none. So every M that idles a P
 *     re-checks after a full barrier (pidleput is its store); a
 *     non-spinning one acts only when nmspinning is 0, since a spinner
 *     still counted will do its own re-check after ours.
 *   - wakep()'s token may be spent by a startm that finds no idle P: an M
 *     idling a P meanwhile saw the token and trusted it, and the
 *     submitter that saw it too went away. So a wakep() whose start finds
 *     no P gives the token back, issues a full barrier, and tries again
 *     while a P is idle and work is visible.
 *
 * Alternatives rejected: waking an M on every submission (a futex syscall
 * per gmp_go); a condition variable per P (a lock on every put).
 *
 * The G -> g0 -> G switch
 * -----------------------
 * A G gives up its M by switching to the M's g0 with a reason
 * (gmp__mcall). g0 acts on the reason only after the G's stack is left:
 * puts it on a queue (yield), calls the park callback (park), frees it
 * (exit). So no other M can resume a G before its switch-out completed.
 * Two shortcuts switch G -> G where the scheduler's choice is known
 * (gmp__park_direct, yield_direct): the next G completes the previous
 * one's switch in resumed(), in the same order (docs/design.md,
 * Switching).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "exectrace.h"
#include "metrics.h"
#include "netpoll.h"
#include "timer.h"
#include "alloc.h"
#include "key.h"
#include "preempt.h"
#include "stack.h"

__thread struct m *gmp__tls_m __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) struct m *gmp__getm(void)
{
    return gmp__tls_m;
}

void gmp__setm(struct m *mp)
{
    gmp__tls_m = mp;
}

/* ---- P and M lists (sched.lock held) ------------------------------------ */

static void pidleput(struct schedt *s, struct p *pp)
{
    pp->link = s->pidle;
    s->pidle = pp;
    /* Relaxed: ordered for wakep() by the barriers either side (see the
     * essay above); the lock orders it for everyone else. */
    int32_t n = atomic_fetch_add_explicit(&s->npidle, 1,
                                          memory_order_relaxed) + 1;
    /* Relaxed: gmp_shutdown stores shutdown_waiting before it takes
     * sched.lock to check for quiescence. A P idled after that check holds
     * the lock after it and sees the 1; one idled before it was counted
     * by the check itself. */
    if (n == gmp__procs(s) &&
        atomic_load_explicit(&s->shutdown_waiting, memory_order_relaxed)) {
        /* Release: gmp_shutdown's acquire load of idlegen then sees every
         * count written before this P went idle. */
        atomic_fetch_add_explicit(&s->idlegen, 1, memory_order_release);
        gmp__futex_wake(&s->idlegen, 1);
    }
}

static struct p *pidleget(struct schedt *s)
{
    struct p *pp = s->pidle;
    if (pp) {
        s->pidle = pp->link;
        /* Relaxed: as in pidleput. */
        atomic_fetch_sub_explicit(&s->npidle, 1, memory_order_relaxed);
        /* Work again after every P was idle: sysmon may be in its deep
         * sleep, which only this wakes. */
        if (s->sysmonwait) {
            s->sysmonwait = false;
            gmp__notewakeup(&s->sysmon_note);
        }
    }
    return pp;
}

static void acquirep(struct m *mp, struct p *pp)
{
    mp->p = pp;
    pp->m = mp;
    gmp__trace_procstart(pp, mp);
    /* Relaxed: where sysmon's signals go (see struct p). */
    atomic_store_explicit(&pp->tid, mp->tid, memory_order_relaxed);
    /* Relaxed: a hint for thieves deciding whether to wait for runnext. */
    atomic_store_explicit(&pp->status, P_RUNNING, memory_order_relaxed);
}

static struct p *releasep(struct m *mp)
{
    struct p *pp = mp->p;
    gmp__trace_procstop(pp);
    pp->m = NULL;
    /* Relaxed: as in acquirep. */
    atomic_store_explicit(&pp->status, P_IDLE, memory_order_relaxed);
    mp->p = NULL;
    return pp;
}

static void stopm(struct schedt *s, struct m *mp);
static bool gcstopm(struct schedt *s, struct m *mp);
static void stop_p_locked(struct schedt *s, struct p *pp);

/* Wakes every parked M so it notices sched.exiting. Context: any. */
void gmp__wake_idle_ms(struct schedt *s)
{
    gmp__lock(&s->lock);
    for (struct m *mp = s->midle; mp; mp = mp->schedlink)
        gmp__notewakeup(&mp->park);
    s->midle = NULL;
    s->nmidle = 0;
    /* And every locked M waiting for its G (stoplockedm): rare, so the
     * walk over allm costs nothing that matters. */
    for (struct m *mp = s->allm; s->nmidlelocked > 0 && mp; mp = mp->alllink)
        if (mp->lockedpark) {
            mp->lockedpark = false;
            s->nmidlelocked--;
            gmp__notewakeup(&mp->park);
        }
    gmp__unlock(&s->lock);
    gmp__netpoll_break(s);          /* and the one blocked in epoll_wait */
}

/* ---- Threads ------------------------------------------------------------ */

static void *mstart(void *arg)
{
    struct m *mp = arg;
    gmp__thread_started();
    gmp__setm(mp);
    /* The thread's stack, for gmp_stack_bounds. */
    pthread_attr_t at;
    if (pthread_getattr_np(pthread_self(), &at) == 0) {
        void *base;
        size_t size;
        if (pthread_attr_getstack(&at, &base, &size) == 0) {
            mp->g0lo = base;
            mp->g0hi = (char *)base + size;
        }
        pthread_attr_destroy(&at);
    }
    gmp__altstack_setup(mp);        /* without it overflows die unreported */
    gmp__preempt_minit(mp);
    mp->g0_tsan_fiber = GMP_TSAN_CURRENT();
    mp->fastrand = 0x9E3779B97F4A7C15ULL * (uint64_t)(mp->id + 1) ^
                   (uint64_t)gmp__nanotime();
    if (!mp->fastrand)
        mp->fastrand = 1;
    if (mp->nextp) {
        acquirep(mp, mp->nextp);
        mp->nextp = NULL;
    }
    gmp__mloop(mp);
    gmp__mexit(mp);
    return NULL;
}

/* Whether any run queue (a P's ring or runnext, or the global queue) has
 * a G. A hint, read after the caller's full barrier. Context: any. */
static bool work_visible(struct schedt *s)
{
    /* Relaxed: ordered by the caller's barrier (see the essay above). */
    if (atomic_load_explicit(&s->runqsize, memory_order_relaxed) != 0)
        return true;
    for (int i = 0; i < gmp__procs(s); i++)
        if (!gmp__runqempty(&s->allp[i]))
            return true;
    return false;
}

/* The re-check of every M that has just idled a P (pidleput is its
 * store): a full barrier, then whether work is visible that no spinner is
 * left to find. A spinning M (it has just left the count) always looks,
 * since the count may hold a token that was never an M; a non-spinning
 * one only when nmspinning is 0 (see the essay). Context: any, no locks
 * held. */
static bool work_after_idling(struct schedt *s, bool was_spinning)
{
    gmp__storeload_fence();
    /* Relaxed: ordered by the barrier. */
    return (was_spinning ||
            atomic_load_explicit(&s->nmspinning, memory_order_relaxed) ==
                0) &&
           work_visible(s);
}

/* Go's retryOnEAGAIN: EAGAIN from pthread_create means a thread or pids
 * limit is reached for now, and threads elsewhere may end. */
#define THREAD_TRIES 20

bool gmp__thread_retry(int err, int tries)
{
    if (err != EAGAIN || tries + 1 >= THREAD_TRIES)
        return false;
    struct timespec ts = {0, (long)(tries + 1) * 1000000L};
    while (GMP_LIBC(nanosleep)(&ts, &ts) != 0 && errno == EINTR)
        ;
    return true;
}

/* The runtime cannot go on without the thread: a G that needs it (the
 * one a blocked system call left behind, say) would wait for ever, with
 * nothing to say why. Go dies the same way. Context: holds sched.lock. */
static _Noreturn void newm_failed(struct schedt *s, int err)
{
    if (err == 0) {
        gmp__fatal_begin("thread exhaustion: more than ");
        gmp__fatal_putn((uint64_t)s->maxmcount);
        gmp__fatal_puts(" threads (max_threads)\n");
    } else {
        gmp__fatal_begin("failed to create new OS thread (have ");
        gmp__fatal_putn((uint64_t)s->mcount);
        gmp__fatal_puts(" already; errno=");
        gmp__fatal_putn((uint64_t)err);
        gmp__fatal_puts(")\n");
    }
    gmp__fatal_end();
}

enum startm_result { STARTM_OK, STARTM_NO_P, STARTM_FAILED };

/* Starts an M, parked or new, to run pp (an idle P when pp is NULL). When
 * spinning, the caller already counted the M in nmspinning; a start that
 * finds no P (or the runtime stopping) undoes that. A thread that cannot
 * be made is a fatal error, after retries while the system says EAGAIN;
 * only gmp_main's first M may fail, which gmp_main reports as GMP_EAGAIN.
 * Context: any, no locks held. */
static enum startm_result startm(struct schedt *s, struct p *pp,
                                 bool spinning)
{
    enum startm_result res = STARTM_FAILED;
    gmp__lock(&s->lock);
    if (gmp__exiting(s))
        goto fail_locked;
    if (!pp && !(pp = pidleget(s))) {
        res = STARTM_NO_P;
        goto fail_locked;
    }
    struct m *mp = s->midle;
    if (mp) {
        s->midle = mp->schedlink;
        s->nmidle--;
        gmp__unlock(&s->lock);
        mp->spinning = spinning;
        mp->nextp = pp;
        gmp__notewakeup(&mp->park);   /* release: publishes nextp */
        return STARTM_OK;
    }
    if (!(mp = gmp__alloc(sizeof *mp)))
        gmp__throw("out of memory: a thread record");
    mp->sched = s;
    mp->spinning = spinning;
    mp->nextp = pp;
    /* Created under the lock, so the exit protocol never sees a half-made
     * M in allm. Thread creation is rare: only when no parked M exists.
     * Between tries the lock is dropped, with mp out of allm and pp held. */
    for (int tries = 0;; tries++) {
        if (s->mcount >= s->maxmcount)
            newm_failed(s, 0);
        mp->id = s->mcount++;
        mp->alllink = s->allm;
        s->allm = mp;
        /* Under sched.lock, maybe on a G's stack: see gmp__callout_begin. */
        struct g *self = gmp__callout_begin();
        int err = pthread_create(&mp->thread, NULL, mstart, mp);
        gmp__callout_end(self);
        if (err == 0)
            break;
        s->allm = mp->alllink;
        s->mcount--;
        gmp__unlock(&s->lock);
        bool again = gmp__thread_retry(err, tries);
        gmp__lock(&s->lock);
        bool exiting = gmp__exiting(s);
        if (again && !exiting)
            continue;
        if (!exiting && !(s->main_mode && s->mcount == 0))
            newm_failed(s, err);
        gmp__free(mp, sizeof *mp);
        pidleput(s, pp);
        goto fail_locked;
    }
    gmp__unlock(&s->lock);
    return STARTM_OK;

fail_locked:
    gmp__unlock(&s->lock);
    if (spinning)
        /* Relaxed: nobody spins for this start; wakep's barrier orders it
         * before its re-check, and a later wakep() re-reads the count
         * after its own barrier. */
        atomic_fetch_sub_explicit(&s->nmspinning, 1, memory_order_relaxed);
    return res;
}

/* Tries to start a spinning M if a P is idle and nobody is spinning. The
 * caller has published its work in a queue it owns and issued
 * gmp__storeload_fence() (or, after a locked RMW, its _after_rmw form).
 * Work for the global queue from a thread without a P goes through
 * gmp__globrunqput_wake instead. Context: any. */
void gmp__wakep(struct schedt *s)
{
    for (;;) {
        /* Relaxed loads, ordered after the caller's full barrier (or
         * ours, below). */
        if (atomic_load_explicit(&s->npidle, memory_order_relaxed) == 0)
            return;
        int32_t zero = 0;
        /* Relaxed CAS: it only elects one waker (at most one M starts
         * spinning per wakep); startm hands over the P under sched.lock. */
        if (atomic_load_explicit(&s->nmspinning, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(&s->nmspinning, &zero, 1,
                                                     memory_order_relaxed,
                                                     memory_order_relaxed))
            return;
        if (startm(s, NULL, true) != STARTM_NO_P)
            return;
        /* Our token was spent on nothing (see the essay): look again. */
        gmp__storeload_fence();
        if (!work_visible(s))
            return;
    }
}

/* Queues gp on the global queue from a thread that holds no P (a foreign
 * thread, a G inside a syscall bracket) and makes sure an M will run it:
 * Go's injectglist, not wakep. wakep trusts a spinning M to find the
 * work, and its "spinning" token may belong to a startm that is about to
 * find no idle P and give the token back without looking; an M that
 * dropped its P meanwhile without spinning (it saw the token) would never
 * look either. That is harmless for a local queue, whose owner runs it,
 * but would strand a G here. So: if a P is idle (read under the lock that
 * every P takes to go idle, after checking this queue), start an M for
 * it; if none is, every P's M takes the lock again before it idles, and
 * finds gp. Context: any thread without a P, no locks held. */
void gmp__globrunqput_wake(struct schedt *s, struct g *gp)
{
    gmp__lock(&s->lock);
    gmp__globrunqput(s, gp);
    /* Relaxed: written under the lock we hold. */
    bool idle = atomic_load_explicit(&s->npidle, memory_order_relaxed) != 0;
    gmp__unlock(&s->lock);
    if (idle)
        startm(s, NULL, false);
}

/* Makes the Gs the poller readied (n of them, chained by schedlink)
 * runnable: onto pp's run queue when the caller holds pp, with a helper
 * woken; else onto the global queue with an M started for each idle P
 * they can use (Go's injectglist). Context: any, no locks held. */
void gmp__injectglist(struct schedt *s, struct p *pp, struct g *head,
                      struct g *tail, int32_t n)
{
    if (!head)
        return;
    if (pp) {
        for (struct g *gp = head, *next; gp; gp = next) {
            next = gp->schedlink;
            gmp__runqput(s, pp, gp, false);
        }
        gmp__storeload_fence();
        gmp__wakep(s);
        return;
    }
    gmp__lock(&s->lock);
    gmp__globrunqputbatch(s, head, tail, n);
    /* Relaxed: under the lock every P takes to go idle. */
    int32_t idle = atomic_load_explicit(&s->npidle, memory_order_relaxed);
    gmp__unlock(&s->lock);
    for (int32_t i = 0; i < n && i < idle; i++)
        startm(s, NULL, false);
}

/* Parks mp until startm hands it a P (or the runtime exits). Context: g0,
 * mp holds no P. */
static void stopm(struct schedt *s, struct m *mp)
{
    gmp__lock(&s->lock);
    if (gmp__exiting(s)) {
        gmp__unlock(&s->lock);
        return;
    }
    mp->schedlink = s->midle;
    s->midle = mp;
    s->nmidle++;
    gmp__checkdead(s);              /* if nobody runs: can anything wake? */
    gmp__unlock(&s->lock);
    gmp__notesleep(&mp->park);
    gmp__noteclear(&mp->park);
    if (mp->nextp) {
        acquirep(mp, mp->nextp);
        mp->nextp = NULL;
    }
}

/* A spinning M found work: stop spinning, and let another M take up the
 * search if none is left spinning. Context: g0. */
static void resetspinning(struct schedt *s, struct m *mp)
{
    mp->spinning = false;
    /* Relaxed: the barrier after it orders it before wakep's loads. */
    atomic_fetch_sub_explicit(&s->nmspinning, 1, memory_order_relaxed);
    gmp__storeload_fence();
    gmp__wakep(s);
}

/* ---- Locked threads (gmp_lock_os_thread; key.c has the G's side) ------- */

/*
 * Go's lockOSThread. While a G is locked (gp->locked > 0) it runs only on
 * its M (gmp__lockedm(gp), m->lockedg), and that M runs no other G:
 *   - When the locked G stops running (parks, yields, is preempted, leaves
 *     a syscall without a P), its M gives its P away (handoffp: to another
 *     M if there is work, else idle) and sleeps on its note
 *     (stoplockedm), counted in sched.nmidlelocked, not on midle.
 *   - The G, once runnable, sits in a run queue like any other. An M that
 *     takes it (schedule, gosched_m) sees gp->locked, hands its own P to
 *     the locked M through nextp, wakes it, and parks itself (startlockedm,
 *     Go's); the locked M takes the P and runs its G.
 *   - The locked G never parks straight into another G
 *     (gmp__park_direct declines), and a locked G in runnext is never
 *     switched to directly.
 * The note carries exactly one wake per sleep: startlockedm's (with
 * nextp) or the exit's (gmp__wake_idle_ms, for an M with lockedpark set);
 * both decide under sched.lock and clear lockedpark, so they never both
 * wake one sleep. startlockedm may run before the locked M has reached
 * stoplockedm (the G was readied the moment its park published it): then
 * nextp is already set, the M does not count itself idle, and its sleep
 * returns at once.
 * Deadlock detection counts such Ms as idle (Go's nmidlelocked): when
 * nmidle + nmidlelocked == mcount nothing runs.
 */

static void handoffp(struct schedt *s, struct p *pp);

/* mp's locked G is not running: gives mp's P away, if it has one, and
 * sleeps until startlockedm hands it a P to run the G on. Returns that G,
 * or NULL when the runtime exits. Context: g0, mp->lockedg set, no locks
 * held. */
static struct g *stoplockedm(struct schedt *s, struct m *mp, bool *inherit)
{
    if (mp->p)
        handoffp(s, releasep(mp));
    gmp__lock(&s->lock);
    /* An exit after this sees lockedpark. */
    if (gmp__exiting(s)) {
        gmp__unlock(&s->lock);
        return NULL;
    }
    if (!mp->nextp) {               /* else startlockedm already woke us */
        mp->lockedpark = true;
        s->nmidlelocked++;
        gmp__checkdead(s);
    }
    gmp__unlock(&s->lock);
    gmp__notesleep(&mp->park);
    gmp__noteclear(&mp->park);
    gmp__lock(&s->lock);
    struct p *pp = mp->nextp;
    mp->nextp = NULL;
    gmp__unlock(&s->lock);
    if (!pp)
        return NULL;                /* woken for the exit */
    acquirep(mp, pp);
    *inherit = false;
    return mp->lockedg;
}

/* gp, just taken from a run queue by mp, is locked to another M: hand it
 * mp's P, wake it to run gp, and park mp until it gets a P again (or the
 * runtime exits). Context: g0, mp holds a P, no locks held. */
static void startlockedm(struct schedt *s, struct m *mp, struct g *gp)
{
    struct m *lm = gmp__lockedm(gp);
    if (GMP_UNLIKELY(lm == mp || !lm))
        gmp__throw("startlockedm: inconsistent locking");
    struct p *pp = releasep(mp);
    gmp__lock(&s->lock);
    if (lm->lockedpark) {
        lm->lockedpark = false;
        s->nmidlelocked--;
    }
    lm->nextp = pp;
    gmp__unlock(&s->lock);
    gmp__notewakeup(&lm->park);     /* release: as in startm */
    stopm(s, mp);
}

/* ---- Finding work ------------------------------------------------------- */

static unsigned gcd(unsigned a, unsigned b)
{
    while (b) {
        unsigned t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void gmp__steal_order(struct schedt *s)
{
    unsigned n = (unsigned)gmp__procs(s);
    s->ncoprimes = 0;
    for (unsigned i = 1; i <= n; i++)
        if (gcd(i, n) == 1)
            s->coprimes[s->ncoprimes++] = i;
}

/* Visits every P but pp in a random order: start anywhere, step by a
 * number coprime to procs (Go's randomOrder), four rounds, runnext only in
 * the last. */
static struct g *stealwork(struct schedt *s, struct m *mp)
{
    struct p *pp = mp->p;
    uint32_t n = (uint32_t)gmp__procs(s);
    for (int i = 0; i < GMP_STEAL_TRIES; i++) {
        bool stealnext = i == GMP_STEAL_TRIES - 1;
        uint32_t r = gmp__fastrand(mp);
        uint32_t pos = r % n;
        uint32_t inc = s->coprimes[(r >> 16) % s->ncoprimes];
        for (uint32_t k = 0; k < n; k++, pos = (pos + inc) % n) {
            struct p *victim = &s->allp[pos];
            if (victim == pp)
                continue;
            /* Last round: run the victim's due timers too; what they
             * ready lands on our own queue. */
            int64_t now = 0;
            bool inherit;
            struct g *gp;
            if (stealnext && gmp__checktimers(victim, &now) > 0 &&
                (gp = gmp__runqget(pp, &inherit)))
                return gp;
            if ((gp = gmp__runqsteal(pp, victim, stealnext))) {
                /* Relaxed: a statistic (trace.c). */
                gmp__owner_inc(&pp->nsteal, memory_order_relaxed);
                return gp;
            }
        }
        if (gmp__exiting(s))
            return NULL;
    }
    return NULL;
}

/* Finds a runnable G, blocking (parked) until there is one. Returns NULL
 * when the runtime exits. On return with a G, mp holds a P.
 * Context: g0; mp holds a P on entry. */
static struct g *findrunnable(struct schedt *s, struct m *mp, bool *inherit)
{
    struct g *gp;
top:
    if (gmp__exiting(s))
        return NULL;
    if (!mp->p) {                   /* woken by the exit broadcast */
        stopm(s, mp);
        goto top;
    }
    /* Relaxed: see struct schedt. */
    if (GMP_UNLIKELY(atomic_load_explicit(&s->stopping,
                                          memory_order_relaxed)) &&
        gcstopm(s, mp))
        goto top;
    struct p *pp = mp->p;
    int64_t now = 0;
    gmp__checktimers(pp, &now);
    if ((gp = gmp__runqget(pp, inherit)))
        return gp;
    *inherit = false;
    if (atomic_load_explicit(&s->runqsize, memory_order_relaxed) != 0) {
        gmp__lock(&s->lock);
        gp = gmp__globrunqget(s, pp, 0);
        gmp__unlock(&s->lock);
        if (gp)
            return gp;
    }
    /* The network, without blocking, before taking others' work; not
     * while another M blocks in the poller (it delivers). Relaxed: a
     * hint; the poll itself settles it. */
    int64_t lp = atomic_load_explicit(&s->lastpoll, memory_order_relaxed);
    if (gmp__netpoll_waiting(s) && lp != 0) {
        struct g *tail;
        int32_t n, held;
        gp = gmp__netpoll(s, 0, &tail, &n, &held);
        /* Say that we polled, or sysmon takes the poller for Ps that
         * seem to have nobody polling for them (sysmon_sleep), and our
         * polls, which stop while it holds it, become its wake-ups. At
         * most once per POLL_MARK_NS: the line is every poller's. Seq_cst
         * CAS: keeps a blocking poller's 0 intact, as sysmon's does. */
        if (!now)
            now = gmp__nanotime();
        if (now - lp >= POLL_MARK_NS)
            atomic_compare_exchange_strong(&s->lastpoll, &lp, now);
        if (gp) {
            gmp__trace_injected(pp, gp);
            gmp__injectglist(s, pp, gp->schedlink, tail, n - 1);
        }
        gmp__netpoll_release(s, held);
        if (gp)
            return gp;
    }

    /* Steal, unless too many Ms are already spinning. */
    int32_t busy = gmp__procs(s) -
        atomic_load_explicit(&s->npidle, memory_order_relaxed);
    if (mp->spinning ||
        2 * atomic_load_explicit(&s->nmspinning, memory_order_relaxed) < busy) {
        if (!mp->spinning) {
            mp->spinning = true;
            /* Relaxed: a count; the barriers that matter are on leaving. */
            atomic_fetch_add_explicit(&s->nmspinning, 1, memory_order_relaxed);
        }
        if ((gp = stealwork(s, mp)))
            return gp;
    }

    /* Nothing anywhere: give up the P. */
    gmp__lock(&s->lock);
    if (gmp__exiting(s)) {
        gmp__unlock(&s->lock);
        return NULL;
    }
    if (atomic_load_explicit(&s->runqsize, memory_order_relaxed) != 0) {
        gp = gmp__globrunqget(s, pp, 0);
        gmp__unlock(&s->lock);
        return gp;
    }
    /* Relaxed: under the lock that writes it. The P is stopped, not
     * idled: the stopper took every idle one already. */
    if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
        gmp__unlock(&s->lock);
        goto top;
    }
    releasep(mp);
    pidleput(s, pp);
    gmp__unlock(&s->lock);

    /* Re-check every queue. Pairs with the barrier before wakep(): we
     * see the submitter's work, or it sees our idle P and nmspinning == 0
     * and wakes an M. A spinning M leaves spinning first. */
    bool spinning = mp->spinning;
    if (spinning) {
        mp->spinning = false;
        /* Relaxed: the re-check's barrier orders it. */
        atomic_fetch_sub_explicit(&s->nmspinning, 1, memory_order_relaxed);
    }
    if (work_after_idling(s, spinning)) {
        gmp__lock(&s->lock);
        pp = pidleget(s);
        gmp__unlock(&s->lock);
        if (pp) {
            acquirep(mp, pp);
            mp->spinning = true;
            /* Relaxed: as when we started spinning. */
            atomic_fetch_add_explicit(&s->nmspinning, 1,
                                      memory_order_relaxed);
            goto top;
        }
        /* No idle P: all are busy, and whoever took ours re-checks
         * when it idles it again. */
    }

    /* Block in the poller until an fd is ready or the earliest timer is
     * due, if anything waits on either and no other M blocks there. */
poll_again:;
    int64_t until = gmp__timers_next(s);
    /* Seq_cst: see gmp__netpoll_wake_for. */
    if ((gmp__netpoll_waiting(s) || until != 0) &&
        atomic_exchange(&s->lastpoll, 0) != 0) {
        /* Seq_cst: the last waiter may have gone since we looked, before
         * our exchange: then we see it here, else it sees our 0 and
         * breaks the poll (netpoll.c, waiters_add). */
        if (until == 0 && atomic_load(&s->netpoll_waiters) == 0) {
            /* Give the role back. Whoever found it held meanwhile (a
             * timer's adder, a new waiter, an M idling its P with a
             * timer) broke a poll that is not there and left the
             * polling to us: look again. An exchange and a full
             * barrier, so that we see what they added before they saw
             * our 0 (seq_cst for the waiters; the fence pairs with
             * gmp__netpoll_wake_for's for the timers). Without it a 1 ms
             * sleep on an idle runtime never ended, about once in 500
             * runs of test_io at procs=4 under qemu. */
            atomic_exchange(&s->lastpoll, gmp__nanotime());
            gmp__storeload_fence_after_rmw();
            if (gmp__timers_next(s) != 0 ||
                atomic_load(&s->netpoll_waiters) != 0)
                goto poll_again;
            stopm(s, mp);
            goto top;
        }
        atomic_store(&s->poll_until, until);
        int64_t delay = -1;
        if (until != 0) {
            delay = until - gmp__nanotime();
            if (delay < 0)
                delay = 0;
        }
        struct g *tail = NULL;
        int32_t n = 0, held = 0;
        gp = NULL;
        /* The exit breaks the poll. */
        if (!gmp__exiting(s))
            gp = gmp__netpoll(s, delay, &tail, &n, &held);
        atomic_store(&s->poll_until, 0);
        atomic_store(&s->lastpoll, gmp__nanotime());
        gmp__lock(&s->lock);
        pp = pidleget(s);
        gmp__unlock(&s->lock);
        if (pp) {
            acquirep(mp, pp);
            if (gp) {
                gmp__trace_injected(pp, gp);
                gmp__injectglist(s, pp, gp->schedlink, tail, n - 1);
                gmp__netpoll_release(s, held);
                return gp;
            }
            gmp__netpoll_release(s, held);
            /* A timer is due (maybe on another P's heap) or the poll was
             * broken: look again, as a spinning M, allowed to steal. */
            mp->spinning = true;
            /* Relaxed: as when we started spinning. */
            atomic_fetch_add_explicit(&s->nmspinning, 1, memory_order_relaxed);
            goto top;
        }
        gmp__trace_injected(NULL, gp);
        gmp__injectglist(s, NULL, gp, tail, n);
        gmp__netpoll_release(s, held);
    } else if (atomic_load(&s->sysmonpoll)) {
        /* sysmon polls for Ps that are all busy, but ours is idle now:
         * break its poll, and it wakes an M to block there instead
         * (sysmon.c). Seq_cst: pairs with sysmon's store of sysmonpoll
         * before its CAS of lastpoll; our exchange above saw its 0, so
         * this load sees its flag. */
        gmp__netpoll_break(s);
    } else if (until != 0) {
        /* Another M blocks in the poller: make it wake for our timer if
         * it sleeps past it. Seq_cst: as above. */
        int64_t pu = atomic_load(&s->poll_until);
        if (pu == 0 || pu > until)
            gmp__netpoll_break(s);
    }
    stopm(s, mp);
    goto top;
}

#define TIMER_RESCUE_NS 200000      /* see rescue_timers */

/*
 * Runs the due timers of every other P whose earliest timer is more than
 * TIMER_RESCUE_NS overdue: its M, which checks them at each of its
 * scheduling points, has had none for that long (the OS has it
 * descheduled, or one G runs on). What they ready lands on pp's queue.
 * Go leaves such timers to their P until it schedules again or goes
 * idle, or to a P that runs out of work and steals; with every P busy,
 * neither comes. With more Ps than CPUs that is the common case: on the
 * 2-CPU VM at procs=16, `timers` sleepers woke 5.7-6.9 ms late (Go
 * 1.5-1.9), 82-89% of them fired by their own P once the OS ran its
 * thread again. With this check every 61st tick and a 200 us threshold
 * (medians of 5, alternated): procs=16, 1.5 ms late against 5.5 (Go
 * 2.0); procs=4, 0.47 against 1.2 (Go 1.7); procs=2, 0.19 against 0.31.
 * A 1 ms threshold left 1.7 ms at procs=16, 100 us 1.4.
 * Context: g0, owner of pp.
 */
static void rescue_timers(struct schedt *s, struct p *pp, int64_t *now)
{
    for (int i = 0; i < gmp__procs(s); i++) {
        struct p *victim = &s->allp[i];
        if (victim == pp)
            continue;               /* checked just before */
        /* Relaxed: a hint, as in gmp__checktimers, which decides. */
        int64_t w = atomic_load_explicit(&victim->timer0when,
                                         memory_order_relaxed);
        if (w == 0)
            continue;
        if (*now == 0) {
            if (gmp__timer_surely_before(gmp__deadline(w, TIMER_RESCUE_NS)))
                continue;
            *now = gmp__nanotime();
        }
        if (*now - w > TIMER_RESCUE_NS)
            gmp__checktimers(victim, now);
    }
}

/* Picks the next G to run, in Go's order, for an M with no locked G
 * (schedule() is the entry that checks). Returns NULL when the runtime
 * exits. Context: g0, mp holds a P, mp->lockedg NULL. */
static struct g *pickg(struct schedt *s, struct m *mp, bool *inherit)
{
    struct g *gp = NULL;
top:
    if (GMP_UNLIKELY(gmp__exiting(s)))
        return NULL;
    /* Relaxed: see struct schedt. */
    if (GMP_UNLIKELY(atomic_load_explicit(&s->stopping,
                                          memory_order_relaxed)) &&
        gcstopm(s, mp))
        goto top;
    struct p *pp = mp->p;
    int64_t now = 0;
    gmp__checktimers(pp, &now);     /* what is due becomes runnable */
    /* Every 61st tick, other Ps' timers that their Ms have left late,
     * and one G from the global queue, so that two Gs readying each
     * other cannot starve it. */
    /* Relaxed: our own counter (atomic only for sysmon's reads). */
    if (atomic_load_explicit(&pp->schedtick, memory_order_relaxed) %
            GMP_GLOBAL_TICK == 0) {
        rescue_timers(s, pp, &now);
        if (atomic_load_explicit(&s->runqsize, memory_order_relaxed) > 0) {
            gmp__lock(&s->lock);
            gp = gmp__globrunqget(s, pp, 1);
            gmp__unlock(&s->lock);
            *inherit = false;
        }
    }
    if (!gp)
        gp = gmp__runqget(pp, inherit);
    if (!gp)
        gp = findrunnable(s, mp, inherit);
    if (gp && mp->spinning)
        resetspinning(s, mp);
    if (GMP_UNLIKELY(gp && gp->locked)) {
        startlockedm(s, mp, gp);    /* its own M runs it; we park */
        gp = NULL;
        goto top;
    }
    return gp;
}

/* The next G for mp to run: its locked G, once an M hands it back
 * (stoplockedm), else pickg's. Returns NULL when the runtime exits.
 * Context: g0, mp holds a P unless it has a locked G. */
static struct g *schedule(struct schedt *s, struct m *mp, bool *inherit)
{
    /* The M of a locked G runs nothing else (see "Locked threads"). */
    if (GMP_UNLIKELY(mp->lockedg)) {
        /* Relaxed: only this M stores its own P there. */
        if (mp->p && mp->p == atomic_load_explicit(&s->stwp,
                                                   memory_order_relaxed))
            gmp__throw("the goroutine that stopped the world blocked");
        return stoplockedm(s, mp, inherit);
    }
    return pickg(s, mp, inherit);
}

/* ---- Switching ---------------------------------------------------------- */

/* First frame of every G (entered through gmp__ctx_start). It never
 * returns: when fn does, it switches to g0 for the last time with SW_EXIT.
 * That switch is written out here rather than through gmp__mcall so that
 * exactly one frame, this one, is left unreturned on the G's stack: TSan's
 * shadow call stack of the fiber (reused by the next G on this stack) is
 * popped by hand for it, and would otherwise grow with every G. */
static void gentry(void *arg, void *g0sp)
{
    struct g *gp = arg;
    struct m *mp = gmp__getm();
    mp->g0ctx.sp = g0sp;
    GMP_ASAN_FINISH(NULL, &mp->g0_stack_bottom, &mp->g0_stack_size);

    gp->fn(gp->arg);
    if (GMP_UNLIKELY(gp->ext))
        gmp__gext_exit(gp);         /* key destructors, unlock (key.c) */

    mp = gmp__getm();               /* fn may have moved us to another M */
    mp->swreason = SW_EXIT;
    GMP_ASAN_START(NULL, mp->g0_stack_bottom, mp->g0_stack_size);
#ifdef GMP_TSAN
    GMP_TSAN_FUNC_EXIT();
#endif
    GMP_TSAN_SWITCH(mp->g0_tsan_fiber);
    gmp__ctx_jump(mp->g0ctx.sp);
    gmp__throw("dead goroutine resumed");
}

/* Finishes a switch into gp, on gp's stack: from is the stack pointer of
 * the context that switched to us. That is g0, whose place it is, or a G
 * that parked by handing the M straight to us (gmp__park_direct): then
 * its park completes here, now that it is off its stack. Context: gp,
 * just resumed. */
static inline void resumed(struct g *gp, void *from)
{
    struct m *now = gmp__getm();
    struct g *prev = now->directfrom;
    if (GMP_LIKELY(!prev)) {
        now->g0ctx.sp = from;
        GMP_ASAN_FINISH(gp->asan_fake, &now->g0_stack_bottom,
                        &now->g0_stack_size);
        return;
    }
    GMP_ASAN_FINISH(gp->asan_fake, NULL, NULL);
    now->directfrom = NULL;
    /* Relaxed: a plain store; atomic for gmp_dump and gmp_stacks_foreach,
     * which read it without stopping the G (trace.c). */
    __atomic_store_n(&prev->ctx.sp, from, __ATOMIC_RELAXED);
    if (now->swreason == SW_YIELD)
        return;                     /* queued already (yield_direct) */
    prev->m = NULL;
    /* Release: as in gmp__mloop's SW_PARK. */
    atomic_store_explicit(&prev->status, G_WAITING, memory_order_release);
    if (now->waitunlockf && !now->waitunlockf(prev, now->waitlock)) {
        /* The wait was called off: prev runs next. Relaxed: as above. */
        gmp__trace_gounblock(now->p, prev);
        atomic_store_explicit(&prev->status, G_RUNNABLE,
                              memory_order_relaxed);
        gmp__metrics_runnable(prev);
        gmp__runqput(now->sched, now->p, prev, true);
    }
}

/* Switches from gp (running on mp) to mp's g0, which acts on why. Returns
 * when gp is resumed, possibly on another M: re-read gmp__getm() after.
 * Context: any G (gp is the caller). */
void gmp__mcall(struct m *mp, struct g *gp, enum swreason why)
{
    mp->swreason = why;
    GMP_ASAN_START(&gp->asan_fake, mp->g0_stack_bottom, mp->g0_stack_size);
    GMP_TSAN_SWITCH(mp->g0_tsan_fiber);
    resumed(gp, gmp__ctx_jump(mp->g0ctx.sp));
}

/* gp is mp's G from now on, on pp: the bookkeeping of every start
 * (execute and the two direct switches). inherit: gp runs out the time
 * slice of the G before it (runnext's), schedtick stays. Context: mp,
 * owner of pp. */
static inline void run_on(struct m *mp, struct p *pp, struct g *gp,
                          bool inherit)
{
    mp->curg = gp;
    gp->m = mp;
    /* Relaxed: informational (gmp_dump, assertions). */
    atomic_store_explicit(&gp->status, G_RUNNING, memory_order_relaxed);
    gmp__metrics_start(pp, gp);
    /* Relaxed, both: owner-written; sysmon only compares. A new G's slice
     * starts unmarked. */
    atomic_store_explicit(&pp->preempt, 0, memory_order_relaxed);
    if (!inherit)
        gmp__owner_inc(&pp->schedtick, memory_order_relaxed);
    gmp__trace_gostart(pp, gp);
}

/* Switches from gp straight to next (run_on done), which completes gp's
 * switch for why (SW_PARK or SW_YIELD) in resumed(); returns when gp is
 * resumed. Context: gp, on mp. */
static inline void switch_direct(struct m *mp, struct g *gp, struct g *next,
                                 enum swreason why)
{
    mp->swreason = why;
    mp->directfrom = gp;
    GMP_ASAN_START(&gp->asan_fake, next->stk->lo,
                   (size_t)(gstack_hi(next->stk) - next->stk->lo));
    GMP_TSAN_SWITCH(next->stk->tsan_fiber);
    resumed(gp, gmp__ctx_jump_ret(next->ctx.sp));
}

/* gopark's fast path: when pp's runnext holds a G that has run before,
 * which schedule() would pick next anyway (with the time slice it
 * inherits), switch gp straight to it instead of through g0: one stack
 * switch instead of two, and no trip through the scheduler loop. gp's
 * park (waiting status, unlock callback) completes on the other side,
 * in resumed(), once gp is off its stack. Declines, doing nothing, when
 * schedule() could choose differently: the runtime is stopping, this is
 * a tick on which the global queue gets its turn, or a timer here is due.
 * Returns whether gp
 * parked (and has been resumed since). Context: gp, on mp, holding a P;
 * mp->waitunlockf/waitlock set. */
bool gmp__park_direct(struct m *mp, struct g *gp)
{
    struct schedt *s = mp->sched;
    struct p *pp = mp->p;
    /* Relaxed, all four: as in schedule(). A locked G's M runs no
     * other G. */
    if (gmp__exiting(s) ||
        atomic_load_explicit(&s->stopping, memory_order_relaxed) ||
        mp->lockedg ||
        (atomic_load_explicit(&pp->schedtick, memory_order_relaxed) %
                 GMP_GLOBAL_TICK == 0 &&
         atomic_load_explicit(&s->runqsize, memory_order_relaxed) > 0))
        return false;
    /* Nor when a timer here is due: schedule() runs it first. */
    if (gmp__timer_due(pp))
        return false;
    /* Acquire: as in gmp__runqget, the G was published by the exchange
     * that put it there. */
    struct g *next = atomic_load_explicit(&pp->runnext, memory_order_acquire);
    if (!next)
        return false;
    /* Take it before looking inside: until then a thief may be starting
     * it (and binding its stack) on another M. */
    if (pp->solo)
        /* Relaxed: nobody else writes a solo P's runnext (runq.c). */
        atomic_store_explicit(&pp->runnext, NULL, memory_order_relaxed);
    else if (!atomic_compare_exchange_strong_explicit(
                 &pp->runnext, &next, NULL, memory_order_acquire,
                 memory_order_relaxed))
        return false;               /* a thief took it */
    if (!next->stk || next->locked) {
        /* Never run: g0 binds its stack; or locked to another M, which
         * schedule() hands it to. Back where it was; only the
         * owner puts into runnext, so the slot is still empty. Release:
         * as in gmp__runqput. */
        atomic_store_explicit(&pp->runnext, next, memory_order_release);
        return false;
    }
    gmp__trace_goblock(pp, gp->waitreason);
    run_on(mp, pp, next, true);     /* inheriting the time slice */
    switch_direct(mp, gp, next, SW_PARK);
    return true;
}

/* gmp_yield's fast path on a solo P (procs = 1): what gosched_m and
 * pickg would do, done on gp's stack with one switch, straight to the G
 * they would pick, instead of two through g0. gp goes to the global
 * queue's tail before it has left its stack, which only a solo P allows:
 * no other M can run a G until this one gives the P up, and gp's stack
 * pointer is stored (resumed) before it can. Declines, doing nothing,
 * where g0 has more to do than queue gp and run the next G: the runtime
 * is stopping, gp is locked to mp, a timer here is due, the 61st tick
 * (pickg's turn for other Ps' timers), or the next G has never run or
 * is locked to another M. Returns whether gp yielded (and has been
 * resumed since). Context: gp, on mp, holding a solo P. */
static bool yield_direct(struct m *mp, struct g *gp)
{
    struct schedt *s = mp->sched;
    struct p *pp = mp->p;
    /* Relaxed, all four: as in gmp__park_direct. */
    if (gmp__exiting(s) ||
        atomic_load_explicit(&s->stopping, memory_order_relaxed) ||
        mp->lockedg ||
        atomic_load_explicit(&pp->schedtick, memory_order_relaxed) %
                GMP_GLOBAL_TICK == 0)
        return false;
    if (gmp__timer_due(pp))
        return false;
    bool inherit = false;
    struct g *next = gmp__runqpeek_solo(pp);
    gmp__lock(&s->lock);
    if (!next) {
        /* What gmp__globrunqget hands out first. */
        next = s->runq[GQ_SPILLED].head;
        if (!next)
            next = s->runq[GQ_FIFO].head;
    }
    if (!next || !next->stk || next->locked) {
        gmp__unlock(&s->lock);
        return false;
    }
    gmp__trace_gostop(pp, TEV_GOSCHED);
    gp->m = NULL;
    /* Relaxed: informational; the queue's lock orders the handover. */
    atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
    gmp__metrics_runnable(gp);
    gmp__globrunqput(s, gp);
    if (gmp__runqpeek_solo(pp))
        (void)gmp__runqget(pp, &inherit);   /* next, peeked above */
    else
        (void)gmp__globrunqget(s, pp, 0);   /* next, and a batch behind */
    gmp__unlock(&s->lock);
    run_on(mp, pp, next, inherit);
    switch_direct(mp, gp, next, SW_YIELD);
    return true;
}

/* Here rather than in g.c so that it reads the M straight from TLS and
 * gmp__mcall inlines: the yield path is a few nanoseconds long. Reading
 * TLS inline is safe only before the switch; gmp__mcall re-reads it
 * through the noinline gmp__getm afterwards. */
void gmp_yield(void)
{
    struct m *mp = gmp__tls_m;
    if (!mp || !mp->curg || !mp->p) {  /* not a G, or inside a syscall */
        sched_yield();
        return;
    }
    if (mp->p->solo && yield_direct(mp, mp->curg))
        return;
    gmp__mcall(mp, mp->curg, SW_YIELD);
}

/* Runs gp on mp until a G switches back to g0; returns that G (gp, or one
 * it parked straight into). Context: g0, mp holds a P. */
static struct g *execute(struct schedt *s, struct m *mp, struct g *gp,
                         bool inherit)
{
    struct p *pp = mp->p;
    run_on(mp, pp, gp, inherit);
    if (!gp->stk) {
        struct gstack *stk = GMP_LIKELY(!gp->stksize)
                                 ? gmp__stackalloc(s, pp)
                                 : gmp__stackalloc_own(gp->stksize);
        if (GMP_UNLIKELY(!stk))
            gmp__throw("out of memory: cannot allocate a goroutine stack");
        gmp__ctx_make(&gp->ctx, gstack_hi(stk), gentry, gp);
        /* Release: a dump or gmp_stacks_foreach on another thread that
         * loads this pointer (acquire) must find the record's bounds. */
        __atomic_store_n(&gp->stk, stk, __ATOMIC_RELEASE);
    }
    /* Relaxed: a hint for the exit protocol (lifecycle.c), which decides
     * under sched.lock and tolerates a stale value. */
    atomic_store_explicit(&mp->ing, 1, memory_order_relaxed);
#ifdef GMP_ASAN
    void *fake = NULL;
    GMP_ASAN_START(&fake, gp->stk->lo,
                   (size_t)(gstack_hi(gp->stk) - gp->stk->lo));
#endif
    GMP_TSAN_SWITCH(gp->stk->tsan_fiber);
    /* What comes back is the stack pointer of the G that switched to g0,
     * stored only now that it has left its stack. That is gp, or another
     * G that gp (or a successor) handed the M to directly
     * (gmp__park_direct): mp->curg. */
    void *sp = gmp__ctx_jump(gp->ctx.sp);
    gp = mp->curg;
    /* Relaxed: as in resumed. */
    __atomic_store_n(&gp->ctx.sp, sp, __ATOMIC_RELAXED);
#ifdef GMP_ASAN
    GMP_ASAN_FINISH(fake, NULL, NULL);
#endif
    atomic_store_explicit(&mp->ing, 0, memory_order_relaxed);
    mp->curg = NULL;
    return gp;
}

/* gmp_yield (or a preemption) of a locked G: it must come back on this M.
 * When nothing else waits here or globally, it just runs on (what the
 * yield would come to); else it goes to the global queue, and mp hands
 * its P off and waits until an M that takes gp hands a P back
 * (stoplockedm). Out of line: inlined, it cost the yield path of every
 * other G registers in gmp__mloop. Context: g0, mp->lockedg == gp, mp
 * holds a P. */
static __attribute__((noinline)) struct g *
gosched_locked(struct schedt *s, struct m *mp, struct g *gp, bool *inherit)
{
    struct p *pp = mp->p;
    int64_t now = 0;
    gmp__checktimers(pp, &now);
    /* Relaxed: hints; a G queued a moment later waits for the next
     * yield, as it would behind a G that did not yield. Once exiting is
     * set the M must leave at this scheduling point (stoplockedm returns
     * NULL), as gosched_m's would. */
    if (gmp__runqempty(pp) &&
        atomic_load_explicit(&s->runqsize, memory_order_relaxed) == 0 &&
        !gmp__exiting(s) &&
        !atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
        *inherit = false;           /* a new time slice */
        return gp;
    }
    gp->m = NULL;
    /* Relaxed: informational; the queue's lock orders the handover. */
    atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
    gmp__metrics_runnable(gp);
    gmp__lock(&s->lock);
    gmp__globrunqput(s, gp);
    gmp__unlock(&s->lock);
    return stoplockedm(s, mp, inherit);
}

/* gmp_yield on g0: gp goes to the global queue's tail. When the local queue
 * is empty, schedule() would go straight to the global queue anyway, so
 * the batch is taken under the same lock. */
static struct g *gosched_m(struct schedt *s, struct m *mp, struct g *gp,
                           bool *inherit)
{
    struct p *pp = mp->p;
    /* Relaxed, both: see struct schedt. The goroutine holding the world
     * runs on: nothing else may run until it starts the world again. */
    if (GMP_UNLIKELY(atomic_load_explicit(&s->stopping,
                                          memory_order_relaxed)) &&
        pp == atomic_load_explicit(&s->stwp, memory_order_relaxed)) {
        *inherit = true;
        return gp;
    }
    if (GMP_UNLIKELY(mp->lockedg))
        return gosched_locked(s, mp, gp, inherit);
    struct g *next = NULL;
    gp->m = NULL;
    /* Relaxed: informational; the queue's lock orders the handover. */
    atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
    gmp__metrics_runnable(gp);
    /* Gs that only yield never reach schedule(): due timers run here. */
    int64_t now = 0;
    gmp__checktimers(pp, &now);
    /* On the fairness turn (pickg, one schedule in 61) with the global
     * queue empty, gp would head it and be handed straight back, ahead of
     * the local work it yielded to: a sleeper that a due timer just
     * readied into runnext would wait a second yield (an interpreter's
     * count hook, one more poll). Behind every local G, with nothing
     * queued globally, is behind every runnable G. Relaxed: our own
     * counter; runqsize a hint, and a G queued globally meanwhile came
     * after the yield. */
    if (GMP_UNLIKELY(atomic_load_explicit(&pp->schedtick,
                                          memory_order_relaxed) %
                         GMP_GLOBAL_TICK == 0) &&
        atomic_load_explicit(&s->runqsize, memory_order_relaxed) == 0 &&
        !gmp__runqempty(pp)) {
        gmp__runqput(s, pp, gp, false);
        return pickg(s, mp, inherit);
    }
    gmp__lock(&s->lock);
    gmp__globrunqput(s, gp);
    /* Relaxed: see struct schedt; stopping is written under this lock. */
    if (!gmp__exiting(s) &&
        !atomic_load_explicit(&s->stopping, memory_order_relaxed) &&
        atomic_load_explicit(&pp->runnext, memory_order_relaxed) == NULL &&
        atomic_load_explicit(&pp->runqhead, memory_order_relaxed) ==
            atomic_load_explicit(&pp->runqtail, memory_order_relaxed))
        next = gmp__globrunqget(s, pp, 0);
    gmp__unlock(&s->lock);
    if (next) {
        if (GMP_UNLIKELY(next->locked)) {
            startlockedm(s, mp, next);  /* its own M runs it; we park */
            return pickg(s, mp, inherit);
        }
        *inherit = false;           /* a new time slice, as from schedule() */
        return next;
    }
    return pickg(s, mp, inherit);   /* mp has no locked G: checked above */
}

/* A G finished: free its stack to pp's cache and the G to the free list.
 * Context: g0, owner of pp. */
static void goexit0(struct schedt *s, struct m *mp, struct g *gp)
{
    struct p *pp = mp->p;
    /* Relaxed: informational. */
    atomic_store_explicit(&gp->status, G_DEAD, memory_order_relaxed);
    /* Relaxed, as dumps read it. Cleared here, not in gmp__newg: only a
     * goroutine that set one pays. */
    if (GMP_UNLIKELY(gp->label))
        __atomic_store_n(&gp->label, NULL, __ATOMIC_RELAXED);
    /* Frames the G left behind stay poisoned; the next G on this stack
     * must not trip over them. */
    GMP_ASAN_UNPOISON(gp->ctx.sp,
                      (size_t)(gstack_hi(gp->stk) - (char *)gp->ctx.sp));
    struct gstack *stk = gp->stk;
    /* Relaxed: a reader that still sees a slot's record reads bounds that
     * never change. A stack of the G's own is unmapped, record and all:
     * the pointer goes first, so that a collector that has this thread
     * suspended sees either both or neither (the fence: on this thread,
     * in this order, for a signal handler). */
    __atomic_store_n(&gp->stk, NULL, __ATOMIC_RELAXED);
    atomic_signal_fence(memory_order_seq_cst);
    gmp__stackfree(s, pp, stk);
    gp->stksize = 0;                /* the next G here has the runtime's */
    gp->m = NULL;
    /* Release: see gmp__live_goroutines for the order readers rely on. */
    gmp__owner_inc(&pp->nexited, memory_order_release);
    /* Relaxed, both: see struct schedt. Cleared before the descriptor can
     * be reused, so a later G in it never looks like main. */
    bool wasmain = gp == atomic_load_explicit(&s->maing, memory_order_relaxed);
    if (GMP_UNLIKELY(wasmain))
        atomic_store_explicit(&s->maing, NULL, memory_order_relaxed);
    gmp__gfput(s, pp, gp);
    if (GMP_UNLIKELY(wasmain)) {
        /* Relaxed: see struct schedt; gmp_main's thread learns of the
         * exit (and sees what main did) through main_done. */
        atomic_store_explicit(&s->exiting, 1, memory_order_relaxed);
        gmp__wake_idle_ms(s);
        gmp__notewakeup(&s->main_done);
    }
}

/* ---- Stopping the world (gmp_stop_world) -------------------------------- */

/*
 * Go's stopTheWorld, for a host: a collector that must see every goroutine
 * at rest, a debugger. The stopper (a goroutine, which keeps its P, or a
 * plain thread) sets sched.stopping and counts in stopwait the Ps not yet
 * stopped; it stops at once every idle P (taken off the idle list) and
 * every P whose M is in a system call (by the CAS from P_SYSCALL that
 * sysmon's retake uses), and marks the others for preemption, signal
 * included. Each M holding a P stops it at its next scheduling point
 * (gcstopm: P_STOPPED, stopwait down by one, the M parks), and so does a
 * P handed off meanwhile (handoffp). The stopper sleeps on stopnote,
 * waking every 100 us to stop Ps that entered a system call since and to
 * mark the running ones again (a mark is cleared when a G starts), until
 * stopwait is 0. From then on no goroutine runs but the stopper: an M
 * leaving a system call finds its P stopped and no idle one, queues its
 * G and parks; what a timer, the poller or a plain thread readies waits
 * in a queue.
 *
 * gmp_start_world clears the flag and gives each stopped P to an M if it
 * has work, else to the idle list, then wakes spinners for the rest.
 *
 * Costs: a relaxed load of a flag on the line that holds `exiting`,
 * which the same scheduling points read, and nothing on the system-call
 * path (the stopper's 100 us rounds find Ps that enter one late). The
 * stopping goroutine runs with preemption disabled; a yield returns at
 * once; blocking or exiting while it holds the world is a fatal error
 * (nothing else could run to wake it).
 */

#define STOP_ROUND_NS 100000        /* the stopper's re-mark period */

/* Stops pp, which its owner is giving up (it holds no M). Context:
 * sched.lock held, s->stopping set. */
static void stop_p_locked(struct schedt *s, struct p *pp)
{
    /* Relaxed: a hint for thieves; the stopper counts under the lock. */
    atomic_store_explicit(&pp->status, P_STOPPED, memory_order_relaxed);
    if (--s->stopwait == 0)
        gmp__notewakeup(&s->stopnote);
}

/* A stop is wanted: stops mp's P and parks mp until the world starts
 * again and hands it a P (or the runtime exits). Returns false, doing
 * nothing, if the stop has ended meanwhile. Context: g0, mp holds a P. */
static bool gcstopm(struct schedt *s, struct m *mp)
{
    struct p *pp = mp->p;
    /* Relaxed: only this M stores its own P there. */
    if (GMP_UNLIKELY(pp == atomic_load_explicit(&s->stwp,
                                                memory_order_relaxed)))
        gmp__throw("the goroutine that stopped the world blocked");
    gmp__lock(&s->lock);
    /* Relaxed: under the lock that writes it. */
    if (!atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
        gmp__unlock(&s->lock);
        return false;
    }
    if (mp->spinning) {
        mp->spinning = false;
        /* Relaxed: nothing is published; nobody can run to need it. */
        atomic_fetch_sub_explicit(&s->nmspinning, 1, memory_order_relaxed);
    }
    releasep(mp);
    stop_p_locked(s, pp);
    gmp__unlock(&s->lock);
    stopm(s, mp);
    return true;
}

/* Stops every P in a system call and marks every running one, but own.
 * Returns stopwait. Context: the stopper, sched.lock held. */
static int stop_round_locked(struct schedt *s, struct p *own)
{
    for (int i = 0; i < gmp__procs(s); i++) {
        struct p *pp = &s->allp[i];
        if (pp == own)
            continue;
        int st = P_SYSCALL;
        int64_t t0 = gmp__trace_now();
        /* Acquire: as sysmon's retake; the M in the call will not get
         * the P back. */
        if (atomic_compare_exchange_strong_explicit(&pp->status, &st,
                                                    P_STOPPED,
                                                    memory_order_acquire,
                                                    memory_order_relaxed)) {
            gmp__trace_retaken(pp, t0);
            stop_p_locked(s, pp);
        }
        else if (st == P_RUNNING)
            gmp__preemptone(s, pp);
    }
    return s->stopwait;
}

/* Who calls: 1 a goroutine with its P, 0 a plain thread, -1 neither (g0,
 * a host hook on g0, a goroutine inside a system-call bracket). */
static int stw_caller(struct m *mp)
{
    if (!mp)
        return 0;
    return mp->curg && mp->p && gmp__on_gstack(mp) ? 1 : -1;
}

/* Stops the world for gp (on own), or for the plain thread tid; the
 * caller holds worldsema. 0 once every P but own is stopped, GMP_EPERM
 * if the runtime exits meanwhile. Context: gp, or a thread without a P. */
static int stop_world(struct schedt *s, struct g *gp, struct p *own,
                      int32_t tid)
{
    gmp__lock(&s->lock);
    if (gmp__exiting(s)) {
        gmp__unlock(&s->lock);
        return GMP_EPERM;
    }
    /* Relaxed, both: under the lock; scheduling points read them as
     * hints and decide under it (gcstopm, findrunnable, handoffp). */
    atomic_store_explicit(&s->stopping, 1, memory_order_relaxed);
    atomic_store_explicit(&s->stwp, own, memory_order_relaxed);
    s->stwg = gp;
    s->stwtid = tid;
    s->stopwait = gmp__procs(s) - (own ? 1 : 0);
    for (struct p *pp; (pp = pidleget(s));)
        stop_p_locked(s, pp);
    int left = stop_round_locked(s, own);
    gmp__unlock(&s->lock);

    bool waking = left > 0;         /* the last stop will wake us */
    while (left > 0) {
        bool woken = gmp__notetsleep(&s->stopnote, STOP_ROUND_NS);
        gmp__lock(&s->lock);
        left = woken ? s->stopwait : stop_round_locked(s, own);
        /* The exit wakes every M; none stops its P after this, as each
         * decides under the lock. */
        bool exiting = gmp__exiting(s);
        if (exiting)
            atomic_store_explicit(&s->stopping, 0, memory_order_relaxed);
        gmp__unlock(&s->lock);
        if (exiting) {
            gmp__noteclear(&s->stopnote);
            return GMP_EPERM;
        }
    }
    if (waking) {                   /* woken exactly once: at stopwait 0 */
        gmp__notesleep(&s->stopnote);
        gmp__noteclear(&s->stopnote);
    }
    return 0;
}

/* Starts the stopped Ps again. Context: sched.lock held, which this
 * releases; worldsema held, which the caller releases after. */
static void start_world(struct schedt *s)
{
    struct p *start[GMP_MAXPROCS];
    int nstart = 0;
    s->stwheld = false;
    s->stwg = NULL;
    /* Relaxed, both: under the lock, as in stop_world. */
    atomic_store_explicit(&s->stopping, 0, memory_order_relaxed);
    atomic_store_explicit(&s->stwp, NULL, memory_order_relaxed);
    for (int i = 0; i < gmp__procs(s); i++) {
        struct p *pp = &s->allp[i];
        /* Relaxed: every stopped P is ours now; the lock orders the rest. */
        if (atomic_load_explicit(&pp->status, memory_order_relaxed) !=
            P_STOPPED)
            continue;
        atomic_store_explicit(&pp->status, P_IDLE, memory_order_relaxed);
        if (gmp__runqempty(pp))
            pidleput(s, pp);
        else
            start[nstart++] = pp;
    }
    gmp__unlock(&s->lock);
    for (int i = 0; i < nstart; i++)
        startm(s, start[i], false);
    /* Work queued globally while stopped: the idle Ps must look. */
    gmp__storeload_fence();
    gmp__wakep(s);
}

int gmp_stop_world(void)
{
    struct m *mp = gmp__getm();
    int who = stw_caller(mp);
    /* Acquire: a published runtime's fields are initialised. */
    struct schedt *s = atomic_load_explicit(&gmp__sched, memory_order_acquire);
    if (who < 0 || !s || (mp && mp->sched != s))
        return GMP_EPERM;
    int32_t tid = who ? 0 : (int32_t)gettid();
    gmp__lock(&s->lock);
    bool mine = s->stwheld && (who ? s->stwg == mp->curg
                                   : !s->stwg && s->stwtid == tid);
    gmp__unlock(&s->lock);
    if (mine)
        return GMP_EBUSY;           /* it would wait for itself */
    gmp_mutex_lock(&s->worldsema);
    mp = gmp__getm();               /* the lock may have moved us */
    struct g *gp = who ? mp->curg : NULL;
    if (gp)
        gp->preemptoff++;           /* no switch until we stop: own is ours */
    int err = stop_world(s, gp, gp ? mp->p : NULL, tid);
    if (err) {
        if (gp)
            gp->preemptoff--;
        gmp_mutex_unlock(&s->worldsema);
        return err;
    }
    gmp__lock(&s->lock);
    s->stwheld = true;
    gmp__unlock(&s->lock);
    return 0;
}

int gmp_start_world(void)
{
    struct m *mp = gmp__getm();
    int who = stw_caller(mp);
    /* Acquire: as in gmp_stop_world. */
    struct schedt *s = atomic_load_explicit(&gmp__sched, memory_order_acquire);
    if (who < 0 || !s)
        return GMP_EPERM;
    struct g *gp = who ? mp->curg : NULL;
    gmp__lock(&s->lock);
    if (!s->stwheld ||
        (gp ? s->stwg != gp : s->stwg || s->stwtid != (int32_t)gettid())) {
        gmp__unlock(&s->lock);
        return GMP_EPERM;           /* not stopped, or not by the caller */
    }
    start_world(s);
    gmp_mutex_unlock(&s->worldsema);
    if (gp)
        gmp_preempt_enable();       /* a preemption due meanwhile: now */
    return 0;
}

/* ---- Resizing ----------------------------------------------------------- */

/* Takes pp out of use (Go's (*p).destroy, in part): its runnable Gs go to
 * the global queue, runnext first, and its timers to P `to`. Its caches of
 * dead Gs, stacks, waiter records and ids, and its counters, stay: they
 * are its own again if it comes back, and teardown frees them. Context:
 * the world stopped, sched.lock held. */
static void p_retire(struct schedt *s, struct p *pp, struct p *to)
{
    bool inherit;
    for (struct g *gp; (gp = gmp__runqget(pp, &inherit));)
        gmp__globrunqput(s, gp);
    gmp__timers_move(pp, to);
    pp->solo = false;
    /* Relaxed: stopped, no M; see enum pstatus. */
    atomic_store_explicit(&pp->status, P_DEAD, memory_order_relaxed);
}

int gmp__procresize(struct schedt *s, int n)
{
    if (n < 1 || n > s->maxprocs)
        return GMP_EINVAL;
    if (gmp_mutex_trylock(&s->worldsema) != 0)
        return GMP_EBUSY;           /* a host holds the world; next time */
    int err = stop_world(s, NULL, NULL, (int32_t)gettid());
    if (err) {
        gmp_mutex_unlock(&s->worldsema);
        return err;
    }
    gmp__lock(&s->lock);
    int old = gmp__procs(s);
    for (int i = n; i < old; i++)
        p_retire(s, &s->allp[i], &s->allp[i % n]);
    for (int i = old; i < n; i++)
        /* Relaxed: as in p_retire; start_world idles or starts it. */
        atomic_store_explicit(&s->allp[i].status, P_STOPPED,
                              memory_order_relaxed);
    for (int i = 0; i < n; i++)
        s->allp[i].solo = n == 1;
    /* Relaxed: see gmp__procs; every P is stopped, and each M that takes
     * one takes it under this lock. */
    atomic_store_explicit(&s->procs, n, memory_order_relaxed);
    gmp__steal_order(s);
    GMP_TRACE_EV(NULL, TEV_GOMAXPROCS, (uint64_t)n, 0);
    start_world(s);
    gmp_mutex_unlock(&s->worldsema);
    return 0;
}

/* ---- System calls (the g0 side; syscall.c has the rest) ----------------- */

/* Hands off pp, retaken from an M blocked in a system call (Go's
 * handoffp): to an M at once when it has work, or when no M is spinning
 * or idle to notice work that comes later; else to the idle list.
 * Context: any thread without locks (sysmon), owning pp by its CAS. */
void gmp__handoffp(struct schedt *s, struct p *pp)
{
    /* Relaxed: a statistic (trace.c); handoffs are rare. */
    atomic_fetch_add_explicit(&s->nhandoff, 1, memory_order_relaxed);
    handoffp(s, pp);
}

/* gmp__handoffp without the statistic: also a locked M giving up its P
 * (stoplockedm). Context: any thread without locks, owning pp (P_IDLE,
 * no M). */
static void handoffp(struct schedt *s, struct p *pp)
{
    /* Relaxed: a hint; an M started for pp after a stop began stops at
     * its first scheduling point, and the idle list is checked below. */
    if (GMP_UNLIKELY(atomic_load_explicit(&s->stopping,
                                          memory_order_relaxed))) {
        gmp__lock(&s->lock);
        /* Relaxed: under the lock that writes it. */
        if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
            stop_p_locked(s, pp);
            gmp__unlock(&s->lock);
            return;
        }
        gmp__unlock(&s->lock);
    }
    /* Relaxed: hints; the lock below settles the global queue. */
    if (!gmp__runqempty(pp) ||
        atomic_load_explicit(&s->runqsize, memory_order_relaxed) != 0) {
        startm(s, pp, false);
        return;
    }
    int32_t zero = 0;
    /* Relaxed: as in gmp__wakep. */
    if (atomic_load_explicit(&s->nmspinning, memory_order_relaxed) +
                atomic_load_explicit(&s->npidle, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong_explicit(&s->nmspinning, &zero, 1,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
        startm(s, pp, true);
        return;
    }
    gmp__lock(&s->lock);
    /* Relaxed: under the lock that guards it. */
    if (atomic_load_explicit(&s->runqsize, memory_order_relaxed) != 0) {
        gmp__unlock(&s->lock);
        startm(s, pp, false);
        return;
    }
    /* Relaxed: under the lock that writes it. */
    if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
        stop_p_locked(s, pp);
        gmp__unlock(&s->lock);
        return;
    }
    pidleput(s, pp);                /* already P_IDLE, by sysmon's CAS */
    gmp__unlock(&s->lock);
    /* As findrunnable after idling a P: work published by a submitter that
     * saw no P idle yet must not wait for its own P's M. */
    if (work_after_idling(s, false))
        gmp__wakep(s);
}

/* A G leaving a system call whose P was taken: takes an idle P for mp if
 * there is one. Context: the G, mp holds no P. */
bool gmp__exitsyscall_pidle(struct schedt *s, struct m *mp)
{
    /* Relaxed: a hint that spares the lock when no P is idle. */
    if (atomic_load_explicit(&s->npidle, memory_order_relaxed) == 0)
        return false;
    gmp__lock(&s->lock);
    struct p *pp = pidleget(s);
    gmp__unlock(&s->lock);
    if (!pp)
        return false;
    acquirep(mp, pp);
    return true;
}

/* gp left its system call and found no P (Go's exitsyscall0): run it on
 * an idle P if one appeared, else queue it globally and park mp until it
 * is given a P. Returns the next G to run, NULL when the runtime exits.
 * Context: g0, mp holds no P. */
static struct g *exitsyscall0(struct schedt *s, struct m *mp, struct g *gp,
                              bool *inherit)
{
    gmp__trace_sysexit(NULL, gp);
    gp->m = NULL;
    /* Relaxed: informational; the queue's lock orders the handover. */
    atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
    gmp__metrics_runnable(gp);
    gmp__lock(&s->lock);
    struct p *pp = pidleget(s);
    if (!pp)
        gmp__globrunqput(s, gp);
    gmp__unlock(&s->lock);
    if (pp) {
        acquirep(mp, pp);
        *inherit = false;
        return gp;
    }
    /* Every P is busy (or in a syscall, which sysmon retakes when work
     * waits): one of them takes gp from the global queue; a locked gp
     * it hands back to mp (schedule: stoplockedm). */
    if (GMP_UNLIKELY(mp->lockedg))
        return schedule(s, mp, inherit);
    stopm(s, mp);
    if (!mp->p)
        return NULL;                /* woken for the exit */
    return schedule(s, mp, inherit);
}

void gmp__mloop(struct m *mp)
{
    struct schedt *s = mp->sched;
    bool inherit = false;
    struct g *gp = schedule(s, mp, &inherit);
    while (gp) {
        gp = execute(s, mp, gp, inherit);
        switch (mp->swreason) {
        case SW_PREEMPT:
            /* Relaxed: a statistic. */
            gmp__owner_inc(&mp->p->npreempt, memory_order_relaxed);
            /* A preempted G goes where a yielding one does. */
            __attribute__((fallthrough));
        case SW_YIELD:
            gmp__trace_gostop(mp->p, mp->swreason == SW_PREEMPT
                                         ? TEV_GOPREEMPT : TEV_GOSCHED);
            gp = gosched_m(s, mp, gp, &inherit);
            continue;
        case SW_GOYIELD:
            /* Go's goyield: the tail of the local ring (runnext holds the
             * G we yield to), unlike gmp_yield's global queue. */
            gmp__trace_gostop(mp->p, TEV_GOSCHED);
            gp->m = NULL;
            /* Relaxed: informational; the ring publishes the G. */
            atomic_store_explicit(&gp->status, G_RUNNABLE,
                                  memory_order_relaxed);
            gmp__metrics_runnable(gp);
            gmp__runqput(s, mp->p, gp, false);
            break;
        case SW_PARK:
            /* Waiting before the callback runs: once it unlocks, a waker
             * may ready gp at once (the wait queue's lock orders it for
             * the waker). Release: a dump that sees it waiting (acquire)
             * sees its saved context and stack (trace.c). */
            gmp__trace_goblock(mp->p, gp->waitreason);
            atomic_store_explicit(&gp->status, G_WAITING,
                                  memory_order_release);
            gp->m = NULL;
            if (mp->waitunlockf && !mp->waitunlockf(gp, mp->waitlock)) {
                /* The wait was called off: run gp again at once. */
                gmp__trace_gounblock(mp->p, gp);
                inherit = true;
                continue;
            }
            break;
        case SW_EXIT:
            gmp__trace_gostop(mp->p, TEV_GOEND);
            goexit0(s, mp, gp);
            break;
        case SW_SYSCALL:
            gp = exitsyscall0(s, mp, gp, &inherit);
            continue;
        default:
            gmp__throw("g0: unknown switch reason");
        }
        gp = schedule(s, mp, &inherit);
    }
}
