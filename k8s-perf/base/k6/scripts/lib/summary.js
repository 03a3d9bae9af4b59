// k6/lib/summary.js - end-of-test output shared by every scenario.
//
// Owns: summaryTrendStats, the JSON file `${RESULTS_DIR}/k6-<scenario>-summary.json`
// (k6's full handleSummary data object plus a `chronik` metadata block) and
// a compact text summary on stdout.
// Must not: need the network at run time (k6's jslib textSummary is fetched
// from a CDN and k6's own copy is AGPL, so the text summary is our own).
//
// The JSON keeps raw figures per k6 instance; merging runs from several
// instances must merge counts and re-derive rates, never average percentiles.

export const summaryTrendStats = ['avg', 'min', 'p(50)', 'p(90)', 'p(95)', 'p(99)', 'p(99.9)', 'max', 'count'];

const SCHEMA_VERSION = 1;

// The scenario's key figures first, then every other metric alphabetically.
const KEY_METRICS = [
  'messages_produced', 'messages_accepted', 'messages_failed', 'payload_bytes',
  'produce_errors', 'batch_latency', 'single_latency', 'http_reqs', 'http_req_failed',
  'http_req_duration', 'iterations', 'dropped_iterations', 'vus_max',
];

function fmtNumber(v) {
  if (v === undefined || v === null || Number.isNaN(v)) return '-';
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2);
}

function fmtMs(v) {
  if (v === undefined || v === null) return '-';
  if (v >= 1000) return `${(v / 1000).toFixed(2)}s`;
  if (v >= 1) return `${v.toFixed(2)}ms`;
  return `${(v * 1000).toFixed(0)}µs`;
}

function fmtBytes(v) {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i += 1;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function metricLine(name, m) {
  const v = m.values;
  let text;
  switch (m.type) {
    case 'trend': {
      const f = m.contains === 'time' ? fmtMs : fmtNumber;
      text = summaryTrendStats
        .filter((s) => s in v)
        .map((s) => `${s}=${s === 'count' ? fmtNumber(v[s]) : f(v[s])}`)
        .join(' ');
      break;
    }
    case 'counter':
      text = name.endsWith('bytes') || m.contains === 'data'
        ? `${fmtBytes(v.count)} ${fmtBytes(v.rate)}/s`
        : `${fmtNumber(v.count)} ${fmtNumber(v.rate)}/s`;
      break;
    case 'rate':
      text = `${(v.rate * 100).toFixed(2)}% (${v.passes} of ${v.passes + v.fails})`;
      break;
    case 'gauge':
      text = `${fmtNumber(v.value)} min=${fmtNumber(v.min)} max=${fmtNumber(v.max)}`;
      break;
    default:
      text = JSON.stringify(v);
  }
  const thresholds = Object.entries(m.thresholds || {})
    .map(([expr, t]) => `${t.ok ? '✓' : '✗'} ${expr}`)
    .join(', ');
  return `  ${name.padEnd(24, '.')} ${text}${thresholds ? `  [${thresholds}]` : ''}`;
}

export function textSummary(data, cfg) {
  const metrics = data.metrics || {};
  const names = KEY_METRICS.filter((n) => n in metrics)
    .concat(Object.keys(metrics).filter((n) => !KEY_METRICS.includes(n)).sort());
  const failed = names.flatMap((n) => Object.entries(metrics[n].thresholds || {})
    .filter(([, t]) => !t.ok).map(([expr]) => `${n}: ${expr}`));
  const secs = ((data.state && data.state.testRunDurationMs) || 0) / 1000;
  const lines = [
    '',
    `chronik k6 ${cfg.scenario} (seed ${cfg.seed}) ${secs.toFixed(1)}s`,
    `  mode=${cfg.mode} acks=${cfg.acks} topology=${cfg.topology} batch=${cfg.batchSize} ` +
      `message=${cfg.messageSize}B ingestors=${cfg.ingestorUrls.length} ` +
      `vu_scale=${cfg.vuScale} duration_scale=${cfg.durationScale}`,
    ...names.map((n) => metricLine(n, metrics[n])),
    failed.length === 0 ? '  thresholds: all passed' : `  thresholds FAILED: ${failed.join('; ')}`,
    '',
  ];
  return lines.join('\n');
}

// What a later reader needs to compare runs (k6's own data.options holds
// only the summary options). RUN_ID and GIT_COMMIT are passed by the caller.
function runMetadata(cfg, options) {
  return {
    schema_version: SCHEMA_VERSION,
    tool: 'k6',
    scenario: cfg.scenario,
    seed_test: cfg.seed,
    run_id: __ENV.RUN_ID || null,
    git_commit: __ENV.GIT_COMMIT || null,
    generated_at: new Date().toISOString(),
    scenarios: options.scenarios,
    thresholds: options.thresholds,
    tags: options.tags,
    config: {
      ingestor_urls: cfg.ingestorUrls,
      mode: cfg.mode,
      acks: cfg.acks,
      topology: cfg.topology,
      batch_size: cfg.batchSize,
      message_size: cfg.messageSize,
      topic: cfg.topic === undefined ? null : cfg.topic,
      vu_scale: cfg.vuScale,
      duration_scale: cfg.durationScale,
      think_time_s: [cfg.thinkMinS, cfg.thinkMaxS],
      p99_ms: cfg.p99Ms,
      error_rate: cfg.errorRate,
      dropped_ratio: cfg.droppedRatio,
      http_timeout: cfg.httpTimeout,
      auth_token: cfg.authToken !== '',
    },
  };
}

// handleSummary body: writes the JSON file and prints the text summary.
// `extra` adds scenario-specific fields to the `chronik` block (find-max.js:
// its staircase). k6 does not create RESULTS_DIR (k6/run.sh does).
export function writeSummary(data, cfg, options, extra = {}) {
  const path = `${cfg.resultsDir}/k6-${cfg.scenario}-summary.json`;
  const out = Object.assign({}, data, { chronik: Object.assign(runMetadata(cfg, options), extra) });
  return {
    stdout: textSummary(data, cfg),
    [path]: JSON.stringify(out, null, 2),
  };
}
