//! The security check (compat/README.md) through rdkafka: librdkafka's own
//! TLS (the CA and the client certificate: the broker requires one on every
//! TLS listener) and SASL SCRAM-SHA-512, against a broker whose
//! StandardAuthorizer grants the SCRAM user and the certificate's subject ALL
//! on a topic and a group prefix only. The Rust twin of
//! compat_common.security_check: the same steps, names and verdict. Owns only
//! the rdkafka calls; producing, consuming and the checks on what came back
//! are the driver's shared helpers and `verify`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::bail;
use rdkafka::client::ClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, FutureProducer, FutureRecord, Producer, ProducerContext};

use crate::verify::{self, Reporter};
use crate::{consumer, create_topic, poll_until, produce, Args, PRODUCE_PARTITIONS};

/// The SASL mechanism of the check (the broker enables only this one).
const SCRAM_MECHANISM: &str = "SCRAM-SHA-512";

/// Where the secured broker listens and who the driver is there ("": not given).
#[derive(clap::Args, Debug, Clone)]
pub struct SecurityArgs {
    /// host:port of the SASL_SSL listener
    #[arg(long, env = "COMPAT_SASL_BOOTSTRAP", default_value = "")]
    sasl_bootstrap: String,
    /// host:port of the SSL listener (client certificate required)
    #[arg(long, env = "COMPAT_SSL_BOOTSTRAP", default_value = "")]
    ssl_bootstrap: String,
    /// PEM CA file the broker's certificate chains to
    #[arg(long, env = "COMPAT_SSL_CA", default_value = "")]
    ssl_ca: String,
    /// PEM client certificate
    #[arg(long, env = "COMPAT_SSL_CERT", default_value = "")]
    ssl_cert: String,
    /// PEM key of --ssl-cert
    #[arg(long, env = "COMPAT_SSL_KEY", default_value = "")]
    ssl_key: String,
    #[arg(long, env = "COMPAT_SASL_USERNAME", default_value = "")]
    sasl_username: String,
    #[arg(long, env = "COMPAT_SASL_PASSWORD", default_value = "")]
    sasl_password: String,
    /// the topic prefix both principals may use (ALL)
    #[arg(long, env = "COMPAT_TOPIC_PREFIX", default_value = "")]
    topic_prefix: String,
    /// the group prefix both principals may use (ALL)
    #[arg(long, env = "COMPAT_GROUP_PREFIX", default_value = "")]
    group_prefix: String,
    /// an existing topic neither principal has an ACL on
    #[arg(long, env = "COMPAT_DENIED_TOPIC", default_value = "")]
    denied_topic: String,
}

impl SecurityArgs {
    /// Fails naming every flag the check needs and was not given.
    fn require(&self) -> anyhow::Result<&Self> {
        let flags = [
            ("sasl-bootstrap", &self.sasl_bootstrap),
            ("ssl-bootstrap", &self.ssl_bootstrap),
            ("ssl-ca", &self.ssl_ca),
            ("ssl-cert", &self.ssl_cert),
            ("ssl-key", &self.ssl_key),
            ("sasl-username", &self.sasl_username),
            ("sasl-password", &self.sasl_password),
            ("topic-prefix", &self.topic_prefix),
            ("group-prefix", &self.group_prefix),
            ("denied-topic", &self.denied_topic),
        ];
        let missing: Vec<String> = flags
            .iter()
            .filter(|(_, v)| v.is_empty())
            .map(|(name, _)| format!("--{name}"))
            .collect();
        if !missing.is_empty() {
            bail!("--check security needs {}", missing.join(", "));
        }
        Ok(self)
    }
}

/// The listeners of the check, named by their security protocol.
#[derive(Clone, Copy)]
enum Listener {
    SaslSsl,
    Ssl,
}

/// What a step found wrong (nothing: it held) and what happened.
type StepResult = (Vec<String>, String);

