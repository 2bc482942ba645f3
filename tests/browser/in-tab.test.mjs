// The model in the tab: SmolLM2-135M-Instruct's GGUF (the file the real-model tests use, named
// by VERITY_GGUF, which `cargo xtask test` sets) served on loopback, loaded by the page with
// llama.cpp compiled to WebAssembly (the project's build, web/llama/: the app's page is
// cross-origin isolated), and a claim checked to a verdict with
// no model server at all. Then, after a reload (the model now comes from the browser's cache,
// not the network), one identical request in the tab and against the native llama.cpp server
// (VERITY_LLAMA_URL) prints both speeds side by side, and the verifier route's one-token
// question is answered with its `top_logprobs`. Qwen2.5-Coder-0.5B's GGUF (VERITY_QWEN_GGUF)
// checks a claim through the verifier route in the tab, its download watched and the tab's
// memory measured; a download cut halfway keeps what arrived, and a re-run resumes it (or
// restarts it, from a server that cannot resume).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createReadStream, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { serve, browser, screenshot, recordingServer, TOWERS, ROOT } from './harness.mjs';

const GGUF = process.env.VERITY_GGUF;
const skip = GGUF ? false : 'VERITY_GGUF is not set (cargo xtask test installs the model and sets it)';
/** Qwen2.5-Coder-0.5B-Instruct's GGUF (491 MB), the model the verifier route's default weights
 * were fitted on. */
const QWEN = process.env.VERITY_QWEN_GGUF;

let site;
before(async () => { site = await serve(); });
after(async () => { await site?.close(); });

const id = (name) => `[data-testid="${name}"]`;

/** A loopback server of the GGUF `file` (another origin than the app's: CORS, as a model host
 * has), at most `rate` bytes a second when given (a download a person can watch). */
function modelServer(file = GGUF, rate = 0) {
  return recordingServer((request, response) => {
    if (request.url !== `/${basename(file)}`) {
      response.writeHead(404, { 'access-control-allow-origin': '*' }).end();
      return;
    }
    response.writeHead(200, {
      'access-control-allow-origin': '*',
      'content-type': 'application/octet-stream',
      'content-length': String(statSync(file).size),
    });
    const source = createReadStream(file, { highWaterMark: 1 << 20 });
    if (!rate) {
      source.pipe(response);
      return;
    }
    const started = Date.now();
    let sent = 0;
    source.on('data', (chunk) => {
      sent += chunk.length;
      response.write(chunk);
      const ahead = (sent / rate) * 1000 - (Date.now() - started);
      if (ahead > 0) {
        source.pause();
        setTimeout(() => source.resume(), ahead);
      }
    });
    source.on('end', () => response.end());
  });
}

/** The memory the browser's processes hold (proportional set sizes, Linux), sampled until
 * `stop()`, which answers the peaks: `all` the browser's processes, `tab` its renderers (the
 * page, its workers and the engine's shared worker; not the browser, GPU and network
 * processes). Only the browser launched on `profile` (its `--user-data-dir`) and the processes
 * it started are counted: another Chromium on the machine (a bench, another test run) is not. */
function memoryWatch(profile) {
  const read = (pid, file) => readFileSync(`/proc/${pid}/${file}`, 'utf8');
  const sample = () => {
    const sums = { all: 0, tab: 0 };
    const parents = new Map();
    const roots = new Set();
    for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
      try {
        // The parent is the fourth field of `stat`, after the name in parentheses.
        const stat = read(pid, 'stat');
        parents.set(pid, stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (read(pid, 'cmdline').split('\0').includes(`--user-data-dir=${profile}`)) roots.add(pid);
      } catch { /* the process ended */ }
    }
    const ours = (pid) => {
      for (let at = pid, hops = 0; at && at !== '0' && hops < 64; at = parents.get(at), hops += 1) {
        if (roots.has(at)) return true;
      }
      return false;
    };
    for (const pid of parents.keys()) {
      if (!ours(pid)) continue;
      try {
        const kb = /^Pss:\s+(\d+) kB/m.exec(read(pid, 'smaps_rollup'));
        if (!kb) continue;
        sums.all += Number(kb[1]) * 1024;
        if (read(pid, 'cmdline').includes('--type=renderer')) sums.tab += Number(kb[1]) * 1024;
      } catch { /* the process ended */ }
    }
    return sums;
  };
  const peak = { all: 0, tab: 0 };
  const take = () => {
    const now = sample();
    peak.all = Math.max(peak.all, now.all);
    peak.tab = Math.max(peak.tab, now.tab);
  };
  take();
  const timer = setInterval(take, 500);
  return { stop() { clearInterval(timer); take(); return peak; } };
}

