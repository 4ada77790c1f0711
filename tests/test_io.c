/*
 * test_io.c - the explicit I/O calls beyond read and write (gmp_recv,
 * gmp_send, gmp_recvfrom, gmp_sendto, gmp_readv, gmp_writev, gmp_recvmsg,
 * gmp_sendmsg, gmp_accept4, gmp_poll, gmp_fd_set_deadline,
 * gmp_getaddrinfo, gmp_getnameinfo) at procs 1, 2 and 4, each from a
 * goroutine and from a plain thread:
 *   - recv with MSG_PEEK leaves the bytes, MSG_DONTWAIT answers GMP_EAGAIN
 *     on an empty socket (and send with it on a full one, or while a
 *     parked send holds the write turn) instead of waiting; a parked
 *     MSG_WAITALL receive returns only once all its bytes came, in two
 *     sends;
 *   - UDP over loopback: a parked recvfrom gets each datagram whole, one
 *     per call, with the sender's address and port;
 *   - writev of several vectors (one empty) and readv into others move
 *     the exact bytes; a writev of 200 odd-sized vectors into a pipe a reader
 *     drains (many short writes) arrives exact;
 *   - sendmsg passes an fd with SCM_RIGHTS to a parked recvmsg, and the
 *     fd received writes into the same pipe;
 *   - accept4 honours SOCK_CLOEXEC and SOCK_NONBLOCK, with and without,
 *     parked or not, and rejects other flags;
 *   - gmp_poll over several fds parks until one becomes ready and reports
 *     only that one; times out with 0 no earlier than asked; answers at
 *     once for a regular file, a hang-up and a bad fd; leaves the polled
 *     fds blocking;
 *   - deadlines: a parked gmp_read returns GMP_ETIMEDOUT after its
 *     deadline, never before; a deadline already past fails reads and
 *     writes at once, data ready or not; clearing it lets reads work
 *     again; a deadline set while a read is parked ends it; accept and
 *     fd_wait honour it too; gmp_close clears it;
 *   - name resolution: many goroutines at procs 1 all inside
 *     getaddrinfo/getnameinfo at once (held there by this file's own
 *     getaddrinfo, which waits for the test's word and then calls the C
 *     library's), while another goroutine counts iterations: every
 *     lookup got in and the counter moved, so no lookup held the P; the
 *     answers for "localhost" and "127.0.0.1" are right.
 * No assertion depends on timing except "not before the deadline".
 * Goroutines and threads record (G_CHECK); the test thread asserts.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "internal.h"

/* ---- Helpers ------------------------------------------------------------ */

static uint8_t pat(uint64_t off, unsigned seed)
{
    return (uint8_t)(off * 131u + seed + (off >> 9) * 7u);
}

/* What each test's body shares with the test thread. */
static _Atomic int64_t about;       /* the body is about to block */
static _Atomic int64_t done;        /* the body has finished */
static int fds[8];

/* Runs body once as a goroutine and once on a plain thread; between
 * start and finish, between(), if given, runs on the test thread once
 * the body flagged `about` and everything is still (it is parked). */
static void each_way(void (*body)(void *), void (*between)(void))
{
    for (int thread = 0; thread < 2; thread++) {
        struct runner r;
        bad_reset();
        atomic_store(&about, 0);
        atomic_store(&done, 0);
        run_as(&r, thread, body, NULL);
        if (between) {
            assert_int_equal(h_wait(&about, 1), 0);
            assert_int_equal(h_still(), 0);
            between();
        }
        assert_int_equal(h_wait(&done, 1), 0);
        run_join(&r);
        h_assert_quiet_fds();
    }
}

static void mksockpair(int type, int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
}

static int mkudp(struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof *sa), 0);
    socklen_t len = sizeof *sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &len), 0);
    return fd;
}

static int mklistener(struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof *sa), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t len = sizeof *sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &len), 0);
    return fd;
}

/* A blocking client connection to sa (the kernel completes it from the
 * listener's backlog; nobody needs to accept first). */
static int dial(const struct sockaddr_in *sa)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c >= 0);
    assert_int_equal(connect(c, (const struct sockaddr *)sa, sizeof *sa), 0);
    return c;
}

static void close_all(int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(gmp_close(fds[i]), 0);
}

/* ---- recv / send ----------------------------------------------------------- */

