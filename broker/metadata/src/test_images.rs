//! Test support for the crate's unit tests: small metadata images built
//! through `command::apply` (brokers registered, one topic "t").

use std::collections::BTreeMap;

use crate::command::{apply, Command, CommandResult};
use crate::image::MetadataImage;

/// Registers (or re-registers, which unfences) broker `node_id` at
/// 127.0.0.<node_id>:9092; the command must be applied.
pub fn register(image: &mut MetadataImage, node_id: i32) {
    let register = Command::RegisterBroker {
        node_id,
        host: format!("127.0.0.{node_id}"),
        port: 9092,
        listeners: Default::default(),
        log_dir_offline: false,
        rack: None,
    };
    assert_eq!(apply(image, &register), CommandResult::Done);
}

/// Brokers 1..=`brokers` and topic "t" (id `[topic_id; 16]`) with one
/// partition per replica list of `assignments`.
pub fn image_with_topic(brokers: i32, topic_id: u8, assignments: Vec<Vec<i32>>) -> MetadataImage {
    let mut image = MetadataImage::default();
    for node_id in 1..=brokers {
        register(&mut image, node_id);
    }
    let create = Command::CreateTopic {
        name: "t".into(),
        topic_id: [topic_id; 16],
        configs: BTreeMap::new(),
        assignments,
        isrs: Vec::new(),
    };
    assert!(matches!(
        apply(&mut image, &create),
        CommandResult::Topic(_)
    ));
    image
}
