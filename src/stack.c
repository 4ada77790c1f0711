/*
 * stack.c - goroutine stacks: mmap'd in chunks, lazily committed, a guard
 * below each, cached per P and globally; and the stack-overflow report.
 *
 * A stack slot is sched.stack_size bytes: [guard][usable][struct gstack].
 * Slots are carved from chunks of STACKS_PER_CHUNK slots, mapped with
 * MAP_NORESERVE so only touched pages cost memory. Guards are installed
 * with MADV_GUARD_INSTALL (Linux 6.13+: no extra mappings, so a million
 * stacks stay far below vm.max_map_count) and with mprotect(PROT_NONE)
 * where the kernel lacks it (each guard then splits the mapping).
 *
 * Caches: a freed stack goes to its P's list; past PCACHE_MAX, half moves
 * to the global list (sched.stacklock). A P with none takes a batch back
 * from the global list before carving a new slot. Stacks are unmapped only
 * when the runtime is freed.
 *
 * Overflow: a fault inside the current G's guard is reported as
 *   gmprt: fatal error: stack overflow in goroutine N
 * by a SIGSEGV/SIGBUS handler running on the M's alternate signal stack;
 * any other fault goes to the handler that was installed before ours.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime.h"

/* Valgrind must be told where stacks are, or it reads every switch as a
 * wild stack-pointer change. The client requests are a few no-op
 * instructions when not under valgrind; built in when its header is. */
#if defined(GMP_VALGRIND)
#include <valgrind/valgrind.h>
#define VG_STACK_REGISTER(lo, hi) VALGRIND_STACK_REGISTER((lo), (hi))
#define VG_STACK_DEREGISTER(id)   VALGRIND_STACK_DEREGISTER(id)
#else
#define VG_STACK_REGISTER(lo, hi) ((void)(lo), (void)(hi), 0u)
#define VG_STACK_DEREGISTER(id)   ((void)(id))
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

#define STACKS_PER_CHUNK 64
#define PCACHE_MAX       32
#define ALTSTACK_MIN     (64 * 1024)

enum { GUARD_UNKNOWN, GUARD_MADVISE, GUARD_MPROTECT };

/* Installs a guard region on [page, page + len) and reports whether it
 * really faults. MADV_GUARD_INSTALL counts only if the kernel's own copy
 * from the page then fails with EFAULT: an emulator (qemu-user) answers 0
 * to advice it ignores, and a kernel or sandbox without process_vm_readv
 * gets mprotect guards, which always work. Installing the guard again
 * later is a no-op; a failed probe changed nothing. */
bool gmp__guard_region_works(char *page, size_t len)
{
    if (madvise(page, len, MADV_GUARD_INSTALL) != 0)
        return false;
    char byte;
    struct iovec to = {.iov_base = &byte, .iov_len = 1};
    struct iovec from = {.iov_base = page, .iov_len = 1};
    return process_vm_readv(getpid(), &to, 1, &from, 1, 0) < 0 &&
           errno == EFAULT;
}

/* Maps a new chunk and, the first time, picks the guard mode. Context:
 * holds stacklock. */
