//! Who may speak on the raft/controller port: any node that proves the
//! cluster secret, under the node id it proved it with (the server's
//! `admits` decides which ids; the rpc server takes every id ≥ 0). What
//! that node may then send is not decided here: `rpc_server`'s `permitted`
//! takes votes and replication only from voters, and lets any node
//! (observers included) join, heartbeat or shut down only as itself. Every connection opens with a mutual
//! challenge-response before any frame: the secret never crosses the wire,
//! each side proves it with an HMAC-SHA256 over both sides' fresh nonces,
//! so a captured handshake cannot be replayed on another connection, and
//! the server learns the authenticated node id.
//!
//! ```text
//! server → client  nonce_s (32 B)
//! client → server  node_id (i32 BE) ‖ nonce_c (32 B) ‖ HMAC(k, "chronik-raft/client" ‖ nonce_s ‖ nonce_c ‖ node_id)
//! server → client  HMAC(k, "chronik-raft/server" ‖ nonce_c ‖ nonce_s ‖ node_id)
//!                   or, refusing, "chronik-refused\0" ‖ reason code (1 B) ‖ 15 zero bytes
//! ```
//!
//! A refusal is as long as the answer it replaces, so a client reads it in
//! the same place (one from before refusals existed reads it as a bad
//! answer, as it read the close it used to get). It carries a code and
//! nothing derived from the secret or either MAC: "wrong secret" goes only
//! to the client whose proof failed, which learns nothing it did not know,
//! and "not a voter" (an id `admits` refuses) only to one that proved the
//! secret.
//!
//! Owns: the secret (`--cluster-secret-file`, created when missing), the
//! handshake, the whole of it within `HANDSHAKE_TIMEOUT`, why one failed
//! (`HandshakeError`, the text both ends log), the bound on those log
//! lines (`RefusalLog`), and keys derived from the secret for other uses
//! (`derive`). Must not: carry frames (`rpc` does), or log a handshake
//! (its callers know which peer it was). Encryption is not its business:
//! with `--controller-listener-security-protocol SSL` the handshake runs
//! inside mutual TLS (`transport`); on a cleartext raft port (PLAINTEXT)
//! it proves who is speaking, but the frames after it travel unencrypted.
//! A cleartext server refuses a TLS client's hello (`TlsPeer`), so a
//! mismatched pair of nodes names the mismatch on both ends.

use std::collections::HashMap;
use std::fs;
use std::hash::Hash;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long either side may take over the whole handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Refused handshakes are logged at most once per peer this often (each
/// line counts the ones held back), so a flood of bad connections cannot
/// fill the disk.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);
pub(crate) const NONCE_LEN: usize = 32;
const MAC_LEN: usize = 32;
pub(crate) const HELLO_LEN: usize = 4 + NONCE_LEN + MAC_LEN;
/// Opens a refusal sent in place of the server's answer. An answer (a MAC)
/// is checked first, and begins with these 16 bytes with probability 2^-128.
const REFUSAL_PREFIX: &[u8; 16] = b"chronik-refused\0";
const CLIENT_LABEL: &[u8] = b"chronik-raft/client";
const SERVER_LABEL: &[u8] = b"chronik-raft/server";

/// The key every node of the cluster shares: SHA-256 of the secret file's contents.
#[derive(Clone)]
pub struct ClusterSecret(Arc<[u8; 32]>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

impl ClusterSecret {
    pub fn from_bytes(material: &[u8]) -> ClusterSecret {
        ClusterSecret(Arc::new(Sha256::digest(material).into()))
    }

    /// Reads the secret at `path`, creating it (random, mode 0600) when it
    /// does not exist yet; several nodes on one host pointing at the same
    /// path share it whichever creates it. Returns whether it was created.
    pub fn load_or_create(path: &Path) -> io::Result<(ClusterSecret, bool)> {
        let created = match create_new(path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e),
        };
        let material = fs::read(path)?;
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(path)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(path = %path.display(), mode = format!("{:o}", mode & 0o777), "the cluster secret is readable by other users: chmod 600 it");
            }
        }
        if material.len() < 16 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} holds {} bytes; a cluster secret needs at least 16",
                    path.display(),
                    material.len()
                ),
            ));
        }
        Ok((ClusterSecret::from_bytes(&material), created))
    }

    /// A key for another use of the secret (`label` names the use), so one
    /// secret file gives every node the same keys without reusing it as is.
    pub fn derive(&self, label: &[u8]) -> [u8; 32] {
        self.mac(b"chronik derive ", &[label])
            .finalize()
            .into_bytes()
            .into()
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
        // An HMAC key of any length is accepted.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0[..])
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        mac.update(label);
        for part in parts {
            mac.update(part);
        }
        mac
    }
}

