/*
 * redis.c - gmprt-bench-redis, the `redis` case of BENCHMARKS.md:
 * 100 clients, one connection each to a local redis-server that this
 * program starts, 1,000 INCRs each through hiredis's unmodified blocking
 * API, and a sleeper that sleeps 1 ms in a loop meanwhile. gmprt runs the
 * clients and the sleeper as goroutines at procs=2 through the hook
 * library; the peer runs them as 101 pthreads in the same program. The
 * two alternate, ROUNDS times each; each prints ops/s, the peak number of
 * the process's threads (sampled by the sleeper at each wake) and the
 * sleeper's p99 lateness, then the medians and their ratio. During the
 * gmprt rounds a plain thread (the probe, not counted among the threads)
 * sleeps 1 ms in a loop too: its p99 lateness is what the kernel gives
 * any thread under that load, the floor of the sleeper's.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gmprt.h"
#include "redisd.h"

#define NCLIENT 100
#define NINCR 1000
#define ROUNDS 5
#define PROCS 2
#define MAXLATE 200000

static int port;
static _Atomic int stop, bad;
static int64_t late[MAXLATE], plate[MAXLATE];
static int nlate, nplate, peak;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void client(void *arg)
{
    long k = (long)arg;
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        atomic_fetch_add(&bad, 1);
    } else {
        for (int i = 1; i <= NINCR; i++) {
            redisReply *r = redisCommand(c, "INCR k%ld", k);
            if (!r || r->type != REDIS_REPLY_INTEGER)
                atomic_fetch_add(&bad, 1);
            if (r)
                freeReplyObject(r);
        }
    }
    if (c)
        redisFree(c);
}

static void sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        int64_t t0 = now_ns();
        usleep(1000);
        int64_t l = now_ns() - t0 - 1000000;
        if (nlate < MAXLATE)
            late[nlate++] = l > 0 ? l : 0;
        int n = threads_now();
        if (n > peak)
            peak = n;
    }
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

struct result {
    double ops, p99_us, probe_p99_us;
    int threads;
};

/* The p99 of n lateness samples, in us; sorts v. */
static double p99_us(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp64);
    return n ? (double)v[(n * 99) / 100] / 1000 : 0;
}

static void reset(void)
{
    atomic_store(&stop, 0);
    nlate = 0;
    peak = 0;
}

static struct result finish(int64_t ns)
{
    struct result r = {.ops = (double)NCLIENT * NINCR * 1e9 / (double)ns,
                       .threads = peak};
    r.p99_us = p99_us(late, nlate);
    return r;
}

/* ---- gmprt ---------------------------------------------------------------- */

static gmp_wg_t wg;
static int64_t g_ns;

static void g_client(void *arg)
{
    client(arg);
    gmp_wg_done(&wg);
}

/* arg: g_main's wait group for the sleeper alone. */
static void g_sleeper(void *arg)
{
    sleeper(NULL);
    gmp_wg_done(arg);
}

static void g_main(void *arg)
{
    (void)arg;
    gmp_wg_t sw = GMP_WG_INIT;
    gmp_wg_add(&sw, 1);
    gmp_go(g_sleeper, &sw);
    int64_t t0 = now_ns();
    gmp_wg_add(&wg, NCLIENT);
    for (long k = 0; k < NCLIENT; k++)
        gmp_go(g_client, (void *)k);
    gmp_wg_wait(&wg);
    g_ns = now_ns() - t0;
    atomic_store(&stop, 1);
    gmp_wg_wait(&sw);               /* its samples are all in */
}

static _Atomic int probe_stop;

/* The probe: the sleeper's loop on a plain thread, into plate. */
static void *probe(void *arg)
{
    (void)arg;
    while (!atomic_load(&probe_stop)) {
        int64_t t0 = now_ns();
        usleep(1000);               /* libc's: the hooks pass a plain
                                       thread's call through */
        int64_t l = now_ns() - t0 - 1000000;
        if (nplate < MAXLATE)
            plate[nplate++] = l > 0 ? l : 0;
    }
    return NULL;
}

