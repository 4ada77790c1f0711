/*
 * gmprt_bench.c - gmprt's side of the benchmark suite (bench/README.md).
 *
 *   gmprt-bench <name> <procs|all> [port]
 *
 * Prints one line per measured figure on stdout and nothing else:
 *   bench=<name> procs=<P> n=<work count> value=<number> unit=<unit>
 * Exit status: 0 ok, 1 a case's own check failed, 2 bad command line or a
 * case not implemented yet. Only the work is timed: the clock starts just
 * before the first spawn and stops when the waiting main wakes.
 *
 * `echo <procs|all> <port>` is a server, not a measurement: it serves on
 * 127.0.0.1:<port> until SIGTERM or SIGINT, prints nothing and exits 0;
 * the external load client (bench/echo_client.c) prints the result.
 * `http <procs|all> <port>` is a server in the same way, loaded by wrk
 * (bench/run.sh prints the result).
 *
 * `work-floor <procs|all>` is a probe, not a case: the tasks of pool and
 * spawnwork on plain threads with no runtime (see bench_work_floor);
 * `latency-floor <procs|all>` likewise the latency case's load (see
 * bench_latency_floor).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <gmprt.h>

#include "context.h"            /* the switch case runs the bare switch */

#define LCG_MUL  6364136223846793005ULL
#define LCG_INC  1442695040888963407ULL
#define LCG_SEED 42ULL

static const char *case_name;
static int procs;
static int port;                /* echo's and http's; 0 when not given */
static int status;              /* exit status set by a failing check */

static void emit(int64_t n, double value, const char *unit)
{
    printf("bench=%s procs=%d n=%lld value=%.3f unit=%s\n", case_name, procs,
           (long long)n, value, unit);
}

static int fail(const char *what)
{
    fprintf(stderr, "gmprt-bench %s: %s\n", case_name, what);
    status = 1;
    return 1;
}

/* A check failed where the case cannot go on (a goroutine would otherwise
 * wait for ever): report it and end the process. */
static _Noreturn void die(const char *what)
{
    fail(what);
    exit(1);
}

/* A draw in 1..m: advance, then map (BENCHMARKS.md). */
static uint64_t lcg_draw(uint64_t *s, uint64_t m)
{
    *s = *s * LCG_MUL + LCG_INC;
    return 1 + (*s >> 33) % m;
}

static uint64_t lcg_steps(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x = x * LCG_MUL + LCG_INC;
    return x;
}

/* ---- switch: two contexts, no scheduler ---------------------------------- */

#define SWITCH_ROUNDS 5000000

static void other(void *arg, void *from)
{
    (void)arg;
    for (;;)
        from = gmp__ctx_jump(from);
}

static void bench_switch(void)
{
    size_t size = 64 * 1024;
    char *stack = malloc(size);
    if (!stack) {
        fail("out of memory");
        return;
    }
    struct gmp__ctx c;
    gmp__ctx_make(&c, stack + size, other, NULL);
    void *sp = gmp__ctx_jump(c.sp);                 /* warm-up round trip */
    int64_t t0 = gmp_nanotime();
    for (int i = 0; i < SWITCH_ROUNDS; i++)
        sp = gmp__ctx_jump(sp);
    int64_t el = gmp_nanotime() - t0;
    emit(2 * SWITCH_ROUNDS, (double)el / (2.0 * SWITCH_ROUNDS), "ns/switch");
    free(stack);
}

/* ---- yield: 2 goroutines, 5,000,000 yields each --------------------------- */

#define YIELDS 5000000

static gmp_wg_t wg;

static void yielder(void *arg)
{
    (void)arg;
    for (int i = 0; i < YIELDS; i++)
        gmp_yield();
    gmp_wg_done(&wg);
}

/* Runs a and b as goroutines, each ending with gmp_wg_done(&wg), and
 * returns the ns from just before the first spawn to main's wake-up (the
 * count is set before the clock starts). */
static int64_t run_pair(void (*a)(void *), void (*b)(void *))
{
    gmp_wg_add(&wg, 2);
    int64_t t0 = gmp_nanotime();
    if (gmp_go(a, NULL) != 0 || gmp_go(b, NULL) != 0)
        die("gmp_go failed");
    gmp_wg_wait(&wg);
    return gmp_nanotime() - t0;
}

static void bench_yield(void *arg)
{
    (void)arg;
    int64_t el = run_pair(yielder, yielder);
    emit(2 * YIELDS, (double)el / (2.0 * YIELDS), "ns/yield");
}

/* ---- spawn: 1,000,000 goroutines that only signal ------------------------- */

#define SPAWNS 1000000

static void spawned(void *arg)
{
    (void)arg;
    gmp_wg_done(&wg);
}

static void bench_spawn(void *arg)
{
    (void)arg;
    gmp_wg_add(&wg, SPAWNS);
    int64_t t0 = gmp_nanotime();
    for (int i = 0; i < SPAWNS; i++)
        if (gmp_go(spawned, NULL) != 0) {
            fail("gmp_go failed");
            exit(1);
        }
    gmp_wg_wait(&wg);
    int64_t el = gmp_nanotime() - t0;
    emit(SPAWNS, (double)el / SPAWNS, "ns/goroutine");
}

/* ---- skynet: a tree of 1,000,000 leaves, fan-out 10 ----------------------- */

#define SKYNET_LEAVES 1000000
#define SKYNET_SUM    499999500000LL

/* A node sums the leaves num..num+size-1 and sends the sum on out. */
struct skynet_node {
    int64_t num, size;
    gmp_chan_t *out;
};

/* A leaf sends its own index; an inner node spawns 10 children that send on
 * its unbuffered channel. The children's arguments live in the parent's
 * frame, which outlasts them: the parent returns only after all 10 sent. */
