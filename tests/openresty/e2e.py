#!/usr/bin/env python3
"""End to end: build/bin/nginx serving examples/openresty under wrk, both
workers recorded with `ljperf record -p W1,W2`; JIT on, then off.

Each run: nginx (2 workers; as root they run as nobody) with LUAJIT_PERF=1
and LUAJIT_PERF_DIR=a fresh directory, wrk -s load.lua on loopback for
--seconds + 3 s, ljperf record -p W1,W2 --duration --seconds after 1 s of
load. Checked:

files    every worker has its /tmp/perf-PID.map and jit-PID.dump, owned by
         us (root: the emitter opens them at fork, before nginx drops to
         nobody), mode 0644.
roots    perf script of the recording: among the workers' user samples whose
         leaf is not in a library Debian builds without frame pointers
         (glibc, ld.so, libpcre, vdso) nor in anonymous executable code that
         no perf map or jitdump describes (PCRE's JIT code), >= 99% reach
         main or ngx_worker_process_cycle.
Folded stacks (ljperf's profile.folded; frames outermost first). app.lua's
functions are recognised by their definition line (NAME@app.lua:LINE,
app.lua:LINE, _[j] for a trace). In every stack below a phase handler,
the app frames after ngx_http_lua_run_thread must start with the phase's
entry function and each must be called by the one before it (app.lua's
call graph, CALLEES), trace frames too: lj_merge names the functions a
trace inlined at the sampled address, so none may be missing. Every check
needs >= MIN_SAMPLES samples and >= 99% valid weight:
content  ngx_http_lua_content_by_chunk -> ngx_http_lua_run_thread -> api_content
         (or backend_item, the backend's handler) ...
access   ngx_http_lua_access_by_chunk -> ngx_http_lua_run_thread -> api_access
         -> check_key ...
log      ngx_http_lua_log_by_chunk (lua_pcall, no coroutine) -> api_log ...
timer    ngx_http_lua_timer_handler -> refresh_summary -> summarise
sleep    ngx_http_lua_sleep_handler (the coroutine resumed after ngx.sleep)
         -> api_content -> render -> rank_after_sleep, with rank_after_sleep
         seen
pcre     stacks with ngx_http_lua_ffi_exec_regex or pcre_*: an app frame
         (check_key, word_stats, fetch_backend, api_content) before it
cjson    stacks with a frame of lua-cjson (the build's cjson.so, frame
         pointers): an app frame that calls cjson before it
nested   content stacks whose last app frame is nest_inner (GET /nested/N:
         loops three deep, traces entered from traces): >= 95% have the
         whole chain nested -> nest_outer -> nest_mid -> nest_inner
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from examples.openresty import serve
from tests.lib import ljptest
from ljperf.folded import load_folded  # the one folded reader

APP = os.path.join(ROOT, "examples", "openresty", "app.lua")
MIN_SHARE = 0.99
MIN_SAMPLES = 5
NOFP = ljptest.NOFP_LIBS + ("/libpcre.so", "/libcrypto.so", "/libssl.so", "/libz.so",
                            "/libcrypt.so")
CALLEES = {
    "api_access": {"check_key"}, "check_key": {"key_checksum"},
    # render ends with `return encode_ordered(...)`, a tail call: its frame
    # is replaced, encode_ordered's caller is then api_content
    "api_content": {"load_item", "render", "encode_ordered"},
    "load_item": {"fetch_backend"},
    "render": {"word_stats", "price_table", "rank_after_sleep", "encode_ordered"},
    "api_log": {"latency_bucket", "log_line"}, "refresh_summary": {"summarise"},
    "nested": {"nest_outer"}, "nest_outer": {"nest_mid"}, "nest_mid": {"nest_inner"},
}
NESTED = ["nested", "nest_outer", "nest_mid", "nest_inner"]
MIN_NESTED = 0.95       # of nest_inner's weight with that whole chain
# load_item ends with `return cjson.decode(body)`, a tail call: its frame is
# replaced, cjson's caller is then api_content
CJSON_CALLERS = {"encode_ordered", "load_item", "api_content", "refresh_summary",
                 "backend_item"}
REGEX_CALLERS = {"check_key", "word_stats", "fetch_backend", "api_content"}


def app_lines():
    """{definition line: function name} of app.lua."""
    out = {}
    with open(APP) as f:
        for i, line in enumerate(f, 1):
            m = re.match(r"(?:local )?function (?:M\.)?(\w+)\(", line)
            if m:
                out[i] = m.group(1)
    return out


LINES = app_lines()
FRAME_RE = re.compile(r"(?:.*@)?" + re.escape(APP) + r":(\d+)(_\[j\])?$")


def app_frame(name):
    """(function, is_trace) of an app.lua frame, else None."""
    m = FRAME_RE.match(name)
    if not m or int(m.group(1)) not in LINES:
        return None
    return LINES[int(m.group(1))], bool(m.group(2))


def chain_ok(frames, entries):
    """App frames of FRAMES (after ngx_http_lua_run_thread): first in
    ENTRIES, each called by the previous, in traces too (lj_merge names
    what a trace inlined at the sampled address, frame by frame)."""
    app = [a[0] for a in (app_frame(f) for f in frames) if a]
    if not app:
        return None
    if app[0] not in entries:
        return False
    return all(c in CALLEES.get(p, ()) for p, c in zip(app, app[1:]))


class Check:
    def __init__(self, name, min_share=MIN_SHARE):
        self.name, self.good, self.bad, self.n, self.example = name, 0, 0, 0, None
        self.extra = True
        self.min_share = min_share

    def add(self, ok, w, frames):
        self.n += 1
        if ok:
            self.good += w
        else:
            self.bad += w
            if self.example is None:
                self.example = ";".join(frames)[-900:]

    def verdict(self, unit):
        total = self.good + self.bad
        share = self.good / total if total else 0
        samples = total // unit if unit else 0
        # samples, not distinct stacks: openresty.remote's 6 s recordings
        # give PCRE 10-22 samples in 5-9 stacks, too close to the minimum
        ok = samples >= MIN_SAMPLES and share >= self.min_share and self.extra
        msg = "%s: %d stacks, %.2f%% valid (%d samples)" % (
            self.name, self.n, 100 * share, samples)
        if not ok and self.example:
            msg += "; first invalid: " + self.example
        return ljptest.report(ok, msg)


def check_folded(folded, unit):
    checks = {k: Check(k) for k in
              ("content", "access", "log", "timer", "sleep", "pcre", "cjson")}
    checks["nested"] = Check("nested", MIN_NESTED)
    rank_seen = 0
    for frames, w in folded:
        if "ngx_worker_process_cycle" not in frames:
            continue
        # Lua runs from ngx_http_lua_run_thread (a coroutine: content,
        # access, timers, resumed after a yield) or lua_pcall (log phase)
        rt = max((k for k, f in enumerate(frames) if f in (
            "ngx_http_lua_run_thread", "ngx_http_lua_log_by_chunk")), default=None)
        after = frames[rt + 1:] if rt is not None else []
        cat = entries = None
        # innermost handler first: a request resumed after ngx.sleep ends
        # (log phase) inside ngx_http_lua_sleep_handler
        if "ngx_http_lua_log_by_chunk" in frames:
            cat, entries = "log", {"api_log"}
        elif "ngx_http_lua_access_by_chunk" in frames:
            cat, entries = "access", {"api_access"}
        elif "ngx_http_lua_timer_handler" in frames:
            cat, entries = "timer", {"refresh_summary"}
        elif "ngx_http_lua_sleep_handler" in frames:
            cat, entries = "sleep", {"api_content"}
        elif "ngx_http_lua_content_by_chunk" in frames:
            cat, entries = "content", {"api_content", "backend_item", "stats", "nested"}
        if cat and rt is not None:
            ok = chain_ok(after, entries)
            app = [a[0] for a in (app_frame(f) for f in after) if a]
            if cat == "content" and app and app[-1] == NESTED[-1]:
                checks["nested"].add(app == NESTED, w, frames)
            if ok is not None:
                checks[cat].add(ok, w, frames)
                if cat == "sleep" and ok and any(
                        (app_frame(f) or ("",))[0] == "rank_after_sleep" for f in after):
                    rank_seen += w
        for key, pred, callers in (
                ("pcre", lambda f: f == "ngx_http_lua_ffi_exec_regex" or
                 f.startswith("pcre_") or "libpcre" in f, REGEX_CALLERS),
                ("cjson", lambda f: "cjson" in f.lower() or f.startswith("strbuf_") or
                 f.startswith("json_") or f.startswith("fpconv_"), CJSON_CALLERS)):
            i = next((k for k, f in enumerate(frames) if pred(f)), None)
            if i is None:
                continue
            app = [a[0] for a in (app_frame(f) for f in frames[:i]) if a]
            # the caller itself, in a trace too (its inlined frames are named)
            ok = bool(app) and app[-1] in callers
            checks[key].add(ok, w, frames)
    checks["sleep"].extra = rank_seen > 0
    return all([c.verdict(unit) for c in checks.values()])


def foreign_code(s):
    """The leaf is anonymous code neither the perf map nor the jitdump
    describes (perf: [unknown] in perf-PID.map, or in a mapping perf never
    saw made executable): PCRE's JIT code (ngx.re's "j" flag), frameless
    like libpcre, which calls it. LuaJIT's own code is all described."""
    leaf = s.frames[0]
    return leaf[1] == "[unknown]" and leaf[3] in ("[unknown]", "/tmp/perf-%d.map" % s.pid)


