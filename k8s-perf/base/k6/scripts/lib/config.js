// k6/lib/config.js - the run's configuration, read from __ENV once per VU.
//
// Owns: parsing and validating every environment knob the scenarios share,
// the scaling of stages (VU_SCALE multiplies VU targets and arrival rates,
// DURATION_SCALE multiplies durations) and the test-wide tags that record
// what a run was (mode, acks, batch and message size, topology).
// Must not: touch the network or build payloads (see payload.js).
//
// A scenario calls loadConfig() with its seed defaults; every default can be
// overridden from the environment, so `k6 run -e BATCH_SIZE=10 ...` works on
// every scenario the same way. Invalid values throw at init, which k6 reports
// as a script error (exit 107) before any load is sent.

import { KEY_MODES } from './payload.js';

const MODES = ['blocking', 'fire'];

// The local runs' request shape and gates (seed 000 Test 6's 100 x 256 B
// blocking batches; P99_MS 1000, no errors), shared by smoke.js and
// find-max.js so that a level find-max holds is a rate smoke passes at.
export const SMOKE_DEFAULTS = Object.freeze({
  batchSize: 100,
  messageSize: 256,
  mode: 'blocking',
  acks: '1',
  p99Ms: 1000,
  errorRate: 0,
  httpTimeout: '10s',
});

function env(name) {
  const v = __ENV[name];
  return v === undefined || v === '' ? undefined : v;
}

export function envString(name, fallback) {
  const v = env(name);
  return v === undefined ? fallback : v;
}

export function envNumber(name, fallback, { min = -Infinity, integer = false } = {}) {
  const raw = env(name);
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || (integer && !Number.isInteger(v))) {
    throw new Error(`${name}=${raw}: expected ${integer ? 'an integer' : 'a number'} >= ${min}`);
  }
  return v;
}

// "90s", "1m30s", "2h", "500ms", or a bare number of seconds -> seconds.
export function parseDuration(text) {
  if (typeof text === 'number') return text;
  const s = String(text).trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s);
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/g;
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600 };
  let total = 0;
  let consumed = 0;
  let m;
  while ((m = re.exec(s)) !== null) {
    total += Number(m[1]) * unit[m[2]];
    consumed += m[0].length;
  }
  if (consumed !== s.length || consumed === 0) throw new Error(`bad duration '${text}'`);
  return total;
}

// Seconds -> a k6 duration string, whole seconds (k6 accepts "75s").
export function formatDuration(seconds) {
  return `${Math.max(1, Math.round(seconds))}s`;
}

// Scales a VU count or an arrival rate; a non-zero target never scales to 0,
// so a tiny VU_SCALE still sends something.
export function scaleTarget(target, scale) {
  if (target <= 0) return 0;
  return Math.max(1, Math.round(target * scale));
}

// "a-b" or "a" (seconds) -> {min, max}; "0" disables think time.
function parseThinkTime(text) {
  const parts = String(text).split('-').map((p) => Number(p.trim()));
  const [min, max = min] = parts;
  if (parts.length > 2 || !Number.isFinite(min) || !Number.isFinite(max) || min < 0 || max < min) {
    throw new Error(`THINK_TIME=${text}: expected seconds 'a' or 'a-b' with 0 <= a <= b`);
  }
  return { min, max };
}

function parseUrls(text) {
  const urls = text.split(',').map((u) => u.trim().replace(/\/+$/, '')).filter((u) => u !== '');
  if (urls.length === 0) throw new Error('INGESTOR_URLS is empty');
  for (const u of urls) {
    if (!/^https?:\/\/[^/]+$/.test(u)) throw new Error(`INGESTOR_URLS: '${u}' is not a base URL like http://host:port`);
  }
  return urls;
}

