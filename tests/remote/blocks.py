#!/usr/bin/env python3
"""ljremote.Block on control blocks of every layout, in this process's own
memory (no VM, no perf): versions 3 and 2 read every field (2 has no
mem_rate: the same size, the word unused); version 1 (a VM before the kick)
reads its ten fields and 0 for the rest, and the switch says such a process
cannot be kicked. A request with allocation samples writes want | 0x10 and
mem_rate into a version 3 block, and into a version 2 block only the other
parts: the switch names that pid (no_mem)."""

import ctypes
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
from ljperf import remote as ljremote


def block(version):
    layout = ljremote.LAYOUTS[version]
    vals = [ljremote.MAGIC, version, layout.size, 5, 7, 123, 42, 99, 5, 1]
    vals += [2, 0, 0x1000, 0x2000, 0x3000, 8, 16, 96, 24, 32, 16, 4, 32, 184, 0][:len(ljremote.FIELDS) - 10] \
        if version >= ljremote.KICK_VERSION else []
    buf = ctypes.create_string_buffer(layout.pack(*vals) + b"\0" * 256)
    return buf, ljremote.Block(os.getpid(), ctypes.addressof(buf))


def main():
    ok = True
    for v in (ljremote.KICK_VERSION, ljremote.MEM_VERSION):
        buf2, b2 = block(v)
        c = b2.read()
        ok &= c["version"] == v and c["nstates"] == 2 and c["kick"] == 0x2000 and \
            c["o_vmstate"] == 184 and c["mem_rate"] == 0
        ljremote.ask(b2, os.getpid(), 65536 if v >= ljremote.MEM_VERSION else None)
        c = b2.read()
        ok &= c["want"] == (0x17 if v >= ljremote.MEM_VERSION else 0x07) and \
            c["mem_rate"] == (65536 if v >= ljremote.MEM_VERSION else 0) and c["seq"] == 6
    buf3, b3 = block(ljremote.KICK_VERSION)
    sw = ljremote.RemoteSwitch([os.getpid()], mem_rate=65536)
    ljremote.find_blocks, found = (lambda pid: [ctypes.addressof(buf3)]), ljremote.find_blocks
    try:
        sw.start()
    finally:
        ljremote.find_blocks = found
        sw.stop()
    ok &= sw.no_mem == {os.getpid()} and b3.read()["want"] == 0
    buf1, b1 = block(1)
    c = b1.read()
    ok &= c["version"] == 1 and c["seq"] == 5 and c["nremote"] == 1 and c["nstates"] == 0 \
        and c["kick"] == 0 and c["inject"] == 0
    sw = ljremote.RemoteSwitch([os.getpid()])
    sw.asked, sw._t0 = [(b1, 5)], time.monotonic() - 0.5   # asked 0.5 s ago
    sw._cpu[os.getpid()] = -1                  # "used CPU since the last look"
    sw._kick()
    ok &= sw.kick_error.get(os.getpid()) == "its LuaJIT predates the kick" and not sw.kicks
    print("PASS" if ok else "FAIL", "version 1, 2 and 3 control blocks")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
