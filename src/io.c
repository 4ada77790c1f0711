/*
 * io.c - gmp_read, gmp_write, gmp_accept, gmp_connect, gmp_fd_wait,
 * gmp_close: system calls on non-blocking fds that park on EAGAIN
 * (Go's internal/poll.FD over the poller, netpoll.c).
 *
 * Every call enters the fd's descriptor (counted, so gmp_close can wait
 * for it to leave) and runs one loop, try_once: try the system call, and
 * on EAGAIN wait on the descriptor, then try again. The loop is always
 * inlined with its system call in place, so each call compiles to what
 * it would be written by hand. Writes to one fd take turns (wmu), so
 * that each gmp_write's bytes go out contiguously, as Go's Write does;
 * reads and accepts need no such lock: a wake-up wakes every reader and
 * each retries. An fd that epoll refuses (a regular file) is always
 * ready: its calls run in the system-call bracket instead.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netpoll.h"
#include "timer.h"

/* The running runtime, for the calls below. Acquire: as in g.c. */
static struct schedt *cur(void)
{
    struct m *mp = gmp__getm();
    return mp ? mp->sched : atomic_load_explicit(&gmp__sched,
                                                 memory_order_acquire);
}

/* Enters fd: 0, or the error to return (no runtime comes first: every
 * call says GMP_EPERM then, whatever its arguments). */
static int enter(int fd, struct schedt **s, struct gmp__pd **pd)
{
    if (!(*s = cur()))
        return GMP_EPERM;
    if (fd < 0)
        return GMP_EBADF;
    gmp__preempt_check();
    return gmp__pd_enter(*s, fd, pd);
}

/* A file's read or write may block on the disk: inside the bracket. */
#define BRACKETED(call)                                                     \
    ({                                                                      \
        gmp_syscall_enter();                                                \
        ssize_t r_ = (call);                                                \
        int e_ = errno;                                                     \
        gmp_syscall_exit();                                                 \
        errno = e_;                                                         \
        r_;                                                                 \
    })

/* A call's arguments, for its try function. */
struct io_args {
    int                 fd, flags;
    void               *buf;            /* read, recv*: into; writes: from */
    size_t              n;
    struct sockaddr    *addr;
    socklen_t          *alen;           /* recvfrom, accept4 */
    socklen_t           slen;           /* sendto */
    const struct iovec *iov;
    int                 iovcnt;
    struct msghdr      *msg;
};

/* One try of a call's system call: >= 0, or -1 with errno set. */
typedef ssize_t (*try_fn)(struct gmp__pd *pd, const struct io_args *a);

enum {
    IO_ONCE = 1,        /* EAGAIN is the answer: no wait (MSG_DONTWAIT) */
    IO_SKIP = 2,        /* a consuming read: gmp__pd_read_skip may save
                           its try, and its count feeds the skip */
};

/*
 * The loop every call shares, on an entered pd: until the system call
 * (op) succeeds or fails for good, reads the event count, tries, and on
 * EAGAIN waits for an event and tries again. Returns
 * op's count or a negative error. want: the bytes an IO_SKIP read asked
 * for. Always inlined: op is a constant at each call site, so the loop
 * compiles with op's system call in place, with no call through a
 * pointer. Context: any G or thread, inside pd.
 */
static inline __attribute__((always_inline)) ssize_t
try_once(struct schedt *s, struct gmp__pd *pd, int mode, int how,
         try_fn op, const struct io_args *a, size_t want)
{
    for (;;) {
        uint64_t seq = gmp__pd_seq(pd);
        ssize_t r;
        if ((how & IO_SKIP) && gmp__pd_read_skip(pd, seq)) {
            errno = EAGAIN;         /* what the read would say */
            r = -1;
        } else {
            r = op(pd, a);
        }
        if (r >= 0) {
            if ((how & IO_SKIP) && r > 0)
                gmp__pd_read_done(pd, seq, (size_t)r, want);
            return r;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN || !pd->pollable || (how & IO_ONCE))
            return -errno;
        int err = gmp__pd_wait(s, pd, mode, seq, 0);
        if (err)
            return err;
    }
}

/* Enters fd, runs try_once, leaves: a call with no turn to take. */
static inline __attribute__((always_inline)) ssize_t
io_call(int mode, int how, try_fn op, const struct io_args *a, size_t want)
{
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(a->fd, &s, &pd);
    if (err)
        return err;
    ssize_t r = try_once(s, pd, mode, how, op, a, want);
    gmp__pd_exit(pd);
    return r;
}

/* ---- Reads ------------------------------------------------------------- */

static ssize_t try_read(struct gmp__pd *pd, const struct io_args *a)
{
    return pd->pollable ? read(a->fd, a->buf, a->n)
                        : BRACKETED(read(a->fd, a->buf, a->n));
}

ssize_t gmp_read(int fd, void *buf, size_t n)
{
    if (!buf && n)
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .buf = buf, .n = n};
    return io_call(PD_R, IO_SKIP, try_read, &a, n);
}

