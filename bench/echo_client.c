/*
 * echo_client.c - the load client of the `echo` benchmark (docs/BENCHMARKS.md).
 *
 *   gmprt-echo-client <port> [procs-label]
 *
 * Opens 100 TCP connections to 127.0.0.1:<port> and drives 10,000 round
 * trips of a 64-byte message on each, one message in flight per connection,
 * checking every echo byte for byte against what was sent. The clock starts
 * once all 100 are connected and stops after the last echo. Prints
 *   bench=echo procs=<label> n=1000000 value=<round trips/s> unit=roundtrips/s
 * where the label is the server's P count, which only the caller knows
 * (default: the CPUs this process may use, what a server run with `all` on
 * the same machine resolves to). Exit status: 0 ok, 1 a mismatch, a closed
 * connection or any other error (a message on stderr), 2 bad command line.
 *
 * The same program drives every server, so it is plain C with libc only, no
 * gmprt: one process, one thread, level-triggered epoll, TCP_NODELAY. It
 * waits for the server to listen (connection refused) for up to 10 s, and
 * gives up when no echo at all arrives for 20 s, so that a server that
 * loses a wake-up fails the run instead of hanging it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS      100
#define ROUNDS     10000
#define MSG        64
#define CONNECT_NS (10 * 1000000000LL)  /* how long the server may take */
#define RETRY_NS   (10 * 1000000LL)     /* between refused connects */
#define STALL_MS   20000                /* no event at all for this long */

#define LCG_MUL 6364136223846793005ULL
#define LCG_INC 1442695040888963407ULL

struct conn {
    int fd;                     /* -1 once its round trips are done */
    int round;                  /* round trips completed */
    int wpos, rpos;             /* bytes of msg written, of the echo read */
    int want_out;               /* EPOLLOUT is in its interest set */
    unsigned char msg[MSG], echo[MSG];
};

static struct conn conns[CONNS];
static int ep;

static _Noreturn void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static _Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gmprt-echo-client: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The message of connection i in its current round: 8 LCG steps from a seed
 * made of (i, round). The step is a bijection, so distinct seeds give
 * distinct first words: no two messages of the run are alike, and an echo
 * from another connection or an earlier round cannot pass the check. */
static void fill(struct conn *c, int i)
{
    uint64_t x = ((uint64_t)i << 32 | (uint32_t)c->round) ^ LCG_INC;
    for (int k = 0; k < MSG / 8; k++) {
        x = x * LCG_MUL + LCG_INC;
        memcpy(c->msg + 8 * k, &x, 8);
    }
    c->wpos = c->rpos = 0;
}

/* Sets connection i's epoll interest: EPOLLIN, plus EPOLLOUT while a
 * message is only partly written. */
static void want_out(struct conn *c, int i, int on)
{
    if (c->want_out == on)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0),
                             .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        die("epoll_ctl: %s", strerror(errno));
    c->want_out = on;
}

/* Writes what is left of connection i's message; a short write waits for
 * EPOLLOUT. MSG_NOSIGNAL: a server that went away is an error, not a
 * SIGPIPE. */
static void send_rest(struct conn *c, int i)
{
    while (c->wpos < MSG) {
        ssize_t n = send(c->fd, c->msg + c->wpos, (size_t)(MSG - c->wpos),
                         MSG_NOSIGNAL);
        if (n > 0) {
            c->wpos += (int)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            want_out(c, i, 1);
            return;
        } else {
            die("connection %d, round %d: send: %s", i, c->round,
                n < 0 ? strerror(errno) : "wrote nothing");
        }
    }
    want_out(c, i, 0);
}

/* Reads what the server has echoed on connection i (never past the message
 * in flight, so anything extra shows up as a mismatch in the next round);
 * a complete echo is checked and the next round starts. Returns 1 when the
 * connection has done all its round trips. */
static int receive(struct conn *c, int i)
{
    ssize_t n = recv(c->fd, c->echo + c->rpos, (size_t)(MSG - c->rpos), 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return 0;           /* level-triggered: it comes back */
        die("connection %d, round %d: recv: %s", i, c->round,
            strerror(errno));
    }
    if (n == 0)
        die("connection %d, round %d: the server closed the connection", i,
            c->round);
    c->rpos += (int)n;
    if (c->rpos < MSG)
        return 0;
    if (c->wpos < MSG || memcmp(c->echo, c->msg, MSG) != 0)
        die("connection %d, round %d: the echo differs from the message", i,
            c->round);
    if (++c->round == ROUNDS) {
        close(c->fd);           /* also leaves the epoll set */
        c->fd = -1;
        return 1;
    }
    fill(c, i);
    send_rest(c, i);
    return 0;
}

/* A blocking connect, retried while the server is not listening yet. */
static int connect_retry(const struct sockaddr_in *sa, int64_t deadline)
{
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die("socket: %s", strerror(errno));
        if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0)
            return fd;
        int err = errno;
        close(fd);              /* a failed socket cannot connect again */
        if (err != ECONNREFUSED && err != EINTR)
            die("connect to 127.0.0.1:%u: %s", ntohs(sa->sin_port),
                strerror(err));
        if (now_ns() >= deadline)
            die("connect to 127.0.0.1:%u: nobody listened within %lld s",
                ntohs(sa->sin_port), CONNECT_NS / 1000000000LL);
        struct timespec ts = {0, RETRY_NS};
        nanosleep(&ts, NULL);
    }
}

static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    return 1;
}

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: gmprt-echo-client <port> [procs-label]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3)
        usage();
    char *end;
    long port = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end || port < 1 || port > 65535)
        usage();
    char label[32];
    if (argc == 3) {
        /* It lands in a space-separated key=value line. */
        if (!argv[2][0] || strlen(argv[2]) >= sizeof label ||
            strpbrk(argv[2], " \t\n="))
            usage();
        strcpy(label, argv[2]);
    } else {
        snprintf(label, sizeof label, "%d", usable_cpus());
    }

    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int64_t deadline = now_ns() + CONNECT_NS;
    for (int i = 0; i < CONNS; i++) {
        struct conn *c = &conns[i];
        c->fd = connect_retry(&sa, deadline);
        int one = 1;
        if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
            die("TCP_NODELAY: %s", strerror(errno));
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
            die("O_NONBLOCK: %s", strerror(errno));
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            die("epoll_ctl: %s", strerror(errno));
    }

    int64_t t0 = now_ns();
    for (int i = 0; i < CONNS; i++) {
        fill(&conns[i], i);
        send_rest(&conns[i], i);
    }
    int left = CONNS;
    struct epoll_event evs[CONNS];
    while (left > 0) {
        int n = epoll_wait(ep, evs, CONNS, STALL_MS);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait: %s", strerror(errno));
        }
        if (n == 0)
            die("no echo for %d s with %d connections unfinished",
                STALL_MS / 1000, left);
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            struct conn *c = &conns[i];
            /* An event fetched in this batch for a connection that
             * finished earlier in it cannot happen (one fd, one event),
             * but a closed fd must not be touched. */
            if (c->fd < 0)
                continue;
            if (evs[k].events & EPOLLOUT)
                send_rest(c, i);
            /* Errors and hang-ups surface through recv. */
            if (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                left -= receive(c, i);
        }
    }
    int64_t el = now_ns() - t0;

    printf("bench=echo procs=%s n=%d value=%.3f unit=roundtrips/s\n", label,
           CONNS * ROUNDS, (double)CONNS * ROUNDS * 1e9 / (double)el);
    return 0;
}
