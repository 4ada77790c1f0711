/*
 * gc_boehm.c - goroutines under a conservative garbage collector: libgc
 * (the Boehm-Demers-Weiser collector, as Debian ships it, unmodified), and
 * the glue a language runtime that embeds gmprt copies to get there.
 *
 *     ./build/examples/gc_boehm -p 4 -r 10        # 10 runs at procs 4
 *     ./build/examples/gc_boehm -p 2 -r 10 -i     # incremental mode
 *
 * Each run is a fresh gmp_main. Its main goroutine starts 1,000 workers
 * (and at procs 2 and more a spinner), each with a collected object as
 * gmp_go's argument that nothing else refers to until it runs; keeps 64
 * collected objects in a buffered channel and nowhere else; then forces
 * 100 collections (GC_gcollect), handing out a round of tokens over an
 * unbuffered channel after each. A worker holds a list of collected nodes
 * whose only reference is a local: at each token it checks the list, makes
 * garbage and now and then a new list, dropping the old one. So while the
 * collector runs, goroutines are parked on channels, queued, running on
 * other Ms, stopped by the preemption signal (the spinner walks its list
 * for 12 ms in a loop without calls, half way through the run), and one
 * of them is the collector. Checks:
 *   - every list, argument and channel object is alive and unchanged
 *     when its goroutine looks (a disappearing link per object says
 *     whether the collector took it; tags say whether it changed), and
 *     every list once more after the run's last collection;
 *   - a finalizer on every list's head finds the list intact, and never
 *     runs for a list its goroutine still holds;
 *   - every goroutine runs on a thread libgc knows; every runtime thread
 *     unregisters by the end of the run;
 *   - gmp_main returns (no crash, no hang).
 *
 * Options: -p procs (1), -r runs (1), -c collections per run (100), -w
 * workers (1000), -i incremental mode (GC_enable_incremental), and two
 * that leave out part of the glue, to show that the checks can fail:
 * -S no goroutine stack is a root (lists are lost), -M no memory hooks
 * (the runtime's records, which hold gmp_go's arguments and channel
 * buffers, come from malloc and are not scanned: those objects are lost;
 * run it at -p 1, where no worker starts before the first collection).
 * Prints one line, "gc_boehm: ok ..." or "gc_boehm: FAILED ..." with the
 * counts, and exits 0, 1 when a check failed, 2 for a bad option.
 *
 * What libgc must be told, and how the glue below tells it:
 *
 *   Threads. libgc stops the world by signalling every thread registered
 *   with it, so every thread that runs goroutines must be registered:
 *   gmp_config_t's thread_start hook calls GC_register_my_thread on each M
 *   (and on the monitor), thread_stop unregisters it.
 *
 *   Stacks. libgc scans a registered thread from the stack pointer it was
 *   stopped at to the stack base it was registered with. For an M that
 *   runs a goroutine, that pointer lies on the goroutine's stack, a mapping
 *   of the runtime's that can sit anywhere relative to the thread's own
 *   stack: the range would span unmapped memory. So while runtime threads
 *   are registered, the glue replaces libgc's own push of thread stacks
 *   (GC_set_push_other_roots) with a push of every goroutine stack that
 *   gmp_stacks_foreach reports, [sp, hi) of a waiting or queued one and
 *   all of one that runs. The price: the threads' own stacks are not
 *   scanned meanwhile, neither the one blocked in gmp_main nor the
 *   runtime threads' (where the scheduler runs, and with it most calls of
 *   the memory hooks), so they must not be the only holders of collected
 *   pointers (see "Runtime memory" for the one moment they are). With no
 *   runtime thread registered it calls libgc's own push.
 *
 *   Signal stacks. A goroutine the runtime's SIGURG handler is looking at
 *   has its registers in the signal frame on the M's alternate signal
 *   stack; libgc's stop signal can land right then (the handler masks
 *   nothing), so those stacks are roots too. They come from the
 *   stack_alloc hook like the goroutine stacks: the glue keeps a table of
 *   every such mapping and pushes the small ones (under two goroutine
 *   stacks: not a chunk of stacks) whole.
 *
 *   The walk. The push must run with the world stopped: a signal stack
 *   may be unmapped by an M on its way out, under a push that runs beside
 *   it. libgc calls it so in every collection, but in incremental mode
 *   also between collections, from the marking an allocation does with
 *   the world running; then the push does nothing, since the collection's
 *   stopped phase pushes every root again. A thread may be stopped
 *   anywhere, inside the runtime too: gmp_stacks_foreach takes no lock
 *   (with the lock it once took, an M stopped while holding it hung the
 *   collection).
 *
 *   Runtime memory. The runtime's records hold the program's pointers:
 *   gmp_go's argument until the goroutine runs, the values in a channel's
 *   buffer, a timer's argument. The mem_alloc hook serves them from
 *   libgc's uncollectable heap (GC_MALLOC_UNCOLLECTABLE: scanned, freed
 *   only by mem_free's GC_FREE), so those pointers are roots. It asks for
 *   64 bytes more and aligns, since the runtime wants 64-byte alignment.
 *   libgc marks a large uncollectable object (over 2 KiB) only after it
 *   has let go of its lock, trusting the caller's stack to hold it
 *   meanwhile; the caller here is often a runtime thread on its own
 *   stack, which is not scanned, and a collection in that moment freed
 *   the runtime's new record under it. So the hook holds collections off
 *   for its length (GC_disable: a GC_gcollect meanwhile does nothing,
 *   which gc_collect allows for). The hooks run with the runtime's locks
 *   held, on any of its threads: so finalizers must not run inside an
 *   allocation (they could need those locks): GC_set_finalize_on_demand,
 *   and the program runs them (GC_invoke_finalizers) where it likes.
 *
 *   Preemption. The push callback and GC_call_with_alloc_lock's function
 *   are this program's code run with libgc's allocation lock held (and
 *   the world stopped), and the preemption signal may stop the main
 *   program's code: a goroutine stopped there would leave the next one on
 *   its M blocked on the lock for good (docs/design.md, "Which code a
 *   signal may stop"). So every libgc call that can collect or take the
 *   lock runs inside gmp_preempt_disable/enable; the enable, where a
 *   preemption that came due meanwhile happens, runs after libgc has let
 *   go of the lock. (The runtime already does this around its hooks.)
 *
 *   Incremental mode. libgc learns which pages were written since it last
 *   looked by write-protecting the heap and catching the SIGSEGV of each
 *   first write (or from the kernel's soft-dirty bits where it has them;
 *   GC_USE_GETWRITEWATCH=0 insists on mprotect). The runtime's SIGSEGV
 *   handler, installed after libgc's, hands every fault that is no stack
 *   overflow on to it as the kernel would, with libgc's handler's mask
 *   (which holds off libgc's stop signal). The runtime's records are in
 *   that heap too, so the runtime's own writes fault like the program's;
 *   it never has the kernel write there (that would fail with EFAULT).
 *   GC_enable_incremental comes before the runtime starts: a stack
 *   overflow is reported by the runtime's handler, on the M's signal
 *   stack, which must see each fault first.
 *
 *   libgc clears up to 16 KiB below the stack pointer (GC_clear_stack):
 *   goroutines that allocate need that much room to spare on their
 *   stacks, which the default 128 KiB has. libgc marks on the collecting
 *   thread only (GC_set_markers_count(1)): see glue_init.
 */
