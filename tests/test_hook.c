/*
 * test_hook.c - the hook library (src/hook/hook.c): the C library's
 * blocking calls, made from goroutines, park them; made from a plain
 * thread, they are the C library's.
 *
 * The proof that a call parks: as many goroutines as there are Ps block
 * in it, and only then a releaser goroutine, which makes their calls
 * complete, can run. Had a call kept its P, the releaser would never run
 * (no syscall bracket: nothing hands the P on) and h_wait would fail.
 *
 * Built twice: test_hook links the hook library, test_hook_preload does
 * not and runs with LD_PRELOAD (not under the sanitizers, whose runtime
 * must come first).
 */
#include "harness.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define MAXP 4

enum op {
    OP_READ, OP_RECV, OP_READV, OP_RECVFROM, OP_RECVMSG, OP_POLL, OP_PPOLL,
    OP_SELECT, OP_PSELECT, OP_EPOLL, OP_EPOLL_PWAIT, OP_ACCEPT, OP_WRITE,
    OP_WAITPID, OP_COUNT
};
static const char *const op_name[] = {
    "read", "recv", "readv", "recvfrom", "recvmsg", "poll", "ppoll",
    "select", "pselect", "epoll_wait", "epoll_pwait", "accept", "write",
    "waitpid",
};

#define BIG (4 << 20)               /* more than a socket pair buffers */

static struct {
    enum op op;
    int np;
    int a[MAXP], b[MAXP];           /* socket pairs (a: the blocker's) */
    int ep[MAXP];
    struct sockaddr_in addr[MAXP];
    _Atomic int64_t entered, done, bad, released, rdone;
    char *big;
} bk;

static int listener(struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *addr = (struct sockaddr_in){.sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof *addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)addr, len) != 0 ||
        listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)addr, &len) != 0)
        abort();
    return fd;
}

static void blocker(void *arg)
{
    int i = (int)(intptr_t)arg, fd = bk.a[i];
    char buf[16];
    ssize_t r = -1;
    atomic_fetch_add(&bk.entered, 1);
    switch (bk.op) {
    case OP_READ:
        r = read(fd, buf, sizeof buf);
        break;
    case OP_RECV:
        r = recv(fd, buf, sizeof buf, 0);
        break;
    case OP_READV: {
        struct iovec v = {buf, sizeof buf};
        r = readv(fd, &v, 1);
        break;
    }
    case OP_RECVFROM:
        r = recvfrom(fd, buf, sizeof buf, 0, NULL, NULL);
        break;
    case OP_RECVMSG: {
        struct iovec v = {buf, sizeof buf};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
        r = recvmsg(fd, &m, 0);
        break;
    }
    case OP_POLL: {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        r = poll(&p, 1, -1) == 1 && (p.revents & POLLIN) ? 1 : -1;
        break;
    }
    case OP_PPOLL: {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        r = ppoll(&p, 1, NULL, NULL) == 1 && (p.revents & POLLIN) ? 1 : -1;
        break;
    }
    case OP_SELECT: {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(fd, &rd);
        r = select(fd + 1, &rd, NULL, NULL, NULL) == 1 && FD_ISSET(fd, &rd)
                ? 1 : -1;
        break;
    }
    case OP_PSELECT: {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(fd, &rd);
        r = pselect(fd + 1, &rd, NULL, NULL, NULL, NULL) == 1 &&
                    FD_ISSET(fd, &rd)
                ? 1 : -1;
        break;
    }
    case OP_EPOLL:
    case OP_EPOLL_PWAIT: {
        struct epoll_event ev;
        int n = bk.op == OP_EPOLL
                    ? epoll_wait(bk.ep[i], &ev, 1, -1)
                    : epoll_pwait(bk.ep[i], &ev, 1, -1, NULL);
        r = n == 1 && ev.data.fd == fd ? 1 : -1;
        break;
    }
    case OP_WAITPID: {
        /* In the system-call bracket: the P goes on after 20 us. The
         * child waits for the releaser's byte. */
        pid_t pid = fork();
        if (pid == 0) {
            char c;
            _exit(read(fd, &c, 1) == 1 ? 0 : 1);
        }
        int st = 0;
        r = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
                    WEXITSTATUS(st) == 0
                ? 1 : -1;
        break;
    }
    case OP_ACCEPT: {
        int c = accept(fd, NULL, NULL);
        r = c >= 0 ? 1 : -1;
        if (c >= 0)
            close(c);
        break;
    }
    case OP_WRITE:
        r = write(fd, bk.big, BIG) == BIG ? 1 : -1;
        break;
    default:
        break;
    }
    if (r <= 0)
        atomic_fetch_add(&bk.bad, 1);
    atomic_fetch_add(&bk.done, 1);
}

