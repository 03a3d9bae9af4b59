//! Round-trip finds what the test injects: one duplicate, one loss (an
//! acknowledgement recorded for a message never sent), one gap (a sequence
//! never sent and never acknowledged) — each counted exactly once, and
//! `--strict` turns them into a failing exit code.

mod common;

use common::{broker, read_json, run_bench};

#[test]
fn injected_loss_duplicate_and_gap_are_counted_exactly() -> anyhow::Result<()> {
    let broker = broker()?;
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("faults.json");
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "faults",
            "--create-topic",
            "--mode",
            "round-trip",
            "--rate",
            "1000",
            "--duration",
            "2s",
            "--warmup-duration",
            "0.5s",
            "--message-size",
            "64",
            "--drain-timeout",
            "5s",
            "--inject-duplicate",
            "5",
            "--inject-phantom-ack",
            "10",
            "--inject-skip-sequence",
            "15",
            "--strict",
            "--json-output",
            json.to_str().unwrap_or_default(),
        ],
    )?;
    assert_eq!(
        run.status.code(),
        Some(2),
        "--strict fails on faults: {}\n{}",
        run.stdout,
        run.stderr
    );
    let doc = read_json(&json)?;
    let v = &doc["verification"];
    assert_eq!(v["reconciliation"]["lost"], 1, "{v}");
    assert_eq!(v["duplicates"], 1, "{v}");
    assert_eq!(v["reconciliation"]["gaps"], 1, "{v}");
    assert_eq!(v["outOfOrder"], 0, "{v}");
    assert_eq!(v["corrupt"], 0, "{v}");
    assert!(run.stdout.contains("FAULTS FOUND"));
    Ok(())
}

#[test]
fn a_clean_run_under_strict_exits_zero() -> anyhow::Result<()> {
    let broker = broker()?;
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "clean",
            "--create-topic",
            "--mode",
            "round-trip",
            "--duration",
            "1s",
            "--warmup-duration",
            "0s",
            "--strict",
        ],
    )?;
    // Closed loop (no --rate): whether an open loop reaches 95 % of its
    // target depends on how busy the machine is, and this test is about
    // verification, not speed.
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("CLEAN"), "{}", run.stdout);
    Ok(())
}