static void skynet_node(void *arg)
{
    const struct skynet_node *me = arg;
    int64_t sum = me->num;
    gmp_chan_t *out = me->out;
    if (me->size > 1) {
        gmp_chan_t *c = gmp_chan_make(sizeof(int64_t), 0);
        if (!c)
            die("gmp_chan_make failed");
        struct skynet_node kids[10];
        int64_t child = me->size / 10;
        for (int i = 0; i < 10; i++) {
            kids[i] = (struct skynet_node){me->num + i * child, child, c};
            if (gmp_go(skynet_node, &kids[i]) != 0)
                die("gmp_go failed");
        }
        sum = 0;
        for (int i = 0; i < 10; i++) {
            int64_t v;
            if (gmp_chan_recv(c, &v) != 0)
                die("gmp_chan_recv failed");
            sum += v;
        }
        gmp_chan_free(c);
    }
    if (gmp_chan_send(out, &sum) != 0)
        die("gmp_chan_send failed");
}

static void bench_skynet(void *arg)
{
    (void)arg;
    gmp_chan_t *out = gmp_chan_make(sizeof(int64_t), 0);
    if (!out) {
        fail("gmp_chan_make failed");
        return;
    }
    struct skynet_node root = {0, SKYNET_LEAVES, out};
    int64_t sum;
    int64_t t0 = gmp_nanotime();
    if (gmp_go(skynet_node, &root) != 0)
        die("gmp_go failed");
    int err = gmp_chan_recv(out, &sum);
    int64_t el = gmp_nanotime() - t0;
    gmp_chan_free(out);
    if (err != 0 || sum != SKYNET_SUM) {
        fail(err ? "gmp_chan_recv failed" : "sum is not 499999500000");
        return;
    }
    emit(SKYNET_LEAVES, (double)el / 1e6, "ms");
}

/* ---- pingpong: 1,000,000 round trips over two unbuffered channels --------- */

#define PINGPONG_ROUNDS 1000000

static gmp_chan_t *ping, *pong;
static int64_t pingpong_bad;    /* written by A, read by main after the wait */

static void pinger(void *arg)                   /* A */
{
    (void)arg;
    int64_t bad = 0;
    for (int64_t i = 0; i < PINGPONG_ROUNDS; i++) {
        int64_t v;
        if (gmp_chan_send(ping, &i) != 0 || gmp_chan_recv(pong, &v) != 0)
            die("gmp_chan_send or gmp_chan_recv failed");
        bad += v != i;
    }
    pingpong_bad = bad;
    gmp_wg_done(&wg);
}

static void ponger(void *arg)                   /* B */
{
    (void)arg;
    for (int i = 0; i < PINGPONG_ROUNDS; i++) {
        int64_t v;
        if (gmp_chan_recv(ping, &v) != 0 || gmp_chan_send(pong, &v) != 0)
            die("gmp_chan_recv or gmp_chan_send failed");
    }
    gmp_wg_done(&wg);
}

static void bench_pingpong(void *arg)
{
    (void)arg;
    ping = gmp_chan_make(sizeof(int64_t), 0);
    pong = gmp_chan_make(sizeof(int64_t), 0);
    if (!ping || !pong) {
        fail("gmp_chan_make failed");
        return;
    }
    int64_t el = run_pair(pinger, ponger);
    gmp_chan_free(ping);
    gmp_chan_free(pong);
    if (pingpong_bad != 0) {
        fail("a round trip echoed the wrong value");
        return;
    }
    emit(PINGPONG_ROUNDS, (double)el / PINGPONG_ROUNDS, "ns/roundtrip");
}

/* ---- chan and mpmc: 10,000,000 items over a channel of capacity 1024 ------ */

/* chan: 1 producer and 1 consumer; mpmc: 4 of each. The producers send
 * 0..n-1 between them, the consumers receive until the channel is closed and
 * add their sums to items_total, which must come to n(n-1)/2. */

#define CHAN_ITEMS 10000000LL
#define CHAN_CAP   1024
#define CHAN_SUM   (CHAN_ITEMS * (CHAN_ITEMS - 1) / 2)
#define MPMC_SIDES 4

static gmp_chan_t *items;
static _Atomic int64_t items_total;     /* each consumer adds its sum once */
static gmp_wg_t producers_wg;

/* A producer's work: sends lo..hi-1 on items. */
static void produce(int64_t lo, int64_t hi)
{
    for (int64_t i = lo; i < hi; i++)
        if (gmp_chan_send(items, &i) != 0)
            die("gmp_chan_send failed");
}

static void consumer(void *arg)
{
    (void)arg;
    int64_t sum = 0, v;
    int err;
    while ((err = gmp_chan_recv(items, &v)) == 0)
        sum += v;
    if (err != GMP_ECLOSED)
        die("gmp_chan_recv failed");
    atomic_fetch_add(&items_total, sum);
    gmp_wg_done(&wg);
}

static void chan_producer(void *arg)
{
    (void)arg;
    produce(0, CHAN_ITEMS);
    if (gmp_chan_close(items) != 0)
        die("gmp_chan_close failed");
    gmp_wg_done(&wg);
}

static void bench_chan(void *arg)
{
    (void)arg;
    items = gmp_chan_make(sizeof(int64_t), CHAN_CAP);
    if (!items) {
        fail("gmp_chan_make failed");
        return;
    }
    int64_t el = run_pair(chan_producer, consumer);
    gmp_chan_free(items);
    if (atomic_load(&items_total) != CHAN_SUM) {
        fail("sum is not n(n-1)/2");
        return;
    }
    emit(CHAN_ITEMS, (double)el / CHAN_ITEMS, "ns/item");
}

