/*
 * gmprt.h - Go's goroutine runtime as an embeddable C library.
 *
 * The contract of every name here is the project's API document; this header
 * documents each call in place. Conventions:
 *   - Calls that can fail return 0 (or a count) or a negative GMP_E* code;
 *     a failed call changes nothing. errno is never the error channel.
 *   - Durations are int64_t nanoseconds.
 *   - Every blocking call works in a goroutine (parks it) and on a plain OS
 *     thread (blocks the thread).
 */
#ifndef GMPRT_H
#define GMPRT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GMP_BUILDING_LIBRARY)
#define GMP_EXTERN __attribute__((visibility("default")))
#else
#define GMP_EXTERN
#endif

/* Error codes: -errno where errno has the meaning; GMP_ECLOSED sits in a
 * range errno does not use. */
#define GMP_EINVAL    (-EINVAL)
#define GMP_ENOMEM    (-ENOMEM)
#define GMP_EAGAIN    (-EAGAIN)
#define GMP_ETIMEDOUT (-ETIMEDOUT)
#define GMP_EPERM     (-EPERM)
#define GMP_EBUSY     (-EBUSY)
#define GMP_EBADF     (-EBADF)
#define GMP_ECLOSED   (-0x4701)

#define GMP_FOREVER   ((int64_t)-1)

/* Names every GMP_E* code (and any other negative errno); never NULL. */
GMP_EXTERN const char *gmp_strerror(int err);

/* ---- Version ------------------------------------------------------------ */

/* The version of this header. CMakeLists.txt's project(VERSION) must say
 * the same (configuring fails otherwise); the shared library's SONAME is
 * libgmprt.so.<major>. Named GMPRT_ and gmp_runtime_: GNU MP's <gmp.h>
 * defines gmp_version and __GNU_MP_VERSION*, and a program may include both
 * headers. */
#define GMPRT_VERSION_MAJOR 0
#define GMPRT_VERSION_MINOR 1
#define GMPRT_VERSION_PATCH 0
#define GMPRT_VERSION       "0.1.0"
/* major * 10000 + minor * 100 + patch: 0.1.0 is 100, 1.2.3 is 10203. */
#define GMPRT_VERSION_NUMBER                                                 \
    (GMPRT_VERSION_MAJOR * 10000 + GMPRT_VERSION_MINOR * 100 +               \
     GMPRT_VERSION_PATCH)

/* The version of the library the program runs against, which may be newer
 * than the header it was built with: "major.minor.patch" (GMPRT_VERSION of
 * the library's own build; static storage, never NULL) and the same as
 * GMPRT_VERSION_NUMBER. Context: any thread, runtime running or not. */
GMP_EXTERN const char *gmp_runtime_version(void);
GMP_EXTERN int gmp_runtime_version_number(void);

/* ---- Lifecycle ---------------------------------------------------------- */

typedef struct gmp_config {
    int    procs;        /* Ps, 1..256; 0: $GMP_MAXPROCS, else the online
                            CPUs this process may run on (its affinity
                            mask, as Go's NumCPU) lowered to its cgroup's
                            CPU limit, as Go 1.25 (docs/API.md)          */
    size_t stack_size;   /* goroutine stack incl. guard; 0: 128 KiB
                            (Boost.Context's default). Otherwise 16 KiB
                            ..1 GiB, rounded up to pages. A stack cannot
                            grow: code that recurses deep or keeps big
                            arrays on the stack needs more. Smaller packs
                            more stacks per page table, which some VMs
                            charge for (docs/design.md). The guard is an
                            eighth of it, a page to 64 KiB (16 KiB of the
                            default). Overflowing it is the fatal error
                            "stack overflow in goroutine N" when the
                            first write below the stack lands in the
                            guard: always for code built with
                            -fstack-clash-protection (as the library is;
                            build programs so too), and without it for
                            frames smaller than the guard. A bigger
                            frame built without it may write into the
                            next goroutine's stack unnoticed.         */
    int    max_threads;  /* Ms; 0: 10000. Needing more is a fatal error
                            ("thread exhaustion"), as in Go. Ms are
                            never freed, and one may be started while
                            another is on its way to idle: leave room
                            beyond procs and the Ms held by system
                            calls (a few per P)                       */
    int    async_preempt_off; /* nonzero: no preemption by signal (as
                            GMP_DEBUG=asyncpreemptoff=1); goroutines are
                            then preempted only at runtime calls          */
    int    dump_on_sigquit; /* nonzero: SIGQUIT writes gmp_dump's report
                            to stderr, calls the program's own SIGQUIT
                            handler if it had one, and exits with status
                            2, as Go does; the previous handler is
                            restored at stop                             */
    /* Embedding hooks, each optional (NULL: none). They are process-wide:
     * set when the runtime starts and kept until the next one starts. All
     * get hook_ctx as their last argument.
     *   thread_start / thread_stop: called on every thread the runtime
     *     creates (its Ms and its monitor), first thing after it starts
     *     and last thing before it exits, so that a garbage collector can
     *     register it; they run on that thread and must not call gmprt.
     *     After gmp_shutdown (or gmp_main) returns, every start has had
     *     its stop, except for threads gmp_main abandoned while they ran a
     *     goroutine: those call thread_stop when they finally leave.
     *   mem_alloc / mem_free (both or neither): the runtime's own objects
     *     (scheduler, thread and goroutine records, timer heaps, poller
     *     tables, channels, pools). mem_alloc returns memory aligned to 64
     *     bytes, or NULL; mem_free gets the size that was asked for.
     *     Everything is freed by the time gmp_shutdown returns, except
     *     what the program still holds (channels, pools it did not free).
     *   stack_alloc / stack_free (both or neither): goroutine stacks (in
     *     chunks of many) and signal stacks: page-aligned memory the
     *     runtime may mprotect/madvise (guard pages, which it removes
     *     again before stack_free); it is committed as it is touched only
     *     if the host's memory is.
     *   The memory hooks run on the thread that needs the memory: a
     *   goroutine (gmp_go's records, channels, keys, a large select), a
     *   runtime thread on its own stack outside any goroutine (the
     *   scheduler: a stack chunk's record, timer heaps, wait records),
     *   the monitor thread, or a plain thread calling gmprt; sometimes
     *   with one of the runtime's spin locks held. They must not call
     *   gmprt nor wait for anything a goroutine does, and a goroutine is
     *   not preempted inside them (so a hook may take its own locks).
     *   Every record of the runtime that holds the program's pointers
     *   (goroutine records with gmp_go's argument, channel buffers,
     *   timers) comes from mem_alloc: a collector that serves it with
     *   memory it scans but never frees on its own (libgc:
     *   GC_MALLOC_UNCOLLECTABLE) sees those pointers as roots. Such a
     *   host may write-protect that memory and take the fault of the
     *   next store (libgc's incremental mode): the runtime hands every
     *   fault that is no stack overflow to the SIGSEGV handler the
     *   program had before the runtime started, and never has the kernel
     *   write there. The hooks that run on a runtime thread's own stack
     *   run where gmp_stacks_foreach does not look. examples/gc_boehm.c
     *   has the whole recipe for libgc. */
    void  (*thread_start)(void *ctx);
    void  (*thread_stop)(void *ctx);
    void *(*mem_alloc)(size_t size, void *ctx);
    void  (*mem_free)(void *p, size_t size, void *ctx);
    void *(*stack_alloc)(size_t size, void *ctx);
    void  (*stack_free)(void *p, size_t size, void *ctx);
    void  *hook_ctx;
    int    keep_nofile_limit; /* nonzero: leave RLIMIT_NOFILE as it is (see
                            gmp_main on the open-file limit)               */
    int    sched_metrics; /* nonzero: record the timed metrics of
                            gmp_metrics (scheduling latency, time in
                            system calls), at a clock read per goroutine
                            start and two per system-call bracket;
                            GMP_DEBUG=schedmetrics=1 turns them on too  */
    /* Which code a preemption signal may stop (see Preemption below);
     * NULL or "": the main program only, never a shared object. A
     * ':'-separated list adds every shared object whose file name
     * contains one of its entries; the entry "*" allows every object but
     * the system libraries (libc, the loader, libstdc++, ...), "-" takes
     * the main program away. At most 255 characters (GMP_EINVAL).
     * GMP_DEBUG=preemptobjs=<list> replaces it. docs/design.md has the
     * exact rule. */
    const char *preempt_objects;
    /* Optional (NULL: none): describes a goroutine in gmp_dump, the
     * SIGQUIT dump and the deadlock report, after the runtime's lines for
     * it: a host prints its own traceback (an interpreter's) by calling
     * put(w, text) as often as it likes. It gets the goroutine's id and
     * label (gmp_set_label; NULL if none) and hook_ctx. It may run inside
     * a signal handler or a fatal report while the goroutine runs or
     * changes: it must only read, must not block, allocate or call gmprt,
     * and should check what it reads. */
    void  (*describe)(uint64_t goid, const char *label,
                      void (*put)(void *w, const char *text), void *w,
                      void *ctx);
    /* Room for fields later versions add: all-zero means "defaults", so a
     * program built against this header keeps working with a newer library. */
    void  *reserved_[2];
} gmp_config_t;

