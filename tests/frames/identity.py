#!/usr/bin/env python3
"""Every active Lua function is in every sample's chain, in order.

usage: identity.py CASE MODE   (MODE: joff or jit)

Runs tests/frames/CASE.lua on the patched VM (bin/luajit, or the binary
RUN_BY names) with LUAJIT_PERF=1 (frame recording, jitdump) under `perf
record -k mono -g --call-graph fp --user-regs=r13`, WITHOUT perf inject.
Bytecode and trace addresses in the chains are resolved from the program's
jitdump (the load live at the sample's time). Samples are selected by where
they land: for a Lua leaf, the sampled PC (R13) lies in that function's
bytecode while an interpreter handler runs, or the sample is in a trace
owned by a function of an expected sequence (traces of other functions,
such as the program's own reporting, are not on the leaf's path); for a C
leaf, the leaf symbol. The chain of each selected sample, reduced to Lua
functions (and the named C functions), must equal one of the expected
sequences, root first, in at least 99.5% of them. A sample in trace code
(JIT mode) names the trace by the function it started in, not the calls it
inlined: its records must be an expected sequence's whole chain below that
function, which comes next. Cases in ALL_CHAINS also have every
chain of the run judged as validity.py judges the torture suite's; cases in
EACH_SEQ must show each expected sequence (-joff).
"""

import os
import sys

from tests.lib import ljptest as T
from tests.frames import validity
from ljperf import frames as ljframes
from ljperf import vmregs

HERE = os.path.dirname(os.path.abspath(__file__))
NEED = 0.995
MIN_SAMPLES = 100

VM_HELPER = "<VM helper>"  # leaf: a C function of the VM (GC, allocation)

# case: (leaf to select, expected sequences, rounds -joff, rounds JIT);
# None: the mode does not apply (jitswitch turns the JIT on itself; tailstitch
# and tailinline are about trace exits).
CASES = {
    "recursion": ("spin", [["main", "driver"] + ["rec"] * 9 + ["spin"]], 2000, 20000),
    "mutual": ("spin", [["main", "driver", "a", "b", "a", "b", "a", "b", "spin"]],
               2000, 20000),
    "sandwich": ("cmod_burn", [["main", "driver", "outer", "cmod_call", "inner",
                                "cmod_spin", "cmod_burn"]], 2000, 2000),
    "coroutines": ("spin", [["main", "driver", "level1", "level2", "level3", "spin"],
                            ["main", "driver", "deeper", "level1", "level2",
                             "level3", "spin"]], 2000, 20000),
    "pcalls": ("spin", [["main", "driver", "p1", "p2", "spin"]], 2000, 20000),
    "traceexit": ("cmod_burn", [["main", "loop", "inl", "inl2", "cmod_spin",
                                 "cmod_burn"]], 400000, 400000),
    "stitch": ("cmod_burn", [["main", "driver", "loop", "cmod_spin", "cmod_burn"]],
               200, 200),
    "tailstitch": ("cmod_burn", [["main", "driver", "callee", "cmod_spin", "cmod_burn"]],
                   None, 20000),
    "tailinline": ("cmod_burn", [["main", "driver", "callee", "inl", "cmod_spin",
                                  "cmod_burn"]], None, 20000),
    "exitvarg": ("cmod_burn", [["main", "loop", "mid", "inner", "cmod_spin",
                                "cmod_burn"]], 400000, 400000),
    "tailvararg": ("spin", [["main", "driver", "vb", "spin"]], 2000, 20000),
    "metamethods": ("spin", [["main", "driver", "usemm", mm, "spin"] for mm in
                             ("__index", "__newindex", "__call", "__lt", "__eq")], 500, 2000),
    "finalizers": ("spin", [["main", "driver", "__gc", "spin"],
                            ["main", "driver", "make", "__gc", "spin"]], 2000, 10000),
    "hooks": ("spin", [["main", "driver", "work", "hook", "spin"]], 300, 12000),
    "stackgrowth": ("spin", [["main", "driver"] + ["big"] * 101 + ["spin"]], 200, 2000),
    "jitswitch": ("spin", [["main", "driver", "work", "spin"]], None, 8000),
    "callbacks": ("spin", [["main", "driver", "caller", "ffilib_each", "cbfn",
                            "spin"]], 100, 400),
    "toggles": ("spin", [["main", "driver", "a", "spin"], ["main", "driver", "b", "spin"],
                         ["main", "driver", "c", "spin"],
                         ["main", "driver", "cofn", "spin"]], 500, 3000),
    "helpers": (VM_HELPER, [["main", "driver", "alloc"]], 30, 150),
    "hookstart": ("spin", [["main", "driver", "work", "spin"]], 1000, 3000),
    "stackshrink": ("spin", [["main", "driver", "solo", "spin"],
                             ["main", "driver", "worker", "wyield"] + ["climb"] * 5 + ["spin"],
                             ["main", "driver", "nested", "outer", "inner", "spin"],
                             ["main", "driver", "nested", "outer", "spin"]], 60, 100),
}
SWITCHING = {"toggles", "hookstart"}  # the program switches frame recording
CASES["stackmove"] = CASES["stackshrink"]
# Cases whose program another binary of the build tree runs instead of
# bin/luajit: (Lua program, binary). movehost: every shrink moves the stack.
RUN_BY = {"stackmove": ("stackshrink", os.path.join("tests", "frames", "movehost"))}
# Cases whose every sample's chain is also judged as validity.py judges the
# torture suite's (host, VM, live bytecode and trace code up to main): the
# chains while the GC moves the stacks under the recorded frames.
ALL_CHAINS = {"stackshrink", "stackmove"}
# Cases whose every expected sequence must be seen in MIN_EACH exact samples
# with -joff: each path of the workload ran and was sampled.
EACH_SEQ = {"stackshrink", "stackmove"}
MIN_EACH = 20
C_NAMES = {"cmod_call", "cmod_spin", "cmod_burn", "ffilib_each"}


