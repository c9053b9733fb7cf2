#!/usr/bin/env python3
"""perf-script/pprof.py read back by Go's own pprof (`go tool pprof`).

  test_pprof.py units   hand-written stacks (no perf): exact values, lines,
                        two processes apart by label, malformed input; and
                        lj_merge --format pprof (no --lines) on stored real
                        recordings: every Lua location's current line
  test_pprof.py demo    the demo recorded by `ljperf record --lines` under
                        real perf; shares compared with its profile.folded;
                        and a program that forks twice (--per-process): three
                        processes apart by their pid label
  test_pprof.py lines   hotlines.lua under a default `ljperf record` (real
                        perf), JIT on and -joff: the hot lines of the leaf,
                        the call lines of its callers

Expected values are worked out by hand (units, lines: from what the Lua
programs do) or counted straight from the folded text with string
operations (demo), never by pprof.py. go missing or
failing makes the test FAIL.
"""

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from tests.lib import ljptest as t
from ljperf import pprof

PPROF_PY = os.path.join(ROOT, "perf-script", "pprof.py")


def go_pprof(args, profile):
    go = shutil.which("go")
    if not go:
        t.fail("go is not installed (Debian package golang-go): it reads the profiles")
    r = subprocess.run([go, "tool", "pprof"] + args + [profile], capture_output=True,
                       text=True, errors="replace", timeout=120,
                       env=dict(os.environ, PPROF_TMPDIR=os.path.dirname(profile)))
    if r.returncode != 0:
        t.check(False, "go tool pprof %s opens %s: %s" % (" ".join(args), profile,
                                                         r.stderr.strip()[-500:]))
    return r.stdout


def written(outdir):
    """DIR/profile.pb.gz, as ljperf record wrote it (lj_merge --pprof)."""
    p = os.path.join(outdir, "profile.pb.gz")
    t.check(os.path.exists(p) and os.path.getsize(p) > 0, "ljperf record wrote %s" % p)
    return p


def convert(src, out, *args):
    r = subprocess.run([sys.executable, PPROF_PY, "--from-folded", src, "-o", out] +
                       list(args), capture_output=True, text=True)
    t.check(r.returncode == 0, "pprof.py --from-folded %s %s (%s)"
            % (os.path.basename(src), " ".join(args), r.stderr.strip()[-300:]))
    return out


TOP_ROW = re.compile(r"^\s*([\d.]+)(\w*)\s+([\d.]+)%\s+[\d.]+%\s+([\d.]+)(\w*)\s+([\d.]+)%\s+(.*)$")


def top(profile, *args):
    """{name: (flat, flat%, cum, cum%)} of go tool pprof -top (every node)."""
    rows = {}
    for ln in go_pprof(["-top", "-nodefraction=0", "-edgefraction=0", "-nodecount=100000"]
                       + list(args), profile).splitlines():
        m = TOP_ROW.match(ln)
        if m:
            rows[m.group(7)] = (float(m.group(1)), float(m.group(3)),
                                float(m.group(4)), float(m.group(6)))
    return rows


# -- units ---------------------------------------------------------------------

HAND = """\
app-100;main;run@/src/a.lua:10:12;leaf@/src/a.lua:3:5 30
app-100;main;run@/src/a.lua:10:14;c_helper 10
app-200;main;run@/src/a.lua:10:12;leaf@/src/a.lua:3:5_[j] 60
"""


LJ_MERGE = os.path.join(ROOT, "perf-script", "lj_merge.py")
REAL = os.path.join(ROOT, "tests", "lj_merge", "fixtures", "real")
INTERP = os.path.join(REAL, "interp")
JIT = os.path.join(REAL, "jit")


def lj_merge(s, args, inp, out=None):
    """lj_merge ARGS INP; its stdout (text), or the bytes of OUT when given
    (-o OUT)."""
    cmd = [sys.executable, LJ_MERGE] + list(args) + [inp] + (["-o", out] if out else [])
    r = subprocess.run(cmd, capture_output=True)
    t.check(r.returncode == 0, "lj_merge %s %s (%s)" % (" ".join(args), os.path.basename(inp),
                                                      r.stderr.decode().strip()[-200:]))
    if out:
        with open(out, "rb") as f:
            return f.read()
    return r.stdout.decode()