/**
 * Reads the environment over the scenario's defaults.
 *
 * defaults: { scenario, seed, batchSize, messageSize, mode, acks, topology,
 *             thinkTime, p99Ms, errorRate, httpTimeout }
 * Returns a frozen plain object; see k6/README.md for every knob.
 */
export function loadConfig(defaults) {
  const mode = envString('MODE', defaults.mode || 'blocking');
  if (!MODES.includes(mode)) throw new Error(`MODE=${mode}: expected one of ${MODES.join(', ')}`);
  const think = parseThinkTime(envString('THINK_TIME', defaults.thinkTime ?? '0'));
  const cfg = {
    scenario: defaults.scenario,
    seed: defaults.seed,
    ingestorUrls: parseUrls(envString('INGESTOR_URLS', 'http://127.0.0.1:8080')),
    mode,
    batchSize: envNumber('BATCH_SIZE', defaults.batchSize ?? 100, { min: 1, integer: true }),
    messageSize: envNumber('MESSAGE_SIZE', defaults.messageSize ?? 256, { min: 1, integer: true }),
    topic: envString('TOPIC', undefined),
    keys: envString('KEYS', defaults.keys ?? 'fixed'),
    vuScale: envNumber('VU_SCALE', 1, { min: 0.000001 }),
    durationScale: envNumber('DURATION_SCALE', 1, { min: 0.000001 }),
    resultsDir: envString('RESULTS_DIR', 'results').replace(/\/+$/, ''),
    acks: envString('ACKS', defaults.acks ?? '1'),
    topology: envString('TOPOLOGY', defaults.topology ?? 'standalone'),
    thinkMinS: think.min,
    thinkMaxS: think.max,
    p99Ms: envNumber('P99_MS', defaults.p99Ms ?? 5000, { min: 0 }),
    errorRate: envNumber('ERROR_RATE', defaults.errorRate ?? 0.001, { min: 0 }),
    droppedRatio: envNumber('DROPPED_RATIO', defaults.droppedRatio ?? 0.01, { min: 0 }),
    httpTimeout: envString('HTTP_TIMEOUT', defaults.httpTimeout ?? '30s'),
    // bearer token for an ingestor started with --auth-token-file; never
    // written to summaries (runMetadata records only whether one is set)
    authToken: envString('INGESTOR_AUTH_TOKEN', ''),
  };
  if (!KEY_MODES.includes(cfg.keys)) throw new Error(`KEYS=${cfg.keys}: expected one of ${KEY_MODES.join(', ')}`);
  parseDuration(cfg.httpTimeout); // validate early
  return Object.freeze(cfg);
}

// [{duration, target}] from the seed -> the same shape scaled for this run.
export function scaleStages(cfg, stages) {
  return stages.map((s) => ({
    duration: formatDuration(parseDuration(s.duration) * cfg.durationScale),
    target: scaleTarget(s.target, cfg.vuScale),
  }));
}

export function scaleDuration(cfg, duration) {
  return formatDuration(parseDuration(duration) * cfg.durationScale);
}

// Iterations a ramping-arrival-rate run is expected to start (k6 ramps the
// rate linearly within a stage), for a dropped_iterations budget.
export function expectedIterations(startRate, stages, timeUnitS = 1) {
  let rate = startRate;
  let total = 0;
  for (const s of stages) {
    total += ((rate + s.target) / 2) * (parseDuration(s.duration) / timeUnitS);
    rate = s.target;
  }
  return total;
}

// Test-wide tags: every metric sample of the run carries them, so results
// from different runs (acks=1 vs all, 12 vs 36 ingestors) stay apart when
// they are merged or streamed to Prometheus.
export function runTags(cfg) {
  return {
    chronik_scenario: cfg.scenario,
    seed_test: cfg.seed,
    mode: cfg.mode,
    acks: cfg.acks,
    topology: cfg.topology,
    batch_size: String(cfg.batchSize),
    message_size: String(cfg.messageSize),
    ingestors: String(cfg.ingestorUrls.length),
  };
}
