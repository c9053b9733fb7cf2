"""Heap snapshot tests (jit.perf.heapsnapshot, lj_heapsnap.c; ljperf heap):
check.py CASE, CASE one of

  known    known graphs (known.lua): edges, names and retained sizes against
           the GC's own count of what each case holds
  totals   node sizes against collectgarbage("count") (totals.lua)
  leak     a planted leak: ljperf heap diff names it and the upvalue (leak.lua)
  errors   a bad path, a file size limit (a full disk), the C API (host)
  packed   objects closer than the index's 32-byte granule (host --packed,
           packed.lua): every one found at its own address, sizes add up
  gcsteps  a snapshot at every GC step of two cycles: complete files, the
           program's own results as without snapshots (gcsteps.lua)
  memlab   memlab loads the files, and its retained sizes are ljperf's
  devtools Chrome DevTools' own loader (chrome-devtools-frontend's heap
           snapshot worker, devtools_load.mjs) loads them: its node counts,
           totals and retained sizes of the top 10 are ljperf's
  remote   ljperf heap -p of running programs (tests/remote/busy.lua: a busy
           trace and the interpreter, kicked; an allocating loop), and of one
           whose ljperf is killed: output as unattached, complete files only
"""

import glob
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

from ljperf.heapsnap import Snapshot
from tests.lib.ljptest import binpath, check, fail, heap_leftovers, ljperf_bin, main

HERE = os.path.dirname(os.path.abspath(__file__))


def luajit(script, *args, **kw):
    p = subprocess.run([binpath("luajit"), os.path.join(HERE, script)] + list(args),
                       capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)
    if p.returncode != 0:
        fail("%s exited %d: %s" % (script, p.returncode, p.stderr.strip()[-500:]))
    return p.stdout


def edges(s, i):
    return list(s.out_edges(i))


def edge(s, i, name, etype=None):
    """The target of node i's edge NAME (of type ETYPE), failing if none."""
    for t, nm, to in s.out_edges(i):
        if nm == name and (etype is None or t == etype):
            return to
    fail("%s (node %d) has no %s edge %r; it has %s" % (
        s.name(i), i, etype or "", name, [(t, nm) for t, nm, _ in s.out_edges(i)][:30]))


def root_of(s, name):
    return edge(s, edge(s, 0, 1), name)   # (GC roots) -> NAME


def measured(out):
    return {ln.split()[1]: int(ln.split()[2]) for ln in out.splitlines()
            if ln.startswith("bytes ")}


