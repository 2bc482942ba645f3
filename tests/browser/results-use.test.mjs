// Results a person can use: the CSV export (one row per result, with where it came from, no
// cell a spreadsheet would run), claims read from a file, and the results filtered by verdict
// with a count per verdict; checked with the demo corpus and the offline baseline.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, browser, screenshot } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const id = (name) => `[data-testid="${name}"]`;

/** The app with the demo corpus loaded and its claims (and `extra`) checked offline. */
async function checked(extra = []) {
  const session = await browser();
  const { page } = session;
  await page.goto(site.url);
  await page.locator('.engine-ready').waitFor({ timeout: 60000 });
  await page.click(id('corpus-demo'));
  await page.locator(id('corpus-count')).filter({ hasText: '8' }).waitFor();
  const box = page.locator(id('claims-input'));
  await page.waitForFunction((sel) => document.querySelector(sel).value.trim() !== '', id('claims-input'));
  const claims = [...(await box.inputValue()).split('\n'), ...extra];
  await page.fill(id('claims-input'), claims.join('\n'));
  await page.click(id('run'));
  for (let n = 1; n <= claims.length; n += 1) {
    await page.locator(`${id(`check-${n}`)} .status-done, ${id(`check-${n}`)} .status-failed`)
      .waitFor({ timeout: 30000 });
  }
  return { ...session, claims };
}

async function download(page, button) {
  const [file] = await Promise.all([page.waitForEvent('download'), page.click(id(button))]);
  let text = '';
  for await (const chunk of await file.createReadStream()) text += chunk;
  return { name: file.suggestedFilename(), text };
}

test('the CSV export has a row per result with its provenance and no live formula', async () => {
  const hostile = '=HYPERLINK("http://evil.example","click") The bridge is orange.';
  const { page, errors, close, claims } = await checked([hostile]);
  try {
    await screenshot(page, 'results-use-checked');
    const csv = await download(page, 'export-csv');
    assert.equal(csv.name, 'verity-results.csv');
    const rows = csv.text.trimEnd().split('\r\n');
    assert.equal(rows.length, claims.length + 1, csv.text);
    assert.match(rows[0], /^"id","claim","verdict","failure kind","confidence","summary","cited ids","provider"/);
    assert.ok(rows.some((row) => row.includes('"\'=HYPERLINK(""http://evil.example"",""click"")')), csv.text);
    for (const row of rows.slice(1)) {
      // Then no span (a claim is not cut into sentences) and where each quote sits in its passage.
      assert.match(row, /"offline","","","sha256:[0-9a-f]+","8","[0-9.]+","\d{4}-\d\d-\d\dT[^"]+Z","","([^"]*)"$/, row);
      for (const cell of row.split('","')) assert.doesNotMatch(cell.replace(/^"/, ''), /^[=+\-@\t\r]/, row);
    }
    assert.ok(rows.some((row) => row.includes('"supported"')), csv.text);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('claims read from a file fill the box, and the bad lines are named', async () => {
  const { page, errors, close } = await browser();
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const csv = 'id,claim\n1,The bridge is orange.\n2,\n3,"A claim, with a comma"\n';
    await page.setInputFiles(id('claims-file'), { name: 'claims.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await page.locator(id('claims-read')).filter({ hasText: '2 claims read' }).waitFor();
    assert.equal(await page.inputValue(id('claims-input')), 'The bridge is orange.\nA claim, with a comma');
    assert.equal(await page.textContent(id('claims-read')),
      '2 claims read from claims.csv; line 3: the claim is empty.');
    await screenshot(page, 'results-use-claims-file');
    // A file of another kind changes nothing in the box and says why.
    await page.setInputFiles(id('claims-file'), { name: 'claims.pdf', mimeType: 'application/pdf', buffer: Buffer.from('%PDF') });
    await page.locator(id('claims-read')).filter({ hasText: 'was not read' }).waitFor();
    assert.equal(await page.inputValue(id('claims-input')), 'The bridge is orange.\nA claim, with a comma');
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});

test('the results are filtered by verdict, with a count per verdict', async () => {
  const { page, errors, close } = await checked(['Nothing in the corpus speaks of tides.']);
  try {
    assert.equal((await page.textContent(id('verdict-counts'))).trim(),
      'All 4 · Supported 1 · Contradicted 1 · Insufficient 2 · Failed 0');
    const shown = (n) => page.waitForFunction((n) => [...document.querySelectorAll('ol.cards > li')]
      .filter((card) => card.checkVisibility()).length === n, n);
    const visible = page.locator('ol.cards > li:visible');
    await page.selectOption(id('filter'), 'contradicted');
    await shown(1);
    assert.equal(await visible.locator(id('verdict')).textContent(), 'Contradicted');
    await screenshot(page, 'results-use-filtered');
    await page.selectOption(id('filter'), 'insufficient');
    await shown(2);
    assert.deepEqual(await visible.locator('.verdict').allTextContents(),
      ['Insufficient evidence', 'Insufficient evidence']);
    await page.selectOption(id('filter'), 'failed');
    await shown(0);
    await page.selectOption(id('filter'), 'supported');
    await shown(1);
    await page.selectOption(id('filter'), 'all');
    await shown(4);
    assert.deepEqual(errors, []);
  } finally {
    await close();
  }
});
