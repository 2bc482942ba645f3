// A full disk: with the origin's quota set below what it uses (Chromium's
// Storage.overrideQuotaForOrigin), every write to IndexedDB fails with QuotaExceededError. A
// check still runs to its verdict (its session kept in memory), its result is shown with "not
// saved" and what to free, never "cancelled". And the page asks for persistent storage.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { serve, browser, screenshot, aimock, countingProxy, waitUntil, ROOT, TOWERS } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

/** Chromium's grace period before it closes an origin's IndexedDB files, with a margin. */
const BACKING_STORE_GRACE_MS = 2500;

const CORPUS = [
  { id: 'e1', text: 'The storage migration finished in March without data loss.' },
  { id: 'e2', text: 'Quarterly revenue grew four percent.' },
].map((item) => JSON.stringify(item)).join('\n');

test('with the disk full, a check ends with its verdict, shown as not saved; the page asks to persist storage', async () => {
  const { context, page: first, errors, close } = await browser();
  try {
    await context.addInitScript(() => {
      // Counts the page's requests for persistent storage (the browser decides; headless
      // Chromium mostly says no).
      if (!navigator.storage) return; // about:blank, before a new page's first navigation
      const persist = navigator.storage.persist.bind(navigator.storage);
      window.persistAsked = 0;
      navigator.storage.persist = () => { window.persistAsked += 1; return persist(); };
    });
    await first.goto(site.url);
    await first.locator('.engine-ready').waitFor({ timeout: 60000 });
    assert.ok(await first.evaluate(() => window.persistAsked) >= 1, 'the page asked for persistent storage');
    // The page shows what its storage uses and may use.
    const storage = first.locator(id('storage'));
    await storage.filter({ hasText: 'used of' }).waitFor({ timeout: 10000 });
    assert.match(await storage.innerText(), /^Storage: \d+(\.\d)? (KB|MB|GB) used of the \d+(\.\d)? (KB|MB|GB) this browser allows this page; the browser (keeps it|may clear it)/);
    await first.setInputFiles(id('corpus-file-input'), { name: 'notes.jsonl', mimeType: 'text/plain', buffer: Buffer.from(CORPUS) });
    await first.locator(id('corpus-count')).filter({ hasText: '2' }).waitFor();
    // The quota applies to storage opened after it is set: the app's tab is closed (the engine
    // and its database with it), the quota set below what the origin uses, the app opened again.
    const { other: page, cdp } = await closeTheApp(context, first);
    errors.splice(0);
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: site.url.replace(/\/$/, ''), quotaSize: 1 });
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await page.locator(id('corpus-count')).filter({ hasText: '2' }).waitFor();
    await page.fill(id('claims-input'), 'The storage migration finished in March without data loss.');
    await page.click(id('run'));
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    assert.match(await card.locator(id('verdict')).innerText(), /supported/i);
    await card.locator(id('not-saved')).waitFor({ timeout: 10000 });
    assert.match(await card.locator(id('not-saved')).innerText(), /not saved/i);
    const notices = page.locator(id('notice')).filter({ hasText: 'not saved' });
    await notices.filter({ hasText: 'The result of' }).waitFor();
    assert.match(await notices.filter({ hasText: 'The result of' }).innerText(), /storage for the page is full/);
    // Each record's notice once, not at every write while the disk stays full.
    assert.equal(await notices.filter({ hasText: 'The list of checks' }).count(), 1);
    // The storage line says it is full and what to free.
    await page.locator(id('storage')).filter({ hasText: 'refused the last save' }).waitFor({ timeout: 10000 });
    assert.match(await page.locator(id('storage')).innerText(), /Export the ones you want to keep/);
    await screenshot(page, 'quota-not-saved');
    // A tab opened now shows the result marked "not saved" too.
    const later = await context.newPage();
    await later.goto(site.url);
    await later.locator('.engine-ready').waitFor({ timeout: 60000 });
    await later.locator(id('check-1')).locator(id('not-saved')).waitFor({ timeout: 10000 });
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

/** Closes `page`, the last tab of the app in `context`, and waits until its engine (a shared
 * worker) is gone and Chromium has let go of the origin's IndexedDB files; returns the page of
 * the same origin left open (not the app) and its CDP session. */
async function closeTheApp(context, page) {
  const other = await context.newPage();
  await other.goto(`${site.url}not-the-app`);
  await page.close();
  const cdp = await context.newCDPSession(other);
  for (let i = 0; ; i++) {
    const { targetInfos } = await cdp.send('Target.getTargets');
    if (!targetInfos.some((target) => target.type === 'shared_worker')) break;
    assert.ok(i < 300, 'the engine outlived its last tab');
    await other.waitForTimeout(50);
  }
  await other.waitForTimeout(BACKING_STORE_GRACE_MS);
  return { other, cdp };
}

/** Fills the origin's storage from `page` (a database of its own, `filler`, written until
 * IndexedDB refuses even half a kilobyte); resolves to the bytes written. */
function fillDisk(page) {
  return page.evaluate(async () => {
    const db = await new Promise((done, fail) => {
      const open = indexedDB.open('filler', 1);
      open.onupgradeneeded = () => open.result.createObjectStore('f');
      open.onsuccess = () => done(open.result);
      open.onerror = () => fail(open.error);
    });
    let written = 0;
    let key = 0;
    for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 9]) {
      for (;;) {
        // Random bytes: IndexedDB's compression cannot shrink them.
        const bytes = new Uint8Array(size);
        for (let at = 0; at < size; at += 65536) crypto.getRandomValues(bytes.subarray(at, at + 65536));
        const landed = await new Promise((done) => {
          const tx = db.transaction('f', 'readwrite');
          tx.objectStore('f').put(bytes, key++);
          tx.oncomplete = () => done(true);
          tx.onabort = () => done(false);
        });
        if (!landed) break;
        written += size;
      }
    }
    db.close();
    return written;
  });
}