/* Starts the runtime, runs fn(arg) as the main goroutine on a runtime
 * thread, and returns 0 once fn returns. Goroutines still alive then are
 * abandoned, as when Go's main returns: idle threads stop and are joined
 * before gmp_main returns; a thread still running a goroutine stops at that
 * goroutine's next scheduling point, and the last one out frees the runtime.
 * A later gmp_init/gmp_main first waits for such stragglers.
 * Context: a thread that is not a goroutine. Returns 0, GMP_EINVAL (fn
 * NULL, bad cfg), GMP_EBUSY (a runtime is running, or called from a
 * goroutine), GMP_ENOMEM, GMP_EAGAIN (no thread could be started, after
 * retries), -EMFILE or -ENFILE (no descriptor for the poller). A failed
 * start leaves nothing behind. cfg may be NULL.
 *
 * What a running program gets when the system says no, as in Go:
 *   - A thread the runtime needs and cannot create (pthread_create fails:
 *     RLIMIT_NPROC, a container's pids limit) is tried again while the
 *     error is EAGAIN, 20 times over about 0.2 s, then it is a fatal error
 *     ("gmprt: fatal error: failed to create new OS thread (have N
 *     already; errno=E)"): a goroutine waiting for that thread would
 *     otherwise wait for ever. Needing more than max_threads threads is
 *     the fatal error "thread exhaustion".
 *   - Memory: a call that can report it does (GMP_ENOMEM from gmp_go,
 *     gmp_chan_make's NULL, ...). Where a call has no way to (a timed
 *     wait's timer, a goroutine's stack, a thread's record), running out
 *     is the fatal error "out of memory: <what>", never a wait without
 *     its timeout or a quietly different behaviour.
 *   - A stack overflow: see stack_size above.
 * A fatal error prints its line on stderr and aborts.
 *
 * The open-file limit: starting a runtime raises the soft RLIMIT_NOFILE
 * to the hard limit, as Go does, and stopping it restores the old one
 * (unless the program changed it meanwhile); a child forked meanwhile
 * gets the old limit back at once, but one started by posix_spawn (or
 * system, popen) keeps the raised one. keep_nofile_limit turns this
 * off. */
GMP_EXTERN int gmp_main(void (*fn)(void *), void *arg,
                        const gmp_config_t *cfg);

/* Starts the runtime in the background; the caller stays an ordinary
 * thread and may spawn goroutines with gmp_go. Returns 0, GMP_EINVAL (bad
 * cfg), GMP_EBUSY (already running), GMP_EPERM (called from a goroutine),
 * GMP_ENOMEM, GMP_EAGAIN, -EMFILE, -ENFILE, as gmp_main. */
GMP_EXTERN int gmp_init(const gmp_config_t *cfg);

/* Waits until every goroutine has finished, then stops every runtime
 * thread, joins it and frees everything. Returns 0, GMP_EPERM (called from
 * a goroutine, or no runtime started by gmp_init is running). */
GMP_EXTERN int gmp_shutdown(void);

/* ---- Goroutines --------------------------------------------------------- */

/* Starts fn(arg) as a new goroutine. From a goroutine the new G goes to the
 * caller's P's runnext (it runs next, in Go's order); from any other thread
 * it goes to the global run queue and an idle P is woken. The stack is
 * bound when the goroutine first runs, so a burst of spawns costs only
 * descriptors; a stack that cannot be mapped then is a fatal error. Returns
 * 0, GMP_EINVAL (fn NULL), GMP_EPERM (runtime not running), GMP_ENOMEM (no
 * descriptor). */
GMP_EXTERN int gmp_go(void (*fn)(void *), void *arg);

/* What gmp_go_attr may set for one goroutine; zero means the runtime's. */
typedef struct gmp_goattr {
    size_t   stack_size;    /* its stack, guard included: 16 KiB..1 GiB,
                               rounded up to pages (gmp_config_t's
                               stack_size has the rules); 0: the runtime's.
                               A size other than the runtime's is a mapping
                               of the goroutine's own, made when it first
                               runs and unmapped when it ends: for the few
                               that need a deep stack (an interpreter) or
                               a small one, not for every goroutine (Go,
                               whose stacks grow, has no need of it). */
    uint64_t reserved_[3];  /* zero */
} gmp_goattr_t;

/* gmp_go with attributes (attr NULL: gmp_go). Returns as gmp_go, and
 * GMP_EINVAL for a stack size out of range or a reserved field set. */
GMP_EXTERN int gmp_go_attr(void (*fn)(void *), void *arg,
                           const gmp_goattr_t *attr);

/* Go's runtime.Gosched: the caller goes to the global run queue and others
 * run. Outside a goroutine it yields the thread (sched_yield). */
GMP_EXTERN void gmp_yield(void);

/* The current goroutine's id (1, 2, ...); 0 outside a goroutine (also on
 * a runtime thread's own stack, where the memory hooks may run, and on a
 * signal stack). */
GMP_EXTERN uint64_t gmp_id(void);

/* Names the running goroutine in gmp_dump, the SIGQUIT dump, the
 * deadlock report, schedtrace's detail and gdb's goroutine list, until the
 * next call or the goroutine's end (NULL: no name). The string is not
 * copied: it must stay as it is meanwhile. Outside a goroutine it does
 * nothing. gmp_label returns the running goroutine's (NULL: none). */
GMP_EXTERN void gmp_set_label(const char *label);
GMP_EXTERN const char *gmp_label(void);

