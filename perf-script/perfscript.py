"""Streaming pieces for reading `perf script` text (perf 6.x).

What perf prints (measured with perf 6.1, see /work/shared/notes/perf-facts.md):

  sample header   `comm  pid/tid [cpu] time: period event: [ip sym (dso)]`
                  every field optional and chosen with -F; comm is printed
                  "%s " (it may contain spaces), pid/tid "%7d/%-7d", time
                  "%5lu.%06lu:" (nine decimals with --ns), period "%10lu".
  callchain line  `\\t%16x sym+0xoff (dso)` leaf first. Addresses are
                  DSO-relative for file-backed DSOs (jitted-*.so included)
                  and absolute for anonymous, unknown and kernel ones.
  srcline line    `  file.c:10` after a callchain line (-F +srcline)
  register line   ` ABI:2    BX:0x...    DX:0x...` (-F uregs / iregs)
  separator       a blank line between samples, but not after a register
                  line: a new header always starts a new sample.
  side-band       `comm pid time: PERF_RECORD_MMAP2 ...` (--show-*-events)

Nothing here uses a regular expression per line: the caller caches parsed
callchain lines by their text, headers are split once.
"""

import sys

# Reading ---------------------------------------------------------------------

BLOCK = 1 << 18       # bytes read per read(2)
MAX_LINE = 1 << 20       # longer lines are dropped (bounded memory)


class ReadStats:
    __slots__ = ("huge", "truncated")

    def __init__(self):
        self.huge = 0        # lines longer than MAX_LINE, dropped
        self.truncated = 0   # a last line without its newline


def read_batches(f, stats, block=BLOCK, max_line=MAX_LINE):
    """Yields lists of complete lines (str, without '\\n') read from the
    binary file F. Memory stays bounded by BLOCK + MAX_LINE whatever the
    input: an over-long line is dropped and counted in STATS.huge. A last
    line missing its newline is a truncated line: counted, not yielded."""
    for text in read_texts(f, stats, block, max_line):
        yield text.split("\n")


def read_texts(f, stats, block=BLOCK, max_line=MAX_LINE):
    """Like read_batches(), but yields each batch of complete lines as one
    str, the lines joined by '\\n' (no newline at the end)."""
    carry = b""
    skipping = False          # inside an over-long line: drop up to '\n'
    read = f.read
    while True:
        blk = read(block)
        if not blk:
            break
        if skipping:
            i = blk.find(b"\n")
            if i < 0:
                continue
            blk = blk[i + 1:]
            skipping = False
        data = carry + blk if carry else blk
        j = data.rfind(b"\n")
        if j < 0:
            if len(data) > max_line:
                stats.huge += 1
                carry = b""
                skipping = True
            else:
                carry = data
            continue
        carry = data[j + 1:]
        if len(carry) > max_line:
            stats.huge += 1
            carry = b""
            skipping = True
        text = data[:j].decode("utf-8", "replace")
        if j > max_line:
            lines = _drop_huge(text.split("\n"), stats, max_line)
            if not lines:
                continue
            text = "\n".join(lines)
        yield text
    if carry and carry.strip():
        stats.truncated += 1


def _drop_huge(lines, stats, max_line):
    out = []
    for ln in lines:
        if len(ln) > max_line:
            stats.huge += 1
        else:
            out.append(ln)
    return out


# Header lines ----------------------------------------------------------------

class Header:
    """One parsed sample header. Missing fields are None. LAYOUT (or None)
    lets parse_header_fast() parse the next headers of the same output."""
    __slots__ = ("comm", "pid", "tid", "time", "period", "event", "rest", "layout")

    def __init__(self):
        self.comm = self.pid = self.tid = self.time = None
        self.period = self.event = self.rest = self.layout = None


def _is_time(tok):
    # "832.171767:" -- digits '.' digits ':'
    if len(tok) < 4 or tok[-1] != ":":
        return False
    a, dot, b = tok[:-1].partition(".")
    return dot == "." and a.isdigit() and b.isdigit()


