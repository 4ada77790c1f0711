/*
 * exectrace.c - the execution tracer: the scheduler's events over time in
 * the format Go 1.19's runtime/trace writes, so that `go tool trace` (and
 * Go's internal/trace parser) read a gmprt program's trace.
 *
 * The problem. Every scheduling point wants to record what happened, on
 * paths that cost tens of nanoseconds, from up to 256 Ps at once, and the
 * record must be consistent enough for Go's parser, which replays every
 * goroutine's states (dead, runnable, running, waiting) and every P's
 * (running or not, which G) and refuses a trace where any transition is
 * impossible.
 *
 * Recording. Each P writes into a buffer of its own (tslot[pp->id]): no
 * lock, no atomic, nothing another core writes. Only the P's owner writes
 * there, or whoever took the P from its M's system call by winning the
 * CAS out of P_SYSCALL (its GoSysBlock and ProcStop). A thread without a
 * P (a plain thread readying a goroutine, sysmon's poll, an M leaving a
 * system call with no P to take) writes into one shared buffer under
 * glock and re-reads the flag under it. An event is a type byte, the time
 * since the buffer's previous event and its arguments, as unsigned LEB128;
 * a buffer starts with EvBatch (P id, -1 for the shared one, and the
 * first event's time). The clock is gmp__nanotime, one read per event, and
 * EvFrequency says 1e9 ticks a second.
 *
 * Ordering. Go's parser merges the Ps' event lists by picking, among the
 * heads whose goroutine transition is possible, the earliest; then it
 * demands that the merged stream be sorted by time. So we write the
 * "Local" kinds everywhere (GoStartLocal, GoUnblockLocal,
 * GoSysExitLocal), which carry no per-goroutine sequence number (a G has
 * no room for one: it is two cache lines exactly), and make the
 * timestamps causal instead: an event that publishes a G (create,
 * unblock, yield, block) reads the clock before the G is published, and
 * one that takes it (start, syscall exit) after it took it. The monotonic
 * clock is consistent across CPUs, so the time order is then a valid
 * order and the merge finds it. A P taken from a system call is the one
 * case where two threads race: the taker reads the clock before its CAS
 * (gmp__trace_now) and the G that lost the CAS reads it after.
 *
 * Starting and stopping. gmp_trace_start stops the world
 * (gmp_stop_world), so that no P writes while the buffers and the flag
 * are set up and every goroutine stands still. It then writes, at one
 * time stamp, a GoCreate for every goroutine that exists, a GoWaiting for
 * each waiting one and a GoInSyscall for each one in a system call (whose
 * P the stop took), a ProcStart and a GoStartLocal for the caller's own P
 * and goroutine, and starts the world again; every other P gets its
 * ProcStart when an M acquires it. gmp_trace_stop stops the world, clears
 * the flag and hands every buffer to the writer. GMP_TRACE=path starts
 * the same way when the runtime starts, and the trace ends when the
 * runtime stops (gmp__trace_free) unless the program stopped it before.
 *
 * Writing. A full buffer goes to a FIFO queue (qlock, once per 64 KiB of
 * events) and a new one comes from a free list (or gmp__alloc the first
 * times). A writer thread takes the queue every 10 ms and writes it to the
 * descriptor, then puts the buffers back on the free list: the hot path
 * never makes a system call, and memory stays bounded by what the Ps
 * record in 10 ms. Alternatives rejected: writing only at the stop
 * (memory grows with the run, which GMP_TRACE can make long); waking the
 * writer per full buffer (a futex call on the path that filled it). A P's
 * buffers reach the queue in the order it filled them, which is the order
 * the parser reads a P's batches in.
 *
 * Limits. Stacks are not recorded: every event names stack 0. A plain
 * thread, sysmon or an M leaving a system call without a P changes a
 * goroutine's state without the world being stopped; if it does so
 * during the instant a run-time gmp_trace_start walks the goroutines, the
 * walk and its event may disagree and Go's parser refuses the trace. The
 * events written with GMP_TRACE, which starts before any goroutine
 * exists, cannot meet that.
 * Locks: lk (start/stop, a gmp_mutex_t) > glock > qlock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exectrace.h"
#include "park.h"

#define TBUF_SIZE  (64 * 1024)      /* one buffer, header included */
#define EV_MAX     64               /* bytes an event takes at most */
#define WRITE_NS   10000000         /* the writer's period */
#define GLOBAL_SLOT GMP_MAXPROCS

struct tbuf {
    struct tbuf *next;              /* queue or free list (qlock) */
    int64_t      lastts;            /* the previous event's time */
    uint32_t     len;               /* bytes of data used; 0: no batch yet */
    int32_t      pid;
    uint8_t      data[TBUF_SIZE - 24];
};

