//! SASL on SASL_PLAINTEXT and SASL_SSL listeners, over raw sockets:
//! PLAIN and SCRAM-SHA-512 logins; wrong passwords and unknown users fail
//! alike (SASL_AUTHENTICATION_FAILED, then the connection closes); an
//! unknown mechanism is UNSUPPORTED_SASL_MECHANISM; nothing but
//! ApiVersions and SASL is served before authentication; SASL requests on
//! a PLAINTEXT listener are ILLEGAL_SASL_STATE; KIP-368 session lifetime,
//! re-authentication and expiry.

mod common;
mod security_support;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiVersionsRequest, DescribeUserScramCredentialsRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use security_support::{broker_ports, Certs, Conn, SecureBroker};

const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const RESOURCE_NOT_FOUND: i16 = 91;
const UNACCEPTABLE_CREDENTIAL: i16 = 93;

/// A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners, PLAIN
/// user alice and SCRAM-SHA-512 users alice and bob.
fn sasl_broker(certs: &Certs, extra: &[&str]) -> Result<SecureBroker> {
    let dir = certs.path("");
    std::fs::write(
        dir.join("jaas.conf"),
        "KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n  \
         user_alice=\"alice-secret\";\n};\n",
    )?;
    std::fs::write(
        dir.join("scram.txt"),
        "# bootstrap users\nSCRAM-SHA-512=[name=alice,password=alice-secret,iterations=4096]\n\
         SCRAM-SHA-512=[name=bob,password=bob-secret]\n",
    )?;
    let mut args = vec![
        "--ssl-keystore-location".to_string(),
        certs.arg("broker.keystore.pem"),
        "--sasl-enabled-mechanisms".into(),
        "PLAIN,SCRAM-SHA-512".into(),
        "--sasl-jaas-config-file".into(),
        certs.arg("jaas.conf"),
        "--sasl-scram-credentials-file".into(),
        certs.arg("scram.txt"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    SecureBroker::start(
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        &args,
    )
}

#[test]
fn plain_and_scram_logins_are_served_and_name_the_principal() -> Result<()> {
    let certs = Certs::make()?;
    let broker = sasl_broker(&certs, &[])?;
    let sasl_plaintext = broker.addr("SASL_PLAINTEXT")?;
    let mut plain = Conn::plain(sasl_plaintext)?;
    // ApiVersions is served before authentication.
    let versions = plain.send(&ApiVersionsRequest::default(), 3)?;
    ensure!(
        versions.api_keys.iter().any(|k| k.api_key == 17)
            && versions.api_keys.iter().any(|k| k.api_key == 36),
        "ApiVersions advertises SaslHandshake and SaslAuthenticate"
    );
    let login = plain.login_plain("alice", "alice-secret")?;
    ensure!(login.error_code == 0, "PLAIN: {login:?}");
    let metadata = plain.metadata()?;
    ensure!(
        broker_ports(&metadata) == [i32::from(sasl_plaintext.port())],
        "{metadata:?}"
    );

    let sasl_ssl = broker.addr("SASL_SSL")?;
    let mut scram = Conn::tls(sasl_ssl, certs.client_tls(None)?)?;
    let login = scram.login_scram512("bob", "bob-secret")?;
    ensure!(login.error_code == 0, "SCRAM-SHA-512: {login:?}");
    ensure!(
        login.session_lifetime_ms == 0,
        "no re-authentication configured"
    );
    let metadata = scram.metadata()?;
    ensure!(
        broker_ports(&metadata) == [i32::from(sasl_ssl.port())],
        "{metadata:?}"
    );
    broker.wait_for_log("principal=User:bob")?;
    broker.wait_for_log("principal=User:alice")?;
    Ok(())
}

#[test]
fn wrong_passwords_and_unknown_users_fail_alike_and_close() -> Result<()> {
    let certs = Certs::make()?;
    let broker = sasl_broker(&certs, &[])?;
    let addr = broker.addr("SASL_PLAINTEXT")?;
    let mut messages = Vec::new();
    for (user, password) in [("alice", "wrong"), ("mallory", "alice-secret")] {
        let mut conn = Conn::plain(addr)?;
        let failed = conn.login_scram512(user, password)?;
        ensure!(
            failed.error_code == SASL_AUTHENTICATION_FAILED,
            "SCRAM {user}: {failed:?}"
        );
        messages.push(failed.error_message.map(|m| m.to_string()));
        ensure!(conn.is_closed(), "SCRAM {user}: the connection stayed open");

        let mut conn = Conn::plain(addr)?;
        let failed = conn.login_plain(user, password)?;
        ensure!(
            failed.error_code == SASL_AUTHENTICATION_FAILED,
            "PLAIN {user}: {failed:?}"
        );
        messages.push(failed.error_message.map(|m| m.to_string()));
        ensure!(conn.is_closed(), "PLAIN {user}: the connection stayed open");
    }
    ensure!(
        messages[0] == messages[2] && messages[1] == messages[3],
        "the messages tell wrong passwords from unknown users: {messages:?}"
    );
    // each failure is logged with the attempted name and mechanism, never a password
    let log = broker.log();
    for (mechanism, user) in [
        ("SCRAM-SHA-512", "alice"),
        ("SCRAM-SHA-512", "mallory"),
        ("PLAIN", "alice"),
        ("PLAIN", "mallory"),
    ] {
        ensure!(
            log.lines().any(|l| l.contains("SASL authentication failed")
                && l.contains(mechanism)
                && l.contains(&format!("user={user}"))),
            "no failed-login line for {mechanism} {user} in:\n{}",
            broker.log_tail()
        );
    }
    ensure!(
        !log.contains("alice-secret") && !log.contains("wrong"),
        "a password reached the log"
    );
    Ok(())
}

#[test]
fn unknown_mechanisms_and_early_requests_are_refused() -> Result<()> {
    let certs = Certs::make()?;
    let broker = sasl_broker(&certs, &[])?;
    let addr = broker.addr("SASL_PLAINTEXT")?;
    let mut conn = Conn::plain(addr)?;
    let handshake = conn.handshake("GSSAPI")?;
    ensure!(
        handshake.error_code == UNSUPPORTED_SASL_MECHANISM,
        "{handshake:?}"
    );
    let offered: Vec<String> = handshake.mechanisms.iter().map(|m| m.to_string()).collect();
    ensure!(offered == ["PLAIN", "SCRAM-SHA-512"], "{offered:?}");
    ensure!(
        conn.is_closed(),
        "the connection stayed open after a refused mechanism"
    );

    let mut early = Conn::plain(addr)?;
    ensure!(
        early.metadata().is_err(),
        "Metadata was answered before authentication"
    );

    // Before authentication a frame may not exceed
    // sasl.server.max.receive.size (512 KiB by default).
    let mut large = Conn::plain(addr)?;
    std::io::Write::write_all(&mut large.stream, &(1024 * 1024u32).to_be_bytes())?;
    std::io::Write::write_all(&mut large.stream, &[0u8; 64])?;
    ensure!(
        large.is_closed(),
        "a 1 MiB frame was read before authentication"
    );

    let mut out_of_order = Conn::plain(addr)?;
    let response = out_of_order.authenticate(b"\0alice\0alice-secret".to_vec())?;
    ensure!(response.error_code == ILLEGAL_SASL_STATE, "{response:?}");
    ensure!(
        out_of_order.is_closed(),
        "SaslAuthenticate before SaslHandshake left it open"
    );

    // On a PLAINTEXT listener SASL is ILLEGAL_SASL_STATE and the
    // connection goes on serving.
    let mut plaintext = Conn::plain(broker.addr("PLAINTEXT")?)?;
    let handshake = plaintext.handshake("PLAIN")?;
    ensure!(handshake.error_code == ILLEGAL_SASL_STATE, "{handshake:?}");
    plaintext.metadata()?;
    Ok(())
}

#[test]
fn sessions_expire_and_are_renewed_by_re_authentication() -> Result<()> {
    let certs = Certs::make()?;
    let lifetime = Duration::from_millis(3000);
    let broker = sasl_broker(&certs, &["--connections-max-reauth-ms", "3000"])?;
    let addr = broker.addr("SASL_PLAINTEXT")?;

    let mut conn = Conn::plain(addr)?;
    let login = conn.login_scram512("alice", "alice-secret")?;
    ensure!(login.error_code == 0, "{login:?}");
    ensure!(
        login.session_lifetime_ms == 3000,
        "session lifetime {}",
        login.session_lifetime_ms
    );
    // Re-authentication on the live connection, then requests go on.
    let again = conn.login_scram512("alice", "alice-secret")?;
    ensure!(again.error_code == 0, "re-authentication: {again:?}");
    conn.metadata()?;
    // Past the renewed session's end, anything but SaslHandshake closes.
    std::thread::sleep(lifetime + Duration::from_millis(300));
    ensure!(conn.metadata().is_err(), "an expired session was served");

    // Re-authenticating as someone else is refused.
    let mut other = Conn::plain(addr)?;
    ensure!(
        other.login_scram512("alice", "alice-secret")?.error_code == 0,
        "login"
    );
    let switched = other.login_scram512("bob", "bob-secret")?;
    ensure!(
        switched.error_code == SASL_AUTHENTICATION_FAILED,
        "{switched:?}"
    );
    ensure!(
        other.is_closed(),
        "a principal change left the connection open"
    );

    // A session renewed in time keeps serving past the first lifetime.
    let mut renewed = Conn::plain(addr)?;
    ensure!(
        renewed.login_plain("alice", "alice-secret")?.error_code == 0,
        "PLAIN login"
    );
    std::thread::sleep(lifetime / 2);
    ensure!(
        renewed.login_plain("alice", "alice-secret")?.error_code == 0,
        "PLAIN renewal"
    );
    std::thread::sleep(lifetime / 2 + Duration::from_millis(200));
    // Now past the first login's lifetime, within the renewed one.
    renewed.metadata()?;
    Ok(())
}

/// An AlterUserScramCredentials upsertion for SCRAM-SHA-512 (mechanism 2),
/// salted here as kafka-configs.sh does.
fn upsertion(user: &str, password: &str, iterations: i32) -> ScramCredentialUpsertion {
    let salt = b"a salt of sixteen";
    let salted = security_support::hi(
        password.as_bytes(),
        salt,
        u32::try_from(iterations).unwrap_or(4096).max(1),
    );
    ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(user.to_string()))
        .with_mechanism(2)
        .with_iterations(iterations)
        .with_salt(Bytes::from_static(salt))
        .with_salted_password(Bytes::from(salted))
}

#[test]
fn scram_credentials_altered_through_the_quorum_log_in_and_out() -> Result<()> {
    let certs = Certs::make()?;
    let broker = sasl_broker(&certs, &[])?;
    let sasl = broker.addr("SASL_PLAINTEXT")?;
    let mut admin = Conn::plain(broker.addr("PLAINTEXT")?)?;
    let altered = admin.send(
        &AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![
                upsertion("carol", "carol-secret", 8192),
                upsertion("weak", "x", 100),
            ])
            .with_deletions(vec![
                ScramCredentialDeletion::default()
                    .with_name(StrBytes::from_static_str("ghost"))
                    .with_mechanism(2),
                ScramCredentialDeletion::default()
                    .with_name(StrBytes::from_static_str("odd"))
                    .with_mechanism(9),
            ]),
        0,
    )?;
    let codes: Vec<(String, i16)> = altered
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect();
    ensure!(
        codes
            == [
                ("ghost".into(), RESOURCE_NOT_FOUND),
                ("odd".into(), UNSUPPORTED_SASL_MECHANISM),
                ("carol".into(), 0),
                ("weak".into(), UNACCEPTABLE_CREDENTIAL)
            ],
        "{codes:?}"
    );
    let described = admin.send(
        &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            UserName::default().with_name(StrBytes::from_static_str("carol")),
            UserName::default().with_name(StrBytes::from_static_str("weak")),
        ])),
        0,
    )?;
    let carol = &described.results[0];
    ensure!(
        carol.error_code == 0
            && carol
                .credential_infos
                .iter()
                .map(|c| (c.mechanism, c.iterations))
                .collect::<Vec<_>>()
                == [(2, 8192)],
        "{described:?}"
    );
    ensure!(
        described.results[1].error_code == RESOURCE_NOT_FOUND,
        "{described:?}"
    );

    let login = Conn::plain(sasl)?.login_scram512("carol", "carol-secret")?;
    ensure!(
        login.error_code == 0,
        "carol after AlterUserScramCredentials: {login:?}"
    );
    // The quorum's credential replaces the bootstrap file's.
    let replaced = admin.send(
        &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion(
            "bob",
            "new-bob-secret",
            4096,
        )]),
        0,
    )?;
    ensure!(replaced.results[0].error_code == 0, "{replaced:?}");
    ensure!(
        Conn::plain(sasl)?
            .login_scram512("bob", "bob-secret")?
            .error_code
            == SASL_AUTHENTICATION_FAILED,
        "old bob"
    );
    ensure!(
        Conn::plain(sasl)?
            .login_scram512("bob", "new-bob-secret")?
            .error_code
            == 0,
        "new bob"
    );

    let deleted = admin.send(
        &AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(StrBytes::from_static_str("carol"))
                .with_mechanism(2),
        ]),
        0,
    )?;
    ensure!(deleted.results[0].error_code == 0, "{deleted:?}");
    let login = Conn::plain(sasl)?.login_scram512("carol", "carol-secret")?;
    ensure!(
        login.error_code == SASL_AUTHENTICATION_FAILED,
        "carol after deletion: {login:?}"
    );
    Ok(())
}

