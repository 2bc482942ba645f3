// The app against a real llama.cpp server (llama-server's own HTTP code, Qwen2.5-Coder-0.5B,
// started by `cargo xtask test` and named by VERITY_LLAMA_URL): the llama.cpp preset checks a
// claim through the verifier route (one Yes/No question per passage, read from the token
// probabilities) and a streamed, constrained summary, to a verdict citing its passage once, in
// real Chromium; a claim's bound on a number, whose comparison the page names; and a whole
// answer, its three sentences asked about at once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, browser, screenshot, countingProxy, TOWERS } from './harness.mjs';

const LLAMA = process.env.VERITY_LLAMA_URL;
const skip = LLAMA ? false : 'VERITY_LLAMA_URL is not set (cargo xtask test starts the server)';

let site;
before(async () => { if (LLAMA) site = await serve(); });
after(async () => { await site?.close(); });

const id = (name) => `[data-testid="${name}"]`;

/** The app with the towers corpus and the llama.cpp preset pointed at the real server through a
 * recording proxy: the engine runs in a shared worker, whose requests the page's request events
 * do not show, and the proxy sees them. Call `close` and `proxy.close` at the end. */
async function appOnLlama(corpus = TOWERS) {
  const { page, errors, close } = await browser();
  const server = new URL(LLAMA);
  const proxy = await countingProxy(server.origin);
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.setInputFiles(id('corpus-file-input'), { name: 'towers.jsonl', mimeType: 'text/plain', buffer: Buffer.from(corpus) });
    const items = String(corpus.split('\n').length);
    await page.locator(id('corpus-count')).filter({ hasText: items }).waitFor();
    await page.selectOption(id('provider-kind'), 'openai');
    await page.selectOption(id('provider-preset'), 'llamacpp');
    await page.fill(id('provider-base-url'), `${proxy.url}${server.pathname}`);
  } catch (error) {
    await close();
    await proxy.close();
    throw error;
  }
  return { page, errors, close, proxy };
}

/** The first check's card once it has a verdict. A failure instead is shown (screenshot
 * `NAME-failed`) and fails the test with the card's words. */
async function verdictCard(page, name, timeout = 180000) {
  const card = page.locator(id('check-1'));
  await card.locator(`${id('verdict')}, ${id('failure-message')}`).first().waitFor({ timeout });
  if (await card.locator(id('failure-message')).count()) {
    await screenshot(page, `${name}-failed`);
    assert.fail(`the check failed: ${await card.innerText()}`);
  }
  return card;
}

test('the llama.cpp preset checks a claim against a real llama.cpp server', { skip }, async () => {
  const { page, errors, close, proxy } = await appOnLlama();
  const sent = proxy.bodies;
  try {
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = await verdictCard(page, 'real-model');
    const verdict = await card.locator(id('verdict')).innerText();
    // How the route decided, in words: the class probabilities and the passage's score.
    await card.locator('details.rationale summary').click();
    const why = await card.locator(id('rationale')).innerText();
    await screenshot(page, 'real-model');
    assert.match(why, /^Verifier route: P\(supported\) \d\.\d\d, .*best passage S \d\.\d\d/, why);
    assert.match(verdict, /supported/i, verdict);
    // The passage that says exactly the claim decided it, and is cited once.
    const citations = card.locator(id('citation'));
    assert.equal(await citations.count(), 1, await card.innerText());
    assert.match(await citations.innerText(), /Eiffel Tower is a wrought-iron lattice tower/);
    const bodies = sent.map((body) => JSON.parse(body));
    const questions = bodies.filter((request) => request.logprobs === true);
    const others = bodies.filter((request) => request.logprobs !== true);
    // The route's questions: at most k + 1 (k = 3), one token each with its probabilities;
    // the first asks about the claim with an empty document (the model's prior).
    assert.ok(questions.length >= 2 && questions.length <= 4, `${questions.length} questions`);
    const documents = questions.map((request) => request.messages.at(-1).content.split('\n')[0]);
    assert.equal(documents[0], 'Document: ', 'the prior: the claim alone');
    assert.ok(documents.slice(1).every((line) => line.length > 'Document: '.length), documents.join(' | '));
    for (const request of questions) {
      assert.equal(request.max_tokens, 1, 'one token');
      assert.ok(request.top_logprobs >= 1, 'its probabilities');
      assert.notEqual(request.stream, true, 'not streamed');
      assert.equal(request.response_format, undefined, 'not constrained: Yes or No');
      assert.match(JSON.stringify(request.messages), /Is the claim supported by the document\?/);
    }
    // Then the summary (supported: no research), streamed and constrained, within its limit.
    assert.equal(others.length, 1, `one summary: ${others.length} other requests`);
    const [summary] = others;
    assert.equal(summary.stream, true, 'streamed');
    assert.equal(summary.response_format?.type, 'json_schema', 'constrained');
    assert.equal(summary.tools, undefined, 'no tools to a server that would ignore them');
    assert.equal(summary.max_tokens, 512, 'the summary\'s output limit');
    console.log(`real model in Chromium: ${sent.length} requests, verdict "${verdict}"`);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await proxy.close();
  }
});

test('a bound on a number is checked against the passage\'s number, and the app says which numbers', { skip }, async () => {
  const heights = [
    { id: 'tokyo', text: 'Tokyo Tower is a communications and observation tower in Minato. It is 333 metres tall.' },
    { id: 'louvre', text: "The Louvre is the world's most-visited art museum." },
  ].map((item) => JSON.stringify(item)).join('\n');
  const { page, errors, close, proxy } = await appOnLlama(heights);
  try {
    await page.fill(id('claims-input'), 'Tokyo Tower is more than 400 metres tall.');
    await page.click(id('run'));
    const card = await verdictCard(page, 'real-model-bound');
    await card.locator('details.rationale summary').click();
    const why = await card.locator(id('rationale')).innerText();
    await screenshot(page, 'real-model-bound');
    // Whatever the model answered, the arithmetic is the core's, and the page names it.
    assert.match(why, /the claim's "more than 400" fails against the passage's 333/, why);
    console.log(`real model in Chromium, a bound: verdict "${await card.locator(id('verdict')).innerText()}", ${why}`);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await proxy.close();
  }
});

test('the llama.cpp preset checks a whole answer against a real llama.cpp server, its sentences at once', { skip }, async () => {
  const { page, errors, close, proxy } = await appOnLlama();
  try {
    await page.click(id('mode-answer'));
    await page.selectOption(id('concurrency'), '3');
    const answer = 'The Eiffel Tower is in Paris. Tokyo Tower is in Minato. The Louvre is an art museum.';
    await page.fill(id('answer-input'), answer);
    await page.click(id('run'));
    const card = await verdictCard(page, 'real-model-answer', 300000);
    await screenshot(page, 'real-model-answer');
    const statuses = await card.locator(id('sentence')).evaluateAll((nodes) => nodes.map((n) => n.dataset.status));
    assert.equal(statuses.length, 3, statuses.join());
    assert.ok(statuses.every((status) => ['supported', 'contradicted', 'insufficient'].includes(status)), statuses.join());
    assert.equal(statuses[0], 'supported');
    // The three sentences' questions went to the server together (it answers them in turn).
    assert.equal(proxy.mostOpen(), 3, `at most ${proxy.mostOpen()} requests open at once`);
    console.log(`real model in Chromium, an answer: ${proxy.bodies.length} requests, sentences ${statuses.join(', ')}, 3 at once`);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await proxy.close();
  }
});