#define GC_THREADS              /* libgc's thread registration calls */
#define GC_NO_THREAD_REDIRECTS  /* pthread_create stays libc's */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <gc/gc.h>
#include <gc/gc_mark.h>

#include <gmprt.h>

#define STACK_SIZE ((size_t)128 * 1024)

/* libgc finds what a goroutine holds in its frames on its stack; ASan's
 * fake stacks (detect_stack_use_after_return, on by default in newer
 * compilers) would move those frames to memory libgc does not scan. */
#if defined(__SANITIZE_ADDRESS__)
#define GCB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GCB_ASAN 1
#endif
#endif
#if defined(GCB_ASAN)
__attribute__((used)) const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void)
{
    return "detect_stack_use_after_return=0";
}
#endif

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- The glue: threads, stacks, runtime memory and roots ---------------- */

#define REGIONS_MAX 4096        /* stack mappings alive at once */

struct region {
    /* Written by the stack hooks on any thread, read by the collector with
     * the world stopped. used: the entry is taken. size is stored before
     * base; base with release, loaded with acquire, so a collector that
     * sees a base sees its size. */
    _Atomic int       used;
    _Atomic size_t    size;
    _Atomic uintptr_t base;
};

static struct {
    bool stack_roots;               /* -S clears it */
    bool mem_hooks;                 /* -M clears it */
    GC_push_other_roots_proc prev;  /* libgc's push of thread stacks */

    /* Whether the world is stopped: set and cleared by libgc's collection
     * events, read by the push, all on the collecting thread under
     * libgc's lock. */
    bool world_stopped;

    /* Runtime threads registered with libgc. Written by the thread hooks
     * (seq_cst read-modify-writes: a plain count, and the collector reads
     * it with the world stopped, after libgc's handshake with each thread,
     * which orders it). */
    _Atomic int threads;

    struct region region[REGIONS_MAX];

    /* Counters for the summary: relaxed, read after the runs. Pushes of
     * the goroutine stacks, pushes skipped with the world running,
     * registrations libgc refused. */
    _Atomic int64_t walks, deferred, register_failed;
} glue;

static __thread bool glue_registered;

static void on_thread_start(void *ctx)
{
    (void)ctx;
    struct GC_stack_base sb;
    if (GC_get_stack_base(&sb) != GC_SUCCESS ||
        GC_register_my_thread(&sb) != GC_SUCCESS) {
        /* Relaxed: a counter read after gmp_main. */
        atomic_fetch_add_explicit(&glue.register_failed, 1,
                                  memory_order_relaxed);
        return;
    }
    glue_registered = true;
    /* seq_cst: see struct glue. Counted after the registration: until
     * then the thread is on its own stack, where libgc's push is right. */
    atomic_fetch_add(&glue.threads, 1);
}

static void on_thread_stop(void *ctx)
{
    (void)ctx;
    if (!glue_registered)
        return;
    GC_unregister_my_thread();
    glue_registered = false;
    atomic_fetch_sub(&glue.threads, 1);         /* seq_cst: as above */
}

