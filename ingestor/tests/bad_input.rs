//! Bad input, as a table, through `app(state)` with tower's `oneshot` (no
//! socket) against a real broker with auto-create off. Every case must get
//! its own status with a JSON `{"error","detail"}` body, nothing may reach
//! Kafka, and no input may panic the service.

mod common;

use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::{to_bytes, Body};
use axum::http::{header, Method, Request, StatusCode};
use chronik_ingestor::{app, AppState, Config};
use serde_json::Value;
use tower::ServiceExt as _;

use common::kafka::create_topic;
use common::procs;

const MAX_BODY: usize = 4096;

struct Case {
    name: &'static str,
    method: Method,
    path: &'static str,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    status: StatusCode,
    error: &'static str,
    /// Substrings the `detail` must contain.
    detail_has: &'static [&'static str],
    /// Extra fields that must equal these values.
    fields: &'static [(&'static str, &'static str)],
}

fn case(
    name: &'static str,
    path: &'static str,
    body: &str,
    status: u16,
    error: &'static str,
) -> Case {
    Case {
        name,
        method: Method::POST,
        path,
        content_type: Some("application/json"),
        body: body.as_bytes().to_vec(),
        status: StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT),
        error,
        detail_has: &[],
        fields: &[],
    }
}

impl Case {
    fn detail(mut self, has: &'static [&'static str]) -> Case {
        self.detail_has = has;
        self
    }
    fn fields(mut self, fields: &'static [(&'static str, &'static str)]) -> Case {
        self.fields = fields;
        self
    }
    fn content_type(mut self, ct: Option<&'static str>) -> Case {
        self.content_type = ct;
        self
    }
    fn raw(mut self, body: Vec<u8>) -> Case {
        self.body = body;
        self
    }
}

