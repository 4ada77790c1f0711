/*
 * test_netpoll.c - the fd calls over the netpoller (gmp_read, gmp_write,
 * gmp_accept, gmp_connect, gmp_fd_wait, gmp_close) at procs 1, 2 and 4,
 * in goroutines and on plain threads:
 *   - a reader parked on an empty pipe or socketpair sees every byte a
 *     writer (goroutine or plain thread) writes in chunks, in order, then
 *     0 once the writer closes;
 *   - many pipes and socketpairs at once, each stream exact;
 *   - gmp_write of several MB into a small pipe that a reader drains
 *     slowly returns the full length;
 *   - concurrent readers of one fd share the bytes (each byte read once),
 *     concurrent writers take turns (each gmp_write's bytes contiguous,
 *     as Go's Write);
 *   - gmp_close wakes every reader, writer, accepter and gmp_fd_wait
 *     parked on the fd, goroutines and plain threads, with GMP_EBADF;
 *   - gmp_fd_wait: GMP_ETIMEDOUT no earlier than the timeout, GMP_POLLIN
 *     or GMP_POLLOUT when ready (and only what was asked), not ready again
 *     once drained although the poller is edge-triggered, a hang-up ready
 *     for everything, a parked waiter woken by data;
 *   - a TCP echo round trip over loopback: gmp_accept and gmp_connect
 *     parking, many messages each way, clients as goroutines and as plain
 *     threads; a refused connection is an error;
 *   - a plain thread blocked in gmp_read until a goroutine writes;
 *   - regular files and /dev/null work (they are never "not ready");
 *   - an fd number that one thread closes and another reopens at once
 *     works for its new owner at once;
 *   - bad input (fd -1 or huge, a NULL buffer, no events, not a socket, a
 *     socket not listening, a peer gone) is an error, never a crash or a
 *     hang;
 *   - after each test every goroutine has returned and the poller holds
 *     no waiter (white-box: sched.netpoll_waiters); the group's
 *     gmp_shutdown completes;
 *   - deadlock detection after network I/O (forked children, as
 *     test_deadlock.c): after a socketpair round trip, main blocking for
 *     ever with nothing left that could wake it is reported, with the
 *     fds closed or left open, and after gmp_close woke the last
 *     goroutine parked on an fd while an M slept in the poller for it;
 *     a goroutine parked in gmp_read, gmp_accept or a timed gmp_fd_wait
 *     that another process or a timer ends is no deadlock. (A reader
 *     parked on an fd nobody can write is not reported: Go cannot tell
 *     either.)
 *
 * Waiting for a goroutine or thread to be really parked uses h_still
 * (every other thread asleep in the kernel, twice, with no switch in
 * between) after it flagged that it is about to block; no assertion
 * depends on timing. Goroutines and helper threads only record; the test
 * thread waits and asserts. The forking tests run first, while no
 * runtime runs in this process.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "internal.h"

/* ---- Helpers ------------------------------------------------------------ */

/* kind 0: a pipe (fd[0] reads), 1: a stream socketpair. */
static void mkstream(int kind, int fd[2])
{
    if (kind == 0)
        assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
    else
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                                    fd), 0);
}

/* The byte at offset off of stream seed. */
static uint8_t pat(uint64_t off, unsigned seed)
{
    return (uint8_t)(off * 131u + seed + (off >> 9) * 7u);
}

/* A listening TCP socket on 127.0.0.1, any port; its address in *sa. */
static int mklistener(struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
                                sizeof one), 0);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa->sin_port = 0;
    assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof *sa), 0);
    assert_int_equal(listen(fd, 128), 0);
    socklen_t len = sizeof *sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &len), 0);
    assert_int_equal(len, sizeof *sa);
    assert_true(ntohs(sa->sin_port) != 0);
    return fd;
}

/* An echo goroutine on one end of a socketpair: echoes what it reads
 * until EOF (then closes its end) or until it has echoed "quit" (then
 * leaves its end open). */
static gmp_wg_t rt_wg;

static void rt_echo(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[64];
    for (;;) {
        ssize_t n = gmp_read(fd, buf, sizeof buf);
        if (n <= 0) {
            gmp_close(fd);
            break;
        }
        if (gmp_write(fd, buf, (size_t)n) != n)
            break;
        if (n == 4 && memcmp(buf, "quit", 4) == 0)
            break;
    }
    gmp_wg_done(&rt_wg);
}

/* main does a round trip with the echo goroutine, waits for it to end,
 * then waits for ever on a channel nobody has. */
static void rt_main(bool close_fds)
{
    int sv[2];
    char buf[16];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    gmp_wg_add(&rt_wg, 1);
    gmp_go(rt_echo, (void *)(intptr_t)sv[1]);
    const char *msg = close_fds ? "ping" : "quit";
    if (gmp_write(sv[0], msg, 4) != 4)
        return;
    size_t got = 0;
    while (got < 4) {
        ssize_t n = gmp_read(sv[0], buf + got, 4 - got);
        if (n <= 0)
            return;
        got += (size_t)n;
    }
    if (memcmp(buf, msg, 4) != 0)
        return;
    if (close_fds)
        gmp_close(sv[0]);
    gmp_wg_wait(&rt_wg);
    printf("round trip ok\n");
    gmp_chan_t *c = gmp_chan_make(sizeof(int), 0);
    announce("chan receive");
    gmp_chan_recv(c, NULL);
    printf("recv returned\n");
}

static void rt_main_closed(void *arg)
{
    (void)arg;
    rt_main(true);
}

static void rt_main_open(void *arg)
{
    (void)arg;
    rt_main(false);
}

static void test_netpoll_deadlock_after_round_trip_fds_closed(void **state)
{
    expect_deadlock(rt_main_closed);
}

/* The fds stay open, but nothing waits on them: Go reports this too. */
static void test_netpoll_deadlock_after_round_trip_fds_open(void **state)
{
    expect_deadlock(rt_main_open);
}

/* An M sleeps in the poller for the one goroutine parked on a pipe (no
 * timer anywhere) when main closes the pipe and wakes that goroutine
 * with GMP_EBADF; then main blocks for ever. The M in the poller must
 * not sleep on for nobody: while it did, no M was idle enough for the
 * check, and the child hung instead of reporting. */
static int lw_fds[2];
static gmp_wg_t lw_wg;

static void lw_reader(void *arg)
{
    (void)arg;
    char b;
    if (gmp_read(lw_fds[0], &b, 1) == GMP_EBADF)
        printf("reader woken\n");
    gmp_wg_done(&lw_wg);
}

static void lw_nothing(void *arg)
{
    (void)arg;
}

static void lw_main(void *arg)
{
    (void)arg;
    if (pipe2(lw_fds, O_CLOEXEC) != 0)
        return;
    gmp_wg_add(&lw_wg, 1);
    gmp_go(lw_reader, NULL);
    /* Until the reader is parked and an M blocks in the poller with no
     * deadline: each goroutine started wakes an idle M, which, finding
     * nothing to run, goes there. */
    struct schedt *s = h_sched();
    while (!(atomic_load(&s->netpoll_waiters) == 1 &&
             atomic_load(&s->lastpoll) == 0 &&
             atomic_load(&s->poll_until) == 0)) {
        gmp_go(lw_nothing, NULL);
        gmp_yield();
    }
    gmp_close(lw_fds[0]);
    gmp_wg_wait(&lw_wg);
    gmp_close(lw_fds[1]);
    gmp_chan_t *c = gmp_chan_make(sizeof(int), 0);
    announce("chan receive");
    gmp_chan_recv(c, NULL);
    printf("recv returned\n");
}

static void test_netpoll_deadlock_after_close_wakes_the_last_waiter(
    void **state)
{
    (void)state;
#if defined(H_TSAN) || GMP_TEST_EMULATED
    skip();                         /* as expect_deadlock */
#endif
    /* Two Ps at least: one M in the poller, main's running. */
    for (int i = 0; i < 10; i++) {
        expect_deadlock_procs(lw_main, 2);
        expect_deadlock_procs(lw_main, 4);
    }
}

/* A process of our own (no thread of this one) writes the pipe, or
 * connects to the listener, after a while: the poller is the only thing
 * that can wake the goroutine parked on it. */
static int ext_fd = -1;
static struct sockaddr_in ext_sa;

