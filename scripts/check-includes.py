#!/usr/bin/env python3
"""Include structure of src/, as TAP for scripts/test.sh.

1. No include cycle among the project's own headers and sources in src/
   (an edge is a quoted #include that names a file in src/ or include/).
2. The engine's lower layers never include engine.h: the notifier, the
   sweeper, the quota table and everything beneath them are handed what
   they need (a pool, settings), so none can reach into struct queen.
3. The HTTP server's boundary with the engine is include/: a file of
   src/server includes (quoted) only its own directory's headers and the
   public queen.h and queen_runtime.h, never a header of src/engine (the
   Makefile compiles it without -Isrc/engine, so the build says it too).

Self-tests first run the cycle finder on a made-up graph with a cycle and
the boundary check on a made-up server file that includes an engine
header, so a check that finds nothing cannot pass the real tree silently."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SERVER_MAY_INCLUDE = {"queen.h", "queen_runtime.h"}
LOWER_LAYERS = ["util", "error", "reasons", "rawjson", "tenant", "pool", "sqlcall", "kvguard", "notify", "sweeper", "quota",
                "logging", "config", "schema", "input_limits"]


def graph():
    files = {}
    for d in ("src/engine", "src/server", "include"):
        for name in sorted(os.listdir(os.path.join(ROOT, d))):
            if name.endswith((".c", ".h")):
                files[name] = os.path.join(ROOT, d, name)
    edges = {}
    for name, path in files.items():
        with open(path, encoding="utf-8") as f:
            edges[name] = [inc for inc in INCLUDE.findall(f.read()) if inc in files and inc != name]
    return edges


def server_includes():
    """{server file: [quoted includes]} of src/server."""
    d = os.path.join(ROOT, "src/server")
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith((".c", ".h")):
            with open(os.path.join(d, name), encoding="utf-8") as f:
                out[name] = INCLUDE.findall(f.read())
    return out


def boundary_breaches(includes, own):
    """["file -> header"] for every quoted include of a server file that is
    neither one of its own directory's files (own) nor a public header."""
    return [f"{name} -> {inc}" for name, incs in sorted(includes.items()) for inc in incs
            if inc not in own and inc not in SERVER_MAY_INCLUDE]


def find_cycle(edges):
    """A cycle as a list of names, or None. Headers only: a .c file is a
    leaf nobody includes, so cycles live among headers."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in edges.get(n, []):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if state.get(m) is None:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if state.get(n) is None:
            found = visit(n)
            if found:
                return found
    return None


def main():
    failures = 0
    print("1..5")
    sample = {"a.h": ["b.h"], "b.h": ["c.h"], "c.h": ["a.h"], "d.c": ["a.h"]}
    if find_cycle(sample) and find_cycle({"a.h": ["b.h"], "b.h": []}) is None:
        print("ok 1 - the cycle finder finds a planted cycle and only that")
    else:
        print("not ok 1 - the cycle finder is broken")
        failures += 1
    edges = graph()
    cycle = find_cycle(edges)
    if cycle is None:
        print("ok 2 - no include cycle in src/")
    else:
        print("not ok 2 - include cycle: " + " -> ".join(cycle))
        failures += 1

    def reaches_engine(n, seen):
        if n == "engine.h":
            return True
        seen.add(n)
        return any(reaches_engine(m, seen) for m in edges.get(n, []) if m not in seen)

    bad = [f"{layer}{ext}" for layer in LOWER_LAYERS for ext in (".h", ".c")
           if f"{layer}{ext}" in edges and reaches_engine(f"{layer}{ext}", set())]
    if bad:
        print("not ok 3 - lower engine layers include engine.h (directly or not): " + ", ".join(bad))
        failures += 1
    else:
        print("ok 3 - no lower engine layer reaches engine.h")

    planted = {"a.c": ["a.h", "queen.h", "queen_runtime.h", "pipeline.h"], "a.h": ["queen.h"]}
    if boundary_breaches(planted, {"a.c", "a.h"}) == ["a.c -> pipeline.h"]:
        print("ok 4 - the boundary check finds a planted engine include and only that")
    else:
        print("not ok 4 - the boundary check is broken")
        failures += 1
    includes = server_includes()
    bad = boundary_breaches(includes, set(includes))
    if bad:
        print("not ok 5 - src/server includes engine-private headers (use queen.h or queen_runtime.h): "
              + ", ".join(bad))
        failures += 1
    else:
        print("ok 5 - src/server includes only its own headers, queen.h and queen_runtime.h")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
