/*
 * test_fault.c - the runtime when things go wrong around it: a goroutine
 * that polls a runtime call while signals cannot preempt it, a thread
 * that cannot be made, memory that cannot be had, descriptors that run
 * out while the runtime starts, a timeout too large to add to the clock,
 * and the open-file limit. Each failure must be a documented error code
 * or a loud fatal error, never a hang or a quietly different behaviour.
 *
 * Fault injection: the host's memory hooks (gmp_config_t) fail
 * allocations on demand, and this program defines pthread_create, which
 * the statically linked runtime then calls, to fail thread creation on
 * demand (not under TSan, whose own pthread_create that would replace).
 */
#include "harness.h"

#include <sys/resource.h>

#include "internal.h"

/* ---- Injected thread-creation failures ---------------------------------- */

/* create_pass calls go through, then create_fail calls fail with EAGAIN
 * (-1: every one). Seq_cst throughout: test scaffolding. */
static _Atomic int create_pass, create_fail;
static _Atomic int create_failed;

static void create_arm(int pass, int fail)
{
    atomic_store(&create_failed, 0);
    atomic_store(&create_pass, pass);
    atomic_store(&create_fail, fail);
}

#if !defined(H_TSAN)
#define H_CAN_FAIL_THREADS 1
int H_WRAP(pthread_create)(pthread_t *t, const pthread_attr_t *attr,
                           void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *,
                       void *(*)(void *), void *);
    if (!real)
        H_REAL(real, pthread_create);
    if (atomic_load(&create_fail) != 0) {
        if (atomic_load(&create_pass) > 0) {
            atomic_fetch_sub(&create_pass, 1);
        } else {
            if (atomic_load(&create_fail) > 0)
                atomic_fetch_sub(&create_fail, 1);
            atomic_fetch_add(&create_failed, 1);
            return EAGAIN;
        }
    }
    return real(t, attr, fn, arg);
}
#else
#define H_CAN_FAIL_THREADS 0
#endif

#define SKIP_WITHOUT_THREAD_FAULTS()                                        \
    do {                                                                    \
        if (!H_CAN_FAIL_THREADS) {                                          \
            print_message("thread creation cannot be failed under TSan\n"); \
            skip();                                                         \
        }                                                                   \
    } while (0)

/* ---- Injected allocation failures ---------------------------------------- */

/* Allocations numbered from 0 by the hook; from number fail_from on (-1:
 * never) each fails. alloc_live: allocated and not yet freed. */
static _Atomic long alloc_n, alloc_live, fail_from = -1;

static void *f_alloc(size_t size, void *ctx)
{
    (void)ctx;
    long n = atomic_fetch_add(&alloc_n, 1);
    long f = atomic_load(&fail_from);
    if (f >= 0 && n >= f)
        return NULL;
    void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);
    if (p)
        atomic_fetch_add(&alloc_live, 1);
    return p;
}

static void f_free(void *p, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    atomic_fetch_sub(&alloc_live, 1);
    free(p);
}

static gmp_config_t cfg_hooked(int procs)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    cfg.mem_alloc = f_alloc;
    cfg.mem_free = f_free;
    return cfg;
}

/* ---- Every call a goroutine may poll is a preemption point --------------- */

/*
 * procs goroutines each call one public function in a loop until told to
 * stop, with preemption by signal off, so that they keep every P. The
 * goroutine that tells them is queued behind them: it runs only if the
 * runtime preempts a spinner at its call (the 10 ms mark, checked on
 * entry). Without that check the loop holds its P for ever.
 */
static gmp_mutex_t held_mu = GMP_MUTEX_INIT;    /* held by the test thread */
static gmp_chan_t *empty_ch, *full_ch, *closed_ch;
static gmp_pool_t *spin_pool;
static gmp_cond_t spin_cv = GMP_COND_INIT;
static gmp_wg_t spin_wg = GMP_WG_INIT;
static gmp_once_t spin_once = GMP_ONCE_INIT;
static gmp_key_t spin_key;
static int spin_pipe[2];
static FILE *devnull;

