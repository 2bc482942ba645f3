// The app in real Chromium: corpus upload, a check with the offline baseline, hostile text
// inert, a bad file named by line, the CSP in force, screenshots of the main states.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, browser, screenshot } from './harness.mjs';

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

test('the content security policy refuses inline script', async () => {
  const { page, close } = await open();
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
  } finally {
    await close();
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

test('the page is interactive before the engine has loaded', async () => {
  const { page, errors, close } = await browser();
  try {
    await page.goto(site.url);
    await page.locator(id('engine-status')).waitFor();
    const painted = await page.evaluate(() => performance.now());
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const engine = await page.evaluate(() => performance.now());
    console.log(`UI painted ${Math.round(painted)} ms after navigation start; engine ready at ${Math.round(engine)} ms`);
    assert.ok(painted <= engine);
    assert.deepEqual(errors, []);
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
