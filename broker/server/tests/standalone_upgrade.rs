//! Every broker runs a metadata quorum — of one without `--peers`. A data
//! directory written without one (before this was so: logs, committed
//! offsets and meta.properties, no `__cluster_metadata`) opens: its topics
//! are adopted with their ids, partition counts and configs, its records
//! and committed offsets stay. Joining such a directory to a new quorum of
//! several nodes is refused with a message that says what to do.

mod common;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use common::broker::{binary, Broker};
use common::cluster::free_port;
use common::kafka_client::Client;

#[test]
fn a_data_directory_without_a_quorum_is_adopted_or_refused() -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let data_dir = scratch.path().join("data");
    let (topic_id, cluster_id) = {
        let mut broker = Broker::start_with_data_dir(&data_dir, &[])?;
        let mut client = Client::connect(&broker)?;
        client.create_topic_with("kept", &[("retention.ms", "86400000")])?;
        let values: Vec<Bytes> = (0..10).map(|i| Bytes::from(format!("v{i}"))).collect();
        let (code, _) = client.produce_values("kept", &values)?;
        ensure!(code == 0, "produce failed with {code}");
        ensure!(client.commit_offset("g", "kept", 7)? == 0, "commit failed");
        let id = client.topic_id("kept")?;
        let meta = std::fs::read_to_string(data_dir.join("meta.properties"))?;
        broker.stop()?;
        (id, meta)
    };
    // What a broker that kept no quorum left behind.
    std::fs::remove_dir_all(data_dir.join("__cluster_metadata"))
        .context("no __cluster_metadata to remove")?;

    // Several voters: refused, saying what to do, before anything changes.
    let port = free_port()?;
    let raft = free_port()?;
    let refused = std::process::Command::new(binary())
        .args([
            "--data-dir",
            data_dir.to_str().context("path")?,
            "--node-id",
            "1",
        ])
        .args(["--peers", "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3"])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--raft-listen",
            &format!("127.0.0.1:{raft}"),
        ])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .output()?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    ensure!(
        !refused.status.success(),
        "a 3-voter start on that directory succeeded"
    );
    ensure!(
        stderr.contains("without --peers") && stderr.contains("kept"),
        "the refusal does not say what to do:\n{stderr}"
    );
    ensure!(
        !data_dir.join("__cluster_metadata").exists()
            || std::fs::read_dir(data_dir.join("__cluster_metadata"))?
                .next()
                .is_none(),
        "the refused start created a quorum"
    );

    // A quorum of one adopts everything.
    let broker = Broker::start_with_data_dir(&data_dir, &[])?;
    let mut client = Client::connect(&broker)?;
    ensure!(client.topic_id("kept")? == topic_id, "the topic id changed");
    ensure!(client.log_end_offset("kept")? == 10, "records lost");
    ensure!(
        client.committed_offset("g", "kept")? == 7,
        "committed offset lost"
    );
    let values = vec![Bytes::from("after")];
    ensure!(
        client.produce_values("kept", &values)?.0 == 0,
        "produce after adoption failed"
    );
    ensure!(
        std::fs::read_to_string(data_dir.join("meta.properties"))? == cluster_id,
        "the cluster id changed"
    );
    Ok(())
}