static void *on_stack_alloc(size_t size, void *ctx)
{
    (void)ctx;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    for (int i = 0; i < REGIONS_MAX; i++) {
        int free_ = 0;
        /* Acquire on success: pairs with on_stack_free's release of used,
         * so that its clearing of size and base comes before ours. */
        if (!atomic_compare_exchange_strong_explicit(
                &glue.region[i].used, &free_, 1, memory_order_acquire,
                memory_order_relaxed))
            continue;
        /* Relaxed: published by the release store of base. */
        atomic_store_explicit(&glue.region[i].size, size,
                              memory_order_relaxed);
        /* Release: pairs with the collector's acquire load of base. */
        atomic_store_explicit(&glue.region[i].base, (uintptr_t)p,
                              memory_order_release);
        return p;
    }
    /* A mapping the collector would not know about is no option: the
     * runtime reports the NULL as a fatal "out of memory". */
    munmap(p, size);
    return NULL;
}

static void on_stack_free(void *p, size_t size, void *ctx)
{
    (void)ctx;
    for (int i = 0; i < REGIONS_MAX; i++) {
        /* Relaxed: the runtime frees a mapping only after on_stack_alloc
         * returned it, which orders the entry's stores before this load;
         * other entries may change meanwhile, never to p. */
        if (atomic_load_explicit(&glue.region[i].base, memory_order_relaxed)
            != (uintptr_t)p)
            continue;
        /* Release, all three: the entry is gone before the mapping is, so
         * a collector never reads a mapping the table no longer lists;
         * used last, so that the next claim sees the entry cleared. */
        atomic_store_explicit(&glue.region[i].base, 0, memory_order_release);
        atomic_store_explicit(&glue.region[i].size, 0, memory_order_release);
        atomic_store_explicit(&glue.region[i].used, 0, memory_order_release);
        break;
    }
    munmap(p, size);
}

/* The runtime's records: libgc's uncollectable heap, 64-byte aligned. The
 * block libgc returned is kept in the word before the aligned address
 * (libgc's blocks are 16-byte aligned, so there is room). Context: any
 * thread, runtime locks perhaps held, never preempted. */
#define MEM_ALIGN 64

static void *on_mem_alloc(size_t size, void *ctx)
{
    (void)ctx;
    GC_disable();                   /* see "Runtime memory" above */
    char *raw = GC_MALLOC_UNCOLLECTABLE(size + MEM_ALIGN);
    GC_enable();
    if (!raw)
        return NULL;
    uintptr_t at = ((uintptr_t)raw + MEM_ALIGN) & ~(uintptr_t)(MEM_ALIGN - 1);
    ((void **)at)[-1] = raw;
    return (void *)at;
}

static void on_mem_free(void *p, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    GC_FREE(((void **)p)[-1]);
}

/* Pushes the small stack mappings whole: the Ms' signal stacks, which
 * have no guard page. Context: the collector, libgc's lock held, the
 * world stopped. */
static void push_signal_stacks(void)
{
    for (int i = 0; i < REGIONS_MAX; i++) {
        /* Acquire: pairs with on_stack_alloc's release of base. */
        uintptr_t base = atomic_load_explicit(&glue.region[i].base,
                                              memory_order_acquire);
        if (!base)
            continue;
        /* Relaxed: published by base (see struct region). */
        size_t size = atomic_load_explicit(&glue.region[i].size,
                                           memory_order_relaxed);
        if (size < 2 * STACK_SIZE)
            GC_push_all_eager((char *)base, (char *)base + size);
    }
}

/* gmp_stacks_foreach's callback: [sp, hi) of a goroutine stack, or from
 * this frame for the collector's own goroutine (reported as running,
 * sp = lo): what it holds lies above here, and its registers libgc has
 * pushed itself. */
static void push_stack(void *lo, void *hi, void *sp, void *arg)
{
    (void)lo;
    char *here = arg;
    if ((char *)sp <= here && here < (char *)hi)
        sp = here;
    GC_push_all_eager(sp, hi);
}

/* libgc's push-other-roots callback: runs in every collection with the
 * world stopped, and in incremental mode also with it running (see the
 * file comment); always with libgc's lock held, on the collecting
 * thread. */
static void GC_CALLBACK push_goroutines(void)
{
    /* seq_cst: see struct glue. */
    if (atomic_load(&glue.threads) == 0) {
        glue.prev();                /* no runtime thread: libgc's own */
        return;
    }
    if (!glue.world_stopped) {
        /* Relaxed: a counter. */
        atomic_fetch_add_explicit(&glue.deferred, 1, memory_order_relaxed);
        return;
    }
    if (!glue.stack_roots)
        return;
    if (gmp_stacks_foreach(push_stack, __builtin_frame_address(0)) < 0)
        abort();                    /* a collection without the roots */
    push_signal_stacks();
    /* Relaxed: a counter. */
    atomic_fetch_add_explicit(&glue.walks, 1, memory_order_relaxed);
}

static void GC_CALLBACK on_gc_event(GC_EventType e)
{
    if (e == GC_EVENT_POST_STOP_WORLD)
        glue.world_stopped = true;
    else if (e == GC_EVENT_PRE_START_WORLD)
        glue.world_stopped = false;
}

