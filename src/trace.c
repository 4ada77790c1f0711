/*
 * trace.c - looking inside the scheduler: gmp_stats, gmp_metrics (whose
 * timed half metrics.h records), the stall report, the schedtrace lines
 * sysmon prints (GMP_DEBUG=schedtrace=N,scheddetail=1), and gmp_dump, whose
 * core also writes the deadlock and stack-overflow reports and the dump on
 * SIGQUIT.
 *
 * Nothing here stops the world. Counters are per P (written by the owner
 * alone, relaxed) or per runtime and written rarely; a reader sums them,
 * so the fast paths share no counter line. A dump reads each goroutine's
 * descriptor and, for one that is not running, walks its stack by frame
 * pointers from its saved context: a goroutine that changes state meanwhile
 * may be shown half old, half new. Every read of a stack stays inside that
 * stack's bounds, so a torn value can end a backtrace early, never fault;
 * the sanitizers do not check those reads (GMP_UNCHECKED_READS). The
 * descriptor fields it reads are relaxed atomics, also where the slabs of
 * descriptors are walked without a lock (the fatal reports).
 *
 * The writer behind a dump needs no stdio and no allocation (struct wr):
 * the fatal reports run in a signal handler or with sched.lock held.
 * Function names come from dladdr, which knows only dynamically exported
 * symbols: in an executable linked without -rdynamic (CMake:
 * ENABLE_EXPORTS) its own functions print as file+offset, for addr2line.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"
#include "signals.h"
#include "park.h"
#include "metrics.h"
#include "exectrace.h"
#include "alloc.h"

#define MAX_FRAMES 32

/* ---- A writer that needs no stdio ------------------------------------- */

struct wr {
    void (*put)(struct wr *w, const char *s);
    FILE *f;                        /* put_file's */
    char  line[256];                /* put_line's: one write per line */
    size_t n;
};

static void put_file(struct wr *w, const char *s)
{
    fputs(s, w->f);
}

static void put_fatal(struct wr *w, const char *s)
{
    (void)w;
    gmp__fatal_puts(s);
}

/* Collects a line and writes it whole to stderr, so that lines from
 * sysmon and from the program's own threads do not interleave. */
static void put_line(struct wr *w, const char *s)
{
    for (; *s; s++) {
        if (w->n < sizeof w->line)
            w->line[w->n++] = *s;
        if (*s == '\n' || w->n == sizeof w->line) {
            ssize_t r = GMP_LIBC(write)(STDERR_FILENO, w->line, w->n);
            (void)r;                /* nowhere to report it */
            w->n = 0;
        }
    }
}

static void wputs(struct wr *w, const char *s)
{
    w->put(w, s);
}

