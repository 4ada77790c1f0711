/*
 * test_cgroup.c - the default number of Ps and the cgroup CPU limit it
 * follows (src/cgroup.c): the reader on fake trees (a /proc/self/cgroup,
 * a mountinfo and cgroup files under a temporary directory that the
 * reader takes for "/"), Go's rounding, the runtime's default procs and
 * what wins over it, sysmon's reading again and the Ps resized to follow
 * it, and one real cgroup where the machine lets a test make one.
 */
#include "harness.h"

#include <ftw.h>
#include <sys/stat.h>

#include "internal.h"

/* ---- Fake trees --------------------------------------------------------- */

static char troot[256];

/* mkdir -p root/rel. */
static void t_mkdirs(const char *rel)
{
    char path[1024];
    assert_true(snprintf(path, sizeof path, "%s/%s", troot, rel) <
                (int)sizeof path);
    for (char *p = path + strlen(troot) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    mkdir(path, 0755);
}

/* Writes text to root/rel whole (a new file renamed over the old, so that
 * sysmon never reads half of it), making its directories. */
static void t_write(const char *rel, const char *text)
{
    char dir[1024], path[1024], tmp[1040];
    assert_true(snprintf(dir, sizeof dir, "%s", rel) < (int)sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        t_mkdirs(dir);
    }
    assert_true(snprintf(path, sizeof path, "%s/%s", troot, rel) <
                (int)sizeof path);
    assert_true(snprintf(tmp, sizeof tmp, "%s.new", path) < (int)sizeof tmp);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void t_unlink(const char *rel)
{
    char path[1024];
    assert_true(snprintf(path, sizeof path, "%s/%s", troot, rel) <
                (int)sizeof path);
    unlink(path);
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int tree_up(void **state)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(troot, sizeof troot, "%s/gmprt-cgroup-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(troot))
        return -1;
    gmp__cgroup_test_root(troot);
    gmp__cgroup_test_ncpu(0);
    return 0;
}

static int tree_down(void **state)
{
    gmp__cgroup_test_root(NULL);
    gmp__cgroup_test_ncpu(0);
    nftw(troot, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

#define MNT_NOISE                                                            \
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"                \
    "25 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw\n"
#define MNT_V2                                                               \
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 "        \
    "cgroup2 rw,nsdelegate\n"
#define MNT_V1                                                               \
    "31 22 0:27 / /sys/fs/cgroup/cpuset rw shared:5 - cgroup cgroup "        \
    "rw,cpuset\n"                                                            \
    "32 22 0:28 / /sys/fs/cgroup/cpu,cpuacct rw shared:6 - cgroup cgroup "   \
    "rw,cpu,cpuacct\n"

/* Opens the fake tree's cgroup. Returns its limit; *version gets the
 * version found (0: none). */
static int limit_of(int *version)
{
    static struct gmp__cgroup cg;
    int rc = gmp__cgroup_open(&cg);
    *version = cg.version;
    assert_int_equal(rc, cg.version ? 0 : -1);
    return gmp__cgroup_limit(&cg);
}

/* ---- cgroup v2 ---------------------------------------------------------- */

static void test_cgroup_v2_leaf_limit_rounds_up(void **state)
{
    int v;
    t_write("proc/self/cgroup", "0::/app/worker\n");
    t_write("proc/self/mountinfo", MNT_NOISE MNT_V2);
    t_write("sys/fs/cgroup/app/worker/cpu.max", "150000 100000\n");
    assert_int_equal(limit_of(&v), 2);      /* ceil(1.5) */
    assert_int_equal(v, 2);
    t_write("sys/fs/cgroup/app/worker/cpu.max", "300000 100000\n");
    assert_int_equal(limit_of(&v), 3);      /* exact */
    t_write("sys/fs/cgroup/app/worker/cpu.max", "300001 100000\n");
    assert_int_equal(limit_of(&v), 4);
    t_write("sys/fs/cgroup/app/worker/cpu.max", "50000 100000\n");
    assert_int_equal(limit_of(&v), 1);      /* the floor of 2 is procs' */
}

static void test_cgroup_v2_tighter_ancestor_wins(void **state)
{
    int v;
    t_write("proc/self/cgroup", "0::/a/b/c\n");
    t_write("proc/self/mountinfo", MNT_NOISE MNT_V2);
    t_write("sys/fs/cgroup/a/b/c/cpu.max", "800000 100000\n");   /* 8 */
    t_write("sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
    t_write("sys/fs/cgroup/a/cpu.max", "250000 100000\n");       /* 3 */
    assert_int_equal(limit_of(&v), 3);
    /* The leaf tighter than its ancestors: the leaf. */
    t_write("sys/fs/cgroup/a/b/c/cpu.max", "100000 100000\n");
    assert_int_equal(limit_of(&v), 1);
    /* The mount point itself is a level too. */
    t_write("sys/fs/cgroup/a/b/c/cpu.max", "max 100000\n");
    t_write("sys/fs/cgroup/a/cpu.max", "max 100000\n");
    t_write("sys/fs/cgroup/cpu.max", "200000 50000\n");          /* 4 */
    assert_int_equal(limit_of(&v), 4);
    /* But nothing above the mount point: it is not our hierarchy. */
    t_write("sys/fs/cpu.max", "100000 100000\n");
    t_write("sys/fs/cgroup/cpu.max", "max 100000\n");
    assert_int_equal(limit_of(&v), 0);
}

static void test_cgroup_v2_max_everywhere_is_no_limit(void **state)
{
    int v;
    t_write("proc/self/cgroup", "0::/a/b\n");
    t_write("proc/self/mountinfo", MNT_V2);
    t_write("sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
    t_write("sys/fs/cgroup/a/cpu.max", "max\n");
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 2);
}

static void test_cgroup_v2_malformed_level_is_no_limit(void **state)
{
    static const char *bad[] = {
        "", "\n", "abc\n", "100000\n", "100000 \n", "-5 100000\n",
        "100000 0\n", "0 100000\n", "1 2 3\n", "100000 100000x\n",
        "maxi 100000\n", "9999999999999999999 100000\n",
        ("100000 100000 trailing words that run past the reader's small "
         "buffer of sixty-four bytes\n"),
    };
    int v;
    t_write("proc/self/cgroup", "0::/a/b\n");
    t_write("proc/self/mountinfo", MNT_V2);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        t_write("sys/fs/cgroup/a/b/cpu.max", bad[i]);
        t_unlink("sys/fs/cgroup/a/cpu.max");
        if (limit_of(&v) != 0)
            fail_msg("cpu.max \"%s\" read as a limit", bad[i]);
        /* A malformed leaf hides no ancestor's limit. */
        t_write("sys/fs/cgroup/a/cpu.max", "200000 100000\n");
        if (limit_of(&v) != 2)
            fail_msg("cpu.max \"%s\" hid the parent's limit", bad[i]);
    }
}

static void test_cgroup_missing_files_are_no_limit(void **state)
{
    int v;
    /* No /proc/self/cgroup at all. */
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 0);
    /* No mountinfo. */
    t_write("proc/self/cgroup", "0::/a\n");
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 0);
    /* Mounted, but no cpu.max anywhere (the root cgroup has none). */
    t_write("proc/self/mountinfo", MNT_NOISE MNT_V2);
    t_mkdirs("sys/fs/cgroup/a");
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 2);
    /* The directory itself gone (the cgroup was removed). */
    t_write("proc/self/cgroup", "0::/gone/away\n");
    assert_int_equal(limit_of(&v), 0);
    /* Junk in both files. */
    t_write("proc/self/cgroup", "junk\n::\n0:\n:::::\n0::relative\n");
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 0);
    t_write("proc/self/cgroup", "0::/a\n");
    t_write("proc/self/mountinfo", "junk\n1 2 3\n- - -\n"
            "1 2 3 4 5 6 - cgroup2\n");
    assert_int_equal(limit_of(&v), 0);
}

static void test_cgroup_v2_mount_root_is_stripped(void **state)
{
    int v;
    /* A container sees its mount's root; /proc/self/cgroup the whole
     * path. The walk stops at the mount point. */
    t_write("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
    t_write("proc/self/mountinfo", MNT_NOISE
            "40 22 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 "
            "rw\n");
    t_write("sys/fs/cgroup/ctr/cpu.max", "max 100000\n");
    t_write("sys/fs/cgroup/cpu.max", "200000 100000\n");
    assert_int_equal(limit_of(&v), 2);
    assert_int_equal(v, 2);
    /* A path outside the mount's root is not ours to read. */
    t_write("proc/self/cgroup", "0::/kubepods/pod2/ctr\n");
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 0);
    /* Nor one that only shares a prefix with it. */
    t_write("proc/self/cgroup", "0::/kubepods/pod10\n");
    assert_int_equal(limit_of(&v), 0);
    /* Nor one outside the cgroup namespace, which shows as "/..": the
     * walk would leave the mount. */
    t_write("proc/self/mountinfo", MNT_V2);
    t_write("sys/fs/cpu.max", "100000 100000\n");
    t_write("proc/self/cgroup", "0::/..\n");
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 0);
    t_write("proc/self/cgroup", "0::/../sibling\n");
    assert_int_equal(limit_of(&v), 0);
    /* A name that merely starts with dots is a name. */
    t_write("proc/self/cgroup", "0::/..x\n");
    t_write("sys/fs/cgroup/..x/cpu.max", "100000 100000\n");
    assert_int_equal(limit_of(&v), 1);      /* tighter than the mount's */
}

