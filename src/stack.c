/*
 * stack.c - goroutine stacks: carved in chunks from aligned arenas, lazily
 * committed, a guard below each, cached per P and globally; and the
 * stack-overflow report.
 *
 * A stack slot is sched.stack_size bytes: [guard][usable]; its record
 * (struct gstack) sits in its chunk's array. Slots come in chunks of
 * STACKS_PER_CHUNK, carved from arenas of ARENA_SIZE mapped with
 * MAP_NORESERVE so that only touched pages cost memory, and prepared a
 * whole chunk at a time (chunk_new): guards, and, when few Ps can run at
 * once, each slot's top page faulted in. Why arenas: chunk_new.
 * Guards are installed with MADV_GUARD_INSTALL (Linux 6.13+: no extra
 * mappings, so a million stacks stay far below vm.max_map_count) and with
 * mprotect(PROT_NONE) where the kernel lacks it (each guard then splits
 * the mapping).
 *
 * Caches: a freed stack goes to its P's list; past PCACHE_MAX, half moves
 * to the global list (sched.stacklock). A P with none takes a batch back
 * from the global list before carving a new chunk. Arenas are unmapped
 * only when the runtime is freed.
 *
 * Overflow: a fault inside the current G's guard, or below it within one
 * slot where the G's own frame reached (is_overflow), is reported
 *   gmprt: fatal error: stack overflow in goroutine N
 * by a SIGSEGV/SIGBUS handler running on the M's alternate signal stack;
 * any other fault goes to the handler that was installed before ours
 * (signals.c). What a guard cannot catch: docs/design.md, "Stacks".
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "interrupt.h"
#include "runtime.h"
#include "signals.h"
#include "alloc.h"
#include "trace.h"

/* Valgrind must be told where stacks are, or it reads every switch as a
 * wild stack-pointer change. The client requests are a few no-op
 * instructions when not under valgrind; built in when its header is. */
#if defined(GMP_VALGRIND)
#include <valgrind/valgrind.h>
#define VG_STACK_REGISTER(lo, hi) VALGRIND_STACK_REGISTER((lo), (hi))
#define VG_STACK_DEREGISTER(id)   VALGRIND_STACK_DEREGISTER(id)
#define VG_RUNNING                RUNNING_ON_VALGRIND
#else
#define VG_STACK_REGISTER(lo, hi) ((void)(lo), (void)(hi), 0u)
#define VG_STACK_DEREGISTER(id)   ((void)(id))
#define VG_RUNNING                0
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define STACKS_PER_CHUNK   64
#define ARENA_SIZE         ((size_t)1 << 30)  /* see chunk_new */
#define CHUNK_RECORD_SIZE                                                    \
    (sizeof(struct stackchunk) + STACKS_PER_CHUNK * sizeof(struct gstack))
#define PCACHE_MAX         32
#define POPULATE_MAX_BUSY  2        /* see chunk_new */
#define ALTSTACK_MIN       (64 * 1024)

enum { GUARD_UNKNOWN, GUARD_MADVISE, GUARD_MPROTECT };

/* Whether the kernel's own copy (process_vm_readv) from the byte at p
 * fails with EFAULT, as it does from a guard page, whichever way the
 * guard was installed. Context: any. */
bool gmp__kernel_refuses(const char *p)
{
    char byte;
    struct iovec to = {.iov_base = &byte, .iov_len = 1};
    struct iovec from = {.iov_base = (void *)p, .iov_len = 1};
    return process_vm_readv(getpid(), &to, 1, &from, 1, 0) < 0 &&
           errno == EFAULT;
}

/* Installs a guard region on [page, page + len) and reports whether it
 * really faults. MADV_GUARD_INSTALL counts only if the kernel then
 * refuses to read the page: an emulator (qemu-user) answers 0 to advice
 * it ignores, and a kernel or sandbox without process_vm_readv gets
 * mprotect guards, which always work. Installing the guard again later
 * is a no-op; a failed probe changed nothing. */
