/* The end marker; see text_begin.S. */
    .text
    .globl  gmp__text_end
    .hidden gmp__text_end
gmp__text_end:
#if defined(__aarch64__)
#include "property.h"
#endif
    .section .note.GNU-stack,"",%progbits
