#!/usr/bin/env python3
"""The writers (emitter/) built for aarch64 and run under qemu-aarch64, their
jitdump read by this host's perf inject --jit (ctest emitter.arm64,
-DLJPERF_ARM64=ON).

1. emit.c, perfmap.c, jitdump.c, inline.c and gen_dump.c cross-compiled with
   aarch64-linux-gnu-gcc as the VM compiles them (-O2, warnings as errors):
   the binary is an aarch64 ELF;
2. run under `qemu-aarch64 -L /usr/aarch64-linux-gnu`, itself under
   `perf record -k mono -d`: qemu maps the guest's PROT_EXEC marker page
   without PROT_EXEC (it translates the code), so perf sees it only as a
   data mmap (-d);
3. the dump, read by ljperf/jitdump.py (not by the writer's code): header
   e_machine EM_AARCH64 (183), while the host build of the same writer
   (gen_dump) writes EM_X86_64 (62); the pid qemu's guest saw; gen_dump's
   six loads with their names, bytes (gen_again's last 4 bytes salted, the
   rest gen_0's) and line tables;
4. perf inject --jit reads it: one jitted-PID-N.so per load, and check_elf
   (libelf/libdw) finds in each the load's name, bytes and lines. perf 6.1
   does not look at the header's e_machine: the .so files get the machine
   perf was built for (printed, not asserted: on an arm64 host, its own);
5. the writers' behaviour suite (emit_behaviour.c, every test its usage
   lists: files, symlinks, full and read-only disks, fork, threads, salt,
   allocation failures, record layout), cross-built and run under qemu:
   each passes, as ctest's emitter.* do on this host.

Environment: LJP_EMIT_DIR (the writers' sources), LJP_GEN_DUMP (gen_dump
built for this host), LJP_CHECK_ELF, LJP_JITDUMP_PY (optional). Missing
tools fail the test."""

import os
import shutil
import subprocess
import sys
import tempfile

from tests.lib.ljptest import EM_AARCH64, EM_X86_64, elf_machine, jitdump_under_test

HERE = os.path.dirname(os.path.abspath(__file__))
EMIT_DIR = os.environ.get("LJP_EMIT_DIR") or os.path.join(HERE, "..", "..", "emitter")
GEN_DUMP = os.environ.get("LJP_GEN_DUMP", "")
CHECK_ELF = os.environ.get("LJP_CHECK_ELF", "")
CC = "aarch64-linux-gnu-gcc"
QEMU = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
jitdump = jitdump_under_test()


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace", **kw)
    check(p.returncode == 0, "%s failed (%d):\n%s" % (" ".join(cmd), p.returncode,
                                                      p.stderr[-2000:]))
    return p.stdout


def loads_of(path):
    recs = list(jitdump.read(path, strict=True))
    return recs[0], [r for r in recs if isinstance(r, jitdump.CodeLoad)], \
        {r.code_addr: r for r in recs if isinstance(r, jitdump.DebugInfo)}


def check_dump(path, pid):
    """gen_dump's content (tests/emitter/gen_dump.c), read back."""
    check(jitdump.validate(path) == [], "dump problems: %s" % jitdump.validate(path))
    head, loads, debug = loads_of(path)
    check(head.elf_mach == EM_AARCH64, "header e_machine %d, want EM_AARCH64 (%d)"
          % (head.elf_mach, EM_AARCH64))
    check(head.pid == pid, "header pid %d, the guest printed %d" % (head.pid, pid))
    names = [ld.name for ld in loads]
    check(names == ["gen_%d" % i for i in range(5)] + ["gen_again"], "loads %s" % names)
    for i, ld in enumerate(loads[:5]):
        want = bytes((i * 3 + k) & 0xff for k in range(64))
        check((ld.code_addr, ld.code_size, ld.code) == (0x400000 + i * 0x100, 64, want),
              "%s: address, size or bytes differ" % ld.name)
        if i == 2:          # loaded without lines
            check(ld.code_addr not in debug, "gen_2 has lines")
            continue
        lines = [(a, ln, f) for a, ln, _, f in debug[ld.code_addr].entries]
        want_lines = [(ld.code_addr + 16 * j, 10 * i + 1 + j, "gen_%d.lua" % i)
                      for j in range(4)] + [(ld.code_addr + 64, 10 * i + 4, "gen_%d.lua" % i)]
        check(lines == want_lines, "%s: lines %s, want %s" % (ld.name, lines, want_lines))
    again = loads[5]
    check(again.code[:60] == loads[0].code[:60] and again.code[60:] != loads[0].code[60:],
          "gen_again: want gen_0's bytes with the last 4 salted")
    return loads


