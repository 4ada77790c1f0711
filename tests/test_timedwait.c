/*
 * test_timedwait.c - the timed waits: gmp_select and gmp_cond_timedwait
 * with a positive timeout, at procs 1, 2 and 4, in goroutines, on plain
 * threads and with no runtime (gmp_sleep and the timers under all of
 * them: test_timer.c):
 *   - select with a positive timeout: only NULL channels (or none) time
 *     out no earlier than asked; a timed-out select leaves no waiter on
 *     its channels; a timeout racing a send has exactly one outcome (the
 *     value received by the select, or GMP_ETIMEDOUT with the value still
 *     to come: the sender blocked, nothing lost, nothing twice); a timed
 *     send and a timed receive on one unbuffered channel always agree;
 *   - gmp_cond_timedwait: times out no earlier than asked, with the mutex
 *     held; a signal before the timeout gives 0; a timed-out waiter does
 *     not swallow a signal meant for a later waiter, also when the signal
 *     races the timeout; broadcast over timed and untimed waiters;
 *   - and each leaves no timer behind (white-box).
 *
 * No assertion bounds how long anything took from above: durations are
 * checked from below only ("no earlier than"). Goroutines and helper
 * threads only record (atomics, and G_CHECK for a failed expectation);
 * the test thread waits and asserts.
 */
#include "harness.h"

#include <pthread.h>

#include "internal.h"

/* ---- Select with a timeout ---------------------------------------------- */

static void sel_nil(void *arg)
{
    (void)arg;
    static const int64_t tmos[] = {1, 1000, 99999, 1000000, 3000001};
    for (int t = 0; t < 5; t++) {
        long v = -1, s = 5;
        gmp_case_t cs[3] = {{NULL, GMP_RECV, &v, 0},
                            {NULL, GMP_SEND, &s, 0},
                            {NULL, GMP_RECV, NULL, 0}};
        struct span sp = span_start();
        G_CHECK(gmp_select(cs, 3, tmos[t]) == GMP_ETIMEDOUT);
        G_CHECK(span_at_least(sp, tmos[t]));
        G_CHECK(v == -1);
        sp = span_start();
        G_CHECK(gmp_select(NULL, 0, tmos[t]) == GMP_ETIMEDOUT);
        G_CHECK(span_at_least(sp, tmos[t]));
        sp = span_start();
        G_CHECK(gmp_select(cs, 0, tmos[t]) == GMP_ETIMEDOUT);
        G_CHECK(span_at_least(sp, tmos[t]));
    }
}

/* A select over NULL channels only (or no case at all) with a positive
 * timeout returns GMP_ETIMEDOUT, no earlier than the timeout: in
 * goroutines, on a plain thread and on the test thread. */
static void test_select_timeout_nil_channels(void **state)
{
    bad_reset();
    assert_int_equal(h_everywhere(sel_nil, NULL, gmp_procs() > 0 ? 3 : 0), 0);
    h_assert_quiet_timers();
}

static struct {
    gmp_chan_t *a, *b;              /* unbuffered, nobody else uses them */
    gmp_chan_t *full;               /* cap 1, full */
} sg;

static _Atomic int64_t sel_done;

static void sel_gone(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        long r = -1, s = i, t = -1;
        gmp_case_t k[4] = {{sg.a, GMP_RECV, &r, 0},
                           {sg.b, GMP_SEND, &s, 0},
                           {sg.full, GMP_SEND, &s, 0},
                           {sg.a, GMP_RECV, &t, 0}};
        int64_t tmo = (i % 5 + 1) * 20 * US;
        struct span sp = span_start();
        G_CHECK(gmp_select(k, 4, tmo) == GMP_ETIMEDOUT);
        G_CHECK(span_at_least(sp, tmo));
        G_CHECK(r == -1 && t == -1);
        /* No receiver is left on a, no sender on b. */
        G_CHECK(gmp_chan_trysend(sg.a, &s) == GMP_EAGAIN);
        G_CHECK(gmp_chan_tryrecv(sg.b, &r) == GMP_EAGAIN);
        G_CHECK(r == -1);
        G_CHECK(gmp_chan_len(sg.full) == 1);
    }
    atomic_fetch_add(&sel_done, 1);
}

