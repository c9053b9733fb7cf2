"""lj_merge's core: one perf script sample in, one raw stack key out
(Merger), and raw stacks folded into printed frames (Folder).

Invariants:
- A raw stack is (comm, pid, tid, frames, leafline): FRAMES a tuple of
  interned frames.Fr, leaf first, dynamic frames already resolved as of
  the sample's time. Memory grows with distinct stacks and distinct
  callchain texts, not with the input.
- A sample's callchain text is parsed once (chain cache); the cost per
  sample is a few dict lookups.
- Counting a folded block (feed_tally: each distinct sample once, by its
  count) changes nothing feed() would do with its samples one by one:
  it is done only when no sample's resolution can depend on where in
  the block it is (dynamic frames memoised from before the block's
  earliest time, no jitdump directory first seen in it), else feed().
- One sample that trips an internal inconsistency is dropped and counted
  (Merger.dropped); it never ends the run.
"""

import os
from operator import attrgetter

from ljperf.perfscript import Event, is_srcline, time_end_ns, time_span
from ljperf.frames import (K_VM, K_LUA, K_TRACE, K_BUILTIN, K_KERNEL, KINDS,
                           NO_CHAIN, interp_pc, make_frame, name_frame)

# A Lua frame record's ret is the return PC into the function's callee, or,
# before it made a call (or when the VM rebuilt the record), the address
# after its first instruction (FUNCF/FUNCV, never a call): that frame's
# current line is unknown (printed `?` by --lines) unless the PC register (R13) gives it.
ENTRY_OFF = 4

_DYN = attrgetter("dyn")

# Caches are emptied when they pass these sizes (bounded memory).
CHAIN_CACHE_BYTES = 32 << 20
LINE_CACHE = 500000
DYN_MEMO = 200000
PLAN_CACHE = 200000


