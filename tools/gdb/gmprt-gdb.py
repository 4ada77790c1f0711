# gmprt-gdb.py - gdb support for gmprt's goroutines.
#
# Load it into gdb with
#
#     (gdb) source tools/gdb/gmprt-gdb.py
#
# (or add that line to ~/.gdbinit or the program's .gdbinit). Commands:
#
#     info goroutines          every live goroutine: id, status, wait reason
#                              (or the thread it runs on), start function;
#                              '*' marks the one on the selected thread
#     goroutine N bt           backtrace of goroutine N
#     goroutine N <command>    any gdb command in goroutine N's context
#     goroutine all <command>  the same for every live goroutine
#
# N is a goroutine id or any gdb expression without spaces that evaluates
# to one (a variable holding gmp_id(), say).
#
# How it works (docs/debugging.md has more): every G lives in the runtime's
# G slabs (struct schedt's gslabs, the first one used up to gchunk_next),
# walked as the runtime's own deadlock report walks them. A goroutine that
# is not running on a thread is suspended in arch/<arch>/switch.S: its
# g->ctx.sp points at the frame that switch pushed (callee-saved registers,
# frame pointer, return address; struct gmp__ctx_frame in
# arch/<arch>/frame.h). To show its stack, the selected thread's registers
# are pointed at that frame (pc = the return address, sp just above the
# frame, the callee-saved registers as saved), the command runs, and the
# thread's registers are put back, always. gdb unwinds from real registers,
# by DWARF CFI, so no frame pointers are needed.
#
# Layouts (struct g, struct schedt, enum gstatus, struct gmp__ctx_frame)
# and the wait-reason strings are read from the inferior's debug info and
# memory, so they follow the runtime as it changes; the program needs to
# carry gmprt's debug info (any -g build: the default RelWithDebInfo is).
#
# Works on x86-64 and AArch64 Linux; the RISC-V 64 layout is there too,
# not yet tried under a debugger (CI runs riscv64 under qemu-user only).

import struct

import gdb

NO_RUNTIME = "no gmprt runtime running"

# Mirrors of enum gstatus (src/runtime.h) and of the frame layouts
# (arch/<arch>/frame.h), used only if the debug info lacks them.
_GSTATUS_FALLBACK = {
    "G_IDLE": 0, "G_RUNNABLE": 1, "G_RUNNING": 2,
    "G_SYSCALL": 3, "G_WAITING": 4, "G_DEAD": 5,
}
_STATUS_WORDS = {
    "G_RUNNABLE": "runnable", "G_RUNNING": "running",
    "G_SYSCALL": "syscall", "G_WAITING": "waiting",
    "G_IDLE": "idle", "G_DEAD": "dead",
}
# register -> byte offset in the frame; "pc" is the return address.
_FRAME_FALLBACK = {
    "x86_64": ({"r15": 0x08, "r14": 0x10, "r13": 0x18, "r12": 0x20,
                "rbx": 0x28, "rbp": 0x30, "pc": 0x38}, 0x40),
    "aarch64": (dict([("x%d" % (19 + i), 0x40 + 8 * i) for i in range(10)]
                     + [("x29", 0x90), ("x30", 0x98), ("pc", 0x98)]), 0xb0),
    "riscv64": (dict([("s%d" % i, 0x08 + 8 * i) for i in range(12)]
                     + [("ra", 0x00), ("pc", 0x00)]), 0xd0),
}
# Registers that tell the kernel whether to restart a system call the
# thread was stopped in; saved and put back after the others, in case a
# write of $pc touched them (gdb's write_pc clears orig_rax on x86-64).
_SYSCALL_REGS = ("orig_rax", "syscallno")


class _NoRuntime(Exception):
    pass


# ---- reading the runtime -------------------------------------------------

def _arch():
    try:
        name = gdb.selected_frame().architecture().name()
    except gdb.error:
        name = gdb.selected_inferior().architecture().name()
    if "x86-64" in name or "x86_64" in name:
        return "x86_64"
    if "aarch64" in name:
        return "aarch64"
    if "riscv:rv64" in name:
        return "riscv64"
    raise gdb.GdbError("gmprt-gdb: unsupported architecture %s" % name)


def _sched():
    """The running struct schedt * (a gdb.Value), or raises _NoRuntime."""
    try:
        s = gdb.parse_and_eval("gmp__sched")
    except gdb.error as e:
        raise _NoRuntime("%s (gmp__sched: %s)" % (NO_RUNTIME, e))
    try:
        if int(s) == 0:
            raise _NoRuntime(NO_RUNTIME)
    except gdb.MemoryError:
        raise _NoRuntime(NO_RUNTIME)
    # Drop the _Atomic qualifier: a plain pointer to struct schedt.
    return s.cast(gdb.lookup_type("struct schedt").pointer())


