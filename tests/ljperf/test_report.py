"""ljperf report DIR: renders profile.folded, profile.kinds and
flamegraph.html again from DIR's perf data, re-running perf inject when
perf.jit.data is missing; the same stacks as the recording gave (nothing is
read from /tmp any more); --keep-vm and --lines reach lj_merge."""

import os
import shutil

from tests.lib import ljptest as t


def read(p):
    with open(p) as f:
        return f.read()


def test():
    t.need_perf()
    demo = t.built("examples", "demo", "fibdemo")
    with t.Session() as s:
        out = s.path("out")
        r = s.ljperf(["record", "-o", out, "-F", "499", "--", demo, "1"])
        t.check(r.returncode == 0, "ljperf record exits 0")
        first = read(os.path.join(out, "profile.folded"))
        kinds = read(os.path.join(out, "profile.kinds"))
        pid = t.meta(out)["pids"][0]
        t.check(not os.path.exists("/tmp/perf-%d.map" % pid), "the perf map left /tmp")

        for f in ("profile.folded", "profile.kinds", "flamegraph.html", "perf.jit.data"):
            os.unlink(os.path.join(out, f))
        for so in [f for f in os.listdir(out) if f.startswith("jitted-")]:
            os.unlink(os.path.join(out, so))
        # from another directory, with a relative path
        cwd = os.getcwd()
        os.chdir(s.dir)
        try:
            r = s.ljperf(["report", "out"])
        finally:
            os.chdir(cwd)
        t.check(r.returncode == 0, "ljperf report exits 0")
        for f in ("profile.folded", "profile.kinds", "flamegraph.html", "perf.jit.data"):
            t.check(os.path.isfile(os.path.join(out, f)), "report wrote " + f)
        t.check(read(os.path.join(out, "profile.folded")) == first,
                "the same stacks as the recording")
        t.check(read(os.path.join(out, "profile.kinds")) == kinds, "the same kinds")
        t.check("flamegraph.html" in r.stderr, "says where the flame graph is")

        # perf.jit.data is newer than perf.data: no second inject
        mtime = os.path.getmtime(os.path.join(out, "perf.jit.data"))
        r = s.ljperf(["report", out, "--keep-vm"])
        t.check(r.returncode == 0 and
                os.path.getmtime(os.path.join(out, "perf.jit.data")) == mtime,
                "report --keep-vm reuses perf.jit.data")
        names = t.frames_of(t.folded(out))
        vm = sorted(n for n in names if n.startswith(("lj_BC_", "lj_vm_", "lj_cont_")))
        t.check(vm != [], "--keep-vm: VM frames appear (%s)" % ", ".join(vm[:4]))
        kinds = {}
        for line in read(os.path.join(out, "profile.kinds")).splitlines():
            k, _, n = line.partition("\t")
            kinds.setdefault(n, set()).add(k)
        # lj_BC_*/lj_vm_* plumbing is "vm"; frameless helpers (lj_vm_floor...)
        # lj_merge keeps as C frames: ljperf colours both as VM / runtime
        t.check(all(kinds.get(n, set()) <= {"vm", "c"} for n in vm) and
                any("vm" in kinds.get(n, ()) for n in vm),
                "--keep-vm: kinds say vm (%s)" % {n: sorted(kinds.get(n, ())) for n in vm[:4]})
        t.check(vm[0] in read(os.path.join(out, "flamegraph.html")), "--keep-vm: in the page")

        r = s.ljperf(["report", out, "--lines"])
        names = t.frames_of(t.folded(out))
        lined = [n for n in names if n.startswith("fib_lua@") and n.count(":") == 2]
        t.check(r.returncode == 0 and lined, "--lines: Lua frames carry their line (%s)"
                % (lined[:1] or "none"))

        # the directory moved elsewhere renders too (everything is inside)
        moved = s.path("moved")
        shutil.copytree(out, moved, symlinks=True)
        shutil.rmtree(out)
        r = s.ljperf(["report", moved])
        t.check(r.returncode == 0 and
                t.has_frame(t.frames_of(t.folded(moved)), "fib_lua"),
                "a moved directory renders (Lua frames named)")
        t.check(not os.path.exists(os.path.join(s.home, ".debug")), "nothing written to ~/.debug")


if __name__ == "__main__":
    t.main(test)
