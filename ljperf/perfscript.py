"""The one reader of `perf script` text (perf 6.x): lj_merge, ljperf and the
tests all read perf script output through it.

What perf prints (measured with perf 6.1 for every -F combination; the
test lj_merge.fields, tests/lj_merge/fields.py, runs them on a real
recording):

  sample header   `comm pid/tid [cpu] time: period event: [ip sym (dso)]`
                  every field optional and chosen with -F; comm is printed
                  "%s " (it may contain spaces), pid/tid "%7d/%-7d", a lone
                  pid or tid "%5d" at column 0, time "%5lu.%06lu:" (nine
                  decimals with --ns), period "%10lu" (so a header that
                  starts with period or time starts with spaces). Without
                  any of these fields the header is an empty line.
  callchain line  `\\t%16x sym+0xoff (dso)` leaf first. Addresses are
                  DSO-relative for file-backed DSOs (jitted-*.so included)
                  and absolute for anonymous, unknown and kernel ones.
  srcline line    `  file.c:10` after a callchain line (-F +srcline)
  register line   ` ABI:2    R13:0x...` (-F uregs / iregs)
  separator       a blank line after a sample, but not after a register
                  line: a new header always starts a new sample.
  side-band       `[comm] [pid/tid] [time:] PERF_RECORD_FORK(p:t):(pp:pt)`,
                  `..._EXIT(...)`, `..._COMM exec: comm:pid/tid`, `..._MMAP2
                  ...: r-xp PATH` (--show-task-events, --show-mmap-events),
                  `comm pid/tid time: PERF_RECORD_SWITCH OUT preempt`, `... IN`
                  (--show-switch-events; _SWITCH_CPU_WIDE likewise)

Reader(f) yields Sample and Event tuples in input order. A line that fits
nowhere is counted in Reader.stats.malformed, never raised. Speed: text is
cut into chunks at every line that starts at column 0 (a sample is then
one chunk), and a header is parsed with the layout learned from the one
before; samples of an unusual shape take the general path of the same
code (_regroup), not a second reader.

Folding (Reader.tallies, lj_merge's way in): a block whose every header
has a time (and holds no events) is cut at the headers at C level and its
samples counted by their text without the time, still bytes. Each
distinct text is parsed once, by the same code (_parse), and is folded
only when that gives one sample of the usual kind and counts nothing, so
that every sample of that text parses the same but for its time; any
other block is parsed sample by sample. Either way a Tally gives the
block's samples one by one (Tally.samples).
"""

import collections
import re
from itertools import repeat

BLOCK = 1 << 18          # bytes read per read(2)
MAX_LINE = 1 << 20       # longer lines are dropped (bounded memory)
MAX_CARRY = 1 << 20      # a chunk still open at a batch end, longer: cut by lines
MAX_NAME = 255           # longer comm (Linux: 15 bytes) or event names are damage

# One sample. chain: its callchain lines as printed ('\t'-led, srcline lines
# kept after their frame) joined by '\n', "" without a chain; regs: the
# register line or None; inline: `ip sym (dso)` printed on the header line
# (a sample recorded without -g), or None. Missing header fields are None;
# time is the printed text ("832.171767"), period an int.
Sample = collections.namedtuple(
    "Sample", "comm pid tid time period event chain regs inline")
# One side-band record. kind: "fork", "exit", "exec" (PERF_RECORD_COMM
# exec), "mmap", or a scheduler switch of the task pid/tid: "switch-in",
# "switch-out" (it blocked) or "switch-preempt" (switched out runnable);
# pid/tid: the task it is about (the child of a fork); ppid/ptid: the
# parent of a fork; path: the file of an mmap.
Event = collections.namedtuple("Event", "kind time pid tid ppid ptid path")

_new = tuple.__new__

# Header fields a Reader notices (Stats.fields) and what their absence costs
# the folded stacks (lj_merge prints it once).
FIELDS = ("comm", "pid", "tid", "time", "period", "event", "sym", "dso", "uregs")


