/*
 * preempt.c - preemption (Go's preempt.go and signal_unix.go, in part):
 * the cooperative point, gmp_preempt_disable/enable, and asynchronous
 * preemption by signal.
 *
 * Cooperative. sysmon marks a P whose G has run 10 ms (pp->preempt); the
 * G yields at its next runtime call (gmp__preempt_point).
 *
 * Asynchronous. A loop that never calls the runtime would keep the mark
 * forever, so sysmon also sends SIGURG to the thread of the P's owner
 * (gmp__preemptone). The handler looks at what it interrupted and acts
 * only at a safe point (try_preempt):
 *   - the thread is an M running a G, with a P (not in a syscall bracket),
 *     the P is marked, and the G's preemptoff is 0 (it has not disabled
 *     preemption, is not in a host hook, holds no foreign lock);
 *   - the interrupted stack pointer is on the G's stack (not g0's, not the
 *     signal stack) with room below it for the saved state;
 *   - the signal mask is the thread's usual one (not inside another
 *     signal handler, nor in code that masked signals);
 *   - the interrupted PC is in code the policy lets a signal stop: by
 *     default the main program's, never another shared object's (they
 *     may hold a thread lock the next goroutine on this thread needs);
 *     and never the runtime (between gmp__text_begin and gmp__text_end:
 *     the library is partially linked into one object with those markers
 *     first and last, and calls out only through its GOT, never a PLT
 *     stub, cmake/check_text.cmake), the vDSO (the runtime reads the
 *     clock there with locks held), the system libraries, nor the
 *     program's PLT stubs. "Where a signal may stop a goroutine" below;
 *   - arm64: no SVE or SME state beyond the SIMD registers is live;
 *     riscv64: no vector (V) state is live (the signal frame has no
 *     vector record).
 * Then it rewrites the signal context so that, on return from the
 * handler, the thread enters gmp__asyncpreempt (arch/<arch>/preempt.S)
 * on the G's stack, as if the interrupted instruction had called it:
 *   x86-64: sp -= 128 (the red zone, which the interrupted function may be
 *     using) + 8; the interrupted PC is stored there as a return address.
 *     The stub saves the flags, every general register and the whole
 *     xsave state, calls gmp__asyncpreempt2 (which switches to g0 with
 *     SW_PREEMPT: the G goes to the global queue), restores everything
 *     and returns with `ret $128`, which pops the PC and the red zone.
 *   - arm64: sp -= 16 (no red zone in AAPCS64); PC and the old sp are
 *     stored there. The stub saves x0-x30, NZCV, FPSR, FPCR and q0-q31.
 *     A branch back would need a free register, and none is free, so the
 *     stub ends by sending itself SIGURG (tgkill) from a known PC,
 *     gmp__asyncpreempt_resume: the handler, seeing that PC, loads the
 *     saved registers into the signal context, and the kernel's sigreturn
 *     puts back every one of them, PC and sp included.
 *   - riscv64: as arm64 (no red zone in the psABI either; sp -= 16,
 *     rounded down to 16 bytes, PC and the old sp stored there; the
 *     resume signal). The stub saves x1-x31,
 *     f0-f31 and fcsr. The resume puts back every register but tp, the
 *     thread pointer: the goroutine may have moved to another thread, and
 *     tp belongs to the thread (gp is the same in every thread).
 * If the PC is not safe, nothing happens; sysmon signals again on its next
 * round while the mark stands.
 *
 * The handler chains to the SIGURG handler installed before the runtime
 * started, for every SIGURG: signals of one kind coalesce, so one of ours
 * may carry one of the program's (Go does the same).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/auxv.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "interrupt.h"
#include "runtime.h"
#include "signals.h"
#include "timer.h"
#include "preempt.h"

#ifdef GMP_VALGRIND
#include <valgrind/valgrind.h>
#endif

#define PREEMPT_SIG SIGURG

/* Stack the interrupted G must have left below its sp: the stub's frame,
 * and the C frames of gmp__asyncpreempt2 and the switch (sanitized builds
 * use more). The x86 xsave area comes on top. */
