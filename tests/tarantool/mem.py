#!/usr/bin/env python3
"""Memory profiles of Tarantool: `ljperf record --mem --mem-rate 16k -p PID`
on the tarantool binary given (build/bin/tarantool; build-tarantool3's for
3.x) running tests/tarantool/mem.lua, started WITHOUT LUAJIT_PERF (the
remote switch turns allocation samples on).

mem.lua returns from its main chunk into Tarantool's event loop; a fiber
runs fiber_main -> worker -> make_items, which builds and drops 64 small
tables and strings per batch and yields; another fiber counts without
allocating, a third prints the batches/s every 0.1 s. Checked:

record   ljperf exits 0, its stderr says the pid switched recording on
         (and not that it cannot sample allocations); alloc.folded,
         inuse.folded, mem.kinds, mem.pb.gz, alloc.html written, and
         inuse.html unless nothing was in use at the last GC cycle.
alloc    in alloc.folded, stacks through make_items (known by its name and
         definition line, interpreted or `_[j]`) hold > 50% of the pid's
         allocated bytes; >= 99% of those bytes have, below make_items,
         exactly the Lua frames fiber_main, worker (names and definition
         lines found in mem.lua), and below them C frames only (mem.kinds),
         at least one of them Tarantool's fiber machinery (FIBER_C).
after    within 5 s of ljperf's end the control block is off again (nremote
         0, ack == seq); the instance runs on (batches/s), its results right
         (no BAD line); of the files in /tmp named after its pid only its
         perf map and jitdump are left (removed at the end).
perf missing or tarantool not starting is a failure. Prints batches/s
before, during and after, the share and the C frames seen.
"""

import argparse
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.remote import test_remote as tr  # its Reader, median
from ljperf import remote as ljremote
from tests.lib import ljptest

t = tr.t                    # tests/lib/ljptest
WORKLOAD = os.path.join(HERE, "mem.lua")
RATE = "16k"
CHAIN = ["fiber_main", "worker", "make_items"]      # root to leaf
# Tarantool's C frames under a Lua fiber function (fiber.create):
# coro_init -> fiber_loop -> fiber_cxx_invoke -> lua_fiber_run_f -> luaT_call
FIBER_C = ("coro_init", "fiber_loop", "fiber_cxx_invoke", "lua_fiber_run_f")
MIN_SHARE = 0.50
MIN_CHAIN = 0.99
OUTPUTS = ("alloc.folded", "inuse.folded", "mem.kinds", "mem.pb.gz", "alloc.html",
           "inuse.html")


def def_lines():
    """{name: definition line} of mem.lua's `local function`s in CHAIN."""
    out = {}
    with open(WORKLOAD) as f:
        for i, line in enumerate(f, 1):
            m = re.match(r"local function (\w+)\(", line)
            if m and m.group(1) in CHAIN:
                out[m.group(1)] = i
    if sorted(out) != sorted(CHAIN):
        t.fail("mem.lua defines %s, not all of %s" % (sorted(out), CHAIN))
    return out


LINES = def_lines()
FRAME_RE = re.compile(r"^(\w+)@" + re.escape(WORKLOAD) + r":(\d+)(?:_\[j\])?$")


def chain_name(frame):
    """The CHAIN function FRAME is (by name and definition line), or None."""
    m = FRAME_RE.match(frame)
    if m and LINES.get(m.group(1)) == int(m.group(2)):
        return m.group(1)
    return None


def kinds(path):
    """{frame: kind} of mem.kinds (c, lua, trace, root, ...)."""
    out = {}
    with open(path) as f:
        for line in f:
            k, _, fr = line.rstrip("\n").partition("\t")
            out[fr] = k
    return out


def analyse(alloc, kind, chain=CHAIN):
    """(bytes of all stacks, of those through make_items, of those with the
    full chain over C frames with a fiber frame, {C frames below: bytes},
    first other make_items stack)."""
    tot = ours = good = 0
    below, bad = {}, None
    for st, w in alloc.items():
        frames = st.split(";")
        tot += w
        names = [chain_name(f) for f in frames]
        if "make_items" not in names:
            continue
        ours += w
        leaf = len(names) - 1 - names[::-1].index("make_items")
        lua = [i for i, f in enumerate(frames[1:leaf], 1) if kind.get(f) in ("lua", "trace")]
        first = lua[0] if lua else leaf
        cs = frames[1:first]
        below[";".join(cs)] = below.get(";".join(cs), 0) + w
        if ([names[i] for i in lua] + ["make_items"] == chain and
                all(kind.get(f) == "c" for f in cs) and any(f in FIBER_C for f in cs)):
            good += w
        elif bad is None:
            bad = st[-600:]
    return tot, ours, good, below, bad


def block_off(pid):
    st = [ljremote.Block(pid, a).read() for a in ljremote.find_blocks(pid)]
    return bool(st) and all(c["nremote"] == 0 and c["ack"] == c["seq"] for c in st)


