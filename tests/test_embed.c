/*
 * test_embed.c - the embedding hooks of gmp_config_t and
 * gmp_stacks_foreach.
 *
 * Claims, each for a runtime with 1, 2 and 4 Ps:
 *   - thread_start and thread_stop run once on every thread the runtime
 *     creates, on that thread, and balance once gmp_shutdown returns;
 *   - a counting allocator given as mem_alloc/mem_free and
 *     stack_alloc/stack_free is used, and is back to zero live bytes
 *     after a workload that touches every kind of runtime object
 *     (goroutines, stacks, waiter records, timers, channels, a large
 *     select, the poller's descriptor tables) and gmp_shutdown;
 *   - gmp_stacks_foreach reports a parked goroutine's stack, with sp
 *     inside it, and a value that only that stack holds lies in
 *     [sp, hi); once the goroutine has exited, no reported stack holds it;
 *     called while goroutines get their first stacks, it reports sane
 *     bounds, and under TSan reading them is no race;
 *   - a goroutine is never preempted inside a memory hook, which the
 *     runtime may call holding its own locks: a hook that holds a lock of
 *     its own and spins past the preemption slice is never re-entered on
 *     its thread while it holds that lock;
 *   - bad input and no runtime are errors.
 * Each test starts and stops its own runtime (the hooks are set at start).
 */
#include "harness.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "internal.h"

/* ---- Thread hooks ----------------------------------------------------------- */

#define MAX_THREADS 64

static struct {
    pthread_mutex_t mu;
    int   started, stopped, wrong_thread, ctx_wrong;
    pid_t tids[MAX_THREADS];
    bool  live[MAX_THREADS];
} th_log = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int hook_ctx_token;

static void on_thread_start(void *ctx)
{
    pthread_mutex_lock(&th_log.mu);
    if (ctx != &hook_ctx_token)
        th_log.ctx_wrong++;
    if (th_log.started < MAX_THREADS) {
        th_log.tids[th_log.started] = h_tid();
        th_log.live[th_log.started] = true;
    }
    th_log.started++;
    pthread_mutex_unlock(&th_log.mu);
}

static void on_thread_stop(void *ctx)
{
    pthread_mutex_lock(&th_log.mu);
    if (ctx != &hook_ctx_token)
        th_log.ctx_wrong++;
    pid_t tid = h_tid();
    bool found = false;
    for (int i = 0; i < th_log.started && i < MAX_THREADS; i++)
        if (th_log.live[i] && th_log.tids[i] == tid) {
            th_log.live[i] = false;
            found = true;
            break;
        }
    if (!found)
        th_log.wrong_thread++;
    th_log.stopped++;
    pthread_mutex_unlock(&th_log.mu);
}

/* ---- A counting allocator ------------------------------------------------- */

static _Atomic int64_t mem_live, mem_calls, stack_live, stack_calls;
static _Atomic int64_t mem_misfree;

static void *count_alloc(size_t size, void *ctx)
{
    (void)ctx;
    size_t rounded = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (p) {
        atomic_fetch_add(&mem_live, (int64_t)size);
        atomic_fetch_add(&mem_calls, 1);
    }
    return p;
}

static void count_free(void *p, size_t size, void *ctx)
{
    (void)ctx;
    if (!p)
        atomic_fetch_add(&mem_misfree, 1);
    atomic_fetch_sub(&mem_live, (int64_t)size);
    free(p);
}

static void *count_stack_alloc(size_t size, void *ctx)
{
    (void)ctx;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    atomic_fetch_add(&stack_live, (int64_t)size);
    atomic_fetch_add(&stack_calls, 1);
    return p;
}

static void count_stack_free(void *p, size_t size, void *ctx)
{
    (void)ctx;
    atomic_fetch_sub(&stack_live, (int64_t)size);
    munmap(p, size);
}

static void hooks_reset(void)
{
    pthread_mutex_lock(&th_log.mu);
    th_log.started = th_log.stopped = 0;
    th_log.wrong_thread = th_log.ctx_wrong = 0;
    memset(th_log.live, 0, sizeof th_log.live);
    pthread_mutex_unlock(&th_log.mu);
    atomic_store(&mem_live, 0);
    atomic_store(&mem_calls, 0);
    atomic_store(&stack_live, 0);
    atomic_store(&stack_calls, 0);
    atomic_store(&mem_misfree, 0);
}