/* A select that timed out has left its channels: afterwards a trysend
 * finds no receiver, a tryrecv no sender, and nothing was performed. */
static void test_select_timeout_leaves_no_waiter(void **state)
{
    bad_reset();
    atomic_store(&sel_done, 0);
    sg.a = h_chan(sizeof(long), 0);
    sg.b = h_chan(sizeof(long), 0);
    sg.full = h_chan(sizeof(long), 1);
    long v = 77, r = -1;
    assert_int_equal(gmp_chan_send(sg.full, &v), 0);
    struct th t;
    th_start(&t, sel_gone, NULL);
    assert_int_equal(h_wait(&sel_done, 1), 0);
    th_join(&t);
    assert_int_equal(gmp_go(sel_gone, NULL), 0);
    assert_int_equal(h_wait(&sel_done, 2), 0);
    h_assert_quiet_timers();
    assert_int_equal(gmp_chan_trysend(sg.a, &v), GMP_EAGAIN);
    assert_int_equal(gmp_chan_tryrecv(sg.b, &r), GMP_EAGAIN);
    assert_int_equal(gmp_chan_tryrecv(sg.full, &r), 0);
    assert_int_equal(r, 77);
    gmp_chan_free(sg.a);
    gmp_chan_free(sg.b);
    gmp_chan_free(sg.full);
    ASSERT_NO_BAD();
}

/* A receiving select with a timeout against a sender that sends after a
 * similar delay, many times, per pair in lockstep (an ack after each
 * value). Either the select receives the value, or it times out with
 * the element untouched and, on an unbuffered channel, the sender still
 * blocked; the value then arrives by a second receive. Either way the
 * channel holds nothing more afterwards: nothing lost, nothing twice. */
#define RACE_PAIRS 4
#define RACE_ITERS (H_SLOW ? 40 : 400)

struct race {
    gmp_chan_t *c, *ack;
    uint64_t seed;
    _Atomic int64_t sent, by_select, by_drain, done;
};

static struct race races[RACE_PAIRS];

static void race_receiver(void *arg)
{
    struct race *r = arg;
    uint64_t x = r->seed;
    bool unbuffered = gmp_chan_cap(r->c) == 0;
    for (long i = 0; i < RACE_ITERS; i++) {
        long v = -1;
        int64_t tmo = 10 * US + (int64_t)(xorshift(&x) % (300 * US));
        gmp_case_t k = {r->c, GMP_RECV, &v, 12345};
        int rc = gmp_select(&k, 1, tmo);
        if (rc == 0) {
            G_CHECK(k.result == 0);
            G_CHECK(v == i);
            atomic_fetch_add(&r->by_select, 1);
        } else {
            G_CHECK(rc == GMP_ETIMEDOUT);
            G_CHECK(v == -1);
            if (unbuffered)             /* nobody took it: still sending */
                G_CHECK(atomic_load(&r->sent) == i);
            gmp_case_t d = {r->c, GMP_RECV, &v, 12345};
            /* The value is on its way: a long timeout only turns a lost
             * value into a failed check instead of a hang. */
            G_CHECK(gmp_select(&d, 1, 20000 * MS) == 0);
            G_CHECK(d.result == 0);
            G_CHECK(v == i);
            atomic_fetch_add(&r->by_drain, 1);
        }
        long extra = -1;
        G_CHECK(gmp_chan_tryrecv(r->c, &extra) == GMP_EAGAIN);
        G_CHECK(gmp_chan_send(r->ack, NULL) == 0);
    }
    atomic_fetch_add(&r->done, 1);
}

