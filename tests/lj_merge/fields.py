#!/usr/bin/env python3
"""lj_merge on every kind of perf script output of one real recording.

usage: fields.py [SECONDS]      (ctest lj_merge.fields; needs perf and a build)

Records capture/real/interp.lua once (build/bin/luajit -joff, LUAJIT_PERF=1,
under `perf record -k mono -g --call-graph fp --user-regs=r13`): its main
chunk calls mid, which calls leaf (most of the time), and bytes, which calls
string.byte. Then, for each
perf script field set below (the full one, each field left out, srcline,
task events, and the bare ones the issue tracker saw fail), runs lj_merge
--pid --jitdump DIR and checks, by hand-reasoned rules:

  1. exit 0, no "skipped", no internal error;
  2. rooted: every stack starts at `luajit-PID` (PID: of the one
     jit-PID.dump written) -- `[unknown]-PID` without comm. Without pid and
     tid the jitdump directory holds one dump: that process is assumed. A
     few samples before the exec may be perf's own (perf-exec);
  3. nested: of the weight of stacks that show a Lua function of the
     program, >= 95% shows chunk, chunk;mid, chunk;mid;leaf or chunk;bytes
     (with sym: main, the host, below the chunk), and >= 40% is in leaf;
  4. weights: with period, the total is the sum of the periods perf
     prints (-F period); without, the number of samples (-F time lines).

Any perf problem fails the test (tests/lib/ljptest.py)."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.lib import ljptest as T

os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
LJ_MERGE = os.environ.get("LJ_MERGE") or os.path.join(T.ROOT, "perf-script", "lj_merge.py")
PROG = os.path.join(HERE, "capture", "real", "interp.lua")

FULL = ["comm", "pid", "tid", "time", "period", "event", "ip", "sym", "symoff", "dso",
        "uregs"]
# (label, fields, extra perf script arguments)
SETS = [("full", FULL, [])]
SETS += [("no " + f, [x for x in FULL if x != f], [])
         for f in ("comm", "pid", "tid", "time", "period", "event", "symoff", "dso",
                   "uregs")]
SETS += [("no sym", [x for x in FULL if x not in ("sym", "symoff")], []),
         ("no pid,tid", [x for x in FULL if x not in ("pid", "tid")], []),
         ("srcline", FULL + ["srcline"], []),
         ("task events", FULL, ["--show-task-events"]),
         ("no comm,pid,tid,uregs", ["time", "period", "ip", "sym", "dso"], []),
         ("period only", ["period", "ip", "sym", "dso"], []),
         ("comm,ip,sym", ["comm", "ip", "sym"], []),
         ("ip,sym,dso", ["ip", "sym", "dso"], ["--show-task-events"]),
         ("ip,sym", ["ip", "sym"], [])]

LABEL = {name: re.compile(r"^%s(?:.*/)?interp\.lua:%d$" % (prefix, line))
         for name, prefix, line in (("chunk", "", 0), ("mid", "mid@", 8),
                                    ("leaf", "leaf@", 3), ("bytes", "bytes@", 13))}
NESTS = (["chunk"], ["chunk", "mid"], ["chunk", "mid", "leaf"], ["chunk", "bytes"])


def merge(path, jitdump):
    r = subprocess.run([sys.executable, LJ_MERGE, "--pid", "--jitdump", jitdump, path],
                       capture_output=True, text=True)
    folded = {}
    for ln in r.stdout.splitlines():
        s, _, n = ln.rpartition(" ")
        folded[s] = folded.get(s, 0) + int(n)
    return r.returncode, folded, r.stderr


def which(frame):
    return next((n for n, rx in LABEL.items() if rx.match(frame)), None)


def check(label, fields, folded, err, rc, pid, want_total):
    problems = []
    if rc != 0 or "skipped" in err or "internal error" in err or "Traceback" in err:
        problems.append("exit %d, stderr %r" % (rc, err[-400:]))
    total = sum(folded.values())
    if total != want_total:
        problems.append("total weight %d, perf printed %d" % (total, want_total))
    root = ("luajit" if "comm" in fields else "[unknown]") + "-%d" % pid
    bad_root = sum(w for s, w in folded.items()
                   if s.split(";", 1)[0] not in (root, "perf-exec-%d" % pid))
    if bad_root:
        problems.append("%d of %d not rooted at %s: %s" % (
            bad_root, total, root, sorted(set(s.split(";", 1)[0] for s in folded))[:5]))
    lua = nested = in_leaf = 0
    example = None
    for s, w in folded.items():
        fr = s.split(";")
        seq = [which(f) for f in fr]
        got = [x for x in seq if x]
        if not got:
            continue
        lua += w
        ok = got in NESTS
        if ok and "sym" in fields:
            ok = "main" in fr[:seq.index("chunk")]
        if ok:
            nested += w
            in_leaf += w if got[-1] == "leaf" else 0
        elif example is None:
            example = s[-300:]
    if lua == 0 or nested < 0.95 * lua:
        problems.append("nested %d of %d Lua weight (e.g. %s)" % (nested, lua, example))
    if in_leaf < 0.4 * lua:
        problems.append("only %d of %d Lua weight in leaf" % (in_leaf, lua))
    print("%s %-22s %4d stacks, weight %d, nested %.1f%%%s" % (
        "FAIL" if problems else "ok  ", label, len(folded), total,
        100.0 * nested / lua if lua else 0, "".join("\n     " + p for p in problems)))
    return not problems


def expected_total(sess, data, fields):
    """Sum of periods (with period) or number of samples, from perf script
    output of just that field (no callchain: one line per sample)."""
    if "period" in fields:
        text = sess.script_text(data, "period")
        return sum(int(x) for x in re.findall(r"^\s*(\d+)\s*$", text, re.M))
    text = sess.script_text(data, "time")
    return len(re.findall(r"^\s*\d+\.\d+:\s*$", text, re.M))


def test():
    secs = sys.argv[1] if len(sys.argv) > 1 else "1.5"
    ok = True
    with T.PerfSession() as sess:
        data, _ = sess.record([T.binpath("luajit"), "-joff", PROG, secs],
                              env={"LUAJIT_PERF": "1"}, regs="r13", freq=1000)
        dumps = [n for n in os.listdir(sess.dir) if re.match(r"^jit-\d+\.dump$", n)]
        if len(dumps) != 1:
            T.fail("want one jit-PID.dump, found %s (is LUAJIT_PERF on?)" % dumps)
        pid = int(dumps[0][4:-5])
        sess.pids.add(pid)
        totals = {}
        for label, fields, extra in SETS:
            text = sess.script_text(data, ",".join(fields), extra)
            path = sess.path("script.txt")
            with open(path, "w") as f:
                f.write(text)
            rc, folded, err = merge(path, sess.dir)
            key = "period" in fields
            if key not in totals:
                totals[key] = expected_total(sess, data, fields)
            ok &= check(label, fields, folded, err, rc, pid, totals[key])
    return ok


if __name__ == "__main__":
    T.main(test)
