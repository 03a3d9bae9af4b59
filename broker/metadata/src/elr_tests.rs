//! KIP-966 through `command::apply`: a topic with min.insync.replicas 2 and
//! three replicas loses its followers one after another, then its leader,
//! with `eligible.leader.replicas.version` at 1 and at 0 (today's rules).

use std::collections::BTreeMap;

use crate::command::{apply, Command, CommandResult};
use crate::features::{self, UpgradeType};
use crate::image::MetadataImage;
use crate::request::AlterPartition;
use crate::test_images::register;

/// Brokers 1..=3, topic "t" (replicas 1, 2, 3; min.insync.replicas 2) on
/// a new cluster (ELR on) or one created before features (ELR off).
fn cluster(elr: bool) -> MetadataImage {
    let mut image = MetadataImage::default();
    let init = Command::InitClusterId {
        cluster_id: "c".into(),
        features: if elr {
            features::bootstrap_levels()
        } else {
            BTreeMap::new()
        },
        default_min_insync_replicas: elr.then_some(1),
    };
    apply(&mut image, &init);
    for id in 1..=3 {
        register(&mut image, id);
    }
    let create = Command::CreateTopic {
        name: "t".into(),
        topic_id: [1; 16],
        configs: [("min.insync.replicas".to_string(), "2".to_string())].into(),
        assignments: vec![vec![1, 2, 3]],
        isrs: Vec::new(),
    };
    assert!(matches!(
        apply(&mut image, &create),
        CommandResult::Topic(_)
    ));
    image
}

/// (leader, isr, elr, last known elr)
fn state(image: &MetadataImage) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
    let p = image.partition("t", 0).expect("partition");
    (
        p.leader,
        p.isr.clone(),
        p.elr.clone(),
        p.last_known_elr.clone(),
    )
}

fn shrink(image: &mut MetadataImage, new_isr: &[i32]) {
    let p = image.partition("t", 0).expect("partition").clone();
    let alter = Command::AlterPartition(AlterPartition {
        topic: "t".into(),
        partition: 0,
        leader_id: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: new_isr.to_vec(),
    });
    assert!(matches!(apply(image, &alter), CommandResult::Partition(_)));
}

fn fence(image: &mut MetadataImage, node_id: i32) {
    apply(image, &Command::FenceBroker { node_id });
}

#[test]
#[rustfmt::skip]
fn followers_then_the_leader_die_and_an_elr_member_leads_again() {
    type Row = (&'static str, fn(&mut MetadataImage), (i32, &'static [i32], &'static [i32], &'static [i32]), (i32, &'static [i32], &'static [i32], &'static [i32]));
    // (step, action, with ELR: (leader, isr, elr, last known), without ELR)
    let table: [Row; 6] = [
        ("3 falls behind: ISR at min", |i| shrink(i, &[1, 2]), (1, &[1, 2], &[], &[]), (1, &[1, 2], &[], &[])),
        ("2 falls behind: ISR below min", |i| shrink(i, &[1]), (1, &[1], &[2], &[]), (1, &[1], &[], &[])),
        ("3 and 2 fenced", |i| { fence(i, 3); fence(i, 2) }, (1, &[1], &[2], &[]), (1, &[1], &[], &[])),
        ("the leader 1 fenced", |i| fence(i, 1), (-1, &[], &[1, 2], &[1]), (-1, &[1], &[], &[])),
        ("3 returns: not eligible", |i| register(i, 3), (-1, &[], &[1, 2], &[1]), (-1, &[1], &[], &[])),
        ("2 returns", |i| register(i, 2), (2, &[2], &[1], &[]), (-1, &[1], &[], &[])),
    ];
    for elr in [true, false] {
        let mut image = cluster(elr);
        for (step, action, with, without) in table {
            action(&mut image);
            let (leader, isr, e, last) = if elr { with } else { without };
            assert_eq!(state(&image), (leader, isr.to_vec(), e.to_vec(), last.to_vec()), "elr {elr}: {step}");
        }
        if !elr {
            register(&mut image, 1);
            assert_eq!(state(&image).0, 1, "without ELR only the last ISR member leads again");
        }
    }
}

#[test]
fn a_live_elr_member_is_elected_when_the_last_isr_member_is_fenced() {
    let mut image = cluster(true);
    shrink(&mut image, &[1, 2]);
    shrink(&mut image, &[1]);
    fence(&mut image, 1);
    assert_eq!(state(&image), (2, vec![2], vec![1], vec![]));
    let epoch = image.partition("t", 0).map(|p| p.leader_epoch);
    assert_eq!(epoch, Some(1), "a new leadership");
}

#[test]
fn turning_elr_off_or_changing_min_isr_clears_it() {
    let mut image = cluster(true);
    shrink(&mut image, &[1, 2]);
    shrink(&mut image, &[1]);
    assert_eq!(state(&image).2, vec![2]);
    let configs: BTreeMap<String, String> =
        [("min.insync.replicas".to_string(), "1".to_string())].into();
    apply(
        &mut image,
        &Command::AlterTopicConfigs {
            name: "t".into(),
            configs,
        },
    );
    assert_eq!(state(&image).2, Vec::<i32>::new(), "new topic min isr");
    let levels = features::check_update(
        &image.features,
        1,
        &[(features::ELR_VERSION.into(), 0, UpgradeType::SafeDowngrade)],
    )
    .expect("a safe downgrade");
    apply(
        &mut image,
        &Command::UpdateFeatures {
            levels,
            default_min_insync_replicas: Some(1),
        },
    );
    assert!(!image.elr_enabled());
    fence(&mut image, 2);
    fence(&mut image, 3);
    fence(&mut image, 1);
    assert_eq!(state(&image), (-1, vec![1], vec![], vec![]), "today's rule");
}

#[test]
fn an_image_written_before_elr_loads_with_the_feature_off() {
    let old = r#"{"applied_index":7,"cluster_id":"c","brokers":{},"topics":{"t":{"name":"t",
        "topic_id":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"configs":{},"partitions":[{"partition":0,
        "replicas":[1,2,3],"isr":[1],"leader":1,"leader_epoch":3,"partition_epoch":5}]}}}"#;
    let image: MetadataImage = serde_json::from_str(old).expect("an old image loads");
    let p = image.partition("t", 0).expect("partition");
    assert!(p.elr.is_empty() && p.last_known_elr.is_empty());
    assert!(!image.elr_enabled(), "ELR off until upgraded");
    assert_eq!(
        features::level(&image.features, features::METADATA_VERSION),
        30
    );
}
