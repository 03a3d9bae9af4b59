#!/usr/bin/env python3
"""File paths and Rust module paths that ARCHITECTURE.md names, checked against
the repository (`make lint`).

    scripts/doc_names.py [--root DIR] [DOC.md ...]
        DIR: the repository (default: the one holding this script);
        DOC: relative to DIR (default: ARCHITECTURE.md)

What counts as a name:
  * in a backticked span (one line), each whitespace-separated piece that
    contains a `/` or ends in a source extension (EXTENSIONS below), with
    `,;:()` trimmed from its ends: a file path (`replica/write.rs`,
    `docs/quotas.md`, `classic_member.rs`) or a directory (`k8s-perf/base/broker`,
    `startup/`). Braces expand: `handlers/{join_group,heartbeat}.rs` is two names.
  * in a fenced code block, each such piece that contains a `/` and either ends
    in a source extension or ends with `/` (a directory): the blocks also hold
    prose like `low/medium/high` or `acks=1/all`, which is not a path.
  * in either, every Rust path written with `::` (`replica::write`,
    `chronik_log::LogDirHealth`, `Replica::append_as_leader`).
  * a backticked span that is one snake_case identifier with an underscore
    (`wait_ready`, `durable_offset`): a function, field or script function name.
A span broken across lines is not read.

When a file path is found: some file the repository holds (`git ls-files`:
tracked, or untracked and not ignored) or a directory of one has a
repository-relative path that equals the name or ends with `/` + the name (whole
components). So a name may be written relative to the repository root
(`broker/server/src/replica/write.rs`), to a crate (`server/src/infra/alloc_guard.rs`,
`tests/hostile.rs`), to a crate's `src/` (`replica/fetcher.rs`) or to the module
the sentence is about (`handlers/fetch.rs`, `plain.rs`). A bare file name is
thus checked only for existing somewhere.

When an identifier is found: it is a whole word of some file the repository
holds that is not Markdown (code, scripts, configuration): a name only the
documents still use is gone from the code.

When a `::` path is found, by its first segment:
  * `chronik_<name>`: a workspace crate (`chronik-<name>` in its Cargo.toml),
    resolved from its `src/lib.rs`; a crate's directory name (`sasl::client`)
    likewise;
  * another lowercase segment: a module of a workspace crate, i.e. a file
    `<seg>.rs` or a directory `<seg>/` under some crate's `src/` (a room of
    chronik-server such as `replica`, or a deeper one such as `handlers`,
    `groups`, `elr`); every such module is tried and one must resolve. The
    remaining segments are followed as child modules (`<seg>.rs` or
    `<seg>/mod.rs` beside it); the first that is not one must be an item the
    module defines or re-exports (`fn`, `struct`, `enum`, `trait`, `type`,
    `const`, `static`, `mod`, `macro_rules!`, or a `pub use` naming it), and
    what follows an item is not checked. A first segment that is `std`,
    `core`, `alloc`, `crate`, `self`, `super` or a dependency named in some
    Cargo.toml (`tokio::sync::watch`, `openraft::…`) is not checked; any other
    lowercase first segment is reported: it names no module;
  * a CamelCase segment (`Type::member`): if the workspace defines that type
    (`struct`, `enum`, `trait`, `union`; not a `type` alias, which may stand
    for a dependency's type: `Raft`), a snake_case member must
    appear somewhere in the workspace's Rust as `fn member` or a field
    `member:`, and a CamelCase member (a variant or associated item) as a
    word; a type the workspace does not define (`Raft::…`, a dependency's) is
    not checked.

Exempt (never reported), and why:
  * `://` (URLs), and names starting with `/` (HTTP routes like `/metrics`,
    system files like `/proc/...`): not repository files;
  * globs (`*`, `?`, `[`) such as `plans/*.json`: patterns, not names;
  * placeholders (`<`, `>`, `…`, `...`, `$`, `%`) such as `handlers/<api>.rs`,
    `<data-dir>/meta.properties`, `$VENV/bin/python`;
  * pieces starting with `-` or holding `=` (flags and their values);
  * generated places that a clean checkout lacks: `target/`, `results/`,
    `.run/`, `.tools/`, `.venv/`, `fuzz/target/`, `fuzz/corpus/`,
    `fuzz/artifacts/`, `fuzz/out/` (as .gitignore lists them), and the files a
    run writes into its results directory, named there without the prefix
    (RUN_OUTPUTS below: `meta.json`, `consumers/merged.json`, `metrics/start/`,
    `charts/`).

Prints each missing name as `DOC:LINE: NAME (why)` and exits 1 if there is one.

Owns: that rule. Must not: judge prose, or any document not given to it.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = (".rs", ".py", ".go", ".sh", ".json", ".yaml", ".yml", ".toml", ".md", ".ipynb", ".txt")
GENERATED = ("target/", "results/", ".run/", ".tools/", ".venv/",
             "fuzz/target/", "fuzz/corpus/", "fuzz/artifacts/", "fuzz/out/")
# written by a run under results/<run-id>/, named there without the prefix
RUN_OUTPUTS = ("meta.json", "consumers/merged.json", "metrics/start/", "charts/")
PLACEHOLDER = re.compile(r"[<>$%]|…|\.\.\.")
GLOB = re.compile(r"[*?\[\]]")
RUST_PATH = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+")
KAFKA_TOOL = re.compile(r"kafka-[a-z-]+\.sh$")  # Apache Kafka's bin/ tools, not this repository's
DOMAIN = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:io|com|org|net|dev)/")  # label keys, hosts
FENCE = re.compile(r"^\s*```")
SPAN = re.compile(r"`([^`]+)`")
IDENT = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
ALWAYS_EXTERNAL = {"std", "core", "alloc", "crate", "self", "super"}


def repo_files(root: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if (root / f).exists()]


class Repo:
    """What the names are checked against: the repository's files and its crates."""

    def __init__(self, root: Path):
        self.root = root
        self.files = repo_files(root)
        dirs = set()
        for f in self.files:
            parts = f.split("/")
            dirs.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
        self.paths = set(self.files) | dirs
        self.rust = [f for f in self.files if f.endswith(".rs")]
        self.crates: dict[str, str] = {}  # `chronik_log` and `log` -> "broker/log/src"
        self.dependencies: set[str] = set()
        for f in self.files:
            if not f.endswith("Cargo.toml"):
                continue
            text = (root / f).read_text()
            crate_dir = f[: -len("Cargo.toml")]
            name = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', text, re.M | re.S)
            if name and (root / crate_dir / "src").is_dir():
                src = f"{crate_dir}src"
                self.crates[name.group(1).replace("-", "_")] = src
                self.crates.setdefault(Path(crate_dir).name.replace("-", "_"), src)
            for table in re.findall(r"^\[(?:[a-z.]*\.)?(?:dev-|build-)?dependencies\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S):
                self.dependencies.update(d.replace("-", "_") for d in re.findall(r"^([A-Za-z0-9_-]+)\s*=", table, re.M))
        self._text: dict[str, str] = {}
        self._rust_names: dict[str, set[str]] | None = None
        self._words: set[str] | None = None

    def text(self, rel: str) -> str:
        if rel not in self._text:
            self._text[rel] = (self.root / rel).read_text(errors="replace")
        return self._text[rel]

    def rust_names(self) -> dict[str, set[str]]:
        """The workspace's Rust, indexed once: defined types, fns, fields (`name:`) and all words."""
        if self._rust_names is None:
            text = "\n".join(self.text(f) for f in self.rust)
            self._rust_names = {
                "types": set(re.findall(r"\b(?:struct|enum|trait|union)\s+([A-Za-z_][A-Za-z0-9_]*)", text)),
                "members": set(re.findall(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", text))
                | set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*:(?!:)", text)),
                "words": set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)),
            }
        return self._rust_names

    def code_words(self) -> set[str]:
        """Every identifier-like word of the repository's files that are not Markdown (text only)."""
        if self._words is None:
            self._words = set()
            for f in self.files:
                if f.endswith(".md"):
                    continue
                data = (self.root / f).read_bytes()
                if b"\0" not in data[:8192]:
                    self._words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", data.decode(errors="replace")))
        return self._words

    def has_path(self, name: str) -> bool:
        wanted = (name,) if name.endswith("/") else (name, name + "/")
        return any(p == w or p.endswith("/" + w) for p in self.paths for w in wanted)

    # A module: (its file, the directory holding its children)
    def modules_named(self, seg: str) -> list[tuple[str, str]]:
        found = []
        if seg in self.crates:
            src = self.crates[seg]
            root_file = f"{src}/lib.rs" if f"{src}/lib.rs" in self.paths else f"{src}/main.rs"
            found.append((root_file, src))
        srcs = tuple(s + "/" for s in self.crates.values())
        for f in self.rust:
            if not f.startswith(srcs):
                continue
            if f.endswith(f"/{seg}.rs"):
                found.append((f, f[: -len(".rs")]))
            elif f.endswith(f"/{seg}/mod.rs"):
                found.append((f, f[: -len("/mod.rs")]))
        return found

    def child(self, module: tuple[str, str], seg: str) -> tuple[str, str] | None:
        _, directory = module
        for f, d in ((f"{directory}/{seg}.rs", f"{directory}/{seg}"), (f"{directory}/{seg}/mod.rs", f"{directory}/{seg}")):
            if f in self.paths:
                return (f, d)
        return None

    def defines(self, rel: str, item: str) -> bool:
        text = self.text(rel)
        word = re.escape(item)
        return bool(re.search(rf"\b(?:fn|struct|enum|trait|type|const|static|union|mod)\s+{word}\b|macro_rules!\s*{word}\b", text)
                    or re.search(rf"\bpub(?:\([^)]*\))?\s+use\b[^;]*\b{word}\b", text))

    def resolves(self, module: tuple[str, str], rest: list[str]) -> bool:
        if not rest:
            return True
        nxt = self.child(module, rest[0])
        if nxt is not None and self.resolves(nxt, rest[1:]):
            return True
        return self.defines(module[0], rest[0])

    def type_defined(self, name: str) -> bool:
        return name in self.rust_names()["types"]

    def member_exists(self, member: str) -> bool:
        return member in self.rust_names()["words" if member[:1].isupper() else "members"]


def rust_path_problem(repo: Repo, path: str) -> str | None:
    segs = path.split("::")
    first = segs[0]
    if first[:1].isupper():
        if len(segs) < 2 or not repo.type_defined(first):
            return None
        return None if repo.member_exists(segs[1]) else f"no fn, field or variant `{segs[1]}` in the workspace"
    if first in ALWAYS_EXTERNAL or (first in repo.dependencies and first not in repo.crates):
        return None
    modules = repo.modules_named(first)
    if not modules:
        return f"no module `{first}` in any crate's src/"
    if any(repo.resolves(m, segs[1:]) for m in modules):
        return None
    return "no such module or item under " + ", ".join(sorted({m[0] for m in modules}))


def expand_braces(piece: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", piece)
    if not m:
        return [piece]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(piece[: m.start()] + alt + piece[m.end():]))
    return out


def exempt(piece: str) -> bool:
    return ("://" in piece or piece.startswith(("/", "-")) or "=" in piece
            or bool(GLOB.search(piece) or PLACEHOLDER.search(piece))
            or piece in EXTENSIONS or bool(KAFKA_TOOL.match(piece) or DOMAIN.match(piece))
            or piece.startswith(GENERATED) or piece in RUN_OUTPUTS)


def file_names(text: str, fenced: bool) -> list[str]:
    names = []
    for raw in text.split():
        piece = raw.strip(",;:()")
        if "::" in piece or not piece:
            continue
        for name in expand_braces(piece) if not exempt(piece) else []:
            name = name.strip(",;:()'\"").rstrip(".")  # a sentence's full stop
            if fenced:
                wanted = "/" in name and (name.endswith(EXTENSIONS) or name.endswith("/"))
            else:
                wanted = "/" in name or name.endswith(EXTENSIONS)
            if wanted and not exempt(name):
                names.append(name)
    return names


def names_in(doc: str) -> list[tuple[int, str, str]]:
    """(line, kind, name) for every name the document holds; kind is "file", "rust" or "ident"."""
    found = []
    fenced = False
    for number, line in enumerate(doc.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        chunks = [line] if fenced else SPAN.findall(line)
        if not fenced:
            found.extend((number, "ident", c) for c in chunks if IDENT.fullmatch(c))
        for chunk in chunks:
            found.extend((number, "rust", p) for p in RUST_PATH.findall(chunk))
            found.extend((number, "file", n) for n in file_names(chunk, fenced))
    return found


def problems(doc: str, repo: Repo) -> list[tuple[int, str, str]]:
    out = []
    for number, kind, name in names_in(doc):
        if kind == "file":
            if not repo.has_path(name):
                out.append((number, name, "no such file or directory"))
        elif kind == "ident":
            if name not in repo.code_words():
                out.append((number, name, "named by no file but Markdown"))
        else:
            why = rust_path_problem(repo, name)
            if why:
                out.append((number, name, why))
    return out


def main(argv: list[str]) -> int:
    root = ROOT
    if argv[:1] == ["--root"] and len(argv) > 1:
        root, argv = Path(argv[1]).resolve(), argv[2:]
    docs = argv or ["ARCHITECTURE.md"]
    repo = Repo(root)
    missing = 0
    for doc in docs:
        found = problems((root / doc).read_text(), repo)
        for number, name, why in found:
            print(f"{doc}:{number}: {name} ({why})")
        missing += len(found)
        if not found:
            print(f"doc_names: {doc}: every file and module path it names exists")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
