/*
 * echo_server.c - a TCP echo server with one goroutine per connection.
 *
 * Each connection's goroutine reads and writes as if it had a thread of
 * its own: gmp_read and gmp_write park the goroutine, not the thread,
 * while the runtime's netpoller (epoll) waits for the socket, so a few
 * threads serve any number of connections. Try it:
 *
 *   cmake -B build && cmake --build build && ./build/examples/echo_server
 *   nc 127.0.0.1 7000            (in another terminal; type lines)
 *
 * The port comes from the first argument (default 7000). Stop it with
 * Ctrl-C.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmprt.h>

/* One connection: echo what arrives until the client closes its end. */
static void serve_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    for (;;) {
        ssize_t n = gmp_read(fd, buf, sizeof buf);  /* parks until data */
        if (n <= 0)                 /* 0: the client closed; < 0: error */
            break;
        if (gmp_write(fd, buf, (size_t)n) != n)     /* writes all n bytes */
            break;
    }
    gmp_close(fd);                  /* fds used with gmp_* close this way */
}

static int port = 7000;
static int failed;

/* The main goroutine: listen, then accept for ever. */
static void serve(void *arg)
{
    (void)arg;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        perror("socket");
        failed = 1;
        return;
    }
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);   /* 127.0.0.1 only */
    sa.sin_port = htons((uint16_t)port);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(lfd, 128) != 0) {
        perror("bind/listen");
        failed = 1;
        close(lfd);
        return;
    }
    printf("echo server listening on 127.0.0.1:%d\n", port);
    fflush(stdout);
    for (;;) {
        /* Parks this goroutine until a client connects. */
        int fd = gmp_accept(lfd, NULL, NULL);
        if (fd < 0) {
            /* E.g. out of fds: wait a little (the goroutine sleeps, the
             * connections keep being served) and try again. */
            fprintf(stderr, "gmp_accept: %s\n", gmp_strerror(fd));
            gmp_sleep(100 * 1000000LL);
            continue;
        }
        if (gmp_go(serve_conn, (void *)(intptr_t)fd) != 0)
            gmp_close(fd);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        char *end;
        long p = strtol(argv[1], &end, 10);
        if (*argv[1] == '\0' || *end != '\0' || p < 1 || p > 65535) {
            fprintf(stderr, "usage: %s [port]   (default 7000)\n", argv[0]);
            return 2;
        }
        port = (int)p;
    }
    int err = gmp_main(serve, NULL, NULL);      /* NULL: default config */
    if (err) {
        fprintf(stderr, "gmp_main: %s\n", gmp_strerror(err));
        return 1;
    }
    return failed;
}
