#!/usr/bin/env python3
"""Inlined trace frames (vm_patch 0005, emitter/inline.c, lj_merge), JIT on.

usage: test_inline.py CASE
  shares    `ljperf record` of tests/inline/inline.lua under real perf. The
            program measures the cost of f1, f2 and f3 alone (its ground
            truth), then runs them inlined into one trace: each one's share
            of the samples in that trace must be within 5 points of its
            measured share. Also: a two-level inline (g2 > g1), a C function
            called through the FFI from inlined code (under that function),
            a side trace's inlined functions, a stitched trace, a function
            with its own loop trace (its own frame, not merged), a frame a
            trace made before jumping into another trace, a side trace's
            work after it returned below its start frame (under the
            function it returned to), a trace exit's work under the frame
            it exits in, lines of inlined frames (--lines) and perf's own
            srcline of trace code (the jitdump DEBUG_INFO gives the
            innermost line).
  attached  `ljperf record -p` of inline.lua in its second round: the
            traces of the first round, made before the jitdump started, are
            described with inline ranges from their snapshots (the file
            checked as in format); linkloop's link path and retloop's
            return below its start frame come out as with shares.
  format    jit-PID.dump.inline as the VM wrote it for inline.lua: every
            trace it describes is a trace load of the jitdump (same index,
            address, size), ranges inside the code, every frame's PC inside a
            prototype load; and the reader on damaged copies (truncated last
            line, short record, bad header) keeps the whole records before.
  identity  the positions only observe: for each bench/progs program, the
            machine code of every trace (-jdump=m) is byte-identical with
            tracking on and off (LUAJIT_PERF=1 with LUAJIT_PERF_INLINE unset
            vs 0). Runs are made repeatable with ASLR off and a fixed PRNG
            seed (detseed.so preloaded), which the test checks first.
"""

import collections
import glob
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from tests.lib import ljptest as t
from bench import run  # bench/run.py: program sizes

TOLERANCE = 5.0     # percentage points
MIN_MIX = 300       # samples in the mixed trace
FREQ = 999
PERIOD = 10 ** 9 // FREQ   # cpu-clock weight of one sample (ns)


def stacks(d):
    """[(frames, weight)] of DIR/profile.folded."""
    return [(s.split(";"), n) for s, n in t.folded(d).items()]


def fname(frame):
    """Function name of a folded frame ("f1@/path:15:17_[j]" -> "f1")."""
    return frame.split("@", 1)[0]


def under(st, phase):
    """Stacks with a frame of PHASE, cut to the frames above its last one."""
    out = []
    for fr, n in st:
        idx = [i for i, f in enumerate(fr) if fname(f) == phase]
        if idx:
            out.append((fr[idx[-1]:], n))
    return out


def share(part, whole, what):
    t.check(whole > 0, "%s: samples found" % what)
    return 100.0 * part / whole


def check_mix(st, costs):
    mix = under(st, "mix")
    count = collections.Counter()
    for fr, n in mix:
        inner = [fname(f) for f in fr[1:] if fname(f) in ("f1", "f2", "f3")]
        if inner:
            count[inner[-1]] += n
    total = sum(count.values())
    per = sum(n for _, n in mix)
    nsamples = total // PERIOD
    print("mix: %d weight in f1..f3 of %d in the trace (~%d samples)" % (total, per, nsamples))
    t.check(nsamples >= MIN_MIX, "mix: at least %d samples in f1..f3 (%d)" % (MIN_MIX, nsamples))
    t.check(total >= 0.9 * per, "mix: >= 90%% of the trace's samples are in an inlined "
            "function (%.1f%%)" % share(total, per, "mix"))
    csum = sum(costs.values())
    print("%-4s %9s %9s" % ("fn", "measured", "profiled"))
    for f in ("f1", "f2", "f3"):
        want = 100.0 * costs[f] / csum
        got = share(count[f], total, "mix")
        print("%-4s %8.1f%% %8.1f%%" % (f, want, got))
        t.check(abs(got - want) <= TOLERANCE, "mix: %s's share %.1f%% within %.0f points of "
                "its measured cost %.1f%%" % (f, got, TOLERANCE, want))


