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
 *   - the glue's fallback scan (below), used alone, keeps the lists too,
 *     and a collection that finds the helper asleep inside its walk takes
 *     the fallback and the helper serves the next one;
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
 *   The lock (a runtime bug, reported with this test): gmp_stacks_foreach
 *   takes the runtime's gflock, which an M holds for a moment when a
 *   goroutine starts (gfget_slow) or exits (gfput) and its P's cache of
 *   descriptors is empty or full. The world is stopped when the push
 *   runs, so an M stopped inside that moment keeps the lock until the
 *   collection ends, and a collector that calls gmp_stacks_foreach from
 *   the push waits for ever (seen: 4 goroutines spawning 200 at a time
 *   beside a GC_gcollect loop hung within two minutes, with one M stopped
 *   in newg and the collector in gmp_stacks_foreach's lock). The glue
 *   therefore calls it on a helper thread that libgc does not know, so
 *   that the stop does not stop it, and waits until the helper has either
 *   finished or sleeps inside the call: inside it the only sleep is on
 *   gflock, which with every runtime thread stopped nobody can release.
 *   Then the glue falls back to scanning every stack mapping from the
 *   table whole, through process_vm_readv into a buffer (the mappings
 *   hold guard pages, which a direct read would fault on, and a copy is a
 *   valid root while the world is stopped). Slow (tens of ms) and rare,
 *   so two tests force it: one scans only that way, the other puts the
 *   helper to sleep inside its walk for the length of each collection, as
 *   a stopped holder of gflock would (which cannot be arranged on
 *   purpose).
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
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/uio.h>

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
    GLUE_NORMAL,        /* gmp_stacks_foreach on the helper, else fallback */
    GLUE_FALLBACK,      /* always the whole-mapping scan */
    GLUE_SKIP,          /* no goroutine stack is a root (the failing case) */
};

#define REGIONS_MAX 4096        /* stack mappings alive at once */
#define RANGES_MAX  8192        /* goroutine stacks per walk */
#define COPY_PAGES  256         /* pages per process_vm_readv */

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

    /* The helper thread. want: the walk the collector asks for (written
     * only by the collector, under libgc's lock); done: the last walk the
     * helper finished; inside: the helper is in gmp_stacks_foreach. */
    pthread_t helper;
    sem_t req;                      /* a walk is wanted */
    char helper_stat[64];           /* /proc/self/task/<tid>/stat */
    _Atomic int helper_ready;
    _Atomic uint64_t want, done;
    _Atomic int inside;
    /* A test's stand-in for a stopped gflock holder: the next walk sleeps
     * inside (on unblock) until the test posts it. */
    _Atomic int block_next;
    sem_t unblock;
    int nranges, rc;                /* the helper's, read after done */
    struct { char *sp, *hi; } *ranges;

    /* Fallback: a buffer and a remote vector for process_vm_readv, mapped
     * so that they are no root themselves. */
    char *copybuf;
    struct iovec *remote;

    /* Counters, for the messages: relaxed, read after the runs. */
    _Atomic int64_t walks, fallbacks, helper_blocked, copied_bytes;
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

/* Pushes a copy of [lo, hi) (page-aligned), page by page, skipping pages
 * that cannot be read (guards, unmapped). Context: the collector, libgc's
 * lock held, the world stopped. */
static void push_copy(char *lo, char *hi)
{
    size_t page = (size_t)glue.page;
    pid_t self = getpid();
    for (char *p = lo; p < hi;) {
        size_t n = (size_t)(hi - p) / page;
        if (n > COPY_PAGES)
            n = COPY_PAGES;
        for (size_t k = 0; k < n; k++) {
            glue.remote[k].iov_base = p + k * page;
            glue.remote[k].iov_len = page;
        }
        struct iovec local = {glue.copybuf, n * page};
        /* Partial transfers stop at a whole remote element: at the first
         * page that cannot be read. */
        ssize_t got = process_vm_readv(self, &local, 1, glue.remote,
                                       (unsigned long)n, 0);
        if (got < 0) {
            if (errno != EFAULT) {
                /* Without the copy the collection would be unsound. */
                fprintf(stderr, "test_gc: process_vm_readv: %s\n",
                        strerror(errno));
                abort();
            }
            got = 0;
        }
        if (got > 0)
            GC_push_all_eager(glue.copybuf, glue.copybuf + got);
        /* Relaxed: a counter. */
        atomic_fetch_add_explicit(&glue.copied_bytes, got,
                                  memory_order_relaxed);
        p += (size_t)got;
        if ((size_t)got < n * page)
            p += page;                  /* the page that failed */
    }
}

/* Pushes every stack mapping, or only the small ones (signal stacks). */
static void push_regions(bool small_only)
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
        if (small_only && size >= 2 * STACK_SIZE)
            continue;
        push_copy((char *)base, (char *)base + size);
    }
}

