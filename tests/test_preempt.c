/*
 * test_preempt.c - asynchronous preemption: fairness between loops that
 * never call the runtime, exact registers across preemptions, sections
 * that must not be preempted (gmp_preempt_disable, libc, the program's
 * PLT stubs), the switches
 * that turn it off, the host's SIGURG handler, and a mixed stress.
 *
 * Some tests drive preemption faster than sysmon's 10 ms slices: a plain
 * thread (the "preempter") asks for it every 50 us through the same call
 * sysmon makes (gmp__preemptone: the mark and the signal). Every wait is a
 * condition; a runtime that failed to preempt hangs, and the h_wait
 * deadline reports it. No assertion is about time.
 */
#include "harness.h"

#include <dlfcn.h>
#include <pthread.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "internal.h"
#include "interrupt.h"              /* sigctx.h: the frame checks */

/* In tests/arch/preempt_<arch>.S. */
void h_async_regs(uint64_t iters, const void *pat, void *out, int level);

/* ---- The preempter (preempter.h) ---------------------------------------- */

#include "preempter.h"

/* Runs fn(NULL) as a goroutine under the preempter until *done is 1.
 * Returns 0, or what gmp_go or h_wait failed with. */
static int under_preempter(void (*fn)(void *), _Atomic int64_t *done)
{
    preempter_start();
    int rc = gmp_go(fn, NULL);
    if (rc == 0)
        rc = h_wait(done, 1);
    preempter_stop();
    return rc;
}

/* ---- Tight loops share one P ------------------------------------------ */

#define MAXHOGS 8

static struct {
    int n;
    uint32_t want;                  /* preemptions each hog waits for */
    _Atomic uint32_t seen[MAXHOGS]; /* each hog's own count, published */
    _Atomic int64_t done;
} th;

static bool all_hogs_reached(void)
{
    for (int i = 0; i < th.n; i++)
        if (atomic_load_explicit(&th.seen[i], memory_order_relaxed) <
            th.want)
            return false;
    return true;
}

/* A loop with no call in it: only a signal can take the P away. It ends
 * once every hog has been preempted `want` times, so a hog that never
 * gets the CPU keeps all of them spinning, and the test hangs. */
static void tight_hog(void *arg)
{
    int i = (int)(intptr_t)arg;
    struct g *gp = self();
    while (!all_hogs_reached())
        atomic_store_explicit(&th.seen[i], async_of(gp),
                              memory_order_relaxed);
    atomic_fetch_add(&th.done, 1);
}

