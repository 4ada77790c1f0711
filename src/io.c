/*
 * io.c - gmp_read, gmp_write, gmp_accept, gmp_connect, gmp_fd_wait,
 * gmp_close: system calls on non-blocking fds that park on EAGAIN
 * (Go's internal/poll.FD over the poller, netpoll.c).
 *
 * Every call enters the fd's descriptor (counted, so gmp_close can wait
 * for it to leave), tries the system call, and on EAGAIN waits on the
 * descriptor, then tries again. Writes to one fd take turns (wmu), so
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

/* After a call failed with errno: 1 to try it again (EINTR, or EAGAIN
 * and the fd has become ready), else the error to return. seq: the
 * descriptor's gmp__pd_seq from before the call. */
static ssize_t retry(struct schedt *s, struct gmp__pd *pd, int mode,
                     uint64_t seq)
{
    if (errno == EINTR)
        return 1;
    if (errno != EAGAIN || !pd->pollable)
        return -errno;
    int r = gmp__pd_wait(s, pd, mode, seq, 0);
    return r ? r : 1;
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

ssize_t gmp_read(int fd, void *buf, size_t n)
{
    if (!buf && n)
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    ssize_t r;
    uint64_t seq;
    do {
        seq = gmp__pd_seq(pd);
        if (gmp__pd_read_skip(s, pd, seq)) {
            errno = EAGAIN;         /* what the read would say */
            r = -1;
        } else {
            r = pd->pollable ? read(fd, buf, n)
                             : BRACKETED(read(fd, buf, n));
        }
    } while (r < 0 && (r = retry(s, pd, PD_R, seq)) == 1);
    if (r > 0)
        gmp__pd_read_done(pd, seq, (size_t)r, n);
    gmp__pd_exit(pd);
    return r;
}

/* One write(2), or send(2) without SIGPIPE on a socket. */
static ssize_t write1(struct gmp__pd *pd, int fd, const char *p, size_t n)
{
    if (pd->sock)
        return send(fd, p, n, MSG_NOSIGNAL);
    return pd->pollable ? write(fd, p, n) : BRACKETED(write(fd, p, n));
}

ssize_t gmp_write(int fd, const void *buf, size_t n)
{
    if (!buf && n)
        return GMP_EINVAL;
    if (n > SSIZE_MAX)
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    gmp_mutex_lock(&pd->wmu);
    const char *p = buf;
    size_t done = 0;
    ssize_t r = 0;
    for (;;) {
        uint64_t seq = gmp__pd_seq(pd);
        r = write1(pd, fd, p + done, n - done);
        if (r >= 0) {
            done += (size_t)r;
            if (done < n)
                continue;
            r = (ssize_t)n;
            break;
        }
        if ((r = retry(s, pd, PD_W, seq)) != 1)
            break;
    }
    gmp_mutex_unlock(&pd->wmu);
    gmp__pd_exit(pd);
    return r;
}

int gmp_accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    if (addr && !len)
        return GMP_EINVAL;
    struct schedt *s;
    struct gmp__pd *pd;
    int err = enter(fd, &s, &pd);
    if (err)
        return err;
    ssize_t r;
    uint64_t seq;
    do {
        seq = gmp__pd_seq(pd);
        r = accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        /* A connection reset before we took it: take the next (Go). */
        if (r < 0 && errno == ECONNABORTED)
            errno = EINTR;
    } while (r < 0 && (r = retry(s, pd, PD_R, seq)) == 1);
    gmp__pd_exit(pd);
    return (int)r;
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