class Folder:
    """Turns one raw stack (interned frames, leaf first) into printed
    frames, root first: (name, kind name, line, where) where NAME is what
    folded output prints (with ':LINE' under --lines), LINE the Lua line
    (int, "?" when unknown) when LINES asks for it, else None, WHERE (dso,
    address) of native code as perf printed it, or None."""

    def __init__(self, opts, resolver, lines=False):
        self.keep_vm = opts.keep_vm
        self.jit_tag = opts.jit_tag
        self.lines = lines or opts.lines   # find each Lua frame's line
        self.tag = opts.lines              # ... and print it in the name
        self.res = resolver

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

    def _lua(self, fr, leafline, first):
        label = fr.label
        ln = None
        if self.lines:
            ln = leafline if (first and leafline is not None) else self._lua_line(fr)
            if ln is not None and self.tag:
                label = "%s:%s" % (label, ln)
        return (label, "lua", ln, None)

    def _jitted(self, label, fr):
        """A frame of trace code: LABEL, FR's line when lines are wanted
        (in LABEL under --lines; FR: the trace frame, or an inline frame,
        whose PC is never a record's function entry)."""
        ln = None
        if self.lines:
            if fr.kind == K_TRACE:
                ln = self._lua_line(fr)
            else:
                ln = fr.load.line_at(fr.load.addr + fr.off)
            if ln is not None and self.tag:
                label = "%s:%s" % (label, ln)
        if self.jit_tag:
            label += "_[j]"
        return (label, "trace", ln, None)

    def _trace(self, fr, leaf):
        """(printed frames of trace frame FR leaf first, its root function).
        Frames: the Lua functions the trace has at its address
        (jit-PID.dump.inline), innermost first, down to its root frame: the
        function its root trace started in (for a root trace, the function
        FR names; a trace that returned below its start frame: the caller
        it returned to); without inline information FR's function, with the
        line the jitdump gives. The frames under it are records: a trace
        that jumps into another one in a frame it made writes their records
        (vm_patch 0007), so the chain holds them."""
        ld = fr.load or self.res.load_of(fr)
        chain = None
        if ld is not None and fr.off is not None:
            chain = ld.inline_at(fr.off if leaf or fr.off == 0 else fr.off - 1)
        if not chain:
            return [self._jitted(fr.label, fr)], fr.label
        return [self._jitted(f.label, f) for f in chain], chain[-1].label

    def fold(self, frames, leafline):
        """Printed frames of FRAMES (leaf first), root first. Rules (see
        lj_merge --help, Frames): VM plumbing and the FFI call machinery
        dropped; a trace merges with the frame of its own function right
        below it; lj_ff_x + lj_ffh_x is one builtin call."""
        frames = without_slot(frames)
        out = []
        prev_owner = None          # root function of the trace just emitted
        stale = None               # the function that trace started in, if it returned
        prev_builtin = None        # (name, sym) of the builtin just emitted
        first_lua = True
        ccall = False              # the frame just before was lj_ccall_func
        for i, fr in enumerate(frames):
            k = fr.kind
            if k == K_VM:
                if self.keep_vm:
                    out.append((fr.name, "vm", None, _where(fr)))
                    prev_builtin = None
                ccall = fr.ffi and fr.name == "lj_ccall_func"
                continue
            if ccall:
                ccall = False
                if fr.sym == "lj_cf_ffi_meta___call" and not self.keep_vm:
                    continue               # cdata call: part of the FFI call
            if k == K_LUA and fr.label is None:
                if self._fill_name(fr) is None:
                    out.append(("[unknown]", "lua", None, None))
                    prev_owner = stale = prev_builtin = None
                    continue
                k = fr.kind
            if k == K_LUA:
                if prev_owner is not None and prev_owner == fr.label:
                    prev_owner = stale = None  # where the trace was entered
                elif stale is not None and stale == fr.label:
                    stale = None           # a frame the trace returned from
                else:
                    out.append(self._lua(fr, leafline, first_lua))
                    prev_owner = stale = prev_builtin = None
                first_lua = False
            elif k == K_TRACE:
                printed, prev_owner = self._trace(fr, i == 0)
                out.extend(printed)
                stale = fr.label if fr.label != prev_owner else None
                prev_builtin = None
                first_lua = False
            elif k == K_BUILTIN:
                if prev_builtin is not None and prev_builtin[0] == fr.name and \
                        prev_builtin[1] != fr.sym:
                    continue               # lj_ff_x + lj_ffh_x: one call
                out.append((fr.name, "builtin", None, _where(fr)))
                prev_builtin = (fr.name, fr.sym)
                prev_owner = stale = None
            else:
                out.append((fr.name, KINDS[k], None, _where(fr)))
                prev_owner = stale = prev_builtin = None
        out.reverse()
        return out

    def leaf_line(self, frames, pc, through_c=False):
        """Line of PC (the PC register's value, R13) in the innermost Lua
        function, if PC is inside it and only VM code or frameless VM
        helpers (lj_vm_mod...) run above it: there PC is the interpreter's,
        while the function's own record still holds its first instruction.
        THROUGH_C: any C frames may run above it (a memory trap's chain:
        lj_mem_newgco <- lj_tab_new <- lj_BC_TNEW), but no trace."""
        for fr in frames:
            if fr.interp or (through_c and fr.kind != K_LUA and fr.kind != K_TRACE):
                continue
            if fr.kind != K_LUA:
                return None
            ld = fr.load or self.res.load_of(fr)
            if ld is None or not (ld.addr <= pc < ld.end):
                return None
            return ld.line_at(pc)
        return None


# Where a trace's C call goes through while Lua frames are recorded (vm_patch
# 0007): it stores the call site, so under it the slot's is the last call's.
CALL_THUNKS = "lj_vm_call_thunks"
# A trace exit, from its stub until ->vm_fp_exit moves rbp to the slot's next:
# rbp is still at the slot, whose call site is stale (the last call of
# whichever trace made one, or a trace's entry). lj_trace_exit, which the
# handler calls, links to the slot directly in its first instructions. The
# same while ->vm_fp_link writes the records of a link into a deeper frame.
EXIT_PATH = frozenset(("lj_vm_exit_stubs", "lj_vm_exit_handler", "lj_trace_exit",
                       "lj_vm_exit_interp", "lj_vm_fp_exit", "lj_vm_fp_link",
                       "lj_fprec_tracelink"))


def without_slot(frames):
    """FRAMES (leaf first) without the call sites the record slot of trace
    code adds (vm_patch 0007): under trace code or a call thunk its last call
    site, under a framed callee of a trace the call site that callee's record
    has too, under a trace exit's code a stale one. The user-space leaf is
    the first frame after any kernel frames (a sample in the kernel)."""
    out = None
    user = next((k for k, f in enumerate(frames) if f.kind != K_KERNEL), 0)
    for i in range(user + 1, len(frames)):
        fr = frames[i]
        prev = frames[i - 1]
        leaf = i == user + 1        # prev is the user-space leaf (after kernel frames)
        if fr.kind == K_TRACE and (
                (prev.kind == K_TRACE and (leaf or prev is fr)) or
                (leaf and prev.name == CALL_THUNKS) or
                prev.name in EXIT_PATH):
            if out is None:
                out = list(frames[:i])
        elif out is not None:
            out.append(fr)
    return frames if out is None else tuple(out)


