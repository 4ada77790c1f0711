/*
 * test_select.c - gmp_select, Go's select, through the public API, in the
 * spirit of Go's chan_test.go:
 *   - bad arguments (NULL cases with n > 0, a bad op, a NULL element on a
 *     send case with a payload) give GMP_EINVAL and change nothing;
 *   - a positive timeout with nothing ready gives GMP_ETIMEDOUT, never
 *     before the timeout has passed, and performs nothing (test_timer.c
 *     has the races of timeouts against sends);
 *   - poll mode (any timeout <= 0 but GMP_FOREVER): GMP_EAGAIN when
 *     nothing is ready, NULL channels never ready, select(NULL, 0, 0);
 *     otherwise the ready case's index, its result and value, and no other
 *     case touched; a partner blocked on the other side is ready;
 *   - closed channels: a send case is ready and reports GMP_ECLOSED with
 *     nothing sent; a receive case gets the buffered values, then
 *     GMP_ECLOSED with the element zeroed;
 *   - uniform random choice among ready cases (counts within 5 standard
 *     deviations of the mean, computed), with never-ready cases never
 *     chosen, and exactly one case performed per call;
 *   - one channel in several cases (send and receive, receive twice, and
 *     a close with both receive records queued; a select never pairs
 *     with itself); selects of 64 and 300 cases;
 *   - a blocking select woken by a send, a receive or a close on any of
 *     its channels, goroutines and plain threads on either side, and no
 *     stale waiter left on the other channels; close waking many selects;
 *   - under contention exactly one case commits: routers that select over
 *     sends and receives conserve every value (Go's TestSelectStress and
 *     TestSelfSelect), Go's non-blocking select races;
 *   - select waiters queue first come, first served with plain waiters
 *     (procs 1), and select between plain threads with no runtime at all.
 *
 * Goroutines and helper threads only record (atomics, arrays, and G_CHECK
 * for a failed expectation); the test thread waits and asserts.
 */
#include "harness.h"

#include <pthread.h>

/* ---- Helpers ------------------------------------------------------------- */

/* No libm: the tests link only the runtime and cmocka. */
static double d_abs(double x)
{
    return x < 0 ? -x : x;
}

static double d_sqrt(double x)
{
    double r = x > 1 ? x : 1;
    if (x <= 0)
        return 0;
    for (int i = 0; i < 200; i++)
        r = 0.5 * (r + x / r);
    return r;
}

static gmp_case_t mkcase(gmp_chan_t *c, int op, void *elem)
{
    gmp_case_t k;
    k.chan = c;
    k.op = op;
    k.elem = elem;
    k.result = 12345;               /* select must overwrite the chosen one */
    return k;
}

/* Runs fn in a goroutine and waits for it: a call that should return at
 * once but blocks shows as a timed-out wait, not a hung test thread. */
static _Atomic int64_t gdone;

static void run_in_goroutine(void (*fn)(void *), void *arg)
{
    int64_t before = atomic_load(&gdone);
    assert_int_equal(gmp_go(fn, arg), 0);
    assert_int_equal(h_wait(&gdone, before + 1), 0);
}

/* ---- Bad arguments -------------------------------------------------------- */

static void bad_forever(void *arg)
{
    gmp_chan_t *ready = arg;
    long v = -1, s = 5;
    gmp_case_t cs[2];
    G_CHECK(gmp_select(NULL, 1, GMP_FOREVER) == GMP_EINVAL);
    G_CHECK(gmp_select(NULL, 3, GMP_FOREVER) == GMP_EINVAL);
    cs[0] = mkcase(ready, GMP_RECV, &v);
    cs[1] = mkcase(ready, 7, &s);
    G_CHECK(gmp_select(cs, 2, GMP_FOREVER) == GMP_EINVAL);
    cs[1] = mkcase(ready, GMP_SEND, NULL);
    G_CHECK(gmp_select(cs, 2, GMP_FOREVER) == GMP_EINVAL);
    G_CHECK(v == -1);
    atomic_fetch_add(&gdone, 1);
}

static void test_select_bad_arguments(void **state)
{
    bad_reset();
    gmp_chan_t *ready = h_chan(sizeof(long), 4);
    long one = 1, v = -1, s = 9;
    assert_int_equal(gmp_chan_send(ready, &one), 0);
    const int64_t tmos[] = {0, -3};
    for (int t = 0; t < 2; t++) {
        assert_int_equal(gmp_select(NULL, 1, tmos[t]), GMP_EINVAL);
        assert_int_equal(gmp_select(NULL, 4, tmos[t]), GMP_EINVAL);
        /* A bad op fails the whole call, even beside a ready case. */
        const int bad_ops[] = {0, 3, -1, GMP_SEND | GMP_RECV | 4};
        for (int b = 0; b < 4; b++) {
            gmp_case_t cs[2] = {mkcase(ready, GMP_RECV, &v),
                                mkcase(ready, bad_ops[b], &s)};
            assert_int_equal(gmp_select(cs, 2, tmos[t]), GMP_EINVAL);
            cs[0] = mkcase(ready, bad_ops[b], &s);
            cs[1] = mkcase(ready, GMP_RECV, &v);
            assert_int_equal(gmp_select(cs, 2, tmos[t]), GMP_EINVAL);
        }
        /* A NULL element on a send case with a payload. */
        gmp_case_t cs[2] = {mkcase(ready, GMP_RECV, &v),
                            mkcase(ready, GMP_SEND, NULL)};
        assert_int_equal(gmp_select(cs, 2, tmos[t]), GMP_EINVAL);
        /* Nothing happened. */
        assert_int_equal(v, -1);
        assert_int_equal(gmp_chan_len(ready), 1);
    }
    /* A NULL element is fine where there is no payload. */
    gmp_chan_t *sig = h_chan(0, 1);
    gmp_case_t cs[1] = {mkcase(sig, GMP_SEND, NULL)};
    assert_int_equal(gmp_select(cs, 1, 0), 0);
    assert_int_equal(cs[0].result, 0);
    assert_int_equal(gmp_chan_len(sig), 1);
    if (gmp_procs() > 0) {
        run_in_goroutine(bad_forever, ready);
        assert_int_equal(gmp_chan_len(ready), 1);
    }
    gmp_chan_free(sig);
    gmp_chan_free(ready);
    ASSERT_NO_BAD();
}

/* A positive timeout with no case ready (an unbuffered channel nobody
 * sends on, a full one, NULL channels, or no case at all) returns
 * GMP_ETIMEDOUT no earlier than the timeout, by gmp_nanotime and by
 * CLOCK_MONOTONIC; nothing is performed and no waiter stays behind. In
 * goroutines and on the calling thread (a plain thread, also with no
 * runtime at all). */
static void positive_timeouts(gmp_chan_t *c, gmp_chan_t *full, bool in_g)
{
    const int64_t tmos[] = {1, 1000, 999999, 1000000, 5000001};
    long v = 3, r = -1;
    for (int t = 0; t < 5; t++) {
        gmp_case_t cs[3] = {mkcase(c, GMP_RECV, &r), mkcase(full, GMP_SEND, &v),
                            mkcase(NULL, GMP_RECV, &r)};
        for (int k = 0; k < 3; k++) {
            int64_t m0 = h_now(), g0 = gmp_nanotime();
            int rc = k == 0 ? gmp_select(cs, 3, tmos[t])
                   : k == 1 ? gmp_select(cs + 2, 1, tmos[t])
                            : gmp_select(NULL, 0, tmos[t]);
            int64_t g1 = gmp_nanotime(), m1 = h_now();
            if (in_g) {
                G_CHECK(rc == GMP_ETIMEDOUT);
                G_CHECK(g1 - g0 >= tmos[t] && m1 - m0 >= tmos[t]);
            } else {
                assert_int_equal(rc, GMP_ETIMEDOUT);
                assert_true(g1 - g0 >= tmos[t]);
                assert_true(m1 - m0 >= tmos[t]);
            }
        }
    }
    long s = 4;
    if (in_g) {
        G_CHECK(r == -1);
        G_CHECK(gmp_chan_len(full) == 1);
        G_CHECK(gmp_chan_trysend(c, &s) == GMP_EAGAIN);   /* no receiver */
    } else {
        assert_int_equal(r, -1);
        assert_int_equal(gmp_chan_len(full), 1);
        assert_int_equal(gmp_chan_trysend(c, &s), GMP_EAGAIN);
    }
}

static struct {
    gmp_chan_t *c, *full;
} pt;

static void positive_timeouts_g(void *arg)
{
    (void)arg;
    positive_timeouts(pt.c, pt.full, true);
    atomic_fetch_add(&gdone, 1);
}

static void test_select_positive_timeout_times_out(void **state)
{
    bad_reset();
    pt.c = h_chan(sizeof(long), 0);
    pt.full = h_chan(sizeof(long), 1);
    long v = 3;
    assert_int_equal(gmp_chan_send(pt.full, &v), 0);
    positive_timeouts(pt.c, pt.full, false);
    if (gmp_procs() > 0)
        run_in_goroutine(positive_timeouts_g, NULL);
    assert_int_equal(gmp_chan_len(pt.full), 1);
    gmp_chan_free(pt.c);
    gmp_chan_free(pt.full);
    ASSERT_NO_BAD();
}

