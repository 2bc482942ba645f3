// The corpus at scale in a real browser (a benchmark that prints figures, not a timed test):
// PASSAGES passages given to the app as one `.jsonl` file, then
// - time to searchable: from handing the file to the page's file input to the engine's corpus
//   summary saying all of them are indexed (the page reads the file and sends it to the engine);
// - memory: the resident memory of the browser's renderer processes (the page and the engine's
//   shared worker), now and at its peak (Linux's VmRSS and VmHWM, read from /proc);
// - a table query: `listItems` (what the Corpus table's search sends, first page of 50)
//   sent to the engine over a second connection to it, timed from sending to its answer;
//   QUERIES queries, a warm-up first, p50 and p95: once as soon as the corpus is searchable
//   (while it is being saved), once more after it is saved (`saved_query_ms_*`);
// - saved: from handing the file over to its order record in IndexedDB (written once every
//   part of the corpus is; the queries run meanwhile, as a person's would);
// - a remove of one item: from sending `removeItems` to the summary saying the corpus is
//   indexed again without it, and to the order record naming the rewritten part;
// - a reload: from opening the app again to the restored corpus being indexed.
//
// It checks what it reports and fails otherwise: each query finds the same items before and
// after the save, text no passage has finds nothing, every other word and the id find some,
// and the reload restores every passage but the removed one.
//
// usage: node bench/corpus.mjs [PASSAGES] [QUERIES]   (VERITY_DIST: the built app, dist/ by default)
//
// The passages are VitaminC's (shared/data/vitaminc/corpus.jsonl, CC BY-SA 3.0: Schuster et
// al., "Get Your Vitamin C!", NAACL 2021), repeated with distinct ids (`v00001~3`) until there
// are PASSAGES; the file is written under target/ and not kept in the repository.
import assert from 'node:assert/strict';
import { createReadStream, createWriteStream, existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT, DIST, serve, browser } from '../tests/browser/harness.mjs';

const passages = Number(process.argv[2] ?? 1_000_000);
const queries = Number(process.argv[3] ?? 50);
const SOURCE = process.env.VERITY_CORPUS ?? join(ROOT, '../shared/data/vitaminc/corpus.jsonl');

async function corpusFile() {
  const file = join(ROOT, `target/bench-corpus-${passages}.jsonl`);
  if (existsSync(file)) return file;
  const source = [];
  for await (const line of createInterface({ input: createReadStream(SOURCE) })) {
    if (line.trim()) source.push(JSON.parse(line));
  }
  const out = createWriteStream(file);
  for (let i = 0; i < passages; i++) {
    const { id, text } = source[i % source.length];
    const round = Math.floor(i / source.length);
    const line = JSON.stringify({ id: round ? `${id}~${round}` : id, text }) + '\n';
    if (!out.write(line)) await new Promise((done) => out.once('drain', done));
  }
  await new Promise((done) => out.end(done));
  return file;
}

/** The renderer processes of the browser this process started: [{pid, rss, hwm}] in MB. */
function renderers() {
  const parents = new Map();
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      parents.set(Number(pid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  const ours = (pid) => {
    for (let at = pid; at > 1; at = parents.get(at) ?? 0) if (at === process.pid) return true;
    return false;
  };
  const found = [];
  for (const pid of parents.keys()) {
    let cmdline;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!ours(pid) || !cmdline.includes('--type=renderer')) continue;
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field) => Number(status.match(new RegExp(`${field}:\\s+(\\d+)`))?.[1] ?? 0);
    found.push({ pid: Number(pid), rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 });
  }
  return found;
}

const round = (x, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(Math.max(Math.ceil(p * s.length), 1), s.length) - 1];
};

