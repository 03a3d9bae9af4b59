// rate-ramp.js - open-loop counterpart of seed 000 Test 6 / seed 001 Test 1.
//
// Re-creates: no seed test directly. The seeds drove load closed-loop
// (ramping VUs): a slow ingestor slows the VUs down, so the offered load
// drops exactly when the system struggles and latency is under-reported
// (coordinated omission). This scenario offers a schedule of batches per
// second instead (ramping-arrival-rate), shaped like the seeds' 8000-VU ramp
// (rate = PEAK_RATE x seed VUs / 8000 at each stage), with Test 6's request
// shape: blocking POST /produce/batch, 100 x 256 B, acks=1.
// Measures: the highest batch rate the system sustains: past it k6 runs out
// of VUs and records dropped_iterations (gated), and batch latency rises.
//
// Env: PEAK_RATE (batches/s at the peak, default 8774 = the seed's Test 6
// aggregate req/s; x VU_SCALE), MAX_VUS (default 8000 x VU_SCALE: the seeds'
// VU budget), PRE_VUS (default MAX_VUS / 10), plus the shared knobs
// (k6/README.md). Defaults: BATCH_SIZE=100 MESSAGE_SIZE=256 ACKS=1
// P99_MS=5000 ERROR_RATE=0.001 DROPPED_RATIO=0.01.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/rate-ramp.js

import { envNumber, expectedIterations, loadConfig, runTags, scaleStages, scaleTarget } from '../lib/config.js';
import { IngestorClient, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'rate-ramp',
  seed: 'open-loop variant of 000 Test 6',
  batchSize: 100,
  messageSize: 256,
  mode: 'blocking',
  acks: '1',
  topology: 'standalone',
  p99Ms: 5000,
  errorRate: 0.001,
});

const peakRate = envNumber('PEAK_RATE', 8774, { min: 1 });
const seedPeakVUs = Math.max(...RAMP_TO_8000.map((s) => s.target));
// The seed's VU table as batches/s: same shape, peak = PEAK_RATE.
const stages = scaleStages(cfg, RAMP_TO_8000.map((s) => ({
  duration: s.duration,
  target: (s.target / seedPeakVUs) * peakRate,
})));
const maxVUs = envNumber('MAX_VUS', scaleTarget(8000, cfg.vuScale), { min: 1, integer: true });
const preVUs = envNumber('PRE_VUS', Math.max(1, Math.ceil(maxVUs / 10)), { min: 1, integer: true });

export const options = {
  scenarios: {
    rate_ramp: {
      executor: 'ramping-arrival-rate',
      startRate: 0,
      timeUnit: '1s',
      stages,
      preAllocatedVUs: Math.min(preVUs, maxVUs),
      maxVUs,
      gracefulStop: cfg.httpTimeout,
    },
  },
  thresholds: thresholds(cfg, { expectedIterations: expectedIterations(0, stages) }),
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
