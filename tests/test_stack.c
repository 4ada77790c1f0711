/*
 * test_stack.c - goroutine stacks: a runaway recursion dies with the
 * promised report naming the goroutine (in a forked child); a goroutine
 * can use most of its configured stack; stacks are ABI-aligned and the
 * floating-point control state is per goroutine; with many stacks held,
 * every one has its guard, and the address space goes back at shutdown;
 * a million goroutines can be alive at once with the default
 * configuration.
 *
 * Each test starts and stops its own runtime. The overflow tests fork, and
 * run first, while no runtime (and no runtime thread) exists here.
 */
#include "harness.h"
#include "internal.h"

#include <limits.h>
#include <sys/mman.h>


/* ---- Overflow ----------------------------------------------------------- */

static volatile int never;          /* 0; the compiler cannot know */

/* Recurses until the stack runs out: a non-tail call (the result is used
 * after it) with a live buffer in every frame. */
__attribute__((noinline)) static int deep(int n)
{
    volatile char buf[512];
    buf[0] = (char)n;
    buf[sizeof buf - 1] = (char)(n >> 8);
    if (never)
        return buf[0];
    int r = deep(n + 1);
    return r + buf[n & 511];
}

static void say_id(void)
{
    char line[64];
    int len = snprintf(line, sizeof line, "id=%llu\n",
                       (unsigned long long)gmp_id());
    if (write(1, line, (size_t)len) != len)
        _exit(97);
}

/* What overflows: deep, or a function of stack_frames.c. */
static int (*overflower)(int) = deep;

static void overflow_fn(void *arg)
{
    (void)arg;
    say_id();
    overflower(0);
    _exit(98);                      /* unreachable for a recursion */
}

static void idle_fn(void *arg)
{
    (void)arg;
}

struct ovf {
    size_t stack_size;
    int procs;
    bool use_main;                  /* gmp_main, else gmp_init + gmp_go */
    int (*fn)(int);                 /* NULL: deep */
    size_t own;                     /* nonzero: the overflowing goroutine's
                                       own stack size (gmp_go_attr) */
};

static void overflow_child(void *arg)
{
    struct ovf *o = arg;
    if (o->fn)
        overflower = o->fn;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = o->procs;
    cfg.stack_size = o->stack_size;
    if (o->use_main) {
        gmp_main(overflow_fn, NULL, &cfg);
        _exit(3);
    }
    if (gmp_init(&cfg) != 0)
        _exit(4);
    for (int i = 0; i < 5; i++)     /* so the id is not simply 1 */
        gmp_go(idle_fn, NULL);
    gmp_goattr_t attr = {.stack_size = o->own};
    gmp_go_attr(overflow_fn, NULL, &attr);
    for (;;)                        /* the abort ends this; h_fork's */
        pause();                    /* deadline kills a child that hangs */
}

/* The child said its id (say_id) and died of the overflow report that
 * names it. */
static void assert_overflow_reported(const struct h_child *res)
{
    h_assert_killed_by(res, SIGABRT);
    unsigned long long id = 0;
    assert_int_equal(sscanf(res->out, "id=%llu", &id), 1);
    assert_true(id != 0);
    char want[128];
    snprintf(want, sizeof want,
             "gmprt: fatal error: stack overflow in goroutine %llu", id);
    if (!h_has_line(res->err, want))
        print_error("stderr lacks \"%s\":\n%s\n", want, res->err);
    assert_true(h_has_line(res->err, want));
}

static void check_overflow(struct ovf *o)
{
    struct h_child res;
    assert_int_equal(h_fork(overflow_child, o, &res), 0);
    print_message("child stdout: %s", res.out);
    assert_overflow_reported(&res);
}

static void skip_under_asan(void)
{
#ifdef H_ASAN
    /* ASan owns SIGSEGV and reports the overflow its own way. */
    skip();
#endif
}

static void test_stack_overflow_in_main_reports_id(void **state)
{
    skip_under_asan();
    struct ovf o = {0, 1, true, NULL, 0};
    check_overflow(&o);
}

