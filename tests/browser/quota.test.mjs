// A full disk: with the origin's quota set below what it uses (Chromium's
// Storage.overrideQuotaForOrigin), every write to IndexedDB fails with QuotaExceededError. A
// check still runs to its verdict (its session kept in memory), its result is shown with "not
// saved" and what to free, never "cancelled". And the page asks for persistent storage.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, browser, screenshot } from './harness.mjs';

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
    const page = await context.newPage();
    await page.goto(`${site.url}not-the-app`);
    await first.close();
    const cdp = await context.newCDPSession(page);
    // The engine (a shared worker) ends with its last tab: wait for the browser to say it is
    // gone, not for a time.
    for (let i = 0; ; i++) {
      const { targetInfos } = await cdp.send('Target.getTargets');
      if (!targetInfos.some((target) => target.type === 'shared_worker')) break;
      assert.ok(i < 300, 'the engine outlived its last tab');
      await page.waitForTimeout(50);
    }
    // Chromium keeps an origin's IndexedDB files open for a grace period after their last
    // connection closes (two seconds: `kBackingStoreGracePeriodSeconds` in its IndexedDB code); no
    // event says when it has passed.
    await page.waitForTimeout(BACKING_STORE_GRACE_MS);
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
