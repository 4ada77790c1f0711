/*
 * internal.h - the one seam between the white-box tests and the runtime's
 * internals, as Go's export_test.go is: the runtime's own headers, what
 * the runtime defines for the tests alone, and the white-box checks that
 * several tests share. A test that looks inside includes this after
 * harness.h, and no header of src/ itself.
 */
#ifndef GMP_TEST_INTERNAL_H
#define GMP_TEST_INTERNAL_H

#ifndef GMP_TEST_HARNESS_H
#error "include harness.h first"
#endif

#include "runtime.h"
#include "alloc.h"
#include "cgroup.h"
#include "chan.h"
#include "key.h"
#include "lock.h"
#include "netpoll.h"
#include "park.h"
#include "preempt.h"
#include "stack.h"
#include "sync.h"
#include "timer.h"

/* pool.c, for test_pool: how many submitters wait at the capacity. */
size_t gmp__pool_waiting(gmp_pool_t *p);

/* The runtime running now, or NULL. Seq_cst: a test's read, no hot path. */
static H_UNUSED struct schedt *h_sched(void)
{
    return atomic_load(&gmp__sched);
}

/* Every goroutine has returned and no timer is left in any P's heap: a
 * sleep that ended, a select or cond wait woken early, a timed-out wait,
 * all took their timers with them. Also no failed G_CHECK. Context: the
 * test thread, at the end of a test. */
static H_UNUSED void h_assert_quiet_timers(void)
{
    assert_int_equal(h_wait_quiet(), 0);
    struct schedt *s = h_sched();
    /* Every P's heap, those a resize took out of use too. */
    for (int i = 0; s && i < s->maxprocs; i++)
        assert_int_equal(atomic_load(&s->allp[i].timer0when), 0);
    ASSERT_NO_BAD();
}

/* Waiter records linked on descriptors now: a goroutine parked on an fd
 * has one. Seq_cst: a test's read. */
static H_UNUSED uint32_t h_netpoll_waiters(void)
{
    struct schedt *s = h_sched();
    return s ? atomic_load(&s->netpoll_waiters) : 0;
}

static H_UNUSED bool h_no_fd_waiters(void *arg)
{
    (void)arg;
    return h_netpoll_waiters() == 0;
}

/* Every goroutine has returned, no waiter is left on any descriptor, and
 * no G_CHECK failed. Whoever took the last waiter off its descriptor
 * may still count it for a moment (a poll lets go once it has queued
 * the Gs it woke, whose run may end first), so the count is waited for
 * too. Context: the test
 * thread, at the end of a test. */
static H_UNUSED void h_assert_quiet_fds(void)
{
    assert_int_equal(h_wait_quiet(), 0);
    assert_int_equal(h_wait_until(h_no_fd_waiters, NULL,
                                  "no waiter on any descriptor"), 0);
    ASSERT_NO_BAD();
}

#endif /* GMP_TEST_INTERNAL_H */