static void race_sender(void *arg)
{
    struct race *r = arg;
    uint64_t x = r->seed * 31 + 7;
    for (long i = 0; i < RACE_ITERS; i++) {
        gmp_sleep(10 * US + (int64_t)(xorshift(&x) % (300 * US)));
        G_CHECK(gmp_chan_send(r->c, &i) == 0);
        atomic_store(&r->sent, i + 1);
        G_CHECK(gmp_chan_recv(r->ack, NULL) == 0);
    }
    atomic_fetch_add(&r->done, 1);
}

static void test_select_timeout_races_send(void **state)
{
    bad_reset();
    struct th t[RACE_PAIRS];
    for (int p = 0; p < RACE_PAIRS; p++) {
        struct race *r = &races[p];
        r->c = h_chan(sizeof(long), p & 1);      /* unbuffered and cap 1 */
        r->ack = h_chan(0, 0);
        r->seed = 0x1234567ULL * (uint64_t)(p + 1);
        atomic_store(&r->sent, 0);
        atomic_store(&r->by_select, 0);
        atomic_store(&r->by_drain, 0);
        atomic_store(&r->done, 0);
        assert_int_equal(gmp_go(race_receiver, r), 0);
        if (p < 2)                      /* senders: plain threads first */
            th_start(&t[p], race_sender, r);
        else
            assert_int_equal(gmp_go(race_sender, r), 0);
    }
    for (int p = 0; p < RACE_PAIRS; p++)
        assert_int_equal(h_wait(&races[p].done, 2), 0);
    for (int p = 0; p < 2; p++)
        th_join(&t[p]);
    h_assert_quiet_timers();
    for (int p = 0; p < RACE_PAIRS; p++) {
        struct race *r = &races[p];
        assert_int_equal(atomic_load(&r->sent), RACE_ITERS);
        assert_int_equal(atomic_load(&r->by_select) +
                             atomic_load(&r->by_drain), RACE_ITERS);
        assert_int_equal(gmp_chan_len(r->c), 0);
        gmp_chan_free(r->c);
        gmp_chan_free(r->ack);
    }
}

/* A sending select and a receiving select, both with timeouts of similar
 * length, on one unbuffered channel: a send completes only with a
 * receive, so both succeed (the value arrives) or both time out. The two
 * meet at a barrier after each round. */
#define DUEL_ITERS (H_SLOW ? 40 : 400)

static struct {
    gmp_chan_t *c, *bar;
    int8_t rs[DUEL_ITERS], rr[DUEL_ITERS];
    long got[DUEL_ITERS];
    _Atomic int64_t done;
} duel;

static int8_t outcome(int rc)
{
    return rc == 0 ? 1 : rc == GMP_ETIMEDOUT ? 0 : -1;
}

static void duel_sender(void *arg)
{
    uint64_t x = (uint64_t)(uintptr_t)arg | 1;
    for (long i = 0; i < DUEL_ITERS; i++) {
        long v = i;
        int64_t tmo = 5 * US + (int64_t)(xorshift(&x) % (200 * US));
        gmp_case_t k = {duel.c, GMP_SEND, &v, 12345};
        duel.rs[i] = outcome(gmp_select(&k, 1, tmo));
        G_CHECK(gmp_chan_send(duel.bar, NULL) == 0);
    }
    atomic_fetch_add(&duel.done, 1);
}

static void duel_receiver(void *arg)
{
    uint64_t x = (uint64_t)(uintptr_t)arg * 3 + 1;
    for (long i = 0; i < DUEL_ITERS; i++) {
        long v = -1;
        int64_t tmo = 5 * US + (int64_t)(xorshift(&x) % (200 * US));
        gmp_case_t k = {duel.c, GMP_RECV, &v, 12345};
        duel.rr[i] = outcome(gmp_select(&k, 1, tmo));
        duel.got[i] = v;
        G_CHECK(gmp_chan_recv(duel.bar, NULL) == 0);
    }
    atomic_fetch_add(&duel.done, 1);
}

