"""k8s-perf/tests/helpinfo.py - what a Chronik binary accepts, read from its --help.

Owns: parsing clap's --help text (long or short form) into flags, their env
vars, defaults and possible values; and Go's flag package usage text
(chronik-loadgen run --help: `  -name type` then the indented description)
into the same shape. Must not: run anything but `BIN --help` and
`chronik-loadgen run --help`.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field


@dataclass
class Option:
    flag: str                      # --wal-profile
    env: str | None = None         # CHRONIK_WAL_PROFILE
    default: str | None = None
    values: list[str] = field(default_factory=list)   # possible values, empty = any
    takes_value: bool = True
    doc: str = ""                  # the option's help text


@dataclass
class Help:
    binary: str
    options: dict[str, Option]     # by flag

    @property
    def envs(self) -> dict[str, Option]:
        return {o.env: o for o in self.options.values() if o.env}


OPT_LINE = re.compile(r"^\s+(?:-\w, )?(--[a-z0-9][a-z0-9-]*)(?: <([A-Z_]+)>)?")


def parse_help(binary: str, text: str) -> Help:
    options: dict[str, Option] = {}
    blocks: list[tuple[Option, list[str]]] = []
    for line in text.splitlines():
        m = OPT_LINE.match(line)
        if m and line.lstrip().startswith("-"):
            opt = Option(flag=m.group(1), takes_value=m.group(2) is not None)
            options[opt.flag] = opt
            blocks.append((opt, [line]))
        elif blocks:
            blocks[-1][1].append(line)
    for opt, lines in blocks:
        body = "\n".join(lines)
        opt.doc = body
        if m := re.search(r"\[env: ([A-Z0-9_]+)=", body):
            opt.env = m.group(1)
        if m := re.search(r"\[default: ([^\]]*)\]", body):
            opt.default = m.group(1)
        if m := re.search(r"\[possible values: ([^\]]*)\]", body):
            opt.values = [v.strip() for v in m.group(1).split(",")]
        elif "Possible values:" in body:
            opt.values = re.findall(r"^\s+- ([a-z0-9-]+):", body, re.M)
    return Help(binary, options)


def read_help(path: str) -> Help:
    out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    return parse_help(path.rsplit("/", 1)[-1], out)


GO_OPT_LINE = re.compile(r"^  -([a-z0-9][a-z0-9-]*)(?: (\w+))?$")


def parse_go_help(binary: str, text: str) -> Help:
    """Go's flag.PrintDefaults: `  -name type` lines, the description indented
    below. Go accepts -name and --name alike; flags are keyed --name here.
    The type word (string, int, float, duration; a bool has none) is kept
    in Option.doc (go_type)."""
    options: dict[str, Option] = {}
    current: Option | None = None
    for line in text.splitlines():
        m = GO_OPT_LINE.match(line)
        if m:
            current = Option(flag=f"--{m.group(1)}", takes_value=m.group(2) is not None,
                             doc=m.group(2) or "bool")
            options[current.flag] = current
        elif current is not None and line.startswith("    "):
            if d := re.search(r"\(default (.*)\)\s*$", line):
                current.default = d.group(1).strip('"')
    return Help(binary, options)


def go_type(opt: Option) -> str:
    """string, int, float, duration or bool: the Go flag's type word."""
    return opt.doc.split("\n", 1)[0]


def read_loadgen_help(path: str) -> Help:
    """`chronik-loadgen run --help` (Go prints its usage on stderr)."""
    r = subprocess.run([path, "run", "--help"], capture_output=True, text=True, timeout=30)
    h = parse_go_help("chronik-loadgen", r.stdout + r.stderr)
    if not h.options:
        raise RuntimeError(f"{path} run --help listed no flags (exit {r.returncode}): {(r.stdout + r.stderr)[:300]}")
    return h
