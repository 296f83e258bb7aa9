#!/usr/bin/env python3
"""docs/openapi.yaml against the route table (src/server/routes.c), as TAP
for scripts/test.sh.

1. The table parses (at least one route), so an unreadable table cannot
   pass the comparison below by being empty.
2. Every route of the table is an operation of the document.
3. Every operation of the document is a route of the table.
4. The tenant-scoped routes (family other than FAMILY_OPS) declare the
   x-queen-tenant header; the operational ones do not.
5. Every path parameter of a route is declared by its operation.
6. Every operation's x-queen-role is the role the route table's row gives
   its route (none, read, write, admin), and only the role-none
   route waives bearerAuth (security: []); docs/auth.md's roles table (between
   <!-- roles:begin --> and <!-- roles:end -->) says the same of every route.

A table pattern becomes an OpenAPI path by writing :name and *name (the
rest-of-path capture) as {name}."""
import os
import re
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ROUTE = re.compile(r'\{\s*"([A-Z]+)"\s*,\s*"([^"]+)"\s*,\s*(\w+)\s*,\s*(FAMILY_\w+)\s*,\s*ROLE_([A-Z]+)\s*,\s*(RES_\w+)\s*,\s*(ACCESS_\w+)\s*\}')
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def table(path=os.path.join(ROOT, "src/server/routes.c")):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index("http_routes[]")
    body = text[start:text.index("};", start)]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [(m, p, fam) for m, p, _, fam, _, _, _ in ROUTE.findall(body)]


def policies(path=os.path.join(ROOT, "src/server/routes.c")):
    """The role of each route, from the same table's rows."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index("http_routes[]")
    body = re.sub(r"/\*.*?\*/", "", text[start:text.index("};", start)], flags=re.S)
    return {(m, openapi_path(p)): role.lower() for m, p, _, _, role, _, _ in ROUTE.findall(body)}


def openapi_path(pattern):
    return re.sub(r"[:*]([A-Za-z_][A-Za-z0-9_]*)", r"{\1}", pattern)


def operations(doc):
    ops = {}
    for path, item in (doc.get("paths") or {}).items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method in item:
                ops[(method.upper(), path)] = shared + item[method].get("parameters", [])
    return ops


def page_roles(path=os.path.join(ROOT, "docs", "auth.md")):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    body = text[text.index("<!-- roles:begin -->"):text.index("<!-- roles:end -->")]
    return {(m, openapi_path(p)): role for m, p, role in re.findall(r"^\| `([A-Z]+) (\S+)` \| (\w+) \|", body, re.M)}


def roles_of(doc):
    out = {}
    for path, item in (doc.get("paths") or {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                out[(method.upper(), path)] = (op.get("x-queen-role"), op.get("security"))
    return out


def resolve(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        cur = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            cur = cur[part]
        node = cur
    return node


def main():
    with open(os.path.join(ROOT, "docs/openapi.yaml"), encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    routes = table()
    ops = operations(doc)
    wanted = {(m, openapi_path(p)): fam for m, p, fam in routes}
    print("1..6")
    n = 0

    def check(ok, what, bad=()):
        nonlocal n
        n += 1
        print(("ok" if ok else "not ok") + " %d - %s" % (n, what))
        for b in bad:
            print("# " + b)
        return ok

    results = [check(len(routes) > 0 and doc.get("openapi", "").startswith("3.1"),
                     "the route table parses (%d routes) and the document is OpenAPI 3.1" % len(routes))]
    missing = sorted("%s %s" % k for k in wanted if k not in ops)
    results.append(check(not missing, "every route of src/server/routes.c is in docs/openapi.yaml",
                         ["not documented: " + m for m in missing]))
    extra = sorted("%s %s" % k for k in ops if k not in wanted)
    results.append(check(not extra, "every operation of docs/openapi.yaml is a route of src/server/routes.c",
                         ["not a route: " + e for e in extra]))
    bad_tenant, bad_params = [], []
    for key, fam in sorted(wanted.items()):
        if key not in ops:
            continue
        params = [resolve(doc, p) for p in ops[key]]
        has_tenant = any(p.get("in") == "header" and p.get("name", "").lower() == "x-queen-tenant" for p in params)
        if has_tenant != (fam != "FAMILY_OPS"):
            bad_tenant.append("%s %s (%s) %s x-queen-tenant" % (key[0], key[1], fam,
                                                               "declares" if has_tenant else "lacks"))
        declared = {p.get("name") for p in params if p.get("in") == "path"}
        for name in re.findall(r"\{(\w+)\}", key[1]):
            if name not in declared:
                bad_params.append("%s %s does not declare path parameter %s" % (key[0], key[1], name))
    results.append(check(not bad_tenant, "x-queen-tenant is declared exactly by the tenant-scoped routes", bad_tenant))
    results.append(check(not bad_params, "every path parameter is declared", bad_params))
    table_roles, bad_roles = policies(), []
    for key, (role, security) in sorted(roles_of(doc).items()):
        want = table_roles.get(key)
        if role != want:
            bad_roles.append("%s %s: x-queen-role %s, routes.c says %s" % (key[0], key[1], role, want))
        if (security == []) != (want == "none"):
            bad_roles.append("%s %s: security %r with role %s" % (key[0], key[1], security, want))
    if page_roles() != table_roles:
        bad_roles.append("docs/auth.md's roles table differs from routes.c's: %s" %
                         sorted(set(page_roles().items()) ^ set(table_roles.items())))
    results.append(check(len(table_roles) > 0 and not bad_roles,
                         "x-queen-role matches src/server/routes.c's roles (%d rows)" % len(table_roles),
                         bad_roles))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
