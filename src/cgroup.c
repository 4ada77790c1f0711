/*
 * cgroup.c - how many Ps a runtime gets when nobody says: the CPUs the
 * process may run on, lowered to its cgroup's CPU limit.
 *
 * The rule is Go 1.25's (runtime/cgroup_linux.go, defaultGOMAXPROCS):
 * procs = min(ncpu, max(ceil(quota / period), 2)), where ncpu counts the
 * affinity mask and quota/period is the cgroup's CPU bandwidth limit; no
 * limit leaves ncpu. Why this rule, and why every ancestor counts:
 * docs/design.md, "How many Ps".
 *
 * Where the limit is read:
 *   - cgroup v1: the hierarchy whose controllers include "cpu" (often
 *     mounted as "cpu,cpuacct"): cpu.cfs_quota_us (-1: none) and
 *     cpu.cfs_period_us. Preferred when both versions are mounted (a
 *     hybrid host), as there the cpu controller is v1's.
 *   - cgroup v2: the "0::<path>" line, and cpu.max ("max <period>": none,
 *     or "<quota> <period>").
 * The process's cgroup is its /proc/self/cgroup path under the mount
 * point that /proc/self/mountinfo gives for that hierarchy, less the
 * mount's own root (a container sees its own cgroup as "/").
 *
 * Ancestors. Every level from the process's cgroup up to the mount
 * point is read and the tightest limit wins (Go 1.25 reads the leaf
 * only). A level without the files (the real root has none) or with a
 * malformed one has no limit.
 *
 * Read again. sysmon reads the limit again about once a second while
 * the runtime runs (sysmon.c), as Go does; the directory found at start
 * is kept (a process moved to another cgroup is not followed, as in
 * Go). GMP_DEBUG=containermaxprocs=0 skips the cgroup and
 * updatemaxprocs=0 the reading again, as Go's GODEBUG keys of those
 * names.
 *
 * Everything here reads small files with open/read/close into buffers on
 * the caller's stack: no allocation, no lock. Any failure reads as "no
 * limit"; nothing here can stop a runtime from starting.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"

/* Set only by the test setters, with no runtime running; read when one
 * starts and by its sysmon, whose thread creation orders them. */
static char test_root[PATH_MAX];
static int test_ncpu;

void gmp__cgroup_test_root(const char *root)
{
    size_t n = root ? strlen(root) : 0;
    if (n >= sizeof test_root)
        n = 0;                      /* too long: the real root */
    memcpy(test_root, root ? root : "", n);
    test_root[n] = '\0';
}

void gmp__cgroup_test_ncpu(int ncpu)
{
    test_ncpu = ncpu > 0 && ncpu <= GMP_MAXPROCS ? ncpu : 0;
}

int gmp__ncpu(void)
{
    if (test_ncpu)
        return test_ncpu;
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0)
        n = 1;
    return n > GMP_MAXPROCS ? GMP_MAXPROCS : n;
}

int gmp__cgroup_procs(int ncpu, int limit)
{
    if (limit <= 0)
        return ncpu;
    if (limit < 2)
        limit = 2;                  /* Go's floor: see the top */
    return limit < ncpu ? limit : ncpu;
}

/* ---- Reading files ------------------------------------------------------ */

/* Reads the whole of a small file (at most cap - 1 bytes; more reads as
 * malformed) into buf, NUL-terminated. Returns its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    for (;;) {
        ssize_t r = GMP_LIBC(read)(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            GMP_LIBC(close)(fd);
            if (r < 0 || len == cap)
                return -1;
            buf[len] = '\0';
            return (ssize_t)len;
        }
        len += (size_t)r;
        if (len == cap) {           /* no room left for the NUL */
            GMP_LIBC(close)(fd);
            return -1;
        }
    }
}

/* A file read line by line through a fixed buffer. A line longer than
 * the buffer is skipped whole. */
struct lines {
    int    fd;
    bool   eof, skipping;
    size_t pos, len;
    char   buf[8192];
};

static bool lines_open(struct lines *lr, const char *path)
{
    lr->fd = open(path, O_RDONLY | O_CLOEXEC);
    lr->eof = lr->skipping = false;
    lr->pos = lr->len = 0;
    return lr->fd >= 0;
}

static void lines_close(struct lines *lr)
{
    GMP_LIBC(close)(lr->fd);
}

/* The next line, NUL-terminated, without its '\n'; NULL at the end or on
 * a read error. */
