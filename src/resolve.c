/*
 * resolve.c - gmp_getaddrinfo and gmp_getnameinfo: the C library's
 * resolver, called inside the system-call bracket (syscall.c).
 *
 * A lookup may wait on the network for seconds. Inside the bracket the
 * goroutine's P is free for other goroutines from the moment the call
 * starts: if it returns quickly the goroutine takes its P back with one
 * CAS, and if it blocks, sysmon hands the P to another M. This is what
 * Go's cgo resolver does (a cgo call is a system call to the scheduler).
 * Rejected: a pool of resolver threads fed by a queue, which would bound
 * the threads that lookups hold but adds a queue, its threads and their
 * lifetime to the runtime; the bracket bounds them as every blocking
 * system call is bounded, by max_threads. The lookup runs on the
 * goroutine's stack, as any C call a goroutine makes does (the tests run
 * it at the default 128 KiB).
 */
#include <netdb.h>

#include "runtime.h"

int gmp_getaddrinfo(const char *node, const char *service,
                    const struct addrinfo *hints, struct addrinfo **res)
{
    gmp_syscall_enter();
    int r = GMP_LIBC(getaddrinfo)(node, service, hints, res);
    gmp_syscall_exit();             /* carries errno (EAI_SYSTEM) across */
    return r;
}

int gmp_getnameinfo(const struct sockaddr *addr, socklen_t addrlen,
                    char *host, socklen_t hostlen, char *serv,
                    socklen_t servlen, int flags)
{
    gmp_syscall_enter();
    int r = GMP_LIBC(getnameinfo)(addr, addrlen, host, hostlen, serv, servlen, flags);
    gmp_syscall_exit();
    return r;
}
