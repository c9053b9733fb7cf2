#!/usr/bin/env python3
"""lj_merge --mem on real perf recordings of memtraps.c (ctest mem.merge_record).

usage: merge_record.py MEMTRAPS   (the built tests/mem/memtraps; needs perf
                             usable by the user, go, node + Chromium)

memtraps emits allocation traps exactly as the patched VM does (the
protocol: docs/memory.md): f_a, f_b, f_c allocate 64, 1000 and 20000
bytes, sampled Go's way from a fixed seed; f_c frees its block at once;
then a GC cycle is marked, during which half the f_b blocks are freed and
more f_a allocated, and after which a quarter more f_b are freed and more
f_a allocated. Frees ride on the next trap (7 at most; a trap of their own
when 7 wait, and at the end); then everything left is freed as lua_close
does (in use unchanged: its frees are set aside). It writes the truth: per function, Go's
scaling of what it sampled, in use as of the cycle and now. Recorded under
`perf record -e page-faults/period=1/u -e cpu-clock -g --call-graph fp
--user-regs=r13,<vmregs.USER_REGS>`, `perf script -F ...,uregs`, then:

  1. alloc.folded (lj_merge --mem): one stack per function,
     memtraps;__libc_start_call_main;main;f_X (the trap's own frame skipped),
     its bytes the truth's alloc_space (rounded);
  2. inuse.folded (--inuse): f_a and f_b's space live at the end of the
     cycle, no f_c (all freed); with --inuse-at now, what is not freed;
  3. the stderr summary: every trap used (as many as the program made),
     every free matched, the in-use view named, the duplicates the kernel reported (counted from
     the text: same thread, R8 and CX as the trap before) dropped, the
     program's own faults and the cpu-clock samples ignored (counted from
     the text, cpu-clock ticks that hit the trap instruction included);
  4. a trap sample copied right after itself (what the kernel does on a
     double-counted fault): the same profile, one more duplicate;
  5. --pprof: four sample types in order, inuse_space the default, period
     RATE (space/bytes), values per function = the truth (decoded here
     with a protobuf reader of its own), and go tool pprof
     -sample_index=inuse_space -top reads it;
  6. the alloc and in-use pages (render_html, unit bytes) and ljperf diff
     of two recordings' alloc.folded: in Chromium the header shows MiB of
     alloc space / in-use space.

perf (or go, node, Chromium) missing or failing makes the test FAIL."""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ljperf import vmregs
from tests.lib import ljptest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LJ_MERGE = os.environ.get("LJ_MERGE") or os.path.join(ROOT, "perf-script", "lj_merge.py")
FIELDS = "comm,pid,tid,time,period,event,ip,sym,symoff,dso,uregs"
N, RATE = 20000, 65536
HOST = "memtraps;__libc_start_call_main;main;"
MAGIC_CX = re.compile(r" CX:0x4c4a4d454d(\w\w)(\w\w) ")

failed = 0


def check(ok, msg):
    global failed
    print(("PASS: " if ok else "FAIL: ") + msg)
    if not ok:
        failed += 1
    return ok


def die(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)
    if r.returncode != 0:
        die("%s exited %d: %s" % (" ".join(cmd[:3]), r.returncode, r.stderr.strip()[-800:]))
    return r


