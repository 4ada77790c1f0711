/*
 * lgmp.c - Lua 5.4 on goroutines: the module `gmp`, which gives Lua code
 * go(), channels that carry any Lua value, select, sleep, a wait group
 * and atomic integers, one interpreter per goroutine. gmplua.c is a host
 * that runs a script file with it; this comment is the module's
 * reference.
 *
 * Why an interpreter per goroutine. liblua keeps no state outside a
 * lua_State: no lock (lua_lock is empty in the stock build), no
 * thread-local variable. Goroutines that never share a lua_State may
 * therefore switch anywhere, and resume on another thread, in the middle
 * of Lua code (tests/real/test_lua.c relies on it). Sharing one state
 * between goroutines would need a lock held across every switch, which
 * is one P's worth of Lua at a time. So gmp.go(f, ...) starts a new
 * interpreter on the new goroutine and copies f and its arguments into
 * it, and a channel copies each value from the sender's interpreter into
 * the receiver's: Go's "share memory by communicating", enforced.
 *
 * The module, for Lua code:
 *   gmp.go(f, ...)      runs f(...) in a new interpreter on a new
 *                       goroutine; f and the arguments are copied as a
 *                       channel copies values. Returns nothing.
 *   gmp.chan([cap])     a channel buffering cap values (default 0: each
 *                       send waits for its receiver).
 *   ch:send(v)          waits until v is received or buffered. On a
 *                       closed channel: the error "send on closed
 *                       channel" (Go panics there).
 *   ch:recv()           v, true; nil, false once ch is closed and
 *                       drained.
 *   ch:close()          a second close is an error, as in Go.
 *   #ch, ch:len(), ch:cap()   values buffered now; the capacity.
 *   gmp.select{case, ..., default = true | timeout = seconds}
 *                       a case is {ch, "recv"} or {ch, "send", v}; a
 *                       case whose ch is nil or false is never ready
 *                       (Go's nil channel). Waits until a case can
 *                       proceed, performs that one only (uniformly at
 *                       random among those ready) and returns its
 *                       index, and for a recv case v, ok as ch:recv
 *                       does. With default = true it does not wait,
 *                       with a timeout it waits at most that long; then
 *                       it returns nil if no case could proceed. A send
 *                       case chosen on a closed channel raises ch:send's
 *                       error. No case and no default: waits for ever.
 *   gmp.sleep(seconds)  parks the goroutine; its P runs others.
 *   gmp.yield()         Go's runtime.Gosched.
 *   gmp.waitgroup()     Go's sync.WaitGroup: wg:add(n), wg:done(),
 *                       wg:wait(). A negative counter is a fatal error
 *                       of the runtime, as in Go.
 *   gmp.atomic([n])     a shared integer (default 0): a:load(),
 *                       a:store(n), a:add(d) returns the new value.
 *                       Sequentially consistent, as Go's sync/atomic.
 *                       Unlike every other call here it never gives up
 *                       the P: a loop that watches one is still only
 *                       CPU-bound Lua.
 *   gmp.now()           monotonic clock, seconds (a float).
 *   gmp.id(), gmp.procs(), gmp.numgoroutine()   gmp_id, gmp_procs,
 *                       gmp_num_goroutines.
 * Channels, wait groups and atomics are handles: a copy of one (an
 * argument of gmp.go, a value inside a message) is the same object. Each
 * is freed once no interpreter holds it and no message in a channel
 * names it; a channel freed so first drops the messages it still buffers,
 * which may free the handles they name in turn. An interpreter that gets
 * a handle back gets the Lua value it had (received ch == ch).
 *
 * What a copy carries: nil, booleans, integers and floats (each keeps its
 * subtype), strings (any bytes), tables (every key and value copied;
 * tables and functions that occur twice are one in the copy too, so
 * shared subtables and cycles stay as they were; metatables are not
 * copied), Lua functions whose only upvalue, if any, is _ENV (by
 * lua_dump with debug information; _ENV becomes the receiving
 * interpreter's globals), and handles. Anything else is an error raised
 * in the sender, which pcall catches, and nothing is sent: a coroutine, a
 * C function, a function with an upvalue other than _ENV (pass the value
 * as an argument instead), other userdata, tables nested deeper than
 * MAX_DEPTH. The copy is made when the value is sent; later changes to
 * the original do not travel.
 *
 * Errors. The module's own errors (a value that cannot be copied, a send
 * on a closed channel, a bad argument) are Lua errors at the caller's
 * line. A Lua error that no pcall catches, in any goroutine, prints the
 * error, a traceback and the goroutine, and ends the process with status
 * 2, as an unrecovered panic does in Go. As in Go, the process also ends
 * when the main goroutine's code returns, whatever the others are doing
 * (gmp_main abandons them).
 *
 * Sharing the P. The preemption signal never stops liblua, a shared
 * object (docs/API.md, Preemption), so a CPU-bound Lua loop would keep its
 * P for as long as it runs. Every interpreter made here gets a count hook
 * (LUA_MASKCOUNT, every 1000 VM instructions unless the host says
 * otherwise) that asks gmp_should_yield, a few loads, and calls gmp_yield
 * once the runtime wants the P back: the loop runs the 10 ms slices a
 * preempted goroutine runs, with preemption by signal on or off, and a
 * sleeper on its P wakes within one hook period of its timer (a few
 * microseconds at 1000 instructions). Lua
 * coroutines inherit the hook from the interpreter that creates them.
 * This file's C functions are the host program's code, which the signal
 * may stop: they hold no lock and no thread-local state across it. What
 * no hook reaches: Lua's io library blocks the thread, and with it the
 * goroutine's P, while it waits (a read from a terminal or a pipe).
 *
 * Stacks. liblua recurses on the C stack, up to LUAI_MAXCCALLS (200)
 * levels of up to a few KB each, beyond the default 128 KiB goroutine
 * stack: a host asks for 512 KiB (gmp_config_t.stack_size). The copies
 * here recurse once per level of table nesting, at most MAX_DEPTH.
 *
 * Dumps. A goroutine's label (gmp_set_label) is "lua <source>:<line>" of
 * the function it was started with, so gmp_dump, the SIGQUIT dump and the
 * deadlock report name it. No describe callback prints a Lua traceback:
 * it may run in a signal handler while the goroutine runs on another
 * thread, and walking the call stack of an interpreter that is changing
 * follows pointers that may be freed under the reader; liblua has no read
 * that is safe against that.
 *
 * How a value travels. The sender encodes it into one malloc'd message
 * (struct msg), and the channel carries the message's address (an
 * element of sizeof(void *)); the receiver decodes it into its own
 * interpreter and frees it. The message's data is a uint32 count of
 * values, each a tag byte and its payload in the machine's own
 * representation (the message never leaves the process):
 *   T_NIL, T_FALSE, T_TRUE     nothing
 *   T_INT, T_FLT               lua_Integer, lua_Number
 *   T_STR                      uint64 length, the bytes
 *   T_TABLE                    key, value, key, value, ..., T_END
 *   T_FUNC                     uint64 length, lua_dump's output
 *   T_REF                      uint32 ordinal of an earlier table or
 *                              function (numbered from 0 in the order
 *                              their T_TABLE or T_FUNC appear)
 *   T_HANDLE                   uint32 index into the message's handles
 * After the data, aligned, the handles the message names (each once).
 * A lone nil, boolean, number or string, most messages, is encoded with
 * no Lua call that can raise an error, and but for a string decoded so;
 * anything else is encoded and decoded inside lua_pcall (ownership,
 * below), whose setjmp the lone values need not pay.
 * Ownership: the C function at work owns a message (the sender's until
 * the channel takes it, the receiver's once it has it) in a C variable,
 * and any Lua call that may raise an error (an unsupported value, memory)
 * while it holds one runs inside lua_pcall: the message is freed, then
 * the error raised again (rethrow). A sealed message counts as a
 * reference to each handle it names, until it is freed.
 * Freeing is iterative (reap): a chain of channels, each buffering the
 * last reference to the next, is freed in one loop, not by recursion. A
 * cycle (a channel that buffers a message naming itself, directly or
 * through other channels) is never freed: reference counts do not see
 * cycles, where Go's collector would.
 */
