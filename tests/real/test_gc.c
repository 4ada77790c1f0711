/*
 * test_gc.c - goroutines under a real conservative collector: Debian's
 * libgc (Boehm-Demers-Weiser, bdw-gc 8.2, unmodified), through
 * examples/gc_boehm.c, the program a language runtime copies its glue
 * from (its file comment has the recipe). The test runs that program,
 * built for it as gmpt_gc_boehm, in forked children, and checks the
 * counts of its summary line, not only its verdict.
 *
 * Claims, at procs 1, 2 and 4, in libgc's default mode and in its
 * incremental mode (GC_enable_incremental, with GC_USE_GETWRITEWATCH=0 so
 * that libgc write-protects its heap and takes the SIGSEGV of every first
 * write, through the runtime's handler, also where the kernel offers
 * soft-dirty bits instead): 100 runs each (50 sanitized), each a fresh
 * gmp_main in which 1,000 goroutines hold lists whose only reference is
 * a local while a goroutine forces RUN_GCS collections (the example's
 * default is 100; 25 keep the label near 40 s on two CPUs), with
 * goroutines parked, queued, running on other Ms and stopped by the
 * preemption signal meanwhile:
 *   - no premature collection: no list is lost or changed when its
 *     goroutine checks it, nor after the run's last collection; no
 *     gmp_go argument is lost before its goroutine runs, nor any of the
 *     64 objects that live only in a buffered channel's buffer (the
 *     runtime's records come from libgc's uncollectable heap);
 *   - finalizers ran, every one found its list intact, and none ran for
 *     a list its goroutine still held;
 *   - every goroutine woke on a thread libgc knew, every registration
 *     went through;
 *   - every forced collection happened, and walked the goroutine stacks;
 *   - no crash and no hang: every child exits 0 before h_fork's
 *     deadline.
 * And the checks can fail:
 *   - with no goroutine stack as a root (-S), the collector takes the
 *     lists their goroutines still hold, and the links say so;
 *   - without the memory hooks (-M, runtime records from malloc, which
 *     libgc does not scan), at procs 1 where no goroutine runs before
 *     the first collection, it takes gmp_go's arguments and the channel's
 *     objects.
 * Each configuration runs in batches of RUN_BATCH runs, one child each,
 * so that a child's time stays far inside h_fork's deadline on a loaded
 * machine.
 */
#include "harness.h"

#ifndef GMPT_GC_BOEHM
#error "GMPT_GC_BOEHM: the path of the example built for this test"
#endif

#define WORKERS   1000              /* the example's default */
#define BOXED     64                /* objects in its channel */
#define RUNS      (H_SLOW ? 50 : 100)
#define RUN_BATCH 25
#define RUN_GCS   25

/* The counts of the summary line, by name. */
static const char *const keys[] = {
    "runs", "failed", "goroutines", "collections", "checks", "lost",
    "corrupt", "final", "args", "args_lost", "boxed", "boxed_lost",
    "finalized", "finalized_bad", "premature", "unregistered",
    "register_failed", "walks", "deferred", "spins", "preempted",
};
enum {
    K_RUNS, K_FAILED, K_GOROUTINES, K_COLLECTIONS, K_CHECKS, K_LOST,
    K_CORRUPT, K_FINAL, K_ARGS, K_ARGS_LOST, K_BOXED, K_BOXED_LOST,
    K_FINALIZED, K_FINALIZED_BAD, K_PREMATURE, K_UNREGISTERED,
    K_REGISTER_FAILED, K_WALKS, K_DEFERRED, K_SPINS, K_PREEMPTED, K_N
};
_Static_assert(sizeof keys / sizeof keys[0] == K_N, "one name per count");

struct summary {
    long long v[K_N];
    char vdb[16];                   /* none, mprotect or os */
};

/* Reads the line "gc_boehm: ok|FAILED ... key=value ..." of out into s,
 * every count present. Returns 1 for ok, 0 for FAILED, -1 for no line. */
