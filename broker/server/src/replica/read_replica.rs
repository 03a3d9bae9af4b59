//! KIP-392 follower fetching: which replica a consumer that names its rack
//! (`client.rack`, Fetch v11+ `rack_id`) should read a partition from, as
//! Kafka's `replica.selector.class`
//! `org.apache.kafka.common.replica.RackAwareReplicaSelector` chooses it.
//! The leader answers with the choice in `preferred_read_replica`; the
//! consumer then fetches from that follower, which serves it up to its
//! own high watermark, and goes back to the leader on an error.
//!
//! Owns: the `ReplicaSelector` setting and the choice among candidates.
//! Must not: read logs or metadata itself — the fetch handler gathers the
//! candidates (the leader and the in-sync followers whose logs hold the
//! fetch offset) with their racks and log end offsets.

/// Kafka's `replica.selector.class` values Chronik knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaSelector {
    /// `RackAwareReplicaSelector`: a replica in the consumer's rack, the
    /// leader when it is one of them or when none is.
    RackAware,
}

const RACK_AWARE_CLASS: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

impl ReplicaSelector {
    /// Parses Kafka's class name (or its short name).
    pub fn from_class_name(name: &str) -> Result<Self, String> {
        match name {
            RACK_AWARE_CLASS | "RackAwareReplicaSelector" => Ok(ReplicaSelector::RackAware),
            other => Err(format!(
                "unknown replica.selector.class {other:?}: Chronik has {RACK_AWARE_CLASS}"
            )),
        }
    }
}

/// A replica that could serve the consumer's fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub broker: i32,
    pub rack: Option<&'a str>,
    pub log_end_offset: i64,
}

/// The replica `client_rack` should read from, when it is not the leader
/// (`None`: the leader serves). Among the candidates in the consumer's
/// rack, the leader wins if it is one; otherwise the one with the highest
/// log end offset (the lowest broker id on a tie, so the choice is stable).
pub fn preferred_read_replica(
    selector: ReplicaSelector,
    client_rack: &str,
    leader: &Candidate<'_>,
    followers: &[Candidate<'_>],
) -> Option<i32> {
    match selector {
        ReplicaSelector::RackAware => {
            if client_rack.is_empty() || leader.rack == Some(client_rack) {
                return None;
            }
            followers
                .iter()
                .filter(|c| c.rack == Some(client_rack) && c.broker != leader.broker)
                .max_by(|a, b| {
                    a.log_end_offset
                        .cmp(&b.log_end_offset)
                        .then(b.broker.cmp(&a.broker))
                })
                .map(|c| c.broker)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(broker: i32, rack: &str, log_end_offset: i64) -> Candidate<'_> {
        Candidate {
            broker,
            rack: (!rack.is_empty()).then_some(rack),
            log_end_offset,
        }
    }

    #[test]
    fn a_follower_in_the_consumers_rack_is_preferred_unless_the_leader_is_there() {
        let leader = candidate(1, "a", 100);
        let followers = [candidate(2, "b", 90), candidate(3, "c", 100)];
        let choose =
            |rack| preferred_read_replica(ReplicaSelector::RackAware, rack, &leader, &followers);
        assert_eq!(choose("b"), Some(2));
        assert_eq!(choose("c"), Some(3));
        assert_eq!(choose("a"), None, "the leader is in the consumer's rack");
        assert_eq!(choose("z"), None, "no replica in that rack: the leader");
        assert_eq!(choose(""), None, "no client.rack: the leader");
    }

    #[test]
    fn among_several_in_the_rack_the_most_caught_up_then_the_lowest_id() {
        let leader = candidate(1, "a", 100);
        let followers = [
            candidate(4, "b", 80),
            candidate(3, "b", 95),
            candidate(2, "b", 95),
            candidate(5, "", 100),
        ];
        assert_eq!(
            preferred_read_replica(ReplicaSelector::RackAware, "b", &leader, &followers),
            Some(2)
        );
    }

    #[test]
    fn kafkas_class_names_parse_and_others_are_refused() {
        assert_eq!(
            ReplicaSelector::from_class_name(RACK_AWARE_CLASS),
            Ok(ReplicaSelector::RackAware)
        );
        assert!(ReplicaSelector::from_class_name("RackAwareReplicaSelector").is_ok());
        assert!(ReplicaSelector::from_class_name("com.example.Mine").is_err());
    }
}
