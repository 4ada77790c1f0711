/*
 * interrupt.h - what every architecture shares for the code a signal
 * interrupted: reading its pc and sp from the handler's ucontext_t, and
 * rewriting that context so that the thread enters the preemption stub
 * (arch/<arch>/preempt.S) on return from the handler. The per-architecture
 * half is arch/<arch>/sigctx.h; each defines the same static inline
 * functions, listed here. src/preempt.c's essay describes the protocol.
 *
 *   GMP_RED_ZONE   bytes below the stack pointer that code may use
 *                  without moving it
 *   uintptr_t gmp__sigctx_pc(const ucontext_t *uc)
 *   uintptr_t gmp__sigctx_sp(const ucontext_t *uc)
 *   uintptr_t gmp__sigctx_fp(const ucontext_t *uc)   the frame pointer
 *   bool      gmp__sigctx_setup(void)
 *       whether the stub can run on this processor and kernel (and sizes
 *       what it saves). Context: setup, before the handler is installed.
 *   size_t    gmp__sigctx_stub_need(void)
 *       bytes the stub's frame takes below the interrupted sp
 *   bool      gmp__sigctx_fp_plain(const ucontext_t *uc)
 *       whether the stub saves all the live floating-point and vector
 *       state (false for arm64 SVE or SME state beyond the SIMD registers)
 *   void      gmp__sigctx_redirect(ucontext_t *uc, uintptr_t pc,
 *                                  uintptr_t sp)
 *       makes the thread continue in gmp__asyncpreempt, as if the
 *       instruction at pc, with the stack pointer sp, had called it
 *   bool      gmp__sigctx_is_resume(const ucontext_t *uc)
 *   bool      gmp__sigctx_resume(ucontext_t *uc)
 *       for a stub that ends by signalling its own thread (arm64): whether
 *       this signal is that one, and loading the registers the stub saved
 *       into uc (false: the kernel gave no FP/SIMD record to load them
 *       into). Where the stub returns by itself both are false.
 *   void      gmp__sigctx_stub_return(uint64_t *frame, pid_t pid, int tid)
 *       called by gmp__asyncpreempt2 as the G resumes, on the thread it
 *       resumes on: tells a stub that signals its own thread which one.
 * All but gmp__sigctx_setup are async-signal-safe.
 */
#ifndef GMP_ARCH_INTERRUPT_H
#define GMP_ARCH_INTERRUPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <ucontext.h>

/* The stub (arch/<arch>/preempt.S) and the C function it calls with the
 * address of its saved registers (src/preempt.c). */
__attribute__((visibility("hidden"))) void gmp__asyncpreempt(void);
__attribute__((visibility("hidden"))) void gmp__asyncpreempt2(uint64_t *frame);

#include "sigctx.h"

#endif /* GMP_ARCH_INTERRUPT_H */
