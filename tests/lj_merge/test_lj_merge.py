#!/usr/bin/env python3
"""Unit, robustness and jitdump-fallback tests for perf-script/lj_merge.py.

Run: python3 tests/lj_merge/test_lj_merge.py [-v] [TestClass[.test]]
The lj_merge under test is $LJ_MERGE (e.g. build/bin/lj_merge) or
perf-script/lj_merge.py. Synthetic inputs are perf script text written in
perf 6.1's format (see fixtures/ for real captures) and jitdump files built
byte by byte here with struct (independent of ljperf/jitdump.py).
Expected stacks are written by hand from what each input describes."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True                  # no __pycache__ in the source tree
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"     # nor from the lj_merge children

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
PERF_SCRIPT = os.path.normpath(os.path.join(HERE, "..", "..", "perf-script"))
LJ_MERGE = os.environ.get("LJ_MERGE", os.path.join(PERF_SCRIPT, "lj_merge.py"))

from ljperf import perfscript
from ljperf import frames as ljframes


def run(args, stdin=None, timeout=120):
    """Runs lj_merge; returns (exit status, stdout, stderr) as text."""
    p = subprocess.run([sys.executable, LJ_MERGE] + list(args),
                       input=stdin if stdin is None or isinstance(stdin, bytes)
                       else stdin.encode(), capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def folded(text):
    """{stack: count} of folded output."""
    out = {}
    for ln in text.splitlines():
        s, _, n = ln.rpartition(" ")
        out[s] = out.get(s, 0) + int(n)
    return out


# ---------------------------------------------------------------- perf text
def header(comm, pid, tid, t_us, period=None, event="cpu-clock:pppH"):
    """A header as `perf script -F comm,pid,tid,time,period,event,...` prints it."""
    h = "%s %7d/%-7d %5d.%06d: " % (comm, pid, tid, t_us // 1000000, t_us % 1000000)
    if period is not None:
        h += "%10d " % period
    if event:
        h += "%s: " % event
    return h


def chain_line(addr, sym=None, off=None, dso=None):
    s = "\t%16x" % addr
    s += " " + (sym if sym else "[unknown]")
    if sym and off is not None:
        s += "+0x%x" % off
    s += " (%s)" % (dso if dso else "[unknown]")
    return s


def sample(comm, pid, tid, t_us, frames, period=None, bx=None, event="cpu-clock:pppH"):
    """One sample; FRAMES are (addr, sym, off, dso) leaf first. With BX a
    register line ends it (no blank line, as with -F uregs)."""
    lines = [header(comm, pid, tid, t_us, period, event)]
    lines += [chain_line(*f) for f in frames]
    if bx is not None:
        lines.append(" ABI:2    BX:0x%x " % bx)
    else:
        lines.append("")
    return "\n".join(lines) + "\n"


EXE = "/usr/bin/luajit"
HOST = [(0x1b4b, "lua_pcall", 9, EXE), (0x1c83, "main", 0x11f, EXE),
        (0x2724a, "__libc_start_call_main", 0x7a, "/usr/lib/x86_64-linux-gnu/libc.so.6")]
HOST_STACK = "__libc_start_call_main;main;lua_pcall"


# ---------------------------------------------------------------- jitdump bytes
class Dump:
    """Builds a jitdump file (perf's format, little endian) record by record."""

    def __init__(self, pid, ts=1):
        self.pid = pid
        self.buf = struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40, 62, 0, pid, ts, 0)
        self.index = 0

    def load(self, ts, addr, size, name, lines=None, tid=None, fname="app.lua"):
        """CODE_LOAD (after its DEBUG_INFO when LINES = [(addr, line)])."""
        if lines:
            ents = b""
            for a, ln in list(lines) + [(addr + size, lines[-1][1])]:
                ents += struct.pack("<QII", a, ln, 0) + fname.encode() + b"\0"
            body = struct.pack("<QQ", addr, len(lines) + 1) + ents
            self.buf += struct.pack("<IIQ", 2, 16 + len(body), ts) + body
        code = bytes((self.index * 7 + i) & 0xff for i in range(size))
        body = struct.pack("<IIQQQQ", self.pid, tid or self.pid, addr, addr, size,
                           self.index) + name.encode() + b"\0" + code
        self.buf += struct.pack("<IIQ", 0, 16 + len(body), ts) + body
        self.index += 1
        return self

    def write(self, d):
        path = os.path.join(d, "jit-%d.dump" % self.pid)
        with open(path, "wb") as f:
            f.write(self.buf)
        return path


class TmpDir(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lj_merge_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name, data=None):
        p = os.path.join(self.tmp, name)
        if data is not None:
            with open(p, "wb" if isinstance(data, bytes) else "w") as f:
                f.write(data)
        return p

    def merge(self, text, *args, rc=0):
        """Runs lj_merge on TEXT with --jitdump TMP; returns {stack: count}."""
        inp = self.path("in.txt", text)
        code, out, err = run(["--jitdump", self.tmp] + list(args) + [inp])
        self.assertEqual(code, rc, err)
        self.assertNotIn("Traceback", err)
        self.last_err = err
        return folded(out)


# ================================================================= parsing
def read(lines):
    """The Samples perfscript.Reader finds in LINES."""
    import io
    data = ("\n".join(lines) + "\n").encode()
    return [x for x in perfscript.Reader(io.BytesIO(data)) if type(x) is perfscript.Sample]