class Stats:
    """What a Reader saw: malformed lines skipped, over-long lines dropped,
    a last line without its newline, and which fields the samples have."""
    __slots__ = ("lines", "samples", "malformed", "huge", "truncated", "fields")

    def __init__(self):
        self.lines = 0            # non-empty batches read (0: empty input)
        self.samples = 0
        self.malformed = 0
        self.huge = 0
        self.truncated = 0
        self.fields = None        # set of FIELDS seen in the first sample

    def skipped(self):
        return self.malformed + self.huge + self.truncated


# Reading ---------------------------------------------------------------------

def read_blocks(f, stats, block=BLOCK, max_line=MAX_LINE):
    """Yields batches of complete lines read from the binary file F, each
    batch a tuple of bytes-like parts (valid until the next batch is asked
    for) whose concatenation is the lines joined by '\\n', no newline at
    the end: the caller joins them once. Decoding is the caller's, as
    UTF-8 with U+FFFD for invalid bytes. Memory stays bounded by BLOCK +
    MAX_LINE: an over-long line is dropped and counted in STATS.huge; a
    last line without its newline is counted in STATS.truncated, not
    yielded."""
    carry = b""               # the last line read, not complete yet
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
        k = blk.rfind(b"\n")
        if k < 0:
            carry += blk
            if len(carry) > max_line:
                stats.huge += 1
                carry = b""
                skipping = True
            continue
        head = carry                      # the lines: head + blk[:k]
        j = len(head) + k
        carry = blk[k + 1:]
        if len(carry) > max_line:
            stats.huge += 1
            carry = b""
            skipping = True
        if j > max_line:          # may hold an over-long line (counted in bytes)
            lines = (head + blk[:k]).split(b"\n")
            head = None
            n = len(lines)
            lines = [ln for ln in lines if len(ln) <= max_line]
            stats.huge += n - len(lines)
            if not lines:
                continue
            text, lines = b"\n".join(lines), None    # one copy alive (bounded memory)
            yield (text,)
            continue
        yield head, memoryview(blk)[:k]   # not copied
    if carry and carry.strip():
        stats.truncated += 1


# Header lines ----------------------------------------------------------------

class Header:
    """One parsed sample header. Missing fields are None. LAYOUT (or None)
    lets Reader parse the next headers of the same output by position:
    (tokens needed, then the pid, time, period and event token indexes
    counted from the end, 0 when absent)."""
    __slots__ = ("comm", "pid", "tid", "time", "period", "event", "rest", "layout")

    def __init__(self):
        self.comm = self.pid = self.tid = self.time = None
        self.period = self.event = self.rest = self.layout = None


def is_num(tok):
    """A decimal number as perf prints it: ASCII digits, at most 20 (a
    u64). Other digits (str.isdigit takes '²') and longer runs are not
    numbers: int() would fail on them or grow without bound."""
    return tok.isdigit() and len(tok) <= 20 and tok.isascii()


def is_time(tok):
    """'832.171767:' -- digits '.' digits ':'"""
    if len(tok) < 4 or tok[-1] != ":":
        return False
    a, dot, b = tok[:-1].partition(".")
    return dot == "." and is_num(a) and is_num(b)


def parse_pidtid(tok):
    """'123/456' -> (123, 456); '123' -> (None, 123): a lone number is the
    tid in perf's default output (with -F pid alone it is the pid; callers
    map a tid to its process); else None."""
    if is_num(tok):
        return (None, int(tok))
    a, sl, b = tok.partition("/")
    if sl and is_num(a) and is_num(b):
        return (int(a), int(b))
    return None


def _is_hex(tok):
    try:
        int(tok, 16)
        return True
    except ValueError:
        return False


def _is_cpu(tok):
    return len(tok) > 2 and tok[0] == "[" and tok[-1] == "]" and is_num(tok[1:-1])


def _find_pid(line, toks, start, ti):
    """Index of the pid/tid token (anchored by the time token TI when there
    is one, since comm may contain spaces and digits), or -1."""
    if ti >= 0:
        j = ti - 1
        if j >= start and _is_cpu(toks[j]):
            j -= 1
        return j if j >= start and parse_pidtid(toks[j]) is not None else -1
    for i in range(start, len(toks)):        # prefer pid/tid, then a number
        if "/" in toks[i] and parse_pidtid(toks[i]) is not None:
            return i
    for i in range(start, len(toks)):
        if is_num(toks[i]):
            if i > 0 and _padded_period(line, toks[i]):
                return -1                    # "comm    1001001 ": the period
            return i
    return -1


