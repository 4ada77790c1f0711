/*
 * preempt.h - preemption by signal: the policy of where a signal may stop a
 * goroutine, the handler's half and the per-thread setup (preempt.c; its
 * essay). The cooperative point is in runtime.h.
 */
#ifndef GMP_PREEMPT_H
#define GMP_PREEMPT_H

#include "runtime.h"

#include <ucontext.h>

GMP_HIDDEN void gmp__preemptone(struct schedt *s, struct p *pp);
/* Sends the preemption signal to pp's thread so that its handler takes
 * the backtrace sysmon asked for in s->stalls[pp->id]. Returns false when
 * no handler is installed (asynchronous preemption off). Context: sysmon. */
GMP_HIDDEN bool gmp__stall_signal(struct schedt *s, struct p *pp);
/* Longest gmp_config_t.preempt_objects (and GMP_DEBUG preemptobjs)
 * accepted, with its NUL. */
#define GMP_PREEMPT_OBJECTS_MAX 256
GMP_HIDDEN void gmp__preempt_setup(struct schedt *s, bool async,
                                   const char *objs);
GMP_HIDDEN void gmp__preempt_teardown(void);
GMP_HIDDEN void gmp__preempt_minit(struct m *mp);
GMP_HIDDEN void gmp__preempt_mexit(struct m *mp);

/* The SIGURG handler's question (signals.c): the stub's resume signal
 * (loads its frame into uc), or a preemption request (may rewrite uc to
 * enter the stub). Async-signal-safe. */
GMP_HIDDEN void gmp__preempt_signal(ucontext_t *uc);

#endif /* GMP_PREEMPT_H */
