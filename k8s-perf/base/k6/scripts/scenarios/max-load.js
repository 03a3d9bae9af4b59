// max-load.js - seed 000 Test 2, "Max Load (9.5 min, 5000 VUs target, batch-only)".
//
// Re-creates: Test 1's workload (1 KiB values, 10 per batch, acks=1, one
// broker) pushed to 5000 VUs, batches only (no single-message requests).
// Measures: how batch latency grows with concurrency (seed: p50 133 ms, p90
// 959 ms, p95 1.3 s at ~830 VUs per pod, 0.00 % errors, ~5,400 msg/s).
//
// Stages: lib/stages.js MAX_LOAD_5000 (the seed gives only "9.5 min, 5000 VUs").
// Think time: THINK_TIME default 1-7 s (the seed's iteration p90 is 9.0 s
// with a batch p90 under 1 s, and 830 VUs made 90 req/s per pod).
// Env: the shared knobs (k6/README.md). Defaults: BATCH_SIZE=10
// MESSAGE_SIZE=1024 ACKS=1 P99_MS=5000 ERROR_RATE=0.001.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/max-load.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { MAX_LOAD_5000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'max-load',
  seed: '000 Test 2',
  batchSize: 10,
  messageSize: 1024,
  mode: 'blocking',
  acks: '1',
  topology: 'standalone',
  thinkTime: '1-7',
  p99Ms: 5000,
  errorRate: 0.001,
});

export const options = {
  scenarios: {
    max_load: {
      executor: 'ramping-vus',
      startVUs: 0,
      stages: scaleStages(cfg, MAX_LOAD_5000),
      gracefulRampDown: cfg.httpTimeout,
      gracefulStop: cfg.httpTimeout,
    },
  },
  thresholds: thresholds(cfg),
  summaryTrendStats,
  tags: runTags(cfg),
};

const client = new IngestorClient(cfg);

export function setup() {
  waitReady(cfg);
}

export default function () {
  client.sendBatch();
  think(cfg);
}

export function handleSummary(data) {
  return writeSummary(data, cfg, options);
}
