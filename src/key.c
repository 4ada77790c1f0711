/*
 * key.c - goroutine-local storage (gmp_key_create, gmp_getspecific, ...:
 * pthread's keys, per goroutine) and the goroutine's side of locking it
 * to its thread (gmp_lock_os_thread; the scheduler's side is in sched.c,
 * "Locked threads").
 *
 * Keys. A process-wide registry of GMP_KEYS_MAX entries, each a sequence
 * number and a destructor. seq is even while the entry is free, odd while
 * a key uses it; create and delete each add one (wrapping in 25 bits).
 * A key is (seq << 7) | index: never 0, and a deleted key, or one of an
 * entry deleted and created again, no longer matches its entry's seq.
 *
 * Values. Each goroutine has, once it sets one, a table (struct gmp__gext,
 * hung off struct g's ext) of slots by key index, each holding the key it
 * was set with and the value; a slot whose key differs from the one asked
 * for (stale, from a deleted key) reads as NULL. The table grows by
 * doubling, from 8 slots, to cover the highest index set. It follows the
 * G from thread to thread; only the G touches it while it runs, and a G
 * moves between threads only through run queues, which order everything.
 * gmp_getspecific is a handful of plain loads and one relaxed load of the
 * registry: no lock, no allocation.
 * A thread that is not a goroutine (or a host thread) has a table of its
 * own, in thread-local storage, whose destructors run at thread exit
 * (through one pthread key).
 *
 * Destructors run when the goroutine's function returns, on the
 * goroutine, pthread's way: each non-NULL value whose key is still live
 * and has a destructor is cleared and passed to it; if destructors set
 * values again, the pass repeats, GMP_KEY_DESTRUCTOR_ITERATIONS times at
 * most. Then the G is unlocked from its thread and the table freed.
 *
 * Registry order. create: destructor, then seq (release). delete: seq,
 * then the destructor NULL (release). A reader of a destructor loads seq
 * (acquire), the destructor (acquire), seq again: it uses the destructor
 * only if both seqs are the key's, which proves it is that key's (a later
 * delete or create would have stored the second seq before the destructor
 * it read). Create and delete serialise on reg_mu.
 *
 * Locks: reg_mu (a pthread mutex, held for a few loads and stores) for
 * create and delete only.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "alloc.h"

#define KEY_IDX_BITS 7
#define KEY_IDX_MASK ((1u << KEY_IDX_BITS) - 1)
#define KEY_SEQ_MASK ((1u << (32 - KEY_IDX_BITS)) - 1)
#define EXT_MIN_SLOTS 8

_Static_assert(GMP_KEYS_MAX == 1u << KEY_IDX_BITS,
               "key index bits and GMP_KEYS_MAX disagree");

struct kslot {
    gmp_key_t key;                  /* the key value was set with */
    void     *value;
};

struct gmp__gext {
    struct m *lockedm;              /* gmp_lock_os_thread's M, or NULL */
    uint32_t  cap;                  /* slots */
    struct kslot slot[];
};

static struct {
    _Atomic uint32_t seq;
    _Atomic(void (*)(void *)) dtor;
} reg[GMP_KEYS_MAX];
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;

/* A plain thread's table, and the pthread key whose destructor empties it
 * when the thread exits. */
static __thread struct gmp__gext *t_ext
    __attribute__((tls_model("initial-exec")));
static pthread_key_t t_exit_key;
static pthread_once_t t_exit_once = PTHREAD_ONCE_INIT;
static bool t_exit_ok;

static size_t ext_size(uint32_t cap)
{
    return sizeof(struct gmp__gext) + (size_t)cap * sizeof(struct kslot);
}

/* Where the caller's table lives: its goroutine's ext, else the thread's.
 * *is_g says which (they come from different allocators: a goroutine's
 * from the runtime's, a thread's from libc, as it may outlive any
 * runtime). Context: any; read again after anything that may switch. */
static struct gmp__gext **ext_home(bool *is_g)
{
    struct m *mp = gmp__getm();
    if (mp && mp->curg) {
        *is_g = true;
        return &mp->curg->ext;
    }
    *is_g = false;
    return &t_ext;
}

static void ext_free(struct gmp__gext *x, bool is_g)
{
    if (!x)
        return;
    if (is_g)
        gmp__free(x, ext_size(x->cap));
    else
        free(x);
}

static void t_exit(void *unused);

static void t_exit_init(void)
{
    t_exit_ok = pthread_key_create(&t_exit_key, t_exit) == 0;
}

/* Makes *home hold at least need slots (a new table, zeroed, when it has
 * none). Returns false (nothing changed) when memory is short, or a
 * thread's exit hook cannot be set up. */