/* Runs once every blocker is in its call: completes them all. */
static void releaser(void *arg)
{
    (void)arg;
    while (atomic_load(&bk.entered) < bk.np)
        gmp_yield();
    atomic_store(&bk.released, 1);
    for (int i = 0; i < bk.np; i++) {
        if (bk.op == OP_ACCEPT) {
            int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (c < 0 || connect(c, (struct sockaddr *)&bk.addr[i],
                                 sizeof bk.addr[i]) != 0)
                atomic_fetch_add(&bk.bad, 1);
            bk.b[i] = c;
        } else if (bk.op == OP_WRITE) {
            static char sink[65536];
            size_t got = 0;
            while (got < BIG) {
                ssize_t n = read(bk.b[i], sink, sizeof sink);
                if (n <= 0) {
                    atomic_fetch_add(&bk.bad, 1);
                    break;
                }
                got += (size_t)n;
            }
        } else if (write(bk.b[i], "x", 1) != 1) {
            atomic_fetch_add(&bk.bad, 1);
        }
    }
    /* The round's fds close only after this: a releaser left running
     * would read the next round's. */
    atomic_store(&bk.rdone, 1);
}

static void test_hook_blocking_calls_park(void **state)
{
    int np = gmp_procs();
    bk.big = calloc(1, BIG);
    assert_non_null(bk.big);
    for (int op = 0; op < OP_COUNT; op++) {
        /* Under qemu-user a child forked while other threads run now and
         * then never gets to its first call: it was found asleep on a
         * futex, alone with the emulator's own thread, once in about
         * 10,000 forks. One round of waitpid there, not twenty. */
        int rounds = op == OP_WAITPID && GMP_TEST_EMULATED ? 1 : H_SCALE(20);
        for (int round = 0; round < rounds; round++) {
            bk.op = (enum op)op;
            bk.np = np;
            atomic_store(&bk.entered, 0);
            atomic_store(&bk.done, 0);
            atomic_store(&bk.bad, 0);
            atomic_store(&bk.released, 0);
            atomic_store(&bk.rdone, 0);
            for (int i = 0; i < np; i++) {
                if (op == OP_ACCEPT) {
                    bk.a[i] = listener(&bk.addr[i]);
                    bk.b[i] = -1;
                } else {
                    int sv[2];
                    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv),
                                     0);
                    bk.a[i] = sv[0];
                    bk.b[i] = sv[1];
                }
                if (op == OP_EPOLL || op == OP_EPOLL_PWAIT) {
                    bk.ep[i] = epoll_create1(0);
                    struct epoll_event ev = {.events = EPOLLIN,
                                             .data.fd = bk.a[i]};
                    assert_int_equal(
                        epoll_ctl(bk.ep[i], EPOLL_CTL_ADD, bk.a[i], &ev), 0);
                }
            }
            for (int i = 0; i < np; i++)
                assert_int_equal(gmp_go(blocker, (void *)(intptr_t)i), 0);
            assert_int_equal(gmp_go(releaser, NULL), 0);
            if (h_wait(&bk.done, np) != 0)
                fail_msg("%s: blockers kept their Ps (released=%d)",
                         op_name[op], (int)atomic_load(&bk.released));
            assert_int_equal(h_wait(&bk.rdone, 1), 0);
            assert_int_equal(atomic_load(&bk.bad), 0);
            for (int i = 0; i < np; i++) {
                close(bk.a[i]);
                if (bk.b[i] >= 0)
                    close(bk.b[i]);
                if (op == OP_EPOLL || op == OP_EPOLL_PWAIT)
                    close(bk.ep[i]);
            }
        }
    }
    free(bk.big);
}