bool gmp__guard_region_works(char *page, size_t len)
{
    return madvise(page, len, MADV_GUARD_INSTALL) == 0 &&
           gmp__kernel_refuses(page);
}

/* Applies advice to every range of iov in one system call (process_madvise
 * on our own pidfd, Linux 6.13+ for this advice) and reports whether all
 * of it took. Where the kernel refuses, the caller goes range by range. */
static bool advise_all(struct schedt *s, struct iovec *iov, int n, int advice)
{
#ifdef SYS_process_madvise
    if (s->pidfd < 0)
        return false;
    size_t want = 0;
    for (int i = 0; i < n; i++)
        want += iov[i].iov_len;
    long done = syscall(SYS_process_madvise, s->pidfd, iov, (size_t)n,
                        advice, 0u);
    return done >= 0 && (size_t)done == want;
#else
    (void)s, (void)iov, (void)n, (void)advice;
    return false;
#endif
}

/* Moves stacks from the list *from to pp's cache until it is half full. */
static void pcache_fill(struct p *pp, struct gstack **from)
{
    while (*from && pp->nsfree < PCACHE_MAX / 2) {
        struct gstack *x = *from;
        *from = x->next;
        x->next = pp->sfree;
        pp->sfree = x;
        pp->nsfree++;
    }
}

/* Installs the guard below the slot at base, in the mode chosen when the
 * first chunk was mapped. Context: no lock held: it is a system call. */
static bool guard_install(struct schedt *s, char *base)
{
    if (s->guard_mode == GUARD_MADVISE)
        return madvise(base, s->guard_size, MADV_GUARD_INSTALL) == 0;
    return mprotect(base, s->guard_size, PROT_NONE) == 0;
}

/* Picks the guard mode and opens the pidfd for batched advice, once per
 * runtime, probing on a page of the first arena. Context: holds
 * arenalock. */
static void stack_setup(struct schedt *s, char *page)
{
    if (s->guard_mode != GUARD_UNKNOWN)
        return;
    s->guard_mode = gmp__guard_region_works(page, s->guard_size)
                        ? GUARD_MADVISE
                        : GUARD_MPROTECT;
    s->pidfd = -1;
#ifdef SYS_pidfd_open
    /* Not under valgrind, which knows neither call and says so. */
    if (!VG_RUNNING)
        s->pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0u);  /* CLOEXEC */
#endif
}

/* Fills iov with n ranges of len bytes, the first at first, step apart:
 * one batch of advice for advise_all. */
static void iov_fill(struct iovec *iov, int n, char *first, size_t step,
                     size_t len)
{
    for (int i = 0; i < n; i++)
        iov[i] = (struct iovec){first + (size_t)i * step, len};
}

/* Maps len bytes at an address aligned to ARENA_SIZE: a reservation of
 * len + ARENA_SIZE, trimmed. NULL when the address space is short (a
 * limit on it), for the caller to map less. */
static char *map_aligned(size_t len)
{
    size_t span = len + ARENA_SIZE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)p + ARENA_SIZE - 1) & ~(ARENA_SIZE - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    munmap(a + len, (size_t)(p + span - (a + len)));  /* at least a page */
    return a;
}

/* Maps a new arena: as many whole chunks as fit in ARENA_SIZE, aligned to
 * it; or one chunk where that cannot be (stacks past ARENA_SIZE /
 * STACKS_PER_CHUNK, stack memory from the host's hook, or no address
 * space for the reservation). NULL when no memory can be had. Context:
 * holds arenalock. */
static struct stackarena *arena_new(struct schedt *s)
{
    struct stackarena *a = gmp__alloc(sizeof *a);
    if (!a)
        return NULL;
    size_t chunk = s->stack_size * STACKS_PER_CHUNK;
    if (!gmp__hooks.stack_alloc && chunk <= ARENA_SIZE) {
        a->len = ARENA_SIZE / chunk * chunk;
        a->base = map_aligned(a->len);
    }
    if (!a->base) {
        a->len = chunk;
        a->base = gmp__stack_map(chunk);
    }
    if (!a->base) {
        gmp__free(a, sizeof *a);
        return NULL;
    }
    stack_setup(s, a->base);
    a->next = s->arenas;
    s->arenas = a;
    return a;
}