#include "lgmp.h"

#include <lauxlib.h>
#include <lualib.h>

#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gmprt.h>

#define MAX_DEPTH    100            /* nesting of tables in one value */
#define HOOK_DEFAULT 1000           /* VM instructions between hooks */
#define MAX_CASES    (1 << 20)      /* cases in one select */

/* Tags (see the file comment); decode's fast path takes those up to
 * T_FLT, the scalars that are no string. */
enum { T_NIL, T_FALSE, T_TRUE, T_INT, T_FLT, T_STR, T_TABLE, T_END,
       T_FUNC, T_REF, T_HANDLE };

/* A setting read when an interpreter is made, on any thread. Relaxed: a
 * setting, nothing published with it. */
static _Atomic int hook_count = HOOK_DEFAULT;

/* Handles and sealed messages alive (lgmp_live). Relaxed: a count that
 * tests read once everything has stopped. */
static _Atomic int64_t live;

enum kind { K_CHAN, K_WG, K_ATOMIC, K_N };

/* Each kind's metatable (also registered under its name, for __name in
 * messages) is found through a light userdata key, which costs no string
 * lookup; each metatable holds its kind under kind_key. cache_key: each
 * interpreter's weak-valued table from a handle's address to its
 * userdata there. */
static const char mt_key[K_N];
static const char kind_key;
static const char cache_key;
static const char *const kind_name[K_N] = {"gmp.chan", "gmp.waitgroup",
                                           "gmp.atomic"};

struct handle {
    /* One per userdata that holds it, one per sealed message naming it.
     * Written by any goroutine holding one; see drop() for the orders. */
    _Atomic long refs;
    enum kind kind;
    struct handle *dead_next;   /* reap's worklist, once refs is 0 */
    gmp_chan_t *ch;             /* K_CHAN: carries struct msg addresses */
    gmp_wg_t wg;                /* K_WG */
    _Atomic int64_t val;        /* K_ATOMIC */
};

struct msg {
    size_t len;                 /* bytes of data */
    size_t nh;                  /* handles, after the data */
    unsigned char data[];
};

/* ---- Handles ----------------------------------------------------------- */

static struct handle **msg_handles(struct msg *m)
{
    size_t a = alignof(struct handle *);
    size_t off = (offsetof(struct msg, data) + m->len + a - 1) & ~(a - 1);
    return (struct handle **)((char *)m + off);
}

/* Drops one reference; the last puts h on the worklist *dead. */
static void drop(struct handle *h, struct handle **dead)
{
    /* Release: what this holder did with h comes before the free; acquire
     * when the count reaches 0: the freeing sees what every other holder
     * did (their releases pair with it). */
    if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
        h->dead_next = *dead;
        *dead = h;
    }
}

static void msg_drop(struct msg *m, struct handle **dead)
{
    struct handle **hs = msg_handles(m);
    for (size_t i = 0; i < m->nh; i++)
        drop(hs[i], dead);
    free(m);
    /* Relaxed: see live. */
    atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
}

/* Frees the handles on the worklist and whatever they alone kept alive.
 * A channel nobody names any more has no waiter and gets no later call,
 * as gmp_chan_free wants; what it buffers is dropped first. tryrecv may
 * switch goroutines (it checks for preemption): harmless here.
 * Context: a goroutine (as every function of this file), the runtime
 * running: an interpreter is closed before its goroutine ends. */
