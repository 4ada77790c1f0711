/*
 * hook.c - libgmprt_hook: the C library's blocking calls, made to park
 * the calling goroutine instead of blocking its thread, so that code
 * written for threads runs unmodified on goroutines. docs/hooks.md is the
 * account of what each call does, from a goroutine and from a thread, and
 * of the limits; this file is how.
 *
 * Each hook resolves the C library's function with dlsym(RTLD_NEXT) on
 * first use, asks whether the caller is a goroutine (gmp_id: a few loads,
 * 0 off a goroutine's own stack) and otherwise calls it. From a goroutine, an fd call goes
 * through gmp_fd_call with a try function that makes the one non-blocking
 * attempt; the hooks keep per fd number what the kernel cannot tell them
 * (the blocking mode the program asked for, its SO_*TIMEO, whether the
 * poller has the fd), in chunks made on first use and never freed. The
 * constructor hands the runtime the C library's functions for its own
 * calls (src/libc.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gmprt.h"
#include "libc.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- The C library's functions -------------------------------------------- */

/* ioctl's request: unsigned long in glibc, int in musl (POSIX's). */
#if defined(__GLIBC__)
typedef unsigned long ioctl_req;
#else
typedef int ioctl_req;
#endif

/* The runtime's table (libc.h) and the rest the hooks call through. */
static struct gmp__libc lc;
static struct {
    ssize_t (*pwrite)(int, const void *, size_t, off_t);
    int (*socket)(int, int, int);
    int (*socketpair)(int, int, int, int[2]);
    int (*pipe)(int[2]);
    int (*pipe2)(int[2], int);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*ioctl)(int, ioctl_req, ...);
    int (*setsockopt)(int, int, int, const void *, socklen_t);
    int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *,
                   const struct timespec *, const sigset_t *);
    int (*epoll_pwait)(int, struct epoll_event *, int, int,
                       const sigset_t *);
    pid_t (*waitpid)(pid_t, int *, int);
    pid_t (*wait)(int *);
    int (*flock)(int, int);
    int (*fsync)(int);
    int (*fdatasync)(int);
    int (*mutex_trylock)(pthread_mutex_t *);
    int (*mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
    int (*rd_lock)(pthread_rwlock_t *);
    int (*wr_lock)(pthread_rwlock_t *);
    int (*rd_trylock)(pthread_rwlock_t *);
    int (*wr_trylock)(pthread_rwlock_t *);
    int (*rd_timedlock)(pthread_rwlock_t *, const struct timespec *);
    int (*wr_timedlock)(pthread_rwlock_t *, const struct timespec *);
    int (*rw_unlock)(pthread_rwlock_t *);
    int (*spin_lock)(pthread_spinlock_t *);
    int (*spin_trylock)(pthread_spinlock_t *);
    int (*spin_unlock)(pthread_spinlock_t *);
    int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
    int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *,
                          const struct timespec *);
} lx;

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        /* Nothing can run without it: say so plainly. */
        fprintf(stderr, "gmprt_hook: no C library function %s\n", name);
        abort();
    }
    return f;
}

#if defined(__x86_64__) && defined(__GLIBC__)
/* pthread_cond_wait and its kin have two versions in glibc on x86-64
 * (dlsym may give the old one); the default one is what a program linked
 * today calls. musl has one of each, and no dlvsym. */
#define HOOK_COND_VERSIONED 1
static void *next_v(const char *name, const char *ver)
{
    void *f = dlvsym(RTLD_NEXT, name, ver);
    return f ? f : next(name);
}
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(void)
{
#define L(f) lc.f = (__typeof__(lc.f))next(#f)
    L(read); L(write); L(readv); L(writev); L(pread); L(recv); L(send);
    L(recvfrom); L(sendto); L(recvmsg); L(sendmsg); L(accept4); L(connect);
    L(poll); L(ppoll); L(close); L(fcntl); L(nanosleep); L(clock_nanosleep);
    L(epoll_wait); L(pthread_mutex_lock); L(pthread_mutex_unlock);
    L(getaddrinfo); L(getnameinfo);
#undef L
#define X(f, name) lx.f = (__typeof__(lx.f))next(name)
    X(pwrite, "pwrite"); X(socket, "socket"); X(socketpair, "socketpair");
    X(pipe, "pipe"); X(pipe2, "pipe2"); X(dup, "dup"); X(dup2, "dup2");
    X(dup3, "dup3"); X(ioctl, "ioctl"); X(setsockopt, "setsockopt");
    X(select, "select"); X(pselect, "pselect");
    X(epoll_pwait, "epoll_pwait"); X(waitpid, "waitpid"); X(wait, "wait");
    X(flock, "flock"); X(fsync, "fsync"); X(fdatasync, "fdatasync");
    X(mutex_trylock, "pthread_mutex_trylock");
    X(mutex_timedlock, "pthread_mutex_timedlock");
    X(rd_lock, "pthread_rwlock_rdlock");
    X(wr_lock, "pthread_rwlock_wrlock");
    X(rd_trylock, "pthread_rwlock_tryrdlock");
    X(wr_trylock, "pthread_rwlock_trywrlock");
    X(rd_timedlock, "pthread_rwlock_timedrdlock");
    X(wr_timedlock, "pthread_rwlock_timedwrlock");
    X(rw_unlock, "pthread_rwlock_unlock");
    X(spin_lock, "pthread_spin_lock");
    X(spin_trylock, "pthread_spin_trylock");
    X(spin_unlock, "pthread_spin_unlock");
#undef X
#if defined(HOOK_COND_VERSIONED)
    lx.cond_wait = next_v("pthread_cond_wait", "GLIBC_2.3.2");
    lx.cond_timedwait = next_v("pthread_cond_timedwait", "GLIBC_2.3.2");
#else
    lx.cond_wait = next("pthread_cond_wait");
    lx.cond_timedwait = next("pthread_cond_timedwait");
#endif
}

