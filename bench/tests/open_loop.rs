//! Open loop: `--rate` holds its rate, the run is judged valid, and the three
//! open-loop histograms are reported and logged.

mod common;

use common::{broker, hlog, num, read_json, run_bench};

#[test]
fn a_modest_rate_is_held_and_judged_valid() -> anyhow::Result<()> {
    let broker = broker()?;
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("rate.json");
    let results = dir.path().join("results");
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "rate",
            "--create-topic",
            "--rate",
            "2000",
            "--concurrency",
            "2",
            "--duration",
            "3s",
            "--warmup-duration",
            "1s",
            "--message-size",
            "256",
            "--report-interval-secs",
            "1",
            "--strict",
            "--json-output",
            json.to_str().unwrap_or_default(),
            "--results-dir",
            results.to_str().unwrap_or_default(),
        ],
    )?;
    run.assert_success("rate run");
    let doc = read_json(&json)?;
    assert_eq!(doc["targetRate"], 2000.0);
    let achieved = num(&doc, "achievedRate");
    assert!(
        achieved >= 0.9 * 2000.0,
        "achieved {achieved} msg/s of 2000"
    );
    assert!(
        achieved <= 1.1 * 2000.0,
        "an open loop does not run ahead of its schedule: {achieved}"
    );
    assert_eq!(doc["valid"], true);
    assert!(
        (num(&doc, "durationSecs") - 3.0).abs() < 0.05,
        "the window is the measured 3 s: {}",
        doc["durationSecs"]
    );
    // Response time includes the schedule delay: never below service time.
    assert!(
        num(&doc, "aggregatedResponseLatency99pct") >= num(&doc, "aggregatedPublishLatency50pct")
    );
    assert!(
        doc["aggregatedPublishDelayLatency50pct"].is_u64(),
        "publish delay is integer µs as in OMB"
    );
    assert!(run.stdout.contains("VALID"), "{}", run.stdout);
    for stem in ["publish-service", "publish-response", "publish-delay"] {
        let (_, n) = hlog(&doc, stem)?;
        assert!(n as f64 >= 0.9 * 2000.0 * 3.0, "{stem}: {n} samples");
    }
    Ok(())
}

#[test]
fn a_sweep_steps_the_rate_and_reports_the_knee() -> anyhow::Result<()> {
    let broker = broker()?;
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("sweep.json");
    let csv = dir.path().join("sweep.csv");
    // A generous objective: both steps pass, so the knee is the last rate.
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "sweep",
            "--create-topic",
            "--sweep",
            "--sweep-start",
            "500",
            "--sweep-step",
            "500",
            "--sweep-max",
            "1000",
            "--slo-p99-ms",
            "60000",
            // 3 s a step: a fsync stall of half a second (a busy shared
            // disk: the other test lane's clusters) must not make a step
            // miss its rate; what is tested is the sweep, not the machine.
            "--duration",
            "3s",
            "--warmup-duration",
            "0.5s",
            "--message-size",
            "64",
            "--json-output",
            json.to_str().unwrap_or_default(),
            "--csv-output",
            csv.to_str().unwrap_or_default(),
        ],
    )?;
    run.assert_success("sweep");
    let doc = read_json(&json)?;
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), 2, "{doc}");
    assert_eq!(steps[0]["rate"], 500.0);
    assert_eq!(steps[1]["rate"], 1000.0);
    for s in &steps {
        assert_eq!(s["valid"], true, "{s}");
        assert!(s["result"]["publishRate"].is_array());
    }
    assert_eq!(doc["kneeRate"], 1000.0);
    assert!(doc["meta"]["settings"]["sweep"].is_object());
    assert!(
        run.stdout
            .contains("Highest sustainable rate (knee): 1000 msg/s"),
        "{}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(&csv)?.lines().count(),
        3,
        "header + one row per step"
    );
    Ok(())
}
