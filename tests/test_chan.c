/*
 * test_chan.c - channels (gmp_chan_*) through the public API, in the
 * spirit of Go's chan_test.go:
 *   - bad arguments: sizes that overflow, NULL channels, NULL elements;
 *   - every capacity (0, 1, 2, 5, 16), non-blocking and blocking: EAGAIN
 *     on full / empty, len and cap exactly, FIFO order through a ring that
 *     wraps at every offset, signal-only (elem_size 0) channels and
 *     elements of odd and large sizes copied byte for byte;
 *   - a send completes only once a receiver takes it (or there is room),
 *     a receive only once there is a value: checked by counters, never by
 *     time, exactly (deterministic) at procs 1;
 *   - close: twice, send / trysend on closed, buffered values first, then
 *     GMP_ECLOSED with the element zeroed; close wakes every blocked
 *     receiver and sender, goroutines and plain threads alike;
 *   - close racing senders, receivers and a second closer: every value a
 *     send reported sent is received exactly once, and nothing else;
 *   - waiters are served first come, first served (blocked senders and
 *     receivers, goroutines at procs 1, plain threads at every procs);
 *   - many producers and consumers at several capacities: each value
 *     exactly once; a daisy chain; Go's non-blocking receive race;
 *   - plain threads and goroutines on one channel (both directions, the
 *     test thread too), goroutines waiting inside a syscall bracket (they
 *     sleep as plain threads while the others run), and channels between
 *     plain threads with no runtime running at all.
 *
 * Goroutines and helper threads only record (atomics, arrays, and G_CHECK
 * for a failed expectation); the test thread waits and asserts.
 */
#include "harness.h"

#include <pthread.h>
#include <sys/syscall.h>

/* ---- Helpers ------------------------------------------------------------- */


#define N_CAPS 5
static const size_t caps[N_CAPS] = {0, 1, 2, 5, 16};

/* ---- Bad arguments -------------------------------------------------------- */

static void test_chan_bad_arguments(void **state)
{
    long v = 7;
    /* elem_size * cap overflows size_t. */
    assert_null(gmp_chan_make(SIZE_MAX, 2));
    assert_null(gmp_chan_make(2, SIZE_MAX));
    assert_null(gmp_chan_make(SIZE_MAX, SIZE_MAX));
    assert_null(gmp_chan_make((size_t)1 << 33, (size_t)1 << 33));
    assert_null(gmp_chan_make(SIZE_MAX / 8 + 1, 8));
    assert_null(gmp_chan_make(8, SIZE_MAX / 8 + 1));
    /* The product fits, the channel around it does not. */
    assert_null(gmp_chan_make(SIZE_MAX, 1));
    assert_null(gmp_chan_make(1, SIZE_MAX));

    assert_int_equal(gmp_chan_send(NULL, &v), GMP_EINVAL);
    assert_int_equal(gmp_chan_recv(NULL, &v), GMP_EINVAL);
    assert_int_equal(gmp_chan_trysend(NULL, &v), GMP_EINVAL);
    assert_int_equal(gmp_chan_tryrecv(NULL, &v), GMP_EINVAL);
    assert_int_equal(gmp_chan_send(NULL, NULL), GMP_EINVAL);
    assert_int_equal(gmp_chan_recv(NULL, NULL), GMP_EINVAL);
    assert_int_equal(gmp_chan_close(NULL), GMP_EINVAL);
    assert_int_equal(v, 7);                 /* nothing written */
    assert_int_equal(gmp_chan_len(NULL), 0);
    assert_int_equal(gmp_chan_cap(NULL), 0);
    gmp_chan_free(NULL);

    /* A NULL element with a payload; a failed call changes nothing. */
    for (int k = 0; k < N_CAPS; k++) {
        gmp_chan_t *c = gmp_chan_make(sizeof(long), caps[k]);
        assert_non_null(c);
        assert_int_equal(gmp_chan_trysend(c, NULL), GMP_EINVAL);
        if (caps[k] > 0)
            assert_int_equal(gmp_chan_send(c, NULL), GMP_EINVAL);
        assert_int_equal(gmp_chan_len(c), 0);
        if (caps[k] > 0) {
            v = 41;
            assert_int_equal(gmp_chan_trysend(c, &v), 0);
            assert_int_equal(gmp_chan_trysend(c, NULL), GMP_EINVAL);
            assert_int_equal(gmp_chan_len(c), 1);
            v = 0;
            assert_int_equal(gmp_chan_tryrecv(c, &v), 0);
            assert_int_equal(v, 41);
        }
        assert_int_equal(gmp_chan_tryrecv(c, &v), GMP_EAGAIN);
        assert_int_equal(gmp_chan_close(c), 0);
        gmp_chan_free(c);
    }
}

/* ---- Non-blocking, every capacity --------------------------------------- */

static void check_nonblocking(size_t cap)
{
    gmp_chan_t *c = gmp_chan_make(sizeof(long), cap);
    assert_non_null(c);
    assert_int_equal(gmp_chan_cap(c), cap);
    assert_int_equal(gmp_chan_len(c), 0);
    long v = -1, in = 0, out = 0;
    assert_int_equal(gmp_chan_tryrecv(c, &v), GMP_EAGAIN);
    assert_int_equal(v, -1);                /* a failed call changes nothing */
    v = 99;
    if (cap == 0) {
        /* Unbuffered, nobody waiting: never ready either way. */
        for (int i = 0; i < 10; i++) {
            assert_int_equal(gmp_chan_trysend(c, &v), GMP_EAGAIN);
            assert_int_equal(gmp_chan_tryrecv(c, &v), GMP_EAGAIN);
            assert_int_equal(gmp_chan_len(c), 0);
        }
        assert_int_equal(v, 99);
    }
    /* Top up to full, then drain 1..cap: the ring wraps at every offset;
     * values come out in the order they went in. */
    for (size_t round = 0; cap > 0 && round < 4 * cap + 3; round++) {
        while (gmp_chan_len(c) < cap) {
            size_t before = gmp_chan_len(c);
            v = in;
            assert_int_equal(gmp_chan_trysend(c, &v), 0);
            in++;
            assert_int_equal(gmp_chan_len(c), before + 1);
        }
        v = -5;
        assert_int_equal(gmp_chan_trysend(c, &v), GMP_EAGAIN);
        assert_int_equal(gmp_chan_len(c), cap);
        assert_int_equal(gmp_chan_cap(c), cap);
        size_t drain = 1 + round % cap;
        for (size_t j = 0; j < drain; j++) {
            v = -1;
            if ((round + j) % 5 == 4) {
                /* A NULL buffer drops the value. */
                assert_int_equal(gmp_chan_tryrecv(c, NULL), 0);
            } else {
                assert_int_equal(gmp_chan_tryrecv(c, &v), 0);
                assert_int_equal(v, out);
            }
            out++;
            assert_int_equal(gmp_chan_len(c), cap - 1 - j);
        }
    }
    while (gmp_chan_len(c) > 0) {
        assert_int_equal(gmp_chan_tryrecv(c, &v), 0);
        assert_int_equal(v, out);
        out++;
    }
    assert_int_equal(in, out);
    v = -1;
    assert_int_equal(gmp_chan_tryrecv(c, &v), GMP_EAGAIN);
    assert_int_equal(v, -1);
    gmp_chan_free(c);
}

static void test_chan_nonblocking_every_capacity(void **state)
{
    for (int k = 0; k < N_CAPS; k++)
        check_nonblocking(caps[k]);
    /* Other element sizes report the same len and cap. */
    const size_t sizes[] = {0, 1, 3, 1000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int k = 0; k < N_CAPS; k++) {
            gmp_chan_t *c = gmp_chan_make(sizes[s], caps[k]);
            assert_non_null(c);
            assert_int_equal(gmp_chan_cap(c), caps[k]);
            assert_int_equal(gmp_chan_len(c), 0);
            gmp_chan_free(c);
        }
}

/* ---- Blocking FIFO, every capacity ------------------------------------- */