#define PREEMPT_STACK_SLACK 8192

/* Markers around the library's code (arch/text_begin.S, text_end.S). */
extern const char gmp__text_begin[] GMP_HIDDEN;
extern const char gmp__text_end[] GMP_HIDDEN;
/* Called by a stub that goes back by signalling its own thread
 * (arch/aarch64/preempt.S) when that signal was not delivered. */
GMP_HIDDEN _Noreturn void gmp__asyncpreempt_lost(void);

/* ---- Where a signal may stop a goroutine ------------------------------
 *
 * The policy (docs/design.md, "Which code a signal may stop", is its one
 * description): the handler preempts only at a PC inside an allowed range
 * and outside every excluded one.
 *   allowed: the executable segments of the main program (unless the
 *     setting says "-") and of every shared object whose file name
 *     contains one of the setting's entries (gmp_config_t.preempt_objects,
 *     or GMP_DEBUG=preemptobjs=..., a ':'-separated list); with the entry
 *     "*", every address. Every other object, the ones dlopen loads later
 *     included, is foreign code that may hold a thread lock.
 *   excluded, whatever the setting: the runtime's own code, the program's
 *     PLT stubs (exclude_program_plt), the vDSO, and the system libraries
 *     of sys_libs (named or not).
 *
 * The ranges come from dl_iterate_phdr, which the handler cannot call:
 * they are built outside it into one of two tables, and the handler reads
 * the current one. A table is rebuilt when the loader's counters of
 * objects added and removed (dlpi_adds, dlpi_subs) have moved since the
 * last build; sysmon looks each time it is about to send the signal
 * (gmp__preemptone), so an object loaded or unloaded since is accounted
 * for before the next signal. Until then a stale table can only name a
 * new object's code neither allowed nor excluded, which in the default
 * setting means "not here"; see the design page for what "*" risks.
 *
 * Two tables, an index and a reader count per table:
 *   - the handler enters table i = cur: it raises readers[i], then checks
 *     that cur is still i (else it leaves and tries the new one), reads,
 *     and lowers readers[i];
 *   - a builder (one at a time: refreshing) fills table 1 - cur only when
 *     its readers count is 0, then makes it current.
 * Entering is a store then a load (readers[i], then cur) and building a
 * store then a load in the other order (cur at the previous build, then
 * readers[1 - cur] now): seq_cst on all four, so a handler that raised
 * the count of the table being rebuilt either was seen by the builder
 * (which then skips this build and retries at the next signal) or sees
 * that the table is no longer current and never reads it.
 */

#define MAX_RANGES 128

struct ranges {
    int       n;
    uintptr_t lo[MAX_RANGES], hi[MAX_RANGES];
};

struct pctable {
    bool          all;              /* "*": every PC allowed */
    bool          none;             /* an exclusion did not fit: refuse all */
    struct ranges allow, excl;
};

/* Written by a builder while it holds `refreshing` and the table is not
 * current with no reader in it; read by the handler as described above. */
static struct pctable tables[2];
/* seq_cst, every access: see above. */
static _Atomic int cur_table;
static _Atomic int table_readers[2];
/* Taken by a builder (acquire) and released (release) so that builds,
 * and the builder's state below, follow one another. */
static atomic_flag refreshing = ATOMIC_FLAG_INIT;

/* The builder's own state, under `refreshing` (or while no runtime runs).
 * The setting is copied at setup; the program's PLT ranges are read from
 * its file once, at setup. */
static char        policy[GMP_PREEMPT_OBJECTS_MAX];
static struct ranges program_plt;
static unsigned long long seen_adds, seen_subs;

static pid_t preempt_pid;
/* Relaxed everywhere: written only while no runtime thread exists. */
static _Atomic bool async_on;