static void peek_body(void *arg)
{
    (void)arg;
    char buf[16];
    int a = fds[0], b = fds[1];
    G_CHECK(gmp_recv(a, buf, sizeof buf, MSG_DONTWAIT) == GMP_EAGAIN);
    G_CHECK(gmp_send(b, "hello", 5, 0) == 5);
    G_CHECK(gmp_recv(a, buf, 5, MSG_PEEK) == 5 && !memcmp(buf, "hello", 5));
    memset(buf, 0, sizeof buf);
    G_CHECK(gmp_recv(a, buf, 5, MSG_PEEK) == 5 && !memcmp(buf, "hello", 5));
    G_CHECK(gmp_recv(a, buf, 3, 0) == 3 && !memcmp(buf, "hel", 3));
    G_CHECK(gmp_recv(a, buf, sizeof buf, MSG_DONTWAIT) == 2 &&
            !memcmp(buf, "lo", 2));
    G_CHECK(gmp_recv(a, buf, sizeof buf, MSG_DONTWAIT) == GMP_EAGAIN);
    /* Fill b's send buffer: MSG_DONTWAIT says GMP_EAGAIN, not a wait. */
    static char big[65536];
    ssize_t r;
    int64_t sent = 0;
    while ((r = gmp_send(b, big, sizeof big, MSG_DONTWAIT)) > 0)
        sent += r;
    G_CHECK(r == GMP_EAGAIN && sent > 0);
    /* Drain it, so the next round starts empty. */
    while (sent > 0 && (r = gmp_recv(a, big, sizeof big, 0)) > 0)
        sent -= r;
    G_CHECK(sent == 0);
    /* A parked MSG_WAITALL receive: the test thread sends 4 bytes, then
     * (once we are parked again) 6 more. */
    atomic_fetch_add(&about, 1);
    memset(buf, 0, sizeof buf);
    G_CHECK(gmp_recv(a, buf, 10, MSG_WAITALL) == 10 &&
            !memcmp(buf, "0123456789", 10));
    atomic_fetch_add(&done, 1);
}

static void peek_between(void)
{
    assert_int_equal(write(fds[1], "0123", 4), 4);
    assert_int_equal(h_still(), 0);         /* parked again, 4 bytes in */
    assert_int_equal(atomic_load(&done), 0);
    assert_int_equal(write(fds[1], "456789", 6), 6);
}

static void test_io_recv_send_peek_dontwait_waitall(void **state)
{
    mksockpair(SOCK_STREAM, fds);
    each_way(peek_body, peek_between);
    close_all(2);
}

/* A send parked on a full socket holds the fd's write turn; a
 * MSG_DONTWAIT send meanwhile answers GMP_EAGAIN instead of waiting
 * behind it. */
static _Atomic int64_t turn_sent;

static void turn_writer(void *arg)
{
    (void)arg;
    static char buf[100000];
    atomic_store(&turn_sent, gmp_send(fds[1], buf, sizeof buf, 0));
}

static void test_io_dontwait_send_skips_a_taken_write_turn(void **state)
{
    static char big[65536];
    mksockpair(SOCK_STREAM, fds);
    int64_t queued = 0;
    ssize_t r;
    while ((r = gmp_send(fds[1], big, sizeof big, MSG_DONTWAIT)) > 0)
        queued += r;
    assert_int_equal(r, GMP_EAGAIN);
    atomic_store(&turn_sent, 0);
    assert_int_equal(gmp_go(turn_writer, NULL), 0);
    assert_int_equal(h_still(), 0);         /* parked, holding the turn */
    assert_int_equal(gmp_send(fds[1], "z", 1, MSG_DONTWAIT), GMP_EAGAIN);
    assert_int_equal(gmp_sendto(fds[1], "z", 1, MSG_DONTWAIT, NULL, 0),
                     GMP_EAGAIN);
    assert_int_equal(atomic_load(&turn_sent), 0);
    int64_t want = queued + 100000;
    while (want > 0 && (r = gmp_read(fds[0], big, sizeof big)) > 0)
        want -= r;
    assert_int_equal(want, 0);
    assert_int_equal(h_wait(&turn_sent, 100000), 0);
    assert_int_equal(atomic_load(&turn_sent), 100000);
    close_all(2);
    h_assert_quiet_fds();
}

/* ---- UDP ------------------------------------------------------------------- */

static struct sockaddr_in udp_a, udp_b;

