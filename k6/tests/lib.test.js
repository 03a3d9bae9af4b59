// k6/tests/lib.test.js - offline tests of k6/lib (no network: nothing is sent).
//
// Run by k6/test.sh as `k6 run --quiet k6/tests/lib.test.js`; one VU, one
// iteration. Each case is a k6 check; the `checks` threshold makes k6 exit
// 99 when any fails, and handleSummary prints every case and a closing
// "N passed, N failed" line.

import { check } from 'k6';
import {
  expectedIterations, formatDuration, loadConfig, parseDuration, runTags, scaleStages, scaleTarget,
} from '../lib/config.js';
import { BatchTemplate, bodyText, randomAscii, valuePool } from '../lib/payload.js';
import { RAMP_TO_8000, MAX_LOAD_5000, STANDARD_500 } from '../lib/stages.js';
import { parseLevels, staircase, stepScenarios, stepThresholds } from '../lib/staircase.js';
import { textSummary } from '../lib/summary.js';
import { thresholds } from '../lib/thresholds.js';

export const options = {
  vus: 1,
  iterations: 1,
  thresholds: { checks: ['rate==1'] },
};

function throws(fn) {
  try {
    fn();
    return false;
  } catch (_) {
    return true;
  }
}

const SEED_DEFAULTS = {
  scenario: 'unit', seed: 'none', batchSize: 100, messageSize: 256, mode: 'blocking', acks: '1',
  p99Ms: 5000, errorRate: 0.001,
};

function testConfig() {
  check(null, {
    'parseDuration: 30s, 1m, 1m30s, 2h, 500ms, bare seconds': () =>
      parseDuration('30s') === 30 && parseDuration('1m') === 60 && parseDuration('1m30s') === 90 &&
      parseDuration('2h') === 7200 && parseDuration('500ms') === 0.5 && parseDuration('12') === 12,
    'parseDuration rejects junk': () => throws(() => parseDuration('5x')) && throws(() => parseDuration('1m junk')),
    'formatDuration rounds and never returns 0s': () => formatDuration(43.5) === '44s' && formatDuration(0.2) === '1s',
    'scaleTarget keeps 0 at 0 and a non-zero target >= 1': () =>
      scaleTarget(0, 5) === 0 && scaleTarget(200, 0.001) === 1 && scaleTarget(8000, 0.01) === 80,
    'expectedIterations integrates linear ramps': () =>
      expectedIterations(0, [{ duration: '1m', target: 60 }, { duration: '30s', target: 60 }]) === 1800 + 1800,
  });

  const cfg = loadConfig(SEED_DEFAULTS); // this test runs without scenario env
  const scaled = scaleStages({ ...cfg, vuScale: 0.01, durationScale: 0.05 }, RAMP_TO_8000);
  check(scaled, {
    'scaleStages: 8000-VU ramp at 0.01/0.05 peaks at 80 VUs, ends at 0': (s) =>
      Math.max(...s.map((x) => x.target)) === 80 && s[s.length - 1].target === 0,
    'scaleStages: 14.5 min at 0.05 is ~44 s': (s) => {
      const total = s.reduce((a, x) => a + parseDuration(x.duration), 0);
      return total >= 40 && total <= 48;
    },
    'seed tables: 14.5 min / 9.5 min / 4 min, peaks 8000 / 5000 / 500': () => {
      const mins = (t) => t.reduce((a, x) => a + parseDuration(x.duration), 0) / 60;
      const peak = (t) => Math.max(...t.map((x) => x.target));
      return mins(RAMP_TO_8000) === 14.5 && peak(RAMP_TO_8000) === 8000 &&
        mins(MAX_LOAD_5000) === 9.5 && peak(MAX_LOAD_5000) === 5000 &&
        mins(STANDARD_500) === 4 && peak(STANDARD_500) === 500;
    },
  });
  check(cfg, {
    'loadConfig: seed defaults apply without env': (c) =>
      c.batchSize === 100 && c.messageSize === 256 && c.mode === 'blocking' && c.acks === '1' &&
      c.ingestorUrls.length === 1 && c.thinkMaxS === 0,
    'runTags: strings only, records acks and shape': () => {
      const t = runTags(cfg);
      return Object.values(t).every((v) => typeof v === 'string') && t.acks === '1' && t.batch_size === '100';
    },
  });
}