/* ---- Sleeps ---------------------------------------------------------------- */

static _Atomic int64_t sl_entered, sl_done, sl_seen = -1;

static void sleeper(void *arg)
{
    int kind = (int)(intptr_t)arg;
    atomic_fetch_add(&sl_entered, 1);
    struct timespec ts = {0, 300 * MS};
    if (kind == 0)
        usleep(300000);
    else if (kind == 1)
        nanosleep(&ts, NULL);
    else
        clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    atomic_fetch_add(&sl_done, 1);
}

static void witness(void *arg)
{
    int np = (int)(intptr_t)arg;
    while (atomic_load(&sl_entered) < np)
        gmp_yield();
    atomic_store(&sl_seen, atomic_load(&sl_done));
}

/* A sleeping goroutine leaves its P: the witness runs while every P's
 * goroutine sleeps, and sees none of them done. */
static void test_hook_sleeps_park(void **state)
{
    int np = gmp_procs();
    for (int kind = 0; kind < 3; kind++) {
        atomic_store(&sl_entered, 0);
        atomic_store(&sl_done, 0);
        atomic_store(&sl_seen, -1);
        for (int i = 0; i < np; i++)
            assert_int_equal(gmp_go(sleeper, (void *)(intptr_t)kind), 0);
        assert_int_equal(gmp_go(witness, (void *)(intptr_t)np), 0);
        assert_int_equal(h_wait(&sl_done, np), 0);
        assert_int_equal(atomic_load(&sl_seen), 0);
    }
}

/* ---- A plain thread's calls ------------------------------------------------ */

static int pl_fd;
static _Atomic int64_t pl_r = -2;

static void plain_reader(void *arg)
{
    (void)arg;
    char buf[4];
    atomic_store(&pl_r, read(pl_fd, buf, sizeof buf));
}

static _Atomic int64_t used;

static void use_fd(void *arg)
{
    /* A goroutine's read registers the fd (non-blocking underneath). */
    int *sv = arg;
    char c;
    if (write(sv[1], "a", 1) == 1 && read(sv[0], &c, 1) == 1)
        atomic_store(&used, 1);
    else
        atomic_store(&used, -1);
}

/* After a goroutine used an fd, a plain thread's read still blocks until
 * data comes, and fcntl still says the fd blocks. */
