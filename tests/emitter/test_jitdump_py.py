#!/usr/bin/env python3
"""Tests of ljperf/jitdump.py on dumps written by the C writer (gen_dump), and on
copies of them that were truncated or corrupted on purpose.

Environment: LJP_GEN_DUMP (tests/emitter/gen_dump binary), LJP_JITDUMP_PY (optional).
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from tests.lib.ljptest import jitdump_under_test

jitdump = jitdump_under_test()   # $LJP_JITDUMP_PY or ljperf/jitdump.py

GEN_DUMP = os.environ.get("LJP_GEN_DUMP", "")


def offsets(buf):
    """[(offset, id, size)] of the records, walked independently of jitdump.py."""
    res, off = [], 40
    while off + 16 <= len(buf):
        rid, size = struct.unpack_from("<II", buf, off)
        res.append((off, rid, size))
        off += size
    return res


class JitdumpPy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not GEN_DUMP or not os.access(GEN_DUMP, os.X_OK):
            raise RuntimeError("LJP_GEN_DUMP=%r is not an executable" % GEN_DUMP)
        cls.tmp = tempfile.mkdtemp(prefix="ljp-jdpy-")
        os.mkdir(os.path.join(cls.tmp, "ok"))
        os.mkdir(os.path.join(cls.tmp, "crash"))
        p = subprocess.run([GEN_DUMP, os.path.join(cls.tmp, "ok")], stdout=subprocess.PIPE, text=True, check=True)
        cls.path = p.stdout.strip()
        c = subprocess.run([GEN_DUMP, os.path.join(cls.tmp, "crash"), "crash"], stdout=subprocess.PIPE, text=True)
        assert c.returncode < 0, "gen_dump crash mode did not crash"
        cls.crash = c.stdout.strip()
        with open(cls.path, "rb") as f:
            cls.buf = f.read()
        cls.recs = offsets(cls.buf)
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def variant(self, data):
        """Writes DATA as a new file; returns its path."""
        type(self).n += 1
        p = os.path.join(self.tmp, "variant-%d.dump" % self.n)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def cli(self, path):
        return subprocess.run([sys.executable, jitdump.__file__, path], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)

    def load_offset(self, k):
        """Offset of the K-th CODE_LOAD."""
        return [o for o, rid, _ in self.recs if rid == jitdump.JIT_CODE_LOAD][k]

    def debug_offset(self, k):
        return [o for o, rid, _ in self.recs if rid == jitdump.JIT_CODE_DEBUG_INFO][k]

    # -- a valid file ----------------------------------------------------------

    def test_valid_file(self):
        recs = list(jitdump.read(self.path, strict=True))
        self.assertEqual(recs, list(jitdump.read(self.path)))
        h = recs[0]
        pid = int(os.path.basename(self.path)[4:-5])
        self.assertEqual(h, jitdump.Header(0x4A695444, 1, 62, pid, h.timestamp, 0))
        kinds = "".join({jitdump.DebugInfo: "D", jitdump.CodeLoad: "L", jitdump.CodeClose: "C"}[type(r)]
                        for r in recs[1:])
        self.assertEqual(kinds, "DLDLLDLDLLC")
        loads = [r for r in recs if isinstance(r, jitdump.CodeLoad)]
        self.assertEqual([l.name for l in loads], ["gen_0", "gen_1", "gen_2", "gen_3", "gen_4", "gen_again"])
        self.assertEqual([l.code_index for l in loads], list(range(6)))
        for i, l in enumerate(loads[:5]):
            a = 0x400000 + i * 0x100
            self.assertEqual((l.pid, l.vma, l.code_addr, l.code_size), (pid, a, a, 64))
            self.assertEqual(l.code, bytes((i * 3 + k) & 255 for k in range(64)))
        again = loads[5]
        self.assertEqual(again.code[:60], loads[0].code[:60])
        self.assertNotEqual(again.code, loads[0].code)      # salted: unique bytes
        infos = [r for r in recs if isinstance(r, jitdump.DebugInfo)]
        self.assertEqual([d.code_addr for d in infos], [0x400000, 0x400100, 0x400300, 0x400400])
        a = 0x400100
        self.assertEqual(infos[1].entries, [(a, 11, 0, "gen_1.lua"), (a + 16, 12, 0, "gen_1.lua"),
                                            (a + 32, 13, 0, "gen_1.lua"), (a + 48, 14, 0, "gen_1.lua"),
                                            (a + 64, 14, 0, "gen_1.lua")])
        ts = [r.timestamp for r in recs]
        self.assertEqual(ts, sorted(ts))
        self.assertEqual(jitdump.validate(self.path), [])
        out = self.cli(self.path)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("CodeLoad 6", out.stdout)

    def test_crashed_writer_leaves_a_valid_file(self):
        recs = list(jitdump.read(self.crash, strict=True))
        self.assertEqual(sum(isinstance(r, jitdump.CodeLoad) for r in recs), 6)
        self.assertFalse(any(isinstance(r, jitdump.CodeClose) for r in recs))
        self.assertEqual(jitdump.validate(self.crash), [])

    # -- truncation --------------------------------------------------------------

    def test_truncated(self):
        full = list(jitdump.read(self.path))
        # Cut inside the last record, inside a CODE_LOAD's code, inside a prefix.
        cuts = [len(self.buf) - 1, self.load_offset(3) + 70, self.debug_offset(1) + 5]
        for cut in cuts:
            with self.subTest(cut=cut):
                start = max(o for o, _, _ in self.recs if o < cut)
                p = self.variant(self.buf[:cut])
                kept = list(jitdump.read(p))
                complete = 1 + sum(1 for o, _, _ in self.recs if o < start)
                self.assertEqual(kept, full[:complete])
                with self.assertRaisesRegex(ValueError, r"offset %d: truncated" % start):
                    list(jitdump.read(p, strict=True))
                probs = jitdump.validate(p)
                self.assertTrue(any("offset %d" % start in x for x in probs), probs)
                self.assertEqual(self.cli(p).returncode, 1)

    def test_short_header(self):
        p = self.variant(self.buf[:30])
        for strict in (False, True):
            with self.assertRaisesRegex(ValueError, r"offset 0: file too short"):
                list(jitdump.read(p, strict=strict))

    # -- bad header ----------------------------------------------------------------

    def header_variant(self, off, fmt, value):
        b = bytearray(self.buf)
        struct.pack_into(fmt, b, off, value)
        return self.variant(bytes(b))

    def test_bad_header(self):
        cases = [(0, "<I", 0x12345678, r"offset 0: bad magic 0x12345678"),
                 (4, "<I", 2, r"offset 4: unsupported jitdump version 2"),
                 (8, "<I", 8, r"offset 8: bad header size 8"),
                 (8, "<I", len(self.buf) + 1, r"offset 8: bad header size")]
        for off, fmt, value, msg in cases:
            with self.subTest(msg=msg):
                p = self.header_variant(off, fmt, value)
                for strict in (False, True):
                    with self.assertRaisesRegex(ValueError, msg):
                        list(jitdump.read(p, strict=strict))
                self.assertTrue(any(x.startswith(msg.split(":")[0]) for x in jitdump.validate(p)))
                self.assertEqual(self.cli(p).returncode, 1)

    # -- records whose contents overrun their size ---------------------------------------

    def test_record_size_overrun(self):
        lo, do = self.load_offset(1), self.debug_offset(0)
        cases = [(lo + 4, "<I", 8, lo, "smaller than its prefix"),
                 (lo + 40, "<Q", 65, lo, "code_size 65 overruns"),       # code_size
                 (do + 24, "<Q", 50, do, "entry .* overruns")]          # nr_entry
        for off, fmt, value, roff, msg in cases:
            with self.subTest(msg=msg):
                p = self.header_variant(off, fmt, value)
                for strict in (False, True):
                    with self.assertRaisesRegex(ValueError, r"offset %d: .*%s" % (roff, msg)):
                        list(jitdump.read(p, strict=strict))

    # -- validate() finds what perf would trip over ---------------------------------------

    def assertProblem(self, data, offset, words):
        probs = jitdump.validate(self.variant(data))
        self.assertTrue(any(("offset %d" % offset) in x and words in x for x in probs),
                        "no problem with 'offset %d' and %r in %s" % (offset, words, probs))

    def test_validate_finds_problems(self):
        b = self.buf
        l1, l3, la = self.load_offset(1), self.load_offset(3), self.load_offset(5)
        d0 = self.debug_offset(0)
        # name with a space
        m = bytearray(b); i = b.index(b"gen_1\0"); m[i + 3] = ord(" ")
        self.assertProblem(bytes(m), l1, "bad name")
        # a CODE_LOAD spliced out: its DEBUG_INFO dangles
        size = struct.unpack_from("<I", b, l1 + 4)[0]
        self.assertProblem(b[:l1] + b[l1 + size:], self.debug_offset(1), "not immediately followed")
        # the closing entry moved back onto the previous entry's address
        nent = struct.unpack_from("<Q", b, d0 + 24)[0]
        pos = d0 + 32
        for _ in range(nent - 1):
            pos = b.index(b"\0", pos + 16) + 1
        m = bytearray(b); struct.pack_into("<Q", m, pos, 0x400000 + 48)
        self.assertProblem(bytes(m), d0, "closing entry")
        # unsorted entries
        m = bytearray(b); e1 = b.index(b"\0", d0 + 32 + 16) + 1
        struct.pack_into("<Q", m, e1, 0x400000 + 40)
        self.assertProblem(bytes(m), d0, "not sorted")
        # identical bytes at the same address (the build-id merge trap)
        end = la + struct.unpack_from("<I", b, la + 4)[0]
        m = bytearray(b); m[end - 64:end] = bytes(range(64))       # gen_0's bytes, unsalted
        self.assertProblem(bytes(m), la, "identical to the CODE_LOAD at offset %d at the same address"
                           % self.load_offset(0))
        # timestamp going back, code_index not increasing, pid mismatch
        m = bytearray(b); struct.pack_into("<Q", m, l3 + 8, 1)
        self.assertProblem(bytes(m), l3, "timestamp")
        m = bytearray(b); struct.pack_into("<Q", m, l3 + 48, 1)
        self.assertProblem(bytes(m), l3, "code_index 1 not above")
        m = bytearray(b); struct.pack_into("<I", m, l3 + 16, 4242)
        self.assertProblem(bytes(m), l3, "pid 4242")
        # an unknown record (here a JIT_CODE_MOVE) is read as Unknown and reported
        move = struct.pack("<IIQIIQQQQQ", jitdump.JIT_CODE_MOVE, 64, 2**63, 1, 1, 0, 0, 0, 0, 0)
        p = self.variant(b + move)
        self.assertIsInstance(list(jitdump.read(p))[-1], jitdump.Unknown)
        self.assertProblem(b + move, len(b), "unexpected record id 1")

    def test_ff_means_previous_file(self):
        # Re-encode gen_1's DEBUG_INFO with "\xff" for repeated file names (jitdump spec).
        d1 = self.debug_offset(1)
        info = [r for r in jitdump.read(self.path) if isinstance(r, jitdump.DebugInfo)][1]
        ents = b"".join(struct.pack("<QiI", a, l, d) + (b"\xff" if k else f.encode()) + b"\0"
                        for k, (a, l, d, f) in enumerate(info.entries))
        ts = struct.unpack_from("<Q", self.buf, d1 + 8)[0]
        rec = struct.pack("<IIQQQ", 2, 32 + len(ents), ts, info.code_addr, len(info.entries)) + ents
        size = struct.unpack_from("<I", self.buf, d1 + 4)[0]
        p = self.variant(self.buf[:d1] + rec + self.buf[d1 + size:])
        got = [r for r in jitdump.read(p, strict=True) if isinstance(r, jitdump.DebugInfo)][1]
        self.assertEqual(got.entries, info.entries)


if __name__ == "__main__":
    unittest.main(verbosity=2)
