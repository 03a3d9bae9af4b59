// standard.js - seed 000 Test 1, "Standard Load (4 min, 500 VUs peak)".
//
// Re-creates: the baseline run against one broker: 1 KiB random values,
// batched 10 per request, acks=1, closed loop (ramping VUs with think time).
// The seed calls Test 2 "batch-only", so Test 1 also sent single messages:
// SINGLE_RATIO of the iterations (default 0.1, our choice - the seed gives
// no ratio) POST one message to /produce instead of a batch.
// Measures: batch latency (seed: p50 61 ms, p90 351 ms, p95 406 ms), single
// latency, messages confirmed and error rate at moderate load.
//
// Stages: lib/stages.js STANDARD_500 (the seed gives only "4 min, 500 VUs").
// Think time: THINK_TIME default 0.1-0.5 s (the seed's 242 req/s per pod at
// ~80 VUs per pod leaves ~0.2 s per iteration beyond the latency).
// Env: SINGLE_RATIO, plus the shared knobs (k6/README.md). Defaults:
// BATCH_SIZE=10 MESSAGE_SIZE=1024 ACKS=1 P99_MS=2000 ERROR_RATE=0.001.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.1 k6/scenarios/standard.js

import { envNumber, loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { STANDARD_500 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'standard',
  seed: '000 Test 1',
  batchSize: 10,
  messageSize: 1024,
  mode: 'blocking',
  acks: '1',
  topology: 'standalone',
  thinkTime: '0.1-0.5',
  p99Ms: 2000,
  errorRate: 0.001,
});
const singleRatio = envNumber('SINGLE_RATIO', 0.1, { min: 0 });

export const options = {
  scenarios: {
    standard: {
      executor: 'ramping-vus',
      startVUs: 0,
      stages: scaleStages(cfg, STANDARD_500),
      gracefulRampDown: cfg.httpTimeout,
      gracefulStop: cfg.httpTimeout,
    },
  },
  thresholds: thresholds(cfg, { singles: singleRatio > 0 }),
  summaryTrendStats,
  tags: runTags(cfg),
};

const client = new IngestorClient(cfg);

export function setup() {
  waitReady(cfg);
}

export default function () {
  if (singleRatio > 0 && Math.random() < singleRatio) {
    client.sendSingle();
  } else {
    client.sendBatch();
  }
  think(cfg);
}

export function handleSummary(data) {
  return writeSummary(data, cfg, options);
}
