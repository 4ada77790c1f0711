/*
 * test_deadlock.c - Go's "all goroutines are asleep - deadlock!" under
 * gmp_main: reported (one fatal line, the goroutines' states after it,
 * SIGABRT) when every goroutine waits on something only another goroutine
 * could provide; not reported for programs that only look idle: a
 * goroutine computing, in a bracketed system call, or waiting for a plain
 * thread; and never under gmp_init, where the host thread can always act.
 * A thread that is not the runtime's may act at any time, so while one
 * exists nothing is reported (src/deadlock.c); once it is gone, a
 * deadlock is reported again.
 *
 * Every case runs a whole runtime in a forked child (h_fork): the parent
 * never starts one. A child that should finish prints "ok" once its main
 * checked what it received, and exits 0.
 */
#include "harness.h"

#include <dirent.h>
#include <pthread.h>


/* How long a plain thread lets the program look idle before it acts. No
 * assertion depends on it: the deadlock detector must simply not fire
 * meanwhile, however long it is. */
#define IDLE_NS (150 * 1000000L)

static _Atomic long sink;           /* busy work the compiler must keep */

static void sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- Running a main in a child ------------------------------------------ */

static void expect_clean(void (*fn)(void *))
{
    expect_clean_with(fn, NULL, 1);
    expect_clean_with(fn, NULL, 2);
}

/* ---- Deadlocks ---------------------------------------------------------- */

static void dl_recv_main(void *arg)
{
    (void)arg;
    int v = 0;
    gmp_chan_t *c = gmp_chan_make(sizeof v, 0);
    announce("chan receive");
    gmp_chan_recv(c, &v);           /* nobody sends */
    printf("recv returned\n");
}

/* main receives on a channel nobody has. */
static void test_deadlock_lone_receiver(void **state)
{
    expect_deadlock(dl_recv_main);
}

static void dl_send_main(void *arg)
{
    (void)arg;
    int v = 7;
    gmp_chan_t *c = gmp_chan_make(sizeof v, 1);
    gmp_chan_send(c, &v);           /* buffered */
    announce("chan send");
    gmp_chan_send(c, &v);           /* full, nobody receives */
    printf("send returned\n");
}

/* main sends on a full channel nobody receives from. */
static void test_deadlock_lone_sender(void **state)
{
    expect_deadlock(dl_send_main);
}

static void dl_select_main(void *arg)
{
    (void)arg;
    announce("select (no cases)");
    gmp_select(NULL, 0, GMP_FOREVER);   /* Go's select {} */
    printf("select returned\n");
}

static void test_deadlock_empty_select(void **state)
{
    expect_deadlock(dl_select_main);
}

static void dl_double_lock_main(void *arg)
{
    (void)arg;
    gmp_mutex_t mu = GMP_MUTEX_INIT;
    gmp_mutex_lock(&mu);
    announce("sync.Mutex.Lock");
    gmp_mutex_lock(&mu);            /* not reentrant */
    printf("lock returned\n");
}

static void test_deadlock_double_lock(void **state)
{
    expect_deadlock(dl_double_lock_main);
}

static void dl_wg_main(void *arg)
{
    (void)arg;
    gmp_wg_t wg = GMP_WG_INIT;
    gmp_wg_add(&wg, 1);
    announce("sync.WaitGroup.Wait");
    gmp_wg_wait(&wg);               /* nobody calls done */
    printf("wait returned\n");
}

static void test_deadlock_wait_group_never_zero(void **state)
{
    expect_deadlock(dl_wg_main);
}

static void dl_cond_main(void *arg)
{
    (void)arg;
    gmp_mutex_t mu = GMP_MUTEX_INIT;
    gmp_cond_t cv = GMP_COND_INIT;
    gmp_mutex_lock(&mu);
    announce("sync.Cond.Wait");
    gmp_cond_wait(&cv, &mu);        /* nobody signals */
    printf("wait returned\n");
}

static void test_deadlock_cond_never_signalled(void **state)
{
    expect_deadlock(dl_cond_main);
}

static void dl_rw_main(void *arg)
{
    (void)arg;
    gmp_rwmutex_t rw = GMP_RWMUTEX_INIT;
    gmp_rwmutex_rlock(&rw);
    announce("sync.RWMutex.Lock");
    gmp_rwmutex_lock(&rw);          /* waits for its own read lock */
    printf("lock returned\n");
}