static void test_stack_overflow_in_goroutine_reports_id(void **state)
{
    skip_under_asan();
    struct ovf o = {0, 2, false, NULL, 0};
    check_overflow(&o);
}

/* A stack of the goroutine's own, bigger or smaller than the runtime's,
 * has its guard too. */
static void test_stack_overflow_of_own_stack_reports_id(void **state)
{
    skip_under_asan();
    struct ovf big = {0, 2, false, NULL, 1024 * 1024};
    check_overflow(&big);
    struct ovf small = {0, 1, false, NULL, 32 * 1024};
    check_overflow(&small);
}

/* ---- Stacks of a goroutine's own (gmp_go_attr) ----------------------------- */

#define OWN_GS 200

static _Atomic int64_t own_done, own_bad;
static gmp_chan_t *own_gate;

/* Uses depth bytes of stack (deep's frames are over 512 bytes), after
 * waiting at the gate so that many such stacks are alive at once. */
__attribute__((noinline)) static int descend(int left)
{
    volatile char buf[1024];
    buf[0] = (char)left;
    if (left <= 0)
        return buf[0];
    int r = descend(left - 1);
    return r + buf[0];
}

static void own_goroutine(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void *lo, *hi;
    int v;
    /* The guard: an eighth, a page to 64 KiB (gmp_config_t.stack_size). */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t guard = size / 8 > 64 * 1024 ? 64 * 1024 : size / 8;
    guard &= ~(page - 1);
    if (guard < page)
        guard = page;
    if (gmp_chan_recv(own_gate, &v) != 0 ||
        gmp_stack_bounds(&lo, &hi) != 0 ||
        (size_t)((char *)hi - (char *)lo) != size - guard)
        atomic_fetch_add(&own_bad, 1);
    /* Half of it: more than the runtime's 128 KiB for the big ones. */
    descend((int)(size / 2 / 1100));
    atomic_fetch_add(&own_done, 1);
}

static void test_stack_own_sizes(void **state)
{
    (void)state;
    static const size_t sizes[] = {16 * 1024, 64 * 1024, 1024 * 1024, 0};
    for (int procs = 1; procs <= 4; procs *= 2) {
        gmp_config_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.procs = procs;
        assert_int_equal(gmp_init(&cfg), 0);
        own_gate = gmp_chan_make(sizeof(int), 0);
        assert_non_null(own_gate);
        atomic_store(&own_done, 0);
        atomic_store(&own_bad, 0);
        for (int i = 0; i < OWN_GS; i++) {
            size_t sz = sizes[i % 4];
            gmp_goattr_t attr = {.stack_size = sz};
            assert_int_equal(gmp_go_attr(own_goroutine,
                                         (void *)(uintptr_t)(sz ? sz
                                                               : 128 * 1024),
                                         &attr), 0);
        }
        for (int i = 0; i < OWN_GS; i++) {
            int v = i;
            assert_int_equal(gmp_chan_send(own_gate, &v), 0);
        }
        assert_int_equal(h_wait(&own_done, OWN_GS), 0);
        assert_int_equal(atomic_load(&own_bad), 0);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(own_gate);
        assert_int_equal(gmp_shutdown(), 0);
    }
}

static void noop(void *arg)
{
    (void)arg;
}

static void test_stack_own_bad_input(void **state)
{
    (void)state;
    gmp_goattr_t attr = {.stack_size = 1000};
    assert_int_equal(gmp_go_attr(noop, NULL, &attr), GMP_EINVAL);
    attr.stack_size = (size_t)2 << 30;
    assert_int_equal(gmp_go_attr(noop, NULL, &attr), GMP_EINVAL);
    attr.stack_size = 0;
    attr.reserved_[1] = 1;
    assert_int_equal(gmp_go_attr(noop, NULL, &attr), GMP_EINVAL);
    attr.reserved_[1] = 0;
    assert_int_equal(gmp_go_attr(NULL, NULL, &attr), GMP_EINVAL);
    assert_int_equal(gmp_go_attr(noop, NULL, &attr), GMP_EPERM);  /* none */
    assert_int_equal(gmp_go_attr(noop, NULL, NULL), GMP_EPERM);
}

