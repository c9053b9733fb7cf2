"""ljperf diff: the differential flame graph (in headless Chromium) and the
folded difference.

  test_diff.py units    two hand-written folded files (no perf): the folded
                        output, the tree, colours and tooltips, worked out
                        by hand
  test_diff.py record   the demo recorded twice (with --format speedscope),
                        the second time with its Lua leaf made 4x heavier
                        (same file, same lines): the Lua leaf grows red, the
                        C leaf shrinks blue, with the change the two folded
                        profiles give
"""

import json
import os
import re
import shutil
import subprocess
import sys

from tests.lib import ljptest as t

HERE = os.path.dirname(os.path.abspath(__file__))

BEFORE = "app;main;f 30\napp;main;g 70\n"            # total 100
AFTER = "app;main;f 120\napp;main;h 80\n"            # total 200


def run(s, args):
    r = s.ljperf(args)
    t.check(r.returncode == 0, "ljperf %s exits 0" % " ".join(args[:1] + args[3:]))
    return r


def browser(html, expect, shot):
    node = shutil.which("node")
    if not node:
        t.fail("node is not installed (Debian package nodejs)")
    env = dict(os.environ)
    env.setdefault("LJPERF_NODE_MODULES",
                   os.path.join(t.build_dir(), "tests", "ljperf", "node_modules"))
    r = subprocess.run([node, os.path.join(HERE, "browser_check.js"), html, shot,
                        json.dumps({"diff": expect})],
                       env=env, capture_output=True, text=True, timeout=180)
    print(r.stdout, end="")
    if r.stderr.strip():
        print("node stderr: " + r.stderr.strip()[-2000:])
    t.check(r.returncode == 0, "the diff page works in Chromium")


def page_data(html):
    with open(html, encoding="utf-8") as f:
        m = re.search(r'<script type="application/json" id="ljperf-data">(.*?)</script>',
                      f.read(), re.S)
    return json.loads(m.group(1))


def units():
    with t.Session() as s:
        a, b = s.path("before.folded"), s.path("after.folded")
        with open(a, "w") as f:
            f.write(BEFORE)
        with open(b, "w") as f:
            f.write(AFTER)
        # normalised: BEFORE scaled to AFTER's total 200 (x2)
        r = run(s, ["diff", a, b, "--format", "folded"])
        t.check(r.stdout == "app;main;f 60 120\napp;main;g 140 0\napp;main;h 0 80\n",
                "--format folded: BEFORE scaled to AFTER's total:\n" + r.stdout)
        r = run(s, ["diff", a, b, "--format", "folded", "--absolute"])
        t.check(r.stdout == "app;main;f 30 120\napp;main;g 70 0\napp;main;h 0 80\n",
                "--format folded --absolute: raw weights:\n" + r.stdout)
        html = s.path("diff.html")
        run(s, ["diff", a, b, "-o", html])
        tree = page_data(html)["tree"]
        main = tree["c"][0]["c"][0]
        got = {c["n"]: (c["a"], c["b"], round(c["v"])) for c in main["c"]}
        # widths: mean of the shares in millionths: f (.3+.6)/2, g .7/2, h .4/2
        t.check(got == {"f": (30, 120, 450000), "g": (70, 0, 350000), "h": (0, 80, 200000)},
                "tree: both weights and the mean share of each frame (%s)" % got)
        # f: 30% -> 60%, g: 70% -> 0 (only before), h: 0 -> 40% (only after)
        pre = ["all", "app", "main"]
        browser(html, {"frames": [
            {"path": pre + ["f"], "colour": "red",
             "tip": ["before 30.0%", "after  60.0%", "change +30.00 pp of all samples"]},
            {"path": pre + ["g"], "colour": "blue",
             "tip": ["before 70.0%", "after  0%",
                     "change \u221270.00 pp of all samples (only before)"]},
            {"path": pre + ["h"], "colour": "red",
             "tip": ["before 0%", "after  40.0%",
                     "change +40.00 pp of all samples (only after)"]}]},
            s.path("diff.png"))
        run(s, ["diff", a, b, "-o", html, "--absolute"])
        d = page_data(html)
        f = [c for c in d["tree"]["c"][0]["c"][0]["c"] if c["n"] == "f"][0]
        t.check(d["absolute"] and f["v"] == 75.0, "--absolute: width is the mean weight "
                                                  "(30 + 120) / 2 = 75 (%s)" % f["v"])
        # an empty side (a leak gone): absolute, said once; both empty: an error
        e = s.path("empty.folded")
        open(e, "w").close()
        r = run(s, ["diff", a, e, "--format", "folded"])
        t.check(r.stdout == "app;main;f 30 0\napp;main;g 70 0\n" and
                r.stderr.count("is empty: differences are absolute") == 1,
                "an empty AFTER: absolute weights, said once:\n" + r.stdout + r.stderr)
        r = s.ljperf(["diff", e, e])
        t.check(r.returncode == 1 and "both profiles are empty" in r.stderr,
                "two empty profiles are one clear error: " + r.stderr.strip())
        r = s.ljperf(["diff", a, s.path("missing")])
        t.check(r.returncode == 1 and "no folded profile" in r.stderr,
                "a missing input is one clear error")