static void init_with_hooks(int procs)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    cfg.thread_start = on_thread_start;
    cfg.thread_stop = on_thread_stop;
    cfg.mem_alloc = count_alloc;
    cfg.mem_free = count_free;
    cfg.stack_alloc = count_stack_alloc;
    cfg.stack_free = count_stack_free;
    cfg.hook_ctx = &hook_ctx_token;
    assert_int_equal(gmp_init(&cfg), 0);
}

/* ---- A workload that makes every kind of runtime object ------------------ */

#define WL_GS    H_SCALE(2000)
#define WL_CASES 40                 /* above select's on-stack limit */

static _Atomic int64_t wl_done;
static int wl_pipe[2];

static void wl_sleeper(void *arg)
{
    gmp_sleep((int64_t)(uintptr_t)arg * US);
    atomic_fetch_add(&wl_done, 1);
}

static void wl_pinger(void *arg)
{
    gmp_chan_t *ch = arg;
    int v = 1;
    G_CHECK(gmp_chan_send(ch, &v) == 0);
    atomic_fetch_add(&wl_done, 1);
}

static void wl_selecter(void *arg)
{
    (void)arg;
    gmp_chan_t *chs[WL_CASES];
    gmp_case_t cases[WL_CASES];
    int vals[WL_CASES];
    for (int i = 0; i < WL_CASES; i++) {
        chs[i] = gmp_chan_make(sizeof(int), 1);
        G_CHECK(chs[i] != NULL);
        cases[i] = (gmp_case_t){.chan = chs[i], .op = GMP_RECV,
                                     .elem = &vals[i]};
    }
    int v = 5;
    G_CHECK(gmp_chan_send(chs[WL_CASES - 1], &v) == 0);
    G_CHECK(gmp_select(cases, WL_CASES, GMP_FOREVER) == WL_CASES - 1);
    for (int i = 0; i < WL_CASES; i++)
        gmp_chan_free(chs[i]);
    atomic_fetch_add(&wl_done, 1);
}

static void wl_reader(void *arg)
{
    (void)arg;
    char c;
    G_CHECK(gmp_read(wl_pipe[0], &c, 1) == 1);
    atomic_fetch_add(&wl_done, 1);
}

static void workload(void)
{
    atomic_store(&wl_done, 0);
    gmp_chan_t *ch = gmp_chan_make(sizeof(int), 0);
    assert_non_null(ch);
    assert_int_equal(pipe(wl_pipe), 0);
    int64_t want = 0;
    for (int i = 0; i < WL_GS; i++, want++)
        assert_int_equal(gmp_go(wl_sleeper, (void *)(uintptr_t)(i % 500)), 0);
    for (int i = 0; i < 64; i++, want++)
        assert_int_equal(gmp_go(wl_pinger, ch), 0);
    for (int i = 0; i < 64; i++) {
        int v;
        assert_int_equal(gmp_chan_recv(ch, &v), 0);
    }
    assert_int_equal(gmp_go(wl_selecter, NULL), 0);
    want++;
    assert_int_equal(gmp_go(wl_reader, NULL), 0);
    want++;
    assert_int_equal(write(wl_pipe[1], "x", 1), 1);
    assert_int_equal(h_wait(&wl_done, want), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(gmp_close(wl_pipe[0]), 0);
    close(wl_pipe[1]);
    gmp_chan_free(ch);
}

static void test_hooks_balance_and_memory_returns(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        bad_reset();
        hooks_reset();
        init_with_hooks(procs);
        workload();
        assert_true(atomic_load(&mem_calls) > 0);
        assert_true(atomic_load(&stack_calls) > 0);
        assert_true(atomic_load(&mem_live) > 0);    /* the runtime lives */
        assert_int_equal(gmp_shutdown(), 0);
        ASSERT_NO_BAD();

        pthread_mutex_lock(&th_log.mu);
        int started = th_log.started, stopped = th_log.stopped;
        int wrong = th_log.wrong_thread, ctxw = th_log.ctx_wrong;
        pthread_mutex_unlock(&th_log.mu);
        print_message("procs=%d: %d threads, %lld object and %lld stack "
                      "allocations\n", procs, started,
                      (long long)atomic_load(&mem_calls),
                      (long long)atomic_load(&stack_calls));
        assert_true(started >= 2);          /* the monitor and an M */
        assert_int_equal(stopped, started);
        assert_int_equal(wrong, 0);
        assert_int_equal(ctxw, 0);
        assert_int_equal(atomic_load(&mem_live), 0);
        assert_int_equal(atomic_load(&stack_live), 0);
        assert_int_equal(atomic_load(&mem_misfree), 0);
    }
}

