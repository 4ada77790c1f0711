/*
 * hello.c - goroutines at work: main spawns eight workers that yield to
 * each other for three rounds, then waits for all of them with a wait
 * group.
 *
 *   cmake -B build && cmake --build build && ./build/examples/hello
 */
#include <stdatomic.h>
#include <stdio.h>

#include <gmprt.h>

#define WORKERS 8
#define ROUNDS  3

static gmp_wg_t wg = GMP_WG_INIT;
static atomic_int steps;

static void worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        printf("worker %d (goroutine %llu) round %d\n", id,
               (unsigned long long)gmp_id(), r);
        atomic_fetch_add(&steps, 1);
        gmp_yield();            /* let the others run: output interleaves */
    }
    gmp_wg_done(&wg);
}

static void main_goroutine(void *arg)
{
    (void)arg;
    printf("main goroutine %llu on %d Ps\n", (unsigned long long)gmp_id(),
           gmp_procs());
    gmp_wg_add(&wg, WORKERS);
    for (int i = 0; i < WORKERS; i++)
        gmp_go(worker, (void *)(intptr_t)i);
    gmp_wg_wait(&wg);
    printf("all %d workers done: %d steps\n", WORKERS, atomic_load(&steps));
}

int main(void)
{
    gmp_config_t cfg = {.procs = 2};
    int err = gmp_main(main_goroutine, NULL, &cfg);
    if (err) {
        fprintf(stderr, "gmp_main: %s\n", gmp_strerror(err));
        return 1;
    }
    return 0;
}