static void test_preempt_tight_loops_share_the_cpu(void **state)
{
    struct h_env *env = *state;
    SKIP_WITHOUT_ASYNC();
    memset(&th, 0, sizeof th);
    th.n = env->procs + 1;          /* one more hog than Ps */
    th.want = 5;
    /* From a still process: sysmon is in its deep sleep, and only the Ps
     * the hogs take wake it. Then its own 10 ms mark and signal: no
     * preempter here. */
    assert_int_equal(h_still(), 0);
    for (int i = 0; i < th.n; i++)
        assert_int_equal(gmp_go(tight_hog, (void *)(intptr_t)i), 0);
    assert_int_equal(h_wait(&th.done, th.n), 0);
    for (int i = 0; i < th.n; i++)
        assert_true(atomic_load(&th.seen[i]) >= th.want);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Registers survive preemption --------------------------------------- */

#define REGBUF 4096
#define NREGG  4

static struct {
    int level;
    uint32_t want;
    _Atomic int64_t done;
    _Atomic int64_t bad[NREGG];     /* first differing byte + 1, or 0 */
    _Atomic int64_t preempts[NREGG];
} rg;

/* Every 8-byte word of the buffer, a different value from seed: the
 * registers' pattern before each architecture's own fields go in. */
static void fill_words(unsigned char *pat, uint64_t seed)
{
    for (size_t i = 0; i < REGBUF / 8; i++) {
        uint64_t v = seed ^ (0x9E3779B97F4A7C15ULL * (i + 1));
        memcpy(pat + i * 8, &v, 8);
    }
}

#if defined(__x86_64__)
static int vec_level(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    if ((b & bit_AVX512F) && __builtin_cpu_supports("avx512f"))
        return 2;
    return __builtin_cpu_supports("avx") ? 1 : 0;
}

/* Bytes of the layout (preempt_x86_64.S) that must come back equal. */
static size_t cmp_ranges(int level, size_t (*r)[2])
{
    int nv = level == 2 ? 32 : 16;
    size_t vb = level == 0 ? 16 : level == 1 ? 32 : 64;
    size_t n = 0;
    r[n][0] = 0;
    r[n++][1] = 120;                /* general registers */
    for (int i = 0; i < nv; i++) {
        r[n][0] = 128 + (size_t)i * 64;
        r[n++][1] = vb;
    }
    if (level == 2) {
        r[n][0] = 2176;
        r[n++][1] = 8 * 8;
    }
    r[n][0] = 2240;
    r[n++][1] = 4;                  /* mxcsr */
    return n;
}

static void fill_pattern(unsigned char *pat, uint64_t seed)
{
    fill_words(pat, seed);
    for (int i = 0; i < 8; i++) {   /* k registers are 16 bits here */
        uint64_t k = (seed >> (i * 4)) & 0xffff;
        memcpy(pat + 2176 + i * 8, &k, 8);
    }
    uint32_t mx = 0x1f80 | 0x6000;  /* default, but rounding toward zero */
    memcpy(pat + 2240, &mx, 4);
}

static int64_t check_out(const unsigned char *pat, const unsigned char *out,
                         int level)
{
    size_t r[48][2];
    size_t n = cmp_ranges(level, r);
    for (size_t k = 0; k < n; k++)
        for (size_t i = r[k][0]; i < r[k][0] + r[k][1]; i++)
            if (pat[i] != out[i])
                return (int64_t)i + 1;
    uint64_t fl;
    memcpy(&fl, out + 120, 8);
    if (!(fl & 1) || !(fl & 0x400))
        return 121;                 /* CF and DF were set by the loop */
    return 0;
}
#elif defined(__riscv)
static int vec_level(void)
{
    return 0;
}

static void fill_pattern(unsigned char *pat, uint64_t seed)
{
    fill_words(pat, seed);
    /* fcsr: rounding toward zero (frm 1), and the sticky flags NV, OF
     * and NX set (the loop does no floating point to change them). */
    uint64_t fcsr = (1u << 5) | 0x15;
    memcpy(pat + 512, &fcsr, 8);
}

/* Layout: preempt_riscv64.S. sp, gp and tp (x2-x4) are not the pattern's:
 * gp is the same in every thread and must come back as it was, and tp is
 * the thread's, which may have changed. */
static int64_t check_out(const unsigned char *pat, const unsigned char *out,
                         int level)
{
    (void)level;
    uint64_t a0, gp, mygp;
    memcpy(&a0, out + 10 * 8, 8);
    memcpy(&gp, out + 3 * 8, 8);
    __asm__("mv %0, gp" : "=r"(mygp));
    if (a0 != 0)
        return 10 * 8 + 1;
    if (gp != mygp)
        return 3 * 8 + 1;
    for (size_t i = 8; i < 520; i++) {
        size_t reg = i / 8;
        if ((reg >= 2 && reg <= 4) || reg == 10)
            continue;
        if (pat[i] != out[i])
            return (int64_t)i + 1;
    }
    return 0;
}
#elif defined(__aarch64__)
static int vec_level(void)
{
    return 0;
}

static void fill_pattern(unsigned char *pat, uint64_t seed)
{
    fill_words(pat, seed);
    uint64_t fpcr = 3u << 22;       /* rounding toward zero */
    memcpy(pat + 776, &fpcr, 8);
}

static int64_t check_out(const unsigned char *pat, const unsigned char *out,
                         int level)
{
    (void)level;
    uint64_t x0, nzcv;
    memcpy(&x0, out, 8);
    memcpy(&nzcv, out + 768, 8);
    if (x0 != 0)
        return 1;
    if ((nzcv & 0xf0000000u) != 0x60000000u)
        return 769;                 /* Z and C from the last subs */
    for (size_t i = 8; i < 248; i++)
        if (pat[i] != out[i])
            return (int64_t)i + 1;
    for (size_t i = 256; i < 768; i++)
        if (pat[i] != out[i])
            return (int64_t)i + 1;
    if (memcmp(pat + 776, out + 776, 8) != 0)
        return 777;
    return 0;
}
#endif

static void reg_checker(void *arg)
{
    int id = (int)(intptr_t)arg;
    struct g *gp = self();
    unsigned char *pat = aligned_alloc(64, REGBUF);
    unsigned char *out = aligned_alloc(64, REGBUF);
    uint64_t seed = 0x0123456789abcdefULL * (uint64_t)(id + 1);
    int64_t bad = 0;
    uint32_t start = async_of(gp);
    while (bad == 0 && async_of(gp) - start < rg.want) {
        fill_pattern(pat, seed++);
        memset(out, 0, REGBUF);
        h_async_regs(GMP_TEST_EMULATED ? 200000 : 2000000, pat, out,
                     rg.level);
        bad = check_out(pat, out, rg.level);
    }
    atomic_store(&rg.preempts[id], async_of(gp) - start);
    atomic_store(&rg.bad[id], bad);
    free(pat);
    free(out);
    atomic_fetch_add(&rg.done, 1);
}

static void test_preempt_registers_survive(void **state)
{
    struct h_env *env = *state;
    SKIP_WITHOUT_ASYNC();
    memset(&rg, 0, sizeof rg);
    rg.level = vec_level();
    rg.want = 2000;
    int n = env->procs + 1;
    preempter_start();
    for (int i = 0; i < n; i++)
        assert_int_equal(gmp_go(reg_checker, (void *)(intptr_t)i), 0);
    int rc = h_wait(&rg.done, n);
    preempter_stop();
    assert_int_equal(rc, 0);
    for (int i = 0; i < n; i++) {
        if (atomic_load(&rg.bad[i]))
            print_error("goroutine %d: byte %lld of the register dump "
                        "differs (level %d)\n", i,
                        (long long)atomic_load(&rg.bad[i]) - 1, rg.level);
        assert_int_equal(atomic_load(&rg.bad[i]), 0);
        assert_true(atomic_load(&rg.preempts[i]) >= rg.want);
    }
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Where preemption must wait -------------------------------------------- */

static struct {
    _Atomic int64_t other_ran, done;
    _Atomic int64_t seen_in_section, preempts_in_section;
    _Atomic int64_t refused, libc_pc, rounds;
    _Atomic int64_t sent_in_section, spawn_err;
} ws;

static void other(void *arg)
{
    (void)arg;
    atomic_store(&ws.other_ran, 1);
}

static void disabled_section(void *arg)
{
    (void)arg;
    struct g *gp = self();
    gmp_preempt_disable();          /* before gmp_go, which honours marks */
    if (gmp_go(other, NULL) != 0) {             /* runnable, waiting */
        atomic_store(&ws.spawn_err, 1);
        atomic_store(&ws.other_ran, 1);
    }
    gmp_preempt_disable();          /* nested */
    uint32_t p0 = async_of(gp);
    int64_t sent0 = atomic_load(&pe.sent);
    /* Hundreds of requests land while the section runs. */
    while (atomic_load(&pe.sent) - sent0 < 300)
        ;
    gmp_preempt_enable();           /* still disabled: depth 1 */
    int64_t sent1 = atomic_load(&pe.sent);
    while (atomic_load(&pe.sent) - sent1 < 100)
        ;
    atomic_store(&ws.sent_in_section, atomic_load(&pe.sent) - sent0);
    atomic_store(&ws.seen_in_section, atomic_load(&ws.other_ran));
    uint32_t p1 = async_of(gp);
    atomic_store(&ws.preempts_in_section, p1 - p0);
    gmp_preempt_enable();           /* a pending mark acts here */
    while (async_of(gp) == p1)
        ;                           /* and the next signal, right after */
    atomic_fetch_add(&ws.done, 1);
}

static void test_preempt_disabled_section_is_not_preempted(void **state)
{
    struct h_env *env = *state;
    SKIP_WITHOUT_ASYNC();
    memset(&ws, 0, sizeof ws);
    assert_int_equal(under_preempter(disabled_section, &ws.done), 0);
    assert_int_equal(atomic_load(&ws.spawn_err), 0);
    assert_true(atomic_load(&ws.sent_in_section) >= 400);
    assert_int_equal(atomic_load(&ws.preempts_in_section), 0);
    /* With one P, "other" runs only if the section's goroutine stops. */
    if (env->procs == 1)
        assert_int_equal(atomic_load(&ws.seen_in_section), 0);
    assert_int_equal(h_wait(&ws.other_ran, 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* True when pc is in a shared object rather than this program. */
static bool pc_in_shared_lib(uintptr_t pc)
{
    Dl_info pi, mi;
    if (!dladdr((void *)pc, &pi) || !dladdr((void *)&h_sched, &mi))
        return false;
    return pi.dli_fbase != mi.dli_fbase;
}

static void libc_copier(void *arg)
{
    (void)arg;
    struct g *gp = self();
    size_t len = (size_t)(GMP_TEST_EMULATED || H_SANITIZED ? 8 : 64) << 20;
    char *a = malloc(len), *b = malloc(len);
    memset(a, 1, len);
    memset(b, 2, len);
    int64_t refused = 0, libc_pc = 0, rounds = 0;
    /* 20 rounds, and more while no signal has landed in one yet, up to
     * 2000: under qemu-user on a loaded host the preempter's 50 us sleeps
     * stretch, and 20 quick rounds of copying can fall between two
     * signals (seen on riscv64). */
    for (; rounds < 2000 && refused < 20 && (rounds < 20 || refused == 0);
         rounds++) {
        uint32_t r0 = ((volatile struct g *)gp)->asyncrefused;
        memcpy(rounds & 1 ? a : b, rounds & 1 ? b : a, len);
        refused += ((volatile struct g *)gp)->asyncrefused - r0;
        /* Whatever preempted us, it was never inside libc. */
        if (pc_in_shared_lib(((volatile struct g *)gp)->asyncpc))
            libc_pc++;
    }
    /* Right after: a plain loop is preempted at once. */
    uint32_t p0 = async_of(gp);
    while (async_of(gp) == p0)
        ;
    if (pc_in_shared_lib(((volatile struct g *)gp)->asyncpc))
        libc_pc++;
    free(a);
    free(b);
    atomic_store(&ws.refused, refused);
    atomic_store(&ws.libc_pc, libc_pc);
    atomic_store(&ws.rounds, rounds);
    atomic_fetch_add(&ws.done, 1);
}

static void test_preempt_waits_for_libc_to_return(void **state)
{
    SKIP_WITHOUT_ASYNC();
    memset(&ws, 0, sizeof ws);
    assert_int_equal(under_preempter(libc_copier, &ws.done), 0);
    /* Signals did land inside memcpy, and were turned away there. */
    assert_true(atomic_load(&ws.refused) > 0);
    assert_int_equal(atomic_load(&ws.libc_pc), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- The program's PLT stubs -------------------------------------------- */

/*
 * This program is built without PIE where it can be (tests/CMakeLists.txt,
 * GMP_TEST_NO_PIE) and takes labs's address in code, so that address is a
 * "canonical" PLT stub in the program, and every GOT holds it, the
 * runtime's too. A signal landing in such a stub during one of the
 * runtime's own calls would preempt the runtime holding a lock (startm
 * calls pthread_create under sched.lock). A call through the stub spends
 * a good part of its few instructions there: no preemption may land in it.
 */
#define PLT_ENTRY 16                /* bytes per PLT entry, every arch */
#define PLT_WANT  (GMP_TEST_EMULATED || H_SANITIZED ? 200 : 1000)

static struct {
    _Atomic int64_t done;
    int64_t in_stub;
    bool canonical;
} ps;

static __attribute__((noinline)) long (*labs_address(void))(long)
{
    return labs;
}

static void plt_caller(void *arg)
{
    (void)arg;
    struct g *gp = self();
    long (*volatile fn)(long) = labs_address();
    uintptr_t stub = (uintptr_t)fn;
    ps.canonical = !pc_in_shared_lib(stub);
    uint32_t p0 = async_of(gp), last = p0;
    int64_t in_stub = 0;
    long sum = 0;
    while (last - p0 < PLT_WANT) {
        sum += fn(-1);
        uint32_t now = async_of(gp);
        if (now != last) {
            last = now;
            if (((volatile struct g *)gp)->asyncpc - stub < PLT_ENTRY)
                in_stub++;
        }
    }
    G_CHECK(sum > 0);
    ps.in_stub = in_stub;
    atomic_fetch_add(&ps.done, 1);
}

static void test_preempt_skips_the_programs_plt(void **state)
{
    (void)state;
    SKIP_WITHOUT_ASYNC();
    memset(&ps, 0, sizeof ps);
    assert_int_equal(under_preempter(plt_caller, &ps.done), 0);
    print_message("labs at a %s, %lld of %d preemptions in it\n",
                  ps.canonical ? "PLT stub" : "library address",
                  (long long)ps.in_stub, PLT_WANT);
#ifdef GMP_TEST_NO_PIE
    assert_true(ps.canonical);
#endif
    assert_int_equal(ps.in_stub, 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Blocking calls outside a bracket restart --------------------------------- */

static struct {
    int fd[2];
    _Atomic int64_t in_read, done;
    ssize_t got;
    int err;
    uint32_t refused;
} rs;

/* A read that blocks while holding its P: the preemption signals land in
 * the kernel, and SA_RESTART must bring the read back, not EINTR. */
static void raw_reader(void *arg)
{
    (void)arg;
    struct g *gp = self();
    uint32_t r0 = ((volatile struct g *)gp)->asyncrefused;
    char c;
    atomic_store(&rs.in_read, 1);
    rs.got = read(rs.fd[0], &c, 1);
    rs.err = rs.got < 0 ? errno : 0;
    rs.refused = ((volatile struct g *)gp)->asyncrefused - r0;
    atomic_fetch_add(&rs.done, 1);
}

static void test_preempt_blocking_read_restarts(void **state)
{
    SKIP_WITHOUT_ASYNC();
    memset(&rs, 0, sizeof rs);
    assert_int_equal(pipe(rs.fd), 0);
    preempter_start();
    assert_int_equal(gmp_go(raw_reader, NULL), 0);
    assert_int_equal(h_wait(&rs.in_read, 1), 0);
    /* Hundreds of requests while the reader sits in read(). */
    assert_int_equal(h_wait(&pe.sent, atomic_load(&pe.sent) + 300), 0);
    assert_int_equal(write(rs.fd[1], "x", 1), 1);
    int rc = h_wait(&rs.done, 1);
    preempter_stop();
    assert_int_equal(rc, 0);
    assert_int_equal(rs.err, 0);
    assert_int_equal(rs.got, 1);
    assert_true(rs.refused > 0);    /* the signals did come, in libc */
    close(rs.fd[0]);
    close(rs.fd[1]);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Switched off ------------------------------------------------------------ */

static struct {
    _Atomic int64_t done, preempts;
} so;

static void requested_loop(void *arg)
{
    (void)arg;
    struct g *gp = self();
    uint32_t p0 = async_of(gp);
    int64_t sent0 = atomic_load(&pe.sent);
    while (atomic_load(&pe.sent) - sent0 < 200)
        ;
    atomic_store(&so.preempts, async_of(gp) - p0);
    atomic_fetch_add(&so.done, 1);
}

/* Starts a runtime with cfg, runs requested_loop under the preempter,
 * and returns how often it was preempted by signal; *on says whether the
 * runtime had asynchronous preemption on. */
static int64_t preempts_with(const gmp_config_t *cfg, bool *on)
{
    memset(&so, 0, sizeof so);
    assert_int_equal(gmp_init(cfg), 0);
    assert_int_equal(under_preempter(requested_loop, &so.done), 0);
    *on = async_on();
    assert_int_equal(gmp_shutdown(), 0);
    return atomic_load(&so.preempts);
}

static void test_preempt_can_be_switched_off(void **state)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 1;
    bool on;
    int64_t n = preempts_with(&cfg, &on);
    if (!on) {
        print_message("asynchronous preemption is off here\n");
        skip();
    }
    assert_true(n > 0);
    cfg.async_preempt_off = 1;
    n = preempts_with(&cfg, &on);
    assert_false(on);
    assert_int_equal(n, 0);
    cfg.async_preempt_off = 0;
    setenv("GMP_DEBUG", "schedtrace=0,asyncpreemptoff=1", 1);
    n = preempts_with(&cfg, &on);
    unsetenv("GMP_DEBUG");
    assert_false(on);
    assert_int_equal(n, 0);
    setenv("GMP_DEBUG", "asyncpreemptoff=0", 1);
    n = preempts_with(&cfg, &on);
    unsetenv("GMP_DEBUG");
    assert_true(on);
    assert_true(n > 0);
}

/* ---- The host's SIGURG handler ------------------------------------------------ */

static _Atomic int64_t host_urgs;

static void host_urg(int sig)
{
    (void)sig;
    atomic_fetch_add(&host_urgs, 1);
}

static void test_preempt_chains_to_the_host_handler(void **state)
{
    struct sigaction sa, prev, now;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = host_urg;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGURG, &sa, &prev), 0);
    atomic_store(&host_urgs, 0);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    assert_int_equal(gmp_init(&cfg), 0);
    bool on = async_on();
    /* The program's own SIGURG still reaches it. */
    assert_int_equal(kill(getpid(), SIGURG), 0);
    assert_int_equal(h_wait(&host_urgs, 1), 0);
    assert_int_equal(gmp_shutdown(), 0);
    /* And its handler is back in place. */
    assert_int_equal(sigaction(SIGURG, &prev, &now), 0);
    assert_true(now.sa_handler == host_urg);
    if (!on)
        skip();
}

/* ---- Mixed stress ----------------------------------------------------------- */

static struct {
    _Atomic int stop;
    _Atomic int64_t spawned, finished, yields, calls, hogs, live;
} ms;

static void ms_child(void *arg)
{
    (void)arg;
    volatile uint64_t x = 1;
    for (int i = 0; i < 1000; i++)
        x = x * 6364136223846793005ULL + 1;
    atomic_fetch_add(&ms.finished, 1);
}

static void ms_spawner(void *arg)
{
    (void)arg;
    while (!atomic_load(&ms.stop)) {
        /* Bounded backlog: spawns outrun one P's children. */
        while (atomic_load(&ms.spawned) - atomic_load(&ms.finished) > 10000)
            gmp_yield();
        atomic_fetch_add(&ms.spawned, 1);
        if (gmp_go(ms_child, NULL) != 0)
            atomic_fetch_add(&ms.finished, 1);      /* not started */
        if ((atomic_load(&ms.spawned) & 63) == 0)
            gmp_yield();
    }
    atomic_fetch_sub(&ms.live, 1);
}

static void ms_yielder(void *arg)
{
    (void)arg;
    while (!atomic_load(&ms.stop)) {
        gmp_yield();
        atomic_fetch_add(&ms.yields, 1);
    }
    atomic_fetch_sub(&ms.live, 1);
}

static void ms_syscaller(void *arg)
{
    (void)arg;
    int fd[2];
    if (pipe(fd) != 0)
        abort();
    char c = 0;
    while (!atomic_load(&ms.stop)) {
        (void)GMP_SYSCALL(getppid());
        if (GMP_SYSCALL(write(fd[1], &c, 1)) != 1 ||
            GMP_SYSCALL(read(fd[0], &c, 1)) != 1)
            abort();
        if ((atomic_fetch_add(&ms.calls, 1) & 255) == 0) {
            struct timespec ts = {0, 100000};
            (void)GMP_SYSCALL(nanosleep(&ts, NULL));
        }
    }
    close(fd[0]);
    close(fd[1]);
    atomic_fetch_sub(&ms.live, 1);
}

/* A tight loop that lasts (tens of ms unsanitized) and then starts the
 * next one: without preemption it holds its P the whole time. */
static void ms_hog(void *arg)
{
    (void)arg;
    uint64_t x = 1;
    for (uint64_t i = 0; i < (H_SLOW ? 2000000 : 50000000) &&
                         !atomic_load_explicit(&ms.stop,
                                               memory_order_relaxed);
         i++)
        x = x * 6364136223846793005ULL + 1;
    __asm__ __volatile__("" ::"r"(x));
    atomic_fetch_add(&ms.hogs, 1);
    if (atomic_load(&ms.stop) || gmp_go(ms_hog, NULL) != 0)
        atomic_fetch_sub(&ms.live, 1);
}

static bool ms_all_out(void *arg)
{
    (void)arg;
    return atomic_load(&ms.live) == 0;
}

static void test_preempt_mixed_stress(void **state)
{
    struct h_env *env = *state;
    memset(&ms, 0, sizeof ms);
    void (*kinds[])(void *) = {ms_spawner, ms_yielder, ms_syscaller,
                               ms_hog, ms_hog};
    int nk = (int)(sizeof kinds / sizeof *kinds);
    int per = env->procs;
    atomic_store(&ms.live, nk * per);
    for (int i = 0; i < per; i++)
        for (int k = 0; k < nk; k++)
            assert_int_equal(gmp_go(kinds[k], NULL), 0);
    /* The stress lasts 10 s, 4 s where the code runs slower (sanitized or
     * emulated: the release leg has the long run). */
    struct timespec ts = {H_SLOW ? 4 : 10, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    atomic_store(&ms.stop, 1);
    assert_int_equal(h_wait_until(ms_all_out, NULL, "stress goroutines out"),
                     0);
    assert_int_equal(h_wait_quiet(), 0);
    /* Nothing lost: every spawned child ran to its end. */
    assert_int_equal(atomic_load(&ms.finished), atomic_load(&ms.spawned));
    assert_true(atomic_load(&ms.spawned) > 0);
    assert_true(atomic_load(&ms.yields) > 0);
    assert_true(atomic_load(&ms.calls) > 0);
    assert_true(atomic_load(&ms.hogs) > 0);
    print_message("procs=%d: %lld spawned, %lld yields, %lld syscalls, "
                  "%lld hog slices\n", env->procs,
                  (long long)atomic_load(&ms.spawned),
                  (long long)atomic_load(&ms.yields),
                  (long long)atomic_load(&ms.calls),
                  (long long)atomic_load(&ms.hogs));
}
/* ---- The host's own safe points ----------------------------------------------- */

static _Atomic int64_t sy_started, sy_others, sy_yields, sy_done;
static int sy_procs;

/* A loop the signal may not stop (preemption by signal is off here) and
 * that calls nothing that yields: only gmp_should_yield can tell it when
 * to let the others run. */
static void sy_spinner(void *arg)
{
    (void)arg;
    atomic_fetch_add(&sy_started, 1);
    while (atomic_load(&sy_others) < sy_procs)
        if (gmp_should_yield()) {
            atomic_fetch_add(&sy_yields, 1);
            gmp_yield();
        }
    atomic_fetch_add(&sy_done, 1);
}

static void sy_other(void *arg)
{
    (void)arg;
    atomic_fetch_add(&sy_others, 1);
}

static void test_preempt_should_yield_asks_the_host(void **state)
{
    assert_int_equal(gmp_should_yield(), 0);    /* not a goroutine */
    for (int procs = 1; procs <= 4; procs *= 2) {
        void *env;
        assert_int_equal(h_up_nopreempt(&env, procs), 0);
        sy_procs = procs;
        atomic_store(&sy_started, 0);
        atomic_store(&sy_others, 0);
        atomic_store(&sy_yields, 0);
        atomic_store(&sy_done, 0);
        for (int i = 0; i < procs; i++)
            assert_int_equal(gmp_go(sy_spinner, NULL), 0);
        /* The spinners hold every P before the others exist. */
        assert_int_equal(h_wait(&sy_started, procs), 0);
        for (int i = 0; i < procs; i++)
            assert_int_equal(gmp_go(sy_other, NULL), 0);
        assert_int_equal(h_wait(&sy_done, procs), 0);
        assert_true(atomic_load(&sy_yields) > 0);
        assert_int_equal(gmp_shutdown(), 0);
    }
}

/* ---- Live vector state: no preemption ------------------------------------ */

/*
 * The stub saves the integer, floating-point and SIMD registers only; a
 * goroutine resumed on another thread would find that thread's SVE, SME
 * or RISC-V vector registers. So the handler declines where the signal
 * frame shows such state live (arch/<arch>/sigctx.h). qemu-user does not
 * make that state, so this checks the decision on signal frames built
 * here, record by record as the kernel lays them out.
 */
#if defined(__riscv)
static void test_preempt_declines_live_vector_state(void **state)
{
    (void)state;
    static ucontext_t uc;
    struct gmp__sigrec *r =
        (void *)((char *)&uc.uc_mcontext.__fpregs + GMP_REC_FIRST);
    /* No runtime runs in this group: no handler reads the flag now. */
    bool had_v = gmp__have_v;
    gmp__have_v = true;
    memset(&uc, 0, sizeof uc);
    assert_true(gmp__sigctx_fp_plain(&uc));     /* the chain ends at once */
    r->magic = GMP_REC_V;
    r->size = 8;
    assert_false(gmp__sigctx_fp_plain(&uc));    /* a vector record */
    r->magic = 0x12345678;                      /* one it does not know */
    assert_false(gmp__sigctx_fp_plain(&uc));
    gmp__have_v = false;                        /* no V: no chain to read */
    assert_true(gmp__sigctx_fp_plain(&uc));
    gmp__have_v = had_v;
}
#elif defined(__aarch64__)
static void test_preempt_declines_live_vector_state(void **state)
{
    (void)state;
    static ucontext_t uc;
    enum { VL = 32 };               /* a 256-bit SVE vector length */
    char *p = (char *)uc.uc_mcontext.__reserved;
    struct gmp__fpsimd_rec *fp = (void *)p;
    struct gmp__sve_rec *sve = (void *)(p + sizeof *fp);
    unsigned char *z = (unsigned char *)sve + 16;
    memset(&uc, 0, sizeof uc);
    assert_false(gmp__sigctx_fp_plain(&uc));    /* no FP/SIMD record */
    fp->head.magic = GMP_REC_FPSIMD;
    fp->head.size = sizeof *fp;
    assert_true(gmp__sigctx_fp_plain(&uc));     /* SIMD only */
    sve->head.magic = GMP_REC_SVE;
    sve->head.size = 16 + 32 * VL + 17 * (VL / 8);
    sve->vl = VL;
    z[0] = 1;                                   /* z0's low 128 bits: v0 */
    assert_true(gmp__sigctx_fp_plain(&uc));
    z[16] = 1;                                  /* z0 above 128 bits */
    assert_false(gmp__sigctx_fp_plain(&uc));
    z[16] = 0;
    z[32 * VL] = 1;                             /* p0 */
    assert_false(gmp__sigctx_fp_plain(&uc));
    z[32 * VL] = 0;
    sve->flags = GMP_REC_SVE_FLAG_SM;           /* streaming mode */
    assert_false(gmp__sigctx_fp_plain(&uc));
}
#endif

int main(void)
{
    const struct CMUnitTest per_procs[] = {
        cmocka_unit_test(test_preempt_tight_loops_share_the_cpu),
        cmocka_unit_test(test_preempt_registers_survive),
        cmocka_unit_test(test_preempt_disabled_section_is_not_preempted),
        cmocka_unit_test(test_preempt_waits_for_libc_to_return),
        cmocka_unit_test(test_preempt_blocking_read_restarts),
        cmocka_unit_test(test_preempt_skips_the_programs_plt),
    };
    const struct CMUnitTest stress[] = {
        cmocka_unit_test(test_preempt_mixed_stress),
    };
    const struct CMUnitTest alone[] = {
#if defined(__riscv) || defined(__aarch64__)
        cmocka_unit_test(test_preempt_declines_live_vector_state),
#endif
        cmocka_unit_test(test_preempt_can_be_switched_off),
        cmocka_unit_test(test_preempt_chains_to_the_host_handler),
        cmocka_unit_test(test_preempt_should_yield_asks_the_host),
    };
    int fails = 0;
    fails += cmocka_run_group_tests_name("preempt, procs=1", per_procs,
                                         h_up_1, h_down);
    fails += cmocka_run_group_tests_name("preempt, procs=2", per_procs,
                                         h_up_2, h_down);
    fails += cmocka_run_group_tests_name("stress, procs=1", stress,
                                         h_up_1, h_down);
    fails += cmocka_run_group_tests_name("stress, procs=2", stress,
                                         h_up_2, h_down);
    fails += cmocka_run_group_tests_name("stress, procs=4", stress,
                                         h_up_4, h_down);
    fails += cmocka_run_group_tests_name("preempt, own runtime", alone,
                                         NULL, NULL);
    return fails != 0;
}