/* A runtime without hooks after one with them uses neither. */
static void test_hooks_do_not_outlive_their_runtime(void **state)
{
    (void)state;
    hooks_reset();
    init_with_hooks(2);
    assert_int_equal(gmp_shutdown(), 0);
    hooks_reset();
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    assert_int_equal(gmp_init(&cfg), 0);
    workload();
    assert_int_equal(gmp_shutdown(), 0);
    assert_int_equal(th_log.started, 0);
    assert_int_equal(atomic_load(&mem_calls), 0);
    assert_int_equal(atomic_load(&stack_calls), 0);
}

/* ---- gmp_stacks_foreach --------------------------------------------------- */

static uint64_t secret_seed;
static gmp_chan_t *secret_ch;
static _Atomic int64_t secret_parked, secret_done;

/* The secret exists only in this goroutine's frame: computed here from
 * the seed, never stored anywhere else. */
void embed_secret_keeper(void *arg)
{
    (void)arg;
    volatile uint64_t keep[4];
    for (int i = 0; i < 4; i++)
        keep[i] = secret_seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i;
    atomic_store(&secret_parked, 1);
    int v;
    G_CHECK(gmp_chan_recv(secret_ch, &v) == 0);
    G_CHECK(keep[0] == secret_seed * 0x9E3779B97F4A7C15ULL);
    atomic_fetch_add(&secret_done, 1);
}

struct scan {
    uint64_t want;                  /* 0: check the bounds only */
    int      stacks, found, bad;    /* bad: not lo < hi, lo <= sp <= hi */
};

/* A conservative scan reads every word, ASan's redzones included, as a
 * collector's marker must: not instrumented. With want 0 it reads no
 * word, for stacks whose goroutines run meanwhile. */
__attribute__((no_sanitize_address))
static void scan_stack(void *lo, void *hi, void *sp, void *arg)
{
    struct scan *sc = arg;
    sc->stacks++;
    if (!((char *)lo < (char *)hi && (char *)lo <= (char *)sp &&
          (char *)sp <= (char *)hi))
        sc->bad++;
    if (!sc->want)
        return;
    for (uint64_t *p = (uint64_t *)(((uintptr_t)sp + 7) & ~(uintptr_t)7);
         (char *)(p + 1) <= (char *)hi; p++)
        if (*p == sc->want)
            sc->found++;
}

static bool keeper_waiting(void *arg)
{
    (void)arg;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gmp_dump(f);
    fclose(f);
    bool ok = strstr(buf, "[chan receive") != NULL;
    free(buf);
    return ok;
}

/* A runtime with procs Ps and no hooks, for the stack tests. */
static void start_plain(int procs)
{
    bad_reset();
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    assert_int_equal(gmp_init(&cfg), 0);
}

static _Atomic(struct scan *) walk_sc;
static _Atomic int64_t walk_n, walk_done;

static void walk_thread(void *arg)
{
    (void)arg;
    atomic_store(&walk_n, gmp_stacks_foreach(scan_stack,
                                             atomic_load(&walk_sc)));
    atomic_store(&walk_done, 1);
}

