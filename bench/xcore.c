/*
 * xcore.c - a probe of the machine, not a benchmark case: what one cache
 * line costs to pass between two CPUs and back.
 *
 *   gmprt-xcore
 *
 * Two threads, pinned to the first two CPUs this process may use (where
 * the kernel allows), hand a counter on one cache line back and forth
 * 200,000 times, each spinning on the other's store; prints
 *   xcore=<ns per round trip>
 * or nothing with fewer than two CPUs. Exit status 1 if the CPU set
 * cannot be read or the thread cannot be made.
 *
 * Why: on a virtual machine the host may place the two vCPUs near each
 * other (a shared cache) or far apart, and move them while the suite
 * runs. The cases that pass work between cores (pool, echo, mpmc) then
 * change speed by a third while the ones that do not (switch, yield) stay
 * put, and the ratio against Go moves too, since the two runtimes do not
 * pass the same number of lines per task. bench/run.sh runs this before
 * each case and prints the figures under the table, so that a reader can
 * tell which placement a row was measured in.
 *
 * Plain C, libc and pthreads only, like the echo client.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define ROUNDS 200000

/* The line the two threads pass: even values are the pinger's to write,
 * odd ones the ponger's. */
static _Alignas(64) _Atomic int64_t ball;

static int cpu_b;                   /* the ponger's */

/* Best effort: unpinned, the two spinning threads still end up on two
 * CPUs, only the kernel chooses which. */
static void pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

static void *ponger(void *arg)
{
    (void)arg;
    pin(cpu_b);
    for (int64_t i = 0; i < ROUNDS; i++) {
        /* Acquire/release: the only data is the counter itself; these
         * orders keep the hand-over a plain load and a plain store on
         * x86-64, as the runtime's own wake-ups are. */
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(void)
{
    cpu_set_t cpus;
    int cpu_a = -1;
    cpu_b = -1;
    if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) {
        perror("gmprt-xcore: sched_getaffinity");
        return 1;
    }
    for (int c = 0; c < CPU_SETSIZE && cpu_b < 0; c++) {
        if (!CPU_ISSET(c, &cpus))
            continue;
        if (cpu_a < 0)
            cpu_a = c;
        else
            cpu_b = c;
    }
    if (cpu_b < 0)
        return 0;               /* one CPU: nothing to measure */
    pin(cpu_a);
    pthread_t t;
    if (pthread_create(&t, NULL, ponger, NULL) != 0) {
        fprintf(stderr, "gmprt-xcore: pthread_create failed\n");
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t i = 0; i < ROUNDS; i++) {
        /* Release/acquire, as the ponger's. */
        atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                (double)(t1.tv_nsec - t0.tv_nsec);
    printf("xcore=%.0f\n", ns / ROUNDS);
    return 0;
}