/* ---- Poll mode: nothing ready --------------------------------------------- */

static void test_select_poll_nothing_ready(void **state)
{
    const int64_t tmos[] = {0, -2, -1000000, INT64_MIN};
    gmp_chan_t *unb = h_chan(sizeof(long), 0);
    gmp_chan_t *empty = h_chan(sizeof(long), 3);
    gmp_chan_t *full = h_chan(sizeof(long), 2);
    gmp_chan_t *sigfull = h_chan(0, 1);
    long v = 11, r[4];
    assert_int_equal(gmp_chan_send(full, &v), 0);
    assert_int_equal(gmp_chan_send(full, &v), 0);
    assert_int_equal(gmp_chan_send(sigfull, NULL), 0);
    for (int t = 0; t < 4; t++) {
        assert_int_equal(gmp_select(NULL, 0, tmos[t]), GMP_EAGAIN);
        gmp_case_t none[1] = {mkcase(unb, GMP_RECV, &r[0])};
        assert_int_equal(gmp_select(none, 0, tmos[t]), GMP_EAGAIN);
        for (int i = 0; i < 4; i++)
            r[i] = -1;
        gmp_case_t cs[8] = {
            mkcase(unb, GMP_RECV, &r[0]),
            mkcase(unb, GMP_SEND, &v),
            mkcase(empty, GMP_RECV, &r[1]),
            mkcase(full, GMP_SEND, &v),
            mkcase(NULL, GMP_RECV, &r[2]),
            mkcase(NULL, GMP_SEND, &v),
            mkcase(sigfull, GMP_SEND, NULL),
            mkcase(unb, GMP_RECV, &r[3]),
        };
        for (size_t n = 1; n <= 8; n++)
            assert_int_equal(gmp_select(cs, n, tmos[t]), GMP_EAGAIN);
        for (int i = 0; i < 4; i++)
            assert_int_equal(r[i], -1);
        assert_int_equal(gmp_chan_len(empty), 0);
        assert_int_equal(gmp_chan_len(full), 2);
        assert_int_equal(gmp_chan_len(sigfull), 1);
    }
    gmp_chan_free(unb);
    gmp_chan_free(empty);
    gmp_chan_free(full);
    gmp_chan_free(sigfull);
}

/* NULL channels are never ready, in either direction. */
static void test_select_nil_channels(void **state)
{
    long r0 = -1, r1 = -1, v = 8;
    gmp_case_t cs[4] = {mkcase(NULL, GMP_RECV, &r0),
                        mkcase(NULL, GMP_SEND, &v),
                        mkcase(NULL, GMP_RECV, &r1),
                        mkcase(NULL, GMP_SEND, &v)};
    for (size_t n = 1; n <= 4; n++) {
        assert_int_equal(gmp_select(cs, n, 0), GMP_EAGAIN);
        assert_int_equal(gmp_select(cs, n, -1000), GMP_EAGAIN);
    }
    /* With one ready case among them it is always that one. */
    gmp_chan_t *c = h_chan(sizeof(long), 1);
    for (int it = 0; it < 1000; it++) {
        int pos = it % 5;
        gmp_case_t k[5];
        long got = -1;
        for (int i = 0, j = 0; i < 5; i++)
            k[i] = i == pos ? mkcase(c, GMP_RECV, &got) : cs[j++ % 4];
        long x = it;
        assert_int_equal(gmp_chan_send(c, &x), 0);
        assert_int_equal(gmp_select(k, 5, (it & 1) ? GMP_FOREVER : 0), pos);
        assert_int_equal(k[pos].result, 0);
        assert_int_equal(got, it);
        assert_int_equal(gmp_chan_len(c), 0);
    }
    assert_int_equal(r0, -1);
    assert_int_equal(r1, -1);
    gmp_chan_free(c);
}

/* ---- Poll mode: one ready case -------------------------------------------- */

/* Among never-ready cases one ready recv or send case at each position:
 * its index, result 0, its value; no other case performed or written. */
static void test_select_poll_one_ready(void **state)
{
    gmp_chan_t *unb = h_chan(sizeof(long), 0);
    gmp_chan_t *empty = h_chan(sizeof(long), 2);
    gmp_chan_t *full = h_chan(sizeof(long), 1);
    gmp_chan_t *rc = h_chan(sizeof(long), 3);
    gmp_chan_t *sc = h_chan(sizeof(long), 3);
    long v = 4;
    assert_int_equal(gmp_chan_send(full, &v), 0);
    for (int n = 1; n <= 6; n++)
        for (int pos = 0; pos < n; pos++)
            for (int op = GMP_SEND; op <= GMP_RECV; op++) {
                long r[6], sv[6];
                gmp_case_t cs[6];
                for (int i = 0; i < n; i++) {
                    r[i] = -1;
                    sv[i] = 1000 + i;
                    switch (i % 4) {
                    case 0: cs[i] = mkcase(unb, GMP_RECV, &r[i]); break;
                    case 1: cs[i] = mkcase(full, GMP_SEND, &sv[i]); break;
                    case 2: cs[i] = mkcase(empty, GMP_RECV, &r[i]); break;
                    default: cs[i] = mkcase(unb, GMP_SEND, &sv[i]); break;
                    }
                }
                long want = 100 * n + pos;
                if (op == GMP_RECV) {
                    assert_int_equal(gmp_chan_send(rc, &want), 0);
                    cs[pos] = mkcase(rc, GMP_RECV, &r[pos]);
                } else {
                    sv[pos] = want;
                    cs[pos] = mkcase(sc, GMP_SEND, &sv[pos]);
                }
                assert_int_equal(gmp_select(cs, (size_t)n, 0), pos);
                assert_int_equal(cs[pos].result, 0);
                if (op == GMP_RECV) {
                    assert_int_equal(r[pos], want);
                    assert_int_equal(gmp_chan_len(rc), 0);
                } else {
                    long got = -1;
                    assert_int_equal(gmp_chan_len(sc), 1);
                    assert_int_equal(gmp_chan_tryrecv(sc, &got), 0);
                    assert_int_equal(got, want);
                }
                for (int i = 0; i < n; i++)
                    if (i != pos || op == GMP_SEND)
                        assert_int_equal(r[i], -1);
                assert_int_equal(gmp_chan_len(full), 1);
                assert_int_equal(gmp_chan_len(empty), 0);
            }
    /* A receive case with a NULL buffer drops the value (docs/API.md). */
    long x = 5, y = 6, got = -1;
    assert_int_equal(gmp_chan_send(rc, &x), 0);
    assert_int_equal(gmp_chan_send(rc, &y), 0);
    gmp_case_t dc1[2] = {mkcase(unb, GMP_RECV, &got),
                         mkcase(rc, GMP_RECV, NULL)};
    assert_int_equal(gmp_select(dc1, 2, 0), 1);
    assert_int_equal(dc1[1].result, 0);
    assert_int_equal(gmp_chan_len(rc), 1);
    assert_int_equal(gmp_chan_tryrecv(rc, &got), 0);
    assert_int_equal(got, 6);
    assert_int_equal(gmp_chan_close(rc), 0);
    dc1[1] = mkcase(rc, GMP_RECV, NULL);
    assert_int_equal(gmp_select(dc1, 2, GMP_FOREVER), 1);
    assert_int_equal(dc1[1].result, GMP_ECLOSED);
    gmp_chan_free(unb);
    gmp_chan_free(empty);
    gmp_chan_free(full);
    gmp_chan_free(rc);
    gmp_chan_free(sc);
}

/* A partner blocked on the other side of an unbuffered channel makes the
 * case ready: polling selects (with a deadline) eventually pair with it. */
static struct {
    gmp_chan_t *c;
    long got;
    int r;
    _Atomic int64_t done;
} bp;

static void bp_receiver(void *arg)
{
    (void)arg;
    long v = -1;
    bp.r = gmp_chan_recv(bp.c, &v);
    bp.got = v;
    atomic_fetch_add(&bp.done, 1);
}

static void bp_sender(void *arg)
{
    long v = (long)(intptr_t)arg;
    bp.r = gmp_chan_send(bp.c, &v);
    atomic_fetch_add(&bp.done, 1);
}

static int poll_until_ready(gmp_case_t *cs, size_t n)
{
    int64_t deadline = h_now() + H_DEADLINE_NS;
    unsigned step = 0;
    for (;;) {
        int r = gmp_select(cs, n, 0);
        if (r != GMP_EAGAIN || h_now() > deadline)
            return r;
        h_backoff(&step);
    }
}

