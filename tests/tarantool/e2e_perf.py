#!/usr/bin/env python3
"""End-to-end perf test for Tarantool: call chains reach their roots, and
lj_merge's folded stacks interleave Tarantool's C frames and the app's Lua
functions in the order examples/tarantool/app.lua calls them.

Runs
----
For each run (BINARY, JIT mode) it uses a fresh temporary directory DIR
(also TMPDIR of the app and LUAJIT_PERF_DIR) and does:

  LUAJIT_PERF=1 [LJPERF_APP_JIT=off] perf --buildid-dir DIR/.debug record \\
      -k mono -g --call-graph fp --user-regs=r13 -o DIR/perf.data BINARY app.lua
  perf --buildid-dir DIR/.debug inject --jit -i DIR/perf.data -o DIR/perf.jit.data
  perf --buildid-dir DIR/.debug script -i DIR/perf.jit.data \\
      -F comm,pid,tid,time,period,ip,sym,symoff,dso,uregs > DIR/perf.script
  lj_merge --jit-tag --jitdump DIR --kinds DIR/kinds DIR/perf.script

(lj_merge is --lj-merge, default $LJ_MERGE or perf-script/lj_merge.py;
--jitdump DIR keeps it from reading other processes' dumps in /tmp.)

The runs are: tarantool-base with the JIT on (only with --tarantool-base;
for comparison: nothing is asserted on it), then tarantool with the JIT on
(the issue's command as it is) and tarantool with the JIT off
(LJPERF_APP_JIT=off makes app.lua call jit.off() first). --jit on|off|both
(default both) picks the tarantool runs. Each recording serves all the
checks of its run.

Check 1: roots (perf script; asserted on the JIT-on run)
-------------------------------------------------------
The share of the user-space samples (ip in user space) whose frame-pointer
call chain reaches a root: `main`, a fiber start (`fiber_loop`, called by
libcoro's `coro_init` trampoline) or a Tarantool thread start
(`cord_thread_func`, libeio's `etp_proc`) must be >= --min-share (99%).
--scope own restricts the count to samples whose leaf is not in a system
library (/usr, /lib: glibc, ld.so, ICU, OpenSSL are built without frame
pointers, so a sample taken inside them may lose its chain whatever the VM
does); the default, --scope all, counts every user-space sample.
It is asserted on the JIT-on and the JIT-off run. (The JIT-off run found
a VM bug, since fixed: a Lua function that a C function tail-calls through
lj_meta_tailcall -- the __index, __eq... of an FFI metatype such as
Tarantool's tuples -- got a record linked to itself.)

Checks 2-6: folded stacks (lj_merge, every run of tarantool)
-----------------------------------------------------------
lj_merge names a Lua function NAME@CHUNK:LINE (LINE: where it is defined);
app.lua's functions are ljperf_*@<path>/app.lua:LINE, LINE read from
app.lua's `local function ljperf_*` lines; they are called W (box worker),
B (box batch), T (on_replace), O/M/I (hot outer/mid/inner), CW/CR (codec
worker/round) below. A stack is read outermost frame first: `comm;...;leaf`.
"A fiber's stack" is a stack whose first Lua frame is W or CW.
Weights are lj_merge's (sums of sample periods); every check requires a
minimum weight of what it looks at AND that >= 99% (MIN_VALID) of that
weight has the expected shape: a few samples taken at a function's first
instructions (before it pushes rbp) lose their caller, whatever the VM
does, so no check asks for 100%.

JIT traces. lj_merge shows a sample in a trace as the trace's root function
and the functions the trace inlined at that address (jit-PID.dump.inline),
all tagged _[j] here with --jit-tag; the frames under it are records, also
those a trace made before it jumped into another trace (vm_patch 0007).
So in every check below a chain of Lua frames, interpreted and traced,
must BE the expected chain: a missing frame fails as a wrong one does.
Among trace frames only the expected chain's and app.lua's functions are
compared (a Tarantool library function a trace inlined, e.g. msgpackffi's
encode_int, is not app.lua's to judge). Checks 2-6 mean the
same with the JIT on and off; check 4 also demands the whole chain for
hot_inner's samples (below), with the JIT on in each of --runs runs (trace
layouts differ between runs).

2. fiber roots. app.lua starts its workers with fiber.create(W, ...) and
   fiber.create(CW, ...). Tarantool runs a Lua fiber as libcoro's coro_init
   -> fiber_loop -> fiber_cxx_invoke -> lua_fiber_run_f (src/lua/fiber.c)
   -> luaT_call -> lua_pcall -> the Lua function. So every stack containing
   W or CW must start (below the comm frame) with coro_init;fiber_loop,
   have lua_fiber_run_f after them and its first Lua frame W or CW right
   after lua_pcall. One [unknown] frame is allowed between the comm and
   coro_init: perf prints the null return address at the bottom of a
   coroutine stack as a frame `0 [unknown]`, and lj_merge keeps it.
   Requires: W/CW stacks >= 50% of all the weight (the app's CPU is its
   four worker fibers), >= 99% of it so rooted.

3. box C API. ljperf_box_batch (B, called by W) does space:replace(t),
   pk:select(k), by_group:select(k, {limit=4}), space:update(k, ops).
   space_mt.replace ends with `return internal.replace(...)` and
   space_mt.update with `return ...:update()` whose index_mt.update ends
   with `return internal.update(...)`: tail calls, so their Lua frames are
   gone and B calls the C functions lbox_replace / lbox_index_update
   (src/box/lua/index.c) itself; these call box_replace / box_update ->
   box_process_rw (box.cc) -> space_execute_dml -> memtx_space_execute_*
   and txn_commit_stmt (txn.c). select is base_index_mt.select_ffi
   (schema.lua), not a tail call, which calls box_select through the FFI
   (lj_merge shows an FFI call as caller;callee) -> memtx tree iterators
   (tree_iterator_*, memtx_tree_*). Expected, in W's stacks:
     W;B;lbox_replace;box_replace;box_process_rw;...;memtx_*|txn_*
     W;B;lbox_index_update;box_update;box_process_rw;...;memtx_*|txn_*
     W;B;select_ffi;box_select;...;memtx_*|tree_iterator_*
   The outermost box-layer frame (lbox_replace, lbox_index_update,
   box_replace, box_update, box_select, box_process_rw, space_execute_dml,
   txn_commit_stmt, memtx_space_execute_*) of a W stack must be the first
   frame of one of these C chains, called right from the Lua chain for it
   (trace rule), and the box-layer frames above it must be that C chain in
   its order (as far as the stack goes), then only the op's own deeper ones
   (space_execute_dml, memtx_space_execute_replace|update,
   txn_commit_stmt; none for select). Other C frames may sit in between:
   the API functions call helpers (luaT_tuple_new, box_process1,
   fiber_gc...). Requires: >= 99% of the box-layer weight so, and each of
   the three full chains (down to a memtx/txn/tree-iterator frame) >=
   MIN_BOX_OP of W's weight.

4. hot Lua nesting. W calls ljperf_hot_outer(iter, 8) (not a tail call:
   the result is used). hot_outer(seed, depth) with depth > 0 calls
   hot_outer(seed + 1, depth - 1) and uses the result (not a tail call), so
   depths 8..1 are 8 frames; at depth 0 it does `return ljperf_hot_mid(...)`,
   a TAIL call, so depth 0 has no frame of its own; hot_mid calls
   hot_inner(...) inside an expression (not a tail call). Expected chain:
     W;O;O;O;O;O;O;O;O;M;I            (8 x O, then M, then I)
   The Lua frames of a W stack that holds O, M or I: right after W, a run
   of consecutive O/M/I frames that must match the start of that chain
   (the leaf function can be any of them) with the trace rule above, and no
   O/M/I after the run. Requires >= MIN_HOT of W's weight in such stacks,
   >= 99% of it valid; with the JIT off also >= MIN_HOT_FULL of it on the
   whole chain W;8xO;M;I (hot_inner's loop is where the time goes). And,
   JIT on or off, of the stacks whose last hot frame is I, >= MIN_INNER_FULL
   have the whole chain W;8xO;M;I (trace frames count as frames: a trace
   that jumps into another in a frame it made writes its record, vm_patch
   0007), in every run of --runs.

5. C -> Lua trigger. space:on_replace(T) registers T; Tarantool runs it
   from C in every replace and update (both change a tuple):
   box_process_rw -> txn_commit_stmt -> trigger_run (src/lib/core/trigger.cc)
   -> lbox_trigger_run (src/lua/trigger.c) -> luaT_call -> lua_pcall -> T.
   Expected, in W's stacks:
     W;B;lbox_replace;box_replace;...;lua_pcall;T
     W;B;lbox_index_update;box_update;...;lua_pcall;T
   Tarantool >= 3.0 runs space triggers from its trigger registry instead:
   txn_commit_stmt -> space_on_replace (src/box/space.c) ->
   func_adapter_lua_call (src/box/lua/func_adapter.c) -> luaT_call ->
   lua_pcall -> T; the version is read from `BINARY --version`.
   With box_process_rw, txn_commit_stmt, trigger_run, lbox_trigger_run (3.x:
   space_on_replace, func_adapter_lua_call),
   luaT_call, lua_pcall in that order between box_replace/box_update and T,
   no Lua frame between B and T, lua_pcall right before T, and the Lua
   frames below B's C callee = W;B (trace rule).
   Requires: T's stacks >= MIN_TRIGGER of W's weight (T is tiny: it counts
   and tests new[3]; ~0.8% of W measured), >= 99% of it so.

6. json/msgpack. ljperf_codec_round (CR, called by CW) calls json.encode,
   json.decode, msgpack.encode and msgpack.decode: Lua C functions
   json_encode / json_decode (third_party/lua-cjson) and lua_msgpack_encode
   / lua_msgpack_decode (src/lua/msgpack.c; lua_msgpack_decode tail-calls
   lua_msgpack_decode_string/_cdata, so either may be the frame).
   Expected, in CW's stacks: CW;CR;<entry>;... The outermost of these
   entries in a CW stack must come right after the Lua frames CW;CR (trace
   rule). Requires >= 99% of the entries' weight so, and each of json
   encode, json decode, msgpack encode, msgpack decode >= MIN_CODEC of CW's
   weight.

Negative controls. After the checks, each of 2-6 is run again on the same
stacks with a deliberately wrong expectation (fiber stacks rooted at main;
box C API called from CR; the trigger called straight from B; the hot
chain called from B, reversed (inner;mid;outer) or with 9 hot_outer frames
(ignoring the tail call); json/msgpack called from CW): each must FAIL, else the test fails (a
check that cannot fail checks nothing).

What the folded checks do not see: a sample whose chain broke before its
W/CW/T frame is not in any of their denominators; check 1 counts those.

tarantool-base (with --tarantool-base) gets the same report, marked as a
comparison: its VM keeps no frame chain, so checks 2-6 fail there (no Lua
frame at all) and check 1 is low. Nothing is asserted on it.

Exit status: 0 pass, 1 fail (also when perf is not installed or fails).
Removes DIR and /tmp/perf-PID.map of the traced process unless --keep.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
from ljperf import folded  # the one folded and kinds reader
from ljperf import perfscript  # the one perf script reader
from tests.lib import ljptest

ROOTS = {
    'main': 'main',
    'fiber_loop': 'fiber start',
    'coro_init': 'fiber start',
    'cord_thread_func': 'thread start',
    'etp_proc': 'thread start',
}
FIELDS = 'comm,pid,tid,time,period,ip,sym,symoff,dso,uregs'

# Folded-stack thresholds (shares of weight, see the docstring).
MIN_VALID = 99.0        # % of what a check looks at that must have the expected shape
MIN_FIBERS = 50.0       # % of all weight in W/CW stacks
MIN_BOX_OP = 1.0        # % of W's weight per full box chain (replace, update, select)
MIN_HOT = 5.0           # % of W's weight in hot stacks (the app measures ~20%)
MIN_HOT_FULL = 80.0     # % of the hot weight on the whole chain, JIT off
MIN_INNER_FULL = 95.0   # % of hot_inner's weight on the whole chain, JIT on or off
MIN_TRIGGER = 0.15      # % of W's weight in T's stacks (~0.8% measured)
MIN_CODEC = 2.0         # % of CW's weight per json/msgpack entry group


class Sample:
    __slots__ = ('comm', 'pid', 'tid', 'period', 'frames')

    def __init__(self, comm, pid, tid, period):
        self.comm, self.pid, self.tid, self.period = comm, pid, tid, period
        self.frames = []          # (addr, sym, dso), leaf first


def parse_script(path):
    """perf script text -> [Sample], read with perfscript (the one reader)."""
    samples = []
    with open(path, 'rb') as f:
        for x in perfscript.read_samples(f):
            if x.pid is None:
                continue
            cur = Sample(x.comm, x.pid, x.tid, x.period or 1)
            cur.frames = [(a, sym or '[unknown]', dso or '[unknown]')
                          for a, sym, _, dso in x.frames]
            samples.append(cur)
    return samples


def is_system(frame):
    dso = frame[2]
    return dso.startswith('/usr/') or dso.startswith('/lib')


def is_kernel(frame):
    addr, _, dso = frame
    return dso.startswith('[kernel') or addr >= 0xffff800000000000


def analyse(samples):
    """Returns a dict of counts over user-space samples."""
    res = {'samples': len(samples), 'user': 0, 'reached': 0, 'tx_user': 0, 'tx_reached': 0,
           'own': 0, 'own_reached': 0,
           'roots': collections.Counter(), 'threads': collections.Counter(),
           'missed_leaf': collections.Counter(), 'missed_last': collections.Counter(),
           'missed_dso': collections.Counter(),
           'pids': set()}
    for s in samples:
        if s.frames and is_kernel(s.frames[0]):
            continue
        res['pids'].add(s.pid)
        res['user'] += 1
        tx = s.tid == s.pid
        res['tx_user'] += tx
        res['threads'][s.comm] += 1
        if not s.frames:
            # perf script drops a whole chain holding a value in -4095..-1:
            # garbage, so it misses (its leaf is unknown: not 'own').
            res['missed_leaf']['(chain dropped by perf)'] += 1
            res['missed_dso']['?'] += 1
            res['missed_last']['?'] += 1
            continue
        own = not is_system(s.frames[0])
        res['own'] += own
        root = None
        for _, sym, _ in s.frames:
            if sym in ROOTS:
                root = sym
                break
        if root:
            res['reached'] += 1
            res['tx_reached'] += tx
            res['own_reached'] += own
            res['roots'][root] += 1
        else:
            res['missed_leaf'][s.frames[0][1]] += 1
            res['missed_dso'][os.path.basename(s.frames[0][2])] += 1
            res['missed_last'][s.frames[-1][1]] += 1
    return res


def pct(a, b):
    return 100.0 * a / b if b else 0.0


# ---------------------------------------------------------------------------
# Folded stacks
# ---------------------------------------------------------------------------

class Frame:
    __slots__ = ('name', 'lua', 'trace', 'fid')

    def __init__(self, name, lua, trace, fid):
        self.name = name          # as printed, without the _[j] tag
        self.lua = lua            # a Lua function (interpreted or trace)
        self.trace = trace        # a JIT trace frame
        self.fid = fid            # short id of a known Lua function, else None


class Names:
    """Lua function ids: app.lua's ljperf_* functions (by the line of their
    `local function` in app.lua) and Tarantool's select_ffi."""

    def __init__(self, app, required=('box_worker', 'box_batch', 'on_replace', 'hot_outer',
                                      'hot_mid', 'hot_inner', 'codec_worker', 'codec_round')):
        base = re.escape(os.path.basename(app))
        self.app = {}
        with open(app, encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                m = re.match(r'\s*local\s+function\s+ljperf_(\w+)\s*\(', line)
                if m:
                    self.app[m.group(1)] = n
        self.res = [(fid, re.compile(r'^ljperf_%s@(?:.*/)?%s:%d$' % (fid, base, line)))
                    for fid, line in self.app.items()]
        self.res.append(('select_ffi', re.compile(r'^base_index_mt\.select_ffi@builtin/box/schema\.lua:\d+$')))
        for fid in required:
            if fid not in self.app:
                raise RuntimeError('%s has no `local function ljperf_%s`'
                                   % (os.path.basename(app), fid))

    def fid(self, name):
        for fid, rx in self.res:
            if rx.match(name):
                return fid
        return None

    def is_app(self, fid):
        return fid in self.app


def parse_folded(text, kinds, names):
    """lj_merge --jit-tag output -> [(frames, weight)], frames[0] = comm."""
    cache = {}
    stacks = []
    for names_, n in folded.parse(text.splitlines()):
        frames = []
        for i, nm in enumerate(names_):
            if i == 0:
                frames.append(Frame(nm, False, False, None))
                continue
            fr = cache.get(nm)
            if fr is None:
                ks = kinds.get(nm, set())
                trace = 'trace' in ks
                lua = trace or 'lua' in ks
                name = nm[:-4] if trace and nm.endswith('_[j]') else nm
                fr = cache[nm] = Frame(name, lua, trace, names.fid(name) if lua else None)
            frames.append(fr)
        stacks.append((frames, int(n)))
    return stacks


def chain_ok(lua, expected, names, prefix=False):
    """Do Lua frames LUA (outermost first) match EXPECTED (fids), exactly
    (or, with PREFIX, its start)? Trace frames (after the interpreted ones:
    the trace's function and what it inlined at the sampled address) count
    like interpreted ones; of them only EXPECTED's and app.lua's functions
    are compared (a trace may have inlined a library function)."""
    k = next((i for i, f in enumerate(lua) if f.trace), len(lua))
    if any(not f.trace for f in lua[k:]):
        return False
    ids = [f.fid for f in lua[:k]]
    traced = [f.fid for f in lua[k:] if names.is_app(f.fid) or f.fid in expected]
    ids += traced
    if prefix:
        return len(ids) <= len(expected) and ids == expected[:len(ids)]
    return ids == expected


def first_lua(frames):
    for f in frames:
        if f.lua:
            return f
    return None


def is_subsequence(sub, seq):
    it = iter(seq)
    return all(any(x == y for y in it) for x in sub)


class Result:
    def __init__(self, name):
        self.name = name
        self.ok = True
        self.lines = []           # what was measured
        self.problems = []
        self.examples = []

    def need(self, cond, msg):
        if not cond:
            self.ok = False
            self.problems.append(msg)

    def example(self, frames, w):
        if len(self.examples) < 3:
            self.examples.append('%d %s' % (w, ';'.join(
                f.name + ('_[j]' if f.trace else '') for f in frames)[-400:]))


def short(frames):
    return ';'.join((f.fid or f.name) + ('_[j]' if f.trace else '') for f in frames)


# Expectations written from app.lua (see the docstring); the negative
# controls replace parts of them.
HOT_CHAIN = ['box_worker'] + ['hot_outer'] * 8 + ['hot_mid', 'hot_inner']
EXPECT = {
    'fiber_root': {'root': ['coro_init', 'fiber_loop'], 'via': 'lua_fiber_run_f',
                   'call': 'lua_pcall', 'workers': ('box_worker', 'codec_worker')},
    'box_api': {'ops': {
        'replace': (['box_worker', 'box_batch'],
                    ['lbox_replace', 'box_replace', 'box_process_rw'], r'^(memtx_|txn_)',
                    r'^(space_execute_dml|memtx_space_execute_replace|txn_commit_stmt)$'),
        'update': (['box_worker', 'box_batch'],
                   ['lbox_index_update', 'box_update', 'box_process_rw'], r'^(memtx_|txn_)',
                   r'^(space_execute_dml|memtx_space_execute_update|txn_commit_stmt)$'),
        'select': (['box_worker', 'box_batch', 'select_ffi'],
                   ['box_select'], r'^(memtx_|tree_iterator_)', r'^$')}},
    'trigger': {'lua': ['box_worker', 'box_batch'],
                'via': (['lbox_replace', 'box_replace'], ['lbox_index_update', 'box_update']),
                'c': ['box_process_rw', 'txn_commit_stmt', 'trigger_run', 'lbox_trigger_run',
                      'luaT_call', 'lua_pcall']},
    'hot': {'chain': HOT_CHAIN},
    'codec': {'lua': ['codec_worker', 'codec_round'],
              'groups': (('json encode', r'^json_encode$'), ('json decode', r'^json_decode$'),
                         ('msgpack encode', r'^lua_msgpack_encode$'),
                         ('msgpack decode', r'^lua_msgpack_decode(_string|_cdata)?$'))},
}
BOX_LAYER = re.compile(r'^(lbox_replace|lbox_index_update|box_replace|box_update|box_select|'
                       r'box_process_rw|space_execute_dml|txn_commit_stmt|memtx_space_execute_\w+)$')
HOT = ('hot_outer', 'hot_mid', 'hot_inner')


def worker_of(frames):
    f = first_lua(frames)
    return f.fid if f is not None else None


def check_fiber_root(stacks, names, exp, jit):
    r = Result('fiber roots')
    total = sum(w for _, w in stacks)
    wf = valid = 0
    for frames, w in stacks:
        if not any(f.fid in exp['workers'] for f in frames):
            continue
        wf += w
        fr = frames[1:]
        if len(fr) > 1 and fr[0].name == '[unknown]' and fr[1].name == exp['root'][0]:
            fr = fr[1:]
        ok = [f.name for f in fr[:len(exp['root'])]] == exp['root']
        if ok:
            i = next(i for i, f in enumerate(fr) if f.lua)
            ok = (fr[i].fid in exp['workers'] and i > 0 and fr[i - 1].name == exp['call']
                  and exp['via'] in [f.name for f in fr[len(exp['root']):i]])
        if ok:
            valid += w
        else:
            r.example(frames, w)
    r.lines.append('W/CW stacks %.1f%% of all weight; %.2f%% of them rooted %s;...;%s;...;'
                   '%s;W|CW' % (pct(wf, total), pct(valid, wf), ';'.join(exp['root']),
                                exp['via'], exp['call']))
    r.need(pct(wf, total) >= MIN_FIBERS, 'W/CW stacks %.1f%% of the weight < %.0f%%'
           % (pct(wf, total), MIN_FIBERS))
    r.need(pct(valid, wf) >= MIN_VALID, '%.2f%% rooted < %.0f%%' % (pct(valid, wf), MIN_VALID))
    return r


def check_box_api(stacks, names, exp, jit):
    r = Result('box C API')
    ww = layer = valid = 0
    full = collections.Counter()
    ops = exp['ops']
    for frames, w in stacks:
        if worker_of(frames) != 'box_worker':
            continue
        ww += w
        i = next((i for i, f in enumerate(frames) if BOX_LAYER.match(f.name)), None)
        if i is None:
            continue
        layer += w
        op = next((k for k, v in ops.items() if v[1][0] == frames[i].name), None)
        ok = op is not None and frames[i - 1].lua
        if ok:
            lua_exp, c, deep, after = ops[op]
            lua = [f for f in frames[:i] if f.lua]
            # box-layer frames above the entry: the chain's, in its order,
            # then the op's own deeper ones
            seq = [f.name for f in frames[i:] if BOX_LAYER.match(f.name)]
            k = 0
            while k < len(seq) and k < len(c) and seq[k] == c[k]:
                k += 1
            ok = (chain_ok(lua, lua_exp, names)
                  and all(re.match(after, x) for x in seq[k:])
                  and (k == len(c) or not seq[k:]))
            if ok and k == len(c) and any(re.match(deep, f.name) for f in frames[i + 1:]):
                full[op] += w
        if ok:
            valid += w
        else:
            r.example(frames, w)
    r.lines.append('W weight: %.2f%% in box-layer C code, %.2f%% of that entered as expected; '
                   'full chains down to memtx/txn: %s (%% of W)'
                   % (pct(layer, ww), pct(valid, layer),
                      ', '.join('%s %.2f%%' % (op, pct(full[op], ww)) for op in ops)))
    r.need(layer > 0, 'no box-layer frame in W stacks')
    r.need(pct(valid, layer) >= MIN_VALID, '%.2f%% of the box-layer weight entered as expected '
           '< %.0f%%' % (pct(valid, layer), MIN_VALID))
    for op in ops:
        r.need(pct(full[op], ww) >= MIN_BOX_OP, '%s chain %.2f%% of W < %.1f%%'
               % (op, pct(full[op], ww), MIN_BOX_OP))
    return r


def check_trigger(stacks, names, exp, jit):
    r = Result('C -> Lua trigger')
    ww = wt = valid = 0
    by = collections.Counter()
    for frames, w in stacks:
        wk = worker_of(frames)
        if wk == 'box_worker':
            ww += w
        t = next((i for i, f in enumerate(frames) if f.fid == 'on_replace'), None)
        if t is None:
            continue
        wt += w
        ok = wk == 'box_worker'
        if ok:
            p = max(i for i in range(t) if frames[i].lua)
            lua = [f for f in frames[:p + 1] if f.lua]
            seg = [f.name for f in frames[p + 1:t]]
            via = next((v for v in exp['via'] if seg[:len(v)] == v), None)
            ok = (chain_ok(lua, exp['lua'], names) and via is not None
                  and is_subsequence(exp['c'], seg[len(via):])
                  and (seg[-1:] == exp['c'][-1:]))
            if ok:
                by[via[0] if via else 'direct'] += w
        if ok:
            valid += w
        else:
            r.example(frames, w)
    r.lines.append("T's stacks %.2f%% of W's weight; %.2f%% of them W;B;<replace|update C "
                   "API>;...;%s;T (%s)" % (pct(wt, ww), pct(valid, wt), ';'.join(exp['c']),
                                           ', '.join('%s %.0f%%' % (k, pct(v, wt))
                                                     for k, v in by.most_common())))
    r.need(pct(wt, ww) >= MIN_TRIGGER, "T's stacks %.2f%% of W < %.2f%%"
           % (pct(wt, ww), MIN_TRIGGER))
    r.need(pct(valid, wt) >= MIN_VALID, '%.2f%% of them as expected < %.0f%%'
           % (pct(valid, wt), MIN_VALID))
    return r


def check_hot(stacks, names, exp, jit):
    r = Result('hot Lua nesting')
    chain = exp['chain']
    ww = wh = valid = full = traced = inner = inner_full = 0
    shapes = collections.Counter()
    for frames, w in stacks:
        if worker_of(frames) != 'box_worker':
            continue
        ww += w
        if not any(f.fid in HOT for f in frames):
            continue
        wh += w
        idx = [i for i, f in enumerate(frames) if f.lua]
        j = 1
        while j < len(idx) and frames[idx[j]].fid in HOT and idx[j] == idx[j - 1] + 1:
            j += 1
        run = [frames[i] for i in idx[:j]]
        rest = [frames[i] for i in idx[j:]]
        ok = not any(f.fid in HOT for f in rest) and chain_ok(run, chain, names, prefix=True)
        shapes[short(run)] += w
        if any(f.trace for f in run):
            traced += w
        if run and run[-1].fid == 'hot_inner':
            inner += w
            if [f.fid for f in run] == chain:
                inner_full += w
        if ok:
            valid += w
            if [f.fid for f in run] == chain and not any(f.trace for f in run):
                full += w
        else:
            r.example(frames, w)
    r.lines.append('hot stacks %.2f%% of W; %.2f%% of them nest as %s (%.2f%% the whole '
                   'chain, %.2f%% end in a trace)' % (pct(wh, ww), pct(valid, wh), short_chain(chain),
                                                      pct(full, wh), pct(traced, wh)))
    r.lines.append('shapes: ' + ', '.join('%s %.1f%%' % (compress(s), pct(v, wh))
                                          for s, v in shapes.most_common(4)))
    r.need(pct(wh, ww) >= MIN_HOT, 'hot stacks %.2f%% of W < %.0f%%' % (pct(wh, ww), MIN_HOT))
    r.need(pct(valid, wh) >= MIN_VALID, '%.2f%% nest as expected < %.0f%%'
           % (pct(valid, wh), MIN_VALID))
    r.lines.append('hot_inner: %.2f%% of its weight on the whole chain' % pct(inner_full, inner))
    if jit == 'off':
        r.need(pct(full, wh) >= MIN_HOT_FULL, 'whole chain %.2f%% of the hot weight < %.0f%%'
               % (pct(full, wh), MIN_HOT_FULL))
    if chain[-1] == 'hot_inner':       # not for the negative controls' chains
        r.need(pct(inner_full, inner) >= MIN_INNER_FULL,
               "whole chain %.2f%% of hot_inner's weight < %.0f%%"
               % (pct(inner_full, inner), MIN_INNER_FULL))
    return r


def compress(s):
    """box_worker;hot_outer;hot_outer -> box_worker;hot_outer*2"""
    out = []
    for x in s.split(';'):
        if out and out[-1][0] == x:
            out[-1][1] += 1
        else:
            out.append([x, 1])
    return ';'.join(x if n == 1 else '%s*%d' % (x, n) for x, n in out)


def short_chain(chain):
    return compress(';'.join(chain))


def check_codec(stacks, names, exp, jit):
    r = Result('json/msgpack')
    wc = we = valid = 0
    groups = collections.Counter()
    rxs = [(g, re.compile(rx)) for g, rx in exp['groups']]
    for frames, w in stacks:
        if worker_of(frames) != 'codec_worker':
            continue
        wc += w
        hit = None
        for i, f in enumerate(frames):
            g = next((g for g, rx in rxs if rx.match(f.name)), None)
            if g:
                hit = i, g
                break
        if hit is None:
            continue
        i, g = hit
        we += w
        lua = [f for f in frames[:i] if f.lua]
        if frames[i - 1].lua and chain_ok(lua, exp['lua'], names):
            valid += w
            groups[g] += w
        else:
            r.example(frames, w)
    r.lines.append("CW weight: %.2f%% under json/msgpack entries, %.2f%% of that called "
                   "by %s: %s (%% of CW)" % (pct(we, wc), pct(valid, we), ';'.join(exp['lua']),
                                             ', '.join('%s %.2f%%' % (g, pct(groups[g], wc))
                                                       for g, _ in exp['groups'])))
    r.need(we > 0, 'no json/msgpack entry in CW stacks')
    r.need(pct(valid, we) >= MIN_VALID, '%.2f%% called as expected < %.0f%%'
           % (pct(valid, we), MIN_VALID))
    for g, _ in exp['groups']:
        r.need(pct(groups[g], wc) >= MIN_CODEC, '%s %.2f%% of CW < %.1f%%'
               % (g, pct(groups[g], wc), MIN_CODEC))
    return r


# Tarantool 3.0 moved space triggers to the trigger registry (commit
# fa0a31b50d, 3.0.0-beta1): on_replace is run by space_on_replace through a
# func_adapter, no longer by trigger_run/lbox_trigger_run.
TRIGGER_C_3 = ['box_process_rw', 'txn_commit_stmt', 'space_on_replace', 'func_adapter_lua_call',
               'luaT_call', 'lua_pcall']


def tarantool_version(binary):
    """(major, minor) from `BINARY --version` ("Tarantool 3.8.0-0-g..."), or None."""
    try:
        out = subprocess.run([binary, '--version'], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'Tarantool (\d+)\.(\d+)\.', out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def adapt_expectations(version):
    if version is not None and version >= (3, 0):
        EXPECT['trigger']['c'] = list(TRIGGER_C_3)


CHECKS = (('fiber_root', check_fiber_root), ('box_api', check_box_api),
          ('trigger', check_trigger), ('hot', check_hot), ('codec', check_codec))


def mutations(jit):
    """(check key, description, expectation) -- each must make its check fail."""
    import copy
    out = []
    e = copy.deepcopy(EXPECT['fiber_root'])
    e['root'] = ['__libc_start_call_main', 'main']
    out.append(('fiber_root', 'fibers rooted at main', e))
    e = copy.deepcopy(EXPECT['box_api'])
    e['ops'] = {k: (['codec_worker', 'codec_round'] + v[0][2:],) + v[1:]
                for k, v in e['ops'].items()}
    out.append(('box_api', 'box C API called from codec_round', e))
    e = copy.deepcopy(EXPECT['trigger'])
    e['via'], e['c'] = ([],), []
    out.append(('trigger', 'trigger called by box_batch itself', e))
    e = {'chain': ['box_batch'] + HOT_CHAIN[1:]}
    out.append(('hot', 'hot chain called by box_batch', e))
    # JIT on or off, the whole chain tells the order, and 8 hot_outer frames
    # from 9.
    e = {'chain': ['box_worker', 'hot_inner', 'hot_mid'] + ['hot_outer'] * 8}
    out.append(('hot', 'nesting reversed: inner;mid;outer', e))
    e = {'chain': ['box_worker'] + ['hot_outer'] * 9 + ['hot_mid', 'hot_inner']}
    out.append(('hot', '9 hot_outer frames (no tail call)', e))
    e = copy.deepcopy(EXPECT['codec'])
    e['lua'] = ['codec_worker']
    out.append(('codec', 'json/msgpack called by codec_worker', e))
    return out


def run_checks(stacks, names, jit):
    return [fn(stacks, names, EXPECT[key], jit) for key, fn in CHECKS]


def run_controls(stacks, names, jit):
    fns = dict(CHECKS)
    return [(key, desc, fns[key](stacks, names, e, jit)) for key, desc, e in mutations(jit)]


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------

def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def measure(perf, lj_merge, binary, app, seconds, jit, names, keep):
    work = tempfile.mkdtemp(prefix='ljperf-e2e-')
    pids = set()
    try:
        env = dict(os.environ)
        env.pop('LJPERF_APP_JIT', None)
        env.update({'LUAJIT_PERF': '1', 'LUAJIT_PERF_DIR': work, 'TMPDIR': work,
                    'LJPERF_APP_SECONDS': str(seconds), 'LJPERF_APP_MODE': 'demo'})
        if jit == 'off':
            env['LJPERF_APP_JIT'] = 'off'
        data = os.path.join(work, 'perf.data')
        bid = ['--buildid-dir', os.path.join(work, '.debug')]
        rec = run([perf] + bid + ['record', '--no-bpf-event', '-k', 'mono', '-g', '--call-graph', 'fp',
                                  '--user-regs=r13', '-o', data, binary, app],
                  cwd=work, env=env, stdin=subprocess.DEVNULL, timeout=300)
        out = rec.stdout.decode('utf-8', 'replace')
        err = rec.stderr.decode('utf-8', 'replace')
        pids |= ljptest.dump_pids(work)
        if rec.returncode != 0 or 'ljperf demo:' not in out:
            raise RuntimeError('perf record of %s failed (exit %d):\n%s%s'
                               % (binary, rec.returncode, out, err[-2000:]))
        want = 'jit %s' % jit
        if want not in out:
            raise RuntimeError('the app did not run with the JIT %s:\n%s' % (jit, out))
        res = fold_recording(perf, lj_merge, work, data, names)
        pids |= res['pids']
        res['app'] = out
        return res
    finally:
        # The emitter writes /tmp/perf-PID.map (fixed path): remove ours.
        if not keep:
            ljptest.remove_tmp_files(pids)
            shutil.rmtree(work, ignore_errors=True)


def fold_recording(perf, lj_merge, work, data, names):
    """perf inject, perf script and lj_merge of the recording DATA made in
    WORK (the jitdumps' directory): analyse()'s counts plus 'stacks' (the
    folded stacks), 'jitdumps' and 'dir'. Raises RuntimeError."""
    bid = ['--buildid-dir', os.path.join(work, '.debug')]
    jdata = os.path.join(work, 'perf.jit.data')
    inj = run([perf] + bid + ['inject', '--jit', '-i', data, '-o', jdata],
              cwd=work, timeout=300)
    if inj.returncode != 0:
        raise RuntimeError('perf inject --jit failed (exit %d): %s'
                           % (inj.returncode, inj.stderr.decode('utf-8', 'replace')[-2000:]))
    script = os.path.join(work, 'perf.script')
    with open(script, 'wb') as f:
        sc = subprocess.run([perf] + bid + ['script', '-i', jdata, '-F', FIELDS],
                            cwd=work, stdout=f, stderr=subprocess.PIPE, timeout=600)
    if sc.returncode != 0:
        raise RuntimeError('perf script failed (exit %d): %s'
                           % (sc.returncode, sc.stderr.decode('utf-8', 'replace')[-2000:]))
    res = analyse(parse_script(script))
    kinds = os.path.join(work, 'kinds')
    lm = run([sys.executable, lj_merge, '--jit-tag', '--jitdump', work, '--kinds', kinds,
              script], cwd=work, timeout=600)
    if lm.returncode != 0:
        raise RuntimeError('lj_merge failed (exit %d): %s'
                           % (lm.returncode, lm.stderr.decode('utf-8', 'replace')[-2000:]))
    res['stacks'] = parse_folded(lm.stdout.decode('utf-8', 'replace'), folded.load_kinds(kinds), names)
    if not res['stacks']:
        raise RuntimeError('lj_merge printed no stacks: %s'
                           % lm.stderr.decode('utf-8', 'replace')[-1000:])
    res['jitdumps'] = sorted(n for n in os.listdir(work) if n.startswith('jit-'))
    res['dir'] = work
    return res


def report(name, res):
    print('%-15s user-space samples %6d, reaching a root %6d = %6.2f%% '
          '(tx thread %d/%d = %.2f%%)'
          % (name, res['user'], res['reached'], pct(res['reached'], res['user']),
             res['tx_reached'], res['tx_user'], pct(res['tx_reached'], res['tx_user'])))
    print('%-15s leaf outside system libraries %6d, reaching a root %6d = %6.2f%%'
          % ('', res['own'], res['own_reached'], pct(res['own_reached'], res['own'])))
    roots = ', '.join('%s %d' % (k, v) for k, v in res['roots'].most_common())
    print('    roots: %s' % (roots or 'none'))
    print('    threads: %s' % ', '.join('%s %d' % kv for kv in res['threads'].most_common()))
    print('    jitdump files: %s' % (', '.join(res['jitdumps']) or 'none'))
    if res['missed_leaf']:
        print('    not reaching, by leaf DSO: %s' % ', '.join(
            '%s %d' % kv for kv in res['missed_dso'].most_common(6)))
        print('    not reaching, top leaf functions: %s' % ', '.join(
            '%s %d' % kv for kv in res['missed_leaf'].most_common(6)))
        print('    not reaching, top outermost frames: %s' % ', '.join(
            '%s %d' % kv for kv in res['missed_last'].most_common(4)))


def root_check(res, args):
    """(ok, message) of check 1."""
    if args.scope == 'all':
        n, reached, what = res['user'], res['reached'], 'user-space samples'
    else:
        n, reached, what = res['own'], res['own_reached'], \
            'user-space samples with a leaf outside system libraries'
    share = pct(reached, n)
    if n < args.min_samples:
        return False, 'only %d %s (need %d)' % (n, what, args.min_samples)
    if share < args.min_share:
        return False, '%.2f%% of the %s reach main or a fiber/thread start, need >= %.2f%%' \
            % (share, what, args.min_share)
    return True, '%.2f%% of the %s reach main or a fiber/thread start' % (share, what)


def judge(res, args, names, jit, label, verdicts):
    """Prints the checks of one run (RES), and appends them and the negative
    controls to VERDICTS ((ok, message) asserted; None: nothing asserted)."""
    ok, msg = root_check(res, args)
    print('  %s 1 roots: %s' % ('ok  ' if ok else 'BAD ', msg))
    if verdicts is not None:
        verdicts.append((ok, '%s: roots: %s' % (label, msg)))
    for n, r in enumerate(run_checks(res['stacks'], names, jit), 2):
        print('  %s %d %s: %s' % ('ok  ' if r.ok else 'BAD ', n, r.name, r.lines[0]))
        for ln in r.lines[1:]:
            print('         ' + ln)
        for p in r.problems:
            print('         problem: ' + p)
        for ex in r.examples if not r.ok else []:
            print('         e.g. ' + ex)
        if verdicts is not None:
            verdicts.append((r.ok, '%s: %s: %s' % (label, r.name,
                                                   '; '.join(r.problems) or r.lines[0])))
    if verdicts is not None:
        for key, desc, r in run_controls(res['stacks'], names, jit):
            print('  control %s (%s): %s' % (key, desc, 'fails, as it must' if not r.ok
                                             else 'PASSES: the check cannot fail'))
            verdicts.append((not r.ok, '%s: negative control %s (%s) %s'
                             % (label, key, desc, 'fails' if not r.ok else 'passes')))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--tarantool', required=True, help='patched tarantool binary')
    ap.add_argument('--tarantool-base', help='unpatched tarantool binary (for comparison)')
    ap.add_argument('--app', default=os.path.join(ROOT, 'examples', 'tarantool', 'app.lua'))
    ap.add_argument('--perf', default=shutil.which('perf') or 'perf')
    ap.add_argument('--lj-merge', default=os.environ.get('LJ_MERGE') or
                    os.path.join(ROOT, 'perf-script', 'lj_merge.py'))
    ap.add_argument('--seconds', type=float, default=3.0, help='run time of the demo app')
    ap.add_argument('--jit', choices=('on', 'off', 'both'), default='both',
                    help='JIT mode(s) of the tarantool runs')
    ap.add_argument('--min-share', type=float, default=99.0,
                    help='required share (%%) of user-space samples reaching a root')
    ap.add_argument('--min-samples', type=int, default=500)
    ap.add_argument('--scope', choices=('all', 'own'), default='all',
                    help='samples counted for --min-share: all user-space ones, or those '
                         'whose leaf is outside system libraries')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directories')
    ap.add_argument('--runs', type=int, default=1,
                    help='runs of the patched tarantool with the JIT on, each judged '
                         '(trace layouts differ between runs)')
    args = ap.parse_args()

    if not shutil.which(args.perf):
        print('FAIL: perf not found (apt-get install linux-perf)')
        return 1
    if not os.path.exists(args.lj_merge):
        print('FAIL: lj_merge not found: %s' % args.lj_merge)
        return 1
    app = os.path.abspath(args.app)
    try:
        names = Names(app)
    except (OSError, RuntimeError) as e:
        print('FAIL: %s' % e)
        return 1
    version = tarantool_version(os.path.abspath(args.tarantool))
    print('Tarantool version: %s' % ('.'.join(map(str, version)) if version else 'unknown'))
    adapt_expectations(version)
    todo = []
    if args.tarantool_base:
        todo.append(('tarantool-base', os.path.abspath(args.tarantool_base), 'on', False))
    for jit in (('on', 'off') if args.jit == 'both' else (args.jit,)):
        for _ in range(max(1, args.runs) if jit == 'on' else 1):
            todo.append((os.path.basename(args.tarantool), os.path.abspath(args.tarantool), jit, True))
    verdicts = []             # (ok, message) asserted
    for name, binary, jit, asserted in todo:
        label = '%s, JIT %s' % (name, jit)
        if not os.access(binary, os.X_OK):
            print('FAIL: not an executable: %s' % binary)
            return 1
        try:
            res = measure(args.perf, args.lj_merge, binary, app, args.seconds, jit,
                          names, args.keep)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print('FAIL: %s' % e)
            return 1
        print('== %s%s' % (label, '' if asserted else ' (comparison, nothing asserted)'))
        report(name, res)
        if args.keep:
            print('    kept: %s' % res['dir'])
        judge(res, args, names, jit, label, verdicts if asserted else None)
        sys.stdout.flush()

    bad = [m for ok, m in verdicts if not ok]
    for ok, m in verdicts:
        if not ok:
            print('FAIL: ' + m)
    if bad:
        return 1
    print('PASS: %d checks (roots, fiber roots, box C API, C -> Lua trigger, hot Lua '
          'nesting, json/msgpack, negative controls) on %s'
          % (len(verdicts), ', '.join('%s JIT %s' % (n, j) for n, _, j, a in todo if a)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