static void test_stack_overflow_small_stack_reports_id(void **state)
{
    skip_under_asan();
    struct ovf o = {64 * 1024, 2, false, NULL, 0};
    check_overflow(&o);
}

static void test_stack_overflow_big_stack_reports_id(void **state)
{
    skip_under_asan();
    struct ovf o = {4 << 20, 1, true, NULL, 0};
    check_overflow(&o);
}

/* ---- Frames bigger than a page ------------------------------------------- */

/* stack_frames.c, built with and without -fstack-clash-protection. */
#define FRAMES(p)                                                           \
    int p##deep_2(int), p##deep_8(int), p##deep_15(int), p##deep_60(int),  \
        p##deep_131(int), p##deep_300(int), p##big_131(int);
FRAMES(noclash_)
#ifdef GMP_TEST_CLASH
FRAMES(clash_)
#endif

static const struct {
    const char *name;
    int (*fn)(int);
} unprobed[] = {
    /* Without probes a frame is caught when its first write lands in the
     * guard: recursions with frames smaller than the default stack's
     * 16 KiB guard (a one-page guard let the 8 KiB ones through). */
    {"2 KiB frames", noclash_deep_2},
    {"8 KiB frames", noclash_deep_8},
    {"15 KiB frames", noclash_deep_15},
}
#ifdef GMP_TEST_CLASH
, probed[] = {
    /* With probes every page of a frame is touched top down: every size
     * is caught, however far it would have jumped. */
    {"2 KiB frames", clash_deep_2},
    {"15 KiB frames", clash_deep_15},
    {"60 KiB frames", clash_deep_60},
    {"131 KiB frames", clash_deep_131},
    {"300 KiB frames", clash_deep_300},
    {"one 131 KiB frame", clash_big_131},
}
#endif
;

static void check_frames(int (*fn)(int), const char *name)
{
    static const int procs[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        print_message("%s, procs=%d\n", name, procs[i]);
        struct ovf o = {0, procs[i], i == 0, fn, 0};
        check_overflow(&o);
    }
}

static void test_stack_overflow_by_frames_without_probes(void **state)
{
    skip_under_asan();
    for (size_t i = 0; i < sizeof unprobed / sizeof unprobed[0]; i++)
        check_frames(unprobed[i].fn, unprobed[i].name);
}

static void test_stack_overflow_by_frames_with_probes(void **state)
{
    skip_under_asan();
#ifdef GMP_TEST_CLASH
    for (size_t i = 0; i < sizeof probed / sizeof probed[0]; i++)
        check_frames(probed[i].fn, probed[i].name);
#else
    print_message("the compiler has no -fstack-clash-protection\n");
    skip();
#endif
}

/* ---- Faults below a stack mapping ---------------------------------------- */

/* Below the lowest slot of a chunk, and below a goroutine's own stack
 * (gmp_go_attr), lies memory that need not be the runtime's: with
 * stack_alloc, whatever the host mapped there. A fault in it is an
 * overflow only when the goroutine's own frame reached it; a write by
 * code running well inside its stack (libgc's collector writing to a page
 * of its heap that it protected, in incremental mode) is the host's
 * fault, for the handler the program installed. Here each stack mapping
 * gets 64 KiB of the program's own read-only memory right below it, whose
 * faults the program's SIGSEGV handler fixes. The main goroutine, which
 * gets the first slot of the first chunk, writes to it, or overflows into
 * it with one 131 KiB frame built without probes; or a goroutine with a
 * stack of its own writes below that. */
#define HOST_BELOW ((size_t)64 * 1024)
#define OWN_STACK  ((size_t)192 * 1024)

enum below_mode { BELOW_WRITE, BELOW_OVERFLOW, BELOW_OWN_WRITE };

static struct {
    char *_Atomic lo[64];       /* the program's regions, HOST_BELOW each */
    _Atomic int n;
    _Atomic int fixed;          /* faults the program's handler fixed */
    gmp_wg_t wg;
} below;

struct below_arg {
    enum below_mode mode;
    int procs;
};