static void test_select_timeout_send_and_receive_agree(void **state)
{
    bad_reset();
    duel.c = h_chan(sizeof(long), 0);
    duel.bar = h_chan(0, 0);
    for (int round = 0; round < 2; round++) {
        struct th t;
        atomic_store(&duel.done, 0);
        memset(duel.rs, 9, sizeof duel.rs);
        memset(duel.rr, 9, sizeof duel.rr);
        assert_int_equal(gmp_go(duel_receiver, (void *)(uintptr_t)(round + 5)),
                         0);
        if (round)
            th_start(&t, duel_sender, (void *)(uintptr_t)77);
        else
            assert_int_equal(gmp_go(duel_sender, (void *)(uintptr_t)77), 0);
        assert_int_equal(h_wait(&duel.done, 2), 0);
        if (round)
            th_join(&t);
        ASSERT_NO_BAD();
        for (int i = 0; i < DUEL_ITERS; i++) {
            if (duel.rs[i] != duel.rr[i] || duel.rs[i] < 0)
                print_error("round %d: send %d, receive %d\n", i, duel.rs[i],
                            duel.rr[i]);
            assert_int_equal(duel.rs[i], duel.rr[i]);
            assert_true(duel.rs[i] == 0 || duel.rs[i] == 1);
            assert_int_equal(duel.got[i], duel.rs[i] ? i : -1);
        }
    }
    h_assert_quiet_timers();
    assert_int_equal(gmp_chan_len(duel.c), 0);
    gmp_chan_free(duel.c);
    gmp_chan_free(duel.bar);
}

/* ---- Cond: timed waits -------------------------------------------------- */

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    int inside;                     /* under mu */
    _Atomic int64_t done;
} ct;

static void ct_waiter(void *arg)
{
    static const int64_t tmos[] = {1, 1000, 99999, 1000000, 2000003};
    int rounds = (int)(intptr_t)arg;
    for (int r = 0; r < rounds; r++)
        for (int t = 0; t < 5; t++) {
            gmp_mutex_lock(&ct.mu);
            G_CHECK(ct.inside++ == 0);
            ct.inside--;
            struct span s = span_start();
            int rc = gmp_cond_timedwait(&ct.cv, &ct.mu, tmos[t]);
            G_CHECK(rc == GMP_ETIMEDOUT);
            G_CHECK(span_at_least(s, tmos[t]));
            G_CHECK(gmp_mutex_trylock(&ct.mu) == GMP_EBUSY);
            G_CHECK(ct.inside++ == 0);      /* held: nobody else inside */
            ct.inside--;
            gmp_mutex_unlock(&ct.mu);
        }
    atomic_fetch_add(&ct.done, 1);
}

/* With nobody signalling, timed waits on one cond by goroutines, plain
 * threads and the test thread all return GMP_ETIMEDOUT, no earlier than
 * asked, with the mutex held (trylock fails, and no two are inside). */
static void test_cond_timedwait_times_out_holding_mutex(void **state)
{
    bad_reset();
    memset(&ct, 0, sizeof ct);
    struct th t[2];
    int g = gmp_procs() > 0 ? 6 : 0;
    for (int i = 0; i < g; i++)
        assert_int_equal(gmp_go(ct_waiter, (void *)(intptr_t)4), 0);
    for (int i = 0; i < 2; i++)
        th_start(&t[i], ct_waiter, (void *)(intptr_t)4);
    ct_waiter((void *)(intptr_t)2);
    assert_int_equal(h_wait(&ct.done, g + 3), 0);
    for (int i = 0; i < 2; i++)
        th_join(&t[i]);
    h_assert_quiet_timers();
}

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    _Atomic int64_t reg, done, rc, held;
} sb;

static void sb_waiter(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&sb.mu);
    atomic_store(&sb.reg, 1);
    int rc = gmp_cond_timedwait(&sb.cv, &sb.mu, 20000 * MS);
    atomic_store(&sb.held, gmp_mutex_trylock(&sb.mu));
    gmp_mutex_unlock(&sb.mu);
    atomic_store(&sb.rc, rc);
    atomic_fetch_add(&sb.done, 1);
}

/* A waiter with a 20 s timeout, signalled (or broadcast to) once it is
 * in the wait, returns 0 with the mutex held. */
