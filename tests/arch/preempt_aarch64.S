/*
 * void h_async_regs(uint64_t iters, const void *pat, void *out, int level)
 * AArch64. Loads x1-x30 (x0 is the loop counter), q0-q31 and FPCR from
 * pat, spins iters times (subs/b.ne on x0), and writes what the registers
 * then hold to out: x0 must be 0 and NZCV Z and C set, the rest as in
 * pat. level is unused (SIMD registers only). Layout (bytes):
 *   0    x0 ... x30    (31 x 8)
 *   256  q0 ... q31    (32 x 16)
 *   768  nzcv (out only)   776  fpcr
 */
    .text
    .globl  h_async_regs
    .type   h_async_regs, %function
    .p2align 4
h_async_regs:
    .cfi_startproc
    hint    #34                     /* bti c */
    sub     sp, sp, #176
    .cfi_def_cfa_offset 176
    stp     x19, x20, [sp, #16]
    stp     x21, x22, [sp, #32]
    stp     x23, x24, [sp, #48]
    stp     x25, x26, [sp, #64]
    stp     x27, x28, [sp, #80]
    stp     x29, x30, [sp, #96]
    stp     d8, d9, [sp, #112]
    stp     d10, d11, [sp, #128]
    stp     d12, d13, [sp, #144]
    stp     d14, d15, [sp, #160]
    str     x2, [sp, #0]            /* out */
    mrs     x3, fpcr
    str     x3, [sp, #8]            /* the caller's, put back at the end */
    ldr     x3, [x1, #776]
    msr     fpcr, x3
    ldp     q0, q1, [x1, #256]
    ldp     q2, q3, [x1, #288]
    ldp     q4, q5, [x1, #320]
    ldp     q6, q7, [x1, #352]
    ldp     q8, q9, [x1, #384]
    ldp     q10, q11, [x1, #416]
    ldp     q12, q13, [x1, #448]
    ldp     q14, q15, [x1, #480]
    ldp     q16, q17, [x1, #512]
    ldp     q18, q19, [x1, #544]
    ldp     q20, q21, [x1, #576]
    ldp     q22, q23, [x1, #608]
    ldp     q24, q25, [x1, #640]
    ldp     q26, q27, [x1, #672]
    ldp     q28, q29, [x1, #704]
    ldp     q30, q31, [x1, #736]
    ldp     x2, x3, [x1, #16]
    ldp     x4, x5, [x1, #32]
    ldp     x6, x7, [x1, #48]
    ldp     x8, x9, [x1, #64]
    ldp     x10, x11, [x1, #80]
    ldp     x12, x13, [x1, #96]
    ldp     x14, x15, [x1, #112]
    ldp     x16, x17, [x1, #128]
    ldp     x18, x19, [x1, #144]
    ldp     x20, x21, [x1, #160]
    ldp     x22, x23, [x1, #176]
    ldp     x24, x25, [x1, #192]
    ldp     x26, x27, [x1, #208]
    ldp     x28, x29, [x1, #224]
    ldr     x30, [x1, #240]
    ldr     x1, [x1, #8]
    .p2align 4
.Lspin:
    subs    x0, x0, #1
    b.ne    .Lspin

    str     x0, [sp, #-16]!
    ldr     x0, [sp, #16]           /* out */
    str     x1, [x0, #8]
    stp     x2, x3, [x0, #16]
    stp     x4, x5, [x0, #32]
    stp     x6, x7, [x0, #48]
    stp     x8, x9, [x0, #64]
    stp     x10, x11, [x0, #80]
    stp     x12, x13, [x0, #96]
    stp     x14, x15, [x0, #112]
    stp     x16, x17, [x0, #128]
    stp     x18, x19, [x0, #144]
    stp     x20, x21, [x0, #160]
    stp     x22, x23, [x0, #176]
    stp     x24, x25, [x0, #192]
    stp     x26, x27, [x0, #208]
    stp     x28, x29, [x0, #224]
    str     x30, [x0, #240]
    ldr     x1, [sp], #16
    str     x1, [x0, #0]
    mrs     x1, nzcv
    str     x1, [x0, #768]
    mrs     x1, fpcr
    str     x1, [x0, #776]
    stp     q0, q1, [x0, #256]
    stp     q2, q3, [x0, #288]
    stp     q4, q5, [x0, #320]
    stp     q6, q7, [x0, #352]
    stp     q8, q9, [x0, #384]
    stp     q10, q11, [x0, #416]
    stp     q12, q13, [x0, #448]
    stp     q14, q15, [x0, #480]
    stp     q16, q17, [x0, #512]
    stp     q18, q19, [x0, #544]
    stp     q20, q21, [x0, #576]
    stp     q22, q23, [x0, #608]
    stp     q24, q25, [x0, #640]
    stp     q26, q27, [x0, #672]
    stp     q28, q29, [x0, #704]
    stp     q30, q31, [x0, #736]
    ldr     x1, [sp, #8]
    msr     fpcr, x1
    ldp     x19, x20, [sp, #16]
    ldp     x21, x22, [sp, #32]
    ldp     x23, x24, [sp, #48]
    ldp     x25, x26, [sp, #64]
    ldp     x27, x28, [sp, #80]
    ldp     x29, x30, [sp, #96]
    ldp     d8, d9, [sp, #112]
    ldp     d10, d11, [sp, #128]
    ldp     d12, d13, [sp, #144]
    ldp     d14, d15, [sp, #160]
    add     sp, sp, #176
    ret
    .cfi_endproc
    .size   h_async_regs, .-h_async_regs

    .section .note.GNU-stack,"",%progbits