/* The functions, resolved on first use: a hook may run before this
 * library's constructor (another library's constructor calling read). */
static inline void ready(void)
{
    pthread_once(&once, resolve);
}

/* Set in a child made by fork: the runtime's threads did not come along,
 * but its state did (the thread-local M of the forking goroutine among
 * it), so every hook is the C library's call there. Written by the one
 * thread of a new child before anything else runs in it. */
static bool in_child;

static void on_fork_child(void)
{
    in_child = true;
}

/* Hands the runtime the C library's functions before any runtime starts. */
__attribute__((constructor)) static void hook_init(void)
{
    ready();
    pthread_atfork(NULL, NULL, on_fork_child);
    if (gmp__libc_attach(&lc, sizeof lc) != 0) {
        fprintf(stderr, "gmprt_hook: loaded while a runtime runs, or with "
                        "a libgmprt of another version\n");
        abort();
    }
}

/* ---- What the hooks know of each fd ------------------------------------------ */

enum {
    F_KNOWN = 1,    /* the rest is set */
    F_POLL = 2,     /* a goroutine's calls go through the poller */
    F_UNB = 4,      /* the program asked for O_NONBLOCK */
    F_REG = 8,      /* the poller has it: O_NONBLOCK underneath */
};

struct fdstate {
    _Atomic uint32_t flags;
    _Atomic int64_t rto, sto;       /* SO_RCVTIMEO, SO_SNDTIMEO in ns */
};

#define FD_CHUNK 1024
#define FD_CHUNKS 1024              /* fds up to 2^20 are tracked */
static _Atomic(struct fdstate *) fdtab[FD_CHUNKS];