static void *below_alloc(size_t size, void *ctx)
{
    (void)ctx;
    char *raw = mmap(NULL, size + HOST_BELOW, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int i = atomic_fetch_add(&below.n, 1);
    if (raw == MAP_FAILED || i >= 64)
        return NULL;
    mprotect(raw, HOST_BELOW, PROT_READ);
    atomic_store(&below.lo[i], raw);
    return raw + HOST_BELOW;
}

static void below_free(void *p, size_t size, void *ctx)
{
    (void)ctx;
    munmap((char *)p - HOST_BELOW, size + HOST_BELOW);
}

static void below_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char *a = si->si_addr;
    int n = atomic_load(&below.n);
    for (int i = 0; i < n && i < 64; i++) {
        char *r = atomic_load(&below.lo[i]);
        if (r && a >= r && a < r + HOST_BELOW) {
            mprotect(r, HOST_BELOW, PROT_READ | PROT_WRITE);
            atomic_fetch_add(&below.fixed, 1);
            return;
        }
    }
    signal(sig, SIG_DFL);           /* not ours: dies as it runs again */
}

/* The host's mapping whose guard lies at the bottom of the caller's
 * stack: the caller has its lowest slot, or all of it. */
static char *mapping_of_mine(void)
{
    void *lo, *hi;
    if (gmp_stack_bounds(&lo, &hi) != 0)
        _exit(5);
    int n = atomic_load(&below.n);
    for (int i = 0; i < n && i < 64; i++) {
        char *r = atomic_load(&below.lo[i]);
        char *m = r ? r + HOST_BELOW : NULL;
        if (m && (char *)lo > m && (char *)lo <= m + 64 * 1024)
            return m;               /* lo is past a guard at its bottom */
    }
    dprintf(1, "not at the bottom of a mapping\n");
    _exit(6);
}

static void below_write(void *arg)
{
    (void)arg;
    *(volatile char *)(mapping_of_mine() - 4096) = 9;
    dprintf(1, "wrote, %d fixed\n", atomic_load(&below.fixed));
    gmp_wg_done(&below.wg);
}

static void below_fn(void *arg)
{
    enum below_mode mode = *(enum below_mode *)arg;
    if (mode == BELOW_OVERFLOW) {
        mapping_of_mine();
        say_id();
        noclash_big_131(0);
        _exit(98);
    }
    gmp_wg_add(&below.wg, 1);
    if (mode == BELOW_WRITE) {
        below_write(NULL);
    } else {
        gmp_goattr_t attr = {.stack_size = OWN_STACK};
        if (gmp_go_attr(below_write, NULL, &attr) != 0)
            _exit(7);
    }
    gmp_wg_wait(&below.wg);
}

static void below_child(void *arg)
{
    struct below_arg *a = arg;
    h_handle(SIGSEGV, below_segv, 0, 0);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = a->procs;
    cfg.stack_alloc = below_alloc;
    cfg.stack_free = below_free;
    gmp_main(below_fn, &a->mode, &cfg);
    _exit(0);
}

/* Runs below_child in mode at procs 1, 2 and 4: a write below the
 * stack goes to the program's handler, once; an overflow is reported. */
static void check_below(enum below_mode mode)
{
    skip_under_asan();
    static const int procs[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        struct below_arg a = {mode, procs[i]};
        struct h_child res;
        assert_int_equal(h_fork(below_child, &a, &res), 0);
        if (mode == BELOW_OVERFLOW) {
            assert_overflow_reported(&res);
            continue;
        }
        h_child_exited(&res, 0, procs[i]);
        if (!h_has_line(res.out, "wrote, 1 fixed"))
            print_error("procs=%d: stdout:\n%s\nstderr:\n%s\n", procs[i],
                        res.out, res.err);
        assert_true(h_has_line(res.out, "wrote, 1 fixed"));
    }
}

static void test_stack_fault_below_a_chunk_is_the_programs(void **state)
{
    check_below(BELOW_WRITE);
}

static void test_stack_fault_below_an_own_stack_is_the_programs(void **state)
{
    check_below(BELOW_OWN_WRITE);
}