def test_known():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "known.heapsnapshot")
        out = luajit("known.lua", path)
        check("snapshot\t" in out and os.path.exists(path), "the finalizer wrote " + path)
        check(not os.path.exists(path + ".tmp"), "no temporary file left")
        with open(path) as f:
            raw = json.load(f)          # valid JSON, counts as the header says
        nf = len(raw["snapshot"]["meta"]["node_fields"])
        check(len(raw["nodes"]) == nf * raw["snapshot"]["node_count"] and
              len(raw["edges"]) == 3 * raw["snapshot"]["edge_count"],
              "node and edge arrays as long as the header says")
        s = Snapshot(path)
        bytes_of = measured(out)
        g = root_of(s, "globals")
        check(s.name(edge(s, 1, "main thread")) == "main thread", "root: main thread")
        reg = root_of(s, "registry")

        cyc = edge(s, g, "CYCLE", "property")
        other = edge(s, cyc, "partner", "property")
        check(edge(s, other, "partner", "property") == cyc, "CYCLE.partner.partner is CYCLE")
        check(s.retained_size(cyc) == bytes_of["CYCLE"],
              "CYCLE retains %d bytes, the GC counted %d for it"
              % (s.retained_size(cyc), bytes_of["CYCLE"]))
        check(s.dominators()[other] == cyc, "CYCLE dominates its partner")

        keyed = edge(s, g, "KEYED", "property")
        keys = [to for t, nm, to in s.out_edges(keyed) if nm == "[key]"]
        check(len(keys) == 50 and all(s.name(k).startswith("key-") for k in keys) and
              s.retained_size(keyed) == bytes_of["KEYED"],
              "KEYED keeps its 50 string keys: it retains %d bytes, the GC counted %d"
              % (s.retained_size(keyed), bytes_of["KEYED"]))

        weakv, strong = edge(s, g, "WEAKV"), edge(s, g, "STRONG")
        check(s.name(weakv) == "table (weak values)", "WEAKV is named " + s.name(weakv))
        check(edge(s, weakv, "held", "weak") == strong, "WEAKV.held is a weak edge to STRONG")
        mt = edge(s, weakv, "[metatable]")
        check(s.dominators()[strong] != weakv and
              s.retained_size(weakv) == s.size(weakv) + s.size(mt),
              "a weak value is not retained by its table (it retains itself and its "
              "metatable: %d bytes)" % s.retained_size(weakv))

        weakk, key = edge(s, g, "WEAKK"), edge(s, g, "KEYOBJ")
        check(s.name(weakk) == "table (weak keys)", "WEAKK is named " + s.name(weakk))
        check(edge(s, weakk, "[key]", "weak") == key, "WEAKK's key is a weak edge")
        val = edge(s, weakk, "[value of a table key]", "internal")
        check(s.dominators()[val] == weakk and s.dominators()[key] != weakk,
              "WEAKK retains its value (LuaJIT marks weak-keyed values) but not its key")
        check(s.name(edge(s, val, 1, "element")) == "value of KEYOBJ", "WEAKK[KEYOBJ][1]")

        co = edge(s, g, "SUSPENDED")
        check(s.name(co) == "coroutine", "SUSPENDED is a coroutine node")
        locs = [(nm, to) for t, nm, to in s.out_edges(co) if t == "context"]
        buf = [to for nm, to in locs if nm.startswith("local coro_buffer in ")]
        check(len(buf) == 1 and s.name(edge(s, buf[0], 1, "element")) == "in the coroutine",
              "the suspended coroutine's stack slot is named by its local: %s" % [n for n, _ in locs])

        wr = edge(s, g, "WRAPPED")
        check(s.name(wr) == "function coroutine.wrap_aux", "WRAPPED is " + s.name(wr))
        check(s.name(edge(s, wr, "[upvalue 1]", "context")) == "coroutine",
              "the C closure's upvalue is its coroutine")

        pt = edge(s, g, "POINT")
        check(s.name(pt) == "cdata<hs_point>" and s.lua_type(pt) == "cdata" and s.size(pt) == 24,
              "POINT: cdata<hs_point>, 16 + 8 bytes (got %s, %d)" % (s.name(pt), s.size(pt)))
        ptr = edge(s, g, "POINTER")
        check(s.name(ptr) == "cdata<hs_point *>", "POINTER is named by what it points at: "
              + s.name(ptr))
        fin = edge(s, g, "FINALIZED")
        holders = [i for i in range(s.n) for t, nm, to in s.out_edges(i)
                   if to == fin and t == "weak" and nm == "[key]"]
        check(len(holders) == 1 and any(s.lua_type(to) == "function"
                                        for _, nm, to in s.out_edges(holders[0])
                                        if nm == "[value of a cdata key]"),
              "the FFI finalizer table holds FINALIZED weakly and its finalizer strongly")

        shared = edge(s, g, "SHARED")
        tags = set(edge(s, edge(s, shared, k, "element"), "tag") for k in range(1, 21))
        check(len(tags) == 1 and s.name(tags.pop()) == "shared-string-value",
              "20 tables point at one string node")

        check(s.name(edge(s, g, "NAMED")) == "NamedClass", "a table named by its __name")
        check(s.name(edge(s, g, "GLOBAL_OBJ")) == "GlobalClass",
              "a table named by the global holding its metatable")

        mod = edge(s, edge(s, reg, "_LOADED", "property"), "hs_module", "property")
        get = edge(s, mod, "get")
        check(s.lua_type(get) == "function" and "get@" in s.name(get) and "known.lua:" in s.name(get),
              "the module function is named NAME@CHUNK:LINE: " + s.name(get))
        cache = edge(s, edge(s, get, "module_cache", "context"), "value")
        check(s.retained_size(cache) == bytes_of["module_cache"],
              "the upvalue's table retains %d bytes, the GC counted %d"
              % (s.retained_size(cache), bytes_of["module_cache"]))
        check("module_cache" in s.path(cache), "its path names the upvalue: %s" % s.path(cache))

        pending = edges(s, edge(s, 0, 4))
        check(any(s.lua_type(to) == "userdata" for _, _, to in pending),
              "the other proxy awaits its finalizer under (awaiting finalization)")