static void test_hook_plain_thread_blocks(void **state)
{
    for (int round = 0; round < H_SCALE(10); round++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        atomic_store(&used, 0);
        assert_int_equal(gmp_go(use_fd, sv), 0);
        assert_int_equal(h_wait(&used, 1), 0);
        assert_int_equal(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
        pl_fd = sv[0];
        atomic_store(&pl_r, -2);
        struct th t;
        th_start(&t, plain_reader, NULL);
        assert_int_equal(h_still(), 0);     /* it sleeps in the kernel */
        assert_int_equal(atomic_load(&pl_r), -2);
        assert_int_equal(write(sv[1], "xyz", 3), 3);
        th_join(&t);
        assert_int_equal(atomic_load(&pl_r), 3);
        close(sv[0]);
        close(sv[1]);
    }
}

/* ---- The program's own blocking mode and timeouts --------------------------- */

static _Atomic int64_t nb_r, nb_errno, nb_step;
static int nb_sv[2];

static void nb_goroutine(void *arg)
{
    int how = (int)(intptr_t)arg;   /* 0: fcntl, 1: ioctl */
    char c;
    int on = 1;
    if (how == 0)
        fcntl(nb_sv[0], F_SETFL, fcntl(nb_sv[0], F_GETFL) | O_NONBLOCK);
    else
        ioctl(nb_sv[0], FIONBIO, &on);
    errno = 0;
    atomic_store(&nb_r, read(nb_sv[0], &c, 1));
    atomic_store(&nb_errno, errno);
    atomic_store(&nb_step, 1);
    on = 0;
    if (how == 0)
        fcntl(nb_sv[0], F_SETFL, fcntl(nb_sv[0], F_GETFL) & ~O_NONBLOCK);
    else
        ioctl(nb_sv[0], FIONBIO, &on);
    /* Blocking again: parks until the test thread writes. */
    atomic_store(&nb_step, 2);
    atomic_store(&nb_r, read(nb_sv[0], &c, 1));
    atomic_store(&nb_step, 3);
}

static void test_hook_program_nonblocking_mode(void **state)
{
    for (int how = 0; how < 2; how++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, nb_sv), 0);
        atomic_store(&nb_step, 0);
        assert_int_equal(gmp_go(nb_goroutine, (void *)(intptr_t)how), 0);
        assert_int_equal(h_wait(&nb_step, 1), 0);
        assert_int_equal(atomic_load(&nb_r), -1);
        assert_int_equal(atomic_load(&nb_errno), EAGAIN);
        assert_int_equal(h_wait(&nb_step, 2), 0);
        assert_int_equal(fcntl(nb_sv[0], F_GETFL) & O_NONBLOCK, 0);
        assert_int_equal(write(nb_sv[1], "q", 1), 1);
        assert_int_equal(h_wait(&nb_step, 3), 0);
        assert_int_equal(atomic_load(&nb_r), 1);
        close(nb_sv[0]);
        close(nb_sv[1]);
    }
}

static _Atomic int64_t to_r, to_errno, to_ns, to_done;

static void timeout_reader(void *arg)
{
    int fd = (int)(intptr_t)arg;
    struct timeval tv = {0, 50000};
    char c;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int64_t t0 = gmp_nanotime();
    errno = 0;
    atomic_store(&to_r, recv(fd, &c, 1, 0));
    atomic_store(&to_errno, errno);
    atomic_store(&to_ns, gmp_nanotime() - t0);
    atomic_store(&to_done, 1);
}

/* SO_RCVTIMEO: EAGAIN once it has run out, as the kernel says it. */
static void test_hook_rcvtimeo(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    atomic_store(&to_done, 0);
    assert_int_equal(gmp_go(timeout_reader, (void *)(intptr_t)sv[0]), 0);
    assert_int_equal(h_wait(&to_done, 1), 0);
    assert_int_equal(atomic_load(&to_r), -1);
    assert_int_equal(atomic_load(&to_errno), EAGAIN);
    assert_true(atomic_load(&to_ns) >= 50 * MS);
    close(sv[0]);
    close(sv[1]);
}

/* ---- fds closed and reused --------------------------------------------------- */

static _Atomic int64_t ru_done, ru_bad;

/* A library's pattern: its connection's fd, used and closed with
 * close(2); the next connection gets the same number. */
static void reuser(void *arg)
{
    (void)arg;
    int prev = -1;
    for (int i = 0; i < 20; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 ||
            (prev >= 0 && sv[0] != prev)) {
            atomic_fetch_add(&ru_bad, 1);
            break;
        }
        prev = sv[0];
        /* The peer answers from another goroutine after a wait, so the
         * read below parks on the fd. */
        int *peer = malloc(sizeof *peer);
        *peer = sv[1];
        void answer(void *);
        gmp_go(answer, peer);
        char c;
        if (read(sv[0], &c, 1) != 1 || c != 'r')
            atomic_fetch_add(&ru_bad, 1);
        close(sv[0]);
        close(sv[1]);
    }
    atomic_store(&ru_done, 1);
}