static void test_select_poll_pairs_with_blocked_partner(void **state)
{
    gmp_chan_t *other = h_chan(sizeof(long), 0);
    for (int it = 0; it < 200; it++) {
        bool thread = it & 1;
        struct th t;
        long r = -1, o = -1, s = 500 + it;
        bp.c = h_chan(sizeof(long), 0);
        atomic_store(&bp.done, 0);
        bp.got = -1;
        bp.r = 1;
        /* Receiver blocked: a send case is ready. */
        if (thread)
            th_start(&t, bp_receiver, NULL);
        else
            assert_int_equal(gmp_go(bp_receiver, NULL), 0);
        gmp_case_t cs[3] = {mkcase(other, GMP_RECV, &o),
                            mkcase(bp.c, GMP_SEND, &s),
                            mkcase(other, GMP_SEND, &s)};
        assert_int_equal(poll_until_ready(cs, 3), 1);
        assert_int_equal(cs[1].result, 0);
        assert_int_equal(h_wait(&bp.done, 1), 0);
        if (thread)
            th_join(&t);
        assert_int_equal(bp.r, 0);
        assert_int_equal(bp.got, 500 + it);
        /* Sender blocked: a recv case is ready. */
        if (thread)
            th_start(&t, bp_sender, (void *)(intptr_t)(700 + it));
        else
            assert_int_equal(gmp_go(bp_sender, (void *)(intptr_t)(700 + it)),
                             0);
        cs[1] = mkcase(bp.c, GMP_RECV, &r);
        assert_int_equal(poll_until_ready(cs, 3), 1);
        assert_int_equal(cs[1].result, 0);
        assert_int_equal(r, 700 + it);
        assert_int_equal(h_wait(&bp.done, 2), 0);
        if (thread)
            th_join(&t);
        assert_int_equal(bp.r, 0);
        assert_int_equal(o, -1);
        gmp_chan_free(bp.c);
    }
    assert_int_equal(h_wait_quiet(), 0);
    gmp_chan_free(other);
}

/* ---- Closed channels ------------------------------------------------------ */

static struct {
    gmp_chan_t *c;
    int r, result;
} cf;

static void closed_send_forever(void *arg)
{
    (void)arg;
    long v = 9;
    gmp_case_t cs[2] = {mkcase(NULL, GMP_RECV, &v),
                        mkcase(cf.c, GMP_SEND, &v)};
    cf.r = gmp_select(cs, 2, GMP_FOREVER);
    cf.result = cs[1].result;
    atomic_fetch_add(&gdone, 1);
}

static void test_select_closed_channels(void **state)
{
    const size_t ccaps[] = {0, 1, 3};
    for (int k = 0; k < 3; k++) {
        size_t cap = ccaps[k];
        /* Send case on a closed channel, with room (cap > 1) or full. */
        for (size_t fill = 0; fill <= (cap ? 1 : 0); fill++) {
            gmp_chan_t *c = h_chan(sizeof(long), cap);
            gmp_chan_t *unb = h_chan(sizeof(long), 0);
            for (long i = 0; i < (long)fill; i++)
                assert_int_equal(gmp_chan_send(c, &i), 0);
            assert_int_equal(gmp_chan_close(c), 0);
            long v = 42, r = -1;
            gmp_case_t cs[3] = {mkcase(unb, GMP_RECV, &r),
                                mkcase(c, GMP_SEND, &v),
                                mkcase(unb, GMP_SEND, &v)};
            assert_int_equal(gmp_select(cs, 3, 0), 1);
            assert_int_equal(cs[1].result, GMP_ECLOSED);
            assert_int_equal(gmp_chan_len(c), fill);     /* nothing sent */
            assert_int_equal(r, -1);
            /* A blocking select does not block on it either. */
            cf.c = c;
            cf.r = -100;
            run_in_goroutine(closed_send_forever, NULL);
            assert_int_equal(cf.r, 1);
            assert_int_equal(cf.result, GMP_ECLOSED);
            assert_int_equal(gmp_chan_len(c), fill);
            /* Receive cases: the buffered values, then zeroed. */
            for (long i = 0; i < (long)fill; i++) {
                long got = -1;
                gmp_case_t rc[2] = {mkcase(unb, GMP_RECV, &r),
                                    mkcase(c, GMP_RECV, &got)};
                assert_int_equal(gmp_select(rc, 2, i & 1 ? GMP_FOREVER : 0),
                                 1);
                assert_int_equal(rc[1].result, 0);
                assert_int_equal(got, i);
            }
            for (int rep = 0; rep < 3; rep++) {
                long got = -1;
                gmp_case_t rc[2] = {mkcase(c, GMP_RECV, &got),
                                    mkcase(unb, GMP_RECV, &r)};
                assert_int_equal(gmp_select(rc, 2, rep ? GMP_FOREVER : 0), 0);
                assert_int_equal(rc[0].result, GMP_ECLOSED);
                assert_int_equal(got, 0);
            }
            assert_int_equal(r, -1);
            gmp_chan_free(c);
            gmp_chan_free(unb);
        }
    }
    /* A large element is zeroed whole. */
    uint8_t b[1000];
    gmp_chan_t *c = h_chan(sizeof b, 0);
    assert_int_equal(gmp_chan_close(c), 0);
    memset(b, 0xcd, sizeof b);
    gmp_case_t rc[1] = {mkcase(c, GMP_RECV, b)};
    assert_int_equal(gmp_select(rc, 1, 0), 0);
    assert_int_equal(rc[0].result, GMP_ECLOSED);
    for (size_t j = 0; j < sizeof b; j++)
        assert_int_equal(b[j], 0);
    gmp_chan_free(c);
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- Uniform choice ------------------------------------------------------- */

/*
 * A configuration of cases: some always ready (kept so: a recv case's
 * buffered channel is refilled after it is chosen, a send case's drained),
 * some never ready. Each select must perform exactly the chosen case: the
 * chosen channel's len moves by one, every other stays, and no other
 * receive buffer is written. Counts per case go to cnt[].
 */
enum kind { K_RECV, K_SEND, K_RECV_DUP, K_NULL, K_UNB_RECV, K_UNB_SEND,
            K_EMPTY_RECV, K_FULL_SEND };

#define UNI_MAX 10

struct uni {
    int n;
    enum kind kind[UNI_MAX];
    long iters;
    int64_t cnt[UNI_MAX];
    int64_t other;                  /* returns outside 0..n-1 */
};

static void uni_run(void *arg)
{
    struct uni *u = arg;
    gmp_chan_t *ch[UNI_MAX];
    gmp_chan_t *unb = gmp_chan_make(sizeof(long), 0);
    gmp_chan_t *empty = gmp_chan_make(sizeof(long), 1);
    gmp_chan_t *full = gmp_chan_make(sizeof(long), 1);
    gmp_chan_t *dup = gmp_chan_make(sizeof(long), 2);   /* K_RECV_DUP */
    long one = 1;
    G_CHECK(unb && empty && full && dup);
    if (!unb || !empty || !full || !dup)
        goto out;
    G_CHECK(gmp_chan_send(full, &one) == 0);
    G_CHECK(gmp_chan_send(dup, &one) == 0);
    for (int i = 0; i < u->n; i++) {
        ch[i] = NULL;
        switch (u->kind[i]) {
        case K_RECV:
            ch[i] = gmp_chan_make(sizeof(long), 2);
            G_CHECK(gmp_chan_send(ch[i], &one) == 0);
            break;
        case K_SEND:
            ch[i] = gmp_chan_make(sizeof(long), 1);
            break;
        case K_RECV_DUP: ch[i] = dup; break;
        case K_NULL: ch[i] = NULL; break;
        case K_UNB_RECV:
        case K_UNB_SEND: ch[i] = unb; break;
        case K_EMPTY_RECV: ch[i] = empty; break;
        case K_FULL_SEND: ch[i] = full; break;
        }
    }
    for (long it = 0; it < u->iters; it++) {
        long r[UNI_MAX], s[UNI_MAX];
        gmp_case_t cs[UNI_MAX];
        size_t len[UNI_MAX];
        for (int i = 0; i < u->n; i++) {
            r[i] = -1;
            s[i] = 10000 + i;
            bool send = u->kind[i] == K_SEND || u->kind[i] == K_UNB_SEND ||
                        u->kind[i] == K_FULL_SEND;
            cs[i] = mkcase(ch[i], send ? GMP_SEND : GMP_RECV,
                           send ? (void *)&s[i] : (void *)&r[i]);
            len[i] = gmp_chan_len(ch[i]);
        }
        int x = gmp_select(cs, (size_t)u->n, (it & 1) ? 0 : GMP_FOREVER);
        if (x < 0 || x >= u->n) {
            u->other++;
            break;
        }
        u->cnt[x]++;
        G_CHECK(cs[x].result == 0);
        /* Exactly the chosen case happened. */
        for (int i = 0; i < u->n; i++) {
            bool same = ch[i] == ch[x];
            if (!same)
                G_CHECK(gmp_chan_len(ch[i]) == len[i]);
            if (i != x)
                G_CHECK(r[i] == -1);
        }
        switch (u->kind[x]) {
        case K_RECV:
        case K_RECV_DUP:
            G_CHECK(r[x] == 1);
            G_CHECK(gmp_chan_len(ch[x]) == len[x] - 1);
            G_CHECK(gmp_chan_send(ch[x], &one) == 0);
            break;
        case K_SEND: {
            long got = -1;
            G_CHECK(gmp_chan_len(ch[x]) == len[x] + 1);
            G_CHECK(gmp_chan_tryrecv(ch[x], &got) == 0);
            G_CHECK(got == 10000 + x);
            break;
        }
        default:
            G_CHECK(!"a never-ready case was chosen");
            break;
        }
    }
    for (int i = 0; i < u->n; i++)
        if (u->kind[i] == K_RECV || u->kind[i] == K_SEND)
            gmp_chan_free(ch[i]);
out:
    gmp_chan_free(unb);
    gmp_chan_free(empty);
    gmp_chan_free(full);
    gmp_chan_free(dup);
    atomic_fetch_add(&gdone, 1);
}

static bool ready_kind(enum kind k)
{
    return k == K_RECV || k == K_SEND || k == K_RECV_DUP;
}

static void uni_check(const struct uni *u)
{
    int ready = 0;
    for (int i = 0; i < u->n; i++)
        ready += ready_kind(u->kind[i]);
    double p = 1.0 / ready, mean = (double)u->iters * p;
    double sd = d_sqrt((double)u->iters * p * (1 - p));
    assert_int_equal(u->other, 0);
    for (int i = 0; i < u->n; i++) {
        if (!ready_kind(u->kind[i])) {
            assert_int_equal(u->cnt[i], 0);
            continue;
        }
        double dev = d_abs((double)u->cnt[i] - mean);
        if (dev > 5 * sd)
            fail_msg("case %d of %d (%d ready) chosen %lld times in %ld: "
                     "mean %.1f, sd %.1f", i, u->n, ready,
                     (long long)u->cnt[i], u->iters, mean, sd);
    }
}

static void test_select_uniform_choice(void **state)
{
    static const struct {
        int n;
        enum kind k[UNI_MAX];
    } cfgs[] = {
        /* Go's TestSelectFairness: three ready among a never-ready one. */
        {4, {K_RECV, K_RECV, K_RECV, K_UNB_RECV}},
        {6, {K_NULL, K_RECV, K_UNB_SEND, K_RECV, K_RECV, K_RECV}},
        /* Go's TestPseudoRandomSend, and sends mixed with receives. */
        {2, {K_SEND, K_SEND}},
        {6, {K_SEND, K_EMPTY_RECV, K_RECV, K_FULL_SEND, K_SEND, K_RECV}},
        /* One channel in two receive cases. */
        {3, {K_RECV_DUP, K_SEND, K_RECV_DUP}},
        {10, {K_RECV, K_RECV, K_SEND, K_RECV, K_NULL, K_RECV, K_SEND,
              K_RECV, K_UNB_RECV, K_RECV}},
    };
    bad_reset();
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        struct uni u;
        memset(&u, 0, sizeof u);
        u.n = cfgs[c].n;
        memcpy(u.kind, cfgs[c].k, sizeof u.kind);
        /* A mean of 100 per ready case or more, also sanitized. */
        u.iters = H_SANITIZED ? 4000L : 40000L;
        /* The test thread selects; every other configuration a goroutine. */
        if (c & 1)
            run_in_goroutine(uni_run, &u);
        else {
            int64_t before = atomic_load(&gdone);
            uni_run(&u);
            assert_int_equal(atomic_load(&gdone), before + 1);
        }
        ASSERT_NO_BAD();
        uni_check(&u);
    }
}

