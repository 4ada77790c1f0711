/*
 * test_foreign.c - goroutines in foreign code (shared objects) and the
 * preemption signal: which code it may stop (docs/design.md, "Which code a
 * signal may stop"), and gmp_dump of goroutines it stopped.
 *
 * Claims:
 *   - by default a loop in a shared object, linked or opened with dlopen
 *     while the runtime runs, is never stopped by the signal (which does
 *     land there: the refusals are counted), while the same loop in the
 *     main program is;
 *   - gmp_config_t.preempt_objects and GMP_DEBUG=preemptobjs= widen the
 *     set (an object they name, one opened after the runtime started
 *     included; "*" every object) and narrow it ("-": not the program;
 *     GMP_DEBUG's empty list replaces the config's);
 *   - the cooperative mark still works inside an object: a loop there
 *     that calls a gmp_ function gives up its P at the call;
 *   - libgc's hang in miniature: a goroutine spins in an object holding
 *     a pthread mutex while others, on the same Ps, call into the object
 *     to take it. By default it completes at procs 1, 2 and 4; with the
 *     object named (the old policy) the holder is stopped holding the
 *     lock and, at procs=1, the only thread blocks on it for good, and
 *     gmp_dump of that hang names the holder and where it stopped;
 *   - gmp_dump shows a backtrace for a runnable goroutine the signal
 *     stopped, starting at the instruction it stopped at.
 * The objects are tests/foreign/spin.c, built twice. Some tests drive
 * preemption faster than sysmon's 10 ms slices with a "preempter" thread,
 * as test_preempt does. The binary exports its symbols (ENABLE_EXPORTS) so
 * that gmp_dump names its functions.
 */
#include "harness.h"

#include <dlfcn.h>
#include <pthread.h>

#include "internal.h"

/* libgmpt_linked.so (tests/foreign/spin.c). */
uint32_t spin_until(const volatile uint32_t *word, _Atomic int64_t *rounds,
                    int64_t until);
uint32_t spin_calling(int64_t (*fn)(void), _Atomic int64_t *flag,
                      const volatile uint32_t *word);
void spin_hold(const volatile uint32_t *word, _Atomic int64_t *rounds,
               int64_t until, _Atomic int64_t *inside);
void spin_touch(void);

typedef uint32_t spin_until_fn(const volatile uint32_t *, _Atomic int64_t *,
                               int64_t);

#include "preempter.h"           /* and self, async_of */

static uint32_t refused_of(struct g *gp)
{
    return ((volatile struct g *)gp)->asyncrefused;
}

/* ---- The loaded object ------------------------------------------------- */

static void *loaded;                /* dlopen handle of libgmpt_loaded.so */

static spin_until_fn *loaded_spin(void)
{
    if (!loaded)
        loaded = dlopen(GMPT_LOADED_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!loaded) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return NULL;
    }
    return (spin_until_fn *)dlsym(loaded, "spin_until");
}

static void loaded_close(void)
{
    if (loaded)
        dlclose(loaded);
    loaded = NULL;
}

/* The same loop as the objects', in the main program. */
__attribute__((noinline)) uint32_t main_spin_until(
    const volatile uint32_t *word, _Atomic int64_t *rounds, int64_t until)
{
    uint32_t from = *word;
    while (*word == from &&
           atomic_load_explicit(rounds, memory_order_relaxed) < until)
        ;
    return *word != from;
}

/* ---- One loop under the preempter ---------------------------------------- */

/* Rounds a loop runs for when it should not be stopped: hundreds of
 * signals land in it. When it should be, it ends at the first. */
#define ROUNDS (GMP_TEST_EMULATED || H_SANITIZED ? 200 : 400)

static struct {
    spin_until_fn *fn;
    _Atomic int64_t done;
    int64_t preempts, refused;
} lp;

void foreign_loop(void *arg)
{
    (void)arg;
    struct g *gp = self();
    uint32_t r0 = refused_of(gp);
    /* Ends at the first stop inside the loop: 1, or 0 after the rounds. */
    lp.preempts = lp.fn(&gp->asyncpreempts, &pe.sent,
                        atomic_load(&pe.sent) + ROUNDS);
    lp.refused = refused_of(gp) - r0;
    atomic_fetch_add(&lp.done, 1);
}