def lj_merge_pprof(s):
    """lj_merge --format pprof WITHOUT --lines on real recordings
    (tests/lj_merge/fixtures/real; their stacks, worked out by hand, in
    tests/lj_merge/cases/real-interp*.case and real-jit*.case): every Lua
    location carries its current line, function names as without --lines.

    interp.lua (-joff), 30 samples of 2 004 008 ns: flat leaf 8 (its loop,
    line 5: R13 in injectF.txt), bytes 12 (line 15), string.byte 5,
    lj_lib_checkint 2, lj_lib_checkstr 2, lj_vm_mod 1; the main chunk calls
    mid at line 21 (8 samples under it) and bytes at 22 (22), mid calls
    leaf at 10 (8)."""
    out = s.path("interp.pb.gz")
    base = ["--format", "pprof", "--jitdump", INTERP]
    prof = lj_merge(s, base, os.path.join(INTERP, "injectF.txt"), out)
    piped = s.path("piped.pb.gz")
    with open(piped, "wb") as f:
        r = subprocess.run([sys.executable, LJ_MERGE] + base +
                           [os.path.join(INTERP, "injectF.txt")], stdout=f,
                           stderr=subprocess.PIPE)
    t.check(r.returncode == 0 and open(piped, "rb").read() == prof,
            "lj_merge --format pprof > FILE writes the same bytes")
    beside = s.path("beside.pb.gz")
    folded = lj_merge(s, ["--jitdump", INTERP, "--pprof", beside],
                      os.path.join(INTERP, "injectF.txt"))
    t.check(open(beside, "rb").read() == prof,
            "lj_merge --pprof FILE (beside the folded output) writes the same profile")
    t.check(folded.count(";") > 0 and "leaf@interp.lua:3 " in folded and
            "bytes@interp.lua:13 " in folded and "interp.lua:0;" in folded,
            "... and the folded output keeps names without current lines")
    rows = top(out, "-sample_index=samples", "-lines")
    for fn, flat, cum in (("leaf@interp.lua:3 interp.lua:5", 8, 8),
                          ("bytes@interp.lua:13 interp.lua:15", 12, 22),
                          ("mid@interp.lua:8 interp.lua:10", 0, 8),
                          ("interp.lua:0 interp.lua:21", 0, 8),
                          ("interp.lua:0 interp.lua:22", 0, 22)):
        t.check(rows.get(fn, (None,) * 4)[0::2] == (flat, cum),
                "-top -lines: %s flat %d cum %d (%s)" % (fn, flat, cum, rows.get(fn)))
    t.check(not any(n.startswith(("leaf@", "bytes@", "mid@", "interp.lua:0 "))
                    and not re.search(r" interp\.lua:\d+$", n) for n in rows),
            "-top -lines: every Lua location has a line (%s)" % sorted(rows))
    names = top(out, "-sample_index=samples")
    t.check(names.get("leaf@interp.lua:3", (0,))[0] == 8 and
            names.get("bytes@interp.lua:13", (0,))[0] == 12,
            "-top: function names without the current line, as in the folded output")
    raw = go_pprof(["-raw"], out)
    t.check(re.search(r" leaf@interp\.lua:3 interp\.lua:5 s=3\(leaf\)", raw) is not None,
            "-raw: leaf's location: line 5, start line 3, system name leaf")
    # Without the registers (inject.txt) leaf's line is unknown (its record
    # still points at its entry, `?` with --lines): pprof line 0, no line
    # printed -- not its definition line.
    nobx = s.path("nobx.pb.gz")
    lj_merge(s, base, os.path.join(INTERP, "inject.txt"), nobx)
    rows = top(nobx, "-sample_index=samples", "-lines")
    t.check(rows.get("leaf@interp.lua:3 interp.lua", (0,))[0] == 8 and
            rows.get("bytes@interp.lua:13 interp.lua:15", (0,))[0] == 12 and
            not any(n.startswith("leaf@interp.lua:3 interp.lua:") for n in rows),
            "no uregs: leaf's unknown line is pprof's 0, bytes keeps its call's line 15 "
            "(%s)" % sorted(rows))
    raw = go_pprof(["-raw"], nobx)      # plain perf script prints the event
    t.check("Period: 2004008" in raw and re.search(r"^\s*\d+ +\d+: ", raw, re.M) is not None,
            "-raw: the period is perf's, samples carry both values")
    jit = jit_lines(s)
    for d, name, prof in ((INTERP, "interp.lua", out), (JIT, "jit.lua", jit)):
        args = ["--format", "pprof", "--lines", "--jitdump", d] + (["--jit-tag"] if d == JIT else [])
        t.check(lj_merge(s, args, os.path.join(d, "injectF.txt"), s.path("lines.pb.gz")) ==
                open(prof, "rb").read(), "%s: --lines changes nothing in the profile" % name)


