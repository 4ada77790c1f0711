/*
 * harness.h - what every gmprt test shares: cmocka, deadline-bounded waits,
 * group fixtures that start a runtime with a given number of Ps, the
 * sanitizer scale, a signal handler's install (h_handle), a forked-child
 * runner for promised crashes, checks made off the test thread
 * (G_CHECK), plain threads (th_start), one check run in goroutines, on
 * a plain thread and on the test thread at once (h_everywhere), and a
 * wait for the whole process to be still (h_still). Tests that look
 * inside the runtime add internal.h, the one seam to its internals.
 *
 * Rules the tests follow:
 *   - Assert on the test's own thread only. A cmocka assert longjmps to
 *     the test function's stack; from a goroutine or another thread that
 *     is undefined. Goroutines record into atomics; the test thread waits
 *     (h_wait, or gmp_wg_wait: the test thread is a plain OS thread) and
 *     then asserts.
 *   - Wait on conditions, never on sleeps. The deadline of h_wait only
 *     turns a hang into a failure; it is no timing claim.
 *   - Promised crashes (stack overflow, fatal errors) run in a forked
 *     child (h_fork), forked while no runtime runs in the parent.
 * Everything here is static: each test binary includes it once.
 */
#ifndef GMP_TEST_HARNESS_H
#define GMP_TEST_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gmprt.h"

#define H_UNUSED __attribute__((unused))

/* ---- Sanitizers --------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define H_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define H_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(H_ASAN)
#define H_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(H_TSAN)
#define H_TSAN 1
#endif
#endif

#if defined(H_ASAN) || defined(H_TSAN)
#define H_SANITIZED 1
#else
#define H_SANITIZED 0
#endif

/* Tests run under an emulator (qemu-user for the arm64 and riscv64 cross
 * builds) when the build says so. */
#ifndef GMP_TEST_EMULATED
#define GMP_TEST_EMULATED 0
#endif
#define H_SLOW (H_SANITIZED || GMP_TEST_EMULATED)

/* A fully static test binary (GMP_STATIC_PROGRAMS): no dynamic loader,
 * so dlsym and dladdr find nothing, dumps name no functions, and
 * asynchronous preemption is off (libc is the program's code). */
#ifndef GMP_TEST_STATIC
#define GMP_TEST_STATIC 0
#endif
#define H_STATIC GMP_TEST_STATIC

/* No preemption by signal in this build (src/preempt.c): TSan, or a
 * static binary. A loop there stops only at a runtime call. */
#if defined(H_TSAN) || H_STATIC
#define H_NO_ASYNC 1
#else
#define H_NO_ASYNC 0
#endif

#define SKIP_IF_STATIC(why)                                                 \
    do {                                                                    \
        if (H_STATIC) {                                                     \
            print_message("static binary: %s\n", why);                     \
            skip();                                                         \
        }                                                                   \
    } while (0)

/* The start line of a goroutine started as fn in a dump (src/trace.c),
 * up to its argument: "started as fn(", where dladdr names the test's
 * own functions (ENABLE_EXPORTS); in a static binary, which has no
 * dynamic symbols, fn's address. H_STARTED_AS(fn).s is the text. */
struct h_started {
    char s[128];
};

static H_UNUSED struct h_started h_started_as(void (*fn)(void *),
                                              const char *name)
{
    struct h_started t;
#if H_STATIC
    (void)name;
    snprintf(t.s, sizeof t.s, "started as %#lx(", (unsigned long)(uintptr_t)fn);
#else
    (void)fn;
    snprintf(t.s, sizeof t.s, "started as %s(", name);
#endif
    return t;
}
#define H_STARTED_AS(fn) h_started_as((fn), #fn)

/* A test that stands in for a C library function f: its definition is
 * H_WRAP(f) and it calls the C library's through a pointer that
 * H_REAL(ptr, f) fills. Dynamically linked, the definition is f itself
 * (a program's symbol wins over a shared library's, for the runtime's
 * calls too) and the C library's comes from dlsym(RTLD_NEXT). A static
 * program has no loader to ask, and a definition of f there would keep
 * the C library's out of the link: it is linked with --wrap=f
 * (tests/CMakeLists.txt), every call to f goes to __wrap_f, and __real_f
 * is the C library's. */
