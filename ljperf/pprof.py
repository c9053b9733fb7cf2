"""pprof: write merged ljperf stacks as a gzipped pprof profile.proto.

Contract. A writer (lj_merge, or the converter below) hands over stacks that
are already merged: one call of Profile.add(frames, count, period_ns, labels)
per distinct stack (calling it again with the same stack and labels adds to
it). Frames are given root first, as in folded output, WITHOUT the root
(comm) frame: the process goes into the labels. Memory grows with the
distinct stacks, locations and strings, never with the input. write() then
emits the whole profile once (protobuf needs every table before the end).

Wire format by hand, not python3-protobuf: Debian's package would need the
generated profile_pb2 module (or protoc at build time) plus its C extension
for speed, for a message that uses four wire constructs (varint, packed
varints, length-delimited, string). Field numbers are those of pprof's
proto/profile.proto (github.com/google/pprof), written next to each encoder.

Mapping of ljperf frames (docs/ljperf.md, "pprof"):
  Function.name        the folded name without the --lines current line
                       (NAME@CHUNK:LINE; JIT traces keep their `_[j]` suffix,
                       so a trace and the interpreted function are two
                       functions, as in the flame graph)
  Function.system_name NAME (or CHUNK:LINE for an anonymous function); C: the
                       symbol
  Function.filename    the chunk's path (Lua); the source file if known (C)
  Function.start_line  the line the Lua function is defined at
  Line.line            the frame's current line (call site for a caller,
                       the running line for the leaf; lj_merge always gives
                       it), 0 where it is unknown (pprof's convention: a
                       caller before its first call, `?` in lj_merge
                       --lines; folded input without --lines; C frames)
  Location.line[]      inlined frames first, the frame that inlined them last
  Mapping              one per DSO of C/kernel frames (path, build id);
                       memory_start/limit span the sampled addresses in it
  Sample.value         [samples/count, cpu/nanoseconds]
  Sample.label         pid, tid (numbers), comm, and `kind`: what the leaf
                       frame is (lua, trace, builtin, vm, c, kernel, unknown)

Folded stacks as pprof (from_folded; its command line: ljperf.pprof_cli,
perf-script/pprof.py --from-folded): root frames comm, comm-PID or
comm-PID/TID become labels; Lua frames are parsed from lj_merge's naming
(frames.LUA_LABEL).
"""

import gzip
import os
import re
from typing import NamedTuple

from ljperf import folded
from ljperf.frames import LUA_LABEL


class Frame(NamedTuple):
    """One stack frame as a writer knows it. Only NAME is required; give the
    rest when known (0 / "" = unknown). Hashable: equal frames share one
    Location."""
    name: str                 # as in the folded output, without --lines' line
    kind: str = "c"           # one of frames.KINDS but root
    file: str = ""            # Lua: the chunk's path; C: source file
    line: int = 0             # current line (Lua call site / running line),
                              # 0 unknown
    start_line: int = 0       # Lua: definition line
    dso: str = ""             # C/kernel: the object's path (perf's dso)
    address: int = 0          # C/kernel: the sampled address in it
    build_id: str = ""        # hex, as perf prints it
    system_name: str = ""     # Lua: NAME or CHUNK:LINE; C: the raw symbol
    inlined: tuple = ()       # Frames inlined here, in call order (outermost
                              # first); their Lines precede this frame's


# -- protobuf wire format ------------------------------------------------------

def _varint(out, v):
    """Appends V (int64/uint64; negatives as two's complement) as a varint."""
    if 0 <= v < 0x80:                  # most ids, lines, tags: one byte
        out.append(v)
        return
    if v < 0:
        v += 1 << 64
    while v > 0x7f:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)


def _int(out, field, v):
    """Varint field (wire type 0); zero is the default and is left out."""
    if v:
        out.append(field << 3)
        _varint(out, v)


def _bytes(out, field, b):
    """Length-delimited field (wire type 2): strings, messages, packed."""
    _varint(out, field << 3 | 2)
    _varint(out, len(b))
    out += b


def _packed(out, field, values):
    buf = bytearray()
    for v in values:
        _varint(buf, v)
    _bytes(out, field, buf)


def _text(s):
    """Valid UTF-8 of any name: bytes and lone surrogates (from
    surrogateescape-decoded input) become U+FFFD."""
    if isinstance(s, (bytes, bytearray)):
        return bytes(s).decode("utf-8", "replace").encode("utf-8")
    return str(s).encode("utf-8", "replace")


# -- The profile ---------------------------------------------------------------

# A CPU profile's sample types (the default), and a memory profile's.
CPU_TYPES = (("samples", "count"), ("cpu", "nanoseconds"))
MEM_TYPES = (("alloc_objects", "count"), ("alloc_space", "bytes"),
             ("inuse_objects", "count"), ("inuse_space", "bytes"))


