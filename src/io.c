/*
 * io.c - the fd calls (gmp_read, gmp_write, gmp_recv, gmp_send and the
 * rest of the family, gmp_accept4, gmp_connect, gmp_fd_wait, gmp_poll,
 * gmp_fd_set_deadline, gmp_close): system calls on non-blocking fds that
 * park on EAGAIN (Go's internal/poll.FD over the poller, netpoll.c).
 *
 * Every call enters the fd's descriptor (counted, so gmp_close can wait
 * for it to leave) and runs one loop, try_once: check the direction's
 * deadline, try the system call, and on EAGAIN wait on the descriptor,
 * then try again. The loop is always inlined with its system call in
 * place, so each call compiles to what it would be written by hand.
 * Turns: the calls that write all of a buffer (gmp_write, gmp_send,
 * gmp_writev) and the one-call writes (gmp_sendto, gmp_sendmsg) take
 * turns per fd (wmu), so that each one's bytes go out contiguously, as
 * Go's Write, WriteTo and WriteMsg do; reads and accepts need no such
 * lock: a wake-up wakes every reader and each retries. An fd that epoll
 * refuses (a regular file) is always ready: its calls run in the
 * system-call bracket instead.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
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
 * (op) succeeds or fails for good, reads the event count, fails with
 * GMP_ETIMEDOUT if the direction's deadline has passed, tries, and on
 * EAGAIN waits for an event (or the deadline) and tries again. Returns
 * op's count or a negative error. want: the bytes an IO_SKIP read asked
 * for. Always inlined: op is a constant at each call site, so the loop
 * compiles with op's system call in place, with no call through a
 * pointer (the read and write fast paths are as before: one load of the
 * deadline more). Context: any G or thread, inside pd.
 */
static inline __attribute__((always_inline)) ssize_t
try_once(struct schedt *s, struct gmp__pd *pd, int mode, int how,
         try_fn op, const struct io_args *a, size_t want)
{
    for (;;) {
        uint64_t seq = gmp__pd_seq(pd);
        int64_t dl = gmp__pd_deadline(pd, mode);
        if (GMP_UNLIKELY(dl != 0) && gmp__nanotime() >= dl)
            return GMP_ETIMEDOUT;
        ssize_t r;
        if ((how & IO_SKIP) && gmp__pd_read_skip(s, pd, seq)) {
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
        int err = gmp__pd_wait(s, pd, mode, seq, dl);
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
    return pd->pollable ? GMP_LIBC(read)(a->fd, a->buf, a->n)
                        : BRACKETED(GMP_LIBC(read)(a->fd, a->buf, a->n));
}

ssize_t gmp_read(int fd, void *buf, size_t n)
{
    if (!buf && n)
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .buf = buf, .n = n};
    return io_call(PD_R, IO_SKIP, try_read, &a, n);
}

static ssize_t try_recv(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    return GMP_LIBC(recv)(a->fd, a->buf, a->n, a->flags);
}

/* Whether fd is a stream socket (MSG_WAITALL means something there). */
static bool is_stream(int fd)
{
    int type = 0;
    socklen_t len = sizeof type;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
           type == SOCK_STREAM;
}

ssize_t gmp_recv(int fd, void *buf, size_t n, int flags)
{
    if (!buf && n)
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .buf = buf, .n = n, .flags = flags};
    int how = flags & MSG_DONTWAIT ? IO_ONCE : flags == 0 ? IO_SKIP : 0;
    if (!(flags & MSG_WAITALL) || (flags & (MSG_PEEK | MSG_DONTWAIT)))
        return io_call(PD_R, how, try_recv, &a, n);
    /* MSG_WAITALL: the socket is non-blocking, where the kernel returns
     * what it has; a blocking recv(2) waits for all n on a stream, which
     * we do by receiving the rest until all is in, the end or an error
     * (then the count so far, if any, as recv(2) does). */
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    bool stream = is_stream(fd);
    size_t got = 0;
    ssize_t r;
    do {
        a.buf = (char *)buf + got;
        a.n = n - got;
        r = try_once(s, pd, PD_R, 0, try_recv, &a, 0);
        if (r > 0)
            got += (size_t)r;
    } while (stream && r > 0 && got < n);
    gmp__pd_exit(pd);
    return r < 0 && got == 0 ? r : (ssize_t)got;
}

