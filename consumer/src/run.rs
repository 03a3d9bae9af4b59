//! One replica's run end to end, and the `merge` command.
//!
//! Owns: the order of a run — bind HTTP and print `LISTENING http=ADDR`,
//! consume on a dedicated thread until the shutdown future or idleness,
//! read the ledgers, write the report (and its `.hlog`), print the
//! machine-read `RESULT ...` line, pick the exit status. Must not: parse
//! arguments or install signal handlers (that is `main`).

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use chronik_harness::histogram::HlogWriter;
use chronik_harness::procfs::{self, Task};
use chronik_harness::results::{write_json_file, BrokerInfo, RunMeta};

use crate::config::{Config, MergeArgs};
use crate::ledger::load_ledgers;
use crate::live::Live;
use crate::report::{build_report, read_report_with_share, LedgerSources, Report, RunStats, Tally};
use crate::share::report::{apply_verdict, share_report};
use crate::share::run::WriteReport;
use crate::share::tally::ShareTally;
use crate::{consume, http, EXIT_CLEAN, EXIT_ERROR, EXIT_FAILED, EXIT_INCONCLUSIVE};

const TOOL: &str = "chronik-consumer";

/// Runs one replica; returns the process exit status.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<u8> {
    let broker = BrokerInfo {
        bootstrap_servers: config.bootstrap_servers.clone(),
        ..BrokerInfo::default()
    };
    let started = Instant::now();
    let meta = RunMeta::new(
        TOOL,
        env!("CARGO_PKG_VERSION"),
        broker,
        config.settings_json(),
    );
    let live = Arc::new(Live::new(&config.group, &config.client_id, &config.topics));

    let (http_stop, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = match config.listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding {addr}"))?;
            let bound = listener.local_addr()?;
            tracing::info!(%bound, "serving /metrics and /summary");
            println!("LISTENING http={bound}");
            let _ = std::io::stdout().flush();
            let serve = chronik_http::serve(
                listener,
                http::app(live.clone()),
                chronik_http::HttpLimits::default(),
                async {
                    let _ = http_stopped.await;
                },
            );
            Some(tokio::spawn(serve))
        }
        None => None,
    };

    let stop = Arc::new(AtomicBool::new(false));
    let signal_stop = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutdown requested");
        signal_stop.store(true, Ordering::Relaxed);
    });

    let hlog_path = config.report.as_ref().map(|p| p.with_extension("hlog"));
    let hlog = match &hlog_path {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            Some(HlogWriter::create(
                p,
                SystemTime::now(),
                "chronik-consumer end-to-end latency (consume - envelope send time)",
            )?)
        }
        None => None,
    };
    let hlog_text = hlog_path.as_ref().map(|p| p.display().to_string());
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let (poll_config, poll_live) = (config.clone(), live.clone());
    if config.share_group.is_some() {
        let write = checkpoint_writer(&config, serde_json::to_value(&meta)?, hlog_text.clone());
        std::thread::Builder::new()
            .name("chronik-share".into())
            .spawn(move || {
                let result = crate::share::run::run(&poll_config, &poll_live, &stop, hlog, write)
                    .map(|s| (s.consumed, Some(s.share), s.errors));
                let _ = done_tx.send(result);
            })
            .context("starting the share thread")?;
    } else {
        std::thread::Builder::new()
            .name("chronik-poll".into())
            .spawn(move || {
                let result = consume::run(&poll_config, &poll_live, &stop, hlog)
                    .map(|c| (c, None, Default::default()));
                let _ = done_tx.send(result);
            })
            .context("starting the poll thread")?;
    }
    let (consumed, share, share_errors) = done_rx.await.context("the consuming thread died")??;
    let c = consumed.verifier.counts();
    tracing::info!(stop = ?consumed.stop, consumed = c.consumed, verified = c.verified, rebalances = consumed.rebalances, "consuming finished");

    let (ledgers, ledger_errors) = read_ledgers(config.ledgers.clone()).await;
    let tally = Tally::from_verifier(&consumed.verifier);
    let mut report = build_report(
        "replica",
        serde_json::to_value(&meta)?,
        &tally,
        &ledgers,
        hlog_text,
        Vec::new(),
    );
    let active_secs = consumed.active.as_secs_f64();
    report.run = Some(RunStats {
        stop_reason: format!("{:?}", consumed.stop).to_lowercase(),
        rebalances: consumed.rebalances,
        rebalance_events: consumed.rebalance_events.clone(),
        wall_secs: started.elapsed().as_secs_f64(),
        active_secs,
        verified_per_sec: if active_secs > 0.0 {
            c.verified as f64 / active_secs
        } else {
            0.0
        },
        process_cpu_secs: procfs::cpu_secs(Task::ThisProcess),
        poll_thread_cpu_secs: consumed.poll_thread_cpu_secs,
    });
    if let (Some(share), Some(group)) = (&share, &config.share_group) {
        report.share = Some(share_report(group, share, &tally));
        apply_verdict(&mut report);
        let errors: std::collections::BTreeMap<String, u64> = share_errors;
        if !errors.is_empty() {
            report
                .verdict
                .notes
                .push(format!("share client errors (retried): {errors:?}"));
        }
    }
    report.verdict.notes.extend(ledger_errors.iter().cloned());
    if let Some(path) = &config.report {
        write_json_file(path, &report)?;
        tracing::info!(path = %path.display(), "report written");
    }
    print_result(&report, config.report.as_deref(), true);
    live.set_state("stopped");
    let _ = http_stop.send(());
    if let Some(server) = server {
        let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    }
    Ok(exit_status(&report, !ledger_errors.is_empty(), false))
}