/* ---- One channel in several cases ------------------------------------------ */

static void test_select_same_channel_cases(void **state)
{
    /* Send and receive on one buffered channel: empty, only the send is
     * ready; full, only the receive. */
    gmp_chan_t *c = h_chan(sizeof(long), 1);
    for (long it = 0; it < 100; it++) {
        long s = it, r = -1;
        gmp_case_t cs[2] = {mkcase(c, GMP_RECV, &r), mkcase(c, GMP_SEND, &s)};
        assert_int_equal(gmp_select(cs, 2, (it & 1) ? GMP_FOREVER : 0), 1);
        assert_int_equal(gmp_chan_len(c), 1);
        assert_int_equal(r, -1);
        s = -7;
        assert_int_equal(gmp_select(cs, 2, (it & 2) ? GMP_FOREVER : 0), 0);
        assert_int_equal(r, it);
        assert_int_equal(gmp_chan_len(c), 0);
    }
    gmp_chan_free(c);

    /* Half full: both ready, each chosen about half the time, and exactly
     * one performed. */
    c = h_chan(sizeof(long), 2);
    long n = H_SCALE(20000L), cnt[2] = {0, 0};
    for (long it = 0; it < n; it++) {
        long s = 2 * it + 1, r = -1, pre = 2 * it;
        assert_int_equal(gmp_chan_send(c, &pre), 0);
        gmp_case_t cs[2] = {mkcase(c, GMP_SEND, &s), mkcase(c, GMP_RECV, &r)};
        int x = gmp_select(cs, 2, 0);
        assert_in_range(x, 0, 1);
        cnt[x]++;
        long a = -1, b = -1;
        if (x == 0) {
            assert_int_equal(r, -1);
            assert_int_equal(gmp_chan_len(c), 2);
            assert_int_equal(gmp_chan_tryrecv(c, &a), 0);
            assert_int_equal(gmp_chan_tryrecv(c, &b), 0);
            assert_int_equal(a, pre);
            assert_int_equal(b, s);
        } else {
            assert_int_equal(r, pre);
            assert_int_equal(gmp_chan_len(c), 0);
        }
    }
    double sd = d_sqrt((double)n * 0.25);
    if (d_abs((double)cnt[0] - n / 2.0) > 5 * sd)
        fail_msg("send chosen %ld times, receive %ld times", cnt[0], cnt[1]);
    gmp_chan_free(c);

    /* Two sends on one channel with room for one: one performed, its
     * value. */
    c = h_chan(sizeof(long), 1);
    for (int it = 0; it < 100; it++) {
        long s0 = 10, s1 = 11, got = -1;
        gmp_case_t cs[2] = {mkcase(c, GMP_SEND, &s0), mkcase(c, GMP_SEND, &s1)};
        int x = gmp_select(cs, 2, 0);
        assert_in_range(x, 0, 1);
        assert_int_equal(gmp_chan_len(c), 1);
        assert_int_equal(gmp_chan_tryrecv(c, &got), 0);
        assert_int_equal(got, 10 + x);
    }
    gmp_chan_free(c);

    /* Unbuffered: a select's own send never pairs with its own receive. */
    c = h_chan(sizeof(long), 0);
    long s = 1, r = -1;
    gmp_case_t cs[3] = {mkcase(c, GMP_SEND, &s), mkcase(c, GMP_RECV, &r),
                        mkcase(c, GMP_SEND, &s)};
    for (int it = 0; it < 10; it++)
        assert_int_equal(gmp_select(cs, 3, 0), GMP_EAGAIN);
    assert_int_equal(r, -1);
    gmp_chan_free(c);
}

/* Go's TestSelectDuplicateChannel: a select blocked on c twice and d, woken
 * through d, through c, or by closing c (whose queue then holds both its
 * records: exactly one case completes, the other buffer stays untouched);
 * either way no record of it stays queued (a later trysend finds no
 * receiver). Fresh channels each round, since c may be closed. */
static struct {
    gmp_chan_t *c, *d;
    long a, b, x;
    int r, res;
    _Atomic int64_t attempting, done;
} dc;

static void dup_selector(void *arg)
{
    (void)arg;
    dc.a = dc.b = dc.x = -1;
    gmp_case_t cs[3] = {mkcase(dc.c, GMP_RECV, &dc.a),
                        mkcase(dc.c, GMP_RECV, &dc.b),
                        mkcase(dc.d, GMP_RECV, &dc.x)};
    atomic_fetch_add(&dc.attempting, 1);
    dc.r = gmp_select(cs, 3, GMP_FOREVER);
    dc.res = dc.r >= 0 && dc.r < 3 ? cs[dc.r].result : -999;
    atomic_fetch_add(&dc.done, 1);
}

static void test_select_duplicate_channel_blocking(void **state)
{
    bad_reset();
    atomic_store(&dc.attempting, 0);
    atomic_store(&dc.done, 0);
    long rounds = H_SCALE(4000L);
    for (long it = 0; it < rounds; it++) {
        bool thread = (it % 4) == 3;
        int way = (int)(it % 3);            /* 0: send c, 1: send d, 2: close c */
        struct th t;
        dc.c = h_chan(sizeof(long), 0);
        dc.d = h_chan(sizeof(long), 0);
        if (thread)
            th_start(&t, dup_selector, NULL);
        else
            assert_int_equal(gmp_go(dup_selector, NULL), 0);
        assert_int_equal(h_wait(&dc.attempting, it + 1), 0);
        long v = it;
        if (way == 0)
            assert_int_equal(gmp_chan_send(dc.c, &v), 0);
        else if (way == 1)
            assert_int_equal(gmp_chan_send(dc.d, &v), 0);
        else
            assert_int_equal(gmp_chan_close(dc.c), 0);
        assert_int_equal(h_wait(&dc.done, it + 1), 0);
        if (thread)
            th_join(&t);
        if (way == 1) {
            assert_int_equal(dc.res, 0);
            assert_int_equal(dc.r, 2);
            assert_int_equal(dc.x, it);
            assert_int_equal(dc.a, -1);
            assert_int_equal(dc.b, -1);
        } else {
            assert_in_range(dc.r, 0, 1);
            assert_int_equal(dc.res, way == 2 ? GMP_ECLOSED : 0);
            assert_int_equal(dc.r == 0 ? dc.a : dc.b, way == 2 ? 0 : it);
            assert_int_equal(dc.r == 0 ? dc.b : dc.a, -1);
            assert_int_equal(dc.x, -1);
        }
        /* No stale waiter on either channel. */
        assert_int_equal(gmp_chan_trysend(dc.c, &v),
                         way == 2 ? GMP_ECLOSED : GMP_EAGAIN);
        assert_int_equal(gmp_chan_trysend(dc.d, &v), GMP_EAGAIN);
        gmp_chan_free(dc.c);
        gmp_chan_free(dc.d);
    }
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
}

