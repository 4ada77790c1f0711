/*
 * sanitizer.h - telling ASan and TSan about our stack switches.
 *
 * Both sanitizers track "the current stack" per thread; a hand-written
 * switch would confuse them. Around every switch:
 *   ASan: __sanitizer_start_switch_fiber(save, bottom, size) before, naming
 *         the stack we go to (a NULL save when the stack we leave is dead,
 *         so its fake frames are freed), __sanitizer_finish_switch_fiber
 *         after, on the new stack, which also reports the stack we left.
 *   TSan: one fiber per goroutine stack (created with the stack), the
 *         thread's own fiber for g0; __tsan_switch_to_fiber before the jump.
 * Without a sanitizer every hook compiles to nothing.
 */
#ifndef GMP_SANITIZER_H
#define GMP_SANITIZER_H

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GMP_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define GMP_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(GMP_ASAN)
#define GMP_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(GMP_TSAN)
#define GMP_TSAN 1
#endif

#ifdef GMP_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save,
                                    const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save,
                                     const void **bottom_old,
                                     size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define GMP_ASAN_START(save, bottom, size) \
    __sanitizer_start_switch_fiber((save), (bottom), (size))
#define GMP_ASAN_FINISH(save, bottom_old, size_old) \
    __sanitizer_finish_switch_fiber((save), (bottom_old), (size_old))
#define GMP_ASAN_UNPOISON(addr, size) \
    __asan_unpoison_memory_region((addr), (size))
#else
#define GMP_ASAN_START(save, bottom, size) \
    ((void)(save), (void)(bottom), (void)(size))
#define GMP_ASAN_FINISH(save, bottom_old, size_old) \
    ((void)(save), (void)(bottom_old), (void)(size_old))
#define GMP_ASAN_UNPOISON(addr, size) ((void)(addr), (void)(size))
#endif

#ifdef GMP_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
/* Pops one frame off the current fiber's shadow call stack. GCC knows it
 * as a builtin taking the (ignored) caller pc; clang only as a function. */
#ifdef __clang__
void __tsan_func_exit(void);
#define GMP_TSAN_FUNC_EXIT() __tsan_func_exit()
#else
#define GMP_TSAN_FUNC_EXIT() __tsan_func_exit(0)
#endif
#define GMP_TSAN_CURRENT()      __tsan_get_current_fiber()
#define GMP_TSAN_CREATE()       __tsan_create_fiber(0)
#define GMP_TSAN_DESTROY(f)     __tsan_destroy_fiber(f)
#define GMP_TSAN_SWITCH(f)      __tsan_switch_to_fiber((f), 0)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
/* An order TSan cannot see: one made by the kernel (netpoll.c). */
#define GMP_TSAN_RELEASE(a)     __tsan_release(a)
#define GMP_TSAN_ACQUIRE(a)     __tsan_acquire(a)
#else
#define GMP_TSAN_CURRENT()      ((void *)0)
#define GMP_TSAN_CREATE()       ((void *)0)
#define GMP_TSAN_DESTROY(f)     ((void)(f))
#define GMP_TSAN_SWITCH(f)      ((void)(f))
#define GMP_TSAN_RELEASE(a)     ((void)(a))
#define GMP_TSAN_ACQUIRE(a)     ((void)(a))
#endif

/* On a function that reads another goroutine's stack while that goroutine
 * may run (gmp_dump's backtraces, trace.c): neither sanitizer checks its
 * loads. They race by design, and they may land in the redzones ASan
 * keeps around live frames; each stays inside the stack's bounds. */
#if defined(GMP_ASAN) || defined(GMP_TSAN)
#define GMP_UNCHECKED_READS \
    __attribute__((no_sanitize_address, no_sanitize_thread))
#else
#define GMP_UNCHECKED_READS
#endif

#endif /* GMP_SANITIZER_H */
