#!/usr/bin/env python3
"""Memory profiles end to end: `ljperf record --mem` of a Lua program under
real perf, judged against what the program itself knows.

usage: profile.py CASE   (known.jit, known.joff, leak, gcleak, kinds, stopfree,
                          nonroot, attach, cli)

known.MODE  tests/mem/known.lua allocates strings, tables and closures from
            three functions and prints each one's bytes, counted by the VM
            itself (collectgarbage "count" with the GC stopped around each
            run). alloc.folded's share of each function must be within 3
            points of the truth, the three together within 10% of the
            truth's total (the samples scaled as Go scales them), and every
            sampled stack of theirs must have the C host below its Lua
            frames (main, lua_pcall).
leak        tests/mem/leak.lua keeps what `leaky` allocates and drops what
            `churn` and `scratch` allocate: `leaky` holds >= 90% of
            inuse.folded, which comes within 20% of the bytes the program
            says it keeps; `go tool pprof -sample_index=inuse_space -top`
            lists leaky among its first three lines. Run again with the
            program letting go of the leak before it ends: in use comes back
            to under 2% of that. `ljperf diff` of the two in-use profiles is
            a page in bytes (by itself, and with --unit bytes for files
            whose names do not say).
gcleak      tests/mem/gcleak.lua, a leak beside a running GC that is never
            made to collect, recorded 10 times: in every run `leaky` holds
            >= 90% of the bytes in use (as of the last completed GC cycle,
            which the summary must say), the kept tables' array part aside
            (--mem-kinds: leaky's [table array]; its size is printed).
kinds       tests/mem/kinds.lua allocates each object kind in turn, and
            prints each phase's bytes (the VM's count): each kind's share of
            the sampled bytes (mem.json, ljperf's table) within 3 points of
            the truth; --mem-kinds leaf frames; `go tool pprof -tagfocus
            kind=^cdata$` keeps only ffi.new's samples.
stopfree    tests/mem/stopfree.lua drops and collects what `hold` allocated,
            then jit.perf.stop("mem"): `hold`'s tables have no byte in use
            in either view (the stop flushed the frees waiting for a trap,
            and the cycles completed since the last trap).
nonroot     leak.lua's leak found by `ljperf record --mem` run as user nobody
            (setpriv; kernel.perf_event_paranoid 2 allows a user to sample
            the page faults of its own processes): no root needed.
attach      `ljperf record --mem -p PID` of tests/mem/attached.lua, started
            without LUAJIT_PERF: its allocating function is in alloc.folded,
            and the program saw samples on while ljperf ran and off after.
cli         bad input: --mem-rate 0, 10t, 5g and --mem-rate without --mem
            give one line and exit status 2; --mem -p of a process without
            the patched VM names it and exits 1.
known and leak write mem.pb.gz with the four sample types, alloc.html and
inuse.html.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys

from tests.lib import ljptest as t

HERE = os.path.dirname(os.path.abspath(__file__))

RATE = "16k"
SHARE_POINTS = 3.0


def stacks(d, name):
    """{stack: bytes} of DIR/NAME (a folded file)."""
    return t.folded(os.path.join(d, name))


def owner(stack, names):
    """The innermost of NAMES (Lua function names) on STACK, or None."""
    for fr in reversed(stack.split(";")):
        for n in names:
            if fr.startswith(n + "@"):
                return n
    return None


def bytes_by(st, names):
    got = dict.fromkeys(names, 0)
    for s, w in st.items():
        o = owner(s, names)
        if o is not None:
            got[o] += w
    return got


def check_outputs(out):
    for f in ("alloc.folded", "inuse.folded", "mem.kinds", "alloc.html", "mem.pb.gz"):
        t.check(os.path.isfile(os.path.join(out, f)), "wrote " + f)
    with open(os.path.join(out, "mem.pb.gz"), "rb") as f:
        raw = gzip.decompress(f.read())
    for typ in (b"alloc_objects", b"alloc_space", b"inuse_objects", b"inuse_space",
                b"bytes"):
        t.check(typ in raw, "mem.pb.gz names %s" % typ.decode())


def go_pprof_top(path, *opts):
    """`go tool pprof -sample_index=inuse_space -top PATH`'s output (Go reads
    the profile: the CI machine installs golang-go); OPTS instead of the
    -sample_index."""
    if not shutil.which("go"):
        t.fail("go is not installed (Debian package golang-go): it must read mem.pb.gz")
    r = subprocess.run(["go", "tool", "pprof"] + list(opts or ["-sample_index=inuse_space"]) +
                       ["-top", path],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, HOME=os.path.dirname(path)))
    t.check(r.returncode == 0, "go tool pprof reads mem.pb.gz (%s)" % r.stderr.strip()[-200:])
    return r.stdout


def record(s, out, args, prog_args):
    luajit = t.built("bin", "luajit")
    r = s.ljperf(["record", "--mem", "--mem-rate", RATE, "-F", "199", "-o", out, "--",
                  luajit] + args + [os.path.join(HERE, prog_args[0])] + prog_args[1:])
    t.check(r.returncode == 0, "ljperf record --mem exits 0")
    t.check("memory:" in r.stderr and "inuse" in r.stderr,
            "says where the memory profiles are")
    return r


def known(mode):
    names = ("strs", "tabs", "clos")
    with t.Session() as s:
        out = s.path("out")
        r = record(s, out, ["-joff"] if mode == "joff" else [], ["known.lua"])
        truth = {}
        for line in r.stdout.splitlines():
            k, _, v = line.partition(" ")
            if k in names:
                truth[k] = int(v)
        t.check(sorted(truth) == sorted(names), "the program printed its truth: %r" % truth)
        check_outputs(out)
        st = stacks(out, "alloc.folded")
        got = bytes_by(st, names)
        tt, gt = sum(truth.values()), sum(got.values())
        for n in names:
            ts, gs = 100.0 * truth[n] / tt, 100.0 * got[n] / max(gt, 1)
            t.check(abs(ts - gs) <= SHARE_POINTS,
                    "%s: %.1f%% of the sampled bytes, %.1f%% true" % (n, gs, ts))
        t.check(abs(gt - tt) <= 0.1 * tt,
                "sampled total %d bytes, true %d (within 10%%)" % (gt, tt))
        ours = [s_ for s_ in st if owner(s_, names)]
        below = [s_ for s_ in ours if ";main;" in s_ and ";lua_pcall;" in s_]
        t.check(len(below) == len(ours),
                "every stack of the three has main and lua_pcall below (%d of %d)"
                % (len(below), len(ours)))


def leak():
    names = ("leaky", "churn", "scratch")
    with t.Session() as s:
        out = s.path("keep")
        r = record(s, out, [], ["leak.lua", "keep"])
        kept = int(r.stdout.split("kept")[1].split()[0]) * 1024
        check_outputs(out)
        inuse = stacks(out, "inuse.folded")
        got = bytes_by(inuse, names)
        total = sum(inuse.values())
        t.check(got["leaky"] >= 0.9 * total,
                "leaky holds %.1f%% of the bytes in use" % (100.0 * got["leaky"] / max(total, 1)))
        t.check(abs(total - kept) <= 0.2 * kept,
                "in use %d bytes, the program keeps %d (within 20%%)" % (total, kept))
        top = [ln for ln in go_pprof_top(os.path.join(out, "mem.pb.gz")).splitlines()
               if "%" in ln and "flat" not in ln]
        t.check(bool(top) and "leaky@" in " ".join(ln for ln in top if "leaky@" in ln) and
                any("leaky@" in ln for ln in top[:3]),
                "go tool pprof -sample_index=inuse_space -top lists leaky among the "
                "first three: %s" % "; ".join(" ".join(ln.split()) for ln in top[:3]))
        alloc = bytes_by(stacks(out, "alloc.folded"), names)
        t.check(alloc["churn"] > alloc["leaky"] and alloc["scratch"] > 0,
                "churn and scratch allocated too (%r)" % alloc)

        out = s.path("drop")
        record(s, out, [], ["leak.lua", "drop"])
        inuse = stacks(out, "inuse.folded")
        dropped = sum(inuse.values())
        t.check(dropped < 0.02 * kept,
                "after the program drops it, %d bytes in use (< 2%% of %d)" % (dropped, kept))

        # ljperf diff of the two: bytes by itself for inuse.folded files,
        # with --unit bytes for files it cannot tell
        for a, b, extra in ((os.path.join(s.path("keep"), "inuse.folded"),
                             os.path.join(out, "inuse.folded"), []),
                            (shutil.copy(os.path.join(s.path("keep"), "inuse.folded"),
                                         s.path("before.txt")),
                             shutil.copy(os.path.join(out, "inuse.folded"),
                                         s.path("after.txt")), ["--unit", "bytes"])):
            page = s.path("diff.html")
            r = s.ljperf(["diff", a, b, "-o", page] + extra)
            with open(page) as f:
                t.check(r.returncode == 0 and '"unit":"bytes"' in f.read(),
                        "ljperf diff %s: a page in bytes" % " ".join(extra or ["(inuse.folded)"]))


def gcleak():
    luajit = t.built("bin", "luajit")
    r = subprocess.run([luajit, os.path.join(HERE, "gcleak.lua"), "measure"],
                       capture_output=True, text=True, timeout=120)
    w = r.stdout.replace(",", "").split()
    t.check(r.returncode == 0 and len(w) == 9, "gcleak.lua measure: %r" % r.stdout)
    kept, array = int(w[3]), int(w[7])
    print("# the kept tables: %d bytes, of which kept's array part %d (%.1f%%)"
          % (kept, array, 100.0 * array / kept))
    names = ("leaky", "churn", "scratch")
    shares = []
    with t.Session() as s:
        for run in range(10):
            out = s.path("run%d" % run)
            r = s.ljperf(["record", "--mem", "--mem-kinds", "--mem-rate", RATE,
                          "-o", out, "--", luajit, os.path.join(HERE, "gcleak.lua")])
            t.check(r.returncode == 0, "run %d: ljperf record --mem exits 0" % run)
            t.check("live at the last completed GC cycle" in r.stderr,
                    "run %d: in use is as of the last completed GC cycle" % run)
            inuse = stacks(out, "inuse.folded")
            total = sum(inuse.values())
            arr = sum(w for s_, w in inuse.items()
                      if owner(s_, names) == "leaky" and s_.endswith(";[table array]"))
            got = bytes_by(inuse, names)["leaky"] - arr
            share = 100.0 * got / max(total - arr, 1)
            shares.append(share)
            t.check(share >= 90.0,
                    "run %d: leaky holds %.1f%% of %d bytes in use (its kept array, %d "
                    "bytes, aside)" % (run, share, total, arr))
    print("# leaky's share of in use, 10 runs: %s" % " ".join("%.1f" % x for x in shares))


def kinds():
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        out = s.path("out")
        r = s.ljperf(["record", "--mem", "--mem-kinds", "--mem-rate", "8k",
                      "-o", out, "--", luajit, os.path.join(HERE, "kinds.lua")])
        t.check(r.returncode == 0, "ljperf record --mem exits 0")
        truth = dict((k, int(v)) for k, v in
                     (ln.split("\t") for ln in r.stdout.splitlines() if "\t" in ln))
        t.check(len(truth) == 8, "the program printed its truth: %r" % truth)
        with open(os.path.join(out, "mem.json")) as f:
            got = {k: v[0] for k, v in json.load(f)["kinds"].items()}
        tt, gt = sum(truth.values()), sum(got.values())
        for k in sorted(truth):
            ts, gs = 100.0 * truth[k] / tt, 100.0 * got.get(k, 0) / max(gt, 1)
            t.check(abs(ts - gs) <= SHARE_POINTS,
                    "%s: %.1f%% of the sampled bytes, %.1f%% true" % (k, gs, ts))
        t.check(all(" %s " % k in r.stderr or " %s  " % k in r.stderr for k in truth),
                "ljperf names every kind in its table")
        alloc = stacks(out, "alloc.folded")
        t.check(any(s_.endswith("ffi.new;[cdata]") for s_ in alloc) and
                any(s_.endswith("coroutine.create;[thread]") for s_ in alloc),
                "--mem-kinds: the kind is the leaf frame ([cdata] under ffi.new)")
        top = go_pprof_top(os.path.join(out, "mem.pb.gz"), "-sample_index=alloc_space",
                           "-tagfocus", "kind=^cdata$")
        t.check("ffi.new" in top and "coroutine.create" not in top and "newproxy" not in top,
                "go tool pprof -tagfocus kind=^cdata$ keeps ffi.new only")


def stopfree():
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        for view in ("cycle", "now"):
            out = s.path(view)
            r = s.ljperf(["record", "--mem", "--mem-kinds", "--mem-rate", RATE, "--inuse",
                          view, "-o", out, "--", luajit,
                          os.path.join(HERE, "stopfree.lua")])
            t.check(r.returncode == 0 and "mem off" in r.stdout,
                    "%s: ljperf record --mem exits 0, the program stopped samples" % view)
            # hold's tables (the JIT's trace of its loop stays live)
            alloc, held = (bytes_by({s_: w for s_, w in stacks(out, f).items()
                                     if s_.endswith(("[table]", "[table array]"))},
                                    ("hold",))["hold"]
                           for f in ("alloc.folded", "inuse.folded"))
            t.check(alloc > 0 and held == 0, "%s: hold allocated %d bytes, %d in use"
                    % (view, alloc, held))


def nonroot():
    if os.geteuid() != 0:
        t.fail("needs root, to run ljperf as nobody with setpriv")
    with t.Session() as s:
        os.chmod(s.dir, 0o777)
        os.chmod(s.home, 0o777)
        out = s.path("out")
        # the system's python: nobody may not reach the one running this test
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        r = s.ljperf(["record", "--mem", "--mem-rate", RATE, "-o", out, "--",
                      t.built("bin", "luajit"), os.path.join(HERE, "leak.lua"), "keep"],
                     prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
                     python=py)
        t.check(r.returncode == 0, "ljperf record --mem exits 0 as nobody")
        inuse = stacks(out, "inuse.folded")
        got = bytes_by(inuse, ("leaky",))["leaky"]
        total = sum(inuse.values())
        t.check(total > 0 and got >= 0.9 * total,
                "as nobody, leaky holds %.1f%% of the bytes in use" % (100.0 * got / max(total, 1)))


def attach():
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        p = s.start([luajit, os.path.join(HERE, "attached.lua")], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, text=True)
        t.check(p.stdout.readline().strip() == "mem off", "the program starts without samples")
        out = s.path("out")
        r = s.ljperf(["record", "--mem", "--mem-rate", "32k", "-p", str(p.pid),
                      "--duration", "3", "-o", out])
        t.check(r.returncode == 0, "ljperf record --mem -p exits 0")
        t.check("pid %d: switched recording on" % p.pid in r.stderr, "the process switched on")
        seen = []                 # one line a second since it started
        while len(seen) < 20 and not ("mem on" in seen and seen[-1] == "mem off"):
            seen.append(p.stdout.readline().strip())
        p.stdin.close()
        s.stop(p)
        t.check("mem on" in seen and seen[-1] == "mem off",
                "samples were on while ljperf ran, off after: %r" % seen)
        got = bytes_by(stacks(out, "alloc.folded"), ("grow",))
        total = sum(stacks(out, "alloc.folded").values())
        t.check(got["grow"] >= 0.8 * total,
                "grow allocated %d of %d bytes sampled" % (got["grow"], total))
        # grow keeps 256 small tables at a time: live at the last completed GC
        # cycle is next to nothing (no page then), but the profile is written
        t.check(os.path.isfile(os.path.join(out, "inuse.folded")), "wrote inuse.folded")


def cli():
    with t.Session() as s:
        for args, code, words in (
                (["--mem", "--mem-rate", "0"], 2, "must be 64 bytes"),
                (["--mem", "--mem-rate", "10t"], 2, "not a byte count"),
                (["--mem", "--mem-rate", "5g"], 2, "must be 64 bytes"),
                (["--mem-rate", "1m"], 2, "--mem-rate needs --mem")):
            r = s.ljperf(["record"] + args + ["--", "true"])
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            t.check(r.returncode == code and len(lines) == 1 and words in lines[0],
                    "%s: one line, exit %d (%r)" % (" ".join(args), code, lines))
        p = s.start(["sleep", "30"])
        r = s.ljperf(["record", "--mem", "-p", str(p.pid), "--duration", "1",
                      "-o", s.path("out")])
        t.check(r.returncode == 1 and "pid %d" % p.pid in t.last_line(r.stderr),
                "a process without the patched VM is named: %r" % t.last_line(r.stderr))
        s.stop(p)


def main():
    t.need_perf()
    case = sys.argv[1] if len(sys.argv) > 1 else ""
    if case.startswith("known."):
        t.main(lambda: known(case.split(".", 1)[1]))
    elif case in CASES:
        t.main(CASES[case])
    else:
        sys.exit("usage: profile.py known.jit|known.joff|%s" % "|".join(CASES))


CASES = {"leak": leak, "gcleak": gcleak, "kinds": kinds, "stopfree": stopfree,
         "nonroot": nonroot, "attach": attach, "cli": cli}


if __name__ == "__main__":
    main()