/** Loads the towers corpus into the app's open page and chooses the model in the tab, the
 * GGUF at `url`. */
async function chooseModelInTab(page, url) {
  await page.setInputFiles(id('corpus-file-input'), { name: 'towers.jsonl', mimeType: 'text/plain', buffer: Buffer.from(TOWERS) });
  await page.locator(id('corpus-count')).filter({ hasText: '3' }).waitFor();
  await page.selectOption(id('provider-kind'), 'openai');
  await page.selectOption(id('provider-preset'), 'intab');
  assert.equal(await page.inputValue(id('provider-base-url')), 'in-tab:');
  await page.fill(id('provider-model'), url);
}

/** Checks `claim` and waits (at most `timeout` ms) until its card shows a verdict or a
 * failure; answers the card. */
async function runCheck(page, claim, timeout) {
  await page.fill(id('claims-input'), claim);
  await page.click(id('run'));
  const card = page.locator('li.card', { hasText: claim });
  await card.locator(`${id('verdict')}, ${id('failure-message')}`).first().waitFor({ timeout });
  return card;
}

/** Asks the model in the tab (`web/in-tab.js`, imported into the app's page) the
 * OpenAI-compatible request `body` as the engine would; answers the response's body and the
 * number of threads the model answered on. */
/** The tab's answer to `body` as the engine gets it (`{status, headers, body}`), whatever its
 * status: a refusal included, which [`askInTab`] would wait on for ever (no "answered"). */
function replyInTab(page, body) {
  return page.evaluate(async (body) => {
    const model = await import('/verity-in-tab.js');
    const { port1, port2 } = new MessageChannel();
    const answered = new Promise((resolve) => {
      port1.onmessage = ({ data }) => { if (!data.progress) resolve(data); };
    });
    await model.answer({ body: JSON.stringify(body) }, port2);
    return answered;
  }, body);
}

/** The tab's answer to `body` (parsed) and the threads it said it ran on. */
async function askInTab(page, body) {
  // Listening before the call is made (the page runs each evaluation in the order sent).
  const threads = page.evaluate(() => new Promise((resolve) => addEventListener('verity-model', ({ detail }) => {
    if (detail.state === 'answered') resolve(detail.threads);
  })));
  const reply = await replyInTab(page, body);
  return { response: JSON.parse(reply.body), threads: await threads };
}

/** Checks `claim` and waits for its card's verdict (or fails with what the card says). */
async function checkToVerdict(page, claim, shot) {
  const cardLocator = await runCheck(page, claim, 300000);
  if (await cardLocator.locator(id('failure-message')).count()) {
    await screenshot(page, `${shot}-failed`);
    assert.fail(`the check failed: ${await cardLocator.innerText()}`);
  }
  return cardLocator.locator(id('verdict')).innerText();
}

