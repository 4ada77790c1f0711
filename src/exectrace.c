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
 * Flight recorder. gmp_flightrec_start records the same events with no
 * descriptor: the writer thread moves full buffers onto a ring (rlock)
 * instead, and once the ring holds more than its size it drops the
 * oldest buffers, whole. A window that starts in the middle of the run
 * must still be a trace Go's parser accepts, which replays each
 * goroutine from its GoCreate and each P from its ProcStart. So each
 * dropped buffer is first decoded into a shadow state (SH): per
 * goroutine the state its latest event left it in, with that event's
 * time (the ring drops buffers of different Ps out of time order, and
 * the latest event wins in any order of application; a G that ended
 * goes once no kept event can precede its end), and per P whether it
 * runs, its thread and its goroutine (a P's buffers leave in its own
 * order). Writing a window (the world stopped, as a trace's start)
 * takes the cut just after the latest dropped event: every kept event
 * before it is applied to a copy of the shadow too; the copy is written
 * as a prefix in the form gmp_trace_start writes (GoCreate for every
 * goroutine alive, GoWaiting, GoInSyscall; per running P a ProcStart and
 * the GoStartLocal of its goroutine), just before the cut, and then every
 * kept buffer from the cut on, each as a batch of its own whose first
 * event is re-encoded with a zero delta. The reports (the deadlock's, a
 * stall's, SIGQUIT's) write it to GMP_FLIGHTREC's file. The stall's and
 * SIGQUIT's run while Ps record: they read each current buffer up to the
 * length its writer published (a release store per event, a plain store
 * on x86) and end the window at the moment they began; an event whose
 * clock was read before that moment and published after it, or a buffer
 * filled just then and on its way to the ring, is missing, and the
 * parser may then refuse the window. Memory: the ring, what the Ps fill
 * in one writer period, and the shadow (a few words per goroutine
 * alive). Alternatives rejected: a snapshot of every goroutine's state
 * at each drop (a stop of the world per 64 KiB of events); keeping the
 * state up to date at each event (a cost on every fast path while on).
 *
 * Limits. Stacks are not recorded: every event names stack 0. A plain
 * thread, sysmon or an M leaving a system call without a P changes a
 * goroutine's state without the world being stopped; if it does so
 * during the instant a run-time gmp_trace_start walks the goroutines, the
 * walk and its event may disagree and Go's parser refuses the trace. The
 * events written with GMP_TRACE, which starts before any goroutine
 * exists, cannot meet that.
 * The SIGQUIT dump takes qlock and rlock inside the signal handler: a
 * thread interrupted while it holds one hangs the dump.
 * Locks: lk (start/stop, a gmp_mutex_t) > glock > qlock; rlock is taken
 * after qlock is released (absorb), never inside it.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exectrace.h"
#include "park.h"
#include "alloc.h"

#define TBUF_SIZE  (64 * 1024)      /* one buffer, header included */
#define EV_MAX     64               /* bytes an event takes at most */
#define WRITE_NS   10000000         /* the writer's period */
#define GLOBAL_SLOT GMP_MAXPROCS

struct tbuf {
    struct tbuf *next;              /* queue, ring or free list (qlock,
                                       rlock) */
    int64_t      lastts;            /* the previous event's time */
    uint32_t     len;               /* bytes of data used; 0: no batch yet */
    int32_t      pid;
    /* The first event's time, 0 before it: stored (relaxed) once by the
     * writer of the slot, read (relaxed) by a flight recorder dump that
     * leaves current buffers alone (it bounds what they may hold). */
    _Atomic int64_t firstts;
    uint8_t      data[TBUF_SIZE - 32];
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
    /* The flight recorder (fixed while active): full buffers go to the
     * ring instead of the descriptor. rlock guards the ring and sh. */
    bool              ring;
    size_t            ringmax;      /* buffers the ring keeps */
    char             *frpath;       /* GMP_FLIGHTREC's, for the reports */
    struct gmp__mutex rlock;
    struct tbuf      *rhead, *rtail;
    size_t            rn;
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

/* ---- Start functions as stacks ----------------------------------------- */

/* `go tool trace` names a goroutine after the first frame of the stack
 * its GoCreate gives it (and refuses a trace without one). A G's stack
 * is not walked at every event: each GoCreate names a one-frame stack,
 * the goroutine's start function, whose id is the function's address;
 * STK_UNKNOWN stands for a function not known (a window's prefix, a
 * full table). The addresses go into a set, insert-only, lock-free,
 * shared by every trace of the process; the EvStack and EvString
 * entries are written after the events (stacks_out), symbolised with
 * dladdr or the object's own symbol table (symtab_name). */
#define STK_UNKNOWN 1
#define FNSET_SIZE  4096            /* a power of two */

static _Atomic uintptr_t fnset[FNSET_SIZE];

/* The stack id for a G started at fn. Context: any. */
static uint64_t stack_of(void (*fn)(void *))
{
    uintptr_t a = (uintptr_t)fn;
    if (a <= STK_UNKNOWN)
        return STK_UNKNOWN;
    for (uint32_t i = (uint32_t)(a >> 4) * 2654435761u, n = 0;
         n < FNSET_SIZE; i++, n++) {
        _Atomic uintptr_t *slot = &fnset[i & (FNSET_SIZE - 1)];
        /* Relaxed: the slot's value is all there is to publish; the
         * writer of the table reads it after the trace's stop, which
         * orders everything before it (stop_world). */
        uintptr_t v = atomic_load_explicit(slot, memory_order_relaxed);
        if (v == a)
            return a;
        if (v == 0 && (atomic_compare_exchange_strong_explicit(
                           slot, &v, a, memory_order_relaxed,
                           memory_order_relaxed) ||
                       v == a))
            return a;
    }
    return STK_UNKNOWN;
}

void gmp__trace_create(struct p *pp, struct g *gp)
{
    gmp__trace_ev(pp, TEV_GOCREATE, 0, gp->goid, stack_of(gp->fn));
}

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

struct frout {
    int     fd;
    int     err;
};

static void out(struct frout *o, const void *p, size_t n)
{
    if (!o->err && n)
        o->err = write_all(o->fd, p, n);
}

/* One string of the dictionary. */
static void out_string(struct frout *o, uint64_t id, const char *str)
{
    uint8_t buf[24], *p = buf;
    size_t n = strlen(str);
    *p++ = TEV_STRING;
    p = uleb(p, id);
    p = uleb(p, n);
    out(o, buf, (size_t)(p - buf));
    out(o, str, n);
}

/* The one-frame stack id: {pc, func, file, line 0}. */
static void out_stack(struct frout *o, uint64_t id, uint64_t pc,
                      uint64_t fn, uint64_t file)
{
    uint8_t args[64], *q = args, buf[80], *p = buf;
    q = uleb(q, id);
    q = uleb(q, 1);
    q = uleb(q, pc);
    q = uleb(q, fn);
    q = uleb(q, file);
    q = uleb(q, 0);
    *p++ = (uint8_t)(TEV_STACK | 3 << 6);   /* a byte length first */
    p = uleb(p, (uint64_t)(q - args));
    memcpy(p, args, (size_t)(q - args));
    p += q - args;
    out(o, buf, (size_t)(p - buf));
}

/* The name of the function at a in di's object, from the file's own
 * symbol table (.symtab), which holds the static functions dladdr cannot
 * name (it reads only the dynamic symbols); into buf (n bytes). False
 * when the file has no such table (stripped) or no function starts at a.
 * Reads the file with pread, in blocks: no allocation, no mapping. */
static bool symtab_name(const Dl_info *di, uintptr_t a, char *buf, size_t n)
{
    if (!di->dli_fname || n < 2)
        return false;
    /* The main program's dli_fname may be "" (then its file is
     * /proc/self/exe) or argv[0], relative (then the cwd must not have
     * changed: else no name). */
    int fd = open(*di->dli_fname ? di->dli_fname : "/proc/self/exe",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool found = false;
    ElfW(Ehdr) eh;
    ElfW(Shdr) sh, strsh;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_shentsize != sizeof sh)
        goto out;
    /* Symbol values are addresses in the file's own layout: for a
     * position-independent object, offsets from where it is loaded,
     * dli_fbase (its first segment's address, which the linker puts at
     * 0); for a position-dependent program, the addresses themselves. */
    uintptr_t want = eh.e_type == ET_EXEC ? a : a - (uintptr_t)di->dli_fbase;
    for (unsigned i = 0; i < eh.e_shnum && !found; i++) {
        if (pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + i * sizeof sh)) !=
                (ssize_t)sizeof sh ||
            sh.sh_type != SHT_SYMTAB || sh.sh_entsize != sizeof(ElfW(Sym)) ||
            pread(fd, &strsh, sizeof strsh,
                  (off_t)(eh.e_shoff + sh.sh_link * sizeof strsh)) !=
                (ssize_t)sizeof strsh)
            continue;
        ElfW(Sym) blk[128];
        size_t nsym = sh.sh_size / sizeof *blk;
        for (size_t j = 0; j < nsym && !found; j += 128) {
            size_t k = nsym - j < 128 ? nsym - j : 128;
            if (pread(fd, blk, k * sizeof *blk,
                      (off_t)(sh.sh_offset + j * sizeof *blk)) !=
                (ssize_t)(k * sizeof *blk))
                break;
            for (size_t m = 0; m < k; m++) {
                if (ELF64_ST_TYPE(blk[m].st_info) != STT_FUNC ||
                    blk[m].st_value != want || blk[m].st_name == 0 ||
                    blk[m].st_name >= strsh.sh_size)
                    continue;
                ssize_t got = pread(fd, buf, n - 1,
                                    (off_t)(strsh.sh_offset + blk[m].st_name));
                if (got > 0) {
                    buf[got] = 0;
                    found = buf[0] != 0;
                }
                break;
            }
        }
    }
out:
    close(fd);
    return found;
}