static void wputu(struct wr *w, uint64_t n)
{
    char buf[24];
    size_t i = sizeof buf;
    buf[--i] = '\0';
    do {
        buf[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    wputs(w, buf + i);
}

static void wputi(struct wr *w, int64_t n)
{
    if (n < 0) {
        wputs(w, "-");
        wputu(w, (uint64_t)0 - (uint64_t)n);
    } else {
        wputu(w, (uint64_t)n);
    }
}

static void wputx(struct wr *w, uintptr_t n)
{
    char buf[2 + 2 * sizeof n + 1];
    size_t i = sizeof buf;
    buf[--i] = '\0';
    do {
        buf[--i] = "0123456789abcdef"[n & 15];
        n >>= 4;
    } while (n > 0);
    buf[--i] = 'x';
    buf[--i] = '0';
    wputs(w, buf + i);
}

/* name+0xoff, or file+0xoff when the address has no exported name. */
static void wsym(struct wr *w, uintptr_t pc)
{
    Dl_info di;
    if (!dladdr((void *)pc, &di)) {     /* in no object: di is not set */
        wputx(w, pc);
        return;
    }
    if (di.dli_sname && di.dli_saddr) {
        wputs(w, di.dli_sname);
        if (pc != (uintptr_t)di.dli_saddr) {
            wputs(w, "+");
            wputx(w, pc - (uintptr_t)di.dli_saddr);
        }
    } else if (di.dli_fname && di.dli_fbase) {
        const char *base = strrchr(di.dli_fname, '/');
        wputs(w, "?? (");
        wputs(w, base ? base + 1 : di.dli_fname);
        wputs(w, "+");
        wputx(w, pc - (uintptr_t)di.dli_fbase);
        wputs(w, ")");
    } else {
        wputx(w, pc);
    }
}

/* ---- Counters ---------------------------------------------------------- */

static struct schedt *cursched(void)
{
    struct m *mp = gmp__getm();
    /* Acquire: pairs with the release store that published the runtime. */
    return mp ? mp->sched
              : atomic_load_explicit(&gmp__sched, memory_order_acquire);
}

/* Runnable Gs on pp's ring and runnext. Relaxed: a snapshot. */
static uint32_t local_runnable(struct p *pp)
{
    uint32_t n = atomic_load_explicit(&pp->runqtail, memory_order_relaxed) -
                 atomic_load_explicit(&pp->runqhead, memory_order_relaxed);
    if (n > GMP_RUNQ_SIZE)
        n = 0;                      /* torn pair: the ring is in motion */
    return n + (atomic_load_explicit(&pp->runnext, memory_order_relaxed) !=
                NULL);
}

static void stats_of(struct schedt *s, gmp_stats_t *out)
{
    memset(out, 0, sizeof *out);
    /* Relaxed, all: counters read as a snapshot, each one monotonic.
     * Every P's: one a resize took out of use keeps its counts. */
    out->goroutines_created =
        (uint64_t)atomic_load_explicit(&s->nforeign, memory_order_relaxed);
    for (int i = 0; i < s->maxprocs; i++) {
        struct p *pp = &s->allp[i];
        out->goroutines_created += (uint64_t)atomic_load_explicit(
            &pp->ncreated, memory_order_relaxed);
        out->goroutines_runnable += local_runnable(pp);
        out->steals += atomic_load_explicit(&pp->nsteal, memory_order_relaxed);
        out->syscalls +=
            atomic_load_explicit(&pp->nsyscall, memory_order_relaxed);
        out->preemptions +=
            atomic_load_explicit(&pp->npreempt, memory_order_relaxed);
    }
    int64_t live = gmp__live_goroutines(s);
    out->goroutines_live = live > 0 ? (uint64_t)live : 0;
    int32_t gq = atomic_load_explicit(&s->runqsize, memory_order_relaxed);
    out->global_runq = gq > 0 ? (uint64_t)gq : 0;
    out->goroutines_runnable += out->global_runq;
    out->idle_procs =
        (uint64_t)atomic_load_explicit(&s->npidle, memory_order_relaxed);
    out->spinning_threads =
        (uint64_t)atomic_load_explicit(&s->nmspinning, memory_order_relaxed);
    out->handoffs = atomic_load_explicit(&s->nhandoff, memory_order_relaxed);
    out->netpoll_waiters =
        atomic_load_explicit(&s->netpoll_waiters, memory_order_relaxed);
    out->procs = (uint64_t)gmp__procs(s);
    gmp__lock(&s->lock);
    out->threads = (uint64_t)s->mcount;
    out->idle_threads = (uint64_t)(s->nmidle + s->nmidlelocked);
    gmp__unlock(&s->lock);
}

int gmp_stats(gmp_stats_t *out)
{
    if (!out)
        return GMP_EINVAL;
    gmp__preempt_check();
    struct schedt *s = cursched();
    if (!s) {
        memset(out, 0, sizeof *out);
        return GMP_EPERM;
    }
    stats_of(s, out);
    return 0;
}

/* ---- gmp_metrics --------------------------------------------------------- */

GMP_ALIGNED _Atomic int gmp__metrics_on;
/* The line after the flag stays clear of everything else's writes. */
static GMP_ALIGNED char metrics_pad[GMP_CACHELINE] __attribute__((unused));

void gmp__metrics_started(struct p *pp, struct g *gp)
{
    /* Relaxed: see metrics.h; only a G's own transitions write it. */
    int64_t t = __atomic_load_n(&gp->waitsince, __ATOMIC_RELAXED);
    if (t >= 0)
        return;                     /* not stamped runnable */
    __atomic_store_n(&gp->waitsince, 0, __ATOMIC_RELAXED);
    int64_t d = gmp__nanotime() + t;
    if (d < 0)
        d = 0;
    int b = gmp__log2_u64((uint64_t)d | 1);
    if (b >= GMP_METRICS_LATENCY_BUCKETS)
        b = GMP_METRICS_LATENCY_BUCKETS - 1;
    /* Relaxed: owner-written statistics (struct p). */
    gmp__owner_inc(&pp->latency[b], memory_order_relaxed);
    gmp__owner_inc_by(&pp->latency_ns, (uint64_t)d);
}

static void count_g(struct g *gp, void *arg)
{
    gmp_metrics_t *out = arg;
    /* Relaxed: informational (see the file comment). */
    switch (atomic_load_explicit(&gp->status, memory_order_relaxed)) {
    case G_RUNNABLE: out->goroutines_runnable++; break;
    case G_RUNNING:  out->goroutines_running++; break;
    case G_WAITING:  out->goroutines_waiting++; break;
    case G_SYSCALL:  out->goroutines_syscall++; break;
    default: break;
    }
}

int gmp_metrics(gmp_metrics_t *out)
{
    if (!out)
        return GMP_EINVAL;
    gmp__preempt_check();
    memset(out, 0, sizeof *out);
    struct schedt *s = cursched();
    if (!s)
        return GMP_EPERM;
    if (gmp__metrics_enabled())
        out->flags |= GMP_METRICS_TIMED;
    /* Relaxed, all: counters read as a snapshot, each one monotonic;
     * every P's, as in stats_of. */
    for (int i = 0; i < s->maxprocs; i++) {
        struct p *pp = &s->allp[i];
        for (int b = 0; b < GMP_METRICS_LATENCY_BUCKETS; b++) {
            uint64_t n = atomic_load_explicit(&pp->latency[b],
                                              memory_order_relaxed);
            out->sched_latency[b] += n;
            out->sched_latency_count += n;
        }
        out->sched_latency_ns +=
            atomic_load_explicit(&pp->latency_ns, memory_order_relaxed);
        out->syscall_ns +=
            atomic_load_explicit(&pp->syscall_ns, memory_order_relaxed);
    }
    gmp__each_g(s, true, count_g, out);
    return 0;
}

/* ---- schedtrace ---------------------------------------------------------- */

static const char *const pstatus_names[] = {
    [P_IDLE] = "idle", [P_RUNNING] = "running", [P_SYSCALL] = "syscall",
    [P_STOPPED] = "stopped", [P_DEAD] = "dead",
};

static const char *gstatus_name(uint32_t st)
{
    switch (st) {
    case G_RUNNABLE: return "runnable";
    case G_RUNNING:  return "running";
    case G_SYSCALL:  return "syscall";
    case G_WAITING:  return "waiting";
    default:         return "dead";
    }
}

/* Calls f on every G that has been handed out (live or dead), and maybe
 * on some never handed out, which are zero (G_IDLE). The slab list only
 * grows while the runtime runs; gflock makes the walk see a consistent
 * list. Context: any; takes gflock unless locked is false (fatal reports,
 * where the lock may be held by the failing thread). Unlocked, the list
 * head and the first slab's carve mark may be out of step, as another
 * thread maps a slab: a mark outside the first slab counts it whole,
 * never walks past a slab's end. */
void gmp__each_g(struct schedt *s, bool locked,
                   void (*f)(struct g *gp, void *arg), void *arg)
{
    if (locked)
        gmp__lock(&s->gflock);
    /* Acquire pairs with gchunk_new's release (a slab's next and len);
     * the mark is relaxed, checked against the slab below. */
    struct gslab *first = __atomic_load_n(&s->gslabs, __ATOMIC_ACQUIRE);
    uintptr_t mark = (uintptr_t)__atomic_load_n(&s->gchunk_next,
                                                __ATOMIC_RELAXED);
    if (locked)
        gmp__unlock(&s->gflock);
    for (struct gslab *sl = first; sl; sl = sl->next) {
        struct g *end = sl->gs + (sl->len - sizeof *sl) / sizeof(struct g);
        if (sl == first && mark >= (uintptr_t)sl->gs &&
            mark < (uintptr_t)end)
            end = (struct g *)mark;
        for (struct g *gp = sl->gs; gp < end; gp++)
            f(gp, arg);
    }
}

/* A goroutine's label, as ` "label"`, if it has one. Relaxed: as the
 * other fields (the label's text is the program's, kept while set). */
static void wlabel(struct wr *w, struct g *gp)
{
    const char *label = __atomic_load_n(&gp->label, __ATOMIC_RELAXED);
    if (label) {
        wputs(w, " \"");
        wputs(w, label);
        wputs(w, "\"");
    }
}

/* The describe hook's put: text into the report being written. */
static void wput_text(void *w, const char *text)
{
    if (text)
        wputs(w, text);
}

static void detail_g(struct g *gp, void *arg)
{
    struct wr *w = arg;
    /* Relaxed: informational (see the file comment). */
    uint32_t st = atomic_load_explicit(&gp->status, memory_order_relaxed);
    if (st == G_IDLE || st == G_DEAD)
        return;
    /* Relaxed: the writers' stores are relaxed atomics too (g.c,
     * park.c), so this read races nothing. */
    uint32_t why = __atomic_load_n(&gp->waitreason, __ATOMIC_RELAXED);
    wputs(w, "  G");
    wputu(w, __atomic_load_n(&gp->goid, __ATOMIC_RELAXED));
    wlabel(w, gp);
    wputs(w, ": status=");
    wputs(w, gstatus_name(st));
    if (st == G_WAITING && why < WAIT_NREASONS) {
        wputs(w, "(");
        wputs(w, gmp__waitreason_names[why]);
        wputs(w, ")");
    }
    wputs(w, "\n");
}

void gmp__schedtrace(struct schedt *s, int64_t now)
{
    gmp_stats_t st;
    stats_of(s, &st);
    struct wr w = {.put = put_line};
    wputs(&w, "SCHED ");
    wputi(&w, (now - s->start_ns) / 1000000);
    wputs(&w, "ms: gomaxprocs=");
    wputu(&w, (uint64_t)gmp__procs(s));
    wputs(&w, " idleprocs=");
    wputu(&w, st.idle_procs);
    wputs(&w, " threads=");
    wputu(&w, st.threads);
    wputs(&w, " spinningthreads=");
    wputu(&w, st.spinning_threads);
    wputs(&w, " idlethreads=");
    wputu(&w, st.idle_threads);
    wputs(&w, " runqueue=");
    wputu(&w, st.global_runq);
    if (!s->scheddetail) {
        wputs(&w, " [");
        for (int i = 0; i < gmp__procs(s); i++) {
            if (i)
                wputs(&w, " ");
            wputu(&w, local_runnable(&s->allp[i]));
        }
        wputs(&w, "]\n");
        return;
    }
    wputs(&w, "\n");
    for (int i = 0; i < gmp__procs(s); i++) {
        struct p *pp = &s->allp[i];
        /* Relaxed, all: a snapshot of atomics sysmon reads anyway. */
        int ps = atomic_load_explicit(&pp->status, memory_order_relaxed);
        wputs(&w, "  P");
        wputu(&w, (uint64_t)i);
        wputs(&w, ": status=");
        wputs(&w, ps >= 0 && ps <= P_DEAD ? pstatus_names[ps] : "?");
        wputs(&w, " schedtick=");
        wputu(&w, atomic_load_explicit(&pp->schedtick, memory_order_relaxed));
        wputs(&w, " syscalltick=");
        wputu(&w,
              atomic_load_explicit(&pp->syscalltick, memory_order_relaxed));
        wputs(&w, " m=");
        wputi(&w, ps == P_IDLE ? -1
                               : atomic_load_explicit(&pp->tid,
                                                      memory_order_relaxed));
        wputs(&w, " runqsize=");
        wputu(&w, local_runnable(pp));
        wputs(&w, " preemptions=");
        wputu(&w, atomic_load_explicit(&pp->npreempt, memory_order_relaxed));
        wputs(&w, "\n");
    }
    gmp__lock(&s->lock);
    for (struct m *mp = s->allm; mp; mp = mp->alllink) {
        bool idle = false;
        for (struct m *x = s->midle; x && !idle; x = x->schedlink)
            idle = x == mp;
        wputs(&w, "  M");
        wputi(&w, mp->id);
        /* lockedpark: waiting for its locked G (sched.c). */
        wputs(&w, idle ? ": idle\n"
                       : mp->lockedpark ? ": idle (locked)\n" : ": busy\n");
    }
    gmp__unlock(&s->lock);
    gmp__each_g(s, true, detail_g, &w);
}

/* ---- The stall report ---------------------------------------------------- */

void gmp__stall_report(struct schedt *s, int pid, const struct gmp__stall *st,
                       int how)
{
    (void)s;
    bool taken = how == STALL_TAKEN;
    struct wr w = {.put = put_line};
    wputs(&w, "gmprt: ");
    if (taken) {
        wputs(&w, "goroutine ");
        wputu(&w, st->goid);
        if (st->label) {            /* the program keeps it while set */
            wputs(&w, " \"");
            wputs(&w, st->label);
            wputs(&w, "\"");
        }
    } else {
        wputs(&w, "a goroutine");
    }
    wputs(&w, " has run ");
    wputi(&w, st->ran_ns / 1000000);
    wputs(&w, " ms without a scheduling point (P");
    wputu(&w, (uint64_t)pid);
    wputs(&w, ")");
    if (!taken) {
        wputs(&w, how == STALL_GONE ? "; it yielded before its stack was"
                                      " taken"
                  : how == STALL_ASKED ? "; its thread did not answer"
                                       : "; asynchronous preemption is off,"
                                         " so neither its id nor its stack"
                                         " is known");
        wputs(&w, "\n\n");
        return;
    }
    wputs(&w, ":\n");
    for (int i = 0; i < st->n; i++) {
        wputs(&w, "\t");
        wsym(&w, st->pc[i]);
        wputs(&w, "\n");
    }
    wputs(&w, "started as ");
    wsym(&w, (uintptr_t)st->fn);
    wputs(&w, "(");
    wputx(&w, (uintptr_t)st->arg);
    wputs(&w, ")\n\n");
}

/* ---- gmp_dump ------------------------------------------------------------ */

/* Frame pointers from fp up, each frame's record (at fp + GMP_FP_RECORD,
 * frame.h) = caller's fp, return address, inside [lo, hi) and strictly
 * rising. */
GMP_UNCHECKED_READS
static void walk(struct wr *w, uintptr_t fp, uintptr_t lo, uintptr_t hi,
                 int depth)
{
    for (; depth < MAX_FRAMES; depth++) {
        uintptr_t rec = fp + GMP_FP_RECORD;
        if (rec < lo || rec > hi - 2 * sizeof(uintptr_t) ||
            fp % sizeof(uintptr_t))
            return;
        uintptr_t next = ((volatile uintptr_t *)rec)[0];
        uintptr_t ret = ((volatile uintptr_t *)rec)[1];
        if (!ret)
            return;
        wputs(w, "\t");
        wsym(w, ret);
        wputs(w, "\n");
        if (next <= fp)
            return;
        fp = next;
    }
}

/* A G the preemption signal stopped: the instruction it was stopped at
 * and the frame pointer of that moment, from the registers the stub saved
 * (frame.h, GMP_APF_*). Returns false when gp has no such frame (it
 * stopped otherwise, or has run since). */
GMP_UNCHECKED_READS
static bool walk_async(struct wr *w, struct g *gp, uintptr_t lo,
                       uintptr_t hi)
{
    /* Relaxed: written by the G itself (preempt.c); checked against the
     * bounds, as sp below. */
    uintptr_t f = (uintptr_t)__atomic_load_n(&gp->asyncframe,
                                             __ATOMIC_RELAXED);
    if (!f || f % sizeof(uint64_t) || f < lo ||
        f > hi - GMP_APF_WORDS * sizeof(uint64_t))
        return false;
    uintptr_t pc = (uintptr_t)((volatile uint64_t *)f)[GMP_APF_PC];
    uintptr_t fp = (uintptr_t)((volatile uint64_t *)f)[GMP_APF_FP];
    wputs(w, "\t");
    wsym(w, pc);
    wputs(w, " (preempted by signal here)\n");
    walk(w, fp, lo, hi, 1);
    return true;
}

/* The saved context of a G that is not running: where the signal stopped
 * it, else its context's return address and frame pointer
 * (arch/<arch>/frame.h). */
GMP_UNCHECKED_READS
static void walk_saved(struct wr *w, struct g *gp)
{
    /* Acquire: pairs with execute's release, for the record's bounds,
     * which never change. Relaxed for sp: the G may run meanwhile (see
     * the file comment), and sp is checked against the bounds. */
    struct gstack *stk = __atomic_load_n(&gp->stk, __ATOMIC_ACQUIRE);
    if (!stk) {
        wputs(w, "\t(not started)\n");
        return;
    }
    uintptr_t lo = (uintptr_t)stk->lo;
    uintptr_t hi = (uintptr_t)gstack_hi(stk);
    if (walk_async(w, gp, lo, hi))
        return;
    uintptr_t sp = (uintptr_t)__atomic_load_n(&gp->ctx.sp, __ATOMIC_RELAXED);
    if (sp < lo || sp > hi - GMP_CTX_FRAME)
        return;
    uintptr_t ret = *(volatile uintptr_t *)(sp + GMP_CTX_PC);
    uintptr_t fp = *(volatile uintptr_t *)(sp + GMP_CTX_FP);
    wputs(w, "\t");
    wsym(w, ret);
    wputs(w, "\n");
    walk(w, fp, lo, hi, 1);
}

struct dumpctx {
    struct wr *w;
    struct g  *self;                /* the G calling, or NULL */
    int64_t    now;
};

static void dump_g(struct g *gp, void *arg)
{
    struct dumpctx *d = arg;
    struct wr *w = d->w;
    /* Acquire: pairs with the release that marked it waiting, after its
     * context was saved (sched.c): what walk_saved reads is then that
     * park's, unless it has been woken since (see the file comment). */
    uint32_t st = atomic_load_explicit(&gp->status, memory_order_acquire);
    if (st == G_IDLE || st == G_DEAD)
        return;
    /* Relaxed: as in detail_g. */
    uint32_t why = __atomic_load_n(&gp->waitreason, __ATOMIC_RELAXED);
    int64_t since = __atomic_load_n(&gp->waitsince, __ATOMIC_RELAXED);
    uint64_t goid = __atomic_load_n(&gp->goid, __ATOMIC_RELAXED);
    wputs(w, "goroutine ");
    wputu(w, goid);
    wlabel(w, gp);
    wputs(w, " [");
    if (st == G_WAITING) {
        wputs(w, why < WAIT_NREASONS ? gmp__waitreason_names[why]
                                     : "waiting");
        if (since > 0 && d->now > since) {
            wputs(w, ", ");
            wputi(w, (d->now - since) / 1000000);
            wputs(w, " ms");
        }
    } else {
        wputs(w, gstatus_name(st));
    }
    wputs(w, gp == d->self ? ", the caller]:\n" : "]:\n");
    if (gp == d->self) {
        uintptr_t lo = (uintptr_t)gp->stk->lo;
        walk(w, (uintptr_t)__builtin_frame_address(0), lo,
             (uintptr_t)gstack_hi(gp->stk), 0);
    } else if (st == G_WAITING || st == G_RUNNABLE) {
        /* A runnable G's context is its last switch-out's (a park, a
         * yield, a preemption); its status store is relaxed, so nothing
         * orders these reads but the bounds they are checked against, as
         * for a G woken while the dump reads it (file comment). */
        walk_saved(w, gp);
    } else {
        /* Its stack changes under any reader; stopping its thread to read
         * its registers would make the dump wait on that thread. */
        wputs(w, "\t(running on another thread)\n");
    }
    /* Relaxed: as the other fields, they may belong to the G's next
     * life (gmp__newg stores them so). */
    wputs(w, "started as ");
    wsym(w, (uintptr_t)__atomic_load_n(&gp->fn, __ATOMIC_RELAXED));
    wputs(w, "(");
    wputx(w, (uintptr_t)__atomic_load_n(&gp->arg, __ATOMIC_RELAXED));
    wputs(w, ")\n");
    if (gmp__hooks.describe)
        gmp__hooks.describe(goid,
                            __atomic_load_n(&gp->label, __ATOMIC_RELAXED),
                            wput_text, w, gmp__hooks.hook_ctx);
    wputs(w, "\n");
}

/* Context: any; fatal is true in the fatal reports (no locks taken). */
static void dump(struct schedt *s, struct wr *w, bool fatal)
{
    struct m *mp = gmp__getm();
    struct dumpctx d = {.w = w,
                        .self = mp && mp->sched == s ? mp->curg : NULL,
                        .now = gmp__nanotime()};
    gmp__each_g(s, !fatal, dump_g, &d);
}

void gmp_dump(FILE *out)
{
    gmp__preempt_check();
    struct schedt *s = cursched();
    if (!out)
        return;
    if (!s) {
        fputs("gmprt: no runtime running\n", out);
        return;
    }
    struct wr w = {.put = put_file, .f = out};
    dump(s, &w, false);
    fflush(out);
}

void gmp__dump_fatal(struct schedt *s)
{
    struct wr w = {.put = put_fatal};
    gmp__fatal_puts("\n");
    dump(s, &w, true);
}

/* ---- gmp_stacks_foreach --------------------------------------------------- */

struct stacksctx {
    void (*cb)(void *lo, void *hi, void *sp, void *arg);
    void  *arg;
    struct g *self;
    int    n;
};

static void stack_of(struct g *gp, void *arg)
{
    struct stacksctx *c = arg;
    /* Acquire: as in dump_g, for the saved context. */
    uint32_t st = atomic_load_explicit(&gp->status, memory_order_acquire);
    /* stk acquire, sp relaxed: as in walk_saved. */
    struct gstack *stk = __atomic_load_n(&gp->stk, __ATOMIC_ACQUIRE);
    if (st == G_IDLE || st == G_DEAD || !stk)
        return;
    char *lo = stk->lo, *hi = gstack_hi(stk);
    char *sp = lo;                  /* running elsewhere: all of it */
    if (gp == c->self)
        sp = __builtin_frame_address(0);
    else if (st == G_WAITING || st == G_RUNNABLE)
        sp = __atomic_load_n(&gp->ctx.sp, __ATOMIC_RELAXED);
    if (sp < lo || sp > hi)
        sp = lo;
    c->cb(lo, hi, sp, c->arg);
    c->n++;
}

/* Whether p lies in [lo, hi): the stack's bounds into *lo and *hi. */
static bool stack_has(char *p, char *lo, char *hi, void **olo, void **ohi)
{
    if (!lo || p < lo || p >= hi)
        return false;
    *olo = lo;
    *ohi = hi;
    return true;
}

int gmp_stack_bounds(void **lo, void **hi)
{
    if (!lo || !hi)
        return GMP_EINVAL;
    struct m *mp = gmp__getm();
    if (!mp)
        return GMP_EPERM;
    /* Only this thread changes curg and its G's stack record, and a
     * switch moves the stack pointer in one instruction: whichever stack
     * this frame is on, curg's or the thread's, says so. */
    char *sp = __builtin_frame_address(0);
    struct g *gp = mp->curg;
    struct gstack *st = gp ? gp->stk : NULL;
    if ((st && stack_has(sp, st->lo, gstack_hi(st), lo, hi)) ||
        stack_has(sp, mp->g0lo, mp->g0hi, lo, hi) ||
        stack_has(sp, mp->altstack, (char *)mp->altstack + mp->altstack_size,
                  lo, hi))
        return 0;
    return GMP_EAGAIN;
}

int gmp_stacks_foreach(void (*cb)(void *lo, void *hi, void *sp, void *arg),
                       void *arg)
{
    if (!cb)
        return GMP_EINVAL;
    struct schedt *s = cursched();
    if (!s)
        return GMP_EPERM;
    struct m *mp = gmp__getm();
    struct stacksctx c = {cb, arg, mp && mp->sched == s ? mp->curg : NULL,
                          0};
    /* Unlocked: a collector calls this while it holds other threads
     * stopped wherever they were, gflock's holder among them maybe;
     * each_g's unlocked walk is safe against a slab being added. */
    gmp__each_g(s, false, stack_of, &c);
    return c.n;
}

/* ---- SIGQUIT ------------------------------------------------------------- */

void gmp__dump_quit(void)
{
    /* Acquire: as in cursched. */
    struct schedt *s = atomic_load_explicit(&gmp__sched, memory_order_acquire);
    gmp__fatal_begin("SIGQUIT: goroutine dump\n");
    if (s) {
        gmp__dump_fatal(s);
        gmp__flightrec_report(false, true);
    }
}
