/*
 * context.h - what every architecture's context switch shares: a
 * suspended context is its saved stack pointer, and the same three entry
 * points. The per-architecture half is arch/<arch>/frame.h (the frame
 * layout and how a fresh frame is filled) and arch/<arch>/switch.S.
 */
#ifndef GMP_ARCH_CONTEXT_H
#define GMP_ARCH_CONTEXT_H

#include <stdint.h>

/* A fresh context's entry: arg as given to gmp__ctx_make, from_sp as
 * returned by gmp__ctx_jump. Must never return. */
typedef void gmp__ctx_fn(void *arg, void *from_sp);

/* First code of every fresh context: calls the entry function that
 * gmp__ctx_frame_init stored; must never return. */
void gmp__ctx_start(void);

#include "frame.h"

struct gmp__ctx {
    void *sp;               /* saved stack pointer of a suspended context */
};

/* Suspends the caller and resumes the context saved at to_sp. Returns when
 * some context resumes the caller, with that context's saved stack
 * pointer, which the caller must store where it belongs (the suspended
 * context can be resumed only through it). */
void *gmp__ctx_jump(void *to_sp);

/* The same, for a switch between two contexts suspended at the same call
 * site, where entering by `ret` keeps the return predictor in step
 * (x86_64/switch.S). arm64's switch always enters by ret. */
#if defined(__x86_64__)
void *gmp__ctx_jump_ret(void *to_sp);
#else
#define gmp__ctx_jump_ret gmp__ctx_jump
#endif

/* Prepares *c to run fn(arg, from) on the stack whose highest address is
 * hi: a frame at the 16-byte aligned top that gmp__ctx_jump restores into
 * gmp__ctx_start. */
static inline void gmp__ctx_make(struct gmp__ctx *c, void *hi,
                                 gmp__ctx_fn *fn, void *arg)
{
    uintptr_t top = (uintptr_t)hi & ~(uintptr_t)15;
    struct gmp__ctx_frame *f = (struct gmp__ctx_frame *)(top - GMP_CTX_FRAME);
    gmp__ctx_frame_init(f, fn, arg);
    /* Relaxed: a plain store; atomic because a G's saved sp is read by
     * gmp_dump and gmp_stacks_foreach without stopping it. */
    __atomic_store_n(&c->sp, (void *)f, __ATOMIC_RELAXED);
}

#endif /* GMP_ARCH_CONTEXT_H */
