/*
 * soak.c - every primitive at once, for a bounded time, with exact counts.
 *
 *   gmprt-soak [-p procs] [-t seconds]      (defaults: 4 Ps, 5 s)
 *
 * Goroutines and two host threads use channels (buffered, unbuffered,
 * closed and drained), select (blocking, timed, polling, send cases),
 * mutex and trylock, rwmutex, cond (signal, broadcast, timed waits),
 * once, wait groups over spawn trees, sleeps, the poller (socket pairs,
 * fd waits with timeouts, close), the system-call bracket, a CPU-bound
 * loop that only a signal can preempt, the worker pool (submit, tune,
 * release), keys with destructors, locked threads, disabled preemption,
 * and the introspection calls. Every item sent, task run and increment
 * made is counted on both sides; at the deadline everything winds down
 * and the counts must agree exactly. A watchdog thread dumps every
 * goroutine and fails the run if nothing progresses for STALL seconds,
 * so a hang is a named failure, not a timeout. Exit status 0: all counts
 * agree; 1: a count is wrong (the line says which); 3: a stall.
 * The checks are of behaviour only, never of speed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gmprt.h"

#if defined(__SANITIZE_THREAD__)
#define SOAK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SOAK_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(SOAK_TSAN)
#define STALL 60
#else
#define STALL 30
#endif

#define MS 1000000LL

/* Counters: seq_cst throughout (a soak, not a fast path); each pair of
 * counts is compared once everything has stopped. */
static _Atomic int64_t progress;
static _Atomic int failures;
static int64_t deadline;
static int procs = 4;

static bool running(void)
{
    atomic_fetch_add(&progress, 1);
    return gmp_nanotime() < deadline;
}

