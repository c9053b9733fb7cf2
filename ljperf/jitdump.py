#!/usr/bin/env python3
"""Reader and checker for perf jitdump files (jit-PID.dump), standard library only.

API (small on purpose; lj_merge and ljperf import it):

    read(path, strict=False)  -> iterator: one Header, then the records in file order
        Header(magic, version, elf_mach, pid, timestamp, flags)
        CodeLoad(timestamp, pid, tid, vma, code_addr, code_size, code_index, name, code)
        DebugInfo(timestamp, code_addr, entries)   entries: [(addr, line, discrim, filename)]
        CodeClose(timestamp)
        Unknown(id, timestamp, raw)                e.g. JIT_CODE_MOVE, UNWINDING_INFO
    validate(path)            -> list of problem strings ([] means the file is fine)
    prune(path, out, addrs)   -> (kept, total): copies PATH to OUT with only the
                                 CODE_LOADs covering an address in ADDRS

Timestamps are the writer's clock (CLOCK_MONOTONIC ns for ljperf, comparable with
`perf record -k mono` sample times). Names and file names are str (UTF-8, errors
replaced). A DebugInfo entry applies from its addr up to the next entry's addr; the
last entry only closes the range. A file name "\\xff" means "same as the previous
entry" (jitdump spec) and is resolved by the reader.

Errors: read() raises ValueError("...: offset N: ...") for a bad header (magic,
version, size) and for records whose contents overrun their declared size. A
truncated trailing record (what a crash mid-write leaves) ends the iteration
silently, unless strict=True, which raises for it too.

Command line:  jitdump.py FILE [-v]   prints a summary (-v: every record) or the
problems found by validate(); exit status 1 if there are problems. Also
`python3 -m ljperf.jitdump`; it imports nothing from the package, so the
emitter tests run this file by its path.
"""

import collections
import heapq
import os
import struct
import sys

__all__ = ["Header", "CodeLoad", "DebugInfo", "CodeClose", "Unknown",
           "read", "validate", "prune", "JIT_CODE_LOAD", "JIT_CODE_MOVE",
           "JIT_CODE_DEBUG_INFO", "JIT_CODE_CLOSE", "JIT_CODE_UNWINDING_INFO"]

MAGIC = 0x4A695444          # "JiTD" in the writer's byte order
JIT_CODE_LOAD = 0
JIT_CODE_MOVE = 1
JIT_CODE_DEBUG_INFO = 2
JIT_CODE_CLOSE = 3
JIT_CODE_UNWINDING_INFO = 4
HEADER_SIZE = 40            # magic, version, total_size, elf_mach, pad1, pid, timestamp, flags
PREFIX_SIZE = 16            # id, total_size, timestamp
LOAD_FIXED = 40             # pid, tid, vma, code_addr, code_size, code_index
DEBUG_FIXED = 16            # code_addr, nr_entry
ENTRY_FIXED = 16            # addr, lineno, discrim (+ NUL-terminated file name)

Header = collections.namedtuple("Header", "magic version elf_mach pid timestamp flags")
CodeLoad = collections.namedtuple(
    "CodeLoad", "timestamp pid tid vma code_addr code_size code_index name code")
DebugInfo = collections.namedtuple("DebugInfo", "timestamp code_addr entries")
CodeClose = collections.namedtuple("CodeClose", "timestamp")
Unknown = collections.namedtuple("Unknown", "id timestamp raw")


def _cstr(buf, pos, end, what, off):
    """Returns (bytes, position after the NUL) for a NUL-terminated string in buf[pos:end]."""
    nul = buf.find(b"\0", pos, end)
    if nul < 0:
        raise ValueError("offset %d: %s not NUL-terminated within the record" % (off, what))
    return bytes(buf[pos:nul]), nul + 1


