/*
 * netpoll.c - the epoll poller and the poll descriptors (netpoll.h).
 *
 * Readiness and waiting, per descriptor and direction
 * ---------------------------------------------------
 * The problem: with an edge-triggered epoll set, the kernel reports an
 * fd's readiness once per change. A goroutine that got EAGAIN and is
 * about to park can race with that one report: if the report lands
 * between the EAGAIN and the park, and nobody remembers it, the goroutine
 * sleeps for ever beside a ready fd.
 *
 * The rule: each direction counts its events (rseq, wseq), and the count
 * and the list of parked waiters are under the descriptor's spinlock. An
 * event bumps the count and wakes every waiter (each retries its call).
 * A caller reads the count before it tries its system call; after EAGAIN
 * it compares, under the lock, and links itself only if no event came
 * since (else it tries again at once). So the report is either counted
 * before the try (whose system call then sees the state it reported), or
 * seen by the waiter, or finds it linked. A count, unlike a one-shot
 * "ready" token, serves any number of callers that failed at once: each
 * compares with its own reading, and none can take the others' event.
 * A goroutine links itself only in its park's commit, once it is off its
 * stack, so no waker can ready it while it still runs. The same count
 * lets a TCP reader skip the try altogether after a short read, while
 * no event has come since (gmp__pd_read_skip in netpoll.h).
 *
 * Each waiter can be woken by four parties: an event, gmp_close, a change
 * of the fd's deadline (gmp__pd_set_deadline, which also counts as an
 * event, so the waiter retries under the new one), and its deadline's
 * timer (which runs under a timer lock and must not take the
 * descriptor's). They race through the waiter's claim flag (the wctx's
 * claimed, gmp__wctx_claim): the one whose CAS wins sets why and wakes it; the others
 * do nothing. The waiter unlinks itself under the lock after it wakes,
 * and deletes its timer, before its record (on its stack) goes away; a
 * waker touches the record only under the lock or after winning the
 * claim.
 *
 * sched.netpoll_waiters counts records linked on any list, and those
 * taken off whose taker has not let go yet: a poll lets go once it has
 * queued the Gs it woke (Go's netpollAdjustWaiters), for a G between the
 * two is on no list and in no queue, and the deadlock check would miss
 * it; the others once they have dropped the descriptor's lock.
 * findrunnable blocks in epoll_wait only if the count is non-zero or a
 * timer is pending; when it falls to zero under a poll that has no
 * deadline, that poll is broken (waiters_add).
 *
 * Descriptor lifetime: refs counts the gmp_* calls inside the fd; gmp_close
 * sets PD_CLOSING (new calls fail), wakes the waiters, waits for refs to
 * drain, then deletes the fd from the epoll set and closes it. A call
 * never uses an fd number that may already name another file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "metrics.h"
#include "netpoll.h"
#include "park.h"
#include "timer.h"
#include "alloc.h"

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441        /* the same on every arch here */
#endif

#define PD_CHUNK  1024              /* descriptors per allocation */
#define PD_TOP    4096              /* chunks: fds below 4,194,304 */
#define NEVENTS   128

/* epoll_pwait2 (nanosecond timeouts, Linux 5.11) answered ENOSYS once:
 * use epoll_wait's milliseconds from then on. Relaxed: a hint every
 * thread may discover for itself. */
static _Atomic int no_pwait2;

enum { WHY_NONE, WHY_READY, WHY_CLOSED, WHY_TIMEOUT };

struct fdwait {
    struct gmp__wctx   w;           /* claimed: the claim flag */
    struct gmp__timer  t;           /* the deadline (goroutines) */
    struct gmp__pd    *pd;
    struct schedt     *s;
    int                modes;       /* PD_R | PD_W */
    uint64_t           seq;         /* gmp__pd_seq before the failed try */
    int                why;         /* WHY_*, written by the claimer */
    bool               linked;      /* on pd's lists (pd->lock) */
    bool               committed;   /* a G: the commit ran and linked it */
    int64_t            deadline;
    struct fdwait     *rnext, *wnext;   /* pd->rq, pd->wq (pd->lock) */
    struct fdwait     *wakenext;        /* a waker's private list */
};