/* System libraries: code that may hold a lock (malloc's, stdio's, the
 * loader's, a sanitizer's) or run with state a switch would break. Matched
 * against the start of the file name. Excluded under every setting; the
 * list matters only when the setting names them or says "*". The first
 * LIBC_NAMES are the C library: glibc's libc.so.6, and musl's, which is
 * its own dynamic loader and which dl_iterate_phdr names as the program's
 * interpreter (ld-musl-<arch>.so.1; libc.musl-<arch>.so.1 on Alpine) or,
 * run as a command, by the name it was run as (libc.so among them). */
static const char *const sys_libs[] = {
    "libc.so", "ld-musl-", "libc.musl-",
    "ld-linux", "ld64.so", "libpthread.so", "libdl.so",
    "librt.so", "libm.so", "libresolv.so", "libgcc_s.so", "libstdc++.so",
    "libatomic.so", "libasan.so", "libtsan.so", "libubsan.so", "liblsan.so",
    "libhwasan.so",
};
#define LIBC_NAMES 3

static const char *base_name(const char *name)
{
    const char *slash = name ? strrchr(name, '/') : NULL;
    return slash ? slash + 1 : name ? name : "";
}

/* Whether the file name starts with one of the first n of sys_libs. */
static bool sys_lib_in(const char *name, size_t n)
{
    const char *base = base_name(name);
    for (size_t i = 0; i < n; i++)
        if (strncmp(base, sys_libs[i], strlen(sys_libs[i])) == 0)
            return true;
    return false;
}

static bool is_sys_lib(const char *name)
{
    return sys_lib_in(name, sizeof sys_libs / sizeof *sys_libs);
}

static bool is_libc(const char *name)
{
    return sys_lib_in(name, LIBC_NAMES);
}

/* Whether the setting has the entry want exactly. */
static bool policy_has(const char *want)
{
    size_t n = strlen(want);
    for (const char *p = policy; *p;) {
        size_t len = strcspn(p, ":");
        if (len == n && strncmp(p, want, n) == 0)
            return true;
        p += len + (p[len] == ':');
    }
    return false;
}

/* Whether an entry of the setting (other than "*" and "-") is part of
 * the object's file name. */
static bool policy_names(const char *name)
{
    if (!name || !*name)
        return false;
    for (const char *p = policy; *p;) {
        size_t len = strcspn(p, ":");
        char entry[GMP_PREEMPT_OBJECTS_MAX];
        memcpy(entry, p, len);
        entry[len] = '\0';
        if (len && strcmp(entry, "*") != 0 && strcmp(entry, "-") != 0 &&
            strstr(name, entry))
            return true;
        p += len + (p[len] == ':');
    }
    return false;
}

static void ranges_add(struct ranges *r, uintptr_t lo, uintptr_t hi,
                       bool *overflow)
{
    if (r->n < MAX_RANGES) {
        r->lo[r->n] = lo;
        r->hi[r->n] = hi;
        r->n++;
    } else if (overflow) {
        *overflow = true;
    }
}

static bool ranges_hit(const struct ranges *r, uintptr_t pc)
{
    for (int i = 0; i < r->n; i++)
        if (pc >= r->lo[i] && pc < r->hi[i])
            return true;
    return false;
}

/* Adds the object's executable segments to r. */
static void add_code(struct ranges *r, const struct dl_phdr_info *info,
                     bool *overflow)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
            ranges_add(r, info->dlpi_addr + ph->p_vaddr,
                       info->dlpi_addr + ph->p_vaddr + ph->p_memsz,
                       overflow);
    }
}

/* Whether the object holds the vDSO's ELF header: the vDSO is excluded
 * too, since the runtime itself calls into it (clock_gettime) with locks
 * held, and a PC there says nothing about who called. */
static bool is_vdso(const struct dl_phdr_info *info)
{
    uintptr_t ehdr = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    for (int i = 0; ehdr && i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && ehdr >= lo && ehdr < lo + ph->p_memsz)
            return true;
    }
    return false;
}