static void test_stacks_foreach_finds_a_parked_value(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        start_plain(procs);
        secret_seed = (uint64_t)h_now() | 1;
        secret_ch = gmp_chan_make(sizeof(int), 0);
        atomic_store(&secret_parked, 0);
        atomic_store(&secret_done, 0);
        assert_int_equal(gmp_go(embed_secret_keeper, NULL), 0);
        assert_int_equal(h_wait(&secret_parked, 1), 0);
        assert_int_equal(h_wait_until(keeper_waiting, NULL, "keeper parked"),
                         0);

        struct scan sc = {.want = secret_seed * 0x9E3779B97F4A7C15ULL};
        /* As a collector would, with a thread stopped holding the
         * runtime's goroutine-list lock: the walk takes no lock. */
        struct schedt *s =
            atomic_load_explicit(&gmp__sched, memory_order_acquire);
        gmp__lock(&s->gflock);
        atomic_store(&walk_sc, &sc);
        atomic_store(&walk_n, -1);
        atomic_store(&walk_done, 0);
        struct th t;
        th_start(&t, walk_thread, NULL);
        int walked = h_wait(&walk_done, 1);
        gmp__unlock(&s->gflock);
        th_join(&t);
        assert_int_equal(walked, 0);
        int n = (int)atomic_load(&walk_n);
        assert_int_equal(n, sc.stacks);
        assert_true(n >= 1);
        assert_int_equal(sc.bad, 0);
        assert_int_equal(sc.found, 1);

        int v = 1;
        assert_int_equal(gmp_chan_send(secret_ch, &v), 0);
        assert_int_equal(h_wait(&secret_done, 1), 0);
        assert_int_equal(h_wait_quiet(), 0);
        struct scan after = {.want = sc.want};
        assert_int_equal(gmp_stacks_foreach(scan_stack, &after), 0);
        assert_int_equal(after.found, 0);
        gmp_chan_free(secret_ch);
        assert_int_equal(gmp_shutdown(), 0);
        ASSERT_NO_BAD();
    }
}

/* gmp_stacks_foreach from the test thread while goroutines get their
 * first stacks on the runtime's threads: every report has lo < hi and sp
 * in [lo, hi], and (under TSan) reading a stack's bounds is no race with
 * the thread that set them up. At the end all STARTERS are reported. */
#define STARTERS 200

static gmp_chan_t *start_ch;
static _Atomic int64_t start_parked, start_done;

void embed_starter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&start_parked, 1);
    int v;
    G_CHECK(gmp_chan_recv(start_ch, &v) == GMP_ECLOSED);
    atomic_fetch_add(&start_done, 1);
}

static void test_stacks_foreach_while_goroutines_start(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        start_plain(procs);
        assert_non_null(start_ch = gmp_chan_make(sizeof(int), 0));
        atomic_store(&start_parked, 0);
        atomic_store(&start_done, 0);
        for (int i = 0; i < STARTERS; i++)
            assert_int_equal(gmp_go(embed_starter, NULL), 0);
        int scans = 0;
        struct scan b = {0};
        int64_t deadline = h_now() + H_DEADLINE_NS;
        while (atomic_load(&start_parked) < STARTERS) {
            assert_true(gmp_stacks_foreach(scan_stack, &b) >= 0);
            assert_true(h_now() < deadline);
            scans++;
        }
        print_message("procs=%d: %d scans while they started\n", procs,
                      scans);
        assert_int_equal(b.bad, 0);
        struct scan all = {0};
        assert_true(gmp_stacks_foreach(scan_stack, &all) >= STARTERS);
        assert_int_equal(all.bad, 0);
        assert_int_equal(gmp_chan_close(start_ch), 0);
        assert_int_equal(h_wait(&start_done, STARTERS), 0);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(start_ch);
        assert_int_equal(gmp_shutdown(), 0);
        ASSERT_NO_BAD();
    }
}

/* ---- No preemption inside a hook ------------------------------------------ */

/*
 * The runtime calls mem_alloc from goroutines, sometimes holding a lock of
 * its own (startm makes an M under sched.lock, from gmp_go). This hook
 * takes a lock of its own too and then spins 40 ms, past the 10 ms slice
 * after which sysmon asks for preemption. Were the goroutine stopped
 * inside, the next one on that thread would find the hook's lock held by
 * its own thread ("reentered"; without the guard, at procs=1, every run);
 * the runtime's lock would have hung it outright.
 */
#define SPIN_GS    4
#define SPIN_CHANS 3
#define SPIN_NS    (40 * MS)