test('the model in the tab: a GGUF loaded by the page checks a claim to a verdict with no model server', { skip, timeout: 900000 }, async () => {
  const models = await modelServer();
  const { page, errors, close } = await browser();
  try {
    const url = `${models.url}/${basename(GGUF)}`;
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await chooseModelInTab(page, url);
    const started = Date.now();
    const verdict = await checkToVerdict(page, 'The Eiffel Tower is in Paris.', 'in-tab');
    const seconds = (Date.now() - started) / 1000;
    assert.match(verdict, /supported|contradicted|insufficient/i, verdict);
    const state = page.locator(id('model-state'));
    // The app's page is cross-origin isolated: the model runs on the machine's threads, up to 4.
    const threads = await page.evaluate(() => Math.min(navigator.hardwareConcurrency || 1, 4));
    assert.match(await state.innerText(), new RegExp(`runs in this tab on ${threads} threads?`), 'the page says where the model runs, on how many threads');
    // The project's build of llama.cpp (not wllama's, which runs only where no thread can).
    const workers = page.workers().map((worker) => new URL(worker.url()).pathname);
    assert.ok(workers.includes('/llama/worker.js'), `the model runs in the project's build: the page's workers are ${JSON.stringify(workers)}`);
    await screenshot(page, 'in-tab');
    const downloads = () => models.requests.filter((request) => request.method === 'GET').length;
    assert.equal(downloads(), 1, 'the model was downloaded once');
    console.log(`model in the tab: verdict "${verdict}" in ${seconds.toFixed(1)} s (model download and load included)`);

    // After a reload the model comes from the browser's cache, not from the network: the
    // speed comparison below loads it again in the reloaded page.
    await page.reload();
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    assert.deepEqual(errors, []);

    // One identical request in the tab and, when it runs, against the native server.
    const request = {
      model: url,
      messages: [
        { role: 'system', content: 'You check claims against evidence. Answer in one sentence.' },
        { role: 'user', content: 'Claim: The Eiffel Tower is in Paris.\nEvidence: The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It was the tallest structure in the world until 1930.\nIs the claim supported?' },
      ],
      max_tokens: 48,
      temperature: 0,
    };
    const asked = await askInTab(page, request);
    const inTab = { ...asked.response.timings, threads: asked.threads };
    let line = `tokens a second, same request: in the tab (${inTab.threads} thread${inTab.threads === 1 ? '' : 's'}) prompt ${inTab.prompt_per_second.toFixed(1)}, generation ${inTab.predicted_per_second.toFixed(1)}`;
    if (process.env.VERITY_LLAMA_URL) {
      const response = await fetch(`${process.env.VERITY_LLAMA_URL.replace(/\/$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...request, model: 'local' }),
      });
      const native = (await response.json()).timings;
      line += `; native llama.cpp server prompt ${native.prompt_per_second.toFixed(1)}, generation ${native.predicted_per_second.toFixed(1)}`;
    }
    console.log(line);

    // The verifier route's question (one token, its probabilities): the tab answers with
    // `top_logprobs` as llama.cpp's server does, so the route reads P(Yes) there too.
    const { response: probe } = await askInTab(page, {
      model: url,
      messages: [{ role: 'user', content: 'Document: The Eiffel Tower is in Paris.\nClaim: The Eiffel Tower is in Paris.\nIs the claim supported by the document? Answer Yes or No.' }],
      max_tokens: 1,
      temperature: 0,
      logprobs: true,
      top_logprobs: 10,
    });
    const first = probe.choices?.[0]?.logprobs?.content?.[0];
    console.log(`the verifier's question in the tab: ${JSON.stringify(first ?? probe).slice(0, 400)}`);
    assert.ok(Array.isArray(first?.top_logprobs) && first.top_logprobs.length > 1, JSON.stringify(probe).slice(0, 400));
    assert.ok(first.top_logprobs.every((entry) => typeof entry.token === 'string' && Number.isFinite(entry.logprob)));

    // Constrained output (the app's preset asks for it): the answer holds to the JSON Schema
    // whatever a 135M model would have written, as with llama.cpp's server.
    const schema = {
      type: 'object',
      properties: { verdict: { enum: ['supported', 'contradicted', 'insufficient'] }, confidence: { type: 'integer', minimum: 0, maximum: 100 } },
      required: ['verdict', 'confidence'],
      additionalProperties: false,
    };
    const { response: shaped } = await askInTab(page, {
      model: url,
      messages: [{ role: 'user', content: 'Claim: The Eiffel Tower is in Paris.\nEvidence: The Eiffel Tower is in Paris.\nGive your verdict as JSON.' }],
      max_tokens: 64,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'verdict', schema } },
    });
    const content = JSON.parse(shaped.choices?.[0]?.message?.content ?? 'null');
    console.log(`constrained output in the tab: ${JSON.stringify(content)}`);
    assert.deepEqual(Object.keys(content ?? {}).sort(), ['confidence', 'verdict'], JSON.stringify(shaped).slice(0, 400));
    assert.ok(schema.properties.verdict.enum.includes(content.verdict) && Number.isInteger(content.confidence), JSON.stringify(content));

    // A request the server refuses is refused in the tab too, with its status and words.
    const refused = await replyInTab(page, { model: url, messages: 'not a list' });
    assert.equal(refused.status, 400, JSON.stringify(refused));
    assert.match(JSON.parse(refused.body).error.message, /messages/i, refused.body);
    assert.equal(downloads(), 1, 'after a reload the model came from the browser, not the network');
  } finally {
    await close();
    await models.close();
  }
});

