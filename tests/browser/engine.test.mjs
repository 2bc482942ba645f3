// The app against a real mock provider (aimock, streaming), cancel, reload (kept and resumed
// work), the VitaminC corpus, and accessibility (axe-core), in real Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { serve, browser, screenshot, aimock, silentServer, recordingServer, ROOT } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

async function ready(page) {
  await page.locator('.engine-ready').waitFor({ timeout: 60000 });
}

async function open(options) {
  const session = await browser(options);
  await session.page.goto(site.url);
  await ready(session.page);
  return session;
}

const EIFFEL = [
  { id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' },
  { id: 'louvre', text: "The Louvre is the world's most-visited art museum." },
  { id: 'tokyo', text: 'Tokyo Tower is a communications and observation tower in Minato.' },
].map((item) => JSON.stringify(item)).join('\n');

async function loadEiffel(page) {
  await page.setInputFiles(id('corpus-file-input'), { name: 'towers.jsonl', mimeType: 'text/plain', buffer: Buffer.from(EIFFEL) });
  await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
}

async function useOpenAi(page, baseUrl) {
  await page.selectOption(id('provider-kind'), 'openai');
  await page.selectOption(id('provider-preset'), 'custom');
  await page.fill(id('provider-base-url'), baseUrl);
  await page.fill(id('provider-model'), 'gpt-4o-mini');
}

/** The requests the mock received (its journal's entries). */
async function journal(mock) {
  const response = await fetch(`${mock.url}/__aimock/journal`);
  const data = await response.json();
  return Array.isArray(data) ? data : data.entries ?? [];
}

test('a claim checked through an OpenAI-compatible server, streaming', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${mock.url}/v1`);
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await card.locator(id('verdict')).innerText(), /supported/i);
    assert.match(await card.locator(id('summary')).innerText(), /places the Eiffel Tower in Paris/);
    // How the verdict was reached, folded under the summary: here the model's own words.
    const why = card.locator('details.rationale');
    assert.equal(await why.getAttribute('open'), null, 'folded until asked for');
    await why.locator('summary').click();
    assert.equal(await card.locator(id('rationale')).innerText(), 'The passage places the tower in Paris.');
    // The confidence in words a person can act on, beside its figure.
    assert.match(await card.locator(id('confidence')).innerText(), /^\d+% · (high|moderate|low) confidence: \w/);
    assert.match(await card.locator(id('citation')).first().innerText(), /Champ de Mars/);
    const bodies = (await journal(mock)).map((entry) => JSON.stringify(entry));
    assert.equal(bodies.length, 2, 'one assessment and one summary request');
    assert.ok(bodies.every((body) => body.includes('"stream":true')), 'the page streams');
    await screenshot(page, 'results-openai');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('a run stops at its spending limit: the price typed for the model, the limit typed for the run', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${mock.url}/v1`);
    // $1 a token read: the first request alone spends more than the run's $0.01.
    await page.getByLabel('Input $ / M tokens').fill('1000000');
    await page.getByLabel('Stop the run at $').fill('0.01');
    // One check at a time: a request in flight when the limit is reached is not stopped.
    await page.selectOption(id('concurrency'), '1');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.\nTokyo Tower is in Minato.');
    await page.click(id('run'));
    for (const n of [1, 2]) {
      const card = page.locator(id(`check-${n}`));
      await card.locator(id('failure-kind')).waitFor({ timeout: 30000 });
      assert.match(await card.locator(id('failure-kind')).innerText(), /budget/);
    }
    assert.match(await page.locator(id('check-1')).innerText(), /spending limit of \$0\.01 was reached before this check's next request: the run has spent \$400\.0000, this check \$400\.0000/);
    assert.equal((await journal(mock)).length, 1, 'only the first assessment was sent');
    // The results' counts say what the run spent.
    assert.match(await page.locator(id('verdict-counts')).innerText(), /Failed 2 · \$400\.0000 spent$/);
    // The price belongs to the model: another model shows its own (none).
    await page.fill(id('provider-model'), 'gpt-4o');
    assert.equal(await page.getByLabel('Input $ / M tokens').inputValue(), '');
    await page.fill(id('provider-model'), 'gpt-4o-mini');
    assert.equal(await page.getByLabel('Input $ / M tokens').inputValue(), '1000000');
    await screenshot(page, 'budget');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('a model answer and a corpus item carrying markup render as text and run nothing', async () => {
  // The model (aimock, tests/fixtures/aimock/xss.json) cites a corpus item carrying an
  // <img onerror> and a <script>, and its rationale and summary carry both too.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/xss.json'));
  const { page, errors, close } = await browser();
  try {
    // Any attempt to run inline script would be refused by the CSP and reported here.
    await page.addInitScript(() => {
      window.__violations = [];
      document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective));
    });
    await page.goto(site.url);
    await ready(page);
    const item = 'Payload <img src=x onerror="window.__xss=1"> and <script>window.__xss=2</script> in the corpus.';
    const corpus = [{ id: 'x1', text: item }, { id: 'x2', text: 'The payload arrived by mail.' }]
      .map((entry) => JSON.stringify(entry)).join('\n');
    await page.setInputFiles(id('corpus-file-input'), { name: 'hostile.jsonl', mimeType: 'text/plain', buffer: Buffer.from(corpus) });
    await page.locator(id('corpus-count')).filter({ hasText: '2' }).waitFor();
    await useOpenAi(page, `${mock.url}/v1`);
    await page.fill(id('claims-input'), 'The payload is in the corpus.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.equal(await card.locator(id('summary')).innerText(),
      'Summary <img src=x onerror="window.__xss=5"> and <script>window.__xss=6</script> from the model.');
    assert.equal(await card.locator(id('citation')).first().innerText(), `“${item}”`);
    assert.match(await card.locator(id('evidence')).first().innerText(), /<img src=x onerror="window.__xss=1"> and <script>window.__xss=2<\/script>/);
    assert.match(await page.locator(id('corpus-table')).innerText(), /<script>window.__xss=2<\/script>/);
    const json = JSON.stringify(JSON.parse(await exported(page, 'export-json')));
    assert.ok(json.includes('Rationale <img src=x onerror=\\"window.__xss=3\\">'), 'the rationale reached the page');
    assert.equal(await page.evaluate(() => window.__xss), undefined, 'no payload ran');
    assert.equal(await page.locator('img[src="x"]').count(), 0, 'no <img> element was made');
    assert.equal(await page.locator('body script:not([src])').count(), 0, 'no <script> element was made');
    assert.deepEqual(await page.evaluate(() => window.__violations), [], 'nothing tried to run inline script');
    await screenshot(page, 'hostile-model-answer');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

/** The text of the download the button `testid` starts. */
async function exported(page, testid) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click(id(testid))]);
  let text = '';
  for await (const chunk of await download.createReadStream()) text += chunk;
  return text;
}

