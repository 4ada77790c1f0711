/*
 * cpu.h - RISC-V 64: the spin-wait step, the StoreLoad fence and log2, for
 * src/base.h (which says where each is used).
 */
#ifndef GMP_ARCH_CPU_H
#define GMP_ARCH_CPU_H

#include <stdint.h>

#include <stdatomic.h>

/* Zihintpause's pause, spelled as its encoding (fence w,0) so that any
 * assembler takes it; a hint, so a core without the extension runs it as
 * a fence that orders nothing. */
static inline void gmp__cpu_relax(void)
{
    __asm__ __volatile__(".insn i 0x0f, 0, x0, x0, 0x010" ::: "memory");
}

/* Seq_cst: the full fence (fence rw,rw) is the StoreLoad barrier. */
static inline void gmp__arch_storeload_fence(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}

/* An AMO is no full barrier here: the fence is still needed after one. */
#define GMP_ARCH_RMW_IS_FENCE 0

/* floor(log2(v)), v > 0. Without Zbb there is no count-leading-zeros
 * instruction, and gcc would call libgcc's __clzdi2, outside the
 * runtime's code range (cmake/check_text.cmake): a binary search then,
 * six shifts. */
static inline int gmp__log2_u64(uint64_t v)
{
#if defined(__riscv_zbb)
    return 63 - __builtin_clzll(v);
#else
    int b = 0;
    for (int s = 32; s > 0; s >>= 1) {
        if (v >> s) {
            v >>= s;
            b += s;
        }
    }
    return b;
#endif
}

#endif /* GMP_ARCH_CPU_H */