/* Producer k sends its quarter, k*n/4 .. (k+1)*n/4 - 1. */
static void mpmc_producer(void *arg)
{
    int64_t k = (int64_t)(uintptr_t)arg;
    produce(k * CHAN_ITEMS / MPMC_SIDES, (k + 1) * CHAN_ITEMS / MPMC_SIDES);
    gmp_wg_done(&producers_wg);
}

/* The consumers count down wg; main closes the channel once the producers
 * are done, then waits for the consumers. */
static void bench_mpmc(void *arg)
{
    (void)arg;
    items = gmp_chan_make(sizeof(int64_t), CHAN_CAP);
    if (!items) {
        fail("gmp_chan_make failed");
        return;
    }
    gmp_wg_add(&producers_wg, MPMC_SIDES);
    gmp_wg_add(&wg, MPMC_SIDES);
    int64_t t0 = gmp_nanotime();
    for (int k = 0; k < MPMC_SIDES; k++)
        if (gmp_go(consumer, NULL) != 0)
            die("gmp_go failed");
    for (uintptr_t k = 0; k < MPMC_SIDES; k++)
        if (gmp_go(mpmc_producer, (void *)k) != 0)
            die("gmp_go failed");
    gmp_wg_wait(&producers_wg);
    if (gmp_chan_close(items) != 0)
        die("gmp_chan_close failed");
    gmp_wg_wait(&wg);
    int64_t el = gmp_nanotime() - t0;
    gmp_chan_free(items);
    if (atomic_load(&items_total) != CHAN_SUM) {
        fail("sum is not n(n-1)/2");
        return;
    }
    emit(CHAN_ITEMS, (double)el / CHAN_ITEMS, "ns/item");
}

/* ---- steal: 10,000 tasks of 1..100 units from one spawner ----------------- */

#define STEAL_TASKS      10000
#define STEAL_UNIT_STEPS 10000
#define STEAL_UNITS      500479

static uint64_t slots[STEAL_TASKS];
static volatile uint64_t sink;  /* keeps the tasks' work observable */
static uint8_t task_units[STEAL_TASKS];
static uint64_t units_total;
static gmp_wg_t spawner_wg;

static void task(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    slots[i] = lcg_steps(i, (uint64_t)task_units[i] * STEAL_UNIT_STEPS);
    gmp_wg_done(&wg);
}

static void spawner(void *arg)
{
    (void)arg;
    uint64_t s = LCG_SEED, total = 0;
    for (uintptr_t i = 0; i < STEAL_TASKS; i++) {
        uint64_t u = lcg_draw(&s, 100);
        total += u;
        task_units[i] = (uint8_t)u;
        gmp_go(task, (void *)i);
    }
    units_total = total;
    gmp_wg_done(&spawner_wg);
}

static void bench_steal(void *arg)
{
    (void)arg;
    gmp_wg_add(&wg, STEAL_TASKS);
    gmp_wg_add(&spawner_wg, 1);
    int64_t t0 = gmp_nanotime();
    gmp_go(spawner, NULL);
    gmp_wg_wait(&wg);
    int64_t el = gmp_nanotime() - t0;
    gmp_wg_wait(&spawner_wg);
    if (units_total != STEAL_UNITS) {
        fail("units do not sum to 500479");
        return;
    }
    uint64_t x = 0;
    for (int i = 0; i < STEAL_TASKS; i++)
        x ^= slots[i];
    sink = x;
    emit(STEAL_TASKS, (double)el / 1e6, "ms");
}

/* ---- mutex: 1,000 goroutines, 10,000 locked increments each --------------- */

#define MUTEX_GS   1000
#define MUTEX_PERG 10000
#define MUTEX_OPS  ((int64_t)MUTEX_GS * MUTEX_PERG)

static gmp_mutex_t mu = GMP_MUTEX_INIT;
static int64_t counter;         /* guarded by mu */

static void incrementer(void *arg)
{
    (void)arg;
    for (int i = 0; i < MUTEX_PERG; i++) {
        gmp_mutex_lock(&mu);
        counter++;
        gmp_mutex_unlock(&mu);
    }
    gmp_wg_done(&wg);
}

static void bench_mutex(void *arg)
{
    (void)arg;
    gmp_wg_add(&wg, MUTEX_GS);
    int64_t t0 = gmp_nanotime();
    for (int i = 0; i < MUTEX_GS; i++)
        if (gmp_go(incrementer, NULL) != 0)
            die("gmp_go failed");
    gmp_wg_wait(&wg);
    int64_t el = gmp_nanotime() - t0;
    if (counter != MUTEX_OPS) {
        fail("counter is not 10,000,000");
        return;
    }
    emit(MUTEX_OPS, (double)el / MUTEX_OPS, "ns/op");
}

/* ---- timers: 100,000 goroutines sleep 1..50 ms ---------------------------- */

#define TIMER_GS 100000

static int64_t timer_ns[TIMER_GS];      /* drawn by main before the clock */
static int64_t timer_late[TIMER_GS];    /* goroutine i's lateness, in ns */

static void sleeper(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    int64_t t0 = gmp_nanotime();
    gmp_sleep(timer_ns[i]);
    timer_late[i] = gmp_nanotime() - t0 - timer_ns[i];
    gmp_wg_done(&wg);
}

