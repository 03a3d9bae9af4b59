#!/usr/bin/env bash
# k8s-perf/tests/test.sh - `make k8s-test`: everything about k8s-perf/ that
# can be checked without a cluster. Installs its own tools
# (scripts/install-k8s-tools.sh); idempotent; about a minute warm.
#
#   0. images        docker/*.Dockerfile and .dockerignore build what the
#                    manifests run (check_dockerfiles.py; no Docker engine here)
#   1. dashboards    base/monitoring/dashboards/*.json = generate.py's output
#   2. build         kustomize build of every overlay (load restrictor off: the
#                    k6 scenarios come from the repository's k6/)
#   3. schemas       kubeconform -strict on every built object: Kubernetes
#                    schemas from kubernetes-validate, ServiceMonitor/PodMonitor
#                    from the prometheus-operator CRDs, TestRun from
#                    k8s-perf/schemas/ (gen_schemas.py); and misspelt fields
#                    in a TestRun, a ServiceMonitor and a StatefulSet must fail
#   4. nameReference the TestRun names the hashed ConfigMaps; and without
#                    base/k6/kustomizeconfig.yaml it would not (negative check)
#   5. manifests     check_manifests.py: env vars, flags, ports, probes, monitors,
#                    topology, entrypoint against the real binaries' --help
#   6. live          scrape.sh: the real binaries on 127.0.0.1 with the
#                    manifests' env, a local Prometheus, k6 remote write; every
#                    dashboard query parses (promtool), names only scraped
#                    metrics and returns data; probe paths answered
#   7. results       the results directory run.sh builds (lib/results.py on the
#                    live run's k6 logs and consumer report) renders with
#                    `python -m reports render` (tests/test_results.sh)
#   8. scripts       run.sh / cleanup.sh: --help, argument errors, --dry-run
#                    (tests/test_cli.sh)
#   9. secure        secure-secrets.sh's certificates, users and Secrets, the
#                    real chronik-server with the secure broker env and the ACL
#                    Job's grants (secure_live.py), and collect.sh fetching a
#                    ledger over HTTPS with the token (tests/test_secure.sh); check_manifests' secret checks
#                    fail on a literal password, a $(VAR) used before it is
#                    defined and a probe on the HTTPS port (mutants)
# Prints "k8s: N passed, N failed" last; exit 1 if anything failed.
#
# Needs: the release binaries chronik-server, chronik-ingestor and
# chronik-consumer in target/release (built here only when missing;
# K8S_TEST_BUILD=1 rebuilds), Go, python3. Env: KEEP_WORK=1 keeps the scratch
# dir; TOOLS_DIR (default <repo>/.tools) as for scripts/install-k8s-tools.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S="$(cd "$HERE/.." && pwd)"
REPO="$(cd "$K8S/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-1.32.0}"
K8S_TEST_BUILD="${K8S_TEST_BUILD:-0}"
KEEP_WORK="${KEEP_WORK:-0}"
TOOLS_DIR="${TOOLS_DIR:-$REPO/.tools}"
export TOOLS_DIR
PY="$TOOLS_DIR/k8s-venv/bin/python"
KUBECONFORM="$TOOLS_DIR/bin/kubeconform"
export PY K6_BIN="${K6_BIN:-$TOOLS_DIR/bin/k6}"
WORK="$(mktemp -d)"
trap '[[ "$KEEP_WORK" == 1 ]] && echo "kept $WORK" >&2 || rm -rf "$WORK"' EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }
# count the "N passed, N failed" line a sub-check printed
tally() {
  local line
  # (no match is a result too: reported below, not a silent exit under set -e)
  line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed$' "$1" | tail -n1 || true)
  [[ -n "$line" ]] || { fail "$2 printed no result line"; return; }
  passed=$((passed + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<< "$line")))
  failed=$((failed + $(sed -E 's/.* ([0-9]+) failed$/\1/' <<< "$line")))
}

# -- tools and binaries ----------------------------------------------------------------
read -r -a KUSTOMIZE <<< "$("$REPO/scripts/install-k8s-tools.sh")"
missing=()
for b in chronik-server chronik-ingestor chronik-consumer; do
  [[ -x "$REPO/target/release/$b" ]] || missing+=("-p" "$b")
