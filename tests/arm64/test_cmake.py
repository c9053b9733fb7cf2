"""arm64.cmake: ljperf's own CMake build for an aarch64 target, cross-built
here through tests/arm64/toolchain-aarch64.cmake: the path a native arm64
configure takes (LJPERF_ARCH arm64, tests/arm64/on-hardware's build). The
series applies to the tree, the patched luajit and examples/demo's fibdemo
are aarch64 executables whose leaf functions keep frame records (lua_gettop,
fib_c_seconds begin with "stp x29, x30"), and the demo runs under
qemu-aarch64 with recording on (LUAJIT_PERF=1), printing its Lua/C split
and writing its jitdump (into the test's directory; its perf map removed).
A copy of the tree whose vm_arm64.dasc carries neither arm64 part's marker
(an arm64 VM older than both, as Tarantool 2.6's) is refused at configure
in one line naming the VM.
Usage: test_cmake.py TARBALL
"""

import os
import re
import subprocess
import sys
import tarfile
import tempfile

from tests.lib.ljptest import EM_AARCH64, check, elf_machine, fail, main, remove_tmp_files

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLCHAIN = os.path.join(HERE, "toolchain-aarch64.cmake")
QEMU = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]


def first_insn(binary, symbol):
    """The first instruction of SYMBOL in BINARY (objdump's text)."""
    out = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn",
                          "--disassemble=" + symbol, binary],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"<%s>:\n\s*[0-9a-f]+:\s*(.+)" % re.escape(symbol), out)
    if not m:
        fail("%s: no %s in the disassembly" % (os.path.basename(binary), symbol))
    return " ".join(m.group(1).split())


def run(argv, log, **kw):
    with open(log, "a") as f:
        r = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, **kw)
    if r.returncode != 0:
        with open(log, errors="replace") as f:
            tail = f.read()[-3000:]
        fail("%s exited %d:\n%s" % (" ".join(argv[:3]), r.returncode, tail))


def test(tarball):
    with tempfile.TemporaryDirectory(prefix="ljperf-arm64-cmake-") as tmp:
        with tarfile.open(tarball) as t:
            t.extractall(tmp)
        src = os.path.join(tmp, os.listdir(tmp)[0])
        build = os.path.join(tmp, "build")
        log = os.path.join(tmp, "build.log")
        run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_TOOLCHAIN_FILE=" + TOOLCHAIN,
             "-DLJPERF_LUAJIT_SOURCE=" + src, "-DLJPERF_FLAMEGRAPH=OFF"], log)
        with open(log, errors="replace") as f:
            configured = f.read()
        family = re.search(r"LuaJIT tree family: (\S+)", configured)
        check(family is not None, "configure applied the series (family %s)"
              % (family.group(1) if family else "?"))
        run(["cmake", "--build", build, "-j2", "--target", "fibdemo"], log)
        luajit = os.path.join(build, "bin", "luajit")
        demo = os.path.join(build, "examples", "demo", "fibdemo")
        for path in (luajit, demo):
            m = elf_machine(path)
            check(m is not None, "%s is an ELF file" % os.path.basename(path))
            check(m == EM_AARCH64, "%s is built for aarch64" % os.path.relpath(path, build))
        for binary, leaf in ((luajit, "lua_gettop"), (demo, "fib_c_seconds")):
            insn = first_insn(binary, leaf)
            check(insn.startswith("stp x29, x30"),
                  "leaf %s keeps a frame record (%s)" % (leaf, insn))
        # Recording on writes the perf map and (0009) the jitdump: the dump
        # into tmp, the map removed.
        env = dict(os.environ, LUAJIT_PERF="1", LUAJIT_PERF_DIR=tmp)
        p = subprocess.Popen(QEMU + [demo, "1"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
        try:
            out, err = p.communicate(timeout=120)
        finally:
            remove_tmp_files([p.pid])
        check(p.returncode == 0 and "measured split: Lua" in out,
              "fibdemo runs under qemu-aarch64 with recording on (exit %d: %s)"
              % (p.returncode, (out + err).strip()[-300:]))
        check(os.path.getsize(os.path.join(tmp, "jit-%d.dump" % p.pid)) > 0,
              "fibdemo wrote its jitdump")
        refuses_old_vm(src, tmp)


def refuses_old_vm(src, tmp):
    """vm_patch/apply picks no arm64 part for a VM without either marker
    (rolling/: `.macro sp_auth`; beta3/: saveregs' `sub sp, sp, #
    CFRAME_SPACE`); configure must then refuse, not build without records."""
    dasc = os.path.join(src, "src", "vm_arm64.dasc")
    with open(dasc) as f:
        text = f.read()
    text = re.sub(r"(?m)^\|\.macro sp_auth", "|.macro old_sp_auth", text)
    text = re.sub(r"(?m)^\|  sub sp, sp, # CFRAME_SPACE", "|  sub sp, sp, #CFRAME_SPACE", text)
    with open(dasc, "w") as f:
        f.write(text)
    build = os.path.join(tmp, "build-old")
    p = subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_TOOLCHAIN_FILE=" + TOOLCHAIN,
                        "-DLJPERF_LUAJIT_SOURCE=" + src, "-DLJPERF_FLAMEGRAPH=OFF"],
                       capture_output=True, text=True)
    err = " ".join(p.stderr.split())   # CMake wraps its messages
    check(p.returncode != 0 and "its arm64 VM (src/vm_arm64.dasc) is older" in err,
          "configure refuses an arm64 VM older than both parts (exit %d: %s)"
          % (p.returncode, err[:240]))


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    main(lambda: test(sys.argv[1]))