/* Once, on the main thread, before any runtime. */
static void glue_init(bool incremental)
{
    /* One marking thread, the collecting one. libgc's parallel markers
     * spin for the mark lock: on two CPUs shared with the runtime's
     * threads that doubled the time of each collection (CPU time, most of
     * it system). */
    GC_set_markers_count(1);
    GC_INIT();
    GC_allow_register_threads();
    GC_set_finalize_on_demand(1);   /* see "Runtime memory" above */
    if (incremental)
        GC_enable_incremental();    /* before the runtime takes SIGSEGV */
    glue.prev = GC_get_push_other_roots();
    GC_set_push_other_roots(push_goroutines);
    GC_set_on_collection_event(on_gc_event);
}

static void glue_config(gmp_config_t *cfg, int procs)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->procs = procs;
    cfg->stack_size = STACK_SIZE;
    cfg->thread_start = on_thread_start;
    cfg->thread_stop = on_thread_stop;
    cfg->stack_alloc = on_stack_alloc;
    cfg->stack_free = on_stack_free;
    if (glue.mem_hooks) {
        cfg->mem_alloc = on_mem_alloc;
        cfg->mem_free = on_mem_free;
    }
}

/* libgc calls from goroutines: never preempted while libgc's lock may be
 * held by this goroutine (see the file comment). */
static void *gc_alloc(size_t n)
{
    gmp_preempt_disable();
    void *p = GC_MALLOC(n);
    gmp_preempt_enable();
    return p;
}

/* A collection, and the finalizers it made ready. GC_gcollect does
 * nothing while collections are off (on_mem_alloc turns them off for a
 * moment): then again. */
static void gc_collect(void)
{
    gmp_preempt_disable();
    GC_word n = GC_get_gc_no();
    do
        GC_gcollect();
    while (GC_get_gc_no() == n);
    GC_invoke_finalizers();
    gmp_preempt_enable();
}

static void *gc_locked(GC_fn_type fn, void *arg)
{
    gmp_preempt_disable();
    void *r = GC_call_with_alloc_lock(fn, arg);
    gmp_preempt_enable();
    return r;
}

/* Points *link at obj and registers it as a disappearing link: libgc
 * clears it when it collects obj. Hidden (GC_HIDE_POINTER), so that the
 * link is no reference. Unregistered while it is written, so that no
 * collection clears it meanwhile; each call takes libgc's lock. */
static void set_link(GC_hidden_pointer *link, void *obj)
{
    gmp_preempt_disable();
    GC_unregister_disappearing_link((void **)link);
    *link = GC_HIDE_POINTER(obj);
    if (GC_general_register_disappearing_link((void **)link, obj) !=
        GC_SUCCESS)
        *link = 0;                  /* reads as collected: a failure */
    gmp_preempt_enable();
}

/* ---- The workload -------------------------------------------------------- */

#define WORKERS_MAX 4096
#define IDS_MAX     (WORKERS_MAX + 1)   /* workers, then the spinner */
#define LIST_LEN    8
#define BOXED       64                  /* objects in the channel */

static uint64_t mix(uint64_t x)         /* splitmix64's finalizer */
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint64_t tag_of(int id, uint64_t gen, int j)
{
    return mix(((uint64_t)id << 40) ^ (gen << 16) ^ (uint64_t)j);
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

struct node {
    struct node *next;
    uint64_t     tag;               /* tag_of(id, gen, index) */
    uint64_t     id, gen;
    uint64_t     epoch;             /* the run that made it */
};

/* A goroutine's argument, or an object in the channel: its only
 * reference lies in the runtime's records. */
struct held {
    uint64_t tag;                   /* held_tag(kind, index) */
    uint64_t index;
};

enum { KIND_ARG = 1, KIND_BOXED = 2 };

static uint64_t held_tag(int kind, int index)
{
    return mix(((uint64_t)kind << 56) ^ (uint64_t)index ^ 0x5eedULL);
}

/* Disappearing links, one per list head (by id), per argument (by id)
 * and per channel object; see set_link. Written by their goroutines
 * while unregistered, cleared by libgc under its lock, read under it. */
static GC_hidden_pointer list_link[IDS_MAX];
static GC_hidden_pointer arg_link[IDS_MAX];
static GC_hidden_pointer boxed_link[BOXED];

static uint64_t epoch;              /* runs so far; set between runs */

/* The counts one run makes: relaxed counters, read by the main thread
 * after gmp_main. */
struct counts {
    _Atomic int64_t checks;         /* list checks passed */
    _Atomic int64_t lost;           /* lists found collected */
    _Atomic int64_t corrupt;        /* lists found changed */
    _Atomic int64_t final_ok;       /* last checks passed */
    _Atomic int64_t listed;         /* goroutines that made a list */
    _Atomic int64_t args, args_lost;        /* gmp_go's arguments */
    _Atomic int64_t boxed, boxed_lost;      /* the channel's objects */
    _Atomic int64_t finalized, finalized_bad, premature;
    _Atomic int64_t unregistered;   /* wake-ups on a thread libgc lacks */
    _Atomic int64_t spins, preempted;       /* the spinner, informative */
};

static struct {
    int procs, workers, collections, tokens;
    bool churn;                 /* rebuild lists and drop garbage */
    bool spinner;
    gmp_chan_t *tick;           /* collector -> workers, unbuffered */
    gmp_chan_t *spin;           /* collector -> spinner, one slot */
    gmp_chan_t *box;            /* BOXED objects, nowhere else */
    gmp_wg_t wg;
    /* Per id: the generation of the list its goroutine holds, and whether
     * it has let go of it (seq_cst: see on_finalize). */
    _Atomic uint64_t cur_gen[IDS_MAX];
    _Atomic bool released[IDS_MAX];
    struct counts c;
} run;

static void count(_Atomic int64_t *ctr)
{
    /* Relaxed: a counter read after gmp_main, which joins every
     * goroutine first. */
    atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed);
}

