#!/usr/bin/env python3
"""clients/API.md against the seven clients' public surfaces, as TAP for
scripts/test.sh.

Each client's exported names are read from its source (Python: ast; the
others: declarations matched line by line), grouped by owner (the client,
its KV group, the transaction builder, the message, the error). For every
client:
1. the surface parses (each owner has names), so an unreadable file cannot
   pass by being empty;
2. every operation of the vocabulary is there, spelt in the client's casing,
   on the client and on its async twin if it has one (Rust's AsyncClient);
3. no retired spelling of a concept is public (renew, extend_lease,
   delete_queue, get_prefix_page, an "unset" expiry, ...), so a concept has
   one name;
4. every error kind is spelt in the client's source, and QUEEN_URL is read.

A name is canonical snake_case; casing() turns it into the client's."""
import ast
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CLIENT_OPS = ["health", "push", "pop", "ack", "lease_extend", "configure", "queues", "queue_delete", "consume"]
KV_OPS = ["get", "get_many", "get_prefix", "scan", "put", "put_if_absent", "delete", "incr", "apply", "namespaces"]
TX_OPS = ["ack", "push", "kv", "kv_put", "kv_put_if_absent", "kv_delete", "kv_incr", "require_lease", "commit"]
MESSAGE_OPS = ["ack_item"]
ERROR_KINDS = ["bad_request", "auth", "not_found", "conflict", "precondition", "rate_limited", "unavailable",
               "server", "transport"]
# Spellings a concept had before it had one name; none may be public again.
RETIRED = ["renew", "extend_lease", "delete_queue", "get_prefix_page", "unset", "none"]


def camel(s):
    head, *rest = s.split("_")
    return head + "".join(w.capitalize() for w in rest)


def pascal(s):
    return "".join(w.capitalize() for w in s.split("_"))


def go_case(s):
    # Go spells initialisms whole (KV, ID), as golint asks.
    return "".join("KV" if w == "kv" else w.capitalize() for w in s.split("_"))


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def files(d, ext):
    out = []
    for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
        out += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(ext)]
    return sorted(out)


def text_of(paths):
    return "\n".join(open(p, encoding="utf-8").read() for p in paths)


# ---- surfaces: {owner type name: set of public member names} -----------------------------------


def python_surface():
    surf = {}
    for p in files("clients/python/queen_client", ".py"):
        tree = ast.parse(open(p, encoding="utf-8").read())
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                names = surf.setdefault(node.name, set())
                for b in node.body:
                    if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and not b.name.startswith("_"):
                        names.add(b.name)
                # Inherited builder methods count for the subclass (Tx(TxBuilder)).
                for base in node.bases:
                    if isinstance(base, ast.Attribute):
                        surf.setdefault("__bases__", {})[node.name] = base.attr
    bases = surf.pop("__bases__", {})
    for cls, base in bases.items():
        surf[cls] |= surf.get(base, set())
    return surf


def brace_surface(text, type_re, member_re):
    """Members declared inside the braces of each type a type_re line opens."""
    surf, owner, depth, owner_depth = {}, None, 0, 0
    for line in text.splitlines():
        m = type_re.search(line)
        if m and owner is None:
            owner, owner_depth = m.group(1), depth
            surf.setdefault(owner, set())
        elif owner is not None:
            mm = member_re.search(line)
            if mm:
                surf[owner].add(mm.group(1))
        depth += line.count("{") - line.count("}")
        if owner is not None and depth <= owner_depth and "}" in line:
            owner = None
    return surf


def js_surface():
    return brace_surface(read("clients/js/index.d.ts"), re.compile(r"^export (?:class|interface) (\w+)"),
                         re.compile(r"^\s+(?:readonly\s+)?(\w+)\s*[(?:<]"))


def rust_surface():
    surf = {}
    for p in files("clients/rust/src", ".rs"):
        s = brace_surface(open(p, encoding="utf-8").read(), re.compile(r"^impl(?:<[^>]*>)? (\w+)"),
                          re.compile(r"^\s+pub (?:async )?fn (\w+)"))
        for k, v in s.items():
            surf.setdefault(k, set()).update(v)
        for m in re.finditer(r"^pub (?:struct|enum) (\w+)", open(p, encoding="utf-8").read(), re.M):
            surf.setdefault(m.group(1), set())
        for m in re.finditer(r"^pub enum (\w+) \{(.*?)^\}", open(p, encoding="utf-8").read(), re.M | re.S):
            surf[m.group(1)] |= set(re.findall(r"^\s+(\w+)\s*[,({]", m.group(2), re.M))
    return surf


def go_surface():
    surf = {}
    for p in files("clients/go", ".go"):
        if p.endswith("_test.go"):
            continue
        t = open(p, encoding="utf-8").read()
        for m in re.finditer(r"^func \(\w+ \*?(\w+)\) ([A-Z]\w*)\(", t, re.M):
            surf.setdefault(m.group(1), set()).add(m.group(2))
        for m in re.finditer(r"^type ([A-Z]\w*) ", t, re.M):
            surf.setdefault(m.group(1), set())
        for m in re.finditer(r"^func ([A-Z]\w*)\(", t, re.M):
            surf.setdefault("", set()).add(m.group(1))
        for m in re.finditer(r"^type ([A-Z]\w*) struct \{(.*?)^\}", t, re.M | re.S):
            surf[m.group(1)] |= set(re.findall(r"^\t([A-Z]\w*)\s", m.group(2), re.M))
    return surf


