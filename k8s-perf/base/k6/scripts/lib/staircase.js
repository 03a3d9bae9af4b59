// k6/lib/staircase.js - the schedule of a find-max run: constant rates held in turn.
//
// Owns: turning LEVELS / STEP / GAP / REPEAT into one constant-arrival-rate
// k6 scenario per step (so every k6 sample carries the step's name in its
// `scenario` tag), and the per-step gates that expose each step's figures in
// the summary. Must not: decide the maximum (reports/capacity.py reads the
// summary and does), or send anything.
//
// A step is named `r<repeat>_l<rate>` (r2_l800: the second climb's 800
// batches/s step). Steps of one climb go up; the whole climb is repeated
// REPEAT times so the report can show the spread of repeated steps. Between
// two steps there is a GAP with no new iterations, in which the previous
// step's requests finish (k6's gracefulStop is the gap): a request still
// running at the end of the gap is interrupted and shows up as started but
// never completed, which the analysis counts against the step.

// "200,400,800" -> [200, 400, 800]: positive, strictly increasing.
export function parseLevels(text) {
  const levels = String(text).split(',').map((p) => p.trim()).filter((p) => p !== '').map(Number);
  if (levels.length === 0) throw new Error(`LEVELS=${text}: expected rates like 200,400,800`);
  levels.forEach((v, i) => {
    if (!Number.isFinite(v) || v <= 0 || (i > 0 && v <= levels[i - 1])) {
      throw new Error(`LEVELS=${text}: expected positive, strictly increasing batches/s`);
    }
  });
  return levels;
}

export function stepName(repeat, rate) {
  return `r${repeat}_l${rate}`;
}

/**
 * levels: batches/s per step (already scaled); stepS, gapS: seconds;
 * repeats: climbs. Returns [{name, repeat, rate, startS, durationS}] in
 * time order.
 */
export function staircase({ levels, stepS, gapS, repeats }) {
  const steps = [];
  let t = 0;
  for (let r = 1; r <= repeats; r += 1) {
    for (const rate of levels) {
      steps.push({ name: stepName(r, rate), repeat: r, rate, startS: t, durationS: stepS });
      t += stepS + gapS;
    }
  }
  return steps;
}

// The k6 `scenarios` option for a staircase. VUs as smoke.js sizes them, so
// a level that holds here is a rate a smoke run passes at: pre-allocated for
// 200 ms per request at the step's rate, at most rate x P99 (+2) in all (a
// step that needs more is past its latency gate anyway; k6 records the
// iterations it could not start as dropped_iterations). Steps do not
// overlap, so they share VUs. (Pre-allocating for half of P99_MS was tried:
// k6's own CPU per message rose from 5.9 to 7.4 µs and latency with it.)
export function stepScenarios(steps, { p99Ms, gapS, exec = 'default' }) {
  const out = {};
  for (const s of steps) {
    const preVUs = Math.max(2, Math.ceil(s.rate * 0.2));
    out[s.name] = {
      executor: 'constant-arrival-rate',
      exec,
      rate: s.rate,
      timeUnit: '1s',
      duration: `${s.durationS}s`,
      startTime: `${s.startS}s`,
      preAllocatedVUs: preVUs,
      maxVUs: Math.max(preVUs, Math.ceil((s.rate * p99Ms) / 1000) + 2),
      gracefulStop: `${gapS}s`,
    };
  }
  return out;
}

// Per-step gates, the same as a smoke run's (thresholds.js) but on the
// step's samples only; naming a tagged submetric is also what makes k6 put
// the step's figures into the summary. `batches_started` counts requests a
// step began, so interrupted ones are visible.
export function stepThresholds(cfg, steps) {
  const t = {};
  for (const s of steps) {
    const tag = `{scenario:${s.name}}`;
    const budget = Math.max(1, Math.ceil(s.rate * s.durationS * cfg.droppedRatio));
    t[`batch_latency${tag}`] = [`p(99)<${cfg.p99Ms}`];
    t[`produce_errors${tag}`] = [`rate<=${cfg.errorRate}`];
    t[`dropped_iterations${tag}`] = [`count<${budget}`];
    t[`batches_started${tag}`] = ['count>0'];
    t[`messages_produced${tag}`] = ['count>0'];
  }
  return t;
}