def jit_lines(s):
    """jit.lua, JIT on, 19 samples: the lines of trace code from the
    jitdump: leaf's loop 5 (flat 8), concat's string.format loop 15 (3
    samples under it) and table.concat 16 (1); callers' records: mid calls
    leaf at 10 (7), the main chunk calls mid at 21 (7) and concat at 22 (12).
    Returns the profile's path."""
    jit = s.path("jit.pb.gz")
    lj_merge(s, ["--format", "pprof", "--jit-tag", "--jitdump", JIT],
             os.path.join(JIT, "injectF.txt"), jit)
    rows = top(jit, "-sample_index=samples", "-lines")
    for fn, flat, cum in (("leaf@jit.lua:3_[j] jit.lua:5", 8, 8),
                          ("concat@jit.lua:13_[j] jit.lua:15", 0, 3),
                          ("concat@jit.lua:13_[j] jit.lua:16", 0, 1),
                          ("mid@jit.lua:8 jit.lua:10", 0, 7),
                          ("jit.lua:0 jit.lua:21", 0, 7),
                          ("jit.lua:0 jit.lua:22", 0, 12)):
        t.check(rows.get(fn, (None,) * 4)[0::2] == (flat, cum),
                "-top -lines, JIT: %s flat %d cum %d (%s)" % (fn, flat, cum, rows.get(fn)))
    return jit


