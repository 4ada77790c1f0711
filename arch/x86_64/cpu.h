/*
 * cpu.h - x86-64: the spin-wait step, the StoreLoad fence and log2, for
 * src/base.h (which says where each is used).
 */
#ifndef GMP_ARCH_CPU_H
#define GMP_ARCH_CPU_H

#include <stdint.h>

/* pause: tens to a hundred-odd cycles. */
static inline void gmp__cpu_relax(void)
{
    __builtin_ia32_pause();
}

/* A locked RMW on the stack: as strong as mfence, and cheaper. */
static inline void gmp__arch_storeload_fence(void)
{
    __asm__ __volatile__("lock; orl $0, (%%rsp)" ::: "memory", "cc");
}

/* Every locked instruction is already a full barrier. */
#define GMP_ARCH_RMW_IS_FENCE 1

/* floor(log2(v)), v > 0: bsr. */
static inline int gmp__log2_u64(uint64_t v)
{
    return 63 - __builtin_clzll(v);
}

#endif /* GMP_ARCH_CPU_H */