static ssize_t try_recvfrom(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    return GMP_LIBC(recvfrom)(a->fd, a->buf, a->n, a->flags, a->addr, a->alen);
}

ssize_t gmp_recvfrom(int fd, void *buf, size_t n, int flags,
                     struct sockaddr *addr, socklen_t *len)
{
    if ((!buf && n) || (addr && !len))
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .buf = buf, .n = n, .flags = flags,
                        .addr = addr, .alen = len};
    return io_call(PD_R, flags & MSG_DONTWAIT ? IO_ONCE : 0, try_recvfrom,
                   &a, 0);
}

/* The bytes iov[0..cnt) name: 0, or GMP_EINVAL for a bad vector (NULL,
 * cnt out of 0..IOV_MAX, a total past SSIZE_MAX). */
static int iov_total(const struct iovec *iov, int cnt, size_t *total)
{
    if (cnt < 0 || cnt > IOV_MAX || (!iov && cnt))
        return GMP_EINVAL;
    size_t t = 0;
    for (int i = 0; i < cnt; i++) {
        if (iov[i].iov_len > SSIZE_MAX - t)
            return GMP_EINVAL;
        t += iov[i].iov_len;
    }
    *total = t;
    return 0;
}

static ssize_t try_readv(struct gmp__pd *pd, const struct io_args *a)
{
    return pd->pollable ? GMP_LIBC(readv)(a->fd, a->iov, a->iovcnt)
                        : BRACKETED(GMP_LIBC(readv)(a->fd, a->iov, a->iovcnt));
}

ssize_t gmp_readv(int fd, const struct iovec *iov, int cnt)
{
    size_t total;
    int err = iov_total(iov, cnt, &total);
    if (err)
        return err;
    struct io_args a = {.fd = fd, .iov = iov, .iovcnt = cnt};
    return io_call(PD_R, IO_SKIP, try_readv, &a, total);
}

static ssize_t try_recvmsg(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    return GMP_LIBC(recvmsg)(a->fd, a->msg, a->flags);
}

ssize_t gmp_recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (!msg)
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .msg = msg, .flags = flags};
    return io_call(PD_R, flags & MSG_DONTWAIT ? IO_ONCE : 0, try_recvmsg,
                   &a, 0);
}

/* ---- Writes ------------------------------------------------------------- */

/* One write(2), or send(2) without SIGPIPE on a socket. */
static ssize_t try_write(struct gmp__pd *pd, const struct io_args *a)
{
    if (pd->sock)
        return GMP_LIBC(send)(a->fd, a->buf, a->n, MSG_NOSIGNAL);
    return pd->pollable ? GMP_LIBC(write)(a->fd, a->buf, a->n)
                        : BRACKETED(GMP_LIBC(write)(a->fd, a->buf, a->n));
}

static ssize_t try_send(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    return GMP_LIBC(send)(a->fd, a->buf, a->n, a->flags | MSG_NOSIGNAL);
}

/* Takes the fd's write turn: 0, or GMP_EAGAIN when IO_ONCE finds it
 * taken (a writer parked on a full fd holds it: MSG_DONTWAIT must not
 * wait behind it). */
static inline int take_turn(struct gmp__pd *pd, int how)
{
    if (how & IO_ONCE)
        return gmp_mutex_trylock(&pd->wmu) == 0 ? 0 : GMP_EAGAIN;
    gmp_mutex_lock(&pd->wmu);
    return 0;
}

/* Enters fd and takes its write turn: 0, or the error to return, with
 * neither held. leave_turn undoes both. */
static inline int enter_turn(int fd, int how, struct schedt **s,
                             struct gmp__pd **pd)
{
    int err = enter(fd, s, pd);
    if (!err && (err = take_turn(*pd, how)) != 0)
        gmp__pd_exit(*pd);
    return err;
}

static inline void leave_turn(struct gmp__pd *pd)
{
    gmp_mutex_unlock(&pd->wmu);
    gmp__pd_exit(pd);
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
    int err = enter_turn(a->fd, how, &s, &pd);
    if (err)
        return err;
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
    leave_turn(pd);
    return r;
}

