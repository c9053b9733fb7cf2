#!/usr/bin/env python3
"""lj_merge speed benchmark: prints input lines per second, and the ratio
to a stackcollapse on the same input.

usage: python3 -m bench.lj_merge [--runs N] [--min-lines N] [--args "LJ_MERGE ARGS"] [--stages] [FILE...]

With FILEs (perf script text, e.g. `perf script > big.txt`), each is
processed as is. Without, a >= --min-lines (default 1.2M) input is built in
a temporary file from the real captures in fixtures/ (fakevm-rawF.txt:
no inject, uregs, so the jitdump fallback and BX paths run; fakevm-inject.txt;
cstack.txt), their samples repeated with increasing timestamps.

Over it, side by side: bench/stackcollapse.pl (perl; FlameGraph's
stackcollapse-perf.pl's one loop with its default options), then lj_merge
with the default (folded), --lines, --lines --jit-tag --tid, and --jit-tag
--pprof /dev/null (ljperf record's pass: folded output and a pprof
profile, whose Lua frames carry their lines); each lj_merge line ends with
its speed as a multiple of stackcollapse's (CPU time). Every tool runs as a
subprocess (output to /dev/null); the best of --runs runs is reported, as
wall-clock and as CPU time of the child (user+sys; the machine may be
shared). The target is >= 10x stackcollapse, default and --lines.

A real large capture (1.26M lines, root): build capture/fakevm.c, then
  perf record -k mono -g --call-graph fp --user-regs=r13 -F 10000 -o p.data \
      ./fakevm 2.4 $PWD
  perf script -i p.data > raw.txt
  perf script -i p.data -F comm,pid,tid,time,period,event,ip,sym,symoff,dso,uregs > rawF.txt
  perf inject --jit -i p.data -o j.data && perf script -i j.data > inject.txt
  python3 -m bench.lj_merge --args "--jitdump $PWD" raw.txt inject.txt
  python3 -m bench.lj_merge --args "--lines --jit-tag --tid --jitdump $PWD" rawF.txt

--stages: where lj_merge's CPU time goes on each input instead (no
stackcollapse): start-up (lj_merge on an empty input), the C-level
stages of the folded path (ljperf.perfscript.Reader.tallies: read, join,
cut at headers, count texts) timed block by block, and the rest of the
whole run (Python: distinct texts parsed, the merger, fold, write).

Against perf script itself (lj_merge must not be the slower end of the
pipe): --perf-data P.data times `perf script -i P.data PERF-ARGS` (best of
--runs, output to a file in a temporary directory), then lj_merge on that
very output. The real patched VM, e.g. the demo (deep stacks) at 5 kHz:
  LUAJIT_PERF=1 LUAJIT_PERF_DIR=$PWD perf record -k mono -g --call-graph fp \
      --user-regs=r13 -F 4999 -o demo.data build/examples/demo/fibdemo 7.5
  perf inject --jit -i demo.data -o demo.jit.data
  python3 -m bench.lj_merge --perf-data demo.data --args "--jitdump $PWD"
  python3 -m bench.lj_merge --perf-data demo.jit.data --perf-args "-F comm,pid,tid,time,period,\
      event,ip,sym,symoff,dso,uregs --show-task-events" --args "--jitdump $PWD"
(and capture/real/jit.lua at 10 kHz for 8 s for short stacks)."""
import argparse
import os
import resource
import subprocess
import sys

import tempfile
import time

# Compiled bytecode cached outside the source tree (no __pycache__ in it),
# as an installed lj_merge has it: the runs time lj_merge, not the compiler.
os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(),
                                                 "lj_merge_bench.pycache.%d" % os.getuid())
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIX = os.path.join(ROOT, "tests", "lj_merge", "fixtures")
LJ_MERGE = os.environ.get("LJ_MERGE", os.path.join(ROOT, "perf-script", "lj_merge.py"))
STACKCOLLAPSE = os.path.join(HERE, "stackcollapse.pl")


def samples(path):
    """Splits perf script text into samples (lists of lines incl. header)."""
    out, cur = [], None
    with open(path) as f:
        for ln in f:
            if not ln.strip():
                if cur:
                    out.append(cur)
                cur = None
            elif ln[0] not in " \t":
                if cur:
                    out.append(cur)
                cur = [ln]
            elif cur is not None:
                cur.append(ln)
    if cur:
        out.append(cur)
    return out


def shift_time(header, dt):
    toks = header.split(" ")
    for i, t in enumerate(toks):
        if t.endswith(":") and "." in t and t[:-1].replace(".", "").isdigit():
            a, b = t[:-1].split(".")
            us = int(a) * 1000000 + int(b) + dt
            toks[i] = "%d.%06d:" % divmod(us, 1000000)
            break
    return " ".join(toks)


def build_input(min_lines, fd):
    parts = [samples(os.path.join(FIX, n))
             for n in ("fakevm-rawF.txt", "fakevm-inject.txt", "cstack.txt")]
    n = 0
    rnd = 0
    with os.fdopen(fd, "w") as out:
        while n < min_lines:
            for ss in parts:
                for s in ss:
                    out.write(shift_time(s[0], rnd * 10000000))
                    out.writelines(s[1:])
                    n += len(s)
                    if not s[-1].startswith(" ABI"):
                        out.write("\n")
                        n += 1
            rnd += 1
    return n


def count_lines(path):
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return n
            n += b.count(b"\n")