/* Whether the list at head is whole: LIST_LEN nodes with their tags. */
static bool list_intact(const struct node *n, int id, uint64_t gen,
                        uint64_t ep)
{
    int j = 0;
    for (; n && j < LIST_LEN; n = n->next, j++)
        if (n->tag != tag_of(id, gen, j) || n->id != (uint64_t)id ||
            n->gen != gen || n->epoch != ep)
            return false;
    return j == LIST_LEN && !n;
}

/* A list head's finalizer, run by gc_collect's GC_invoke_finalizers once
 * a collection found the list unreachable. Its goroutine stores a new
 * cur_gen, or released, before it lets go of the list (GC_reachable_here
 * keeps the list until then), and the collection that found it
 * unreachable stopped the world after that: a list of this run whose
 * generation is still current and not released was collected while its
 * goroutine held it. */
static void GC_CALLBACK on_finalize(void *obj, void *cd)
{
    (void)cd;
    const struct node *head = obj;
    int id = (int)head->id;
    if (id < 0 || id >= IDS_MAX ||
        !list_intact(head, id, head->gen, head->epoch)) {
        count(&run.c.finalized_bad);
        return;
    }
    count(&run.c.finalized);
    /* seq_cst: see above (ordered by libgc's stop and lock as well). */
    if (head->epoch == epoch &&
        atomic_load(&run.cur_gen[id]) == head->gen &&
        !atomic_load(&run.released[id]))
        count(&run.c.premature);
}

/* A new list of LIST_LEN nodes for id, generation gen; its only reference
 * is the return value. */
static struct node *build(int id, uint64_t gen)
{
    struct node *head = NULL;
    for (int j = LIST_LEN - 1; j >= 0; j--) {
        struct node *n = gc_alloc(sizeof *n);
        if (!n)
            return NULL;
        n->next = head;
        n->tag = tag_of(id, gen, j);
        n->id = (uint64_t)id;
        n->gen = gen;
        n->epoch = epoch;
        head = n;
    }
    set_link(&list_link[id], head);
    gmp_preempt_disable();
    GC_REGISTER_FINALIZER(head, on_finalize, NULL, NULL, NULL);
    gmp_preempt_enable();
    return head;
}

enum { CHECK_OK, CHECK_LOST, CHECK_CORRUPT };

struct check {
    int id;
    uint64_t gen;
    struct node *head;
    int result;
};

/* Under libgc's lock no collection runs, so a link that is still set
 * means the list was not collected by any collection so far, and walking
 * it reads live nodes only; a cleared one is not walked (its nodes may be
 * anything by now). */
static void *check_locked(void *arg)
{
    struct check *c = arg;
    if (list_link[c->id] == 0)
        c->result = CHECK_LOST;
    else if (GC_REVEAL_POINTER(list_link[c->id]) != (void *)c->head)
        c->result = CHECK_CORRUPT;
    else
        c->result = list_intact(c->head, c->id, c->gen, epoch)
                    ? CHECK_OK : CHECK_CORRUPT;
    return NULL;
}

/* Checks id's list and counts the result; false when the list must not
 * be used again. */
static bool check_list(int id, uint64_t gen, struct node *head)
{
    struct check c = {id, gen, head, CHECK_CORRUPT};
    gc_locked(check_locked, &c);
    switch (c.result) {
    case CHECK_OK:
        count(&run.c.checks);
        return true;
    case CHECK_LOST:
        count(&run.c.lost);
        return false;
    default:
        count(&run.c.corrupt);
        return false;
    }
}

/* A new object for links[index], its only reference the return value. */
static struct held *held_new(GC_hidden_pointer *links, int kind, int index)
{
    struct held *h = gc_alloc(sizeof *h);
    if (!h)
        return NULL;
    h->tag = held_tag(kind, index);
    h->index = (uint64_t)index;
    set_link(&links[index], h);
    return h;
}

struct find {
    const GC_hidden_pointer *links;
    int n, kind;
    const struct held *h;
    int index;                  /* out: -1 lost, -2 changed */
};

/* Which of links[0..n) points at h. A collected object's link is clear,
 * and no other points at its address: every object of a kind is made
 * before the run's first collection (run_main). */
static void *find_locked(void *arg)
{
    struct find *f = arg;
    f->index = -1;
    for (int i = 0; i < f->n; i++) {
        if (f->links[i] != GC_HIDE_POINTER(f->h))
            continue;
        bool ok = f->h->tag == held_tag(f->kind, i) &&
                  f->h->index == (uint64_t)i;
        f->index = ok ? i : -2;
        break;
    }
    return NULL;
}

/* Finds h among links and counts it (ok or lost; a changed one is
 * counted corrupt). Returns its index, or -1. */