/* ---- Many cases ------------------------------------------------------------- */

/* Selects over more cases than fit any on-stack bookkeeping (64 and 300),
 * blocking in a goroutine and in a plain thread: the case woken through
 * channel k is case k; all ready, each of 64 cases is chosen about
 * equally often. */
#define MC_MAX 300

static struct {
    gmp_chan_t *ch[MC_MAX];
    long buf[MC_MAX];
    int n, r, res;
    _Atomic int64_t attempting, done;
} mc;

static void mc_selector(void *arg)
{
    (void)arg;
    gmp_case_t *cs = calloc((size_t)mc.n, sizeof *cs);
    G_CHECK(cs != NULL);
    for (int i = 0; cs && i < mc.n; i++) {
        mc.buf[i] = -1;
        cs[i] = mkcase(mc.ch[i], GMP_RECV, &mc.buf[i]);
    }
    atomic_fetch_add(&mc.attempting, 1);
    mc.r = cs ? gmp_select(cs, (size_t)mc.n, GMP_FOREVER) : -1;
    mc.res = cs && mc.r >= 0 && mc.r < mc.n ? cs[mc.r].result : -999;
    free(cs);
    atomic_fetch_add(&mc.done, 1);
}

static void test_select_many_cases(void **state)
{
    bad_reset();
    uint64_t rnd = 0x853c49e6748fea9bULL;
    const int sizes[] = {64, MC_MAX};
    atomic_store(&mc.attempting, 0);
    atomic_store(&mc.done, 0);
    long rounds = 0;
    for (int z = 0; z < 2; z++) {
        mc.n = sizes[z];
        for (int i = 0; i < mc.n; i++)
            mc.ch[i] = h_chan(sizeof(long), (size_t)(i & 1));
        for (int it = 0; it < 40; it++, rounds++) {
            bool thread = it & 1;
            struct th t;
            int k = (int)(xorshift(&rnd) % (uint64_t)mc.n);
            if (thread)
                th_start(&t, mc_selector, NULL);
            else
                assert_int_equal(gmp_go(mc_selector, NULL), 0);
            assert_int_equal(h_wait(&mc.attempting, rounds + 1), 0);
            long v = 1000 + it;
            assert_int_equal(gmp_chan_send(mc.ch[k], &v), 0);
            assert_int_equal(h_wait(&mc.done, rounds + 1), 0);
            if (thread)
                th_join(&t);
            assert_int_equal(mc.r, k);
            assert_int_equal(mc.res, 0);
            for (int i = 0; i < mc.n; i++)
                assert_int_equal(mc.buf[i], i == k ? v : -1);
            for (int i = 0; i < mc.n; i++)
                assert_int_equal(gmp_chan_trysend(mc.ch[i], &v),
                                 (i & 1) ? 0 : GMP_EAGAIN);
            for (int i = 1; i < mc.n; i += 2)
                assert_int_equal(gmp_chan_tryrecv(mc.ch[i], &v), 0);
        }
        for (int i = 0; i < mc.n; i++)
            gmp_chan_free(mc.ch[i]);
    }
    /* Poll mode over 64 ready cases (buffered channels, refilled). */
    int n = 64;
    /* A mean of 100 per case at least, also sanitized: the normal bound
     * below needs it (at a mean of 4 the tail is far heavier). */
    long iters = 64L * (H_SANITIZED ? 100 : 400);
    int64_t cnt[64] = {0};
    gmp_case_t cs[64];
    for (int i = 0; i < n; i++) {
        long one = i;
        mc.ch[i] = h_chan(sizeof(long), 1);
        assert_int_equal(gmp_chan_send(mc.ch[i], &one), 0);
        cs[i] = mkcase(mc.ch[i], GMP_RECV, &mc.buf[i]);
    }
    for (long it = 0; it < iters; it++) {
        int x = gmp_select(cs, (size_t)n, 0);
        assert_in_range(x, 0, n - 1);
        assert_int_equal(mc.buf[x], x);
        long refill = x;
        assert_int_equal(gmp_chan_send(mc.ch[x], &refill), 0);
        cnt[x]++;
    }
    double p = 1.0 / n, mean = (double)iters * p;
    double sd = d_sqrt((double)iters * p * (1 - p));
    for (int i = 0; i < n; i++) {
        if (d_abs((double)cnt[i] - mean) > 5 * sd)
            fail_msg("case %d of %d chosen %lld times in %ld: mean %.1f, "
                     "sd %.1f", i, n, (long long)cnt[i], iters, mean, sd);
        gmp_chan_free(mc.ch[i]);
    }
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
}

/* ---- A blocking select woken from outside ---------------------------------- */

/*
 * The selector waits on: [0] recv a (unbuffered), [1] recv b (buffered),
 * [2] send s (unbuffered), [3] recv x (closed by way 3), [4] send y
 * (closed by way 4). Way w wakes it through case w. Selector and waker are
 * goroutines or plain threads, by round.
 */
static struct {
    gmp_chan_t *a, *b, *s, *x, *y;
    long ra, rb, rx, sv, yv;
    int r, res;
    int way;
    long val;
    long wake_got;
    int wake_r;
    _Atomic int64_t attempting, done, wdone;
} bw;

static void bw_selector(void *arg)
{
    (void)arg;
    bw.ra = bw.rb = bw.rx = -1;
    gmp_case_t cs[5] = {mkcase(bw.a, GMP_RECV, &bw.ra),
                        mkcase(bw.b, GMP_RECV, &bw.rb),
                        mkcase(bw.s, GMP_SEND, &bw.sv),
                        mkcase(bw.x, GMP_RECV, &bw.rx),
                        mkcase(bw.y, GMP_SEND, &bw.yv)};
    atomic_fetch_add(&bw.attempting, 1);
    bw.r = gmp_select(cs, 5, GMP_FOREVER);
    bw.res = bw.r >= 0 && bw.r < 5 ? cs[bw.r].result : -999;
    atomic_fetch_add(&bw.done, 1);
}

static void bw_wake(void *arg)
{
    (void)arg;
    long v = bw.val;
    bw.wake_got = -1;
    switch (bw.way) {
    case 0: bw.wake_r = gmp_chan_send(bw.a, &v); break;
    case 1: bw.wake_r = gmp_chan_send(bw.b, &v); break;
    case 2: bw.wake_r = gmp_chan_recv(bw.s, &bw.wake_got); break;
    case 3: bw.wake_r = gmp_chan_close(bw.x); break;
    default: bw.wake_r = gmp_chan_close(bw.y); break;
    }
    atomic_fetch_add(&bw.wdone, 1);
}

