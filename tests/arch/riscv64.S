/*
 * uint64_t h_regs_check(uint64_t seed, void (*fn)(void *), void *arg)
 * RISC-V 64 (LP64D). Fills every callee-saved register but the frame
 * pointer s0 (which frame walks follow) with a value derived from seed --
 * s1-s11 and fs0-fs11 -- calls fn(arg), and returns a mask of the
 * registers that came back changed: bits 0-10 s1-s11, bits 11-22
 * fs0-fs11. A correct context switch inside fn leaves 0. Register i (in
 * that order) holds seed + (i + 1) * 0x0101010101010101.
 */
    .text
    .globl  h_regs_check
    .type   h_regs_check, %function
    .p2align 2
h_regs_check:
    .cfi_startproc
    addi    sp, sp, -208
    .cfi_def_cfa_offset 208
    sd      ra, 200(sp)
    sd      s0, 192(sp)
    .cfi_offset ra, -8
    .cfi_offset s0, -16
    addi    s0, sp, 208
    sd      s1, 0(sp)
    sd      s2, 8(sp)
    sd      s3, 16(sp)
    sd      s4, 24(sp)
    sd      s5, 32(sp)
    sd      s6, 40(sp)
    sd      s7, 48(sp)
    sd      s8, 56(sp)
    sd      s9, 64(sp)
    sd      s10, 72(sp)
    sd      s11, 80(sp)
    fsd     fs0, 88(sp)
    fsd     fs1, 96(sp)
    fsd     fs2, 104(sp)
    fsd     fs3, 112(sp)
    fsd     fs4, 120(sp)
    fsd     fs5, 128(sp)
    fsd     fs6, 136(sp)
    fsd     fs7, 144(sp)
    fsd     fs8, 152(sp)
    fsd     fs9, 160(sp)
    fsd     fs10, 168(sp)
    fsd     fs11, 176(sp)
    sd      a0, 184(sp)             /* seed */

    li      t0, 0x0101010101010101
    mv      t1, a0
    .irp    reg, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11
    add     t1, t1, t0
    mv      \reg, t1
    .endr
    .irp    reg, fs0, fs1, fs2, fs3, fs4, fs5, fs6, fs7, fs8, fs9, fs10, fs11
    add     t1, t1, t0
    fmv.d.x \reg, t1
    .endr
    mv      a0, a2
    jalr    a1

    li      t0, 0x0101010101010101
    ld      t1, 184(sp)
    li      a0, 0
    li      t3, 1                   /* this register's bit */
    .irp    reg, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11
    add     t1, t1, t0
    beq     \reg, t1, 1f
    or      a0, a0, t3
1:  slli    t3, t3, 1
    .endr
    .irp    reg, fs0, fs1, fs2, fs3, fs4, fs5, fs6, fs7, fs8, fs9, fs10, fs11
    add     t1, t1, t0
    fmv.x.d t4, \reg
    beq     t4, t1, 1f
    or      a0, a0, t3
1:  slli    t3, t3, 1
    .endr

    ld      s1, 0(sp)
    ld      s2, 8(sp)
    ld      s3, 16(sp)
    ld      s4, 24(sp)
    ld      s5, 32(sp)
    ld      s6, 40(sp)
    ld      s7, 48(sp)
    ld      s8, 56(sp)
    ld      s9, 64(sp)
    ld      s10, 72(sp)
    ld      s11, 80(sp)
    fld     fs0, 88(sp)
    fld     fs1, 96(sp)
    fld     fs2, 104(sp)
    fld     fs3, 112(sp)
    fld     fs4, 120(sp)
    fld     fs5, 128(sp)
    fld     fs6, 136(sp)
    fld     fs7, 144(sp)
    fld     fs8, 152(sp)
    fld     fs9, 160(sp)
    fld     fs10, 168(sp)
    fld     fs11, 176(sp)
    ld      s0, 192(sp)
    ld      ra, 200(sp)
    addi    sp, sp, 208
    .cfi_def_cfa_offset 0
    ret
    .cfi_endproc
    .size   h_regs_check, .-h_regs_check

    .section .note.GNU-stack,"",%progbits