static struct {
    pthread_mutex_t mu;
    _Atomic int32_t holder;         /* thread id inside, or 0 */
    _Atomic int     armed, reentered, spun;
} sh = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *spin_alloc(size_t size, void *ctx)
{
    if (atomic_load(&sh.armed)) {
        if (pthread_mutex_trylock(&sh.mu) != 0) {
            if (atomic_load(&sh.holder) == h_tid()) {
                atomic_fetch_add(&sh.reentered, 1);
                return count_alloc(size, ctx);
            }
            pthread_mutex_lock(&sh.mu);     /* another thread's call */
        }
        atomic_store(&sh.holder, h_tid());
        int64_t end = h_now() + SPIN_NS;
        while (h_now() < end)
            ;
        atomic_fetch_add(&sh.spun, 1);
        atomic_store(&sh.holder, 0);
        pthread_mutex_unlock(&sh.mu);
    }
    return count_alloc(size, ctx);
}

static _Atomic int64_t spin_done;

static void spin_maker(void *arg)
{
    (void)arg;
    gmp_chan_t *chs[SPIN_CHANS];
    for (int i = 0; i < SPIN_CHANS; i++)
        G_CHECK((chs[i] = gmp_chan_make(sizeof(int), 1)) != NULL);
    for (int i = 0; i < SPIN_CHANS; i++)
        gmp_chan_free(chs[i]);
    atomic_fetch_add(&spin_done, 1);
}

static void test_hooks_are_not_preempted(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        gmp_config_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.procs = procs;
        cfg.mem_alloc = spin_alloc;
        cfg.mem_free = count_free;
        assert_int_equal(gmp_init(&cfg), 0);
        atomic_store(&sh.reentered, 0);
        atomic_store(&sh.spun, 0);
        atomic_store(&spin_done, 0);
        atomic_store(&sh.armed, 1);
        for (int i = 0; i < SPIN_GS; i++)
            assert_int_equal(gmp_go(spin_maker, NULL), 0);
        assert_int_equal(h_wait(&spin_done, SPIN_GS), 0);
        atomic_store(&sh.armed, 0);
        assert_int_equal(gmp_shutdown(), 0);
        ASSERT_NO_BAD();
        print_message("procs=%d: %d spinning hook calls\n", procs,
                      atomic_load(&sh.spun));
        assert_true(atomic_load(&sh.spun) >= SPIN_GS * SPIN_CHANS);
        assert_int_equal(atomic_load(&sh.reentered), 0);
    }
}

/* ---- Memory the host write-protects -------------------------------------- */

/*
 * A collector may write-protect the memory it serves mem_alloc from at any
 * moment and make a page writable again when a store faults there (libgc's
 * incremental mode). The runtime's stores fault and go on; a system call
 * that writes there fails with EFAULT instead, so the runtime must not
 * pass its records to the kernel to write. This host serves mem_alloc
 * from one arena, never reused, and protects all of it after every
 * allocation, of objects or of stacks (an M's signal stack comes right
 * before the M stores its old one: sigaltstack into the M's record made
 * the thread die of its next fault). The workload above runs on it, in a
 * child: a runtime that lets the kernel write there dies.
 */
#define WP_ARENA ((size_t)1 << 30)

static struct {
    char *base;
    _Atomic size_t used;
    _Atomic int64_t faults;
    long page;
} wp;

static void wp_protect(void)
{
    mprotect(wp.base, WP_ARENA, PROT_READ);
}

static void *wp_alloc(size_t size, void *ctx)
{
    (void)ctx;
    size = (size + 63) & ~(size_t)63;
    size_t at = atomic_fetch_add(&wp.used, size);
    if (at + size > WP_ARENA)
        return NULL;
    wp_protect();
    return wp.base + at;
}

static void wp_free(void *p, size_t size, void *ctx)
{
    (void)p, (void)size, (void)ctx;
}

static void *wp_stack_alloc(size_t size, void *ctx)
{
    void *p = count_stack_alloc(size, ctx);
    wp_protect();
    return p;
}

static void wp_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char *a = si->si_addr;
    if (a < wp.base || a >= wp.base + WP_ARENA) {
        signal(sig, SIG_DFL);       /* not the host's: dies as it reruns */
        return;
    }
    char *page = (char *)((uintptr_t)a & ~(uintptr_t)(wp.page - 1));
    mprotect(page, (size_t)wp.page, PROT_READ | PROT_WRITE);
    atomic_fetch_add(&wp.faults, 1);
}

