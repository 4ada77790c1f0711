/*
 * base.h - the bottom of the runtime's include graph: what a module needs
 * without the scheduler's types (visibility, branch hints, the cache
 * line, the spin-wait step, the StoreLoad fence, the monotonic clock and
 * deadlines). It includes only libc and arch/<arch>/cpu.h; every other
 * header may include it.
 */
#ifndef GMP_BASE_H
#define GMP_BASE_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "cpu.h"

#define GMP_HIDDEN __attribute__((visibility("hidden")))
#define GMP_LIKELY(x)   __builtin_expect(!!(x), 1)
#define GMP_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define GMP_CACHELINE   64
#define GMP_ALIGNED     _Alignas(GMP_CACHELINE)

/* gmp__cpu_relax(), from arch/<arch>/cpu.h: one step of a spin-wait,
 * tens of cycles. Spins that must last a given time go by the clock
 * (runq.c, runnext_grace). */

/* A full StoreLoad barrier: the caller's earlier stores are visible to
 * any thread before the caller's later loads are performed. Used where two
 * threads each publish something and then look at the other's flag (the
 * spinning protocol in sched.c). arch/<arch>/cpu.h has the instruction.
 * TSan models neither fences nor inline asm, so its builds use a seq_cst
 * RMW on one shared word: all such barriers are then totally ordered,
 * which gives the same guarantee in the C11 model TSan checks. */
#ifdef GMP_TSAN
GMP_HIDDEN extern _Atomic unsigned gmp__fence_word;
#endif
static inline void gmp__storeload_fence(void)
{
#if defined(GMP_TSAN)
    atomic_fetch_add_explicit(&gmp__fence_word, 0, memory_order_seq_cst);
#else
    gmp__arch_storeload_fence();
#endif
}

/* gmp__storeload_fence for a caller whose last store was a locked
 * read-modify-write (Linux's smp_mb__after_atomic): where every locked
 * instruction is already a full barrier (x86), only the compiler needs
 * telling; elsewhere, and under TSan (which reasons in C11), the fence.
 * Used after gmp__runqput(next) on a P with thieves, which publishes the
 * G with an exchange. */
static inline void gmp__storeload_fence_after_rmw(void)
{
#if !defined(GMP_TSAN)
    if (GMP_ARCH_RMW_IS_FENCE) {
        __asm__ __volatile__("" ::: "memory");
        return;
    }
#endif
    gmp__storeload_fence();
}

/*
 * The clock the runtime reads (gmp__nanotime, gmp__coarse_read): the C
 * library's clock_gettime, found past the program with dlsym(RTLD_NEXT)
 * when a runtime first starts (gmp__clock_setup, src/libc.c). A program
 * may define its own clock_gettime (a test double, a time mock); its code
 * then runs wherever the runtime reads the clock, in parks and timer
 * checks that must not switch, and the preemption signal cannot tell it
 * from the program's own code: it would stop a goroutine there. libc's,
 * and the vDSO under it, are never stopped. Where dlsym finds nothing (a
 * static binary) the plain symbol stays, the program's if it has one;
 * there the signal is off anyway (src/preempt.c). Not in struct
 * gmp__libc (src/libc.h): the hooks leave the clock alone.
 */
GMP_HIDDEN extern int (*_Atomic gmp__clock_gettime)(clockid_t,
                                                    struct timespec *);

/* The monotonic clock in ns: gmp_nanotime without its preemption check,
 * for the runtime's own reads (which may sit inside a protocol that must
 * not switch). Context: any. */
static inline int64_t gmp__nanotime(void)
{
    struct timespec ts;
    /* Relaxed: a constant once a runtime runs (gmp__clock_gettime). */
    atomic_load_explicit(&gmp__clock_gettime, memory_order_relaxed)(
        CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* a + b, saturating at INT64_MAX. b must not be negative. */
static inline int64_t gmp__add_sat(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* when = now + ns, saturating at INT64_MAX. */
static inline int64_t gmp__deadline(int64_t now, int64_t ns)
{
    return gmp__add_sat(ns, now);
}

#endif /* GMP_BASE_H */