static void udp_body(void *arg)
{
    (void)arg;
    char buf[2048];
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    /* Parked until the test thread sends two datagrams from b. */
    atomic_fetch_add(&about, 1);
    for (int i = 0; i < 2; i++) {
        size_t want = i == 0 ? 3 : 1500;
        memset(&from, 0, sizeof from);
        len = sizeof from;
        ssize_t r = gmp_recvfrom(fds[0], buf, sizeof buf, 0,
                                 (struct sockaddr *)&from, &len);
        G_CHECK(r == (ssize_t)want);
        G_CHECK(len == sizeof from && from.sin_family == AF_INET &&
                from.sin_port == udp_b.sin_port &&
                from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
        for (size_t k = 0; k < want; k++)
            G_CHECK(buf[k] == (char)pat(k, (unsigned)i));
    }
    /* Back: sendto from a to b, one datagram each; b reads them whole. */
    for (int i = 0; i < 2; i++)
        G_CHECK(gmp_sendto(fds[0], "xy", 2, 0, (struct sockaddr *)&udp_b,
                           sizeof udp_b) == 2);
    G_CHECK(gmp_recvfrom(fds[1], buf, sizeof buf, 0, NULL, NULL) == 2);
    G_CHECK(gmp_recv(fds[1], buf, 1, 0) == 1 && buf[0] == 'x');
    /* the rest of that datagram is gone: nothing left */
    G_CHECK(gmp_recvfrom(fds[1], buf, sizeof buf, MSG_DONTWAIT, NULL,
                         NULL) == GMP_EAGAIN);
    atomic_fetch_add(&done, 1);
}

static void udp_between(void)
{
    char buf[1500];
    for (int i = 0; i < 2; i++) {
        size_t n = i == 0 ? 3 : 1500;
        for (size_t k = 0; k < n; k++)
            buf[k] = (char)pat(k, (unsigned)i);
        assert_int_equal(sendto(fds[1], buf, n, 0,
                                (struct sockaddr *)&udp_a, sizeof udp_a),
                         (ssize_t)n);
    }
}

static void test_io_udp_recvfrom_sendto_with_peer_address(void **state)
{
    fds[0] = mkudp(&udp_a);
    fds[1] = mkudp(&udp_b);
    each_way(udp_body, udp_between);
    close_all(2);
}

/* ---- readv / writev ---------------------------------------------------------- */

#define NVEC 200
#define VLEN 3001              /* odd: short writes end mid-vector */

static void vec_body(void *arg)
{
    (void)arg;
    static const size_t wl[] = {1, 0, 7, 4096, 3};
    static const size_t rl[] = {2, 100, 5000};
    char *w = malloc(4107), *rd = malloc(5102);
    struct iovec wv[5], rv[3];
    size_t off = 0;
    for (size_t k = 0; k < 4107; k++)
        w[k] = (char)pat(k, 9);
    for (int i = 0; i < 5; i++) {
        wv[i].iov_base = w + off;
        wv[i].iov_len = wl[i];
        off += wl[i];
    }
    off = 0;
    for (int i = 0; i < 3; i++) {
        rv[i].iov_base = rd + off;
        rv[i].iov_len = rl[i];
        off += rl[i];
    }
    for (int k = 0; k < 2; k++) {           /* a pipe, a socketpair */
        int r = fds[2 * k], wr = fds[2 * k + 1];
        memset(rd, 0, 5102);
        G_CHECK(gmp_writev(wr, wv, 5) == 4107);
        size_t got = 0;
        while (got < 4107) {
            ssize_t n = gmp_readv(r, rv, 3);
            if (n <= 0) {
                G_CHECK(false);
                break;
            }
            /* Each readv fills from the start of rv: compare as we go. */
            for (ssize_t j = 0; j < n; j++)
                G_CHECK(rd[j] == (char)pat(got + (size_t)j, 9));
            got += (size_t)n;
        }
        G_CHECK(got == 4107);
    }
    free(w);
    free(rd);
    G_CHECK(gmp_writev(fds[1], NULL, 1) == GMP_EINVAL);
    G_CHECK(gmp_writev(fds[1], wv, -1) == GMP_EINVAL);
    G_CHECK(gmp_readv(fds[0], rv, IOV_MAX + 1) == GMP_EINVAL);
    G_CHECK(gmp_writev(fds[1], wv, 0) == 0);
    atomic_fetch_add(&done, 1);
}

/* 200 vectors of 3001 bytes into a 64 KiB pipe: many short writes, each
 * resumed mid-vector; a goroutine reads it all back. */
static _Atomic int64_t big_read;

static void big_reader(void *arg)
{
    (void)arg;
    char buf[3000];
    uint64_t got = 0;
    while (got < (uint64_t)NVEC * VLEN) {
        ssize_t n = gmp_read(fds[4], buf, sizeof buf);
        if (n <= 0)
            break;
        for (ssize_t j = 0; j < n; j++)
            G_CHECK(buf[j] == (char)pat(got + (uint64_t)j, 3));
        got += (uint64_t)n;
    }
    atomic_store(&big_read, (int64_t)got);
}

static void bigv_body(void *arg)
{
    (void)arg;
    char *w = malloc((size_t)NVEC * VLEN);
    struct iovec *v = malloc(NVEC * sizeof *v);
    for (size_t k = 0; k < (size_t)NVEC * VLEN; k++)
        w[k] = (char)pat(k, 3);
    for (int i = 0; i < NVEC; i++) {
        v[i].iov_base = w + (size_t)i * VLEN;
        v[i].iov_len = VLEN;
    }
    atomic_store(&big_read, -1);
    G_CHECK(gmp_go(big_reader, NULL) == 0);
    G_CHECK(gmp_writev(fds[5], v, NVEC) == (ssize_t)NVEC * VLEN);
    free(v);
    free(w);
    atomic_fetch_add(&done, 1);
}

static void test_io_readv_writev_bytes_exact(void **state)
{
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    mksockpair(SOCK_STREAM, fds + 2);
    assert_int_equal(pipe2(fds + 4, O_CLOEXEC), 0);
    each_way(vec_body, NULL);
    for (int thread = 0; thread < 2; thread++) {
        struct runner r;
        bad_reset();
        atomic_store(&done, 0);
        run_as(&r, thread, bigv_body, NULL);
        assert_int_equal(h_wait(&done, 1), 0);
        assert_int_equal(h_wait(&big_read, (int64_t)NVEC * VLEN), 0);
        assert_int_equal(atomic_load(&big_read), (int64_t)NVEC * VLEN);
        run_join(&r);
        h_assert_quiet_fds();
    }
    close_all(6);
}

/* ---- recvmsg / sendmsg with SCM_RIGHTS ----------------------------------- */

static int passed_pipe[2];

static void msg_body(void *arg)
{
    (void)arg;
    char data[4] = {0};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {data, sizeof data};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = cm.buf,
                       .msg_controllen = sizeof cm.buf};
    atomic_fetch_add(&about, 1);
    ssize_t r = gmp_recvmsg(fds[0], &m, MSG_CMSG_CLOEXEC);
    G_CHECK(r == 2 && !memcmp(data, "fd", 2));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    G_CHECK(c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int)));
    if (c) {
        int got;
        memcpy(&got, CMSG_DATA(c), sizeof got);
        /* The fd we got writes into the pipe whose write end was sent. */
        G_CHECK(fcntl(got, F_GETFD) == FD_CLOEXEC);
        G_CHECK(gmp_write(got, "!", 1) == 1);
        char b = 0;
        G_CHECK(gmp_read(passed_pipe[0], &b, 1) == 1 && b == '!');
        G_CHECK(gmp_close(got) == 0);
    }
    /* And the other way, with gmp_sendmsg. */
    int pass = passed_pipe[1];
    memset(&cm, 0, sizeof cm);
    struct iovec out = {"ok", 2};
    struct msghdr s = {.msg_iov = &out, .msg_iovlen = 1,
                       .msg_control = cm.buf,
                       .msg_controllen = sizeof cm.buf};
    c = CMSG_FIRSTHDR(&s);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass, sizeof pass);
    G_CHECK(gmp_sendmsg(fds[0], &s, 0) == 2);
    G_CHECK(gmp_recvmsg(fds[0], NULL, 0) == GMP_EINVAL);
    atomic_fetch_add(&done, 1);
}