/* fd's state, its chunk made when make is set (else NULL if none). */
static struct fdstate *fds(int fd, bool make)
{
    if (fd < 0 || fd >= FD_CHUNK * FD_CHUNKS)
        return NULL;
    _Atomic(struct fdstate *) *slot = &fdtab[fd / FD_CHUNK];
    /* Acquire: pairs with the release that published the zeroed chunk. */
    struct fdstate *c = atomic_load_explicit(slot, memory_order_acquire);
    if (!c && make) {
        struct fdstate *n = calloc(FD_CHUNK, sizeof *n);
        if (!n)
            return NULL;
        /* Release: publishes the zeroes; acquire on failure, as above. */
        if (atomic_compare_exchange_strong_explicit(slot, &c, n,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            c = n;
        else
            free(n);
    }
    return c ? &c[fd % FD_CHUNK] : NULL;
}

/* The flags are hints for one fd number that the program uses from any
 * thread: relaxed everywhere, as the program orders its own uses of an
 * fd (it does not read from an fd while another thread opens it). */
static uint32_t flags_of(int fd)
{
    struct fdstate *st = fds(fd, false);
    return st ? atomic_load_explicit(&st->flags, memory_order_relaxed) : 0;
}

/* A new fd from socket, accept4, pipe2 and the like: poll says whether
 * goroutines park on it, unb whether the program made it non-blocking. */
static void fd_new(int fd, bool poll, bool unb)
{
    struct fdstate *st = fds(fd, true);
    if (!st)
        return;
    atomic_store_explicit(&st->rto, 0, memory_order_relaxed);
    atomic_store_explicit(&st->sto, 0, memory_order_relaxed);
    atomic_store_explicit(&st->flags,
                          F_KNOWN | (poll ? F_POLL : 0) | (unb ? F_UNB : 0),
                          memory_order_relaxed);
}

static void fd_clear(int fd)
{
    struct fdstate *st = fds(fd, false);
    if (st)
        atomic_store_explicit(&st->flags, 0, memory_order_relaxed);
}

/* A new fd sharing old's file (dup): the same state. */
static void fd_copy(int old, int fd)
{
    struct fdstate *o = fds(old, false), *st = fds(fd, true);
    if (!st)
        return;
    uint32_t f = o ? atomic_load_explicit(&o->flags, memory_order_relaxed)
                   : 0;
    atomic_store_explicit(&st->rto,
                          o ? atomic_load_explicit(&o->rto,
                                                   memory_order_relaxed) : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&st->sto,
                          o ? atomic_load_explicit(&o->sto,
                                                   memory_order_relaxed) : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&st->flags, f, memory_order_relaxed);
}

/* fd's flags, learnt from the kernel the first time: a socket above the
 * standard three parks; O_NONBLOCK is the program's own. */
static uint32_t learn(int fd)
{
    struct fdstate *st = fds(fd, true);
    if (!st)
        return F_KNOWN;             /* out of memory: bracket its calls */
    uint32_t f = atomic_load_explicit(&st->flags, memory_order_relaxed);
    if (f & F_KNOWN)
        return f;
    struct stat sb;
    int fl = lc.fcntl(fd, F_GETFL);
    if (fl < 0)
        return F_KNOWN;             /* not open: let the call say EBADF */
    f = F_KNOWN | (fl & O_NONBLOCK ? F_UNB : 0);
    if (fd > 2 && fstat(fd, &sb) == 0 && S_ISSOCK(sb.st_mode))
        f |= F_POLL;
    uint32_t z = 0;
    if (!atomic_compare_exchange_strong_explicit(&st->flags, &z, f,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        f = z;                      /* someone else learnt it first */
    return f;
}

static void set_flag(int fd, uint32_t bit, bool on)
{
    struct fdstate *st = fds(fd, true);
    if (!st)
        return;
    if (on)
        atomic_fetch_or_explicit(&st->flags, bit, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&st->flags, ~bit, memory_order_relaxed);
}

static int64_t timeout_of(int fd, int dir)
{
    struct fdstate *st = fds(fd, false);
    if (!st)
        return 0;
    return atomic_load_explicit(dir == GMP_POLLIN ? &st->rto : &st->sto,
                                memory_order_relaxed);
}

/* ---- The call on an fd ----------------------------------------------------- */

/* Every fd call's arguments, for its try function. */
struct args {
    void *buf;
    size_t n;
    int flags;
    off_t off;
    struct sockaddr *addr;
    socklen_t *alen;
    const struct sockaddr *caddr;
    socklen_t clen;
    const struct iovec *iov;
    int cnt;
    struct msghdr *msg;
    bool started;                   /* connect */
};

typedef ssize_t try_fn(int fd, void *a);

static bool goroutine(void)
{
    return !in_child && gmp_id() != 0;
}

/* Whether a runtime runs in this process (not in a forked child). */
static bool runtime_runs(void)
{
    return !in_child && gmp_procs() > 0;
}

/* Sets errno from a runtime error and returns -1. */
static int fail(long err)
{
    errno = (int)-err;
    return -1;
}

static int64_t ms_to_ns(int ms)
{
    return ms < 0 ? GMP_FOREVER : (int64_t)ms * 1000000;
}

/* A plain thread's call on fd, which the hooks may have made
 * non-blocking underneath a program that thinks it blocks: then wait in
 * poll(2) as the blocking call would, SO_*TIMEO included. */
static ssize_t plain(int fd, int dir, try_fn *op, void *a)
{
    uint32_t f = flags_of(fd);
    if (!(f & F_REG) || (f & F_UNB))
        return op(fd, a);
    int64_t to = timeout_of(fd, dir);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t until = to ? now.tv_sec * 1000000000LL + now.tv_nsec + to : 0;
    for (;;) {
        ssize_t r = op(fd, a);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return r;
        int ms = -1;
        if (until) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t left = until - (now.tv_sec * 1000000000LL + now.tv_nsec);
            if (left <= 0) {
                errno = EAGAIN;
                return -1;
            }
            ms = (int)((left + 999999) / 1000000);
        }
        struct pollfd p = {.fd = fd, .events = (short)dir};
        if (lc.poll(&p, 1, ms) < 0 && errno != EINTR)
            return -1;
    }
}

/* A call inside the system-call bracket, errno kept. */
#define BRACKET(call)                                                        \
    ({                                                                       \
        gmp_syscall_enter();                                                 \
        __typeof__(call) r_ = (call);                                        \
        int e_ = errno;                                                      \
        gmp_syscall_exit();                                                  \
        errno = e_;                                                          \
        r_;                                                                  \
    })

/* One call of op on fd in direction dir (GMP_POLLIN or GMP_POLLOUT). */
static ssize_t fdcall(int fd, int dir, try_fn *op, void *a)
{
    ready();
    if (fd < 0 || !goroutine())
        return plain(fd, dir, op, a);
    uint32_t f = learn(fd);
    if (f & F_UNB)
        return op(fd, a);           /* the program wants EAGAIN */
    if (!(f & F_POLL))
        return BRACKET(op(fd, a));
    if (!(f & F_REG))
        set_flag(fd, F_REG, true);
    int64_t to = timeout_of(fd, dir);
    ssize_t r = gmp_fd_call(fd, dir, op, a, to ? to : GMP_FOREVER);
    if (r >= 0)
        return r;
    if (r == GMP_EPERM)             /* the runtime stopped meanwhile */
        return plain(fd, dir, op, a);
    return fail(r == GMP_ETIMEDOUT ? -EAGAIN : r);
}

/* A blocking write: all of it, as write(2) on a blocking socket, or the
 * count so far once an error comes after some went out. */
static ssize_t write_all(int fd, try_fn *op, struct args *a)
{
    if (!goroutine())
        return fdcall(fd, GMP_POLLOUT, op, a);
    size_t done = 0, n = a->n;
    do {
        ssize_t r = fdcall(fd, GMP_POLLOUT, op, a);
        if (r < 0)
            return done ? (ssize_t)done : r;
        if (flags_of(fd) & F_UNB)
            return r;               /* non-blocking: one try */
        done += (size_t)r;
        a->buf = (char *)a->buf + r;
        a->n -= (size_t)r;
    } while (done < n);
    return (ssize_t)done;
}

static ssize_t t_read(int fd, void *p)
{
    struct args *a = p;
    return lc.read(fd, a->buf, a->n);
}
static ssize_t t_write(int fd, void *p)
{
    struct args *a = p;
    return lc.write(fd, a->buf, a->n);
}
static ssize_t t_pread(int fd, void *p)
{
    struct args *a = p;
    return lc.pread(fd, a->buf, a->n, a->off);
}
static ssize_t t_pwrite(int fd, void *p)
{
    struct args *a = p;
    return lx.pwrite(fd, a->buf, a->n, a->off);
}
static ssize_t t_readv(int fd, void *p)
{
    struct args *a = p;
    return lc.readv(fd, a->iov, a->cnt);
}
static ssize_t t_writev(int fd, void *p)
{
    struct args *a = p;
    return lc.writev(fd, a->iov, a->cnt);
}
static ssize_t t_recv(int fd, void *p)
{
    struct args *a = p;
    return lc.recv(fd, a->buf, a->n, a->flags);
}
static ssize_t t_send(int fd, void *p)
{
    struct args *a = p;
    return lc.send(fd, a->buf, a->n, a->flags);
}
static ssize_t t_recvfrom(int fd, void *p)
{
    struct args *a = p;
    return lc.recvfrom(fd, a->buf, a->n, a->flags, a->addr, a->alen);
}
static ssize_t t_sendto(int fd, void *p)
{
    struct args *a = p;
    return lc.sendto(fd, a->buf, a->n, a->flags, a->caddr, a->clen);
}
static ssize_t t_recvmsg(int fd, void *p)
{
    struct args *a = p;
    return lc.recvmsg(fd, a->msg, a->flags);
}
static ssize_t t_sendmsg(int fd, void *p)
{
    struct args *a = p;
    return lc.sendmsg(fd, a->msg, a->flags);
}
static ssize_t t_accept(int fd, void *p)
{
    struct args *a = p;
    return lc.accept4(fd, a->addr, a->alen, a->flags);
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    struct args a = {.buf = buf, .n = n};
    return fdcall(fd, GMP_POLLIN, t_read, &a);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    struct args a = {.buf = (void *)buf, .n = n};
    return write_all(fd, t_write, &a);
}

EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    struct args a = {.buf = buf, .n = n, .off = off};
    return fdcall(fd, GMP_POLLIN, t_pread, &a);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    struct args a = {.buf = (void *)buf, .n = n, .off = off};
    return fdcall(fd, GMP_POLLOUT, t_pwrite, &a);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    struct args a = {.iov = iov, .cnt = cnt};
    return fdcall(fd, GMP_POLLIN, t_readv, &a);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    struct args a = {.iov = iov, .cnt = cnt};
    return fdcall(fd, GMP_POLLOUT, t_writev, &a);
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    struct args a = {.buf = buf, .n = n, .flags = flags};
    if (flags & MSG_DONTWAIT) {
        ready();
        return t_recv(fd, &a);
    }
    if (!(flags & MSG_WAITALL) || !goroutine())
        return fdcall(fd, GMP_POLLIN, t_recv, &a);
    /* MSG_WAITALL on a socket that is non-blocking underneath: the rest
     * until all is in, the end, or an error after some came. */
    size_t got = 0;
    for (;;) {
        ssize_t r = fdcall(fd, GMP_POLLIN, t_recv, &a);
        if (r <= 0)
            return got ? (ssize_t)got : r;
        got += (size_t)r;
        if (got == n || (flags_of(fd) & F_UNB))
            return (ssize_t)got;
        a.buf = (char *)buf + got;
        a.n = n - got;
    }
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    struct args a = {.buf = (void *)buf, .n = n, .flags = flags};
    if (flags & MSG_DONTWAIT) {
        ready();
        return t_send(fd, &a);
    }
    return write_all(fd, t_send, &a);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags,
                        struct sockaddr *addr, socklen_t *alen)
{
    struct args a = {.buf = buf, .n = n, .flags = flags, .addr = addr,
                     .alen = alen};
    if (flags & MSG_DONTWAIT) {
        ready();
        return t_recvfrom(fd, &a);
    }
    return fdcall(fd, GMP_POLLIN, t_recvfrom, &a);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
                      const struct sockaddr *addr, socklen_t alen)
{
    struct args a = {.buf = (void *)buf, .n = n, .flags = flags,
                     .caddr = addr, .clen = alen};
    if (flags & MSG_DONTWAIT) {
        ready();
        return t_sendto(fd, &a);
    }
    return fdcall(fd, GMP_POLLOUT, t_sendto, &a);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    struct args a = {.msg = msg, .flags = flags};
    if (flags & MSG_DONTWAIT) {
        ready();
        return t_recvmsg(fd, &a);
    }
    return fdcall(fd, GMP_POLLIN, t_recvmsg, &a);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    struct args a = {.msg = (struct msghdr *)msg, .flags = flags};
    if (flags & MSG_DONTWAIT) {
        ready();
        return t_sendmsg(fd, &a);
    }
    return fdcall(fd, GMP_POLLOUT, t_sendmsg, &a);
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *alen,
                   int flags)
{
    struct args a = {.addr = addr, .alen = alen, .flags = flags};
    int r = (int)fdcall(fd, GMP_POLLIN, t_accept, &a);
    if (r >= 0)
        fd_new(r, true, flags & SOCK_NONBLOCK);
    return r;
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
    return accept4(fd, addr, alen, 0);
}

/* connect: the first try starts it; EINPROGRESS waits for writable;
 * later tries ask the socket how it went. */
static ssize_t t_connect(int fd, void *p)
{
    struct args *a = p;
    if (!a->started) {
        a->started = true;
        if (lc.connect(fd, a->caddr, a->clen) == 0)
            return 0;
        if (errno == EINPROGRESS)
            errno = EAGAIN;
        return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        return -1;
    if (err) {
        errno = err;
        return -1;
    }
    /* Writable but no error may be a fresh socket's readiness: only a
     * peer says it is connected. */
    struct sockaddr_storage peer;
    socklen_t pl = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) == 0)
        return 0;
    errno = EAGAIN;
    return -1;
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t alen)
{
    ready();
    struct args a = {.caddr = addr, .clen = alen};
    if (fd < 0 || !goroutine()) {
        uint32_t f = flags_of(fd);
        if (!(f & F_REG) || (f & F_UNB))
            return lc.connect(fd, addr, alen);
        /* A thread connecting a socket the hooks made non-blocking. */
        int r = (int)plain(fd, GMP_POLLOUT, t_connect, &a);
        if (r < 0 && errno == EAGAIN)
            errno = EINPROGRESS;    /* SO_SNDTIMEO ran out, as Linux */
        return r;
    }
    uint32_t f = learn(fd);
    if ((f & F_UNB) || !(f & F_POLL))
        return f & F_UNB ? lc.connect(fd, addr, alen)
                         : BRACKET(lc.connect(fd, addr, alen));
    if (!(f & F_REG))
        set_flag(fd, F_REG, true);
    int64_t to = timeout_of(fd, GMP_POLLOUT);
    ssize_t r = gmp_fd_call(fd, GMP_POLLOUT, t_connect, &a,
                            to ? to : GMP_FOREVER);
    if (r >= 0)
        return 0;
    if (r == GMP_EPERM)
        return lc.connect(fd, addr, alen);
    return fail(r == GMP_ETIMEDOUT ? -EINPROGRESS : r);
}

/* ---- Making and closing fds ---------------------------------------------- */

EXPORT int socket(int domain, int type, int proto)
{
    ready();
    int fd = lx.socket(domain, type, proto);
    if (fd >= 0)
        fd_new(fd, true, type & SOCK_NONBLOCK);
    return fd;
}

EXPORT int socketpair(int domain, int type, int proto, int sv[2])
{
    ready();
    int r = lx.socketpair(domain, type, proto, sv);
    if (r == 0) {
        fd_new(sv[0], true, type & SOCK_NONBLOCK);
        fd_new(sv[1], true, type & SOCK_NONBLOCK);
    }
    return r;
}

EXPORT int pipe2(int p[2], int flags)
{
    ready();
    int r = lx.pipe2(p, flags);
    if (r == 0) {
        fd_new(p[0], true, flags & O_NONBLOCK);
        fd_new(p[1], true, flags & O_NONBLOCK);
    }
    return r;
}

EXPORT int pipe(int p[2])
{
    return pipe2(p, 0);
}

EXPORT int close(int fd)
{
    ready();
    fd_clear(fd);
    if (fd >= 0 && runtime_runs()) {
        int r = gmp_close(fd);
        if (r != GMP_EPERM)
            return r ? fail(r) : 0;
    }
    return lc.close(fd);
}

EXPORT int dup(int old)
{
    ready();
    int fd = lx.dup(old);
    if (fd >= 0)
        fd_copy(old, fd);
    return fd;
}

/* dup2 and dup3 close fd first: the runtime lets go of it. */
static void before_replace(int old, int fd)
{
    if (old != fd && fd >= 0) {
        fd_clear(fd);
        if (runtime_runs())
            gmp_fd_forget(fd);
    }
}

EXPORT int dup2(int old, int fd)
{
    ready();
    before_replace(old, fd);
    int r = lx.dup2(old, fd);
    if (r >= 0 && old != fd)
        fd_copy(old, r);
    return r;
}

EXPORT int dup3(int old, int fd, int flags)
{
    ready();
    before_replace(old, fd);
    int r = lx.dup3(old, fd, flags);
    if (r >= 0)
        fd_copy(old, r);
    return r;
}

/* fcntl (and glibc's fcntl64): the program sees the blocking mode it
 * asked for. The third argument is an int or a pointer; both travel in
 * one register. */
static int h_fcntl(int fd, int cmd, unsigned long arg)
{
    ready();
    switch (cmd) {
    case F_GETFL: {
        int r = lc.fcntl(fd, cmd);
        uint32_t f = flags_of(fd);
        if (r >= 0 && (f & F_REG) && !(f & F_UNB))
            r &= ~O_NONBLOCK;
        return r;
    }
    case F_SETFL: {
        uint32_t f = learn(fd);
        int r = lc.fcntl(fd, cmd,
                         (int)arg | (f & F_REG ? O_NONBLOCK : 0));
        if (r == 0)
            set_flag(fd, F_UNB, arg & O_NONBLOCK);
        return r;
    }
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
        int r = lc.fcntl(fd, cmd, (int)arg);
        if (r >= 0)
            fd_copy(fd, r);
        return r;
    }
    default:
        return lc.fcntl(fd, cmd, arg);
    }
}

EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    unsigned long arg = va_arg(ap, unsigned long);
    va_end(ap);
    return h_fcntl(fd, cmd, arg);
}

#if defined(__GLIBC__)
EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    unsigned long arg = va_arg(ap, unsigned long);
    va_end(ap);
    return h_fcntl(fd, cmd, arg);
}
#endif

EXPORT int ioctl(int fd, ioctl_req req, ...)
{
    ready();
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (req == FIONBIO && arg) {
        int on = *(int *)arg;
        uint32_t f = learn(fd);
        int r = (f & F_REG) && !on ? 0 : lx.ioctl(fd, req, arg);
        if (r == 0)
            set_flag(fd, F_UNB, on);
        return r;
    }
    return lx.ioctl(fd, req, arg);
}

EXPORT int setsockopt(int fd, int level, int name, const void *val,
                      socklen_t len)
{
    ready();
    int r = lx.setsockopt(fd, level, name, val, len);
    if (r != 0 || level != SOL_SOCKET || !val ||
        len < (socklen_t)sizeof(struct timeval))
        return r;
    bool rcv = name == SO_RCVTIMEO, snd = name == SO_SNDTIMEO;
#ifdef SO_RCVTIMEO_NEW
    rcv = rcv || name == SO_RCVTIMEO_NEW;
    snd = snd || name == SO_SNDTIMEO_NEW;
#endif
    if (!rcv && !snd)
        return r;
    /* struct timeval, or the kernel's 64-bit pair: the same layout on the
     * 64-bit machines gmprt runs on. */
    const struct timeval *tv = val;
    int64_t ns = (int64_t)tv->tv_sec * 1000000000 + tv->tv_usec * 1000;
    struct fdstate *st = fds(fd, true);
    if (st) {
        learn(fd);
        atomic_store_explicit(rcv ? &st->rto : &st->sto, ns,
                              memory_order_relaxed);
    }
    return r;
}

