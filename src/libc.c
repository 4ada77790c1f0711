/*
 * libc.c - the table of C library calls the runtime makes through
 * GMP_LIBC (src/libc.h explains why).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include "runtime.h"

struct gmp__libc gmp__libc = {
    .read = read,
    .write = write,
    .readv = readv,
    .writev = writev,
    .pread = pread,
    .recv = recv,
    .send = send,
    .recvfrom = recvfrom,
    .sendto = sendto,
    .recvmsg = recvmsg,
    .sendmsg = sendmsg,
    .accept4 = accept4,
    .connect = connect,
    .poll = poll,
    .ppoll = ppoll,
    .close = close,
    .fcntl = fcntl,
    .nanosleep = nanosleep,
    .clock_nanosleep = clock_nanosleep,
    .epoll_wait = epoll_wait,
    .pthread_mutex_lock = pthread_mutex_lock,
    .pthread_mutex_unlock = pthread_mutex_unlock,
    .getaddrinfo = getaddrinfo,
    .getnameinfo = getnameinfo,
};

int (*_Atomic gmp__clock_gettime)(clockid_t, struct timespec *) =
    clock_gettime;

static void clock_find(void)
{
    int (*f)(clockid_t, struct timespec *);
    *(void **)&f = dlsym(RTLD_NEXT, "clock_gettime");
    /* Relaxed: before any thread of the runtime exists (pthread_create
     * publishes it); only test_timer swaps it later. */
    if (f)
        atomic_store_explicit(&gmp__clock_gettime, f, memory_order_relaxed);
}

void gmp__clock_setup(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, clock_find);
}

int gmp__libc_attach(const struct gmp__libc *real, size_t size)
{
    if (!real || size != sizeof *real)
        return GMP_EINVAL;
    /* Acquire: a runtime published by gmp_init/gmp_main (g.c) would be
     * running threads that read the table. */
    if (atomic_load_explicit(&gmp__sched, memory_order_acquire))
        return GMP_EBUSY;
    gmp__libc = *real;
    return 0;
}
