"""The patched VM's register contract with perf: which registers perf
records (perf record --user-regs=) and what the VM puts in them. A leaf:
it imports nothing of ljperf, so every module may import it (perf's
command lines, the frame vocabulary, the memory traps).

The PC, per architecture (os.uname().machine; docs/arm64.md): on x86-64
(vm_patch 0001: rbx holds RB, rbp is the frame pointer) R13 holds the
interpreter's bytecode PC, in recordings of ljperf's VMs before 2026-11 BX;
on aarch64 x21 (LuaJIT's own PC register). perf script prints registers
under the names of the architecture that recorded (x86's upper case, arm64's
lower case), whatever machine runs it: a reader looks for every name of
PC_NAMES, and a line holds one architecture's names only.

What ljperf record does per architecture (ARCHES): the allocation traps
below and the kick (ljperf/kick.py: ptrace with x86-64's user_regs_struct,
which ljperf record -p and --nginx rely on) are x86-64 only.

An allocation trap (x86-64; vm_patch/src/lj_perfmem.c; docs/memory.md): a sampled
allocation writes one byte to a page the VM dropped; perf records the page
fault (EVENT) with the faulting instruction's registers:

  CX   MAGIC << 16 | SKIP << 8 | NFREE << 4 | TYPE: TYPE T_ALLOC, T_FREE
       (frees only) or T_CLOSE (the blocks lua_close frees, every one
       still live); SKIP leaf entries of the chain are the sampler's own
  AX   the block's size in bytes      DX   its address
  SI   RATE | (PHASE & 0xffff) << 32 | (LASTEND & 0xffff) << 48
  R8   the trap's sequence number (per sampling VM state)
  R13  the bytecode PC of the innermost Lua frame, 0 when unknown
  BX, DI, R9, R10, R11, R12, R14 (FREE_REGS): the first NFREE are sampled
       blocks freed since the previous trap, ADDR | (PHASE & 0xffff) << 48

PHASE counts GC cycle boundaries: 2N-1 while the Nth cycle runs, 2N once
it completed; LASTEND is the PHASE of the latest completion (0: none).
"""

import collections
import os

# pc_user_regs: as perf record --user-regs= takes it; pc_reg: as perf
# script prints it (-F uregs); mem: --mem's traps; attach: -p and --nginx.
Arch = collections.namedtuple("Arch", "pc_user_regs pc_reg mem attach")
ARCHES = {
    "x86_64": Arch("r13", "R13", True, True),
    "aarch64": Arch("x21", "x21", False, False),
}
PC_NAMES = ("R13", "x21", "BX")  # every name of the PC in perf script text

PC_REG = ARCHES["x86_64"].pc_reg        # x86-64's, which the traps carry
PC_USER_REGS = ARCHES["x86_64"].pc_user_regs


def host_arch():
    """(machine, its Arch or None) of the machine ljperf runs on."""
    m = os.uname().machine
    return m, ARCHES.get(m)


MAGIC = 0x4c4a4d454d           # "LJMEM", CX bits 16..55
T_ALLOC = 1
T_FREE = 2
T_CLOSE = 3
# A trap's fields: the register of each (perf script's names).
TAG_REG, SIZE_REG, ADDR_REG, RATE_REG, SEQ_REG = "CX", "AX", "DX", "SI", "R8"
# How perf records the traps: every page fault (perf record -e EVENT), with
# the registers above (--user-regs=PC_USER_REGS,USER_REGS).
EVENT = "page-faults/period=1/u"
USER_REGS = "ax,bx,cx,dx,si,di,r8,r9,r10,r11,r12,r14"
FREE_REGS = ("BX", "DI", "R9", "R10", "R11", "R12", "R14")
# perf's names of the page-fault software event (perf list: "page-faults OR
# faults"), before any ':u' or '/period=1/u'.
FAULT_EVENTS = ("page-faults", "faults", "minor-faults", "major-faults")
