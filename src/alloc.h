/*
 * alloc.h - the embedder's memory and thread hooks, and the runtime's
 * allocations through them (alloc.c; docs/design.md, "Memory and threads
 * for an embedder").
 */
#ifndef GMP_ALLOC_H
#define GMP_ALLOC_H

#include "runtime.h"

/* The host's hooks: the hook fields of the gmp_config_t the running (or
 * last) runtime started with, the rest zero; process-wide (alloc.c). */
GMP_HIDDEN extern gmp_config_t gmp__hooks;
/* Takes cfg's hooks (NULL: none). Context: no runtime thread exists. */
GMP_HIDDEN void gmp__hooks_set(const gmp_config_t *cfg);
/* Zeroed memory aligned to GMP_CACHELINE for a runtime object, or NULL;
 * freed with the size asked. Context: any. */
GMP_HIDDEN void *gmp__alloc(size_t size);
GMP_HIDDEN void gmp__free(void *p, size_t size);
/* Page-aligned stack memory, committed as it is touched; NULL on
 * failure. Context: any. */
GMP_HIDDEN void *gmp__stack_map(size_t size);
GMP_HIDDEN void gmp__stack_unmap(void *p, size_t size);
/* Brackets a call out of the runtime into code the preemption handler
 * cannot tell from the program's (a host hook, an interposed libc
 * function) that the runtime may make holding its locks: the calling
 * goroutine is not preempted until the end. Returns that goroutine, or
 * NULL when the caller is none (g0, a plain thread), for _end. */
GMP_HIDDEN struct g *gmp__callout_begin(void);
GMP_HIDDEN void gmp__callout_end(struct g *gp);
/* The thread hooks, on the thread that starts or stops. */
GMP_HIDDEN void gmp__thread_started(void);
GMP_HIDDEN void gmp__thread_stopping(void);

#endif /* GMP_ALLOC_H */