def _dso_dir(text):
    """The directory of the DSO of a callchain line (stripped), or ""."""
    m = text.rfind(" (")
    return os.path.dirname(text[m + 2:-1]) if m >= 0 else ""


def _where(fr):
    return (fr.dso, fr.ip) if fr.dso is not None else None


def root_name(comm, pid, tid, mode):
    """The root frame: comm (MODE 0), comm-PID (1) or comm-PID/TID (2)."""
    c = comm if comm else "[unknown]"
    if " " in c or ";" in c:
        c = c.replace(" ", "_").replace(";", ":")
    if mode == 0:
        return c
    if mode == 1:
        return "%s-%s" % (c, pid if pid is not None else "?")
    return "%s-%s/%s" % (c, pid if pid is not None else "?",
                         tid if tid is not None else "?")


class Merger:
    """Feeds on perfscript.Reader batches (feed()); stacks() then yields
    each distinct stack."""

    def __init__(self, opts, resolver, lines=False):
        """LINES: the writers need each Lua frame's line even without
        --lines (pprof); then the PC register is read too."""
        self.res = resolver
        self.folder = Folder(opts, resolver, lines)
        self.want_pc = self.folder.lines
        # --event NAME filters while reading, "all" not at all; by default
        # settle() keeps the event with the most samples (a damaged first
        # sample must not decide).
        self.ev_filter = opts.event if opts.event != "all" else None
        self.ev_fixed = opts.event is not None
        self.counts = {}           # (comm, pid, tid, frames, leafline, event) -> [samples, weight]
        self.lcache = {}           # callchain line -> Fr, None (ignored) or False (malformed)
        self.ccache = {}           # callchain text -> (frames, dyn, malformed, memo)
        self.pcache = {}           # id(distinct sample of a Tally) -> _entry()
        self.pgen = 0              # the Resolver generation pcache holds for
        self.csize = 0
        self.dirs_seen = set()
        self.pid_cache = {}        # tid -> pid (perf printed only the tid)
        self.sole_pid = False      # not looked up yet (input without pid/tid)
        self.bad = 0               # malformed callchain lines
        self.dropped = 0           # samples dropped on an internal inconsistency
        self.pc_seen = False       # a register line read for the leaf's line
        self.other_events = 0
        self.cut = dict(getattr(opts, "cut", None) or ())  # --from: pid -> time (s)
        self.before_switch = 0     # samples --from cut to their host frames
        self.t_first = self.t_last = None   # sample times as perf printed them

    # -- one callchain ------------------------------------------------------

    def _line(self, line):
        """Interned frame of one callchain line (cached by its text)."""
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
            self._saw_dir(_dso_dir(text))
        if len(self.lcache) > LINE_CACHE:
            self.lcache.clear()
        self.lcache[line] = fr
        return fr

    def _chain(self, chain):
        """(frames tuple, has dynamic frames, malformed lines, memo) of a
        callchain text; srcline lines ('  '-led after a frame) are skipped."""
        lines = chain.split("\n")
        get = self.lcache.get
        frs = list(map(get, lines))
        if None not in frs:
            # Every line known (so each a '\t'-led frame line): C-level.
            fl = tuple(filter(None, frs))
            ent = (fl, any(map(_DYN, fl)), len(frs) - len(fl), None)
        else:
            ent = self._chain_lines(lines)
        if ent[1]:
            ent = ent[:3] + ({},)
        self.csize += len(chain) + 100
        if self.csize > CHAIN_CACHE_BYTES:
            self.ccache.clear()
            self.csize = len(chain) + 100
        self.ccache[chain] = ent
        return ent

    def _chain_lines(self, lines):
        """_chain's entry of callchain LINES, line by line."""
        fl = []
        dyn = False
        nb = 0
        get = self.lcache.get
        prev = ""
        for ln in lines:
            c = ln[:1]
            if c != "\t":
                if c and not (prev and is_srcline(ln)):
                    nb += 1               # not the srcline of a frame line
                prev = ""
                continue
            prev = ln
            fr = get(ln)
            if fr is None:
                fr = self._line(ln)
                if fr is None:
                    continue
            if fr:
                fl.append(fr)
                if fr.dyn:
                    dyn = True
            else:
                nb += 1
        return tuple(fl), dyn, nb, None

    def _new_dir(self, chain):
        """Whether parsing callchain text CHAIN may add a jitdump directory
        (a jitted-*.so frame in a directory not seen yet)."""
        for ln in chain.split("\n"):
            if "jitted-" in ln:
                d = _dso_dir(ln.strip())
                if d and d not in self.dirs_seen:
                    return True
        return False

    def _saw_dir(self, d):
        if d and d not in self.dirs_seen:
            self.dirs_seen.add(d)
            self.res.add_dir(d)

    # -- one sample ---------------------------------------------------------

    def feed(self, batch):
        """A list of perfscript Samples and Events, in input order (one
        call per batch: the per-sample work below is the hot loop)."""
        counts = self.counts
        ccache = self.ccache
        ev_fixed = self.ev_filter if self.ev_fixed else None
        ev_key = not self.ev_fixed     # settle() picks the event at the end
        want_pc = self.want_pc
        last = None                    # the batch's last sample time
        cut = self.cut
        for s in batch:
            if type(s) is Event:
                self.event(s)
                continue
            comm, pid, tid, time, period, event, chain, regs, inline = s
            pre = False                # --from: before its process switched on
            if time is not None:
                last = time
                if cut:
                    pre = self._before_switch(pid, tid, time)
            if event is not None and ev_fixed is not None and event != ev_fixed:
                if event.split(":", 1)[0] != ev_fixed:
                    self.other_events += 1
                    continue
            try:
                ent = ccache.get(chain)
                if ent is None:
                    ent = self._chain(chain)
                fl, dyn, nb, memo = ent
                if dyn or (not fl and inline):
                    fl, pid, nb = self.frames(chain, inline, pid, tid, time, ent)
                leaf = None
                if pre:
                    fl = tuple([fr for fr in fl if fr.kind != K_LUA and fr.kind != K_TRACE])
                elif regs is not None and want_pc and fl and fl[0].interp:
                    self.pc_seen = True
                    pc = interp_pc(regs)
                    if pc is not None:
                        leaf = self.folder.leaf_line(fl, pc)
            except Exception:          # noqa: BLE001 -- one sample, not the run
                self.dropped += 1
                continue
            key = (comm, pid, tid, fl, leaf, event if ev_key else None)
            c = counts.get(key)
            if c is None:
                counts[key] = [1, 1 if period is None else period]
            else:
                c[0] += 1
                c[1] += 1 if period is None else period
            if nb:
                self.bad += nb
        if last is not None:
            if self.t_first is None:
                self.t_first = next(x[3] for x in batch
                                    if type(x) is not Event and x[3] is not None)
            self.t_last = last

    def feed_tally(self, tb):
        """A perfscript.Tally: when folded, each distinct sample is counted
        once, by its count, if that is what feed() would do with its samples
        one by one: its dynamic frames resolved by the memo at the block's
        earliest time, no jitdump directory added within the block (which
        would change how the samples after it resolve). Else feed()."""
        plan = None
        if tb.protos is not None and not self.cut:
            plan = self._plan(tb)
        if plan is None:
            self.feed(tb.samples())
            return
        counts = self.counts
        for e, n in zip(plan, tb.ns):
            c = e[3]                   # its counts entry, once made
            key, period, nb = e[2]
            if c is not None:
                c[0] += n
                c[1] += n * period
            elif key is None:
                self.other_events += n
            elif key is False:
                self.dropped += n
            else:
                c = counts.get(key)
                if c is None:
                    c = counts[key] = [n, n * period]
                else:
                    c[0] += n
                    c[1] += n * period
                e[3] = c
            if nb:
                self.bad += nb * n
        if self.t_first is None:
            self.t_first = tb.first()
        self.t_last = tb.last()

    def _plan(self, tb):
        """[_entry()] per distinct sample of folded Tally TB, or None when
        feed() must take the samples one by one. Its side effects (caches)
        are those feed() has on them too. The entry of a sample is kept
        (pcache, by id: an entry holds its sample, so ids are not reused)
        while the Resolver's generation holds, and for dynamic frames while
        the block starts after the memo's time."""
        pcache = self.pcache
        if self.pgen != self.res.gen:
            pcache.clear()
            self.pgen = self.res.gen
        protos = tb.protos
        plan = list(map(pcache.get, map(id, protos)))
        early = None                   # the block's earliest time, s
        for i in [i for i, e in enumerate(plan) if e is None or e[1] is not None]:
            e = plan[i]
            if e is not None:
                if early is None:
                    early = float(tb.earliest())
                if early >= e[1]:
                    continue
            e = self._entry(protos[i], tb)
            if e is None:
                return None
            if e[2][0] is not False:
                if len(pcache) > PLAN_CACHE:
                    pcache.clear()
                pcache[id(protos[i])] = e
            plan[i] = e
        return plan

    def _entry(self, s, tb):
        """[S, earliest time it holds from (s) or None for any, (stack key,
        period, malformed lines), its counts entry once made] of the
        distinct sample S of folded Tally TB, as feed() would count each
        sample of it (key None: another event's, False: dropped); None
        when feed() must take the block."""
        comm, pid, tid, _, period, event, chain, regs, inline = s
        ev = self.ev_filter if self.ev_fixed else None
        if event is not None and ev is not None and event != ev:
            if event.split(":", 1)[0] != ev:
                return [s, None, (None, 0, 0), None]
        since = None
        try:
            ent = self.ccache.get(chain)
            if ent is None:
                if "jitted-" in chain and self._new_dir(chain):
                    return None
                ent = self._chain(chain)
            fl, dyn, nb, memo = ent
            if not fl and inline:
                return None
            if dyn:
                if pid is None:
                    pid = self._pid(tid)
                earliest = tb.earliest()
                m = memo.get(pid)
                if m is None or m[0] != self.res.gen or float(earliest) < m[1]:
                    # what feed() does at the first sample, at the block's
                    # earliest time: memoised if no later load can matter
                    self._resolve(fl, memo, pid, earliest)
                    m = memo.get(pid)
                    if m is None or m[0] != self.res.gen or float(earliest) < m[1]:
                        return None
                fl, since = m[2], m[1]
            leaf = None
            if regs is not None and self.want_pc and fl and fl[0].interp:
                self.pc_seen = True
                pc = interp_pc(regs)
                if pc is not None:
                    leaf = self.folder.leaf_line(fl, pc)
        except Exception:          # noqa: BLE001 -- those samples, not the run
            return [s, None, (False, 0, 0), None]
        key = (comm, pid, tid, fl, leaf, None if self.ev_fixed else event)
        return [s, since, (key, 1 if period is None else period, nb), None]

    def frames(self, chain, inline, pid, tid, time, ent=None):
        """(frames leaf first, pid, malformed lines) of one sample's
        callchain text CHAIN (INLINE: its header's `ip sym (dso)` when it
        has no chain), dynamic frames resolved for PID at TIME; PID looked
        up from TID when they need it. ENT: CHAIN's chain cache entry, if
        the caller has it. feed() inlines the common case (a cached chain
        without dynamic frames); memory.py calls this."""
        if ent is None:
            ent = self.ccache.get(chain)
        if ent is None:
            ent = self._chain(chain)
        fl, dyn, nb, memo = ent
        if not fl and inline:              # a sample recorded without -g
            fl, dyn, _, memo = self._chain("\t" + inline)
        if dyn:
            if pid is None:
                pid = self._pid(tid)
            m = memo.get(pid)              # see _resolve
            if m is not None and m[0] == self.res.gen and \
                    (time is None or float(time) >= m[1]):
                fl = m[2]
            else:
                fl = self._resolve(fl, memo, pid, time)
        return fl, pid, nb

    def _before_switch(self, pid, tid, time):
        """A sample of a process --from names, before its time (counted):
        its Lua frames would lack their callers, so it keeps its host
        frames only, as stock perf shows them."""
        t = self.cut.get(pid if pid is not None else self._pid(tid))
        if t is not None and float(time) < t:
            self.before_switch += 1
            return True
        return False

    def _pid(self, tid):
        """Process of a sample perf printed without its pid."""
        if tid is None:
            if self.sole_pid is False:
                self.sole_pid = self.res.sole_pid()
            return self.sole_pid
        p = self.pid_cache.get(tid)
        if p is None:
            p = self.pid_cache[tid] = self.res.pid_of(tid)
        return p

    def _resolve(self, fl, memo, pid, time):
        """FL with its dynamic frames resolved for PID at TIME. MEMO (per
        callchain) holds, per pid, (Resolver.gen, the time in s from which
        the result stays valid (+2 us: perf prints us), the result); feed()
        checks it first."""
        res = self.res
        t_end = time_end_ns(time) if time is not None else None
        key = (pid, fl)
        dm = res.memo.get(key)
        if dm is not None and (t_end is None or t_end >= dm[0]):
            out = dm[1]
        else:
            out = tuple([res.resolve(pid, fr, t_end) if fr.dyn else fr for fr in fl])
            if dm is None:
                stable = res.stable_time(pid, fl)
                if t_end is None or t_end >= stable:
                    if len(res.memo) > DYN_MEMO:
                        res.memo.clear()
                        res.gen += 1
                    res.memo[key] = dm = (stable, out)
        if dm is not None and dm[1] is out:
            memo[pid] = (res.gen, dm[0] / 1e9 + 2e-6, out)
        return out

    def event(self, ev):
        """One perfscript.Event: forks, execs and jitdump mmaps."""
        t = time_end_ns(ev.time) if ev.time is not None else None
        if ev.kind == "fork":
            self.res.fork(ev.pid, ev.tid, ev.ppid, t)
        elif ev.kind == "exec":
            self.res.exec_(ev.pid, t)
        elif ev.kind == "mmap":
            b = os.path.basename(ev.path)
            if b.startswith("jit-") and b.endswith(".dump"):
                self._saw_dir(os.path.dirname(ev.path))

    # -- the result ---------------------------------------------------------

    def span(self):
        """(first, last) sample time in seconds, or None."""
        return time_span(self.t_first, self.t_last)

    def settle(self):
        """Picks the event to keep (without --event: the one with the most
        samples, the first seen on a tie) and counts the others' samples in
        other_events. Returns the event kept, or None."""
        if self.ev_fixed:
            return self.ev_filter
        tally = {}
        for key, (n, _) in self.counts.items():
            tally[key[5]] = tally.get(key[5], 0) + n
        named = [e for e in tally if e is not None]
        if named:
            keep = max(named, key=lambda e: tally[e])   # max() keeps the first
            self.ev_filter = keep
            self.other_events = sum(n for e, n in tally.items()
                                    if e is not None and e != keep)
        return self.ev_filter

    def stacks(self, root_mode, counts=None):
        """Yields (frames, samples, weight, comm, pid, tid) per distinct
        stack of the event kept (settle() first): FRAMES root first as
        (name, kind, line, where) (Folder.fold), KIND one of frames.KINDS, "root" for the
        root frame, None for [no call chain]; WEIGHT the sum of periods (1
        per sample without). PID is None when perf printed none and the
        roots do not need it (a tid's process is looked up in the jitdumps
        only for --pid/--tid roots and for Lua frames). COUNTS: {(comm,
        pid, tid, frames, leafline): (samples, weight)} to fold instead of
        the samples fed (memory.py: WEIGHT its own, passed through)."""
        if counts is None:
            counts = self._kept()
        fold = self.folder.fold
        folded = {}                # (frames, leafline) -> printed frames
        roots = {}
        for (comm, pid, tid, fl, leaf), (n, w) in counts.items():
            fk = (fl, leaf)
            names = folded.get(fk)
            if names is None:
                # A sample header without any frame: perf script drops a whole
                # chain that holds a value in -4095..-1 (frameless code).
                names = folded[fk] = fold(fl, leaf) if fl else [(NO_CHAIN, None, None, None)]
            if pid is None and root_mode:   # the tid's process, or the one assumed
                pid = self._pid(tid)
            rk = (comm, pid, tid)
            root = roots.get(rk)
            if root is None:
                root = roots[rk] = (root_name(comm, pid, tid, root_mode), "root", None, None)
            yield [root] + names, n, w, comm, pid, tid

    def _kept(self):
        """The counts of the event kept, keyed without the event (a stack
        seen under several events' keys summed)."""
        keep = None if self.ev_fixed else self.ev_filter
        merged = {}
        for (comm, pid, tid, fl, leaf, ev), (n, w) in self.counts.items():
            if keep is not None and ev is not None and ev != keep:
                continue
            k = (comm, pid, tid, fl, leaf)
            c = merged.get(k)
            merged[k] = (n, w) if c is None else (c[0] + n, c[1] + w)
        return merged
