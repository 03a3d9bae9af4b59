#!/usr/bin/env bash
# k8s-perf/tests/test_secure.sh - the secure overlay's two scripts, without a
# cluster (a stand-in kubectl records what would be applied; `kubectl create
# --dry-run=client` is the real one):
#   secure-secrets.sh  makes a CA whose certificates openssl verifies for the
#                      pods' DNS names (brokers: every StatefulSet pod and the
#                      client Service; ingestors: their Service), each key
#                      store's key matching its certificate, SCRAM users in
#                      kafka-storage --add-scram syntax, the broker's JAAS login
#                      and the admin's client properties with the same
#                      passwords, material private (0700/0600); applies the
#                      Secrets; a second run applies the very same Secrets
#   live               secure_live.py: the real chronik-server with the overlay's
#                      broker env and Secret files, the ACL Job's grants, the
#                      ingestor's and consumer's librdkafka properties
#   collect.sh         ingestor_get over `kubectl port-forward` + curl: a real
#                      HTTPS server holding the ingestor's certificate and
#                      wanting the token answers /ledger; with another token
#                      it refuses and ingestor_get fails; the port-forward ends
# Usage: test_secure.sh BUILT_SECURE_YAML (kustomize build of overlays/secure)
# Prints "secure: N passed, N failed". Needs: kubectl, openssl, curl, python3,
# target/release/chronik-server, .venv (scripts/install-python-deps.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S="$(cd "$HERE/.." && pwd)"
RENDERED=$(realpath "$1")
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  [[ -z "$SERVER_PID" ]] || kill "$SERVER_PID" 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }
finish() { echo "secure: $passed passed, $failed failed"; ((failed == 0)); exit; }

REAL_KUBECTL=$(command -v kubectl || true)
[[ -n "$REAL_KUBECTL" ]] || { fail "no kubectl on PATH"; finish; }
NS="ns-sec"
SEC="$WORK/material"
# no cluster is needed: an empty kubeconfig, so whatever context this machine
# has current (an unreachable or a deleted one) cannot change the result
export KUBECONFIG="$WORK/kubeconfig"
printf 'apiVersion: v1\nkind: Config\n' > "$KUBECONFIG"

# -- the stand-in kubectl ---------------------------------------------------------------------
mkdir -p "$WORK/bin"
cat > "$WORK/bin/kubectl" << EOF
#!/usr/bin/env bash
# records \`apply -f -\`, answers \`get secret\` from what was applied, fakes a port-forward
set -euo pipefail
[[ "\$1" == --context ]] && shift 2
case \$1 in
  apply) cat >> "$WORK/applied.yaml"; printf -- '---\n' >> "$WORK/applied.yaml"; echo applied ;;
  create) exec "$REAL_KUBECTL" "\$@" ;;
  get) exec python3 "$HERE/secure_standins.py" secret-get "$WORK/applied.yaml" "$NS" "\$@" ;;
  port-forward) echo "Forwarding from 127.0.0.1:\$FAKE_PF_PORT -> 8080"; exec sleep 300 ;;
  *) echo "stand-in kubectl: unexpected \$*" >&2; exit 1 ;;
esac
EOF
chmod +x "$WORK/bin/kubectl"
export PATH="$WORK/bin:$PATH"

# -- secure-secrets.sh ------------------------------------------------------------------------
if bash "$K8S/secure-secrets.sh" --namespace "$NS" --dir "$SEC" > "$WORK/run1.out" 2>&1; then
  ok "secure-secrets.sh made its material and applied its Secrets"
else
  fail "secure-secrets.sh: $(tail -n 3 "$WORK/run1.out")"; finish
fi
cp "$WORK/applied.yaml" "$WORK/applied-1.yaml"
python3 "$HERE/secure_standins.py" secret-names "$WORK/applied-1.yaml" "$NS" > "$WORK/secrets.out"
want="chronik-broker-sasl chronik-broker-tls chronik-ingestor-tls chronik-ingestor-token chronik-sasl-admin chronik-sasl-consumer chronik-sasl-ingestor chronik-tls-ca"
[[ "$(cat "$WORK/secrets.out")" == "$want" ]] && ok "the eight Secrets, in namespace $NS" \
  || fail "Secrets applied: $(cat "$WORK/secrets.out")"