/* Number of Ps of the running runtime; 0 when none is running. With the
 * default procs it follows the cgroup's CPU limit while the runtime runs
 * (gmp_config_t.procs, docs/API.md). */
GMP_EXTERN int gmp_procs(void);

/* Goroutines started and not yet finished; 0 when no runtime is running. */
GMP_EXTERN int64_t gmp_num_goroutines(void);

/* Monotonic clock in nanoseconds. */
GMP_EXTERN int64_t gmp_nanotime(void);

/* ---- Channels and select ------------------------------------------------ */

/* Go's channels. A channel carries elements of elem_size bytes (0: a
 * signal-only channel, elem may then be NULL), copied in and out by value.
 * cap 0 is unbuffered: a send completes when a receiver takes the value.
 * Every call works in a goroutine (it parks) and on a plain thread (it
 * sleeps), so host threads and goroutines can talk over one channel.
 * Waiters are served first come, first served. */
typedef struct gmp_chan gmp_chan_t;

/* NULL when the size overflows or memory is short. */
GMP_EXTERN gmp_chan_t *gmp_chan_make(size_t elem_size, size_t cap);
/* 0 once the value is delivered or buffered; GMP_ECLOSED if the channel is
 * or becomes closed (nothing is sent; Go panics instead); GMP_EINVAL for a
 * NULL channel, or a NULL elem with elem_size > 0. */
GMP_EXTERN int gmp_chan_send(gmp_chan_t *c, const void *elem);
/* 0 with a value in *elem; GMP_ECLOSED once the channel is closed and
 * drained, with *elem zeroed; GMP_EINVAL as for send. elem may be NULL to
 * drop the value. */
GMP_EXTERN int gmp_chan_recv(gmp_chan_t *c, void *elem);
/* As send and recv, but never block: GMP_EAGAIN when they would. */
GMP_EXTERN int gmp_chan_trysend(gmp_chan_t *c, const void *elem);
GMP_EXTERN int gmp_chan_tryrecv(gmp_chan_t *c, void *elem);
/* Wakes every waiter: receivers get what is buffered, then GMP_ECLOSED;
 * blocked senders get GMP_ECLOSED. GMP_ECLOSED if already closed. */
GMP_EXTERN int gmp_chan_close(gmp_chan_t *c);
/* For a channel nobody uses any more (no waiter, no later call). NULL is
 * ignored. */
GMP_EXTERN void gmp_chan_free(gmp_chan_t *c);
/* Buffered elements now, and the capacity (0 for NULL). */
GMP_EXTERN size_t gmp_chan_len(const gmp_chan_t *c);
GMP_EXTERN size_t gmp_chan_cap(const gmp_chan_t *c);

enum { GMP_SEND = 1, GMP_RECV = 2 };

typedef struct gmp_case {
    gmp_chan_t *chan;   /* NULL: never ready (Go's nil channel) */
    int         op;     /* GMP_SEND or GMP_RECV */
    void       *elem;   /* value to send, or buffer to receive into */
    int         result; /* out, for the chosen case: 0 or GMP_ECLOSED */
} gmp_case_t;

/* Go's select: waits until one case can proceed, performs exactly that
 * one and returns its index. Among several ready cases it picks uniformly
 * at random. A send on a closed channel is ready: chosen, it sends nothing
 * and sets result = GMP_ECLOSED; a receive on a closed, drained channel
 * zeroes *elem and sets GMP_ECLOSED. timeout_ns: GMP_FOREVER waits for
 * ever; any other value <= 0 polls once and returns GMP_EAGAIN if nothing
 * is ready (Go's default case); a positive timeout returns GMP_ETIMEDOUT
 * when it expires, never before timeout_ns have passed. gmp_select(NULL, 0,
 * GMP_FOREVER) blocks for ever, as Go's select {}. GMP_EINVAL for a bad op,
 * NULL cases with n > 0, or a NULL elem on a send case with a payload. A
 * channel may appear in several cases. */
GMP_EXTERN int gmp_select(gmp_case_t *cases, size_t n, int64_t timeout_ns);

/* ---- Blocking system calls ---------------------------------------------- */

/* Go's entersyscall / exitsyscall. Bracket any call that may block the
 * thread: inside, the goroutine's P is free, and if the call blocks the
 * runtime's monitor thread hands the P to another thread within about a
 * scheduling round, so the other goroutines keep running. A short call
 * costs two atomic operations: on the way out the goroutine takes its P
 * back if nobody took it, else any idle P, else it waits in the global
 * queue (possibly resuming on another thread). errno is kept across
 * gmp_syscall_exit.
 * Inside a bracket the thread counts as a plain thread (gmp_go queues
 * globally, gmp_yield yields the thread, a wait sleeps the thread).
 * Brackets do not nest: an enter inside one, or an exit outside one, does
 * nothing. Outside a goroutine both do nothing. */
GMP_EXTERN void gmp_syscall_enter(void);
GMP_EXTERN void gmp_syscall_exit(void);

/* A goroutine may come back on another thread from any call that can
 * switch (gmp_syscall_exit, gmp_yield, a wait), and after a preemption
 * (see Preemption below): thread-local variables,
 * errno among them, then belong to the new thread. errno is carried
 * across gmp_syscall_exit, but read it through a fresh call: glibc and
 * musl declare __errno_location const, so a compiler may reuse the
 * address of errno it computed earlier in the same function, on the old
 * thread.
 * Wraps one call that returns a value, e.g.
 *     ssize_t n = GMP_SYSCALL(read(fd, buf, len));
 * (a GNU C statement expression: gcc and clang). */
#define GMP_SYSCALL(call)                                                    \
    __extension__({                                                          \
        gmp_syscall_enter();                                                 \
        __typeof__(call) gmp_syscall_r_ = (call);                            \
        gmp_syscall_exit();                                                  \
        gmp_syscall_r_;                                                      \
    })

/* ---- Preemption ---------------------------------------------------------- */