static void wp_child(void *arg)
{
    wp.page = sysconf(_SC_PAGESIZE);
    wp.base = mmap(NULL, WP_ARENA, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (wp.base == MAP_FAILED)
        _exit(3);
    h_handle(SIGSEGV, wp_segv, 0, 0);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = (int)(intptr_t)arg;
    cfg.mem_alloc = wp_alloc;
    cfg.mem_free = wp_free;
    cfg.stack_alloc = wp_stack_alloc;
    cfg.stack_free = count_stack_free;
    if (gmp_init(&cfg) != 0)
        _exit(4);
    workload();
    if (gmp_shutdown() != 0)
        _exit(5);
    dprintf(1, "faults %lld\n", (long long)atomic_load(&wp.faults));
    _exit(0);
}

static void test_hooks_memory_the_host_write_protects(void **state)
{
    (void)state;
#if defined(H_TSAN)
    /* Under TSan the child hangs at its first write fault: the runtime's
     * atomics on those pages run inside TSan's own runtime, and a fault
     * there is not one a program's handler can take and go on from. */
    print_message("write faults on runtime memory cannot be taken under "
                  "TSan\n");
    skip();
#endif
    for (int procs = 1; procs <= 4; procs *= 2) {
        struct h_child res;
        assert_int_equal(h_fork(wp_child, (void *)(intptr_t)procs, &res), 0);
        h_child_exited(&res, 0, procs);
        long long faults = 0;
        assert_int_equal(sscanf(res.out, "faults %lld", &faults), 1);
        print_message("procs=%d: %lld stores faulted and went on\n", procs,
                      faults);
        assert_true(faults > 0);
    }
}

/* ---- gmp_stack_bounds ------------------------------------------------------ */

#define SB_GS 16

static _Atomic int64_t sb_done, sb_bad;
static void *_Atomic sb_sig_lo, *_Atomic sb_sig_hi;

/* A handler installed without SA_ONSTACK runs on the stack the thread was
 * on: the goroutine's, as a collector's suspend handler would. */
static void sb_handler(int sig)
{
    (void)sig;
    void *lo = NULL, *hi = NULL;
    char here;
    if (gmp_stack_bounds(&lo, &hi) != 0 || &here < (char *)lo ||
        &here >= (char *)hi)
        atomic_fetch_add(&sb_bad, 1);
    atomic_store(&sb_sig_lo, lo);
    atomic_store(&sb_sig_hi, hi);
}

static void sb_goroutine(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        void *lo = NULL, *hi = NULL;
        char here;
        /* Bounds around this frame, a goroutine stack's size: the
         * default slot less its guard (an eighth). */
        if (gmp_stack_bounds(&lo, &hi) != 0 || &here < (char *)lo ||
            &here >= (char *)hi ||
            (size_t)((char *)hi - (char *)lo) > 128 * 1024 ||
            (size_t)((char *)hi - (char *)lo) < 96 * 1024)
            atomic_fetch_add(&sb_bad, 1);
        /* Only one goroutine at a time sends itself the signal: the
         * handler's record is shared. */
        static gmp_mutex_t mu;
        gmp_mutex_lock(&mu);
        atomic_store(&sb_sig_lo, NULL);
        pthread_kill(pthread_self(), SIGUSR1);
        if (atomic_load(&sb_sig_lo) != lo || atomic_load(&sb_sig_hi) != hi)
            atomic_fetch_add(&sb_bad, 1);
        gmp_mutex_unlock(&mu);
        gmp_yield();                /* maybe to another thread */
    }
    atomic_fetch_add(&sb_done, 1);
}

static void sb_plain(void *arg)
{
    void *lo, *hi;
    *(int *)arg = gmp_stack_bounds(&lo, &hi);
}

static void test_stack_bounds_of_the_running_stack(void **state)
{
    (void)state;
    struct sigaction sa = {.sa_handler = sb_handler}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    void *lo, *hi;
    assert_int_equal(gmp_stack_bounds(NULL, &hi), GMP_EINVAL);
    assert_int_equal(gmp_stack_bounds(&lo, &hi), GMP_EPERM);
    for (int procs = 1; procs <= 4; procs *= 2) {
        start_plain(procs);
        atomic_store(&sb_done, 0);
        atomic_store(&sb_bad, 0);
        for (int i = 0; i < SB_GS; i++)
            assert_int_equal(gmp_go(sb_goroutine, NULL), 0);
        assert_int_equal(h_wait(&sb_done, SB_GS), 0);
        assert_int_equal(atomic_load(&sb_bad), 0);
        int r = 0;
        struct th t;
        th_start(&t, sb_plain, &r);
        th_join(&t);
        assert_int_equal(r, GMP_EPERM);
        assert_int_equal(gmp_shutdown(), 0);
    }
    assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
}