/// A copy of args whose clients reach `listener`: as the SCRAM user with
/// `password` over SASL_SSL, or as the client certificate's subject over SSL
/// (ssl.client.auth=required covers both, so the certificate is always sent).
fn endpoint(args: &Args, s: &SecurityArgs, listener: Listener, password: &str) -> Args {
    let mut e = args.clone();
    let mut settings = vec![
        ("ssl.ca.location", s.ssl_ca.as_str()),
        ("ssl.certificate.location", s.ssl_cert.as_str()),
        ("ssl.key.location", s.ssl_key.as_str()),
    ];
    match listener {
        Listener::SaslSsl => {
            e.bootstrap = s.sasl_bootstrap.clone();
            settings.extend([
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", SCRAM_MECHANISM),
                ("sasl.username", s.sasl_username.as_str()),
                ("sasl.password", password),
            ]);
        }
        Listener::Ssl => {
            e.bootstrap = s.ssl_bootstrap.clone();
            settings.push(("security.protocol", "SSL"));
        }
    }
    e.client_settings = settings
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    e
}

/// One step of the check.
enum Step {
    /// (1), (2): produce and consume on `listener`, names tagged `tag`
    ProduceConsume(Listener, &'static str),
    /// (3)
    RefusedLogin,
    /// (4)
    DeniedProduce(Listener),
}

impl Step {
    async fn run(&self, args: &Args, s: &SecurityArgs) -> anyhow::Result<StepResult> {
        match *self {
            Step::ProduceConsume(listener, tag) => {
                let topic = verify::unique(&format!("{}{tag}", s.topic_prefix));
                let group = verify::unique(&format!("{}{tag}", s.group_prefix));
                produce_consume(args, s, listener, &topic, &group).await
            }
            Step::RefusedLogin => refused_login(args, s),
            Step::DeniedProduce(listener) => denied_produce(args, s, listener).await,
        }
    }
}

/// Runs the five steps and emits one `security` line naming each step's
/// outcome and time: fail if any step has a problem, else pass.
pub async fn check(rep: &mut Reporter, args: &Args) -> anyhow::Result<()> {
    let s = args.security.require()?;
    let sasl_as = format!("SASL_SSL {SCRAM_MECHANISM} as {}", s.sasl_username);
    let denied = &s.denied_topic;
    let steps = [
        (
            format!("(1) {sasl_as}"),
            Step::ProduceConsume(Listener::SaslSsl, "sasl"),
        ),
        (
            "(2) SSL, client certificate required, as its subject".to_string(),
            Step::ProduceConsume(Listener::Ssl, "mtls"),
        ),
        ("(3) wrong password".to_string(), Step::RefusedLogin),
        (
            format!("(4) produce to ungranted {denied} over {sasl_as}"),
            Step::DeniedProduce(Listener::SaslSsl),
        ),
        (
            format!("(4) produce to ungranted {denied} over SSL as the certificate"),
            Step::DeniedProduce(Listener::Ssl),
        ),
    ];
    let (mut failed, mut details) = (false, Vec::new());
    for (name, step) in &steps {
        let t0 = Instant::now();
        let (problems, what) = step
            .run(args, s)
            .await
            .unwrap_or_else(|e| (vec![format!("error: {e:#}")], String::new()));
        let took = format!("{:.1}s", t0.elapsed().as_secs_f64());
        if problems.is_empty() {
            details.push(format!("{name}: {what} ({took})"));
        } else {
            failed = true;
            details.push(format!(
                "{name}: FAILED after {took}: {}",
                problems.join("; ")
            ));
        }
        verify::log(details.last().map(String::as_str).unwrap_or_default());
    }
    let detail: String = details.join("; ").chars().take(2000).collect();
    rep.emit("security", if failed { "fail" } else { "pass" }, &detail);
    Ok(())
}

/// Steps (1) and (2): a new granted topic, n messages produced (acks=all),
/// all read back by a member of a new granted group.
async fn produce_consume(
    args: &Args,
    s: &SecurityArgs,
    listener: Listener,
    topic: &str,
    group: &str,
) -> anyhow::Result<StepResult> {
    let e = endpoint(args, s, listener, &s.sasl_password);
    let n = args.messages;
    create_topic(&e, topic, PRODUCE_PARTITIONS).await?;
    let (acks, errors) = produce(&e, topic, &[]).await?;
    let problems = verify::verify_acks(n, &acks, &errors);
    if !problems.is_empty() {
        return Ok((problems, String::new()));
    }
    let c = consumer(&e, group, &[])?;
    c.subscribe(&[topic])?;
    let records = poll_until(&c, e.stage(), 0, |rs| rs.len() >= n)?;
    drop(c);
    Ok((
        verify::verify_read_back(topic, n, &records, Some(&acks)),
        format!("{n} produced to {topic} (acks=all), read back by group {group}"),
    ))
}

/// Records the global errors librdkafka reports (its error_cb).
#[derive(Default)]
struct ErrorLog(Mutex<Vec<(KafkaError, String)>>);

impl ErrorLog {
    fn authentication(&self) -> Option<String> {
        let errors = self.0.lock().unwrap_or_else(|p| p.into_inner());
        errors.iter().find_map(|(e, reason)| {
            (e.rdkafka_error_code() == Some(RDKafkaErrorCode::Authentication))
                .then(|| reason.clone())
        })
    }

