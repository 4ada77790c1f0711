/*
 * text_begin.S, text_end.S -- mark where the library's code starts and
 * ends. The build links every object of the library into one (ld -r) with
 * text_begin.o first and text_end.o last, and compiles them so that all
 * their code lands in .text; the preemption signal handler (src/preempt.c)
 * then knows the runtime's code as [gmp__text_begin, gmp__text_end).
 */
    .text
    .globl  gmp__text_begin
    .hidden gmp__text_begin
gmp__text_begin:
#if defined(__aarch64__)
#include "property.h"
#endif
    .section .note.GNU-stack,"",%progbits
