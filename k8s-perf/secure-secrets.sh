#!/usr/bin/env bash
# k8s-perf/secure-secrets.sh - the certificates, SCRAM users and tokens the
# `secure` overlay (components/secure) mounts, made once per namespace and
# stored as Secrets. k8s-perf/run.sh calls it for an overlay that includes
# the component; by hand:
#
#   k8s-perf/secure-secrets.sh [--context CTX] [--namespace NS] [--dir DIR]
#                              [--cluster-domain D] [--brokers N] [--dry-run]
#     --namespace NS      where the Secrets go, and the namespace in the
#                         certificates' DNS names (default chronik-perf)
#     --dir DIR           where the material is kept (default
#                         .run/k8s-secure/<namespace>; git-ignored, mode 0700;
#                         env SECURE_DIR too)
#     --cluster-domain D  the cluster's DNS domain (default cluster.local)
#     --brokers N         broker pods named in the broker certificate besides
#                         the wildcard (default 3)
#     --dry-run           make nothing, print the kubectl commands
#
# Made with scripts/make-certs.sh (openssl, EC P-256) and /dev/urandom, only
# when DIR does not hold them yet, so a re-run applies the same Secrets
# (kubectl create --dry-run=client -o yaml | kubectl apply: idempotent) and
# running pods keep working. Delete DIR and the Secrets to rotate everything.
#
#   Secret               keys                          mounted by
#   chronik-tls-ca       ca.pem                        every client: trust store (librdkafka
#                                                      ssl.ca.location, Java PEM trust store, chronik-loadgen --ca-file)
#   chronik-broker-tls   keystore.pem, ca.pem          brokers: --ssl-keystore-location / --ssl-truststore-location
#                                                      (SAN: chronik-N.<headless>.<ns>.svc.<domain>, *.<headless>...,
#                                                      chronik, chronik.<ns>[.svc[.<domain>]])
#   chronik-broker-sasl  scram-users.txt, jaas.conf    brokers: --sasl-scram-credentials-file (users broker, admin,
#                                                      ingestor, consumer; kafka-storage --add-scram syntax),
#                                                      --sasl-jaas-config-file (the broker's own login)
#   chronik-ingestor-tls keystore.pem                  ingestors: --ssl-keystore-location (HTTPS; SAN chronik-ingestor[...])
#   chronik-ingestor-token token                       ingestors: --auth-token-file; chronik-loadgen: --token-file
#   chronik-sasl-admin   password, client.properties   the ACL Job (kafka-acls.sh --command-config)
#   chronik-sasl-ingestor password                     ingestors (sasl.password)
#   chronik-sasl-consumer password                     consumers (sasl.password)
#
# Passwords and the token are 48 hex digits (no character that would need
# quoting in a JAAS file or a comma-separated property list).
# Needs: kubectl (not with --dry-run), openssl.
set -euo pipefail
# shellcheck source=k8s-perf/lib/k8s.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s.sh"

CONTEXT="${CONTEXT:-}"
NAMESPACE="${NAMESPACE:-chronik-perf}"
SECURE_DIR="${SECURE_DIR:-}"
CLUSTER_DOMAIN="${CLUSTER_DOMAIN:-cluster.local}"
BROKERS="${BROKERS:-3}"
DRY_RUN="${DRY_RUN:-0}"
HEADLESS=chronik-headless
USERS=(broker admin ingestor consumer)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
need() { [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || { echo "option $1 needs a value" >&2; usage; }; }
while (($#)); do
  case $1 in
    --context) need "$@"; CONTEXT=$2; shift 2 ;;
    --namespace) need "$@"; NAMESPACE=$2; shift 2 ;;
    --dir) need "$@"; SECURE_DIR=$2; shift 2 ;;
    --cluster-domain) need "$@"; CLUSTER_DOMAIN=$2; shift 2 ;;
    --brokers) need "$@"; BROKERS=$2; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option: $1" >&2; usage ;;
  esac
