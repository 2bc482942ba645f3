// Wasm benchmark of a suite's cases (`step` or `claim`) under Node: loads the wasm-bindgen
// build of verity-bench and prints one JSON object per case, like the native binary.
// usage: node bench/cases.mjs <path to verity_bench.js> <suite> [seconds]
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const require = createRequire(import.meta.url);
const wasm = require(resolve(process.argv[2]));
const suite = process.argv[3];
const seconds = Number(process.argv[4] ?? 2);

for (const { name, ts_cpu_us_per_op, goal } of JSON.parse(wasm.bench_cases(suite))) {
  wasm.bench_run(name, 200);
  const probeStart = performance.now();
  wasm.bench_run(name, 1000);
  const perOpMs = (performance.now() - probeStart) / 1000;
  const iterations = Math.max(1000, Math.floor((seconds * 1000) / perOpMs));
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  wasm.bench_run(name, iterations);
  const wallMs = performance.now() - wall0;
  const cpu = process.cpuUsage(cpu0);
  const cpuUsPerOp = (cpu.user + cpu.system) / iterations;
  const ratio = ts_cpu_us_per_op / cpuUsPerOp;
  console.log(JSON.stringify({
    case: name,
    target: 'wasm-node',
    iterations,
    ops_per_sec: Math.round(iterations / (wallMs / 1000)),
    cpu_us_per_op: Number(cpuUsPerOp.toFixed(3)),
    ts_cpu_us_per_op,
    times_less_than_ts: Number(ratio.toFixed(1)),
    goal,
    goal_met: ratio >= goal,
  }));
}
