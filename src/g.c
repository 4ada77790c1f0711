/*
 * g.c - creating and recycling goroutines: gmp_go (Go's newproc), the
 * free-G caches, goroutine ids and counts, and the small per-G queries.
 *
 * A new G gets a descriptor only; its stack is bound when it first runs
 * (sched.c), so a burst of spawns costs descriptors, not stacks.
 * Descriptors come from the P's free list, else the global free list (half
 * a P's list spills there past GFREE_MAX), else the P's slab: a run of
 * fresh Gs carved from a 2 MiB chunk. They are never freed while the
 * runtime runs; the chunks go when it stops.
 * Locks: none on the per-P paths; sched.gflock for the global list and the
 * slab list.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "exectrace.h"
#include "metrics.h"
#include "alloc.h"

#define GFREE_MAX   64
#define GSLAB_COUNT 256            /* Gs a P takes from a chunk at once */
#define GCHUNK_BYTES (2u << 20)   /* one huge page */
#define GCHUNK_HOOK_BYTES (64u << 10)   /* from mem_alloc: see gchunk_new */
#define GOID_BATCH  16

/* Maps a new chunk of zeroed Gs, 2 MiB-aligned and marked for transparent
 * huge pages: a burst of a million spawns then takes a few dozen page
 * faults instead of tens of thousands (a first-touch fault costs
 * microseconds on a VM). From the host's mem_alloc a chunk is 64 KiB
 * instead: the host decides about pages, and a host that scans what it
 * hands out (a collector's uncollectable heap, gmprt.h) reads all of a
 * chunk at every collection, used or not. With 2 MiB, 1,000 goroutines
 * under libgc spent a third of each collection reading the unused Gs of
 * their chunk (examples/gc_boehm.c, 20 runs of 100 collections at procs
 * 1: 2.5-3.4 s against 1.5-2.0 on a loaded 2-CPU machine). Context:
 * holds gflock. */
static bool gchunk_new(struct schedt *s)
{
    char *base;
    size_t len;
    if (gmp__hooks.mem_alloc) {
        len = GCHUNK_HOOK_BYTES;
        if (!(base = gmp__alloc(len)))
            return false;
    } else {
        len = GCHUNK_BYTES;
        char *raw = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (raw == MAP_FAILED)
            return false;
        base = (char *)(((uintptr_t)raw + len - 1) & ~(uintptr_t)(len - 1));
        if (base > raw)
            munmap(raw, (size_t)(base - raw));
        if (base + len < raw + 2 * len)
            munmap(base + len, (size_t)(raw + 2 * len - (base + len)));
        madvise(base, len, MADV_HUGEPAGE);  /* a hint; fine if refused */
    }
    struct gslab *sl = (struct gslab *)base;
    sl->next = s->gslabs;
    sl->len = len;
    /* A fatal report walks the slabs without gflock (trace.c's each_g).
     * Release: it must find next and len written in a slab it reaches.
     * Relaxed for the carve mark: it copes with the two out of step. */
    __atomic_store_n(&s->gslabs, sl, __ATOMIC_RELEASE);
    __atomic_store_n(&s->gchunk_next, sl->gs, __ATOMIC_RELAXED);
    s->gchunk_end = sl->gs + (len - sizeof *sl) / sizeof(struct g);
    return true;
}

/* Frees every slab, as gchunk_new got it (the hooks do not change while
 * a runtime runs). Context: runtime teardown. */
void gmp__gslabs_release(struct schedt *s)
{
    for (struct gslab *sl = s->gslabs, *next; sl; sl = next) {
        next = sl->next;
        if (gmp__hooks.mem_alloc)
            gmp__free(sl, sl->len);
        else
            munmap(sl, sl->len);
    }
    s->gslabs = NULL;
}

/* Carves up to n fresh Gs from the current chunk; returns the first and
 * how many in *got. Context: holds gflock. */
static struct g *gcarve(struct schedt *s, int n, int *got)
{
    if (s->gchunk_next >= s->gchunk_end && !gchunk_new(s))
        return NULL;
    long left = s->gchunk_end - s->gchunk_next;
    *got = n < left ? n : (int)left;
    struct g *gp = s->gchunk_next;
    /* Relaxed: as in gchunk_new. */
    __atomic_store_n(&s->gchunk_next, gp + *got, __ATOMIC_RELAXED);
    return gp;
}

