/*
 * frame.h - AArch64 (AAPCS64, Linux): the suspended-context frame that
 * switch.S stores and loads, shared between the assembly and C
 * (arch/context.h has the architecture-independent half).
 *
 * A suspended context is nothing but a stack pointer: everything else lives
 * on the context's own stack, in this frame (from the saved sp, which is
 * 16-byte aligned as AAPCS64 requires at every public interface):
 *
 *   +0x00 d8    +0x08 d9    +0x10 d10   +0x18 d11
 *   +0x20 d12   +0x28 d13   +0x30 d14   +0x38 d15
 *   +0x40 x19   +0x48 x20   +0x50 x21   +0x58 x22
 *   +0x60 x23   +0x68 x24   +0x70 x25   +0x78 x26
 *   +0x80 x27   +0x88 x28   +0x90 x29 (frame pointer)
 *   +0x98 x30 (link register: where the context resumes)
 *   +0xa0 fpcr  +0xa8 pad (not read)
 *
 * Only the low 64 bits of v8-v15 are callee-saved (AAPCS64 6.1.2); FPCR's
 * rounding mode and flush-to-zero bits are per-goroutine state like x86's
 * MXCSR. FPSR (the sticky exception flags) is not saved, as no ABI
 * promises it across calls.
 *
 * A fresh context (gmp__ctx_frame_init) holds the same frame with x19 = entry
 * function, x20 = its argument, x29 = 0, x30 = gmp__ctx_start and the
 * default FPCR (0: round to nearest, no traps, no flush-to-zero).
 */
#ifndef GMP_ARCH_FRAME_H
#define GMP_ARCH_FRAME_H

#define GMP_CTX_D8     0x00
#define GMP_CTX_D10    0x10
#define GMP_CTX_D12    0x20
#define GMP_CTX_D14    0x30
#define GMP_CTX_X19    0x40
#define GMP_CTX_X21    0x50
#define GMP_CTX_X23    0x60
#define GMP_CTX_X25    0x70
#define GMP_CTX_X27    0x80
#define GMP_CTX_X29    0x90
#define GMP_CTX_LR     0x98
#define GMP_CTX_FPCR   0xa0
#define GMP_CTX_FRAME  0xb0
/* Where a suspended context's resume address and frame pointer are: what
 * gmp_dump reads to walk a parked goroutine's stack (src/trace.c). */
#define GMP_CTX_PC     GMP_CTX_LR
#define GMP_CTX_FP     GMP_CTX_X29

/* The preemption stub's frame (preempt.S), in 8-byte words from the
 * address the stub passes to gmp__asyncpreempt2 (its sp): the interrupted
 * x29 and pc, and the words up to the interrupted sp's slot. gmp_dump
 * reads them for a goroutine the signal stopped (trace.c). */
#define GMP_APF_FP    29
#define GMP_APF_PC    100
#define GMP_APF_WORDS 102

/* A frame pointer points at its frame's record: the caller's frame
 * pointer, then the return address (riscv64/frame.h differs). */
#define GMP_FP_RECORD 0

#define GMP_CTX_FPCR_DEFAULT 0

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

struct gmp__ctx_frame {
    uint64_t d[8];          /* d8..d15 */
    uint64_t x[10];         /* x19..x28 */
    uint64_t fp;            /* x29 */
    void    *lr;            /* x30 */
    uint64_t fpcr;
    uint64_t pad;
};

_Static_assert(offsetof(struct gmp__ctx_frame, d[0]) == GMP_CTX_D8, "d8");
_Static_assert(offsetof(struct gmp__ctx_frame, d[2]) == GMP_CTX_D10, "d10");
_Static_assert(offsetof(struct gmp__ctx_frame, d[4]) == GMP_CTX_D12, "d12");
_Static_assert(offsetof(struct gmp__ctx_frame, d[6]) == GMP_CTX_D14, "d14");
_Static_assert(offsetof(struct gmp__ctx_frame, x[0]) == GMP_CTX_X19, "x19");
_Static_assert(offsetof(struct gmp__ctx_frame, x[2]) == GMP_CTX_X21, "x21");
_Static_assert(offsetof(struct gmp__ctx_frame, x[4]) == GMP_CTX_X23, "x23");
_Static_assert(offsetof(struct gmp__ctx_frame, x[6]) == GMP_CTX_X25, "x25");
_Static_assert(offsetof(struct gmp__ctx_frame, x[8]) == GMP_CTX_X27, "x27");
_Static_assert(offsetof(struct gmp__ctx_frame, fp) == GMP_CTX_X29, "x29");
_Static_assert(offsetof(struct gmp__ctx_frame, lr) == GMP_CTX_LR, "x30");
_Static_assert(offsetof(struct gmp__ctx_frame, fpcr) == GMP_CTX_FPCR, "fpcr");
_Static_assert(sizeof(struct gmp__ctx_frame) == GMP_CTX_FRAME, "frame");
_Static_assert(GMP_CTX_FRAME % 16 == 0, "sp stays 16-byte aligned");

/* Fills a fresh context's frame: gmp__ctx_start will call fn(arg, from)
 * with the default floating-point control state. */
static inline void gmp__ctx_frame_init(struct gmp__ctx_frame *f,
                                       gmp__ctx_fn *fn, void *arg)
{
    for (int i = 0; i < 8; i++)
        f->d[i] = 0;
    for (int i = 0; i < 10; i++)
        f->x[i] = 0;
    f->x[0] = (uint64_t)(uintptr_t)fn;      /* x19 */
    f->x[1] = (uint64_t)(uintptr_t)arg;     /* x20 */
    f->fp = 0;
    f->lr = (void *)gmp__ctx_start;
    f->fpcr = GMP_CTX_FPCR_DEFAULT;
    f->pad = 0;
}
#endif /* !__ASSEMBLER__ */

#endif /* GMP_ARCH_FRAME_H */
