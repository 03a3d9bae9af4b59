//! Records the rdkafka crate version this driver links (from the workspace
//! Cargo.lock) so its result lines can say which client version was tested.

use std::fs;

fn main() {
    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
    println!("cargo:rerun-if-changed={lock}");
    let text = fs::read_to_string(lock).unwrap_or_default();
    let mut lines = text.lines();
    let mut version = "unknown".to_string();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"rdkafka\"" {
            if let Some(v) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
            {
                version = v.trim_matches('"').to_string();
            }
            break;
        }
    }
    println!("cargo:rustc-env=RDKAFKA_CRATE_VERSION={version}");
}