static void noop(void) {}
static void c_trylock(void) { (void)gmp_mutex_trylock(&held_mu); }
static void c_tryrecv(void) { (void)gmp_chan_tryrecv(empty_ch, NULL); }
static void c_trysend(void) { (void)gmp_chan_trysend(full_ch, NULL); }
static void c_select_poll(void)
{
    gmp_case_t c = {empty_ch, GMP_RECV, NULL, 0};
    (void)gmp_select(&c, 1, 0);
}
static void c_chan_len(void) { (void)gmp_chan_len(empty_ch); }
static void c_chan_close(void) { (void)gmp_chan_close(closed_ch); }
static void c_chan_make_free(void) { gmp_chan_free(gmp_chan_make(8, 1)); }
static void c_nanotime(void) { (void)gmp_nanotime(); }
static void c_num_goroutines(void) { (void)gmp_num_goroutines(); }
static void c_stats(void)
{
    gmp_stats_t st;
    (void)gmp_stats(&st);
}
static void c_dump(void) { gmp_dump(devnull); }
static void c_pool_running(void) { (void)gmp_pool_running(spin_pool); }
static void c_pool_tune(void) { (void)gmp_pool_tune(spin_pool, 4); }
static void c_cond_signal(void) { gmp_cond_signal(&spin_cv); }
static void c_cond_broadcast(void) { gmp_cond_broadcast(&spin_cv); }
static void c_wg_add(void) { gmp_wg_add(&spin_wg, 0); }
static void c_wg_wait(void) { gmp_wg_wait(&spin_wg); }
static void c_once(void) { gmp_once(&spin_once, noop); }
static void c_key_create_delete(void)
{
    gmp_key_t k;
    if (gmp_key_create(&k, NULL) == 0)
        gmp_key_delete(k);
}
static void c_setspecific(void) { (void)gmp_setspecific(spin_key, NULL); }
static void c_lock_os_thread(void)
{
    gmp_lock_os_thread();
    gmp_unlock_os_thread();
}
static void c_preempt_disable(void)
{
    gmp_preempt_disable();
    gmp_preempt_enable();
}
static void c_fd_wait_poll(void)
{
    (void)gmp_fd_wait(spin_pipe[0], GMP_POLLIN, 0);
}
static void c_sleep0(void) { gmp_sleep(0); }

static const struct {
    const char *name;
    void (*call)(void);
} spin_calls[] = {
    {"gmp_mutex_trylock", c_trylock},
    {"gmp_chan_tryrecv", c_tryrecv},
    {"gmp_chan_trysend", c_trysend},
    {"gmp_select (poll)", c_select_poll},
    {"gmp_chan_len", c_chan_len},
    {"gmp_chan_close", c_chan_close},
    {"gmp_chan_make/free", c_chan_make_free},
    {"gmp_nanotime", c_nanotime},
    {"gmp_num_goroutines", c_num_goroutines},
    {"gmp_stats", c_stats},
    {"gmp_dump", c_dump},
    {"gmp_pool_running", c_pool_running},
    {"gmp_pool_tune", c_pool_tune},
    {"gmp_cond_signal", c_cond_signal},
    {"gmp_cond_broadcast", c_cond_broadcast},
    {"gmp_wg_add", c_wg_add},
    {"gmp_wg_wait", c_wg_wait},
    {"gmp_once", c_once},
    {"gmp_key_create/delete", c_key_create_delete},
    {"gmp_setspecific", c_setspecific},
    {"gmp_lock/unlock_os_thread", c_lock_os_thread},
    {"gmp_preempt_disable/enable", c_preempt_disable},
    {"gmp_fd_wait (poll)", c_fd_wait_poll},
    {"gmp_sleep(0)", c_sleep0},
};

static void (*_Atomic spin_call)(void);
static _Atomic int spin_stop;
static _Atomic int64_t spin_started, spin_done;

static void spinner(void *arg)
{
    (void)arg;
    void (*call)(void) = atomic_load(&spin_call);
    atomic_fetch_add(&spin_started, 1);
    while (!atomic_load(&spin_stop))
        call();
    atomic_fetch_add(&spin_done, 1);
}

static void releaser(void *arg)
{
    int64_t spinners = (int64_t)(intptr_t)arg;
    while (atomic_load(&spin_started) < spinners)
        gmp_yield();
    atomic_store(&spin_stop, 1);
    atomic_fetch_add(&spin_done, 1);
}

static int64_t base_goroutines;

static bool back_to_base(void *arg)
{
    (void)arg;
    return gmp_num_goroutines() == base_goroutines;
}