#if H_STATIC
#define H_WRAP(f) __wrap_##f
#define H_REAL(ptr, f)                                                      \
    do {                                                                    \
        extern __typeof__(f) __real_##f;                                    \
        (ptr) = __real_##f;                                                 \
    } while (0)
#else
#include <dlfcn.h>
#define H_WRAP(f) f
#define H_REAL(ptr, f) (*(void **)&(ptr) = dlsym(RTLD_NEXT, #f))
#endif

/* Sanitized builds run 5-15x slower: counts shrink a hundredfold there
 * (10^6 becomes 10^4), never below 1. Emulated ones keep their counts:
 * qemu-user runs this code only a few times slower than the host. */
#define H_SCALE(n) (H_SANITIZED ? ((n) / 100 > 0 ? (n) / 100 : 1) : (n))

/* Goroutines alive at the same time. Under TSan every goroutine stack is
 * a TSan fiber, which TSan counts as a thread until the runtime stops; it
 * dies past 8128 threads. Tests that keep many goroutines alive at once
 * stay far below that there. */
#if defined(H_TSAN)
#define H_LIVE(n) ((n) < 2000 ? (n) : 2000)
#else
#define H_LIVE(n) H_SCALE(n)
#endif

/* How long h_wait waits before it calls a wait a hang. Far beyond any
 * healthy run on a loaded 2-core CI machine, and below the ctest TIMEOUT
 * of every binary, so a hang is reported by the test that hung. */
#define H_DEADLINE_NS ((int64_t)(H_SLOW ? 240 : 60) * 1000000000LL)

/* ---- Threads ------------------------------------------------------------- */

/* The calling thread's kernel id. */
static H_UNUSED int32_t h_tid(void)
{
    return (int32_t)syscall(SYS_gettid);
}

/* The state letter of one of this process's threads ('R', 'S', ...). */
static H_UNUSED char h_thread_state(int32_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');        /* comm may hold spaces and ')' */
    return p && p[1] == ' ' ? p[2] : '?';
}

/* ---- Time and waiting --------------------------------------------------- */

static H_UNUSED int64_t h_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One step of a polling loop: a few sched_yield()s first (the condition is
 * often met within microseconds), then sleeps growing to 1 ms so that a
 * long wait leaves the CPUs to the threads it waits for. */
static H_UNUSED void h_backoff(unsigned *step)
{
    if (*step < 64) {
        sched_yield();
    } else {
        unsigned k = *step - 64;
        long ns = 20000L << (k < 6 ? k : 6);        /* 20 us .. 1.28 ms */
        struct timespec ts = {0, ns > 1000000L ? 1000000L : ns};
        nanosleep(&ts, NULL);
    }
    (*step)++;
}

/* Waits until pred(arg) is true, at most timeout_ns. Returns 0, or -1
 * (printing what). Context: the test thread (a plain OS thread). */
static H_UNUSED int h_wait_until_ns(bool (*pred)(void *), void *arg,
                                    const char *what, int64_t timeout_ns)
{
    int64_t deadline = h_now() + timeout_ns;
    unsigned step = 0;
    while (!pred(arg)) {
        if (h_now() > deadline) {
            fprintf(stderr, "h_wait: timed out waiting for %s\n", what);
            return -1;
        }
        h_backoff(&step);
    }
    return 0;
}

/* h_wait_until_ns with the standard deadline. */
static H_UNUSED int h_wait_until(bool (*pred)(void *), void *arg,
                                 const char *what)
{
    return h_wait_until_ns(pred, arg, what, H_DEADLINE_NS);
}

/* Waits until *ctr reaches want (>= want: a counter that overshoots is
 * the caller's to assert on), at most timeout_ns. Returns 0, or -1. */
static H_UNUSED int h_wait_ns(_Atomic int64_t *ctr, int64_t want,
                              int64_t timeout_ns)
{
    int64_t deadline = h_now() + timeout_ns;
    unsigned step = 0;
    while (atomic_load(ctr) < want) {
        if (h_now() > deadline) {
            fprintf(stderr, "h_wait: timed out at %lld of %lld\n",
                    (long long)atomic_load(ctr), (long long)want);
            return -1;
        }
        h_backoff(&step);
    }
    return 0;
}

/* h_wait_ns with the standard deadline: the usual way to wait. */
static H_UNUSED int h_wait(_Atomic int64_t *ctr, int64_t want)
{
    return h_wait_ns(ctr, want, H_DEADLINE_NS);
}