def _padded_period(line, tok):
    """Is TOK (a number after comm) printed as a period ("%10lu")? A lone
    pid or tid is printed "%5d": the padding before it tells them apart
    (periods of ten digits and more are read as a tid)."""
    i = line.find(tok)
    j = i
    while j > 0 and line[j - 1] == " ":
        j -= 1
    pad = i - j if j > 0 else i + 1   # the separator before it, or column 0
    return len(tok) < 10 and pad == 11 - len(tok)


def parse_header(line):
    """Parses a sample header line (the general, slower way). Returns a
    Header, or None when the line is not a header."""
    toks = line.split()
    n = len(toks)
    if n == 0:
        return None
    h = Header()
    ti = next((i for i in range(n) if is_time(toks[i])), -1)
    # Does the line start with comm? comm is printed first ("%16s" before an
    # inline ip, so maybe after spaces); without comm a header starts with a
    # pid or tid (ambiguous with a numeric comm: read as a tid), the time, or
    # the period (padded "%10lu": see _padded_period).
    first = toks[0]
    start = 0 if parse_pidtid(first) is not None or is_time(first) else 1
    if start == 0 and "/" not in first and (is_time(first) or _padded_period(line, first)):
        pi = -1                   # time or period first: no pid, no tid
    else:
        pi = _find_pid(line, toks, start, ti)
    if pi >= 0:
        h.pid, h.tid = parse_pidtid(toks[pi])
        if start == 1:
            h.comm = " ".join(toks[:pi])
        k = pi + 1
    elif ti >= 0:
        if start == 1:
            h.comm = " ".join(toks[:ti]) if ti > 0 else None
        k = ti
    else:
        k = 0
        if start == 1 and not (toks[0][-1] == ":" and n == 1):   # not an event alone
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
    if k < n and is_num(toks[k]) and (k + 1 == n or toks[k + 1][-1] == ":"
                                        or _is_hex(toks[k + 1])):
        h.period = int(toks[k])
        pe = k
        k += 1
    ev = -1                        # event: "cpu-clock:pppH:" "cycles:u:"
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
    if h.comm is None and h.pid is None and h.tid is None and h.time is None \
            and h.period is None and h.event is None:
        return None
    if len(h.comm or "") > MAX_NAME or len(h.event or "") > MAX_NAME:
        return None
    return h


def time_to_ns(s):
    """'832.171767' -> (832171767000, 1000): ns and the printed resolution."""
    a, _, b = s.partition(".")
    nd = len(b)
    if nd >= 9:
        return int(a) * 1000000000 + int(b[:9]), 1
    unit = 10 ** (9 - nd)
    return int(a) * 1000000000 + int(b or "0") * unit, unit


def time_end_ns(s):
    """Latest ns the printed time S can stand for (perf truncates), or None."""
    i = s.find(".")
    nd = len(s) - i - 1 if i >= 0 else 0
    try:
        v = int(s.replace(".", "", 1))
    except ValueError:
        return None
    if nd >= 9:
        return v // 10 ** (nd - 9)
    m = 10 ** (9 - nd)
    return v * m + m - 1


# Callchain and register lines ------------------------------------------------

def time_span(first, last):
    """(first, last) sample times as perf printed them, in seconds, or None
    when either is missing or not a time."""
    try:
        return float(first), float(last)
    except (TypeError, ValueError):
        return None


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


def chain(sample):
    """The sample's callchain, leaf first: ([(addr, sym, off, dso)],
    [srcline or None per frame]). Unparsable lines are left out (the
    Merger counts them); a sample without -g gives its inline ip."""
    frames, srclines = [], []
    for ln in (sample.chain.split("\n") if sample.chain else
               ["\t" + sample.inline] if sample.inline else ()):
        if ln[:1] == "\t":
            fr = split_frame(ln.strip())
            if fr is not None:
                frames.append(fr)
                srclines.append(None)
        elif frames and is_srcline(ln):
            srclines[-1] = ln.strip()
    return frames, srclines


