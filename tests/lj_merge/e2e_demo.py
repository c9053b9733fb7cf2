#!/usr/bin/env python3
"""End-to-end: the demo under real perf, through the whole pipeline.

usage: e2e_demo.py [SECONDS]      (ctest lj_merge.e2e_demo; needs root or
                                   perf_event_paranoid <= 1, and a build)

Records build/examples/demo/fibdemo (a C host: main -> lua_pcall -> demo.lua;
fib_lua (Lua) and fib_c (C, through the FFI) call each other recursively;
leaves burn CPU in lua_work (Lua) or c_work (C) and time themselves) with
LUAJIT_PERF=1 under `perf record -k mono -g --call-graph fp --user-regs=r13`,
then runs perf inject --jit, perf script and lj_merge, and checks the folded
stacks:

  1. every stack is rooted at the process (comm fibdemo; a few samples
     may be perf's own before the exec: perf-exec);
  2. host frames come first: fibdemo;__libc_start_call_main;main;lua_pcall,
     then the main chunk (demo.lua:0) and run@demo.lua:40, in every stack
     that has a Lua frame;
  3. the recursion nests: keeping only fib_lua (L), fib_c (C), lua_work (W)
     and c_work (K), every stack reads L (C L)* then nothing, C, C W or K
     (fib_lua tail-calls lua_work and fib_c tail-calls c_work, so their
     frames are replaced), with at least 3 fib_lua levels somewhere:
     the C function sits under the Lua code that calls it and vice versa;
  4. the Lua share of the profile, W / (W + K) weighted by period, is the
     split the program measured itself ("measured split: Lua X%") within
     5 percentage points;
  5. the output is the same with and without perf inject (given the dump),
     with -F fields (BX, --show-task-events) and with plain perf script.

All artefacts go to a temporary directory (tests/lib/ljptest.py) that is
removed; the /tmp/perf-PID.map the demo wrote is deleted. Any perf problem
fails the test."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.lib import ljptest as T

os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
LJ_MERGE = os.environ.get("LJ_MERGE") or os.path.join(
    T.ROOT, "perf-script", "lj_merge.py")
FIELDS = "comm,pid,tid,time,period,event,ip,sym,symoff,dso,uregs"
MAX_DIFF = 5.0          # percentage points between measured and profiled split
MIN_SAMPLES = 500


def lj_merge(text_path, jitdump, *args):
    r = subprocess.run([sys.executable, LJ_MERGE, "--jitdump", jitdump] + list(args)
                       + [text_path], capture_output=True, text=True)
    if r.returncode != 0:
        T.fail("lj_merge failed (%d): %s" % (r.returncode, r.stderr[-500:]))
    out = {}
    for ln in r.stdout.splitlines():
        s, _, n = ln.rpartition(" ")
        out[s] = out.get(s, 0) + int(n)
    if not out:
        T.fail("lj_merge printed nothing for %s: %s" % (text_path, r.stderr[-300:]))
    return out, r.stderr


def token(frame):
    """L, C, W, K for the frames of the recursion, else None."""
    if frame.startswith("fib_lua@"):
        return "L"
    if frame == "fib_c":
        return "C"
    if frame.startswith("lua_work@"):
        return "W"
    if frame == "c_work":
        return "K"
    return None


NEST = re.compile(r"^L(CL)*(C|CW|K)?$")
# A Lua frame: NAME@CHUNK:LINE or CHUNK:LINE (a trace: _[j] after it); not
# glibc's versioned names (pthread_mutex_lock@@GLIBC_2.2.5, seen in a sample
# taken in the exit handlers).
LUA_FRAME = re.compile(r"\.lua:\d+(?:_\[j\])?$")


# The frames below main in this machine's chains (Debian 12 x86-64: glibc
# has no frame pointers, the chain ends in its caller); None: any (glibc on
# arm64 keeps frame records: _start, __libc_start_main, its local caller).
BELOW_MAIN = ("__libc_start_call_main",)


def check(folded, measured_lua, label, below_main=BELOW_MAIN):
    """Checks 1-4 on one folded profile; returns a list of problems."""
    problems = []
    total = sum(folded.values())
    roots = {}
    for s, w in folded.items():
        r = s.split(";", 1)[0]
        roots[r] = roots.get(r, 0) + w
    own = roots.get("fibdemo", 0)
    print("%s: %d stacks, weight %d; roots %s" % (
        label, len(folded), total,
        ", ".join("%s %.2f%%" % (r, 100.0 * w / total) for r, w in sorted(roots.items()))))
    if set(roots) - {"fibdemo", "perf-exec"} or own < 0.99 * total:
        problems.append("stacks not rooted at the process: %s" % roots)

    lua_w = c_w = other_w = 0
    deepest = 0
    bad_host = bad_nest = 0
    examples = []
    for s, w in folded.items():
        fr = s.split(";")
        if fr[0] != "fibdemo":
            continue
        toks = [t for t in map(token, fr) if t]
        has_lua = any(LUA_FRAME.search(f) for f in fr[1:])
        if has_lua:
            # Under the main chunk: run (the recursion), or, while the chunk
            # sets up (ffi.cast of the callback), only C frames.
            m = fr.index("main") if "main" in fr else len(fr)
            below = tuple(fr[1:m]) == below_main if below_main is not None else m > 0
            setup = not toks and not any(LUA_FRAME.search(f) for f in fr[m + 3:])
            ok = (below and fr[m:m + 2] == ["main", "lua_pcall"]
                  and len(fr) > m + 3 and fr[m + 2].endswith("demo.lua:0")
                  and (setup or (fr[m + 3].startswith("run@")
                                 and fr[m + 3].endswith("demo.lua:40"))))
            if not ok:
                bad_host += w
                if len(examples) < 3:
                    examples.append("host frames: " + s[:300])
        if toks:
            seq = "".join(toks)
            if not NEST.match(seq):
                bad_nest += w
                if len(examples) < 6:
                    examples.append("nesting %s: %s" % (seq, s[-300:]))
            deepest = max(deepest, seq.count("L"))
            if toks[-1] == "W":
                lua_w += w
            elif toks[-1] == "K":
                c_w += w
            else:
                other_w += w
    if bad_host:
        problems.append("%.2f%% of the weight has host frames out of order"
                        % (100.0 * bad_host / total))
    if bad_nest:
        problems.append("%.2f%% of the weight breaks the fib_lua/fib_c nesting"
                        % (100.0 * bad_nest / total))
    if deepest < 3:
        problems.append("no stack with 3 fib_lua levels (deepest %d)" % deepest)
    if lua_w + c_w == 0:
        problems.append("no sample in lua_work or c_work")
        return problems, None
    share = 100.0 * lua_w / (lua_w + c_w)
    print("%s: leaf lua_work %.1f%%, c_work %.1f%% of the two (other frames %.1f%% "
          "of all); fib_lua nests %d deep" % (label, share, 100 - share,
                                              100.0 * other_w / total, deepest))
    if abs(share - measured_lua) > MAX_DIFF:
        problems.append("profile split Lua %.1f%% vs measured %.1f%% (more than %.0f points)"
                        % (share, measured_lua, MAX_DIFF))
    problems += examples
    return problems, share


def script_texts(sess, data, jdata):
    """perf script of the recording DATA and the injected JDATA, with FIELDS
    and plain: {name: file}."""
    texts = {}
    for name, d, fields, extra in (
            ("raw -F", data, FIELDS, ["--show-task-events"]),
            ("inject -F", jdata, FIELDS, ["--show-task-events"]),
            ("inject plain", jdata, None, []),
            ("raw plain", data, None, [])):
        if fields:
            txt = sess.script_text(d, fields, extra)
        else:
            r = subprocess.run(["perf", "--buildid-dir", sess.path(".debug"),
                                "script", "-i", d], capture_output=True, text=True)
            if r.returncode != 0:
                T.fail("perf script failed: " + r.stderr[-500:])
            txt = r.stdout
        path = sess.path(name.replace(" ", "_") + ".txt")
        with open(path, "w") as f:
            f.write(txt)
        texts[name] = path
    return texts


def test():
    seconds = sys.argv[1] if len(sys.argv) > 1 else "2"
    demo = os.path.join(T.build_dir(), "examples", "demo", "fibdemo")
    if not os.path.exists(demo):
        T.fail("demo not built: %s" % demo)
    if not os.path.exists(LJ_MERGE):
        T.fail("lj_merge not found: %s" % LJ_MERGE)
    with T.PerfSession() as sess:
        data, out = sess.record([demo, seconds], env={"LUAJIT_PERF": "1"},
                                freq=999, regs="r13")
        dumps = [n for n in os.listdir(sess.dir) if n.startswith("jit-") and n.endswith(".dump")]
        for n in dumps:
            sess.pids.add(int(n[4:-5]))        # their /tmp/perf-PID.map goes too
        print(out.strip())
        m = re.search(r"measured split: Lua ([0-9.]+)%, C ([0-9.]+)%", out)
        if not m:
            T.fail("the demo did not print its measured split: %r" % out[-300:])
        measured = float(m.group(1))
        if len(dumps) != 1:
            T.fail("expected one jit-PID.dump in %s, found %s" % (sess.dir, dumps))
        jdata = sess.inject(data)

        texts = script_texts(sess, data, jdata)
        nsamples = sum(1 for ln in open(texts["raw -F"]) if ln[:1] not in ("\t", " ", ""))
        print("%d samples recorded" % nsamples)
        if nsamples < MIN_SAMPLES:
            T.fail("only %d samples (want >= %d)" % (nsamples, MIN_SAMPLES))

        ok = True
        base, err = lj_merge(texts["raw -F"], sess.dir)
        if err.strip():
            print("lj_merge stderr: " + err.strip())
        problems, share = check(base, measured, "raw -F")
        for p in problems:
            print("  problem: " + p)
        ok = T.report(not problems, "raw perf script -F: root, host frames, nesting, "
                      "split (measured Lua %.1f%%, profile %s)"
                      % (measured, "%.1f%%" % share if share is not None else "n/a")) and ok
        for name in ("inject -F", "inject plain", "raw plain"):
            other, _ = lj_merge(texts[name], sess.dir)
            same = other == base
            if not same:
                for s in sorted(set(base) | set(other)):
                    if base.get(s) != other.get(s):
                        print("  differs: %s: %s vs %s" % (s[-200:], base.get(s), other.get(s)))
                        break
            ok = T.report(same, "%s gives the same folded stacks as raw -F" % name) and ok
        # --lines: every Lua frame has a line, and the same with inject
        lraw, _ = lj_merge(texts["raw -F"], sess.dir, "--lines")
        linj, _ = lj_merge(texts["inject -F"], sess.dir, "--lines")
        ok = T.report(lraw == linj, "--lines: the same with and without inject") and ok
        work = [s for s in lraw if ";lua_work@" in s and s.split(";")[-1].startswith("lua_work@")]
        weight = {}
        for s in work:
            ln = s.split(";")[-1].rsplit(":", 1)[1]
            weight[ln] = weight.get(ln, 0) + lraw[s]
        lines = set(weight)
        unknown = weight.get("?", 0) / (sum(weight.values()) or 1)
        # lua_work (demo.lua:20): its loop is line 23, the timing lines 21, 24;
        # a trace starting at its entry (line 20) is sampled there too. `?`:
        # a sample in VM code that does not hold the PC (rare).
        ok = T.report(bool(work) and lines - {"?"} <= {"20", "21", "22", "23", "24", "25"}
                      and "23" in lines and unknown < 0.02,
                      "--lines: lua_work's current lines %s (loop on 23; %.1f%% `?`)"
                      % (sorted(lines), 100 * unknown)) and ok
    return ok


if __name__ == "__main__":
    T.main(test)
