#!/usr/bin/env python3
"""lj_merge: fold `perf script` output into flame-graph stacks, with the Lua
frames of a ljperf-patched LuaJIT spliced into the host (C) stacks.

  perf record -k mono -g --call-graph fp --user-regs=bx luajit app.lua
  perf inject --jit -i perf.data -o perf.jit.data        # optional
  perf script -i perf.jit.data | lj_merge > out.folded
  flamegraph.pl out.folded > out.svg

perf script fields (-F) and what each enables
---------------------------------------------
  comm            root frame of every stack (required for useful output)
  pid, tid        per-process resolution (jit-PID.dump, perf-PID.map) and the
                  --pid / --tid roots. Plain `perf script` prints only the tid:
                  threads other than the main one are then mapped to their
                  process through the tids recorded in the jitdump files.
  time            picks the jitdump CODE_LOAD that was live at the sample's
                  time when code addresses are reused (without it the newest
                  load wins). With `-k mono` perf time is CLOCK_MONOTONIC
                  seconds, the jitdump timestamps are the same clock in ns.
  period          weights: each stack counts its period (e.g. ns for
                  cpu-clock); without it every sample counts 1.
  event           samples of the first event seen are kept (see --event).
  ip,sym,symoff,dso
                  the callchain (needs `perf record -g`). symoff is used to
                  place Lua frames inside their function for --lines.
  uregs           with BX recorded (`--user-regs=bx`) and --lines, the exact
                  line running in the innermost Lua function when the sample
                  hit the interpreter (BX is the VM's bytecode PC), else the
                  function's frame record only tells its first line.
  --show-task-events (not a field): fork, thread and exec events. A forked
                  child that loads no code of its own writes no jit-PID.dump:
                  with these events its frames are named from its parent's
                  dump (loads made before the fork), without them they stay
                  [unknown] unless perf inject named them.
  Recommended: perf script -F comm,pid,tid,time,period,event,ip,sym,symoff,dso,uregs \\
                 --show-task-events

Frames
------
  Lua functions  `NAME@CHUNK:LINE` or `CHUNK:LINE` (LINE = definition line);
                 with --lines `LABEL:CURLINE`: the line of the call for a
                 caller, BX's line for the running function, `?` when the
                 function has made no call and BX does not tell (no uregs,
                 or it runs a trace). Named by `perf inject --jit`
                 (DSO jitted-PID-N.so) or, when perf prints [unknown], by
                 lj_merge from jit-PID.dump (or perf-PID.map) itself: the
                 output is the same with or without inject. The jitdump is
                 always preferred: it is time-aware. perf-PID.map is only a
                 fallback (no dump for that process): it has no time, and
                 when an address range is described again under a new name
                 (code freed and reloaded at the same address) perf applies
                 the FIRST line for the whole session, lj_merge the LAST;
                 either can be wrong for some samples.
  JIT traces     `TRACE_N::CHUNK:LINE::OWNER` becomes OWNER (`_[j]` appended
                 with --jit-tag); a caller frame of the same function right
                 below it (where the trace was entered) is merged into it.
  VM plumbing    lj_BC_*, lj_vm_*, lj_cont_*, lj_vmeta_*, lj_fff_* are dropped
                 (kept with --keep-vm), and so is the FFI call machinery
                 (lj_ccall_func with the ffi.meta___call right below it,
                 lj_ccallback_enter/leave): an FFI call shows as
                 caller;callee, from the interpreter as from a trace.
  VM helpers     lj_vm_mod, lj_vm_modi, lj_vm_floor... (arithmetic) stay, as
                 C frames: they set up no frame, so their caller is missing
                 from the chain; called from a trace, that caller is the trace
                 and the helper then sits right on the Lua frame the trace
                 was entered from.
  builtins       lj_ff_string_byte / lj_ffh_* / lj_cf_* become string.byte etc.
  C frames       as perf names them; argument lists are cut, `;` becomes `:`,
                 an unnamed frame in a known DSO becomes [dso-basename].
  [no call chain] a sample perf printed without frames: it drops a whole
                 chain holding a value in -4095..-1 (garbage read through
                 code without frame pointers).

Robustness: malformed or truncated lines are skipped and counted (one
summary line on stderr); exit status 1 for I/O errors, 2 for bad arguments.
"""

import argparse
import errno
import json
import os
import re
import signal
import sys
from bisect import bisect_right

_here = os.path.dirname(os.path.realpath(__file__))   # works through symlinks
if _here not in sys.path:
    sys.path.insert(0, _here)

import perfscript                      # noqa: E402
from perfscript import split_frame, parse_header, parse_reg  # noqa: E402
import ljresolve                       # noqa: E402

PROG = "lj_merge"

# A Lua frame record's ret is the return PC into the function's callee, or,
# before it made a call (or when the VM rebuilt the record), the address
# after its first instruction (FUNCF/FUNCV, never a call): that frame's
# current line is unknown (printed `?` by --lines) unless BX gives it.
ENTRY_OFF = 4

# The block reader (process()): text is cut before every line that starts
# at column 0 (a header, a side-band line or a blank line); a piece longer
# than MAX_CARRY at the end of a batch goes to the line reader; the cache
# of whole callchains is emptied when its keys pass BCACHE_BYTES.
_CHUNK_SPLIT = re.compile(r"\n(?=[^\t ])").split
MAX_CARRY = 1 << 20
BCACHE_BYTES = 32 << 20

# Frame kinds
K_C, K_VM, K_LUA, K_TRACE, K_BUILTIN, K_KERNEL = range(6)
# ... as --kinds writes them (K_KERNEL folds like K_C; "root" is the comm frame)
KIND_NAMES = ("c", "vm", "lua", "trace", "builtin", "kernel")
NO_CHAIN = "[no call chain]"       # the frame of a sample printed without one

_VM_PREFIXES = ("lj_BC_", "lj_vm_", "lj_cont_", "lj_vmeta_", "lj_fff_")
_BUILTIN_PREFIXES = ("lj_ff_", "lj_ffh_", "lj_cf_")
# lj_vm_* that are arithmetic helpers, not plumbing: real work, called by the
# interpreter's handlers or straight from trace code. They set up no frame,
# so their caller is missing from the chain: from the interpreter that is a
# handler (dropped anyway), from a trace it is the trace itself. Kept as C
# frames so that time is not silently given to the Lua frame below.
_VM_HELPERS = frozenset((
    "lj_vm_mod", "lj_vm_modi", "lj_vm_floor", "lj_vm_ceil", "lj_vm_trunc",
    "lj_vm_floor_sse", "lj_vm_ceil_sse", "lj_vm_trunc_sse", "lj_vm_round_sse",
    "lj_vm_foldarith", "lj_vm_foldfpm", "lj_vm_powi", "lj_vm_powi_sse",
    "lj_vm_pow_sse", "lj_vm_exp_x87", "lj_vm_exp2_x87", "lj_vm_log2",
    "lj_vm_tobit", "lj_vm_cpuid", "lj_vm_errno"))