static int parse(const char *out, struct summary *s)
{
    const char *line = strstr(out, "gc_boehm: ");
    if (!line)
        return -1;
    const char *end = strchr(line, '\n');
    if (!end)
        end = line + strlen(line);
    for (int k = 0; k < K_N; k++) {
        char pat[32];
        snprintf(pat, sizeof pat, " %s=", keys[k]);
        const char *at = strstr(line, pat);
        if (!at || at > end)
            return -1;
        s->v[k] = strtoll(at + strlen(pat), NULL, 10);
    }
    const char *vdb = strstr(line, " vdb=");
    if (!vdb || vdb > end || sscanf(vdb, " vdb=%15s", s->vdb) != 1)
        return -1;
    return strncmp(line, "gc_boehm: ok ", 13) == 0 ? 1 : 0;
}

struct exec_args {
    char *argv[16];
    bool mprotect;                  /* GC_USE_GETWRITEWATCH=0 */
};

static void exec_child(void *arg)
{
    struct exec_args *a = arg;
    if (a->mprotect)
        setenv("GC_USE_GETWRITEWATCH", "0", 1);
    execv(GMPT_GC_BOEHM, a->argv);
    dprintf(2, "execv %s: %s\n", GMPT_GC_BOEHM, strerror(errno));
    _exit(127);
}

/* Runs the example with the options of opts (NULL-terminated, at most
 * 12) and expects exit status code; fills s. */
static void run_example(const char *const *opts, bool mprotect, int code,
                        int procs, struct summary *s)
{
    struct exec_args a = {.argv = {"gmpt_gc_boehm"}, .mprotect = mprotect};
    for (int i = 0; opts[i]; i++)
        a.argv[i + 1] = (char *)opts[i];
    struct h_child res;
    assert_int_equal(h_fork(exec_child, &a, &res), 0);
    h_child_exited(&res, code, procs);
    int ok = parse(res.out, s);
    if (ok != (code == 0))
        print_error("procs=%d: stdout:\n%s\nstderr:\n%s\n", procs, res.out,
                    res.err);
    assert_int_equal(ok, code == 0);
}

/* RUNS runs at procs, in batches; asserts on the sums. */
static void runs_at(int procs, bool incremental)
{
    char p[8], r[8], c[8];
    snprintf(p, sizeof p, "%d", procs);
    snprintf(r, sizeof r, "%d", RUN_BATCH);
    snprintf(c, sizeof c, "%d", RUN_GCS);
    const char *opts[] = {"-p", p, "-r", r, "-c", c,
                          incremental ? "-i" : NULL, NULL};
    struct summary sum, one;
    memset(&sum, 0, sizeof sum);
    int64_t t0 = h_now();
    for (int done = 0; done < RUNS; done += RUN_BATCH) {
        run_example(opts, incremental, 0, procs, &one);
        for (int k = 0; k < K_N; k++)
            sum.v[k] += one.v[k];
        assert_string_equal(one.vdb, incremental ? "mprotect" : "none");
    }
    long long *v = sum.v;
    long long gs = one.v[K_GOROUTINES];         /* workers (+ spinner) */
    print_message("procs=%d%s: %lld runs of %lld goroutines, %lld "
                  "collections, %lld list checks, %lld arguments and "
                  "%lld channel objects found, %lld lists finalized, "
                  "%lld spinner sums (%lld stretches with a preemption), "
                  "%.1f s\n", procs, incremental ? " incremental" : "",
                  v[K_RUNS], gs, v[K_COLLECTIONS], v[K_CHECKS], v[K_ARGS],
                  v[K_BOXED], v[K_FINALIZED], v[K_SPINS], v[K_PREEMPTED],
                  (double)(h_now() - t0) / 1e9);
    assert_int_equal(v[K_RUNS], RUNS);
    assert_int_equal(v[K_FAILED], 0);
    assert_int_equal(gs, WORKERS + (procs > 1 ? 1 : 0));
    assert_int_equal(v[K_LOST], 0);
    assert_int_equal(v[K_CORRUPT], 0);
    assert_int_equal(v[K_FINAL], gs * RUNS);
    assert_int_equal(v[K_ARGS], gs * RUNS);
    assert_int_equal(v[K_ARGS_LOST], 0);
    assert_int_equal(v[K_BOXED], BOXED * RUNS);
    assert_int_equal(v[K_BOXED_LOST], 0);
    assert_true(v[K_FINALIZED] > 0);
    assert_int_equal(v[K_FINALIZED_BAD], 0);
    assert_int_equal(v[K_PREMATURE], 0);
    assert_int_equal(v[K_UNREGISTERED], 0);
    assert_int_equal(v[K_REGISTER_FAILED], 0);
    /* A token round after each collection: a twentieth of the workers
     * check their lists each time. */
    assert_true(v[K_CHECKS] >= (long long)RUN_GCS * (WORKERS / 20) * RUNS);
    assert_true(v[K_COLLECTIONS] >= (long long)RUN_GCS * RUNS);
    assert_true(v[K_WALKS] >= (long long)RUN_GCS * RUNS);
}