class Parsing(unittest.TestCase):
    def test_default_header(self):
        h = perfscript.parse_header("cstack  6251   832.171767:    5025125 cpu-clock:pppH: ")
        self.assertEqual((h.comm, h.pid, h.tid, h.time, h.period, h.event),
                         ("cstack", None, 6251, "832.171767", 5025125, "cpu-clock:pppH"))

    def test_fields_header(self):
        h = perfscript.parse_header("cstack  6251/6254    832.177065:    5025125 ")
        self.assertEqual((h.comm, h.pid, h.tid, h.time, h.period, h.event),
                         ("cstack", 6251, 6254, "832.177065", 5025125, None))

    def test_comm_with_spaces_and_digits(self):
        h = perfscript.parse_header("Web Content 2 1234/1240 [003] 10.000001: 1 cycles:u: ")
        self.assertEqual((h.comm, h.pid, h.tid, h.period, h.event),
                         ("Web Content 2", 1234, 1240, 1, "cycles:u"))
        # the next header of the same layout, read by position
        two = read([
            "Web Content 2 1234/1240 [003] 10.000001: 1 cycles:u: ", "\t10 f (/x)", "",
            "Web Content 3 1234/1241 [001] 10.000002: 7 cycles:u: ", "\t10 f (/x)", ""])
        self.assertEqual(two[1][:6], ("Web Content 3", 1234, 1241, "10.000002", 7, "cycles:u"))

    def test_no_time_no_period(self):
        h = perfscript.parse_header("cs worker 26046 ")
        self.assertEqual((h.comm, h.tid, h.time, h.period), ("cs worker", 26046, None, None))

    def test_no_comm(self):
        h = perfscript.parse_header("    6251/6251    832.171767: ")
        self.assertEqual((h.comm, h.pid, h.tid, h.time), (None, 6251, 6251, "832.171767"))

    def test_inline_ip_without_callchain(self):
        h = perfscript.parse_header("x 5 1.000001: 10 cycles: 1234 foo+0x1 (/bin/x)")
        self.assertEqual(h.rest, ["1234", "foo+0x1", "(/bin/x)"])

    def test_not_headers(self):
        for s in ("", "   ", "hello", "\x00\x01garbage"):
            h = perfscript.parse_header(s)
            self.assertTrue(h is None or (h.pid is None and h.tid is None), s)

    def test_layout_rejects_other_shapes(self):
        got = read([
            "a 1/2 3.000004: 5 cpu-clock: ", "\t10 f (/x)", "",
            "a 1/2 3.000005: 5 cpu-clock: 12 f (/x)", "",
            "a x/2 3.1: 5 e:", "\t10 f (/x)", ""])
        self.assertEqual(len(got), 3)
        self.assertEqual((got[1].comm, got[1].inline), ("a", "12 f (/x)"))
        self.assertEqual((got[2].comm, got[2].pid, got[2].tid), ("a x/2", None, None))

    def test_blocks_fold(self):
        """Past the first block, samples of the usual kind are folded by
        their text: each of fakevm-raw.txt's 33 samples repeated 60 times
        in place (several blocks) comes as at most 33 distinct samples per
        block, their counts adding up to the headers."""
        import io
        with open(os.path.join(FIX, "fakevm-raw.txt"), "rb") as f:
            parts = f.read().split(b"\n\n")
        data = b"\n\n".join(p for p in parts for _ in range(60))
        headers = sum(1 for ln in data.split(b"\n") if ln[:1] not in (b"", b"\t", b" "))
        folded = total = 0
        for tb in perfscript.Reader(io.BytesIO(data)).tallies():
            if tb.protos is None:
                total += len(tb.samples())
                continue
            folded += 1
            self.assertLessEqual(len(tb.protos), 33)
            self.assertEqual(sum(tb.ns), len(tb.times))
            self.assertTrue(all(p[3] is None for p in tb.protos))
            total += len(tb.times)
        self.assertGreaterEqual(folded, 2)
        self.assertEqual(total, headers)

    def test_split_frame(self):
        sf = perfscript.split_frame
        self.assertEqual(sf("121e c+0x3d (/tmp/ljm/cstack)"), (0x121e, "c", 0x3d, "/tmp/ljm/cstack"))
        self.assertEqual(sf("7f00 [unknown] ([unknown])"), (0x7f00, "[unknown]", None, "[unknown]"))
        self.assertEqual(sf("121e c"), (0x121e, "c", None, None))
        self.assertEqual(sf("10 std::vector<int, a>::push(int const&)+0x1a (/bin/x y)"),
                         (0x10, "std::vector<int, a>::push(int const&)", 0x1a, "/bin/x y"))
        self.assertEqual(sf("10 operator+=+0x2 (/x)"), (0x10, "operator+=", 2, "/x"))
        self.assertEqual(sf("80 f@a.lua:3+0x4 (/tmp/jitted-5-1.so)"),
                         (0x80, "f@a.lua:3", 4, "/tmp/jitted-5-1.so"))
        self.assertIsNone(sf("zz foo"))

    def test_regs(self):
        ln = " ABI:2    BX:0x55d4b8daa4c8    DX:0x1 "
        self.assertTrue(perfscript.is_reg_line(ln))
        self.assertEqual(perfscript.parse_reg(ln, "BX"), 0x55d4b8daa4c8)
        self.assertEqual(perfscript.parse_reg(ln, "DX"), 1)
        self.assertIsNone(perfscript.parse_reg(" ABI:2 ", "BX"))

    def test_interp_pc(self):
        # R13 is the PC; recordings of older ljperf VMs had it in BX only.
        self.assertEqual(ljframes.interp_pc(" ABI:2    BX:0x11    R13:0x22 "), 0x22)
        self.assertEqual(ljframes.interp_pc(" ABI:2    BX:0x11 "), 0x11)
        self.assertIsNone(ljframes.interp_pc(" ABI:2    DX:0x11 "))

    def test_time(self):
        self.assertEqual(perfscript.time_to_ns("832.171767"), (832171767000, 1000))
        self.assertEqual(perfscript.time_to_ns("832.171767123"), (832171767123, 1))


