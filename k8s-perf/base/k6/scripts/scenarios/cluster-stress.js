// cluster-stress.js - seed 000 Test 4, "3-Node Cluster Stress Test (14 min, 8000 VUs)".
//
// Re-creates: Test 3's load profile and workload (1 KiB values, 10 per batch,
// acks=1, ramp to 8000 VUs) against a 3-broker cluster (RF=3,
// min.insync.replicas=2; ingestors bootstrap from all three brokers - a
// deployment setting, tagged here with TOPOLOGY=cluster).
// Measures: the same figures as stress.js, to compare cluster vs standalone
// under the same load (seed: 10,473 msg/s, p50 204 ms, p95 1.04 s, max
// 6.41 s, 0.00 % errors).
//
// Stages: lib/stages.js RAMP_TO_8000. Think time: THINK_TIME default 1-7 s.
// Thresholds are the seed's healthy-cluster figures with headroom (not the
// stress test's loose ones): P99_MS=5000, ERROR_RATE=0.001.
// Env: the shared knobs (k6/README.md). Defaults: BATCH_SIZE=10
// MESSAGE_SIZE=1024 ACKS=1 TOPOLOGY=cluster HTTP_TIMEOUT=30s.
//
//   k6 run -e INGESTOR_URLS=http://127.0.0.1:8081,http://127.0.0.1:8082 -e VU_SCALE=0.01 -e DURATION_SCALE=0.05 k6/scenarios/cluster-stress.js

import { loadConfig, runTags, scaleStages } from '../lib/config.js';
import { IngestorClient, think, waitReady } from '../lib/ingestor.js';
import { RAMP_TO_8000 } from '../lib/stages.js';
import { summaryTrendStats, writeSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

const cfg = loadConfig({
  scenario: 'cluster-stress',
  seed: '000 Test 4',
  batchSize: 10,
  messageSize: 1024,
  mode: 'blocking',
  acks: '1',
  topology: 'cluster',
  thinkTime: '1-7',
  p99Ms: 5000,
  errorRate: 0.001,
  httpTimeout: '30s',
});

export const options = {
  scenarios: {
    cluster_stress: {
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