static bool ext_grow(struct gmp__gext **home, bool is_g, uint32_t need)
{
    struct gmp__gext *old = *home;
    uint32_t cap = old ? old->cap : 0;
    if (need <= cap)
        return true;
    uint32_t ncap = cap ? cap : EXT_MIN_SLOTS;
    while (ncap < need)
        ncap *= 2;
    struct gmp__gext *x;
    if (is_g) {
        x = gmp__alloc(ext_size(ncap));     /* zeroed */
    } else {
        pthread_once(&t_exit_once, t_exit_init);
        /* The marker makes pthread call t_exit when the thread ends. */
        if (!t_exit_ok ||
            (!old && pthread_setspecific(t_exit_key, (void *)1) != 0))
            return false;
        x = calloc(1, ext_size(ncap));
    }
    if (!x)
        return false;
    if (old) {
        memcpy(x, old, ext_size(cap));
        ext_free(old, is_g);
    }
    x->cap = ncap;
    *home = x;
    return true;
}

/* The destructor of live key k, or NULL (deleted, or none). */
static void (*key_dtor(gmp_key_t k))(void *)
{
    uint32_t i = k & KEY_IDX_MASK, want = k >> KEY_IDX_BITS;
    /* Acquire: pairs with create's release store of seq, so the
     * destructor load sees create's store or a later one. */
    if (atomic_load_explicit(&reg[i].seq, memory_order_acquire) != want)
        return NULL;
    /* Acquire: pairs with the release stores of delete and create, so
     * a destructor stored by a later delete or create brings its seq
     * along to the load below. */
    void (*d)(void *) = atomic_load_explicit(&reg[i].dtor,
                                             memory_order_acquire);
    /* Relaxed: ordered after the acquire load above. */
    if (atomic_load_explicit(&reg[i].seq, memory_order_relaxed) != want)
        return NULL;
    return d;
}

/* pthread's destructor passes over the table at *home (which destructors
 * may grow, so it is read again after each call). */
static void run_destructors(struct gmp__gext **home)
{
    for (int round = 0; round < GMP_KEY_DESTRUCTOR_ITERATIONS; round++) {
        bool called = false;
        for (uint32_t i = 0; *home && i < (*home)->cap; i++) {
            struct kslot *sl = &(*home)->slot[i];
            void *v = sl->value;
            if (!v)
                continue;
            sl->value = NULL;
            void (*d)(void *) = key_dtor(sl->key);
            if (d) {
                d(v);
                called = true;
            }
        }
        if (!called)
            return;
    }
}

/* A plain thread ends (pthread runs its key destructors). */
static void t_exit(void *unused)
{
    (void)unused;
    /* Our own pass, with rounds of our own; a value set again after it
     * (by another library's destructor) sets the marker again, and
     * pthread calls us once more. */
    run_destructors(&t_ext);
    free(t_ext);
    t_ext = NULL;
}

void gmp__gext_exit(struct g *gp)
{
    run_destructors(&gp->ext);      /* gp is the caller: its ext is ours */
    if (gp->locked) {
        /* Exit while locked: the thread goes back to running goroutines
         * (Go ends it instead; documented in gmprt.h). The destructors
         * above ran on the locked thread. */
        struct m *mp = gmp__getm();
        gp->locked = 0;
        mp->lockedg = NULL;
    }
    struct gmp__gext *x = gp->ext;
    gp->ext = NULL;
    ext_free(x, true);
}

struct m *gmp__lockedm(struct g *gp)
{
    return gp->ext ? gp->ext->lockedm : NULL;
}

void gmp__gext_release_all(struct schedt *s)
{
    /* As trace.c's each_g: full chunks, and the first up to what was
     * carved; uncarved Gs are zero. */
    struct gslab *first = s->gslabs;
    for (struct gslab *sl = first; sl; sl = sl->next) {
        struct g *end = sl == first
                            ? s->gchunk_next
                            : sl->gs + (sl->len - sizeof *sl) /
                                           sizeof(struct g);
        for (struct g *gp = sl->gs; gp < end; gp++)
            if (gp->ext) {
                ext_free(gp->ext, true);
                gp->ext = NULL;
            }
    }
}

/* ---- Keys ----------------------------------------------------------------- */