static struct {
    gmp_chan_t *c;
    size_t cap;
    long n;
    long *got;
    _Atomic int64_t done;
} seq;

static void seq_producer(void *arg)
{
    (void)arg;
    for (long i = 0; i < seq.n; i++) {
        long v = i;
        G_CHECK(gmp_chan_send(seq.c, &v) == 0);
        v = -7;                             /* the channel holds a copy */
    }
    atomic_fetch_add(&seq.done, 1);
}

static void seq_consumer(void *arg)
{
    (void)arg;
    for (long i = 0; i < seq.n; i++) {
        long v = -1;
        G_CHECK(gmp_chan_recv(seq.c, &v) == 0);
        seq.got[i] = v;
        G_CHECK(gmp_chan_len(seq.c) <= seq.cap);
    }
    atomic_fetch_add(&seq.done, 1);
}

/* One goroutine sends 0..n-1 with blocking sends, the test thread receives
 * them in order; then the other way round. */
static void test_chan_blocking_fifo_every_capacity(void **state)
{
    bad_reset();
    seq.n = H_SCALE(10000L);
    seq.got = calloc((size_t)seq.n, sizeof *seq.got);
    assert_non_null(seq.got);
    for (int k = 0; k < N_CAPS; k++) {
        seq.cap = caps[k];
        seq.c = gmp_chan_make(sizeof(long), caps[k]);
        assert_non_null(seq.c);

        atomic_store(&seq.done, 0);
        assert_int_equal(gmp_go(seq_producer, NULL), 0);
        for (long i = 0; i < seq.n; i++) {
            long v = -1;
            assert_int_equal(gmp_chan_recv(seq.c, &v), 0);
            if (v != i)
                fail_msg("cap %zu: received %ld, want %ld", caps[k], v, i);
            assert_true(gmp_chan_len(seq.c) <= caps[k]);
        }
        assert_int_equal(h_wait(&seq.done, 1), 0);
        assert_int_equal(gmp_chan_len(seq.c), 0);

        atomic_store(&seq.done, 0);
        memset(seq.got, 0xff, (size_t)seq.n * sizeof *seq.got);
        assert_int_equal(gmp_go(seq_consumer, NULL), 0);
        for (long i = 0; i < seq.n; i++)
            assert_int_equal(gmp_chan_send(seq.c, &i), 0);
        assert_int_equal(h_wait(&seq.done, 1), 0);
        for (long i = 0; i < seq.n; i++)
            if (seq.got[i] != i)
                fail_msg("cap %zu: got[%ld] = %ld", caps[k], i, seq.got[i]);
        long v = -1;
        assert_int_equal(gmp_chan_tryrecv(seq.c, &v), GMP_EAGAIN);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(seq.c);
    }
    free(seq.got);
    ASSERT_NO_BAD();
}

/* ---- Signal-only channels (elem_size 0) --------------------------------- */

static struct {
    gmp_chan_t *c;
    long n;
    _Atomic int64_t done;
} sig;

static void sig_sender(void *arg)
{
    (void)arg;
    long dummy = 5;
    for (long i = 0; i < sig.n; i++)
        G_CHECK(gmp_chan_send(sig.c, (i & 1) ? &dummy : NULL) == 0);
    G_CHECK(gmp_chan_close(sig.c) == 0);
    atomic_fetch_add(&sig.done, 1);
}

static void test_chan_elem_size_zero(void **state)
{
    bad_reset();
    for (int k = 0; k < N_CAPS; k++) {
        size_t cap = caps[k];
        gmp_chan_t *c = gmp_chan_make(0, cap);
        assert_non_null(c);
        assert_int_equal(gmp_chan_cap(c), cap);
        for (size_t i = 0; i < cap; i++) {
            assert_int_equal(gmp_chan_trysend(c, NULL), 0);
            assert_int_equal(gmp_chan_len(c), i + 1);
        }
        assert_int_equal(gmp_chan_trysend(c, NULL), GMP_EAGAIN);
        assert_int_equal(gmp_chan_len(c), cap);
        long dummy = 0x1234;
        for (size_t i = 0; i < cap; i++) {
            assert_int_equal(gmp_chan_tryrecv(c, (i & 1) ? &dummy : NULL), 0);
            assert_int_equal(gmp_chan_len(c), cap - 1 - i);
        }
        assert_int_equal(dummy, 0x1234);    /* zero bytes copied */
        assert_int_equal(gmp_chan_tryrecv(c, NULL), GMP_EAGAIN);

        /* Blocking, a goroutine against the test thread, then close. */
        sig.c = c;
        sig.n = H_SCALE(5000L);
        atomic_store(&sig.done, 0);
        assert_int_equal(gmp_go(sig_sender, NULL), 0);
        for (long i = 0; i < sig.n; i++)
            assert_int_equal(gmp_chan_recv(c, (i % 3) ? NULL : &dummy), 0);
        assert_int_equal(gmp_chan_recv(c, NULL), GMP_ECLOSED);
        assert_int_equal(gmp_chan_tryrecv(c, NULL), GMP_ECLOSED);
        assert_int_equal(gmp_chan_trysend(c, NULL), GMP_ECLOSED);
        assert_int_equal(gmp_chan_send(c, NULL), GMP_ECLOSED);
        assert_int_equal(dummy, 0x1234);
        assert_int_equal(h_wait(&sig.done, 1), 0);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(c);
    }
    ASSERT_NO_BAD();
}

/* ---- Odd and large element sizes ---------------------------------------- */

static uint8_t pat(long seqno, size_t j)
{
    return (uint8_t)(seqno * 131 + (long)j * 7 + (long)(j >> 8) + 1);
}

static void pat_fill(uint8_t *b, size_t sz, long seqno)
{
    for (size_t j = 0; j < sz; j++)
        b[j] = pat(seqno, j);
}

static bool pat_ok(const uint8_t *b, size_t sz, long seqno)
{
    for (size_t j = 0; j < sz; j++)
        if (b[j] != pat(seqno, j))
            return false;
    return true;
}

static struct {
    gmp_chan_t *c;
    size_t sz;
    long n;
    _Atomic int64_t done;
} big;

static void big_producer(void *arg)
{
    (void)arg;
    uint8_t *b = malloc(big.sz);
    G_CHECK(b != NULL);
    for (long i = 0; b && i < big.n; i++) {
        pat_fill(b, big.sz, i);
        G_CHECK(gmp_chan_send(big.c, b) == 0);
        memset(b, 0x5a, big.sz);            /* the channel holds a copy */
    }
    free(b);
    atomic_fetch_add(&big.done, 1);
}

static void big_consumer(void *arg)
{
    (void)arg;
    uint8_t *b = malloc(big.sz);
    G_CHECK(b != NULL);
    for (long i = 0; b && i < big.n; i++) {
        memset(b, 0xee, big.sz);
        G_CHECK(gmp_chan_recv(big.c, b) == 0);
        G_CHECK(pat_ok(b, big.sz, i));
    }
    /* Closed and drained: the whole element is zeroed. */
    if (b) {
        memset(b, 0xee, big.sz);
        G_CHECK(gmp_chan_recv(big.c, b) == GMP_ECLOSED);
        for (size_t j = 0; j < big.sz; j++)
            G_CHECK(b[j] == 0);
    }
    free(b);
    atomic_fetch_add(&big.done, 1);
}

/* Elements of 1, 13, 1000 and 4103 bytes through buffered and unbuffered
 * channels, both ways (so that a parked sender's element is copied out,
 * and a parked receiver's buffer is copied into): every byte arrives. */
