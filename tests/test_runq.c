/*
 * test_runq.c - the per-P run queue and the global queue, alone (white
 * box, in the manner of Go's RunSchedLocalQueueTest,
 * RunSchedLocalQueueStealTest and RunSchedLocalQueueEmptyTest).
 *
 * No runtime runs here: each test builds a struct schedt and struct p by
 * hand and moves fake struct g items, identified by their index in an
 * array, through gmp__runqput/get/steal and gmp__globrunq*. Claims:
 *   - order: runnext first, then the ring in FIFO order; a new runnext
 *     kicks the old one to the ring's tail;
 *   - the 257th ring put spills exactly 129 Gs (the older half of the ring
 *     and the new one, in order) to the global queue;
 *   - globrunqget takes min(len/procs + 1, len, max, 128);
 *   - a spill sends the Gs that have run to a list the global queue
 *     serves first, the others (and every direct put) to its FIFO;
 *     single pulls (the 61st tick) serve the two in turn;
 *   - a steal takes half (rounded up) of the victim's ring, and runnext
 *     only when asked to and the ring is empty;
 *   - under a racing owner and thieves every G is taken exactly once;
 *   - runqempty never reports a queue empty that always holds a G.
 */
#include "harness.h"

#include <pthread.h>

#include "internal.h"

/* ---- Hand-built objects ------------------------------------------------- */

static void *xalign(size_t size)
{
    void *mem = NULL;
    if (posix_memalign(&mem, GMP_CACHELINE, size) != 0)
        return NULL;
    memset(mem, 0, size);
    return mem;
}

static struct schedt *sched_new(int procs)
{
    struct schedt *s = xalign(sizeof *s);
    assert_non_null(s);
    s->procs = procs;
    return s;
}

static struct p *p_new(int id)
{
    struct p *pp = xalign(sizeof *pp);
    assert_non_null(pp);
    pp->id = id;
    atomic_store(&pp->status, P_RUNNING);
    return pp;
}

static struct g *gs_new(size_t n)
{
    struct g *gs = calloc(n, sizeof *gs);
    assert_non_null(gs);
    for (size_t i = 0; i < n; i++)
        gs[i].goid = i;
    return gs;
}

static uint32_t ringlen(struct p *pp)
{
    return atomic_load(&pp->runqtail) - atomic_load(&pp->runqhead);
}

/* Index of the G the global queue holds at position i (0: head). The
 * fake Gs have no stack, so they sit on the list of Gs that never ran. */
static long globat(struct schedt *s, struct g *gs, int i)
{
    struct g *gp = s->runq[GQ_FIFO].head;
    while (gp && i-- > 0)
        gp = gp->schedlink;
    return gp ? (long)(gp - gs) : -1;
}

static long idx(struct g *gs, struct g *gp)
{
    return gp ? (long)(gp - gs) : -1;
}

/* ---- Sequential claims -------------------------------------------------- */

static void test_runq_empty_initially(void **state)
{
    struct p *pp = p_new(0);
    bool inherit = true;
    assert_true(gmp__runqempty(pp));
    assert_null(gmp__runqget(pp, &inherit));
    assert_false(inherit);
    free(pp);
}

/* Go's RunSchedLocalQueueTest: for every fill level below the ring size,
 * what goes in comes out once, in FIFO order, and the queue is then empty
 * again (head and tail wrap around the ring over the iterations). */
static void test_runq_fifo_every_fill_level(void **state)
{
    struct schedt *s = sched_new(1);
    struct p *pp = p_new(0);
    struct g *gs = gs_new(GMP_RUNQ_SIZE);
    bool inherit;
    for (int n = 0; n < GMP_RUNQ_SIZE; n++) {
        assert_true(gmp__runqempty(pp));
        for (int j = 0; j < n; j++)
            gmp__runqput(s, pp, &gs[j], false);
        assert_int_equal(ringlen(pp), n);
        assert_int_equal(gmp__runqempty(pp), n == 0);
        for (int j = 0; j < n; j++) {
            assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), j);
            assert_false(inherit);
        }
        assert_null(gmp__runqget(pp, &inherit));
    }
    assert_int_equal(atomic_load(&s->runqsize), 0);
    free(gs);
    free(pp);
    free(s);
}