static struct result run_gmprt(void)
{
    reset();
    nplate = 0;
    atomic_store(&probe_stop, 0);
    pthread_t pt;
    bool probing = pthread_create(&pt, NULL, probe, NULL) == 0;
    gmp_config_t cfg = {0};
    cfg.procs = PROCS;
    if (gmp_main(g_main, NULL, &cfg) != 0)
        atomic_fetch_add(&bad, 1);
    atomic_store(&probe_stop, 1);
    if (probing)
        pthread_join(pt, NULL);
    struct result r = finish(g_ns);
    r.threads -= probing;           /* the probe is not the runtime's */
    r.probe_p99_us = p99_us(plate, nplate);
    return r;
}

/* ---- pthreads -------------------------------------------------------------- */

static void *t_client(void *arg)
{
    client(arg);
    return NULL;
}

static void *t_sleeper(void *arg)
{
    sleeper(arg);
    return NULL;
}

static struct result run_pthread(void)
{
    reset();
    pthread_t s, t[NCLIENT];
    pthread_create(&s, NULL, t_sleeper, NULL);
    int64_t t0 = now_ns();
    for (long k = 0; k < NCLIENT; k++)
        pthread_create(&t[k], NULL, t_client, (void *)k);
    for (int k = 0; k < NCLIENT; k++)
        pthread_join(t[k], NULL);
    int64_t ns = now_ns() - t0;
    atomic_store(&stop, 1);
    pthread_join(s, NULL);
    return finish(ns);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v)
{
    qsort(v, ROUNDS, sizeof *v, cmpd);
    return v[ROUNDS / 2];
}

int main(void)
{
    if (!redisd_found()) {
        printf("redis: skipped, redis-server not found\n");
        return 0;
    }
    pid_t pid = redisd_start(&port);
    if (pid < 0) {
        fprintf(stderr, "redis: redis-server did not start\n");
        return 1;
    }
    double ops[2][ROUNDS], thr[2][ROUNDS], p99[2][ROUNDS], probe99[ROUNDS];
    const char *name[2] = {"pthread", "gmprt"};
    for (int i = 0; i < ROUNDS; i++)
        for (int w = 0; w < 2; w++) {
            struct result r = w ? run_gmprt() : run_pthread();
            ops[w][i] = r.ops;
            thr[w][i] = r.threads;
            p99[w][i] = r.p99_us;
            printf("redis %-7s round %d: %.0f ops/s, %d threads, "
                   "p99 late %.0f us", name[w], i + 1, r.ops, r.threads,
                   r.p99_us);
            if (w) {
                probe99[i] = r.probe_p99_us;
                printf(" (plain-thread probe: %.0f us)", r.probe_p99_us);
            }
            printf("\n");
        }
    redisd_stop(pid);
    double m[2][3];
    for (int w = 0; w < 2; w++) {
        m[w][0] = median(ops[w]);
        m[w][1] = median(thr[w]);
        m[w][2] = median(p99[w]);
        printf("redis %-7s median: %.0f ops/s, %.0f threads, p99 late %.0f "
               "us\n", name[w], m[w][0], m[w][1], m[w][2]);
    }
    printf("redis plain-thread probe during the gmprt rounds, median: p99 "
           "late %.0f us\n", median(probe99));
    printf("redis gmprt/pthread ops/s: %.2fx (target >= 1.1x); gmprt "
           "threads %.0f (target <= procs + 3 = %d); gmprt p99 late %.0f us "
           "(target < 1000)\n",
           m[1][0] / m[0][0], m[1][1], PROCS + 3, m[1][2]);
    if (atomic_load(&bad)) {
        fprintf(stderr, "redis: %d bad replies\n", atomic_load(&bad));
        return 1;
    }
    return 0;
}