class Decoded:
    """A Sample with its callchain split (chain()): what tools and tests
    read. FRAMES: (addr, sym, off, dso) leaf first; SRCLINES in step."""
    __slots__ = ("comm", "pid", "tid", "time", "period", "event", "regs",
                 "frames", "srclines")

    def __init__(self, s):
        self.comm, self.pid, self.tid, self.time = s.comm, s.pid, s.tid, s.time
        self.period, self.event, self.regs = s.period, s.event, s.regs
        self.frames, self.srclines = chain(s)


def parse_reg(line, reg):
    """Value of register REG ('R13') on a ' ABI:2 R13:0x... ' line, or None."""
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


def is_srcline(line):
    """'  file.c:10' (-F srcline), or '  [kernel.kallsyms][ffff...]': one
    word after two spaces (a header starting with spaces has several)."""
    s = line.strip()
    return line[:2] == "  " and bool(s) and " " not in s and not is_reg_line(line)


def is_reg_line(line):
    """' ABI:2    R13:0x...' (uregs) or iregs likewise."""
    s = line.lstrip()
    return s.startswith("ABI:") or (":0x" in s and s.split(":", 1)[0].isupper())


# Side-band lines -------------------------------------------------------------

def parse_event(line):
    """A PERF_RECORD_* line -> Event, or None for records nobody uses."""
    i = line.find("PERF_RECORD_")
    toks = line[:i].split()
    t = next((x[:-1] for x in toks if is_time(x)), None)
    rest = line[i + 12:]
    if rest.startswith(("FORK(", "EXIT(")):
        a, _, b = rest[5:].partition("):(")
        c = a.split(":")
        p = b.partition(")")[0].split(":")
        if len(c) == 2 and len(p) == 2 and all(is_num(x) for x in c + p):
            return _new(Event, ("fork" if rest[0] == "F" else "exit", t,
                                int(c[0]), int(c[1]), int(p[0]), int(p[1]), None))
    elif rest.startswith("COMM exec:"):
        pt = rest.rpartition(":")[2].strip()
        pp = parse_pidtid(pt)
        if pp is not None and pp[0] is not None:
            return _new(Event, ("exec", t, pp[0], pp[1], None, None, None))
    elif rest.startswith("MMAP"):
        j = rest.find("]: ")
        if j >= 0:
            # "r-xp /tmp/jit-123.dump" (MMAP2) or "x /path" (MMAP)
            path = rest[j + 3:].strip().partition(" ")[2]
            if path:
                return _new(Event, ("mmap", t, None, None, None, None, path))
    elif rest.startswith("SWITCH"):
        # "SWITCH OUT preempt", "SWITCH IN", "SWITCH_CPU_WIDE OUT  next pid/tid: ..."
        w = rest.split(None, 3)
        pt = next((parse_pidtid(x) for x in toks if "/" in x), None)
        if len(w) >= 2 and w[1] in ("IN", "OUT") and pt is not None:
            kind = "switch-in" if w[1] == "IN" else \
                "switch-preempt" if len(w) > 2 and w[2] == "preempt" else "switch-out"
            return _new(Event, (kind, t, pt[0], pt[1], None, None, None))
    return None


# The reader ------------------------------------------------------------------

# Cut before every line that starts at column 0 (header, side-band, blank).
_CHUNKS = re.compile(r"\n(?=[^\t ])").split
# Cut a block (bytes, after a '\n' put in front) at every sample header with
# a time, keeping the text before the time and the time: [before the first
# header, (header up to its time, time, the rest up to the next header)...].
_HEADS = re.compile(rb"\n([^\t \n][^\n]*? +)(\d+\.\d+): ").split
PROTO_BYTES = 32 << 20   # Reader's distinct-sample cache is emptied past this
# Folding is given up once this many samples were tried, if more than half
# of them had a text not seen before (periods that vary per sample, all
# stacks distinct): then each text costs its parse on top of the fold.
FOLD_TRIAL = 20000