def record(tmp, memtraps, n, tag):
    """Records memtraps N; returns (perf script text path, truth)."""
    perf = shutil.which("perf") or die("perf is not installed (Debian package linux-perf)")
    data = os.path.join(tmp, tag + ".data")
    truth = os.path.join(tmp, tag + ".truth")
    run([perf, "--buildid-dir", os.path.join(tmp, ".debug"), "record", "-o", data,
         "-e", "page-faults/period=1/u", "-e", "cpu-clock", "-g", "--call-graph", "fp",
         "--user-regs=r13," + vmregs.USER_REGS, memtraps, str(n), str(RATE), truth])
    txt = os.path.join(tmp, tag + ".txt")
    with open(txt, "w") as f:
        r = subprocess.run([perf, "--buildid-dir", os.path.join(tmp, ".debug"), "script",
                            "-i", data, "-F", FIELDS, "--show-task-events"],
                           stdout=f, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        die("perf script: " + r.stderr[-500:])
    t = {}
    with open(truth) as f:
        for ln in f:
            w = ln.split()
            t[w[0]] = [float(x) for x in w[1:]]
    return txt, t


def lj_merge(txt, outdir, *extra):
    """lj_merge --mem with --inuse, --pprof, --kinds into OUTDIR; returns
    (alloc {stack: bytes}, inuse {stack: bytes}, summary numbers)."""
    os.makedirs(outdir, exist_ok=True)
    p = lambda n: os.path.join(outdir, n)   # noqa: E731
    r = run([sys.executable, LJ_MERGE, "--mem", "-o", p("alloc.folded"), "--inuse",
             p("inuse.folded"), "--pprof", p("mem.pb.gz"), "--kinds", p("mem.kinds")]
            + list(extra) + [txt])
    m = re.search(r"memory: (\d+) trap samples used \((\d+) allocations, (\d+) frees only, "
                  r"(\d+) of lua_close\), (\d+) frees \((\d+) by lua_close\), "
                  r"(\d+) duplicates dropped, (\d+) of the program's own page "
                  r"faults ignored, (\d+) frees matched, (\d+) frees with no sampled "
                  r"allocation, (\d+) samples of other events ignored; in use: (.*)", r.stderr)
    if not m:
        die("no memory summary line on stderr: " + r.stderr[-500:])
    keys = ("used", "allocs", "flushes", "closes", "frees", "closed", "dups", "own", "matched",
            "unmatched", "other")
    st = dict(zip(keys, map(int, m.groups()[:-1])))
    st["view"] = m.group(m.lastindex)
    return ljptest.folded(p("alloc.folded")), ljptest.folded(p("inuse.folded")), st


def text_counts(txt):
    """Counted from the perf script text with string operations: samples
    per event, traps (page-fault samples with the magic), duplicates
    (same tid, R8 and CX as that thread's trap before), cpu-clock samples
    that show the magic."""
    c = {"faults": 0, "traps": 0, "dups": 0, "cpu": 0, "cpu_magic": 0}
    ev = tid = None
    last = {}
    hdr = re.compile(r"^\S+\s+(\d+)/(\d+)\s+[\d.]+:\s+\d+\s+(\S+):")
    for ln in open(txt):
        m = hdr.match(ln)
        if m:
            tid, ev = m.group(2), m.group(3)
            if ev.startswith("page-faults"):
                c["faults"] += 1
            elif ev.startswith("cpu-clock"):
                c["cpu"] += 1
            continue
        if ln.startswith(" ABI:") and MAGIC_CX.search(ln):
            if ev.startswith("cpu-clock"):
                c["cpu_magic"] += 1
                continue
            c["traps"] += 1
            mark = (re.search(r" R8:0x(\w+)", ln).group(1), MAGIC_CX.search(ln).group(0))
            if last.get(tid) == mark:
                c["dups"] += 1
            last[tid] = mark
    return c


# -- a protobuf reader (wire format), independent of ljperf/pprof.py ----------

def fields(buf):
    """Yields (field number, wire type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def varint(buf, i):
    v = s = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << s
        s += 7
        if b < 0x80:
            return v, i


def packed(v):
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def read_pprof(path):
    """(sample types [(type, unit)], default type, period type, period,
    {leaf function name: [values summed]})."""
    with open(path, "rb") as f:
        msg = gzip.decompress(f.read())
    strings, types, samples, locs, funcs = [], [], [], {}, {}
    period = default = 0
    ptype = None
    for f, _, v in fields(msg):
        if f == 6:
            strings.append(v.decode())
        elif f == 1:
            types.append(dict((g, x) for g, _, x in fields(v)))
        elif f == 2:
            s = {"loc": [], "val": []}
            for g, wt, x in fields(v):
                if g == 1:
                    s["loc"] += packed(x) if wt == 2 else [x]
                elif g == 2:
                    s["val"] += packed(x) if wt == 2 else [x]
            samples.append(s)
        elif f == 4:
            d = dict((g, x) for g, _, x in fields(v) if g != 4)
            lines = [dict(fields_kv(x)) for g, _, x in fields(v) if g == 4]
            locs[d[1]] = lines[-1].get(1)
        elif f == 5:
            d = dict((g, x) for g, _, x in fields(v))
            funcs[d[1]] = d.get(2, 0)
        elif f == 11:
            ptype = dict((g, x) for g, _, x in fields(v))
        elif f == 12:
            period = v
        elif f == 14:
            default = v
    name = lambda i: strings[i]   # noqa: E731
    by_leaf = {}
    for s in samples:
        fn = name(funcs[locs[s["loc"][0]]])
        acc = by_leaf.setdefault(fn, [0] * len(s["val"]))
        for i, x in enumerate(s["val"]):
            acc[i] += x
    return ([(name(t.get(1, 0)), name(t.get(2, 0))) for t in types], name(default),
            (name(ptype.get(1, 0)), name(ptype.get(2, 0))), period, by_leaf)


def fields_kv(buf):
    return [(g, x) for g, _, x in fields(buf)]


# -- pages -------------------------------------------------------------------

def mib(v):
    """The page's bytes format (B, KiB, MiB, GiB)."""
    units, i = ["B", "KiB", "MiB", "GiB"], 0
    while v >= 1024 and i < len(units) - 1:
        v /= 1024.0
        i += 1
    return (("%.0f" if v >= 100 else "%.1f") % v if i else "%d" % round(v)) + " " + units[i]


def browser(html, text):
    node = shutil.which("node") or die("node is not installed (Debian package nodejs)")
    r = subprocess.run([node, os.path.join(ROOT, "tests", "ljperf", "browser_check.js"), html,
                        html[:-5] + ".png", json.dumps({"text": text})],
                       capture_output=True, text=True, timeout=180)
    print(r.stdout, end="")
    check(r.returncode == 0, "%s works in Chromium: %s" % (os.path.basename(html), text))


def pages(tmp, d, d2, alloc, inuse):
    from ljperf import diff, folded, render
    os.environ.setdefault("LJPERF_SHARE", os.path.join(
        os.environ.get("LJPERF_BUILD", os.path.join(ROOT, "build")), "share", "ljperf"))
    kinds = folded.load_kinds(os.path.join(d, "mem.kinds"))
    for name, vals in (("alloc", alloc), ("inuse", inuse)):
        html = os.path.join(d, name + ".html")
        meta = {"title": "memtraps " + name, "event": "page-faults", "unit": render.event_unit(
            "page-faults", mem=True), "weightName": render.MEM_NAMES[name]}
        render.render_html(folded.load_folded(os.path.join(d, name + ".folded")), kinds,
                           meta, html)
        with open(html, encoding="utf-8") as f:
            page = f.read()
        data = json.loads(re.search(r'id="ljperf-data">(.*?)</script>', page, re.S).group(1))
        check(data["unit"] == "bytes" and data["total"] == sum(vals.values()),
              "%s.html: unit bytes, total %d" % (name, data["total"]))
        browser(html, {"#meta": ["total %s %s" % (mib(sum(vals.values())),
                                                  render.MEM_NAMES[name])],
                       "#legend": ["Self space by kind"]})

    class Opts:
        before, after = os.path.join(d2, "alloc.folded"), os.path.join(d, "alloc.folded")
        output, absolute, format, unit = os.path.join(tmp, "diff.html"), True, "html", None

    diff.run(Opts)
    with open(Opts.output, encoding="utf-8") as f:
        data = json.loads(re.search(r'id="ljperf-data">(.*?)</script>', f.read(),
                                    re.S).group(1))
    check(data["unit"] == "bytes" and data["weightName"] == "alloc space",
          "ljperf diff of two alloc.folded: unit bytes, alloc space")
    before = sum(ljptest.folded(Opts.before).values())
    browser(Opts.output, {"#meta": ["before %s alloc space" % mib(before),
                                    "after %s alloc space" % mib(sum(alloc.values()))]})


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        die("usage: merge_record.py MEMTRAPS (the built tests/mem/memtraps)")
    memtraps = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="ljperf-mem-")
    try:
        txt, truth = record(tmp, memtraps, N, "run")
        tc = text_counts(txt)
        print("text: %(faults)d page-fault samples, %(traps)d traps (%(dups)d duplicates), "
              "%(cpu)d cpu-clock samples (%(cpu_magic)d at a trap)" % tc)
        d = os.path.join(tmp, "out")
        alloc, inuse, st = lj_merge(txt, d)
        print("lj_merge:", st)

        # 1, 2: bytes per function
        want_alloc = {HOST + f: round(truth[f][1]) for f in ("f_a", "f_b", "f_c")}
        want_inuse = {HOST + f: round(truth[f][3]) for f in ("f_a", "f_b")}
        for got, want, what in ((alloc, want_alloc, "alloc"), (inuse, want_inuse, "inuse")):
            check(sorted(got) == sorted(want), "%s.folded: stacks %s" % (what, sorted(got)))
            for s in want:
                check(abs(got.get(s, 0) - want[s]) <= 1, "%s %s: %d bytes, truth %d"
                      % (what, s.rpartition(";")[2], got.get(s, 0), want[s]))
        # 2b: in use now
        _, now, st_now = lj_merge(txt, os.path.join(tmp, "now"), "--inuse-at", "now")
        want_now = {HOST + f: round(truth[f][6]) for f in ("f_a", "f_b")}
        check(sorted(now) == sorted(want_now) and
              all(abs(now.get(s, 0) - want_now[s]) <= 1 for s in want_now),
              "--inuse-at now: %s, truth %s" % (now, want_now))
        check(st["view"] == "as of the last completed GC cycle" and
              st_now["view"] == "at the end (--inuse-at now)",
              "the in-use view said: %r, %r" % (st["view"], st_now["view"]))
        # 3: the summary
        n_alloc, n_free, n_flush, n_closed, n_close = (int(x) for x in truth["traps"])
        check(st["allocs"] == n_alloc and st["frees"] == n_free and st["flushes"] == n_flush
              and st["closed"] == n_closed and st["closes"] == n_close,
              "every trap used: %d allocations, %d frees, %d traps of frees only, %d "
              "frees in %d traps of the close" % (n_alloc, n_free, n_flush, n_closed, n_close))
        check(n_flush * 5 < n_free - n_closed,
              "frees ride on allocation traps: %d of their own for %d"
              % (n_flush, n_free - n_closed))
        check(st["matched"] == n_free and st["unmatched"] == 0, "every free matched")
        n_traps = n_alloc + n_flush + n_close
        check(st["dups"] == tc["dups"] and tc["traps"] - tc["dups"] == n_traps,
              "duplicates dropped: %d (the text has %d trap samples for %d traps)"
              % (st["dups"], tc["traps"], n_traps))
        check(st["own"] == tc["faults"] - tc["traps"],
              "the program's own faults ignored: %d" % st["own"])
        check(st["other"] == tc["cpu"], "cpu-clock samples ignored: %d (%d at a trap)"
              % (st["other"], tc["cpu_magic"]))

        # 4: a fault the kernel counted twice
        with open(txt) as f:
            text = f.read()
        chunks = text.split("\n")
        i = next(k for k, ln in enumerate(chunks) if "page-faults" in ln and
                 k + 1 < len(chunks) and "mem_alloc" in chunks[k + 1])
        j = next(k for k in range(i + 1, len(chunks)) if chunks[k].startswith(" ABI:"))
        dup = os.path.join(tmp, "dup.txt")
        with open(dup, "w") as f:
            f.write("\n".join(chunks[:j + 1] + chunks[i:j + 1] + chunks[j + 1:]))
        a2, i2, st2 = lj_merge(dup, os.path.join(tmp, "dup"))
        check(a2 == alloc and i2 == inuse and st2["dups"] == st["dups"] + 1
              and st2["used"] == st["used"],
              "a trap sample repeated: same profiles, %d duplicates" % st2["dups"])

        # 5: pprof
        types, default, ptype, period, by_leaf = read_pprof(os.path.join(d, "mem.pb.gz"))
        check(types == [("alloc_objects", "count"), ("alloc_space", "bytes"),
                        ("inuse_objects", "count"), ("inuse_space", "bytes")],
              "pprof sample types %s" % types)
        check(default == "inuse_space" and ptype == ("space", "bytes") and period == RATE,
              "pprof default %s, period %s %d" % (default, ptype, period))
        for fn in ("f_a", "f_b", "f_c"):
            want = [round(x) for x in truth[fn][:4]]
            got = by_leaf.get(fn)
            check(got is not None and all(abs(g - w) <= 1 for g, w in zip(got, want)),
                  "pprof %s: %s, truth %s" % (fn, got, want))
        go = shutil.which("go") or die("go is not installed (Debian package golang-go)")
        r = run([go, "tool", "pprof", "-sample_index=inuse_space", "-top",
                 os.path.join(d, "mem.pb.gz")],
                env=dict(os.environ, PPROF_TMPDIR=tmp, HOME=tmp, GOCACHE=os.path.join(tmp, "go")))
        top = r.stdout
        print(top)
        fb = re.search(r"^\s*([\d.]+)([kMG]?B)\s+[\d.]+%.*\sf_b$", top, re.M)
        check("Type: inuse_space" in top and fb is not None and "f_c" not in top,
              "go tool pprof -sample_index=inuse_space -top: f_b, f_a, no f_c")
        if fb:
            scale = {"B": 1, "kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}[fb.group(2)]
            check(abs(float(fb.group(1)) * scale - truth["f_b"][3]) < 0.01 * truth["f_b"][3],
                  "go tool pprof: f_b in use %s%s" % fb.groups())

        # 6: pages and diff
        txt2, _ = record(tmp, memtraps, N // 2, "half")
        d2 = os.path.join(tmp, "half")
        lj_merge(txt2, d2)
        pages(tmp, d, d2, alloc, inuse)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s: %d failed" % ("FAIL" if failed else "PASS", failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