test('Qwen2.5-Coder-0.5B in the tab checks a claim through the verifier route, reading the answers\' probabilities', { skip: QWEN ? false : 'VERITY_QWEN_GGUF is not set (cargo xtask test installs the model and sets it)', timeout: 900000 }, async () => {
  // 200 MB/s: the 491 MB take about 2.5 s, long enough for the page to estimate the rest.
  const models = await modelServer(QWEN, 200e6);
  const { page, errors, close, profile } = await browser();
  const memory = memoryWatch(profile);
  try {
    const url = `${models.url}/${basename(QWEN)}`;
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await chooseModelInTab(page, url);
    // Every line the page shows about the model, as it shows them.
    // (With how many tokens the answer it is about was generated, where it is about one.)
    await page.evaluate(() => {
      globalThis.modelLines = [];
      addEventListener('verity-model', ({ detail }) => modelLines.push({
        line: document.querySelector('[data-testid="model-state"]')?.textContent,
        generated: detail.timings?.predicted_n,
      }));
    });
    const started = Date.now();
    const verdict = await checkToVerdict(page, 'The Eiffel Tower is in Paris.', 'in-tab-qwen');
    const seen = await page.evaluate(() => modelLines);
    const lines = [...new Set(seen.map((s) => s.line))];
    // The download's progress in bytes, its share, and an estimate of the time left.
    assert.ok(lines.some((line) => /Loading the model .*: [0-9.]+ MB of 491\.4 MB \(\d+%\), about \d+ (s|min) left/.test(line)), lines.slice(0, 5).join('\n'));
    // One-token answers (the route's questions) show their prompt speed and no generation
    // speed (a summary generated at 1 token a second, on a busy machine, may show "1 generated").
    const oneToken = seen.filter((s) => s.generated === 1 && / runs in this tab on /.test(s.line));
    assert.ok(oneToken.length > 0, JSON.stringify(seen.slice(-8)));
    assert.ok(oneToken.every((s) => /prompt tokens a second/.test(s.line) && !/generated/.test(s.line)), JSON.stringify(oneToken));
    const seconds = (Date.now() - started) / 1000;
    const peak = memory.stop();
    await screenshot(page, 'in-tab-qwen');
    assert.match(verdict, /supported/i, verdict);
    const card = page.locator('li.card', { hasText: 'The Eiffel Tower is in Paris.' });
    const citations = card.locator(id('citation'));
    assert.equal(await citations.count(), 1, await card.innerText());
    assert.match(await citations.innerText(), /Eiffel Tower is a wrought-iron lattice tower/);
    // The report: every question was read from the model's probabilities, none from the
    // sampled token.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(id('export-json'))]);
    let text = '';
    for await (const chunk of await download.createReadStream()) text += chunk;
    const questions = [];
    JSON.stringify(JSON.parse(text), (key, value) => {
      if (key === 'verifier' && Array.isArray(value?.questions)) questions.push(...value.questions);
      return value;
    });
    assert.ok(questions.length >= 2 && questions.length <= 4, `${questions.length} questions: ${text.slice(0, 400)}`);
    assert.ok(questions.every((question) => question.source === 'probabilities'), JSON.stringify(questions));
    assert.equal(models.requests.filter((request) => request.method === 'GET').length, 1, 'downloaded once');
    console.log(`Qwen2.5-Coder-0.5B in the tab: verdict "${verdict}" through the verifier route (${questions.length} questions, each read from its probabilities) in ${seconds.toFixed(1)} s, the 491 MB download and load included; at its peak the tab's processes held ${(peak.tab / 2 ** 20).toFixed(0)} MB, all the browser's ${(peak.all / 2 ** 20).toFixed(0)} MB`);
    assert.ok(peak.tab < 1.5 * 2 ** 30, `the tab held ${peak.tab} bytes with the model loaded (goal: under 1.5 GB)`);
    assert.deepEqual(errors, []);
  } finally {
    memory.stop();
    await close();
    await models.close();
  }
});

