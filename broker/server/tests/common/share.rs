//! A model share-group member (KIP-932) over `kafka_client`: it joins with
//! ShareGroupHeartbeat, fetches with ShareFetch v1 in its share session
//! (epochs 0, 1, 2, ...) and acknowledges with ShareAcknowledge v1, and
//! reports what the broker answered — the tests decide what is right.

use anyhow::{Context, Result};
use kafka_protocol::messages::share_acknowledge_request::{AcknowledgePartition, AcknowledgeTopic};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::kafka_client::Client;

/// Kafka's acknowledge types.
pub const GAP: i8 = 0;
pub const ACCEPT: i8 = 1;
pub const RELEASE: i8 = 2;
pub const REJECT: i8 = 3;

/// One acquired run: (first offset, last offset, delivery count).
pub type Run = (i64, i64, i16);

/// What one ShareFetch answered for partition 0 of the member's topic.
#[derive(Debug, Default)]
pub struct Fetched {
    pub error: i16,
    pub partition_error: i16,
    pub ack_error: i16,
    pub runs: Vec<Run>,
}

impl Fetched {
    /// Every acquired offset.
    pub fn offsets(&self) -> Vec<i64> {
        self.runs.iter().flat_map(|(f, l, _)| *f..=*l).collect()
    }
}

pub struct ShareMember {
    pub group: String,
    pub topic: String,
    pub topic_id: Uuid,
    pub id: String,
    pub epoch: i32,
    /// The share session epoch the next ShareFetch carries.
    pub session_epoch: i32,
}

impl ShareMember {
    pub fn new(group: &str, topic: &str, topic_id: Uuid) -> ShareMember {
        ShareMember {
            group: group.to_string(),
            topic: topic.to_string(),
            topic_id,
            id: Uuid::new_v4().to_string(),
            epoch: 0,
            session_epoch: 0,
        }
    }

    /// One ShareGroupHeartbeat (a join at epoch 0); takes the epoch given.
    pub fn heartbeat(&mut self, client: &mut Client) -> Result<ShareGroupHeartbeatResponse> {
        let request = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_member_id(StrBytes::from_string(self.id.clone()))
            .with_member_epoch(self.epoch)
            .with_subscribed_topic_names(
                (self.epoch == 0)
                    .then(|| vec![TopicName(StrBytes::from_string(self.topic.clone()))]),
            );
        let response = client.send(&request, 1).context("ShareGroupHeartbeat")?;
        if response.error_code == 0 {
            self.epoch = response.member_epoch;
        }
        Ok(response)
    }

    /// A ShareFetch of partition 0 carrying `acks`; one closing the session
    /// (epoch -1) names the partition only to acknowledge, as Kafka requires.
    fn fetch_request(&self, acks: &[(i64, i64, i8)], max_wait_ms: i32) -> ShareFetchRequest {
        let topics = if self.session_epoch == -1 && acks.is_empty() {
            Vec::new()
        } else {
            vec![FetchTopic::default()
                .with_topic_id(self.topic_id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(
                        acks.iter()
                            .map(|(f, l, t)| {
                                AcknowledgementBatch::default()
                                    .with_first_offset(*f)
                                    .with_last_offset(*l)
                                    .with_acknowledge_types(vec![*t])
                            })
                            .collect(),
                    )])]
        };
        ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_string(self.group.clone()))))
            .with_member_id(Some(StrBytes::from_string(self.id.clone())))
            .with_share_session_epoch(self.session_epoch)
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(500)
            .with_batch_size(500)
            .with_topics(topics)
    }

    /// One ShareFetch of partition 0 carrying `acks`; the session epoch
    /// moves on when the broker took the request.
    pub fn fetch(
        &mut self,
        client: &mut Client,
        acks: &[(i64, i64, i8)],
        max_wait_ms: i32,
    ) -> Result<Fetched> {
        let request = self.fetch_request(acks, max_wait_ms);
        let response = client.send(&request, 1).context("ShareFetch")?;
        let fetched = read_fetch(&response);
        if fetched.error == 0 {
            self.session_epoch = if self.session_epoch == -1 {
                0
            } else {
                self.session_epoch + 1
            };
        }
        Ok(fetched)
    }

    /// A ShareFetch with a session epoch of the test's choosing.
    pub fn fetch_at_epoch(
        &mut self,
        client: &mut Client,
        epoch: i32,
        acks: &[(i64, i64, i8)],
    ) -> Result<Fetched> {
        let saved = self.session_epoch;
        self.session_epoch = epoch;
        let response = client
            .send(&self.fetch_request(acks, 0), 1)
            .context("ShareFetch")?;
        self.session_epoch = saved;
        Ok(read_fetch(&response))
    }

    /// One ShareAcknowledge of partition 0: (top-level error, partition error).
    pub fn acknowledge(
        &mut self,
        client: &mut Client,
        acks: &[(i64, i64, Vec<i8>)],
    ) -> Result<(i16, i16)> {
        let request = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_string(self.group.clone()))))
            .with_member_id(Some(StrBytes::from_string(self.id.clone())))
            .with_share_session_epoch(self.session_epoch)
            .with_topics(vec![AcknowledgeTopic::default().with_topic_id(self.topic_id).with_partitions(vec![
                AcknowledgePartition::default().with_partition_index(0).with_acknowledgement_batches(
                    acks.iter()
                        .map(|(f, l, t)| {
                            kafka_protocol::messages::share_acknowledge_request::AcknowledgementBatch::default()
                                .with_first_offset(*f)
                                .with_last_offset(*l)
                                .with_acknowledge_types(t.clone())
                        })
                        .collect(),
                ),
            ])]);
        let response: ShareAcknowledgeResponse =
            client.send(&request, 1).context("ShareAcknowledge")?;
        if response.error_code == 0 && self.session_epoch > 0 {
            self.session_epoch += 1;
        }
        let partition = response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .next()
            .unwrap_or(0);
        Ok((response.error_code, partition))
    }

    /// Closes the share session (ShareFetch at epoch -1, acknowledging `acks`).
    pub fn close(&mut self, client: &mut Client, acks: &[(i64, i64, i8)]) -> Result<Fetched> {
        self.session_epoch = -1;
        let fetched = self.fetch(client, acks, 0)?;
        self.session_epoch = 0;
        Ok(fetched)
    }

    /// Fetches until something is acquired (bounded by `tries`); a
    /// partition error (a coordinator or leader moving) is retried after
    /// 200 ms and printed, a top-level error ends it.
    pub fn fetch_some(&mut self, client: &mut Client, tries: usize) -> Result<Fetched> {
        let mut last = Fetched::default();
        for _ in 0..tries {
            last = self.fetch(client, &[], 500)?;
            if !last.runs.is_empty() || last.error != 0 {
                break;
            }
            if last.partition_error != 0 {
                println!(
                    "ShareFetch partition error {}, retrying",
                    last.partition_error
                );
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
        Ok(last)
    }
}

fn read_fetch(response: &ShareFetchResponse) -> Fetched {
    let mut fetched = Fetched {
        error: response.error_code,
        ..Fetched::default()
    };
    for p in response.responses.iter().flat_map(|t| &t.partitions) {
        fetched.partition_error = fetched.partition_error.max(p.error_code);
        fetched.ack_error = fetched.ack_error.max(p.acknowledge_error_code);
        fetched.runs.extend(
            p.acquired_records
                .iter()
                .map(|r| (r.first_offset, r.last_offset, r.delivery_count)),
        );
    }
    fetched
}