static void range_cb(void *lo, void *hi, void *sp, void *arg)
{
    (void)lo;
    (void)arg;
    if (glue.nranges < RANGES_MAX) {
        glue.ranges[glue.nranges].sp = sp;
        glue.ranges[glue.nranges].hi = hi;
    }
    glue.nranges++;
}

static void *helper_main(void *arg)
{
    (void)arg;
    snprintf(glue.helper_stat, sizeof glue.helper_stat,
             "/proc/self/task/%d/stat", (int)gettid());
    /* Release: the collector reads helper_stat after it sees this. */
    atomic_store_explicit(&glue.helper_ready, 1, memory_order_release);
    for (;;) {
        while (sem_wait(&glue.req) != 0)
            ;                           /* EINTR */
        /* Acquire: pairs with the collector's release of want (nothing
         * else to see; kept symmetrical with done). */
        uint64_t g = atomic_load_explicit(&glue.want, memory_order_acquire);
        if (g == atomic_load_explicit(&glue.done, memory_order_relaxed))
            continue;                   /* a request already served */
        glue.nranges = 0;
        /* seq_cst: the collector reads inside, then the thread's state;
         * inside must be set before the lock can put us to sleep. */
        atomic_store(&glue.inside, 1);
        /* seq_cst: a plain flag, set and taken once per test round. */
        if (atomic_exchange(&glue.block_next, 0))
            while (sem_wait(&glue.unblock) != 0)
                ;                       /* EINTR */
        glue.rc = gmp_stacks_foreach(range_cb, NULL);
        atomic_store(&glue.inside, 0);
        /* Release: the collector that sees done == g (acquire) sees rc
         * and the ranges. */
        atomic_store_explicit(&glue.done, g, memory_order_release);
    }
    return NULL;
}

/* Whether the helper thread sleeps now ('S' in its /proc stat). No stdio:
 * a stopped thread may hold malloc's lock. */
