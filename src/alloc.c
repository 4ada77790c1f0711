/*
 * alloc.c - where the runtime's memory comes from: the host's hooks when
 * it gave them in gmp_config_t (an embedding runtime that wants to own or
 * account for every byte), else libc and anonymous mappings; and the
 * thread hooks every runtime thread calls as it starts and stops.
 *
 * Two kinds: objects (the scheduler, Ps, Ms, descriptor slabs, waiter
 * records, timer heaps, poller tables, channels, pools), zeroed and
 * aligned to a cache line; and stack memory (goroutine stack chunks,
 * signal stacks), page-aligned, which the runtime guards with
 * mprotect/madvise. Frees pass the size that was asked for, so a host's
 * allocator need keep no header.
 *
 * The hooks are process-wide, like the runtime: set when a runtime starts
 * (before its first allocation) and kept until the next one starts, so
 * that an object made under a runtime (a channel, say) and freed after it
 * stopped goes back to the same allocator. Read without a lock: they
 * change only while no runtime thread exists (lifecycle.c's lock).
 *
 * No goroutine is preempted inside a hook. The preemption handler tells
 * safe code from unsafe by address (src/preempt.c), and a hook is the
 * host's code, which it cannot tell from the program's; yet the runtime
 * may call it holding one of its locks (startm allocates an M under
 * sched.lock, from gmp_go), and the host's allocator may hold its own.
 * A goroutine stopped there would keep both while the next one on the
 * thread wants them. So a call from a goroutine raises its preemptoff
 * for the length of the hook, as gmp_preempt_disable does (without the
 * preemption point on the way out, which would yield under the lock).
 * startm's pthread_create is bracketed the same way (gmp__callout_begin):
 * a program, a sanitizer or a profiler may define its own.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime.h"

gmp_config_t gmp__hooks;

void gmp__hooks_set(const gmp_config_t *cfg)
{
    memset(&gmp__hooks, 0, sizeof gmp__hooks);
    if (!cfg)
        return;
    gmp__hooks.thread_start = cfg->thread_start;
    gmp__hooks.thread_stop = cfg->thread_stop;
    if (cfg->mem_alloc && cfg->mem_free) {          /* both or neither */
        gmp__hooks.mem_alloc = cfg->mem_alloc;
        gmp__hooks.mem_free = cfg->mem_free;
    }
    if (cfg->stack_alloc && cfg->stack_free) {
        gmp__hooks.stack_alloc = cfg->stack_alloc;
        gmp__hooks.stack_free = cfg->stack_free;
    }
    gmp__hooks.hook_ctx = cfg->hook_ctx;
    gmp__hooks.describe = cfg->describe;
}

struct g *gmp__callout_begin(void)
{
    struct m *mp = gmp__getm();
    struct g *gp = mp ? mp->curg : NULL;
    if (gp)
        gp->preemptoff++;
    /* The handler runs on this thread: the compiler must only keep the
     * increment before the call. */
    atomic_signal_fence(memory_order_seq_cst);
    return gp;
}

void gmp__callout_end(struct g *gp)
{
    atomic_signal_fence(memory_order_seq_cst);  /* as in gmp__callout_begin */
    if (gp)
        gp->preemptoff--;
}

void *gmp__alloc(size_t size)
{
    void *p;
    if (size == 0)
        size = 1;
    if (gmp__hooks.mem_alloc) {
        struct g *gp = gmp__callout_begin();
        p = gmp__hooks.mem_alloc(size, gmp__hooks.hook_ctx);
        gmp__callout_end(gp);
        if (p && ((uintptr_t)p & (GMP_CACHELINE - 1)))
            gmp__throw("gmp_config_t.mem_alloc returned memory not aligned "
                       "to 64 bytes");
    } else if (posix_memalign(&p, GMP_CACHELINE, size) != 0) {
        p = NULL;
    }
    if (p)
        memset(p, 0, size);
    return p;
}

void gmp__free(void *p, size_t size)
{
    if (!p)
        return;
    if (size == 0)
        size = 1;
    if (gmp__hooks.mem_free) {
        struct g *gp = gmp__callout_begin();
        gmp__hooks.mem_free(p, size, gmp__hooks.hook_ctx);
        gmp__callout_end(gp);
    } else {
        free(p);
    }
}

void *gmp__stack_map(size_t size)
{
    if (gmp__hooks.stack_alloc) {
        struct g *gp = gmp__callout_begin();
        void *p = gmp__hooks.stack_alloc(size, gmp__hooks.hook_ctx);
        gmp__callout_end(gp);
        if (p && ((uintptr_t)p & 4095))
            gmp__throw("gmp_config_t.stack_alloc returned memory not "
                       "page-aligned");
        return p;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void gmp__stack_unmap(void *p, size_t size)
{
    if (!p)
        return;
    if (gmp__hooks.stack_free) {
        struct g *gp = gmp__callout_begin();
        gmp__hooks.stack_free(p, size, gmp__hooks.hook_ctx);
        gmp__callout_end(gp);
    } else {
        munmap(p, size);
    }
}

void gmp__thread_started(void)
{
    if (gmp__hooks.thread_start)
        gmp__hooks.thread_start(gmp__hooks.hook_ctx);
}

void gmp__thread_stopping(void)
{
    if (gmp__hooks.thread_stop)
        gmp__hooks.thread_stop(gmp__hooks.hook_ctx);
}