/* ---- Writes ------------------------------------------------------------- */

/* One write(2), or send(2) without SIGPIPE on a socket. */
static ssize_t try_write(struct gmp__pd *pd, const struct io_args *a)
{
    if (pd->sock)
        return send(a->fd, a->buf, a->n, MSG_NOSIGNAL);
    return pd->pollable ? write(a->fd, a->buf, a->n)
                        : BRACKETED(write(a->fd, a->buf, a->n));
}

/* Writes all a->n bytes from a->buf with op, in turn with the fd's other
 * writes: n, or the error (even if part went out before it, as Go's
 * Write). One try only with IO_ONCE: its count, which may be short. */
static inline __attribute__((always_inline)) ssize_t
write_all(int how, try_fn op, struct io_args *a)
{
    if (!a->buf && a->n)
        return GMP_EINVAL;
    if (a->n > SSIZE_MAX)
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(a->fd, &s, &pd);
    if (err)
        return err;
    gmp_mutex_lock(&pd->wmu);
    size_t n = a->n;
    ssize_t r;
    for (;;) {
        r = try_once(s, pd, PD_W, how, op, a, 0);
        if (r < 0 || (how & IO_ONCE))
            break;
        a->buf = (char *)a->buf + r;
        a->n -= (size_t)r;
        if (a->n == 0) {
            r = (ssize_t)n;
            break;
        }
    }
    gmp_mutex_unlock(&pd->wmu);
    gmp__pd_exit(pd);
    return r;
}

ssize_t gmp_write(int fd, const void *buf, size_t n)
{
    struct io_args a = {.fd = fd, .buf = (void *)buf, .n = n};
    return write_all(0, try_write, &a);
}

/* ---- Sockets ------------------------------------------------------------ */

static ssize_t try_accept(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    ssize_t r = accept4(a->fd, a->addr, a->alen, a->flags);
    /* A connection reset before we took it: take the next (Go). */
    if (r < 0 && errno == ECONNABORTED)
        errno = EINTR;
    return r;
}

int gmp_accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    if (addr && !len)
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .addr = addr, .alen = len,
                        .flags = SOCK_NONBLOCK | SOCK_CLOEXEC};
    return (int)io_call(PD_R, 0, try_accept, &a, 0);
}

int gmp_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (!addr)
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    uint64_t seq = gmp__pd_seq(pd);
    int r = connect(fd, addr, len) == 0 ? 0 : -errno;
    if (r == -EISCONN)
        r = 0;
    /* In progress: wait until writable, then ask the socket. The poller
     * may wake us early (a fresh socket reports writable), so a zero
     * SO_ERROR counts only once the peer is known (Go does the same). */
    while (r == -EINPROGRESS || r == -EALREADY || r == -EINTR) {
        if ((r = gmp__pd_wait(s, pd, PD_W, seq, 0)) != 0)
            break;
        seq = gmp__pd_seq(pd);
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) {
            r = -errno;
            break;
        }
        if (soerr == 0) {
            struct sockaddr_storage peer;
            socklen_t pl = sizeof peer;
            r = getpeername(fd, (struct sockaddr *)&peer, &pl) == 0
                    ? 0 : -EINPROGRESS;
        } else {
            r = soerr == EISCONN ? 0 : -soerr;
        }
    }
    gmp__pd_exit(pd);
    return r;
}

int gmp_fd_wait(int fd, int events, int64_t timeout_ns)
{
    if (!events || (events & ~(GMP_POLLIN | GMP_POLLOUT)))
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    int64_t deadline = 0;
    if (timeout_ns > 0)
        deadline = gmp__deadline(gmp__nanotime(), timeout_ns);
    int modes = (events & GMP_POLLIN ? PD_R : 0) |
                (events & GMP_POLLOUT ? PD_W : 0);
    int r;
    for (;;) {
        /* The fd's state now: the poller only reports changes, and a
         * caller may not have drained what it was told about last time. */
        uint64_t seq = gmp__pd_seq(pd);
        struct pollfd pfd = {.fd = fd, .events = (short)events};
        int n = poll(&pfd, 1, 0);
        if (n < 0 && errno != EINTR) {
            r = -errno;
            break;
        }
        if (n > 0) {
            if (pfd.revents & POLLNVAL) {
                r = GMP_EBADF;
                break;
            }
            r = pfd.revents & (POLLERR | POLLHUP) ? events
                                                   : pfd.revents & events;
            if (r)
                break;
        }
        if (timeout_ns != GMP_FOREVER && timeout_ns <= 0) {
            r = GMP_ETIMEDOUT;
            break;
        }
        if (!pd->pollable) {
            r = events;             /* a file is always ready */
            break;
        }
        if ((r = gmp__pd_wait(s, pd, modes, seq, deadline)) != 0)
            break;
    }
    gmp__pd_exit(pd);
    return r;
}

int gmp_close(int fd)
{
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    return gmp__pd_close(s, pd, fd);
}