class Profile:
    """Accumulates merged stacks; write() emits profile.proto, gzipped.

    event: the perf event; period_ns: nanoseconds between samples (perf's
    period for a time event), duration_ns / time_ns: the recording's length
    and start (ns since the epoch).

    Other profiles than CPU time: SAMPLE_TYPES [(type, unit)], each sample's
    values a vector in that order (add(..., values=)); DEFAULT_TYPE the type
    pprof shows first; PERIOD_TYPE (type, unit) and PERIOD (default: cpu
    nanoseconds and PERIOD_NS). The defaults write exactly what a CPU
    profile always had."""

    def __init__(self, period_ns=0, duration_ns=0, time_ns=0, event="",
                 sample_types=CPU_TYPES, default_type="", period_type=("cpu", "nanoseconds"),
                 period=None):
        self.strings = {b"": 0}
        self.functions = {}        # (name, system, file, start) -> id
        self.mappings = {}         # (dso, build_id) -> [id, lo, hi]
        self.locations = {}        # Frame -> id
        self.loc_bytes = []        # encoded Location messages
        self.loc_ids = [b""]       # location id -> its varint (samples' ids)
        self.samples = {}          # (location ids leaf first, labels) -> [count, ns]
        self.period_ns = int(period_ns or 0)
        self.duration_ns = int(duration_ns or 0)
        self.time_ns = int(time_ns or 0)
        self.event = event or ""
        self.sample_types = tuple(sample_types)
        self.default_type = default_type or ""
        self.period_type = tuple(period_type)
        self.period = self.period_ns if period is None else int(period)

    def _str(self, s):
        b = _text(s)
        i = self.strings.get(b)
        if i is None:
            i = self.strings[b] = len(self.strings)
        return i

    def _function(self, f):
        key = (f.name, f.system_name or f.name, f.file, int(f.start_line or 0))
        i = self.functions.get(key)
        if i is None:
            i = self.functions[key] = len(self.functions) + 1
        return i

    def _line(self, f):
        buf = bytearray()
        _int(buf, 1, self._function(f))            # Line.function_id
        _int(buf, 2, int(f.line or 0))               # Line.line (0: unknown)
        return buf

    def _location(self, f):
        i = self.locations.get(f)
        if i is not None:
            return i
        i = self.locations[f] = len(self.locations) + 1
        buf = bytearray()
        _int(buf, 1, i)                              # Location.id
        if f.dso:
            m = self.mappings.get((f.dso, f.build_id))
            if m is None:
                m = self.mappings[(f.dso, f.build_id)] = [len(self.mappings) + 1,
                                                          f.address, f.address]
            m[1] = min(m[1], f.address)
            m[2] = max(m[2], f.address)
            _int(buf, 2, m[0])                       # Location.mapping_id
        _int(buf, 3, f.address)                      # Location.address
        for g in reversed(f.inlined):                # innermost first
            _bytes(buf, 4, self._line(g))            # Location.line
        _bytes(buf, 4, self._line(f))                # the caller last
        self.loc_bytes.append(bytes(buf))
        vi = bytearray()
        _varint(vi, i)
        self.loc_ids.append(bytes(vi))
        return i

    def add(self, frames, count, period_ns=None, labels=None, values=None):
        """One merged stack: FRAMES root first (Frame or plain names), COUNT
        samples, PERIOD_NS their total nanoseconds (default COUNT times the
        profile's period), LABELS {key: str or int} (pid, tid, comm...).
        VALUES: the stack's values, one per sample type, instead of COUNT
        and PERIOD_NS (other profiles than CPU time; rounded)."""
        frames = [f if isinstance(f, Frame) else Frame(f) for f in frames]
        get = self.locations.get
        locs = tuple(get(f) or self._location(f) for f in reversed(frames))
        lab = dict(labels or {})
        if frames and "kind" not in lab:
            lab["kind"] = frames[-1].kind
        key = (locs, tuple(sorted((str(k), v) for k, v in lab.items())))
        if values is None:
            ns = count * self.period_ns if period_ns is None else period_ns
            values = (count, ns)
        v = self.samples.get(key)
        if v is None:
            self.samples[key] = [int(round(x)) for x in values]
        else:
            for i, x in enumerate(values):
                v[i] += int(round(x))

    def _labels(self, labels):
        out = bytearray()
        for k, v in labels:
            lb = bytearray()
            _int(lb, 1, self._str(k))                # Label.key
            if isinstance(v, int):
                _int(lb, 3, v)                       # Label.num
            else:
                _int(lb, 2, self._str(v))            # Label.str
            _bytes(out, 3, lb)                       # Sample.label
        return bytes(out)

    def _value_type(self, typ, unit):
        buf = bytearray()
        _int(buf, 1, self._str(typ))                 # ValueType.type
        _int(buf, 2, self._str(unit))                # ValueType.unit
        return buf

    def encode(self):
        """The profile.proto message (not gzipped)."""
        out = bytearray()
        for t, u in self.sample_types:
            _bytes(out, 1, self._value_type(t, u))   # Profile.sample_type
        ids = self.loc_ids
        label_bytes = {}
        for (locs, labels), values in self.samples.items():
            s = bytearray()
            _bytes(s, 1, b"".join([ids[i] for i in locs]))   # Sample.location_id
            _packed(s, 2, values)                    # Sample.value
            lb = label_bytes.get(labels)
            if lb is None:
                lb = label_bytes[labels] = self._labels(labels)
            s += lb
            _bytes(out, 2, s)                        # Profile.sample
        for (dso, build_id), (i, lo, hi) in self.mappings.items():
            m = bytearray()
            _int(m, 1, i)                            # Mapping.id
            _int(m, 2, lo)                           # Mapping.memory_start
            _int(m, 3, min(hi + 1, (1 << 64) - 1))   # Mapping.memory_limit
            _int(m, 5, self._str(dso))               # Mapping.filename
            _int(m, 6, self._str(build_id))          # Mapping.build_id
            _int(m, 7, 1)                            # has_functions: symbolized
            _bytes(out, 3, m)                        # Profile.mapping
        for loc in self.loc_bytes:
            _bytes(out, 4, loc)                      # Profile.location
        funcs = list(self.functions.items())
        for (name, system, file, start), i in funcs:
            fn = bytearray()
            _int(fn, 1, i)                           # Function.id
            _int(fn, 2, self._str(name))             # Function.name
            _int(fn, 3, self._str(system))           # Function.system_name
            _int(fn, 4, self._str(file))             # Function.filename
            _int(fn, 5, start)                       # Function.start_line
            _bytes(out, 5, fn)                       # Profile.function
        _int(out, 10, self.duration_ns)              # Profile.duration_nanos
        _int(out, 9, self.time_ns)                   # Profile.time_nanos
        _bytes(out, 11, self._value_type(*self.period_type))  # Profile.period_type
        _int(out, 12, self.period)                   # Profile.period
        if self.event:
            _packed(out, 13, [self._str("perf event " + self.event)])  # comment
        if self.default_type:
            _int(out, 14, self._str(self.default_type))   # default_sample_type
        # last: every string above is interned by now
        for s in self.strings:
            _bytes(out, 6, s)                        # Profile.string_table
        return bytes(out)

    def write(self, out):
        """Gzipped profile to OUT (a path or a binary file object)."""
        data = gzip.compress(self.encode(), compresslevel=6, mtime=0)   # zlib's default
        if hasattr(out, "write"):
            out.write(data)
            return
        tmp = out + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, out)


