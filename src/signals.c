/*
 * signals.c - every signal the runtime takes (signals.h lists them and what
 * each is for): installing the runtime's handler in the program's place,
 * each handler asking its module what the signal means, and handing it
 * on to the program's disposition as the kernel would have delivered it
 * (docs/design.md, "Signals the program had first"). The chain is
 * async-signal-safe throughout: sigaction, pthread_sigmask and tgkill
 * only. One home, as Go's signal_unix.go.
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "runtime.h"
#include "signals.h"
#include "preempt.h"
#include "stack.h"
#include "trace.h"

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

/* Installs fn(sig, si, uc) for sig with flags (SA_SIGINFO is added) and
 * saves the program's disposition in *old. fn runs with the program's
 * handler's sa_mask blocked from the moment the kernel delivers sig, as
 * that handler would have: a signal it keeps out (libgc's handler for its
 * write faults keeps out its stop-the-world signal) must not land in the
 * runtime's handler either, before or after the chain, where it would
 * find sig blocked, which the kernel never does to it. Returns 0 or
 * -errno. */
static int take(int sig, void (*fn)(int, siginfo_t *, void *), int flags,
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

/* Delivers sig to the saved disposition *old as the kernel would have.
 * May write *old (SA_RESETHAND). Returns when the program's handler
 * returns, or at once; for a default action that kills, it may return to
 * let the faulting instruction run again and kill. Costs no system call
 * when *old is SIG_IGN or SIG_DFL for a signal whose default is to
 * ignore it. */
static void chain(int sig, siginfo_t *si, void *uc, struct sigaction *old)
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

/* ---- The runtime's handlers ---------------------------------------------- */

/* Process-wide, like the dispositions they save: the program's, from
 * gmp__signal_install to gmp__signal_restore. Written only while no
 * runtime thread exists; SA_RESETHAND's write in chain aside, read only
 * by the handlers. */
static struct sigaction old_segv, old_bus, old_urg, old_quit;

/* Not the runtime's unless the fault was the current goroutine's
 * overflow, which does not return. */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
    gmp__stack_fault(si, uc);
    chain(sig, si, uc, sig == SIGBUS ? &old_bus : &old_segv);
}

/* Every SIGURG goes on too: it may be the program's own (out-of-band
 * data on a socket of its own). */
static void on_urg(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    gmp__preempt_signal(uc);
    chain(sig, si, uc, &old_urg);
    errno = saved_errno;
}

/* The dump, then the program's own SIGQUIT handler if it had one (it may
 * exit as it likes), then exit status 2 as Go. A previous SIG_DFL or
 * SIG_IGN is not taken: the program asked for the dump instead. */
static void on_quit(int sig, siginfo_t *si, void *uc)
{
    gmp__dump_quit();
    if (old_quit.sa_handler != SIG_DFL && old_quit.sa_handler != SIG_IGN)
        chain(sig, si, uc, &old_quit);
    _exit(2);
}

static struct {
    int sig;
    enum gmp__signal which;
    void (*fn)(int, siginfo_t *, void *);
    int flags;
    struct sigaction *old;
    bool installed;
} sigs[] = {
    /* On the M's signal stack: an overflow leaves no room on the G's,
     * and a preemption's stub frame is all a G's stack gets. */
    {SIGSEGV, GMP_SIGNAL_FAULT, on_fault, SA_ONSTACK, &old_segv, false},
    {SIGBUS, GMP_SIGNAL_FAULT, on_fault, SA_ONSTACK, &old_bus, false},
    {SIGURG, GMP_SIGNAL_PREEMPT, on_urg, SA_ONSTACK | SA_RESTART, &old_urg,
     false},
    {SIGQUIT, GMP_SIGNAL_QUIT, on_quit, SA_ONSTACK, &old_quit, false},
};
#define NSIGS (sizeof sigs / sizeof *sigs)

int gmp__signal_install(enum gmp__signal which)
{
    for (size_t i = 0; i < NSIGS; i++) {
        if (sigs[i].which != which)
            continue;
        if (take(sigs[i].sig, sigs[i].fn, sigs[i].flags, sigs[i].old) != 0) {
            gmp__signal_restore(which);
            return GMP_EINVAL;
        }
        sigs[i].installed = true;
    }
    return 0;
}

void gmp__signal_restore(enum gmp__signal which)
{
    for (size_t i = 0; i < NSIGS; i++) {
        if (sigs[i].which != which || !sigs[i].installed)
            continue;
        struct sigaction cur;
        if (sigaction(sigs[i].sig, NULL, &cur) == 0 &&
            (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == sigs[i].fn)
            sigaction(sigs[i].sig, sigs[i].old, NULL);
        sigs[i].installed = false;
    }
}
