"""Memory profiles (lj_merge --mem): the patched VM's allocation traps,
read from `perf script` output, as allocation and in-use profiles.

The trap protocol (docs/memory.md; the registers: ljperf/vmregs.py; the
VM side: vm_patch/src/lj_perfmem.c). The VM samples GC allocations Go's way
(exponential gaps of mean RATE bytes); a sampled allocation writes one byte
to a page it dropped, so the kernel takes a page fault that perf records
with the registers of the faulting instruction; the frees of sampled blocks
ride on the next trap, and each trap carries the GC's cycle phase.

Invariants:
- A trap is a sample of a page-fault event (any name perf gives it) whose
  CX holds MAGIC. Other samples of that event are the program's own faults
  (counted); samples of other events are ignored (counted), even when they
  hit the trap instruction (a cpu-clock tick during the fault shows the
  same registers).
- The kernel sometimes reports one fault twice: a trap with the same (pid,
  tid, R8, CX) as the previous trap of its thread is dropped (counted).
- Samples come in time order (perf script sorts them): a free matches the
  latest live sampled allocation at its address in its process; the frees
  a trap carries come before its allocation.
- Scaling (Go's runtime/pprof): an allocation of S bytes sampled at mean
  gap R stands for w = 1 / (1 - exp(-S/R)) allocations and S*w bytes.
- In use (Go's convention): the sampled blocks live at the end of the most
  recent completed GC cycle of their thread's state, i.e. allocated before
  that cycle began (PHASE <= LASTEND - 2) and not freed by its end (never,
  or at PHASE >= LASTEND). With no completed cycle, or with --inuse-at now:
  those not freed by the end of the input, lua_close's frees aside (it
  frees everything: "now" is what was in use when the state closed).
- An allocation's stack starts at what allocated (runtime_depth): the
  runtime's own frames above it are dropped.
- Memory grows with distinct stacks, live sampled objects and threads, not
  with the input. Frames come from the Merger (its chain cache, dynamic
  frame resolution and Folder), never a second parser.
"""

import collections
import math

from ljperf import writers
from ljperf.frames import K_BUILTIN, K_C, K_LUA, K_TRACE
from ljperf.perfscript import Event, parse_reg, time_span
from ljperf.vmregs import (ADDR_REG, FAULT_EVENTS, FREE_REGS, MAGIC, PC_REG, RATE_REG,
                           SEQ_REG, SIZE_REG, T_ALLOC, T_CLOSE, T_FREE, TAG_REG)

# One trap: TYPE (T_ALLOC, T_FREE), SKIP, SIZE, ADDR, RATE, SEQ, PC (0:
# unknown), CX (the raw tag, for duplicates), PHASE and LASTEND (low 16
# bits), FREES ((address, PHASE low 16 bits), oldest first).
Trap = collections.namedtuple("Trap", "type skip size addr rate seq pc cx phase lastend frees")


def decode(regs):
    """The Trap on a register line (' ABI:2    AX:0x...'), or None when CX
    does not hold the magic (or a register the protocol needs is absent)."""
    cx = parse_reg(regs, TAG_REG)
    if cx is None or cx >> 16 != MAGIC:
        return None
    typ, nfree = cx & 0xf, (cx >> 4) & 0xf
    size, addr, seq = parse_reg(regs, SIZE_REG), parse_reg(regs, ADDR_REG), parse_reg(regs, SEQ_REG)
    if typ not in (T_ALLOC, T_FREE, T_CLOSE) or nfree > len(FREE_REGS) or seq is None or \
            (typ == T_ALLOC and (size is None or addr is None)):
        return None
    frees = []
    for r in FREE_REGS[:nfree]:
        v = parse_reg(regs, r)
        if v is None:
            return None
        frees.append((v & 0xffffffffffff, v >> 48))
    si = parse_reg(regs, RATE_REG) or 0
    return Trap(typ, (cx >> 8) & 0xff, size or 0, addr or 0, si & 0xffffffff, seq,
                parse_reg(regs, PC_REG) or 0, cx, (si >> 32) & 0xffff, si >> 48, tuple(frees))


def widen(low, ref):
    """The full counter whose low 16 bits are LOW, nearest at or below REF."""
    return ref - ((ref - low) & 0xffff)


# The Lua C API: a host C function that calls it allocates (the API's own
# frames and LuaJIT's below them are the runtime's).
API_PREFIXES = ("lua_", "luaL_", "luaJIT_")


