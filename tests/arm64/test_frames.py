"""arm64.frames: the x29 chain sampler (tests/arm64/run --patched) on the
VM with the ljperf series (0008: Lua frame records in a window of the VM
entry's C frame, cap 32) under qemu-aarch64, recording on from the start
(LUAJIT_PERF=frames). Every Lua workload's chains must reach main
(>= 99.5%), carry their Lua frames in call order up to the cap (31
recursion frames and the innermost record past it), keep C <-> Lua
sandwiches, coroutines and FFI callbacks in order, and count frames right
after errors caught by pcall. Then recording is switched on and off over
and over (switch_torture: in a deep recursion, coroutines, errors through
pcall, from trace code through the FFI; its results checked by itself):
every chain valid and reaching main. Switched off, the workloads' chains
carry no Lua frame and reach main. Switched by jit.perf.start/stop("frames")
from Lua and luaJIT_perf_start/stop from C (0009, status checked by the
host and demo.lua): the recursion's Lua frames while on, none while off.
The unpatched VM shows no Lua frame at all (arm64.baseline). Usage: test_frames.py TARBALL|DIR [SAMPLES_PER_WORKLOAD]
"""

import os
import re
import sys

from tests.arm64.sampler import args, sample
from tests.lib.ljptest import check, main

HERE = os.path.dirname(os.path.abspath(__file__))
CAP = 32  # FPWIN_K in vm_patch/src/lj_fpwin.h
LUA_WORK = ("lua_recursion_interp", "lua_recursion_jit", "coroutines", "ffi_callback",
            "hot_loop_trace", "c_lua_sandwich", "lib_callbacks", "deep_recursion",
            "lua_errors")
OFF_WORK = ("off_recursion_interp", "off_coroutines", "off_sandwich", "off_lua_errors")
# Switched through the perf hooks (0009): jit.perf from Lua, luaJIT_perf_* from C.
PERF_ON = ("perf_lua_on", "perf_capi_on")
PERF_OFF = ("perf_lua_off", "perf_capi_off")


def lines_of(demo):
    """Names the sampler gives demo.lua's functions ("chunk:firstline")."""
    src = open(demo).read().split("\n")
    rec0 = next(i for i, s in enumerate(src) if s.startswith("local RECURSION"))

    def at(pattern):
        return next(i + 1 for i, s in enumerate(src) if re.search(pattern, s))
    return {
        "down": "=recursion_interp:%d" % (at(r"local function down\(") - rec0 - 1),
        "spin": "=recursion_interp:%d" % (at(r"local function spin\(") - rec0 - 1),
        "sandwich": "demo.lua:%d" % at(r"^function sandwich\("),
        "middle": "demo.lua:%d" % at(r"local function middle\("),
        "inner": "demo.lua:%d" % at(r"local function inner\("),
        "ffi_cb": "demo.lua:%d" % at(r"^function ffi_cb\("),
        "cb": "demo.lua:%d" % at(r"^local cb = ffi.cast"),
        "coro": "demo.lua:%d" % at(r"^function coro\("),
        "co": "demo.lua:%d" % at(r"^local co = coroutine.wrap"),
        "lib_callbacks": "demo.lua:%d" % at(r"^function lib_callbacks\("),
        "lua_errors": "demo.lua:%d" % at(r"^function lua_errors\("),
        "thrower": "demo.lua:%d" % at(r"^local function thrower\("),
    }


def is_lua(frame):
    return ":" in frame and not frame.startswith("[")


def after_pcall(frames):
    """The chain above the host's lua_pcall (the workload's VM entry)."""
    return frames[frames.index("lua_pcall") + 1:] if "lua_pcall" in frames else []


def share(chains, pred):
    ok = sum(n for f, n in chains if pred(f))
    total = sum(n for _, n in chains)
    return ok, total