static void test_gc_lists_survive_procs_1(void **state)
{
    runs_at(1, false);
}

static void test_gc_lists_survive_procs_2(void **state)
{
    runs_at(2, false);
}

static void test_gc_lists_survive_procs_4(void **state)
{
    runs_at(4, false);
}

static void test_gc_incremental_lists_survive_procs_1(void **state)
{
    runs_at(1, true);
}

static void test_gc_incremental_lists_survive_procs_2(void **state)
{
    runs_at(2, true);
}

static void test_gc_incremental_lists_survive_procs_4(void **state)
{
    runs_at(4, true);
}

/* The failing cases, one run of 3 collections each. */

static void test_gc_without_stack_roots_lists_are_lost(void **state)
{
    static const char *const opts[] = {"-S", "-p", "2", "-r", "1", "-c",
                                       "3", NULL};
    struct summary s;
    run_example(opts, false, 1, 2, &s);
    long long *v = s.v;
    print_message("without goroutine stacks as roots: %lld of %d lists "
                  "collected under their goroutines (%lld finalized "
                  "while held), %lld changed\n", v[K_LOST], WORKERS,
                  v[K_PREMATURE], v[K_CORRUPT]);
    /* Nothing else refers to them: most lists go at the first
     * collection (a stale word elsewhere may keep a few). What the
     * runtime's records hold is still found. */
    assert_true(v[K_LOST] >= WORKERS / 2);
    assert_true(v[K_PREMATURE] >= WORKERS / 2);
    assert_int_equal(v[K_ARGS_LOST], 0);
    assert_int_equal(v[K_BOXED_LOST], 0);
}

static void test_gc_without_memory_hooks_arguments_are_lost(void **state)
{
    static const char *const opts[] = {"-M", "-p", "1", "-r", "1", "-c",
                                       "3", NULL};
    struct summary s;
    run_example(opts, false, 1, 1, &s);
    long long *v = s.v;
    print_message("without the memory hooks: %lld of %d gmp_go arguments "
                  "and %lld of %d channel objects collected\n",
                  v[K_ARGS_LOST], WORKERS, v[K_BOXED_LOST], BOXED);
    assert_true(v[K_ARGS_LOST] >= WORKERS / 2);
    assert_true(v[K_BOXED_LOST] >= BOXED / 2);
    /* The goroutines that found theirs keep their lists. */
    assert_int_equal(v[K_LOST], 0);
    assert_int_equal(v[K_CORRUPT], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gc_lists_survive_procs_1),
        cmocka_unit_test(test_gc_lists_survive_procs_2),
        cmocka_unit_test(test_gc_lists_survive_procs_4),
        cmocka_unit_test(test_gc_incremental_lists_survive_procs_1),
        cmocka_unit_test(test_gc_incremental_lists_survive_procs_2),
        cmocka_unit_test(test_gc_incremental_lists_survive_procs_4),
        cmocka_unit_test(test_gc_without_stack_roots_lists_are_lost),
        cmocka_unit_test(test_gc_without_memory_hooks_arguments_are_lost),
    };
    return cmocka_run_group_tests_name("libgc", tests, NULL, NULL);
}