static void reap(struct handle *dead)
{
    while (dead) {
        struct handle *h = dead;
        dead = h->dead_next;
        if (h->kind == K_CHAN) {
            struct msg *m;
            while (gmp_chan_tryrecv(h->ch, &m) == 0)
                msg_drop(m, &dead);
            gmp_chan_free(h->ch);
        }
        free(h);
        /* Relaxed: see live. */
        atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
    }
}

static void msg_free(struct msg *m)
{
    struct handle *dead = NULL;
    msg_drop(m, &dead);
    reap(dead);
}

static int handle_gc(lua_State *L)
{
    struct handle **ud = lua_touserdata(L, 1);
    struct handle *h = *ud, *dead = NULL;
    *ud = NULL;
    if (h) {
        drop(h, &dead);
        reap(dead);
    }
    return 0;
}

static int handle_tostring(lua_State *L)
{
    struct handle **ud = lua_touserdata(L, 1);
    if (*ud)
        lua_pushfstring(L, "%s: %p", kind_name[(*ud)->kind], (void *)*ud);
    else
        lua_pushliteral(L, "gmp handle (collected)");
    return 1;
}

/* The userdata at idx if it is a handle (of any kind), else NULL. */
static struct handle **to_handle(lua_State *L, int idx)
{
    struct handle **ud = lua_touserdata(L, idx);
    if (!ud || !lua_getmetatable(L, idx))
        return NULL;
    bool ours = lua_rawgetp(L, -1, &kind_key) == LUA_TNUMBER;
    lua_pop(L, 2);
    return ours ? ud : NULL;
}

/* The live handle of kind k at idx; an error for anything else. */
static struct handle *check(lua_State *L, int idx, enum kind k)
{
    struct handle **ud = to_handle(L, idx);
    if (!ud || !*ud || (*ud)->kind != k)
        luaL_typeerror(L, idx, kind_name[k]);
    return *ud;
}

/* A new userdata of kind k, holding no handle yet, pushed. */
static struct handle **new_userdata(lua_State *L, enum kind k)
{
    struct handle **ud = lua_newuserdatauv(L, sizeof *ud, 0);
    *ud = NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &mt_key[k]);
    lua_setmetatable(L, -2);
    return ud;
}

/* Caches the userdata on top as h's in this interpreter. */
static void cache_put(lua_State *L, struct handle *h)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &cache_key);
    lua_pushvalue(L, -2);
    lua_rawsetp(L, -2, h);
    lua_pop(L, 1);
}

/* Pushes h's userdata: the cached one, else a new one with a new
 * reference. */
static void push_handle(lua_State *L, struct handle *h)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &cache_key);
    if (lua_rawgetp(L, -1, h) == LUA_TUSERDATA) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 2);
    struct handle **ud = new_userdata(L, h->kind);
    /* Relaxed: the message that names h holds a reference until it is
     * freed, after this, so the count cannot reach 0 meanwhile; nothing
     * is published by taking one (as a shared_ptr copy). */
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    *ud = h;
    cache_put(L, h);
}

/* A new handle of kind k (a channel of capacity cap), pushed. */
static struct handle *new_handle(lua_State *L, enum kind k, size_t cap)
{
    struct handle **ud = new_userdata(L, k);
    struct handle *h = calloc(1, sizeof *h);
    if (!h)
        luaL_error(L, "not enough memory");
    h->kind = k;
    atomic_init(&h->refs, 1);
    atomic_init(&h->val, 0);
    if (k == K_CHAN && !(h->ch = gmp_chan_make(sizeof(struct msg *), cap))) {
        free(h);
        luaL_error(L, "not enough memory");
    }
    *ud = h;
    /* Relaxed: see live. */
    atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    cache_put(L, h);
    return h;
}

/* Raises the error on top again, with the position of the Lua code that
 * called the running C function: errors raised inside lua_pcall by C
 * code carry none. */
