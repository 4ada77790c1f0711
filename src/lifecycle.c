/*
 * lifecycle.c - starting and stopping a runtime: gmp_init, gmp_main,
 * gmp_shutdown, the configuration, and the exit protocol that frees it.
 *
 * State: one struct schedt per running runtime, published in gmp__sched
 * for threads that are not Ms. The lifecycle lock (lc_mu) serialises
 * start and stop. (What else lives outside struct schedt, and why:
 * docs/design.md, "Objects".)
 *
 * Stopping. gmp_shutdown waits for quiescence (every P idle, no queued G,
 * no live G), then sets sched.exiting and wakes every parked M; each M
 * leaves its scheduler loop, marks itself done and is joined.
 *
 * gmp_main cannot wait like that: Go's main returning ends the program
 * even while other goroutines run. Its thread is not an M (so it never
 * runs a goroutine it would have to wait for); it sleeps until the main G
 * exits, which sets sched.exiting. Then, for every M, under sched.lock:
 *   - done: it left its loop; join it.
 *   - running a G (m->ing, a hint): abandon it. It stops at that G's next
 *     scheduling point, detaches itself, and the last abandoned M to stop
 *     frees the runtime ("straggler").
 *   - otherwise it is in the scheduler on its way out: wait for it.
 * The decision and the M's own "done or abandoned?" check are both under
 * sched.lock, so each M is either joined or detached, never both; who
 * frees is decided under the same lock (nstragglers, stopper_done).
 * A later gmp_init/gmp_main waits until the stragglers are gone
 * (lc_draining).
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "runtime.h"
#include "metrics.h"
#include "exectrace.h"
#include "netpoll.h"
#include "timer.h"
#include "park.h"
#include "cgroup.h"
#include "signals.h"
#include "alloc.h"
#include "key.h"
#include "preempt.h"
#include "stack.h"

#define DEFAULT_THREADS 10000

_Atomic(struct schedt *) gmp__sched;

static pthread_mutex_t lc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lc_cv = PTHREAD_COND_INITIALIZER;
static bool lc_draining;            /* stragglers of a gmp_main remain */
static bool lc_stopping;            /* a gmp_shutdown is under way */

struct settings {
    int    procs;
    bool   procs_update;            /* procs is the default; sysmon reads
                                       the cgroup's limit again (cg) */
    struct gmp__cgroup cg;          /* version 0 unless procs_update */
    size_t stack_size;
    int    max_threads;
    bool   async_preempt;
    bool   dump_on_sigquit;
    int    schedtrace_ms;
    bool   scheddetail;
    int    stall_ms;
    bool   metrics;
    bool   keep_nofile;
    char   preempt_objects[GMP_PREEMPT_OBJECTS_MAX];
};

/* A program built against this header keeps its layout with any later
 * library: new fields take the room of reserved_ ones. */
_Static_assert(sizeof(gmp_config_t) == 128 || sizeof(void *) != 8,
               "gmp_config_t changed size");

/*
 * The open-file limit, as Go (1.19's os package) has it: a runtime that
 * parks thousands of goroutines on sockets needs more descriptors than
 * the soft RLIMIT_NOFILE that shells hand out (often 1024, which is also
 * what select(2)'s fd_set holds). So starting a runtime raises the soft
 * limit to the hard one, and stopping it puts the old soft limit back if
 * nobody changed it meanwhile. A child forked meanwhile gets the old
 * limit back before it runs a line of its own (an atfork handler), as Go
 * restores it for the programs it starts: one that execs a program
 * written for select(2) sees what it would have seen. Children started
 * by posix_spawn (and system and popen, which use it) run no atfork
 * handler and inherit the raised limit. gmp_config_t.keep_nofile_limit
 * turns all of it off.
 * nofile_raised is the soft limit we set, 0 when we set none; relaxed
 * loads and stores suffice between the runtime's own start and stop (lc_mu
 * and the stop protocol order them), and the fork handler reads them in a
 * child, single-threaded, from the memory fork copied: release/acquire
 * only so that it reads nofile_orig as written before the flag.
 */
