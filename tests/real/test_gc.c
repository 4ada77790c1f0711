/*
 * test_gc.c - goroutines under a real conservative collector: Debian's
 * libgc (Boehm-Demers-Weiser, bdw-gc 8.2, unmodified) collecting while
 * 1,000 goroutines allocate lists with GC_MALLOC, park on a channel and run
 * on several Ms.
 *
 * Claims, at procs 1, 2 and 4, each run a fresh gmp_main:
 *   - no premature collection: every goroutine keeps a list of collected
 *     nodes whose only reference lies in its own frames (a local), and after
 *     each wake-up, and once more after the run's last forced collection,
 *     finds it alive (a disappearing link on its head is intact) and
 *     unchanged (every node's tag), through 100 GC_gcollect calls and the
 *     collections that allocation triggers by itself; with goroutines
 *     parked, queued, running on other Ms, stopped by the preemption
 *     signal, and the collecting one among them;
 *   - every runtime thread a goroutine runs on is registered with libgc;
 *   - no crash and no hang (gmp_main returns; ctest's TIMEOUT is the
 *     backstop);
 *   - the check can fail: with goroutine stacks left out of the roots, in
 *     a forked child, the collector takes lists their goroutines still
 *     hold, and the links say so.
 *
 * What libgc must be told, and how this file's glue tells it:
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
 *   all of one that runs. The price: other threads' stacks (the thread
 *   blocked in gmp_main) are not scanned meanwhile, so they must not be
 *   the only holders of collected pointers. With no runtime thread
 *   registered it calls libgc's own push.
 *
 *   Signal stacks. A goroutine the runtime's SIGURG handler is looking at
 *   has its registers in the signal frame on the M's alternate signal
 *   stack; libgc's stop signal can land right then (the handler masks
 *   nothing), so those stacks are roots too. They come from the
 *   stack_alloc hook like the goroutine stacks: the glue keeps a table of
 *   every such mapping and pushes the small ones (under two goroutine
 *   stacks: not a chunk of stacks) whole.
 *
 *   The walk. The push runs with the world stopped: a thread may be
 *   stopped anywhere, inside the runtime too. gmp_stacks_foreach takes no
 *   lock, so the push calls it directly (with the lock it once took, an M
 *   stopped while holding it hung the collection: 4 goroutines spawning
 *   200 at a time beside a GC_gcollect loop hung within two minutes).
 *
 *   Preemption. The push callback and GC_call_with_alloc_lock's function
 *   are this program's code run with libgc's allocation lock held (and
 *   the world stopped), and the preemption signal may stop the main
 *   program's code: a goroutine stopped there would leave the next one on
 *   its M blocked on the lock for good (docs/design.md, "Which code a
 *   signal may stop"). So every libgc call that can collect or take the
 *   lock runs inside gmp_preempt_disable/enable; the enable, where a
 *   preemption that came due meanwhile happens, runs after libgc has let
 *   go of the lock.
 *
 *   libgc clears up to 16 KiB below the stack pointer (GC_clear_stack):
 *   goroutines that allocate need that much room to spare on their
 *   stacks, which the default 128 KiB has.
 *
 *   libgc marks on the collecting thread only (GC_set_markers_count(1)):
 *   see glue_init.
 *
 * Runtime memory (descriptors, channel buffers) is not scanned: the
 * values this test passes through gmp_go and channels are plain integers.
 */
#define GC_THREADS              /* libgc's thread registration calls */
#define GC_NO_THREAD_REDIRECTS  /* pthread_create stays libc's */
#include "harness.h"

#include <gc/gc.h>
#include <gc/gc_mark.h>
#include <sys/mman.h>

#define STACK_SIZE  ((size_t)128 * 1024)

#if defined(H_ASAN)
/* libgc finds what a goroutine holds in its frames on its stack; ASan's
 * fake stacks (detect_stack_use_after_return, on by default in newer
 * clangs) would move those frames to memory libgc does not scan. */
__attribute__((used)) const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void)
{
    return "detect_stack_use_after_return=0";
}
#endif

/* ---- The glue: threads, stacks and roots ------------------------------- */

