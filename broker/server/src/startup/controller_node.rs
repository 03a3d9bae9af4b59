//! A node with the controller role only (Kafka's `process.roles=controller`):
//! a voter of the metadata quorum and, while it leads, the controller. It
//! opens no Kafka listener, hosts no partition and never registers as a
//! broker; brokers reach it on its raft port.
//!
//! A controller not among `--peers` but given
//! `--controller-quorum-bootstrap-servers` follows the log as an observer
//! until KIP-853's AddRaftVoter makes it a voter.
//!
//! Owns: that node's start and stop, its meta.properties (created with a
//! directory id; the quorum's cluster id written once known), its `--metrics-listen` endpoint
//! (`/metrics` with the `chronik_cluster_*` quorum metrics, `/health`,
//! `/ready` once a controller is known) and its `LISTENING` line. Must not:
//! serve clients or touch a partition log.

use std::sync::Arc;

use anyhow::Context;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use chronik_metadata::Cluster;
use prometheus_client::registry::Registry;
use tracing::info;

use crate::config::Config;
use crate::infra::metrics_cluster::QuorumMetrics;
use crate::startup::cluster_start::{cluster_config, cluster_peers, load_secret};

#[derive(Clone)]
struct HttpState {
    cluster: Arc<Cluster>,
    registry: Arc<Registry>,
    quorum: Arc<QuorumMetrics>,
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let meta = crate::startup::meta_properties::load_or_create(&config.data_dir, config.node_id)?;
    let secret = load_secret(&config)?;
    let peers = cluster_peers(&config)?;
    let host = peers
        .iter()
        .find(|p| p.node_id == config.node_id)
        .map_or_else(|| config.host.clone(), |p| p.host.clone());
    if !config.single_voter() && config.raft_listen.port() == 0 {
        anyhow::bail!("a quorum of several controllers needs a fixed --raft-listen port");
    }
    let http_listener = tokio::net::TcpListener::bind(config.metrics_listen)
        .await
        .with_context(|| format!("binding the metrics listener on {}", config.metrics_listen))?;
    let http_addr = http_listener.local_addr()?;
    let security = crate::security::controller_listener::load(
        config.controller_protocol,
        &config.security,
        !config.single_voter(),
    )?;
    let cluster = Cluster::start(cluster_config(
        &config,
        peers,
        host,
        secret,
        security,
        meta.directory_id,
    ))
    .await
    .context("starting the metadata quorum")?;
    let cluster_id = spawn_adopt_cluster_id(&config, &cluster, meta.cluster_id);

    let quorum = Arc::new(QuorumMetrics::default());
    let mut registry = Registry::with_prefix("chronik");
    quorum.register(registry.sub_registry_with_prefix("cluster"));
    let state = HttpState {
        cluster: cluster.clone(),
        registry: Arc::new(registry),
        quorum,
    };
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok" }))
        .route("/ready", get(ready))
        .with_state(state);
    let http = tokio::spawn(async move {
        if let Err(e) = axum::serve(http_listener, app).await {
            tracing::error!(error = %e, "metrics endpoint failed");
        }
    });
    println!(
        "LISTENING controller raft={} metrics={http_addr}",
        config.raft_listen
    );
    info!(
        node_id = config.node_id,
        process_roles = %config.roles,
        raft_listen = %config.raft_listen,
        "controller started (no Kafka listener: this node has the controller role only)"
    );
    shutdown.await;
    info!("shutdown requested");
    http.abort();
    cluster_id.abort();
    cluster.shutdown().await;
    info!("shutdown: complete");
    Ok(())
}

/// Once the quorum's image has a cluster id, writes it to meta.properties
/// when it differs from this node's (a controller never proposes one: the
/// first broker does), so Kafka's tools read the cluster's id there.
fn spawn_adopt_cluster_id(
    config: &Config,
    cluster: &Cluster,
    local: String,
) -> tokio::task::JoinHandle<()> {
    let mut images = cluster.subscribe();
    let (data_dir, node_id) = (config.data_dir.clone(), config.node_id);
    tokio::spawn(async move {
        let Ok(image) = images.wait_for(|image| image.cluster_id.is_some()).await else {
            return;
        };
        let chosen = image.cluster_id.clone().unwrap_or_default();
        drop(image);
        if chosen != local {
            match crate::startup::meta_properties::store_cluster_id(&data_dir, node_id, &chosen) {
                Ok(()) => info!(
                    cluster_id = chosen,
                    "adopted the quorum's cluster id in meta.properties"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "writing the quorum's cluster id to meta.properties")
                }
            }
        }
    })
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    state.quorum.refresh(&state.cluster.status());
    let mut body = String::new();
    let status = match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (
        status,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
}

/// Ready once this node knows a controller (itself or another voter).
async fn ready(State(state): State<HttpState>) -> impl IntoResponse {
    match state.cluster.status().controller_id {
        Some(id) => (StatusCode::OK, format!("ready (controller {id})")),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "no controller elected yet".to_string(),
        ),
    }
}