static int find_held(const GC_hidden_pointer *links, int n, int kind,
                     const struct held *h, _Atomic int64_t *ok,
                     _Atomic int64_t *lost)
{
    struct find f = {links, n, kind, h, -1};
    gc_locked(find_locked, &f);
    count(f.index >= 0 ? ok : f.index == -1 ? lost : &run.c.corrupt);
    return f.index >= 0 ? f.index : -1;
}

/* Garbage: a few objects of assorted sizes, filled and dropped. */
static void garbage(uint64_t *x)
{
    for (int k = 0; k < 6; k++) {
        size_t sz = 16 + (size_t)(xorshift(x) % 240);
        uint64_t *p = gc_alloc(sz);
        if (p)
            memset(p, 0x5a, sz);
    }
}

/* Lets go of id's list: says so first, and keeps the list reachable
 * until it has (see on_finalize). */
static void release(int id, struct node *head)
{
    atomic_store(&run.released[id], true);      /* seq_cst: on_finalize */
    GC_reachable_here(head);
}

/* A goroutine with a list: finds its id from its argument, waits for a
 * token, checks its list, makes garbage and now and then a new list;
 * checks once more when the tokens end, after the last collection. */
static void worker(void *arg)
{
    int id = find_held(arg_link, run.workers, KIND_ARG, arg, &run.c.args,
                       &run.c.args_lost);
    int64_t tok;
    if (id < 0) {                   /* its argument was collected */
        /* It still takes tokens: with every argument lost (seen under
         * ASan), no worker would, and main's sends would deadlock. */
        while (gmp_chan_recv(run.tick, &tok) == 0)
            ;
        gmp_wg_done(&run.wg);
        return;
    }
    uint64_t x = tag_of(id, 77, 0) | 1;
    uint64_t gen = 0;
    struct node *head = build(id, gen);
    count(&run.c.listed);
    bool usable = head != NULL;
    if (!usable)
        count(&run.c.lost);
    while (gmp_chan_recv(run.tick, &tok) == 0) {
        if (!GC_thread_is_registered())
            count(&run.c.unregistered);
        if (!usable)
            continue;
        usable = check_list(id, gen, head);
        if (!usable || !run.churn)
            continue;
        garbage(&x);
        if (xorshift(&x) % 4 == 0) {
            /* seq_cst: on_finalize. The old list becomes garbage. */
            atomic_store(&run.cur_gen[id], gen + 1);
            GC_reachable_here(head);
            head = build(id, ++gen);
            usable = head != NULL;
            if (!usable)
                count(&run.c.lost);
        }
    }
    if (usable && check_list(id, gen, head))
        count(&run.c.final_ok);
    release(id, head);
    gmp_wg_done(&run.wg);
}

/* Sums the tags of a list (this program's code: the signal may stop it
 * anywhere in here, with the list in its registers). */
__attribute__((noinline)) static uint64_t sum_list(const struct node *n,
                                                   int rounds)
{
    uint64_t s = 0;
    for (int r = 0; r < rounds; r++)
        for (const struct node *m = n; m; m = m->next)
            s += m->tag ^ (uint64_t)r;
    return s;
}

static uint64_t sum_want(int id, uint64_t gen, int rounds)
{
    uint64_t s = 0;
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < LIST_LEN; j++)
            s += tag_of(id, gen, j) ^ (uint64_t)r;
    return s;
}

#define SPIN_ROUNDS 200                 /* sums per sum_list call */
#define LONG_NS     (12 * 1000000LL)    /* a stretch: past the 10 ms slice */

/* At procs 2 and more, a goroutine that runs while the others are
 * collected around it: at its token (half way through the run) it walks
 * its list for LONG_NS in calls that make no runtime call, with the list
 * in its registers, so that collections stop it there and so that the
 * monitor's signal preempts it in there (how often is counted). */
static void spinner(void *arg)
{
    int id = find_held(arg_link, run.workers + 1, KIND_ARG, arg,
                       &run.c.args, &run.c.args_lost);
    if (id < 0) {
        gmp_wg_done(&run.wg);
        return;
    }
    struct node *head = build(id, 0);
    count(&run.c.listed);
    uint64_t want = sum_want(id, 0, SPIN_ROUNDS);
    bool usable = head != NULL;
    if (!usable)
        count(&run.c.lost);
    int64_t tok;
    while (gmp_chan_recv(run.spin, &tok) == 0) {
        if (!usable)
            continue;
        gmp_stats_t st0, st1;
        int64_t until = now_ns() + LONG_NS;
        gmp_stats(&st0);
        while (usable && now_ns() < until) {
            if (sum_list(head, SPIN_ROUNDS) != want) {
                /* Collected (lost), or changed under the walk. */
                if (check_list(id, 0, head))
                    count(&run.c.corrupt);
                usable = false;
            }
            count(&run.c.spins);
        }
        if (gmp_stats(&st1) == 0 && st1.preemptions > st0.preemptions)
            count(&run.c.preempted);
    }
    if (usable && check_list(id, 0, head))
        count(&run.c.final_ok);
    release(id, head);
    gmp_wg_done(&run.wg);
}

static int spinners(void)
{
    return run.spinner && run.procs > 1 ? 1 : 0;
}

static bool all_listed(void)
{
    /* Relaxed: a counter; the lists it counts are the workers' own. */
    return atomic_load_explicit(&run.c.listed, memory_order_relaxed) +
           atomic_load_explicit(&run.c.args_lost, memory_order_relaxed) >=
           run.workers + spinners();
}

