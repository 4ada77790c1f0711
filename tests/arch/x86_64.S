/*
 * uint64_t h_regs_check(uint64_t seed, void (*fn)(void *), void *arg)
 * x86-64 SysV. Fills every callee-saved general register but rbp (the
 * frame pointer, which sanitizer unwinders follow) with a value derived
 * from seed, calls fn(arg), and returns a mask of the registers that came
 * back changed: bit 0 rbx, bits 1-4 r12-r15. A correct context switch
 * inside fn leaves 0. Register i holds seed + (i + 1) * 0x0101010101010101.
 */
    .text
    .globl  h_regs_check
    .type   h_regs_check, @function
    .p2align 4
h_regs_check:
    .cfi_startproc
    pushq   %rbx
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    pushq   %rdi                    /* seed; rsp is 16-byte aligned now */
    .cfi_adjust_cfa_offset 48
    movabsq $0x0101010101010101, %rax
    leaq    (%rdi, %rax), %rbx
    leaq    (%rbx, %rax), %r12
    leaq    (%r12, %rax), %r13
    leaq    (%r13, %rax), %r14
    leaq    (%r14, %rax), %r15
    movq    %rdx, %rdi
    callq   *%rsi

    movabsq $0x0101010101010101, %rdx
    movq    (%rsp), %rsi            /* the expected value, step by step */
    xorl    %eax, %eax
    movl    $1, %r8d                /* this register's bit */
    .irp    reg, rbx, r12, r13, r14, r15
    addq    %rdx, %rsi
    xorl    %ecx, %ecx
    cmpq    %rsi, %\reg
    cmovneq %r8, %rcx
    orq     %rcx, %rax
    shlq    $1, %r8
    .endr

    popq    %rdi
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbx
    .cfi_adjust_cfa_offset -48
    ret
    .cfi_endproc
    .size   h_regs_check, .-h_regs_check

    .section .note.GNU-stack,"",@progbits
