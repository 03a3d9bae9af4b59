//! Who may speak on the raft/controller port: only a voter that knows the
//! cluster secret. Every connection opens with a mutual challenge-response
//! before any frame: the secret never crosses the wire, each side proves it
//! with an HMAC-SHA256 over both sides' fresh nonces, so a captured
//! handshake cannot be replayed on another connection, and the server
//! learns the authenticated node id (a broker may only heartbeat for
//! itself).
//!
//! ```text
//! server → client  nonce_s (32 B)
//! client → server  node_id (i32 BE) ‖ nonce_c (32 B) ‖ HMAC(k, "chronik-raft/client" ‖ nonce_s ‖ nonce_c ‖ node_id)
//! server → client  HMAC(k, "chronik-raft/server" ‖ nonce_c ‖ nonce_s ‖ node_id)
//! ```
//!
//! Owns: the secret (`--cluster-secret-file`, created when missing), the
//! handshake, each step within `HANDSHAKE_TIMEOUT`, and keys derived from
//! the secret for other uses (`derive`). Must not: carry frames (`rpc`
//! does). The frames after the handshake are not encrypted: the raft port
//! speaks cleartext (the Kafka listeners are where TLS applies).

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long either side may take over the whole handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const NONCE_LEN: usize = 32;
const MAC_LEN: usize = 32;
const CLIENT_LABEL: &[u8] = b"chronik-raft/client";
const SERVER_LABEL: &[u8] = b"chronik-raft/server";

/// The key every voter shares: SHA-256 of the secret file's contents.
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

fn refused(reason: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("raft handshake refused: {reason}"),
    )
}

/// The client side: proves this node (`node_id`) knows the secret and
/// checks the server does too.
pub async fn client_handshake<S>(
    stream: &mut S,
    secret: &ClusterSecret,
    node_id: i32,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let exchange = async {
        let mut nonce_s = [0u8; NONCE_LEN];
        stream.read_exact(&mut nonce_s).await?;
        let nonce_c = nonce();
        let id = node_id.to_be_bytes();
        let tag = secret
            .mac(CLIENT_LABEL, &[&nonce_s, &nonce_c, &id])
            .finalize()
            .into_bytes();
        let mut hello = Vec::with_capacity(4 + NONCE_LEN + MAC_LEN);
        hello.extend_from_slice(&id);
        hello.extend_from_slice(&nonce_c);
        hello.extend_from_slice(&tag);
        stream.write_all(&hello).await?;
        stream.flush().await?;
        let mut answer = [0u8; MAC_LEN];
        stream.read_exact(&mut answer).await?;
        secret
            .mac(SERVER_LABEL, &[&nonce_c, &nonce_s, &id])
            .verify_slice(&answer)
            .map_err(|_| refused("the server does not know the cluster secret"))
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange)
        .await
        .map_err(|_| refused("timed out"))?
}

