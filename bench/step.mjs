// Wasm step benchmark under Node: loads the wasm-bindgen build of verity-bench and prints one
// JSON object per case, like the native binary.
// usage: node bench/step.mjs <path to verity_bench.js> [seconds]
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const require = createRequire(import.meta.url);
const wasm = require(resolve(process.argv[2]));
const seconds = Number(process.argv[3] ?? 2);

for (const name of ['step-1-turn', 'step-5-turns']) {
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
  console.log(JSON.stringify({
    case: name,
    target: 'wasm-node',
    iterations,
    ops_per_sec: Math.round(iterations / (wallMs / 1000)),
    cpu_us_per_op: Number(((cpu.user + cpu.system) / iterations).toFixed(3)),
  }));
}
