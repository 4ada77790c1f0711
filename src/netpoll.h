/*
 * netpoll.h - the network poller (Go's netpoll.go and netpoll_epoll.go):
 * one epoll instance per runtime, edge-triggered, and a poll descriptor
 * per fd number that remembers readiness and who waits for it.
 *
 * Who polls: an M with nothing to run (findrunnable) blocks in epoll_wait
 * until an fd is ready, the earliest timer is due, or someone breaks the
 * wait through the eventfd (gmp__netpoll_break): at most one M at a time,
 * marked by sched.lastpoll == 0. Busy Ms poll without blocking before they
 * steal (and say so in lastpoll), and sysmon polls when nobody has for
 * 10 ms, or holds the poller while every P is busy (sysmon.c).
 */
#ifndef GMP_NETPOLL_H
#define GMP_NETPOLL_H

#include "runtime.h"

/* A busy M that polled without blocking moves sched.lastpoll to now when
 * it is this much older (findrunnable): sysmon takes the poller only for
 * Ps that nobody has polled for in a millisecond (sysmon_sleep). */
#define POLL_MARK_NS 100000

struct fdwait;

/* One per fd number, in chunks that live as long as the runtime (a
 * closed fd's number is reused by the next open: its descriptor is reset,
 * never freed). */
struct gmp__pd {
    /* In-flight gmp_* calls on the fd, plus PD_CLOSING once gmp_close has
     * begun: new calls then fail with GMP_EBADF. Atomic so that a call's
     * entry and exit are one RMW each; lock for the rest. */
    _Atomic uint32_t refs;
    struct gmp__spinlock lock;      /* everything below */
    bool registered;                /* in the epoll set (or not pollable) */
    bool pollable;                  /* epoll accepts it (not a file) */
    bool sock;                      /* a socket: writes use MSG_NOSIGNAL */
    /* Events seen per direction (PD_SEQ packs both). Written under lock;
     * read without it by callers about to try a system call. */
    _Atomic uint32_t rseq, wseq;
    /* Read skipping (gmp__pd_read_skip): whether a short read empties
     * the fd (a TCP socket that has shown no urgent data, hang-up or
     * error), and the rseq before the last read if it was short, + 2^32
     * (0: it was not). Atomic: any reader, and the poller, read and
     * write them. */
    _Atomic bool shortdrains;
    _Atomic uint64_t rdrained;
    /* Read and write deadlines (gmp_fd_set_deadline): absolute
     * gmp__nanotime, 0 for none. Written under lock, each change with a
     * bump of its direction's seq (gmp__pd_set_deadline); read without
     * the lock, after gmp__pd_seq, before each try. */
    _Atomic int64_t rdeadline, wdeadline;
    bool drained;                   /* refs reached 0 with no closer yet */
    struct fdwait *rq, *wq;         /* parked readers, writers */
    struct gmp__wctx *closer;       /* gmp_close waiting for refs to drain */
    gmp_mutex_t wmu;                /* one gmp_write at a time */
};

#define PD_CLOSING 0x80000000u

/* Sets up the epoll instance and its wake-up eventfd. 0 or GMP_E*.
 * Context: runtime construction. */
GMP_HIDDEN int gmp__netpoll_init(struct schedt *s);
/* Closes them and frees the descriptors. Context: runtime teardown. */
GMP_HIDDEN void gmp__netpoll_free(struct schedt *s);
/* Makes a blocked epoll_wait return. Context: any. */
GMP_HIDDEN void gmp__netpoll_break(struct schedt *s);
/* A timer due at when was added: make sure some M will wake for it
 * (Go's wakeNetPoller). Context: any, no locks held. */
GMP_HIDDEN void gmp__netpoll_wake_for(struct schedt *s, int64_t when);
/* Polls: delay < 0 blocks until an event, 0 does not block, > 0 waits up
 * to delay ns. Returns the Gs it made runnable, chained by schedlink
 * (count in *n, last in *tail); waiting threads are woken directly.
 * The waiter records it unlinked stay counted (*held of them) until the
 * caller, having queued or run those Gs, passes *held to
 * gmp__netpoll_release: until then a G on its way to a queue still
 * counts as waiting, and the deadlock check, which may run on the last
 * M meanwhile, sees it (Go's netpollAdjustWaiters). Context: any M
 * (blocking: one with no P), sysmon. */
GMP_HIDDEN struct g *gmp__netpoll(struct schedt *s, int64_t delay,
                                  struct g **tail, int32_t *n,
                                  int32_t *held);
GMP_HIDDEN void gmp__netpoll_release(struct schedt *s, int32_t held);
/* Whether any G or thread waits on a descriptor. Relaxed. */
GMP_HIDDEN bool gmp__netpoll_waiting(struct schedt *s);

/* Descriptor calls for io.c. Context: any G or thread. */
enum { PD_R = 1, PD_W = 2 };
/* Starts a call on fd: its descriptor, registered (non-blocking, in the
 * epoll set) on first use, with the call counted in refs. 0 or GMP_E*
 * (GMP_EBADF: bad or closing fd). */
GMP_HIDDEN int gmp__pd_enter(struct schedt *s, int fd, struct gmp__pd **out);
/* As gmp__pd_enter for an fd the runtime already registered: 1 (entered),
 * 0 (not registered: nothing entered, nothing registered). */
GMP_HIDDEN int gmp__pd_enter_known(struct schedt *s, int fd,
                                   struct gmp__pd **out);
