#!/usr/bin/env python3
"""Which code syncs the Lua frame records when a trace exits.

usage: exitpaths.py

vm_exit_interp links the records of the frames a trace created in assembly
(lj_vm_fp_exitlinks .. lj_vm_fp_exitlinked) for a plain instruction above
the trace's lowest frame, through vararg frames, and when the trace
stitched (a C function called through a continuation) above its lowest
frame; stitched at its lowest frame, it only points rbp at that frame's
record (lj_vm_fp_exitstitch); other cases call lj_fprec_exit (C). The
identity tests check that the chains are right; this test checks, with gdb
counting breakpoint hits, that their workloads really take the assembly
paths and not C, so those paths are the ones tested.

With recording off, an exit resets rbp to its VM entry's record
(lj_vm_fp_exit_off) once recording has ever been on in the process, and
skips that before (rbp cannot point at a record then): checked on the
traceexit workload without LUAJIT_PERF, and after a start and a stop.
"""
import os
import re

from tests.lib import ljptest as T

HERE = os.path.dirname(os.path.abspath(__file__))
ASM_DONE, ASM_STITCH, C_SYNC = "lj_vm_fp_exitlinked", "lj_vm_fp_exitstitch", "lj_fprec_exit"
EXIT, EXIT_OFF = "lj_vm_exit_interp", "lj_vm_fp_exit_off"
START_STOP = 'local p = require("jit.perf") assert(p.start("frames")) p.stop("frames")'

# program, argument, the assembly path most of its exits take: every exit of
# these is handled in assembly
PROGRAMS = [("stitch", "2", ASM_STITCH),      # stitched at the lowest frame
            ("traceexit", "2000", ASM_DONE),  # side exit and stitch in inlined frames
            ("exitvarg", "2000", ASM_DONE),   # the same above a vararg frame
            ("tailstitch", "300", ASM_STITCH),  # stitched at the lowest frame
            ("tailinline", "300", ASM_DONE)]    # above it, after a tail call there


def hits(prog, arg, syms=(ASM_DONE, ASM_STITCH, C_SYNC), frames=True, pre=None):
    """{symbol: breakpoint hits} for one run of PROG (LUAJIT_PERF=frames or
    unset; PRE: a chunk luajit -e runs first)."""
    env = dict(os.environ)
    env["LUA_CPATH"] = os.path.join(T.build_dir(), "tests", "fpchain", "?.so")
    env.pop("LUAJIT_PERF", None)
    if frames:
        env["LUAJIT_PERF"] = "frames"
    cmd = ["gdb", "-batch", "-nx"]
    for i, sym in enumerate(syms):
        cmd += ["-ex", "break *%s" % sym, "-ex", "ignore %d 1000000000" % (i + 1)]
    cmd += ["-ex", "run", "-ex", "info breakpoints", "--args", T.binpath("luajit")]
    cmd += ["-e", pre] if pre else []
    cmd += [os.path.join(HERE, prog + ".lua"), arg]
    r = T.run(cmd, env=env, timeout=300)
    if "\ntrue" not in "\n" + r.stdout:
        T.fail("%s.lua did not run to its end under gdb:\n%s%s" % (prog, r.stdout[-800:],
                                                                 r.stderr[-800:]))
    out, sym = {s: 0 for s in syms}, None
    for line in r.stdout.splitlines():
        if re.match(r"^\d+\s+breakpoint\s", line):  # a breakpoint's row
            sym = next((s for s in out if s in line), None)
        m = re.search(r"already hit (\d+) time", line)
        if m and sym:
            out[sym] = int(m.group(1))
    return out


def test():
    ok = True
    for prog, arg, path in PROGRAMS:
        h = hits(prog, arg)
        ok &= T.report(h[path] > 100 and h[C_SYNC] == 0,
                       "%s: %d trace exits linked in assembly (%d at %s), %d synced in C"
                       % (prog, h[ASM_DONE] + h[ASM_STITCH], h[path], path, h[C_SYNC]))
    h = hits("traceexit", "2000", (EXIT, EXIT_OFF), frames=False)
    ok &= T.report(h[EXIT] > 100 and h[EXIT_OFF] == 0,
                   "never on: %d trace exits, %d reset rbp" % (h[EXIT], h[EXIT_OFF]))
    h = hits("traceexit", "2000", (EXIT, EXIT_OFF), frames=False, pre=START_STOP)
    ok &= T.report(h[EXIT] > 100 and h[EXIT_OFF] >= h[EXIT],
                   "on, then off: %d trace exits, %d reset rbp" % (h[EXIT], h[EXIT_OFF]))
    return ok


if __name__ == "__main__":
    T.main(test)
