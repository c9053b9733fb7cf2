"""ljperf renderer units (no perf, no browser): frame kinds, the tree, the
HTML page (self-contained, hostile names cannot break out of it), and
lj_merge --kinds on the lj_merge fixtures."""

import json
import os
import re
import subprocess
import sys
import tempfile

from tests.lib import ljptest as t
from ljperf.folded import load_folded


def load_ljperf():
    """ljperf's renderer (ljperf.render: frame kinds, folded loading, the
    tree, the page); its page assets from build/share/ljperf."""
    os.environ.setdefault("LJPERF_SHARE", os.path.join(t.build_dir(), "share", "ljperf"))
    from ljperf import render
    return render


def test_kinds(lj):
    fk = lj.frame_kind
    cases = [
        # (name, what lj_merge --kinds said, expected)
        ("fib_lua@/x/demo.lua:28", {"lua"}, "lua"),
        ("lua_work@/x/demo.lua:20_[j]", {"trace"}, "trace"),
        ("string.byte", {"builtin"}, "builtin"),
        ("lj_BC_FORL", {"vm"}, "vm"),
        ("lj_tab_get", {"c"}, "vm"),             # LuaJIT's own C: runtime
        ("lua_pcall", {"c"}, "vm"),
        ("luaL_loadfile", {"c"}, "vm"),
        ("fib_c", {"c"}, "c"),
        ("do_syscall_64", {"kernel"}, "kernel"),
        ("[unknown]", {"c"}, "unknown"),
        ("[no call chain]", None, "unknown"),     # perf printed no frames
        ("select", {"c", "builtin"}, "builtin"),  # both: the Lua side wins
        # no --kinds information: read from lj_merge's naming
        ("fib_lua@/x/demo.lua:28", None, "lua"),
        ("demo.lua:0", None, "lua"),
        ("fib_lua@demo.lua:28:31", None, "lua"),  # --lines
        ("inner@fake.lua:10_[j]", None, "trace"),
        ("ffi.meta___call", None, "builtin"),
        ("file:write", None, "builtin"),
        ("jit.util.funcinfo", None, "builtin"),
        ("lj_vm_pcall", None, "vm"),
        ("lj_gc_step", None, "vm"),
        ("clock_gettime@@GLIBC_2.17", None, "c"),
        ("std::vector<int>::push_back", None, "c"),
        ("c_work.constprop.0", None, "c"),
        ("[libc.so.6]", None, "c"),
        ("vfs_read_[k]", None, "kernel"),
    ]
    bad = [(n, s, e, fk(n, s)) for n, s, e in cases if fk(n, s) != e]
    t.check(not bad, "frame_kind: %d cases%s" % (len(cases), "" if not bad else " %s" % bad))
    from ljperf import frames as ljframes
    t.check(set(ljframes.KINDS) >= {fk(n, s) for n, s, _ in cases}, "every kind is in KINDS")


def test_tree(lj):
    path = write_tmp("app;main;f@a.lua:1;g@a.lua:5 3\n"
                     "app;main;f@a.lua:1 2\n"
                     "app;main;lj_gc_step 1\n"
                     "other;x 4\n"
                     "malformed line\n"
                     "app;main;zero 0\n")
    try:
        stacks = load_folded(path)
    finally:
        os.unlink(path)
    t.check(len(stacks) == 4, "load_folded skips malformed and zero lines")
    tree, self_by_kind = lj.build_tree(stacks, {"x": {"c"}})
    t.check(tree["n"] == "all" and tree["v"] == 10 and tree["k"] == "root", "root 'all' holds 10")
    kids = {c["n"]: c for c in tree["c"]}
    t.check(set(kids) == {"app", "other"} and kids["app"]["k"] == "root" and
            kids["app"]["v"] == 6, "comm frames are roots of their trees")
    main = kids["app"]["c"][0]
    f = [c for c in main["c"] if c["n"] == "f@a.lua:1"][0]
    t.check(f["v"] == 5 and f["k"] == "lua" and f["c"][0]["v"] == 3, "values include children")
    t.check(self_by_kind == {"lua": 5, "vm": 1, "c": 4}, "self weight by kind: %s" % self_by_kind)


