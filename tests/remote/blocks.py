#!/usr/bin/env python3
"""ljremote.Block on control blocks of both layouts, in this process's own
memory (no VM, no perf): version 2 reads every field; version 1 (a VM
before the kick) reads its ten fields and 0 for the rest, and the switch
says such a process cannot be kicked."""

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
        if version == ljremote.VERSION else []
    buf = ctypes.create_string_buffer(layout.pack(*vals) + b"\0" * 256)
    return buf, ljremote.Block(os.getpid(), ctypes.addressof(buf))


def main():
    ok = True
    buf2, b2 = block(2)
    c = b2.read()
    ok &= c["version"] == 2 and c["nstates"] == 2 and c["kick"] == 0x2000 and c["o_vmstate"] == 184
    buf1, b1 = block(1)
    c = b1.read()
    ok &= c["version"] == 1 and c["seq"] == 5 and c["nremote"] == 1 and c["nstates"] == 0 \
        and c["kick"] == 0 and c["inject"] == 0
    sw = ljremote.RemoteSwitch([os.getpid()])
    sw.asked, sw._t0 = [(b1, 5)], time.monotonic() - 0.5   # asked 0.5 s ago
    sw._cpu[os.getpid()] = -1                  # "used CPU since the last look"
    sw._kick()
    ok &= sw.kick_error.get(os.getpid()) == "its LuaJIT predates the kick" and not sw.kicks
    print("PASS" if ok else "FAIL", "version 1 and 2 control blocks")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
