/*
 * gmp__asyncpreempt -- RISC-V 64 (RV64GC, LP64D). Never called: the
 * preemption signal handler (src/preempt.c) rewrites the interrupted
 * context so that the thread continues here, on the goroutine's stack,
 * with every register holding the interrupted code's value and
 *   0(sp)  the interrupted pc     8(sp)  the interrupted sp
 *   sp     the interrupted sp - 16, rounded down to 16 bytes (compiled
 *          code keeps sp aligned, hand-written code need not, and the
 *          C function the stub calls may rely on it)
 * The stub saves x1-x31, f0-f31 and fcsr in a 528-byte frame below that
 * and calls gmp__asyncpreempt2, which switches to g0. When the goroutine
 * is resumed (on any thread) the call returns, having stored the process
 * and thread ids at +512 and +520.
 *
 * Going back needs a register to jump through, and the interrupted code
 * may be using all of them (t0-t6 included). So, as on arm64, the stub
 * sends its own thread SIGURG (tgkill) and the signal is taken on the
 * return from that system call, at gmp__asyncpreempt_resume: the handler
 * recognises that pc, copies this frame into the signal context, and the
 * kernel's sigreturn restores every register, pc and sp included. tp is
 * the one register not put back: it is the thread's own (its TLS
 * pointer), and the goroutine may now run on another thread.
 *
 * Frame, from sp while in the call (offsets match sigctx.h's GMP_SF_*):
 *   +0 x1 ... +240 x31 (x_i at 8 * (i - 1); the x2 slot holds the
 *   interrupted sp)   +248 f0 ... +496 f31   +504 fcsr
 *   +512 pid   +520 tid   +528 pc   +536 sp
 */
#include "frame.h"

#define FRAME (GMP_APF_PC * 8)      /* 528 */
#define SIGURG 23
#define NR_TGKILL 131

    .text
    .globl  gmp__asyncpreempt
    .hidden gmp__asyncpreempt
    .type   gmp__asyncpreempt, %function
    .p2align 2
gmp__asyncpreempt:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa sp, 16             /* CFA: above the handler's words */
    .cfi_offset ra, -16             /* unwinders: "returns" to the */
                                    /* interrupted pc, */
    .cfi_offset sp, -8              /* with the interrupted sp */
    addi    sp, sp, -FRAME
    .cfi_def_cfa_offset FRAME + 16
    sd      x1, 0(sp)
    sd      x3, 16(sp)
    sd      x4, 24(sp)
    sd      x5, 32(sp)
    ld      x5, (FRAME + 8)(sp)     /* the interrupted sp, for the dump */
    sd      x5, 8(sp)
    sd      x6, 40(sp)
    sd      x7, 48(sp)
    sd      x8, 56(sp)
    .cfi_offset s0, -(FRAME + 16) + 56
    sd      x9, 64(sp)
    sd      x10, 72(sp)
    sd      x11, 80(sp)
    sd      x12, 88(sp)
    sd      x13, 96(sp)
    sd      x14, 104(sp)
    sd      x15, 112(sp)
    sd      x16, 120(sp)
    sd      x17, 128(sp)
    sd      x18, 136(sp)
    sd      x19, 144(sp)
    sd      x20, 152(sp)
    sd      x21, 160(sp)
    sd      x22, 168(sp)
    sd      x23, 176(sp)
    sd      x24, 184(sp)
    sd      x25, 192(sp)
    sd      x26, 200(sp)
    sd      x27, 208(sp)
    sd      x28, 216(sp)
    sd      x29, 224(sp)
    sd      x30, 232(sp)
    sd      x31, 240(sp)
    fsd     f0, 248(sp)
    fsd     f1, 256(sp)
    fsd     f2, 264(sp)
    fsd     f3, 272(sp)
    fsd     f4, 280(sp)
    fsd     f5, 288(sp)
    fsd     f6, 296(sp)
    fsd     f7, 304(sp)
    fsd     f8, 312(sp)
    fsd     f9, 320(sp)
    fsd     f10, 328(sp)
    fsd     f11, 336(sp)
    fsd     f12, 344(sp)
    fsd     f13, 352(sp)
    fsd     f14, 360(sp)
    fsd     f15, 368(sp)
    fsd     f16, 376(sp)
    fsd     f17, 384(sp)
    fsd     f18, 392(sp)
    fsd     f19, 400(sp)
    fsd     f20, 408(sp)
    fsd     f21, 416(sp)
    fsd     f22, 424(sp)
    fsd     f23, 432(sp)
    fsd     f24, 440(sp)
    fsd     f25, 448(sp)
    fsd     f26, 456(sp)
    fsd     f27, 464(sp)
    fsd     f28, 472(sp)
    fsd     f29, 480(sp)
    fsd     f30, 488(sp)
    fsd     f31, 496(sp)
    frcsr   t0
    sd      t0, 504(sp)
    mv      a0, sp
    call    gmp__asyncpreempt2
    ld      a0, (GMP_APF_PID * 8)(sp)       /* tgkill(pid, tid, SIGURG) */
    ld      a1, (GMP_APF_PID * 8 + 8)(sp)
    li      a2, SIGURG
    li      a7, NR_TGKILL
    ecall
    .globl  gmp__asyncpreempt_resume
    .hidden gmp__asyncpreempt_resume
gmp__asyncpreempt_resume:
    /* The signal is taken before this executes. Reached only if it was
     * not delivered (SIGURG blocked): say so rather than run on. */
    call    gmp__asyncpreempt_lost
    ebreak
    .cfi_endproc
    .size   gmp__asyncpreempt, .-gmp__asyncpreempt

/* Whether the processor has the vector extension (AT_HWCAP 'V'); set once
 * before the handler is installed (gmp__sigctx_setup in sigctx.h). */
    .bss
    .globl  gmp__have_v
    .hidden gmp__have_v
    .type   gmp__have_v, @object
gmp__have_v:
    .zero   1
    .size   gmp__have_v, 1

    .section .note.GNU-stack,"",%progbits