def short(label):
    """'spin@/path/x.lua:2' -> 'spin'; the main chunk 'x.lua:0' -> 'main'."""
    if "@" in label:
        return label.split("@", 1)[0]
    return "main" if label.endswith(":0") else label


class Resolver:
    def __init__(self, dump):
        self.dump = dump

    def load(self, addr, t):
        live = None
        for ld in self.dump.candidates(addr):
            if ld.ts <= t:
                live = ld
        return live


def guest(dso):
    """Frames in memory perf cannot map to a file: bytecode, trace code."""
    return dso in ("[unknown]", None) or dso.startswith(("//anon", "/tmp/perf-"))


def lua_sequence(sample, res, t):
    """Root-first names of the Lua functions (and C_NAMES) in the chain;
    None if a frame in guest memory resolves to nothing."""
    seq = []
    prev_trace = None
    trace_addr = None  # address of the frame just read, if trace code
    for i, (addr, sym, _, dso) in enumerate(sample.frames):
        if guest(dso):
            ld = res.load(addr, t)
            if ld is None:
                return None
            if ld.name.startswith("TRACE_"):
                if trace_addr is not None and (i == 1 or addr == trace_addr):
                    continue  # the record slot's call site (vm_patch 0007)
                trace_addr = addr
                owner = short(ld.name.split("::", 2)[2])
                seq.append(owner)
                prev_trace = owner
                continue
            trace_addr = None
            name = short(ld.name)
            if prev_trace == name and seq and seq[-1] == name:
                prev_trace = None
                continue  # the trace's entry frame: same function
            seq.append(name)
        elif sym in C_NAMES:
            seq.append(sym)
        prev_trace = trace_addr = None
    return list(reversed(seq))