/* Fills the channel with BOXED new objects, and starts the workers (and
 * the spinner), each with a new object as its argument. */
static void setup(void)
{
    for (int k = 0; k < BOXED; k++) {
        struct held *h = held_new(boxed_link, KIND_BOXED, k);
        if (!h || gmp_chan_trysend(run.box, &h) != 0)
            count(&run.c.boxed_lost);
    }
    int n = run.workers + spinners();
    gmp_wg_add(&run.wg, n);
    for (int i = 0; i < n; i++) {
        struct held *h = held_new(arg_link, KIND_ARG, i);
        if (!h || gmp_go(i < run.workers ? worker : spinner, h) != 0) {
            count(&run.c.args_lost);
            gmp_wg_done(&run.wg);
        }
    }
}

/* Takes every object out of the channel and checks it. */
static void drain(void)
{
    struct held *h;
    while (gmp_chan_tryrecv(run.box, &h) == 0)
        find_held(boxed_link, BOXED, KIND_BOXED, h, &run.c.boxed,
                  &run.c.boxed_lost);
}

/* The main goroutine: sets up with collection off (so that every
 * argument and channel object is made before the first collection, and
 * none takes the place of one collected), then collects, handing out a
 * round of tokens after each collection (and the spinner its one, half
 * way), and ends the tokens. */
static void run_main(void *arg)
{
    (void)arg;
    run.tick = gmp_chan_make(sizeof(int64_t), 0);
    run.spin = gmp_chan_make(sizeof(int64_t), 1);
    run.box = gmp_chan_make(sizeof(struct held *), BOXED);
    if (!run.tick || !run.spin || !run.box) {
        count(&run.c.lost);
        return;
    }
    gmp_preempt_disable();
    GC_disable();
    gmp_preempt_enable();
    setup();
    if (!run.churn)
        /* -S: every list made before the first collection and nothing
         * allocated after, so that the lists the collector takes are
         * never written again and libgc's heap stays sound enough to
         * report. */
        while (!all_listed())
            gmp_yield();
    gmp_preempt_disable();
    GC_enable();
    gmp_preempt_enable();
    for (int64_t k = 0; k < run.collections; k++) {
        gc_collect();
        /* Move one object from the head of the buffer to its tail. */
        struct held *h;
        if (gmp_chan_tryrecv(run.box, &h) == 0)
            gmp_chan_trysend(run.box, &h);
        h = NULL;
        if (k == run.collections / 2)
            gmp_chan_trysend(run.spin, &k);     /* one slot: never waits */
        for (int t = 0; t < run.tokens; t++)
            gmp_chan_send(run.tick, &k);
    }
    gmp_chan_close(run.tick);
    gmp_chan_close(run.spin);
    gmp_wg_wait(&run.wg);
    /* And until they have left: gmp_main abandons a goroutine still on
     * its way out, whose thread then unregisters late. */
    while (gmp_num_goroutines() > 1)
        gmp_yield();
    drain();
    gmp_chan_free(run.tick);
    gmp_chan_free(run.spin);
    gmp_chan_free(run.box);
}

/* ---- Runs and the summary ----------------------------------------------- */

struct opts {
    int procs, runs, collections, workers;
    bool incremental, no_stack_roots, no_mem_hooks;
};

/* Sums over the runs, for the summary. */
struct totals {
    int64_t failed, collections;
    int64_t checks, lost, corrupt, final_ok, args, args_lost, boxed,
            boxed_lost, finalized, finalized_bad, premature, unregistered,
            spins, preempted;
};

#define ADD(f) t->f += atomic_load_explicit(&run.c.f, memory_order_relaxed)

static void add_counts(struct totals *t)
{
    /* Relaxed, all: gmp_main has returned. */
    ADD(checks); ADD(lost); ADD(corrupt); ADD(final_ok); ADD(args);
    ADD(args_lost); ADD(boxed); ADD(boxed_lost); ADD(finalized);
    ADD(finalized_bad); ADD(premature); ADD(unregistered); ADD(spins);
    ADD(preempted);
}

#undef ADD

/* Waits until every runtime thread has unregistered: at once, or (one
 * that gmp_main abandoned while its goroutine was on the way out) when it
 * leaves. False after 60 s. */
