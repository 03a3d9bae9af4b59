// baremetal-1kib.js - seed 001 Tests 2 and 3, "Throughput Focused (1KB
// messages, 12 ingestors)" and "Scaled Ingestors (1KB messages, 36 ingestors)".
//
// Re-creates: the bare-metal byte-throughput runs: blocking POST
// /produce/batch, 200 messages of 1 KiB per request (~200 KiB bodies), the
// seed's 8000-VU ramp (same stages as baremetal-256b.js), acks=all against 3
// brokers. Tests 2 and 3 differ only in the number of ingestors (12 vs 36):
// pass them all in INGESTOR_URLS; the count is tagged as `ingestors`.
// Measures: delivered MB/s (payload_bytes/s) and how batch latency degrades
// once the brokers' WAL flush saturates (seed: 270 MB/s with 12 ingestors,
// 411 MB/s / 420,609 msg/s with 36; 0.00 % errors; batch median 284-843 ms,
// p90 10 s, p95 10.1-10.5 s).
//
// Think time: THINK_TIME default 0. Env: the shared knobs (k6/README.md).
// Defaults: BATCH_SIZE=200 MESSAGE_SIZE=1024 ACKS=all TOPOLOGY=cluster
// P99_MS=20000 (the seed's p95 was already ~10 s) ERROR_RATE=0.001.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8081,http://127.0.0.1:8082 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/baremetal-1kib.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'baremetal-1kib',
  seed: '001 Tests 2-3',
  batchSize: 200,
  messageSize: 1024,
  mode: 'blocking',
  acks: 'all',
  topology: 'cluster',
  thinkTime: '0',
  p99Ms: 20000,
  errorRate: 0.001,
});

export const options = {
  scenarios: {
    baremetal_1kib: {
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
