#!/usr/bin/env python3
"""The documentation's links and the README's layout table, as TAP for
scripts/test.sh (lint/docs).

1. Every relative link and image of every tracked Markdown file resolves:
   the file (or folder) exists in the repository and, for `page.md#part`,
   `part` is one of that page's headings (as GitHub makes anchors of them).
   A page moved or a heading renamed fails here instead of leaving a
   reader at a dead end.
2. README.md and docs/ never link outside the repository (an absolute URL
   in a link or image; docs/openapi.yaml's `servers` is the broker itself,
   not a link): what they say must be readable from a checkout alone.
3. README.md's layout table (the rows after "## Layout") names every
   top-level folder of the repository, and each folder of src/ and clients/
   by its own path, so a new client or library cannot be missing from it.

Links inside code (fenced blocks, `inline code`) are not links and are
skipped."""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def tracked():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
    return [p for p in out.split("\n") if p]


def prose(text):
    """The text with fenced code blocks blanked (line numbers kept) and inline code removed."""
    lines, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            lines.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            lines.append("")
        else:
            lines.append(re.sub(r"`+[^`]*`+", "", line))
    return lines


def anchors(path):
    """GitHub's anchors of a page's headings: lower case, punctuation dropped,
    spaces to hyphens, a repeated one numbered -1, -2, ..."""
    seen, out = {}, set()
    for line in prose(open(path, encoding="utf-8").read()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def link_problems(files):
    problems, outside, count = [], [], 0
    for rel in files:
        own = rel == "README.md" or rel.startswith("docs/")
        for no, line in enumerate(prose(open(os.path.join(ROOT, rel), encoding="utf-8").read()), 1):
            for target in LINK.findall(line):
                count += 1
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    if own:
                        outside.append(f"{rel}:{no}: {target} is outside the repository")
                    continue
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(ROOT, os.path.dirname(rel), path)) if path else os.path.join(ROOT, rel)
                if not dest.startswith(ROOT + os.sep) and dest != ROOT:
                    problems.append(f"{rel}:{no}: {target} leaves the repository")
                elif not os.path.exists(dest):
                    problems.append(f"{rel}:{no}: {target}: no such file")
                elif frag and dest.endswith(".md") and frag.lower() not in anchors(dest):
                    problems.append(f"{rel}:{no}: {target}: no heading makes #{frag}")
    return problems, outside, count


def layout_problems(files):
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    if "\n## Layout\n" not in text:
        return ["README.md has no \"## Layout\" section"]
    named = set()
    for row in text.split("\n## Layout\n", 1)[1].lstrip("\n").split("\n"):
        if not row.startswith("|"):
            break
        named.update(re.findall(r"`([^`]+)`", row.split("|")[1]))
    dirs = {p.split("/")[0] for p in files if "/" in p}
    want = sorted(d + "/" for d in dirs)
    missing = [d for d in want if not any(n == d or n.startswith(d) for n in named)]
    for top in ("src", "clients"):
        subs = sorted({p.split("/")[1] for p in files if p.startswith(top + "/") and p.count("/") >= 2})
        missing += [f"{top}/{s}/" for s in subs if f"{top}/{s}/" not in named]
    return [f"README.md's layout table does not name {d}" for d in missing]


def main():
    files = tracked()
    md = [p for p in files if p.endswith(".md") and os.path.exists(os.path.join(ROOT, p))]
    problems, outside, count = link_problems(md)
    layout = layout_problems(files)
    print("1..3")
    results = [(f"every relative link of the {len(md)} Markdown pages resolves ({count} links)", problems),
               ("README.md and docs/ link nowhere outside the repository", outside),
               ("README.md's layout table names every top-level folder and every folder of src/ and clients/", layout)]
    failed = 0
    for n, (what, bad) in enumerate(results, 1):
        for b in bad:
            print(f"# {b}")
        print(f"{'not ok' if bad else 'ok'} {n} - {what}")
        failed += bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