def bench(path, args, runs, cmd=None, base=None):
    """Times CMD (default: lj_merge ARGS) on PATH; returns its CPU lines/s.
    BASE: stackcollapse's, to print the ratio."""
    lines = count_lines(path)
    cmd = cmd or [sys.executable, LJ_MERGE] + args
    best = None
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd + [path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if p.returncode != 0:
            sys.exit("%s failed (%d): %s" % (os.path.basename(cmd[1]), p.returncode,
                                            p.stderr.decode()))
        if best is None or cpu < best[1]:
            best = (wall, cpu)
    wall, cpu = best
    print("%s: %d lines, wall %.2f s = %.0f lines/s, cpu %.2f s = %.0f lines/s%s%s"
          % (os.path.basename(path), lines, wall, lines / wall, cpu, lines / cpu,
             "  [%s]" % " ".join([os.path.basename(cmd[1])] + args),
             "  %.1fx stackcollapse" % (lines / cpu / base) if base else ""))
    return lines / cpu


def side_by_side(path, args, runs):
    """stackcollapse, then lj_merge ARGS with each setting, on PATH."""
    base = bench(path, [], runs, cmd=["perl", STACKCOLLAPSE])
    bench(path, args, runs, base=base)
    bench(path, args + ["--lines"], runs, base=base)
    bench(path, args + ["--lines", "--jit-tag", "--tid"], runs, base=base)
    # what ljperf record runs: folded output and a pprof profile (with
    # every Lua frame's line) in one pass
    bench(path, args + ["--jit-tag", "--pprof", os.devnull], runs, base=base)


def stages(path, args, runs):
    """Prints where lj_merge ARGS spends its CPU time on PATH (--stages)."""
    sys.path.insert(0, ROOT)
    import collections
    from ljperf import merge_cli, perfscript
    clock = time.process_time

    def blocks():
        acc = collections.Counter()
        with open(path, "rb") as f:
            it = perfscript.read_blocks(f, perfscript.Stats())
            while True:
                t0 = clock()
                parts = next(it, None)
                t1 = clock()
                if parts is None:
                    return acc
                data = b"".join((b"\n",) + parts)
                t2 = clock()
                p = perfscript._HEADS(data)
                t3 = clock()
                collections.Counter(zip(p[1:-3:3], p[3:-3:3]))
                acc["read"] += t1 - t0
                acc["join"] += t2 - t1
                acc["cut"] += t3 - t2
                acc["count"] += clock() - t3

    def whole():
        t = clock()
        merge_cli.main(args + ["-o", os.devnull, path])
        return clock() - t

    with tempfile.NamedTemporaryFile(prefix="lj_merge_bench.", suffix=".txt") as empty:
        start = min(bench_cpu([sys.executable, LJ_MERGE, "-o", os.devnull, empty.name])
                    for _ in range(runs))
    c = min((blocks() for _ in range(runs)), key=lambda a: sum(a.values()))
    w = min(whole() for _ in range(runs))
    print("%s: start-up %.3f s; read %.3f, join %.3f, cut at headers %.3f, count texts %.3f "
          "(C-level %.3f); whole run %.3f, rest (Python) %.3f"
          % (os.path.basename(path), start, c["read"], c["join"], c["cut"], c["count"],
             sum(c.values()), w, w - sum(c.values())))


def bench_cpu(cmd):
    """CPU time (user+sys) of running CMD."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def bench_perf_script(data, perf_args, runs):
    """Times perf script on DATA; returns the path of its output (in a
    temporary directory the caller removes)."""
    d = tempfile.mkdtemp(prefix="lj_merge_bench.")
    out = os.path.join(d, "script.txt")
    cmd = ["perf", "script", "-i", data] + perf_args
    best = None
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        with open(out, "wb") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if p.returncode != 0:
            sys.exit("perf script failed (%d): %s" % (p.returncode, p.stderr.decode()[-300:]))
        if best is None or wall < best[0]:
            best = (wall, cpu)
    lines = count_lines(out)
    wall, cpu = best
    print("perf script %s: %d lines, wall %.2f s = %.0f lines/s, cpu %.2f s = %.0f lines/s"
          % (" ".join([os.path.basename(data)] + perf_args), lines, wall, lines / wall,
             cpu, lines / cpu))
    return d, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--perf-data", metavar="P.data",
                    help="time perf script on it, then lj_merge on its output")
    ap.add_argument("--perf-args", default="", help="perf script arguments")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--min-lines", type=int, default=1200000)
    ap.add_argument("--stages", action="store_true",
                    help="where lj_merge's CPU time goes, instead of the side by side")
    ap.add_argument("--args", default=None,
                    help="lj_merge arguments (default: --jitdump fixtures/fakevm "
                         "for the built input, none for FILEs)")
    o = ap.parse_args()
    if o.perf_data:
        d, out = bench_perf_script(o.perf_data, o.perf_args.split(), o.runs)
        try:
            side_by_side(out, o.args.split() if o.args else [], o.runs)
        finally:
            import shutil
            shutil.rmtree(d, ignore_errors=True)
        return
    run = stages if o.stages else side_by_side
    if o.files:
        args = o.args.split() if o.args else []
        for f in o.files:
            run(f, args, o.runs)
        return
    fd, path = tempfile.mkstemp(prefix="lj_merge_bench.", suffix=".txt")
    try:
        n = build_input(o.min_lines, fd)
        print("built %s: %d lines from fixtures/" % (path, n))
        args = (o.args.split() if o.args else
                ["--jitdump", os.path.join(FIX, "fakevm")])
        run(path, args, o.runs)
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