static void test_chan_large_and_odd_elements(void **state)
{
    bad_reset();
    const size_t sizes[] = {1, 13, 1000, 4103};
    const size_t bcaps[] = {0, 1, 3, 16};
    for (size_t s = 0; s < 4; s++)
        for (size_t k = 0; k < 4; k++) {
            size_t sz = sizes[s];
            uint8_t *b = malloc(sz);
            assert_non_null(b);
            big.sz = sz;
            big.n = H_SCALE(300L);
            big.c = gmp_chan_make(sz, bcaps[k]);
            assert_non_null(big.c);

            atomic_store(&big.done, 0);
            assert_int_equal(gmp_go(big_producer, NULL), 0);
            for (long i = 0; i < big.n; i++) {
                memset(b, 0xee, sz);
                assert_int_equal(gmp_chan_recv(big.c, b), 0);
                if (!pat_ok(b, sz, i))
                    fail_msg("size %zu cap %zu: element %ld corrupted", sz,
                             bcaps[k], i);
            }
            assert_int_equal(h_wait(&big.done, 1), 0);

            atomic_store(&big.done, 0);
            assert_int_equal(gmp_go(big_consumer, NULL), 0);
            for (long i = 0; i < big.n; i++) {
                pat_fill(b, sz, i);
                assert_int_equal(gmp_chan_send(big.c, b), 0);
            }
            assert_int_equal(gmp_chan_close(big.c), 0);
            assert_int_equal(h_wait(&big.done, 1), 0);
            assert_int_equal(h_wait_quiet(), 0);
            gmp_chan_free(big.c);
            free(b);
        }
    ASSERT_NO_BAD();
}

/* ---- A send waits for room, a receive for a value ----------------------- */

/*
 * The sender counts "attempting i" before send i and "sent i" after it
 * returns. The only receiver (another goroutine) has taken j values when
 * it looks, so at most j + cap sends can have completed; once the sender
 * attempts send j + cap + 1, exactly j + cap have. The sender runs with
 * preemption off, so at procs 1, where the observer runs only while the
 * sender is stopped, the sender stopped in the send: a send that completed
 * without room or receiver is caught every time. Symmetrically for a
 * receiver and a sending observer.
 */
static struct {
    gmp_chan_t *c;
    size_t cap;
    long n;
    _Atomic int64_t attempting, completed, done;
} bl;

static void bl_sender(void *arg)
{
    (void)arg;
    gmp_preempt_disable();
    for (long i = 0; i < bl.n; i++) {
        atomic_store(&bl.attempting, i + 1);
        G_CHECK(gmp_chan_send(bl.c, &i) == 0);
        atomic_store(&bl.completed, i + 1);
    }
    gmp_preempt_enable();
    atomic_fetch_add(&bl.done, 1);
}

static void bl_recv_observer(void *arg)
{
    (void)arg;
    for (long j = 0; j < bl.n; j++) {
        long want = j + (long)bl.cap + 1;   /* attempts that can start */
        if (want <= bl.n) {
            while (atomic_load(&bl.attempting) < want)
                gmp_yield();
            G_CHECK(atomic_load(&bl.completed) == want - 1);
            G_CHECK(gmp_chan_len(bl.c) == bl.cap);
        }
        long v = -1;
        G_CHECK(gmp_chan_recv(bl.c, &v) == 0);
        G_CHECK(v == j);
    }
    atomic_fetch_add(&bl.done, 1);
}

static void bl_receiver(void *arg)
{
    (void)arg;
    gmp_preempt_disable();
    for (long i = 0; i < bl.n; i++) {
        long v = -1;
        atomic_store(&bl.attempting, i + 1);
        G_CHECK(gmp_chan_recv(bl.c, &v) == 0);
        G_CHECK(v == i);
        atomic_store(&bl.completed, i + 1);
    }
    gmp_preempt_enable();
    atomic_fetch_add(&bl.done, 1);
}

static void bl_send_observer(void *arg)
{
    (void)arg;
    for (long j = 0; j < bl.n; j++) {
        /* j values sent so far: receive j + 1 can start, cannot finish. */
        while (atomic_load(&bl.attempting) < j + 1)
            gmp_yield();
        G_CHECK(atomic_load(&bl.completed) == j);
        G_CHECK(gmp_chan_len(bl.c) == 0);
        G_CHECK(gmp_chan_send(bl.c, &j) == 0);
    }
    atomic_fetch_add(&bl.done, 1);
}

static void test_chan_blocks_until_partner(void **state)
{
    bad_reset();
    const size_t bcaps[] = {0, 1, 2, 5};
    for (int round = 0; round < 10; round++)
        for (size_t k = 0; k < 4; k++) {
            bl.cap = bcaps[k];
            bl.n = 40;
            bl.c = gmp_chan_make(sizeof(long), bl.cap);
            assert_non_null(bl.c);

            atomic_store(&bl.attempting, 0);
            atomic_store(&bl.completed, 0);
            atomic_store(&bl.done, 0);
            assert_int_equal(gmp_go(bl_sender, NULL), 0);
            assert_int_equal(gmp_go(bl_recv_observer, NULL), 0);
            assert_int_equal(h_wait(&bl.done, 2), 0);
            assert_int_equal(atomic_load(&bl.completed), bl.n);

            atomic_store(&bl.attempting, 0);
            atomic_store(&bl.completed, 0);
            atomic_store(&bl.done, 0);
            assert_int_equal(gmp_go(bl_receiver, NULL), 0);
            assert_int_equal(gmp_go(bl_send_observer, NULL), 0);
            assert_int_equal(h_wait(&bl.done, 2), 0);
            assert_int_equal(atomic_load(&bl.completed), bl.n);

            assert_int_equal(h_wait_quiet(), 0);
            gmp_chan_free(bl.c);
            ASSERT_NO_BAD();
        }
}

/* ---- Close semantics, one thread ---------------------------------------- */

static void test_chan_close_semantics(void **state)
{
    for (int k = 0; k < N_CAPS; k++) {
        size_t cap = caps[k], fill = cap < 3 ? cap : 3;
        for (int full = 0; full < 2; full++) {
            if (full)
                fill = cap;
            gmp_chan_t *c = gmp_chan_make(sizeof(long), cap);
            assert_non_null(c);
            for (long i = 0; i < (long)fill; i++)
                assert_int_equal(gmp_chan_trysend(c, &i), 0);
            assert_int_equal(gmp_chan_close(c), 0);
            assert_int_equal(gmp_chan_close(c), GMP_ECLOSED);
            long v = 77;
            /* Closed beats full: GMP_ECLOSED, not GMP_EAGAIN. */
            assert_int_equal(gmp_chan_send(c, &v), GMP_ECLOSED);
            assert_int_equal(gmp_chan_trysend(c, &v), GMP_ECLOSED);
            assert_int_equal(gmp_chan_len(c), fill);
            assert_int_equal(gmp_chan_cap(c), cap);
            /* Buffered values first, in order, by either call. */
            for (long i = 0; i < (long)fill; i++) {
                v = -1;
                if (i & 1)
                    assert_int_equal(gmp_chan_tryrecv(c, &v), 0);
                else
                    assert_int_equal(gmp_chan_recv(c, &v), 0);
                assert_int_equal(v, i);
                assert_int_equal(gmp_chan_len(c), fill - 1 - (size_t)i);
            }
            /* Then closed and drained, the element zeroed, for ever. */
            for (int rep = 0; rep < 3; rep++) {
                v = -1;
                assert_int_equal(gmp_chan_recv(c, &v), GMP_ECLOSED);
                assert_int_equal(v, 0);
                v = -1;
                assert_int_equal(gmp_chan_tryrecv(c, &v), GMP_ECLOSED);
                assert_int_equal(v, 0);
                assert_int_equal(gmp_chan_recv(c, NULL), GMP_ECLOSED);
            }
            assert_int_equal(gmp_chan_close(c), GMP_ECLOSED);
            assert_int_equal(gmp_chan_len(c), 0);
            gmp_chan_free(c);
        }
    }
    /* A large element is zeroed whole. */
    uint8_t b[1000];
    gmp_chan_t *c = gmp_chan_make(sizeof b, 1);
    assert_non_null(c);
    assert_int_equal(gmp_chan_close(c), 0);
    memset(b, 0xab, sizeof b);
    assert_int_equal(gmp_chan_recv(c, b), GMP_ECLOSED);
    for (size_t j = 0; j < sizeof b; j++)
        assert_int_equal(b[j], 0);
    memset(b, 0xab, sizeof b);
    assert_int_equal(gmp_chan_tryrecv(c, b), GMP_ECLOSED);
    for (size_t j = 0; j < sizeof b; j++)
        assert_int_equal(b[j], 0);
    gmp_chan_free(c);
}

