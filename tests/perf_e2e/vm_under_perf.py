#!/usr/bin/env python3
"""End-to-end tests of the patched VM's perf support under real perf.

    vm_under_perf.py TEST [--keep]      (vm_under_perf.py --list prints the tests)

Programs (progs/*.lua, the C host host.c) run on build/bin/luajit with
LUAJIT_PERF set, under

    perf record -k mono -g --call-graph fp --user-regs=r13
    perf inject --jit
    perf script -F comm,pid,tid,time,ip,sym,dso[,srcline]

and the names and source lines perf prints for bytecode frames (Lua frame
records in the rbp chain) and trace frames are compared with hand-written
expectations taken from the sources. Every jitdump a test produced is
checked with ljperf/jitdump.py validate(), and, when perf inject made
jitted-*.so files from it, with tests/emitter's libdw checker (check_elf).
The fault tests run the programs without perf and check that they keep
running with the right output and exactly one "ljperf:" line on stderr.

Tests (ctest perf_e2e.TEST):
  names.interp|jit|stdin  progs/names.lua (run from a file with -joff, with the
                      JIT, and from stdin): functions named NAME@CHUNK:LINE for
                      function a.b:c, M.f, local function, x = function, table
                      constructor fields, CHUNK:LINE for anonymous ones, chunks
                      with source text, spaces, (), ;, :, non-ASCII and 800-byte
                      names; srcline of the leaf frame, the caller frames (call
                      lines) and the traces (loop lines); interpreter PCs (R13)
                      on the loop line; the map equals the dump; CODE_CLOSE at
                      exit; the standard library's Lua functions described.
  names.map           no inject: traces named from /tmp/perf-PID.map.
  flush               jit.flush between rounds: TRACE_1 of each round named
                      after its own function.
  flush.start         jit.perf.start right after jit.flush: the flushed traces
                      (still in the heap, their machine code freed) are not
                      described; the program runs on, its new trace is.
  reuse.interp|jit    freed prototypes' addresses reused by later chunks: the
                      samples of each round resolve to the newest load.
  mprotect            60 traces compiled while an old one stays hot: 60 anon
                      r-xp mmap events, the old trace keeps its injected name.
  fork.interp|jit     the child writes jit-CHILD.dump with everything live and
                      its own chunk; its samples resolve before and after its
                      first load.
  states.threads      two threads with a lua_State each (host.c): both
                      described, each thread's samples named after its code.
  states.serial       a second lua_State after the first was closed.
  crash.segv|abort    a signal mid-run leaves a valid dump with the last load.
  off                 LUAJIT_PERF unset, "" or 0: no file, no mapping, no
                      output; an unknown part (bogus, all, an empty word):
                      one stderr line, no file.
  trace_protos        progs/protos.lua: a trace that inlines functions of 12
                      chunks (half of them closures specialised to their
                      prototype), its side traces, traces through a fast
                      function. Lines of trace code are the innermost
                      function's (vm_patch 0005): the loop trace has lines
                      in each of the 12 chunks (lines 3 and 4 of its
                      function) and in its own; with LUAJIT_PERF_INLINE=0,
                      every trace's lines are in its own chunk and the loop
                      trace has the line of each inlined call. Nothing
                      reported dropped on stderr (no perf).
  lua_api.interp|jit  jit.perf.status/start/stop, start at run time describes
                      code loaded before it, restart appends (no CODE_CLOSE in
                      between: perf inject stops reading at one).
  names.late          progs/late_names.lua: jit.perf.start() after the main
                      chunks of required modules (late_mod.lua,
                      late_mod2.lua) were collected names the modules'
                      functions (local function, local f = function, M.f,
                      M:m, t.k = function, Class.new, Class:get, a global;
                      a module whose functions never capture its table, a
                      constructor's field) as LUAJIT_PERF=1 from the start
                      does; an anonymous closure stays anonymous. No perf.
  lua_api.require     require("jit.perf") with the host's own package.loaders
                      (as Tarantool 3 installs), with none, and with a
                      searcher that has a jit.perf of its own (which wins);
                      the control VM (luajit-base) does not find it.
  c_api               luaJIT_perf_start/stop/status from a C host; the
                      status bits LUAJIT_PERF_MAP/JITDUMP/FRAMES; "all" is
                      rejected.
  fault.*             symlink_map, symlink_dump (planted symlinks not followed),
                      enospc (dump on a 64 KiB tmpfs), enospc_map (16 KiB /tmp),
                      erofs, eacces (setpriv nobody), nodir: the program's output
                      is unchanged, exactly one "ljperf:" line on stderr, the
                      other output complete, the failed one valid up to its end.

Environment: LJPERF_BUILD (build directory, default build/), LJP_E2E_HOST
(the host.c binary, default BUILD/tests/perf_e2e/host), LJP_CHECK_ELF (the
check_elf binary). Root is needed (mount namespaces, setpriv, perf). All
files go to a temporary directory (perf --buildid-dir inside it), removed
at the end with the /tmp/perf-PID.map files of the processes the test
started (--keep keeps the directory for inspection). A perf that does not
work makes the test FAIL.
"""

import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS = os.path.join(HERE, "progs")
from tests.lib import ljptest as T
from ljperf import perfscript, resolve as ljresolve
from ljperf import jitdump
from ljperf import frames as ljframes
from ljperf import vmregs

MIN_SAMPLES = 10      # samples a function must get to be judged
GOOD = 0.9            # share of a function's samples that must be fully right
KEEP = False


def check(cond, msg):
    if not cond:
        T.fail(msg)


def info(msg):
    print(msg)
    sys.stdout.flush()


# -- Running and reading perf --------------------------------------------------

Frame = collections.namedtuple("Frame", "addr sym dso srcline")


class Sample:
    __slots__ = ("pid", "tid", "time", "frames", "regs")

    def __init__(self, pid, tid, time):
        self.pid, self.tid, self.time, self.frames, self.regs = pid, tid, time, [], None


def parse_script(text):
    """perf script text (callchains, optional srcline lines) -> [Sample],
    read with perfscript (the one reader); time in ns."""
    out = []
    for x in perfscript.iter_samples(text.split("\n")):
        if x.time is None:
            continue
        cur = Sample(x.pid, x.tid, perfscript.time_to_ns(x.time)[0])
        cur.frames = [Frame(f[0], f[1], f[3], sl) for f, sl in zip(x.frames, x.srclines)]
        cur.regs = x.regs
        out.append(cur)
    return out


class Run:
    def __init__(self, stdout, stderr, rc, data=None):
        self.stdout, self.stderr, self.rc, self.data = stdout, stderr, rc, data

    def field(self, key):
        """Words after KEY on the first stdout line starting with KEY."""
        for line in self.stdout.splitlines():
            w = line.split()
            if w and w[0] == key:
                return w[1:]
        T.fail("program printed no %r line:\n%s" % (key, self.stdout))

    def lines(self, key):
        return [line.split()[1:] for line in self.stdout.splitlines()
                if line.split()[:1] == [key]]


