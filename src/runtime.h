/*
 * runtime.h - G, M, P and sched: every field, who writes it, what guards it.
 *
 * The objects are Go's (runtime2.go):
 *   G  a goroutine: function, saved context, stack (bound at first run),
 *      status, id, queue link.
 *   M  an OS thread. Its g0 context runs the scheduler on the thread's own
 *      stack; a G -> G transition goes G -> g0 -> G but for the direct
 *      park and yield (sched.c).
 *   P  the right to run goroutines, with a 256-slot lock-free ring run
 *      queue plus runnext, and free-G and free-stack caches.
 *   sched  the global run queue, idle P and M lists, spinning count; all
 *      runtime state hangs off it (one struct schedt per running runtime).
 *
 * Context words used in function comments: "g0" (scheduler code on an M's
 * own stack), "any G" (goroutine code), "owner of pp" (the M holding pp).
 */
#ifndef GMP_RUNTIME_H
#define GMP_RUNTIME_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gmprt.h"
#include "base.h"
#include "libc.h"
#include "context.h"
#include "lock.h"
#include "sanitizer.h"

#define GMP_MAXPROCS    256
#define GMP_RUNQ_SIZE   256         /* per-P ring; a power of two */
#define GMP_GLOBAL_TICK 61          /* schedtick period of the fairness check */
#define GMP_STEAL_TRIES 4

struct gmp__timer;                  /* timer.h */
struct gmp__tslot;
struct gmp__pd;                     /* netpoll.h */

/* ---- G ------------------------------------------------------------------ */

enum gstatus {                      /* Go's _Gidle ... _Gdead */
    G_IDLE, G_RUNNABLE, G_RUNNING, G_SYSCALL, G_WAITING, G_DEAD,
};

/* Why a G switched to g0; g0 acts on it once the G's stack is left. */
enum swreason {
    SW_NONE, SW_YIELD, SW_PARK, SW_EXIT,
    SW_SYSCALL,                     /* left a syscall and found no P */
    SW_PREEMPT,                     /* preempted (sysmon's mark, or its
                                       signal): to the global queue */
    SW_GOYIELD,                     /* Go's goyield: to the local queue */
};

/* The stack slot that gmp_config_t.stack_size 0 means (guard included):
 * Boost.Context's default. A stack cannot grow (docs/design.md). */
#define GMP__DEFAULT_STACK (128 * 1024)
#define GMP__MIN_STACK     (16 * 1024)         /* a stack_size, either way */
#define GMP__MAX_STACK     ((size_t)1 << 30)

/*
 * A goroutine stack: one mapping slot of sched.stack_size bytes,
 *   [guard page(s)][usable stack ...]
 * described by a record in its chunk's array (struct stackchunk), not on
 * the stack itself: preparing a chunk writes none of its stacks' pages,
 * and walking a free list reads the records side by side.
 */
struct gstack {
    struct gstack *next;            /* free-stack cache link */
    char          *lo;              /* lowest usable byte (above the guard) */
    char          *hi;              /* one past the highest: the slot's end */
    void          *tsan_fiber;      /* TSan builds: the fiber run on it */
    unsigned       vg_id;           /* valgrind's id for it (GMP_VALGRIND) */
    size_t         own;             /* 0: a slot of a chunk; else a mapping
                                       of this many bytes made for one
                                       goroutine (gmp_go_attr), unmapped
                                       when it ends */
};

static inline char *gstack_hi(struct gstack *s)
{
    return s->hi;
}

