#!/usr/bin/env python3
"""The files of core/ call each other without a circle.

Reads the objects of libcci with nm: a file that leaves a symbol undefined
which another core file defines (a function it calls, a variable it reads)
depends on that file.  The graph of those dependencies must have no cycle,
so that the core reads as layers: config and errors at the bottom, then the
global state and the lists, devices and plugins, connections, events,
endpoints, and the API entry points and the plugins' services table on top.
A cycle is printed, with the symbols that make each step, and fails the
test.

Usage: core_layers.py LIBRARY SOURCE...   (meson: the objects of LIBRARY's
                                           private directory, one per SOURCE)
       core_layers.py OBJECT.o...
"""
import os
import subprocess
import sys
from collections import deque


def objects_of(args):
    if all(a.endswith(".o") for a in args):
        return args
    lib, sources = args[0], args[1:]
    objdir = lib + ".p"
    return [os.path.join(objdir, os.path.basename(s) + ".o") for s in sources]


def file_of(obj):
    name = os.path.basename(obj)
    return name[:-2] if name.endswith(".o") else name


def read_symbols(objs):
    """defined[file] and undefined[file]: sets of global symbol names."""
    out = subprocess.run(["nm", "-P", "-A"] + objs, check=True, capture_output=True,
                         text=True).stdout
    defined = {file_of(o): set() for o in objs}
    undefined = {file_of(o): set() for o in objs}
    for line in out.splitlines():
        head, _, rest = line.partition(": ")
        fields = rest.split()
        if len(fields) < 2:
            continue
        sym, kind = fields[0], fields[1]
        f = file_of(head)
        if kind == "U":
            undefined[f].add(sym)
        elif kind.isupper() or kind in "vw":
            defined[f].add(sym)
    return defined, undefined


def build_graph(defined, undefined):
    """edges[a][b]: the symbols of b that a uses."""
    owner = {}
    for f, syms in defined.items():
        for s in syms:
            owner[s] = f
    edges = {f: {} for f in defined}
    for f, syms in undefined.items():
        for s in sorted(syms):
            g = owner.get(s)
            if g and g != f:
                edges[f].setdefault(g, []).append(s)
    return edges


def components(edges):
    """Strongly connected components (Tarjan, iterative), sizes > 1."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def shortest_cycle(edges, comp):
    """A shortest cycle inside comp, as a list of files (first == last)."""
    members, best = set(comp), None
    for start in comp:
        prev, queue = {start: None}, deque([start])
        while queue:
            v = queue.popleft()
            for w in sorted(edges[v]):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    cycle = path[::-1] + [start]
                    if best is None or len(cycle) < len(best):
                        best = cycle
                    queue.clear()
                    break
                if w not in prev:
                    prev[w] = v
                    queue.append(w)
    return best


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip())
        return 2
    objs = objects_of(argv[1:])
    missing = [o for o in objs if not os.path.exists(o)]
    if missing:
        print("no such object: " + ", ".join(missing))
        return 2
    edges = build_graph(*read_symbols(objs))
    comps = components(edges)
    n_edges = sum(len(e) for e in edges.values())
    if not comps:
        print(f"ok: {len(edges)} core files, {n_edges} file dependencies, no cycle")
        return 0
    for comp in comps:
        print(f"FAIL: these {len(comp)} core files depend on each other in a circle: "
              + ", ".join(comp))
        cycle = shortest_cycle(edges, comp)
        print("  a shortest cycle:")
        for a, b in zip(cycle, cycle[1:]):
            print(f"    {a} -> {b}  ({', '.join(edges[a][b])})")
        print("  every dependency inside the circle:")
        for a in comp:
            for b in sorted(edges[a]):
                if b in comp:
                    print(f"    {a} -> {b}  ({', '.join(edges[a][b])})")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