def _records(buf, strict):
    """Yields (offset, end offset, record), the Header first. See read()."""
    if len(buf) < HEADER_SIZE:
        raise ValueError("offset 0: file too short for a jitdump header (%d bytes)" % len(buf))
    (magic,) = struct.unpack_from("<I", buf, 0)
    if magic == MAGIC:
        end = "<"
    elif magic == struct.unpack(">I", struct.pack("<I", MAGIC))[0]:
        end = ">"                     # written on a big-endian machine
    else:
        raise ValueError("offset 0: bad magic 0x%08x (want 0x%08x 'JiTD')" % (magic, MAGIC))
    magic, version, hsize, mach, _pad, pid, ts, flags = struct.unpack_from(end + "IIIIIIQQ", buf, 0)
    if version != 1:
        raise ValueError("offset 4: unsupported jitdump version %d" % version)
    if hsize < HEADER_SIZE or hsize > len(buf):
        raise ValueError("offset 8: bad header size %d (file has %d bytes)" % (hsize, len(buf)))
    yield 0, hsize, Header(magic, version, mach, pid, ts, flags)

    off = hsize
    while off < len(buf):
        if len(buf) - off < PREFIX_SIZE:
            if strict:
                raise ValueError("offset %d: truncated record prefix (%d bytes left)" % (off, len(buf) - off))
            return
        rid, size, ts = struct.unpack_from(end + "IIQ", buf, off)
        if size < PREFIX_SIZE:
            raise ValueError("offset %d: record size %d is smaller than its prefix" % (off, size))
        if off + size > len(buf):
            if strict:
                raise ValueError("offset %d: truncated record (id %d, size %d, %d bytes left)"
                                 % (off, rid, size, len(buf) - off))
            return
        rend = off + size
        body = off + PREFIX_SIZE
        if rid == JIT_CODE_LOAD:
            if size < PREFIX_SIZE + LOAD_FIXED:
                raise ValueError("offset %d: CODE_LOAD size %d too small" % (off, size))
            rpid, tid, vma, addr, csize, index = struct.unpack_from(end + "IIQQQQ", buf, body)
            name, pos = _cstr(buf, body + LOAD_FIXED, rend, "CODE_LOAD name", off)
            if pos + csize != rend:
                raise ValueError("offset %d: CODE_LOAD code_size %d overruns record size %d"
                                 % (off, csize, size))
            rec = CodeLoad(ts, rpid, tid, vma, addr, csize, index,
                           name.decode("utf-8", "replace"), bytes(buf[pos:rend]))
        elif rid == JIT_CODE_DEBUG_INFO:
            if size < PREFIX_SIZE + DEBUG_FIXED:
                raise ValueError("offset %d: DEBUG_INFO size %d too small" % (off, size))
            addr, nent = struct.unpack_from(end + "QQ", buf, body)
            pos, entries, prev = body + DEBUG_FIXED, [], ""
            for i in range(nent):
                if pos + ENTRY_FIXED > rend:
                    raise ValueError("offset %d: DEBUG_INFO entry %d of %d overruns record size %d"
                                     % (off, i, nent, size))
                eaddr, line, discrim = struct.unpack_from(end + "QiI", buf, pos)
                fname, pos = _cstr(buf, pos + ENTRY_FIXED, rend, "DEBUG_INFO file name", off)
                fname = prev if fname == b"\xff" else fname.decode("utf-8", "replace")
                entries.append((eaddr, line, discrim, fname))
                prev = fname
            rec = DebugInfo(ts, addr, entries)
        elif rid == JIT_CODE_CLOSE:
            rec = CodeClose(ts)
        else:
            rec = Unknown(rid, ts, bytes(buf[body:rend]))
        yield off, rend, rec
        off = rend


def read(path, strict=False):
    """Iterates over the Header and the records of the jitdump file at PATH."""
    with open(path, "rb") as f:
        buf = f.read()
    for _off, _end, rec in _records(buf, strict):
        yield rec


