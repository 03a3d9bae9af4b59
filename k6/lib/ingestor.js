// k6/lib/ingestor.js - the chronik-ingestor HTTP client one VU uses.
//
// Owns: which ingestor a VU talks to (round-robin by the VU number __VU; in
// a distributed run every instance numbers its VUs from 1, so each instance
// spreads over all ingestors on its own), the produce calls and how their
// answers are counted (rules in metrics.js).
// Must not: decide pass/fail, or parse a success body (the hot path counts a
// 200/202 from the batch it sent; bodies are parsed only on failure).

import http from 'k6/http';
import { sleep } from 'k6';
import { BatchTemplate, valuePool } from './payload.js';
import {
  batchLatency, singleLatency, messagesProduced, messagesAccepted,
  messagesFailed, payloadBytes, produceErrors,
} from './metrics.js';

// Failures are logged by a sample of VUs only (the first LOGGING_VUS, or
// one per ingestor when there are more ingestors), at most
// MAX_LOGGED_FAILURES each, so a broken 8000-VU run stays readable; the
// metrics count every failure.
const LOGGING_VUS = 4;
const MAX_LOGGED_FAILURES = 3;
const READY_STATUSES = http.expectedStatuses(200, 503);

function parseBody(res) {
  try {
    return typeof res.body === 'string' && res.body !== '' ? JSON.parse(res.body) : {};
  } catch (_) {
    return {};
  }
}

// Status 0 = no HTTP answer (timeout, refused); k6 then has no timings.
function latencyMs(res, startedMs) {
  return res.status === 0 ? Date.now() - startedMs : res.timings.duration;
}

export class IngestorClient {
  constructor(cfg) {
    this.cfg = cfg;
    // __VU is 0 in the init pass k6 makes to read options (and in `k6
    // inspect`, setup, teardown): nothing will be sent there, skip the payload.
    // (exec.vu is not readable in the init context.)
    this.vu = __VU;
    // The value pool is drawn in the first init pass and shared from then on.
    const pool = valuePool(cfg.batchSize, cfg.messageSize);
    this.template = this.vu === 0 ? null : new BatchTemplate({
      vu: this.vu, batchSize: cfg.batchSize, messageSize: cfg.messageSize, topic: cfg.topic, keys: cfg.keys, pool,
    });
    this.baseUrl = cfg.ingestorUrls[(Math.max(this.vu, 1) - 1) % cfg.ingestorUrls.length];
    this.batchUrl = `${this.baseUrl}${cfg.mode === 'fire' ? '/produce/fire/batch' : '/produce/batch'}`;
    this.singleUrl = `${this.baseUrl}/produce`;
    this.params = {
      headers: cfg.authToken === ''
        ? { 'Content-Type': 'application/json' }
        : { 'Content-Type': 'application/json', Authorization: `Bearer ${cfg.authToken}` },
      timeout: cfg.httpTimeout,
      tags: { name: cfg.mode === 'fire' ? 'POST /produce/fire/batch' : 'POST /produce/batch' },
    };
    this.singleParams = { ...this.params, tags: { name: 'POST /produce' } };
    this.loggedFailures = this.vu <= Math.max(LOGGING_VUS, cfg.ingestorUrls.length) ? 0 : MAX_LOGGED_FAILURES;
  }

  // One batch POST; returns true when every message was confirmed (blocking)
  // or queued (fire).
  sendBatch() {
    const n = this.cfg.batchSize;
    const body = this.template.nextBatch();
    const started = Date.now();
    const res = http.post(this.batchUrl, body, this.params);
    batchLatency.add(latencyMs(res, started));
    return this.cfg.mode === 'fire' ? this.countFire(res, n) : this.countBlocking(res, n);
  }

  // One POST /produce of a single message.
  sendSingle() {
    const started = Date.now();
    const res = http.post(this.singleUrl, this.template.nextSingle(), this.singleParams);
    singleLatency.add(latencyMs(res, started));
    return this.countBlocking(res, 1);
  }

  countBlocking(res, n) {
    const ok = res.status === 200;
    produceErrors.add(!ok);
    if (ok) {
      messagesProduced.add(n);
      payloadBytes.add(n * this.cfg.messageSize);
      return true;
    }
    // Some messages of a failed batch may have been written (the body's
    // "delivered"); they are not counted as produced: only the ingestor's
    // ledger and a verifying consumer can say which.
    const b = parseBody(res);
    messagesFailed.add(n, this.failureTags(res, b));
    this.logFailure(res, b);
    return false;
  }

  countFire(res, n) {
    if (res.status === 202) {
      produceErrors.add(false);
      messagesAccepted.add(n);
      payloadBytes.add(n * this.cfg.messageSize);
      return true;
    }
    produceErrors.add(true);
    const b = parseBody(res);
    // 503 queue_full: the first `accepted` messages were queued, the rest
    // (from `resend_from`) were not. Any other status: nothing was queued.
    const accepted = Number.isInteger(b.accepted) ? Math.min(Math.max(b.accepted, 0), n) : 0;
    if (accepted > 0) {
      messagesAccepted.add(accepted);
      payloadBytes.add(accepted * this.cfg.messageSize);
    }
    messagesFailed.add(n - accepted, this.failureTags(res, b));
    this.logFailure(res, b);
    if (res.status === 503) this.backOff(res);
    return false;
  }

  failureTags(res, body) {
    return { status: String(res.status), error: body.error || (res.status === 0 ? 'no_response' : 'unknown') };
  }

  // Honour Retry-After on a fire-and-forget 503 the way a real client would
  // (capped at 1 s: the ingestor says 1, and a VU asleep sends nothing).
  backOff(res) {
    const retryAfter = Number(res.headers['Retry-After']);
    if (Number.isFinite(retryAfter) && retryAfter > 0) sleep(Math.min(retryAfter, 1));
  }

  logFailure(res, body) {
    if (this.loggedFailures >= MAX_LOGGED_FAILURES) return;
    this.loggedFailures += 1;
    const what = res.status === 0 ? `${res.error_code} ${res.error}` : `${res.status} ${body.error || ''} ${body.detail || ''}`;
    console.warn(`VU ${this.vu} ${this.baseUrl}: ${what}`);
  }
}

// Think time between iterations: uniform in [THINK_TIME min, max] seconds.
export function think(cfg) {
  if (cfg.thinkMaxS <= 0) return;
  sleep(cfg.thinkMinS + Math.random() * (cfg.thinkMaxS - cfg.thinkMinS));
}

// setup(): poll GET /ready on every ingestor (ready = its broker answered a
// Metadata request) so a run never starts against a dead target. Throws,
// which aborts the run before any load, when one stays unready.
export function waitReady(cfg, timeoutS = 30) {
  for (const url of cfg.ingestorUrls) {
    const deadline = Date.now() + timeoutS * 1000;
    for (;;) {
      const res = http.get(`${url}/ready`, {
        timeout: '2s',
        tags: { name: 'GET /ready' },
        responseCallback: READY_STATUSES, // a 503 while polling is not a failed request
      });
      if (res.status === 200) break;
      if (Date.now() > deadline) {
        throw new Error(`${url}/ready not 200 after ${timeoutS}s (last: ${res.status} ${res.error || res.body})`);
      }
      sleep(0.5);
    }
  }
}