static bool chunk_new(struct schedt *s)
{
    struct stackchunk *c = malloc(sizeof *c);
    if (!c)
        return false;
    c->len = s->stack_size * STACKS_PER_CHUNK;
    c->base = mmap(NULL, c->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (c->base == MAP_FAILED) {
        free(c);
        return false;
    }
    if (s->guard_mode == GUARD_UNKNOWN)     /* once, on the first guard */
        s->guard_mode = gmp__guard_region_works(c->base, s->guard_size)
                            ? GUARD_MADVISE
                            : GUARD_MPROTECT;
    c->next = s->chunks;
    s->chunks = c;
    s->chunk_next = c->base;
    s->chunk_end = c->base + c->len;
    return true;
}

/* Installs the guard below the slot at base. The mode was chosen when the
 * chunk was mapped (under stacklock, which orders it for us). Context: no
 * lock held: it is a system call. */
static bool guard_install(struct schedt *s, char *base)
{
    if (s->guard_mode == GUARD_MADVISE)
        return madvise(base, s->guard_size, MADV_GUARD_INSTALL) == 0;
    return mprotect(base, s->guard_size, PROT_NONE) == 0;
}

/* The header of the slot at base: at its top, cache-line aligned. */
static struct gstack *slot_header(struct schedt *s, char *base)
{
    uintptr_t top = (uintptr_t)(base + s->stack_size);
    return (struct gstack *)((top - sizeof(struct gstack)) & ~(uintptr_t)63);
}

/* Reserves a new stack slot and returns its base. Context: holds
 * stacklock. */
static char *carve(struct schedt *s)
{
    if (s->chunk_next == s->chunk_end && !chunk_new(s))
        return NULL;
    char *base = s->chunk_next;
    s->chunk_next += s->stack_size;
    return base;
}

/* Makes the reserved slot at base a stack: header, sanitizer and valgrind
 * bookkeeping, guard. Outside stacklock: the header write is the slot's
 * first touch (a page fault) and the guard a system call, and neither
 * should hold up other Ps. A slot whose guard fails stays unused until
 * the runtime stops. Context: no lock held. */
static struct gstack *slot_init(struct schedt *s, char *base)
{
    struct gstack *st = slot_header(s, base);
    st->next = NULL;
    st->lo = base + s->guard_size;
    st->tsan_fiber = GMP_TSAN_CREATE();
    st->vg_id = VG_STACK_REGISTER(st->lo, gstack_hi(st));
    return guard_install(s, base) ? st : NULL;
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
    /* Refill half the local cache from the global list. */
    while (s->sfree && pp->nsfree < PCACHE_MAX / 2) {
        struct gstack *x = s->sfree;
        s->sfree = x->next;
        x->next = pp->sfree;
        pp->sfree = x;
        pp->nsfree++;
    }
    char *base = NULL;
    st = pp->sfree;
    if (st) {
        pp->sfree = st->next;
        pp->nsfree--;
    } else {
        base = carve(s);
    }
    gmp__unlock(&s->stacklock);
    return base ? slot_init(s, base) : st;
}

/* Takes back the stack of a dead G. Context: g0 (not on st), owner of pp. */
void gmp__stackfree(struct schedt *s, struct p *pp, struct gstack *st)
{
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

/* Unmaps every chunk. Context: the runtime is stopped; no thread runs. */
void gmp__stacks_release(struct schedt *s)
{
    for (struct stackchunk *c = s->chunks; c; c = c->next) {
        char *end = c == s->chunks ? s->chunk_next : c->base + c->len;
        for (char *b = c->base; b < end; b += s->stack_size) {
            struct gstack *st = slot_header(s, b);
            GMP_TSAN_DESTROY(st->tsan_fiber);
            VG_STACK_DEREGISTER(st->vg_id);
        }
    }
    struct stackchunk *c = s->chunks;
    while (c) {
        struct stackchunk *next = c->next;
        munmap(c->base, c->len);
        free(c);
        c = next;
    }
    s->chunks = NULL;
}

/* ---- Overflow reporting ------------------------------------------------- */

/* Process-wide, like the signal dispositions they save: what was installed
 * before us, restored when the runtime stops. */
static struct sigaction old_segv, old_bus;

static void fault_chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction *old = sig == SIGBUS ? &old_bus : &old_segv;
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, uc);
        return;
    }
    if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    /* Default action: reinstate it; returning re-executes the faulting
     * instruction, which now kills the process as it would have. */
    signal(sig, SIG_DFL);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    struct m *mp = gmp__getm();
    struct g *gp = mp ? mp->curg : NULL;
    if (gp && gp->stk) {
        struct schedt *s = mp->sched;
        char *addr = si->si_addr;
        char *lo = gp->stk->lo;
        if (addr < lo && addr >= lo - s->guard_size)
            gmp__fatal("stack overflow in goroutine ", gp->goid, true);
    }
    fault_chain(sig, si, uc);
}

int gmp__signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &old_segv) != 0)
        return -errno;
    if (sigaction(SIGBUS, &sa, &old_bus) != 0) {
        int e = -errno;
        sigaction(SIGSEGV, &old_segv, NULL);
        return e;
    }
    return 0;
}

void gmp__signals_restore(void)
{
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
}

/* The signal stack's size: 64 KiB for the handler, plus what the kernel
 * needs for the signal frame on this machine, which arm64's SVE and SME
 * register state can make larger than the old constant SIGSTKSZ. */
static size_t altstack_size(void)
{
    size_t frame = SIGSTKSZ;
#ifdef _SC_MINSIGSTKSZ
    long k = sysconf(_SC_MINSIGSTKSZ);
    if (k > 0 && (size_t)k > frame)
        frame = (size_t)k;
#endif
    return ALTSTACK_MIN + frame;
}

int gmp__altstack_setup(struct m *mp)
{
    size_t size = altstack_size();
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return GMP_ENOMEM;
    stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, &mp->oldss) != 0) {
        munmap(mem, size);
        return GMP_ENOMEM;
    }
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
    munmap(mp->altstack, mp->altstack_size);
    mp->altstack = NULL;
}