class Naming(unittest.TestCase):
    def test_builtins(self):
        b = ljframes.builtin_name
        cases = {"lj_ff_string_byte": "string.byte", "lj_ff_math_sqrt": "math.sqrt",
                 "lj_ff_coroutine_resume": "coroutine.resume",
                 "lj_ff_coroutine_wrap_aux": "coroutine.wrap_aux",
                 "lj_ffh_string_byte": "string.byte", "lj_cf_string_rep": "string.rep",
                 "lj_ff_ipairs_aux": "ipairs_aux", "lj_ff_assert": "assert",
                 "lj_cf_print": "print", "lj_cf_io_method_write": "file:write",
                 "lj_cf_buffer_method_put": "buffer:put",
                 "lj_cf_jit_util_funcinfo": "jit.util.funcinfo", "lj_cf_ffi_new": "ffi.new"}
        for sym, want in cases.items():
            self.assertEqual(b(sym), want, sym)

    def test_classification(self):
        mk = ljframes.make_frame
        self.assertEqual(mk("12d4 lj_BC_FORL+0x0 (/usr/bin/luajit)").kind, ljframes.K_VM)
        self.assertTrue(mk("12d4 lj_BC_FORL+0x0 (/usr/bin/luajit)").interp)
        # VM code runs with BX = the bytecode PC, except where C is entered
        for s in ("lj_cont_ra", "lj_vmeta_call", "lj_fff_fallback", "lj_vm_fp_CALL"):
            fr = mk("10 %s+0x1 (/usr/bin/luajit)" % s)
            self.assertEqual(fr.kind, ljframes.K_VM, s)
            self.assertTrue(fr.interp, s)
        for s in ("lj_vm_pcall", "lj_vm_ffi_call", "lj_vm_ffi_callback"):
            fr = mk("10 %s+0x1 (/usr/bin/luajit)" % s)
            self.assertEqual(fr.kind, ljframes.K_VM, s)
            self.assertFalse(fr.interp, s)
        # arithmetic helpers are work, not plumbing (and BX may pass them)
        for s in ("lj_vm_mod", "lj_vm_modi", "lj_vm_floor_sse", "lj_vm_foldfpm.cold"):
            fr = mk("10 %s+0x1 (/usr/bin/luajit)" % s)
            self.assertEqual((fr.kind, fr.name), (ljframes.K_C, s.split(".")[0]), s)
            self.assertTrue(fr.interp, s)
        # the FFI call machinery is plumbing, BX is not the PC in it
        for s in ("lj_ccall_func", "lj_ccallback_enter"):
            fr = mk("10 %s+0x1 (/usr/bin/luajit)" % s)
            self.assertEqual(fr.kind, ljframes.K_VM, s)
            self.assertFalse(fr.interp, s)
        for s in ("lj_gc_step", "lj_tab_new", "lj_str_new"):
            fr = mk("10 %s+0x1 (/usr/lib/libluajit-5.1.so.2)" % s)
            self.assertEqual((fr.kind, fr.name), (ljframes.K_C, s))
        fr = mk("10 lj_ff_string_byte+0x1 (/usr/bin/luajit)")
        self.assertEqual((fr.kind, fr.name), (ljframes.K_BUILTIN, "string.byte"))
        fr = mk("80 fib@fib.lua:1+0x4 (/tmp/jitted-77-3.so)")
        self.assertEqual((fr.kind, fr.label, fr.pid, fr.index, fr.off),
                         (ljframes.K_LUA, "fib@fib.lua:1", 77, 3, 4))
        fr = mk("80 TRACE_3::fib.lua:5::fib@fib.lua:1+0x0 (/tmp/jitted-77-4.so)")
        self.assertEqual((fr.kind, fr.label, fr.tline), (ljframes.K_TRACE, "fib@fib.lua:1", 5))
        fr = mk("7f0000001000 [unknown] ([unknown])")
        self.assertTrue(fr.dyn)
        self.assertEqual(mk("1234 [unknown] (/usr/lib/libc.so.6)").name, "[libc.so.6]")
        self.assertEqual(mk("ffffffff81000000 [unknown] ([kernel.kallsyms])").dyn, False)
        self.assertEqual(mk("10 foo(int, char)+0x1 (/x)").name, "foo")
        self.assertEqual(mk("10 (anonymous namespace)::f(int)+0x1 (/x)").name,
                         "(anonymous namespace)::f")
        self.assertEqual(mk("10 a;b+0x1 (/x)").name, "a:b")

    def test_trace_name(self):
        self.assertEqual(ljframes.parse_trace_name("TRACE_12::x.lua:7::M.f@x.lua:3"),
                         ("M.f@x.lua:3", 7))
        self.assertEqual(ljframes.parse_trace_name("TRACE_1::x.lua:7::obj:m@x.lua:3"),
                         ("obj:m@x.lua:3", 7))
        self.assertIsNone(ljframes.parse_trace_name("fib@x.lua:3"))


# ================================================================= jitdump fallback
BC = 0x55d400001000          # a bytecode range (heap)
MC = 0x7f0000100000          # trace machine code (anonymous)


