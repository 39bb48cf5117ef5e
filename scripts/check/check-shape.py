#!/usr/bin/env python3
"""The code's shape, checked (docs/architecture.md, "Rules"):

- no source file over 800 lines, unit tests included (files holding only tests aside);
- no two module files of a crate import each other (`use crate::a` in b and `use crate::b` in
  a, or `crate::a::…` paths used inline);
- the protocol crate depends on none of tokio, quinn, rustls, yamux, clap, socket2;
- `unsafe` only in each crate's `sys.rs` (and the test support's `sys.rs`).

Prints what breaks a rule and exits 1; prints a one-line summary and exits 0 otherwise.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CRATES = ["proto", "common", "sender", "receiver", "cli", "link", "sweep"]
MAX_LINES = 800
FORBIDDEN_PROTO_DEPS = ["tokio", "quinn", "rustls", "yamux", "clap", "socket2"]

problems = []


def module_of(crate_src, path):
    """`receiver/src/stage.rs` → `stage`; `common/src/pipeline/writer.rs` → `pipeline`."""
    rel = os.path.relpath(path, crate_src)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def strip_tests(text):
    """The file without its `#[cfg(test)] mod tests { … }` tail (tests may import freely)."""
    m = re.search(r"#\[cfg\(test\)\]\s*mod \w+\s*\{", text)
    return text[: m.start()] if m else text


files = 0
for crate in CRATES:
    src = os.path.join(ROOT, crate, "src")
    imports = {}  # module → set of modules it uses
    for dirpath, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, ROOT)
            text = open(path, encoding="utf-8").read()
            files += 1
            body = strip_tests(text)
            # Whole files, unit tests included; a file holding only tests (`tests.rs`, a
            # `tests/` folder) is a test file.
            n = text.count("\n")
            if n > MAX_LINES and not name.startswith("tests") and "/tests/" not in rel:
                problems.append(f"{rel}: {n} lines (limit {MAX_LINES})")
            if re.search(r"\bunsafe\s*(\{|fn|impl)", body) and name != "sys.rs":
                problems.append(f"{rel}: unsafe outside the crate's sys.rs")
            me = module_of(src, path)
            if me in ("lib", "main"):
                continue
            used = set(re.findall(r"\bcrate::(\w+)", body))
            # `use crate::{a, b::c}` groups.
            for group in re.findall(r"use crate::\{([^}]*)\}", body, re.S):
                used.update(re.findall(r"(?:^|,)\s*(\w+)", group))
            used.discard(me)
            imports.setdefault(me, set()).update(used)
    for a, uses in imports.items():
        for b in uses:
            if a < b and a in imports.get(b, set()):
                problems.append(f"{crate}: modules {a} and {b} import each other")

# The end-to-end tests' unsafe code lives in tests/support/sys.rs too.
for dirpath, _, names in os.walk(os.path.join(ROOT, "tests")):
    for name in names:
        if name.endswith(".rs") and name != "sys.rs":
            path = os.path.join(dirpath, name)
            files += 1
            if re.search(r"\bunsafe\s*(\{|fn|impl)", open(path, encoding="utf-8").read()):
                problems.append(f"{os.path.relpath(path, ROOT)}: unsafe outside tests/support/sys.rs")

tree = subprocess.run(
    ["cargo", "tree", "-p", "shoal-proto", "-e", "normal", "--prefix", "none", "--offline"],
    cwd=ROOT,
    capture_output=True,
    text=True,
)
if tree.returncode != 0:
    problems.append(f"cargo tree -p shoal-proto failed: {tree.stderr.strip()}")
else:
    deps = {line.split()[0] for line in tree.stdout.splitlines() if line.strip()}
    for d in FORBIDDEN_PROTO_DEPS:
        if d in deps:
            problems.append(f"shoal-proto depends on {d}")

for p in problems:
    print(f"check-shape: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print(
    f"check-shape: {files} source files: none over {MAX_LINES} lines, no two modules import "
    f"each other, unsafe only in sys.rs, shoal-proto free of {', '.join(FORBIDDEN_PROTO_DEPS)}"
)
