"""V8 .heapsnapshot files (the patched VM's jit.perf.heapsnapshot, lj_heapsnap.c):
the one reader of the format in ljperf, and the graph questions asked of it.

A snapshot is flat: node i's fields are nodes[i*F:(i+1)*F] (F = len(node_fields)),
its edges follow those of nodes 0..i-1 in `edges` (edge_count of each), an
edge's to_node is a node's offset in `nodes` (index * F), names index `strings`.
Node 0 is the root. Weak edges retain nothing; shortcut edges count only from
the root (as in DevTools). Identity across snapshots: id (the object's address
/ 8 in 32 bits: LuaJIT never moves objects), Lua type and self size.
"""

import heapq
import json
from array import array

# What ljperf names a node's Lua type, from its V8 type and name (lj_heapsnap.c
# names functions "function ...", threads "main thread" / "coroutine").
THREAD_NAMES = ("main thread", "coroutine")
LUA_TYPES = ("string", "table", "function", "thread", "upvalue", "proto", "trace",
             "userdata", "cdata", "(root)", "(VM internals)")


class BadSnapshot(Exception):
    pass


def _int_array(data, start):
    """The JSON array of integers at data[start] ('['): (array, end offset)."""
    end = data.index(b"]", start)
    out = array("q")
    pos, step = start + 1, 1 << 22
    while pos < end:
        stop = min(pos + step, end)
        if stop < end:
            comma = data.rfind(b",", pos, stop)
            stop = comma if comma > pos else data.index(b",", stop)
        if stop > pos:
            out.extend(json.loads(b"[" + data[pos:stop] + b"]"))
        pos = stop + 1
    return out, end + 1


def _find(data, key, start=0):
    i = data.find(b'"%s":' % key, start)
    if i < 0:
        raise BadSnapshot("no %s" % key.decode())
    return data.index(b"[" if key != b"snapshot" else b"{", i + len(key) + 3)