class JitdumpFallback(TmpDir):
    """[unknown] addresses resolved through a jit-PID.dump built here."""

    def lua(self, addr):
        return (addr, None, None, "[unknown]")

    def test_address_reuse_by_time(self):
        # f@a.lua:1 loaded at t=10.000100 s, its address reused by g@a.lua:9
        # at t=20.000000 s; a sample before the first load stays [unknown].
        Dump(100).load(10000100000, BC, 64, "f@a.lua:1") \
                 .load(20000000000, BC, 64, "g@a.lua:9").write(self.tmp)
        txt = (sample("lj", 100, 100, 9000000, [self.lua(BC + 8)] + HOST, 1) +
               sample("lj", 100, 100, 15000000, [self.lua(BC + 8)] + HOST, 10) +
               sample("lj", 100, 100, 19999999, [self.lua(BC + 12)] + HOST, 100) +
               sample("lj", 100, 100, 20000000, [self.lua(BC + 8)] + HOST, 1000) +
               sample("lj", 100, 100, 30000000, [self.lua(BC + 8)] + HOST, 10000))
        self.assertEqual(self.merge(txt), {
            "lj;%s;[unknown]" % HOST_STACK: 1,
            "lj;%s;f@a.lua:1" % HOST_STACK: 110,
            "lj;%s;g@a.lua:9" % HOST_STACK: 11000})

    def test_zero_return_address_ends_the_chain(self):
        # A coroutine stack (Tarantool fiber) ends in a record with return
        # address 0: perf prints it as the outermost [unknown] entry.
        txt = sample("lj", 100, 100, 1000, [(0x10, "spin", 1, "/lib/libx.so"),
                                            (0x20, "coro_init", 5, "/usr/bin/tarantool"),
                                            (0, None, None, "[unknown]")], 3)
        self.assertEqual(self.merge(txt), {"lj;coro_init;spin": 3})

    def test_vm_code_described_by_the_vm(self):
        # lj_vm_exit_stubs (trace exit stubs) is VM plumbing like lj_vm_*.
        Dump(100).load(1000, BC, 135, "lj_vm_exit_stubs").write(self.tmp)
        txt = sample("lj", 100, 100, 5000000, [self.lua(BC + 4)] + HOST, 1)
        self.assertEqual(self.merge(txt), {"lj;%s" % HOST_STACK: 1})
        self.assertEqual(self.merge(txt, "--keep-vm"),
                         {"lj;%s;lj_vm_exit_stubs" % HOST_STACK: 1})

    def test_same_microsecond_prefers_new_load(self):
        # perf prints microseconds (truncated): a load at 20.000000700 s and a
        # sample printed as 20.000000 may be after it: the new load wins.
        Dump(100).load(1000, BC, 64, "f@a.lua:1") \
                 .load(20000000700, BC, 64, "g@a.lua:9").write(self.tmp)
        txt = sample("lj", 100, 100, 20000000, [self.lua(BC)] + HOST, 1)
        self.assertEqual(self.merge(txt), {"lj;%s;g@a.lua:9" % HOST_STACK: 1})

    def test_nanosecond_time(self):
        Dump(100).load(1000, BC, 64, "f@a.lua:1") \
                 .load(20000000700, BC, 64, "g@a.lua:9").write(self.tmp)
        h1 = "lj 100/100 20.000000699: 1 cpu-clock: \n"
        h2 = "lj 100/100 20.000000700: 2 cpu-clock: \n"
        body = chain_line(BC, None) + "\n" + chain_line(*HOST[1]) + "\n\n"
        self.assertEqual(self.merge(h1 + body + h2 + body),
                         {"lj;main;f@a.lua:1": 1, "lj;main;g@a.lua:9": 2})

    def test_overlapping_ranges(self):
        # A [BC, BC+100) at t1, B [BC+50, BC+150) at t2: later wins where it covers.
        Dump(100).load(1000, BC, 100, "A@a.lua:1").load(2000, BC + 50, 100, "B@a.lua:5") \
                 .write(self.tmp)
        txt = (sample("lj", 100, 100, 5000000, [self.lua(BC + 10)] + HOST, 1) +
               sample("lj", 100, 100, 5000000, [self.lua(BC + 60)] + HOST, 2) +
               sample("lj", 100, 100, 5000000, [self.lua(BC + 140)] + HOST, 4) +
               sample("lj", 100, 100, 5000000, [self.lua(BC + 150)] + HOST, 8))
        self.assertEqual(self.merge(txt), {
            "lj;%s;A@a.lua:1" % HOST_STACK: 1, "lj;%s;B@a.lua:5" % HOST_STACK: 6,
            "lj;%s;[unknown]" % HOST_STACK: 8})

    def test_no_time_field_uses_newest_load(self):
        Dump(100).load(1000, BC, 64, "f@a.lua:1").load(2000, BC, 64, "g@a.lua:9") \
                 .write(self.tmp)
        txt = "lj 100/100 \n" + chain_line(BC + 4, None) + "\n" + chain_line(*HOST[1]) + "\n\n"
        self.assertEqual(self.merge(txt), {"lj;main;g@a.lua:9": 1})

    def test_per_process_dumps(self):
        # Same address, two processes, two dumps; plain perf script (tid only)
        # with a thread 102 of process 100 that created code (tid in the dump).
        Dump(100).load(1000, BC, 64, "f@a.lua:1").load(1500, BC + 64, 64, "t@a.lua:7", tid=102) \
                 .write(self.tmp)
        Dump(200).load(1000, BC, 64, "child@a.lua:3").write(self.tmp)

        def s(tid, addr, period):
            return ("lj %d 5.000000: %d cpu-clock: \n" % (tid, period) +
                    chain_line(addr, None) + "\n" + chain_line(*HOST[1]) + "\n\n")
        txt = s(100, BC, 1) + s(200, BC, 2) + s(102, BC + 64, 4)
        self.assertEqual(self.merge(txt), {"lj;main;f@a.lua:1": 1, "lj;main;child@a.lua:3": 2,
                                           "lj;main;t@a.lua:7": 4})
        self.assertEqual(self.merge(txt, "--pid"), {
            "lj-100;main;f@a.lua:1": 1, "lj-200;main;child@a.lua:3": 2,
            "lj-100;main;t@a.lua:7": 4})

    def test_fork_child_uses_parent_dump(self):
        # perf script --show-task-events: child 200 forked at 2 ms writes no
        # dump: it runs what the parent had loaded before the fork (f), not
        # what the parent loaded at the same address later (g). Child 300
        # execs at 5 ms: nothing inherited applies after that.
        Dump(100).load(1000000, BC, 64, "f@a.lua:1").load(3000000, BC, 64, "g@a.lua:9") \
                 .write(self.tmp)
        fork = ("lj 100/100     0.002000: PERF_RECORD_FORK(200:200):(100:100)\n"
                "lj 100/100     0.002500: PERF_RECORD_FORK(300:300):(100:100)\n")
        execl = "lj 300/300     0.005000: PERF_RECORD_COMM exec: other:300/300\n"
        lua = self.lua(BC)
        txt = (sample("lj", 200, 200, 4000, [lua] + HOST, 1) +
               sample("lj", 100, 100, 4000, [lua] + HOST, 2) +
               sample("lj", 300, 300, 4000, [lua] + HOST, 4) +
               sample("lj", 300, 300, 6000, [lua] + HOST, 8))
        want = {"lj-200;%s;f@a.lua:1" % HOST_STACK: 1, "lj-100;%s;g@a.lua:9" % HOST_STACK: 2,
                "lj-300;%s;f@a.lua:1" % HOST_STACK: 4,
                "lj-300;%s;[unknown]" % HOST_STACK: 8}
        parts = txt.split("\n")
        i = parts.index(next(p for p in parts if "6.000000" in p or " 0.006000:" in p))
        with_events = fork + "\n".join(parts[:i]) + "\n" + execl + "\n".join(parts[i:])
        self.assertEqual(self.merge(with_events, "--pid"), want)
        self.assertNotIn("warning", self.last_err)
        # without the events: the children's frames stay [unknown], with a hint
        self.assertEqual(self.merge(txt, "--pid"), {
            "lj-200;%s;[unknown]" % HOST_STACK: 1, "lj-100;%s;g@a.lua:9" % HOST_STACK: 2,
            "lj-300;%s;[unknown]" % HOST_STACK: 12})
        self.assertIn("no jit-PID.dump for pid 200, 300", self.last_err)
        self.assertIn("--show-task-events", self.last_err)

    def test_thread_fork_event_maps_tid(self):
        # Plain perf script prints only the tid; a thread's FORK event tells
        # its process even when the thread never wrote code (no tid in a dump).
        Dump(100).load(1000, BC, 64, "f@a.lua:1").write(self.tmp)
        txt = ("lj 100     0.001000: PERF_RECORD_FORK(100:105):(100:100)\n"
               "lj 105     5.000000: 1 cpu-clock: \n" + chain_line(BC, None) + "\n" +
               chain_line(*HOST[1]) + "\n\n")
        self.assertEqual(self.merge(txt, "--pid"), {"lj-100;main;f@a.lua:1": 1})

    def test_trace_frames(self):
        # A trace entered in f: [TRACE, f's record] -> one f frame; with
        # --jit-tag tagged; a trace owned by g over an f frame is not merged.
        Dump(100).load(1000, BC, 64, "f@a.lua:1", lines=[(BC, 1), (BC + 8, 2), (BC + 16, 3)]) \
                 .load(1100, BC + 64, 64, "g@a.lua:10") \
                 .load(1200, MC, 128, "TRACE_1::a.lua:2::f@a.lua:1",
                       lines=[(MC, 2), (MC + 64, 3)]) \
                 .load(1300, MC + 128, 64, "TRACE_2::a.lua:11::g@a.lua:10").write(self.tmp)
        txt = (sample("lj", 100, 100, 5000000, [self.lua(MC + 70), self.lua(BC + 8)] + HOST, 1) +
               sample("lj", 100, 100, 5000000, [self.lua(MC + 130), self.lua(BC + 8)] + HOST, 2))
        self.assertEqual(self.merge(txt), {
            "lj;%s;f@a.lua:1" % HOST_STACK: 1,
            "lj;%s;f@a.lua:1;g@a.lua:10" % HOST_STACK: 2})
        self.assertEqual(self.merge(txt, "--jit-tag", "--lines"), {
            "lj;%s;f@a.lua:1:3_[j]" % HOST_STACK: 1,
            "lj;%s;f@a.lua:1:2;g@a.lua:10:11_[j]" % HOST_STACK: 2})

    def test_call_thunk_drops_the_stale_call_site(self):
        # vm_patch 0007: under a C callee of trace code the record slot's
        # call site is the trace's (line 3), kept; under a call thunk it is
        # the previous call's, dropped: the slot's next (f's record, line 2)
        # remains.
        Dump(100).load(1000, BC, 64, "f@a.lua:1", lines=[(BC, 1), (BC + 8, 2), (BC + 16, 3)]) \
                 .load(1200, MC, 128, "TRACE_1::a.lua:2::f@a.lua:1",
                       lines=[(MC, 2), (MC + 64, 3)]) \
                 .load(1300, MC + 4096, 52, "lj_vm_call_thunks").write(self.tmp)
        sin = (0x1234, "__sin_fma", 4, "/usr/lib/x86_64-linux-gnu/libm.so.6")
        txt = (sample("lj", 100, 100, 5000000,
                      [sin, self.lua(MC + 70), self.lua(BC + 8)] + HOST, 1) +
               sample("lj", 100, 100, 5000000,
                      [self.lua(MC + 4100), self.lua(MC + 70), self.lua(BC + 8)] + HOST, 2))
        self.assertEqual(self.merge(txt, "--lines", "--keep-vm"), {
            "lj;%s;f@a.lua:1:3;__sin_fma" % HOST_STACK: 1,
            "lj;%s;f@a.lua:1:2;lj_vm_call_thunks" % HOST_STACK: 2})

    def test_perf_named_trace_reresolved(self):
        # perf named the trace from a stale perf-PID.map line; the dump says
        # that at this time the address holds TRACE_2 (owner g).
        Dump(100).load(1000, MC, 64, "TRACE_1::a.lua:2::f@a.lua:1") \
                 .load(3000000000, MC, 64, "TRACE_2::a.lua:11::g@a.lua:10").write(self.tmp)
        stale = (MC, "TRACE_1::a.lua:2::f@a.lua:1", 0, "/tmp/perf-100.map")
        txt = (sample("lj", 100, 100, 2000000, [stale] + HOST, 1) +
               sample("lj", 100, 100, 4000000, [stale] + HOST, 2))
        self.assertEqual(self.merge(txt), {"lj;%s;f@a.lua:1" % HOST_STACK: 1,
                                           "lj;%s;g@a.lua:10" % HOST_STACK: 2})

    def test_lines_and_bx(self):
        # f's line table (shifted like the VM's): PC BC+4k -> line 10+k-1.
        lines = [(BC + 4 * k, 10 + max(k - 1, 0)) for k in range(16)]
        Dump(100).load(1000, BC, 64, "f@a.lua:10", lines=lines) \
                 .load(1100, BC + 64, 64, "main@a.lua:1",
                       lines=[(BC + 64 + 4 * k, 1 + k) for k in range(16)]).write(self.tmp)
        interp = (0x12d4, "lj_BC_ADDVV", 0, EXE)
        helper = (0x3f00, "lj_vm_mod", 0x10, EXE)
        gc = (0x99, "lj_gc_step", 1, EXE)
        caller = self.lua(BC + 64 + 12)           # main's record: PC 3 -> line 4
        inner = self.lua(BC + 4)                  # f's record at its entry: line unknown
        called = self.lua(BC + 16)                # f's record after a call: PC 4 -> 13
        txt = (sample("lj", 100, 100, 5000000, [interp, inner, caller] + HOST, 1, bx=BC + 24) +
               sample("lj", 100, 100, 5000000, [interp, inner, caller] + HOST, 2, bx=BC + 200) +
               sample("lj", 100, 100, 5000000, [gc, inner, caller] + HOST, 4, bx=BC + 24) +
               sample("lj", 100, 100, 5000000, [helper, interp, inner, caller] + HOST, 8,
                      bx=BC + 28) +
               sample("lj", 100, 100, 5000000, [gc, called, caller] + HOST, 16, bx=BC + 24))
        self.assertEqual(self.merge(txt, "--lines"), {
            "lj;%s;main@a.lua:1:4;f@a.lua:10:15" % HOST_STACK: 1,   # BX PC 6 -> line 15
            "lj;%s;main@a.lua:1:4;f@a.lua:10:?" % HOST_STACK: 2,    # BX outside f
            # C code above f: BX is not its PC; the record at f's entry does not know
            "lj;%s;main@a.lua:1:4;f@a.lua:10:?;lj_gc_step" % HOST_STACK: 4,
            # a frameless helper called by a handler: BX still is f's PC
            "lj;%s;main@a.lua:1:4;f@a.lua:10:16;lj_vm_mod" % HOST_STACK: 8,
            # f's record after a call: the call's line
            "lj;%s;main@a.lua:1:4;f@a.lua:10:13;lj_gc_step" % HOST_STACK: 16})
        self.assertEqual(self.merge(txt), {
            "lj;%s;main@a.lua:1;f@a.lua:10" % HOST_STACK: 3,
            "lj;%s;main@a.lua:1;f@a.lua:10;lj_vm_mod" % HOST_STACK: 8,
            "lj;%s;main@a.lua:1;f@a.lua:10;lj_gc_step" % HOST_STACK: 20})

    def test_perf_map_fallback(self):
        # No dump: /tmp-style perf-PID.map in the --jitdump dir; last line wins.
        self.path("perf-100.map", "%x 40 old@a.lua:1\n%x 40 new@a.lua:2\nbad line\n"
                  % (BC, BC))
        txt = sample("lj", 100, 100, 5000000, [self.lua(BC + 4)] + HOST, 1)
        self.assertEqual(self.merge(txt), {"lj;%s;new@a.lua:2" % HOST_STACK: 1})

    def test_dump_preferred_over_perf_map(self):
        # Both exist: the map (no time; its last line here) would say new@,
        # the dump knows old@ was loaded there at the sample's time, new@
        # only later. The dump wins; the map is only for processes without one.
        self.path("perf-100.map", "%x 40 old@a.lua:1\n%x 40 new@a.lua:2\n" % (BC, BC))
        Dump(100).load(1000, BC, 64, "old@a.lua:1").load(3000000000, BC, 64, "new@a.lua:2") \
                 .write(self.tmp)
        txt = (sample("lj", 100, 100, 2000000, [self.lua(BC + 4)] + HOST, 1) +
               sample("lj", 100, 100, 4000000, [self.lua(BC + 4)] + HOST, 2))
        self.assertEqual(self.merge(txt), {"lj;%s;old@a.lua:1" % HOST_STACK: 1,
                                           "lj;%s;new@a.lua:2" % HOST_STACK: 2})

    def test_dump_dir_from_mmap_event(self):
        # perf script --show-mmap-events shows where jit-PID.dump was: no
        # --jitdump needed.
        d = os.path.join(self.tmp, "dumps")
        os.mkdir(d)
        Dump(4242).load(1000, BC, 64, "f@a.lua:1").write(d)
        txt = ("lj 4242/4242 1.000000: PERF_RECORD_MMAP2 4242/4242: [0x7f00(0x1000) @ 0 fd:01 "
               "12 0]: r-xp %s/jit-4242.dump\n" % d +
               sample("lj", 4242, 4242, 5000000, [self.lua(BC)] + HOST, 1))
        inp = self.path("in.txt", txt)
        code, out, err = run([inp])
        self.assertEqual((code, folded(out)), (0, {"lj;%s;f@a.lua:1" % HOST_STACK: 1}), err)

    def test_truncated_and_corrupt_dumps(self):
        d = Dump(100).load(1000, BC, 64, "f@a.lua:1").load(2000, BC + 64, 64, "g@a.lua:5")
        self.path("jit-100.dump", d.buf[:-20])        # cut inside the 2nd CODE_LOAD
        self.path("jit-200.dump", b"NOTADUMP" * 10)
        txt = (sample("lj", 100, 100, 5000000, [self.lua(BC)] + HOST, 1) +
               sample("lj", 100, 100, 5000000, [self.lua(BC + 64)] + HOST, 2) +
               sample("lj", 200, 200, 5000000, [self.lua(BC)] + HOST, 4))
        self.assertEqual(self.merge(txt), {"lj;%s;f@a.lua:1" % HOST_STACK: 1,
                                           "lj;%s;[unknown]" % HOST_STACK: 6})
        self.assertIn("jit-200.dump", self.last_err)

    def test_inject_and_raw_agree(self):
        # The same sample as perf prints it with and without perf inject.
        Dump(100).load(1000, BC, 64, "f@a.lua:1", lines=[(BC, 1), (BC + 8, 2)]).write(self.tmp)
        raw = sample("lj", 100, 100, 5000000, [self.lua(BC + 8)] + HOST, 1)
        inj = sample("lj", 100, 100, 5000000,
                     [(0x88, "f@a.lua:1", 8, os.path.join(self.tmp, "jitted-100-0.so"))] + HOST, 1)
        for args in ((), ("--lines",), ("--jit-tag", "--tid")):
            self.assertEqual(self.merge(raw, *args), self.merge(inj, *args), args)
        self.assertEqual(self.merge(inj, "--lines"), {"lj;%s;f@a.lua:1:2" % HOST_STACK: 1})


