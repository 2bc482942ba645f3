// The component in Node: transpiled by jco (`cargo xtask component` writes it to
// target/component-js, or VERITY_COMPONENT_JS names its verity.js), driven by host.mjs with
// Node's fetch against aimock. Run by `cargo xtask test` (through the component's checks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

import { checkClaim, JobFailed } from './host.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const componentJs = process.env.VERITY_COMPONENT_JS ?? path.join(root, 'target/component-js/verity.js');
if (!existsSync(componentJs)) {
  throw new Error(`${componentJs} is missing: run \`cargo xtask component\` (it transpiles the component with jco)`);
}
const engine = await import(pathToFileURL(componentJs).href);

const ITEMS = [
  { id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' },
  { id: 'louvre', text: "The Louvre is the world's most-visited art museum." },
  { id: 'tokyo', text: 'Tokyo Tower is a communications and observation tower in Minato.' },
  { id: 'height', text: 'Its antenna tops out at three hundred thirty-three metres, finished in 1958.' },
];

/** Starts aimock's `llmock` on a free port, like `Aimock::start` in tests/src/http.rs. */
function aimock(t, fixture) {
  const bin = path.join(root, 'node_modules/.bin/llmock');
  const child = spawn(process.execPath, [bin, '--port', '0', '--host', '127.0.0.1', '--log-level', 'info',
    '--fixtures', path.join(root, 'tests/fixtures/aimock', fixture)], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => child.kill());
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('aimock did not say where it listens within 30 s')), 30_000);
    child.on('error', reject);
    // Every line is read, so the pipe never fills; the first URL is the address.
    createInterface({ input: child.stdout }).on('line', (line) => {
      const found = line.match(/listening on (http:\/\/\S+)/);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
  });
}

const openai = (url, stream) => ({
  api: 'openai', baseUrl: `${url}/v1`, model: 'gpt-4o-mini', apiKey: 'sk-test', stream,
  price: { input: 0.15, output: 0.6 },
});

for (const stream of [false, true]) {
  test(`a claim check through the component with fetch against aimock${stream ? ', streaming' : ''}`, async (t) => {
    const url = await aimock(t, 'claim.json');
    const events = [];
    const report = await checkClaim(engine, {
      provider: openai(url, stream), claim: 'The Eiffel Tower is in Paris.', items: ITEMS,
      onEvent: (event) => events.push(event),
    });
    assert.equal(report.assessment.verdict, 'supported');
    assert.equal(report.route, 'single call');
    assert.equal(report.summary, 'Supported: the evidence places the Eiffel Tower in Paris.');
    assert.equal(report.requests, 2);
    assert.deepEqual([report.usage.input, report.usage.output], [600, 80]);
    assert.ok(Math.abs(report.usage.cost - (600 * 0.15 + 80 * 0.6) / 1e6) < 1e-12, `cost ${report.usage.cost}`);
    const at = (wanted) => events.findIndex(wanted);
    const asked = at((e) => e.tag === 'model-call' && e.val.call === 0n);
    const answered = at((e) => e.tag === 'model-answered' && e.val.call === 0n);
    const pieces = events.filter((e) => e.tag === 'delta' && e.val.call === 0n);
    assert.ok(asked >= 0 && asked < answered, JSON.stringify(events.map((e) => e.tag)));
    if (stream) {
      const piece = at((e) => e.tag === 'delta' && e.val.call === 0n);
      assert.ok(asked < piece && piece < answered);
      assert.ok(pieces.length > 1, `${pieces.length} streamed pieces`);
    } else {
      assert.equal(pieces.length, 0);
    }
    assert.ok(events.some((e) => e.tag === 'stage' && e.val.tag === 'summary'));
  });
}

test('a claim check that escalates to research, streaming', async (t) => {
  const url = await aimock(t, 'claim-escalation.json');
  const events = [];
  const report = await checkClaim(engine, {
    provider: openai(url, true), claim: 'Tokyo Tower is 333 m high.', items: ITEMS,
    onEvent: (event) => events.push(event),
  });
  assert.equal(report.route, 'agent escalation');
  assert.equal(report.assessment.verdict, 'supported');
  assert.equal(report.requests, 5);
  assert.ok(events.some((e) => e.tag === 'stage' && e.val.tag === 'research'));
});

test('an unreachable provider fails the check with its kind and what was spent', async () => {
  // A port nothing listens on: every request is refused, retried once, then the check fails.
  const provider = openai('http://127.0.0.1:9', false);
  await assert.rejects(
    checkClaim(engine, {
      provider, claim: 'The Eiffel Tower is in Paris.', items: ITEMS,
      retry: { maxRetries: 1, baseDelayMs: 1 },
    }),
    (error) => {
      assert.ok(error instanceof JobFailed, String(error));
      assert.equal(error.kind, 'assess-request');
      assert.equal(error.spent.requests, 2);
      assert.equal(error.spent.retries, 1);
      return true;
    },
  );
});
