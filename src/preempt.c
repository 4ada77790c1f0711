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
 *     the P is marked, and the G has not disabled preemption;
 *   - the interrupted stack pointer is on the G's stack (not g0's, not the
 *     signal stack) with room below it for the saved state;
 *   - the signal mask is the thread's usual one (not inside another
 *     signal handler, nor in code that masked signals);
 *   - the interrupted PC is not in the runtime (between gmp__text_begin
 *     and gmp__text_end: the library is partially linked into one object
 *     with those markers first and last, and calls out only through its
 *     GOT, never a PLT stub, cmake/check_text.cmake), nor in libc, the
 *     dynamic loader, the vDSO or the other system libraries listed in
 *     excluded_libs, nor in the program's PLT stubs (exclude_program_plt):
 *     code there may hold a lock the next goroutine on this thread needs
 *     (the runtime reads the clock through the vDSO with locks held);
 *   - arm64: no SVE or SME state beyond the SIMD registers is live.
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
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "runtime.h"
#include "sigchain.h"

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
/* The stub (arch/<arch>/preempt.S). */
GMP_HIDDEN void gmp__asyncpreempt(void);
GMP_HIDDEN void gmp__asyncpreempt2(uint64_t *frame);
#if defined(__aarch64__)
extern const char gmp__asyncpreempt_resume[] GMP_HIDDEN;
GMP_HIDDEN _Noreturn void gmp__asyncpreempt_lost(void);
#endif

#if defined(__x86_64__)
/* Bytes of the xsave area for the features the OS enabled (CPUID 0xD),
 * rounded up to 64; read by the stub. */
GMP_HIDDEN size_t gmp__xsave_size;
#endif

/* ---- Process-wide state --------------------------------------------------
 * Like the signal disposition it goes with: set while no runtime runs
 * (gmp__preempt_setup, before the handler is installed; the sigaction
 * system call orders it before any delivery), cleared after the handler
 * is removed. The handler only reads it. */

#define MAX_RANGES 64
static struct {
    int       n;
    uintptr_t lo[MAX_RANGES], hi[MAX_RANGES];
} excl;

static pid_t preempt_pid;
static struct sigaction old_urg;
static bool urg_installed;
/* Relaxed everywhere: written only while no runtime thread exists. */
static _Atomic bool async_on;

/* ---- Where not to stop ------------------------------------------------- */

/* System libraries whose code may hold a lock (malloc's, stdio's, the
 * loader's, a sanitizer's) or run with state a switch would break. Matched
 * against the start of the file name. */
static const char *const excluded_libs[] = {
    "libc.so", "ld-linux", "ld64.so", "libpthread.so", "libdl.so",
    "librt.so", "libm.so", "libresolv.so", "libgcc_s.so", "libstdc++.so",
    "libatomic.so", "libasan.so", "libtsan.so", "libubsan.so", "liblsan.so",
    "libhwasan.so",
};

static void excl_add(uintptr_t lo, uintptr_t hi)
{
    if (excl.n < MAX_RANGES) {
        excl.lo[excl.n] = lo;
        excl.hi[excl.n] = hi;
        excl.n++;
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
 * stubs stay unexcluded.
 */
static void exclude_program_plt(uintptr_t bias)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ElfW(Ehdr) eh;
    ElfW(Shdr) names;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_shentsize != sizeof(ElfW(Shdr)) ||
        eh.e_shstrndx == SHN_UNDEF || eh.e_shstrndx >= eh.e_shnum ||
        pread(fd, &names, sizeof names,
              (off_t)(eh.e_shoff + eh.e_shstrndx * sizeof names)) !=
            (ssize_t)sizeof names) {
        close(fd);
        return;
    }
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        ElfW(Shdr) sh;
        char name[16];
        if (pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + i * sizeof sh)) !=
            (ssize_t)sizeof sh)
            break;
        if (!(sh.sh_flags & SHF_EXECINSTR) || sh.sh_name >= names.sh_size)
            continue;
        ssize_t n = pread(fd, name, sizeof name - 1,
                          (off_t)(names.sh_offset + sh.sh_name));
        if (n <= 0)
            continue;
        name[n] = 0;
        /* .plt, .plt.sec, .plt.got; .iplt in static programs. */
        if (strncmp(name, ".plt", 4) == 0 || strcmp(name, ".iplt") == 0)
            excl_add(bias + sh.sh_addr, bias + sh.sh_addr + sh.sh_size);
    }
    close(fd);
}