/// Share mode: what writes a checkpoint (the report so far, `run.stopReason`
/// "checkpoint") to `--report`, so a member killed with SIGKILL still
/// leaves a report covering every record it may have acknowledged.
fn checkpoint_writer(
    config: &Config,
    meta: serde_json::Value,
    hlog: Option<String>,
) -> Option<WriteReport> {
    let path = config.report.clone()?;
    let group = config.share_group.clone().unwrap_or_default();
    let started = Instant::now();
    Some(Box::new(move |tally: Tally, share: ShareTally| {
        let mut report = build_report(
            "replica",
            meta.clone(),
            &tally,
            &Vec::new(),
            hlog.clone(),
            Vec::new(),
        );
        report.share = Some(share_report(&group, &share, &tally));
        apply_verdict(&mut report);
        report.run = Some(RunStats {
            stop_reason: "checkpoint".into(),
            rebalances: 0,
            rebalance_events: Vec::new(),
            wall_secs: started.elapsed().as_secs_f64(),
            active_secs: 0.0,
            verified_per_sec: 0.0,
            process_cpu_secs: None,
            poll_thread_cpu_secs: None,
        });
        // compact, and atomic: a reader (the merge, a drain check) sees the
        // previous checkpoint or this one, never a torn file
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&report)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
        Ok(())
    }))
}

/// Reads every ledger source; failures become notes (and exit status 2).
async fn read_ledgers(sources: Vec<String>) -> (LedgerSources, Vec<String>) {
    let read = tokio::task::spawn_blocking(move || {
        let mut ledgers = Vec::new();
        let mut errors = Vec::new();
        for source in sources {
            match load_ledgers(&source) {
                Ok(list) => ledgers.push((source, list)),
                Err(e) => {
                    tracing::error!(error = %e, "ledger not read; reconciliation is incomplete");
                    errors.push(format!("ledger not read: {e}"));
                }
            }
        }
        (ledgers, errors)
    });
    read.await
        .unwrap_or_else(|e| (Vec::new(), vec![format!("reading ledgers panicked: {e}")]))
}

fn exit_status(report: &Report, ledger_errors: bool, require_complete: bool) -> u8 {
    if !report.verdict.clean {
        EXIT_FAILED
    } else if ledger_errors {
        EXIT_ERROR
    } else if require_complete && !report.verdict.conclusive {
        EXIT_INCONCLUSIVE
    } else {
        EXIT_CLEAN
    }
}

