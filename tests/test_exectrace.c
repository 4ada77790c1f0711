/*
 * test_exectrace.c - gmp_trace_start/gmp_trace_stop: a trace Go's parser
 * accepts, with the events the workload must cause.
 *
 * Claims, each for a runtime with 1, 2 and 4 Ps: a mixed workload (spawns,
 * an unbuffered channel ping-pong, a select with a timeout, sleeps, a read
 * that waits in the poller, a system call long enough for sysmon to take
 * its P, a mutex, a CPU-bound goroutine preempted) traced from a plain
 * thread into a file is read by `go tool trace -d` (Go 1.19's
 * internal/trace, which replays every goroutine's and P's state and
 * refuses an impossible transition), and the parsed events hold each kind
 * the workload must cause. Also: starting twice is GMP_EBUSY, stopping
 * with no trace GMP_EPERM. The test is skipped (77) without `go`.
 */
#include "harness.h"

#include <sys/stat.h>

#include <sys/socket.h>

static _Atomic int spin_stop;
static _Atomic int64_t done;
static gmp_mutex_t mu = GMP_MUTEX_INIT;
static int64_t shared;

/* A CPU-bound loop: preempted by signal, or (H_NO_ASYNC, where the
 * signal is off) at the runtime call it makes every 1024 rounds. */
static void spinner(void *arg)
{
    (void)arg;
    for (int64_t n = 0; !atomic_load_explicit(&spin_stop,
                                              memory_order_relaxed); n++) {
#if H_NO_ASYNC
        if (n % 1024 == 0)
            (void)gmp_nanotime();
#else
        (void)n;
#endif
    }
    atomic_fetch_add(&done, 1);
}

/* Runs until the spinner has had to give way: at procs=1 it runs only
 * once the spinner was preempted. */
static void stopper(void *arg)
{
    (void)arg;
    gmp_sleep(30 * 1000000);
    atomic_store(&spin_stop, 1);
    atomic_fetch_add(&done, 1);
}

static void ponger(void *arg)
{
    gmp_chan_t **ch = arg;
    int v;
    while (gmp_chan_recv(ch[0], &v) == 0 && v >= 0)
        gmp_chan_send(ch[1], &v);
    atomic_fetch_add(&done, 1);
}

static void pinger(void *arg)
{
    gmp_chan_t *ch[2] = {gmp_chan_make(sizeof(int), 0),
                         gmp_chan_make(sizeof(int), 0)};
    gmp_go(ponger, ch);
    for (int i = 0; i < 200; i++) {
        int v = i;
        gmp_chan_send(ch[0], &v);
        gmp_chan_recv(ch[1], &v);
    }
    /* A select that times out, then one a sender completes. */
    int v = 0;
    gmp_case_t c = {ch[1], GMP_RECV, &v, 0};
    gmp_select(&c, 1, 1000000);
    /* One more round that blocks each side for certain: a try on an
     * unbuffered channel succeeds only against a parked peer, so the
     * ponger waited in its receive (GoBlockRecv), then in its send
     * (GoBlockSend). Then -1 tells it to stop. */
    v = 1000;
    while (gmp_chan_trysend(ch[0], &v) != 0)
        gmp_yield();
    while (gmp_chan_tryrecv(ch[1], &v) != 0)
        gmp_yield();
    v = -1;
    while (gmp_chan_trysend(ch[0], &v) != 0)
        gmp_yield();
    while (atomic_load(&done) < 1)  /* the ponger is out */
        gmp_yield();
    gmp_chan_free(ch[0]);
    gmp_chan_free(ch[1]);
    (void)arg;
    atomic_fetch_add(&done, 1);
}

static _Atomic int locking;

/* Holds mu from before the other locker tries it until 5 ms after: the
 * other spins at most 10 us, then parks (GoBlockSync). */
static void holder(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&mu);
    atomic_store(&locking, 1);
    while (atomic_load(&locking) != 2)
        gmp_yield();
    gmp_sleep(5 * 1000000);
    shared++;
    gmp_mutex_unlock(&mu);
    atomic_fetch_add(&done, 1);
}

static void locker(void *arg)
{
    (void)arg;
    while (atomic_load(&locking) != 1)
        gmp_yield();
    atomic_store(&locking, 2);
    gmp_mutex_lock(&mu);
    shared++;
    gmp_mutex_unlock(&mu);
    atomic_fetch_add(&done, 1);
}

static int sv[2];

static void reader(void *arg)
{
    (void)arg;
    char b;
    gmp_read(sv[0], &b, 1);         /* waits in the poller */
    atomic_fetch_add(&done, 1);
}

