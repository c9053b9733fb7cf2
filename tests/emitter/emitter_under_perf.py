#!/usr/bin/env python3
"""End-to-end tests of the emitter under real perf (perf record -k mono, inject --jit, script).

    emitter_under_perf.py TEST     TEST: inject | map | mprotect | elf | buildid

Environment: LJP_E2E_PROG (tests/emitter/e2e_prog binary), LJP_CHECK_ELF (check_elf
binary, for "elf"), LJP_JITDUMP_PY (ljperf/jitdump.py). All artefacts go to a
temporary directory (perf --buildid-dir inside it); /tmp/perf-PID.map is removed at
the end. If perf cannot record, the test FAILS (it does not skip).

e2e_prog builds lj_alpha -> lj_beta -> {lj_gamma, lj_delta} in anonymous executable
memory; leaves loop on source line 22 (lj_gamma) and 32 (lj_delta) of e2e_source.lua,
lj_beta's calls are on line 41, lj_alpha's on line 51.
"""

import collections
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from ljperf import perfscript  # the one perf script reader
from tests.lib.ljptest import jitdump_under_test

PROG = os.environ.get("LJP_E2E_PROG", "")
CHECK_ELF = os.environ.get("LJP_CHECK_ELF", "")
jitdump = jitdump_under_test()   # $LJP_JITDUMP_PY or ljperf/jitdump.py

SRC = "e2e_source.lua"
LEAF_LINE = {"lj_gamma": 22, "lj_delta": 32}
CALL_LINE = {"lj_beta": 41, "lj_alpha": 51}


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


Sample = collections.namedtuple("Sample", "comm pid time frames")   # frames: [Frame], leaf first
Frame = collections.namedtuple("Frame", "ip sym dso srcline")