ssize_t gmp_write(int fd, const void *buf, size_t n)
{
    struct io_args a = {.fd = fd, .buf = (void *)buf, .n = n};
    return write_all(0, try_write, &a);
}

ssize_t gmp_send(int fd, const void *buf, size_t n, int flags)
{
    struct io_args a = {.fd = fd, .buf = (void *)buf, .n = n,
                        .flags = flags};
    return write_all(flags & MSG_DONTWAIT ? IO_ONCE : 0, try_send, &a);
}

/* A write of one system call (sendto, sendmsg), in turn with the fd's
 * other writes. */
static inline __attribute__((always_inline)) ssize_t
write_one(int how, try_fn op, const struct io_args *a)
{
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter_turn(a->fd, how, &s, &pd);
    if (err)
        return err;
    ssize_t r = try_once(s, pd, PD_W, how, op, a, 0);
    leave_turn(pd);
    return r;
}

static ssize_t try_sendto(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    return GMP_LIBC(sendto)(a->fd, a->buf, a->n, a->flags | MSG_NOSIGNAL, a->addr,
                  a->slen);
}

ssize_t gmp_sendto(int fd, const void *buf, size_t n, int flags,
                   const struct sockaddr *addr, socklen_t len)
{
    if ((!buf && n) || n > SSIZE_MAX)
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .buf = (void *)buf, .n = n,
                        .flags = flags, .addr = (struct sockaddr *)addr,
                        .slen = len};
    return write_one(flags & MSG_DONTWAIT ? IO_ONCE : 0, try_sendto, &a);
}

static ssize_t try_sendmsg(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    return GMP_LIBC(sendmsg)(a->fd, a->msg, a->flags | MSG_NOSIGNAL);
}

ssize_t gmp_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (!msg)
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .msg = (struct msghdr *)msg,
                        .flags = flags};
    return write_one(flags & MSG_DONTWAIT ? IO_ONCE : 0, try_sendmsg, &a);
}

/* writev(2), or sendmsg(2) without SIGPIPE on a socket. */
static ssize_t try_writev(struct gmp__pd *pd, const struct io_args *a)
{
    if (pd->sock) {
        struct msghdr m = {.msg_iov = (struct iovec *)a->iov,
                           .msg_iovlen = (size_t)a->iovcnt};
        return GMP_LIBC(sendmsg)(a->fd, &m, MSG_NOSIGNAL);
    }
    return pd->pollable ? GMP_LIBC(writev)(a->fd, a->iov, a->iovcnt)
                        : BRACKETED(GMP_LIBC(writev)(a->fd, a->iov, a->iovcnt));
}

/* After a short writev, the rest to write: at most IOV_WINDOW entries
 * of iov[0..cnt) from byte done on, copied into win (the caller's iov is
 * const), the first one cut. The count it fills. */
#define IOV_WINDOW 64

static int iov_rest(const struct iovec *iov, int cnt, size_t done,
                    struct iovec *win)
{
    int i = 0;
    while (i < cnt && done >= iov[i].iov_len) {
        done -= iov[i].iov_len;
        i++;
    }
    int k = 0;
    for (; i < cnt && k < IOV_WINDOW; i++, k++) {
        win[k].iov_base = (char *)iov[i].iov_base + done;
        win[k].iov_len = iov[i].iov_len - done;
        done = 0;
    }
    return k;
}

ssize_t gmp_writev(int fd, const struct iovec *iov, int cnt)
{
    size_t total;
    int err = iov_total(iov, cnt, &total);
    if (err)
        return err;
    struct schedt *s;
    struct gmp__pd *pd;
    if ((err = enter_turn(fd, 0, &s, &pd)) != 0)
        return err;
    /* The first try writes the caller's vector whole (one datagram on a
     * datagram socket); only a short write on a stream needs the rest. */
    struct iovec win[IOV_WINDOW];
    struct io_args a = {.fd = fd, .iov = iov, .iovcnt = cnt};
    size_t done = 0;
    ssize_t r;
    for (;;) {
        r = try_once(s, pd, PD_W, 0, try_writev, &a, 0);
        if (r < 0)
            break;
        done += (size_t)r;
        if (done >= total) {
            r = (ssize_t)total;
            break;
        }
        a.iov = win;
        a.iovcnt = iov_rest(iov, cnt, done, win);
    }
    leave_turn(pd);
    return r;
}

