"""Running Kafka's own command-line tools (kafka-tools and core jars from
Maven Central, in compat/java/target/lib, built by compat/install-deps.sh)
with `java -cp`, as the distribution's bin/*.sh scripts do.

Owns: the jar directory, the tools' version, one bounded tool run whose
output is logged to stderr, and `Steps`, a check's tool runs in order (the
first that fails ends it). Used by perf_driver.py, cli_driver.py,
cluster_ops.py and share_groups.py.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from typing import Callable
from pathlib import Path

import compat_common as cc

LIB = Path(os.environ.get("COMPAT_JAVA_LIB",
                          Path(__file__).resolve().parents[1] / "java" / "target" / "lib"))
JAVA = os.environ.get("JAVA", "java")


def tools_version() -> str:
    jars = glob.glob(str(LIB / "kafka-tools-[0-9]*.jar"))
    m = re.search(r"kafka-tools-(.+)\.jar$", jars[0]) if jars else None
    return m.group(1) if m else "unknown (compat/java/target/lib missing)"


def java_cmd(main: str, *argv: str) -> list[str]:
    """The command line of one tool run (also for tools run in the background)."""
    return [JAVA, "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", str(LIB / "*"), main, *argv]


def java(main: str, *argv: str, timeout: float, stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = java_cmd(main, *argv)
    cc.log("run: " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin,
                       stdin=None if stdin is not None else subprocess.DEVNULL)
    cc.log(f"exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    return r


class Steps:
    """Runs the tool steps in order; the first that fails ends the check."""

    def __init__(self, bootstrap: str, timeout: float):
        self.bootstrap, self.timeout = bootstrap, timeout
        self.done: list[str] = []

    def tool(self, name: str, main: str, *argv: str, expect: Callable[[str], bool],
             subcommand: str | None = None, exit_code: int = 0) -> str:
        """Runs a tool (`subcommand` first, for tools that parse it first)."""
        head = [subcommand] if subcommand else []
        r = java(main, *head, "--bootstrap-server", self.bootstrap, *argv, timeout=self.timeout * 2)
        out = r.stdout + r.stderr
        if r.returncode != exit_code or not expect(out):
            tail = " | ".join(out.strip().splitlines()[-4:])[:600]
            raise StepFailed(f"{name}: exit {r.returncode}, output: {tail}")
        self.done.append(name)
        return out

    def run(self, main: str, *argv: str) -> subprocess.CompletedProcess:
        """Runs a tool whose output the caller judges (a step polled until done)."""
        return java(main, "--bootstrap-server", self.bootstrap, *argv, timeout=self.timeout * 2)

    def state(self, name: str, ok: bool, detail: str) -> None:
        if not ok:
            raise StepFailed(f"{name}: {detail}")
        self.done.append(name)


class StepFailed(Exception):
    pass
