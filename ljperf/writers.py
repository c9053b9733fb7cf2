"""lj_merge's output formats. A writer gets every distinct stack once:

    w.stack(frames, samples, weight, comm, pid, tid)
        FRAMES   root first, each (name, kind, line, where): NAME as folded
                 output prints it, KIND "root", one of frames.KINDS,
                 or None ([no call chain]); LINE a Lua frame's current line
                 (int, "?" unknown) when --lines or a writer's LINES asked
                 for it, else None; WHERE (dso, address) of native code,
                 else None. Stacks that differ only in LINEs come apart
                 (same names: a writer of names sums them)
        SAMPLES  how many samples had this stack; WEIGHT their summed period
                 (SAMPLES when perf printed no period)
        COMM, PID, TID  the samples' labels (None when perf did not print them)
    w.finish(out)   writes everything to the text file OUT (a binary file
                    for a writer whose class sets BINARY)

Adding a format: a class with these two methods and LINES (True: it wants
every Lua frame's LINE even without --lines; lj_merge then also reads the PC
register), and its name in WRITERS.
"""

import json

from ljperf import pprof


class Folded:
    """`root;...;leaf WEIGHT` lines, sorted (flamegraph.pl input)."""
    LINES = False              # in the names with --lines only: they would
                               # split a flame graph's frames

    def __init__(self, meta):
        self.folded = {}

    def stack(self, frames, samples, weight, comm, pid, tid):
        s = ";".join([f[0] for f in frames])
        self.folded[s] = self.folded.get(s, 0) + weight

    def finish(self, out):
        w = out.write
        for s in sorted(self.folded):
            w("%s %d\n" % (s, round(self.folded[s])))   # memory: scaled bytes


class Speedscope(Folded):
    """speedscope's JSON: one sampled profile per root frame."""

    def __init__(self, meta):
        super().__init__(meta)
        self.event = meta.get("event")
        self.name = meta.get("name", "perf script")
        self.unit = meta.get("unit")           # "bytes" (memory), else from the event

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
            pr[1].append(round(self.folded[s]))
        ev = self.event
        unit = self.unit or ("nanoseconds" if ev and ev.split(":")[0] in
                             ("cpu-clock", "task-clock") else "none")
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
    LINES = False

    def __init__(self, meta):
        self.kinds = {}

    def stack(self, frames, samples, weight, comm, pid, tid):
        for name, kind, _, _ in frames:
            if kind is not None:
                self.kinds.setdefault(name, set()).add(kind)

    def finish(self, out):
        w = out.write
        for name in sorted(self.kinds):
            for k in sorted(self.kinds[name]):
                w("%s\t%s\n" % (k, name))


class Pprof:
    """pprof's profile.proto, gzipped (pprof.py): Lua frames with their
    chunk, definition line and current line (always, `go tool pprof
    -lines`: 0 where unknown); native frames with their DSO and address;
    pid, tid and comm as labels."""
    BINARY = True
    LINES = True
    CLOCKS = ("cpu-clock", "task-clock")

    def __init__(self, meta):
        self.event = meta.get("event") or ""
        self.clock = self.event.split(":")[0] in self.CLOCKS
        self.span = meta.get("span")          # (first, last) sample time, s
        self.stacks = []                      # (frames, samples, ns, labels)
        self.frames = {}                      # printed frame -> pprof.Frame
        self.samples = self.weight = 0

    def _frame(self, f):
        pf = self.frames.get(f)
        if pf is None:
            name, kind, line, where = f
            if kind in ("lua", "trace"):
                pf = pprof.parse_frame(name)
                pf = pf._replace(kind=kind, line=line if isinstance(line, int) else 0)
            elif where is not None:
                pf = pprof.Frame(name, kind=kind, dso=where[0] or "", address=where[1] or 0)
            else:
                pf = pprof.Frame(name, kind=kind or "unknown")
            self.frames[f] = pf
        return pf

    def _sample(self, frames, comm, pid, tid):
        """(pprof Frames below the root, labels) of one stack."""
        labels = {k: v for k, v in (("comm", comm), ("pid", pid), ("tid", tid))
                  if v is not None}
        # Nothing below the root (only hidden VM frames): the root's name,
        # as the folded output's self weight of the root; pprof would leave
        # a sample without locations out of its totals.
        below = frames[1:] or [(frames[0][0], "root", None, None)]
        return [self._frame(f) for f in below], labels

    def stack(self, frames, samples, weight, comm, pid, tid):
        pframes, labels = self._sample(frames, comm, pid, tid)
        self.stacks.append((pframes, samples, weight if self.clock else None, labels))
        self.samples += samples
        self.weight += weight

    def finish(self, out):
        period = round(self.weight / self.samples) if self.clock and self.samples else 0
        first, last = self.span or (None, None)
        # perf's times are not wall-clock: the duration only, no start.
        prof = pprof.Profile(period_ns=period, event=self.event,
                             duration_ns=int((last - first) * 1e9) if first is not None else 0)
        for frames, n, ns, labels in self.stacks:
            prof.add(frames, n, ns, labels)
        prof.write(out)


class MemPprof(Pprof):
    """The memory profile (lj_merge --mem, ljperf/memory.py): WEIGHT is the
    vector (alloc_objects, alloc_space, inuse_objects, inuse_space),
    already scaled; the period is the sampling gap in bytes (META "rate"),
    inuse_space the type pprof shows first. A subclass weighing something
    else sets TYPES, DEFAULT and PERIOD_TYPE (offcpu.OffPprof)."""
    TYPES, DEFAULT, PERIOD_TYPE = pprof.MEM_TYPES, "inuse_space", ("space", "bytes")

    def __init__(self, meta):
        super().__init__(meta)
        self.rate = meta.get("rate") or 0

    def stack(self, frames, samples, weight, comm, pid, tid, kind=None):
        """KIND: the object kind (memory.KINDS), the label `kind`."""
        pframes, labels = self._sample(frames, comm, pid, tid)
        if kind is not None:
            labels["kind"] = kind
        self.stacks.append((pframes, samples, weight, labels))

    def finish(self, out):
        first, last = self.span or (None, None)
        prof = pprof.Profile(event=self.event,
                             duration_ns=int((last - first) * 1e9) if first is not None else 0,
                             sample_types=self.TYPES, default_type=self.DEFAULT,
                             period_type=self.PERIOD_TYPE, period=self.rate)
        for frames, n, values, labels in self.stacks:
            prof.add(frames, n, labels=labels, values=values)
        prof.write(out)


WRITERS = {"folded": Folded, "speedscope": Speedscope, "kinds": Kinds, "pprof": Pprof}