static void ext_sleep(void)
{
    struct timespec ts = {0, 150 * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void before_pipe_writer_process(void)
{
    int p[2];
    if (pipe(p) != 0)
        _exit(30);
    pid_t pid = fork();
    if (pid < 0)
        _exit(31);
    if (pid == 0) {
        close(p[0]);
        ext_sleep();
        ssize_t w = write(p[1], "w", 1);
        (void)w;
        _exit(0);
    }
    close(p[1]);
    ext_fd = p[0];
}

static void ext_read_main(void *arg)
{
    (void)arg;
    char b = 0;
    ssize_t n = gmp_read(ext_fd, &b, 1);
    gmp_close(ext_fd);
    if (n == 1 && b == 'w')
        printf("ok\n");
}

static void test_netpoll_no_deadlock_reader_parked_for_process(void **state)
{
    expect_clean_with(ext_read_main, before_pipe_writer_process, 1);
    expect_clean_with(ext_read_main, before_pipe_writer_process, 2);
}

static void before_connector_process(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        _exit(32);
    memset(&ext_sa, 0, sizeof ext_sa);
    ext_sa.sin_family = AF_INET;
    ext_sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof ext_sa;
    if (bind(fd, (struct sockaddr *)&ext_sa, sizeof ext_sa) != 0 ||
        listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&ext_sa, &len) != 0)
        _exit(33);
    pid_t pid = fork();
    if (pid < 0)
        _exit(34);
    if (pid == 0) {
        close(fd);
        ext_sleep();
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (c >= 0 && connect(c, (struct sockaddr *)&ext_sa,
                              sizeof ext_sa) == 0) {
            ssize_t w = write(c, "c", 1);
            (void)w;
        }
        _exit(0);
    }
    ext_fd = fd;
}

static void ext_accept_main(void *arg)
{
    (void)arg;
    char b = 0;
    int c = gmp_accept(ext_fd, NULL, NULL);
    ssize_t n = c >= 0 ? gmp_read(c, &b, 1) : -1;
    if (c >= 0)
        gmp_close(c);
    gmp_close(ext_fd);
    if (n == 1 && b == 'c')
        printf("ok\n");
}

static void test_netpoll_no_deadlock_accept_parked_for_process(void **state)
{
    expect_clean_with(ext_accept_main, before_connector_process, 1);
    expect_clean_with(ext_accept_main, before_connector_process, 2);
}

/* main waits on an fd nobody writes, with a timeout; a goroutine sleeps
 * and then writes another pipe main reads. Only timers and the poller. */
static int tw_pipe[2];

static void tw_writer(void *arg)
{
    (void)arg;
    gmp_sleep(100 * MS);
    gmp_write(tw_pipe[1], "t", 1);
}

static void ext_timed_main(void *arg)
{
    (void)arg;
    int idle[2];
    char b = 0;
    if (pipe(idle) != 0 || pipe(tw_pipe) != 0)
        return;
    int r1 = gmp_fd_wait(idle[0], GMP_POLLIN, 100 * MS);
    gmp_go(tw_writer, NULL);
    ssize_t n = gmp_read(tw_pipe[0], &b, 1);
    for (int i = 0; i < 2; i++) {
        gmp_close(idle[i]);
        gmp_close(tw_pipe[i]);
    }
    if (r1 == GMP_ETIMEDOUT && n == 1 && b == 't')
        printf("ok\n");
    else
        printf("bad: %d %zd\n", r1, n);
}

static void test_netpoll_no_deadlock_timed_wait_and_sleeper(void **state)
{
    expect_clean_with(ext_timed_main, NULL, 1);
    expect_clean_with(ext_timed_main, NULL, 2);
}

/* ---- Streams: a parked reader sees every byte, then EOF ----------------- */

struct stream {
    int rfd, wfd;
    uint64_t total;                 /* bytes the writer writes */
    unsigned seed;
    int slow;                       /* the reader sleeps now and then */
    _Atomic int64_t reading;        /* about to make its first read */
    _Atomic int64_t got, eof, bad, wrote, done;
};

static void stream_reset(struct stream *s, int fd[2], uint64_t total,
                         unsigned seed)
{
    s->rfd = fd[0];
    s->wfd = fd[1];
    s->total = total;
    s->seed = seed;
    s->slow = 0;
    atomic_store(&s->reading, 0);
    atomic_store(&s->got, 0);
    atomic_store(&s->eof, 0);
    atomic_store(&s->bad, 0);
    atomic_store(&s->wrote, 0);
    atomic_store(&s->done, 0);
}

static void stream_reader(void *arg)
{
    struct stream *s = arg;
    uint8_t buf[5000];
    uint64_t off = 0;
    unsigned k = 0;
    atomic_store(&s->reading, 1);
    for (;;) {
        size_t want = 1 + (k++ * 977u) % sizeof buf;
        ssize_t n = gmp_read(s->rfd, buf, want);
        if (n < 0) {
            atomic_fetch_add(&s->bad, 1);
            G_CHECK(n >= 0);
            break;
        }
        if (n == 0) {
            atomic_store(&s->eof, 1);
            break;
        }
        G_CHECK((size_t)n <= want);
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != pat(off + (uint64_t)i, s->seed)) {
                atomic_fetch_add(&s->bad, 1);
                G_CHECK(buf[i] == pat(off + (uint64_t)i, s->seed));
                break;
            }
        off += (uint64_t)n;
        atomic_store(&s->got, (int64_t)off);
        if (s->slow && k % 32 == 0)
            gmp_sleep(100 * US);
    }
    G_CHECK(gmp_close(s->rfd) == 0);
    atomic_fetch_add(&s->done, 1);
}

static void stream_writer(void *arg)
{
    struct stream *s = arg;
    uint8_t buf[6000];
    uint64_t off = 0;
    unsigned k = 0;
    while (off < s->total) {
        size_t n = 1 + (k++ * 1237u) % sizeof buf;
        if (n > s->total - off)
            n = (size_t)(s->total - off);
        for (size_t i = 0; i < n; i++)
            buf[i] = pat(off + i, s->seed);
        ssize_t w = gmp_write(s->wfd, buf, n);
        G_CHECK(w == (ssize_t)n);
        if (w != (ssize_t)n)
            break;
        off += n;
        atomic_store(&s->wrote, (int64_t)off);
        if (k % 16 == 0)
            gmp_yield();
    }
    G_CHECK(gmp_close(s->wfd) == 0);
    atomic_fetch_add(&s->done, 1);
}

static struct stream st1;

/* A reader (goroutine or plain thread) parks on an empty pipe or
 * socketpair; only then does a writer (goroutine or plain thread) start.
 * The reader gets every byte in order, then 0 once the writer closed. */
static void test_netpoll_reader_parks_then_reads_all_then_eof(void **state)
{
    bad_reset();
    uint64_t total = H_SLOW ? 64 * 1024 : 512 * 1024;
    for (int combo = 0; combo < 8; combo++) {
        int kind = combo & 1;
        bool rthread = combo & 2, wthread = combo & 4;
        int fd[2];
        struct runner rr, rw;
        mkstream(kind, fd);
        stream_reset(&st1, fd, total, (unsigned)combo * 17u);
        run_as(&rr, rthread, stream_reader, &st1);
        assert_int_equal(h_wait(&st1.reading, 1), 0);
        assert_int_equal(h_still(), 0);     /* the reader is parked */
        assert_int_equal(atomic_load(&st1.got), 0);
        assert_int_equal(atomic_load(&st1.done), 0);
        run_as(&rw, wthread, stream_writer, &st1);
        assert_int_equal(h_wait(&st1.done, 2), 0);
        run_join(&rr);
        run_join(&rw);
        assert_int_equal(atomic_load(&st1.bad), 0);
        assert_int_equal(atomic_load(&st1.wrote), (int64_t)total);
        assert_int_equal(atomic_load(&st1.got), (int64_t)total);
        assert_int_equal(atomic_load(&st1.eof), 1);
    }
    h_assert_quiet_fds();
}

/* Many pipes and socketpairs at once, each with a reader and a writer
 * goroutine: every stream exact. */
#define MANY_STREAMS 64

static struct stream sts[MANY_STREAMS];

static void test_netpoll_many_streams_at_once(void **state)
{
    bad_reset();
    int n = H_SLOW ? 16 : MANY_STREAMS;
    uint64_t total = H_SLOW ? 8 * 1024 : 48 * 1024;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            int fd[2];
            mkstream(i & 1, fd);
            stream_reset(&sts[i], fd, total + (uint64_t)i * 101,
                         (unsigned)(i * 7 + round));
            assert_int_equal(gmp_go(stream_reader, &sts[i]), 0);
        }
        for (int i = 0; i < n; i++)
            assert_int_equal(gmp_go(stream_writer, &sts[i]), 0);
        for (int i = 0; i < n; i++) {
            assert_int_equal(h_wait(&sts[i].done, 2), 0);
            assert_int_equal(atomic_load(&sts[i].bad), 0);
            assert_int_equal(atomic_load(&sts[i].got),
                             (int64_t)sts[i].total);
            assert_int_equal(atomic_load(&sts[i].eof), 1);
        }
    }
    h_assert_quiet_fds();
}

/* ---- A large write into a slowly drained pipe --------------------------- */

static struct {
    int wfd;
    const uint8_t *buf;
    size_t n;
    _Atomic int64_t ret, done;
} big;

static void big_writer(void *arg)
{
    (void)arg;
    atomic_store(&big.ret, gmp_write(big.wfd, big.buf, big.n));
    G_CHECK(gmp_close(big.wfd) == 0);
    atomic_fetch_add(&big.done, 1);
}

/* One gmp_write of several MB into a pipe of one page, read in small
 * pieces by a reader that sleeps every 32 reads: the write parks many
 * times and returns the full length; the reader gets it all, in order. */