# The FFI's call and callback machinery (C functions of LuaJIT): dropped like
# the VM plumbing, so an FFI call from the interpreter shows as caller;callee,
# as it does from a trace (where the call is compiled inline). The cdata
# __call metamethod (ffi.meta___call) goes with lj_ccall_func right above it.
_FFI_PLUMBING = frozenset(("lj_ccall_func", "lj_ccallback_enter",
                           "lj_ccallback_leave"))
# VM frames where the BX register is not the interpreter's bytecode PC:
# entries from C, the FFI (C code runs above them) and trace exits.
_NO_BX = frozenset(("lj_vm_ffi_call", "lj_vm_ffi_callback", "lj_vm_pcall",
                    "lj_vm_cpcall", "lj_vm_call", "lj_vm_resume",
                    "lj_vm_exit_handler"))
# Library prefixes of LuaJIT's fast functions / library C functions
# (LJLIB_MODULE names); anything else after lj_ff_ is a base function.
_LIBS = ("coroutine", "string", "table", "math", "bit", "io", "os", "debug",
         "jit", "ffi", "package", "buffer")
_SUBLIBS = ("jit_util_", "jit_profile_", "jit_opt_")

_ABS_DSOS = frozenset(("[unknown]", "//anon", "[anon]", "[heap]", "[stack]",
                       "[anon_hugepage]"))


def builtin_name(sym):
    """lj_ff_string_byte -> string.byte, lj_cf_io_method_write -> file:write,
    lj_ff_ipairs_aux -> ipairs_aux, lj_cf_jit_util_funcinfo -> jit.util.funcinfo."""
    rest = sym[sym.index("_", 3) + 1:]
    for sub in _SUBLIBS:
        if rest.startswith(sub):
            return sub[:-1].replace("_", ".") + "." + rest[len(sub):]
    lib, us, fn = rest.partition("_")
    if us and lib in _LIBS and fn:
        if fn.startswith("method_") and len(fn) > 7:
            return ("file" if lib == "io" else lib) + ":" + fn[7:]
        return lib + "." + fn
    return rest


def clean_c_name(sym):
    """C/C++ symbol as a folded frame: cut the argument list (but keep
    '(anonymous namespace)'), no ';'."""
    i = sym.find("(")
    while i >= 0:
        if sym.startswith("(anonymous namespace)", i):
            i = sym.find("(", i + 21)
            continue
        if i > 0:
            sym = sym[:i]
        break
    if ";" in sym:
        sym = sym.replace(";", ":")
    return sym or "[unknown]"


def parse_trace_name(name):
    """TRACE_N::CHUNK:LINE::OWNER -> (OWNER, LINE or None); None if not a trace."""
    if not name.startswith("TRACE_"):
        return None
    parts = name.split("::", 2)
    if len(parts) < 2:
        return None
    owner = parts[2] if len(parts) == 3 and parts[2] else parts[1]
    _, _, ln = parts[1].rpartition(":")
    return owner, (int(ln) if ln.isdigit() else None)


class Fr:
    """One interned frame (per distinct callchain line, or per resolved
    (load, address)). KIND/NAME/LABEL is what gets printed; DYN frames are
    absolute user addresses re-resolved per sample through the jitdump."""
    __slots__ = ("kind", "name", "label", "tline", "load", "pid", "index",
                 "off", "addr", "dyn", "interp", "ffi", "sym", "lines")

    def __init__(self, kind, name):
        self.kind = kind
        self.name = name          # printed name (C, VM, builtin)
        self.label = None         # Lua label (LUA) / owner label (TRACE)
        self.tline = None         # trace start line (TRACE)
        self.load = None          # ljresolve.Load once known
        self.pid = None           # jitted-PID-N.so: look the load up later
        self.index = None
        self.off = None           # offset inside the load
        self.addr = None          # absolute address (DYN frames)
        self.dyn = False
        self.interp = False       # VM code or helper: BX may be the bytecode PC
        self.ffi = False          # FFI call/callback machinery (lj_ccall_func)
        self.sym = None
        self.lines = None         # cached line (fold time)


def name_frame(name, load=None, off=None):
    """A frame named by jitdump/perf map/jitted .so: trace, VM code the VM
    describes itself (lj_vm_exit_stubs) or Lua label."""
    t = parse_trace_name(name)
    if t is None and name.startswith(_VM_PREFIXES):
        fr = Fr(K_VM, name)
    elif t is not None:
        fr = Fr(K_TRACE, name)
        fr.label, fr.tline = t
    else:
        fr = Fr(K_LUA, name)
        fr.label = name
    fr.load = load
    fr.off = off
    return fr


def _is_kernel(addr, dso):
    return addr >= 0xffff800000000000 or (dso is not None and dso.startswith("[kernel"))


def _is_abs_dso(dso):
    if dso is None or dso in _ABS_DSOS:
        return True
    if dso.startswith("[anon") or dso.startswith("//anon"):
        return True
    b = os.path.basename(dso)
    return b.startswith("perf-") and b.endswith(".map")


def _jitted(dso):
    """'/tmp/jitted-123-45.so' -> (123, 45)."""
    if dso is None:
        return None
    b = dso.rpartition("/")[2]
    if not (b.startswith("jitted-") and b.endswith(".so")):
        return None
    p, _, i = b[7:-3].partition("-")
    if p.isdigit() and i.isdigit():
        return int(p), int(i)
    return None