static void test_select_blocking_woken_by_each_case(void **state)
{
    bad_reset();
    memset(&bw, 0, sizeof bw);
    long rounds = H_SCALE(6000L);
    uint64_t rnd = 0x2545F4914F6CDD1DULL;
    for (long it = 0; it < rounds; it++) {
        int mode = (int)((it / 5) % 3);      /* who selects, who wakes */
        bool sel_thread = mode == 1, wake_goroutine = mode != 0;
        struct th t;
        bw.a = h_chan(sizeof(long), 0);
        bw.b = h_chan(sizeof(long), 1);
        bw.s = h_chan(sizeof(long), 0);
        bw.x = h_chan(sizeof(long), 0);
        bw.y = h_chan(sizeof(long), 0);
        bw.way = (int)(it % 5);
        bw.val = it;
        bw.sv = 1000000 + it;
        bw.yv = -5;
        bw.r = -100;
        if (sel_thread)
            th_start(&t, bw_selector, NULL);
        else
            assert_int_equal(gmp_go(bw_selector, NULL), 0);
        /* Mostly let it block first; sometimes race it. */
        if (xorshift(&rnd) % 4 != 0)
            assert_int_equal(h_wait(&bw.attempting, it + 1), 0);
        if (wake_goroutine) {
            assert_int_equal(gmp_go(bw_wake, NULL), 0);
            assert_int_equal(h_wait(&bw.wdone, it + 1), 0);
        } else {
            bw_wake(NULL);
        }
        assert_int_equal(h_wait(&bw.done, it + 1), 0);
        if (sel_thread)
            th_join(&t);
        assert_int_equal(bw.wake_r, 0);
        assert_int_equal(bw.r, bw.way);
        assert_int_equal(bw.res, bw.way >= 3 ? GMP_ECLOSED : 0);
        assert_int_equal(bw.ra, bw.way == 0 ? it : -1);
        assert_int_equal(bw.rb, bw.way == 1 ? it : -1);
        assert_int_equal(bw.rx, bw.way == 3 ? 0 : -1);
        if (bw.way == 2)
            assert_int_equal(bw.wake_got, 1000000 + it);
        /* Nothing of the select is left on any channel. */
        long v = 3;
        assert_int_equal(gmp_chan_trysend(bw.a, &v), GMP_EAGAIN);
        assert_int_equal(gmp_chan_tryrecv(bw.b, &v), GMP_EAGAIN);
        assert_int_equal(gmp_chan_tryrecv(bw.s, &v), GMP_EAGAIN);
        assert_int_equal(gmp_chan_trysend(bw.x, &v),
                         bw.way == 3 ? GMP_ECLOSED : GMP_EAGAIN);
        assert_int_equal(gmp_chan_tryrecv(bw.y, &v),
                         bw.way == 4 ? GMP_ECLOSED : GMP_EAGAIN);
        gmp_chan_free(bw.a);
        gmp_chan_free(bw.b);
        gmp_chan_free(bw.s);
        gmp_chan_free(bw.x);
        gmp_chan_free(bw.y);
    }
    assert_int_equal(h_wait_quiet(), 0);
    ASSERT_NO_BAD();
}

/* One close wakes every select blocked on the channel. */
#define CM_G 100
#define CM_T 2

static struct {
    gmp_chan_t *c, *d, *e;
    _Atomic int64_t attempting, done, right;
} cm;

static void cm_selector(void *arg)
{
    (void)arg;
    long rc = -1, rd = -1, s = 5;
    gmp_case_t cs[3] = {mkcase(cm.c, GMP_RECV, &rc),
                        mkcase(cm.d, GMP_RECV, &rd),
                        mkcase(cm.e, GMP_SEND, &s)};
    atomic_fetch_add(&cm.attempting, 1);
    int r = gmp_select(cs, 3, GMP_FOREVER);
    if (r == 1 && cs[1].result == GMP_ECLOSED && rd == 0 && rc == -1)
        atomic_fetch_add(&cm.right, 1);
    atomic_fetch_add(&cm.done, 1);
}

static void test_select_close_wakes_every_select(void **state)
{
    for (int round = 0; round < 10; round++) {
        struct th t[CM_T];
        cm.c = h_chan(sizeof(long), 0);
        cm.d = h_chan(sizeof(long), 2);
        cm.e = h_chan(sizeof(long), 0);
        atomic_store(&cm.attempting, 0);
        atomic_store(&cm.done, 0);
        atomic_store(&cm.right, 0);
        for (int i = 0; i < CM_G; i++)
            assert_int_equal(gmp_go(cm_selector, NULL), 0);
        for (int i = 0; i < CM_T; i++)
            th_start(&t[i], cm_selector, NULL);
        assert_int_equal(h_wait(&cm.attempting, CM_G + CM_T), 0);
        assert_int_equal(gmp_chan_close(cm.d), 0);
        assert_int_equal(h_wait(&cm.done, CM_G + CM_T), 0);
        for (int i = 0; i < CM_T; i++)
            th_join(&t[i]);
        assert_int_equal(atomic_load(&cm.right), CM_G + CM_T);
        long v = 1;
        assert_int_equal(gmp_chan_trysend(cm.c, &v), GMP_EAGAIN);
        assert_int_equal(gmp_chan_tryrecv(cm.e, &v), GMP_EAGAIN);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(cm.c);
        gmp_chan_free(cm.d);
        gmp_chan_free(cm.e);
    }
}

/* ---- Exactly one case commits under contention ----------------------------- */

/* Go's TestSelfSelect: two goroutines select {send c <- p; recv <- c}. On
 * an unbuffered channel they pair with each other, never with themselves:
 * sends and receives balance exactly. */
static struct {
    gmp_chan_t *c;
    size_t cap;
    long n;
    _Atomic int64_t sends, recvs, self, done;
} ss;

static void ss_fn(void *arg)
{
    long p = (long)(intptr_t)arg;
    for (long i = 0; i < ss.n; i++) {
        long v = -1, s = p;
        gmp_case_t cs[2];
        if (i & 1) {
            cs[0] = mkcase(ss.c, GMP_SEND, &s);
            cs[1] = mkcase(ss.c, GMP_RECV, &v);
        } else {
            cs[0] = mkcase(ss.c, GMP_RECV, &v);
            cs[1] = mkcase(ss.c, GMP_SEND, &s);
        }
        int r = gmp_select(cs, 2, GMP_FOREVER);
        G_CHECK(r == 0 || r == 1);
        if (r != 0 && r != 1)
            break;
        G_CHECK(cs[r].result == 0);
        if (cs[r].op == GMP_SEND) {
            G_CHECK(v == -1);
            atomic_fetch_add(&ss.sends, 1);
        } else {
            G_CHECK(v == 0 || v == 1);
            if (ss.cap == 0 && v == p)
                atomic_fetch_add(&ss.self, 1);
            atomic_fetch_add(&ss.recvs, 1);
        }
    }
    atomic_fetch_add(&ss.done, 1);
}

static void test_select_self_select(void **state)
{
    bad_reset();
    const size_t scaps[] = {0, 10};
    for (int k = 0; k < 2; k++) {
        ss.cap = scaps[k];
        ss.c = h_chan(sizeof(long), ss.cap);
        ss.n = H_SCALE(50000L);
        atomic_store(&ss.sends, 0);
        atomic_store(&ss.recvs, 0);
        atomic_store(&ss.self, 0);
        atomic_store(&ss.done, 0);
        assert_int_equal(gmp_go(ss_fn, (void *)(intptr_t)0), 0);
        assert_int_equal(gmp_go(ss_fn, (void *)(intptr_t)1), 0);
        assert_int_equal(h_wait(&ss.done, 2), 0);
        assert_int_equal(atomic_load(&ss.self), 0);
        int64_t sends = atomic_load(&ss.sends), recvs = atomic_load(&ss.recvs);
        assert_int_equal(sends + recvs, 2 * ss.n);
        /* What was sent and not received is still buffered. */
        assert_int_equal(sends - recvs, (int64_t)gmp_chan_len(ss.c));
        if (ss.cap == 0)
            assert_int_equal(sends, ss.n);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(ss.c);
        ASSERT_NO_BAD();
    }
}

/*
 * Routers (Go's TestSelectStress, reshaped so every value is tracked):
 * producers send unique values into in[0], in[1] (half with plain sends,
 * half with a select over both); routers each hold up to RT_Q values and
 * select over receives from in[] (while there is room and the channel is
 * open) and sends of their oldest value to out[0], out[1]; consumers take
 * from out[] (plain receives or a select over both). If any select
 * performed a case it did not report, a value would be lost (a receive)
 * or delivered twice (a send); a receive buffer written for a case not
 * chosen is caught directly. A producer and a consumer are plain threads.
 */
#define RT_P 4
#define RT_R 4
#define RT_C 4
#define RT_Q 3

static struct {
    gmp_chan_t *in[2], *out[2];
    long per;
    _Atomic uint32_t *seen;
    _Atomic int64_t pdone, rdone, cdone, count;
} rt;

static void rt_producer(void *arg)
{
    long p = (long)(intptr_t)arg;
    for (long k = 0; k < rt.per; k++) {
        long v = p * rt.per + k;
        if (p & 1) {
            gmp_case_t cs[2] = {mkcase(rt.in[0], GMP_SEND, &v),
                                mkcase(rt.in[1], GMP_SEND, &v)};
            int r = gmp_select(cs, 2, GMP_FOREVER);
            G_CHECK((r == 0 || r == 1) && cs[r].result == 0);
        } else {
            G_CHECK(gmp_chan_send(rt.in[k & 1], &v) == 0);
        }
    }
    if (atomic_fetch_add(&rt.pdone, 1) == RT_P - 1) {
        G_CHECK(gmp_chan_close(rt.in[0]) == 0);
        G_CHECK(gmp_chan_close(rt.in[1]) == 0);
    }
}

