/*
 * pool.c - a worker pool: a few reusable goroutines run many small tasks.
 * main cuts [0, 1,600,000) into 32 slices and submits one task per slice
 * (count the primes in it) to a pool that runs at most 4 at a time. Half
 * way it raises the capacity to 8. Releasing the pool waits for every
 * task; then main adds up the counts.
 *
 *   cmake -B build && cmake --build build && ./build/examples/pool
 */
#include <stdio.h>

#include <gmprt.h>

#define TASKS 32
#define SLICE 50000

/* One task's work: its slice, and the count it finds. Each task writes
 * only its own job; main reads them after gmp_pool_release, which returns
 * once every task has. */
struct job {
    long lo, hi;
    long primes;
};

static struct job jobs[TASKS];

static int is_prime(long n)
{
    if (n < 2)
        return 0;
    for (long d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

static void count_primes(void *arg)
{
    struct job *j = arg;
    long count = 0;
    for (long n = j->lo; n < j->hi; n++)
        count += is_prime(n);
    j->primes = count;
}

static void main_goroutine(void *arg)
{
    (void)arg;
    gmp_pool_t *pool = gmp_pool_new(4, NULL);  /* NULL: default options */
    if (!pool) {
        fprintf(stderr, "gmp_pool_new failed\n");
        return;
    }
    for (int i = 0; i < TASKS; i++) {
        if (i == TASKS / 2) {
            printf("%d tasks submitted: %zu running, capacity %zu\n", i,
                   gmp_pool_running(pool), gmp_pool_cap(pool));
            gmp_pool_tune(pool, 8);
            printf("capacity raised to %zu\n", gmp_pool_cap(pool));
        }
        jobs[i].lo = (long)i * SLICE;
        jobs[i].hi = (long)(i + 1) * SLICE;
        /* Waits while the pool runs as many tasks as its capacity. */
        int err = gmp_pool_submit(pool, count_primes, &jobs[i]);
        if (err) {
            fprintf(stderr, "gmp_pool_submit: %s\n", gmp_strerror(err));
            break;
        }
    }
    printf("all %d submitted: %zu running\n", TASKS, gmp_pool_running(pool));
    gmp_pool_release(pool);     /* waits for every task, then frees */
    long total = 0;
    for (int i = 0; i < TASKS; i++)
        total += jobs[i].primes;
    printf("%ld primes below %ld\n", total, (long)TASKS * SLICE);
}

int main(void)
{
    int err = gmp_main(main_goroutine, NULL, NULL);
    if (err) {
        fprintf(stderr, "gmp_main: %s\n", gmp_strerror(err));
        return 1;
    }
    return 0;
}