def make_frame(text):
    """Parses one callchain line (stripped) into an Fr, or None."""
    sp = split_frame(text)
    if sp is None:
        return None
    addr, sym, off, dso = sp
    if sym == "[unknown]":
        sym = None
    j = _jitted(dso)
    if j is not None:
        pid, index = j
        if off is None:      # no symoff: the .so's text starts at a fixed offset
            off = addr - ljresolve.GEN_ELF_TEXT_OFFSET
        if sym is None:
            fr = Fr(K_LUA, None)          # name from the dump at fold time
        else:
            fr = name_frame(ljresolve._clean_name(sym))
        fr.pid, fr.index, fr.off = pid, index, off
        fr.sym = sym
        return fr
    if sym is None:
        if _is_kernel(addr, dso):
            return Fr(K_C, "[unknown]")
        if _is_abs_dso(dso):
            fr = Fr(K_C, "[unknown]")
            fr.dyn = True
            fr.addr = addr
            return fr
        return Fr(K_C, "[" + os.path.basename(dso) + "]")
    if sym.startswith("lj_"):
        base = sym.partition(".")[0]          # lj_vm_foldfpm.cold
        if base in _VM_HELPERS:
            fr = Fr(K_C, base)
            fr.interp = True
            return fr
        if sym.startswith(_VM_PREFIXES):
            fr = Fr(K_VM, sym)
            fr.interp = base not in _NO_BX
            return fr
        if base in _FFI_PLUMBING:
            fr = Fr(K_VM, sym)
            fr.ffi = True
            return fr
        if sym.startswith(_BUILTIN_PREFIXES):
            fr = Fr(K_BUILTIN, builtin_name(sym))
            fr.sym = sym
            return fr
    trace = sym.startswith("TRACE_") and parse_trace_name(sym) is not None
    if not _is_kernel(addr, dso) and (trace or (dso is not None and _is_abs_dso(dso))):
        # Anonymous code named by perf-PID.map (JIT traces): re-resolve
        # through the jitdump (time-accurate) when there is one.
        if trace:
            fr = name_frame(ljresolve._clean_name(sym))
        else:                              # not a trace: keep perf's name
            fr = Fr(K_C, clean_c_name(sym))
        fr.dyn = True
        fr.addr = addr
        fr.sym = sym
        return fr
    return Fr(K_KERNEL if _is_kernel(addr, dso) else K_C, clean_c_name(sym))


class Resolver:
    """Finds and caches jit-PID.dump / perf-PID.map per process."""

    def __init__(self, jitdump_arg, warn):
        self.warn = warn
        self.dirs = []              # search order
        self.files = {}             # pid -> explicit dump path
        self.dumps = {}             # pid -> Dump or None (not found)
        self.maps = {}              # pid -> PerfMap or None
        self.tid2pid = {}
        self.ucache = {}            # (pid, Fr) -> (ts list, frames, fallback)
        self.memo = {}              # lj_merge's per-stack memo (see process())
        self.gen = 0                # bumped whenever memo is emptied
        self.scanned = False
        self.nodump = set()         # pids with [unknown] frames and no dump
        self.parents = {}           # pid -> (parent pid, fork ns)  (FORK events)
        self.execs = {}             # pid -> exec ns                (COMM exec events)
        self.jd = None              # the jitdump module, imported lazily
        self.jd_error = None
        if jitdump_arg:
            if os.path.isdir(jitdump_arg):
                self.dirs.append(jitdump_arg)
            else:
                b = os.path.basename(jitdump_arg)
                p = b[4:-5] if b.startswith("jit-") and b.endswith(".dump") else ""
                if p.isdigit():
                    self.files[int(p)] = jitdump_arg
                    self.dirs.append(os.path.dirname(jitdump_arg) or ".")
                else:
                    raise ValueError("--jitdump: not a directory nor a jit-PID.dump file: %s"
                                     % jitdump_arg)
        # An explicit --jitdump is the only place searched; otherwise the
        # directories the input shows, $LUAJIT_PERF_DIR, then /tmp.
        self.explicit = bool(jitdump_arg)
        env = os.environ.get("LUAJIT_PERF_DIR")
        self.tail = [] if self.explicit else [d for d in (env, "/tmp") if d]

    def fork(self, child, ctid, parent, t_ns):
        """PERF_RECORD_FORK (perf script --show-task-events): a new thread
        joins its process; a new process starts with its parent's memory,
        so the parent's code loads made before the fork apply to it until
        it describes its code itself (or until it execs)."""
        if child == parent:
            self.tid2pid[ctid] = child
            return
        if child in self.parents or t_ns is None:
            return
        self.parents[child] = (parent, t_ns)
        self.tid2pid.setdefault(ctid, child)
        self._forget(child)

    def exec_(self, pid, t_ns):
        """PERF_RECORD_COMM exec: what PID inherited is gone from T_NS on."""
        if pid in self.parents and t_ns is not None and pid not in self.execs:
            self.execs[pid] = t_ns
            self._forget(pid)

    def _forget(self, pid):
        for k in [k for k in self.ucache if k[0] == pid]:
            del self.ucache[k]
        self.memo.clear()
        self.gen += 1

    def _inherited(self, pid, addr):
        """(ts, Load) of ancestors' loads covering ADDR that PID inherited."""
        out = []
        limit = None
        seen = {pid}
        p = pid
        while p in self.parents:
            pp, t_fork = self.parents[p]
            limit = t_fork if limit is None else min(limit, t_fork)
            if pp in seen:
                break
            seen.add(pp)
            d = self.dump(pp)
            if d is not None:
                out.extend(ld for ld in d.candidates(addr) if ld.ts <= limit)
            p = pp
        return out

    def add_dir(self, d):
        """A directory seen in the input (jit-PID.dump mmap, jitted-*.so)."""
        if self.explicit:
            return
        if d and d not in self.dirs:
            self.dirs.append(d)
            # retry processes whose dump was not found so far
            for pid in [p for p, v in self.dumps.items() if v is None]:
                del self.dumps[pid]
            self.ucache.clear()
            self.memo.clear()
            self.gen += 1
            self.scanned = False

    def _module(self):
        if self.jd is None and self.jd_error is None:
            try:
                import jitdump
                self.jd = jitdump
            except Exception as e:
                self.jd_error = e
                self.warn("cannot import jitdump.py (%s): Lua frames left unresolved"
                          % ljresolve._one_line(e))
        return self.jd

    def _search(self):
        seen = []
        for d in self.dirs + self.tail:
            if d not in seen:
                seen.append(d)
        return seen

    def dump(self, pid):
        if pid is None:
            return None
        try:
            return self.dumps[pid]
        except KeyError:
            pass
        d = None
        path = self.files.get(pid)
        if path is None:
            for dd in self._search():
                p = ljresolve.dump_path(dd, pid)
                if os.path.isfile(p):
                    path = p
                    break
        if path is not None:
            jd = self._module()
            if jd is not None:
                d = ljresolve.load_dump(path, jd)
                for w in d.warnings:
                    self.warn("jitdump " + w)
                for t in d.tids:
                    self.tid2pid.setdefault(t, pid)
        self.dumps[pid] = d
        return d

    def perfmap(self, pid):
        try:
            return self.maps[pid]
        except KeyError:
            pass
        m = None
        for dd in self._search():
            p = ljresolve.map_path(dd, pid)
            if os.path.isfile(p):
                try:
                    m = ljresolve.PerfMap(p)
                except OSError as e:
                    self.warn("cannot read %s: %s" % (p, e.strerror))
                break
        self.maps[pid] = m
        return m

    def pid_of(self, tid):
        """Process of a thread when perf printed only the tid."""
        p = self.tid2pid.get(tid)
        if p is not None:
            return p
        if self.dump(tid) is not None:
            return tid
        if not self.scanned:
            self.scanned = True
            for dd in self._search():
                try:
                    names = os.listdir(dd)
                except OSError:
                    continue
                pids = [int(n[4:-5]) for n in names
                        if n.startswith("jit-") and n.endswith(".dump") and n[4:-5].isdigit()]
                if len(pids) > 256:          # do not read every stale dump in /tmp
                    self.warn("%d jit-*.dump files in %s: threads printed without their "
                              "pid are not looked up (use perf script -F pid,tid or --jitdump)"
                              % (len(pids), dd))
                    continue
                for p in pids:
                    self.dump(p)
            p = self.tid2pid.get(tid)
            if p is not None:
                return p
        self.tid2pid[tid] = tid
        return tid

    def load_of(self, fr):
        """The Load of a jitted-PID-N.so frame."""
        if fr.load is None and fr.index is not None:
            d = self.dump(fr.pid)
            if d is not None:
                fr.load = d.by_index.get(fr.index)
        return fr.load

    def _entry(self, pid, fr):
        addr = fr.addr
        d = self.dump(pid)
        lds = d.candidates(addr) if d is not None else []
        fb = fr
        if pid in self.parents:
            inh = self._inherited(pid, addr)
            if inh:
                lds = inh + lds
                t_exec = self.execs.get(pid)
                if t_exec is not None:     # after exec: inherited loads are gone
                    lds.append(None)
                lds.sort(key=lambda x: (t_exec, 0) if x is None else (x.ts, 1))
        ts, frs = [], []
        for ld in lds:
            if ld is None:
                ts.append(t_exec)
                frs.append(fb)
                continue
            if ld.recs is None:
                ld.recs = {}
            r = ld.recs.get(addr)
            if r is None:
                r = name_frame(ld.name, ld, addr - ld.addr)
                ld.recs[addr] = r
            ts.append(ld.ts)
            frs.append(r)
        if not frs and fr.kind == K_C and fr.name == "[unknown]":
            if d is None and pid not in self.parents and pid is not None:
                self.nodump.add(pid)
            p = pid
            m = self.perfmap(p)
            while m is None and p in self.parents and p not in self.execs:
                p = self.parents[p][0]
                m = self.perfmap(p)
            if m is not None:
                n = m.name_at(addr)
                if n is not None:
                    fb = name_frame(n)
        return ts, frs, fb

    def stable_time(self, pid, frames):
        """Time from which resolving FRAMES (for PID) no longer changes: the
        newest candidate load of any of its dynamic frames."""
        t = -1
        for fr in frames:
            if fr.dyn:
                e = self.ucache.get((pid, fr))
                if e is None:
                    return float("inf")        # evicted: do not memoise
                if e[0] and e[0][-1] > t:
                    t = e[0][-1]
        return t

    def resolve(self, pid, fr, t_end):
        key = (pid, fr)
        e = self.ucache.get(key)
        if e is None:
            e = self._entry(pid, fr)
            if len(self.ucache) > 1000000:
                self.ucache.clear()
                self.memo.clear()
                self.gen += 1
            self.ucache[key] = e
        ts, frs, fb = e
        if not ts:
            return fb
        if t_end is None:
            return frs[-1]
        i = bisect_right(ts, t_end) - 1
        return frs[i] if i >= 0 else fb