static void test_cgroup_mount_point_escapes_are_undone(void **state)
{
    int v;
    t_write("proc/self/cgroup", "0::/a\n");
    t_write("proc/self/mountinfo",
            "30 22 0:26 / /cg\\040two rw - cgroup2 none rw\n");
    t_write("cg two/a/cpu.max", "100000 50000\n");
    assert_int_equal(limit_of(&v), 2);
}

static void test_cgroup_long_mountinfo_lines_are_skipped(void **state)
{
    char big[20000];
    int v;
    memset(big, 'x', sizeof big);
    memcpy(big + sizeof big - 2, "\n", 2);
    char *mi = malloc(sizeof big + 256);
    assert_non_null(mi);
    snprintf(mi, sizeof big + 256, "%s%s", big, MNT_V2);
    t_write("proc/self/cgroup", "0::/a\n");
    t_write("proc/self/mountinfo", mi);
    free(mi);
    t_write("sys/fs/cgroup/a/cpu.max", "300000 100000");   /* no '\n' */
    assert_int_equal(limit_of(&v), 3);
}

/* ---- cgroup v1 ---------------------------------------------------------- */

static void test_cgroup_v1_quota_over_period(void **state)
{
    int v;
    t_write("proc/self/cgroup", "12:pids:/x\n5:cpuset:/x\n"
            "4:cpu,cpuacct:/x/y\n0::/x\n");
    t_write("proc/self/mountinfo", MNT_NOISE MNT_V1);
    t_write("sys/fs/cgroup/cpu,cpuacct/x/y/cpu.cfs_quota_us", "-1\n");
    t_write("sys/fs/cgroup/cpu,cpuacct/x/y/cpu.cfs_period_us", "100000\n");
    t_write("sys/fs/cgroup/cpu,cpuacct/x/cpu.cfs_quota_us", "250000\n");
    t_write("sys/fs/cgroup/cpu,cpuacct/x/cpu.cfs_period_us", "100000\n");
    assert_int_equal(limit_of(&v), 3);
    assert_int_equal(v, 1);
    /* The leaf's own limit, tighter. */
    t_write("sys/fs/cgroup/cpu,cpuacct/x/y/cpu.cfs_quota_us", "150000\n");
    assert_int_equal(limit_of(&v), 2);
    /* A quota without a readable period is no limit at that level. */
    t_unlink("sys/fs/cgroup/cpu,cpuacct/x/y/cpu.cfs_period_us");
    assert_int_equal(limit_of(&v), 3);
}