/* Makes the page tables of all of a, in one burst, by installing the
 * guard of one slot in every range that a page-table page maps (a page's
 * worth of 8-byte entries: 2 MiB with 4 KiB pages). Those guards are
 * installed again with their chunks, which is a no-op. Best effort: a
 * range it misses gets its table when its chunk is prepared. Context:
 * holds arenalock. */
static void arena_tables(struct schedt *s, struct stackarena *a)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = page * (page / sizeof(uint64_t));
    size_t step = (span > s->stack_size ? span / s->stack_size : 1) *
                  s->stack_size;
    size_t left = (a->len + step - 1) / step;   /* guards to install */
    struct iovec iov[STACKS_PER_CHUNK];
    for (char *at = a->base; left > 0; at += STACKS_PER_CHUNK * step) {
        int n = left < STACKS_PER_CHUNK ? (int)left : STACKS_PER_CHUNK;
        iov_fill(iov, n, at, step, s->guard_size);
        if (!advise_all(s, iov, n, MADV_GUARD_INSTALL))
            return;
        left -= (size_t)n;
    }
}

/*
 * Carves a chunk of STACKS_PER_CHUNK slots from the current arena (a new
 * one when it is used up) and makes every slot a stack: guard, record,
 * sanitizer and valgrind bookkeeping, and when few Ps can run at once
 * the first page faulted in. The caller gets one stack, pp's cache up to
 * half its size, the global list the rest. NULL when no memory can be
 * had.
 *
 * Why a whole chunk at once: a slot's guard is a system call, far dearer
 * than the rest of starting a goroutine; one batched process_madvise
 * installs them for all slots. Where the kernel refuses a batch, the
 * advice goes slot by slot.
 *
 * Why arenas, aligned, with their page tables made ahead: a chunk's
 * guards create the page-table pages of its range, one per 2 MiB, so
 * they write that many entries of the page directory above, which maps
 * 1 GiB. A hypervisor that shadows the guest's page tables (the 2-CPU VM
 * of README.md's table) takes a burst of writes to a directory as a sign
 * that it is no longer one, and drops its shadow with everything under
 * it: each live stack in that gigabyte then pays a hypervisor fault
 * (2-8 us) on its next touch. With a chunk per mapping every chunk did
 * that to the stacks around it; in `timers` a third of the CPU time went
 * to the first load from a resumed sleeper's stack. An aligned arena
 * owns its directory, and arena_tables fills it in one burst when the
 * second chunk is carved, with one chunk's stacks live at most (the
 * first chunk alone costs what it always did: small programs map no
 * more); chunks after that write only page-table entries, which the
 * hypervisor follows without dropping anything. Measured on that VM,
 * `timers` (medians of 7, alternated): procs=2 255 ms against 297, Go
 * 311; procs=16 285 against 344. arena_tables took 0.33-0.40 ms there.
 *
 * When at most POPULATE_MAX_BUSY Ps can run at once (the fewer of procs
 * and the CPUs we may use), a second batch (MADV_POPULATE_WRITE) faults
 * in each slot's top page, the one its goroutine touches first; with
 * more, each page faults on its goroutine's first run, one at a time.
 * Measured (a chunk: map, guards, populate, first write of each top page,
 * when the records still sat there):
 * - 2-CPU VM whose hypervisor charges 13-19 us for the first write to any
 *   fresh page, populate or not: 1.0 ms a chunk with the populate, 1.35 ms
 *   without; `timers` at procs=2, 388 ms against 418.
 * - 16-CPU machine: 0.15 ms alone, the first writes then free. But Ps map
 *   chunks at once when goroutines start faster than stacks come back,
 *   and the kernel's page allocation and LRU locks then stretched a chunk
 *   to 1.6-2.1 ms inside the runtime, all of it with this M holding the P:
 *   its queue and due timers wait. The populate drains the LRU batches
 *   on every call (a profile showed the lock); page faults contended
 *   less. `timers` without the populate, from procs=3 to 16: 10-35%
 *   faster, timers 2-4x less late (at procs=16, 105 ms against 135,
 *   250-280 us late against 680-910); at procs=2 the same either way.
 * - What contends is chunks prepared at the same moment, so the CPUs
 *   count, not the Ps: on the 2-CPU VM at procs=4 and 16 the populate
 *   saves 7-10% of `timers` (395 ms against 426, 462 against 516;
 *   medians of 5, alternated).
 *
 * A slot whose guard cannot be installed is never handed out; its page
 * stays mapped until the runtime stops. Context: g0, owner of pp, no lock
 * held (it is system calls and page faults; arenalock is held across the
 * mapping and the guards, which only other chunk preparations wait for).
 */
