/*
 * spin.c - foreign code for test_foreign: loops that never call the
 * runtime, and a pthread mutex held while spinning, as an allocator's or
 * an interpreter's lock would be. Built twice from this file:
 * libgmpt_linked.so, linked to the test, and libgmpt_loaded.so, which the
 * test opens with dlopen while the runtime runs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Spins until *word changes or *rounds reaches until; returns 1 if the
 * word changed, else 0. The test passes its goroutine's count of
 * preemptions by signal as word: only a stop here ends the loop early.
 * Static: a call between the two copies' exported functions would go to
 * whichever the loader found first. */
static uint32_t spin(const volatile uint32_t *word, _Atomic int64_t *rounds,
                     int64_t until)
{
    uint32_t from = *word;
    while (*word == from &&
           atomic_load_explicit(rounds, memory_order_relaxed) < until)
        ;
    return *word != from;
}

uint32_t spin_until(const volatile uint32_t *word, _Atomic int64_t *rounds,
                    int64_t until)
{
    return spin(word, rounds, until);
}

/* Spins until *flag is set, calling fn (a gmp_ function: the runtime's
 * cooperative point) every 4096 turns, so that most signals land here.
 * Returns how often *word (the goroutine's count of preemptions by
 * signal) changed meanwhile: nothing but this loop and the runtime, where
 * no signal stops it, runs in between. */
uint32_t spin_calling(int64_t (*fn)(void), _Atomic int64_t *flag,
                      const volatile uint32_t *word)
{
    uint32_t from = *word;
    for (unsigned i = 1; !atomic_load_explicit(flag, memory_order_relaxed);
         i++)
        if (i % 4096 == 0)
            fn();
    return *word - from;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Takes the lock, sets *inside to 1, spins as spin_until, sets *inside
 * to 2 and releases the lock. */
void spin_hold(const volatile uint32_t *word, _Atomic int64_t *rounds,
               int64_t until, _Atomic int64_t *inside)
{
    pthread_mutex_lock(&mu);
    atomic_store(inside, 1);
    spin(word, rounds, until);
    atomic_store(inside, 2);
    pthread_mutex_unlock(&mu);
}

/* Takes the lock and releases it. */
void spin_touch(void)
{
    pthread_mutex_lock(&mu);
    pthread_mutex_unlock(&mu);
}