static void test_netpoll_large_write_returns_full_length(void **state)
{
    bad_reset();
    size_t n = H_SLOW ? (size_t)1 << 20 : (size_t)8 << 20;
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    for (int round = 0; round < 3; round++) {
        int fd[2];
        struct runner rr, rw;
        size_t len = round ? n / 2 : n;
        unsigned seed = 99u + (unsigned)round;
        for (size_t i = 0; i < len; i++)
            buf[i] = pat(i, seed);
        mkstream(0, fd);
        /* One page: the writer parks about every 4 KiB. */
        assert_true(fcntl(fd[1], F_SETPIPE_SZ, 4096) >= 4096);
        stream_reset(&st1, fd, len, seed);
        st1.slow = 1;
        big.wfd = fd[1];
        big.buf = buf;
        big.n = len;
        atomic_store(&big.ret, 0);
        atomic_store(&big.done, 0);
        run_as(&rr, round == 2, stream_reader, &st1);
        run_as(&rw, round == 1, big_writer, NULL);
        assert_int_equal(h_wait(&big.done, 1), 0);
        assert_int_equal(h_wait(&st1.done, 1), 0);
        run_join(&rr);
        run_join(&rw);
        assert_int_equal(atomic_load(&big.ret), (int64_t)len);
        assert_int_equal(atomic_load(&st1.bad), 0);
        assert_int_equal(atomic_load(&st1.got), (int64_t)len);
        assert_int_equal(atomic_load(&st1.eof), 1);
    }
    free(buf);
    h_assert_quiet_fds();
}

/* ---- Concurrent readers and writers on one fd --------------------------- */

#define SHARE_BYTES (H_SLOW ? 20000 : 200000)
#define SHARE_READERS 5

static struct {
    int rfd, wfd;
    _Atomic int64_t hist[251];
    _Atomic int64_t total, done, bad;
} sh;

static void share_reader(void *arg)
{
    unsigned k = (unsigned)(uintptr_t)arg;
    uint8_t buf[7];
    for (;;) {
        size_t want = 1 + (k++ * 5u) % sizeof buf;
        ssize_t n = gmp_read(sh.rfd, buf, want);
        if (n <= 0) {
            if (n < 0)
                atomic_fetch_add(&sh.bad, 1);
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] < 251)
                atomic_fetch_add(&sh.hist[buf[i]], 1);
            else
                atomic_fetch_add(&sh.bad, 1);
        }
        atomic_fetch_add(&sh.total, n);
    }
    atomic_fetch_add(&sh.done, 1);
}

static void share_writer(void *arg)
{
    (void)arg;
    uint8_t buf[1000];
    for (int off = 0; off < SHARE_BYTES; off += (int)sizeof buf) {
        int n = SHARE_BYTES - off < (int)sizeof buf ? SHARE_BYTES - off
                                                    : (int)sizeof buf;
        for (int i = 0; i < n; i++)
            buf[i] = (uint8_t)((off + i) % 251);
        G_CHECK(gmp_write(sh.wfd, buf, (size_t)n) == n);
    }
    G_CHECK(gmp_close(sh.wfd) == 0);
    atomic_fetch_add(&sh.done, 1);
}

/* Several readers (goroutines and a plain thread) on one pipe or
 * socketpair, reading a few bytes at a time: together they read every
 * byte exactly once (the histogram of values is exact), and all see 0
 * once the writer closed. */
static void test_netpoll_concurrent_readers_share_bytes(void **state)
{
    bad_reset();
    for (int kind = 0; kind < 2; kind++) {
        int fd[2];
        struct runner r[SHARE_READERS];
        mkstream(kind, fd);
        sh.rfd = fd[0];
        sh.wfd = fd[1];
        for (int v = 0; v < 251; v++)
            atomic_store(&sh.hist[v], 0);
        atomic_store(&sh.total, 0);
        atomic_store(&sh.done, 0);
        atomic_store(&sh.bad, 0);
        for (int i = 0; i < SHARE_READERS; i++)
            run_as(&r[i], i == 0, share_reader, (void *)(uintptr_t)i);
        assert_int_equal(gmp_go(share_writer, NULL), 0);
        assert_int_equal(h_wait(&sh.done, SHARE_READERS + 1), 0);
        for (int i = 0; i < SHARE_READERS; i++)
            run_join(&r[i]);
        assert_int_equal(atomic_load(&sh.bad), 0);
        assert_int_equal(atomic_load(&sh.total), SHARE_BYTES);
        for (int v = 0; v < 251; v++) {
            int64_t want = SHARE_BYTES / 251 + (v < SHARE_BYTES % 251);
            assert_int_equal(atomic_load(&sh.hist[v]), want);
        }
        assert_int_equal(gmp_close(fd[0]), 0);
    }
    h_assert_quiet_fds();
}

/* Readers that got EAGAIN at the same moment and have not parked yet
 * when the fd's only event (here: the writer's close) comes: the event
 * finds nobody parked, and each of them must still notice it. Many small
 * rounds, each ending in one such event. */
#define EOF_READERS 5
#define EOF_ROUNDS  (H_SLOW ? 60 : 400)

static struct {
    int rfd, wfd;
    _Atomic int64_t got, done, bad;
} ev1;

static void eof_reader(void *arg)
{
    (void)arg;
    char c;
    ssize_t n;
    while ((n = gmp_read(ev1.rfd, &c, 1)) == 1)
        atomic_fetch_add(&ev1.got, 1);
    if (n != 0)
        atomic_fetch_add(&ev1.bad, 1);
    atomic_fetch_add(&ev1.done, 1);
}

static void eof_writer(void *arg)
{
    int bytes = (int)(intptr_t)arg;
    for (int i = 0; i < bytes; i++) {
        G_CHECK(gmp_write(ev1.wfd, "x", 1) == 1);
        gmp_yield();
    }
    G_CHECK(gmp_close(ev1.wfd) == 0);
    atomic_fetch_add(&ev1.done, 1);
}

static void test_netpoll_every_reader_sees_the_last_event(void **state)
{
    bad_reset();
    for (int round = 0; round < EOF_ROUNDS; round++) {
        int fd[2];
        struct runner r[EOF_READERS];
        mkstream(round & 1, fd);
        ev1.rfd = fd[0];
        ev1.wfd = fd[1];
        atomic_store(&ev1.got, 0);
        atomic_store(&ev1.done, 0);
        atomic_store(&ev1.bad, 0);
        for (int i = 0; i < EOF_READERS; i++)
            run_as(&r[i], i == 0 && round % 4 < 2, eof_reader, NULL);
        int bytes = round % 3;
        assert_int_equal(gmp_go(eof_writer, (void *)(intptr_t)bytes), 0);
        assert_int_equal(h_wait(&ev1.done, EOF_READERS + 1), 0);
        for (int i = 0; i < EOF_READERS; i++)
            run_join(&r[i]);
        assert_int_equal(atomic_load(&ev1.bad), 0);
        assert_int_equal(atomic_load(&ev1.got), bytes);
        assert_int_equal(gmp_close(fd[0]), 0);
    }
    h_assert_quiet_fds();
}

#define TURN_WRITERS 4
#define TURN_BLOCKS  6
#define TURN_BLOCK   20000          /* > PIPE_BUF: the kernel may split it */

static struct {
    int wfd;
    _Atomic int64_t done;
} tw;

static void turn_writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    static uint8_t blocks[TURN_WRITERS][TURN_BLOCK];
    memset(blocks[w], 'a' + w, TURN_BLOCK);
    for (int b = 0; b < TURN_BLOCKS; b++) {
        G_CHECK(gmp_write(tw.wfd, blocks[w], TURN_BLOCK) == TURN_BLOCK);
        if (b & 1)
            gmp_yield();
    }
    atomic_fetch_add(&tw.done, 1);
}

/* Writers (goroutines and a plain thread) write 20,000-byte blocks of
 * their own letter into one small pipe at once: writes take turns, so the
 * stream is whole blocks, TURN_BLOCKS of each letter (Go's Write holds
 * the fd's write lock for the whole call). */
