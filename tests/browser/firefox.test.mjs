// The app in Firefox (Debian's Firefox ESR, driven over WebDriver BiDi by puppeteer-core: a
// stock Firefox, where Playwright needs a patched one). The shapes that differ between engines
// are used: the shared worker every tab talks to, IndexedDB, module workers, the page's CSP.
// A check runs to its verdict, a second tab shows the same result from the same engine, and a
// reload keeps the corpus and the result. Safari is not tested (no WebKit on this machine).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { serve, SCREENSHOTS } from './harness.mjs';

const FIREFOX = process.env.VERITY_FIREFOX ?? '/usr/bin/firefox-esr';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

async function opened(browser, errors) {
  const page = await browser.newPage();
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  await page.goto(site.url);
  await page.waitForSelector('.engine-ready', { timeout: 60000 });
  return page;
}

const text = (page, selector) => page.$eval(selector, (element) => element.textContent);

test('in Firefox: a check runs to its verdict, a second tab shows it from the same engine, a reload keeps it', async () => {
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX,
    headless: true,
    userDataDir: mkdtempSync(join(tmpdir(), 'verity-firefox-')),
  });
  const errors = [];
  try {
    const first = await opened(browser, errors);
    assert.equal(await first.evaluate(() => typeof SharedWorker), 'function', 'Firefox has shared workers');
    await first.click(id('corpus-demo'));
    await first.waitForFunction((selector) => /^[1-9]/.test(document.querySelector(selector)?.textContent ?? ''),
      { timeout: 20000 }, id('corpus-count'));
    const items = await text(first, id('corpus-count'));
    // The demo fills the claims box with its three claims.
    await first.waitForFunction((selector) => document.querySelector(selector)?.value.split('\n').length === 3,
      { timeout: 10000 }, id('claims-input'));
    await first.click(id('run'));
    // All three end (the third may end without a verdict of the offline baseline).
    await first.waitForSelector(`${id("check-3")} ${id("rerun")}`, { timeout: 30000 });
    const verdict = await text(first, `${id('check-1')} ${id('verdict')}`);
    assert.match(verdict, /supported|contradicted|insufficient/i);

    // A second tab: the same engine (one per origin), the same result, nothing run again.
    const second = await opened(browser, errors);
    await second.waitForSelector(`${id('check-1')} ${id('verdict')}`, { timeout: 10000 });
    assert.equal(await text(second, `${id('check-1')} ${id('verdict')}`), verdict);
    assert.equal(await second.$$eval('[data-testid^="check-"][data-check-id]', (cards) => cards.length), 3);

    // A reload keeps the corpus and the result (IndexedDB).
    await first.reload();
    await first.waitForSelector('.engine-ready', { timeout: 60000 });
    await first.waitForSelector(`${id('check-1')} ${id('verdict')}`, { timeout: 10000 });
    assert.equal(await text(first, id('corpus-count')), items);
    assert.equal(await text(first, `${id('check-1')} ${id('verdict')}`), verdict);
    mkdirSync(SCREENSHOTS, { recursive: true });
    await first.screenshot({ path: join(SCREENSHOTS, 'firefox.png'), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