def units():
    with t.Session() as s:
        lj_merge_pprof(s)
        src = s.path("hand.folded")
        with open(src, "w") as f:
            f.write(HAND)
        p = convert(src, s.path("hand.pb.gz"), "--weights", "count", "--period", "1000")
        # 100 samples: leaf interpreted 30, as a trace 60, c_helper 10; every
        # stack runs through main and run.
        rows = top(p, "-sample_index=samples")
        want = {"leaf@/src/a.lua:3": (30, 30, 30, 30), "leaf@/src/a.lua:3_[j]": (60, 60, 60, 60),
                "c_helper": (10, 10, 10, 10), "run@/src/a.lua:10": (0, 0, 100, 100),
                "main": (0, 0, 100, 100)}
        t.check(rows == want, "-top: flat and cum of every function (%s)" % rows)
        # cpu/nanoseconds: 1000 ns per sample
        raw = go_pprof(["-raw"], p)
        t.check(re.search(r"samples/count cpu/nanoseconds", raw) is not None,
                "-raw: sample types samples/count, cpu/nanoseconds")
        t.check(re.search(r"^\s+60\s+60000: ", raw, re.M) is not None,
                "-raw: the trace stack is 60 samples, 60000 ns")
        t.check("Period: 1000" in raw, "-raw: period 1000")
        # lines: the call sites of run (12, 14) and leaf's running line 5,
        # start lines 10 and 3, the chunk as the file
        lines = top(p, "-sample_index=samples", "-lines")
        t.check(lines.get("run@/src/a.lua:10 /src/a.lua:12", (0, 0, 0))[2] == 90 and
                lines.get("run@/src/a.lua:10 /src/a.lua:14", (0, 0, 0))[2] == 10,
                "-lines: run's two call sites, 90 and 10 samples (%s)" % sorted(lines))
        t.check(lines.get("leaf@/src/a.lua:3 /src/a.lua:5", (0,))[0] == 30,
                "-lines: leaf at line 5 of /src/a.lua")
        t.check(re.search(r"leaf@/src/a\.lua:3 /src/a\.lua:5 s=3\(leaf\)", raw) is not None,
                "-raw: leaf's location: file, line 5, start line 3, system name leaf")
        # folded input without --lines: the current lines are unknown, pprof
        # line 0 (printed without a line), not the definition line
        nl = s.path("nolines.folded")
        with open(nl, "w") as f:
            f.write("app;run@/src/a.lua:10;leaf@/src/a.lua:3 5\n")
        q = convert(nl, s.path("nolines.pb.gz"), "--weights", "count", "--period", "1000")
        rows = top(q, "-sample_index=samples", "-lines")
        t.check(set(rows) == {"run@/src/a.lua:10 /src/a.lua", "leaf@/src/a.lua:3 /src/a.lua"},
                "-lines of folded stacks without lines: no line, not the definition's (%s)"
                % sorted(rows))
        t.check(re.search(r"leaf@/src/a\.lua:3 /src/a\.lua:0 s=3\(leaf\)",
                          go_pprof(["-raw"], q)) is not None,
                "-raw: line 0, start line 3")
        # two processes, apart by label
        tags = go_pprof(["-tags", "-sample_index=samples"], p)
        t.check(re.search(r"pid: Total 100\.0\s+60\.0 \(60\.00%\): 200"
                          r"\s+40\.0 \(40\.00%\): 100", tags) is not None,
                "-tags: pid 200 has 60 samples, pid 100 has 40")
        t.check(re.search(r"kind: Total 100\.0\s+60\.0 \(60\.00%\): trace\s+30\.0 \(30\.00%\): lua"
                          r"\s+10\.0 \(10\.00%\): c", tags) is not None,
                "-tags: the leaf's kind: trace 60, lua 30, c 10")
        only = top(p, "-sample_index=samples", "-tagfocus=pid=100")
        # (pprof's shares stay relative to the whole profile's 100)
        t.check(only == {"leaf@/src/a.lua:3": (30, 30, 30, 30), "c_helper": (10, 10, 10, 10),
                         "run@/src/a.lua:10": (0, 0, 40, 40), "main": (0, 0, 40, 40)},
                "-tagfocus=pid=100 keeps process 100 only (%s)" % only)
        traces = go_pprof(["-traces", "-sample_index=samples"], p)
        t.check(traces.count("pid:  100") == 2 and traces.count("pid:  200") == 1 and
                "comm:  app" in traces, "-traces: each stack with its pid and comm")
        malformed(s)


def malformed(s):
    """Odd names and empty profiles still make files go tool pprof opens."""
    empty = s.path("empty.folded")
    open(empty, "w").close()
    p = convert(empty, s.path("empty.pb.gz"))
    out = go_pprof(["-top"], p)
    t.check("of 0 total" in out, "empty folded file: an empty profile opens")
    odd = s.path("odd.folded")
    with open(odd, "wb") as f:
        f.write(b"app;\xff\xfe\x80name;\x00nul\x01ctl 5\n"
                b";; 3\n"                         # empty frame names
                b"app;x@:1:2;@b:c:d 4\n"          # almost Lua labels
                b"no weight here\n"
                b"app;f 1.5\n"
                b"app;f -3\n"
                b"\n"
                b"app-7/8;" + b"L" * 100000 + b" 2\n")
    p = convert(odd, s.path("odd.pb.gz"))
    rows = top(p, "-sample_index=samples")
    # ljperf.folded reads a decimal weight too (a memory or diff profile's):
    # 1.5 samples round to 2
    t.check(sum(r[0] for r in rows.values()) == 16,
            "odd folded file opens, 5+3+4+2+2 = 16 samples kept (%s)"
            % [n[:40] for n in sorted(rows)])
    prof = pprof.Profile(period_ns=10)
    prof.add([pprof.Frame(b"\xc3\x28bytes"), pprof.Frame("lone \udcff surrogate", kind="lua",
                                                           file="\udcfe", line=-1),
              pprof.Frame("", dso=b"/lib/\xff.so", address=2 ** 64 - 1, build_id="zz"),
              pprof.Frame("inl", inlined=(pprof.Frame("i1"), pprof.Frame("i2")))],
             3, None, {"pid": -1, "comm": "\udcff", "x": ""})
    prof.add([], 2)
    api = s.path("api.pb.gz")
    prof.write(api)
    raw = go_pprof(["-raw"], api)
    t.check("i2" in raw and "i1" in raw, "API: odd frames, an empty stack, inlined frames: "
                                         "the profile opens")
    m = re.search(r"^\s*\d+: 0x0( M=\d+)? i2 :0 s=0\s*\n\s*i1 :0 s=0\s*\n\s*inl :0 s=0", raw, re.M)
    t.check(m is not None, "inlined frames are Lines of one location, innermost first, "
                           "the frame that inlined them last")
    empty_api = s.path("none.pb.gz")
    pprof.Profile().write(empty_api)
    go_pprof(["-top"], empty_api)
    t.check(True, "a Profile with no samples opens")