static void test_runq_runnext_comes_first(void **state)
{
    struct schedt *s = sched_new(1);
    struct p *pp = p_new(0);
    struct g *gs = gs_new(4);
    bool inherit = false;
    gmp__runqput(s, pp, &gs[0], false);
    gmp__runqput(s, pp, &gs[1], true);
    gmp__runqput(s, pp, &gs[2], false);
    assert_false(gmp__runqempty(pp));
    assert_ptr_equal(atomic_load(&pp->runnext), &gs[1]);
    /* runnext inherits the time slice; ring Gs do not. */
    assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), 1);
    assert_true(inherit);
    assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), 0);
    assert_false(inherit);
    assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), 2);
    assert_false(inherit);
    assert_null(gmp__runqget(pp, &inherit));
    assert_true(gmp__runqempty(pp));

    /* runnext alone makes the queue non-empty. */
    gmp__runqput(s, pp, &gs[3], true);
    assert_int_equal(ringlen(pp), 0);
    assert_false(gmp__runqempty(pp));
    assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), 3);
    assert_true(gmp__runqempty(pp));
    free(gs);
    free(pp);
    free(s);
}

static void test_runq_runnext_kicks_old_to_tail(void **state)
{
    struct schedt *s = sched_new(1);
    struct p *pp = p_new(0);
    struct g *gs = gs_new(4);
    bool inherit;
    gmp__runqput(s, pp, &gs[0], true);      /* runnext 0 */
    gmp__runqput(s, pp, &gs[1], true);      /* runnext 1, ring 0 */
    gmp__runqput(s, pp, &gs[2], false);     /* ring 0 2 */
    gmp__runqput(s, pp, &gs[3], true);      /* runnext 3, ring 0 2 1 */
    assert_ptr_equal(atomic_load(&pp->runnext), &gs[3]);
    assert_int_equal(ringlen(pp), 3);
    const long want[] = {3, 0, 2, 1};
    for (int i = 0; i < 4; i++)
        assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), want[i]);
    assert_null(gmp__runqget(pp, &inherit));
    free(gs);
    free(pp);
    free(s);
}

/* The 257th put into a full ring moves the ring's older half (128 Gs, in
 * order) and the new G to the global queue: 129 in one batch. */
static void test_runq_full_ring_spills_129(void **state)
{
    struct schedt *s = sched_new(1);
    struct p *pp = p_new(0);
    struct g *gs = gs_new(GMP_RUNQ_SIZE + 2);
    bool inherit;
    for (int i = 0; i < GMP_RUNQ_SIZE; i++)
        gmp__runqput(s, pp, &gs[i], false);
    assert_int_equal(ringlen(pp), GMP_RUNQ_SIZE);
    assert_int_equal(atomic_load(&s->runqsize), 0);
    assert_null(s->runq[GQ_FIFO].head);

    gmp__runqput(s, pp, &gs[GMP_RUNQ_SIZE], false);
    assert_int_equal(atomic_load(&s->runqsize), GMP_RUNQ_SIZE / 2 + 1);
    assert_int_equal(ringlen(pp), GMP_RUNQ_SIZE / 2);
    for (int i = 0; i < GMP_RUNQ_SIZE / 2; i++)
        assert_int_equal(globat(s, gs, i), i);
    assert_int_equal(globat(s, gs, GMP_RUNQ_SIZE / 2), GMP_RUNQ_SIZE);
    assert_int_equal(globat(s, gs, GMP_RUNQ_SIZE / 2 + 1), -1);
    assert_ptr_equal(s->runq[GQ_FIFO].tail, &gs[GMP_RUNQ_SIZE]);
    assert_null(s->runq[GQ_FIFO].tail->schedlink);
    assert_int_equal(atomic_load(&s->lock.key), 0);     /* released */

    /* The newer half stays on the ring, still in order. */
    for (int i = GMP_RUNQ_SIZE / 2; i < GMP_RUNQ_SIZE; i++)
        assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), i);
    assert_null(gmp__runqget(pp, &inherit));
    free(gs);
    free(pp);
    free(s);
}