def _pidtid(tok):
    """'123' -> (None, 123) (a lone number is the tid in perf's default
    output; with -F pid alone it is the pid: callers treat it as a thread
    id that maps to a process), '123/456' -> (123, 456), else None."""
    if tok.isdigit():
        return (None, int(tok))
    a, sl, b = tok.partition("/")
    if sl and a.isdigit() and b.isdigit():
        return (int(a), int(b))
    return None


def _is_hex(tok):
    try:
        int(tok, 16)
        return True
    except ValueError:
        return False


def _is_cpu(tok):
    return len(tok) > 2 and tok[0] == "[" and tok[-1] == "]" and tok[1:-1].isdigit()


def parse_header(line):
    """Parses a sample header line (the general, slower way). Returns a
    Header, or None when the line is not a header."""
    toks = line.split()
    n = len(toks)
    if n == 0:
        return None
    h = Header()
    # Find the time token: it anchors pid and comm when comm has spaces.
    ti = -1
    for i in range(n):
        if _is_time(toks[i]):
            ti = i
            break
    # Does the line start with comm? perf prints it "%s " before a callchain,
    # "%16s " (right-aligned) otherwise; without -F comm a pid/tid comes first.
    start = 1 if line[0] not in " \t" or _pidtid(toks[0]) is None else 0
    pi = -1
    if ti >= 0:
        j = ti - 1
        if j >= start and _is_cpu(toks[j]):
            j -= 1
        if j >= start and _pidtid(toks[j]) is not None:
            pi = j
    else:
        # No time: the first pid-like token after comm; prefer pid/tid.
        for i in range(start, n):
            t = toks[i]
            if "/" in t and _pidtid(t) is not None:
                pi = i
                break
        if pi < 0:
            for i in range(start, n):
                if toks[i].isdigit():
                    pi = i
                    break
    if pi >= 0:
        pt = _pidtid(toks[pi])
        h.pid, h.tid = pt
        if start == 1:
            h.comm = " ".join(toks[:pi]) if pi > 0 else toks[0]
        k = pi + 1
    elif ti >= 0:
        if start == 1:
            h.comm = " ".join(toks[:ti]) if ti > 0 else None
        k = ti
    else:
        if start == 0:
            return None
        h.comm = toks[0]
        k = 1
    if k < n and _is_cpu(toks[k]):
        k += 1
    if ti >= 0:
        if k != ti:
            return None            # junk between pid and time
        h.time = toks[ti][:-1]
        k = ti + 1
    # period: a bare number before the event name (not the inline ip of a
    # sample without callchain: that one is followed by a symbol)
    pe = -1
    if k < n and toks[k].isdigit() and (k + 1 == n or toks[k + 1][-1] == ":"
                                        or _is_hex(toks[k + 1])):
        h.period = int(toks[k])
        pe = k
        k += 1
    # event: "cpu-clock:pppH:" "cycles:u:" -- ends with ':'
    ev = -1
    if k < n and toks[k][-1] == ":":
        h.event = toks[k][:-1]
        ev = k
        k += 1
    if k < n:
        h.rest = toks[k:]          # inline "ip sym (dso)" without callchain
    elif start == 1 and pi > 0:
        # Layout counted from the end (comm may contain spaces).
        h.layout = (n - pi + 1, pi - n, ti - n if ti >= 0 else 0,
                    pe - n if pe >= 0 else 0, ev - n if ev >= 0 else 0)
    return h


def parse_header_fast(toks, layout):
    """Parses split header tokens with a LAYOUT learned by parse_header().
    Returns (comm, pid, tid, time, period, event) or None (use the slow way)."""
    need, pi, ti, pe, ev = layout
    n = len(toks)
    if n < need:
        return None
    t = toks[ti] if ti else None
    if t is not None and (t[-1] != ":" or "." not in t):
        return None
    e = toks[ev] if ev else None
    if e is not None and e[-1] != ":":
        return None
    pt = toks[pi]
    try:
        if "/" in pt:
            a, _, b = pt.partition("/")
            pid, tid = int(a), int(b)
        else:
            pid, tid = None, int(pt)
        period = int(toks[pe]) if pe else None
    except ValueError:
        return None
    comm = toks[0] if n == need else " ".join(toks[:n - need + 1])
    return (comm, pid, tid, t[:-1] if t is not None else None, period,
            e[:-1] if e is not None else None)