void answer(void *arg)
{
    int fd = *(int *)arg;
    free(arg);
    gmp_sleep(MS);
    if (write(fd, "r", 1) != 1)
        atomic_fetch_add(&ru_bad, 1);
}

static void test_hook_close_then_reuse(void **state)
{
    atomic_store(&ru_done, 0);
    atomic_store(&ru_bad, 0);
    assert_int_equal(gmp_go(reuser, NULL), 0);
    assert_int_equal(h_wait(&ru_done, 1), 0);
    assert_int_equal(atomic_load(&ru_bad), 0);
}

static _Atomic int64_t d2_done, d2_bad;

/* dup2 over a registered fd: the runtime lets the old file go, and the
 * number then works for the new one. */
static void dup2er(void *arg)
{
    (void)arg;
    int s1[2], s2[2];
    char c;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, s1) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, s2) != 0)
        goto bad;
    if (write(s1[1], "1", 1) != 1 || read(s1[0], &c, 1) != 1)
        goto bad;
    if (dup2(s2[0], s1[0]) != s1[0])
        goto bad;
    int *peer = malloc(sizeof *peer);
    *peer = s2[1];
    gmp_go(answer, peer);
    if (read(s1[0], &c, 1) != 1 || c != 'r')
        goto bad;
    close(s1[0]);
    close(s1[1]);
    close(s2[0]);
    close(s2[1]);
    atomic_store(&d2_done, 1);
    return;
bad:
    atomic_store(&d2_bad, 1);
    atomic_store(&d2_done, 1);
}

static void test_hook_dup2_over_registered(void **state)
{
    for (int i = 0; i < H_SCALE(20); i++) {
        atomic_store(&d2_done, 0);
        atomic_store(&d2_bad, 0);
        assert_int_equal(gmp_go(dup2er, NULL), 0);
        assert_int_equal(h_wait(&d2_done, 1), 0);
        assert_int_equal(atomic_load(&d2_bad), 0);
    }
}

/* ---- Connections -------------------------------------------------------------- */

#define NCONN 50

static struct sockaddr_in ec_addr;
static int ec_lfd;
static _Atomic int64_t ec_done, ec_bad;

static void echo_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[64];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (write(fd, buf, (size_t)n) != n)
            break;
    close(fd);
}

static void echo_server(void *arg)
{
    (void)arg;
    for (int i = 0; i < NCONN; i++) {
        int c = accept(ec_lfd, NULL, NULL);
        if (c < 0) {
            atomic_fetch_add(&ec_bad, 1);
            return;
        }
        gmp_go(echo_conn, (void *)(intptr_t)c);
    }
}

static void echo_client(void *arg)
{
    int k = (int)(intptr_t)arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char msg[32], back[32];
    int len = snprintf(msg, sizeof msg, "hello %d", k);
    if (fd < 0 ||
        connect(fd, (struct sockaddr *)&ec_addr, sizeof ec_addr) != 0 ||
        send(fd, msg, (size_t)len, 0) != len ||
        recv(fd, back, (size_t)len, MSG_WAITALL) != len ||
        memcmp(msg, back, (size_t)len) != 0)
        atomic_fetch_add(&ec_bad, 1);
    if (fd >= 0)
        close(fd);
    atomic_fetch_add(&ec_done, 1);
}

/* socket, connect, accept, send, recv, read, write and close over TCP,
 * server and clients all goroutines. */
static void test_hook_tcp_echo(void **state)
{
    atomic_store(&ec_done, 0);
    atomic_store(&ec_bad, 0);
    ec_lfd = listener(&ec_addr);
    assert_int_equal(gmp_go(echo_server, NULL), 0);
    for (int i = 0; i < NCONN; i++)
        assert_int_equal(gmp_go(echo_client, (void *)(intptr_t)i), 0);
    assert_int_equal(h_wait(&ec_done, NCONN), 0);
    assert_int_equal(atomic_load(&ec_bad), 0);
    close(ec_lfd);
}