CALLEES = {"k1": lambda leaf: "sin" in leaf,          # libm's sin (__sin_fma...)
           "k2": lambda leaf: leaf == "ffilib_frameless",
           "k3": lambda leaf: leaf == "ffilib_tiny"}


def check_callmix(st, costs):
    """C called from a trace (vm_patch 0007): each inlined function that calls
    C keeps its share, and a sample in the C function it calls sits right
    under it."""
    rows = under(st, "callmix")
    count = collections.Counter()
    for fr, n in rows:
        inner = [fname(f) for f in fr[1:] if fname(f) in CALLEES]
        if inner:
            count[inner[-1]] += n
    total = sum(count.values())
    t.check(total // PERIOD >= MIN_MIX, "callmix: at least %d samples in k1..k3 (%d)"
            % (MIN_MIX, total // PERIOD))
    csum = sum(costs.values())
    print("%-4s %9s %9s %14s" % ("fn", "measured", "profiled", "callee samples"))
    res = []
    for f, is_callee in sorted(CALLEES.items()):
        want = 100.0 * costs[f] / csum
        got = share(count[f], total, "callmix")
        callee = [(fr, n) for fr, n in rows if is_callee(fname(fr[-1]))]
        ncallee = sum(n for _, n in callee)
        under_f = sum(n for fr, n in callee if len(fr) > 1 and fname(fr[-2]) == f)
        print("%-4s %8.1f%% %8.1f%% %6d, %5.1f%% under %s" % (
            f, want, got, ncallee // PERIOD, share(under_f, ncallee, f), f))
        res.append((f, want, got, ncallee, under_f))
    for f, want, got, ncallee, under_f in res:
        t.check(abs(got - want) <= 3.0, "callmix: %s's share %.1f%% within 3 points of its "
                "measured cost %.1f%%" % (f, got, want))
        t.check(under_f >= 0.95 * ncallee, "callmix: >= 95%% of the samples in %s's callee "
                "sit right under %s (%.1f%%)" % (f, f, share(under_f, ncallee, f)))


def fraction(st, phase, pred, what, need):
    rows = under(st, phase)
    tot = sum(n for _, n in rows)
    ok = sum(n for fr, n in rows if pred(fr))
    p = share(ok, tot, phase)
    print("%s: %.1f%% %s" % (phase, p, what))
    t.check(p >= need, "%s: %s in >= %d%% of its samples (%.1f%%)" % (phase, what, need, p))


def func_lines(name):
    """The lines of inline.lua's local function NAME, header to end."""
    with open(os.path.join(HERE, "inline.lua")) as f:
        lines = f.read().split("\n")
    first = next(i for i, ln in enumerate(lines) if ln.startswith("local function %s(" % name))
    last = next(i for i in range(first, len(lines)) if lines[i] == "end")
    return range(first + 1, last + 2)


def names(fr):
    return [fname(f) for f in fr]


def jit(f):
    return f.endswith("_[j]")


def case_shares(s):
    lib = t.built("tests", "fpchain", "libffilib.so")
    cmod = os.path.dirname(t.built("tests", "fpchain", "cmod.so"))
    out = s.path("out")
    r = s.ljperf(["record", "-o", out, "-F", str(FREQ), "--", t.built("bin", "luajit"),
                  os.path.join(HERE, "inline.lua"), lib, cmod, "1.5"])
    t.check(r.returncode == 0, "ljperf record succeeds: " + t.last_line(r.stderr))
    m = re.search(r"costs f1=(\S+) f2=(\S+) f3=(\S+)", r.stdout)
    t.check(m is not None, "the program printed its measured costs")
    costs = {"f1": float(m.group(1)), "f2": float(m.group(2)), "f3": float(m.group(3))}
    m = re.search(r"callcosts k1=(\S+) k2=(\S+) k3=(\S+)", r.stdout)
    t.check(m is not None, "the program printed its measured call costs")
    callcosts = {"k1": float(m.group(1)), "k2": float(m.group(2)), "k3": float(m.group(3))}
    t.check(glob.glob(os.path.join(out, "jit-*.dump.inline")), "the VM wrote jit-PID.dump.inline")
    st = stacks(out)
    check_mix(st, costs)
    check_callmix(st, callcosts)
    # g2 inlines g1, which does the work: both frames, in call order.
    fraction(st, "twolevel", lambda fr: names(fr)[1:3] == ["g2", "g1"] and
             jit(fr[1]) and jit(fr[2]), "twolevel > g2 > g1 (trace frames)", 80)
    # The FFI call from fc: the C function under fc, fc under the loop.
    fraction(st, "ffiloop", lambda fr: names(fr)[1:3] == ["fc", "ffilib_spin"],
             "ffilib_spin under fc", 80)
    # The side trace runs h1 (and f2 inside it).
    fraction(st, "sideloop", lambda fr: names(fr)[1:3] == ["h1", "f2"], "h1 > f2", 10)
    # big has its own loop trace: its own frame, under the loop's.
    fraction(st, "callloop", lambda fr: names(fr)[1:2] == ["big"], "big's own frame", 80)
    # linkloop's trace inlines mid and jumps into inner's loop trace: the
    # jump writes mid's record (vm_patch 0007), between the two.
    fraction(st, "linkloop", lambda fr: names(fr)[1:3] == ["mid", "inner"],
             "mid (from the link) > inner", 80)
    # A stitched trace (after cmod.spin) inlines s1's tail call to f3.
    fraction(st, "stitchloop", lambda fr: "f3" in names(fr)[1:], "f3 in the stitched trace", 20)
    check_retloop(st, "retloop")
    # Trace exits: the exit's own work sits under the frame the trace exits
    # in (exitloop), not under k3, whose C call left the slot's call site.
    rows = [(fr, n) for fr, n in under(st, "exitloop") if "lj_trace_exit" in fr]
    tot = sum(n for _, n in rows)
    bad = [fr for fr, n in rows if fname(fr[fr.index("lj_trace_exit") - 1]) != "exitloop"]
    t.check(tot // PERIOD >= 20 and not bad,
            "exitloop: every sample in lj_trace_exit (%d) right under exitloop's frame%s"
            % (tot // PERIOD, "; not: " + ";".join(bad[0]) if bad else ""))
    # --lines: inlined frames carry lines of their own function.
    r = s.ljperf(["report", out, "--lines"])
    t.check(r.returncode == 0, "ljperf report --lines succeeds")
    body = {f: func_lines(f) for f in ("f3", "g1")}
    seen = collections.Counter()
    for fr, n in stacks(out):
        for f in fr:
            mm = re.match(r"(f3|g1)@.*:(\d+)_\[j\]$", f)
            if mm:
                ln = int(mm.group(2))
                seen[(mm.group(1), ln in body[mm.group(1)])] += n
    for f in ("f3", "g1"):
        good, bad = seen[(f, True)], seen[(f, False)]
        t.check(good > 0 and good >= 0.95 * (good + bad),
                "--lines: %s's frames carry lines of its body (%d in, %d out)" % (f, good, bad))
    # perf's own view of trace code: srcline is the inlined function's line.
    data = os.path.join(out, "perf.jit.data")
    rp = subprocess.run(["perf", "--buildid-dir", os.path.join(out, ".debug"), "report",
                         "-i", data, "--stdio", "--sort", "srcline", "-g", "none",
                         "--percent-limit", "1"], capture_output=True, text=True)
    t.check(rp.returncode == 0, "perf report --sort srcline runs: " + rp.stderr[-200:])
    lines = {int(x) for x in re.findall(r"inline\.lua:(\d+)", rp.stdout)}
    t.check(lines & set(body["f3"]), "perf report's srclines include f3's body (%s)"
            % sorted(lines))


def check_retloop(st, what):
    """retloop: rmid's work, done by a side trace of rinner's loop after it
    returned below its start frame, under retloop (rinner has returned);
    rinner itself only ever under rmid."""
    rows = under(st, "retloop")
    tot = sum(n for _, n in rows)
    mid = sum(n for fr, n in rows if names(fr)[1:2] == ["rmid"])
    bad = [fr for fr, n in rows if names(fr)[1:2] == ["rinner"]]
    t.check(tot // PERIOD >= 50 and mid >= 0.5 * tot and not bad,
            "%s: retloop > rmid in %d of its %d samples, rinner never right under "
            "retloop%s" % (what, mid // PERIOD, tot // PERIOD,
                           "; it is: " + ";".join(bad[0]) if bad else ""))


def case_attached(s):
    """Traces compiled before recording starts (`ljperf record -p`) get
    inline stacks from their snapshots: the link path of linkloop, and
    retloop's return below its start frame."""
    lib = t.built("tests", "fpchain", "libffilib.so")
    cmod = os.path.dirname(t.built("tests", "fpchain", "cmod.so"))
    p = s.start([t.built("bin", "luajit"), os.path.join(HERE, "inline.lua"), lib, cmod,
                 "0.5", "3"], stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("round 2"):
            break
    else:
        t.fail("inline.lua ended before its second round")
    out = s.path("out")
    r = s.ljperf(["record", "-p", str(p.pid), "--duration", "7", "-F", str(FREQ), "-o", out])
    t.check(r.returncode == 0, "ljperf record -p succeeds: " + t.last_line(r.stderr))
    p.stdout.read()
    t.check(p.wait(timeout=120) == 0, "inline.lua runs to its end")
    dumps = glob.glob(os.path.join(out, "jit-*.dump"))
    t.check(len(dumps) == 1, "one jitdump")
    check_records(dumps[0])
    st = stacks(out)
    fraction(st, "linkloop", lambda fr: names(fr)[1:3] == ["mid", "inner"],
             "mid (from the link) > inner", 80)
    check_retloop(st, "attached")


def check_records(dump):
    """The jit-PID.dump.inline of DUMP: one record per trace load of DUMP
    (at least 8; same index, address and size), ranges from 0, every frame's
    PC inside a prototype load. Returns the records."""
    from ljperf import jitdump
    from ljperf import inline as jitinline
    loads = [x for x in jitdump.read(dump) if isinstance(x, jitdump.CodeLoad)]
    by_index = {x.code_index: x for x in loads}
    protos = [x for x in loads if not x.name.startswith(("TRACE_", "lj_vm_"))]
    traces = list(jitinline.read(dump + ".inline"))
    ntrace = sum(1 for x in loads if x.name.startswith("TRACE_"))
    print("%d trace loads, %d with inline ranges" % (ntrace, len(traces)))
    t.check(len(traces) == ntrace and ntrace >= 8, "inline ranges for the traces (%d of %d)"
            % (len(traces), ntrace))
    for tr in traces:
        ld = by_index.get(tr.index)
        t.check(ld is not None and ld.name.startswith("TRACE_") and ld.code_addr == tr.addr
                and ld.code_size == tr.size, "trace %d matches its load" % tr.index)
        t.check(tr.ranges and tr.ranges[0][0] == 0, "trace %d: ranges start at 0" % tr.index)
        for pc, _ in tr.nodes:
            t.check(any(p.code_addr < pc <= p.code_addr + p.code_size for p in protos),
                    "trace %d: frame PC %#x inside a prototype" % (tr.index, pc))
    return traces


def case_format(s):
    from ljperf import jitdump
    from ljperf import inline as jitinline
    lib = t.built("tests", "fpchain", "libffilib.so")
    cmod = os.path.dirname(t.built("tests", "fpchain", "cmod.so"))
    r = subprocess.run([t.built("bin", "luajit"), os.path.join(HERE, "inline.lua"), lib, cmod,
                        "0.2"], env=s.env({"LUAJIT_PERF": "jitdump", "LUAJIT_PERF_DIR": s.dir}),
                       capture_output=True, text=True, timeout=120)
    t.check(r.returncode == 0, "inline.lua runs: " + r.stderr[-200:])
    dumps = glob.glob(os.path.join(s.dir, "jit-*.dump"))
    t.check(len(dumps) == 1, "one jitdump")
    s.pids.add(int(os.path.basename(dumps[0])[4:-5]))
    traces = check_records(dumps[0])
    data = open(dumps[0] + ".inline", "rb").read()
    starts, at = [], 16                 # records after "ljperf-inline 2\n" (emitter/inline.c)
    while at < len(data):
        starts.append(at)
        nn, nr = struct.unpack_from("<II", data, at + 24)
        at += 48 + 16 * nn + 8 * nr
    t.check(at == len(data) and len(starts) == len(traces),
            "the file is %d whole records, as many as read" % len(starts))
    last = starts[-1]
    withnode = [k for k, st in enumerate(starts) if struct.unpack_from("<I", data, st + 24)[0]]
    t.check(withnode, "some record has a node")
    bad_pad = bytearray(data)
    bad_pad[starts[withnode[-1]] + 48 + 12] = 1     # its first node's pad must be 0
    cases = {
        "truncated record": (data[:-3], len(traces) - 1),
        "cut inside a record head": (data[:last + 20], len(traces) - 1),
        "cut before a record": (data[:last], len(traces) - 1),
        "damaged node": (bytes(bad_pad), withnode[-1]),
    }
    for what, (body, want) in cases.items():
        p = s.path("damaged.inline")
        with open(p, "wb") as f:
            f.write(body)
        got = len(list(jitinline.read(p)))
        t.check(got == want, "%s: %d whole records read (%d)" % (what, want, got))
    with open(s.path("bad.inline"), "w") as f:
        f.write("not-inline 1\n")
    try:
        list(jitinline.read(s.path("bad.inline")))
        t.fail("a bad header raises")
    except ValueError:
        pass
    many_chunks(s, jitdump)
    one_line(s, jitinline)


def one_line(s, jitinline):
    """A loop written on one line: its trace records a dozen bytecodes, all
    on that line, so it has one node (the check leaves room for a second),
    not one per bytecode (ten or more before nodes went per line)."""
    prog = s.path("oneline.lua")
    with open(prog, "w") as f:
        f.write("local s, t = 0, {}\n"
                "for i = 1, 300000 do s = (s + i * 3 - i % 7 + #t) % 1000003; t[1] = i end\n"
                "print(s)\n")
    out = s.path("oneline-out")
    os.makedirs(out)
    r = subprocess.run([t.built("bin", "luajit"), prog],
                       env=s.env({"LUAJIT_PERF": "jitdump", "LUAJIT_PERF_DIR": out}),
                       capture_output=True, text=True, timeout=120)
    t.check(r.returncode == 0, "the one-line loop runs: " + r.stderr[-200:])
    dumps = glob.glob(os.path.join(out, "jit-*.dump"))
    t.check(len(dumps) == 1, "one jitdump for the one-line loop")
    s.pids.add(int(os.path.basename(dumps[0])[4:-5]))
    traces = list(jitinline.read(dumps[0] + ".inline"))
    t.check(traces, "the one-line loop made a trace with inline ranges")
    nodes = [len(tr.nodes) for tr in traces]
    t.check(max(nodes) <= 2, "one node per line, not per bytecode (nodes per trace: %s)" % nodes)


MODULES = 11  # more chunks than the emitter keeps on its stack per trace


def many_chunks(s, jitdump):
    """One loop trace inlines a function from each of MODULES chunks: its
    DEBUG_INFO names every chunk's file at that function's body line (3)."""
    d = s.path("many")
    os.makedirs(d)
    for i in range(1, MODULES + 1):
        with open(os.path.join(d, "mod%d.lua" % i), "w") as f:
            f.write("local M = {}\nfunction M.f(x)\n  return x * %d + 1\nend\nreturn M\n" % i)
    calls = " + ".join("m[%d].f(i)" % i for i in range(1, MODULES + 1))
    with open(os.path.join(d, "main.lua"), "w") as f:
        f.write("package.path = %r .. package.path\n"
                "local m = {}\nfor i = 1, %d do m[i] = require('mod' .. i) end\n"
                "local s = 0\nfor i = 1, 300000 do s = (s + %s) %% 1000003 end\n"
                "print(s)\n" % (d + "/?.lua;", MODULES, calls))
    out = s.path("many-out")
    os.makedirs(out)
    r = subprocess.run([t.built("bin", "luajit"), os.path.join(d, "main.lua")],
                       env=s.env({"LUAJIT_PERF": "jitdump", "LUAJIT_PERF_DIR": out}),
                       capture_output=True, text=True, timeout=120)
    t.check(r.returncode == 0, "the %d-module program runs: %s" % (MODULES, r.stderr[-200:]))
    dumps = glob.glob(os.path.join(out, "jit-*.dump"))
    t.check(len(dumps) == 1, "one jitdump for the %d-module program" % MODULES)
    s.pids.add(int(os.path.basename(dumps[0])[4:-5]))
    info, best = {}, set()
    for rec in jitdump.read(dumps[0]):
        if isinstance(rec, jitdump.DebugInfo):
            info[rec.code_addr] = rec
        elif isinstance(rec, jitdump.CodeLoad) and rec.name.startswith("TRACE_") and \
                "main.lua" in rec.name.split("::")[1] and rec.code_addr in info:
            got = {(os.path.basename(f), line) for _, line, _, f in info[rec.code_addr].entries}
            best = max(best, got, key=len)
    want = {("mod%d.lua" % i, 3) for i in range(1, MODULES + 1)}
    t.check(want <= best, "a loop trace's DEBUG_INFO has line 3 of all %d modules (missing %s)"
            % (MODULES, sorted(want - best)))


DETSEED = "detseed.so"


def jdump(s, prog, env):
    """-jdump=m output of PROG; the session removes its perf map."""
    size = str(run.SIZES[os.path.basename(prog)[:-4]][2])      # bench/run.py --quick
    p = s.start(["setarch", "-R", t.built("bin", "luajit"), "-jdump=m", prog, size],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        t.fail("%s: no end within 120 s" % prog)
    t.check(p.returncode == 0, "%s runs: %s" % (prog, err[-200:]))
    return out


def case_identity(s):
    pre = t.built("tests", "inline", DETSEED)
    base = s.env({"LUAJIT_PERF": "1", "LUAJIT_PERF_DIR": s.dir, "LD_PRELOAD": pre})
    progs = sorted(glob.glob(os.path.join(ROOT, "bench", "progs", "*.lua")))
    t.check(progs, "bench/progs has programs")
    total = 0
    for p in progs:
        off1 = jdump(s, p, dict(base, LUAJIT_PERF_INLINE="0"))
        off2 = jdump(s, p, dict(base, LUAJIT_PERF_INLINE="0"))
        t.check(off1 == off2, "%s: two runs give the same dump (fixed seed works)" % p)
        on = jdump(s, p, base)
        n = len(re.findall(r"^---- TRACE \d+ mcode", on, re.M))
        same = on == off1
        print("%-18s %3d traces  %s" % (os.path.basename(p), n, "identical" if same else "DIFFER"))
        t.check(same, "%s: machine code identical with positions tracked and not" % p)
        total += n
    t.check(total >= 20, "the programs made traces (%d)" % total)
    inl = glob.glob(os.path.join(s.dir, "jit-*.dump.inline"))
    t.check(any(os.path.getsize(f) > 100 for f in inl), "tracking was on: inline stacks written")


if __name__ == "__main__":
    case = sys.argv[1] if len(sys.argv) > 1 else ""
    fn = {"shares": case_shares, "format": case_format, "attached": case_attached,
          "identity": case_identity}.get(case)
    if fn is None:
        sys.exit(__doc__)
    t.need_perf()

    def body():
        with t.Session() as s:
            fn(s)
    t.main(body)