/// SaslHandshake v0 (Kafka's pre-KIP-152 framing): the mechanism's
/// messages follow as bare size-prefixed tokens, not SaslAuthenticate.
#[test]
fn handshake_v0_is_followed_by_bare_tokens() -> Result<()> {
    use std::io::{Read, Write};
    let certs = Certs::make()?;
    let broker = sasl_broker(&certs, &[])?;
    let mut conn = Conn::plain(broker.addr("SASL_PLAINTEXT")?)?;
    let handshake = conn.send(
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        0,
    )?;
    ensure!(handshake.error_code == 0, "{handshake:?}");
    let token = b"\0alice\0alice-secret";
    let mut frame = u32::try_from(token.len())?.to_be_bytes().to_vec();
    frame.extend_from_slice(token);
    conn.stream.write_all(&frame)?;
    let mut size = [0u8; 4];
    conn.stream.read_exact(&mut size)?;
    ensure!(
        u32::from_be_bytes(size) == 0,
        "PLAIN's reply is an empty token"
    );
    conn.metadata()?;

    // A wrong password after a v0 handshake closes without an answer.
    let mut refused = Conn::plain(broker.addr("SASL_PLAINTEXT")?)?;
    refused.send(
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        0,
    )?;
    let token = b"\0alice\0wrong";
    let mut frame = u32::try_from(token.len())?.to_be_bytes().to_vec();
    frame.extend_from_slice(token);
    refused.stream.write_all(&frame)?;
    ensure!(
        refused.is_closed(),
        "a failed v0 login left the connection open"
    );
    Ok(())
}