def cpp_surface():
    return brace_surface(read("clients/cpp/include/queen_client.hpp"),
                         re.compile(r"^(?:class|struct) (\w+)\b[^;]*$"),
                         re.compile(r"^\s+(?:static |virtual |\[\[\w+\]\] )*[\w:<>,\s&*]*?\b(\w+)\s*\("))


def php_surface():
    surf = {}
    for p in files("clients/php/src", ".php"):
        t = open(p, encoding="utf-8").read()
        m = re.search(r"^(?:final |abstract )?class (\w+)", t, re.M)
        if m:
            surf[m.group(1)] = set(re.findall(r"public (?:static )?function (\w+)", t))
    return surf


def c_surface():
    return {"": set(re.findall(r"\b(queen_client_\w+)\s*\(", read("include/queen_client.h")))}


# ---- the clients: where each owner lives and how names are spelt ------------------------------

CLIENTS = {
    "python": dict(surface=python_surface, case=lambda s: s, client="Queen", kv=("Kv", ""), tx="Tx",
                   message="Message", src=("clients/python/queen_client", ".py")),
    "js": dict(surface=js_surface, case=camel, client="Queen", kv=("Kv", ""), tx="Tx", message=None,
               src=("clients/js/src", ".js")),
    "go": dict(surface=go_surface, case=go_case, client="Client", kv=("Client", ""), tx="Tx", message="Message",
               src=("clients/go", ".go")),
    "rust": dict(surface=rust_surface, case=lambda s: s, client="Client", kv=("Client", ""), tx="Tx",
                 message="Message", src=("clients/rust/src", ".rs"), twins=["AsyncClient"]),
    "cpp": dict(surface=cpp_surface, case=lambda s: s, client="Client", kv=("Client", "kv_"), tx="Transaction",
                message="Message", src=("clients/cpp", "")),
    "php": dict(surface=php_surface, case=camel, client="Client", kv=("Client", "kv_"), tx="Transaction",
                message=None, src=("clients/php/src", ".php")),
    "c": dict(surface=c_surface, case=lambda s: "queen_client_" + s, client="", kv=("", "kv_"), tx="",
              tx_prefix="tx_", message=None, src=("src/client", ".c")),
}
# JS and PHP messages are plain objects (the wire's), accepted by ack as they are; the C client's are
# JSON text: none of the three has a message type to carry ack_item.


def check(name, cfg):
    """Yields (ok, description) per check of one client."""
    surf = cfg["surface"]()
    case = cfg["case"]

    def has(owner, canon):
        return case(canon) in surf.get(owner, set())

    for owner in {cfg["client"], cfg["kv"][0], cfg["tx"]}:
        yield bool(surf.get(owner)), f"{name}: the surface of {owner or 'the library'} parses"
    for op in CLIENT_OPS:
        yield has(cfg["client"], op), f"{name}: operation {case(op)} on {cfg['client'] or 'the library'}"
    kv_owner, kv_prefix = cfg["kv"]
    for op in KV_OPS:
        yield has(kv_owner, kv_prefix + op), f"{name}: kv_{op} as {case(kv_prefix + op)}"
    for op in TX_OPS:
        canon = cfg.get("tx_prefix", "") + op
        # commit may be the builder's or the client's (client.commit(tx)): one name either way.
        ok = has(cfg["tx"], canon) or (op == "commit" and has(cfg["client"], op))
        yield ok, f"{name}: transaction builder has {case(canon)}"
    # A second client type (Rust's AsyncClient) speaks the same vocabulary as the first: every
    # operation, every KV call (on itself, as the client has them) and commit.
    for twin in cfg.get("twins", []):
        for op in CLIENT_OPS + [kv_prefix + op for op in KV_OPS] + ["commit"]:
            yield has(twin, op), f"{name}: {twin} has {case(op)}, as {cfg['client']} does"
    if cfg["message"]:
        for op in MESSAGE_OPS:
            yield has(cfg["message"], op), f"{name}: {cfg['message']} has {case(op)}"
    # Compared without case and underscores, so Unset, unset and UNSET are one spelling.
    def norm(s):
        return s.replace("_", "").lower()
    public = {norm(n): n for n in set().union(*surf.values())}
    for old in RETIRED:
        for spelt in {old, kv_prefix + old}:
            hit = public.get(norm(case(spelt)))
            yield hit is None, f"{name}: retired spelling {case(spelt)} is not public" + (f" (found {hit})" if hit else "")
    # The library's own source only: a test or an example naming a kind proves nothing.
    own = [p for p in files(*cfg["src"]) if not re.search(r"(/tests?/|_test\.go$|/examples?/)", p)]
    src = text_of(own + ([os.path.join(ROOT, "include/queen_client.h")] if name == "c" else []))
    for kind in ERROR_KINDS:
        yield re.search(r"[\"']" + kind + r"[\"']", src) is not None, f"{name}: error kind \"{kind}\" is spelt"
    yield "QUEEN_URL" in src, f"{name}: reads QUEEN_URL"


def main():
    n, failed = 0, 0
    for name, cfg in CLIENTS.items():
        for ok, what in check(name, cfg):
            n += 1
            print(f"{'ok' if ok else 'not ok'} {n} - {what}")
            failed += not ok
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