struct scan_state {
    bool have_libc;
    bool program_seen;
};

static int scan_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct scan_state *st = data;
    const char *name = info->dlpi_name;
    bool hit = is_vdso(info);
    if (!hit && !st->program_seen) {
        st->program_seen = true;    /* the first object is the program */
        exclude_program_plt(info->dlpi_addr);
        return 0;
    }
    if (!hit && (!name || !*name))
        return 0;
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name ? name : "";
    for (size_t i = 0; i < sizeof excluded_libs / sizeof *excluded_libs; i++)
        if (strncmp(base, excluded_libs[i], strlen(excluded_libs[i])) == 0)
            hit = true;
    if (!hit)
        return 0;
    if (strncmp(base, "libc.so", 7) == 0)
        st->have_libc = true;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
            excl_add(info->dlpi_addr + ph->p_vaddr,
                     info->dlpi_addr + ph->p_vaddr + ph->p_memsz);
    }
    return 0;
}

static bool pc_excluded(uintptr_t pc)
{
    for (int i = 0; i < excl.n; i++)
        if (pc >= excl.lo[i] && pc < excl.hi[i])
            return true;
    return false;
}

/* True when a sanitizer's runtime is linked into the program (clang's
 * default) rather than loaded as one of the shared objects above: its
 * allocator and interceptors hold locks, in code that cannot be told apart
 * from the program's. Context: after the scan. */
static bool static_sanitizer(void)
{
    static const char *const inits[] = {
        "__asan_init", "__tsan_init", "__msan_init", "__hwasan_init",
        "__lsan_init",
    };
    for (size_t i = 0; i < sizeof inits / sizeof *inits; i++) {
        void *sym = dlsym(RTLD_DEFAULT, inits[i]);
        if (sym && !pc_excluded((uintptr_t)sym))
            return true;
    }
    return false;
}

/* Fills excl. Returns false when libc or a sanitizer runtime is linked
 * into the program or into this library statically. */
static bool scan_excluded(void)
{
    excl.n = 0;
    excl_add((uintptr_t)gmp__text_begin, (uintptr_t)gmp__text_end);
    struct scan_state st = {false, false};
    dl_iterate_phdr(scan_object, &st);
    return st.have_libc && !static_sanitizer();
}

/* ---- Context access ------------------------------------------------------ */

#if defined(__x86_64__)
#define UC_PC(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RIP])
#define UC_SP(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RSP])

static size_t stub_stack_need(void)
{
    return 128 + 8 + 16 * 8 + 64 + gmp__xsave_size + PREEMPT_STACK_SLACK;
}

static void redirect(ucontext_t *uc, uintptr_t pc, uintptr_t sp)
{
    sp -= 128 + 8;
    *(uintptr_t *)sp = pc;
    uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)gmp__asyncpreempt;
}

/* The stub saves with xsave: it needs the OS to have enabled it. */
static bool arch_setup(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return false;
    if (!__get_cpuid_count(0xd, 0, &a, &b, &c, &d) || b < 576)
        return false;
    gmp__xsave_size = ((size_t)b + 63) & ~(size_t)63;
    return true;
}

#elif defined(__aarch64__)
#define UC_PC(uc) ((uintptr_t)(uc)->uc_mcontext.pc)
#define UC_SP(uc) ((uintptr_t)(uc)->uc_mcontext.sp)

/* The stub's frame (preempt.S): x0-x30, nzcv, fpsr, fpcr, q0-q31, then
 * pid and tid for the resume signal; above it the handler's two words,
 * the interrupted PC and sp. In 8-byte words. */
enum {
    F_X0 = 0, F_NZCV = 31, F_FPSR = 32, F_FPCR = 33, F_Q0 = 34,
    F_PID = 98, F_TID = 99, F_PC = 100, F_SP = 101,
};

/* Signal frame records (the kernel's asm/sigcontext.h, spelled out:
 * older headers lack some of them). */
struct rec {
    uint32_t magic, size;
};
#define REC_FPSIMD 0x46508001u
#define REC_SVE    0x53564501u
#define REC_ZA     0x54366345u
#define REC_ZT     0x5a544e01u
#define REC_EXTRA  0x45585401u
#define REC_SVE_FLAG_SM  1u

