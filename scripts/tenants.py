"""scripts/tenants.py - the tenants of a load plan (run-all.sh --test
noisy-neighbour): one plan per tenant, and a Kafka client quota on one.

Owns (standard library only; `quota` runs Kafka 4.3.1's own kafka-configs
through compat/python/kafka_tools.py, the project's one way to run Kafka's
tools without a Kafka install):
  plans PLAN OUT_DIR     for a plan with `tenants` (a list of {"name", plan
                         fields...}), write OUT_DIR/<plan>-<tenant>.json per
                         tenant: the plan without `tenants`, the tenant's
                         fields over it (a tenant's `stages`, `constant` or
                         `staircase` replaces the plan's shape), named
                         <plan>-<tenant>; print "TENANT PATH" per line. A plan
                         without tenants prints nothing
  quota BOOTSTRAP --entity-type clients|users --entity-name NAME
        --add-config KEY=VALUE[,KEY=VALUE...]
                         kafka-configs --alter --add-config ... then
                         --describe: exit 0 only when the describe shows every
                         KEY=VALUE (a broker that refused or ignored it fails
                         the run before any load)
Must not: start processes other than the Kafka tool, or decide a run's verdict.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SHAPES = ("stages", "constant", "staircase")
NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
REPO = Path(__file__).resolve().parents[1]


def tenant_plans(plan: dict) -> dict[str, dict]:
    """The plan each tenant runs, by tenant name, in the plan's order."""
    tenants = plan.get("tenants") or []
    base = {k: v for k, v in plan.items() if k != "tenants"}
    out: dict[str, dict] = {}
    for t in tenants:
        name = t.get("name", "")
        if not NAME.match(name) or name in out:
            raise ValueError(f"tenant name {name!r}: lower-case [a-z0-9-], unique")
        over = {k: v for k, v in t.items() if k != "name"}
        merged = dict(base)
        if any(s in over for s in SHAPES):
            for s in SHAPES + ("start_rate",):
                merged.pop(s, None)
        merged.update(over)
        merged["name"] = f"{plan['name']}-{name}"
        out[name] = merged
    return out


def plans(args: argparse.Namespace) -> int:
    plan = json.loads(Path(args.plan).read_text())
    out = Path(args.out_dir)
    for tenant, p in tenant_plans(plan).items():
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{p['name']}.json"
        path.write_text(json.dumps(p, indent=2) + "\n")
        print(tenant, path)
    return 0


def quota_pairs(text: str) -> list[tuple[str, str]]:
    pairs = [tuple(kv.split("=", 1)) for kv in text.split(",") if kv]
    if not pairs or any(len(p) != 2 or not re.match(r"^[a-z_]+$", p[0]) for p in pairs):
        raise ValueError(f"--add-config {text!r}: KEY=VALUE[,KEY=VALUE...]")
    return pairs  # type: ignore[return-value]


def described(output: str, key: str, value: str) -> bool:
    """Whether kafka-configs --describe shows KEY=VALUE (it prints rates as doubles: 2000000.0)."""
    m = re.search(rf"\b{re.escape(key)}=([0-9.eE+-]+)", output)
    try:
        return m is not None and float(m.group(1)) == float(value)
    except ValueError:
        return False


def quota(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO / "compat" / "python"))
    import kafka_tools  # noqa: E402 (compat/python is not a package)

    pairs = quota_pairs(args.add_config)
    entity = ["--entity-type", args.entity_type, "--entity-name", args.entity_name]
    steps = kafka_tools.Steps(args.bootstrap, args.timeout)
    try:
        steps.tool("configs --alter --add-config", "kafka.admin.ConfigCommand", "--alter",
                   "--add-config", args.add_config, *entity,
                   expect=lambda o: "Completed updating config" in o)
        steps.tool("configs --describe", "kafka.admin.ConfigCommand", "--describe", *entity,
                   expect=lambda o: all(described(o, k, v) for k, v in pairs))
    except kafka_tools.StepFailed as e:
        print(f"quota not set: {e}", file=sys.stderr)
        return 1
    print(f"quota set: {args.entity_type} {args.entity_name} {args.add_config} (kafka-tools {kafka_tools.tools_version()})",
          file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tenants.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pl = sub.add_parser("plans")
    pl.add_argument("plan")
    pl.add_argument("out_dir")
    pl.set_defaults(func=plans)
    q = sub.add_parser("quota")
    q.add_argument("bootstrap")
    q.add_argument("--entity-type", choices=("clients", "users"), required=True)
    q.add_argument("--entity-name", required=True)
    q.add_argument("--add-config", required=True)
    q.add_argument("--timeout", type=float, default=60.0)
    q.set_defaults(func=quota)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:
        print(f"tenants.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