class Tally:
    """The samples of one block read. Folded (PROTOS not None): every sample
    is of the usual kind; PROTOS the distinct ones as Sample-field tuples
    with time None, in first-seen order, NS how many times each came, TIMES
    each sample's time (bytes, input order). samples() gives the block one
    by one (a list as Reader.batches yields), folded or not."""
    __slots__ = ("protos", "ns", "times", "_keys", "_list", "_early")

    def __init__(self, samples, protos=None, ns=None, times=None, keys=None):
        self._list = samples
        self.protos, self.ns, self.times, self._keys = protos, ns, times, keys
        self._early = None

    def first(self):
        """The first sample's time as printed (str)."""
        return self.times[0].decode()

    def last(self):
        """The last sample's time as printed (str)."""
        return self.times[-1].decode()

    def earliest(self):
        """The earliest sample time as printed (str)."""
        if self._early is None:
            ts = self.times
            if len(set(map(len, ts))) == 1 and \
                    len(set(map(bytes.find, ts, repeat(b".")))) == 1:
                self._early = min(ts).decode()   # alike in shape: compare as text
            else:
                self._early = min(ts, key=float).decode()
        return self._early

    def samples(self):
        """The block's Samples and Events in input order (see Tally)."""
        if self._list is None:
            keys, pre, rest = self._keys
            by = dict(zip(keys, self.protos))
            self._list = [p[:3] + (t.decode(),) + p[4:]
                          for p, t in zip(map(by.__getitem__, zip(pre, rest)), self.times)]
        return self._list


