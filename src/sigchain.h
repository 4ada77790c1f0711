/*
 * sigchain.h - handing a signal on to the disposition the program had
 * installed before the runtime's handler (SIGSEGV and SIGBUS in stack.c,
 * SIGURG in preempt.c, SIGQUIT in trace.c).
 *
 * The runtime's handler replaces the program's; when the signal is not
 * the runtime's to handle, the program's disposition must see what the
 * kernel would have given it: its own sa_mask added to the mask the
 * signal interrupted (and the signal itself unless SA_NODEFER), a
 * siginfo and context only with SA_SIGINFO, its disposition reset to the
 * default after one delivery with SA_RESETHAND, nothing for SIG_IGN, and
 * the default action for SIG_DFL (death with the signal's own status for
 * SEGV, BUS and QUIT; nothing for URG). A fault (SIGSEGV or SIGBUS sent
 * by the kernel) cannot be ignored: the kernel kills the process when
 * one is, and so does the chain.
 */
#ifndef GMP_SIGCHAIN_H
#define GMP_SIGCHAIN_H

#include <signal.h>

#include "runtime.h"

/* Installs fn(sig, si, uc) for sig with flags (SA_SIGINFO is added) and
 * saves the program's disposition in *old. fn runs with the program's
 * handler's sa_mask blocked from the moment the kernel delivers sig, as
 * that handler would have: a signal it keeps out (libgc's handler for its
 * write faults keeps out its stop-the-world signal) must not land in the
 * runtime's handler either, before or after the chain, where it would
 * find sig blocked, which the kernel never does to it. Returns 0 or
 * -errno. Context: starting a runtime. */
GMP_HIDDEN int gmp__sig_take(int sig, void (*fn)(int, siginfo_t *, void *),
                             int flags, struct sigaction *old);

/* Delivers sig to the saved disposition *old as the kernel would have
 * (see above). May write *old (SA_RESETHAND). Returns when the program's
 * handler returns, or at once; for a default action that kills, it may
 * return to let the faulting instruction run again and kill. Costs no
 * system call when *old is SIG_IGN or SIG_DFL for a signal whose default
 * is to ignore it. Context: the runtime's handler for sig, on the thread
 * the signal was delivered to. */
GMP_HIDDEN void gmp__sig_chain(int sig, siginfo_t *si, void *uc,
                               struct sigaction *old);

#endif /* GMP_SIGCHAIN_H */
