//! Applying the metadata quorum's image to this broker's replicas: a local
//! log per topic with the controller's topic id (a stale one replaced,
//! partitions added, config overrides followed), every partition's role
//! from its image (leader listeners told), removed topics deleted, the
//! fetchers for the leaders followed; the follow loop that does it for
//! every new image, and the data directory's comeback as a follower.
//!
//! Owns: that application, one at a time. Must not: decide roles (the
//! controller's image does) or write records.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use chronik_metadata::{MetadataImage, TopicImage};
use tracing::{info, warn};

use super::fetchers::FollowedPartitions;
use super::{Replica, ReplicaManager, Transition, MIN_INSYNC_REPLICAS};

impl ReplicaManager {
    /// Applies `image`: local logs for its topics, roles for its partitions,
    /// fetchers for the leaders followed.
    pub fn sync(self: &Arc<Self>, image: &MetadataImage) {
        let _one_at_a_time = self.sync_lock.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        let mut followed: BTreeMap<i32, FollowedPartitions> = BTreeMap::new();
        for topic in image.topics.values() {
            let local = match self.ensure_local_topic(topic) {
                Some(t) => t,
                None => continue,
            };
            let config = self.config_for(topic);
            for p in &topic.partitions {
                let Some(log) = local.partition(p.partition) else {
                    continue;
                };
                let replica = {
                    let mut map = self.replicas.write().unwrap_or_else(|e| e.into_inner());
                    map.entry(topic.name.clone())
                        .or_default()
                        .entry(p.partition)
                        .or_insert_with(|| Arc::new(Replica::open(&topic.name, log.clone())))
                        .clone()
                };
                let (transition, actions) = replica.apply(p, self.node_id, config, now);
                if transition == Transition::BecameLeader {
                    self.stats.leader_changes.fetch_add(1, Ordering::Relaxed);
                    for listener in self
                        .leader_listeners
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .iter()
                    {
                        listener(&replica);
                    }
                }
                self.perform(&replica, actions);
                if let Some((leader, _)) = replica.follower_step() {
                    followed
                        .entry(leader)
                        .or_default()
                        .insert((topic.name.clone(), p.partition));
                }
            }
        }
        self.remove_deleted_topics(image);
        self.fetchers.ensure(self, &followed);
        // Roles may have changed anywhere: parked requests re-check.
        self.purgatory.wake_all();
    }

    fn ensure_local_topic(&self, topic: &TopicImage) -> Option<Arc<chronik_log::TopicLog>> {
        let log_configs: BTreeMap<String, String> = topic
            .configs
            .iter()
            .filter(|(k, _)| k.as_str() != MIN_INSYNC_REPLICAS)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let partitions = u32::try_from(topic.partitions.len()).unwrap_or(0);
        if let Some(t) = self.log.topic(&topic.name) {
            if t.topic_id == topic.topic_id {
                return Some(self.follow_topic_changes(t, partitions, log_configs));
            }
            // Same name, different id: the topic was deleted and re-created
            // while this broker was away.
            warn!(
                topic = topic.name,
                "local topic has a stale id; replacing it"
            );
            self.forget_topic(&topic.name);
            if let Err(e) = self.log.delete_topic(&topic.name) {
                warn!(topic = topic.name, error = %e, "cannot delete stale local topic");
                return None;
            }
        }
        match self
            .log
            .create_topic_with_id(&topic.name, partitions, log_configs, topic.topic_id)
        {
            Ok(t) => Some(t),
            Err(e) => {
                warn!(topic = topic.name, error = %e, "cannot create local log for topic");
                None
            }
        }
    }

    /// Brings an existing local topic to the quorum's partition count
    /// (CreatePartitions) and config overrides (AlterConfigs). A failure is
    /// logged and the local topic kept as it is; the next image retries.
    fn follow_topic_changes(
        &self,
        local: Arc<chronik_log::TopicLog>,
        partitions: u32,
        log_configs: BTreeMap<String, String>,
    ) -> Arc<chronik_log::TopicLog> {
        let mut local = local;
        if (local.partition_count() as u64) < u64::from(partitions) {
            match self.log.add_partitions(&local.name, partitions) {
                Ok(grown) => local = grown,
                Err(e) => {
                    warn!(topic = local.name, error = %e, "cannot add partitions to local log")
                }
            }
        }
        if local.overrides != log_configs {
            match self.log.set_topic_overrides(&local.name, log_configs) {
                Ok(altered) => local = altered,
                Err(e) => {
                    warn!(topic = local.name, error = %e, "cannot apply altered topic configs")
                }
            }
        }
        local
    }

    fn forget_topic(&self, name: &str) {
        let mut map = self.replicas.write().unwrap_or_else(|e| e.into_inner());
        map.remove(name);
    }

    fn remove_deleted_topics(&self, image: &MetadataImage) {
        for local in self.log.topics() {
            if !image.topics.contains_key(&local.name) {
                info!(
                    topic = local.name,
                    "topic deleted in the cluster; removing local log"
                );
                self.forget_topic(&local.name);
                if let Err(e) = self.log.delete_topic(&local.name) {
                    warn!(topic = local.name, error = %e, "cannot delete local topic");
                }
            }
        }
    }

    /// After the data directory was reopened (its logs cut back): every
    /// replica forgets its role and takes it again from the latest image,
    /// a follower from the start (OffsetForLeaderEpoch, truncation, fetch)
    /// with fresh fetchers.
    pub async fn restart_as_follower(self: &Arc<Self>) {
        self.fetchers.abort_all();
        for replica in self.all_replicas() {
            replica.forget_role();
        }
        self.apply_latest().await;
    }

    /// Applies the latest image now, before answering a request that just
    /// changed it (CreateTopics, DeleteTopics, auto-creation): the client's
    /// next request finds the local logs and roles in place.
    pub async fn apply_latest(self: &Arc<Self>) {
        let image = self.cluster.image();
        let manager = self.clone();
        let _ = tokio::task::spawn_blocking(move || manager.sync(&image)).await;
    }

    /// Follows the metadata quorum until the process ends; also runs the
    /// ISR-shrink tick and the data directory's watch (`log_dir`).
    pub fn spawn(self: &Arc<Self>) {
        super::log_dir::spawn(self.clone());
        let manager = self.clone();
        tokio::spawn(async move {
            let mut images = manager.cluster.subscribe();
            loop {
                let image = images.borrow_and_update().clone();
                let m = manager.clone();
                // Topic creation touches the file system.
                let _ = tokio::task::spawn_blocking(move || m.sync(&image)).await;
                if images.changed().await.is_err() {
                    return;
                }
            }
        });
        self.spawn_isr_tick();
    }
}