/*
 * The program's PLT stubs. A program that is not position-independent and
 * takes the address of a library function (fn = free) gets a "canonical"
 * PLT entry for it, and every GOT in the process then holds that stub's
 * address, the runtime's included: the runtime's calls into libc, made
 * through its GOT (-fno-plt, CMakeLists.txt), pass through the stub, a
 * few instructions outside every range above. Section headers are not
 * mapped, so they come from the file. Best effort: without /proc the
 * stubs stay unexcluded. Context: setup, no runtime running.
 */
static void exclude_program_plt(uintptr_t bias)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ElfW(Ehdr) eh;
    ElfW(Shdr) names;
    if (GMP_LIBC(pread)(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_shentsize != sizeof(ElfW(Shdr)) ||
        eh.e_shstrndx == SHN_UNDEF || eh.e_shstrndx >= eh.e_shnum ||
        GMP_LIBC(pread)(fd, &names, sizeof names,
              (off_t)(eh.e_shoff + eh.e_shstrndx * sizeof names)) !=
            (ssize_t)sizeof names) {
        GMP_LIBC(close)(fd);
        return;
    }
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        ElfW(Shdr) sh;
        char name[16];
        if (GMP_LIBC(pread)(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + i * sizeof sh)) !=
            (ssize_t)sizeof sh)
            break;
        if (!(sh.sh_flags & SHF_EXECINSTR) || sh.sh_name >= names.sh_size)
            continue;
        ssize_t n = GMP_LIBC(pread)(fd, name, sizeof name - 1,
                          (off_t)(names.sh_offset + sh.sh_name));
        if (n <= 0)
            continue;
        name[n] = 0;
        /* .plt, .plt.sec, .plt.got; .iplt in static programs. */
        if (strncmp(name, ".plt", 4) == 0 || strcmp(name, ".iplt") == 0)
            ranges_add(&program_plt, bias + sh.sh_addr,
                       bias + sh.sh_addr + sh.sh_size, NULL);
    }
    GMP_LIBC(close)(fd);
}

static int program_plt_of(struct dl_phdr_info *info, size_t size,
                          void *data)
{
    (void)size;
    (void)data;
    exclude_program_plt(info->dlpi_addr);   /* the first object */
    return 1;
}

struct scan_state {
    struct pctable *t;
    bool overflow;                  /* an exclusion did not fit */
    bool program_seen;
    bool have_libc;
    unsigned long long adds, subs;
};

static int scan_object(struct dl_phdr_info *info, size_t size, void *data)
{
    struct scan_state *st = data;
    struct pctable *t = st->t;
    const char *name = info->dlpi_name;
    if (!st->program_seen) {        /* the first object is the program */
        st->program_seen = true;
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) +
                        sizeof info->dlpi_subs) {
            st->adds = info->dlpi_adds;
            st->subs = info->dlpi_subs;
        }
        if (!policy_has("-"))
            add_code(&t->allow, info, NULL);
        return 0;
    }
    if (is_vdso(info) || is_sys_lib(name)) {
        if (is_libc(name))
            st->have_libc = true;
        add_code(&t->excl, info, &st->overflow);
        return 0;
    }
    if (policy_names(name))
        add_code(&t->allow, info, NULL);
    return 0;
}

/* Fills t from the objects loaded now. Returns whether libc is one of
 * them. When it is not, libc is linked into the program statically (in a
 * static binary, glibc's or musl's dl_iterate_phdr reports the program
 * alone), and its malloc and stdio, holding their locks, are the
 * program's code to the policy: scan_setup turns the signal off. Context:
 * a builder, or setup. */