def check_roots(outdir, workers):
    data = os.path.join(outdir, "perf.jit.data")
    r = subprocess.run(["perf", "--buildid-dir", os.path.join(outdir, ".debug"), "script",
                        "-i", data, "-F", "comm,pid,tid,time,ip,sym,dso"], capture_output=True,
                       text=True, errors="replace")
    if r.returncode != 0:
        ljptest.fail("perf script: " + r.stderr[-300:])
    total = good = skipped = foreign = 0
    bad = None
    for s in ljptest.perfscript.iter_samples(r.stdout.split("\n")):
        if s.pid not in workers or not s.frames:
            continue
        leaf = s.frames[0]
        if leaf[0] >= 0x800000000000:
            continue
        if leaf[3] and any(x in leaf[3] for x in NOFP):
            skipped += 1
            continue
        if foreign_code(s):
            foreign += 1
            continue
        total += 1
        if any(f[1] in ("main", "ngx_worker_process_cycle") for f in s.frames):
            good += 1
        elif bad is None:
            bad = " <- ".join("%s(%s)" % (f[1], os.path.basename(f[3] or "?"))
                              for f in s.frames[:12])
    share = good / total if total else 0
    return ljptest.report(
        total >= 200 and share >= MIN_SHARE,
        "roots: %d of %d worker samples (%.2f%%) reach main/ngx_worker_process_cycle "
        "(not counted: %d with the leaf in a library without frame pointers, %d in "
        "undescribed anonymous code)%s"
        % (good, total, 100 * share, skipped, foreign, "" if share >= MIN_SHARE or not bad
           else "; first broken: " + bad))


