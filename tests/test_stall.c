/*
 * test_stall.c - GMP_DEBUG=stall=N: sysmon reports a goroutine that has
 * run N ms without a scheduling point, naming it and with its backtrace,
 * once per stall however long the stall lasts.
 *
 * Each case runs a runtime in a forked child (h_fork) whose stderr goes
 * through a pipe to a plain thread of the child: it counts the reports as
 * they come and tells the spinning goroutine when the first has come, so
 * the stall lasts until it is reported and then STALL_MORE_NS longer,
 * many sysmon rounds, in which no second report may come.
 */
#include "harness.h"

#include <pthread.h>

/* Under a sanitizer or emulation, beside the rest of the suite, the host
 * can keep another goroutine's M off its CPU past 20 ms: a second, true
 * report (P0's, while the spinner held P1) came in a TSan CI run. */
#define STALL_MS      (H_SLOW ? 200 : 20)
#define STALL_MORE_NS (5 * STALL_MS * 1000000LL)

static _Atomic int reports;         /* report lines the reader saw */
static int real_err;                /* the child's stderr, for the parent */

/* Copies the pipe to the real stderr, counting report headers. A header
 * split across two reads is joined in line[]. */
static void *reader(void *arg)
{
    int fd = *(int *)arg;
    char buf[4096], line[512];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        ssize_t w = write(real_err, buf, (size_t)r);
        (void)w;
        for (ssize_t i = 0; i < r; i++) {
            if (n < sizeof line - 1)
                line[n++] = buf[i];
            if (buf[i] != '\n')
                continue;
            line[n] = '\0';
            if (strstr(line, " without a scheduling point"))
                atomic_fetch_add(&reports, 1);
            n = 0;
        }
    }
    return NULL;
}

static _Atomic long sink;

/* Spins with preemption off until the report came (or the deadline),
 * then STALL_MORE_NS more, calling nothing of the runtime; nearly all of
 * the time in its own loop, not in the clock's call, so that the signal
 * finds it there (its first frame in the report). Not static: dladdr
 * names only exported symbols. */
void spinner(void *arg);
void spinner(void *arg)
{
    gmp_chan_t *done = arg;
    gmp_set_label("spinner");
    printf("spinner %llu\n", (unsigned long long)gmp_id());
    fflush(stdout);
    gmp_preempt_disable();
    int64_t deadline = h_now() + H_DEADLINE_NS / 2;
    while (atomic_load_explicit(&reports, memory_order_relaxed) == 0 &&
           h_now() < deadline)
        for (int i = 0; i < 10000; i++)
            atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
    int64_t end = h_now() + STALL_MORE_NS;
    while (h_now() < end)
        for (int i = 0; i < 10000; i++)
            atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
    gmp_preempt_enable();
    int v = 1;
    gmp_chan_send(done, &v);
}

static void stall_main(void *arg)
{
    (void)arg;
    gmp_chan_t *done = gmp_chan_make(sizeof(int), 1);
    gmp_go(spinner, done);
    int v;
    gmp_chan_recv(done, &v);
    gmp_chan_close(done);
}

static void stall_child(void *arg)
{
    int procs = (int)(intptr_t)arg;
    int p[2];
    if (pipe(p) != 0)
        _exit(20);
    real_err = dup(2);
    dup2(p[1], 2);
    close(p[1]);
    pthread_t th;
    if (pthread_create(&th, NULL, reader, &p[0]) != 0)
        _exit(21);
    char debug[32];
    snprintf(debug, sizeof debug, "stall=%d", STALL_MS);
    setenv("GMP_DEBUG", debug, 1);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    int rc = gmp_main(stall_main, NULL, &cfg);
    dup2(real_err, 2);              /* the pipe's last writer gone: EOF */
    pthread_join(th, NULL);
    printf("reports %d\n", atomic_load(&reports));
    printf("gmp_main returned %d\n", rc);
    fflush(stdout);
    _exit(rc == 0 ? 0 : 10);
}

/* One stall, reported exactly once, naming the spinner. */
static void test_stall_reported_once(void **state)
{
    (void)state;
#if GMP_TEST_EMULATED
    /* Under qemu-user on a loaded host the main goroutine's munmap runs
     * past the stall time too (a second, true report), and the arm64
     * frame walk's symbols come out as bare offsets: the test's counts
     * and names hold only natively. */
    skip();
#endif
    static const int procs[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        struct h_child res;
        assert_int_equal(h_fork(stall_child, (void *)(intptr_t)procs[i],
                                &res), 0);
        h_child_exited(&res, 0, procs[i]);
        bool once = h_has_line(res.out, "reports 1");
        if (!once)
            print_error("procs=%d:\nstdout:\n%s\nstderr:\n%s\n", procs[i],
                        res.out, res.err);
        assert_true(once);
        unsigned long long id = 0;
        const char *sp = strstr(res.out, "spinner ");
        assert_non_null(sp);
        assert_int_equal(sscanf(sp, "spinner %llu", &id), 1);
        char want[128];
#if H_NO_ASYNC
        /* No preemption signal: the report cannot name it. */
        snprintf(want, sizeof want, "gmprt: a goroutine has run ");
        (void)id;
#else
        snprintf(want, sizeof want, "gmprt: goroutine %llu \"spinner\" has run ",
                 id);
#endif
        if (!strstr(res.err, want))
            print_error("procs=%d: no \"%s\" in:\n%s\n", procs[i], want,
                        res.err);
        assert_non_null(strstr(res.err, want));
        assert_non_null(strstr(res.err, " without a scheduling point (P"));
#if !H_NO_ASYNC
        /* The backtrace: the spinner is its first frame or a caller of
         * it (the test is linked with its symbols exported). */
        if (!strstr(res.err, "spinner+0x"))
            print_error("procs=%d: no spinner frame in:\n%s\n", procs[i],
                        res.err);
        assert_non_null(strstr(res.err, "spinner+0x"));
        assert_non_null(strstr(res.err, "started as spinner("));
#endif
    }
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_stall_reported_once),
    };
    return cmocka_run_group_tests_name("stall", t, NULL, NULL);
}