/* ---- Waiting on several fds ------------------------------------------------ */

/* A poll from a goroutine that may park: the runtime's. */
static int park_poll(struct pollfd *fds_, nfds_t n, int64_t timeout)
{
    int r = gmp_poll(fds_, n, timeout);
    return r < 0 ? fail(r) : r;
}

EXPORT int poll(struct pollfd *p, nfds_t n, int timeout)
{
    ready();
    if (timeout == 0 || !goroutine() || !gmp_can_park())
        return lc.poll(p, n, timeout);
    return park_poll(p, n, ms_to_ns(timeout));
}

static int64_t ts_to_ns(const struct timespec *ts)
{
    return ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec
              : GMP_FOREVER;
}

EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *ts,
                 const sigset_t *mask)
{
    ready();
    if ((ts && ts->tv_sec == 0 && ts->tv_nsec == 0) || !goroutine())
        return lc.ppoll(p, n, ts, mask);
    /* A mask is swapped in atomically with the wait: only the kernel can
     * do that, so the thread waits, in the bracket. */
    if (mask || !gmp_can_park())
        return BRACKET(lc.ppoll(p, n, ts, mask));
    return park_poll(p, n, ts_to_ns(ts));
}

/* select through gmp_poll: the sets become a pollfd array and back. */
static int park_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
                       int64_t timeout)
{
    if (nfds < 0 || nfds > FD_SETSIZE)
        return fail(-EINVAL);
    struct pollfd *p = calloc((size_t)nfds + 1, sizeof *p);
    if (!p)
        return fail(-ENOMEM);
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
                           (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
                           (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
        if (ev)
            p[n++] = (struct pollfd){.fd = fd, .events = ev};
    }
    int r = gmp_poll(p, n, timeout);
    if (r < 0) {
        free(p);
        return fail(r);
    }
    for (nfds_t i = 0; i < n; i++)
        if (p[i].revents & POLLNVAL) {
            free(p);
            return fail(-EBADF);
        }
    if (rd)
        FD_ZERO(rd);
    if (wr)
        FD_ZERO(wr);
    if (ex)
        FD_ZERO(ex);
    int count = 0;
    for (nfds_t i = 0; i < n; i++) {
        short re = p[i].revents, ev = p[i].events;
        if ((ev & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
            FD_SET(p[i].fd, rd);
            count++;
        }
        if ((ev & POLLOUT) && (re & (POLLOUT | POLLERR))) {
            FD_SET(p[i].fd, wr);
            count++;
        }
        if ((ev & POLLPRI) && (re & POLLPRI)) {
            FD_SET(p[i].fd, ex);
            count++;
        }
    }
    free(p);
    return count;
}

EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
                  struct timeval *tv)
{
    ready();
    if ((tv && tv->tv_sec == 0 && tv->tv_usec == 0) || !goroutine() ||
        !gmp_can_park())
        return lx.select(nfds, rd, wr, ex, tv);
    int64_t t = tv ? (int64_t)tv->tv_sec * 1000000000 + tv->tv_usec * 1000
                   : GMP_FOREVER;
    int64_t t0 = gmp_nanotime();
    int r = park_select(nfds, rd, wr, ex, t);
    if (tv && r >= 0) {
        /* Linux leaves the time not slept in *tv. */
        int64_t left = t - (gmp_nanotime() - t0);
        if (left < 0)
            left = 0;
        tv->tv_sec = left / 1000000000;
        tv->tv_usec = left % 1000000000 / 1000;
    }
    return r;
}

EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
                   const struct timespec *ts, const sigset_t *mask)
{
    ready();
    if ((ts && ts->tv_sec == 0 && ts->tv_nsec == 0) || !goroutine())
        return lx.pselect(nfds, rd, wr, ex, ts, mask);
    if (mask || !gmp_can_park())
        return BRACKET(lx.pselect(nfds, rd, wr, ex, ts, mask));
    return park_select(nfds, rd, wr, ex, ts_to_ns(ts));
}