static void rt_router(void *arg)
{
    long id = (long)(intptr_t)arg;
    long q[RT_Q];
    int head = 0, qn = 0;
    bool open[2] = {true, true};
    for (long it = 0; open[0] || open[1] || qn > 0; it++) {
        long rb[2] = {-1, -1}, sv = qn > 0 ? q[head] : -1;
        gmp_case_t cs[4];
        int rot = (int)((it + id) & 3);
        int pos[4];
        for (int j = 0; j < 4; j++)
            pos[j] = (j + rot) & 3;
        cs[pos[0]] = mkcase(qn < RT_Q && open[0] ? rt.in[0] : NULL, GMP_RECV,
                            &rb[0]);
        cs[pos[1]] = mkcase(qn < RT_Q && open[1] ? rt.in[1] : NULL, GMP_RECV,
                            &rb[1]);
        cs[pos[2]] = mkcase(qn > 0 ? rt.out[0] : NULL, GMP_SEND, &sv);
        cs[pos[3]] = mkcase(qn > 0 ? rt.out[1] : NULL, GMP_SEND, &sv);
        int r = gmp_select(cs, 4, (it % 3) ? GMP_FOREVER : 0);
        if (r == GMP_EAGAIN)
            continue;                       /* the poll found nothing */
        G_CHECK(r >= 0 && r < 4);
        if (r < 0 || r >= 4)
            break;
        int which = -1;
        for (int j = 0; j < 4; j++)
            if (pos[j] == r)
                which = j;
        if (which < 2) {
            G_CHECK(rb[1 - which] == -1);   /* the other one untouched */
            if (cs[r].result == GMP_ECLOSED) {
                G_CHECK(rb[which] == 0);
                open[which] = false;
            } else {
                G_CHECK(cs[r].result == 0);
                q[(head + qn) % RT_Q] = rb[which];
                qn++;
            }
        } else {
            G_CHECK(rb[0] == -1 && rb[1] == -1);
            G_CHECK(cs[r].result == 0);
            head = (head + 1) % RT_Q;
            qn--;
        }
    }
    if (atomic_fetch_add(&rt.rdone, 1) == RT_R - 1) {
        G_CHECK(gmp_chan_close(rt.out[0]) == 0);
        G_CHECK(gmp_chan_close(rt.out[1]) == 0);
    }
}

static void rt_take(long v)
{
    long n = RT_P * rt.per;
    G_CHECK(v >= 0 && v < n);
    if (v >= 0 && v < n)
        atomic_fetch_add(&rt.seen[v], 1);
    atomic_fetch_add(&rt.count, 1);
}

static void rt_consumer(void *arg)
{
    long id = (long)(intptr_t)arg;
    if (id & 1) {
        bool open[2] = {true, true};
        while (open[0] || open[1]) {
            long rb[2] = {-1, -1};
            gmp_case_t cs[2] = {
                mkcase(open[0] ? rt.out[0] : NULL, GMP_RECV, &rb[0]),
                mkcase(open[1] ? rt.out[1] : NULL, GMP_RECV, &rb[1])};
            int r = gmp_select(cs, 2, GMP_FOREVER);
            G_CHECK(r == 0 || r == 1);
            if (r != 0 && r != 1)
                break;
            G_CHECK(rb[1 - r] == -1);
            if (cs[r].result == GMP_ECLOSED) {
                G_CHECK(rb[r] == 0);
                open[r] = false;
            } else {
                G_CHECK(cs[r].result == 0);
                rt_take(rb[r]);
            }
        }
    } else {
        /* Plain receives, one channel to the end, then the other. */
        long v;
        for (int j = 0; j < 2; j++) {
            gmp_chan_t *c = rt.out[(j + id / 2) & 1];
            while (gmp_chan_recv(c, &v) == 0)
                rt_take(v);
        }
    }
    atomic_fetch_add(&rt.cdone, 1);
}

static void run_routers(size_t capin, size_t capout)
{
    struct th tp, tc;
    long n = RT_P * rt.per;
    for (int j = 0; j < 2; j++) {
        rt.in[j] = h_chan(sizeof(long), capin);
        rt.out[j] = h_chan(sizeof(long), capout);
    }
    for (long v = 0; v < n; v++)
        atomic_store(&rt.seen[v], 0);
    atomic_store(&rt.pdone, 0);
    atomic_store(&rt.rdone, 0);
    atomic_store(&rt.cdone, 0);
    atomic_store(&rt.count, 0);
    for (long i = 0; i < RT_R; i++)
        assert_int_equal(gmp_go(rt_router, (void *)(intptr_t)i), 0);
    for (long i = 0; i < RT_C - 1; i++)
        assert_int_equal(gmp_go(rt_consumer, (void *)(intptr_t)i), 0);
    th_start(&tc, rt_consumer, (void *)(intptr_t)(RT_C - 1));
    for (long i = 0; i < RT_P - 1; i++)
        assert_int_equal(gmp_go(rt_producer, (void *)(intptr_t)i), 0);
    th_start(&tp, rt_producer, (void *)(intptr_t)(RT_P - 1));
    assert_int_equal(h_wait(&rt.cdone, RT_C), 0);
    th_join(&tp);
    th_join(&tc);
    assert_int_equal(atomic_load(&rt.pdone), RT_P);
    assert_int_equal(atomic_load(&rt.rdone), RT_R);
    assert_int_equal(atomic_load(&rt.count), n);
    for (long v = 0; v < n; v++)
        if (atomic_load(&rt.seen[v]) != 1)
            fail_msg("in cap %zu out cap %zu: value %ld seen %u times",
                     capin, capout, v, atomic_load(&rt.seen[v]));
    assert_int_equal(h_wait_quiet(), 0);
    for (int j = 0; j < 2; j++) {
        gmp_chan_free(rt.in[j]);
        gmp_chan_free(rt.out[j]);
    }
}

static void test_select_routers_conserve_values(void **state)
{
    bad_reset();
    rt.per = H_SCALE(15000L);
    rt.seen = calloc((size_t)(RT_P * rt.per), sizeof *rt.seen);
    assert_non_null(rt.seen);
    run_routers(0, 0);
    run_routers(1, 0);
    run_routers(0, 3);
    run_routers(8, 8);
    free(rt.seen);
    ASSERT_NO_BAD();
}

/* Go's TestNonblockSelectRace and TestNonblockSelectRace2: c1 holds a
 * value; a goroutine polls {recv c1, recv c2} while the test thread sends
 * on (or closes) c2 and then selects on both. The poll is never "nothing
 * ready"; and c1's value is taken at most once. */
static struct {
    gmp_chan_t *c1, *c2;
    int r, res;
    long v;
    _Atomic int64_t done;
} nbs;

static void nbs_fn(void *arg)
{
    (void)arg;
    long a = -1, b = -1;
    gmp_case_t cs[2] = {mkcase(nbs.c1, GMP_RECV, &a),
                        mkcase(nbs.c2, GMP_RECV, &b)};
    nbs.r = gmp_select(cs, 2, 0);
    nbs.res = nbs.r == 0 || nbs.r == 1 ? cs[nbs.r].result : -999;
    nbs.v = nbs.r == 0 ? a : b;
    atomic_fetch_add(&nbs.done, 1);
}

static void test_select_nonblock_select_race(void **state)
{
    long rounds = H_SCALE(20000L);
    atomic_store(&nbs.done, 0);
    for (long i = 0; i < rounds; i++) {
        bool close2 = i & 1;
        long one = 1, a = -1, b = -1;
        nbs.c1 = h_chan(sizeof(long), 1);
        nbs.c2 = h_chan(sizeof(long), 1);
        nbs.r = -100;
        assert_int_equal(gmp_chan_send(nbs.c1, &one), 0);
        assert_int_equal(gmp_go(nbs_fn, NULL), 0);
        if (close2)
            assert_int_equal(gmp_chan_close(nbs.c2), 0);
        else
            assert_int_equal(gmp_chan_send(nbs.c2, &one), 0);
        gmp_case_t cs[2] = {mkcase(nbs.c1, GMP_RECV, &a),
                            mkcase(nbs.c2, GMP_RECV, &b)};
        int r = gmp_select(cs, 2, GMP_FOREVER);
        assert_in_range(r, 0, 1);
        assert_int_equal(h_wait(&nbs.done, i + 1), 0);
        if (nbs.r != 0 && nbs.r != 1)
            fail_msg("round %ld (%s): the poll returned %d", i,
                     close2 ? "close" : "send", nbs.r);
        /* Count the 1s taken: from c1 once at most; from c2 (when sent)
         * at most once; the rest is still buffered. */
        int64_t took1 = 0;
        int64_t main_took = cs[r].result == 0 ? 1 : 0;
        int64_t g_took = nbs.res == 0 ? 1 : 0;
        if (cs[r].result == 0) {
            assert_int_equal(r == 0 ? a : b, 1);
        } else {
            assert_int_equal(cs[r].result, GMP_ECLOSED);
            assert_int_equal(r, 1);         /* only c2 is ever closed */
            assert_int_equal(b, 0);
        }
        if (nbs.res == 0) {
            assert_int_equal(nbs.v, 1);
        } else {
            assert_int_equal(nbs.res, GMP_ECLOSED);
            assert_int_equal(nbs.r, 1);
            assert_int_equal(nbs.v, 0);
        }
        took1 = main_took + g_took;
        int64_t left = (int64_t)gmp_chan_len(nbs.c1) +
                       (int64_t)gmp_chan_len(nbs.c2);
        assert_int_equal(took1 + left, close2 ? 1 : 2);
        if (!close2)
            assert_int_equal(took1, 2);
        gmp_chan_free(nbs.c1);
        gmp_chan_free(nbs.c2);
    }
    assert_int_equal(h_wait_quiet(), 0);
}