/* A runnext put whose kicked-out G finds the ring full spills too: the
 * older half and the kicked G go global, the new G stays in runnext. */
static void test_runq_runnext_kick_into_full_ring_spills(void **state)
{
    struct schedt *s = sched_new(1);
    struct p *pp = p_new(0);
    struct g *gs = gs_new(GMP_RUNQ_SIZE + 2);
    for (int i = 0; i < GMP_RUNQ_SIZE; i++)
        gmp__runqput(s, pp, &gs[i], false);
    gmp__runqput(s, pp, &gs[GMP_RUNQ_SIZE], true);      /* fills runnext */
    assert_int_equal(atomic_load(&s->runqsize), 0);
    gmp__runqput(s, pp, &gs[GMP_RUNQ_SIZE + 1], true);  /* kicks 256 */
    assert_ptr_equal(atomic_load(&pp->runnext), &gs[GMP_RUNQ_SIZE + 1]);
    assert_int_equal(atomic_load(&s->runqsize), GMP_RUNQ_SIZE / 2 + 1);
    assert_int_equal(globat(s, gs, GMP_RUNQ_SIZE / 2), GMP_RUNQ_SIZE);
    assert_int_equal(ringlen(pp), GMP_RUNQ_SIZE / 2);
    free(gs);
    free(pp);
    free(s);
}

/* Global queue batch: min(len/procs + 1, len, max (when > 0), 128). The
 * first G is returned, the rest land on pp's ring in order. */
static void test_runq_globrunqget_batch_size(void **state)
{
    static const struct {
        int procs, len, max, want;
    } cases[] = {
        {1, 1, 0, 1},     {1, 2, 0, 2},     {1, 100, 0, 100},
        {1, 300, 0, 128}, {4, 100, 0, 26},  {4, 3, 0, 1},
        {2, 7, 0, 4},     {8, 1000, 0, 126}, {3, 1000, 0, 128},
        {1, 100, 1, 1},   {4, 100, 10, 10}, {4, 100, 30, 26},
        {256, 10, 0, 1},  {1, 1000, 200, 128},
    };
    struct g *gs = gs_new(1000);
    bool inherit;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct schedt *s = sched_new(cases[c].procs);
        struct p *pp = p_new(0);
        int len = cases[c].len, want = cases[c].want;
        gmp__lock(&s->lock);
        for (int i = 0; i < len; i++)
            gmp__globrunqput(s, &gs[i]);
        assert_int_equal(atomic_load(&s->runqsize), len);
        struct g *gp = gmp__globrunqget(s, pp, cases[c].max);
        gmp__unlock(&s->lock);
        print_message("procs=%d len=%d max=%d -> %u+1 (want %d)\n",
                      cases[c].procs, len, cases[c].max, ringlen(pp), want);
        assert_int_equal(idx(gs, gp), 0);
        assert_int_equal(ringlen(pp), want - 1);
        assert_int_equal(atomic_load(&s->runqsize), len - want);
        assert_int_equal(globat(s, gs, 0), want < len ? want : -1);
        if (want == len)
            assert_null(s->runq[GQ_FIFO].tail);
        else
            assert_ptr_equal(s->runq[GQ_FIFO].tail, &gs[len - 1]);
        for (int i = 1; i < want; i++)
            assert_int_equal(idx(gs, gmp__runqget(pp, &inherit)), i);
        assert_null(gmp__runqget(pp, &inherit));
        free(pp);
        free(s);
    }
    free(gs);
}

static void test_runq_globrunqget_empty_is_null(void **state)
{
    struct schedt *s = sched_new(2);
    struct p *pp = p_new(0);
    gmp__lock(&s->lock);
    assert_null(gmp__globrunqget(s, pp, 0));
    assert_null(gmp__globrunqget(s, pp, 1));
    gmp__unlock(&s->lock);
    assert_true(gmp__runqempty(pp));
    free(pp);
    free(s);
}