def write_tmp(text):
    fd, p = tempfile.mkstemp(prefix="ljperf-render-", suffix=".folded")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return p


def test_html(lj):
    evil = "</script><script>alert(1)</script>@x.lua:1"
    path = write_tmp("app;main;%s 5\napp;main;<b>&amp\u2028 7\n" % evil)
    try:
        stacks = load_folded(path)
    finally:
        os.unlink(path)
    out = tempfile.mkdtemp(prefix="ljperf-render-")
    try:
        html_path = os.path.join(out, "flamegraph.html")
        lj.render_html(stacks, {}, {"title": "a </title><script>x()</script>", "event":
                                    "cpu-clock:uH", "unit": "ns"}, html_path)
        page = open(html_path, encoding="utf-8").read()
    finally:
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))
        os.rmdir(out)
    scripts = re.findall(r"<script\b", page, re.I)
    ends = re.findall(r"</script", page, re.I)
    t.check(len(scripts) == 4 and len(ends) == 4,
            "exactly the page's 4 script elements (%d open, %d close)" % (len(scripts), len(ends)))
    t.check("<title>ljperf: a &lt;/title&gt;" in page, "the title is escaped")
    t.check(not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I),
            "no external src/href")
    t.check("@@" not in re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S),
            "every template field filled")
    m = re.search(r'<script type="application/json" id="ljperf-data">(.*?)</script>', page, re.S)
    data = json.loads(m.group(1))
    names = json.dumps(data["tree"], ensure_ascii=False)
    t.check(evil in names and "<b>&amp\u2028" in names, "names survive the round trip")
    t.check(data["total"] == 12 and data["kindSelf"] == {"lua": 5, "c": 7},
            "totals in the page data")
    t.check("d3-flame-graph" in page and "https://d3js.org v" in page,
            "the renderer (d3-flame-graph, d3) is inlined")


def test_kinds_option():
    fx = os.path.join(t.ROOT, "tests", "lj_merge", "fixtures")
    merge = os.path.join(t.ROOT, "perf-script", "lj_merge.py")
    with tempfile.TemporaryDirectory(prefix="ljperf-kinds-") as d:
        kinds = os.path.join(d, "k")
        r = subprocess.run([sys.executable, merge, "--jit-tag", "--keep-vm", "--kinds", kinds,
                            "--jitdump", os.path.join(fx, "fakevm"),
                            os.path.join(fx, "fakevm-inject.txt")],
                           capture_output=True, text=True)
        t.check(r.returncode == 0, "lj_merge --kinds runs")
        got = {}
        for line in open(kinds):
            k, _, n = line.rstrip("\n").partition("\t")
            got.setdefault(n, set()).add(k)
        printed = set()
        for line in r.stdout.splitlines():
            printed.update(line.rpartition(" ")[0].split(";"))
        t.check(set(got) == printed, "--kinds names exactly the printed frames")
        want = {"fakevm": "root", "outer@fake.lua:1": "lua", "outer@fake.lua:1_[j]": "trace",
                "lj_BC_FORL": "vm", "string.byte": "builtin", "my_c_func": "c",
                "main": "c"}
        bad = {n: got.get(n) for n, k in want.items() if got.get(n) != {k}}
        t.check(not bad, "--kinds kinds (fakevm): %s" % (bad or "ok"))
        r = subprocess.run([sys.executable, merge, "--kinds", kinds,
                            os.path.join(fx, "sys.txt")], capture_output=True, text=True)
        got = {}
        for line in open(kinds):
            k, _, n = line.rstrip("\n").partition("\t")
            got.setdefault(n, set()).add(k)
        t.check(got.get("vfs_read") == {"kernel"} and got.get("sys_loop") == {"c"},
                "--kinds tells kernel frames from C frames (sys.txt)")


def test():
    lj = load_ljperf()
    test_kinds(lj)
    test_tree(lj)
    test_html(lj)
    test_kinds_option()


if __name__ == "__main__":
    t.main(test)