/* ---- Close wakes every waiter ------------------------------------------- */

#define CW_G 20                      /* goroutine waiters */
#define CW_T 2                       /* plain-thread waiters */

static struct {
    gmp_chan_t *c;
    _Atomic int64_t attempting, done, closed_ok, zeroed;
    _Atomic int64_t t_attempting;
    long base;
} cw;

static void cw_receiver(void *arg)
{
    bool thread = arg != NULL;
    long v = -1;
    gmp_preempt_disable();
    atomic_fetch_add(thread ? &cw.t_attempting : &cw.attempting, 1);
    int r = gmp_chan_recv(cw.c, &v);
    gmp_preempt_enable();
    if (r == GMP_ECLOSED)
        atomic_fetch_add(&cw.closed_ok, 1);
    if (v == 0)
        atomic_fetch_add(&cw.zeroed, 1);
    atomic_fetch_add(&cw.done, 1);
}

static void cw_sender(void *arg)
{
    bool thread = arg != NULL;
    long v = 1000;
    gmp_preempt_disable();
    atomic_fetch_add(thread ? &cw.t_attempting : &cw.attempting, 1);
    int r = gmp_chan_send(cw.c, &v);
    gmp_preempt_enable();
    if (r == GMP_ECLOSED)
        atomic_fetch_add(&cw.closed_ok, 1);
    atomic_fetch_add(&cw.done, 1);
}

/* Closes once every goroutine waiter is in its call (at procs 1: parked)
 * and both threads are about to call. */
static void cw_closer(void *arg)
{
    (void)arg;
    while (atomic_load(&cw.attempting) < CW_G ||
           atomic_load(&cw.t_attempting) < CW_T)
        gmp_yield();
    G_CHECK(gmp_chan_close(cw.c) == 0);
}

static void run_close_wakes(size_t cap, size_t prefill, bool senders)
{
    struct th ts[CW_T];
    cw.c = gmp_chan_make(sizeof(long), cap);
    assert_non_null(cw.c);
    for (long i = 0; i < (long)prefill; i++) {
        long v = 500 + i;
        assert_int_equal(gmp_chan_trysend(cw.c, &v), 0);
    }
    atomic_store(&cw.attempting, 0);
    atomic_store(&cw.t_attempting, 0);
    atomic_store(&cw.done, 0);
    atomic_store(&cw.closed_ok, 0);
    atomic_store(&cw.zeroed, 0);
    void (*fn)(void *) = senders ? cw_sender : cw_receiver;
    for (int i = 0; i < CW_G; i++)
        assert_int_equal(gmp_go(fn, NULL), 0);
    for (int i = 0; i < CW_T; i++)
        th_start(&ts[i], fn, (void *)1);
    assert_int_equal(gmp_go(cw_closer, NULL), 0);
    assert_int_equal(h_wait(&cw.done, CW_G + CW_T), 0);
    for (int i = 0; i < CW_T; i++)
        th_join(&ts[i]);
    assert_int_equal(atomic_load(&cw.closed_ok), CW_G + CW_T);
    if (!senders)
        assert_int_equal(atomic_load(&cw.zeroed), CW_G + CW_T);
    /* What was buffered before the close is still there, and nothing a
     * blocked sender offered got in. */
    assert_int_equal(gmp_chan_len(cw.c), prefill);
    for (long i = 0; i < (long)prefill; i++) {
        long v = -1;
        assert_int_equal(gmp_chan_recv(cw.c, &v), 0);
        assert_int_equal(v, 500 + i);
    }
    long v = -1;
    assert_int_equal(gmp_chan_recv(cw.c, &v), GMP_ECLOSED);
    assert_int_equal(v, 0);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(cw.c);
}

static void test_chan_close_wakes_blocked_receivers(void **state)
{
    bad_reset();
    for (int round = 0; round < 20; round++) {
        run_close_wakes(0, 0, false);
        run_close_wakes(3, 0, false);
    }
    ASSERT_NO_BAD();
}

static void test_chan_close_wakes_blocked_senders(void **state)
{
    bad_reset();
    for (int round = 0; round < 20; round++) {
        run_close_wakes(0, 0, true);
        run_close_wakes(2, 2, true);        /* full: 2 buffered survive */
    }
    ASSERT_NO_BAD();
}

/* ---- Close racing senders and receivers --------------------------------- */

#define CR_S 3                       /* senders (the last a plain thread) */
#define CR_R 3                       /* receivers */
#define CR_M 64                      /* values per sender */
#define CR_V (CR_S * CR_M)

static struct {
    gmp_chan_t *c;
    _Atomic uint8_t sent[CR_V];
    _Atomic uint32_t recvd[CR_V];
    _Atomic int64_t received, rdone, done, close_ok, close_closed;
    int64_t close_after;
} cr;

static void cr_sender(void *arg)
{
    long s = (long)(intptr_t)arg;
    for (long k = 0; k < CR_M; k++) {
        long v = s * CR_M + k;
        int r = gmp_chan_send(cr.c, &v);
        if (r == 0) {
            atomic_store(&cr.sent[v], 1);
        } else {
            G_CHECK(r == GMP_ECLOSED);
            /* Closed for good: every later send fails too. */
            G_CHECK(gmp_chan_send(cr.c, &v) == GMP_ECLOSED);
            G_CHECK(gmp_chan_trysend(cr.c, &v) == GMP_ECLOSED);
            break;
        }
    }
    atomic_fetch_add(&cr.done, 1);
}

static void cr_receiver(void *arg)
{
    (void)arg;
    for (;;) {
        long v = -1;
        int r = gmp_chan_recv(cr.c, &v);
        if (r == GMP_ECLOSED) {
            G_CHECK(v == 0);
            break;
        }
        G_CHECK(r == 0);
        if (r == 0 && v >= 0 && v < CR_V)
            atomic_fetch_add(&cr.recvd[v], 1);
        else
            G_CHECK(!"value out of range");
        atomic_fetch_add(&cr.received, 1);
    }
    atomic_fetch_add(&cr.rdone, 1);
    atomic_fetch_add(&cr.done, 1);
}

static void cr_close(void)
{
    int r = gmp_chan_close(cr.c);
    if (r == 0)
        atomic_fetch_add(&cr.close_ok, 1);
    else if (r == GMP_ECLOSED)
        atomic_fetch_add(&cr.close_closed, 1);
}

static void cr_closer(void *arg)
{
    (void)arg;
    /* Until enough went through, or the test thread closed first and the
     * receivers are gone. */
    while (atomic_load(&cr.received) < cr.close_after &&
           atomic_load(&cr.rdone) < CR_R)
        gmp_yield();
    cr_close();
    atomic_fetch_add(&cr.done, 1);
}

/*
 * Rounds of senders, receivers and two closers (a goroutine that closes
 * after a random number of values went through, and the test thread at a
 * random moment) at capacities 0, 1 and 4. Conservation: each value whose
 * send returned 0 is received exactly once; no other value is received;
 * exactly one close succeeds; everyone returns.
 */
