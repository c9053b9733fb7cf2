#!/usr/bin/env python3
"""Every reader of ljperf's inputs on mutated real inputs (standard library
only): no input may end a reader in an internal error.

usage: fuzz.py [-n N | --long] [--seed S] [--only READER] [-v]
       fuzz.py --case S:I [--save NAME [--found TEXT]]   replay one (and keep it)
       fuzz.py --regress                    the kept cases (regress/)

The inputs are real: tests/lj_merge/fixtures (perf script texts, jitdumps,
perf maps of the patched VM under perf) and fixtures/ here (a recording
with its jit-PID.dump.inline, a --mem and an --off-cpu text, the folded and
kinds files `ljperf record` made of them, two heap snapshots of one run;
fixtures/README). Case I of seed
S (default seed 1) draws, from random.Random("S:I") alone, a reader, one
of its inputs, one of its option sets and one mutation:

  flip      1-4 bytes XORed near one place
  insert    random bytes, a NUL, invalid UTF-8 or a real line of the file
  nul       a NUL byte inside a token of a line
  cut       a byte range removed          truncate  the end cut off
  dup       lines duplicated in place     reorder   two line runs swapped
  drop      a token, a frame's symbol or DSO, a register line removed
  hugeline  a line of 64 KiB - 2 MiB      hugecount a number made huge
  size      (binary files) a record's size, count or code size corrupted
  jsonnum   (heap snapshots) a number inside a line made another JSON value

and runs the reader the way its command runs it (inputs() below):
lj_merge (merge_cli.main, every option), the jitdump and .inline readers
(under lj_merge, `ljperf record`'s pruning and their command lines), the
perf map (lj_merge with no jitdump beside it), folded, kinds and
ljperf.json files (`ljperf diff`, `pprof.py --from-folded`), heap
snapshots (`ljperf heap FILE`, then `ljperf heap diff` with the file as
base, target or final); every 250th
case also through the command's script in a child process. A failure is
an exception out of the command's main (or one lj_merge caught for a
sample: "dropped N samples"), a traceback or "internal error" on stderr,
an exit status other than 0 (output made) or 1 (one line,
nothing usable), exit 0 without the output file, a case running over
30 s, or a peak resident size over 10x the bytes the reader read plus
2 MiB (a run's fixed cost: buffers, the page; at most 0.1 MiB on the
unmutated inputs). For lj_merge's plain folded runs of
tests/lj_merge/fixtures, every sample the mutation left whole must also be
folded (at least its weight under its own stack).

Each failure prints one line: `FAIL S:I [(--only READER)] READER INPUT
[OPTIONS] MUTATION: what`; `--case S:I` (with the same --only) replays
it, `--save NAME` stores the mutated file in regress/NAME/ with case.json
(input, options, mutation, what it found): the ctest fuzz.regress runs
every stored case. The last line is the count: `N mutations (M through
the command line) in T s: F failures`. Exit status 1 on any failure."""

import argparse
import contextlib
import gzip
import io
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LJM = os.path.join(ROOT, "tests", "lj_merge", "fixtures")
FIX = os.path.join(HERE, "fixtures")
REGRESS = os.path.join(HERE, "regress")
if not os.environ.get("LJPERF_SHARE"):          # ljperf diff's page assets
    os.environ["LJPERF_SHARE"] = os.path.join(
        os.environ.get("LJPERF_BUILD") or os.path.join(ROOT, "build"), "share", "ljperf")

from ljperf import cli, finish, inline, jitdump, merge_cli, pprof_cli  # noqa: E402
from ljperf.messages import Fail  # noqa: E402

TIMEOUT = 30                    # s per case
MEM_RATIO = 10                  # peak Python memory per byte read ...
MEM_FIXED = 2 << 20             # ... plus this (unmutated inputs: at most 0.7 MiB)
CI_CASES = 2000
LONG_CASES = 100000
BIG = 64 << 10                  # regress/ keeps larger mutated files gzipped
CLI_EVERY = 250                 # every Nth case also through the command line


# -- Inputs: (name, the file mutated, its kind, the reader, its setup) ----------
#
# A reader's setup copies what it reads into a scratch directory; the
# mutated file replaces one of them. KIND: "text", "json" (numbers inside
# lines replaced too) or "jitdump"/"inline" (binary: record sizes are
# corrupted too).

class Input:
    def __init__(self, name, reader, path, kind, args=(), dump=None, opts=None, alone=False):
        self.name = name                # as printed and stored by --save
        self.reader = reader
        self.path = path                # the real file mutated
        self.kind = kind
        self.args = list(args)          # lj_merge arguments always given
        self.dump = dump                # the jitdump directory, copied (None: none)
        self.opts = opts                # option sets (lists), one drawn per case
        self.alone = alone              # whole-sample check on plain runs


def _ljm(rel):
    return os.path.join(LJM, rel)


def _fix(rel):
    return os.path.join(FIX, rel)


CPU_OPTS = [[], ["--pid"], ["--tid"], ["--tid", "--jit-tag"], ["--lines"],
            ["--lines", "--jit-tag", "--keep-vm"], ["--event", "all"],
            ["--format", "speedscope"], ["--format", "pprof"], ["--KINDS", "--PPROF"],
            ["--pid", "--lines", "--format", "pprof", "--KINDS"]]