class Session(T.PerfSession):
    """A temporary directory with every perf artefact of one test."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __exit__(self, *exc):
        self.pids |= T.dump_pids(self.dir)
        if KEEP:
            print("kept", self.dir)
            for pid in self.pids:
                try:
                    shutil.move("/tmp/perf-%d.map" % pid, self.dir)
                except OSError:
                    pass
            return
        super().__exit__(*exc)

    def perf(self, args, check_rc=True, **kw):
        cmd = ["perf", "--buildid-dir", self.path(".debug")] + args
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)
        if check_rc and r.returncode != 0:
            T.fail("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-1500:]))
        return r

    def run(self, cmd, perf=True, env=None, cwd=PROGS, freq=999, stdin=None,
            expect_rc=0):
        """Runs CMD (LUAJIT_PERF_DIR = the session directory), under perf
        record if PERF. Returns a Run; the perf data path in run.data."""
        self.n += 1
        e = self.env(env)
        data = None
        if perf:
            data = self.path("perf%d.data" % self.n)
            cmd = ["perf", "--buildid-dir", self.path(".debug"), "record", "-q",
                   T.NO_BPF_EVENT, "-e", T.perf_event(), "-F", str(freq), "-k", "mono", "-g",
                   "--call-graph", "fp", "--user-regs=" + vmregs.PC_USER_REGS, "-o", data, "--"] + list(cmd)
        fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
        try:
            r = subprocess.run(cmd, env=e, cwd=cwd, stdin=fin, capture_output=True)
        finally:
            if stdin:
                fin.close()
        out = r.stdout.decode("utf-8", "replace")
        err = r.stderr.decode("utf-8", "replace")
        for m in re.finditer(r"^(?:pid|parent|child|before crash)\s+(\d+)", out, re.M):
            self.pids.add(int(m.group(1)))
        if expect_rc is not None and r.returncode != expect_rc:
            T.fail("%s exited with %d (want %d):\n%s\n%s" % (" ".join(cmd), r.returncode,
                                                              expect_rc, out[-1500:], err[-1500:]))
        if perf:
            check(os.path.exists(data) and os.path.getsize(data) > 0,
                  "perf record wrote no data: " + err[-500:])
        return Run(out, err, r.returncode, data)

    def inject(self, data):
        out = data + ".jit"
        self.perf(["inject", "--jit", "-i", data, "-o", out])
        return out

    def script(self, data, srcline=False, pid=None, regs=False):
        fields = "comm,pid,tid,time,ip,sym,dso" + (",srcline" if srcline else "") + \
            (",uregs" if regs else "")
        args = ["script", "--ns", "-i", data, "-F", fields]
        if pid is not None:
            args += ["--pid", str(pid)]
        samples = parse_script(self.perf(args).stdout)
        check(samples, "perf script printed no samples of %s" % data)
        return samples

    def dumps(self):
        return sorted(glob.glob(self.path("**/jit-*.dump"), recursive=True))

    def only_pid(self):
        """The pid of the only jitdump in the session directory."""
        d = glob.glob(self.path("jit-*.dump"))
        check(len(d) == 1, "want one jitdump, found %s" % d)
        pid = int(re.search(r"jit-(\d+)\.dump$", d[0]).group(1))
        self.pids.add(pid)
        return pid

    def dump_path(self, pid):
        p = self.path("jit-%d.dump" % pid)
        check(os.path.exists(p), "no jitdump %s" % p)
        return p

    def finish(self):
        """Every dump is valid; every dump perf inject used matches its .so files."""
        dumps = self.dumps()
        check(dumps, "the test produced no jitdump")
        nso = 0
        for d in dumps:
            probs = jitdump.validate(d)
            check(probs == [], "%s: %s" % (d, "; ".join(probs[:5])))
            pid = int(re.search(r"jit-(\d+)\.dump$", d).group(1))
            sos = glob.glob(os.path.join(os.path.dirname(d), "jitted-%d-*.so" % pid))
            if sos:
                check(os.access(CHECK_ELF, os.X_OK),
                      "LJP_CHECK_ELF=%r is not executable (needs libelf-dev, libdw-dev)" % CHECK_ELF)
                r = subprocess.run([CHECK_ELF, d, os.path.dirname(d)], capture_output=True, text=True)
                check(r.returncode == 0, "check_elf %s:\n%s%s" % (d, r.stdout, r.stderr[-3000:]))
                nso += len(sos)
        info("dumps: %d valid, %d jitted .so files checked with libdw" % (len(dumps), nso))


def loads_of(path):
    return [r for r in jitdump.read(path) if isinstance(r, jitdump.CodeLoad)]


def records_of(path):
    return [r for r in jitdump.read(path) if not isinstance(r, jitdump.Header)]


# -- Judging samples ------------------------------------------------------------

def jitted(dso, pid=None):
    return bool(dso) and re.search(r"/jitted-%s-\d+\.so$" % (pid if pid else r"\d+"), dso) is not None


def is_trace(sym):
    return bool(sym) and sym.startswith("TRACE_")


def lua_frames(s):
    """The sample's bytecode frames (injected, not traces), leaf first."""
    return [f for f in s.frames if jitted(f.dso) and not is_trace(f.sym)]


def base(chunk):
    return chunk.rsplit("/", 1)[-1]


def top(counter, n=6):
    return ", ".join("%s x%d" % kv for kv in counter.most_common(n))


class Fn:
    """A Lua function the test expects in samples."""

    def __init__(self, name, chunk, first, last, loop, caller=None, call=None):
        self.chunk, self.first, self.last, self.loop = chunk, first, last, loop
        self.label = "%s%s:%d" % (name + "@" if name else "", chunk, first)
        self.caller, self.call = caller, call     # caller's label, line of the call

    def trace_re(self):
        return re.compile(r"^TRACE_\d+::%s:%d::%s$" % (re.escape(self.chunk), self.loop,
                                                      re.escape(self.label)))

    def line_ok(self, srcline):
        m = re.match(r"^(.*):(\d+)$", srcline or "")
        return bool(m) and m.group(1) == base(self.chunk) and self.first <= int(m.group(2)) <= self.last


def judge_fn(fn, samples, jit, tail=(), label=""):
    """Samples whose leaf Lua frame is FN: enough of them, and most with
    the right name, srcline and callers. In JIT mode the leaf is FN's trace.
    TAIL: (label, srcline) expected after FN's frame (its callers)."""
    if jit:
        mine = [s for s in samples if s.frames and is_trace(s.frames[0].sym)
                and s.frames[0].sym.endswith("::" + fn.label)]
    else:
        mine = [s for s in samples if lua_frames(s) and lua_frames(s)[0].sym == fn.label]
    check(len(mine) >= MIN_SAMPLES, "%s%s: only %d samples" % (label, fn.label, len(mine)))
    want_tail = [(fn.label, "%s:%d" % (base(fn.chunk), fn.first))] + list(tail)
    bad = collections.Counter()
    good = 0
    for s in mine:
        why = None
        if jit:
            t = s.frames[0]
            if not fn.trace_re().match(t.sym):
                why = "trace name %s" % t.sym
            elif not jitted(t.dso, s.pid):
                why = "trace dso %s" % t.dso
            elif t.srcline is not None and not fn.line_ok(t.srcline):
                why = "trace srcline %s" % t.srcline
        else:
            if s.frames[0].dso is None or not s.frames[0].dso.endswith("/luajit") and \
                    not s.frames[0].dso.endswith("/host"):
                why = "leaf not in the VM: %s (%s)" % (s.frames[0].sym, s.frames[0].dso)
        if why is None:
            lf = [(f.sym, f.srcline) if f.srcline is not None else (f.sym, w[1])
                  for f, w in zip(lua_frames(s), want_tail)]
            if lf != want_tail[:len(lf)] or len(lf) < len(want_tail):
                why = "Lua frames %s" % " <- ".join("%s[%s]" % x for x in lf[:4])
        if why is None:
            good += 1
        else:
            bad[why] += 1
    check(good >= GOOD * len(mine), "%s%s: %d of %d samples right; wrong: %s"
          % (label, fn.label, good, len(mine), top(bad)))
    if jit:
        lines = collections.Counter(s.frames[0].srcline for s in mine)
        want = "%s:%d" % (base(fn.chunk), fn.loop)
        if lines and next(iter(lines)) is not None:
            check(lines[want] >= GOOD * len(mine) * 0.8,
                  "%s%s: trace srclines %s, want mostly %s" % (label, fn.label, top(lines), want))
    return len(mine)


def in_window(samples, t0, t1, pid=None, margin=2000000):
    return [s for s in samples if t0 + margin <= s.time <= t1 - margin
            and (pid is None or s.pid == pid)]