static void test_chan_close_races_send_and_recv(void **state)
{
    bad_reset();
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    long rounds = H_SCALE(1500L);
    const size_t rcaps[] = {0, 1, 4};
    for (long round = 0; round < rounds; round++) {
        struct th t;
        cr.c = gmp_chan_make(sizeof(long), rcaps[round % 3]);
        assert_non_null(cr.c);
        for (int v = 0; v < CR_V; v++) {
            atomic_store(&cr.sent[v], 0);
            atomic_store(&cr.recvd[v], 0);
        }
        atomic_store(&cr.received, 0);
        atomic_store(&cr.rdone, 0);
        atomic_store(&cr.done, 0);
        atomic_store(&cr.close_ok, 0);
        atomic_store(&cr.close_closed, 0);
        cr.close_after = (int64_t)(xorshift(&x) % (CR_V + 1));
        bool thread_sender = (round & 1) == 0;
        for (int r = 0; r < CR_R; r++)
            assert_int_equal(gmp_go(cr_receiver, NULL), 0);
        for (long s = 0; s < CR_S - 1; s++)
            assert_int_equal(gmp_go(cr_sender, (void *)(intptr_t)s), 0);
        if (thread_sender)
            th_start(&t, cr_sender, (void *)(intptr_t)(CR_S - 1));
        else
            assert_int_equal(gmp_go(cr_sender, (void *)(intptr_t)(CR_S - 1)),
                             0);
        assert_int_equal(gmp_go(cr_closer, NULL), 0);
        for (unsigned k = (unsigned)(xorshift(&x) % 2000); k > 0; k--)
            __asm__ __volatile__("" ::: "memory");
        cr_close();
        assert_int_equal(h_wait(&cr.done, CR_S + CR_R + 1), 0);
        if (thread_sender)
            th_join(&t);
        assert_int_equal(atomic_load(&cr.close_ok), 1);
        assert_int_equal(atomic_load(&cr.close_closed), 1);
        int64_t nsent = 0;
        for (int v = 0; v < CR_V; v++) {
            uint32_t got = atomic_load(&cr.recvd[v]);
            uint8_t s = atomic_load(&cr.sent[v]);
            if (got != s)
                fail_msg("round %ld cap %zu: value %d sent %u received %u "
                         "times", round, rcaps[round % 3], v, s, got);
            nsent += s;
        }
        assert_int_equal(atomic_load(&cr.received), nsent);
        assert_int_equal(gmp_chan_len(cr.c), 0);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(cr.c);
        ASSERT_NO_BAD();
    }
}

/* ---- First come, first served ------------------------------------------- */

#define FIFO_N 16

static struct {
    gmp_chan_t *c;
    bool senders;
    _Atomic int64_t started, queued, done;
    long got[FIFO_N];
    _Atomic int32_t tid[FIFO_N];
} fifo;

static void fifo_waiter(void *arg)
{
    long i = (long)(intptr_t)arg;
    gmp_preempt_disable();
    atomic_fetch_add(&fifo.started, 1);
    if (fifo.senders) {
        G_CHECK(gmp_chan_send(fifo.c, &i) == 0);
    } else {
        long v = -1;
        G_CHECK(gmp_chan_recv(fifo.c, &v) == 0);
        fifo.got[i] = v;
    }
    gmp_preempt_enable();
    atomic_fetch_add(&fifo.done, 1);
}

/* At procs 1: the spawner runs only while the waiter it just started has
 * stopped, and a waiter with preemption off stops only by blocking. So
 * waiter i is queued before waiter i + 1 starts. */
static void fifo_spawner(void *arg)
{
    (void)arg;
    for (long i = 0; i < FIFO_N; i++) {
        G_CHECK(gmp_go(fifo_waiter, (void *)(intptr_t)i) == 0);
        while (atomic_load(&fifo.started) < i + 1)
            gmp_yield();
    }
    atomic_store(&fifo.queued, 1);
}

static void fifo_reset(gmp_chan_t *c, bool senders)
{
    fifo.c = c;
    fifo.senders = senders;
    atomic_store(&fifo.started, 0);
    atomic_store(&fifo.queued, 0);
    atomic_store(&fifo.done, 0);
    for (int i = 0; i < FIFO_N; i++) {
        fifo.got[i] = -1;
        atomic_store(&fifo.tid[i], 0);
    }
}

/* Blocked senders (unbuffered, and behind a full buffer) deliver in the
 * order they blocked; a receive from a full channel with blocked senders
 * moves the first sender's value into the buffer at once (Go). */
static void test_chan_fifo_blocked_senders_procs1(void **state)
{
    bad_reset();
    for (int round = 0; round < 20; round++) {
        size_t cap = (round & 1) ? 2 : 0;
        gmp_chan_t *c = gmp_chan_make(sizeof(long), cap);
        assert_non_null(c);
        for (long i = 0; i < (long)cap; i++) {
            long v = 100 + i;
            assert_int_equal(gmp_chan_trysend(c, &v), 0);
        }
        fifo_reset(c, true);
        assert_int_equal(gmp_go(fifo_spawner, NULL), 0);
        assert_int_equal(h_wait(&fifo.queued, 1), 0);
        assert_int_equal(gmp_chan_len(c), cap);
        for (long i = 0; i < (long)cap; i++) {
            long v = -1;
            assert_int_equal(gmp_chan_recv(c, &v), 0);
            assert_int_equal(v, 100 + i);
            assert_int_equal(gmp_chan_len(c), cap);
        }
        for (long i = 0; i < FIFO_N; i++) {
            long v = -1;
            assert_int_equal(gmp_chan_recv(c, &v), 0);
            if (v != i)
                fail_msg("cap %zu: receive %ld got sender %ld's value", cap,
                         i, v);
        }
        assert_int_equal(h_wait(&fifo.done, FIFO_N), 0);
        assert_int_equal(gmp_chan_len(c), 0);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(c);
    }
    ASSERT_NO_BAD();
}

static void test_chan_fifo_blocked_receivers_procs1(void **state)
{
    bad_reset();
    for (int round = 0; round < 20; round++) {
        size_t cap = (round & 1) ? 4 : 0;
        gmp_chan_t *c = gmp_chan_make(sizeof(long), cap);
        assert_non_null(c);
        fifo_reset(c, false);
        assert_int_equal(gmp_go(fifo_spawner, NULL), 0);
        assert_int_equal(h_wait(&fifo.queued, 1), 0);
        for (long i = 0; i < FIFO_N; i++)
            assert_int_equal(gmp_chan_send(c, &i), 0);
        assert_int_equal(h_wait(&fifo.done, FIFO_N), 0);
        for (long i = 0; i < FIFO_N; i++)
            if (fifo.got[i] != i)
                fail_msg("cap %zu: receiver %ld got %ld", cap, i,
                         fifo.got[i]);
        assert_int_equal(gmp_chan_len(c), 0);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(c);
    }
    ASSERT_NO_BAD();
}

/* Plain threads: thread i is known to be queued once it has announced
 * itself and sleeps (state 'S' in /proc): nobody else touches the channel
 * meanwhile, so the only sleep it can be in is the channel wait. */
#define FIFO_T 6

static void fifo_thread(void *arg)
{
    long i = (long)(intptr_t)arg;
    atomic_store(&fifo.tid[i], h_tid());
    atomic_fetch_add(&fifo.started, 1);
    if (fifo.senders) {
        G_CHECK(gmp_chan_send(fifo.c, &i) == 0);
    } else {
        long v = -1;
        G_CHECK(gmp_chan_recv(fifo.c, &v) == 0);
        fifo.got[i] = v;
    }
    atomic_fetch_add(&fifo.done, 1);
}

static bool fifo_thread_asleep(void *arg)
{
    long i = (long)(intptr_t)arg;
    int32_t tid = atomic_load(&fifo.tid[i]);
    return tid != 0 && atomic_load(&fifo.started) == i + 1 &&
           h_thread_state(tid) == 'S';
}

