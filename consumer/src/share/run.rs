//! A share-mode member's run: set the group configs, join, fetch from every
//! leader of the assigned partitions, checkpoint the report before any
//! acknowledgement leaves, publish the live figures, and at the end close
//! the sessions, leave the group and read the watermarks.
//!
//! Owns: the manager loop on its own thread and current-thread runtime
//! (one fetch task per leader, the membership task), the checkpoint
//! cadence (a report written every `checkpoint_interval` while something
//! changed; `Shared::durable` then releases the acknowledgements it
//! covers), the idle stop and the shutdown order (fetch sessions closed,
//! then the group left). Must not: build or write report JSON itself (the
//! caller's `WriteReport` does) or decide verdicts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use chronik_harness::histogram::HlogWriter;
use chronik_harness::procfs::{self, Task};
use chronik_harness::tally::Tally;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::metadata::{bootstrap_list, metadata, set_group_configs, Cluster};
use super::state::{Member, Shared, State};
use super::tally::{MemberSummary, ShareTally};
use super::{fetch, heartbeat};
use crate::config::Config;
use crate::consume::{final_watermarks, Consumed, LatencyIntervals, StopReason};
use crate::live::{Live, PartitionSummary};
use crate::Error;

const TICK: Duration = Duration::from_millis(50);
const PUBLISH_INTERVAL: Duration = Duration::from_millis(250);
/// Least time between two metadata refreshes.
const REFRESH_INTERVAL: Duration = Duration::from_millis(500);
/// How long setting the group configs is retried (the group coordinator
/// may still be starting).
const CONFIG_DEADLINE: Duration = Duration::from_secs(30);
/// Bounds of the shutdown: fetch sessions closed, then the group left.
const FETCH_STOP_WAIT: Duration = Duration::from_secs(15);
const LEAVE_WAIT: Duration = Duration::from_secs(35);

/// Writes the report (a checkpoint, or the final one) of a tally snapshot.
pub type WriteReport = Box<dyn Fn(Tally, ShareTally) -> anyhow::Result<()> + Send>;

/// What a share-mode run returns beside the usual `Consumed`.
#[derive(Debug)]
pub struct ShareConsumed {
    pub consumed: Consumed,
    pub share: ShareTally,
    pub member_id: String,
    /// Fetch and membership errors by kind.
    pub errors: BTreeMap<String, u64>,
}

/// A member id as Kafka's clients make one: a random UUID, base64url.
pub fn new_member_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Uuid::new_v4().as_bytes())
}

/// The group configs a run sets before joining: `--share-config` pairs,
/// plus `share.auto.offset.reset=earliest` for `--from-beginning`.
pub fn group_configs(config: &Config) -> Vec<(String, String)> {
    let mut configs = config.share_configs.clone();
    if config.from_beginning && !configs.iter().any(|(k, _)| k == "share.auto.offset.reset") {
        configs.push(("share.auto.offset.reset".into(), "earliest".into()));
    }
    configs
}

/// Runs one share-group member on the calling thread until `stop` or idle.
pub fn run(
    config: &Config,
    live: &Live,
    stop: &AtomicBool,
    hlog: Option<HlogWriter>,
    write: Option<WriteReport>,
) -> Result<ShareConsumed, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Share(format!("runtime: {e}")))?;
    runtime.block_on(manage(config, live, stop, hlog, write))
}

struct Leader {
    want: watch::Sender<Vec<(Uuid, i32)>>,
    task: JoinHandle<()>,
}