/* A descriptor when pp's free list and slab are empty. pp may be NULL (a
 * foreign thread). Context: any; takes gflock. */
static struct g *gfget_slow(struct schedt *s, struct p *pp)
{
    struct g *gp = NULL;
    int got;
    gmp__lock(&s->gflock);
    if (pp) {
        /* Refill up to half the local cache from the global list. */
        while (s->gfree && pp->ngfree < GFREE_MAX / 2) {
            struct g *x = s->gfree;
            s->gfree = x->schedlink;
            x->schedlink = pp->gfree;
            pp->gfree = x;
            pp->ngfree++;
        }
        if ((gp = pp->gfree)) {
            pp->gfree = gp->schedlink;
            pp->ngfree--;
        } else if ((gp = gcarve(s, GSLAB_COUNT, &got))) {
            pp->gslab = gp + 1;
            pp->ngslab = got - 1;
        }
    } else if ((gp = s->gfree)) {
        s->gfree = gp->schedlink;
    } else {
        gp = gcarve(s, 1, &got);
    }
    gmp__unlock(&s->gflock);
    return gp;
}

/* Puts a dead G on pp's free list, spilling half past GFREE_MAX.
 * Context: g0, owner of pp. */
void gmp__gfput(struct schedt *s, struct p *pp, struct g *gp)
{
    gp->schedlink = pp->gfree;
    pp->gfree = gp;
    if (GMP_LIKELY(++pp->ngfree < GFREE_MAX))
        return;
    gmp__lock(&s->gflock);
    while (pp->ngfree > GFREE_MAX / 2) {
        struct g *x = pp->gfree;
        pp->gfree = x->schedlink;
        pp->ngfree--;
        x->schedlink = s->gfree;
        s->gfree = x;
    }
    gmp__unlock(&s->gflock);
}

/* Returns a runnable G for fn(arg), or NULL when out of memory. pp is the
 * caller's P, or NULL from a foreign thread. Context: any. */
struct g *gmp__newg(struct schedt *s, struct p *pp, void (*fn)(void *),
                    void *arg)
{
    struct g *gp;
    if (pp && GMP_LIKELY(pp->gfree != NULL)) {
        gp = pp->gfree;
        pp->gfree = gp->schedlink;
        pp->ngfree--;
    } else if (pp && pp->ngslab > 0) {
        gp = pp->gslab++;
        pp->ngslab--;
    } else if (!(gp = gfget_slow(s, pp))) {
        return NULL;
    }
    gp->schedlink = NULL;
    gp->m = NULL;
    /* Relaxed atomic stores, plain moves: schedtrace and gmp_dump read
     * these while the G is recycled (trace.c). */
    __atomic_store_n(&gp->fn, fn, __ATOMIC_RELAXED);
    __atomic_store_n(&gp->arg, arg, __ATOMIC_RELAXED);
    __atomic_store_n(&gp->waitreason, 0, __ATOMIC_RELAXED);
    /* Relaxed: informational; the run queue publishes the G. */
    atomic_store_explicit(&gp->status, G_RUNNABLE, memory_order_relaxed);
    gmp__metrics_runnable(gp);
    if (pp) {
        if (GMP_UNLIKELY(pp->goidcache == pp->goidcacheend)) {
            /* Relaxed: only uniqueness matters. */
            pp->goidcache = atomic_fetch_add_explicit(&s->goidgen, GOID_BATCH,
                                                      memory_order_relaxed) + 1;
            pp->goidcacheend = pp->goidcache + GOID_BATCH;
        }
        __atomic_store_n(&gp->goid, pp->goidcache++, __ATOMIC_RELAXED);
        /* Release, so a reader that sees this G's exit sees its creation
         * (pairs with the acquire loads in gmp__live_goroutines). */
        gmp__owner_inc(&pp->ncreated, memory_order_release);
    } else {
        /* Relaxed: only uniqueness matters. */
        __atomic_store_n(&gp->goid,
                         atomic_fetch_add_explicit(&s->goidgen, 1,
                                                   memory_order_relaxed) + 1,
                         __ATOMIC_RELAXED);
        /* Release: as for ncreated above. */
        atomic_fetch_add_explicit(&s->nforeign, 1, memory_order_release);
    }
    return gp;
}

/* The runtime a call from this thread acts on: its M's, or for a foreign
 * thread the running one. */
