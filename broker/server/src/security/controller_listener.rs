//! The controller listener's security protocol: what the raft port (the
//! metadata quorum's controller RPCs, `--raft-listen`) speaks beneath the
//! cluster-secret handshake. Kafka names it through
//! `controller.listener.names` and that listener's entry in
//! `listener.security.protocol.map`; here it is
//! `--controller-listener-security-protocol`, or the `CONTROLLER` entry of
//! `--listener-security-protocol-map`.
//!
//! Owns: the flag, its default (SSL when the node has a key store and a
//! trust store, since each node must verify the other's certificate),
//! refusing a cluster whose Kafka listeners use TLS while its raft port
//! would be cleartext by default, and loading the raft port's TLS
//! (`chronik_metadata::ControllerSecurity`). Must not: speak TLS itself
//! (chronik-metadata's `transport` does, with chronik-tls).

use anyhow::{bail, Context};
use chronik_metadata::ControllerSecurity;
use clap::ValueEnum;
use tracing::{info, warn};

use crate::security::listeners::parse_protocol_map;
use crate::security::{SecurityConfig, SecurityProtocol};

/// The name whose `--listener-security-protocol-map` entry is read, as
/// Kafka's `controller.listener.names=CONTROLLER`.
pub const CONTROLLER_LISTENER_NAME: &str = "CONTROLLER";

/// The protocols the raft port speaks (SASL has no place there: the
/// cluster secret authenticates nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ControllerProtocol {
    /// Cleartext: the frames after the cluster-secret handshake (SCRAM
    /// credentials, ACLs, the whole metadata log) cross the network as is.
    #[value(name = "PLAINTEXT")]
    Plaintext,
    /// Mutual TLS: each node presents --ssl-keystore-location's
    /// certificate and verifies its peer's against --ssl-truststore-location.
    #[value(name = "SSL")]
    Ssl,
}

impl std::fmt::Display for ControllerProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ControllerProtocol::Plaintext => "PLAINTEXT",
            ControllerProtocol::Ssl => "SSL",
        })
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ControllerListenerArgs {
    /// Kafka's security protocol of the controller listener
    /// (`listener.security.protocol.map` for `controller.listener.names`):
    /// what the raft port (--raft-listen) speaks beneath the cluster-secret
    /// handshake, PLAINTEXT or SSL (mutual TLS with the --ssl-* key store
    /// and trust store). Every node of a cluster must say the same. Default:
    /// the map's CONTROLLER entry, else SSL when --ssl-keystore-location and
    /// --ssl-truststore-location are given, else PLAINTEXT.
    #[arg(
        long,
        env = "CHRONIK_CONTROLLER_LISTENER_SECURITY_PROTOCOL",
        value_enum,
        ignore_case = true
    )]
    pub controller_listener_security_protocol: Option<ControllerProtocol>,
}

/// The protocol from the flag, the map's CONTROLLER entry, or the default.
/// `several_nodes`: other nodes dial this one's raft port.
pub fn resolve(
    flag: Option<ControllerProtocol>,
    protocol_map: &str,
    security: &SecurityConfig,
    broker: bool,
    several_nodes: bool,
) -> anyhow::Result<ControllerProtocol> {
    let mapped = match parse_protocol_map(protocol_map)?.get(CONTROLLER_LISTENER_NAME) {
        None => None,
        Some(SecurityProtocol::Plaintext) => Some(ControllerProtocol::Plaintext),
        Some(SecurityProtocol::Ssl) => Some(ControllerProtocol::Ssl),
        Some(other) => bail!(
            "--listener-security-protocol-map: {CONTROLLER_LISTENER_NAME}:{other} is not served: the raft port \
             authenticates nodes with the cluster secret, so its protocol is PLAINTEXT or SSL"
        ),
    };
    let explicit = match (flag, mapped) {
        (Some(flag), Some(mapped)) if flag != mapped => bail!(
            "--controller-listener-security-protocol {flag} contradicts \
             --listener-security-protocol-map's {CONTROLLER_LISTENER_NAME}:{mapped}"
        ),
        (flag, mapped) => flag.or(mapped),
    };
    let stores = security
        .tls
        .as_ref()
        .is_some_and(|tls| tls.truststore.is_some());
    let tls_listeners = broker && security.listeners.iter().any(|l| l.protocol.uses_tls());
    Ok(match explicit {
        Some(ControllerProtocol::Ssl) if !stores => bail!(
            "--controller-listener-security-protocol SSL needs --ssl-keystore-location and \
             --ssl-truststore-location: each node presents its certificate and verifies its peers' against the trust store"
        ),
        Some(protocol) => protocol,
        None if stores => ControllerProtocol::Ssl,
        None if tls_listeners && several_nodes => bail!(
            "this node's Kafka listeners use TLS, so its raft port must too, which needs --ssl-truststore-location \
             (each node verifies its peers' certificates against it); give it, or \
             --controller-listener-security-protocol PLAINTEXT to keep the raft port (SCRAM credentials, ACLs, \
             the metadata log) in cleartext"
        ),
        None => ControllerProtocol::Plaintext,
    })
}