static void msg_between(void)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {"fd", 2};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = cm.buf,
                       .msg_controllen = sizeof cm.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &passed_pipe[1], sizeof(int));
    assert_int_equal(sendmsg(fds[1], &m, 0), 2);
}

static void test_io_recvmsg_sendmsg_pass_an_fd(void **state)
{
    mksockpair(SOCK_STREAM, fds);
    assert_int_equal(pipe2(passed_pipe, O_CLOEXEC), 0);
    for (int round = 0; round < 1; round++)
        each_way(msg_body, msg_between);
    /* What msg_body sent back, twice: two fds for the same pipe. */
    for (int i = 0; i < 2; i++) {
        char data[2];
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } cm;
        struct iovec iov = {data, 2};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                           .msg_control = cm.buf,
                           .msg_controllen = sizeof cm.buf};
        assert_int_equal(gmp_recvmsg(fds[1], &m, 0), 2);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        assert_non_null(c);
        assert_int_equal(c->cmsg_type, SCM_RIGHTS);
        int got;
        memcpy(&got, CMSG_DATA(c), sizeof got);
        assert_int_equal(write(got, "k", 1), 1);
        char b;
        assert_int_equal(gmp_read(passed_pipe[0], &b, 1), 1);
        assert_int_equal(b, 'k');
        assert_int_equal(close(got), 0);
    }
    close_all(2);
    assert_int_equal(gmp_close(passed_pipe[0]), 0);
    assert_int_equal(gmp_close(passed_pipe[1]), 0);
}

/* ---- accept4 ---------------------------------------------------------------- */

static struct sockaddr_in lis_sa;
static int dialled = -1;

