//! Kafka's listener settings: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map` and `inter.broker.listener.name`,
//! parsed into one `ListenerConfig` per listener.
//!
//! Owns: the syntax (`NAME://host:port,...`, `NAME:PROTOCOL,...`), the
//! defaults Kafka applies and the consistency checks (names known to the
//! map, unique names and ports). Must not: bind sockets or resolve names
//! for anything but the address to bind.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use anyhow::{bail, Context};

/// Kafka's `SecurityProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> anyhow::Result<SecurityProtocol> {
        Ok(match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            other => bail!(
                "unknown security protocol {other:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"
            ),
        })
    }

    /// Whether connections are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients must authenticate with SASL before anything else.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        })
    }
}

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// The name of the single listener `--listen` / `--advertise` describe.
pub const PLAINTEXT_LISTENER: &str = "PLAINTEXT";

/// One Kafka listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// The listener name (upper case, as Kafka normalises it).
    pub name: String,
    pub protocol: SecurityProtocol,
    /// The host as written (empty = every interface), for logs.
    pub host: String,
    /// What to bind (port 0 picks a free port).
    pub bind: SocketAddr,
    /// The `advertised.listeners` entry for this name, if any.
    pub advertised: Option<(String, u16)>,
}

/// `NAME://host:port` → (NAME, host, port); host may be empty or `[v6]`.
fn parse_entry(entry: &str, setting: &str) -> anyhow::Result<(String, String, u16)> {
    let (name, address) = entry
        .split_once("://")
        .with_context(|| format!("{setting}: {entry:?} is not NAME://host:port"))?;
    let name = name.trim().to_ascii_uppercase();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        bail!("{setting}: bad listener name in {entry:?}");
    }
    let (host, port) = address
        .rsplit_once(':')
        .with_context(|| format!("{setting}: {entry:?} has no port"))?;
    let port: u16 = port
        .parse()
        .with_context(|| format!("{setting}: bad port in {entry:?}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((name, host.to_string(), port))
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,...`).
pub fn parse_protocol_map(map: &str) -> anyhow::Result<BTreeMap<String, SecurityProtocol>> {
    let mut parsed = BTreeMap::new();
    for item in map.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, protocol) = item.split_once(':').with_context(|| {
            format!("--listener-security-protocol-map: {item:?} is not NAME:PROTOCOL")
        })?;
        let protocol = SecurityProtocol::parse(protocol)
            .with_context(|| format!("--listener-security-protocol-map entry {item:?}"))?;
        if parsed
            .insert(name.trim().to_ascii_uppercase(), protocol)
            .is_some()
        {
            bail!("--listener-security-protocol-map names {name:?} twice");
        }
    }
    Ok(parsed)
}

/// Parses `--listeners` with `--advertised-listeners` and the protocol map.
pub fn parse_listeners(
    listeners: &str,
    advertised: Option<&str>,
    protocol_map: &str,
) -> anyhow::Result<Vec<ListenerConfig>> {
    let map = parse_protocol_map(protocol_map)?;
    let mut parsed: Vec<ListenerConfig> = Vec::new();
    for entry in listeners
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (name, host, port) = parse_entry(entry, "--listeners")?;
        let protocol = *map.get(&name).with_context(|| {
            format!("--listeners: listener {name} is not in --listener-security-protocol-map")
        })?;
        if parsed.iter().any(|l| l.name == name) {
            bail!("--listeners names {name} twice");
        }
        if port != 0 && parsed.iter().any(|l| l.bind.port() == port) {
            bail!("--listeners uses port {port} twice");
        }
        let bind_host = if host.is_empty() { "0.0.0.0" } else { &host };
        let bind = resolve(bind_host, port)?;
        parsed.push(ListenerConfig {
            name,
            protocol,
            host,
            bind,
            advertised: None,
        });
    }
    if parsed.is_empty() {
        bail!("--listeners names no listener");
    }
    for entry in advertised
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (name, host, port) = parse_entry(entry, "--advertised-listeners")?;
        let listener = parsed
            .iter_mut()
            .find(|l| l.name == name)
            .with_context(|| format!("--advertised-listeners: {name} is not in --listeners"))?;
        if host.is_empty() || port == 0 {
            bail!("--advertised-listeners: {entry:?} needs a host and a non-zero port");
        }
        listener.advertised = Some((host, port));
    }
    Ok(parsed)
}

/// The single PLAINTEXT listener of `--listen` / `--advertise`.
pub fn legacy_listener(listen: SocketAddr, advertise: Option<(String, u16)>) -> ListenerConfig {
    ListenerConfig {
        name: PLAINTEXT_LISTENER.to_string(),
        protocol: SecurityProtocol::Plaintext,
        host: listen.ip().to_string(),
        bind: listen,
        advertised: advertise,
    }
}

/// Kafka's `inter.broker.listener.name`: the named one, else PLAINTEXT
/// when there is such a listener, else the first.
pub fn inter_broker_index(
    listeners: &[ListenerConfig],
    name: Option<&str>,
) -> anyhow::Result<usize> {
    match name.map(|n| n.trim().to_ascii_uppercase()) {
        Some(name) => listeners
            .iter()
            .position(|l| l.name == name)
            .with_context(|| format!("--inter-broker-listener-name {name} is not in --listeners")),
        None => Ok(listeners
            .iter()
            .position(|l| l.name == PLAINTEXT_LISTENER)
            .unwrap_or(0)),
    }
}

fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("--listeners: cannot resolve {host}"))?
        .next()
        .with_context(|| format!("--listeners: {host} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_take_their_protocol_from_the_map() {
        let parsed = parse_listeners(
            "PLAINTEXT://127.0.0.1:9092, sasl_ssl://:9094,INTERNAL://[::1]:0",
            Some("SASL_SSL://broker.example:19094"),
            &format!("{DEFAULT_PROTOCOL_MAP},INTERNAL:SSL"),
        )
        .expect("parses");
        let summary: Vec<_> = parsed
            .iter()
            .map(|l| (l.name.as_str(), l.protocol, l.bind.to_string()))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "PLAINTEXT",
                    SecurityProtocol::Plaintext,
                    "127.0.0.1:9092".to_string()
                ),
                (
                    "SASL_SSL",
                    SecurityProtocol::SaslSsl,
                    "0.0.0.0:9094".to_string()
                ),
                ("INTERNAL", SecurityProtocol::Ssl, "[::1]:0".to_string()),
            ]
        );
        assert_eq!(parsed[1].advertised, Some(("broker.example".into(), 19094)));
        assert_eq!(inter_broker_index(&parsed, None).expect("default"), 0);
        assert_eq!(
            inter_broker_index(&parsed, Some("internal")).expect("named"),
            2
        );
        assert!(inter_broker_index(&parsed, Some("OTHER")).is_err());
    }

    #[test]
    fn inconsistent_listeners_are_refused() {
        let map = DEFAULT_PROTOCOL_MAP;
        for (listeners, advertised, why) in [
            ("CLIENT://127.0.0.1:1", None, "not in the map"),
            (
                "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
                None,
                "twice",
            ),
            (
                "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1",
                None,
                "port twice",
            ),
            ("PLAINTEXT://127.0.0.1", None, "no port"),
            ("", None, "no listener"),
            (
                "PLAINTEXT://127.0.0.1:1",
                Some("SSL://h:2"),
                "advertised unknown",
            ),
            (
                "PLAINTEXT://127.0.0.1:1",
                Some("PLAINTEXT://:2"),
                "advertised without host",
            ),
        ] {
            assert!(
                parse_listeners(listeners, advertised, map).is_err(),
                "{why}"
            );
        }
        assert!(parse_protocol_map("A:PLAINTEXT,A:SSL").is_err());
        assert!(parse_protocol_map("A:TLS").is_err());
    }
}
