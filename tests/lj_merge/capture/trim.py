#!/usr/bin/env python3
"""Trims perf script captures of fakevm to a few samples per distinct stack.

usage: trim.py [--kernel] [--max N] KEEP REFERENCE.txt IN.txt OUT.txt [IN.txt OUT.txt ...]

Samples are chosen on REFERENCE (a capture with plain `perf script` fields):
the first KEEP samples of every distinct user-space callchain (addresses
and symbols; samples with kernel frames are dropped unless --kernel); with
--max, at most N of those, evenly spread over the capture. Every IN file (the
same perf.data printed with other -F fields, or after perf inject) keeps the
samples with the same timestamps, and all its side-band lines
(PERF_RECORD_FORK/COMM/EXIT... of --show-task-events)."""
import sys


def samples(path):
    """Yields (header, lines) per sample; lines include the header."""
    cur = None
    with open(path) as f:
        for ln in f:
            if ln.strip() == "":
                if cur:
                    yield cur
                cur = None
                continue
            if "PERF_RECORD_" in ln and ln[0] not in " \t":
                if cur:
                    yield cur
                cur = None
                yield [ln]             # side-band line: a "sample" of its own
                continue
            if ln[0] not in " \t":
                if cur:
                    yield cur
                cur = [ln]
            elif cur is not None:
                cur.append(ln)
    if cur:
        yield cur


def stamp(header):
    for tok in header.split():
        if tok.endswith(":") and "." in tok and tok[:-1].replace(".", "").isdigit():
            return tok
    raise SystemExit("no time field in: " + header)


def main():
    argv = sys.argv[1:]
    kernel = argv[:1] == ["--kernel"]
    if kernel:
        argv = argv[1:]
    cap = None
    if argv[:1] == ["--max"]:
        cap = int(argv[1])
        argv = argv[2:]
    keep = int(argv[0])
    ref = argv[1]
    seen = {}
    chosen = []
    for s in samples(ref):
        if "PERF_RECORD_" in s[0]:
            continue
        chain = [l.split(None, 1)[1] if l.startswith("\t") else l for l in s[1:]]
        if not kernel and any("[kernel" in l for l in chain):
            continue
        sig = (s[0].split(None, 1)[0], tuple(chain))
        if seen.get(sig, 0) < keep:
            seen[sig] = seen.get(sig, 0) + 1
            chosen.append(stamp(s[0]))
    if cap is not None and len(chosen) > cap:
        chosen = [chosen[i * len(chosen) // cap] for i in range(cap)]
    chosen = set(chosen)
    args = argv[2:]
    for i in range(0, len(args), 2):
        with open(args[i + 1], "w") as out:
            for s in samples(args[i]):
                if "PERF_RECORD_" in s[0]:
                    out.writelines(s)
                elif stamp(s[0]) in chosen:
                    out.writelines(s)
                    if not s[-1].startswith(" ABI"):
                        out.write("\n")
    print("kept %d samples of %d distinct stacks" % (len(chosen), len(seen)))


if __name__ == "__main__":
    main()