/* Runs fn in a goroutine under the preempter; *refused gets the signals
 * that found the goroutine where they may not stop it. Returns 1 if one
 * stopped it inside fn's loop, else 0. */
static int64_t preempts_in(spin_until_fn *fn, int64_t *refused)
{
    memset(&lp, 0, sizeof lp);
    lp.fn = fn;
    preempter_start();
    assert_int_equal(gmp_go(foreign_loop, NULL), 0);
    int rc = h_wait(&lp.done, 1);
    preempter_stop();
    assert_int_equal(rc, 0);
    if (refused)
        *refused = lp.refused;
    return lp.preempts;
}

/* ---- Default: the main program only ------------------------------------- */

static void test_foreign_linked_object_is_not_preempted(void **state)
{
    (void)state;
    SKIP_WITHOUT_ASYNC();
    int64_t refused;
    assert_int_equal(preempts_in(spin_until, &refused), 0);
    assert_true(refused > 0);           /* the signals did land there */
    assert_true(preempts_in(main_spin_until, NULL) > 0);
    assert_int_equal(h_wait_quiet(), 0);
}

static void test_foreign_loaded_object_is_not_preempted(void **state)
{
    (void)state;
    SKIP_WITHOUT_ASYNC();
    spin_until_fn *fn = loaded_spin();
    assert_non_null(fn);
    int64_t refused;
    assert_int_equal(preempts_in(fn, &refused), 0);
    assert_true(refused > 0);
    loaded_close();
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- The cooperative mark inside an object --------------------------------- */

/* Whether pc is in libgmpt_linked.so. */
static bool in_linked(uintptr_t pc)
{
    Dl_info a, b;
    return dladdr((void *)pc, &a) && dladdr((void *)spin_touch, &b) &&
           a.dli_fbase == b.dli_fbase;
}


static struct {
    _Atomic int64_t ready, flag, done;
    _Atomic int64_t preempts;       /* stops by signal in the object */
} cm;

void foreign_caller(void *arg)
{
    (void)arg;
    struct g *gp = self();
    atomic_fetch_add(&cm.ready, 1);
    atomic_fetch_add(&cm.preempts,
                     spin_calling(gmp_nanotime, &cm.flag, &gp->asyncpreempts));
    atomic_fetch_add(&cm.done, 1);
}

void foreign_flagger(void *arg)
{
    (void)arg;
    atomic_store(&cm.flag, 1);
}

/* One caller per P, each in the object calling gmp_nanotime; a goroutine
 * queued behind them runs only if one gives up its P, which the signal
 * may not make it do there: the mark does, at the call. */
static void test_foreign_cooperative_mark_works_inside(void **state)
{
    struct h_env *env = *state;
    SKIP_WITHOUT_ASYNC();
    memset(&cm, 0, sizeof cm);
    preempter_start();
    for (int i = 0; i < env->procs; i++)
        assert_int_equal(gmp_go(foreign_caller, NULL), 0);
    int rc = h_wait(&cm.ready, env->procs);
    if (rc == 0)
        rc = gmp_go(foreign_flagger, NULL);
    if (rc == 0)
        rc = h_wait(&cm.done, env->procs);
    preempter_stop();
    assert_int_equal(rc, 0);
    assert_int_equal(atomic_load(&cm.preempts), 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- gmp_dump of a runnable goroutine ---------------------------------- */

static struct {
    _Atomic int stop;
    _Atomic int64_t done;
} dh;

__attribute__((noinline)) void foreign_dump_hog(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&dh.stop, memory_order_relaxed))
        ;
    atomic_fetch_add(&dh.done, 1);
}

/* gmp_dump's output, NUL-terminated, malloc'd. */
static char *dump_text(void)
{
    FILE *f = tmpfile();
    if (!f)
        return NULL;
    gmp_dump(f);
    long len = ftell(f);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (text) {
        rewind(f);
        size_t n = fread(text, 1, (size_t)len, f);
        text[n] = '\0';
    }
    fclose(f);
    return text;
}

/* Whether text has a runnable goroutine whose first frame is fn where
 * the signal stopped it. */
static bool shows_stopped(const char *text, const char *fn)
{
    char want[128];
    snprintf(want, sizeof want, " [runnable]:\n\t%s", fn);
    for (const char *p = text; (p = strstr(p, want)) != NULL; p++) {
        const char *eol = strchr(p + strlen(want), '\n');
        const char *tag = strstr(p, " (preempted by signal here)\n");
        if (eol && tag && tag < eol)
            return true;
    }
    return false;
}

static bool dump_shows_hog(void *arg)
{
    (void)arg;
    char *text = dump_text();
    bool ok = text && shows_stopped(text, "foreign_dump_hog+");
    free(text);
    return ok;
}

/* One more hog than Ps: at any moment one of them waits in a run queue,
 * stopped by the signal inside foreign_dump_hog. */
static void test_foreign_dump_shows_a_runnable_goroutine(void **state)
{
    struct h_env *env = *state;
    SKIP_WITHOUT_ASYNC();
    memset(&dh, 0, sizeof dh);
    preempter_start();
    for (int i = 0; i <= env->procs; i++)
        assert_int_equal(gmp_go(foreign_dump_hog, NULL), 0);
    int rc = h_wait_until(dump_shows_hog, NULL, "a stopped hog in the dump");
    atomic_store(&dh.stop, 1);
    if (rc == 0)
        rc = h_wait(&dh.done, env->procs + 1);
    preempter_stop();
    assert_int_equal(rc, 0);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- The setting ------------------------------------------------------------- */

/* Starts a runtime (procs=1) with objs as preempt_objects and GMP_DEBUG
 * as env (NULL: unset), and measures the three loops. Returns false when
 * asynchronous preemption is off here. */
struct measure {
    int64_t linked, loaded, program, program_refused;
};

static bool measure_with(const char *objs, const char *env,
                         struct measure *m)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = 1;
    cfg.preempt_objects = objs;
    if (env)
        setenv("GMP_DEBUG", env, 1);
    int err = gmp_init(&cfg);
    unsetenv("GMP_DEBUG");
    assert_int_equal(err, 0);
    bool on = async_on();
    if (on) {
        /* Opened after the runtime started: a later build of the table
         * must cover it. */
        spin_until_fn *fn = loaded_spin();
        assert_non_null(fn);
        m->linked = preempts_in(spin_until, NULL);
        m->loaded = preempts_in(fn, NULL);
        m->program = preempts_in(main_spin_until, &m->program_refused);
        loaded_close();
    }
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(gmp_shutdown(), 0);
    return on;
}

static void test_foreign_setting_widens_and_narrows(void **state)
{
    (void)state;
    struct measure m;
    if (!measure_with(NULL, NULL, &m)) {
        print_message("asynchronous preemption is off here\n");
        skip();
    }
    assert_int_equal(m.linked, 0);
    assert_int_equal(m.loaded, 0);
    assert_true(m.program > 0);

    assert_true(measure_with("libgmpt_linked", NULL, &m));
    assert_true(m.linked > 0);
    assert_int_equal(m.loaded, 0);
    assert_true(m.program > 0);

    assert_true(measure_with("nothing:libgmpt_loaded", NULL, &m));
    assert_int_equal(m.linked, 0);
    assert_true(m.loaded > 0);

    assert_true(measure_with("*", NULL, &m));
    assert_true(m.linked > 0);
    assert_true(m.loaded > 0);
    assert_true(m.program > 0);

    assert_true(measure_with("-", NULL, &m));
    assert_int_equal(m.program, 0);
    assert_true(m.program_refused > 0);

    /* GMP_DEBUG replaces the config's list, to widen or to narrow. */
    assert_true(measure_with(NULL, "schedtrace=0,preemptobjs=libgmpt_linked",
                             &m));
    assert_true(m.linked > 0);
    assert_int_equal(m.loaded, 0);
    assert_true(measure_with("*", "preemptobjs=", &m));
    assert_int_equal(m.linked, 0);
    assert_int_equal(m.loaded, 0);
    assert_true(m.program > 0);

    char big[GMP_PREEMPT_OBJECTS_MAX + 1];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.preempt_objects = big;
    assert_int_equal(gmp_init(&cfg), GMP_EINVAL);
}

/* ---- libgc's hang in miniature ------------------------------------------- */

#define CONTENDERS 2                /* per P */

static struct {
    int procs;
    const char *objs;
    _Atomic int64_t inside;         /* 0, 1 while the holder has the lock
                                       in spin_hold, then 2 */
    _Atomic int64_t done;
    _Atomic int stopped;            /* the holder was stopped in spin.c */
    _Atomic(struct g *) holder;
    _Atomic(struct g *) contender[4 * CONTENDERS];
    _Atomic int ncontenders;
} hg;

static const volatile uint32_t never;   /* never changes: spin it out */

void foreign_contender(void *arg)
{
    (void)arg;
    int k = atomic_fetch_add(&hg.ncontenders, 1);
    if (k < 4 * CONTENDERS)
        atomic_store(&hg.contender[k], self());
    while (atomic_load(&hg.inside) == 0)
        gmp_yield();                /* until the holder has the lock */
    for (int i = 0; i < 20; i++)
        spin_touch();
    atomic_fetch_add(&hg.done, 1);
}

void foreign_holder(void *arg)
{
    (void)arg;
    struct g *gp = self();
    for (int i = 0; i < hg.procs * CONTENDERS; i++)
        G_CHECK(gmp_go(foreign_contender, NULL) == 0);
    atomic_store(&hg.holder, gp);
    uint32_t a0 = async_of(gp);
    /* With the object named it holds the lock for good, unless the
     * signal stops it there (or a contender between its lock and unlock)
     * while a contender is about to block: then nothing runs again (the
     * child ends at the dump). */
    spin_hold(&never, &pe.sent,
              hg.objs ? INT64_MAX : atomic_load(&pe.sent) + ROUNDS,
              &hg.inside);
    if (async_of(gp) != a0 &&
        in_linked(((volatile struct g *)gp)->asyncpc))
        atomic_store(&hg.stopped, 1);
    atomic_fetch_add(&hg.done, 1);
}

/* The holder is in the object holding the lock, and the signal has
 * stopped it there: its last stop was in the object. */
static bool holder_stopped_inside(void)
{
    struct g *gp = atomic_load(&hg.holder);
    if (!gp || atomic_load(&hg.inside) != 1)
        return false;
    if (!in_linked(__atomic_load_n(&gp->asyncpc, __ATOMIC_RELAXED)))
        return false;
    atomic_store(&hg.stopped, 1);
    return true;
}

static bool hang_over(void *arg)
{
    (void)arg;
    return atomic_load(&hg.done) == 1 + hg.procs * CONTENDERS ||
           holder_stopped_inside();
}

/* At procs=1: the one running goroutine's thread sleeps (in
 * pthread_mutex_lock, the only place where any of them can), and a
 * goroutine the signal stopped inside the object waits in a run queue:
 * the lock's owner (the holder, or a contender stopped between its lock
 * and unlock), which nothing can run again. */
static bool hung(void *arg)
{
    (void)arg;
    bool blocked = false, stopped = false;
    int n = atomic_load(&hg.ncontenders);
    for (int i = -1; i < n && i < 4 * CONTENDERS; i++) {
        struct g *gp = i < 0 ? atomic_load(&hg.holder)
                             : atomic_load(&hg.contender[i]);
        if (!gp)
            continue;
        uint32_t st = atomic_load(&gp->status);
        struct m *mp = __atomic_load_n(&gp->m, __ATOMIC_RELAXED);
        if (st == G_RUNNING && mp &&
            h_thread_state(__atomic_load_n(&mp->tid, __ATOMIC_RELAXED)) ==
                'S')
            blocked = true;
        if (st == G_RUNNABLE &&
            __atomic_load_n(&gp->asyncframe, __ATOMIC_RELAXED) &&
            in_linked(__atomic_load_n(&gp->asyncpc, __ATOMIC_RELAXED)))
            stopped = true;
    }
    return blocked && stopped;
}

/* In a child: exit 77 when asynchronous preemption is off, 2 when the
 * holder was stopped holding the lock, 0 when all ended; with the object
 * named and procs=1, writes gmp_dump of the hang to stdout and exits 3. */
static void hang_child(void *arg)
{
    (void)arg;
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = hg.procs;
    cfg.preempt_objects = hg.objs;
    if (gmp_init(&cfg) != 0)
        _exit(1);
    if (!async_on())
        _exit(77);
    preempter_start();
    if (gmp_go(foreign_holder, NULL) != 0)
        _exit(1);
    if (hg.objs) {
        /* Half the deadline: the parent's is the whole. */
        if (h_wait_until_ns(hung, NULL, "the holder stopped, a contender in",
                            H_DEADLINE_NS / 2) != 0) {
            for (int i = -1; i < atomic_load(&hg.ncontenders); i++) {
                struct g *gp = i < 0 ? atomic_load(&hg.holder)
                                     : atomic_load(&hg.contender[i]);
                struct m *mp = gp ? gp->m : NULL;
                fprintf(stderr, "%s %d: status %d, thread %c\n",
                        i < 0 ? "holder" : "contender", i,
                        gp ? (int)atomic_load(&gp->status) : -1,
                        mp ? h_thread_state(mp->tid) : '-');
            }
            gmp_dump(stderr);
            _exit(1);
        }
        gmp_dump(stdout);
        fflush(stdout);
        _exit(3);
    }
    if (h_wait_until(hang_over, NULL, "the holder and contenders") != 0)
        _exit(1);
    _exit(atomic_load(&hg.stopped) ? 2 : atomic_load(&g_bad) ? 1 : 0);
}

static void hang_at(int procs)
{
    hg.procs = procs;
    hg.objs = NULL;
    struct h_child res;
    assert_int_equal(h_fork(hang_child, NULL, &res), 0);
    if (WIFEXITED(res.status) && WEXITSTATUS(res.status) == 77) {
        print_message("asynchronous preemption is off here\n");
        skip();
    }
    h_child_exited(&res, 0, procs);
}

static void test_foreign_lock_holder_completes_procs_1(void **state)
{
    (void)state;
    hang_at(1);
}

static void test_foreign_lock_holder_completes_procs_2(void **state)
{
    (void)state;
    hang_at(2);
}

static void test_foreign_lock_holder_completes_procs_4(void **state)
{
    (void)state;
    hang_at(4);
}

/* The old policy: the object named. A goroutine is stopped holding the
 * lock, and the dump of the hang shows it runnable, stopped in spin.c. */
static void test_foreign_named_lock_holder_hangs_and_dump_names_it(
    void **state)
{
    (void)state;
    hg.procs = 1;
    hg.objs = "libgmpt_linked";
    struct h_child res;
    assert_int_equal(h_fork(hang_child, NULL, &res), 0);
    if (WIFEXITED(res.status) && WEXITSTATUS(res.status) == 77) {
        print_message("asynchronous preemption is off here\n");
        skip();
    }
    h_child_exited(&res, 3, 1);
    /* A runnable entry whose first frame is in the object (spin_hold or
     * spin_touch, or the static loop, which dladdr names by file). */
    const char *head = " [runnable]:\n\t";
    bool found = false;
    for (const char *p = res.out; !found && (p = strstr(p, head)) != NULL;
         p++) {
        const char *frame = p + strlen(head);
        const char *eol = strchr(frame, '\n');
        if (!eol)
            break;
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(eol - frame), frame);
        if (strstr(line, " (preempted by signal here)") &&
            (strncmp(line, "spin_", 5) == 0 ||
             strstr(line, "libgmpt_linked.so+"))) {
            print_message("lock holder stopped at %s\n", line);
            found = true;
        }
    }
    if (!found)
        print_error("dump:\n%s\n", res.out);
    assert_true(found);
}