static void writer(void *arg)
{
    (void)arg;
    /* Only once the reader waits in the poller (linked there, so its
     * GoBlockNet is recorded whether or not it has switched out yet):
     * a write before it reads would leave it nothing to wait for. */
    gmp_stats_t st;
    do
        gmp_sleep(1000000);
    while (gmp_stats(&st) == 0 && st.netpoll_waiters == 0);
    gmp_write(sv[1], "x", 1);
    /* A system call long enough for sysmon to hand its P off. */
    gmp_syscall_enter();
    usleep(20000);
    gmp_syscall_exit();
    atomic_fetch_add(&done, 1);
}

static void leaf(void *arg)
{
    (void)arg;
    gmp_sleep(1000000);
    atomic_fetch_add(&done, 1);
}

static void test_trace_parses_with_every_kind(void **state)
{
    (void)state;
    char path[] = "/tmp/gmprt-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv),
                     0);
    atomic_store(&spin_stop, 0);
    atomic_store(&done, 0);
    assert_int_equal(gmp_trace_start(fd), 0);
    assert_int_equal(gmp_trace_start(fd), GMP_EBUSY);
    assert_int_equal(gmp_go(pinger, NULL), 0);
    assert_int_equal(gmp_go(spinner, NULL), 0);
    assert_int_equal(gmp_go(stopper, NULL), 0);
    atomic_store(&locking, 0);
    assert_int_equal(gmp_go(holder, NULL), 0);
    assert_int_equal(gmp_go(locker, NULL), 0);
    assert_int_equal(gmp_go(reader, NULL), 0);
    assert_int_equal(gmp_go(writer, NULL), 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(gmp_go(leaf, NULL), 0);
    /* ponger + pinger + spinner + stopper + holder, locker + reader + writer
     * + 50 leaves */
    assert_int_equal(h_wait(&done, 58), 0);
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(gmp_trace_stop(), 0);
    assert_int_equal(gmp_trace_stop(), GMP_EPERM);
    gmp_close(sv[0]);
    gmp_close(sv[1]);
    close(fd);

    char *out;
    int rc = h_go_trace_d(path, &out);
    if (rc != 0)
        fprintf(stderr, "go tool trace -d %s failed:\n%.4000s\n", path, out);
    assert_int_equal(rc, 0);
    static const char *const kinds[] = {
        "ProcStart", "ProcStop", "GoCreate", "GoStart", "GoEnd", "GoSched",
        "GoPreempt", "GoSleep", "GoBlockSend", "GoBlockRecv",
        "GoBlockSelect", "GoBlockSync", "GoBlockNet", "GoUnblock",
        "GoSysCall", "GoSysBlock",
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, " %s ", kinds[i]);
        if (!strstr(out, pat))
            fprintf(stderr, "no %s event in %s\n", kinds[i], path);
        assert_non_null(strstr(out, pat));
    }
    /* Each GoCreate names a stack, which `go tool trace` requires: the
     * goroutine's start function, by address. */
    char want[64];
    snprintf(want, sizeof want, " stack=%llu\n",
             (unsigned long long)(uintptr_t)leaf);
    int leaves = 0;
    for (char *l = strstr(out, " GoCreate "); l;
         l = strstr(l + 1, " GoCreate ")) {
        char *eol = strchr(l, '\n');
        assert_non_null(eol);
        assert_null(memmem(l, (size_t)(eol - l), " stack=0\n", 9));
        if (!strncmp(eol - (strlen(want) - 1), want, strlen(want) - 1))
            leaves++;
    }
    assert_true(leaves >= 50);
    free(out);
    /* And the stack table names it, though it is static (no dynamic
     * symbol for dladdr): the trace's EvString holds its length, 4, and
     * the name. A static binary has no dladdr; there the string is the
     * function's address. */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    char *raw = malloc((size_t)st.st_size);
    FILE *tf = fopen(path, "rb");
    assert_non_null(raw);
    assert_non_null(tf);
    size_t len = fread(raw, 1, (size_t)st.st_size, tf);
    fclose(tf);
    assert_int_equal(len, (size_t)st.st_size);
#if H_STATIC
    char addr[32];
    int wn = snprintf(addr, sizeof addr, "%#lx", (unsigned long)(uintptr_t)leaf);
    assert_non_null(memmem(raw, len, addr, (size_t)wn));
#else
    assert_non_null(memmem(raw, len, "\x04leaf", 5));
#endif
    free(raw);
    unlink(path);
}

int main(void)
{
    h_need_go();
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_trace_parses_with_every_kind),
    };
    return cmocka_run_group_tests_name("exectrace procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("exectrace procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("exectrace procs=4", t, h_up_4, h_down);
}
