"""bench/qemu_icount.c, the instruction counter of `bench.icount --counter
qemu-aarch64`, counts exactly: a static aarch64 program with no libc runs a
loop of N iterations (two instructions each) between one instruction before
and two after (the exit system call), so it executes 2N + 3 instructions;
the count must be that for several N, and the same in every run.

usage: PYTHONPATH=SOURCE_ROOT test_icount.py
"""

import os
import subprocess
import sys
import tempfile

from bench import icount  # the counter's reader (IREFS); PYTHONPATH: the source root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# x0 = N; loop: x0 -= 1, branch back while non-zero; exit(0) by syscall 93.
LOOP = """
    .global _start
_start:
    ldr x0, =%d
1:  subs x0, x0, #1
    b.ne 1b
    mov x8, #93
    svc #0
"""


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    if len(sys.argv) > 1:
        print(__doc__.strip())
        sys.exit(0 if sys.argv[1] in ("-h", "--help") else 2)
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64", "cc"):
        if run(["sh", "-c", "command -v " + tool]).returncode != 0:
            fail("%s not found (apt-get install gcc-aarch64-linux-gnu qemu-user gcc)" % tool)
    with tempfile.TemporaryDirectory(prefix="ljperf-icount-") as tmp:
        plugin = os.path.join(tmp, "qemu_icount.so")
        r = run(["cc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o", plugin,
                 os.path.join(ROOT, "bench", "qemu_icount.c")])
        if r.returncode != 0:
            fail("the plugin does not build: " + r.stdout)
        out = os.path.join(tmp, "count")
        for n in (1, 1000, 123457):
            src, exe = os.path.join(tmp, "loop.S"), os.path.join(tmp, "loop")
            with open(src, "w") as f:
                f.write(LOOP % n)
            r = run(["aarch64-linux-gnu-gcc", "-nostdlib", "-static", "-o", exe, src])
            if r.returncode != 0:
                fail("the loop does not build: " + r.stdout)
            counts = set()
            for _ in range(2):
                r = run(["qemu-aarch64", "-plugin", plugin + ",out=" + out, exe])
                with open(out) as f:
                    m = icount.IREFS.search(f.read())
                if r.returncode != 0 or not m:
                    fail("N=%d: exit %d, no count: %s" % (n, r.returncode, r.stdout))
                counts.add(int(m.group(1)))
            want = 2 * n + 3
            print("N=%-7d counted %s, want %d" % (n, sorted(counts), want))
            if counts != {want}:
                fail("N=%d: counted %s, want %d" % (n, sorted(counts), want))
        r = run(["qemu-aarch64", "-plugin", plugin, exe])
        if r.returncode == 0 or "usage" not in r.stdout:
            fail("the plugin without out=PATH: exit %d, %r" % (r.returncode, r.stdout))
    print("PASS: qemu_icount counts 2N+3 instructions exactly, every run")


if __name__ == "__main__":
    main()
