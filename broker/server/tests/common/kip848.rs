//! A model KIP-848 consumer speaking ConsumerGroupHeartbeat over
//! `kafka_client`: it owns exactly what it was last assigned, of one topic.

use std::collections::BTreeSet;

use anyhow::{ensure, Result};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::kafka_client::Client;

pub fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

/// A model consumer: it owns exactly what it was last assigned.
pub struct Member {
    pub group: String,
    pub topic: String,
    pub id: String,
    pub epoch: i32,
    pub owned: BTreeSet<i32>,
}

impl Member {
    pub fn new(group: &str, topic: &str) -> Member {
        Member {
            group: group.to_string(),
            topic: topic.to_string(),
            id: Uuid::new_v4().to_string(),
            epoch: 0,
            owned: BTreeSet::new(),
        }
    }

    pub fn request(&self, topic_id: Uuid) -> ConsumerGroupHeartbeatRequest {
        let owned = TopicPartitions::default()
            .with_topic_id(topic_id)
            .with_partitions(self.owned.iter().copied().collect());
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group_id(&self.group))
            .with_member_id(StrBytes::from_string(self.id.clone()))
            .with_member_epoch(self.epoch)
            .with_rebalance_timeout_ms(if self.epoch == 0 { 30_000 } else { -1 })
            .with_subscribed_topic_names(
                (self.epoch == 0)
                    .then(|| vec![TopicName(StrBytes::from_string(self.topic.clone()))]),
            )
            .with_topic_partitions(Some(if self.owned.is_empty() {
                Vec::new()
            } else {
                vec![owned]
            }))
    }

    /// One heartbeat; applies the assignment it gets.
    pub fn beat(
        &mut self,
        client: &mut Client,
        topic_id: Uuid,
    ) -> Result<ConsumerGroupHeartbeatResponse> {
        let r = self.try_beat(client, topic_id)?;
        ensure!(
            r.error_code == 0,
            "{} heartbeat: error {}",
            self.id,
            r.error_code
        );
        Ok(r)
    }

    /// One heartbeat, whatever it answers; a successful one's epoch and
    /// assignment are applied.
    pub fn try_beat(
        &mut self,
        client: &mut Client,
        topic_id: Uuid,
    ) -> Result<ConsumerGroupHeartbeatResponse> {
        let r = client.send(&self.request(topic_id), 1)?;
        if r.error_code != 0 {
            return Ok(r);
        }
        self.epoch = r.member_epoch;
        if let Some(a) = &r.assignment {
            self.owned = a
                .topic_partitions
                .iter()
                .filter(|tp| tp.topic_id == topic_id)
                .flat_map(|tp| tp.partitions.iter().copied())
                .collect();
        }
        Ok(r)
    }
}