static bool helper_sleeping(void)
{
    char buf[512];
    int fd = open(glue.helper_stat, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

/* Has the helper walk the goroutines. True with the walk in glue.ranges;
 * false when the helper sleeps inside gmp_stacks_foreach (on gflock, held
 * by a stopped thread). Context: the collector, libgc's lock held. */
static bool helper_walk(void)
{
    /* Relaxed load: only this function writes want, under libgc's lock. */
    uint64_t g = atomic_load_explicit(&glue.want, memory_order_relaxed) + 1;
    /* Release: see helper_main. */
    atomic_store_explicit(&glue.want, g, memory_order_release);
    sem_post(&glue.req);
    for (unsigned spins = 0;; spins++) {
        /* Acquire: pairs with the helper's release of done. */
        if (atomic_load_explicit(&glue.done, memory_order_acquire) == g)
            return true;
        /* seq_cst, both loads of inside: see helper_main. Inside and
         * asleep, and still not done after the look: blocked. A helper
         * caught inside an older walk counts too: it waits on the same
         * lock. The first few rounds only yield: a walk takes tens of
         * microseconds, a look at /proc a few. */
        if (spins >= 8 && atomic_load(&glue.inside) && helper_sleeping() &&
            atomic_load(&glue.inside) &&
            atomic_load_explicit(&glue.done, memory_order_acquire) != g) {
            /* Relaxed: a counter. */
            atomic_fetch_add_explicit(&glue.helper_blocked, 1,
                                      memory_order_relaxed);
            return false;
        }
        /* Polling, not a wait on the helper: waking this thread after
         * each walk made collections slower by half on two CPUs. */
        sched_yield();
    }
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
    switch (glue.mode) {
    case GLUE_SKIP:
        return;
    case GLUE_NORMAL:
        if (helper_walk() && glue.rc >= 0 && glue.nranges <= RANGES_MAX) {
            /* The collector's own goroutine, when it is one, is reported
             * as running (sp = lo: the helper cannot know its stack
             * pointer), but what it holds lies above this frame: its
             * registers libgc has already pushed itself. */
            char *here = __builtin_frame_address(0);
            for (int i = 0; i < glue.nranges; i++) {
                char *sp = glue.ranges[i].sp, *hi = glue.ranges[i].hi;
                if (sp <= here && here < hi)
                    sp = here;
                GC_push_all_eager(sp, hi);
            }
            push_regions(true);
            /* Relaxed: a counter. */
            atomic_fetch_add_explicit(&glue.walks, 1, memory_order_relaxed);
            return;
        }
        break;
    case GLUE_FALLBACK:
        break;
    }
    /* Relaxed: a counter. */
    atomic_fetch_add_explicit(&glue.fallbacks, 1, memory_order_relaxed);
    push_regions(false);
}

static void *map_buffer(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("test_gc: mmap");
        abort();
    }
    return p;
}

/* Once, on the main thread, before any runtime. */
static void glue_init(void)
{
    glue.page = sysconf(_SC_PAGESIZE);
    glue.ranges = map_buffer(RANGES_MAX * sizeof *glue.ranges);
    glue.copybuf = map_buffer(COPY_PAGES * (size_t)glue.page);
    glue.remote = map_buffer(COPY_PAGES * sizeof *glue.remote);
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
    if (sem_init(&glue.req, 0, 0) != 0 ||
        sem_init(&glue.unblock, 0, 0) != 0 ||
        pthread_create(&glue.helper, NULL, helper_main, NULL) != 0) {
        perror("test_gc: helper");
        abort();
    }
    /* Acquire: pairs with helper_main's release. */
    while (!atomic_load_explicit(&glue.helper_ready, memory_order_acquire))
        sched_yield();
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
    bool block_helper;          /* each forced collection finds it asleep */
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
        if (run.block_helper)
            atomic_store(&glue.block_next, 1);  /* seq_cst: see glue */
        gc_collect();
        if (run.block_helper)
            sem_post(&glue.unblock);
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
static int run_once(int procs, int workers, int collections, bool churn,
                    bool block_helper)
{
    memset(&run, 0, sizeof run);
    run.procs = procs;
    run.workers = workers;
    run.collections = collections;
    run.tokens = workers / 20 > 0 ? workers / 20 : 1;
    run.churn = churn;
    run.block_helper = block_helper;
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

static void runs_at(int procs, enum glue_mode mode, int runs, int collections,
                    bool block_helper)
{
    glue.mode = mode;
    int64_t t0 = h_now();
    int64_t w0 = atomic_load(&glue.walks), f0 = atomic_load(&glue.fallbacks);
    int64_t b0 = atomic_load(&glue.helper_blocked);
    int64_t checks = 0, spins = 0, preempted = 0;
    GC_word gc0 = GC_get_gc_no();
    for (int i = 0; i < runs; i++) {
        GC_word before = GC_get_gc_no();
        assert_int_equal(run_once(procs, WORKERS, collections, true,
                                  block_helper), 0);
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
                  "with a preemption), %lld walks, %lld fallback scans "
                  "(%lld with the helper blocked), %.1f s\n", procs, runs,
                  WORKERS,
                  (unsigned long)(GC_get_gc_no() - gc0), (long long)checks,
                  (long long)spins, (long long)preempted,
                  (long long)(atomic_load(&glue.walks) - w0),
                  (long long)(atomic_load(&glue.fallbacks) - f0),
                  (long long)(atomic_load(&glue.helper_blocked) - b0),
                  (double)(h_now() - t0) / 1e9);
}

/* ---- Tests ------------------------------------------------------------- */

static void test_gc_lists_survive_procs_1(void **state)
{
    (void)state;
    runs_at(1, GLUE_NORMAL, RUNS, COLLECTIONS, false);
}

static void test_gc_lists_survive_procs_2(void **state)
{
    (void)state;
    runs_at(2, GLUE_NORMAL, RUNS, COLLECTIONS, false);
}

static void test_gc_lists_survive_procs_4(void **state)
{
    (void)state;
    runs_at(4, GLUE_NORMAL, RUNS, COLLECTIONS, false);
}

/* The fallback alone: every collection scans every stack mapping whole. */
static void test_gc_fallback_scan_keeps_lists(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        int64_t f0 = atomic_load(&glue.fallbacks);
        runs_at(procs, GLUE_FALLBACK, 2, H_SLOW ? 5 : 10, false);
        assert_true(atomic_load(&glue.fallbacks) - f0 >= 2 * (H_SLOW ? 5 : 10));
    }
    glue.mode = GLUE_NORMAL;
}

/* The helper caught asleep inside its walk, as behind a gflock held by a
 * stopped thread (which cannot be arranged on purpose): before each
 * forced collection the test makes the helper's next walk wait until the
 * collection is over. Each one must notice, scan the fallback way, and
 * the helper must serve the next collection again. */
static void test_gc_blocked_helper_falls_back(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        int64_t b0 = atomic_load(&glue.helper_blocked);
        int n = H_SLOW ? 5 : 10;
        runs_at(procs, GLUE_NORMAL, 2, n, true);
        assert_true(atomic_load(&glue.helper_blocked) - b0 >= 2 * n);
        /* And it is back: a run without the stand-in walks again. */
        int64_t w1 = atomic_load(&glue.walks);
        assert_int_equal(run_once(procs, WORKERS, 1, true, false), 0);
        check_run(procs, 0);
        assert_true(atomic_load(&glue.walks) > w1);
    }
}

/* The failing case, in a child: goroutine stacks are no roots. Every list
 * is made before the first collection (collections disabled until then)
 * and nothing is allocated after, so a collected list is never written
 * again and libgc's heap stays sound enough for the child to report. */
static void skip_child(void *arg)
{
    (void)arg;
    glue.mode = GLUE_SKIP;
    int rc = run_once(2, WORKERS, 3, false, false);
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
        cmocka_unit_test(test_gc_fallback_scan_keeps_lists),
        cmocka_unit_test(test_gc_blocked_helper_falls_back),
        cmocka_unit_test(test_gc_without_stack_roots_lists_are_lost),
    };
    return cmocka_run_group_tests_name("libgc", tests, NULL, NULL);
}