struct g {
    struct gmp__ctx ctx;            /* saved sp while not running */
    struct gstack  *stk;            /* NULL until the G first runs */
    void          (*fn)(void *);
    void           *arg;
    uint64_t        goid;
    struct g       *schedlink;      /* global run queue or free list link */
    struct m       *m;              /* M running it; written by that M */
    _Atomic uint32_t status;        /* enum gstatus; relaxed: informational,
                                       ordering comes from the queues */
    uint32_t        waitreason;
    int64_t         waitsince;      /* sched.coarse_ns when it parked */
    const char     *label;          /* gmp_set_label's; NULL: none. Read
                                       by dumps with relaxed atomics */
    /* Two uses, one after the other, in 8 bytes: a G is two cache lines
     * exactly. stksize: gmp_go_attr's stack size (guard included,
     * page-rounded), 0 for the runtime's; set before the G is queued, read
     * when its stack is bound, zeroed when it ends. asan_fake: ASan
     * builds' fake-stack save slot, written at each switch away from a G
     * that has run, before anything reads it. */
    union {
        size_t      stksize;
        void       *asan_fake;
    };
    /* Preemption (preempt.c). All written only on the thread running the
     * G (by its own code or by the signal handler interrupting it). */
    uint32_t        preemptoff;     /* no preemption while nonzero:
                                       gmp_preempt_disable depth, host
                                       hooks, foreign locks (preempt.c,
                                       try_preempt) */
    uint32_t        asyncpreempts;  /* times preempted by signal */
    uint32_t        asyncrefused;   /* signals that found its PC in libc,
                                       the loader or the runtime */
    /* gmp_lock_os_thread depth (key.c), in what was padding. Written by
     * the G on its own thread; read by an M that took the G from a run
     * queue (the queue orders it): nonzero means only ext->lockedm may
     * run it. */
    uint32_t        locked;
    uintptr_t       asyncpc;        /* PC of the last async preemption */
    /* The registers the preemption stub saved on the G's stack, while
     * the signal has it stopped (frame.h, GMP_APF_*); NULL otherwise.
     * Written by the G (relaxed atomic stores), read by gmp_dump. */
    uint64_t       *asyncframe;
    /* Goroutine-local values and the locked M (key.c), allocated on first
     * gmp_setspecific or gmp_lock_os_thread; freed when fn returns, so a
     * dead G (and a fresh, zeroed one) has NULL. The G's own field:
     * written on its thread, read by others only while it is queued. */
    struct gmp__gext *ext;
};

/* Gs sit back to back in slabs: a field more would make every other one
 * straddle a line on the hot paths. */
_Static_assert(sizeof(struct g) == 128, "a G is two 64-byte lines");

/* ---- M ------------------------------------------------------------------ */

struct m {
    struct gmp__ctx g0ctx;          /* the scheduler's saved context */
    struct g   *curg;               /* G running on this M, or NULL */
    struct p   *p;                  /* attached P */
    struct p   *nextp;              /* P handed over by startm (sched.lock) */
    struct p   *oldp;               /* P given up by gmp_syscall_enter */
    int64_t     syscall_t0;         /* its clock, when metrics are timed
                                       (metrics.h); else 0 */
    struct m   *schedlink;          /* idle-M list link (sched.lock) */
    struct m   *alllink;            /* all-M list (sched.lock) */
    int64_t     id;
    bool        spinning;           /* looking for work; counted in
                                       sched.nmspinning */
    struct schedt *sched;           /* the runtime this M belongs to */
    enum swreason swreason;         /* set by a G just before it switches */
    bool      (*waitunlockf)(struct g *, void *); /* gopark's callback */
    void       *waitlock;
    struct g   *directfrom;         /* a G that parked or yielded by
                                       switching straight to curg (swreason
                                       says which); its switch completes
                                       when curg resumes (sched.c, resumed) */
    struct gmp__note park;          /* sleeps here while idle */
    uint64_t    fastrand;
    pthread_t   thread;
    int32_t     tid;                /* kernel thread id (preempt signals) */
    uint64_t    sigmask0;           /* first 64 signals of its usual mask */
    char       *g0lo, *g0hi;        /* the thread's own stack (mstart);
                                       NULL when unknown */
    void       *altstack;           /* sigaltstack for overflow reports */
    size_t      altstack_size;
    stack_t     oldss;              /* the thread's previous one */
    /* Exit protocol (lifecycle.c): ing is 1 while a G runs on this M, a
     * relaxed hint: the stopper decides under sched.lock and re-reads it
     * every millisecond, so a stale value only delays the decision;
     * done/abandoned under sched.lock. */
    _Atomic int ing;
    bool        done;
    bool        abandoned;
    /* gmp_lock_os_thread (key.c, sched.c). lockedg: the G locked to this
     * M, written by that G on this thread. lockedpark: parked in
     * stoplockedm waiting for lockedg, counted in sched.nmidlelocked
     * (sched.lock). */
    struct g   *lockedg;
    bool        lockedpark;
    /* Sanitizer bookkeeping for switches back to g0. */
    void       *g0_tsan_fiber;
    const void *g0_stack_bottom;
    size_t      g0_stack_size;
};