/// Writes a random secret to `path` atomically: complete in a temporary
/// file first, then hard-linked into place, which fails with
/// `AlreadyExists` when another node got there first — a reader never sees
/// a half-written secret.
fn create_new(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        return Err(io::ErrorKind::AlreadyExists.into());
    }
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut secret = String::new();
        for _ in 0..2 {
            secret.push_str(&uuid::Uuid::new_v4().simple().to_string());
        }
        file.write_all(secret.as_bytes())?;
        file.sync_all()?;
        fs::hard_link(&tmp, path)
    })();
    let _ = fs::remove_file(&tmp);
    written
}

fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    n[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    n
}

/// Why a server refused a client, as it tells the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// The client's proof does not verify under the server's secret.
    WrongSecret,
    /// The client proved the secret as a node id the server does not admit.
    NotAVoter,
    /// The server's raft port speaks TLS and the client spoke cleartext.
    TlsRequired,
    /// The server's raft port speaks cleartext and the client wanted TLS
    /// (the client rarely reads it: it knows from the server's nonce).
    CleartextOnly,
    /// A code this build does not know (sent by a newer peer).
    Other(u8),
}

impl RefusalReason {
    fn code(self) -> u8 {
        match self {
            RefusalReason::WrongSecret => 1,
            RefusalReason::NotAVoter => 2,
            RefusalReason::TlsRequired => 3,
            RefusalReason::CleartextOnly => 4,
            RefusalReason::Other(code) => code,
        }
    }

    pub(crate) fn encode(self) -> [u8; MAC_LEN] {
        let mut refusal = [0u8; MAC_LEN];
        refusal[..REFUSAL_PREFIX.len()].copy_from_slice(REFUSAL_PREFIX);
        refusal[REFUSAL_PREFIX.len()] = self.code();
        refusal
    }

    /// The refusal in `answer`, if it is one.
    fn decode(answer: &[u8; MAC_LEN]) -> Option<RefusalReason> {
        let (prefix, rest) = answer.split_at(REFUSAL_PREFIX.len());
        if prefix != REFUSAL_PREFIX {
            return None;
        }
        Some(match rest[0] {
            1 => RefusalReason::WrongSecret,
            2 => RefusalReason::NotAVoter,
            3 => RefusalReason::TlsRequired,
            4 => RefusalReason::CleartextOnly,
            code => RefusalReason::Other(code),
        })
    }
}

/// The handshake's three messages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    ServerNonce,
    ClientHello,
    ServerAnswer,
}

impl Step {
    fn len(self) -> usize {
        match self {
            Step::ServerNonce => NONCE_LEN,
            Step::ClientHello => HELLO_LEN,
            Step::ServerAnswer => MAC_LEN,
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::ServerNonce => "the server's nonce",
            Step::ClientHello => "the client's hello",
            Step::ServerAnswer => "the server's answer",
        })
    }
}

/// Why a handshake failed, as the side that saw it can tell. Its text is
/// what both ends log: it names the likely misconfiguration, never any
/// secret or MAC material.
#[derive(Debug)]
pub enum HandshakeError {
    /// (server) The client's proof does not verify under this node's secret.
    WrongSecret,
    /// (server) The client proved the secret as a node id this node does
    /// not admit.
    NotAVoter(i32),
    /// (client) The server refused this node and said why.
    Refused(RefusalReason),
    /// (server, TLS raft port) The client spoke cleartext; its hello
    /// names `node_id` (unproven).
    CleartextPeer {
        node_id: i32,
    },
    /// (server, cleartext raft port) The client opened with TLS.
    TlsPeer,
    /// (client, TLS) The server sent a cleartext handshake's nonce, not
    /// the TLS banner: its raft port speaks cleartext.
    PeerCleartext,
    /// The TLS handshake failed (`refused`: the peer's certificate or
    /// protocol was refused, as opposed to a connection that broke or
    /// stalled).
    Tls {
        reason: String,
        refused: bool,
    },
    /// (client) The server's answer is neither its proof nor a refusal.
    ServerUnproven,
    /// The peer closed the connection `received` bytes into `step`.
    Closed {
        step: Step,
        received: usize,
    },
    /// The handshake was still at `step` when `HANDSHAKE_TIMEOUT` ran out.
    TimedOut {
        step: Step,
    },
    Io {
        step: Step,
        error: io::Error,
    },
}