static void test_fault_polling_calls_are_preemption_points(void **state)
{
    int procs = ((struct h_env *)*state)->procs;
    gmp_mutex_lock(&held_mu);
    assert_non_null(empty_ch = gmp_chan_make(0, 0));
    assert_non_null(full_ch = gmp_chan_make(0, 1));
    assert_int_equal(gmp_chan_trysend(full_ch, NULL), 0);
    assert_non_null(closed_ch = gmp_chan_make(0, 0));
    assert_int_equal(gmp_chan_close(closed_ch), 0);
    assert_non_null(spin_pool = gmp_pool_new(4, NULL));
    assert_int_equal(gmp_key_create(&spin_key, NULL), 0);
    assert_int_equal(pipe(spin_pipe), 0);
    assert_non_null(devnull = fopen("/dev/null", "w"));
    gmp_once(&spin_once, noop);
    base_goroutines = gmp_num_goroutines();   /* the pool's own, if any */

    for (size_t i = 0; i < sizeof spin_calls / sizeof spin_calls[0]; i++) {
        atomic_store(&spin_call, spin_calls[i].call);
        atomic_store(&spin_stop, 0);
        atomic_store(&spin_started, 0);
        atomic_store(&spin_done, 0);
        for (int k = 0; k < procs; k++)
            assert_int_equal(gmp_go(spinner, NULL), 0);
        assert_int_equal(gmp_go(releaser, (void *)(intptr_t)procs), 0);
        if (h_wait(&spin_done, procs + 1) != 0) {
            atomic_store(&spin_stop, 1);    /* let the spinners go */
            fail_msg("procs=%d: a goroutine looping on %s kept its P",
                     procs, spin_calls[i].name);
        }
        assert_int_equal(h_wait_until(back_to_base, NULL, "spinners gone"), 0);
    }

    gmp_mutex_unlock(&held_mu);
    fclose(devnull);
    assert_int_equal(gmp_close(spin_pipe[0]), 0);
    close(spin_pipe[1]);
    assert_int_equal(gmp_key_delete(spin_key), 0);
    assert_int_equal(gmp_pool_release(spin_pool), 0);
    gmp_chan_free(empty_ch);
    gmp_chan_free(full_ch);
    gmp_chan_free(closed_ch);
}

/* ---- A thread that cannot be made ---------------------------------------- */

static int wpipe[2];

static void pipe_writer(void *arg)
{
    (void)arg;
    char c = 'x';
    if (write(wpipe[1], &c, 1) != 1)
        abort();
}

/* Readers that block their threads (in the bracket), one more than the
 * runtime has threads, so that the writer queued behind them needs a
 * thread that does not exist yet. */
static _Atomic int64_t blocked_got, blocked_in;

static void blocked_reader(void *arg)
{
    gmp_wg_t *wg = arg;
    char c;
    atomic_fetch_add(&blocked_in, 1);
    if (GMP_SYSCALL(read(wpipe[0], &c, 1)) == 1)
        atomic_fetch_add(&blocked_got, 1);
    gmp_wg_done(wg);
}

static void pipe_writer_n(void *arg)
{
    int64_t n = (int64_t)(intptr_t)arg;
    while (atomic_load(&blocked_in) < n)
        gmp_yield();                /* behind every reader */
    for (int64_t i = 0; i < n; i++)
        pipe_writer(NULL);
}

/* Main. arg: how many creations fail (-1: all), armed before anything
 * else. */
static void blocked_read_main(void *arg)
{
    gmp_stats_t st;
    gmp_stats(&st);
    int64_t k = (int64_t)st.threads + 1;
    gmp_wg_t wg = GMP_WG_INIT;
    create_arm(0, (int)(intptr_t)arg);
    gmp_wg_add(&wg, k);
    for (int64_t i = 0; i < k; i++)
        if (gmp_go(blocked_reader, &wg) != 0)
            abort();
    if (gmp_go(pipe_writer_n, (void *)(intptr_t)k) != 0)
        abort();
    gmp_wg_wait(&wg);
    atomic_store(&create_fail, 0);
    dprintf(1, "read %lld of %lld, %d creations failed\n",
            (long long)atomic_load(&blocked_got), (long long)k,
            atomic_load(&create_failed));
}

struct blocked_run {
    int procs, fail, max_threads;
};

static void blocked_read_child(void *arg)
{
    struct blocked_run *r = arg;
    if (pipe(wpipe) != 0)
        _exit(3);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = r->procs;
    cfg.max_threads = r->max_threads;
    int err = gmp_main(blocked_read_main, (void *)(intptr_t)r->fail, &cfg);
    _exit(err == 0 ? 0 : 4);
}

