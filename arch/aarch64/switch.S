/*
 * gmp__ctx_jump(to_sp) -- AArch64, AAPCS64, Linux ELF.
 *   x0: void *to_sp   saved stack pointer of the context to resume
 *   returns (x0, in the context that is resumed): the saved stack pointer
 *   of the context that was just suspended
 * Saves the callee-saved state (x19-x30, d8-d15, FPCR) in a frame below
 * the caller's sp, switches sp to to_sp, restores and returns into the
 * resumed context. Clobbers only caller-saved registers (x0, x9-x11,
 * flags).
 *
 * As on x86-64, the suspended stack pointer travels in a register to the
 * context that resumes, which stores it where it belongs.
 *
 * Suspended frame, from the saved sp (16-byte aligned):
 *   +0x00 d8  d9    +0x10 d10 d11   +0x20 d12 d13   +0x30 d14 d15
 *   +0x40 x19 x20   +0x50 x21 x22   +0x60 x23 x24   +0x70 x25 x26
 *   +0x80 x27 x28   +0x90 x29 x30   +0xa0 fpcr, pad
 * Offsets are GMP_CTX_* in frame.h, checked there by _Static_assert.
 *
 * FPCR is written only when the resumed context's differs from the
 * current one: reading it is cheap, but a write may synchronise the FP
 * pipeline on some cores, and nearly every switch finds them equal.
 *
 * The resumed context is entered with `ret`, which branch target
 * identification does not check, so no landing pad is needed where a
 * context resumes (gmp__ctx_start included); x30 is saved and restored unsigned, as the bl that
 * called us left it, so pointer authentication is unaffected.
 */
#include "frame.h"

    .text
    .globl  gmp__ctx_jump
    .hidden gmp__ctx_jump
    .type   gmp__ctx_jump, %function
    .p2align 4
gmp__ctx_jump:
    .cfi_startproc
    hint    #34                     /* bti c: a linker veneer may reach us */
                                    /* by br x16; a nop on older cores */
    sub     sp, sp, #GMP_CTX_FRAME
    .cfi_adjust_cfa_offset GMP_CTX_FRAME
    stp     d8,  d9,  [sp, #GMP_CTX_D8]
    stp     d10, d11, [sp, #GMP_CTX_D10]
    stp     d12, d13, [sp, #GMP_CTX_D12]
    stp     d14, d15, [sp, #GMP_CTX_D14]
    stp     x19, x20, [sp, #GMP_CTX_X19]
    stp     x21, x22, [sp, #GMP_CTX_X21]
    stp     x23, x24, [sp, #GMP_CTX_X23]
    stp     x25, x26, [sp, #GMP_CTX_X25]
    stp     x27, x28, [sp, #GMP_CTX_X27]
    stp     x29, x30, [sp, #GMP_CTX_X29]
    mrs     x9, fpcr
    str     x9, [sp, #GMP_CTX_FPCR]

    mov     x10, sp                 /* suspended here: the resumed side's */
    mov     sp, x0                  /* return value; now on the other stack */
    mov     x0, x10

    ldr     x11, [sp, #GMP_CTX_FPCR]
    cmp     x9, x11
    b.eq    1f
    msr     fpcr, x11
1:
    ldp     d8,  d9,  [sp, #GMP_CTX_D8]
    ldp     d10, d11, [sp, #GMP_CTX_D10]
    ldp     d12, d13, [sp, #GMP_CTX_D12]
    ldp     d14, d15, [sp, #GMP_CTX_D14]
    ldp     x19, x20, [sp, #GMP_CTX_X19]
    ldp     x21, x22, [sp, #GMP_CTX_X21]
    ldp     x23, x24, [sp, #GMP_CTX_X23]
    ldp     x25, x26, [sp, #GMP_CTX_X25]
    ldp     x27, x28, [sp, #GMP_CTX_X27]
    ldp     x29, x30, [sp, #GMP_CTX_X29]
    add     sp, sp, #GMP_CTX_FRAME
    ret
    .cfi_endproc
    .size   gmp__ctx_jump, .-gmp__ctx_jump

/*
 * gmp__ctx_start -- first code of a fresh context, entered by the ret of
 * gmp__ctx_jump with sp 16-byte aligned, x19 = fn, x20 = arg, x29 = 0 and
 * x0 = the suspended context's stack pointer. Calls fn(arg, from_sp),
 * which must never return. The CFI marks the return address as undefined
 * and the frame-pointer chain ends at x29 = 0, so debuggers and unwinders
 * stop here: a goroutine's backtrace ends cleanly at its first frame.
 */
    .globl  gmp__ctx_start
    .hidden gmp__ctx_start
    .type   gmp__ctx_start, %function
    .p2align 4
gmp__ctx_start:
    .cfi_startproc
    .cfi_undefined x30
    mov     x1, x0
    mov     x0, x20
    blr     x19
    brk     #0x1                    /* fn returned: a runtime bug */
    .cfi_endproc
    .size   gmp__ctx_start, .-gmp__ctx_start

/* gmp__ctx_jump has its landing pad, gmp__ctx_start is entered only by
 * ret, and neither signs a return address. */
#include "property.h"

    .section .note.GNU-stack,"",%progbits
