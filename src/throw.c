/*
 * throw.c - fatal errors: one line on stderr, then abort. Usable from a
 * signal handler (write(2) only, no allocation, no stdio). Only the first
 * thread to fail reports; any later one waits for the abort. A report
 * with more lines (the deadlock's goroutine list) is begin, puts/putn,
 * end.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

static void put(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = GMP_LIBC(write)(2, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Set by the first thread to fail. Relaxed: it only elects one reporter;
 * nothing else is published through it. */
static _Atomic int throwing;

static void put_u64(uint64_t n)
{
    char num[24];
    size_t i = sizeof num;
    do {
        num[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    put(num + i, sizeof num - i);
}

void gmp__fatal_begin(const char *msg)
{
    static const char head[] = "gmprt: fatal error: ";
    /* One report, whole: a second thread failing meanwhile (every M out
     * of memory at once, say) waits for the first one's abort instead of
     * interleaving its line with it. */
    if (atomic_exchange_explicit(&throwing, 1, memory_order_relaxed))
        for (;;)
            pause();
    put(head, sizeof head - 1);
    put(msg, strlen(msg));
}

void gmp__fatal_puts(const char *s)
{
    put(s, strlen(s));
}

void gmp__fatal_putn(uint64_t n)
{
    put_u64(n);
}

_Noreturn void gmp__fatal_end(void)
{
    abort();
}

_Noreturn void gmp__fatal(const char *msg, uint64_t n, bool hasn)
{
    gmp__fatal_begin(msg);
    if (hasn)
        put_u64(n);
    put("\n", 1);
    abort();
}

_Noreturn void gmp__throw(const char *msg)
{
    gmp__fatal(msg, 0, false);
}
