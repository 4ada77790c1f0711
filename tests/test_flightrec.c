/*
 * test_flightrec.c - the flight recorder: gmp_flightrec_start/write/stop.
 *
 * Claims, each for a runtime with 1, 2 and 4 Ps: with a ring of 256 KiB,
 * a workload that records many times that much (a channel ping-pong,
 * spawns) leaves a written window that is bounded by the ring and the
 * Ps' current buffers, is read by `go tool trace -d` (Go 1.19's parser,
 * which replays every goroutine's and P's state from the prefix the
 * window starts with: goroutines parked since before it, one blocked in
 * a system call whose P was taken), holds the last goroutine made and
 * nothing of one that ended before the window; recording goes on after a
 * write, and a second write parses too. Also: the errors of start, write
 * and stop; with GMP_FLIGHTREC, the deadlock report and a stall report
 * write a window Go parses. Skipped (77) without `go`.
 */
#include "harness.h"

#include <sys/stat.h>

#define RING      (256 * 1024)
#define ROUNDS    100000            /* some MiB of events: not scaled */
#define LEAVES    5000
#define PARKED    8

static _Atomic int64_t done, parked, first_id, last_id, in_call;
static gmp_chan_t *park_ch;
static int sys_pipe[2];

static void first(void *arg)
{
    (void)arg;
    atomic_store(&first_id, (int64_t)gmp_id());
    atomic_fetch_add(&done, 1);
}

static void last(void *arg)
{
    (void)arg;
    atomic_store(&last_id, (int64_t)gmp_id());
    atomic_fetch_add(&done, 1);
}

/* Parked from before the window until after the writes. */
static void parker(void *arg)
{
    (void)arg;
    int v;
    atomic_fetch_add(&parked, 1);
    gmp_chan_recv(park_ch, &v);
    atomic_fetch_add(&done, 1);
}

/* In a system call from before the window until after the writes;
 * sysmon takes its P (GoSysBlock). */
static void caller(void *arg)
{
    (void)arg;
    char c;
    gmp_syscall_enter();
    atomic_store(&in_call, 1);
    ssize_t r = read(sys_pipe[0], &c, 1);
    gmp_syscall_exit();
    (void)r;
    atomic_fetch_add(&done, 1);
}

struct pair {
    gmp_chan_t     *ch[2];
    _Atomic int     out;            /* the ponger has left */
};

static void ponger(void *arg)
{
    struct pair *pr = arg;
    int v;
    while (gmp_chan_recv(pr->ch[0], &v) == 0)
        gmp_chan_send(pr->ch[1], &v);
    atomic_store(&pr->out, 1);
    atomic_fetch_add(&done, 1);
}

static void leaf(void *arg)
{
    (void)arg;
    atomic_fetch_add(&done, 1);
}

static void pinger(void *arg)
{
    (void)arg;
    struct pair pr = {{gmp_chan_make(sizeof(int), 0),
                       gmp_chan_make(sizeof(int), 0)}, 0};
    gmp_go(ponger, &pr);
    for (int i = 0; i < ROUNDS; i++) {
        int v = i;
        gmp_chan_send(pr.ch[0], &v);
        gmp_chan_recv(pr.ch[1], &v);
        if (i % (ROUNDS / LEAVES) == 0)
            gmp_go(leaf, NULL);
    }
    gmp_chan_close(pr.ch[0]);
    while (!atomic_load(&pr.out))
        gmp_yield();
    gmp_chan_free(pr.ch[0]);
    gmp_chan_free(pr.ch[1]);
    atomic_fetch_add(&done, 1);
}

/* Writes the window to a new file, checks its size and that Go parses
 * it; returns the parser's output (malloc'd). */
static char *write_and_parse(int procs)
{
    char path[] = "/tmp/gmprt-flightrec-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(gmp_flightrec_write(fd), 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    close(fd);
    /* The ring, each slot's current buffer (64 KiB each), the prefix. */
    off_t bound = RING + (off_t)(procs + 1) * 65536 + 65536;
    if (st.st_size > bound)
        fprintf(stderr, "window of %lld bytes, bound %lld\n",
                (long long)st.st_size, (long long)bound);
    assert_true(st.st_size <= bound);
    char *out;
    int rc = h_go_trace_d(path, &out);
    if (rc != 0)
        fprintf(stderr, "go tool trace -d %s failed:\n%.4000s\n", path, out);
    assert_int_equal(rc, 0);
    unlink(path);
    return out;
}

/* Whether the parsed events name goroutine id (as g=<id> or as an
 * event's argument g=<id>). */
