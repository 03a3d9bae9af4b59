//! Starting and stopping the broker: opens (and recovers) the log, binds the
//! Kafka listeners (every `--listeners` entry, or `--listen`) and the HTTP
//! one, loads TLS and SASL settings, joins the metadata quorum (`cluster_start`; of
//! one without `--peers`), listens and accepts connections until SIGINT/SIGTERM, then
//! shuts down in order — controlled shutdown (several voters), stop
//! accepting, close connections, leave the quorum, flush the log. Until the
//! node has joined, its ports are bound but not listening: a client's
//! connection is refused at once (`bind_unlistened`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chronik_log::{FlushPolicy, LogConfig, LogManager, LogManagerConfig};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{broadcast, mpsc, Semaphore};
use tracing::{error, info, warn};

use crate::broker::Broker;
use crate::config::Config;
use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::coordinators::producer_ids::ProducerIdAllocator;
use crate::coordinators::share::groups::ShareGroups;
use crate::coordinators::share::partitions::SharePartitions;
use crate::coordinators::share::persister::SharePersister;
use crate::coordinators::share::state_store::ShareStateStore;
use crate::coordinators::share::{ShareCoordinator, SHARE_STATE_TOPIC};
use crate::coordinators::txn::store::TxnStore;
use crate::coordinators::txn::{TxnCoordinator, TxnDependencies, TXN_TOPIC};
use crate::infra::metrics::ReasonLabels;
use crate::infra::metrics::{FlushMetrics, Metrics};
use crate::network::connection;
use crate::network::connection_limits::ConnectionLimiter;
use crate::network::http::{app, HttpState};
use crate::replica::purgatory::Purgatory;
use crate::replica::write::WritePath;
use crate::requests::fetch_sessions::FetchSessionCache;
use crate::security::authorizer::Authorizer;
use chronik_coordinator_state::{ConsumerGroupConfig, GroupConfig};
use chronik_metadata::Cluster;