    fn first(&self, k: usize) -> Vec<String> {
        let errors = self.0.lock().unwrap_or_else(|p| p.into_inner());
        errors
            .iter()
            .take(k)
            .map(|(e, r)| format!("{e}: {r}"))
            .collect()
    }
}

impl ClientContext for ErrorLog {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((error, reason.to_string()));
    }
}

impl ProducerContext for ErrorLog {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::producer::DeliveryResult<'_>, _: ()) {}
}

/// Step (3): a producer with a wrong password gets librdkafka's
/// _AUTHENTICATION error (a producer connects to its bootstrap broker at
/// once; poll() serves the error callback).
fn refused_login(args: &Args, s: &SecurityArgs) -> anyhow::Result<StepResult> {
    let e = endpoint(
        args,
        s,
        Listener::SaslSsl,
        &format!("not-{}", s.sasl_password),
    );
    let producer: BaseProducer<ErrorLog> = e.config().create_with_context(ErrorLog::default())?;
    let deadline = Instant::now() + e.stage();
    let mut auth = producer.context().authentication();
    while auth.is_none() && Instant::now() < deadline {
        producer.poll(Duration::from_millis(200));
        auth = producer.context().authentication();
    }
    Ok(match auth {
        Some(reason) => (
            Vec::new(),
            format!(
                "refused: _AUTHENTICATION {}",
                reason.chars().take(300).collect::<String>()
            ),
        ),
        None => (
            vec![format!(
                "no _AUTHENTICATION error within {:.0}s (errors: {:?})",
                e.stage().as_secs_f64(),
                producer.context().first(3)
            )],
            String::new(),
        ),
    })
}

/// Step (4): producing to the topic no ACL grants fails with
/// TOPIC_AUTHORIZATION_FAILED.
async fn denied_produce(
    args: &Args,
    s: &SecurityArgs,
    listener: Listener,
) -> anyhow::Result<StepResult> {
    let e = endpoint(args, s, listener, &s.sasl_password);
    let timeout_ms = e.stage().as_millis().to_string();
    let producer: FutureProducer = e.config().set("message.timeout.ms", &timeout_ms).create()?;
    let delivery = producer
        .send_result(FutureRecord::<(), _>::to(&s.denied_topic).payload("denied"))
        .map_err(|(err, _)| anyhow::anyhow!("enqueue: {err}"))?;
    // flush's own error is the delivery's: judged below
    let _ = producer.flush(e.stage());
    let got = match tokio::time::timeout(e.stage(), delivery).await {
        Ok(Ok(Err((
            KafkaError::MessageProduction(RDKafkaErrorCode::TopicAuthorizationFailed),
            _,
        )))) => {
            return Ok((
                Vec::new(),
                "delivery failed with TOPIC_AUTHORIZATION_FAILED".into(),
            ))
        }
        Ok(Ok(Err((err, _)))) => format!("got {err}, 0 delivered"),
        Ok(Ok(Ok(d))) => format!(
            "got no error, 1 delivered (partition {} offset {})",
            d.partition, d.offset
        ),
        Ok(Err(_)) => "the delivery report was dropped".into(),
        Err(_) => format!("no delivery report within {:?}", e.stage()),
    };
    Ok((
        vec![format!("want TOPIC_AUTHORIZATION_FAILED, {got}")],
        String::new(),
    ))
}