/* ---- Sockets ------------------------------------------------------------ */

static ssize_t try_accept(struct gmp__pd *pd, const struct io_args *a)
{
    (void)pd;
    ssize_t r = GMP_LIBC(accept4)(a->fd, a->addr, a->alen, a->flags);
    /* A connection reset before we took it: take the next (Go). */
    if (r < 0 && errno == ECONNABORTED)
        errno = EINTR;
    return r;
}

int gmp_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    if ((addr && !len) || (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)))
        return GMP_EINVAL;
    struct io_args a = {.fd = fd, .addr = addr, .alen = len,
                        .flags = flags};
    return (int)io_call(PD_R, 0, try_accept, &a, 0);
}

int gmp_accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    return gmp_accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    int64_t dl = gmp__pd_deadline(pd, PD_W);
    if (dl && gmp__nanotime() >= dl) {
        gmp__pd_exit(pd);
        return GMP_ETIMEDOUT;
    }
    int r = GMP_LIBC(connect)(fd, addr, len) == 0 ? 0 : -errno;
    if (r == -EISCONN)
        r = 0;
    /* In progress: wait until writable, then ask the socket. The poller
     * may wake us early (a fresh socket reports writable), so a zero
     * SO_ERROR counts only once the peer is known (Go does the same). */
    while (r == -EINPROGRESS || r == -EALREADY || r == -EINTR) {
        if ((r = gmp__pd_wait(s, pd, PD_W, seq, dl)) != 0)
            break;
        seq = gmp__pd_seq(pd);
        dl = gmp__pd_deadline(pd, PD_W);
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

/* The earliest deadline of fd's directions in modes (0: none). */
static int64_t fd_deadline(struct gmp__pd *pd, int modes)
{
    int64_t dl = 0;
    for (int d = PD_R; d <= PD_W; d <<= 1) {
        int64_t x = modes & d ? gmp__pd_deadline(pd, d) : 0;
        if (x && (!dl || x < dl))
            dl = x;
    }
    return dl;
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
    int64_t until = 0;
    if (timeout_ns > 0)
        until = gmp__deadline(gmp__nanotime(), timeout_ns);
    int modes = (events & GMP_POLLIN ? PD_R : 0) |
                (events & GMP_POLLOUT ? PD_W : 0);
    int r;
    for (;;) {
        /* The fd's state now: the poller only reports changes, and a
         * caller may not have drained what it was told about last time. */
        uint64_t seq = gmp__pd_seq(pd);
        /* Once the fd's deadline has passed it fails the wait as it
         * fails a read. */
        int64_t fdl = fd_deadline(pd, modes);
        if (fdl && gmp__nanotime() >= fdl) {
            r = GMP_ETIMEDOUT;
            break;
        }
        int64_t deadline = fdl && (!until || fdl < until) ? fdl : until;
        struct pollfd pfd = {.fd = fd, .events = (short)events};
        int n = GMP_LIBC(poll)(&pfd, 1, 0);
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
        /* A library that waits here on an fd it owns may have closed the
         * fd the runtime registered and reopened the number: without the
         * check the wait would never end (gmp_fd_forget tells the
         * runtime instead). */
        if ((r = gmp__pd_recheck(s, pd, fd)) != 0 ||
            (r = gmp__pd_wait(s, pd, modes, seq, deadline)) != 0)
            break;
    }
    gmp__pd_exit(pd);
    return r;
}

int gmp_fd_set_deadline(int fd, int events, int64_t deadline_ns)
{
    if (!events || (events & ~(GMP_POLLIN | GMP_POLLOUT)) || deadline_ns < 0)
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    gmp__pd_set_deadline(s, pd, (events & GMP_POLLIN ? PD_R : 0) |
                                    (events & GMP_POLLOUT ? PD_W : 0),
                         deadline_ns);
    gmp__pd_exit(pd);
    return 0;
}

/* ---- Polling several fds -------------------------------------------------
 *
 * gmp_poll answers with poll(2) itself, never blocking in it: revents are
 * poll's, for every kind of fd, including those epoll refuses (a regular
 * file is ready for what poll says it is ready for). Only the wait goes
 * through the poller: the fds go into a private epoll set,
 * level-triggered, with the events each entry asks for, and the
 * goroutine parks on that set's fd (an epoll fd is itself pollable)
 * until some fd in it is ready; then poll(2) tells which. The polled fds
 * are not entered: poll(2) must leave them as they are (registering one
 * would make it non-blocking under a program that reads it with read(2)),
 * and linking a waiter record on each descriptor would cost memory per
 * fd per call. The set costs a system call per fd per blocking call.
 */

/* Whether the caller is a goroutine with a P, which can park. */
static bool can_park(void)
{
    struct m *mp = gmp__getm();
    return mp && mp->curg && mp->p;
}

/* poll(2) without waiting: the count, or a negative errno. */
static int poll_now(struct pollfd *fds, nfds_t n)
{
    int r;
    while ((r = GMP_LIBC(poll)(fds, n, 0)) < 0 && errno == EINTR)
        ;
    return r < 0 ? -errno : r;
}

/* A plain thread (or a G in a syscall bracket): poll(2) with the time
 * left until `until` (0: for ever). */
static int poll_thread(struct pollfd *fds, nfds_t n, int64_t until)
{
    for (;;) {
        struct timespec ts, *tp = NULL;
        if (until) {
            int64_t left = until - gmp__nanotime();
            if (left < 0)
                left = 0;
            ts.tv_sec = left / 1000000000;
            ts.tv_nsec = left % 1000000000;
            tp = &ts;
        }
        int r = GMP_LIBC(ppoll)(fds, n, tp, NULL);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            return -errno;
    }
}

/* Adds entry i of fds to the private set ep: 0 or a negative errno. An
 * fd already in it (listed twice) gets the union of its entries' events;
 * one epoll refuses (a file) is left out: poll_now answers for it. */
static int poll_add(int ep, const struct pollfd *fds, nfds_t i)
{
    /* POLL* and EPOLL* have the same values on Linux. */
    const uint32_t mask = POLLIN | POLLPRI | POLLOUT | POLLRDNORM |
                          POLLRDBAND | POLLWRNORM | POLLWRBAND | POLLRDHUP;
    struct epoll_event ev = {.events = (uint16_t)fds[i].events & mask};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i].fd, &ev) == 0 || errno == EPERM)
        return 0;
    if (errno != EEXIST)
        return -errno;
    for (nfds_t j = 0; j < i; j++)
        if (fds[j].fd == fds[i].fd)
            ev.events |= (uint16_t)fds[j].events & mask;
    return epoll_ctl(ep, EPOLL_CTL_MOD, fds[i].fd, &ev) == 0 ? 0 : -errno;
}