static void run_fifo_threads(size_t cap, bool senders)
{
    struct th ts[FIFO_T];
    gmp_chan_t *c = gmp_chan_make(sizeof(long), cap);
    assert_non_null(c);
    fifo_reset(c, senders);
    if (senders)
        for (long i = 0; i < (long)cap; i++) {
            long v = 100 + i;
            assert_int_equal(gmp_chan_trysend(c, &v), 0);
        }
    for (long i = 0; i < FIFO_T; i++) {
        th_start(&ts[i], fifo_thread, (void *)(intptr_t)i);
        assert_int_equal(h_wait_until(fifo_thread_asleep, (void *)(intptr_t)i,
                                      "a plain thread asleep in the channel"),
                         0);
    }
    if (senders) {
        for (long i = 0; i < (long)cap; i++) {
            long v = -1;
            assert_int_equal(gmp_chan_recv(c, &v), 0);
            assert_int_equal(v, 100 + i);
        }
        for (long i = 0; i < FIFO_T; i++) {
            long v = -1;
            assert_int_equal(gmp_chan_recv(c, &v), 0);
            if (v != i)
                fail_msg("cap %zu: receive %ld got thread %ld's value", cap,
                         i, v);
        }
    } else {
        for (long i = 0; i < FIFO_T; i++)
            assert_int_equal(gmp_chan_send(c, &i), 0);
    }
    assert_int_equal(h_wait(&fifo.done, FIFO_T), 0);
    for (int i = 0; i < FIFO_T; i++)
        th_join(&ts[i]);
    if (!senders)
        for (long i = 0; i < FIFO_T; i++)
            if (fifo.got[i] != i)
                fail_msg("cap %zu: thread %ld got %ld", cap, i, fifo.got[i]);
    assert_int_equal(gmp_chan_len(c), 0);
    gmp_chan_free(c);
}

static void test_chan_fifo_plain_threads(void **state)
{
    bad_reset();
    for (int round = 0; round < 3; round++) {
        run_fifo_threads(0, true);
        run_fifo_threads(2, true);
        run_fifo_threads(0, false);
        run_fifo_threads(3, false);
    }
    ASSERT_NO_BAD();
}

/* ---- Many producers, many consumers ------------------------------------- */

#define MPC_P 8
#define MPC_C 8

static struct {
    gmp_chan_t *c;
    size_t cap;
    long per;
    _Atomic uint32_t *seen;
    _Atomic int64_t prod_done, cons_done, count, sum;
} mpc;

static void mpc_producer(void *arg)
{
    long p = (long)(intptr_t)arg;
    for (long k = 0; k < mpc.per; k++) {
        long v = p * mpc.per + k;
        G_CHECK(gmp_chan_send(mpc.c, &v) == 0);
    }
    if (atomic_fetch_add(&mpc.prod_done, 1) == MPC_P - 1)
        G_CHECK(gmp_chan_close(mpc.c) == 0);    /* the last one closes */
}

static void mpc_consumer(void *arg)
{
    (void)arg;
    long n = (long)MPC_P * mpc.per;
    for (;;) {
        long v = -1;
        int r = gmp_chan_recv(mpc.c, &v);
        if (r == GMP_ECLOSED) {
            G_CHECK(v == 0);
            break;
        }
        G_CHECK(r == 0);
        G_CHECK(v >= 0 && v < n);
        if (v >= 0 && v < n)
            atomic_fetch_add_explicit(&mpc.seen[v], 1, memory_order_relaxed);
        atomic_fetch_add(&mpc.count, 1);
        atomic_fetch_add(&mpc.sum, v);
        G_CHECK(gmp_chan_len(mpc.c) <= mpc.cap);
    }
    atomic_fetch_add(&mpc.cons_done, 1);
}

/* Go's TestMultiConsumer and the 4-goroutine part of TestChan: 8
 * producers, 8 consumers, capacities 0, 1, 8 and 64: every value
 * delivered exactly once. */
static void test_chan_many_producers_consumers(void **state)
{
    bad_reset();
    const size_t mcaps[] = {0, 1, 8, 64};
    mpc.per = H_SCALE(5000L);
    long n = (long)MPC_P * mpc.per;
    mpc.seen = calloc((size_t)n, sizeof *mpc.seen);
    assert_non_null(mpc.seen);
    for (int k = 0; k < 4; k++) {
        mpc.cap = mcaps[k];
        mpc.c = gmp_chan_make(sizeof(long), mcaps[k]);
        assert_non_null(mpc.c);
        for (long v = 0; v < n; v++)
            atomic_store(&mpc.seen[v], 0);
        atomic_store(&mpc.prod_done, 0);
        atomic_store(&mpc.cons_done, 0);
        atomic_store(&mpc.count, 0);
        atomic_store(&mpc.sum, 0);
        for (long i = 0; i < MPC_P; i++) {
            assert_int_equal(gmp_go(mpc_consumer, NULL), 0);
            assert_int_equal(gmp_go(mpc_producer, (void *)(intptr_t)i), 0);
        }
        assert_int_equal(h_wait(&mpc.cons_done, MPC_C), 0);
        assert_int_equal(h_wait(&mpc.prod_done, MPC_P), 0);
        assert_int_equal(h_wait_quiet(), 0);
        assert_int_equal(atomic_load(&mpc.count), n);
        assert_int_equal(atomic_load(&mpc.sum), (int64_t)n * (n - 1) / 2);
        for (long v = 0; v < n; v++)
            if (atomic_load(&mpc.seen[v]) != 1)
                fail_msg("cap %zu: value %ld seen %u times", mcaps[k], v,
                         atomic_load(&mpc.seen[v]));
        gmp_chan_free(mpc.c);
        ASSERT_NO_BAD();
    }
    free(mpc.seen);
}

/* ---- A daisy chain ------------------------------------------------------ */

#define CHAIN_MAX 2000
#define CHAIN     H_SCALE(CHAIN_MAX)  /* all alive at once: <= H_LIVE */
#define CHAIN_ROUNDS 10

static gmp_chan_t *chain[CHAIN_MAX + 1];
static _Atomic int64_t chain_done;

static void chain_link(void *arg)
{
    long i = (long)(intptr_t)arg;
    for (int r = 0; r < CHAIN_ROUNDS; r++) {
        long v = -1;
        G_CHECK(gmp_chan_recv(chain[i], &v) == 0);
        v++;
        G_CHECK(gmp_chan_send(chain[i + 1], &v) == 0);
    }
    atomic_fetch_add(&chain_done, 1);
}

/* Go's "whispers": 2000 goroutines in a line of unbuffered channels, each
 * adds one; the test thread feeds one end and reads the other. */
static void test_chan_daisy_chain(void **state)
{
    bad_reset();
    atomic_store(&chain_done, 0);
    for (int i = 0; i <= CHAIN; i++) {
        chain[i] = gmp_chan_make(sizeof(long), 0);
        assert_non_null(chain[i]);
    }
    for (long i = 0; i < CHAIN; i++)
        assert_int_equal(gmp_go(chain_link, (void *)(intptr_t)i), 0);
    for (long r = 0; r < CHAIN_ROUNDS; r++) {
        long v = r * 1000000;
        assert_int_equal(gmp_chan_send(chain[0], &v), 0);
        v = -1;
        assert_int_equal(gmp_chan_recv(chain[CHAIN], &v), 0);
        assert_int_equal(v, r * 1000000 + CHAIN);
    }
    assert_int_equal(h_wait(&chain_done, CHAIN), 0);
    assert_int_equal(h_wait_quiet(), 0);
    for (int i = 0; i <= CHAIN; i++)
        gmp_chan_free(chain[i]);
    ASSERT_NO_BAD();
}

/* ---- Go's TestNonblockRecvRace ------------------------------------------ */

static struct {
    gmp_chan_t *c;
    _Atomic int64_t done, got_value, got_closed, not_ready;
} nbr;

static void nbr_fn(void *arg)
{
    (void)arg;
    long v = -1;
    int r = gmp_chan_tryrecv(nbr.c, &v);
    if (r == 0 && v == 1)
        atomic_fetch_add(&nbr.got_value, 1);
    else if (r == GMP_ECLOSED && v == 0)
        atomic_fetch_add(&nbr.got_closed, 1);
    else
        atomic_fetch_add(&nbr.not_ready, 1);
    atomic_fetch_add(&nbr.done, 1);
}

/* A buffered value is there before, during and after the close: a
 * non-blocking receive racing the close never reports "not ready", and
 * the value goes to exactly one of the two receivers. */