def check_files(ngx, dumpdir):
    ok = True
    for w in ngx.worker_pids():
        for path in ("/tmp/perf-%d.map" % w, os.path.join(dumpdir, "jit-%d.dump" % w)):
            try:
                st = os.stat(path)
            except OSError:
                ok = ljptest.report(False, "worker %d: no %s" % (w, path))
                continue
            good = st.st_uid == os.geteuid() and (st.st_mode & 0o777) == 0o644
            ok = ljptest.report(good, "worker %d (uid %d): %s uid %d mode %o" % (
                w, proc_uid(w), path, st.st_uid, st.st_mode & 0o777)) and ok
    return ok


def proc_uid(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[2])
    except OSError:
        pass
    return -1


def run(opts, jit):
    print("== JIT %s" % jit)
    sys.stdout.flush()
    tmp = tempfile.mkdtemp(prefix="ljperf-or-e2e-")
    os.chmod(tmp, 0o755)
    dumps = os.path.join(tmp, "dumps")
    os.mkdir(dumps, 0o755)
    ngx = serve.Nginx(opts.nginx, workers=2, env={
        "LUAJIT_PERF": "1", "LUAJIT_PERF_DIR": dumps, "LJPERF_APP_JIT": jit})
    wrk = None
    pids = []
    try:
        ngx.start()
        workers = ngx.worker_pids()
        pids = [ngx.master] + workers
        ok = check_files(ngx, dumps)
        wrk = subprocess.Popen(["wrk", "-t1", "-c16", "-d%ds" % (opts.seconds + 3),
                                "-s", os.path.join(ROOT, "examples", "openresty", "load.lua"),
                                ngx.url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
        time.sleep(1)
        out = os.path.join(tmp, "prof")
        r = subprocess.run([sys.executable, opts.ljperf, "record", "-p", ",".join(map(str, workers)),
                            "--duration", str(opts.seconds), "-F", str(opts.freq),
                            "-o", out], capture_output=True, text=True)
        wout, _ = wrk.communicate(timeout=opts.seconds + 30)
        wrk = None
        m = re.search(r"(\d+) requests in", wout)
        if not m or int(m.group(1)) == 0:
            ljptest.fail("wrk made no requests: " + wout[-500:])
        print("wrk: %s requests" % m.group(1))
        if r.returncode != 0:
            ljptest.fail("ljperf record failed: " + r.stderr[-800:])
        if ngx.proc.poll() is not None:
            ljptest.fail("nginx exited during the run: " + ngx.errors())
        ok = check_roots(out, set(workers)) and ok
        folded = load_folded(os.path.join(out, "profile.folded"))
        unit = min((w for _, w in folded), default=1)
        ok = check_folded(folded, unit) and ok
        if not ok and opts.keep:
            keep = "%s-%s" % (opts.keep, jit)
            shutil.copytree(out, keep, dirs_exist_ok=True)
            print("recording kept in " + keep)
        return ok
    finally:
        if wrk is not None:
            wrk.kill()
            wrk.wait()
        ngx.stop()
        ljptest.remove_tmp_files(pids)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", required=True)
    p.add_argument("--ljperf", required=True)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--freq", type=int, default=1999)
    p.add_argument("--jit", choices=("on", "off", "both"), default="both")
    p.add_argument("--keep", metavar="DIR", help="keep a failing recording in DIR-JIT")
    o = p.parse_args()
    ljptest.need_perf_and_wrk()
    ok = True
    for jit in (("on", "off") if o.jit == "both" else (o.jit,)):
        ok = run(o, jit) and ok
    return ok


if __name__ == "__main__":
    ljptest.main(main)
