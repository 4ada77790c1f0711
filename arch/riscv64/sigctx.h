/*
 * sigctx.h - RISC-V 64 Linux (RV64GC, LP64D): the context a signal
 * interrupted, and how the handler sends the thread into the preemption
 * stub (preempt.S) and back. arch/interrupt.h lists these functions and
 * includes this file. As on arm64, the stub is entered with the
 * interrupted pc and sp stored below sp (no red zone in the psABI) and
 * goes back by signalling its own thread (src/preempt.c's essay;
 * preempt.S has the frame).
 */
#ifndef GMP_ARCH_SIGCTX_H
#define GMP_ARCH_SIGCTX_H

#include <sys/auxv.h>

#include "context.h"         /* frame.h: GMP_APF_* */

#if __riscv_xlen != 64 || !defined(__riscv_flen) || __riscv_flen != 64
#error "gmprt: RISC-V needs RV64 with the D extension (RV64GC, LP64D)"
#endif

#define GMP_RED_ZONE 0

/* The stub's last instruction before the resume signal is taken
 * (preempt.S). */
extern const char gmp__asyncpreempt_resume[]
    __attribute__((visibility("hidden")));

/* The stub's frame (preempt.S): x1-x31 (x_i at GMP_SF_X1 + i - 1), f0-f31,
 * fcsr, then pid and tid for the resume signal; above it the handler's
 * two words, the interrupted PC and sp. In 8-byte words. */
enum {
    GMP_SF_X1 = 0, GMP_SF_F0 = 31, GMP_SF_FCSR = 63, GMP_SF_PID = 64,
    GMP_SF_TID = 65, GMP_SF_PC = 66, GMP_SF_SP = 67,
};
_Static_assert(GMP_APF_FP == GMP_SF_X1 + 7 && GMP_APF_PC == GMP_SF_PC &&
                   GMP_APF_WORDS == GMP_SF_SP + 1 &&
                   GMP_APF_PID == GMP_SF_PID &&
                   GMP_SF_TID == GMP_SF_PID + 1 &&
                   GMP_SF_FCSR == GMP_SF_F0 + 32 &&
                   GMP_SF_PID == GMP_SF_FCSR + 1 &&
                   GMP_SF_PC == GMP_SF_TID + 1,
               "frame.h's GMP_APF_* and preempt.S describe this frame");

/* Signal frame extension records (the kernel's asm/sigcontext.h since
 * Linux 6.5, spelled out: older headers lack them). A chain of headers
 * that starts in the reserved words at the end of the FP state (byte 520
 * of the Q-extension layout) and ends with magic 0; the kernel writes a
 * vector record when the thread's V state is not off. Kernels without
 * vector support leave those words zero, and report no 'V' in AT_HWCAP;
 * qemu-user (7.2) writes a shorter frame that ends after fcsr, so the
 * chain is read only where AT_HWCAP has 'V'. */
struct gmp__sigrec {
    uint32_t magic, size;
};
#define GMP_REC_END   0u
#define GMP_REC_V     0x53465457u
#define GMP_REC_FIRST 520
#define GMP_HWCAP_V   (1ul << ('V' - 'A'))

/* Whether AT_HWCAP has 'V': set once before the handler is installed
 * (gmp__sigctx_setup), read by the handler; defined in preempt.S. */
extern bool gmp__have_v __attribute__((visibility("hidden")));

static inline uintptr_t gmp__sigctx_pc(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.__gregs[REG_PC];
}

static inline uintptr_t gmp__sigctx_sp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.__gregs[REG_SP];
}

static inline uintptr_t gmp__sigctx_fp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.__gregs[REG_S0];
}

static inline bool gmp__sigctx_setup(void)
{
    gmp__have_v = (getauxval(AT_HWCAP) & GMP_HWCAP_V) != 0;
    return true;
}

/* The handler's two words, their alignment and the stub's frame. */
static inline size_t gmp__sigctx_stub_need(void)
{
    return 32 + GMP_APF_PC * 8;
}

/* The stub's sp is 16-byte aligned whatever the interrupted one was. */
static inline void gmp__sigctx_redirect(ucontext_t *uc, uintptr_t pc,
                                        uintptr_t sp)
{
    uintptr_t *w = (uintptr_t *)((sp - 16) & ~(uintptr_t)15);
    w[0] = pc;
    w[1] = sp;
    uc->uc_mcontext.__gregs[REG_SP] = (uintptr_t)w;
    uc->uc_mcontext.__gregs[REG_PC] = (uintptr_t)gmp__asyncpreempt;
}

/* True when the signal frame holds no vector state: the stub saves f0-f31
 * and fcsr only, and a goroutine resumed on another thread would find
 * that thread's vector registers. Any extension record counts as state:
 * a vector one, or one the runtime does not know, whose state the stub
 * would not save either. */
static inline bool gmp__sigctx_fp_plain(const ucontext_t *uc)
{
    if (!gmp__have_v)
        return true;
    const struct gmp__sigrec *r = (const struct gmp__sigrec *)(const void *)(
        (const char *)&uc->uc_mcontext.__fpregs + GMP_REC_FIRST);
    return r->magic == GMP_REC_END;
}

static inline bool gmp__sigctx_is_resume(const ucontext_t *uc)
{
    return gmp__sigctx_pc(uc) == (uintptr_t)gmp__asyncpreempt_resume;
}

/* The resume signal: loads the frame the stub saved into the context the
 * kernel restores on return. tp stays the current thread's. */
static inline bool gmp__sigctx_resume(ucontext_t *uc)
{
    const uint64_t *f = (const uint64_t *)gmp__sigctx_sp(uc);
    unsigned long *r = uc->uc_mcontext.__gregs;
    for (int i = 1; i < 32; i++)
        if (i != REG_SP && i != REG_TP)
            r[i] = f[GMP_SF_X1 + i - 1];
    memcpy(uc->uc_mcontext.__fpregs.__d.__f, &f[GMP_SF_F0],
           sizeof uc->uc_mcontext.__fpregs.__d.__f);
    uc->uc_mcontext.__fpregs.__d.__fcsr = (uint32_t)f[GMP_SF_FCSR];
    r[REG_PC] = f[GMP_SF_PC];
    r[REG_SP] = f[GMP_SF_SP];
    return true;
}

static inline void gmp__sigctx_stub_return(uint64_t *frame, pid_t pid,
                                           int tid)
{
    frame[GMP_SF_PID] = (uint64_t)pid;
    frame[GMP_SF_TID] = (uint64_t)tid;
}

#endif /* GMP_ARCH_SIGCTX_H */