static struct gstack *chunk_new(struct schedt *s, struct p *pp)
{
    struct stackchunk *c = gmp__alloc(CHUNK_RECORD_SIZE);
    if (!c)
        return NULL;
    size_t chunk = s->stack_size * STACKS_PER_CHUNK;
    gmp__lock(&s->arenalock);
    struct stackarena *a = s->arenas;
    if ((!a || a->carved == a->len) && !(a = arena_new(s))) {
        gmp__unlock(&s->arenalock);
        gmp__free(c, CHUNK_RECORD_SIZE);
        return NULL;
    }
    if (s->guard_mode == GUARD_MADVISE && a->carved == chunk)
        arena_tables(s, a);         /* the second chunk: see above */
    c->base = a->base + a->carved;
    a->carved += chunk;
    c->next = s->chunks;
    s->chunks = c;
    gmp__unlock(&s->arenalock);

    struct iovec iov[STACKS_PER_CHUNK];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    iov_fill(iov, STACKS_PER_CHUNK, c->base, s->stack_size, s->guard_size);
    bool guarded = s->guard_mode == GUARD_MADVISE &&
                   advise_all(s, iov, STACKS_PER_CHUNK, MADV_GUARD_INSTALL);
    iov_fill(iov, STACKS_PER_CHUNK, c->base + s->stack_size - page,
             s->stack_size, page);          /* each slot's top page */
    int busy = gmp__procs(s) < s->cpus ? gmp__procs(s) : s->cpus;
    if (busy <= POPULATE_MAX_BUSY &&
        !advise_all(s, iov, STACKS_PER_CHUNK, MADV_POPULATE_WRITE))
        for (int i = 0; i < STACKS_PER_CHUNK; i++)
            if (madvise(iov[i].iov_base, page, MADV_POPULATE_WRITE) != 0)
                break;              /* before Linux 5.14: fault on use */

    struct gstack *head = NULL, *tail = NULL;
    for (int i = 0; i < STACKS_PER_CHUNK; i++) {
        char *base = c->base + (size_t)i * s->stack_size;
        struct gstack *st = &c->slot[i];
        st->lo = base + s->guard_size;
        st->hi = base + s->stack_size;
        st->tsan_fiber = GMP_TSAN_CREATE();
        st->vg_id = VG_STACK_REGISTER(st->lo, gstack_hi(st));
        st->next = NULL;
        if (!guarded && !guard_install(s, base))
            continue;
        if (tail)
            tail->next = st;
        else
            head = st;
        tail = st;
    }

    struct gstack *mine = head;
    if (mine)
        head = mine->next;
    pcache_fill(pp, &head);
    if (head) {
        gmp__lock(&s->stacklock);
        tail->next = s->sfree;
        s->sfree = head;
        gmp__unlock(&s->stacklock);
    }
    return mine;
}

size_t gmp__guard_for(size_t stack_size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t g = stack_size / 8;
    if (g > 64 * 1024)
        g = 64 * 1024;
    g &= ~(page - 1);
    return g < page ? page : g;
}

/* A goroutine's own stack: one mapping, its guard by mprotect (a mapping
 * of its own anyway), nothing cached. Rare by design: goroutines that
 * need a size other than the runtime's. */