static struct rlimit nofile_orig;
static _Atomic rlim_t nofile_raised;

static void nofile_child(void)
{
    /* Acquire: nofile_orig was written before the release store. */
    if (atomic_load_explicit(&nofile_raised, memory_order_acquire))
        setrlimit(RLIMIT_NOFILE, &nofile_orig);
}

static void nofile_raise(void)
{
    static bool atfork_done;        /* under lc_mu */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    struct rlimit up = {rl.rlim_max, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &up) != 0)
        return;                     /* as Go: the old limit stands */
    nofile_orig = rl;
    /* Release: see nofile_child. */
    atomic_store_explicit(&nofile_raised, rl.rlim_max, memory_order_release);
    if (!atfork_done)
        atfork_done = pthread_atfork(NULL, NULL, nofile_child) == 0;
}

static void nofile_restore(void)
{
    /* Relaxed: ordered by the stop protocol (see above). */
    rlim_t raised = atomic_load_explicit(&nofile_raised, memory_order_relaxed);
    struct rlimit rl;
    if (raised && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == raised)
        setrlimit(RLIMIT_NOFILE, &nofile_orig);
    atomic_store_explicit(&nofile_raised, 0, memory_order_relaxed);
}

/* The next value of key in $GMP_DEBUG (a comma-separated list of
 * key=value, as Go's GODEBUG) from the entry at p on (NULL: the first),
 * or NULL. The value runs to the next ',' or the end. */
static const char *debug_next(const char *key, const char *p)
{
    size_t klen = strlen(key);
    if (!p)
        p = getenv("GMP_DEBUG");
    for (; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, key, klen) == 0 && p[klen] == '=')
            return p + klen + 1;
    return NULL;
}

/* The first numeric value of key in $GMP_DEBUG, or def. */
static long debug_value(const char *key, long def)
{
    for (const char *v = debug_next(key, NULL); v;
         v = debug_next(key, v)) {
        char *end;
        long n = strtol(v, &end, 10);
        if (end != v && (*end == ',' || *end == '\0'))
            return n;
    }
    return def;
}

/* Copies the string value of key in $GMP_DEBUG (up to the next ',') into
 * buf. Returns whether the key is there with a value that fits. */
static bool debug_string(const char *key, char *buf, size_t cap)
{
    const char *v = debug_next(key, NULL);
    if (!v)
        return false;
    size_t len = strcspn(v, ",");
    if (len >= cap)
        return false;
    memcpy(buf, v, len);
    buf[len] = '\0';
    return true;
}