# -- demo ----------------------------------------------------------------------

CURLINE = re.compile(r"^(.*:\d+):(?:\d+|\?)(_\[j\])?$")


def function_of(frame):
    """pprof's function name of a folded frame: --lines' current line cut."""
    m = CURLINE.match(frame)
    return m.group(1) + (m.group(2) or "") if m else frame


def shares(folded):
    """{function: (flat %, cum %)} counted from the folded stacks, root
    frame left out (it becomes a label)."""
    total = sum(folded.values())
    flat, cum = {}, {}
    for stack, w in folded.items():
        parts = stack.split(";")
        # a stack of the root alone: pprof names its one frame after the root
        fns = [function_of(f) for f in parts[1:]] or [parts[0]]
        flat[fns[-1]] = flat.get(fns[-1], 0) + w
        for fn in set(fns):
            cum[fn] = cum.get(fn, 0) + w
    return {fn: (100.0 * flat.get(fn, 0) / total, 100.0 * c / total)
            for fn, c in cum.items()}


def shown(pct):
    """A share as go tool pprof -top prints it: 99.95% up to 100.05% as 100%
    (its Percentage rule), the rest rounded to two decimals (below 1%: two
    significant digits, within the test's tolerance)."""
    return 100.0 if 99.95 <= pct <= 100.05 else pct


def demo():
    t.need_perf()
    fibdemo = t.built("examples", "demo", "fibdemo")
    with t.Session() as s:
        out = s.path("out")
        r = s.ljperf(["record", "-o", out, "--lines", "--", fibdemo, "2"])
        t.check(r.returncode == 0, "ljperf record --lines on the demo")
        p = written(out)
        folded = t.folded(out)
        want = shares(folded)
        rows = top(p, "-sample_index=cpu")
        chunk = os.path.join(os.path.dirname(fibdemo), "demo.lua")
        for fn in ("fib_lua@%s:28" % chunk, "lua_work@%s:20_[j]" % chunk,
                   "run@%s:40" % chunk, "fib_c", "c_work", "main"):
            t.check(fn in rows, "-top lists " + fn)
        bad = []
        for fn, (fl, cu) in want.items():
            g = rows.get(fn)
            if g is None or abs(g[1] - shown(fl)) > 0.011 or abs(g[3] - shown(cu)) > 0.011:
                bad.append("%s: folded %.3f/%.3f pprof %s" % (fn, fl, cu, g))
        t.check(not bad and len(rows) == len(want),
                "flat and cum shares of all %d functions equal the folded profile's "
                "within rounding %s" % (len(want), bad[:5]))
        raw = go_pprof(["-raw"], p)
        for fn, start in (("fib_lua", 28), ("lua_work", 20), ("run", 40)):
            t.check(re.search(r" %s@%s:%d(_\[j\])? %s:\d+ s=%d\(%s\)"
                              % (fn, re.escape(chunk), start, re.escape(chunk), start, fn),
                              raw) is not None,
                    "-raw: %s with file %s, a line and start line %d" % (fn, chunk, start))
        lines = top(p, "-lines")
        calls = sorted(n for n in lines if n.startswith("fib_lua@"))
        t.check(("fib_lua@%s:28 %s:30" % (chunk, chunk)) in calls and
                ("fib_lua@%s:28 %s:31" % (chunk, chunk)) in calls,
                "-lines: fib_lua's calls of fib_c at lines 30 and 31 (%s)" % calls)
        traces = go_pprof(["-traces"], p)
        t.check("lua_work@%s:20_[j]" % chunk in traces and "comm:  fibdemo" in traces and
                "kind:  trace" in traces, "-traces: Lua frames, JIT traces, comm and kind")
        t.check(re.search(r"^\s*\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x0 %s" % re.escape(fibdemo),
                          raw, re.M) is not None and
                re.search(r"^\s*\d+: 0x[0-9a-f]+ M=\d+ c_work ", raw, re.M) is not None,
                "-raw: C frames sit in a mapping of their DSO (%s) at their address" % fibdemo)
        conv = convert(out, s.path("demo.pb.gz"))
        t.check(top(conv, "-sample_index=cpu") == rows,
                "pprof.py --from-folded DIR gives the same -top as lj_merge --pprof")


