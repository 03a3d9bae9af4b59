// k8s-perf/base/k6/runner.js - the entry point of every k6-operator runner
// (and of its initializer): runs the repository scenario named by
// CHRONIK_SCENARIO unchanged, and prints every file the scenario's
// handleSummary writes to stdout between marker lines, because a runner
// pod's file system is gone when the run ends but its log is not.
// k8s-perf/run.sh cuts each runner's k6-<scenario>-summary.json out of
// `kubectl logs` into results/<run-id>/k6/<pod>/.
//
// Layout in the pod (the TestRun's volume items): /chronik-k6/runner.js,
// /chronik-k6/scenarios/*.js, /chronik-k6/lib/*.js - the same relative paths
// as the repository's k6/, so the scenarios' imports resolve.
// Must not: change what a scenario measures or thresholds.

const name = __ENV.CHRONIK_SCENARIO;
if (!name || !/^[a-z0-9-]+$/.test(name)) {
  throw new Error(`CHRONIK_SCENARIO=${name}: expected a file name of k6/scenarios/ without .js`);
}
const scenario = require(`./scenarios/${name}.js`);

export const options = scenario.options;

export function setup() {
  return scenario.setup ? scenario.setup() : undefined;
}

export default function (data) {
  return scenario.default(data);
}

export const FILE_BEGIN = 'CHRONIK-K6-FILE-BEGIN';
export const FILE_END = 'CHRONIK-K6-FILE-END';

export function handleSummary(data) {
  const out = scenario.handleSummary ? scenario.handleSummary(data) : {};
  const lines = [out.stdout || ''];
  for (const [path, body] of Object.entries(out)) {
    if (path === 'stdout' || path === 'stderr') continue;
    lines.push(`${FILE_BEGIN} ${path}`, String(body), `${FILE_END} ${path}`);
  }
  return Object.assign({}, out, { stdout: `${lines.join('\n')}\n` });
}