static void test_chan_nonblock_recv_race(void **state)
{
    long rounds = H_SCALE(20000L), main_got = 0;
    memset(&nbr, 0, sizeof nbr);
    for (long i = 0; i < rounds; i++) {
        nbr.c = gmp_chan_make(sizeof(long), 1);
        assert_non_null(nbr.c);
        long v = 1;
        assert_int_equal(gmp_chan_send(nbr.c, &v), 0);
        assert_int_equal(gmp_go(nbr_fn, NULL), 0);
        assert_int_equal(gmp_chan_close(nbr.c), 0);
        v = -1;
        int r = gmp_chan_recv(nbr.c, &v);
        if (r == 0) {
            assert_int_equal(v, 1);
            main_got++;
        } else {
            assert_int_equal(r, GMP_ECLOSED);
            assert_int_equal(v, 0);
        }
        assert_int_equal(h_wait(&nbr.done, i + 1), 0);
        gmp_chan_free(nbr.c);
    }
    assert_int_equal(atomic_load(&nbr.not_ready), 0);
    assert_int_equal(atomic_load(&nbr.got_value) + main_got, rounds);
    assert_int_equal(atomic_load(&nbr.got_closed), main_got);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Plain threads and goroutines on one channel ------------------------ */

/* The test thread ping-pongs with a goroutine over two unbuffered
 * channels; the goroutine stops when ping is closed. */
static struct {
    gmp_chan_t *ping, *pong;
    _Atomic int64_t done, served;
} pp;

static void pp_server(void *arg)
{
    (void)arg;
    for (;;) {
        long v = -1;
        int r = gmp_chan_recv(pp.ping, &v);
        if (r != 0) {
            G_CHECK(r == GMP_ECLOSED && v == 0);
            break;
        }
        v++;
        G_CHECK(gmp_chan_send(pp.pong, &v) == 0);
        atomic_fetch_add(&pp.served, 1);
    }
    atomic_fetch_add(&pp.done, 1);
}

static void test_chan_test_thread_ping_pong(void **state)
{
    bad_reset();
    long n = H_SCALE(20000L);
    pp.ping = gmp_chan_make(sizeof(long), 0);
    pp.pong = gmp_chan_make(sizeof(long), 0);
    assert_non_null(pp.ping);
    assert_non_null(pp.pong);
    atomic_store(&pp.done, 0);
    atomic_store(&pp.served, 0);
    assert_int_equal(gmp_go(pp_server, NULL), 0);
    for (long i = 0; i < n; i++) {
        long v = i * 3;
        assert_int_equal(gmp_chan_send(pp.ping, &v), 0);
        v = -1;
        assert_int_equal(gmp_chan_recv(pp.pong, &v), 0);
        assert_int_equal(v, i * 3 + 1);
    }
    assert_int_equal(gmp_chan_close(pp.ping), 0);
    assert_int_equal(h_wait(&pp.done, 1), 0);
    assert_int_equal(atomic_load(&pp.served), n);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(pp.ping);
    gmp_chan_free(pp.pong);
    ASSERT_NO_BAD();
}

/*
 * A pipeline: producers -> a -> forwarders -> b -> consumers, with each
 * stage either plain threads or goroutines; every value arrives exactly
 * once. The test thread closes a once the producers are done, and b once
 * the forwarders are.
 */
#define PL_N 2                       /* workers per stage */

static struct {
    gmp_chan_t *a, *b;
    long per;
    _Atomic uint32_t *seen;
    _Atomic int64_t prod_done, fwd_done, cons_done, count;
} pl;

static void pl_producer(void *arg)
{
    long p = (long)(intptr_t)arg;
    for (long k = 0; k < pl.per; k++) {
        long v = p * pl.per + k;
        G_CHECK(gmp_chan_send(pl.a, &v) == 0);
    }
    atomic_fetch_add(&pl.prod_done, 1);
}

static void pl_forwarder(void *arg)
{
    (void)arg;
    long v;
    while (gmp_chan_recv(pl.a, &v) == 0)
        G_CHECK(gmp_chan_send(pl.b, &v) == 0);
    atomic_fetch_add(&pl.fwd_done, 1);
}

static void pl_consumer(void *arg)
{
    (void)arg;
    long n = PL_N * pl.per, v;
    while (gmp_chan_recv(pl.b, &v) == 0) {
        G_CHECK(v >= 0 && v < n);
        if (v >= 0 && v < n)
            atomic_fetch_add(&pl.seen[v], 1);
        atomic_fetch_add(&pl.count, 1);
    }
    atomic_fetch_add(&pl.cons_done, 1);
}

static void pl_spawn(bool thread, struct th *t, void (*fn)(void *),
                     long i)
{
    if (thread)
        th_start(t, fn, (void *)(intptr_t)i);
    else
        assert_int_equal(gmp_go(fn, (void *)(intptr_t)i), 0);
}

static void run_pipeline(bool tp, bool tf, bool tc, size_t capa, size_t capb)
{
    struct th ts[3][PL_N];
    long n = PL_N * pl.per;
    pl.a = gmp_chan_make(sizeof(long), capa);
    pl.b = gmp_chan_make(sizeof(long), capb);
    assert_non_null(pl.a);
    assert_non_null(pl.b);
    for (long v = 0; v < n; v++)
        atomic_store(&pl.seen[v], 0);
    atomic_store(&pl.prod_done, 0);
    atomic_store(&pl.fwd_done, 0);
    atomic_store(&pl.cons_done, 0);
    atomic_store(&pl.count, 0);
    for (long i = 0; i < PL_N; i++) {
        pl_spawn(tc, &ts[2][i], pl_consumer, i);
        pl_spawn(tf, &ts[1][i], pl_forwarder, i);
        pl_spawn(tp, &ts[0][i], pl_producer, i);
    }
    assert_int_equal(h_wait(&pl.prod_done, PL_N), 0);
    assert_int_equal(gmp_chan_close(pl.a), 0);
    assert_int_equal(h_wait(&pl.fwd_done, PL_N), 0);
    assert_int_equal(gmp_chan_close(pl.b), 0);
    assert_int_equal(h_wait(&pl.cons_done, PL_N), 0);
    for (int s = 0; s < 3; s++)
        if ((s == 0 && tp) || (s == 1 && tf) || (s == 2 && tc))
            for (int i = 0; i < PL_N; i++)
                th_join(&ts[s][i]);
    assert_int_equal(atomic_load(&pl.count), n);
    for (long v = 0; v < n; v++)
        if (atomic_load(&pl.seen[v]) != 1)
            fail_msg("value %ld seen %u times", v, atomic_load(&pl.seen[v]));
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(pl.a);
    gmp_chan_free(pl.b);
}

static void test_chan_foreign_threads_and_goroutines(void **state)
{
    bad_reset();
    pl.per = H_SCALE(4000L);
    pl.seen = calloc((size_t)(PL_N * pl.per), sizeof *pl.seen);
    assert_non_null(pl.seen);
    run_pipeline(true, false, true, 0, 0);      /* threads -> Gs -> threads */
    run_pipeline(false, true, false, 0, 0);     /* Gs -> threads -> Gs */
    run_pipeline(true, false, true, 1, 3);
    run_pipeline(false, true, false, 4, 1);
    run_pipeline(true, true, false, 0, 2);
    free(pl.seen);
    ASSERT_NO_BAD();
}

/* ---- Waiting inside a syscall bracket ------------------------------------- */

/*
 * Inside gmp_syscall_enter/exit a goroutine counts as a plain thread: a
 * channel wait sleeps its thread, and the runtime hands its P on, so the
 * goroutines it waits for still run (at procs 1 too). Half the bracketed
 * goroutines receive from the test thread, half exchange with ordinary
 * goroutines; the results travel back outside the bracket.
 */
#define SB_N 4

static struct {
    gmp_chan_t *in, *mid, *out;
    long rounds;
    _Atomic int64_t done;
} sb;

static void sb_bracketed(void *arg)
{
    long id = (long)(intptr_t)arg;
    for (long r = 0; r < sb.rounds; r++) {
        long v = -1;
        gmp_syscall_enter();
        int rc = id & 1 ? gmp_chan_recv(sb.mid, &v) : gmp_chan_recv(sb.in, &v);
        gmp_syscall_exit();
        G_CHECK(rc == 0);
        v = v * 2 + 1;
        G_CHECK(gmp_chan_send(sb.out, &v) == 0);
    }
    atomic_fetch_add(&sb.done, 1);
}

static void sb_feeder(void *arg)
{
    long id = (long)(intptr_t)arg;
    for (long r = 0; r < sb.rounds; r++) {
        long v = 1000000 + id * sb.rounds + r;
        G_CHECK(gmp_chan_send(sb.mid, &v) == 0);
    }
    atomic_fetch_add(&sb.done, 1);
}

static void test_chan_wait_inside_syscall_bracket(void **state)
{
    bad_reset();
    sb.rounds = H_SCALE(500L);
    long total = SB_N * sb.rounds;
    char *seen = calloc((size_t)total, 1);
    assert_non_null(seen);
    sb.in = gmp_chan_make(sizeof(long), 0);
    sb.mid = gmp_chan_make(sizeof(long), 0);
    sb.out = gmp_chan_make(sizeof(long), 1);
    assert_non_null(sb.in);
    assert_non_null(sb.mid);
    assert_non_null(sb.out);
    atomic_store(&sb.done, 0);
    for (long i = 0; i < SB_N; i++) {
        assert_int_equal(gmp_go(sb_bracketed, (void *)(intptr_t)i), 0);
        if (i & 1)
            assert_int_equal(gmp_go(sb_feeder, (void *)(intptr_t)(i / 2)), 0);
    }
    /* Feed the even ones from here, and collect everyone's results. */
    long fed = 0, got = 0, want_in = (SB_N / 2) * sb.rounds;
    while (got < total) {
        long v = fed;
        gmp_case_t cs[2] = {{fed < want_in ? sb.in : NULL, GMP_SEND, &v, 0},
                            {sb.out, GMP_RECV, &v, 0}};
        int r = gmp_select(cs, 2, GMP_FOREVER);
        assert_in_range(r, 0, 1);
        assert_int_equal(cs[r].result, 0);
        if (r == 0) {
            fed++;
            continue;
        }
        got++;
        /* v = 2 * x + 1, x from here (< want_in) or from a feeder. */
        long x = (v - 1) / 2;
        long slot = x < 1000000 ? x : want_in + (x - 1000000);
        assert_true(v % 2 == 1 && slot >= 0 && slot < total);
        assert_int_equal(seen[slot], 0);
        seen[slot] = 1;
    }
    assert_int_equal(fed, want_in);
    assert_int_equal(h_wait(&sb.done, SB_N + SB_N / 2), 0);
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(sb.in);
    gmp_chan_free(sb.mid);
    gmp_chan_free(sb.out);
    free(seen);
    ASSERT_NO_BAD();
}

/* ---- No runtime at all: plain threads only ------------------------------ */

static struct {
    gmp_chan_t *c, *back;
    long n;
    _Atomic int64_t done, bad_order, closed_seen;
} nr;

static void nr_sender(void *arg)
{
    (void)arg;
    for (long i = 0; i < nr.n; i++) {
        G_CHECK(gmp_chan_send(nr.c, &i) == 0);
        long v = -1;
        G_CHECK(gmp_chan_recv(nr.back, &v) == 0);   /* acknowledged */
        G_CHECK(v == -i);
    }
    G_CHECK(gmp_chan_close(nr.c) == 0);
    atomic_fetch_add(&nr.done, 1);
}

static void nr_receiver(void *arg)
{
    (void)arg;
    for (long i = 0;; i++) {
        long v = -1;
        int r = gmp_chan_recv(nr.c, &v);
        if (r == GMP_ECLOSED) {
            G_CHECK(v == 0 && i == nr.n);
            atomic_fetch_add(&nr.closed_seen, 1);
            break;
        }
        G_CHECK(r == 0);
        if (v != i)
            atomic_fetch_add(&nr.bad_order, 1);
        v = -v;
        G_CHECK(gmp_chan_send(nr.back, &v) == 0);
    }
    atomic_fetch_add(&nr.done, 1);
}

/* Every blocking call works on a plain OS thread: two threads ping-pong
 * over unbuffered and buffered channels while no runtime runs; close
 * wakes the blocked receiver. */
static void test_chan_plain_threads_without_runtime(void **state)
{
    bad_reset();
    assert_int_equal(gmp_procs(), 0);
    const size_t ncaps[] = {0, 1, 7};
    for (int k = 0; k < 3; k++) {
        struct th a, b;
        nr.c = gmp_chan_make(sizeof(long), ncaps[k]);
        nr.back = gmp_chan_make(sizeof(long), ncaps[(k + 1) % 3]);
        assert_non_null(nr.c);
        assert_non_null(nr.back);
        nr.n = H_SCALE(5000L);
        atomic_store(&nr.done, 0);
        atomic_store(&nr.bad_order, 0);
        atomic_store(&nr.closed_seen, 0);
        th_start(&b, nr_receiver, NULL);
        th_start(&a, nr_sender, NULL);
        assert_int_equal(h_wait(&nr.done, 2), 0);
        th_join(&a);
        th_join(&b);
        assert_int_equal(atomic_load(&nr.bad_order), 0);
        assert_int_equal(atomic_load(&nr.closed_seen), 1);
        gmp_chan_free(nr.c);
        gmp_chan_free(nr.back);
    }
    /* The test thread against a plain thread, both blocking, and the
     * FIFO of sleeping threads. */
    run_fifo_threads(0, true);
    run_fifo_threads(0, false);
    assert_int_equal(gmp_procs(), 0);
    ASSERT_NO_BAD();
}

int main(void)
{
#define COMMON                                                          \
    cmocka_unit_test(test_chan_bad_arguments),                         \
    cmocka_unit_test(test_chan_nonblocking_every_capacity),            \
    cmocka_unit_test(test_chan_close_semantics),                       \
    cmocka_unit_test(test_chan_blocking_fifo_every_capacity),          \
    cmocka_unit_test(test_chan_elem_size_zero),                        \
    cmocka_unit_test(test_chan_large_and_odd_elements),                \
    cmocka_unit_test(test_chan_blocks_until_partner),                  \
    cmocka_unit_test(test_chan_close_wakes_blocked_receivers),         \
    cmocka_unit_test(test_chan_close_wakes_blocked_senders),           \
    cmocka_unit_test(test_chan_close_races_send_and_recv),             \
    cmocka_unit_test(test_chan_fifo_plain_threads),                    \
    cmocka_unit_test(test_chan_many_producers_consumers),              \
    cmocka_unit_test(test_chan_daisy_chain),                           \
    cmocka_unit_test(test_chan_nonblock_recv_race),                    \
    cmocka_unit_test(test_chan_test_thread_ping_pong),                 \
    cmocka_unit_test(test_chan_wait_inside_syscall_bracket),           \
    cmocka_unit_test(test_chan_foreign_threads_and_goroutines)

    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_chan_bad_arguments),
        cmocka_unit_test(test_chan_plain_threads_without_runtime),
    };
    const struct CMUnitTest one[] = {
        COMMON,
        cmocka_unit_test(test_chan_fifo_blocked_senders_procs1),
        cmocka_unit_test(test_chan_fifo_blocked_receivers_procs1),
    };
    const struct CMUnitTest many[] = {
        COMMON,
    };
    /* No runtime first: nothing has started one yet. */
    return cmocka_run_group_tests_name("chan no runtime", none, NULL, NULL)
         + cmocka_run_group_tests_name("chan procs=1", one, h_up_1, h_down)
         + cmocka_run_group_tests_name("chan procs=2", many, h_up_2, h_down)
         + cmocka_run_group_tests_name("chan procs=4", many, h_up_4, h_down);
}
