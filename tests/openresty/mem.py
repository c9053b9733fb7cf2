#!/usr/bin/env python3
"""Memory profiles of nginx: `ljperf record --mem --mem-rate 16k --lines
--nginx MASTER` on build/bin/nginx started WITHOUT LUAJIT_PERF (the remote
switch turns allocation samples on), 2 workers serving
tests/openresty/leaky.lua on loopback: /leak (M.handle keeps a ~530-byte
string per request in a module-level list) and /churn (M.churn allocates
small tables and strings and keeps none), each under its own wrk (8
connections; `listen ... reuseport` spreads them over the workers).

The recording lasts --seconds (8), both loads to its end, and no worker is
made to collect: in use is what was live at the end of each worker's most
recent completed GC cycle (Go's convention, the default), so /churn's
garbage the GC has yet to reach at the end is not counted. This checks
that /churn's frees are matched through the remote switch and that the
workers' GC cycles are seen.

Checked:
before   every worker's control block is off (remote.py's is_off).
record   ljperf exits 0, its stderr says each worker switched recording on
         (and none "cannot sample its allocations"), and that in use is
         as of the last completed GC cycle; the output directory
         holds alloc.folded, inuse.folded, mem.kinds, mem.pb.gz (naming the
         four sample types), alloc.html and inuse.html.
leak     inuse.folded: of the bytes on stacks through M.handle or M.churn
         (leaky.lua's frames by definition line), M.handle's hold >= 90%;
         its frames are named M.handle@CHUNK:DEFLINE:CURLINE[_[j]]; >= 90%
         of its bytes are at the allocating statement's line (both lines
         found in leaky.lua, not hard-coded), the cache table's growth by
         the interpreter while a trace is recorded included (the VM gives
         that PC too).
churn    alloc.folded has M.churn's frame, with >= 10% of the two
         handlers' allocated bytes.
after    within --off-wait s of ljperf's end every worker's control block is
         off again (nremote 0, ack == seq; they must run Lua to switch,
         hence 1 s bursts of wrk); the same workers answer /leak and /churn.
nginx is stopped, its prefix and the workers' /tmp files removed. perf or
wrk missing, or nginx not starting, is a failure. Prints requests/s before,
during and after, the shares and the line seen.
"""

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import luaapp
from tests.lib import ljptest
import remote  # is_off, is_on, wrk_result, pid_files

APP = os.path.join(HERE, "leaky.lua")
RATE = "16k"
MIN_LEAK_SHARE = 0.90
MIN_LINE_SHARE = 0.90
MIN_CHURN_ALLOC = 0.10
OUTPUTS = ("alloc.folded", "inuse.folded", "mem.kinds", "mem.pb.gz", "alloc.html",
           "inuse.html")


class LeakyNginx(luaapp.LuaAppNginx):
    """serve.Nginx with leaky.lua's two locations instead of the example's."""
    LOCATIONS = """\
        location = /leak { content_by_lua_block { require("leaky").handle() } }
        location = /churn { content_by_lua_block { require("leaky").churn() } }
"""
    PROBE = "/churn"
    APPDIR = HERE


def app_lines():
    """(M.handle's definition line, the line of its allocating statement,
    M.churn's definition line) in leaky.lua."""
    handle = stmt = churn = None
    with open(APP) as f:
        for i, line in enumerate(f, 1):
            if line.startswith("function M.handle("):
                handle = i
            elif line.startswith("function M.churn("):
                churn = i
            elif "cache = {" in line:
                stmt = i
    if not (handle and stmt and churn and handle < stmt):
        ljptest.fail("leaky.lua: M.handle, its allocating statement, M.churn not found")
    return handle, stmt, churn


def frame_re(defline):
    """A Lua frame of leaky.lua's function defined at DEFLINE, with --lines:
    [NAME@]CHUNK:DEFLINE:CURLINE, `_[j]` after it when a trace ran it;
    group 1 the name, 2 the current line (`?`: unknown)."""
    return re.compile(r"^(?:([\w.:]+)@)?%s:%d:(\d+|\?)(?:_\[j\])?$"
                      % (re.escape(APP), defline))


def owner(stack, res):
    """(key, frame) of the innermost frame of STACK matching one of RES
    ({key: regex}), or (None, None)."""
    for fr in reversed(stack.split(";")):
        for k, rx in res.items():
            if rx.match(fr):
                return k, fr
    return None, None


