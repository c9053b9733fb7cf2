#!/usr/bin/env python3
"""gdb backtraces through the VM (its .eh_frame CFI) still work.

usage: gdb_bt.py VM   (luajit or luajit-base)

Stops in a C function called from Lua and checks that `bt` walks from it
through the interpreter to lua_pcall and main without a broken frame.
"""
import os
import sys

from tests.lib import ljptest as T

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ["cmod_burn", "cmod_spin", "lua_pcall", "main"]


def test():
    vm = sys.argv[1]
    env = dict(os.environ)
    env["LUA_CPATH"] = os.path.join(T.build_dir(), "tests", "fpchain", "?.so")
    r = T.run(["gdb", "-batch", "-nx", "-ex", "set breakpoint pending on",
               "-ex", "break cmod_burn", "-ex", "run", "-ex", "bt",
               "--args", T.binpath(vm), os.path.join(HERE, "cfunc.lua"), "3"],
              env=env, timeout=120)
    frames = [l for l in r.stdout.splitlines() if l.startswith("#")]
    print("\n".join(frames))
    names = []
    for l in frames:
        parts = l.split()
        # "#3  0x... in lua_pcall (...)" or "#0  cmod_burn (n=...) at ..."
        name = parts[3] if len(parts) > 3 and parts[2] == "in" else parts[1]
        names.append(name)
    pos, ok = 0, True
    for n in names:
        if pos < len(ORDER) and n == ORDER[pos]:
            pos += 1
    ok &= T.report(pos == len(ORDER), "bt shows %s in order" % " <- ".join(ORDER))
    ok &= T.report(any(n.startswith("lj_") for n in names),
                   "bt passes through the VM (lj_* frames)")
    bad = [l for l in r.stdout.splitlines() + r.stderr.splitlines()
           if "Backtrace stopped" in l or "corrupt stack" in l]
    ok &= T.report(not bad, "no broken frame: %s" % (bad or "none"))
    return ok


if __name__ == "__main__":
    T.main(test)