def test_totals():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.heapsnapshot")
        out = luajit("totals.lua", path)
        count = float(out.split()[1])
        s = Snapshot(path)
        total = s.total()
        byt = s.by_type()
        print("  GC count %d bytes, node sizes %d bytes (%+.3f%%); by type: %s"
              % (count, total, 100.0 * (total - count) / count,
                 ", ".join("%s %d" % (t, b) for t, (n, b) in sorted(byt.items()))))
        for t in ("string", "table", "function", "proto", "upvalue", "thread",
                  "userdata", "cdata", "trace"):
            check(byt.get(t, (0, 0))[0] > 0, "the snapshot has %s nodes" % t)
        check(abs(total - count) <= 0.02 * count,
              "node sizes within 2%% of collectgarbage('count'): %d vs %d" % (total, count))


def test_leak():
    with tempfile.TemporaryDirectory() as d:
        out = luajit("leak.lua", d)
        files = [os.path.join(d, n + ".heapsnapshot") for n in ("base", "target", "final")]
        leaked = int(out.split()[1])
        p = subprocess.run([ljperf_bin(), "heap", "diff"] + files, capture_output=True,
                           text=True, timeout=300)
        print(p.stderr)
        check(p.returncode == 0, "ljperf heap diff exits 0")
        lines = p.stderr.splitlines()
        req = [i for i, ln in enumerate(lines) if " x hs_leaky.Request (table)" in ln]
        check(len(req) == 1, "one group of hs_leaky.Request tables")
        check(" %d x hs_leaky.Request" % leaked in lines[req[0]],
              "the %d requests made between base and target, alive in final: %s" % (leaked, lines[req[0]].strip()))
        check("-> handle -> seen_requests -> value ->" in lines[req[0] + 1],
              "its path names the function and its upvalue: " + lines[req[0] + 1].strip())
        strs = [ln for ln in lines if " x (string) (string)" in ln]
        check(len(strs) == 1 and " %d x " % leaked in strs[0] and
              "%d objects" % (2 * leaked) in lines[0],
              "the leaked requests' bodies, and nothing else (no garbage, no "
              "VM internals): " + lines[0])
        p = subprocess.run([ljperf_bin(), "heap", files[1]], capture_output=True, text=True,
                           timeout=300)
        check(p.returncode == 0 and "seen_requests" in p.stderr.split("top 10 retainers")[1],
              "ljperf heap's top retainers include the leak's upvalue")


def test_errors():
    with tempfile.TemporaryDirectory() as d:
        out = luajit("errors.lua", os.path.join(d, "no", "such", "dir.heapsnapshot"))
        check("nil\theapsnapshot: " in out and "No such file or directory" in out and
              out.strip().endswith("alive"), "a bad path: nil and one message, the program goes on")

        def small_files():           # a full disk, as write(2) sees it
            resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        path = os.path.join(d, "big.heapsnapshot")
        out = luajit("errors.lua", path, preexec_fn=small_files)
        check("File too large" in out and out.strip().endswith("alive"),
              "a write that fails: nil and one message, the program goes on: "
              + out.strip().splitlines()[0])
        check(os.listdir(d) == [], "no partial file, under the final name or the temporary one")
        host = os.path.join(os.environ.get("LJPERF_BUILD", ""), "tests", "heap", "heaphost")
        if not os.path.exists(host):
            fail("heaphost is not built (%s)" % host)
        p = subprocess.run([host, os.path.join(d, "c.heapsnapshot"), os.path.join(d, "x", "y")],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and p.stdout.split() == ["0", "-1", "alive"] and
              p.stderr.count("\n") == 1 and "heapsnapshot:" in p.stderr,
              "luaJIT_perf_heapsnapshot: 0, then -1 and one line on stderr (%r, %r)"
              % (p.stdout, p.stderr))
        Snapshot(os.path.join(d, "c.heapsnapshot"))


