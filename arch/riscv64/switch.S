/*
 * gmp__ctx_jump(to_sp) -- RISC-V 64, LP64D, Linux ELF.
 *   a0: void *to_sp   saved stack pointer of the context to resume
 *   returns (a0, in the context that is resumed): the saved stack pointer
 *   of the context that was just suspended
 * Saves the callee-saved state (ra, s0-s11, fs0-fs11, the rounding mode)
 * in a frame below the caller's sp, switches sp to to_sp, restores and
 * returns into the resumed context. Clobbers only caller-saved registers
 * (a0, t0-t2).
 *
 * As on x86-64, the suspended stack pointer travels in a register to the
 * context that resumes, which stores it where it belongs.
 *
 * Suspended frame, from the saved sp (16-byte aligned):
 *   +0x00 ra   +0x08 s0 ... +0x60 s11   +0x68 fs0 ... +0xc0 fs11
 *   +0xc8 frm
 * Offsets are GMP_CTX_* in frame.h, checked there by _Static_assert.
 *
 * The rounding mode is written only when the resumed context's differs
 * from the current one, as FPCR on arm64: a CSR write may serialise the
 * pipeline on some cores, and nearly every switch finds them equal.
 */
#include "frame.h"

    .text
    .globl  gmp__ctx_jump
    .hidden gmp__ctx_jump
    .type   gmp__ctx_jump, %function
    .p2align 2
gmp__ctx_jump:
    .cfi_startproc
    addi    sp, sp, -GMP_CTX_FRAME
    .cfi_adjust_cfa_offset GMP_CTX_FRAME
    sd      ra,  GMP_CTX_RA(sp)
    sd      s0,  GMP_CTX_S0 + 0*8(sp)
    sd      s1,  GMP_CTX_S0 + 1*8(sp)
    sd      s2,  GMP_CTX_S0 + 2*8(sp)
    sd      s3,  GMP_CTX_S0 + 3*8(sp)
    sd      s4,  GMP_CTX_S0 + 4*8(sp)
    sd      s5,  GMP_CTX_S0 + 5*8(sp)
    sd      s6,  GMP_CTX_S0 + 6*8(sp)
    sd      s7,  GMP_CTX_S0 + 7*8(sp)
    sd      s8,  GMP_CTX_S0 + 8*8(sp)
    sd      s9,  GMP_CTX_S0 + 9*8(sp)
    sd      s10, GMP_CTX_S0 + 10*8(sp)
    sd      s11, GMP_CTX_S0 + 11*8(sp)
    fsd     fs0,  GMP_CTX_FS0 + 0*8(sp)
    fsd     fs1,  GMP_CTX_FS0 + 1*8(sp)
    fsd     fs2,  GMP_CTX_FS0 + 2*8(sp)
    fsd     fs3,  GMP_CTX_FS0 + 3*8(sp)
    fsd     fs4,  GMP_CTX_FS0 + 4*8(sp)
    fsd     fs5,  GMP_CTX_FS0 + 5*8(sp)
    fsd     fs6,  GMP_CTX_FS0 + 6*8(sp)
    fsd     fs7,  GMP_CTX_FS0 + 7*8(sp)
    fsd     fs8,  GMP_CTX_FS0 + 8*8(sp)
    fsd     fs9,  GMP_CTX_FS0 + 9*8(sp)
    fsd     fs10, GMP_CTX_FS0 + 10*8(sp)
    fsd     fs11, GMP_CTX_FS0 + 11*8(sp)
    frrm    t0
    sd      t0, GMP_CTX_FRM(sp)

    mv      t1, sp                  /* suspended here: the resumed side's */
    mv      sp, a0                  /* return value; now on the other stack */
    mv      a0, t1

    ld      t2, GMP_CTX_FRM(sp)
    beq     t0, t2, 1f
    fsrm    t2
1:
    ld      ra,  GMP_CTX_RA(sp)
    ld      s0,  GMP_CTX_S0 + 0*8(sp)
    ld      s1,  GMP_CTX_S0 + 1*8(sp)
    ld      s2,  GMP_CTX_S0 + 2*8(sp)
    ld      s3,  GMP_CTX_S0 + 3*8(sp)
    ld      s4,  GMP_CTX_S0 + 4*8(sp)
    ld      s5,  GMP_CTX_S0 + 5*8(sp)
    ld      s6,  GMP_CTX_S0 + 6*8(sp)
    ld      s7,  GMP_CTX_S0 + 7*8(sp)
    ld      s8,  GMP_CTX_S0 + 8*8(sp)
    ld      s9,  GMP_CTX_S0 + 9*8(sp)
    ld      s10, GMP_CTX_S0 + 10*8(sp)
    ld      s11, GMP_CTX_S0 + 11*8(sp)
    fld     fs0,  GMP_CTX_FS0 + 0*8(sp)
    fld     fs1,  GMP_CTX_FS0 + 1*8(sp)
    fld     fs2,  GMP_CTX_FS0 + 2*8(sp)
    fld     fs3,  GMP_CTX_FS0 + 3*8(sp)
    fld     fs4,  GMP_CTX_FS0 + 4*8(sp)
    fld     fs5,  GMP_CTX_FS0 + 5*8(sp)
    fld     fs6,  GMP_CTX_FS0 + 6*8(sp)
    fld     fs7,  GMP_CTX_FS0 + 7*8(sp)
    fld     fs8,  GMP_CTX_FS0 + 8*8(sp)
    fld     fs9,  GMP_CTX_FS0 + 9*8(sp)
    fld     fs10, GMP_CTX_FS0 + 10*8(sp)
    fld     fs11, GMP_CTX_FS0 + 11*8(sp)
    addi    sp, sp, GMP_CTX_FRAME
    ret
    .cfi_endproc
    .size   gmp__ctx_jump, .-gmp__ctx_jump

/*
 * gmp__ctx_start -- first code of a fresh context, entered by the ret of
 * gmp__ctx_jump with sp 16-byte aligned, s1 = fn, s2 = arg, s0 = 0 and
 * a0 = the suspended context's stack pointer. Calls fn(arg, from_sp),
 * which must never return. It takes 16 bytes of its own, so that every
 * frame of the goroutine has its frame pointer (its CFA) strictly below
 * the stack's top, as on the other architectures. The CFI marks the
 * return address as undefined and the frame-pointer chain ends at s0 = 0,
 * so debuggers and unwinders stop here: a goroutine's backtrace ends
 * cleanly at its first frame.
 */
    .globl  gmp__ctx_start
    .hidden gmp__ctx_start
    .type   gmp__ctx_start, %function
    .p2align 2
gmp__ctx_start:
    .cfi_startproc
    .cfi_undefined ra
    addi    sp, sp, -16
    .cfi_adjust_cfa_offset 16
    sd      zero, 0(sp)
    sd      zero, 8(sp)
    mv      a1, a0
    mv      a0, s2
    jalr    s1
    ebreak                          /* fn returned: a runtime bug */
    .cfi_endproc
    .size   gmp__ctx_start, .-gmp__ctx_start

    .section .note.GNU-stack,"",%progbits