test('a claim checked through Anthropic\'s Messages API, streaming', async () => {
  // aimock answers /v1/messages from the same provider-agnostic fixtures (it translates the
  // Messages request before matching); the key is a dummy, the mock takes any.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await page.selectOption(id('provider-kind'), 'anthropic');
    await page.fill(id('provider-anthropic-base-url'), mock.url);
    await page.fill(id('provider-key'), 'sk-ant-dummy');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await card.locator(id('verdict')).innerText(), /supported/i);
    assert.match(await card.locator(id('summary')).innerText(), /places the Eiffel Tower in Paris/);
    assert.match(await card.locator(id('citation')).first().innerText(), /Champ de Mars/);
    const entries = await journal(mock);
    assert.equal(entries.length, 2, 'one assessment and one summary request');
    for (const entry of entries) {
      assert.equal(entry.method, 'POST');
      assert.equal(new URL(entry.path, mock.url).pathname, '/v1/messages');
      assert.equal(entry.body?.stream, true, 'the page streams');
      assert.ok(JSON.stringify(entry.body).includes('"stream":true'));
      assert.equal(entry.headers['anthropic-dangerous-direct-browser-access'], 'true');
      assert.ok(entry.headers['anthropic-version'], 'the API version header is sent');
      assert.equal(entry.response?.status, 200);
    }
    await screenshot(page, 'results-anthropic');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('cancel mid-run ends the check as cancelled and leaves no request open', async () => {
  const silent = await silentServer();
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${silent.url}/v1`);
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('check-stage')).filter({ hasText: 'Assessing' }).waitFor({ timeout: 30000 });
    for (let i = 0; i < 100 && silent.open() === 0; i++) await page.waitForTimeout(50);
    assert.equal(silent.open(), 1, 'the request is open');
    await screenshot(page, 'running');
    await card.locator(id('cancel')).click();
    await card.locator(id('failure-kind')).waitFor({ timeout: 10000 });
    assert.match(await card.locator(id('failure-kind')).innerText(), /cancelled/);
    for (let i = 0; i < 100 && silent.open() > 0; i++) await page.waitForTimeout(50);
    assert.equal(silent.open(), 0, 'the browser closed the request');
    await screenshot(page, 'failure-cancelled');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await silent.close();
  }
});

test('a stream that stops is shown stalled, then ended by the idle timeout the page set and retried', async () => {
  const stalled = await silentServer({ firstBytes: 'data: {"choices":[{"delta":{"content":"{"}}]}\n\n' });
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${stalled.url}/v1`);
    // The person's own idle timeout (the Provider section's "Stalled after"), not the 60 s default.
    await page.getByLabel('Stalled after (s)').fill('20');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    // Not while bytes are recent...
    for (let i = 0; i < 100 && stalled.open() === 0; i++) await page.waitForTimeout(50);
    assert.equal(await card.locator(id('check-stalled')).isVisible(), false, 'not stalled yet');
    // ...the page says so after 15 s without a byte, while the request is still open...
    await card.locator(id('check-stalled')).waitFor({ timeout: 30000 });
    assert.match(await card.locator(id('check-stalled')).innerText(), /Stalled: nothing from the model for 15 s/);
    assert.equal(stalled.open(), 1, 'the request is still open');
    await screenshot(page, 'stalled');
    // ...and the idle timeout set in the page (20 s) ends that request with a failure that
    // names the stall (the app then retries it: the activity log says both).
    // The failure names the bound that ended the request: the page's 20 s, not the 60 s default.
    await card.locator(id('check-log')).filter({ hasText: /stalled \(no bytes within the idle timeout, 20 s\)/ })
      .waitFor({ state: 'attached', timeout: 60000 });
    await card.locator(id('check-log')).filter({ hasText: /sent again \(retry 1/ })
      .waitFor({ state: 'attached', timeout: 20000 });
    await card.locator(id('cancel')).click();
    await card.locator(id('failure-kind')).waitFor({ timeout: 10000 });
    for (let i = 0; i < 100 && stalled.open() > 0; i++) await page.waitForTimeout(50);
    assert.equal(stalled.open(), 0, 'the browser closed the requests');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await stalled.close();
  }
});

