/*
 * libc.h - the C library calls the runtime makes that the hook library
 * (src/hook/hook.c) interposes.
 *
 * With the hook library loaded, a call to read(2) from anywhere in the
 * process, the runtime included, finds the hook first. The runtime must
 * reach the C library itself: a read inside gmp_read that the hook turned
 * into a parked wait, or a close inside gmp_close that the hook sent back
 * to gmp_close, would nest the runtime in itself. So the runtime makes
 * these calls through gmp__libc, whose entries are the plain symbols (as
 * the runtime would call them without the table, sanitizer interceptors
 * included) until the hook library, as it loads and before any runtime
 * starts, hands in the C library's own (gmp__libc_attach). An indirect
 * call through the table costs what a call through the GOT costs
 * (-fno-plt, CMakeLists.txt): nothing is added to any path.
 */
#ifndef GMP_LIBC_H
#define GMP_LIBC_H

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* The layout is shared with the hook library of the same version only
 * (gmp__libc_attach checks the size). Add entries at the end. */
struct gmp__libc {
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*readv)(int, const struct iovec *, int);
    ssize_t (*writev)(int, const struct iovec *, int);
    ssize_t (*pread)(int, void *, size_t, off_t);
    ssize_t (*recv)(int, void *, size_t, int);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
                        socklen_t *);
    ssize_t (*sendto)(int, const void *, size_t, int,
                      const struct sockaddr *, socklen_t);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
    ssize_t (*sendmsg)(int, const struct msghdr *, int);
    int (*accept4)(int, struct sockaddr *, socklen_t *, int);
    int (*connect)(int, const struct sockaddr *, socklen_t);
    int (*poll)(struct pollfd *, nfds_t, int);
    int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
                 const sigset_t *);
    int (*close)(int);
    int (*fcntl)(int, int, ...);
    int (*nanosleep)(const struct timespec *, struct timespec *);
    int (*clock_nanosleep)(clockid_t, int, const struct timespec *,
                           struct timespec *);
    int (*epoll_wait)(int, struct epoll_event *, int, int);
    int (*pthread_mutex_lock)(pthread_mutex_t *);
    int (*pthread_mutex_unlock)(pthread_mutex_t *);
    int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
                       struct addrinfo **);
    int (*getnameinfo)(const struct sockaddr *, socklen_t, char *, socklen_t,
                       char *, socklen_t, int);
};

__attribute__((visibility("hidden"))) extern struct gmp__libc gmp__libc;

/* A C library call the hooks may interpose: GMP_LIBC(read)(fd, buf, n). */
#define GMP_LIBC(f) (gmp__libc.f)

/* Sets gmp__clock_gettime (src/base.h, which says why). Context:
 * starting a runtime. */
__attribute__((visibility("hidden"))) void gmp__clock_setup(void);

/* Called by the hook library's constructor with the C library's own
 * functions (size: sizeof *real, checked against this build's): 0, or
 * GMP_EINVAL (another version's table) or GMP_EBUSY (a runtime runs: the
 * table is read without synchronisation, so it changes only while no
 * runtime thread exists). Not part of the API. */
__attribute__((visibility("default"))) int
gmp__libc_attach(const struct gmp__libc *real, size_t size);

#endif /* GMP_LIBC_H */