static void test_netpoll_concurrent_writers_take_turns(void **state)
{
    bad_reset();
    size_t total = (size_t)TURN_WRITERS * TURN_BLOCKS * TURN_BLOCK;
    uint8_t *all = malloc(total);
    assert_non_null(all);
    int fd[2];
    struct runner r[TURN_WRITERS];
    mkstream(0, fd);
    assert_true(fcntl(fd[1], F_SETPIPE_SZ, 4096) >= 4096);
    tw.wfd = fd[1];
    atomic_store(&tw.done, 0);
    for (int w = 0; w < TURN_WRITERS; w++)
        run_as(&r[w], w == 0, turn_writer, (void *)(intptr_t)w);
    size_t got = 0;
    while (got < total) {                   /* the test thread reads */
        ssize_t n = gmp_read(fd[0], all + got, total - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_int_equal(h_wait(&tw.done, TURN_WRITERS), 0);
    for (int w = 0; w < TURN_WRITERS; w++)
        run_join(&r[w]);
    int count[TURN_WRITERS] = {0};
    for (size_t b = 0; b < total / TURN_BLOCK; b++) {
        const uint8_t *p = all + b * TURN_BLOCK;
        int w = p[0] - 'a';
        assert_true(w >= 0 && w < TURN_WRITERS);
        for (size_t i = 1; i < TURN_BLOCK; i++)
            if (p[i] != p[0]) {
                print_error("block %zu: byte %zu is '%c' in a block of '%c'\n",
                            b, i, p[i], p[0]);
                fail();
            }
        count[w]++;
    }
    for (int w = 0; w < TURN_WRITERS; w++)
        assert_int_equal(count[w], TURN_BLOCKS);
    free(all);
    assert_int_equal(gmp_close(fd[1]), 0);
    assert_int_equal(gmp_close(fd[0]), 0);
    h_assert_quiet_fds();
}

/* ---- gmp_close wakes whoever is parked ---------------------------------- */

#define CW_MAX 8

/* One party parked on cw.fd: what it calls, where, and what it got. */
struct cw_party {
    void (*fn)(struct cw_party *);
    bool thread;
    int64_t tmo_ms;                 /* gmp_fd_wait: 0 waits for ever */
    _Atomic int64_t rc;
};

static struct {
    int fd;
    _Atomic int64_t in, done;
} cw;

static void cw_reader(struct cw_party *p)
{
    char b;
    atomic_fetch_add(&cw.in, 1);
    atomic_store(&p->rc, gmp_read(cw.fd, &b, 1));
}

static void cw_wait_in(struct cw_party *p)
{
    atomic_fetch_add(&cw.in, 1);
    atomic_store(&p->rc, gmp_fd_wait(cw.fd, GMP_POLLIN,
                                     p->tmo_ms ? p->tmo_ms * MS : GMP_FOREVER));
}

static void cw_wait_out(struct cw_party *p)
{
    atomic_fetch_add(&cw.in, 1);
    atomic_store(&p->rc, gmp_fd_wait(cw.fd, GMP_POLLOUT, GMP_FOREVER));
}

static void cw_writer(struct cw_party *p)
{
    size_t n = 1 << 20;
    uint8_t *buf = calloc(1, n);
    atomic_fetch_add(&cw.in, 1);
    atomic_store(&p->rc, buf ? gmp_write(cw.fd, buf, n) : -12345);
    free(buf);
}

static void cw_accepter(struct cw_party *p)
{
    atomic_fetch_add(&cw.in, 1);
    int r = gmp_accept(cw.fd, NULL, NULL);
    if (r >= 0)
        gmp_close(r);
    atomic_store(&p->rc, r);
}

static void cw_run(void *arg)
{
    struct cw_party *p = arg;
    p->fn(p);
    atomic_fetch_add(&cw.done, 1);
}

static void cw_closer(void *arg)
{
    (void)arg;
    G_CHECK(gmp_close(cw.fd) == 0);
}

/* Starts the parties on cw.fd, waits until all are parked, closes the fd
 * (from the test thread, or from a goroutine), and expects every party
 * to return GMP_EBADF. */
static void close_wakes(struct cw_party *ps, int n, bool by_goroutine)
{
    struct runner r[CW_MAX];
    atomic_store(&cw.in, 0);
    atomic_store(&cw.done, 0);
    for (int i = 0; i < n; i++) {
        atomic_store(&ps[i].rc, 12345);
        run_as(&r[i], ps[i].thread, cw_run, &ps[i]);
    }
    assert_int_equal(h_wait(&cw.in, n), 0);
    assert_int_equal(h_still(), 0);         /* every one of them parked */
    for (int i = 0; i < n; i++)
        if (atomic_load(&ps[i].rc) != 12345)
            print_error("party %d (%s) returned %lld before the close\n", i,
                        ps[i].thread ? "thread" : "goroutine",
                        (long long)atomic_load(&ps[i].rc));
    assert_int_equal(atomic_load(&cw.done), 0);
    if (by_goroutine) {
        assert_int_equal(gmp_go(cw_closer, NULL), 0);
    } else {
        assert_int_equal(gmp_close(cw.fd), 0);
        /* Closed, and nothing in this process opened an fd since. */
        char b;
        assert_int_equal(gmp_read(cw.fd, &b, 1), GMP_EBADF);
        assert_int_equal(gmp_close(cw.fd), GMP_EBADF);
    }
    assert_int_equal(h_wait(&cw.done, n), 0);
    for (int i = 0; i < n; i++) {
        run_join(&r[i]);
        if (atomic_load(&ps[i].rc) != GMP_EBADF)
            print_error("party %d (%s) returned %lld\n", i,
                        ps[i].thread ? "thread" : "goroutine",
                        (long long)atomic_load(&ps[i].rc));
        assert_int_equal(atomic_load(&ps[i].rc), GMP_EBADF);
    }
}

/* Fills a pipe through its write end, not yet used by any gmp_ call. */
static void fill_pipe(int wfd)
{
    static const char zeros[4096];
    int fl = fcntl(wfd, F_GETFL);
    assert_true(fl >= 0);
    assert_int_equal(fcntl(wfd, F_SETFL, fl | O_NONBLOCK), 0);
    for (;;) {
        ssize_t w = write(wfd, zeros, sizeof zeros);
        if (w < 0) {
            assert_int_equal(errno, EAGAIN);
            break;
        }
    }
}

static struct cw_party cw_readers[] = {
    {cw_reader, false, 0, 0}, {cw_reader, false, 0, 0},
    {cw_reader, false, 0, 0}, {cw_reader, true, 0, 0},
};
static struct cw_party cw_waiters[] = {
    {cw_wait_in, false, 0, 0}, {cw_wait_in, false, 30000, 0},
    {cw_wait_in, true, 0, 0},  {cw_wait_in, true, 30000, 0},
    {cw_reader, false, 0, 0},
};
static struct cw_party cw_writers[] = {
    {cw_writer, false, 0, 0},   {cw_writer, true, 0, 0},
    {cw_wait_out, false, 0, 0}, {cw_wait_out, true, 0, 0},
};
static struct cw_party cw_accepters[] = {
    {cw_accepter, false, 0, 0}, {cw_accepter, true, 0, 0},
    {cw_accepter, false, 0, 0},
};

static void test_netpoll_close_wakes_parked_with_ebadf(void **state)
{
    bad_reset();
    for (int by_g = 0; by_g < 2; by_g++) {
        int fd[2];
        /* Readers on an empty pipe: goroutines and a plain thread. */
        mkstream(0, fd);
        cw.fd = fd[0];
        close_wakes(cw_readers, 4, by_g);
        assert_int_equal(gmp_close(fd[1]), 0);

        /* gmp_fd_wait for input, without and with a (long) timeout, and
         * a reader, on a socketpair. */
        mkstream(1, fd);
        cw.fd = fd[0];
        close_wakes(cw_waiters, 5, by_g);
        assert_int_equal(gmp_close(fd[1]), 0);

        /* A writer parked on a full pipe, one waiting for its turn, and
         * waits for room. The pipe is full before any of them starts. */
        mkstream(0, fd);
        fill_pipe(fd[1]);
        cw.fd = fd[1];
        close_wakes(cw_writers, 4, by_g);
        assert_int_equal(gmp_close(fd[0]), 0);

        /* Accepts on a listener nobody connects to. */
        struct sockaddr_in sa;
        cw.fd = mklistener(&sa);
        close_wakes(cw_accepters, 3, by_g);
    }
    h_assert_quiet_fds();
}

/* ---- gmp_fd_wait -------------------------------------------------------- */

static void fd_wait_checks(void *arg)
{
    (void)arg;
    static const int64_t tmos[] = {1, 1000, 999999, 2000001};
    int p[2];
    char buf[8];
    if (pipe2(p, O_CLOEXEC) != 0) {
        G_CHECK(false);        /* pipe */
        return;
    }
    /* Empty: times out, no earlier than asked; polls say so at once. */
    for (int t = 0; t < 4; t++) {
        struct span s = span_start();
        G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, tmos[t]) == GMP_ETIMEDOUT);
        G_CHECK(span_at_least(s, tmos[t]));
    }
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, 0) == GMP_ETIMEDOUT);
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, -7) == GMP_ETIMEDOUT);
    /* An empty pipe's write end has room. */
    G_CHECK(gmp_fd_wait(p[1], GMP_POLLOUT, 0) == GMP_POLLOUT);
    G_CHECK(gmp_fd_wait(p[1], GMP_POLLOUT, GMP_FOREVER) == GMP_POLLOUT);
    G_CHECK(gmp_fd_wait(p[1], GMP_POLLOUT, 5 * MS) == GMP_POLLOUT);
    /* Data: ready for input, and only that among what was asked. */
    G_CHECK(gmp_write(p[1], "abc", 3) == 3);
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, 0) == GMP_POLLIN);
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, GMP_FOREVER) == GMP_POLLIN);
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, 20000 * MS) == GMP_POLLIN);
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN | GMP_POLLOUT, 0) == GMP_POLLIN);
    /* Still ready until read, though the poller only reports edges. */
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, 5 * MS) == GMP_POLLIN);
    G_CHECK(gmp_read(p[0], buf, sizeof buf) == 3);
    G_CHECK(memcmp(buf, "abc", 3) == 0);
    /* Drained: not ready again. */
    struct span s = span_start();
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, 2 * MS) == GMP_ETIMEDOUT);
    G_CHECK(span_at_least(s, 2 * MS));
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, 0) == GMP_ETIMEDOUT);
    /* No events: GMP_EINVAL at once, whatever the timeout. */
    G_CHECK(gmp_fd_wait(p[0], 0, 0) == GMP_EINVAL);
    G_CHECK(gmp_fd_wait(p[0], 0, 5 * MS) == GMP_EINVAL);
    G_CHECK(gmp_fd_wait(p[0], 0, GMP_FOREVER) == GMP_EINVAL);
    /* Hang-up: ready for everything asked. */
    G_CHECK(gmp_close(p[1]) == 0);
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN, GMP_FOREVER) == GMP_POLLIN);
    G_CHECK(gmp_fd_wait(p[0], GMP_POLLIN | GMP_POLLOUT, 0) ==
            (GMP_POLLIN | GMP_POLLOUT));
    G_CHECK(gmp_read(p[0], buf, sizeof buf) == 0);
    G_CHECK(gmp_close(p[0]) == 0);
}