def test_packed():
    host = os.path.join(os.environ.get("LJPERF_BUILD", ""), "tests", "heap", "heaphost")
    if not os.path.exists(host):
        fail("heaphost is not built (%s)" % host)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.heapsnapshot")
        p = subprocess.run([host, "--packed", os.path.join(HERE, "packed.lua"), path],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fail("heaphost --packed packed.lua exited %d: %s" % (p.returncode, p.stderr.strip()))
        count = float(p.stdout.split()[1])
        s = Snapshot(path)
        g = root_of(s, "globals")
        cd = [to for t, _, to in s.out_edges(edge(s, g, "KEEP")) if t == "element"]
        st = [to for t, _, to in s.out_edges(edge(s, g, "STRS")) if t == "element"]
        check(len(set(cd)) == 5000 and all(s.lua_type(i) == "cdata" and s.size(i) == 17
                                           for i in cd),
              "KEEP's 5000 cdata, each its own 17-byte node")
        check([s.name(i) for i in st] == ["s%d" % i for i in range(1, 5001)],
              "STRS's 5000 strings, each read at its own address")
        ids = sorted(s.node_id(i) for i in range(s.n))
        shared = sum(1 for a, b in zip(ids, ids[1:]) if a >> 2 == b >> 2)
        check(shared > 1000 and len(set(ids)) == len(ids),
              "%d pairs of objects start in one 32-byte granule; ids are unique" % shared)
        total = s.total()
        check(abs(total - count) <= 0.02 * count,
              "node sizes within 2%% of collectgarbage('count'): %d vs %d" % (total, count))


def test_gcsteps():
    with tempfile.TemporaryDirectory() as d:
        plain = luajit("gcsteps.lua")
        snap = luajit("gcsteps.lua", d)
        check(plain.splitlines()[-1] == snap.splitlines()[-1],
              "the program's results are the same with snapshots: " + plain.splitlines()[-1])
        files = sorted(os.listdir(d))
        check(len(files) >= 20, "%d snapshots over three GC cycles" % len(files))
        for f in files:
            s = Snapshot(os.path.join(d, f))
            live = edge(s, root_of(s, "globals"), "LIVE")
            if len(edges(s, live)) != 200:
                fail("%s: LIVE has %d edges, not 200" % (f, len(edges(s, live))))
        check(True, "every snapshot is complete and holds LIVE's 200 elements")


def node_modules(pkg, what):
    mods = os.environ.get("LJPERF_HEAP_NODE_MODULES")
    if not mods or not os.path.isdir(os.path.join(mods, pkg)):
        fail("%s is not installed (LJPERF_HEAP_NODE_MODULES=%s; the build's npm ci puts it "
             "there)" % (what, mods))
    return mods


def consumer_files(d):
    """The snapshots the consumers load: known, totals, and leak's three."""
    files = [os.path.join(d, "known.heapsnapshot"), os.path.join(d, "totals.heapsnapshot")]
    luajit("known.lua", files[0])
    luajit("totals.lua", files[1])
    luajit("leak.lua", d)
    return files + [os.path.join(d, n + ".heapsnapshot") for n in ("base", "target", "final")]


def consumer_load(who, script, files, mods):
    """Runs SCRIPT (FILE=ID,... per file: ljperf's top 10 retainers) under
    node; checks each file's node count, and retained sizes, against
    ljperf's. Returns the JSON lines it printed."""
    ours = {}
    for f in files:
        s = Snapshot(f)
        ours[f] = {s.node_id(i): s.retained_size(i) for i in s.top_retainers(10)}
    p = subprocess.run(["node", os.path.join(HERE, script)] +
                       ["%s=%s" % (f, ",".join(str(i) for i in ours[f])) for f in files],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, NODE_PATH=mods, NODE_MODULES=mods))
    if p.returncode != 0:
        fail("%s could not load them: %s" % (who, p.stderr.strip()[-800:]))
    got = [json.loads(ln) for ln in p.stdout.splitlines()]
    check(len(got) == len(files), "%s loads all %d files" % (who, len(files)))
    for g in got:
        f = g["file"]
        theirs = {int(k): v for k, v in g["retained"].items()}
        check(g["nodes"] == Snapshot(f).n, "%s loads %s: %d nodes" % (who, os.path.basename(f),
                                                                      g["nodes"]))
        check(theirs == ours[f], "%s's retained sizes of the top 10 are ljperf's (%s)"
              % (who, sorted(theirs.items())[:3]))
    return got