struct gstack *gmp__stackalloc_own(size_t size)
{
    struct gstack *st = gmp__alloc(sizeof *st);
    if (!st)
        return NULL;
    char *base = gmp__stack_map(size);
    size_t guard = gmp__guard_for(size);
    if (!base || mprotect(base, guard, PROT_NONE) != 0) {
        gmp__stack_unmap(base, size);
        gmp__free(st, sizeof *st);
        return NULL;
    }
    st->lo = base + guard;
    st->hi = base + size;
    st->own = size;
    st->tsan_fiber = GMP_TSAN_CREATE();
    st->vg_id = VG_STACK_REGISTER(st->lo, gstack_hi(st));
    return st;
}

static void stackfree_own(struct gstack *st)
{
    char *base = st->hi - st->own;
    GMP_TSAN_DESTROY(st->tsan_fiber);
    VG_STACK_DEREGISTER(st->vg_id);
    /* The host's stack_free gets its memory back as it gave it. */
    mprotect(base, (size_t)(st->lo - base), PROT_READ | PROT_WRITE);
    gmp__stack_unmap(base, st->own);
    gmp__free(st, sizeof *st);
}

/* Returns a stack for a G about to run for the first time, or NULL when
 * none can be had. Context: g0, owner of pp. Lock-free when pp's cache has
 * one (the steady state). */
struct gstack *gmp__stackalloc(struct schedt *s, struct p *pp)
{
    struct gstack *st = pp->sfree;
    if (GMP_LIKELY(st != NULL)) {
        pp->sfree = st->next;
        pp->nsfree--;
        return st;
    }
    gmp__lock(&s->stacklock);
    pcache_fill(pp, &s->sfree);     /* half the local cache, from global */
    st = pp->sfree;
    if (st) {
        pp->sfree = st->next;
        pp->nsfree--;
    }
    gmp__unlock(&s->stacklock);
    return st ? st : chunk_new(s, pp);
}

/* Takes back the stack of a dead G. Context: g0 (not on st), owner of pp. */
void gmp__stackfree(struct schedt *s, struct p *pp, struct gstack *st)
{
    if (GMP_UNLIKELY(st->own)) {
        stackfree_own(st);
        return;
    }
    st->next = pp->sfree;
    pp->sfree = st;
    if (GMP_LIKELY(++pp->nsfree <= PCACHE_MAX))
        return;
    gmp__lock(&s->stacklock);
    while (pp->nsfree > PCACHE_MAX / 2) {
        struct gstack *x = pp->sfree;
        pp->sfree = x->next;
        pp->nsfree--;
        x->next = s->sfree;
        s->sfree = x;
    }
    gmp__unlock(&s->stacklock);
}

/* Unmaps every arena. Context: the runtime is stopped; no thread runs. */
void gmp__stacks_release(struct schedt *s)
{
    while (s->chunks) {
        struct stackchunk *c = s->chunks;
        s->chunks = c->next;
        for (int i = 0; i < STACKS_PER_CHUNK; i++) {
            GMP_TSAN_DESTROY(c->slot[i].tsan_fiber);
            VG_STACK_DEREGISTER(c->slot[i].vg_id);
        }
        gmp__free(c, CHUNK_RECORD_SIZE);
    }
    while (s->arenas) {
        struct stackarena *a = s->arenas;
        s->arenas = a->next;
        if (gmp__hooks.stack_free) {
            /* The host gets its memory back as it gave it: no guards. */
            if (s->guard_mode == GUARD_MADVISE)
                madvise(a->base, a->len, MADV_GUARD_REMOVE);
            else
                mprotect(a->base, a->len, PROT_READ | PROT_WRITE);
        }
        gmp__stack_unmap(a->base, a->len);
        gmp__free(a, sizeof *a);
    }
    if (s->guard_mode != GUARD_UNKNOWN && s->pidfd >= 0)
        GMP_LIBC(close)(s->pidfd);
    s->guard_mode = GUARD_UNKNOWN;
}

/* ---- Overflow reporting ------------------------------------------------- */