static void bench_timers(void *arg)
{
    (void)arg;
    uint64_t s = LCG_SEED;
    for (int i = 0; i < TIMER_GS; i++)
        timer_ns[i] = (int64_t)lcg_draw(&s, 50) * 1000000;
    gmp_wg_add(&wg, TIMER_GS);
    int64_t t0 = gmp_nanotime();
    for (uintptr_t i = 0; i < TIMER_GS; i++)
        if (gmp_go(sleeper, (void *)i) != 0)
            die("gmp_go failed");
    gmp_wg_wait(&wg);
    int64_t el = gmp_nanotime() - t0;
    /* The wait group's release orders every goroutine's store before
     * these reads, as Go's WaitGroup does. */
    int64_t sum = 0, early = 0;
    for (int i = 0; i < TIMER_GS; i++) {
        sum += timer_late[i];
        early += timer_late[i] < 0;
    }
    if (early) {
        fail("a sleep returned before its time");
        return;
    }
    emit(TIMER_GS, (double)el / 1e6, "ms");
    emit(TIMER_GS, (double)sum / TIMER_GS / 1e3, "us_late");
}

/* ---- idle: RSS of 100,000 goroutines parked on a receive ------------------ */

#define IDLE_GS        100000
#define IDLE_SETTLE_NS 20000000 /* 20 ms after the last one reports in */

static gmp_chan_t *idle_chan;
static gmp_wg_t parked_wg;     /* each goroutine reports in before it parks */

/* One "<key>: <n> kB" line of /proc/self/status (VmRSS, VmHWM) in KiB,
 * or -1. Read without stdio, whose buffer would add to the figure. */
static int64_t status_kib(const char *key)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    size_t klen = strlen(key);
    for (char *line = buf; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, key, klen) == 0 && line[klen] == ':')
            return strtoll(line + klen + 1, NULL, 10);
    }
    return -1;
}

static void idler(void *arg)
{
    (void)arg;
    gmp_wg_done(&parked_wg);
    if (gmp_chan_recv(idle_chan, NULL) != GMP_ECLOSED)
        die("gmp_chan_recv did not report the close");
    gmp_wg_done(&wg);
}

static void bench_idle(void *arg)
{
    (void)arg;
    idle_chan = gmp_chan_make(0, 0);
    if (!idle_chan) {
        fail("gmp_chan_make failed");
        return;
    }
    gmp_wg_add(&parked_wg, IDLE_GS);
    gmp_wg_add(&wg, IDLE_GS);
    int64_t before = status_kib("VmRSS") * 1024;
    if (before < 0) {
        fail("cannot read /proc/self/statm");
        return;
    }
    for (int i = 0; i < IDLE_GS; i++)
        if (gmp_go(idler, NULL) != 0)
            die("gmp_go failed");
    gmp_wg_wait(&parked_wg);
    /* The last ones to report in have yet to reach the receive. */
    gmp_sleep(IDLE_SETTLE_NS);
    int64_t after = status_kib("VmRSS") * 1024;
    if (after < 0)
        die("cannot read /proc/self/statm");
    if (gmp_chan_close(idle_chan) != 0)
        die("gmp_chan_close failed");
    gmp_wg_wait(&wg);
    gmp_chan_free(idle_chan);
    emit(IDLE_GS, (double)(after - before) / IDLE_GS, "bytes/goroutine");
}

/* ---- syscall: bracketed getppid beside a CPU-bound goroutine --------------- */

#define SYSCALL_CALLS 1000000
#define SYSCALL_STEPS 200000000ULL

static int64_t sys_start, sys_ta, sys_tb, sys_bare;

/* The floor under ns/syscall: the same calls with no bracket, alone. */
static void sys_bare_caller(void *arg)
{
    (void)arg;
    int64_t t = gmp_nanotime();
    for (int i = 0; i < SYSCALL_CALLS; i++)
        (void)syscall(SYS_getppid);
    sys_bare = gmp_nanotime() - t;
    gmp_wg_done(&wg);
}

static void sys_alone(void *arg)
{
    (void)arg;
    sink ^= lcg_steps(LCG_SEED, SYSCALL_STEPS);
    gmp_wg_done(&wg);
}

static void sys_caller(void *arg)               /* A */
{
    (void)arg;
    for (int i = 0; i < SYSCALL_CALLS; i++)
        (void)GMP_SYSCALL(syscall(SYS_getppid));
    sys_ta = gmp_nanotime() - sys_start;
    gmp_wg_done(&wg);
}

static void sys_cruncher(void *arg)             /* B */
{
    (void)arg;
    uint64_t x = lcg_steps(LCG_SEED, SYSCALL_STEPS);
    sys_tb = gmp_nanotime() - sys_start;
    sink ^= x;
    gmp_wg_done(&wg);
}

static void bench_syscall(void *arg)
{
    (void)arg;
    gmp_wg_add(&wg, 1);
    gmp_go(sys_bare_caller, NULL);
    gmp_wg_wait(&wg);

    gmp_wg_add(&wg, 1);
    int64_t t = gmp_nanotime();
    gmp_go(sys_alone, NULL);
    gmp_wg_wait(&wg);
    int64_t t0 = gmp_nanotime() - t;

    gmp_wg_add(&wg, 2);
    sys_start = gmp_nanotime();
    gmp_go(sys_caller, NULL);
    gmp_go(sys_cruncher, NULL);
    gmp_wg_wait(&wg);
    emit(SYSCALL_CALLS, (double)sys_ta / SYSCALL_CALLS, "ns/syscall");
    emit(SYSCALL_CALLS, (double)sys_bare / SYSCALL_CALLS, "ns/bare");
    emit(SYSCALL_CALLS, (double)(sys_ta - sys_bare) / SYSCALL_CALLS, "ns/own");
    emit((int64_t)SYSCALL_STEPS, (double)sys_tb / (double)t0, "slowdown");
}

/* ---- pool and spawnwork: 1,000,000 tasks of 1,000 LCG steps -------------- */