# ================================================================= options, formats
class Options(TmpDir):
    def test_builtin_pairs_merge(self):
        fr = [(0x10, "lj_ffh_string_byte", 1, EXE), (0x20, "lj_fff_fallback", 1, EXE),
              (0x30, "lj_ff_string_byte", 1, EXE)] + HOST
        self.assertEqual(self.merge(sample("lj", 1, 1, 1, fr, 5)),
                         {"lj;%s;string.byte" % HOST_STACK: 5})
        self.assertEqual(self.merge(sample("lj", 1, 1, 1, fr, 5), "--keep-vm"),
                         {"lj;%s;string.byte;lj_fff_fallback;string.byte" % HOST_STACK: 5})

    def test_ffi_call_plumbing(self):
        # An FFI call from the interpreter: lj_BC_FUNCC -> ffi.meta___call ->
        # lj_ccall_func -> lj_vm_ffi_call -> the C function. All plumbing.
        call = [(0x40, "lj_vm_ffi_call", 0x84, EXE), (0x50, "lj_ccall_func", 0x390, EXE),
                (0x60, "lj_cf_ffi_meta___call", 0xdd, EXE), (0x70, "lj_BC_FUNCC", 0x44, EXE)]
        spin = [(0x10, "spin", 5, "/lib/libx.so")]
        conv = [(0x20, "lj_cconv_ct_tv", 3, EXE)]
        # ffi.meta___call without lj_ccall_func (e.g. a ctype constructor): kept
        ctor = [(0x30, "lj_cdata_new", 1, EXE), (0x60, "lj_cf_ffi_meta___call", 0x20, EXE),
                (0x70, "lj_BC_FUNCC", 0x44, EXE)]
        # a callback into Lua from C called through the FFI, converting its argument
        cb = [(0x20, "lj_cconv_tv_ct", 0xab, EXE), (0x24, "lj_ccallback_enter", 0x182, EXE),
              (0x28, "lj_vm_ffi_callback", 0x91, EXE), (0x2c, "each", 0x2f, "/lib/libx.so")]
        txt = (sample("lj", 1, 1, 1, spin + call + HOST, 1) +
               sample("lj", 1, 1, 2, conv + call[1:] + HOST, 2) +
               sample("lj", 1, 1, 3, ctor + HOST, 4) +
               sample("lj", 1, 1, 4, cb + call + HOST, 8))
        self.assertEqual(self.merge(txt), {
            "lj;%s;spin" % HOST_STACK: 1,
            "lj;%s;lj_cconv_ct_tv" % HOST_STACK: 2,
            "lj;%s;ffi.meta___call;lj_cdata_new" % HOST_STACK: 4,
            "lj;%s;each;lj_cconv_tv_ct" % HOST_STACK: 8})
        self.assertEqual(self.merge(txt, "--keep-vm"), {
            "lj;%s;lj_BC_FUNCC;ffi.meta___call;lj_ccall_func;lj_vm_ffi_call;spin"
            % HOST_STACK: 1,
            "lj;%s;lj_BC_FUNCC;ffi.meta___call;lj_ccall_func;lj_cconv_ct_tv" % HOST_STACK: 2,
            "lj;%s;lj_BC_FUNCC;ffi.meta___call;lj_cdata_new" % HOST_STACK: 4,
            "lj;%s;lj_BC_FUNCC;ffi.meta___call;lj_ccall_func;lj_vm_ffi_call;each;"
            "lj_vm_ffi_callback;lj_ccallback_enter;lj_cconv_tv_ct" % HOST_STACK: 8})

    def test_events(self):
        txt = (sample("x", 1, 1, 1, HOST, 10, event="cycles:u") +
               sample("x", 1, 1, 2, HOST, 20, event="instructions:u") +
               sample("x", 1, 1, 3, HOST, 30, event="cycles:u"))
        self.assertEqual(self.merge(txt), {"x;" + HOST_STACK: 40})
        self.assertIn("ignored 1 samples", self.last_err)
        self.assertNotIn("malformed", self.last_err)   # their callchains are not
        # the same through the line reader (no sample layout learned: -F
        # without pid/tid prints no pid token)
        plain = "".join(ln for ln in txt.splitlines(True))
        self.assertEqual(self.merge(plain.replace("      1/1      ", " ")),
                         {"x;" + HOST_STACK: 40})
        self.assertNotIn("malformed", self.last_err)
        self.assertEqual(self.merge(txt, "--event", "instructions"), {"x;" + HOST_STACK: 20})
        self.assertEqual(self.merge(txt, "--event", "all"), {"x;" + HOST_STACK: 60})

    def test_from_bad(self):
        # --from wants PID:SECONDS: anything else is one line, exit 2
        for bad in ("12", "x:1", "12:", "0:5", "12:-1", "12:abc"):
            self.merge(sample("lj", 1, 1, 1, HOST, 5), "--from", bad, rc=2)
            self.assertIn("--from: expected PID:SECONDS", self.last_err)
            self.assertEqual(len(self.last_err.strip().splitlines()), 1, self.last_err)

    def test_speedscope(self):
        inp = os.path.join(FIX, "cstack-F.txt")
        code, out, err = run(["--format", "speedscope", "--pid", inp])
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["$schema"], "https://www.speedscope.app/file-format-schema.json")
        frames = doc["shared"]["frames"]
        self.assertTrue(all(isinstance(f["name"], str) for f in frames))
        names = {}
        for p in doc["profiles"]:
            self.assertEqual(p["type"], "sampled")
            self.assertEqual(p["unit"], "none")           # no event field printed
            self.assertEqual(len(p["samples"]), len(p["weights"]))
            self.assertEqual(p["startValue"], 0)
            self.assertEqual(p["endValue"], sum(p["weights"]))
            for s, w in zip(p["samples"], p["weights"]):
                self.assertTrue(all(0 <= i < len(frames) for i in s))
                key = ";".join([p["name"]] + [frames[i]["name"] for i in s])
                names[key] = names.get(key, 0) + w
        _, out2, _ = run(["--pid", inp])
        self.assertEqual(names, folded(out2))
        self.assertEqual(sorted(p["name"] for p in doc["profiles"]),
                         ["cs_worker-26043", "cstack-26043", "cstack-26045"])
        code, out, err = run(["--format", "speedscope", os.path.join(FIX, "cstack.txt")])
        self.assertEqual({p["unit"] for p in json.loads(out)["profiles"]}, {"nanoseconds"})

    def test_output_file(self):
        o = self.path("out.folded")
        code, out, err = run(["-o", o, os.path.join(FIX, "cstack.txt")])
        self.assertEqual((code, out), (0, ""), err)
        with open(o) as f:
            self.assertEqual(len(f.read().splitlines()), 3)

    def test_stdin(self):
        with open(os.path.join(FIX, "cstack.txt"), "rb") as f:
            data = f.read()
        code, out, err = run(["-"], stdin=data)
        code2, out2, _ = run([os.path.join(FIX, "cstack.txt")])
        self.assertEqual((code, out), (code2, out2))

    def test_symlinked_install(self):
        # build/bin/lj_merge is a symlink: sibling modules must still import.
        link = self.path("lj_merge")
        os.symlink(os.path.abspath(LJ_MERGE), link)
        p = subprocess.run([link, os.path.join(FIX, "cstack.txt")], capture_output=True,
                           text=True, cwd=self.tmp, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(p.stdout.splitlines()), 3)

    def test_help_documents_options(self):
        code, out, err = run(["--help"])
        self.assertEqual(code, 0)
        for word in ("--keep-vm", "--jit-tag", "--pid", "--tid", "--lines", "--jitdump",
                     "--format", "-o", "period", "uregs", "time", "speedscope", "--event"):
            self.assertIn(word, out)


