/*
 * test_libpq.c - Debian's libpq, unmodified, with its blocking API from
 * 1,000 goroutines at procs=2, through the hook library (linked, or
 * preloaded: ctest runs both), against a PostgreSQL cluster this test
 * makes and starts in a temporary directory on a loopback port, and
 * stops by its pid file at the end. 50 connections, opened by goroutines
 * at once, go round the 1,000 through a channel; each goroutine runs a
 * parameterised query 5 times and checks every answer, and a last query
 * counts the rows all of them inserted. Exit 77 (skipped) when
 * PostgreSQL's server binaries are not found. As root, the cluster runs
 * as the postgres user (the server refuses root).
 */
#include <dirent.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "gmprt.h"
#include "redisd.h"                 /* redisd_free_port */

#define NG 1000
#define NCONN 50
#define NQ 5

static char dir[64], bindir[256], conninfo[256], as[64];
static gmp_chan_t *pool;
static _Atomic long bad, queries;
static gmp_wg_t wg;
static long rows;

/* Runs a shell command line, as the postgres user when we are root. */
static int sh(const char *cmd)
{
    char line[1024];
    snprintf(line, sizeof line, "%s%s >/dev/null 2>&1", as, cmd);
    return system(line);
}

static void opener(void *arg)
{
    (void)arg;
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(c));
        atomic_fetch_add(&bad, 1);
    }
    gmp_chan_send(pool, &c);
}

static void worker(void *arg)
{
    long k = (long)arg;
    PGconn *c;
    gmp_chan_recv(pool, &c);
    for (int i = 0; i < NQ; i++) {
        char a[32];
        snprintf(a, sizeof a, "%ld", k * 100 + i);
        const char *v[1] = {a};
        PGresult *r = PQexecParams(
            c, "INSERT INTO t VALUES ($1::int) RETURNING v + 1", 1, NULL, v,
            NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 ||
            atol(PQgetvalue(r, 0, 0)) != k * 100 + i + 1)
            atomic_fetch_add(&bad, 1);
        else
            atomic_fetch_add(&queries, 1);
        PQclear(r);
    }
    gmp_chan_send(pool, &c);
    gmp_wg_done(&wg);
}

static void run(void *arg)
{
    (void)arg;
    pool = gmp_chan_make(sizeof(PGconn *), NCONN);
    for (int i = 0; i < NCONN; i++)
        gmp_go(opener, NULL);
    /* One connection first, for the table. */
    PGconn *c;
    gmp_chan_recv(pool, &c);
    PQclear(PQexec(c, "CREATE TABLE t (v int)"));
    gmp_chan_send(pool, &c);
    gmp_wg_add(&wg, NG);
    for (long k = 0; k < NG; k++)
        gmp_go(worker, (void *)k);
    gmp_wg_wait(&wg);
    gmp_chan_recv(pool, &c);
    PGresult *r = PQexec(c, "SELECT count(*) FROM t");
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
        rows = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    gmp_chan_send(pool, &c);
    for (int i = 0; i < NCONN; i++) {
        gmp_chan_recv(pool, &c);
        PQfinish(c);
    }
    gmp_chan_free(pool);
}

int main(void)
{
    FILE *p = popen("pg_config --bindir 2>/dev/null", "r");
    if (!p || !fgets(bindir, sizeof bindir, p)) {
        printf("skipped: pg_config not found (Debian: libpq-dev)\n");
        return 77;
    }
    pclose(p);
    bindir[strcspn(bindir, "\n")] = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/pg_ctl", bindir);
    if (access(path, X_OK) != 0) {
        printf("skipped: no PostgreSQL server in %s (Debian: postgresql)\n",
               bindir);
        return 77;
    }
    snprintf(dir, sizeof dir, "/tmp/gmprt-pg-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw || chown(dir, pw->pw_uid, pw->pw_gid) != 0) {
            printf("skipped: running as root without a postgres user\n");
            rmdir(dir);
            return 77;
        }
        snprintf(as, sizeof as, "runuser -u postgres -- ");
    }
    int port = redisd_free_port();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/initdb -D %s/data -A trust -U gmprt "
             "--no-sync", bindir, dir);
    int err = sh(cmd);
    if (!err) {
        snprintf(cmd, sizeof cmd, "%s/pg_ctl -D %s/data -w -t 60 -o "
                 "\"-p %d -k %s -c listen_addresses=127.0.0.1 "
                 "-c max_connections=%d -c fsync=off\" start", bindir, dir,
                 port, dir, NCONN + 10);
        err = sh(cmd);
    }
    if (!err) {
        snprintf(conninfo, sizeof conninfo, "host=127.0.0.1 port=%d "
                 "user=gmprt dbname=postgres connect_timeout=30", port);
        gmp_config_t cfg = {0};
        cfg.procs = 2;
        cfg.dump_on_sigquit = 1;    /* a hang killed by SIGQUIT says where */
        err = gmp_main(run, NULL, &cfg);
        snprintf(cmd, sizeof cmd, "%s/pg_ctl -D %s/data -m immediate stop",
                 bindir, dir);
        sh(cmd);
    } else {
        fprintf(stderr, "the cluster did not start\n");
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("queries %ld, bad %ld, rows %ld (want %d)\n",
           (long)atomic_load(&queries), (long)atomic_load(&bad), rows,
           NG * NQ);
    return err == 0 && atomic_load(&bad) == 0 && rows == NG * NQ ? 0 : 1;
}