/* ---- First come, first served with select waiters (procs 1) ---------------- */

#define FIFO_N 16

static struct {
    gmp_chan_t *c, *never;
    bool senders;
    _Atomic int64_t started, queued, done;
    long got[FIFO_N];
} fifo;

static void fifo_waiter(void *arg)
{
    long i = (long)(intptr_t)arg, v = -1, o = -1;
    gmp_preempt_disable();
    atomic_fetch_add(&fifo.started, 1);
    if (i % 3 == 0) {
        /* A plain call between the selects. */
        if (fifo.senders)
            G_CHECK(gmp_chan_send(fifo.c, &i) == 0);
        else
            G_CHECK(gmp_chan_recv(fifo.c, &v) == 0);
    } else {
        gmp_case_t cs[3] = {mkcase(fifo.never, GMP_RECV, &o),
                            mkcase(fifo.c, fifo.senders ? GMP_SEND : GMP_RECV,
                                   fifo.senders ? &i : &v),
                            mkcase(NULL, GMP_RECV, &o)};
        if (i % 3 == 2) {
            gmp_case_t t = cs[0];
            cs[0] = cs[1];
            cs[1] = t;
        }
        int r = gmp_select(cs, 3, GMP_FOREVER);
        G_CHECK(r == (i % 3 == 2 ? 0 : 1));
        G_CHECK(r >= 0 && r < 3 && cs[r].result == 0);
    }
    gmp_preempt_enable();
    G_CHECK(o == -1);
    if (!fifo.senders)
        fifo.got[i] = v;
    atomic_fetch_add(&fifo.done, 1);
}

/* As in test_chan.c: at procs 1 waiter i is parked before i + 1 starts. */
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

static void test_select_fifo_with_plain_waiters_procs1(void **state)
{
    bad_reset();
    for (int round = 0; round < 20; round++) {
        size_t cap = (round & 2) ? 2 : 0;
        bool senders = round & 1;
        fifo.c = h_chan(sizeof(long), cap);
        fifo.never = h_chan(sizeof(long), 0);
        fifo.senders = senders;
        atomic_store(&fifo.started, 0);
        atomic_store(&fifo.queued, 0);
        atomic_store(&fifo.done, 0);
        for (int i = 0; i < FIFO_N; i++)
            fifo.got[i] = -1;
        if (senders)
            for (long i = 0; i < (long)cap; i++) {
                long v = 100 + i;
                assert_int_equal(gmp_chan_send(fifo.c, &v), 0);
            }
        assert_int_equal(gmp_go(fifo_spawner, NULL), 0);
        assert_int_equal(h_wait(&fifo.queued, 1), 0);
        if (senders) {
            for (long i = 0; i < (long)cap; i++) {
                long v = -1;
                assert_int_equal(gmp_chan_recv(fifo.c, &v), 0);
                assert_int_equal(v, 100 + i);
            }
            for (long i = 0; i < FIFO_N; i++) {
                long v = -1;
                assert_int_equal(gmp_chan_recv(fifo.c, &v), 0);
                if (v != i)
                    fail_msg("cap %zu: receive %ld got waiter %ld's value",
                             cap, i, v);
            }
        } else {
            for (long i = 0; i < FIFO_N; i++)
                assert_int_equal(gmp_chan_send(fifo.c, &i), 0);
        }
        assert_int_equal(h_wait(&fifo.done, FIFO_N), 0);
        if (!senders)
            for (long i = 0; i < FIFO_N; i++)
                if (fifo.got[i] != i)
                    fail_msg("cap %zu: waiter %ld got %ld", cap, i,
                             fifo.got[i]);
        long v = 0;
        assert_int_equal(gmp_chan_trysend(fifo.never, &v), GMP_EAGAIN);
        assert_int_equal(h_wait_quiet(), 0);
        gmp_chan_free(fifo.c);
        gmp_chan_free(fifo.never);
        ASSERT_NO_BAD();
    }
}

/* ---- No runtime: plain threads only ---------------------------------------- */

static struct {
    gmp_chan_t *a, *b, *c;
    long n;
    _Atomic int64_t done;
} nr;

/* Selects for ever: {recv a, recv b} while it holds nothing, {recv a,
 * send c} while it holds a value to echo (the other case a NULL channel);
 * stops when a is closed. */
static void nr_selector(void *arg)
{
    (void)arg;
    bool pending = false;
    long echo = -1;
    for (;;) {
        long ra = -1, rb = -1;
        gmp_case_t cs[3] = {mkcase(nr.a, GMP_RECV, &ra),
                            mkcase(pending ? NULL : nr.b, GMP_RECV, &rb),
                            mkcase(pending ? nr.c : NULL, GMP_SEND, &echo)};
        int r = gmp_select(cs, 3, GMP_FOREVER);
        G_CHECK(r >= 0 && r < 3);
        if (r < 0 || r > 2)
            break;
        if (r == 0) {
            G_CHECK(cs[0].result == GMP_ECLOSED && ra == 0 && rb == -1);
            G_CHECK(!pending);
            break;
        }
        G_CHECK(cs[r].result == 0);
        G_CHECK(ra == -1);
        if (r == 1) {
            G_CHECK(!pending);
            echo = rb;
            pending = true;
        } else {
            G_CHECK(pending && rb == -1);
            pending = false;
        }
    }
    atomic_fetch_add(&nr.done, 1);
}

/* Every blocking call works on a plain OS thread: a thread and the test
 * thread exchange values through blocking selects while no runtime runs;
 * a close wakes the selecting thread. */
static void test_select_plain_threads_without_runtime(void **state)
{
    bad_reset();
    assert_int_equal(gmp_procs(), 0);
    const size_t bcaps[] = {0, 1};
    for (int k = 0; k < 2; k++) {
        struct th t;
        nr.a = h_chan(sizeof(long), 0);
        nr.b = h_chan(sizeof(long), bcaps[k]);
        nr.c = h_chan(sizeof(long), k);
        nr.n = H_SCALE(3000L);
        atomic_store(&nr.done, 0);
        th_start(&t, nr_selector, NULL);
        for (long i = 0; i < nr.n; i++) {
            long v = i, got = -1;
            gmp_case_t cs[2] = {mkcase(nr.b, GMP_SEND, &v),
                                mkcase(NULL, GMP_RECV, &got)};
            assert_int_equal(gmp_select(cs, 2, GMP_FOREVER), 0);
            assert_int_equal(cs[0].result, 0);
            cs[0] = mkcase(nr.c, GMP_RECV, &got);
            assert_int_equal(gmp_select(cs, 1, GMP_FOREVER), 0);
            assert_int_equal(cs[0].result, 0);
            assert_int_equal(got, i);
        }
        assert_int_equal(gmp_chan_close(nr.a), 0);
        assert_int_equal(h_wait(&nr.done, 1), 0);
        th_join(&t);
        gmp_chan_free(nr.a);
        gmp_chan_free(nr.b);
        gmp_chan_free(nr.c);
    }
    assert_int_equal(gmp_procs(), 0);
    ASSERT_NO_BAD();
}

int main(void)
{
#define COMMON                                                          \
    cmocka_unit_test(test_select_bad_arguments),                       \
    cmocka_unit_test(test_select_positive_timeout_times_out),          \
    cmocka_unit_test(test_select_poll_nothing_ready),                  \
    cmocka_unit_test(test_select_nil_channels),                        \
    cmocka_unit_test(test_select_poll_one_ready),                      \
    cmocka_unit_test(test_select_poll_pairs_with_blocked_partner),     \
    cmocka_unit_test(test_select_closed_channels),                     \
    cmocka_unit_test(test_select_uniform_choice),                      \
    cmocka_unit_test(test_select_same_channel_cases),                  \
    cmocka_unit_test(test_select_duplicate_channel_blocking),          \
    cmocka_unit_test(test_select_many_cases),                          \
    cmocka_unit_test(test_select_blocking_woken_by_each_case),         \
    cmocka_unit_test(test_select_close_wakes_every_select),            \
    cmocka_unit_test(test_select_self_select),                         \
    cmocka_unit_test(test_select_routers_conserve_values),             \
    cmocka_unit_test(test_select_nonblock_select_race)

    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_select_bad_arguments),
        cmocka_unit_test(test_select_positive_timeout_times_out),
        cmocka_unit_test(test_select_poll_nothing_ready),
        cmocka_unit_test(test_select_nil_channels),
        cmocka_unit_test(test_select_plain_threads_without_runtime),
    };
    const struct CMUnitTest one[] = {
        COMMON,
        cmocka_unit_test(test_select_fifo_with_plain_waiters_procs1),
    };
    const struct CMUnitTest many[] = {
        COMMON,
    };
    /* No runtime first: nothing has started one yet. */
    return cmocka_run_group_tests_name("select no runtime", none, NULL, NULL)
         + cmocka_run_group_tests_name("select procs=1", one, h_up_1, h_down)
         + cmocka_run_group_tests_name("select procs=2", many, h_up_2, h_down)
         + cmocka_run_group_tests_name("select procs=4", many, h_up_4, h_down);
}