/// The server side: returns the authenticated node id, which must be one
/// of `voters`.
pub async fn server_handshake<S>(
    stream: &mut S,
    secret: &ClusterSecret,
    voters: &[i32],
) -> io::Result<i32>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let exchange = async {
        let nonce_s = nonce();
        stream.write_all(&nonce_s).await?;
        stream.flush().await?;
        let mut hello = [0u8; 4 + NONCE_LEN + MAC_LEN];
        stream.read_exact(&mut hello).await?;
        let id = [hello[0], hello[1], hello[2], hello[3]];
        let nonce_c = &hello[4..4 + NONCE_LEN];
        let tag = &hello[4 + NONCE_LEN..];
        secret
            .mac(CLIENT_LABEL, &[&nonce_s, nonce_c, &id])
            .verify_slice(tag)
            .map_err(|_| refused("the client does not know the cluster secret"))?;
        let node_id = i32::from_be_bytes(id);
        if !voters.contains(&node_id) {
            return Err(refused(&format!(
                "node {node_id} is not a configured voter"
            )));
        }
        let answer = secret
            .mac(SERVER_LABEL, &[nonce_c, &nonce_s, &id])
            .finalize()
            .into_bytes();
        stream.write_all(&answer).await?;
        stream.flush().await?;
        Ok(node_id)
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange)
        .await
        .map_err(|_| refused("timed out"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(
        client_secret: &ClusterSecret,
        server_secret: &ClusterSecret,
        node_id: i32,
    ) -> (io::Result<()>, io::Result<i32>) {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let server_secret = server_secret.clone();
        let server =
            tokio::spawn(async move { server_handshake(&mut b, &server_secret, &[1, 2, 3]).await });
        let client = client_handshake(&mut a, client_secret, node_id).await;
        drop(a);
        (client, server.await.expect("server task"))
    }

    #[tokio::test]
    async fn a_shared_secret_authenticates_both_sides_and_names_the_node() {
        let secret = ClusterSecret::from_bytes(b"0123456789abcdef");
        let (client, server) = run(&secret, &secret, 2).await;
        client.expect("client accepted");
        assert_eq!(server.expect("server accepted"), 2);
    }

    #[tokio::test]
    async fn a_wrong_secret_or_an_unknown_node_is_refused() {
        let secret = ClusterSecret::from_bytes(b"0123456789abcdef");
        let other = ClusterSecret::from_bytes(b"fedcba9876543210");
        let (client, server) = run(&other, &secret, 2).await;
        assert!(server.is_err() && client.is_err(), "wrong secret accepted");
        let (_, server) = run(&secret, &secret, 7).await;
        assert!(server.is_err(), "a node outside the voters accepted");
    }

    /// Attack: record an honest node's handshake, then replay its answer
    /// on a new connection. The server's nonce is fresh per connection, so
    /// the recorded MAC proves nothing there.
    #[tokio::test]
    async fn a_recorded_handshake_replayed_on_a_new_connection_is_refused() {
        let secret = ClusterSecret::from_bytes(b"0123456789abcdef");
        let (mut client, mut server) = tokio::io::duplex(1024);
        let server_secret = secret.clone();
        let honest =
            tokio::spawn(
                async move { server_handshake(&mut server, &server_secret, &[1, 2, 3]).await },
            );
        // A client that records what it sends.
        let mut nonce_s = [0u8; NONCE_LEN];
        client.read_exact(&mut nonce_s).await.expect("nonce");
        let nonce_c = [7u8; NONCE_LEN];
        let id = 2i32.to_be_bytes();
        let mut hello = id.to_vec();
        hello.extend_from_slice(&nonce_c);
        hello.extend_from_slice(
            &secret
                .mac(CLIENT_LABEL, &[&nonce_s, &nonce_c, &id])
                .finalize()
                .into_bytes(),
        );
        client.write_all(&hello).await.expect("hello");
        assert_eq!(
            honest.await.expect("task").expect("the honest handshake"),
            2
        );

        let (mut attacker, mut server) = tokio::io::duplex(1024);
        let server_secret = secret.clone();
        let replayed =
            tokio::spawn(
                async move { server_handshake(&mut server, &server_secret, &[1, 2, 3]).await },
            );
        let mut fresh_nonce = [0u8; NONCE_LEN];
        attacker.read_exact(&mut fresh_nonce).await.expect("nonce");
        assert_ne!(fresh_nonce, nonce_s, "the server reused a nonce");
        attacker.write_all(&hello).await.expect("replay");
        assert!(
            replayed.await.expect("task").is_err(),
            "a replayed handshake was accepted"
        );
    }

    #[test]
    fn the_secret_file_is_created_once_and_shared() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cluster.secret");
        let (a, created) = ClusterSecret::load_or_create(&path).expect("create");
        assert!(created);
        let (b, created) = ClusterSecret::load_or_create(&path).expect("load");
        assert!(!created);
        assert_eq!(a.0, b.0);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&path).expect("meta").permissions().mode() & 0o777,
            0o600
        );
    }
}
