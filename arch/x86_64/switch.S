/*
 * gmp__ctx_jump(to_sp) -- x86-64 SysV ELF.
 *   rdi: void *to_sp   saved stack pointer of the context to resume
 *   returns (rax, in the context that is resumed): the saved stack pointer
 *   of the context that was just suspended
 * Saves callee-saved state below the return address, switches rsp to
 * to_sp, restores and jumps into the resumed context. Clobbers only
 * caller-saved registers (rax, r8, flags).
 *
 * The suspended stack pointer travels in a register to the context that
 * resumes, which stores it where it belongs (Boost.Context's transfer
 * convention): no store-to-load round trip through memory sits on the
 * chain of rsp values from one switch to the next.
 *
 * Suspended frame, from the saved rsp (16-byte aligned: the call left
 * rsp = 8 mod 16 and the frame adds 7 quadwords):
 *   +0x00 mxcsr (4) | x87 cw (2) | pad (2, not read)
 *   +0x08 r15   +0x10 r14   +0x18 r13   +0x20 r12
 *   +0x28 rbx   +0x30 rbp   +0x38 return address
 * Offsets are GMP_CTX_* in frame.h, checked there by _Static_assert.
 *
 * The floating-point control words are callee-saved in the SysV ABI and
 * are saved and restored every time. (Reloading them only when they differ
 * was measured slower: reading back what stmxcsr just stored stalls.)
 */
#include "frame.h"

/* The body of both entry points; `leave` is how the resumed context is
 * entered (see below). */
.macro CTX_JUMP name, enter_by_ret
    .text
    .globl  \name
    .hidden \name
    .type   \name, @function
    .p2align 4
\name:
    .cfi_startproc
    endbr64
    /* Build the frame with moves rather than pushes: no stack-engine
     * sync between push/pop and the explicit rsp writes around them. */
    leaq    -(GMP_CTX_FRAME - 8)(%rsp), %rsp
    .cfi_adjust_cfa_offset GMP_CTX_FRAME - 8
    stmxcsr GMP_CTX_FPCW(%rsp)
    fnstcw  GMP_CTX_FPCW+4(%rsp)
    movq    %r15, GMP_CTX_R15(%rsp)
    movq    %r14, GMP_CTX_R14(%rsp)
    movq    %r13, GMP_CTX_R13(%rsp)
    movq    %r12, GMP_CTX_R12(%rsp)
    movq    %rbx, GMP_CTX_RBX(%rsp)
    movq    %rbp, GMP_CTX_RBP(%rsp)
    movq    %rsp, %rax              /* suspended here: the resumed side's */
                                    /* return value */
    movq    %rdi, %rsp              /* now on the other stack */
.if !\enter_by_ret
    movq    GMP_CTX_RET(%rsp), %r8  /* where to resume, loaded early */
.endif
    ldmxcsr GMP_CTX_FPCW(%rsp)
    fldcw   GMP_CTX_FPCW+4(%rsp)
    movq    GMP_CTX_R15(%rsp), %r15
    movq    GMP_CTX_R14(%rsp), %r14
    movq    GMP_CTX_R13(%rsp), %r13
    movq    GMP_CTX_R12(%rsp), %r12
    movq    GMP_CTX_RBX(%rsp), %rbx
    movq    GMP_CTX_RBP(%rsp), %rbp
.if \enter_by_ret
    leaq    GMP_CTX_RET(%rsp), %rsp /* pop the frame */
    ret
.else
    leaq    GMP_CTX_FRAME(%rsp), %rsp /* pop the frame and the return slot */
    jmp     *%r8
.endif
    .cfi_endproc
    .size   \name, .-\name
.endm

/* Into the resumed context by an indirect jump, not `ret`: the return
 * stack buffer predicts a return to our own call site, wrong whenever the
 * two contexts were suspended at different places (a G and g0, the switch
 * benchmark's two loops); the indirect predictor learns the target. */
    CTX_JUMP gmp__ctx_jump, 0

/* Into the resumed context by `ret`: for two contexts suspended at the
 * same call site (a G parking straight into another parked G,
 * gmp__park_direct). The prediction is then right, and the return stack
 * buffer stays in step for every return that follows; after a jmp it is
 * one entry off, and each later return of the resumed G mispredicts
 * (measured: a channel ping-pong costs 1.8x as much). */
    CTX_JUMP gmp__ctx_jump_ret, 1

/*
 * gmp__ctx_start -- first code of a fresh context, entered by the jump of
 * gmp__ctx_jump with rsp 16-byte aligned, r12 = fn, r13 = arg and rax =
 * the suspended context's stack pointer. Calls fn(arg, from_sp), which
 * must never return. The CFI marks the return address as
 * undefined, so debuggers and unwinders stop here: a goroutine's backtrace
 * ends cleanly at its first frame.
 */
    .globl  gmp__ctx_start
    .hidden gmp__ctx_start
    .type   gmp__ctx_start, @function
    .p2align 4
gmp__ctx_start:
    .cfi_startproc
    .cfi_undefined rip
    endbr64                         /* an indirect-jump target */
    movq    %r13, %rdi
    movq    %rax, %rsi
    callq   *%r12
    ud2                             /* fn returned: a runtime bug */
    .cfi_endproc
    .size   gmp__ctx_start, .-gmp__ctx_start

    .section .note.GNU-stack,"",@progbits