/// The one-line machine-read result, on stdout (stderr when stdout carries
/// the report itself).
fn print_result(report: &Report, path: Option<&Path>, on_stdout: bool) {
    let (c, r) = (&report.counts, &report.counts.records);
    let line = format!(
        "RESULT clean={} conclusive={} consumed={} verified={} duplicates={} reordered={} corrupt={} redeliveries={} foreign={} gaps={} lost={} report={}",
        report.verdict.clean,
        report.verdict.conclusive,
        r.consumed,
        r.verified,
        r.duplicates,
        r.reordered,
        r.corrupt,
        r.redeliveries,
        r.foreign,
        c.gaps,
        c.lost,
        path.map_or_else(|| "-".to_string(), |p| p.display().to_string()),
    );
    let line = match &report.share {
        Some(s) => format!(
            "{line} accepted={} acceptedTwice={} notAccepted={} acceptOutcomeUnknown={} deliveries={} shareRedeliveries={} maxDeliveryCount={}",
            s.counts.records_accepted,
            s.counts.accepted_twice,
            s.counts.not_accepted,
            s.counts.accept_outcome_unknown,
            s.counts.deliveries,
            s.counts.redeliveries,
            s.counts.max_delivery_count
        ),
        None => line,
    };
    if on_stdout {
        println!("{line}");
        let _ = std::io::stdout().flush();
    } else {
        eprintln!("{line}");
    }
    if report.verdict.clean {
        tracing::info!(conclusive = report.verdict.conclusive, notes = ?report.verdict.notes, "verification clean");
    } else {
        tracing::error!(failures = ?report.verdict.failures, notes = ?report.verdict.notes, "verification FAILED");
    }
}

/// The share group named in a report's `share` section.
fn share_group_of(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["share"]["group"].as_str().map(String::from)
}

/// `chronik-consumer merge`: combines reports; exit 0 clean and conclusive,
/// 1 failures, 3 clean but not every offset covered.
pub async fn merge(args: MergeArgs) -> anyhow::Result<u8> {
    let settings = serde_json::json!({
        "reports": args.reports.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "ledgers": args.ledgers,
    });
    let meta = RunMeta::new(
        &format!("{TOOL} merge"),
        env!("CARGO_PKG_VERSION"),
        BrokerInfo::default(),
        settings,
    );
    let mut tally = Tally::default();
    let mut share: Option<ShareTally> = None;
    let mut group: Option<String> = None;
    let mut sources = Vec::new();
    for path in &args.reports {
        let (t, s, sh) = read_report_with_share(path)?;
        tally.absorb(t);
        sources.push(s);
        if let Some(sh) = sh {
            if group.is_none() {
                group = share_group_of(path);
            }
            share.get_or_insert_with(ShareTally::default).absorb(sh);
        }
    }
    let (ledgers, ledger_errors) = read_ledgers(args.ledgers.clone()).await;
    let hlog_path: Option<PathBuf> = args.report.as_ref().map(|p| p.with_extension("hlog"));
    if let Some(p) = &hlog_path {
        let mut w = HlogWriter::create(
            p,
            SystemTime::now(),
            "chronik-consumer merge: end-to-end latency of every replica",
        )?;
        w.write_interval(&tally.latency, Duration::ZERO, Duration::ZERO, None)?;
        w.finish()?;
    }
    let hlog_text = hlog_path.as_ref().map(|p| p.display().to_string());
    let mut report = build_report(
        "merged",
        serde_json::to_value(&meta)?,
        &tally,
        &ledgers,
        hlog_text,
        sources,
    );
    if let Some(share) = &share {
        report.share = Some(share_report(group.as_deref().unwrap_or(""), share, &tally));
        apply_verdict(&mut report);
    }
    report.verdict.notes.extend(ledger_errors.iter().cloned());
    match &args.report {
        Some(path) => write_json_file(path, &report)?,
        None => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    print_result(&report, args.report.as_deref(), args.report.is_some());
    Ok(exit_status(&report, !ledger_errors.is_empty(), true))
}