MEM_OPTS = [["--mem"], ["--mem", "--INUSE", "--mem-kinds", "--SUMMARY", "--KINDS", "--PPROF"],
            ["--mem", "--inuse-at", "now", "--format", "pprof", "--tid"],
            ["--mem", "--jit-tag", "--lines", "--pid"]]
OFF_OPTS = [["--off-cpu"], ["--off-cpu", "--WALL", "--WALLPPROF", "--KINDS", "--tid"],
            ["--off-cpu", "--format", "speedscope", "--jit-tag", "--pid"],
            ["--off-cpu", "--format", "pprof", "--lines"]]
# ljperf heap FILE always, then one diff with the mutated file in each role
# (the other side the unmutated snapshot of the same run)
HEAP_OPTS = [["diff", "base", "target"], ["diff", "target", "base"],
             ["diff", "base", "target", "target"], ["diff", "base", "target", "base"]]
DIFF_OPTS = [["diff", "html"], ["diff", "folded"], ["diff", "folded", "--absolute"],
             ["pprof"], ["pprof", "--weights", "ns"]]


def inputs():
    out = []
    # perf script text: the lj_merge fixtures with the arguments their cases
    # use (whole-sample check), and this suite's recording
    for rel, args in (
            ("cstack.txt", "--jitdump {f}/nodump"),
            ("cstack-min.txt", "--jitdump {f}/nodump"),
            ("fakevm-rawF.txt", "--lines --jit-tag --tid --jitdump {f}/fakevm"),
            ("fakevm-injectF.txt", "--lines --jit-tag --tid --jitdump {f}/fakevm"),
            ("fakevm-reused.txt", "--jitdump {f}/fakevm"),
            ("real/jit/raw.txt", "--jitdump {f}/real/jit"),
            ("real/ffi/rawF.txt", "--lines --jitdump {f}/real/ffi"),
            ("real/coro/injectF.txt", "--jitdump {f}/real/coro"),
            ("real/corojit/rawF.txt", "--jitdump {f}/real/corojit"),
            ("real/host/injectF.txt", "--jitdump {f}/real/host"),
            ("real/fork/rawF.txt", "--pid --jitdump {f}/real/fork"),
            ("real/interp/raw.txt", "--lines --jitdump {f}/real/interp"),
            ("nocallchain.txt", "--pid --jitdump {f}/nodump"),
            ("dropped.txt", "--jitdump {f}/nodump"),
            ("sys.txt", "--jitdump {f}/nodump"),
            ("arm64/interpF.txt", "--jitdump {f}/nodump")):
        a = args.replace("{f}", LJM).split()
        out.append(Input("lj_merge/" + rel, "perf-script", _ljm(rel), "text", a[:-2],
                         dump=a[-1], opts=CPU_OPTS, alone=True))
    # inject texts without --jitdump: the directories the text names are
    # searched (where a NUL in a DSO path reached os.listdir)
    for rel in ("real/jit/inject.txt", "fakevm-inject.txt", "real/fork/inject.txt"):
        out.append(Input("lj_merge/" + rel, "perf-script", _ljm(rel), "text", opts=CPU_OPTS))
    out += [
        Input("fuzz/jit/cpu.txt", "perf-script", _fix("jit/cpu.txt"), "text",
              dump=_fix("jit"), opts=CPU_OPTS),
        Input("fuzz/jit/cpu-inject.txt", "perf-script", _fix("jit/cpu-inject.txt"), "text",
              opts=CPU_OPTS),
        Input("fuzz/jit/mem.txt", "perf-script", _fix("jit/mem.txt"), "text",
              dump=_fix("jit"), opts=MEM_OPTS),
        Input("fuzz/wall/offcpu.txt", "perf-script", _fix("wall/offcpu.txt"), "text",
              dump=_fix("wall"), opts=OFF_OPTS),
    ]
    # the jitdump, its .inline file and the perf map, under lj_merge with
    # the text of the same run (the map: with no jitdump beside it)
    for d, txt in (("jit", "cpu.txt"), ("wall", "offcpu.txt")):
        pid = next(n[4:-5] for n in os.listdir(_fix(d)) if n.endswith(".dump"))
        opts = [["--lines", "--jit-tag"], ["--tid", "--format", "pprof"]] \
            if d == "jit" else [["--off-cpu", "--jit-tag", "--lines"]]
        for name, kind, reader in (("jit-%s.dump" % pid, "jitdump", "jitdump"),
                                   ("jit-%s.dump.inline" % pid, "inline", "inline"),
                                   ("perf-%s.map" % pid, "text", "perf-map")):
            out.append(Input("fuzz/%s/%s" % (d, name), reader, _fix(d + "/" + name), kind,
                             ["--TEXT", _fix(d + "/" + txt)], dump=_fix(d), opts=opts))
    for rel in ("real/jit/jit-16720.dump", "real/fork/jit-17742.dump", "fakevm/jit-23403.dump"):
        txt = {"real/jit": "real/jit/raw.txt", "real/fork": "real/fork/rawF.txt",
               "fakevm": "fakevm-rawF.txt"}[os.path.dirname(rel)]
        out.append(Input("lj_merge/" + rel, "jitdump", _ljm(rel), "jitdump",
                         ["--TEXT", _ljm(txt)], dump=_ljm(os.path.dirname(rel)),
                         opts=[["--pid", "--lines"], []]))
    out.append(Input("lj_merge/real/interp/perf-16653.map", "perf-map",
                     _ljm("real/interp/perf-16653.map"), "text",
                     ["--TEXT", _ljm("real/interp/raw.txt")], dump=_ljm("real/interp"),
                     opts=[[], ["--lines"]]))
    # folded stacks, kinds and ljperf.json: ljperf diff and pprof.py
    for d, folded, kinds in (("jit", "profile.folded", "profile.kinds"),
                             ("jit", "alloc.folded", "mem.kinds"),
                             ("wall", "offcpu.folded", "offcpu.kinds"),
                             ("wall", "wall.folded", "offcpu.kinds")):
        for name, reader in ((folded, "folded"), (kinds, "kinds"), ("ljperf.json", "json")):
            if reader == "json" and folded != "profile.folded":
                continue
            out.append(Input("fuzz/%s/%s" % (d, name), reader, _fix(d + "/" + name), "text",
                             ["--PAIR", folded, kinds], dump=_fix(d), opts=DIFF_OPTS))
    # heap snapshots (jit.perf.heapsnapshot): ljperf heap and heap diff
    for name in ("base", "target"):
        out.append(Input("fuzz/heap/%s.heapsnapshot" % name, "heapsnap",
                         _fix("heap/%s.heapsnapshot" % name), "json", dump=_fix("heap"),
                         opts=HEAP_OPTS))
    return out