static void test_deadlock_rwmutex_writer_after_own_read(void **state)
{
    expect_deadlock(dl_rw_main);
}

/* ---- Several goroutines blocked ------------------------------------------ */

static struct {
    gmp_chan_t *c1, *c2;
    gmp_mutex_t mu;
    gmp_cond_t cv;
    gmp_mutex_t cmu;
    gmp_rwmutex_t rw;
    gmp_wg_t wg, started;
    gmp_chan_t *sel;
} many;

static void many_recv(void *arg)
{
    announce("chan receive");
    gmp_wg_done(&many.started);
    gmp_chan_recv(arg, NULL);
}

static void many_lock(void *arg)
{
    (void)arg;
    announce("sync.Mutex.Lock");
    gmp_wg_done(&many.started);
    gmp_mutex_lock(&many.mu);       /* main holds it */
}

static void many_cond(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&many.cmu);
    announce("sync.Cond.Wait");
    gmp_wg_done(&many.started);
    gmp_cond_wait(&many.cv, &many.cmu);
}

static void many_rlock(void *arg)
{
    (void)arg;
    announce("sync.RWMutex.RLock");
    gmp_wg_done(&many.started);
    gmp_rwmutex_rlock(&many.rw);    /* main holds the write lock */
}

static void many_select(void *arg)
{
    (void)arg;
    int v;
    gmp_case_t cases[2] = {
        {many.sel, GMP_RECV, &v, 0},
        {NULL, GMP_SEND, &v, 0},
    };
    announce("select");
    gmp_wg_done(&many.started);
    gmp_select(cases, 2, GMP_FOREVER);
}

static void many_finisher(void *arg)
{
    (void)arg;
    for (long i = 0; i < 10000; i++)
        atomic_fetch_add_explicit(&sink, i, memory_order_relaxed);
}

/* Goroutines that finish, then main waits on a group while others wait on
 * two channels, a mutex, a cond, an rwmutex and a select. */
static void dl_many_main(void *arg)
{
    (void)arg;
    many.c1 = gmp_chan_make(sizeof(int), 0);
    many.c2 = gmp_chan_make(0, 3);
    many.sel = gmp_chan_make(sizeof(int), 0);
    gmp_mutex_lock(&many.mu);
    gmp_rwmutex_lock(&many.rw);
    for (int i = 0; i < 50; i++)
        gmp_go(many_finisher, NULL);
    gmp_wg_add(&many.started, 6);
    gmp_go(many_recv, many.c1);
    gmp_go(many_recv, many.c2);
    gmp_go(many_lock, NULL);
    gmp_go(many_cond, NULL);
    gmp_go(many_rlock, NULL);
    gmp_go(many_select, NULL);
    gmp_wg_wait(&many.started);
    gmp_wg_add(&many.wg, 1);
    announce("sync.WaitGroup.Wait");
    gmp_wg_wait(&many.wg);
    printf("wait returned\n");
}

static void test_deadlock_many_goroutines_blocked(void **state)
{
    expect_deadlock(dl_many_main);
}

/* main waits for a goroutine that computes a while and then exits without
 * sending: the deadlock exists only once it is gone. */
static void dl_late_worker(void *arg)
{
    (void)arg;
    int64_t end = gmp_nanotime() + 50 * 1000000L;
    while (gmp_nanotime() < end)
        atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
}

static void dl_late_main(void *arg)
{
    (void)arg;
    gmp_chan_t *c = gmp_chan_make(sizeof(int), 0);
    gmp_go(dl_late_worker, NULL);
    announce("chan receive");
    gmp_chan_recv(c, NULL);
    printf("recv returned\n");
}

static void test_deadlock_after_last_runner_exits(void **state)
{
    expect_deadlock(dl_late_main);
}

/* ---- No false positives ------------------------------------------------- */

static void ok_worker(void *arg)
{
    gmp_chan_t *c = arg;
    int64_t end = gmp_nanotime() + IDLE_NS;
    while (gmp_nanotime() < end)    /* no runtime call but the clock */
        atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
    int v = 42;
    gmp_chan_send(c, &v);
}