# ================================================================= robustness
class Robustness(TmpDir):
    def check_clean(self, code, err, rc=0):
        self.assertEqual(code, rc, err)
        self.assertNotIn("Traceback", err)

    def test_samples_across_read_batches(self):
        # lj_merge reads 256 KB at a time and caches whole callchains: samples
        # cut by a batch boundary, plain (blank lines) and -F uregs (none),
        # real captures, must count exactly as often as they occur.
        for name, dumps in (("real/jit/rawF.txt", "real/jit"), ("real/ffi/raw.txt", "real/ffi"),
                            ("cstack.txt", "nodump")):
            with open(os.path.join(FIX, name)) as f:
                one = f.read()
            args = ["--tid", "--lines", "--jitdump", os.path.join(FIX, dumps)]
            code, out1, err = run(args + [os.path.join(FIX, name)])
            self.check_clean(code, err)
            copies = (1 << 20) // len(one) + 3
            code, outn, err = run(args + [self.path("many.txt", one * copies)])
            self.check_clean(code, err)
            self.assertEqual(folded(outn), {k: v * copies for k, v in folded(out1).items()},
                             name)

    def test_huge_callchain(self):
        # A sample with more callchain text than the block reader carries over
        # (1 MB) is read line by line, without losing frames.
        fr = [(0x1000 + i, "f%d" % (i % 7), 1, EXE) for i in range(20000)]
        txt = sample("x", 1, 1, 1, fr, 3) + sample("x", 1, 1, 2, HOST, 4)
        out = self.merge(txt)
        want = "x;" + ";".join("f%d" % (i % 7) for i in reversed(range(20000)))
        self.assertEqual(out, {want: 3, "x;" + HOST_STACK: 4})

    def test_inconsistent_sample_is_dropped(self):
        # A sample that trips an internal error (here: the BX line lookup,
        # made to fail for one register value) is dropped and counted; the
        # others are folded.
        import io
        from ljperf import merge_cli as lj_merge
        from ljperf import merger
        txt = (sample("x", 1, 1, 1, [(0x12d4, "lj_BC_FORL", 0, EXE)] + HOST, 10, bx=0xbad) +
               sample("x", 1, 1, 2, HOST, 20))
        real = merger.Folder.leaf_line

        def leaf_line(self, frames, bx):
            if bx == 0xbad:
                raise KeyError(bx)
            return real(self, frames, bx)
        merger.Folder.leaf_line = leaf_line
        try:
            opts = lj_merge.make_parser().parse_args(["--lines", "--jitdump", self.tmp])
            m, st, _ = lj_merge.merge(io.BytesIO(txt.encode()), opts, print)
        finally:
            merger.Folder.leaf_line = real
        self.assertEqual((m.dropped, st.samples), (1, 2))
        m.settle()
        self.assertEqual([(";".join(f[0] for f in fr), w) for fr, _, w, *_ in m.stacks(0)],
                         [("x;" + HOST_STACK, 20)])

    def test_empty_input(self):
        for data in (b"", b"\n\n\n"):
            code, out, err = run([], stdin=data)
            self.check_clean(code, err)
            self.assertEqual(out, "")
            self.assertEqual(len(err.splitlines()), 1)
            self.assertIn("warning", err)

    def test_binary_garbage(self):
        garbage = bytes((i * 2654435761 >> 7) & 0xff for i in range(200000))
        with open(os.path.join(FIX, "cstack.txt"), "rb") as f:
            good = f.read()
        data = garbage[:70000] + b"\n" + good + garbage[70000:] + b"\n\x00\t\x00\xff\n\tzz\n"
        code, out, err = run([], stdin=data)
        self.check_clean(code, err)
        # the real samples survive
        got = folded(out)
        self.assertEqual(got.get("cstack;__libc_start_call_main;main;a;b;c"), 4 * 5025125)
        lines = [l for l in err.splitlines() if "skipped" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertRegex(lines[0], r"^lj_merge: skipped [1-9][0-9]* malformed lines$")

    def test_cut_anywhere(self):
        with open(os.path.join(FIX, "fakevm-rawF.txt"), "rb") as f:
            data = f.read()
        full = folded(run(["--jitdump", os.path.join(FIX, "fakevm"), "-"], stdin=data)[1])
        total = sum(full.values())
        for cut in (1, 17, 100, 1000, 4321, len(data) // 2, len(data) - 3):
            code, out, err = run(["--lines", "--jitdump", os.path.join(FIX, "fakevm"), "-"],
                                 stdin=data[:cut])
            if cut < data.index(b"\n"):       # all of it a cut line: nothing usable
                self.check_clean(code, err, 1)
                self.assertEqual((out, err), ("", "lj_merge: nothing usable in the input: "
                                                  "skipped 1 malformed lines\n"))
                continue
            self.check_clean(code, err)
            got = folded(out)
            self.assertLessEqual(sum(got.values()), total, cut)
            if data[:cut].rpartition(b"\n")[2].strip():   # cut inside a line
                self.assertIn("skipped 1 malformed lines", err, cut)
            else:
                self.assertNotIn("skipped", err, cut)

    def test_missing_header(self):
        with open(os.path.join(FIX, "cstack.txt")) as f:
            text = f.read()
        body = text.split("\n", 1)[1]           # drop the first header line
        code, out, err = run([], stdin=body)
        self.check_clean(code, err)
        self.assertIn("skipped 4 malformed lines", err)  # the orphan chain lines
        self.assertEqual(sum(folded(out).values()), 12 * 5025125)

    def test_huge_lines(self):
        with open(os.path.join(FIX, "cstack.txt"), "rb") as f:
            good = f.read()
        huge = b"\t" + b"A" * (3 << 20) + b"\n"            # one 3 MB line
        huger = b"x" * (5 << 20)                            # 5 MB, no newline at all
        for data in (huge + good, good + huge + good, good + huger):
            code, out, err = run([], stdin=data)
            self.check_clean(code, err)
            self.assertGreaterEqual(sum(folded(out).values()), 13 * 5025125)
            self.assertIn("skipped 1 malformed lines", err)

    def test_side_band_and_comments_are_not_malformed(self):
        with open(os.path.join(FIX, "cstack.txt")) as f:
            good = f.read()
        extra = ("# ========\n# captured on    : Sat Nov 22 00:40:00 2026\n# ========\n#\n"
                 "cstack 26043 1330.400000: PERF_RECORD_MMAP2 26043/26043: [0x55(0x1000) @ 0x1000 "
                 "fe:00 1 0]: r-xp /tmp/cstack\n"
                 "cstack 26043 1330.400001: PERF_RECORD_COMM: cstack:26043/26043\n"
                 "cs worker 26046 1330.400002: PERF_RECORD_FORK(26046:26046):(26043:26043)\n")
        code, out, err = run([], stdin=extra + good)
        self.check_clean(code, err)
        self.assertEqual(err, "")
        self.assertEqual(sum(folded(out).values()), 13 * 5025125)

    def test_bad_arguments(self):
        for args in (["--bogus"], ["--format", "xml"], ["--jitdump", "/nonexistent/dir"],
                     ["a", "b"], ["--jitdump", os.path.join(FIX, "cstack.txt")]):
            code, out, err = run(args, stdin=b"")
            self.assertEqual(code, 2, (args, err))
            self.assertEqual(len(err.strip().splitlines()), 1, (args, err))
            self.assertTrue(err.startswith("lj_merge: error:"), err)

    def test_io_errors(self):
        code, out, err = run(["/nonexistent/perf.txt"])
        self.assertEqual(code, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        code, out, err = run([self.tmp])
        self.assertEqual(code, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        code, out, err = run(["-o", "/nonexistent/dir/out", os.path.join(FIX, "cstack.txt")])
        self.assertEqual(code, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_broken_pipe(self):
        # Many distinct stacks so that the output exceeds the pipe buffer.
        parts = []
        for i in range(30000):
            parts.append(sample("x", 1, 1, i, [(0x1000 + i, "f%d" % i, 1, EXE)] + HOST, 1))
        inp = self.path("big.txt", "".join(parts))
        p = subprocess.run("'%s' '%s' '%s' | head -1" % (sys.executable, LJ_MERGE, inp),
                           shell=True, capture_output=True, text=True, timeout=120)
        self.assertEqual(len(p.stdout.splitlines()), 1)
        self.assertEqual(p.stderr, "")

    def peak_rss_kb(self, path):
        out = subprocess.run([sys.executable, "-c",
                              "import resource,subprocess,sys;"
                              "subprocess.run([sys.executable,%r,%r],stdout=subprocess.DEVNULL);"
                              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
                              % (LJ_MERGE, path)], capture_output=True, text=True, timeout=300)
        return int(out.stdout)

    def test_memory_is_bounded_by_stacks(self):
        # 12 MB and 60 MB inputs with the same few stacks: lj_merge streams,
        # so its peak RSS must not grow with the input.
        with open(os.path.join(FIX, "cstack.txt")) as f:
            one = f.read()
        rss = []
        for copies in (3000, 15000):
            path = self.path("big%d.txt" % copies)
            with open(path, "w") as f:
                for _ in range(copies):
                    f.write(one)
            rss.append(self.peak_rss_kb(path))
            os.unlink(path)
        self.assertLess(rss[1] - rss[0], 4096, "peak RSS %s KB" % rss)


if __name__ == "__main__":
    unittest.main()