/* The stack table of stack_of: STK_UNKNOWN and every start function
 * seen, named by dladdr, or by its object's symbol table for a static
 * function, or by address where neither may be read (live: in a signal
 * handler) or knows the function. */
static void stacks_out(struct frout *o, bool live)
{
    out_string(o, 1, "?");
    out_stack(o, STK_UNKNOWN, STK_UNKNOWN, 1, 1);
    uint64_t id = 2;
    for (uint32_t i = 0; i < FNSET_SIZE; i++) {
        /* Relaxed: see stack_of. */
        uintptr_t a = atomic_load_explicit(&fnset[i], memory_order_relaxed);
        if (!a)
            continue;
        char hex[2 + 2 * sizeof a + 1], *h = hex + sizeof hex - 1;
        *h = 0;
        for (uintptr_t v = a; h > hex + 2 && (v || h == hex + sizeof hex - 1);
             v >>= 4)
            *--h = "0123456789abcdef"[v & 15];
        *--h = 'x';
        *--h = '0';
        const char *fn = h, *file = "?";
        char name[256];
        Dl_info di;
        if (!live && dladdr((void *)a, &di)) {
            if (di.dli_sname && di.dli_saddr == (void *)a)
                fn = di.dli_sname;
            else if (symtab_name(&di, a, name, sizeof name))
                fn = name;
            if (di.dli_fname)
                file = di.dli_fname;
        }
        out_string(o, id, fn);
        out_string(o, id + 1, file);
        out_stack(o, a, a, id, id + 1);
        id += 2;
    }
}

