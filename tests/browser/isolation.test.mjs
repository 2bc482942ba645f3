// Cross-origin isolation: the app's files come with Cross-Origin-Opener-Policy: same-origin and
// Cross-Origin-Embedder-Policy: require-corp (xtask/src/web.rs, written into dist/_headers),
// so its page is cross-origin isolated and has SharedArrayBuffer, which the model in the tab
// needs to run on several threads. What isolation must not break: the engine's requests to a
// model server on another origin (CORS requests, which the embedder policy lets through: every
// mock provider test in engine.test.mjs and the llama.cpp test run under these headers), a
// model's URL on another origin (below, and in-tab.test.mjs), and the embedding in a site's
// page that is not isolated (it works, and runs the model in the tab on one thread).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createReadStream, statSync } from 'node:fs';
import { basename } from 'node:path';
import { serve, browser, screenshot, inEngine, recordingServer } from './harness.mjs';

let site;
before(async () => { site = await serve(); });
after(async () => { await site.close(); });

const ISOLATION = ['cross-origin-opener-policy', 'cross-origin-embedder-policy'];
/** The threads the model in the tab should use in an isolated page of this machine. */
const expectedThreads = (page) => page.evaluate(() => Math.min(navigator.hardwareConcurrency || 1, 4));

test('every file of the app comes with the isolation headers', async () => {
  const files = ['', 'boot.js', 'verity-web_bg.wasm', 'verity-worker_loader.js', 'verity-worker.js',
    'verity-worker_bg.wasm', 'verity-in-tab.js', 'llama/worker.js', 'llama/verity-llama.js', 'llama/verity-llama.wasm',
    'llama/verity-llama.worker.js', 'wllama/index.js', 'wllama/wllama.wasm', 'verity.js',
    'verity-embed-worker.js', 'verity-embed-worker_bg.wasm', 'examples/embed.html'];
  for (const path of files) {
    const response = await fetch(`${site.url}${path}`);
    assert.equal(response.status, 200, path);
    assert.equal(response.headers.get('cross-origin-opener-policy'), 'same-origin', path || 'the page');
    assert.equal(response.headers.get('cross-origin-embedder-policy'), 'require-corp', path || 'the page');
    await response.arrayBuffer();
  }
});

for (const shared of [true, false]) {
  test(`the app's page is cross-origin isolated, and its engine ${shared ? '(a shared worker) is under the embedder policy' : '(a Web Lock leader\'s dedicated worker) is isolated too'}`, async () => {
    const { context, page, errors, close } = await browser();
    if (!shared) await context.addInitScript(() => { delete globalThis.SharedWorker; });
    // A server on another origin: `corp` answers with Cross-Origin-Resource-Policy, anything
    // else without.
    const other = await recordingServer((request, response) => {
      response.writeHead(200, request.url === '/corp' ? { 'cross-origin-resource-policy': 'cross-origin' } : {}).end('x');
    });
    try {
      await page.goto(site.url);
      await page.locator('.engine-ready').waitFor({ timeout: 60000 });
      assert.equal(await page.evaluate(() => typeof SharedWorker === 'function'), shared);
      assert.deepEqual(await page.evaluate(() => ({ isolated: crossOriginIsolated, sab: typeof SharedArrayBuffer })),
        { isolated: true, sab: 'function' });
      // The model in the tab would run on the machine's threads, up to four.
      assert.equal(await page.evaluate(async () => (await import('/verity-in-tab.js')).threads()), await expectedThreads(page));
      // A request that is not CORS and whose answer does not allow other origins is refused in
      // an isolated context; one that allows them is not.
      const noCors = `(async () => {
        const out = {};
        for (const path of ['plain', 'corp']) {
          try { out[path] = (await fetch('${other.url}/' + path, { mode: 'no-cors' })).type; } catch (error) { out[path] = error.name; }
        }
        return out;
      })()`;
      let engine;
      if (shared) {
        // Chromium enforces a shared worker's embedder policy (from its script's headers) but
        // does not make it cross-origin isolated, whatever its headers: the engine needs
        // neither SharedArrayBuffer nor threads, and the model in the tab runs in the page.
        engine = await inEngine(context, page, noCors);
      } else {
        const worker = page.workers().find((w) => w.url().includes('verity-worker_loader.js'));
        assert.ok(worker, 'the engine runs in a dedicated worker of this page');
        assert.equal(await worker.evaluate(() => crossOriginIsolated), true, 'the engine worker is cross-origin isolated');
        engine = await worker.evaluate(noCors);
      }
      assert.deepEqual(engine, { plain: 'TypeError', corp: 'opaque' });
      await screenshot(page, `isolated-${shared ? 'shared' : 'leader'}`);
      assert.deepEqual(errors.filter((error) => !/ERR_BLOCKED_BY_RESPONSE\.NotSameOriginAfterDefaultedToSameOriginByCoep/.test(error)), []);
    } finally {
      await close();
      await other.close();
    }
  });
}