static struct schedt *cursched(struct m *mp)
{
    /* Acquire: pairs with the release store that published the runtime. */
    return mp ? mp->sched
              : atomic_load_explicit(&gmp__sched, memory_order_acquire);
}

/* gmp_go's body: stksize 0, or the page-rounded size of a stack of the
 * G's own, set before the G is published. */
static inline int go(void (*fn)(void *), void *arg, size_t stksize)
{
    if (!fn)
        return GMP_EINVAL;
    struct m *mp = gmp__getm();
    struct schedt *s = cursched(mp);
    /* A spawn racing the stop may slip in; the exit protocol abandons or
     * never runs it, as Go does. */
    if (!s || gmp__exiting(s))
        return GMP_EPERM;
    if (mp && mp->curg && mp->p) {
        struct p *pp = mp->p;
        struct g *gp = gmp__newg(s, pp, fn, arg);
        if (!gp)
            return GMP_ENOMEM;
        if (stksize && stksize != s->stack_size)
            gp->stksize = stksize;
        gmp__trace_gocreate(pp, gp);
        gmp__runqput(s, pp, gp, true);
        /* With one P the caller holds it: no P is idle to wake. */
        if (gmp__procs(s) > 1) {
            /* The runnext put was an exchange (a P with thieves). */
            gmp__storeload_fence_after_rmw();
            gmp__wakep(s);
        }
        gmp__preempt_point(mp);
        return 0;
    }
    struct g *gp = gmp__newg(s, NULL, fn, arg);
    if (!gp)
        return GMP_ENOMEM;
    if (stksize && stksize != s->stack_size)
        gp->stksize = stksize;
    gmp__trace_gocreate(NULL, gp);
    gmp__globrunqput_wake(s, gp);
    return 0;
}

int gmp_go(void (*fn)(void *), void *arg)
{
    return go(fn, arg, 0);
}

int gmp_go_attr(void (*fn)(void *), void *arg, const gmp_goattr_t *attr)
{
    if (!attr)
        return go(fn, arg, 0);
    if (attr->reserved_[0] || attr->reserved_[1] || attr->reserved_[2] ||
        (attr->stack_size &&
         (attr->stack_size < GMP__MIN_STACK ||
          attr->stack_size > GMP__MAX_STACK)))
        return GMP_EINVAL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return go(fn, arg, (attr->stack_size + page - 1) & ~(page - 1));
}

void gmp_set_label(const char *label)
{
    struct m *mp = gmp__getm();
    /* Relaxed: dumps read it as they read the other fields (trace.c). */
    if (mp && mp->curg)
        __atomic_store_n(&mp->curg->label, label, __ATOMIC_RELAXED);
}

const char *gmp_label(void)
{
    struct m *mp = gmp__getm();
    return mp && mp->curg ? mp->curg->label : NULL;
}

uint64_t gmp_id(void)
{
    struct m *mp = gmp__getm();
    return gmp__on_gstack(mp) ? mp->curg->goid : 0;
}

int gmp_procs(void)
{
    struct schedt *s = cursched(gmp__getm());
    return s ? gmp__procs(s) : 0;
}

int64_t gmp_num_goroutines(void)
{
    gmp__preempt_check();
    struct schedt *s = cursched(gmp__getm());
    if (!s)
        return 0;
    return gmp__live_goroutines(s);
}

/* Goroutines created and not finished, from the per-P counters. Counters
 * of different Ps move independently, so the reading order matters: all
 * exits first, then all creations. Each exit is ordered after its G's
 * creation (the G travelled between them through a queue), so an exit
 * seen by an acquire load brings its creation with it: the sum may count
 * a G that just finished, never miss one still alive, and never goes
 * below zero. Context: any. */
int64_t gmp__live_goroutines(struct schedt *s)
{
    int64_t n = 0;
    /* Acquire: pairs with the release stores of the increments. */
    for (int i = 0; i < s->maxprocs; i++)       /* a dead P's count too */
        n -= atomic_load_explicit(&s->allp[i].nexited, memory_order_acquire);
    n += atomic_load_explicit(&s->nforeign, memory_order_acquire);
    for (int i = 0; i < s->maxprocs; i++)
        n += atomic_load_explicit(&s->allp[i].ncreated, memory_order_acquire);
    return n;
}

int64_t gmp_nanotime(void)
{
    gmp__preempt_check();           /* a loop on the clock is a busy wait */
    return gmp__nanotime();
}