/* A goroutine that runs 10 ms without giving up its P is preempted: at its
 * next runtime call (every gmp_ call checks on entry, except those that
 * only read what no other goroutine changes, gmp_id, gmp_procs,
 * gmp_should_yield, gmp_label, gmp_stack_bounds,
 * gmp_chan_cap, gmp_pool_cap, gmp_getspecific, gmp_strerror and the
 * version calls, and the unlocks, which a loop pairs with a lock;
 * gmp_stacks_foreach never switches, for a collector that calls it with
 * its own lock held), or, for a loop that makes none, by a signal (SIGURG,
 * as Go) that the runtime's monitor sends to its thread. The handler
 * preempts only at a safe point: goroutine code in the main program (not
 * in any shared object, whether linked or loaded later with dlopen: it
 * may hold a thread lock, an allocator's or an interpreter's, that the
 * next goroutine on the thread would block on), never inside the runtime,
 * libc, the dynamic loader, libstdc++, libgcc_s or a sanitizer runtime,
 * not in a syscall bracket, not inside a signal handler or with signals
 * masked beyond the thread's usual mask, and not in a disabled section;
 * otherwise it tries again at the next signal. gmp_config_t's
 * preempt_objects (or GMP_DEBUG=preemptobjs=) widens or narrows the set
 * of objects (docs/design.md, "Which code a signal may stop"). A loop in
 * a shared object that must yield its P calls any gmp_ function now and
 * then: the 10 ms mark works everywhere. Every register is saved
 * and restored exactly, and errno is carried to the thread the goroutine
 * resumes on. Other thread-local variables are not: code that keeps a
 * thread-local address across a loop should disable preemption.
 * Signals interrupt blocking calls made outside a bracket; those the
 * kernel can restart are restarted (SA_RESTART), others return EINTR
 * (nanosleep, poll, ...): bracket blocking calls. The handler chains to a
 * SIGURG handler the program installed before the runtime started, for
 * every SIGURG: a program that uses SIGURG must tolerate extra ones.
 * Chained handlers (SIGURG; SIGSEGV and SIGBUS that are no stack
 * overflow; SIGQUIT after dump_on_sigquit's dump) are called as the
 * kernel would call them: sa_mask, SA_NODEFER, SA_SIGINFO, SA_RESETHAND,
 * SIG_IGN and SIG_DFL all honoured (docs/design.md, "Signals the program
 * had first").
 * Off when gmp_config_t.async_preempt_off is set, GMP_DEBUG contains
 * asyncpreemptoff=1, in ThreadSanitizer builds (TSan delivers signals
 * late, with a copy of the context), under valgrind, and when libc or a
 * sanitizer runtime is linked statically (their code cannot be told apart
 * from the program's). On arm64 a goroutine is not preempted by signal
 * while SVE state beyond the SIMD registers is live (Linux drops it at
 * each system call). docs/design.md has the details. */

/* Marks the calling goroutine not preemptible (by the 10 ms mark or by
 * signal) until the matching gmp_preempt_enable; they nest. It still
 * yields, blocks and switches threads when it calls gmp_yield or waits.
 * Outside a goroutine both do nothing; an enable without a disable does
 * nothing. A preemption that was due meanwhile happens at the enable. */
GMP_EXTERN void gmp_preempt_disable(void);
GMP_EXTERN void gmp_preempt_enable(void);

/* 1 if the running goroutine has been asked to give up its P (it has run
 * its 10 ms), or a goroutine woken on its P waits to run next (by a
 * timer that has come due, a channel, or just made: the yield runs it),
 * else 0 (and outside a goroutine). A few loads, and a clock read while a timer of the P is
 * near; it never switches. For a host that runs code the signal does not
 * stop, or under a lock of its own (an interpreter's): it polls this at
 * its safe points, and when it says 1, drops its lock and calls
 * gmp_yield. */
GMP_EXTERN int gmp_should_yield(void);

/* ---- Synchronisation ---------------------------------------------------- */

/* Go's sync package. All-zero storage is a valid unlocked or empty object
 * (the *_INIT macros spell it); objects need no destroy. Every waiting
 * call parks a goroutine and sleeps a plain thread, so goroutines and host
 * threads can share them. Misuse is fatal as in Go (unlock of an unlocked
 * mutex, a negative wait group counter); a NULL object is ignored.
 *
 * Deadlock: under gmp_main, once every goroutine waits and the process has
 * no thread but the runtime's own and gmp_main's caller (so nothing could
 * ever wake one), the runtime prints "gmprt: fatal error: all goroutines
 * are asleep - deadlock!" and one line per goroutine (its id and wait
 * reason), and aborts, as Go does. While any other thread exists it
 * cannot know, and keeps waiting; under gmp_init (the host thread keeps
 * running), in ThreadSanitizer builds (the sanitizer keeps threads of
 * its own) and under qemu-user (so does the emulator) it never reports. */

/* Go's sync.Mutex: not reentrant, not owned (any goroutine or thread may
 * unlock it). A waiter that has waited over 1 ms switches the mutex to
 * starvation mode, in which unlock hands it straight to the oldest waiter. */
typedef struct gmp_mutex {
    uint32_t opaque_[2];
} gmp_mutex_t;
#define GMP_MUTEX_INIT {{0, 0}}

GMP_EXTERN void gmp_mutex_lock(gmp_mutex_t *mu);
/* 0 when it took the lock, GMP_EBUSY otherwise (GMP_EINVAL for NULL). */
GMP_EXTERN int gmp_mutex_trylock(gmp_mutex_t *mu);
GMP_EXTERN void gmp_mutex_unlock(gmp_mutex_t *mu);

/* Go's sync.RWMutex: many readers or one writer; a waiting writer keeps
 * new readers out. */
typedef struct gmp_rwmutex {
    uint64_t opaque_[4];
} gmp_rwmutex_t;
#define GMP_RWMUTEX_INIT {{0, 0, 0, 0}}

GMP_EXTERN void gmp_rwmutex_rlock(gmp_rwmutex_t *rw);
GMP_EXTERN void gmp_rwmutex_runlock(gmp_rwmutex_t *rw);
GMP_EXTERN void gmp_rwmutex_lock(gmp_rwmutex_t *rw);
GMP_EXTERN void gmp_rwmutex_unlock(gmp_rwmutex_t *rw);

/* Go's sync.Cond, with the mutex passed to each wait. Wakes come in FIFO
 * order of the waits; a signal with no waiter is lost. */
typedef struct gmp_cond {
    uint64_t opaque_[4];
} gmp_cond_t;
#define GMP_COND_INIT {{0, 0, 0, 0}}

GMP_EXTERN void gmp_cond_wait(gmp_cond_t *cv, gmp_mutex_t *mu);
/* 0 when signalled, GMP_ETIMEDOUT when the time ran out (at once for a
 * timeout <= 0 other than GMP_FOREVER, which waits for ever), with mu held
 * again either way. A wait never times out before timeout_ns have passed. */
GMP_EXTERN int gmp_cond_timedwait(gmp_cond_t *cv, gmp_mutex_t *mu,
                                  int64_t timeout_ns);
GMP_EXTERN void gmp_cond_signal(gmp_cond_t *cv);
GMP_EXTERN void gmp_cond_broadcast(gmp_cond_t *cv);

/* Go's sync.Once: the first call runs fn; every call returns after fn has
 * returned. */
typedef struct gmp_once {
    uint32_t opaque_[4];
} gmp_once_t;
#define GMP_ONCE_INIT {{0, 0, 0, 0}}

GMP_EXTERN void gmp_once(gmp_once_t *once, void (*fn)(void));

/* Go's sync.WaitGroup. All-zero storage (GMP_WG_INIT) is an empty group.
 * gmp_wg_wait blocks a goroutine by parking it, a plain thread by sleeping
 * it. A negative counter is a fatal error, as in Go, and so is reusing a
 * group (Add from zero) while a previous Wait has not returned. The
 * counter is 32-bit, as Go's. NULL is ignored. */
typedef struct gmp_wg {
    uint64_t opaque_[4];
} gmp_wg_t;
#define GMP_WG_INIT {{0, 0, 0, 0}}

GMP_EXTERN void gmp_wg_add(gmp_wg_t *wg, int64_t delta);
GMP_EXTERN void gmp_wg_done(gmp_wg_t *wg);
GMP_EXTERN void gmp_wg_wait(gmp_wg_t *wg);


/* ---- Time ---------------------------------------------------------------- */

/* Sleeps at least ns nanoseconds (monotonic clock): a goroutine parks on a
 * timer and its M runs other goroutines; a plain thread sleeps. ns <= 0
 * returns at once (a goroutine still yields its time slice check). */
