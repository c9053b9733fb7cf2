"""arm64.suites: under qemu-aarch64, LuaJIT with the ljperf series against
the control (the same tarball unpatched), both cross-built for aarch64.
The torture suite (tests/torture): every program with the JIT on and with
-joff, and the C host (lua_call/pcall/cpcall, resume/yield, errors at
every level, panic), identical in exit status, stdout and stderr
(tests/torture/compare.py). With --lj-tests TARBALL (tarantool/luajit's,
holding test/LuaJIT-tests): LuaJIT's own suite, +slow +ffi +bit +jit, JIT
on and -joff, every test the same result on both
(tests/luajit_suite/run.py), its libctest cross-built; lang/catch_cpp.lua
and catch_wrap.lua are left out (their libcpptest needs an aarch64 C++
compiler). Each of them twice: recording off (LUAJIT_PERF unset: the stock
handlers run) and on from the start (LUAJIT_PERF=1, given to the patched VM
alone: Lua frame records, and since 0009 the perf map and jitdump; the
jitdumps go to a temporary LUAJIT_PERF_DIR, removed with the perf maps of
the processes that wrote them).
Usage: test_suites.py TARBALL|DIR [--lj-tests TARBALL] [--known PROG.MODE=STATUS]... [PROG ...]
(TARBALL|DIR: the LuaJIT tree, tests/arm64/build-luajit's SOURCE. --known:
a torture program that this tree's own VM fails under qemu, the control
too: both must end with STATUS and the same output, C addresses masked.)
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from tests.lib.ljptest import check, dump_pids, fail, main, remove_tmp_files

HERE = os.path.dirname(os.path.abspath(__file__))
TORTURE = os.path.join(HERE, "..", "torture")
SYSROOT = "/usr/aarch64-linux-gnu"
CC = "aarch64-linux-gnu-gcc"
# Recording off (LUAJIT_PERF unset) and on from the start, for the patched VM.
SETTINGS = ("off", "1")
SETTINGS_MODES = [(s, m) for s in SETTINGS for m in ("jit", "joff")]
# Under qemu-aarch64 with both cores busy, a program sampled by jit.profile
# (SIGPROF every millisecond) dies of SIGSEGV in about 1 run of 100, the
# control as often as the patched VM (450 runs each, JIT on and -joff:
# control 7, patched 3). Such a pair is run again, twice at most; any
# other difference fails at once.
SIGNAL_RETRIES = {"profiler": 2}
QEMU_SEGV = "uncaught target signal 11"


def wrapper(path, program, argv0, *args):
    """A script running program under qemu with argv[0] set to argv0."""
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec qemu-aarch64 -L %s -0 %s %s %s"$@"\n'
                % (SYSROOT, argv0, program, "".join(a + " " for a in args)))
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
    return src, host


def lj_tests(tmp, tarball, src_p, src_b):
    """LuaJIT-tests from tarball, patched against control, JIT on and -joff."""
    with tarfile.open(tarball) as t:
        members = [m for m in t.getmembers() if "/test/LuaJIT-tests/" in m.name]
        t.extractall(os.path.join(tmp, "ljt"), members)
    suite = next(os.path.join(d, "test", "LuaJIT-tests")
                 for d in (os.path.join(tmp, "ljt", x) for x in os.listdir(os.path.join(tmp, "ljt"))))
    index = os.path.join(suite, "lang", "index")
    lines = open(index).read().split("\n")
    with open(index, "w") as f:
        f.write("\n".join(x for x in lines if not x.startswith(("catch_cpp.lua", "catch_wrap.lua"))))
    libs = os.path.join(tmp, "ljlibs")
    os.mkdir(libs)
    subprocess.run([CC, "-O2", "-shared", "-fPIC", "-I" + src_b, "-o",
                    os.path.join(libs, "libctest.so"), os.path.join(suite, "src", "libctest.c")],
                   check=True)
    for setting, mode in SETTINGS_MODES:
        flag = ("-joff",) if mode == "joff" else ()
        a = wrapper(os.path.join(tmp, "ljt-p-" + mode), os.path.join(src_p, "luajit"), "luajit", *flag)
        b = wrapper(os.path.join(tmp, "ljt-b-" + mode), os.path.join(src_b, "luajit"), "luajit", *flag)
        p = subprocess.run([sys.executable, "-m", "tests.luajit_suite.run"] +
                           (["--env", "LUAJIT_PERF=" + setting, "--perf-tmp"]
                            if setting != "off" else []) +
                           ["--env-both", "LUA_CPATH=%s/?.so" % libs,
                            "--env-both", "LD_LIBRARY_PATH=" + libs, os.path.join(suite, "test.lua"),
                            a, b, "--", "+slow", "+ffi", "+bit", "+jit"],
                           capture_output=True, text=True, timeout=1800)
        out = (p.stdout + p.stderr).strip()
        print(out)
        last = out.split("\n")[-1] if out else ""
        check(p.returncode == 0 and " pass" in last,
              "LuaJIT-tests %s, recording %s: every test the same result on patched and"
              " control (%s)" % (mode, setting, last))


def compare(patched, base, args, setting, dumps, env=(), status=0, expect_from=None,
            known=None):
    """compare.py's status: expect_from is a torture program stating its own
    exit status and masking (its "-- compare:" lines), else status holds;
    known (--known) overrides the program's, C addresses masked.
    Recording on: the patched VM's jitdumps into DUMPS."""
    cmd = [sys.executable, os.path.join(TORTURE, "compare.py"), "--patched", patched,
           "--base", base, "--cwd", TORTURE, "--require-output", "--timeout", "600"]
    # The command line's --expect-status would win over the program's own.
    if expect_from:
        cmd += ["--expect-from", os.path.join(TORTURE, expect_from)]
        if known is not None:
            cmd += ["--expect-status", str(known), "--mask-c-addresses"]
    else:
        cmd += ["--expect-status", str(status)]
    if setting != "off":
        cmd += ["--patched-env", "LUAJIT_PERF=" + setting,
                "--patched-env", "LUAJIT_PERF_DIR=" + dumps]
    for e in env:
        cmd += ["--env", e]
    p = subprocess.run(cmd + ["--"] + args, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def test():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return sys.argv[1:2] in (["-h"], ["--help"])
    only = sys.argv[2:]
    ljt = None
    known = {}
    while only[:1] in (["--lj-tests"], ["--known"]) and len(only) > 1:
        if only[0] == "--lj-tests":
            ljt = only[1]
        else:
            what, _, status = only[1].partition("=")
            known[what] = int(status)
        only = only[2:]
    tmp = tempfile.mkdtemp(prefix="ljp-arm64s-")
    dumps = os.path.join(tmp, "dumps")
    os.mkdir(dumps)
    try:
        src_p, host_p = build(tmp, "patched")
        src_b, host_b = build(tmp, "control")
        lj_p = wrapper(os.path.join(tmp, "luajit.patched"), os.path.join(src_p, "luajit"), "luajit")
        lj_b = wrapper(os.path.join(tmp, "luajit.control"), os.path.join(src_b, "luajit"), "luajit")
        host_p = wrapper(os.path.join(tmp, "host.patched"), host_p, "torture_host")
        host_b = wrapper(os.path.join(tmp, "host.control"), host_b, "torture_host")
        ffilib = os.path.join(tmp, "libljtorture_ffi.so")
        subprocess.run([CC, "-O2", "-fno-omit-frame-pointer", "-Wall", "-shared", "-fPIC",
                        "-o", ffilib, os.path.join(TORTURE, "ffilib.c")], check=True)
        progs = sorted(f[:-4] for f in os.listdir(os.path.join(TORTURE, "progs"))
                       if f.endswith(".lua") and not f.startswith("_"))
        if only:
            progs = [p for p in progs if p in only]
        check(len(progs) > 0, "%d torture programs" % len(progs))
        for prog in progs:
            for setting, mode in SETTINGS_MODES:
                args = (["-joff"] if mode == "joff" else []) + ["progs/%s.lua" % prog]
                for attempt in range(1 + SIGNAL_RETRIES.get(prog, 0)):
                    rc, out = compare(lj_p, lj_b, args, setting, dumps, ["TORTURE_FFILIB=" + ffilib],
                                      expect_from="progs/%s.lua" % prog,
                                      known=known.get("%s.%s" % (prog, mode)))
                    if rc == 0 or QEMU_SEGV not in out:
                        break
                    print("torture %s.%s, recording %s: a VM died of SIGSEGV under qemu,"
                          " run again" % (prog, mode, setting))
                check(rc == 0, "torture %s.%s, recording %s: patched = control under qemu%s"
                      % (prog, mode, setting, "" if rc == 0 else "\n" + out[-3000:]))
        if not only:
            for setting in SETTINGS:
                for what, status in (("all", 0), ("panic", 7)):
                    rc, out = compare(host_p, host_b, [what], setting, dumps, status=status)
                    check(rc == 0, "torture host %s, recording %s: patched = control under"
                          " qemu%s" % (what, setting, "" if rc == 0 else "\n" + out[-3000:]))
        if ljt:
            lj_tests(tmp, ljt, src_p, src_b)
    finally:
        remove_tmp_files(dump_pids(dumps))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(test)
