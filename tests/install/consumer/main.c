/*
 * main.c - a user's program against an installed gmprt: start the runtime,
 * fan work out to goroutines and back over a channel, check the sum and
 * that the library's version is the header's. Exits 0 when all holds.
 */
#include <gmprt.h>
#include <stdio.h>
#include <string.h>

#define WORKERS 8
#define ITEMS   1000

static gmp_chan_t *work, *results;
static gmp_wg_t wg = GMP_WG_INIT;
static int failed;

static void worker(void *arg)
{
    (void)arg;
    long v, sum = 0;
    while (gmp_chan_recv(work, &v) == 0)
        sum += v;
    gmp_chan_send(results, &sum);
    gmp_wg_done(&wg);
}

static void main_goroutine(void *arg)
{
    (void)arg;
    work = gmp_chan_make(sizeof(long), 16);
    results = gmp_chan_make(sizeof(long), WORKERS);
    if (!work || !results) {
        failed = 1;
        return;
    }
    gmp_wg_add(&wg, WORKERS);
    for (int i = 0; i < WORKERS; i++)
        gmp_go(worker, NULL);
    for (long v = 1; v <= ITEMS; v++)
        gmp_chan_send(work, &v);
    gmp_chan_close(work);
    long total = 0, part;
    for (int i = 0; i < WORKERS; i++) {
        gmp_chan_recv(results, &part);
        total += part;
    }
    if (total != (long)ITEMS * (ITEMS + 1) / 2) {
        fprintf(stderr, "consumer: sum %ld\n", total);
        failed = 1;
    }
    gmp_wg_wait(&wg);   /* no worker touches a channel any more */
    gmp_chan_free(work);
    gmp_chan_free(results);
}

int main(void)
{
    if (strcmp(gmp_runtime_version(), GMPRT_VERSION) != 0 ||
        gmp_runtime_version_number() != GMPRT_VERSION_NUMBER) {
        fprintf(stderr, "consumer: library %s (%d), header %s (%d)\n",
                gmp_runtime_version(), gmp_runtime_version_number(),
                GMPRT_VERSION, GMPRT_VERSION_NUMBER);
        return 1;
    }
    int err = gmp_main(main_goroutine, NULL, NULL);
    if (err != 0) {
        fprintf(stderr, "consumer: gmp_main: %s\n", gmp_strerror(err));
        return 1;
    }
    if (failed)
        return 1;
    printf("consumer: gmprt %s ok\n", gmp_runtime_version());
    return 0;
}