/// Loads the raft port's TLS for `protocol` and says at start what the
/// port speaks. Must run inside the runtime (the files are reloaded).
pub fn load(
    protocol: ControllerProtocol,
    security: &SecurityConfig,
    several_nodes: bool,
) -> anyhow::Result<ControllerSecurity> {
    match protocol {
        ControllerProtocol::Ssl => {
            let settings = security.tls.as_ref().context(
                "--controller-listener-security-protocol SSL needs --ssl-keystore-location",
            )?;
            let loaded = ControllerSecurity::ssl(settings).context(
                "loading TLS for the raft port (--controller-listener-security-protocol SSL)",
            )?;
            info!(
                keystore = %settings.keystore.display(),
                "raft port: SSL (mutual TLS: peers present certificates the trust store vouches for), cluster-secret handshake inside"
            );
            Ok(loaded)
        }
        ControllerProtocol::Plaintext if several_nodes => {
            warn!("raft port: PLAINTEXT: the metadata log (SCRAM credentials, ACLs) crosses the network unencrypted \
                   after the cluster-secret handshake (--controller-listener-security-protocol SSL encrypts it)");
            Ok(ControllerSecurity::Plaintext)
        }
        ControllerProtocol::Plaintext => Ok(ControllerSecurity::Plaintext),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Args, Config};
    use clap::Parser;

    fn config(flags: &[&str]) -> anyhow::Result<Config> {
        let mut argv = vec!["chronik-server"];
        argv.extend_from_slice(flags);
        Config::try_from(Args::try_parse_from(argv)?)
    }

    /// (flags, expected protocol or the error's words), for node 2 of 3.
    #[test]
    fn the_raft_port_defaults_to_tls_when_nodes_can_verify_each_other() {
        let cluster = ["--node-id", "2", "--peers", "1@127.0.0.1,2@127.0.0.2"];
        let stores = [
            "--ssl-keystore-location",
            "k.pem",
            "--ssl-truststore-location",
            "ca.pem",
        ];
        let ssl_listener = [
            "--listeners",
            "SSL://127.0.0.2:9094,PLAINTEXT://127.0.0.2:9092",
            "--ssl-keystore-location",
            "k.pem",
        ];
        let table: &[(&[&str], Result<ControllerProtocol, &str>)] = &[
            (&[], Ok(ControllerProtocol::Plaintext)),
            (&stores, Ok(ControllerProtocol::Ssl)),
            (
                &[
                    &stores[..],
                    &["--controller-listener-security-protocol", "plaintext"],
                ]
                .concat(),
                Ok(ControllerProtocol::Plaintext),
            ),
            (
                &["--controller-listener-security-protocol", "SSL"],
                Err("needs --ssl-keystore-location and --ssl-truststore-location"),
            ),
            (
                &ssl_listener,
                Err("its raft port must too, which needs --ssl-truststore-location"),
            ),
            (
                &[
                    &ssl_listener[..],
                    &["--controller-listener-security-protocol", "PLAINTEXT"],
                ]
                .concat(),
                Ok(ControllerProtocol::Plaintext),
            ),
            (
                &[
                    &stores[..],
                    &[
                        "--listener-security-protocol-map",
                        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    ],
                ]
                .concat(),
                Ok(ControllerProtocol::Plaintext),
            ),
            (
                &[
                    "--listener-security-protocol-map",
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
                ],
                Err("is not served"),
            ),
            (
                &[
                    &stores[..],
                    &[
                        "--listener-security-protocol-map",
                        "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
                        "--controller-listener-security-protocol",
                        "PLAINTEXT",
                    ],
                ]
                .concat(),
                Err("contradicts"),
            ),
        ];
        for (i, (flags, expected)) in table.iter().enumerate() {
            let got = config(&[&cluster[..], flags].concat());
            match (got, expected) {
                (Ok(c), Ok(p)) => assert_eq!(c.controller_protocol, *p, "row {i}"),
                (Err(e), Err(words)) => {
                    assert!(format!("{e:#}").contains(words), "row {i}: {e:#}")
                }
                (got, _) => panic!(
                    "row {i}: {:?}",
                    got.map(|c| c.controller_protocol)
                        .map_err(|e| e.to_string())
                ),
            }
        }
        // A quorum of one with a TLS listener and no trust store: nobody
        // dials its raft port.
        let alone = config(&[
            "--listeners",
            "SSL://127.0.0.1:0",
            "--ssl-keystore-location",
            "k.pem",
        ]);
        assert_eq!(
            alone.expect("config").controller_protocol,
            ControllerProtocol::Plaintext
        );
    }
}