static void test_cgroup_v1_quota_minus_one_is_no_limit(void **state)
{
    int v;
    t_write("proc/self/cgroup", "3:cpu:/x\n");
    t_write("proc/self/mountinfo",
            "32 22 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
    t_write("sys/fs/cgroup/cpu/x/cpu.cfs_quota_us", "-1\n");
    t_write("sys/fs/cgroup/cpu/x/cpu.cfs_period_us", "100000\n");
    t_write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    t_write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    assert_int_equal(limit_of(&v), 0);
    assert_int_equal(v, 1);
}

static void test_cgroup_hybrid_reads_v1_cpu(void **state)
{
    int v;
    /* Both mounted, the cpu controller on v1: v1's limit counts. */
    t_write("proc/self/cgroup", "4:cpu,cpuacct:/x\n0::/x\n");
    t_write("proc/self/mountinfo", MNT_V1 MNT_V2);
    t_write("sys/fs/cgroup/cpu,cpuacct/x/cpu.cfs_quota_us", "500000\n");
    t_write("sys/fs/cgroup/cpu,cpuacct/x/cpu.cfs_period_us", "100000\n");
    t_write("sys/fs/cgroup/x/cpu.max", "200000 100000\n");
    assert_int_equal(limit_of(&v), 5);
    assert_int_equal(v, 1);
    /* v1's cpu line without its mount: v2. */
    t_write("proc/self/mountinfo", MNT_V2);
    assert_int_equal(limit_of(&v), 2);
    assert_int_equal(v, 2);
}

/* ---- Go's rule ---------------------------------------------------------- */

static void test_cgroup_procs_follow_gos_rule(void **state)
{
    static const struct { int ncpu, limit, procs; } t[] = {
        {8, 0, 8},      /* no limit: the CPUs */
        {8, 1, 2},      /* the floor of 2 */
        {8, 2, 2},
        {8, 3, 3},
        {8, 100, 8},    /* a limit above the CPUs: the CPUs */
        {2, 1, 2},
        {1, 1, 1},      /* the floor does not exceed the CPUs */
        {1, 4, 1},
        {256, 255, 255},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (gmp__cgroup_procs(t[i].ncpu, t[i].limit) != t[i].procs)
            fail_msg("ncpu %d limit %d: %d, want %d", t[i].ncpu, t[i].limit,
                     gmp__cgroup_procs(t[i].ncpu, t[i].limit), t[i].procs);
}

/* ---- The runtime's default ---------------------------------------------- */

/* A fake v2 tree whose leaf allows cpus CPUs (0: "max"). */
static void fake_v2(int cpus)
{
    char text[64];
    t_write("proc/self/cgroup", "0::/svc\n");
    t_write("proc/self/mountinfo", MNT_NOISE MNT_V2);
    if (cpus)
        snprintf(text, sizeof text, "%d 100000\n", cpus * 100000);
    else
        snprintf(text, sizeof text, "max 100000\n");
    t_write("sys/fs/cgroup/svc/cpu.max", text);
}

/* Keeps $GMP_MAXPROCS and $GMP_DEBUG out of the way of one test. */
static char *saved_env[2];
static const char *const env_names[2] = {"GMP_MAXPROCS", "GMP_DEBUG"};

static int env_up(void **state)
{
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(env_names[i]);
        saved_env[i] = v ? strdup(v) : NULL;
        unsetenv(env_names[i]);
    }
    return tree_up(state);
}

static atomic_int spin_stop;

static int env_down(void **state)
{
    /* A test that failed midway left its runtime: stop it. */
    atomic_store(&spin_stop, 1);
    if (gmp_procs() > 0 && (h_wait_quiet() != 0 || gmp_shutdown() != 0))
        return -1;
    for (int i = 0; i < 2; i++) {
        if (saved_env[i])
            setenv(env_names[i], saved_env[i], 1);
        else
            unsetenv(env_names[i]);
        free(saved_env[i]);
        saved_env[i] = NULL;
    }
    return tree_down(state);
}

/* Starts a runtime with cfg.procs = procs; returns gmp_procs() and in
 * *rereads whether sysmon reads the limit again; stops it. */
static int start_procs(int procs, bool *rereads)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.procs = procs;
    assert_int_equal(gmp_init(&cfg), 0);
    int n = gmp_procs();
    struct schedt *s = h_sched();
    *rereads = s->cgroup != NULL;
    /* Never read again: no room to resize into either. */
    if (!*rereads)
        assert_int_equal(s->maxprocs, n);
    assert_int_equal(gmp_shutdown(), 0);
    return n;
}