static void test_stack_overflow_below_a_chunk_is_reported(void **state)
{
    check_below(BELOW_OVERFLOW);
}

/* ---- Usable size, alignment, fp control --------------------------------- */

/* Recurses until frames span target bytes below top; returns the span. */
__attribute__((noinline)) static long dig(char *top, long target)
{
    volatile char buf[256];
    buf[0] = 1;
    long used = (long)(top - (char *)__builtin_frame_address(0));
    if (used >= target)
        return used;
    return dig(top, target) + buf[0] - 1;
}

static struct {
    long target;
    _Atomic int64_t used;
    _Atomic int64_t done;
} digres;

static void dig_fn(void *arg)
{
    (void)arg;
    atomic_store(&digres.used,
                 dig(__builtin_frame_address(0), digres.target));
    atomic_fetch_add(&digres.done, 1);
}

/* A goroutine can use three quarters of stack_size (which includes the
 * guard and the stack's own header), for the default and other sizes,
 * again and again on recycled stacks. */
static void test_stack_three_quarters_usable(void **state)
{
#ifdef H_TSAN
    /* TSan's per-fiber trace handling stalls on recursion megabytes deep;
     * the small sizes still check the bound. */
    static const size_t sizes[] = {0, 64 * 1024};
#else
    static const size_t sizes[] = {0, 64 * 1024, 1 << 20, 8 << 20};
#endif
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        gmp_config_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.procs = 2;
        cfg.stack_size = sizes[i];
        size_t eff = sizes[i] ? sizes[i] : GMP__DEFAULT_STACK;
        memset(&digres, 0, sizeof digres);
        digres.target = (long)(eff / 4 * 3);
        assert_int_equal(gmp_init(&cfg), 0);
        for (int k = 0; k < 8; k++)
            assert_int_equal(gmp_go(dig_fn, NULL), 0);
        assert_int_equal(h_wait(&digres.done, 8), 0);
        assert_int_equal(gmp_shutdown(), 0);
        assert_true(atomic_load(&digres.used) >= digres.target);
    }
}

static _Atomic int64_t align_bad, align_done;

__attribute__((noinline)) static void check_align(void)
{
    _Alignas(16) volatile char x[16];
    x[0] = 0;
    if ((uintptr_t)x % 16 != 0)
        atomic_fetch_add(&align_bad, 1);
}

static void align_fn(void *arg)
{
    (void)arg;
    check_align();
    gmp_yield();
    check_align();
    gmp_yield();
    check_align();
    atomic_fetch_add(&align_done, 1);
}

/* The SysV ABI's 16-byte stack alignment holds in a goroutine's first
 * frame and after every resumption. */
static void test_stack_aligned_16(void **state)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    atomic_store(&align_bad, 0);
    atomic_store(&align_done, 0);
    assert_int_equal(gmp_init(&cfg), 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(gmp_go(align_fn, NULL), 0);
    assert_int_equal(h_wait(&align_done, 100), 0);
    assert_int_equal(gmp_shutdown(), 0);
    assert_int_equal(atomic_load(&align_bad), 0);
}

/* The floating-point control register a goroutine owns: x86-64's MXCSR,
 * AArch64's FPCR, RISC-V's fcsr. RC_MASK selects the rounding-mode
 * field, RC_UP its value for rounding towards +infinity; 0 in that field
 * is round to nearest, the default. */
#if defined(__x86_64__)
#define FP_RC_MASK 0x6000u
#define FP_RC_UP   0x4000u
static unsigned fpctl_get(void) { return __builtin_ia32_stmxcsr(); }
static void fpctl_set(unsigned v) { __builtin_ia32_ldmxcsr(v); }
#elif defined(__aarch64__)
#define FP_RC_MASK (3u << 22)
#define FP_RC_UP   (1u << 22)
static unsigned fpctl_get(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
    return (unsigned)v;
}
static void fpctl_set(unsigned v)
{
    __asm__ __volatile__("msr fpcr, %0" ::"r"((uint64_t)v));
}
#elif defined(__riscv)
#define FP_RC_MASK (7u << 5)        /* fcsr's frm */
#define FP_RC_UP   (3u << 5)        /* RUP */
static unsigned fpctl_get(void)
{
    unsigned long v;
    __asm__ __volatile__("frcsr %0" : "=r"(v));
    return (unsigned)v;
}
static void fpctl_set(unsigned v)
{
    __asm__ __volatile__("fscsr %0" ::"r"((unsigned long)v));
}
#endif

