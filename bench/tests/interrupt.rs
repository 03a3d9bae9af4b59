//! Ctrl-C (SIGINT) mid-run ends the run early and still prints the table and
//! writes the results, with the measured window up to the interrupt.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{bench_command, broker, num, read_json, BenchChild};

#[test]
fn sigint_ends_the_run_and_results_are_still_written() -> anyhow::Result<()> {
    let broker = broker()?;
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("int.json");
    let csv = dir.path().join("int.csv");
    let mut child = BenchChild {
        child: bench_command(
            &broker,
            &[
                "--topic",
                "int",
                "--create-topic",
                "--rate",
                "1000",
                "--duration",
                "120s",
                "--warmup-duration",
                "0s",
                "--report-interval-secs",
                "1",
                "--json-output",
                json.to_str().unwrap_or_default(),
                "--csv-output",
                csv.to_str().unwrap_or_default(),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?,
    };
    let stdout = child.child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Wait for the first periodic line: the run is measuring.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let line = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))?;
        let periodic = line.starts_with('[');
        seen.push(line);
        if periodic {
            break;
        }
    }
    let status = Command::new("kill")
        .args(["-INT", &child.child.id().to_string()])
        .status()?;
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let exit = loop {
        if let Some(s) = child.child.try_wait()? {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "chronik-bench did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    seen.extend(rx.try_iter());
    let stdout = seen.join("\n");
    assert!(exit.success(), "exit {exit:?}: {stdout}");
    assert!(stdout.contains("Chronik Benchmark Results"), "{stdout}");
    assert!(stdout.contains("interrupted by Ctrl-C"), "{stdout}");
    let doc = read_json(&json)?;
    assert_eq!(doc["interrupted"], true);
    let window = num(&doc, "durationSecs");
    assert!(
        window > 0.5 && window < 60.0,
        "window up to the interrupt: {window}"
    );
    assert!(num(&doc, "messages") > 0.0);
    let text = std::fs::read_to_string(&csv)?;
    assert_eq!(text.lines().count(), 2, "{text}");
    Ok(())
}
