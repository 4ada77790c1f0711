/*
 * gmp__asyncpreempt -- x86-64. Never called: the preemption signal handler
 * (src/preempt.c) rewrites the interrupted context so that the thread
 * continues here, on the goroutine's stack, as if the interrupted
 * instruction had called it from below the red zone:
 *   [rsp]  the interrupted rip
 *   rsp    the interrupted rsp - 128 (red zone) - 8
 * Every register holds the interrupted code's value. The stub saves the
 * flags and the fifteen general registers with pushes, then the whole
 * extended state (x87, MXCSR, SSE, AVX, AVX-512, ... whatever the OS
 * enabled in XCR0) with xsave into a 64-byte aligned area of
 * gmp__xsave_size bytes below them, and calls gmp__asyncpreempt2, which
 * switches to g0. When the goroutine is resumed (on any thread) the call
 * returns; xrstor and the pops put every register back, and `ret $128`
 * pops the interrupted rip and the red zone: rsp is exactly what it was.
 *
 * Frame, from the CFA (the interrupted rsp):
 *   -136 rip  -144 rflags  -152 rax  -160 rcx  -168 rdx  -176 rbx
 *   -184 rbp  -192 rsi  -200 rdi  -208 r8 ... -264 r15
 *   below: alignment, then the xsave area (at rsp while in the call)
 */
    .text
    .globl  gmp__asyncpreempt
    .hidden gmp__asyncpreempt
    .type   gmp__asyncpreempt, @function
    .p2align 4
gmp__asyncpreempt:
    .cfi_startproc simple
    .cfi_signal_frame               /* the return address is exact, not */
                                    /* the one after a call */
    .cfi_def_cfa %rsp, 136
    .cfi_offset %rip, -136
    endbr64
    pushfq
    .cfi_adjust_cfa_offset 8
    .irp r, rax, rcx, rdx, rbx, rbp, rsi, rdi, r8, r9, r10, r11, r12, r13, r14, r15
    pushq   %\r
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %\r, 0
    .endr
    movq    %rsp, %rbx              /* callee-saved: survives the call */
    .cfi_def_cfa %rbx, 264
    andq    $-64, %rsp
    subq    gmp__xsave_size(%rip), %rsp
    /* xsave writes only XSTATE_BV of the area's header, and xrstor faults
     * unless the rest of its first 24 bytes are zero: clear all 64. */
    xorl    %eax, %eax
    .irp off, 512, 520, 528, 536, 544, 552, 560, 568
    movq    %rax, \off(%rsp)
    .endr
    movl    $-1, %eax               /* every component XCR0 enables */
    movl    $-1, %edx
    xsave64 (%rsp)
    cld                             /* the C ABI wants DF clear at a call */
    movq    %rbx, %rdi              /* the pushed registers, for gmp_dump */
                                    /* (GMP_APF_* in frame.h) */
    call    gmp__asyncpreempt2
    movl    $-1, %eax
    movl    $-1, %edx
    xrstor64 (%rsp)
    movq    %rbx, %rsp
    .cfi_def_cfa %rsp, 264
    .irp r, r15, r14, r13, r12, r11, r10, r9, r8, rdi, rsi, rbp, rbx, rdx, rcx, rax
    popq    %\r
    .cfi_adjust_cfa_offset -8
    .cfi_restore %\r
    .endr
    popfq
    .cfi_adjust_cfa_offset -8
    ret     $128
    .cfi_endproc
    .size   gmp__asyncpreempt, .-gmp__asyncpreempt

/* Bytes of the xsave area above, for the features the OS enabled (CPUID
 * 0xD), rounded up to 64; set once before the handler is installed
 * (gmp__sigctx_setup in sigctx.h). */
    .bss
    .globl  gmp__xsave_size
    .hidden gmp__xsave_size
    .type   gmp__xsave_size, @object
    .p2align 3
gmp__xsave_size:
    .zero   8
    .size   gmp__xsave_size, 8

    .section .note.GNU-stack,"",@progbits
