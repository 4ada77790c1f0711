/*
 * curl_fetch.c - libcurl's blocking easy API, unmodified, on goroutines.
 *
 * N goroutines (argv[1], default 100) each fetch 3 pages with
 * curl_easy_perform from an HTTP server in the same process, whose
 * accept, read and write are plain blocking calls made by goroutines too.
 * Linked with the hook library (gmprt::hook), every one of those calls
 * parks its goroutine instead of blocking its thread, so two Ps serve
 * them all; without it the clients would hold both Ps in poll(2) and the
 * server could never answer. Exits 1 if any page is wrong.
 *
 *     ./build/examples/curl_fetch 1000
 *
 * The same program, built without the hooks, runs with them preloaded:
 * LD_PRELOAD=libgmprt_hook.so (docs/hooks.md).
 */
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "gmprt.h"

#define NREQ 3

static int lfd, port, ng = 100;
static _Atomic long bad, served, ok;
static gmp_wg_t wg;                 /* the clients */
static gmp_wg_t serving;            /* the server and its connections */

/* One connection: a request (until its blank line), one answer naming
 * the path, then close. */
static void conn(void *arg)
{
    int fd = (int)(long)arg;
    char req[2048];
    size_t n = 0;
    while (n < sizeof req - 1) {
        ssize_t r = read(fd, req + n, sizeof req - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        req[n] = 0;
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    char path[64] = "";
    if (sscanf(req, "GET %63s ", path) == 1) {
        char body[128], head[256];
        int bl = snprintf(body, sizeof body, "hello %s", path);
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                          "Connection: close\r\n\r\n", bl);
        if (write(fd, head, (size_t)hl) == hl &&
            write(fd, body, (size_t)bl) == bl)
            atomic_fetch_add(&served, 1);
    }
    close(fd);
    gmp_wg_done(&serving);
}

static void server(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            break;                  /* closed at the end */
        gmp_wg_add(&serving, 1);
        gmp_go(conn, (void *)(long)c);
    }
    gmp_wg_done(&serving);
}

struct body {
    char buf[128];
    size_t n;
};

static size_t on_data(char *p, size_t size, size_t nm, void *arg)
{
    struct body *b = arg;
    size_t len = size * nm;
    if (b->n + len < sizeof b->buf) {
        memcpy(b->buf + b->n, p, len);
        b->n += len;
        b->buf[b->n] = 0;
    }
    return len;
}

static void client(void *arg)
{
    long k = (long)arg;
    CURL *h = curl_easy_init();
    for (int i = 0; h && i < NREQ; i++) {
        char url[128], want[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/c%ld-%d", port, k, i);
        snprintf(want, sizeof want, "hello /c%ld-%d", k, i);
        struct body b = {.n = 0};
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        long code = 0;
        CURLcode rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK || code != 200 || strcmp(b.buf, want) != 0) {
            fprintf(stderr, "client %ld: %s, code %ld, body '%s'\n", k,
                    curl_easy_strerror(rc), code, b.buf);
            atomic_fetch_add(&bad, 1);
        } else {
            atomic_fetch_add(&ok, 1);
        }
    }
    if (!h)
        atomic_fetch_add(&bad, 1);
    curl_easy_cleanup(h);
    gmp_wg_done(&wg);
}

static void run(void *arg)
{
    (void)arg;
    gmp_wg_add(&serving, 1);
    gmp_go(server, NULL);
    gmp_wg_add(&wg, ng);
    for (long k = 0; k < ng; k++)
        gmp_go(client, (void *)k);
    gmp_wg_wait(&wg);
    shutdown(lfd, SHUT_RDWR);       /* the server's accept returns */
    /* A client may have its page before the goroutine that wrote it has
     * counted it: main returning would end that goroutine first. */
    gmp_wg_wait(&serving);
}

int main(int argc, char **argv)
{
    if (argc > 1 && (ng = atoi(argv[1])) <= 0) {
        fprintf(stderr, "usage: curl_fetch [goroutines]\n");
        return 2;
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, len) != 0 ||
        listen(lfd, 4096) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &len) != 0) {
        perror("listen");
        return 1;
    }
    port = ntohs(a.sin_port);
    if (curl_global_init(CURL_GLOBAL_ALL) != 0)
        return 1;
    gmp_config_t cfg = {0};
    cfg.procs = 2;
    int64_t t0 = gmp_nanotime();
    int err = gmp_main(run, NULL, &cfg);
    int64_t ns = gmp_nanotime() - t0;
    curl_global_cleanup();
    close(lfd);
    printf("%d goroutines: %ld pages fetched, %ld wrong, %ld served "
           "(want %d), %.0f ms\n", ng, (long)atomic_load(&ok),
           (long)atomic_load(&bad), (long)atomic_load(&served), ng * NREQ,
           (double)ns / 1e6);
    return err == 0 && atomic_load(&bad) == 0 &&
                   atomic_load(&ok) == ng * NREQ &&
                   atomic_load(&served) == ng * NREQ
               ? 0
               : 1;
}