/* ---- P ------------------------------------------------------------------ */

/* P_SYSCALL: its M is in a system call (gmp_syscall_enter) and holds it
 * no longer; whoever wins a CAS from P_SYSCALL owns it: that M on its way
 * out, or sysmon, which hands it to another M. */
/* P_DEAD: beyond procs since a resize (gmp__procresize); P_STOPPED again
 * when a later one takes it back. */
enum pstatus { P_IDLE, P_RUNNING, P_SYSCALL, P_STOPPED, P_DEAD };

struct p {
    /* Written by the owner only. */
    GMP_ALIGNED int id;
    bool        solo;               /* the only P: nobody steals from it */
    _Atomic int status;             /* enum pstatus; relaxed hint for
                                       thieves; release/acquire at the
                                       P_SYSCALL handover */
    struct m   *m;                  /* owner, or NULL when idle */
    struct p   *link;               /* idle-P list (sched.lock) */
    int         globturn;           /* which global list the next 61st-tick
                                       pull serves first (sched.lock) */
    /* Incremented by the owner (relaxed) on every new time slice and every
     * return from a system call; sysmon reads them (relaxed) to see a G
     * that runs too long or a syscall that blocks. */
    _Atomic uint32_t schedtick;
    _Atomic uint32_t syscalltick;
    /* Set (relaxed) by sysmon when the running G has had its 10 ms; the G
     * yields at its next runtime call; cleared when a G starts. */
    _Atomic uint32_t preempt;
    /* Thread id of the owning M, stored (relaxed) when an M takes the P:
     * where sysmon sends the preemption signal. May be stale; the signal
     * handler checks what it interrupted. */
    _Atomic int32_t tid;
    /* Preemptions of Gs run here, successful steals by this P, and
     * system-call brackets entered here (owner increments, relaxed;
     * gmp_stats sums them). */
    _Atomic uint64_t npreempt;
    _Atomic uint64_t nsteal;
    _Atomic uint64_t nsyscall;
    struct g   *gfree;              /* dead Gs, no stack */
    int         ngfree;
    struct gstack *sfree;           /* free stacks */
    int         nsfree;
    uint64_t    goidcache, goidcacheend;
    struct g   *gslab;              /* next unused G of the current slab */
    int         ngslab;
    struct sudog *sudogcache;       /* free waiter records (park.c) */
    int         nsudog;
    /* Timers (timer.c): a 4-ary heap under timerlock. timer0when is the
     * earliest when (0: none), written under the lock, read by anyone
     * (relaxed) to see whether anything is due. Its own line: every
     * idle M and thief reads it. */
    GMP_ALIGNED struct gmp__mutex timerlock;
    _Atomic int64_t timer0when;
    struct gmp__tslot *timers;
    int32_t     ntimers, timercap;
    /* Goroutines created and finished here (gmp__live_goroutines sums
     * them). Written by the owner only, with release stores. */
    _Atomic int64_t ncreated;
    _Atomic int64_t nexited;

    /* The run queue. The owner writes runqtail and puts into runnext;
     * thieves advance runqhead and take runnext, always by CAS. Its own
     * cache lines: thieves touch these from other cores. */
    GMP_ALIGNED _Atomic uint32_t runqhead;
    _Atomic uint32_t runqtail;
    _Atomic(struct g *) runnext;
    _Atomic(struct g *) runq[GMP_RUNQ_SIZE];

