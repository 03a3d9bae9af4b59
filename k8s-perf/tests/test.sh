#!/usr/bin/env bash
# k8s-perf/tests/test.sh - `make k8s-test`: everything about k8s-perf/ that
# can be checked without a cluster. Installs its own tools
# (scripts/install-k8s-tools.sh); idempotent; about 1.5 minutes warm.
#
#   0. images        docker/*.Dockerfile and .dockerignore build what the
#                    manifests run (check_dockerfiles.py; no Docker engine here)
#   1. dashboards    base/monitoring/dashboards/*.json = generate.py's output;
#                    the kustomization's copy of load/plans/ is load/plans/
#                    (sync_plans.py --check)
#   2. build         kustomize build of every overlay (stock: no flags); 2b. each
#                    with components/local-node (check_local_node.py: never pulled,
#                    no required anti-affinity on the one node); 2c. the node's
#                    Prometheus configuration and CPU fitting (check_node_config.py)
#   3. schemas       kubeconform -strict on every built object: Kubernetes
#                    schemas from kubernetes-validate (the load Job's batch/v1
#                    included), ServiceMonitor/PodMonitor from the
#                    prometheus-operator CRDs (gen_schemas.py); and misspelt or
#                    mistyped fields in the Job, a ServiceMonitor, a PodMonitor
#                    and a StatefulSet must fail
#   4. load Job      check_manifests.py --only loadgen on mutants of the built
#                    overlays: a non-indexed Job, parallelism != completions, a
#                    barrier peer that is not index 0's stable name, index 0
#                    not listening, a plan missing from the ConfigMap, no
#                    subdomain, an unknown flag, overrides the plan refuses, and
#                    (--only security) a generator pod that may run as root -
#                    each must fail
#   5. manifests     check_manifests.py: env vars, flags, ports, probes, monitors,
#                    topology, entrypoint against the real binaries' --help, the
#                    load Job against `chronik-loadgen run --help`
#   6. live          scrape.sh: the real binaries on 127.0.0.1 with the
#                    manifests' env, a local Prometheus scraping them and two
#                    chronik-loadgen generators (the Job's barrier, results
#                    fetched as lib/collect.sh fetches them); every dashboard
#                    query parses (promtool), names only scraped metrics and
#                    returns data; probe paths answered
#   7. results       the results directory run.sh builds (the live run's
#                    generator results merged by chronik-loadgen merge, its
#                    consumer report) renders with `python -m reports render`
#                    (tests/test_results.sh)
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
# K8S_TEST_BUILD=1 rebuilds), Go (chronik-loadgen: scripts/install-loadgen.sh),
# python3. Env: KEEP_WORK=1 keeps the scratch
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
export PY
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
build="$K8S_TEST_BUILD"
for b in chronik-server chronik-ingestor chronik-consumer; do
  [[ -x "$REPO/target/release/$b" ]] || build=1
done
if [[ "$build" == 1 ]]; then
  echo "building the release binaries (scripts/build-release.sh)" >&2
  bash "$REPO/scripts/build-release.sh" >&2
fi

# chronik-loadgen (static Go binary, load/generator): the Job's flags and the live run
LOADGEN_BIN="${LOADGEN_BIN:-}"
if [[ -z "$LOADGEN_BIN" ]] && ! LOADGEN_BIN=$(bash "$REPO/scripts/install-loadgen.sh" 2> "$WORK/install-loadgen.err"); then
  fail "scripts/install-loadgen.sh: $(tail -n 3 "$WORK/install-loadgen.err" | tr '\n' ' ')"
  LOADGEN_BIN=""
fi
export LOADGEN_BIN
LOADGEN_ARGS=()
[[ -x "$LOADGEN_BIN" ]] && LOADGEN_ARGS=(--loadgen-bin "$LOADGEN_BIN")

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
"$PY" "$HERE/mutants.py" dashboard "$K8S/base/monitoring/dashboards/chronik-loadgen.json" "$WORK/mutant-dashboard.json"
if "$PY" "$HERE/check_dashboard_schema.py" "$WORK/mutant-dashboard.json" > /dev/null 2>&1; then
  fail "dashboard schema: a misspelt panel field (gridPos.hh) was accepted"
else
  ok "dashboard schema: a misspelt panel field (gridPos.hh) is refused (check can fail)"
fi

# -- 1b. the kustomization's copy of load/plans/ is load/plans/ ------------------------------------
if python3 "$K8S/sync_plans.py" --check 2> "$WORK/sync.err"; then
  ok "load plans: k8s-perf/base/loadgen/plans = load/plans/ (sync_plans.py --check)"