/* ---- Thread locks and preemption --------------------------------------------- */

static pthread_mutex_t hm = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t hl_done, hl_contended, hl_preempts;

static uint64_t preemptions(void)
{
    gmp_stats_t st;
    gmp_stats(&st);
    return st.preemptions;
}

/* Spins for ns in the program's own code, calling nothing but the
 * clock (in the vDSO, where the signal does not stop it). */
static __attribute__((noinline)) void spin_ns(int64_t ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec) <
           ns);
}

static void contender(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hm);
    atomic_fetch_add(&hl_contended, 1);
    pthread_mutex_unlock(&hm);
    atomic_fetch_add(&hl_done, 1);
}

static void holder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hm);
    gmp_go(contender, NULL);        /* to this P's runnext */
    uint64_t p0 = preemptions();
    spin_ns(60 * MS);
    atomic_store(&hl_preempts, (int64_t)(preemptions() - p0));
    pthread_mutex_unlock(&hm);
    atomic_fetch_add(&hl_done, 1);
}

#if !defined(H_TSAN)
static _Atomic int hl_stop;

/* The same stretch without the mutex, in the program's own code (the
 * clock read only now and then: under ASan its interceptor, where the
 * signal does not stop a goroutine, would take most of the time), until
 * the test thread has seen a preemption or a bound passes. It makes no
 * runtime call meanwhile: only the signal can preempt it. */
static void free_spinner(void *arg)
{
    (void)arg;
    volatile uint64_t x = 0;
    int64_t end = h_now() + H_DEADLINE_NS;
    while (!atomic_load(&hl_stop) && h_now() < end)
        for (int i = 0; i < 100000; i++)
            x = x + 1;
    atomic_fetch_add(&hl_done, 1);
}
#endif

/* A goroutine holding a pthread mutex across a CPU-bound stretch is not
 * preempted, while another on its P contends for the mutex; without the
 * mutex the same stretch is (when preemption by signal is on). */
static void test_hook_mutex_holder_not_preempted(void **state)
{
    for (int round = 0; round < H_SCALE(5) + 1; round++) {
        atomic_store(&hl_done, 0);
        atomic_store(&hl_contended, 0);
        assert_int_equal(gmp_go(holder, NULL), 0);
        assert_int_equal(h_wait(&hl_done, 2), 0);
        assert_int_equal(atomic_load(&hl_contended), 1);
        assert_int_equal(atomic_load(&hl_preempts), 0);
    }
#if !defined(H_TSAN)
    if (getenv("GMP_DEBUG") == NULL) {
        atomic_store(&hl_done, 0);
        atomic_store(&hl_stop, 0);
        uint64_t p0 = preemptions();
        assert_int_equal(gmp_go(free_spinner, NULL), 0);
        unsigned step = 0;
        while (preemptions() == p0 && atomic_load(&hl_done) == 0)
            h_backoff(&step);
        atomic_store(&hl_stop, 1);
        assert_int_equal(h_wait(&hl_done, 1), 0);
        assert_true(preemptions() > p0);
    }
#endif
}

/* ---- The rest of the calls, from goroutines ------------------------------------ */

static _Atomic int64_t rest_fail, rest_done;

#define RC_CHECK(cond)                                                       \
    do {                                                                     \
        if (!(cond) && !atomic_load(&rest_fail))                             \
            atomic_store(&rest_fail, __LINE__);                              \
    } while (0)

/* The calls the parking tests above do not make, each with the result
 * the C library gives: vector and datagram sends, dup and dup3, files
 * (in the bracket), the resolver, flock, sleep(0) and SO_SNDTIMEO. */