DEMO_WORK = "for i = 1, 60000 do"          # lua_work's loop in examples/demo/demo.lua


def node_weights(folded):
    """{path tuple (from the root frame): weight incl. callees}."""
    out = {}
    for stack, w in folded.items():
        fr = tuple(stack.split(";"))
        for i in range(1, len(fr) + 1):
            out[fr[:i]] = out.get(fr[:i], 0) + w
    return out


def widest(na, nb, ta, tb, prefix):
    """The path ending in a frame named PREFIX@... or PREFIX with the largest
    mean share of both profiles."""
    paths = [p for p in set(na) | set(nb)
             if p[-1] == prefix or p[-1].startswith(prefix + "@")]
    return max(paths, key=lambda p: na.get(p, 0) / ta + nb.get(p, 0) / tb)


def speedscope(d, folded):
    """record --format speedscope wrote DIR/profile.speedscope.json with the
    weight of profile.folded."""
    with open(os.path.join(d, "profile.speedscope.json")) as f:
        doc = json.load(f)
    weights = sum(sum(p["weights"]) for p in doc["profiles"])
    t.check(doc["$schema"].endswith("file-format-schema.json") and
            weights == sum(folded.values()),
            "--format speedscope: profile.speedscope.json, weight %d as folded" % weights)


def record():
    t.need_perf()
    fibdemo = t.built("examples", "demo", "fibdemo")
    with open(os.path.join(os.path.dirname(fibdemo), "demo.lua")) as f:
        src = f.read()
    t.check(src.count(DEMO_WORK) == 1, "demo.lua has lua_work's loop " + DEMO_WORK)
    with t.Session() as s:
        script = s.path("demo.lua")     # the same path both times: same frame names
        dirs = []
        for n, work in (("before", DEMO_WORK), ("after", "for i = 1, 240000 do")):
            with open(script, "w") as f:
                f.write(src.replace(DEMO_WORK, work))
            d = s.path(n)
            run(s, ["record", "-o", d, "--format", "speedscope", "--", fibdemo, "2", script])
            dirs.append(d)
        fa, fb = t.folded(dirs[0]), t.folded(dirs[1])
        speedscope(dirs[1], fb)
        ta, tb = sum(fa.values()), sum(fb.values())
        na, nb = node_weights(fa), node_weights(fb)

        def share(folded, total, name):
            """Self share of the frames NAME@... (leaf frames)."""
            return 100.0 * sum(w for st, w in folded.items()
                               if st.rsplit(";", 1)[-1].startswith(name + "@")) / total

        # Hand reasoning: the Lua leaf does 4x the work per call, C the same,
        # so its share grows from about 40% to about 70%.
        la, lb = share(fa, ta, "lua_work"), share(fb, tb, "lua_work")
        t.check(lb > la + 15, "lua_work's share grew: %.1f%% -> %.1f%%" % (la, lb))
        targets = []
        for name, colour in (("lua_work", "red"), ("c_work", "blue")):
            p = widest(na, nb, ta, tb, name)
            delta = 100.0 * (nb.get(p, 0) / tb - na.get(p, 0) / ta)
            t.check((delta > 0) == (colour == "red"),
                    "%s (%s): %+.2f pp in the folded profiles" % (name, p[-1], delta))
            sign = "+" if delta > 0 else "\u2212"
            targets.append({"path": ["all"] + list(p), "colour": colour,
                            "tip": ["change %s%.2f pp of all samples" % (sign, abs(delta))]})
        html = s.path("diff.html")
        run(s, ["diff", dirs[0], dirs[1], "-o", html])
        browser(html, {"frames": targets}, s.path("diff.png"))


if __name__ == "__main__":
    t.main({"units": units, "record": record}[sys.argv[1]])
