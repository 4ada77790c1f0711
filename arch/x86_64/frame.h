/*
 * frame.h - x86-64 SysV: the suspended-context frame that switch.S pushes
 * and pops, shared between the assembly and C (arch/context.h has the
 * architecture-independent half).
 *
 * A suspended context is nothing but a stack pointer: everything else lives
 * on the context's own stack, in this frame (from the saved rsp, 16-byte
 * aligned):
 *
 *   +0x00 mxcsr (4) | x87 cw (2) | pad (2, not read)
 *   +0x08 r15   +0x10 r14   +0x18 r13   +0x20 r12
 *   +0x28 rbx   +0x30 rbp   +0x38 return address
 *
 * A fresh context (gmp__ctx_frame_init) holds the same frame with r12 =
 * entry function, r13 = its argument and the return address =
 * gmp__ctx_start, which calls r12(r13, from_sp) with a terminated unwind
 * chain.
 */
#ifndef GMP_ARCH_FRAME_H
#define GMP_ARCH_FRAME_H

#define GMP_CTX_FPCW   0x00
#define GMP_CTX_R15    0x08
#define GMP_CTX_R14    0x10
#define GMP_CTX_R13    0x18
#define GMP_CTX_R12    0x20
#define GMP_CTX_RBX    0x28
#define GMP_CTX_RBP    0x30
#define GMP_CTX_RET    0x38
#define GMP_CTX_FRAME  0x40
/* Where a suspended context's resume address and frame pointer are: what
 * gmp_dump reads to walk a parked goroutine's stack (src/trace.c). */
#define GMP_CTX_PC     GMP_CTX_RET
#define GMP_CTX_FP     GMP_CTX_RBP

/* The preemption stub's frame (preempt.S), in 8-byte words from the
 * address the stub passes to gmp__asyncpreempt2 (its pushed registers):
 * the interrupted rbp and rip, and the words the two span. gmp_dump reads
 * them for a goroutine the signal stopped (trace.c). */
#define GMP_APF_FP    10
#define GMP_APF_PC    16
#define GMP_APF_WORDS 17

/* A frame pointer points at its frame's record: the caller's frame
 * pointer, then the return address (riscv64/frame.h differs). */
#define GMP_FP_RECORD 0

/* Power-on defaults: all exceptions masked, round to nearest; x87 at
 * extended precision. A new context starts with these. */
#define GMP_CTX_MXCSR_DEFAULT 0x1f80
#define GMP_CTX_X87CW_DEFAULT 0x037f

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

struct gmp__ctx_frame {
    uint32_t mxcsr;
    uint16_t x87cw;
    uint16_t pad;
    uint64_t r15, r14, r13, r12, rbx, rbp;
    void    *ret;
};

_Static_assert(offsetof(struct gmp__ctx_frame, x87cw) == GMP_CTX_FPCW + 4,
               "x87 cw follows mxcsr");
_Static_assert(offsetof(struct gmp__ctx_frame, r15) == GMP_CTX_R15, "r15");
_Static_assert(offsetof(struct gmp__ctx_frame, r14) == GMP_CTX_R14, "r14");
_Static_assert(offsetof(struct gmp__ctx_frame, r13) == GMP_CTX_R13, "r13");
_Static_assert(offsetof(struct gmp__ctx_frame, r12) == GMP_CTX_R12, "r12");
_Static_assert(offsetof(struct gmp__ctx_frame, rbx) == GMP_CTX_RBX, "rbx");
_Static_assert(offsetof(struct gmp__ctx_frame, rbp) == GMP_CTX_RBP, "rbp");
_Static_assert(offsetof(struct gmp__ctx_frame, ret) == GMP_CTX_RET, "ret");
_Static_assert(sizeof(struct gmp__ctx_frame) == GMP_CTX_FRAME, "frame");

/* Fills a fresh context's frame: gmp__ctx_start will call fn(arg, from)
 * with the default floating-point control state. */
static inline void gmp__ctx_frame_init(struct gmp__ctx_frame *f,
                                       gmp__ctx_fn *fn, void *arg)
{
    f->mxcsr = GMP_CTX_MXCSR_DEFAULT;
    f->x87cw = GMP_CTX_X87CW_DEFAULT;
    f->pad = 0;
    f->r15 = f->r14 = f->rbx = f->rbp = 0;
    f->r12 = (uint64_t)(uintptr_t)fn;
    f->r13 = (uint64_t)(uintptr_t)arg;
    f->ret = (void *)gmp__ctx_start;
}
#endif /* !__ASSEMBLER__ */

#endif /* GMP_ARCH_FRAME_H */
