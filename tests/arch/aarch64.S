/*
 * uint64_t h_regs_check(uint64_t seed, void (*fn)(void *), void *arg)
 * AArch64. Fills every callee-saved register but the frame pointer x29
 * (which sanitizer unwinders follow) with a value derived from seed --
 * x19-x28 and d8-d15 -- calls fn(arg), and returns a mask of the
 * registers that came back changed: bits 0-9 x19-x28, bits 10-17 d8-d15.
 * A correct context switch inside fn leaves 0. Register i (in that order)
 * holds seed + (i + 1) * 0x0101010101010101.
 */
    .text
    .globl  h_regs_check
    .type   h_regs_check, %function
    .p2align 4
h_regs_check:
    .cfi_startproc
    stp     x29, x30, [sp, #-176]!
    .cfi_def_cfa_offset 176
    .cfi_offset x29, -176
    .cfi_offset x30, -168
    mov     x29, sp
    stp     x19, x20, [sp, #16]
    stp     x21, x22, [sp, #32]
    stp     x23, x24, [sp, #48]
    stp     x25, x26, [sp, #64]
    stp     x27, x28, [sp, #80]
    stp     d8,  d9,  [sp, #96]
    stp     d10, d11, [sp, #112]
    stp     d12, d13, [sp, #128]
    stp     d14, d15, [sp, #144]
    str     x0, [sp, #160]          /* seed */

    ldr     x9, =0x0101010101010101
    mov     x10, x0
    .irp    reg, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28
    add     x10, x10, x9
    mov     \reg, x10
    .endr
    .irp    reg, d8, d9, d10, d11, d12, d13, d14, d15
    add     x10, x10, x9
    fmov    \reg, x10
    .endr
    mov     x0, x2
    blr     x1

    ldr     x9, =0x0101010101010101
    ldr     x10, [sp, #160]
    mov     x0, #0
    mov     x12, #1                 /* this register's bit */
    .irp    reg, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28
    add     x10, x10, x9
    cmp     \reg, x10
    csel    x11, x12, xzr, ne
    orr     x0, x0, x11
    lsl     x12, x12, #1
    .endr
    .irp    reg, d8, d9, d10, d11, d12, d13, d14, d15
    add     x10, x10, x9
    fmov    x13, \reg
    cmp     x13, x10
    csel    x11, x12, xzr, ne
    orr     x0, x0, x11
    lsl     x12, x12, #1
    .endr

    ldp     x19, x20, [sp, #16]
    ldp     x21, x22, [sp, #32]
    ldp     x23, x24, [sp, #48]
    ldp     x25, x26, [sp, #64]
    ldp     x27, x28, [sp, #80]
    ldp     d8,  d9,  [sp, #96]
    ldp     d10, d11, [sp, #112]
    ldp     d12, d13, [sp, #128]
    ldp     d14, d15, [sp, #144]
    ldp     x29, x30, [sp], #176
    .cfi_def_cfa_offset 0
    ret
    .cfi_endproc
    .size   h_regs_check, .-h_regs_check

    .section .note.GNU-stack,"",%progbits
