/*
 * sigctx.h - AArch64 Linux: the context a signal interrupted, and how the
 * handler sends the thread into the preemption stub (preempt.S) and back.
 * arch/interrupt.h lists these functions and includes this file.
 * The stub is entered with the interrupted pc and sp stored below sp (no
 * red zone in AAPCS64) and goes back by signalling its own thread
 * (src/preempt.c's essay; preempt.S has the frame).
 */
#ifndef GMP_ARCH_SIGCTX_H
#define GMP_ARCH_SIGCTX_H

#include "context.h"         /* frame.h: GMP_APF_* */

#define GMP_RED_ZONE 0

/* The stub's last instruction before the resume signal is taken
 * (preempt.S). */
extern const char gmp__asyncpreempt_resume[]
    __attribute__((visibility("hidden")));

/* The stub's frame (preempt.S): x0-x30, nzcv, fpsr, fpcr, q0-q31, then
 * pid and tid for the resume signal; above it the handler's two words,
 * the interrupted PC and sp. In 8-byte words. */
enum {
    GMP_SF_X0 = 0, GMP_SF_NZCV = 31, GMP_SF_FPSR = 32, GMP_SF_FPCR = 33,
    GMP_SF_Q0 = 34, GMP_SF_PID = 98, GMP_SF_TID = 99, GMP_SF_PC = 100,
    GMP_SF_SP = 101,
};
_Static_assert(GMP_APF_FP == GMP_SF_X0 + 29 && GMP_APF_PC == GMP_SF_PC &&
                   GMP_APF_WORDS == GMP_SF_SP + 1,
               "frame.h's GMP_APF_* describe this frame");

/* Signal frame records (the kernel's asm/sigcontext.h, spelled out:
 * older headers lack some of them). */
struct gmp__sigrec {
    uint32_t magic, size;
};
#define GMP_REC_FPSIMD 0x46508001u
#define GMP_REC_SVE    0x53564501u
#define GMP_REC_ZA     0x54366345u
#define GMP_REC_ZT     0x5a544e01u
#define GMP_REC_EXTRA  0x45585401u
#define GMP_REC_SVE_FLAG_SM  1u

struct gmp__fpsimd_rec {
    struct gmp__sigrec head;
    uint32_t   fpsr, fpcr;
    __uint128_t vregs[32];
};
struct gmp__sve_rec {
    struct gmp__sigrec head;
    uint16_t   vl, flags, reserved[2];
    /* registers at offset 16: z0-z31 (vl bytes each), p0-p15 and ffr
     * (vl / 8 bytes each) */
};
struct gmp__extra_rec {
    struct gmp__sigrec head;
    uint64_t   datap;
    uint32_t   size, reserved[3];
};

static inline uintptr_t gmp__sigctx_pc(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.pc;
}

static inline uintptr_t gmp__sigctx_sp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.sp;
}

static inline uintptr_t gmp__sigctx_fp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.regs[29];
}

static inline bool gmp__sigctx_setup(void)
{
    return true;
}

/* The handler's two words and the stub's frame. */
static inline size_t gmp__sigctx_stub_need(void)
{
    return 16 + 800;
}

static inline void gmp__sigctx_redirect(ucontext_t *uc, uintptr_t pc,
                                        uintptr_t sp)
{
    uintptr_t *w = (uintptr_t *)(sp - 16);
    w[0] = pc;
    w[1] = sp;
    uc->uc_mcontext.sp = (uintptr_t)w;
    uc->uc_mcontext.pc = (uintptr_t)gmp__asyncpreempt;
}

/* The records the kernel put in a signal frame (NULL: absent). */
struct gmp__sigrecs {
    struct gmp__fpsimd_rec *fp;
    struct gmp__sve_rec *sve;
    struct gmp__sigrec *za, *zt;
};