struct epargs {
    struct epoll_event *ev;
    int max;
};

static ssize_t t_epoll(int ep, void *p)
{
    struct epargs *a = p;
    int r = lc.epoll_wait(ep, a->ev, a->max, 0);
    if (r == 0) {
        errno = EAGAIN;             /* nothing yet: wait for the set */
        return -1;
    }
    return r;
}

/* An epoll set is itself an fd that polls readable while an event is
 * ready in it: the goroutine parks on it through the runtime's poller. */
static int park_epoll(int ep, struct epoll_event *ev, int max, int timeout)
{
    struct epargs a = {.ev = ev, .max = max};
    ssize_t r = gmp_fd_call(ep, GMP_POLLIN, t_epoll, &a, ms_to_ns(timeout));
    if (r == GMP_ETIMEDOUT)
        return 0;
    return r < 0 ? fail(r) : (int)r;
}

EXPORT int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
    ready();
    if (timeout == 0 || !goroutine() || !gmp_can_park())
        return lc.epoll_wait(ep, ev, max, timeout);
    return park_epoll(ep, ev, max, timeout);
}

EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout,
                       const sigset_t *mask)
{
    ready();
    if (timeout == 0 || !goroutine())
        return lx.epoll_pwait(ep, ev, max, timeout, mask);
    if (mask || !gmp_can_park())
        return BRACKET(lx.epoll_pwait(ep, ev, max, timeout, mask));
    return park_epoll(ep, ev, max, timeout);
}