/** Frees what `fillDisk` wrote. */
function freeDisk(page) {
  return page.evaluate(() => new Promise((done, fail) => {
    const request = indexedDB.deleteDatabase('filler');
    request.onsuccess = () => done();
    request.onerror = () => fail(request.error);
    request.onblocked = () => fail(new Error('the filler database is still open'));
  }));
}

/** The app in a fresh context with its corpus saved, then opened again under a quota of what it
 * used plus 2 MB (a quota applies to storage opened after it is set), with `provider` as a custom
 * OpenAI endpoint. */
async function appUnderQuota(provider) {
  const opened = await browser();
  const { context, page: first } = opened;
  await first.goto(site.url);
  await first.locator('.engine-ready').waitFor({ timeout: 60000 });
  await first.setInputFiles(id('corpus-file-input'), { name: 'towers.jsonl', mimeType: 'text/plain', buffer: Buffer.from(TOWERS) });
  await first.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
  await first.locator(id("corpus-stored")).filter({ hasText: /^saved$/ }).waitFor({ timeout: 10000 });
  const usage = await first.evaluate(async () => (await navigator.storage.estimate()).usage);
  const { other, cdp } = await closeTheApp(context, first);
  await cdp.send('Storage.overrideQuotaForOrigin', { origin: site.url.replace(/\/$/, ''), quotaSize: usage + 2 * 1024 * 1024 });
  await other.goto(site.url);
  await other.locator('.engine-ready').waitFor({ timeout: 60000 });
  await other.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
  await other.selectOption(id('provider-kind'), 'openai');
  await other.selectOption(id('provider-preset'), 'custom');
  await other.fill(id('provider-base-url'), `${provider.url}/v1`);
  await other.fill(id('provider-model'), 'gpt-4o-mini');
  return { ...opened, page: other };
}