static bool cloexec(int fd)
{
    return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

static bool nonblock(int fd)
{
    return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

static void acc_body(void *arg)
{
    (void)arg;
    int l = fds[0];
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    /* Parked: the test thread dials once we are. */
    atomic_fetch_add(&about, 1);
    int c = gmp_accept4(l, (struct sockaddr *)&peer, &len, 0);
    G_CHECK(c >= 0 && len == sizeof peer && peer.sin_family == AF_INET);
    if (c >= 0) {
        G_CHECK(!cloexec(c) && !nonblock(c));
        G_CHECK(gmp_close(c) == 0);
    }
    static const int fl[] = {SOCK_CLOEXEC, SOCK_NONBLOCK,
                             SOCK_CLOEXEC | SOCK_NONBLOCK, 0};
    for (int i = 0; i < 4; i++) {
        int d = dial(&lis_sa);          /* in the backlog: no wait */
        c = gmp_accept4(l, NULL, NULL, fl[i]);
        G_CHECK(c >= 0);
        if (c >= 0) {
            G_CHECK(cloexec(c) == !!(fl[i] & SOCK_CLOEXEC));
            G_CHECK(nonblock(c) == !!(fl[i] & SOCK_NONBLOCK));
            /* Used through the runtime, it works whatever its mode. */
            G_CHECK(gmp_write(d, "a", 1) == 1);
            char b = 0;
            G_CHECK(gmp_read(c, &b, 1) == 1 && b == 'a');
            G_CHECK(gmp_close(c) == 0);
        }
        G_CHECK(gmp_close(d) == 0);
    }
    G_CHECK(gmp_accept4(l, NULL, NULL, O_APPEND) == GMP_EINVAL);
    /* gmp_accept: non-blocking and close-on-exec; the test thread dials
     * once it sees about == 2. */
    atomic_fetch_add(&about, 1);
    c = gmp_accept(l, NULL, NULL);
    G_CHECK(c >= 0 && cloexec(c) && nonblock(c));
    if (c >= 0)
        G_CHECK(gmp_close(c) == 0);
    atomic_fetch_add(&done, 1);
}

static void acc_between(void)
{
    dialled = dial(&lis_sa);
}


static void test_io_accept4_flags(void **state)
{
    fds[0] = mklistener(&lis_sa);
    for (int thread = 0; thread < 2; thread++) {
        struct runner r;
        bad_reset();
        atomic_store(&about, 0);
        atomic_store(&done, 0);
        run_as(&r, thread, acc_body, NULL);
        assert_int_equal(h_wait(&about, 1), 0);
        assert_int_equal(h_still(), 0);
        acc_between();
        assert_int_equal(h_wait(&about, 2), 0);
        int last = dial(&lis_sa);
        assert_int_equal(h_wait(&done, 1), 0);
        run_join(&r);
        assert_int_equal(close(last), 0);
        assert_int_equal(close(dialled), 0);
        h_assert_quiet_fds();
    }
    close_all(1);
}

/* ---- gmp_poll ------------------------------------------------------------ */

static char tmpname[64];

static void poll_body(void *arg)
{
    (void)arg;
    /* fds[0], [2], [4]: read ends of three pipes; only the middle one
     * will become readable (the test thread writes it once we park). */
    struct pollfd p[4] = {
        {.fd = fds[0], .events = POLLIN},
        {.fd = fds[2], .events = POLLIN},
        {.fd = -1, .events = POLLIN},       /* ignored, as poll(2) */
        {.fd = fds[4], .events = POLLIN | POLLPRI},
    };
    atomic_fetch_add(&about, 1);
    int r = gmp_poll(p, 4, GMP_FOREVER);
    G_CHECK(r == 1);
    G_CHECK(p[0].revents == 0 && p[1].revents == POLLIN &&
            p[2].revents == 0 && p[3].revents == 0);
    /* Polled, not registered: the pipes stay blocking. */
    G_CHECK(!nonblock(fds[0]) && !nonblock(fds[2]) && !nonblock(fds[4]));
    char b;
    G_CHECK(read(fds[2], &b, 1) == 1 && b == 'p');
    /* Once: nothing else ready. */
    p[1].fd = -1;
    G_CHECK(gmp_poll(p, 4, 0) == 0);
    /* A timeout: 0, and no earlier than asked. */
    struct span sp = span_start();
    G_CHECK(gmp_poll(p, 4, 20 * MS) == 0);
    G_CHECK(span_at_least(sp, 20 * MS));
    /* A regular file is ready at once; so is a hang-up, and a bad fd is
     * POLLNVAL. */
    int f = open(tmpname, O_RDWR | O_CLOEXEC);
    G_CHECK(f >= 0);
    struct pollfd q[3] = {
        {.fd = f, .events = POLLIN | POLLOUT},
        {.fd = fds[0], .events = POLLIN},
    };
    G_CHECK(gmp_poll(q, 2, GMP_FOREVER) == 1);
    G_CHECK(q[0].revents == (POLLIN | POLLOUT) && q[1].revents == 0);
    close(f);
    q[0] = (struct pollfd){.fd = fds[5], .events = POLLIN}; /* wr end */
    q[1] = (struct pollfd){.fd = 1 << 20, .events = POLLIN};
    G_CHECK(gmp_poll(q, 2, GMP_FOREVER) == 1 && q[1].revents == POLLNVAL);
    G_CHECK(gmp_poll(NULL, 1, 0) == GMP_EINVAL);
    G_CHECK(gmp_poll(NULL, 0, 0) == 0);
    atomic_fetch_add(&done, 1);
}

static void poll_between(void)
{
    assert_int_equal(write(fds[3], "p", 1), 1);
}

/* A hang-up wakes a parked poll that asked for POLLIN only. */
static void hup_body(void *arg)
{
    (void)arg;
    struct pollfd p[2] = {
        {.fd = fds[0], .events = POLLIN},
        {.fd = fds[6], .events = POLLIN},
    };
    atomic_fetch_add(&about, 1);
    G_CHECK(gmp_poll(p, 2, GMP_FOREVER) == 1);
    G_CHECK(p[0].revents == 0 && p[1].revents == POLLHUP);
    atomic_fetch_add(&done, 1);
}

static void hup_between(void)
{
    assert_int_equal(close(fds[7]), 0);
}

static void test_io_poll_reports_the_one_ready_fd(void **state)
{
    for (int i = 0; i < 3; i++)
        assert_int_equal(pipe2(fds + 2 * i, O_CLOEXEC), 0);
    strcpy(tmpname, "/tmp/gmprt-test-io-XXXXXX");
    int f = mkstemp(tmpname);
    assert_true(f >= 0);
    assert_int_equal(write(f, "data", 4), 4);
    close(f);
    each_way(poll_body, poll_between);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pipe2(fds + 6, O_CLOEXEC), 0);
        struct runner r;
        bad_reset();
        atomic_store(&about, 0);
        atomic_store(&done, 0);
        run_as(&r, i, hup_body, NULL);
        assert_int_equal(h_wait(&about, 1), 0);
        assert_int_equal(h_still(), 0);
        hup_between();
        assert_int_equal(h_wait(&done, 1), 0);
        run_join(&r);
        h_assert_quiet_fds();
        assert_int_equal(close(fds[6]), 0);
    }
    unlink(tmpname);
    for (int i = 0; i < 6; i++)
        assert_int_equal(close(fds[i]), 0);
}

