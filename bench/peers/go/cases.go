// The cases of BENCHMARKS.md, one function each, in the table's order.
// Every timed case sets its wait group's count before the clock starts,
// starts the clock just before the first spawn and stops it when main
// wakes. Work that the compiler could drop is stored into a sink.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sink receives results nobody reads, so that the work producing them stays.
var sink uint64

// yield: 2 goroutines each call runtime.Gosched 5,000,000 times.
func benchYield(procs int) error {
	const perG = 5000000
	var wg sync.WaitGroup
	wg.Add(2)
	start := time.Now()
	for k := 0; k < 2; k++ {
		go func() {
			for i := 0; i < perG; i++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	emit(procs, 2*perG, nsPer(el, 2*perG), "ns/yield")
	return nil
}

// spawn: main spawns 1,000,000 goroutines that only signal a wait group.
func benchSpawn(procs int) error {
	const n = 1000000
	var wg sync.WaitGroup
	wg.Add(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		go func() { wg.Done() }()
	}
	wg.Wait()
	el := time.Since(start)
	emit(procs, n, nsPer(el, n), "ns/goroutine")
	return nil
}

// skynetNode sums the leaves num..num+size-1: a leaf sends its own index,
// an inner node spawns 10 children that send on its unbuffered channel.
func skynetNode(num, size int64, out chan<- int64) {
	if size == 1 {
		out <- num
		return
	}
	c := make(chan int64)
	child := size / 10
	for i := int64(0); i < 10; i++ {
		go skynetNode(num+i*child, child, c)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-c
	}
	out <- sum
}

// skynet: 1,000,000 leaves, fan-out 10; the root is itself a goroutine.
func benchSkynet(procs int) error {
	const leaves = 1000000
	const want = int64(leaves) * (leaves - 1) / 2 // 499999500000
	out := make(chan int64)
	start := time.Now()
	go skynetNode(0, leaves, out)
	sum := <-out
	el := time.Since(start)
	if sum != want {
		return fmt.Errorf("sum %d, want %d", sum, want)
	}
	emit(procs, leaves, ms(el), "ms")
	return nil
}

// pingpong: A sends i on ping and checks that B echoes it on pong.
func benchPingpong(procs int) error {
	const n = 1000000
	ping := make(chan int)
	pong := make(chan int)
	var bad int64 // written by A, read by main after wg.Wait
	var wg sync.WaitGroup
	wg.Add(2)
	start := time.Now()
	go func() { // A
		for i := 0; i < n; i++ {
			ping <- i
			if v := <-pong; v != i {
				bad++
			}
		}
		wg.Done()
	}()
	go func() { // B
		for i := 0; i < n; i++ {
			pong <- <-ping
		}
		wg.Done()
	}()
	wg.Wait()
	el := time.Since(start)
	if bad != 0 {
		return fmt.Errorf("%d round trips echoed the wrong value", bad)
	}
	emit(procs, n, nsPer(el, n), "ns/roundtrip")
	return nil
}

// chan: 1 producer sends 0..n-1 over a channel of capacity 1024 to 1
// consumer, then closes it; the consumer's total is checked.
func benchChan(procs int) error {
	const n = 10000000
	const want = int64(n) * (n - 1) / 2
	ch := make(chan int64, 1024)
	var total int64 // written by the consumer before wg.Done
	var wg sync.WaitGroup
	wg.Add(2)
	start := time.Now()
	go func() {
		for i := int64(0); i < n; i++ {
			ch <- i
		}
		close(ch)
		wg.Done()
	}()
	go func() {
		var sum int64
		for v := range ch {
			sum += v
		}
		total = sum
		wg.Done()
	}()
	wg.Wait()
	el := time.Since(start)
	if total != want {
		return fmt.Errorf("sum %d, want %d", total, want)
	}
	emit(procs, n, nsPer(el, n), "ns/item")
	return nil
}

// mpmc: 4 producers each send their quarter of 0..n-1 on one channel of
// capacity 1024; 4 consumers receive until main closes it after the
// producers finish. The consumers' total is checked.
func benchMPMC(procs int) error {
	const n = 10000000
	const sides = 4
	const want = int64(n) * (n - 1) / 2
	ch := make(chan int64, 1024)
	var total int64 // atomic: each consumer adds its sum once
	var prod, cons sync.WaitGroup
	prod.Add(sides)
	cons.Add(sides)
	start := time.Now()
	for k := 0; k < sides; k++ {
		go func() {
			var sum int64
			for v := range ch {
				sum += v
			}
			atomic.AddInt64(&total, sum)
			cons.Done()
		}()
	}
	for k := int64(0); k < sides; k++ {
		go func(lo, hi int64) {
			for i := lo; i < hi; i++ {
				ch <- i
			}
			prod.Done()
		}(k*n/sides, (k+1)*n/sides)
	}
	prod.Wait()
	close(ch)
	cons.Wait()
	el := time.Since(start)
	if total != want {
		return fmt.Errorf("sum %d, want %d", total, want)
	}
	emit(procs, n, nsPer(el, n), "ns/item")
	return nil
}

// steal: one spawned goroutine spawns 10,000 tasks; task i runs
// units*10,000 LCG steps from x = i, units drawn in 1..100 in task order.
// The runner turns the times at procs=1 and procs=all into a speedup.
func benchSteal(procs int) error {
	const tasks = 10000
	const stepsPerUnit = 10000
	const wantUnits = 500479
	slots := make([]uint64, tasks) // task i stores its final x in slots[i]
	var units uint64               // the spawner's total, read after spawned
	spawned := make(chan struct{}) // closed once units is stored
	var wg sync.WaitGroup
	wg.Add(tasks)
	start := time.Now()
	go func() {
		r := lcg{lcgSeed}
		for i := 0; i < tasks; i++ {
			u := r.draw(100)
			units += u
			go func(i int, u uint64) {
				slots[i] = lcgSteps(uint64(i), int(u)*stepsPerUnit)
				wg.Done()
			}(i, u)
		}
		close(spawned)
	}()
	wg.Wait()
	el := time.Since(start)
	<-spawned // the tasks' Done calls do not order the spawner's last store
	if units != wantUnits {
		return fmt.Errorf("units sum to %d, want %d", units, wantUnits)
	}
	for _, x := range slots {
		sink ^= x
	}
	emit(procs, tasks, ms(el), "ms")
	return nil
}

// mutex: 1,000 goroutines each lock, increment a shared counter, unlock,
// 10,000 times; the counter is checked.
func benchMutex(procs int) error {
	const gs, perG = 1000, 10000
	const n = gs * perG
	var mu sync.Mutex
	var counter int64 // guarded by mu
	var wg sync.WaitGroup
	wg.Add(gs)
	start := time.Now()
	for k := 0; k < gs; k++ {
		go func() {
			for i := 0; i < perG; i++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if counter != n {
		return fmt.Errorf("counter %d, want %d", counter, n)
	}
	emit(procs, n, nsPer(el, n), "ns/op")
	return nil
}

// timers: 100,000 goroutines each sleep 1..50 ms (drawn in goroutine order,
// before the clock) and record how late the sleep returned.
func benchTimers(procs int) error {
	const n = 100000
	r := lcg{lcgSeed}
	sleeps := make([]time.Duration, n)
	for i := range sleeps {
		sleeps[i] = time.Duration(r.draw(50)) * time.Millisecond
	}
	late := make([]time.Duration, n) // goroutine i writes late[i]
	var wg sync.WaitGroup
	wg.Add(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		go func(i int) {
			t0 := time.Now()
			time.Sleep(sleeps[i])
			late[i] = time.Since(t0) - sleeps[i]
			wg.Done()
		}(i)
	}
	wg.Wait()
	el := time.Since(start)
	var sum time.Duration
	early := 0
	for _, d := range late {
		sum += d
		if d < 0 {
			early++
		}
	}
	if early > 0 {
		return fmt.Errorf("%d sleeps returned early", early)
	}
	emit(procs, n, ms(el), "ms")
	emit(procs, n, float64(sum.Nanoseconds())/n/1e3, "us_late")
	return nil
}

// idle: 100,000 goroutines park on a receive from one channel; the RSS they
// add, per goroutine, is measured 20 ms after the last one has reported in.
func benchIdle(procs int) error {
	const n = 100000
	ch := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	before, err := statmRSS()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		go func() {
			started.Done()
			<-ch
			done.Done()
		}()
	}
	started.Wait()
	time.Sleep(20 * time.Millisecond) // let the last ones reach the receive
	after, err := statmRSS()
	if err != nil {
		return err
	}
	close(ch)
	done.Wait()
	emit(procs, n, float64(after-before)/n, "bytes/goroutine")
	return nil
}

// syscall: T0 is one goroutine's 200,000,000 LCG steps alone. Then A makes
// 1,000,000 getppid calls through Go's syscall bracket while B repeats the
// steps, both timed from their common start.
func benchSyscall(procs int) error {
	const calls = 1000000
	const steps = 200000000
	var wg sync.WaitGroup

	// The floor under ns/syscall: the same calls with no bracket, alone.
	var bare time.Duration
	wg.Add(1)
	go func() {
		t := time.Now()
		for i := 0; i < calls; i++ {
			syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
		}
		bare = time.Since(t)
		wg.Done()
	}()
	wg.Wait()

	wg.Add(1)
	start := time.Now()
	go func() {
		sink ^= lcgSteps(lcgSeed, steps)
		wg.Done()
	}()
	wg.Wait()
	t0 := time.Since(start)

	var ta, tb time.Duration // each written by its goroutine before Done
	wg.Add(2)
	start = time.Now()
	go func() { // A
		for i := 0; i < calls; i++ {
			syscall.Syscall(syscall.SYS_GETPPID, 0, 0, 0)
		}
		ta = time.Since(start)
		wg.Done()
	}()
	go func() { // B
		x := lcgSteps(lcgSeed, steps)
		tb = time.Since(start)
		atomic.AddUint64(&sink, x)
		wg.Done()
	}()
	wg.Wait()
	emit(procs, calls, nsPer(ta, calls), "ns/syscall")
	emit(procs, calls, nsPer(bare, calls), "ns/bare")
	emit(procs, calls, nsPer(ta-bare, calls), "ns/own")
	emit(procs, steps, float64(tb)/float64(t0), "slowdown")
	return nil
}

// The tasks of pool and spawnwork: task i runs taskSteps LCG steps from
// x = i and adds its x to sink atomically; the tasks' xs sum to workSum
// (mod 2^64).
const (
	workTasks = 1000000
	taskSteps = 1000
	workSum   = 4605739820768478432
)

func workTask(i int) {
	atomic.AddUint64(&sink, lcgSteps(uint64(i), taskSteps))
}

// emitWork checks the tasks' sum, then prints the time and the peak RSS
// growth of pool or spawnwork.
func emitWork(procs int, el time.Duration, rss0KiB int64) error {
	hwm, err := procStatusKiB("VmHWM")
	if err != nil {
		return err
	}
	if s := atomic.LoadUint64(&sink); s != workSum {
		return fmt.Errorf("tasks sum to %d, want %d", s, uint64(workSum))
	}
	emit(procs, workTasks, ms(el), "ms")
	emit(procs, workTasks, float64(hwm-rss0KiB), "KiB")
	return nil
}

// pool: main submits the tasks through one channel of capacity 1024 read by
// 10,000 worker goroutines.
func benchPool(procs int) error {
	const workers = 10000
	rss0, err := procStatusKiB("VmRSS")
	if err != nil {
		return err
	}
	tasks := make(chan int, 1024)
	var wg sync.WaitGroup
	wg.Add(workTasks)
	start := time.Now()
	for w := 0; w < workers; w++ {
		go func() {
			for i := range tasks {
				workTask(i)
				wg.Done()
			}
		}()
	}
	for i := 0; i < workTasks; i++ {
		tasks <- i
	}
	close(tasks)
	wg.Wait()
	el := time.Since(start)
	return emitWork(procs, el, rss0)
}

// spawnwork: the same tasks, one goroutine each, spawned by main.
func benchSpawnwork(procs int) error {
	rss0, err := procStatusKiB("VmRSS")
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(workTasks)
	start := time.Now()
	for i := 0; i < workTasks; i++ {
		go func(i int) {
			workTask(i)
			wg.Done()
		}(i)
	}
	wg.Wait()
	el := time.Since(start)
	return emitWork(procs, el, rss0)
}

// echo: a TCP echo server on 127.0.0.1:port, one goroutine per connection
// echoing whatever it reads (4 KiB buffer), until SIGTERM or SIGINT. It
// prints nothing: the external load client measures the round trips. Go's
// listener sets SO_REUSEADDR and its connections TCP_NODELAY by default.
func benchEcho(procs int) error {
	return serveConns(echoConn)
}

// serveConns listens on 127.0.0.1:port and runs conn in a goroutine of its
// own for each connection, until SIGTERM or SIGINT.
func serveConns(conn func(net.Conn)) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		return err
	}
	failed := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Temporary() {
					continue // ECONNABORTED and the like, as net/http
				}
				failed <- err
				return
			}
			go conn(c)
		}
	}()
	select {
	case <-stop:
		return nil
	case err := <-failed:
		return err
	}
}

