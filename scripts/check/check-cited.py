#!/usr/bin/env python3
"""Every file the docs cite as evidence is committed.

    scripts/check/check-cited.py

The docs name their evidence in backticks: a path under a folder of this repository
(`results/X/runs.csv`, `scripts/bench/rss.sh`) or, inside a paragraph that has named its
folder, a bare file name (`tried-and-counts.txt`). results/*/ is ignored by .gitignore so
that a sweep's output is not committed by accident; evidence is added with `git add -f`, and a
file that was cited but never added is lost with the working tree that held it. This check
fails on any cited path git does not track, and on any bare file name no tracked file carries. Paths outside the repository (`/run/shoal/…`,
`../shared/…`) and placeholders (`DIR/runs.csv`, `logs/<order>-routes.log`) are not evidence
and are skipped: a path is checked when its first component is one of the repository's own
top-level folders, or looks like a crate's source (`NAME/src/…`: a crate that was removed is
still caught). Rust sources are read too, for the evidence their comments cite by its
full path (`results/…/x.log`); vendored code is not.
"""
import os
import re
import subprocess
import sys

# What counts as a cited file: a backticked token ending in one of these.
CITED = re.compile(r"`([^`\s]+\.(?:log|txt|csv|sh|diff|patch|toml|py|svg|json|summary|rs))`")
# In Rust comments: a full path under results/.
CITED_IN_CODE = re.compile(r"(results/[A-Za-z0-9._/-]+\.(?:log|txt|csv|json|diff))")


def tracked_files():
    out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def docs(files):
    return sorted(f for f in files if f.endswith(".md") and (f.startswith("docs/") or f == "README.md"))


def sources(files):
    return sorted(f for f in files if f.endswith(".rs") and not f.startswith("vendor/"))


def missing(files):
    tracked = set(files)
    names = {os.path.basename(f) for f in files}
    top = {f.split("/", 1)[0] for f in files if "/" in f}
    for doc in docs(files):
        with open(doc, encoding="utf-8") as text:
            for number, line in enumerate(text, 1):
                for match in CITED.finditer(line):
                    path = match.group(1)
                    if any(c in path for c in "{}*<>…"):
                        continue  # a pattern or a placeholder, not one file
                    if "/" in path:
                        crate_like = re.match(r"[a-z][a-z0-9_-]*/(src|examples|benches)/", path)
                        if path.split("/", 1)[0] not in top and not crate_like:
                            continue  # outside the repository, or a placeholder folder
                        if path in tracked:
                            continue
                    elif path in names:
                        continue
                    yield doc, number, path
    for source in sources(files):
        with open(source, encoding="utf-8") as text:
            for number, line in enumerate(text, 1):
                for match in CITED_IN_CODE.finditer(line):
                    if match.group(1) not in tracked:
                        yield source, number, match.group(1)


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    lost = list(missing(tracked_files()))
    for doc, number, path in lost:
        print(f"{doc}:{number}: cites `{path}`, which git does not track", file=sys.stderr)
    if lost:
        print(
            f"check-cited: {len(lost)} cited file(s) not committed "
            "(results/*/ is git-ignored: add evidence with `git add -f`)",
            file=sys.stderr,
        )
        return 1
    print("check-cited: every cited file is committed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
