// The app against a real llama.cpp server (llama-server's own HTTP code, SmolLM2-135M-Instruct,
// started by `cargo xtask test` and named by VERITY_LLAMA_URL): the llama.cpp preset checks a
// claim through streaming, with constrained output, to a verdict, in real Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, browser, screenshot, countingProxy, TOWERS } from './harness.mjs';

const LLAMA = process.env.VERITY_LLAMA_URL;
const skip = LLAMA ? false : 'VERITY_LLAMA_URL is not set (cargo xtask test starts the server)';

let site;
before(async () => { if (LLAMA) site = await serve(); });
after(async () => { await site?.close(); });

const id = (name) => `[data-testid="${name}"]`;

test('the llama.cpp preset checks a claim against a real llama.cpp server', { skip }, async () => {
  const { page, errors, close } = await browser();
  // The engine runs in a shared worker, whose requests the page's request events do not show:
  // a recording proxy in front of the server sees them.
  const server = new URL(LLAMA);
  const proxy = await countingProxy(server.origin);
  const sent = proxy.bodies;
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.setInputFiles(id('corpus-file-input'), { name: 'towers.jsonl', mimeType: 'text/plain', buffer: Buffer.from(TOWERS) });
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
    await page.selectOption(id('provider-kind'), 'openai');
    await page.selectOption(id('provider-preset'), 'llamacpp');
    await page.fill(id('provider-base-url'), `${proxy.url}${server.pathname}`);
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    // A verdict, or a failure that says why (shown, then asserted against).
    await card.locator(`${id('verdict')}, ${id('failure-message')}`).first().waitFor({ timeout: 180000 });
    if (await card.locator(id('failure-message')).count()) {
      await screenshot(page, 'real-model-failed');
      assert.fail(`the check failed: ${await card.innerText()}`);
    }
    const verdict = await card.locator(id('verdict')).innerText();
    assert.match(verdict, /supported|contradicted|insufficient/i, verdict);
    await screenshot(page, 'real-model');
    assert.ok(sent.length >= 2, `an assessment and a summary at least: ${sent.length} requests`);
    for (const body of sent) {
      const request = JSON.parse(body);
      assert.equal(request.stream, true, 'streamed');
      assert.equal(request.response_format?.type, 'json_schema', 'constrained');
      assert.equal(request.tools, undefined, 'no tools to a server that would ignore them');
      // Bounded by the call kind's own limit (no maxTokens is set): the summary's is 512, an
      // assessment's 512 plus room to cite every item verbatim.
      const tool = request.response_format.json_schema.schema.properties?.tool?.const;
      if (tool === 'submit') assert.equal(request.max_tokens, 512, 'the summary\'s output limit');
      else assert.ok(request.max_tokens >= 512 && request.max_tokens <= 4096, `an assessment's output limit: ${request.max_tokens}`);
    }
    console.log(`real model in Chromium: ${sent.length} requests, verdict "${verdict}"`);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await proxy.close();
  }
});