static void test_runq_globrunqputbatch_appends_in_order(void **state)
{
    struct schedt *s = sched_new(1);
    struct g *gs = gs_new(6);
    gmp__lock(&s->lock);
    gmp__globrunqput(s, &gs[0]);
    for (int i = 1; i < 4; i++)
        gs[i].schedlink = &gs[i + 1];
    gmp__globrunqputbatch(s, &gs[1], &gs[4], 4);
    gmp__globrunqput(s, &gs[5]);
    gmp__unlock(&s->lock);
    assert_int_equal(atomic_load(&s->runqsize), 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(globat(s, gs, i), i);
    assert_int_equal(globat(s, gs, 6), -1);
    free(gs);
    free(s);
}

/* Gs that had run and overflowed a ring come out of the global queue
 * before the rest, FIFO within each list; single pulls alternate between
 * the lists, so neither starves. Gs put on the global queue directly
 * (yields, preemptions) join the FIFO even when they have run. */
static void test_runq_global_spilled_before_fifo(void **state)
{
    struct schedt *s = sched_new(1);
    struct p *pp = p_new(0);
    struct g *gs = gs_new(GMP_RUNQ_SIZE + 5);
    struct gstack fake;             /* only its address matters */
    bool inherit;
    /* Ring: 0..255, of which the odd ones have run; 256 (run) spills
     * 0..127 and itself. */
    for (int i = 0; i <= GMP_RUNQ_SIZE; i++) {
        if (i % 2 || i == GMP_RUNQ_SIZE)
            gs[i].stk = &fake;
        gmp__runqput(s, pp, &gs[i], false);
    }
    assert_int_equal(s->runq[GQ_SPILLED].n, GMP_RUNQ_SIZE / 4 + 1);
    assert_int_equal(s->runq[GQ_FIFO].n, GMP_RUNQ_SIZE / 4);
    /* A yielded G that has run goes to the FIFO's tail. */
    gs[GMP_RUNQ_SIZE + 1].stk = &fake;
    gmp__lock(&s->lock);
    gmp__globrunqput(s, &gs[GMP_RUNQ_SIZE + 1]);
    gmp__unlock(&s->lock);
    while (gmp__runqget(pp, &inherit))     /* empty the ring */
        ;

    long want[GMP_RUNQ_SIZE / 2 + 2];
    int k = 0;
    for (int i = 1; i < GMP_RUNQ_SIZE / 2; i += 2)
        want[k++] = i;
    want[k++] = GMP_RUNQ_SIZE;
    for (int i = 0; i < GMP_RUNQ_SIZE / 2; i += 2)
        want[k++] = i;
    want[k++] = GMP_RUNQ_SIZE + 1;
    int got = 0;
    for (;;) {
        gmp__lock(&s->lock);
        struct g *gp = gmp__globrunqget(s, pp, 0);
        gmp__unlock(&s->lock);
        if (!gp)
            break;
        for (; gp; gp = gmp__runqget(pp, &inherit))
            assert_int_equal(idx(gs, gp), want[got++]);
    }
    assert_int_equal(got, k);
    assert_int_equal(atomic_load(&s->runqsize), 0);

    /* Single pulls: FIFO, spilled, FIFO, spilled, then what is left. */
    gmp__lock(&s->lock);
    for (int i = 0; i < 4; i++)
        gmp__globrunqput(s, &gs[i]);
    gmp__unlock(&s->lock);
    for (int i = 0; i < GMP_RUNQ_SIZE + 5; i++)
        gs[i].stk = i >= 4 ? &fake : NULL;
    for (int i = 4; i < GMP_RUNQ_SIZE + 5; i++)
        gmp__runqput(s, pp, &gs[i], false);    /* spills 4..131 and 260 */
    assert_int_equal(s->runq[GQ_SPILLED].n, GMP_RUNQ_SIZE / 2 + 1);
    while (gmp__runqget(pp, &inherit))
        ;
    pp->globturn = 0;
    long single[6] = {0, 4, 1, 5, 2, 6};
    gmp__lock(&s->lock);
    for (int i = 0; i < 6; i++)
        assert_int_equal(idx(gs, gmp__globrunqget(s, pp, 1)), single[i]);
    gmp__unlock(&s->lock);
    free(gs);
    free(pp);
    free(s);
}

/* Go's RunSchedLocalQueueStealTest, exact: for every fill level n of the
 * victim's ring, a steal takes n - n/2 (the older ones), returns the
 * newest of those to run and leaves the others on the thief's ring; the
 * victim keeps the rest; every G is in exactly one place. */
static void test_runq_steal_takes_half(void **state)
{
    struct schedt *s = sched_new(2);
    struct p *victim = p_new(0), *thief = p_new(1);
    struct g *gs = gs_new(GMP_RUNQ_SIZE);
    int seen[GMP_RUNQ_SIZE];
    bool inherit;
    for (int n = 0; n < GMP_RUNQ_SIZE; n++) {
        memset(seen, 0, sizeof seen);
        for (int j = 0; j < n; j++)
            gmp__runqput(s, victim, &gs[j], false);
        int half = n - n / 2;
        struct g *gp = gmp__runqsteal(thief, victim, true);
        assert_int_equal(idx(gs, gp), half - 1);       /* -1: none */
        if (gp)
            seen[gp - gs]++;
        assert_int_equal(ringlen(thief), half > 0 ? half - 1 : 0);
        assert_int_equal(ringlen(victim), n / 2);
        for (int j = 0; j < half - 1; j++) {
            gp = gmp__runqget(thief, &inherit);
            assert_int_equal(idx(gs, gp), j);
            seen[gp - gs]++;
        }
        assert_null(gmp__runqget(thief, &inherit));
        for (int j = half; j < n; j++) {
            gp = gmp__runqget(victim, &inherit);
            assert_int_equal(idx(gs, gp), j);
            seen[gp - gs]++;
        }
        assert_null(gmp__runqget(victim, &inherit));
        for (int j = 0; j < n; j++)
            assert_int_equal(seen[j], 1);
    }
    free(gs);
    free(thief);
    free(victim);
    free(s);
}

/* runnext is stolen only with stealnext, and only from an empty ring. */
static void test_runq_steal_runnext_only_when_stealnext(void **state)
{
    struct schedt *s = sched_new(2);
    struct p *victim = p_new(0), *thief = p_new(1);
    struct g *gs = gs_new(3);
    bool inherit;
    for (int running = 0; running < 2; running++) {
        /* An idle victim is robbed at once; a running one after a short
         * grace spin. Either way the outcome is the same. */
        atomic_store(&victim->status, running ? P_RUNNING : P_IDLE);
        gmp__runqput(s, victim, &gs[0], true);
        assert_null(gmp__runqsteal(thief, victim, false));
        assert_ptr_equal(atomic_load(&victim->runnext), &gs[0]);
        assert_true(gmp__runqempty(thief));
        assert_ptr_equal(gmp__runqsteal(thief, victim, true), &gs[0]);
        assert_null(atomic_load(&victim->runnext));
        assert_true(gmp__runqempty(victim));
        /* The stolen G is returned, not left on the thief's ring. */
        assert_true(gmp__runqempty(thief));
        assert_null(gmp__runqsteal(thief, victim, true));
    }

    /* With Gs in the ring, a stealnext steal takes from the ring and
     * leaves runnext alone. */
    gmp__runqput(s, victim, &gs[1], false);
    gmp__runqput(s, victim, &gs[2], false);
    gmp__runqput(s, victim, &gs[0], true);
    assert_ptr_equal(gmp__runqsteal(thief, victim, true), &gs[1]);
    assert_ptr_equal(atomic_load(&victim->runnext), &gs[0]);
    assert_int_equal(ringlen(victim), 1);
    assert_true(gmp__runqempty(thief));
    assert_int_equal(idx(gs, gmp__runqget(victim, &inherit)), 0);
    assert_int_equal(idx(gs, gmp__runqget(victim, &inherit)), 2);
    assert_true(gmp__runqempty(victim));
    free(gs);
    free(thief);
    free(victim);
    free(s);
}

/* Steals land at the thief's tail after what it already holds. */
static void test_runq_steal_appends_to_thief_tail(void **state)
{
    struct schedt *s = sched_new(2);
    struct p *victim = p_new(0), *thief = p_new(1);
    struct g *gs = gs_new(12);
    bool inherit;
    for (int i = 0; i < 2; i++)
        gmp__runqput(s, thief, &gs[i], false);
    for (int i = 2; i < 12; i++)
        gmp__runqput(s, victim, &gs[i], false);
    assert_ptr_equal(gmp__runqsteal(thief, victim, false), &gs[6]);
    const long want[] = {0, 1, 2, 3, 4, 5};
    for (int i = 0; i < 6; i++)
        assert_int_equal(idx(gs, gmp__runqget(thief, &inherit)), want[i]);
    assert_null(gmp__runqget(thief, &inherit));
    assert_int_equal(ringlen(victim), 5);
    free(gs);
    free(thief);
    free(victim);
    free(s);
}

/* ---- Racing claims ------------------------------------------------------ */

#define NTHIEVES 3

struct race {
    struct schedt *s;
    struct p *owner;
    struct p *thief[NTHIEVES];
    struct g *gs;
    long n;
    _Atomic uint8_t *taken;         /* per G: times it was taken */
    _Atomic int64_t ntaken;
    _Atomic int64_t nstolen;        /* Gs that reached a thief */
    _Atomic int owner_done;
    _Atomic int started;
};

struct thief_arg {
    struct race *r;
    int me;
};

static void take(struct race *r, struct g *gp)
{
    atomic_fetch_add_explicit(&r->taken[gp - r->gs], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->ntaken, 1, memory_order_relaxed);
}

static uint32_t xs(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (uint32_t)(*x >> 11);
}

static void start_line(struct race *r)
{
    atomic_fetch_add(&r->started, 1);
    while (atomic_load(&r->started) < NTHIEVES + 1)
        sched_yield();
}

/* Owner: bursts of puts (a quarter into runnext, bursts long enough to
 * overflow the ring and spill), then a few gets; sometimes one G from the
 * global queue. The last G goes on the ring, and the owner waits for a
 * steal before it drains its own queue: with few Gs (ASan) and a busy
 * host it could otherwise take them all before a thief ran at all. */
static void *race_owner(void *arg)
{
    struct race *r = arg;
    uint64_t x = 0x1234567;
    bool inherit;
    struct g *gp;
    start_line(r);
    long last = r->n - 1;
    for (long i = 0; i < last;) {
        /* Mostly short bursts the thieves can keep up with; now and then
         * one long enough to fill the ring and spill. */
        uint32_t burst = (xs(&x) & 15) ? 1 + xs(&x) % 24 : 1 + xs(&x) % 320;
        for (uint32_t k = 0; k < burst && i < last; k++, i++)
            gmp__runqput(r->s, r->owner, &r->gs[i], (xs(&x) & 3) == 0);
        uint32_t gets = xs(&x) % (burst / 2 + 1);
        for (uint32_t k = 0; k < gets && (gp = gmp__runqget(r->owner,
                                                            &inherit)); k++)
            take(r, gp);
        if (ringlen(r->owner) > GMP_RUNQ_SIZE * 3 / 4)
            sched_yield();          /* let the thieves in (2 CPUs) */
        if ((xs(&x) & 15) == 0) {
            gmp__lock(&r->s->lock);
            gp = gmp__globrunqget(r->s, r->owner, 1);
            gmp__unlock(&r->s->lock);
            if (gp)
                take(r, gp);
        }
    }
    gmp__runqput(r->s, r->owner, &r->gs[last], false);
    while (atomic_load(&r->nstolen) == 0)
        sched_yield();
    while ((gp = gmp__runqget(r->owner, &inherit)))
        take(r, gp);
    atomic_store(&r->owner_done, 1);
    return NULL;
}

/* Thief: steals into its own P (from the owner, or now and then from
 * another thief), runs what it got and drains its own ring, as an M does
 * after stealwork. */
static void *race_thief(void *arg)
{
    struct thief_arg *ta = arg;
    struct race *r = ta->r;
    struct p *me = r->thief[ta->me];
    uint64_t x = 0x9E3779B97F4A7C15ULL + (uint64_t)ta->me;
    unsigned misses = 0;
    bool inherit;
    start_line(r);
    while (!atomic_load(&r->owner_done)) {
        uint32_t pick = xs(&x);
        struct p *victim = r->owner;
        if ((pick & 7) == 0) {
            victim = r->thief[(pick >> 3) % NTHIEVES];
            if (victim == me)
                victim = r->owner;
        }
        struct g *gp = gmp__runqsteal(me, victim, (pick & 0x100) != 0);
        if (!gp) {
            if ((++misses & 63) == 0)
                sched_yield();      /* nothing to steal: leave the CPU */
            continue;
        }
        take(r, gp);
        atomic_fetch_add_explicit(&r->nstolen, 1, memory_order_relaxed);
        /* Leave a few on the ring sometimes, for the other thieves. */
        int keep = (pick & 0x200) ? 4 : 0;
        while ((int)ringlen(me) > keep && (gp = gmp__runqget(me, &inherit))) {
            take(r, gp);
            atomic_fetch_add_explicit(&r->nstolen, 1, memory_order_relaxed);
        }
    }
    return NULL;
}

/* One owner puts and gets 10^6 Gs while three thieves, each with its own
 * P, steal from it and from each other: every G is taken exactly once. */
static void test_runq_race_every_g_taken_once(void **state)
{
    struct race r;
    memset(&r, 0, sizeof r);
    r.n = H_SCALE(1000000L);
    r.s = sched_new(NTHIEVES + 1);
    r.owner = p_new(0);
    for (int i = 0; i < NTHIEVES; i++)
        r.thief[i] = p_new(i + 1);
    r.gs = gs_new((size_t)r.n);
    r.taken = calloc((size_t)r.n, sizeof *r.taken);
    assert_non_null(r.taken);

    pthread_t th[NTHIEVES + 1];
    struct thief_arg ta[NTHIEVES];
    assert_int_equal(pthread_create(&th[0], NULL, race_owner, &r), 0);
    for (int i = 0; i < NTHIEVES; i++) {
        ta[i] = (struct thief_arg){&r, i};
        assert_int_equal(pthread_create(&th[i + 1], NULL, race_thief, &ta[i]),
                         0);
    }
    for (int i = 0; i <= NTHIEVES; i++)
        pthread_join(th[i], NULL);

    /* Whatever is left sits on the thieves' rings and the global queue. */
    bool inherit;
    struct g *gp;
    long left = 0;
    for (int i = 0; i < NTHIEVES; i++)
        while ((gp = gmp__runqget(r.thief[i], &inherit))) {
            take(&r, gp);
            left++;
        }
    gmp__lock(&r.s->lock);
    while ((gp = gmp__globrunqget(r.s, r.owner, 1))) {
        take(&r, gp);
        left++;
    }
    gmp__unlock(&r.s->lock);
    assert_true(gmp__runqempty(r.owner));
    print_message("%ld Gs: %lld stolen, %ld left on queues at the end\n",
                  r.n, (long long)atomic_load(&r.nstolen), left);

    long bad = 0, first = -1;
    for (long i = 0; i < r.n; i++)
        if (atomic_load(&r.taken[i]) != 1 && bad++ == 0)
            first = i;
    if (bad)
        print_error("%ld Gs taken != 1 times; first: G %ld taken %d times\n",
                    bad, first, (int)atomic_load(&r.taken[first]));
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&r.ntaken), r.n);
    assert_true(atomic_load(&r.nstolen) > 0);

    free(r.taken);
    free(r.gs);
    for (int i = 0; i < NTHIEVES; i++)
        free(r.thief[i]);
    free(r.owner);
    free(r.s);
}