static void test_cgroup_default_procs_follow_limit(void **state)
{
    bool rr;
    gmp__cgroup_test_ncpu(8);
    fake_v2(3);
    assert_int_equal(start_procs(0, &rr), 3);
    assert_true(rr);
    fake_v2(1);
    assert_int_equal(start_procs(0, &rr), 2);   /* Go's floor */
    fake_v2(0);
    assert_int_equal(start_procs(0, &rr), 8);   /* "max" */
    assert_true(rr);                            /* a limit may come */
    fake_v2(20);
    assert_int_equal(start_procs(0, &rr), 8);   /* above the CPUs */
    gmp__cgroup_test_ncpu(1);
    fake_v2(3);
    assert_int_equal(start_procs(0, &rr), 1);
}

static void test_cgroup_explicit_procs_win(void **state)
{
    bool rr;
    gmp__cgroup_test_ncpu(8);
    fake_v2(3);
    assert_int_equal(start_procs(5, &rr), 5);
    assert_false(rr);                           /* never read again */
    assert_int_equal(start_procs(1, &rr), 1);
    assert_false(rr);
    setenv("GMP_MAXPROCS", "6", 1);
    assert_int_equal(start_procs(0, &rr), 6);
    assert_false(rr);
    assert_int_equal(start_procs(2, &rr), 2);   /* config over env */
    /* A value $GMP_MAXPROCS does not take leaves the default. */
    setenv("GMP_MAXPROCS", "lots", 1);
    assert_int_equal(start_procs(0, &rr), 3);
    assert_true(rr);
}