class Folder:
    """Turns one raw stack (interned frames, leaf first) into names."""

    def __init__(self, opts, resolver):
        self.keep_vm = opts.keep_vm
        self.jit_tag = opts.jit_tag
        self.lines = opts.lines
        self.res = resolver
        # --kinds: {printed name: set of kind names} of every frame printed
        self.kinds = {} if getattr(opts, "kinds", None) else None

    def note(self, name, kind):
        ks = self.kinds.get(name)
        if ks is None:
            ks = self.kinds[name] = set()
        ks.add(kind if isinstance(kind, str) else KIND_NAMES[kind])

    def _lua_line(self, fr):
        """Current line of a Lua or trace frame (int), "?" when its record
        does not know it, None without line information."""
        if fr.lines is None:
            ld = fr.load or self.res.load_of(fr)
            ln = None
            if ld is not None and fr.off is not None:
                if fr.off == ENTRY_OFF and fr.kind == K_LUA:
                    ln = "?"
                else:
                    ln = ld.line_at(ld.addr + fr.off)
            if ln is None and fr.kind == K_TRACE:
                ln = fr.tline
            fr.lines = ln if ln is not None else 0
        return fr.lines or None

    def _fill_name(self, fr):
        """jitted frame printed as [unknown]: take the name from its load."""
        ld = self.res.load_of(fr)
        if ld is None:
            return None
        nf = name_frame(ld.name, ld, fr.off)
        fr.kind, fr.name, fr.label, fr.tline = nf.kind, nf.name, nf.label, nf.tline
        return fr

    def fold(self, frames, leafline):
        out = []
        prev_owner = None          # label of the trace frame just emitted
        prev_builtin = None
        first_lua = True
        lines = self.lines
        note = self.note if self.kinds is not None else None
        ccall = False              # the frame just before was lj_ccall_func
        for fr in frames:
            k = fr.kind
            if k == K_VM:
                if self.keep_vm:
                    out.append(fr.name)
                    if note:
                        note(fr.name, k)
                    prev_builtin = None
                ccall = fr.ffi and fr.name == "lj_ccall_func"
                continue
            if ccall:
                ccall = False
                if fr.sym == "lj_cf_ffi_meta___call" and not self.keep_vm:
                    continue               # cdata call: part of the FFI call
            if k == K_LUA and fr.label is None:
                if self._fill_name(fr) is None:
                    out.append("[unknown]")
                    if note:
                        note("[unknown]", k)
                    prev_owner = prev_builtin = None
                    continue
                k = fr.kind
            if k == K_LUA:
                label = fr.label
                if prev_owner is not None and prev_owner == label:
                    prev_owner = None
                    first_lua = False
                    continue
                if lines:
                    ln = leafline if (first_lua and leafline is not None) else self._lua_line(fr)
                    if ln is not None:
                        label = "%s:%s" % (label, ln)
                out.append(label)
                if note:
                    note(label, k)
                first_lua = False
                prev_owner = prev_builtin = None
            elif k == K_TRACE:
                name = fr.label
                if lines:
                    ln = self._lua_line(fr)
                    if ln is not None:
                        name = "%s:%d" % (name, ln)
                if self.jit_tag:
                    name += "_[j]"
                out.append(name)
                if note:
                    note(name, k)
                prev_owner = fr.label
                prev_builtin = None
                first_lua = False
            elif k == K_BUILTIN:
                if prev_builtin is not None and prev_builtin[0] == fr.name and \
                        prev_builtin[1] != fr.sym:
                    continue               # lj_ff_x + lj_ffh_x: one call
                out.append(fr.name)
                if note:
                    note(fr.name, k)
                prev_builtin = (fr.name, fr.sym)
                prev_owner = None
            else:
                out.append(fr.name)
                if note:
                    note(fr.name, k)
                prev_owner = prev_builtin = None
        out.reverse()
        return out

    def leaf_line(self, frames, bx):
        """Line of BX in the innermost Lua function, if BX is inside it and
        only VM code or frameless VM helpers (lj_vm_mod...) run above it:
        there BX is the interpreter's PC, while the function's own record
        still holds its first instruction."""
        for fr in frames:
            if fr.interp:
                continue
            k = fr.kind
            if k != K_LUA:
                return None
            ld = fr.load or self.res.load_of(fr)
            if ld is None or not (ld.addr <= bx < ld.end):
                return None
            return ld.line_at(bx)
        return None


