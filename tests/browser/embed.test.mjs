// The embedding: verity.js and <verity-check> on examples/embed.html (from the built folder),
// in real Chromium: the element's result, the module's claim check, a page tool called by
// runStep through a mock provider, cancel, XSS payloads inert, and the app's storage untouched.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serve, browser, screenshot, aimock, silentServer, recordingServer, ROOT } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

async function open(options) {
  const session = await browser(options);
  await session.page.goto(`${site.url}examples/embed.html`);
  return session;
}

/** Waits for an element to end (done or failed) and returns its state and shadow text. */
async function settled(page, selector) {
  await page.waitForFunction((s) => {
    const state = document.querySelector(s)?.getAttribute('data-state');
    return state === 'done' || state === 'failed';
  }, selector, { timeout: 60000 });
  return page.evaluate((s) => {
    const element = document.querySelector(s);
    return { state: element.getAttribute('data-state'), text: element.shadowRoot.textContent, report: element.report };
  }, selector);
}

test('the element checks its claim with the offline model and shows verdict, summary and cited items', async () => {
  const { page, errors, close } = await open();
  try {
    const inline = await settled(page, '#inline-check');
    assert.equal(inline.state, 'done', inline.text);
    assert.equal(inline.report.assessment.verdict, 'supported');
    assert.match(inline.text, /supported/);
    assert.ok(inline.text.includes(inline.report.summary), 'the summary is shown');
    assert.deepEqual(inline.report.cited.map((item) => item.id), ['eiffel']);
    assert.match(inline.text, /Champ de Mars/, 'the cited item is shown');
    const file = await settled(page, '#file-check');
    assert.equal(file.state, 'done', file.text);
    assert.deepEqual(file.report.cited.map((item) => item.id), ['tokyo'], 'the corpus came from towers.jsonl');
    // Each element dispatched verity-result (the page's own listener logs them).
    await page.locator(id('events')).filter({ hasText: 'verity-result from #inline-check: supported' }).waitFor();
    await page.locator(id('events')).filter({ hasText: 'verity-result from #file-check: supported' }).waitFor();
    // Changing the claim checks again.
    await page.evaluate(() => document.querySelector('#inline-check').setAttribute('claim', 'The Louvre is an art museum.'));
    await page.waitForFunction(() => document.querySelector('#inline-check').report?.claim === 'The Louvre is an art museum.', null, { timeout: 30000 });
    const again = await settled(page, '#inline-check');
    assert.deepEqual(again.report.cited.map((item) => item.id), ['louvre']);
    // The embedding never touched the origin's IndexedDB (the app's corpus and results).
    const databases = await page.evaluate(async () => (await indexedDB.databases()).map((db) => db.name));
    assert.deepEqual(databases, []);
    await screenshot(page, 'embed-elements');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('the module checks a claim; a page tool is called by runStep through a mock provider', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/embed-step.json'));
  const { page, errors, close } = await open();
  try {
    await page.click(id('check'));
    await page.locator(id('check-verdict')).waitFor({ timeout: 60000 });
    assert.equal(await page.locator(id('check-verdict')).textContent(), 'supported');

    await page.fill(id('provider'), JSON.stringify({ api: 'openai', baseUrl: `${mock.url}/v1`, model: 'gpt-4o-mini' }));
    await page.click(id('run-step'));
    await page.locator(id('step-result')).filter({ hasText: 'submitted' }).waitFor({ timeout: 60000 });
    assert.equal(await page.locator(id('step-result')).textContent(), 'submitted: {"miles":1.864}');
    assert.equal(await page.locator(id('tool-calls')).textContent(), '1', 'the page tool ran once');
    const journal = await (await fetch(`${mock.url}/__aimock/journal`)).json();
    const entries = Array.isArray(journal) ? journal : journal.entries ?? [];
    assert.equal(entries.length, 2, 'two model requests: the tool call, then the submission');
    assert.match(JSON.stringify(entries[1]), /1\.864 miles/, "the page tool's answer reached the model");

    // The embedding's engine is the one with the whole of JSON Schema: a schema with a
    // `pattern`, which the app's engine (built without jsonschema) refuses as a config
    // failure, is compiled and the step runs (on the offline model, to whatever end).
    const patterned = await page.evaluate(async () => {
      const { Verity } = await import('../verity.js');
      const verity = new Verity();
      try {
        const schema = { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]+$' } } };
        return { value: await verity.runStep({ prompt: 'x', schema, maxTurns: 1 }) };
      } catch (error) {
        return { kind: error.kind, message: error.message };
      } finally {
        verity.terminate();
      }
    });
    assert.notEqual(patterned.kind, 'config', JSON.stringify(patterned));
    // The module's errors are typed: a bad schema is a config failure, nothing requested.
    const failure = await page.evaluate(async () => {
      const { Verity } = await import('../verity.js');
      const verity = new Verity();
      try {
        await verity.runStep({ prompt: 'x', schema: { type: 'object' }, maxTurns: 0 });
        return null;
      } catch (error) {
        return { name: error.name, kind: error.kind, message: error.message, requests: error.spent?.requests };
      } finally {
        verity.terminate();
      }
    });
    assert.equal(failure.name, 'VerityError');
    assert.equal(failure.kind, 'config');
    assert.match(failure.message, /^maxTurns/);
    assert.equal(failure.requests, 0);
    await screenshot(page, 'embed-module');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    mock.close();
  }
});

test('cancel through an AbortSignal ends the check as cancelled and leaves no request open', async () => {
  const silent = await silentServer();
  const { page, errors, close } = await open();
  try {
    await page.fill(id('provider'), JSON.stringify({ api: 'openai', baseUrl: `${silent.url}/v1`, model: 'm' }));
    await page.click(id('check'));
    const deadline = Date.now() + 30000;
    while (silent.open() === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(silent.open(), 1, 'the model request is open');
    await page.click(id('cancel-check'));
    await page.locator(id('check-result')).filter({ hasText: 'cancelled' }).waitFor({ timeout: 30000 });
    const until = Date.now() + 10000;
    while (silent.open() > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.equal(silent.open(), 0, 'the request was aborted');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await silent.close();
  }
});

test('an answer in the element: each sentence marked with words as its check ends, its evidence quoted where it sits, its mark checked', async () => {
  const { page, errors, close } = await open();
  try {
    const result = await settled(page, '#answer-check');
    assert.equal(result.state, 'done', result.text);
    const { report } = result;
    assert.deepEqual(report.sentences.map((s) => s.status), ['not-checkable', 'supported', 'contradicted'], JSON.stringify(report));
    assert.equal(report.faithful, false);
    assert.deepEqual(report.sentences[1].marks.map((m) => [m.label, m.passage, m.holds]), [['1', 'eiffel', 'supports']]);
    // Marked inline, in words too (a reader without colour sees them), in the answer's order.
    const marked = await page.evaluate(() => [...document.querySelector('#answer-check').shadowRoot
      .querySelectorAll('.sentence')].map((node) => [node.textContent, node.nextSibling.textContent]));
    assert.deepEqual(marked, [
      ['The Eiffel Tower stands on the Champ de Mars in Paris [1].', '✓ supported'],
      ['The Louvre nearby opened as a museum in 1801.', '✗ contradicted'],
    ]);
    assert.match(result.text, /1 of 2 not shown to hold/);
    // Selecting a sentence shows its passage with the quote highlighted where it sits.
    const sentence = page.locator('#answer-check').locator('.sentence.contradicted');
    await sentence.click();
    const shown = await page.evaluate(() => {
      const root = document.querySelector('#answer-check').shadowRoot;
      return { region: root.querySelector('.evidence')?.textContent, quote: root.querySelector('.evidence mark')?.textContent,
        pressed: root.querySelector('.sentence.contradicted').getAttribute('aria-pressed') };
    });
    assert.equal(shown.pressed, 'true');
    assert.match(shown.region, /✗ Sentence 3: contradicted/);
    assert.match(shown.region, /louvre: The Louvre is the world's most-visited art museum\. It opened as a museum in 1793\./);
    assert.equal(shown.quote, 'It opened as a museum in 1793.', 'the sentence of the passage that holds it');
    await screenshot(page, 'embed-answer');
    // The keyboard opens the other one.
    await page.locator('#answer-check').locator('.sentence.supported').press('Enter');
    const mark = await page.evaluate(() => document.querySelector('#answer-check').shadowRoot.querySelector('.evidence').textContent);
    assert.match(mark, /Its mark \[1\]: passage eiffel supports/);

    // The module: checkAnswer reports each sentence as it ends, then the whole.
    const module = await page.evaluate(async () => {
      const { Verity } = await import('../verity.js');
      const verity = new Verity();
      const corpus = verity.createCorpus();
      await corpus.add([{ id: 'e1', text: 'The Eiffel Tower is in Paris. It opened in 1889.' }, { id: 'e2', text: 'The Louvre is a museum.' }]);
      const seen = [];
      const report = await verity.checkAnswer({ answer: 'It opened in 1889 [e1]. The Louvre is a museum.', corpus, onSentence: (s) => seen.push(s.index) });
      const refused = await verity.checkAnswer({ answer: ' ', corpus }).catch((error) => `${error.name}: ${error.message}`);
      const hidden = await verity.checkAnswer({ answer: 'It opened\u202e in 1889.', corpus }).catch((error) => [error.kind, error.message]);
      const split = await verity.checkAnswer({ answer: 'It opened in 1889 [e1]. The Louvre is a museum.', corpus, decompose: true });
      const badSplit = await verity.checkAnswer({ answer: 'It opened in 1889.', corpus, decompose: 'yes' }).catch((error) => `${error.name}: ${error.message}`);
      verity.terminate();
      return { seen, report, refused, hidden, split, badSplit };
    });
    assert.deepEqual(module.seen, [0, 1]);
    assert.equal(module.report.faithful, true);
    const [first] = module.report.sentences;
    assert.deepEqual([first.citations[0].passage, first.citations[0].quote], ['e1', 'It opened in 1889.']);
    assert.deepEqual(module.report.cited.map((item) => item.id).sort(), ['e1', 'e2']);
    assert.match(module.refused, /TypeError: checkAnswer: answer must be a non-empty string/);
    assert.equal(module.hidden[0], 'config');
    assert.match(module.hidden[1], /U\+202E/);
    // `decompose`: each sentence split first (the baseline keeps it one claim), a request more
    // a sentence; a value that is not a boolean is refused before anything is sent.
    assert.deepEqual(module.split.sentences.map((s) => s.claims.map((c) => [c.text, c.status])),
      [[['It opened in 1889.', 'supported']], [['The Louvre is a museum.', 'supported']]]);
    assert.equal(module.split.requests, module.report.requests + 2);
    assert.match(module.badSplit, /TypeError: checkAnswer: decompose must be true or false/);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('markup in the corpus and the claim is shown as text and runs nothing', async () => {
  const { page, errors, close } = await open();
  try {
    await settled(page, '#inline-check');
    await page.evaluate(() => {
      const element = document.createElement('verity-check');
      element.id = 'xss-check';
      element.setAttribute('claim', 'The tower <img src=x onerror="window.__pwned=1"> is in Paris.');
      const data = document.createElement('script');
      data.type = 'application/json';
      data.textContent = JSON.stringify([
        { id: '<b>x</b>', text: 'The tower <img src=x onerror="window.__pwned=2"> is in Paris <script>window.__pwned=3</script>.' },
      ]);
      element.append(data);
      document.querySelector('main').append(element);
    });
    const result = await settled(page, '#xss-check');
    assert.equal(result.state, 'done', result.text);
    const inert = await page.evaluate(() => {
      const root = document.querySelector('#xss-check').shadowRoot;
      return { pwned: window.__pwned ?? null, markup: root.querySelectorAll('img, script, b').length, text: root.textContent };
    });
    assert.equal(inert.pwned, null);
    assert.equal(inert.markup, 0, 'no element was made from the data');
    assert.ok(inert.text.includes('<img src=x onerror="window.__pwned=2">'), inert.text);
    assert.ok(inert.text.includes('<b>x</b>'), 'the id is shown as text');
    // A corpus on another origin is refused with a typed error event.
    const refused = await page.evaluate(() => new Promise((resolve) => {
      const element = document.createElement('verity-check');
      element.setAttribute('corpus', 'https://example.com/corpus.jsonl');
      element.setAttribute('claim', 'Anything.');
      element.addEventListener('verity-error', (event) => resolve(event.detail));
      document.querySelector('main').append(element);
    }));
    assert.equal(refused.kind, 'corpus');
    assert.match(refused.message, /origin/);
    await screenshot(page, 'embed-xss');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('the provider attribute refuses an API key (page markup every visitor reads) and sends nothing; the provider property takes one', async () => {
  const target = await recordingServer();
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const { page, errors, close } = await open();
  try {
    await settled(page, '#inline-check');
    const key = 'sk-test-in-the-markup';
    const keyed = [
      { api: 'openai', baseUrl: `${target.url}/v1`, model: 'm', apiKey: key },
      { api: 'openai', baseUrl: `${target.url}/v1`, model: 'm', headers: [['Authorization', `Bearer ${key}`]] },
      { api: 'anthropic', baseUrl: target.url, model: 'm', headers: [['X-Api-Key', key]] },
      { api: 'openai', baseUrl: `${target.url}/v1`, model: 'm', headers: [['api-key', key]] },
      { kind: 'network', config: { api: 'openai', baseUrl: `${target.url}/v1`, model: 'm', apiKey: key } },
      // Keys travel under other names too: any header not known to be public, and the query.
      { api: 'openai', baseUrl: `${target.url}/v1`, model: 'm', headers: [['x-goog-api-key', key]] },
      { api: 'openai', baseUrl: `${target.url}/v1`, model: 'm', headers: [['Cookie', `session=${key}`]] },
      { api: 'openai', baseUrl: `${target.url}/v1?key=${key}`, model: 'm' },
    ];
    const EIFFEL = [{ id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' }];
    const outcome = (provider, property) => page.evaluate(({ provider, property, corpus }) => new Promise((resolve) => {
      const element = document.createElement('verity-check');
      element.setAttribute('claim', 'The Eiffel Tower is in Paris.');
      if (property) element.provider = provider;
      else element.setAttribute('provider', JSON.stringify(provider));
      const data = document.createElement('script');
      data.type = 'application/json';
      data.textContent = JSON.stringify(corpus);
      element.append(data);
      element.addEventListener('verity-error', (event) => resolve({ error: event.detail }));
      element.addEventListener('verity-result', (event) => resolve({ report: event.detail }));
      document.querySelector('main').append(element);
    }), { provider, property, corpus: EIFFEL });
    for (const provider of keyed) {
      const { error } = await outcome(provider, false);
      assert.ok(error, JSON.stringify(provider));
      assert.equal(error.kind, 'config');
      assert.match(error.message, /the provider attribute carries an API key \((apiKey|headers: [\w-]+|baseUrl: \?key=)\)/);
      assert.match(error.message, /every visitor of this page can read/);
      assert.match(error.message, /element\.provider = |new Verity\(\{ provider \}\)/);
      assert.ok(!error.message.includes(key), 'the message does not repeat the key');
    }
    assert.deepEqual(target.requests, [], 'nothing was sent');
    await screenshot(page, 'embed-key-refused');
    // From script, through the element's provider property, a key is used.
    const { report } = await outcome({ api: 'openai', baseUrl: `${mock.url}/v1`, model: 'gpt-4o-mini', apiKey: 'sk-test-from-script' }, true);
    assert.equal(report?.assessment.verdict, 'supported');
    const journal = await (await fetch(`${mock.url}/__aimock/journal`)).json();
    const entries = Array.isArray(journal) ? journal : journal.entries ?? [];
    assert.ok(entries.length >= 1 && entries.every((entry) => entry.headers.authorization), 'the key went with the requests');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await target.close();
    mock.close();
  }
});

test('the example page is usable on a phone-width window, with no serious accessibility violations', async () => {
  const { page, errors, close } = await open({ width: 390, height: 844 });
  try {
    await settled(page, '#inline-check');
    await settled(page, '#file-check');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `no horizontal scrolling (${overflow}px too wide)`);
    await screenshot(page, 'embed-phone');
    // axe-core sees into the elements' open shadow roots.
    await page.evaluate(readFileSync(join(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8'));
    const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const bad = results.violations.filter((v) => ['serious', 'critical'].includes(v.impact));
    assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.length})`), []);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('verity.js takes the model in the tab: its worker asks the page, which loads the model (here a missing one) and says why it cannot', async () => {
  const models = await recordingServer();
  const { page, errors, close } = await open();
  try {
    const failure = await page.evaluate(async (url) => {
      const { Verity } = await import('/verity.js');
      const verity = new Verity({ provider: { api: 'openai', baseUrl: 'in-tab:', model: url, output: 'json-schema' } });
      const corpus = verity.createCorpus();
      await corpus.add([{ id: 'e1', text: 'The Eiffel Tower is in Paris.' }]);
      try {
        await verity.checkClaim({ claim: 'The Eiffel Tower is in Paris.', corpus });
        return null;
      } catch (error) {
        return { kind: error.kind, message: error.message };
      } finally {
        verity.terminate();
      }
    }, `${models.url}/missing.gguf`);
    assert.ok(failure, 'the check cannot succeed without its model');
    assert.match(failure.message, /could not be loaded in this tab: downloading the model .*missing\.gguf failed: HTTP 404/, failure.message);
    assert.deepEqual(models.requests.map((request) => `${request.method} ${request.url}`), ['GET /missing.gguf'],
      'the page fetched the model once: a model that cannot load is not asked for again');
    assert.deepEqual(errors.filter((error) => !error.includes('404')), []);
  } finally {
    await close();
    await models.close();
  }
});
