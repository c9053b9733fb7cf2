"""Off-CPU and wall-clock profiles (lj_merge --off-cpu, --wall): where the
threads of a program wait, with the same stacks as its CPU profile.

What perf records (stock perf, no BPF: perf 6.1's --off-cpu needs a BPF
skeleton Debian does not build):

  perf record -e context-switches/period=1/ --switch-events -g --call-graph fp ...

- every context switch of a recorded thread is a sample whose call chain is
  the thread's as it is switched out (kernel frames, then the user frames,
  the Lua frames the patched VM links included);
- --switch-events adds PERF_RECORD_SWITCH OUT (with `preempt` when the thread
  was still runnable) and IN records (perf script --show-switch-events).

Invariants:
- Records come in time order (perf script sorts them). A thread's
  context-switch sample precedes its SWITCH OUT; the stack of the latest
  one is the stack of that switch-out.
- A switch-out weighs the nanoseconds until the same thread's next SWITCH
  IN; one never switched in again weighs nothing (its wait has no end in
  the recording), and an IN without an OUT before it (a thread already
  waiting when perf attached) weighs nothing either.
- Each off-CPU stack gets a leaf frame naming what the wait was:
  `[preempted]` (switched out runnable: waiting for a CPU), `[idle]`
  (blocked in an event loop's wait with no Lua or trace frame on the
  stack: IDLE_WAITS), else `[blocked]`.
- --wall: the CPU samples of the other (time) event, weighted by their
  period in ns, plus the off-CPU stacks: per thread, one time base.
- Frames come from the Merger (chain cache, dynamic frame resolution,
  Folder), never a second parser; memory grows with distinct stacks and
  threads, not with the input.
"""

from ljperf import writers
from ljperf.frames import K_LUA, K_TRACE
from ljperf.perfscript import Event, time_span, time_to_ns

EVENT = "context-switches/period=1/"
# perf's names of the context-switch software event (perf list:
# "context-switches OR cs"), before any '/period=1/' or ':u'.
CS_EVENTS = ("context-switches", "cs")

BLOCKED, PREEMPTED, IDLE = "[blocked]", "[preempted]", "[idle]"
LABELS = (BLOCKED, PREEMPTED, IDLE)
# An event loop waiting: the libc wrappers and the kernel's own functions
# (the kernel's chain names the wait even where libc has no frame pointers).
IDLE_WAITS = frozenset((
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "do_epoll_wait",
    "poll", "__poll", "ppoll", "do_sys_poll", "select", "__select", "pselect",
    "do_select", "core_sys_select"))

OFF_TYPES = (("samples", "count"), ("off_cpu", "nanoseconds"))
WALL_TYPES = (("samples", "count"), ("wall", "nanoseconds"))


def is_cs_event(event):
    """EVENT (as perf script prints it) is the context-switch event."""
    return event is not None and \
        event.split(":", 1)[0].split("/", 1)[0] in CS_EVENTS


def wait_label(frames, preempt):
    """The leaf label of a switch-out with FRAMES (leaf first)."""
    if preempt:
        return PREEMPTED
    for fr in frames:
        if fr.kind == K_LUA or fr.kind == K_TRACE:
            return BLOCKED
    for fr in frames:
        if fr.name in IDLE_WAITS:
            return IDLE
    return BLOCKED