def _root(comm, pid, tid, mode, res):
    c = comm if comm else "[unknown]"
    if " " in c or ";" in c:
        c = c.replace(" ", "_").replace(";", ":")
    if mode == 0:
        return c
    if pid is None and tid is not None:
        pid = res.pid_of(tid)
    if mode == 1:
        return "%s-%s" % (c, pid if pid is not None else "?")
    return "%s-%s/%s" % (c, pid if pid is not None else "?",
                         tid if tid is not None else "?")


class Stats:
    def __init__(self):
        self.lines = 0
        self.samples = 0
        self.bad = 0
        self.other_events = 0
        self.kinds = None


def process(f, opts, warn):
    """Reads perf script text from the binary file F. Returns (folded dict
    {stack string: weight}, Stats).

    Memory grows with the number of distinct stacks (and distinct callchain
    lines), not with the input: raw stacks are aggregated as tuples of
    interned frames while reading, and folded into strings once at the end.

    Speed: a sample's callchain is looked up whole (the block reader), so
    the cost is per sample, not per line; lines that do not look like a
    sample of the layout learned from the first header go through the line
    reader, which accepts anything. Both give the same result."""
    res = Resolver(opts.jitdump, warn)
    folder = Folder(opts, res)
    rstats = perfscript.ReadStats()
    st = Stats()
    counts = {}                    # (root, frames tuple, leafline) -> weight
    cache = {}                     # callchain line -> Fr (False: malformed)
    cache_get = cache.get
    want_bx = opts.lines
    root_mode = 2 if opts.tid else (1 if opts.pid else 0)
    ev_filter = opts.event
    ev_all = ev_filter == "all"
    roots = {}                     # (comm, pid, tid) -> root string
    dirs_seen = set()
    dirs_seen_jit = {}
    pid_cache = {}
    dyn_memo = res.memo            # (pid, frames) -> (stable time, resolved frames)
    tfmt = [None, 0]               # time format: decimals, ns multiplier
    layout = None
    parse_fast = perfscript.parse_header_fast
    orphans = []                   # callchain lines outside any sample

    def miss(line):
        """Cache miss: parse a callchain line."""
        text = line.strip()
        if not text:
            fr = None                        # a tab-only line: ignored
        else:
            fr = make_frame(text) or False   # False: malformed
            if fr and fr.dyn and fr.addr == 0:
                fr = None                    # return address 0: the bottom of a
                                             # coroutine stack, not a frame
        if fr and fr.index is not None:
            # perf inject writes jitted-PID-N.so next to jit-PID.dump
            if fr.pid not in dirs_seen_jit:
                m = text.rfind(" (")
                d = os.path.dirname(text[m + 2:-1]) if m >= 0 else ""
                dirs_seen_jit[fr.pid] = d
                if d and d not in dirs_seen:
                    dirs_seen.add(d)
                    res.add_dir(d)
        if len(cache) > 500000:
            cache.clear()
        cache[line] = fr
        return fr

    def t_end_of(tstr):
        """Latest ns the printed time can stand for (perf truncates)."""
        nd = tfmt[0]
        if nd is None or len(tstr) <= nd or tstr[-nd - 1] != ".":
            i = tstr.find(".")
            nd = len(tstr) - i - 1 if i >= 0 else 0
            tfmt[0] = nd
            tfmt[1] = 10 ** (9 - nd) if nd <= 9 else 1
        try:
            v = int(tstr.replace(".", "", 1))
        except ValueError:
            return None
        m = tfmt[1]
        if nd > 9:
            return v // 10 ** (nd - 9)
        return v * m + m - 1

    def side_task(line):
        """PERF_RECORD_FORK(pid:tid):(ppid:ptid) and PERF_RECORD_COMM exec:
        comm:pid/tid lines (perf script --show-task-events)."""
        toks = line.split()
        t_ns = None
        for t in toks:
            if t[-1:] == ":" and perfscript._is_time(t):
                t_ns = t_end_of(t[:-1])
                break
        i = line.find("PERF_RECORD_FORK(")
        if i >= 0:
            a, _, b = line[i + 17:].partition("):(")
            c = a.split(":")
            p = b.partition(")")[0].split(":")
            if len(c) == 2 and len(p) == 2 and all(x.isdigit() for x in c + p):
                res.fork(int(c[0]), int(c[1]), int(p[0]), t_ns)
            return
        pt = toks[-1].rpartition(":")[2] if toks else ""
        pid_s = pt.partition("/")[0]
        if pid_s.isdigit():
            res.exec_(int(pid_s), t_ns)

    def resolve_dyn(fl, p, tstr):
        key = (p, fl)
        memo = dyn_memo.get(key)
        t_end = None if tstr is None else t_end_of(tstr)
        if memo is not None and (t_end is None or t_end >= memo[0]):
            return memo[1]
        resolve = res.resolve
        out = tuple([resolve(p, fr, t_end) if fr.dyn else fr for fr in fl])
        if memo is None:
            stable = res.stable_time(p, fl)
            if t_end is None or t_end >= stable:
                if len(dyn_memo) > 200000:
                    dyn_memo.clear()
                    res.gen += 1
                dyn_memo[key] = (stable, out)
        return out

    def flush(fl, root, pid, tid, tstr, weight, dyn, bx, inline):
        if not fl and inline is not None:
            fr = cache_get(" " + " ".join(inline))
            if fr is None:
                fr = miss(" " + " ".join(inline))
            if fr:
                fl = [fr]
                dyn = fr.dyn
        fl = tuple(fl)
        if dyn:
            p = pid
            if p is None and tid is not None:
                p = pid_cache.get(tid)
                if p is None:
                    p = pid_cache[tid] = res.pid_of(tid)
            fl = resolve_dyn(fl, p, tstr)
        leaf = None
        if bx is not None and fl and fl[0].interp:
            leaf = folder.leaf_line(fl, bx)
        key = (root, fl, leaf)
        counts[key] = counts.get(key, 0) + weight

    # per-sample state of the line reader (lines_in); the block reader
    # below completes its samples at once and leaves no sample open
    frames = None                  # None: no sample open
    append = orphans.append
    dyn = False
    bx = None
    root = None
    pid = tid = None
    tstr = None
    weight = 1
    inline = None
    nlines = 0
    bad = 0
    nsamples = 0
    dropped = []                   # callchain lines of samples of other events

    def close():
        """Flushes the sample the line reader has open."""
        nonlocal frames, append, nsamples
        if frames is not None:
            flush(frames, root, pid, tid, tstr, weight, dyn, bx, inline)
            nsamples += 1
            frames = None
            append = orphans.append

    def open_sample(line, c):
        """A header line (or what may be one): closes the open sample and
        opens the next one, unless it is side-band, malformed or of another
        event (then its callchain lines are dropped)."""
        nonlocal frames, append, dyn, bx, root, pid, tid, tstr, weight, inline
        nonlocal bad, layout, ev_filter
        close()
        if orphans:
            bad += len(orphans)
            orphans.clear()
        dropped.clear()
        toks = line.split()
        h = parse_fast(toks, layout) if layout is not None and c != " " else None
        if h is not None:
            comm, p, t, ts, period, ev = h
            inl = None
        else:
            if "PERF_RECORD_" in line:
                if "PERF_RECORD_FORK(" in line or "PERF_RECORD_COMM exec" in line:
                    side_task(line)
                elif "MMAP" in line:
                    path = perfscript.parse_mmap_path(line)
                    if path:
                        b = os.path.basename(path)
                        if b.startswith("jit-") and b.endswith(".dump"):
                            d = os.path.dirname(path)
                            if d not in dirs_seen:
                                dirs_seen.add(d)
                                res.add_dir(d)
                return
            hh = parse_header(line)
            if hh is None or (hh.comm is None and hh.pid is None and hh.tid is None):
                bad += 1
                return
            if hh.layout is not None:
                layout = hh.layout
            comm, p, t, ts, period, ev = (hh.comm, hh.pid, hh.tid, hh.time,
                                          hh.period, hh.event)
            inl = hh.rest
        if ev is not None and not ev_all:
            if ev_filter is None:
                ev_filter = ev
            if ev != ev_filter and ev.split(":", 1)[0] != ev_filter:
                st.other_events += 1
                append = dropped.append
                return
        pid, tid, tstr, inline = p, t, ts, inl
        weight = period if period is not None else 1
        rkey = (comm, p, t) if root_mode else comm
        root = roots.get(rkey)
        if root is None:
            root = _root(comm, p, t, root_mode, res)
            if len(roots) < 100000:
                roots[rkey] = root
        frames = []
        append = frames.append
        dyn = False
        bx = None

    def lines_in(lines):
        """The line reader: any perf script text, a line at a time."""
        nonlocal dyn, bx, bad
        app = append
        for line in lines:
            c = line[:1]
            if c == "\t":
                fr = cache_get(line)
                if fr is None:
                    fr = miss(line)
                    if fr is None:
                        continue
                if fr:
                    app(fr)
                    if fr.dyn:
                        dyn = True
                else:
                    bad += 1
                continue
            if not c:
                close()
                app = append
                continue
            if c == "#":
                continue                   # perf script --header comments
            if c == " ":
                if line.startswith(" ABI:") or perfscript.is_reg_line(line):
                    if want_bx and frames and frames[0].interp:
                        bx = parse_reg(line, "BX")
                    continue
                s = line.strip()
                if not s:
                    continue
                if frames is not None and ":" in s and " " not in s:
                    continue               # srcline line (-F +srcline)
                # else: maybe a header without comm (-F without comm)
            open_sample(line, c)
            app = append

    # The block reader. Samples repeat: their callchain text (all the lines
    # after the header, without the register line) is looked up whole in
    # bcache, which holds its interned frames -- one dict lookup per sample
    # instead of one per line. Anything unusual goes to the line reader.
    bcache = {}                    # callchain text -> (frames, dyn, malformed) or None
    bcache_get = bcache.get
    bsize = [0]

    def block(body):
        """Parses a sample's callchain lines into bcache (None: the lines
        are not all callchain lines, use the line reader)."""
        ent = None
        if not body:
            ent = ((), False, 0, None)
        else:
            fl = []
            d = False
            nb = 0
            for ln in body.split("\n"):
                if ln[:1] != "\t":
                    fl = None
                    break
                fr = cache_get(ln)
                if fr is None:
                    fr = miss(ln)
                    if fr is None:
                        continue
                if fr:
                    fl.append(fr)
                    if fr.dyn:
                        d = True
                else:
                    nb += 1
            if fl is not None:
                ent = (tuple(fl), d, nb, {} if d else None)
        bsize[0] += len(body) + 100
        if bsize[0] > BCACHE_BYTES:
            bcache.clear()
            bsize[0] = len(body) + 100
        bcache[body] = ent
        return ent

    split_chunks = _CHUNK_SPLIT
    pidtids = {}                   # "pid/tid" token -> (pid, tid)
    carry = ""
    for text in perfscript.read_texts(f, rstats):
        nlines += 1                       # batches: only "was there any line?"
        if carry:
            text = carry + "\n" + text
        chunks = split_chunks(text)       # each: a line at column 0 + indented lines
        carry = chunks.pop()              # may go on in the next batch
        if len(carry) > MAX_CARRY:
            lines_in(carry.split("\n"))
            carry = ""
        for ch in chunks:
            c = ch[:1]
            if not c:                     # a blank line
                if frames is not None:
                    close()
                continue
            if c == "\t" or c == " " or c == "#" or layout is None:
                lines_in(ch.split("\n"))
                continue
            i = ch.find("\n")
            head = ch if i < 0 else ch[:i]
            if "PERF_RECORD_" in head:
                lines_in(ch.split("\n"))
                continue
            # the header, as parse_header_fast() does it
            need, pi, ti, pe, evi = layout
            toks = head.split()
            n = len(toks)
            if n < need:
                lines_in(ch.split("\n"))
                continue
            ts = ev = period = None
            if ti:
                ts = toks[ti]
                if ts[-1] != ":" or "." not in ts:
                    lines_in(ch.split("\n"))
                    continue
                ts = ts[:-1]
            if evi:
                ev = toks[evi]
                if ev[-1] != ":":
                    lines_in(ch.split("\n"))
                    continue
                ev = ev[:-1]
            pt = toks[pi]
            pidtid = pidtids.get(pt)
            if pidtid is None:
                pidtid = perfscript._pidtid(pt)
                if pidtid is None:
                    lines_in(ch.split("\n"))
                    continue
                if len(pidtids) < 100000:
                    pidtids[pt] = pidtid
            if pe:
                period = toks[pe]
                if not period.isdigit():
                    lines_in(ch.split("\n"))
                    continue
                period = int(period)
            body = ch[i + 1:] if i >= 0 else ""
            regs = None
            r = body.rfind("\n") + 1      # the last line: registers (-F uregs)?
            if body[r:r + 1] == " ":
                regs = body[r:]
                if not regs.startswith(" ABI:"):
                    lines_in(ch.split("\n"))
                    continue
                body = body[:r - 1] if r else ""
            ent = bcache_get(body, False)
            if ent is False:
                ent = block(body)
            if ent is None:
                lines_in(ch.split("\n"))
                continue
            if frames is not None:
                close()
            if orphans:
                bad += len(orphans)
                orphans.clear()
            if ev is not None and not ev_all:
                if ev_filter is None:
                    ev_filter = ev
                if ev != ev_filter and ev.split(":", 1)[0] != ev_filter:
                    st.other_events += 1
                    continue
            comm = toks[0] if n == need else " ".join(toks[:n - need + 1])
            p, t = pidtid
            rkey = (comm, p, t) if root_mode else comm
            rt = roots.get(rkey)
            if rt is None:
                rt = _root(comm, p, t, root_mode, res)
                if len(roots) < 100000:
                    roots[rkey] = rt
            fl, d, nb, bm = ent
            if d:                         # flush(), with a memo in the block entry
                if p is None and t is not None:
                    p = pid_cache.get(t)
                    if p is None:
                        p = pid_cache[t] = res.pid_of(t)
                m = bm.get(p)
                out = None
                if m is not None and m[0] == res.gen:
                    if ts is None:
                        out = m[2]
                    else:
                        try:
                            if float(ts) >= m[1]:
                                out = m[2]
                        except ValueError:
                            pass
                if out is None:
                    out = resolve_dyn(fl, p, ts)
                    mm = dyn_memo.get((p, fl))
                    if mm is not None and mm[1] is out:
                        # valid from the stable time on (+2 us: perf prints us)
                        bm[p] = (res.gen, mm[0] / 1e9 + 2e-6, out)
                fl = out
            leaf = None
            if regs is not None and want_bx and fl and fl[0].interp:
                b = parse_reg(regs, "BX")
                if b is not None:
                    leaf = folder.leaf_line(fl, b)
            key = (rt, fl, leaf)
            counts[key] = counts.get(key, 0) + (period if period is not None else 1)
            nsamples += 1
            if nb:
                bad += nb
    if carry:
        lines_in(carry.split("\n"))
    if frames is not None:
        flush(frames, root, pid, tid, tstr, weight, dyn, bx, inline)
        nsamples += 1
    bad += len(orphans)
    if res.nodump and any(v is not None for v in res.dumps.values()):
        ps = sorted(res.nodump)
        warn("no jit-PID.dump for pid %s%s: their Lua frames stay [unknown] (a forked "
             "child that loaded no code of its own uses its parent's dump when perf "
             "script runs with --show-task-events)"
             % (", ".join(map(str, ps[:5])), ", ..." if len(ps) > 5 else ""))

    # Fold the distinct raw stacks.
    folded = {}
    fold = folder.fold
    for (rt, fl, leaf), w in counts.items():
        # A sample header without any frame: perf script drops a whole chain
        # that holds a value in -4095..-1 (garbage from frameless code).
        names = fold(fl, leaf) if fl else [NO_CHAIN]
        names.insert(0, rt)
        if folder.kinds is not None:
            folder.note(rt, "root")
        s = ";".join(names)
        folded[s] = folded.get(s, 0) + w
    st.lines = nlines
    st.samples = nsamples
    st.bad = bad + rstats.huge + rstats.truncated
    st.event = ev_filter
    st.kinds = folder.kinds
    return folded, st


