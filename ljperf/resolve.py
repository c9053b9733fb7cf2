"""Address -> code-load lookup for lj_merge: jit-PID.dump and perf-PID.map.

A jitdump CODE_LOAD names [code_addr, code_addr + code_size) from its
timestamp on; a later load covering an address supersedes earlier ones
(the same rule `perf inject --jit` applies). perf-PID.map has no time: the
last line covering an address wins. Records are read with jitdump.py.
Resolver finds each process's files and names a dynamic frame (an absolute
user address) as of a sample's time, with fork/exec inheritance.
"""

import os
from bisect import bisect_right

from ljperf import inline
from ljperf import jitdump
from ljperf.frames import K_C, clean_name, name_frame

class Load:
    """One CODE_LOAD (plus the DEBUG_INFO written before it)."""
    __slots__ = ("ts", "seq", "addr", "size", "end", "index", "name",
                 "tid", "laddrs", "llines", "recs", "inl", "traceno", "root", "dump")

    def __init__(self, ts, seq, addr, size, index, name, tid):
        self.ts = ts
        self.seq = seq
        self.addr = addr
        self.size = size
        self.end = addr + size
        self.index = index
        self.name = name
        self.tid = tid
        self.laddrs = None     # DEBUG_INFO entry addresses (sorted)
        self.llines = None     # their lines
        self.recs = None       # lj_merge's interned frames per address
        self.inl = None        # a trace's inline ranges: (offsets, frames)
        self.traceno = None    # a trace's number (with inline ranges)
        self.root = None       # its root trace's number (itself for a root trace)

    def line_at(self, addr):
        """Line of ADDR: the DEBUG_INFO entry with the greatest addr <= ADDR
        (the VM already shifted return addresses to their call's line).
        None without debug info, outside the load, or on a 0 line."""
        la = self.laddrs
        if not la or addr < self.addr or addr >= self.end:
            return None
        i = bisect_right(la, addr) - 1
        if i < 0:
            return None
        ln = self.llines[i]
        return ln if ln > 0 else None

    def inline_at(self, off):
        """The Lua frames (innermost first, the trace's root frame last) of
        this trace's code at OFF, or None (none known: the root frame)."""
        if self.inl is None:
            return None
        offs, frames = self.inl
        i = bisect_right(offs, off) - 1
        return frames[i] if i >= 0 else None

    def __repr__(self):
        return "Load(%s @%#x+%#x ts=%d idx=%d)" % (
            self.name, self.addr, self.size, self.ts, self.index)


class _Ranges:
    """Loads (or map entries) sorted by start address; finds those that
    cover an address."""

    def __init__(self, items):
        items.sort(key=lambda x: (x.addr, x.seq))
        self.items = items
        self.starts = [x.addr for x in items]
        self.maxsize = max((x.size for x in items), default=0)

    def covering(self, addr):
        st = self.starts
        it = self.items
        i = bisect_right(st, addr) - 1
        lo = addr - self.maxsize
        out = []
        while i >= 0 and st[i] > lo - 1:
            x = it[i]
            if x.end > addr:
                out.append(x)
            i -= 1
        return out


class Dump:
    """All loads of one jit-PID.dump."""

    def __init__(self, pid, path, loads, warnings):
        self.pid = pid
        self.path = path
        self.by_index = {}
        for ld in loads:
            self.by_index[ld.index] = ld     # index is unique per process
        self.tids = set(ld.tid for ld in loads)
        self._r = _Ranges(loads)
        self.warnings = warnings

    def candidates(self, addr):
        """Loads covering ADDR, oldest first (timestamp, then file order)."""
        c = self._r.covering(addr)
        c.sort(key=lambda x: (x.ts, x.seq))
        return c

    def add_inline(self, traces):
        """Attaches inline.Trace objects to their trace loads: LOAD.inl =
        (range offsets, per range the Lua frames innermost first, the
        root frame last; None: the root frame only)."""
        for t in traces:
            ld = self.by_index.get(t.index)
            if ld is None or ld.addr != t.addr or ld.size != t.size:
                continue
            frames = [self._lua_frames(st, ld.ts) for st in inline.stacks(t)]
            ld.inl = ([off for off, _ in t.ranges],
                      [frames[n - 1] if n else None for _, n in t.ranges])
            ld.traceno, ld.root = t.traceno, t.root

    def _lua_frames(self, pcs, ts):
        """Frames of the bytecode addresses PCS as of time TS (the newest
        prototype load at or before TS); None if one is unknown."""
        out = []
        for pc in pcs:
            lds = [x for x in self.candidates(pc) if x.ts <= ts]
            if not lds:
                return None
            ld = lds[-1]
            out.append(name_frame(ld.name, ld, pc - ld.addr))
        return tuple(out)


