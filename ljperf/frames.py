"""Frame vocabulary of ljperf: what a perf callchain line is (Lua function,
JIT trace, VM plumbing, builtin, C, kernel) and how it is printed. lj_merge
folds with it and ljperf colours flame graphs with it (KINDS,
VM_PREFIXES); nothing else decides what a frame is."""

import os
import re

from ljperf.perfscript import is_num, parse_reg, split_frame
from ljperf.vmregs import PC_NAMES


def interp_pc(regs):
    """The interpreter's PC in a -F uregs line (R13, x21 or BX), or None."""
    for name in PC_NAMES:
        pc = parse_reg(regs, name)
        if pc is not None:
            return pc
    return None

# perf inject --jit writes one ELF per CODE_LOAD: jitted-PID-INDEX.so. Its
# .text starts at this file offset (perf's genelf GEN_ELF_TEXT_OFFSET:
# sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) rounded up to 16), which is how
# perf prints DSO-relative addresses inside it.
GEN_ELF_TEXT_OFFSET = 0x80

# Kinds of printed (folded) frames, the one list: lj_merge --kinds and
# pprof's `kind` label name them so, ljperf colours them so and its legend
# lists them in this order ("root": the comm frame; "unknown": frames nothing
# named). The first six are the kinds of interned frames (Fr.kind, K_*:
# KINDS[K_LUA] == "lua"); K_KERNEL folds like K_C.
KINDS = ("lua", "trace", "builtin", "vm", "c", "kernel", "root", "unknown")
K_LUA, K_TRACE, K_BUILTIN, K_VM, K_C, K_KERNEL = range(6)
NO_CHAIN = "[no call chain]"       # the frame of a sample printed without one

VM_PREFIXES = ("lj_BC_", "lj_vm_", "lj_cont_", "lj_vmeta_", "lj_fff_")
_BUILTIN_PREFIXES = ("lj_ff_", "lj_ffh_", "lj_cf_")
# lj_vm_* that are arithmetic helpers, not plumbing: real work, called by the
# interpreter's handlers or straight from trace code. They set up no frame,
# so their caller is missing from the chain: from the interpreter that is a
# handler (dropped anyway), from a trace it is the trace itself. Kept as C
# frames so that time is not silently given to the Lua frame below.
_VM_HELPERS = frozenset((
    "lj_vm_mod", "lj_vm_modi", "lj_vm_floor", "lj_vm_ceil", "lj_vm_trunc",
    "lj_vm_floor_sse", "lj_vm_ceil_sse", "lj_vm_trunc_sse", "lj_vm_round_sse",
    "lj_vm_foldarith", "lj_vm_foldfpm", "lj_vm_powi", "lj_vm_powi_sse",
    "lj_vm_pow_sse", "lj_vm_exp_x87", "lj_vm_exp2_x87", "lj_vm_log2",
    "lj_vm_tobit", "lj_vm_cpuid", "lj_vm_errno"))
# The FFI's call and callback machinery (C functions of LuaJIT): dropped like
# the VM plumbing, so an FFI call from the interpreter shows as caller;callee,
# as it does from a trace (where the call is compiled inline). The cdata
# __call metamethod (ffi.meta___call) goes with lj_ccall_func right above it.
_FFI_PLUMBING = frozenset(("lj_ccall_func", "lj_ccallback_enter",
                           "lj_ccallback_leave"))
# VM frames where the PC register (R13, x21) is not the interpreter's
# bytecode PC: entries from C, the FFI (C code runs above them) and trace
# exits.
_NOT_PC = frozenset(("lj_vm_ffi_call", "lj_vm_ffi_callback", "lj_vm_pcall",
                    "lj_vm_cpcall", "lj_vm_call", "lj_vm_resume",
                    "lj_vm_exit_handler"))
# Library prefixes of LuaJIT's fast functions / library C functions
# (LJLIB_MODULE names); anything else after lj_ff_ is a base function.
_LIBS = ("coroutine", "string", "table", "math", "bit", "io", "os", "debug",
         "jit", "ffi", "package", "buffer")
_SUBLIBS = ("jit_util_", "jit_profile_", "jit_opt_")

_ABS_DSOS = frozenset(("[unknown]", "//anon", "[anon]", "[heap]", "[stack]",
                       "[anon_hugepage]"))