def resolve_share(samples, fn_label, jit):
    """(samples with the leaf Lua frame or trace owner FN_LABEL, total with
    any Lua frame or trace) among SAMPLES."""
    lua = [s for s in samples if lua_frames(s) or (s.frames and is_trace(s.frames[0].sym))]
    if jit:
        hit = [s for s in lua if s.frames and is_trace(s.frames[0].sym)
               and s.frames[0].sym.endswith("::" + fn_label)
               and lua_frames(s) and lua_frames(s)[0].sym == fn_label]
    else:
        hit = [s for s in lua if lua_frames(s) and lua_frames(s)[0].sym == fn_label]
    return hit, lua


def judge_window(samples, t0, t1, fn_label, jit, what, pid=None):
    sel = in_window(samples, t0, t1, pid)
    hit, lua = resolve_share(sel, fn_label, jit)
    check(len(sel) >= MIN_SAMPLES, "%s: only %d samples in its time window" % (what, len(sel)))
    leafs = collections.Counter((s.frames[0].sym if s.frames and is_trace(s.frames[0].sym)
                                 else (lua_frames(s)[0].sym if lua_frames(s) else
                                       (s.frames[1].sym if len(s.frames) > 1 else "?")))
                                for s in sel if s not in hit)
    check(len(hit) >= GOOD * len(sel), "%s: %d of %d samples in the window resolve to %s%s; others: %s"
          % (what, len(hit), len(sel), "a trace of " if jit else "", fn_label, top(leafs)))
    return len(hit), len(sel)


# -- Names and lines --------------------------------------------------------------