static int rethrow(lua_State *L)
{
    if (lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

/* ---- Encoding ---------------------------------------------------------- */

/* A message being built: the encoder's state, on encode's C stack. */
struct enc {
    unsigned char *buf;         /* struct msg, header first; malloc'd */
    size_t len, cap;            /* bytes of buf in use, allocated */
    struct handle **hs;         /* handles named, each once; malloc'd */
    size_t nh, hcap;
    int seen;                   /* stack slot: object -> ordinal, or nil */
    uint32_t nobj;              /* tables and functions numbered */
    int depth;                  /* tables open */
    const char *who;            /* the caller, in errors */
};

/* Room for n more bytes; false when memory is short. Raises no error:
 * lua_dump's writer calls it. */
static bool reserve(struct enc *e, size_t n)
{
    if (e->cap >= e->len && e->cap - e->len >= n)
        return true;
    size_t cap = e->cap ? e->cap : 128;
    while (cap < e->len || cap - e->len < n) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    unsigned char *p = realloc(e->buf, cap);
    if (!p)
        return false;
    e->buf = p;
    e->cap = cap;
    return true;
}

static void put(lua_State *L, struct enc *e, const void *p, size_t n)
{
    if (!reserve(e, n))
        luaL_error(L, "not enough memory for a message");
    memcpy(e->buf + e->len, p, n);
    e->len += n;
}

static void put_tag(lua_State *L, struct enc *e, unsigned char tag)
{
    put(L, e, &tag, 1);
}

static int dump_writer(lua_State *L, const void *p, size_t n, void *ud)
{
    (void)L;
    struct enc *e = ud;
    if (!reserve(e, n))
        return 1;
    memcpy(e->buf + e->len, p, n);
    e->len += n;
    return 0;
}

static void need_seen(lua_State *L, struct enc *e)
{
    luaL_checkstack(L, 4, "value nested too deep");
    if (lua_isnil(L, e->seen)) {
        lua_newtable(L);
        lua_replace(L, e->seen);
    }
}

/* For the table or function at idx: if the copy has it already, writes a
 * reference to it and returns true; else numbers it and returns false. */
static bool seen_ref(lua_State *L, struct enc *e, int idx)
{
    need_seen(L, e);
    lua_pushvalue(L, idx);
    if (lua_rawget(L, e->seen) == LUA_TNUMBER) {
        uint32_t ord = (uint32_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
        put_tag(L, e, T_REF);
        put(L, e, &ord, sizeof ord);
        return true;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_pushinteger(L, e->nobj++);
    lua_rawset(L, e->seen);
    return false;
}

static void enc_value(lua_State *L, struct enc *e, int idx);

static void enc_table(lua_State *L, struct enc *e, int idx)
{
    if (seen_ref(L, e, idx))
        return;
    if (++e->depth > MAX_DEPTH)
        luaL_error(L, "%s: cannot copy tables nested more than %d deep",
                   e->who, MAX_DEPTH);
    put_tag(L, e, T_TABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int top = lua_gettop(L);
        enc_value(L, e, top - 1);
        enc_value(L, e, top);
        lua_pop(L, 1);
    }
    put_tag(L, e, T_END);
    e->depth--;
}

static void enc_function(lua_State *L, struct enc *e, int idx)
{
    if (lua_iscfunction(L, idx))
        luaL_error(L, "%s: cannot copy a C function", e->who);
    /* lua_load sets a loaded function's first upvalue to the globals: a
     * function can cross when that is its only one and is _ENV. */
    const char *up;
    for (int i = 1; (up = lua_getupvalue(L, idx, i)) != NULL; i++) {
        lua_pop(L, 1);
        if (i > 1 || strcmp(up, "_ENV") != 0)
            luaL_error(L, "%s: cannot copy a function with upvalue '%s' "
                       "(only _ENV crosses; pass the value as an argument)",
                       e->who, up);
    }
    if (seen_ref(L, e, idx))
        return;
    put_tag(L, e, T_FUNC);
    uint64_t n = 0;
    size_t at = e->len;
    put(L, e, &n, sizeof n);
    lua_pushvalue(L, idx);
    int r = lua_dump(L, dump_writer, e, 0);
    lua_pop(L, 1);
    if (r != 0)
        luaL_error(L, "not enough memory for a message");
    n = e->len - at - sizeof n;
    memcpy(e->buf + at, &n, sizeof n);
}

static void enc_handle(lua_State *L, struct enc *e, int idx)
{
    struct handle **ud = to_handle(L, idx);
    if (!ud || !*ud)
        luaL_error(L, "%s: cannot copy a userdata that is not a channel, "
                   "wait group or atomic", e->who);
    struct handle *h = *ud;
    need_seen(L, e);
    uint32_t i;
    if (lua_rawgetp(L, e->seen, h) == LUA_TNUMBER) {
        i = (uint32_t)lua_tointeger(L, -1);
    } else {
        if (e->nh == e->hcap) {
            size_t cap = e->hcap ? 2 * e->hcap : 8;
            struct handle **hs = realloc(e->hs, cap * sizeof *hs);
            if (!hs)
                luaL_error(L, "not enough memory for a message");
            e->hs = hs;
            e->hcap = cap;
        }
        i = (uint32_t)e->nh;
        e->hs[e->nh++] = h;
        lua_pushinteger(L, i);
        lua_rawsetp(L, e->seen, h);
    }
    lua_pop(L, 1);
    put_tag(L, e, T_HANDLE);
    put(L, e, &i, sizeof i);
}

static void enc_value(lua_State *L, struct enc *e, int idx)
{
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        put_tag(L, e, T_NIL);
        return;
    case LUA_TBOOLEAN:
        put_tag(L, e, lua_toboolean(L, idx) ? T_TRUE : T_FALSE);
        return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            lua_Integer v = lua_tointeger(L, idx);
            put_tag(L, e, T_INT);
            put(L, e, &v, sizeof v);
        } else {
            lua_Number v = lua_tonumber(L, idx);
            put_tag(L, e, T_FLT);
            put(L, e, &v, sizeof v);
        }
        return;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        uint64_t n = len;
        put_tag(L, e, T_STR);
        put(L, e, &n, sizeof n);
        put(L, e, s, len);
        return;
    }
    case LUA_TTABLE:
        enc_table(L, e, idx);
        return;
    case LUA_TFUNCTION:
        enc_function(L, e, idx);
        return;
    case LUA_TUSERDATA:
        enc_handle(L, e, idx);
        return;
    case LUA_TTHREAD:
        luaL_error(L, "%s: cannot copy a coroutine", e->who);
        return;
    default:
        luaL_error(L, "%s: cannot copy a %s", e->who, luaL_typename(L, idx));
        return;
    }
}

/* The values after the struct enc argument, into e's buffer, sealed:
 * nothing raises an error once the handles are referenced. */
static int enc_protected(lua_State *L)
{
    struct enc *e = lua_touserdata(L, 1);
    int n = lua_gettop(L) - 1;
    lua_pushnil(L);
    e->seen = lua_gettop(L);
    e->len = offsetof(struct msg, data);
    uint32_t count = (uint32_t)n;
    put(L, e, &count, sizeof count);
    for (int i = 0; i < n; i++)
        enc_value(L, e, 2 + i);
    size_t a = alignof(struct handle *);
    size_t off = (e->len + a - 1) & ~(a - 1);
    size_t hbytes = e->nh * sizeof(struct handle *);
    if (!reserve(e, off - e->len + hbytes))
        luaL_error(L, "not enough memory for a message");
    struct msg *m = (struct msg *)e->buf;
    m->len = e->len - offsetof(struct msg, data);
    m->nh = e->nh;
    if (hbytes)
        memcpy(msg_handles(m), e->hs, hbytes);
    for (size_t i = 0; i < e->nh; i++)
        /* Relaxed: the userdata encoded holds a reference meanwhile (see
         * push_handle). */
        atomic_fetch_add_explicit(&e->hs[i]->refs, 1, memory_order_relaxed);
    return 0;
}

/* A message holding the one value at idx if it is nil, a boolean, a
 * number or a string, built without a Lua call that can raise an error
 * but for memory; NULL for other values. */
static struct msg *enc_scalar(lua_State *L, int idx)
{
    unsigned char tag;
    union {
        lua_Integer i;
        lua_Number f;
        uint64_t n;
    } v;
    size_t vlen = 0, slen = 0;
    const char *s = NULL;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        tag = T_NIL;
        break;
    case LUA_TBOOLEAN:
        tag = lua_toboolean(L, idx) ? T_TRUE : T_FALSE;
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            tag = T_INT;
            v.i = lua_tointeger(L, idx);
        } else {
            tag = T_FLT;
            v.f = lua_tonumber(L, idx);
        }
        vlen = 8;
        break;
    case LUA_TSTRING:
        tag = T_STR;
        s = lua_tolstring(L, idx, &slen);
        v.n = slen;
        vlen = 8;
        break;
    default:
        return NULL;
    }
    uint32_t count = 1;
    size_t len = sizeof count + 1 + vlen + slen;
    if (slen > SIZE_MAX - 64)
        luaL_error(L, "not enough memory for a message");
    struct msg *m = malloc(offsetof(struct msg, data) + len);
    if (!m)
        luaL_error(L, "not enough memory for a message");
    m->len = len;
    m->nh = 0;
    unsigned char *p = m->data;
    memcpy(p, &count, sizeof count);
    p += sizeof count;
    *p++ = tag;
    memcpy(p, &v, vlen);
    if (slen)
        memcpy(p + vlen, s, slen);
    return m;
}