static char *lines_next(struct lines *lr)
{
    for (;;) {
        char *start = lr->buf + lr->pos;
        char *nl = memchr(start, '\n', lr->len - lr->pos);
        if (nl) {
            *nl = '\0';
            lr->pos = (size_t)(nl - lr->buf) + 1;
            if (lr->skipping) {     /* the tail of a line too long */
                lr->skipping = false;
                continue;
            }
            return start;
        }
        if (lr->eof) {
            if (lr->pos == lr->len || lr->skipping)
                return NULL;
            lr->buf[lr->len] = '\0';   /* a last line without '\n' */
            lr->pos = lr->len;
            return start;
        }
        /* Keep the partial line; drop it if it fills the buffer. */
        size_t keep = lr->len - lr->pos;
        memmove(lr->buf, start, keep);
        lr->pos = 0;
        lr->len = keep;
        if (keep == sizeof lr->buf - 1) {
            lr->skipping = true;
            lr->len = 0;
        }
        ssize_t r = GMP_LIBC(read)(lr->fd, lr->buf + lr->len,
                                   sizeof lr->buf - 1 - lr->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return NULL;
        if (r == 0)
            lr->eof = true;
        lr->len += (size_t)r;
    }
}

/* ---- Parsing ------------------------------------------------------------ */

/* A decimal number of at most 18 digits at *p, advancing *p past it.
 * Returns it, or -1 when there is none. */
static int64_t parse_num(const char **p)
{
    const char *s = *p;
    int64_t v = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9') {
        if (++digits > 18)
            return -1;
        v = v * 10 + (*s++ - '0');
    }
    if (digits == 0)
        return -1;
    *p = s;
    return v;
}

/* Whether only blanks and newlines remain at p. */
static bool at_end(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t')
        p++;
    return *p == '\0';
}

/* ceil(quota / period) in whole CPUs, at least 1; 0 for a value that is
 * not a limit (quota or period not positive). */
static int cpus_of(int64_t quota, int64_t period)
{
    if (quota <= 0 || period <= 0)
        return 0;
    int64_t n = quota / period + (quota % period != 0);
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* The limit of one level of the hierarchy at dir (v2: cpu.max), in
 * whole CPUs; 0: none or unreadable. path has room for PATH_MAX bytes
 * and holds dir in its first len. */
static int level_v2(char *path, size_t len)
{
    char buf[64];
    static const char file[] = "/cpu.max";
    if (len + sizeof file > PATH_MAX)
        return 0;
    memcpy(path + len, file, sizeof file);
    if (read_small(path, buf, sizeof buf) < 0)
        return 0;
    const char *p = buf;
    if (strncmp(p, "max", 3) == 0 && (p[3] == ' ' || at_end(p + 3)))
        return 0;                   /* no limit at this level */
    int64_t quota = parse_num(&p);
    if (quota < 0 || *p != ' ')
        return 0;
    p++;
    int64_t period = parse_num(&p);
    if (period < 0 || !at_end(p))
        return 0;
    return cpus_of(quota, period);
}

/* One number alone in a file, or -1 (a negative number reads as -1). */
static int64_t read_num(const char *path)
{
    char buf[64];
    if (read_small(path, buf, sizeof buf) < 0)
        return -1;
    const char *p = buf;
    if (*p == '-')
        return -1;                  /* cfs_quota_us -1: no limit */
    int64_t v = parse_num(&p);
    return v >= 0 && at_end(p) ? v : -1;
}

/* As level_v2, for v1's cpu.cfs_quota_us and cpu.cfs_period_us. */
static int level_v1(char *path, size_t len)
{
    static const char quota_f[] = "/cpu.cfs_quota_us";
    static const char period_f[] = "/cpu.cfs_period_us";
    if (len + sizeof period_f > PATH_MAX)
        return 0;
    memcpy(path + len, quota_f, sizeof quota_f);
    int64_t quota = read_num(path);
    if (quota <= 0)
        return 0;
    memcpy(path + len, period_f, sizeof period_f);
    return cpus_of(quota, read_num(path));
}

int gmp__cgroup_limit(const struct gmp__cgroup *cg)
{
    if (cg->version == 0)
        return 0;
    char path[PATH_MAX];
    size_t len = strlen(cg->dir);
    memcpy(path, cg->dir, len + 1);
    int best = 0;
    for (;;) {
        int n = cg->version == 2 ? level_v2(path, len) : level_v1(path, len);
        if (n > 0 && (best == 0 || n < best))
            best = n;               /* min of ceils = ceil of the min */
        if (len <= cg->mountlen)
            break;
        /* Up one level: drop the last component and its '/'. */
        while (len > cg->mountlen && path[len - 1] != '/')
            len--;
        if (len > cg->mountlen)
            len--;
    }
    return best;
}

/* ---- Finding the cgroup ------------------------------------------------- */

/* Whether the comma-separated list has the entry word. */
static bool has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1
                                                     : NULL)
        if (strncmp(p, word, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; ) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' &&
            r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

/* Splits line at spaces into at most max fields. Returns the count. */
static int split(char *line, char **f, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " ", &save); t && n < max;
         t = strtok_r(NULL, " ", &save))
        f[n++] = t;
    return n;
}

