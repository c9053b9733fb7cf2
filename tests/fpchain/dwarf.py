#!/usr/bin/env python3
"""`perf record --call-graph dwarf` still unwinds through the VM (CFI).

usage: dwarf.py VM   (luajit or luajit-base)

Samples in a C function called from Lua must reach main using DWARF
unwinding alone (perf copies 8 KiB of stack per sample).
"""
import os
import sys

from tests.lib import ljptest as T

HERE = os.path.dirname(os.path.abspath(__file__))
NEED = 0.95


def test():
    vm = sys.argv[1]
    env = {"LUA_CPATH": os.path.join(T.build_dir(), "tests", "fpchain", "?.so")}
    with T.PerfSession() as sess:
        data, _ = sess.record([T.binpath(vm), os.path.join(HERE, "cfunc.lua"), "600"],
                              env=env, freq=500, callgraph="dwarf", mono=False)
        samples = [s for s in sess.samples(data) if s.frames and s.frames[0][1] == "cmod_burn"]
        reach = [s for s in samples if T.has_sym(s, "main")]
        share = len(reach) / max(len(samples), 1)
        if reach:
            print("example:", " <- ".join(n or "?" for n in T.syms(reach[0])))
        return T.report(len(samples) > 50 and share >= NEED,
                        "%s: %d of %d samples in cmod_burn reach main with DWARF "
                        "unwinding (%.1f%%, need %.0f%%)" %
                        (vm, len(reach), len(samples), 100 * share, 100 * NEED))


if __name__ == "__main__":
    T.main(test)