/* The n values from index first, as a sealed message, which the caller
 * owns; the error of a value that cannot be copied is raised with
 * nothing held. who names the caller in errors. */
static struct msg *encode(lua_State *L, int first, int n, const char *who)
{
    struct msg *m;
    if (n == 1 && (m = enc_scalar(L, first)) != NULL)
        goto sealed;
    first = lua_absindex(L, first);
    luaL_checkstack(L, n + 2, "too many values");
    struct enc e;
    memset(&e, 0, sizeof e);
    e.who = who;
    lua_pushcfunction(L, enc_protected);
    lua_pushlightuserdata(L, &e);
    for (int i = 0; i < n; i++)
        lua_pushvalue(L, first + i);
    int r = lua_pcall(L, n + 1, 0, 0);
    free(e.hs);
    if (r != LUA_OK) {
        free(e.buf);
        rethrow(L);
    }
    m = (struct msg *)e.buf;
sealed:
    /* Relaxed: see live. */
    atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    return m;
}

/* ---- Decoding ---------------------------------------------------------- */

struct dec {
    const unsigned char *p;
    struct handle **hs;
    int objs;                       /* stack slot: ordinal + 1 -> object */
    uint32_t nobj;
};

static void get(struct dec *d, void *v, size_t n)
{
    memcpy(v, d->p, n);
    d->p += n;
}

/* Numbers the object on top, as the encoder did. */
static void dec_number(lua_State *L, struct dec *d)
{
    if (lua_isnil(L, d->objs)) {
        lua_newtable(L);
        lua_replace(L, d->objs);
    }
    lua_pushvalue(L, -1);
    lua_rawseti(L, d->objs, (lua_Integer)d->nobj++ + 1);
}

static void dec_value(lua_State *L, struct dec *d)
{
    luaL_checkstack(L, 4, "message nested too deep");
    unsigned char tag = *d->p++;
    switch (tag) {
    case T_NIL:
        lua_pushnil(L);
        break;
    case T_FALSE:
    case T_TRUE:
        lua_pushboolean(L, tag == T_TRUE);
        break;
    case T_INT: {
        lua_Integer v;
        get(d, &v, sizeof v);
        lua_pushinteger(L, v);
        break;
    }
    case T_FLT: {
        lua_Number v;
        get(d, &v, sizeof v);
        lua_pushnumber(L, v);
        break;
    }
    case T_STR: {
        uint64_t n;
        get(d, &n, sizeof n);
        lua_pushlstring(L, (const char *)d->p, n);
        d->p += n;
        break;
    }
    case T_TABLE:
        lua_newtable(L);
        dec_number(L, d);
        while (*d->p != T_END) {
            dec_value(L, d);
            dec_value(L, d);
            lua_rawset(L, -3);
        }
        d->p++;
        break;
    case T_FUNC: {
        uint64_t n;
        get(d, &n, sizeof n);
        if (luaL_loadbufferx(L, (const char *)d->p, n, "=(copied)", "b") !=
            LUA_OK)
            lua_error(L);
        d->p += n;
        dec_number(L, d);
        break;
    }
    case T_REF: {
        uint32_t ord;
        get(d, &ord, sizeof ord);
        lua_rawgeti(L, d->objs, (lua_Integer)ord + 1);
        break;
    }
    case T_HANDLE: {
        uint32_t i;
        get(d, &i, sizeof i);
        push_handle(L, d->hs[i]);
        break;
    }
    default:
        /* Only this file writes messages: a bad tag is its own bug. */
        fprintf(stderr, "gmplua: corrupt message (tag %d)\n", tag);
        abort();
    }
}

/* Pushes the values of the message that is its light userdata argument
 * and returns them. */