static struct {
    _Atomic int step;
    unsigned setter_after, fresh_seen;
    _Atomic int64_t done;
} fp;

static void fp_fresh(void *arg)
{
    (void)arg;
    fp.fresh_seen = fpctl_get();
    atomic_store(&fp.step, 2);
    atomic_fetch_add(&fp.done, 1);
}

static void fp_setter(void *arg)
{
    (void)arg;
    unsigned v = fpctl_get();
    fpctl_set((v & ~FP_RC_MASK) | FP_RC_UP);
    gmp_go(fp_fresh, NULL);
    while (atomic_load(&fp.step) != 2)
        gmp_yield();
    fp.setter_after = fpctl_get();
    fpctl_set(v);
    atomic_fetch_add(&fp.done, 1);
}

/* The FP control register is part of a goroutine's context: one that set
 * round-up keeps it across switches, one that starts meanwhile on the same
 * P starts with the default (round to nearest). */
static void test_stack_fp_control_is_per_goroutine(void **state)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 1;
    memset(&fp, 0, sizeof fp);
    assert_int_equal(gmp_init(&cfg), 0);
    assert_int_equal(gmp_go(fp_setter, NULL), 0);
    assert_int_equal(h_wait(&fp.done, 2), 0);
    assert_int_equal(gmp_shutdown(), 0);
    assert_int_equal(fp.setter_after & FP_RC_MASK, FP_RC_UP);
    assert_int_equal(fp.fresh_seen & FP_RC_MASK, 0);
}

static struct {
    long n;
    _Atomic int64_t started, finished, errs;
    _Atomic int release;
} mil;

static void mil_fn(void *arg)
{
    (void)arg;
    atomic_fetch_add_explicit(&mil.started, 1, memory_order_relaxed);
    while (!atomic_load_explicit(&mil.release, memory_order_relaxed))
        gmp_yield();
    atomic_fetch_add_explicit(&mil.finished, 1, memory_order_relaxed);
}

static void mil_spawner(void *arg)
{
    (void)arg;
    for (long i = 0; i < mil.n; i++)
        if (gmp_go(mil_fn, NULL) != 0)
            atomic_fetch_add(&mil.errs, 1);
}

static bool mil_all_started(void *arg)
{
    (void)arg;
    return atomic_load(&mil.started) + atomic_load(&mil.errs) >= mil.n;
}

/* ---- Callee-saved registers ------------------------------------------ */

/* tests/arch/<arch>.S: fills the callee-saved registers from seed, calls
 * fn(arg), returns a mask of those that changed. */
uint64_t h_regs_check(uint64_t seed, void (*fn)(void *), void *arg);

#define REGS_GS     64
#define REGS_YIELDS 200

static struct {
    _Atomic int64_t done, bad;
    _Atomic uint64_t badmask;
} regs;

static void regs_yielder(void *arg)
{
    (void)arg;
    for (int i = 0; i < REGS_YIELDS; i++)
        gmp_yield();
}