impl HandshakeError {
    /// A refusal (the secret, the voters), as opposed to a connection that
    /// failed or stalled.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            HandshakeError::WrongSecret
                | HandshakeError::NotAVoter(_)
                | HandshakeError::Refused(_)
                | HandshakeError::ServerUnproven
                | HandshakeError::CleartextPeer { .. }
                | HandshakeError::TlsPeer
                | HandshakeError::PeerCleartext
                | HandshakeError::Tls { refused: true, .. }
                | HandshakeError::Closed {
                    step: Step::ServerAnswer,
                    ..
                }
        ) || self.is_tls_alert()
    }

    /// An error of the TLS session after its handshake (rustls reports
    /// them as invalid data; a cleartext stream never does): on TLS 1.3 a
    /// client learns here that the server refused its certificate.
    fn is_tls_alert(&self) -> bool {
        matches!(self, HandshakeError::Io { error, .. } if error.kind() == io::ErrorKind::InvalidData)
    }

    /// A connection closed before the peer sent anything of its own: a
    /// port probe, a peer shutting down, or (client side) the peer's
    /// connection caps. Worth a debug line, not a warning.
    pub fn is_routine(&self) -> bool {
        matches!(
            self,
            HandshakeError::Closed {
                step: Step::ServerNonce | Step::ClientHello,
                received: 0
            }
        )
    }

    pub fn kind(&self) -> io::ErrorKind {
        match self {
            HandshakeError::Closed { .. } if !self.is_refusal() => io::ErrorKind::UnexpectedEof,
            HandshakeError::TimedOut { .. } => io::ErrorKind::TimedOut,
            HandshakeError::Tls { refused: false, .. } => io::ErrorKind::ConnectionAborted,
            HandshakeError::Io { error, .. } => error.kind(),
            _ => io::ErrorKind::PermissionDenied,
        }
    }
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SECRETS_DIFFER: &str = "the two nodes' --cluster-secret-file contents differ";
        const ALIKE: &str = "give every node the same --controller-listener-security-protocol \
            (SSL: each presents its --ssl-keystore-location certificate and verifies the other's against \
            --ssl-truststore-location)";
        match self {
            HandshakeError::WrongSecret => write!(
                f,
                "its proof does not match this node's cluster secret (bad MAC): {SECRETS_DIFFER}"
            ),
            HandshakeError::NotAVoter(node_id) => write!(
                f,
                "it proved the cluster secret as node {node_id}, an id this node does not admit"
            ),
            HandshakeError::Refused(RefusalReason::WrongSecret) => write!(
                f,
                "the peer says this node's proof does not match its cluster secret (bad MAC): {SECRETS_DIFFER}"
            ),
            HandshakeError::Refused(RefusalReason::NotAVoter) => write!(
                f,
                "the peer does not admit this node's id"
            ),
            HandshakeError::Refused(RefusalReason::TlsRequired) => write!(
                f,
                "the peer's raft port requires TLS (its --controller-listener-security-protocol is SSL) \
                 and this node connects in cleartext (PLAINTEXT): {ALIKE}"
            ),
            HandshakeError::Refused(RefusalReason::CleartextOnly) => write!(
                f,
                "the peer's raft port speaks cleartext and this node connects with TLS: {ALIKE}"
            ),
            HandshakeError::CleartextPeer { node_id } => write!(
                f,
                "it connected in cleartext (its hello names node {node_id}) but this node's raft port \
                 requires TLS (--controller-listener-security-protocol SSL): cleartext raft connections are \
                 refused; {ALIKE}"
            ),
            HandshakeError::TlsPeer => write!(
                f,
                "it opened with TLS but this node's raft port speaks cleartext \
                 (--controller-listener-security-protocol PLAINTEXT): {ALIKE}"
            ),
            HandshakeError::PeerCleartext => write!(
                f,
                "the peer's raft port speaks cleartext (its --controller-listener-security-protocol is \
                 PLAINTEXT, or it predates TLS on the raft port) and this node requires TLS: {ALIKE}"
            ),
            // chronik-tls says "TLS handshake … failed: why".
            HandshakeError::Tls { reason, .. } => f.write_str(reason),
            HandshakeError::Io { step, error } if self.is_tls_alert() => write!(
                f,
                "the TLS session failed during {step}: {error} (the peer refused this node's certificate, \
                 or does not trust its issuer)"
            ),
            HandshakeError::Refused(RefusalReason::Other(code)) => {
                write!(f, "the peer refused this node (reason code {code})")
            }
            HandshakeError::ServerUnproven => write!(
                f,
                "the peer's answer does not prove this node's cluster secret: {SECRETS_DIFFER}, or it is not a voter of this cluster"
            ),
            HandshakeError::Closed {
                step: Step::ServerNonce,
                received: 0,
            } => write!(
                f,
                "the peer closed the connection before the handshake began (no connection place for this node on its raft port, or it is shutting down)"
            ),
            HandshakeError::Closed {
                step: Step::ServerAnswer,
                received: 0,
            } => write!(
                f,
                "the peer closed the connection during the handshake without saying why: its cluster secret probably differs, or it does not list this node as a voter"
            ),
            HandshakeError::Closed { step, received } => write!(
                f,
                "the peer closed the connection after {received} of the {} bytes of {step}",
                step.len()
            ),
            HandshakeError::TimedOut { step } => {
                write!(f, "{step} did not arrive within {HANDSHAKE_TIMEOUT:?}")
            }
            HandshakeError::Io { step, error } => write!(f, "{error} during {step}"),
        }
    }
}