FORK_LUA = os.path.join(ROOT, "tests", "lj_merge", "capture", "real", "fork.lua")


def processes():
    """fork.lua: the parent (parent_work) and two children (child_a, child_b)
    each spin for 1 s, so each process has about a third of the samples."""
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        out = s.path("fork")
        r = s.ljperf(["record", "-o", out, "--per-process", "--", luajit, "-joff",
                      FORK_LUA, "1"])
        t.check(r.returncode == 0, "ljperf record --per-process on fork.lua")
        folded = t.folded(out)
        total = sum(folded.values())
        roots, owner = {}, {}
        for st, w in folded.items():
            fr = st.split(";")
            pid = int(fr[0].rpartition("-")[2])
            roots[pid] = roots.get(pid, 0) + w
            for f in fr:
                for fn in ("parent_work", "child_b"):
                    if f.startswith(fn + "@"):
                        owner.setdefault(fn, set()).add(pid)
        t.check(len(roots) == 3 and all(len(v) == 1 for v in owner.values()) and
                len(owner) == 2, "folded: 3 processes, parent_work and child_b in one "
                                 "each (%s, %s)" % (roots, owner))
        p = written(out)
        tags = go_pprof(["-tags"], p)
        got = {int(m.group(2)): float(m.group(1))
               for m in re.finditer(r"\(\s*([\d.]+)%\): (\d+)$", tags, re.M)}
        want = {pid: 100.0 * w / total for pid, w in roots.items()}
        t.check(set(got) == set(want) and
                all(abs(got[k] - want[k]) < 0.011 for k in want) and
                all(20 < v < 47 for v in got.values()),
                "-tags: the three pids with their folded shares, about a third each "
                "(%s)" % got)
        for fn, other in (("parent_work", "child_b"), ("child_b", "parent_work")):
            pid = next(iter(owner[fn]))
            names = " ".join(top(p, "-tagfocus=pid=%d" % pid))
            t.check(fn + "@" in names and other + "@" not in names,
                    "-tagfocus=pid=%d: %s, no %s" % (pid, fn, other))


HOT_LUA = os.path.join(HERE, "hotlines.lua")


def at_lines(rows, function):
    """{line: (flat, cum)} of FUNCTION's rows in go tool pprof -top -lines
    (`FUNCTION FILE:LINE`; a location of line 0, unknown, is printed
    without one: key 0)."""
    out = {}
    for name, (flat, _, cum, _) in rows.items():
        fn, sp, where = name.rpartition(" ")
        if sp and fn == function:
            path, colon, line = where.rpartition(":")
            ln = int(line) if colon and line.isdigit() else 0
            f0, c0 = out.get(ln, (0, 0))
            out[ln] = (f0 + flat, c0 + cum)
    return out


def hot_spin(rows, function, what):
    """hotlines.lua's spin: its two loops (lines 6 and 7, one and three
    units of work) hold its time, about 1:3."""
    spin = at_lines(rows, function)
    total = sum(f for f, _ in spin.values())
    f6, f7 = spin.get(6, (0, 0))[0], spin.get(7, (0, 0))[0]
    t.check(total > 0 and f6 + f7 >= 0.9 * total and f6 > 0 and 1.5 * f6 < f7 < 6 * f6,
            "%s: -top -lines lists %s at its hot lines 6 and 7 (1:3 of the work), "
            "%.0f%% of its samples there ({line: (flat, cum)}: %s)"
            % (what, function, 100.0 * (f6 + f7) / (total or 1), spin))