static void regs_fn(void *arg)
{
    uint64_t mask = h_regs_check((uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL,
                                 regs_yielder, NULL);
    if (mask) {
        atomic_fetch_add(&regs.bad, 1);
        atomic_fetch_or(&regs.badmask, mask);
    }
    atomic_fetch_add(&regs.done, 1);
}

/* Every callee-saved register (x86-64: rbx, r12-r15; AArch64: x19-x28,
 * d8-d15; RISC-V: s1-s11, fs0-fs11) holds a goroutine-specific value
 * across hundreds of switches while other goroutines hold theirs, on 1, 2
 * and 4 Ps. */
static void test_stack_callee_saved_registers_survive_switches(void **state)
{
    static const int procs[] = {1, 2, 4};
    for (size_t k = 0; k < sizeof procs / sizeof procs[0]; k++) {
        gmp_config_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.procs = procs[k];
        memset(&regs, 0, sizeof regs);
        assert_int_equal(gmp_init(&cfg), 0);
        for (uintptr_t i = 1; i <= REGS_GS; i++)
            assert_int_equal(gmp_go(regs_fn, (void *)i), 0);
        assert_int_equal(h_wait(&regs.done, REGS_GS), 0);
        assert_int_equal(gmp_shutdown(), 0);
        assert_int_equal(atomic_load(&regs.badmask), 0);
        assert_int_equal(atomic_load(&regs.bad), 0);
    }
}

/* ---- A million at once ------------------------------------------------- */

/* How many stacks can exist at once here. With guard regions (Linux
 * 6.13+) a stack adds no mapping; without them (older kernels, qemu-user,
 * which ignores the advice) each guard is an mprotect that splits its
 * chunk, and vm.max_map_count (65530 by default) bounds the count. The
 * probe is the runtime's own (white-box). */
static long stacks_possible(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    bool guards = gmp__guard_region_works(p, (size_t)pg);
    munmap(p, (size_t)pg);
    if (guards)
        return LONG_MAX;
    long maps = 65530;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &maps) != 1)
            maps = 65530;
        fclose(f);
    }
    return maps / 2 - 5000;         /* two mappings per stack, and slack */
}

/*
 * 10^6 goroutines alive at once with the default configuration: each
 * counts itself started, then yields until released. Once all have
 * started, every one holds a stack at the same time (several GB of
 * mostly untouched reservations). Then all are released and finish.
 */
static void test_stack_million_alive_at_once(void **state)
{
    memset(&mil, 0, sizeof mil);
    mil.n = H_LIVE(1000000L);
    long cap = stacks_possible();
    if (mil.n > cap) {
        print_message("no guard regions: %ld goroutines, not %ld\n", cap,
                      mil.n);
        mil.n = cap;
    }
    int64_t t0 = h_now();
    assert_int_equal(gmp_init(NULL), 0);
    assert_int_equal(gmp_go(mil_spawner, NULL), 0);
    /* Minutes on a slow VM: every stack's first touch is a page fault. */
    assert_int_equal(h_wait_until_ns(mil_all_started, NULL, "all started",
                                     5 * H_DEADLINE_NS), 0);
    assert_int_equal(atomic_load(&mil.errs), 0);
    assert_int_equal(atomic_load(&mil.started), mil.n);
    assert_int_equal(atomic_load(&mil.finished), 0);
    int64_t t1 = h_now();
    assert_true(gmp_num_goroutines() >= mil.n);
    atomic_store(&mil.release, 1);
    assert_int_equal(h_wait_ns(&mil.finished, mil.n, 5 * H_DEADLINE_NS), 0);
    assert_int_equal(gmp_shutdown(), 0);
    print_message("%ld goroutines: all alive after %.2f s, done after "
                  "%.2f s\n", mil.n, (double)(t1 - t0) / 1e9,
                  (double)(h_now() - t0) / 1e9);
}

/* ---- Many stacks held: guards, and address space back ----------------- */

static struct {
    _Atomic int64_t started;
    gmp_chan_t *release;            /* closed by hold_end */
} hold;

static void hold_fn(void *arg)
{
    (void)arg;
    atomic_fetch_add(&hold.started, 1);
    if (gmp_chan_recv(hold.release, NULL) != GMP_ECLOSED)
        abort();                    /* nothing is ever sent on it */
}

/* Starts a runtime at procs=2 with n goroutines that each hold a stack
 * until hold_end: two dozen chunks for n = 1,500, the later ones carved
 * after their arena's page tables were made (stack.c, arena_tables). */
static void hold_start(int n)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    assert_int_equal(gmp_init(&cfg), 0);
    atomic_store(&hold.started, 0);
    assert_non_null(hold.release = gmp_chan_make(0, 0));
    for (int i = 0; i < n; i++)
        assert_int_equal(gmp_go(hold_fn, NULL), 0);
    assert_int_equal(h_wait(&hold.started, n), 0);
}

