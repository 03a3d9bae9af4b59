//! A controller that dies and comes back must not be "ready" on the image it
//! had before it died. openraft restores a restarted leader as leader at
//! once, before it learns that the others elected someone else; a heartbeat
//! answered from that node's own stale image used to let `wait_ready` pass
//! immediately, and the broker then served Metadata listing itself in ISRs
//! it had been removed from (the flaky `killed_follower_catches_up_and_
//! rejoins_the_isr`), and led partitions it no longer led.

mod common;

use std::time::Duration;

use common::{eventually, topic, TestCluster, SESSION_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_is_ready_only_with_what_was_committed_while_it_was_away() {
    let mut cluster = TestCluster::start().await;
    for round in 0..3 {
        let old = cluster.controller().await;
        cluster.stop_node(old).await;
        let new = cluster.controller().await;
        let name = format!("while-away-{round}");
        cluster
            .node(new)
            .create_topic(topic(&name, 1, 2))
            .await
            .expect("create while the old controller is down");
        let fenced_at = eventually(
            SESSION_TIMEOUT + Duration::from_secs(5),
            "the old controller fenced",
            || {
                let image = cluster.node(new).image();
                image.brokers[&old].fenced.then_some(image.applied_index)
            },
        )
        .await;

        cluster.start_node(old).await;
        cluster
            .node(old)
            .wait_ready(Duration::from_secs(20))
            .await
            .expect("ready after restart");
        let image = cluster.node(old).image();
        assert!(
            image.applied_index >= fenced_at && image.topics.contains_key(&name),
            "round {round}: node {old} declared itself ready on a stale image: applied index {} < {fenced_at} \
             (its fencing), topics {:?}",
            image.applied_index,
            image.topics.keys().collect::<Vec<_>>()
        );
        assert!(
            !image.brokers[&old].fenced,
            "round {round}: ready while its own image says it is fenced"
        );
    }
}