/* Task i runs WORK_STEPS steps from x = i and adds its x to work_sum; the
 * sum over all tasks (mod 2^64) is WORK_SUM, computed once with the same
 * LCG. */
#define WORK_TASKS   1000000
#define WORK_STEPS   1000
#define WORK_SUM     4605739820768478432ULL
#define POOL_WORKERS 10000

static _Atomic uint64_t work_sum;

/* Task i's work, the same in pool, spawnwork and work-floor. */
static void work_one(uintptr_t i)
{
    uint64_t x = lcg_steps(i, WORK_STEPS);
    /* Relaxed: a sum; the wait group (the joins, in work-floor) orders it
     * before main's read. */
    atomic_fetch_add_explicit(&work_sum, x, memory_order_relaxed);
}

static void work_task(void *arg)
{
    work_one((uintptr_t)arg);
    gmp_wg_done(&wg);
}

/* Checks the sum, then prints the time and the peak RSS growth (VmHWM at
 * the end minus VmRSS at the start). */
static void emit_work(int64_t el, int64_t rss0)
{
    int64_t hwm = status_kib("VmHWM");
    if (hwm < 0) {
        fail("cannot read /proc/self/status");
        return;
    }
    if (atomic_load(&work_sum) != WORK_SUM) {
        fail("the tasks' sum is wrong");
        return;
    }
    emit(WORK_TASKS, (double)el / 1e6, "ms");
    emit(WORK_TASKS, (double)(hwm - rss0), "KiB");
}

/* pool (through a pool of POOL_WORKERS) or spawnwork (one goroutine per
 * task): the same tasks, timed from the first submit to the last done. */
static void bench_work(int pooled)
{
    int64_t rss0 = status_kib("VmRSS");
    if (rss0 < 0) {
        fail("cannot read /proc/self/status");
        return;
    }
    gmp_pool_t *pool = NULL;
    if (pooled && !(pool = gmp_pool_new(POOL_WORKERS, NULL))) {
        fail("gmp_pool_new failed");
        return;
    }
    gmp_wg_add(&wg, WORK_TASKS);
    int64_t t0 = gmp_nanotime();
    for (uintptr_t i = 0; i < WORK_TASKS; i++) {
        int rc = pool ? gmp_pool_submit(pool, work_task, (void *)i)
                      : gmp_go(work_task, (void *)i);
        if (rc != 0)
            die(pool ? "gmp_pool_submit failed" : "gmp_go failed");
    }
    gmp_wg_wait(&wg);
    int64_t el = gmp_nanotime() - t0;
    if (pool && gmp_pool_release(pool) != 0)
        die("gmp_pool_release failed");
    emit_work(el, rss0);
}

static void bench_pool(void *arg)
{
    (void)arg;
    bench_work(1);
}

static void bench_spawnwork(void *arg)
{
    (void)arg;
    bench_work(0);
}

/* work-floor: not a case of the suite but a probe of the machine, as
 * gmprt-xcore is. The tasks of pool and spawnwork, sum included, run by
 * `procs` plain threads with no runtime in equal shares (thread k takes
 * tasks k, k + procs, ...): about the least time any runtime needs to run
 * them on that many CPUs, since none can save the tasks' own steps. On
 * two CPUs it is most of the time `pool` takes (bench/README.md). */
static void *floor_share(void *arg)
{
    for (uintptr_t i = (uintptr_t)arg; i < WORK_TASKS; i += (uintptr_t)procs)
        work_one(i);
    return NULL;
}

static void bench_work_floor(void)
{
    pthread_t *t = calloc((size_t)procs, sizeof *t);
    if (!t) {
        fail("out of memory");
        return;
    }
    int started = 0;
    int64_t t0 = gmp_nanotime();
    while (started < procs &&
           pthread_create(&t[started], NULL, floor_share,
                          (void *)(uintptr_t)started) == 0)
        started++;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    int64_t el = gmp_nanotime() - t0;
    free(t);
    if (started < procs)
        fail("cannot start a thread");
    else if (atomic_load(&work_sum) != WORK_SUM)
        fail("the tasks' sum is wrong");
    else
        emit(WORK_TASKS, (double)el / 1e6, "ms");
}

/* ---- echo and http: TCP servers for external load programs ---------------- */

#define ECHO_BUF 4096

/* SIGTERM and SIGINT end the server: the handler writes the signal number
 * to a pipe that the main goroutine reads through the netpoller, so the
 * runtime's own calls need not be async-signal-safe. */
static int stop_pipe[2];

static void on_stop(int sig)
{
    int saved = errno;          /* the interrupted code may look at it */
    unsigned char b = (unsigned char)sig;
    ssize_t r = write(stop_pipe[1], &b, 1);
    (void)r;                    /* a full pipe already holds a stop */
    errno = saved;
}

/* One connection: write back whatever arrives until end of file or an
 * error; gmp_write writes all of it or fails. */
static void echo_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[ECHO_BUF];
    for (;;) {
        ssize_t n = gmp_read(fd, buf, sizeof buf);
        if (n <= 0 || gmp_write(fd, buf, (size_t)n) != n)
            break;
    }
    gmp_close(fd);
}

/* http: one connection of an HTTP/1.1 keep-alive server. The hand parser
 * knows only what the case needs: a request ends at its first blank line
 * ("\r\n\r\n"), carries no body and must be a GET, which gets the one
 * fixed response. One read may hold several pipelined requests and the
 * start of the next; their responses go out in one write, and the partial
 * request moves to the buffer's start to wait for the rest. The
 * connection closes at end of file, on an error, on a request that is not
 * a GET (its body, if any, could not be skipped) or on one that does not
 * fit the buffer. The Go peer's raw server (bench/peers/go) is the same
 * parser, line for line. */