def callers(rows, chunk, total, what):
    """run's call of spin (line 13) and the main chunk's call of run (17)
    are under nearly every sample."""
    for fn, line in (("run@%s:10" % chunk, 13), ("%s:0" % chunk, 17)):
        c = at_lines(rows, fn).get(line, (0, 0))[1]
        t.check(c >= 0.9 * total, "%s: -top -lines lists %s at its call, line %d, "
                                  "under %.0f%% of the samples" % (what, fn, line,
                                                                   100.0 * c / total))


def lines():
    """hotlines.lua under a default `ljperf record` (no --lines): the pprof
    profile lists spin at its hot lines, run and the main chunk at their
    calls; the folded profile keeps names without lines. JIT on, the lines
    of trace code come from the jitdump; -joff, the running line of the
    interpreted leaf comes from R13 (ljperf records it and gives it to
    lj_merge), in ljperf's profile and in lj_merge's own run over
    `perf script -F ...,uregs` of that recording."""
    t.need_perf()
    luajit = t.built("bin", "luajit")
    chunk = HOT_LUA
    with t.Session() as s:
        out = s.path("jit")
        r = s.ljperf(["record", "-o", out, "--", luajit, chunk, "1"])
        t.check(r.returncode == 0, "ljperf record (default options) on hotlines.lua")
        p = written(out)
        rows = top(p, "-sample_index=samples", "-lines")
        total = sum(v[0] for v in rows.values())
        hot_spin(rows, "spin@%s:4_[j]" % chunk, "JIT")
        callers(rows, chunk, total, "JIT")
        names = top(p, "-sample_index=samples")
        t.check("spin@%s:4_[j]" % chunk in names and "run@%s:10" % chunk in names,
                "-top: function names as in the folded output (%s)" % sorted(names))
        raw = go_pprof(["-raw"], p)
        t.check(re.search(r" spin@%s:4_\[j\] %s:7 s=4\(spin\)" % ((re.escape(chunk),) * 2),
                          raw) is not None,
                "-raw: spin's trace at line 7 with start line 4, system name spin")
        lua = {f for st in t.folded(out) for f in st.split(";") if chunk in f}
        defs = {"spin@%s:4" % chunk, "run@%s:10" % chunk, "%s:0" % chunk}
        t.check(lua and {f[:-len("_[j]")] if f.endswith("_[j]") else f for f in lua} <= defs,
                "profile.folded: Lua frames named without current lines, interpreted or "
                "in traces (%s)" % sorted(lua))

        off = s.path("joff")
        r = s.ljperf(["record", "-o", off, "--", luajit, "-joff", chunk, "1"])
        t.check(r.returncode == 0, "ljperf record on hotlines.lua, -joff")
        rows = top(written(off), "-sample_index=samples", "-lines")
        hot_spin(rows, "spin@%s:4" % chunk, "-joff")
        callers(rows, chunk, sum(v[0] for v in rows.values()), "-joff")
        data = os.path.join(off, "perf.jit.data")
        if not os.path.exists(data):
            data = os.path.join(off, "perf.data")
        script = s.path("script.txt")
        with open(script, "wb") as f:
            r = subprocess.run(["perf", "--buildid-dir", os.path.join(off, ".debug"), "script",
                                "-i", data, "-F", "comm,pid,tid,time,period,event,ip,sym,"
                                "symoff,dso,uregs", "--show-task-events"],
                               stdout=f, stderr=subprocess.PIPE)
        t.check(r.returncode == 0, "perf script -F ...,uregs of ljperf's -joff recording")
        prof = s.path("joff.pb.gz")
        folded = lj_merge(s, ["--jit-tag", "--jitdump", off, "--pprof", prof], script)
        with open(os.path.join(off, "profile.folded")) as f:
            t.check(folded == f.read(), "lj_merge --pprof with the registers: the folded "
                                        "output is ljperf's profile.folded, byte for byte")
        rows = top(prof, "-sample_index=samples", "-lines")
        hot_spin(rows, "spin@%s:4" % chunk, "-joff, R13")
        callers(rows, chunk, sum(v[0] for v in rows.values()), "-joff, R13")


def demo_and_processes():
    demo()
    processes()


if __name__ == "__main__":
    t.main({"units": units, "demo": demo_and_processes, "lines": lines}[sys.argv[1]])