int main(void)
{
    const struct CMUnitTest per_procs[] = {
        cmocka_unit_test(test_foreign_linked_object_is_not_preempted),
        cmocka_unit_test(test_foreign_loaded_object_is_not_preempted),
        cmocka_unit_test(test_foreign_cooperative_mark_works_inside),
        cmocka_unit_test(test_foreign_dump_shows_a_runnable_goroutine),
    };
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_foreign_setting_widens_and_narrows),
        cmocka_unit_test(test_foreign_lock_holder_completes_procs_1),
        cmocka_unit_test(test_foreign_lock_holder_completes_procs_2),
        cmocka_unit_test(test_foreign_lock_holder_completes_procs_4),
        cmocka_unit_test(test_foreign_named_lock_holder_hangs_and_dump_names_it),
    };
    int fails = 0;
    fails += cmocka_run_group_tests_name("foreign, procs=1", per_procs,
                                         h_up_1, h_down);
    fails += cmocka_run_group_tests_name("foreign, procs=2", per_procs,
                                         h_up_2, h_down);
    fails += cmocka_run_group_tests_name("foreign, procs=4", per_procs,
                                         h_up_4, h_down);
    fails += cmocka_run_group_tests_name("foreign, own runtime", alone,
                                         NULL, NULL);
    return fails != 0;
}