/* ---- Buffers ------------------------------------------------------------ */

/* Appends b to the list from *head to *tail (the writers' queue under
 * qlock, or the ring under rlock). */
static void tbq_append(struct tbuf **head, struct tbuf **tail, struct tbuf *b)
{
    b->next = NULL;
    if (*tail)
        (*tail)->next = b;
    else
        *head = b;
    *tail = b;
}

/* Queues full (if any) for the writer and returns an empty buffer for
 * pid, NULL when memory is short (the events are then dropped). Context:
 * the slot's writer; takes qlock. */
static struct tbuf *refill(struct tbuf *full, int pid)
{
    gmp__lock(&T.qlock);
    if (full)
        tbq_append(&T.qhead, &T.qtail, full);
    struct tbuf *b = T.freel;
    if (b)
        T.freel = b->next;
    gmp__unlock(&T.qlock);
    if (!b && !(b = gmp__alloc(sizeof *b)))
        return NULL;
    b->next = NULL;
    __atomic_store_n(&b->len, 0, __ATOMIC_RELAXED);    /* as in emit */
    b->pid = pid;
    /* Relaxed: see struct tbuf; the buffer is not yet anyone's. */
    atomic_store_explicit(&b->firstts, 0, memory_order_relaxed);
    return b;
}

/* EvBatch [pid, time] at p. */
static uint8_t *enc_batch(uint8_t *p, int pid, int64_t ts)
{
    *p++ = TEV_BATCH | 1 << 6;      /* two values */
    p = uleb(p, (uint64_t)(int64_t)pid);
    return uleb(p, (uint64_t)ts);
}

/* Event ev, dt after the previous one, with args a and b, at p. */
static uint8_t *enc_ev(uint8_t *p, int ev, uint64_t dt, uint64_t a,
                       uint64_t b)
{
    bool stack;
    int n = nargs(ev, &stack);
    uint64_t v[4] = {dt, a, b, 0};
    int nv = 1 + n + (stack ? 1 : 0);
    if (stack)
        v[n + 1] = 0;               /* stack id 0: none recorded */
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
    return p;
}