#define THREAD_FATAL "gmprt: fatal error: failed to create new OS thread (have "

static void test_fault_thread_creation_fails_loudly(void **state)
{
    SKIP_WITHOUT_THREAD_FAULTS();
    static const int procs[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        struct blocked_run r = {procs[i], -1, 0};
        struct h_child res;
        assert_int_equal(h_fork(blocked_read_child, &r, &res), 0);
        if (!strstr(res.err, THREAD_FATAL) || !strstr(res.err, "errno=11)"))
            print_error("procs=%d: stderr:\n%s\n", procs[i], res.err);
        h_assert_killed_by(&res, SIGABRT);
        assert_non_null(strstr(res.err, THREAD_FATAL));
        assert_non_null(strstr(res.err, "errno=11)"));
    }
}

/* EAGAIN that passes: the runtime tries again and the program goes on. */
static void test_fault_thread_creation_is_retried(void **state)
{
    SKIP_WITHOUT_THREAD_FAULTS();
    static const int procs[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        struct blocked_run r = {procs[i], 5, 0};
        struct h_child res;
        assert_int_equal(h_fork(blocked_read_child, &r, &res), 0);
        h_child_exited(&res, 0, procs[i]);
        long long got, want;
        int failed;
        int n = sscanf(res.out, "read %lld of %lld, %d creations failed",
                       &got, &want, &failed);
        if (n != 3 || got != want || failed != 5)
            print_error("procs=%d: stdout:\n%s\n", procs[i], res.out);
        assert_int_equal(n, 3);
        assert_int_equal(got, want);
        assert_int_equal(failed, 5);
    }
}

/* More threads than max_threads: Go's "thread exhaustion", not a hang. */
static void test_fault_thread_limit_is_fatal(void **state)
{
    struct blocked_run r = {1, 0, 1};
    struct h_child res;
    assert_int_equal(h_fork(blocked_read_child, &r, &res), 0);
    h_assert_killed_by(&res, SIGABRT);
    if (!strstr(res.err, "gmprt: fatal error: thread exhaustion"))
        print_error("stderr:\n%s\n", res.err);
    assert_non_null(strstr(res.err, "gmprt: fatal error: thread exhaustion"));
}

static void fault_main_noop(void *arg) { (void)arg; }

/* Threads the runtime needs to start: its monitor (gmp_init and
 * gmp_main), and gmp_main's first M. */
static void test_fault_start_without_threads(void **state)
{
    SKIP_WITHOUT_THREAD_FAULTS();
    gmp_config_t cfg = cfg_hooked(2);
    atomic_store(&fail_from, -1);
    create_arm(0, -1);
    assert_int_equal(gmp_init(&cfg), GMP_EAGAIN);
    assert_int_equal(atomic_load(&create_failed), 20);  /* Go's 20 tries */
    assert_int_equal(gmp_main(fault_main_noop, NULL, &cfg), GMP_EAGAIN);
    create_arm(1, -1);              /* the monitor starts, no M does */
    assert_int_equal(gmp_main(fault_main_noop, NULL, &cfg), GMP_EAGAIN);
    create_arm(0, 0);
    assert_int_equal(gmp_procs(), 0);
    assert_int_equal(atomic_load(&alloc_live), 0);
    assert_int_equal(gmp_main(fault_main_noop, NULL, &cfg), 0);
    assert_int_equal(atomic_load(&alloc_live), 0);
}

/* ---- Memory that cannot be had ------------------------------------------- */

/* Every allocation of a start, failed in turn: GMP_ENOMEM, and nothing
 * left allocated, until the start needs no more. */
static void test_fault_start_without_memory(void **state)
{
    static const int procs[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        gmp_config_t cfg = cfg_hooked(procs[i]);
        long k;
        for (k = 0;; k++) {
            atomic_store(&alloc_n, 0);
            atomic_store(&fail_from, k);
            int err = gmp_init(&cfg);
            if (err == 0)
                break;
            assert_int_equal(err, GMP_ENOMEM);
            assert_int_equal(gmp_procs(), 0);
            assert_int_equal(atomic_load(&alloc_live), 0);
            assert_true(k < 1000);
        }
        assert_true(k > 0);
        atomic_store(&fail_from, -1);
        assert_int_equal(gmp_shutdown(), 0);
        assert_int_equal(atomic_load(&alloc_live), 0);
    }
}

static gmp_chan_t *never_ch;