static void test_cond_timedwait_signal_before_timeout(void **state)
{
    int rounds = gmp_procs() > 0 ? 24 : 8;
    for (int i = 0; i < rounds; i++) {
        struct runner r;
        atomic_store(&sb.reg, 0);
        atomic_store(&sb.done, 0);
        atomic_store(&sb.rc, 12345);
        atomic_store(&sb.held, 12345);
        run_as(&r, gmp_procs() == 0 || (i & 1), sb_waiter, NULL);
        assert_int_equal(h_wait(&sb.reg, 1), 0);
        gmp_mutex_lock(&sb.mu);             /* it is in the wait */
        if (i & 2) {
            if (i & 4)
                gmp_cond_broadcast(&sb.cv);
            else
                gmp_cond_signal(&sb.cv);
            gmp_mutex_unlock(&sb.mu);
        } else {
            gmp_mutex_unlock(&sb.mu);
            if (i & 4)
                gmp_cond_broadcast(&sb.cv);
            else
                gmp_cond_signal(&sb.cv);
        }
        assert_int_equal(h_wait(&sb.done, 1), 0);
        run_join(&r);
        assert_int_equal(atomic_load(&sb.rc), 0);
        assert_int_equal(atomic_load(&sb.held), GMP_EBUSY);
    }
    h_assert_quiet_timers();
}

/* Timed waiters A (one to three) and an untimed waiter B on one cond. */
static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    int64_t tmo;
    _Atomic int64_t a_reg, a_done, a_timedout, a_zero;
    _Atomic int64_t b_reg, b_done;
} tk;

static void tk_a(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&tk.mu);
    atomic_fetch_add(&tk.a_reg, 1);
    struct span s = span_start();
    int rc = gmp_cond_timedwait(&tk.cv, &tk.mu, tk.tmo);
    G_CHECK(gmp_mutex_trylock(&tk.mu) == GMP_EBUSY);
    if (rc == GMP_ETIMEDOUT) {
        G_CHECK(span_at_least(s, tk.tmo));
        atomic_fetch_add(&tk.a_timedout, 1);
    } else {
        G_CHECK(rc == 0);
        atomic_fetch_add(&tk.a_zero, 1);
    }
    gmp_mutex_unlock(&tk.mu);
    atomic_fetch_add(&tk.a_done, 1);
}

static void tk_b(void *arg)
{
    (void)arg;
    gmp_mutex_lock(&tk.mu);
    atomic_fetch_add(&tk.b_reg, 1);
    gmp_cond_wait(&tk.cv, &tk.mu);
    G_CHECK(gmp_mutex_trylock(&tk.mu) == GMP_EBUSY);
    gmp_mutex_unlock(&tk.mu);
    atomic_fetch_add(&tk.b_done, 1);
}

static void tk_reset(int64_t tmo)
{
    tk.tmo = tmo;
    atomic_store(&tk.a_reg, 0);
    atomic_store(&tk.a_done, 0);
    atomic_store(&tk.a_timedout, 0);
    atomic_store(&tk.a_zero, 0);
    atomic_store(&tk.b_reg, 0);
    atomic_store(&tk.b_done, 0);
}

/* Waits until n waiters registered under the mutex, then takes and
 * drops it: each of them has queued itself in the wait since. */
static void tk_queued(_Atomic int64_t *reg, int64_t n)
{
    assert_int_equal(h_wait(reg, n), 0);
    gmp_mutex_lock(&tk.mu);
    gmp_mutex_unlock(&tk.mu);
}

/* Timed waiters that queued first and timed out do not take the signal
 * meant for an untimed waiter B: one signal wakes B. B queues either
 * while the timed ones still wait (even rounds), or after they timed out
 * and a signal sent to nobody was lost (odd rounds: B must then not wake
 * before the next signal). Nothing wakes B but a signal. */
