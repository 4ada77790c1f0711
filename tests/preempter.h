/*
 * preempter.h - for the white-box preemption tests (test_preempt,
 * test_foreign): a thread that asks every P of the running runtime to
 * preempt its goroutine, every 50 us, as sysmon does every 10 ms, so that
 * a test sees many preemption signals in little time. pe.sent counts its
 * rounds. Include after harness.h and runtime.h.
 */
#ifndef GMP_TEST_PREEMPTER_H
#define GMP_TEST_PREEMPTER_H

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
    struct schedt *s = atomic_load_explicit(&gmp__sched, memory_order_acquire);
    if (pthread_create(&pe.thread, NULL, preempter, s) != 0)
        abort();
}

static H_UNUSED void preempter_stop(void)
{
    atomic_store(&pe.stop, 1);
    pthread_join(pe.thread, NULL);
}

#endif /* GMP_TEST_PREEMPTER_H */
