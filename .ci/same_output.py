#!/usr/bin/env python3
"""Does a tidy-up change behaviour? Runs the same commands from two source
trees and compares every output byte for byte.

usage: same_output.py OLD_ROOT NEW_ROOT [--mem-txt FILE] [--recorded DIR ...]
                      [--share DIR]

OLD_ROOT/NEW_ROOT: two checkouts (e.g. `git archive main | tar -x -C
/tmp/old` and the worktree). Per tree, into a fresh directory:
  - lj_merge on every perf script text under tests/lj_merge/fixtures, with
    its jitdump directory, under each option set of OPTION_SETS (folded,
    --lines, --tid, --pid, --keep-vm, --jit-tag, speedscope, pprof, kinds);
  - pprof.py --from-folded on the folded outputs of the default set;
  - with --mem-txt (perf script -F ...,uregs of a --mem recording, e.g.
    tests/lj_merge/memtraps under page-faults/period=1/u): lj_merge --mem
    with --inuse, --pprof, --kinds, and with --lines;
  - with --recorded DIR (an ljperf record output directory; copied, never
    written): ljperf report (default, --lines --per-thread), pprof.py
    --from-folded DIR, and ljperf diff of the DIRs (page and folded).
    --share: the flame graph renderer (LJPERF_SHARE) for the pages.
Stdout, stderr, exit status and every written file are compared; the first
differences are printed. Exit 0 when all are identical."""

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

FIXTURE_DIR = os.path.join("tests", "lj_merge", "fixtures")
OPTION_SETS = {
    "default": [],
    "lines": ["--lines"],
    "lines-jit-tid": ["--lines", "--jit-tag", "--tid"],
    "pid-jit": ["--pid", "--jit-tag"],
    "keep-vm": ["--keep-vm"],
    "speedscope": ["--format", "speedscope"],
    "pprof": ["--format", "pprof", "-o", "{out}/out.pb.gz"],
    "record-pass": ["--jit-tag", "--pprof", "{out}/p.pb.gz", "--kinds", "{out}/k.kinds"],
}
MEM_SETS = {
    "mem": ["--mem", "--inuse", "{out}/inuse.folded", "--pprof", "{out}/mem.pb.gz",
            "--kinds", "{out}/mem.kinds"],
    "mem-lines": ["--mem", "--lines", "--tid"],
}


def fixture_inputs(root):
    """[(name, path, jitdump dir)] of the perf script texts in the fixtures."""
    fix = os.path.join(root, FIXTURE_DIR)
    out = []
    for d, _, files in sorted(os.walk(fix)):
        for f in sorted(files):
            if not f.endswith(".txt"):
                continue
            rel = os.path.relpath(os.path.join(d, f), fix)
            if rel.startswith("real" + os.sep):
                dump = d
            elif f.startswith("fakevm"):
                dump = os.path.join(fix, "fakevm")
            else:
                dump = os.path.join(fix, "nodump")
            out.append((rel.replace(os.sep, "_")[:-4], os.path.join(d, f), dump))
    return out


