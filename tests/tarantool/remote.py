#!/usr/bin/env python3
"""The remote switch on Tarantool: `ljperf record -p PID` on
build/bin/tarantool running tests/tarantool/remote.lua, started WITHOUT
LUAJIT_PERF (docs/remote-switch.md).

remote.lua returns from its main chunk into Tarantool's event loop; a
fiber recurses in Lua (worker -> 9 x ljperf_rec -> ljperf_leaf) down to
space:replace (lbox_replace, the box C API) and a string op; another
prints jit.perf.status() and the worker's rate every 0.1 s
(tests/remote/prog.lua's format; that test's reader and status checks are
reused). Checked:

off      before: status all false.
on       ljperf record -p PID writes the profile; while it runs the status
         says map, jitdump, frames on and remote (switch-on latency: from
         ljperf's start to the first such line, 0.1 s resolution).
roots    e2e_perf.py's check 1 on the recording (--scope own): >= 99% of
         the user samples whose leaf is outside system libraries reach
         main or a fiber/thread start.
nesting  of the weight of the folded stacks holding lbox_replace, >= 99%
         have the Lua frames ljperf_worker, 9 x ljperf_rec, ljperf_leaf
         (known by their definition lines: switched on remotely, functions
         whose defining chunk was collected have no NAME@ in their label)
         (nothing else Lua) before it: the recursion nested, the C API under
         its Lua caller; and those stacks start at the fiber's root
         (coro_init, fiber_loop).
after    the status is off again within 5 s of ljperf's end; the instance
         runs on, its results right (no BAD line), and of the files in /tmp
         named after its pid only perf-PID.map and jit-PID.dump are left
         (docs/ljperf.md, Files; removed when the test stops it).
Prints iterations/s before, during and after.
"""

import argparse
import os
import re
import subprocess
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from tests.remote import test_remote as tr  # its Reader, status checks, record
import e2e_perf  # its roots check

t = tr.t                    # tests/lib/ljptest
WORKLOAD = os.path.join(HERE, "remote.lua")
DEPTH = 9                   # ljperf_rec(8, k): levels 8..0
MIN_NESTED = 100            # samples in lbox_replace stacks, at least
MIN_SHARE = 0.99


def workload_lines():
    """{definition line: name} of remote.lua's `local function`s."""
    out = {}
    with open(WORKLOAD) as f:
        for i, line in enumerate(f, 1):
            m = re.match(r"local function (\w+)\(", line)
            if m:
                out[i] = m.group(1)
    return out


LINES = workload_lines()
# remote.lua's functions: NAME@CHUNK:LINE, or CHUNK:LINE -- switched on
# remotely, the VM names a prototype from its parent's bytecode, and the
# main chunk that defined these was collected when it returned.
FRAME_RE = re.compile(r"(?:\w+@)?" + re.escape(WORKLOAD) + r":(\d+)$")


def lua_chain(frames):
    """Names of remote.lua's frames in FRAMES, and whether another Lua frame
    (NAME@CHUNK:LINE, CHUNK:LINE of another chunk) is among them."""
    out, other = [], False
    for f in frames:
        m = FRAME_RE.match(f)
        if m:
            out.append(LINES.get(int(m.group(1)), f))
        elif "@" in f or re.search(r"\.lua:\d+$", f):
            other = True
    return out, other


def nested(fold, depth):
    """(weight of the lbox_replace stacks, of those rooted at the fiber's
    start with exactly worker, DEPTH x rec, leaf as Lua frames, first other
    stack)."""
    expected = ["ljperf_worker"] + ["ljperf_rec"] * depth + ["ljperf_leaf"]
    tot = good = 0
    bad = None
    for st, n in fold.items():
        frames = st.split(";")
        if "lbox_replace" not in frames:
            continue
        tot += n
        chain, other = lua_chain(frames[:frames.index("lbox_replace")])
        rooted = [f for f in frames[1:4] if f != "[unknown]"][:2] == ["coro_init", "fiber_loop"]
        if chain == expected and not other and rooted:
            good += n
        elif bad is None:
            bad = st[-600:]
    return tot, good, bad