def load_dump(path):
    """Reads the jit-PID.dump at PATH into a Dump. Tolerates a damaged or
    truncated file: keeps the records before the damage, says why in
    Dump.warnings."""
    loads = []
    pending = {}          # code_addr -> (addrs, lines) from DEBUG_INFO
    seq = 0
    pid = None
    warnings = []
    try:
        for rec in jitdump.read(path, strict=False):
            if isinstance(rec, jitdump.CodeLoad):
                seq += 1
                ld = Load(rec.timestamp, seq, rec.code_addr, rec.code_size,
                          rec.code_index, clean_name(rec.name), rec.tid)
                dbg = pending.pop(ld.addr, None)
                if dbg:
                    ld.laddrs, ld.llines = dbg
                loads.append(ld)
            elif isinstance(rec, jitdump.DebugInfo):
                ents = sorted((e[0], e[1]) for e in rec.entries)
                pending[rec.code_addr] = ([a for a, _ in ents], [l for _, l in ents])
            elif isinstance(rec, jitdump.Header):
                pid = rec.pid
    except (OSError, ValueError) as e:            # damaged file: keep what we have
        warnings.append("%s: %s" % (path, one_line(e)))
    d = Dump(pid, path, loads, warnings)
    ipath = path + ".inline"
    if os.path.isfile(ipath):
        damage = []
        try:
            d.add_inline(inline.read(ipath, damage))
        except (OSError, ValueError) as e:
            warnings.append("%s: %s" % (ipath, one_line(e)))
        warnings += ["%s: %s" % (ipath, x) for x in damage]
    return d


class _MapEntry:
    __slots__ = ("addr", "size", "end", "name", "seq")

    def __init__(self, addr, size, name, seq):
        self.addr = addr
        self.size = size
        self.end = addr + size
        self.name = name
        self.seq = seq


class PerfMap:
    """/tmp/perf-PID.map: `START SIZE NAME` (hex, hex, rest of line)."""

    def __init__(self, path):
        self.path = path
        ents = []
        bad = 0
        with open(path, "rb") as f:
            for seq, raw in enumerate(f):
                parts = raw.decode("utf-8", "replace").rstrip("\r\n").split(" ", 2)
                if len(parts) < 3:
                    bad += 1
                    continue
                try:
                    a = int(parts[0], 16)
                    s = int(parts[1], 16)
                except ValueError:
                    bad += 1
                    continue
                ents.append(_MapEntry(a, s, clean_name(parts[2]), seq))
        self.bad = bad            # malformed lines, reported by Resolver
        self._r = _Ranges(ents)

    def name_at(self, addr):
        c = self._r.covering(addr)
        if not c:
            return None
        return max(c, key=lambda x: x.seq).name


def one_line(e):
    """An exception as one line: 'TypeName: first line of its message'."""
    s = str(e).splitlines()
    return "%s%s" % (type(e).__name__, (": " + s[0]) if s and s[0] else "")


def dump_path(d, pid):
    return os.path.join(d, "jit-%d.dump" % pid)


# perf's convention: a process's perf map is /tmp/perf-PID.map (PID as the
# process itself sees it), wherever its jitdump goes.
MAP_DIR = "/tmp"


def map_name(pid):
    return "perf-%d.map" % pid


def map_path(d, pid):
    """PID's perf map in D (MAP_DIR where the VM writes it)."""
    return os.path.join(d, map_name(pid))


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
        """A directory seen in the input (jit-PID.dump mmap, jitted-*.so);
        one that is not a directory here (a path damaged in the input: a
        NUL byte in it would reach os.listdir) is not searched."""
        if self.explicit:
            return
        if d and d not in self.dirs and os.path.isdir(d):
            self.dirs.append(d)
            # retry processes whose dump was not found so far
            for pid in [p for p, v in self.dumps.items() if v is None]:
                del self.dumps[pid]
            self.ucache.clear()
            self.memo.clear()
            self.gen += 1
            self.scanned = False

    def _search(self):
        seen = []
        for d in self.dirs + self.tail:
            if d not in seen:
                seen.append(d)
        return seen

    @staticmethod
    def _cached(cache, pid, read):
        """CACHE[PID], read(PID) the first time; None for no pid."""
        v = cache.get(pid, False)
        if v is False:
            v = cache[pid] = read(pid) if pid is not None else None
        return v

    def dump(self, pid):
        """PID's Dump, or None (no pid, no jit-PID.dump found)."""
        return self._cached(self.dumps, pid, self._read_dump)

    def _read_dump(self, pid):
        path = self.files.get(pid)
        if path is None:
            path = next((p for p in (dump_path(dd, pid) for dd in self._search())
                         if os.path.isfile(p)), None)
        if path is None:
            return None
        d = load_dump(path)
        for w in d.warnings:
            self.warn("jitdump " + w)
        for t in d.tids:
            self.tid2pid.setdefault(t, pid)
        return d

    def perfmap(self, pid):
        """PID's PerfMap, or None (no pid, no perf-PID.map found)."""
        return self._cached(self.maps, pid, self._read_map)

    def _read_map(self, pid):
        path = next((p for p in (map_path(dd, pid) for dd in self._search())
                     if os.path.isfile(p)), None)
        if path is None:
            return None
        try:
            m = PerfMap(path)
        except OSError as e:
            self.warn("cannot read %s: %s" % (path, e.strerror))
            return None
        if m.bad:
            self.warn("%s: skipped %d malformed lines" % (path, m.bad))
        return m

    def sole_pid(self):
        """The process of an input without pid and tid: the one jit-PID.dump
        that --jitdump names, or the only one in the directories searched;
        None when there are none or several."""
        if self.files:
            return next(iter(self.files)) if len(self.files) == 1 else None
        pids = set()
        for dd in self._search():
            try:
                names = os.listdir(dd)
            except OSError:
                continue
            pids.update(int(n[4:-5]) for n in names if n.startswith("jit-")
                        and n.endswith(".dump") and n[4:-5].isdigit())
        return pids.pop() if len(pids) == 1 else None

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