#define HTTP_BUF 4096
#define HTTP_OUT 8192

static const char http_resp[] = "HTTP/1.1 200 OK\r\n"
                                "Content-Length: 13\r\n"
                                "\r\n"
                                "Hello, world!";
#define HTTP_RESP_LEN (sizeof http_resp - 1)

static void http_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char in[HTTP_BUF], out[HTTP_OUT];
    size_t have = 0;            /* in[0..have): unanswered bytes */
    size_t scan = 0;            /* in[0..scan) holds no "\r\n\r\n" */
    for (;;) {
        ssize_t n = gmp_read(fd, in + have, sizeof in - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t req = 0, olen = 0;   /* req: where the next request starts */
        int bad = 0;
        for (;;) {
            const char *e = memmem(in + scan, have - scan, "\r\n\r\n", 4);
            if (e == NULL)
                break;
            if (memcmp(in + req, "GET ", 4) != 0) {
                bad = 1;
                break;
            }
            /* Only when more requests came in one read than fill out. */
            if (olen + HTTP_RESP_LEN > sizeof out) {
                if (gmp_write(fd, out, olen) != (ssize_t)olen) {
                    bad = 1;
                    break;
                }
                olen = 0;
            }
            memcpy(out + olen, http_resp, HTTP_RESP_LEN);
            olen += HTTP_RESP_LEN;
            req = scan = (size_t)(e - in) + 4;
        }
        if (olen > 0 && gmp_write(fd, out, olen) != (ssize_t)olen)
            break;
        if (bad)
            break;
        /* Keep the partial request; its end, when it comes, can begin at
         * most 3 bytes before what is here now. */
        have -= req;
        memmove(in, in + req, have);
        scan = have > 3 ? have - 3 : 0;
        if (have == sizeof in)
            break;              /* a request larger than the buffer */
    }
    gmp_close(fd);
}

/* The case's per-connection goroutine: echo_conn or http_conn. */
static void (*serve_conn)(void *);

static void acceptor(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = gmp_accept(lfd, NULL, NULL);
        if (fd == -ECONNABORTED || fd == -EINTR || fd == -EPROTO)
            continue;           /* the client gave up on this one */
        if (fd < 0) {
            fprintf(stderr, "gmprt-bench %s: accept: %s\n", case_name,
                    gmp_strerror(fd));
            exit(1);
        }
        /* As Go's net package does for every TCP connection. */
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (gmp_go(serve_conn, (void *)(intptr_t)fd) != 0)
            die("gmp_go failed");
    }
}

/* Serves on 127.0.0.1:port, a goroutine of serve_conn per connection,
 * until SIGTERM or SIGINT. */
static void serve(void)
{
    /* Non-blocking: the handler must never wait on a full pipe. */
    if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fail("pipe2 failed");
        return;
    }
    struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 ||
        sigaction(SIGINT, &sa, NULL) != 0) {
        fail("sigaction failed");
        return;
    }
    /* SO_REUSEADDR, as Go's listeners: a port left in TIME_WAIT by an
     * earlier run can be bound again at once. */
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (lfd < 0 ||
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(lfd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
        listen(lfd, SOMAXCONN) != 0) {
        fprintf(stderr, "gmprt-bench %s: cannot listen on 127.0.0.1:%d: "
                "%s\n", case_name, port, strerror(errno));
        status = 1;
        return;
    }
    if (gmp_go(acceptor, (void *)(intptr_t)lfd) != 0)
        die("gmp_go failed");
    unsigned char b;
    ssize_t n = gmp_read(stop_pipe[0], &b, 1);
    if (n != 1)
        fail(n < 0 ? gmp_strerror((int)n) : "the stop pipe closed");
    /* Returning abandons the acceptor and the connections, as Go's main. */
}

static void bench_echo(void *arg)
{
    (void)arg;
    serve_conn = echo_conn;
    serve();
}

static void bench_http(void *arg)
{
    (void)arg;
    serve_conn = http_conn;
    serve();
}

/* ---- stw: stopping a world where every P runs a CPU-bound goroutine ------ */

#define STW_ROUNDS 1000

static _Atomic int stw_spin_stop;       /* relaxed: a stop flag */
static _Atomic int64_t stw_spun;
static int64_t stw_ns[STW_ROUNDS];

static void stw_spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stw_spin_stop, memory_order_relaxed))
        atomic_fetch_add_explicit(&stw_spun, 1, memory_order_relaxed);
    gmp_wg_done(&wg);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The stopper: a plain thread, as a collector's would be. Between stops
 * the world runs 1 ms, so that each stop finds every P busy. */
static void *stw_stopper(void *arg)
{
    (void)arg;
    for (int i = 0; i < STW_ROUNDS; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        int64_t t0 = gmp_nanotime();
        if (gmp_stop_world() != 0) {
            fail("gmp_stop_world failed");
            return NULL;
        }
        stw_ns[i] = gmp_nanotime() - t0;
        if (gmp_start_world() != 0) {
            fail("gmp_start_world failed");
            return NULL;
        }
    }
    return NULL;
}

static void bench_stw(void *arg)
{
    (void)arg;
    gmp_wg_add(&wg, procs);
    for (int i = 0; i < procs; i++)
        if (gmp_go(stw_spinner, NULL) != 0)
            die("gmp_go failed");
    pthread_t t;
    if (pthread_create(&t, NULL, stw_stopper, NULL) != 0)
        die("pthread_create failed");
    /* In the bracket: this P goes to a spinner too. */
    GMP_SYSCALL(pthread_join(t, NULL));
    atomic_store_explicit(&stw_spin_stop, 1, memory_order_relaxed);
    gmp_wg_wait(&wg);
    if (status)
        return;
    qsort(stw_ns, STW_ROUNDS, sizeof stw_ns[0], cmp_i64);
    emit(STW_ROUNDS, (double)stw_ns[STW_ROUNDS / 2] / 1e3, "us_p50");
    emit(STW_ROUNDS, (double)stw_ns[STW_ROUNDS * 99 / 100] / 1e3, "us_p99");
    emit(STW_ROUNDS, (double)stw_ns[STW_ROUNDS - 1] / 1e3, "us_max");
}

