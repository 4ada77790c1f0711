//go:build cgo

package main

// latency: wake-ups while every P runs a CPU-bound goroutine. The pinger
// must be a plain thread of the process, outside the scheduler (a
// goroutine locked to a thread would itself wait for a P before it could
// read the clock), so it is C, started with pthread_create.

/*
#cgo LDFLAGS: -lpthread
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LAT_RUN_NS    2000000000LL
#define LAT_PERIOD_NS 1000000LL
#define LAT_MAX       4096

static long long lat_ping[LAT_MAX];
static int lat_nping, lat_failed;
static struct sockaddr_in lat_sin;
static pthread_t lat_th;

static long long lat_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Sends one byte every 1 ms for 2 s (absolute ticks; a tick missed while
// waiting for a reply is skipped) and times the reply: as gmprt_bench.c.
static void *lat_pinger(void *arg)
{
	(void)arg;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || connect(fd, (struct sockaddr *)&lat_sin, sizeof lat_sin)) {
		lat_failed = 1;
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	long long start = lat_clock(), next = start;
	while (next < start + LAT_RUN_NS && lat_nping < LAT_MAX) {
		struct timespec ts = {.tv_sec = next / 1000000000LL,
		                      .tv_nsec = next % 1000000000LL};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
			;
		char b = 'p';
		long long t = lat_clock();
		if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1) {
			lat_failed = 1;
			break;
		}
		long long now = lat_clock();
		lat_ping[lat_nping++] = now - t;
		while (next <= now)
			next += LAT_PERIOD_NS;
	}
	close(fd);
	return NULL;
}

static int lat_start(int port)
{
	lat_sin.sin_family = AF_INET;
	lat_sin.sin_port = htons((uint16_t)port);
	lat_sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return pthread_create(&lat_th, NULL, lat_pinger, NULL);
}

static int lat_join(void) { return pthread_join(lat_th, NULL); }
static int lat_count(void) { return lat_failed ? -1 : lat_nping; }
static long long lat_sample(int i) { return lat_ping[i]; }
*/
import "C"

import (
	"errors"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// latency: one LCG hog per P, a goroutine sleeping 1 ms in a loop for 2 s,
// and a goroutine echoing the C thread's 1-byte pings; p50/p99 lateness
// of both in us, and the hogs' steps per second.
func benchLatency(procs int) error {
	const runFor = 2 * time.Second
	const period = time.Millisecond
	const chunk = 10000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var stop int32
	var steps uint64
	var hogs, wg sync.WaitGroup
	hogs.Add(procs)
	wg.Add(2)
	var sleeps []int64
	var pongErr error
	start := time.Now()
	for i := 0; i < procs; i++ {
		go func(x uint64) {
			var n uint64
			for atomic.LoadInt32(&stop) == 0 {
				x = lcgSteps(x, chunk)
				n += chunk
			}
			atomic.AddUint64(&sink, x)
			atomic.AddUint64(&steps, n)
			hogs.Done()
		}(lcgSeed + uint64(i))
	}
	go func() { // the sleeper
		end := time.Now().Add(runFor)
		for t := time.Now(); t.Before(end); {
			deadline := t.Add(period)
			time.Sleep(period)
			t = time.Now()
			sleeps = append(sleeps, int64(t.Sub(deadline)))
		}
		wg.Done()
	}()
	go func() { // the ponger
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			pongErr = err
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		for {
			if n, err := c.Read(b); n != 1 || err != nil {
				return
			}
			if _, err := c.Write(b); err != nil {
				pongErr = err
				return
			}
		}
	}()
	if C.lat_start(C.int(ln.Addr().(*net.TCPAddr).Port)) != 0 {
		return errors.New("pthread_create failed")
	}
	wg.Wait()
	atomic.StoreInt32(&stop, 1)
	hogs.Wait()
	el := time.Since(start)
	C.lat_join()
	if pongErr != nil {
		return pongErr
	}
	n := int(C.lat_count())
	if n <= 0 || len(sleeps) == 0 {
		return errors.New("no samples")
	}
	pings := make([]int64, n)
	for i := range pings {
		pings[i] = int64(C.lat_sample(C.int(i)))
	}
	emitPcts(procs, sleeps, "sleep_us_p50", "sleep_us_p99")
	emitPcts(procs, pings, "ping_us_p50", "ping_us_p99")
	emit(procs, int64(steps), float64(steps)/el.Seconds(), "hog_steps/s")
	return nil
}

func emitPcts(procs int, v []int64, u50, u99 string) {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	n := len(v)
	emit(procs, int64(n), float64(v[n/2])/1e3, u50)
	emit(procs, int64(n), float64(v[n*99/100])/1e3, u99)
}