/// The SCRAM-SHA-512 server-first answer to a client-first message for
/// `user`: its salt (base64) and iteration count.
fn server_first(addr: std::net::SocketAddr, user: &str) -> Result<(String, String)> {
    let mut conn = Conn::plain(addr)?;
    let shake = conn.handshake("SCRAM-SHA-512")?;
    ensure!(shake.error_code == 0, "handshake: {shake:?}");
    let answer = conn.authenticate(format!("n,,n={user},r=clientnonce").into_bytes())?;
    ensure!(
        answer.error_code == 0,
        "client-first for {user}: {answer:?}"
    );
    let text = String::from_utf8(answer.auth_bytes.to_vec())?;
    let field = |name: &str| {
        text.split(',')
            .find_map(|f| f.strip_prefix(name))
            .map(str::to_string)
            .with_context(|| format!("no {name} in {text:?}"))
    };
    Ok((field("s=")?, field("i=")?))
}

/// An unknown user's SCRAM answer looks like a real user's (salt length,
/// iterations) and is the same from every broker sharing the cluster secret
/// (every node of a cluster, and one broker after a restart), so a salt that
/// changes between nodes or restarts cannot give an unknown name away.
#[test]
fn unknown_scram_users_get_one_stable_real_looking_salt() -> Result<()> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let certs = Certs::make()?;
    let shared = certs.path("").join("shared.secret");
    std::fs::write(&shared, b"one secret for every node of this cluster")?;
    let shared_arg = shared.to_string_lossy().to_string();
    let mut salts = Vec::new();
    for _ in 0..2 {
        let broker = sasl_broker(&certs, &["--cluster-secret-file", &shared_arg])?;
        let addr = broker.addr("SASL_PLAINTEXT")?;
        let (real_salt, real_iterations) = server_first(addr, "alice")?;
        let (salt, iterations) = server_first(addr, "mallory")?;
        ensure!(
            b64.decode(&salt)?.len() == b64.decode(&real_salt)?.len() && iterations == real_iterations,
            "mallory's answer (salt {salt}, i={iterations}) differs in shape from alice's (salt {real_salt}, i={real_iterations})"
        );
        ensure!(
            server_first(addr, "mallory")?.0 == salt,
            "two answers of one broker differ"
        );
        salts.push(salt);
        drop(broker);
    }
    ensure!(
        salts[0] == salts[1],
        "another broker with the same cluster secret made up another salt: {salts:?}"
    );
    let other = sasl_broker(&certs, &[])?;
    let (salt, _) = server_first(other.addr("SASL_PLAINTEXT")?, "mallory")?;
    ensure!(
        salt != salts[0],
        "the salt is not keyed by the cluster secret"
    );
    Ok(())
}