def _gstatus():
    """enum gstatus as {value: word}, and {name: value}."""
    try:
        t = gdb.lookup_type("enum gstatus")
        names = dict((f.name, int(f.enumval)) for f in t.fields())
    except (gdb.error, RuntimeError):
        names = dict(_GSTATUS_FALLBACK)
    words = dict((v, _STATUS_WORDS.get(k, k)) for k, v in names.items())
    return words, names


def _runtime():
    """(schedt *, words, names) for a command, or None once it has printed
    why there is no runtime to look at."""
    try:
        s = _sched()
    except _NoRuntime as e:
        print(e)
        return None
    return (s,) + _gstatus()


def _waitreasons():
    """gmp__waitreason_names as a Python list of strings."""
    try:
        arr = gdb.parse_and_eval("gmp__waitreason_names")
        lo, hi = arr.type.strip_typedefs().range()
        return [arr[i].string() for i in range(lo, hi + 1)]
    except (gdb.error, RuntimeError):
        return []


def _frame_layout(arch):
    """({register: offset}, frame size) of the suspended-context frame."""
    try:
        t = gdb.lookup_type("struct gmp__ctx_frame")
        off = dict((f.name, f.bitpos // 8) for f in t.fields())
        size = t.sizeof
        if arch == "x86_64":
            regs = dict((r, off[r]) for r in
                        ("r15", "r14", "r13", "r12", "rbx", "rbp"))
            regs["pc"] = off["ret"]
        elif arch == "riscv64":
            s = off["s"]
            regs = dict(("s%d" % i, s + 8 * i) for i in range(12))
            regs["ra"] = off["ra"]
            regs["pc"] = off["ra"]
        else:
            x = off["x"]
            regs = dict(("x%d" % (19 + i), x + 8 * i) for i in range(10))
            regs["x29"] = off["fp"]
            regs["x30"] = off["lr"]
            regs["pc"] = off["lr"]
        return regs, size
    except (gdb.error, RuntimeError, KeyError):
        return _FRAME_FALLBACK[arch]


def _label(addr):
    """A goroutine's label (gmp_set_label) as ' "text"', or ''."""
    if not addr:
        return ""
    try:
        text = gdb.Value(addr).cast(
            gdb.lookup_type("char").pointer()).string()[:64]
    except (gdb.error, gdb.MemoryError, UnicodeDecodeError):
        return ' (label at 0x%x)' % addr
    return ' "%s"' % text


class _G(object):
    """The fields of one struct g that the commands use."""
    __slots__ = ("addr", "goid", "status", "waitreason", "fn", "m", "sp",
                 "stk", "label")


def _gfields():
    t = gdb.lookup_type("struct g")
    off = dict((f.name, (f.bitpos // 8, f.type.strip_typedefs().sizeof))
               for f in t.fields())
    ctx = gdb.lookup_type("struct gmp__ctx")
    spoff = off["ctx"][0] + [f.bitpos // 8 for f in ctx.fields()
                             if f.name == "sp"][0]
    return t.sizeof, off, spoff


_FMT = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _allgs(s, skip=()):
    """Every G descriptor carved so far whose status is not in skip, as _G
    records. Reads each slab's used part in one piece: a program may have
    a million goroutines."""
    gsize, off, spoff = _gfields()
    slabt = gdb.lookup_type("struct gslab")
    gsoff = [f.bitpos // 8 for f in slabt.fields() if f.name == "gs"][0]
    ptrsize = gdb.lookup_type("void").pointer().sizeof
    pfmt = "<" + _FMT[ptrsize]

    def unpacker(name):
        o, size = off[name]
        return struct.Struct("<" + _FMT[size]).unpack_from, o

    st_get, st_off = unpacker("status")
    others = [(name,) + unpacker(name)
              for name in ("goid", "waitreason", "fn", "m", "stk", "label")]
    others.append(("sp", struct.Struct(pfmt).unpack_from, spoff))

    inf = gdb.selected_inferior()
    first = int(s["gslabs"])
    chunk_next = int(s["gchunk_next"])
    sl = first
    seen = 0
    while sl and seen < 1 << 20:
        seen += 1
        hdr = bytes(inf.read_memory(sl, gsoff))
        nxt = struct.unpack_from(pfmt, hdr, 0)[0]
        length = struct.unpack_from(pfmt, hdr, ptrsize)[0]
        gs = sl + gsoff
        if sl == first:
            n = (chunk_next - gs) // gsize
        else:
            n = (length - gsoff) // gsize
        if n > 0:
            buf = bytes(inf.read_memory(gs, n * gsize))
            for b in range(0, n * gsize, gsize):
                status = st_get(buf, b + st_off)[0]
                if status in skip:
                    continue
                g = _G()
                g.addr = gs + b
                g.status = status
                for name, get, o in others:
                    setattr(g, name, get(buf, b + o)[0])
                yield g
        sl = nxt


def _livegs(s, names):
    dead = (names.get("G_IDLE", 0), names.get("G_DEAD", 5))
    return sorted(_allgs(s, dead), key=lambda g: g.goid)


def _ms(s):
    """[(m address, curg address, tid, pthread_t)] for every M."""
    out = []
    mp = s["allm"]
    n = 0
    while int(mp) != 0 and n < 100000:
        n += 1
        out.append((int(mp), int(mp["curg"]), int(mp["tid"]),
                    int(mp["thread"])))
        mp = mp["alllink"]
    return out


def _thread_of(tid, pthread):
    """The gdb.InferiorThread with that LWP (or pthread_t), or None."""
    for t in gdb.selected_inferior().threads():
        if tid and t.ptid[1] == tid:
            return t
    for t in gdb.selected_inferior().threads():
        try:
            h = t.handle()
        except (gdb.error, AttributeError, RuntimeError):
            continue
        if pthread and h and int.from_bytes(h, "little") == pthread:
            return t
    return None


def _thread_g(s, thread, ms=None):
    """Address of the G running on the M that is gdb thread `thread`."""
    if thread is None:
        return 0
    lwp = thread.ptid[1]
    for m, curg, tid, _pt in ms if ms is not None else _ms(s):
        if tid == lwp:
            return curg
    return 0


def _symbolise(pc):
    if pc == 0:
        return "?"
    try:
        block = gdb.block_for_pc(pc)
        while block is not None and block.function is None:
            block = block.superblock
        if block is not None and block.function is not None:
            name = block.function.print_name
            if block.function.value().address is not None:
                start = int(block.function.value().address)
                if start != pc:
                    name += "+%d" % (pc - start)
            return name
    except (gdb.error, RuntimeError):
        pass
    try:
        out = gdb.execute("info symbol 0x%x" % pc, to_string=True).strip()
        if not out.startswith("No symbol"):
            name = out.split(" in section ")[0]
            return name.replace(" + ", "+")
    except gdb.error:
        pass
    return "0x%x" % pc


# ---- info goroutines ------------------------------------------------------

class InfoGoroutines(gdb.Command):
    """List gmprt's goroutines: id, status, wait reason (or the thread a
running one is on) and start function. '*' marks the goroutine running
on the selected thread."""

    def __init__(self):
        super(InfoGoroutines, self).__init__("info goroutines",
                                             gdb.COMMAND_STACK,
                                             gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        rt = _runtime()
        if rt is None:
            return
        s, words, names = rt
        reasons = _waitreasons()
        ms = _ms(s)
        cur = _thread_g(s, gdb.selected_thread(), ms)
        on = dict((curg, (tid, pt)) for _m, curg, tid, pt in ms if curg)
        gs = _livegs(s, names)
        syms = {}
        print("  %-6s %-9s %-24s %s" % ("Id", "Status", "Reason / thread",
                                        "Start function"))
        for g in gs:
            word = words.get(g.status, "status %d" % g.status)
            if g.status == names.get("G_WAITING"):
                where = (reasons[g.waitreason]
                         if g.waitreason < len(reasons)
                         else "reason %d" % g.waitreason)
            elif g.addr in on:
                t = _thread_of(*on[g.addr])
                where = ("thread %d (LWP %d)" % (t.num, t.ptid[1]) if t
                         else "LWP %d" % on[g.addr][0])
            elif g.stk == 0:
                where = "not started"
            else:
                where = ""
            mark = "*" if g.addr == cur else " "
            if g.fn not in syms:
                syms[g.fn] = _symbolise(g.fn)
            label = _label(g.label)
            print("%s %-6d %-9s %-24s %s%s" % (mark, g.goid, word, where,
                                               syms[g.fn], label))


# ---- goroutine N cmd ------------------------------------------------------

def _frame_level(frame):
    n = 0
    f = frame.newer()
    while f is not None:
        n += 1
        f = f.newer()
    return n


def _select_level(level):
    f = gdb.newest_frame()
    for _ in range(level):
        older = f.older()
        if older is None:
            break
        f = older
    f.select()


def _run_on_saved_context(g, arch, cmd):
    """Runs cmd with the selected thread's registers set from g's saved
    context frame; puts every register back afterwards."""
    regs, size = _frame_layout(arch)
    inf = gdb.selected_inferior()
    mem = bytes(inf.read_memory(g.sp, size))
    values = dict((r, struct.unpack_from("<Q", mem, o)[0])
                  for r, o in regs.items())
    sp_reg = "rsp" if arch == "x86_64" else "sp"
    values[sp_reg] = g.sp + size

    try:
        level = _frame_level(gdb.selected_frame())
    except gdb.error:
        level = 0
    frame0 = gdb.newest_frame()
    frame0.select()
    # Saved as they are now: those set, pc, and the syscall-restart ones.
    names = ["pc"] + [r for r in values if r != "pc"]
    saved = []
    for r in names + list(_SYSCALL_REGS):
        try:
            saved.append((r, int(frame0.read_register(r))))
        except (ValueError, gdb.error):
            pass
    written = False
    try:
        try:
            gdb.execute("set $pc = 0x%x" % values["pc"], to_string=True)
        except gdb.error as e:
            raise gdb.GdbError("goroutine %d: cannot set the registers to "
                               "its saved context (%s)" % (g.goid, e))
        written = True
        for r in names[1:]:
            gdb.execute("set $%s = 0x%x" % (r, values[r]), to_string=True)
        gdb.execute(cmd)
    finally:
        if written:
            gdb.newest_frame().select()
        for r, v in saved if written else ():
            # pc first, then the others, then the syscall registers
            try:
                gdb.execute("set $%s = 0x%x" % (r, v & 0xffffffffffffffff),
                            to_string=True)
            except gdb.error as e:
                print("gmprt-gdb: could not restore $%s: %s" % (r, e))
        try:
            _select_level(level)
        except gdb.error:
            pass


def _run_on_thread(thread, cmd):
    """Runs cmd on another thread, then reselects the current one."""
    old = gdb.selected_thread()
    try:
        level = _frame_level(gdb.selected_frame())
    except gdb.error:
        level = 0
    try:
        thread.switch()
        gdb.execute(cmd)
    finally:
        if old is not None and old.is_valid():
            old.switch()
            try:
                _select_level(level)
            except gdb.error:
                pass


class GoroutineCmd(gdb.Command):
    """Run a command in a goroutine's context.
Usage: goroutine N <command>     e.g. goroutine 12 bt
       goroutine all <command>
N is a goroutine id (see `info goroutines`) or an expression without
spaces that evaluates to one. A goroutine not running on a thread is shown
from its saved context (the selected thread's registers are borrowed and
put back); one running is shown on its thread."""

    def __init__(self):
        super(GoroutineCmd, self).__init__("goroutine", gdb.COMMAND_STACK,
                                           gdb.COMPLETE_COMMAND)

    def invoke(self, arg, from_tty):
        parts = arg.split(None, 1)
        if len(parts) < 2:
            raise gdb.GdbError("usage: goroutine <id|all> <gdb command>")
        which, cmd = parts
        rt = _runtime()
        if rt is None:
            return
        s, words, names = rt
        if which == "all":
            for g in _livegs(s, names):
                print("\ngoroutine %d [%s]:" % (g.goid, self._state(g, words,
                                                                    names)))
                try:
                    self._run(s, g, names, cmd)
                except gdb.error as e:
                    print("goroutine %d: %s" % (g.goid, e))
            return
        try:
            goid = int(which, 0)
        except ValueError:
            try:
                goid = int(gdb.parse_and_eval(which))
            except gdb.error as e:
                raise gdb.GdbError("goroutine: bad id %r: %s" % (which, e))
        dead = (names.get("G_IDLE", 0), names.get("G_DEAD", 5))
        for g in _allgs(s, dead):
            if g.goid == goid:
                try:
                    self._run(s, g, names, cmd)
                except gdb.error as e:
                    raise gdb.GdbError(str(e))
                return
        raise gdb.GdbError("goroutine %d not found" % goid)

    @staticmethod
    def _state(g, words, names):
        word = words.get(g.status, "status %d" % g.status)
        if g.status == names.get("G_WAITING"):
            reasons = _waitreasons()
            if g.waitreason < len(reasons):
                return reasons[g.waitreason]
        return word

    def _run(self, s, g, names, cmd):
        for _m, curg, tid, pt in _ms(s):
            if curg == g.addr:
                t = _thread_of(tid, pt)
                if t is None:
                    raise gdb.GdbError("goroutine %d is running on LWP %d, "
                                       "which gdb does not know" % (g.goid,
                                                                    tid))
                print("goroutine %d is running on thread %d (LWP %d)"
                      % (g.goid, t.num, t.ptid[1]))
                _run_on_thread(t, cmd)
                return
        if g.stk == 0 or g.sp == 0:
            print("goroutine %d has not started; it will run %s"
                  % (g.goid, _symbolise(g.fn)))
            return
        if g.status in (names.get("G_RUNNING"), names.get("G_SYSCALL")):
            # Between the status store and the switch; the saved context
            # is the last one it had.
            print("goroutine %d is switching; showing its last saved "
                  "context" % g.goid)
        _run_on_saved_context(g, _arch(), cmd)


InfoGoroutines()
GoroutineCmd()
