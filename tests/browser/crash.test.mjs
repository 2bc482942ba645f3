// The engine is a worker every tab of the app shares. If its wasm traps (a bug: a panic, memory
// exhausted), the page starts a new engine, which resumes the checks from their durable
// sessions. A page and an engine of different builds (a tab left open over a deploy keeps the
// old engine running) meet with a version handshake and a clear message.
//
// The trap is simulated: the worker's loader is served (from a copy of the app's folder) with a
// listener added that throws a
// WebAssembly.RuntimeError from a timer when a page asks (`{testTrap: true}`), which reaches
// the worker's global `error` event as an uncaught trap in the engine's wasm does. Nothing in
// the app's own files can be asked to trap.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, browser, screenshot, aimock, countingProxy, waitUntil, DIST, ROOT } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

const EIFFEL = [
  { id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' },
  { id: 'tokyo', text: 'Tokyo Tower is a communications and observation tower in Minato.' },
].map((item) => JSON.stringify(item)).join('\n');

const TRAP = `
self.addEventListener("connect", (event) => event.ports[0].addEventListener("message", ({ data }) => {
  if (data?.testTrap) setTimeout(() => { throw new WebAssembly.RuntimeError("unreachable"); });
}));
`;

/** The app's folder with the trap added to the worker's loader (the rest linked, not copied). */
function withTrap() {
  const dir = mkdtempSync(join(tmpdir(), 'verity-trap-'));
  for (const name of readdirSync(DIST)) {
    if (name !== 'verity-worker_loader.js') symlinkSync(join(DIST, name), join(dir, name));
  }
  writeFileSync(join(dir, 'verity-worker_loader.js'), readFileSync(join(DIST, 'verity-worker_loader.js'), 'utf8') + TRAP);
  return dir;
}

test('an engine that traps is started again by the page, and its running check resumes from its session: what was answered is not asked again', async () => {
  // A provider that answers the first model request (the assessment) and holds the next (the
  // summary) open: the trap comes mid-check, after a response was recorded.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const provider = await countingProxy(mock.url, { answered: 1 });
  const trapping = await serve(withTrap());
  const { page, errors, close } = await browser();
  try {
    await page.goto(trapping.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.setInputFiles(id('corpus-file-input'), { name: 'towers.jsonl', mimeType: 'text/plain', buffer: Buffer.from(EIFFEL) });
    await page.locator(id('corpus-count')).filter({ hasText: '2' }).waitFor();
    // A finished check, then one whose request hangs.
    await page.fill(id('claims-input'), 'Tokyo Tower is in Minato.');
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    await page.selectOption(id('provider-kind'), 'openai');
    await page.selectOption(id('provider-preset'), 'custom');
    await page.fill(id('provider-base-url'), `${provider.url}/v1`);
    await page.fill(id('provider-model'), 'gpt-4o-mini');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    await waitUntil(() => provider.held() === 1, 'the summary request is open');
    const asks = () => provider.bodies.map((body) => (body.includes('record_assessment') ? 'assessment' : 'summary'));
    assert.deepEqual(asks(), ['assessment', 'summary'], 'answered once, then held');

    await page.evaluate(() => {
      // The page's own port to the engine is the UI's; a second one reaches the same engine.
      new SharedWorker('./verity-worker_loader.js', { type: 'module', name: 'verity' }).port.postMessage({ testTrap: true });
    });
    const state = page.locator(id('engine-state'));
    await state.waitFor({ timeout: 20000 });
    assert.match(await state.innerText(), /^The engine stopped after an error \(unreachable\) and was started again: the checks go on from what they had saved\.$/);
    // The old engine's request went with it; the new engine resumed the check from its session
    // and asked only what had not been answered: the summary, not the assessment again.
    await waitUntil(() => provider.bodies.length === 3 && provider.held() === 1, 'the resumed check asks again');
    assert.deepEqual(asks(), ['assessment', 'summary', 'summary'], 'the recorded assessment is not requested again');
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const running = page.locator(id('check-2'));
    assert.equal(await running.locator(id('verdict')).count(), 0, 'still running');
    assert.match(await page.locator(id('check-1')).locator(id('verdict')).innerText(), /supported/i, 'the finished check is kept');
    assert.equal(await page.locator('[data-testid^="check-"][data-check-id]').count(), 2);
    await screenshot(page, 'crash-restarted');
    // The new engine answers: the resumed check can be cancelled.
    await running.locator(id('cancel')).click();
    await running.locator(id('failure-kind')).waitFor({ timeout: 10000 });
    assert.match(await running.locator(id('failure-kind')).innerText(), /cancelled/);
    await waitUntil(() => provider.held() === 0, 'the resumed request was closed');
    assert.equal(provider.bodies.length, 3, 'nothing more was asked');
    assert.deepEqual(errors.filter((error) => !/unreachable/.test(error)), []);
  } finally {
    await close();
    await provider.close();
    mock.close();
    await trapping.close();
  }
});

test('a page of another build than the engine running says so and what to do', async () => {
  const { context, page, errors, close } = await browser();
  try {
    // This page is of another build than the engine (as a tab opened after a deploy meets the
    // engine an older tab keeps running).
    await context.route('**/boot.js', async (route) => {
      const response = await route.fetch();
      // The build's id is the one 16-hex-digit string literal of boot.js (minified: its
      // quotes and the name it is bound to are the minifier's).
      const text = await response.text();
      const body = text.replace(/(["'`])[0-9a-f]{16}\1/, '"another-build"');
      assert.notEqual(body, text, "boot.js holds the build's id");
      await route.fulfill({ response, body });
    });
    await page.goto(site.url);
    const state = page.locator(id('engine-state'));
    await state.waitFor({ timeout: 30000 });
    assert.match(await state.innerText(), /different versions .* Close the other tabs of this site, then reload this one/);
    assert.equal(await page.locator('.engine-ready').count(), 0, 'the page does not talk to that engine');
    await screenshot(page, 'build-differs');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});
