//! The invocation: topic set-up, one run or a sweep, every output, the exit code.
//!
//! Owns: what happens around runs — broker identity and the `meta` block,
//! the results directory layout (`<results-dir>/<mode>-<UTC time>/` with
//! `result.json` and `.hlog` files; sweep steps in `step-NN-<rate>/`), the
//! table/CSV/JSON writes, topic deletion, and the exit code
//! (0; 2 with `--strict` when the run is invalid or verification found
//! faults, or no sweep step passed). Must not: measure.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result};
use chronik_harness::results::{write_json_file, RunMeta};

use crate::client;
use crate::config::{Config, Mode};
use crate::report::omb::{self, SweepStepReport};
use crate::report::{csv, table};
use crate::result::RunResult;
use crate::run::{self, RunContext};
use crate::sweep;

pub const TOOL: &str = "chronik-bench";
pub const EXIT_STRICT_FAILURE: i32 = 2;

/// Runs the invocation described by `c`; returns the process exit code.
pub fn run(c: Config, interrupted: Arc<AtomicBool>) -> Result<i32> {
    let md = client::metadata_client(&c)?;
    let partitions = run::prepare_topic(&c, &md).context("preparing the topic")?;
    let broker = client::broker_info(&c, &md);
    let meta = RunMeta::new(
        TOOL,
        env!("CARGO_PKG_VERSION"),
        broker,
        serde_json::to_value(&c)?,
    );
    tracing::info!(cluster_id = ?meta.broker.cluster_id, apis = meta.broker.api_versions.len(), partitions = partitions.len(), "broker");
    let run_dir = match &c.results_dir {
        Some(dir) => {
            let stamp: String = humantime::format_rfc3339_seconds(SystemTime::now())
                .to_string()
                .chars()
                .filter(|ch| *ch != '-' && *ch != ':')
                .collect();
            let d = dir.join(format!("{}-{stamp}", mode_slug(c.mode)));
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            Some(d)
        }
        None => None,
    };
    let comment = format!(
        "{TOOL} {} mode={} against {} (cluster {}), git {}",
        env!("CARGO_PKG_VERSION"),
        mode_slug(c.mode),
        c.bootstrap_servers,
        meta.broker.cluster_id.as_deref().unwrap_or("unknown"),
        meta.git_commit
    );
    let ctx = RunContext {
        interrupted: interrupted.clone(),
        print_lines: true,
        partitions,
        hlog_dir: None,
        hlog_comment: comment,
    };
    let code = match c.sweep {
        Some(_) => sweep_runs(&c, ctx, run_dir.as_deref(), &meta),
        None => single_run(&c, ctx, run_dir.as_deref(), &meta),
    };
    if c.delete_topic_after {
        if let Err(e) = client::delete_topic(&c) {
            tracing::warn!(error = %e, "could not delete the topic");
        }
    }
    code
}

fn mode_slug(mode: Mode) -> &'static str {
    match mode {
        Mode::Produce => "produce",
        Mode::Consume => "consume",
        Mode::RoundTrip => "round-trip",
        Mode::Metadata => "metadata",
    }
}

fn write_outputs(
    c: &Config,
    run_dir: Option<&Path>,
    doc: &serde_json::Value,
    rows: &[String],
) -> Result<()> {
    if let Some(path) = &c.json_output {
        write_json_file(path, doc)?;
        tracing::info!(path = %path.display(), "wrote JSON result");
    }
    if let Some(dir) = run_dir {
        write_json_file(&dir.join("result.json"), doc)?;
        tracing::info!(dir = %dir.display(), "wrote result.json and interval logs");
    }
    if let Some(path) = &c.csv_output {
        csv::append(path, rows)?;
        tracing::info!(path = %path.display(), "appended CSV");
    }
    Ok(())
}

