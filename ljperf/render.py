"""The flame graph page: the renderer's tree built from folded stacks and
frame kinds (ljperf.folded reads them), and the page (template and renderer from
share/ljperf) written with the data inlined. `ljperf record`/`report` and
`ljperf diff` draw through it.

Colour classes and the kind of a printed frame come from ljperf.frames
(lj_merge's frame vocabulary), KINDS in the order the legend lists them.
The palette itself is in tools/ljperf/page/ljperf-page.js; docs/ljperf.md
shows both."""

import html
import json
import os
import re

from ljperf.frames import frame_kind
from ljperf.locate import share_dir
from ljperf.messages import Fail, read_text


# A memory profile's pages (lj_merge --mem): meta "unit" "bytes" and the
# name of what is weighed, by folded output (alloc.folded, inuse.folded).
MEM_NAMES = {"alloc": "alloc space", "inuse": "in-use space"}


def event_unit(event, mem=False):
    """The unit of EVENT's sample weights: "bytes" for a memory profile
    (MEM), "ns" for the clock events, else "" (a count)."""
    if mem:
        return "bytes"
    e = (event or "").split(":")[0]
    if e in ("cpu-clock", "task-clock"):
        return "ns"
    return ""


# -- The tree ------------------------------------------------------------------


def build_tree(stacks, kinds):
    """Folded stacks -> the renderer's tree {n: name, v: total weight,
    k: kind, c: [children]} under a root "all"; and the self weight of each
    kind (what the legend shows)."""
    cache = {}

    def kind_of(name):
        k = cache.get(name)
        if k is None:
            k = cache[name] = frame_kind(name, kinds.get(name))
        return k

    root = ["all", 0, "root", {}]
    self_by_kind = {}
    for frames, w in stacks:
        node = root
        node[1] += w
        for depth, name in enumerate(frames):
            ch = node[3].get(name)
            if ch is None:
                ch = node[3][name] = [name, 0, "root" if depth == 0 else kind_of(name), {}]
            ch[1] += w
            node = ch
        self_by_kind[node[2]] = self_by_kind.get(node[2], 0) + w

    def convert(n):
        d = {"n": n[0], "v": n[1], "k": n[2]}
        if n[3]:
            d["c"] = []
        return d

    top = convert(root)
    todo = [(root, top)]
    while todo:
        n, d = todo.pop()
        for ch in n[3].values():
            cd = convert(ch)
            d["c"].append(cd)
            if ch[3]:
                todo.append((ch, cd))
    return top, self_by_kind


# -- The page ------------------------------------------------------------------


def _script_safe(text):
    """Text that cannot end the <script> element it is inlined in."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.I).replace("<!--", "<\\!--")


def json_for_html(obj):
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return (s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_html(stacks, kinds, meta, out):
    """The page of STACKS to OUT. META: title, event, unit (event_unit;
    "bytes" for a memory profile, with weightName, a MEM_NAMES value),
    frequency, recorded, duration, target: shown in the header."""
    tree, self_by_kind = build_tree(stacks, kinds)
    data = dict(meta)
    data["tree"] = tree
    data["total"] = tree["v"]
    data["kindSelf"] = self_by_kind
    write_page(data, meta.get("title") or "ljperf", out)


def write_page(data, title, out):
    """The page (template and renderer from share/ljperf) with DATA inlined."""
    share = share_dir()

    def asset(name):
        try:
            with open(os.path.join(share, name), encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise Fail("cannot read renderer file %s: %s" % (name, e.strerror or e))

    parts = {
        "TITLE": html.escape("ljperf: " + title, quote=True),
        "RENDERER": html.escape(" / ".join(
            read_text(os.path.join(share, "renderer-versions.txt")).split("\n")).strip(" /")
            or "d3-flame-graph, d3"),
        "RENDERER_CSS": asset("d3-flamegraph.css").replace("</", "<\\/"),
        "PAGE_CSS": asset("ljperf-page.css").replace("</", "<\\/"),
        "DATA": json_for_html(data),
        "D3": _script_safe(asset("d3.min.js")),
        "FLAMEGRAPH": _script_safe(asset("d3-flamegraph.min.js")),
        "PAGE_JS": _script_safe(asset("ljperf-page.js")),
    }
    page = re.sub(r"@@([A-Z_0-9]+)@@", lambda m: parts.get(m.group(1), m.group(0)),
                  asset("flamegraph.html.in"))
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, out)