def check_nesting(fold):
    unit = min(fold.values(), default=1)
    tot, good, bad = nested(fold, DEPTH)
    print("lbox_replace stacks: %d samples, %d with coro_init;fiber_loop;...;ljperf_worker;"
          "ljperf_rec*%d;ljperf_leaf;lbox_replace" % (tot // unit, good // unit, DEPTH))
    if bad:
        print("  first other: " + bad)
    t.check(tot >= MIN_NESTED * unit and good >= MIN_SHARE * tot,
            "full mixed stacks: the fiber's root, Lua recursion nested (%d x ljperf_rec), "
            "the box C API under its Lua caller (%.2f%%)"
            % (DEPTH, 100.0 * good / tot if tot else 0))
    for d in (DEPTH - 1, DEPTH + 1):    # negative controls: the check can fail
        t.check(nested(fold, d)[1] < MIN_SHARE * tot,
                "control: the same check expecting %d x ljperf_rec fails" % d)


def check_roots(out, pid):
    script = os.path.join(out, "perf.script")
    with open(script, "w") as f:
        r = subprocess.run(["perf", "--buildid-dir", os.path.join(out, ".debug"), "script",
                            "-i", os.path.join(out, "perf.jit.data"), "-F", e2e_perf.FIELDS],
                           stdout=f, stderr=subprocess.PIPE, text=True)
    t.check(r.returncode == 0, "perf script of the recording " + r.stderr[-300:])
    samples = [s for s in e2e_perf.parse_script(script) if s.pid == pid]
    res = e2e_perf.analyse(samples)
    ok, msg = e2e_perf.root_check(res, types.SimpleNamespace(
        scope="own", min_samples=300, min_share=99.0))
    print("roots reached: %s" % ", ".join("%s %d" % kv for kv in res["roots"].most_common()))
    t.check(ok, "roots: " + msg)


def pid_files(pid):
    rx = re.compile(r"(?:^|\D)%d(?:\D|$)" % pid)
    return sorted(f for f in os.listdir("/tmp") if rx.search(f))


def run(opts):
    with t.Session() as s:
        env = s.env({"TMPDIR": s.dir}, drop=("LUAJIT_PERF_REMOTE",))
        p = s.start([opts.tarantool, WORKLOAD], env=env, stdout=subprocess.PIPE)
        rd = tr.Reader(p)
        t.check(rd.wait(lambda ln: ln == "ready") is not None, "tarantool starts")
        t.check(rd.wait(tr.lua_off) is not None and not pid_files(p.pid),
                "started without LUAJIT_PERF: status off, no file of it in /tmp")
        time.sleep(1.0)
        t0 = time.monotonic()
        out = s.path("out")
        r = tr.record(s, [p.pid], out, ["--duration", str(opts.seconds)])
        t1 = time.monotonic()
        t.check(tr.recorded(r), "ljperf record -p writes the profile")
        on = rd.wait(tr.lua_remote_on, since=t0, timeout=1)
        t.check(on is not None, "while recorded, status: map, jitdump, frames on, remote")
        print("SWITCH: status on %.2f s after ljperf started" % (on[0] - t0))
        check_roots(out, p.pid)
        check_nesting(t.folded(out))
        off = rd.wait(tr.lua_off, since=t1, timeout=5)
        t.check(off is not None, "after ljperf ends the instance is off again")
        time.sleep(1.0)
        t.check(p.poll() is None, "the instance keeps running")
        t.check(not any(ln.startswith("BAD") for ln in rd.text()), "its results stay correct")
        left = pid_files(p.pid)
        t.check(set(left) <= {os.path.basename(f) for f in t.tmp_files(p.pid)},
                "in /tmp only its perf map and jitdump: %s" % left)
        tr.say_rates("tarantool", rd.rates(0, t0), rd.rates(t0 + 0.5, t1 - 0.5),
                     rd.rates(off[0] + 0.2, time.monotonic()))
        s.stop(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tarantool", required=True, help="patched tarantool binary")
    ap.add_argument("--seconds", type=int, default=4, help="recording time")
    o = ap.parse_args()
    t.need_perf()
    t.main(lambda: run(o))


if __name__ == "__main__":
    main()
