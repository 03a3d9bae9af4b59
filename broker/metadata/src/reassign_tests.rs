//! Reassignments and elections applied through `command::apply` to small
//! images: the phases of a move, replacing and cancelling one, Kafka's
//! refusals, preferred and unclean elections.

use crate::command::{apply, Command, CommandResult};
use crate::error::ClusterError;
use crate::image::{MetadataImage, PartitionImage};
use crate::request::{AlterPartition, ElectionType, Reassignment};
use crate::test_images::{image_with_topic, register};

/// Brokers 1..=4 and topic "t" with one partition on `replicas`.
fn image_on(replicas: &[i32]) -> MetadataImage {
    image_with_topic(4, 1, vec![replicas.to_vec()])
}

fn p0(image: &MetadataImage) -> PartitionImage {
    image.partition("t", 0).expect("partition").clone()
}

fn reassign(image: &mut MetadataImage, target: Option<&[i32]>) -> Option<ClusterError> {
    let command = Command::AlterPartitionReassignments {
        reassignments: vec![Reassignment {
            topic: "t".into(),
            partition: 0,
            target: target.map(<[i32]>::to_vec),
        }],
    };
    match apply(image, &command) {
        CommandResult::PerPartition(mut results) => results.remove(0),
        other => panic!("unexpected {other:?}"),
    }
}

fn elect(image: &mut MetadataImage, election: ElectionType) -> Option<ClusterError> {
    let command = Command::ElectLeaders {
        election,
        partitions: vec![("t".into(), 0)],
    };
    match apply(image, &command) {
        CommandResult::PerPartition(mut results) => results.remove(0),
        other => panic!("unexpected {other:?}"),
    }
}

/// The leader's AlterPartition proposing `isr`.
fn set_isr(image: &mut MetadataImage, isr: &[i32]) -> CommandResult {
    let p = p0(image);
    let command = Command::AlterPartition(AlterPartition {
        topic: "t".into(),
        partition: 0,
        leader_id: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr.to_vec(),
    });
    apply(image, &command)
}

#[test]
fn a_move_adds_then_completes_when_the_newcomer_is_in_sync() {
    let mut image = image_on(&[1, 2, 3]);
    assert_eq!(reassign(&mut image, Some(&[2, 3, 4])), None);
    let moving = p0(&image);
    assert_eq!(moving.replicas, vec![2, 3, 4, 1]);
    assert_eq!(moving.adding_replicas, vec![4]);
    assert_eq!(moving.removing_replicas, vec![1]);
    assert_eq!(moving.isr, vec![1, 2, 3]);
    assert_eq!(
        moving.leader, 1,
        "the leader stays until the move completes"
    );
    assert_eq!((moving.leader_epoch, moving.partition_epoch), (1, 1));

    assert!(matches!(
        set_isr(&mut image, &[1, 2, 3, 4]),
        CommandResult::Partition(_)
    ));
    let done = p0(&image);
    assert_eq!(done.replicas, vec![2, 3, 4]);
    assert_eq!(done.isr, vec![2, 3, 4]);
    assert!(!done.is_reassigning());
    assert_eq!(
        done.leader, 2,
        "the removed leader hands over to the first target replica"
    );
    assert_eq!(done.leader_epoch, 2);
}

#[test]
fn a_shrink_completes_at_once_and_a_reorder_keeps_everyone() {
    let mut image = image_on(&[1, 2, 3]);
    assert_eq!(reassign(&mut image, Some(&[3, 2])), None);
    let done = p0(&image);
    assert_eq!(
        (done.replicas.clone(), done.isr.clone()),
        (vec![3, 2], vec![2, 3])
    );
    assert_eq!(done.leader, 3);
    assert!(!done.is_reassigning());
}

#[test]
fn cancel_goes_back_to_the_original_replicas() {
    let mut image = image_on(&[1, 2, 3]);
    assert_eq!(reassign(&mut image, Some(&[2, 3, 4])), None);
    let cancelled = reassign(&mut image, None);
    assert_eq!(cancelled, None);
    let back = p0(&image);
    // As Kafka: the original replicas in the merged list's order (target
    // first), so the preferred leader may change; ElectLeaders or a
    // reassignment restores an order.
    assert_eq!(back.replicas, vec![2, 3, 1]);
    assert_eq!(back.isr, vec![1, 2, 3]);
    assert_eq!(back.leader, 1);
    assert!(!back.is_reassigning());
    assert!(matches!(
        reassign(&mut image, None),
        Some(ClusterError::NoReassignmentInProgress(_))
    ));
}

#[test]
fn a_new_target_replaces_the_old_one_from_the_original_replicas() {
    let mut image = image_on(&[1, 2, 3]);
    assert_eq!(reassign(&mut image, Some(&[1, 2, 4])), None);
    assert_eq!(reassign(&mut image, Some(&[1, 2, 3])), None);
    let back = p0(&image);
    assert_eq!(back.replicas, vec![1, 2, 3]);
    assert!(!back.is_reassigning());
}

#[test]
fn kafka_refusals() {
    let mut image = image_on(&[1, 2, 3]);
    for bad in [&[][..], &[1, 1, 2][..], &[1, 2, 9][..]] {
        assert!(
            matches!(
                reassign(&mut image, Some(bad)),
                Some(ClusterError::InvalidReplicaAssignment(_))
            ),
            "{bad:?}"
        );
    }
    let unknown = Command::AlterPartitionReassignments {
        reassignments: vec![Reassignment {
            topic: "nope".into(),
            partition: 0,
            target: Some(vec![1]),
        }],
    };
    assert!(matches!(
        apply(&mut image, &unknown),
        CommandResult::PerPartition(r) if matches!(r[0], Some(ClusterError::UnknownTopic(_)))
    ));
    assert_eq!(p0(&image).leader_epoch, 0, "refusals change nothing");
}

#[test]
fn preferred_election_moves_leadership_back() {
    let mut image = image_on(&[1, 2, 3]);
    assert!(matches!(
        elect(&mut image, ElectionType::Preferred),
        Some(ClusterError::ElectionNotNeeded(_))
    ));
    apply(&mut image, &Command::FenceBroker { node_id: 1 });
    assert_eq!(p0(&image).leader, 2);
    assert!(matches!(
        elect(&mut image, ElectionType::Preferred),
        Some(ClusterError::PreferredLeaderNotAvailable(_))
    ));
    // Back, and in sync again through the leader's AlterPartition.
    register(&mut image, 1);
    set_isr(&mut image, &[1, 2, 3]);
    let before = p0(&image).leader_epoch;
    assert_eq!(elect(&mut image, ElectionType::Preferred), None);
    assert_eq!(p0(&image).leader, 1);
    assert_eq!(p0(&image).leader_epoch, before + 1);
}

#[test]
fn unclean_election_only_for_a_leaderless_partition() {
    let mut image = image_on(&[1, 2]);
    assert!(matches!(
        elect(&mut image, ElectionType::Unclean),
        Some(ClusterError::ElectionNotNeeded(_))
    ));
    // 2 leaves the ISR, then 1 dies: no clean leader.
    set_isr(&mut image, &[1]);
    apply(&mut image, &Command::FenceBroker { node_id: 1 });
    assert_eq!(p0(&image).leader, -1);
    assert_eq!(elect(&mut image, ElectionType::Unclean), None);
    let p = p0(&image);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    apply(&mut image, &Command::FenceBroker { node_id: 2 });
    assert!(matches!(
        elect(&mut image, ElectionType::Unclean),
        Some(ClusterError::EligibleLeadersNotAvailable(_))
    ));
}