    /* Timed metrics (metrics.h), only while gmp__metrics_on: written by
     * the owner (relaxed), summed by gmp_metrics. Lines of their own,
     * which only this P's owner writes. */
    GMP_ALIGNED _Atomic uint64_t latency[GMP_METRICS_LATENCY_BUCKETS];
    _Atomic uint64_t latency_ns;
    _Atomic uint64_t syscall_ns;
};

/* ---- sched -------------------------------------------------------------- */

/* GMP_DEBUG=stall (sysmon.c): sysmon's request to the thread running a
 * stalled G for the G's name and backtrace, one record per P. state moves
 * by CAS or by the one side that owns the record in it: STALL_ASKED
 * (sysmon, tick and its own fields set before) -> STALL_TAKING (the
 * preemption signal's handler on the P's thread) -> STALL_TAKEN, or
 * STALL_GONE when the P has started another slice since (the handler,
 * the G's fields written in between) -> STALL_IDLE (sysmon, after it
 * reported); or STALL_ASKED -> STALL_IDLE when sysmon gives up waiting.
 * Each side reads what the other wrote after its own acquire CAS or load
 * of a state the other stored with release. */
enum { STALL_IDLE, STALL_ASKED, STALL_TAKING, STALL_TAKEN, STALL_GONE };
#define GMP_STALL_FRAMES 32
struct gmp__stall {
    GMP_ALIGNED _Atomic int state;
    uint32_t    tick;               /* the P's schedtick sysmon saw stay */
    int64_t     asked_ns;           /* when sysmon asked */
    int64_t     ran_ns;             /* how long the slice had run then */
    uint64_t    goid;               /* the handler's, from here on */
    const char *label;
    void      (*fn)(void *);
    void       *arg;
    int         n;                  /* frames in pc[] */
    uintptr_t   pc[GMP_STALL_FRAMES];
};

struct gslab {                      /* header of an mmap'd chunk of Gs */
    struct gslab *next;
    size_t        len;
    struct g      gs[];
};

struct stackarena {                 /* one mapping, carved into chunks */
    struct stackarena *next;
    char              *base;
    size_t             len;
    size_t             carved;      /* bytes handed to chunks, from base */
};

struct stackchunk {                 /* STACKS_PER_CHUNK slots of an arena */
    struct stackchunk *next;
    char              *base;
    struct gstack      slot[];      /* one per stack slot, in order */
};

/* The global run queue is two FIFO lists: Gs that had run and overflowed a
 * P's ring, served first, and every other G (runq.c). */
enum { GQ_SPILLED, GQ_FIFO };
struct gmp__gqueue {
    struct g *head, *tail;
    int32_t   n;
};

struct gmp__cgroup;                 /* cgroup.h */

struct schedt {
    /* Global run queue and idle lists. lock guards runqhead/runqtail,
     * pidle, midle, allm, mcount, and the M exit fields. */
    GMP_ALIGNED struct gmp__mutex lock;
    struct gmp__gqueue runq[2];     /* GQ_SPILLED, GQ_FIFO (runq.c) */
    _Atomic int32_t runqsize;       /* both lists; written under lock, read
                                       without it as an emptiness hint */
    struct p   *pidle;
    struct m   *midle;
    struct m   *allm;
    int         mcount;
    int         nmidle;             /* Ms on midle */
    int         nmidlelocked;       /* locked Ms parked for their G
                                       (sched.c, stoplockedm): idle too,
                                       for the deadlock check */

    /* Read by every wakep(), written when Ms start/stop spinning and Ps go
     * idle: a line of their own. */
    GMP_ALIGNED _Atomic int32_t npidle;
    _Atomic int32_t nmspinning;

