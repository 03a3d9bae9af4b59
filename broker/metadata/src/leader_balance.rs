//! Automatic preferred-leader elections, as Kafka's
//! `auto.leader.rebalance.enable`: every
//! `leader.imbalance.check.interval.seconds` the controller looks, per
//! broker, at the partitions whose preferred replica (the first) it is; when
//! more than `leader.imbalance.per.broker.percentage` of them are led by
//! another broker, those whose preferred replica is live and in sync get it
//! back as leader (a KIP-460 preferred election each).
//!
//! Owns: `LeaderBalance` (the three settings) and choosing the partitions
//! to elect from an image. Must not: propose anything itself — the
//! controller does, while it leads.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::image::MetadataImage;

/// Kafka's defaults: on, 10 %, every 300 s.
pub const DEFAULT_IMBALANCE_PERCENTAGE: u32 = 10;
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderBalance {
    /// `auto.leader.rebalance.enable`
    pub enabled: bool,
    /// `leader.imbalance.per.broker.percentage`
    pub imbalance_percentage: u32,
    /// `leader.imbalance.check.interval.seconds`
    pub check_interval: Duration,
}

impl Default for LeaderBalance {
    fn default() -> Self {
        LeaderBalance {
            enabled: true,
            imbalance_percentage: DEFAULT_IMBALANCE_PERCENTAGE,
            check_interval: DEFAULT_CHECK_INTERVAL,
        }
    }
}

/// The partitions a rebalance should give back to their preferred replica:
/// those of brokers over the imbalance threshold whose preferred replica is
/// live, in the ISR and not leading; partitions being reassigned are left
/// to their reassignment.
pub fn partitions_to_elect(image: &MetadataImage, imbalance_percentage: u32) -> Vec<(String, i32)> {
    // Per preferred broker: (partitions it is preferred for, not led by it).
    let mut per_broker: BTreeMap<i32, (u32, Vec<(String, i32)>)> = BTreeMap::new();
    for topic in image.topics.values() {
        for p in &topic.partitions {
            let Some(&preferred) = p.replicas.first() else {
                continue;
            };
            let entry = per_broker.entry(preferred).or_default();
            entry.0 += 1;
            if p.leader != preferred {
                entry.1.push((topic.name.clone(), p.partition));
            }
        }
    }
    let mut chosen = Vec::new();
    for (broker, (preferred_for, not_leading)) in per_broker {
        let imbalanced = u64::try_from(not_leading.len()).unwrap_or(u64::MAX) * 100
            > u64::from(imbalance_percentage) * u64::from(preferred_for);
        if !imbalanced || !image.live_brokers().any(|b| b.node_id == broker) {
            continue;
        }
        chosen.extend(not_leading.into_iter().filter(|(topic, index)| {
            image
                .partition(topic, *index)
                .is_some_and(|p| p.isr.contains(&broker) && !p.is_reassigning())
        }));
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{apply, Command};
    use crate::test_images::{image_with_topic, register};

    fn image(assignments: Vec<Vec<i32>>) -> MetadataImage {
        image_with_topic(3, 3, assignments)
    }

    #[test]
    fn a_returned_broker_gets_its_leaderships_back_over_the_threshold() {
        let mut image = image((0..10).map(|i| vec![1 + i % 3, 1 + (i + 1) % 3]).collect());
        assert!(
            partitions_to_elect(&image, 10).is_empty(),
            "balanced at creation"
        );
        apply(&mut image, &Command::FenceBroker { node_id: 1 });
        assert!(
            partitions_to_elect(&image, 10).is_empty(),
            "a fenced broker gets nothing"
        );
        register(&mut image, 1);
        // Back, but out of the ISRs until its leaders let it in again.
        assert!(partitions_to_elect(&image, 10).is_empty());
        for topic in image.topics.values_mut() {
            for p in &mut topic.partitions {
                if !p.isr.contains(&1) && p.replicas.contains(&1) {
                    p.isr.push(1);
                }
            }
        }
        let chosen = partitions_to_elect(&image, 10);
        // Broker 1 is preferred for partitions 0, 3, 6 and 9 and leads none.
        assert_eq!(chosen, [0, 3, 6, 9].map(|p| ("t".to_string(), p)).to_vec());
        // Under the threshold (1 of 4 = 25 % is not above 30 %): nothing.
        for topic in image.topics.values_mut() {
            for p in topic.partitions.iter_mut().filter(|p| p.partition != 9) {
                if p.replicas[0] == 1 {
                    p.leader = 1;
                }
            }
        }
        assert!(partitions_to_elect(&image, 30).is_empty());
        assert_eq!(partitions_to_elect(&image, 10), vec![("t".to_string(), 9)]);
    }
}