static int parse_config(const gmp_config_t *cfg, struct settings *out)
{
    gmp_config_t zero;
    out->procs_update = false;
    out->cg.version = 0;
    if (!cfg) {
        memset(&zero, 0, sizeof zero);
        cfg = &zero;
    }
    if (cfg->procs < 0 || cfg->procs > GMP_MAXPROCS)
        return GMP_EINVAL;
    if (cfg->max_threads < 0)
        return GMP_EINVAL;
    if (cfg->preempt_objects &&
        strlen(cfg->preempt_objects) >= GMP_PREEMPT_OBJECTS_MAX)
        return GMP_EINVAL;
    if (cfg->stack_size != 0 &&
        (cfg->stack_size < GMP__MIN_STACK || cfg->stack_size > GMP__MAX_STACK))
        return GMP_EINVAL;

    out->procs = cfg->procs;
    if (out->procs == 0) {
        const char *env = getenv("GMP_MAXPROCS");
        char *end;
        long v = env ? strtol(env, &end, 10) : 0;
        if (env && *env && !*end && v >= 1 && v <= GMP_MAXPROCS) {
            out->procs = (int)v;
        } else {
            /* The default: the CPUs we may use, lowered to the cgroup's
             * limit (cgroup.c) unless containermaxprocs=0. */
            int limit = 0;
            if (debug_value("containermaxprocs", 1) != 0 &&
                gmp__cgroup_open(&out->cg) == 0)
                limit = gmp__cgroup_limit(&out->cg);
            out->procs = gmp__cgroup_procs(gmp__ncpu(), limit);
            out->procs_update = out->cg.version != 0 &&
                                debug_value("updatemaxprocs", 1) != 0;
        }
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t ss = cfg->stack_size ? cfg->stack_size : GMP__DEFAULT_STACK;
    out->stack_size = (ss + page - 1) & ~(page - 1);
    out->max_threads = cfg->max_threads ? cfg->max_threads : DEFAULT_THREADS;
    out->async_preempt = !cfg->async_preempt_off &&
                         debug_value("asyncpreemptoff", 0) == 0;
    out->dump_on_sigquit = cfg->dump_on_sigquit != 0;
    long trace = debug_value("schedtrace", 0);
    out->schedtrace_ms = trace > 0 && trace <= 3600000 ? (int)trace : 0;
    out->scheddetail = debug_value("scheddetail", 0) > 0;
    long stall = debug_value("stall", 0);
    out->stall_ms = stall > 0 && stall <= 3600000 ? (int)stall : 0;
    out->metrics = cfg->sched_metrics != 0 ||
                   debug_value("schedmetrics", 0) > 0;
    out->keep_nofile = cfg->keep_nofile_limit != 0;
    /* GMP_DEBUG's list, when it has one, replaces the config's: it may
     * widen or narrow it. */
    if (!debug_string("preemptobjs", out->preempt_objects,
                      sizeof out->preempt_objects)) {
        size_t n = cfg->preempt_objects ? strlen(cfg->preempt_objects) : 0;
        if (n)
            memcpy(out->preempt_objects, cfg->preempt_objects, n);
        out->preempt_objects[n] = '\0';
    }
    return 0;
}

/* The guard below each stack: an eighth of the slot, from a page to 64
 * KiB, in whole pages. A frame that jumps past the guard lands in the
 * next stack down instead of faulting (docs/design.md, "Stacks"); a
 * bigger guard catches bigger frames, and costs no mapping (it is advice
 * or one mprotect either way), only usable stack: 16 KiB of the default
 * 128. */

/* The scheduler and its Ps. */
static void free_core(struct schedt *s)
{
    if (s->cgroup)
        gmp__free(s->cgroup, sizeof *s->cgroup);
    gmp__free(s->allp, sizeof(struct p) * (size_t)s->maxprocs);
    gmp__free(s, sizeof *s);
}

static void runtime_free(struct schedt *s)
{
    /* Set already unless start failed halfway. Relaxed: see struct
     * schedt; the stop's wake-up carries it to sysmon. */
    atomic_store_explicit(&s->exiting, 1, memory_order_relaxed);
    gmp__sysmon_stop(s);
    gmp__trace_free(s);             /* the Ms and sysmon are gone */
    /* Relaxed: as its store in runtime_new; no runtime thread is left. */
    atomic_store_explicit(&gmp__metrics_on, 0, memory_order_relaxed);
    gmp__stacks_release(s);
    gmp__sudog_release_all(s);
    gmp__preempt_teardown();
    gmp__signal_restore(GMP_SIGNAL_QUIT);
    for (int i = 0; i < s->maxprocs; i++)
        gmp__timers_free(&s->allp[i]);
    gmp__netpoll_free(s);
    gmp__gext_release_all(s);       /* before the Gs it hangs off */
    gmp__gslabs_release(s);
    for (struct m *mp = s->allm, *next; mp; mp = next) {
        next = mp->alllink;
        gmp__free(mp, sizeof *mp);
    }
    gmp__signal_restore(GMP_SIGNAL_FAULT);
    free_core(s);
    nofile_restore();
}

/* Builds a runtime into *out: 0, or the error gmp_init/gmp_main return
 * (GMP_ENOMEM, or the poller's errno for want of a descriptor). */
static int runtime_new(const struct settings *set, struct schedt **out)
{
    struct schedt *s = gmp__alloc(sizeof *s);
    if (!s)
        return GMP_ENOMEM;
    /* Relaxed: not yet published. */
    atomic_store_explicit(&s->procs, set->procs, memory_order_relaxed);
    s->cpus = gmp__ncpu();
    /* Room for every P the default may come to (sysmon, update_procs). */
    s->maxprocs = set->procs;
    if (set->procs_update && s->cpus > s->maxprocs)
        s->maxprocs = s->cpus < GMP_MAXPROCS ? s->cpus : GMP_MAXPROCS;
    s->maxmcount = set->max_threads;
    s->stack_size = set->stack_size;
    s->guard_size = gmp__guard_for(set->stack_size);
    s->schedtrace_ms = set->schedtrace_ms;
    s->scheddetail = set->scheddetail;
    s->stall_ns = (int64_t)set->stall_ms * 1000000;
    gmp__clock_setup();
    s->start_ns = gmp__nanotime();
    gmp__timers_setup();
    /* Relaxed: not yet published. */
    atomic_store_explicit(&s->coarse_ns, s->start_ns, memory_order_relaxed);
    if (!(s->allp = gmp__alloc(sizeof(struct p) * (size_t)s->maxprocs))) {
        gmp__free(s, sizeof *s);
        return GMP_ENOMEM;
    }
    /* Relaxed: not yet published. */
    atomic_store_explicit(&s->procs_default, set->procs, memory_order_relaxed);
    if (set->procs_update) {
        if (!(s->cgroup = gmp__alloc(sizeof *s->cgroup))) {
            free_core(s);
            return GMP_ENOMEM;
        }
        *s->cgroup = set->cg;
    }
    for (int i = s->maxprocs - 1; i >= 0; i--) {
        struct p *pp = &s->allp[i];
        pp->id = i;
        pp->solo = set->procs == 1;
        if (i >= set->procs) {
            pp->status = P_DEAD;
            continue;
        }
        pp->status = P_IDLE;
        pp->link = s->pidle;
        s->pidle = pp;
    }
    /* A seq_cst store, harmless: the runtime is not published yet; the
     * lifecycle lock and thread creation order it for every M. */
    s->npidle = set->procs;
    gmp__steal_order(s);
    int err = gmp__netpoll_init(s);
    if (err) {
        free_core(s);
        return err;
    }
    if ((err = gmp__signal_install(GMP_SIGNAL_FAULT)) != 0) {
        gmp__netpoll_free(s);
        free_core(s);
        return err;
    }
    if (set->dump_on_sigquit &&
        (err = gmp__signal_install(GMP_SIGNAL_QUIT)) != 0) {
        gmp__signal_restore(GMP_SIGNAL_FAULT);
        gmp__netpoll_free(s);
        free_core(s);
        return err;
    }
    gmp__preempt_setup(s, set->async_preempt, set->preempt_objects);
    /* Relaxed: no thread of this runtime exists yet; pthread_create
     * publishes it to them (metrics.h). */
    atomic_store_explicit(&gmp__metrics_on, set->metrics, memory_order_relaxed);
    *out = s;
    return 0;
}

/* The last thread out frees the runtime and lets a new one start. */
static void final_free(struct schedt *s)
{
    runtime_free(s);
    GMP_LIBC(pthread_mutex_lock)(&lc_mu);
    lc_draining = false;
    pthread_cond_broadcast(&lc_cv);
    GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
}

/* Called by every M as it leaves its scheduler loop. Context: the M's own
 * thread, on g0, holding no lock. */
void gmp__mexit(struct m *mp)
{
    struct schedt *s = mp->sched;
    bool last = false;
    gmp__thread_stopping();
    gmp__preempt_mexit(mp);         /* no preemption signal from here on */
    gmp__altstack_release(mp);
    gmp__lock(&s->lock);
    bool abandoned = mp->abandoned;
    if (abandoned) {
        s->nstragglers--;
        last = s->nstragglers == 0 && s->stopper_done;
    } else {
        mp->done = true;
    }
    gmp__unlock(&s->lock);
    gmp__setm(NULL);
    if (abandoned) {
        /* Nobody will join us; s may be freed by another straggler from
         * here on unless we are the last. */
        pthread_detach(pthread_self());
        if (last)
            final_free(s);
        return;
    }
    /* The stopper joins us before it frees s, so s outlives this. Release:
     * the stopper's acquire load sees done. */
    atomic_fetch_add_explicit(&s->exitgen, 1, memory_order_release);
    gmp__futex_wake(&s->exitgen, INT_MAX);
}

/* Stops every M: joins those that leave, abandons those running a G when
 * allowed. Returns true when the caller must free the runtime (no
 * straggler is left to do it). Context: a thread that is not an M. */
static bool stop_threads(struct schedt *s, bool abandon_running)
{
    /* Relaxed: see struct schedt; the wake-ups below carry it to parked
     * Ms. sysmon notices it by itself within 10 ms and is joined when the
     * runtime is freed; meanwhile startm refuses, under sched.lock, any M
     * it would start. */
    atomic_store_explicit(&s->exiting, 1, memory_order_relaxed);
    gmp__wake_idle_ms(s);
    for (;;) {
        /* Acquire: pairs with the release bump in gmp__mexit. */
        uint32_t gen = atomic_load_explicit(&s->exitgen, memory_order_acquire);
        bool pending = false;
        gmp__lock(&s->lock);
        for (struct m *mp = s->allm; mp; mp = mp->alllink) {
            if (mp->done || mp->abandoned)
                continue;
            /* Relaxed: a hint; a stale 0 only makes us wait a round. */
            if (abandon_running &&
                atomic_load_explicit(&mp->ing, memory_order_relaxed)) {
                mp->abandoned = true;
                s->nstragglers++;
            } else {
                pending = true;
            }
        }
        gmp__unlock(&s->lock);
        if (!pending)
            break;
        /* Wait for an M to leave; the timeout re-reads the ing hints of
         * Ms that moved into a G meanwhile. */
        gmp__futex_wait(&s->exitgen, gen, 1000000);
    }
    /* allm no longer changes: startm refuses once exiting is set. */
    for (struct m *mp = s->allm; mp; mp = mp->alllink)
        if (mp->done)
            pthread_join(mp->thread, NULL);
    gmp__lock(&s->lock);
    s->stopper_done = true;
    bool last = s->nstragglers == 0;
    gmp__unlock(&s->lock);
    return last;
}

/* Takes the lifecycle lock and waits out a draining runtime. Returns with
 * lc_mu held. */
static void lc_enter(void)
{
    GMP_LIBC(pthread_mutex_lock)(&lc_mu);
    while (lc_draining)
        pthread_cond_wait(&lc_cv, &lc_mu);
}

static int start(const gmp_config_t *cfg, bool main_mode,
                 struct schedt **out)
{
    struct settings set;
    int err = parse_config(cfg, &set);
    if (err)
        return err;
    if (gmp__getm())
        return GMP_EBUSY;           /* called from inside the runtime */
    lc_enter();
    /* Relaxed: gmp__sched changes only under lc_mu, which we hold. */
    if (atomic_load_explicit(&gmp__sched, memory_order_relaxed)) {
        GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
        return GMP_EBUSY;
    }
    gmp__hooks_set(cfg);            /* before the runtime's first byte */
    if (!set.keep_nofile)
        nofile_raise();             /* before the poller takes its fds */
    struct schedt *s;
    err = runtime_new(&set, &s);
    if (err) {
        nofile_restore();
        GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
        return err;
    }
    err = gmp__sysmon_start(s);
    if (err) {
        runtime_free(s);
        GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
        return err;
    }
    s->main_mode = main_mode;
    /* Release: a foreign thread that finds the pointer sees it built. */
    atomic_store_explicit(&gmp__sched, s, memory_order_release);
    GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
    gmp__trace_env(s);              /* GMP_TRACE: before any goroutine */
    *out = s;
    return 0;
}

/* Unpublishes s. When stragglers remain, marks the lifecycle draining
 * before they can finish (they clear it in final_free). */
static void unpublish(bool draining)
{
    GMP_LIBC(pthread_mutex_lock)(&lc_mu);
    /* Relaxed: under lc_mu; a foreign thread that still read the old
     * pointer is racing a stop, which the API leaves undefined. */
    atomic_store_explicit(&gmp__sched, NULL, memory_order_relaxed);
    lc_draining = draining;
    GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
}

int gmp_init(const gmp_config_t *cfg)
{
    struct schedt *s;
    if (gmp__getm())
        return GMP_EPERM;           /* a goroutine: the runtime is its own */
    return start(cfg, false, &s);
}

static bool quiescent(struct schedt *s)
{
    gmp__lock(&s->lock);
    /* Relaxed loads under the lock: every P that went idle did so under
     * this lock after its last count update (the counts have their own
     * order, see gmp__live_goroutines). */
    bool q = gmp__live_goroutines(s) == 0 &&
             atomic_load_explicit(&s->npidle, memory_order_relaxed) ==
                 gmp__procs(s) &&
             atomic_load_explicit(&s->runqsize, memory_order_relaxed) == 0;
    gmp__unlock(&s->lock);
    return q;
}

int gmp_shutdown(void)
{
    if (gmp__getm())
        return GMP_EPERM;           /* from a goroutine: it would wait on
                                       itself */
    GMP_LIBC(pthread_mutex_lock)(&lc_mu);
    /* Relaxed: gmp__sched changes only under lc_mu, held here. A runtime
     * stopping on its own is refused either way: by gmp__exiting or by
     * the state lc_mu guards. */
    struct schedt *s = atomic_load_explicit(&gmp__sched, memory_order_relaxed);
    if (!s || gmp__exiting(s) ||
        lc_stopping || s->main_mode) {
        GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
        return GMP_EPERM;
    }
    gmp__lock(&s->lock);
    bool held = s->stwheld;         /* gmp_stop_world's Ps never idle */
    gmp__unlock(&s->lock);
    if (held) {
        GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
        return GMP_EBUSY;
    }
    lc_stopping = true;
    GMP_LIBC(pthread_mutex_unlock)(&lc_mu);

    /* Relaxed: read by the M that idles the last P, under sched.lock. */
    atomic_store_explicit(&s->shutdown_waiting, 1, memory_order_relaxed);
    for (;;) {
        /* Acquire: pairs with the release bump in pidleput. */
        uint32_t gen = atomic_load_explicit(&s->idlegen, memory_order_acquire);
        if (quiescent(s))
            break;
        gmp__futex_wait(&s->idlegen, gen, -1);
    }
    stop_threads(s, false);
    unpublish(false);
    runtime_free(s);
    GMP_LIBC(pthread_mutex_lock)(&lc_mu);
    lc_stopping = false;
    GMP_LIBC(pthread_mutex_unlock)(&lc_mu);
    return 0;
}

int gmp_main(void (*fn)(void *), void *arg, const gmp_config_t *cfg)
{
    if (!fn)
        return GMP_EINVAL;
    struct schedt *s;
    int err = start(cfg, true, &s);
    if (err)
        return err;
    struct g *gp = gmp__newg(s, NULL, fn, arg);
    if (!gp) {
        unpublish(false);
        runtime_free(s);
        return GMP_ENOMEM;
    }
    /* Relaxed: published to the Ms by the run queue's lock below. */
    atomic_store_explicit(&s->maing, gp, memory_order_relaxed);
    gmp__trace_gocreate(NULL, gp);
    gmp__globrunqput_wake(s, gp);
    gmp__lock(&s->lock);
    bool started = s->mcount > 0;
    gmp__unlock(&s->lock);
    if (!started) {
        unpublish(false);
        runtime_free(s);
        return GMP_EAGAIN;
    }
    gmp__notesleep(&s->main_done);
    unpublish(true);
    if (stop_threads(s, true))
        final_free(s);
    return 0;
}