certs="$SEC/certs"
domain="$NS.svc.cluster.local"
for host in "chronik-0.chronik-headless.$domain" "chronik-2.chronik-headless.$domain" \
            "chronik-7.chronik-headless.$domain" chronik "chronik.$domain"; do
  if openssl verify -CAfile "$certs/ca.pem" -purpose sslserver -verify_hostname "$host" \
       "$certs/chronik-broker.pem" > /dev/null 2>&1; then
    ok "broker certificate verifies for $host"
  else
    fail "broker certificate does not verify for $host"
  fi
done
openssl verify -CAfile "$certs/ca.pem" -purpose sslclient "$certs/chronik-broker.pem" > /dev/null 2>&1 \
  && ok "broker certificate is also a client certificate (inter-broker TLS)" \
  || fail "broker certificate lacks clientAuth"
if openssl verify -CAfile "$certs/ca.pem" -verify_hostname "chronik-0.chronik-headless.other.svc.cluster.local" \
     "$certs/chronik-broker.pem" > /dev/null 2>&1; then
  fail "broker certificate verifies for another namespace's pod (SANs too wide)"
else
  ok "broker certificate does not verify for another namespace's pod"
fi
for host in chronik-ingestor "chronik-ingestor.$NS.svc"; do
  openssl verify -CAfile "$certs/ca.pem" -purpose sslserver -verify_hostname "$host" "$certs/chronik-ingestor.pem" \
    > /dev/null 2>&1 && ok "ingestor certificate verifies for $host" || fail "ingestor certificate does not verify for $host"
done
for ks in chronik-broker chronik-ingestor; do
  a=$(openssl pkey -in "$certs/$ks.keystore.pem" -pubout 2> /dev/null)
  b=$(openssl x509 -in "$certs/$ks.keystore.pem" -pubkey -noout 2> /dev/null)
  [[ -n "$a" && "$a" == "$b" ]] && ok "$ks.keystore.pem: its private key is its certificate's" \
    || fail "$ks.keystore.pem: key and certificate do not match"
done
if grep -qvE '^SCRAM-SHA-512=\[name=(broker|admin|ingestor|consumer),iterations=8192,password=[0-9a-f]{48}\]$' \
     "$SEC/scram-users.txt" || [[ $(wc -l < "$SEC/scram-users.txt") != 4 ]]; then
  fail "scram-users.txt is not four --add-scram lines: $(sed 's/password=[^]]*/password=…/' "$SEC/scram-users.txt")"
else
  ok "scram-users.txt: broker, admin, ingestor, consumer in kafka-storage --add-scram syntax"
fi
grep -q "username=\"broker\"" "$SEC/jaas.conf" && grep -q "password=\"$(cat "$SEC/broker.password")\";" "$SEC/jaas.conf" \
  && ok "jaas.conf: the broker's own login, its SCRAM password" || fail "jaas.conf does not hold the broker's login"
grep -q "username=\"admin\" password=\"$(cat "$SEC/admin.password")\";" "$SEC/admin.properties" \
  && grep -q '^security.protocol=SASL_SSL$' "$SEC/admin.properties" \
  && ok "admin.properties: SASL_SSL as admin with its SCRAM password" || fail "admin.properties"
