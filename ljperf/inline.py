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
iteration (what a process killed mid-write leaves); a damaged one (not
merely cut short, as a writer still running leaves the last) is said in
DAMAGE, a list when given: "offset N: bad node record, M bytes not read".
Command line: `python3 -m ljperf.inline FILE` prints each trace.
"""

import collections
import struct
import sys

HEAD = b"ljperf-inline 2\n"
REC = struct.Struct("<3Q6I")        # index addr size nnode nrange traceno root link linknode
NODE = struct.Struct("<QII")        # pc parent 0
RANGE = struct.Struct("<II")        # off node

Trace = collections.namedtuple("Trace",
                               "index addr size nodes ranges traceno root link linknode")


def _trace(data, at):
    """The Trace of the record at offset AT of DATA and the offset after
    it; ValueError if it is damaged or cut short."""
    if at + REC.size > len(data):
        raise ValueError("truncated")
    index, addr, size, nn, nr, traceno, root, link, linknode = REC.unpack_from(data, at)
    at += REC.size
    end = at + nn * NODE.size + nr * RANGE.size
    if end > len(data):
        raise ValueError("truncated")
    if not 0 <= linknode <= nn:
        raise ValueError("bad link node")
    nodes, ranges = [], []
    for i, (pc, parent, pad) in enumerate(NODE.iter_unpack(data[at:at + nn * NODE.size])):
        if pad or parent > i:
            raise ValueError("bad node")
        nodes.append((pc, parent))
    at += nn * NODE.size
    for off, node in RANGE.iter_unpack(data[at:end]):
        if node > nn or off >= max(size, 1) or (ranges and off <= ranges[-1][0]):
            raise ValueError("bad range")
        ranges.append((off, node))
    return Trace(index, addr, size, nodes, ranges, traceno, root, link, linknode), end


def read(path, damage=None):
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(HEAD):
        raise ValueError("%s: not a jit-PID.dump.inline file (version 2)" % path)
    at = len(HEAD)
    while at < len(data):
        try:
            t, at = _trace(data, at)
        except ValueError as e:             # a damaged record ends the file
            if damage is not None and str(e) != "truncated":
                damage.append("offset %d: %s record, %d bytes not read"
                              % (at, e, len(data) - at))
            return
        yield t


def stacks(trace):
    """Per node: its PCs and its callers', innermost first."""
    out = []
    for pc, parent in trace.nodes:
        out.append((pc,) + (out[parent - 1] if parent else ()))
    return out


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: python3 -m ljperf.inline FILE   (prints each trace's ranges)")
        return 0 if len(argv) == 2 else 2
    try:
        for t in read(argv[1]):
            st = stacks(t)
            print("trace load #%d %#x+%#x" % (t.index, t.addr, t.size))
            for off, node in t.ranges:
                print("  +%#x %s" % (off, " < ".join("%#x" % p for p in st[node - 1])
                                     if node else "root"))
    except (OSError, ValueError) as e:
        print("ljperf.inline: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
