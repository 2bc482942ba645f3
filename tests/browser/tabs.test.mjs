// Two tabs of one origin (two pages of one browser profile) share one engine: a check runs
// once, whatever tab is opened or closed, every tab shows the same live state, and neither
// overwrites the other's corpus or results.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { serve, browser, screenshot, aimock, countingProxy, waitUntil, ROOT } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

async function ready(page) {
  await page.locator('.engine-ready').waitFor({ timeout: 60000 });
}

async function upload(page, name, text) {
  await page.setInputFiles(id('corpus-file-input'), { name, mimeType: 'text/plain', buffer: Buffer.from(text) });
}

const EIFFEL = [
  { id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' },
  { id: 'louvre', text: "The Louvre is the world's most-visited art museum." },
  { id: 'tokyo', text: 'Tokyo Tower is a communications and observation tower in Minato.' },
].map((item) => JSON.stringify(item)).join('\n');

const CLAIM = 'The Eiffel Tower is in Paris.';

/** Uploads the towers corpus in `page` and points its provider at the mock behind `proxy`. */
async function towersAgainst(page, proxy) {
  await upload(page, 'towers.jsonl', EIFFEL);
  await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
  await page.selectOption(id('provider-kind'), 'openai');
  await page.selectOption(id('provider-preset'), 'custom');
  await page.fill(id('provider-base-url'), `${proxy.url}/v1`);
  await page.fill(id('provider-model'), 'gpt-4o-mini');
}

/** A browser profile; without `shared`, one whose pages have no SharedWorker (as on Chrome for
 * Android): the engine is then the Web Lock leader's, reached over a BroadcastChannel. */
async function profile({ shared }) {
  const session = await browser();
  if (!shared) await session.context.addInitScript(() => { delete globalThis.SharedWorker; });
  return session;
}

for (const shared of [true, false]) {
  const how = shared ? 'a shared worker' : 'no shared worker: a Web Lock leader';
  test(`two tabs run a check once (${how}): the second shows it live, and after both close one result is left, at most the in-flight request repeated, the corpus intact`, () => twoTabsOneCheck({ shared }));
  test(`a corpus change and a result in one tab show in the other, and neither tab overwrites the other's (${how})`, () => twoTabsOneCorpus({ shared }));
}

test('without shared workers, when the leader tab closes mid-check another tab takes the engine over and the check ends there once', async () => {
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'), ['--chaos-latency', '3000']);
  const proxy = await countingProxy(mock.url);
  const { context, page: first, errors, close } = await profile({ shared: false });
  try {
    await first.goto(site.url);
    await ready(first);
    await towersAgainst(first, proxy);
    const second = await context.newPage();
    await second.goto(site.url);
    await ready(second);
    await first.fill(id('claims-input'), CLAIM);
    await first.click(id('run'));
    // The follower shows the check the leader runs, then the leader's tab closes.
    await second.locator(id('check-1')).locator(id('check-stage')).filter({ hasText: 'Writing the summary' })
      .waitFor({ timeout: 30000 });
    await first.close();
    await second.locator(id('verdict')).first().waitFor({ timeout: 30000 });
    assert.match(await second.locator(id('verdict')).innerText(), /supported/i);
    assert.equal(await second.locator('[data-testid^="check-"][data-check-id]').count(), 1, 'one card');
    const assessments = proxy.bodies.filter((body) => body.includes('Record your assessment'));
    assert.equal(assessments.length, 1, 'the recorded assessment is not asked for again');
    const summaries = proxy.bodies.length - assessments.length;
    assert.ok(summaries === 1 || summaries === 2, `${summaries} summary requests`);
    await second.reload();
    await ready(second);
    await second.locator(id('verdict')).first().waitFor({ timeout: 10000 });
    assert.equal(await second.locator('[data-testid^="check-"][data-check-id]').count(), 1, 'one result kept');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await proxy.close();
    mock.close();
  }
});

test('a large corpus is shown "saving…" while it is written, leaving then is warned of, and searching postpones its save by at most 2 s', async () => {
  const { page, dialogs, errors, close } = await profile({ shared: true });
  try {
    await page.goto(site.url);
    await ready(page);
    // About 1.2 MB: parts of this size yield to the table's search before they are written.
    const lines = [];
    for (let i = 0; i < 3000; i += 1) {
      lines.push(JSON.stringify({ id: `big-${i}`, text: `Passage ${i} about rivers, ferries and towers. `.repeat(8) }));
    }
    // Someone types in the search while the corpus is added and keeps typing: every 100 ms,
    // a new query.
    let stopTyping = typeSearches(page, 'river');
    await upload(page, 'big.jsonl', lines.join('\n'));
    await page.locator(id('corpus-count')).filter({ hasText: '3,000 items' }).waitFor({ timeout: 30000 });
    await page.locator(id('corpus-stored')).filter({ hasText: 'saving…' }).waitFor({ timeout: 5000 });
    // Leaving now is warned of (the browser asks; a person may stay).
    await page.evaluate(() => { location.reload(); }).catch(() => {});
    await waitUntil(() => dialogs.includes('beforeunload'), 'the page asked before it was left', 5000);
    await ready(page);
    await page.locator(id('corpus-count')).filter({ hasText: /items/ }).waitFor();
    await stopTyping();
    // Reloaded mid-save: the engine (a shared worker, the tab its only client) went with the
    // page, so the corpus is what storage had. Add it again with the search being typed in,
    // and the save still ends while the typing goes on, within the bound.
    stopTyping = typeSearches(page, 'tower');
    await upload(page, 'big.jsonl', lines.join('\n'));
    await page.locator(id('corpus-count')).filter({ hasText: '3,000 items' }).waitFor({ timeout: 30000 });
    const started = Date.now();
    await page.locator(id('corpus-stored')).filter({ hasText: /^saved$/ }).waitFor({ timeout: 30000 });
    const took = Date.now() - started;
    await stopTyping();
    console.log(`A 1.2 MB corpus saved ${took} ms after it was shown, with a search typed every 100 ms all along`);
    await screenshot(page, 'corpus-saved-while-searching');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

async function twoTabsOneCheck({ shared }) {
  const how = shared ? 'a shared worker' : 'a Web Lock leader';
  // Every answer takes 5 s: the second tab opens during the assessment, both close during
  // the summary.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'), ['--chaos-latency', '5000']);
  const proxy = await countingProxy(mock.url);
  const { context, page: first, errors, close } = await profile({ shared });
  try {
    await first.goto(site.url);
    await ready(first);
    assert.equal(await first.evaluate(() => typeof SharedWorker === 'function'), shared);
    await towersAgainst(first, proxy);
    await first.fill(id('claims-input'), CLAIM);
    await first.click(id('run'));
    await waitUntil(() => proxy.bodies.length === 1, 'the assessment was asked for', 30000);

    // The second tab, mid-check: the same card, running, and then the same progress.
    const second = await context.newPage();
    await second.goto(site.url);
    await ready(second);
    const cards = second.locator('[data-testid^="check-"][data-check-id]');
    await cards.filter({ hasText: CLAIM }).first().waitFor({ timeout: 10000 });
    assert.equal(await cards.count(), 1, 'the second tab shows the first tab\'s check');
    assert.equal(await second.locator(id('verdict')).count(), 0, 'and shows it running, not finished');
    assert.match(await second.locator(id('corpus-count')).innerText(), /3/, 'and the corpus');
    for (const page of [first, second]) {
      await page.locator(id('check-1')).locator(id('check-stage')).filter({ hasText: 'Writing the summary' })
        .waitFor({ timeout: 30000 });
    }
    // The stage is shown as the summary is asked for: its request may arrive a moment later.
    await waitUntil(() => proxy.bodies.length >= 2, 'the summary was asked for', 30000);
    assert.equal(proxy.bodies.length, 2, `one assessment and one summary asked for, not ${proxy.bodies.length}`);
    const name = shared ? 'tabs' : 'tabs-no-shared-worker';
    await screenshot(first, `${name}-first-mid-check`);
    await screenshot(second, `${name}-second-mid-check`);
    assert.equal(await first.locator(id('verdict')).count() + await second.locator(id('verdict')).count(), 0,
      'the summary is still in flight');

    // Both tabs close during the summary (the second first: without shared workers the first
    // one's tab runs the engine, which would otherwise move to the second); one is opened again.
    await second.close();
    await first.close();
    const again = await context.newPage();
    await again.goto(site.url);
    await ready(again);
    const card = again.locator('[data-testid^="check-"][data-check-id]');
    await again.locator(id('verdict')).first().waitFor({ timeout: 30000 });
    assert.equal(await card.count(), 1, 'one card');
    assert.match(await again.locator(id('verdict')).innerText(), /supported/i);
    assert.match(await again.locator(id('corpus-count')).innerText(), /3/, 'the corpus is intact');
    const assessments = proxy.bodies.filter((body) => body.includes('Record your assessment'));
    assert.equal(assessments.length, 1, `the recorded assessment was asked for ${assessments.length} times`);
    const summaries = proxy.bodies.length - assessments.length;
    assert.ok(summaries === 1 || summaries === 2, `${summaries} summary requests: at most the one in flight is repeated`);
    console.log(`Two tabs (${how}), both closed mid-check, one reopened: ${proxy.bodies.length} model requests at the server `
      + `(${assessments.length} assessment, ${summaries} summary) for 1 check`);
    // A later visit has the same one result.
    await again.reload();
    await ready(again);
    await again.locator(id('verdict')).first().waitFor({ timeout: 10000 });
    assert.equal(await card.count(), 1, 'one card after a reload');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await proxy.close();
    mock.close();
  }
}

async function twoTabsOneCorpus({ shared }) {
  const { context, page: first, errors, close } = await profile({ shared });
  try {
    await first.goto(site.url);
    await ready(first);
    const second = await context.newPage();
    await second.goto(site.url);
    await ready(second);
    await upload(first, 'towers.jsonl', EIFFEL);
    await second.locator(id('corpus-count')).filter({ hasText: '3 items' }).waitFor({ timeout: 10000 });
    await upload(second, 'more.jsonl', JSON.stringify({ id: 'colosseum', text: 'The Colosseum is an amphitheatre in Rome.' }));
    await first.locator(id('corpus-count')).filter({ hasText: '4 items' }).waitFor({ timeout: 10000 });
    await first.locator(id('corpus-table')).filter({ hasText: 'colosseum' }).waitFor({ timeout: 10000 });
    await first.click(`${id('corpus-remove')}[aria-label="Remove louvre"]`);
    await second.locator(id('corpus-count')).filter({ hasText: '3 items' }).waitFor({ timeout: 10000 });
    // A check in the second tab (offline, quick) ends in both.
    await second.fill(id('claims-input'), CLAIM);
    await second.click(id('run'));
    for (const page of [first, second]) {
      await page.locator(id('verdict')).first().waitFor({ timeout: 30000 });
      // What a person sees before closing the last tab: the corpus is saved (a change is
      // written at once, not after the pages stop listing its items).
      await page.locator(id('corpus-stored')).filter({ hasText: /^saved$/ }).waitFor({ timeout: 10000 });
    }
    await first.close();
    await second.reload();
    await ready(second);
    await second.locator(id('corpus-count')).filter({ hasText: '3 items' }).waitFor({ timeout: 10000 });
    // The count comes with the engine's first message, the rows with the page of items asked
    // for next: the table is read once they are there.
    const rows = second.locator(id('corpus-table')).locator('tbody tr');
    await rows.filter({ hasText: 'colosseum' }).waitFor({ timeout: 10000 });
    assert.equal(await rows.count(), 3, 'three rows');
    assert.doesNotMatch(await second.locator(id('corpus-table')).innerText(), /louvre/);
    assert.match(await second.locator(id('corpus-stored')).innerText(), /^saved$/);
    await second.locator(id('verdict')).first().waitFor({ timeout: 10000 });
    assert.equal(await second.locator('[data-testid^="check-"][data-check-id]').count(), 1, 'one result');
    // Results cleared in one tab are gone from the other too.
    const third = await context.newPage();
    await third.goto(site.url);
    await ready(third);
    await third.locator(id('verdict')).first().waitFor({ timeout: 10000 });
    await second.click(id('clear-results'));
    await third.locator('[data-testid^="check-"][data-check-id]').first().waitFor({ state: 'detached', timeout: 10000 });
    assert.equal(await third.locator('[data-testid^="check-"][data-check-id]').count(), 0, 'cleared in the other tab');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
}

/** Types a new search (`word` and a number) into `page`'s corpus search every 100 ms until the
 * function it returns is called; that function resolves once the typing has stopped. Typing
 * that fails (the page closed when the test failed) stops, and never hides the test's own
 * failure as an unhandled rejection. */
function typeSearches(page, word) {
  let typing = true;
  const typist = (async () => {
    for (let i = 0; typing; i += 1) {
      await page.fill(id('corpus-search'), `${word}${i % 2 ? 's' : ''} ${i}`);
      await new Promise((done) => setTimeout(done, 100));
    }
  })().catch(() => {});
  return async () => {
    typing = false;
    await typist;
  };
}