    /* Set once when the runtime stops (main returned or shutdown). Stored
     * and loaded (gmp__exiting) relaxed everywhere: a stop flag that
     * publishes nothing. An M polls it at scheduling points; one asleep
     * is woken after the store (the note's release/acquire makes it see
     * the 1); what an exiting M needs next (allm, done, abandoned) is
     * under sched.lock, and gmp_main's thread learns of main's end
     * through main_done. */
    GMP_ALIGNED _Atomic int exiting;
    /* The host's stop-the-world (sched.c, "Stopping the world"): set under
     * lock while a stop is wanted or held, read (relaxed) beside exiting
     * at the same scheduling points, on the same line. stopwait: Ps not
     * yet stopped; stopnote: woken when it reaches 0; stwp: the P the
     * stopping goroutine keeps (NULL for a plain thread; relaxed, read by
     * sysmon); stwg/stwtid: who holds the world (lock). */
    _Atomic int stopping;
    int         stopwait;
    _Atomic(struct p *) stwp;
    struct g   *stwg;
    int32_t     stwtid;
    bool        stwheld;
    struct gmp__note stopnote;
    gmp_mutex_t worldsema;          /* one stopper at a time */
    /* While shutdown_waiting is set (relaxed: see pidleput), bumped
     * (release) each time the last busy P goes idle; gmp_shutdown sleeps
     * on it (futex) waiting for quiescence. */
    _Atomic uint32_t idlegen;
    _Atomic int shutdown_waiting;

    /* sysmon (sysmon.c): its thread, its note (woken for exit, and when a
     * P leaves the idle list while it sleeps deeply: sysmonwait, under
     * lock), and what it last saw of each P (its own). */
    pthread_t   sysmon_thread;      /* running while sysmon_ticks != NULL */
    bool        sysmonwait;
    bool        deadcheck_retry;    /* the last deadlock check was undecided
                                       (deadlock.c; lock) */
    struct gmp__note sysmon_note;
    struct sysmontick *sysmon_ticks;
    bool        async_preempt;      /* preemption signals are on (fixed) */
    /* Introspection (trace.c). coarse_ns: gmp__nanotime() as sysmon last
     * read it (relaxed both ways: a park stamps its G with it, to within
     * sysmon's period); nhandoff: Ps handed off from system calls. */
    _Atomic int64_t coarse_ns;
    _Atomic uint64_t nhandoff;
    int64_t     start_ns;           /* when the runtime started (fixed) */
    int         schedtrace_ms;      /* GMP_DEBUG=schedtrace (fixed) */
    bool        scheddetail;        /* GMP_DEBUG=scheddetail (fixed) */
    int64_t     stall_ns;           /* GMP_DEBUG=stall, 0: off (fixed) */
    struct gmp__stall *stalls;      /* procs records while stall_ns > 0
                                       (sysmon.c) */

    /* The poller (netpoll.c). lastpoll: when an M last returned from
     * epoll_wait (a busy M's poll without blocking to within
     * POLL_MARK_NS), 0 while one blocks in it (at most one does);
     * poll_until: when that one wakes by itself (0: never).
     * netpoll_waiters: waiter records linked on descriptors, and those
     * taken off whose taker has not yet let go (netpoll.c).
     * sysmon_until: when sysmon wakes from its note, while it sleeps
     * there with every P busy (0: otherwise; sysmon.c, note_sleep).
     * Their own line: idle Ms and timer adders read them. */
    GMP_ALIGNED _Atomic int64_t lastpoll;
    _Atomic int64_t poll_until;
    _Atomic int64_t sysmon_until;
    _Atomic uint32_t netpoll_waiters;
    _Atomic uint32_t netpoll_wakesig;    /* a break is pending */
    /* Set by sysmon (seq_cst) while it is the M-less poller (sysmon.c);
     * an M that idles its P meanwhile breaks the poll to get the role
     * back. */
    _Atomic bool sysmonpoll;
    int         epfd, evfd;
    struct gmp__mutex pdlock;       /* creates pdtab's chunks */
    _Atomic(struct gmp__pd *) *pdtab;

    GMP_ALIGNED _Atomic uint64_t goidgen;   /* ids handed out in batches */
    _Atomic int64_t nforeign;       /* Gs created by non-goroutine threads */

