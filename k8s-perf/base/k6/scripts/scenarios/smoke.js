// smoke.js - the default local run: a modest, constant rate of batches.
//
// Re-creates: no seed test; it is the laptop-sized check that the whole path
// (k6 -> chronik-ingestor -> broker) works and that the figures are sane,
// run by run-all.sh by default. Shapes follow seed 000 Test 6 (100 messages
// of 256 B per POST /produce/batch, acks=1).
// Measures: open-loop (constant-arrival-rate) batch latency at RATE batches/s,
// so a slow ingestor shows up as latency and dropped_iterations instead of
// silently lowering the offered load.
//
// Env: RATE (batches/s, default 20, x VU_SCALE), DURATION (default 60s,
// x DURATION_SCALE), PRE_VUS / MAX_VUS (default from RATE and P99_MS), and the
// shared knobs in k6/README.md. Defaults: P99_MS=1000, ERROR_RATE=0.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 k6/scenarios/smoke.js

import {
  SMOKE_DEFAULTS, envNumber, envString, loadConfig, parseDuration, runTags, scaleDuration, scaleTarget,
} from '../lib/config.js';
import { IngestorClient, waitReady } from '../lib/ingestor.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({ ...SMOKE_DEFAULTS, scenario: 'smoke', seed: 'none' });

const rate = scaleTarget(envNumber('RATE', 20, { min: 1 }), cfg.vuScale);
const duration = scaleDuration(cfg, envString('DURATION', '60s'));
// VUs needed = rate x time a request may take; P99_MS is that budget.
// Enough VUs, started before the load, for 200 ms of latency at RATE: a VU
// k6 has to start mid-run costs CPU and drops iterations while it starts.
const preVUs = envNumber('PRE_VUS', Math.max(2, Math.ceil(rate * 0.2)), { min: 1, integer: true });
const maxVUs = envNumber('MAX_VUS', Math.max(preVUs, Math.ceil((rate * cfg.p99Ms) / 1000) + 2), { min: 1, integer: true });

export const options = {
  scenarios: {
    smoke: {
      executor: 'constant-arrival-rate',
      rate,
      timeUnit: '1s',
      duration,
      preAllocatedVUs: preVUs,
      maxVUs,
      gracefulStop: cfg.httpTimeout,
    },
  },
  thresholds: thresholds(cfg, { expectedIterations: rate * parseDuration(duration) }),
  summaryTrendStats,
  tags: runTags(cfg),
};

const client = new IngestorClient(cfg);

export function setup() {
  waitReady(cfg);
}

export default function () {
  client.sendBatch();
}

export function handleSummary(data) {
  return writeSummary(data, cfg, options);
}