struct fpsimd_rec {
    struct rec head;
    uint32_t   fpsr, fpcr;
    __uint128_t vregs[32];
};
struct sve_rec {
    struct rec head;
    uint16_t   vl, flags, reserved[2];
    /* registers at offset 16: z0-z31 (vl bytes each), p0-p15 and ffr
     * (vl / 8 bytes each) */
};
struct extra_rec {
    struct rec head;
    uint64_t   datap;
    uint32_t   size, reserved[3];
};

static size_t stub_stack_need(void)
{
    return 16 + 800 + PREEMPT_STACK_SLACK;
}

static void redirect(ucontext_t *uc, uintptr_t pc, uintptr_t sp)
{
    uintptr_t *w = (uintptr_t *)(sp - 16);
    w[0] = pc;
    w[1] = sp;
    uc->uc_mcontext.sp = (uintptr_t)w;
    uc->uc_mcontext.pc = (uintptr_t)gmp__asyncpreempt;
}

static bool arch_setup(void)
{
    return true;
}

/* Finds the records the kernel put in the signal frame. */
static void find_recs(ucontext_t *uc, struct fpsimd_rec **fp,
                      struct sve_rec **sve, struct rec **za, struct rec **zt)
{
    *fp = NULL;
    *sve = NULL;
    *za = *zt = NULL;
    char *p = (char *)uc->uc_mcontext.__reserved;
    char *end = p + sizeof uc->uc_mcontext.__reserved;
    while (p + sizeof(struct rec) <= end) {
        struct rec *r = (struct rec *)(void *)p;
        if (r->magic == 0 || r->size < sizeof *r)
            break;
        switch (r->magic) {
        case REC_FPSIMD: *fp = (struct fpsimd_rec *)r; break;
        case REC_SVE:    *sve = (struct sve_rec *)r; break;
        case REC_ZA:     *za = r; break;
        case REC_ZT:     *zt = r; break;
        case REC_EXTRA: {
            struct extra_rec *x = (struct extra_rec *)r;
            p = (char *)(uintptr_t)x->datap;
            end = p + x->size;
            continue;
        }
        default: break;
        }
        p += r->size;
    }
}

/* True when the SVE record holds nothing the SIMD registers do not: Z
 * bits above 128, every P register and FFR all zero. */
static bool sve_plain(const struct sve_rec *sve)
{
    if (!sve || sve->head.size <= sizeof *sve)
        return true;                /* no SVE register payload */
    if (sve->flags & REC_SVE_FLAG_SM)
        return false;               /* streaming mode */
    size_t vl = sve->vl;
    const unsigned char *z = (const unsigned char *)sve + 16;
    for (int n = 0; n < 32; n++)
        for (size_t i = 16; i < vl; i++)
            if (z[n * vl + i])
                return false;
    const unsigned char *pr = z + 32 * vl;
    for (size_t i = 0; i < 17 * (vl / 8); i++)
        if (pr[i])
            return false;
    return true;
}

static bool fp_state_plain(ucontext_t *uc)
{
    struct fpsimd_rec *fp;
    struct sve_rec *sve;
    struct rec *za, *zt;
    find_recs(uc, &fp, &sve, &za, &zt);
    if (!fp)
        return false;
    if (za && za->size > 16)
        return false;               /* SME's ZA array is live */
    if (zt && zt->size > 16)
        return false;
    return sve_plain(sve);
}

/* The resume signal: loads the frame the stub saved into the context the
 * kernel restores on return. */
static void resume(ucontext_t *uc)
{
    const uint64_t *f = (const uint64_t *)uc->uc_mcontext.sp;
    for (int i = 0; i < 31; i++)
        uc->uc_mcontext.regs[i] = f[F_X0 + i];
    uint64_t nzcv = 0xf0000000u;
    uc->uc_mcontext.pstate = (uc->uc_mcontext.pstate & ~nzcv) |
                             (f[F_NZCV] & nzcv);
    struct fpsimd_rec *fp;
    struct sve_rec *sve;
    struct rec *za, *zt;
    find_recs(uc, &fp, &sve, &za, &zt);
    if (!fp)
        gmp__throw("asynchronous preemption: no FP/SIMD record to resume");
    fp->fpsr = (uint32_t)f[F_FPSR];
    fp->fpcr = (uint32_t)f[F_FPCR];
    memcpy(fp->vregs, &f[F_Q0], sizeof fp->vregs);
    if (sve && sve->head.size > sizeof *sve) {
        /* The kernel restores Z from here when present: the SIMD values
         * in the low 128 bits, the rest zero (as after a system call). */
        size_t vl = sve->vl;
        unsigned char *z = (unsigned char *)sve + 16;
        memset(z, 0, 32 * vl + 17 * (vl / 8));
        for (int n = 0; n < 32; n++)
            memcpy(z + n * vl, &f[F_Q0 + 2 * n], 16);
    }
    uc->uc_mcontext.pc = f[F_PC];
    uc->uc_mcontext.sp = f[F_SP];
}
#else
#error "gmprt: unsupported processor (x86-64 and arm64 only)"
#endif

