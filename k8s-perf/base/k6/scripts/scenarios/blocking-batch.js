// blocking-batch.js - seed 000 Test 6, "Blocking Batch with Optimized Ingestor
// (14 min, 8000 VUs, 3 Chronik nodes)".
//
// Re-creates: POST /produce/batch, which answers 200 only when the broker
// acknowledged every message, 100 messages of 256 B per request, ramp to
// 8000 VUs, no think time; ingestors (12 in the seed) with acks=1,
// linger.ms=5, batch.num.messages=10000, snappy (chronik-ingestor's
// defaults; acks is an ingestor flag, tagged here from ACKS).
// Measures: end-to-end delivered throughput through the HTTP layer (seed:
// 877,460 msg/s, 0.00 % errors, batch p50 223 ms, p95 1.70 s): only 200
// responses count in messages_produced.
//
// Stages: lib/stages.js RAMP_TO_8000. Think time: THINK_TIME default 0.
// Env: the shared knobs (k6/README.md). Defaults: BATCH_SIZE=100
// MESSAGE_SIZE=256 ACKS=1 TOPOLOGY=cluster P99_MS=5000 ERROR_RATE=0.001.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/blocking-batch.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'blocking-batch',
  seed: '000 Test 6',
  batchSize: 100,
  messageSize: 256,
  mode: 'blocking',
  acks: '1',
  topology: 'cluster',
  thinkTime: '0',
  p99Ms: 5000,
  errorRate: 0.001,
});

export const options = {
  scenarios: {
    blocking_batch: {
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