/** A loopback server of the GGUF whose first download is cut halfway (the connection
 * destroyed); with `ranges`, it answers a `Range: bytes=N-` request with the rest (206, the
 * `Content-Range` exposed to the page), else it ignores the range and sends the whole file
 * again. `sent` counts the bytes it wrote to the network for each download. */
async function breakingServer(ranges) {
  const size = statSync(GGUF).size;
  const state = { downloads: 0, sent: [], ranges: [] };
  const server = await recordingServer((request, response) => {
    state.downloads += 1;
    const range = /^bytes=(\d+)-$/.exec(request.headers.range ?? '');
    state.ranges.push(request.headers.range ?? null);
    const from = ranges && range ? Number(range[1]) : 0;
    const headers = { 'access-control-allow-origin': '*', 'access-control-expose-headers': 'content-range',
      'content-type': 'application/octet-stream', 'content-length': String(size - from) };
    if (from > 0) headers['content-range'] = `bytes ${from}-${size - 1}/${size}`;
    response.writeHead(from > 0 ? 206 : 200, headers);
    const whole = state.downloads > 1;
    const source = createReadStream(GGUF, { start: from, end: whole ? size - 1 : Math.floor(size / 2) });
    const download = state.sent.push(0) - 1;
    source.on('data', (chunk) => { state.sent[download] += chunk.length; });
    if (whole) source.pipe(response);
    else source.on('end', () => response.destroy()).pipe(response, { end: false });
  });
  return Object.assign(state, { url: server.url, close: server.close, size });
}

/** What the page's model cache holds: each entry's address. */
function keptModels(page) {
  return page.evaluate(async () => (await (await caches.open('verity-models')).keys()).map((request) => request.url));
}

for (const ranges of [true, false]) {
  const title = ranges
    ? 'a model download that breaks keeps what arrived, and a re-run resumes it from there without a reload'
    : 'a model download that breaks is restarted by a re-run when the server cannot resume it';
  test(title, { skip, timeout: 900000 }, async () => {
    const models = await breakingServer(ranges);
    const { page, errors, close } = await browser();
    try {
      await page.goto(site.url);
      await page.locator('.engine-ready').waitFor({ timeout: 60000 });
      const url = `${models.url}/${basename(GGUF)}`;
      await chooseModelInTab(page, url);
      const card = await runCheck(page, 'The Eiffel Tower is in Paris.', 300000);
      const message = await card.locator(id('failure-message')).innerText();
      assert.match(message, /could not be loaded in this tab: downloading the model .* failed: the download broke after [0-9.]+ of [0-9.]+ MB \(what arrived is kept: checking again resumes from there\)/, message);
      if (ranges) await screenshot(page, 'in-tab-broken-download');
      // What arrived is kept, apart from the model: nothing is ever taken for the whole file.
      const kept = await keptModels(page);
      assert.ok(kept.length > 0 && !kept.includes(url), JSON.stringify(kept));
      await card.locator(id('rerun')).click();
      await card.locator(`${id('verdict')}, ${id('failure-message')}`).first().waitFor({ timeout: 300000 });
      assert.equal(await card.locator(id('failure-message')).count(), 0, await card.innerText());
      assert.match(await card.locator(id('verdict')).innerText(), /supported|contradicted|insufficient/i);
      assert.equal(models.downloads, 2, 'asked again once');
      // Asked from what had arrived: the megabytes the message counted.
      const arrived = Number(/broke after ([0-9.]+) of/.exec(message)[1]) * 1e6;
      const resumedFrom = Number(/^bytes=(\d+)-$/.exec(models.ranges[1] ?? '')?.[1] ?? NaN);
      assert.equal(models.ranges[0], null, 'the first download asks for the whole file');
      assert.ok(Math.abs(resumedFrom - arrived) <= 0.05e6 && resumedFrom > 0, `resumed from ${models.ranges[1]}, ${arrived} bytes arrived`);
      const again = ranges ? models.size - resumedFrom : models.size;
      assert.equal(models.sent[1], again, ranges ? 'only the rest was sent' : 'sent from the start again');
      // Kept as one model, its pieces gone.
      assert.deepEqual(await keptModels(page), [url]);
      assert.deepEqual(errors.filter((error) => !/ERR_|network|Failed to fetch|download/i.test(error)), []);
    } finally {
      await close();
      await models.close();
    }
  });
}