def run(argv, outdir, env=None):
    """Runs ARGV; its stdout, stderr and status go to files in OUTDIR."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "stdout"), "wb") as so, \
            open(os.path.join(outdir, "stderr"), "wb") as se:
        rc = subprocess.call(argv, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                             env=env)
    with open(os.path.join(outdir, "status"), "w") as f:
        f.write("%d\n" % rc)


def expand(args, out):
    return [a.replace("{out}", out) for a in args]


def run_tree(root, fixroot, work, mem_txt, recorded, share):
    """Every command from ROOT's code (inputs from FIXROOT) into WORK."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if share:
        env["LJPERF_SHARE"] = share
    py = sys.executable
    lj_merge = os.path.join(root, "perf-script", "lj_merge.py")
    pprof = os.path.join(root, "perf-script", "pprof.py")
    ljperf = os.path.join(root, "tools", "ljperf", "ljperf.py")
    for name, path, dump in fixture_inputs(fixroot):
        for oname, opts in OPTION_SETS.items():
            out = os.path.join(work, "lj_merge", name, oname)
            os.makedirs(out)
            run([py, lj_merge, "--jitdump", dump] + expand(opts, out) + [path], out, env)
        out = os.path.join(work, "pprof", name)
        os.makedirs(out)
        run([py, pprof, "--from-folded", os.path.join(work, "lj_merge", name, "default",
                                                      "stdout"),
             "-o", os.path.join(out, "p.pb.gz")], out, env)
    if mem_txt:
        for oname, opts in MEM_SETS.items():
            out = os.path.join(work, "mem", oname)
            os.makedirs(out)
            run([py, lj_merge] + expand(opts, out) + [mem_txt], out, env)
    dirs = []
    for i, rec in enumerate(recorded):
        for oname, opts in (("report", []), ("report-lines", ["--lines", "--per-thread"])):
            d = os.path.join(work, "recorded%d" % i, oname, "dir")
            shutil.copytree(rec, d, symlinks=True)
            run([py, ljperf, "report"] + opts + [d], os.path.dirname(d), env)
            for f in ("perf.jit.data", "perf.data"):   # perf's own files, not ours
                if os.path.exists(os.path.join(d, f)):
                    os.unlink(os.path.join(d, f))
            if not opts:
                dirs.append(d)
        out = os.path.join(work, "recorded%d" % i, "pprof")
        os.makedirs(out)
        run([py, pprof, "--from-folded", rec, "-o", os.path.join(out, "p.pb.gz")], out, env)
    if len(dirs) >= 2:
        for oname, opts in (("page", []), ("folded", ["--format", "folded"])):
            out = os.path.join(work, "diff", oname)
            os.makedirs(out)
            run([py, ljperf, "diff"] + opts + [dirs[0], dirs[1], "-o",
                                               os.path.join(out, "diff.out")], out, env)


def compare(a, b):
    """[relative paths that differ or exist on one side only]."""
    diffs = []
    cmp = filecmp.dircmp(a, b)
    todo = [("", cmp)]
    while todo:
        rel, c = todo.pop()
        diffs += [os.path.join(rel, n) + " (one side only)" for n in c.left_only + c.right_only]
        for n in c.common_files:
            if not filecmp.cmp(os.path.join(c.left, n), os.path.join(c.right, n), shallow=False):
                diffs.append(os.path.join(rel, n))
        todo += [(os.path.join(rel, n), s) for n, s in c.subdirs.items()]
    return sorted(diffs)


def count_files(d):
    return sum(len(fs) for _, _, fs in os.walk(d))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old_root")
    ap.add_argument("new_root")
    ap.add_argument("--mem-txt", metavar="FILE")
    ap.add_argument("--recorded", metavar="DIR", nargs="*", default=[])
    ap.add_argument("--share", metavar="DIR")
    ap.add_argument("--keep", action="store_true", help="keep the outputs, print where")
    o = ap.parse_args()
    for r in (o.old_root, o.new_root):
        if not os.path.isfile(os.path.join(r, "perf-script", "lj_merge.py")):
            sys.exit("same_output.py: %s is not an ljperf source tree" % r)
    work = tempfile.mkdtemp(prefix="same_output.")
    try:
        # Paths inside outputs must not differ: both trees read the NEW
        # tree's fixtures and write into the same directory, renamed after.
        out, old, new = (os.path.join(work, n) for n in ("out", "old", "new"))
        fix = os.path.abspath(o.new_root)
        for root, dest in ((o.old_root, old), (o.new_root, new)):
            run_tree(os.path.abspath(root), fix, out, o.mem_txt, o.recorded, o.share)
            os.rename(out, dest)
        diffs = compare(old, new)
        for d in diffs[:40]:
            print("differs: " + d)
        print("%d files compared, %d differ" % (count_files(old), len(diffs)))
        return 1 if diffs else 0
    finally:
        if o.keep:
            print("outputs in " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