def time_to_ns(s):
    """'832.171767' -> (832171767000, 1000): ns and the printed resolution."""
    a, _, b = s.partition(".")
    nd = len(b)
    if nd >= 9:
        return int(a) * 1000000000 + int(b[:9]), 1
    unit = 10 ** (9 - nd)
    return int(a) * 1000000000 + int(b or "0") * unit, unit


# Callchain lines -------------------------------------------------------------

def split_frame(text):
    """'121e c+0x3d (/tmp/ljm/cstack)' (already stripped) ->
    (addr:int, sym:str|None, off:int|None, dso:str|None), or None when the
    address is not hex. The DSO is the last ' (...)' group; a symbol may
    contain spaces and parentheses (C++)."""
    addr_s, _, rest = text.partition(" ")
    try:
        addr = int(addr_s, 16)
    except ValueError:
        return None
    sym = off = dso = None
    if rest:
        if rest[-1] == ")":
            i = rest.rfind(" (")
            if i >= 0:
                dso = rest[i + 2:-1]
                rest = rest[:i]
            elif rest[0] == "(":
                dso = rest[1:-1]
                rest = ""
        if rest:
            s, plus, o = rest.rpartition("+0x")
            if plus and s:
                try:
                    off = int(o, 16)
                    rest = s
                except ValueError:
                    pass
            sym = rest
    return addr, sym, off, dso


def parse_reg(line, reg):
    """Value of register REG ('BX') on a ' ABI:2 BX:0x... ' line, or None."""
    key = " " + reg + ":0x"
    i = line.find(key)
    if i < 0:
        return None
    i += len(key)
    j = line.find(" ", i)
    try:
        return int(line[i:] if j < 0 else line[i:j], 16)
    except ValueError:
        return None


def is_reg_line(line):
    """' ABI:2    BX:0x...' (uregs) or iregs likewise."""
    s = line.lstrip()
    return s.startswith("ABI:") or (":0x" in s and s.split(":", 1)[0].isupper())


def parse_mmap_path(line):
    """For a side-band PERF_RECORD_MMAP/MMAP2 line, the mapped file path."""
    i = line.find("]: ")
    if i < 0:
        return None
    rest = line[i + 3:].strip()
    # "r-xp /tmp/jit-123.dump" (MMAP2) or "x /path" (MMAP)
    _, _, path = rest.partition(" ")
    return path or None


# Whole samples ---------------------------------------------------------------

class Sample:
    """One sample: header fields (None when not printed), FRAMES as
    (addr, sym, off, dso) tuples leaf first, REGS the register line or None."""
    __slots__ = ("comm", "pid", "tid", "time", "period", "event", "frames",
                 "regs")

    def __init__(self, h=None):
        self.comm = self.pid = self.tid = self.time = None
        self.period = self.event = self.regs = None
        if h is not None:
            self.comm, self.pid, self.tid = h.comm, h.pid, h.tid
            self.time, self.period, self.event = h.time, h.period, h.event
        self.frames = []


def iter_samples(lines):
    """Yields a Sample for each sample of perf script text (an iterable of
    lines without their newlines). The simple reader for tools and tests;
    lj_merge runs its own faster loop over the same pieces. Lines that fit
    nowhere are skipped."""
    cur = None
    for line in lines:
        if not line.strip():
            if cur is not None:
                yield cur
                cur = None
        elif line[0] == "\t":
            fr = split_frame(line.strip())
            if fr is not None:
                if cur is None:
                    cur = Sample()
                cur.frames.append(fr)
        elif is_reg_line(line):
            if cur is not None:
                cur.regs = line
        else:
            h = parse_header(line)
            if h is not None:
                if cur is not None:
                    yield cur
                cur = Sample(h)
    if cur is not None:
        yield cur


if __name__ == "__main__":          # tiny self-check: print parsed headers
    for ln in sys.stdin:
        if ln[:1] not in ("\t", "") and ln.strip():
            h = parse_header(ln.rstrip("\n"))
            print(h and (h.comm, h.pid, h.tid, h.time, h.period, h.event))
