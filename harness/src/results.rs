//! The run-metadata block every harness result file carries, and writing
//! result files.
//!
//! Owns: [`RunMeta`] (tool and version, git commit, host, broker identity,
//! every setting — Kafka client properties with their secrets redacted),
//! how the git commit and host facts are found, RFC 3339
//! timestamps, and atomic JSON writes. Must not: know a tool's result fields
//! (those are each tool's own); read the environment beyond the facts named
//! here (git, /proc, hostname).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use serde::Serialize;

use crate::HarnessError;

/// A Kafka client property as a result file may show it: `key=value`, or
/// `key=[redacted]` for secrets (passwords, JAAS configs, private keys,
/// OAuth client secrets), which must never land in a report.
pub fn shown_property(key: &str, value: &str) -> String {
    let k = key.to_ascii_lowercase();
    let secret = [
        "password",
        "secret",
        "jaas",
        "ssl.key.pem",
        "ssl.keystore.key",
        "token",
    ]
    .iter()
    .any(|word| k.contains(word));
    if secret {
        format!("{key}=[redacted]")
    } else {
        format!("{key}={value}")
    }
}

/// Kafka client properties given on a command line (`key=value` pairs, in
/// order), whose `Debug` — what the tools log as their effective
/// configuration — shows secrets redacted.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientProperties(pub Vec<(String, String)>);

impl ClientProperties {
    /// Each property as a report shows it (`shown_property`).
    pub fn shown(&self) -> Vec<String> {
        self.0.iter().map(|(k, v)| shown_property(k, v)).collect()
    }
}

impl std::ops::Deref for ClientProperties {
    type Target = [(String, String)];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Result files get `key=value` strings, secrets redacted.
impl Serialize for ClientProperties {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.shown().serialize(serializer)
    }
}

impl std::fmt::Debug for ClientProperties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.shown()).finish()
    }
}

/// Version of the `meta` block layout; bump when a field changes meaning.
pub const META_SCHEMA_VERSION: u32 = 1;

/// Who ran what, where, against which broker, with which settings.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunMeta {
    pub schema_version: u32,
    pub tool: String,
    pub tool_version: String,
    /// `git rev-parse HEAD` at run time, or "unknown".
    pub git_commit: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub host: HostInfo,
    pub broker: BrokerInfo,
    /// Every effective setting of the run, as the tool names them.
    pub settings: serde_json::Value,
}

impl RunMeta {
    pub fn new(
        tool: &str,
        tool_version: &str,
        broker: BrokerInfo,
        settings: serde_json::Value,
    ) -> RunMeta {
        RunMeta {
            schema_version: META_SCHEMA_VERSION,
            tool: tool.to_string(),
            tool_version: tool_version.to_string(),
            git_commit: git_commit(),
            started_at: rfc3339_utc(SystemTime::now()),
            host: HostInfo::detect(),
            broker,
            settings,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostInfo {
    pub hostname: String,
    /// Cores this process may run on.
    pub cores: usize,
    pub os: String,
    pub kernel: String,
    pub memory_total_kib: Option<u64>,
}

impl HostInfo {
    pub fn detect() -> HostInfo {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .ok()
        };
        HostInfo {
            hostname: read("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            os: std::env::consts::OS.to_string(),
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            memory_total_kib: read("/proc/meminfo").and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
            }),
        }
    }
}

/// The broker as the tool saw it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerInfo {
    pub bootstrap_servers: String,
    /// Cluster id from Metadata, when the broker reports one.
    pub cluster_id: Option<String>,
    /// The broker's ApiVersions answer (empty if it could not be asked).
    pub api_versions: Vec<ApiVersionRange>,
    /// Broker processes sampled for CPU and memory, if any.
    pub pids: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiVersionRange {
    pub api_key: i16,
    pub name: String,
    pub min_version: i16,
    pub max_version: i16,
}

/// The commit of the source tree the tool runs in: `git rev-parse HEAD` in
/// the current directory, then beside the executable; "unknown" otherwise.
pub fn git_commit() -> String {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        dirs.push(cwd);
    }
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        dirs.push(exe_dir);
    }
    for dir in dirs {
        let out = Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(["rev-parse", "HEAD"])
            .output();
        if let Ok(out) = out {
            let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success()
                && commit.len() >= 40
                && commit.chars().all(|c| c.is_ascii_hexdigit())
            {
                return commit;
            }
        }
    }
    "unknown".to_string()
}

/// `2025-10-25T12:51:36.156553+00:00`, the seed CSV's timestamp form.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let s = humantime::format_rfc3339_micros(t).to_string();
    match s.strip_suffix('Z') {
        Some(stripped) => format!("{stripped}+00:00"),
        None => s,
    }
}

/// Writes `value` as pretty JSON to `path` atomically (temp file + rename),
/// creating parent directories.
pub fn write_json_file(path: &Path, value: &impl Serialize) -> Result<(), HarnessError> {
    let io_err = |source| HarnessError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_err)?;
    }
    let mut text = serde_json::to_string_pretty(value).map_err(|e| HarnessError::Json {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    text.push('\n');
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|source| HarnessError::Io {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, path).map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_use_the_seed_form() {
        let t = UNIX_EPOCH + Duration::from_micros(1_761_396_696_156_553);
        assert_eq!(rfc3339_utc(t), "2025-10-25T12:51:36.156553+00:00");
    }

    #[test]
    fn meta_serialises_with_camel_case_names() {
        let broker = BrokerInfo {
            bootstrap_servers: "127.0.0.1:9092".into(),
            cluster_id: Some("abc".into()),
            api_versions: vec![ApiVersionRange {
                api_key: 18,
                name: "ApiVersions".into(),
                min_version: 0,
                max_version: 4,
            }],
            pids: vec![],
        };
        let meta = RunMeta::new("t", "0.1.0", broker, serde_json::json!({"acks": "all"}));
        let v = serde_json::to_value(&meta).expect("serialises");
        assert_eq!(v["tool"], "t");
        assert_eq!(v["broker"]["clusterId"], "abc");
        assert_eq!(v["broker"]["apiVersions"][0]["maxVersion"], 4);
        assert!(v["host"]["cores"].as_u64().expect("cores") >= 1);
        assert!(!v["gitCommit"].as_str().expect("commit").is_empty());
        assert_eq!(v["settings"]["acks"], "all");
    }

    #[test]
    fn json_files_are_written_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/result.json");
        write_json_file(&path, &serde_json::json!({"a": 1})).expect("write");
        let back: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        assert_eq!(back["a"], 1);
        assert!(!path.with_extension("json.tmp").exists());
    }
}

#[cfg(test)]
mod property_tests {
    use super::shown_property;

    #[test]
    fn debug_of_properties_hides_secrets() {
        let props = super::ClientProperties(vec![
            ("sasl.username".into(), "alice".into()),
            ("sasl.password".into(), "hunter2".into()),
        ]);
        let shown = format!("{props:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(shown_property("acks", "all"), "acks=all");
        assert_eq!(
            shown_property("security.protocol", "SASL_SSL"),
            "security.protocol=SASL_SSL"
        );
        for key in [
            "sasl.password",
            "ssl.key.password",
            "sasl.jaas.config",
            "sasl.oauthbearer.client.secret",
            "ssl.key.pem",
        ] {
            assert_eq!(shown_property(key, "hunter2"), format!("{key}=[redacted]"));
        }
    }
}
