#!/usr/bin/env python3
"""The reason registry (src/engine/reasons.txt) and what derives from it.

  reasons.py c OUT.c     writes the C tables libqueen links (build/gen/reasons.c):
                         the category classes and the sorted reason rows
  reasons.py http OUT.c  writes the HTTP edge's table (build/gen/http_errors.c):
                         each category's status and envelope codes
  reasons.py docs        rewrites docs/openapi.yaml's ErrorReason enum and the
                         table of docs/reasons.md from the registry
  reasons.py check       TAP for scripts/test.sh: every reason SQL raises, C
                         names and the API document lists is registered with
                         one SQLSTATE and a status matching its category, the
                         generated documents are current, docs/api.md's table
                         of categories names the registry's codes and statuses,
                         and no entry is unused

A reason is found in SQL as a string literal of our prefixes (kv_, log_,
tenant_, encryption_, streams_, ...) that is not a function name; in C as such a literal, or
as a literal passed where a function takes a parameter named `reason`,
returned by a function whose name ends in `reason`, or assigned to a
`reason` member."""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
REGISTRY = "src/engine/reasons.txt"
PREFIX = re.compile(r"^(kv|log|tenant|encryption|auth|token|body|db|streams)_[a-z0-9_]+$")
FUNCTION_NAME = re.compile(r"_v[0-9]+$")
# Literals of our prefixes that name something else: JSON members and
# session settings, never an answer's reason.
NOT_REASONS = {
    "kv_bytes", "kv_rows",            # kv_usage_measure_v1's members (kv_quota.sql)
    "log_traces_forget",              # a maintenance step's name (log_traces.sql)
    "ok",                             # crypt's verdict on a payload that opened: no error
    "always_current",                 # a status body's member (refreshed false), not an error
    # A delivered message's encryptionError (docs/openapi.yaml EncryptionError),
    # not an error answer's reason.
    "encryption_key_unknown", "encryption_open_failed",
}


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


class Registry:
    def __init__(self, text):
        self.categories = {}  # name -> dict
        self.reasons = {}     # id -> dict
        self.errors = []
        section = None
        for n, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            if s.startswith("Section:"):
                section = s.split(":", 1)[1].strip()
                continue
            if section == "categories":
                f = s.split()
                if len(f) != 9 or f[3] not in ("yes", "no"):
                    self.errors.append(f"{REGISTRY}:{n}: a category has 9 columns")
                    continue
                name, engine, status, retry, retry_after, code, kv_code, wire, generic = f
                self.categories[name] = dict(line=n, engine=engine, status=int(status), retry=retry,
                                             retry_after=int(retry_after), code=code, kv_code=kv_code, wire=wire,
                                             generic=generic)
            elif section == "reasons":
                f = s.split(None, 6)
                if len(f) != 7:
                    self.errors.append(f"{REGISTRY}:{n}: a reason has 7 columns")
                    continue
                rid, state, cat, status, retry, wire, meaning = f
                if rid in self.reasons:
                    self.errors.append(f"{REGISTRY}:{n}: {rid} registered twice")
                self.reasons[rid] = dict(line=n, sqlstate=None if state == "-" else state, category=cat,
                                         status=int(status), retryable=retry == "yes", retry=retry,
                                         wire=None if wire == "-" else wire, meaning=meaning)
            else:
                self.errors.append(f"{REGISTRY}:{n}: a line outside a section")
        for rid, r in self.reasons.items():
            c = self.categories.get(r["category"])
            where = f"{REGISTRY}:{r['line']}: {rid}"
            if c is None:
                self.errors.append(f"{where}: unknown category {r['category']}")
                continue
            if r["status"] != c["status"]:
                self.errors.append(f"{where}: status {r['status']}, its category says {c['status']}")
            if r["retry"] != c["retry"]:
                self.errors.append(f"{where}: retryable {r['retry']} disagrees with its category")
            if r["sqlstate"] is not None and not re.fullmatch(r"[0-9A-Z]{5}", r["sqlstate"]):
                self.errors.append(f"{where}: SQLSTATE {r['sqlstate']} is not five characters")
        names = list(self.reasons)
        if names != sorted(names):
            self.errors.append(f"{REGISTRY}: reasons are not in sorted order")

    def codes(self):
        out = set()
        for c in self.categories.values():
            out |= {c["code"], c["kv_code"]}
        return out - {"-"}


def load():
    return Registry(read(REGISTRY))


# ---- where reasons are used -------------------------------------------------

def strip_sql_comments(text):
    return re.sub(r"--[^\n]*", "", text)


