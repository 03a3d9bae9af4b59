// baremetal-256b.js - seed 001 Test 1, "Maximum Message Rate (256-byte messages)".
//
// Re-creates: the bare-metal peak-message-rate run: blocking POST
// /produce/batch, 100 messages of 256 B per request, 8 k6 runners ramping to
// 8000 VUs in total with the seed's exact stages (30s->200, 1m->1000,
// 2m->3000, 5m->5000, 3m->8000, 2m->3000, 1m->0), 12 ingestors with
// acks=all against 3 brokers (RF=3, min.insync=2, WAL profile high, produce
// profile extreme, 3 partitions) - the deployment's settings, tagged here.
// Measures: peak delivered msg/s and MB/s at small messages (seed: 837,284
// msg/s, 214-245 MB/s, 0.00 % errors, batch median 282 ms, p90 941 ms,
// p95 1.22 s). payload_bytes/s is the value-bytes rate (the seed's MB/s).
//
// Think time: THINK_TIME default 0. Env: the shared knobs (k6/README.md).
// Defaults: BATCH_SIZE=100 MESSAGE_SIZE=256 ACKS=all TOPOLOGY=cluster
// P99_MS=5000 ERROR_RATE=0.001.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8080 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/baremetal-256b.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'baremetal-256b',
  seed: '001 Test 1',
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
    baremetal_256b: {
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