static bool build(struct pctable *t, struct scan_state *st)
{
    memset(t, 0, sizeof *t);
    t->all = policy_has("*");
    ranges_add(&t->excl, (uintptr_t)gmp__text_begin,
               (uintptr_t)gmp__text_end, NULL);
    for (int i = 0; i < program_plt.n; i++)
        ranges_add(&t->excl, program_plt.lo[i], program_plt.hi[i], NULL);
    *st = (struct scan_state){.t = t};
    dl_iterate_phdr(scan_object, st);
    t->none = st->overflow;         /* an unexcluded system library: no */
    return st->have_libc;
}

/* Whether the signal may stop code at pc. Context: signal handler
 * (async-signal-safe: atomics and reads of the tables only). */
static bool pc_preemptible(uintptr_t pc)
{
    int i;
    for (;;) {
        /* seq_cst, both: see the top of this section. */
        i = atomic_load(&cur_table);
        atomic_fetch_add(&table_readers[i], 1);
        if (atomic_load(&cur_table) == i)
            break;
        atomic_fetch_sub(&table_readers[i], 1);
    }
    const struct pctable *t = &tables[i];
    bool ok = !t->none && (t->all || ranges_hit(&t->allow, pc)) &&
              !ranges_hit(&t->excl, pc);
    /* seq_cst: the builder's load of the count sees the reads done. */
    atomic_fetch_sub(&table_readers[i], 1);
    return ok;
}

static int counters_of(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long long *c = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) +
                    sizeof info->dlpi_subs) {
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
    }
    return 1;                       /* the first object is enough */
}

/* Rebuilds the spare table when objects were loaded or unloaded since the
 * last build, and makes it current. Skips (to be retried at the next
 * signal) when another build is under way or a handler is still reading
 * the spare table. Context: any thread but a signal handler (sysmon,
 * through gmp__preemptone), no runtime lock held: dl_iterate_phdr takes
 * the loader's lock. */
static void refresh(void)
{
    /* Acquire: see the declaration of refreshing. */
    if (atomic_flag_test_and_set_explicit(&refreshing, memory_order_acquire))
        return;
    unsigned long long c[2] = {seen_adds, seen_subs};
    dl_iterate_phdr(counters_of, c);
    if (c[0] != seen_adds || c[1] != seen_subs) {
        /* seq_cst, both: see the top of this section. */
        int spare = 1 - atomic_load(&cur_table);
        if (atomic_load(&table_readers[spare]) == 0) {
            struct scan_state st;
            build(&tables[spare], &st);
            seen_adds = st.adds;
            seen_subs = st.subs;
            atomic_store(&cur_table, spare);
        }
    }
    /* Release: the next builder sees this one's state. */
    atomic_flag_clear_explicit(&refreshing, memory_order_release);
}

/* True when a sanitizer's runtime is linked into the program (clang's
 * default) rather than loaded as one of the system libraries: its
 * allocator and interceptors hold locks, in code that cannot be told apart
 * from the program's. */
static bool static_sanitizer(void)
{
    static const char *const inits[] = {
        "__asan_init", "__tsan_init", "__msan_init", "__hwasan_init",
        "__lsan_init",
    };
    for (size_t i = 0; i < sizeof inits / sizeof *inits; i++) {
        void *sym = dlsym(RTLD_DEFAULT, inits[i]);
        Dl_info di;
        if (sym && (!dladdr(sym, &di) || !is_sys_lib(di.dli_fname)))
            return true;
    }
    return false;
}

/* Copies the setting and builds the first table. Returns false when libc
 * or a sanitizer runtime is linked into the program or into this library
 * statically. Context: setup, before the handler is installed. */
static bool scan_setup(const char *objs)
{
    size_t len = objs ? strlen(objs) : 0;
    if (len >= sizeof policy)
        len = 0;                    /* lifecycle.c refused it already */
    memcpy(policy, objs ? objs : "", len);
    policy[len] = '\0';
    program_plt.n = 0;
    dl_iterate_phdr(program_plt_of, NULL);
    /* seq_cst: no handler runs yet; the sigaction call orders it anyway. */
    atomic_store(&cur_table, 0);
    struct scan_state st;
    bool libc = build(&tables[0], &st);
    seen_adds = st.adds;
    seen_subs = st.subs;
    return libc && !static_sanitizer();
}