def sql_uses():
    """{reason: [(file:line, sqlstate or None)]}: every prefixed literal of
    sql/*.sql, with the SQLSTATE of the RAISE (or problem array) that names
    it, where the two stand together."""
    uses = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "sql", "*.sql"))):
        rel = os.path.relpath(path, ROOT)
        text = strip_sql_comments(read(rel))
        for m in re.finditer(r"'([a-z][a-z0-9_]*)'", text):
            rid = m.group(1)
            if not PREFIX.match(rid) or FUNCTION_NAME.search(rid) or rid in NOT_REASONS:
                continue
            line = text.count("\n", 0, m.start()) + 1
            state = None
            before = text[max(0, m.start() - 80):m.start()]
            after = text[m.end():m.end() + 60]
            a = re.match(r"\s*USING\s+ERRCODE\s*=\s*'([0-9A-Z]{5})'", after)         # RAISE EXCEPTION 'id' USING ERRCODE = 'x'
            b = re.search(r"ERRCODE\s*=\s*'([0-9A-Z]{5})'\s*,\s*MESSAGE\s*=\s*$", before)  # USING ERRCODE = 'x', MESSAGE = 'id'
            c = re.search(r"ARRAY\[\s*'([0-9A-Z]{5})'\s*,\s*$", before)              # ARRAY['x', 'id', detail]
            for k in (a, b, c):
                if k:
                    state = k.group(1)
            uses.setdefault(rid, []).append((f"{rel}:{line}", state))
    return uses


def split_args(text, start):
    """The top-level arguments of the call whose '(' is at text[start]."""
    depth, args, cur, i, q = 0, [], [], start, None
    while i < len(text):
        ch = text[i]
        if q:
            cur.append(ch)
            if ch == "\\":
                cur.append(text[i + 1])
                i += 1
            elif ch == q:
                q = None
        elif ch in "\"'":
            q = ch
            cur.append(ch)
        elif ch in "([{":
            depth += 1
            if depth > 1:
                cur.append(ch)
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur))
                return args
            cur.append(ch)
        elif ch == "," and depth == 1:
            args.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    return args


def strip_c_comments(text):
    # Keeps line numbers: a comment becomes as many newlines as it held.
    out = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", out)


LIT = re.compile(r'"([a-z][a-z0-9_]*)"')


def c_files():
    return sorted(glob.glob(os.path.join(ROOT, "src", "*", "*.[ch]")) + glob.glob(os.path.join(ROOT, "include", "*.h")))


def c_uses(codes_known=frozenset()):
    """({reason: [file:line]}, {code: [file:line]}) from src/ and include/.
    codes_known: the categories' codes, which are not reasons."""
    texts = {os.path.relpath(p, ROOT): strip_c_comments(read(os.path.relpath(p, ROOT))) for p in c_files()}
    # Functions taking a parameter named reason (or code): name -> index.
    # A static function is looked up in its own file first.
    takes, local = {}, {}
    decl = re.compile(r"^(static\s+)?[a-z_][a-z0-9_ \*]*?\b([a-z_][a-z0-9_]*)\s*\(([^()]*)\)", re.M)
    for rel, text in texts.items():
        for m in decl.finditer(text):
            params = [p.strip() for p in m.group(3).split(",")]
            for i, p in enumerate(params):
                name = re.sub(r"[^a-z0-9_]", " ", p).split()
                if name and name[-1] in ("reason", "code") and "char" in p:
                    table = local.setdefault(rel, {}) if m.group(1) else takes
                    table.setdefault(m.group(2), {})[name[-1]] = i
    reasons, codes = {}, {}

    def add(table, lits, rel, text, pos):
        line = text.count("\n", 0, pos) + 1
        for lit in lits:
            if table is codes or lit not in NOT_REASONS:
                table.setdefault(lit, []).append(f"{rel}:{line}")

    for rel, text in texts.items():
        for fn, slots in {**takes, **local.get(rel, {})}.items():
            for m in re.finditer(r"\b" + fn + r"\s*\(", text):
                args = split_args(text, m.end() - 1)
                for kind, i in slots.items():
                    if i < len(args) and '"' in args[i] and (kind == "reason" or not rel.startswith("src/client")):
                        add(reasons if kind == "reason" else codes, LIT.findall(args[i]), rel, text, m.start())
        # Literals a reason-naming function returns, or a reason member holds.
        for m in re.finditer(r"\b([a-z_][a-z0-9_]*reason)\s*\([^()]*\)\s*\{", text):
            depth, i = 0, text.index("{", m.end() - 1)
            j = i
            while j < len(text):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            for r in re.finditer(r'return\s+"([a-z][a-z0-9_]*)"', text[i:j]):
                add(reasons, [r.group(1)], rel, text, i + r.start())
        for m in re.finditer(r'(?:\.?\breason\s*=\s*|"reason",\s*)"([a-z][a-z0-9_]*)"', text):
            add(reasons, [m.group(1)], rel, text, m.start())
        for m in LIT.finditer(text):
            lit = m.group(1)
            if PREFIX.match(lit) and not FUNCTION_NAME.search(lit) and lit not in NOT_REASONS and lit not in codes_known:
                add(reasons, [lit], rel, text, m.start())
    return reasons, codes


