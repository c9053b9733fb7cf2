"""ljperf heap: what a heap snapshot (jit.perf.heapsnapshot) says about who
keeps the memory.

  ljperf heap FILE                     total, bytes by type, top 10 retainers
  ljperf heap diff BASE TARGET [FINAL] objects new in TARGET (still alive in
                                       FINAL), by name, with a retaining path

Everything is printed on stderr. The files open in Chrome DevTools' Memory
panel (Load) and in memlab (`memlab find-leaks --baseline BASE --target
TARGET --final FINAL`, `memlab analyze ... --snapshot FILE`).
"""

from ljperf.heapsnap import BadSnapshot, Snapshot, diff
from ljperf.messages import Fail, say

TOP = 10
PATH_STEPS = 12


def load(path):
    try:
        return Snapshot(path)
    except BadSnapshot as e:
        raise Fail(str(e))


def path_text(snap, i):
    steps = snap.path(i)
    if steps is None:
        return "(unreachable: garbage not yet collected)"
    if len(steps) > PATH_STEPS:
        steps = steps[:3] + ["..."] + steps[-(PATH_STEPS - 4):]
    return " -> ".join(steps)


def summary(path, out):
    s = load(path)
    total = s.total()
    say("heap %s: %d bytes in %d objects" % (path, total, s.n))
    for t, (count, size) in sorted(s.by_type().items(), key=lambda kv: -kv[1][1]):
        out.write("  %-16s %10d bytes %8d objects  %5.1f%%\n"
                  % (t, size, count, 100.0 * size / total if total else 0))
    out.write("top %d retainers (retained bytes, own bytes, name: shortest path from a root):\n"
              % TOP)
    for i in s.top_retainers(TOP):
        out.write("  %10d %8d  %s: %s\n" % (s.retained_size(i), s.size(i), s.name(i),
                                            path_text(s, i)))
    return 0


def leaks(paths, out):
    base, target = load(paths[0]), load(paths[1])
    final = load(paths[2]) if len(paths) > 2 else None
    groups = diff(base, target, final)
    what = "new in %s%s" % (paths[1], " and still alive in %s" % paths[2] if final else "")
    say("heap diff: %d objects, %d bytes %s"
        % (sum(g[2] for g in groups), sum(g[3] for g in groups), what))
    for name, t, count, size, i in groups[:50]:
        out.write("  %10d bytes %8d x %s (%s)\n      kept by: %s\n"
                  % (size, count, name, t, path_text(target, i)))
    if len(groups) > 50:
        out.write("  ... and %d more groups\n" % (len(groups) - 50))
    return 0


def run(opts, out):
    args = opts.args
    if args and args[0] == "diff":
        if len(args) not in (3, 4):
            raise Fail("heap diff: give BASE TARGET [FINAL]", code=2)
        return leaks(args[1:], out)
    if len(args) != 1:
        raise Fail("heap: give one FILE (or diff BASE TARGET [FINAL])", code=2)
    return summary(args[0], out)
