// k6/lib/thresholds.js - the pass/fail gates every scenario shares.
//
// Owns: which metrics fail a run and with which (env-scalable) limits. A
// failed threshold makes `k6 run` exit 99.
// Must not: hard-code limits: each comes from the scenario's seed-derived
// default in loadConfig(), overridable by P99_MS, ERROR_RATE, DROPPED_RATIO.

/**
 * cfg:                 from loadConfig()
 * expectedIterations:  for arrival-rate executors, the iterations the
 *                      schedule starts; gates dropped_iterations (iterations
 *                      k6 could not start because every VU was busy: the
 *                      target rate was not offered, so the run did not
 *                      measure what it claims)
 */
export function thresholds(cfg, { expectedIterations, singles = false } = {}) {
  const t = {
    http_req_failed: [`rate<=${cfg.errorRate}`],
    produce_errors: [`rate<=${cfg.errorRate}`],
    batch_latency: [`p(99)<${cfg.p99Ms}`],
  };
  // A run in which nothing got through must not pass just because no
  // request failed fast enough to count.
  if (cfg.mode === 'fire') {
    t.messages_accepted = ['count>0'];
  } else {
    t.messages_produced = ['count>0'];
  }
  if (singles) t.single_latency = [`p(99)<${cfg.p99Ms}`];
  if (expectedIterations !== undefined) {
    const budget = Math.max(1, Math.ceil(expectedIterations * cfg.droppedRatio));
    t.dropped_iterations = [`count<${budget}`];
  }
  return t;
}
