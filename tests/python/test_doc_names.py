"""scripts/doc_names.py (make lint): a document naming a file or a module
that is gone fails with the line of each name; one naming what exists passes,
and what the check exempts (URLs, globs, placeholders, generated paths,
dependencies' paths) is never reported. Runs on a small repository made here,
without a broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC_NAMES = ROOT / "scripts" / "doc_names.py"

FILES = {
    "Cargo.toml": '[workspace]\nmembers = ["broker/server", "broker/log"]\n',
    "broker/server/Cargo.toml": '[package]\nname = "chronik-server"\n\n[dependencies]\ntokio = "1"\n',
    "broker/server/src/lib.rs": "pub mod replica;\n",
    "broker/server/src/replica/mod.rs": "pub mod write;\npub struct ReplicaManager;\n",
    "broker/server/src/replica/write.rs": "impl ReplicaManager {\n    pub fn append_as_leader(&self) {}\n}\n",
    "broker/log/Cargo.toml": '[package]\nname = "chronik-log"\n',
    "broker/log/src/lib.rs": "mod flusher;\npub use flusher::OnFlush;\n",
    "broker/log/src/flusher.rs": "pub type OnFlush = ();\nfn wake_waiters() {}\n",
    "scripts/run.sh": "#!/bin/sh\n",
}


def repo(tmp_path: Path, doc: str) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "ARCHITECTURE.md").write_text(doc)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DOC_NAMES), "--root", str(root)],
                          capture_output=True, text=True)


def test_names_that_exist_pass(tmp_path):
    doc = """# Layout

`broker/server/src/replica/write.rs`, `replica/write.rs`, `server/src/replica/`, `scripts/run.sh`
and `write.rs`; `replica::write`, `replica::ReplicaManager`, `chronik_log::OnFlush`,
`ReplicaManager::append_as_leader`, `wake_waiters`, `replica/{mod,write}.rs`.

```
replica/write.rs  the write path (replica::write::append_as_leader), low/medium/high
```

Exempt: `tokio::sync::watch`, `https://example.com/a/b.rs`, `*.rs`, `plans/*.json`,
`handlers/<api>.rs`, `results/<id>/report.md`, `target/release/chronik-server`,
`/metrics`, `kafka-topics.sh`, `topology.kubernetes.io/zone`, `--quota a=b/c`.
"""
    r = run(repo(tmp_path, doc))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every file and module path it names exists" in r.stdout


def test_missing_names_fail_with_their_lines(tmp_path):
    doc = """# Layout

`replica/write.rs` is here; `replica/gone.rs` is not.
`cluster/reassign.rs`

```
handlers/fetch.rs   gone too
```
`replica::gone`, `handlers::authorize`, `chronik_log::Flusher`,
`ReplicaManager::leader_append`, `leader_append`.
"""
    r = run(repo(tmp_path, doc))
    assert r.returncode == 1, r.stdout + r.stderr
    reported = [line.split(" (")[0] for line in r.stdout.splitlines()]
    assert reported == [
        "ARCHITECTURE.md:3: replica/gone.rs",
        "ARCHITECTURE.md:4: cluster/reassign.rs",
        "ARCHITECTURE.md:7: handlers/fetch.rs",
        "ARCHITECTURE.md:9: replica::gone",
        "ARCHITECTURE.md:9: handlers::authorize",
        "ARCHITECTURE.md:9: chronik_log::Flusher",
        "ARCHITECTURE.md:10: leader_append",
        "ARCHITECTURE.md:10: ReplicaManager::leader_append",
    ]