class Reader:
    """Iterates over the Samples and Events of perf script text read from
    the binary file F. See the module comment for what is accepted."""

    def __init__(self, f):
        self.f = f
        self.stats = Stats()
        self.headers = False      # a sample header seen (no header-less format)
        self.layout = None        # of the last slow-parsed header
        self.pidtids = {}         # "pid/tid" token -> (pid, tid)
        self.protos = {}          # (header before its time, rest) -> sample without time
        self.protos_layout = None   # the layout they were parsed with
        self.protos_size = 0
        self.tried = self.fresh = 0   # samples folding saw, with a new text

    def __iter__(self):
        for batch in self.batches():
            for x in batch:
                yield x if type(x) is not tuple else _new(Sample, x)

    def batches(self):
        """Yields lists of Events and samples, one list per block read. A
        sample is a Sample or a plain tuple of Sample's fields."""
        for tb in self.tallies(False):
            yield tb.samples()

    def tallies(self, fold=True):
        """Yields a Tally per block read: lj_merge's way in. FOLD: fold
        the samples of a block when all are of the usual kind (the layout
        learned, headers with a time, no events), so that the work per
        sample is a few C-level operations over the block (_tally)."""
        st = self.stats
        carry = b""
        for parts in read_blocks(self.f, st):
            st.lines += 1
            # One copy: '\n' (so that every header follows one), the chunk
            # carried over, the lines.
            data = b"".join(((b"\n", carry, b"\n") if carry else (b"\n",)) + parts)
            tb = None
            if fold and self.layout is not None and \
                    (self.tried < FOLD_TRIAL or 2 * self.fresh < self.tried):
                tb = self._tally(data)
            if tb is not None:
                tb, carry = tb
            else:
                chunks = _CHUNKS(str(memoryview(data)[1:], "utf-8", "replace"))
                data = None
                c = chunks.pop()              # may go on in the next batch
                if len(c) > MAX_CARRY:
                    chunks.append(c)
                    c = ""
                carry = c.encode("utf-8")
                tb = Tally(self._parse(chunks))
            yield tb
        if carry:
            yield Tally(list(self._regroup(carry.decode("utf-8", "replace").split("\n"))))

    def _tally(self, data):
        """(folded Tally, the text that may go on in the next block) of the
        block DATA ('\\n' and the lines), or None when it holds anything but
        samples of the usual kind. A sample is folded by its text without
        its time: each distinct one is parsed once, by _parse, and taken
        only when that gives one sample of the usual kind with that time
        and counts nothing (then every sample of that text parses the same,
        time aside)."""
        parts = _HEADS(data)
        if parts[0] or len(parts) < 7:
            return None
        carry = parts[-3] + parts[-2] + b": " + parts[-1]
        if len(carry) > MAX_CARRY:
            return None
        pre, times, rest = parts[1:-3:3], parts[2:-3:3], parts[3:-3:3]
        tally = collections.Counter(zip(pre, rest))
        protos = self.protos
        if self.protos_layout is not self.layout or self.protos_size > PROTO_BYTES:
            protos.clear()
            self.protos_layout = self.layout
            self.protos_size = 0
        keys = list(tally)
        out = list(map(protos.get, keys))
        self.tried += len(times)
        if None in out:
            new = [i for i, p in enumerate(out) if p is None]
            self.fresh += len(new)
            when = dict(zip(zip(pre, rest), times))
            for i in new:
                k = keys[i]
                p = self._proto(k, when[k])
                if p is None:
                    return None
                protos[k] = out[i] = p
                self.protos_size += len(k[1]) + 200
        self.stats.samples += len(times)
        return Tally(None, out, list(tally.values()), times, (keys, pre, rest)), carry

    def _proto(self, key, time):
        """The sample of text KEY with time TIME, its time None, when it is
        of the usual kind (see _tally); else None, the Reader unchanged."""
        st = self.stats
        saved = (st.samples, st.malformed, st.fields, self.layout, self.headers)
        # As in the block: a header follows (cut off again).
        text = (key[0] + time + b": " + key[1] + b"\nX").decode("utf-8", "replace")
        chunks = _CHUNKS(text)
        chunks.pop()
        out = self._parse(chunks)
        ok = (len(out) == 1 and type(out[0]) is tuple and out[0][3] == time.decode()
              and (st.samples - 1, st.malformed, st.fields, self.layout, self.headers) == saved)
        st.samples, st.malformed, st.fields, self.layout, self.headers = saved
        return out[0][:3] + (None,) + out[0][4:] if ok else None

    def _parse(self, chunks):
        """The samples and events of CHUNKS (column-0 line each, with the
        indented lines after it), in order.

        The one Python function of ljperf over ~80 lines, on purpose: this is
        lj_merge's hot loop wherever blocks are not folded (every input line
        passes through it). Locals instead of attributes, no helper call per
        line and the header fast path inline are what keep it fast
        (bench/lj_merge.py); split into functions, each line would pay
        for the calls."""
        group = self._group
        pidtids = self.pidtids
        comm = event = None               # of the last sample
        lay = self.layout
        need = pi = ti = pe = evi = 0     # lay's fields, read only once it is set
        if lay is not None:
            need, pi, ti, pe, evi = lay
        n = 0                             # samples of the usual kind
        out = []
        put = out.append
        for ch in chunks:
            if not ch:
                continue              # a blank line
            i = ch.find("\n")
            head = ch if i < 0 else ch[:i]
            body = ""
            regs = None
            if i >= 0:
                body = ch[i + 1:]
                r = body.rfind("\n") + 1     # last line: registers?
                if body[r:r + 5] == " ABI:":
                    regs = body[r:]
                    body = body[:r - 1] if r else ""
            # The usual sample: a header of the layout learned by
            # parse_header() (comm and pid: the only layouts where the
            # lines inside a chunk are all callchain or srcline lines).
            # Tokens are counted from the end: comm may have spaces.
            if lay is not None and ch[0] not in "\t #" and \
                    "PERF_RECORD_" not in head:
                toks = head.split()
                nt = len(toks)
                if nt >= need:
                    t = e = period = None
                    if ti:
                        t = toks[ti]
                        if not is_time(t):    # digits only: float(t) later
                            nt = 0
                        t = t[:-1]
                    if evi:
                        e = toks[evi]
                        if e[-1] != ":" or (not ti and is_time(e)):
                            nt = 0
                        e = e[:-1]
                    if pe:
                        period = toks[pe]
                        if period.isdigit() and len(period) <= 20 and period.isascii():
                            period = int(period)          # is_num, inline
                        else:
                            nt = 0
                    pt = pidtids.get(toks[pi])
                    if pt is None:
                        pt = parse_pidtid(toks[pi])
                        if pt is None:
                            nt = 0
                        elif len(pidtids) < 100000:
                            pidtids[toks[pi]] = pt
                    if nt > need and any(is_time(x) for x in toks[1:nt - need + 1]):
                        nt = 0                # not comm with spaces: another layout
                    if nt:
                        c = toks[0] if nt == need else " ".join(toks[:nt - need + 1])
                        if c == comm:
                            c = comm          # one str object: its hash is kept
                        elif len(c) > MAX_NAME:
                            nt = 0            # damage: parse_header says so
                        else:
                            comm = c
                        if e == event:
                            e = event
                        elif e is not None and len(e) > MAX_NAME:
                            nt = 0
                        else:
                            event = e
                    if nt:
                        n += 1
                        put((c, pt[0], pt[1], t, period, e, body, regs, None))
                        continue
            if body[:1] == " " or "\n " in body:
                out.extend(self._regroup(ch.split("\n")))
                continue
            x = group(head, body, regs)
            lay = self.layout
            if lay is not None:
                need, pi, ti, pe, evi = lay
            if x is not None:
                put(x)
        self.stats.samples += n
        return out

    def _regroup(self, lines):
        """Chunks with lines starting with a space: srcline lines (after a
        callchain line), register lines, and headers that start with spaces
        (-F without comm and pid: time or period first)."""
        head, body, regs = None, [], None
        for ln in lines:
            c = ln[:1]
            if head is not None and (c == "\t" or (body and body[-1][:1] in ("\t", " ")
                                                   and is_srcline(ln))):
                if regs is None:
                    body.append(ln)       # callchain or srcline
                    continue
            elif head is not None and c == " " and is_reg_line(ln) and regs is None:
                regs = ln
                continue
            if head is not None:
                x = self._group(head, "\n".join(body), regs)
                if x is not None:
                    yield x
            head, body, regs = ln, [], None
        if head is not None:
            x = self._group(head, "\n".join(body), regs)
            if x is not None:
                yield x

    def _group(self, head, chain, regs):
        """One column-0 line HEAD with the indented lines after it: a sample,
        an event, or nothing (blank line, comment, malformed: counted)."""
        c = head[:1]
        if c == "\t":                     # chain lines with no header above
            self.stats.malformed += chain.count("\n") + 2 if chain else 1
            return None
        if not head.strip():
            if not chain:
                return None               # a blank line
            if self.headers:              # a chain whose header was lost
                self.stats.malformed += chain.count("\n") + 1
                return None
            return self._sample(None, None, None, None, None, None, chain, regs, None)
        if c == "#":
            return None                   # perf script --header comments
        if "PERF_RECORD_" in head:
            if chain:
                self.stats.malformed += chain.count("\n") + 1
            return parse_event(head)
        h = self._header(head)
        if h is None:
            self.stats.malformed += 1 + (chain.count("\n") + 1 if chain else 0)
            return None
        self.headers = True
        comm, pid, tid, time, period, event, inline = h
        return self._sample(comm, pid, tid, time, period, event, chain, regs, inline)

    def _header(self, line):
        """(comm, pid, tid, time, period, event, inline) or None."""
        hh = parse_header(line)
        if hh is None:
            return None
        if hh.layout is not None:
            self.layout = hh.layout
        return (hh.comm, hh.pid, hh.tid, hh.time, hh.period, hh.event,
                " ".join(hh.rest) if hh.rest else None)

    def _sample(self, *fields):
        s = _new(Sample, fields)
        st = self.stats
        st.samples += 1
        if st.fields is None:
            st.fields = _fields_of(s)
        return s