GMP_EXTERN void gmp_sleep(int64_t ns);

/* ---- File descriptors (netpoller) ---------------------------------------- */

/* Events for gmp_fd_wait; equal to poll(2)'s POLLIN and POLLOUT. */
#define GMP_POLLIN  0x001
#define GMP_POLLOUT 0x004

/*
 * Blocking I/O that parks the goroutine, not the thread. Each call works on
 * any fd: the first use makes it non-blocking (O_NONBLOCK stays set) and
 * registers it with the runtime's epoll instance (edge-triggered); on
 * EAGAIN the goroutine parks until the poller reports the fd ready. On a
 * plain thread the calls block that thread. Writes take turns per fd: the
 * calls that write all of a buffer (gmp_write, gmp_send, gmp_writev) and
 * the one-call writes (gmp_sendto, gmp_sendmsg) each go out whole, never
 * interleaved with another write on the fd. Reads, receives and accepts
 * take no turns: concurrent ones share what arrives, each byte (datagram,
 * connection) going to one of them. Errors are negative errno values
 * (GMP_EBADF once the fd is closed by gmp_close). Every blocking call
 * honours the fd's deadline for its direction (gmp_fd_set_deadline). An fd
 * used here must be closed with gmp_close, not close(2): the poller keeps
 * state for the fd number.
 * flags, where a call takes them, are those of its system call. With
 * MSG_DONTWAIT the call never waits: GMP_EAGAIN where the system call
 * says EAGAIN, or a write finds another holding the fd's turn. Sends add MSG_NOSIGNAL: no call raises SIGPIPE (a caller
 * that wants the signal raises it on -EPIPE).
 */
/* Reads up to n bytes: the count (0 at end of file) or an error. */
GMP_EXTERN ssize_t gmp_read(int fd, void *buf, size_t n);
/* Writes all n bytes: n, or an error, even if part of buf went out before
 * it (as Go's Write reports err). */
GMP_EXTERN ssize_t gmp_write(int fd, const void *buf, size_t n);
/* Receives up to n bytes, recv(2) with flags: the count (0 at the end of
 * a stream) or an error. MSG_PEEK leaves the bytes queued. MSG_WAITALL on
 * a stream socket waits for all n bytes (fewer only at the end of the
 * stream or an error after some arrived, as recv(2) says). */
GMP_EXTERN ssize_t gmp_recv(int fd, void *buf, size_t n, int flags);
/* Sends all n bytes, send(2) with flags, as gmp_write does: n or an error.
 * On a datagram socket one call is one datagram. With MSG_DONTWAIT, one
 * try: the count it sent (possibly short) or GMP_EAGAIN. */
GMP_EXTERN ssize_t gmp_send(int fd, const void *buf, size_t n, int flags);
/* recvfrom(2) that parks: one datagram (or up to n bytes of a stream) and
 * its sender in *addr / *len (both may be NULL): the count or an error. */
GMP_EXTERN ssize_t gmp_recvfrom(int fd, void *buf, size_t n, int flags,
                                struct sockaddr *addr, socklen_t *len);
/* sendto(2) that parks: one system call, one datagram; the count it sent
 * (on a stream possibly short, as Go's WriteTo) or an error. */
GMP_EXTERN ssize_t gmp_sendto(int fd, const void *buf, size_t n, int flags,
                              const struct sockaddr *addr, socklen_t len);
/* readv(2) that parks: the count (0 at end of file) or an error. */
GMP_EXTERN ssize_t gmp_readv(int fd, const struct iovec *iov, int cnt);
/* Writes every byte of the cnt buffers in order, as gmp_write: their
 * total or an error. The first try writes the vector whole (one datagram
 * on a datagram socket). GMP_EINVAL for cnt outside 0..IOV_MAX or a
 * total past SSIZE_MAX. */
GMP_EXTERN ssize_t gmp_writev(int fd, const struct iovec *iov, int cnt);
/* recvmsg(2) that parks: the count or an error; msg's fields as
 * recvmsg(2) fills them (ancillary data, msg_flags). */
GMP_EXTERN ssize_t gmp_recvmsg(int fd, struct msghdr *msg, int flags);
/* sendmsg(2) that parks: one system call; the count it sent, which on a
 * stream may be short (as Go's WriteMsg: resending the rest with its
 * ancillary data would pass it twice; send the rest with gmp_send or
 * gmp_writev), or an error. */
GMP_EXTERN ssize_t gmp_sendmsg(int fd, const struct msghdr *msg, int flags);
/* accept4(2) that parks: the new fd or an error. flags: SOCK_NONBLOCK
 * and SOCK_CLOEXEC, as the caller asks (the new fd becomes non-blocking
 * anyway at its first use with these calls); others are GMP_EINVAL.
 * addr and len may be NULL. */
GMP_EXTERN int gmp_accept4(int fd, struct sockaddr *addr, socklen_t *len,
                           int flags);
/* gmp_accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC. */
GMP_EXTERN int gmp_accept(int fd, struct sockaddr *addr, socklen_t *len);
/* connect(2) that parks until the connection is made: 0 or an error (the
 * socket's SO_ERROR). */
GMP_EXTERN int gmp_connect(int fd, const struct sockaddr *addr,
                           socklen_t len);
/* Waits until fd is ready for any of events (GMP_POLLIN, GMP_POLLOUT):
 * returns the ready ones among them (an error or hang-up counts as ready
 * for all), GMP_ETIMEDOUT when timeout_ns ran out (a timeout <= 0 other
 * than GMP_FOREVER polls once) or the fd's deadline for one of the
 * directions asked passed, GMP_EBADF if the fd is closed meanwhile by
 * gmp_close, GMP_EINVAL for no events. Before each wait it checks (one
 * system call) that the file the runtime registered under this number is
 * still the one open: a library that owns its fd may close it with
 * close(2) and get the number back for its next connection. */
GMP_EXTERN int gmp_fd_wait(int fd, int events, int64_t timeout_ns);
/* Any non-blocking call on fd, made blocking for the goroutine (the
 * general form of gmp_read and the rest, for calls they do not cover, an
 * SSL_read for instance, and for hook libraries): registers fd (which
 * makes it non-blocking), then calls fn(fd, arg) until it returns >= 0 or
 * fails with an errno other than EAGAIN, EWOULDBLOCK or EINTR; after
 * EAGAIN it waits until fd is ready for events (GMP_POLLIN, GMP_POLLOUT
 * or both). Returns fn's result, -errno of its failure, GMP_ETIMEDOUT
 * once timeout_ns (relative; GMP_FOREVER: none; <= 0: one try) or the
 * fd's deadline for a direction asked has passed, GMP_EBADF if gmp_close
 * closed it meanwhile, GMP_EINVAL for no fn or events. A goroutine parks;
 * a plain thread, and a goroutine inside a signal handler or with
 * signals blocked (gmp_can_park), waits without switching. An fd the
 * poller refuses (a regular file) gets fn's EAGAIN back. */
GMP_EXTERN ssize_t gmp_fd_call(int fd, int events,
                               ssize_t (*fn)(int fd, void *arg), void *arg,
                               int64_t timeout_ns);
