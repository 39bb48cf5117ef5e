#!/usr/bin/env python3
"""The code's shape, checked (docs/architecture.md, "Rules"). Each rule, by its tag:

- cycle: no import cycle of any length between the modules of a crate. A module is a top-level
  file or folder of the crate's src/; an edge is `use crate::x`, a `crate::x::` path, or a
  `super::` path that resolves to a sibling top-level module. Test code is left out.
- crate-size: no crate (a workspace member) over 6,000 lines of src/.
- file-size: no Rust source file over 600 lines; files holding only tests (`tests.rs`, a
  `tests/` folder inside src/, `#[cfg(test)] mod x;` files, the test files of tests/) aside.
- clap: only the `cli/` crate depends on clap.
- unsafe: `unsafe` only in the `sys` crate (and tests/support/sys.rs).
- proto-deps: the protocol crate depends on none of tokio, quinn, rustls, yamux, clap, socket2.
- session: no tracked text file or folder name speaks of an ordinal working session (an
  ordinal before "session", a number after it, a `-s12` suffix on a folder); vendor/ aside.

The crates are the workspace's members (Cargo.toml). Prints what breaks a rule and a count per
rule and exits 1; prints a one-line summary and exits 0 otherwise.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_FILE_LINES = 600
MAX_CRATE_LINES = 6000
FORBIDDEN_PROTO_DEPS = ["tokio", "quinn", "rustls", "yamux", "clap", "socket2"]
RULES = ["cycle", "crate-size", "file-size", "clap", "unsafe", "proto-deps", "session"]
SHOWN_PER_RULE = 40

problems = {rule: [] for rule in RULES}


def problem(rule, text):
    problems[rule].append(text)


def git_files(*pathspec):
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *pathspec], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [p for p in out.decode().split("\0") if p]


# --- Rust source, reduced to code -------------------------------------------------------------

TOKEN = re.compile(
    r"""//[^\n]*|/\*.*?\*/|r(\#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?'(?:\\.|[^'\\\n])'""", re.S
)