int gmp_key_create(gmp_key_t *key, void (*destructor)(void *))
{
    if (!key)
        return GMP_EINVAL;
    gmp__preempt_check();
    GMP_LIBC(pthread_mutex_lock)(&reg_mu);
    for (uint32_t i = 0; i < GMP_KEYS_MAX; i++) {
        /* Relaxed: under reg_mu, which every writer holds. */
        uint32_t seq = atomic_load_explicit(&reg[i].seq, memory_order_relaxed);
        if (seq & 1)
            continue;
        seq = (seq + 1) & KEY_SEQ_MASK;     /* odd: live */
        /* Release, both: see the file comment (registry order). */
        atomic_store_explicit(&reg[i].dtor, destructor, memory_order_release);
        atomic_store_explicit(&reg[i].seq, seq, memory_order_release);
        GMP_LIBC(pthread_mutex_unlock)(&reg_mu);
        *key = (seq << KEY_IDX_BITS) | i;
        return 0;
    }
    GMP_LIBC(pthread_mutex_unlock)(&reg_mu);
    return GMP_EAGAIN;
}

int gmp_key_delete(gmp_key_t key)
{
    uint32_t i = key & KEY_IDX_MASK, want = key >> KEY_IDX_BITS;
    if (!(want & 1))
        return GMP_EINVAL;
    gmp__preempt_check();
    GMP_LIBC(pthread_mutex_lock)(&reg_mu);
    /* Relaxed: under reg_mu, which every writer holds. */
    if (atomic_load_explicit(&reg[i].seq, memory_order_relaxed) != want) {
        GMP_LIBC(pthread_mutex_unlock)(&reg_mu);
        return GMP_EINVAL;
    }
    /* Relaxed, then release: see the file comment (registry order); the
     * release store of the destructor orders the seq store before it. */
    atomic_store_explicit(&reg[i].seq, (want + 1) & KEY_SEQ_MASK,
                          memory_order_relaxed);
    atomic_store_explicit(&reg[i].dtor, NULL, memory_order_release);
    GMP_LIBC(pthread_mutex_unlock)(&reg_mu);
    return 0;
}

void *gmp_getspecific(gmp_key_t key)
{
    /* The TLS variable read once: nothing here can switch threads. */
    struct m *mp = gmp__tls_m;
    struct gmp__gext *x = GMP_LIKELY(mp && mp->curg) ? mp->curg->ext : t_ext;
    uint32_t i = key & KEY_IDX_MASK;
    if (!x || i >= x->cap || x->slot[i].key != key)
        return NULL;
    /* Relaxed: only whether the key is still live matters; a delete
     * racing this call is the program's race (as with pthread keys). */
    if (atomic_load_explicit(&reg[i].seq, memory_order_relaxed) !=
        key >> KEY_IDX_BITS)
        return NULL;
    return x->slot[i].value;
}

int gmp_setspecific(gmp_key_t key, void *value)
{
    gmp__preempt_check();
    uint32_t i = key & KEY_IDX_MASK, want = key >> KEY_IDX_BITS;
    /* Relaxed: as in gmp_getspecific. */
    if (!(want & 1) ||
        atomic_load_explicit(&reg[i].seq, memory_order_relaxed) != want)
        return GMP_EINVAL;
    bool is_g;
    struct gmp__gext **home = ext_home(&is_g);
    struct gmp__gext *x = *home;
    if (!x || i >= x->cap) {
        if (!value)
            return 0;               /* unset already reads as NULL */
        if (!ext_grow(home, is_g, i + 1))
            return GMP_ENOMEM;
        x = *home;
    }
    x->slot[i].key = key;
    x->slot[i].value = value;
    return 0;
}

/* ---- Locking a goroutine to its thread ------------------------------------ */

void gmp_lock_os_thread(void)
{
    gmp__preempt_check();
    struct m *mp = gmp__getm();
    if (!mp || !mp->curg)
        return;                     /* not a goroutine */
    struct g *gp = mp->curg;
    if (gp->locked++ > 0) {
        if (GMP_UNLIKELY(gp->locked == 0))
            gmp__throw("gmp_lock_os_thread: nested too deep");
        return;
    }
    /* A table with no slots yet, for lockedm. There is no error to
     * return (Go's LockOSThread has none), and 16 bytes missing is an
     * out-of-memory as fatal as a stack that cannot be mapped. */
    if (!gp->ext && !(gp->ext = gmp__alloc(ext_size(0))))
        gmp__throw("out of memory: gmp_lock_os_thread");
    gp->ext->lockedm = mp;
    mp->lockedg = gp;
}

void gmp_unlock_os_thread(void)
{
    gmp__preempt_check();
    struct m *mp = gmp__getm();
    if (!mp || !mp->curg)
        return;
    struct g *gp = mp->curg;
    if (gp->locked == 0 || --gp->locked > 0)
        return;                     /* not locked, or still nested */
    gp->ext->lockedm = NULL;
    mp->lockedg = NULL;
}