static void select_without_memory(void *arg)
{
    (void)arg;
    atomic_store(&fail_from, 0);
    gmp_case_t c = {never_ch, GMP_RECV, NULL, 0};
    int r = gmp_select(&c, 1, 20 * 1000000LL);
    dprintf(1, "select returned %d\n", r);
}

static void sleep_without_memory(void *arg)
{
    (void)arg;
    atomic_store(&fail_from, 0);
    gmp_sleep(1000000);
    dprintf(1, "slept\n");
}

struct timed_run {
    void (*fn)(void *);
    int procs;
};

static void timed_child(void *arg)
{
    struct timed_run *r = arg;
    gmp_config_t cfg = cfg_hooked(r->procs);
    atomic_store(&fail_from, -1);
    never_ch = gmp_chan_make(0, 0);
    gmp_main(r->fn, NULL, &cfg);
    _exit(0);
}

#define OOM_TIMER "gmprt: fatal error: out of memory: timer heap"

/* A timed wait whose timer cannot be had is a fatal error: waiting
 * without the timer turned a 20 ms select into a false deadlock report,
 * and a sleep into one that held its P. */
static void test_fault_timed_waits_without_memory(void **state)
{
    static const int procs[] = {1, 2, 4};
    void (*fns[])(void *) = {select_without_memory, sleep_without_memory};
    for (int i = 0; i < 6; i++) {
        struct timed_run r = {fns[i % 2], procs[i / 2]};
        struct h_child res;
        assert_int_equal(h_fork(timed_child, &r, &res), 0);
        if (!h_has_line(res.err, OOM_TIMER))
            print_error("stdout:\n%s\nstderr:\n%s\n", res.out, res.err);
        h_assert_killed_by(&res, SIGABRT);
        assert_true(h_has_line(res.err, OOM_TIMER));
        assert_null(strstr(res.err, "deadlock"));
    }
}

/* ---- Timeouts too large to add to the clock ------------------------------ */

/* From a plain thread a wait sleeps on a note until now + timeout, which
 * must saturate (UBSan, in the sanitizer build, reports the overflow). */
static void test_fault_note_sleep_saturates(void **state)
{
    struct gmp__note n = {0};
    gmp__notewakeup(&n);
    assert_true(gmp__notetsleep(&n, INT64_MAX));
}

static gmp_chan_t *far_ch;
static int32_t far_tid;

/* Sends once the test thread sleeps in its select. */
static void far_sender(void *arg)
{
    (void)arg;
    while (h_thread_state(far_tid) != 'S')
        gmp_yield();
    int v = 7;
    gmp_chan_send(far_ch, &v);
}

static void test_fault_thread_waits_for_ever_minus_one(void **state)
{
    far_tid = h_tid();
    assert_non_null(far_ch = gmp_chan_make(sizeof(int), 0));
    int v = 0;
    gmp_case_t c = {far_ch, GMP_RECV, &v, 0};
    assert_int_equal(gmp_go(far_sender, NULL), 0);
    assert_int_equal(gmp_select(&c, 1, INT64_MAX), 0);
    assert_int_equal(v, 7);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(far_ch);
}

/* ---- Error codes ------------------------------------------------------- */

/* docs/API.md: without a running runtime the descriptor calls return
 * GMP_EPERM, whatever the fd. */
static void test_fault_fd_calls_without_runtime(void **state)
{
    char b;
    assert_int_equal(gmp_procs(), 0);
    assert_int_equal(gmp_close(-1), GMP_EPERM);
    assert_int_equal(gmp_close(0), GMP_EPERM);
    assert_int_equal(gmp_read(-1, &b, 1), GMP_EPERM);
    assert_int_equal(gmp_write(-1, &b, 1), GMP_EPERM);
    assert_int_equal(gmp_fd_wait(-1, GMP_POLLIN, 0), GMP_EPERM);
    assert_int_equal(gmp_accept(-1, NULL, NULL), GMP_EPERM);
}

/* The lowest free descriptor. */
static int lowest_free_fd(void)
{
    int fd = dup(0);
    if (fd >= 0)
        close(fd);
    return fd;
}

/* With descriptors for one, then none, of the poller's two: -EMFILE, no
 * descriptor and no memory kept. Exits with the number of the check
 * that failed. */