enum glue_mode {
    GLUE_NORMAL,        /* every goroutine stack is a root */
    GLUE_SKIP,          /* none is (the failing case) */
};

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
    enum glue_mode mode;            /* set by the test thread between runs */
    GC_push_other_roots_proc prev;  /* libgc's push of thread stacks */
    long page;

    /* Runtime threads registered with libgc. Written by the thread hooks
     * (seq_cst read-modify-writes: a plain count, and the collector reads
     * it with the world stopped, after libgc's handshake with each thread,
     * which orders it). */
    _Atomic int threads;

    struct region region[REGIONS_MAX];

    /* Counters, for the messages: relaxed, read after the runs. */
    _Atomic int64_t walks;
    _Atomic int64_t register_failed;
} glue;

static __thread bool glue_registered;

static void on_thread_start(void *ctx)
{
    (void)ctx;
    struct GC_stack_base sb;
    if (GC_get_stack_base(&sb) != GC_SUCCESS ||
        GC_register_my_thread(&sb) != GC_SUCCESS) {
        /* Relaxed: a counter the test thread reads after gmp_main. */
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

/* libgc's push-other-roots callback: runs in every collection, with the
 * world stopped and libgc's lock held, on the collecting thread. */
static void GC_CALLBACK push_goroutines(void)
{
    /* seq_cst: see struct glue. */
    if (atomic_load(&glue.threads) == 0) {
        glue.prev();                /* no runtime thread: libgc's own */
        return;
    }
    if (glue.mode == GLUE_SKIP)
        return;
    if (gmp_stacks_foreach(push_stack, __builtin_frame_address(0)) < 0)
        abort();                    /* a collection without the roots */
    push_signal_stacks();
    /* Relaxed: a counter. */
    atomic_fetch_add_explicit(&glue.walks, 1, memory_order_relaxed);
}

/* Once, on the main thread, before any runtime. */
static void glue_init(void)
{
    GC_set_handle_fork(1);          /* the failing case runs in a child */
    /* One marking thread, the collecting one. libgc's parallel markers
     * spin for the mark lock: on two CPUs shared with the runtime's
     * threads that doubled the time of each collection (CPU time, most of
     * it system), and they have no part in what is tested here. */
    GC_set_markers_count(1);
    GC_INIT();
    GC_allow_register_threads();
    glue.prev = GC_get_push_other_roots();
    GC_set_push_other_roots(push_goroutines);
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

static void gc_collect(void)
{
    gmp_preempt_disable();
    GC_gcollect();
    gmp_preempt_enable();
}

/* ---- The workload -------------------------------------------------------- */

/* Under ASan (the only slow build that has this test) a run costs about
 * four times as much: fewer runs there. */
#define WORKERS     1000
#define COLLECTIONS 100
#define RUNS        (H_SLOW ? 25 : 100)
#define LIST_LEN    8
#define IDS_MAX     1001            /* workers, then the spinner */

struct node {
    struct node *next;
    uint64_t     tag;               /* tag_of(id, gen, index) */
    uint64_t     id, gen;
};

static uint64_t tag_of(int id, uint64_t gen, int j)
{
    uint64_t x = ((uint64_t)id << 40) ^ (gen << 16) ^ (uint64_t)j;
    x += 0x9E3779B97F4A7C15ULL;     /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* One disappearing link per list head, hidden (GC_HIDE_POINTER), so that
 * this static array is no reference: libgc clears a link when it collects
 * its object. Each is written by its goroutine while it is unregistered
 * (set_link), cleared by libgc under its lock, and read under that lock
 * (check_locked). */
static GC_hidden_pointer links[IDS_MAX];

struct run {
    int procs, workers, collections, tokens;
    bool churn;                 /* rebuild lists and drop garbage */
    bool spinner;
    gmp_chan_t *tick;           /* collector -> workers, unbuffered */
    gmp_chan_t *spin;           /* collector -> spinner, one slot */
    gmp_wg_t wg;
    _Atomic int64_t built;      /* lists made (the first of each) */
    /* Results, relaxed counters read by the test thread after gmp_main:
     * checks passed, lists found collected, lists found changed, workers
     * whose last check (after every collection) passed, spinner rounds,
     * checks made on a thread libgc did not know. */
    _Atomic int64_t checks, lost, corrupt, final_ok, spins, unregistered;
    _Atomic int64_t preempted;  /* spinner stretches with a preemption */
};

static struct run run;

/* Points id's link at head. The link is unregistered while it is
 * written, so that no collection clears it meanwhile; both calls take
 * libgc's lock themselves. */
static void set_link(int id, struct node *head)
{
    gmp_preempt_disable();
    GC_unregister_disappearing_link((void **)&links[id]);
    links[id] = GC_HIDE_POINTER(head);
    if (GC_general_register_disappearing_link((void **)&links[id], head) !=
        GC_SUCCESS)
        links[id] = 0;              /* reads as collected: a failure */
    gmp_preempt_enable();
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
        head = n;
    }
    set_link(id, head);
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
    if (links[c->id] == 0) {
        c->result = CHECK_LOST;
        return NULL;
    }
    int j = 0;
    struct node *n = c->head;
    if (GC_REVEAL_POINTER(links[c->id]) != (void *)n) {
        c->result = CHECK_CORRUPT;
        return NULL;
    }
    for (; n && j < LIST_LEN; n = n->next, j++)
        if (n->tag != tag_of(c->id, c->gen, j) || n->id != (uint64_t)c->id ||
            n->gen != c->gen)
            break;
    c->result = (j == LIST_LEN && !n) ? CHECK_OK : CHECK_CORRUPT;
    return NULL;
}

static int check_list(int id, uint64_t gen, struct node *head)
{
    struct check c = {id, gen, head, CHECK_CORRUPT};
    gmp_preempt_disable();
    GC_call_with_alloc_lock(check_locked, &c);
    gmp_preempt_enable();
    return c.result;
}

/* Counts a check's result; false when the list must not be used again. */
static bool record(int result)
{
    /* Relaxed, all: counters the test thread reads after gmp_main, which
     * joins every goroutine first. */
    switch (result) {
    case CHECK_OK:
        atomic_fetch_add_explicit(&run.checks, 1, memory_order_relaxed);
        return true;
    case CHECK_LOST:
        atomic_fetch_add_explicit(&run.lost, 1, memory_order_relaxed);
        return false;
    default:
        atomic_fetch_add_explicit(&run.corrupt, 1, memory_order_relaxed);
        return false;
    }
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

/* A goroutine with a list: waits for a token, checks its list, makes
 * garbage and now and then a new list; checks once more when the tokens
 * end, after the last collection. */
static void worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t x = tag_of(id, 77, 0) | 1;
    uint64_t gen = 0;
    struct node *head = build(id, gen);
    /* Relaxed: a counter the collector waits on (in the failing case). */
    atomic_fetch_add_explicit(&run.built, 1, memory_order_relaxed);
    bool usable = head != NULL;
    if (!usable)
        record(CHECK_LOST);
    int64_t tok;
    while (gmp_chan_recv(run.tick, &tok) == 0) {
        if (!GC_thread_is_registered())
            /* Relaxed: a counter. */
            atomic_fetch_add_explicit(&run.unregistered, 1,
                                      memory_order_relaxed);
        if (!usable)
            continue;
        usable = record(check_list(id, gen, head));
        if (!usable || !run.churn)
            continue;
        garbage(&x);
        if (xorshift(&x) % 4 == 0) {
            head = build(id, ++gen);    /* the old list becomes garbage */
            usable = head != NULL;
            if (!usable)
                record(CHECK_LOST);
        }
    }
    if (usable && record(check_list(id, gen, head)))
        /* Relaxed: a counter. */
        atomic_fetch_add_explicit(&run.final_ok, 1, memory_order_relaxed);
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

#define SPIN_ID     1000            /* the spinner's list id */
#define SPIN_ROUNDS 200             /* sums per sum_list call */
#define LONG_NS     (12 * MS)       /* a stretch: past the 10 ms slice */

/* At procs 2 and 4, a goroutine that runs while the others are collected
 * around it: at its token (half way through the run) it walks its list
 * for LONG_NS in calls that make no runtime call, with the list in its
 * registers, so that collections stop it there and so that the monitor's
 * signal preempts it in there (how often is counted, not asserted:
 * test_preempt and test_foreign own that claim). */
static void spinner(void *arg)
{
    int id = (int)(intptr_t)arg;
    struct node *head = build(id, 0);
    uint64_t want = sum_want(id, 0, SPIN_ROUNDS);
    bool usable = head != NULL;
    if (!usable)
        record(CHECK_LOST);
    int64_t tok;
    while (gmp_chan_recv(run.spin, &tok) == 0) {
        if (!usable)
            continue;
        gmp_stats_t st0, st1;
        int64_t until = h_now() + LONG_NS;
        gmp_stats(&st0);
        while (usable && h_now() < until) {
            if (sum_list(head, SPIN_ROUNDS) != want) {
                /* Collected (lost), or changed under the walk. */
                if (record(check_list(id, 0, head)))
                    record(CHECK_CORRUPT);
                usable = false;
            }
            /* Relaxed: a counter. */
            atomic_fetch_add_explicit(&run.spins, 1, memory_order_relaxed);
        }
        if (gmp_stats(&st1) == 0 && st1.preemptions > st0.preemptions)
            /* Relaxed: a counter, informational. */
            atomic_fetch_add_explicit(&run.preempted, 1,
                                      memory_order_relaxed);
    }
    if (usable)
        record(check_list(id, 0, head));
    gmp_wg_done(&run.wg);
}

static bool all_built(void *arg)
{
    (void)arg;
    /* Relaxed: a counter; the lists it counts are the workers' own. */
    return atomic_load_explicit(&run.built, memory_order_relaxed) >=
           run.workers;
}

static int spinners_of(int procs)
{
    return run.spinner && procs > 1 ? 1 : 0;
}

/* The main goroutine: starts the workers, then collects, handing out a
 * round of tokens before each collection (and the spinner its one, half
 * way), and ends the tokens. */
static void run_main(void *arg)
{
    (void)arg;
    run.tick = gmp_chan_make(sizeof(int64_t), 0);
    run.spin = gmp_chan_make(sizeof(int64_t), 1);
    if (!run.tick || !run.spin) {
        record(CHECK_LOST);
        return;
    }
    gmp_wg_add(&run.wg, run.workers + spinners_of(run.procs));
    for (int i = 0; i < run.workers; i++)
        if (gmp_go(worker, (void *)(intptr_t)i) != 0)
            gmp_wg_done(&run.wg);
    if (spinners_of(run.procs) &&
        gmp_go(spinner, (void *)(intptr_t)SPIN_ID) != 0)
        gmp_wg_done(&run.wg);
    if (!run.churn) {
        /* The failing case: every list made before the first collection,
         * and nothing allocated after (see its test). */
        while (!all_built(NULL))
            gmp_yield();
        GC_enable();
    }
    for (int64_t k = 0; k < run.collections; k++) {
        for (int t = 0; t < run.tokens; t++)
            gmp_chan_send(run.tick, &k);
        if (k == run.collections / 2)
            gmp_chan_trysend(run.spin, &k);     /* one slot: never waits */
        gc_collect();
    }
    gmp_chan_close(run.tick);
    gmp_chan_close(run.spin);
    gmp_wg_wait(&run.wg);
    /* And until they have left: gmp_main abandons a goroutine still on
     * its way out, whose thread then unregisters late. */
    while (gmp_num_goroutines() > 1)
        gmp_yield();
    gmp_chan_free(run.tick);
    gmp_chan_free(run.spin);
}

/* One run: a fresh gmp_main. Returns gmp_main's result. */
static int run_once(int procs, int workers, int collections, bool churn)
{
    memset(&run, 0, sizeof run);
    run.procs = procs;
    run.workers = workers;
    run.collections = collections;
    run.tokens = workers / 20 > 0 ? workers / 20 : 1;
    run.churn = churn;
    run.spinner = churn;
    memset(links, 0, sizeof links);
    gmp_config_t cfg;
    glue_config(&cfg, procs);
    if (!churn)
        GC_disable();               /* run_main enables it */
    return gmp_main(run_main, NULL, &cfg);
}

static bool no_threads(void *arg)
{
    (void)arg;
    return atomic_load(&glue.threads) == 0;     /* seq_cst: struct glue */
}

static void check_run(int procs, int i)
{
    int64_t want = run.workers + spinners_of(procs);
    if (atomic_load(&run.lost) || atomic_load(&run.corrupt) ||
        atomic_load(&run.final_ok) != run.workers ||
        atomic_load(&run.unregistered) || atomic_load(&glue.register_failed))
        print_error("procs=%d run %d: %lld lost, %lld corrupt, %lld of %d "
                    "final checks, %lld unregistered, %lld failed "
                    "registrations (of %lld goroutines)\n", procs, i,
                    (long long)atomic_load(&run.lost),
                    (long long)atomic_load(&run.corrupt),
                    (long long)atomic_load(&run.final_ok), run.workers,
                    (long long)atomic_load(&run.unregistered),
                    (long long)atomic_load(&glue.register_failed),
                    (long long)want);
    assert_int_equal(atomic_load(&run.lost), 0);
    assert_int_equal(atomic_load(&run.corrupt), 0);
    assert_int_equal(atomic_load(&run.final_ok), run.workers);
    assert_int_equal(atomic_load(&run.unregistered), 0);
    assert_int_equal(atomic_load(&glue.register_failed), 0);
    assert_true(atomic_load(&run.checks) >= run.workers);
    /* Every runtime thread unregisters itself: at once, or (one that
     * gmp_main abandoned while its goroutine was on the way out) when it
     * leaves. */
    assert_int_equal(h_wait_until(no_threads, NULL, "threads unregistered"),
                     0);
}

static void runs_at(int procs, enum glue_mode mode, int runs, int collections)
{
    glue.mode = mode;
    int64_t t0 = h_now();
    int64_t w0 = atomic_load(&glue.walks);
    int64_t checks = 0, spins = 0, preempted = 0;
    GC_word gc0 = GC_get_gc_no();
    for (int i = 0; i < runs; i++) {
        GC_word before = GC_get_gc_no();
        assert_int_equal(run_once(procs, WORKERS, collections, true), 0);
        check_run(procs, i);
        /* The forced ones at least (an automatic one may come in between,
         * and GC_gcollect never skips). */
        assert_true(GC_get_gc_no() - before >= (GC_word)collections);
        checks += atomic_load(&run.checks);
        spins += atomic_load(&run.spins);
        preempted += atomic_load(&run.preempted);
    }
    print_message("procs=%d: %d runs of %d goroutines, %lu collections, "
                  "%lld checks passed, %lld spinner sums (%lld stretches "
                  "with a preemption), %lld walks, %.1f s\n", procs, runs,
                  WORKERS,
                  (unsigned long)(GC_get_gc_no() - gc0), (long long)checks,
                  (long long)spins, (long long)preempted,
                  (long long)(atomic_load(&glue.walks) - w0),
                  (double)(h_now() - t0) / 1e9);
}

/* ---- Tests ------------------------------------------------------------- */

static void test_gc_lists_survive_procs_1(void **state)
{
    (void)state;
    runs_at(1, GLUE_NORMAL, RUNS, COLLECTIONS);
}

static void test_gc_lists_survive_procs_2(void **state)
{
    (void)state;
    runs_at(2, GLUE_NORMAL, RUNS, COLLECTIONS);
}

static void test_gc_lists_survive_procs_4(void **state)
{
    (void)state;
    runs_at(4, GLUE_NORMAL, RUNS, COLLECTIONS);
}

/* The failing case, in a child: goroutine stacks are no roots. Every list
 * is made before the first collection (collections disabled until then)
 * and nothing is allocated after, so a collected list is never written
 * again and libgc's heap stays sound enough for the child to report. */
static void skip_child(void *arg)
{
    (void)arg;
    glue.mode = GLUE_SKIP;
    int rc = run_once(2, WORKERS, 3, false);
    printf("rc=%d lost=%lld corrupt=%lld checks=%lld\n", rc,
           (long long)atomic_load(&run.lost),
           (long long)atomic_load(&run.corrupt),
           (long long)atomic_load(&run.checks));
    fflush(stdout);
    _exit(0);
}

static void test_gc_without_stack_roots_lists_are_lost(void **state)
{
    (void)state;
    struct h_child res;
    assert_int_equal(h_fork(skip_child, NULL, &res), 0);
    h_child_exited(&res, 0, 2);
    int rc = -1;
    long long lost = -1, corrupt = -1, checks = -1;
    const char *line = strstr(res.out, "rc=");
    assert_non_null(line);
    assert_int_equal(sscanf(line, "rc=%d lost=%lld corrupt=%lld checks=%lld",
                            &rc, &lost, &corrupt, &checks), 4);
    print_message("without goroutine stacks as roots: %lld of %d lists "
                  "collected under their goroutines, %lld found changed\n",
                  lost, WORKERS, corrupt);
    assert_int_equal(rc, 0);
    /* Nothing else refers to them: most lists go at the first collection
     * (a stale word elsewhere may keep a few). */
    assert_true(lost >= WORKERS / 2);
}

int main(void)
{
    glue_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gc_lists_survive_procs_1),
        cmocka_unit_test(test_gc_lists_survive_procs_2),
        cmocka_unit_test(test_gc_lists_survive_procs_4),
        cmocka_unit_test(test_gc_without_stack_roots_lists_are_lost),
    };
    return cmocka_run_group_tests_name("libgc", tests, NULL, NULL);
}
