"""arm64.torture: the torture suite (tests/torture) under qemu-aarch64,
LuaJIT with the ljperf series against the control (the same tarball
unpatched), both cross-built for aarch64: every program with the JIT on
and with -joff, and the C host (lua_call/pcall/cpcall, resume/yield,
errors at every level, panic), identical in exit status, stdout and stderr
(tests/torture/compare.py). On arm64 the series' frame records are always
on (0008 has no run-time switch), so the patched runs record frames.
Usage: test_torture.py TARBALL [PROG ...]
"""

import os
import shutil
import subprocess
import sys
import tempfile

from tests.lib.ljptest import check, fail, main

HERE = os.path.dirname(os.path.abspath(__file__))
TORTURE = os.path.join(HERE, "..", "torture")
SYSROOT = "/usr/aarch64-linux-gnu"
CC = "aarch64-linux-gnu-gcc"
# As tests/torture/CMakeLists.txt: the control's exit status where not 0,
# and uncaught_error's traceback names C functions by address.
STATUS = {"exit_nested": 3, "exit_false_close": 1, "uncaught_error": 1}
MASK = {"uncaught_error"}


def wrapper(path, program, argv0):
    """A script running program under qemu with argv[0] set to argv0."""
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec qemu-aarch64 -L %s -0 %s %s "$@"\n' % (SYSROOT, argv0, program))
    os.chmod(path, 0o755)
    return path


def build(tmp, variant):
    """Cross-builds LuaJIT (variant: control or patched) and the torture host."""
    out = os.path.join(tmp, variant)
    cmd = [os.path.join(HERE, "build-luajit")] + (["--patched"] if variant == "patched" else [])
    p = subprocess.run(cmd + [sys.argv[1], out], capture_output=True, text=True)
    if p.returncode:
        fail("build-luajit %s: %s" % (variant, p.stderr.strip()))
    src = os.path.join(out, "luajit", "src")
    host = os.path.join(tmp, "torture_host." + variant)
    subprocess.run([CC, "-O2", "-g", "-fno-omit-frame-pointer", "-I" + src, "-o", host,
                    os.path.join(TORTURE, "host.c"), os.path.join(src, "libluajit.a"),
                    "-lm", "-ldl"], check=True)
    return (wrapper(os.path.join(tmp, "luajit." + variant), os.path.join(src, "luajit"), "luajit"),
            wrapper(os.path.join(tmp, "host." + variant), host, "torture_host"))


def compare(patched, base, args, env=(), status=0, mask=False):
    cmd = [sys.executable, os.path.join(TORTURE, "compare.py"), "--patched", patched,
           "--base", base, "--cwd", TORTURE, "--expect-status", str(status),
           "--require-output", "--timeout", "600"]
    for e in env:
        cmd += ["--env", e]
    if mask:
        cmd.append("--mask-c-addresses")
    p = subprocess.run(cmd + ["--"] + args, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def test():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return sys.argv[1:2] in (["-h"], ["--help"])
    only = sys.argv[2:]
    tmp = tempfile.mkdtemp(prefix="ljp-arm64t-")
    try:
        lj_p, host_p = build(tmp, "patched")
        lj_b, host_b = build(tmp, "control")
        ffilib = os.path.join(tmp, "libljtorture_ffi.so")
        subprocess.run([CC, "-O2", "-fno-omit-frame-pointer", "-Wall", "-shared", "-fPIC",
                        "-o", ffilib, os.path.join(TORTURE, "ffilib.c")], check=True)
        progs = sorted(f[:-4] for f in os.listdir(os.path.join(TORTURE, "progs"))
                       if f.endswith(".lua") and not f.startswith("_"))
        if only:
            progs = [p for p in progs if p in only]
        check(len(progs) > 0, "%d torture programs" % len(progs))
        for prog in progs:
            for mode in ("jit", "joff"):
                args = (["-joff"] if mode == "joff" else []) + ["progs/%s.lua" % prog]
                rc, out = compare(lj_p, lj_b, args, ["TORTURE_FFILIB=" + ffilib],
                                  STATUS.get(prog, 0), prog in MASK)
                check(rc == 0, "torture %s.%s: patched = control under qemu%s"
                      % (prog, mode, "" if rc == 0 else "\n" + out[-3000:]))
        if not only:
            for what, status in (("all", 0), ("panic", 7)):
                rc, out = compare(host_p, host_b, [what], status=status)
                check(rc == 0, "torture host %s: patched = control under qemu%s"
                      % (what, "" if rc == 0 else "\n" + out[-3000:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(test)