/* A goroutine's own stack (gmp_go_attr) comes from stack_alloc, and goes
 * back to stack_free when the goroutine ends, not at shutdown. */
#define OWN_GS    100
#define OWN_SIZE  ((size_t)256 * 1024)
#define THREAD_STACKS ((int64_t)128 * 1024)     /* per thread, at most */

static gmp_chan_t *own_gate;
static _Atomic int64_t own_in, own_out;

static void own_parker(void *arg)
{
    (void)arg;
    int v;
    atomic_fetch_add(&own_in, 1);
    G_CHECK(gmp_chan_recv(own_gate, &v) == 0);
    atomic_fetch_add(&own_out, 1);
}

static void test_own_stacks_return_as_goroutines_end(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        hooks_reset();
        bad_reset();
        init_with_hooks(procs);
        own_gate = gmp_chan_make(sizeof(int), 0);
        assert_non_null(own_gate);
        atomic_store(&own_in, 0);
        atomic_store(&own_out, 0);
        /* The runtime's own stacks, for the goroutine below and after. */
        assert_int_equal(gmp_go(own_parker, NULL), 0);
        int v = 0;
        assert_int_equal(gmp_chan_send(own_gate, &v), 0);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_stats_t st0, st1;
        assert_int_equal(gmp_stats(&st0), 0);
        int64_t base = atomic_load(&stack_live);
        atomic_store(&own_in, 0);
        atomic_store(&own_out, 0);
        gmp_goattr_t attr = {.stack_size = OWN_SIZE};
        for (int i = 0; i < OWN_GS; i++)
            assert_int_equal(gmp_go_attr(own_parker, NULL, &attr), 0);
        assert_int_equal(h_wait(&own_in, OWN_GS), 0);
        assert_true(atomic_load(&stack_live) >=
                    base + (int64_t)(OWN_GS * OWN_SIZE));
        for (int i = 0; i < OWN_GS; i++)
            assert_int_equal(gmp_chan_send(own_gate, &v), 0);
        assert_int_equal(h_wait(&own_out, OWN_GS), 0);
        assert_int_equal(h_wait_quiet(), 0);
        /* Every own stack is back; a thread started meanwhile keeps its
         * signal stack (tens of KiB, under THREAD_STACKS) until shutdown. */
        assert_int_equal(gmp_stats(&st1), 0);
        int64_t started = st1.threads > st0.threads
                              ? (int64_t)(st1.threads - st0.threads) : 0;
        assert_true(atomic_load(&stack_live) - base <
                    (int64_t)OWN_SIZE + started * THREAD_STACKS);
        gmp_chan_free(own_gate);
        assert_int_equal(gmp_shutdown(), 0);
        assert_int_equal(atomic_load(&stack_live), 0);
        ASSERT_NO_BAD();
    }
}

static void test_stacks_foreach_bad_input(void **state)
{
    (void)state;
    struct scan sc = {0};
    assert_int_equal(gmp_stacks_foreach(scan_stack, &sc), GMP_EPERM);
    assert_int_equal(gmp_stacks_foreach(NULL, NULL), GMP_EINVAL);
    assert_int_equal(sc.stacks, 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_stacks_foreach_bad_input),
        cmocka_unit_test(test_stack_bounds_of_the_running_stack),
        cmocka_unit_test(test_hooks_balance_and_memory_returns),
        cmocka_unit_test(test_hooks_do_not_outlive_their_runtime),
        cmocka_unit_test(test_stacks_foreach_finds_a_parked_value),
        cmocka_unit_test(test_stacks_foreach_while_goroutines_start),
        cmocka_unit_test(test_hooks_are_not_preempted),
        cmocka_unit_test(test_own_stacks_return_as_goroutines_end),
        cmocka_unit_test(test_hooks_memory_the_host_write_protects),
    };
    return cmocka_run_group_tests_name("embed", t, NULL, NULL);
}