/* main waits on a channel a computing goroutine sends on at the end. */
static void ok_cpu_main(void *arg)
{
    (void)arg;
    int v = 0;
    gmp_chan_t *c = gmp_chan_make(sizeof v, 0);
    gmp_go(ok_worker, c);
    if (gmp_chan_recv(c, &v) == 0 && v == 42)
        printf("ok\n");
}

static void test_no_deadlock_goroutine_computing(void **state)
{
    expect_clean(ok_cpu_main);
}

static struct {
    int fd[2];
    gmp_chan_t *c;
    gmp_mutex_t mu;
    gmp_cond_t cv;
    gmp_wg_t wg;
    int flag;                       /* under mu */
    _Atomic(gmp_chan_t *) pub;
    _Atomic int locked;
    pthread_t t;
} fx;

static void *pipe_writer(void *arg)
{
    (void)arg;
    sleep_ns(IDLE_NS);
    ssize_t w = write(fx.fd[1], "z", 1);
    (void)w;
    return NULL;
}

static void syscall_reader(void *arg)
{
    (void)arg;
    char b = 0;
    gmp_syscall_enter();
    ssize_t r = read(fx.fd[0], &b, 1);  /* blocks until the writer */
    gmp_syscall_exit();
    int v = (r == 1 && b == 'z') ? 1 : -1;
    gmp_chan_send(fx.c, &v);
}

/* main waits on a goroutine blocked in a bracketed read, which a plain
 * thread satisfies after a while. (Any thread beyond the runtime's may
 * wake a goroutine: see also the variant without one below.) */
static void ok_syscall_main(void *arg)
{
    (void)arg;
    int v = 0;
    if (pipe(fx.fd) != 0)
        return;
    fx.c = gmp_chan_make(sizeof v, 0);
    pthread_create(&fx.t, NULL, pipe_writer, NULL);
    gmp_go(syscall_reader, NULL);
    int rc = gmp_chan_recv(fx.c, &v);
    GMP_SYSCALL(pthread_join(fx.t, NULL));
    if (rc == 0 && v == 1)
        printf("ok\n");
}

static void test_no_deadlock_goroutine_in_syscall(void **state)
{
    expect_clean(ok_syscall_main);
}

static void syscall_sleeper(void *arg)
{
    (void)arg;
    struct timespec ts = {0, IDLE_NS};
    gmp_syscall_enter();
    nanosleep(&ts, NULL);           /* no signal reaches a bracket */
    gmp_syscall_exit();
    ssize_t w = write(fx.fd[1], "y", 1);
    (void)w;
}

static void syscall_reader_y(void *arg)
{
    (void)arg;
    char b = 0;
    ssize_t r = GMP_SYSCALL(read(fx.fd[0], &b, 1));
    int v = (r == 1 && b == 'y') ? 1 : -1;
    gmp_chan_send(fx.c, &v);
}

/* The same with no other thread in the process: one goroutine sleeps in
 * a bracketed nanosleep, then writes the pipe another goroutine reads in
 * a bracket; main waits for the reader. For a while every goroutine is
 * parked or in a system call, and the only threads are the runtime's. */
static void ok_syscall_only_main(void *arg)
{
    (void)arg;
    int v = 0;
    if (pipe(fx.fd) != 0)
        return;
    fx.c = gmp_chan_make(sizeof v, 0);
    gmp_go(syscall_reader_y, NULL);
    gmp_go(syscall_sleeper, NULL);
    if (gmp_chan_recv(fx.c, &v) == 0 && v == 1)
        printf("ok\n");
}

static void test_no_deadlock_goroutines_in_syscalls_only(void **state)
{
    expect_clean(ok_syscall_only_main);
}

static void *chan_sender(void *arg)
{
    (void)arg;
    gmp_chan_t *c;
    while ((c = atomic_load(&fx.pub)) == NULL)
        sleep_ns(1000000);
    sleep_ns(IDLE_NS);
    int v = 99;
    gmp_chan_send(c, &v);
    return NULL;
}