static void emit(struct tslot *sl, int pid, int ev, int64_t ts, uint64_t a,
                 uint64_t b)
{
    struct tbuf *bf = sl->cur;
    if (GMP_UNLIKELY(!bf || bf->len > sizeof bf->data - EV_MAX)) {
        bf = refill(bf, pid);
        /* Release: a flight recorder dump that loads the slot (acquire,
         * absorb and fr_write_locked) sees the buffer's initialisation. */
        __atomic_store_n(&sl->cur, bf, __ATOMIC_RELEASE);
        if (!bf)
            return;
    }
    if (!ts)
        ts = gmp__nanotime();
    uint8_t *p = bf->data + bf->len;
    if (bf->len == 0) {
        p = enc_batch(p, pid, ts);
        bf->lastts = ts;
        /* Relaxed: see struct tbuf. */
        atomic_store_explicit(&bf->firstts, ts, memory_order_relaxed);
    }
    if (ts < bf->lastts)            /* a taker's clock read before its CAS */
        ts = bf->lastts;
    p = enc_ev(p, ev, (uint64_t)(ts - bf->lastts), a, b);
    bf->lastts = ts;
    /* Release: a flight recorder dump while the world runs reads the
     * bytes below len after its acquire load (fr_write_locked). */
    __atomic_store_n(&bf->len, (uint32_t)(p - bf->data), __ATOMIC_RELEASE);
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


/* ---- The flight recorder: shadow state --------------------------------- */

/* What the events dropped from the ring left each goroutine and P in
 * (the essay's "Flight recorder"). A goroutine's entry keeps the state
 * its latest event gave it and that event's time: the ring drops whole
 * buffers of different Ps out of time order, and the latest event wins
 * whatever the order they are applied in. A P's state follows its own
 * events in order (its buffers leave the ring in the order it filled
 * them). */
enum { SG_FREE, SG_RUNNABLE, SG_RUNNING, SG_WAITING, SG_SYSCALL, SG_DEAD };

struct shg {
    uint64_t goid;                  /* 0: a free slot */
    int64_t  ts;
    uint32_t st;
};

struct shp {
    bool     running;
    uint64_t curg;
    uint64_t tid;
};

struct shadow {
    struct shg *tab;                /* open addressing, linear probing */
    uint32_t    cap, n;             /* cap a power of two, n <= cap / 2 */
    bool        fixed;              /* may not grow (fatal reports) */
    int64_t     maxts;              /* the latest event applied */
    struct shp  p[GMP_MAXPROCS];
};

static struct shadow SH;            /* rlock */

static struct shg *sh_find(struct shadow *sh, uint64_t goid, bool add)
{
    if (add && (sh->n + 1) * 2 > sh->cap && !sh->fixed) {
        uint32_t ncap = sh->cap ? sh->cap * 2 : 1024;
        struct shg *nt = gmp__alloc((size_t)ncap * sizeof *nt);
        if (nt) {
            for (uint32_t i = 0; i < sh->cap; i++) {
                struct shg *e = &sh->tab[i];
                if (!e->goid)
                    continue;
                uint32_t j = (uint32_t)(e->goid * 0x9e3779b97f4a7c15ull >>
                                        32) & (ncap - 1);
                while (nt[j].goid)
                    j = (j + 1) & (ncap - 1);
                nt[j] = *e;
            }
            if (sh->tab)
                gmp__free(sh->tab, (size_t)sh->cap * sizeof *sh->tab);
            sh->tab = nt;
            sh->cap = ncap;
        }
    }
    if (!sh->cap)
        return NULL;
    uint32_t j = (uint32_t)(goid * 0x9e3779b97f4a7c15ull >> 32) &
                 (sh->cap - 1);
    for (uint32_t k = 0; k < sh->cap; k++, j = (j + 1) & (sh->cap - 1)) {
        if (sh->tab[j].goid == goid)
            return &sh->tab[j];
        if (!sh->tab[j].goid) {
            if (!add || sh->n + 1 >= sh->cap)
                return NULL;        /* full: the event is lost */
            sh->tab[j].goid = goid;
            sh->tab[j].ts = INT64_MIN;
            sh->n++;
            return &sh->tab[j];
        }
    }
    return NULL;
}

/* Drops the finished goroutines whose end no event still in a buffer
 * can precede: every such event is at or after watermark. */
static void sh_purge(struct shadow *sh, int64_t watermark)
{
    uint32_t dead = 0;
    for (uint32_t i = 0; i < sh->cap; i++)
        dead += sh->tab[i].goid && sh->tab[i].st == SG_DEAD;
    if (dead * 2 < sh->n || !sh->cap)
        return;
    struct shg *old = sh->tab;
    uint32_t ocap = sh->cap;
    sh->tab = gmp__alloc((size_t)ocap * sizeof *old);
    if (!sh->tab) {
        sh->tab = old;
        return;
    }
    sh->n = 0;
    for (uint32_t i = 0; i < ocap; i++) {
        struct shg *e = &old[i];
        if (!e->goid || (e->st == SG_DEAD && e->ts < watermark))
            continue;
        struct shg *f = sh_find(sh, e->goid, true);
        if (f)
            *f = *e;
    }
    gmp__free(old, (size_t)ocap * sizeof *old);
}

/* Applies one event of stream pid (-1: the shared one) at ts. */
static void sh_apply(struct shadow *sh, int pid, int ev, int64_t ts,
                     uint64_t a)
{
    struct shp *pp = pid >= 0 && pid < GMP_MAXPROCS ? &sh->p[pid] : NULL;
    uint64_t g = 0;
    uint32_t st = SG_FREE;
    switch (ev) {
    case TEV_GOCREATE: case TEV_GOUNBLOCKLOCAL:
        g = a, st = SG_RUNNABLE;
        break;
    case TEV_GOWAITING:
        g = a, st = SG_WAITING;
        break;
    case TEV_GOINSYSCALL:
        g = a, st = SG_SYSCALL;
        break;
    case TEV_GOSTARTLOCAL:
        g = a, st = SG_RUNNING;
        if (pp)
            pp->curg = a;
        break;
    case TEV_PROCSTART:
        if (pp)
            pp->running = true, pp->tid = a;
        break;
    case TEV_PROCSTOP:
        if (pp)
            pp->running = false, pp->curg = 0;
        break;
    case TEV_GOEND: case TEV_GOSCHED: case TEV_GOPREEMPT:
    case TEV_GOSYSBLOCK: case TEV_GOSLEEP: case TEV_GOBLOCK:
    case TEV_GOBLOCKSEND: case TEV_GOBLOCKRECV: case TEV_GOBLOCKSELECT:
    case TEV_GOBLOCKSYNC: case TEV_GOBLOCKCOND: case TEV_GOBLOCKNET:
        st = ev == TEV_GOEND ? SG_DEAD
           : ev == TEV_GOSCHED || ev == TEV_GOPREEMPT ? SG_RUNNABLE
           : ev == TEV_GOSYSBLOCK ? SG_SYSCALL : SG_WAITING;
        if (pp) {
            g = pp->curg;
            pp->curg = 0;
        }
        break;
    default:
        break;
    }
    if (ts > sh->maxts)
        sh->maxts = ts;
    struct shg *e = g ? sh_find(sh, g, true) : NULL;
    if (e && ts >= e->ts) {
        e->ts = ts;
        e->st = st;
    }
}

/* ---- The flight recorder: reading buffers back -------------------------- */

struct dec {
    const uint8_t *p, *end;
    int64_t        ts;
    int            pid;
};

struct devent {
    const uint8_t *at;              /* the event's first byte */
    const uint8_t *args;            /* after its time delta */
    const uint8_t *next;            /* the next event's first byte */
    int            ev;
    int64_t        ts;
    uint64_t       a;               /* its first argument, if any */
};

static uint64_t unleb(const uint8_t **pp, const uint8_t *end)
{
    uint64_t v = 0;
    int shift = 0;
    const uint8_t *p = *pp;
    while (p < end && shift < 64) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    *pp = p;
    return v;
}

/* Starts reading b's batch; false if it holds none. Acquire: pairs with
 * emit's release of len, for a buffer its writer may be filling (the
 * bytes below len are then final). */
static bool dec_open(struct dec *d, const struct tbuf *b)
{
    uint32_t len = __atomic_load_n(&b->len, __ATOMIC_ACQUIRE);
    d->p = b->data;
    d->end = b->data + len;
    if (len == 0 || (d->p[0] & 0x3f) != TEV_BATCH)
        return false;
    d->p++;
    d->pid = (int)(int64_t)unleb(&d->p, d->end);
    d->ts = (int64_t)unleb(&d->p, d->end);
    return true;
}

static bool dec_next(struct dec *d, struct devent *e)
{
    if (d->p >= d->end)
        return false;
    e->at = d->p;
    uint8_t h = *d->p++;
    e->ev = h & 0x3f;
    int nv = h >> 6;
    const uint8_t *q = d->p, *qend = d->end;
    if (nv == 3) {
        uint64_t len = unleb(&q, d->end);
        qend = q + len <= d->end ? q + len : d->end;
        nv = -1;                    /* up to qend */
    } else {
        nv += 1;
    }
    d->ts += (int64_t)unleb(&q, qend);
    e->ts = d->ts;
    e->args = q;
    e->a = 0;
    if (nv == -1 || nv > 1)
        e->a = unleb(&q, qend);
    for (int i = 2; nv != -1 && i < nv; i++)
        (void)unleb(&q, qend);
    d->p = nv == -1 ? qend : q;
    e->next = d->p;
    return true;
}

/* Applies b's events before below (all: INT64_MAX) to sh. */
static void sh_apply_buf(struct shadow *sh, const struct tbuf *b,
                         int64_t below)
{
    struct dec d;
    struct devent e;
    if (!dec_open(&d, b))
        return;
    while (dec_next(&d, &e) && e.ts < below)
        sh_apply(sh, d.pid, e.ev, e.ts, e.a);
}

/* Takes l; bounded (a report on a dying process, maybe from a signal
 * handler that interrupted l's holder on this very thread): only if it
 * comes free within about a second, else false. */
static bool take(struct gmp__mutex *l, bool bounded)
{
    if (!bounded) {
        gmp__lock(l);
        return true;
    }
    for (int i = 0; i < 1000; i++) {
        uint32_t z = GMP_MUTEX_UNLOCKED;
        /* Acquire: as in gmp__lock. */
        if (atomic_compare_exchange_strong_explicit(
                &l->key, &z, GMP_MUTEX_LOCKED, memory_order_acquire,
                memory_order_relaxed))
            return true;
        struct timespec ms = {0, 1000000};
        GMP_LIBC(nanosleep)(&ms, NULL);
    }
    return false;
}

/* Moves the writers' queue onto the ring, and (unless dying) drops the
 * ring's oldest buffers into SH until it holds ringmax. Context: the
 * writer thread or a report; takes qlock and rlock (bounded, dying);
 * false if it could not. Allocates only when not dying. */
static bool absorb_q(bool dying)
{
    bool trim = !dying;
    if (!take(&T.qlock, dying))
        return false;
    struct tbuf *q = T.qhead;
    T.qhead = T.qtail = NULL;
    gmp__unlock(&T.qlock);
    if (!take(&T.rlock, dying))
        return false;
    while (q) {
        struct tbuf *next = q->next;
        tbq_append(&T.rhead, &T.rtail, q);
        T.rn++;
        q = next;
    }
    struct tbuf *freed = NULL;
    bool dropped = false;
    while (trim && T.rn > T.ringmax) {
        struct tbuf *b = T.rhead;
        T.rhead = b->next;
        if (!T.rhead)
            T.rtail = NULL;
        T.rn--;
        sh_apply_buf(&SH, b, INT64_MAX);
        b->next = freed;
        freed = b;
        dropped = true;
    }
    if (dropped) {
        /* What is still in a buffer is at or after the first event of
         * the oldest one kept, or of a slot's current one. */
        int64_t w = T.rhead ? atomic_load_explicit(&T.rhead->firstts,
                                                   memory_order_relaxed)
                            : INT64_MAX;
        for (int i = 0; i <= GMP_MAXPROCS; i++) {
            /* Acquire: pairs with emit's release of the slot; a stale
             * buffer only keeps an entry longer. Relaxed for firstts: see
             * struct tbuf. */
            struct tbuf *c = __atomic_load_n(&tslot[i].cur, __ATOMIC_ACQUIRE);
            int64_t f = c ? atomic_load_explicit(&c->firstts,
                                                 memory_order_relaxed)
                          : 0;
            if (f > 0 && f < w)
                w = f;
        }
        sh_purge(&SH, w);
    }
    gmp__unlock(&T.rlock);
    if (freed) {
        gmp__lock(&T.qlock);
        while (freed) {
            struct tbuf *next = freed->next;
            freed->next = T.freel;
            T.freel = freed;
            freed = next;
        }
        gmp__unlock(&T.qlock);
    }
    return true;
}

static void absorb(void)
{
    absorb_q(false);
}

/* ---- The writer --------------------------------------------------------- */


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
        T.ring ? absorb() : drain();
    T.ring ? absorb() : drain();    /* what the stop queued */
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
    emit(sl, -1, TEV_GOCREATE, w->ts, gp->goid, stack_of(gp->fn));
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
    int err = fd >= 0 ? write_all(fd, hdr, sizeof hdr) : 0;
    if (!err && fd >= 0)
        err = write_all(fd, freq, (size_t)(p - freq));
    if (err)
        return -err;
    T.fd = fd;
    T.werr = 0;
    T.procs = s->maxprocs;          /* a resize may take any of them */
    gmp__noteclear(&T.stopnote);
    /* Release: as in emit. */
    for (int i = 0; i <= T.procs; i++) {
        int slot = i < T.procs ? i : GLOBAL_SLOT;
        struct tbuf *b = refill(NULL, i < T.procs ? i : -1);
        __atomic_store_n(&tslot[slot].cur, b, __ATOMIC_RELEASE);
        if (!b)
            goto nomem;
    }
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
    emit(&tslot[GLOBAL_SLOT], -1, TEV_GOMAXPROCS, w.ts,
         (uint64_t)gmp__procs(s), 0);
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
            __atomic_store_n(&tslot[i].cur, NULL, __ATOMIC_RELAXED);
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
        __atomic_store_n(&tslot[i].cur, NULL, __ATOMIC_RELAXED);
        tbq_append(&T.qhead, &T.qtail, b);
    }
    gmp__unlock(&T.qlock);
}

