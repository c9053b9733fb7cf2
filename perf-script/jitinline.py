#!/usr/bin/env python3
"""Reader for jit-PID.dump.inline, standard library only: the Lua frames
behind each range of a JIT trace's machine code, written by the patched VM
next to its jitdump (format: emitter/inline.c).

API:
    read(path) -> iterator of Trace(index, addr, size, nodes, ranges, traceno,
                                    root, link, linknode)
        index   the trace's CODE_LOAD code_index in jit-PID.dump
        nodes   [(pc, parent)]: a Lua frame at bytecode address PC (the
                interpreter's link convention: the line is the one of the
                instruction at PC-4); PARENT: 1-based index of its caller's
                node, 0 for the trace's root frame
        ranges  [(off, node)] ascending: from addr+off to the next range (the
                last: to addr+size) the frames of node NODE (1-based) and its
                callers; 0: the trace's root frame only
        traceno the trace's number (TRACE_N); root: its root trace's (itself
                for a root trace), whose root frame the nodes count from
        link    the number of the root trace this one jumps into at its end
                (0: none); linknode: the node of the frames it has then (the
                frames below that trace's root frame; 0: the root frame)
    stacks(trace) -> [tuple of pcs, innermost first] per node (index node-1)

A damaged header raises ValueError; a damaged or truncated record ends the
iteration (what a process killed mid-write leaves). Command line:
jitinline.py FILE prints each trace.
"""

import collections
import sys

HEAD = "ljperf-inline 1"

Trace = collections.namedtuple("Trace",
                               "index addr size nodes ranges traceno root link linknode")


def _trace(head, lines):
    """A Trace from its T line's fields and the N/R lines after it."""
    index, addr, size, nn, nr, traceno, root, link, linknode = [int(x, 16) for x in head]
    if not 0 <= linknode <= nn:
        raise ValueError("bad link node")
    if len(lines) != nn + nr:
        raise ValueError("truncated")
    nodes, ranges = [], []
    for i, ln in enumerate(lines):
        f = ln.split()
        if i < nn:
            pc, parent = int(f[1], 16), int(f[2], 16)
            if f[0] != "N" or len(f) != 3 or not 0 <= parent <= i:
                raise ValueError("bad node line")
            nodes.append((pc, parent))
        else:
            off, node = int(f[1], 16), int(f[2], 16)
            if f[0] != "R" or len(f) != 3 or not 0 <= node <= nn or \
                    off >= max(size, 1) or (ranges and off <= ranges[-1][0]):
                raise ValueError("bad range line")
            ranges.append((off, node))
    return Trace(index, addr, size, nodes, ranges, traceno, root, link, linknode)


def _records(f):
    """(T line's fields, its N/R lines) of each record of F, up to a
    truncated last line or a line outside any record."""
    head, body = None, []
    for ln in f:
        if not ln.endswith("\n"):
            break                           # truncated last line
        if ln.startswith("T "):
            if head is not None:
                yield head, body
            head, body = ln.split()[1:], []
        elif head is None:
            return
        else:
            body.append(ln)
    if head is not None:
        yield head, body


def read(path):
    with open(path, "r", encoding="ascii", errors="replace") as f:
        if f.readline().rstrip("\n") != HEAD:
            raise ValueError("%s: not a jit-PID.dump.inline file" % path)
        for head, body in _records(f):
            try:
                t = _trace(head, body)
            except (ValueError, IndexError):
                return                      # a damaged record ends the file
            yield t


def stacks(trace):
    """Per node: its PCs and its callers', innermost first."""
    out = []
    for pc, parent in trace.nodes:
        out.append((pc,) + (out[parent - 1] if parent else ()))
    return out


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: jitinline.py FILE   (prints each trace's ranges)")
        return 0 if len(argv) == 2 else 2
    try:
        for t in read(argv[1]):
            st = stacks(t)
            print("trace load #%d %#x+%#x" % (t.index, t.addr, t.size))
            for off, node in t.ranges:
                print("  +%#x %s" % (off, " < ".join("%#x" % p for p in st[node - 1])
                                     if node else "root"))
    except (OSError, ValueError) as e:
        print("jitinline.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
