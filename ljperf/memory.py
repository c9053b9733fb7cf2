"""Memory profiles (lj_merge --mem): the patched VM's allocation traps,
read from `perf script` output, as allocation and in-use profiles.

The trap protocol (docs/ljperf.md, "Memory profiles"; the registers:
ljperf/vmregs.py). The VM samples GC allocations Go's way (exponential gaps
of mean RATE bytes); a sampled allocation, and the free of a sampled
object, writes one byte to a page it dropped, so the kernel takes a page
fault that perf records with the registers of the faulting instruction.

Invariants:
- A trap is a sample of a page-fault event (any name perf gives it) whose
  CX holds MAGIC. Other samples of that event are the program's own faults
  (counted); samples of other events are ignored (counted), even when they
  hit the trap instruction (a cpu-clock tick during the fault shows the
  same registers).
- The kernel sometimes reports one fault twice: a trap with the same (pid,
  tid, R8, CX) as the previous trap of its thread is dropped (counted).
- Samples come in time order (perf script sorts them): a free matches the
  latest live sampled allocation at its address in its process.
- Scaling (Go's runtime/pprof): an allocation of S bytes sampled at mean
  gap R stands for w = 1 / (1 - exp(-S/R)) allocations and S*w bytes.
  In use: the sampled allocations not freed by the end of the input.
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
from ljperf.vmregs import (ADDR_REG, FAULT_EVENTS, MAGIC, PC_REG, RATE_REG, SEQ_REG,
                           SIZE_REG, T_ALLOC, T_FREE, TAG_REG)

# One trap: TYPE (T_ALLOC, T_FREE), SKIP, SIZE, ADDR, RATE, SEQ, PC (0:
# unknown), CX (the raw tag, for duplicates).
Trap = collections.namedtuple("Trap", "type skip size addr rate seq pc cx")


def decode(regs):
    """The Trap on a register line (' ABI:2    AX:0x...'), or None when CX
    does not hold the magic (or a register the protocol needs is absent)."""
    cx = parse_reg(regs, TAG_REG)
    if cx is None or cx >> 16 != MAGIC:
        return None
    typ = cx & 0xff
    size, addr, seq = parse_reg(regs, SIZE_REG), parse_reg(regs, ADDR_REG), parse_reg(regs, SEQ_REG)
    if typ not in (T_ALLOC, T_FREE) or size is None or addr is None or seq is None:
        return None
    return Trap(typ, (cx >> 8) & 0xff, size, addr, parse_reg(regs, RATE_REG) or 0, seq,
                parse_reg(regs, PC_REG) or 0, cx)


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
        ev = getattr(opts, "event", None)
        self.any_event = ev == "all"
        self.event = ev if ev not in (None, "all") else None   # --event NAME
        self.allocs = {}           # (comm, pid, tid, frames, leafline) -> [traps, objects, bytes]
        self.live = {}             # (pid, addr) -> (stack key, size, rate)
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
                if trap.type == T_FREE:
                    self._free(pid, trap)
                else:
                    self._alloc(comm, pid, tid, time, chain, regs, inline, trap)
            except Exception:          # noqa: BLE001 -- one sample, not the run
                m.dropped += 1

    def _free(self, pid, trap):
        self.frees_n += 1
        if self.live.pop((pid, trap.addr), None) is None:
            self.unmatched += 1
        else:
            self.matched += 1

    def _alloc(self, comm, pid, tid, time, chain, regs, inline, trap):
        m = self.m
        fl, pid, nb = m.frames(chain, inline, pid, tid, time)
        fl = fl[trap.skip:]
        fl = fl[runtime_depth(fl):]
        leaf = None
        if m.cut and time is not None and m._before_switch(pid, tid, time):
            fl = tuple([fr for fr in fl if fr.kind != K_LUA and fr.kind != K_TRACE])
        elif trap.pc and m.want_pc and fl:
            m.pc_seen = True
            leaf = m.folder.leaf_line(fl, trap.pc, through_c=True)
        if nb:
            m.bad += nb
        key = (comm, pid, tid, fl, leaf)
        w = weight(trap.size, trap.rate)
        a = self.allocs.get(key)
        if a is None:
            a = self.allocs[key] = [0, 0.0, 0.0]
        a[0] += 1
        a[1] += w
        a[2] += w * trap.size
        self.live[(pid, trap.addr)] = (key, trap.size, trap.rate)
        self.rates[trap.rate] += 1
        self.allocs_n += 1

    # -- the result ---------------------------------------------------------

    def counts(self):
        """{raw stack: (allocation traps, (alloc_objects, alloc_space,
        inuse_objects, inuse_space))}, scaled: Merger.stacks' COUNTS."""
        inuse = {}
        for key, size, rate in self.live.values():
            w = weight(size, rate)
            v = inuse.get(key)
            if v is None:
                v = inuse[key] = [0.0, 0.0]
            v[0] += w
            v[1] += w * size
        return {key: (n, (objs, space) + tuple(inuse.get(key, (0.0, 0.0))))
                for key, (n, objs, space) in self.allocs.items()}

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
        return ("memory: %d trap samples used (%d allocations, %d frees), %d duplicates "
                "dropped, %d of the program's own page faults ignored, %d frees matched, "
                "%d frees with no sampled allocation, %d samples of other events ignored"
                % (self.allocs_n + self.frees_n, self.allocs_n, self.frees_n, self.dups,
                   sum(self.faults.values()), self.matched, self.unmatched,
                   sum(self.others.values())))

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
        for frames, n, vec, comm, pid, tid in merger.stacks(root_mode, self.counts()):
            for name, w in out.items():
                if isinstance(w, writers.Pprof):
                    w.stack(frames, n, vec, comm, pid, tid)
                elif name == "inuse":
                    if round(vec[3]):
                        w.stack(frames, n, vec[3], comm, pid, tid)
                elif name == "kinds" or round(vec[1]):
                    w.stack(frames, n, vec[1], comm, pid, tid)
        return out
