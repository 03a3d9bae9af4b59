//! Who may fetch as a replica. A Fetch carrying a replica id moves the
//! leader's view of that follower (ISR membership, the high watermark that
//! acks=all waits for), so it is honoured only from a broker of this
//! cluster: the id must be a registered, unfenced broker other than this
//! one, and the connection must come from that broker's registered host.
//! Anything else is answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers a
//! replica fetch without CLUSTER_ACTION.
//!
//! The same holds for the other broker-only request, WriteTxnMarkers: it is
//! honoured only from the registered host of a live broker
//! (`verify_broker_peer`).
//!
//! Owns: those checks. Must not: authenticate beyond the peer address and
//! the ACLs: on an authenticated listener the request also needs
//! CLUSTER_ACTION for its principal (`handlers/authorize`), which is the
//! broker principal check; no mutual TLS is done here.

use std::net::{IpAddr, SocketAddr};

use super::ReplicaManager;

/// Ok when `peer` may fetch as replica `replica_id`; else why not.
pub async fn verify_replica(
    manager: &ReplicaManager,
    replica_id: i32,
    peer: SocketAddr,
) -> Result<(), String> {
    if replica_id == manager.node_id {
        return Err(format!("replica id {replica_id} is this broker's own"));
    }
    let host = {
        let image = manager.cluster.image();
        match image.brokers.get(&replica_id) {
            Some(b) if !b.fenced => b.host.clone(),
            Some(_) => return Err(format!("broker {replica_id} is fenced")),
            None => {
                return Err(format!(
                    "broker {replica_id} is not registered in this cluster"
                ))
            }
        }
    };
    if host_addresses(&host).await.contains(&peer.ip()) {
        Ok(())
    } else {
        Err(format!(
            "connection from {} is not broker {replica_id}'s host {host}",
            peer.ip()
        ))
    }
}

/// Ok when `peer` is the registered host of a live broker of this cluster.
pub async fn verify_broker_peer(manager: &ReplicaManager, peer: SocketAddr) -> Result<(), String> {
    let hosts: Vec<String> = {
        let image = manager.cluster.image();
        image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.host.clone())
            .collect()
    };
    for host in hosts {
        if host_addresses(&host).await.contains(&peer.ip()) {
            return Ok(());
        }
    }
    Err(format!(
        "connection from {} is not a broker's host",
        peer.ip()
    ))
}

/// The addresses `host` stands for (itself when it is an IP literal).
async fn host_addresses(host: &str) -> Vec<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![ip];
    }
    match tokio::net::lookup_host((host, 0)).await {
        Ok(addrs) => addrs.map(|a| a.ip()).collect(),
        Err(_) => Vec::new(),
    }
}