/* ---- Deadlines ------------------------------------------------------------- */

static void dl_body(void *arg)
{
    (void)arg;
    int r = fds[0], w = fds[1];
    char buf[8];
    /* A parked read ends at its deadline, never before. */
    int64_t dl = gmp_nanotime() + 20 * MS;
    G_CHECK(gmp_fd_set_deadline(r, GMP_POLLIN, dl) == 0);
    G_CHECK(gmp_read(r, buf, sizeof buf) == GMP_ETIMEDOUT);
    G_CHECK(gmp_nanotime() >= dl);
    /* Past now: fails at once, data ready or not; writes are not
     * affected by a read deadline. */
    G_CHECK(gmp_write(w, "abc", 3) == 3);
    G_CHECK(gmp_read(r, buf, sizeof buf) == GMP_ETIMEDOUT);
    G_CHECK(gmp_recv(fds[2], buf, sizeof buf, MSG_DONTWAIT) == GMP_EAGAIN);
    G_CHECK(gmp_fd_wait(r, GMP_POLLIN, GMP_FOREVER) == GMP_ETIMEDOUT);
    /* Cleared: the data is there. */
    G_CHECK(gmp_fd_set_deadline(r, GMP_POLLIN, 0) == 0);
    G_CHECK(gmp_read(r, buf, sizeof buf) == 3 && !memcmp(buf, "abc", 3));
    /* A deadline already past, on both directions of a socket. */
    G_CHECK(gmp_send(fds[3], "x", 1, 0) == 1);
    G_CHECK(gmp_fd_set_deadline(fds[2], GMP_POLLIN | GMP_POLLOUT, 1) == 0);
    G_CHECK(gmp_recv(fds[2], buf, sizeof buf, 0) == GMP_ETIMEDOUT);
    G_CHECK(gmp_send(fds[2], "y", 1, 0) == GMP_ETIMEDOUT);
    G_CHECK(gmp_fd_set_deadline(fds[2], GMP_POLLIN | GMP_POLLOUT, 0) == 0);
    G_CHECK(gmp_recv(fds[2], buf, sizeof buf, 0) == 1 && buf[0] == 'x');
    /* Bad arguments. */
    G_CHECK(gmp_fd_set_deadline(r, 0, 0) == GMP_EINVAL);
    G_CHECK(gmp_fd_set_deadline(r, 0x100, 0) == GMP_EINVAL);
    G_CHECK(gmp_fd_set_deadline(r, GMP_POLLIN, -5) == GMP_EINVAL);
    G_CHECK(gmp_fd_set_deadline(-1, GMP_POLLIN, 0) == GMP_EBADF);
    /* A listener's read deadline ends a parked accept. */
    dl = gmp_nanotime() + 5 * MS;
    G_CHECK(gmp_fd_set_deadline(fds[4], GMP_POLLIN, dl) == 0);
    G_CHECK(gmp_accept(fds[4], NULL, NULL) == GMP_ETIMEDOUT);
    G_CHECK(gmp_nanotime() >= dl);
    G_CHECK(gmp_fd_set_deadline(fds[4], GMP_POLLIN, 0) == 0);
    /* Parked with no deadline: the test thread sets one, in the past,
     * and the read ends. */
    atomic_fetch_add(&about, 1);
    G_CHECK(gmp_read(r, buf, sizeof buf) == GMP_ETIMEDOUT);
    G_CHECK(gmp_fd_set_deadline(r, GMP_POLLIN, 0) == 0);
    atomic_fetch_add(&done, 1);
}

