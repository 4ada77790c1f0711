/*
 * signals.h - the runtime's signals, all installed, handled and handed on
 * in signals.c: SIGSEGV and SIGBUS (a goroutine's stack overflow,
 * stack.c), SIGURG (preemption, preempt.c) and SIGQUIT (the dump,
 * trace.c). Each handler asks its module what the signal means and then
 * hands it on to the disposition the program had installed before the
 * runtime's, which sees what the kernel would have given it:
 * docs/design.md, "Signals the program had first", has the rules.
 */
#ifndef GMP_SIGNALS_H
#define GMP_SIGNALS_H

#include <signal.h>
#include <ucontext.h>

#include "base.h"

/* The runtime's signals, by what they are for. */
enum gmp__signal {
    GMP_SIGNAL_FAULT,               /* SIGSEGV and SIGBUS */
    GMP_SIGNAL_PREEMPT,             /* SIGURG */
    GMP_SIGNAL_QUIT,                /* SIGQUIT, with dump_on_sigquit */
};

/* Installs the runtime's handler for which's signals, saving the
 * program's dispositions: 0, or GMP_EINVAL (sigaction refused). Context:
 * starting a runtime, before any of its threads exist. */
GMP_HIDDEN int gmp__signal_install(enum gmp__signal which);

/* Puts the program's dispositions back, for each of which's signals
 * still the runtime's (one the program replaced meanwhile stays the
 * program's). Context: stopping a runtime, its threads gone. */
GMP_HIDDEN void gmp__signal_restore(enum gmp__signal which);

/* What each handler asks its module: gmp__stack_fault (stack.h),
 * gmp__preempt_signal (preempt.h), gmp__dump_quit (trace.h). */

#endif /* GMP_SIGNALS_H */
