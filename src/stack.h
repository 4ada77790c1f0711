/*
 * stack.h - goroutine stacks: chunks and caches, guards, overflow reports and
 * the Ms' signal stacks (stack.c; its essay).
 */
#ifndef GMP_STACK_H
#define GMP_STACK_H

#include "runtime.h"

#include <signal.h>
#include <ucontext.h>

GMP_HIDDEN struct gstack *gmp__stackalloc(struct schedt *s, struct p *pp);
/* A stack of size bytes (page-rounded, guard included) of its own, for a
 * G started by gmp_go_attr; NULL when it cannot be mapped. gmp__stackfree
 * unmaps it. Context: g0. */
GMP_HIDDEN struct gstack *gmp__stackalloc_own(size_t size);
/* The guard below a stack of stack_size bytes: an eighth, a page to
 * 64 KiB. */
GMP_HIDDEN size_t gmp__guard_for(size_t stack_size);
GMP_HIDDEN void gmp__stackfree(struct schedt *s, struct p *pp,
                               struct gstack *st);
GMP_HIDDEN void gmp__stacks_release(struct schedt *s);
GMP_HIDDEN bool gmp__guard_region_works(char *page, size_t len);
GMP_HIDDEN bool gmp__kernel_refuses(const char *p);
GMP_HIDDEN int gmp__altstack_setup(struct m *mp);
GMP_HIDDEN void gmp__altstack_release(struct m *mp);

/* The SIGSEGV/SIGBUS handler's question (signals.c): reports the current
 * goroutine's stack overflow and exits if the fault at si->si_addr is
 * one; else returns. Async-signal-safe. */
GMP_HIDDEN void gmp__stack_fault(const siginfo_t *si, const ucontext_t *uc);

#endif /* GMP_STACK_H */
