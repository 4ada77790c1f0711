/*
 * switch.cpp - Boost.Context's side of the `switch` case of BENCHMARKS.md:
 * two contexts switch to each other directly, with no scheduler. Main and
 * one context made by make_fcontext() make 5,000,000 round trips through
 * jump_fcontext() (10,000,000 switches) after one untimed warm-up round
 * trip; the value is the time per switch.
 *
 * Usage: boost-switch [switch <procs> [port]]   (procs is always 1 here)
 * Prints: bench=switch procs=1 n=10000000 value=<ns> unit=ns/switch
 *
 * Build: g++ -O2 -o boost-switch switch.cpp -lboost_context
 * The stack is ours: an mmap'd region with a PROT_NONE guard page below it.
 */
#include <boost/context/detail/fcontext.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace ctx = boost::context::detail;

static const long round_trips = 5000000;
static const std::size_t stack_size = 64 * 1024;

/* The context's body: forever hand control back to whoever jumped in. The
 * transfer_t it receives names the context to return to; each jump's result
 * names the next one. It never returns (returning would end the thread). */
static void echo_back(ctx::transfer_t t)
{
    for (;;)
        t = ctx::jump_fcontext(t.fctx, nullptr);
}

static double now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc > 4 || (argc > 1 && std::strcmp(argv[1], "switch") != 0)) {
        std::fprintf(stderr, "boost-switch: only the switch case\n"
                     "usage: %s [switch <procs> [port]]\n", argv[0]);
        return 2;
    }

    long page = sysconf(_SC_PAGESIZE);
    std::size_t map_size = stack_size + page;
    char *base = static_cast<char *>(mmap(nullptr, map_size,
        PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED) {
        std::perror("boost-switch: mmap");
        return 1;
    }
    /* The stack grows down toward the guard page at the bottom. */
    if (mprotect(base, page, PROT_NONE) != 0) {
        std::perror("boost-switch: mprotect");
        return 1;
    }
    /* make_fcontext takes the top of the stack and its usable size. */
    ctx::fcontext_t other =
        ctx::make_fcontext(base + map_size, stack_size, echo_back);

    /* Warm-up round trip, untimed: starts echo_back and touches its stack. */
    other = ctx::jump_fcontext(other, nullptr).fctx;

    double start = now_ns();
    for (long i = 0; i < round_trips; i++)
        other = ctx::jump_fcontext(other, nullptr).fctx;
    double elapsed = now_ns() - start;

    long switches = 2 * round_trips;
    std::printf("bench=switch procs=1 n=%ld value=%.3f unit=ns/switch\n",
                switches, elapsed / switches);
    /* The context stays suspended in echo_back; its stack goes with us. */
    munmap(base, map_size);
    return 0;
}