/* ---- The epoll instance -------------------------------------------------- */

int gmp__netpoll_init(struct schedt *s)
{
    s->epfd = s->evfd = -1;
    s->pdtab = gmp__alloc(PD_TOP * sizeof *s->pdtab);
    if (!s->pdtab)
        return GMP_ENOMEM;
    /* Out of descriptors is -EMFILE (or -ENFILE), as the system says:
     * no memory would be the wrong advice. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->evfd};
    if ((s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev) != 0) {
        int err = -errno;
        gmp__netpoll_free(s);
        return err;
    }
    /* Relaxed: the runtime is not published yet. */
    atomic_store_explicit(&s->lastpoll, gmp__nanotime(), memory_order_relaxed);
    return 0;
}

void gmp__netpoll_free(struct schedt *s)
{
    if (s->epfd >= 0)
        GMP_LIBC(close)(s->epfd);
    if (s->evfd >= 0)
        GMP_LIBC(close)(s->evfd);
    s->epfd = s->evfd = -1;
    if (s->pdtab) {
        for (int i = 0; i < PD_TOP; i++)
            /* Relaxed: no thread of the runtime is left. */
            gmp__free(atomic_load_explicit(&s->pdtab[i], memory_order_relaxed),
                      PD_CHUNK * sizeof(struct gmp__pd));
        gmp__free(s->pdtab, PD_TOP * sizeof *s->pdtab);
        s->pdtab = NULL;
    }
}