static void test_cgroup_debug_keys_turn_it_off(void **state)
{
    bool rr;
    gmp__cgroup_test_ncpu(8);
    fake_v2(3);
    setenv("GMP_DEBUG", "schedtrace=0,containermaxprocs=0", 1);
    assert_int_equal(start_procs(0, &rr), 8);
    assert_false(rr);
    setenv("GMP_DEBUG", "updatemaxprocs=0", 1);
    assert_int_equal(start_procs(0, &rr), 3);   /* read once */
    assert_false(rr);                           /* not again */
    setenv("GMP_DEBUG", "containermaxprocs=1,updatemaxprocs=1", 1);
    assert_int_equal(start_procs(0, &rr), 3);
    assert_true(rr);
}

/* ---- sysmon reads it again, and resizes -------------------------------- */

#define SLEEPERS 64

static _Atomic int64_t spun, slept, called;

/* Keeps a P busy, so that sysmon stays awake, and the local queues full
 * of Gs that a resize must move. */
static void spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&spin_stop))
        gmp_yield();
    atomic_fetch_add(&spun, 1);
}

/* Sleeps in a loop: timers on every P, which a resize must move. */
static void sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&spin_stop)) {
        gmp_sleep(200 * 1000);
        atomic_fetch_add(&slept, 1);
    }
    atomic_fetch_add(&spun, 1);
}

/* In and out of a blocking call: its P is retaken, and may be retired,
 * while it is inside. */
static void caller(void *arg)
{
    (void)arg;
    while (!atomic_load(&spin_stop)) {
        gmp_syscall_enter();
        usleep(300);
        gmp_syscall_exit();
        atomic_fetch_add(&called, 1);
    }
    atomic_fetch_add(&spun, 1);
}

/* Timed waits that a send ends early: their timers are deleted, from
 * whichever heap a resize moved them to (gmp__timer_del). */
static gmp_chan_t *tick_ch;
static _Atomic int64_t woken_early;

static void timed_waiter(void *arg)
{
    (void)arg;
    while (!atomic_load(&spin_stop)) {
        int v;
        gmp_case_t c = {tick_ch, GMP_RECV, &v, 0};
        int r = gmp_select(&c, 1, 50 * 1000000LL);
        G_CHECK(r == 0 || r == GMP_ETIMEDOUT);
        if (r == 0)
            atomic_fetch_add(&woken_early, 1);
    }
    atomic_fetch_add(&spun, 1);
}

static void tick_sender(void *arg)
{
    (void)arg;
    int v = 1;
    while (!atomic_load(&spin_stop)) {
        gmp_case_t c = {tick_ch, GMP_SEND, &v, 0};
        (void)gmp_select(&c, 1, 1000000);
        gmp_sleep(100 * 1000);
    }
    atomic_fetch_add(&spun, 1);
}

static int want;

static bool procs_are(void *arg)
{
    (void)arg;
    struct schedt *s = h_sched();
    return atomic_load(&s->procs_default) == want && gmp_procs() == want;
}