impl std::error::Error for HandshakeError {}

/// Fills `buf` by `deadline`, or says how far it got before the peer closed.
pub(crate) async fn read_step<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut [u8],
    step: Step,
    deadline: tokio::time::Instant,
) -> Result<(), HandshakeError> {
    let mut received = 0;
    while received < buf.len() {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf[received..])).await {
            Err(_) => return Err(HandshakeError::TimedOut { step }),
            Ok(Ok(0)) => return Err(HandshakeError::Closed { step, received }),
            Ok(Ok(n)) => received += n,
            Ok(Err(error)) => return Err(HandshakeError::Io { step, error }),
        }
    }
    Ok(())
}

pub(crate) async fn write_step<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    step: Step,
    deadline: tokio::time::Instant,
) -> Result<(), HandshakeError> {
    let written = async {
        stream.write_all(bytes).await?;
        stream.flush().await
    };
    match tokio::time::timeout_at(deadline, written).await {
        Err(_) => Err(HandshakeError::TimedOut { step }),
        Ok(written) => written.map_err(|error| HandshakeError::Io { step, error }),
    }
}

/// The client side: proves this node (`node_id`) knows the secret and
/// checks the server does too.
pub async fn client_handshake<S>(
    stream: &mut S,
    secret: &ClusterSecret,
    node_id: i32,
) -> Result<(), HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    let mut nonce_s = [0u8; NONCE_LEN];
    read_step(stream, &mut nonce_s, Step::ServerNonce, deadline).await?;
    let nonce_c = nonce();
    let id = node_id.to_be_bytes();
    let tag = secret
        .mac(CLIENT_LABEL, &[&nonce_s, &nonce_c, &id])
        .finalize()
        .into_bytes();
    let mut hello = Vec::with_capacity(HELLO_LEN);
    hello.extend_from_slice(&id);
    hello.extend_from_slice(&nonce_c);
    hello.extend_from_slice(&tag);
    write_step(stream, &hello, Step::ClientHello, deadline).await?;
    let mut answer = [0u8; MAC_LEN];
    read_step(stream, &mut answer, Step::ServerAnswer, deadline).await?;
    if secret
        .mac(SERVER_LABEL, &[&nonce_c, &nonce_s, &id])
        .verify_slice(&answer)
        .is_ok()
    {
        return Ok(());
    }
    Err(RefusalReason::decode(&answer)
        .map_or(HandshakeError::ServerUnproven, HandshakeError::Refused))
}