def write_folded(folded, out):
    w = out.write
    for s in sorted(folded):
        w("%s %d\n" % (s, folded[s]))


def write_kinds(kinds, out):
    """--kinds: `KIND<TAB>NAME` per printed frame name, sorted by name (a
    name printed as frames of two kinds gets two lines)."""
    w = out.write
    for name in sorted(kinds):
        for k in sorted(kinds[name]):
            w("%s\t%s\n" % (k, name))


def write_speedscope(folded, out, event, name):
    frames = []
    index = {}
    profiles = {}
    for s in sorted(folded):
        parts = s.split(";")
        root = parts[0]
        stack = []
        for p in parts[1:]:
            i = index.get(p)
            if i is None:
                i = index[p] = len(frames)
                frames.append({"name": p})
            stack.append(i)
        pr = profiles.get(root)
        if pr is None:
            pr = profiles[root] = ([], [])
        pr[0].append(stack)
        pr[1].append(folded[s])
    unit = "nanoseconds" if event and event.split(":")[0] in ("cpu-clock", "task-clock") \
        else "none"
    profs = []
    for root in sorted(profiles):
        samples, weights = profiles[root]
        total = sum(weights)
        profs.append({"type": "sampled", "name": root, "unit": unit,
                      "startValue": 0, "endValue": total,
                      "samples": samples, "weights": weights})
    doc = {"$schema": "https://www.speedscope.app/file-format-schema.json",
           "shared": {"frames": frames},
           "profiles": profs,
           "name": name,
           "activeProfileIndex": 0,
           "exporter": "ljperf lj_merge"}
    json.dump(doc, out, separators=(",", ":"))
    out.write("\n")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("%s: error: %s (see --help)\n" % (PROG, message))
        sys.exit(2)


