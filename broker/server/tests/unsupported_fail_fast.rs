//! What this broker does not support is refused at once with a non-retriable
//! Kafka error, never with one that makes a client retry forever.
//!
//! FindCoordinator for a key type the broker does not coordinate (unknown
//! ones, and share-partitions, KIP-932, before v6) is INVALID_REQUEST — a retriable error
//! such as COORDINATOR_NOT_AVAILABLE would make every client retry until its
//! own timeout — while groups and transactional ids are served. Each at
//! every FindCoordinator version that can carry it.

mod common;

use anyhow::{ensure, Result};
use common::broker::Broker;
use common::kafka_client::Client;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

const INVALID_REQUEST: i16 = 42;

/// The error of each key in a FindCoordinator answer (v4+ carries a list).
fn errors(version: i16, response: &FindCoordinatorResponse) -> Vec<i16> {
    if version >= 4 {
        response.coordinators.iter().map(|c| c.error_code).collect()
    } else {
        vec![response.error_code]
    }
}

fn find(client: &mut Client, version: i16, key_type: i8, key: &str) -> Result<Vec<i16>> {
    let request = if version >= 4 {
        FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![StrBytes::from_string(key.to_string())])
    } else {
        FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_key(StrBytes::from_string(key.to_string()))
    };
    Ok(errors(version, &client.send(&request, version)?))
}

#[test]
fn unknown_coordinator_types_are_refused_at_once() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    // key_type exists from v1; v4 batches keys; v6 adds share-partitions
    let share = find(&mut client, 6, 2, "share-group:AAAAAAAAAAAAAAAAAAAAAA:0")?;
    ensure!(share == vec![0], "v6 share coordinator: {share:?}");
    for version in 1..=5 {
        let share = find(&mut client, version, 2, "share-group")?;
        ensure!(
            share == vec![INVALID_REQUEST],
            "v{version} key type 2: {share:?}"
        );
        let odd = find(&mut client, version, 7, "x")?;
        ensure!(
            odd == vec![INVALID_REQUEST],
            "v{version} key type 7: {odd:?}"
        );
        // and consumer groups and transactional ids are served
        let group = find(&mut client, version, 0, "a-group")?;
        ensure!(group == vec![0], "v{version} group coordinator: {group:?}");
        let txn = find(&mut client, version, 1, "my-transactional-id")?;
        ensure!(
            txn == vec![0],
            "v{version} transaction coordinator: {txn:?}"
        );
    }
    Ok(())
}