def openapi_enum(text):
    """The ErrorReason enum of docs/openapi.yaml, as (start, end, names)."""
    a = text.index("    ErrorReason:")
    s = text.index("        - enum:\n", a) + len("        - enum:\n")
    e = text.index("        - pattern:", s)
    names = re.findall(r"^            - ([a-z0-9_]+)\s*$", text[s:e], re.M)
    return s, e, names


# ---- generated text ---------------------------------------------------------

def c_text(reg):
    """libqueen's tables: what a category means to a caller of the engine
    (retry advice, the transaction failure body's reason, the generic
    reason), never how HTTP presents it (http_text)."""
    q = lambda s: '"' + s + '"'
    out = ["/* Generated by scripts/reasons.py from src/engine/reasons.txt: edit that file. */",
           '#include "reasons.h"', "", "const queen_error_class queen_error_classes[QUEEN_ERROR_CATEGORIES] = {"]
    for name, c in reg.categories.items():
        if c["engine"] == "-":
            continue
        retryable = "true" if c["retry"] == "yes" else "false"
        out.append(f"    [{c['engine']}] = {{{q(c['wire'])}, {q(c['generic'])}, {retryable}, {c['retry_after']}}},")
    out += ["};", "", "const queen_reason_row queen_reasons[] = {"]
    for rid, r in sorted(reg.reasons.items()):
        c = reg.categories[r["category"]]
        engine = c["engine"] if c["engine"] != "-" else "QUEEN_REASON_EDGE_ONLY"
        wire = q(r["wire"]) if r["wire"] else "NULL"
        state = q(r["sqlstate"]) if r["sqlstate"] else "NULL"
        out.append(f"    {{{q(rid)}, {state}, {engine}, {'true' if r['retryable'] else 'false'}, {wire}}},")
    out += ["};", "const size_t queen_reason_count = sizeof queen_reasons / sizeof queen_reasons[0];", ""]
    return "\n".join(out)


def http_text(reg):
    """The HTTP edge's table (src/server/errors.h): each engine category's
    status and envelope codes. The server links it; libqueen does not."""
    q = lambda s: '"' + s + '"'
    out = ["/* Generated by scripts/reasons.py from src/engine/reasons.txt: edit that file. */",
           '#include "errors.h"', "", "const http_error_class http_error_classes[] = {"]
    for name, c in reg.categories.items():
        if c["engine"] == "-":
            continue
        out.append(f"    [{c['engine']}] = {{{c['status']}, {q(c['code'])}, {q(c['kv_code'])}}},")
    out += ["};", "const size_t http_error_class_count = sizeof http_error_classes / sizeof http_error_classes[0];", ""]
    return "\n".join(out)


def docs_table(reg):
    rows = ["| reason | code | status | retry | SQLSTATE | meaning |", "|---|---|---|---|---|---|"]
    for rid, r in sorted(reg.reasons.items()):
        c = reg.categories[r["category"]]
        code = c["code"] if c["code"] == c["kv_code"] else f"{c['code']} / {c['kv_code']}"
        rows.append(f"| `{rid}` | `{code}` | {r['status']} | {r['retry']} | {r['sqlstate'] or ''} | {r['meaning']} |")
    return "\n".join(rows) + "\n"


def docs_texts(reg):
    """{path: the text it should hold}."""
    api = read("docs/openapi.yaml")
    s, e, _ = openapi_enum(api)
    enum = "".join(f"            - {rid}\n" for rid in sorted(reg.reasons))
    md = read("docs/reasons.md")
    a = md.index("<!-- reasons:begin -->\n") + len("<!-- reasons:begin -->\n")
    b = md.index("<!-- reasons:end -->")
    return {"docs/openapi.yaml": api[:s] + enum + api[e:], "docs/reasons.md": md[:a] + docs_table(reg) + md[b:]}


# ---- the check --------------------------------------------------------------

