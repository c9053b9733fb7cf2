#!/usr/bin/env python3
"""Pre-filter a jitdump to the loads perf samples actually hit, before perf inject.

    prefilter.py PERF_DATA JITDUMP OUT_JITDUMP [--buildid-dir DIR]

perf inject --jit writes one jitted-PID-N.so per CODE_LOAD. A program that
loads 20 000 functions gets 20 000 files although a profile hits a few
hundred of them. This keeps only the CODE_LOADs (with their DEBUG_INFO)
whose range [code_addr, code_addr + code_size) contains an address of a
sample of the dump's pid (the sampled IP or any callchain entry), plus the
header and CODE_CLOSE, in file order and byte for byte: code_index values
stay, timestamps stay, so perf inject resolves the kept loads exactly as
before. A load is kept when any sample covers it at any time (a superset
of what the samples' times need: later loads at the same address stay).

To use the result, it has to replace jit-PID.dump at its path (perf inject
finds the dump through the mmap event recorded for that path): keep the
original next to it. Prints "kept K of N loads (S samples)".
"""

import bisect
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "perf-script"))
import jitdump  # noqa: E402


def sampled_addrs(data, pid, buildid_dir=None):
    """Absolute addresses in the samples of PID (IPs and callchains): the
    addresses perf prints without a DSO-relative offset (anonymous, heap,
    unknown memory) are the ones a jitdump load can cover."""
    cmd = ["perf"] + (["--buildid-dir", buildid_dir] if buildid_dir else []) + \
        ["script", "-i", data, "--pid", str(pid), "-F", "ip"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("perf script failed: " + r.stderr[-500:])
    addrs, nsamples = set(), 0
    for line in r.stdout.splitlines():
        s = line.strip()
        if not s:
            continue
        if not line.startswith("\t") and not line.startswith(" " * 8):
            continue
        try:
            addrs.add(int(s.split()[0], 16))
        except ValueError:
            pass
    nsamples = r.stdout.count("\n\n") or len(addrs)
    return addrs, nsamples


def sampled_loads(data, dump, pid, buildid_dir=None):
    """(set of code_index of loads covering a sampled address, samples)."""
    addrs, nsamples = sampled_addrs(data, pid, buildid_dir)
    loads = sorted((r.code_addr, r.code_addr + r.code_size, r.code_index)
                   for r in jitdump.read(dump) if isinstance(r, jitdump.CodeLoad))
    starts = [x[0] for x in loads]
    maxsize = max((e - s for s, e, _ in loads), default=0)
    keep = set()
    for a in addrs:
        i = bisect.bisect_right(starts, a) - 1
        while i >= 0 and starts[i] > a - maxsize - 1:
            s, e, idx = loads[i]
            if s <= a < e:
                keep.add(idx)
            i -= 1
    return keep, nsamples


def write_filtered(src, dst, keep):
    """Copies SRC to DST keeping the header, CODE_CLOSE and the CODE_LOADs in
    KEEP with the DEBUG_INFO record written just before each."""
    with open(src, "rb") as f:
        buf = f.read()
    hsize = struct.unpack_from("<I", buf, 8)[0]
    out = [buf[:hsize]]
    off, pending = hsize, None
    while off + 16 <= len(buf):
        rid, size = struct.unpack_from("<II", buf, off)
        if size < 16 or off + size > len(buf):
            break
        rec = buf[off:off + size]
        if rid == jitdump.JIT_CODE_DEBUG_INFO:
            pending = rec
        else:
            if rid == jitdump.JIT_CODE_LOAD:
                index = struct.unpack_from("<Q", rec, 48)[0]
                if index in keep:
                    if pending is not None:
                        out.append(pending)
                    out.append(rec)
            elif rid == jitdump.JIT_CODE_CLOSE:
                out.append(rec)
            pending = None
        off += size
    with open(dst, "wb") as f:
        f.write(b"".join(out))


def main(argv):
    args = [a for a in argv[1:]]
    bid = None
    if "--buildid-dir" in args:
        i = args.index("--buildid-dir")
        bid = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        sys.stderr.write(__doc__)
        return 2
    data, dump, out = args
    pid = next(r.pid for r in jitdump.read(dump) if isinstance(r, jitdump.Header))
    keep, nsamples = sampled_loads(data, dump, pid, bid)
    write_filtered(dump, out, keep)
    total = sum(1 for r in jitdump.read(dump) if isinstance(r, jitdump.CodeLoad))
    print("kept %d of %d loads (%d samples)" % (len(keep), total, nsamples))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