/** A server that answers everything (the CORS preflight too) without CORS headers, as a local
 * model server that does not allow the page's origin; resolves to { url, seen(), close }. */
function corslessServer() {
  let seen = 0;
  const server = createServer((request, response) => {
    seen += 1;
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  return new Promise((ready) => {
    server.listen(0, '127.0.0.1', () => ready({
      url: `http://127.0.0.1:${server.address().port}`,
      seen: () => seen,
      close: () => new Promise((done) => server.close(done)),
    }));
  });
}

test('a request the browser blocks (no CORS headers) fails naming CORS as the likely cause', async () => {
  const server = await corslessServer();
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${server.url}/v1`);
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('failure-kind')).waitFor({ timeout: 60000 });
    assert.match(await card.locator(id('failure-kind')).innerText(), /^(provider|assess-request)$/);
    const message = await card.locator(id('failure-message')).innerText();
    assert.match(message, /blocked the request/);
    assert.match(message, /CORS/);
    assert.match(await card.locator(id('failure-advice')).innerText(), /Access-Control-Allow-Origin/);
    assert.ok(server.seen() >= 1, 'the browser did reach the server (its preflight)');
    await screenshot(page, 'failure-cors');
    // The browser reports the blocked request on the console itself; nothing else may fail.
    assert.deepEqual(errors.filter((e) => !/CORS policy|net::ERR_FAILED/.test(e)), []);
  } finally {
    await close();
    await server.close();
  }
});

test('a 429 is retried after a wait, shown in the live log, then the check ends with a verdict', async () => {
  // The first assessment request is refused with 429 (tests/fixtures/aimock/claim-429.json).
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim-429.json'));
  const { page, errors, close } = await browser();
  try {
    // Every line the card's live log shows, in order (the log goes once the result is in).
    await page.addInitScript(() => {
      window.__lines = [];
      new MutationObserver(() => {
        for (const line of document.querySelectorAll('[data-testid="check-log"] li')) {
          if (!window.__lines.includes(line.textContent)) window.__lines.push(line.textContent);
        }
      }).observe(document, { subtree: true, childList: true, characterData: true });
    });
    await page.goto(site.url);
    await ready(page);
    await loadEiffel(page);
    await useOpenAi(page, `${mock.url}/v1`);
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await card.locator(id('summary')).innerText(), /Supported after a wait/);
    const lines = await page.evaluate(() => window.__lines);
    const retry = lines.find((line) => line.startsWith('Retry 1 in '));
    assert.ok(retry, `a retry line in ${JSON.stringify(lines)}`);
    assert.match(retry, /^Retry 1 in (\d+ ms|\d+\.\d s): .*429/);
    assert.ok(lines.some((line) => /^Model call 1 sent again \(retry 1, after (\d+ ms|\d+\.\d s)\)$/.test(line)), JSON.stringify(lines));
    const entries = await journal(mock);
    assert.equal(entries.length, 3, 'the refused assessment, its retry and the summary');
    assert.equal(entries[0].response?.status, 429);
    assert.ok(errors.every((e) => /429/.test(e)), JSON.stringify(errors));
  } finally {
    await close();
    mock.close();
  }
});

test('a reload keeps the corpus and the results, and resumes a check without repeating a recorded request', async () => {
  // Every answer takes 1.5 s, so the page can be reloaded while the summary is requested.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'), ['--chaos-latency', '1500']);
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${mock.url}/v1`);
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('check-stage')).filter({ hasText: 'Writing the summary' }).waitFor({ timeout: 30000 });
    await page.reload();
    await ready(page);
    assert.match(await page.locator(id('corpus-count')).innerText(), /3/);
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await page.locator(id('check-1')).locator(id('verdict')).innerText(), /supported/i);
    const bodies = (await journal(mock)).map((entry) => JSON.stringify(entry));
    const assessments = bodies.filter((body) => body.includes('Record your assessment'));
    // The assessment was recorded before the reload: it is not requested again.
    assert.equal(assessments.length, 1, `assessment requests: ${assessments.length}`);
    // A later visit still has the result.
    await page.reload();
    await ready(page);
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 10000 });
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('a reload loses no queued check: the running one resumes, the queued ones run after it', async () => {
  // Four claims one at a time, every answer 1.5 s late: the page is reloaded while the first
  // check writes its summary and the other three wait.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'), ['--chaos-latency', '1500']);
  const claims = ['First claim: the Eiffel Tower is in Paris.', 'Second claim: the Eiffel Tower is in France.',
    'Third claim: the Eiffel Tower is made of iron.', 'Fourth claim: the Eiffel Tower is a lattice tower.'];
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${mock.url}/v1`);
    await page.selectOption(id('concurrency'), '1');
    await page.fill(id('claims-input'), claims.join('\n'));
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(id('check-stage')).filter({ hasText: 'Writing the summary' })
      .waitFor({ timeout: 30000 });
    const before = await journal(mock);
    assert.equal(before.length, 1, 'only the first assessment had been answered');
    await page.reload();
    await ready(page);
    const cards = page.locator('[data-testid^="check-"][data-check-id]');
    assert.equal(await cards.count(), 4, 'every check has its card after the reload');
    await screenshot(page, 'reload-queued');
    for (const claim of claims) {
      const card = cards.filter({ hasText: claim });
      await card.locator(id('verdict')).waitFor({ timeout: 60000 });
      assert.match(await card.locator(id('verdict')).innerText(), /supported/i);
    }
    const bodies = (await journal(mock)).map((entry) => JSON.stringify(entry.body));
    const assessments = bodies.filter((body) => body.includes('Record your assessment'));
    for (const claim of claims) {
      // The first check's assessment was answered before the reload: it is not asked again.
      const mine = assessments.filter((body) => body.includes(claim)).length;
      assert.equal(mine, 1, `${claim}: ${mine} assessment requests`);
    }
    // A summary prompt carries the assessment, not the claim: count them all. The first
    // check's was in flight at the reload (the mock may have seen it) and is asked again.
    const summaries = bodies.length - assessments.length;
    assert.ok(summaries === 4 || summaries === 5, `${summaries} summary requests`);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

/** Starts a check with an API key through the slow mock and reloads while the summary is asked for. */
async function reloadKeyedCheck(page, mock, { remember }) {
  await loadEiffel(page);
  await useOpenAi(page, `${mock.url}/v1`);
  await page.fill(id('provider-key'), 'sk-test-remembered');
  if (remember) await page.check(id('provider-remember'));
  await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
  await page.click(id('run'));
  const card = page.locator(id('check-1'));
  await card.locator(id('check-stage')).filter({ hasText: 'Writing the summary' }).waitFor({ timeout: 30000 });
  await page.reload();
  await ready(page);
}

test('a keyed check resumes after a reload with the key remembered on this device, paying nothing twice', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'), ['--chaos-latency', '1500']);
  const { page, errors, close } = await open();
  try {
    await reloadKeyedCheck(page, mock, { remember: true });
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await page.locator(id('check-1')).locator(id('verdict')).innerText(), /supported/i);
    const entries = await journal(mock);
    const assessments = entries.filter((entry) => JSON.stringify(entry.body).includes('Record your assessment'));
    assert.equal(assessments.length, 1, 'the recorded assessment was not requested again');
    const last = entries.at(-1);
    // aimock redacts the header's value in its journal; that it is there is what a keyless
    // resume would lack.
    assert.ok(last.headers.authorization, 'the summary after the reload carried the key');
    assert.match(JSON.stringify(last.body), /submit/, 'the last request is the summary');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('a keyed check interrupted by a reload, its key not remembered, ends saying why', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'), ['--chaos-latency', '1500']);
  const { page, errors, close } = await open();
  try {
    await reloadKeyedCheck(page, mock, { remember: false });
    const card = page.locator(id('check-1'));
    await card.filter({ hasText: 'cancelled' }).waitFor({ timeout: 30000 });
    assert.match(await card.innerText(), /Remember on this device/);
    await screenshot(page, 'keyed-reload-not-remembered');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('a model request follows no redirect: a 307 to another origin reaches nothing there, and the check says why', async () => {
  // The key's server answers every model request with a redirect to a server on another port
  // (another origin), which must see no request at all: not the key, not even a preflight.
  const elsewhere = await recordingServer();
  const redirecting = await recordingServer((request, response) => {
    response.writeHead(307, { 'access-control-allow-origin': '*', location: `${elsewhere.url}/v1/chat/completions` }).end();
  });
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${redirecting.url}/v1`);
    await page.fill(id('provider-key'), 'sk-test-0123456789');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('failure-message')).waitFor({ timeout: 30000 });
    assert.match(await card.locator(id('failure-message')).innerText(), /redirected the request; redirects are not followed/);
    const posts = redirecting.requests.filter((request) => request.method === 'POST');
    assert.ok(posts.length >= 1 && posts.every((request) => request.headers.authorization), 'the key went to its own server');
    assert.deepEqual(elsewhere.requests, [], 'the redirect target got nothing');
    await screenshot(page, 'failure-redirect');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await elsewhere.close();
    await redirecting.close();
  }
});