static bool names_g(const char *out, int64_t id)
{
    char pat[64];
    snprintf(pat, sizeof pat, "g=%lld ", (long long)id);
    if (strstr(out, pat))
        return true;
    snprintf(pat, sizeof pat, "g=%lld\n", (long long)id);
    return strstr(out, pat) != NULL;
}

static void test_flightrec_window_parses(void **state)
{
    int procs = ((struct h_env *)*state)->procs;
    atomic_store(&done, 0);
    atomic_store(&parked, 0);
    atomic_store(&in_call, 0);
    park_ch = gmp_chan_make(sizeof(int), 0);
    assert_int_equal(pipe(sys_pipe), 0);
    assert_int_equal(gmp_flightrec_start(RING), 0);
    assert_int_equal(gmp_flightrec_start(RING), GMP_EBUSY);
    assert_int_equal(gmp_trace_start(1), GMP_EBUSY);

    assert_int_equal(gmp_go(first, NULL), 0);
    assert_int_equal(h_wait(&done, 1), 0);
    for (int i = 0; i < PARKED; i++)
        assert_int_equal(gmp_go(parker, NULL), 0);
    assert_int_equal(gmp_go(caller, NULL), 0);
    assert_int_equal(h_wait(&parked, PARKED), 0);
    assert_int_equal(h_wait(&in_call, 1), 0);
    /* first + ponger + pinger + leaves */
    assert_int_equal(gmp_go(pinger, NULL), 0);
    assert_int_equal(h_wait(&done, 3 + LEAVES), 0);
    assert_int_equal(gmp_go(last, NULL), 0);
    assert_int_equal(h_wait(&done, 4 + LEAVES), 0);

    char *out = write_and_parse(procs);
    assert_true(names_g(out, atomic_load(&last_id)));
    assert_false(names_g(out, atomic_load(&first_id)));
    assert_non_null(strstr(out, " GoWaiting "));
    free(out);

    /* Recording goes on: more work, a second window. */
    assert_int_equal(gmp_go(pinger, NULL), 0);
    assert_int_equal(h_wait(&done, 6 + 2 * LEAVES), 0);
    out = write_and_parse(procs);
    free(out);

    int v = 0;
    for (int i = 0; i < PARKED; i++)
        assert_int_equal(gmp_chan_send(park_ch, &v), 0);
    assert_int_equal(write(sys_pipe[1], "x", 1), 1);
    assert_int_equal(h_wait(&done, 7 + 2 * LEAVES + PARKED), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(gmp_flightrec_stop(), 0);
    assert_int_equal(gmp_flightrec_stop(), GMP_EPERM);
    assert_int_equal(gmp_flightrec_write(1), GMP_EPERM);
    assert_int_equal(gmp_flightrec_write(-1), GMP_EBADF);
    gmp_chan_free(park_ch);
    close(sys_pipe[0]);
    close(sys_pipe[1]);
}

/* ---- The reports write it: GMP_FLIGHTREC ------------------------------- */

static char rep_path[64];

/* The report's window parses, and holds event ev, or alt if not NULL;
 * removed after. */
static void check_report(const char *ev, const char *alt)
{
    char *out;
    int rc = h_go_trace_d(rep_path, &out);
    if (rc != 0)
        fprintf(stderr, "go tool trace -d %s failed:\n%.4000s\n", rep_path,
                out);
    assert_int_equal(rc, 0);
    assert_true(strstr(out, ev) || (alt && strstr(out, alt)));
    free(out);
    unlink(rep_path);
}

/* The report of a program whose goroutines pass values round trip: a
 * round trip blocks the sender or the receiver, whichever comes first,
 * and on one P, handing the M back and forth, it can be the sender every
 * time (seen once in a loaded CI run). */
static void check_round_trip_report(void)
{
    check_report(" GoBlockRecv ", " GoBlockSend ");
}

/* The report children's recording: ROUNDS round trips with a ponger,
 * which the channels (leaked: the child ends) keep parked after. */
static void fr_rounds(void)
{
    struct pair *pr = malloc(sizeof *pr);
    pr->ch[0] = gmp_chan_make(sizeof(int), 0);
    pr->ch[1] = gmp_chan_make(sizeof(int), 0);
    atomic_store(&pr->out, 0);
    gmp_go(ponger, pr);
    for (int i = 0; i < ROUNDS; i++) {
        int v = i;
        gmp_chan_send(pr->ch[0], &v);
        gmp_chan_recv(pr->ch[1], &v);
    }
}

/* A report child's runtime: GMP_FLIGHTREC into rep_path, procs 2, fn as
 * main; exits with gmp_main's verdict (0, or 10). */
static void fr_child_run(void (*fn)(void *), int dump_on_sigquit)
{
    setenv("GMP_FLIGHTREC", rep_path, 1);
    setenv("GMP_FLIGHTREC_SIZE", "262144", 1);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    cfg.dump_on_sigquit = dump_on_sigquit;
    _exit(gmp_main(fn, NULL, &cfg) == 0 ? 0 : 10);
}

static void fr_dl_main(void *arg)
{
    (void)arg;
    fr_rounds();
    gmp_chan_t *c = gmp_chan_make(sizeof(int), 0);
    int v;
    gmp_chan_recv(c, &v);           /* nobody sends: deadlock */
}

static void fr_dl_child(void *arg)
{
    (void)arg;
    fr_child_run(fr_dl_main, 0);
}

/* The deadlock report writes the window to GMP_FLIGHTREC's file, which
 * parses and ends with the main goroutine blocking. */
static void test_flightrec_written_by_deadlock_report(void **state)
{
    (void)state;
#if defined(H_TSAN) || GMP_TEST_EMULATED
    skip();                         /* no deadlock report there (test_deadlock) */
#endif
    snprintf(rep_path, sizeof rep_path, "/tmp/gmprt-frdl-%d", (int)getpid());
    struct h_child res;
    assert_int_equal(h_fork(fr_dl_child, NULL, &res), 0);
    h_assert_killed_by(&res, SIGABRT);
    assert_non_null(strstr(res.err, "deadlock!"));
    assert_non_null(strstr(res.err, "flight recorder written to"));
    check_round_trip_report();
}

static void fr_spin(void *arg)
{
    gmp_chan_t *done_ch = arg;
    gmp_preempt_disable();
    int64_t end = h_now() + 100 * 1000000LL;    /* 5 x stall=20 */
    while (h_now() < end)
        ;
    gmp_preempt_enable();
    int v = 0;
    gmp_chan_send(done_ch, &v);
}

static void fr_stall_main(void *arg)
{
    (void)arg;
    fr_rounds();
    gmp_chan_t *d = gmp_chan_make(sizeof(int), 1);
    gmp_go(fr_spin, d);
    int v;
    gmp_chan_recv(d, &v);
}

static void fr_stall_child(void *arg)
{
    (void)arg;
    setenv("GMP_DEBUG", "stall=20", 1);
    fr_child_run(fr_stall_main, 0);
}

/* A stall report writes the window too, while the other P runs: Go's
 * parser reads it (best effort there, docs/debugging.md: this workload
 * has nothing else recording at the report). */
static void test_flightrec_written_by_stall_report(void **state)
{
    (void)state;
    snprintf(rep_path, sizeof rep_path, "/tmp/gmprt-frst-%d", (int)getpid());
    struct h_child res;
    assert_int_equal(h_fork(fr_stall_child, NULL, &res), 0);
    h_child_exited(&res, 0, 2);
    assert_non_null(strstr(res.err, "without a scheduling point"));
    assert_non_null(strstr(res.err, "flight recorder written to"));
    check_report(" GoStart ", NULL);
}

static void fr_quit_main(void *arg)
{
    (void)arg;
    fr_rounds();
    raise(SIGQUIT);                 /* this thread: its handler exits 2 */
}

static void fr_quit_child(void *arg)
{
    (void)arg;
    fr_child_run(fr_quit_main, 1);
}

/* The SIGQUIT dump writes the window from inside the signal handler,
 * while the world runs: it parses, with the round trips before it. */
static void test_flightrec_written_by_sigquit_dump(void **state)
{
    (void)state;
    snprintf(rep_path, sizeof rep_path, "/tmp/gmprt-frq-%d", (int)getpid());
    struct h_child res;
    assert_int_equal(h_fork(fr_quit_child, NULL, &res), 0);
    h_child_exited(&res, 2, 2);
    assert_non_null(strstr(res.err, "SIGQUIT: goroutine dump"));
    assert_non_null(strstr(res.err, "flight recorder written to"));
    check_round_trip_report();
}

int main(void)
{
    h_need_go();
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_flightrec_window_parses),
    };
    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_flightrec_written_by_deadlock_report),
        cmocka_unit_test(test_flightrec_written_by_stall_report),
        cmocka_unit_test(test_flightrec_written_by_sigquit_dump),
    };
    return cmocka_run_group_tests_name("flightrec reports", none, NULL, NULL)
         + cmocka_run_group_tests_name("flightrec procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("flightrec procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("flightrec procs=4", t, h_up_4, h_down);
}