static inline struct gmp__sigrecs gmp__sigctx_find_recs(const ucontext_t *uc)
{
    struct gmp__sigrecs rs = {NULL, NULL, NULL, NULL};
    char *p = (char *)uc->uc_mcontext.__reserved;
    char *end = p + sizeof uc->uc_mcontext.__reserved;
    while (p + sizeof(struct gmp__sigrec) <= end) {
        struct gmp__sigrec *r = (struct gmp__sigrec *)(void *)p;
        if (r->magic == 0 || r->size < sizeof *r)
            break;
        switch (r->magic) {
        case GMP_REC_FPSIMD: rs.fp = (struct gmp__fpsimd_rec *)r; break;
        case GMP_REC_SVE:    rs.sve = (struct gmp__sve_rec *)r; break;
        case GMP_REC_ZA:     rs.za = r; break;
        case GMP_REC_ZT:     rs.zt = r; break;
        case GMP_REC_EXTRA: {
            struct gmp__extra_rec *x = (struct gmp__extra_rec *)r;
            p = (char *)(uintptr_t)x->datap;
            end = p + x->size;
            continue;
        }
        default: break;
        }
        p += r->size;
    }
    return rs;
}

/* True when the SVE record holds nothing the SIMD registers do not: Z
 * bits above 128, every P register and FFR all zero. */
static inline bool gmp__sigctx_sve_plain(const struct gmp__sve_rec *sve)
{
    if (!sve || sve->head.size <= sizeof *sve)
        return true;                /* no SVE register payload */
    if (sve->flags & GMP_REC_SVE_FLAG_SM)
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

static inline bool gmp__sigctx_fp_plain(const ucontext_t *uc)
{
    struct gmp__sigrecs rs = gmp__sigctx_find_recs(uc);
    if (!rs.fp)
        return false;
    if (rs.za && rs.za->size > 16)
        return false;               /* SME's ZA array is live */
    if (rs.zt && rs.zt->size > 16)
        return false;
    return gmp__sigctx_sve_plain(rs.sve);
}

static inline bool gmp__sigctx_is_resume(const ucontext_t *uc)
{
    return gmp__sigctx_pc(uc) == (uintptr_t)gmp__asyncpreempt_resume;
}

/* The resume signal: loads the frame the stub saved into the context the
 * kernel restores on return. */
static inline bool gmp__sigctx_resume(ucontext_t *uc)
{
    const uint64_t *f = (const uint64_t *)uc->uc_mcontext.sp;
    for (int i = 0; i < 31; i++)
        uc->uc_mcontext.regs[i] = f[GMP_SF_X0 + i];
    uint64_t nzcv = 0xf0000000u;
    uc->uc_mcontext.pstate = (uc->uc_mcontext.pstate & ~nzcv) |
                             (f[GMP_SF_NZCV] & nzcv);
    struct gmp__sigrecs rs = gmp__sigctx_find_recs(uc);
    struct gmp__fpsimd_rec *fp = rs.fp;
    struct gmp__sve_rec *sve = rs.sve;
    if (!fp)
        return false;
    fp->fpsr = (uint32_t)f[GMP_SF_FPSR];
    fp->fpcr = (uint32_t)f[GMP_SF_FPCR];
    memcpy(fp->vregs, &f[GMP_SF_Q0], sizeof fp->vregs);
    if (sve && sve->head.size > sizeof *sve) {
        /* The kernel restores Z from here when present: the SIMD values
         * in the low 128 bits, the rest zero (as after a system call). */
        size_t vl = sve->vl;
        unsigned char *z = (unsigned char *)sve + 16;
        memset(z, 0, 32 * vl + 17 * (vl / 8));
        for (int n = 0; n < 32; n++)
            memcpy(z + n * vl, &f[GMP_SF_Q0 + 2 * n], 16);
    }
    uc->uc_mcontext.pc = f[GMP_SF_PC];
    uc->uc_mcontext.sp = f[GMP_SF_SP];
    return true;
}

/* The process and thread the stub's resume signal goes to: the G may
 * resume on another thread than the one it was stopped on. */
static inline void gmp__sigctx_stub_return(uint64_t *frame, pid_t pid,
                                           int tid)
{
    frame[GMP_SF_PID] = (uint64_t)pid;
    frame[GMP_SF_TID] = (uint64_t)tid;
}

#endif /* GMP_ARCH_SIGCTX_H */