def _fields_of(s):
    """Which FIELDS the first sample shows (a header field or the chain)."""
    out = set(f for f in FIELDS[:6] if getattr(s, f) is not None)
    first = s.chain.partition("\n")[0].strip() if s.chain else (s.inline or "")
    fr = split_frame(first) if first else None
    if fr is None or fr[1] is not None:
        out.add("sym")
    if fr is None or fr[3] is not None:
        out.add("dso")
    if s.regs is not None:
        out.add("uregs")
    return out


def iter_samples(lines):
    """Decoded samples of perf script text given as an iterable of str
    lines (events are left out): the tests' and tools' way in."""
    for x in Reader(_LinesFile(lines)):
        if type(x) is Sample:
            yield Decoded(x)


def read_samples(f):
    """Decoded samples of perf script text read from the binary file F."""
    for x in Reader(f):
        if type(x) is Sample:
            yield Decoded(x)


class _LinesFile:
    """A binary file over str lines, for Reader."""

    def __init__(self, lines):
        self.it = iter(lines)
        self.done = False

    def read(self, n):
        if self.done:
            return b""
        buf = []
        size = 0
        for ln in self.it:
            b = (ln.rstrip("\n") + "\n").encode("utf-8", "replace")
            buf.append(b)
            size += len(b)
            if size >= n:
                return b"".join(buf)
        self.done = True
        return b"".join(buf)
