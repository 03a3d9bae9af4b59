// k6/lib/stages.js - the seeds' load profiles, unscaled (whole-test VUs).
//
// Owns: the stage tables several scenarios share, each traced to its seed.
// The seeds ran these across 6-8 k6 pods (k6-operator splits VUs between
// instances), so targets here are whole-test totals, not per-pod figures.
// scaleStages() in config.js applies VU_SCALE / DURATION_SCALE.

// Seed 001 ("k6 Stages: 30s→200, 1m→1000, 2m→3000, 5m→5000, 3m→8000, 2m→3000,
// 1m→0 VUs", 14.5 min). Seed 000 Test 3 is "14.5 min, 8000 VUs target,
// aggressive ramp" and Tests 4-7 run "the same stress-test script" for ~14 min:
// the same table.
export const RAMP_TO_8000 = [
  { duration: '30s', target: 200 },
  { duration: '1m', target: 1000 },
  { duration: '2m', target: 3000 },
  { duration: '5m', target: 5000 },
  { duration: '3m', target: 8000 },
  { duration: '2m', target: 3000 },
  { duration: '1m', target: 0 },
];

// Seed 000 Test 1: "4 min, 500 VUs peak". The seed gives no stage table; this
// one ramps in thirds, holds the peak a minute and ramps down.
export const STANDARD_500 = [
  { duration: '30s', target: 100 },
  { duration: '1m', target: 300 },
  { duration: '1m', target: 500 },
  { duration: '1m', target: 500 },
  { duration: '30s', target: 0 },
];

// Seed 000 Test 2: "9.5 min, 5000 VUs target". No stage table in the seed;
// this one reaches 5000 at 5.5 min and holds it 3 min.
export const MAX_LOAD_5000 = [
  { duration: '30s', target: 500 },
  { duration: '1m', target: 1000 },
  { duration: '2m', target: 2500 },
  { duration: '2m', target: 5000 },
  { duration: '3m', target: 5000 },
  { duration: '1m', target: 0 },
];