/* 1 if the caller is a goroutine that may park now: it holds its P (not
 * inside gmp_syscall_enter/exit), runs on its own stack, and the thread's
 * signal mask is the one goroutines run with (so it is not inside a
 * signal handler, nor in code that blocked signals); else 0. Costs one
 * system call: ask before a wait, not on every call. */
GMP_EXTERN int gmp_can_park(void);
/* poll(2) over n fds that parks the goroutine until one is ready: fills
 * each revents as poll(2) does (any fd, files included) and returns how
 * many are set, 0 when timeout_ns ran out (GMP_FOREVER: no limit; <= 0
 * otherwise polls once), or an error. The fds are neither changed nor
 * registered (they need not be closed with gmp_close); fd deadlines do
 * not apply. A goroutine waits through the poller; a plain thread in
 * ppoll(2). */
GMP_EXTERN int gmp_poll(struct pollfd *fds, nfds_t n, int64_t timeout_ns);
/* Sets fd's deadline for reading (GMP_POLLIN), writing (GMP_POLLOUT) or
 * both (Go's SetReadDeadline, SetWriteDeadline, SetDeadline): deadline_ns
 * is absolute gmp_nanotime(), 0 for none. Once it has passed, blocked and
 * later calls in that direction return GMP_ETIMEDOUT (at once, even with
 * data ready) until the deadline is set again; a blocked call takes up
 * a new deadline at once. gmp_read, gmp_recv, gmp_recvfrom, gmp_readv,
 * gmp_recvmsg, gmp_accept4 and gmp_fd_wait read; the sends, writes and
 * gmp_connect write. gmp_close clears them. Returns 0, GMP_EINVAL (no or
 * unknown events, a negative deadline), or an error of the fd. */
GMP_EXTERN int gmp_fd_set_deadline(int fd, int events, int64_t deadline_ns);
/* Closes fd: every goroutine or thread parked on it returns GMP_EBADF,
 * the poller forgets it, then close(2). 0 or an error. */
GMP_EXTERN int gmp_close(int fd);
/* What gmp_close does but the close(2): for an fd that was closed, or
 * replaced by dup2, behind the runtime's back (a library that closes its
 * own fds), or is about to be. Its waiters return GMP_EBADF and the
 * number is free for a new file. 0 (also for an fd the runtime never
 * saw), GMP_EPERM with no runtime, GMP_EBADF for fd < 0. */
GMP_EXTERN int gmp_fd_forget(int fd);

/* ---- Name resolution ----------------------------------------------------- */

struct addrinfo;

/* getaddrinfo(3) and getnameinfo(3), run inside the system-call bracket:
 * the goroutine's P keeps running other goroutines while the lookup
 * waits. Same arguments and result: 0, or the EAI_* code (for
 * gai_strerror; with EAI_SYSTEM, errno as the lookup left it). Free the
 * list with freeaddrinfo(3). Context: a goroutine, or any thread. */
GMP_EXTERN int gmp_getaddrinfo(const char *node, const char *service,
                               const struct addrinfo *hints,
                               struct addrinfo **res);
GMP_EXTERN int gmp_getnameinfo(const struct sockaddr *addr, socklen_t addrlen,
                               char *host, socklen_t hostlen, char *serv,
                               socklen_t servlen, int flags);

/* ---- Worker pool ---------------------------------------------------------- */

/*
 * A pool of reusable worker goroutines with a capacity, the idea of Go's
 * ants library. A submitted task runs on an idle worker (the one used most
 * recently), else on a new worker while fewer than the capacity exist,
 * else the submitter waits until a worker comes back and takes the task
 * (or, in non-blocking mode, gets GMP_EAGAIN at once). Tasks run at most
 * `capacity` at a time. A worker idle for expiry_ns exits. A task runs
 * once, in FIFO order among the submitters that waited, in no stated order
 * otherwise. Submits may come from goroutines and from plain threads (a
 * waiting thread sleeps), also from inside a task. A goroutine that has
 * readied many workers on its P yields it to them before it submits more,
 * so a loop of submits does not run far ahead of the tasks: the pool grows
 * only while tasks outrun the workers it has.
 * A pool belongs to the runtime that was running when it was made: release
 * it before gmp_shutdown (its goroutines keep shutdown waiting).
 */
typedef struct gmp_pool gmp_pool_t;

typedef struct gmp_pool_opts {
    int64_t expiry_ns;   /* an idle worker exits after this long (never
                            before); 0: 1 s; negative is invalid          */
    int     nonblocking; /* nonzero: a submit at capacity fails with
                            GMP_EAGAIN instead of waiting                */
} gmp_pool_opts_t;

/* A new pool that runs at most capacity tasks at once. opts may be NULL
 * (defaults). NULL when capacity is 0, expiry_ns is negative, memory is
 * short, or no runtime is running. Context: a goroutine or a thread. */
GMP_EXTERN gmp_pool_t *gmp_pool_new(size_t capacity,
                                    const gmp_pool_opts_t *opts);
/* Runs fn(arg) on a worker. Blocks (parks a goroutine, sleeps a thread)
 * while capacity tasks run, unless the pool is non-blocking. Returns 0
 * once the task is handed to a worker (it may not have started yet),
 * GMP_EAGAIN (non-blocking, at capacity), GMP_ECLOSED (the pool is being
 * released, before or during the wait; the task is not run), GMP_EINVAL
 * (p or fn NULL), GMP_ENOMEM or GMP_EPERM (a new worker could not be
 * started). Allocates nothing when a worker is idle. */
GMP_EXTERN int gmp_pool_submit(gmp_pool_t *p, void (*fn)(void *), void *arg);
/* Sets the capacity while tasks run. Growing hands the new room to
 * waiting submitters at once; shrinking retires idle workers beyond it at
 * once and busy ones as their tasks return (a task is never interrupted,
 * so more than the new capacity may run until then). Returns 0,
 * GMP_EINVAL (p NULL, capacity 0), GMP_ECLOSED (being released). */
GMP_EXTERN int gmp_pool_tune(gmp_pool_t *p, size_t capacity);
/* Tasks running now (a snapshot); 0 for NULL. */
GMP_EXTERN size_t gmp_pool_running(const gmp_pool_t *p);
/* The capacity; 0 for NULL. */
GMP_EXTERN size_t gmp_pool_cap(const gmp_pool_t *p);
/* Refuses new submits (GMP_ECLOSED, also to submitters waiting now), waits
 * until every task handed over has returned and every worker has exited,
 * then frees the pool. After it returns the pool must not be used; a call
 * from one of the pool's own tasks would wait for itself for ever.
 * Returns 0, GMP_EINVAL (p NULL). */
GMP_EXTERN int gmp_pool_release(gmp_pool_t *p);

/* ---- Introspection -------------------------------------------------------- */

/*
 * Counters read without stopping the world: each is summed from per-P
 * counters or read from the scheduler as it is, so the fields are a
 * snapshot taken over a few microseconds, not one instant. Monotonic ones
 * (created, steals, syscalls, handoffs, preemptions) never go back.
 */