static void test_cond_timed_out_waiter_keeps_no_signal(void **state)
{
    bool threads_only = gmp_procs() == 0;
    int rounds = threads_only ? 6 : 12;
    for (int i = 0; i < rounds; i++) {
        int na = 1 + i % 3;
        struct runner ra[3], rb;
        tk_reset(1 * MS + (i % 4) * 300 * US);
        for (int k = 0; k < na; k++)
            run_as(&ra[k], threads_only || ((i + k) & 1), tk_a, NULL);
        tk_queued(&tk.a_reg, na);
        if (!(i & 1)) {
            run_as(&rb, threads_only || (i & 2), tk_b, NULL);
            tk_queued(&tk.b_reg, 1);
        }
        assert_int_equal(h_wait(&tk.a_done, na), 0);
        assert_int_equal(atomic_load(&tk.a_timedout), na);
        if (i & 1) {
            gmp_cond_signal(&tk.cv);        /* nobody waits: lost */
            run_as(&rb, threads_only || (i & 2), tk_b, NULL);
            tk_queued(&tk.b_reg, 1);
        }
        assert_int_equal(h_still(), 0);
        assert_int_equal(atomic_load(&tk.b_done), 0);
        gmp_cond_signal(&tk.cv);
        assert_int_equal(h_wait(&tk.b_done, 1), 0);
        for (int k = 0; k < na; k++)
            run_join(&ra[k]);
        run_join(&rb);
    }
    h_assert_quiet_timers();
}

/* The signal races the timeout: a timed waiter A queues first, an untimed
 * B second, and the test thread signals once after a delay close to A's
 * timeout. If A returned 0 it took the signal and B must still sleep
 * until a second one; if A timed out the signal was B's and B wakes. */
static void test_cond_signal_races_timeout(void **state)
{
    bool threads_only = gmp_procs() == 0;
    int rounds = H_SLOW || threads_only ? 16 : 60;
    uint64_t x = 0xfeedULL;
    int took = 0, passed = 0;
    for (int i = 0; i < rounds; i++) {
        struct runner ra, rb;
        tk_reset(200 * US + (int64_t)(xorshift(&x) % (400 * US)));
        int64_t delay = 200 * US + (int64_t)(xorshift(&x) % (400 * US));
        run_as(&ra, threads_only || (i & 1), tk_a, NULL);
        tk_queued(&tk.a_reg, 1);
        run_as(&rb, threads_only || (i & 2), tk_b, NULL);
        tk_queued(&tk.b_reg, 1);
        gmp_sleep(delay);
        gmp_cond_signal(&tk.cv);
        assert_int_equal(h_wait(&tk.a_done, 1), 0);
        if (atomic_load(&tk.a_zero) == 1) {
            took++;
            assert_int_equal(h_still(), 0);
            assert_int_equal(atomic_load(&tk.b_done), 0);
            gmp_cond_signal(&tk.cv);
        } else {
            passed++;
            assert_int_equal(atomic_load(&tk.a_timedout), 1);
        }
        assert_int_equal(h_wait(&tk.b_done, 1), 0);
        run_join(&ra);
        run_join(&rb);
    }
    assert_int_equal(took + passed, rounds);
    h_assert_quiet_timers();
}

/* Broadcast over a mix of waiters: untimed, 20 s timeouts, GMP_FOREVER,
 * and short timeouts that expire first. Every waiter still waiting gets
 * 0 from the broadcast; the short ones got GMP_ETIMEDOUT. */
#define MIX_N 16

static struct {
    gmp_mutex_t mu;
    gmp_cond_t cv;
    int inside;                     /* under mu */
    _Atomic int64_t reg, done, short_done;
    _Atomic int64_t rc[MIX_N];
} mix;

static int mix_kind(int i)
{
    return i % 4;   /* 0 untimed, 1 20 s, 2 short, 3 GMP_FOREVER */
}

