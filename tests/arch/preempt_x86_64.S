/*
 * void h_async_regs(uint64_t iters, const void *pat, void *out, int level)
 * x86-64 SysV. Loads every general register but rsp, the vector registers
 * of the given level (0: xmm0-15, 1: ymm0-15, 2: zmm0-31 and k0-k7) and
 * MXCSR from pat, sets CF and DF, spins iters times on a counter kept in
 * memory (decq leaves CF alone), and writes what the registers then hold
 * to out. Asynchronous preemptions land in the spin; the caller compares
 * out with pat. Layout of pat and out (offsets in bytes):
 *   0    rax rbx rcx rdx rsi rdi rbp r8 ... r15   (15 x 8)
 *   120  rflags (out only)
 *   128  vector registers, 64 bytes each          (32 x 64)
 *   2176 k0-k7                                     (8 x 8)
 *   2240 mxcsr                                     (4)
 */
#define V 128
#define K 2176
#define MX 2240

    .text
    .globl  h_async_regs
    .type   h_async_regs, @function
    .p2align 4
h_async_regs:
    .cfi_startproc
    pushq   %rbx
    pushq   %rbp
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    subq    $32, %rsp
    .cfi_adjust_cfa_offset 80
    movq    %rdi, 16(%rsp)          /* the counter */
    movq    %rdx, 8(%rsp)           /* out */
    movl    %ecx, 0(%rsp)           /* level */
    stmxcsr 24(%rsp)                /* the caller's, put back at the end */
    ldmxcsr MX(%rsi)

    cmpl    $1, %ecx
    je      .Lload_ymm
    ja      .Lload_zmm
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    movdqu  V+\n*64(%rsi), %xmm\n
    .endr
    jmp     .Lload_gpr
.Lload_ymm:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    vmovdqu V+\n*64(%rsi), %ymm\n
    .endr
    jmp     .Lload_gpr
.Lload_zmm:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    vmovdqu64 V+\n*64(%rsi), %zmm\n
    .endr
    .irp n, 0,1,2,3,4,5,6,7
    kmovw   K+\n*8(%rsi), %k\n
    .endr
.Lload_gpr:
    movq    0(%rsi), %rax
    movq    8(%rsi), %rbx
    movq    16(%rsi), %rcx
    movq    24(%rsi), %rdx
    movq    40(%rsi), %rdi
    movq    48(%rsi), %rbp
    movq    56(%rsi), %r8
    movq    64(%rsi), %r9
    movq    72(%rsi), %r10
    movq    80(%rsi), %r11
    movq    88(%rsi), %r12
    movq    96(%rsi), %r13
    movq    104(%rsi), %r14
    movq    112(%rsi), %r15
    movq    32(%rsi), %rsi
    stc
    std
    .p2align 4
.Lspin:
    decq    16(%rsp)
    jnz     .Lspin

    pushfq
    pushq   %rax
    .cfi_adjust_cfa_offset 16
    movq    24(%rsp), %rax          /* out */
    movq    %rbx, 8(%rax)
    movq    %rcx, 16(%rax)
    movq    %rdx, 24(%rax)
    movq    %rsi, 32(%rax)
    movq    %rdi, 40(%rax)
    movq    %rbp, 48(%rax)
    movq    %r8, 56(%rax)
    movq    %r9, 64(%rax)
    movq    %r10, 72(%rax)
    movq    %r11, 80(%rax)
    movq    %r12, 88(%rax)
    movq    %r13, 96(%rax)
    movq    %r14, 104(%rax)
    movq    %r15, 112(%rax)
    popq    %rbx
    movq    %rbx, 0(%rax)
    popq    %rbx
    movq    %rbx, 120(%rax)
    .cfi_adjust_cfa_offset -16
    cld
    stmxcsr MX(%rax)
    ldmxcsr 24(%rsp)

    cmpl    $1, 0(%rsp)
    je      .Lsave_ymm
    ja      .Lsave_zmm
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    movdqu  %xmm\n, V+\n*64(%rax)
    .endr
    jmp     .Ldone
.Lsave_ymm:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    vmovdqu %ymm\n, V+\n*64(%rax)
    .endr
    vzeroupper
    jmp     .Ldone
.Lsave_zmm:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    vmovdqu64 %zmm\n, V+\n*64(%rax)
    .endr
    .irp n, 0,1,2,3,4,5,6,7
    kmovw   %k\n, %edx
    movq    %rdx, K+\n*8(%rax)
    .endr
    vzeroupper
.Ldone:
    addq    $32, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbp
    popq    %rbx
    .cfi_adjust_cfa_offset -80
    ret
    .cfi_endproc
    .size   h_async_regs, .-h_async_regs

    .section .note.GNU-stack,"",@progbits