/* Lets the writer write what is queued, joins it and frees the buffers.
 * Returns 0 or the writer's error. Context: lk held, after stop_locked. */
static int finish_locked(void)
{
    gmp__notewakeup(&T.stopnote);
    pthread_join(T.writer, NULL);
    if (T.ring) {
        gmp__lock(&T.rlock);
        for (struct tbuf *b = T.rhead, *next; b; b = next) {
            next = b->next;
            gmp__free(b, sizeof *b);
        }
        T.rhead = T.rtail = NULL;
        T.rn = 0;
        if (SH.tab)
            gmp__free(SH.tab, (size_t)SH.cap * sizeof *SH.tab);
        memset(&SH, 0, sizeof SH);
        gmp__unlock(&T.rlock);
        T.ring = false;
    }
    free_buffers();
    if (!T.werr && T.fd >= 0) {     /* a trace's stack table, at its end */
        struct frout o = {T.fd, 0};
        stacks_out(&o, false);
        T.werr = o.err;
    }
    if (T.own_fd)
        GMP_LIBC(close)(T.fd);
    T.active = false;
    T.own_fd = false;
    return T.werr ? -T.werr : 0;
}

/* The start's prologue: lk, no trace yet, the world stopped. Returns 0
 * with lk held and *sp the runtime, else the error with lk free. */