class Session:
    def __init__(self, tmp):
        self.tmp = tmp
        self.bid = os.path.join(tmp, "buildid")
        self.pid = None
        self.flip = 0

    def perf(self, args, **kw):
        cmd = ["perf", "--buildid-dir", self.bid] + args
        p = subprocess.run(cmd, cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, errors="replace", **kw)
        check(p.returncode == 0, "%s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-3000:]))
        return p.stdout

    def record(self, mode, secs, outputs="both"):
        env = dict(os.environ, LUAJIT_PERF_DIR=self.tmp, E2E_OUTPUTS=outputs)
        # --no-bpf-event: perf would wait a second for its BPF side-band thread.
        out = self.perf(["record", "-q", "--no-bpf-event", "-k", "mono", "-F", "999", "-g",
                         "--call-graph", "fp", "-o", "perf.data", "--", PROG, mode, str(secs)],
                        env=env)
        m = re.search(r"^pid (\d+)$", out, re.M)
        check(m, "e2e_prog printed no pid: %r" % out)
        self.pid = int(m.group(1))
        self.flip = int(re.search(r"^flip_ns (\d+)$", out, re.M).group(1))
        check(os.path.getsize(os.path.join(self.tmp, "perf.data")) > 0, "perf record wrote no data")

    def inject(self):
        self.perf(["inject", "--jit", "-i", "perf.data", "-o", "perf.jit.data"])

    def samples(self, data, srcline=False):
        fields = "comm,pid,tid,time,ip,sym,dso" + (",srcline" if srcline else "")
        out = self.perf(["script", "--ns", "-F", fields, "-i", data])
        res = []
        for x in perfscript.iter_samples(out.split("\n")):
            if x.pid is None or x.time is None:
                continue
            res.append(Sample(x.comm, x.pid, float(x.time),
                              [Frame(f[0], f[1], f[3], sl)
                               for f, sl in zip(x.frames, x.srclines)]))
        mine = [s for s in res if s.pid == self.pid and s.frames]
        check(len(mine) >= 50, "only %d samples of e2e_prog (pid %s) in %s" % (len(mine), self.pid, data))
        return mine

    def dump(self):
        return os.path.join(self.tmp, "jit-%d.dump" % self.pid)

    def cleanup(self):
        if self.pid:
            try:
                os.unlink("/tmp/perf-%d.map" % self.pid)
            except FileNotFoundError:
                pass


def leaf_stats(samples, after=None, flip=0):
    """Samples (after/before the flip time if given) whose leaf is in generated code."""
    sel = [s for s in samples if after is None or (s.time * 1e9 > flip + 5e6 if after else s.time * 1e9 < flip)]
    return sel, [s for s in sel if s.frames[0].sym in LEAF_LINE]


def expect_named(samples, dso_re, with_lines, label):
    """Most leaf samples are lj_gamma/lj_delta from DSO_RE, with callers lj_beta, lj_alpha."""
    check(samples, "%s: no samples" % label)
    leaves = [s for s in samples if s.frames[0].sym in LEAF_LINE and re.search(dso_re, s.frames[0].dso)]
    check(len(leaves) >= 0.8 * len(samples),
          "%s: only %d of %d samples have lj_gamma/lj_delta from %s; leaf symbols: %s"
          % (label, len(leaves), len(samples), dso_re,
             collections.Counter((s.frames[0].sym, s.frames[0].dso) for s in samples).most_common(6)))
    check({s.frames[0].sym for s in leaves} == set(LEAF_LINE), "%s: not both leaves sampled" % label)
    chains = [s for s in leaves if [f.sym for f in s.frames[1:3]] == ["lj_beta", "lj_alpha"]]
    check(len(chains) >= 0.9 * len(leaves), "%s: only %d of %d leaf samples unwind through lj_beta, lj_alpha"
          % (label, len(chains), len(leaves)))
    if with_lines:
        for name, line in LEAF_LINE.items():
            got = collections.Counter(s.frames[0].srcline for s in leaves if s.frames[0].sym == name)
            want = "%s:%d" % (SRC, line)
            check(got[want] >= 0.9 * sum(got.values()), "%s: %s srclines %s, want %s" % (label, name, dict(got), want))
        for s in chains:
            for f in s.frames[1:3]:
                want = "%s:%d" % (SRC, CALL_LINE[f.sym])
                check(f.srcline == want, "%s: caller %s at %s, want %s" % (label, f.sym, f.srcline, want))
    return len(leaves)


def test_inject(s):
    s.record("run", 0.5)
    s.inject()
    n = expect_named(s.samples("perf.jit.data", srcline=True), r"/jitted-%d-\d+\.so$" % s.pid, True, "inject")
    sos = [f for f in os.listdir(s.tmp) if re.match(r"jitted-%d-\d+\.so$" % s.pid, f)]
    check(len(sos) == 4, "perf inject made %d jitted DSOs, want 4" % len(sos))
    check(jitdump.validate(s.dump()) == [], "dump problems: %s" % jitdump.validate(s.dump()))
    print("inject: %d leaf samples named with lines" % n)


def test_map(s):
    # Map only: no jitdump at all, names come from /tmp/perf-PID.map at report time.
    s.record("run", 0.5, outputs="map")
    check(not os.path.exists(s.dump()), "map-only run wrote a jitdump")
    n = expect_named(s.samples("perf.data"), r"^/tmp/perf-%d\.map$" % s.pid, False, "map")
    print("map: %d leaf samples named from the perf map" % n)


def test_mprotect(s):
    # The code page is flipped RX -> RW -> RX (new function added) halfway through.
    s.record("flip", 0.8)
    check(s.flip > 0, "no flip time")
    raw = s.samples("perf.data")
    check(any(s.flip - 1e8 < x.time * 1e9 < s.flip + 1e9 for x in raw), "no samples around the flip")
    s.inject()
    jit = s.samples("perf.jit.data", srcline=True)
    for label, sel in (("before flip", leaf_stats(jit, False, s.flip)[0]),
                       ("after flip", leaf_stats(jit, True, s.flip)[0])):
        expect_named(sel, r"/jitted-%d-\d+\.so$" % s.pid, True, "inject, " + label)
    expect_named(leaf_stats(raw, True, s.flip)[0], r"^/tmp/perf-%d\.map$" % s.pid, False, "map, after flip")
    # The kernel did report the flip as a new executable anon mapping ...
    mm = s.perf(["script", "--show-mmap-events", "-i", "perf.data"])
    anon = [l for l in mm.splitlines() if "PERF_RECORD_MMAP2 %d/" % s.pid in l and "//anon" in l and "r-xp" in l]
    check(len(anon) >= 2, "expected the mprotect RW->RX to show as an anon MMAP2, got %s" % anon)
    # ... and perf inject --jit dropped it (anon mmaps after the jitdump marker).
    mj = s.perf(["script", "--show-mmap-events", "-i", "perf.jit.data"])
    anon_j = [l for l in mj.splitlines() if "PERF_RECORD_MMAP2 %d/" % s.pid in l and "//anon" in l]
    print("mprotect: raw anon exec mmaps %d, after inject %d; names and lines kept after the flip"
          % (len(anon), len(anon_j)))


def test_elf(s):
    check(os.access(CHECK_ELF, os.X_OK), "LJP_CHECK_ELF=%r is not an executable "
          "(build needs libelf-dev and libdw-dev)" % CHECK_ELF)
    s.record("flip-re", 0.4)
    s.inject()
    p = subprocess.run([CHECK_ELF, s.dump(), s.tmp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout.strip())
    check(p.returncode == 0, "check_elf failed")
    check(jitdump.validate(s.dump()) == [], "dump problems: %s" % jitdump.validate(s.dump()))
    # flip-re described the 4 functions again after the flip: 4 + epsilon + 4.
    loads = [r for r in jitdump.read(s.dump()) if isinstance(r, jitdump.CodeLoad)]
    check(len(loads) == 9, "%d CODE_LOADs, want 9" % len(loads))


def elf_build_id(path):
    """The GNU build-id note of an ELF64 little-endian file (hex), or None."""
    with open(path, "rb") as f:
        d = f.read()
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", d, 0x3A)
    for i in range(shnum):
        typ, = struct.unpack_from("<I", d, shoff + i * shentsize + 4)
        off, size = struct.unpack_from("<QQ", d, shoff + i * shentsize + 0x18)
        if typ == 7:  # SHT_NOTE
            namesz, descsz, ntype = struct.unpack_from("<III", d, off)
            if ntype == 3:
                start = off + 12 + ((namesz + 3) & ~3)
                return d[start:start + descsz].hex()
    return None


def test_buildid(s):
    # The same bytes at the same address, described twice under two names.
    s.record("same", 0.6)
    s.inject()
    jit = s.samples("perf.jit.data", srcline=True)
    for label, sel, name, line in (("first", leaf_stats(jit, False, s.flip)[0], "lj_same_a", 62),
                                   ("second", leaf_stats(jit, True, s.flip)[0], "lj_same_b", 162)):
        ok = [x for x in sel if x.frames[0].sym == name and x.frames[0].srcline == "%s:%d" % (SRC, line)]
        check(len(sel) >= 20 and len(ok) >= 0.8 * len(sel), "%s description: %d of %d samples are %s at line %d: %s"
              % (label, len(ok), len(sel), name, line,
                 collections.Counter((x.frames[0].sym, x.frames[0].srcline) for x in sel).most_common(4)))
    loads = [r for r in jitdump.read(s.dump()) if isinstance(r, jitdump.CodeLoad)]
    check(len(loads) == 2 and loads[0].code_addr == loads[1].code_addr, "want two loads at one address")
    # What other perf versions would use as build-id: MD5(addr, bytes) (libcrypto builds
    # before 6.17) and SHA-1(bytes) (6.17-6.18): both must differ thanks to the salt.
    md5 = {hashlib.md5(struct.pack("<Q", l.code_addr) + l.code).hexdigest() for l in loads}
    sha = {hashlib.sha1(l.code).hexdigest() for l in loads}
    check(len(md5) == 2 and len(sha) == 2, "identical bytes reached the dump (no salt)")
    ids = [elf_build_id(os.path.join(s.tmp, "jitted-%d-%d.so" % (s.pid, l.code_index))) for l in loads]
    check(all(ids) and ids[0] != ids[1], "injected DSOs share a build-id: %s" % ids)
    print("buildid: both names resolve; build-ids %s" % ids)


TESTS = {"inject": test_inject, "map": test_map, "mprotect": test_mprotect, "elf": test_elf,
         "buildid": test_buildid}


def main(argv):
    if len(argv) != 2 or argv[1] not in TESTS:
        sys.stderr.write("usage: emitter_under_perf.py %s\n" % "|".join(TESTS))
        return 2
    if not PROG or not os.access(PROG, os.X_OK):
        sys.stderr.write("FAIL: LJP_E2E_PROG=%r is not an executable\n" % PROG)
        return 1
    if shutil.which("perf") is None:
        sys.stderr.write("FAIL: perf is not installed (Debian: linux-perf)\n")
        return 1
    tmp = tempfile.mkdtemp(prefix="ljp-e2e-")
    s = Session(tmp)
    try:
        TESTS[argv[1]](s)
        print("ok %s" % argv[1])
        return 0
    except Fail as e:
        sys.stderr.write("FAIL %s: %s\n" % (argv[1], e))
        return 1
    finally:
        s.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
