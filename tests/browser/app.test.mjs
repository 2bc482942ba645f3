// The app in real Chromium: corpus upload, a check with the offline baseline, hostile text
// inert, a bad file named by line, the CSP in force, screenshots of the main states.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serve, browser, screenshot, recordingServer, inEngine, waitUntil, ROOT } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

async function open(options) {
  const session = await browser(options);
  await session.page.goto(site.url);
  await session.page.locator('.engine-ready').waitFor({ timeout: 60000 });
  return session;
}

async function upload(page, name, text) {
  await page.setInputFiles(id('corpus-file-input'), { name, mimeType: 'text/plain', buffer: Buffer.from(text) });
}

const CORPUS = [
  { id: 'e1', text: 'The storage migration finished in March without data loss.' },
  { id: 'e2', text: 'Two earlier attempts at the migration were rolled back.' },
  { id: 'e3', text: 'Quarterly revenue grew four percent.' },
].map((item) => JSON.stringify(item)).join('\n');

test('upload a corpus and check a claim with the offline baseline', async () => {
  const { page, errors, close } = await open();
  try {
    await screenshot(page, 'empty');
    await upload(page, 'notes.jsonl', CORPUS);
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
    await screenshot(page, 'corpus-loaded');
    await page.fill(id('claims-input'), 'The storage migration finished in March without data loss.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await card.locator(id('verdict')).innerText(), /supported/i);
    const citation = card.locator(id('citation')).first();
    assert.match(await citation.innerText(), /storage migration finished in March/);
    await screenshot(page, 'results');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('text from the corpus and the claim renders as text and runs nothing', async () => {
  const { page, errors, close } = await open();
  try {
    const hostile = [
      { id: 'x1', text: 'Payload <img src=x onerror="window.__xss=1"> and <script>window.__xss=2</script> in the corpus.' },
      { id: 'x2', text: 'The bridge opened in 1932.' },
    ].map((item) => JSON.stringify(item)).join('\n');
    await upload(page, 'hostile.jsonl', hostile);
    await page.locator(id('corpus-count')).filter({ hasText: '2' }).waitFor();
    await page.fill(id('claims-input'), 'Payload <img src=x onerror="window.__xss=3"> in the corpus.');
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(`${id('verdict')}, ${id('failure-kind')}`).first().waitFor({ timeout: 30000 });
    const table = await page.locator(id('corpus-table')).innerText();
    assert.match(table, /<img src=x onerror="window.__xss=1">/);
    assert.equal(await page.evaluate(() => window.__xss), undefined);
    assert.equal(await page.locator('img[src="x"]').count(), 0);
    assert.equal(await page.locator('body script:not([src])').count(), 0);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('a bad file is named with its line and the corpus is kept', async () => {
  const { page, errors, close } = await open();
  try {
    await upload(page, 'good.jsonl', CORPUS);
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
    await upload(page, 'bad.jsonl', '{"id": "b1", "text": "fine"}\n{"id": "b2", "text": ');
    const error = page.locator(id('corpus-error'));
    await error.waitFor();
    assert.match(await error.innerText(), /bad\.jsonl/);
    assert.match(await error.innerText(), /line 2/);
    assert.match(await page.locator(id('corpus-count')).innerText(), /3/);
    await screenshot(page, 'bad-file');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('a large corpus file goes to the engine as it is: its items are added, its table searched, a bad line in it named', async () => {
  const { page, errors, close } = await browser();
  try {
    // What the page posts to the engine, by kind: the file itself, or its text.
    await page.addInitScript(() => {
      window.__posted = [];
      const post = MessagePort.prototype.postMessage;
      MessagePort.prototype.postMessage = function (message, ...rest) {
        window.__posted.push(message?.verityFiles ? 'file' : message?.type ?? '?');
        return post.call(this, message, ...rest);
      };
    });
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    // 72,000 lines of ~125 bytes: past the 8 MiB from which the page hands a file over
    // (web/boot.js) and the engine reads it a block at a time.
    const lines = Array.from({ length: 72000 }, (_, i) => JSON.stringify({
      id: `big-${i}`, text: `Passage ${i} of a large corpus, ${i % 7 === 0 ? 'about zeppelins over the river' : 'about nothing in particular'}, padded to be long enough to count.`,
    }));
    const big = lines.join('\n') + '\n';
    assert.ok(big.length > 8 * 1024 * 1024, `${big.length} bytes`);
    await upload(page, 'big.jsonl', big);
    await page.locator(id('corpus-count')).filter({ hasText: "72,000 items" }).waitFor({ timeout: 60000 });
    await page.locator(id('corpus-index')).filter({ hasText: 'indexed' }).waitFor({ timeout: 60000 });
    const posted = await page.evaluate(() => window.__posted);
    assert.ok(posted.includes('file') && !posted.includes('addFiles'), posted.join(', '));
    await page.locator(id('corpus-search')).fill('Zeppelin');
    // Every 7th passage: the search's first page ends at big-133, which the whole corpus's
    // first page does not show.
    await page.locator(id('corpus-table')).filter({ hasText: 'big-133' }).waitFor({ timeout: 10000 });
    assert.doesNotMatch(await page.locator(id('corpus-table')).innerText(), /big-1\b/);
    // A bad line deep in a large file (past its first 8 MiB block) is named by its line.
    const bad = lines.slice(0, 71000).map((line) => line.replace('big-', 'other-')).join('\n') + '\n{"id": "broken", "text": \n';
    await upload(page, 'bad-big.jsonl', bad);
    const error = page.locator(id('corpus-error'));
    await error.waitFor({ timeout: 60000 });
    assert.match(await error.innerText(), /bad-big\.jsonl/);
    assert.match(await error.innerText(), /line 71001/);
    assert.match(await page.locator(id('corpus-count')).innerText(), /72,000 items/);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('the content security policy refuses inline script', async () => {
  const { page, errors, close } = await open();
  try {
    const outcome = await page.evaluate(() => new Promise((done) => {
      let violated = false;
      document.addEventListener('securitypolicyviolation', () => { violated = true; });
      const script = document.createElement('script');
      script.textContent = 'window.__inline = 1;';
      document.body.append(script);
      setTimeout(() => done({ violated, ran: window.__inline === 1 }), 200);
    }));
    assert.deepEqual(outcome, { violated: true, ran: false });
    // The refusal is reported on the console; nothing else went wrong.
    assert.deepEqual(errors.filter((e) => !/Executing inline script violates the following Content Security Policy/.test(e)), []);
  } finally {
    await close();
  }
});

test('the page and the worker come with the security headers; the worker is under the policy; no page can frame the app', async () => {
  // The headers the folder ships for static hosts (dist/_headers), on the page, its module
  // loader, the worker's loader and its glue: a worker takes its policy from its own script's
  // response, never from the page's meta tag.
  for (const path of ['', 'boot.js', 'verity-worker_loader.js', 'verity-worker.js']) {
    const response = await fetch(`${site.url}${path}`);
    const csp = response.headers.get('content-security-policy') ?? '';
    assert.match(csp, /script-src 'self' 'wasm-unsafe-eval'/, `${path || 'the page'}: ${csp}`);
    assert.match(csp, /frame-ancestors 'none'/, path);
    assert.match(csp, /connect-src \*/, 'the worker reaches whatever endpoint the user sets');
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff', path);
    assert.equal(response.headers.get('referrer-policy'), 'no-referrer', path);
  }
  const { context, page, errors, close } = await open();
  // A page on another origin that frames the app.
  const framing = await recordingServer((request, response) => {
    response.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>framing</title><iframe src="${site.url}"></iframe>`);
  });
  try {
    // Inside the engine (the origin's shared worker, which holds the key): no code from
    // strings, no fetch of a data: URL.
    const inWorker = await inEngine(context, page, `(async () => {
      const violations = [];
      self.addEventListener('securitypolicyviolation', (event) => violations.push(event.effectiveDirective));
      // From a timer, so that the worker's own code tries it (DevTools' evaluation itself is
      // allowed to make code from strings).
      const evaluated = await new Promise((resolve) => setTimeout(() => {
        try { resolve(new Function('return "ran"')()); } catch (error) { resolve(error.name); }
      }));
      let fetched;
      try { fetched = await (await fetch('data:text/plain,ran')).text(); } catch (error) { fetched = error.name; }
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { evaluated, fetched, violations: violations.sort() };
    })()`);
    assert.deepEqual(inWorker, { evaluated: 'EvalError', fetched: 'TypeError', violations: ['connect-src', 'script-src'] });
    // frame-ancestors 'none': the app does not load in another page's frame.
    await page.goto(`${framing.url}/`);
    // The browser says it refused the frame: an event to wait for, not a time (a slow machine
    // that had not loaded the frame yet would otherwise pass without checking anything).
    for (let i = 0; !errors.some((e) => /Framing .*violates .*frame-ancestors 'none'.*blocked/s.test(e)); i++) {
      assert.ok(i < 200, `the browser never said it refused the frame: ${JSON.stringify(errors)}`);
      await page.waitForTimeout(50);
    }
    const frame = page.frames().find((f) => f !== page.mainFrame());
    const title = await frame.evaluate(() => document.title).catch(() => null);
    assert.ok(!/Verity/.test(title ?? ''), `the app loaded in a frame: ${title}`);
    assert.equal(await frame.locator('#boot-status, .engine-ready').count().catch(() => 0), 0);
    assert.deepEqual(errors.filter((e) => !/Refused to (frame|evaluate|connect)|violates the following Content Security Policy/.test(e)), []);
  } finally {
    await close();
    await framing.close();
  }
});

test('the page fits a phone-width window', async () => {
  const { page, errors, close } = await open({ width: 390, height: 844 });
  try {
    await upload(page, 'notes.jsonl', CORPUS);
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the window`);
    await screenshot(page, 'phone');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

/** Records, in the page, the first contentful paint (`window.__fcp`) and when the engine
 * status first reads ready (`window.__readyAt`), both in ms since navigation start. */
async function watchTimings(page) {
  await page.addInitScript(() => {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (entry.name === 'first-contentful-paint') window.__fcp = entry.startTime;
      }
    }).observe({ type: 'paint', buffered: true });
    new MutationObserver(() => {
      if (window.__readyAt === undefined && document.querySelector('.engine-ready')) {
        window.__readyAt = performance.now();
      }
    }).observe(document, { subtree: true, childList: true, attributes: true });
  });
}

test('the page is interactive before the engine has loaded', async () => {
  const HOLD = 3000;
  let { page, errors, close } = await browser();
  let held;
  try {
    await watchTimings(page);
    // Unhindered first: the figures docs/BENCHMARKS.md reports.
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const fast = await page.evaluate(() => ({ fcp: window.__fcp, ready: window.__readyAt }));
    assert.ok(fast.fcp > 0 && fast.fcp < fast.ready, JSON.stringify(fast));

    // Then with the engine's wasm held back for HOLD ms, in a new profile (a new engine: the
    // origin's shared worker may outlive the navigation). A page's `route` does not see a
    // shared worker's requests, so the server holds it.
    assert.deepEqual(errors, []);
    await close();
    ({ page, errors, close } = await browser());
    await watchTimings(page);
    held = site.hold('/verity-worker_bg.wasm');
    const release = held.release;
    await page.goto(`${site.url}?held`);
    const status = page.locator(id('engine-status'));
    await status.filter({ hasText: 'Engine loading' }).waitFor();
    for (let i = 0; i < 100 && held.asked() === 0; i++) await page.waitForTimeout(50);
    assert.equal(held.asked(), 1, 'the worker asked for its wasm, which is held');
    const fcp = await page.evaluate(() => window.__fcp ?? performance.getEntriesByName('first-contentful-paint')[0]?.startTime);
    assert.ok(fcp > 0, 'the page painted');
    // Typing and a file pick work meanwhile; the file waits for the engine, and says so.
    await page.fill(id('claims-input'), 'Typed while the engine loads.');
    assert.equal(await page.inputValue(id('claims-input')), 'Typed while the engine loads.');
    await upload(page, 'early.jsonl', CORPUS);
    await page.locator(id('corpus-waiting')).filter({ hasText: '1 file(s) read, waiting for the engine' }).waitFor();
    const now = await page.evaluate(() => performance.now());
    await page.waitForTimeout(Math.max(0, HOLD - now));
    assert.match(await status.innerText(), /Engine loading/, 'still loading while the wasm is held');
    assert.equal(await page.locator('.engine-ready').count(), 0);
    assert.equal(await page.locator(id('corpus-count')).innerText(), '0 items', 'nothing loaded yet');
    await screenshot(page, 'engine-loading');
    const releasedAt = await page.evaluate(() => performance.now());
    release();
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor({ timeout: 10000 });
    assert.equal(await page.locator(id('corpus-waiting')).count(), 0);
    assert.equal(await page.inputValue(id('claims-input')), 'Typed while the engine loads.');
    const readyAt = await page.evaluate(() => window.__readyAt);
    console.log(`First contentful paint ${Math.round(fast.fcp)} ms, engine ready ${Math.round(fast.ready)} ms after navigation start; `
      + `with the engine's wasm held ${HOLD} ms: painted at ${Math.round(fcp)} ms, interactive meanwhile, `
      + `engine ready ${Math.round(readyAt - releasedAt)} ms after the wasm was released`);
    assert.deepEqual(errors, []);
  } finally {
    held?.release();
    await close();
  }
});

test('the engine starts beside the UI: its wasm is fetched while the UI\'s loads, and what it says before the UI listens reaches the UI', async () => {
  const { page, errors, close } = await browser();
  // The UI's wasm held: the engine's is asked for anyway (before, the UI started the engine,
  // so nothing of the engine was fetched until the UI's wasm had run).
  const ui = site.hold('/verity-web_bg.wasm');
  const engine = site.hold('/verity-worker_bg.wasm');
  try {
    await page.goto(`${site.url}?early`);
    await waitUntil(() => ui.asked() === 1, 'the page asked for the UI\'s wasm');
    await waitUntil(() => engine.asked() === 1, 'the engine asked for its wasm while the UI\'s is held', 20000);
    engine.release();
    // The engine loads and says it is ready, with no UI to hear it yet; the UI, released,
    // is told all the same.
    await page.waitForTimeout(1500);
    assert.equal(await page.locator('.engine-ready').count(), 0, 'no UI yet');
    ui.release();
    await page.locator('.engine-ready').waitFor({ timeout: 30000 });
    await page.fill(id('claims-input'), 'The storage migration finished in March without data loss.');
    await upload(page, 'notes.jsonl', CORPUS);
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.deepEqual(errors, []);
  } finally {
    ui.release();
    engine.release();
    await close();
  }
});

test('the page says it is loading, and says why when its wasm cannot run', async () => {
  const { page, close } = await browser();
  try {
    // A normal start: the loading line goes once the UI runs.
    await page.goto(site.url);
    await page.locator(id('engine-status')).waitFor();
    assert.equal(await page.locator('#boot-status').count(), 0, 'removed once the UI runs');
    // A server that sends something else for the wasm (a broken static host).
    await page.route('**/verity-web_bg.wasm', (route) =>
      route.fulfill({ status: 404, contentType: 'text/html', body: '<h1>Not found</h1>' }));
    await page.goto(`${site.url}?broken`);
    const status = page.locator('#boot-status[role="alert"]');
    await status.waitFor({ timeout: 20000 });
    assert.match(await status.innerText(), /Verity could not start in this browser/);
    assert.equal(await page.locator(id('engine-status')).count(), 0, 'no half-built page');
    await screenshot(page, 'failure-boot');
  } finally {
    await close();
  }
});

test('results export as JSON and as Markdown', async () => {
  const { page, errors, close } = await open();
  try {
    await upload(page, 'notes.jsonl', CORPUS);
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
    await page.fill(id('claims-input'), 'The storage migration finished in March without data loss.');
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    const read = async (button) => {
      const [download] = await Promise.all([page.waitForEvent('download'), page.click(id(button))]);
      const stream = await download.createReadStream();
      let text = '';
      for await (const chunk of stream) text += chunk;
      return { name: download.suggestedFilename(), text };
    };
    const json = await read('export-json');
    assert.match(json.name, /\.json$/);
    const exported = JSON.stringify(JSON.parse(json.text));
    assert.match(exported, /The storage migration finished in March without data loss\./);
    assert.match(exported, /supported/);
    const markdown = await read('export-md');
    assert.match(markdown.name, /\.md$/);
    assert.match(markdown.text, /storage migration finished in March/);
    assert.match(markdown.text, /[Ss]upported/);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

/** Adds the answer tests' two passages (e1, e2) to `page`'s corpus and turns to answer mode. */
async function answerMode(page) {
  const passages = [
    { id: 'e1', text: 'The storage migration finished in March without data loss.' },
    { id: 'e2', text: 'Quarterly revenue grew 4 percent. The board met twice.' },
  ];
  await upload(page, 'notes.jsonl', passages.map((item) => JSON.stringify(item)).join('\n'));
  await page.locator(id('corpus-count')).filter({ hasText: '2' }).waitFor();
  await page.click(id('mode-answer'));
}

test('check an answer: each sentence marked in words, its evidence with the quote highlighted, the spans exported, and it survives a reload', async () => {
  const { page, errors, close } = await open();
  try {
    await answerMode(page);
    assert.equal(await page.locator(id('run')).innerText(), 'Check the answer');
    // In answer mode the run's concurrency is the sentences checked at once.
    assert.equal(await page.locator('label[for="claims-concurrency"]').innerText(), 'Sentences at once');
    const answer = 'Thanks for asking! The storage migration finished in March without data loss [e1]. Quarterly revenue grew 9 percent.';
    await page.fill(id('answer-input'), answer);
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await card.locator('h3').innerText(), /^Answer: Thanks for asking!/);
    assert.equal(await card.locator(id('verdict')).innerText(), '1 of 2 not shown to hold');
    const sentences = card.locator(id('sentence'));
    assert.deepEqual(await sentences.evaluateAll((nodes) => nodes.map((n) => [n.textContent, n.dataset.status, n.nextElementSibling.textContent])), [
      ['The storage migration finished in March without data loss [e1].', 'supported', '✓ supported'],
      ['Quarterly revenue grew 9 percent.', 'contradicted', '✗ contradicted'],
    ]);
    // The greeting is plain text, not a sentence to select.
    assert.match(await card.locator(id('answer-text')).innerText(), /^Thanks for asking!/);
    await sentences.nth(1).click();
    const selected = card.locator(id('selected-sentence'));
    await selected.waitFor();
    assert.match(await selected.innerText(), /✗ contradicted/);
    // The passage's sentence that holds it, highlighted inside the passage.
    assert.equal(await selected.locator(id('quote')).innerText(), 'Quarterly revenue grew 4 percent.');
    assert.match(await selected.locator(id('sentence-evidence')).innerText(), /The board met twice\./);
    assert.equal(await sentences.nth(1).getAttribute('aria-expanded'), 'true');
    await screenshot(page, 'answer');
    // No serious accessibility violation in the answer mode, a sentence's evidence open.
    await page.evaluate(readFileSync(join(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8'));
    const axe = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const bad = axe.violations.filter((v) => ['serious', 'critical'].includes(v.impact));
    assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length})`), []);
    await sentences.nth(0).press('Enter');
    assert.match(await selected.innerText(), /Its mark \[e1\]: passage e1 supports/);
    // The exports carry the spans: CSV a row per sentence with its place in the answer.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(id('export-csv'))]);
    let csv = '';
    for await (const chunk of await download.createReadStream()) csv += chunk;
    const start = answer.indexOf('Quarterly');
    assert.ok(csv.includes(`"Quarterly revenue grew 9 percent.","contradicted"`), csv);
    assert.ok(csv.includes(`"${start}-${answer.length}","e2:0-33"`), csv);
    // A reload shows the answer again, marked.
    await page.reload();
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.locator(id('check-1')).locator(id('sentence')).nth(1).waitFor();
    assert.equal(await page.locator(id('check-1')).locator(id('sentence')).count(), 2);
    // Split into claims first: a sentence's evidence lists its claims, each with its verdict
    // in words (the offline baseline splits nothing: the sentence is its one claim).
    await page.click(id('mode-answer'));
    await page.fill(id('answer-input'), answer);
    await page.check(id('decompose'));
    await page.click(id('run'));
    const split = page.locator(id('check-2'));
    await split.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.equal(await split.locator(id('verdict')).innerText(), '1 of 2 not shown to hold');
    await split.locator(id('sentence')).nth(1).click();
    const claims = split.locator(id('selected-sentence')).locator(id('claim'));
    assert.deepEqual(await claims.allInnerTexts(), ['✗ contradicted Quarterly revenue grew 9 percent.']);
    await screenshot(page, 'answer-split');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('a sentence nothing in the corpus settles says so with its confidence, not a blank', async () => {
  const { page, errors, close } = await open();
  try {
    await answerMode(page);
    await page.fill(id('answer-input'), 'The storage migration finished in March without data loss. The office cat is called Biscuit.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    const sentences = card.locator(id('sentence'));
    assert.deepEqual(await sentences.evaluateAll((nodes) => nodes.map((n) => n.dataset.status)), ['supported', 'insufficient']);
    await sentences.nth(1).click();
    const selected = card.locator(id('selected-sentence'));
    await selected.waitFor();
    // Its first assessment is kept: the verdict in words with how sure, and that no passage
    // decided it (before, the sentence came with no confidence at all).
    assert.match(await selected.innerText(), /not enough evidence\s+Sentence 2 · \d+% confidence/);
    assert.match(await selected.innerText(), /No passage decided it\./);
    await screenshot(page, 'answer-insufficient');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('a re-run replaces the old result, also after a reload', async () => {
  const { page, errors, close } = await open();
  try {
    await upload(page, 'notes.jsonl', CORPUS);
    await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
    await page.fill(id('claims-input'), 'The storage migration finished in March without data loss.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    const first = await card.getAttribute('data-check-id');
    await card.locator(id('rerun')).click();
    await page.locator(`[data-testid="check-1"]:not([data-check-id="${first}"])`).locator(id('verdict')).waitFor({ timeout: 30000 });
    await page.reload();
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 10000 });
    assert.equal(await page.locator('[data-testid^="check-"][data-check-id]').count(), 1, 'one card: the old result is gone');
    assert.notEqual(await page.locator(id('check-1')).getAttribute('data-check-id'), first);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('corpus controls: remove an item, page through, keep or clear, dismiss a notice', async () => {
  const { page, errors, close } = await open();
  try {
    const many = Array.from({ length: 25 }, (_, i) => JSON.stringify({ id: `n${String(i).padStart(2, '0')}`, text: `Note number ${i}.` })).join('\n');
    await upload(page, 'many.jsonl', many);
    await page.locator(id('corpus-count')).filter({ hasText: '25 items' }).waitFor();
    assert.ok(await page.locator(id('corpus-previous')).isDisabled());
    await page.click(id('corpus-next'));
    await page.locator(id('corpus-table')).filter({ hasText: 'n20' }).waitFor();
    assert.equal(await page.locator(id('corpus-remove')).count(), 5, 'the second page holds 5 items');
    assert.ok(await page.locator(id('corpus-next')).isDisabled());
    await page.click(id('corpus-previous'));
    await page.locator(id('corpus-table')).filter({ hasText: 'n00' }).waitFor();
    await page.click(`${id('corpus-remove')}[aria-label="Remove n00"]`);
    await page.locator(id('corpus-count')).filter({ hasText: '24 items' }).waitFor();
    assert.doesNotMatch(await page.locator(id('corpus-table')).innerText(), /\bn00\b/);
    // A refused file's notice is dismissed.
    await upload(page, 'bad.jsonl', 'not json');
    await page.locator(id('corpus-error')).waitFor();
    await page.click(id('notice-dismiss'));
    assert.equal(await page.locator(id('corpus-error')).count(), 0);
    // Clearing asks first: Keep keeps, Yes clears.
    await page.click(id('corpus-clear'));
    await page.click(id('corpus-clear-keep'));
    assert.match(await page.locator(id('corpus-count')).innerText(), /24 items/);
    await page.click(id('corpus-clear'));
    await page.click(id('corpus-clear-confirm'));
    await page.locator(id('corpus-count')).filter({ hasText: '0 items' }).waitFor();
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});