static int begin_start(struct schedt **sp)
{
#ifdef GMP_NO_EXECTRACE
    (void)sp;
    return GMP_EPERM;               /* compiled out: exectrace.h */
#endif
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
    *sp = s;
    return 0;
}

/* lk, a trace on (ring: a flight recorder), the world stopped. Returns 0
 * with lk held, else the error with lk free. While the runtime stops,
 * gmp__trace_free ends the trace instead. */
static int hold_trace(bool ring)
{
    gmp_mutex_lock(&T.lk);
    if (!T.active || (ring && !T.ring)) {
        gmp_mutex_unlock(&T.lk);
        return GMP_EPERM;
    }
    int err = gmp_stop_world();
    if (err)
        gmp_mutex_unlock(&T.lk);
    return err;
}

/* Ends the trace (ring: only a flight recorder's); returns
 * finish_locked's result. */
static int end_trace(bool ring)
{
    int err = hold_trace(ring);
    if (err)
        return err;
    stop_locked();
    gmp_start_world();
    err = finish_locked();
    gmp_mutex_unlock(&T.lk);
    return err;
}

int gmp_trace_start(int fd)
{
    if (fd < 0)
        return GMP_EBADF;
    struct schedt *s;
    int err = begin_start(&s);
    if (err)
        return err;
    err = start_locked(s, fd);
    gmp_start_world();
    gmp_mutex_unlock(&T.lk);
    return err;
}

