"""Address -> code-load lookup for lj_merge: jit-PID.dump and perf-PID.map.

A jitdump CODE_LOAD names [code_addr, code_addr + code_size) from its
timestamp on; a later load covering an address supersedes earlier ones
(the same rule `perf inject --jit` applies). perf-PID.map has no time: the
last line covering an address wins. Records are read with jitdump.py
(perf-script/jitdump.py, API `read(path, strict=False)`).
"""

import os
from bisect import bisect_right

# perf inject --jit writes one ELF per CODE_LOAD: jitted-PID-INDEX.so. Its
# .text starts at this file offset (perf's genelf GEN_ELF_TEXT_OFFSET:
# sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) rounded up to 16), which is how
# perf prints DSO-relative addresses inside it.
GEN_ELF_TEXT_OFFSET = 0x80


class Load:
    """One CODE_LOAD (plus the DEBUG_INFO written before it)."""
    __slots__ = ("ts", "seq", "addr", "size", "end", "index", "name",
                 "tid", "laddrs", "llines", "recs")

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

    def __len__(self):
        return len(self._r.items)


def load_dump(path, jitdump_mod):
    """Reads PATH with jitdump_mod.read(path, strict=False) into a Dump.
    Tolerates a truncated file (keeps the records before the damage)."""
    loads = []
    pending = {}          # code_addr -> (addrs, lines) from DEBUG_INFO
    seq = 0
    pid = None
    warnings = []
    try:
        for rec in jitdump_mod.read(path, strict=False):
            if hasattr(rec, "code_index"):
                seq += 1
                ld = Load(int(rec.timestamp), seq, int(rec.code_addr),
                          int(rec.code_size), int(rec.code_index),
                          _clean_name(rec.name), getattr(rec, "tid", 0))
                if pid is None:
                    pid = getattr(rec, "pid", None)
                dbg = pending.pop(ld.addr, None)
                if dbg:
                    ld.laddrs, ld.llines = dbg
                loads.append(ld)
            elif hasattr(rec, "entries"):
                ents = sorted((int(e[0]), int(e[1])) for e in rec.entries)
                pending[int(rec.code_addr)] = ([a for a, _ in ents],
                                               [l for _, l in ents])
            elif pid is None and hasattr(rec, "pid") and not hasattr(rec, "tid"):
                pid = rec.pid                     # the file header
    except Exception as e:                        # damaged file: keep what we have
        warnings.append("%s: %s" % (path, _one_line(e)))
    return Dump(pid, path, loads, warnings)


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
                ents.append(_MapEntry(a, s, _clean_name(parts[2]), seq))
        self.bad = bad
        self._r = _Ranges(ents)

    def name_at(self, addr):
        c = self._r.covering(addr)
        if not c:
            return None
        return max(c, key=lambda x: x.seq).name


def _clean_name(s):
    s = str(s).strip()
    if ";" in s:
        s = s.replace(";", ":")
    return s


def _one_line(e):
    s = str(e).splitlines()
    return "%s%s" % (type(e).__name__, (": " + s[0]) if s and s[0] else "")


def dump_path(d, pid):
    return os.path.join(d, "jit-%d.dump" % pid)


def map_path(d, pid):
    return os.path.join(d, "perf-%d.map" % pid)