/* main receives from a plain thread that sends after a while. */
static void ok_thread_send_main(void *arg)
{
    (void)arg;
    int v = 0;
    gmp_chan_t *c = gmp_chan_make(sizeof v, 0);
    bool mine = arg == NULL;
    if (mine)
        pthread_create(&fx.t, NULL, chan_sender, NULL);
    atomic_store(&fx.pub, c);
    int rc = gmp_chan_recv(c, &v);
    GMP_SYSCALL(pthread_join(fx.t, NULL));
    if (rc == 0 && v == 99)
        printf("ok\n");
}

static void ok_thread_send_main_pre(void *arg)
{
    (void)arg;
    ok_thread_send_main((void *)1);
}

static void start_sender_before(void)
{
    atomic_store(&fx.pub, NULL);
    pthread_create(&fx.t, NULL, chan_sender, NULL);
}

/* The thread started by main. */
static void test_no_deadlock_thread_sends_later(void **state)
{
    expect_clean(ok_thread_send_main);
}

/* The thread started before gmp_main. */
static void test_no_deadlock_thread_from_before_sends_later(void **state)
{
    expect_clean_with(ok_thread_send_main_pre, start_sender_before, 1);
    expect_clean_with(ok_thread_send_main_pre, start_sender_before, 2);
}

static void *mutex_holder(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&fx.mu);
    atomic_store(&fx.locked, 1);
    sleep_ns(IDLE_NS);
    fx.flag = 5;
    gmp_mutex_unlock(&fx.mu);
    return NULL;
}

/* main blocks on a mutex a plain thread holds for a while. */
static void ok_mutex_main(void *arg)
{
    (void)arg;
    pthread_create(&fx.t, NULL, mutex_holder, NULL);
    while (!atomic_load(&fx.locked))
        gmp_yield();
    gmp_mutex_lock(&fx.mu);
    int f = fx.flag;
    gmp_mutex_unlock(&fx.mu);
    GMP_SYSCALL(pthread_join(fx.t, NULL));
    if (f == 5)
        printf("ok\n");
}

static void test_no_deadlock_mutex_held_by_thread(void **state)
{
    expect_clean(ok_mutex_main);
}

static void *cond_signaller(void *arg)
{
    (void)arg;
    sleep_ns(IDLE_NS);
    gmp_mutex_lock(&fx.mu);
    fx.flag = 1;
    gmp_cond_signal(&fx.cv);
    gmp_mutex_unlock(&fx.mu);
    sleep_ns(IDLE_NS / 3);
    gmp_wg_done(&fx.wg);
    return NULL;
}

/* main waits on a cond, then a group, that a plain thread signals and
 * completes after a while. */
static void ok_cond_wg_main(void *arg)
{
    (void)arg;
    gmp_wg_add(&fx.wg, 1);
    pthread_create(&fx.t, NULL, cond_signaller, NULL);
    gmp_mutex_lock(&fx.mu);
    while (!fx.flag)
        gmp_cond_wait(&fx.cv, &fx.mu);
    gmp_mutex_unlock(&fx.mu);
    gmp_wg_wait(&fx.wg);
    GMP_SYSCALL(pthread_join(fx.t, NULL));
    printf("ok\n");
}

static void test_no_deadlock_cond_and_wg_from_thread(void **state)
{
    expect_clean(ok_cond_wg_main);
}

/* ---- A thread that came and went ---------------------------------------- */

static _Atomic long gone_tid;

static void *one_shot_sender(void *arg)
{
    atomic_store(&gone_tid, (long)gettid());
    int v = 3;
    gmp_chan_send(arg, &v);
    return NULL;
}

static bool task_gone(long tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld", tid);
    return access(path, F_OK) != 0;
}

/* A plain thread sends main one value and exits; once it is gone from
 * the process, main waits for a second value nobody will send: that is a
 * deadlock again (the threads that could act are counted when the last
 * runtime thread goes idle, not once for all). */
static void dl_thread_gone_main(void *arg)
{
    (void)arg;
    int v = 0;
    pthread_t t;
    gmp_chan_t *c = gmp_chan_make(sizeof v, 0);
    atomic_store(&gone_tid, 0);
    if (pthread_create(&t, NULL, one_shot_sender, c) != 0)
        return;
    if (gmp_chan_recv(c, &v) != 0 || v != 3)
        return;
    GMP_SYSCALL(pthread_join(t, NULL));
    while (!task_gone(atomic_load(&gone_tid)))
        gmp_yield();
    announce("chan receive");
    gmp_chan_recv(c, &v);
    printf("recv returned\n");
}