def prune(path, out, addrs):
    """Writes OUT: PATH's header and records byte for byte, minus the
    CODE_LOADs whose range [code_addr, code_addr + code_size) holds none of
    ADDRS (and the DEBUG_INFO just before each of them). Kept loads keep
    their index and timestamp, so perf inject --jit resolves every address
    in ADDRS exactly as from PATH, with a .so per kept load only. Returns
    (kept loads, all loads). A truncated last record is dropped."""
    with open(path, "rb") as f:
        buf = f.read()
    recs = list(_records(buf, False))
    loads = sorted((r.code_addr, r.code_addr + r.code_size, n)
                   for n, (_, _, r) in enumerate(recs) if isinstance(r, CodeLoad))
    # Sweep addresses and load starts in order; ACTIVE holds the loads that
    # started at or below the address and are not kept yet: those that do
    # not end below it cover it, so all of them are kept at once.
    keep, active, i = set(), [], 0
    for a in sorted(addrs):
        while i < len(loads) and loads[i][0] <= a:
            heapq.heappush(active, (loads[i][1], loads[i][2]))
            i += 1
        while active and active[0][0] <= a:
            heapq.heappop(active)
        keep.update(n for _, n in active)
        active = []
    parts, pending = [], None
    for n, (off, end, rec) in enumerate(recs):
        raw = buf[off:end]
        if isinstance(rec, DebugInfo):
            pending = raw
            continue
        if not isinstance(rec, CodeLoad) or n in keep:
            if pending is not None and isinstance(rec, CodeLoad):
                parts.append(pending)
            parts.append(raw)
        pending = None
    with open(out, "wb") as f:
        f.write(b"".join(parts))
    return len(keep), len(loads)


_BAD_NAME_CHARS = set(" \t\n\r\v\f(;")


def validate(path):
    """Returns a list of problems (strings naming byte offsets); [] if PATH is a sane dump.

    Checks: header (magic, version 1, size, pid, flags 0); record sizes; timestamps
    never decrease; every DEBUG_INFO is immediately followed by the CODE_LOAD of the
    same code_addr and its entries are ascending, inside the code and end with a
    closing entry at code_addr+code_size; CODE_LOAD pid = header pid, code_index
    strictly increasing, name non-empty without whitespace, '(' or ';'; no two
    CODE_LOADs with identical code bytes (perf merges jitted DSOs with identical
    build-ids, derived from the bytes and, depending on the perf version, the address).
    """
    problems = []
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        return ["cannot read %s: %s" % (path, e)]
    header, last_ts, last_index, pending = None, None, None, None
    seen = {}                          # code bytes -> (offset, code_addr)
    try:
        for off, _end, rec in _records(buf, strict=True):
            if isinstance(rec, Header):
                header = rec
                if rec.pid <= 0:
                    problems.append("offset 20: header pid %d" % rec.pid)
                if rec.flags != 0:
                    problems.append("offset 32: header flags 0x%x (ljperf writes 0)" % rec.flags)
                last_ts = rec.timestamp
                continue
            if last_ts is not None and rec.timestamp < last_ts:
                problems.append("offset %d: timestamp %d is before the previous one %d"
                                % (off, rec.timestamp, last_ts))
            last_ts = rec.timestamp
            if pending is not None and not (isinstance(rec, CodeLoad)
                                            and rec.code_addr == pending[1].code_addr):
                problems.append("offset %d: DEBUG_INFO not immediately followed by the CODE_LOAD "
                                "of code_addr 0x%x" % (pending[0], pending[1].code_addr))
            if isinstance(rec, DebugInfo):
                pending = (off, rec)
            elif isinstance(rec, CodeLoad):
                if pending is not None and rec.code_addr == pending[1].code_addr:
                    problems += _check_lines(pending[0], pending[1], rec)
                pending = None
                if rec.pid != header.pid:
                    problems.append("offset %d: CODE_LOAD pid %d differs from header pid %d"
                                    % (off, rec.pid, header.pid))
                if last_index is not None and rec.code_index <= last_index:
                    problems.append("offset %d: code_index %d not above the previous %d"
                                    % (off, rec.code_index, last_index))
                last_index = rec.code_index
                if not rec.name or _BAD_NAME_CHARS.intersection(rec.name):
                    problems.append("offset %d: bad name %r (empty, whitespace, '(' or ';')"
                                    % (off, rec.name))
                if rec.code_size:
                    prev = seen.get(rec.code)
                    if prev is not None:
                        where = ("at the same address" if prev[1] == rec.code_addr
                                 else "at 0x%x" % prev[1])
                        problems.append("offset %d: code bytes identical to the CODE_LOAD at offset "
                                        "%d %s: perf may merge their jitted DSOs (build-id)"
                                        % (off, prev[0], where))
                    else:
                        seen[rec.code] = (off, rec.code_addr)
            else:
                pending = None
                if isinstance(rec, Unknown):
                    problems.append("offset %d: unexpected record id %d" % (off, rec.id))
    except ValueError as e:
        problems.append(str(e))
    if pending is not None:
        problems.append("offset %d: DEBUG_INFO at the end of the file without its CODE_LOAD"
                        % pending[0])
    return problems


