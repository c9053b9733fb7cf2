"""arm64.perf: the perf hooks in the arm64 VM (vm_patch 0009) under
qemu-aarch64. LuaJIT with the series is cross-built and runs perf_prog.lua
twice: with LUAJIT_PERF=1, and with LUAJIT_PERF unset switching recording by
jit.perf.start()/stop() itself (status() checked there: map, jitdump and
frames on, mem and remote not parts on arm64). Each run's
/tmp/perf-PID.map (resolve.PerfMap) must name the program's prototypes
(NAME@perf_prog.lua:LINE, the lines read from the file) and each of its
traces at the address and size jit.util.tracemc gives; its jitdump
(ljperf/jitdump.py) must have e_machine 183 (EM_AARCH64) and one code load
per trace whose bytes are the trace's machine code (words patched since,
exits linked to side traces, must be branches on both sides); its .inline
file (ljperf/inline.py) one record per trace load, at the load's address,
whose frames name outer and the inner it inlined. Stopped, the chunk
loaded afterwards is not described. The files go to a temporary
LUAJIT_PERF_DIR; the maps of the processes started are removed.
Usage: test_perf.py TARBALL
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from ljperf import inline, jitdump
from ljperf.resolve import PerfMap
from tests.lib.ljptest import EM_AARCH64, check, fail, main, remove_tmp_files

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "perf_prog.lua")
SYSROOT = "/usr/aarch64-linux-gnu"


def defline(name):
    """The line where perf_prog.lua defines local function NAME."""
    with open(PROG) as f:
        for i, s in enumerate(f, 1):
            if re.match(r"local function %s\(" % name, s):
                return i
    fail("perf_prog.lua defines no %s" % name)


def is_branch(word):
    """An aarch64 b, b.cond, cbz/cbnz or tbz/tbnz (what linking an exit
    to a side trace rewrites)."""
    return ((word & 0x7c000000) == 0x14000000 or (word & 0xff000010) == 0x54000000 or
            (word & 0x7e000000) == 0x34000000 or (word & 0x7e000000) == 0x36000000)


def words(b):
    return [int.from_bytes(b[i:i + 4], "little") for i in range(0, len(b) - 3, 4)]


def run(lj, tmp, setting):
    """Runs perf_prog.lua; returns (pid, {traceno: (addr, code)})."""
    env = dict(os.environ, LUAJIT_PERF_DIR=tmp)
    env.pop("LUAJIT_PERF", None)
    if setting == "env":
        env["LUAJIT_PERF"] = "1"
    p = subprocess.Popen(["qemu-aarch64", "-L", SYSROOT, lj, "perf_prog.lua"] +
                         (["api"] if setting == "api" else []), cwd=HERE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = p.communicate(timeout=300)
    check(p.returncode == 0 and out.endswith("perf_prog ok\n") and not err,
          "%s: perf_prog.lua runs (exit %d%s)" % (setting, p.returncode, err and ": " + err))
    traces = {}
    for m in re.finditer(r"^trace (\d+) ([0-9a-f]+) ([0-9a-f]+)$", out, re.M):
        traces[int(m.group(1))] = (int(m.group(2), 16), bytes.fromhex(m.group(3)))
    check(len(traces) >= 3, "%s: %d traces" % (setting, len(traces)))
    return p.pid, traces


def check_run(setting, pid, traces, tmp):
    label = {n: "%s@perf_prog.lua:%d" % (n, defline(n)) for n in ("inner", "outer", "fib")}
    mpath = "/tmp/perf-%d.map" % pid
    check(os.path.isfile(mpath), "%s: %s written" % (setting, mpath))
    pm = PerfMap(mpath)
    text = open(mpath, encoding="utf-8", errors="replace").read()
    for n, want in label.items():
        check(re.search(r"^[0-9a-f]+ [0-9a-f]+ %s$" % re.escape(want), text, re.M),
              "%s: the map names %s" % (setting, want))
    for no, (addr, code) in sorted(traces.items()):
        name = pm.name_at(addr)
        check(name is not None and name.startswith("TRACE_%d::perf_prog.lua:" % no) and
              re.search(r"^%x %x TRACE_%d::" % (addr, len(code), no), text, re.M),
              "%s: the map has trace %d at %#x, %d bytes (%s)"
              % (setting, no, addr, len(code), name))
    if setting == "api":
        check("late@" not in text, "api: the chunk loaded after stop() not described")
    dpath = os.path.join(tmp, "jit-%d.dump" % pid)
    check(jitdump.validate(dpath) == [], "%s: jitdump valid: %s" % (setting, jitdump.validate(dpath)))
    recs = list(jitdump.read(dpath, strict=True))
    check(recs[0].elf_mach == EM_AARCH64, "%s: jitdump e_machine %d" % (setting, recs[0].elf_mach))
    loads = [r for r in recs if isinstance(r, jitdump.CodeLoad)]
    protos = {r.code_addr: r for r in loads
              if "perf_prog.lua:" in r.name and not r.name.startswith("TRACE_")}
    check(len(protos) == 5, "%s: perf_prog.lua's 5 prototypes loaded (%d)"
          % (setting, len(protos)))
    relinked, total = 0, 0
    for no, (addr, code) in sorted(traces.items()):
        ld = [r for r in loads if r.name.startswith("TRACE_%d::" % no) and r.code_addr == addr]
        check(len(ld) == 1 and ld[0].code_size == len(code),
              "%s: one code load for trace %d at its address, of its size" % (setting, no))
        old, now = words(ld[0].code), words(code)
        diff = [i for i in range(len(now)) if old[i] != now[i]]
        check(all(is_branch(old[i]) and is_branch(now[i]) for i in diff),
              "%s: trace %d's loaded bytes are its machine code but relinked "
              "branches (%d of %d words differ)" % (setting, no, len(diff), len(now)))
        relinked, total = relinked + len(diff), total + len(now)
    print("%s: %d traces, %d words of machine code, %d branches relinked since"
          % (setting, len(traces), total, relinked))
    ipath = dpath + ".inline"
    itr = list(inline.read(ipath))
    tloads = {r.code_index: r for r in loads if r.name.startswith("TRACE_")}
    check(sorted(t.index for t in itr) == sorted(tloads) and all(
        (tloads[t.index].code_addr, tloads[t.index].code_size) == (t.addr, t.size)
        for t in itr),
        "%s: .inline has one record per trace load, at its address and size (%d)"
        % (setting, len(itr)))

    def proto_of(pc):
        hit = [r for a, r in protos.items() if a <= pc - 4 < a + r.code_size]
        return hit[0].name if hit else None
    named = {tuple(proto_of(pc) for pc in st) for t in itr for st in inline.stacks(t)}
    check(named and not any(None in n for n in named),
          "%s: every inline frame lies in a prototype of the dump (%d stacks)"
          % (setting, len(named)))
    check((label["inner"], label["outer"]) in named,
          "%s: a trace names inner inlined into outer" % setting)


def test():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return sys.argv[1:2] in (["-h"], ["--help"])
    tmp = tempfile.mkdtemp(prefix="ljp-arm64-perf-")
    pids = set()
    try:
        p = subprocess.run([os.path.join(HERE, "build-luajit"), "--patched", sys.argv[1],
                            os.path.join(tmp, "build")], capture_output=True, text=True)
        if p.returncode:
            fail("build-luajit --patched: %s" % p.stderr.strip())
        lj = os.path.join(tmp, "build", "luajit", "src", "luajit")
        for setting in ("env", "api"):
            d = os.path.join(tmp, setting)
            os.mkdir(d)
            pid, traces = run(lj, d, setting)
            pids.add(pid)
            check_run(setting, pid, traces, d)
    finally:
        remove_tmp_files(pids)
        shutil.rmtree(tmp, ignore_errors=True)
    return True


if __name__ == "__main__":
    main(test)