static void check(const char *what, int64_t got, int64_t want)
{
    printf("soak: %-28s %lld%s", what, (long long)got,
           got == want ? "\n" : "");
    if (got != want) {
        printf(" != %lld  <- WRONG\n", (long long)want);
        atomic_fetch_add(&failures, 1);
    }
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* ---- Channels: producers, consumers, close and drain -------------------- */

#define PRODUCERS 4
#define CONSUMERS 4
static gmp_chan_t *buffered, *unbuffered;
static _Atomic int64_t ch_sent, ch_recv, ch_sent_sum, ch_recv_sum;
static gmp_wg_t producers_wg = GMP_WG_INIT;

static void producer(void *arg)
{
    int64_t id = (int64_t)(intptr_t)arg, n = 0;
    uint64_t sum = 0;                   /* wraps, as the atomics do */
    while (running()) {
        int64_t v = (id << 40) | n;
        gmp_chan_t *c = n & 1 ? buffered : unbuffered;
        if (gmp_chan_send(c, &v) != 0)
            break;
        n++;
        sum += (uint64_t)v;
    }
    atomic_fetch_add(&ch_sent, n);
    atomic_fetch_add(&ch_sent_sum, (int64_t)sum);
    gmp_wg_done(&producers_wg);
}

/* Receives from both channels with select until both are closed and
 * drained. */
static void consumer(void *arg)
{
    gmp_wg_t *wg = arg;
    int64_t a, b, n = 0;
    uint64_t sum = 0;
    gmp_case_t cs[2] = {{buffered, GMP_RECV, &a, 0},
                        {unbuffered, GMP_RECV, &b, 0}};
    for (int open = 2; open > 0;) {
        int i = gmp_select(cs, 2, 5 * MS);
        atomic_fetch_add(&progress, 1);
        if (i == GMP_ETIMEDOUT)
            continue;
        if (cs[i].result == GMP_ECLOSED) {
            cs[i].chan = NULL;      /* never ready again */
            open--;
            continue;
        }
        n++;
        sum += (uint64_t)(i == 0 ? a : b);
    }
    atomic_fetch_add(&ch_recv, n);
    atomic_fetch_add(&ch_recv_sum, (int64_t)sum);
    gmp_wg_done(wg);
}

static void closer(void *arg)
{
    gmp_wg_t *wg = arg;
    gmp_wg_wait(&producers_wg);
    gmp_chan_close(buffered);
    gmp_chan_close(unbuffered);
    gmp_wg_done(wg);
}

/* ---- Select with send cases and polls ---------------------------------- */

static gmp_chan_t *sel_a, *sel_b;
static _Atomic int64_t sel_sent, sel_recv;
static _Atomic int sel_done;                /* every sender has finished */
static gmp_wg_t sel_senders = GMP_WG_INIT;

static void select_sender(void *arg)
{
    gmp_wg_t *wg = &sel_senders;
    (void)arg;
    int64_t v = 1, n = 0;
    while (running()) {
        gmp_case_t cs[2] = {{sel_a, GMP_SEND, &v, 0},
                            {sel_b, GMP_SEND, &v, 0}};
        int i = gmp_select(cs, 2, n & 1 ? 0 : 2 * MS);   /* poll, timed */
        if (i >= 0)
            n++;
    }
    atomic_fetch_add(&sel_sent, n);
    gmp_wg_done(wg);
}

static void select_watcher(void *arg)
{
    gmp_wg_t *wg = arg;
    gmp_wg_wait(&sel_senders);
    atomic_store(&sel_done, 1);
    gmp_wg_done(wg);
}

static void select_receiver(void *arg)
{
    gmp_wg_t *wg = arg;
    int64_t v, n = 0;
    for (;;) {
        gmp_case_t cs[2] = {{sel_a, GMP_RECV, &v, 0},
                            {sel_b, GMP_RECV, &v, 0}};
        int i = gmp_select(cs, 2, 2 * MS);
        atomic_fetch_add(&progress, 1);
        if (i == GMP_ETIMEDOUT) {
            if (atomic_load(&sel_done))
                break;
            continue;
        }
        n++;
    }
    /* What the senders buffered after our last look: take it. */
    while (gmp_chan_tryrecv(sel_a, &v) == 0 || gmp_chan_tryrecv(sel_b, &v) == 0)
        n++;
    atomic_fetch_add(&sel_recv, n);
    gmp_wg_done(wg);
}

/* ---- Mutex, trylock, rwmutex ------------------------------------------- */

static gmp_mutex_t mu = GMP_MUTEX_INIT;
static int64_t mu_counter;                  /* under mu */
static _Atomic int64_t mu_incs;
static gmp_rwmutex_t rw = GMP_RWMUTEX_INIT;
static int64_t rw_x, rw_y;                  /* equal under rw */
static _Atomic int64_t rw_writes, rw_torn;

static void locker(void *arg)
{
    gmp_wg_t *wg = arg;
    int64_t n = 0, w = 0;
    while (running()) {
        if ((n & 3) == 0 && gmp_mutex_trylock(&mu) != 0)
            gmp_mutex_lock(&mu);
        else if ((n & 3) != 0)
            gmp_mutex_lock(&mu);
        mu_counter++;
        gmp_mutex_unlock(&mu);
        n++;
        if ((n & 15) == 0) {
            gmp_rwmutex_lock(&rw);
            rw_x++;
            gmp_yield();
            rw_y++;
            gmp_rwmutex_unlock(&rw);
            w++;
        } else {
            gmp_rwmutex_rlock(&rw);
            if (rw_x != rw_y)
                atomic_fetch_add(&rw_torn, 1);
            gmp_rwmutex_runlock(&rw);
        }
    }
    atomic_fetch_add(&mu_incs, n);
    atomic_fetch_add(&rw_writes, w);
    gmp_wg_done(wg);
}

/* ---- Cond: a bounded queue with signal, broadcast and timed waits ------- */

#define QCAP 8
static gmp_mutex_t q_mu = GMP_MUTEX_INIT;
static gmp_cond_t q_notempty = GMP_COND_INIT, q_notfull = GMP_COND_INIT;
static int64_t q_buf[QCAP], q_len, q_head;  /* under q_mu */
static bool q_done;                         /* under q_mu */
static _Atomic int64_t q_put, q_got;

static void q_producer(void *arg)
{
    gmp_wg_t *wg = arg;
    int64_t n = 0;
    while (running()) {
        gmp_mutex_lock(&q_mu);
        while (q_len == QCAP)
            gmp_cond_timedwait(&q_notfull, &q_mu, 3 * MS);
        q_buf[(q_head + q_len++) % QCAP] = n++;
        gmp_cond_signal(&q_notempty);
        gmp_mutex_unlock(&q_mu);
    }
    atomic_fetch_add(&q_put, n);
    gmp_wg_done(wg);
}

static void q_consumer(void *arg)
{
    gmp_wg_t *wg = arg;
    int64_t n = 0;
    gmp_mutex_lock(&q_mu);
    for (;;) {
        while (q_len == 0 && !q_done)
            gmp_cond_wait(&q_notempty, &q_mu);
        if (q_len == 0)
            break;                  /* done and drained */
        q_head = (q_head + 1) % QCAP;
        q_len--;
        n++;
        gmp_cond_broadcast(&q_notfull);
        atomic_fetch_add(&progress, 1);
    }
    gmp_mutex_unlock(&q_mu);
    atomic_fetch_add(&q_got, n);
    gmp_wg_done(wg);
}

static void q_finisher(void *arg)
{
    gmp_wg_t *q_prod = arg;
    gmp_wg_wait(q_prod);
    gmp_mutex_lock(&q_mu);
    q_done = true;
    gmp_cond_broadcast(&q_notempty);
    gmp_mutex_unlock(&q_mu);
}

/* ---- Once, spawn trees, sleeps ----------------------------------------- */

#define ONCES 64
static gmp_once_t onces[ONCES];
static _Atomic int64_t once_runs, once_rounds;
static _Atomic int64_t tree_leaves, tree_want, sleeps;

static void once_fn(void) { atomic_fetch_add(&once_runs, 1); }

struct tree { int depth; gmp_wg_t *wg; };

static void tree_node(void *arg)
{
    struct tree *t = arg;
    if (t->depth == 0) {
        atomic_fetch_add(&tree_leaves, 1);
    } else {
        gmp_wg_t wg = GMP_WG_INIT;
        struct tree kids[3];
        gmp_wg_add(&wg, 3);
        for (int i = 0; i < 3; i++) {
            kids[i] = (struct tree){t->depth - 1, &wg};
            if (gmp_go(tree_node, &kids[i]) != 0)
                abort();
        }
        gmp_wg_wait(&wg);
    }
    gmp_wg_done(t->wg);
}

static void spawner(void *arg)
{
    gmp_wg_t *wg = arg;
    uint64_t x = 88172645463325252ULL;
    int round = 0;
    while (running()) {
        gmp_wg_t tw = GMP_WG_INIT;
        struct tree root = {4, &tw};            /* 81 leaves */
        gmp_wg_add(&tw, 1);
        gmp_go(tree_node, &root);
        gmp_wg_wait(&tw);
        atomic_fetch_add(&tree_want, 81);
        /* Both spawners call each round's once, twice: it runs once. */
        if (round < ONCES) {
            gmp_once(&onces[round], once_fn);
            gmp_once(&onces[round], once_fn);
            round++;
            int64_t seen = atomic_load(&once_rounds);
            while (seen < round &&
                   !atomic_compare_exchange_weak(&once_rounds, &seen, round))
                ;
        }
        gmp_sleep((int64_t)(rnd(&x) % 2000) * 1000);
        atomic_fetch_add(&sleeps, 1);
    }
    gmp_wg_done(wg);
}

/* ---- The poller, the bracket ------------------------------------------- */

static _Atomic int64_t net_sent, net_recv, net_waits;

struct pair { int fd[2]; gmp_wg_t *wg; };

static void net_writer(void *arg)
{
    struct pair *p = arg;
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    int64_t n = 0;
    uint64_t x = 1234567;
    while (running()) {
        size_t len = 1 + rnd(&x) % sizeof buf;
        if (gmp_write(p->fd[0], buf, len) != (ssize_t)len)
            break;
        n += (int64_t)len;
    }
    atomic_fetch_add(&net_sent, n);
    shutdown(p->fd[0], SHUT_WR);
    gmp_wg_done(p->wg);
}

static void net_reader(void *arg)
{
    struct pair *p = arg;
    char buf[4096];
    int64_t n = 0;
    for (;;) {
        int r = gmp_fd_wait(p->fd[1], GMP_POLLIN, 3 * MS);
        atomic_fetch_add(&progress, 1);
        if (r == GMP_ETIMEDOUT) {
            atomic_fetch_add(&net_waits, 1);
            continue;
        }
        ssize_t got = gmp_read(p->fd[1], buf, sizeof buf);
        if (got <= 0)
            break;
        n += got;
    }
    atomic_fetch_add(&net_recv, n);
    gmp_close(p->fd[0]);
    gmp_close(p->fd[1]);
    gmp_wg_done(p->wg);
}

static _Atomic int64_t sys_sent, sys_recv;

struct bracket { int fd[2]; gmp_wg_t *wg; };

/* A blocking read inside the bracket, fed by a goroutine's writes. */
static void sys_reader(void *arg)
{
    struct bracket *b = arg;
    int64_t n = 0;
    char c;
    while (GMP_SYSCALL(read(b->fd[0], &c, 1)) == 1) {
        n++;
        atomic_fetch_add(&progress, 1);
    }
    atomic_fetch_add(&sys_recv, n);
    close(b->fd[0]);
    gmp_wg_done(b->wg);
}

static void sys_writer(void *arg)
{
    struct bracket *b = arg;
    int64_t n = 0;
    while (running()) {
        if (GMP_SYSCALL(write(b->fd[1], "y", 1)) == 1)
            n++;
        gmp_sleep(100000);
    }
    atomic_fetch_add(&sys_sent, n);
    close(b->fd[1]);
    gmp_wg_done(b->wg);
}

/* ---- A loop only a signal can preempt; disabled preemption ------------- */

static _Atomic int64_t spin_rounds, nopreempt_bad;
static volatile uint64_t sink;              /* keeps the loops' work */

static int64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void spinner(void *arg)
{
    gmp_wg_t *wg = arg;
    while (running()) {
        int64_t until = clock_ns() + 20 * MS;
        while (clock_ns() < until)
            for (int i = 0; i < 1000; i++)
                sink += (uint64_t)i;
        atomic_fetch_add(&spin_rounds, 1);
        /* A disabled section keeps its goroutine on one thread. */
        gmp_preempt_disable();
        pid_t t0 = (pid_t)syscall(SYS_gettid);
        for (int i = 0; i < 100000; i++)
            sink += (uint64_t)i;
        if ((pid_t)syscall(SYS_gettid) != t0)
            atomic_fetch_add(&nopreempt_bad, 1);
        gmp_preempt_enable();
    }
    gmp_wg_done(wg);
}

/* ---- Pool, keys, locked threads, introspection ------------------------- */

static _Atomic int64_t pool_submitted, pool_ran, key_sets, key_dtors;
static _Atomic int64_t locked_rounds, locked_bad;
static gmp_key_t key;

static void pool_task(void *arg)
{
    (void)arg;
    atomic_fetch_add(&pool_ran, 1);
}

static void pooler(void *arg)
{
    gmp_wg_t *wg = arg;
    gmp_pool_t *p = gmp_pool_new(8, NULL);
    int64_t n = 0;
    while (p && running()) {
        if (gmp_pool_submit(p, pool_task, NULL) == 0)
            n++;
        if ((n & 1023) == 0)
            gmp_pool_tune(p, 4 + (size_t)(n >> 10) % 8);
    }
    atomic_fetch_add(&pool_submitted, n);
    if (p)
        gmp_pool_release(p);        /* waits for every task */
    gmp_wg_done(wg);
}

static void key_dtor(void *v)
{
    (void)v;
    atomic_fetch_add(&key_dtors, 1);
}

static void key_user(void *arg)
{
    gmp_wg_t *wg = arg;
    static int token;
    if (gmp_setspecific(key, &token) == 0)
        atomic_fetch_add(&key_sets, 1);
    gmp_yield();
    if (gmp_getspecific(key) != &token)
        atomic_fetch_add(&failures, 1);
    gmp_wg_done(wg);
}

static void keys_and_locks(void *arg)
{
    gmp_wg_t *wg = arg;
    FILE *devnull = fopen("/dev/null", "w");
    while (running()) {
        gmp_wg_t kw = GMP_WG_INIT;
        gmp_wg_add(&kw, 8);
        for (int i = 0; i < 8; i++)
            gmp_go(key_user, &kw);
        gmp_wg_wait(&kw);
        gmp_lock_os_thread();
        pid_t t0 = (pid_t)syscall(SYS_gettid);
        gmp_yield();
        gmp_sleep(50000);
        if ((pid_t)syscall(SYS_gettid) != t0)
            atomic_fetch_add(&locked_bad, 1);
        gmp_unlock_os_thread();
        atomic_fetch_add(&locked_rounds, 1);
        gmp_stats_t st;
        if (gmp_stats(&st) != 0 || st.procs != (uint64_t)procs)
            atomic_fetch_add(&failures, 1);
        if (devnull && (atomic_load(&locked_rounds) & 63) == 0)
            gmp_dump(devnull);
    }
    if (devnull)
        fclose(devnull);
    gmp_wg_done(wg);
}

/* ---- Host threads ------------------------------------------------------- */

static gmp_chan_t *to_host, *from_host;
static _Atomic int64_t host_echoed, host_asked;

static void *host_thread(void *arg)
{
    (void)arg;
    int64_t v;
    while (gmp_chan_recv(to_host, &v) == 0) {
        v = -v;
        if (gmp_chan_send(from_host, &v) != 0)
            break;
        atomic_fetch_add(&host_echoed, 1);
    }
    return NULL;
}

static void host_client(void *arg)
{
    gmp_wg_t *wg = arg;
    int64_t n = 0, v;
    while (running()) {
        v = n + 1;
        if (gmp_chan_send(to_host, &v) != 0 ||
            gmp_chan_recv(from_host, &v) != 0 || v != -(n + 1))
            atomic_fetch_add(&failures, 1);
        n++;
    }
    atomic_fetch_add(&host_asked, n);
    gmp_wg_done(wg);
}

/* ---- The watchdog and main --------------------------------------------- */

static _Atomic int finished;

static void *watchdog(void *arg)
{
    (void)arg;
    int64_t last = -1;
    int still = 0;
    while (!atomic_load(&finished)) {
        sleep(1);
        int64_t now = atomic_load(&progress);
        still = now == last ? still + 1 : 0;
        last = now;
        if (still >= STALL) {
            fprintf(stderr, "soak: no progress for %d s; every goroutine:\n",
                    STALL);
            gmp_dump(stderr);
            _exit(3);
        }
    }
    return NULL;
}

static void soak_main(void *arg)
{
    (void)arg;
    gmp_wg_t all = GMP_WG_INIT, q_prod = GMP_WG_INIT;
    buffered = gmp_chan_make(sizeof(int64_t), 64);
    unbuffered = gmp_chan_make(sizeof(int64_t), 0);
    sel_a = gmp_chan_make(sizeof(int64_t), 4);
    sel_b = gmp_chan_make(sizeof(int64_t), 0);
    to_host = gmp_chan_make(sizeof(int64_t), 0);
    from_host = gmp_chan_make(sizeof(int64_t), 1);
    if (gmp_key_create(&key, key_dtor) != 0)
        abort();

    gmp_wg_add(&producers_wg, PRODUCERS);
    for (int i = 0; i < PRODUCERS; i++)
        gmp_go(producer, (void *)(intptr_t)i);
    gmp_wg_add(&all, CONSUMERS + 1);
    for (int i = 0; i < CONSUMERS; i++)
        gmp_go(consumer, &all);
    gmp_go(closer, &all);

    gmp_wg_add(&sel_senders, 2);
    gmp_go(select_sender, NULL);
    gmp_go(select_sender, NULL);
    gmp_wg_add(&all, 3);
    gmp_go(select_watcher, &all);
    gmp_go(select_receiver, &all);
    gmp_go(select_receiver, &all);

    gmp_wg_add(&all, 4);
    for (int i = 0; i < 4; i++)
        gmp_go(locker, &all);

    gmp_wg_add(&q_prod, 2);
    gmp_go(q_producer, &q_prod);
    gmp_go(q_producer, &q_prod);
    gmp_wg_add(&all, 2);
    gmp_go(q_consumer, &all);
    gmp_go(q_consumer, &all);
    gmp_go(q_finisher, &q_prod);

    gmp_wg_add(&all, 2);
    gmp_go(spawner, &all);
    gmp_go(spawner, &all);

    struct pair pairs[3];
    for (int i = 0; i < 3; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, pairs[i].fd) != 0)
            abort();
        pairs[i].wg = &all;
        gmp_wg_add(&all, 2);
        gmp_go(net_writer, &pairs[i]);
        gmp_go(net_reader, &pairs[i]);
    }
    struct bracket br;
    if (pipe(br.fd) != 0)
        abort();
    br.wg = &all;
    gmp_wg_add(&all, 2);
    gmp_go(sys_reader, &br);
    gmp_go(sys_writer, &br);

    gmp_wg_add(&all, 4);
    gmp_go(spinner, &all);
    gmp_go(pooler, &all);
    gmp_go(keys_and_locks, &all);
    gmp_go(host_client, &all);

    pthread_t hosts[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&hosts[i], NULL, host_thread, NULL);

    gmp_wg_wait(&all);
    gmp_wg_wait(&q_prod);
    gmp_chan_close(to_host);
    for (int i = 0; i < 2; i++)
        pthread_join(hosts[i], NULL);

    /* Key destructors run as each goroutine returns, after it said done:
     * wait for the last ones. */
    while (atomic_load(&key_dtors) < atomic_load(&key_sets))
        gmp_yield();
    check("once runs", atomic_load(&once_runs), atomic_load(&once_rounds));
    check("channel items", atomic_load(&ch_recv), atomic_load(&ch_sent));
    check("channel checksum", atomic_load(&ch_recv_sum),
          atomic_load(&ch_sent_sum));
    check("select items", atomic_load(&sel_recv), atomic_load(&sel_sent));
    check("mutex counter", mu_counter, atomic_load(&mu_incs));
    check("rwmutex writes", rw_x, atomic_load(&rw_writes));
    check("rwmutex torn reads", atomic_load(&rw_torn), 0);
    check("cond queue items", atomic_load(&q_got), atomic_load(&q_put));
    check("spawn-tree leaves", atomic_load(&tree_leaves),
          atomic_load(&tree_want));
    check("poller bytes", atomic_load(&net_recv), atomic_load(&net_sent));
    check("bracketed bytes", atomic_load(&sys_recv), atomic_load(&sys_sent));
    check("pool tasks", atomic_load(&pool_ran), atomic_load(&pool_submitted));
    check("key destructors", atomic_load(&key_dtors), atomic_load(&key_sets));
    check("locked thread moves", atomic_load(&locked_bad), 0);
    check("no-preempt thread moves", atomic_load(&nopreempt_bad), 0);
    check("host round trips", atomic_load(&host_echoed),
          atomic_load(&host_asked));
    gmp_stats_t st;
    gmp_stats(&st);