static void mix_waiter(void *arg)
{
    int i = (int)(intptr_t)arg;
    gmp_mutex_lock(&mix.mu);
    atomic_fetch_add(&mix.reg, 1);
    int rc;
    switch (mix_kind(i)) {
    case 0:
        gmp_cond_wait(&mix.cv, &mix.mu);
        rc = 0;
        break;
    case 1:
        rc = gmp_cond_timedwait(&mix.cv, &mix.mu, 20000 * MS);
        break;
    case 2:
        rc = gmp_cond_timedwait(&mix.cv, &mix.mu, (1 + i % 3) * MS);
        break;
    default:
        rc = gmp_cond_timedwait(&mix.cv, &mix.mu, GMP_FOREVER);
        break;
    }
    G_CHECK(gmp_mutex_trylock(&mix.mu) == GMP_EBUSY);
    G_CHECK(mix.inside++ == 0);
    mix.inside--;
    gmp_mutex_unlock(&mix.mu);
    atomic_store(&mix.rc[i], rc);
    if (mix_kind(i) == 2)
        atomic_fetch_add(&mix.short_done, 1);
    atomic_fetch_add(&mix.done, 1);
}

static void test_cond_broadcast_mixed_timed_and_untimed(void **state)
{
    bad_reset();
    bool threads_only = gmp_procs() == 0;
    int n = threads_only ? 8 : MIX_N;
    int nshort = 0;
    for (int i = 0; i < n; i++)
        nshort += mix_kind(i) == 2;
    for (int round = 0; round < 4; round++) {
        struct runner r[MIX_N];
        mix.inside = 0;
        atomic_store(&mix.reg, 0);
        atomic_store(&mix.done, 0);
        atomic_store(&mix.short_done, 0);
        for (int i = 0; i < n; i++) {
            atomic_store(&mix.rc[i], 12345);
            run_as(&r[i], threads_only || (i + round) % 3 == 0, mix_waiter,
                   (void *)(intptr_t)i);
        }
        assert_int_equal(h_wait(&mix.reg, n), 0);
        gmp_mutex_lock(&mix.mu);            /* all are in the wait */
        gmp_mutex_unlock(&mix.mu);
        assert_int_equal(h_wait(&mix.short_done, nshort), 0);
        assert_int_equal(atomic_load(&mix.done), nshort);
        if (round & 1) {
            gmp_mutex_lock(&mix.mu);
            gmp_cond_broadcast(&mix.cv);
            gmp_mutex_unlock(&mix.mu);
        } else {
            gmp_cond_broadcast(&mix.cv);
        }
        assert_int_equal(h_wait(&mix.done, n), 0);
        for (int i = 0; i < n; i++) {
            run_join(&r[i]);
            assert_int_equal(atomic_load(&mix.rc[i]),
                             mix_kind(i) == 2 ? GMP_ETIMEDOUT : 0);
        }
    }
    h_assert_quiet_timers();
}

int main(void)
{
    /* Plain threads only, no runtime: every blocking call works there. */
    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_select_timeout_nil_channels),
        cmocka_unit_test(test_cond_timedwait_times_out_holding_mutex),
        cmocka_unit_test(test_cond_timedwait_signal_before_timeout),
        cmocka_unit_test(test_cond_timed_out_waiter_keeps_no_signal),
        cmocka_unit_test(test_cond_signal_races_timeout),
        cmocka_unit_test(test_cond_broadcast_mixed_timed_and_untimed),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_select_timeout_nil_channels),
        cmocka_unit_test(test_select_timeout_leaves_no_waiter),
        cmocka_unit_test(test_select_timeout_races_send),
        cmocka_unit_test(test_select_timeout_send_and_receive_agree),
        cmocka_unit_test(test_cond_timedwait_times_out_holding_mutex),
        cmocka_unit_test(test_cond_timedwait_signal_before_timeout),
        cmocka_unit_test(test_cond_timed_out_waiter_keeps_no_signal),
        cmocka_unit_test(test_cond_signal_races_timeout),
        cmocka_unit_test(test_cond_broadcast_mixed_timed_and_untimed),
    };
    return cmocka_run_group_tests_name("timedwait no runtime", none, NULL,
                                       NULL)
         + cmocka_run_group_tests_name("timedwait procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("timedwait procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("timedwait procs=4", t, h_up_4, h_down);
}
