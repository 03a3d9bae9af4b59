//! One connection's SASL state on a SASL_PLAINTEXT or SASL_SSL listener,
//! and the gate every frame of such a connection passes before a handler
//! sees it (Kafka's `SaslServerAuthenticator`).
//!
//! Rules, as Kafka's:
//! - before authentication only ApiVersions, SaslHandshake and
//!   SaslAuthenticate are served; any other request closes the
//!   connection, and frames larger than `sasl.server.max.receive.size`
//!   are refused;
//! - SaslHandshake v1 is followed by SaslAuthenticate requests carrying
//!   the mechanism's messages; after SaslHandshake v0 the messages come as
//!   bare size-prefixed tokens;
//! - a failed step is answered (SASL_AUTHENTICATION_FAILED,
//!   UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE) and the connection
//!   closed;
//! - KIP-368: with `connections.max.reauth.ms` set, a session expires that
//!   long after authentication; a request other than SaslHandshake after
//!   expiry closes the connection; an OAUTHBEARER session also ends when
//!   its token expires (whichever comes first), and the lifetime
//!   SaslAuthenticate reports says so. SaslHandshake on an authenticated
//!   connection starts a re-authentication, which must use the same
//!   mechanism and end with the same principal.
//!
//! Beyond Kafka: a failed PLAIN or SCRAM login is logged with the attempted
//! name and the peer address (never the password) and counted against that
//! name (`login_failures`); the answer to a later attempt for the name is
//! held back by its back-off (`take_answer_delay`), whatever the address.
//!
//! Owns: the state transitions. Must not: build Kafka responses
//! (`responses` does) or do I/O.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use chronik_protocol::{decode_request, encode_response, RawHeader, Request};
use kafka_protocol::messages::ApiKey;

use super::oauthbearer::{OAuthBearerExchange, OAuthStep};
use super::scram::{ScramExchange, ScramStep};
use super::{fill_random, Mechanism, SaslConfig, SaslError};
use crate::security::principal::KafkaPrincipal;

