// fire-and-forget.js - seed 000 Test 5, "Optimized Ingestor - Fire-and-Forget
// + Large Batches (14 min, 8000 VUs, 3 Chronik nodes)".
//
// Re-creates: POST /produce/fire/batch (202 as soon as the messages are
// queued in the ingestor's producer; delivery is tracked in the background),
// 100 messages of 256 B per request, acks=1, ramp to 8000 VUs, no think time,
// against a 3-broker cluster.
// Measures: how fast the HTTP layer ACCEPTS messages (seed: 1,033,286 msg/s
// accepted, but only ~154,000 msg/s delivered, 0.40 % HTTP errors = queue
// full, p50 166 ms, p95 1.71 s). messages_accepted counts queued messages,
// never delivered ones: read the delivered count from the ingestors'
// /metrics (ingestor_messages_delivered_total) or /ledger, or from a
// verifying consumer - the gap between the two is this test's finding.
// A 503 queue_full counts its body's "accepted" and honours Retry-After.
//
// Stages: lib/stages.js RAMP_TO_8000. Think time: THINK_TIME default 0 (the
// seed's ~1,300 req/s per pod at ~490 mean VUs per pod is the latency alone).
// Env: the shared knobs (k6/README.md); MODE is fire here. Defaults:
// BATCH_SIZE=100 MESSAGE_SIZE=256 ACKS=1 TOPOLOGY=cluster P99_MS=5000 ERROR_RATE=0.01.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/fire-and-forget.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'fire-and-forget',
  seed: '000 Test 5',
  batchSize: 100,
  messageSize: 256,
  mode: 'fire',
  acks: '1',
  topology: 'cluster',
  thinkTime: '0',
  p99Ms: 5000,
  errorRate: 0.01,
});

export const options = {
  scenarios: {
    fire_and_forget: {
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
