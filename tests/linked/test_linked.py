#!/usr/bin/env python3
"""Stacks of trace code that other traces jump into (vm_patch 0007's links):
every caller is there, in order, under real perf with the VM's own seed.

usage: test_linked.py [RUNS]      (ctest linked.chains; RUNS default 10)

tests/linked/linked.lua runs six phases: loops three deep across
functions, a method loop calling a method with a loop, an up-recursion
whose bottom calls a loop, a side trace (a branch that turns hot late)
calling a loop, a loop whose body stitches (a C function no trace
compiles), and a loop resuming a coroutine whose loop calls a loop. Each
phase's innermost function runs in a trace entered from another trace that
made its callers' frames.

The truth is the interpreter's: one run with -joff gives each innermost
function's chain of Lua frames (main chunk to it). Then RUNS runs with the
JIT, each with LuaJIT's own random seed (trace shapes differ per run), are
recorded with `perf record --call-graph fp` and folded by lj_merge from the
jitdump. Of the samples whose innermost Lua frame is that function, in
every run:
  - >= 95% have exactly the truth's chain (a missing frame fails);
  - none has a frame the truth has not, or frames out of order (a wrong
    frame is worse than a missing one).
The table printed at the end has each phase's worst run first."""

import collections
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.lib import ljptest as t

PROG = os.path.join(HERE, "linked.lua")
LEAVES = {"nested": "l3", "method": "Obj:work", "uprec": "rleaf",
          "side": "sidework", "stitch": "stleaf", "coro": "coleaf"}
MIN_COMPLETE = 95.0     # percent of a leaf's samples, every run
MIN_SAMPLES = 100       # of a leaf, per run
FIELDS = "comm,pid,tid,time,ip,sym,symoff,dso"   # no period: a sample counts 1


def lua_chain(stack):
    """The Lua frames of a folded stack of linked.lua, root first, as
    function names ("l3", or the chunk's "linked.lua:LINE")."""
    out = []
    for f in stack.split(";"):
        if "linked.lua:" not in f:
            continue
        name, at, where = f.partition("@")
        out.append(name if at else os.path.basename(f))
    return tuple(out)


def record(sess, joff, tag):
    """{lua chain: weight} of one run of linked.lua under perf."""
    args = [t.binpath("luajit")] + (["-joff"] if joff else []) + \
        [PROG, "all", "0.1" if joff else "1"]
    data, _ = sess.record(args, env={"LUAJIT_PERF": "1"}, freq=4000,
                          out="perf-%s.data" % tag)
    text = sess.script_text(data, fields=FIELDS)
    r = subprocess.run([t.binpath("lj_merge"), "--jitdump", sess.dir],
                       input=text, capture_output=True, text=True)
    if r.returncode != 0:
        t.fail("lj_merge failed: " + r.stderr[-500:])
    chains = collections.Counter()
    for line in r.stdout.splitlines():
        stack, _, w = line.rpartition(" ")
        if stack:
            chains[lua_chain(stack)] += int(w)
    os.unlink(data)
    return chains


def by_leaf(chains):
    """{leaf: {chain: weight}} for the phases' innermost functions."""
    out = {leaf: collections.Counter() for leaf in LEAVES.values()}
    for ch, w in chains.items():
        if ch and ch[-1] in out:
            out[ch[-1]][ch] += w
    return out


def is_subsequence(ch, truth):
    it = iter(truth)
    return all(f in it for f in ch)


def test():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    t.need_perf()
    with t.PerfSession() as sess:
        truth = {}
        for leaf, cs in by_leaf(record(sess, True, "joff")).items():
            total = sum(cs.values())
            t.check(total >= 20, "-joff: %d samples in %s" % (total, leaf))
            ch, w = cs.most_common(1)[0]
            t.check(100.0 * w / total >= 99.0, "-joff: %s has one chain (%.1f%%): %s"
                    % (leaf, 100.0 * w / total, ";".join(ch)))
            truth[leaf] = ch
        rows = {leaf: [] for leaf in LEAVES.values()}
        for k in range(runs):
            for leaf, cs in by_leaf(record(sess, False, "jit%d" % k)).items():
                total = sum(cs.values())
                whole = cs.get(truth[leaf], 0)
                wrong = {ch: w for ch, w in cs.items() if not is_subsequence(ch, truth[leaf])}
                missing = collections.Counter({ch: w for ch, w in cs.items()
                                               if ch != truth[leaf] and ch not in wrong})
                rows[leaf].append((100.0 * whole / total if total else 0.0, total,
                                   sum(wrong.values()), wrong, missing))
        ok = True
        print("phase    leaf      worst  runs: complete%% (samples)")
        for phase, leaf in LEAVES.items():
            rs = sorted(rows[leaf], key=lambda r: r[0])
            print("%-8s %-9s %5.1f%%  %s" % (phase, leaf, rs[0][0],
                  " ".join("%.1f(%d)" % (r[0], r[1]) for r in rs)))
            for pct, total, nwrong, wrong, missing in rs:
                ok &= t.report(total >= MIN_SAMPLES, "%s: %d samples in %s in a run"
                               % (phase, total, leaf))
                ok &= t.report(pct >= MIN_COMPLETE, "%s: %.1f%% of %s's samples have its "
                               "whole chain (%s)" % (phase, pct, leaf, ";".join(truth[leaf])))
                if pct < MIN_COMPLETE:
                    for ch, w in missing.most_common(3):
                        print("    missing frames: %d  %s" % (w, ";".join(ch)))
                ok &= t.report(nwrong == 0, "%s: no sample of %s with a frame not on "
                               "the stack (%d)" % (phase, leaf, nwrong))
                for ch, w in sorted(wrong.items(), key=lambda x: -x[1])[:3]:
                    print("    wrong: %d  %s" % (w, ";".join(ch)))
        return ok


if __name__ == "__main__":
    t.main(test)