// echoConn writes back what it reads until end of file or an error.
func echoConn(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// http: an HTTP/1.1 keep-alive server on 127.0.0.1:port, one goroutine per
// connection, answering every GET with the fixed 13-byte response, until
// SIGTERM or SIGINT; wrk measures it. This is gmprt_bench.c's hand parser
// on a raw net.Conn, line for line (see http_conn there for what it
// knows); the case http-nethttp is the same server on net/http.
const (
	httpBuf = 4096
	httpOut = 8192
)

var httpResp = []byte("HTTP/1.1 200 OK\r\n" +
	"Content-Length: 13\r\n" +
	"\r\n" +
	"Hello, world!")

var httpEnd = []byte("\r\n\r\n")
var httpGet = []byte("GET ")

func benchHTTP(procs int) error {
	return serveConns(httpConn)
}

func httpConn(c net.Conn) {
	defer c.Close()
	in := make([]byte, httpBuf)
	out := make([]byte, 0, httpOut)
	have := 0 // in[:have]: unanswered bytes
	scan := 0 // in[:scan] holds no "\r\n\r\n"
	for {
		// A TCP net.Conn returns data or an error, never both.
		n, err := c.Read(in[have:])
		if err != nil {
			return
		}
		have += n
		req := 0 // where the next request starts
		out = out[:0]
		bad := false
		for {
			e := bytes.Index(in[scan:have], httpEnd)
			if e < 0 {
				break
			}
			if !bytes.HasPrefix(in[req:have], httpGet) {
				bad = true
				break
			}
			// Only when more requests came in one read than fill out.
			if len(out)+len(httpResp) > httpOut {
				if _, werr := c.Write(out); werr != nil {
					return
				}
				out = out[:0]
			}
			out = append(out, httpResp...)
			req = scan + e + 4
			scan = req
		}
		if len(out) > 0 {
			if _, werr := c.Write(out); werr != nil {
				return
			}
		}
		if bad {
			return
		}
		// Keep the partial request; its end, when it comes, can begin at
		// most 3 bytes before what is here now.
		have = copy(in, in[req:have])
		scan = 0
		if have > 3 {
			scan = have - 3
		}
		if have == httpBuf {
			return // a request larger than the buffer
		}
	}
}

// http-nethttp: the http case's work on net/http, the server Go programs
// use. net/http adds its own Date and Content-Type headers.
func benchNetHTTP(procs int) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "13")
			w.Write(httpResp[len(httpResp)-13:])
		})}
	failed := make(chan error, 1)
	go func() { failed <- srv.Serve(ln) }()
	select {
	case <-stop:
		return nil
	case err := <-failed:
		return err
	}
}