class OffCpu:
    """Feeds on perfscript.Reader batches (feed(), instead of Merger.feed);
    write() then gives the off-CPU profile, and with WALL the wall one."""

    def __init__(self, merger, wall=False):
        self.m = merger
        self.wall = wall
        self.pending = {}          # tid -> raw stack of its last context-switch sample
        self.out = {}              # tid -> (ns switched out, label, raw stack)
        self.off = {}              # (raw stack, label) -> [switches, ns]
        self.cpu = {}              # raw stack -> [samples, ns] (wall)
        self.threads = {}          # (pid, tid) -> [off ns, cpu ns]
        self.cpu_events = {}       # CPU event name -> samples
        self.switches = self.unmatched = self.open = self.unseen = 0
        self.t_first = self.t_last = None

    def feed(self, batch):
        """A list of perfscript Samples and Events, in input (= time) order."""
        m = self.m
        for s in batch:
            if type(s) is Event:
                if s.kind[:7] == "switch-":
                    self._switch(s)
                else:
                    m.event(s)
                continue
            comm, pid, tid, time, period, event, chain, regs, inline = s
            if time is not None:
                if self.t_first is None:
                    self.t_first = time
                self.t_last = time
            try:
                if is_cs_event(event):
                    self.pending[tid] = self._stack(comm, pid, tid, time, chain, inline)
                elif self.wall:
                    key = self._stack(comm, pid, tid, time, chain, inline)
                    ns = period or 0
                    c = self.cpu.get(key)
                    if c is None:
                        c = self.cpu[key] = [0, 0]
                    c[0] += 1
                    c[1] += ns
                    self._thread(key)[1] += ns
                    self.cpu_events[event] = self.cpu_events.get(event, 0) + 1
            except Exception:          # noqa: BLE001 -- one sample, not the run
                m.dropped += 1

    def _stack(self, comm, pid, tid, time, chain, inline):
        m = self.m
        fl, pid, nb = m.frames(chain, inline, pid, tid, time)
        if nb:
            m.bad += nb
        if m.cut and time is not None and m._before_switch(pid, tid, time):
            fl = tuple([fr for fr in fl if fr.kind != K_LUA and fr.kind != K_TRACE])
        return (comm, pid, tid, fl, None)

    def _thread(self, key):
        t = self.threads.get((key[1], key[2]))
        if t is None:
            t = self.threads[(key[1], key[2])] = [0, 0]
        return t

    def _switch(self, ev):
        if ev.time is None:
            return
        t = time_to_ns(ev.time)[0]
        if ev.kind != "switch-in":
            key = self.pending.pop(ev.tid, None)
            if key is None:
                self.unmatched += 1    # no stack for it (a sample lost)
                return
            self.out[ev.tid] = (t, wait_label(key[3], ev.kind == "switch-preempt"), key)
            return
        o = self.out.pop(ev.tid, None)
        if o is None:
            self.unseen += 1           # its OUT came before the recording
            return
        t0, label, key = o
        ns = max(0, t - t0)
        k = (key, label)
        c = self.off.get(k)
        if c is None:
            c = self.off[k] = [0, 0]
        c[0] += 1
        c[1] += ns
        self._thread(key)[0] += ns
        self.switches += 1

    # -- the result ---------------------------------------------------------

    def span(self):
        """(first, last) record time in seconds, or None."""
        return time_span(self.t_first, self.t_last)

    def totals(self):
        """Off-CPU ns per label: {label: ns}."""
        out = dict.fromkeys(LABELS, 0)
        for (_, lab), (_, ns) in self.off.items():
            out[lab] += ns
        return out

    def summary(self):
        """The stderr line after a run."""
        tot = self.totals()
        self.open = len(self.out)
        return ("off-CPU: %d switches weighed (%.3f s blocked, %.3f s preempted, %.3f s "
                "idle), %d switch-outs without a stack, %d switch-ins without their "
                "switch-out (waits begun before the recording: not weighed), %d threads "
                "still switched out at the end (not weighed)"
                % (self.switches, tot[BLOCKED] / 1e9, tot[PREEMPTED] / 1e9, tot[IDLE] / 1e9,
                   self.unmatched, self.unseen, self.open))

    def _stacks(self, root_mode, wall):
        """(frames, samples, ns, comm, pid, tid) of every off-CPU stack with
        its label frame on top, and with WALL the CPU stacks too."""
        by_label = {}
        for (key, label), v in self.off.items():
            by_label.setdefault(label, {})[key] = tuple(v)
        for label in LABELS:
            top = (label, "kernel", None, None)
            for frames, n, ns, comm, pid, tid in self.m.stacks(root_mode,
                                                               by_label.get(label, {})):
                yield frames + [top], n, ns, comm, pid, tid
        if wall:
            yield from self.m.stacks(root_mode, {k: tuple(v) for k, v in self.cpu.items()})

    def write(self, root_mode, meta, fmt, wall_out):
        """Feeds every stack to the writers: the main one of FMT (off-CPU
        ns; pprof: the off_cpu sample type), --kinds and --pprof's when
        META asks ("kinds", "pprof"), and with WALL_OUT the wall profile's
        folded writer (and META "wall_pprof": its pprof). Returns {name:
        writer}."""
        out = {"main": (OffPprof if fmt == "pprof" else writers.WRITERS[fmt])(meta)}
        if meta.get("kinds"):
            out["kinds"] = writers.Kinds(meta)
        if meta.get("pprof"):
            out["pprof"] = OffPprof(meta)
        for st in self._stacks(root_mode, False):
            for w in out.values():
                w.stack(*st)
        if wall_out:
            wm = dict(meta, types=WALL_TYPES)
            out["wall"] = writers.Folded(wm)
            if meta.get("wall_pprof"):
                out["wall_pprof"] = OffPprof(wm)
            for st in self._stacks(root_mode, True):
                for name in ("wall", "wall_pprof", "kinds"):
                    if name in out:
                        out[name].stack(*st)
        return out


class OffPprof(writers.MemPprof):
    """pprof of time in ns per stack (META "types": WALL_TYPES for the
    wall profile, else OFF_TYPES): switches (samples) and nanoseconds, the
    time type shown first."""

    def __init__(self, meta):
        super().__init__(dict(meta, rate=1))
        self.TYPES = meta.get("types") or OFF_TYPES
        self.DEFAULT, self.PERIOD_TYPE = self.TYPES[1][0], self.TYPES[1]

    def stack(self, frames, samples, weight, comm, pid, tid):
        super().stack(frames, samples, (samples, weight), comm, pid, tid)
