#!/usr/bin/env bash
# k8s-perf/grow-brokers.sh - grow (or shrink back to it) the broker
# StatefulSet of a cluster whose controllers run apart (components/controllers,
# overlays/scale-out) and move partitions onto the new brokers with Apache
# Kafka's own tools, as an operator would:
#
#   k8s-perf/grow-brokers.sh --to N [options]
#     --to N               brokers wanted (the StatefulSet's new replicas)
#     --namespace NS       (default chronik-perf)
#     --context CTX        kubectl context (default: the current one)
#     --topics T1,T2       topics to spread over brokers 1..N (default: every
#                          topic but the internal ones)
#     --throttle B         replication throttle in bytes/s while moving
#                          (kafka-reassign-partitions.sh --throttle; cleared by
#                          --verify once the move is done; default none)
#     --tools pod|host     where Kafka's tools run: `pod` (default) a pod of
#                          apache/kafka:4.3.1 in the namespace, labelled as a
#                          harness pod (the brokers' NetworkPolicy admits it);
#                          `host` this machine's Kafka 4.3.1 jars
#                          (compat/java/target/lib, compat/install-deps.sh),
#                          resolving the brokers' stable names to their pod IPs
#                          (for a node whose pod network this machine reaches,
#                          like the one of make k8s-node)
#     --timeout S          longest the new pods and the move may each take (default 600)
#
# Steps: 1. kubectl scale statefulset chronik --replicas N and wait until
# every broker pod is Ready (a new broker-only pod joins the metadata quorum
# as an observer and registers itself: nothing else changes); 2.
# kafka-reassign-partitions.sh --generate over brokers 1..N for the topics,
# --execute (with --throttle), then --verify every 2 s until every partition
# is complete (which also removes the throttle); 3. kafka-leader-election.sh
# --election-type preferred, so leadership spreads with the replicas; 4.
# kafka-topics.sh --describe: prints the placement. Prints
# "grow: N brokers Ready in S s; P partitions moved in S s" and exits 0, or
# says which step failed. Shrinking is the same steps in the other order
# (move partitions off, then scale down, then kafka-cluster.sh unregister):
# k8s-perf/README.md, "Controllers apart from brokers, and growing the brokers".
# Needs: kubectl; --tools host: java and the jars (compat/install-deps.sh).
set -euo pipefail
# shellcheck source=k8s-perf/lib/k8s.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s.sh"

NAMESPACE="${NAMESPACE:-chronik-perf}"
CONTEXT="${CONTEXT:-}"
TO=""
TOPICS=""
THROTTLE=""
TOOLS=pod
TIMEOUT=600
KAFKA_IMAGE="${KAFKA_IMAGE:-apache/kafka:4.3.1}"
BROKER_SELECTOR=app.kubernetes.io/name=chronik,app.kubernetes.io/component=broker

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
need() { [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || { echo "option $1 needs a value" >&2; usage; }; }
while (($#)); do
  case $1 in
    --to) need "$@"; TO=$2; shift 2 ;;
    --namespace) need "$@"; NAMESPACE=$2; shift 2 ;;
    --context) need "$@"; CONTEXT=$2; shift 2 ;;
    --topics) need "$@"; TOPICS=$2; shift 2 ;;
    --throttle) need "$@"; THROTTLE=$2; shift 2 ;;
    --tools) need "$@"; TOOLS=$2; shift 2 ;;
    --timeout) need "$@"; TIMEOUT=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "unknown option $1" >&2; usage ;;
  esac
done
[[ "$TO" =~ ^[1-9][0-9]*$ ]] || die "--to takes the number of brokers wanted"
[[ -z "$THROTTLE" || "$THROTTLE" =~ ^[1-9][0-9]*$ ]] || die "--throttle takes bytes per second"
[[ "$TOOLS" == pod || "$TOOLS" == host ]] || die "--tools is pod or host"
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout takes seconds"

roles=$(kc_read get statefulset chronik -n "$NAMESPACE" \
  -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="CHRONIK_PROCESS_ROLES")].value}') \
  || die "no StatefulSet chronik in namespace $NAMESPACE"
[[ "$roles" == broker ]] \
  || die "the brokers are also the controllers (process.roles ${roles:-broker,controller}): their set is the quorum's voters and cannot grow; run an overlay with components/controllers (overlays/scale-out)"
dns_suffix=chronik-headless.$NAMESPACE.svc.cluster.local

# -- where Kafka's tools run ------------------------------------------------------------------------
JARS="$REPO_ROOT/compat/java/target/lib"
HOSTS_FILE=""
if [[ "$TOOLS" == host ]]; then
  command -v java > /dev/null || die "--tools host needs java (compat/install-deps.sh installs it)"
  compgen -G "$JARS/kafka-tools-*.jar" > /dev/null \
    || die "--tools host needs Kafka's jars in $JARS (compat/install-deps.sh builds them)"
  HOSTS_FILE=$(mktemp)
  trap 'rm -f "$HOSTS_FILE"' EXIT
fi

# hosts_file - the brokers' stable names -> their pod IPs (for --tools host)
hosts_file() {
  kc_read get pods -n "$NAMESPACE" -l "$BROKER_SELECTOR" \
    -o jsonpath='{range .items[*]}{.status.podIP} {.metadata.name}.'"$dns_suffix"'{"\n"}{end}' > "$HOSTS_FILE"
}

