/*
 * test_hiredis.c - Debian's hiredis, unmodified, with its blocking API
 * from 1,000 goroutines at procs=2, through the hook library (linked, or
 * preloaded: ctest runs both). Each goroutine opens its own connection
 * to a redis-server this test starts on a loopback port, INCRs a shared
 * key and its own, and checks every reply; at the end the shared key
 * must count every INCR. Meanwhile a goroutine ticks every millisecond:
 * with blocking calls that held their Ps it could not run, and the test
 * counts its ticks. Exit 77 (skipped) when redis-server is not found.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmprt.h"
#include "redisd.h"

#define NG 1000
#define NINCR 20

static int port;
static _Atomic long bad, done, ticks;
static _Atomic int stop;
static gmp_wg_t wg;

static void client(void *arg)
{
    long k = (long)arg;
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        fprintf(stderr, "connect: %s\n", c ? c->errstr : "no memory");
        atomic_fetch_add(&bad, 1);
    } else {
        for (long i = 1; i <= NINCR; i++) {
            redisReply *r = redisCommand(c, "INCR all");
            redisReply *o = redisCommand(c, "INCR k%ld", k);
            if (!r || r->type != REDIS_REPLY_INTEGER || !o ||
                o->type != REDIS_REPLY_INTEGER || o->integer != i)
                atomic_fetch_add(&bad, 1);
            if (r)
                freeReplyObject(r);
            if (o)
                freeReplyObject(o);
        }
    }
    if (c)
        redisFree(c);
    atomic_fetch_add(&done, 1);
    gmp_wg_done(&wg);
}

static void ticker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        usleep(1000);               /* hooked: parks */
        atomic_fetch_add(&ticks, 1);
    }
    gmp_wg_done(&wg);
}

static long final_count;

static void run(void *arg)
{
    (void)arg;
    gmp_wg_add(&wg, 1);
    gmp_go(ticker, NULL);
    gmp_wg_t *w = &wg;
    gmp_wg_add(w, NG);
    for (long k = 0; k < NG; k++)
        gmp_go(client, (void *)k);
    while (atomic_load(&done) < NG)
        gmp_sleep(1000000);
    atomic_store(&stop, 1);
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = c && !c->err ? redisCommand(c, "GET all") : NULL;
    if (r && r->type == REDIS_REPLY_STRING)
        final_count = atol(r->str);
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    gmp_wg_wait(&wg);
}

int main(void)
{
    if (!redisd_found()) {
        printf("skipped: redis-server not found (Debian: redis-server)\n");
        return 77;
    }
    pid_t pid = redisd_start(&port);
    if (pid < 0) {
        fprintf(stderr, "redis-server did not start\n");
        return 1;
    }
    gmp_config_t cfg = {0};
    cfg.procs = 2;
    int err = gmp_main(run, NULL, &cfg);
    redisd_stop(pid);
    printf("clients %ld, bad replies %ld, all=%ld (want %d), ticks %ld\n",
           (long)atomic_load(&done), (long)atomic_load(&bad), final_count,
           NG * NINCR, (long)atomic_load(&ticks));
    return err == 0 && atomic_load(&bad) == 0 && final_count == NG * NINCR &&
                   atomic_load(&ticks) > 0
               ? 0
               : 1;
}
