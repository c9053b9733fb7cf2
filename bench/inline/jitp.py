#!/usr/bin/env python3
"""Self time per Lua function: ljperf (perf samples, inlined trace frames)
next to LuaJIT's own profiler jit.p, on the same programs. Not a test.

  python3 -m bench.inline.jitp [--bin-dir build/bin] [--top 6] [PROG.lua ...]

Default programs: bench/progs/*.lua at bench/run.py's JIT sizes (a program
not there runs without arguments). For each program: `ljperf record -F
999` (JIT on), each sample charged to its innermost Lua frame (a trace's
inlined functions count as frames; C functions charge their Lua caller);
then `luajit -jp=F` (jit.p: function-level samples, which it takes at
checks it compiles into the traces). Prints each one's top functions with
both shares and whether the ranking of the top three agrees. jit.p and
ljperf name functions differently (jit.p: FILE:NAME, ljperf: NAME@FILE:LINE);
both are cut to NAME.
"""

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from bench import run  # bench/run.py: program sizes


def short(label):
    """One name for both: f3@/path/x.lua:29_[j] (ljperf) and x.lua:f3 (jit.p)
    -> f3; an unnamed function (/path/x.lua:12, x.lua:12) -> x.lua:12."""
    label = re.sub(r"_\[j\]$", "", label)
    if "@" in label:
        return label.split("@", 1)[0]
    head, _, tail = label.rpartition(":")
    if head and not tail.isdigit():
        return tail
    return os.path.basename(label)


def ljperf_shares(binary, prog, args, ljperf):
    d = tempfile.mkdtemp(prefix="ljperf-jitp-")
    try:
        r = subprocess.run([sys.executable, ljperf, "record", "-o", d, "-F", "999", "--",
                            binary, prog] + args, capture_output=True, text=True)
        kinds = {}
        with open(os.path.join(d, "profile.kinds")) as f:
            for ln in f:
                k, _, name = ln.rstrip("\n").partition("\t")
                kinds[name] = k
        c = collections.Counter()
        with open(os.path.join(d, "profile.folded")) as f:
            for ln in f:
                s, _, n = ln.rstrip("\n").rpartition(" ")
                lua = [fr for fr in s.split(";") if kinds.get(fr) in ("lua", "trace")]
                if lua:
                    c[short(lua[-1])] += int(n)
        if r.returncode != 0 and not c:
            sys.exit("ljperf record failed on %s: %s" % (prog, r.stderr[-300:]))
        return c
    finally:
        shutil.rmtree(d, ignore_errors=True)


def jitp_shares(binary, prog, args):
    r = subprocess.run([binary, "-jp=F", prog] + args, capture_output=True, text=True)
    c = collections.Counter()
    for ln in r.stdout.splitlines():
        m = re.match(r"^\s*(\d+)%\s+(\S.*)$", ln)
        if m:
            c[short(m.group(2).strip())] += int(m.group(1))
    return c


def pct(c):
    tot = sum(c.values()) or 1
    return {k: 100.0 * v / tot for k, v in c.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply bench/run.py's JIT sizes")
    ap.add_argument("progs", nargs="*")
    o = ap.parse_args()
    binary = os.path.join(o.bin_dir, "luajit")
    ljperf = os.path.join(ROOT, "tools", "ljperf", "ljperf.py")
    progs = o.progs or sorted(glob.glob(os.path.join(ROOT, "bench", "progs", "*.lua")))
    agree = 0
    for prog in progs:
        name = os.path.basename(prog)[:-4]
        args = [str(int(run.SIZES[name][0] * o.scale))] if name in run.SIZES else []
        a = pct(ljperf_shares(binary, prog, args, ljperf))
        b = pct(jitp_shares(binary, prog, args))
        names = sorted(set(a) | set(b), key=lambda k: -max(a.get(k, 0), b.get(k, 0)))
        print("%s" % os.path.basename(prog))
        print("  %-24s %8s %8s" % ("function", "ljperf", "jit.p"))
        for k in names[:o.top]:
            print("  %-24s %7.1f%% %7.1f%%" % (k, a.get(k, 0), b.get(k, 0)))
        ra = [k for k, _ in sorted(a.items(), key=lambda x: -x[1]) if a[k] >= 5][:3]
        rb = [k for k, _ in sorted(b.items(), key=lambda x: -x[1]) if b[k] >= 5][:3]
        same = ra == rb
        agree += same
        print("  top (>= 5%%): ljperf %s, jit.p %s: %s" % (ra, rb, "agree" if same else "DIFFER"))
    print("ranking agrees on %d of %d programs" % (agree, len(progs)))


if __name__ == "__main__":
    main()