def write_profile(out, stacks, **meta):
    """OUT <- STACKS, a sequence of (frames, count, period_ns, labels); META:
    Profile's keyword arguments."""
    p = Profile(**meta)
    for frames, count, period_ns, labels in stacks:
        p.add(frames, count, period_ns, labels)
    p.write(out)


# -- Folded stacks -> frames ---------------------------------------------------

_ROOT = re.compile(r"^(.*?)-([0-9]{1,20})(?:/([0-9]{1,20}))?$")


def parse_root(name):
    """Labels of a folded root frame: comm, comm-PID or comm-PID/TID."""
    m = _ROOT.match(name)
    if not m:
        return {"comm": name}
    lab = {"comm": m.group(1), "pid": int(m.group(2))}
    if m.group(3):
        lab["tid"] = int(m.group(3))
    return lab


def parse_frame(name, kinds=None):
    """A Frame from one folded frame name (lj_merge's naming, see
    lj_merge --help, "Frames"); KINDS: {name: set of kinds} from lj_merge
    --kinds (folded.load_kinds; of several, the first in the file's order)."""
    base, kind = name, None
    if base.endswith("_[j]"):
        base, kind = base[:-4], "trace"
    elif base.endswith("_[k]"):
        base, kind = base[:-4], "kernel"
    m = LUA_LABEL.match(base)
    if m:
        fn, chunk, start, cur = m.groups()
        label = "%s@%s:%s" % (fn, chunk, start) if fn else "%s:%s" % (chunk, start)
        return Frame(label + ("_[j]" if kind == "trace" else ""),
                     kind=kind or "lua", file=chunk,
                     line=int(cur) if cur and cur != "?" else 0,
                     start_line=int(start), system_name=fn or label)
    if kind is None:
        said = (kinds or {}).get(name)
        kind = min(said) if said else (
            "unknown" if name in ("[unknown]", "[no call chain]") else "c")
    return Frame(name, kind=kind)


def from_folded(lines, profile, weights="count", kinds=None, skipped=None):
    """Adds folded stacks (root;...;leaf WEIGHT lines) to PROFILE. WEIGHTS
    "count": the weight is a number of samples; "ns": nanoseconds (ljperf's
    profile.folded for cpu-clock), counted as round(ns / period) samples.
    Lines are read by folded.parse (a decimal weight is rounded; SKIPPED:
    see there). Returns the number of stacks added."""
    cache = {}
    per = profile.period_ns
    added = 0
    for names, w in folded.parse(lines, skipped):
        added += 1
        frames = []
        for n in names[1:]:
            f = cache.get(n)
            if f is None:
                f = cache[n] = parse_frame(n, kinds)
            frames.append(f)
        if weights == "ns":
            profile.add(frames, max(1, round(w / per)) if per else w, w, parse_root(names[0]))
        else:
            profile.add(frames, w, None, parse_root(names[0]))
    return added
