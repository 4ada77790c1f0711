/*
 * redisd.h - a redis-server of the test's or benchmark's own on a free
 * loopback port: started with redisd_start, stopped by its pid with
 * redisd_stop. For the programs that drive hiredis (tests/real,
 * bench/redis.c).
 */
#ifndef GMP_REDISD_H
#define GMP_REDISD_H

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

/* Whether redis-server is on PATH. */
static inline int redisd_found(void)
{
    return system("command -v redis-server >/dev/null 2>&1") == 0;
}

/* A free loopback port: bind to 0 and read it back. -1 on failure. */
static inline int redisd_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, len) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Starts redis-server on a free port (*port), without persistence, and
 * waits until it answers PING (from the calling thread). Its pid, or -1. */
static inline pid_t redisd_start(int *port)
{
    if ((*port = redisd_free_port()) < 0)
        return -1;
    char p[16];
    snprintf(p, sizeof p, "%d", *port);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execlp("redis-server", "redis-server", "--port", p, "--bind",
               "127.0.0.1", "--save", "", "--appendonly", "no",
               "--maxclients", "4000", "--loglevel", "warning", (char *)0);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        redisContext *c = redisConnect("127.0.0.1", *port);
        redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
        int up = r != NULL;
        if (r)
            freeReplyObject(r);
        if (c)
            redisFree(c);
        if (up)
            return pid;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static inline void redisd_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

#endif /* GMP_REDISD_H */
