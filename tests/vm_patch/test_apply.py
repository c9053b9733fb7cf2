"""vm_patch/apply: family recognition and its one-line failures.

Usage: test_apply.py PRISTINE_TREE
PRISTINE_TREE is the unpatched copy of the LuaJIT tree the build used
(luajit/base). Every case works on a copy in a temporary directory:
- the pristine tree is recognised as the family configure reported and the
  series applies (exit 0, the family on stdout, lj_fprec.c copied in);
- minimal trees carrying each family's marker are recognised as that
  family (--family-only);
- --upto NNNN applies a prefix of the series with only its new files, and
  fails in one line for a number the series lacks;
- a directory that is no LuaJIT tree, and a tree whose vm_x64.dasc lost a
  line a hunk needs, fail with exit 1 and one line naming the family, the
  patch, the file and the hunk.
"""

import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
APPLY = os.path.join(ROOT, "vm_patch", "apply")


def run(*args):
    p = subprocess.run(["sh", APPLY] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)
    print("ok: " + what)


def fake_tree(base, files):
    """A directory with src/vm_x64.dasc plus FILES {path: text}."""
    os.makedirs(os.path.join(base, "src"))
    files = dict(files)
    files.setdefault("src/vm_x64.dasc", "|// not a real VM\n")
    for path, text in files.items():
        with open(os.path.join(base, path), "w") as f:
            f.write(text)
    return base


def main():
    pristine = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ljperf-vmpatch-")
    try:
        family_of = {
            "debian": {"src/Makefile": "", "src/luajit.h": "#define LUAJIT_VERSION\n"},
            "rolling": {"src/Makefile": "", "src/luajit_rolling.h": "#define LUAJIT_VERSION\n"},
            "openresty": {"src/Makefile": "",
                          "src/luajit_rolling.h": "#define OPENRESTY_LUAJIT\n"},
            "tarantool": {"CMakeLists.txt": "", "src/lmisclib.h": "",
                          "src/luajit.h": "#define LUAJIT_VERSION\n"},
        }
        for fam, files in family_of.items():
            tree = fake_tree(os.path.join(tmp, "fake-" + fam), files)
            rc, out, err = run("--family-only", tree)
            check(rc == 0 and out == fam, "a tree with %s's markers is family %s (got %r %r)"
                  % (fam, fam, out, err))

        notree = os.path.join(tmp, "empty")
        os.makedirs(notree)
        rc, out, err = run(notree)
        check(rc == 1 and "not a LuaJIT 2.1 tree" in err and "\n" not in err,
              "a directory without src/vm_x64.dasc: one-line error (%r)" % err)

        good = os.path.join(tmp, "good")
        shutil.copytree(pristine, good, symlinks=True)
        rc, fam, _ = run("--family-only", good)
        rc, out, err = run(good)
        check(rc == 0 and out == fam and os.path.exists(os.path.join(good, "src", "lj_fprec.c")),
              "the pristine tree (%s) takes the series (%r)" % (fam, err))

        # A prefix: the patches through 0003 and exactly the files they bring.
        part = os.path.join(tmp, "part")
        shutil.copytree(pristine, part, symlinks=True)
        rc, out, err = run("--upto", "0003", part)
        src = os.path.join(part, "src")
        check(rc == 0 and out == fam and all(os.path.exists(os.path.join(src, f)) for f in
                                             ("lj_fprec.c", "lj_perf.c", "emit.c"))
              and not any(os.path.exists(os.path.join(src, f)) for f in
                          ("lj_perfremote.c", "lj_tracepos.c", "lj_perfmem.c")),
              "--upto 0003 applies 0001-0003 and brings only their files (%r)" % err)
        with open(os.path.join(src, "lj_arch.h")) as f:
            arch = f.read()
        check("LJ_HASPERF\t" in arch and "LJ_HASPERFREMOTE" not in arch,
              "--upto 0003 leaves out 0004's switch")
        rc, out, err = run("--upto", "0042", os.path.join(tmp, "good"))
        check(rc == 1 and "--upto 0042" in err and "\n" not in err,
              "--upto naming no patch: one-line error (%r)" % err)

        bad = os.path.join(tmp, "bad")
        shutil.copytree(pristine, bad, symlinks=True)
        dasc = os.path.join(bad, "src", "vm_x64.dasc")
        with open(dasc) as f:
            text = f.read()
        # A line the exit handler hunk of 0002 needs (every family has it).
        needle = "  |  mov L:RB, SAVE_L\n  |  mov MULTRES, RDd\n  |  mov LFUNC:KBASE, [BASE-16]\n"
        check(text.count(needle) == 1, "the pristine vm_x64.dasc has the exit handler lines")
        with open(dasc, "w") as f:
            f.write(text.replace(needle, "  |  mov L:RB, SAVE_L\n  |  nop\n"))
        rc, out, err = run(bad)
        check(rc == 1 and "family '%s'" % fam in err and "0002-lua-frame-records.patch" in err
              and "src/vm_x64.dasc" in err and "Hunk #" in err and "\n" not in err,
              "a hunk that does not apply: one line naming family, patch, file, hunk (%r)" % err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("all vm_patch/apply checks passed")


if __name__ == "__main__":
    main()