int gmp_poll(struct pollfd *fds, nfds_t n, int64_t timeout_ns)
{
    struct schedt *s = cur();
    if (!s)
        return GMP_EPERM;
    if (!fds && n)
        return GMP_EINVAL;
    gmp__preempt_check();
    bool forever = timeout_ns == GMP_FOREVER;
    int64_t until = 0;
    if (timeout_ns > 0)
        until = gmp__deadline(gmp__nanotime(), timeout_ns);
    int r = poll_now(fds, n);
    if (r != 0 || (!forever && timeout_ns <= 0))
        return r;
    if (!can_park())
        return poll_thread(fds, n, until);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return -errno;
    for (nfds_t i = 0; i < n && r == 0; i++)
        if (fds[i].fd >= 0)
            r = poll_add(ep, fds, i);
    while (r == 0) {
        int64_t left = GMP_FOREVER;
        if (!forever && (left = until - gmp__nanotime()) <= 0)
            break;                  /* the time ran out: 0, as poll(2) */
        int w = gmp_fd_wait(ep, GMP_POLLIN, left);
        if (w < 0 && w != GMP_ETIMEDOUT) {
            r = w;
            break;
        }
        /* Ready (or timed out: a last look): which? None if another
         * caller took what made it ready; then wait again. */
        r = poll_now(fds, n);
        if (w == GMP_ETIMEDOUT)
            break;
    }
    gmp_close(ep);
    return r;
}

