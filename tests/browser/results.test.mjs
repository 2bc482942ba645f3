// How a finished check reads in its card: a check whose research found nothing new is the
// verdict "insufficient evidence", not a failure without a verdict. The result is written into
// IndexedDB before the app loads, as a result the worker saved earlier.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, browser, screenshot, seedDatabase } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

test('research that found nothing new shows the verdict insufficient evidence', async () => {
  const session = await browser();
  const { page, errors, close } = session;
  try {
    const failed = (checkId, claim, kind, message) => ({ id: checkId, claim, cited: [], outcome: { status: 'failed',
      failure: { kind, message, spent: { turns: 2, requests: 3, retries: 0, usage: { input: 40, output: 12, cache_read: 0, cost: 0 } } } } });
    const results = JSON.stringify([
      failed('n1', 'The bridge was painted blue in 1990.', 'no-new-evidence', 'escalation found no additional evidence'),
      failed('n2', 'The bridge opened in 1937.', 'cancelled', 'cancelled by the user'),
    ]);
    // The first layout: every result in one record (read by every version of the worker).
    await seedDatabase(session, site, 1, ['kv', 'sessions'], `(tx) => tx.objectStore('kv').put(${JSON.stringify(results)}, 'results')`);
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const card = page.locator(id('check-1'));
    await card.locator(id('failure-kind')).waitFor({ timeout: 10000 });
    assert.equal(await card.locator('.verdict').innerText(), 'Insufficient evidence');
    assert.ok(await card.locator('.verdict-insufficient').isVisible());
    assert.match(await card.locator('.status').innerText(), /done/i);
    assert.match(await card.locator(id('failure-advice')).innerText(), /The corpus has nothing more that speaks to the claim/);
    // Another failure is still one without a verdict.
    const other = page.locator(id('check-2'));
    assert.equal(await other.locator('.verdict').innerText(), 'No verdict');
    assert.match(await other.locator('.status').innerText(), /failed/i);
    await screenshot(page, 'result-insufficient-evidence');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});