def make_parser():
    p = _Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                description=__doc__.split("Robustness:")[0],
                epilog="Robustness: malformed or truncated input lines are skipped "
                       "and counted (one summary line on stderr). Empty input gives "
                       "empty output and a warning. Exit status: 0 ok, 1 I/O error, "
                       "2 bad arguments.")
    p.add_argument("input", nargs="?", default="-",
                   help="perf script text (default: stdin)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--format", choices=("folded", "speedscope"), default="folded",
                   help="folded stacks `root;...;leaf COUNT` (default) or speedscope "
                        "JSON (one sampled profile per root frame)")
    p.add_argument("--pid", action="store_true",
                   help="root frame comm-PID (one tree per process; default: comm)")
    p.add_argument("--tid", action="store_true",
                   help="root frame comm-PID/TID (one tree per thread)")
    p.add_argument("--lines", action="store_true",
                   help="Lua frames as LABEL:CURLINE (current line, from the jitdump's "
                        "DEBUG_INFO; the leaf from BX with -F uregs)")
    p.add_argument("--jit-tag", action="store_true",
                   help="append _[j] to frames running as JIT traces")
    p.add_argument("--keep-vm", action="store_true",
                   help="keep VM plumbing frames (lj_BC_*, lj_vm_*, lj_cont_*, "
                        "lj_vmeta_*, lj_fff_*)")
    p.add_argument("--jitdump", metavar="DIR",
                   help="where jit-PID.dump (and perf-PID.map) files are, or one "
                        "jit-PID.dump file; then nothing else is searched. Default: the "
                        "directories the input shows (jit-PID.dump mmap with perf script "
                        "--show-mmap-events, jitted-*.so DSOs of perf inject), "
                        "$LUAJIT_PERF_DIR, then /tmp. Needed for Lua frames printed as "
                        "[unknown] (no inject) and for --lines")
    p.add_argument("--kinds", metavar="FILE",
                   help="also write what each printed frame is, one `KIND<TAB>NAME` "
                        "line per frame name: root (comm), lua, trace, builtin, vm, "
                        "c or kernel (used by ljperf to colour flame graphs)")
    p.add_argument("--event", metavar="NAME",
                   help="keep samples of this event (default: the first event seen; "
                        "'all' keeps every sample)")
    return p