def builtin_name(sym):
    """lj_ff_string_byte -> string.byte, lj_cf_io_method_write -> file:write,
    lj_ff_ipairs_aux -> ipairs_aux, lj_cf_jit_util_funcinfo -> jit.util.funcinfo."""
    rest = sym[sym.index("_", 3) + 1:]
    for sub in _SUBLIBS:
        if rest.startswith(sub):
            return sub[:-1].replace("_", ".") + "." + rest[len(sub):]
    lib, us, fn = rest.partition("_")
    if us and lib in _LIBS and fn:
        if fn.startswith("method_") and len(fn) > 7:
            return ("file" if lib == "io" else lib) + ":" + fn[7:]
        return lib + "." + fn
    return rest


def clean_c_name(sym):
    """C/C++ symbol as a folded frame: cut the argument list (but keep
    '(anonymous namespace)'), no ';'."""
    i = sym.find("(")
    while i >= 0:
        if sym.startswith("(anonymous namespace)", i):
            i = sym.find("(", i + 21)
            continue
        if i > 0:
            sym = sym[:i]
        break
    if ";" in sym:
        sym = sym.replace(";", ":")
    return sym or "[unknown]"


def parse_trace_name(name):
    """TRACE_N::CHUNK:LINE::OWNER -> (OWNER, LINE or None); None if not a trace."""
    if not name.startswith("TRACE_"):
        return None
    parts = name.split("::", 2)
    if len(parts) < 2:
        return None
    owner = parts[2] if len(parts) == 3 and parts[2] else parts[1]
    _, _, ln = parts[1].rpartition(":")
    return owner, (int(ln) if is_num(ln) else None)


class Fr:
    """One interned frame (per distinct callchain line, or per resolved
    (load, address)). KIND/NAME/LABEL is what gets printed; DYN frames are
    absolute user addresses re-resolved per sample through the jitdump."""
    __slots__ = ("kind", "name", "label", "tline", "load", "pid", "index",
                 "off", "addr", "dyn", "interp", "ffi", "sym", "lines", "dso", "ip")

    def __init__(self, kind, name):
        self.kind = kind
        self.name = name          # printed name (C, VM, builtin)
        self.label = None         # Lua label (LUA) / owner label (TRACE)
        self.tline = None         # trace start line (TRACE)
        self.load = None          # ljresolve.Load once known
        self.pid = None           # jitted-PID-N.so: look the load up later
        self.index = None
        self.off = None           # offset inside the load
        self.addr = None          # absolute address (DYN frames)
        self.dyn = False
        self.interp = False       # VM code or helper: R13 may be the bytecode PC
        self.ffi = False          # FFI call/callback machinery (lj_ccall_func)
        self.sym = None
        self.lines = None         # cached line (fold time)
        self.dso = None           # native code: perf's dso and address in it
        self.ip = None


def name_frame(name, load=None, off=None):
    """A frame named by jitdump/perf map/jitted .so: trace, VM code the VM
    describes itself (lj_vm_exit_stubs) or Lua label."""
    t = parse_trace_name(name)
    if t is None and name.startswith(VM_PREFIXES):
        fr = Fr(K_VM, name)
    elif t is not None:
        fr = Fr(K_TRACE, name)
        fr.label, fr.tline = t
    else:
        fr = Fr(K_LUA, name)
        fr.label = name
    fr.load = load
    fr.off = off
    return fr


def _is_kernel(addr, dso):
    return addr >= 0xffff800000000000 or (dso is not None and dso.startswith("[kernel"))


def _is_abs_dso(dso):
    if dso is None or dso in _ABS_DSOS:
        return True
    if dso.startswith("[anon") or dso.startswith("//anon"):
        return True
    b = os.path.basename(dso)
    return b.startswith("perf-") and b.endswith(".map")


def _jitted(dso):
    """'/tmp/jitted-123-45.so' -> (123, 45)."""
    if dso is None:
        return None
    b = dso.rpartition("/")[2]
    if not (b.startswith("jitted-") and b.endswith(".so")):
        return None
    p, _, i = b[7:-3].partition("-")
    if is_num(p) and is_num(i):
        return int(p), int(i)
    return None


def make_frame(text):
    """Parses one callchain line (stripped) into an Fr, or None."""
    sp = split_frame(text)
    if sp is None:
        return None
    fr = _frame(*sp)
    if fr is not None and fr.index is None:   # native code: where it is
        fr.ip, fr.dso = sp[0], sp[3]
    return fr