    /* Free Gs and stacks beyond the per-P caches, and their backing memory.
     * gflock guards gfree and gslabs; stacklock guards the rest. */
    GMP_ALIGNED struct gmp__mutex gflock;
    struct g   *gfree;
    struct gslab *gslabs;
    struct g   *gchunk_next;        /* uncarved Gs of gslabs' first chunk */
    struct g   *gchunk_end;
    struct gmp__mutex sudoglock;    /* guards the two below (park.c) */
    struct sudog *sudogfree;
    struct sudogchunk *sudogchunks;
    GMP_ALIGNED struct gmp__mutex stacklock;
    struct gstack *sfree;
    struct gmp__mutex arenalock;    /* guards the four below (stack.c) */
    struct stackarena *arenas;      /* the first is carved from */
    struct stackchunk *chunks;
    int         guard_mode;         /* 0 unknown, 1 MADV_GUARD_INSTALL,
                                       2 mprotect */
    int         pidfd;              /* ours, for process_madvise; -1 none;
                                       opened with guard_mode */

    /* Configuration. procs: the Ps in use, allp[0 .. procs); fixed
     * unless cgroup is set, and then changed only with the world stopped
     * (gmp__procresize) and read through gmp__procs. maxprocs: allp's
     * length, fixed; a P beyond procs is P_DEAD and keeps its caches and
     * counters for when it comes back. */
    _Atomic int procs;
    int         maxprocs;
    /* The default procs read again (cgroup.c, sysmon.c): cgroup says
     * where from, NULL when procs was set (config or $GMP_MAXPROCS) or
     * GMP_DEBUG turned the reading off; fixed, read by sysmon only.
     * procs_default is the default as sysmon last computed it (procs at
     * start); only sysmon writes it, and it is read as a hint: relaxed
     * both ways. sysmon resizes the Ps to follow it (docs/design.md). */
    struct gmp__cgroup *cgroup;
    _Atomic int procs_default;
    int         cpus;               /* CPUs we may run on, at the start */
    int         maxmcount;
    size_t      stack_size;         /* bytes per stack slot, guard included */
    size_t      guard_size;
    struct p   *allp;               /* procs Ps */
    uint32_t    ncoprimes;          /* random steal order (stealorder) */
    uint32_t    coprimes[GMP_MAXPROCS];

    bool        main_mode;          /* started by gmp_main */
    _Atomic(struct g *) maing;      /* gmp_main's G until it exits; relaxed:
                                       read only by the M running that G,
                                       cleared before its descriptor is
                                       freed for reuse */
    struct gmp__note main_done;     /* woken when the main G exits */
    /* Exit protocol (lifecycle.c), under lock. */
    int         nstragglers;        /* abandoned Ms still running */
    bool        stopper_done;       /* the stopping thread has left */
    _Atomic uint32_t exitgen;       /* bumped (release) by each exiting M */
};

/* The Ps in use. Relaxed: it changes only while the world is stopped;
 * an M holding a P reads it after its P's hand-back, which orders the
 * resize before it, and a reader without one (sysmon, a dump, a plain
 * thread) may see the count either side of a resize, which allp's
 * fixed length and P_DEAD make safe to walk. */
static inline int gmp__procs(struct schedt *s)
{
    return atomic_load_explicit(&s->procs, memory_order_relaxed);
}

/* Whether s is stopping (s->exiting set). Relaxed: a stop flag that
 * publishes nothing; what a stopping M needs next comes under sched.lock
 * or through a note (struct schedt). Context: any. */
static inline bool gmp__exiting(struct schedt *s)
{
    return atomic_load_explicit(&s->exiting, memory_order_relaxed);
}

/* The running runtime. Written only by the lifecycle code, under its lock,
 * while no runtime thread exists; read everywhere. */
GMP_HIDDEN extern _Atomic(struct schedt *) gmp__sched;

/* The M of the calling thread, or NULL for a thread that is not one.
 * Not inline: a G may resume on another thread after any switch, and the
 * compiler must not reuse a thread-pointer it computed before one. */
GMP_HIDDEN struct m *gmp__getm(void);

/* Whether the caller runs on its goroutine's own stack: mp runs a G, and
 * this frame lies in the G's stack (not on g0's, where the scheduler and
 * the host's memory hooks run, nor on a signal stack). No atomics: only
 * mp's thread changes curg and the G's stack record. */