fn single_run(
    c: &Config,
    mut ctx: RunContext,
    run_dir: Option<&Path>,
    meta: &RunMeta,
) -> Result<i32> {
    ctx.hlog_dir = run_dir.map(Path::to_path_buf);
    let r = run::run_once(c, c.rate, &ctx)?;
    print!("{}", table::box_table(c, &r));
    write_outputs(
        c,
        run_dir,
        &omb::run_document(c, &r, meta),
        &[csv::row(c, &r)],
    )?;
    Ok(exit_code(c, &r))
}

fn exit_code(c: &Config, r: &RunResult) -> i32 {
    let invalid = r.validity().is_some_and(|v| !v.valid);
    let faults = r.verification.as_ref().is_some_and(|v| !v.clean());
    if invalid {
        tracing::warn!("run INVALID: achieved rate below 95% of --rate");
    }
    if faults {
        tracing::warn!("verification found lost, duplicated, out-of-order or corrupt messages");
    }
    if c.strict && (invalid || faults) {
        EXIT_STRICT_FAILURE
    } else {
        0
    }
}

fn sweep_runs(
    c: &Config,
    mut ctx: RunContext,
    run_dir: Option<&Path>,
    meta: &RunMeta,
) -> Result<i32> {
    let Some(s) = c.sweep else { return Ok(0) };
    let mut results: Vec<(f64, sweep::StepJudgement, RunResult)> = Vec::new();
    for (i, rate) in sweep::rates(&s).into_iter().enumerate() {
        println!("── sweep step {}: {rate:.0} msg/s ──", i + 1);
        ctx.hlog_dir = run_dir.map(|d| d.join(format!("step-{:02}-{rate:.0}", i + 1)));
        if let Some(d) = &ctx.hlog_dir {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let r = run::run_once(c, Some(rate), &ctx)?;
        let j = sweep::judge(&r, s.slo_p99_ms);
        println!(
            "── step {}: target {rate:.0}, achieved {:.0} msg/s, p99 {:.2} ms → {}",
            i + 1,
            r.publish_rate(),
            j.p99_ms,
            if j.passed() {
                "pass"
            } else if !j.valid {
                "INVALID (< 95% of target)"
            } else {
                "over the SLO"
            }
        );
        let stop = !j.passed() || ctx.interrupted.load(Ordering::Relaxed);
        results.push((rate, j, r));
        if stop {
            break;
        }
    }
    let judged: Vec<(f64, sweep::StepJudgement)> =
        results.iter().map(|(r, j, _)| (*r, *j)).collect();
    let knee = sweep::knee(&judged);
    println!(
        "\n| step | target msg/s | achieved msg/s | p99 ms | valid | within SLO ({} ms) |",
        s.slo_p99_ms
    );
    println!("|---|---|---|---|---|---|");
    for (i, (rate, j, r)) in results.iter().enumerate() {
        println!(
            "| {} | {rate:.0} | {:.0} | {:.2} | {} | {} |",
            i + 1,
            r.publish_rate(),
            j.p99_ms,
            j.valid,
            j.within_slo
        );
    }
    match knee {
        Some(k) => println!("\nHighest sustainable rate (knee): {k:.0} msg/s"),
        None => println!(
            "\nNo step met the objective: no sustainable rate found at or above {:.0} msg/s",
            s.start
        ),
    }
    if let Some((_, _, r)) = results
        .iter()
        .rev()
        .find(|(rate, _, _)| Some(*rate) == knee)
    {
        print!("{}", table::box_table(c, r));
    }
    let reports: Vec<SweepStepReport<'_>> = results
        .iter()
        .map(|(rate, j, r)| SweepStepReport {
            rate: *rate,
            p99_ms: j.p99_ms,
            valid: j.valid,
            within_slo: j.within_slo,
            result: r,
        })
        .collect();
    let rows: Vec<String> = results.iter().map(|(_, _, r)| csv::row(c, r)).collect();
    write_outputs(
        c,
        run_dir,
        &omb::sweep_document(c, &reports, knee, meta),
        &rows,
    )?;
    Ok(if c.strict && knee.is_none() {
        EXIT_STRICT_FAILURE
    } else {
        0
    })
}