# -- Mutations: each (rnd, data, kind) -> (data, description, damaged [a, b)) -----

JUNK = (b"\0", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80", b"\r",
        b"\t", b" ", b";", b"(", b")", b"\n", b"0x", b"-1", b":")


def m_flip(rnd, data, kind):
    out = bytearray(data)
    i = rnd.randrange(len(data))
    lo = hi = i
    for _ in range(rnd.randint(1, 4)):
        j = min(len(data) - 1, max(0, i + rnd.randint(-40, 40)))
        out[j] ^= rnd.choice((1, 0x20, 0x0a ^ 0x09, 0xff, 0x80, rnd.randrange(1, 256)))
        lo, hi = min(lo, j), max(hi, j + 1)
    return bytes(out), "flip %d..%d" % (lo, hi), (lo, hi)


def m_insert(rnd, data, kind):
    i = rnd.randrange(len(data) + 1)
    k = rnd.randrange(4)
    if k == 0:
        ins = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 60)))
    elif k == 1:
        ins = b"".join(rnd.choice(JUNK) for _ in range(rnd.randint(1, 8)))
    elif k == 2:
        ins = bytes(rnd.choice(b"\t\n 0123456789abcdef:/()[]+x.;") for _ in
                    range(rnd.randint(1, 80)))
    else:
        ins = rnd.choice(data.split(b"\n")) + b"\n"
    return data[:i] + ins + data[i:], "insert %r at %d" % (ins[:40], i), (i, i)