/* ---- The handler ----------------------------------------------------------- */

static void try_preempt(struct m *mp, ucontext_t *uc)
{
    struct g *gp = mp->curg;
    struct p *pp = mp->p;
    /* preemptoff counts every reason the G must not be stopped here:
     * gmp_preempt_disable, the host's memory hooks (alloc.c), and, once
     * the hook library exists, each pthread mutex, rwlock or spinlock the
     * G took through its hooks and holds (it raises the count after the
     * lock is taken and lowers it before the unlock, as alloc.c does):
     * code holding such a lock is never stopped by this signal. */
    if (!gp || !pp || gp->preemptoff)
        return;
    /* Relaxed: sysmon's mark is a request. */
    if (!atomic_load_explicit(&pp->preempt, memory_order_relaxed))
        return;
    struct gstack *st = gp->stk;
    uintptr_t sp = gmp__sigctx_sp(uc), pc = gmp__sigctx_pc(uc);
    if (!st || sp > (uintptr_t)gstack_hi(st) ||
        sp < (uintptr_t)st->lo + gmp__sigctx_stub_need() +
                 PREEMPT_STACK_SLACK)
        return;                     /* on g0 or a signal stack, or no room */
    uint64_t mask;
    memcpy(&mask, &uc->uc_sigmask, sizeof mask);
    if (mask != mp->sigmask0)
        return;                     /* in a signal handler, or masked */
    if (!pc_preemptible(pc)) {
        gp->asyncrefused++;
        return;
    }
    if (!gmp__sigctx_fp_plain(uc))
        return;
    gp->asyncpreempts++;
    gp->asyncpc = pc;
    gmp__sigctx_redirect(uc, pc, sp);
}

/* GMP_DEBUG=stall: the G and backtrace sysmon asked for, if mp's P has a
 * request pending (struct gmp__stall has the protocol). Only reads the
 * G's stack, inside its bounds, and stores into the P's record: no
 * symbols here (dladdr may take the loader's lock the interrupted code
 * holds); sysmon prints them. */