/* The Ps in use are allp[0 .. procs), none beyond is, and a retired one
 * has no timer left. Read while the world runs: a P in use may be in
 * any state but dead; a dead one stays dead until the next resize. */
static void check_ps(int procs)
{
    struct schedt *s = h_sched();
    for (int i = 0; i < s->maxprocs; i++) {
        struct p *pp = &s->allp[i];
        int st = atomic_load(&pp->status);
        if (i < procs) {
            assert_int_not_equal(st, P_DEAD);
        } else {
            assert_int_equal(st, P_DEAD);
            assert_int_equal(atomic_load(&pp->timer0when), 0);
            assert_true(gmp__runqempty(pp));
        }
    }
}

/* Waits until every counter has moved on by at least 3 from *base. */
static bool progressed(void *arg)
{
    int64_t *base = arg;
    return atomic_load(&slept) >= base[0] + 3 * SLEEPERS &&
           atomic_load(&called) >= base[1] + 3 &&
           atomic_load(&woken_early) >= base[2] + 3;
}

/* Starts a runtime on a fake limit of first CPUs with 8 to use, then
 * changes the limit through each of next[] and waits until sysmon's
 * default, and the Ps in use, follow each; the sleepers, spinners, the
 * syscall caller and the timed waiter go on on the new set each time,
 * all of them end, and no timer is left in any heap. */
static void reread(int first, const int *next, int n)
{
    gmp__cgroup_test_ncpu(8);
    fake_v2(first);
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    assert_int_equal(gmp_init(&cfg), 0);
    assert_int_equal(gmp_procs(), gmp__cgroup_procs(8, first));
    assert_int_equal(h_sched()->maxprocs, 8);
    atomic_store(&spin_stop, 0);
    atomic_store(&spun, 0);
    atomic_store(&slept, 0);
    atomic_store(&called, 0);
    int ngo = 0;
    for (int i = 0; i < 8; i++, ngo++)
        assert_int_equal(gmp_go(spinner, NULL), 0);
    for (int i = 0; i < SLEEPERS; i++, ngo++)
        assert_int_equal(gmp_go(sleeper, NULL), 0);
    assert_int_equal(gmp_go(caller, NULL), 0);
    ngo++;
    tick_ch = h_chan(sizeof(int), 0);
    atomic_store(&woken_early, 0);
    assert_int_equal(gmp_go(timed_waiter, NULL), 0);
    assert_int_equal(gmp_go(tick_sender, NULL), 0);
    ngo += 2;
    for (int i = 0; i < n; i++) {
        fake_v2(next[i]);
        want = gmp__cgroup_procs(8, next[i]);
        assert_int_equal(h_wait_until(procs_are, NULL,
                                      "the Ps to follow cpu.max"), 0);
        check_ps(want);
        int64_t base[3] = {atomic_load(&slept), atomic_load(&called),
                           atomic_load(&woken_early)};
        assert_int_equal(h_wait_until(progressed, base,
                                      "sleeps and calls on the new Ps"), 0);
    }
    atomic_store(&spin_stop, 1);
    assert_int_equal(h_wait(&spun, ngo), 0);
    assert_int_equal(h_wait_quiet(), 0);
    h_assert_quiet_timers();
    assert_int_equal(gmp_shutdown(), 0);
    gmp_chan_free(tick_ch);
}

static void test_cgroup_sysmon_resizes_from_2(void **state)
{
    static const int next[] = {5, 0, 1, 3};
    reread(2, next, 4);
}

static void test_cgroup_sysmon_resizes_from_4(void **state)
{
    static const int next[] = {2, 7, 4, 8, 2};
    reread(4, next, 5);
}

/* ---- A real cgroup ------------------------------------------------------ */

struct real {
    char dir[PATH_MAX];         /* the cgroup the child moves into */
    char parent_procs[PATH_MAX];
};

static bool put_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    assert_true(snprintf(path, sizeof path, "%s/%s", dir, name) <
                (int)sizeof path);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text);
}

/* In the child: move into the cgroup, read the limit as the runtime
 * does, check it, and start a runtime. Exit 0 when all held. */