test('a check that ends while the disk is full is not resumed, nor paid again, once every tab has closed', async () => {
  // The assessment is answered while the disk has room (its response saved in the session); the
  // disk fills; then the summary is answered: the check ends with its verdict, nothing of it
  // saved.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim.json'));
  const provider = await countingProxy(mock.url, { answered: 1 });
  const { context, page, close } = await appUnderQuota(provider);
  try {
    await page.fill(id('claims-input'), 'The Eiffel Tower is in Paris.');
    await page.click(id('run'));
    await waitUntil(() => provider.held() === 1, 'the summary is asked');
    assert.ok(await fillDisk(page) > 0, 'the filler wrote something');
    provider.release();
    const card = page.locator(id('check-1'));
    await card.locator(id('verdict')).waitFor({ timeout: 30000 });
    await card.locator(id('not-saved')).waitFor({ timeout: 10000 });
    // Every tab closes; the person frees space and opens the app again.
    const { other } = await closeTheApp(context, page);
    await freeDisk(other);
    provider.release(10);
    await other.goto(site.url);
    await other.locator('.engine-ready').waitFor({ timeout: 60000 });
    // A check run now goes after anything the engine resumed at its start.
    await other.fill(id('claims-input'), 'Tokyo Tower is in Minato.');
    await other.click(id('run'));
    await other.locator(`[data-testid^="check-"]`).filter({ hasText: 'Tokyo Tower' }).locator(id('verdict')).waitFor({ timeout: 30000 });
    const asks = provider.bodies.map((body) => (body.includes('record_assessment') ? 'assessment' : 'summary'));
    assert.deepEqual(asks, ['assessment', 'summary', 'assessment', 'summary'],
      'two requests for each check, once: the ended check asked nothing again');
    assert.equal(await other.locator(`[data-testid^="check-"]`).filter({ hasText: 'Eiffel Tower is in Paris' }).count(), 0,
      'the unsaved result is gone, not running again');
  } finally {
    await close();
    await provider.close();
    mock.close();
  }
});

test('once the disk has room again, a check\'s progress is saved again: a crash after that resumes it from there', async () => {
  // The disk is full when the check starts: its session goes on in memory. Space is freed after
  // its first response; the second is saved (with the first), and after the crash that follows
  // only the third is asked again.
  const mock = await aimock(join(ROOT, 'tests/fixtures/aimock/claim-escalation.json'));
  const provider = await countingProxy(mock.url, { answered: 1 });
  const { context, page, close } = await appUnderQuota(provider);
  try {
    assert.ok(await fillDisk(page) > 0, 'the filler wrote something');
    await page.fill(id('claims-input'), 'Tokyo Tower is 333 metres tall.');
    await page.click(id('run'));
    await waitUntil(() => provider.held() === 1, 'the second request is asked');
    await page.locator(id('notice')).filter({ hasText: 'not saved' }).first().waitFor({ timeout: 10000 });
    await page.locator(id('storage')).filter({ hasText: 'refused the last save' }).waitFor({ timeout: 10000 });
    const mark = page.locator(id('check-1')).locator(id('not-saved'));
    await mark.waitFor({ timeout: 10000 });
    await freeDisk(page);
    provider.release();
    await waitUntil(() => provider.bodies.length === 3 && provider.held() === 1, 'the third request is asked');
    // Saved again: the card no longer says otherwise, nor does the storage line.
    await mark.waitFor({ state: 'detached', timeout: 10000 });
    await page.locator(id('storage')).filter({ hasNotText: 'refused the last save' }).waitFor({ timeout: 10000 });
    const third = provider.bodies[2];
    const { other } = await closeTheApp(context, page);
    provider.release(10);
    await other.goto(site.url);
    await other.locator('.engine-ready').waitFor({ timeout: 60000 });
    await waitUntil(() => provider.bodies.length >= 4, 'the resumed check asks again', 30000);
    assert.equal(provider.bodies[3], third, 'the resumed check asks the third request again, not the ones saved');
  } finally {
    await close();
    await provider.close();
    mock.close();
  }
});