int gmp_trace_stop(void)
{
    return end_trace(false);
}


/* ---- The flight recorder: writing the window ---------------------------- */

/* What a dump may touch. */
enum {
    FR_STILL = 1,                   /* nobody writes the slots' current
                                       buffers (world stopped, or every M
                                       idle) */
    FR_LIVE = 2,                    /* apply to SH itself: the process is
                                       dying, allocate nothing */
};


/* Writes b's events in [from, below) as a batch of their own. */
static void out_buf(struct frout *o, const struct tbuf *b, int64_t from,
                    int64_t below)
{
    struct dec d;
    struct devent e, first;
    if (!dec_open(&d, b))
        return;
    bool have = false;
    const uint8_t *end = NULL;
    while (dec_next(&d, &e)) {
        if (e.ts >= below)
            break;
        if (!have && e.ts >= from) {
            first = e;
            have = true;
        }
        end = e.next;
    }
    if (!have)
        return;
    /* The batch header, then the first event again with time delta 0
     * (its delta was from an event not written), then the rest as is. */
    uint8_t hdr[2 * EV_MAX], *p = enc_batch(hdr, d.pid, first.ts);
    int nv = first.at[0] >> 6;
    size_t rest = (size_t)(first.next - first.args);
    if (nv == 3) {                  /* length-prefixed: the length changes */
        *p++ = first.at[0];
        p = uleb(p, rest + 1);
    } else {
        *p++ = first.at[0];
    }
    *p++ = 0;                       /* delta 0 */
    out(o, hdr, (size_t)(p - hdr));
    out(o, first.args, rest);
    out(o, first.next, (size_t)(end - first.next));
}

/* The window: the shadow's state at the first kept event as a prefix
 * (as gmp_trace_start writes a trace's), then every buffer's events from
 * there on. Context: rlock held; mode as above. */
static int fr_write_locked(int fd, int mode)
{
    struct frout o = {fd, 0};
    struct shadow *sh = &SH;
    if (!(mode & FR_LIVE)) {
        sh = gmp__alloc(sizeof *sh);
        if (!sh)
            return GMP_ENOMEM;
        *sh = SH;
        sh->tab = SH.cap ? gmp__alloc((size_t)SH.cap * sizeof *sh->tab)
                         : NULL;
        if (SH.cap && !sh->tab) {
            gmp__free(sh, sizeof *sh);
            return GMP_ENOMEM;
        }
        if (SH.cap)
            memcpy(sh->tab, SH.tab, (size_t)SH.cap * sizeof *sh->tab);
    } else {
        sh->fixed = true;
    }
    /* While the world runs, the window ends where the dump began: the
     * current buffers are read up to what their writers had published,
     * and an event whose clock was read before and is published after
     * is the limit the essay names. */
    int64_t below = mode & FR_STILL ? INT64_MAX : gmp__nanotime();
    struct tbuf *cur[GMP_MAXPROCS + 1];
    for (int i = 0; i <= GMP_MAXPROCS; i++)
        /* Acquire: as in absorb; a buffer stays ours to read while rlock
         * keeps it from the free list. */
        cur[i] = __atomic_load_n(&tslot[i].cur, __ATOMIC_ACQUIRE);
    /* The cut: every event before it goes into the prefix, from the
     * buffers still kept too, each stream in its order. */
    int64_t cut = sh->maxts > 0 ? sh->maxts + 1 : 0;
    if (cut) {
        for (struct tbuf *b = T.rhead; b; b = b->next)
            sh_apply_buf(sh, b, cut);
        for (int i = 0; i <= GMP_MAXPROCS; i++)
            if (cur[i])
                sh_apply_buf(sh, cur[i], cut);
    }
    static const char hdr[16] = "go 1.19 trace\0\0\0";
    uint8_t buf[4 * EV_MAX], *p = buf;
    *p++ = TEV_FREQUENCY;
    p = uleb(p, 1000000000);
    out(&o, hdr, sizeof hdr);
    out(&o, buf, (size_t)(p - buf));
    if (cut) {
        /* Goroutines at cut - 3, the Ps' starts at cut - 2: before any
         * kept event, in the order the parser needs them. */
        p = enc_batch(buf, -1, cut - 3);
        p = enc_ev(p, TEV_GOMAXPROCS, 0, (uint64_t)T.procs, 0);
        out(&o, buf, (size_t)(p - buf));
        for (uint32_t i = 0; i < sh->cap; i++) {
            struct shg *e = &sh->tab[i];
            if (!e->goid || e->st == SG_DEAD)
                continue;
            p = enc_ev(buf, TEV_GOCREATE, 0, e->goid, STK_UNKNOWN);
            if (e->st == SG_WAITING)
                p = enc_ev(p, TEV_GOWAITING, 0, e->goid, 0);
            else if (e->st == SG_SYSCALL)
                p = enc_ev(p, TEV_GOINSYSCALL, 0, e->goid, 0);
            out(&o, buf, (size_t)(p - buf));
        }
        for (int i = 0; i < T.procs; i++) {
            struct shp *pp = &sh->p[i];
            if (!pp->running)
                continue;
            p = enc_batch(buf, i, cut - 2);
            p = enc_ev(p, TEV_PROCSTART, 0, pp->tid, 0);
            struct shg *e = pp->curg ? sh_find(sh, pp->curg, false) : NULL;
            if (e && e->st == SG_RUNNING)
                p = enc_ev(p, TEV_GOSTARTLOCAL, 0, pp->curg, 0);
            out(&o, buf, (size_t)(p - buf));
        }
    }
    for (struct tbuf *b = T.rhead; b; b = b->next)
        out_buf(&o, b, cut, below);
    for (int i = 0; i <= GMP_MAXPROCS; i++)
        if (cur[i])
            out_buf(&o, cur[i], cut, below);
    stacks_out(&o, mode & FR_LIVE);
    if (sh != &SH) {
        if (sh->tab)
            gmp__free(sh->tab, (size_t)sh->cap * sizeof *sh->tab);
        gmp__free(sh, sizeof *sh);
    }
    return o.err ? -o.err : 0;
}

