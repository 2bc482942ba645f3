// What the worker finds in IndexedDB at start, written there before the app loads: results of
// the first layout (all in one record) and records of the current one, among them ones that
// cannot be read and one of an older shape. The readable ones show; the unreadable ones are
// skipped, named in a notice, and left as they were; the older ones are moved to the current
// shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, browser, screenshot, seedDatabase, silentServer, waitUntil, TOWERS } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

/** A result as the worker saves it: a report with `verdict`. */
function result(checkId, claim, verdict) {
  return {
    id: checkId, claim, cited: [{ id: 'e1', text: 'The storage migration finished in March.' }],
    outcome: { status: 'report', report: {
      claim, route: 'single call', summary: `The corpus says the claim is ${verdict}.`, requests: 1,
      assessment: { verdict, confidence: 0.9, citations: ['The storage migration finished in March.'] },
      usage: { input: 10, output: 5, cache_read: 0, cost: 0 },
    } },
  };
}

const CORPUS = JSON.stringify([{ id: 'e1', text: 'The storage migration finished in March.' }]);

/** The stored records of `store`, as { key: value }. */
async function records(page, store) {
  return page.evaluate(async (store) => {
    const db = await new Promise((done, fail) => {
      const request = indexedDB.open('verity');
      request.onsuccess = () => done(request.result);
      request.onerror = () => fail(request.error);
    });
    const tx = db.transaction([store], 'readonly');
    const object = tx.objectStore(store);
    const [keys, values] = await Promise.all([object.getAllKeys(), object.getAll()].map((request) =>
      new Promise((done) => { request.onsuccess = () => done(request.result); })));
    db.close();
    return Object.fromEntries(keys.map((key, i) => [key, values[i]]));
  }, store);
}

async function openApp(page) {
  await page.goto(site.url);
  await page.locator('.engine-ready').waitFor({ timeout: 60000 });
}