fn table() -> Vec<Case> {
    let oversized = format!(r#"[{{"value":"{}"}}]"#, "x".repeat(MAX_BODY));
    vec![
        case(
            "malformed JSON",
            "/produce/batch",
            "[{\"value\":\"a\"},\n {\"value\": }]",
            400,
            "malformed_json",
        )
        .detail(&["line 2 column"])
        .fields(&[("line", "2"), ("column", "12"), ("index", "1")]),
        case(
            "truncated JSON",
            "/produce/batch",
            r#"[{"value":"a"}"#,
            400,
            "malformed_json",
        )
        .detail(&["EOF"]),
        case(
            "trailing garbage",
            "/produce/batch",
            r#"[{"value":"a"}] x"#,
            400,
            "malformed_json",
        )
        .detail(&["trailing"]),
        case(
            "single: malformed",
            "/produce",
            r#"{"value": "a",}"#,
            400,
            "malformed_json",
        )
        .detail(&["column"]),
        case(
            "fire: malformed",
            "/produce/fire/batch",
            "[",
            400,
            "malformed_json",
        ),
        case(
            "text/plain",
            "/produce/batch",
            r#"[{"value":"a"}]"#,
            415,
            "unsupported_media_type",
        )
        .content_type(Some("text/plain")),
        case(
            "no content type",
            "/produce",
            r#"{"value":"a"}"#,
            415,
            "unsupported_media_type",
        )
        .content_type(None),
        case(
            "form content type",
            "/produce/fire/batch",
            "[]",
            415,
            "unsupported_media_type",
        )
        .content_type(Some("application/x-www-form-urlencoded")),
        case(
            "body over the limit",
            "/produce/batch",
            "",
            413,
            "payload_too_large",
        )
        .raw(oversized.clone().into_bytes()),
        case(
            "fire: body over the limit",
            "/produce/fire/batch",
            "",
            413,
            "payload_too_large",
        )
        .raw(oversized.into_bytes()),
        case("empty batch", "/produce/batch", "[]", 400, "empty_batch"),
        case(
            "fire: empty batch",
            "/produce/fire/batch",
            " [ ] ",
            400,
            "empty_batch",
        ),
        case(
            "batch is an object",
            "/produce/batch",
            r#"{"value":"a"}"#,
            400,
            "invalid_body",
        )
        .detail(&["JSON array"]),
        case(
            "missing value",
            "/produce/batch",
            r#"[{"value":"a"},{"value":"b"},{"key":"k"}]"#,
            422,
            "invalid_message",
        )
        .detail(&["message 2", "value"])
        .fields(&[("index", "2")]),
        case(
            "null value",
            "/produce/fire/batch",
            r#"[{"value":null}]"#,
            422,
            "invalid_message",
        )
        .fields(&[("index", "0")]),
        case(
            "single: missing value",
            "/produce",
            r#"{"key":"k"}"#,
            422,
            "invalid_message",
        )
        .fields(&[("index", "0")]),
        case(
            "value and value_b64",
            "/produce/batch",
            r#"[{"value":"a","value_b64":"YQ=="}]"#,
            422,
            "invalid_message",
        )
        .detail(&["both"]),
        case(
            "bad base64",
            "/produce/batch",
            r#"[{"value":"a"},{"value_b64":"***"}]"#,
            422,
            "invalid_message",
        )
        .fields(&[("index", "1")]),
        case(
            "value of wrong type",
            "/produce/batch",
            r#"[{"value":"a"},{"value":5}]"#,
            422,
            "invalid_message",
        )
        .detail(&["invalid type"])
        .fields(&[("index", "1")]),
        case(
            "unknown field",
            "/produce/batch",
            r#"[{"value":"a","vaule":"b"}]"#,
            422,
            "invalid_message",
        )
        .detail(&["vaule"]),
        case(
            "headers not strings",
            "/produce/batch",
            r#"[{"value":"a","headers":{"h":1}}]"#,
            422,
            "invalid_message",
        ),
        case(
            "negative partition",
            "/produce/batch",
            r#"[{"value":"a","partition":-2}]"#,
            422,
            "invalid_message",
        )
        .detail(&["negative"]),
        case(
            "partition out of i32",
            "/produce/batch",
            r#"[{"value":"a","partition":4294967296}]"#,
            422,
            "invalid_message",
        ),
        case(
            "illegal topic name",
            "/produce/batch",
            r#"[{"value":"a","topic":"a/b"}]"#,
            422,
            "invalid_message",
        )
        .detail(&["topic"]),
        case(
            "unknown topic",
            "/produce/batch",
            r#"[{"value":"a"},{"value":"b","topic":"no-such-topic"}]"#,
            404,
            "unknown_topic",
        )
        .detail(&["no-such-topic", "UnknownTopicOrPartition"])
        .fields(&[("index", "1"), ("topic", "no-such-topic")]),
        case(
            "single: unknown topic",
            "/produce",
            r#"{"value":"b","topic":"no-such-topic"}"#,
            404,
            "unknown_topic",
        )
        .detail(&["UnknownTopicOrPartition"]),
        case(
            "fire: unknown topic",
            "/produce/fire/batch",
            r#"[{"value":"b","topic":"no-such-topic"}]"#,
            404,
            "unknown_topic",
        ),
        case(
            "unknown partition",
            "/produce/batch",
            r#"[{"value":"a","partition":0},{"value":"b","partition":7}]"#,
            404,
            "unknown_partition",
        )
        .fields(&[("index", "1"), ("partition", "7"), ("partitions", "2")]),
        case("unknown route", "/produce/nothing", "[]", 404, "not_found"),
    ]
}

fn field_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

async fn call(router: &axum::Router, c: &Case) -> Result<(StatusCode, Value)> {
    let mut req = Request::builder().method(c.method.clone()).uri(c.path);
    if let Some(ct) = c.content_type {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let response = router
        .clone()
        .oneshot(req.body(Body::from(c.body.clone()))?)
        .await?;
    let status = response.status();
    let retry_after = response.headers().get(header::RETRY_AFTER).is_some();
    let bytes = to_bytes(response.into_body(), usize::MAX).await?;
    let body: Value = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{}: body is not JSON: {}",
            c.name,
            String::from_utf8_lossy(&bytes)
        )
    })?;
    assert_eq!(
        retry_after,
        status == StatusCode::SERVICE_UNAVAILABLE,
        "{}: Retry-After only on 503",
        c.name
    );
    Ok((status, body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_their_own_status_and_nothing_reaches_kafka() -> Result<()> {
    let broker =
        tokio::task::spawn_blocking(|| procs::broker(&["--auto-create-topics", "false"])).await??;
    let bootstrap = broker.bootstrap();
    tokio::task::spawn_blocking(move || create_topic(&bootstrap, "orders", 2)).await??;

    let mut config = Config::for_bootstrap(&broker.bootstrap());
    config.topic = "orders".into();
    config.max_body_bytes = MAX_BODY;
    config.message_timeout = Duration::from_secs(5);
    let state = AppState::new(config)?;
    let router = app(state.clone());

    let mut failures = Vec::new();
    for c in table() {
        let (status, body) = call(&router, &c).await?;
        let error = body["error"].as_str().unwrap_or("<none>");
        let detail = body["detail"].as_str().unwrap_or("<none>");
        let mut problems = Vec::new();
        if status != c.status {
            problems.push(format!("status {status}, expected {}", c.status));
        }
        if error != c.error {
            problems.push(format!("error {error:?}, expected {:?}", c.error));
        }
        if detail.is_empty() || detail == "<none>" {
            problems.push("no detail".into());
        }
        for has in c.detail_has {
            if !detail.contains(has) {
                problems.push(format!("detail lacks {has:?}"));
            }
        }
        for (k, v) in c.fields {
            if field_text(&body[*k]) != *v {
                problems.push(format!("{k} = {}, expected {v}", body[*k]));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {} — body {body}", c.name, problems.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // None of it was sent.
    let ledger = state.producer.ledger_snapshot("t");
    assert_eq!(
        ledger.next_sequence,
        Some(0),
        "rejected requests must not produce anything"
    );

    // A well-formed request still works on the same router afterwards.
    let ok = Case {
        name: "valid",
        ..case(
            "valid",
            "/produce/batch",
            r#"[{"value":"a","partition":1}]"#,
            200,
            "",
        )
    };
    let response = router
        .clone()
        .oneshot(
            Request::post(ok.path)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(ok.body))?,
        )
        .await?;
    assert_eq!(response.status(), StatusCode::OK);
    drop(broker);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_input_panics() -> Result<()> {
    let broker =
        tokio::task::spawn_blocking(|| procs::broker(&["--auto-create-topics", "false"])).await??;
    let mut config = Config::for_bootstrap(&broker.bootstrap());
    config.topic = "absent".into();
    config.max_body_bytes = 64 * 1024;
    config.message_timeout = Duration::from_secs(5);
    let router = app(AppState::new(config)?);
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let bodies: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"null".to_vec(),
        b"[null]".to_vec(),
        b"[[]]".to_vec(),
        b"[1, 2]".to_vec(),
        b"\"str\"".to_vec(),
        deep.into_bytes(),
        b"[{\"value\":\"\\ud800\"}]".to_vec(),
        vec![b'[', b'{', b'"', b'v', 0xff, 0xfe, b'"', b'}', b']'],
        b"[{\"value\":\"a\",\"partition\":1e99}]".to_vec(),
        b"[{\"value\":\"a\",\"key\":{}}]".to_vec(),
        b"[{\"value\":\"a\",\"headers\":[]}]".to_vec(),
        b"[{\"value\":\"a\",\"topic\":\"\"}]".to_vec(),
        b"[{\"value\":\"a\",\"topic\":\"nul\\u0000\"}]".to_vec(),
        format!("[{{\"value\":\"a\",\"topic\":\"{}\"}}]", "t".repeat(300)).into_bytes(),
        b"{\"value\":\"a\"}".repeat(3),
    ];
    for path in ["/produce", "/produce/batch", "/produce/fire/batch"] {
        for body in &bodies {
            let response = router
                .clone()
                .oneshot(
                    Request::post(path)
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(Body::from(body.clone()))?,
                )
                .await?;
            let status = response.status();
            let bytes = to_bytes(response.into_body(), usize::MAX).await?;
            let shown = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
            assert!(
                status.is_client_error(),
                "{path} {shown:?}: {status} {}",
                String::from_utf8_lossy(&bytes)
            );
            let v: Value = serde_json::from_slice(&bytes)?;
            assert!(
                v["error"].is_string() && v["detail"].is_string(),
                "{path} {shown:?}: {v}"
            );
        }
    }
    drop(broker);
    Ok(())
}