test('the embedding in a page that is not cross-origin isolated works, on one thread', async () => {
  // The site serves its own page without the isolation headers; the embedding's files keep
  // theirs (copied with dist/'s header files), as docs/embed.md says.
  const plain = await serve(undefined, { omit: { '/examples/embed.html': ISOLATION } });
  const { page, errors, close } = await browser();
  try {
    await page.goto(`${plain.url}examples/embed.html`);
    assert.deepEqual(await page.evaluate(() => ({ isolated: crossOriginIsolated, sab: typeof SharedArrayBuffer })),
      { isolated: false, sab: 'undefined' });
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#inline-check')?.getAttribute('data-state')), null, { timeout: 60000 });
    const report = await page.evaluate(() => document.querySelector('#inline-check').report);
    assert.equal(report?.assessment?.verdict, 'supported');
    const worker = page.workers().find((w) => w.url().includes('verity-worker_loader.js'));
    assert.ok(worker, 'the embedding runs its engine in a dedicated worker');
    assert.equal(await worker.evaluate(() => crossOriginIsolated), false);
    assert.equal(await page.evaluate(async () => (await import('../verity-in-tab.js')).threads()), 1);
    await screenshot(page, 'embed-not-isolated');
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await plain.close();
  }
});

const GGUF = process.env.VERITY_GGUF;
const skip = GGUF ? false : 'VERITY_GGUF is not set (cargo xtask test installs the model and sets it)';

/** A loopback server of the GGUF on another origin, with CORS (as a model host has). */
function modelServer() {
  return recordingServer((request, response) => {
    if (request.url !== `/${basename(GGUF)}`) {
      response.writeHead(404, { 'access-control-allow-origin': '*' }).end();
      return;
    }
    response.writeHead(200, { 'access-control-allow-origin': '*', 'content-type': 'application/octet-stream',
      'content-length': String(statSync(GGUF).size) });
    createReadStream(GGUF).pipe(response);
  });
}

/** Loads the model at `url` in `page` (which must have verity-in-tab.js at `module`) and asks
 * it a short question; resolves to { threads, multithread, content }. */
function askInTab(page, module, url) {
  return page.evaluate(async ({ module, url }) => {
    const model = await import(module);
    const threads = new Promise((resolve) => addEventListener('verity-model', ({ detail }) => {
      if (detail.state === 'answered') resolve(detail.threads);
    }));
    const { port1, port2 } = new MessageChannel();
    const answered = new Promise((resolve) => {
      port1.onmessage = ({ data }) => { if (!data.progress) resolve(data); };
    });
    await model.answer({ body: JSON.stringify({ model: url, max_tokens: 8, temperature: 0,
      messages: [{ role: 'user', content: 'Say yes.' }] }) }, port2);
    const reply = await answered;
    return { status: reply.status, threads: await threads, content: JSON.parse(reply.body).choices?.[0]?.message?.content };
  }, { module, url });
}

test('the model in the tab, from another origin: on several threads in the isolated app, on one in a page that is not isolated', { skip, timeout: 600000 }, async () => {
  const models = await modelServer();
  const plain = await serve(undefined, { omit: { '/examples/embed.html': ISOLATION } });
  const url = `${models.url}/${basename(GGUF)}`;
  const { page, errors, close } = await browser();
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const isolated = await askInTab(page, '/verity-in-tab.js', url);
    assert.equal(isolated.status, 200, JSON.stringify(isolated));
    assert.equal(isolated.threads, await expectedThreads(page));
    // The project's build of llama.cpp, in a worker of its own (which starts its threads').
    const ownBuild = () => page.workers().filter((w) => new URL(w.url()).pathname === '/llama/worker.js').length;
    assert.equal(ownBuild(), 1, `the model runs in the project's build: ${page.workers().map((w) => w.url())}`);
    await page.locator('[data-testid="model-state"]').filter({ hasText: `on ${isolated.threads} thread` }).waitFor();
    await screenshot(page, 'in-tab-threads');

    await page.goto(`${plain.url}examples/embed.html`);
    assert.equal(await page.evaluate(() => crossOriginIsolated), false);
    const single = await askInTab(page, '../verity-in-tab.js', url);
    assert.equal(single.status, 200, JSON.stringify(single));
    assert.equal(single.threads, 1);
    // wllama's worker (a blob: URL), and no thread's.
    const wllama = page.workers().filter((w) => w.url().startsWith('blob:')).length;
    assert.equal(wllama, 1, `wllama runs the model, in one worker and no thread: ${page.workers().map((w) => w.url())}`);
    console.log(`the model in the tab: ${isolated.threads} threads in the isolated app, ${single.threads} in a page that is not isolated`);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await plain.close();
    await models.close();
  }
});