static H_UNUSED bool h_no_goroutines(void *arg)
{
    (void)arg;
    return gmp_num_goroutines() == 0;
}

/* Waits until gmp_num_goroutines() is 0: goroutines that recorded their
 * result may still be on their way out. */
static H_UNUSED int h_wait_quiet(void)
{
    return h_wait_until(h_no_goroutines, NULL, "gmp_num_goroutines() == 0");
}

/* ---- Group fixtures ----------------------------------------------------- */

struct h_env {
    int procs;              /* Ps of the runtime the group started */
};

/* The Ps of the group's runtime; 0 in a group without one. */
static H_UNUSED int h_env_procs(void **state)
{
    struct h_env *env = *state;
    return env ? env->procs : 0;
}

/* A channel of sz-byte elements and capacity cap, asserted made.
 * Context: the test thread. */
static H_UNUSED gmp_chan_t *h_chan(size_t sz, size_t cap)
{
    gmp_chan_t *c = gmp_chan_make(sz, cap);
    assert_non_null(c);
    return c;
}

/* Starts the runtime a group runs on, as cfg says (cfg->procs nonzero). */
static H_UNUSED int h_up_with(void **state, const gmp_config_t *cfg)
{
    static struct h_env envs[5];
    static int next;
    struct h_env *env = &envs[next++ % 5];
    int err = gmp_init(cfg);
    if (err != 0) {
        fprintf(stderr, "gmp_init(procs=%d): %s\n", cfg->procs,
                gmp_strerror(err));
        return -1;
    }
    env->procs = cfg->procs;
    *state = env;
    return 0;
}

static H_UNUSED int h_up(void **state, int procs)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    return h_up_with(state, &cfg);
}

static H_UNUSED int h_up_1(void **state) { return h_up(state, 1); }
static H_UNUSED int h_up_2(void **state) { return h_up(state, 2); }
static H_UNUSED int h_up_4(void **state) { return h_up(state, 4); }
static H_UNUSED int h_up_8(void **state) { return h_up(state, 8); }

/* A runtime whose goroutines are preempted only at runtime calls (no
 * signal): for tests of what holds without preemption by signal. */
static H_UNUSED int h_up_nopreempt(void **state, int procs)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    cfg.async_preempt_off = 1;
    return h_up_with(state, &cfg);
}

static H_UNUSED int h_up_nopreempt_1(void **state)
{
    return h_up_nopreempt(state, 1);
}
static H_UNUSED int h_up_nopreempt_2(void **state)
{
    return h_up_nopreempt(state, 2);
}
static H_UNUSED int h_up_nopreempt_4(void **state)
{
    return h_up_nopreempt(state, 4);
}
static H_UNUSED int h_up_nopreempt_8(void **state)
{
    return h_up_nopreempt(state, 8);
}

/* gmp_shutdown waits for every goroutine, so a test that left one behind
 * hangs here: the ctest TIMEOUT catches that. */
static H_UNUSED int h_down(void **state)
{
    (void)state;
    assert_int_equal(gmp_shutdown(), 0);
    assert_int_equal(gmp_procs(), 0);
    return 0;
}

/* ---- Signals ------------------------------------------------------------ */

/* Installs fn as sig's handler, with SA_SIGINFO and flags, and with
 * also_blocked (0: none) blocked while it runs. Returns sigaction's
 * result. */
static H_UNUSED int h_handle(int sig, void (*fn)(int, siginfo_t *, void *),
                             int flags, int also_blocked)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    if (also_blocked)
        sigaddset(&sa.sa_mask, also_blocked);
    return sigaction(sig, &sa, NULL);
}

/* ---- Forked children ---------------------------------------------------- */

struct h_child {
    int  status;            /* from waitpid */
    bool timed_out;         /* killed by h_fork at the deadline */
    char out[4096];         /* its stdout, NUL-terminated, truncated */
    char err[16384];        /* its stderr, likewise */
};

static H_UNUSED void h_drain(int *fd, char *buf, size_t cap, size_t *len)
{
    char tmp[4096];
    ssize_t r = read(*fd, tmp, sizeof tmp);
    if (r <= 0) {
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        close(*fd);
        *fd = -1;
        return;
    }
    size_t take = (size_t)r;
    if (take > cap - 1 - *len)
        take = cap - 1 - *len;
    memcpy(buf + *len, tmp, take);
    *len += take;
    buf[*len] = '\0';
}

