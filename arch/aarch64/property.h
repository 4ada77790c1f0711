/*
 * property.h -- included at the end of every arm64 assembly file of the
 * library. Each one is compatible with -mbranch-protection (its entry
 * points have landing pads or are entered by ret or by a signal return,
 * and none signs a return address); the GNU property note says so when the
 * build asks for it. The linker keeps a protection only when every object
 * carries the note, so a file without it would turn BTI and PAC off for
 * the whole program.
 */
#if defined(__ARM_FEATURE_BTI_DEFAULT) || defined(__ARM_FEATURE_PAC_DEFAULT)
    .pushsection .note.gnu.property, "a"
    .p2align 3
    .word   4                       /* name size: "GNU\0" */
    .word   16                      /* descriptor size */
    .word   5                       /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
    .word   0xc0000000              /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
    .word   4
    .word   3                       /* BTI | PAC */
    .word   0
    .popsection
#endif