/* ---- Sleeping --------------------------------------------------------------- */

EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
    ready();
    if (!req || req->tv_nsec < 0 || req->tv_nsec >= 1000000000 ||
        req->tv_sec < 0 || !goroutine() || !gmp_can_park())
        return lc.nanosleep(req, rem);
    gmp_sleep(ts_to_ns(req));
    if (rem)
        *rem = (struct timespec){0, 0};
    return 0;
}

EXPORT int clock_nanosleep(clockid_t clk, int flags,
                           const struct timespec *req, struct timespec *rem)
{
    ready();
    if (!req || req->tv_nsec < 0 || req->tv_nsec >= 1000000000 ||
        !goroutine() || !gmp_can_park())
        return lc.clock_nanosleep(clk, flags, req, rem);
    int64_t ns = ts_to_ns(req);
    if (flags & TIMER_ABSTIME) {
        struct timespec now;
        if (clock_gettime(clk, &now) != 0)
            return errno;
        ns -= ts_to_ns(&now);
    }
    if (ns > 0)
        gmp_sleep(ns);
    if (rem && !(flags & TIMER_ABSTIME))
        *rem = (struct timespec){0, 0};
    return 0;
}

EXPORT int usleep(useconds_t us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    return nanosleep(&ts, NULL);
}

EXPORT unsigned sleep(unsigned s)
{
    struct timespec ts = {s, 0};
    return nanosleep(&ts, NULL) == 0 ? 0 : s;
}

/* ---- Calls with no non-blocking form: the bracket ------------------------- */

EXPORT int getaddrinfo(const char *node, const char *service,
                       const struct addrinfo *hints, struct addrinfo **res)
{
    ready();
    return BRACKET(lc.getaddrinfo(node, service, hints, res));
}

EXPORT int getnameinfo(const struct sockaddr *sa, socklen_t salen,
                       char *host, socklen_t hostlen, char *serv,
                       socklen_t servlen, int flags)
{
    ready();
    return BRACKET(lc.getnameinfo(sa, salen, host, hostlen, serv, servlen,
                                  flags));
}

EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
    ready();
    return options & WNOHANG ? lx.waitpid(pid, status, options)
                             : BRACKET(lx.waitpid(pid, status, options));
}

EXPORT pid_t wait(int *status)
{
    ready();
    return BRACKET(lx.wait(status));
}

EXPORT int flock(int fd, int op)
{
    ready();
    return op & LOCK_NB ? lx.flock(fd, op) : BRACKET(lx.flock(fd, op));
}

EXPORT int fsync(int fd)
{
    ready();
    return BRACKET(lx.fsync(fd));
}

EXPORT int fdatasync(int fd)
{
    ready();
    return BRACKET(lx.fdatasync(fd));
}

/* ---- Thread locks ------------------------------------------------------------ */

/* Before a goroutine tries a lock: no preemption and no other thread
 * until it has let the lock go again (or failed to take it). Both are
 * counts on the goroutine, so locks nest. */
static bool hold_begin(void)
{
    if (!goroutine())
        return false;
    gmp_preempt_disable();
    gmp_lock_os_thread();
    return true;
}

static void hold_end(void)
{
    gmp_unlock_os_thread();
    gmp_preempt_enable();
}

/* r: a lock call's result; ok: whether it means taken. */
static int took(bool g, int r, bool ok)
{
    if (g && !ok)
        hold_end();
    return r;
}

EXPORT int pthread_mutex_lock(pthread_mutex_t *mu)
{
    ready();
    if (!hold_begin())
        return lc.pthread_mutex_lock(mu);
    int r = lx.mutex_trylock(mu);
    if (r == EBUSY)                 /* taken: wait without the P */
        r = BRACKET(lc.pthread_mutex_lock(mu));
    return took(true, r, r == 0 || r == EOWNERDEAD);
}

EXPORT int pthread_mutex_trylock(pthread_mutex_t *mu)
{
    ready();
    bool g = hold_begin();
    int r = lx.mutex_trylock(mu);
    return took(g, r, r == 0 || r == EOWNERDEAD);
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *mu,
                                   const struct timespec *ts)
{
    ready();
    bool g = hold_begin();
    int r = g ? lx.mutex_trylock(mu) : EBUSY;
    if (r == EBUSY)
        r = BRACKET(lx.mutex_timedlock(mu, ts));
    return took(g, r, r == 0 || r == EOWNERDEAD);
}