def test():
    a = args(__doc__)
    if a is None:
        return sys.argv[1:2] in (["-h"], ["--help"])
    tarball, want = a
    res, stacks = sample(tarball, want, patched=True, env={"LUAJIT_PERF": "frames"})
    name = lines_of(os.path.join(HERE, "demo.lua"))
    by = {}
    for f, n in stacks:
        by.setdefault(f[0][1:-1], []).append((f, n))
    for w in LUA_WORK:
        r = res.get(w)
        check(r is not None and r["samples"] >= want, "%s: %d samples" % (w, want))
        check(r["main"] >= 0.995 * r["samples"],
              "%s: chains reach main (%d/%d)" % (w, r["main"], r["samples"]))
        check(r["lua"] > 0, "%s: Lua frames in the chains (%d)" % (w, r["lua"]))

    def lua_seq(f):
        return [x for x in after_pcall(f) if is_lua(x)]

    # Recursions deeper than the cap: records 1..31 are the outermost frames
    # (down), record 32 the innermost pushed (spin when sampled in it); on
    # the way down and back up fewer frames are active.
    for w in ("lua_recursion_interp", "deep_recursion"):
        withlua = [(f, n) for f, n in by[w] if lua_seq(f)]

        def shape(f):
            s = lua_seq(f)
            return (len(s) <= CAP and s[:-1] == [name["down"]] * (len(s) - 1) and
                    s[-1] in (name["down"], name["spin"]))
        ok, total = share(withlua, shape)
        check(total >= 0.7 * want and ok >= 0.99 * total,
              "%s: Lua frames down..down then down or spin, at most %d (%d/%d)"
              % (w, CAP, ok, total))
        ok, _ = share(withlua, lambda f: len(lua_seq(f)) == CAP)
        check(ok >= 0.8 * total, "%s: %d Lua frames (the cap) in most chains (%d/%d)"
              % (w, CAP, ok, total))
        ok, _ = share(withlua, lambda f: lua_seq(f)[-1:] == [name["spin"]])
        check(ok >= 0.3 * total, "%s: the innermost record names spin, the leaf (%d/%d)"
              % (w, ok, total))
    # Errors thrown 21 frames deep and caught by pcall, 20 times a call: the
    # recursion after them has exactly its frames: lua_errors, down(20) to
    # down(1), and spin (down(0) tail-calls it), fewer on the way down; for
    # the few instructions before its tail call, down(0) is the 21st down.
    rec = [(f, n) for f, n in by["lua_errors"] if name["down"] in f]

    def errshape(f):
        s = lua_seq(f)
        spin = s[-1] == name["spin"]
        k = len(s) - 1 - spin
        return (s[0] == name["lua_errors"] and 1 <= k <= (20 if spin else 21) and
                s[1:1 + k] == [name["down"]] * k)
    ok, total = share(rec, errshape)
    check(total > 0 and ok >= 0.99 * total,
          "lua_errors: after caught errors, the recursion's chains are lua_errors,"
          " <= 21 x down or <= 20 x down and spin (%d/%d)" % (ok, total))
    full = [name["lua_errors"]] + [name["down"]] * 20 + [name["spin"]]
    ok, _ = share(rec, lambda f: lua_seq(f) == full)
    check(ok >= 0.7 * total, "lua_errors: most of them all 22 frames (%d/%d)" % (ok, total))
    thr = [(f, n) for f, n in by["lua_errors"] if name["thrower"] in f]
    ok, total = share(thr, lambda f: lua_seq(f)[0] == name["lua_errors"] and
                      set(lua_seq(f)[1:]) == {name["thrower"]} and len(lua_seq(f)) <= 22)
    check(total > 0 and ok >= 0.99 * total,
          "lua_errors: throwing chains are lua_errors then <= 21 x thrower (%d/%d)" % (ok, total))
    # C <-> Lua sandwich: Lua, C, Lua, C, Lua in call order.
    sw = [(f, n) for f, n in by["c_lua_sandwich"] if name["inner"] in f]
    order = [name["sandwich"], "lj_BC_FUNCC", "host_call", name["middle"], "lj_BC_FUNCC",
             "host_call", name["inner"]]
    ok, total = share(sw, lambda f: after_pcall(f)[:len(order)] == order)
    check(total >= 0.5 * want and ok >= 0.99 * total,
          "c_lua_sandwich: %s (%d/%d)" % (" < ".join(order), ok, total))
    # FFI callback: the calling Lua frame, the C host, then the callback.
    cb = [(f, n) for f, n in by["ffi_callback"] if name["cb"] in f]
    ok, total = share(cb, lambda f: after_pcall(f)[:1] == [name["ffi_cb"]] and
                      "host_each" in f and f.index("host_each") < f.index(name["cb"]))
    check(total >= 0.3 * want and ok >= 0.99 * total,
          "ffi_callback: ffi_cb < host_each < the callback (%d/%d)" % (ok, total))
    # Coroutine: the resumer's frame, coroutine.wrap's C, the coroutine's.
    co = [(f, n) for f, n in by["coroutines"] if name["co"] in f]
    ok, total = share(co, lambda f: after_pcall(f)[:3] ==
                      [name["coro"], "lj_ff_coroutine_wrap_aux", name["co"]])
    check(total >= 0.5 * want and ok >= 0.99 * total,
          "coroutines: coro < coroutine.wrap < the coroutine (%d/%d)" % (ok, total))
    # LuaJIT's C entering the VM (sort, gsub), errors through them.
    lib = [(f, n) for f, n in by["lib_callbacks"] if after_pcall(f)]
    ok, total = share(lib, lambda f: after_pcall(f)[0] == name["lib_callbacks"])
    check(total >= 0.7 * want and ok >= 0.99 * total,
          "lib_callbacks: its own frame first above lua_pcall (%d/%d)" % (ok, total))
    # Switched on and off over and over: chains stay valid (every one ends
    # at fp 0: rising, aligned, readable) and reach main.
    t = res.get("switch_torture")
    check(t is not None and t["samples"] >= want, "switch_torture: %d samples" % want)
    check(t["stop.end"] == t["samples"] and t["main"] >= 0.995 * t["samples"],
          "switch_torture: every chain ends at fp 0 (%d) and reaches main (%d) of %d"
          % (t["stop.end"], t["main"], t["samples"]))
    check(t["lua"] > 0, "switch_torture: Lua frames while on (%d)" % t["lua"])
    # Off: the stock handlers run, x29 stays at each entry record.
    for w in OFF_WORK:
        r = res.get(w)
        check(r is not None and r["samples"] >= want, "%s: %d samples" % (w, want))
        check(r["lua"] == 0 and r["main"] >= 0.995 * r["samples"],
              "%s: recording off, no Lua frame (%d) and chains reach main (%d/%d)"
              % (w, r["lua"], r["main"], r["samples"]))
    # Switched by jit.perf.start/stop("frames") and luaJIT_perf_start/stop
    # (the host and demo.lua check status): the recursion's records while
    # on, none while off.
    for w in PERF_ON + PERF_OFF:
        r = res.get(w)
        check(r is not None and r["samples"] >= want, "%s: %d samples" % (w, want))
        on = w in PERF_ON
        check((r["lua"] >= 10 * r["samples"] if on else r["lua"] == 0) and
              r["main"] >= 0.995 * r["samples"],
              "%s: %s (%d Lua frames in %d chains), chains reach main (%d)"
              % (w, "Lua frames" if on else "no Lua frame", r["lua"], r["samples"],
                 r["main"]))
    # Trace code runs with x29 at its start frame's record.
    tr = [(f, n) for f, n in by["lua_recursion_jit"] if f[-1] == "[trace]"]
    ok, total = share(tr, lambda f: len(lua_seq(f)) >= 1)
    check(total > 0 and ok >= 0.95 * total,
          "lua_recursion_jit: samples in trace code carry a Lua frame (%d/%d)" % (ok, total))


if __name__ == "__main__":
    main(test)
