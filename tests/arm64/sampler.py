"""The x29 chain sampler's run for the arm64 tests: tests/arm64/run in a
temporary directory (removed after), its "fpwalk NAME k=v ..." lines and
its chains (FPWALK_FOLDED) read back."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from ljperf.folded import load_folded
from tests.lib.ljptest import fail

HERE = os.path.dirname(os.path.abspath(__file__))


def args(doc):
    """(TARBALL or source tree, samples per workload: 600 unless given) from the command
    line, or None after printing doc (-h, --help, or no argument)."""
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(doc.strip())
        return None
    return sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 600


def parse(out):
    """{workload: {field: int}} of the "fpwalk NAME k=v ..." lines."""
    res = {}
    for m in re.finditer(r"^fpwalk (\S+) (.*)$", out, re.M):
        res[m.group(1)] = {k: int(v) for k, v in (f.split("=") for f in m.group(2).split())}
    return res


def sample(tarball, want, patched=False, env=None):
    """Runs the sampler (on the VM with the series if patched; env: more
    variables for it), prints its tables and returns (fields per workload,
    folded chains)."""
    tmp = tempfile.mkdtemp(prefix="ljp-arm64-")
    chains = os.path.join(tmp, "chains.folded")
    try:
        p = subprocess.run([os.path.join(HERE, "run")] + (["--patched"] if patched else []) +
                           [tarball, tmp, str(want)],
                           capture_output=True, text=True, timeout=1200,
                           env=dict(os.environ, FPWALK_FOLDED=chains, **(env or {})))
        stacks = load_folded(chains) if os.path.exists(chains) else []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(p.stdout)
    if p.returncode:
        fail("tests/arm64/run%s exited %d: %s"
             % (" --patched" if patched else "", p.returncode, p.stderr.strip()))
    return parse(p.stdout), stacks
