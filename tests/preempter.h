/*
 * preempter.h - for the white-box preemption tests (test_preempt,
 * test_foreign): a thread that asks every P of the running runtime to
 * preempt its goroutine, every 50 us, as sysmon does every 10 ms, so that
 * a test sees many preemption signals in little time. pe.sent counts its
 * rounds. And the helpers both tests use around it. Include after
 * harness.h.
 */
#ifndef GMP_TEST_PREEMPTER_H
#define GMP_TEST_PREEMPTER_H

#include "internal.h"

/* Asynchronous preemption is on in this build and runtime (not TSan, not
 * valgrind, libc linked dynamically). */
static H_UNUSED bool async_on(void)
{
    struct schedt *s = h_sched();
    return s && s->async_preempt;
}

#define SKIP_WITHOUT_ASYNC()                                                \
    do {                                                                    \
        if (!async_on()) {                                                  \
            print_message("asynchronous preemption is off here\n");         \
            skip();                                                         \
        }                                                                   \
    } while (0)

/* The calling goroutine's descriptor: its counters are written by the
 * signal handler on its own thread, and read here by the goroutine. */
static H_UNUSED struct g *self(void)
{
    return gmp__getm()->curg;
}

/* How often the signal has stopped gp. */
static H_UNUSED uint32_t async_of(struct g *gp)
{
    return ((volatile struct g *)gp)->asyncpreempts;
}

static struct {
    pthread_t thread;
    _Atomic int stop;
    _Atomic int64_t sent;           /* rounds of requests made */
} pe;

static void *preempter(void *arg)
{
    struct schedt *s = arg;
    while (!atomic_load(&pe.stop)) {
        for (int i = 0; i < s->procs; i++)
            gmp__preemptone(s, &s->allp[i]);
        atomic_fetch_add(&pe.sent, 1);
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Starts it on the running runtime; aborts if no thread can be made. */
static H_UNUSED void preempter_start(void)
{
    atomic_store(&pe.stop, 0);
    atomic_store(&pe.sent, 0);
    if (pthread_create(&pe.thread, NULL, preempter, h_sched()) != 0)
        abort();
}

static H_UNUSED void preempter_stop(void)
{
    atomic_store(&pe.stop, 1);
    pthread_join(pe.thread, NULL);
}

#endif /* GMP_TEST_PREEMPTER_H */