/* gmp_close and gmp_fd_forget: fd's descriptor reset and its waiters
 * woken, the fd closed or not. An fd the runtime never registered has no
 * state: it is only closed. */
static int drop(int fd, bool closefd)
{
    struct schedt *s = cur();
    if (!s)
        return GMP_EPERM;
    if (fd < 0)
        return GMP_EBADF;
    gmp__preempt_check();
    struct gmp__pd *pd;
    int r = gmp__pd_enter_known(s, fd, &pd);
    if (r == 1)
        return gmp__pd_close(s, pd, fd, closefd);
    if (r < 0 || !closefd)
        return r;
    return GMP_LIBC(close)(fd) == 0 || errno == EINTR ? 0 : -errno;
}

int gmp_close(int fd)
{
    return drop(fd, true);
}

int gmp_fd_forget(int fd)
{
    return drop(fd, false);
}

/* ---- Any call on an fd --------------------------------------------------- */

/* Whether the signal mask of the calling thread is the one goroutines run
 * with (an M's, preempt.c): not inside a signal handler, nor in code
 * that blocked signals. One system call. */
static bool usual_mask(struct m *mp)
{
    sigset_t set;
    uint64_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &set);
    memcpy(&mask, &set, sizeof mask);
    return mask == mp->sigmask0;
}

/* Whether the caller is a goroutine that holds its P, on its own stack. */
static bool on_goroutine(struct m *mp)
{
    return gmp__on_gstack(mp) && mp->p;
}

int gmp_can_park(void)
{
    struct m *mp = gmp__getm();
    return on_goroutine(mp) && usual_mask(mp);
}

ssize_t gmp_fd_call(int fd, int events, ssize_t (*fn)(int fd, void *arg),
                    void *arg, int64_t timeout_ns)
{
    if (!fn || !events || (events & ~(GMP_POLLIN | GMP_POLLOUT)))
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    bool forever = timeout_ns == GMP_FOREVER;
    int64_t until = 0;
    if (timeout_ns > 0)
        until = gmp__deadline(gmp__nanotime(), timeout_ns);
    int modes = (events & GMP_POLLIN ? PD_R : 0) |
                (events & GMP_POLLOUT ? PD_W : 0);
    /* Whether a goroutine may park here: asked once, at the first wait
     * (the mask costs a system call). */
    int park = -1;
    ssize_t r;
    for (;;) {
        uint64_t seq = gmp__pd_seq(pd);
        int64_t dl = fd_deadline(pd, modes);
        if (until && (!dl || until < dl))
            dl = until;
        if (dl && gmp__nanotime() >= dl) {
            r = GMP_ETIMEDOUT;
            break;
        }
        r = fn(fd, arg);
        if (r >= 0)
            break;
        if (errno == EINTR)
            continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || !pd->pollable) {
            r = -errno;
            break;
        }
        if (!forever && !until) {
            r = GMP_ETIMEDOUT;      /* timeout 0: one try */
            break;
        }
        struct m *mp = gmp__getm();
        /* A plain thread, or a G inside a syscall bracket, waits as a
         * thread in gmp__pd_wait; a G parks there, but only from its own
         * stack (not from the runtime's g0 stack, where a memory hook
         * runs, nor a signal stack) and with the usual signal mask. */
        if (park < 0)
            park = !(mp && mp->curg && mp->p) ||
                   (on_goroutine(mp) && usual_mask(mp));
        if (!park) {
            /* Inside a signal handler, with signals blocked, or off the
             * goroutine's stack: no switch, the thread waits in poll(2). */
            struct pollfd pfd = {.fd = fd, .events = (short)events};
            int p = poll_thread(&pfd, 1, dl);
            if (p < 0) {
                r = p;
                break;
            }
            continue;
        }
        if ((err = gmp__pd_wait(s, pd, modes, seq, dl)) != 0) {
            r = err;
            break;
        }
    }
    gmp__pd_exit(pd);
    return r;
}