def _tokens(data):
    """(start, end) of every run of non-blank bytes."""
    out, start = [], None
    for i, c in enumerate(data):
        if c in b" \t\n":
            if start is not None:
                out.append((start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        out.append((start, len(data)))
    return out


def m_nul(rnd, data, kind):
    toks = _tokens(data) if kind in ("text", "json") else [(0, len(data))]
    a, b = rnd.choice(toks) if toks else (0, len(data))
    i = rnd.randint(a, b)
    return data[:i] + b"\0" + data[i:], "NUL at %d" % i, (i, i)


def m_cut(rnd, data, kind):
    a = rnd.randrange(len(data))
    b = min(len(data), a + rnd.choice((1, 5, 30, 200, 1500)))
    return data[:a] + data[b:], "cut %d..%d" % (a, b), (a, b)


def m_truncate(rnd, data, kind):
    i = rnd.randrange(0, len(data))
    return data[:i], "truncate at %d" % i, (i, len(data))


def _line_starts(data):
    starts = [0]
    for i, c in enumerate(data):
        if c == 10:
            starts.append(i + 1)
    return starts


def m_dup(rnd, data, kind):
    st = _line_starts(data) + [len(data)]
    i = rnd.randrange(len(st) - 1)
    j = min(len(st) - 1, i + rnd.choice((1, 1, 2, 5, 20)))
    a, b = st[i], st[j]
    times = rnd.choice((1, 1, 3, 50))
    return data[:b] + data[a:b] * times + data[b:], \
        "dup lines %d..%d x%d" % (a, b, times), (b, b)


def m_reorder(rnd, data, kind):
    st = _line_starts(data) + [len(data)]
    if len(st) < 4:
        return m_cut(rnd, data, kind)
    i, j, k = sorted(rnd.sample(range(len(st)), 3))
    a, b, c = st[i], st[j], st[k]
    return data[:a] + data[b:c] + data[a:b] + data[c:], \
        "swap %d..%d with %d..%d" % (a, b, b, c), (a, c)


def m_drop(rnd, data, kind):
    st = _line_starts(data)
    i = rnd.randrange(len(st))
    a = st[i]
    b = data.find(b"\n", a)
    b = len(data) if b < 0 else b
    ln = data[a:b]
    toks = ln.split(b" ")
    if ln.startswith(b"\t") and b" (" in ln and rnd.random() < 0.5:
        new = ln[:ln.rfind(b" (")]                          # the DSO
    elif ln.startswith(b"\t") and ln.split() and rnd.random() < 0.5:
        new = b"\t" + ln.split()[0]                         # symbol and DSO
    elif ln.startswith(b" ABI"):
        return data[:a] + data[b + 1:], "drop line %d" % a, (a, b + 1)
    else:
        k = rnd.randrange(len(toks))
        new = b" ".join(toks[:k] + toks[k + 1:])           # a token
    return data[:a] + new + data[b:], "drop in line %d" % a, (a, b + 1)


def m_hugeline(rnd, data, kind):
    i = rnd.choice(_line_starts(data))
    n = rnd.choice((64 << 10, 1 << 20, (1 << 20) + 1, 2 << 20))
    unit = rnd.choice((b"a", b";", b"\t", b"x;", b"0", b"\xff"))
    ins = (unit * (n // len(unit) + 1))[:n] + b"\n"
    if rnd.random() < 0.3:                     # a frame line's length
        ins = b"\t" + ins
    return data[:i] + ins + data[i:], "line of %d x %r at %d" % (n, unit, i), (i, i)


HUGE = (b"99999999999999999999999999999999", b"18446744073709551616", b"-1", b"0",
        b"1e308", b"inf", b"nan", b"9" * 5000, b"0x" + b"f" * 40, b"-0",
        b"340282366920938463463374607431768211457")


def m_hugecount(rnd, data, kind):
    nums = [(a, b) for a, b in _tokens(data) if data[a:b].strip(b":.()+x").isdigit()
            or data[a:b].lstrip(b"-").replace(b".", b"").isdigit()]
    if not nums:
        return m_insert(rnd, data, kind)
    a, b = rnd.choice(nums)
    new = rnd.choice(HUGE)
    st = data.rfind(b"\n", 0, a) + 1
    return data[:a] + new + data[b:], "number at %d -> %r" % (a, new[:40]), (st, b + 1)


JSON_VALUES = (b"-1", b"0", b"1", b"6", b"7", b"99999999", b"1e308", b"2.5", b"-0",
               b"9223372036854775808", b"null", b"true", b'"x"', b"[]", b"{}", b"[1,2]")


def m_jsonnum(rnd, data, kind):
    """A number inside a JSON line (a node's type, name, size or edge
    count, an edge's type, name or target) made another value."""
    nums = [m.span() for m in re.finditer(rb"-?[0-9]+", data)]
    if not nums:
        return m_insert(rnd, data, kind)
    a, b = rnd.choice(nums)
    old = int(data[a:b])
    new = rnd.choice(JSON_VALUES + (b"%d" % (old + 1), b"%d" % (old - 1),
                                    b"%d" % (old * 7), b"%d" % rnd.randrange(1 << 16)))
    return data[:a] + new + data[b:], "number at %d: %d -> %r" % (a, old, new), (a, b)


SIZES = (0, 1, 15, 16, 17, 39, 40, 41, 0x7fffffff, 0xffffffff)


def _jitdump_fields(data):
    """(offset, struct format, what) of the size fields of DATA's records,
    found by the reader itself (jitdump._records)."""
    out = [(8, "<I", "header size"), (4, "<I", "version")]
    try:
        for off, _end, rec in jitdump._records(data, False):
            if off == 0:
                continue
            out.append((off + 4, "<I", "record size"))
            if isinstance(rec, jitdump.CodeLoad):
                out.append((off + 16 + 24, "<Q", "code_size"))
            elif isinstance(rec, jitdump.DebugInfo):
                out.append((off + 16 + 8, "<Q", "nr_entry"))
    except ValueError:
        pass
    return out


def _inline_fields(data):
    """The same for a .inline file (records walked by inline._trace)."""
    out, at = [], len(inline.HEAD)
    while at < len(data):
        try:
            _t, end = inline._trace(data, at)
        except ValueError:
            break
        out += [(at + 16, "<Q", "size"), (at + 24, "<I", "nnode"), (at + 28, "<I", "nrange"),
                (at + 40, "<I", "link"), (at + 44, "<I", "linknode")]
        at = end
    return out


def m_size(rnd, data, kind):
    fields = _jitdump_fields(data) if kind == "jitdump" else _inline_fields(data)
    fields = [f for f in fields if f[0] + struct.calcsize(f[1]) <= len(data)]
    if not fields:
        return m_flip(rnd, data, kind)
    off, fmt, what = rnd.choice(fields)
    (old,) = struct.unpack_from(fmt, data, off)
    new = rnd.choice(SIZES + (old + 1, max(0, old - 1), old * 2, old + 8, max(0, old - 8)))
    new &= (1 << (8 * struct.calcsize(fmt))) - 1
    out = bytearray(data)
    struct.pack_into(fmt, out, off, new)
    return bytes(out), "%s at %d: %d -> %d" % (what, off, old, new), (off, off + 8)


TEXT_MUTATIONS = (m_flip, m_insert, m_nul, m_cut, m_truncate, m_dup, m_reorder, m_drop,
                  m_hugeline, m_hugecount)
JSON_MUTATIONS = TEXT_MUTATIONS + (m_jsonnum,) * 4
BINARY_MUTATIONS = (m_flip, m_insert, m_nul, m_cut, m_truncate, m_size, m_size, m_size,
                    m_hugeline)


def mutate(rnd, data, kind):
    muts = {"text": TEXT_MUTATIONS, "json": JSON_MUTATIONS}.get(kind, BINARY_MUTATIONS)
    mut = rnd.choice(muts)
    if not data:
        return b"\0", "NUL in an empty file", (0, 0)
    return mut(rnd, data, kind)


# -- Running a reader as its command does -------------------------------------

class Hang(BaseException):         # not caught by a reader's own "except Exception"
    pass


def _alarm(signum, frame):
    raise Hang("over %d s" % TIMEOUT)


@contextlib.contextmanager
def _quiet():
    """stdout and stderr captured (text), as the commands write them."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace")
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def _call(fn):
    """(exit status, stderr) of FN() the way a command's entry ends it; an
    exception other than SystemExit and Fail propagates."""
    with _quiet() as (out, err):
        try:
            rc = fn()
        except SystemExit as e:
            rc = e.code
        except Fail as e:                    # cli.entry: one line, its code
            sys.stderr.write("ljperf: %s\n" % e)
            rc = e.code
    if isinstance(rc, str):                  # sys.exit("message")
        err.write(rc + "\n")
        rc = 1
    return (0 if rc is None else rc), err.getvalue()


def _check_exit(what, rc, err, out_path):
    """A failure message for a command's end, or None."""
    if "Traceback" in err or "internal error" in err:
        return "%s: %s" % (what, err.strip().splitlines()[-1][:300])
    if rc == 0:
        if out_path and not os.path.exists(out_path):
            return "%s: exit 0 without its output %s" % (what, os.path.basename(out_path))
        return None
    if rc == 1:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if not lines:
            return "%s: exit 1 without a line on stderr" % what
        return None
    return "%s: exit %r: %s" % (what, rc, err.strip()[-300:])


def _merge_args(inp, opts, tmp):
    """lj_merge's argument list for INP with option set OPTS in TMP."""
    args = []
    names = {"--KINDS": ("--kinds", "k"), "--PPROF": ("--pprof", "p.pb.gz"),
             "--INUSE": ("--inuse", "inuse"), "--SUMMARY": ("--mem-summary", "s.json"),
             "--WALL": ("--wall", "wall"), "--WALLPPROF": ("--wall-pprof", "w.pb.gz")}
    for a in opts:
        if a in names:
            args += [names[a][0], os.path.join(tmp, names[a][1])]
        else:
            args.append(a)
    if inp.dump is not None:
        args += ["--jitdump", os.path.join(tmp, "dump")]
    return inp.args + args


def setup(inp, data, tmp):
    """Writes INP's files into TMP with DATA as the mutated one; returns
    the path of the mutated copy and the bytes the reader reads."""
    read = 0
    if inp.dump is not None:
        d = os.path.join(tmp, "dump")
        os.mkdir(d)
        for n in os.listdir(inp.dump):
            src = os.path.join(inp.dump, n)
            if not os.path.isfile(src):
                continue
            ext = os.path.splitext(n)[1]
            if ext in (".txt", ".lua") or (
                    inp.reader == "perf-map" and ext != ".map") or (
                    inp.reader in PROFILE_READERS and ext not in (".folded", ".kinds", ".json")):
                continue            # the map alone: lj_merge names from it
            shutil.copyfile(src, os.path.join(d, n))
            read += os.path.getsize(src)
    if inp.reader in ("perf-script",):
        path = os.path.join(tmp, "in.txt")
    else:
        path = os.path.join(tmp, "dump", os.path.basename(inp.path))
    with open(path, "wb") as f:
        f.write(data)
    return path, read + len(data)


def run_case(inp, opts, data, tmp):
    """Runs INP's reader on DATA with option set OPTS in the empty
    directory TMP. Returns (failure or None, bytes read, {stack: weight}
    of a folded lj_merge output or None)."""
    path, nread = setup(inp, data, tmp)
    stacks = None
    if inp.reader in ("perf-script", "jitdump", "inline", "perf-map"):
        args = _merge_args(inp, opts, tmp)
        if "--TEXT" in args:
            i = args.index("--TEXT")
            text = args[i + 1]
            args = args[:i] + args[i + 2:]
            nread += os.path.getsize(text)
        else:
            text = path
        out = os.path.join(tmp, "out")
        rc, err = _call(lambda: merge_cli.main(args + ["-o", out, text]))
        bad = _check_exit("lj_merge", rc, err, out)
        if bad:
            return bad, nread, None
        if "could not make sense of" in err:     # an exception, caught per sample
            return "lj_merge: %s" % next(ln for ln in err.splitlines()
                                         if "could not make sense of" in ln), nread, None
        if rc == 0 and opts == [] and "--format" not in inp.args:
            stacks = {}
            with open(out, encoding="utf-8", errors="replace", newline="\n") as f:
                for ln in f:
                    s, _, n = ln.rstrip("\n").rpartition(" ")
                    stacks[s] = stacks.get(s, 0) + int(n)
    if inp.reader == "jitdump":
        # ljperf record's pruning (finish.prune_dumps) and the command line
        rc, err = _call(lambda: _prune(path, tmp))
        bad = _check_exit("prune", rc, err, None)
        if bad:
            return bad, nread, None
        rc, err = _call(lambda: jitdump._main(["jitdump.py", path, "-v"]))
        if rc not in (0, 1) or "Traceback" in err:
            return "jitdump.py: exit %r %s" % (rc, err[-300:]), nread, None
    if inp.reader == "inline":
        rc, err = _call(lambda: inline.main(["inline", path]))
        bad = _check_exit("ljperf.inline", rc, err, None)
        if bad:
            return bad, nread, None
        rc, err = _call(lambda: [finish.inline_addrs(path[:-len(".inline")]), 0][1])
        bad = _check_exit("inline_addrs", rc, err, None)
        if bad:
            return bad, nread, None
    if inp.reader in PROFILE_READERS:
        bad = _run_profile(inp, opts, tmp)
        if bad:
            return bad, nread, None
    if inp.reader == "heapsnap":
        for argv in heap_argvs(inp, opts, tmp):
            rc, err = _call(lambda: cli.main(argv))
            bad = _check_exit("ljperf " + " ".join(argv[:2]), rc, err, None)
            if bad:
                return bad, nread, None
    return None, nread, stacks


def _prune(path, tmp):
    """jitdump.prune as finish.prune_dumps calls it (its errors a warning)."""
    try:
        jitdump.prune(path, os.path.join(tmp, "pruned"),
                      {0x1000, 0x7f0000000000} | finish.inline_addrs(path))
    except (OSError, ValueError) as e:
        sys.stderr.write("ljperf: warning: cannot prune %s: %s\n" % (path, e))
    return 0


PROFILE_READERS = ("folded", "kinds", "json")


def heap_argvs(inp, opts, tmp):
    """ljperf heap on the mutated snapshot, then heap diff with option set
    OPTS (["diff", names of TMP/dump/NAME.heapsnapshot...])."""
    d = os.path.join(tmp, "dump")
    snap = [os.path.join(d, n + ".heapsnapshot") for n in opts[1:]]
    return [["heap", os.path.join(d, os.path.basename(inp.path))], ["heap", "diff"] + snap]


def profile_dir(inp, tmp):
    """TMP/dump as an ljperf output directory: INP's folded and kinds files
    as its profile.folded and profile.kinds."""
    d = os.path.join(tmp, "dump")
    folded, kinds = inp.args[1], inp.args[2]
    if folded != "profile.folded":
        os.replace(os.path.join(d, folded), os.path.join(d, "profile.folded"))
        if os.path.exists(os.path.join(d, kinds)):
            os.replace(os.path.join(d, kinds), os.path.join(d, "profile.kinds"))
    return d


def _run_profile(inp, opts, tmp):
    """ljperf diff and pprof.py --from-folded on the directory (and its
    folded file), the other side of a diff unmutated."""
    d = profile_dir(inp, tmp)
    other = os.path.join(inp.dump, inp.args[1])
    out = os.path.join(tmp, "out")
    if opts[0] == "diff":
        argv = ["diff", other, d, "-o", out, "--format", opts[1]] + opts[2:]
        rc, err = _call(lambda: cli.main(argv))
        bad = _check_exit("ljperf diff", rc, err, out)
        if bad:
            return bad
        argv = ["diff", d, os.path.join(d, "profile.folded"), "-o", out + "2",
                "--format", opts[1]] + opts[2:]
        rc, err = _call(lambda: cli.main(argv))
        return _check_exit("ljperf diff (file)", rc, err, out + "2")
    for src in (d, os.path.join(d, "profile.folded")):
        argv = ["--from-folded", src, "-o", out] + opts[1:]
        rc, err = _call(lambda: pprof_cli.main(argv))
        bad = _check_exit("pprof.py", rc, err, out)
        if bad:
            return bad
    return None


# -- The command line, as users run it ------------------------------------------

def run_cli(inp, opts, data, tmp):
    """The same case through the command's script in a child process (a
    hang there is a real one: killed after TIMEOUT)."""
    path, _ = setup(inp, data, tmp)
    out = os.path.join(tmp, "out")
    if inp.reader in ("perf-script", "jitdump", "inline", "perf-map"):
        args = _merge_args(inp, opts, tmp)
        text = path
        if "--TEXT" in args:
            i = args.index("--TEXT")
            text = args[i + 1]
            args = args[:i] + args[i + 2:]
        argv = [os.environ.get("LJ_MERGE") or os.path.join(ROOT, "perf-script", "lj_merge.py")] \
            + args + ["-o", out, text]
        what = "lj_merge (command line)"
    elif inp.reader == "heapsnap":
        for argv in heap_argvs(inp, opts, tmp):
            argv = [os.path.join(ROOT, "tools", "ljperf", "ljperf.py")] + argv
            what = "ljperf %s (command line)" % " ".join(argv[1:3])
            try:
                p = subprocess.run([sys.executable] + argv, capture_output=True,
                                   timeout=TIMEOUT, cwd=tmp)
            except subprocess.TimeoutExpired:
                return "%s: still running after %d s" % (what, TIMEOUT)
            bad = _check_exit(what, p.returncode, p.stderr.decode("utf-8", "replace"), None)
            if bad:
                return bad
        return None
    elif opts[0] == "diff":
        argv = [os.path.join(ROOT, "tools", "ljperf", "ljperf.py"), "diff",
                os.path.join(inp.dump, inp.args[1]), profile_dir(inp, tmp), "-o", out,
                "--format", opts[1]] + opts[2:]
        what = "ljperf diff (command line)"
    else:
        argv = [os.path.join(ROOT, "perf-script", "pprof.py"), "--from-folded",
                profile_dir(inp, tmp), "-o", out] + opts[1:]
        what = "pprof.py (command line)"
    try:
        p = subprocess.run([sys.executable] + argv, capture_output=True, timeout=TIMEOUT,
                           cwd=tmp)
    except subprocess.TimeoutExpired:
        return "%s: still running after %d s" % (what, TIMEOUT)
    return _check_exit(what, p.returncode, p.stderr.decode("utf-8", "replace"), out)


# -- Whole samples (lj_merge fixtures, plain runs) ----------------------------------

def is_header(line):
    """A sample's first line, as the fixtures have them (no srcline)."""
    s = line.strip()
    return bool(s) and line[0] != "\t" and not s.startswith(("#", "ABI:")) \
        and "PERF_RECORD_" not in line


def split(data):
    """(side-band lines, [(start, end) byte range of each sample]); a sample
    runs from its header to the next header or side-band line."""
    side, samples = [], []
    pos, start = 0, None
    for line in data.split(b"\n"):
        text = line.decode("utf-8", "replace")
        if is_header(text) or "PERF_RECORD_" in text:
            if start is not None:
                samples.append((start, pos))
                start = None
            if is_header(text):
                start = pos
            else:
                side.append((pos, line))
        pos += len(line) + 1
    if start is not None:
        samples.append((start, min(pos, len(data))))
    return side, samples


_ALONE = {}


def alone(inp, data, tmp_root):
    """INP's side-band lines, samples and each sample's own stacks (cached)."""
    if inp.name not in _ALONE:
        side, samples = split(data)
        prefix = b"".join(ln + b"\n" for _, ln in side)
        stacks = []
        for a, b in samples:
            tmp = tempfile.mkdtemp(dir=tmp_root)
            bad, _, st = run_case(inp, [], prefix + data[a:b] + b"\n", tmp)
            shutil.rmtree(tmp)
            if bad or st is None:
                raise SystemExit("%s: the sample at %d alone fails: %s" % (inp.name, a, bad))
            stacks.append(st)
        _ALONE[inp.name] = (side, samples, stacks)
    return _ALONE[inp.name]


def missing(inp, data, got, damaged, tmp_root):
    """Whole samples (untouched from the newline before to their end) whose
    stacks GOT lacks: a failure message or None."""
    lo, hi = damaged
    side, samples, stacks = alone(inp, data, tmp_root)
    # damaged side-band lines (forks) may fold samples otherwise
    if any(lo - 1 <= p + len(ln) and p - 1 <= hi for p, ln in side):
        return None
    want = {}
    for (a, b), st in zip(samples, stacks):
        if b < lo - 1 or a - 1 > hi:
            for s, w in st.items():
                want[s] = want.get(s, 0) + w
    miss = ["%s (%d, got %d)" % (s, w, got.get(s, 0)) for s, w in want.items()
            if got.get(s, 0) < w]
    return "whole samples not folded: " + "; ".join(miss[:3]) if miss else None


# -- One case -------------------------------------------------------------------

def draw(seed, i, readers):
    """Case I of SEED: (input, option set, mutated data, mutation, damage)."""
    rnd = random.Random("%s:%d" % (seed, i))
    inp = rnd.choice(readers[rnd.choice(sorted(readers))])
    opts = rnd.choice(inp.opts)
    with open(inp.path, "rb") as f:
        data = f.read()
    mdata, what, damaged = mutate(rnd, data, inp.kind)
    return inp, opts, data, mdata, what, damaged


def check(inp, opts, data, mdata, damaged, tmp_root, cli_too=False):
    """The failure of one mutated input, or None."""
    tmp = tempfile.mkdtemp(dir=tmp_root)
    try:
        base = _rss_reset()
        signal.alarm(TIMEOUT)
        try:
            bad, nread, got = run_case(inp, opts, mdata, tmp)
        except Hang:
            return "still running after %d s" % TIMEOUT
        except Exception as e:                   # what an entry calls an internal error
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            return "%s: %s (%s:%d)" % (type(e).__name__, str(e)[:200],
                                       os.path.relpath(tb.tb_frame.f_code.co_filename, ROOT),
                                       tb.tb_lineno)
        finally:
            signal.alarm(0)
        peak = _rss_peak() - base
        if bad:
            return bad
        if peak > MEM_RATIO * nread + MEM_FIXED:
            return "peak memory %d bytes for %d bytes read" % (peak, nread)
        if got is not None and inp.alone and data is not None:
            bad = missing(inp, data, got, damaged, tmp_root)
            if bad:
                return bad
        if cli_too:
            shutil.rmtree(tmp)
            os.mkdir(tmp)
            return run_cli(inp, opts, mdata, tmp)
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _status_kb(key):
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith(key):
                return int(ln.split()[1]) << 10
    raise SystemExit("fuzz.py: no %s in /proc/self/status" % key)


def _rss_reset():
    """Resets this process's peak resident size (Linux >= 4.0:
    clear_refs 5) and returns its resident size now, in bytes."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS:")


def _rss_peak():
    return _status_kb("VmHWM:")


def describe(seed, i, inp, opts, what, only=None):
    """A case as a FAIL line shows it: S:I (with --only READER, which
    --case needs too: the draw is over the readers given), reader, input,
    options, mutation."""
    return "%s:%d%s %s %s [%s] %s" % (seed, i, " (--only %s)" % only if only else "",
                                      inp.reader, inp.name, " ".join(opts), what)


def by_reader(only=None):
    readers = {}
    for inp in inputs():
        if only is None or inp.reader == only:
            readers.setdefault(inp.reader, []).append(inp)
    if not readers:
        raise SystemExit("fuzz.py: no reader %r (known: perf-script, jitdump, inline, "
                         "perf-map, folded, kinds, json, heapsnap)" % only)
    return readers


def save(name, seed, i, inp, opts, what, mdata, failure):
    d = os.path.join(REGRESS, name)
    os.makedirs(d, exist_ok=True)
    fname = os.path.basename(inp.path)
    if len(mdata) > BIG:                        # huge lines: kept small
        with gzip.open(os.path.join(d, fname + ".gz"), "wb") as f:
            f.write(mdata)
    else:
        with open(os.path.join(d, fname), "wb") as f:
            f.write(mdata)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"input": inp.name, "options": opts, "mutation": what,
                   "case": "%s:%d" % (seed, i), "found": failure}, f, indent=1)
        f.write("\n")
    print("saved %s" % os.path.relpath(d, ROOT))


def regress(tmp_root):
    """Every stored case: its mutated file in place of its input's."""
    table = {inp.name: inp for inp in inputs()}
    failures, n = [], 0
    for name in sorted(os.listdir(REGRESS)):
        with open(os.path.join(REGRESS, name, "case.json")) as f:
            case = json.load(f)
        inp = table[case["input"]]
        path = os.path.join(REGRESS, name, os.path.basename(inp.path))
        with (open(path, "rb") if os.path.exists(path) else gzip.open(path + ".gz")) as f:
            mdata = f.read()
        n += 1
        bad = check(inp, case["options"], None, mdata, (0, 0), tmp_root, cli_too=True)
        if bad:
            failures.append("FAIL %s (%s): %s" % (name, case["found"], bad))
        else:
            print("ok   %s: %s" % (name, case["found"]))
    return failures, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=CI_CASES, help="mutations (default %d)" % CI_CASES)
    ap.add_argument("--long", action="store_true", help="%d mutations" % LONG_CASES)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--only", metavar="READER", help="one reader's inputs only")
    ap.add_argument("--case", metavar="S:I", help="replay case I of seed S")
    ap.add_argument("--save", metavar="NAME", help="with --case: keep it in regress/NAME")
    ap.add_argument("--found", metavar="TEXT",
                    help="with --save: what the case found (default: its failure now)")
    ap.add_argument("--regress", action="store_true", help="run the kept cases")
    ap.add_argument("-v", action="store_true", help="a line per case")
    opts = ap.parse_args()
    if (opts.save and not opts.case) or (opts.found and not opts.save):
        ap.error("--save needs --case, --found needs --save")
    signal.signal(signal.SIGALRM, _alarm)
    tmp_root = tempfile.mkdtemp(prefix="ljperf_fuzz.")
    t0 = time.monotonic()
    failures, ncli = [], 0
    try:
        if opts.regress:
            failures, n = regress(tmp_root)
            ncli = n
        else:
            readers = by_reader(opts.only)
            if opts.case:
                seed, _, i = opts.case.rpartition(":")
                first, n = int(i), 1
            else:
                seed, first = opts.seed, 0
                n = LONG_CASES if opts.long else opts.n
            for i in range(first, first + n):
                inp, o, data, mdata, what, damaged = draw(seed, i, readers)
                cli_too = bool(opts.case) or i % CLI_EVERY == CLI_EVERY - 1
                ncli += cli_too
                bad = check(inp, o, data, mdata, damaged, tmp_root, cli_too)
                line = describe(seed, i, inp, o, what, opts.only)
                if opts.save:
                    save(opts.save, seed, i, inp, o, what, mdata, opts.found or bad)
                if bad:
                    failures.append("FAIL %s: %s" % (line, bad))
                    print(failures[-1], flush=True)
                elif opts.v:
                    print("ok   " + line, flush=True)
                if opts.long and i % 5000 == 4999:
                    print("%d mutations, %d failures, %.0f s" % (
                        i + 1 - first, len(failures), time.monotonic() - t0), flush=True)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    if opts.regress:
        for f in failures:
            print(f)
        print("%d kept cases in %.1f s: %d failures" % (n, time.monotonic() - t0, len(failures)))
    else:
        print("%d mutations (%d through the command line) in %.1f s: %d failures"
              % (n, ncli, time.monotonic() - t0, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