def pid_files(pid):
    rx = re.compile(r"(?:^|\D)%d(?:\D|$)" % pid)
    return sorted(f for f in os.listdir("/tmp") if rx.search(f))


def check_profile(out, pages=True):
    """PAGES: the build has the page renderer (CI's build-tarantool3 has not)."""
    # In use is as of the last completed GC cycle: make_items' batches are
    # gone by then, and an empty profile gets no page.
    inuse = os.path.getsize(os.path.join(out, "inuse.folded")) \
        if os.path.isfile(os.path.join(out, "inuse.folded")) else 0
    for f in OUTPUTS:
        if (pages or not f.endswith(".html")) and (inuse or f != "inuse.html"):
            t.check(os.path.isfile(os.path.join(out, f)), "wrote " + f)
    alloc = ljptest.folded(os.path.join(out, "alloc.folded"))
    kind = kinds(os.path.join(out, "mem.kinds"))
    tot, ours, good, below, bad = analyse(alloc, kind)
    print("allocated: %d bytes, %d through make_items, %d of those on %s over C frames"
          % (tot, ours, good, ";".join(CHAIN)))
    for cs, w in sorted(below.items(), key=lambda kv: -kv[1])[:3]:
        print("  C frames below the Lua ones (%.1f%%): %s" % (100.0 * w / ours, cs))
    if bad:
        print("  first other: " + bad)
    t.check(ours > MIN_SHARE * tot,
            "make_items allocated %.1f%% of the bytes (> %d%%)"
            % (100.0 * ours / max(tot, 1), 100 * MIN_SHARE))
    t.check(good >= MIN_CHAIN * ours,
            "%.2f%% of them under %s (names and definition lines %s) over Tarantool's "
            "fiber C frames (one of %s)"
            % (100.0 * good / max(ours, 1), " -> ".join(CHAIN),
               ", ".join("%s:%d" % (n, LINES[n]) for n in CHAIN), ", ".join(FIBER_C)))
    swapped = [CHAIN[1], CHAIN[0]] + CHAIN[2:]
    t.check(analyse(alloc, kind, swapped)[2] < MIN_CHAIN * ours,
            "control: the same check expecting %s fails" % " -> ".join(swapped))


def run(opts):
    with t.Session() as s:
        env = s.env({"TMPDIR": s.dir}, drop=("LUAJIT_PERF_REMOTE", "LUAJIT_PERF_MEMRATE"))
        p = s.start([opts.tarantool, WORKLOAD], env=env, stdout=subprocess.PIPE)
        rd = tr.Reader(p)
        t.check(rd.wait(lambda ln: ln == "ready") is not None, "tarantool starts")
        t.check(rd.wait(lambda ln: ln.startswith("rate=")) is not None and
                block_off(p.pid) and not pid_files(p.pid),
                "started without LUAJIT_PERF: switched off, no file of it in /tmp")
        time.sleep(1.0)
        out = s.path("out")
        t0 = time.monotonic()
        r = s.ljperf(["record", "--mem", "--mem-rate", RATE, "-p", str(p.pid),
                      "--duration", str(opts.seconds), "-F", "499", "-o", out])
        t1 = time.monotonic()
        pages = "flame graph renderer not found" not in r.stderr
        t.check(r.returncode == 0 or (r.returncode == 1 and not pages and
                                      "alloc.folded and inuse.folded too" in r.stderr),
                "ljperf record --mem -p writes the profiles (%.1f s%s)"
                % (t1 - t0, "" if pages else "; a build without the page renderer: "
                   "the folded outputs only"))
        t.check("pid %d: switched recording on" % p.pid in r.stderr,
                "its stderr says the pid switched recording on")
        t.check("cannot sample its allocations" not in r.stderr,
                "it samples the allocations (the VM is ljperf's)")
        check_profile(out, pages)
        t_off = None
        while t_off is None and time.monotonic() < t1 + 5:
            if block_off(p.pid):
                t_off = time.monotonic()
            time.sleep(0.01)
        t.check(t_off is not None, "after ljperf ends the instance is off again "
                "(%.2f s after)" % ((t_off or t1) - t1))
        time.sleep(1.0)
        t.check(p.poll() is None, "the instance keeps running")
        t.check(not any(ln.startswith("BAD") for ln in rd.text()), "its results stay correct")
        left = pid_files(p.pid)
        t.check(set(left) <= {os.path.basename(f) for f in t.tmp_files(p.pid)},
                "in /tmp only its perf map and jitdump: %s" % left)
        tr.say_rates("tarantool", rd.rates(0, t0), rd.rates(t0 + 0.5, t1 - 0.5),
                     rd.rates(t_off + 0.2, time.monotonic()))
        s.stop(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tarantool", required=True, help="patched tarantool binary")
    ap.add_argument("--seconds", type=int, default=4, help="recording time")
    o = ap.parse_args()

    def test():
        t.need_perf()
        if not os.access(o.tarantool, os.X_OK):
            t.fail("%s is not an executable tarantool" % o.tarantool)
        run(o)
    t.main(test)


if __name__ == "__main__":
    main()