int gmp_flightrec_start(size_t bytes)
{
    if (bytes < 2 * TBUF_SIZE)
        bytes = 2 * TBUF_SIZE;
    struct schedt *s;
    int err = begin_start(&s);
    if (err)
        return err;
    gmp__lock(&T.rlock);            /* reports read ring under it */
    T.ring = true;
    T.ringmax = bytes / TBUF_SIZE;
    gmp__unlock(&T.rlock);
    err = start_locked(s, -1);
    if (err) {
        gmp__lock(&T.rlock);
        T.ring = false;
        gmp__unlock(&T.rlock);
    }
    gmp_start_world();
    gmp_mutex_unlock(&T.lk);
    return err;
}

int gmp_flightrec_stop(void)
{
    return end_trace(true);         /* no fd: finish_locked gives 0 */
}

int gmp_flightrec_write(int fd)
{
    if (fd < 0)
        return GMP_EBADF;
    int err = hold_trace(true);
    if (err)
        return err;
    absorb();                       /* full buffers the writer has not */
    gmp__lock(&T.rlock);
    err = fr_write_locked(fd, FR_STILL);
    gmp__unlock(&T.rlock);
    gmp_start_world();
    gmp_mutex_unlock(&T.lk);
    return err;
}

/* Writes the window to GMP_FLIGHTREC's file for a report. quiet: no M
 * runs a goroutine (the deadlock report), so the current buffers are
 * whole; else they are left out and the window ends where the oldest of
 * them begins. dying: the process ends after the report (SH is used up).
 * Context: sysmon, or a fatal report. */
void gmp__flightrec_report(bool quiet, bool dying)
{
    char path[4096];
    /* Relaxed: a hint; ring and frpath are settled under rlock. */
    if (!gmp__trace_on())
        return;
    if (!take(&T.rlock, dying))
        goto held;
    bool on = T.ring && T.frpath && strlen(T.frpath) < sizeof path;
    if (on)
        strcpy(path, T.frpath);
    gmp__unlock(&T.rlock);
    if (!on)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (!absorb_q(dying) || !take(&T.rlock, dying)) {
        GMP_LIBC(close)(fd);
        goto held;
    }
    int err = T.ring ? fr_write_locked(fd, (quiet ? FR_STILL : 0) |
                                               (dying ? FR_LIVE : 0))
                     : GMP_EPERM;
    gmp__unlock(&T.rlock);
    GMP_LIBC(close)(fd);
    gmp__fatal_puts(err ? "gmprt: flight recorder: writing failed: "
                        : "gmprt: flight recorder written to ");
    gmp__fatal_puts(path);
    gmp__fatal_puts("\n");
    return;
held:
    gmp__fatal_puts("gmprt: flight recorder: not written, its lock is held "
                    "(by the code this report interrupted?)\n");
}

/* GMP_FLIGHTREC=path [GMP_FLIGHTREC_SIZE=bytes]: a flight recorder for
 * the whole run, written there by the reports. */
static void flightrec_env(void)
{
    const char *path = getenv("GMP_FLIGHTREC");
    if (!path || !*path)
        return;
    const char *sz = getenv("GMP_FLIGHTREC_SIZE");
    char *end;
    unsigned long long n = sz && *sz ? strtoull(sz, &end, 10) : 0;
    size_t bytes = n && !*end ? (size_t)n : (size_t)4 << 20;
    size_t len = strlen(path) + 1;
    char *copy = gmp__alloc(len);
    if (!copy)
        return;
    memcpy(copy, path, len);
    if (gmp_flightrec_start(bytes) != 0) {
        gmp__free(copy, len);
        return;
    }
    gmp__lock(&T.rlock);
    T.frpath = copy;
    gmp__unlock(&T.rlock);
}

void gmp__trace_env(struct schedt *s)
{
    (void)s;
    flightrec_env();
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
    if (T.frpath) {
        gmp__free(T.frpath, strlen(T.frpath) + 1);
        T.frpath = NULL;
    }
    if (!T.active)
        return;
    stop_locked();
    finish_locked();
}