void gmp__netpoll_break(struct schedt *s)
{
    uint32_t zero = 0;
    /* Relaxed: only de-duplicates writes; the eventfd carries the wake-up
     * (and epoll_wait's return orders what the breaker did before). */
    if (!atomic_compare_exchange_strong_explicit(&s->netpoll_wakesig, &zero, 1,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    uint64_t one = 1;
    while (GMP_LIBC(write)(s->evfd, &one, sizeof one) < 0 && errno == EINTR)
        ;                           /* EAGAIN: the counter is full: awake */
}

void gmp__netpoll_wake_for(struct schedt *s, int64_t when)
{
    /* A full barrier, then seq_cst loads: the adder's heap update (under
     * its lock) against the poller's store of poll_until / lastpoll (and
     * sysmon's of sysmon_until); a poller that chose its sleep before
     * seeing our timer is either seen here (and broken) or still ahead
     * of its own re-check. */
    gmp__storeload_fence();
    if (atomic_load(&s->lastpoll) == 0) {
        int64_t until = atomic_load(&s->poll_until);
        if (until == 0 || until > when)
            gmp__netpoll_break(s);
    } else {
        /* Nobody blocks in the poller: an idle M, if one is needed, will
         * see the timer when it looks for work. */
        gmp__wakep(s);
    }
    gmp__sysmon_wake_for(s, when);
}

bool gmp__netpoll_waiting(struct schedt *s)
{
    /* Relaxed: a hint; see findrunnable. */
    return atomic_load_explicit(&s->netpoll_waiters, memory_order_relaxed) != 0;
}

static int epwait(struct schedt *s, struct epoll_event *ev, int n,
                  int64_t delay)
{
    if (delay > 0 &&
        !atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        struct timespec ts = {.tv_sec = delay / 1000000000,
                              .tv_nsec = delay % 1000000000};
        long r = syscall(SYS_epoll_pwait2, s->epfd, ev, n, &ts, NULL, 0);
        if (r >= 0 || errno != ENOSYS)
            return (int)r;
        atomic_store_explicit(&no_pwait2, 1, memory_order_relaxed);
    }
    int ms = -1;
    if (delay == 0)
        ms = 0;
    else if (delay > 0)             /* rounded up: never wake early */
        ms = delay >= 1000000000000LL ? 1000000
                                      : (int)((delay + 999999) / 1000000);
    return GMP_LIBC(epoll_wait)(s->epfd, ev, n, ms);
}

/* ---- Waking waiters --------------------------------------------------------- */

/* Seq_cst: the fall to zero pairs with findrunnable's second look after
 * it takes the poller to block with no timer. Either it sees no waiter
 * left and does not block, or we see its lastpoll of 0 and break the
 * poll: no M sleeps in epoll_wait for nobody, where it would keep the
 * deadlock check from running (deadlock.c). On x86 every read-modify-
 * write is a locked instruction anyway. */
static void waiters_add(struct schedt *s, int32_t d)
{
    uint32_t left = atomic_fetch_add(&s->netpoll_waiters, (uint32_t)d) +
                    (uint32_t)d;
    if (d < 0 && left == 0 && atomic_load(&s->lastpoll) == 0 &&
        atomic_load(&s->poll_until) == 0)
        gmp__netpoll_break(s);
}

void gmp__netpoll_release(struct schedt *s, int32_t held)
{
    if (held)
        waiters_add(s, -held);
}

static void unlink_one(struct fdwait **q, struct fdwait *fw, bool rd)
{
    for (struct fdwait **pp = q; *pp; pp = rd ? &(*pp)->rnext
                                              : &(*pp)->wnext)
        if (*pp == fw) {
            *pp = rd ? fw->rnext : fw->wnext;
            return;
        }
}

/* Unlinks fw from every list it is on. The count keeps it: it adds to
 * *held, which the caller passes to gmp__netpoll_release once it has
 * dropped the lock (a poll: once it has queued the Gs it woke). Context:
 * holds pd->lock. */
static void unlink_waiter(struct gmp__pd *pd, struct fdwait *fw,
                          int32_t *held)
{
    if (!fw->linked)
        return;
    int n = 0;
    if (fw->modes & PD_R) {
        unlink_one(&pd->rq, fw, true);
        n++;
    }
    if (fw->modes & PD_W) {
        unlink_one(&pd->wq, fw, false);
        n++;
    }
    fw->linked = false;
    *held += n;
}

/* Claims and unlinks every waiter of the directions in modes, adding the
 * ones it won to *wake; held as unlink_waiter's. Context: holds
 * pd->lock. */
static void take_waiters(struct gmp__pd *pd, int modes, int why,
                         struct fdwait **wake, int32_t *held)
{
    for (int d = PD_R; d <= PD_W; d <<= 1) {
        if (!(modes & d))
            continue;
        struct fdwait *fw;
        while ((fw = d == PD_R ? pd->rq : pd->wq)) {
            unlink_waiter(pd, fw, held);
            if (gmp__wctx_claim(&fw->w)) {
                fw->why = why;
                fw->wakenext = *wake;
                *wake = fw;
            }
        }
    }
}

/* ---- Polling ------------------------------------------------------------------ */

struct g *gmp__netpoll(struct schedt *s, int64_t delay, struct g **tail,
                       int32_t *np, int32_t *held)
{
    struct epoll_event ev[NEVENTS];
    struct g *head = NULL;
    *tail = NULL;
    *np = 0;
    *held = 0;
    int n = epwait(s, ev, NEVENTS, delay);
    if (n < 0)
        return NULL;                /* EINTR: the caller looks again */
    for (int i = 0; i < n; i++) {
        if (ev[i].data.ptr == &s->evfd) {
            if (delay != 0) {       /* a blocking poll consumes breaks */
                uint64_t v;
                while (GMP_LIBC(read)(s->evfd, &v, sizeof v) < 0 && errno == EINTR)
                    ;
                /* Relaxed: see gmp__netpoll_break. */
                atomic_store_explicit(&s->netpoll_wakesig, 0,
                                      memory_order_relaxed);
            }
            continue;
        }
        struct gmp__pd *pd = ev[i].data.ptr;
        /* The kernel orders the epoll_ctl that registered pd before this
         * report of it, so its initialisation before our reads; TSan does
         * not know that (pd_register releases). */
        GMP_TSAN_ACQUIRE(pd);
        uint32_t e = ev[i].events;
        int modes = 0;
        if (e & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            modes |= PD_R;
        /* A TCP read stops short at an urgent byte, at the peer's FIN
         * and at an error, with more to read: from then on every read
         * makes its call. Relaxed: the release bump of rseq below
         * publishes it (see gmp__pd_read_skip). */
        if (e & (EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            atomic_store_explicit(&pd->shortdrains, false,
                                  memory_order_relaxed);
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
            modes |= PD_W;
        struct fdwait *wake = NULL;
        gmp__spin_lock(&pd->lock);
        /* Release: see gmp__pd_seq. Relaxed loads: writers hold the lock. */
        if (modes & PD_R) {
            atomic_store_explicit(&pd->rseq, atomic_load_explicit(
                &pd->rseq, memory_order_relaxed) + 1, memory_order_release);
            take_waiters(pd, PD_R, WHY_READY, &wake, held);
        }
        if (modes & PD_W) {
            atomic_store_explicit(&pd->wseq, atomic_load_explicit(
                &pd->wseq, memory_order_relaxed) + 1, memory_order_release);
            take_waiters(pd, PD_W, WHY_READY, &wake, held);
        }
        gmp__spin_unlock(&pd->lock);
        while (wake) {
            struct fdwait *fw = wake;
            wake = fw->wakenext;    /* before fw may run and go */
            struct g *gp = fw->w.gp;
            if (!gp) {
                gmp__notewakeup(&fw->w.note);
                continue;
            }
            /* Relaxed: informational; the run queue publishes it. */
            atomic_store_explicit(&gp->status, G_RUNNABLE,
                                  memory_order_relaxed);
            gmp__metrics_runnable(gp);
            gp->schedlink = NULL;
            if (*tail)
                (*tail)->schedlink = gp;
            else
                head = gp;
            *tail = gp;
            (*np)++;
        }
    }
    return head;
}

/* ---- Descriptors ---------------------------------------------------------------- */

/* fd's descriptor; its chunk is made on first use when alloc is set,
 * else NULL if there is none yet (no fd in it was ever registered). */
static struct gmp__pd *pd_lookup(struct schedt *s, int fd, bool alloc)
{
    if (fd < 0 || fd >= PD_TOP * PD_CHUNK)
        return NULL;
    _Atomic(struct gmp__pd *) *slot = &s->pdtab[fd / PD_CHUNK];
    /* Acquire: pairs with the release that published the zeroed chunk. */
    struct gmp__pd *c = atomic_load_explicit(slot, memory_order_acquire);
    if (!c && alloc) {
        gmp__lock(&s->pdlock);
        /* Relaxed: under the lock every creator holds. */
        c = atomic_load_explicit(slot, memory_order_relaxed);
        if (!c && (c = gmp__alloc(PD_CHUNK * sizeof *c)))
            atomic_store_explicit(slot, c, memory_order_release);
        gmp__unlock(&s->pdlock);
    }
    return c ? &c[fd % PD_CHUNK] : NULL;
}

/* Counts a call into pd. Acquire on success: pairs with gmp__pd_close's
 * release of a reset descriptor. A close in progress may already have
 * freed the number for a new open(2) whose caller is us: wait for it to
 * finish, then take the descriptor fresh (a call on the old fd then fails
 * in its system call, EBADF, as it would after any close). */
static void pd_ref(struct gmp__pd *pd)
{
    uint32_t v = atomic_load_explicit(&pd->refs, memory_order_relaxed);
    do {
        while (v & PD_CLOSING) {
            gmp_yield();             /* a G: let the closer's side run */
            v = atomic_load_explicit(&pd->refs, memory_order_relaxed);
        }
    } while (!atomic_compare_exchange_weak_explicit(
        &pd->refs, &v, v + 1, memory_order_acquire, memory_order_relaxed));
}

/* First use of the fd: non-blocking, into the epoll set. Context: holds
 * pd->lock. */
static int pd_register(struct schedt *s, struct gmp__pd *pd, int fd)
{
    int fl = GMP_LIBC(fcntl)(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) &&
                   GMP_LIBC(fcntl)(fd, F_SETFL, fl | O_NONBLOCK) < 0))
        return -errno;
    struct stat st;
    pd->sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
    int type = 0, proto = 0;
    socklen_t tlen = sizeof type, plen = sizeof proto;
    if (pd->sock &&
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &plen) == 0)
        /* Relaxed: published by the enter's lock and refs. */
        atomic_store_explicit(&pd->shortdrains,
                              type == SOCK_STREAM && proto == IPPROTO_TCP,
                              memory_order_relaxed);
    struct epoll_event ev = {
        /* EPOLLPRI and EPOLLRDHUP also tell the poller when a short read
         * may leave data behind (urgent data, the peer's FIN). */
        .events = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP | EPOLLET,
        .data.ptr = pd,
    };
    GMP_TSAN_RELEASE(pd);           /* for the poller: see gmp__netpoll */
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 || errno == EEXIST)
        pd->pollable = true;
    else if (errno == EPERM)
        pd->pollable = false;       /* a regular file: always ready */
    else
        return -errno;
    pd->registered = true;
    return 0;
}

int gmp__pd_enter(struct schedt *s, int fd, struct gmp__pd **out)
{
    if (fd < 0 || fd >= PD_TOP * PD_CHUNK)
        return GMP_EBADF;           /* no such fd can be open */
    struct gmp__pd *pd = pd_lookup(s, fd, true);
    if (!pd)
        return GMP_ENOMEM;
    pd_ref(pd);
    int err = 0;
    gmp__spin_lock(&pd->lock);
    if (!pd->registered)
        err = pd_register(s, pd, fd);
    gmp__spin_unlock(&pd->lock);
    if (err) {
        gmp__pd_exit(pd);
        return err;
    }
    *out = pd;
    return 0;
}

int gmp__pd_enter_known(struct schedt *s, int fd, struct gmp__pd **out)
{
    struct gmp__pd *pd = pd_lookup(s, fd, false);
    if (!pd)
        return 0;
    pd_ref(pd);
    gmp__spin_lock(&pd->lock);
    bool reg = pd->registered;
    gmp__spin_unlock(&pd->lock);
    if (!reg) {
        gmp__pd_exit(pd);
        return 0;
    }
    *out = pd;
    return 1;
}

int gmp__pd_recheck(struct schedt *s, struct gmp__pd *pd, int fd)
{
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP | EPOLLET,
        .data.ptr = pd,
    };
    if (!pd->pollable || epoll_ctl(s->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
        return 0;
    if (errno != ENOENT)
        return -errno;
    /* Not in the set: the fd we registered was closed behind our back
     * and this number is a new file. Register that one. */
    gmp__spin_lock(&pd->lock);
    int err = pd_register(s, pd, fd);
    gmp__spin_unlock(&pd->lock);
    return err;
}

void gmp__pd_exit(struct gmp__pd *pd)
{
    /* Release: our use of the fd happens before the closer's close(2)
     * (pairs with the acquire in gmp__pd_close's wait). */
    uint32_t v = atomic_fetch_sub_explicit(&pd->refs, 1,
                                           memory_order_release) - 1;
    if (v != PD_CLOSING)
        return;                     /* others inside, or no close pending */
    gmp__spin_lock(&pd->lock);
    struct gmp__wctx *w = pd->closer;
    pd->closer = NULL;
    if (!w)
        pd->drained = true;         /* the closer has not looked yet */
    gmp__spin_unlock(&pd->lock);
    if (w)
        gmp__wctx_ready(w);
}

/* ---- Waiting -------------------------------------------------------------------- */

static void fd_timeout(struct gmp__timer *t)
{
    struct fdwait *fw = t->arg;
    if (gmp__wctx_claim(&fw->w)) {
        fw->why = WHY_TIMEOUT;
        gmp__goready(fw->w.gp);     /* the last touch: fw may go now */
    }
}

/* Under pd->lock: a pending close, or an event of fw's modes since
 * fw->seq was read, settles the wait at once (sets why); else links fw.
 * Returns whether it linked. */
static bool pd_link(struct gmp__pd *pd, struct fdwait *fw)
{
    /* Relaxed: the closer sets PD_CLOSING before it takes this lock to
     * wake the waiters; we hold the lock, so we see it or get woken. */
    if (atomic_load_explicit(&pd->refs, memory_order_relaxed) & PD_CLOSING) {
        fw->why = WHY_CLOSED;
        return false;
    }
    /* Relaxed: the writers hold this lock. */
    uint32_t r = atomic_load_explicit(&pd->rseq, memory_order_relaxed);
    uint32_t w = atomic_load_explicit(&pd->wseq, memory_order_relaxed);
    if (((fw->modes & PD_R) && r != (uint32_t)(fw->seq >> 32)) ||
        ((fw->modes & PD_W) && w != (uint32_t)fw->seq)) {
        fw->why = WHY_READY;
        return false;
    }
    int n = 0;
    if (fw->modes & PD_R) {
        fw->rnext = pd->rq;
        pd->rq = fw;
        n++;
    }
    if (fw->modes & PD_W) {
        fw->wnext = pd->wq;
        pd->wq = fw;
        n++;
    }
    fw->linked = true;
    waiters_add(fw->s, n);
    return true;
}

/* The park's commit, on g0 once the G is off its stack. The deadline's
 * timer is armed under pd->lock, right after the link: no event can wake
 * the G before both are done, and a timer that fires at once wakes a G
 * whose unlink waits for this lock. fw is not touched after the unlock. */
static bool fd_commit(struct g *gp, void *arg)
{
    (void)gp;
    struct fdwait *fw = arg;
    struct gmp__pd *pd = fw->pd;
    struct m *mp = gmp__getm();
    int64_t when = fw->deadline;
    bool first = false;
    gmp__spin_lock(&pd->lock);
    bool linked = pd_link(pd, fw);
    if (linked) {
        fw->committed = true;
        if (when)                   /* reserved before the park */
            first = gmp__timer_add(mp->p, &fw->t);
    }
    gmp__spin_unlock(&pd->lock);
    if (first)
        gmp__netpoll_wake_for(mp->sched, when);
    return linked;                  /* settled at once: run on */
}

int gmp__pd_wait(struct schedt *s, struct gmp__pd *pd, int modes,
                 uint64_t seq, int64_t deadline)
{
    if (deadline && gmp__nanotime() >= deadline)
        return GMP_ETIMEDOUT;
    struct fdwait fw = {.pd = pd, .s = s, .modes = modes, .seq = seq,
                        .deadline = deadline};
    gmp__wctx_init(&fw.w);
    if (fw.w.gp) {
        if (deadline)
            gmp__timer_reserve(gmp__getm()->p);
        fw.t = (struct gmp__timer){.when = deadline, .f = fd_timeout,
                                   .arg = &fw, .idx = -1};
        gmp__gopark(fd_commit, &fw, WAIT_IO);
        if (fw.committed) {
            if (deadline)
                gmp__timer_del(&fw.t);
            int32_t held = 0;
            gmp__spin_lock(&pd->lock);
            unlink_waiter(pd, &fw, &held);
            gmp__spin_unlock(&pd->lock);
            gmp__netpoll_release(s, held);
        }
    } else {
        gmp__spin_lock(&pd->lock);
        bool linked = pd_link(pd, &fw);
        gmp__spin_unlock(&pd->lock);
        if (linked) {
            /* A thread has no M of its own to poll with: make sure one
             * will (an idle one is started if a P is free; otherwise the
             * busy Ms and sysmon poll). */
            gmp__storeload_fence();
            gmp__wakep(s);
            bool woken = true;
            if (deadline) {
                int64_t left = deadline - gmp__nanotime();
                woken = left > 0 && gmp__notetsleep(&fw.w.note, left);
            } else {
                gmp__notesleep(&fw.w.note);
            }
            if (!woken) {
                if (gmp__wctx_claim(&fw.w))
                    fw.why = WHY_TIMEOUT;
                else
                    gmp__notesleep(&fw.w.note);  /* a waker owns us */
            }
            int32_t held = 0;
            gmp__spin_lock(&pd->lock);
            unlink_waiter(pd, &fw, &held);
            gmp__spin_unlock(&pd->lock);
            gmp__netpoll_release(s, held);
        }
    }
    switch (fw.why) {
    case WHY_CLOSED:  return GMP_EBADF;
    case WHY_TIMEOUT: return GMP_ETIMEDOUT;
    default:          return 0;
    }
}

void gmp__pd_set_deadline(struct schedt *s, struct gmp__pd *pd, int modes,
                          int64_t deadline)
{
    struct fdwait *wake = NULL;
    int32_t held = 0;
    gmp__spin_lock(&pd->lock);
    /* Relaxed stores: the release bump of the seq after each publishes
     * it (see gmp__pd_deadline). Relaxed loads of the seqs: their
     * writers hold this lock. */
    if (modes & PD_R) {
        atomic_store_explicit(&pd->rdeadline, deadline, memory_order_relaxed);
        atomic_store_explicit(&pd->rseq, atomic_load_explicit(
            &pd->rseq, memory_order_relaxed) + 1, memory_order_release);
    }
    if (modes & PD_W) {
        atomic_store_explicit(&pd->wdeadline, deadline, memory_order_relaxed);
        atomic_store_explicit(&pd->wseq, atomic_load_explicit(
            &pd->wseq, memory_order_relaxed) + 1, memory_order_release);
    }
    take_waiters(pd, modes, WHY_READY, &wake, &held);
    gmp__spin_unlock(&pd->lock);
    gmp__netpoll_release(s, held);
    while (wake) {
        struct fdwait *fw = wake;
        wake = fw->wakenext;        /* before fw may run and go */
        gmp__wctx_ready(&fw->w);
    }
}

struct closewait {
    struct gmp__wctx w;
    struct gmp__pd  *pd;
};

/* The closer's commit (on g0 for a G): wait only if calls are still
 * inside; the last to leave wakes it (gmp__pd_exit). */
static bool close_commit(struct g *gp, void *arg)
{
    (void)gp;
    struct closewait *cw = arg;
    struct gmp__pd *pd = cw->pd;
    gmp__spin_lock(&pd->lock);
    /* Relaxed: drained and closer settle the race under this lock. */
    bool wait = !pd->drained &&
                (atomic_load_explicit(&pd->refs, memory_order_relaxed) &
                 ~PD_CLOSING) != 0;
    if (wait)
        pd->closer = &cw->w;
    gmp__spin_unlock(&pd->lock);
    return wait;
}

int gmp__pd_close(struct schedt *s, struct gmp__pd *pd, int fd, bool closefd)
{
    /* Acq_rel: one closer wins; the others fail as a closed fd would. */
    uint32_t v = atomic_fetch_or_explicit(&pd->refs, PD_CLOSING,
                                          memory_order_acq_rel);
    if (v & PD_CLOSING) {
        gmp__pd_exit(pd);
        return GMP_EBADF;
    }
    struct fdwait *wake = NULL;
    int32_t held = 0;
    gmp__spin_lock(&pd->lock);
    take_waiters(pd, PD_R | PD_W, WHY_CLOSED, &wake, &held);
    pd->drained = false;
    gmp__spin_unlock(&pd->lock);
    gmp__netpoll_release(s, held);
    while (wake) {
        struct fdwait *fw = wake;
        wake = fw->wakenext;
        gmp__wctx_ready(&fw->w);
    }
    /* Our own call is one of the refs: leave, then wait for the rest. */
    gmp__pd_exit(pd);
    struct closewait cw = {.pd = pd};
    gmp__wctx_init(&cw.w);
    if (cw.w.gp)
        gmp__gopark(close_commit, &cw, WAIT_IO);
    else if (close_commit(NULL, &cw))
        gmp__notesleep(&cw.w.note);
    /* Acquire: every call has left the fd (pairs with the release in
     * gmp__pd_exit). */
    atomic_thread_fence(memory_order_acquire);
    int err = 0;
    if (pd->pollable)
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
    if (closefd && GMP_LIBC(close)(fd) != 0 && errno != EINTR)
        err = -errno;               /* EINTR: Linux closed it anyway */
    gmp__spin_lock(&pd->lock);
    pd->registered = pd->pollable = pd->sock = false;
    pd->drained = false;
    /* Relaxed: the release of refs below publishes them. */
    atomic_store_explicit(&pd->shortdrains, false, memory_order_relaxed);
    atomic_store_explicit(&pd->rdrained, 0, memory_order_relaxed);
    atomic_store_explicit(&pd->rdeadline, 0, memory_order_relaxed);
    atomic_store_explicit(&pd->wdeadline, 0, memory_order_relaxed);
    gmp__spin_unlock(&pd->lock);
    /* Release: the reset descriptor is seen by the next caller's acquire
     * in gmp__pd_enter. */
    atomic_store_explicit(&pd->refs, 0, memory_order_release);
    return err;
}