/* ---- latency: wake-ups while every P runs a CPU-bound goroutine ---------- */

#define LAT_RUN_NS    2000000000LL      /* the sleeper's and the pinger's 2 s */
#define LAT_PERIOD_NS 1000000LL         /* 1 ms */
#define LAT_MAX       4096              /* samples kept per series */
#define LAT_CHUNK     10000ULL          /* LCG steps between looks at the flag */

static _Atomic int lat_stop;            /* relaxed: a stop flag */
static _Atomic uint64_t lat_steps;      /* each hog adds its count once */
static int64_t lat_sleep[LAT_MAX], lat_ping[LAT_MAX];
static int lat_nsleep, lat_nping;       /* written before the wait group */
static gmp_wg_t lat_hogs;

/* Steps the LCG with no runtime call until told to stop. */
static void lat_spin(uint64_t x)
{
    uint64_t n = 0;
    while (!atomic_load_explicit(&lat_stop, memory_order_relaxed)) {
        x = lcg_steps(x, LAT_CHUNK);
        n += LAT_CHUNK;
    }
    sink ^= x;
    atomic_fetch_add_explicit(&lat_steps, n, memory_order_relaxed);
}

static void lat_hog(void *arg)
{
    lat_spin((uint64_t)(uintptr_t)arg);
    gmp_wg_done(&lat_hogs);
}

/* Sleeps 1 ms in a loop for 2 s; lateness = return - deadline. */
static void lat_sleeper(void *arg)
{
    (void)arg;
    int64_t end = gmp_nanotime() + LAT_RUN_NS;
    for (int64_t t = gmp_nanotime(); t < end && lat_nsleep < LAT_MAX;) {
        int64_t deadline = t + LAT_PERIOD_NS;
        gmp_sleep(LAT_PERIOD_NS);
        t = gmp_nanotime();
        lat_sleep[lat_nsleep++] = t - deadline;
    }
    gmp_wg_done(&wg);
}

/* Echoes each byte on the accepted connection until end of file. */
static void lat_ponger(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    int fd = gmp_accept(lfd, NULL, NULL);
    if (fd < 0)
        die("accept failed");
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char b;
    while (gmp_read(fd, &b, 1) == 1)
        if (gmp_write(fd, &b, 1) != 1)
            die("write failed");
    gmp_close(fd);
    gmp_wg_done(&wg);
}

static int64_t lat_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A plain thread: sends one byte every 1 ms for 2 s (absolute ticks; a
 * tick missed while waiting for a reply is skipped) and times the
 * reply. */
static void *lat_pinger(void *arg)
{
    struct sockaddr_in sin = *(struct sockaddr_in *)arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0)
        die("connect failed");
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int64_t start = lat_clock(), next = start;
    while (next < start + LAT_RUN_NS && lat_nping < LAT_MAX) {
        struct timespec ts = {.tv_sec = next / 1000000000LL,
                              .tv_nsec = next % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
            ;
        char b = 'p';
        int64_t t = lat_clock();
        if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1)
            die("ping failed");
        int64_t now = lat_clock();
        lat_ping[lat_nping++] = now - t;
        while (next <= now)
            next += LAT_PERIOD_NS;
    }
    close(fd);                  /* the ponger sees end of file */
    return NULL;
}

static void emit_pcts(int64_t *v, int n, const char *u50, const char *u99)
{
    if (n == 0) {
        fail("no samples");
        return;
    }
    qsort(v, (size_t)n, sizeof v[0], cmp_i64);
    emit(n, (double)v[n / 2] / 1e3, u50);
    emit(n, (double)v[(int64_t)n * 99 / 100] / 1e3, u99);
}

/* The ping's listening socket on a free loopback port, in *sin. */
static int lat_listen(struct sockaddr_in *sin, int flags)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    *sin = (struct sockaddr_in){.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof *sin;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)sin, sizeof *sin) != 0 ||
        listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)sin, &len) != 0)
        die("cannot listen on 127.0.0.1");
    return lfd;
}

static void lat_emit(int64_t el)
{
    emit_pcts(lat_sleep, lat_nsleep, "sleep_us_p50", "sleep_us_p99");
    emit_pcts(lat_ping, lat_nping, "ping_us_p50", "ping_us_p99");
    uint64_t steps = atomic_load_explicit(&lat_steps, memory_order_relaxed);
    emit((int64_t)steps, (double)steps * 1e9 / (double)el, "hog_steps/s");
}

static void bench_latency(void *arg)
{
    (void)arg;
    struct sockaddr_in sin;
    int lfd = lat_listen(&sin, SOCK_NONBLOCK);
    gmp_wg_add(&lat_hogs, procs);
    gmp_wg_add(&wg, 2);
    int64_t t0 = gmp_nanotime();
    for (int i = 0; i < procs; i++)
        if (gmp_go(lat_hog, (void *)(uintptr_t)(LCG_SEED + (uint64_t)i)) != 0)
            die("gmp_go failed");
    if (gmp_go(lat_sleeper, NULL) != 0 ||
        gmp_go(lat_ponger, (void *)(intptr_t)lfd) != 0)
        die("gmp_go failed");
    pthread_t th;
    if (pthread_create(&th, NULL, lat_pinger, &sin) != 0)
        die("pthread_create failed");
    gmp_wg_wait(&wg);
    atomic_store_explicit(&lat_stop, 1, memory_order_relaxed);
    gmp_wg_wait(&lat_hogs);
    int64_t el = gmp_nanotime() - t0;
    GMP_SYSCALL(pthread_join(th, NULL));    /* it has closed its socket */
    close(lfd);
    lat_emit(el);
}

