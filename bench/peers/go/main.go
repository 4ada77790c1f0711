// Command gmprtbench is Go's side of the gmprt benchmark suite: the same
// work as bench/gmprt_bench.c, written against Go's own runtime, so that the
// two can be compared side by side on one machine. The cases are defined by
// their work in BENCHMARKS.md; this file owns the command line, the output
// line and the helpers that several cases share (the LCG, the clock, RSS).
//
// Usage: gmprtbench <name> <procs|all> [port]
//
// GOMAXPROCS is set to procs ("all" = runtime.NumCPU()). Each measured
// figure is one line on stdout and nothing else goes there:
//
//	bench=<name> procs=<P> n=<work count> value=<number> unit=<unit>
//
// Diagnostics go to stderr. Exit status: 0 on success, 1 when a case's own
// check fails (a wrong sum, a wrong count), 2 for a bad command line or a
// case this program does not implement (switch has no Go equivalent).
//
// echo is a server, not a measurement: "echo <procs|all> <port>" serves on
// 127.0.0.1:<port> until SIGTERM or SIGINT, prints nothing and exits 0;
// the external load client (bench/echo_client.c) prints the result. http
// and http-nethttp (the same server on net/http) are servers in the same
// way, loaded by wrk; bench/run.sh prints the result.
//
// With BENCH_TRACE=<path> in the environment, Go's execution tracer
// (runtime/trace) records the whole run into that file: bench/run.sh's
// trace case sets it, and GMP_TRACE for gmprt, to time both tracers.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"strconv"
	"strings"
	"time"
)

// The LCG of BENCHMARKS.md: s = s*lcgMul + lcgInc (mod 2^64), seeded 42.
const (
	lcgMul  = 6364136223846793005
	lcgInc  = 1442695040888963407
	lcgSeed = 42
)

// lcg is the pseudo-random sequence that draws steal's units and timers'
// sleeps. A draw first advances s, then maps it to 1..m.
type lcg struct{ s uint64 }

func (r *lcg) draw(m uint64) uint64 {
	r.s = r.s*lcgMul + lcgInc
	return 1 + (r.s>>33)%m
}

// lcgSteps runs n steps of the LCG from x: the unit of CPU work.
func lcgSteps(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x = x*lcgMul + lcgInc
	}
	return x
}

// A case runs its work with GOMAXPROCS already set to procs and reports
// through emit. It returns an error only when its own check fails.
type benchCase func(procs int) error

var cases = map[string]benchCase{
	"yield":     benchYield,
	"spawn":     benchSpawn,
	"skynet":    benchSkynet,
	"pingpong":  benchPingpong,
	"chan":      benchChan,
	"mpmc":      benchMPMC,
	"steal":     benchSteal,
	"mutex":     benchMutex,
	"timers":    benchTimers,
	"idle":      benchIdle,
	"syscall":   benchSyscall,
	"pool":      benchPool,
	"spawnwork": benchSpawnwork,
	"echo":      benchEcho,
	"latency":   benchLatency,
	"http":      benchHTTP,
	// Not a case of its own: http's work on net/http, a second peer.
	"http-nethttp": benchNetHTTP,
}

// curName is the case being run, for emit.
var curName string

// port is the command line's third argument, for the servers ("" when
// absent).
var port string

// emit prints one result line.
func emit(procs int, n int64, value float64, unit string) {
	fmt.Printf("bench=%s procs=%d n=%d value=%.3f unit=%s\n",
		curName, procs, n, value, unit)
}

// nsPer is the elapsed time in nanoseconds divided by n.
func nsPer(d time.Duration, n int64) float64 {
	return float64(d.Nanoseconds()) / float64(n)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e6
}

// statmRSS is the resident set size in bytes, from /proc/self/statm.
func statmRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("statm: %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}

// procStatusKiB reads one "<key>: <n> kB" line of /proc/self/status, such
// as VmRSS or VmHWM (the peak RSS).
func procStatusKiB(key string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key+":") {
			continue
		}
		fs := strings.Fields(line[len(key)+1:])
		if len(fs) == 0 {
			break
		}
		return strconv.ParseInt(fs[0], 10, 64)
	}
	return 0, fmt.Errorf("/proc/self/status: no %s", key)
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "gmprtbench: %s\n", msg)
	fmt.Fprintf(os.Stderr, "usage: %s <name> <procs|all> [port]\n", os.Args[0])
	os.Exit(2)
}

func main() {
	if len(os.Args) < 3 || len(os.Args) > 4 {
		usage("wrong number of arguments")
	}
	name := os.Args[1]
	run, ok := cases[name]
	if !ok {
		switch name {
		case "switch":
			usage("switch has no Go equivalent (see bench/peers/boost)")
		default:
			usage("unknown case " + strconv.Quote(name))
		}
	}
	procs := runtime.NumCPU()
	if os.Args[2] != "all" {
		p, err := strconv.Atoi(os.Args[2])
		if err != nil || p < 1 {
			usage("procs must be a positive integer or \"all\"")
		}
		procs = p
	}
	// The port is only for echo, which needs one; the other cases ignore it.
	if len(os.Args) == 4 {
		port = os.Args[3]
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			usage("port must be in 1..65535")
		}
	}
	if (name == "echo" || name == "http" || name == "http-nethttp") &&
		port == "" {
		usage(name + " needs a port")
	}
	runtime.GOMAXPROCS(procs)
	curName = name
	stopTrace := startTrace()
	err := run(procs)
	stopTrace()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gmprtbench: %s: %v\n", name, err)
		os.Exit(1)
	}
}

// startTrace starts runtime/trace into $BENCH_TRACE when it is set;
// the function it returns stops it and closes the file.
func startTrace() func() {
	path := os.Getenv("BENCH_TRACE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = trace.Start(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gmprtbench: BENCH_TRACE: %v\n", err)
		os.Exit(1)
	}
	return func() {
		trace.Stop()
		f.Close()
	}
}
