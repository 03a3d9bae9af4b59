// find-max.js - the highest rate the pipeline sustains with its gates held.
//
// Re-creates: no seed test. The seeds reported what one ramp reached; this
// asks the question a capacity plan needs: the highest constant rate at which
// batch p99 stays under P99_MS and k6 could start (nearly) every iteration.
// Shape: a staircase of constant-arrival-rate steps (k6/lib/staircase.js),
// climbed REPEAT times; request shape as smoke.js (blocking POST
// /produce/batch, 100 x 256 B).
// Measures: per step, batch latency, produce errors, dropped and interrupted
// iterations, each gated like a smoke run. Higher steps are expected to fail
// their gates, so k6 exits 99 on any informative run; the verdict (the
// highest level that held in every climb, and the spread across climbs) is
// reports/capacity.py's, printed by run-all.sh --find-max and in the report.
//
// Env: LEVELS (batches/s per step, comma-separated, increasing; default
// 200,400,600,800,1000,1200; x VU_SCALE), STEP (hold per step, default 20s;
// x DURATION_SCALE), GAP (seconds between steps, default 5s, at least P99_MS),
// REPEAT (climbs, default 2), plus the shared knobs (k6/README.md).
// Defaults as smoke.js: P99_MS=1000, ERROR_RATE=0, DROPPED_RATIO=0.01.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e LEVELS=100,200 k6/scenarios/find-max.js

import { Counter } from 'k6/metrics';
import { SMOKE_DEFAULTS, envNumber, envString, loadConfig, parseDuration, runTags, scaleTarget } from '../lib/config.js';
import { IngestorClient, waitReady } from '../lib/ingestor.js';
import { parseLevels, staircase, stepScenarios, stepThresholds } from '../lib/staircase.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';

const cfg = loadConfig({ ...SMOKE_DEFAULTS, scenario: 'find-max', seed: 'none' });

const levels = parseLevels(envString('LEVELS', '200,400,600,800,1000,1200')).map((l) => scaleTarget(l, cfg.vuScale));
const stepS = Math.max(1, Math.round(parseDuration(envString('STEP', '20s')) * cfg.durationScale));
const gapS = Math.ceil(parseDuration(envString('GAP', '5s')));
if (gapS * 1000 < cfg.p99Ms) throw new Error(`GAP=${gapS}s: must be at least P99_MS (${cfg.p99Ms} ms)`);
const repeats = envNumber('REPEAT', 2, { min: 1, integer: true });
const steps = staircase({ levels: [...new Set(levels)], stepS, gapS, repeats });

export const options = {
  scenarios: stepScenarios(steps, { p99Ms: cfg.p99Ms, gapS }),
  thresholds: stepThresholds(cfg, steps),
  summaryTrendStats,
  tags: runTags(cfg),
};

const batchesStarted = new Counter('batches_started');
const client = new IngestorClient(cfg);

export function setup() {
  waitReady(cfg);
}

export default function () {
  batchesStarted.add(1);
  client.sendBatch();
}

export function handleSummary(data) {
  return writeSummary(data, cfg, options, {
    find_max: { levels, step_s: stepS, gap_s: gapS, repeats, steps },
  });
}
