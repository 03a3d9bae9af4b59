"""k8s-perf/tests/check_dockerfiles.py - the Dockerfiles build what the
manifests run, without a Docker engine (none on the CI machine).

Owns, for docker/*.Dockerfile and the root .dockerignore:
  - every `cargo build -p PKG` names a workspace member, and every binary
    installed from target/release/ is a [[bin]] of one of the built packages
  - every `go build -o /out/NAME` builds a Go main package the build context
    holds (chronik-loadgen: load/generator), static (CGO_ENABLED=0), and the
    host stage copies the same binary from .tools/bin/NAME
    (scripts/install-loadgen.sh), which .dockerignore keeps
  - the runtime stage is a slim Debian base, runs as a numeric non-root USER,
    copies only from the build stage
  - .dockerignore keeps Cargo.toml, Cargo.lock and every workspace member in
    the build context (cargo needs all members' manifests)
  - every image the manifests use (chronik-server, chronik-harness) has its
    Dockerfile, and each binary a container runs is installed in that image
    (chronik-loadgen, which the load Job runs, in chronik-harness)
Prints "ok"/"FAIL" lines and "dockerfiles: N passed, N failed".
"""

from __future__ import annotations

import fnmatch
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
passed = failed = 0


def check(ok: bool, what: str, detail: str = "") -> None:
    global passed, failed
    passed, failed = passed + ok, failed + (not ok)
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")


def workspace() -> dict[str, dict]:
    """package name -> {dir, bins}."""
    root = tomllib.loads((REPO / "Cargo.toml").read_text())
    out = {}
    for member in root["workspace"]["members"]:
        cargo = tomllib.loads((REPO / member / "Cargo.toml").read_text())
        name = cargo["package"]["name"]
        bins = {b["name"] for b in cargo.get("bin", [])}
        if (REPO / member / "src" / "main.rs").is_file():
            bins.add(name)
        out[name] = {"dir": member, "bins": bins}
    return out


def ignored(path: str, patterns: list[str]) -> bool:
    hit = False
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        pat = pat.rstrip("/")
        if fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(path, pat + "/*") or path.startswith(pat + "/"):
            hit = not neg
    return hit


def main() -> int:
    ws = workspace()
    patterns = [l.strip() for l in (REPO / ".dockerignore").read_text().splitlines()
                if l.strip() and not l.startswith("#")]
    for keep in ["Cargo.toml", "Cargo.lock", *(m["dir"] + "/Cargo.toml" for m in ws.values()),
                 *(m["dir"] + "/src/lib.rs" for m in ws.values() if (REPO / m["dir"] / "src/lib.rs").is_file())]:
        check(not ignored(keep, patterns), f".dockerignore keeps {keep} in the build context")
    images = {}
    for df in sorted((REPO / "docker").glob("*.Dockerfile")):
        text = re.sub(r"\\\n", " ", df.read_text())
        name = df.name.removesuffix(".Dockerfile")
        stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M)
        check(len(stages) >= 2, f"{df.name}: multi-stage")
        runtime_base = stages[-1][0]
        # a base given as a build argument is judged by the argument's default
        arg = re.fullmatch(r"\$\{(\w+)\}", runtime_base)
        if arg:
            default = re.search(rf"^ARG\s+{arg[1]}=(\S+)", text, re.M)
            runtime_base = default[1] if default else runtime_base
        check(re.fullmatch(r"(debian:\$\{DEBIAN_RELEASE\}-slim|debian:[a-z]+-slim|gcr\.io/distroless/.*)", runtime_base) is not None,
              f"{df.name}: small runtime base ({runtime_base})")
        final = text[text.rindex("\nFROM "):]
        user = re.findall(r"^USER\s+(\S+)", final, re.M)
        check(bool(user) and re.fullmatch(r"[1-9]\d*(:\d+)?", user[-1]) is not None,
              f"{df.name}: runs as a numeric non-root user ({user[-1] if user else 'none'})")
        froms = re.findall(r"COPY\s+--from=(\S+)", final)
        build_stages = {s[1] for s in stages[:-1] if s[1]}
        check(bool(froms) and all(f in build_stages for f in froms), f"{df.name}: copies only from its build stage")
        pkgs = re.findall(r"-p\s+([a-z0-9-]+)", text)
        check(bool(pkgs) and all(p in ws for p in pkgs), f"{df.name}: builds workspace packages {pkgs}")
        bins = set(re.findall(r"target/release/([a-z0-9-]+)", text))
        for loop in re.findall(r"for b in ([a-z0-9 -]+);", text):
            bins |= set(loop.split())
        built = set().union(*(ws[p]["bins"] for p in pkgs if p in ws))
        check(bool(bins) and bins <= built, f"{df.name}: installs binaries of the built packages {sorted(bins)}",
              f"not built: {sorted(bins - built)}")
        for stage_text in re.split(r"^FROM ", text, flags=re.M):
            for gobin in re.findall(r"go build\b[^\n]*-o /out/([a-z0-9-]+) \.", stage_text):
                src = re.search(r"^COPY\s+(\S+?)/?\s+\./?\s*$", stage_text, re.M)
                gomod = REPO / src.group(1) / "go.mod" if src else None
                check(gomod is not None and gomod.is_file() and "package main" in "".join(
                      f.read_text() for f in gomod.parent.glob("*.go")),
                      f"{df.name}: go build -o /out/{gobin} builds the Go main package in {src and src.group(1)}")
                check(re.search(r"CGO_ENABLED=0\s[^\n]*go build", stage_text) is not None,
                      f"{df.name}: {gobin} is built static (CGO_ENABLED=0)")
                keep = f".tools/bin/{gobin}"
                check(re.search(rf"^COPY\s[^\n]*{re.escape(keep)}\s", text, re.M) is not None,
                      f"{df.name}: the host stage copies {keep} (scripts/install-loadgen.sh's build)")
                check(not ignored(keep, patterns) and gomod is not None
                      and not ignored(str(gomod.relative_to(REPO)), patterns),
                      f".dockerignore keeps {keep} and {src and src.group(1)}/go.mod in the build context")
                bins.add(gobin)
        check("--locked" in text, f"{df.name}: cargo build --locked (Cargo.lock decides versions)")
        images[name] = bins
    want = {"chronik-server": {"chronik-server"},
            "chronik-harness": {"chronik-ingestor", "chronik-consumer", "chronik-bench", "chronik-loadgen"}}
    for image, binaries in want.items():
        check(binaries <= images.get(image, set()), f"image {image} holds {sorted(binaries)}")
    print(f"dockerfiles: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
