"""k8s-perf/tests/gen_schemas.py - offline JSON schemas for kubeconform.

Owns: turning two sources into standalone (no remote $ref) strict schemas
under OUT, laid out for kubeconform's -schema-location templates:
  OUT/<kind>-<group>-<version>.json     Kubernetes kinds, from the PyPI package
                                        kubernetes-validate (its "-local-strict"
                                        schemas, whose $refs point into a
                                        _definitions.json: inlined here)
  OUT/<group>/<kind>_<version>.json     CRDs: ServiceMonitor/PodMonitor from the
                                        prometheus-operator module's CRD YAML
                                        (openAPIV3Schema -> JSON schema, strict)
Only the kinds the given manifests use are written. Must not: validate (that
is kubeconform's job) or fetch anything.

  gen_schemas.py --k8s-version 1.32.0 --crd-dir DIR --out OUT MANIFEST.yaml...
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import kubernetes_validate
import yaml

DEFS_PREFIX = "/api/_definitions.json#"
CRD_FILES = {"ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml",
             "PodMonitor": "monitoring.coreos.com_podmonitors.yaml"}


def kinds_used(manifests: list[Path]) -> set[tuple[str, str, str]]:
    """(group, version, kind) of every document."""
    used = set()
    for path in manifests:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            group, _, version = doc["apiVersion"].rpartition("/")
            used.add((group, version, doc["kind"]))
    return used


def _refs(node) -> set[str]:
    found = set()
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                found.add(v)
            else:
                found |= _refs(v)
    elif isinstance(node, list):
        for v in node:
            found |= _refs(v)
    return found


def inline_definitions(schema: dict, defs: dict) -> dict:
    """schema with every /api/_definitions.json#/$defs/X it reaches copied
    into its own $defs and the $refs made local (#/$defs/X)."""
    wanted, todo = {}, [r for r in _refs(schema) if r.startswith(DEFS_PREFIX)]
    while todo:
        name = todo.pop().split("/")[-1]
        if name in wanted:
            continue
        if name not in defs:
            raise KeyError(f"definition {name} not in the Kubernetes schemas")
        wanted[name] = defs[name]
        todo += [r for r in _refs(defs[name]) if r.startswith(DEFS_PREFIX) or r.startswith("#/$defs/")]
    out = dict(schema)
    out.pop("$id", None)
    out["$defs"] = {**out.get("$defs", {}), **wanted}
    text = json.dumps(out).replace(f'"{DEFS_PREFIX}/$defs/', '"#/$defs/')
    return json.loads(text)


def k8s_schema_dir(version: str) -> Path:
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    d = root / f"v{version}-local-strict"
    if not d.is_dir():
        have = sorted(p.name for p in root.iterdir() if p.name.endswith("-local-strict"))
        raise SystemExit(f"kubernetes-validate has no schemas for {version}; it has {have}")
    return d


def kind_suffix(group: str, version: str) -> str:
    return f"-{group.split('.')[0]}-{version}" if group else f"-{version}"


def openapi_to_jsonschema(node):
    """A CRD's openAPIV3Schema as a strict JSON schema: nullable -> null type,
    int-or-string -> either, objects with properties closed unless the CRD
    says unknown fields are kept."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: openapi_to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k8s-version", required=True)
    ap.add_argument("--crd-dir", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("manifests", nargs="+", type=Path)
    a = ap.parse_args()

    kdir = k8s_schema_dir(a.k8s_version)
    defs = json.loads((kdir / "_definitions.json").read_text())["$defs"]
    a.out.mkdir(parents=True, exist_ok=True)
    written = []
    for group, version, kind in sorted(kinds_used(a.manifests)):
        if kind in CRD_FILES and group == "monitoring.coreos.com":
            crd = yaml.safe_load((a.crd_dir / CRD_FILES[kind]).read_text())
            served = {v["name"]: v for v in crd["spec"]["versions"]}
            if version not in served:
                raise SystemExit(f"{kind}: the CRD serves {sorted(served)}, not {version}")
            schema = openapi_to_jsonschema(served[version]["schema"]["openAPIV3Schema"])
            schema["properties"]["metadata"] = {"$ref": f"{DEFS_PREFIX}/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
            schema = inline_definitions(schema, defs)
            schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
            dest = a.out / group / f"{kind.lower()}_{version}.json"
        else:
            src = kdir / f"{kind.lower()}{kind_suffix(group, version)}.json"
            if not src.is_file():
                raise SystemExit(f"no schema for {group or 'core'}/{version} {kind} ({src.name})")
            schema = inline_definitions(json.loads(src.read_text()), defs)
            dest = a.out / src.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(schema))
        written.append(str(dest.relative_to(a.out)))
    print(f"gen_schemas: {len(written)} schemas ({', '.join(written)})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
