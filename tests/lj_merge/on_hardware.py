#!/usr/bin/env python3
"""tests/arm64/on-hardware, where it can run here (x86-64; perf cannot
sample under qemu, so its arm64 run is a user's on real hardware):

  on_hardware.py units    its checks on hand-written folded stacks (arm64
                          host frames below main pass; out of order, no
                          main, an unnamed trace fail); its refusal to build
                          on x86-64 (one line, exit 1); bad arguments (one
                          line, exit 2); --dry-run prints the arm64 commands
                          (--user-regs=x21, leaf frame records) and runs
                          nothing
  on_hardware.py record   the whole script on this machine's build
                          (--build: real perf record of the demo, perf
                          inject, lj_merge, its checks): every check PASS

Environment: LJPERF_BUILD (the build, default build/). Temporary files
are removed; a perf that cannot record fails the test."""

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.lib import ljptest as T

SCRIPT = os.path.join(T.ROOT, "tests", "arm64", "on-hardware")


def load_script():
    """The script as a module (its file has no .py)."""
    loader = importlib.machinery.SourceFileLoader("on_hardware", SCRIPT)
    spec = importlib.util.spec_from_loader("on_hardware", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


oh = load_script()
ARM64_HOST = "fibdemo;_start;__libc_start_main;[unknown];main;lua_pcall;demo.lua:0;run@demo.lua:40"
X86_HOST = "fibdemo;__libc_start_call_main;main;lua_pcall;demo.lua:0;run@demo.lua:40"


def stacks(host, *tails):
    return {host + ";" + t: w for t, w in tails}


class Units(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True,
                              text=True, timeout=120)

    def test_host_frames_below_main(self):
        # fib_lua tail-calls lua_work, fib_c c_work (e2e_demo's NEST)
        good = stacks(ARM64_HOST, ("fib_lua@demo.lua:28;fib_c;lua_work@demo.lua:20_[j]", 40),
                      ("fib_lua@demo.lua:28;fib_c;fib_lua@demo.lua:28;fib_c;"
                       "fib_lua@demo.lua:28;c_work", 60))
        problems, split = oh.e2e_demo.check(good, 40.0, "arm64", below_main=None)
        self.assertEqual((problems, split), ([], 40.0))
        # the x86-64 check holds glibc's frames to __libc_start_call_main alone
        problems, _ = oh.e2e_demo.check(good, 40.0, "arm64")
        self.assertTrue(any("host frames" in p for p in problems), problems)
        problems, _ = oh.e2e_demo.check(
            stacks(X86_HOST, *[(t.replace(ARM64_HOST + ";", ""), w) for t, w in good.items()]),
            40.0, "x86")
        self.assertEqual(problems, [])

    def test_out_of_order_fails(self):
        bad = stacks(ARM64_HOST, ("fib_c;fib_lua@demo.lua:28;fib_lua@demo.lua:28;"
                                  "fib_lua@demo.lua:28;lua_work@demo.lua:20_[j]", 10))
        problems, _ = oh.e2e_demo.check(bad, 100.0, "arm64", below_main=None)
        self.assertTrue(any("nesting" in p for p in problems), problems)
        nomain = {"fibdemo;_start;lua_pcall;demo.lua:0;run@demo.lua:40;fib_lua@demo.lua:28;"
                  "lua_work@demo.lua:20_[j]": 5}
        problems, _ = oh.e2e_demo.check(nomain, 100.0, "arm64", below_main=None)
        self.assertTrue(any("host frames" in p for p in problems), problems)
        self.assertEqual(oh.share(nomain, lambda fr: "main" in fr), 0.0)

    def test_traces_named(self):
        tagged = {"p;main;fib_lua@demo.lua:28;lua_work@demo.lua:20_[j]": 3,
                  "p;main;fib_lua@demo.lua:28;lua_work@demo.lua:20": 1,
                  "p;main;fib_lua@demo.lua:28;[unknown]": 1}
        self.assertEqual(oh.traces_named(tagged), (0.75, 0.2))
        self.assertEqual(oh.traces_named({"p;main;lua_work@demo.lua:20": 1}), (0.0, 0.0))

    def test_refuses_to_build_here(self):
        r = self.run_script("--work", tempfile.gettempdir() + "/oh-never-made")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("run this on an arm64 Linux host", r.stderr)
        self.assertFalse(os.path.exists(tempfile.gettempdir() + "/oh-never-made"))

    def test_dry_run(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_script("--dry-run", "--work", d + "/w")
            self.assertEqual((r.returncode, os.listdir(d)), (0, []), r.stderr)
        lines = r.stdout.splitlines()
        rec = [ln for ln in lines if " record " in ln]
        self.assertEqual(len(rec), 1, lines)
        for flag in ("--user-regs=x21", "-k mono", "--call-graph fp", "LUAJIT_PERF=1"):
            self.assertIn(flag, rec[0])
        self.assertIn("-mno-omit-leaf-frame-pointer", " ".join(lines))
        self.assertTrue(any(" inject --jit " in ln for ln in lines))
        self.assertTrue(any("lj_merge.py" in ln for ln in lines))

    def test_bad_arguments(self):
        for args in (("--seconds", "0"), ("--jobs", "x"), ("--bogus",)):
            r = self.run_script(*args)
            self.assertEqual((r.returncode, r.stdout, r.stderr.count("\n")), (2, "", 1),
                             (args, r.stderr))

    def test_help(self):
        r = self.run_script("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--user-regs=x21", r.stdout)


def record():
    T.need_perf()
    work = tempfile.mkdtemp(prefix="ljp-on-hardware-")
    try:
        r = subprocess.run([sys.executable, SCRIPT, "--build", T.build_dir(), "--work", work,
                            "--seconds", "2"], capture_output=True, text=True, timeout=300)
        print(r.stdout + r.stderr)
        ok = T.report(r.returncode == 0 and "FAIL" not in r.stdout and
                      r.stdout.count("PASS  ") == 4,
                      "on-hardware --build on this machine: every check passes")
        maps = [n for n in os.listdir("/tmp") if n.startswith("perf-")
                and os.path.exists(os.path.join(work, "rec", "jit-%s.dump" % n[5:-4]))]
        return T.report(not maps, "the demo's /tmp/perf-PID.map removed") and ok
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["units"]:
        sys.exit(unittest.main(argv=[sys.argv[0], "-v", "Units"]))
    if sys.argv[1:] == ["record"]:
        T.main(record)
    sys.stderr.write("usage: on_hardware.py units|record\n")
    sys.exit(2)
