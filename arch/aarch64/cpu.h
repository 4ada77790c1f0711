/*
 * cpu.h - AArch64: the spin-wait step, the StoreLoad fence and log2, for
 * src/base.h (which says where each is used).
 */
#ifndef GMP_ARCH_CPU_H
#define GMP_ARCH_CPU_H

#include <stdint.h>

#include <stdatomic.h>

/* isb, not yield: yield retires in about a cycle on most cores, so a spin
 * of N yields would be over before the other thread moved, while an isb
 * waits for the pipeline to drain (tens of cycles). */
static inline void gmp__cpu_relax(void)
{
    __asm__ __volatile__("isb sy" ::: "memory");
}

/* Seq_cst: the full fence (dmb ish) is the StoreLoad barrier. */
static inline void gmp__arch_storeload_fence(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}

/* An RMW is no full barrier here: the fence is still needed after one. */
#define GMP_ARCH_RMW_IS_FENCE 0

/* floor(log2(v)), v > 0: clz. */
static inline int gmp__log2_u64(uint64_t v)
{
    return 63 - __builtin_clzll(v);
}

#endif /* GMP_ARCH_CPU_H */