def api_table_problems(reg):
    """docs/api.md's category table (| category | status | code (KV routes) |
    code (other routes) | retry |): each row's codes are categories' codes,
    and one of them has the row's status."""
    text = read("docs/api.md")
    head = "| category | status | `code` (KV routes) | `code` (other routes) | retry |"
    if head not in text:
        return ["docs/api.md: the table of categories is gone (its header changed?)"]
    rows = text[text.index(head):].split("\n")[2:]
    problems, codes = [], reg.codes()
    for row in rows:
        if not row.startswith("|"):
            break
        cells = [c.strip() for c in row.strip("|").split("|")]
        status = re.match(r"\d{3}", cells[1])
        names = set(re.findall(r"`([a-z_]+)`", cells[2] + " " + cells[3]))
        unknown = sorted(names - codes)
        if unknown:
            problems.append(f"docs/api.md: {cells[0][:40]}: {', '.join(unknown)} is no category's code")
        cats = [c for c in reg.categories.values() if names & {c["code"], c["kv_code"]}]
        if status and cats and all(c["status"] != int(status.group(0)) for c in cats) and "verdict" not in cells[1]:
            problems.append(f"docs/api.md: {cells[0][:40]}: status {status.group(0)}, the registry says "
                            f"{sorted({c['status'] for c in cats})}")
    if not rows or not rows[0].startswith("|"):
        problems.append("docs/api.md: the table of categories has no rows")
    return problems


def check():
    reg = load()
    results = []

    def tap(name, problems):
        results.append((name, problems))

    tap("the registry parses and its rows agree with their categories", reg.errors)
    sql = sql_uses()
    tap("every reason sql/*.sql raises is registered",
        [f"{w[0][0]}: {rid} is not in {REGISTRY}" for rid, w in sorted(sql.items()) if rid not in reg.reasons])
    mism = []
    for rid, ws in sorted(sql.items()):
        r = reg.reasons.get(rid)
        for where, state in ws:
            if r is not None and r["sqlstate"] is None:
                mism.append(f"{where}: {rid} is raised by SQL and registered without a SQLSTATE")
            elif r is not None and state is not None and state != r["sqlstate"]:
                mism.append(f"{where}: {rid} raised with {state}, registered with {r['sqlstate']}")
    tap("every RAISE uses its reason's registered SQLSTATE", mism)
    creasons, ccodes = c_uses(reg.codes())
    tap("every reason src/ names is registered",
        [f"{w[0]}: {rid} is not in {REGISTRY}" for rid, w in sorted(creasons.items()) if rid not in reg.reasons])
    tap("every code src/ names is a category's",
        [f"{w[0]}: code {c} is no category's" for c, w in sorted(ccodes.items()) if c not in reg.codes()])
    generic = {c[k] for c in reg.categories.values() for k in ("generic", "wire")}
    used = set(sql) | set(creasons) | generic
    tap("no registered reason is unused",
        [f"{REGISTRY}:{r['line']}: {rid} is raised nowhere" for rid, r in sorted(reg.reasons.items()) if rid not in used])
    tap("docs/api.md's table of categories names the registry's codes and statuses", api_table_problems(reg))
    stale = []
    for path, want in docs_texts(reg).items():
        if read(path) != want:
            stale.append(f"{path} is not what the registry gives: run python3 scripts/reasons.py docs")
    tap("docs/openapi.yaml's ErrorReason enum and docs/reasons.md are the registry's", stale)
    print(f"1..{len(results)}")
    for i, (name, problems) in enumerate(results, 1):
        print(f"{'not ok' if problems else 'ok'} {i} - {name}")
        for p in problems:
            print(f"# {p}")
    return 1 if any(p for _, p in results) else 0


def main(argv):
    if len(argv) == 3 and argv[1] in ("c", "http"):
        reg = load()
        if reg.errors:
            sys.exit("\n".join(reg.errors))
        with open(argv[2], "w", encoding="utf-8") as f:
            f.write(c_text(reg) if argv[1] == "c" else http_text(reg))
        return 0
    if len(argv) == 2 and argv[1] == "docs":
        reg = load()
        for path, text in docs_texts(reg).items():
            with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
                f.write(text)
        return 0
    if len(argv) == 2 and argv[1] == "check":
        return check()
    if len(argv) == 2 and argv[1] == "uses":  # every use found, for editing the registry
        sql = sql_uses()
        creasons, ccodes = c_uses()
        for rid in sorted(set(sql) | set(creasons)):
            states = sorted({s for _, s in sql.get(rid, []) if s})
            print(rid, ",".join(states) or "-", (sql.get(rid) or [("", None)])[0][0], " ".join(creasons.get(rid, [])[:2]))
        print("codes:", " ".join(sorted(ccodes)))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