done
if [[ "$K8S_TEST_BUILD" == 1 ]]; then
  missing=(-p chronik-server -p chronik-ingestor -p chronik-consumer)
fi
if ((${#missing[@]})); then
  echo "building ${missing[*]} (release)" >&2
  (cd "$REPO" && cargo build --release "${missing[@]}") >&2
fi

build() {  # DIR OUT - stock kustomize build: no flags (what kubectl apply -k, Argo CD and Flux do)
  "${KUSTOMIZE[@]}" "$1" > "$2"
}

# -- 0. Dockerfiles ------------------------------------------------------------------------------
"$PY" "$HERE/check_dockerfiles.py" > "$WORK/docker.out" 2>&1 || true
grep '^FAIL' "$WORK/docker.out" || true
tally "$WORK/docker.out" "check_dockerfiles.py"

# -- 1. dashboards are generate.py's output --------------------------------------------------
if python3 "$K8S/base/monitoring/dashboards/generate.py" --check; then
  ok "dashboards: committed JSON = generate.py output"
else
  fail "dashboards: committed JSON differs from generate.py output"
fi

# -- 1a. dashboards in Grafana's own schema (grafana-foundation-sdk round trip) ----------------
"$PY" "$HERE/check_dashboard_schema.py" "$K8S"/base/monitoring/dashboards/*.json > "$WORK/dschema.out" 2>&1 || true
grep '^FAIL' "$WORK/dschema.out" || true
tally "$WORK/dschema.out" "check_dashboard_schema.py"
"$PY" - "$K8S/base/monitoring/dashboards/chronik-k6.json" "$WORK/mutant-dashboard.json" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["panels"][0]["gridPos"]["hh"] = 8  # a misspelt field
json.dump(d, open(sys.argv[2], "w"))
EOF
if "$PY" "$HERE/check_dashboard_schema.py" "$WORK/mutant-dashboard.json" > /dev/null 2>&1; then
  fail "dashboard schema: a misspelt panel field (gridPos.hh) was accepted"
else
  ok "dashboard schema: a misspelt panel field (gridPos.hh) is refused (check can fail)"
fi

# -- 1b. the kustomization's copy of k6/ is k6/ ------------------------------------------------
if python3 "$K8S/sync_k6.py" --check 2> "$WORK/sync.err"; then
  ok "k6 scripts: k8s-perf/base/k6/scripts = k6/ (sync_k6.py --check)"
else
  fail "k6 scripts: the kustomization's copy differs from k6/: $(tr '\n' ' ' < "$WORK/sync.err")"
fi

if "$PY" "$K8S/crds/gen_testrun_crd.py" --check; then
  ok "crds/testruns.k6.io.yaml = gen_testrun_crd.py output (from schemas/testrun-k6.io-v1alpha1.json)"
else
  fail "crds/testruns.k6.io.yaml differs from gen_testrun_crd.py output"
fi

# -- 2. build every overlay ---------------------------------------------------------------------
mkdir -p "$WORK/built"
overlays=()
for dir in "$K8S"/overlays/*/; do
  name=$(basename "$dir")
  if build "$dir" "$WORK/built/$name.yaml" 2> "$WORK/build-$name.err"; then
    ok "kustomize build overlays/$name ($(grep -c '^kind:' "$WORK/built/$name.yaml") objects)"
    overlays+=("$WORK/built/$name.yaml")
  else
    fail "kustomize build overlays/$name: $(head -c 400 "$WORK/build-$name.err")"
  fi
done
((${#overlays[@]})) || { echo "k8s: $passed passed, $((failed + 1)) failed"; exit 1; }

# -- 3. schemas ------------------------------------------------------------------------------------
schemas="$WORK/schemas"
kubeconform_run() {
  "$KUBECONFORM" -strict -summary -output text \
    -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
    -schema-location "$schemas/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json" "$@"
}
if "$PY" "$HERE/gen_schemas.py" --k8s-version "$K8S_VERSION" --crd-dir "$(cat "$TOOLS_DIR/k8s-crd-dir")" \
     --out "$schemas" "${overlays[@]}" 2> "$WORK/gen_schemas.err"; then
  ok "schemas generated: $(tail -n1 "$WORK/gen_schemas.err")"
  for f in "${overlays[@]}"; do
    if kubeconform_run "$f" > "$WORK/kc.out" 2>&1; then
      ok "kubeconform $(basename "$f" .yaml): $(tail -n1 "$WORK/kc.out")"
    else
      fail "kubeconform $(basename "$f" .yaml): $(grep -v '^Summary' "$WORK/kc.out" | head -n 5)"
    fi
  done
  # misspelt fields must be caught (the schemas are strict and really used)
  "$PY" - "$WORK/built/standalone.yaml" "$WORK/mutants" << 'PY'
import copy, sys, yaml
from pathlib import Path
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = Path(sys.argv[2]); out.mkdir()
def mutant(name, kind, edit):
    d = copy.deepcopy(next(x for x in docs if x["kind"] == kind))
    edit(d)
    (out / f"{name}.yaml").write_text(yaml.safe_dump(d))
mutant("testrun-nodeselector", "TestRun", lambda d: d["spec"]["runner"].update(nodeselector={"a": "b"}))
mutant("testrun-parallelism-string", "TestRun", lambda d: d["spec"].update(parallelism="8"))
mutant("testrun-two-scripts", "TestRun", lambda d: d["spec"]["script"].update(configMap={"name": "x"}))
mutant("servicemonitor-prot", "ServiceMonitor", lambda d: d["spec"]["endpoints"][0].update(prot="metrics"))
mutant("podmonitor-endpoints", "PodMonitor", lambda d: d["spec"].update(endpoints=d["spec"].pop("podMetricsEndpoints")))
mutant("statefulset-portz", "StatefulSet", lambda d: d["spec"]["template"]["spec"]["containers"][0].update(portz=[]))
PY
  for m in "$WORK"/mutants/*.yaml; do
    if kubeconform_run "$m" > "$WORK/kc.out" 2>&1; then
      fail "kubeconform accepts the mutant $(basename "$m" .yaml) (schemas not strict or not used)"
    elif grep -q 'is invalid' "$WORK/kc.out"; then
      ok "kubeconform rejects the mutant $(basename "$m" .yaml)"
    else
      fail "kubeconform on mutant $(basename "$m" .yaml): $(head -n 3 "$WORK/kc.out")"
    fi
  done
else
  fail "gen_schemas.py: $(tail -n 5 "$WORK/gen_schemas.err")"
fi

# -- 4. nameReference: without the configuration the TestRun keeps stale names ----------------
mkdir -p "$WORK/noconf/k8s-perf"
cp -r "$K8S/base" "$WORK/noconf/k8s-perf/base"
ln -s "$REPO/k6" "$WORK/noconf/k6"
sed -i '/^configurations:/,/^$/d' "$WORK/noconf/k8s-perf/base/kustomization.yaml"
if build "$WORK/noconf/k8s-perf/base" "$WORK/noconf.yaml" 2> "$WORK/noconf.err" \
   && ! "$PY" "$HERE/check_manifests.py" --only names "$WORK/noconf.yaml" > "$WORK/noconf.out" 2>&1 \
   && grep -q 'FAIL .*TestRun runner volume k6-scripts -> ConfigMap k6-scripts exists' "$WORK/noconf.out"; then
  ok "nameReference: without base/k6/kustomizeconfig.yaml the TestRun names a missing ConfigMap (check can fail)"
else
  fail "nameReference negative check did not fail as expected: $(head -c 300 "$WORK/noconf.err" "$WORK/noconf.out" 2>/dev/null)"
fi

# -- 5. + 6. manifests against the binaries, then live ---------------------------------------------
"$PY" "$HERE/check_manifests.py" --env-out "$WORK/env" "$WORK/built/cluster.yaml"
if "$HERE/scrape.sh" "$WORK/scrape" "$WORK/env" > "$WORK/scrape.out" 2>&1; then :; fi
grep -E '^(ok|FAIL) ' "$WORK/scrape.out" | grep '^FAIL' || true
tally "$WORK/scrape.out" "live dashboards (scrape.sh)"
served=()
[[ -s "$WORK/scrape/served.json" ]] && served=(--served "$WORK/scrape/served.json")
# the Secrets (and keys) secure-secrets.sh makes, from its dry run
bash "$K8S/secure-secrets.sh" --dry-run --dir "$WORK/secure-dry" 2>&1 \
  | sed -n 's/^+ kubectl create secret generic \([^ ]*\) .*/\1 &/p' \
  | while read -r name line; do echo "$name $(grep -o -- '--from-file=[^=]*' <<< "$line" | sed 's/--from-file=//' | tr '\n' ' ')"; done \
  > "$WORK/secrets.txt"
if [[ $(wc -l < "$WORK/secrets.txt") -ge 5 ]]; then
  ok "secure-secrets.sh --dry-run names $(wc -l < "$WORK/secrets.txt") Secrets: $(cut -d' ' -f1 "$WORK/secrets.txt" | tr '\n' ' ')"
else
  fail "secure-secrets.sh --dry-run named no Secrets: $(head -c 300 "$WORK/secrets.txt")"
fi
"$PY" "$HERE/check_manifests.py" "${served[@]}" --secrets "$WORK/secrets.txt" "${overlays[@]}" > "$WORK/manifests.out" 2>&1 || true
grep '^FAIL' "$WORK/manifests.out" || true
tally "$WORK/manifests.out" "check_manifests.py"

# -- 5a. the secret checks can fail: mutants of the secure overlay -----------------------------------
if [[ -f "$WORK/built/secure.yaml" ]]; then
  mkdir -p "$WORK/secure-mutants"
  "$PY" - "$WORK/built/secure.yaml" "$WORK/secure-mutants" << 'PY'
import copy, sys, yaml
from pathlib import Path
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = Path(sys.argv[2])
def mutant(name, edit):
    ds = copy.deepcopy(docs)
    ing = next(d for d in ds if d["kind"] == "Deployment" and d["metadata"]["name"] == "chronik-ingestor")
    edit(ing["spec"]["template"]["spec"]["containers"][0])
    (out / f"{name}.yaml").write_text(yaml.safe_dump_all(ds))
def env(c, name):
    return next(e for e in c["env"] if e["name"] == name)
def literal(c):
    e = env(c, "CHRONIK_INGESTOR_PRODUCER_CONFIG")
    e["value"] = e["value"].replace("$(SASL_PASSWORD)", "hunter2")
def late(c):
    c["env"].append(c["env"].pop(next(i for i, e in enumerate(c["env"]) if e["name"] == "SASL_PASSWORD")))
def https_probe(c):
    c["readinessProbe"]["httpGet"]["port"] = "http"
mutant("literal-password", literal)
mutant("password-defined-late", late)
mutant("probe-on-https", https_probe)
PY
  for m in literal-password:'no literal password' password-defined-late:'defined before it' probe-on-https:'readinessProbe speaks plain HTTP'; do
    name=${m%%:*} want=${m#*:}
    cp "$WORK/secure-mutants/$name.yaml" "$WORK/secure-mutants/secure.yaml"
    if "$PY" "$HERE/check_manifests.py" --secrets "$WORK/secrets.txt" "$WORK/secure-mutants/secure.yaml" \
         > "$WORK/mutant.out" 2>&1; then
      fail "check_manifests accepts the secure mutant $name"
    elif grep -q "^FAIL .*$want" "$WORK/mutant.out"; then
      ok "check_manifests refuses the secure mutant $name ($want)"
    else
      fail "check_manifests on the secure mutant $name failed otherwise: $(grep '^FAIL' "$WORK/mutant.out" | head -n 2)"
    fi
  done
else
  fail "no built secure overlay to make mutants of"
fi

# -- 7. the results layout renders with the project's report -----------------------------------------
bash "$HERE/test_results.sh" "$WORK/scrape" > "$WORK/results.out" 2>&1 || true
grep '^FAIL' "$WORK/results.out" || true
tally "$WORK/results.out" "test_results.sh"

# -- 8. run.sh / cleanup.sh ---------------------------------------------------------------------------
bash "$HERE/test_cli.sh" > "$WORK/cli.out" 2>&1 || true
grep '^FAIL' "$WORK/cli.out" || true
tally "$WORK/cli.out" "test_cli.sh"

# -- 9. secure-secrets.sh and the HTTPS ledger fetch ----------------------------------------------------
bash "$HERE/test_secure.sh" "$WORK/built/secure.yaml" > "$WORK/secure.out" 2>&1 || true
grep '^FAIL' "$WORK/secure.out" || true
tally "$WORK/secure.out" "test_secure.sh"

echo "k8s: $passed passed, $failed failed"
((failed == 0))
