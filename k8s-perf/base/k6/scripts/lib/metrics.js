// k6/lib/metrics.js - the custom metrics every scenario reports.
//
// Owns: metric names and what they count. Must not: decide pass/fail (that
// is thresholds.js) or read responses (that is ingestor.js).
//
// Counting rules (the original harness counted HTTP 200s as "produced" even
// when messages failed; these do not):
//   messages_produced  messages of a POST /produce[/batch] answered 200, which
//                      the ingestor sends only when the broker acknowledged
//                      every message of the request
//   messages_accepted  messages a fire-and-forget request got queued (202 ->
//                      the batch size; 503 -> the body's "accepted"): queued,
//                      NOT delivered - the ingestor's /ledger says what was
//   messages_failed    messages of a request not confirmed (blocking: the
//                      whole batch of a non-200; fire: the body's "rejected"),
//                      tagged with the HTTP status and the ingestor's error code
//   payload_bytes      value bytes of messages_produced + messages_accepted
//   produce_errors     per request: true when it was not a full success
//                      (blocking: not 200; fire: not 202)
//   batch_latency      ms from sending a batch POST to its full response
//   single_latency     the same for POST /produce (standard.js only)

import { Counter, Rate, Trend } from 'k6/metrics';

export const batchLatency = new Trend('batch_latency', true);
export const singleLatency = new Trend('single_latency', true);
export const messagesProduced = new Counter('messages_produced');
export const messagesAccepted = new Counter('messages_accepted');
export const messagesFailed = new Counter('messages_failed');
export const payloadBytes = new Counter('payload_bytes');
export const produceErrors = new Rate('produce_errors');
