/*
 * frame.h - RISC-V 64 (RV64GC, LP64D, Linux): the suspended-context frame
 * that switch.S stores and loads, shared between the assembly and C
 * (arch/context.h has the architecture-independent half).
 *
 * A suspended context is nothing but a stack pointer: everything else lives
 * on the context's own stack, in this frame (from the saved sp, which is
 * 16-byte aligned as the psABI requires):
 *
 *   +0x00 ra (where the context resumes)
 *   +0x08 s0 (frame pointer)  +0x10 s1 ... +0x60 s11
 *   +0x68 fs0 ... +0xc0 fs11
 *   +0xc8 frm (fcsr's rounding mode, bits 0-2)
 *
 * fs0-fs11 are callee-saved in full under LP64D (64 bits each). The
 * rounding mode is per-goroutine state like x86's MXCSR and arm64's FPCR;
 * the sticky exception flags (fflags, the rest of fcsr) are not saved, as
 * on arm64 FPSR is not. gp and tp are not saved either: gp holds the same
 * value in every thread of the process, and tp is the thread's own (its
 * TLS), which must stay with the thread when a goroutine moves.
 *
 * A fresh context (gmp__ctx_frame_init) holds the same frame with s1 = entry
 * function, s2 = its argument, s0 = 0, ra = gmp__ctx_start and the
 * default rounding mode (0: round to nearest, ties to even).
 */
#ifndef GMP_ARCH_FRAME_H
#define GMP_ARCH_FRAME_H

#define GMP_CTX_RA     0x00
#define GMP_CTX_S0     0x08
#define GMP_CTX_FS0    0x68
#define GMP_CTX_FRM    0xc8
#define GMP_CTX_FRAME  0xd0
/* Where a suspended context's resume address and frame pointer are: what
 * gmp_dump reads to walk a parked goroutine's stack (src/trace.c). */
#define GMP_CTX_PC     GMP_CTX_RA
#define GMP_CTX_FP     GMP_CTX_S0

/* The preemption stub's frame (preempt.S), in 8-byte words from the
 * address the stub passes to gmp__asyncpreempt2 (its sp): the interrupted
 * s0 (x8) and pc, and the words up to the interrupted sp's slot. gmp_dump
 * reads them for a goroutine the signal stopped (trace.c). The stub's own
 * frame is the GMP_APF_PC words below the handler's two (pc, sp); the
 * process and thread ids for the resume signal are at GMP_APF_PID and the
 * word after. sigctx.h's GMP_SF_* spell out the rest and are checked against
 * these. */
#define GMP_APF_FP    7
#define GMP_APF_PID   64
#define GMP_APF_PC    66
#define GMP_APF_WORDS 68

/* Where a frame pointer's record is: GCC's RISC-V frames keep the return
 * address at fp - 8 and the caller's fp at fp - 16 (fp is the frame's
 * CFA), where x86-64 and arm64 keep the pair at fp itself. trace.c and
 * preempt.c walk the records by this offset. */
#define GMP_FP_RECORD (-16)

#define GMP_CTX_FRM_DEFAULT 0

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

struct gmp__ctx_frame {
    void    *ra;
    uint64_t s[12];         /* s0..s11 */
    uint64_t fs[12];        /* fs0..fs11 */
    uint64_t frm;
};

_Static_assert(offsetof(struct gmp__ctx_frame, ra) == GMP_CTX_RA, "ra");
_Static_assert(offsetof(struct gmp__ctx_frame, s[0]) == GMP_CTX_S0, "s0");
_Static_assert(offsetof(struct gmp__ctx_frame, fs[0]) == GMP_CTX_FS0, "fs0");
_Static_assert(offsetof(struct gmp__ctx_frame, frm) == GMP_CTX_FRM, "frm");
_Static_assert(sizeof(struct gmp__ctx_frame) == GMP_CTX_FRAME, "frame");
_Static_assert(GMP_CTX_FRAME % 16 == 0, "sp stays 16-byte aligned");

/* Fills a fresh context's frame: gmp__ctx_start will call fn(arg, from)
 * with the default floating-point rounding mode. */
static inline void gmp__ctx_frame_init(struct gmp__ctx_frame *f,
                                       gmp__ctx_fn *fn, void *arg)
{
    for (int i = 0; i < 12; i++)
        f->s[i] = f->fs[i] = 0;
    f->s[1] = (uint64_t)(uintptr_t)fn;      /* s1 */
    f->s[2] = (uint64_t)(uintptr_t)arg;     /* s2 */
    f->ra = (void *)gmp__ctx_start;
    f->frm = GMP_CTX_FRM_DEFAULT;
}
#endif /* !__ASSEMBLER__ */

#endif /* GMP_ARCH_FRAME_H */