modes=$(stat -c '%a' "$SEC" "$SEC"/*.password "$SEC"/ingestor.token "$SEC"/certs/ca.key | sort -u | tr '\n' ' ')
[[ "$modes" == "600 700 " ]] && ok "material private (directory 0700, secrets 0600)" || fail "material modes: $modes"
leaked=""
for f in "$SEC"/*.password "$SEC"/ingestor.token; do
  grep -qF "$(cat "$f")" "$RENDERED" && leaked+=" $(basename "$f")"
done
[[ -z "$leaked" ]] && ok "no generated password or token is in the secure overlay's manifests" || fail "leaked:$leaked"

: > "$WORK/applied.yaml"
if bash "$K8S/secure-secrets.sh" --namespace "$NS" --dir "$SEC" > "$WORK/run2.out" 2>&1 \
   && grep -q 'reusing' "$WORK/run2.out" && cmp -s "$WORK/applied.yaml" "$WORK/applied-1.yaml"; then
  ok "a second run reuses the material and applies the same Secrets (idempotent)"
else
  fail "second run: $(tail -n 2 "$WORK/run2.out")"
fi

# -- the broker's settings and the Job's ACLs, live (secure_live.py) ---------------------------------
REPO="$(cd "$K8S/.." && pwd)"
bash "$REPO/scripts/install-python-deps.sh" > "$WORK/pydeps.log" 2>&1 || true
if [[ ! -x "$REPO/target/release/chronik-server" ]]; then
  fail "live: no target/release/chronik-server"
elif ! "$REPO/.venv/bin/python" "$REPO/scripts/runctl.py" has-modules confluent_kafka yaml 2> /dev/null; then
  fail "live: .venv lacks confluent-kafka (scripts/install-python-deps.sh: $(tail -n 1 "$WORK/pydeps.log"))"
else
  rc=0
  "$REPO/.venv/bin/python" "$HERE/secure_live.py" "$RENDERED" "$WORK/applied-1.yaml" \
    "$REPO/target/release/chronik-server" > "$WORK/live.out" 2>&1 || rc=$?
  grep -E '^(ok|FAIL) ' "$WORK/live.out" || true
  passed=$((passed + $(grep -c '^ok ' "$WORK/live.out" || true)))
  failed=$((failed + $(grep -c '^FAIL ' "$WORK/live.out" || true)))
  if [[ $rc != 0 ]] && ! grep -q '^FAIL ' "$WORK/live.out"; then
    fail "secure_live.py exited $rc: $(tail -n 3 "$WORK/live.out")"
  fi
fi

# -- collect.sh: a ledger over HTTPS with the token -------------------------------------------------
# serve TOKEN_FILE - an HTTPS server with the ingestor's key store, /ledger for that token only
serve() {
  python3 "$HERE/secure_standins.py" serve-ledger "$certs/chronik-ingestor.keystore.pem" "$1" "$WORK/port" &
  SERVER_PID=$!
  for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
  FAKE_PF_PORT=$(cat "$WORK/port")
  export FAKE_PF_PORT
  rm -f "$WORK/port"
}
# fetch - what collect.sh's ingestor_open + ingestor_get + ingestor_close give for /ledger
fetch() {
  (
    # shellcheck source=k8s-perf/lib/k8s.sh
    source "$K8S/lib/k8s.sh"
    # shellcheck source=k8s-perf/lib/collect.sh
    source "$K8S/lib/collect.sh"
    NAMESPACE=$NS DRY_RUN=0 CONTEXT=""
    rc=0
    ingestor_open chronik-ingestor-0 || exit 9
    ingestor_get chronik-ingestor-0 /ledger || rc=$?
    pf=$INGESTOR_PF_PID
    ingestor_close
    kill -0 "$pf" 2> /dev/null && echo "port-forward $pf still running" >&2
    rm -rf "$INGESTOR_TLS_DIR"
    exit "$rc"
  )
}
export RENDERED
serve "$SEC/ingestor.token"
out=$(fetch 2> "$WORK/fetch.err") || true
if [[ "$out" == '{"ingestor_id":"stand-in","in_flight":0}' ]] && ! grep -q 'still running' "$WORK/fetch.err"; then
  ok "collect.sh ingestor_get: /ledger over port-forward + HTTPS, the CA and token from the Secrets; port-forward ended"
else
  fail "collect.sh ingestor_get over HTTPS: got '$out' $(head -c 300 "$WORK/fetch.err")"
fi
kill "$SERVER_PID" 2> /dev/null || true
wait "$SERVER_PID" 2> /dev/null || true
echo "another-token" > "$WORK/other.token"
serve "$WORK/other.token"
if fetch > /dev/null 2>&1; then
  fail "collect.sh ingestor_get succeeded against a server wanting another token"
else
  ok "collect.sh ingestor_get fails when the ingestor refuses the token (401)"
fi
finish
