"""Turn the drivers' result lines into the compatibility matrix (compat/run.sh calls this).

Inputs (in --out): results.jsonl (every line the drivers printed) and
invocations.tsv (one line per driver run: client, exit status, log file,
the checks that run owed). A check a run owed but never reported (crash,
timeout) becomes a `fail` saying so, so nothing is silently missing.
Outputs: matrix.md and matrix.json in --out, the table on stdout; exit
status 1 if any check failed. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

COLUMNS = ["produce", "fetch", "group", "group:range", "group:roundrobin",
           "group:cooperative-sticky", "commit-resume", "idempotent", "transactions", "admin",
           "eos-848", "eos-failover", "security", "cluster-ops", "share"]
CELL = {"pass": "pass", "fail": "FAIL", "n/a": "n/a"}


def load(out: Path) -> tuple[list[dict], list[str]]:
    """Result lines plus the problems found reading them."""
    results, problems = [], []
    lines = (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").exists() else []
    for raw in lines:
        try:
            r = json.loads(raw)
            assert {"client", "version", "check", "result", "detail"} <= r.keys()
            assert r["result"] in CELL
            results.append(r)
        except (ValueError, AssertionError):
            problems.append(f"unparsable result line: {raw[:200]}")
    return results, problems


def owed_but_missing(out: Path, results: list[dict]) -> list[dict]:
    """A fail line for every check a driver run owed and did not report."""
    seen = {(r["client"], r["check"]) for r in results}
    versions = {r["client"]: r["version"] for r in results}
    missing = []
    inv = out / "invocations.tsv"
    for line in inv.read_text().splitlines() if inv.exists() else []:
        client, status, log, *owed = line.split("\t")
        for check in owed:
            if (client, check) not in seen:
                missing.append({"client": client, "version": versions.get(client, "?"),
                                "check": check, "result": "fail",
                                "detail": f"no result line (driver exit status {status}"
                                          f"{', timed out' if status in ('124', '137') else ''}; "
                                          f"log {log})"})
                seen.add((client, check))
    return missing


def table(results: list[dict]) -> tuple[list[str], list[list[str]]]:
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for r in results:
        rows.setdefault((r["client"], r["version"]), {})[r["check"]] = CELL[r["result"]]
    header = ["client", "version"] + COLUMNS
    body = [[c, v] + [cells.get(col, "-") for col in COLUMNS] for (c, v), cells in rows.items()]
    return header, body


def markdown(header: list[str], body: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(out)


def text_table(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(row[k]) for row in [header] + body) for k in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([fmt.format(*header), sep] + [fmt.format(*row) for row in body])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--meta", default="{}", help="JSON object stored as matrix.json's meta")
    args = p.parse_args()
    results, problems = load(args.out)
    results += owed_but_missing(args.out, results)
    header, body = table(results)
    failures = [r for r in results if r["result"] == "fail"]
    meta = json.loads(args.meta)

    md = [f"# Client compatibility matrix ({meta.get('run_id', '')})", ""]
    md += [f"- {k}: `{v}`" for k, v in meta.items() if k != "run_id"]
    md += ["", markdown(header, body), ""]
    if failures:
        md += ["## Failures", ""]
        md += [f"- **{r['client']}** `{r['check']}`: {r['detail']}" for r in failures]
        md.append("")
    md += ["## Details", ""]
    md += [f"- {r['client']} `{r['check']}` {r['result']}: {r['detail']}" for r in results]
    (args.out / "matrix.md").write_text("\n".join(md) + "\n")
    (args.out / "matrix.json").write_text(json.dumps(
        {"meta": meta, "columns": COLUMNS, "results": results, "problems": problems}, indent=2) + "\n")

    print(text_table(header, body))
    for r in failures:
        print(f"FAIL {r['client']} {r['check']}: {r['detail']}")
    for msg in problems:
        print(f"error: {msg}")
    total = {k: sum(1 for r in results if r["result"] == k) for k in CELL}
    # the closing line CI reads; "skipped" = n/a (the client cannot do that check)
    print(f"compat: {total['pass']} passed, {total['fail']} failed, {total['n/a']} skipped")
    return 1 if failures or problems else 0


if __name__ == "__main__":
    sys.exit(main())
