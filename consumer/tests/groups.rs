//! Several chronik-consumer replicas in one consumer group against a real
//! chronik-server: three replicas split six partitions and their reports
//! add up without double counting (and merge clean); a replica joining and
//! another leaving mid-stream cause redeliveries that are counted as such,
//! never as duplicates, and the merged report is clean; a restarted replica
//! resumes from its committed offsets and the runs merge into one verdict.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{count, read_json, Broker, Replica, TestProducer, WAIT};

fn assigned(s: &serde_json::Value) -> usize {
    s["assigned"].as_array().map_or(0, Vec::len)
}

fn verified(s: &serde_json::Value) -> u64 {
    s["counts"]["verified"].as_u64().unwrap_or(0)
}

#[test]
fn three_replicas_split_six_partitions_and_add_up() -> anyhow::Result<()> {
    let broker = Broker::start()?;
    broker.create_topic("split", 6)?;
    let reports: Vec<_> = (0..3)
        .map(|i| broker.path(&format!("split-{i}.json")))
        .collect();
    let mut replicas: Vec<Replica> = Vec::new();
    for (i, path) in reports.iter().enumerate() {
        let report_arg = path.display().to_string();
        replicas.push(broker.consumer(
            &format!("split-{i}"),
            &[
                "--topic",
                "split",
                "--group",
                "g-split",
                "--from-beginning",
                "--report",
                &report_arg,
            ],
        )?);
    }
    // Produce only once the group has settled: 2 partitions each.
    for r in &replicas {
        r.wait_summary("two partitions assigned", |s| assigned(s) == 2)?;
    }
    let producer = TestProducer::new(&broker.bootstrap, "split")?;
    let per_producer = 2000u64;
    for s in 0..per_producer {
        for (k, pid) in [0x51u64, 0x52, 0x53].into_iter().enumerate() {
            producer.send_seqs(((s + k as u64) % 6) as i32, pid, [s])?;
        }
    }
    producer.flush()?;
    let total = 3 * per_producer;
    let deadline = std::time::Instant::now() + WAIT;
    while replicas
        .iter()
        .map(|r| r.summary().map(|s| verified(&s)).unwrap_or(0))
        .sum::<u64>()
        < total
    {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "replicas did not consume {total} records"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for r in &mut replicas {
        r.process.sigterm()?;
    }
    for r in &mut replicas {
        assert_eq!(
            r.process.wait_exit_code(WAIT)?,
            0,
            "{}: a partial view with no problem exits 0",
            r.process.name()
        );
    }

    let replica_reports: Vec<serde_json::Value> = reports
        .iter()
        .map(|p| read_json(p))
        .collect::<Result<_, _>>()?;
    let sum = |name: &str| replica_reports.iter().map(|r| count(r, name)).sum::<u64>();
    // Verified records add up exactly; a replica re-reading its own
    // partitions after a late rebalance would show as redeliveries, apart.
    assert_eq!((sum("verified"), sum("duplicates")), (total, 0));
    assert_eq!(sum("consumed"), total + sum("redeliveries"));
    for r in &replica_reports {
        assert!(count(r, "verified") > 0, "every replica consumed its share");
        assert_eq!(
            r["verdict"]["conclusive"], false,
            "one replica alone cannot decide gaps"
        );
        assert!(
            count(r, "gaps") > 0,
            "alone, a replica sees the other replicas' sequences as gaps"
        );
    }

    let (status, merged) = broker.merge(&reports, &[])?;
    assert_eq!(status, 0, "merged verdict {}", merged["verdict"]);
    let expected = [
        ("consumed", sum("consumed")),
        ("verified", total),
        ("duplicates", 0),
        ("redeliveries", sum("consumed") - total),
        ("gaps", 0),
        ("producers", 3),
    ];
    for (name, n) in expected {
        assert_eq!(count(&merged, name), n, "merged {name}");
    }
    assert_eq!(merged["verdict"]["conclusive"], true);
    assert_eq!(merged["latency"]["e2e"]["count"], total);
    Ok(())
}

#[test]
fn a_rebalance_mid_stream_hands_partitions_over_without_re_reads() -> anyhow::Result<()> {
    let broker = Broker::start()?;
    broker.create_topic("moving", 6)?;
    let producing = Arc::new(AtomicBool::new(true));
    let (bootstrap, flag) = (broker.bootstrap.clone(), producing.clone());
    // Two producers, 60 messages every 20 ms over every partition, ~8 s.
    let writer = std::thread::spawn(move || -> anyhow::Result<serde_json::Value> {
        let p = TestProducer::new(&bootstrap, "moving")?;
        for round in 0..400u64 {
            for i in 0..30u64 {
                let s = round * 30 + i;
                p.send_seqs((s % 6) as i32, 0x61, [s])?;
                p.send_seqs(((s + 3) % 6) as i32, 0x62, [s])?;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        p.flush()?;
        flag.store(false, Ordering::Relaxed);
        Ok(p.ledger())
    });
    let total = 2 * 400 * 30u64;

    // Periodic commits are off (1 h): only the commit made before each
    // revocation tells the partitions' next owner where A stopped. Without
    // it every rebalance would restart them from the beginning.
    let (report_a, report_b) = (broker.path("moving-a.json"), broker.path("moving-b.json"));
    let (arg_a, arg_b) = (
        report_a.display().to_string(),
        report_b.display().to_string(),
    );
    let common_args = [
        "--topic",
        "moving",
        "--group",
        "g-moving",
        "--from-beginning",
        "--commit-interval",
        "1h",
    ];
    let mut a = broker.consumer(
        "moving-a",
        &[&common_args[..], &["--report", &arg_a]].concat(),
    )?;
    a.wait_summary("A consuming", |s| verified(s) > 500)?;
    // B joins while A consumes.
    let mut b = broker.consumer(
        "moving-b",
        &[&common_args[..], &["--report", &arg_b, "--until-idle", "3"]].concat(),
    )?;
    b.wait_summary("B owns partitions and consumes", |s| {
        assigned(s) > 0 && verified(s) > 0
    })?;
    a.wait_summary("A re-assigned", |s| assigned(s) > 0 && assigned(s) < 6)?;
    // A leaves while the stream goes on; B takes over everything.
    anyhow::ensure!(
        producing.load(Ordering::Relaxed),
        "the stream ended before A left; nothing moved mid-stream"
    );
    a.process.sigterm()?;
    assert_eq!(a.process.wait_exit_code(WAIT)?, 0, "A found no problem");
    b.wait_summary("B owns all six partitions", |s| assigned(s) == 6)?;
    let ledger = writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    let ledger_path = broker.path("moving-ledger.json");
    std::fs::write(&ledger_path, serde_json::to_string(&ledger)?)?;
    assert_eq!(b.process.wait_exit_code(WAIT)?, 0, "B found no problem");

    let (ra, rb) = (read_json(&report_a)?, read_json(&report_b)?);
    eprintln!("A {}\nB {}", ra["counts"], rb["counts"]);
    for r in [&ra, &rb] {
        assert_eq!(
            (
                count(r, "duplicates"),
                count(r, "reordered"),
                count(r, "corrupt")
            ),
            (0, 0, 0)
        );
    }
    // Two rebalances moved partitions mid-stream (B joining, A leaving);
    // neither made anyone read a record again.
    assert!(
        ra["run"]["rebalances"].as_u64() >= Some(2),
        "A saw B join and then left: {}",
        ra["run"]
    );
    let events = ra["run"]["rebalanceEvents"].as_array().map_or(0, Vec::len);
    assert!(
        events >= 2,
        "A's rebalances are listed with their times: {}",
        ra["run"]
    );
    assert_eq!(
        (count(&ra, "redeliveries"), count(&rb, "redeliveries")),
        (0, 0),
        "A {} B {}",
        ra["counts"],
        rb["counts"]
    );
    let ledger_arg = ledger_path.display().to_string();
    let (status, merged) = broker.merge(
        &[report_a.clone(), report_b.clone()],
        &["--ledger", &ledger_arg],
    )?;
    assert_eq!(status, 0, "merged verdict {}", merged["verdict"]);
    let expected = [
        ("consumed", total),
        ("verified", total),
        ("redeliveries", 0),
        ("duplicates", 0),
        ("gaps", 0),
        ("lost", 0),
    ];
    for (name, n) in expected {
        assert_eq!(count(&merged, name), n, "merged {name}");
    }
    // Each message timed once: at its first (and only) delivery.
    assert_eq!(merged["latency"]["e2e"]["count"], total);
    assert_eq!(merged["reconciliation"]["acknowledged"], total);
    assert_eq!(merged["verdict"]["conclusive"], true);
    Ok(())
}

#[test]
fn a_restarted_replica_resumes_from_committed_offsets_and_runs_merge() -> anyhow::Result<()> {
    let broker = Broker::start()?;
    broker.create_topic("resume", 2)?;
    let producer = TestProducer::new(&broker.bootstrap, "resume")?;
    producer.send_seqs(0, 0x71, 0..600)?;
    producer.flush()?;
    let run = |name: &str| -> anyhow::Result<(i32, std::path::PathBuf)> {
        let path = broker.path(&format!("{name}.json"));
        let arg = path.display().to_string();
        let args = [
            "--topic",
            "resume",
            "--group",
            "g-resume",
            "--from-beginning",
            "--until-idle",
            "3",
        ];
        let mut c = broker.consumer(name, &[&args[..], &["--report", &arg]].concat())?;
        Ok((c.process.wait_exit_code(WAIT)?, path))
    };
    let (first_status, first) = run("resume-1")?;
    assert_eq!(first_status, 0);
    producer.send_seqs(1, 0x71, 600..1000)?;
    producer.flush()?;
    let (second_status, second) = run("resume-2")?;
    assert_eq!(second_status, 0);
    let (r1, r2) = (read_json(&first)?, read_json(&second)?);
    assert_eq!(count(&r1, "verified"), 600);
    // The second run starts where the first committed: only the new records.
    assert_eq!((count(&r2, "consumed"), count(&r2, "verified")), (400, 400));
    assert_eq!(
        r2["verdict"]["conclusive"], false,
        "partition 0 was read by the first run"
    );
    let (status, merged) = broker.merge(&[first, second], &[])?;
    assert_eq!(status, 0, "merged verdict {}", merged["verdict"]);
    assert_eq!(
        (count(&merged, "verified"), count(&merged, "gaps")),
        (1000, 0)
    );
    assert_eq!(merged["verdict"]["conclusive"], true);
    Ok(())
}