def runtime_depth(frames):
    """How many leaf frames of an allocation's chain (after SKIP) are
    LuaJIT's runtime (lj_mem_newgco, lj_tab_new, the interpreter's handler,
    the GC): those before the innermost Lua, trace or builtin frame, or
    before the innermost caller of the Lua C API, whichever comes first; 0
    when there is neither. As in Go's heap profiles, the leaf is then what
    allocated, and `go tool pprof -top` lists it. (The caller of the
    outermost of nested API frames: luaL_loadfilex calling lua_loadx.)"""
    for i, fr in enumerate(frames):
        if fr.kind in (K_LUA, K_TRACE, K_BUILTIN):
            return i
        if _api(fr):
            i += 1
            while i < len(frames) and _api(frames[i]):
                i += 1                 # luaL_loadfilex -> lua_loadx: the host's call
            return i
    return 0


def _api(fr):
    return fr.kind == K_C and fr.name.startswith(API_PREFIXES)


# The kinds of object a sample can be, and the runtime frame that tells
# each (name prefixes; the innermost frame that matches wins). A table
# block is the table itself when the GC allocated it as an object
# (lj_mem_newgco), else its hash part (Node: 24 bytes, a power of two of
# them) or its array part. Code that allocates what no frame names is
# "other"; lj_mem_newgco called straight from a trace allocates cdata.
KINDS = ("string", "table", "table array", "table hash", "closure", "upvalue",
         "prototype", "trace", "cdata", "userdata", "thread", "buffer", "other")
KIND_FRAMES = (
    (("lj_str_new", "str_new", "lj_str_alloc"), "string"),
    (("lj_buf_", "buf_", "lj_strfmt", "lj_serialize", "lj_meta_cat"), "buffer"),
    (("func_newuv", "func_finduv", "func_emptyuv", "lj_func_newuv"), "upvalue"),
    (("lj_func_new", "func_newL"), "closure"),
    (("lj_udata_new", "lua_newuserdata"), "userdata"),
    (("lj_state_new", "stack_init", "resizestack", "lj_state_growstack",
      "lj_state_shrinkstack", "lua_newthread"), "thread"),
    (("lj_cdata_", "lj_carith", "lj_cconv", "lj_ccall", "lj_ccallback", "lj_cf_ffi_"), "cdata"),
    (("newtab", "lj_tab_", "rehashtab", "lua_createtable"), "table"),
    (("lj_parse", "fs_finish", "parse_", "lj_bcread"), "prototype"),
    (("lj_trace_", "trace_", "lj_record", "lj_asm", "lj_mcode", "lj_ir_", "lj_snap",
      "lj_opt_"), "trace"),
)
NEWGCO = "lj_mem_newgco"
# What in-use means, as said (Memory.view()).
VIEWS = {"cycle": "as of the last completed GC cycle",
         "now": "at the end (--inuse-at now)",
         "end": "at the end (no completed GC cycle recorded)"}


def object_kind(frames, size):
    """The kind (KINDS) of a block of SIZE bytes allocated with FRAMES the
    chain after SKIP, leaf first: the runtime's frames, then what
    allocated (runtime_depth)."""
    gco = False
    for i, fr in enumerate(frames):
        if fr.kind == K_TRACE:
            return "cdata" if gco and i == 1 else "other"
        if fr.kind != K_C:
            break
        if fr.name == NEWGCO:
            gco = True
            continue
        for prefixes, kind in KIND_FRAMES:
            if fr.name.startswith(prefixes):
                if kind != "table" or gco:
                    return kind
                n = size // 24
                return "table hash" if size % 24 == 0 and n & (n - 1) == 0 else "table array"
    return "other"


def weight(size, rate):
    """How many allocations one sampled allocation of SIZE bytes stands for
    at mean sampling gap RATE (Go's scaleHeapSample): 0 for an empty
    block, 1 without sampling (RATE <= 1)."""
    if size <= 0:
        return 0.0
    if rate <= 1:
        return 1.0
    return 1.0 / -math.expm1(-size / rate)


def is_fault_event(event):
    """EVENT (as perf script prints it; None when not printed) is a
    page-fault event: 'page-faults/period=1/u', 'faults:u', ..."""
    return event is None or event.split(":", 1)[0].split("/", 1)[0] in FAULT_EVENTS


