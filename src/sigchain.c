/*
 * sigchain.c - gmp__sig_take and gmp__sig_chain: the runtime's handler in
 * the program's place, and the program's disposition, called as the
 * kernel would have called it (sigchain.h has the rules). The chain is
 * async-signal-safe throughout: sigaction, pthread_sigmask and tgkill
 * only.
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "sigchain.h"

/* Whether sig's default action ends the process (of those we chain). */
static bool default_kills(int sig)
{
    return sig != SIGURG && sig != SIGCHLD && sig != SIGWINCH;
}

/* A fault the kernel raised for an instruction, not a signal someone
 * sent: returning runs the instruction again. */
static bool is_fault(int sig, const siginfo_t *si)
{
    return (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL ||
            sig == SIGFPE) && si && si->si_code > 0;
}

/* The default action: with the disposition back at SIG_DFL, a fault
 * kills as it returns and re-executes; a sent signal is sent again to
 * this thread, pending while the handler runs, delivered (and fatal) as
 * it returns. */
static void take_default(int sig, const siginfo_t *si)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (!is_fault(sig, si))
        syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

int gmp__sig_take(int sig, void (*fn)(int, siginfo_t *, void *), int flags,
                  struct sigaction *old)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, old) != 0)
        return -errno;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = flags | SA_SIGINFO;
    /* SIG_DFL and SIG_IGN carry no mask worth keeping. */
    if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN)
        sigemptyset(&sa.sa_mask);
    else
        sa.sa_mask = old->sa_mask;
    return sigaction(sig, &sa, old) == 0 ? 0 : -errno;
}

void gmp__sig_chain(int sig, siginfo_t *si, void *uc, struct sigaction *old)
{
    struct sigaction h = *old;      /* one read: see SA_RESETHAND below */
    bool siginfo = h.sa_flags & SA_SIGINFO;
    /* sa_handler and sa_sigaction share their storage: SIG_DFL (0) and
     * SIG_IGN (1) read the same through either. */
    void (*fn)(int) = h.sa_handler;
    if (fn == SIG_IGN || fn == SIG_DFL) {
        if (fn == SIG_DFL ? default_kills(sig) : is_fault(sig, si))
            take_default(sig, si);
        return;
    }
    if (h.sa_flags & SA_RESETHAND) {
        /* The kernel resets the disposition as it delivers. A thread
         * chaining at the same moment may still see the handler, as it
         * could have raced the kernel's own delivery. */
        old->sa_handler = SIG_DFL;
        old->sa_flags &= ~(SA_SIGINFO | SA_RESETHAND);
    }
    /* The mask the kernel would have set: the interrupted code's, the
     * handler's sa_mask, and the signal unless SA_NODEFER. */
    sigset_t mask, saved;
    mask = ((ucontext_t *)uc)->uc_sigmask;
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&h.sa_mask, s) == 1)
            sigaddset(&mask, s);
    if (h.sa_flags & SA_NODEFER)
        sigdelset(&mask, sig);
    else
        sigaddset(&mask, sig);
    pthread_sigmask(SIG_SETMASK, &mask, &saved);
    if (siginfo)
        h.sa_sigaction(sig, si, uc);
    else
        fn(sig);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}