/// What the connection does with one frame.
#[derive(Debug)]
pub enum Admission {
    /// Run the request's handler as usual.
    Serve,
    /// Write this encoded frame (size prefix included).
    Respond(Bytes),
    /// Write this frame, then close (`reason` for the metric).
    RespondAndClose(Bytes, &'static str),
    /// Close without an answer.
    Close(&'static str),
}

/// The exchange under way after a successful SaslHandshake.
#[derive(Debug)]
enum Exchange {
    Plain,
    Scram(Box<ScramExchange>),
    OAuthBearer(OAuthBearerExchange),
}

/// One step of any mechanism.
enum Step {
    Challenge(Vec<u8>),
    Authenticated {
        user: String,
        response: Vec<u8>,
        /// When the credential expires (an OAUTHBEARER token's `exp`), in
        /// milliseconds since the epoch.
        credential_expires_ms: Option<u64>,
    },
}

impl From<ScramStep> for Step {
    fn from(step: ScramStep) -> Step {
        match step {
            ScramStep::Challenge(challenge) => Step::Challenge(challenge),
            ScramStep::Authenticated { user, response } => Step::Authenticated {
                user,
                response,
                credential_expires_ms: None,
            },
        }
    }
}

#[derive(Debug)]
enum State {
    /// Nothing but ApiVersions or SaslHandshake yet (or, when
    /// authenticated, between re-authentications).
    Idle,
    Authenticating {
        mechanism: Mechanism,
        exchange: Exchange,
        /// After SaslHandshake v0: bare tokens, not SaslAuthenticate.
        raw_tokens: bool,
    },
}

/// A successful authentication.
#[derive(Debug, Clone)]
struct Session {
    principal: KafkaPrincipal,
    mechanism: Mechanism,
    expires_at: Option<Instant>,
}

/// Outcome of one SaslHandshake.
#[derive(Debug)]
pub struct HandshakeOutcome {
    pub error: Option<SaslError>,
    /// Kafka's `sasl.enabled.mechanisms`, answered in every response.
    pub enabled: Vec<&'static str>,
}

/// Outcome of one SaslAuthenticate.
#[derive(Debug)]
pub struct AuthenticateOutcome {
    pub result: Result<Vec<u8>, SaslError>,
    /// KIP-368's session_lifetime_ms once authenticated (0 = no expiry).
    pub session_lifetime_ms: i64,
}

/// The SASL state of one connection.
#[derive(Debug)]
pub struct SaslSession {
    config: Arc<SaslConfig>,
    peer: SocketAddr,
    state: State,
    session: Option<Session>,
    /// How long the answer to the last step must be held back (the
    /// attempted name's login-failure back-off).
    answer_delay: Duration,
}

impl SaslSession {
    pub fn new(config: Arc<SaslConfig>, peer: SocketAddr) -> SaslSession {
        SaslSession {
            config,
            peer,
            state: State::Idle,
            session: None,
            answer_delay: Duration::ZERO,
        }
    }

    /// How long the answer `admit` just gave must wait before it is
    /// written (then zero again).
    pub fn take_answer_delay(&mut self) -> Duration {
        std::mem::take(&mut self.answer_delay)
    }

    /// The principal once authenticated.
    pub fn principal(&self) -> Option<&KafkaPrincipal> {
        self.session.as_ref().map(|s| &s.principal)
    }

    /// The largest frame to accept next.
    pub fn max_frame(&self, normal: usize) -> usize {
        match self.session {
            Some(_) => normal,
            None => normal.min(self.config.max_receive_size),
        }
    }

    /// Decides what happens to `frame` (a request without its size prefix).
    pub fn admit(&mut self, frame: &Bytes) -> Admission {
        if let State::Authenticating {
            raw_tokens: true, ..
        } = self.state
        {
            // SaslHandshake v0: a bare token; a failure closes unanswered.
            let outcome = self.authenticate(frame, 0);
            return match outcome.result {
                Ok(reply) => Admission::Respond(size_prefixed(&reply)),
                Err(_) => Admission::Close("sasl_authentication_failed"),
            };
        }
        let Some(raw) = RawHeader::peek(frame) else {
            return Admission::Close("malformed_request");
        };
        let api = ApiKey::try_from(raw.api_key).ok();
        let authenticated = self.session.is_some();
        let expired = self
            .session
            .as_ref()
            .and_then(|s| s.expires_at)
            .is_some_and(|at| Instant::now() >= at);
        match api {
            Some(ApiKey::SaslHandshake) => self.handle_handshake(frame),
            Some(ApiKey::SaslAuthenticate) => self.handle_authenticate(frame),
            Some(ApiKey::ApiVersions) if !authenticated => Admission::Serve,
            _ if expired => Admission::Close("sasl_session_expired"),
            _ if authenticated && matches!(self.state, State::Idle) => Admission::Serve,
            // Mid re-authentication Kafka's clients send nothing else.
            _ if authenticated => Admission::Close("sasl_reauthentication_interrupted"),
            _ => Admission::Close("sasl_unauthenticated_request"),
        }
    }

    fn handle_handshake(&mut self, frame: &Bytes) -> Admission {
        let Ok(request) = decode_request(frame.clone()) else {
            return Admission::Serve; // the usual path refuses what does not decode
        };
        let (version, correlation_id) = (request.version(), request.correlation_id());
        let Request::SaslHandshake(body) = request.body else {
            return Admission::Close("malformed_request");
        };
        let outcome = self.handshake(body.mechanism.as_str(), version);
        let failed = outcome.error.is_some();
        let response = super::responses::handshake(outcome);
        respond(correlation_id, version, &response, failed)
    }

    fn handle_authenticate(&mut self, frame: &Bytes) -> Admission {
        let Ok(request) = decode_request(frame.clone()) else {
            return Admission::Serve;
        };
        let (version, correlation_id) = (request.version(), request.correlation_id());
        let Request::SaslAuthenticate(body) = request.body else {
            return Admission::Close("malformed_request");
        };
        let outcome = match self.state {
            State::Authenticating {
                raw_tokens: false, ..
            } => self.authenticate(&body.auth_bytes, version),
            _ => {
                self.state = State::Idle;
                AuthenticateOutcome {
                    result: Err(SaslError::IllegalState(
                        "SaslAuthenticate request not expected now: send SaslHandshake first"
                            .into(),
                    )),
                    session_lifetime_ms: 0,
                }
            }
        };
        let failed = outcome.result.is_err();
        let response = super::responses::authenticate(outcome);
        respond(correlation_id, version, &response, failed)
    }

    /// SaslHandshake: starts an exchange of `mechanism`.
    pub fn handshake(&mut self, mechanism: &str, version: i16) -> HandshakeOutcome {
        let enabled = self.config.enabled.iter().map(|m| m.name()).collect();
        let error = match (&self.state, &self.session) {
            (State::Authenticating { .. }, _) => Some(SaslError::IllegalState(
                "SaslHandshake request not expected during an authentication".into(),
            )),
            (State::Idle, Some(_)) if version == 0 => Some(SaslError::IllegalState(
                "re-authentication needs SaslHandshake v1".into(),
            )),
            _ => None,
        };
        let chosen = Mechanism::parse(mechanism).filter(|m| self.config.enabled.contains(m));
        let error = error.or_else(|| match (chosen, &self.session) {
            (None, _) => Some(SaslError::UnsupportedMechanism(mechanism.to_string())),
            (Some(m), Some(session)) if m != session.mechanism => Some(SaslError::IllegalState(
                format!("re-authentication must use {}", session.mechanism.name()),
            )),
            _ => None,
        });
        if error.is_none() {
            if let Some(mechanism) = chosen {
                self.state = State::Authenticating {
                    mechanism,
                    exchange: match mechanism {
                        Mechanism::Plain => Exchange::Plain,
                        Mechanism::Scram(m) => Exchange::Scram(Box::new(ScramExchange::new(m))),
                        Mechanism::OAuthBearer => {
                            Exchange::OAuthBearer(OAuthBearerExchange::default())
                        }
                    },
                    raw_tokens: version == 0,
                };
            }
        }
        HandshakeOutcome { error, enabled }
    }

    /// One message of the exchange under way.
    fn authenticate(&mut self, message: &[u8], version: i16) -> AuthenticateOutcome {
        let config = self.config.clone();
        let State::Authenticating {
            mechanism,
            exchange,
            ..
        } = &mut self.state
        else {
            return AuthenticateOutcome {
                result: Err(SaslError::IllegalState(
                    "no SASL exchange in progress".into(),
                )),
                session_lifetime_ms: 0,
            };
        };
        let mechanism = *mechanism;
        let mut attempted: Option<String> = None;
        let step = match exchange {
            Exchange::Plain => {
                attempted = super::plain::PlainUsers::attempted_user(message).map(String::from);
                config
                    .plain_users
                    .authenticate(message)
                    .map(|user| Step::Authenticated {
                        user,
                        response: Vec::new(),
                        credential_expires_ms: None,
                    })
            }
            Exchange::Scram(scram) => {
                let step = scram
                    .step(message, &config.scram, &fill_random, &config.fake_salt_key)
                    .map(Step::from);
                attempted = scram.attempted_user().map(String::from);
                step
            }
            Exchange::OAuthBearer(oauth) => match &config.oauthbearer {
                Some(validator) => {
                    oauth
                        .step(message, validator, epoch_ms())
                        .map(|step| match step {
                            OAuthStep::Challenge(challenge) => Step::Challenge(challenge),
                            OAuthStep::Authenticated(token) => Step::Authenticated {
                                user: token.principal,
                                response: Vec::new(),
                                credential_expires_ms: Some(token.expires_at_ms),
                            },
                        })
                }
                None => Err(SaslError::IllegalState(
                    "OAUTHBEARER has no JWKS configured".into(),
                )),
            },
        };
        // The back-off an attempt for this name meets comes from failures
        // before this one; OAUTHBEARER tokens are not guessed, not counted.
        let now = Instant::now();
        let counted = attempted
            .as_deref()
            .filter(|_| mechanism != Mechanism::OAuthBearer);
        if let Some(user) = counted {
            self.answer_delay = config.login_failures.wait(user, now);
        }
        let (result, lifetime) = match step {
            Ok(Step::Challenge(challenge)) => {
                return AuthenticateOutcome {
                    result: Ok(challenge),
                    session_lifetime_ms: 0,
                }
            }
            Ok(Step::Authenticated {
                user,
                response,
                credential_expires_ms,
            }) => match self.complete(KafkaPrincipal::user(user), mechanism, credential_expires_ms)
            {
                Ok(lifetime) => (Ok(response), lifetime),
                Err(e) => (Err(e), None),
            },
            Err(e) => (Err(e), None),
        };
        match (&result, counted) {
            (Err(e), user) => {
                // The failure counts from when it is answered (after this
                // attempt's own wait), so the next attempt waits in full.
                let answered = now + self.answer_delay;
                let (failures, backoff) = user.map_or((0, Duration::ZERO), |u| {
                    config.login_failures.failed(u, answered)
                });
                // the attempted name (bounded, control characters replaced), never a password
                tracing::warn!(
                    mechanism = mechanism.name(),
                    user = %loggable(attempted.as_deref()),
                    peer = %self.peer,
                    failures,
                    backoff_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
                    error = %e,
                    "SASL authentication failed"
                );
            }
            (Ok(_), Some(user)) => config.login_failures.succeeded(user),
            (Ok(_), _) => {}
        }
        self.state = State::Idle;
        let lifetime = match (lifetime, version) {
            // 0 would tell the client the session never expires.
            (Some(l), 1..) => i64::try_from(l.as_millis()).unwrap_or(i64::MAX).max(1),
            _ => 0,
        };
        AuthenticateOutcome {
            result,
            session_lifetime_ms: lifetime,
        }
    }

    /// Records the session; returns its lifetime, as Kafka computes it:
    /// `connections.max.reauth.ms` and the credential's expiry, whichever
    /// comes first (None = no expiry).
    fn complete(
        &mut self,
        principal: KafkaPrincipal,
        mechanism: Mechanism,
        credential_expires_ms: Option<u64>,
    ) -> Result<Option<Duration>, SaslError> {
        if let Some(previous) = &self.session {
            if previous.principal != principal {
                return Err(SaslError::AuthenticationFailed(
                    "Cannot change principals during re-authentication".into(),
                ));
            }
        }
        let max = self.config.max_reauth;
        let credential =
            credential_expires_ms.map(|at| Duration::from_millis(at.saturating_sub(epoch_ms())));
        let lifetime = match ((max > Duration::ZERO).then_some(max), credential) {
            (Some(max), Some(credential)) => Some(max.min(credential)),
            (max, credential) => max.or(credential),
        };
        self.session = Some(Session {
            principal,
            mechanism,
            expires_at: lifetime.map(|l| Instant::now() + l),
        });
        Ok(lifetime)
    }
}

/// A client-given name as it may appear in a log line: at most 64
/// characters, control characters replaced by '?', "(none)" when absent.
fn loggable(name: Option<&str>) -> String {
    match name {
        None => "(none)".to_string(),
        Some(n) => n
            .chars()
            .take(64)
            .map(|c| if c.is_control() { '?' } else { c })
            .collect(),
    }
}

/// Milliseconds since the epoch (0 if the clock is before it).
fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn respond(
    correlation_id: i32,
    version: i16,
    response: &chronik_protocol::Response,
    close: bool,
) -> Admission {
    match encode_response(correlation_id, version, response) {
        Ok(bytes) if close => Admission::RespondAndClose(bytes, "sasl_authentication_failed"),
        Ok(bytes) => Admission::Respond(bytes),
        Err(_) => Admission::Close("response_encoding_failed"),
    }
}

fn size_prefixed(token: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + token.len());
    out.extend_from_slice(&u32::try_from(token.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(token);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::login_failures::{BackoffSettings, LoginFailures};
    use crate::security::sasl::plain::PlainUsers;
    use crate::security::sasl::scram::{ScramCredentials, ScramMechanism};

    fn session(max_reauth: Duration) -> SaslSession {
        SaslSession::new(
            Arc::new(SaslConfig {
                enabled: vec![Mechanism::Plain, Mechanism::Scram(ScramMechanism::Sha512)],
                plain_users: PlainUsers::from_jaas(r#"user_alice="a"; user_bob="b";"#)
                    .expect("jaas"),
                scram: Arc::new(ScramCredentials::default()),
                oauthbearer: None,
                max_reauth,
                max_receive_size: 1024,
                failed_authentication_delay: Duration::ZERO,
                fake_salt_key: [0; 32],
                login_failures: LoginFailures::new(BackoffSettings {
                    initial: Duration::from_millis(100),
                    max: Duration::from_secs(1),
                    capacity: 16,
                }),
            }),
            "127.0.0.1:9".parse().expect("address"),
        )
    }

    fn error_of(outcome: HandshakeOutcome) -> Option<SaslError> {
        outcome.error
    }

    #[test]
    fn handshake_and_authenticate_follow_kafkas_order() {
        let mut s = session(Duration::ZERO);
        assert_eq!(s.max_frame(1 << 20), 1024, "bounded before authentication");
        assert!(matches!(
            error_of(s.handshake("GSSAPI", 1)),
            Some(SaslError::UnsupportedMechanism(_))
        ));
        assert!(
            matches!(
                s.authenticate(b"\0alice\0a", 2).result,
                Err(SaslError::IllegalState(_))
            ),
            "SaslAuthenticate before a handshake"
        );
        assert_eq!(error_of(s.handshake("PLAIN", 1)), None);
        assert!(
            matches!(
                error_of(s.handshake("PLAIN", 1)),
                Some(SaslError::IllegalState(_))
            ),
            "a second handshake during the exchange"
        );
        let done = s.authenticate(b"\0alice\0a", 2);
        assert_eq!(done.result, Ok(Vec::new()));
        assert_eq!(
            done.session_lifetime_ms, 0,
            "no re-authentication configured"
        );
        assert_eq!(
            s.principal().map(ToString::to_string).as_deref(),
            Some("User:alice")
        );
        assert_eq!(s.max_frame(1 << 20), 1 << 20);
    }

    #[test]
    fn failed_logins_hold_back_the_next_answer_for_that_name_only() {
        let config = session(Duration::ZERO).config;
        let attempt = |user: &str, password: &str| {
            let mut s = SaslSession::new(config.clone(), "127.0.0.1:9".parse().expect("address"));
            assert_eq!(error_of(s.handshake("PLAIN", 1)), None);
            let message = format!("\0{user}\0{password}");
            let ok = s.authenticate(message.as_bytes(), 2).result.is_ok();
            (ok, s.take_answer_delay())
        };
        assert_eq!(attempt("alice", "wrong"), (false, Duration::ZERO));
        let (ok, delay) = attempt("alice", "wrong");
        assert!(!ok && delay > Duration::from_millis(50), "{delay:?}");
        assert_eq!(attempt("bob", "b"), (true, Duration::ZERO), "another name");
        let (ok, delay) = attempt("alice", "a");
        assert!(ok && delay > Duration::from_millis(150), "{delay:?}");
        assert_eq!(
            attempt("alice", "a"),
            (true, Duration::ZERO),
            "reset by the login"
        );
    }

    #[test]
    fn re_authentication_keeps_mechanism_and_principal() {
        let mut s = session(Duration::from_secs(60));
        assert_eq!(error_of(s.handshake("PLAIN", 1)), None);
        let first = s.authenticate(b"\0alice\0a", 1);
        assert_eq!(first.session_lifetime_ms, 60_000);
        assert!(
            matches!(
                error_of(s.handshake("PLAIN", 0)),
                Some(SaslError::IllegalState(_))
            ),
            "re-authentication needs SaslHandshake v1"
        );
        assert!(matches!(
            error_of(s.handshake("SCRAM-SHA-512", 1)),
            Some(SaslError::IllegalState(_))
        ));
        assert_eq!(error_of(s.handshake("PLAIN", 1)), None);
        assert!(matches!(
            s.authenticate(b"\0bob\0b", 1).result,
            Err(SaslError::AuthenticationFailed(_))
        ));
        assert_eq!(s.principal().map(|p| p.name.as_str()), Some("alice"));
    }
}