/* The checks above in goroutines, on a plain thread and on the test
 * thread, all at once. */
static void test_netpoll_fd_wait_timeouts_and_readiness(void **state)
{
    bad_reset();
    assert_int_equal(h_everywhere(fd_wait_checks, NULL, 3), 0);
    h_assert_quiet_fds();
}

static struct {
    int fd;
    int events;
    int64_t tmo;
    _Atomic int64_t in, done, rc;
} pw;

static void pw_waiter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&pw.in, 1);
    atomic_store(&pw.rc, gmp_fd_wait(pw.fd, pw.events, pw.tmo));
    atomic_fetch_add(&pw.done, 1);
}

/* A gmp_fd_wait parked for input (no timeout, or a long one) returns
 * GMP_POLLIN once data is written; one parked for room on a full pipe
 * returns GMP_POLLOUT once it is drained. */
static void test_netpoll_fd_wait_woken_by_readiness(void **state)
{
    bad_reset();
    for (int i = 0; i < 8; i++) {
        bool thread = i & 1;
        int64_t tmo = (i & 2) ? 20000 * MS : GMP_FOREVER;
        int fd[2];
        struct runner r;
        char buf[4096];
        mkstream(i & 4 ? 1 : 0, fd);

        pw.fd = fd[0];
        pw.events = GMP_POLLIN;
        pw.tmo = tmo;
        atomic_store(&pw.in, 0);
        atomic_store(&pw.done, 0);
        atomic_store(&pw.rc, 12345);
        run_as(&r, thread, pw_waiter, NULL);
        assert_int_equal(h_wait(&pw.in, 1), 0);
        assert_int_equal(h_still(), 0);
        assert_int_equal(atomic_load(&pw.done), 0);
        assert_int_equal(gmp_write(fd[1], "x", 1), 1);
        assert_int_equal(h_wait(&pw.done, 1), 0);
        run_join(&r);
        assert_int_equal(atomic_load(&pw.rc), GMP_POLLIN);
        assert_int_equal(gmp_read(fd[0], buf, sizeof buf), 1);

        /* Fill the write end (non-blocking since its first gmp_ call). */
        assert_true(fcntl(fd[1], F_GETFL) & O_NONBLOCK);
        size_t filled = 0;
        for (;;) {
            ssize_t w = write(fd[1], buf, sizeof buf);
            if (w < 0) {
                assert_int_equal(errno, EAGAIN);
                break;
            }
            filled += (size_t)w;
        }
        assert_true(filled > 0);
        pw.fd = fd[1];
        pw.events = GMP_POLLOUT;
        atomic_store(&pw.in, 0);
        atomic_store(&pw.done, 0);
        atomic_store(&pw.rc, 12345);
        run_as(&r, thread, pw_waiter, NULL);
        assert_int_equal(h_wait(&pw.in, 1), 0);
        assert_int_equal(h_still(), 0);
        assert_int_equal(atomic_load(&pw.done), 0);
        while (filled > 0) {
            ssize_t n = gmp_read(fd[0], buf, sizeof buf);
            assert_true(n > 0);
            filled -= (size_t)n;
        }
        assert_int_equal(h_wait(&pw.done, 1), 0);
        run_join(&r);
        assert_int_equal(atomic_load(&pw.rc), GMP_POLLOUT);
        assert_int_equal(gmp_close(fd[0]), 0);
        assert_int_equal(gmp_close(fd[1]), 0);
    }
    h_assert_quiet_fds();
}

/* ---- TCP over loopback -------------------------------------------------- */

#define TCP_CLIENTS 8
#define TCP_MSGS    (H_SLOW ? 20 : 200)

static struct {
    int lfd;
    struct sockaddr_in sa;
    _Atomic int64_t accepted, echoed_bytes, conns_done, clients_done;
    _Atomic int64_t server_done, accept_in;
} tcp;

static void tcp_echo(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    for (;;) {
        ssize_t n = gmp_read(fd, buf, sizeof buf);
        G_CHECK(n >= 0);
        if (n <= 0)
            break;
        G_CHECK(gmp_write(fd, buf, (size_t)n) == n);
        atomic_fetch_add(&tcp.echoed_bytes, n);
    }
    G_CHECK(gmp_close(fd) == 0);
    atomic_fetch_add(&tcp.conns_done, 1);
}