typedef struct gmp_stats {
    uint64_t goroutines_created;  /* since the runtime started          */
    uint64_t goroutines_live;     /* created and not yet returned       */
    uint64_t goroutines_runnable; /* on run queues (local and global)   */
    uint64_t global_runq;         /* on the global run queue            */
    uint64_t steals;              /* successful steals from another P   */
    uint64_t idle_procs;          /* Ps with no M                       */
    uint64_t threads;             /* Ms (runtime threads) alive         */
    uint64_t idle_threads;        /* Ms parked with nothing to do       */
    uint64_t spinning_threads;    /* Ms looking for work                */
    uint64_t syscalls;            /* gmp_syscall_enter by goroutines    */
    uint64_t handoffs;            /* Ps retaken from a blocked syscall  */
    uint64_t preemptions;         /* goroutines preempted (10 ms)       */
    uint64_t netpoll_waiters;     /* waiters parked on descriptors      */
    uint64_t procs;               /* Ps                                 */
} gmp_stats_t;

/* Fills *out. Returns 0, GMP_EINVAL (out NULL), GMP_EPERM (no runtime:
 * *out is zeroed). Context: any thread. */
GMP_EXTERN int gmp_stats(gmp_stats_t *out);

/*
 * Metrics beside gmp_stats's counters, summed on read like them, in the
 * shape of Go's runtime/metrics: /sched/latencies:seconds (how long a
 * goroutine waited between becoming runnable and starting to run), the
 * time goroutines spent inside system-call brackets, and Go 1.26's
 * /sched/goroutines (goroutines by state). The timed ones are recorded
 * only when the runtime was started with gmp_config_t.sched_metrics (or
 * GMP_DEBUG=schedmetrics=1); flags then has GMP_METRICS_TIMED.
 */
#define GMP_METRICS_LATENCY_BUCKETS 40
#define GMP_METRICS_TIMED 1u        /* latency and syscall_ns recorded */
typedef struct gmp_metrics {
    uint64_t flags;                 /* GMP_METRICS_* */
    /* Starts by how long the goroutine had been runnable: [i] counts
     * waits of 2^i to 2^(i+1) - 1 ns ([0] also 0 ns; the last, every
     * longer one). A goroutine's first start counts from its creation;
     * one that leaves a system call and finds its P free does not wait
     * and is not counted. */
    uint64_t sched_latency[GMP_METRICS_LATENCY_BUCKETS];
    uint64_t sched_latency_count;   /* the buckets' sum                  */
    uint64_t sched_latency_ns;      /* the counted waits' total          */
    uint64_t syscall_ns;            /* inside gmp_syscall_enter/exit
                                       brackets, of goroutines with a P  */
    /* Goroutines by state, counted by looking at each: a snapshot taken
     * while they move, so the sum may differ from goroutines_live. */
    uint64_t goroutines_runnable;   /* on a run queue                    */
    uint64_t goroutines_running;    /* on a thread, with a P             */
    uint64_t goroutines_waiting;    /* parked: channel, lock, sleep, I/O */
    uint64_t goroutines_syscall;    /* inside a system-call bracket      */
    /* Room for metrics later versions add; zero until then. */
    uint64_t reserved_[24];
} gmp_metrics_t;

/* Fills *out. Returns 0, GMP_EINVAL (out NULL), GMP_EPERM (no runtime:
 * *out is zeroed). Context: any thread; walks every goroutine record
 * (about a microsecond per thousand goroutines), stopping nothing. */
GMP_EXTERN int gmp_metrics(gmp_metrics_t *out);

/*
 * Writes every goroutine to out, in Go's traceback shape:
 *
 *   goroutine 7 [chan receive, 12 ms]:
 *   \tgmp_chan_recv+0x4d
 *   \tworker+0x1e
 *   started as worker(0x0)
 *
 * The header gives the state (for a waiting one its wait reason and how
 * long it has waited, to within 11 ms); then the backtrace, by frame
 * pointers, of a waiting or runnable goroutine (or of the caller itself),
 * as far as frame pointers allow: for one the preemption signal stopped,
 * first the instruction it stopped at ("<name> (preempted by signal
 * here)"), so a goroutine that holds a lock and waits for a thread names
 * the code that took it. A goroutine running on another thread shows no
 * backtrace (its stack changes under the reader). Then the function it
 * was started with and its argument. Names come from dladdr: functions of an executable
 * linked without -rdynamic (CMake: ENABLE_EXPORTS) print as
 * "?? (file+0xoffset)". Nothing is stopped while it runs: a goroutine
 * that changes state meanwhile may be shown half before, half after.
 * With no runtime it says so. Context: any thread.
 *
 * GMP_DEBUG=schedtrace=N prints a line like Go's every N ms on stderr:
 *   SCHED 1000ms: gomaxprocs=2 idleprocs=0 threads=5 spinningthreads=0
 *   idlethreads=1 runqueue=0 [2 3]
 * (one line; the bracket lists each P's local run queue). With
 * scheddetail=1 as well, one line per P, M and goroutine follows instead
 * of the bracket. gmp_config_t.dump_on_sigquit makes SIGQUIT write this
 * dump to stderr and exit with status 2, as Go does.
 */
GMP_EXTERN void gmp_dump(FILE *out);

/* ---- Embedding: stacks for a garbage collector --------------------------- */

/*
 * Calls cb(lo, hi, sp, arg) for every goroutine stack in use: [lo, hi) is
 * the stack, sp where its live part starts. For a goroutine that waits or
 * is queued, sp is its saved stack pointer (everything it holds lies in
 * [sp, hi)); for one running on another thread sp is lo (scan all of it);
 * for the caller, its current frame. Goroutines that have not started yet
 * have no stack and are not reported. A conservative collector scans
 * [sp, hi) of each as roots, with the thread hooks of gmp_config_t to
 * find the runtime's threads. Nothing is stopped: stacks of goroutines
 * that run meanwhile change under the scan, as with any thread. It takes
 * no lock, so a collector may call it while other threads are suspended
 * wherever they were, and from a signal handler. cb must not call
 * gmprt. Returns how many stacks were reported, GMP_EINVAL (cb
 * NULL), GMP_EPERM (no runtime). Context: any thread.
 */
/*
 * The bounds [*lo, *hi) of the stack the calling thread runs on at this
 * moment: the running goroutine's (its usable part, above the guard),
 * or, on a runtime thread outside any goroutine, the thread's own stack
 * or its signal stack. For a collector that stops the world from signal
 * handlers: each thread's handler, running on whatever stack the thread
 * was on, learns the range to scan. Async-signal-safe: it reads the
 * thread's own records and takes no lock. 0; GMP_EINVAL for NULL
 * arguments; GMP_EPERM on a thread that is not the runtime's (a plain
 * thread knows its own stack); GMP_EAGAIN on a stack the runtime does
 * not know (one the program switched to itself).
 */
GMP_EXTERN int gmp_stack_bounds(void **lo, void **hi);

GMP_EXTERN int gmp_stacks_foreach(void (*cb)(void *lo, void *hi, void *sp,
                                             void *arg),
                                  void *arg);

