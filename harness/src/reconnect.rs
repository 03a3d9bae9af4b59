//! How the harness's librdkafka clients (the ingestor's `--producer
//! librdkafka`, chronik-consumer, chronik-bench) find a broker that moved:
//! the connection settings they start from, before the user's own
//! properties (`-X` / `--client-property`), which may override each one.
//!
//! A broker pod deleted on Kubernetes comes back under the same name on a
//! new IP; the old address then drops SYNs instead of refusing them, so a
//! dial to it hangs until `socket.connection.setup.timeout.ms` (librdkafka's
//! default 30 s) runs out, and only then does the next attempt resolve the
//! name again (k8s-perf/README.md measured a 23 s stall for a 7 s pod
//! return). librdkafka looks the host name up again on a connect attempt
//! once its cached addresses are older than `broker.address.ttl`, and tries
//! every address it returns (`client.dns.lookup=use_all_dns_ips`, its
//! default, left as it is). The native producer
//! (ingestor/src/producer/native/settings.rs) has the same defaults under
//! the same names.

/// (librdkafka property, value) pairs every harness client sets first.
pub const LIBRDKAFKA_RECONNECT: [(&str, &str); 4] = [
    // a dial to a gone address given up after 3 s (TCP, TLS and SASL), not 30
    ("socket.connection.setup.timeout.ms", "3000"),
    // the first retry after 100 ms, doubling (with jitter) up to 1 s: a
    // returning broker is reached within a second, a dead one is dialled
    // at most about once a second (librdkafka's maximum is 10 s)
    ("reconnect.backoff.ms", "100"),
    ("reconnect.backoff.max.ms", "1000"),
    // resolved addresses kept 1 s at most (librdkafka's default, pinned)
    ("broker.address.ttl", "1000"),
];