def code_only(text):
    """Comments, strings and char literals blanked (newlines kept, so offsets keep their line)."""
    return TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def block_end(code, start):
    """The index just past the `}` closing the first `{` at or after `start`."""
    depth = 0
    for i in range(code.index("{", start), len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


CFG_TEST = re.compile(r"#\[cfg\((?:test|all\(test[^\]]*)\)\]\s*(?:#\[[^\]]*\]\s*)*")


def strip_tests(code):
    """`code` without its `#[cfg(test)]` items (a `mod tests { … }`, a test-only `use` or fn)."""
    while True:
        m = CFG_TEST.search(code)
        if not m:
            return code
        semi, brace = code.find(";", m.end()), code.find("{", m.end())
        if brace == -1 or (semi != -1 and semi < brace):
            end = semi + 1
        else:
            end = block_end(code, m.end())
        code = code[: m.start()] + re.sub(r"[^\n]", " ", code[m.start() : end]) + code[end:]


def test_module_files(path, code):
    """Files declared by `#[cfg(test)] mod x;` in `path` (they hold only tests)."""
    base = os.path.dirname(path)
    if os.path.basename(path) not in ("lib.rs", "main.rs", "mod.rs"):
        base = os.path.join(base, os.path.basename(path)[:-3])
    found = []
    declared = r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"
    for name in re.findall(declared, code):
        found += [os.path.join(base, name + ".rs"), os.path.join(base, name)]
    return found


def is_test_only(rel, test_files):
    parts = rel.split("/")
    if parts[0] == "tests":
        return parts[1:2] != ["support"]  # the workspace's integration tests, not their support
    if parts[-1] == "tests.rs" or "tests" in parts[:-1]:
        return True
    return any(rel == t or rel.startswith(t + "/") for t in test_files)


def use_group_heads(code, start):
    """The first names of each path in the `{ … }` group opening at `start`."""
    end = block_end(code, start)
    inner, depth, heads, at_head = code[start + 1 : end - 1], 0, [], True
    for tok in re.findall(r"\w+|[{},]|::", inner):
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
        elif tok == "," and depth == 0:
            at_head = True
        elif at_head and re.match(r"\w+$", tok):
            heads.append(tok)
            at_head = False
    return heads


def line_of(code, pos):
    return code.count("\n", 0, pos) + 1


def module_path(src_rel):
    """`a.rs` → [a]; `a/mod.rs` → [a]; `a/b.rs` → [a, b]; `lib.rs` → []."""
    parts = src_rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def inline_modules(code):
    """(start, end) of each inline `mod x { … }` (inside one, `super` names `x`'s parent)."""
    return [(m.start(), block_end(code, m.start())) for m in re.finditer(r"\bmod\s+\w+\s*\{", code)]


def imports(code, modpath, modules):
    """{target module: offset of the first use} for the top-level modules `code` reaches."""
    found = {}

    def add(name, pos):
        if name in modules and name != modpath[0]:
            found.setdefault(name, pos)

    for m in re.finditer(r"(?<![\w$])(?:\$)?crate::(\w+|\{)", code):
        if m.group(1) == "{":
            for h in use_group_heads(code, m.start(1)):
                add(h, m.start())
        else:
            add(m.group(1), m.start())
    inline = inline_modules(code)
    for m in re.finditer(r"(?<![\w:])((?:super::)+)(\w+|\{)", code):
        depth = sum(1 for a, b in inline if a < m.start() < b)
        base = len(modpath) + depth - m.group(1).count("super")
        if base != 0:
            continue  # inside the same top-level module (or above the root: not ours to judge)
        if m.group(2) == "{":
            for h in use_group_heads(code, m.start(2)):
                add(h, m.start())
        else:
            add(m.group(2), m.start())
    return found


def tarjan(graph):
    """Strongly connected components of `graph` ({node: set of nodes})."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def a_cycle(graph, comp):
    """One cycle through the component's first module (shortest, by breadth-first search)."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    for v in queue:
        for w in sorted(graph[v] & members):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


# --- The workspace ----------------------------------------------------------------------------

manifest = tomllib.load(open(os.path.join(ROOT, "Cargo.toml"), "rb"))
crates = []
for pattern in manifest["workspace"]["members"]:
    crates += sorted(
        os.path.relpath(p, ROOT)
        for p in glob.glob(os.path.join(ROOT, pattern))
        if os.path.exists(os.path.join(p, "Cargo.toml"))
    )

# Tracked files still on disk, and every file of a crate's src/ (tracked or not yet).
tracked_rs = [
    p for p in git_files("*.rs")
    if not p.startswith("vendor/") and os.path.exists(os.path.join(ROOT, p))
]
rs_files = sorted(set(tracked_rs) | {
    os.path.relpath(p, ROOT)
    for c in crates
    for p in glob.glob(os.path.join(ROOT, c, "src", "**", "*.rs"), recursive=True)
})
texts = {p: open(os.path.join(ROOT, p), encoding="utf-8").read() for p in rs_files}
codes = {p: code_only(texts[p]) for p in rs_files}
test_files = [t for p in rs_files for t in test_module_files(p, codes[p])]

crate_lines = {}
for crate in crates:
    src = crate + "/src/"
    files = [p for p in rs_files if p.startswith(src)]
    crate_lines[crate] = sum(texts[p].count("\n") for p in files)
    if crate_lines[crate] > MAX_CRATE_LINES:
        problem(
            "crate-size", f"{crate}: {crate_lines[crate]} lines in src/ (limit {MAX_CRATE_LINES})"
        )
    # Module graph: roots (lib.rs, main.rs, src/bin/) declare modules; they are not modules.
    graph, where = {}, {}
    modules = {
        module_path(p[len(src):])[0]
        for p in files
        if module_path(p[len(src):]) and not p.startswith(src + "bin/")
    }
    for p in files:
        modpath = module_path(p[len(src):])
        if not modpath or p.startswith(src + "bin/") or is_test_only(p, test_files):
            continue
        body = strip_tests(codes[p])
        for target, pos in imports(body, modpath, modules).items():
            graph.setdefault(modpath[0], set()).add(target)
            where.setdefault((modpath[0], target), f"{p}:{line_of(body, pos)}")
        graph.setdefault(modpath[0], set())
    for comp in tarjan(graph):
        if len(comp) > 1:
            cycle = a_cycle(graph, comp)
            steps = ", ".join(where[(a, b)] for a, b in zip(cycle, cycle[1:]))
            problem(
                "cycle",
                f"{crate}: import cycle among {len(comp)} modules ({', '.join(comp)}); one loop: "
                f"{' → '.join(cycle)} ({steps})",
            )

for p in rs_files:
    n = texts[p].count("\n")
    if n > MAX_FILE_LINES and not is_test_only(p, test_files):
        problem("file-size", f"{p}: {n} lines (limit {MAX_FILE_LINES})")

metadata = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
)
sys_dirs = []
for pkg in metadata["packages"]:
    pdir = os.path.relpath(os.path.dirname(pkg["manifest_path"]), ROOT)
    if os.path.basename(pdir) == "sys" or pkg["name"].endswith("-sys"):
        sys_dirs.append(pdir)
    clap = sorted({d["name"] for d in pkg["dependencies"] if d["name"].startswith("clap")})
    if clap and pdir != "cli":
        problem("clap", f"{pdir} ({pkg['name']}) depends on {', '.join(clap)}; only cli/ may")