def split(st, res):
    """({key: bytes}, {key: {frame: bytes}}) of the stacks of ST by owner."""
    tot = dict.fromkeys(res, 0)
    frames = {k: {} for k in res}
    for s, w in st.items():
        k, fr = owner(s, res)
        if k is not None:
            tot[k] += w
            frames[k][fr] = frames[k].get(fr, 0) + w
    return tot, frames


def wrk(url, seconds, conns=8):
    return subprocess.Popen(["wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds, url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def load(ngx, seconds, churn_seconds=None):
    """wrk on /leak (SECONDS) and on /churn (CHURN_SECONDS, default the
    same), at the same time."""
    return [wrk(ngx.url + "/leak", seconds),
            wrk(ngx.url + "/churn", churn_seconds or seconds)]


def load_result(procs, timeout):
    """Total requests/s of the wrk processes PROCS."""
    return sum(remote.wrk_result(p, timeout) for p in procs)


def stop_load(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def check_outputs(out):
    ok = True
    for f in OUTPUTS:
        ok = ljptest.report(os.path.isfile(os.path.join(out, f)), "wrote " + f) and ok
    if os.path.isfile(os.path.join(out, "mem.pb.gz")):
        with open(os.path.join(out, "mem.pb.gz"), "rb") as f:
            raw = gzip.decompress(f.read())
        types = [t for t in ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space")
                 if t.encode() in raw]
        ok = ljptest.report(len(types) == 4, "mem.pb.gz names %s" % ", ".join(types)) and ok
    return ok


def check_profiles(out):
    handle, stmt, churn = app_lines()
    res = {"handle": frame_re(handle), "churn": frame_re(churn)}
    inuse, inuse_frames = split(ljptest.folded(os.path.join(out, "inuse.folded")), res)
    alloc, _ = split(ljptest.folded(os.path.join(out, "alloc.folded")), res)
    print("in use: M.handle %d bytes, M.churn %d; allocated: M.handle %d, M.churn %d"
          % (inuse["handle"], inuse["churn"], alloc["handle"], alloc["churn"]))
    for k in res:
        for fr, w in sorted(inuse_frames[k].items(), key=lambda kv: -kv[1])[:4]:
            print("  in use under %s: %d bytes" % (fr, w))
    both = inuse["handle"] + inuse["churn"]
    ok = ljptest.report(
        inuse["handle"] > 0 and inuse["handle"] >= MIN_LEAK_SHARE * both,
        "M.handle holds %.1f%% of the two handlers' bytes in use (>= %d%%)"
        % (100.0 * inuse["handle"] / max(both, 1), 100 * MIN_LEAK_SHARE))
    lines = {}
    for fr, w in inuse_frames["handle"].items():
        cur = res["handle"].match(fr).group(2)
        lines[cur] = lines.get(cur, 0) + w
    named = sorted({res["handle"].match(fr).group(1) or "(no name)"
                    for fr in inuse_frames["handle"]})
    ok = ljptest.report(
        lines.get(str(stmt), 0) >= MIN_LINE_SHARE * inuse["handle"] > 0,
        "M.handle's bytes in use by line: %s: line %d, the allocating statement, holds "
        "%.1f%% (frame %s:%d:%d; named %s)"
        % (", ".join("%s %.1f%%" % (k, 100.0 * v / inuse["handle"])
                     for k, v in sorted(lines.items(), key=lambda kv: -kv[1])),
           stmt, 100.0 * lines.get(str(stmt), 0) / max(inuse["handle"], 1), APP, handle,
           stmt, ", ".join(named))) and ok
    ok = ljptest.report(named == ["M.handle"], "its frames are named M.handle") and ok
    both = alloc["handle"] + alloc["churn"]
    ok = ljptest.report(
        alloc["churn"] >= MIN_CHURN_ALLOC * both,
        "alloc.folded: M.churn allocated %.1f%% of the two handlers' bytes (>= %d%%)"
        % (100.0 * alloc["churn"] / max(both, 1), 100 * MIN_CHURN_ALLOC)) and ok
    return ok


def record(opts, ngx, workers, out):
    """ljperf record --mem under load; returns (ok, requests/s during)."""
    args = ["--mem", "--mem-rate", RATE, "--lines", "--nginx", str(ngx.master),
            "--duration", str(opts.seconds), "-F", "499", "-o", out]
    # Both loads run past the recording's end; nothing is made to collect.
    procs = load(ngx, opts.seconds + 5)
    try:
        t0 = time.monotonic()
        lj = subprocess.Popen([sys.executable, opts.ljperf, "record"] + args,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        try:
            _, err = lj.communicate(timeout=300)
        finally:
            if lj.poll() is None:
                lj.kill()
                lj.wait()
        t_end = time.monotonic()
        print("ljperf record %s -> %d (%.1f s)\n%s" % (" ".join(args), lj.returncode,
                                                       t_end - t0, err.strip()[-2000:]))
        rps = load_result(procs, opts.seconds + 60)
        off = {}
        while time.monotonic() < t_end + opts.off_wait and len(off) < len(workers):
            procs = load(ngx, 1)
            while any(p.poll() is None for p in procs):
                for w in workers:
                    if w not in off and remote.is_off(w):
                        off[w] = time.monotonic() - t_end
                time.sleep(0.01)
            stop_load(procs)
    finally:
        stop_load(procs)
    ok = ljptest.report(lj.returncode == 0, "ljperf record --mem --nginx exits 0")
    said = {int(m) for m in re.findall(r"pid (\d+): switched recording on", err)}
    ok = ljptest.report(set(workers) <= said,
                        "its stderr says the workers %s switched recording on (%s)"
                        % (workers, sorted(said))) and ok
    ok = ljptest.report("cannot sample its allocations" not in err,
                        "no worker refuses allocation samples") and ok
    ok = ljptest.report("live at the last completed GC cycle" in err,
                        "in use is as of the last completed GC cycle") and ok
    ok = ljptest.report(
        sorted(off) == sorted(workers),
        "after ljperf ends every worker is off again (nremote 0, ack == seq): %s"
        % ", ".join("%d after %.2f s" % (w, off[w]) for w in sorted(off))) and ok
    if lj.returncode == 0:
        ok = check_outputs(out) and ok
        ok = check_profiles(out) and ok
    return ok, rps


def run(opts):
    tmp = tempfile.mkdtemp(prefix="ljperf-or-mem-")
    ngx = luaapp.without_perf_env(LeakyNginx(opts.nginx, workers=2, perf_env=False))
    pids = []
    try:
        luaapp.start(ngx)
        master, workers = ngx.master, ngx.worker_pids()
        pids = [master] + workers
        ok = ljptest.report(len(workers) == 2, "nginx master %d, workers %s"
                            % (master, workers))
        ok = ljptest.report(all(remote.is_off(w) and not remote.is_on(w) for w in workers),
                            "started without LUAJIT_PERF: every worker off") and ok
        before = load_result(load(ngx, opts.before), opts.before + 60)
        out = os.path.join(tmp, "prof")
        good, during = record(opts, ngx, workers, out)
        ok = good and ok
        if not good and opts.keep:
            shutil.copytree(out, opts.keep, dirs_exist_ok=True)
        if ngx.proc.poll() is not None:
            ljptest.fail("nginx exited: " + ngx.errors())
        ok = ljptest.report(ngx.worker_pids() == workers,
                            "the same workers serve on (%s)" % ngx.worker_pids()) and ok
        answers = [ngx.get(p, key=None) for p in ("/leak", "/churn")]
        ok = ljptest.report(
            all(st == 200 for st, _, _ in answers) and answers[0][2].startswith(b"kept ")
            and answers[1][2] == b"churned 16\n",
            "they answer /leak and /churn (%s)"
            % ", ".join("%d %r" % (st, body[:20]) for st, _, body in answers)) and ok
        after = load_result(load(ngx, opts.before), opts.before + 60)
        print("RATE nginx: requests/s before %.0f, during %.0f, after %.0f"
              % (before, during, after))
        return ok
    finally:
        ngx.stop()
        ljptest.remove_tmp_files(pids)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", required=True)
    p.add_argument("--ljperf", required=True)
    p.add_argument("--seconds", type=int, default=8,
                   help="recording time (>= 4)")
    p.add_argument("--before", type=int, default=2, help="wrk time before and after")
    p.add_argument("--off-wait", type=float, default=10.0,
                   help="seconds the workers get to switch off after ljperf ends")
    p.add_argument("--keep", metavar="DIR", help="copy a failing recording to DIR")
    o = p.parse_args()
    if o.seconds < 4:
        p.error("--seconds must be >= 4")
    ljptest.need_perf_and_wrk()
    return run(o)


if __name__ == "__main__":
    ljptest.main(main)
