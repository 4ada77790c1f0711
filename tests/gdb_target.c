/*
 * gdb_target.c - the program tests/test_gdb.sh debugs with
 * tools/gdb/gmprt-gdb.py.
 *
 * gmp_main's main goroutine starts goroutines with distinct start
 * functions: two park receiving from a channel nobody sends to, one in a
 * long gmp_sleep, one in gmp_wg_wait. Once every one of them is parked
 * (white-box: their G's status, read as the deadlock report reads it), the
 * main goroutine calls gdb_stop_here(), where gdb stops. The goroutine ids
 * are left in globals (gdb_*_goid) for the script to name.
 *
 * Built -O0 -g: each start function keeps its own frame (no tail call into
 * the runtime), so a goroutine's backtrace reaches it. Run without gdb it
 * just exits 0 (the parked goroutines are abandoned, as Go's main does).
 */
#include <stdio.h>
#include <stdlib.h>

#include "runtime.h"
#include "park.h"

#define NRECV 2

static gmp_chan_t *never;           /* nobody ever sends on it */
static gmp_wg_t started = GMP_WG_INIT;
static gmp_wg_t forever = GMP_WG_INIT;  /* never reaches zero */

volatile uint64_t gdb_main_goid;
volatile uint64_t gdb_recv_goid;    /* gdb_recv_worker's */
volatile uint64_t gdb_recv2_goid;   /* gdb_recv_worker2's */
volatile uint64_t gdb_sleep_goid;
volatile uint64_t gdb_wg_goid;

/* Where gdb stops: everything is parked by now. */
__attribute__((noinline)) void gdb_stop_here(void)
{
    __asm__ __volatile__("" ::: "memory");
}

__attribute__((noinline)) void gdb_recv_worker(void *arg)
{
    (void)arg;
    gdb_recv_goid = gmp_id();
    gmp_set_label("gdb-recv");
    gmp_wg_done(&started);
    int r = gmp_chan_recv(never, NULL);
    printf("gdb_recv_worker: woke up (%d)\n", r);
}

__attribute__((noinline)) void gdb_recv_worker2(void *arg)
{
    (void)arg;
    gdb_recv2_goid = gmp_id();
    gmp_wg_done(&started);
    int r = gmp_chan_recv(never, NULL);
    printf("gdb_recv_worker2: woke up (%d)\n", r);
}

__attribute__((noinline)) void gdb_sleeper(void *arg)
{
    (void)arg;
    gdb_sleep_goid = gmp_id();
    gmp_wg_done(&started);
    gmp_sleep(3600 * 1000000000LL);
    printf("gdb_sleeper: woke up\n");
}

__attribute__((noinline)) void gdb_wg_waiter(void *arg)
{
    (void)arg;
    gdb_wg_goid = gmp_id();
    gmp_wg_done(&started);
    gmp_wg_wait(&forever);
    printf("gdb_wg_waiter: woke up\n");
}

/* Goroutines parked with a wait reason; the same walk as the deadlock
 * report's. Racy reads of Gs other threads may be writing, which is fine for
 * a poll: statuses are atomic, and no slab is added after the spawns. */
static int parked(struct schedt *s)
{
    int n = 0;
    gmp__lock(&s->gflock);
    for (struct gslab *sl = s->gslabs; sl; sl = sl->next) {
        size_t len = (sl->len - sizeof *sl) / sizeof(struct g);
        struct g *end = sl == s->gslabs ? s->gchunk_next : sl->gs + len;
        for (struct g *gp = sl->gs; gp < end; gp++)
            if (atomic_load_explicit(&gp->status, memory_order_relaxed) ==
                    G_WAITING &&
                gp->waitreason != WAIT_NONE)
                n++;
    }
    gmp__unlock(&s->gflock);
    return n;
}

static void main_goroutine(void *arg)
{
    (void)arg;
    gdb_main_goid = gmp_id();
    never = gmp_chan_make(0, 0);
    gmp_wg_add(&forever, 1);
    gmp_wg_add(&started, NRECV + 2);
    gmp_go(gdb_recv_worker, NULL);
    gmp_go(gdb_recv_worker2, NULL);
    gmp_go(gdb_sleeper, NULL);
    gmp_go(gdb_wg_waiter, NULL);
    gmp_wg_wait(&started);
    /* Done was called just before each parks: wait for the parks. */
    struct schedt *s = atomic_load_explicit(&gmp__sched, memory_order_acquire);
    int64_t deadline = gmp_nanotime() + 30 * 1000000000LL;
    while (parked(s) < NRECV + 2) {
        if (gmp_nanotime() > deadline) {
            fprintf(stderr, "gdb_target: goroutines did not park\n");
            exit(1);
        }
        gmp_sleep(1000000);
    }
    gdb_stop_here();
    printf("gdb_target: done\n");
}

int main(void)
{
    gmp_config_t cfg = {0};
    cfg.procs = 2;
    return gmp_main(main_goroutine, NULL, &cfg) == 0 ? 0 : 1;
}