/* Go's RunSchedLocalQueueEmptyTest: the queue always holds at least one
 * G while the owner puts a second (into runnext or the ring, so a G may
 * move from runnext to the ring meanwhile) and takes one; a concurrent
 * runqempty() must never say empty. */
struct emptyrace {
    struct p *pp;
    long iters;
    _Atomic long iter;
    _Atomic int ready;
    _Atomic long done;
    _Atomic long spurious;
};

static void spin_until(_Atomic int *v, int want)
{
    for (unsigned i = 0; atomic_load(v) != want; i++)
        if (i > 1000)
            sched_yield();
}

static void *empty_checker(void *arg)
{
    struct emptyrace *e = arg;
    for (long i = 0; i < e->iters; i++) {
        for (unsigned k = 0; atomic_load(&e->iter) != i; k++)
            if (k > 1000)
                sched_yield();
        atomic_fetch_add(&e->ready, 1);
        spin_until(&e->ready, 2);
        if (gmp__runqempty(e->pp))
            atomic_fetch_add(&e->spurious, 1);
        atomic_store(&e->done, i + 1);
    }
    return NULL;
}

static void test_runq_empty_never_spurious(void **state)
{
    struct schedt *s = sched_new(1);
    struct emptyrace e;
    memset(&e, 0, sizeof e);
    e.pp = p_new(0);
    e.iters = H_SCALE(100000L);
    atomic_store(&e.iter, -1);
    struct g *gs = gs_new(2);
    bool inherit;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, empty_checker, &e), 0);
    long stuck = 0;
    for (long i = 0; i < e.iters; i++) {
        bool next0 = (i & 1) == 0, next1 = (i & 2) == 0;
        gmp__runqput(s, e.pp, &gs[0], next0);
        atomic_store(&e.ready, 0);
        atomic_store(&e.iter, i);
        atomic_fetch_add(&e.ready, 1);
        spin_until(&e.ready, 2);
        gmp__runqput(s, e.pp, &gs[1], next1);
        if (!gmp__runqget(e.pp, &inherit))
            stuck++;
        for (unsigned k = 0; atomic_load(&e.done) != i + 1; k++)
            if (k > 1000)
                sched_yield();
        if (!gmp__runqget(e.pp, &inherit))
            stuck++;
        if (gmp__runqget(e.pp, &inherit))
            stuck++;
    }
    pthread_join(th, NULL);
    assert_int_equal(stuck, 0);
    assert_int_equal(atomic_load(&e.spurious), 0);
    assert_int_equal(atomic_load(&s->runqsize), 0);
    free(gs);
    free(e.pp);
    free(s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_runq_empty_initially),
        cmocka_unit_test(test_runq_fifo_every_fill_level),
        cmocka_unit_test(test_runq_runnext_comes_first),
        cmocka_unit_test(test_runq_runnext_kicks_old_to_tail),
        cmocka_unit_test(test_runq_full_ring_spills_129),
        cmocka_unit_test(test_runq_runnext_kick_into_full_ring_spills),
        cmocka_unit_test(test_runq_globrunqget_batch_size),
        cmocka_unit_test(test_runq_globrunqget_empty_is_null),
        cmocka_unit_test(test_runq_globrunqputbatch_appends_in_order),
        cmocka_unit_test(test_runq_global_spilled_before_fifo),
        cmocka_unit_test(test_runq_steal_takes_half),
        cmocka_unit_test(test_runq_steal_runnext_only_when_stealnext),
        cmocka_unit_test(test_runq_steal_appends_to_thief_tail),
        cmocka_unit_test(test_runq_race_every_g_taken_once),
        cmocka_unit_test(test_runq_empty_never_spurious),
    };
    return cmocka_run_group_tests_name("runq", t, NULL, NULL);
}
