# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables set here are read by run-all.sh and pipeline.sh
# scripts/secure.sh - the security of a local run (`./run-all.sh --secure`):
# every Kafka connection SASL_SSL with SCRAM-SHA-512 (brokers among
# themselves too), the StandardAuthorizer with ACLs granting each harness
# user only what it needs, and the ingestors' HTTP port over TLS with a
# bearer token. Sourced after scripts/lib.sh, not run.
#
# Owns: making the run's CA and certificates (scripts/make-certs.sh), its
# users and random passwords, the files that carry them (mode 0600, in the
# run's scratch dir, removed with it), the broker/ingestor/consumer
# arguments and environment that use them, and the run's ACLs. Must not:
# start processes (run-all.sh and pipeline.sh do) or print a password.
#
# Users: broker (inter-broker, super user), admin (super user: creates the
# topic and the ACLs), ingestor (WRITE, DESCRIBE and IDEMPOTENT_WRITE),
# consumer (READ, DESCRIBE on the topic, READ on the group).
#
# secure_setup DIR sets:
#   SECURE_BROKER_ARGS     chronik-server flags (key/trust stores, SCRAM users,
#                          JAAS login, authorizer, super users)
#   SECURE_PROTOCOL        SASL_SSL (the listeners' protocol)
#   KAFKA_CLIENT_CONFIG    the admin's librdkafka properties file (exported:
#                          scripts/runctl.py reads it for its admin clients)
#   INGESTOR_CA_FILE, INGESTOR_AUTH_TOKEN_FILE (exported: runctl.py's way to
#                          the ingestors' HTTPS port), INGESTOR_AUTH_HEADER_FILE
#                          (pipeline.sh's ingestor_get: curl -H @file)
#   SECURE_INGESTOR_ARGS   chronik-ingestor HTTPS and token flags
#   INGESTOR_ENV / CONSUMER_ENV (pipeline.sh's): the librdkafka properties
#                          (with the password) given through the
#                          environment, not the command line

SECURE_PROTOCOL=SASL_SSL
SECURE_MECHANISM=SCRAM-SHA-512

# secure_password - 32 random hex characters
secure_password() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }

# secure_setup DIR - certificates, users and files under DIR (see above)
secure_setup() {
  local dir=$1 user
  mkdir -p "$dir"
  chmod 700 "$dir"
  bash "$REPO_ROOT/scripts/make-certs.sh" "$dir/certs" > "$dir/make-certs.log" 2>&1 \
    || { cat "$dir/make-certs.log" >&2; die "making the run's certificates failed"; }
  declare -gA SECURE_PASSWORDS=()
  for user in broker admin ingestor consumer; do SECURE_PASSWORDS[$user]=$(secure_password); done
  (
    umask 077
    for user in broker admin ingestor consumer; do
      echo "$SECURE_MECHANISM=[name=$user,password=${SECURE_PASSWORDS[$user]}]"
    done > "$dir/scram-credentials"
    printf 'KafkaServer {\n  org.apache.kafka.common.security.scram.ScramLoginModule required\n  username="broker"\n  password="%s";\n};\n' \
      "${SECURE_PASSWORDS[broker]}" > "$dir/broker.jaas"
    secure_client_properties admin "$dir/certs/ca.pem" > "$dir/admin.properties"
    secure_password > "$dir/ingestor.token"
    printf 'Authorization: Bearer %s\n' "$(cat "$dir/ingestor.token")" > "$dir/ingestor.header"
  )
  SECURE_BROKER_ARGS=(--ssl-keystore-location "$dir/certs/broker.keystore.pem"
    --ssl-truststore-location "$dir/certs/ca.pem"
    --sasl-enabled-mechanisms "$SECURE_MECHANISM"
    --sasl-mechanism-inter-broker-protocol "$SECURE_MECHANISM"
    --sasl-scram-credentials-file "$dir/scram-credentials"
    --sasl-jaas-config-file "$dir/broker.jaas"
    --authorizer-class-name org.apache.kafka.metadata.authorizer.StandardAuthorizer
    --super-users "User:broker;User:admin")
  export KAFKA_CLIENT_CONFIG="$dir/admin.properties"
  export INGESTOR_CA_FILE="$dir/certs/ca.pem"
  export INGESTOR_AUTH_TOKEN_FILE="$dir/ingestor.token"
  INGESTOR_AUTH_HEADER_FILE="$dir/ingestor.header"
  SECURE_INGESTOR_ARGS=(--ssl-keystore-location "$dir/certs/broker.keystore.pem"
    --auth-token-file "$dir/ingestor.token" --metrics-listen 127.0.0.1:0)
  INGESTOR_ENV=("CHRONIK_INGESTOR_PRODUCER_CONFIG=$(secure_client_properties ingestor "$dir/certs/ca.pem" | paste -sd,)")
  CONSUMER_ENV=("CHRONIK_CONSUMER_PROPERTIES=$(secure_client_properties consumer "$dir/certs/ca.pem" | paste -sd,)")
}

# secure_client_properties USER CA - USER's librdkafka properties, one per line
secure_client_properties() {
  printf '%s\n' "security.protocol=$SECURE_PROTOCOL" "sasl.mechanism=$SECURE_MECHANISM" \
    "sasl.username=$1" "sasl.password=${SECURE_PASSWORDS[$1]}" "ssl.ca.location=$2"
}

# secure_grant BOOTSTRAP TOPIC GROUP - the harness users' ACLs (as the admin)
secure_grant() {
  "$VENV_PY" "$REPO_ROOT/scripts/runctl.py" acl "$1" \
    "User:ingestor:topic:$2:WRITE,DESCRIBE" "User:ingestor:cluster:kafka-cluster:IDEMPOTENT_WRITE" \
    "User:consumer:topic:$2:READ,DESCRIBE" "User:consumer:group:$3:READ"
}
