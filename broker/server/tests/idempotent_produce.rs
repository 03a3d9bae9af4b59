//! The idempotent producer over the raw protocol: InitProducerId, a retried
//! batch acknowledged with its original offset and stored once, sequence gaps
//! and stale epochs refused with Kafka's error codes, and all of it still true
//! after a restart (producer state rebuilt from the log).

mod common;

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::*;

use common::broker::Broker;
use common::kafka_client::Client;

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

#[test]
fn retried_batches_are_stored_once_and_gaps_are_refused_across_restarts() -> Result<()> {
    let mut broker = Broker::start(&["--wal-profile", "low"])?;
    let mut client = Client::connect(&broker)?;
    client.create_topic("idem")?;
    let (pid, epoch) = client.init_producer_id()?;
    ensure!(
        epoch == 0,
        "a fresh producer starts at epoch 0, got {epoch}"
    );

    assert_eq!(client.produce("idem", pid, epoch, 0, 5)?, (0, 0));
    assert_eq!(client.produce("idem", pid, epoch, 5, 5)?, (0, 5));
    // The same batch again, as a producer retries after a lost response.
    assert_eq!(
        client.produce("idem", pid, epoch, 5, 5)?,
        (0, 5),
        "a retry gets the original offset"
    );
    assert_eq!(
        client.log_end_offset("idem")?,
        10,
        "the retried batch was not appended twice"
    );
    let (error, _) = client.produce("idem", pid, epoch, 12, 1)?;
    assert_eq!(
        error, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "a sequence gap is refused"
    );

    // Naming an existing producer in InitProducerId does not bump it (any
    // client could fence another's producer): a new id at epoch 0, as Kafka.
    let named = client.send(
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch),
        4,
    )?;
    assert_eq!((named.error_code, named.producer_epoch), (0, 0));
    assert_ne!(
        named.producer_id.0, pid,
        "a named producer id was handed out again"
    );
    // The producer bumps its own epoch (KIP-360): the new epoch starts at
    // sequence 0 and fences the old one.
    assert_eq!(client.produce("idem", pid, epoch + 1, 0, 2)?, (0, 10));
    let (error, _) = client.produce("idem", pid, epoch, 10, 1)?;
    assert_eq!(error, INVALID_PRODUCER_EPOCH, "the old epoch is fenced");

    for restart in ["clean", "crash"] {
        drop(client);
        if restart == "clean" {
            broker.stop()?;
        } else {
            broker.kill_hard()?;
        }
        broker
            .restart()
            .with_context(|| format!("{restart} restart"))?;
        client = Client::connect(&broker)?;
        assert_eq!(
            client.produce("idem", pid, epoch + 1, 0, 2)?,
            (0, 10),
            "{restart}: duplicate still detected"
        );
        let (error, _) = client.produce("idem", pid, epoch + 1, 5, 1)?;
        assert_eq!(
            error, OUT_OF_ORDER_SEQUENCE_NUMBER,
            "{restart}: gap still refused"
        );
    }
    assert_eq!(client.log_end_offset("idem")?, 12);
    let (_, next_pid_epoch) = client.init_producer_id()?;
    assert_eq!(next_pid_epoch, 0);
    Ok(())
}