class Snapshot:
    """One heap snapshot, its nodes and edges as flat integer arrays."""

    def __init__(self, path):
        self.file = path
        try:
            with open(path, "rb") as f:
                data = f.read()
            head = _find(data, b"snapshot")
            meta, _ = json.JSONDecoder().raw_decode(data[head:head + 65536].decode("utf-8", "replace"))
            self.nodes, end = _int_array(data, _find(data, b"nodes", head))
            self.edges, end = _int_array(data, _find(data, b"edges", end))
            sstart = _find(data, b"strings", end)
            self.strings, _ = json.JSONDecoder().raw_decode(data[sstart:].decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
            raise BadSnapshot("%s: %s" % (path, e))
        except (TypeError, OverflowError):    # array("q") of a float, string, 2^63...
            raise BadSnapshot("%s: a node or edge field is not a 64-bit integer" % path)
        except BadSnapshot as e:
            raise BadSnapshot("%s: not a heap snapshot (%s)" % (path, e))
        try:
            m = meta["meta"]
            nf, ef = m["node_fields"], m["edge_fields"]
            self.nf, self.ef = len(nf), len(ef)
            self.o_type, self.o_name, self.o_id = nf.index("type"), nf.index("name"), nf.index("id")
            self.o_size, self.o_count = nf.index("self_size"), nf.index("edge_count")
            self.o_etype, self.o_ename, self.o_to = (ef.index("type"), ef.index("name_or_index"),
                                                     ef.index("to_node"))
            self.node_types = m["node_types"][0]
            self.edge_types = m["edge_types"][0]
            self.weak = self.edge_types.index("weak")
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise BadSnapshot("%s: bad snapshot meta data (%r)" % (path, e))
        if (self.o_etype, self.o_ename, self.o_to) != (0, 1, 2):
            raise BadSnapshot("%s: edge fields are not type, name_or_index, to_node" % path)
        self.n = len(self.nodes) // self.nf
        if len(self.nodes) % self.nf or len(self.edges) % self.ef:
            raise BadSnapshot("%s: truncated node or edge array" % path)
        self._check()
        self.first = array("q", [0]) * (self.n + 1)
        total = 0
        for i in range(self.n):
            total += self.nodes[i * self.nf + self.o_count]
            self.first[i + 1] = total
        if total * self.ef != len(self.edges):
            raise BadSnapshot("%s: edge counts say %d edges, the array holds %d"
                              % (path, total, len(self.edges) // self.ef))
        self.shortcut = self.edge_types.index("shortcut") if "shortcut" in self.edge_types else -1
        self.named = set(i for i, t in enumerate(self.edge_types) if t not in ("element", "hidden"))
        self._dom = None
        self._parent = None
        self._ltype = None

    def _check(self):
        """Every index the graph follows is in range (else BadSnapshot):
        node types, names (strings), edge counts and sizes (>= 0), edge
        types, targets and the names of named edges."""
        def bad(what):
            raise BadSnapshot("%s: %s" % (self.file, what))

        def within(a, hi, what):
            if len(a) and (min(a) < 0 or max(a) >= hi):
                bad("%s out of range" % what)
        if not isinstance(self.strings, list) or not all(isinstance(x, str) for x in self.strings):
            bad("strings is not an array of strings")
        if not all(isinstance(x, str) for x in list(self.node_types) + list(self.edge_types)):
            bad("node or edge types are not strings")
        if self.n == 0:
            bad("no nodes (no root)")
        nodes, nf, edges, ef = self.nodes, self.nf, self.edges, self.ef
        big = 1 << 62
        within(nodes[self.o_type::nf], len(self.node_types), "a node type")
        within(nodes[self.o_name::nf], len(self.strings), "a node name")
        within(nodes[self.o_size::nf], big, "a node size")
        within(nodes[self.o_count::nf], big, "an edge count")
        within(edges[0::ef], len(self.edge_types), "an edge type")
        within(edges[2::ef], self.n * nf, "an edge target")
        named = set(i for i, t in enumerate(self.edge_types) if t not in ("element", "hidden"))
        nstr = len(self.strings)
        if any(t in named and not 0 <= k < nstr for t, k in zip(edges[0::ef], edges[1::ef])):
            bad("an edge name out of range")

    # -- Nodes and edges -------------------------------------------------------

    def name(self, i):
        return self.strings[self.nodes[i * self.nf + self.o_name]]

    def node_id(self, i):
        return self.nodes[i * self.nf + self.o_id]

    def size(self, i):
        return self.nodes[i * self.nf + self.o_size]

    def v8type(self, i):
        return self.node_types[self.nodes[i * self.nf + self.o_type]]

    def lua_type(self, i):
        """string, table, function, thread, upvalue, proto, trace, userdata,
        cdata, or (root) / (VM internals) for the synthetic nodes."""
        if self._ltype is None:
            codes = {t: k for k, t in enumerate(LUA_TYPES)}
            self._ltype = bytearray(codes[self._lua_type(k)] for k in range(self.n))
        return LUA_TYPES[self._ltype[i]]

    def _lua_type(self, i):
        t, name = self.v8type(i), self.name(i)
        if t == "string":
            return "string"
        if t == "synthetic":
            return "(root)"
        if t == "hidden":
            return "upvalue"
        if t == "code":
            return "proto" if name.startswith("(prototype)") else "trace"
        if t == "native":
            if name.startswith("("):
                return "(VM internals)"
            return "cdata" if name.startswith("cdata") else "userdata"
        if name.startswith("function "):
            return "function"
        if name in THREAD_NAMES:
            return "thread"
        return "table"

    def identity(self, i):
        return (self.node_id(i), self.lua_type(i), self.size(i))

    def out_edges(self, i):
        """(edge type, name or index, target node) of node i."""
        e, ef = self.edges, self.ef
        for k in range(self.first[i], self.first[i + 1]):
            t, nm, to = e[k * ef], e[k * ef + 1], e[k * ef + 2] // self.nf
            yield self.edge_types[t], (self.strings[nm] if t in self.named else nm), to

    def _retains(self, i, t):
        return t != self.weak and (t != self.shortcut or i == 0)

    # -- Graph -----------------------------------------------------------------

    def _succ(self):
        """Strong successors as CSR: (start offsets, targets)."""
        e, ef, nf = self.edges, self.ef, self.nf
        start, succ = array("q", [0]) * (self.n + 1), array("q")
        for i in range(self.n):
            for k in range(self.first[i], self.first[i + 1]):
                if self._retains(i, e[k * ef]):
                    succ.append(e[k * ef + 2] // nf)
            start[i + 1] = len(succ)
        return start, succ

    def shortest_parents(self):
        """BFS from the root over retaining edges: parent edge of each node
        (-1: the root or unreachable)."""
        if self._parent is None:
            e, ef, nf = self.edges, self.ef, self.nf
            parent = array("q", [-1]) * self.n
            seen = bytearray(self.n)
            seen[0] = 1
            queue = [0]
            for i in queue:
                for k in range(self.first[i], self.first[i + 1]):
                    if not self._retains(i, e[k * ef]):
                        continue
                    to = e[k * ef + 2] // nf
                    if not seen[to]:
                        seen[to] = 1
                        parent[to] = k
                        queue.append(to)
            self._parent, self.reachable = parent, seen
        return self._parent

    def path(self, i):
        """Names from the root to node i along a shortest path, e.g.
        ['(GC roots)', 'registry', '_LOADED', 'app', ...]; None if unreachable."""
        parent = self.shortest_parents()
        if not self.reachable[i]:
            return None
        steps = []
        while i != 0:
            k = parent[i]
            src = self._edge_source(k)
            t = self.edges[k * self.ef]
            nm = self.edges[k * self.ef + 1]
            if src == 0:
                steps.append(self.name(i))
            elif t in self.named:
                steps.append(self.strings[nm])
            else:
                steps.append("[%d]" % nm)
            i = src
        return steps[::-1]

    def _edge_source(self, k):
        lo, hi = 0, self.n
        while lo < hi:  # the node whose edges hold k: first[src] <= k < first[src+1]
            mid = (lo + hi) // 2
            if self.first[mid + 1] <= k:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def dominators(self):
        """Immediate dominator of each node reachable from the root (-1 for
        the rest and the root), by Cooper, Harvey and Kennedy's iteration
        over reverse postorder."""
        if self._dom is not None:
            return self._dom
        start, succ = self._succ()
        n = self.n
        order = array("q", [-1]) * n     # node -> postorder number
        post = array("q")
        stack = [(0, start[0])]
        order[0] = -2
        while stack:
            v, k = stack[-1]
            if k < start[v + 1]:
                stack[-1] = (v, k + 1)
                w = succ[k]
                if order[w] == -1:
                    order[w] = -2
                    stack.append((w, start[w]))
            else:
                stack.pop()
                order[v] = len(post)
                post.append(v)
        preds = [[] for _ in range(n)]
        for v in post:
            for k in range(start[v], start[v + 1]):
                preds[succ[k]].append(v)
        idom = array("q", [-1]) * n
        idom[0] = 0
        changed = True
        rpo = post[::-1]
        while changed:
            changed = False
            for v in rpo[1:]:
                new = -1
                for p in preds[v]:
                    if idom[p] == -1:
                        continue
                    if new == -1:
                        new = p
                        continue
                    a, b = p, new
                    while a != b:
                        while order[a] < order[b]:
                            a = idom[a]
                        while order[b] < order[a]:
                            b = idom[b]
                    new = a
                if idom[v] != new:
                    idom[v] = new
                    changed = True
        idom[0] = -1
        retained = array("q", (self.size(i) for i in range(n)))
        for v in post:
            if v != 0 and idom[v] >= 0:
                retained[idom[v]] += retained[v]
        self._dom, self.retained = idom, retained
        return idom

    def retained_size(self, i):
        self.dominators()
        return self.retained[i]

    # -- Summaries -------------------------------------------------------------

    def by_type(self):
        """{lua type: [count, bytes]} over all nodes."""
        out = {}
        for i in range(self.n):
            c = out.setdefault(self.lua_type(i), [0, 0])
            c[0] += 1
            c[1] += self.size(i)
        return out

    def total(self):
        return sum(self.size(i) for i in range(self.n))

    def top_retainers(self, k=10):
        """The K objects that retain the most bytes."""
        self.dominators()
        return heapq.nlargest(k, (i for i in range(self.n) if self.is_object(i)),
                              key=self.retained.__getitem__)

    def is_object(self, i):
        """A Lua object (not a root or what the VM counts outside objects)."""
        return not self.lua_type(i).startswith("(")

    def identities(self):
        return {self.identity(i): i for i in range(self.n) if self.is_object(i)}


def diff(base, target, final=None):
    """Objects of TARGET not in BASE (and, with FINAL, still in FINAL),
    grouped by node name: [(name, lua type, count, bytes, sample node)],
    most bytes first."""
    old = base.identities()
    keep = final.identities() if final is not None else None
    groups = {}
    for i in range(target.n):
        if not target.is_object(i):
            continue
        ident = target.identity(i)
        if ident in old or (keep is not None and ident not in keep):
            continue
        key = (target.name(i) if ident[1] != "string" else "(string)", ident[1])
        g = groups.get(key)
        if g is None:
            groups[key] = [1, ident[2], i]
        else:
            g[0] += 1
            g[1] += ident[2]
    out = [(name, t, c, b, i) for (name, t), (c, b, i) in groups.items()]
    out.sort(key=lambda g: (-g[3], g[0]))
    return out