static void test_deadlock_after_thread_gone(void **state)
{
    expect_deadlock(dl_thread_gone_main);
}

/* ---- gmp_init mode -------------------------------------------------------- */

static struct {
    gmp_chan_t *c;
    gmp_mutex_t mu;
    _Atomic int64_t in, got;
} im;

static void im_receiver(void *arg)
{
    (void)arg;
    int v = 0;
    atomic_fetch_add(&im.in, 1);
    if (gmp_chan_recv(im.c, &v) == 0 && v == 17)
        atomic_fetch_add(&im.got, 1);
}

static void im_locker(void *arg)
{
    (void)arg;
    atomic_fetch_add(&im.in, 1);
    gmp_mutex_lock(&im.mu);         /* the host holds it */
    atomic_fetch_add(&im.got, 1);
    gmp_mutex_unlock(&im.mu);
}

/* Under gmp_init the host thread runs no goroutine yet can always act:
 * with every goroutine blocked and the runtime idle for a while, nothing
 * aborts; the host then unblocks them and shuts down cleanly. */
static void init_mode_child(void *arg)
{
    int procs = (int)(intptr_t)arg;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    if (gmp_init(&cfg) != 0)
        _exit(20);
    im.c = gmp_chan_make(sizeof(int), 0);
    gmp_mutex_lock(&im.mu);
    gmp_go(im_receiver, NULL);
    gmp_go(im_locker, NULL);
    if (h_wait(&im.in, 2) != 0)
        _exit(21);
    /* Still means the last M went idle, which is when a deadlock would
     * be reported: no further wait could add anything. */
    if (h_wait_until(still_pred, NULL, "the runtime idle") != 0)
        _exit(22);
    if (gmp_num_goroutines() != 2 || atomic_load(&im.got) != 0)
        _exit(23);
    int v = 17;
    if (gmp_chan_send(im.c, &v) != 0)
        _exit(24);
    gmp_mutex_unlock(&im.mu);
    if (h_wait(&im.got, 2) != 0)
        _exit(25);
    if (gmp_shutdown() != 0)
        _exit(26);
    printf("ok\n");
    fflush(stdout);
    _exit(0);
}

static void test_no_deadlock_under_gmp_init(void **state)
{
    for (int procs = 1; procs <= 4; procs *= 2) {
        struct h_child res;
        assert_int_equal(h_fork(init_mode_child, (void *)(intptr_t)procs,
                                &res), 0);
        h_child_exited(&res, 0, procs);
        assert_null(strstr(res.err, "fatal error"));
        assert_true(h_has_line(res.out, "ok"));
    }
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_deadlock_lone_receiver),
        cmocka_unit_test(test_deadlock_lone_sender),
        cmocka_unit_test(test_deadlock_empty_select),
        cmocka_unit_test(test_deadlock_double_lock),
        cmocka_unit_test(test_deadlock_wait_group_never_zero),
        cmocka_unit_test(test_deadlock_cond_never_signalled),
        cmocka_unit_test(test_deadlock_rwmutex_writer_after_own_read),
        cmocka_unit_test(test_deadlock_many_goroutines_blocked),
        cmocka_unit_test(test_deadlock_after_last_runner_exits),
        cmocka_unit_test(test_deadlock_after_thread_gone),
        cmocka_unit_test(test_no_deadlock_goroutine_computing),
        cmocka_unit_test(test_no_deadlock_goroutine_in_syscall),
        cmocka_unit_test(test_no_deadlock_goroutines_in_syscalls_only),
        cmocka_unit_test(test_no_deadlock_thread_sends_later),
        cmocka_unit_test(test_no_deadlock_thread_from_before_sends_later),
        cmocka_unit_test(test_no_deadlock_mutex_held_by_thread),
        cmocka_unit_test(test_no_deadlock_cond_and_wg_from_thread),
        cmocka_unit_test(test_no_deadlock_under_gmp_init),
    };
    /* No runtime ever runs in this process: every case forks. */
    return cmocka_run_group_tests_name("deadlock", t, NULL, NULL);
}
