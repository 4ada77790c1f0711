/*
 * stack_frames.c - recursions whose every frame holds a buffer of a given
 * size, touched at its low end first (the worst case for a guard: the
 * first write lands a whole frame below the last one), and single frames
 * of a given size. Built twice into test_stack: with and without
 * -fstack-clash-protection, FRAMES_PREFIX naming each copy.
 */
#define CAT_(a, b) a##b
#define CAT(a, b)  CAT_(a, b)
#define FN(name)   CAT(FRAMES_PREFIX, name)

int FN(deep_2)(int n);
int FN(deep_8)(int n);
int FN(deep_15)(int n);
int FN(deep_60)(int n);
int FN(deep_131)(int n);
int FN(deep_300)(int n);
int FN(big_131)(int n);

static volatile int never;          /* 0; the compiler cannot know */

#define DEEP(kib)                                                           \
    __attribute__((noinline)) int FN(deep_##kib)(int n)                     \
    {                                                                       \
        volatile char buf[(kib) * 1024];                                    \
        buf[0] = (char)n;                                                   \
        if (never)                                                          \
            return buf[0];                                                  \
        int r = FN(deep_##kib)(n + 1);                                      \
        return r + buf[sizeof buf - 1 - (n & 511)];                         \
    }

#define BIG(kib)                                                            \
    __attribute__((noinline)) int FN(big_##kib)(int n)                      \
    {                                                                       \
        volatile char buf[(kib) * 1024];                                    \
        buf[n & 1] = (char)n;       /* variable indices: the whole array */ \
        return buf[0] + buf[sizeof buf - 1 - (n & 511)];                    \
    }

DEEP(2)
DEEP(8)
DEEP(15)
DEEP(60)
DEEP(131)
DEEP(300)
BIG(131)
