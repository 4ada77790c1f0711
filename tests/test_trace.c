/*
 * test_trace.c - introspection: gmp_stats, the schedtrace lines, gmp_dump
 * and the dump on SIGQUIT.
 *
 * Claims:
 *   - after a known workload the counters add up: goroutines created,
 *     system calls, live and runnable back to zero once quiet; a P handed
 *     off from a blocked call and a preempted hog are counted; a reader
 *     parked on a pipe is a poller waiter until it is woken;
 *   - GMP_DEBUG=schedtrace=N prints lines in Go's shape, one per period,
 *     with the right gomaxprocs and one run-queue length per P; with
 *     scheddetail=1 one line per P and a line for a parked goroutine;
 *   - gmp_dump lists a goroutine parked on a channel or a mutex with its
 *     wait reason, a backtrace line and its start function and argument;
 *     made while goroutines switch, every entry is whole (and its reads
 *     of their stacks are no sanitizer report);
 *   - with dump_on_sigquit, SIGQUIT writes the dump and exits with 2,
 *     also while goroutines are being made (and, under TSan, without a
 *     race report: the dump takes no lock);
 *   - gmp_metrics counts goroutines by state (parked receivers are
 *     waiting, a goroutine in a bracket is in a syscall); with
 *     sched_metrics, the time inside brackets covers what a goroutine
 *     measured inside its own, every goroutine's first start is in the
 *     latency histogram, and one kept runnable 5 ms behind goroutines
 *     that hold every P lands in a bucket of 4 ms or more; without it,
 *     nothing timed is recorded;
 *   - bad input and no runtime are errors, never a crash.
 * The test binary exports its symbols (ENABLE_EXPORTS) so that dladdr
 * names the start functions, which are therefore not static.
 */
#include "harness.h"

#include <pthread.h>

/* ---- Helpers -------------------------------------------------------------- */

static gmp_stats_t stats(void)
{
    gmp_stats_t st;
    assert_int_equal(gmp_stats(&st), 0);
    return st;
}

/* gmp_dump's output, NUL-terminated, malloc'd. (Through a temporary
 * file: gcc 12 takes open_memstream's buffer for a dangling local.) */
static char *dump_text(void)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    gmp_dump(f);
    long len = ftell(f);
    assert_true(len >= 0);
    char *text = malloc((size_t)len + 1);
    assert_non_null(text);
    rewind(f);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = '\0';
    fclose(f);
    return text;
}

struct gwait {
    uint64_t    id;
    const char *reason;
};

/* gmp_dump shows goroutine id waiting for reason. */
static bool dump_shows(void *arg)
{
    struct gwait *w = arg;
    char *text = dump_text();
    bool ok = h_has_gline(text, (unsigned long long)w->id, w->reason);
    free(text);
    return ok;
}

/* ---- Counters --------------------------------------------------------------- */

#define WORK_GS    H_SCALE(1000)
#define WORK_CALLS 10

static _Atomic int64_t work_done;

void trace_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < WORK_CALLS; i++) {
        gmp_syscall_enter();
        (void)getppid();
        gmp_syscall_exit();
    }
    atomic_fetch_add(&work_done, 1);
}

void trace_spawner(void *arg)
{
    (void)arg;
    for (int i = 0; i < WORK_GS; i++)
        G_CHECK(gmp_go(trace_worker, NULL) == 0);
    atomic_fetch_add(&work_done, 1);
}

/* WORK_GS goroutines from the test thread and WORK_GS from a goroutine,
 * each with WORK_CALLS brackets: created, syscalls, live, runnable. */