/// Connections that never log in cannot take the memory logged-in clients
/// need: 80 connections on the SASL listener each announce a 512 KiB frame
/// (`sasl.server.max.receive.size`) and send 4 KiB of it - 40 MiB, more
/// than the low-latency profile's 16 MiB of request memory - then stall.
/// A logged-in client's 600 KiB Produce (a frame that must reserve
/// request memory) is still answered at once, not after the 30 s read
/// timeout frees the flood's reservations.
#[test]
fn unauthenticated_frames_do_not_stall_logged_in_producers() -> Result<()> {
    use std::io::Write;
    use std::time::Instant;

    use common::kafka_client::topic_metadata_request;

    let certs = Certs::make()?;
    // The unauthenticated-connection caps raised above the flood, so the
    // pre-authentication budget is what holds it (security_preauth.rs tests
    // the caps).
    let broker = sasl_broker(
        &certs,
        &[
            "--produce-profile",
            "low-latency",
            "--max-unauthenticated-connections-per-ip",
            "100",
        ],
    )?;
    let addr = broker.addr("SASL_PLAINTEXT")?;
    let mut flood = Vec::new();
    for _ in 0..80 {
        let mut s = std::net::TcpStream::connect(addr)?;
        s.write_all(&(512 * 1024 - 4_i32).to_be_bytes())?;
        s.write_all(&[0u8; 4096])?;
        flood.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));

    let mut conn = Conn::plain(addr)?;
    let login = conn.login_plain("alice", "alice-secret")?;
    ensure!(login.error_code == 0, "PLAIN alice: {login:?}");
    let created = conn.send(&topic_metadata_request("flooded", true), 9)?;
    ensure!(
        created.topics.iter().all(|t| t.error_code == 0),
        "auto-creating the topic: {:?}",
        created.topics
    );
    let value: &'static str = Box::leak("v".repeat(600 * 1024).into_boxed_str());
    let started = Instant::now();
    let produced = conn.send(
        &security_support::requests::produce_request("flooded", 0, value, None)?,
        9,
    )?;
    let took = started.elapsed();
    let code = produced.responses[0].partition_responses[0].error_code;
    ensure!(code == 0, "produce under the flood: error {code}");
    ensure!(
        took < Duration::from_secs(10),
        "a logged-in producer waited {took:?} behind connections that never logged in"
    );
    drop(flood);
    Ok(())
}