def fnv1a32(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xffffffff
    return h


# The awkward chunks of names.lua: chunk name given to loadstring -> the
# chunk part perf must show (hand-written from the naming rules).
HOT_BODY = "\nfunction hot(n)\n  local s = 0\n  for i = 1, n do s = (s + i * %d) %% 1000003 end\n" \
           "  return s\nend\n"
LONG = "long" * 200
AWKWARD = [
    ("string_%08x" % fnv1a32((HOT_BODY % 19).encode()), "source text as chunk name"),
    ("my_chunk__v2___part_3", "=my chunk (v2); part:3"),
    ("dir_with_space/file_1_.lua", "@dir with space/file(1).lua"),
    ("donn\u00e9es/\u03c0.lua", "=donn\u00e9es/\u03c0.lua"),
    ("..." + LONG[-117:], "= + 800 bytes: the tail is kept"),
    ("load", "=(load)"),
]


def names_fns(chunk):
    run = "run@%s:65" % chunk
    fns = [Fn("a.b:c", chunk, 10, 14, 12, run, 67), Fn("M.f", chunk, 17, 21, 19, run, 68),
           Fn("lf", chunk, 23, 27, 25, run, 69), Fn("gx", chunk, 29, 33, 31, run, 70),
           Fn("g", chunk, 35, 39, 37, run, 71), Fn(None, chunk, 41, 45, 43, run, 72)]
    fns += [Fn("hot", c, 2, 6, 4, run, 73) for c, _ in AWKWARD]
    return fns


def names_tail(fn, chunk):
    return [(fn.caller, "%s:%d" % (base(chunk), fn.call)),
            ("%s:0" % chunk, "%s:77" % base(chunk))]


def check_map_matches_dump(pid, dump):
    """The perf map has one line per distinct load, each exactly once."""
    path = "/tmp/perf-%d.map" % pid
    check(os.path.exists(path), "no perf map %s" % path)
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    dup = [k for k, v in collections.Counter(lines).items() if v > 1]
    check(not dup, "perf map repeats lines: %s" % dup[:3])
    want = {"%x %x %s" % (l.code_addr, l.code_size, l.name) for l in loads_of(dump)}
    check(set(lines) == want, "perf map and jitdump differ: only in map %s, only in dump %s"
          % (sorted(set(lines) - want)[:3], sorted(want - set(lines))[:3]))
    return len(lines)


def test_names(mode):
    """names.lua, every function named right with the right lines."""
    jit = mode != "interp"
    with Session() as s:
        if mode == "stdin":
            chunk = "stdin"
            r = s.run([LUAJIT, "-", "6000000"], env={"LUAJIT_PERF": "1"},
                      stdin=os.path.join(PROGS, "names.lua"))
        else:
            chunk = "names.lua"
            r = s.run([LUAJIT] + ([] if jit else ["-joff"]) + ["names.lua", "6000000" if jit else "3000000"],
                      env={"LUAJIT_PERF": "1"})
        raw = s.script(r.data)
        pid = s.only_pid()
        dump = s.dump_path(pid)
        nmap = check_map_matches_dump(pid, dump)
        recs = records_of(dump)
        check(isinstance(recs[-1], jitdump.CodeClose), "the dump does not end with CODE_CLOSE "
              "(clean close at exit): last record %r" % (recs[-1],))
        fns = names_fns(chunk)
        labels = {l.name for l in loads_of(dump)}
        builtins = {"%s@builtin:0" % n for n in ("rad", "deg", "len", "move", "remove", "getn",
                                                 "foreach", "foreachi")}
        check(builtins <= labels, "the standard library's Lua functions are not described: missing %s"
              % sorted(builtins - labels))
        if mode == "map":
            # No inject: trace names come from /tmp/perf-PID.map at report time;
            # bytecode (heap) addresses are never named by it.
            mine = [x for x in raw if x.pid == pid]
            unknown = collections.Counter()
            for fn in fns:
                hit = [x for x in mine if x.frames[0].sym and fn.trace_re().match(x.frames[0].sym)
                       and x.frames[0].dso == "/tmp/perf-%d.map" % pid]
                check(len(hit) >= MIN_SAMPLES, "map: only %d samples in %s's trace" % (len(hit), fn.label))
                for x in hit:
                    unknown[x.frames[1].sym] += 1
            info("map: every function's trace named from the perf map (%d lines); the frame above a "
                 "trace: %s" % (nmap, top(unknown, 3)))
            s.finish()
            return True
        data = s.inject(r.data)
        samples = [x for x in s.script(data, srcline=True, pid=pid) if x.pid == pid]
        counts = []
        for fn in fns:
            counts.append(judge_fn(fn, samples, jit, names_tail(fn, chunk), label=mode + ": "))
        # Nothing unresolved between the leaf and main in samples of Lua code.
        inlua = [x for x in samples if lua_frames(x)]
        unres = [x for x in inlua if any(f.sym in (None, "[unknown]") for f in x.frames
                                         if f.dso is None or "/jitted-" in f.dso or f.dso == "[unknown]")]
        check(len(unres) <= 0.02 * len(inlua), "%s: %d of %d samples in Lua code have unresolved frames"
              % (mode, len(unres), len(inlua)))
        info("%s: %d functions named with lines (%s samples), %d of %d Lua samples fully resolved"
             % (mode, len(fns), "/".join(map(str, counts)), len(inlua) - len(unres), len(inlua)))
        if not jit:
            check_pc_lines(s, data, pid, dump, fns)
        s.finish()
    return True


def check_pc_lines(s, data, pid, dump, fns):
    """Interpreter samples: R13 holds the bytecode PC (--user-regs=r13). Looked
    up in the dump's line table (the load live at the sample's time), it is
    in the leaf Lua function and on a line of its loop."""
    d = ljresolve.load_dump(dump)
    byname = {fn.label: fn for fn in fns}
    n, bad = 0, collections.Counter()
    for x in s.script(data, pid=pid, regs=True):
        lf = lua_frames(x)
        if x.pid != pid or not lf or lf[0].sym not in byname or not (x.frames[0].sym or "").startswith("lj_BC_"):
            continue
        fn = byname[lf[0].sym]
        pc = ljframes.interp_pc(x.regs or "")
        live = [ld for ld in d.candidates(pc or 0) if ld.ts <= x.time]
        n += 1
        if not live:
            bad["PC not in any load"] += 1
        elif live[-1].name != fn.label:
            bad["PC in %s" % live[-1].name] += 1
        elif live[-1].line_at(pc) != fn.loop:
            bad["line %s" % live[-1].line_at(pc)] += 1
    check(n >= 5 * MIN_SAMPLES, "only %d interpreter samples with the PC register" % n)
    check(sum(bad.values()) <= (1 - GOOD) * n, "R13 (the PC) of %d of %d interpreter samples is not on the "
          "loop line of the leaf Lua function: %s" % (sum(bad.values()), n, top(bad)))
    info("R13: the PC of %d of %d interpreter samples is on the loop line of its function"
         % (n - sum(bad.values()), n))


# -- Supersede: jit.flush, reused prototype addresses ---------------------------

def phases(run):
    return [(int(w[0]), float(w[1]), float(w[2])) for w in run.lines("phase")]


def test_flush_start():
    with Session() as s:
        r = s.run([LUAJIT, "flushstart.lua"], perf=False)
        check("start\ttrue" in r.stdout and "result\t" in r.stdout,
              "flushstart.lua ran to its end: %r" % r.stdout)
        names = [l.name for l in loads_of(s.dump_path(s.only_pid())) if is_trace(l.name)]
        check(names and all(re.match(r"TRACE_[1-9]\d*::flushstart\.lua:4::f@", n) for n in names),
              "only the trace made after the start described: %s" % names)
        info("flush.start: %d trace described (%s)" % (len(names), ", ".join(names)))
        s.finish()
    return True


def test_flush():
    with Session() as s:
        r = s.run([LUAJIT, "flush.lua", "15000000", "4"], env={"LUAJIT_PERF": "1"})
        data = s.inject(r.data)
        samples = s.script(data, srcline=True)
        pid = s.only_pid()
        loads = loads_of(s.dump_path(pid))
        traces = [l for l in loads if is_trace(l.name) and "flush_" in l.name]
        check(len({l.name.split("::")[0] for l in traces}) < len(traces),
              "expected trace numbers reused after jit.flush: %s" % [l.name for l in traces])
        for ph, t0, t1 in phases(r):
            label = "spin_%d@flush_%d:1" % (ph, ph)
            judge_window(samples, t0, t1, label, True, "flush round %d" % ph, pid)
            fn = Fn("spin_%d" % ph, "flush_%d" % ph, 1, 5, 3)
            judge_fn(fn, in_window(samples, t0, t1, pid), True, label="flush round %d: " % ph)
        addrs = collections.Counter(l.code_addr for l in traces)
        info("flush: 4 rounds, each round's samples named after its own trace (TRACE_n reused; "
             "%d trace addresses reused)" % sum(1 for v in addrs.values() if v > 1))
        s.finish()
    return True


def test_reuse(mode):
    jit = mode == "jit"
    with Session() as s:
        n, rounds = ("8000000", 6) if jit else ("3000000", 6)
        r = s.run([LUAJIT] + ([] if jit else ["-joff"]) + ["reuse.lua", n, str(rounds)],
                  env={"LUAJIT_PERF": "1"})
        data = s.inject(r.data)
        samples = s.script(data, srcline=True)
        pid = s.only_pid()
        # Every prototype of the rounds (main chunks too), in load order.
        loads = [l for l in loads_of(s.dump_path(pid))
                 if "reuse_" in l.name and not is_trace(l.name)]
        # A round's function whose code overlaps an earlier prototype's is
        # the case under test: perf must name its samples after the newer.
        # How often the allocator hands memory back varies by tree and run,
        # so any overlap counts, not only an equal address.
        reused = [(l.name, e.name) for i, l in enumerate(loads) for e in loads[:i]
                  if "@reuse_" in l.name and e.name != l.name
                  and l.code_addr < e.code_addr + e.code_size
                  and e.code_addr < l.code_addr + l.code_size]
        check(reused, "no prototype was loaded over an earlier one's code: %s"
              % ["%s %#x+%d" % (l.name, l.code_addr, l.code_size) for l in loads])
        for ph, t0, t1 in phases(r):
            label = "fn_%03d@reuse_%03d:1" % (ph, ph)
            judge_window(samples, t0, t1, label, jit, "%s round %d" % (mode, ph), pid)
            fn = Fn("fn_%03d" % ph, "reuse_%03d" % ph, 1, 5, 3)
            judge_fn(fn, in_window(samples, t0, t1, pid), jit, label="%s round %d: " % (mode, ph))
        info("reuse.%s: %d later prototypes loaded over earlier ones' code (%s); every round's "
             "samples named after the newest" % (mode, len(reused), reused[0][0]))
        s.finish()
    return True


# -- mprotect: trace symbols survive RW<->RX flips ------------------------------

def anon_exec_mmaps(sess, data, pid):
    out = sess.perf(["script", "--show-mmap-events", "-i", data]).stdout
    res = []
    for line in out.splitlines():
        if "PERF_RECORD_MMAP2 %d/" % pid in line and "//anon" in line and "r-xp" in line:
            m = re.search(r"\s(\d+\.\d+):\s", line)
            res.append(perfscript.time_to_ns(m.group(1))[0] if m else 0)
    return res


def test_mprotect():
    steps = 60
    with Session() as s:
        r = s.run([LUAJIT, "mprotect.lua", "300000", str(steps)], env={"LUAJIT_PERF": "1"})
        t_compiled = float(r.field("compiled")[0])
        t_end = float(r.field("steps")[1])
        raw = s.script(r.data)
        pid = s.only_pid()
        flips = [t for t in anon_exec_mmaps(s, r.data, pid) if t > t_compiled]
        check(len(flips) >= steps // 2, "expected >= %d anonymous executable mmap events after the "
              "first trace (mprotect RW->RX), got %d" % (steps // 2, len(flips)))
        data = s.inject(r.data)
        kept = [t for t in anon_exec_mmaps(s, data, pid) if t > t_compiled]
        samples = s.script(data, srcline=True)
        old = Fn("old_hot", "mprotect.lua", 11, 15, 13)
        # Samples in old_hot (known from its bytecode frame) late in the run,
        # after most flips: the trace must still carry its injected name.
        late_t = t_compiled + (t_end - t_compiled) * 0.5
        late = [x for x in samples if x.pid == pid and x.time > late_t and lua_frames(x)
                and lua_frames(x)[0].sym == old.label and x.frames[0].dso
                and not x.frames[0].dso.endswith("/luajit")]
        flips_before = sum(1 for t in flips if t < late_t)
        check(len(late) >= MIN_SAMPLES, "only %d samples in old_hot's trace late in the run" % len(late))
        named = [x for x in late if old.trace_re().match(x.frames[0].sym or "") and jitted(x.frames[0].dso, pid)
                 and old.line_ok(x.frames[0].srcline)]
        check(len(named) >= 0.95 * len(late), "after %d mprotect flips only %d of %d samples in old_hot's "
              "trace carry its injected name and line: %s" % (flips_before, len(named), len(late),
                                                          top(collections.Counter(x.frames[0].sym for x in late))))
        # Without inject the perf map names it too (perf reads it for anon exec memory).
        raw_late = [x for x in raw if x.pid == pid and x.time > late_t and x.frames
                    and old.trace_re().match(x.frames[0].sym or "")]
        check(len(raw_late) >= MIN_SAMPLES, "perf map: only %d samples named after old_hot's trace late "
              "in the run" % len(raw_late))
        info("mprotect: %d anon r-xp mmap events after the first trace in perf.data, %d after inject; "
             "%d of %d late samples in the old trace named (after >= %d flips), perf map %d"
             % (len(flips), len(kept), len(named), len(late), flips_before, len(raw_late)))
        s.finish()
    return True


# -- Fork, threads, crash --------------------------------------------------------

def test_fork(mode):
    jit = mode == "jit"
    n = "8000000" if jit else "3000000"
    with Session() as s:
        r = s.run([LUAJIT] + ([] if jit else ["-joff"]) + ["fork.lua", n], env={"LUAJIT_PERF": "1"})
        ppid = int(r.field("parent")[0])
        w = r.field("child")
        cpid, t0, t1 = int(w[0]), float(w[1]), float(w[2])
        done = [w for w in r.lines("parent") if w[:1] == ["done"]]
        check(done and done[0][1:3] == [str(cpid), "0"], "the child did not exit cleanly: %s" % r.stdout)
        cdump = s.dump_path(cpid)
        s.dump_path(ppid)
        clabels = {l.name for l in loads_of(cdump)}
        for want in ("before_fork@fork.lua:14", "child_work@child_chunk:1", "fork.lua:0"):
            check(want in clabels, "the child's dump lacks %s: %s" % (want, sorted(clabels)[:20]))
        if jit:
            check(any(re.match(r"TRACE_\d+::fork.lua:16::before_fork@fork.lua:14$", x) for x in clabels),
                  "the child's dump does not describe the parent's trace of before_fork")
            # Recording is on in the child when it describes the parent's
            # traces again: their code as the parent described it, patch
            # points off (vm_patch 0007), the calls' included.
            pcode = {(l.name, l.code_addr): l.code for l in loads_of(s.dump_path(ppid))
                     if l.name.startswith("TRACE_")}
            again = [l for l in loads_of(cdump) if (l.name, l.code_addr) in pcode]
            check(any("::with_call@fork.lua:" in l.name for l in again) and
                  all(l.code == pcode[(l.name, l.code_addr)] for l in again),
                  "the child describes the parent's %d traces with other bytes (%d differ)"
                  % (len(again), sum(l.code != pcode[(l.name, l.code_addr)] for l in again)))
        check(os.path.exists("/tmp/perf-%d.map" % cpid), "the child has no perf map of its own")
        data = s.inject(r.data)
        samples = s.script(data, srcline=True)
        csamples = [x for x in samples if x.pid == cpid]
        check(csamples, "no samples of the child %d" % cpid)
        a = judge_window(csamples, t0, t1, "before_fork@fork.lua:14", jit, "child, code from before the fork")
        b = judge_window(csamples, t1, max(x.time for x in csamples), "child_work@child_chunk:1", jit,
                         "child, its own chunk")
        psamples = [x for x in samples if x.pid == ppid]
        judge_fn(Fn("before_fork", "fork.lua", 14, 18, 16), psamples, jit, label="parent: ")
        info("fork.%s: child %d has its own dump and map; child samples named: %d/%d before its first "
             "load, %d/%d in its own chunk" % (mode, cpid, a[0], a[1], b[0], b[1]))
        s.finish()
    return True


def test_threads(mode):
    """Two lua_States at once in two threads, or one after the other."""
    check(os.access(HOST, os.X_OK), "LJP_E2E_HOST=%r is not built" % HOST)
    with Session() as s:
        r = s.run([HOST, mode, "20000000"], env={"LUAJIT_PERF": "1"})
        tids = {w[0]: int(w[1]) for w in r.lines("thread")}
        win = {w[0]: (float(w[3]), float(w[4])) for w in r.lines("thread")}
        check(set(tids) == {"a", "b"}, "host printed %s" % r.stdout)
        samples = [x for x in s.script(s.inject(r.data), srcline=True)]
        pid = collections.Counter(x.pid for x in samples if x.tid in tids.values()).most_common(1)[0][0]
        s.pids.add(pid)
        loads = loads_of(s.dump_path(pid))
        for t, tid in tids.items():
            fn = Fn("work_" + t, "thread_" + t, 1, 5, 3)
            got = [l for l in loads if l.name == fn.label]
            check(got and all(l.tid == tid for l in got), "%s not described by thread %d: %s"
                  % (fn.label, tid, [(l.name, l.tid) for l in got]))
            check(any(fn.trace_re().match(l.name) and l.tid == tid for l in loads),
                  "no trace of %s described by thread %d" % (fn.label, tid))
            mine = [x for x in in_window(samples, *win[t]) if x.tid == tid]
            judge_fn(fn, mine, True, label="thread %s: " % t)
            others = [x for x in mine if lua_frames(x) and lua_frames(x)[0].sym != fn.label]
            check(len(others) <= 0.02 * len(mine), "thread %s: samples named after other code: %s"
                  % (t, top(collections.Counter(lua_frames(x)[0].sym for x in others))))
        recs = records_of(s.dump_path(pid))
        check(sum(1 for x in recs if isinstance(x, jitdump.CodeClose)) == 1
              and isinstance(recs[-1], jitdump.CodeClose),
              "want one CODE_CLOSE, at exit")
        info("%s: both lua_States' code described by their own thread, samples of each "
             "named after its own functions; one CODE_CLOSE, at exit" % mode)
        s.finish()
    return True


def test_crash(sig):
    with Session() as s:
        r = s.run([LUAJIT, "crash.lua", sig, "8000000"], env={"LUAJIT_PERF": "1"}, expect_rc=None)
        pid = int(r.field("before")[1])
        check("not reached" not in r.stdout, "the program did not die")
        dump = s.dump_path(pid)
        recs = records_of(dump)
        check(recs and not any(isinstance(x, jitdump.CodeClose) for x in recs),
              "a crashed process wrote CODE_CLOSE?")
        names = {x.name for x in recs if isinstance(x, jitdump.CodeLoad)}
        last = Fn("last_fn", "last_chunk", 1, 5, 3)
        check(last.label in names and any(last.trace_re().match(x) for x in names),
              "the dump lacks the last chunk's function or its trace: %s" % sorted(names))
        data = s.inject(r.data)
        samples = [x for x in s.script(data, srcline=True) if x.pid == pid]
        judge_fn(last, samples, True, label="crash %s: " % sig)
        info("crash.%s: dump valid up to its last record (%d records), last chunk and trace named in "
             "samples" % (sig, len(recs)))
        s.finish()
    return True


# -- Activation and the APIs ------------------------------------------------------

def test_off():
    with Session() as s:
        bad = {"bogus": "bogus", "all": "all", "map,": "", "map,,frames": ""}
        for val in (None, "", "0") + tuple(bad):
            env = dict(os.environ)
            env.pop("LUAJIT_PERF", None)
            if val is not None:
                env["LUAJIT_PERF"] = val
            env["LUAJIT_PERF_DIR"] = s.dir
            t0 = time.time() - 1      # a map older than the run: a reused pid's
            p = subprocess.run([LUAJIT, "off.lua"], cwd=PROGS, env=env, capture_output=True, text=True)
            check(p.returncode == 0, "LUAJIT_PERF=%r: exit %d %s" % (val, p.returncode, p.stderr))
            pid = int(p.stdout.split()[1])
            s.pids.add(pid)
            check("map=false jitdump=false frames=false mapped=false result=" in p.stdout,
                  "LUAJIT_PERF=%r: %s" % (val, p.stdout))
            errs = p.stderr.splitlines()
            if val in bad:
                check(len(errs) == 1 and errs[0].startswith("ljperf:") and
                      "unknown part '%s'" % bad[val] in errs[0],
                      "LUAJIT_PERF=%r: want one ljperf line on stderr, got %r" % (val, p.stderr))
            else:
                check(not errs, "LUAJIT_PERF=%r printed %r" % (val, p.stderr))
            pmap = "/tmp/perf-%d.map" % pid
            check(not (os.path.exists(pmap) and os.path.getmtime(pmap) >= t0),
                  "LUAJIT_PERF=%r wrote a perf map" % val)
            check(os.listdir(s.dir) == [], "LUAJIT_PERF=%r wrote %s" % (val, os.listdir(s.dir)))
        info("off: unset, empty and 0 write nothing and map nothing; an unknown part "
             "(bogus, all, an empty word) prints one line")
    return True


def test_lua_api(mode):
    jit = mode == "jit"
    with Session() as s:
        r = s.run([LUAJIT] + ([] if jit else ["-joff"]) + ["api.lua", "8000000" if jit else "3000000"])
        st = {w[0]: " ".join(w[1:]) for w in r.lines("status")}
        check(st == {"initial": "map=false jitdump=false frames=false",
                     "started": "map=true jitdump=true frames=true",
                     "stopped": "map=false jitdump=false frames=false",
                     "restarted": "map=true jitdump=true frames=false"}, "jit.perf.status(): %s" % st)
        check(r.field("start") == ["true"] and r.field("stop") == ["true"] and r.field("restart") == ["true"],
              "start/stop results: %s" % r.stdout)
        check("bad part\tfalse\tunknown part 'bogus'" in r.stdout, "start('bogus') did not fail: %s" % r.stdout)
        check(r.stderr == "", "stderr: %r" % r.stderr)
        t_start, t_restart = float(r.field("t_start")[0]), float(r.field("t_restart")[0])
        ph = {w[0]: (float(w[1]), float(w[2])) for w in r.lines("phase")}
        samples = s.script(s.inject(r.data), srcline=True)
        pid = s.only_pid()
        dump = s.dump_path(pid)
        loads = loads_of(dump)
        check(min(l.timestamp for l in loads) > t_start, "code described before jit.perf.start()")
        early = [l for l in loads if l.name == "early@api.lua:15"]
        check(early and early[0].timestamp < ph["early"][0],
              "early() (loaded before start) not described at start: %s" % [l.name for l in loads][:20])
        if jit:
            check(any(re.match(r"TRACE_\d+::api.lua:17::early@api.lua:15$", l.name) and l.timestamp < ph["early"][0]
                      for l in loads), "early()'s trace (compiled before start) not described at start")
        stopped = [l for l in loads if l.name.startswith("while_stopped")]
        check(stopped and all(l.timestamp > t_restart for l in stopped),
              "while_stopped: described while stopped, or not at the restart: %s"
              % [(l.name, l.timestamp) for l in stopped])
        nmap = check_map_matches_dump(pid, dump)
        recs = records_of(dump)
        check(sum(1 for x in recs if isinstance(x, jitdump.CodeClose)) == 1 and isinstance(recs[-1], jitdump.CodeClose),
              "want one CODE_CLOSE, at exit (perf inject stops reading at CODE_CLOSE)")
        a = judge_window(samples, *ph["early"], "early@api.lua:15", jit, "after start, code loaded before", pid)
        b = judge_window(samples, *ph["late"], "late_fn@late_chunk:1", jit, "after start, new chunk", pid)
        info("lua_api.%s: status/start/stop/restart right; code loaded before start named in %d/%d samples, "
             "later code %d/%d; map %d lines, no repeats after the restart" % (mode, a[0], a[1], b[0], b[1], nmap))
        s.finish()
    return True


def late_names(arg):
    """{(module file, definition line): label} of late_mod.lua's and
    late_mod2.lua's functions, as the jitdump of `late_names.lua ARG`
    describes them."""
    with Session() as s:
        r = s.run([LUAJIT, "late_names.lua"] + arg, perf=False,
                  env={"LUAJIT_PERF": "" if arg else "1"})
        check(r.stderr == "", "stderr: %r" % r.stderr)
        out = {}
        for l in loads_of(s.dump_path(s.only_pid())):
            m = not l.name.startswith("TRACE_") and \
                re.match(r"(?:(.*)@)?(late_mod2?)\.lua:(\d+)$", l.name)
            if m and int(m.group(3)) > 0:      # not the main chunk (gone, late)
                out[(m.group(2), int(m.group(3)))] = l.name
        return out, r.stdout


def test_names_late():
    start, out1 = late_names([])
    late, out2 = late_names(["late"])
    check(out1 == out2, "results differ: %r %r" % (out1, out2))
    named = sorted(n.split("@")[0] for n in start.values() if "@" in n)
    want = ["Class.new", "Class:get", "M.assigned", "M.field", "M.make_counter", "M.work",
            "M:method", "P.run", "P.sum", "add", "fib", "late_global", "square"]
    check(named == want, "LUAJIT_PERF=1 from the start names %s, want %s" % (named, want))
    diff = {k: (start.get(k), late.get(k)) for k in set(start) | set(late) if start.get(k) != late.get(k)}
    check(not diff, "started late, the names differ from those given at load (line: (load, late)): %s"
          % sorted(diff.items()))
    info("names.late: %d functions of a collected chunk named as at load time: %s"
         % (len(named), ", ".join(named)))
    return True


def test_lua_require():
    want = ["host searchers\thost module\ttrue",
            "host miss\tfalse\tmodule 'no.such.module' not found: \tno host module 'no.such.module'",
            "status\tfalse", "no searchers\ttrue", "own searcher\town jit.perf"]
    p = subprocess.run([LUAJIT, "require.lua"], cwd=PROGS, capture_output=True, text=True,
                       env=dict(os.environ, LUAJIT_PERF=""))
    check(p.returncode == 0 and p.stderr == "", "exit %d, stderr %r" % (p.returncode, p.stderr))
    check(p.stdout.splitlines() == want, "got %r, want %r" % (p.stdout.splitlines(), want))
    base = subprocess.run([T.binpath("luajit-base"), "require.lua"], cwd=PROGS,
                          capture_output=True, text=True)
    check(base.returncode != 0 and "module 'jit.perf' not found" in base.stderr,
          "the control VM found jit.perf: %r %r" % (base.stdout, base.stderr))
    info("lua_api.require: jit.perf found under the host's own loaders and with none; "
         "a searcher's own jit.perf wins; the control does not find it")
    return True


def test_c_api():
    check(os.access(HOST, os.X_OK), "LJP_E2E_HOST=%r is not built" % HOST)
    with Session() as s:
        r = s.run([HOST, "capi", "20000000"])
        pid = int(r.field("pid")[0])
        st = {w[0]: " ".join(w[1:]) for w in r.lines("status")}
        check(st == {"initial": "0", "started": "7 map jitdump frames", "stopped": "0",
                     "parts": "3 map jitdump"}, "luaJIT_perf_status: %s" % st)
        check(r.field("start") == ["0"] and r.field("stop") == ["0"] and r.field("bad") == ["part", "-1"]
              and r.field("all") == ["-1"], "luaJIT_perf_start/stop results: %s" % r.stdout)
        t0, t1 = map(float, r.field("phase"))
        samples = [x for x in s.script(s.inject(r.data), srcline=True) if x.pid == pid]
        a = judge_window(samples, t0, t1, "capi_work@capi_chunk:1", True, "C API, after luaJIT_perf_start")
        judge_fn(Fn("capi_work", "capi_chunk", 1, 5, 3), in_window(samples, t0, t1), True, label="C API: ")
        info("c_api: status 0 -> 7 -> 0; code loaded before luaJIT_perf_start named in %d/%d samples" % a)
        s.finish()
    return True


def trace_lines(s, nfuncs, env):
    """{trace name: {(file, line)}} of protos.lua's traces run with ENV."""
    r = s.run([LUAJIT, "protos.lua", str(nfuncs)], perf=False, env=env)
    check(r.stderr == "", "stderr: %r" % r.stderr)
    pid = s.only_pid()
    debug, out = {}, {}
    for rec in jitdump.read(s.dump_path(pid)):
        if isinstance(rec, jitdump.DebugInfo):
            debug[rec.code_addr] = rec
        elif isinstance(rec, jitdump.CodeLoad) and rec.name.startswith("TRACE_"):
            ents = debug[rec.code_addr].entries if rec.code_addr in debug else []
            out.setdefault(rec.name, set()).update((e[3], e[1]) for e in ents)
    return out


def test_trace_protos():
    nfuncs = 12
    chunks = {"protos_%d" % k for k in range(1, nfuncs + 1)}
    loop_rx = r"TRACE_\d+::protos_main:3::protos_main:0$"
    calls = set(range(5, 5 + nfuncs))          # call K is on line 4+K
    with Session() as s:
        # Positions off: a trace's lines are its own function's.
        traces = trace_lines(s, nfuncs, {"LUAJIT_PERF": "jitdump", "LUAJIT_PERF_INLINE": "0"})
        loop = [n for n in traces if re.match(loop_rx, n)]
        check(loop, "no trace of the loop in protos_main among %d traces" % len(traces))
        for name, ents in traces.items():
            chunk = name.split("::")[1].rsplit(":", 1)[0]
            files = {f for f, _ in ents}
            check(files <= {chunk}, "%s: lines in %s, want only its own chunk %s"
                  % (name, sorted(files), chunk))
        for name in loop:
            lines = {ln for _, ln in traces[name]}
            check(calls <= lines, "%s: lines %s lack the calls %s"
                  % (name, sorted(lines), sorted(calls - lines)))
        s.finish()
    with Session() as s:
        # Positions on (the default): the innermost function's lines.
        traces = trace_lines(s, nfuncs, {"LUAJIT_PERF": "jitdump"})
        loop = [n for n in traces if re.match(loop_rx, n)]
        check(loop, "no trace of the loop in protos_main (positions on)")
        for name, ents in traces.items():
            files = {f for f, _ in ents}
            own = name.split("::")[1].rsplit(":", 1)[0]
            check(files and files <= chunks | {"protos_main", own},
                  "%s: lines in %s, want the program's chunks" % (name, sorted(files)))
        for name in loop:
            got = {f for f, ln in traces[name] if f in chunks and ln in (3, 4)}
            check(got == chunks, "%s: innermost lines in %s, want every inlined chunk"
                  % (name, sorted(got)))
        info("trace_protos: without positions %s has the line of each of the %d inlined "
             "calls; with them, lines inside each of the %d chunks; %d traces, nothing "
             "dropped" % (loop[0], nfuncs, nfuncs, len(traces)))
        s.finish()
    return True


# -- Faults (no perf) ------------------------------------------------------------

LOADS = ["loads.lua", "60", "40"]


def baseline(s):
    env = dict(os.environ)
    env.pop("LUAJIT_PERF", None)
    p = subprocess.run([LUAJIT] + LOADS, cwd=PROGS, env=env, capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.startswith("checksum"), "loads.lua failed: %s" % p.stderr)
    return p.stdout


SH_RUN = r'''
out=$1; shift
sh -c 'echo $$ > "$0/pid"; [ -z "$PLANT" ] || ln -s "$PLANT_TARGET" "$(printf "$PLANT" $$)"; exec "$@"' "$out" "$@" \
  > "$out/stdout" 2> "$out/stderr"
echo $? > "$out/rc"
'''


def run_fault(s, name, env, setup="", after="", prefix=()):
    """Runs loads.lua with LUAJIT_PERF=1 in a private mount namespace after
    the shell commands SETUP; AFTER runs before the namespace ends (copy
    files out of its mounts). PLANT (printf pattern with the pid) in ENV
    plants a symlink to PLANT_TARGET before the exec."""
    out = s.path(name)
    os.makedirs(out)
    e = s.env(dict({"LUAJIT_PERF": "1"}, **env))
    script = "set -e\n" + setup + "\nset +e\n" + SH_RUN + "\n" + after
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", out] + \
        list(prefix) + [LUAJIT] + LOADS
    p = subprocess.run(cmd, cwd=PROGS, env=e, capture_output=True, text=True)
    check(p.returncode == 0, "%s: namespace setup failed (%d): %s" % (name, p.returncode, p.stderr))

    def rd(f):
        with open(os.path.join(out, f), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    pid = int(rd("pid"))
    s.pids.add(pid)
    return pid, int(rd("rc")), rd("stdout"), rd("stderr")


def tmp_over(mount, keep):
    """Shell commands: MOUNT (a file system over /tmp), then the directories
    of /tmp that the paths KEEP lie in (a build tree under /tmp) bound back in
    place from the hidden /tmp (through an fd: not canonicalized)."""
    tops = sorted({p.split("/")[2] for p in keep if p.startswith("/tmp/")})
    binds = "".join('mkdir "/tmp/%s"; mount --no-canonicalize --bind '
                    '"/proc/self/fd/9/%s" "/tmp/%s"\n' % (t, t, t) for t in tops)
    return "exec 9</tmp\n%s\n%sexec 9<&-" % (mount, binds)


def expect_one_line(name, rc, out, err, want_out, pattern):
    check(rc == 0, "%s: exit status %d, stderr %r" % (name, rc, err))
    check(out == want_out, "%s: output %r, want %r" % (name, out, want_out))
    lines = err.splitlines()
    check(len(lines) == 1 and re.search(pattern, lines[0]),
          "%s: want exactly one stderr line matching %r, got %r" % (name, pattern, err))
    return lines[0]


def map_loads(pid):
    with open("/tmp/perf-%d.map" % pid, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


NFUNCS = 60 * 40


GEN_FN = re.compile(r"^M\.f\d+@gen_\d+:\d+$")    # a function of loads.lua's generated chunks


def gen_labels(lines):
    return {l.split(" ", 2)[2] for l in lines if GEN_FN.match(l.split(" ", 2)[2])}


def fault_symlink_map(s, kind, want):
    """A symlink planted at /tmp/perf-PID.map: refused, its target untouched.
    Returns the line to report."""
    target = s.path("victim")
    with open(target, "w") as f:
        f.write("precious\n")
    pid, rc, out, err = run_fault(s, kind, {"PLANT": "/tmp/perf-%d.map", "PLANT_TARGET": target})
    try:
        line = expect_one_line(kind, rc, out, err, want, r"^ljperf: perf map disabled: /tmp/perf-%d\.map: "
                               r"refusing to follow a symlink$" % pid)
        check(os.path.islink("/tmp/perf-%d.map" % pid), "the planted symlink is gone")
        with open(target) as f:
            check(f.read() == "precious\n", "the symlink's target was written")
    finally:
        try:
            os.unlink("/tmp/perf-%d.map" % pid)
        except OSError:
            pass
    labels = {l.name for l in loads_of(s.dump_path(pid)) if GEN_FN.match(l.name)}
    check(len(labels) == NFUNCS, "the jitdump has %d functions, want %d" % (len(labels), NFUNCS))
    return line


def fault_symlink_dump(s, kind, want):
    """A symlink planted at the jitdump's path: refused, its target untouched.
    Returns the line to report."""
    target = s.path("victim")
    with open(target, "w") as f:
        f.write("precious\n")
    pid, rc, out, err = run_fault(s, kind, {"PLANT": s.dir + "/jit-%d.dump", "PLANT_TARGET": target})
    line = expect_one_line(kind, rc, out, err, want, r"^ljperf: jitdump disabled: .*/jit-%d\.dump: "
                           r"refusing to follow a symlink$" % pid)
    with open(target) as f:
        check(f.read() == "precious\n", "the symlink's target was written")
    check(len(gen_labels(map_loads(pid))) == NFUNCS, "the perf map lacks functions: %d of %d" % (len(gen_labels(map_loads(pid))), NFUNCS))
    os.unlink(s.path("jit-%d.dump" % pid))
    return line


def fault_enospc(s, kind, want):
    """LUAJIT_PERF_DIR on a 64 KiB tmpfs: the jitdump stops whole, the map goes on.
    Returns the line to report."""
    full = s.path("full")
    os.makedirs(full)
    keep = s.path("kept")
    os.makedirs(keep)
    pid, rc, out, err = run_fault(
        s, kind, {"LUAJIT_PERF_DIR": full},
        setup='mount -t tmpfs -o size=64k ljp-e2e-full "%s"' % full,
        after='cp -a "%s"/. "%s"/; df -k "%s" | tail -1 > "%s/df"' % (full, keep, full, keep))
    line = expect_one_line(kind, rc, out, err, want, r"^ljperf: jitdump disabled: .*/jit-%d\.dump: "
                           r"No space left on device$" % pid)
    dump = os.path.join(keep, "jit-%d.dump" % pid)
    probs = jitdump.validate(dump)
    check(probs == [], "the dump on the full filesystem is not valid: %s" % probs[:3])
    n = len(loads_of(dump))
    check(0 < n < NFUNCS, "%d loads in the dump on a 64 KiB filesystem" % n)
    check(len(gen_labels(map_loads(pid))) == NFUNCS, "the perf map (on /tmp) lacks functions")
    line += " (dump kept %d loads, %d bytes)" % (n, os.path.getsize(dump))
    return line


def fault_enospc_map(s, kind, want):
    """A 16 KiB /tmp: the perf map stops at a whole line, the jitdump goes on.
    Returns the line to report."""
    # A 16 KiB /tmp of its own: the perf map fills it mid-run. (The
    # session directory is under /var/tmp for this test.)
    pid, rc, out, err = run_fault(
        s, kind, {},
        setup=tmp_over('mount -t tmpfs -o size=16k,mode=1777 ljp-e2e-tmp /tmp',
                       [LUAJIT, PROGS, s.dir]),
        after='cp /tmp/perf-*.map "%s"/' % s.dir)
    line = expect_one_line(kind, rc, out, err, want, r"^ljperf: perf map disabled: /tmp/perf-%d\.map: "
                           r"No space left on device$" % pid)
    with open(s.path("perf-%d.map" % pid), "rb") as f:
        raw = f.read()
    check(raw.endswith(b"\n") and all(re.match(rb"^[0-9a-f]+ [0-9a-f]+ \S+$", l)
                                       for l in raw.splitlines()),
          "the perf map on the full /tmp has a partial line at its end: %r" % raw[-80:])
    nmap = len(raw.splitlines())
    check(0 < nmap < NFUNCS, "%d lines in the perf map on a 16 KiB /tmp" % nmap)
    labels = {l.name for l in loads_of(s.dump_path(pid)) if GEN_FN.match(l.name)}
    check(len(labels) == NFUNCS, "the jitdump has %d functions, want %d" % (len(labels), NFUNCS))
    line += " (map kept %d whole lines, %d bytes)" % (nmap, len(raw))
    return line


def fault_erofs(s, kind, want):
    """LUAJIT_PERF_DIR read-only: no jitdump, the map goes on.
    Returns the line to report."""
    ro = s.path("ro")
    os.makedirs(ro)
    pid, rc, out, err = run_fault(
        s, kind, {"LUAJIT_PERF_DIR": ro},
        setup='mount -t tmpfs -o size=1m,ro ljp-e2e-ro "%s"' % ro)
    line = expect_one_line(kind, rc, out, err, want, r"^ljperf: jitdump disabled: .*/jit-%d\.dump: "
                           r"Read-only file system$" % pid)
    check(len(gen_labels(map_loads(pid))) == NFUNCS, "the perf map lacks functions: %d of %d" % (len(gen_labels(map_loads(pid))), NFUNCS))
    return line


def fault_eacces(s, kind, want):
    """LUAJIT_PERF_DIR not writable for the program's user: no jitdump.
    Returns the line to report."""
    d = s.path("locked")
    os.makedirs(d)
    os.chmod(d, 0o555)
    os.chmod(s.dir, 0o755)
    pid, rc, out, err = run_fault(
        s, kind, {"LUAJIT_PERF_DIR": d},
        prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    line = expect_one_line(kind, rc, out, err, want, r"^ljperf: jitdump disabled: .*/jit-%d\.dump: "
                           r"Permission denied$" % pid)
    check(os.listdir(d) == [], "files in the unwritable directory: %s" % os.listdir(d))
    check(len(gen_labels(map_loads(pid))) == NFUNCS, "the perf map lacks functions: %d of %d" % (len(gen_labels(map_loads(pid))), NFUNCS))
    return line


def fault_nodir(s, kind, want):
    """LUAJIT_PERF_DIR missing: no jitdump, the map goes on.
    Returns the line to report."""
    pid, rc, out, err = run_fault(s, kind, {"LUAJIT_PERF_DIR": s.path("no/such/dir")})
    line = expect_one_line(kind, rc, out, err, want, r"^ljperf: jitdump disabled: .*/jit-%d\.dump: "
                           r"No such file or directory$" % pid)
    check(len(gen_labels(map_loads(pid))) == NFUNCS, "the perf map lacks functions: %d of %d" % (len(gen_labels(map_loads(pid))), NFUNCS))
    return line


FAULTS = {"symlink_map": fault_symlink_map, "symlink_dump": fault_symlink_dump, "enospc": fault_enospc, "enospc_map": fault_enospc_map, "erofs": fault_erofs, "eacces": fault_eacces, "nodir": fault_nodir}


def test_fault(kind):
    if kind == "enospc_map":
        tempfile.tempdir = "/var/tmp"       # /tmp is replaced by a tiny tmpfs
    with Session() as s:
        want = baseline(s)
        fault = FAULTS.get(kind)
        if fault is None:
            T.fail("unknown fault " + kind)
        line = fault(s, kind, want)
        info("fault.%s: output unchanged, one stderr line: %s" % (kind, line))
        for d in s.dumps():
            check(jitdump.validate(d) == [], "%s: %s" % (d, jitdump.validate(d)[:3]))
    return True


TESTS = {
    "names.interp": lambda: test_names("interp"),
    "names.jit": lambda: test_names("jit"),
    "names.stdin": lambda: test_names("stdin"),
    "names.map": lambda: test_names("map"),
    "flush": test_flush,
    "flush.start": test_flush_start,
    "reuse.interp": lambda: test_reuse("interp"),
    "reuse.jit": lambda: test_reuse("jit"),
    "mprotect": test_mprotect,
    "fork.interp": lambda: test_fork("interp"),
    "fork.jit": lambda: test_fork("jit"),
    "states.threads": lambda: test_threads("threads"),
    "states.serial": lambda: test_threads("serial"),
    "crash.segv": lambda: test_crash("SEGV"),
    "crash.abort": lambda: test_crash("ABRT"),
    "off": test_off,
    "lua_api.interp": lambda: test_lua_api("interp"),
    "lua_api.jit": lambda: test_lua_api("jit"),
    "names.late": test_names_late,
    "lua_api.require": test_lua_require,
    "c_api": test_c_api,
    "trace_protos": test_trace_protos,
    "fault.symlink_map": lambda: test_fault("symlink_map"),
    "fault.symlink_dump": lambda: test_fault("symlink_dump"),
    "fault.enospc": lambda: test_fault("enospc"),
    "fault.enospc_map": lambda: test_fault("enospc_map"),
    "fault.erofs": lambda: test_fault("erofs"),
    "fault.eacces": lambda: test_fault("eacces"),
    "fault.nodir": lambda: test_fault("nodir"),
}

LUAJIT = HOST = CHECK_ELF = None


def main(argv):
    global LUAJIT, HOST, CHECK_ELF, KEEP
    args = [a for a in argv[1:] if a != "--keep"]
    KEEP = "--keep" in argv[1:]
    if args == ["--list"]:
        print("\n".join(TESTS))
        return 0
    if len(args) != 1 or args[0] not in TESTS:
        sys.stderr.write("usage: vm_under_perf.py TEST [--keep]; tests: %s\n" % " ".join(TESTS))
        return 2
    try:
        if os.geteuid() != 0:
            T.fail("needs root (perf with -k mono and call graphs, mount namespaces, setpriv)")
        LUAJIT = T.binpath("luajit")
        HOST = os.environ.get("LJP_E2E_HOST") or os.path.join(T.build_dir(), "tests", "perf_e2e", "host")
        CHECK_ELF = os.environ.get("LJP_CHECK_ELF", "")
        ok = TESTS[args[0]]()
    except T.TestFailure as e:
        print("FAIL %s: %s" % (args[0], e))
        return 1
    print("ok %s" % args[0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