GMP_UNCHECKED_READS
static void stall_take(struct m *mp, ucontext_t *uc)
{
    struct schedt *s = mp->sched;
    struct p *pp = mp->p;
    if (!s || !s->stalls || !pp)
        return;
    struct gmp__stall *st = &s->stalls[pp->id];
    int want = STALL_ASKED;
    /* Acquire: pairs with sysmon's release store of STALL_ASKED, for
     * tick; relaxed on failure (nothing asked, nothing read). */
    if (!atomic_compare_exchange_strong_explicit(&st->state, &want,
                                                 STALL_TAKING,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
        return;
    struct g *gp = mp->curg;
    struct gstack *stk = gp ? gp->stk : NULL;
    uintptr_t sp = gmp__sigctx_sp(uc), fp = gmp__sigctx_fp(uc);
    int n = 0;
    /* Relaxed: the owner's own counter, read on the owner's thread. */
    bool same = gp && atomic_load_explicit(&pp->schedtick,
                                           memory_order_relaxed) == st->tick;
    if (same) {
        st->goid = gp->goid;
        st->label = gp->label;
        st->fn = gp->fn;
        st->arg = gp->arg;
        st->pc[n++] = gmp__sigctx_pc(uc);
    }
    if (same && stk && sp >= (uintptr_t)stk->lo &&
        sp < (uintptr_t)gstack_hi(stk)) {
        uintptr_t lo = (uintptr_t)stk->lo, hi = (uintptr_t)gstack_hi(stk);
        /* Frame pointers, as trace.c's walk: each frame's record (at
         * fp + GMP_FP_RECORD, frame.h) holds the caller's fp and its
         * return address. */
        while (n < GMP_STALL_FRAMES && fp + GMP_FP_RECORD >= lo &&
               fp + GMP_FP_RECORD <= hi - 2 * sizeof(uintptr_t) &&
               fp % sizeof(uintptr_t) == 0) {
            uintptr_t next = ((uintptr_t *)(fp + GMP_FP_RECORD))[0];
            uintptr_t ret = ((uintptr_t *)(fp + GMP_FP_RECORD))[1];
            if (!ret)
                break;
            st->pc[n++] = ret;
            if (next <= fp)
                break;
            fp = next;
        }
    }
    st->n = n;
    /* Release: sysmon's acquire load of the state sees pc[] and n. */
    atomic_store_explicit(&st->state, n ? STALL_TAKEN : STALL_GONE,
                          memory_order_release);
}

void gmp__preempt_signal(ucontext_t *uc)
{
    /* The stub's own resume signal, or maybe a preemption request;
     * async_on is read relaxed: see its declaration. */
    if (gmp__sigctx_is_resume(uc)) {
        if (!gmp__sigctx_resume(uc))
            gmp__throw("asynchronous preemption: no FP/SIMD record to "
                       "resume");
    } else if (atomic_load_explicit(&async_on, memory_order_relaxed)) {
        struct m *mp = gmp__getm();
        if (mp) {
            stall_take(mp, uc);
            try_preempt(mp, uc);
        }
    }
}

/* Called by the stub on the G's stack, every register saved; frame is
 * where the stub saved them (frame.h, GMP_APF_*). While the G waits to
 * run again, g->asyncframe points there, so that gmp_dump can show where
 * the signal stopped it. */
void gmp__asyncpreempt2(uint64_t *frame)
{
    int saved_errno = errno;
    struct m *mp = gmp__getm();
    struct g *gp = mp->curg;
    /* Relaxed, both: gmp_dump reads it while gp waits in a run queue, and
     * checks what it finds against gp's stack (trace.c). */
    __atomic_store_n(&gp->asyncframe, frame, __ATOMIC_RELAXED);
    gmp__mcall(mp, gp, SW_PREEMPT);
    __atomic_store_n(&gp->asyncframe, NULL, __ATOMIC_RELAXED);
    gmp__errno_put(saved_errno);
    mp = gmp__getm();               /* maybe another thread now */
    gmp__sigctx_stub_return(frame, preempt_pid, mp->tid);
}

void gmp__asyncpreempt_lost(void)
{
    gmp__throw("asynchronous preemption: the resume signal was not "
               "delivered (SIGURG blocked on a runtime thread?)");
}

/* ---- Setup ---------------------------------------------------------------- */

/* Context: starting a runtime, before any of its threads exist. */
void gmp__preempt_setup(struct schedt *s, bool async, const char *objs)
{
    s->async_preempt = false;
#if defined(GMP_TSAN)
    /* TSan defers an asynchronous signal to its next interceptor and hands
     * the handler a copy of the context: a rewrite would be lost. */
    async = false;
#endif
#ifdef GMP_VALGRIND
    /* Memcheck calls the stub's stores below the stack pointer invalid,
     * and runs one thread at a time anyway. */
    if (RUNNING_ON_VALGRIND)
        async = false;
#endif
    if (!async || !gmp__sigctx_setup() || !scan_setup(objs))
        return;
    preempt_pid = getpid();
    if (gmp__signal_install(GMP_SIGNAL_PREEMPT) != 0)
        return;
    /* Relaxed: see its declaration. */
    atomic_store_explicit(&async_on, true, memory_order_relaxed);
    s->async_preempt = true;
}

/* Puts back the program's SIGURG handler, unless it installed another one
 * meanwhile. Context: stopping a runtime, its threads gone. */
void gmp__preempt_teardown(void)
{
    /* Relaxed: see its declaration. */
    atomic_store_explicit(&async_on, false, memory_order_relaxed);
    gmp__signal_restore(GMP_SIGNAL_PREEMPT);
}

/* Per-thread part, on each M as it starts: its thread id, SIGURG
 * unblocked (it may have inherited a mask that blocks it), and the mask
 * the handler expects to interrupt. */
void gmp__preempt_minit(struct m *mp)
{
    mp->tid = (int32_t)syscall(SYS_gettid);
    sigset_t set;
    sigemptyset(&set);
    if (mp->sched->async_preempt) {
        sigaddset(&set, PREEMPT_SIG);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
    pthread_sigmask(SIG_BLOCK, NULL, &set);
    memcpy(&mp->sigmask0, &set, sizeof mp->sigmask0);
}

/* An M leaving: a signal sysmon sent with a stale thread id must not land
 * on it once its signal stack is gone. Pending ones die with the thread. */
void gmp__preempt_mexit(struct m *mp)
{
    if (!mp->sched->async_preempt)
        return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, PREEMPT_SIG);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* ---- Requests ---------------------------------------------------------------- */

/* Asks the G running on pp to stop: marks the P, and signals its thread.
 * Context: sysmon (or a test), any thread. */
void gmp__preemptone(struct schedt *s, struct p *pp)
{
    /* Relaxed: a request the running G polls. */
    atomic_store_explicit(&pp->preempt, 1, memory_order_relaxed);
    if (!s->async_preempt ||
        atomic_load_explicit(&pp->status, memory_order_relaxed) != P_RUNNING)
        return;                     /* relaxed: a hint; see above */
    refresh();                      /* objects loaded or unloaded since */
    /* Relaxed: a stale id only sends a signal the handler ignores. */
    int32_t tid = atomic_load_explicit(&pp->tid, memory_order_relaxed);
    if (tid > 0)
        syscall(SYS_tgkill, preempt_pid, tid, PREEMPT_SIG);
}

bool gmp__stall_signal(struct schedt *s, struct p *pp)
{
    if (!s->async_preempt)
        return false;
    /* Relaxed: a stale id only sends a signal the handler ignores (it
     * finds no request, or another G, which it reports as gone). */
    int32_t tid = atomic_load_explicit(&pp->tid, memory_order_relaxed);
    if (tid > 0)
        syscall(SYS_tgkill, preempt_pid, tid, PREEMPT_SIG);
    return true;
}

/* The marked half of gmp__preempt_point. Context: a G whose M holds a
 * marked P. */
void gmp__preempt_marked(struct m *mp)
{
    if (mp->curg->preemptoff == 0)
        gmp__mcall(mp, mp->curg, SW_PREEMPT);   /* Go's gopreempt_m */
}

void gmp_preempt_disable(void)
{
    gmp__preempt_check();
    struct m *mp = gmp__getm();
    if (mp && mp->curg)
        mp->curg->preemptoff++;
}

void gmp_preempt_enable(void)
{
    struct m *mp = gmp__getm();
    if (!mp || !mp->curg || mp->curg->preemptoff == 0)
        return;
    if (--mp->curg->preemptoff == 0 && mp->p)
        gmp__preempt_point(mp);
}

int gmp_should_yield(void)
{
    struct m *mp = gmp__getm();
    if (!mp || !mp->curg || !mp->p)
        return 0;
    struct p *pp = mp->p;
    /* Relaxed: sysmon's mark is a request; a stale read only moves the
     * caller's yield to its next poll. */
    if (atomic_load_explicit(&pp->preempt, memory_order_relaxed))
        return 1;
    /* Or a goroutine readied here waits in runnext (woken by a timer or
     * a channel, or just made), or a timer of this P has come due: the
     * scheduler runs it at the yield, so a sleeper beside an interpreter
     * wakes within one of the host's polls, not one slice. (A timer's G
     * can land in runnext while the yielder itself is picked first, on
     * the global queue's turn.) The precise clock only when the coarse
     * one cannot tell. Relaxed: a hint, as in gmp__park_direct. */
    if (atomic_load_explicit(&pp->runnext, memory_order_relaxed))
        return 1;
    return gmp__timer_due(pp);
}
