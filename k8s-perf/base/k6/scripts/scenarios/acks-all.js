// acks-all.js - seed 000 Test 7, "Full Replication - acks=all (14 min, 8000
// VUs, 3 Chronik nodes)".
//
// Re-creates: Test 6 exactly (blocking POST /produce/batch, 100 x 256 B, ramp
// to 8000 VUs, no think time) with the ingestors started with `--acks all`
// against a cluster with RF=3 and min.insync.replicas=2: every 200 means the
// messages are on at least 2 brokers. acks is the ingestor's setting; this
// script only tags the run (ACKS, default all) - start the ingestors to match.
// Measures: the cost of full replication against blocking-batch.js run the
// same way (seed: 812,020 msg/s vs 877,460, -7.5 %; p50 283 ms vs 223 ms;
// p95 1.66 s vs 1.70 s; 0.00 % errors).
//
// Stages: lib/stages.js RAMP_TO_8000. Think time: THINK_TIME default 0.
// Env: the shared knobs (k6/README.md). Defaults: BATCH_SIZE=100
// MESSAGE_SIZE=256 ACKS=all TOPOLOGY=cluster P99_MS=5000 ERROR_RATE=0.001.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/acks-all.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'acks-all',
  seed: '000 Test 7',
  batchSize: 100,
  messageSize: 256,
  mode: 'blocking',
  acks: 'all',
  topology: 'cluster',
  thinkTime: '0',
  p99Ms: 5000,
  errorRate: 0.001,
});

export const options = {
  scenarios: {
    acks_all: {
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