def test_memlab():
    mods = node_modules(os.path.join("@memlab", "heap-analysis"), "memlab")
    with tempfile.TemporaryDirectory() as d:
        consumer_load("memlab", "memlab_load.js", consumer_files(d), mods)


def test_devtools():
    mods = node_modules("chrome-devtools-frontend", "chrome-devtools-frontend")
    with tempfile.TemporaryDirectory() as d:
        for g in consumer_load("DevTools", "devtools_load.mjs", consumer_files(d), mods):
            total = Snapshot(g["file"]).total()
            check(g["total"] == total, "DevTools' total of %s is ljperf's: %d bytes"
                  % (os.path.basename(g["file"]), total))


BUSY = os.path.join(os.path.dirname(HERE), "remote", "busy.lua")


def busy(argv):
    """busy.lua started unattached, once it printed "ready"."""
    p = subprocess.Popen([binpath("luajit")] + argv[:-2] + [BUSY] + argv[-2:],
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ, LUAJIT_PERF_DIR=""))
    if p.stdout.readline().strip() != "ready":
        p.kill()
        fail("busy.lua %s did not start" % argv)
    return p


def test_remote():
    for argv in (["loop", "2"], ["-joff", "loop", "2"], ["sunk", "2"]):
        plain = subprocess.run([binpath("luajit")] + argv[:-2] + [BUSY] + argv[-2:],
                               capture_output=True, text=True, timeout=300).stdout
        with tempfile.TemporaryDirectory() as d:
            p = busy(argv)
            try:
                h = subprocess.run([ljperf_bin(), "heap", "-p", str(p.pid), "-o", d],
                                   capture_output=True, text=True, timeout=120)
            finally:
                rest = p.communicate(timeout=300)[0]
            check(h.returncode == 0 and os.listdir(d) == ["heap-%d.heapsnapshot" % p.pid],
                  "ljperf heap -p of busy.lua %s: one snapshot (%s)"
                  % (" ".join(argv), h.stderr.strip().splitlines()[:1]))
            s = Snapshot(os.path.join(d, os.listdir(d)[0]))
            fn = "function %s@" % argv[-2]
            check(any(s.name(i).startswith(fn) and "busy.lua:" in s.name(i) for i in range(s.n)),
                  "it is the program's heap: it has %s...busy.lua:LINE" % fn)
            check(p.returncode == 0 and "ready\n" + rest == plain,
                  "the program's output and exit as unattached")
            check(not glob.glob("/tmp/ljperf-heap-%d-*" % p.pid), "nothing left in /tmp")
    with tempfile.TemporaryDirectory() as d:   # ljperf killed while asking
        plain = subprocess.run([binpath("luajit"), BUSY, "sunk", "2"], capture_output=True,
                               text=True, timeout=300).stdout
        p = busy(["sunk", "2"])
        h = subprocess.Popen([ljperf_bin(), "heap", "-p", str(p.pid), "-o", d],
                             stderr=subprocess.DEVNULL)
        time.sleep(0.15)
        h.kill()
        h.wait()
        rest = p.communicate(timeout=300)[0]
        check(p.returncode == 0 and "ready\n" + rest == plain,
              "ljperf SIGKILLed: the program's output and exit as unattached")
        left, complete = heap_leftovers(d, [p.pid])
        check(complete == left,
              "no partial file: %d complete snapshot(s) left, each loads" % len(left))


if __name__ == "__main__":
    main({"known": test_known, "totals": test_totals, "leak": test_leak,
          "errors": test_errors, "packed": test_packed, "gcsteps": test_gcsteps,
          "memlab": test_memlab, "devtools": test_devtools,
          "remote": test_remote}[sys.argv[1]])