test('a key goes over plain HTTP only to loopback: http://10.1.2.3 and http://evil\\@127.0.0.1 are refused before any request, 127.0.0.1 is used', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  // WHATWG reads http://evil\@127.0.0.1:PORT/ as host `evil`: a check that read 127.0.0.1
  // there would send the key to `evil`. This server on PORT must get nothing either way.
  const loopback = await recordingServer();
  const { context, page, errors, close } = await open();
  const offLoopback = [];
  await context.route(/^http:\/\/(10\.1\.2\.3|evil)[/:]/, (route) => {
    offLoopback.push(route.request().url());
    return route.abort();
  });
  try {
    await loadEiffel(page);
    const refused = [['http://10.1.2.3/v1', '"10.1.2.3"'], [`http://evil\\@127.0.0.1:${loopback.port}/v1`, '"evil"']];
    for (const [index, [baseUrl, host]] of refused.entries()) {
      await useOpenAi(page, baseUrl);
      await page.fill(id('provider-key'), 'sk-test-in-the-clear');
      await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
      await page.click(id('run'));
      const card = page.locator(id(`check-${index + 1}`));
      await card.locator(id('failure-message')).waitFor({ timeout: 30000 });
      const message = await card.locator(id('failure-message')).innerText();
      assert.match(message, /refusing to send the API key over plain HTTP/);
      assert.ok(message.includes(`to ${host}, which is not loopback`), message);
      assert.ok(!message.includes('sk-test-in-the-clear'), message);
      assert.match(await card.locator(id('failure-kind')).innerText(), /config/);
      if (index === 0) await screenshot(page, 'failure-key-in-the-clear');
    }
    assert.deepEqual(offLoopback, [], 'no request left for a host off loopback');
    assert.deepEqual(loopback.requests, []);
    // Plain HTTP to loopback carries the key.
    await useOpenAi(page, `${mock.url}/v1`);
    await page.fill(id('provider-key'), 'sk-test-loopback');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    const card = page.locator(id('check-3'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    const entries = await journal(mock);
    assert.ok(entries.length >= 1 && entries.every((entry) => entry.headers.authorization), 'the key went to 127.0.0.1');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await loopback.close();
    mock.close();
  }
});

test('settings that cannot make a provider are named on the form, and nothing is sent until they are fixed', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    await useOpenAi(page, `${mock.url}/v1`);
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.getByLabel('Output tokens').fill('lots');
    // On the form, and under the run button, which waits.
    const problem = page.locator(id('provider-problem'));
    await problem.filter({ hasText: 'Output tokens' }).waitFor({ timeout: 10000 });
    assert.match(await page.locator('#run-why').innerText(), /^Provider: .*Output tokens/);
    assert.equal(await page.locator(id('run')).isDisabled(), true);
    await page.locator(id('claims-input')).press('Control+Enter');
    assert.equal(await page.locator(id('check-1')).count(), 0, 'no check was started');
    await screenshot(page, 'provider-problem');
    // Fixed, it runs.
    await page.getByLabel('Output tokens').fill('512');
    assert.equal(await problem.innerText(), '');
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    const entries = await journal(mock);
    assert.equal(entries[0].body.max_tokens ?? entries[0].body.max_completion_tokens, 512);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('a key belongs to its endpoint: after switching preset or provider kind, no key typed for another endpoint is sent', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const { page, errors, close } = await open();
  try {
    await loadEiffel(page);
    // Endpoint A: OpenAI's preset, with its key.
    await page.selectOption(id('provider-kind'), 'openai');
    await page.selectOption(id('provider-preset'), 'openai');
    await page.fill(id('provider-key'), 'sk-test-for-openai');
    // Endpoint B: another preset, then a base URL the mock serves; and through Anthropic.
    await page.selectOption(id('provider-preset'), 'openrouter');
    assert.equal(await page.inputValue(id('provider-key')), '', "OpenRouter's endpoint has no key");
    await page.selectOption(id('provider-kind'), 'anthropic');
    assert.equal(await page.inputValue(id('provider-key')), '', "Anthropic's endpoint has no key");
    await page.fill(id('provider-key'), 'sk-test-for-anthropic');
    await useOpenAi(page, `${mock.url}/v1`);
    assert.equal(await page.inputValue(id('provider-key')), '');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    const entries = await journal(mock);
    assert.ok(entries.length >= 1, 'the mock was asked');
    assert.deepEqual(entries.filter((entry) => entry.headers.authorization || entry.headers['x-api-key']), [], 'B got no key');
    await screenshot(page, 'provider-key-per-endpoint');
    // Back at each endpoint, its own key.
    await page.selectOption(id('provider-preset'), 'openai');
    assert.equal(await page.inputValue(id('provider-key')), 'sk-test-for-openai');
    await page.selectOption(id('provider-kind'), 'anthropic');
    assert.equal(await page.inputValue(id('provider-key')), 'sk-test-for-anthropic');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('the VitaminC corpus loads and indexes while the page stays responsive', async () => {
  const path = join(ROOT, '../shared/data/vitaminc/corpus.jsonl');
  const { page, errors, close } = await open();
  try {
    const started = Date.now();
    // Every read of a file's bytes on the page's main thread is counted (the worker's own reads
    // are in another realm).
    await page.evaluate(() => {
      window.__reads = [];
      const count = (proto, names) => {
        for (const name of names) {
          const original = proto[name];
          proto[name] = function (...args) {
            window.__reads.push(`${proto.constructor.name}.${name}`);
            return original.apply(this, args);
          };
        }
      };
      count(Blob.prototype, ['text', 'arrayBuffer', 'bytes', 'stream', 'slice']);
      count(FileReader.prototype, ['readAsText', 'readAsArrayBuffer', 'readAsDataURL', 'readAsBinaryString']);
    });
    await page.setInputFiles(id('corpus-file-input'), { name: 'corpus.jsonl', mimeType: 'text/plain', buffer: readFileSync(path) });
    // The page's longest main-thread task from then to searchable (from then: handing the test's
    // 5.4 MB buffer to the page is Playwright's own long task, not the page's).
    await page.evaluate(() => {
      window.__longest = 0;
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) window.__longest = Math.max(window.__longest, entry.duration);
      }).observe({ type: 'longtask' });
    });
    // While the worker parses and indexes, the page says so and answers typing.
    const parsing = page.locator(id('corpus-parsing'));
    await parsing.waitFor({ timeout: 30000 });
    assert.match(await parsing.innerText(), /Reading 5\.\d MB in the engine/);
    const typed = Date.now();
    await page.fill(id('claims-input'), 'typing works');
    const typing = Date.now() - typed;
    const stillParsing = (await parsing.count()) > 0;
    await page.locator(id('corpus-count')).filter({ hasText: '26,259' }).waitFor({ timeout: 120000 });
    await page.locator(id('corpus-index')).filter({ hasText: 'indexed' }).waitFor({ timeout: 120000 });
    const searchable = Date.now() - started;
    const longest = await page.evaluate(() => window.__longest);
    assert.equal(await parsing.count(), 0, 'the progress line goes once the corpus is in');
    await page.fill(id('corpus-search'), 'Westlife');
    await page.locator(id('corpus-table')).filter({ hasText: 'Westlife' }).waitFor();
    console.log(`VitaminC corpus (26,259 passages): searchable ${searchable} ms after the drop; typing during the `
      + `worker's parse answered in ${typing} ms (${stillParsing ? 'still parsing after it' : 'parse ended meanwhile'}); `
      + `longest main-thread task ${Math.round(longest)} ms`);
    // Responsive by events, not by a clock: the typing was answered while the engine was still
    // reading the file (which takes over a second); the page read the file once, as text, for
    // the engine (a file under 8 MiB; larger ones it hands over unread), and parsed nothing of
    // it; and it draws one page of the table, not 26,259 rows. The times above are printed, not
    // bounded.
    assert.ok(stillParsing, 'the page answered the typing before the engine had read the file');
    assert.deepEqual(await page.evaluate(() => window.__reads), ['Blob.text'], 'the page read the file once, whole');
    assert.ok(await page.locator(`${id('corpus-table')} tbody tr`).count() <= 50, 'one page of the table is drawn');
    await screenshot(page, 'vitaminc');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('no serious or critical accessibility violations (axe-core): empty, results, a failure', async () => {
  const axe = readFileSync(join(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8');
  const check = async (page, state, width) => {
    // The page's CSP refuses injected script; the test's own evaluation is not page script.
    if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axe);
    const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const bad = results.violations.filter((v) => ['serious', 'critical'].includes(v.impact));
    assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length})`), [], `${state} at ${width}px`);
  };
  for (const width of [1280, 390]) {
    const { page, errors, close } = await open({ width, height: 900 });
    try {
      await check(page, 'empty', width);
      await loadEiffel(page);
      await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
      await page.click(id('run'));
      await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
      await check(page, 'results', width);
      // A failure card: nothing listens on port 9.
      await useOpenAi(page, 'http://127.0.0.1:9/v1');
      await page.fill(id('claims-input'), 'The Louvre is a museum.');
      await page.click(id('run'));
      await page.locator(id('check-2')).locator(id('failure-kind')).waitFor({ timeout: 30000 });
      await check(page, 'failure', width);
      assert.deepEqual(errors.filter((e) => !/ERR_CONNECTION_REFUSED/.test(e)), []);
    } finally {
      await close();
    }
  }
});