static void real_child(void *arg)
{
    struct real *r = arg;
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (!put_file(r->dir, "cgroup.procs", pid)) {
        printf("cannot move into %s\n", r->dir);
        _exit(3);
    }
    struct gmp__cgroup cg;
    int rc = gmp__cgroup_open(&cg);
    int limit = gmp__cgroup_limit(&cg);
    printf("open %d version %d dir %s limit %d\n", rc, cg.version, cg.dir,
           limit);
    if (rc != 0 || cg.version != 1 || limit != 2)   /* ceil(1.5) */
        _exit(4);
    unsetenv("GMP_MAXPROCS");
    unsetenv("GMP_DEBUG");
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    if (gmp_init(&cfg) != 0)
        _exit(5);
    int procs = gmp_procs();
    gmp_shutdown();
    printf("procs %d ncpu %d\n", procs, gmp__ncpu());
    if (procs != gmp__cgroup_procs(gmp__ncpu(), 2))
        _exit(6);
    put_file(r->parent_procs, "cgroup.procs", pid);
    _exit(0);
}

static void skip_real(void)
{
    print_message("skipped: needs root and a writable cgroup v1 cpu "
                  "hierarchy to make a cgroup in\n");
    skip();
}

static void test_cgroup_real_v1_limit(void **state)
{
    static struct real r;
    static struct gmp__cgroup here;
    if (geteuid() != 0 || gmp__cgroup_open(&here) != 0 ||
        here.version != 1) {
        skip_real();
        return;
    }
    snprintf(r.parent_procs, sizeof r.parent_procs, "%s", here.dir);
    int n = snprintf(r.dir, sizeof r.dir, "%s/gmprt-test-%d", here.dir,
                     (int)getpid());
    if (n < 0 || (size_t)n >= sizeof r.dir || mkdir(r.dir, 0755) != 0) {
        skip_real();
        return;
    }
    bool ok = put_file(r.dir, "cpu.cfs_period_us", "100000\n") &&
              put_file(r.dir, "cpu.cfs_quota_us", "150000\n");
    struct h_child res;
    int frc = ok ? h_fork(real_child, &r, &res) : -1;
    rmdir(r.dir);
    if (!ok) {
        skip_real();
        return;
    }
    assert_int_equal(frc, 0);
    h_child_exited(&res, 0, 0);
}

int main(void)
{
    const struct CMUnitTest trees[] = {
        cmocka_unit_test_setup_teardown(test_cgroup_v2_leaf_limit_rounds_up,
                                        tree_up, tree_down),
        cmocka_unit_test_setup_teardown(test_cgroup_v2_tighter_ancestor_wins,
                                        tree_up, tree_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_v2_max_everywhere_is_no_limit, tree_up, tree_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_v2_malformed_level_is_no_limit, tree_up, tree_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_missing_files_are_no_limit, tree_up, tree_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_v2_mount_root_is_stripped, tree_up, tree_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_mount_point_escapes_are_undone, tree_up, tree_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_long_mountinfo_lines_are_skipped, tree_up,
            tree_down),
        cmocka_unit_test_setup_teardown(test_cgroup_v1_quota_over_period,
                                        tree_up, tree_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_v1_quota_minus_one_is_no_limit, tree_up, tree_down),
        cmocka_unit_test_setup_teardown(test_cgroup_hybrid_reads_v1_cpu,
                                        tree_up, tree_down),
        cmocka_unit_test(test_cgroup_procs_follow_gos_rule),
    };
    const struct CMUnitTest runtime[] = {
        cmocka_unit_test_setup_teardown(
            test_cgroup_default_procs_follow_limit, env_up, env_down),
        cmocka_unit_test_setup_teardown(test_cgroup_explicit_procs_win,
                                        env_up, env_down),
        cmocka_unit_test_setup_teardown(test_cgroup_debug_keys_turn_it_off,
                                        env_up, env_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_sysmon_resizes_from_2, env_up, env_down),
        cmocka_unit_test_setup_teardown(
            test_cgroup_sysmon_resizes_from_4, env_up, env_down),
    };
    const struct CMUnitTest real[] = {
        cmocka_unit_test(test_cgroup_real_v1_limit),
    };
    return cmocka_run_group_tests_name("cgroup reader", trees, NULL, NULL) +
           cmocka_run_group_tests_name("cgroup default procs", runtime, NULL,
                                       NULL) +
           cmocka_run_group_tests_name("cgroup real", real, NULL, NULL);
}