/* Runs fn(arg) in a forked child with its stdout and stderr captured, and
 * waits for it to end (SIGKILL at the deadline). The child never returns
 * into cmocka: it _exit(0)s if fn returns. Fork only while no runtime runs
 * in this process (the child would inherit a runtime without threads).
 * Returns 0, or -1 if fork or pipe failed. Context: the test thread. */
static H_UNUSED int h_fork(void (*fn)(void *), void *arg, struct h_child *res)
{
    int po[2], pe[2];
    memset(res, 0, sizeof *res);
    if (pipe(po) != 0)
        return -1;
    if (pipe(pe) != 0) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        signal(SIGABRT, SIG_DFL);
        fn(arg);
        _exit(0);
    }
    close(po[1]);
    close(pe[1]);
    int fds[2] = {po[0], pe[0]};
    size_t lens[2] = {0, 0};
    int64_t deadline = h_now() + H_DEADLINE_NS;
    while (fds[0] >= 0 || fds[1] >= 0) {
        int64_t left_ms = (deadline - h_now()) / 1000000;
        if (left_ms <= 0) {
            kill(pid, SIGKILL);
            res->timed_out = true;
            break;
        }
        struct pollfd pf[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
        int n = poll(pf, 2, left_ms > 1000 ? 1000 : (int)left_ms);
        if (n <= 0)
            continue;
        if (fds[0] >= 0 && pf[0].revents)
            h_drain(&fds[0], res->out, sizeof res->out, &lens[0]);
        if (fds[1] >= 0 && pf[1].revents)
            h_drain(&fds[1], res->err, sizeof res->err, &lens[1]);
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    while (waitpid(pid, &res->status, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

/* Asserts that the child h_fork ran exited with status code (not killed,
 * not timed out); otherwise prints what it wrote first. procs: for the
 * message. */
static H_UNUSED void h_child_exited(const struct h_child *res, int code,
                                    int procs)
{
    if (res->timed_out || !WIFEXITED(res->status) ||
        WEXITSTATUS(res->status) != code)
        print_error("procs=%d: child status %#x (timed out %d)\n"
                    "stdout:\n%s\nstderr:\n%s\n", procs, res->status,
                    (int)res->timed_out, res->out, res->err);
    assert_false(res->timed_out);
    assert_true(WIFEXITED(res->status));
    assert_int_equal(WEXITSTATUS(res->status), code);
}

/* True when text holds line as a whole line (at its start or after a
 * newline, and followed by a newline). */
static H_UNUSED bool h_has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

/* Whether text has a line "goroutine <id> [<reason>]:" or, with how long
 * it has waited, "goroutine <id> [<reason>, <n> ms]:" (gmp_dump's
 * header). */
static H_UNUSED bool h_has_gline(const char *text, unsigned long long id,
                                 const char *reason)
{
    char head[128];
    snprintf(head, sizeof head, "goroutine %llu [%s", id, reason);
    size_t n = strlen(head);
    for (const char *p = text; (p = strstr(p, head)) != NULL; p++) {
        if (p != text && p[-1] != '\n')
            continue;
        if (strncmp(p + n, "]:\n", 3) == 0)
            return true;
        unsigned long long ms;
        int len = 0;
        if (sscanf(p + n, ", %llu ms]:%n", &ms, &len) == 1 && len > 0 &&
            p[n + (size_t)len] == '\n')
            return true;
    }
    return false;
}

/* Asserts that a forked child died of sig; prints its stderr otherwise. */
#define h_assert_killed_by(res, sig)                                        \
    do {                                                                    \
        if (!WIFSIGNALED((res)->status) ||                                  \
            WTERMSIG((res)->status) != (sig))                               \
            print_error("child status %#x (timed out %d); stderr:\n%s\n",  \
                        (res)->status, (int)(res)->timed_out, (res)->err);  \
        assert_false((res)->timed_out);                                     \
        assert_true(WIFSIGNALED((res)->status));                            \
        assert_int_equal(WTERMSIG((res)->status), (sig));                   \
    } while (0)

/* ---- Checks off the test thread, plain threads ----------------------- */

/* A failed expectation off the test thread: counted, with the first line. */
static _Atomic int64_t g_bad;
static _Atomic int g_bad_line;

#define G_CHECK(cond)                                                       \
    do {                                                                    \
        if (!(cond)) {                                                      \
            int z_ = 0;                                                     \
            atomic_compare_exchange_strong(&g_bad_line, &z_, __LINE__);     \
            atomic_fetch_add(&g_bad, 1);                                    \
        }                                                                   \
    } while (0)

static H_UNUSED void bad_reset(void)
{
    atomic_store(&g_bad, 0);
    atomic_store(&g_bad_line, 0);
}

#define ASSERT_NO_BAD()                                                     \
    do {                                                                    \
        if (atomic_load(&g_bad) != 0)                                       \
            print_error("%lld check(s) off the test thread failed, the "   \
                        "first at line %d\n",                               \
                        (long long)atomic_load(&g_bad),                     \
                        atomic_load(&g_bad_line));                          \
        assert_int_equal(atomic_load(&g_bad), 0);                           \
    } while (0)

/* Plain threads running void fn(void *). */
struct th {
    pthread_t t;
    void (*fn)(void *);
    void *arg;
};

static H_UNUSED void *th_main(void *p)
{
    struct th *t = p;
    t->fn(t->arg);
    return NULL;
}

static H_UNUSED void th_start(struct th *t, void (*fn)(void *), void *arg)
{
    t->fn = fn;
    t->arg = arg;
    assert_int_equal(pthread_create(&t->t, NULL, th_main, t), 0);
}

static H_UNUSED void th_join(struct th *t)
{
    assert_int_equal(pthread_join(t->t, NULL), 0);
}

/* What h_everywhere runs, and how many of its runs have returned. Static
 * storage, not the test thread's stack: runs still going after a wait
 * that timed out must not write into a frame that is gone. */
static H_UNUSED struct {
    void (*fn)(void *);
    void *arg;
    struct th t;
    _Atomic int64_t done;           /* runs returned; seq_cst throughout */
} h_ev;

static H_UNUSED void h_ev_run(void *unused)
{
    (void)unused;
    h_ev.fn(h_ev.arg);
    /* seq_cst: once the test thread sees the count, it sees what fn
     * did. */
    atomic_fetch_add(&h_ev.done, 1);
}

/* Runs fn(arg) in ngoroutines goroutines, on a new plain thread and on
 * the test thread, all at the same time, waits until every run has
 * returned (h_wait's deadline), and joins the thread. For a check that
 * must hold wherever it is called from: fn records what it finds
 * (G_CHECK, atomics) and the test asserts afterwards. ngoroutines is 0
 * where no runtime runs (gmp_procs() > 0 ? n : 0), or for a check of
 * plain threads only. Returns 0, or -1 if a run did not return in time
 * (the thread is then not joined). Context: the test thread. */
static H_UNUSED int h_everywhere(void (*fn)(void *), void *arg,
                                 int ngoroutines)
{
    h_ev.fn = fn;
    h_ev.arg = arg;
    atomic_store(&h_ev.done, 0);
    for (int i = 0; i < ngoroutines; i++)
        assert_int_equal(gmp_go(h_ev_run, NULL), 0);
    th_start(&h_ev.t, h_ev_run, NULL);
    h_ev_run(NULL);
    if (h_wait(&h_ev.done, ngoroutines + 2) != 0)
        return -1;
    th_join(&h_ev.t);
    return 0;
}

static H_UNUSED uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* ---- Stillness ---------------------------------------------------------- */

/* The process is still when every thread but the caller sleeps in the
 * kernel (state S) and none of them ran between two looks (same context
 * switch counts). Then no goroutine runs or is about to: one that is
 * runnable has a thread running or woken for it. A goroutine or thread
 * that flagged "I am about to block on X" is then blocked on X. */
#define STILL_MAX 1024

struct tsnap {
    long tid;
    unsigned long long sw;
};

static H_UNUSED int tsnap_cmp(const void *a, const void *b)
{
    long x = ((const struct tsnap *)a)->tid, y = ((const struct tsnap *)b)->tid;
    return (x > y) - (x < y);
}

/* Fills ts with every other thread's switch count; -1 if one of them is
 * not asleep (or vanished meanwhile). */
static H_UNUSED int tsnap_take(struct tsnap *ts, int cap)
{
    long self = (long)gettid();
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0, ok = 1;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        long tid = atol(e->d_name);
        if (tid == self)
            continue;
        if (n == cap) {
            ok = 0;
            break;
        }
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            ok = 0;
            break;
        }
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) {
            ok = 0;
            break;
        }
        buf[len] = '\0';
        const char *st = strstr(buf, "\nState:");
        const char *vs = strstr(buf, "\nvoluntary_ctxt_switches:");
        const char *ns = strstr(buf, "\nnonvoluntary_ctxt_switches:");
        if (!st || !vs || !ns) {
            ok = 0;
            break;
        }
        st += strlen("\nState:");
        while (*st == ' ' || *st == '\t')
            st++;
        if (*st != 'S') {
            ok = 0;
            break;
        }
        unsigned long long v = strtoull(vs + strlen("\nvoluntary_ctxt_switches:"),
                                        NULL, 10);
        unsigned long long nv = strtoull(
            ns + strlen("\nnonvoluntary_ctxt_switches:"), NULL, 10);
        ts[n].tid = tid;
        ts[n].sw = v + nv;
        n++;
    }
    closedir(d);
    if (!ok)
        return -1;
    qsort(ts, (size_t)n, sizeof *ts, tsnap_cmp);
    return n;
}

static H_UNUSED struct tsnap still_a[STILL_MAX], still_b[STILL_MAX];

static H_UNUSED bool still_pred(void *arg)
{
    (void)arg;
    int na = tsnap_take(still_a, STILL_MAX);
    if (na < 0)
        return false;
    int nb = tsnap_take(still_b, STILL_MAX);
    if (nb != na)
        return false;
    for (int i = 0; i < na; i++)
        if (still_a[i].tid != still_b[i].tid || still_a[i].sw != still_b[i].sw)
            return false;
    return true;
}

/* Waits until the process is still. Context: the test thread. */
static H_UNUSED int h_still(void)
{
    return h_wait_until(still_pred, NULL, "every other thread asleep");
}

/* ---- Shared by several areas ---------------------------------------------- */

#define US ((int64_t)1000)
#define MS ((int64_t)1000000)

#define DEADLOCK_LINE "gmprt: fatal error: all goroutines are asleep - deadlock!"

/* Both clocks at the start of a wait, to check that a timed call lasted at
 * least so long by each. */
struct span {
    int64_t mono, gmp;
};

static H_UNUSED struct span span_start(void)
{
    struct span s;
    s.mono = h_now();
    s.gmp = gmp_nanotime();
    return s;
}

/* True when at least ns have passed since s, by both clocks. */
static H_UNUSED bool span_at_least(struct span s, int64_t ns)
{
    int64_t g = gmp_nanotime(), m = h_now();
    return g - s.gmp >= ns && m - s.mono >= ns;
}

/* Runs fn(arg) as a goroutine or on a new plain thread. */
struct runner {
    void (*fn)(void *);
    void *arg;
    bool thread;
    pthread_t t;
};

static H_UNUSED void *runner_thread(void *p)
{
    struct runner *r = p;
    r->fn(r->arg);
    return NULL;
}

static H_UNUSED void run_as(struct runner *r, bool thread,
                            void (*fn)(void *), void *arg)
{
    r->fn = fn;
    r->arg = arg;
    r->thread = thread;
    if (thread)
        assert_int_equal(pthread_create(&r->t, NULL, runner_thread, r), 0);
    else
        assert_int_equal(gmp_go(fn, arg), 0);
}

static H_UNUSED void run_join(struct runner *r)
{
    if (r->thread) {
        assert_int_equal(pthread_join(r->t, NULL), 0);
        r->thread = false;
    }
}

/* ---- A gmp_main in a forked child (deadlock reports) ----------------------
 * The child runs main_fn under gmp_main with procs Ps (before() first, if
 * set); goroutines about to block for ever announce it on stdout, so the
 * parent can check the report lists exactly them. */

struct dl_case {
    void (*main_fn)(void *);
    void (*before)(void);           /* in the child, before gmp_main */
    int procs;
};

static H_UNUSED void dl_child(void *arg)
{
    struct dl_case *c = arg;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = c->procs;
    if (c->before)
        c->before();
    int rc = gmp_main(c->main_fn, NULL, &cfg);
    printf("gmp_main returned %d\n", rc);
    fflush(stdout);
    _exit(rc == 0 ? 0 : 10);
}

/* A goroutine about to block for ever says so on stdout (flushed: the
 * abort loses what is buffered): its id and the wait reason the report
 * must give it. */
static H_UNUSED void announce(const char *reason)
{
    printf("blocked %llu %s\n", (unsigned long long)gmp_id(), reason);
    fflush(stdout);
}

/* The child dies of SIGABRT after the deadlock line. The goroutine
 * states follow it, a header each in Go's form "goroutine <id>
 * [<wait reason>, <n> ms]:" (h_has_gline): exactly the goroutines that
 * announced they block (those that finished are not listed). */
static H_UNUSED void expect_deadlock_procs(void (*fn)(void *), int procs)
{
    struct dl_case c = {fn, NULL, procs};
    struct h_child res;
    assert_int_equal(h_fork(dl_child, &c, &res), 0);
    h_assert_killed_by(&res, SIGABRT);
    if (!h_has_line(res.err, DEADLOCK_LINE))
        print_error("procs=%d: stderr lacks the line:\n%s\n", procs, res.err);
    assert_true(h_has_line(res.err, DEADLOCK_LINE));
    /* main never got past its wait */
    assert_null(strstr(res.out, "returned"));

    const char *after = strstr(res.err, DEADLOCK_LINE) + strlen(DEADLOCK_LINE);
    int announced = 0, listed = 0;
    for (const char *p = res.out; (p = strstr(p, "blocked ")) != NULL;) {
        unsigned long long id;
        char reason[64], want[128];
        int len = 0;
        assert_int_equal(sscanf(p, "blocked %llu %n", &id, &len), 1);
        p += len;
        const char *eol = strchr(p, '\n');
        assert_non_null(eol);
        assert_true((size_t)(eol - p) < sizeof reason);
        memcpy(reason, p, (size_t)(eol - p));
        reason[eol - p] = '\0';
        p = eol;
        snprintf(want, sizeof want, "goroutine %llu [%s]:", id, reason);
        if (!h_has_gline(after, id, reason))
            print_error("procs=%d: no line \"%s\" after the fatal line:\n%s\n",
                        procs, want, res.err);
        assert_true(h_has_gline(after, id, reason));
        announced++;
    }
    for (const char *p = after; (p = strstr(p, "\ngoroutine ")) != NULL; p++)
        listed++;
    if (listed != announced)
        print_error("procs=%d: %d goroutines listed, %d blocked:\n%s\n"
                    "stdout:\n%s\n", procs, listed, announced, res.err, res.out);
    assert_true(announced >= 1);
    assert_int_equal(listed, announced);
}

static H_UNUSED void expect_deadlock(void (*fn)(void *))
{
#if defined(H_TSAN) || GMP_TEST_EMULATED
    /* TSan runs a background thread of its own in every process that
     * started a thread, and qemu-user's /proc shows the emulator's own
     * threads. The runtime counts every thread that is not its own as one
     * that might still act (src/deadlock.c), so there it can never prove
     * a deadlock: the child would hang until the h_fork deadline. */
    skip();
#endif
    expect_deadlock_procs(fn, 1);
    expect_deadlock_procs(fn, 4);
}

/* The child's main finishes, says "ok", and gmp_main returns 0. */
static H_UNUSED void expect_clean_with(void (*fn)(void *), void (*before)(void),
                              int procs)
{
    struct dl_case c = {fn, before, procs};
    struct h_child res;
    assert_int_equal(h_fork(dl_child, &c, &res), 0);
    h_child_exited(&res, 0, procs);
    assert_null(strstr(res.err, "fatal error"));
    assert_true(h_has_line(res.out, "ok"));
    assert_true(h_has_line(res.out, "gmp_main returned 0"));
}

/* ---- Go's trace parser ---------------------------------------------------- */

/* Runs `go tool trace -d path` (Go 1.19's internal/trace, which refuses an
 * inconsistent trace) into *out (malloc'd, NUL-terminated); returns its
 * exit status. */
static H_UNUSED int h_go_trace_d(const char *path, char **out)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "go tool trace -d %s 2>&1", path);
    FILE *f = popen(cmd, "r");
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && f && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 4096)
            buf = realloc(buf, cap *= 2);
    }
    if (buf)
        buf[len] = 0;
    *out = buf;
    return f ? pclose(f) : -1;
}

/* The tests that need `go` exit 77 (skipped) without it. */
static H_UNUSED void h_need_go(void)
{
    if (system("go version >/dev/null 2>&1") != 0) {
        printf("skipped: `go` (Debian: golang-go) is not installed\n");
        exit(77);
    }
}

#endif /* GMP_TEST_HARNESS_H */
