"""lj_merge's output formats. A writer gets every distinct stack once:

    w.stack(frames, samples, weight, comm, pid, tid)
        FRAMES   root first, each (name, kind, line): NAME as folded output
                 prints it, KIND "root", one of ljframes.KIND_NAMES, or None
                 ([no call chain]); LINE the Lua line (int, "?") or None
        SAMPLES  how many samples had this stack; WEIGHT their summed period
                 (SAMPLES when perf printed no period)
        COMM, PID, TID  the samples' labels (None when perf did not print them)
    w.finish(out)   writes everything to the text file OUT

Adding a format: a class with these two methods, and its name in WRITERS.
"""

import json


class Folded:
    """`root;...;leaf WEIGHT` lines, sorted (flamegraph.pl input)."""

    def __init__(self, meta):
        self.folded = {}

    def stack(self, frames, samples, weight, comm, pid, tid):
        s = ";".join([f[0] for f in frames])
        self.folded[s] = self.folded.get(s, 0) + weight

    def finish(self, out):
        w = out.write
        for s in sorted(self.folded):
            w("%s %d\n" % (s, self.folded[s]))


class Speedscope(Folded):
    """speedscope's JSON: one sampled profile per root frame."""

    def __init__(self, meta):
        super().__init__(meta)
        self.event = meta.get("event")
        self.name = meta.get("name", "perf script")

    def finish(self, out):
        frames, index, profiles = [], {}, {}
        for s in sorted(self.folded):
            parts = s.split(";")
            stack = []
            for p in parts[1:]:
                i = index.get(p)
                if i is None:
                    i = index[p] = len(frames)
                    frames.append({"name": p})
                stack.append(i)
            pr = profiles.setdefault(parts[0], ([], []))
            pr[0].append(stack)
            pr[1].append(self.folded[s])
        ev = self.event
        unit = "nanoseconds" if ev and ev.split(":")[0] in ("cpu-clock", "task-clock") \
            else "none"
        profs = [{"type": "sampled", "name": root, "unit": unit,
                  "startValue": 0, "endValue": sum(profiles[root][1]),
                  "samples": profiles[root][0], "weights": profiles[root][1]}
                 for root in sorted(profiles)]
        doc = {"$schema": "https://www.speedscope.app/file-format-schema.json",
               "shared": {"frames": frames},
               "profiles": profs,
               "name": self.name,
               "activeProfileIndex": 0,
               "exporter": "ljperf lj_merge"}
        json.dump(doc, out, separators=(",", ":"))
        out.write("\n")


class Kinds:
    """`KIND<TAB>NAME` per printed frame name, sorted by name (a name printed
    as frames of two kinds gets two lines); ljperf colours with it."""

    def __init__(self, meta):
        self.kinds = {}

    def stack(self, frames, samples, weight, comm, pid, tid):
        for name, kind, _ in frames:
            if kind is not None:
                self.kinds.setdefault(name, set()).add(kind)

    def finish(self, out):
        w = out.write
        for name in sorted(self.kinds):
            for k in sorted(self.kinds[name]):
                w("%s\t%s\n" % (k, name))


WRITERS = {"folded": Folded, "speedscope": Speedscope, "kinds": Kinds}