static inline __attribute__((always_inline)) bool
gmp__on_gstack(struct m *mp)
{
    struct gstack *st;
    if (!mp || !mp->curg || !(st = mp->curg->stk))
        return false;
    char *sp = __builtin_frame_address(0);
    return sp >= st->lo && sp < gstack_hi(st);
}
GMP_HIDDEN void gmp__setm(struct m *mp);
/* The variable itself, for the few hot paths that read it once on entry,
 * before anything that can switch (gmp_yield, the syscall bracket). */
GMP_HIDDEN extern __thread struct m *gmp__tls_m
    __attribute__((tls_model("initial-exec")));

/* ---- runq.c ------------------------------------------------------------- */
GMP_HIDDEN void gmp__runqput(struct schedt *s, struct p *pp, struct g *gp,
                             bool next);
GMP_HIDDEN struct g *gmp__runqget(struct p *pp, bool *inherit);
GMP_HIDDEN bool gmp__runqempty(struct p *pp);
GMP_HIDDEN struct g *gmp__runqpeek_solo(struct p *pp);
GMP_HIDDEN struct g *gmp__runqsteal(struct p *pp, struct p *victim,
                                    bool stealnext);
GMP_HIDDEN void gmp__globrunqput(struct schedt *s, struct g *gp);
GMP_HIDDEN void gmp__globrunqputbatch(struct schedt *s, struct g *head,
                                      struct g *tail, int32_t n);
GMP_HIDDEN struct g *gmp__globrunqget(struct schedt *s, struct p *pp,
                                      int32_t max);

/* ---- sched.c ------------------------------------------------------------ */
GMP_HIDDEN void gmp__wakep(struct schedt *s);
GMP_HIDDEN void gmp__globrunqput_wake(struct schedt *s, struct g *gp);
GMP_HIDDEN void gmp__mloop(struct m *mp);
GMP_HIDDEN void gmp__mcall(struct m *mp, struct g *gp, enum swreason why);
GMP_HIDDEN bool gmp__park_direct(struct m *mp, struct g *gp);
GMP_HIDDEN void gmp__wake_idle_ms(struct schedt *s);
GMP_HIDDEN void gmp__injectglist(struct schedt *s, struct p *pp,
                                 struct g *head, struct g *tail, int32_t n);

GMP_HIDDEN void gmp__handoffp(struct schedt *s, struct p *pp);
/* Stops the world, makes n Ps the ones in use, and starts it again. 0,
 * GMP_EINVAL for n outside 1 .. maxprocs, GMP_EBUSY while the world is
 * held by someone else, or GMP_EPERM once the runtime is exiting.
 * Context: a thread without a P (sysmon). */
GMP_HIDDEN int gmp__procresize(struct schedt *s, int n);
/* Sets the steal order's steps (coprimes) for procs. Context: the
 * runtime's start, or the world stopped. */
GMP_HIDDEN void gmp__steal_order(struct schedt *s);
/* After pthread_create failed with err on try number tries (from 0):
 * sleeps and returns true when another try is worth it (EAGAIN, up to 20
 * tries, 1, 2, ... ms apart: about 0.2 s in all, as Go's newosproc),
 * else false. Context: any, no locks held. */
GMP_HIDDEN bool gmp__thread_retry(int err, int tries);
GMP_HIDDEN bool gmp__exitsyscall_pidle(struct schedt *s, struct m *mp);

/* ---- deadlock.c --------------------------------------------------------- */
/* When every M is idle (nmidle + nmidlelocked == mcount) and nothing can
 * wake a goroutine, reports the deadlock and aborts; else nothing.
 * Context: holds sched.lock. */
GMP_HIDDEN void gmp__checkdead(struct schedt *s);

/* ---- sysmon.c ----------------------------------------------------------- */
GMP_HIDDEN int gmp__sysmon_start(struct schedt *s);
GMP_HIDDEN void gmp__sysmon_stop(struct schedt *s);
/* A timer due at when was added (from gmp__netpoll_wake_for, after its
 * full barrier): wakes sysmon if it sleeps on its note well past it
 * while every P is busy. Context: any, no locks held. */
