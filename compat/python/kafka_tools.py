"""Running Kafka's own command-line tools (kafka-tools and core jars from
Maven Central, in compat/java/target/lib, built by compat/install-deps.sh)
with `java -cp`, as the distribution's bin/*.sh scripts do.

Owns: the jar directory, the tools' version, and one bounded tool run whose
output is logged to stderr. Used by perf_driver.py and cli_driver.py.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import compat_common as cc

LIB = Path(os.environ.get("COMPAT_JAVA_LIB",
                          Path(__file__).resolve().parents[1] / "java" / "target" / "lib"))
JAVA = os.environ.get("JAVA", "java")


def tools_version() -> str:
    jars = glob.glob(str(LIB / "kafka-tools-[0-9]*.jar"))
    m = re.search(r"kafka-tools-(.+)\.jar$", jars[0]) if jars else None
    return m.group(1) if m else "unknown (compat/java/target/lib missing)"


def java(main: str, *argv: str, timeout: float) -> subprocess.CompletedProcess:
    cmd = [JAVA, "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
           "-cp", str(LIB / "*"), main, *argv]
    cc.log("run: " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    cc.log(f"exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    return r