def _frame(addr, sym, off, dso):
    if sym == "[unknown]":
        sym = None
    j = _jitted(dso)
    if j is not None:
        pid, index = j
        if off is None:      # no symoff: the .so's text starts at a fixed offset
            off = addr - GEN_ELF_TEXT_OFFSET
        if sym is None:
            fr = Fr(K_LUA, None)          # name from the dump at fold time
        else:
            fr = name_frame(clean_name(sym))
        fr.pid, fr.index, fr.off = pid, index, off
        fr.sym = sym
        return fr
    if sym is None:
        if _is_kernel(addr, dso):
            return Fr(K_C, "[unknown]")
        if _is_abs_dso(dso):
            fr = Fr(K_C, "[unknown]")
            fr.dyn = True
            fr.addr = addr
            return fr
        return Fr(K_C, "[" + os.path.basename(dso) + "]")
    if sym.startswith("lj_"):
        base = sym.partition(".")[0]          # lj_vm_foldfpm.cold
        if base in _VM_HELPERS:
            fr = Fr(K_C, base)
            fr.interp = True
            return fr
        if sym.startswith(VM_PREFIXES):
            fr = Fr(K_VM, sym)
            fr.interp = base not in _NOT_PC
            return fr
        if base in _FFI_PLUMBING:
            fr = Fr(K_VM, sym)
            fr.ffi = True
            return fr
        if sym.startswith(_BUILTIN_PREFIXES):
            fr = Fr(K_BUILTIN, builtin_name(sym))
            fr.sym = sym
            return fr
    trace = sym.startswith("TRACE_") and parse_trace_name(sym) is not None
    if not _is_kernel(addr, dso) and (trace or (dso is not None and _is_abs_dso(dso))):
        # Anonymous code named by perf-PID.map (JIT traces): re-resolve
        # through the jitdump (time-accurate) when there is one.
        if trace:
            fr = name_frame(clean_name(sym))
        else:                              # not a trace: keep perf's name
            fr = Fr(K_C, clean_c_name(sym))
        fr.dyn = True
        fr.addr = addr
        fr.sym = sym
        return fr
    return Fr(K_KERNEL if _is_kernel(addr, dso) else K_C, clean_c_name(sym))


def clean_name(s):
    """A name from a jitdump, perf map or jitted .so as a folded frame: no
    surrounding blanks, no ';' (the folded frame separator)."""
    s = str(s).strip()
    if ";" in s:
        s = s.replace(";", ":")
    return s


_RUNTIME_PREFIXES = ("lj_", "lua_", "luaL_", "luaJIT_", "luaopen_")
# lj_merge's Lua naming, the one pattern: [NAME@]CHUNK:LINE[:CURLINE], where
# CURLINE (--lines) is a number or `?` (unknown); groups NAME, CHUNK, LINE,
# CURLINE.
LUA_LABEL = re.compile(r"^(?:([^@;]*)@)?([^@;]+?):([0-9]{1,20})(?::([0-9]{1,20}|\?))?$")
_BUILTIN = re.compile(r"^(?:%s|file)[.:][A-Za-z_]\w*(?:\.\w+)*$" % "|".join(_LIBS))
_PRIORITY = ("trace", "lua", "builtin", "vm", "kernel", "c")


def frame_kind(name, said=None):
    """Colour class of one folded frame below the root (comm) frame.

    SAID is what `lj_merge --kinds` reported for NAME (a set of lua, trace,
    builtin, vm, c, kernel); without it the kind is read from lj_merge's
    naming (see lj_merge --help, "Frames"): `_[j]` suffix = JIT trace (with
    --jit-tag), NAME@CHUNK:LINE or CHUNK:LINE[:CURLINE] = Lua function,
    lj_BC_*/lj_vm_*/... = VM, string.byte/file:write/... = builtin, `_[k]` =
    kernel (FlameGraph's convention), anything else = C.
    Then C functions of LuaJIT itself (lj_*, lua_*, luaL_*, luaJIT_*,
    luaopen_*: the runtime, GC, JIT compiler, C API) count as "vm", and
    `[unknown]` (an address nothing names) and `[no call chain]` (a
    sample perf printed without frames) are "unknown"."""
    if name in ("[unknown]", "[no call chain]"):
        return "unknown"
    kind = None
    if said:
        for k in _PRIORITY:
            if k in said:
                kind = k
                break
    if kind is None:
        if name.endswith("_[j]"):
            kind = "trace"
        elif name.endswith("_[k]"):
            kind = "kernel"
        elif name.startswith(VM_PREFIXES):
            kind = "vm"
        elif LUA_LABEL.match(name):
            kind = "lua"
        elif _BUILTIN.match(name):
            kind = "builtin"
        else:
            kind = "c"
    if kind == "c" and name.startswith(_RUNTIME_PREFIXES):
        kind = "vm"
    return kind