function testThresholds() {
  const blocking = loadConfig(SEED_DEFAULTS);
  const fire = loadConfig({ ...SEED_DEFAULTS, mode: 'fire' });
  check(null, {
    'thresholds: error rate, produce errors and p99 gate every run': () => {
      const t = thresholds(blocking);
      return t.http_req_failed[0] === 'rate<=0.001' && t.produce_errors[0] === 'rate<=0.001' &&
        t.batch_latency[0] === 'p(99)<5000';
    },
    'thresholds: blocking needs messages_produced, fire needs messages_accepted': () =>
      'messages_produced' in thresholds(blocking) && !('messages_accepted' in thresholds(blocking)) &&
      'messages_accepted' in thresholds(fire) && !('messages_produced' in thresholds(fire)),
    'thresholds: dropped_iterations only for arrival-rate, budget = ratio x expected, >= 1': () =>
      !('dropped_iterations' in thresholds(blocking)) &&
      thresholds(blocking, { expectedIterations: 1200 }).dropped_iterations[0] === 'count<12' &&
      thresholds(blocking, { expectedIterations: 5 }).dropped_iterations[0] === 'count<1',
  });
}

// Drawn in the init context, as the scenarios do.
const POOL = valuePool(10, 1024);

function testPayload() {
  const tpl = new BatchTemplate({ vu: 7, batchSize: 10, messageSize: 1024, topic: undefined, keys: 'fresh', pool: POOL });
  const first = tpl.nextBatch();
  const second = tpl.nextBatch();
  const a = JSON.parse(first);
  const b = JSON.parse(second);
  check(a, {
    'batch: a JSON array of BATCH_SIZE messages': (m) => Array.isArray(m) && m.length === 10,
    'batch: every value is exactly MESSAGE_SIZE ASCII bytes': (m) =>
      m.every((x) => x.value.length === 1024 && /^[A-Za-z0-9_-]+$/.test(x.value)),
    'batch: only key and value fields (no topic unless TOPIC)': (m) =>
      m.every((x) => Object.keys(x).sort().join(',') === 'key,value'),
    'batch: keys unique within a batch and name the VU': (m) =>
      new Set(m.map((x) => x.key)).size === 10 && m.every((x) => x.key.split('-')[1] === '7'),
    'batch: values differ between messages': (m) => new Set(m.map((x) => x.value)).size === 10,
  });
  check(null, {
    'KEYS=fresh: keys change every iteration, values stay': () =>
      a.every((x, i) => x.key !== b[i].key && x.value === b[i].value),
    'batch: body length = values + fixed JSON overhead': () => first.length > 10 * 1024 && first.length < 10 * 1024 + 10 * 40,
  });
  const fixed = new BatchTemplate({ vu: 7, batchSize: 10, messageSize: 1024, topic: undefined, pool: POOL });
  const f1 = fixed.nextBatch();
  const fa = JSON.parse(bodyText(f1));
  const other = JSON.parse(bodyText(new BatchTemplate({ vu: 8, batchSize: 10, messageSize: 1024, pool: POOL }).nextBatch()));
  check(null, {
    'KEYS=fixed (default): one prebuilt ArrayBuffer, the same every iteration': () =>
      f1 instanceof ArrayBuffer && fixed.nextBatch() === f1,
    'KEYS=fixed: keys <vu>-<index>, values from the shared pool': () =>
      fa.length === 10 && fa.every((x, i) => x.key === `7-${i}` && x.value === a[i].value),
    'KEYS=fixed: another VU sends other values and keys': () =>
      other.every((x, i) => x.value !== fa[i].value && x.key === `8-${i}`),
    'KEYS=fixed: single body is one message': () => JSON.parse(bodyText(fixed.nextSingle())).key === '7-s',
    'KEYS=other: refused': () => throws(() => new BatchTemplate({ vu: 1, batchSize: 1, messageSize: 1, keys: 'random' })),
  });
  const withTopic = JSON.parse(new BatchTemplate({ vu: 1, batchSize: 3, messageSize: 256, topic: 'k6-"t"', keys: 'fresh' }).nextBatch());
  check(withTopic, {
    'batch: TOPIC is set on every message, JSON-escaped': (m) => m.length === 3 && m.every((x) => x.topic === 'k6-"t"'),
  });
  const single = JSON.parse(tpl.nextSingle());
  check(single, {
    'single: one message object of MESSAGE_SIZE': (m) => !Array.isArray(m) && m.value.length === 1024 && typeof m.key === 'string',
  });
  const big = randomAscii(200 * 1024 + 3);
  check(big, {
    'randomAscii: exact length beyond the 64 KiB getRandomValues limit': (s) => s.length === 200 * 1024 + 3,
    'randomAscii: not constant': (s) => new Set(s.substring(0, 1000).split('')).size > 30,
  });
}