test('a model the device has not the memory for is refused before it is downloaded, saying so', { skip: QWEN ? false : 'VERITY_QWEN_GGUF is not set', timeout: 300000 }, async () => {
  const models = await modelServer(QWEN);
  const { context, page, errors, close } = await browser();
  try {
    // A device that reports 1 GB (navigator.deviceMemory); Qwen-0.5B's tab needs about 1.4.
    await context.addInitScript(() => Object.defineProperty(Navigator.prototype, 'deviceMemory', { get: () => 1, configurable: true }));
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    await chooseModelInTab(page, `${models.url}/${basename(QWEN)}`);
    const card = await runCheck(page, 'The Eiffel Tower is in Paris.', 120000);
    const message = await card.locator(id('failure-message')).innerText();
    assert.match(message, /does not fit in this device's memory: it needs about 1\.4 GB, and this device has about 1 GB; choose a smaller model/, message);
    assert.match(await page.locator(id('model-state')).innerText(), /does not fit/);
    // The advice is the model in the tab's, not a server's (keys, CORS).
    assert.match(await card.locator(id('failure-advice')).innerText(), /The model in this tab could not be loaded: .*smaller model/);
    await screenshot(page, 'in-tab-no-memory');
    const kept = await page.evaluate(async () => (await (await caches.open('verity-models')).keys()).length);
    assert.equal(kept, 0, 'nothing kept');
    assert.equal(models.requests.filter((request) => request.method === 'GET').length, 1, 'asked once, not downloaded again');
    assert.deepEqual(errors.filter((error) => !/ERR_|network|download/i.test(error)), []);
  } finally {
    await close();
    await models.close();
  }
});

/** Loads the towers corpus, chooses the model in the tab with a model file `models` does not
 * have, checks a claim and returns the failure message its card shows (within `timeout` ms). */
async function checkWithMissingModel(page, models, timeout) {
  await chooseModelInTab(page, `${models.url}/missing.gguf`);
  const card = await runCheck(page, 'The Eiffel Tower is in Paris.', timeout);
  return card.locator(id('failure-message')).innerText();
}

test('a file that starts as a GGUF file but is not a model is refused with llama.cpp\'s words, and the tab then loads a real one', { skip, timeout: 300000 }, async () => {
  // "GGUF", a version, then counts no reader can believe: untrusted bytes from the network.
  const bogus = join(mkdtempSync(join(tmpdir(), 'verity-bogus-')), 'bogus.gguf');
  const bytes = Buffer.alloc(4096, 0xff);
  bytes.write('GGUF', 0, 'latin1');
  bytes.writeUInt32LE(3, 4);
  writeFileSync(bogus, bytes);
  const bad = await modelServer(bogus);
  const good = await modelServer();
  const { page, errors, close } = await browser();
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const ask = (url) => replyInTab(page, { model: url, messages: [{ role: 'user', content: 'Say yes.' }], max_tokens: 4, temperature: 0 });
    const refused = await ask(`${bad.url}/bogus.gguf`);
    assert.equal(refused.status, 400, JSON.stringify(refused));
    assert.match(JSON.parse(refused.body).error.message, /could not be loaded in this tab: llama\.cpp could not load the model/, refused.body);
    const answered = await ask(`${good.url}/${basename(GGUF)}`);
    assert.equal(answered.status, 200, JSON.stringify(answered).slice(0, 300));
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await bad.close();
    await good.close();
  }
});

