#!/usr/bin/env python3
"""The layout's figures from a build's object files: which source file calls which (an undefined
symbol of one object that another defines), the circles among them (strongly connected sets of more
than one file), and the back-arrows (edges that close a circle: a depth-first walk from the top
file, in name order, meets a file still on its path). Usage:
    scripts/layout.py [BUILD] [ROOM...]        (default: build verifier)
Prints per room: files, lines, circles and their sizes, back-arrows; -v lists them."""
import collections
import os
import subprocess
import sys


def objects(build, rooms):
    for root, _, files in os.walk(build):
        for f in sorted(files):
            if not f.endswith(".o"):
                continue
            o = os.path.join(root, f)
            src = os.path.relpath(o, build)[:-2] + ".c"
            if any(src == r or src.startswith(r.rstrip("/") + "/") for r in rooms) and os.path.exists(src):
                yield src, o


def symbols(obj):
    out = subprocess.run(["nm", obj], stdout=subprocess.PIPE, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 2 and p[0] == "U":
            undefined.add(p[1])
        elif len(p) == 3 and p[1] in "TDBRGSCV":
            defined.add(p[2])
    return defined, undefined


def graph(build, rooms):
    files = dict(objects(build, rooms))
    owner, needs = {}, {}
    for src, o in files.items():
        d, u = symbols(o)
        for s in d:
            owner[s] = src
        needs[src] = u
    g = {s: sorted({owner[x] for x in u if x in owner and owner[x] != s}) for s, u in needs.items()}
    return g


def sccs(g):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def back_arrows(g, tops):
    state, back = {}, []

    def walk(v):
        state[v] = 1
        for w in g[v]:
            if state.get(w) == 1:
                back.append((v, w))
            elif w not in state:
                walk(w)
        state[v] = 2

    for t in tops + sorted(g):
        if t in g and t not in state:
            walk(t)
    return back


def main(argv):
    verbose = "-v" in argv
    argv = [a for a in argv if a != "-v"]
    build = argv[1] if len(argv) > 1 else "build"
    rooms = argv[2:] or ["verifier"]
    g = graph(build, rooms)
    lines = sum(sum(1 for _ in open(f, errors="replace")) for f in g)
    # the top: files nothing in the rooms calls (the entry points), in name order
    called = {w for v in g for w in g[v]}
    tops = sorted(v for v in g if v not in called)
    circles = [c for c in sccs(g) if len(c) > 1]
    back = back_arrows(g, tops)
    hdr = collections.Counter(os.path.dirname(f) for f in g)
    print("rooms %s: %d files (%s), %d lines of .c" % (" ".join(rooms), len(g),
          ", ".join("%s %d" % (k, v) for k, v in sorted(hdr.items())), lines))
    print("circles: %d (sizes %s)" % (len(circles), sorted((len(c) for c in circles), reverse=True)))
    print("back-arrows: %d" % len(back))
    if verbose:
        for c in circles:
            print("  circle:", " ".join(c))
        for a, b in back:
            print("  back: %s -> %s" % (a, b))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