else
  fail "load plans: the kustomization's copy differs from load/plans/: $(tr '\n' ' ' < "$WORK/sync.err")"
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

# -- 2b. every overlay as k8s-perf/run.sh --local-node renders it (components/local-node) ---------------
mkdir -p "$WORK/local-node"
for dir in "$K8S"/overlays/*/; do
  name=$(basename "$dir")
  kdir="$WORK/local-node/$name"
  mkdir -p "$kdir"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n' \
    "$(realpath --relative-to="$kdir" "$dir")" "$(realpath --relative-to="$kdir" "$K8S/components/local-node")" \
    > "$kdir/kustomization.yaml"
  if build "$kdir" "$WORK/local-node/$name.yaml" 2> "$WORK/local-node/$name.err" \
     && "$PY" "$HERE/check_local_node.py" "$WORK/local-node/$name.yaml" > "$WORK/local-node/$name.out" 2>&1; then
    ok "overlays/$name + components/local-node: $(cut -d: -f2- "$WORK/local-node/$name.out")"
  else
    fail "overlays/$name + components/local-node: $(head -c 400 "$WORK/local-node/$name.err" "$WORK/local-node/$name.out" 2> /dev/null)"
  fi
done

# -- 2c. the local node's generated configuration (scrape_config.py, fit_requests.py) -------------------
if [[ -f "$WORK/built/cluster.yaml" ]] && "$PY" "$HERE/check_node_config.py" "$WORK/built/cluster.yaml" > "$WORK/node-config.out" 2>&1; then
  while read -r line; do ok "$line"; done < "$WORK/node-config.out"
else
  fail "local node configuration: $(grep -v '^scrape\|^fit' "$WORK/node-config.out" 2> /dev/null | head -c 400)"
fi

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
  "$PY" "$HERE/mutants.py" schema "$WORK/built/standalone.yaml" "$WORK/mutants"
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

# -- 4. the load Job checks can fail: mutants of the built overlays ------------------------------------
mkdir -p "$WORK/job-mutants"
"$PY" "$HERE/mutants.py" job "$WORK/built" "$WORK/job-mutants"
for m in not-indexed:'is an Indexed Job' parallelism-short:'completions = parallelism = GENERATORS' \
         generators-env-differs:'completions = parallelism = GENERATORS' \
         peer-not-index-0:"joins the barrier at index 0's stable name" index-0-not-listening:'holds the start barrier' \
         plan-missing:'plan smoke.json is in the plans ConfigMap' no-subdomain:'is a headless Service selecting its pods' \
         unknown-flag:'every flag is one `chronik-loadgen run --help` lists' \
         overrides-refused:'accepts the plan and its overrides' runs-as-root:'satisfies PodSecurity restricted'; do
  name=${m%%:*} want=${m#*:}
  only=loadgen
  [[ "$name" == runs-as-root ]] && only=security
  if [[ -z "$LOADGEN_BIN" && ( "$name" == unknown-flag || "$name" == overrides-refused ) ]]; then
    fail "load Job mutant $name: no chronik-loadgen binary to check against"; continue
  fi
  if "$PY" "$HERE/check_manifests.py" --only "$only" "${LOADGEN_ARGS[@]}" "$WORK/job-mutants/$name.yaml" \
       > "$WORK/mutant.out" 2>&1; then
    fail "check_manifests accepts the load Job mutant $name"
  elif grep -qF "$want" <(grep '^FAIL' "$WORK/mutant.out"); then
    ok "check_manifests refuses the load Job mutant $name ($want)"
  else
    fail "check_manifests on the load Job mutant $name failed otherwise: $(grep '^FAIL' "$WORK/mutant.out" | head -n 2)"
  fi
done

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
"$PY" "$HERE/check_manifests.py" "${served[@]}" "${LOADGEN_ARGS[@]}" --secrets "$WORK/secrets.txt" "${overlays[@]}" \
  > "$WORK/manifests.out" 2>&1 || true
grep '^FAIL' "$WORK/manifests.out" || true
tally "$WORK/manifests.out" "check_manifests.py"

# -- 5a. the secret checks can fail: mutants of the secure overlay -----------------------------------
if [[ -f "$WORK/built/secure.yaml" ]]; then
  mkdir -p "$WORK/secure-mutants"
  "$PY" "$HERE/mutants.py" secure "$WORK/built/secure.yaml" "$WORK/secure-mutants"
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