test('on a one-core machine the isolated app still runs its own build of llama.cpp, on one thread', { skip, timeout: 300000 }, async () => {
  const models = await modelServer();
  const { context, page, errors, close } = await browser();
  try {
    await context.addInitScript(() => {
      Object.defineProperty(Navigator.prototype, 'hardwareConcurrency', { get: () => 1 });
    });
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    const asked = await askInTab(page, {
      model: `${models.url}/${basename(GGUF)}`,
      messages: [{ role: 'user', content: 'Say yes.' }],
      max_tokens: 4,
      temperature: 0,
    });
    assert.equal(asked.threads, 1);
    assert.ok(asked.response.choices?.[0]?.message?.content?.length > 0, JSON.stringify(asked.response).slice(0, 300));
    // Threads can start here (the page is isolated): the server's logic needs them even when
    // the model computes on one, so the project's build runs, not wllama's.
    const workers = page.workers().map((worker) => new URL(worker.url()).pathname);
    assert.ok(workers.includes('/llama/worker.js'), JSON.stringify(workers));
    assert.deepEqual(errors, []);
  } finally {
    await close();
    await models.close();
  }
});

for (const shared of [true, false]) {
  test(`the app's tab runs the model for the engine ${shared ? 'in a shared worker' : 'of a Web Lock leader (no SharedWorker)'}: a missing model is fetched once and the check says why`, async () => {
    const models = await recordingServer();
    const { context, page, errors, close } = await browser();
    if (!shared) await context.addInitScript(() => { delete globalThis.SharedWorker; });
    try {
      await page.goto(site.url);
      await page.locator('.engine-ready').waitFor({ timeout: 60000 });
      assert.equal(await page.evaluate(() => typeof SharedWorker === 'function'), shared);
      const message = await checkWithMissingModel(page, models, 60000);
      assert.match(message, /could not be loaded in this tab: downloading the model .*missing\.gguf failed: HTTP 404/, message);
      assert.deepEqual(models.requests.map((request) => `${request.method} ${request.url}`), ['GET /missing.gguf']);
      assert.match(await page.locator(id('model-state')).innerText(), /could not be loaded/);
      await screenshot(page, `in-tab-missing-model-${shared ? 'shared' : 'leader'}`);
      assert.deepEqual(errors.filter((error) => !error.includes('404')), []);
    } finally {
      await close();
      await models.close();
    }
  });
}

test('a tab of another build never becomes the runner of the model in the tab: the calls go to a tab that answers', async () => {
  const models = await recordingServer();
  const { context, page, errors, close } = await browser();
  try {
    await page.goto(site.url);
    await page.locator('.engine-ready').waitFor({ timeout: 60000 });
    // A second tab of another build (a tab opened after a deploy meets the engine an older tab
    // keeps running), which counts the model calls it would drop.
    const other = await context.newPage();
    // Its boot.js is the readable source (the shipped one is minified), with another build's
    // id and a counter where it drops a message.
    const source = readFileSync(join(ROOT, 'web/boot.js'), 'utf8');
    const instrumented = source
      .replace('const BUILD = "__VERITY_BUILD__";', 'const BUILD = "another-build";')
      .replace('if (differs) return;', 'if (differs) { globalThis.droppedCalls = (globalThis.droppedCalls ?? 0) + (data?.verityModel === "call" ? 1 : 0); return; }');
    assert.ok(!instrumented.includes('__VERITY_BUILD__') && instrumented.includes('droppedCalls'), 'boot.js instrumented');
    await other.route('**/boot.js', async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, body: instrumented });
    });
    await other.goto(site.url);
    await other.locator(id('engine-state')).waitFor({ timeout: 30000 });
    await page.bringToFront();
    assert.match(await checkWithMissingModel(page, models, 120000), /could not be loaded in this tab/);
    assert.equal(await other.evaluate(() => globalThis.droppedCalls ?? 0), 0, 'the other build\'s tab was never asked');
    assert.deepEqual(errors.filter((error) => !error.includes('404')), []);
  } finally {
    await close();
    await models.close();
  }
});