const file = await corpusFile();
const site = await serve(DIST);
const session = await browser();
const { page, context } = session;
try {
  await page.goto(site.url);
  await page.locator('[data-testid="corpus-count"]').waitFor();
  // A second connection to the engine, from the page: the bench's own port.
  await page.evaluate(() => {
    const worker = new SharedWorker('./verity-worker_loader.js', { type: 'module', name: 'verity' });
    globalThis.benchPort = worker.port;
    globalThis.benchWaiters = [];
    worker.port.onmessage = ({ data }) => {
      const at = performance.now();
      globalThis.benchWaiters = globalThis.benchWaiters.filter((waiter) => !waiter(data, at));
    };
    globalThis.benchWait = (test) => new Promise((done) => globalThis.benchWaiters.push((data, at) => {
      if (!test(data)) return false;
      done({ data, at });
      return true;
    }));
    worker.port.start();
  });
  const indexedWith = (items) => page.evaluate((items) => globalThis.benchWait(
    (data) => data.type === 'corpus' && data.corpus.items === items && data.corpus.indexed,
  ).then(({ at }) => at), items);

  const before = renderers();
  const searchable = indexedWith(passages);
  const started = await page.evaluate(() => performance.now());
  await page.setInputFiles('[data-testid="corpus-file-input"]', file);
  const ready = await searchable;
  const loaded = renderers();

  // Table queries: words of the corpus, an id, and text that matches nothing.
  const words = ['Westlife', 'coronavirus', 'million', 'album', 'pandemic', 'Olympics', 'born',
    'election', 'v00042', 'xyzzy-not-there', 'the', 'film', 'population', 'season', 'United States'];
  const query = (text) => page.evaluate(async (text) => {
    const answer = globalThis.benchWait((data) => data.type === 'items' && data.query === text);
    const sent = performance.now();
    globalThis.benchPort.postMessage({ type: 'listItems', query: text, offset: 0, limit: 50 });
    const { at, data } = await answer;
    return { ms: at - sent, total: data.total };
  }, text);
  await query(words[0]);
  const times = [];
  const totals = {};
  const slowest = {};
  for (let i = 0; i < queries; i++) {
    const text = words[i % words.length];
    const { ms, total } = await query(text);
    times.push(ms);
    totals[text] = total;
    slowest[text] = round(Math.max(slowest[text] ?? 0, ms), 1);
  }

  // Saved: the corpus's order record names its parts once every part is written.
  const orderRecord = () => page.evaluate(async () => {
    const db = await new Promise((done, fail) => {
      const request = indexedDB.open('verity');
      request.onsuccess = () => done(request.result);
      request.onerror = () => fail(request.error);
    });
    const value = await new Promise((done) => {
      const request = db.transaction(['kv'], 'readonly').objectStore('kv').get('corpus-order');
      request.onsuccess = () => done(request.result ?? null);
      request.onerror = () => done(null);
    });
    db.close();
    return value;
  });
  const savedChange = async (from) => {
    for (;;) {
      const order = await orderRecord();
      if (order !== null && order !== from) return { order, at: await page.evaluate(() => performance.now()) };
      await page.waitForTimeout(100);
    }
  };
  const saved = await savedChange(null);
  // The same queries again, the save done.
  const quiet = [];
  for (let i = 0; i < queries; i++) {
    const text = words[i % words.length];
    const { ms, total } = await query(text);
    quiet.push(ms);
    // What it reports holds: the same query finds the same items once the save is done.
    assert.equal(total, totals[text], `${text}: ${total} items after the save, ${totals[text]} before`);
  }
  assert.equal(totals['xyzzy-not-there'], 0, 'text no passage has finds nothing');
  assert.ok(totals.v00042 >= 1, 'the id finds its item');
  for (const word of words.filter((word) => word !== 'xyzzy-not-there')) {
    assert.ok(totals[word] > 0, `${word} is in the corpus: ${totals[word]}`);
  }

  // A remove of one item.
  const removed = indexedWith(passages - 1);
  const removeSent = await page.evaluate(() => {
    const sent = performance.now();
    globalThis.benchPort.postMessage({ type: 'removeItems', ids: ['v00042'] });
    return sent;
  });
  const removeAt = await removed;
  const removeSaved = await savedChange(saved.order);
  const afterRemove = renderers();

  // A reload: the corpus restored from storage and indexed. The bench's port is gone with the
  // page; the UI's count and index state say when it is back.
  const reloadStarted = Date.now();
  await page.reload();
  await page.locator('[data-testid="corpus-index"]').filter({ hasText: 'indexed' }).waitFor({ timeout: 600_000 });
  const reloadMs = Date.now() - reloadStarted;
  const count = await page.locator('[data-testid="corpus-count"]').innerText();
  // Every passage but the removed one came back from storage.
  assert.equal(Number(count.replace(/[^0-9]/g, '')), passages - 1, `after the reload: ${count}`);

  const mb = (list, field) => round(list.reduce((sum, p) => sum + p[field], 0));
  console.log(JSON.stringify({
    dist: DIST,
    passages,
    file_mb: round(statSync(file).size / 1e6),
    searchable_s: round((ready - started) / 1000, 2),
    renderers: loaded.length,
    rss_mb_before: mb(before, 'rss'),
    rss_mb_loaded: mb(loaded, 'rss'),
    peak_rss_mb: mb(afterRemove, 'hwm'),
    peak_rss_mb_each: afterRemove.map((p) => round(p.hwm)),
    query_ms_p50: round(percentile(times, 0.5), 2),
    query_ms_p95: round(percentile(times, 0.95), 2),
    query_ms_max: round(Math.max(...times), 2),
    saved_query_ms_p50: round(percentile(quiet, 0.5), 2),
    saved_query_ms_p95: round(percentile(quiet, 0.95), 2),
    saved_query_ms_max: round(Math.max(...quiet), 2),
    query_totals: totals,
    query_ms_slowest_by_text: slowest,
    saved_s: round((saved.at - started) / 1000, 2),
    remove_ms: round(removeAt - removeSent, 1),
    remove_saved_ms: round(removeSaved.at - removeSent, 1),
    reload_to_indexed_s: round(reloadMs / 1000, 2),
    count_after_reload: count,
  }, null, 2));
} finally {
  await session.close();
  await site.close();
}