done
[[ "$NAMESPACE" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "--namespace $NAMESPACE is not a valid namespace name"
[[ "$CLUSTER_DOMAIN" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "--cluster-domain $CLUSTER_DOMAIN is not a DNS name"
[[ "$BROKERS" =~ ^[1-9][0-9]?$ ]] || die "--brokers takes 1-99"
SECURE_DIR=${SECURE_DIR:-$REPO_ROOT/.run/k8s-secure/$NAMESPACE}

random_hex() { od -An -tx1 -N24 /dev/urandom | tr -d ' \n'; }

# -- the material, made once -----------------------------------------------------------------
make_material() {
  local d=$1 svc="$NAMESPACE.svc.$CLUSTER_DOMAIN" sans i u
  umask 077
  mkdir -p "$d"
  chmod 700 "$d"
  sans="DNS:*.$HEADLESS.$svc"
  for ((i = 0; i < BROKERS; i++)); do sans+=",DNS:chronik-$i.$HEADLESS.$svc"; done
  sans+=",DNS:chronik,DNS:chronik.$NAMESPACE,DNS:chronik.$NAMESPACE.svc,DNS:chronik.$svc"
  local ingestor_sans="DNS:chronik-ingestor,DNS:chronik-ingestor.$NAMESPACE"
  ingestor_sans+=",DNS:chronik-ingestor.$NAMESPACE.svc,DNS:chronik-ingestor.$svc"
  bash "$REPO_ROOT/scripts/make-certs.sh" "$d/certs" \
    --server "chronik-broker=$sans" --server "chronik-ingestor=$ingestor_sans" > /dev/null
  for u in "${USERS[@]}"; do random_hex > "$d/$u.password"; done
  random_hex > "$d/ingestor.token"
  : > "$d/scram-users.txt"
  for u in "${USERS[@]}"; do
    printf 'SCRAM-SHA-512=[name=%s,iterations=8192,password=%s]\n' "$u" "$(cat "$d/$u.password")" >> "$d/scram-users.txt"
  done
  # the broker's own login to other brokers (the KafkaServer section's username/password)
  printf 'KafkaServer {\n  org.apache.kafka.common.security.scram.ScramLoginModule required\n  username="broker"\n  password="%s";\n};\n' \
    "$(cat "$d/broker.password")" > "$d/jaas.conf"
  # kafka-acls.sh --command-config: Java client properties (PEM trust store as mounted by the Job)
  cat > "$d/admin.properties" << EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(cat "$d/admin.password")";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/chronik/tls-ca/ca.pem
EOF
  touch "$d/.complete"
}

if [[ "$DRY_RUN" == 1 ]]; then
  [[ -f "$SECURE_DIR/.complete" ]] || log "dry run: would make a CA, certificates, SCRAM users and a token in $SECURE_DIR"
elif [[ ! -f "$SECURE_DIR/.complete" ]]; then
  rm -rf "$SECURE_DIR"
  make_material "$SECURE_DIR"
  log "made a CA, broker and ingestor certificates, SCRAM users (${USERS[*]}) and a token in $SECURE_DIR"
else
  log "reusing the material in $SECURE_DIR"
fi

# -- the Secrets -----------------------------------------------------------------------------------
# apply_created ARGS... - `kubectl create ARGS --dry-run=client -o yaml | kubectl apply -f -`,
# one after the other (so a dry run prints them in order); the YAML stays in memory
apply_created() {
  local yaml
  yaml=$(kc create "$@" --dry-run=client -o yaml)
  kc apply -f - <<< "$yaml" > /dev/null
}
# secret NAME KEY=FILE... - create or update one Secret from files of SECURE_DIR
secret() {
  local name=$1 kv args=()
  shift
  for kv in "$@"; do args+=("--from-file=${kv%%=*}=$SECURE_DIR/${kv#*=}"); done
  apply_created secret generic "$name" -n "$NAMESPACE" "${args[@]}"
  log "Secret $NAMESPACE/$name: $(printf '%s ' "${@%%=*}")"
}
apply_created namespace "$NAMESPACE"
secret chronik-tls-ca ca.pem=certs/ca.pem
secret chronik-broker-tls keystore.pem=certs/chronik-broker.keystore.pem ca.pem=certs/ca.pem
secret chronik-broker-sasl scram-users.txt=scram-users.txt jaas.conf=jaas.conf
secret chronik-ingestor-tls keystore.pem=certs/chronik-ingestor.keystore.pem
secret chronik-ingestor-token token=ingestor.token
secret chronik-sasl-admin password=admin.password client.properties=admin.properties
secret chronik-sasl-ingestor password=ingestor.password
secret chronik-sasl-consumer password=consumer.password