def selected(sample, res, t, target, owners):
    """'exact' if the sample runs TARGET outside traces, 'trace' if it runs
    the code of a trace one of OWNERS started in (or a helper of a trace
    exit), None otherwise (see the module comment)."""
    if not sample.frames:
        return None  # perf dropped the chain (validity.py judges those)
    addr, sym, _, dso = sample.frames[0]
    if target in C_NAMES:
        return "exact" if sym == target else None
    if target == VM_HELPER:
        vmcode = sym and sym.startswith(("lj_BC_", "lj_vm_", "lj_ff_", "lj_fff_",
                                         "lj_cont_", "lj_vmeta_"))
        # only while the program runs (luajit calls it with lua_pcall), not
        # in luajit's own set-up, script loading and tear-down
        inside = any(f[1] == "lua_pcall" for f in sample.frames)
        if not (dso == T.binpath("luajit") and sym and not vmcode
                and sym != "main" and inside):
            return None
        # a helper run by a trace exit (GC step): the frames the trace
        # inlined come back only when the exit is done
        exiting = any(f[1] == "lj_vm_exit_handler" for f in sample.frames)
        return "trace" if exiting else "exact"
    if sym and (sym.startswith("lj_BC_") or sym == "lj_vm_mod"):
        pc = ljframes.interp_pc(sample.regs or "")
        ld = res.load(pc, t) if pc else None
        if ld is not None and not ld.name.startswith("TRACE_") \
           and short(ld.name) == target:
            return "exact"
        return None
    if guest(dso):
        ld = res.load(addr, t)
        if ld is not None and ld.name.startswith("TRACE_") \
           and short(ld.name.split("::", 2)[2]) in owners:
            return "trace"
    return None


def recording_on(events, t):
    """Was frame recording on at T, by the program's ON/OFF reports?"""
    on = False
    for when, state in events:
        if when > t:
            break
        on = state
    return on


def surely_off(events, t, margin=200000):
    """Recording off at T and not switched on within MARGIN ns after it (the
    program reports ON only after the switch)."""
    last = None
    for when, state in events:
        if when > t:
            return last is False and when > t + margin
        last = state
    return last is False


def trace_ok(seq, expected):
    """The records are an expected sequence's whole chain below the trace
    and the trace's owner (the last name) comes next: a trace's own frames
    (its inlined calls, which this test does not resolve) may follow it,
    none may be missing below it (vm_patch 0007: a trace entered from
    another trace still has every caller's record)."""
    recs, owner = seq[:-1], seq[-1]
    return any(e[:len(recs)] == recs and len(e) > len(recs) and e[len(recs)] == owner
               for e in expected)


def all_chains(sess, data, samples, mode, exe):
    """Every chain of the run of EXE is valid (validity.judge)."""
    n, good, nofp, cut, bad = validity.judge(sess, data, samples, exe)
    for why, s in bad[:3]:
        print("  bad entry %s in: %s" % (why, validity.chain_text(s)))
    return T.report(n - nofp >= MIN_SAMPLES and not bad,
                    "%s: %d of %d samples have valid chains (%d deeper than the "
                    "kernel's %d-entry limit, %d through libraries without frame "
                    "pointers not judged; need %d)" % (mode, good + cut, n - nofp, cut,
                                                       validity.MAX_STACK, nofp,
                                                       MIN_SAMPLES))


