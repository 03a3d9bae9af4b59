// stress.js - seed 000 Test 3, "Stress Test - Breaking Point (14.5 min, 8000 VUs target)".
//
// Re-creates: Test 1's workload (1 KiB values, 10 per batch, acks=1) against
// ONE broker with an aggressive ramp to 8000 VUs and a 30 s request timeout,
// to find where latency turns from sub-second to multi-second and timeouts
// start (seed: 9,824 msg/s, p50 3.24 s, p95 8.33 s, max 30.86 s, 2.22 %
// errors, all request timeouts).
// Measures: the breaking point: batch latency, timeouts (produce_errors,
// messages_failed{error:no_response}) and messages confirmed per second.
//
// The seed ran this with no pass/fail thresholds; here the thresholds are
// loose (P99_MS=30000 = the request timeout, ERROR_RATE=0.05) so they fail
// only when the system breaks down well past the seed's figures.
// Stages: lib/stages.js RAMP_TO_8000 (seed 001's table, 14.5 min).
// Think time: THINK_TIME default 1-7 s (as max-load.js: same script family).
// Env: the shared knobs (k6/README.md). Defaults: BATCH_SIZE=10
// MESSAGE_SIZE=1024 ACKS=1 HTTP_TIMEOUT=30s.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/stress.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'stress',
  seed: '000 Test 3',
  batchSize: 10,
  messageSize: 1024,
  mode: 'blocking',
  acks: '1',
  topology: 'standalone',
  thinkTime: '1-7',
  p99Ms: 30000,
  errorRate: 0.05,
  httpTimeout: '30s',
});

export const options = {
  scenarios: {
    stress: {
      executor: 'ramping-vus',
      startVUs: 0,
      stages: scaleStages(cfg, RAMP_TO_8000),
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