GMP_ALIGNED _Atomic int gmp__tracing;
/* The line after the flag stays clear of everything else's writes. */
static GMP_ALIGNED char flag_pad[GMP_CACHELINE] __attribute__((unused));

/* Each P's current buffer (and the shared one's, GLOBAL_SLOT): its own
 * line, written by the P's owner only. */
static struct tslot {
    GMP_ALIGNED struct tbuf *cur;
} tslot[GMP_MAXPROCS + 1];

static struct {
    gmp_mutex_t       lk;           /* start and stop; guards active, fd */
    bool              active;
    bool              own_fd;       /* GMP_TRACE's: closed at the end */
    int               fd;
    int               procs;
    struct gmp__mutex glock;        /* the shared buffer (GLOBAL_SLOT) */
    struct gmp__mutex qlock;        /* qhead, qtail, freel */
    struct tbuf      *qhead, *qtail, *freel;
    pthread_t         writer;
    struct gmp__note  stopnote;     /* tells the writer to finish */
    int               werr;         /* the writer's first errno (lk's
                                       holder reads it after the join) */
} T = {.lk = GMP_MUTEX_INIT};

/* ---- Encoding -------------------------------------------------------- */

static uint8_t *uleb(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* How many arguments ev has after its time stamp, with the stack id (0)
 * counted for the kinds that carry one. */
static int nargs(int ev, bool *stack)
{
    *stack = false;
    switch (ev) {
    case TEV_PROCSTOP: case TEV_GOEND: case TEV_GOSYSBLOCK:
        return 0;
    case TEV_PROCSTART: case TEV_GOWAITING: case TEV_GOINSYSCALL:
    case TEV_GOSTARTLOCAL:
        return 1;
    case TEV_GOSYSEXITLOCAL:
        return 2;
    case TEV_GOMAXPROCS: case TEV_GOUNBLOCKLOCAL:
        *stack = true;
        return 1;
    case TEV_GOCREATE:
        *stack = true;
        return 2;
    default:                        /* GoSched, GoPreempt, GoBlock*, ... */
        *stack = true;
        return 0;
    }
}

/* ---- Buffers ------------------------------------------------------------ */

/* Queues full (if any) for the writer and returns an empty buffer for
 * pid, NULL when memory is short (the events are then dropped). Context:
 * the slot's writer; takes qlock. */
static struct tbuf *refill(struct tbuf *full, int pid)
{
    gmp__lock(&T.qlock);
    if (full) {
        full->next = NULL;
        if (T.qtail)
            T.qtail->next = full;
        else
            T.qhead = full;
        T.qtail = full;
    }
    struct tbuf *b = T.freel;
    if (b)
        T.freel = b->next;
    gmp__unlock(&T.qlock);
    if (!b && !(b = gmp__alloc(sizeof *b)))
        return NULL;
    b->next = NULL;
    b->len = 0;
    b->pid = pid;
    return b;
}

static void emit(struct tslot *sl, int pid, int ev, int64_t ts, uint64_t a,
                 uint64_t b)
{
    struct tbuf *bf = sl->cur;
    if (GMP_UNLIKELY(!bf || bf->len > sizeof bf->data - EV_MAX)) {
        bf = sl->cur = refill(bf, pid);
        if (!bf)
            return;
    }
    if (!ts)
        ts = gmp__nanotime();
    uint8_t *p = bf->data + bf->len;
    if (bf->len == 0) {             /* EvBatch [pid, time]: two values */
        *p++ = TEV_BATCH | 1 << 6;
        p = uleb(p, (uint64_t)(int64_t)pid);
        p = uleb(p, (uint64_t)ts);
        bf->lastts = ts;
    }
    if (ts < bf->lastts)            /* a taker's clock read before its CAS */
        ts = bf->lastts;
    bool stack;
    int n = nargs(ev, &stack);
    uint64_t v[4] = {(uint64_t)(ts - bf->lastts), a, b, 0};
    int nv = 1 + n + (stack ? 1 : 0);
    if (stack)
        v[n + 1] = 0;               /* stack id 0: none recorded */
    bf->lastts = ts;
    if (nv <= 3) {                  /* the count of values in the top bits */
        *p++ = (uint8_t)(ev | (nv - 1) << 6);
        for (int i = 0; i < nv; i++)
            p = uleb(p, v[i]);
    } else {                        /* 3: a byte length comes first */
        uint8_t tmp[EV_MAX], *q = tmp;
        for (int i = 0; i < nv; i++)
            q = uleb(q, v[i]);
        *p++ = (uint8_t)(ev | 3 << 6);
        p = uleb(p, (uint64_t)(q - tmp));
        memcpy(p, tmp, (size_t)(q - tmp));
        p += q - tmp;
    }
    bf->len = (uint32_t)(p - bf->data);
}

void gmp__trace_ev(struct p *pp, int ev, int64_t ts, uint64_t a, uint64_t b)
{
    if (pp) {
        emit(&tslot[pp->id], pp->id, ev, ts, a, b);
        return;
    }
    gmp__lock(&T.glock);
    /* Relaxed: under glock, which the stop holds while it clears it. */
    if (atomic_load_explicit(&gmp__tracing, memory_order_relaxed))
        emit(&tslot[GLOBAL_SLOT], -1, ev, ts, a, b);
    gmp__unlock(&T.glock);
}

void gmp__trace_block(struct p *pp, uint32_t reason)
{
    int ev;
    switch (reason) {
    case WAIT_CHAN_RECV: ev = TEV_GOBLOCKRECV; break;
    case WAIT_CHAN_SEND: ev = TEV_GOBLOCKSEND; break;
    case WAIT_SELECT:    ev = TEV_GOBLOCKSELECT; break;
    case WAIT_MUTEX: case WAIT_RWMUTEX_R: case WAIT_RWMUTEX_W: case WAIT_WG:
        ev = TEV_GOBLOCKSYNC; break;
    case WAIT_COND:      ev = TEV_GOBLOCKCOND; break;
    case WAIT_SLEEP:     ev = TEV_GOSLEEP; break;
    case WAIT_IO:        ev = TEV_GOBLOCKNET; break;
    default:             ev = TEV_GOBLOCK; break;   /* select {} too: Go's
                                                       GoStop would end it */
    }
    gmp__trace_ev(pp, ev, 0, 0, 0);
}

void gmp__trace_sysblock(struct p *pp, int64_t t0)
{
    gmp__trace_ev(pp, TEV_GOSYSBLOCK, t0, 0, 0);
    gmp__trace_ev(pp, TEV_PROCSTOP, t0, 0, 0);
}

void gmp__trace_unblock_list(struct p *pp, struct g *head)
{
    for (struct g *gp = head; gp; gp = gp->schedlink)
        gmp__trace_ev(pp, TEV_GOUNBLOCKLOCAL, 0, gp->goid, 0);
}

/* ---- The writer --------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = GMP_LIBC(write)(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the queue out, returning its buffers to the free list. */
static void drain(void)
{
    gmp__lock(&T.qlock);
    struct tbuf *q = T.qhead;
    T.qhead = T.qtail = NULL;
    gmp__unlock(&T.qlock);
    while (q) {
        struct tbuf *next = q->next;
        if (q->len && !T.werr)
            T.werr = write_all(T.fd, q->data, q->len);
        gmp__lock(&T.qlock);
        q->next = T.freel;
        T.freel = q;
        gmp__unlock(&T.qlock);
        q = next;
    }
}

static void *writer(void *arg)
{
    (void)arg;
    gmp__thread_started();
    while (!gmp__notetsleep(&T.stopnote, WRITE_NS))
        drain();
    drain();                        /* what the stop queued */
    gmp__thread_stopping();
    return NULL;
}

/* ---- Start and stop ----------------------------------------------------- */

struct walk {
    int64_t   ts;
    struct g *self;                 /* the caller, if a goroutine */
};

/* One goroutine's state at the start. Context: the world stopped, glock. */
static void walk_g(struct g *gp, void *arg)
{
    struct walk *w = arg;
    /* Relaxed: the world is stopped; what still moves is the limit the
     * file's essay names. */
    uint32_t st = atomic_load_explicit(&gp->status, memory_order_relaxed);
    if (st == G_IDLE || st == G_DEAD)
        return;
    struct tslot *sl = &tslot[GLOBAL_SLOT];
    emit(sl, -1, TEV_GOCREATE, w->ts, gp->goid, 0);
    if (st == G_WAITING)
        emit(sl, -1, TEV_GOWAITING, w->ts, gp->goid, 0);
    else if (st == G_SYSCALL)
        emit(sl, -1, TEV_GOINSYSCALL, w->ts, gp->goid, 0);
}

static void free_buffers(void)
{
    for (struct tbuf *b = T.freel, *next; b; b = next) {
        next = b->next;
        gmp__free(b, sizeof *b);
    }
    T.freel = NULL;
}

/* Sets the trace up on fd and starts the world. Context: lk held, the
 * world stopped by the caller, which is gp (NULL: a plain thread). */
static int start_locked(struct schedt *s, int fd)
{
    static const char hdr[16] = "go 1.19 trace\0\0\0";
    uint8_t freq[16], *p = freq;
    *p++ = TEV_FREQUENCY;           /* one value */
    p = uleb(p, 1000000000);
    int err = write_all(fd, hdr, sizeof hdr);
    if (!err)
        err = write_all(fd, freq, (size_t)(p - freq));
    if (err)
        return -err;
    T.fd = fd;
    T.werr = 0;
    T.procs = s->procs;
    gmp__noteclear(&T.stopnote);
    for (int i = 0; i < s->procs; i++)
        if (!(tslot[i].cur = refill(NULL, i)))
            goto nomem;
    if (!(tslot[GLOBAL_SLOT].cur = refill(NULL, -1)))
        goto nomem;
    err = pthread_create(&T.writer, NULL, writer, NULL);
    if (err) {
        err = -err;
        goto fail;
    }
    struct m *mp = gmp__getm();
    struct walk w = {.ts = gmp__nanotime(),
                     .self = mp && mp->curg && mp->p ? mp->curg : NULL};
    gmp__lock(&T.glock);
    /* Relaxed: the Ps see it after gmp_start_world's hand-over; threads
     * without a P read it under glock. */
    atomic_store_explicit(&gmp__tracing, 1, memory_order_relaxed);
    emit(&tslot[GLOBAL_SLOT], -1, TEV_GOMAXPROCS, w.ts, (uint64_t)s->procs,
         0);
    gmp__each_g(s, true, walk_g, &w);
    gmp__unlock(&T.glock);
    if (w.self) {
        emit(&tslot[mp->p->id], mp->p->id, TEV_PROCSTART, 0,
             (uint64_t)mp->tid, 0);
        emit(&tslot[mp->p->id], mp->p->id, TEV_GOSTARTLOCAL, 0,
             w.self->goid, 0);
    }
    T.active = true;
    return 0;
nomem:
    err = GMP_ENOMEM;
fail:
    for (int i = 0; i <= GMP_MAXPROCS; i++)
        if (tslot[i].cur) {
            gmp__free(tslot[i].cur, sizeof *tslot[i].cur);
            tslot[i].cur = NULL;
        }
    free_buffers();
    return err;
}

/* Clears the flag and queues every buffer. Context: lk held; nothing
 * writes to a P's buffer (the world stopped, or the runtime's threads
 * gone). */
static void stop_locked(void)
{
    gmp__lock(&T.glock);
    /* Relaxed: as in start_locked. */
    atomic_store_explicit(&gmp__tracing, 0, memory_order_relaxed);
    gmp__unlock(&T.glock);
    gmp__lock(&T.qlock);
    for (int i = 0; i <= GMP_MAXPROCS; i++) {
        struct tbuf *b = tslot[i].cur;
        if (!b)
            continue;
        tslot[i].cur = NULL;
        b->next = NULL;
        if (T.qtail)
            T.qtail->next = b;
        else
            T.qhead = b;
        T.qtail = b;
    }
    gmp__unlock(&T.qlock);
}

/* Lets the writer write what is queued, joins it and frees the buffers.
 * Returns 0 or the writer's error. Context: lk held, after stop_locked. */
static int finish_locked(void)
{
    gmp__notewakeup(&T.stopnote);
    pthread_join(T.writer, NULL);
    free_buffers();
    if (T.own_fd)
        GMP_LIBC(close)(T.fd);
    T.active = false;
    T.own_fd = false;
    return T.werr ? -T.werr : 0;
}

int gmp_trace_start(int fd)
{
    if (fd < 0)
        return GMP_EBADF;
    gmp_mutex_lock(&T.lk);
    if (T.active) {
        gmp_mutex_unlock(&T.lk);
        return GMP_EBUSY;
    }
    /* Acquire: as in gmp_stop_world. */
    struct schedt *s = atomic_load_explicit(&gmp__sched,
                                            memory_order_acquire);
    int err = s ? gmp_stop_world() : GMP_EPERM;
    if (err) {
        gmp_mutex_unlock(&T.lk);
        return err;
    }
    err = start_locked(s, fd);
    gmp_start_world();
    gmp_mutex_unlock(&T.lk);
    return err;
}

int gmp_trace_stop(void)
{
    gmp_mutex_lock(&T.lk);
    if (!T.active) {
        gmp_mutex_unlock(&T.lk);
        return GMP_EPERM;
    }
    int err = gmp_stop_world();
    if (err) {                      /* stopping: gmp__trace_free ends it */
        gmp_mutex_unlock(&T.lk);
        return err;
    }
    stop_locked();
    gmp_start_world();
    err = finish_locked();
    gmp_mutex_unlock(&T.lk);
    return err;
}

void gmp__trace_env(struct schedt *s)
{
    (void)s;
    const char *path = getenv("GMP_TRACE");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;                     /* no trace; the run goes on */
    if (gmp_trace_start(fd) == 0) {
        gmp_mutex_lock(&T.lk);
        T.own_fd = true;
        gmp_mutex_unlock(&T.lk);
    } else {
        GMP_LIBC(close)(fd);
    }
}

void gmp__trace_free(struct schedt *s)
{
    (void)s;
    /* Every M and sysmon are gone: nothing records or holds lk. */
    if (!T.active)
        return;
    stop_locked();
    finish_locked();
}