/* Whether path has a ".." component: a cgroup outside our cgroup
 * namespace shows as "/.." and the like, and is not ours to read. */
static bool has_dotdot(const char *path)
{
    for (const char *p = strstr(path, "/.."); p; p = strstr(p + 1, "/.."))
        if (p[3] == '/' || p[3] == '\0')
            return true;
    return false;
}

/* The process's cgroup path for version 1 (the "cpu" controller's line)
 * or 2 (the "0::" line) from /proc/self/cgroup into out. */
static bool own_path(const char *root, int version, char *out, size_t cap)
{
    char file[PATH_MAX];
    struct lines lr;
    if ((size_t)snprintf(file, sizeof file, "%s/proc/self/cgroup", root) >=
            sizeof file ||
        !lines_open(&lr, file))
        return false;
    bool found = false;
    for (char *line; !found && (line = lines_next(&lr)); ) {
        /* "<id>:<controllers>:<path>"; the path may hold ':'. */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c1 = *c2 = '\0';
        bool match = version == 2 ? strcmp(line, "0") == 0 && c1[1] == '\0'
                                  : has_word(c1 + 1, "cpu");
        size_t n = strlen(c2 + 1);
        if (match && n < cap && !has_dotdot(c2 + 1)) {
            memcpy(out, c2 + 1, n + 1);
            found = true;
        }
    }
    lines_close(&lr);
    return found;
}

/* Finds in mountinfo the mount of the hierarchy (v1: type "cgroup" with
 * "cpu" among its super options; v2: type "cgroup2") whose root holds
 * path, and sets cg->dir to root + mount point + path below the mount's
 * root. */
static bool find_mount(const char *root, int version, const char *path,
                       struct gmp__cgroup *cg)
{
    char file[PATH_MAX];
    struct lines lr;
    if ((size_t)snprintf(file, sizeof file, "%s/proc/self/mountinfo",
                         root) >= sizeof file ||
        !lines_open(&lr, file))
        return false;
    bool found = false;
    for (char *line; !found && (line = lines_next(&lr)); ) {
        /* id parent maj:min root mountpoint options [optional...] -
         * fstype source superoptions */
        char *f[64];
        int n = split(line, f, 64);
        int dash = 6;
        while (dash < n && strcmp(f[dash], "-") != 0)
            dash++;
        if (dash + 1 >= n)
            continue;               /* no "-" or no fstype after it */
        const char *fstype = f[dash + 1];
        const char *super = dash + 3 < n ? f[dash + 3] : "";
        if (version == 2 ? strcmp(fstype, "cgroup2") != 0
                         : strcmp(fstype, "cgroup") != 0 ||
                               !has_word(super, "cpu"))
            continue;
        char *mroot = f[3], *mpoint = f[4];
        unescape(mroot);
        unescape(mpoint);
        /* path must lie under the mount's root. */
        size_t rl = strcmp(mroot, "/") == 0 ? 0 : strlen(mroot);
        if (strncmp(path, mroot, rl) != 0 ||
            (path[rl] != '/' && path[rl] != '\0'))
            continue;
        const char *rel = path + rl;
        if (strcmp(rel, "/") == 0)
            rel = "";
        size_t ml = strlen(mpoint);
        if (ml > 0 && mpoint[ml - 1] == '/')
            mpoint[--ml] = '\0';    /* "/" mounted at "/": no doubled '/' */
        int len = snprintf(cg->dir, sizeof cg->dir, "%s%s", root, mpoint);
        if (len < 0 || (size_t)len >= sizeof cg->dir)
            continue;
        cg->mountlen = (size_t)len;
        if ((size_t)snprintf(cg->dir + len, sizeof cg->dir - (size_t)len,
                             "%s", rel) >= sizeof cg->dir - (size_t)len)
            continue;
        found = true;
    }
    lines_close(&lr);
    return found;
}

int gmp__cgroup_open(struct gmp__cgroup *cg)
{
    char path[PATH_MAX];
    cg->version = 0;
    cg->mountlen = 0;
    cg->dir[0] = '\0';
    /* v1's cpu controller first: on a hybrid host it is the one in use
     * (v2's hierarchy then has no cpu controller). */
    for (int v = 1; v <= 2; v++) {
        if (own_path(test_root, v, path, sizeof path) &&
            find_mount(test_root, v, path, cg)) {
            cg->version = v;
            return 0;
        }
    }
    return -1;
}