/*
 * Whether a fault at addr is gp's stack overflow. In its guard it always
 * is: that is the runtime's own memory. Below the guard, within one slot,
 * it is when a frame bigger than the guard skipped it: the code that
 * faulted then ran on gp's stack (not on the thread's own stack or its
 * signal stack) and wrote into its own frame, at or above its stack
 * pointer (less the red zone), which therefore lies below the stack too.
 * Otherwise the address is only a neighbour's: the slot underneath is
 * another goroutine's stack, never faulting outside its guard, except
 * below the lowest slot of a chunk or a goroutine's own stack
 * (gmp_go_attr), where memory that is not the runtime's may sit. A
 * fault there is its owner's to handle (libgc's incremental mode
 * write-protects its heap and takes the faults of the first writes), and
 * goes down the chain. Context: the SIGSEGV/SIGBUS handler, on the
 * faulting thread.
 */
static bool is_overflow(struct m *mp, struct g *gp, const char *addr,
                        const ucontext_t *uc)
{
    const struct gstack *st = gp->stk;
    size_t span = st->own ? st->own : mp->sched->stack_size;
    const char *lo = st->lo, *base = st->hi - span;     /* the guard's */
    if (addr >= lo || addr < lo - span)
        return false;
    if (addr >= base)
        return true;
    const char *sp = (const char *)gmp__sigctx_sp(uc);
    const char *alt = mp->altstack;
    if ((sp >= alt && sp < alt + mp->altstack_size) ||
        (sp >= mp->g0lo && sp < mp->g0hi))
        return false;
    return sp <= addr + GMP_RED_ZONE;
}

void gmp__stack_fault(const siginfo_t *si, const ucontext_t *uc)
{
    struct m *mp = gmp__getm();
    struct g *gp = mp ? mp->curg : NULL;
    if (gp && gp->stk && is_overflow(mp, gp, si->si_addr, uc)) {
        gmp__fatal_begin("stack overflow in goroutine ");
        gmp__fatal_putn(gp->goid);
        gmp__fatal_puts("\n");
        gmp__dump_fatal(mp->sched);
        gmp__fatal_end();
    }
}

/* The signal stack's size: 64 KiB for the handler, plus what the kernel
 * needs for the signal frame on this machine, which arm64's SVE and SME
 * register state can make larger than the old constant SIGSTKSZ. glibc
 * gives that as sysconf(_SC_MINSIGSTKSZ); musl has no such name, and
 * the kernel's own figure comes from the auxiliary vector (Linux 5.14 and
 * later; 0 before, where SIGSTKSZ stands). */
static size_t altstack_size(void)
{
    size_t frame = SIGSTKSZ;
#if defined(_SC_MINSIGSTKSZ)
    long k = sysconf(_SC_MINSIGSTKSZ);
#elif defined(AT_MINSIGSTKSZ)
    long k = (long)getauxval(AT_MINSIGSTKSZ);
#else
    long k = 0;
#endif
    if (k > 0 && (size_t)k > frame)
        frame = (size_t)k;
    return ALTSTACK_MIN + frame;
}

int gmp__altstack_setup(struct m *mp)
{
    size_t size = altstack_size();
    void *mem = gmp__stack_map(size);
    if (!mem)
        return GMP_ENOMEM;
    stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0}, old;
    /* The old one into a local first: the kernel cannot write to the M's
     * record, the host's memory, while the host has it write-protected
     * (a collector's heap in incremental mode). It would fail with EFAULT
     * with the new stack already installed, leaving the thread a signal
     * stack that the failure path unmapped. A store of ours faults and is
     * handled. */
    if (sigaltstack(&ss, &old) != 0) {
        gmp__stack_unmap(mem, size);
        return GMP_ENOMEM;
    }
    mp->oldss = old;
    mp->altstack = mem;
    mp->altstack_size = size;
    return 0;
}

void gmp__altstack_release(struct m *mp)
{
    if (!mp->altstack)
        return;
    /* Put back what the thread had (for gmp_main's caller; a runtime
     * thread had none, and gets SS_DISABLE back). */
    sigaltstack(&mp->oldss, NULL);
    gmp__stack_unmap(mp->altstack, mp->altstack_size);
    mp->altstack = NULL;
}
