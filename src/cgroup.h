/*
 * cgroup.h - the CPU limit of the process's cgroup, for the default
 * number of Ps (cgroup.c has the rules; docs/design.md, "How many Ps").
 */
#ifndef GMP_CGROUP_H
#define GMP_CGROUP_H

#include <limits.h>
#include <stddef.h>

#include "runtime.h"               /* GMP_HIDDEN */

/* Where the process's CPU controller is, found once (gmp__cgroup_open)
 * and read again each time the limit is wanted (gmp__cgroup_limit). */
struct gmp__cgroup {
    int    version;             /* 0: none found; 1 or 2 */
    size_t mountlen;            /* dir[0..mountlen) is the mount point,
                                   where the walk to the ancestors stops */
    char   dir[PATH_MAX];       /* the process's own cgroup directory */
};

/* Finds the process's cgroup that holds its CPU controller: cgroup v1's
 * "cpu" controller if one is mounted, else v2's unified hierarchy.
 * Returns 0, or -1 (no cgroup found, or a file missing or malformed: cg
 * then says version 0, and gmp__cgroup_limit finds no limit).
 * Context: any thread with no lock held; reads files, may block. */
GMP_HIDDEN int gmp__cgroup_open(struct gmp__cgroup *cg);

/* The CPU limit of cg: the tightest quota/period of its directory and
 * every ancestor up to the mount point, rounded up to whole CPUs; 0 when
 * no level has a limit. Context: as gmp__cgroup_open. */
GMP_HIDDEN int gmp__cgroup_limit(const struct gmp__cgroup *cg);

/* The CPUs this process may run on: its affinity mask (as Go's NumCPU),
 * else the online CPUs; 1 to GMP_MAXPROCS. Context: any thread. */
GMP_HIDDEN int gmp__ncpu(void);

/* The default number of Ps for ncpu usable CPUs and a cgroup limit of
 * limit whole CPUs (0: none), as Go 1.25 chooses it. Context: any. */
GMP_HIDDEN int gmp__cgroup_procs(int ncpu, int limit);

/* For tests: a directory that stands for "/" in every path read from
 * here on (NULL or "": the real one), and a count that stands for the
 * CPUs the affinity mask allows (0: the real one). Call them with no
 * runtime running. */
GMP_HIDDEN void gmp__cgroup_test_root(const char *root);
GMP_HIDDEN void gmp__cgroup_test_ncpu(int ncpu);

#endif