/* Whether the entered pd's registration still names the file open as fd
 * (epoll keys a registration by file, and drops it when that file is
 * closed): if not, fd was closed behind the runtime's back and reopened,
 * and the new file is registered. One system call. 0 or GMP_E*. */
GMP_HIDDEN int gmp__pd_recheck(struct schedt *s, struct gmp__pd *pd, int fd);
/* Ends a call started by gmp__pd_enter. */
GMP_HIDDEN void gmp__pd_exit(struct gmp__pd *pd);
/* The descriptor's event counts, taken before each try of a system call
 * and handed to gmp__pd_wait after it failed with EAGAIN. Acquire: pairs
 * with the poller's release, so a count that includes an event comes with
 * the fd state that event reported. */
static inline uint64_t gmp__pd_seq(struct gmp__pd *pd)
{
    return (uint64_t)atomic_load_explicit(&pd->rseq, memory_order_acquire)
               << 32 |
           atomic_load_explicit(&pd->wseq, memory_order_acquire);
}
/* rdrained's value for a short read tried at seq (gmp__pd_seq). */
static inline uint64_t gmp__pd_rdrain_mark(uint64_t seq)
{
    return (seq >> 32) | (uint64_t)1 << 32;
}
/* Whether a read may skip its system call and wait at once: the last
 * read came up short, which on a TCP socket means it emptied the receive
 * queue, no event has come since (seq: gmp__pd_seq now), and some M will
 * poll soon: one blocks in the poller (which the kernel wakes the moment
 * data arrives), or a P is idle or an M spinning (each polls before it
 * steals). Data that arrived since raises an event, counted before the
 * wait links, so waiting cannot miss it; it saves the read that would
 * fail with EAGAIN (Go makes that call). While every P runs goroutines
 * and nobody spins, only sysmon polls, every 10 ms: then the read is
 * tried, so a peer that answered meanwhile is served at once, as in Go
 * (docs/design.md, "Timers and the poller"). */
static inline bool gmp__pd_read_skip(struct schedt *s, struct gmp__pd *pd,
                                     uint64_t seq)
{
    /* Relaxed: a stale value names an older seq, which no longer
     * matches; the acquire on rseq in gmp__pd_seq orders the poller's
     * clearing of shortdrains (before its bump) before this load.
     * The three counts are hints: a stale one costs at most one wait
     * for sysmon's poll, or one read that fails. */
    return atomic_load_explicit(&pd->rdrained, memory_order_relaxed) ==
               gmp__pd_rdrain_mark(seq) &&
           atomic_load_explicit(&pd->shortdrains, memory_order_relaxed) &&
           (atomic_load_explicit(&s->lastpoll, memory_order_relaxed) == 0 ||
            atomic_load_explicit(&s->npidle, memory_order_relaxed) != 0 ||
            atomic_load_explicit(&s->nmspinning, memory_order_relaxed) != 0);
}
/* After a read of want bytes that returned got > 0 (seq: gmp__pd_seq
 * from before it): remembers whether it was short, for
 * gmp__pd_read_skip (which alone asks whether short means empty). */
static inline void gmp__pd_read_done(struct gmp__pd *pd, uint64_t seq,
                                     size_t got, size_t want)
{
    /* Relaxed: a hint checked against rseq, see gmp__pd_read_skip. */
    atomic_store_explicit(&pd->rdrained,
                          got < want ? gmp__pd_rdrain_mark(seq) : 0,
                          memory_order_relaxed);
}
/* Parks (or sleeps a thread) until pd is ready for one of modes: 0 (try
 * the call again), GMP_EBADF (closed meanwhile), GMP_ETIMEDOUT (deadline
 * passed; 0: none), GMP_ENOMEM. seq is gmp__pd_seq from before the try
 * that failed: an event of modes since then returns 0 at once. */
GMP_HIDDEN int gmp__pd_wait(struct schedt *s, struct gmp__pd *pd, int modes,
                            uint64_t seq, int64_t deadline);
/* Sets the deadline of the directions in modes (0: none) and wakes
 * their waiters, which try again and read it anew. The change counts as
 * an event of those directions: a caller that read the seq before the
 * change and its deadline after finds the seq moved when it links, and
 * tries again too. */
GMP_HIDDEN void gmp__pd_set_deadline(struct schedt *s, struct gmp__pd *pd,
                                     int modes, int64_t deadline);
/* The deadline of direction mode (PD_R or PD_W), 0 for none. Relaxed:
 * read after gmp__pd_seq, whose acquire orders the setter's store (made
 * before its release bump) before this load when the seq includes the
 * change; when it does not, the waiter's link sees the seq moved. */
static inline int64_t gmp__pd_deadline(struct gmp__pd *pd, int mode)
{
    return atomic_load_explicit(mode == PD_R ? &pd->rdeadline
                                             : &pd->wdeadline,
                                memory_order_relaxed);
}
/* gmp_close's work on an entered pd: wakes every waiter with GMP_EBADF,
 * waits for the other calls to leave, drops the fd from the epoll set,
 * closes it (if closefd: gmp_fd_forget leaves it open) and resets pd.
 * Ends the caller's own call. */
GMP_HIDDEN int gmp__pd_close(struct schedt *s, struct gmp__pd *pd, int fd,
                             bool closefd);

#endif /* GMP_NETPOLL_H */
