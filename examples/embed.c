/*
 * embed.c - a host program that keeps its own threads and uses gmprt in
 * the background: it starts the runtime, starts worker goroutines, feeds
 * them jobs from two of its own threads over a channel, collects the
 * results on another channel from its main thread, and shuts down.
 * Plain threads and goroutines share channels: a send or receive blocks a
 * thread where it would park a goroutine.
 *
 *   cmake -B build && cmake --build build && ./build/examples/embed
 *
 * The thread hooks show where an embedding runtime (a garbage collector,
 * say) would register the runtime's threads.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <gmprt.h>

#define WORKERS  8
#define FEEDERS  2
#define JOBS     5000           /* per feeder */

static gmp_chan_t *jobs;        /* uint64_t: a number to work on */
static gmp_chan_t *results;     /* uint64_t: its Collatz step count */
static gmp_wg_t workers_done = GMP_WG_INIT;
static atomic_int threads_started, threads_stopped;

static uint64_t collatz_steps(uint64_t n)
{
    uint64_t steps = 0;
    while (n > 1) {
        n = n % 2 ? 3 * n + 1 : n / 2;
        steps++;
    }
    return steps;
}

/* A goroutine: works until the jobs channel is closed and empty. */
static void worker(void *arg)
{
    (void)arg;
    uint64_t n;
    while (gmp_chan_recv(jobs, &n) == 0) {
        uint64_t steps = collatz_steps(n);
        gmp_chan_send(results, &steps);
    }
    gmp_wg_done(&workers_done);
}

/* A host thread: sends its share of the jobs (blocking while the buffer
 * is full). */
static void *feeder(void *arg)
{
    uint64_t first = (uint64_t)(uintptr_t)arg * JOBS + 1;
    for (uint64_t n = first; n < first + JOBS; n++)
        gmp_chan_send(jobs, &n);
    return NULL;
}

static void on_thread_start(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&threads_started, 1);
}

static void on_thread_stop(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&threads_stopped, 1);
}

int main(void)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.thread_start = on_thread_start;
    cfg.thread_stop = on_thread_stop;
    int err = gmp_init(&cfg);
    if (err) {
        fprintf(stderr, "gmp_init: %s\n", gmp_strerror(err));
        return 1;
    }
    jobs = gmp_chan_make(sizeof(uint64_t), 64);
    results = gmp_chan_make(sizeof(uint64_t), 64);
    if (!jobs || !results) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    gmp_wg_add(&workers_done, WORKERS);
    for (int i = 0; i < WORKERS; i++)
        gmp_go(worker, NULL);

    pthread_t feeders[FEEDERS];
    for (int i = 0; i < FEEDERS; i++)
        pthread_create(&feeders[i], NULL, feeder, (void *)(uintptr_t)i);

    /* This thread collects while the feeders still send. */
    uint64_t total = 0, longest = 0;
    for (int i = 0; i < FEEDERS * JOBS; i++) {
        uint64_t steps;
        gmp_chan_recv(results, &steps);
        total += steps;
        if (steps > longest)
            longest = steps;
    }
    for (int i = 0; i < FEEDERS; i++)
        pthread_join(feeders[i], NULL);
    gmp_chan_close(jobs);       /* the workers drain it and return */
    gmp_wg_wait(&workers_done);

    uint64_t want = 0;
    for (uint64_t n = 1; n <= FEEDERS * JOBS; n++)
        want += collatz_steps(n);
    printf("%d jobs from %d host threads on %d goroutines (%d Ps): "
           "%llu Collatz steps in all, longest %llu: %s\n",
           FEEDERS * JOBS, FEEDERS, WORKERS, gmp_procs(),
           (unsigned long long)total, (unsigned long long)longest,
           total == want ? "right" : "WRONG");

    gmp_chan_free(jobs);
    gmp_chan_free(results);
    gmp_shutdown();
    printf("runtime threads: %d started, %d stopped\n",
           atomic_load(&threads_started), atomic_load(&threads_stopped));
    return total == want &&
                   atomic_load(&threads_started) ==
                       atomic_load(&threads_stopped)
               ? 0
               : 1;
}