static void test_stats_count_a_known_workload(void **state)
{
    (void)state;
    bad_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_stats_t a = stats();
    assert_int_equal(a.goroutines_live, 0);
    assert_int_equal(a.procs, (uint64_t)gmp_procs());

    atomic_store(&work_done, 0);
    for (int i = 0; i < WORK_GS; i++)
        assert_int_equal(gmp_go(trace_worker, NULL), 0);
    assert_int_equal(gmp_go(trace_spawner, NULL), 0);
    assert_int_equal(h_wait(&work_done, 2 * WORK_GS + 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();

    gmp_stats_t b = stats();
    assert_int_equal(b.goroutines_created - a.goroutines_created,
                     2 * WORK_GS + 1);
    assert_int_equal(b.syscalls - a.syscalls, 2 * WORK_GS * WORK_CALLS);
    assert_int_equal(b.goroutines_live, 0);
    assert_int_equal(b.goroutines_runnable, 0);
    assert_int_equal(b.global_runq, 0);
    assert_true(b.steals >= a.steals);
    assert_true(b.preemptions >= a.preemptions);
    assert_true(b.threads >= 1);
    assert_true(b.idle_threads <= b.threads);
    assert_true(b.idle_procs <= b.procs);
    assert_true(b.spinning_threads <= b.threads);
}

/* One reader per P blocks in a bracketed read, so every P sits in a
 * system call; a goroutine that sets a flag can only run once sysmon
 * hands a P off. */
static int handoff_pipe[2];
static _Atomic int64_t handoff_ran, handoff_readers;

void trace_blocked_reader(void *arg)
{
    (void)arg;
    char c;
    atomic_fetch_add(&handoff_readers, 1);
    gmp_syscall_enter();
    ssize_t r = read(handoff_pipe[0], &c, 1);
    gmp_syscall_exit();
    G_CHECK(r == 1);
}

void trace_flagger(void *arg)
{
    (void)arg;
    atomic_fetch_add(&handoff_ran, 1);
}

static void test_stats_count_handoffs(void **state)
{
    bad_reset();
    int procs = ((struct h_env *)*state)->procs;
    assert_int_equal(pipe(handoff_pipe), 0);
    atomic_store(&handoff_ran, 0);
    atomic_store(&handoff_readers, 0);
    gmp_stats_t a = stats();
    for (int i = 0; i < procs; i++)
        assert_int_equal(gmp_go(trace_blocked_reader, NULL), 0);
    assert_int_equal(h_wait(&handoff_readers, procs), 0);
    assert_int_equal(gmp_go(trace_flagger, NULL), 0);
    assert_int_equal(h_wait(&handoff_ran, 1), 0);
    assert_int_equal(write(handoff_pipe[1], "xxxxxxxx", (size_t)procs),
                     procs);
    assert_int_equal(h_wait_quiet(), 0);
    close(handoff_pipe[0]);
    close(handoff_pipe[1]);
    ASSERT_NO_BAD();
    /* Every P was in a read or about to enter one (a reader counts
     * itself before its bracket and keeps its P until then), and the
     * flagger waited on a queue: only a handoff let it run. */
    gmp_stats_t b = stats();
    assert_int_equal(b.syscalls - a.syscalls, (uint64_t)procs);
    assert_true(b.handoffs - a.handoffs >= 1);
}

/* Hogs, one per P, that call the runtime only through gmp_sleep(0) (a
 * preemption point that yields only when sysmon has marked the P), until
 * a goroutine behind them runs: only a preemption lets it. Cooperative,
 * so that the count holds where signals are off (TSan, valgrind). */
static _Atomic int hog_stop;
static _Atomic int64_t hogs_running, hogs_done;

void trace_hog(void *arg)
{
    (void)arg;
    atomic_fetch_add(&hogs_running, 1);
    while (!atomic_load_explicit(&hog_stop, memory_order_relaxed))
        gmp_sleep(0);
    atomic_fetch_add(&hogs_done, 1);
}

void trace_stopper(void *arg)
{
    (void)arg;
    atomic_store(&hog_stop, 1);
}

static void test_stats_count_preemptions(void **state)
{
    int procs = ((struct h_env *)*state)->procs;
    atomic_store(&hog_stop, 0);
    atomic_store(&hogs_running, 0);
    atomic_store(&hogs_done, 0);
    gmp_stats_t a = stats();
    for (int i = 0; i < procs; i++)
        assert_int_equal(gmp_go(trace_hog, NULL), 0);
    assert_int_equal(h_wait(&hogs_running, procs), 0);
    assert_int_equal(gmp_go(trace_stopper, NULL), 0);
    assert_int_equal(h_wait(&hogs_done, procs), 0);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_stats_t b = stats();
    assert_true(b.preemptions - a.preemptions >= 1);
}

static int waiter_pipe[2];
static _Atomic int64_t waiter_done;

void trace_pipe_reader(void *arg)
{
    (void)arg;
    char c;
    G_CHECK(gmp_read(waiter_pipe[0], &c, 1) == 1);
    atomic_fetch_add(&waiter_done, 1);
}

static bool one_waiter(void *arg)
{
    (void)arg;
    return stats().netpoll_waiters == 1;
}

/* The poll that woke the reader counts it until it has queued it, and
 * the reader may finish first (src/netpoll.c). */
static bool no_waiter(void *arg)
{
    (void)arg;
    return stats().netpoll_waiters == 0;
}

static void test_stats_count_poller_waiters(void **state)
{
    (void)state;
    bad_reset();
    assert_int_equal(pipe(waiter_pipe), 0);
    atomic_store(&waiter_done, 0);
    assert_int_equal(stats().netpoll_waiters, 0);
    assert_int_equal(gmp_go(trace_pipe_reader, NULL), 0);
    assert_int_equal(h_wait_until(one_waiter, NULL, "one poller waiter"), 0);
    assert_int_equal(write(waiter_pipe[1], "x", 1), 1);
    assert_int_equal(h_wait(&waiter_done, 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(h_wait_until(no_waiter, NULL, "no poller waiter"), 0);
    assert_int_equal(gmp_close(waiter_pipe[0]), 0);
    close(waiter_pipe[1]);
    ASSERT_NO_BAD();
}

/* ---- gmp_dump ------------------------------------------------------------- */

static gmp_chan_t *dump_ch;
static gmp_mutex_t dump_mu = GMP_MUTEX_INIT;
static _Atomic int64_t dump_ids[2], dump_done;

void trace_parked_receiver(void *arg)
{
    (void)arg;
    atomic_store(&dump_ids[0], (int64_t)gmp_id());
    int v;
    G_CHECK(gmp_chan_recv(dump_ch, &v) == 0 && v == 7);
    atomic_fetch_add(&dump_done, 1);
}

void trace_parked_locker(void *arg)
{
    (void)arg;
    atomic_store(&dump_ids[1], (int64_t)gmp_id());
    gmp_mutex_lock(&dump_mu);
    gmp_mutex_unlock(&dump_mu);
    atomic_fetch_add(&dump_done, 1);
}

/* The lines of goroutine id's entry, from its header to its blank line. */
static const char *entry_of(const char *text, uint64_t id)
{
    char head[64];
    snprintf(head, sizeof head, "goroutine %llu [",
             (unsigned long long)id);
    const char *p = strstr(text, head);
    assert_non_null(p);
    return p;
}

static void test_dump_lists_parked_goroutines(void **state)
{
    (void)state;
    bad_reset();
    dump_ch = gmp_chan_make(sizeof(int), 0);
    assert_non_null(dump_ch);
    atomic_store(&dump_done, 0);
    atomic_store(&dump_ids[0], 0);
    atomic_store(&dump_ids[1], 0);
    gmp_mutex_lock(&dump_mu);
    assert_int_equal(gmp_go(trace_parked_receiver, (void *)(uintptr_t)42),
                     0);
    assert_int_equal(gmp_go(trace_parked_locker, (void *)(uintptr_t)43), 0);
    assert_int_equal(h_wait(&dump_ids[0], 1), 0);
    assert_int_equal(h_wait(&dump_ids[1], 1), 0);
    struct gwait w0 = {(uint64_t)atomic_load(&dump_ids[0]), "chan receive"};
    struct gwait w1 = {(uint64_t)atomic_load(&dump_ids[1]),
                       "sync.Mutex.Lock"};
    assert_int_equal(h_wait_until(dump_shows, &w0, "receiver parked"), 0);
    assert_int_equal(h_wait_until(dump_shows, &w1, "locker parked"), 0);

    char *text = dump_text();
    const char *e0 = entry_of(text, w0.id);
    const char *end0 = strstr(e0, "\n\n");
    assert_non_null(end0);
    char want[160];
    snprintf(want, sizeof want, "%s0x2a)",
             H_STARTED_AS(trace_parked_receiver).s);
    const char *start0 = strstr(e0, want);
    assert_non_null(start0);
    assert_true(start0 < end0);
    /* At least one frame between the header and the start line. */
    const char *frame = strstr(e0, ":\n\t");
    assert_non_null(frame);
    assert_true(frame < start0);
    const char *e1 = entry_of(text, w1.id);
    snprintf(want, sizeof want, "%s0x2b)",
             H_STARTED_AS(trace_parked_locker).s);
    const char *start1 = strstr(e1, want);
    assert_non_null(start1);
    assert_true(start1 < strstr(e1, "\n\n"));
    free(text);

    int v = 7;
    assert_int_equal(gmp_chan_send(dump_ch, &v), 0);
    gmp_mutex_unlock(&dump_mu);
    assert_int_equal(h_wait(&dump_done, 2), 0);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(dump_ch);
    ASSERT_NO_BAD();
}

/* gmp_dump from a plain thread while pairs of goroutines keep waking each
 * other over channels: every entry stays whole, and reading the stacks of
 * goroutines that run meanwhile is no sanitizer report (a race for TSan,
 * a read of a frame's redzone for ASan). The pairs go on until the test
 * has made all its dumps. */
#define SW_PAIRS 4
#define SW_DUMPS 20

static _Atomic int sw_stop;
static _Atomic int64_t sw_done;

void trace_pinger(void *arg)
{
    gmp_chan_t **ch = arg;
    int v = 0;
    /* Relaxed: a stop flag, which orders nothing else. */
    while (!atomic_load_explicit(&sw_stop, memory_order_relaxed)) {
        G_CHECK(gmp_chan_send(ch[0], &v) == 0);
        G_CHECK(gmp_chan_recv(ch[1], &v) == 0);
    }
    v = -1;
    G_CHECK(gmp_chan_send(ch[0], &v) == 0);
    atomic_fetch_add(&sw_done, 1);
}

void trace_ponger(void *arg)
{
    gmp_chan_t **ch = arg;
    int v;
    for (;;) {
        G_CHECK(gmp_chan_recv(ch[0], &v) == 0);
        if (v < 0)
            break;
        v++;
        G_CHECK(gmp_chan_send(ch[1], &v) == 0);
    }
    atomic_fetch_add(&sw_done, 1);
}

/* Every "goroutine N [" header in text is followed by its "started as "
 * line before the blank line that ends its entry. Returns the entries
 * started as trace_pinger. */
static int check_entries(const char *text)
{
    int pingers = 0;
    struct h_started pinger = H_STARTED_AS(trace_pinger);
    for (const char *e = strstr(text, "goroutine "); e;
         e = strstr(e + 1, "\ngoroutine ")) {
        const char *end = strstr(e, "\n\n");
        assert_non_null(end);
        const char *start = strstr(e, "\nstarted as ");
        assert_non_null(start);
        assert_true(start < end);
        if (strncmp(start + 1, pinger.s, strlen(pinger.s)) == 0)
            pingers++;
    }
    return pingers;
}

static void test_dump_while_goroutines_switch(void **state)
{
    (void)state;
    bad_reset();
    gmp_chan_t *ch[SW_PAIRS][2];
    atomic_store(&sw_stop, 0);
    atomic_store(&sw_done, 0);
    for (int i = 0; i < SW_PAIRS; i++) {
        for (int j = 0; j < 2; j++)
            assert_non_null(ch[i][j] = gmp_chan_make(sizeof(int), 0));
        assert_int_equal(gmp_go(trace_pinger, ch[i]), 0);
        assert_int_equal(gmp_go(trace_ponger, ch[i]), 0);
    }
    for (int d = 0; d < SW_DUMPS; d++) {
        char *text = dump_text();
        /* The pingers run until the stop below: each dump lists them. */
        assert_int_equal(check_entries(text), SW_PAIRS);
        free(text);
    }
    atomic_store(&sw_stop, 1);
    assert_int_equal(h_wait(&sw_done, 2 * SW_PAIRS), 0);
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
    for (int i = 0; i < SW_PAIRS; i++)
        for (int j = 0; j < 2; j++)
            gmp_chan_free(ch[i][j]);
}

/* ---- schedtrace and SIGQUIT, in forked children --------------------------- */

struct trace_case {
    const char *debug;
    int         procs;
};

static gmp_chan_t *child_ch;

void trace_child_receiver(void *arg)
{
    (void)arg;
    printf("parked %llu\n", (unsigned long long)gmp_id());
    fflush(stdout);
    int v;
    gmp_chan_recv(child_ch, &v);
}

/* main parks a receiver, lets 60 ms of reports go by, then releases it. */
static void trace_child_main(void *arg)
{
    (void)arg;
    child_ch = gmp_chan_make(sizeof(int), 0);
    gmp_go(trace_child_receiver, NULL);
    for (int i = 0; i < 6; i++) {
        gmp_sleep(10 * MS);
        gmp_yield();
    }
    int v = 1;
    gmp_chan_send(child_ch, &v);
    gmp_sleep(10 * MS);
}

static void trace_child(void *arg)
{
    struct trace_case *c = arg;
    setenv("GMP_DEBUG", c->debug, 1);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = c->procs;
    _exit(gmp_main(trace_child_main, NULL, &cfg) == 0 ? 0 : 10);
}

/* Parses one SCHED line at p; returns its ms, or -1. */
static long sched_line(const char *p, int procs, bool detail)
{
    long ms;
    int gomaxprocs, idle, threads, spinning, idlethreads, runq, len = 0;
    if (sscanf(p, "SCHED %ldms: gomaxprocs=%d idleprocs=%d threads=%d "
                  "spinningthreads=%d idlethreads=%d runqueue=%d%n",
               &ms, &gomaxprocs, &idle, &threads, &spinning, &idlethreads,
               &runq, &len) != 7)
        return -1;
    if (gomaxprocs != procs || idle < 0 || idle > procs || threads < 0 ||
        spinning < 0 || idlethreads < 0 || idlethreads > threads || runq < 0)
        return -1;
    p += len;
    if (detail)
        return *p == '\n' ? ms : -1;
    if (*p++ != ' ' || *p++ != '[')
        return -1;
    for (int i = 0; i < procs; i++) {
        int n, l = 0;
        if (sscanf(p, i ? " %d%n" : "%d%n", &n, &l) != 1 || n < 0)
            return -1;
        p += l;
    }
    return p[0] == ']' && p[1] == '\n' ? ms : -1;
}

static void test_schedtrace_lines_parse(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        struct trace_case c = {"schedtrace=5", procs};
        struct h_child res;
        assert_int_equal(h_fork(trace_child, &c, &res), 0);
        h_child_exited(&res, 0, procs);
        int lines = 0;
        long last = -1;
        for (const char *p = res.err; (p = strstr(p, "SCHED ")) != NULL;
             p++) {
            long ms = sched_line(p, procs, false);
            if (ms < 0)
                print_error("procs=%d: bad line: %.*s\n", procs,
                            (int)strcspn(p, "\n"), p);
            assert_true(ms >= 0);
            assert_true(ms >= last);
            last = ms;
            lines++;
        }
        print_message("procs=%d: %d SCHED lines\n", procs, lines);
        assert_true(lines >= 3);
    }
}

static void test_scheddetail_lists_ps_and_a_parked_goroutine(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        struct trace_case c = {"schedtrace=5,scheddetail=1", procs};
        struct h_child res;
        assert_int_equal(h_fork(trace_child, &c, &res), 0);
        h_child_exited(&res, 0, procs);
        unsigned long long id = 0;
        assert_int_equal(sscanf(res.out, "parked %llu", &id), 1);
        char gline[96];
        snprintf(gline, sizeof gline, "  G%llu: status=waiting(chan receive)",
                 id);
        assert_true(h_has_line(res.err, gline));
        /* Every whole report: procs P lines right after the SCHED line,
         * then M lines. */
        int reports = 0;
        for (const char *p = res.err; (p = strstr(p, "SCHED ")) != NULL;
             p++) {
            assert_true(sched_line(p, procs, true) >= 0);
            const char *q = strchr(p, '\n');
            if (!q)
                break;
            for (int i = 0; i < procs; i++) {
                char want[32];
                snprintf(want, sizeof want, "\n  P%d: status=", i);
                if (q[0] == '\0')
                    break;          /* the capture was cut here */
                assert_int_equal(strncmp(q, want, strlen(want)), 0);
                q = strchr(q + 1, '\n');
                if (!q)
                    break;
            }
            if (q && q[0] && strncmp(q, "\n  M", 4) == 0)
                reports++;
        }
        print_message("procs=%d: %d whole reports\n", procs, reports);
        assert_true(reports >= 1);
    }
}

/* Whether gmp_dump shows a goroutine waiting on a channel receive. In
 * the child, on a goroutine: no cmocka assertion here. */
static bool receiver_parked(void)
{
    char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    if (!f)
        return false;
    gmp_dump(f);
    long n = ftell(f);
    fclose(f);
    buf[n < 0 ? 0 : n < (long)sizeof buf ? n : (long)sizeof buf - 1] = '\0';
    return strstr(buf, " [chan receive") != NULL;
}

static void quit_main(void *arg)
{
    (void)arg;
    child_ch = gmp_chan_make(sizeof(int), 0);
    gmp_go(trace_child_receiver, NULL);
    while (!receiver_parked())
        gmp_yield();
    raise(SIGQUIT);
}

static void quit_child(void *arg)
{
    (void)arg;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    cfg.dump_on_sigquit = 1;
    _exit(gmp_main(quit_main, NULL, &cfg) == 0 ? 0 : 10);
}

static void test_sigquit_dumps_and_exits_2(void **state)
{
    (void)state;
    struct h_child res;
    assert_int_equal(h_fork(quit_child, NULL, &res), 0);
    h_child_exited(&res, 2, 2);
    unsigned long long id = 0;
    assert_int_equal(sscanf(res.out, "parked %llu", &id), 1);
    /* main raised SIGQUIT once the receiver was parked. */
    assert_true(h_has_gline(res.err, id, "chan receive"));
    char head[64];
    snprintf(head, sizeof head, "goroutine %llu [", id);
    const char *e = strstr(res.err, head);
    if (!e)
        print_error("no entry for goroutine %llu:\n%s\n", id, res.err);
    assert_non_null(e);
    assert_non_null(strstr(e, H_STARTED_AS(trace_child_receiver).s));
}

/* SIGQUIT while another goroutine keeps making goroutines, so the dump
 * (which takes no lock) walks the descriptor slabs as they are carved.
 * The creator makes QC_FIRST, waits for main's go-ahead, then makes the
 * rest without synchronising with anyone; a plain thread, started after
 * the go-ahead, raises SIGQUIT once it sees QC_RAISE made (relaxed loads:
 * it learns nothing else of the creator). So under TSan the dump's reads
 * race with the carving unless they are atomic. */
#define QC_FIRST 600
#define QC_RAISE 1200
#define QC_TOTAL 2000

static _Atomic int qc_made;
static gmp_chan_t *qc_go, *qc_never;

void trace_child_leaf(void *arg)
{
    (void)arg;
    int v;
    gmp_chan_recv(qc_never, &v);
}

void trace_child_creator(void *arg)
{
    (void)arg;
    int v;
    for (int i = 0; i < QC_TOTAL; i++) {
        if (i == QC_FIRST)
            gmp_chan_recv(qc_go, &v);
        if (gmp_go(trace_child_leaf, NULL) != 0)
            _exit(11);
        /* Release: main's acquire sees the first QC_FIRST made. */
        atomic_fetch_add_explicit(&qc_made, 1, memory_order_release);
    }
    gmp_chan_recv(qc_never, &v);
}

static void *qc_raiser(void *arg)
{
    (void)arg;
    /* Relaxed: only a count; no ordering with the creator wanted. */
    while (atomic_load_explicit(&qc_made, memory_order_relaxed) < QC_RAISE)
        sched_yield();
    raise(SIGQUIT);
    return NULL;
}

static void qc_main(void *arg)
{
    (void)arg;
    qc_go = gmp_chan_make(sizeof(int), 0);
    qc_never = gmp_chan_make(sizeof(int), 0);
    if (!qc_go || !qc_never || gmp_go(trace_child_creator, NULL) != 0)
        _exit(12);
    /* Acquire: pairs with the creator's release. */
    while (atomic_load_explicit(&qc_made, memory_order_acquire) < QC_FIRST)
        gmp_yield();
    pthread_t th;
    if (pthread_create(&th, NULL, qc_raiser, NULL) != 0)
        _exit(13);
    int v = 1;
    gmp_chan_send(qc_go, &v);
    gmp_select(NULL, 0, GMP_FOREVER);
}

static void qc_child(void *arg)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = (int)(intptr_t)arg;
    cfg.dump_on_sigquit = 1;
    _exit(gmp_main(qc_main, NULL, &cfg) == 0 ? 0 : 10);
}

static void test_sigquit_while_goroutines_are_made(void **state)
{
    (void)state;
    for (int procs = 1; procs <= 4; procs *= 2) {
        struct h_child res;
        assert_int_equal(h_fork(qc_child, (void *)(intptr_t)procs, &res), 0);
        h_child_exited(&res, 2, procs);
        if (strstr(res.err, "ThreadSanitizer"))
            print_error("procs=%d:\n%s\n", procs, res.err);
        assert_null(strstr(res.err, "ThreadSanitizer"));
        /* The report is cut at the harness's buffer: the creator and some
         * leaves come early, from the first slab's first carves. */
        assert_non_null(strstr(res.err,
                               H_STARTED_AS(trace_child_creator).s));
        assert_non_null(strstr(res.err, H_STARTED_AS(trace_child_leaf).s));
    }
}

/* ---- gmp_metrics ----------------------------------------------------------- */

static gmp_metrics_t metrics(void)
{
    gmp_metrics_t mt;
    assert_int_equal(gmp_metrics(&mt), 0);
    return mt;
}

static uint64_t latency_from(const gmp_metrics_t *mt, int bucket)
{
    uint64_t n = 0;
    for (int b = bucket; b < GMP_METRICS_LATENCY_BUCKETS; b++)
        n += mt->sched_latency[b];
    return n;
}

#define PARKED_GS H_SCALE(200)

static gmp_chan_t *mt_ch;
static _Atomic int64_t mt_parked, mt_done;

void metrics_receiver(void *arg)
{
    (void)arg;
    int v;
    atomic_fetch_add(&mt_parked, 1);
    G_CHECK(gmp_chan_recv(mt_ch, &v) == GMP_ECLOSED);
    atomic_fetch_add(&mt_done, 1);
}

static bool parked_waiting(void *arg)
{
    (void)arg;
    return metrics().goroutines_waiting >= PARKED_GS;
}

/* Receivers parked on a channel nobody sends on are counted waiting. */
static void test_metrics_count_parked_goroutines(void **state)
{
    (void)state;
    bad_reset();
    assert_int_equal(h_wait_quiet(), 0);
    mt_ch = gmp_chan_make(sizeof(int), 0);
    assert_non_null(mt_ch);
    atomic_store(&mt_parked, 0);
    atomic_store(&mt_done, 0);
    for (int i = 0; i < PARKED_GS; i++)
        assert_int_equal(gmp_go(metrics_receiver, NULL), 0);
    assert_int_equal(h_wait(&mt_parked, PARKED_GS), 0);
    /* Counted: they may still be on their way into the park. */
    assert_int_equal(h_wait_until(parked_waiting, NULL,
                                  "goroutines_waiting >= PARKED_GS"), 0);
    gmp_metrics_t m = metrics();
    assert_true(m.goroutines_waiting + m.goroutines_runnable +
                    m.goroutines_running + m.goroutines_syscall >=
                PARKED_GS);
    gmp_chan_close(mt_ch);
    assert_int_equal(h_wait(&mt_done, PARKED_GS), 0);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(mt_ch);
    ASSERT_NO_BAD();
    m = metrics();
    assert_int_equal(m.goroutines_waiting, 0);
    assert_int_equal(m.goroutines_runnable, 0);
    assert_int_equal(m.goroutines_running, 0);
}

static int sc_pipe[2];
static _Atomic int64_t sc_inside, sc_inner_ns, sc_done;

void metrics_syscaller(void *arg)
{
    (void)arg;
    char c;
    gmp_syscall_enter();
    int64_t t0 = h_now();
    atomic_store(&sc_inside, 1);
    ssize_t r = read(sc_pipe[0], &c, 1);
    int64_t t1 = h_now();
    gmp_syscall_exit();
    G_CHECK(r == 1);
    atomic_store(&sc_inner_ns, t1 - t0);
    atomic_store(&sc_done, 1);
}

static bool one_in_syscall(void *arg)
{
    (void)arg;
    return metrics().goroutines_syscall >= 1;
}

/* A goroutine blocked inside a bracket is in a syscall, and with timed
 * metrics the time inside brackets grows by at least what it measured
 * between its enter and its exit. */
static void test_metrics_syscall_time_grows(void **state)
{
    (void)state;
    bad_reset();
    assert_int_equal(pipe(sc_pipe), 0);
    atomic_store(&sc_inside, 0);
    atomic_store(&sc_done, 0);
    gmp_metrics_t a = metrics();
    assert_true(a.flags & GMP_METRICS_TIMED);
    assert_int_equal(gmp_go(metrics_syscaller, NULL), 0);
    assert_int_equal(h_wait(&sc_inside, 1), 0);
    assert_int_equal(h_wait_until(one_in_syscall, NULL,
                                  "goroutines_syscall >= 1"), 0);
    assert_int_equal(write(sc_pipe[1], "x", 1), 1);
    assert_int_equal(h_wait(&sc_done, 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
    close(sc_pipe[0]);
    close(sc_pipe[1]);
    ASSERT_NO_BAD();
    gmp_metrics_t b = metrics();
    int64_t inner = atomic_load(&sc_inner_ns);
    assert_true(inner > 0);
    assert_true(b.syscall_ns - a.syscall_ns >= (uint64_t)inner);
}

/* Every goroutine's first start is counted, from its creation. */
static void test_metrics_latency_counts_starts(void **state)
{
    (void)state;
    bad_reset();
    assert_int_equal(h_wait_quiet(), 0);
    gmp_metrics_t a = metrics();
    atomic_store(&work_done, 0);
    for (int i = 0; i < WORK_GS; i++)
        assert_int_equal(gmp_go(trace_worker, NULL), 0);
    assert_int_equal(gmp_go(trace_spawner, NULL), 0);
    assert_int_equal(h_wait(&work_done, 2 * WORK_GS + 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
    gmp_metrics_t b = metrics();
    assert_true(b.sched_latency_count - a.sched_latency_count >=
                2 * WORK_GS + 1);
    uint64_t sum = 0;
    for (int i = 0; i < GMP_METRICS_LATENCY_BUCKETS; i++)
        sum += b.sched_latency[i];
    assert_int_equal(sum, b.sched_latency_count);
    assert_true(b.sched_latency_ns >= a.sched_latency_ns);
}

/* One holder per P, preemption off, wait until all hold a P; the last
 * to arrive creates a goroutine and sets the time they all release
 * theirs: LATE_NS later. The new one cannot start before then, and was
 * stamped runnable before the time was set. */
#define LATE_NS 5000000LL
#define LATE_BUCKET 22              /* [2^22 ns, ...) = 4.19 ms up */
static _Atomic int64_t late_holders, late_release, late_ran, late_done;
static _Atomic int late_procs;

void metrics_late(void *arg)
{
    (void)arg;
    atomic_fetch_add(&late_ran, 1);
}

void metrics_holder(void *arg)
{
    (void)arg;
    gmp_preempt_disable();
    int64_t n = atomic_fetch_add(&late_holders, 1) + 1;
    int64_t deadline = h_now() + H_DEADLINE_NS;
    while (atomic_load(&late_holders) < atomic_load(&late_procs) &&
           h_now() < deadline)
        ;
    if (n == atomic_load(&late_procs)) {
        G_CHECK(gmp_go(metrics_late, NULL) == 0);
        atomic_store(&late_release, h_now() + LATE_NS);
    }
    while (atomic_load(&late_release) == 0 && h_now() < deadline)
        ;
    while (h_now() < atomic_load(&late_release))
        ;
    gmp_preempt_enable();
    atomic_fetch_add(&late_done, 1);
}

static void test_metrics_latency_of_a_late_start(void **state)
{
    int procs = ((struct h_env *)*state)->procs;
    bad_reset();
    assert_int_equal(h_wait_quiet(), 0);
    atomic_store(&late_procs, procs);
    atomic_store(&late_holders, 0);
    atomic_store(&late_release, 0);
    atomic_store(&late_ran, 0);
    atomic_store(&late_done, 0);
    gmp_metrics_t a = metrics();
    for (int i = 0; i < procs; i++)
        assert_int_equal(gmp_go(metrics_holder, NULL), 0);
    assert_int_equal(h_wait(&late_done, procs), 0);
    assert_int_equal(h_wait(&late_ran, 1), 0);
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
    gmp_metrics_t b = metrics();
    assert_true(latency_from(&b, LATE_BUCKET) -
                    latency_from(&a, LATE_BUCKET) >= 1);
}

/* Without sched_metrics nothing timed is recorded. */
static void test_metrics_untimed_by_default(void **state)
{
    (void)state;
    assert_int_equal(gmp_go(trace_flagger, NULL), 0);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_metrics_t m = metrics();
    assert_int_equal(m.flags & GMP_METRICS_TIMED, 0);
    assert_int_equal(m.sched_latency_count, 0);
    assert_int_equal(m.syscall_ns, 0);
}

static int h_up_timed(void **state, int procs)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    cfg.sched_metrics = 1;
    return h_up_with(state, &cfg);
}
static int h_up_timed_1(void **state) { return h_up_timed(state, 1); }
static int h_up_timed_2(void **state) { return h_up_timed(state, 2); }
static int h_up_timed_4(void **state) { return h_up_timed(state, 4); }

/* ---- Bad input, no runtime ------------------------------------------------- */

static void test_no_runtime_and_bad_input(void **state)
{
    (void)state;
    gmp_stats_t st;
    memset(&st, 0xff, sizeof st);
    assert_int_equal(gmp_stats(&st), GMP_EPERM);
    gmp_metrics_t mt;
    memset(&mt, 0xff, sizeof mt);
    assert_int_equal(gmp_metrics(&mt), GMP_EPERM);
    assert_int_equal(mt.flags, 0);
    assert_int_equal(mt.reserved_[0], 0);
    assert_int_equal(gmp_metrics(NULL), GMP_EINVAL);
    assert_int_equal(st.goroutines_created, 0);
    assert_int_equal(st.procs, 0);
    assert_int_equal(gmp_stats(NULL), GMP_EINVAL);
    gmp_dump(NULL);
    char *text = dump_text();
    assert_non_null(strstr(text, "no runtime"));
    free(text);
}

static void test_stats_null_is_einval(void **state)
{
    (void)state;
    assert_int_equal(gmp_stats(NULL), GMP_EINVAL);
    gmp_dump(NULL);
}
/* ---- Labels and the host's description ------------------------------------ */

static _Atomic int64_t lb_id, lb_ok;
static gmp_chan_t *lb_ch;

static void lb_describe(uint64_t goid, const char *label,
                        void (*put)(void *w, const char *text), void *w,
                        void *ctx)
{
    char buf[96];
    snprintf(buf, sizeof buf, "\thost: goid=%llu label=%s ctx=%s\n",
             (unsigned long long)goid, label ? label : "-",
             (const char *)ctx);
    put(w, buf);
}

/* gmp_dump shows the labelled goroutine parked: its header, from the
 * start of a line. */
static char lb_head[64];

static bool lb_shows(void *arg)
{
    (void)arg;
    char *text = dump_text();
    const char *p = strstr(text, lb_head);
    bool ok = p && (p == text || p[-1] == '\n');
    free(text);
    return ok;
}

static void lb_goroutine(void *arg)
{
    (void)arg;
    gmp_set_label("worker-7");
    atomic_store(&lb_ok, gmp_label() != NULL &&
                             strcmp(gmp_label(), "worker-7") == 0);
    atomic_store(&lb_id, (int64_t)gmp_id());
    int v;
    gmp_chan_recv(lb_ch, &v);
}

/* A goroutine's label in its dump header, and the host's own lines for
 * it (the describe hook) before the blank line that ends its entry. */
static void test_dump_label_and_host_description(void **state)
{
    (void)state;
    assert_null(gmp_label());
    gmp_set_label("ignored");           /* not a goroutine: nothing */
    assert_null(gmp_label());
    for (int procs = 1; procs <= 4; procs *= 2) {
        gmp_config_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.procs = procs;
        cfg.describe = lb_describe;
        cfg.hook_ctx = "c1";
        assert_int_equal(gmp_init(&cfg), 0);
        lb_ch = gmp_chan_make(sizeof(int), 0);
        atomic_store(&lb_id, 0);
        assert_int_equal(gmp_go(lb_goroutine, NULL), 0);
        assert_int_equal(h_wait(&lb_id, 1), 0);
        assert_true(atomic_load(&lb_ok));
        unsigned long long id = (unsigned long long)atomic_load(&lb_id);
        snprintf(lb_head, sizeof lb_head,
                 "goroutine %llu \"worker-7\" [chan receive", id);
        assert_int_equal(h_wait_until(lb_shows, NULL, "labelled parked"), 0);
        char *text = dump_text();
        const char *e = strstr(text, lb_head);
        char host[96];
        snprintf(host, sizeof host,
                 "\thost: goid=%llu label=worker-7 ctx=c1\n", id);
        const char *h = strstr(e, host), *end = strstr(e, "\n\n");
        assert_non_null(h);
        assert_true(h < end);
        free(text);
        int v = 1;
        assert_int_equal(gmp_chan_send(lb_ch, &v), 0);
        assert_int_equal(gmp_shutdown(), 0);
        gmp_chan_free(lb_ch);
    }
}

int main(void)
{
    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_no_runtime_and_bad_input),
        cmocka_unit_test(test_dump_label_and_host_description),
        cmocka_unit_test(test_schedtrace_lines_parse),
        cmocka_unit_test(test_scheddetail_lists_ps_and_a_parked_goroutine),
        cmocka_unit_test(test_sigquit_dumps_and_exits_2),
        cmocka_unit_test(test_sigquit_while_goroutines_are_made),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_stats_null_is_einval),
        cmocka_unit_test(test_stats_count_a_known_workload),
        cmocka_unit_test(test_stats_count_handoffs),
        cmocka_unit_test(test_stats_count_preemptions),
        cmocka_unit_test(test_stats_count_poller_waiters),
        cmocka_unit_test(test_dump_lists_parked_goroutines),
        cmocka_unit_test(test_dump_while_goroutines_switch),
        cmocka_unit_test(test_metrics_count_parked_goroutines),
        cmocka_unit_test(test_metrics_untimed_by_default),
    };
    const struct CMUnitTest timed[] = {
        cmocka_unit_test(test_metrics_count_parked_goroutines),
        cmocka_unit_test(test_metrics_syscall_time_grows),
        cmocka_unit_test(test_metrics_latency_counts_starts),
        cmocka_unit_test(test_metrics_latency_of_a_late_start),
    };
    return cmocka_run_group_tests_name("trace no runtime", none, NULL, NULL)
         + cmocka_run_group_tests_name("trace procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("trace procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("trace procs=4", t, h_up_4, h_down)
         + cmocka_run_group_tests_name("metrics procs=1", timed, h_up_timed_1,
                                       h_down)
         + cmocka_run_group_tests_name("metrics procs=2", timed, h_up_timed_2,
                                       h_down)
         + cmocka_run_group_tests_name("metrics procs=4", timed, h_up_timed_4,
                                       h_down);
}
