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
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gmprt.h>

#include "context.h"            /* the switch case runs the bare switch */

#define LCG_MUL  6364136223846793005ULL
#define LCG_INC  1442695040888963407ULL
#define LCG_SEED 42ULL

static const char *case_name;
static int procs;
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

static void bench_yield(void *arg)
{
    (void)arg;
    gmp_wg_add(&wg, 2);
    int64_t t0 = gmp_nanotime();
    gmp_go(yielder, NULL);
    gmp_go(yielder, NULL);
    gmp_wg_wait(&wg);
    int64_t el = gmp_nanotime() - t0;
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

/* ---- syscall: bracketed getppid beside a CPU-bound goroutine --------------- */

#define SYSCALL_CALLS 1000000
#define SYSCALL_STEPS 200000000ULL

static int64_t sys_start, sys_ta, sys_tb;

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
    emit((int64_t)SYSCALL_STEPS, (double)sys_tb / (double)t0, "slowdown");
}

/* ---- command line -------------------------------------------------------- */

struct bcase {
    const char *name;
    void (*fn)(void *);         /* run as gmp_main's main goroutine */
};

static const struct bcase cases[] = {
    {"yield", bench_yield},
    {"spawn", bench_spawn},
    {"steal", bench_steal},
    {"syscall", bench_syscall},
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
    if (strcmp(case_name, "switch") == 0) {
        bench_switch();
        return status;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(case_name, cases[i].name) != 0)
            continue;
        gmp_config_t cfg = {.procs = procs};
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