test('results of the first layout are moved to a record each; an unreadable one is kept and named', async () => {
  const session = await browser();
  const { page, errors, close } = session;
  try {
    const blob = JSON.stringify([
      result('r1', 'The migration finished in March.', 'supported'),
      { id: 'broken', claim: 42 },
      result('r2', 'The migration finished in May.', 'contradicted'),
    ]);
    await seedDatabase(session, site, 1, ['kv', 'sessions'], `(tx) => {
      tx.objectStore('kv').put(${JSON.stringify(CORPUS)}, 'corpus');
      tx.objectStore('kv').put(${JSON.stringify(blob)}, 'results');
    }`);
    await openApp(page);
    await page.locator(id('check-2')).locator(id('verdict')).waitFor({ timeout: 10000 });
    assert.match(await page.locator(id('check-1')).locator(id('verdict')).innerText(), /supported/i);
    assert.match(await page.locator(id('check-2')).locator(id('verdict')).innerText(), /contradicted/i);
    assert.match(await page.locator(id('corpus-count')).innerText(), /1 item/);
    const notice = page.locator(id('notice')).filter({ hasText: 'could not be read' });
    await notice.waitFor();
    assert.match(await notice.innerText(), /result broken/);
    await screenshot(page, 'storage-first-layout');
    const stored = await records(page, 'results');
    assert.deepEqual(Object.keys(stored).sort(), ['broken', 'r1', 'r2']);
    assert.equal(JSON.parse(stored.r1).version, 2);
    assert.deepEqual(JSON.parse(stored.broken), { id: 'broken', claim: 42 }, 'kept as it was');
    assert.equal((await records(page, 'kv')).results, undefined, 'the one record for all is gone');
    // After a reload, the same two results, in the same order.
    await page.reload();
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.locator(id('check-2')).locator(id('verdict')).waitFor({ timeout: 10000 });
    assert.match(await page.locator(id('check-1')).innerText(), /finished in March/);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('a corrupt record and one of an older shape among good ones: the good ones show, the older one is moved', async () => {
  const session = await browser();
  const { page, errors, close } = session;
  try {
    const current = JSON.stringify({ version: 2, order: 0, result: result('r1', 'The migration finished in March.', 'supported') });
    const older = JSON.stringify(result('r2', 'The migration finished in May.', 'contradicted'));
    const newer = JSON.stringify({ version: 99, order: 5, result: { anything: true } });
    await seedDatabase(session, site, 2, ['kv', 'sessions', 'results'], `(tx) => {
      tx.objectStore('kv').put('{"not": "passages"', 'corpus');
      tx.objectStore('results').put(${JSON.stringify(current)}, 'r1');
      tx.objectStore('results').put(${JSON.stringify(older)}, 'r2');
      tx.objectStore('results').put('{"version": 2, "order": 1, "resu', 'r3');
      tx.objectStore('results').put(${JSON.stringify(newer)}, 'r4');
    }`);
    await openApp(page);
    await page.locator(id('check-2')).locator(id('verdict')).waitFor({ timeout: 10000 });
    assert.match(await page.locator(id('check-1')).locator(id('verdict')).innerText(), /supported/i);
    assert.match(await page.locator(id('check-2')).locator(id('verdict')).innerText(), /contradicted/i);
    assert.equal(await page.locator('[data-testid^="check-"][data-check-id]').count(), 2);
    const notice = page.locator(id('notice')).filter({ hasText: 'could not be read' });
    await notice.waitFor();
    const text = await notice.innerText();
    assert.match(text, /result r3/);
    assert.match(text, /result r4 \(it was written by a newer version/);
    assert.match(text, /the corpus/);
    await screenshot(page, 'storage-unreadable-records');
    const stored = await records(page, 'results');
    assert.equal(JSON.parse(stored.r2).version, 2, 'the older shape was moved to the current one');
    assert.equal(JSON.parse(stored.r2).result.claim, 'The migration finished in May.');
    assert.equal(stored.r3, '{"version": 2, "order": 1, "resu', 'the unreadable record is left as it was');
    assert.equal(stored.r4, newer);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

/** 20,000 passages stored as the first layout kept a corpus (one record in `kv`), then the app
 * opened and showing them all; resolves to the passages. */
async function openWithOneRecordCorpus(session) {
  const passages = Array.from({ length: 20000 }, (_, i) => ({ id: `p${i}`, text: `Passage number ${i} of the stored corpus.` }));
  await seedDatabase(session, site, 2, ['kv', 'sessions', 'results'], `(tx) => {
    tx.objectStore('kv').put(${JSON.stringify(JSON.stringify(passages))}, 'corpus');
  }`);
  await openApp(session.page);
  await session.page.locator(id('corpus-count')).filter({ hasText: '20,000 items' }).waitFor({ timeout: 10000 });
  return passages;
}

test('a corpus of the one-record layout is moved to parts; a remove rewrites only its part, and a reload restores it', async () => {
  const session = await browser();
  const { page, errors, close } = session;
  try {
    const passages = await openWithOneRecordCorpus(session);
    const kv = await records(page, 'kv');
    assert.equal(kv.corpus, undefined, 'the one record is gone');
    const order = JSON.parse(kv['corpus-order']);
    assert.equal(order.version, 1);
    assert.ok(order.parts.length >= 2, `${order.parts.length} parts`);
    const parts = await records(page, 'corpus');
    assert.deepEqual(Object.keys(parts).sort(), [...order.parts].sort());
    assert.deepEqual(order.parts.flatMap((key) => JSON.parse(parts[key])), passages, 'every passage, in order');

    await page.click(`${id('corpus-remove')}[aria-label="Remove p1"]`);
    await page.locator(id('corpus-count')).filter({ hasText: '19,999 items' }).waitFor({ timeout: 10000 });
    let after;
    for (let tries = 0; tries < 50; tries++) {
      after = JSON.parse((await records(page, 'kv'))['corpus-order']);
      if (after.parts[0] !== order.parts[0]) break;
      await page.waitForTimeout(100);
    }
    const partsAfter = await records(page, 'corpus');
    assert.notEqual(after.parts[0], order.parts[0], 'the first part was rewritten');
    assert.deepEqual(after.parts.slice(1), order.parts.slice(1), 'the other parts were kept');
    assert.deepEqual(Object.keys(partsAfter).sort(), [...after.parts].sort(), 'the old first part is deleted');
    for (const key of after.parts.slice(1)) assert.equal(partsAfter[key], parts[key]);
    assert.ok(!partsAfter[after.parts[0]].includes('"p1"'));

    await page.reload();
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.locator(id('corpus-count')).filter({ hasText: '19,999 items' }).waitFor({ timeout: 10000 });
    await page.locator(id('corpus-search')).fill('p19999');
    await page.locator(id('corpus-table')).filter({ hasText: 'Passage number 19999 of' }).waitFor({ timeout: 10000 });
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('an unreadable order of the corpus parts loses nothing: every part is restored, kept in storage, and the notice says so', async () => {
  const session = await browser();
  const { page, errors, close } = session;
  try {
    await openWithOneRecordCorpus(session);
    const parts = await records(page, 'corpus');
    assert.ok(Object.keys(parts).length >= 2);
    // The order record is damaged (a torn write, an edit, another program).
    await page.evaluate(async () => {
      const db = await new Promise((done, fail) => {
        const request = indexedDB.open('verity');
        request.onsuccess = () => done(request.result);
        request.onerror = () => fail(request.error);
      });
      const tx = db.transaction(['kv'], 'readwrite');
      tx.objectStore('kv').put('{"version": 1, "parts": [', 'corpus-order');
      await new Promise((done) => { tx.oncomplete = done; });
      db.close();
    });
    for (let start = 0; start < 2; start++) {
      await page.reload();
      await page.locator('.engine-ready').waitFor({ timeout: 60000 });
      await page.locator(id('corpus-count')).filter({ hasText: '20,000 items' }).waitFor({ timeout: 10000 });
      const notice = page.locator(id('notice')).filter({ hasText: 'could not be read' });
      if (start === 0) {
        await notice.waitFor();
        assert.match(await notice.innerText(), /order of the corpus/);
        assert.match(await notice.innerText(), /restored from its \d+ stored parts/);
        await screenshot(page, 'storage-unreadable-corpus-order');
      }
      assert.deepEqual(await records(page, 'corpus'), parts, 'every part is kept as it was');
      assert.equal(await page.locator(id('notice')).filter({ hasText: 'failed' }).count(), 0, 'no write failed');
    }
    // A change writes a readable order again: the next start reads it, without a notice.
    await page.click(`${id('corpus-remove')}[aria-label="Remove p1"]`);
    await page.locator(id('corpus-count')).filter({ hasText: '19,999 items' }).waitFor({ timeout: 10000 });
    await page.locator(id('corpus-stored')).filter({ hasText: /^saved$/ }).waitFor({ timeout: 20000 });
    await page.reload();
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.locator(id('corpus-count')).filter({ hasText: '19,999 items' }).waitFor({ timeout: 10000 });
    assert.equal(await page.locator(id('notice')).filter({ hasText: 'could not be read' }).count(), 0);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('a newer version of the app opening the database is not blocked by this one, which says to reload and goes on in memory', async () => {
  const { page, errors, close } = await browser();
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    // What a newer version's upgrade does first: open the database at a higher version.
    const outcome = await page.evaluate(() => new Promise((done) => {
      const request = indexedDB.open('verity', 99);
      request.onblocked = () => done('blocked');
      request.onsuccess = () => { request.result.close(); done('opened'); };
      request.onerror = () => done(`error ${request.error?.name}`);
    }));
    assert.equal(outcome, 'opened', 'the engine closed its connection instead of blocking the upgrade');
    const notice = page.locator(id('notice')).filter({ hasText: 'newer version' });
    await notice.waitFor();
    assert.match(await notice.innerText(), /reload this tab/);
    // This tab goes on, in memory: a corpus and a check, which ends with its verdict.
    await page.setInputFiles(id('corpus-file-input'), { name: 'notes.jsonl', mimeType: 'text/plain',
      buffer: Buffer.from(JSON.stringify({ id: 'e1', text: 'The storage migration finished in March.' })) });
    await page.locator(id('corpus-count')).filter({ hasText: '1 item' }).waitFor();
    // The corpus says it is not saved (not "saving…" until the reload).
    await page.locator(id('corpus-stored')).filter({ hasText: /^not saved/ }).waitFor({ timeout: 10000 });
    await page.fill(id('claims-input'), 'The storage migration finished in March.');
    await page.click(id('run'));
    await page.locator(id('check-1')).locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await page.locator(id('check-1')).locator(id('verdict')).innerText(), /supported/i);
    // Its result says it is not saved (it was silently not written before).
    await page.locator(id('check-1')).locator(id('not-saved')).waitFor({ timeout: 10000 });
    const unsaved = page.locator(id('notice')).filter({ hasText: 'The result of' });
    assert.match(await unsaved.innerText(), /not saved: a newer version of this app/);
    await screenshot(page, 'storage-newer-version-not-saved');
    assert.equal(await page.locator(id('notice')).filter({ hasText: 'failed' }).count(), 0, 'no write was tried');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('leaving before the list of checks to run is saved is warned of; once it is saved, every check comes back with the app', async () => {
  const provider = await silentServer();
  const { context, page, errors, dialogs, close } = await browser();
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.setInputFiles(id('corpus-file-input'), { name: 'towers.jsonl', mimeType: 'text/plain', buffer: Buffer.from(TOWERS) });
    await page.locator(id('corpus-stored')).filter({ hasText: /^saved$/ }).waitFor({ timeout: 10000 });
    await page.selectOption(id('provider-kind'), 'openai');
    await page.selectOption(id('provider-preset'), 'custom');
    await page.fill(id('provider-base-url'), `${provider.url}/v1`);
    await page.fill(id('provider-model'), 'gpt-4o-mini');
    // Another tab of the site holds a write on the store where the list of checks to run is
    // kept: IndexedDB runs the engine's write of that list after it (the disk is slow).
    const locker = await context.newPage();
    await locker.goto(`${site.url}not-the-app`);
    await locker.evaluate(() => new Promise((locked, fail) => {
      const open = indexedDB.open('verity');
      open.onerror = () => fail(open.error);
      open.onsuccess = () => {
        const store = open.result.transaction('kv', 'readwrite').objectStore('kv');
        const spin = () => { if (!window.releaseLock) store.get('nothing').onsuccess = spin; };
        spin();
        locked();
      };
    }));
    const cards = (tab) => tab.locator('[data-testid^="check-"][data-check-id]');
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.\nTokyo Tower is in Minato.\nThe Louvre is a museum.');
    await page.click(id('run'));
    await cards(page).nth(2).waitFor();
    await page.locator(id('check-saving')).first().waitFor({ timeout: 10000 });
    await screenshot(page, 'queue-saving');
    // Closing the tab now would lose the checks not started: the browser asks first (the test's
    // person leaves anyway).
    await page.close({ runBeforeUnload: true });
    await waitUntil(() => page.isClosed(), 'the tab closes', 10000);
    assert.deepEqual(dialogs, ['beforeunload'], 'the browser asked before leaving');
    await locker.evaluate(() => { window.releaseLock = true; });
    // Once the list is saved, leaving asks nothing, and the checks come back with the app.
    const again = await context.newPage();
    await again.goto(site.url);
    await again.locator('.engine-ready').waitFor({ timeout: 60000 });
    const before = await cards(again).count();
    await again.fill(id('claims-input'), 'Big Ben is in London.\nThe Shard is in London.\nThe Atomium is in Brussels.');
    await again.click(id('run'));
    await cards(again).nth(before + 2).waitFor();
    await again.locator(id('check-saving')).first().waitFor({ state: 'detached', timeout: 10000 });
    await again.close({ runBeforeUnload: true });
    await waitUntil(() => again.isClosed(), 'the tab closes', 10000);
    assert.deepEqual(dialogs, ['beforeunload'], 'nothing asked the second time');
    const reopened = await context.newPage();
    await reopened.goto(site.url);
    await reopened.locator('.engine-ready').waitFor({ timeout: 60000 });
    for (const claim of ['Big Ben', 'The Shard', 'The Atomium']) {
      await cards(reopened).filter({ hasText: claim }).waitFor({ timeout: 10000 });
    }
    // The locker's page is not the app: the site answers it 404.
    assert.deepEqual(errors.filter((error) => !/status of 404/.test(error)), []);
  } finally {
    await close();
    await provider.close();
  }
});

