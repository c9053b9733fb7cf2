"""The pages of an off-CPU recording (ljperf record --off-cpu, --wall):
offcpu.html from offcpu.folded, wall.html from wall.folded (lj_merge
--off-cpu, ljperf/offcpu.py), and what ljperf says of them.

Invariant: the folded files keep every stack, [idle] ones included; only
the pages leave the stacks whose leaf is [idle] out, unless --idle."""

import os

from ljperf.messages import Fail, say
from ljperf.offcpu import BLOCKED, IDLE, PREEMPTED
from ljperf.folded import load_folded, load_kinds
from ljperf.render import render_html

# Frame kinds (offcpu.kinds, profile.kinds) that are Lua functions.
LUA_KINDS = frozenset(("lua", "trace"))
# ljperf says how much [blocked] time of the threads that run Lua has no Lua
# frame when it is at least this share of their [blocked] time.
NO_LUA_SAY = 0.10

# folded file, page, what it weighs
PAGES = (("offcpu.folded", "offcpu.html", "off-CPU time"),
         ("wall.folded", "wall.html", "wall time"))


def shown(stacks, idle):
    """STACKS without those ending in [idle], unless IDLE."""
    return stacks if idle else [(f, w) for f, w in stacks if f[-1] != IDLE]


def by_label(stacks):
    """{[blocked]/[preempted]/[idle]: ns} of STACKS (off-CPU ones end in one)."""
    out = dict.fromkeys((BLOCKED, PREEMPTED, IDLE), 0)
    for frames, w in stacks:
        if frames[-1] in out:
            out[frames[-1]] += w
    return out


def has_lua(frames, kinds):
    """Whether FRAMES (root first) hold a Lua or trace frame."""
    return any(kinds.get(n, frozenset()) & LUA_KINDS for n in frames[1:])


def without_lua(outdir, stacks, kinds):
    """(ns, of ns): the [blocked] time of the roots (threads, or thread
    names) that run Lua, a Lua frame in STACKS or in OUTDIR's CPU profile,
    whose stack has no Lua frame; and all their [blocked] time."""
    blocked = {}                 # root -> [ns without a Lua frame, ns]
    roots = set()
    for f, w in stacks:
        lua = has_lua(f, kinds)
        if lua:
            roots.add(f[0])
        if f[-1] == BLOCKED:
            b = blocked.setdefault(f[0], [0, 0])
            b[0] += 0 if lua else w
            b[1] += w
    cpu = os.path.join(outdir, "profile.folded")
    if any(b[0] for r, b in blocked.items() if r not in roots) and os.path.exists(cpu):
        ck = load_kinds(os.path.join(outdir, "profile.kinds"))
        roots |= {f[0] for f, _ in load_folded(cpu) if f[0] in blocked and has_lua(f, ck)}
    return (sum(b[0] for r, b in blocked.items() if r in roots),
            sum(b[1] for r, b in blocked.items() if r in roots))


def write(outdir, meta, opts):
    """The pages of OUTDIR's offcpu.folded (and wall.folded, for a --wall
    recording). Returns {folded name: (page or None, {label: ns}, ns shown)},
    and "without_lua": without_lua() of offcpu.folded."""
    kinds = load_kinds(os.path.join(outdir, "offcpu.kinds"))
    idle = getattr(opts, "idle", False)
    out = {}
    for name, page, what in PAGES:
        path = os.path.join(outdir, name)
        if name == "wall.folded" and not meta.get("wall"):
            continue
        stacks = load_folded(path) if os.path.exists(path) else []
        keep = shown(stacks, idle)
        total = sum(w for _, w in keep)
        out[name] = (None, by_label(stacks), total)
        if name == "offcpu.folded":
            out["without_lua"] = without_lua(outdir, stacks, kinds)
        if not keep:
            continue
        m = {"title": "%s (%s%s)" % (meta.get("title") or "", what,
                                     "" if idle else ", [idle] left out"),
             "event": "context switches" + (" + " + meta["event"] if name == "wall.folded"
                                            else ""),
             "unit": "ns", "frequency": None, "recorded": meta.get("recorded"),
             "duration": meta.get("duration"), "target": meta.get("target")}
        try:
            render_html(keep, kinds, m, os.path.join(outdir, page))
        except Fail as e:
            raise Fail("%s (%s is written: %s)" % (e, name, path), e.code)
        out[name] = (os.path.join(outdir, page), by_label(stacks), total)
    if not any(v for v in out["offcpu.folded"][1].values()):
        say("warning: --off-cpu: no context switch was weighed (no sample of the "
            "context-switches event: see lj_merge-offcpu.log)")
    return out


def say_result(outdir, pages):
    page, labels, _ = pages["offcpu.folded"]
    say("off-CPU: %.3f s blocked, %.3f s preempted, %.3f s idle%s"
        % (labels[BLOCKED] / 1e9, labels[PREEMPTED] / 1e9, labels[IDLE] / 1e9,
           "" if page is None else " (the page leaves [idle] out unless --idle)"))
    if page:
        say("  off-CPU        %s" % page)
    say("  pprof          %s" % os.path.join(outdir, "offcpu.pb.gz"))
    ns, of = pages["without_lua"]
    if of and ns >= NO_LUA_SAY * of:
        say("off-CPU: %.3f s (%.0f%%) of the [blocked] time of the threads that run Lua has "
            "no Lua frame: C code that waits, or a wait inside glibc (os.execute, io.popen, "
            "io reads), which keeps no frame pointer and loses its Lua callers "
            "(docs/offcpu.md, Limits)" % (ns / 1e9, 100.0 * ns / of))
    if "wall.folded" in pages:
        wpage, _, total = pages["wall.folded"]
        say("wall: %.3f s on the page (all threads)" % (total / 1e9))
        if wpage:
            say("  wall           %s" % wpage)
        say("  pprof          %s" % os.path.join(outdir, "wall.pb.gz"))
