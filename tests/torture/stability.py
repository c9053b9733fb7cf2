#!/usr/bin/env python3
"""Determinism check for the torture programs themselves (not a VM test).

Runs every program (or --only a,b) N times on one VM in both modes, with
varying argv[0] and environment size (which moves the stack and, through
ASLR, all addresses around), and reports programs whose exit status, stdout
or stderr are not identical across runs. A program that is not stable on the
control VM cannot be compared byte for byte; fix the program.

  stability.py --vm build/bin/luajit-base --ffilib build/tests/torture/libljtorture_ffi.so -n 20
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vm", required=True)
    ap.add_argument("--ffilib", required=True)
    ap.add_argument("-n", type=int, default=10, help="runs per program and mode")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--modes", default="jit,joff")
    opts = ap.parse_args()
    progdir = os.path.join(HERE, "progs")
    progs = sorted(f[:-4] for f in os.listdir(progdir)
                   if f.endswith(".lua") and not f.startswith("_"))
    if opts.only:
        want = opts.only.split(",")
        progs = [p for p in progs if p in want]
    bad = 0
    for prog in progs:
        for mode in opts.modes.split(","):
            args = (["-joff"] if mode == "joff" else []) + ["progs/%s.lua" % prog]
            seen = {}
            for i in range(opts.n):
                env = dict(os.environ)
                for k in ("LUA_PATH", "LUA_CPATH", "LUA_INIT", "LUAJIT_PERF"):
                    env.pop(k, None)
                env["TORTURE_FFILIB"] = opts.ffilib
                env["TORTURE_PAD"] = "x" * (i * 37 % 4096)
                argv0 = ["luajit", "luajit-base", opts.vm, "l"][i % 4]
                p = subprocess.run([argv0] + args, executable=opts.vm, cwd=HERE, env=env,
                                   stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=300)
                # argv[0] shows up in uncaught-error messages; normalise it
                err = p.stderr.replace(argv0.encode() + b":", b"ARGV0:")
                # the standalone's own C frame in uncaught-error tracebacks
                err = re.sub(rb"\[C\]: at 0x[0-9a-f]+", b"[C]: at 0xADDR", err)
                key = hashlib.sha1(b"%d\0" % p.returncode + p.stdout + b"\0" + err).hexdigest()
                seen.setdefault(key, []).append((i, p.returncode))
            status = "stable" if len(seen) == 1 else "UNSTABLE"
            if len(seen) != 1:
                bad += 1
            codes = sorted({rc for runs in seen.values() for _, rc in runs})
            print("%-22s %-5s %s (%d distinct outputs, exit codes %s)" %
                  (prog, mode, status, len(seen), codes), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