#if !defined(SOAK_TSAN)
    /* The spinner makes no runtime call for 20 ms at a time: with
     * preemption by signal on (off under TSan and valgrind, which the
     * soak does not run under), it was preempted. */
    if (st.preemptions == 0 && atomic_load(&spin_rounds) > 10) {
        printf("soak: the CPU-bound loop was never preempted  <- WRONG\n");
        atomic_fetch_add(&failures, 1);
    }
#endif
    printf("soak: %lld spin rounds, %llu preemptions, %llu goroutines "
           "created, %lld sleeps, %lld fd-wait timeouts\n",
           (long long)atomic_load(&spin_rounds),
           (unsigned long long)st.preemptions,
           (unsigned long long)st.goroutines_created,
           (long long)atomic_load(&sleeps), (long long)atomic_load(&net_waits));
    gmp_key_delete(key);
    gmp_chan_free(buffered);
    gmp_chan_free(unbuffered);
    gmp_chan_free(sel_a);
    gmp_chan_free(sel_b);
    gmp_chan_free(to_host);
    gmp_chan_free(from_host);
}

int main(int argc, char **argv)
{
    int secs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-p") == 0)
            procs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-t") == 0)
            secs = atoi(argv[i + 1]);
    }
    if (procs < 1 || secs < 1) {
        fprintf(stderr, "usage: gmprt-soak [-p procs] [-t seconds]\n");
        return 2;
    }
    deadline = gmp_nanotime() + (int64_t)secs * 1000 * MS;
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    int err = gmp_main(soak_main, NULL, &cfg);
    atomic_store(&finished, 1);
    pthread_join(wd, NULL);
    if (err != 0) {
        fprintf(stderr, "soak: gmp_main: %s\n", gmp_strerror(err));
        return 1;
    }
    int bad = atomic_load(&failures);
    printf("soak: procs=%d, %d s: %s\n", procs, secs,
           bad ? "FAILED" : "all counts agree");
    return bad ? 1 : 0;
}