/* latency-floor: not a case but a probe of the machine, as work-floor.
 * The latency case's load with no runtime: each hog, the sleeper and the
 * ponger a plain thread, the kernel's scheduler deciding who runs. What
 * the hogs lose here is what answering every wake-up on time costs on
 * this machine, whoever schedules (bench/README.md). */
static void *floor_hog(void *arg)
{
    lat_spin((uint64_t)(uintptr_t)arg);
    return NULL;
}

static void *floor_sleeper(void *arg)
{
    (void)arg;
    int64_t end = lat_clock() + LAT_RUN_NS;
    for (int64_t t = lat_clock(); t < end && lat_nsleep < LAT_MAX;) {
        int64_t deadline = t + LAT_PERIOD_NS;
        struct timespec ts = {.tv_nsec = LAT_PERIOD_NS};
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts))
            ;
        t = lat_clock();
        lat_sleep[lat_nsleep++] = t - deadline;
    }
    return NULL;
}

static void *floor_ponger(void *arg)
{
    int fd = accept4((int)(intptr_t)arg, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        die("accept failed");
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char b;
    while (read(fd, &b, 1) == 1)
        if (write(fd, &b, 1) != 1)
            die("write failed");
    close(fd);
    return NULL;
}

static void bench_latency_floor(void)
{
    struct sockaddr_in sin;
    int lfd = lat_listen(&sin, 0);
    pthread_t hog[procs], sl, po, pi;
    int64_t t0 = lat_clock();
    for (int i = 0; i < procs; i++)
        if (pthread_create(&hog[i], NULL, floor_hog,
                           (void *)(uintptr_t)(LCG_SEED + (uint64_t)i)) != 0)
            die("pthread_create failed");
    if (pthread_create(&sl, NULL, floor_sleeper, NULL) != 0 ||
        pthread_create(&po, NULL, floor_ponger, (void *)(intptr_t)lfd) != 0 ||
        pthread_create(&pi, NULL, lat_pinger, &sin) != 0)
        die("pthread_create failed");
    pthread_join(sl, NULL);
    pthread_join(pi, NULL);
    pthread_join(po, NULL);
    atomic_store_explicit(&lat_stop, 1, memory_order_relaxed);
    for (int i = 0; i < procs; i++)
        pthread_join(hog[i], NULL);
    int64_t el = lat_clock() - t0;
    close(lfd);
    lat_emit(el);
}

/* ---- command line -------------------------------------------------------- */

struct bcase {
    const char *name;
    void (*fn)(void *);         /* run as gmp_main's main goroutine */
};

static const struct bcase cases[] = {
    {"yield", bench_yield},
    {"spawn", bench_spawn},
    {"skynet", bench_skynet},
    {"pingpong", bench_pingpong},
    {"chan", bench_chan},
    {"mpmc", bench_mpmc},
    {"steal", bench_steal},
    {"mutex", bench_mutex},
    {"timers", bench_timers},
    {"idle", bench_idle},
    {"syscall", bench_syscall},
    {"pool", bench_pool},
    {"spawnwork", bench_spawnwork},
    {"echo", bench_echo},
    {"http", bench_http},
    {"stw", bench_stw},
    {"latency", bench_latency},
};

static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: gmprt-bench <name> <procs|all> [port]\n");
        return 2;
    }
    case_name = argv[1];
    if (strcmp(argv[2], "all") == 0) {
        procs = usable_cpus();
    } else {
        char *end;
        long v = strtol(argv[2], &end, 10);
        if (*end || v < 1 || v > 256) {
            fprintf(stderr, "gmprt-bench: bad procs '%s'\n", argv[2]);
            return 2;
        }
        procs = (int)v;
    }
    /* The port is only for the servers, which need one; the others ignore
     * it. */
    if (argc == 4) {
        char *end;
        long v = strtol(argv[3], &end, 10);
        if (end == argv[3] || *end || v < 1 || v > 65535) {
            fprintf(stderr, "gmprt-bench: bad port '%s'\n", argv[3]);
            return 2;
        }
        port = (int)v;
    }
    if ((strcmp(case_name, "echo") == 0 || strcmp(case_name, "http") == 0) &&
        port == 0) {
        fprintf(stderr, "gmprt-bench: %s needs a port\n", case_name);
        return 2;
    }
    if (strcmp(case_name, "switch") == 0) {
        bench_switch();
        return status;
    }
    if (strcmp(case_name, "work-floor") == 0) {
        bench_work_floor();
        return status;
    }
    if (strcmp(case_name, "latency-floor") == 0) {
        bench_latency_floor();
        return status;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(case_name, cases[i].name) != 0)
            continue;
        /* A run that hangs and is killed with SIGQUIT (CI's timeout)
         * says where every goroutine waits. */
        gmp_config_t cfg = {.procs = procs, .dump_on_sigquit = 1};
        int err = gmp_main(cases[i].fn, NULL, &cfg);
        if (err) {
            fprintf(stderr, "gmprt-bench: gmp_main: %s\n", gmp_strerror(err));
            return 1;
        }
        return status;
    }
    fprintf(stderr, "gmprt-bench: case '%s' is not implemented\n", case_name);
    return 2;
}