/*
 * Stops the world: returns once no goroutine runs but the caller, each
 * other one stopped at a safe point (where the preemption signal may
 * stop it, or a runtime call) or in a system-call bracket, from which it
 * will not return to its code until gmp_start_world. Timers, the poller
 * and plain threads may ready goroutines meanwhile; they wait in their
 * queues. For a precise collector, a debugger, a consistent snapshot.
 * Called from a goroutine, that goroutine keeps running (on its P, with
 * preemption disabled): it must not block in gmprt until it starts the
 * world again (gmp_yield returns at once; a call that would park is a
 * fatal error, as nothing could run to wake it), and system calls are
 * fine. Called from a plain thread, that thread holds the world. One
 * stopper at a time: a second waits for the first's gmp_start_world.
 * A goroutine that never reaches a safe point (a loop inside a shared
 * object, or with preemption disabled or off) delays the stop until it
 * does. gmp_shutdown refuses (GMP_EBUSY) while the world is stopped.
 * Returns 0; GMP_EBUSY when the caller already holds the world; GMP_EPERM
 * with no runtime, when it stops meanwhile, or from a runtime thread
 * outside a goroutine or inside a system-call bracket.
 * Context: a goroutine, or a plain thread.
 */
GMP_EXTERN int gmp_stop_world(void);

/*
 * Starts the world that the caller stopped: every stopped P goes back to
 * work. 0; GMP_EPERM when the world is not stopped, or not by the caller.
 * Context: the goroutine or thread that called gmp_stop_world.
 */
GMP_EXTERN int gmp_start_world(void);

/* ---- Execution trace ---------------------------------------------------- */

/*
 * Starts recording the scheduler's events (goroutines created, started,
 * stopped, blocked with the reason, unblocked, system calls and their
 * hand-offs, preemptions, Ps started and stopped) into fd, in the format
 * Go 1.19's `go tool trace` reads (docs/debugging.md). Stops the world
 * for a moment to note every goroutine that exists. Events are buffered
 * per P and written by a thread of the tracer's every 10 ms; fd stays the
 * caller's (never closed). GMP_TRACE=path in the environment starts a
 * trace into path when the runtime starts, ending when it stops.
 * Returns 0; GMP_EBADF (fd negative); GMP_EBUSY (a trace is recording);
 * GMP_EPERM (no runtime, or one stopping, or a caller gmp_stop_world
 * refuses, or a library built with -DGMP_EXECTRACE=OFF, which has no
 * tracer nor flight recorder); GMP_ENOMEM; or the error of writing the
 * trace's header. Context: a goroutine, or a plain thread.
 */
GMP_EXTERN int gmp_trace_start(int fd);

/*
 * Stops the trace: every event recorded so far is written to its fd
 * before this returns. Returns 0; GMP_EPERM (no trace recording, or the
 * runtime stopping: the trace then ends when it has stopped); or the
 * first error writing the trace met (events after it were lost).
 * Context: a goroutine, or a plain thread.
 */
GMP_EXTERN int gmp_trace_stop(void);

/*
 * The flight recorder: the tracer's events kept in memory, in a ring of
 * about bytes (at least 128 KiB), whose oldest events give way to new
 * ones, so that what led up to a problem can be written out after it
 * happened. Recording costs what tracing costs; nothing is written until
 * gmp_flightrec_write. A tracer and a flight recorder do not run at once.
 * Returns 0, GMP_EBUSY (a trace or flight recorder runs), GMP_EPERM (no
 * runtime), GMP_ENOMEM. Context: a goroutine, or a plain thread.
 */
GMP_EXTERN int gmp_flightrec_start(size_t bytes);

/*
 * Writes the events the ring holds to fd as a trace Go 1.19's `go tool
 * trace` reads: the state of every goroutine and P at the oldest event
 * kept, then the events from there to now. The world is stopped while it
 * writes. Recording goes on. Returns 0, GMP_EBADF (fd < 0), GMP_EPERM (no
 * flight recorder), GMP_ENOMEM, or the negative errno of a failed write.
 * Context: a goroutine, or a plain thread.
 */
GMP_EXTERN int gmp_flightrec_write(int fd);

/* Stops the flight recorder and frees its memory. Returns 0, or
 * GMP_EPERM (none running). Context: a goroutine, or a plain thread. */
GMP_EXTERN int gmp_flightrec_stop(void);

/* ---- Goroutine-local storage and thread affinity ------------------------ */

/*
 * pthread's keys, per goroutine. A key names one value per goroutine: it
 * starts NULL in every goroutine, gmp_setspecific sets the caller's, and
 * it follows the goroutine from thread to thread (unlike __thread
 * variables, which stay with the thread). When a goroutine's function
 * returns, each non-NULL value whose key has a destructor is set to NULL
 * and passed to the destructor, on that goroutine; if destructors set
 * values again, this repeats up to GMP_KEY_DESTRUCTOR_ITERATIONS times
 * (pthread's PTHREAD_DESTRUCTOR_ITERATIONS). Goroutines abandoned when
 * gmp_main returns never return, so their destructors never run.
 * On a thread that is not a goroutine (a host thread, gmp_main's caller)
 * the same calls act on a table of that thread's own, whose destructors
 * run when the thread exits through pthread_exit or by returning from its
 * start function (as pthread's; not at exit()).
 * Keys are process-wide and need no running runtime; a key stays valid
 * across runtimes. gmp_key_delete runs no destructor (as pthread's): the
 * values left become unreachable, and freeing them is the program's.
 * Context: any thread, any goroutine. gmp_getspecific is a few loads, no
 * lock, no allocation.
 */
typedef uint32_t gmp_key_t;
#define GMP_KEYS_MAX                  128
#define GMP_KEY_DESTRUCTOR_ITERATIONS 4

/* Creates a key; *key is never 0, so 0 can mean "no key". destructor may
 * be NULL. Returns 0, GMP_EINVAL (key NULL), GMP_EAGAIN (GMP_KEYS_MAX
 * keys exist). */
GMP_EXTERN int gmp_key_create(gmp_key_t *key, void (*destructor)(void *));
/* Deletes a key: its values read as NULL from now on, also if its slot is
 * reused by a later gmp_key_create. Returns 0, GMP_EINVAL (not a live
 * key). */
GMP_EXTERN int gmp_key_delete(gmp_key_t key);
/* The caller's value for key: NULL if never set, or key is not live. */
GMP_EXTERN void *gmp_getspecific(gmp_key_t key);
/* Sets the caller's value for key. The first non-NULL value a goroutine
 * sets allocates its table (it grows for keys made later). Returns 0,
 * GMP_EINVAL (not a live key), GMP_ENOMEM (nothing changed). */
GMP_EXTERN int gmp_setspecific(gmp_key_t key, void *value);

/* Go's runtime.LockOSThread / UnlockOSThread. While locked, the calling
 * goroutine runs only on its current thread and that thread runs no other
 * goroutine: through yields, preemption, every wait, and a syscall bracket
 * (the P is handed off inside it; on the way out the goroutine gets a P
 * back on the same thread). For thread-affine state: thread-local
 * variables, an OpenGL context, a signal mask, credentials or namespaces
 * set per thread. Calls nest (Go 1.10's count): the goroutine is unlocked
 * when unlocks have matched locks; an unlock while not locked does
 * nothing. Switching threads for a locked goroutine costs two thread
 * wake-ups, as in Go: keep locked stretches for what needs them. If the
 * goroutine's function returns while locked, the goroutine is unlocked
 * after its key destructors ran (on that thread), and the thread goes
 * back to running other goroutines (Go ends the thread instead): undo
 * any thread state you changed before returning. On a thread that is not
 * a goroutine both do nothing. Context: any. */
GMP_EXTERN void gmp_lock_os_thread(void);
GMP_EXTERN void gmp_unlock_os_thread(void);

#ifdef __cplusplus
}
#endif

#endif /* GMPRT_H */
