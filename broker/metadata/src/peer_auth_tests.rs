//! The handshake between honest and dishonest peers, what each side says
//! about a refusal, and the bound on refusal log lines.

use super::*;

async fn run(
    client_secret: &ClusterSecret,
    server_secret: &ClusterSecret,
    node_id: i32,
) -> (Result<(), HandshakeError>, Result<i32, HandshakeError>) {
    let (mut a, mut b) = tokio::io::duplex(1024);
    let server_secret = server_secret.clone();
    let server = tokio::spawn(async move {
        server_handshake(&mut b, &server_secret, &|id| [1, 2, 3].contains(&id)).await
    });
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

/// Both ends of a refusal know why: the server from the proof, the
/// client from the refusal the server sends in place of its answer.
#[tokio::test]
async fn a_wrong_secret_or_an_unknown_node_is_refused_and_told_why() {
    let secret = ClusterSecret::from_bytes(b"0123456789abcdef");
    let other = ClusterSecret::from_bytes(b"fedcba9876543210");
    let (client, server) = run(&other, &secret, 2).await;
    assert!(
        matches!(server, Err(HandshakeError::WrongSecret)),
        "{server:?}"
    );
    assert!(
        matches!(
            client,
            Err(HandshakeError::Refused(RefusalReason::WrongSecret))
        ),
        "{client:?}"
    );
    let said = client.expect_err("refused").to_string();
    assert!(said.contains("--cluster-secret-file"), "{said}");

    let (client, server) = run(&secret, &secret, 7).await;
    assert!(
        matches!(server, Err(HandshakeError::NotAVoter(7))),
        "{server:?}"
    );
    assert!(
        matches!(
            client,
            Err(HandshakeError::Refused(RefusalReason::NotAVoter))
        ),
        "{client:?}"
    );
}

/// A server that closes instead of answering (one from before refusals
/// existed) is reported as the likely wrong secret; one that answers with
/// a bad MAC as a peer that does not know the secret; and the refusal holds
/// nothing but its prefix and code.
#[tokio::test]
async fn a_client_names_what_it_saw_of_a_server_that_did_not_prove_itself() {
    let secret = ClusterSecret::from_bytes(b"0123456789abcdef");
    for (answer, expected) in [
        (None, "without saying why"),
        (
            Some([7u8; MAC_LEN]),
            "does not prove this node's cluster secret",
        ),
    ] {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let peer = tokio::spawn(async move {
            server.write_all(&[1u8; NONCE_LEN]).await.expect("nonce");
            let mut hello = [0u8; HELLO_LEN];
            server.read_exact(&mut hello).await.expect("hello");
            if let Some(answer) = answer {
                server.write_all(&answer).await.expect("answer");
            }
        });
        let seen = client_handshake(&mut client, &secret, 2)
            .await
            .expect_err("an unproven server accepted");
        peer.await.expect("peer");
        assert!(seen.is_refusal(), "{seen:?}");
        assert!(seen.to_string().contains(expected), "{seen}");
    }
    let refusal = RefusalReason::WrongSecret.encode();
    assert_eq!(&refusal[..16], REFUSAL_PREFIX);
    assert_eq!(
        &refusal[16..],
        &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
}

/// Attack: record an honest node's handshake, then replay its answer
/// on a new connection. The server's nonce is fresh per connection, so
/// the recorded MAC proves nothing there.
#[tokio::test]
async fn a_recorded_handshake_replayed_on_a_new_connection_is_refused() {
    let secret = ClusterSecret::from_bytes(b"0123456789abcdef");
    let (mut client, mut server) = tokio::io::duplex(1024);
    let server_secret = secret.clone();
    let honest = tokio::spawn(async move {
        server_handshake(&mut server, &server_secret, &|id| [1, 2, 3].contains(&id)).await
    });
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
    let replayed = tokio::spawn(async move {
        server_handshake(&mut server, &server_secret, &|id| [1, 2, 3].contains(&id)).await
    });
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

#[test]
fn refusal_lines_are_one_per_peer_per_interval_and_count_the_rest() {
    let log = RefusalLog::new(Duration::from_secs(10));
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    // (peer, seconds, expected)
    let steps = [
        ("a", 0, Some(0)),
        ("a", 1, None),
        ("b", 1, Some(0)),
        ("a", 9, None),
        ("a", 10, Some(2)),
        ("a", 11, None),
        ("b", 30, Some(0)),
        ("a", 30, Some(1)),
    ];
    for (i, (peer, seconds, expected)) in steps.into_iter().enumerate() {
        assert_eq!(log.admit(peer, at(seconds)), expected, "step {i}");
    }
}

#[test]
fn a_flood_from_many_addresses_shares_one_key_beyond_the_cap() {
    let log = RefusalLog::new(Duration::from_secs(10));
    let now = Instant::now();
    for key in 0..REFUSAL_LOG_KEYS {
        assert_eq!(log.admit(key, now), Some(0));
    }
    assert_eq!(
        log.admit(usize::MAX, now),
        Some(0),
        "the shared key's first line"
    );
    for key in REFUSAL_LOG_KEYS..REFUSAL_LOG_KEYS * 4 {
        assert_eq!(log.admit(key, now), None, "key {key}");
    }
    assert!(log.seen.lock().expect("lock").len() <= REFUSAL_LOG_KEYS + 1);
    // Once the interval has passed, old keys make room again.
    let later = now + Duration::from_secs(10);
    assert_eq!(log.admit(usize::MAX - 1, later), Some(0));
}
