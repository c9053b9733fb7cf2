"""Units of ljperf's seams (plain unittest; no perf, no build, no browser):
folded and kinds loading and the renderer's tree (ljperf.render), the
argument checks of `ljperf record` (ljperf.cli, ljperf.attach), the perf
and lj_merge command lines (ljperf.perfcmd, ljperf.finish), the off-CPU
weighing (lj_merge --off-cpu) and the blocked time without a Lua frame
(ljperf.offcpu_pages), the register contract on aarch64 (ljperf.vmregs).

  test_units.py [-v] [GROUP...]   GROUP: FoldedLoading TreeBuilding
                                  ArgumentChecks PerfCommands OffCpuWeighing
                                  OffCpuWithoutLua Arm64

Needs PYTHONPATH=<source root> (CTest sets it).
"""

import argparse
import glob
import os
import shutil
import tempfile
import unittest

import contextlib
import io
from unittest import mock

from ljperf import (attach, cli, finish, folded, frames, merge_cli, offcpu_pages, perfcmd,
                    perfscript, render, vmregs)
from ljperf.messages import Fail

NO_PERF = "/nonexistent/perf"     # perfcmd.no_bpf_event(NO_PERF) is ()


class TmpDir(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ljperf-units-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path


class FoldedLoading(TmpDir):
    def test_stacks_and_weights(self):
        path = self.write("p.folded", "app;main;f@a.lua:1 3\n"
                                      "app;main 2.5\n"
                                      "other;x 4\n")
        self.assertEqual(folded.load_folded(path),
                         [(["app", "main", "f@a.lua:1"], 3), (["app", "main"], 2.5),
                          (["other", "x"], 4)])

    def test_malformed_lines_skipped(self):
        path = self.write("p.folded", "no weight\n"
                                      "app;f NaNx\n"
                                      " 5\n"
                                      "app;zero 0\n"
                                      "app;negative -2\n"
                                      "\n"
                                      "app;ok 1\n")
        self.assertEqual(folded.load_folded(path), [(["app", "ok"], 1)])

    def test_names_with_spaces(self):
        # the weight is after the last space; frame names may hold spaces
        path = self.write("p.folded", "app;operator new(unsigned long);f (inlined) 7\n")
        self.assertEqual(folded.load_folded(path),
                         [(["app", "operator new(unsigned long)", "f (inlined)"], 7)])

    def test_kinds(self):
        path = self.write("p.kinds", "lua\tf@a.lua:1\n"
                                     "c\tmain\n"
                                     "builtin\tselect\n"
                                     "c\tselect\n"
                                     "no tab here\n"
                                     "c\tname with\ttab\n")
        self.assertEqual(folded.load_kinds(path),
                         {"f@a.lua:1": {"lua"}, "main": {"c"}, "select": {"builtin", "c"},
                          "name with\ttab": {"c"}})

    def test_kinds_missing_file(self):
        self.assertEqual(folded.load_kinds(os.path.join(self.dir, "none")), {})


class TreeBuilding(unittest.TestCase):
    STACKS = [(["app", "main", "f@a.lua:1"], 3), (["app", "main"], 2),
              (["app", "lj_gc_step"], 1), (["other", "main"], 4)]
    KINDS = {"main": {"c"}, "f@a.lua:1": {"lua"}}

    def children(self, node):
        return {c["n"]: c for c in node.get("c", ())}

    def test_totals_and_roots(self):
        tree, _ = render.build_tree(self.STACKS, self.KINDS)
        self.assertEqual((tree["n"], tree["v"], tree["k"]), ("all", 10, "root"))
        top = self.children(tree)
        self.assertEqual({n: (c["v"], c["k"]) for n, c in top.items()},
                         {"app": (6, "root"), "other": (4, "root")})

    def test_values_include_children(self):
        tree, _ = render.build_tree(self.STACKS, self.KINDS)
        main = self.children(self.children(tree)["app"])["main"]
        self.assertEqual((main["v"], main["k"]), (5, "c"))
        f = self.children(main)["f@a.lua:1"]
        self.assertEqual((f["v"], f["k"]), (3, "lua"))
        self.assertNotIn("c", f, "a leaf has no children list")

    def test_same_name_under_other_parents(self):
        tree, _ = render.build_tree(self.STACKS, self.KINDS)
        other_main = self.children(self.children(tree)["other"])["main"]
        self.assertEqual(other_main["v"], 4)

    def test_self_weight_by_kind(self):
        # no kind recorded for lj_gc_step: read from lj_merge's naming (vm)
        _, self_by_kind = render.build_tree(self.STACKS, self.KINDS)
        self.assertEqual(self_by_kind, {"lua": 3, "c": 6, "vm": 1})

    def test_root_frame_is_root_whatever_its_kind(self):
        tree, _ = render.build_tree([(["main"], 1)], {"main": {"c"}})
        self.assertEqual(tree["c"][0]["k"], "root")

    def test_empty(self):
        self.assertEqual(render.build_tree([], {}), ({"n": "all", "v": 0, "k": "root"}, {}))

    def test_deep_stack(self):
        # built without recursion: a stack deeper than Python's limit
        depth = 5000
        tree, _ = render.build_tree([(["app"] + ["f%d" % i for i in range(depth)], 2)], {})
        n = 0
        while "c" in tree:
            tree = tree["c"][0]
            n += 1
        self.assertEqual((n, tree["v"]), (depth + 1, 2))


class ArgumentChecks(unittest.TestCase):
    def parse(self, *argv):
        return cli.make_parser().parse_args(list(argv))

    def fails(self, *argv, text=None):
        with self.assertRaises(Fail) as cm:
            cli.record_args(self.parse(*argv))
        self.assertEqual(cm.exception.code, 2)
        if text:
            self.assertIn(text, str(cm.exception))

    def test_command(self):
        self.assertEqual(cli.record_args(self.parse("record", "--", "prog", "-x")),
                         ["prog", "-x"])
        self.assertEqual(cli.record_args(self.parse("record", "-o", "d", "prog")), ["prog"])

    def test_attach(self):
        opts = self.parse("record", "-p", "12,34", "--duration", "1.5")
        self.assertEqual((cli.record_args(opts), opts.attach, opts.duration),
                         ([], [12, 34], 1.5))
        self.assertEqual(cli.record_args(self.parse("record", "--nginx", "7")), [])

    def test_nothing_or_both(self):
        self.fails("record", text="nothing to record")
        self.fails("record", "--", text="nothing to record")
        self.fails("record", "-p", "1", "--", "prog", text="not both")
        self.fails("record", "--nginx", "1", "prog", text="not both")

    def test_numbers(self):
        self.fails("record", "-F", "0", "--", "prog", text="-F")
        self.fails("record", "-F", "-5", "--", "prog", text="-F")
        self.fails("record", "--duration", "0", "--", "prog", text="--duration")

    def test_parser_errors(self):
        for argv, text in ((("record", "-p", "x,y"), "not a pid list"),
                           (("record", "-p", ","), "no pid given"),
                           (("record", "--format", "speedscope,svg", "--", "p"),
                            "unknown format"),
                           (("record", "-F", "many", "--", "p"), "invalid int"),
                           (("diff", "only-one"), "required")):
            with self.assertRaises(Fail) as cm:
                self.parse(*argv)
            self.assertEqual((cm.exception.code, cm.exception.raw), (2, True), argv)
            self.assertIn(text, str(cm.exception), argv)

    def test_formats(self):
        self.assertEqual(self.parse("report", "d", "--format", "speedscope").format,
                         ["speedscope"])
        self.assertEqual(self.parse("report", "d").format, [])

    def test_p_and_nginx(self):
        opts = argparse.Namespace(attach=[1], nginx=2)
        with self.assertRaises(Fail) as cm:
            attach.attach_pids(opts)
        self.assertEqual(cm.exception.code, 2)
        self.assertEqual(attach.attach_pids(argparse.Namespace(attach=[3, 4], nginx=None)),
                         [3, 4])


class PerfCommands(unittest.TestCase):
    def test_prefix(self):
        self.assertEqual(perfcmd.perf_argv("perf", "/o", "script", "-i", "/o/perf.data"),
                         ["perf", "--buildid-dir", "/o/.debug", "script", "-i", "/o/perf.data"])

    def test_record(self):
        self.assertEqual(perfcmd.no_bpf_event(NO_PERF), ())
        self.assertEqual(
            perfcmd.record_argv(NO_PERF, "/o", "/o/perf.data", "cycles:u", 999),
            [NO_PERF, "--buildid-dir", "/o/.debug", "record", "-q", "-e", "cycles:u",
             "-k", "mono", "-g", "--call-graph", "fp", "--user-regs=r13", "-F", "999",
             "-o", "/o/perf.data"])

    def test_record_burst_buffer(self):
        # --mem and --off-cpu get a larger ring buffer where perf may lock it
        real = perfcmd.may_lock_memory
        try:
            for may in (True, False):
                perfcmd.may_lock_memory = lambda: may
                for kw in ({"mem": True}, {"off_cpu": True}, {}):
                    argv = perfcmd.record_argv(NO_PERF, "/o", "/o/perf.data", "cycles:u", 99, **kw)
                    want = may and bool(kw)
                    self.assertEqual("-m" in argv, want, (may, kw, argv))
                    if want:
                        self.assertEqual(argv[argv.index("-m") + 1],
                                         str(perfcmd.BURST_MMAP_PAGES))
        finally:
            perfcmd.may_lock_memory = real

    def test_lost_chunks(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "perf-script.log")
            with open(log, "w") as f:
                f.write("Warning:\nProcessed 21385 events and lost 3 chunks!\n\n"
                        "Check IO/CPU overload!\n\n")
            self.assertEqual(finish.lost_chunks(log), 3)
            with open(log, "w") as f:
                f.write("")
            self.assertEqual(finish.lost_chunks(log), 0)
            self.assertEqual(finish.lost_chunks(os.path.join(d, "missing.log")), 0)

    def test_event_name_without_perf(self):
        self.assertIsNone(perfcmd.event_name(NO_PERF, "/o", "/o/perf.data"))

    def test_one_prefix_builder(self):
        # every perf command line of the package starts with perf_argv()
        pkg = os.path.dirname(os.path.abspath(perfcmd.__file__))
        users = []
        for path in sorted(glob.glob(os.path.join(pkg, "*.py"))):
            with open(path, encoding="utf-8") as f:
                if '"--buildid-dir"' in f.read():
                    users.append(os.path.basename(path))
        self.assertEqual(users, ["perfcmd.py"])

    def test_lj_merge_folded(self):
        opts = argparse.Namespace(lines=True, keep_vm=False, per_process=True,
                                  per_thread=False)
        argv, out = finish.merge_argv("/o", opts, "folded")
        self.assertEqual(out, "/o/profile.folded")
        self.assertEqual(argv[2:], ["--jit-tag", "--jitdump", "/o",
                                    "--kinds", "/o/profile.kinds",
                                    "--pprof", "/o/profile.pb.gz", "-o", out,
                                    "--lines", "--pid"])

    def test_lj_merge_other_format(self):
        opts = argparse.Namespace(lines=False, keep_vm=True, per_process=False,
                                  per_thread=True)
        argv, out = finish.merge_argv("/o", opts, "speedscope")
        self.assertEqual(out, "/o/profile.speedscope.json")
        self.assertEqual(argv[2:], ["--jit-tag", "--jitdump", "/o", "--format", "speedscope",
                                    "-o", out, "--keep-vm", "--tid"])


# perf script --ns --show-switch-events text (hand-written, in the shape of
# perf 6.1's): a blocked, a preempted and an idle switch of tid 100, CPU
# samples, an IN without its OUT (a wait begun before recording) and a
# thread still switched out at the end.
SWITCHES = """\
prog   100/100   10.000000100:          1 context-switches/period=1/: \n\
\tffffffff821fb643 schedule+0x23 ([kernel.kallsyms])
\t           cf503 clock_nanosleep@GLIBC_2.2.5+0x23 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            88a3 main+0x53 (/bin/prog)

prog   100/100   10.000000200: PERF_RECORD_SWITCH OUT        \n\
prog   101/101   10.100000000: PERF_RECORD_SWITCH IN         \n\
prog   100/100   10.500000200: PERF_RECORD_SWITCH IN         \n\
prog   100/100   10.600000000:    1000000 cpu-clock: \n\
\t            88a3 main+0x53 (/bin/prog)

prog   100/100   11.000000000:          1 context-switches/period=1/: \n\
\tffffffff821fb643 schedule+0x23 ([kernel.kallsyms])
\tffffffff81000e06 asm_sysvec_apic_timer_interrupt+0x16 ([kernel.kallsyms])
\t            88a3 main+0x53 (/bin/prog)

prog   100/100   11.000000000: PERF_RECORD_SWITCH OUT preempt
prog   100/100   11.250000000: PERF_RECORD_SWITCH IN         \n\
prog   100/100   12.000000000:          1 context-switches/period=1/: \n\
\tffffffff821fb643 schedule+0x23 ([kernel.kallsyms])
\t           12345 epoll_wait+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            88a3 main+0x53 (/bin/prog)

prog   100/100   12.000000000: PERF_RECORD_SWITCH OUT        \n\
prog   100/100   13.000000000: PERF_RECORD_SWITCH IN         \n\
prog   102/102   13.100000000:          1 context-switches/period=1/: \n\
\t            88a3 main+0x53 (/bin/prog)

prog   102/102   13.100000100: PERF_RECORD_SWITCH OUT        \n\
"""


class OffCpuWeighing(TmpDir):
    def test_switch_records(self):
        ev = perfscript.parse_event
        self.assertEqual(ev("prog 100/101 10.000000200: PERF_RECORD_SWITCH OUT preempt")[:4],
                         ("switch-preempt", "10.000000200", 100, 101))
        self.assertEqual(ev("prog 100/101 1.5: PERF_RECORD_SWITCH IN   ")[0], "switch-in")
        self.assertEqual(ev("prog 100/101 1.5: PERF_RECORD_SWITCH_CPU_WIDE OUT  "
                            "next pid/tid:     7/7    ")[:4],
                         ("switch-out", "1.5", 100, 101))

    def test_weights(self):
        src = self.write("in.txt", SWITCHES)
        out, wall = os.path.join(self.dir, "off.folded"), os.path.join(self.dir, "w.folded")
        self.assertEqual(merge_cli.main([src, "--off-cpu", "--wall", wall, "-o", out]), 0)
        with open(out) as f:
            got = f.read()
        self.assertEqual(got, "".join(sorted((
            "prog;main;clock_nanosleep@GLIBC_2.2.5;schedule;[blocked] 500000000\n",
            "prog;main;asm_sysvec_apic_timer_interrupt;schedule;[preempted] 250000000\n",
            "prog;main;epoll_wait;schedule;[idle] 1000000000\n"))))
        with open(wall) as f:
            self.assertEqual(f.read(), got.replace("prog;main;asm", "prog;main 1000000\nprog;main;asm"))


class OffCpuWithoutLua(TmpDir):
    """offcpu_pages: the [blocked] time of threads that run Lua with no Lua
    frame, and the one line ljperf says of it."""
    KINDS = "lua\tf@a.lua:1\ntrace\tg@a.lua:5_[j]\nc\tmain\nc\tread\nkernel\t[blocked]\n"

    def pages(self, off, cpu=""):
        self.write("offcpu.kinds", self.KINDS)
        self.write("profile.kinds", self.KINDS)
        self.write("profile.folded", cpu)
        stacks = folded.load_folded(self.write("offcpu.folded", off))
        kinds = folded.load_kinds(os.path.join(self.dir, "offcpu.kinds"))
        return offcpu_pages.without_lua(self.dir, stacks, kinds)

    def said(self, ns, of):
        pages = {"offcpu.folded": (None, dict.fromkeys(offcpu_pages.by_label([]), 0), 0),
                 "without_lua": (ns, of)}
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            offcpu_pages.say_result(self.dir, pages)
        return [ln for ln in err.getvalue().splitlines() if "no Lua frame" in ln]

    def test_counted(self):
        got = self.pages("t1;main;f@a.lua:1;read;[blocked] 60\n"
                         "t1;main;g@a.lua:5_[j];read;[blocked] 20\n"
                         "t1;read;[blocked] 15\n"          # cut: counted
                         "t1;read;[preempted] 7\n"         # not [blocked]
                         "t1;main;read;[idle] 9\n"         # not [blocked]
                         "sh;read;[blocked] 100\n"         # a thread without Lua
                         "t2;read;[blocked] 5\n",          # Lua only in its CPU profile
                         "t2;main;f@a.lua:1 3\n")
        self.assertEqual(got, (20, 100))

    def test_said_from_a_tenth(self):
        self.assertEqual(len(self.said(10, 100)), 1)
        self.assertIn("os.execute", self.said(10, 100)[0])
        self.assertEqual(self.said(9, 100), [])
        self.assertEqual(self.said(0, 0), [])


class Arm64(unittest.TestCase):
    """The register contract per architecture (ljperf.vmregs): perf's command
    line and what ljperf record refuses on aarch64; the PC read from perf
    script's register line in every architecture's names."""
    AARCH64 = ("aarch64", vmregs.ARCHES["aarch64"])

    def refused(self, host, *argv):
        opts = cli.make_parser().parse_args(list(argv))
        with self.assertRaises(Fail) as cm:
            cli.check_arch(opts, host)
        self.assertEqual(cm.exception.code, 2)
        self.assertNotIn("\n", str(cm.exception))
        return str(cm.exception)

    def test_pc_register_recorded(self):
        argv = perfcmd.record_argv(NO_PERF, "/o", "/o/perf.data", "cycles:u", 999,
                                   arch=vmregs.ARCHES["aarch64"])
        self.assertIn("--user-regs=x21", argv)
        self.assertNotIn("--user-regs=r13", argv)

    def test_what_aarch64_refuses(self):
        self.assertIn("x86-64 only", self.refused(self.AARCH64, "record", "-p", "12"))
        self.assertIn("x86-64 only", self.refused(self.AARCH64, "record", "--nginx", "7"))
        self.assertIn("--mem", self.refused(self.AARCH64, "record", "--mem", "--", "prog"))
        self.assertIn("riscv64", self.refused(("riscv64", None), "record", "--", "prog"))
        for argv in (("record", "--", "prog"), ("record", "--off-cpu", "--", "prog")):
            cli.check_arch(cli.make_parser().parse_args(list(argv)), self.AARCH64)
        x86 = ("x86_64", vmregs.ARCHES["x86_64"])
        for argv in (("record", "-p", "12"), ("record", "--mem", "--", "prog")):
            cli.check_arch(cli.make_parser().parse_args(list(argv)), x86)

    def test_refused_before_perf_runs(self):
        # the whole command on an aarch64 host: refused by the arch check,
        # before perf is looked for (PATH holds none)
        host = mock.Mock(return_value=mock.Mock(machine="aarch64"))
        with mock.patch("os.uname", host), \
                mock.patch.dict(os.environ, {"PATH": "/nonexistent"}):
            with self.assertRaises(Fail) as cm:
                cli.main(["record", "-p", "1"])
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("-p/--nginx", str(cm.exception))
        self.assertTrue(host.called)

    def test_pc_read_in_each_architectures_names(self):
        # perf script's register line (" ABI:%d " then "%5s:0x%x " per
        # register), with the names of the architecture that recorded
        for line, pc in ((" ABI:2    R13:0x7f0010 ", 0x7f0010),
                         (" ABI:2   x21:0xffff8a20 ", 0xffff8a20),
                         (" ABI:2    BX:0x55aa ", 0x55aa),
                         (" ABI:2    AX:0x1    BX:0x2    R13:0x3 ", 0x3),
                         (" ABI:2   x20:0x5   x22:0x6 ", None),
                         (" ABI:2   x121:0x5 ", None)):
            self.assertEqual(frames.interp_pc(line), pc, line)


if __name__ == "__main__":
    unittest.main()
