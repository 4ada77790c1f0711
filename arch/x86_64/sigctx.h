/*
 * sigctx.h - x86-64 Linux: the context a signal interrupted, and how the
 * handler sends the thread into the preemption stub (preempt.S).
 * arch/interrupt.h lists these functions and includes this file.
 * The stub is entered as if called from below the red zone and returns
 * by itself (src/preempt.c's essay; preempt.S has the frame).
 */
#ifndef GMP_ARCH_SIGCTX_H
#define GMP_ARCH_SIGCTX_H

#include <cpuid.h>

/* The SysV red zone. */
#define GMP_RED_ZONE 128

/* The stub's xsave area size (preempt.S, which defines it). */
extern size_t gmp__xsave_size __attribute__((visibility("hidden")));

static inline uintptr_t gmp__sigctx_pc(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}

static inline uintptr_t gmp__sigctx_sp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
}

static inline uintptr_t gmp__sigctx_fp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
}

/* The stub saves with xsave: it needs the OS to have enabled it. */
static inline bool gmp__sigctx_setup(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return false;
    if (!__get_cpuid_count(0xd, 0, &a, &b, &c, &d) || b < 576)
        return false;
    gmp__xsave_size = ((size_t)b + 63) & ~(size_t)63;
    return true;
}

/* Red zone and return address, sixteen pushed registers and the flags,
 * alignment to 64, the xsave area. */
static inline size_t gmp__sigctx_stub_need(void)
{
    return GMP_RED_ZONE + 8 + 16 * 8 + 64 + gmp__xsave_size;
}

/* xsave saves every component the OS enabled. */
static inline bool gmp__sigctx_fp_plain(const ucontext_t *uc)
{
    (void)uc;
    return true;
}

static inline void gmp__sigctx_redirect(ucontext_t *uc, uintptr_t pc,
                                        uintptr_t sp)
{
    sp -= GMP_RED_ZONE + 8;
    *(uintptr_t *)sp = pc;
    uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)gmp__asyncpreempt;
}

/* The stub returns by itself. */
static inline bool gmp__sigctx_is_resume(const ucontext_t *uc)
{
    (void)uc;
    return false;
}

static inline bool gmp__sigctx_resume(ucontext_t *uc)
{
    (void)uc;
    return false;
}

static inline void gmp__sigctx_stub_return(uint64_t *frame, pid_t pid,
                                           int tid)
{
    (void)frame;
    (void)pid;
    (void)tid;
}

#endif /* GMP_ARCH_SIGCTX_H */
