"""ljperf diff BEFORE AFTER: what changed between two profiles.

BEFORE and AFTER are ljperf output directories (their profile.folded and
profile.kinds) or folded files. Two outputs:

  html    (default) a differential flame graph, the page of `ljperf record`
          in diff mode: one tree of the frames of both profiles, each frame
          as wide as the mean of its two shares (so a frame present in only
          one profile is still drawn), red where its share grew, blue where
          it shrank, deeper for a larger change; the tooltip gives both
          values and the change.
  folded  `STACK BEFORE AFTER` lines, the two-column input flamegraph.pl
          draws as a differential graph; by default BEFORE is scaled to
          AFTER's total (rounded), with --absolute both are raw weights.

Normalised (default): a frame's value is its share of its profile's total
weight, the change is in percentage points of all samples. --absolute: raw
weights (for two recordings of the same length and rate).

Units: weights are shown as counts, except for memory profiles: bytes
(B, KiB, MiB...) when opts.unit is "bytes" (`--unit bytes`), when a side
is a memory profile's folded file (alloc.folded, inuse.folded: what lj_merge
--mem and --inuse write) or a directory whose ljperf.json says "unit":
"bytes". Both sides must agree.

Called by ljperf.cli (`ljperf diff`); draws with ljperf.render.
"""

import collections
import json
import os
import sys

from ljperf import render
from ljperf.folded import load_folded, load_kinds
from ljperf.messages import Fail, read_text, say

SCALE = 1e6          # normalised widths: shares in millionths (the renderer's v)


class Side:
    """One profile: its stacks [(frames, weight)], kinds, title, and its
    unit ("bytes" for a memory profile, else "") with the name of what is
    weighed (render.MEM_NAMES) or None."""

    def __init__(self, path):
        self.path = path
        kinds_path = None
        meta = {}
        if os.path.isdir(path):
            folded = os.path.join(path, "profile.folded")
            kinds_path = os.path.join(path, "profile.kinds")
            try:
                meta = json.loads(read_text(os.path.join(path, "ljperf.json")) or "{}")
            except ValueError:
                meta = {}
            if not isinstance(meta, dict):
                meta = {}
        else:
            folded = path
        stem = os.path.splitext(os.path.basename(folded))[0]
        self.weight_name = render.MEM_NAMES.get(stem)
        self.unit = "bytes" if self.weight_name or meta.get("unit") == "bytes" else ""
        if not os.path.isfile(folded):
            raise Fail("%s: no folded profile (%s): give an ljperf output directory "
                          "or a folded file" % (path, folded))
        bad, kbad = collections.Counter(), collections.Counter()
        try:
            self.stacks = load_folded(folded, bad)
        except OSError as e:
            raise Fail("cannot read %s: %s" % (folded, e.strerror or e))
        self.kinds = load_kinds(kinds_path, kbad) if kinds_path else {}
        # malformed lines skipped: [(file, count)]
        self.skipped = [(p, c["lines"]) for p, c in ((folded, bad), (kinds_path, kbad)) if c]
        self.total = sum(w for _, w in self.stacks)
        self.title = os.path.basename(os.path.normpath(path))
        self.command = meta.get("title")


def folded_lines(before, after, absolute=False):
    """`STACK BEFORE AFTER` lines over the union of both profiles' stacks,
    in a stable order (sorted by stack)."""
    acc = {}
    for i, side in enumerate((before, after)):
        for frames, w in side.stacks:
            key = ";".join(frames)
            v = acc.setdefault(key, [0, 0])
            v[i] += w
    scale = 1.0
    if not absolute and before.total:
        scale = after.total / before.total
    out = []
    for key in sorted(acc):
        a, b = acc[key]
        if not absolute:
            a = round(a * scale)
        out.append("%s %s %s\n" % (key, _num(a), _num(b)))
    return out


def _num(v):
    return str(int(v)) if float(v).is_integer() else repr(v)