GMP_HIDDEN void gmp__sysmon_wake_for(struct schedt *s, int64_t when);

/* ---- syscall.c ---------------------------------------------------------- */
/* Sets errno of the thread the caller runs on now (after a switch). */
GMP_HIDDEN void gmp__errno_put(int e);

/* ---- g.c ---------------------------------------------------------------- */
GMP_HIDDEN struct g *gmp__newg(struct schedt *s, struct p *pp,
                               void (*fn)(void *), void *arg);
GMP_HIDDEN void gmp__gfput(struct schedt *s, struct p *pp, struct g *gp);
GMP_HIDDEN int64_t gmp__live_goroutines(struct schedt *s);
GMP_HIDDEN void gmp__gslabs_release(struct schedt *s);
/* Calls f on every G descriptor carved so far (trace.c). */
GMP_HIDDEN void gmp__each_g(struct schedt *s, bool locked,
                            void (*f)(struct g *gp, void *arg), void *arg);

/* ---- lifecycle.c -------------------------------------------------------- */
GMP_HIDDEN void gmp__mexit(struct m *mp);

/* ---- throw.c ------------------------------------------------------------ */
GMP_HIDDEN _Noreturn void gmp__throw(const char *msg);
GMP_HIDDEN _Noreturn void gmp__fatal(const char *msg, uint64_t n, bool hasn);
GMP_HIDDEN void gmp__fatal_begin(const char *msg);
GMP_HIDDEN void gmp__fatal_puts(const char *s);
GMP_HIDDEN void gmp__fatal_putn(uint64_t n);
GMP_HIDDEN _Noreturn void gmp__fatal_end(void);

/* ---- preempt.c: the cooperative point (the rest: preempt.h) ----------- */
/* Yields the G sysmon marked for preemption. Context: the G, its M
 * holding a P. */
GMP_HIDDEN void gmp__preempt_marked(struct m *mp);

/* ---- small helpers ------------------------------------------------------ */

/* The cooperative preemption point (preempt.c): yields if sysmon marked
 * the P, unless preemption is disabled. Inline, so that gmp_go and the
 * bracket's exit pay one load when unmarked. Context: a G whose M holds a
 * P. */
static inline void gmp__preempt_point(struct m *mp)
{
    /* Relaxed: sysmon's mark is a request, not a publication. */
    if (GMP_UNLIKELY(atomic_load_explicit(&mp->p->preempt,
                                          memory_order_relaxed)))
        gmp__preempt_marked(mp);
}

/* The same check at the entry of a runtime call made from anywhere (a G,
 * a G inside a syscall bracket, a plain thread): Go checks at every
 * function's entry, so a goroutine looping over channel or lock calls
 * yields to others within a time slice even where no signal can preempt
 * it. A TLS read and two loads when unmarked. Context: any. */
static inline void gmp__preempt_check(void)
{
    struct m *mp = gmp__tls_m;
    if (mp && mp->curg && mp->p)
        gmp__preempt_point(mp);
}

/* Adds one to a counter only its owner writes: a plain load of our own
 * value and a store with the given order, no locked read-modify-write.
 * Readers on other threads see whole values. */
#define gmp__owner_inc(obj, order)                                          \
    atomic_store_explicit((obj),                                            \
                          atomic_load_explicit((obj), memory_order_relaxed) \
                              + 1,                                          \
                          (order))

/* gmp__owner_inc's, adding n. */
#define gmp__owner_inc_by(obj, n)                                           \
    atomic_store_explicit((obj),                                            \
                          atomic_load_explicit((obj), memory_order_relaxed) \
                              + (n),                                        \
                          memory_order_relaxed)

/* xorshift64*: one step of the generator whose state is *state (never
 * 0), which only the caller's thread uses. */
static inline uint32_t gmp__fastrand_step(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

/* The M's generator: per-M, no sharing. */
static inline uint32_t gmp__fastrand(struct m *mp)
{
    return gmp__fastrand_step(&mp->fastrand);
}

#endif /* GMP_RUNTIME_H */