def _check_lines(off, info, load):
    out, start, end = [], load.code_addr, load.code_addr + load.code_size
    addrs = [e[0] for e in info.entries]
    if len(addrs) < 2:
        out.append("offset %d: DEBUG_INFO has %d entries (need a line and the closing entry)"
                   % (off, len(addrs)))
    if any(b < a for a, b in zip(addrs, addrs[1:])):
        out.append("offset %d: DEBUG_INFO entries not sorted by address" % off)
    if addrs and (min(addrs) < start or max(addrs) > end):
        out.append("offset %d: DEBUG_INFO entry outside [0x%x, 0x%x]" % (off, start, end))
    if addrs and addrs[-1] != end:
        out.append("offset %d: DEBUG_INFO lacks the closing entry at code_addr+code_size 0x%x"
                   % (off, end))
    return out


USAGE = "usage: jitdump.py FILE [-v]   (record counts and problems; -v: every record)\n"


def _main(argv):
    args = [a for a in argv[1:] if a != "-v"]
    if args in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if len(args) != 1:
        sys.stderr.write(USAGE)
        return 2
    path, verbose = args[0], "-v" in argv[1:]
    if not os.path.isfile(path):
        sys.stderr.write("jitdump.py: %s: no such file\n" % path)
        return 2
    problems = validate(path)
    counts, first, last, nlines = collections.Counter(), None, None, 0
    try:
        for rec in read(path):
            if verbose:
                print(_fmt(rec))
            if isinstance(rec, Header):
                print("%s: pid %d, elf_mach %d, version %d" % (path, rec.pid, rec.elf_mach, rec.version))
                continue
            counts[type(rec).__name__] += 1
            first = rec.timestamp if first is None else first
            last = rec.timestamp
            if isinstance(rec, DebugInfo):
                nlines += len(rec.entries)
    except ValueError as e:
        print("%s: %s" % (path, e))
    print("records: %s; %d line entries; timestamps %s..%s" % (
        ", ".join("%s %d" % kv for kv in sorted(counts.items())) or "none", nlines, first, last))
    for p in problems:
        print("problem: " + p)
    return 1 if problems else 0


def _fmt(rec):
    if isinstance(rec, CodeLoad):
        return "%d CODE_LOAD #%d 0x%x+0x%x %s (pid %d tid %d)" % (
            rec.timestamp, rec.code_index, rec.code_addr, rec.code_size, rec.name, rec.pid, rec.tid)
    if isinstance(rec, DebugInfo):
        return "%d DEBUG_INFO 0x%x %s" % (rec.timestamp, rec.code_addr, " ".join(
            "0x%x:%s:%d" % (a, f, l) for a, l, _d, f in rec.entries))
    return repr(rec)


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