/// Runs the broker until `shutdown` resolves.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let meta = crate::startup::meta_properties::load_or_create(&config.data_dir, config.node_id)?;

    let purgatory = Arc::new(Purgatory::new());
    let on_flush = crate::replica::write::on_flush(&purgatory);
    let log_config = LogManagerConfig {
        data_dir: config.data_dir.clone(),
        default_log_config: LogConfig {
            segment_bytes: config.segment_bytes,
            retention_ms: config.retention_ms,
            retention_bytes: config.retention_bytes,
            ..LogConfig::default()
        },
        flush_policy: match config.wal_profile.max_wait() {
            Some(max_wait) => FlushPolicy::GroupCommit { max_wait },
            None => FlushPolicy::Never,
        },
        retention_check_interval: config.retention_check_interval,
        flush_observer: Some(Arc::new(FlushMetrics(metrics.clone()))),
        producer_id_expiration: config.limits.producer_id_expiration,
        cleaner: config.log_cleaner,
    };
    let data_dir = config.data_dir.clone();
    let log = tokio::task::spawn_blocking(move || LogManager::open(log_config, on_flush))
        .await
        .context("log recovery task panicked")?
        .with_context(|| format!("opening the log in {}", data_dir.display()))?;

    // Bound first (the quorum registers the port clients are given), but
    // not listening until the quorum is joined and the local logs of its
    // image exist: until then a client's connection is refused at once.
    // Kafka does the same for a configured port (its acceptors open their
    // sockets only once the broker is ready to process requests), and it is
    // what clients handle best: a refused connection sends them on to their
    // next bootstrap server or into their reconnect backoff at once, while
    // a socket that accepts and never answers holds them for a whole
    // request timeout (librdkafka: 10 s in ApiVersions), and Kafka errors
    // from a broker that is not yet part of the cluster would hand them a
    // cluster view without brokers to act on.
    let mut listeners = Vec::new();
    for listener in &config.security.listeners {
        let bound = bind_unlistened(listener.bind).with_context(|| {
            format!(
                "binding the Kafka listener {} on {}",
                listener.name, listener.bind
            )
        })?;
        let addr = bound.local_addr()?;
        listeners.push((listener.clone(), bound, addr));
    }
    let kafka_addr = listeners[config.security.inter_broker].2;
    let secret = crate::startup::cluster_start::load_secret(&config)?;
    let security = crate::security::Security::load(&config.security, &secret)?;
    let http_listener = bind_unlistened(config.metrics_listen)
        .with_context(|| format!("binding the metrics listener on {}", config.metrics_listen))?;
    let http_addr = http_listener.local_addr()?;
    let kafka_port = config
        .advertise
        .as_ref()
        .map_or(kafka_addr.port(), |(_, port)| *port);
    let bound: Vec<_> = listeners
        .iter()
        .map(|(l, _, addr)| (l.clone(), *addr))
        .collect();
    let joined = crate::startup::cluster_start::start(
        &config, &log, &purgatory, &meta, kafka_port, &bound, &security,
    )
    .await?;
    let (replicas, cluster, throttle, advertised, cluster_id) = (
        joined.replicas,
        joined.cluster,
        joined.throttle,
        joined.advertised,
        joined.cluster_id,
    );
    let writes = Arc::new(WritePath::new(replicas.clone(), purgatory.clone(), &log));
    let listeners = listeners
        .into_iter()
        .map(|(config, bound, addr)| {
            let listening = bound
                .listen(LISTEN_BACKLOG)
                .with_context(|| format!("listening on {addr} (Kafka listener {})", config.name))?;
            anyhow::Ok((config, listening, addr))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let http_listener = http_listener
        .listen(LISTEN_BACKLOG)
        .with_context(|| format!("listening on {http_addr} (metrics)"))?;

    metrics
        .produce_memory_limit_bytes
        .set(config.produce_profile.in_flight_bytes() as i64);
    let (offsets, txns, share_states) = {
        let log = log.clone();
        let writes = writes.clone();
        let skipped = metrics.offsets_records_skipped_total.clone();
        let txn_skipped = metrics.txn_records_skipped_total.clone();
        let share_skipped = metrics.offsets_records_skipped_total.clone();
        tokio::task::spawn_blocking(move || {
            anyhow::Ok((
                OffsetStore::open(&log, &writes, skipped)?,
                TxnStore::open(&log, &writes, txn_skipped)?,
                ShareStateStore::open(&log, &writes, share_skipped)?,
            ))
        })
        .await
        .context("internal topic replay task panicked")??
    };
    let producer_ids =
        Arc::new(ProducerIdAllocator::open(&config.data_dir)?.for_node(config.node_id)?);
    let offsets = Arc::new(offsets);
    let txn = Arc::new(TxnCoordinator::new(
        txns,
        TxnDependencies {
            replicas: replicas.clone(),
            cluster: cluster.clone(),
            writes: writes.clone(),
            offsets: offsets.clone(),
            producer_ids: producer_ids.clone(),
            max_transactional_ids: config.limits.max_transactional_ids,
        },
    ));
    let groups = GroupManager::new(
        GroupConfig {
            initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms: config.group_min_session_timeout_ms,
            ..GroupConfig::default()
        },
        ConsumerGroupConfig {
            session_timeout_ms: config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
            max_size: config.group_consumer_max_size,
            migration_policy: config.group_consumer_migration_policy,
        },
        offsets.clone(),
    );
    let share_states = Arc::new(share_states);
    {
        let (store, coordinator, loader) = (offsets.clone(), txn.clone(), groups.clone());
        let share_store = share_states.clone();
        replicas.on_leadership(Box::new(move |replica| {
            let Some(epoch) = replica.leader_epoch() else {
                return;
            };
            if replica.partition != 0 {
                return;
            }
            let reloaded = match replica.topic.as_str() {
                crate::coordinators::groups::OFFSETS_TOPIC => {
                    store.reload(epoch, |records| loader.load_groups(records))
                }
                TXN_TOPIC => coordinator.store.reload(epoch),
                SHARE_STATE_TOPIC => share_store.reload(epoch),
                _ => return,
            };
            if let Err(e) = reloaded {
                error!(topic = %replica.topic, error = %e, "reloading coordinator state failed");
            }
        }));
        // Leadership (and state) may have arrived between the replay above
        // and the listener's registration.
        if let Some(epoch) = replicas
            .replica(crate::coordinators::groups::OFFSETS_TOPIC, 0)
            .and_then(|r| r.leader_epoch())
        {
            offsets.reload(epoch, |records| groups.load_groups(records))?;
        }
        if let Some(epoch) = replicas
            .replica(TXN_TOPIC, 0)
            .and_then(|r| r.leader_epoch())
        {
            txn.store.reload(epoch)?;
        }
        if let Some(epoch) = replicas
            .replica(SHARE_STATE_TOPIC, 0)
            .and_then(|r| r.leader_epoch())
        {
            share_states.reload(epoch)?;
        }
        replicas.spawn();
    }
    groups.spawn_ticker();
    let share = {
        let persister = Arc::new(SharePersister::new(
            share_states,
            replicas.clone(),
            cluster.clone(),
        ));
        let partitions = SharePartitions::new(
            persister.clone(),
            (replicas.clone(), cluster.clone()),
            metrics.share.clone(),
        );
        partitions.spawn_ticker();
        let share_groups = ShareGroups::new(offsets.clone(), groups.clone(), cluster.clone());
        {
            let (cluster, groups) = (cluster.clone(), groups.clone());
            share_groups.spawn_ticker(move || {
                (*crate::requests::handlers::consumer_group_heartbeat::subscribable_topics(
                    &cluster, &groups,
                ))
                .clone()
            });
        }
        let share = Arc::new(ShareCoordinator {
            groups: share_groups,
            partitions,
            sessions: crate::coordinators::share::sessions::ShareSessions::new(
                metrics.share.sessions.clone(),
            ),
            persister,
        });
        share.spawn_session_reaper();
        share
    };
    let fetch_sessions = FetchSessionCache::new(
        config.limits.max_incremental_fetch_session_cache_slots,
        metrics.fetch_sessions.clone(),
    );
    let authorizer = Authorizer::new(config.authorizer.clone(), cluster.clone());
    let quotas = Arc::new(crate::quotas::ClientQuotaManager::new(
        config.quota_window,
        Some(&metrics),
    ));
    let broker = Arc::new(Broker {
        authorizer,
        quotas,
        produce_memory: Arc::new(Semaphore::new(config.produce_profile.in_flight_bytes())),
        pre_auth_memory: Arc::new(Semaphore::new(
            crate::network::connection::PRE_AUTH_MEMORY_BYTES,
        )),
        config,
        log: log.clone(),
        metrics,
        advertised,
        cluster_id,
        cluster,
        purgatory,
        groups,
        offsets,
        fetch_sessions,
        txn,
        producer_ids,
        replicas,
        writes,
        throttle,
        scram: security.sasl.scram.clone(),
        share,
    });
    spawn_image_follower(&broker);
    crate::coordinators::txn::spawn_ticker(&broker.txn);
    info!(
        kafka = %kafka_addr,
        metrics = %http_addr,
        advertised = %format!("{}:{}", broker.advertised.0, broker.advertised.1),
        cluster_id = %broker.cluster_id,
        topics = log.topics().len(),
        "chronik-server ready"
    );

    let (shutdown_tx, _) = broadcast::channel::<()>(1);
    let ready = Arc::new(AtomicBool::new(false));
    let http_state = HttpState {
        broker: broker.clone(),
        ready: ready.clone(),
    };
    let mut http_shutdown = shutdown_tx.subscribe();
    let http_limits = broker.config.limits.http;
    let http_task = tokio::spawn(chronik_http::serve(
        http_listener,
        app(http_state),
        http_limits,
        async move {
            let _ = http_shutdown.recv().await;
        },
    ));

    // Machine-read by tests and scripts: the ports actually bound
    // (kafka= is the inter-broker listener; with --listeners,
    // listener.NAME= names every one).
    let named: String = listeners
        .iter()
        .filter(|_| broker.config.security.named)
        .map(|(l, _, addr)| format!(" listener.{}={addr}", l.name))
        .collect();
    println!("LISTENING kafka={kafka_addr} metrics={http_addr}{named}");
    ready.store(true, Ordering::Release);

    // Each connection holds a clone; when all are dropped, recv() returns None.
    let (conn_done_tx, mut conn_done_rx) = mpsc::channel::<()>(1);
    let limiter = ConnectionLimiter::new(
        broker.config.limits.max_connections,
        broker.config.limits.max_connections_per_ip,
    );
    let unauthenticated = ConnectionLimiter::unauthenticated(
        broker.config.limits.max_unauthenticated_connections,
        broker.config.limits.max_unauthenticated_connections_per_ip,
    );
    let accept_loops = futures::future::join_all(listeners.iter().map(|(config, bound, _)| {
        let context = security.context(config);
        info!(listener = %config.name, protocol = %config.protocol, addr = %bound.local_addr().map_or_else(|e| e.to_string(), |a| a.to_string()), "accepting");
        let caps = [&limiter, &unauthenticated];
        accept_loop(bound, context, caps, &broker, &shutdown_tx, &conn_done_tx)
    }));
    tokio::select! {
        _ = accept_loops => {}
        _ = shutdown => info!("shutdown requested"),
    }
    // Shutdown in order, each phase bounded whatever clients or peers do
    // (a client that stops reading, a peer that never answers): the
    // process ends within SHUTDOWN_BOUND of the signal.
    let started = std::time::Instant::now();
    if !broker.config.single_voter() {
        // Kafka's controlled shutdown: leadership moves while this broker
        // still answers, so clients get NOT_LEADER_OR_FOLLOWER and a fresh
        // leader at once rather than a dead socket and a session timeout.
        // (A quorum of one has nobody to hand leadership to.)
        phase(
            "leaderships moved (controlled shutdown)",
            CONTROLLED_SHUTDOWN,
            controlled_shutdown(&broker.cluster, &broker.replicas),
        )
        .await;
    }
    ready.store(false, Ordering::Release);
    drop(listeners);
    info!("shutdown: Kafka listener closed (every one); closing client connections");
    let _ = shutdown_tx.send(());
    drop(conn_done_tx);
    phase("client connections closed", CONNECTIONS_DRAIN, async {
        let _ = conn_done_rx.recv().await;
    })
    .await;
    phase("metrics endpoint stopped", HTTP_DRAIN, async {
        let _ = http_task.await;
    })
    .await;
    phase(
        "left the metadata quorum",
        CLUSTER_LEAVE,
        broker.cluster.shutdown(),
    )
    .await;
    let flushed = tokio::task::spawn_blocking(move || log.shutdown());
    match tokio::time::timeout(LOG_FLUSH, flushed).await {
        Ok(done) => {
            done.context("log shutdown task panicked")?;
            info!("shutdown: log flushed and closed cleanly");
        }
        // Acknowledged data was fsync'd before it was acknowledged; what is
        // left is recovered at the next start like after a crash.
        Err(_) => warn!(
            bound_s = LOG_FLUSH.as_secs(),
            "shutdown: log flush did not finish in time; the next start recovers"
        ),
    }
    info!(
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "chronik-server stopped"
    );
    Ok(())
}

/// Pending connections a listening port queues (what `TcpListener::bind` uses).
const LISTEN_BACKLOG: u32 = 1024;

/// Binds `addr` without listening: the port is this node's (and known when
/// port 0 was asked for), but a connection attempt is refused at once by
/// the kernel until `listen`. `SO_REUSEADDR` as `TcpListener::bind` sets
/// it: a restart need not wait out its last connections' TIME_WAIT.
fn bind_unlistened(addr: std::net::SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Keeps what the metadata quorum holds for every broker to apply — the
/// SCRAM credentials (AlterUserScramCredentials) and the client quotas
/// (AlterClientQuotas), committed through any node — in step with the
/// latest image.
fn spawn_image_follower(broker: &Arc<Broker>) {
    let scram = broker.scram.clone();
    let quotas = broker.quotas.clone();
    let mut images = broker.cluster.subscribe();
    let (mut credentials, mut client_quotas) = {
        let image = images.borrow_and_update();
        (image.scram_credentials.clone(), image.client_quotas.clone())
    };
    scram.replace_quorum(&credentials);
    quotas.replace(&client_quotas);
    tokio::spawn(async move {
        while images.changed().await.is_ok() {
            let image = images.borrow_and_update().clone();
            if image.scram_credentials != credentials {
                credentials = image.scram_credentials.clone();
                scram.replace_quorum(&credentials);
            }
            if image.client_quotas != client_quotas {
                client_quotas = image.client_quotas.clone();
                quotas.replace(&client_quotas);
            }
        }
    });
}

/// Asks the controller to move this broker's leaderships to other ISR
/// members, applies the resulting image at once (parked acks=all produces
/// answer NOT_LEADER_OR_FOLLOWER and retry elsewhere) and stops fetching.
async fn controlled_shutdown(cluster: &Cluster, manager: &Arc<crate::replica::ReplicaManager>) {
    if let Err(e) = cluster.controlled_shutdown().await {
        warn!(error = %e, "controlled shutdown refused or timed out; leaderships move after the session timeout");
        return;
    }
    let image = cluster.image();
    let synced = manager.clone();
    let _ = tokio::task::spawn_blocking(move || synced.sync(&image)).await;
    manager.stop_fetchers();
    // Keep answering a moment: in-flight and parked requests get
    // NOT_LEADER_OR_FOLLOWER, and clients refresh metadata from this broker
    // (which names the new leaders) instead of finding its socket closed.
    tokio::time::sleep(LEADERSHIP_HANDOVER).await;
}

/// How long a broker keeps serving after its leaderships moved.
const LEADERSHIP_HANDOVER: Duration = Duration::from_millis(300);

/// Bounds of the shutdown phases; their sum is `SHUTDOWN_BOUND`.
const CONTROLLED_SHUTDOWN: Duration = Duration::from_secs(5);
const CONNECTIONS_DRAIN: Duration = Duration::from_secs(3);
const HTTP_DRAIN: Duration = Duration::from_secs(2);
const CLUSTER_LEAVE: Duration = Duration::from_secs(3);
const LOG_FLUSH: Duration = Duration::from_secs(10);
/// SIGTERM to exit, at most (main's runtime shutdown adds nothing: blocking
/// tasks still running are abandoned).
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(23);

/// Runs one shutdown phase for at most `bound`, logging how it ended.
async fn phase(what: &str, bound: Duration, work: impl std::future::Future<Output = ()>) {
    let started = std::time::Instant::now();
    match tokio::time::timeout(bound, work).await {
        Ok(()) => info!(
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "shutdown: {what}"
        ),
        Err(_) => warn!(
            bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
            "shutdown: gave up waiting: {what}"
        ),
    }
}

/// Accepts connections on one listener; every listener shares the caps:
/// `[all connections, connections not yet authenticated]` (the second is
/// taken on SASL listeners only and given back at login).
async fn accept_loop(
    listener: &TcpListener,
    context: crate::security::ListenerContext,
    [limiter, unauthenticated]: [&Arc<ConnectionLimiter>; 2],
    broker: &Arc<Broker>,
    shutdown_tx: &broadcast::Sender<()>,
    conn_done_tx: &mpsc::Sender<()>,
) {
    let mut refusals = RefusalLog::default();
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let sasl = context.sasl.is_some();
                let slots = limiter.try_acquire(peer.ip()).and_then(|slot| {
                    let pre_auth = sasl.then(|| unauthenticated.try_acquire(peer.ip()));
                    Ok((slot, pre_auth.transpose()?))
                });
                let (slot, pre_auth) = match slots {
                    Ok(slots) => slots,
                    Err(refused) => {
                        // Kafka closes such a connection at once, unanswered.
                        broker
                            .metrics
                            .connections_refused_total
                            .get_or_create(&ReasonLabels {
                                reason: refused.reason(),
                            })
                            .inc();
                        refusals.log(peer, refused.reason());
                        drop(stream);
                        continue;
                    }
                };
                let broker = broker.clone();
                let mut shutdown = shutdown_tx.subscribe();
                let done = conn_done_tx.clone();
                let throttle_ms = broker.quotas.connection_throttle_ms(peer.ip());
                if throttle_ms > 0 {
                    // KIP-612: over its IP's connection_creation_rate, the
                    // connection is held unserved for the throttle time
                    // (its places kept), then closed.
                    broker.metrics.connections_throttled_total.inc();
                    refusals.log(peer, "connection_creation_rate");
                    tokio::spawn(async move {
                        tokio::select! {
                            () = tokio::time::sleep(std::time::Duration::from_millis(throttle_ms)) => {}
                            _ = shutdown.recv() => {}
                        }
                        drop((stream, slot, pre_auth, done));
                    });
                    continue;
                }
                let context = context.clone();
                tokio::spawn(async move {
                    connection::serve(broker, stream, peer, context, shutdown, slot, pre_auth)
                        .await;
                    drop(done);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning on accept.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Logs refused connections at most once a second per listener (a flood of
/// them must not flood the log too); the metric counts every one.
#[derive(Default)]
struct RefusalLog {
    last: Option<std::time::Instant>,
    suppressed: u64,
}

impl RefusalLog {
    fn log(&mut self, peer: std::net::SocketAddr, reason: &'static str) {
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            self.suppressed += 1;
            return;
        }
        info!(%peer, reason, suppressed = self.suppressed, "connection refused: cap reached (closed at once)");
        self.last = Some(now);
        self.suppressed = 0;
    }
}