static void dl_between(void)
{
    assert_int_equal(gmp_fd_set_deadline(fds[0], GMP_POLLIN,
                                         gmp_nanotime()), 0);
}

/* gmp_close forgets the deadline: the next fd with that number has none. */
static void test_io_deadlines(void **state)
{
    struct sockaddr_in sa;
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    mksockpair(SOCK_STREAM, fds + 2);
    fds[4] = mklistener(&sa);
    each_way(dl_body, dl_between);
    int num = fds[0];
    assert_int_equal(gmp_fd_set_deadline(num, GMP_POLLIN, 1), 0);
    close_all(5);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(p[0], num);           /* the lowest free number */
    assert_int_equal(write(p[1], "z", 1), 1);
    char b;
    assert_int_equal(gmp_read(p[0], &b, 1), 1);
    assert_int_equal(gmp_close(p[0]), 0);
    assert_int_equal(gmp_close(p[1]), 0);
}

/* ---- Name resolution --------------------------------------------------------
 * This file's getaddrinfo and getnameinfo stand in for the C library's
 * (H_WRAP, harness.h): while the gate is shut each caller counts itself
 * in and waits on it, a plain blocking wait of its thread; then it calls
 * the real one. */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_shut;
static _Atomic int64_t in_lookup;

static void gate(void)
{
    pthread_mutex_lock(&gate_mu);
    if (gate_shut) {
        atomic_fetch_add(&in_lookup, 1);
        while (gate_shut)
            pthread_cond_wait(&gate_cv, &gate_mu);
    }
    pthread_mutex_unlock(&gate_mu);
}

/* The C library's, looked up by main before any thread starts. */
static int (*real_gai)(const char *, const char *, const struct addrinfo *,
                       struct addrinfo **);
static int (*real_gni)(const struct sockaddr *, socklen_t, char *, socklen_t,
                       char *, socklen_t, int);

int H_WRAP(getaddrinfo)(const char *node, const char *service,
                        const struct addrinfo *hints, struct addrinfo **res)
{
    gate();
    return real_gai(node, service, hints, res);
}

int H_WRAP(getnameinfo)(const struct sockaddr *sa, socklen_t salen,
                        char *host, socklen_t hostlen, char *serv,
                        socklen_t servlen, int flags)
{
    gate();
    return real_gni(sa, salen, host, hostlen, serv, servlen, flags);
}

#define NLOOKUP 12

static _Atomic int64_t spins, lookups_done;
static _Atomic bool spin_stop;

static void spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&spin_stop)) {
        atomic_fetch_add(&spins, 1);
        gmp_yield();
    }
    atomic_fetch_add(&lookups_done, 1000);
}

/* Whether res holds 127.0.0.1 (port 80, from the service). */
static bool has_loopback(const struct addrinfo *res)
{
    for (; res; res = res->ai_next) {
        if (res->ai_family != AF_INET)
            continue;
        const struct sockaddr_in *sin = (const void *)res->ai_addr;
        if (sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
            sin->sin_port == htons(80))
            return true;
    }
    return false;
}

static void lookup(void *arg)
{
    int i = (int)(intptr_t)arg;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (i % 3 == 2) {
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons(80)};
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        char host[64], serv[16];
        G_CHECK(gmp_getnameinfo((struct sockaddr *)&sin, sizeof sin, host,
                                sizeof host, serv, sizeof serv,
                                NI_NUMERICHOST | NI_NUMERICSERV) == 0);
        G_CHECK(!strcmp(host, "127.0.0.1") && !strcmp(serv, "80"));
    } else {
        if (i % 3 == 1)
            hints.ai_flags = AI_NUMERICHOST;
        const char *node = i % 3 == 1 ? "127.0.0.1" : "localhost";
        G_CHECK(gmp_getaddrinfo(node, "80", &hints, &res) == 0);
        G_CHECK(has_loopback(res));
        if (res)
            freeaddrinfo(res);
    }
    atomic_fetch_add(&lookups_done, 1);
}