function testSummary() {
  const cfg = loadConfig(SEED_DEFAULTS);
  const data = {
    state: { testRunDurationMs: 1500 },
    metrics: {
      messages_produced: { type: 'counter', contains: 'default', values: { count: 300, rate: 200 }, thresholds: { 'count>0': { ok: true } } },
      batch_latency: {
        type: 'trend', contains: 'time',
        values: { avg: 12.5, min: 1, 'p(50)': 10, 'p(90)': 20, 'p(95)': 30, 'p(99)': 6000, 'p(99.9)': 7000, max: 7100, count: 3 },
        thresholds: { 'p(99)<5000': { ok: false } },
      },
      produce_errors: { type: 'rate', contains: 'default', values: { rate: 0, passes: 0, fails: 3 }, thresholds: {} },
    },
  };
  const text = textSummary(data, cfg);
  check(text, {
    'text summary: shows counts, rates and percentiles': (t) =>
      t.includes('messages_produced') && t.includes('300 200/s') && t.includes('p(99)=6.00s'),
    'text summary: marks passed and failed thresholds': (t) =>
      t.includes('✓ count>0') && t.includes('✗ p(99)<5000') && t.includes('thresholds FAILED: batch_latency: p(99)<5000'),
  });
}

function testStaircase() {
  const steps = staircase({ levels: [100, 300], stepS: 10, gapS: 4, repeats: 2 });
  const scenarios = stepScenarios(steps, { p99Ms: 1000, gapS: 4 });
  const cfg = loadConfig(SEED_DEFAULTS);
  const t = stepThresholds(cfg, steps);
  check(null, {
    'staircase: LEVELS parse, must be positive and increasing': () =>
      parseLevels('200, 400,800').join() === '200,400,800' && throws(() => parseLevels('400,200')) &&
      throws(() => parseLevels('0,100')) && throws(() => parseLevels('a')) && throws(() => parseLevels('')),
    'staircase: climbs repeat in order, a gap between steps': () =>
      steps.map((s) => `${s.name}@${s.startS}`).join() === 'r1_l100@0,r1_l300@14,r2_l100@28,r2_l300@42',
    'staircase: one constant-arrival-rate scenario per step, gracefulStop = gap': () =>
      Object.keys(scenarios).length === 4 && scenarios.r2_l300.startTime === '42s' &&
      scenarios.r2_l300.rate === 300 && scenarios.r2_l300.gracefulStop === '4s' &&
      scenarios.r2_l300.maxVUs === 302 && scenarios.r1_l100.executor === 'constant-arrival-rate',
    'staircase: every step gated on its own samples': () =>
      t['batch_latency{scenario:r1_l300}'][0] === 'p(99)<5000' &&
      t['dropped_iterations{scenario:r1_l300}'][0] === 'count<30' &&
      t['batches_started{scenario:r2_l100}'][0] === 'count>0' && Object.keys(t).length === 20,
  });
}

export default function () {
  testConfig();
  testStaircase();
  testThresholds();
  testPayload();
  testSummary();
}

export function handleSummary(data) {
  const lines = [];
  let passed = 0;
  let failed = 0;
  for (const c of data.root_group.checks) {
    const ok = c.fails === 0 && c.passes > 0;
    if (ok) passed += 1;
    else failed += 1;
    lines.push(`${ok ? 'ok  ' : 'FAIL'} ${c.name}`);
  }
  lines.push(`k6 lib: ${passed} passed, ${failed} failed`, '');
  return { stdout: lines.join('\n') };
}