static int dec_protected(lua_State *L)
{
    struct msg *m = lua_touserdata(L, 1);
    struct dec d = {m->data, msg_handles(m), 0, 0};
    uint32_t n;
    get(&d, &n, sizeof n);
    if (n > INT_MAX - 8)
        luaL_error(L, "too many values");
    luaL_checkstack(L, (int)n + 4, "too many values");
    lua_pushnil(L);
    d.objs = lua_gettop(L);
    for (uint32_t i = 0; i < n; i++)
        dec_value(L, &d);
    return (int)n;
}

/* Pushes the values of m and frees it, also when an error (memory)
 * interrupts. Returns how many values. */
static int decode(lua_State *L, struct msg *m)
{
    const unsigned char *p = m->data;
    uint32_t count;
    memcpy(&count, p, sizeof count);
    p += sizeof count;
    if (count == 1 && m->nh == 0 && *p <= T_FLT) {
        /* One scalar that is no string: pushing it allocates nothing. */
        union {
            lua_Integer i;
            lua_Number f;
        } v;
        unsigned char tag = *p++;
        memcpy(&v, p, tag >= T_INT ? sizeof v : 0);
        msg_free(m);
        if (tag == T_NIL)
            lua_pushnil(L);
        else if (tag <= T_TRUE)
            lua_pushboolean(L, tag == T_TRUE);
        else if (tag == T_INT)
            lua_pushinteger(L, v.i);
        else
            lua_pushnumber(L, v.f);
        return 1;
    }
    int top = lua_gettop(L);
    lua_pushcfunction(L, dec_protected);
    lua_pushlightuserdata(L, m);
    int r = lua_pcall(L, 1, LUA_MULTRET, 0);
    msg_free(m);
    if (r != LUA_OK)
        rethrow(L);
    return lua_gettop(L) - top;
}

/* ---- Channels ----------------------------------------------------------- */

static int l_chan(lua_State *L)
{
    lua_Integer cap = luaL_optinteger(L, 1, 0);
    luaL_argcheck(L, cap >= 0, 1, "negative capacity");
    new_handle(L, K_CHAN, (size_t)cap);
    return 1;
}

static int ch_send(lua_State *L)
{
    struct handle *h = check(L, 1, K_CHAN);
    lua_settop(L, 2);
    struct msg *m = encode(L, 2, 1, "send");
    int r = gmp_chan_send(h->ch, &m);
    if (r == 0)
        return 0;                   /* the receiver's now */
    msg_free(m);
    if (r == GMP_ECLOSED)
        return luaL_error(L, "send on closed channel");
    return luaL_error(L, "send: %s", gmp_strerror(r));
}

static int ch_recv(lua_State *L)
{
    struct handle *h = check(L, 1, K_CHAN);
    struct msg *m;
    int r = gmp_chan_recv(h->ch, &m);
    if (r == 0) {
        decode(L, m);
        lua_pushboolean(L, 1);
        return 2;
    }
    if (r != GMP_ECLOSED)
        return luaL_error(L, "recv: %s", gmp_strerror(r));
    lua_pushnil(L);
    lua_pushboolean(L, 0);
    return 2;
}

static int ch_close(lua_State *L)
{
    int r = gmp_chan_close(check(L, 1, K_CHAN)->ch);
    if (r == GMP_ECLOSED)
        return luaL_error(L, "close of closed channel");
    if (r != 0)
        return luaL_error(L, "close: %s", gmp_strerror(r));
    return 0;
}

static int ch_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gmp_chan_len(check(L, 1, K_CHAN)->ch));
    return 1;
}

static int ch_cap(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gmp_chan_cap(check(L, 1, K_CHAN)->ch));
    return 1;
}

/* Seconds as nanoseconds, clamped to a century; 0 for none or less. */
static int64_t to_ns(lua_Number s)
{
    if (!(s > 0))
        return 0;
    if (s > 3.2e9)
        return (int64_t)3.2e18;
    int64_t ns = (int64_t)(s * 1e9);
    return ns > 0 ? ns : 1;
}

/* A select's cases and the message of each: one to send, or the one
 * received (NULL when there is none or it is gone). The arrays are a
 * plain userdata on l_select's stack; the messages are l_select's. */
struct sel {
    size_t n;
    gmp_case_t *cases;
    struct msg **slot;
};

/* Fills the cases from the table of cases (argument 2), encoding each
 * value to send. */
static int sel_prepare(lua_State *L)
{
    struct sel *s = lua_touserdata(L, 1);
    for (size_t i = 0; i < s->n; i++) {
        int c = (int)i + 1;
        lua_settop(L, 2);
        if (lua_rawgeti(L, 2, c) != LUA_TTABLE)
            return luaL_error(L, "select: case %d is not a table", c);
        gmp_chan_t *ch = NULL;
        lua_rawgeti(L, 3, 1);
        if (lua_toboolean(L, 4)) {
            struct handle **ud = to_handle(L, 4);
            if (!ud || !*ud || (*ud)->kind != K_CHAN)
                return luaL_error(L, "select: case %d: no channel", c);
            ch = (*ud)->ch;
        }
        lua_rawgeti(L, 3, 2);
        const char *op = lua_tostring(L, 5);
        bool send = op && strcmp(op, "send") == 0;
        if (!send && !(op && strcmp(op, "recv") == 0))
            return luaL_error(L, "select: case %d: op is not \"send\" or "
                              "\"recv\"", c);
        if (send) {
            lua_rawgeti(L, 3, 3);
            s->slot[i] = encode(L, 6, 1, "select");
        }
        s->cases[i] = (gmp_case_t){ch, send ? GMP_SEND : GMP_RECV,
                                   &s->slot[i], 0};
    }
    return 0;
}