static void rest_goroutine(void *arg)
{
    (void)arg;
    int sv[2];
    char buf[16] = {0};
    RC_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    struct iovec v[2] = {{"ab", 2}, {"cd", 2}};
    RC_CHECK(writev(sv[1], v, 2) == 4);
    RC_CHECK(recv(sv[0], buf, 4, MSG_WAITALL) == 4 && !memcmp(buf, "abcd", 4));
    struct msghdr m = {.msg_iov = v, .msg_iovlen = 1};
    RC_CHECK(sendmsg(sv[1], &m, 0) == 2);
    RC_CHECK(sendto(sv[1], "ef", 2, 0, NULL, 0) == 2);
    RC_CHECK(read(sv[0], buf, 4) == 4 && !memcmp(buf, "abef", 4));
    int d = dup(sv[0]), d3 = dup3(sv[0], 200, O_CLOEXEC);
    RC_CHECK(d >= 0 && d3 == 200 && (fcntl(d3, F_GETFD) & FD_CLOEXEC));
    RC_CHECK(write(sv[1], "g", 1) == 1 && read(d, buf, 1) == 1 &&
             buf[0] == 'g');
    RC_CHECK(write(sv[1], "h", 1) == 1 && read(d3, buf, 1) == 1 &&
             buf[0] == 'h');
    RC_CHECK(close(d) == 0 && close(d3) == 0);
    /* SO_SNDTIMEO on a full socket: EAGAIN once it has run out. */
    struct timeval tv = {0, 20000};
    RC_CHECK(setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
    static char big[1 << 20];
    errno = 0;
    ssize_t w = write(sv[1], big, sizeof big);
    RC_CHECK((w > 0 && w < (ssize_t)sizeof big) ||
             (w == -1 && errno == EAGAIN));
    RC_CHECK(close(sv[0]) == 0 && close(sv[1]) == 0);
    /* A file: pread, pwrite and flock in the bracket. */
    char path[] = "/tmp/gmprt-hook-XXXXXX";
    int f = mkstemp(path);
    RC_CHECK(f >= 0);
    RC_CHECK(pwrite(f, "xyz", 3, 10) == 3);
    RC_CHECK(pread(f, buf, 3, 10) == 3 && !memcmp(buf, "xyz", 3));
    RC_CHECK(flock(f, LOCK_EX) == 0 && flock(f, LOCK_UN) == 0);
    RC_CHECK(close(f) == 0 && unlink(path) == 0);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_flags = AI_NUMERICHOST},
                    *res = NULL;
    RC_CHECK(getaddrinfo("127.0.0.1", "80", &hints, &res) == 0 && res);
    char host[64];
    RC_CHECK(res && getnameinfo(res->ai_addr, res->ai_addrlen, host,
                                sizeof host, NULL, 0, NI_NUMERICHOST) == 0 &&
             strcmp(host, "127.0.0.1") == 0);
    if (res)
        freeaddrinfo(res);
    RC_CHECK(sleep(0) == 0);
    atomic_store(&rest_done, 1);
}

static void test_hook_the_other_calls(void **state)
{
    atomic_store(&rest_fail, 0);
    atomic_store(&rest_done, 0);
    assert_int_equal(gmp_go(rest_goroutine, NULL), 0);
    assert_int_equal(h_wait(&rest_done, 1), 0);
    if (atomic_load(&rest_fail))
        fail_msg("check at line %d", (int)atomic_load(&rest_fail));
}

/* ---- errno and the calls outside goroutines --------------------------------- */

static _Atomic int64_t er_errno, er_done;

static void bad_fd_reader(void *arg)
{
    (void)arg;
    char c;
    errno = 0;
    ssize_t r = read(1000000, &c, 1);
    atomic_store(&er_errno, r == -1 ? errno : 0);
    atomic_store(&er_done, 1);
}

static void test_hook_errno_as_libc(void **state)
{
    atomic_store(&er_done, 0);
    assert_int_equal(gmp_go(bad_fd_reader, NULL), 0);
    assert_int_equal(h_wait(&er_done, 1), 0);
    assert_int_equal(atomic_load(&er_errno), EBADF);
}