def behaviour(tmp):
    """Step 5: the names of the tests emit_behaviour has, each run."""
    prog = os.path.join(tmp, "emit_behaviour-aarch64")
    srcs = [os.path.join(EMIT_DIR, f) for f in ("emit.c", "perfmap.c", "jitdump.c", "inline.c")]
    run([CC, "-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-pthread", "-I", EMIT_DIR,
         "-I", HERE, '-DJITDUMP_PY="%s"' % jitdump.__file__,
         '-DPYTHON_EXE="%s"' % sys.executable, "-o", prog] + srcs +
        [os.path.join(HERE, "emit_behaviour.c"),
         "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc"])
    usage = subprocess.run(QEMU + [prog], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True).stderr
    names = usage.partition("(")[2].partition(")")[0].split()
    check(len(names) >= 10, "emit_behaviour listed no tests: %r" % usage)
    failed = []
    for name in names:
        p = subprocess.run(QEMU + [prog, name], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", timeout=120)
        if p.returncode != 0 or "ok %s" % name not in p.stdout:
            failed.append("%s (exit %d): %s" % (name, p.returncode, p.stdout.strip()[-600:]))
    check(not failed, "emit_behaviour under qemu-aarch64:\n" + "\n".join(failed))
    print("emit_behaviour under qemu-aarch64: %d tests pass (%s)" % (len(names), " ".join(names)))


def test(tmp):
    for tool in (CC, QEMU[0], "perf"):
        check(shutil.which(tool), "%s not found (Debian: gcc-aarch64-linux-gnu, qemu-user, "
              "linux-perf)" % tool)
    check(os.path.isdir(QEMU[2]), "%s missing (Debian: libc6-dev-arm64-cross)" % QEMU[2])
    check(os.access(GEN_DUMP, os.X_OK), "LJP_GEN_DUMP=%r is not an executable" % GEN_DUMP)
    check(os.access(CHECK_ELF, os.X_OK), "LJP_CHECK_ELF=%r is not an executable "
          "(the build needs libelf-dev and libdw-dev)" % CHECK_ELF)

    gen = os.path.join(tmp, "gen_dump-aarch64")
    srcs = [os.path.join(EMIT_DIR, f) for f in ("emit.c", "perfmap.c", "jitdump.c", "inline.c")]
    run([CC, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wshadow", "-Werror", "-pthread",
         "-I", EMIT_DIR, "-o", gen] + srcs + [os.path.join(HERE, "gen_dump.c")])
    check(elf_machine(gen) is not None, "%s is not an ELF file" % gen)
    check(elf_machine(gen) == EM_AARCH64, "%s is not an aarch64 binary (e_machine %d)"
          % (gen, elf_machine(gen)))
    print("cross-built: %s (e_machine %d)" % (os.path.basename(gen), EM_AARCH64))

    host_dir = os.path.join(tmp, "host")
    os.mkdir(host_dir)
    host_dump = run([GEN_DUMP, host_dir]).strip()
    native = loads_of(host_dump)[0].elf_mach
    check(native == EM_X86_64, "the host build's header e_machine is %d, want EM_X86_64 (%d) "
          "(this test runs on x86-64)" % (native, EM_X86_64))

    out = os.path.join(tmp, "out")
    os.mkdir(out)
    bid = os.path.join(tmp, ".debug")
    data = os.path.join(tmp, "perf.data")
    printed = run(["perf", "--buildid-dir", bid, "record", "-q", "--no-bpf-event", "-k", "mono",
                   "-d", "-e", "cpu-clock:u", "-o", data, "--"] + QEMU + [gen, out]).strip()
    dump = printed.splitlines()[-1] if printed else ""
    base = os.path.basename(dump)
    check(base.startswith("jit-") and base.endswith(".dump") and os.path.exists(dump),
          "gen_dump printed %r, not a dump's path" % printed)
    pid = int(base[4:-5])
    loads = check_dump(dump, pid)
    print("dump: e_machine %d (host build %d), %d loads with names, bytes, lines"
          % (EM_AARCH64, native, len(loads)))

    run(["perf", "--buildid-dir", bid, "inject", "--jit", "-i", data, "-o", data + ".jit"])
    sos = sorted(f for f in os.listdir(out) if f.startswith("jitted-%d-" % pid))
    want = ["jitted-%d-%d.so" % (pid, ld.code_index) for ld in loads]
    check(sos == sorted(want), "perf inject made %s, want %s" % (sos, sorted(want)))
    report = run([CHECK_ELF, dump, out])
    print(report.strip())
    mmaps = run(["perf", "--buildid-dir", bid, "script", "--show-mmap-events", "-i",
                 data + ".jit"])
    seen = {ln.split("]: ")[-1].split()[-1] for ln in mmaps.splitlines()
            if "PERF_RECORD_MMAP2" in ln and "/jitted-%d-" % pid in ln}
    check(seen == {os.path.join(out, s) for s in want},
          "perf inject's MMAP2 events name %s" % sorted(seen))
    print("perf inject --jit: %d jitted .so files (e_machine %d: perf's own build's), "
          "their MMAP2 events in perf.jit.data" % (len(sos), elf_machine(os.path.join(out, sos[0]))))
    behaviour(tmp)


def main():
    tmp = tempfile.mkdtemp(prefix="ljp-arm64-emit-")
    try:
        test(tmp)
        print("ok arm64")
        return 0
    except Fail as e:
        sys.stderr.write("FAIL arm64: %s\n" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