/// The server side: returns the authenticated node id, which `admits`
/// must accept. A client refused for its proof or its id is told why
/// before the connection closes.
pub async fn server_handshake<S>(
    stream: &mut S,
    secret: &ClusterSecret,
    admits: &(dyn Fn(i32) -> bool + Sync),
) -> Result<i32, HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    let nonce_s = nonce();
    write_step(stream, &nonce_s, Step::ServerNonce, deadline).await?;
    let mut hello = [0u8; HELLO_LEN];
    read_step(stream, &mut hello, Step::ClientHello, deadline).await?;
    if crate::transport::is_tls_hello(&hello) {
        // Best effort, as below: a TLS client reads it only if it is ours.
        let refusal = RefusalReason::CleartextOnly.encode();
        let _ = write_step(stream, &refusal, Step::ServerAnswer, deadline).await;
        return Err(HandshakeError::TlsPeer);
    }
    let id = [hello[0], hello[1], hello[2], hello[3]];
    let nonce_c = &hello[4..4 + NONCE_LEN];
    let tag = &hello[4 + NONCE_LEN..];
    let node_id = i32::from_be_bytes(id);
    let refusal = if secret
        .mac(CLIENT_LABEL, &[&nonce_s, nonce_c, &id])
        .verify_slice(tag)
        .is_err()
    {
        Some((RefusalReason::WrongSecret, HandshakeError::WrongSecret))
    } else if !admits(node_id) {
        Some((RefusalReason::NotAVoter, HandshakeError::NotAVoter(node_id)))
    } else {
        None
    };
    if let Some((reason, error)) = refusal {
        // Best effort: the connection closes either way.
        let _ = write_step(stream, &reason.encode(), Step::ServerAnswer, deadline).await;
        return Err(error);
    }
    let answer = secret
        .mac(SERVER_LABEL, &[nonce_c, &nonce_s, &id])
        .finalize()
        .into_bytes();
    write_step(stream, &answer, Step::ServerAnswer, deadline).await?;
    Ok(node_id)
}

/// Keys a `RefusalLog` remembers at most; beyond that (a flood from many
/// addresses) newcomers share one key.
const REFUSAL_LOG_KEYS: usize = 1024;

/// Keeps refused handshakes from flooding the log: at most one line per
/// key (a peer) every `interval`, each saying how many were held back
/// since the previous one for that key.
pub struct RefusalLog<K> {
    interval: Duration,
    /// `None`: every key that found the map full.
    seen: Mutex<HashMap<Option<K>, Seen>>,
}

struct Seen {
    logged_at: Instant,
    held_back: u64,
}

impl<K: Eq + Hash> RefusalLog<K> {
    pub fn new(interval: Duration) -> RefusalLog<K> {
        RefusalLog {
            interval,
            seen: Mutex::default(),
        }
    }

    /// Whether a line about `key` may be written at `now`: `Some(n)`, with
    /// the `n` refusals held back since its last line, or `None` (held
    /// back, and counted).
    pub fn admit(&self, key: K, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut slot = Some(key);
        if !seen.contains_key(&slot) && seen.len() >= REFUSAL_LOG_KEYS {
            // Forget keys whose next line would be written anyway.
            seen.retain(|_, s| now.duration_since(s.logged_at) < self.interval);
            if seen.len() >= REFUSAL_LOG_KEYS {
                slot = None;
            }
        }
        match seen.get_mut(&slot) {
            Some(s) if now.duration_since(s.logged_at) < self.interval => {
                s.held_back += 1;
                None
            }
            Some(s) => {
                let held_back = std::mem::take(&mut s.held_back);
                s.logged_at = now;
                Some(held_back)
            }
            None => {
                seen.insert(
                    slot,
                    Seen {
                        logged_at: now,
                        held_back: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

#[cfg(test)]
#[path = "peer_auth_tests.rs"]
mod tests;
