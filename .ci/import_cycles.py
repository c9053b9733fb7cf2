#!/usr/bin/env python3
"""Import cycles in a Python package: exit 1 and print each cycle found.

usage: import_cycles.py [PACKAGE_DIR]     (default: ljperf/ beside .ci/)

Every `import` and `from ... import` of the package's own modules counts,
at module level or inside a function (a function-level import hides a
cycle, it does not break it). Read with ast, never imported. One line per
cycle (a -> b -> ... -> a), then "N modules, M cycles"."""

import ast
import os
import sys


def imports(path, pkg, modules):
    """The package's modules PATH imports (names without the package)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # from pkg import a (a module) / from pkg.a import x
            names = [node.module + "." + a.name for a in node.names] + [node.module]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            base = node.module or ""
            names = [pkg + "." + (base + "." if base else "") + a.name for a in node.names]
            if base:
                names.append(pkg + "." + base)
        else:
            continue
        for n in names:
            head, _, rest = n.partition(".")
            mod = rest.partition(".")[0]
            if head == pkg and mod in modules:
                out.add(mod)
    return out


def cycles(graph):
    """The strongly connected parts with more than one module, or one that
    imports itself (Tarjan), each as a closed path through it."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in graph[v]:
                found.append(path_in(graph, set(part), min(part)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def path_in(graph, part, start):
    """A cycle from START back to it inside PART (breadth-first)."""
    prev, todo = {}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in part and w not in prev:
                prev[w] = v
                todo.append(w)
    return [start, start]


def main(argv):
    if argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    d = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ljperf")
    if not os.path.isfile(os.path.join(d, "__init__.py")):
        sys.stderr.write("import_cycles.py: %s is not a package directory\n" % d)
        return 2
    pkg = os.path.basename(os.path.normpath(d))
    modules = {f[:-3] for f in os.listdir(d) if f.endswith(".py") and f != "__init__.py"}
    graph = {m: imports(os.path.join(d, m + ".py"), pkg, modules) for m in modules}
    found = cycles(graph)
    for c in found:
        print("import cycle: " + " -> ".join(c))
    print("%d modules, %d cycles" % (len(modules), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