static void hold_end(void)
{
    assert_int_equal(gmp_chan_close(hold.release), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(gmp_shutdown(), 0);
    gmp_chan_free(hold.release);
}

/* Counts, of the stacks passed, those whose guard (the page below lo)
 * the kernel can read, and those whose top byte it cannot: the second
 * shows that the check tells a guard from a stack. */
struct guard_census {
    long unguarded, unreadable;
};

static void census(void *lo, void *hi, void *sp, void *arg)
{
    (void)sp;
    struct guard_census *c = arg;
    c->unguarded += !gmp__kernel_refuses((char *)lo - 1);
    c->unreadable += gmp__kernel_refuses((char *)hi - 1);
}

/* Whether a PROT_NONE page stops the kernel's copy here: not under
 * qemu-user, which passes it guest addresses as they are. */
static bool readv_sees_guards(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, (size_t)pg, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    bool sees = gmp__kernel_refuses(p);
    munmap(p, (size_t)pg);
    return sees;
}

/* Every stack in use has its guard, in every chunk: those carved after
 * their arena's page tables were made ahead got theirs too. */
static void test_stack_every_held_stack_guarded(void **state)
{
    enum { N = 1500 };
    if (!readv_sees_guards()) {
        print_message("process_vm_readv reads PROT_NONE pages here: "
                      "the overflow tests check guards instead\n");
        skip();
    }
    hold_start(N);
    struct guard_census c = {0};
    int n = gmp_stacks_foreach(census, &c);
    hold_end();
    assert_true(n >= N);
    assert_int_equal(c.unguarded, 0);
    assert_int_equal(c.unreadable, 0);
}

/* After gmp_shutdown the process maps no more than it did after a first
 * such cycle (which let the C library set up what it keeps): each
 * cycle's arena, a gigabyte of address space, went back. */
static void test_stack_arenas_unmapped_at_shutdown(void **state)
{
#if defined(H_TSAN) || defined(H_ASAN)
    /* Their runtimes map memory of their own per thread and keep it (TSan
     * grew by 270 MiB over the second cycle once). */
    skip();
#endif
    long after[2];
    for (int cycle = 0; cycle < 2; cycle++) {
        hold_start(1500);
        hold_end();
        FILE *f = fopen("/proc/self/statm", "r");  /* first: size, pages */
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%ld", &after[cycle]), 1);
        fclose(f);
    }
    long grew = (after[1] - after[0]) * sysconf(_SC_PAGESIZE);
    print_message("mapped after the second cycle: %+ld KiB\n", grew / 1024);
    assert_true(grew < (512L << 20));   /* an arena is 1 GiB */
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_stack_overflow_in_main_reports_id),
        cmocka_unit_test(test_stack_overflow_in_goroutine_reports_id),
        cmocka_unit_test(test_stack_overflow_of_own_stack_reports_id),
        cmocka_unit_test(test_stack_own_sizes),
        cmocka_unit_test(test_stack_own_bad_input),
        cmocka_unit_test(test_stack_overflow_small_stack_reports_id),
        cmocka_unit_test(test_stack_overflow_big_stack_reports_id),
        cmocka_unit_test(test_stack_overflow_by_frames_without_probes),
        cmocka_unit_test(test_stack_overflow_by_frames_with_probes),
        cmocka_unit_test(test_stack_fault_below_a_chunk_is_the_programs),
        cmocka_unit_test(test_stack_fault_below_an_own_stack_is_the_programs),
        cmocka_unit_test(test_stack_overflow_below_a_chunk_is_reported),
        cmocka_unit_test(test_stack_three_quarters_usable),
        cmocka_unit_test(test_stack_aligned_16),
        cmocka_unit_test(test_stack_fp_control_is_per_goroutine),
        cmocka_unit_test(test_stack_callee_saved_registers_survive_switches),
        cmocka_unit_test(test_stack_every_held_stack_guarded),
        cmocka_unit_test(test_stack_arenas_unmapped_at_shutdown),
        cmocka_unit_test(test_stack_million_alive_at_once),
    };
    return cmocka_run_group_tests_name("stack", t, NULL, NULL);
}