static int l_select(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    int64_t timeout = GMP_FOREVER;
    bool dflt = lua_getfield(L, 1, "default") != LUA_TNIL &&
                lua_toboolean(L, -1);
    if (lua_getfield(L, 1, "timeout") != LUA_TNIL) {
        int isnum;
        lua_Number s = lua_tonumberx(L, -1, &isnum);
        if (!isnum || dflt)
            return luaL_error(L, "select: timeout must be a number of "
                              "seconds, without default");
        timeout = to_ns(s);
    } else if (dflt) {
        timeout = 0;
    }
    size_t n = lua_rawlen(L, 1);
    if (n > MAX_CASES)
        return luaL_error(L, "select: more than %d cases", MAX_CASES);
    lua_settop(L, 1);
    struct sel *s = lua_newuserdatauv(
        L, sizeof *s + n * (sizeof(gmp_case_t) + sizeof(struct msg *)), 0);
    s->n = n;
    s->cases = (gmp_case_t *)(s + 1);
    s->slot = (struct msg **)(s->cases + n);
    memset(s->slot, 0, n * sizeof *s->slot);
    lua_pushcfunction(L, sel_prepare);
    lua_pushlightuserdata(L, s);
    lua_pushvalue(L, 1);
    int r = lua_pcall(L, 2, 0, 0);
    if (r == LUA_OK)
        r = gmp_select(s->cases, n, timeout);
    else
        r = INT_MIN;                /* prepare failed: send nothing */
    if (r >= 0 && s->cases[r].op == GMP_SEND && s->cases[r].result == 0)
        s->slot[r] = NULL;          /* the receiver's now */
    struct msg *got = NULL;
    if (r >= 0 && s->cases[r].op == GMP_RECV) {
        got = s->slot[r];
        s->slot[r] = NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (s->slot[i])             /* values not sent */
            msg_free(s->slot[i]);
    if (r == INT_MIN)
        return rethrow(L);
    if (r == GMP_EAGAIN || r == GMP_ETIMEDOUT) {
        lua_pushnil(L);
        return 1;
    }
    if (r < 0)
        return luaL_error(L, "select: %s", gmp_strerror(r));
    lua_pushinteger(L, r + 1);
    if (s->cases[r].op == GMP_SEND) {
        if (s->cases[r].result == GMP_ECLOSED)
            return luaL_error(L, "send on closed channel");
        return 1;
    }
    if (s->cases[r].result == GMP_ECLOSED) {    /* closed and drained */
        lua_pushnil(L);
        lua_pushboolean(L, 0);
        return 3;
    }
    decode(L, got);
    lua_pushboolean(L, 1);
    return 3;
}

/* ---- Wait groups and atomics ------------------------------------------ */

static int l_waitgroup(lua_State *L)
{
    new_handle(L, K_WG, 0);
    return 1;
}

static int wg_add(lua_State *L)
{
    struct handle *h = check(L, 1, K_WG);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n >= INT32_MIN && n <= INT32_MAX, 2,
                  "beyond the 32-bit counter");
    gmp_wg_add(&h->wg, (int64_t)n);
    return 0;
}

static int wg_done(lua_State *L)
{
    gmp_wg_done(&check(L, 1, K_WG)->wg);
    return 0;
}

static int wg_wait(lua_State *L)
{
    gmp_wg_wait(&check(L, 1, K_WG)->wg);
    return 0;
}

static int l_atomic(lua_State *L)
{
    lua_Integer v = luaL_optinteger(L, 1, 0);
    struct handle *h = new_handle(L, K_ATOMIC, 0);
    /* Seq_cst, as every operation on an atomic here: they are Go's
     * sync/atomic, which Lua code may use to order its own steps. */
    atomic_store_explicit(&h->val, (int64_t)v, memory_order_seq_cst);
    return 1;
}

static int at_load(lua_State *L)
{
    struct handle *h = check(L, 1, K_ATOMIC);
    /* Seq_cst: see l_atomic. */
    lua_pushinteger(L, (lua_Integer)atomic_load_explicit(
                           &h->val, memory_order_seq_cst));
    return 1;
}

static int at_store(lua_State *L)
{
    struct handle *h = check(L, 1, K_ATOMIC);
    int64_t v = (int64_t)luaL_checkinteger(L, 2);
    /* Seq_cst: see l_atomic. */
    atomic_store_explicit(&h->val, v, memory_order_seq_cst);
    return 0;
}

static int at_add(lua_State *L)
{
    struct handle *h = check(L, 1, K_ATOMIC);
    int64_t d = (int64_t)luaL_checkinteger(L, 2);
    /* Seq_cst: see l_atomic. The sum wraps around, as Lua's integers do
     * (C11 defines atomic arithmetic on signed types so). */
    int64_t old = atomic_fetch_add_explicit(&h->val, d, memory_order_seq_cst);
    lua_pushinteger(L, (lua_Integer)(int64_t)((uint64_t)old + (uint64_t)d));
    return 1;
}

/* ---- Goroutines --------------------------------------------------------- */

struct start {
    struct msg *msg;                /* f and its arguments */
    char label[LUA_IDSIZE + 32];    /* gmp_set_label's, while it runs */
};

/* The new goroutine's first Lua call, protected: takes the message, names
 * the goroutine after the function, runs it. */
static int go_body(lua_State *L)
{
    struct start *s = lua_touserdata(L, 1);
    struct msg *m = s->msg;
    s->msg = NULL;
    int n = decode(L, m);
    lua_Debug ar;
    lua_pushvalue(L, -n);
    lua_getinfo(L, ">S", &ar);
    snprintf(s->label, sizeof s->label, "lua %s:%d", ar.short_src,
             ar.linedefined);
    gmp_set_label(s->label);
    lua_call(L, n - 1, 0);
    return 0;
}