for p in rs_files:
    if p == "tests/support/sys.rs" or any(p.startswith(d + "/") for d in sys_dirs):
        continue
    for m in re.finditer(r"\bunsafe\s*(\{|fn\b|impl\b|extern\b|trait\b)", codes[p]):
        problem("unsafe", f"{p}:{line_of(codes[p], m.start())}: unsafe outside the sys crate")

tree = subprocess.run(
    ["cargo", "tree", "-p", "shoal-proto", "-e", "normal", "--prefix", "none", "--offline"],
    cwd=ROOT, capture_output=True, text=True,
)
if tree.returncode != 0:
    problem("proto-deps", f"cargo tree -p shoal-proto failed: {tree.stderr.strip()}")
else:
    deps = {line.split()[0] for line in tree.stdout.splitlines() if line.strip()}
    for d in FORBIDDEN_PROTO_DEPS:
        if d in deps:
            problem("proto-deps", f"shoal-proto depends on {d}")

# --- Sessions ---------------------------------------------------------------------------------

ORDINAL = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth"
    r"|(?:twenty|thirty)[- ]?(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)"
    r"|thirtieth|\d+(?:st|nd|rd|th)|this|last|previous|next|earlier|same)"
)
SESSION = (
    rf"\b{ORDINAL}[ -]sessions?\b|\bsessions?\s*#?\d+\b|\bsessions?\s+(?:one|two|three|four|five"
    r"|six|seven|eight|nine|ten|eleven|twelve)\b"
)
# Sessions of protocols, not of work: "the first TLS session", "the next session ticket".
NOT_WORK = re.compile(r"sessions?[ -](?:ticket|key|resum|set-?up|cache|id\b|state)", re.I)
grep = subprocess.run(
    ["git", "grep", "-I", "-n", "-i", "-P", SESSION, "--", ".", ":!vendor"],
    cwd=ROOT, capture_output=True, text=True,
)
for line in grep.stdout.splitlines():
    path, lineno, text = line.split(":", 2)
    hits = [
        m
        for m in re.finditer(SESSION, text, re.I)
        if not NOT_WORK.match(text, m.start() + m.group(0).lower().rfind("session"))
    ]
    if hits:
        problem("session", f"{path}:{lineno}: {hits[0].group(0)!r}")
SESSION_FOLDER = re.compile(r"-s\d+(?:-|$)")
folders = set()
for p in git_files("."):
    parts = p.split("/")[:-1]
    if parts[:1] != ["vendor"]:
        # The outermost folder so named (its subfolders go with it).
        for i, name in enumerate(parts):
            if SESSION_FOLDER.search(name):
                folders.add("/".join(parts[: i + 1]))
                break
for d in sorted(folders):
    problem("session", f"{d}/: folder named for a session")

# --- Report -----------------------------------------------------------------------------------

total = sum(len(v) for v in problems.values())
for rule in RULES:
    for text in problems[rule][:SHOWN_PER_RULE]:
        print(f"check-shape: [{rule}] {text}", file=sys.stderr)
    if len(problems[rule]) > SHOWN_PER_RULE:
        more = len(problems[rule]) - SHOWN_PER_RULE
        print(f"check-shape: [{rule}] … and {more} more", file=sys.stderr)
if total:
    counts = ", ".join(f"{rule} {len(problems[rule])}" for rule in RULES)
    print(f"check-shape: {total} problem(s): {counts}", file=sys.stderr)
    sys.exit(1)
print(
    f"check-shape: {len(crates)} crates, {len(rs_files)} Rust files: no import cycle, no crate "
    f"over {MAX_CRATE_LINES} lines, no file over {MAX_FILE_LINES}, clap only in cli/, unsafe only "
    f"in the sys crate, shoal-proto free of {', '.join(FORBIDDEN_PROTO_DEPS)}, nothing named "
    f"for a working session"
)