/* ---- The handler ----------------------------------------------------------- */

static void try_preempt(struct m *mp, ucontext_t *uc)
{
    struct g *gp = mp->curg;
    struct p *pp = mp->p;
    if (!gp || !pp || gp->preemptoff)
        return;
    /* Relaxed: sysmon's mark is a request. */
    if (!atomic_load_explicit(&pp->preempt, memory_order_relaxed))
        return;
    struct gstack *st = gp->stk;
    uintptr_t sp = UC_SP(uc), pc = UC_PC(uc);
    if (!st || sp > (uintptr_t)gstack_hi(st) ||
        sp < (uintptr_t)st->lo + stub_stack_need())
        return;                     /* on g0 or a signal stack, or no room */
    uint64_t mask;
    memcpy(&mask, &uc->uc_sigmask, sizeof mask);
    if (mask != mp->sigmask0)
        return;                     /* in a signal handler, or masked */
    if (pc_excluded(pc)) {
        gp->asyncrefused++;
        return;
    }
#if defined(__aarch64__)
    if (!fp_state_plain(uc))
        return;
#endif
    gp->asyncpreempts++;
    gp->asyncpc = pc;
    redirect(uc, pc, sp);
}

static void on_sigurg(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    int saved_errno = errno;
#if defined(__aarch64__)
    if (UC_PC(uc) == (uintptr_t)gmp__asyncpreempt_resume)
        resume(uc);
    else
#endif
    /* Relaxed: see its declaration. */
    if (atomic_load_explicit(&async_on, memory_order_relaxed)) {
        struct m *mp = gmp__getm();
        if (mp)
            try_preempt(mp, uc);
    }
    gmp__sig_chain(sig, si, ucv, &old_urg);
    errno = saved_errno;
}

/* Called by the stub on the G's stack, every register saved. */
void gmp__asyncpreempt2(uint64_t *frame)
{
    (void)frame;
    int saved_errno = errno;
    struct m *mp = gmp__getm();
    gmp__mcall(mp, mp->curg, SW_PREEMPT);
    gmp__errno_put(saved_errno);
#if defined(__aarch64__)
    mp = gmp__getm();               /* maybe another thread now */
    frame[F_PID] = (uint64_t)preempt_pid;
    frame[F_TID] = (uint64_t)mp->tid;
#endif
}

#if defined(__aarch64__)
void gmp__asyncpreempt_lost(void)
{
    gmp__throw("asynchronous preemption: the resume signal was not "
               "delivered (SIGURG blocked on a runtime thread?)");
}
#endif

/* ---- Setup ---------------------------------------------------------------- */

/* Context: starting a runtime, before any of its threads exist. */
void gmp__preempt_setup(struct schedt *s, bool async)
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
    if (!async || !arch_setup() || !scan_excluded())
        return;
    preempt_pid = getpid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigurg;
    /* On the M's signal stack: the G's stack gets only the stub's frame. */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(PREEMPT_SIG, &sa, &old_urg) != 0)
        return;
    urg_installed = true;
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
    if (!urg_installed)
        return;
    struct sigaction cur;
    if (sigaction(PREEMPT_SIG, NULL, &cur) == 0 &&
        (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigurg)
        sigaction(PREEMPT_SIG, &old_urg, NULL);
    urg_installed = false;
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
    /* Relaxed: a stale id only sends a signal the handler ignores. */
    int32_t tid = atomic_load_explicit(&pp->tid, memory_order_relaxed);
    if (tid > 0)
        syscall(SYS_tgkill, preempt_pid, tid, PREEMPT_SIG);
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