static void tcp_server(void *arg)
{
    int n = (int)(intptr_t)arg;
    for (int i = 0; i < n; i++) {
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        memset(&peer, 0, sizeof peer);
        atomic_store(&tcp.accept_in, 1);
        int fd = gmp_accept(tcp.lfd, (struct sockaddr *)&peer, &len);
        G_CHECK(fd >= 0);
        if (fd < 0)
            break;
        G_CHECK(len == sizeof peer);
        G_CHECK(peer.sin_family == AF_INET);
        G_CHECK(peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
        /* gmprt.h: the new fd is non-blocking and close-on-exec. */
        G_CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
        G_CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        atomic_fetch_add(&tcp.accepted, 1);
        G_CHECK(gmp_go(tcp_echo, (void *)(intptr_t)fd) == 0);
    }
    atomic_fetch_add(&tcp.server_done, 1);
}

static void tcp_client(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint8_t msg[3000], back[3000];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    G_CHECK(fd >= 0);
    if (fd < 0)
        goto out;
    G_CHECK(gmp_connect(fd, (struct sockaddr *)&tcp.sa, sizeof tcp.sa) == 0);
    for (int m = 0; m < TCP_MSGS; m++) {
        size_t len = 1 + ((size_t)m * 37u + id * 11u) % sizeof msg;
        for (size_t i = 0; i < len; i++)
            msg[i] = pat(i + (size_t)m * 3000u, id);
        G_CHECK(gmp_write(fd, msg, len) == (ssize_t)len);
        size_t got = 0;
        while (got < len) {
            ssize_t n = gmp_read(fd, back + got, len - got);
            G_CHECK(n > 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        G_CHECK(got == len && memcmp(msg, back, len) == 0);
    }
    /* Half-close: the echo goroutine sees EOF, closes, and we see 0. */
    G_CHECK(shutdown(fd, SHUT_WR) == 0);
    char b;
    G_CHECK(gmp_read(fd, &b, 1) == 0);
    G_CHECK(gmp_close(fd) == 0);
out:
    atomic_fetch_add(&tcp.clients_done, 1);
}

/* Several acceptors (goroutines and a plain thread) on one listener,
 * parked or about to park, while a burst of connections arrives: every
 * connection is accepted, each by exactly one of them. Acceptors that got
 * EAGAIN together race the burst's events as the readers above race an
 * EOF. */
#define ACC_N      4
#define ACC_ROUNDS (H_SLOW ? 40 : 300)

static struct {
    int lfd;
    _Atomic int64_t accepted, done;
} acc;

static void acc_one(void *arg)
{
    (void)arg;
    int fd = gmp_accept(acc.lfd, NULL, NULL);
    G_CHECK(fd >= 0);
    if (fd >= 0) {
        atomic_fetch_add(&acc.accepted, 1);
        G_CHECK(gmp_close(fd) == 0);
    }
    atomic_fetch_add(&acc.done, 1);
}

static void test_netpoll_acceptors_share_a_burst(void **state)
{
    bad_reset();
    struct sockaddr_in sa;
    acc.lfd = mklistener(&sa);
    for (int round = 0; round < ACC_ROUNDS; round++) {
        struct runner r[ACC_N];
        int c[ACC_N];
        atomic_store(&acc.accepted, 0);
        atomic_store(&acc.done, 0);
        for (int i = 0; i < ACC_N; i++)
            run_as(&r[i], i == 0 && round % 4 < 2, acc_one, NULL);
        /* Plain blocking connects: the kernel completes them from the
         * listen backlog, whoever accepts. */
        for (int i = 0; i < ACC_N; i++) {
            c[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            assert_true(c[i] >= 0);
            assert_int_equal(connect(c[i], (struct sockaddr *)&sa,
                                     sizeof sa), 0);
        }
        assert_int_equal(h_wait(&acc.done, ACC_N), 0);
        for (int i = 0; i < ACC_N; i++) {
            run_join(&r[i]);
            close(c[i]);
        }
        assert_int_equal(atomic_load(&acc.accepted), ACC_N);
    }
    assert_int_equal(gmp_close(acc.lfd), 0);
    h_assert_quiet_fds();
}

/* A server goroutine parks in gmp_accept before any client exists;
 * clients (goroutines and plain threads) connect, each echoes a few
 * hundred messages of odd lengths, half-closes and sees EOF; the server's
 * per-connection goroutines see EOF and close. */
static void test_netpoll_tcp_echo_round_trips(void **state)
{
    bad_reset();
    tcp.lfd = mklistener(&tcp.sa);
    atomic_store(&tcp.accepted, 0);
    atomic_store(&tcp.echoed_bytes, 0);
    atomic_store(&tcp.conns_done, 0);
    atomic_store(&tcp.clients_done, 0);
    atomic_store(&tcp.server_done, 0);
    atomic_store(&tcp.accept_in, 0);
    assert_int_equal(gmp_go(tcp_server, (void *)(intptr_t)TCP_CLIENTS), 0);
    assert_int_equal(h_wait(&tcp.accept_in, 1), 0);
    assert_int_equal(h_still(), 0);         /* parked in gmp_accept */
    assert_int_equal(atomic_load(&tcp.accepted), 0);
    struct runner r[TCP_CLIENTS];
    for (int i = 0; i < TCP_CLIENTS; i++)
        run_as(&r[i], i % 4 == 3, tcp_client, (void *)(uintptr_t)i);
    assert_int_equal(h_wait(&tcp.clients_done, TCP_CLIENTS), 0);
    assert_int_equal(h_wait(&tcp.conns_done, TCP_CLIENTS), 0);
    assert_int_equal(h_wait(&tcp.server_done, 1), 0);
    for (int i = 0; i < TCP_CLIENTS; i++)
        run_join(&r[i]);
    assert_int_equal(atomic_load(&tcp.accepted), TCP_CLIENTS);
    int64_t want = 0;
    for (int i = 0; i < TCP_CLIENTS; i++)
        for (int m = 0; m < TCP_MSGS; m++)
            want += 1 + ((int64_t)m * 37 + i * 11) % 3000;
    assert_int_equal(atomic_load(&tcp.echoed_bytes), want);
    assert_int_equal(gmp_close(tcp.lfd), 0);
    h_assert_quiet_fds();
}

/* After a short read a TCP socket's next read waits for an event instead
 * of making a call that would fail with EAGAIN (netpoll.h,
 * gmp__pd_read_skip). A TCP read also comes up short with more to read,
 * and no event to follow: at an urgent byte, and at the peer's FIN. Each
 * case is staged with every byte there and the socket's event already
 * collected, so that only the urgent and hang-up events stand between a
 * skip and a reader parked for ever beside data or EOF: the reader
 * registers the socket (ready, so the poller has its event queued), then
 * parks on an empty pipe; once the process is still, an M sits in the
 * poller, which it cannot while an event is queued. Readers are
 * goroutines and plain threads. */
static struct {
    int fd, gate[2];                /* the socket; the pipe to park on */
    char got[2][16];
    ssize_t n[2];
    _Atomic int64_t parking, done;
} shortr;

static void short_reader(void *arg)
{
    (void)arg;
    char b;
    G_CHECK(gmp_fd_wait(shortr.fd, GMP_POLLIN, GMP_FOREVER) == GMP_POLLIN);
    atomic_store(&shortr.parking, 1);
    G_CHECK(gmp_read(shortr.gate[0], &b, 1) == 1);
    for (int i = 0; i < 2; i++)
        shortr.n[i] = gmp_read(shortr.fd, shortr.got[i],
                               sizeof shortr.got[i]);
    atomic_fetch_add(&shortr.done, 1);
}

static void short_read_case(int lfd, const struct sockaddr_in *sa,
                            bool urgent, bool thread)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c >= 0);
    assert_int_equal(connect(c, (const struct sockaddr *)sa, sizeof *sa), 0);
    shortr.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    assert_true(shortr.fd >= 0);
    assert_int_equal(pipe2(shortr.gate, O_CLOEXEC), 0);
    assert_int_equal(send(c, "abc", 3, 0), 3);
    if (urgent) {
        assert_int_equal(send(c, "X", 1, MSG_OOB), 1);
        assert_int_equal(send(c, "def", 3, 0), 3);
    } else {
        assert_int_equal(shutdown(c, SHUT_WR), 0);
    }
    memset(&shortr.got, 0, sizeof shortr.got);
    atomic_store(&shortr.parking, 0);
    atomic_store(&shortr.done, 0);
    struct runner r;
    run_as(&r, thread, short_reader, NULL);
    assert_int_equal(h_wait(&shortr.parking, 1), 0);
    assert_int_equal(h_still(), 0);         /* parked; events collected */
    assert_int_equal(write(shortr.gate[1], "g", 1), 1);
    int rc = h_wait(&shortr.done, 1);
    if (rc != 0)
        gmp_close(shortr.fd);       /* wakes the parked reader */
    run_join(&r);
    assert_int_equal(rc, 0);
    assert_int_equal(shortr.n[0], 3);
    assert_string_equal(shortr.got[0], "abc");
    if (urgent) {
        assert_int_equal(shortr.n[1], 3);   /* the urgent byte is skipped */
        assert_string_equal(shortr.got[1], "def");
    } else {
        assert_int_equal(shortr.n[1], 0);
    }
    assert_int_equal(gmp_close(shortr.fd), 0);
    assert_int_equal(gmp_close(shortr.gate[0]), 0);
    close(shortr.gate[1]);
    close(c);
}

static void test_netpoll_short_tcp_read_at_urgent_byte_or_fin(void **state)
{
    bad_reset();
    struct sockaddr_in sa;
    int lfd = mklistener(&sa);
    for (int i = 0; i < 4; i++)
        short_read_case(lfd, &sa, i & 1, i & 2);
    close(lfd);
    h_assert_quiet_fds();
}

static struct {
    _Atomic int64_t rc, done;
} refused;

static void refused_fn(void *arg)
{
    const struct sockaddr_in *sa = arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    atomic_store(&refused.rc, gmp_connect(fd, (const struct sockaddr *)sa,
                                          sizeof *sa));
    G_CHECK(gmp_close(fd) == 0);
    atomic_fetch_add(&refused.done, 1);
}

/* A port bound by a socket that does not listen refuses connections:
 * gmp_connect returns the socket's error, -ECONNREFUSED. */
static void test_netpoll_connect_refused(void **state)
{
    bad_reset();
    int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(holder >= 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(holder, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(holder, (struct sockaddr *)&sa, &len), 0);
    for (int i = 0; i < 4; i++) {
        struct runner r;
        atomic_store(&refused.rc, 12345);
        atomic_store(&refused.done, 0);
        if (i == 3) {
            refused_fn(&sa);                /* the test thread */
        } else {
            run_as(&r, i == 2, refused_fn, &sa);
            assert_int_equal(h_wait(&refused.done, 1), 0);
            run_join(&r);
        }
        assert_int_equal(atomic_load(&refused.rc), -ECONNREFUSED);
    }
    assert_int_equal(gmp_close(holder), 0);
    h_assert_quiet_fds();
}

/* ---- Plain threads ------------------------------------------------------ */

static struct {
    int wfd;
    int32_t tid;
    _Atomic int64_t done;
} ptw;

static void ptw_writer(void *arg)
{
    (void)arg;
    /* Until the test thread sleeps in the kernel (in its gmp_read; any
     * other sleep only makes the check below weaker, not wrong). */
    while (h_thread_state(ptw.tid) != 'S')
        gmp_sleep(50 * US);
    G_CHECK(gmp_write(ptw.wfd, "hello", 5) == 5);
    atomic_fetch_add(&ptw.done, 1);
}

/* The test thread, a plain thread, blocks in gmp_read on an empty pipe
 * and socketpair until a goroutine writes; likewise in gmp_accept. */
static void test_netpoll_thread_blocks_until_goroutine_writes(void **state)
{
    bad_reset();
    for (int kind = 0; kind < 2; kind++) {
        int fd[2];
        char buf[16];
        mkstream(kind, fd);
        ptw.wfd = fd[1];
        ptw.tid = h_tid();
        atomic_store(&ptw.done, 0);
        assert_int_equal(gmp_go(ptw_writer, NULL), 0);
        size_t got = 0;
        while (got < 5) {
            ssize_t n = gmp_read(fd[0], buf + got, sizeof buf - got);
            assert_true(n > 0);
            got += (size_t)n;
        }
        assert_int_equal(got, 5);
        assert_memory_equal(buf, "hello", 5);
        assert_int_equal(h_wait(&ptw.done, 1), 0);
        assert_int_equal(gmp_close(fd[1]), 0);
        assert_int_equal(gmp_read(fd[0], buf, sizeof buf), 0);
        assert_int_equal(gmp_close(fd[0]), 0);
    }
    /* gmp_accept on the test thread, a goroutine connecting. */
    atomic_store(&tcp.clients_done, 0);
    tcp.lfd = mklistener(&tcp.sa);
    assert_int_equal(gmp_go(tcp_client, (void *)(uintptr_t)77), 0);
    int c = gmp_accept(tcp.lfd, NULL, NULL);
    assert_true(c >= 0);
    atomic_store(&tcp.conns_done, 0);
    atomic_store(&tcp.echoed_bytes, 0);
    tcp_echo((void *)(intptr_t)c);          /* echo on the test thread */
    assert_int_equal(h_wait(&tcp.clients_done, 1), 0);
    assert_int_equal(atomic_load(&tcp.conns_done), 1);
    assert_int_equal(gmp_close(tcp.lfd), 0);
    h_assert_quiet_fds();
}

/* ---- Files -------------------------------------------------------------- */

static _Atomic int64_t file_done;

static void file_checks(void *arg)
{
    (void)arg;
    char path[] = "/tmp/gmprt-netpoll-XXXXXX";
    int fd = mkstemp(path);
    G_CHECK(fd >= 0);
    if (fd >= 0) {
        unlink(path);
        uint8_t buf[10000], back[10000];
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = pat(i, 5);
        G_CHECK(gmp_write(fd, buf, sizeof buf) == (ssize_t)sizeof buf);
        G_CHECK(lseek(fd, 0, SEEK_SET) == 0);
        size_t got = 0;
        for (;;) {
            ssize_t n = gmp_read(fd, back + got, sizeof back - got);
            G_CHECK(n >= 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        G_CHECK(got == sizeof buf && memcmp(buf, back, sizeof buf) == 0);
        G_CHECK(gmp_read(fd, back, 1) == 0);    /* at the end */
        G_CHECK(gmp_close(fd) == 0);
    }
    int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
    G_CHECK(dn >= 0);
    if (dn >= 0) {
        char b[64];
        G_CHECK(gmp_read(dn, b, sizeof b) == 0);
        G_CHECK(gmp_write(dn, "abc", 3) == 3);
        G_CHECK(gmp_close(dn) == 0);
    }
    atomic_fetch_add(&file_done, 1);
}

/* Files that epoll refuses (a regular file) or that are always ready
 * (/dev/null) read and write through the same calls: in a goroutine, on
 * a plain thread and on the test thread, one after the other (fd numbers
 * reused at once are test_netpoll_fd_numbers_reused_at_once's). */
static void test_netpoll_regular_files_and_dev_null(void **state)
{
    bad_reset();
    atomic_store(&file_done, 0);
    struct th t;
    assert_int_equal(gmp_go(file_checks, NULL), 0);
    assert_int_equal(h_wait(&file_done, 1), 0);
    th_start(&t, file_checks, NULL);
    assert_int_equal(h_wait(&file_done, 2), 0);
    th_join(&t);
    file_checks(NULL);
    assert_int_equal(atomic_load(&file_done), 3);
    h_assert_quiet_fds();
}

/* ---- fd numbers reused at once ------------------------------------------ */

#define REUSE_ITERS (H_SLOW ? 500 : 10000)

static struct {
    _Atomic int64_t done, failed;
} reuse;

static void reuse_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < REUSE_ITERS; i++) {
        int p[2];
        char b[4];
        if (pipe2(p, O_CLOEXEC) != 0) {
            G_CHECK(false);         /* pipe */
            break;
        }
        bool ok = gmp_write(p[1], "r", 1) == 1;
        ok = gmp_read(p[0], b, sizeof b) == 1 && b[0] == 'r' && ok;
        ok = gmp_close(p[1]) == 0 && ok;
        ok = gmp_close(p[0]) == 0 && ok;
        if (!ok) {
            atomic_fetch_add(&reuse.failed, 1);
            G_CHECK(ok);
        }
    }
    atomic_fetch_add(&reuse.done, 1);
}

/* Goroutines and a plain thread open, use and close pipes as fast as they
 * can: the numbers one of them closes are at once reused by another. An
 * fd just opened works whatever its number was before (gmp_close has
 * finished with the number before another open can return it). */
static void test_netpoll_fd_numbers_reused_at_once(void **state)
{
    bad_reset();
    atomic_store(&reuse.done, 0);
    atomic_store(&reuse.failed, 0);
    struct th t[2];
    assert_int_equal(gmp_go(reuse_worker, NULL), 0);
    assert_int_equal(gmp_go(reuse_worker, NULL), 0);
    th_start(&t[0], reuse_worker, NULL);
    th_start(&t[1], reuse_worker, NULL);
    /* Not on the test thread: a worker stuck in a call shows as a
     * timed-out wait here. */
    int rc = h_wait(&reuse.done, 4);
    if (rc != 0 || atomic_load(&reuse.failed))
        print_error("%lld of %d pipe round trips failed; %lld of 4 workers "
                    "finished\n", (long long)atomic_load(&reuse.failed),
                    4 * REUSE_ITERS, (long long)atomic_load(&reuse.done));
    assert_int_equal(rc, 0);
    th_join(&t[0]);
    th_join(&t[1]);
    assert_int_equal(atomic_load(&reuse.failed), 0);
    h_assert_quiet_fds();
}

/* ---- Bad input ---------------------------------------------------------- */

/* Invalid fds only: an error, whether a runtime runs or not. */
static void bad_fds(void)
{
    char buf[8];
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(9);
    const int fds[] = {-1, -1000, INT_MIN, INT_MAX, 1 << 30};
    for (int i = 0; i < 5; i++) {
        int fd = fds[i];
        G_CHECK(gmp_read(fd, buf, 1) < 0);
        G_CHECK(gmp_write(fd, buf, 1) < 0);
        G_CHECK(gmp_accept(fd, NULL, NULL) < 0);
        G_CHECK(gmp_connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0);
        G_CHECK(gmp_fd_wait(fd, GMP_POLLIN, GMP_FOREVER) < 0);
        G_CHECK(gmp_fd_wait(fd, GMP_POLLIN | GMP_POLLOUT, 0) < 0);
        G_CHECK(gmp_fd_wait(fd, 0, 0) < 0);
        G_CHECK(gmp_close(fd) < 0);
    }
}

static void bad_input(void *arg)
{
    (void)arg;
    char buf[8];
    int p[2], sv[2];
    bad_fds();
    /* The negative errno values where the runtime runs. */
    G_CHECK(gmp_read(-1, buf, 1) == GMP_EBADF);
    G_CHECK(gmp_write(-1, buf, 1) == GMP_EBADF);
    G_CHECK(gmp_close(-1) == GMP_EBADF);
    G_CHECK(gmp_read(INT_MAX, buf, 1) == GMP_EBADF);
    G_CHECK(gmp_fd_wait(INT_MAX, GMP_POLLOUT, GMP_FOREVER) == GMP_EBADF);
    G_CHECK(gmp_close(INT_MAX) == GMP_EBADF);
    if (pipe2(p, O_CLOEXEC) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        G_CHECK(false);        /* pipe or socketpair */
        return;
    }
    /* A NULL buffer with n > 0, on an empty pipe: an error, not a wait. */
    G_CHECK(gmp_read(p[0], NULL, 5) < 0);
    G_CHECK(gmp_write(p[1], NULL, 5) < 0);
    G_CHECK(gmp_read(sv[0], NULL, 5) < 0);
    G_CHECK(gmp_write(sv[0], NULL, 5) < 0);
    /* No events, or events beyond POLLIN and POLLOUT only: GMP_EINVAL. */
    G_CHECK(gmp_fd_wait(p[0], 0, 0) == GMP_EINVAL);
    G_CHECK(gmp_fd_wait(p[0], 0, GMP_FOREVER) == GMP_EINVAL);
    G_CHECK(gmp_fd_wait(p[0], 0, 3 * MS) == GMP_EINVAL);
    /* Socket calls on what is no socket, or no listening one. */
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(9);
    G_CHECK(gmp_accept(p[0], NULL, NULL) < 0);
    G_CHECK(gmp_connect(p[1], (struct sockaddr *)&sa, sizeof sa) < 0);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    G_CHECK(s >= 0);
    G_CHECK(gmp_accept(s, NULL, NULL) < 0);                 /* not listening */
    G_CHECK(gmp_connect(s, NULL, sizeof sa) < 0);
    G_CHECK(gmp_connect(s, (struct sockaddr *)&sa, 1) < 0); /* short address */
    G_CHECK(gmp_close(s) == 0);
    /* A peer gone: writing is an error (no SIGPIPE on a socket), reading
     * gives EOF. */
    G_CHECK(gmp_close(sv[1]) == 0);
    G_CHECK(gmp_write(sv[0], "x", 1) < 0);
    G_CHECK(gmp_read(sv[0], buf, sizeof buf) == 0);
    G_CHECK(gmp_close(sv[0]) == 0);
    /* After all that the pipe still works. */
    G_CHECK(gmp_write(p[1], "q", 1) == 1);
    G_CHECK(gmp_read(p[0], buf, sizeof buf) == 1 && buf[0] == 'q');
    G_CHECK(gmp_close(p[0]) == 0);
    G_CHECK(gmp_close(p[1]) == 0);
}

/* Bad input from goroutines, a plain thread and the test thread. */
static void test_netpoll_bad_input_is_an_error(void **state)
{
    bad_reset();
    assert_int_equal(h_everywhere(bad_input, NULL, 2), 0);
    h_assert_quiet_fds();
}

/* With no runtime at all, an invalid fd is still an error, not a crash. */
static void test_netpoll_bad_fds_without_runtime(void **state)
{
    bad_reset();
    assert_int_equal(gmp_procs(), 0);
    bad_fds();
    ASSERT_NO_BAD();
}

/* The read skip (netpoll.h, gmp__pd_read_skip) is taken only while some
 * M will poll soon. While every P runs goroutines and nobody spins, only
 * sysmon polls, every 10 ms, and a reader that skipped its read waited
 * that long for data already there: with CPU-bound goroutines on every
 * P, a loopback echo served 390 round trips a second where Go's served
 * 9,000. The rule, on a scheduler and a descriptor staged by hand. */
static void test_netpoll_read_skip_only_while_someone_polls(void **state)
{
    static struct schedt s;
    static struct gmp__pd pd;
    memset(&s, 0, sizeof s);
    memset(&pd, 0, sizeof pd);
    uint64_t seq = gmp__pd_seq(&pd);
    atomic_store(&pd.shortdrains, true);
    gmp__pd_read_done(&pd, seq, 1, 64);     /* a short read */
    atomic_store(&s.lastpoll, 12345);       /* nobody in the poller */
    assert_false(gmp__pd_read_skip(&s, &pd, seq));  /* every P busy */
    atomic_store(&s.npidle, 1);
    assert_true(gmp__pd_read_skip(&s, &pd, seq));   /* an idle P polls */
    atomic_store(&s.npidle, 0);
    atomic_store(&s.nmspinning, 1);
    assert_true(gmp__pd_read_skip(&s, &pd, seq));   /* so does a spinner */
    atomic_store(&s.nmspinning, 0);
    atomic_store(&s.lastpoll, 0);
    assert_true(gmp__pd_read_skip(&s, &pd, seq));   /* an M in the poller */
    atomic_fetch_add(&pd.rseq, 1);                  /* an event since */
    assert_false(gmp__pd_read_skip(&s, &pd, gmp__pd_seq(&pd)));
    gmp__pd_read_done(&pd, gmp__pd_seq(&pd), 64, 64);   /* not short */
    assert_false(gmp__pd_read_skip(&s, &pd, gmp__pd_seq(&pd)));
}

/* A busy M's poll without blocking says that it polled (lastpoll), or
 * sysmon, seeing nobody poll for 1 ms while every P is busy, takes the
 * poller (sysmon_sleep) and the M's own polls stop while it holds it: a
 * loopback HTTP server at procs=1 then served 0.9x the requests of Go's.
 * At procs=1 only: there the busy M is the only one that polls, while
 * with more Ps an idle one blocks in the poller. Each round: a sleep, so
 * that lastpoll is fresh; a reader parks on a pipe; the driver spins past
 * POLL_MARK_NS, writes, and parks, so that its M, with nothing else to
 * run, finds the reader by that poll. A round that finds sysmon holding
 * the poller (lastpoll 0: the host kept the M away for over 1 ms) tests
 * nothing, as the M's poll is rightly not made then: the driver goes on
 * until MARK_ROUNDS rounds have tested it, or the deadline passes. */
#define MARK_ROUNDS 10
static int mark_fd[2];
static gmp_chan_t *mark_ch;
static _Atomic int64_t mark_done, mark_tried, mark_moved;

static void mark_reader(void *arg)
{
    (void)arg;
    char b;
    G_CHECK(gmp_read(mark_fd[0], &b, 1) == 1);
    int v = 1;
    G_CHECK(gmp_chan_send(mark_ch, &v) == 0);
}

static void mark_driver(void *arg)
{
    (void)arg;
    struct schedt *s = h_sched();
    int64_t give_up = gmp_nanotime() + H_DEADLINE_NS / 2;
    while (atomic_load(&mark_tried) < MARK_ROUNDS &&
           gmp_nanotime() < give_up) {
        gmp_sleep(1 * MS);
        G_CHECK(gmp_go(mark_reader, NULL) == 0);
        while (!gmp__netpoll_waiting(s))
            gmp_yield();
        int64_t l0 = atomic_load(&s->lastpoll);
        int64_t t0 = gmp_nanotime();
        while (gmp_nanotime() - t0 < 2 * POLL_MARK_NS)
            ;
        G_CHECK(gmp_write(mark_fd[1], "x", 1) == 1);
        int v;
        G_CHECK(gmp_chan_recv(mark_ch, &v) == 0);
        if (l0 == 0)
            continue;               /* sysmon held the poller: no test */
        atomic_fetch_add(&mark_tried, 1);
        if (atomic_load(&s->lastpoll) != l0)
            atomic_fetch_add(&mark_moved, 1);
    }
    atomic_fetch_add(&mark_done, 1);
}

static void test_netpoll_busy_poll_marks_lastpoll(void **state)
{
    if (h_env_procs(state) != 1)
        skip();
    bad_reset();
    mkstream(0, mark_fd);
    mark_ch = h_chan(sizeof(int), 0);
    atomic_store(&mark_done, 0);
    atomic_store(&mark_tried, 0);
    atomic_store(&mark_moved, 0);
    assert_int_equal(gmp_go(mark_driver, NULL), 0);
    assert_int_equal(h_wait(&mark_done, 1), 0);
    ASSERT_NO_BAD();
    assert_int_equal(atomic_load(&mark_tried), MARK_ROUNDS);
    assert_int_equal(atomic_load(&mark_moved), MARK_ROUNDS);
    gmp_chan_free(mark_ch);
    assert_int_equal(gmp_close(mark_fd[0]), 0);
    assert_int_equal(gmp_close(mark_fd[1]), 0);
}

int main(void)
{
    const struct CMUnitTest fork[] = {
        cmocka_unit_test(test_netpoll_deadlock_after_round_trip_fds_closed),
        cmocka_unit_test(test_netpoll_deadlock_after_round_trip_fds_open),
        cmocka_unit_test(test_netpoll_deadlock_after_close_wakes_the_last_waiter),
        cmocka_unit_test(test_netpoll_no_deadlock_reader_parked_for_process),
        cmocka_unit_test(test_netpoll_no_deadlock_accept_parked_for_process),
        cmocka_unit_test(test_netpoll_no_deadlock_timed_wait_and_sleeper),
    };
    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_netpoll_bad_fds_without_runtime),
        cmocka_unit_test(test_netpoll_read_skip_only_while_someone_polls),
    };
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_netpoll_reader_parks_then_reads_all_then_eof),
        cmocka_unit_test(test_netpoll_many_streams_at_once),
        cmocka_unit_test(test_netpoll_large_write_returns_full_length),
        cmocka_unit_test(test_netpoll_concurrent_readers_share_bytes),
        cmocka_unit_test(test_netpoll_every_reader_sees_the_last_event),
        cmocka_unit_test(test_netpoll_concurrent_writers_take_turns),
        cmocka_unit_test(test_netpoll_close_wakes_parked_with_ebadf),
        cmocka_unit_test(test_netpoll_fd_wait_timeouts_and_readiness),
        cmocka_unit_test(test_netpoll_fd_wait_woken_by_readiness),
        cmocka_unit_test(test_netpoll_tcp_echo_round_trips),
        cmocka_unit_test(test_netpoll_short_tcp_read_at_urgent_byte_or_fin),
        cmocka_unit_test(test_netpoll_acceptors_share_a_burst),
        cmocka_unit_test(test_netpoll_connect_refused),
        cmocka_unit_test(test_netpoll_thread_blocks_until_goroutine_writes),
        cmocka_unit_test(test_netpoll_regular_files_and_dev_null),
        cmocka_unit_test(test_netpoll_fd_numbers_reused_at_once),
        cmocka_unit_test(test_netpoll_bad_input_is_an_error),
        cmocka_unit_test(test_netpoll_busy_poll_marks_lastpoll),
    };
    /* The forking tests first, while no runtime runs in this process. */
    return cmocka_run_group_tests_name("netpoll fork", fork, NULL, NULL)
         + cmocka_run_group_tests_name("netpoll no runtime", none, NULL, NULL)
         + cmocka_run_group_tests_name("netpoll procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("netpoll procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("netpoll procs=4", t, h_up_4, h_down);
}