class Memory:
    """Feeds on perfscript.Reader batches (feed(), beside no Merger.feed);
    counts() then gives the allocation and in-use profile per raw stack,
    for Merger.stacks."""

    def __init__(self, merger, opts):
        self.m = merger
        self.kind_leaf = getattr(opts, "mem_kinds", False)   # --mem-kinds
        ev = getattr(opts, "event", None)
        self.any_event = ev == "all"
        self.event = ev if ev not in (None, "all") else None   # --event NAME
        self.allocs = {}           # (comm, pid, tid, frames, leafline, kind) -> [traps, objects, bytes]
        self.live = {}             # (pid, addr) -> [stack key, size, rate, state, alloc phase]
        self.gone = []             # [key, size, rate, state, alloc phase, free phase,
                                   # by lua_close]: freed at or after their state's
                                   # LASTEND then, or by lua_close
        self.phase = {}            # state (pid, tid) -> [PHASE, LASTEND] in full
        self.inuse_now = getattr(opts, "inuse_at", None) == "now"
        self.gone_cap = 4096       # pruned of those freed by a cycle when this long
        self.flushes = 0           # traps of frees only
        self.closes = self.closed_n = 0   # lua_close's traps, and the frees they carry
        self.last = {}             # (pid, tid) -> (seq, cx) of its last trap
        self.rates = collections.Counter()   # RATE -> allocation traps
        self.faults = collections.Counter()  # trap event -> samples without the magic
        self.others = collections.Counter()  # other events -> samples
        self.trap_events = collections.Counter()
        self.allocs_n = self.frees_n = 0     # traps used
        self.dups = 0
        self.matched = self.unmatched = 0    # frees
        self.t_first = self.t_last = None

    def _trap_event(self, event):
        if self.any_event:
            return True
        if self.event is not None:
            return event is None or event == self.event or \
                event.split(":", 1)[0] == self.event
        return is_fault_event(event)

    def feed(self, batch):
        """A list of perfscript Samples and Events, in input (= time) order."""
        m = self.m
        for s in batch:
            if type(s) is Event:
                m.event(s)
                continue
            comm, pid, tid, time, period, event, chain, regs, inline = s
            if not self._trap_event(event):
                self.others[event] += 1
                continue
            trap = decode(regs) if regs is not None else None
            if trap is None:
                self.faults[event] += 1
                continue
            try:
                if pid is None:
                    pid = m._pid(tid)
                th = (pid, tid)
                mark = (trap.seq, trap.cx)
                if self.last.get(th) == mark:
                    self.dups += 1
                    continue
                self.last[th] = mark
                if time is not None:
                    if self.t_first is None:
                        self.t_first = time
                    self.t_last = time
                self.trap_events[event] += 1
                st = self._phase(th, trap)
                for addr, low in trap.frees:
                    self._free(pid, addr, widen(low, st[0]), trap.type == T_CLOSE)
                if trap.type == T_CLOSE:
                    self.closes += 1
                elif trap.type == T_FREE:
                    self.flushes += 1
                else:
                    self._alloc(comm, pid, tid, time, chain, regs, inline, trap, th, st[0])
            except Exception:          # noqa: BLE001 -- one sample, not the run
                m.dropped += 1

    def _phase(self, th, trap):
        """[PHASE, LASTEND] of TH's state at TRAP, widened from 16 bits
        (PHASE never goes back; less than 32768 boundaries between two
        traps)."""
        st = self.phase.get(th)
        if st is None:
            st = self.phase[th] = [trap.phase, 0]
        else:
            st[0] = widen(trap.phase, st[0] + 0x8000)
        st[1] = widen(trap.lastend, st[0]) if trap.lastend else 0
        return st

    def _free(self, pid, addr, phase, closing):
        self.frees_n += 1
        b = self.live.pop((pid, addr), None)
        if b is None:
            self.unmatched += 1
            return
        self.matched += 1
        if closing:
            self.closed_n += 1
        # Kept while it may be in use at a later LASTEND, or "now" (closing).
        if closing or not self.inuse_now and phase >= self.phase[b[3]][1]:
            b += (phase, closing)
            self.gone.append(b)
            if len(self.gone) >= self.gone_cap:
                self.gone = [g for g in self.gone
                             if g[6] or g[5] >= self.phase[g[3]][1]]
                self.gone_cap = max(4096, 2 * len(self.gone))

    def _alloc(self, comm, pid, tid, time, chain, regs, inline, trap, th, phase):
        m = self.m
        fl, pid, nb = m.frames(chain, inline, pid, tid, time)
        fl = fl[trap.skip:]
        depth = runtime_depth(fl)
        kind = object_kind(fl[:depth + 1], trap.size)
        fl = fl[depth:]
        leaf = None
        if m.cut and time is not None and m._before_switch(pid, tid, time):
            fl = tuple([fr for fr in fl if fr.kind != K_LUA and fr.kind != K_TRACE])
        elif trap.pc and m.want_pc and fl:
            m.pc_seen = True
            leaf = m.folder.leaf_line(fl, trap.pc, through_c=True)
        if nb:
            m.bad += nb
        key = (comm, pid, tid, fl, leaf, kind)
        w = weight(trap.size, trap.rate)
        a = self.allocs.get(key)
        if a is None:
            a = self.allocs[key] = [0, 0.0, 0.0]
        a[0] += 1
        a[1] += w
        a[2] += w * trap.size
        self.live[(pid, trap.addr)] = [key, trap.size, trap.rate, th, phase]
        self.rates[trap.rate] += 1
        self.allocs_n += 1

    def in_use(self):
        """The sampled blocks in use: [(stack key, size, rate)], and whether
        that is as of a completed GC cycle (False: at the end of the input,
        because --inuse-at now or no state saw a cycle complete)."""
        ends = {th: st[1] for th, st in self.phase.items() if st[1] and not self.inuse_now}
        out = []
        for b in self.live.values():
            end = ends.get(b[3])
            if end is None or b[4] <= end - 2:
                out.append(b[:3])
        for b in self.gone:
            end = ends.get(b[3])
            if (b[6] if end is None else b[4] <= end - 2 and b[5] >= end):
                out.append(b[:3])
        return out, bool(ends)

    # -- the result ---------------------------------------------------------

    def counts(self):
        """{(raw stack, kind): (allocation traps, (alloc_objects,
        alloc_space, inuse_objects, inuse_space))}, scaled; the raw stack
        is Merger.stacks' COUNTS key."""
        inuse = {}
        for key, size, rate in self.in_use()[0]:
            w = weight(size, rate)
            v = inuse.get(key)
            if v is None:
                v = inuse[key] = [0.0, 0.0]
            v[0] += w
            v[1] += w * size
        return {key: (n, (objs, space) + tuple(inuse.get(key, (0.0, 0.0))))
                for key, (n, objs, space) in self.allocs.items()}

    def view(self):
        """What in use means in this run: "cycle" (as of each state's last
        completed GC cycle), "now" (--inuse-at now), or "end" (no state
        saw a cycle complete: not freed by the end)."""
        if self.inuse_now:
            return "now"
        return "cycle" if self.in_use()[1] else "end"

    def digest(self):
        """lj_merge --mem-summary: {"inuse_at": view(), "kinds": {kind:
        [alloc bytes, in-use bytes]}}, scaled and rounded."""
        kinds = {}
        for key, (n, vec) in self.counts().items():
            v = kinds.setdefault(key[5], [0.0, 0.0])
            v[0] += vec[1]
            v[1] += vec[3]
        return {"inuse_at": self.view(),
                "kinds": {k: [round(a), round(i)] for k, (a, i) in kinds.items()}}

    def rate(self):
        """The sampling gap most allocation traps give (pprof's period), or 0."""
        return self.rates.most_common(1)[0][0] if self.rates else 0

    def span(self):
        """(first, last) trap time in seconds, or None."""
        return time_span(self.t_first, self.t_last)

    def event_name(self):
        """The event the traps came in (as perf printed it), or None."""
        return self.trap_events.most_common(1)[0][0] if self.trap_events else None

    def summary(self):
        """The stderr line after a run."""
        view = self.view()
        return ("memory: %d trap samples used (%d allocations, %d frees only, %d of "
                "lua_close), %d frees (%d by lua_close), "
                "%d duplicates dropped, %d of the program's own page faults ignored, "
                "%d frees matched, %d frees with no sampled allocation, %d samples of other "
                "events ignored; in use: %s"
                % (self.allocs_n + self.flushes + self.closes, self.allocs_n, self.flushes,
                   self.closes, self.frees_n, self.closed_n,
                   self.dups, sum(self.faults.values()), self.matched, self.unmatched,
                   sum(self.others.values()),
                   VIEWS[view]))

    def write(self, merger, root_mode, meta, fmt, inuse):
        """Feeds every stack to the writers: the main one of FMT (alloc
        space in bytes; pprof: all four sample types), the in-use folded
        profile when INUSE, --kinds and --pprof's when wanted (META's
        "kinds", "pprof"). Returns {name: writer}."""
        main = (writers.MemPprof if fmt == "pprof" else writers.WRITERS[fmt])(meta)
        out = {"main": main}
        if inuse:
            out["inuse"] = writers.Folded(meta)
        if meta.get("kinds"):
            out["kinds"] = writers.Kinds(meta)
        if meta.get("pprof"):
            out["pprof"] = writers.MemPprof(meta)
        per_kind = {}
        for key, c in self.counts().items():
            per_kind.setdefault(key[5], {})[key[:5]] = c
        for kind in sorted(per_kind):
            for frames, n, vec, comm, pid, tid in merger.stacks(root_mode, per_kind[kind]):
                pframes = frames                # pprof: the kind is a label
                if self.kind_leaf:
                    frames = frames + [("[%s]" % kind, None, None, None)]
                for name, w in out.items():
                    if isinstance(w, writers.MemPprof):
                        w.stack(pframes, n, vec, comm, pid, tid, kind)
                    elif name == "inuse":
                        if round(vec[3]):
                            w.stack(frames, n, vec[3], comm, pid, tid)
                    elif name == "kinds" or round(vec[1]):
                        w.stack(frames, n, vec[1], comm, pid, tid)
        return out