def diff_tree(before, after, absolute=False):
    """The renderer's tree of both profiles: {n, k, a: BEFORE's weight,
    b: AFTER's, v: width (mean of the two shares, or of the two weights
    with ABSOLUTE), c}; and the largest |change| of a frame below the
    root (the page's colour scale)."""
    kinds = dict(after.kinds)
    for k, v in before.kinds.items():
        kinds.setdefault(k, set()).update(v)
    ta, _ = render.build_tree(before.stacks, kinds)
    tb, _ = render.build_tree(after.stacks, kinds)
    na = before.total or 1
    nb = after.total or 1

    def width_and_delta(a, b):
        if absolute:
            return (a + b) / 2.0, b - a
        return (a / na + b / nb) / 2.0 * SCALE, b / nb - a / na

    top = {"n": "all", "k": "root"}
    todo = [(ta, tb, top, 0)]
    biggest = 0.0
    while todo:
        x, y, node, depth = todo.pop()
        a = x["v"] if x else 0
        b = y["v"] if y else 0
        node["a"], node["b"] = a, b
        node["v"], delta = width_and_delta(a, b)
        if depth > 1:                   # "all" and the process frames aside
            biggest = max(biggest, abs(delta))
        kids = {}
        for i, src in enumerate((x, y)):
            for ch in (src or {}).get("c", ()):
                kids.setdefault(ch["n"], [None, None])[i] = ch
        if kids:
            node["c"] = []
            for name, (cx, cy) in kids.items():
                cn = {"n": name, "k": (cx or cy)["k"]}
                node["c"].append(cn)
                todo.append((cx, cy, cn, depth + 1))
    return top, biggest


def units(before, after, unit=None):
    """(unit, weight name) of the page: UNIT ("bytes" from --unit) or the
    sides'; Fail when they disagree."""
    if unit is None:
        if before.unit != after.unit:
            raise Fail("%s is in %s, %s in %s: give --unit to compare them anyway"
                       % (before.path, before.unit or "samples", after.path,
                          after.unit or "samples"))
        unit = after.unit
    name = after.weight_name if after.weight_name == before.weight_name else None
    return unit, name or ("space" if unit == "bytes" else "weight")


def write_html(before, after, out, absolute=False, unit=None):
    tree, biggest = diff_tree(before, after, absolute)
    # ljperf.json names the event asked for, not always the one recorded
    # (cpu-clock without a PMU): weights are shown without a unit, except
    # the bytes of memory profiles.
    unit, weight_name = units(before, after, unit)
    data = {"mode": "diff", "absolute": bool(absolute), "tree": tree,
            "title": "%s \u2192 %s" % (before.title, after.title),
            "before": {"title": before.title, "total": before.total, "path": before.path,
                       "command": before.command},
            "after": {"title": after.title, "total": after.total, "path": after.path,
                      "command": after.command},
            "event": None, "unit": unit, "weightName": weight_name,
            "maxDelta": biggest, "total": tree["v"], "kindSelf": {}}
    render.write_page(data, "diff " + data["title"], out)


def run(opts):
    """ljperf diff (opts: before, after, output, absolute, format). Says
    last how many malformed lines of the inputs were skipped."""
    before, after = Side(opts.before), Side(opts.after)
    skipped = ", ".join("%d in %s" % (n, p) for side in (before, after)
                        for p, n in side.skipped)
    empty = [side.path for side in (before, after) if not side.stacks]
    if len(empty) == 2:
        raise Fail("both profiles are empty: %s, %s%s" % (
            empty[0], empty[1], " (skipped malformed lines: %s)" % skipped if skipped else ""))
    if empty and not opts.absolute:
        # Shares of nothing are undefined; an empty side is a real
        # outcome (a leak gone, a function no longer called).
        say("%s is empty: differences are absolute" % empty[0])
        opts.absolute = True
    if opts.format == "folded":
        lines = folded_lines(before, after, opts.absolute)
        if opts.output:
            with open(opts.output, "w", encoding="utf-8") as f:
                f.writelines(lines)
        else:
            sys.stdout.writelines(lines)
    else:
        out = os.path.abspath(opts.output or "diff.html")
        write_html(before, after, out, opts.absolute, getattr(opts, "unit", None))
        say("diff flame graph %s" % out)
    if skipped:
        say("skipped malformed lines: %s" % skipped)
    return 0