# kafka_tool SCRIPT [ARGS...] - one of Kafka's command-line tools against the
# brokers; stdin becomes /tmp/in.json for the tool (its JSON input files).
kafka_tool() {
  local script=$1 class
  shift
  if [[ "$TOOLS" == host ]]; then
    case $script in
      kafka-reassign-partitions.sh) class=org.apache.kafka.tools.reassign.ReassignPartitionsCommand ;;
      kafka-leader-election.sh) class=org.apache.kafka.tools.LeaderElectionCommand ;;
      kafka-topics.sh) class=org.apache.kafka.tools.TopicCommand ;;
      *) die "no class known for $script" ;;
    esac
    local input bootstrap
    input=$(mktemp)
    cat > "$input"
    bootstrap=$(awk 'NR == 1 {print $1 ":9092"}' "$HOSTS_FILE")
    local rc=0
    java -Djdk.net.hosts.file="$HOSTS_FILE" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -cp "$JARS/*" "$class" --bootstrap-server "$bootstrap" "${@//\/tmp\/in.json/$input}" || rc=$?
    rm -f "$input"
    return $rc
  fi
  # a pod of the namespace, restricted PodSecurity as the namespace enforces,
  # labelled as a harness pod so the brokers' NetworkPolicy admits it
  local overrides
  overrides='{"spec":{"securityContext":{"runAsNonRoot":true,"runAsUser":1000,"seccompProfile":{"type":"RuntimeDefault"}},
    "containers":[{"name":"tools","image":"'"$KAFKA_IMAGE"'","stdin":true,
    "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}}'
  # shellcheck disable=SC2016 # expanded by the pod's sh
  kc run "kafka-tools-$$-$RANDOM" -n "$NAMESPACE" --rm -i --quiet --restart=Never --image "$KAFKA_IMAGE" \
    --labels app.kubernetes.io/component=bench --overrides "$overrides" --pod-running-timeout=5m \
    --command -- sh -c 'cat > /tmp/in.json && exec /opt/kafka/bin/"$0" --bootstrap-server chronik:9092 "$@"' \
    "$script" "$@"
}

# -- 1. the StatefulSet ---------------------------------------------------------------------------------
t0=$(date +%s)
from=$(kc_read get statefulset chronik -n "$NAMESPACE" -o jsonpath='{.spec.replicas}')
log "brokers: $from -> $TO (StatefulSet chronik in $NAMESPACE)"
kc scale statefulset chronik -n "$NAMESPACE" --replicas "$TO" > /dev/null
kc rollout status statefulset chronik -n "$NAMESPACE" --timeout="${TIMEOUT}s" > /dev/null \
  || die "the brokers were not all Ready within ${TIMEOUT} s"
for ((i = 0; i < TIMEOUT; i++)); do
  ready=$(kc_read get statefulset chronik -n "$NAMESPACE" -o jsonpath='{.status.readyReplicas}')
  [[ "$ready" == "$TO" ]] && break
  sleep 1
done
[[ "$ready" == "$TO" ]] || die "$ready of $TO brokers Ready after ${TIMEOUT} s"
scaled_in=$(($(date +%s) - t0))
log "$TO brokers Ready in $scaled_in s"

# -- 2. the partitions --------------------------------------------------------------------------------
[[ "$TOOLS" == host ]] && hosts_file
if [[ -z "$TOPICS" ]]; then
  TOPICS=$(kafka_tool kafka-topics.sh --list --exclude-internal < /dev/null | paste -sd, -) \
    || die "kafka-topics.sh --list failed"
fi
[[ -n "$TOPICS" ]] || die "no topic to move"
brokers=$(seq -s, 1 "$TO")
topics_json=$(tr ',' '\n' <<< "$TOPICS" | sed 's/.*/{"topic": "&"}/' | paste -sd, -)
t1=$(date +%s)
plan=$(kafka_tool kafka-reassign-partitions.sh --generate --topics-to-move-json-file /tmp/in.json \
  --broker-list "$brokers" <<< "{\"version\": 1, \"topics\": [$topics_json]}" \
  | sed -n '/^Proposed partition reassignment configuration/{n;p}') || true
[[ "$plan" == '{"version":1'* ]] || die "kafka-reassign-partitions.sh --generate proposed nothing for $TOPICS"
moved=$(grep -o '"partition":' <<< "$plan" | wc -l)
log "moving $moved partition(s) of $TOPICS over brokers $brokers${THROTTLE:+ (throttle $THROTTLE B/s)}"
kafka_tool kafka-reassign-partitions.sh --execute --reassignment-json-file /tmp/in.json \
  ${THROTTLE:+--throttle "$THROTTLE"} <<< "$plan" > /dev/null \
  || die "kafka-reassign-partitions.sh --execute failed"
done_moving=0
for ((i = 0; i < TIMEOUT; i += 2)); do
  out=$(kafka_tool kafka-reassign-partitions.sh --verify --reassignment-json-file /tmp/in.json <<< "$plan") || true
  if grep -q 'is completed' <<< "$out" && ! grep -q 'still in progress\|failed' <<< "$out"; then
    done_moving=1
    break
  fi
  sleep 2
done
((done_moving)) || die "the move was not complete after ${TIMEOUT} s: $(grep -v completed <<< "$out" | head -n 3 | tr '\n' ' ')"
moved_in=$(($(date +%s) - t1))

# -- 3. leadership follows the preferred replicas --------------------------------------------------
kafka_tool kafka-leader-election.sh --election-type preferred --all-topic-partitions < /dev/null > /dev/null \
  || log "kafka-leader-election.sh: some partition kept its leader (already preferred, or its preferred replica is not in sync yet)"

# -- 4. where everything is ------------------------------------------------------------------------------
kafka_tool kafka-topics.sh --describe --topic "${TOPICS//,/|}" < /dev/null | sed -n 's/^[[:space:]]*\(Topic: .*Partition: .*\)/\1/p' >&2 || true
echo "grow: $TO brokers Ready in $scaled_in s; $moved partitions moved onto brokers $brokers in $moved_in s"