static void nofds_child(void *arg)
{
    (void)arg;
    int low = lowest_free_fd();
    /* Downwards: without CAP_SYS_RESOURCE a hard limit only falls. */
    for (int extra = 1; extra >= 0; extra--) {
        struct rlimit rl = {(rlim_t)(low + extra), (rlim_t)(low + extra)};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(10);
        gmp_config_t cfg = cfg_hooked(2);
        int e1 = gmp_init(&cfg);
        int e2 = gmp_main(fault_main_noop, NULL, &cfg);
        fprintf(stderr, "fds %d: gmp_init %d, gmp_main %d\n", low + extra,
                e1, e2);
        if (e1 != -EMFILE || e2 != -EMFILE)
            _exit(11);
        for (int fd = low; fd < low + 2; fd++)
            if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
                _exit(12);          /* the runtime kept one */
        if (atomic_load(&alloc_live) != 0)
            _exit(13);
    }
    _exit(0);
}

static void test_fault_start_without_descriptors(void **state)
{
    struct h_child res;
    assert_int_equal(h_fork(nofds_child, NULL, &res), 0);
    h_child_exited(&res, 0, 2);
}

/* ---- The open-file limit ---------------------------------------------- */

#define NOFILE_LOW 64

static rlim_t soft_nofile(void)
{
    struct rlimit rl;
    return getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 0;
}

/* What a child forked now sees as its soft limit (its exit status says
 * whether it is NOFILE_LOW). */
static bool forked_child_sees_low(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(soft_nofile() == NOFILE_LOW ? 0 : 1);
    int st;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
           WEXITSTATUS(st) == 0;
}

static void nofile_child(void *arg)
{
    (void)arg;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        _exit(20);
    rl.rlim_cur = NOFILE_LOW;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        _exit(21);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 2;
    if (gmp_init(&cfg) != 0)
        _exit(22);
    if (soft_nofile() != rl.rlim_max)
        _exit(23);
    /* Past the old limit, as a server with many clients would go. */
    int fds[2 * NOFILE_LOW];
    for (int i = 0; i < 2 * NOFILE_LOW; i += 2)
        if (pipe(&fds[i]) != 0)
            _exit(24);
    if (!forked_child_sees_low())
        _exit(25);
    for (int i = 0; i < 2 * NOFILE_LOW; i++)
        close(fds[i]);
    if (gmp_shutdown() != 0 || soft_nofile() != NOFILE_LOW)
        _exit(26);
    cfg.keep_nofile_limit = 1;
    if (gmp_init(&cfg) != 0 || soft_nofile() != NOFILE_LOW)
        _exit(27);
    if (gmp_shutdown() != 0 || soft_nofile() != NOFILE_LOW)
        _exit(28);
    _exit(0);
}

static void test_fault_open_file_limit_is_raised(void **state)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max < 4 * NOFILE_LOW) {
        print_message("hard RLIMIT_NOFILE %llu: too low to test\n",
                      (unsigned long long)rl.rlim_max);
        skip();
    }
    struct h_child res;
    assert_int_equal(h_fork(nofile_child, NULL, &res), 0);
    h_child_exited(&res, 0, 2);
}

int main(void)
{
    /* Forking tests, and tests that start runtimes of their own, while no
     * runtime runs in this process. */
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_fault_fd_calls_without_runtime),
        cmocka_unit_test(test_fault_note_sleep_saturates),
        cmocka_unit_test(test_fault_thread_creation_fails_loudly),
        cmocka_unit_test(test_fault_thread_creation_is_retried),
        cmocka_unit_test(test_fault_thread_limit_is_fatal),
        cmocka_unit_test(test_fault_start_without_threads),
        cmocka_unit_test(test_fault_start_without_memory),
        cmocka_unit_test(test_fault_timed_waits_without_memory),
        cmocka_unit_test(test_fault_start_without_descriptors),
        cmocka_unit_test(test_fault_open_file_limit_is_raised),
    };
    const struct CMUnitTest polled[] = {
        cmocka_unit_test(test_fault_polling_calls_are_preemption_points),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_fault_thread_waits_for_ever_minus_one),
    };
    return cmocka_run_group_tests_name("fault alone", alone, NULL, NULL)
         + cmocka_run_group_tests_name("fault polling procs=1", polled,
                                       h_up_nopreempt_1, h_down)
         + cmocka_run_group_tests_name("fault polling procs=2", polled,
                                       h_up_nopreempt_2, h_down)
         + cmocka_run_group_tests_name("fault polling procs=4", polled,
                                       h_up_nopreempt_4, h_down)
         + cmocka_run_group_tests_name("fault procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("fault procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("fault procs=4", t, h_up_4, h_down);
}