static bool threads_gone(void)
{
    int64_t deadline = now_ns() + 60 * 1000000000LL;
    while (atomic_load(&glue.threads) != 0) {   /* seq_cst: struct glue */
        if (now_ns() > deadline)
            return false;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return true;
}

/* One run, a fresh gmp_main; false when a check failed (said on
 * stderr). */
static bool run_once(const struct opts *o, int i, struct totals *t)
{
    memset(&run, 0, sizeof run);
    run.procs = o->procs;
    run.workers = o->workers;
    run.collections = o->collections;
    run.tokens = o->workers / 20 > 0 ? o->workers / 20 : 1;
    run.churn = !o->no_stack_roots;
    run.spinner = run.churn;
    memset(list_link, 0, sizeof list_link);
    memset(arg_link, 0, sizeof arg_link);
    memset(boxed_link, 0, sizeof boxed_link);
    epoch++;
    gmp_config_t cfg;
    glue_config(&cfg, o->procs);
    GC_word gc0 = GC_get_gc_no();
    int rc = gmp_main(run_main, NULL, &cfg);
    bool gone = threads_gone();
    GC_word gcs = GC_get_gc_no() - gc0;
    t->collections += (int64_t)gcs;
    add_counts(t);

    /* Relaxed, all: gmp_main has returned. */
#define C(f) atomic_load_explicit(&run.c.f, memory_order_relaxed)
    int64_t n = run.workers + spinners();
    bool ok = rc == 0 && gone && C(lost) == 0 && C(corrupt) == 0 &&
              C(final_ok) == C(listed) && C(listed) == n &&
              C(args) == n && C(boxed) == BOXED && C(premature) == 0 &&
              C(finalized_bad) == 0 && C(unregistered) == 0 &&
              atomic_load(&glue.register_failed) == 0 &&
              gcs >= (GC_word)run.collections;
    if (!ok)
        fprintf(stderr, "gc_boehm: run %d: gmp_main %d, threads %s; lists: "
                "%lld lost, %lld changed, %lld of %lld last checks; "
                "arguments: %lld of %lld, %lld lost; channel: %lld of %d, "
                "%lld lost; finalizers: %lld premature, %lld on a changed "
                "list; %lld wake-ups unregistered, %lld registrations "
                "failed; %lu collections\n", i, rc,
                gone ? "gone" : "still registered",
                (long long)C(lost), (long long)C(corrupt),
                (long long)C(final_ok), (long long)C(listed),
                (long long)C(args), (long long)n, (long long)C(args_lost),
                (long long)C(boxed), BOXED, (long long)C(boxed_lost),
                (long long)C(premature), (long long)C(finalized_bad),
                (long long)C(unregistered),
                (long long)atomic_load(&glue.register_failed),
                (unsigned long)gcs);
#undef C
    return ok;
}

/* How libgc learns what was written: none outside incremental mode. */
static const char *vdb_name(void)
{
    if (!GC_is_incremental_mode())
        return "none";
    return GC_incremental_protection_needs() & GC_PROTECTS_POINTER_HEAP
           ? "mprotect" : "os";
}

static int usage(void)
{
    fprintf(stderr, "usage: gc_boehm [-p procs] [-r runs] [-c collections] "
            "[-w workers] [-i] [-S] [-M]\n"
            "  -i  libgc's incremental mode\n"
            "  -S  no goroutine stack is a root (lists are lost)\n"
            "  -M  no memory hooks (arguments and channel objects are "
            "lost)\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct opts o = {.procs = 1, .runs = 1, .collections = 100,
                     .workers = 1000};
    int ch;
    while ((ch = getopt(argc, argv, "p:r:c:w:iSM")) != -1) {
        switch (ch) {
        case 'p': o.procs = atoi(optarg); break;
        case 'r': o.runs = atoi(optarg); break;
        case 'c': o.collections = atoi(optarg); break;
        case 'w': o.workers = atoi(optarg); break;
        case 'i': o.incremental = true; break;
        case 'S': o.no_stack_roots = true; break;
        case 'M': o.no_mem_hooks = true; break;
        default: return usage();
        }
    }
    if (optind != argc || o.procs < 1 || o.procs > 256 || o.runs < 1 ||
        o.collections < 1 || o.workers < 1 || o.workers > WORKERS_MAX)
        return usage();
    glue.stack_roots = !o.no_stack_roots;
    glue.mem_hooks = !o.no_mem_hooks;
    glue_init(o.incremental);

    struct totals t = {0};
    int64_t t0 = now_ns();
    for (int i = 0; i < o.runs; i++)
        if (!run_once(&o, i, &t))
            t.failed++;
    bool ok = t.failed == 0 && t.finalized > 0;
    printf("gc_boehm: %s procs=%d incremental=%d vdb=%s stack_roots=%d "
           "mem_hooks=%d runs=%d failed=%lld goroutines=%d "
           "collections=%lld checks=%lld lost=%lld corrupt=%lld "
           "final=%lld args=%lld args_lost=%lld boxed=%lld "
           "boxed_lost=%lld finalized=%lld finalized_bad=%lld "
           "premature=%lld unregistered=%lld register_failed=%lld "
           "walks=%lld deferred=%lld spins=%lld preempted=%lld "
           "seconds=%.1f\n", ok ? "ok" : "FAILED", o.procs,
           GC_is_incremental_mode(), vdb_name(),
           (int)glue.stack_roots, (int)glue.mem_hooks, o.runs,
           (long long)t.failed,
           o.workers + (o.procs > 1 && !o.no_stack_roots ? 1 : 0),
           (long long)t.collections, (long long)t.checks, (long long)t.lost,
           (long long)t.corrupt, (long long)t.final_ok, (long long)t.args,
           (long long)t.args_lost, (long long)t.boxed,
           (long long)t.boxed_lost, (long long)t.finalized,
           (long long)t.finalized_bad, (long long)t.premature,
           (long long)t.unregistered,
           (long long)atomic_load(&glue.register_failed),
           (long long)atomic_load(&glue.walks),
           (long long)atomic_load(&glue.deferred), (long long)t.spins,
           (long long)t.preempted, (double)(now_ns() - t0) / 1e9);
    return ok ? 0 : 1;
}
