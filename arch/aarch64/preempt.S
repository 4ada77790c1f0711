/*
 * gmp__asyncpreempt -- AArch64. Never called: the preemption signal
 * handler (src/preempt.c) rewrites the interrupted context so that the
 * thread continues here, on the goroutine's stack, with every register
 * holding the interrupted code's value and
 *   [sp, #0]  the interrupted pc     [sp, #8]  the interrupted sp
 *   sp        the interrupted sp - 16
 * The stub saves x0-x30, NZCV, FPSR, FPCR and q0-q31 in an 800-byte frame
 * below that and calls gmp__asyncpreempt2, which switches to g0. When the
 * goroutine is resumed (on any thread) the call returns, having stored
 * the process and thread ids at +784 and +792.
 *
 * Going back needs a register to branch through, and the interrupted code
 * may be using all of them (x16 and x17 included). So the stub sends its
 * own thread SIGURG (tgkill) and the signal is taken on the return from
 * that system call, at gmp__asyncpreempt_resume: the handler recognises
 * that pc, copies this frame into the signal context, and the kernel's
 * sigreturn restores every register, pc and sp included.
 *
 * Frame, from sp while in the call (offsets match sigctx.h's GMP_SF_*):
 *   +0 x0 ... +240 x30   +248 nzcv   +256 fpsr   +264 fpcr
 *   +272 q0 ... +768 q31   +784 pid   +792 tid   +800 pc   +808 sp
 */
#define FRAME 800
#define SIGURG 23
#define NR_TGKILL 131

    .text
    .globl  gmp__asyncpreempt
    .hidden gmp__asyncpreempt
    .type   gmp__asyncpreempt, %function
    .p2align 4
gmp__asyncpreempt:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa sp, 16             /* CFA: the interrupted sp */
    .cfi_offset x30, -16            /* unwinders: "returns" to the */
                                    /* interrupted pc */
    hint    #38                     /* bti jc: the interrupted instruction */
                                    /* may have been a branch target */
    sub     sp, sp, #FRAME
    .cfi_def_cfa_offset FRAME + 16
    stp     x0, x1, [sp, #0]
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    str     x30, [sp, #240]
    .cfi_offset x29, -(FRAME + 16) + 232
    mrs     x0, nzcv
    str     x0, [sp, #248]
    mrs     x0, fpsr
    mrs     x1, fpcr
    stp     x0, x1, [sp, #256]
    stp     q0, q1, [sp, #272]
    stp     q2, q3, [sp, #304]
    stp     q4, q5, [sp, #336]
    stp     q6, q7, [sp, #368]
    stp     q8, q9, [sp, #400]
    stp     q10, q11, [sp, #432]
    stp     q12, q13, [sp, #464]
    stp     q14, q15, [sp, #496]
    stp     q16, q17, [sp, #528]
    stp     q18, q19, [sp, #560]
    stp     q20, q21, [sp, #592]
    stp     q22, q23, [sp, #624]
    stp     q24, q25, [sp, #656]
    stp     q26, q27, [sp, #688]
    stp     q28, q29, [sp, #720]
    stp     q30, q31, [sp, #752]
    mov     x0, sp
    bl      gmp__asyncpreempt2
    ldr     x0, [sp, #784]          /* tgkill(pid, tid, SIGURG) */
    ldr     x1, [sp, #792]
    mov     x2, #SIGURG
    mov     x8, #NR_TGKILL
    svc     #0
    .globl  gmp__asyncpreempt_resume
    .hidden gmp__asyncpreempt_resume
gmp__asyncpreempt_resume:
    /* The signal is taken before this executes. Reached only if it was
     * not delivered (SIGURG blocked): say so rather than run on. */
    bl      gmp__asyncpreempt_lost
    brk     #0x1
    .cfi_endproc
    .size   gmp__asyncpreempt, .-gmp__asyncpreempt

#include "property.h"

    .section .note.GNU-stack,"",%progbits