static void test_io_resolver_does_not_hold_the_p(void **state)
{
    bad_reset();
    atomic_store(&spins, 0);
    atomic_store(&lookups_done, 0);
    atomic_store(&in_lookup, 0);
    atomic_store(&spin_stop, false);
    pthread_mutex_lock(&gate_mu);
    gate_shut = true;
    pthread_mutex_unlock(&gate_mu);
    assert_int_equal(gmp_go(spinner, NULL), 0);
    for (int i = 0; i < NLOOKUP; i++)
        assert_int_equal(gmp_go(lookup, (void *)(intptr_t)i), 0);
    /* Every lookup got into the C library while the others wait there:
     * each one that waited with the P held would have kept the next
     * from starting (procs 1 has one P). */
    assert_int_equal(h_wait(&in_lookup, NLOOKUP), 0);
    /* And with all of them inside, the spinner still runs. */
    int64_t s0 = atomic_load(&spins);
    assert_int_equal(h_wait(&spins, s0 + 1000), 0);
    assert_int_equal(atomic_load(&lookups_done), 0);
    pthread_mutex_lock(&gate_mu);
    gate_shut = false;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    assert_int_equal(h_wait(&lookups_done, NLOOKUP), 0);
    atomic_store(&spin_stop, true);
    assert_int_equal(h_wait(&lookups_done, NLOOKUP + 1000), 0);
    /* From a plain thread and from the test thread, the gate open. */
    struct th t;
    th_start(&t, lookup, (void *)(intptr_t)0);
    th_join(&t);
    lookup((void *)(intptr_t)1);
    lookup((void *)(intptr_t)2);
    assert_int_equal(atomic_load(&lookups_done), NLOOKUP + 1003);
    h_assert_quiet_fds();
}

/* ---- fds closed behind the runtime's back -------------------------------- */

static _Atomic int64_t fb_done, fb_bad;

static void fb_answer(void *arg)
{
    int fd = (int)(intptr_t)arg;
    gmp_sleep(MS);                  /* so that the other side waits */
    if (gmp_write(fd, "r", 1) != 1)
        atomic_fetch_add(&fb_bad, 1);
}

/* A library's pattern: it closes its connection's fd with close(2), and
 * its next connection gets the same number. gmp_fd_wait finds the new
 * file unregistered and registers it; after gmp_fd_forget, gmp_read
 * registers it too. Without either, the second wait never ends. */
static void fb_goroutine(void *arg)
{
    bool forget = arg != NULL;
    int prev = -1;
    for (int i = 0; i < 10; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            atomic_fetch_add(&fb_bad, 1000);
            break;
        }
        if (prev >= 0 && sv[0] != prev)
            atomic_fetch_add(&fb_bad, 1000);    /* the number moved */
        prev = sv[0];
        gmp_go(fb_answer, (void *)(intptr_t)sv[1]);
        char c = 0;
        if (forget) {
            if (gmp_read(sv[0], &c, 1) != 1)
                atomic_fetch_add(&fb_bad, 1);
        } else if (gmp_fd_wait(sv[0], GMP_POLLIN, 5000 * MS) != GMP_POLLIN ||
                   read(sv[0], &c, 1) != 1) {
            atomic_fetch_add(&fb_bad, 1);
        }
        close(sv[0]);               /* not gmp_close */
        if (forget)
            gmp_fd_forget(sv[0]);
        gmp_close(sv[1]);
    }
    /* Only a wait rechecks: the number's last file, closed with close(2),
     * is still registered, which would hang a gmp_read on the next. */
    if (!forget)
        gmp_fd_forget(prev);
    atomic_store(&fb_done, 1);
}

static void test_io_fd_closed_behind_the_runtimes_back(void **state)
{
    for (int forget = 0; forget < 2; forget++) {
        atomic_store(&fb_done, 0);
        atomic_store(&fb_bad, 0);
        assert_int_equal(gmp_go(fb_goroutine, (void *)(intptr_t)forget), 0);
        assert_int_equal(h_wait(&fb_done, 1), 0);
        assert_int_equal(atomic_load(&fb_bad), 0);
    }
    assert_int_equal(gmp_fd_forget(-1), GMP_EBADF);
    assert_int_equal(gmp_fd_forget(1 << 20), 0);    /* never seen */
}

int main(void)
{
    H_REAL(real_gai, getaddrinfo);
    H_REAL(real_gni, getnameinfo);
    if (!real_gai || !real_gni)
        return 1;
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_io_recv_send_peek_dontwait_waitall),
        cmocka_unit_test(test_io_dontwait_send_skips_a_taken_write_turn),
        cmocka_unit_test(test_io_udp_recvfrom_sendto_with_peer_address),
        cmocka_unit_test(test_io_readv_writev_bytes_exact),
        cmocka_unit_test(test_io_recvmsg_sendmsg_pass_an_fd),
        cmocka_unit_test(test_io_accept4_flags),
        cmocka_unit_test(test_io_poll_reports_the_one_ready_fd),
        cmocka_unit_test(test_io_deadlines),
        cmocka_unit_test(test_io_fd_closed_behind_the_runtimes_back),
        cmocka_unit_test(test_io_resolver_does_not_hold_the_p),
    };
    return cmocka_run_group_tests_name("io procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("io procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("io procs=4", t, h_up_4, h_down);
}