/* ---- The C library's calls, where no goroutine makes them --------------- */

static _Atomic int64_t pc_fail;

#define PC_CHECK(cond)                                                       \
    do {                                                                     \
        if (!(cond) && !atomic_load(&pc_fail))                               \
            atomic_store(&pc_fail, __LINE__);                                \
    } while (0)

/* What each hooked call returns on a plain thread, or with no runtime:
 * the C library's answers, errno included. */
static void plain_calls(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 1000000};
    PC_CHECK(usleep(1000) == 0);
    PC_CHECK(nanosleep(&ts, NULL) == 0);
    PC_CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == 0);
    PC_CHECK(poll(NULL, 0, 1) == 0);
    struct timeval tv = {0, 1000};
    PC_CHECK(select(0, NULL, NULL, NULL, &tv) == 0);
    int ep = epoll_create1(0);
    struct epoll_event ev;
    PC_CHECK(ep >= 0 && epoll_wait(ep, &ev, 1, 1) == 0);
    PC_CHECK(close(ep) == 0);
    int sv[2];
    char buf[4];
    PC_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    PC_CHECK(write(sv[1], "abc", 3) == 3);
    PC_CHECK(recv(sv[0], buf, 3, MSG_WAITALL) == 3 && !memcmp(buf, "abc", 3));
    PC_CHECK((fcntl(sv[0], F_GETFL) & O_NONBLOCK) == 0);
    errno = 0;
    PC_CHECK(recv(sv[0], buf, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    PC_CHECK(close(sv[0]) == 0 && close(sv[1]) == 0);
    errno = 0;
    PC_CHECK(close(sv[0]) == -1 && errno == EBADF);
    errno = 0;
    PC_CHECK(read(sv[0], buf, 1) == -1 && errno == EBADF);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    PC_CHECK(pthread_mutex_lock(&mu) == 0);
    PC_CHECK(pthread_mutex_trylock(&mu) == EBUSY);
    PC_CHECK(pthread_mutex_unlock(&mu) == 0);
}

static void test_hook_plain_thread_calls(void **state)
{
    atomic_store(&pc_fail, 0);
    struct th t;
    th_start(&t, plain_calls, NULL);
    th_join(&t);
    if (atomic_load(&pc_fail))
        fail_msg("check at line %d", (int)atomic_load(&pc_fail));
}

static void test_hook_no_runtime(void **state)
{
    assert_int_equal(gmp_procs(), 0);
    atomic_store(&pc_fail, 0);
    plain_calls(NULL);
    if (atomic_load(&pc_fail))
        fail_msg("check at line %d", (int)atomic_load(&pc_fail));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_hook_blocking_calls_park),
        cmocka_unit_test(test_hook_sleeps_park),
        cmocka_unit_test(test_hook_plain_thread_blocks),
        cmocka_unit_test(test_hook_plain_thread_calls),
        cmocka_unit_test(test_hook_program_nonblocking_mode),
        cmocka_unit_test(test_hook_rcvtimeo),
        cmocka_unit_test(test_hook_close_then_reuse),
        cmocka_unit_test(test_hook_dup2_over_registered),
        cmocka_unit_test(test_hook_tcp_echo),
        cmocka_unit_test(test_hook_mutex_holder_not_preempted),
        cmocka_unit_test(test_hook_errno_as_libc),
        cmocka_unit_test(test_hook_the_other_calls),
    };
    const struct CMUnitTest none[] = {
        cmocka_unit_test(test_hook_no_runtime),
    };
    return cmocka_run_group_tests_name("hook, no runtime", none, NULL, NULL)
         + cmocka_run_group_tests_name("hook procs=1", t, h_up_1, h_down)
         + cmocka_run_group_tests_name("hook procs=2", t, h_up_2, h_down)
         + cmocka_run_group_tests_name("hook procs=4", t, h_up_4, h_down);
}