async fn manage(
    config: &Config,
    live: &Live,
    stop: &AtomicBool,
    hlog: Option<HlogWriter>,
    write: Option<WriteReport>,
) -> Result<ShareConsumed, Error> {
    let group = config.share_group.clone().unwrap_or_default();
    let member = Member {
        group: group.clone(),
        member_id: new_member_id(),
        client_id: config.client_id.clone(),
        topics: config.topics.clone(),
        bootstrap: bootstrap_list(&config.bootstrap_servers),
    };
    tracing::info!(group = %member.group, member = %member.member_id, "share-group member starting");
    let shared = Arc::new(Shared {
        member: member.clone(),
        state: Mutex::new(State::new()),
        durable: AtomicU64::new(if write.is_some() { 0 } else { u64::MAX }),
        stop_fetch: AtomicBool::new(false),
        stop_membership: AtomicBool::new(false),
        refresh_metadata: AtomicBool::new(true),
    });

    // group configs first (e.g. share.auto.offset.reset=earliest)
    let configs = group_configs(config);
    let deadline = Instant::now() + CONFIG_DEADLINE;
    loop {
        match set_group_configs(&member.bootstrap, &member.client_id, &group, &configs).await {
            Ok(()) => {
                if !configs.is_empty() {
                    tracing::info!(?configs, "share group configs set");
                }
                break;
            }
            Err(e) if Instant::now() < deadline && !stop.load(Ordering::Relaxed) => {
                tracing::warn!(error = %format!("{e:#}"), "setting share group configs failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(Error::Share(format!("setting group configs: {e:#}"))),
        }
    }

    let membership = tokio::spawn(heartbeat::membership(shared.clone()));
    let started = Instant::now();
    let mut leaders: BTreeMap<i32, Leader> = BTreeMap::new();
    let mut cluster = Cluster::default();
    let mut seen_version = u64::MAX;
    let mut last_refresh: Option<Instant> = None;
    let mut next_publish = started;
    let mut next_checkpoint = started + config.checkpoint_interval;
    let mut intervals = LatencyIntervals::new(hlog, started);
    let mut next_hlog = started + config.hlog_interval;
    let mut last_progress = started;
    let mut last_consumed = 0u64;

    let reason = loop {
        if stop.load(Ordering::Relaxed) {
            break StopReason::Signal;
        }
        let now = Instant::now();
        let (version, assignment) = {
            let st = shared.lock();
            (st.assignment_version, st.assignment.clone())
        };
        let refresh = shared.refresh_metadata.load(Ordering::Relaxed);
        if (version != seen_version || refresh)
            && last_refresh.is_none_or(|t| now.duration_since(t) >= REFRESH_INTERVAL)
        {
            if version != seen_version {
                last_progress = now;
            }
            last_refresh = Some(now);
            let needs_metadata = refresh
                || assignment
                    .iter()
                    .any(|(id, p)| cluster.leader_of(*id, *p).is_none());
            if needs_metadata {
                match metadata(&member.bootstrap, &member.client_id, &member.topics).await {
                    Ok(c) => {
                        cluster = c;
                        shared.refresh_metadata.store(false, Ordering::Relaxed);
                        let mut st = shared.lock();
                        for (name, (id, _)) in &cluster.topics {
                            st.names.insert(*id, name.clone());
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "metadata failed; retrying")
                    }
                }
            }
            let mut by_leader: BTreeMap<i32, Vec<(Uuid, i32)>> = BTreeMap::new();
            let mut unplaced = false;
            for (id, p) in &assignment {
                match cluster.leader_of(*id, *p) {
                    Some(l) => by_leader.entry(l).or_default().push((*id, *p)),
                    None => unplaced = true,
                }
            }
            if unplaced {
                shared.refresh_metadata.store(true, Ordering::Relaxed);
            }
            for (node, parts) in &by_leader {
                if !leaders.contains_key(node) {
                    let Some(addr) = cluster.brokers.get(node).cloned() else {
                        shared.refresh_metadata.store(true, Ordering::Relaxed);
                        continue;
                    };
                    let (tx, rx) = watch::channel(Vec::new());
                    let task = tokio::spawn(fetch::leader_loop(shared.clone(), *node, addr, rx));
                    leaders.insert(*node, Leader { want: tx, task });
                }
                if let Some(l) = leaders.get(node) {
                    l.want.send_replace(parts.clone());
                }
            }
            for (node, l) in &leaders {
                if !by_leader.contains_key(node) {
                    l.want.send_replace(Vec::new());
                }
            }
            if !unplaced && !shared.refresh_metadata.load(Ordering::Relaxed) {
                seen_version = version;
            }
        }
        if let Some(w) = &write {
            if now >= next_checkpoint {
                // a checkpoint costs more as the sets grow (and on a busy
                // machine): at most a fifth of the time goes to them
                let took = checkpoint(&shared, w, "checkpoint", false);
                next_checkpoint = Instant::now() + config.checkpoint_interval.max(took * 4);
            }
        }
        if now >= next_publish {
            publish(&shared, live, started);
            next_publish = now + PUBLISH_INTERVAL;
        }
        if now >= next_hlog {
            let interval = shared.lock().verifier.take_latency_interval();
            intervals.close_with(interval, live, now);
            next_hlog = now + config.hlog_interval;
        }
        let consumed = shared.lock().verifier.counts().consumed;
        if consumed != last_consumed {
            last_consumed = consumed;
            last_progress = now;
        }
        if config
            .until_idle
            .is_some_and(|idle| now.duration_since(last_progress) >= idle)
        {
            break StopReason::Idle;
        }
        tokio::time::sleep(TICK).await;
    };

    live.set_state("stopping");
    tracing::info!(
        ?reason,
        "stopping: closing share sessions, then leaving the group"
    );
    shared.stop_fetch.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + FETCH_STOP_WAIT;
    for (node, l) in leaders {
        let mut task = l.task;
        // checkpoints while the loops wait for their last acknowledgements
        loop {
            if let Some(w) = &write {
                let _ = checkpoint(&shared, w, "checkpoint", false);
            }
            match tokio::time::timeout(Duration::from_millis(100), &mut task).await {
                Ok(_) => break,
                Err(_) if Instant::now() >= deadline => {
                    tracing::warn!(node, "share fetch loop did not stop in time");
                    task.abort();
                    break;
                }
                Err(_) => {}
            }
        }
    }
    shared.stop_membership.store(true, Ordering::Relaxed);
    if tokio::time::timeout(LEAVE_WAIT, membership).await.is_err() {
        tracing::warn!("leaving the share group did not finish in time");
    }
    let interval = shared.lock().verifier.take_latency_interval();
    intervals.close_with(interval, live, Instant::now());
    intervals.finish()?;

    let mut st = std::mem::take(&mut *shared.lock());
    final_watermarks(config, &config.topics, &mut st.verifier);
    publish_state(&st, live, started, &shared.member);
    let active = st.first_delivery.map_or(Duration::ZERO, |first| {
        st.last_delivery
            .unwrap_or(first)
            .saturating_duration_since(first)
    });
    let stop_reason = match reason {
        StopReason::Signal => "signal",
        StopReason::Idle => "idle",
    };
    let mut share = st.share;
    share.members = vec![member_summary(
        &shared.member,
        &share,
        stop_reason,
        (st.checkpoints, st.checkpoint_secs),
    )];
    if st.checkpoints > 0 {
        tracing::info!(
            checkpoints = st.checkpoints,
            secs = st.checkpoint_secs,
            "report checkpoints written"
        );
    }
    Ok(ShareConsumed {
        consumed: Consumed {
            verifier: st.verifier,
            stop: reason,
            rebalances: st.rebalances,
            rebalance_events: st.rebalance_events,
            active,
            poll_thread_cpu_secs: procfs::cpu_secs(Task::ThisThread),
        },
        share,
        member_id: shared.member.member_id.clone(),
        errors: st.errors,
    })
}

fn member_summary(
    member: &Member,
    share: &ShareTally,
    stop_reason: &str,
    (checkpoints, checkpoint_secs): (u64, f64),
) -> MemberSummary {
    let (accepted, unconfirmed) = share.partitions.values().fold((0, 0), |(a, u), s| {
        (a + s.accepted.len(), u + s.unconfirmed.len())
    });
    MemberSummary {
        client_id: member.client_id.clone(),
        member_id: member.member_id.clone(),
        stop_reason: stop_reason.to_string(),
        written_at_us: chronik_harness::now_us(),
        deliveries: share.by_delivery_count.values().sum(),
        accepted,
        unconfirmed,
        checkpoints,
        checkpoint_secs,
    }
}

/// Writes a report of the current state (when something changed, or
/// always with `force`), then marks its generation durable. Returns how
/// long it took.
fn checkpoint(shared: &Shared, write: &WriteReport, stop_reason: &str, force: bool) -> Duration {
    let started = Instant::now();
    let (generation, tally, mut share, stats) = {
        let mut st = shared.lock();
        if !st.dirty && !force {
            return Duration::ZERO;
        }
        st.dirty = false;
        let generation = st.generation;
        st.generation += 1;
        (
            generation,
            Tally::from_verifier(&st.verifier),
            st.share.clone(),
            (st.checkpoints + 1, st.checkpoint_secs),
        )
    };
    share.members = vec![member_summary(&shared.member, &share, stop_reason, stats)];
    let result = write(tally, share);
    let took = started.elapsed();
    let mut st = shared.lock();
    match result {
        Ok(()) => {
            shared.durable.store(generation, Ordering::Relaxed);
            st.checkpoints += 1;
            st.checkpoint_secs += took.as_secs_f64();
        }
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "writing the checkpoint failed; acknowledgements held");
            st.dirty = true;
        }
    }
    took
}

fn publish(shared: &Shared, live: &Live, started: Instant) {
    let st = shared.lock();
    publish_state(&st, live, started, &shared.member);
}

fn publish_state(st: &State, live: &Live, started: Instant, member: &Member) {
    let assigned_keys: BTreeSet<(String, i32)> = st
        .assignment
        .iter()
        .filter_map(|(id, p)| st.names.get(id).map(|n| (n.clone(), *p)))
        .collect();
    let summaries = assigned_keys
        .iter()
        .map(|(topic, partition)| {
            let position = st
                .verifier
                .partitions()
                .iter()
                .find(|p| &p.topic == topic && p.partition == *partition)
                .and_then(|p| p.position());
            PartitionSummary {
                topic: topic.clone(),
                partition: *partition,
                position,
                high_watermark: None,
                lag: None,
            }
        })
        .collect();
    let gaps = st
        .verifier
        .producers()
        .iter()
        .map(|p| p.seen.gap_count())
        .sum();
    live.publish(
        st.verifier.counts(),
        gaps,
        st.verifier.producers().len() as u64,
        st.rebalances,
        summaries,
        started.elapsed().as_secs_f64(),
    );
    let (accepted, unconfirmed) = st.share.partitions.values().fold((0, 0), |(a, u), s| {
        (a + s.accepted.len(), u + s.unconfirmed.len())
    });
    let redeliveries: u64 = st
        .share
        .by_delivery_count
        .iter()
        .filter(|(k, _)| **k > 1)
        .map(|(_, v)| *v)
        .sum();
    live.set_share(serde_json::json!({
        "group": member.group,
        "memberId": member.member_id,
        "memberEpoch": st.member_epoch,
        "accepted": accepted,
        "unconfirmed": unconfirmed,
        "deliveries": st.share.by_delivery_count.values().sum::<u64>(),
        "redeliveries": redeliveries,
        "lastDeliveryAgoSecs": st.last_delivery.map(|t| t.elapsed().as_secs_f64()),
        "errors": st.errors,
    }));
}