def main(argv=None):
    p = make_parser()
    opts = p.parse_args(argv)
    if opts.jitdump and not os.path.exists(opts.jitdump):
        p.error("--jitdump: no such file or directory: %s" % opts.jitdump)
    warned = set()

    def warn(msg):
        if msg not in warned:
            warned.add(msg)
            sys.stderr.write("%s: warning: %s\n" % (PROG, msg))

    try:
        if opts.input == "-":
            inp = sys.stdin.buffer
        else:
            if os.path.isdir(opts.input):
                sys.stderr.write("%s: cannot read %s: is a directory\n" % (PROG, opts.input))
                return 1
            inp = open(opts.input, "rb")
    except OSError as e:
        sys.stderr.write("%s: cannot open %s: %s\n" % (PROG, opts.input, e.strerror))
        return 1
    try:
        folded, st = process(inp, opts, warn)
    except ValueError as e:
        sys.stderr.write("%s: error: %s\n" % (PROG, e))
        return 2
    except OSError as e:
        sys.stderr.write("%s: read error: %s\n" % (PROG, e.strerror or e))
        return 1
    finally:
        if inp is not sys.stdin.buffer:
            inp.close()

    out_close = None
    try:
        if opts.output:
            out = open(opts.output, "w", encoding="utf-8", errors="replace")
            out_close = out
        else:
            out = sys.stdout
        if opts.format == "speedscope":
            write_speedscope(folded, out, st.event,
                             os.path.basename(opts.input) if opts.input != "-" else "perf script")
        else:
            write_folded(folded, out)
        out.flush()
    except OSError as e:
        if isinstance(e, BrokenPipeError) or e.errno == errno.EPIPE:
            raise
        sys.stderr.write("%s: write error: %s\n" % (PROG, e.strerror or e))
        return 1
    finally:
        if out_close is not None:
            out_close.close()

    if opts.kinds:
        try:
            with open(opts.kinds, "w", encoding="utf-8", errors="replace") as kf:
                write_kinds(st.kinds or {}, kf)
        except OSError as e:
            sys.stderr.write("%s: cannot write %s: %s\n" % (PROG, opts.kinds, e.strerror or e))
            return 1

    if st.bad:
        sys.stderr.write("%s: skipped %d malformed lines\n" % (PROG, st.bad))
    if st.other_events:
        sys.stderr.write("%s: ignored %d samples of other events than %s (see --event)\n"
                         % (PROG, st.other_events, st.event))
    if st.samples == 0:
        warn("no samples in input" if st.lines else "empty input")
    return 0


def entry():
    try:
        rc = main()
    except KeyboardInterrupt:
        rc = 130
    except BrokenPipeError:
        # `lj_merge ... | head`: stop quietly (as if killed by SIGPIPE)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        rc = 128 + signal.SIGPIPE
    except SystemExit:
        raise
    except BaseException as e:      # never a traceback
        sys.stderr.write("%s: internal error: %s\n" % (PROG, ljresolve._one_line(e)))
        rc = 3
    sys.exit(rc)


if __name__ == "__main__":
    entry()