def test():
    case, mode = sys.argv[1], sys.argv[2]
    target, expected, r_joff, r_jit = CASES[case]
    owners = {name for e in expected for name in e}
    if (r_joff if mode == "joff" else r_jit) is None:
        T.fail("case %s has no %s mode" % (case, mode))
    prog, binary = RUN_BY.get(case, (case, None))
    exe = os.path.join(T.build_dir(), binary) if binary else T.binpath("luajit")
    if not os.path.exists(exe):
        T.fail("%s not built" % exe)
    cmd = [exe] + (["-joff"] if mode == "joff" else []) + \
        [os.path.join(HERE, prog + ".lua"), str(r_joff if mode == "joff" else r_jit)]
    fpdir = os.path.join(T.build_dir(), "tests", "fpchain")
    env = {"LUAJIT_PERF": "1", "LUA_CPATH": os.path.join(fpdir, "?.so"),
           "LJPERF_FFILIB": os.path.join(fpdir, "libffilib.so")}
    if case in SWITCHING:
        env["LUAJIT_PERF"] = "map,jitdump"  # the program switches frames
    with T.PerfSession() as sess:
        data, out = sess.record(cmd, env=env, freq=2000, regs=vmregs.PC_USER_REGS)
        samples = sess.samples(data, "comm,pid,tid,time,ip,sym,dso,uregs",
                               extra=["--ns"])
        res = Resolver(sess.dump(samples[0].pid))
        # Recording switched by the program: judge samples taken while on.
        events = [(int(w[1]), w[0] == "ON") for w in
                  (l.split() for l in out.splitlines()) if w and w[0] in ("ON", "OFF")]
        if case in SWITCHING and len(events) < 10:
            T.fail("the program reported no recording switches")
        counts = {"exact": [0, 0], "trace": [0, 0]}
        seen = [0] * len(expected)  # exact samples per expected sequence
        bad = {}
        off = [0, 0]  # toggles: samples while off without Lua frames, all
        for s in samples:
            t = T.time_ns(s)
            if events and not recording_on(events, t):
                # Switched off: rbp is the VM entry's record again (no Lua
                # frame, a trace's own aside), never a record left over.
                kind = selected(s, res, t, target, owners) if surely_off(events, t) else None
                if kind is not None:
                    seq = lua_sequence(s, res, t)
                    off[0] += seq is not None and len(seq) <= (kind == "trace")
                    off[1] += 1
                    if seq and len(seq) > (kind == "trace"):
                        key = "off: %s" % " -> ".join(seq)
                        bad[key] = bad.get(key, 0) + 1
                continue
            kind = selected(s, res, t, target, owners)
            if kind is None:
                continue
            seq = lua_sequence(s, res, t)
            ok = seq is not None and (seq in expected if kind == "exact"
                                      else bool(seq) and trace_ok(seq, expected))
            counts[kind][0] += ok
            counts[kind][1] += 1
            if ok and kind == "exact":
                seen[expected.index(seq)] += 1
            if not ok:
                key = "%s: %s" % (kind, " -> ".join(seq) if seq else "unresolved frame")
                bad[key] = bad.get(key, 0) + 1
        if case in ALL_CHAINS:
            ok_all = all_chains(sess, data, samples, mode, exe)
        for k, n in sorted(bad.items(), key=lambda kv: -kv[1])[:5]:
            print("  %d x %s" % (n, k))
        want = " | ".join(" -> ".join(e) for e in expected)
        total = counts["exact"][1] + counts["trace"][1]
        ok = T.report(total >= MIN_SAMPLES, "%d samples in %s (need %d)"
                      % (total, target, MIN_SAMPLES))
        if mode == "joff":
            ok &= T.report(counts["trace"][1] == 0, "no trace samples with -joff")
        if case in ALL_CHAINS:
            ok &= ok_all
        if case in EACH_SEQ and mode == "joff":
            for e, n in zip(expected, seen):
                ok &= T.report(n >= MIN_EACH, "%d exact samples show %s (need %d)"
                               % (n, " -> ".join(e), MIN_EACH))
        if case in SWITCHING:
            ok &= T.report(off[1] >= MIN_SAMPLES and off[0] / max(off[1], 1) >= NEED,
                           "switched off: %d of %d samples in %s show no Lua frame "
                           "(need %d samples, %.1f%%)" % (off[0], off[1], target,
                                                          MIN_SAMPLES, 100 * NEED))
        for kind in ("exact", "trace"):
            good, picked = counts[kind]
            if picked:
                ok &= T.report(good / picked >= NEED,
                               "%s (%s): %d of %d %s samples in %s fit %s (%.2f%%)"
                               % (case, mode, good, picked, kind, target, want,
                                  100 * good / picked))
        return ok


if __name__ == "__main__":
    T.main(test)