EXPORT int pthread_mutex_unlock(pthread_mutex_t *mu)
{
    ready();
    int r = lc.pthread_mutex_unlock(mu);
    if (r == 0 && goroutine())
        hold_end();
    return r;
}

/* A wait on a condition variable gives the mutex up and takes it back:
 * the goroutine holds it before and after, so the counts stay. */
EXPORT int pthread_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu)
{
    ready();
    return BRACKET(lx.cond_wait(cv, mu));
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu,
                                  const struct timespec *ts)
{
    ready();
    return BRACKET(lx.cond_timedwait(cv, mu, ts));
}

#define RWLOCK(name, trylock, lock)                                          \
    EXPORT int name(pthread_rwlock_t *rw)                                    \
    {                                                                        \
        ready();                                                             \
        if (!hold_begin())                                                   \
            return lx.lock(rw);                                              \
        int r = lx.trylock(rw);                                              \
        if (r == EBUSY)                                                      \
            r = BRACKET(lx.lock(rw));                                        \
        return took(true, r, r == 0);                                        \
    }
RWLOCK(pthread_rwlock_rdlock, rd_trylock, rd_lock)
RWLOCK(pthread_rwlock_wrlock, wr_trylock, wr_lock)

EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
    ready();
    bool g = hold_begin();
    int r = lx.rd_trylock(rw);
    return took(g, r, r == 0);
}

EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
    ready();
    bool g = hold_begin();
    int r = lx.wr_trylock(rw);
    return took(g, r, r == 0);
}

EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *rw,
                                      const struct timespec *ts)
{
    ready();
    bool g = hold_begin();
    int r = BRACKET(lx.rd_timedlock(rw, ts));
    return took(g, r, r == 0);
}

EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *rw,
                                      const struct timespec *ts)
{
    ready();
    bool g = hold_begin();
    int r = BRACKET(lx.wr_timedlock(rw, ts));
    return took(g, r, r == 0);
}

EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
    ready();
    int r = lx.rw_unlock(rw);
    if (r == 0 && goroutine())
        hold_end();
    return r;
}

EXPORT int pthread_spin_lock(pthread_spinlock_t *sl)
{
    ready();
    if (!hold_begin())
        return lx.spin_lock(sl);
    int r = lx.spin_trylock(sl);
    if (r == EBUSY)
        r = BRACKET(lx.spin_lock(sl));
    return took(true, r, r == 0);
}

EXPORT int pthread_spin_trylock(pthread_spinlock_t *sl)
{
    ready();
    bool g = hold_begin();
    int r = lx.spin_trylock(sl);
    return took(g, r, r == 0);
}

EXPORT int pthread_spin_unlock(pthread_spinlock_t *sl)
{
    ready();
    int r = lx.spin_unlock(sl);
    if (r == 0 && goroutine())
        hold_end();
    return r;
}

/* ---- _FORTIFY_SOURCE's checked forms ------------------------------------- */

/* Programs built with _FORTIFY_SOURCE (Debian's packages are) call these
 * where the buffer's size is known. An overflow goes to the C library's
 * own check, which aborts; the rest is the plain call. glibc's names, as
 * are the *64 ones below (musl has neither: its headers make pread64
 * pread). */
#if defined(__GLIBC__)
EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t size)
{
    if (n > size) {
        ssize_t (*f)(int, void *, size_t, size_t) = next("__read_chk");
        return f(fd, buf, n, size);
    }
    return read(fd, buf, n);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t size,
                          int flags)
{
    if (n > size) {
        ssize_t (*f)(int, void *, size_t, size_t, int) = next("__recv_chk");
        return f(fd, buf, n, size, flags);
    }
    return recv(fd, buf, n, flags);
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t size,
                              int flags, struct sockaddr *addr,
                              socklen_t *alen)
{
    if (n > size) {
        ssize_t (*f)(int, void *, size_t, size_t, int, struct sockaddr *,
                     socklen_t *) = next("__recvfrom_chk");
        return f(fd, buf, n, size, flags, addr, alen);
    }
    return recvfrom(fd, buf, n, flags, addr, alen);
}

EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off,
                           size_t size)
{
    if (n > size) {
        ssize_t (*f)(int, void *, size_t, off_t, size_t) =
            next("__pread_chk");
        return f(fd, buf, n, off, size);
    }
    return pread(fd, buf, n, off);
}

EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off,
                             size_t size)
{
    return __pread_chk(fd, buf, n, off, size);
}

EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite(fd, buf, n, off);
}

EXPORT int __poll_chk(struct pollfd *p, nfds_t n, int timeout, size_t size)
{
    if (n > size / sizeof *p) {
        int (*f)(struct pollfd *, nfds_t, int, size_t) = next("__poll_chk");
        return f(p, n, timeout, size);
    }
    return poll(p, n, timeout);
}

EXPORT int __ppoll_chk(struct pollfd *p, nfds_t n, const struct timespec *ts,
                       const sigset_t *mask, size_t size)
{
    if (n > size / sizeof *p) {
        int (*f)(struct pollfd *, nfds_t, const struct timespec *,
                 const sigset_t *, size_t) = next("__ppoll_chk");
        return f(p, n, ts, mask, size);
    }
    return ppoll(p, n, ts, mask);
}
#endif /* __GLIBC__ */
