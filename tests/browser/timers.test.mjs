// Timers of huge delays in the engine's worker, in real Chromium. A browser fires a timer
// longer than 2^31 - 1 ms at once, so the worker caps its timers there (web/worker/src/wasm:
// a request's deadline and idle clocks in fetch.rs, a retry's wait in `sleep`). Through
// verity.js on examples/embed.html, with delays of 2^53 - 1 ms: the largest a page can hand
// the worker exactly (a JavaScript number; u64::MAX itself survives only as JSON text, which
// the component's Node test, tests/component/claim.test.mjs, sends).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { serve, browser, aimock, ROOT } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

/** 2^53 - 1 ms (285,000 years): far past the 2^31 - 1 ms a browser's timer holds. */
const HUGE = Number.MAX_SAFE_INTEGER;

const ITEMS = [
  { id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' },
  { id: 'louvre', text: "The Louvre is the world's most-visited art museum." },
];

async function open() {
  const session = await browser();
  await session.page.goto(`${site.url}examples/embed.html`);
  return session;
}

/** The requests the mock received (its journal's entries). */
async function journal(mock) {
  const data = await (await fetch(`${mock.url}/__aimock/journal`)).json();
  return Array.isArray(data) ? data : data.entries ?? [];
}

const until = async (what, done, ms = 30000) => {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

for (const stream of [false, true]) {
  test(`a request's clocks of 2^53 - 1 ms neither fire at once nor throw: a server that answers after 300 ms is waited for${stream ? ', streaming' : ''}`, async () => {
    // Uncapped, the deadline and the idle clock would fire after a millisecond and abort every
    // request long before the server's answer.
    const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'), ['--chaos-latency', '300']);
    const { page, errors, close } = await open();
    try {
      const provider = {
        api: 'openai', baseUrl: `${mock.url}/v1`, model: 'gpt-4o-mini', stream, timeoutMs: HUGE, idleTimeoutMs: HUGE,
      };
      const outcome = await page.evaluate(async ({ provider, items }) => {
        const { Verity } = await import('../verity.js');
        const verity = new Verity({ provider });
        try {
          const corpus = verity.createCorpus();
          await corpus.add(items);
          const started = performance.now();
          const report = await verity.checkClaim({ claim: 'The Eiffel Tower is in Paris.', corpus });
          return { verdict: report.assessment.verdict, requests: report.requests, ms: performance.now() - started };
        } catch (error) {
          return { error: `${error.name} (${error.kind}): ${error.message}` };
        } finally {
          verity.terminate();
        }
      }, { provider, items: ITEMS });
      assert.equal(outcome.error, undefined);
      assert.equal(outcome.verdict, 'supported');
      assert.equal(outcome.requests, 2);
      assert.ok(outcome.ms >= 600, `both requests waited for the server's 300 ms: ${outcome.ms} ms`);
      assert.equal((await journal(mock)).length, 2);
      assert.deepEqual(errors, []);
    } finally {
      await close();
      mock.close();
    }
  });
}

test('a retry wait of 2^53 - 1 ms does not fire at once: no request follows the 429, and a cancel ends the step', async () => {
  // The step's first request is answered 429 with Retry-After: 2^53 - 1 ms in seconds, exposed
  // to the page (Access-Control-Expose-Headers, without which the worker cannot read it and
  // waits its own backoff); the step's retryAfterCapMs lets the whole of it be waited for.
  const retryAfterSeconds = Math.floor(HUGE / 1000);
  let posts = 0;
  const server = createServer((request, response) => {
    const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': '*',
      'access-control-allow-methods': 'POST', 'access-control-expose-headers': 'retry-after' };
    if (request.method === 'OPTIONS') { response.writeHead(204, cors).end(); return; }
    posts += 1;
    request.resume();
    request.on('end', () => response.writeHead(429, { ...cors, 'content-type': 'application/json',
      'retry-after': String(retryAfterSeconds) })
      .end(JSON.stringify({ error: { message: 'Rate limit reached for requests.', type: 'rate_limit_error' } })));
  });
  await new Promise((listening) => server.listen(0, '127.0.0.1', listening));
  const { page, errors, close } = await open();
  try {
    const provider = { api: 'openai', baseUrl: `http://127.0.0.1:${server.address().port}/v1`, model: 'gpt-4o-mini' };
    await page.evaluate(async ({ provider, cap }) => {
      const { Verity } = await import('../verity.js');
      const verity = new Verity({ provider });
      const controller = new AbortController();
      const step = { events: [], outcome: null, controller, verity };
      window.__step = step;
      verity.runStep({
        prompt: 'Wait for the rate limit, then submit.',
        schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
        retry: { maxRetries: 1, retryAfterCapMs: cap },
        signal: controller.signal,
        onEvent: (event) => step.events.push(event),
      }).then(
        (value) => { step.outcome = { value }; },
        (error) => { step.outcome = { kind: error.kind, message: error.message }; },
      );
    }, { provider, cap: HUGE });
    const retries = () => page.evaluate(() => window.__step.events.filter((event) => event.type === 'retry'));
    await until('the 429 and its retry event', async () => (await retries()).length === 1);
    assert.equal((await retries())[0].delayMs, retryAfterSeconds * 1000, JSON.stringify(await retries()));
    // Three seconds on, still one request: the wait did not fire at once (uncapped, a browser
    // fires it after a millisecond).
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.equal(posts, 1, 'a request followed the 429 before its wait ended');
    assert.equal(await page.evaluate(() => window.__step.outcome), null);
    await page.evaluate(() => window.__step.controller.abort());
    await until('the cancel', async () => (await page.evaluate(() => window.__step.outcome)) !== null, 10000);
    assert.equal((await page.evaluate(() => window.__step.outcome)).kind, 'cancelled');
    assert.equal(posts, 1);
    assert.deepEqual(errors.filter((error) => !/429/.test(error)), []);
    await page.evaluate(() => window.__step.verity.terminate());
  } finally {
    await close();
    await new Promise((closed) => server.close(closed));
  }
});