static void run_goroutine(void *arg)
{
    struct start *s = arg;
    lgmp_run(go_body, s, s->label);
    free(s);
}

static int l_go(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    struct msg *m = encode(L, 1, lua_gettop(L), "gmp.go");
    struct start *s = malloc(sizeof *s);
    int r = s ? 0 : GMP_ENOMEM;
    if (s) {
        snprintf(s->label, sizeof s->label, "lua (starting)");
        s->msg = m;
        r = gmp_go(run_goroutine, s);   /* from here on the goroutine's */
    }
    if (r != 0) {
        free(s);
        msg_free(m);
        return luaL_error(L, "gmp.go: %s", gmp_strerror(r));
    }
    return 0;
}

/* ---- Time and the rest ------------------------------------------------- */

static int l_sleep(lua_State *L)
{
    gmp_sleep(to_ns(luaL_checknumber(L, 1)));
    return 0;
}

static int l_yield(lua_State *L)
{
    (void)L;
    gmp_yield();
    return 0;
}

static int l_now(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)gmp_nanotime() / 1e9);
    return 1;
}

static int l_id(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gmp_id());
    return 1;
}

static int l_procs(lua_State *L)
{
    lua_pushinteger(L, gmp_procs());
    return 1;
}

static int l_numgoroutine(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gmp_num_goroutines());
    return 1;
}

/* ---- The module ---------------------------------------------------------- */

static void new_class(lua_State *L, enum kind k, const luaL_Reg *meta,
                      const luaL_Reg *methods)
{
    luaL_newmetatable(L, kind_name[k]);
    luaL_setfuncs(L, meta, 0);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushinteger(L, k);
    lua_rawsetp(L, -2, &kind_key);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &mt_key[k]);
}

int luaopen_gmp(lua_State *L)
{
    static const luaL_Reg chan_meta[] = {{"__gc", handle_gc},
                                         {"__tostring", handle_tostring},
                                         {"__len", ch_len}, {NULL, NULL}};
    static const luaL_Reg chan_methods[] = {
        {"send", ch_send}, {"recv", ch_recv}, {"close", ch_close},
        {"len", ch_len}, {"cap", ch_cap}, {NULL, NULL}};
    static const luaL_Reg handle_meta[] = {{"__gc", handle_gc},
                                           {"__tostring", handle_tostring},
                                           {NULL, NULL}};
    static const luaL_Reg wg_methods[] = {
        {"add", wg_add}, {"done", wg_done}, {"wait", wg_wait}, {NULL, NULL}};
    static const luaL_Reg atomic_methods[] = {
        {"load", at_load}, {"store", at_store}, {"add", at_add},
        {NULL, NULL}};
    static const luaL_Reg funcs[] = {
        {"go", l_go}, {"chan", l_chan}, {"select", l_select},
        {"sleep", l_sleep}, {"yield", l_yield}, {"waitgroup", l_waitgroup},
        {"atomic", l_atomic}, {"now", l_now}, {"id", l_id},
        {"procs", l_procs}, {"numgoroutine", l_numgoroutine}, {NULL, NULL}};

    new_class(L, K_CHAN, chan_meta, chan_methods);
    new_class(L, K_WG, handle_meta, wg_methods);
    new_class(L, K_ATOMIC, handle_meta, atomic_methods);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &cache_key);
    luaL_newlib(L, funcs);
    return 1;
}

/* ---- For hosts ----------------------------------------------------------- */

/* Gives up the P when the runtime asks for it. Called between two VM
 * instructions, where a switch is safe (see the file comment). */
static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)L;
    (void)ar;
    if (gmp_should_yield())
        gmp_yield();
}

static int open_libs(lua_State *L)
{
    luaL_openlibs(L);
    luaL_requiref(L, "gmp", luaopen_gmp, 1);
    return 0;
}

lua_State *lgmp_newstate(void)
{
    lua_State *L = luaL_newstate();
    if (!L)
        return NULL;
    lua_pushcfunction(L, open_libs);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        lua_close(L);
        return NULL;
    }
    /* Relaxed: see hook_count. */
    int n = atomic_load_explicit(&hook_count, memory_order_relaxed);
    if (n > 0)
        lua_sethook(L, count_hook, LUA_MASKCOUNT, n);
    return L;
}

void lgmp_set_hook_count(int count)
{
    /* Relaxed: see hook_count. */
    atomic_store_explicit(&hook_count, count > 0 ? count : 0,
                          memory_order_relaxed);
}

int lgmp_traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") &&
            lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)",
                                  luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

void lgmp_run(lua_CFunction body, void *arg, const char *label)
{
    lua_State *L = lgmp_newstate();
    if (!L) {
        fprintf(stderr, "gmplua: goroutine %llu (%s): no memory for an "
                "interpreter\n", (unsigned long long)gmp_id(), label);
        _exit(2);
    }
    lua_pushcfunction(L, lgmp_traceback);
    lua_pushcfunction(L, body);
    lua_pushlightuserdata(L, arg);
    if (lua_pcall(L, 1, 0, 1) != LUA_OK)
        lgmp_die(L, label);
    /* Closed on its goroutine: what its channels buffer is freed while
     * the runtime runs. */
    lua_close(L);
}

void lgmp_die(lua_State *L, const char *what)
{
    const char *msg = lua_tostring(L, -1);
    fflush(stdout);
    fprintf(stderr, "gmplua: error in goroutine %llu (%s): %s\n",
            (unsigned long long)gmp_id(), what ? what : "?",
            msg ? msg : "(error object is not a string)");
    fflush(stderr);
    /* Nothing else runs: other goroutines are mid-flight, as in Go. */
    _exit(2);
}

int64_t lgmp_live(void)
{
    /* Relaxed: see live. */
    return atomic_load_explicit(&live, memory_order_relaxed);
}
