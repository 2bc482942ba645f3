// Shared by the browser tests: serves the built app (DIST) on a free loopback port, launches
// Debian's Chromium through playwright-core (never a downloaded browser), collects page errors,
// and saves screenshots under SCREENSHOTS. Each test gets a fresh browser profile.
import { createServer, request as forward } from 'node:http';
import { mkdtempSync, readFileSync, existsSync, mkdirSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, extname, normalize, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { chromium } from 'playwright-core';

export const ROOT = resolve(import.meta.dirname, '../..');
export const DIST = process.env.VERITY_DIST ?? join(ROOT, 'dist');
export const SCREENSHOTS = process.env.VERITY_SCREENSHOTS ?? join(ROOT, 'target/browser-screenshots');

/** Three towers as a `.jsonl` corpus: what the real-model tests check a claim against. */
export const TOWERS = [
  { id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' },
  { id: 'louvre', text: "The Louvre is the world's most-visited art museum." },
  { id: 'tokyo', text: 'Tokyo Tower is a communications and observation tower in Minato.' },
].map((item) => JSON.stringify(item)).join('\n');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.jsonl': 'application/jsonl',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The headers `dir/_headers` (the Netlify / Cloudflare Pages form `cargo xtask dist` writes)
 * gives `path`: the rules whose pattern is the path, or ends in `*` and prefixes it. */
function staticHostHeaders(dir, path) {
  const file = join(dir, '_headers');
  if (!existsSync(file)) return {};
  const headers = {};
  let applies = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim() || line.trim().startsWith('#')) continue;
    if (!/^\s/.test(line)) {
      const pattern = line.trim();
      applies = pattern.endsWith('*') ? path.startsWith(pattern.slice(0, -1)) : path === pattern;
    } else if (applies) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
  }
  return headers;
}

/** Serves `dir` on 127.0.0.1 (a free port), with the security headers the folder ships for
 * static hosts (its `_headers`), as a deployment would; resolves to { url, hold, close }.
 * `hold(path)` holds the answers for `path` until its `release()` is called (the engine runs
 * in a shared worker, whose requests a page's `route` does not see); its `asked()` is how many
 * requests for it came meanwhile. `omit` names headers (lower case) left out of the answers
 * for some paths, `{path: [header, ...]}`: a site that serves its own page without them. */
export function serve(dir = DIST, { omit = {} } = {}) {
  if (!existsSync(join(dir, 'index.html'))) {
    throw new Error(`${dir}/index.html is missing: build the app first (cargo xtask dist)`);
  }
  const holds = new Map();
  const server = createServer(async (request, response) => {
    const path = decodeURIComponent(new URL(request.url, 'http://x').pathname);
    const held = holds.get(path);
    if (held) {
      held.asked += 1;
      await held.released;
    }
    let file = normalize(join(dir, path === '/' ? 'index.html' : path));
    if (!file.startsWith(dir) || !existsSync(file) || statSync(file).isDirectory()) {
      if (path.endsWith('/') && existsSync(join(file, 'index.html'))) {
        file = join(file, 'index.html');
      } else {
        response.writeHead(404).end('not found');
        return;
      }
    }
    const headers = staticHostHeaders(dir, path);
    for (const name of omit[path] ?? []) delete headers[name];
    response.writeHead(200, {
      ...headers,
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'cache-control': 'no-store',
    });
    response.end(readFileSync(file));
  });
  return new Promise((ready) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      const hold = (path) => {
        let release;
        const held = { asked: 0, released: new Promise((done) => { release = done; }) };
        holds.set(path, held);
        return { asked: () => held.asked, release: () => { holds.delete(path); release(); } };
      };
      ready({ url: `http://127.0.0.1:${port}/`, hold, close: () => new Promise((done) => server.close(done)) });
    });
  });
}

/** Evaluates `expression` (JavaScript whose value may be a promise) in the app's engine, the
 * origin's shared worker, through the DevTools protocol (Playwright lists only dedicated
 * workers); resolves to its value. */
export async function inEngine(context, page, expression) {
  const cdp = await context.newCDPSession(page);
  try {
    const { targetInfos } = await cdp.send('Target.getTargets');
    const target = targetInfos.find((info) => info.type === 'shared_worker' && info.url.includes('verity-worker_loader.js'));
    if (!target) throw new Error('the engine (a shared worker) is not running');
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId: target.targetId, flatten: false });
    const answer = new Promise((done) => cdp.on('Target.receivedMessageFromTarget', (event) => {
      const message = JSON.parse(event.message);
      if (message.id === 1) done(message);
    }));
    await cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id: 1, method: 'Runtime.evaluate',
      params: { expression, awaitPromise: true, returnByValue: true } }) });
    const { result } = await answer;
    if (result.exceptionDetails) throw new Error(JSON.stringify(result.exceptionDetails));
    return result.result.value;
  } finally {
    await cdp.detach();
  }
}

/** Runs `write(tx)` (a function's source, run in the page) in a transaction over `stores` of
 * the `verity` database opened at `version`, on the origin of `site` (from `serve`), before the app has loaded
 * there (from a missing page: `errors` forgets its 404s). */
export async function seedDatabase({ page, errors }, site, version, stores, write) {
  await page.goto(`${site.url}not-the-app`);
  await page.waitForLoadState('load');
  await page.evaluate(async ({ version, stores, write }) => {
    const db = await new Promise((done, fail) => {
      const request = indexedDB.open('verity', version);
      request.onupgradeneeded = () => stores.forEach((name) => request.result.createObjectStore(name));
      request.onsuccess = () => done(request.result);
      request.onerror = () => fail(request.error);
    });
    const tx = db.transaction(stores, 'readwrite');
    new Function('tx', write)(tx);
    await new Promise((done, fail) => { tx.oncomplete = done; tx.onerror = () => fail(tx.error); });
    db.close();
  }, { version, stores, write: `(${write})(tx)` });
  errors.splice(0);
}

/** A fresh Chromium profile; resolves to { context, page, errors, close }. */
export async function browser({ width = 1280, height = 900 } = {}) {
  // The profile is removed when the session closes: left behind, each test's profile (up to
  // ~300 MB) filled the machine's disk over many runs.
  const profile = mkdtempSync(join(tmpdir(), 'verity-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width, height },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  // The page warns before it is left while the corpus is being saved: the person leaves anyway
  // (a reload must not hang on the question), and the tests can see that it was asked.
  const dialogs = [];
  const watch = (p) => {
    p.on('dialog', (dialog) => {
      dialogs.push(dialog.type());
      if (dialog.type() === 'beforeunload') dialog.accept().catch(() => {});
      else dialog.dismiss().catch(() => {});
    });
    p.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
    p.on('console', (message) => {
      if (message.type() === 'error') errors.push(`console: ${message.text()}`);
    });
  };
  watch(page);
  context.on('page', watch);
  const close = async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, page, errors, dialogs, close, profile };
}

/** Waits until `condition()` (sync or async) holds, checking every 50 ms; throws naming `what`
 * after `timeout` ms. */
export async function waitUntil(condition, what, timeout = 20000) {
  const end = Date.now() + timeout;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what}`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

/** Saves a screenshot of `page` as SCREENSHOTS/name.png. */
export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Starts aimock (the mock OpenAI-compatible and Anthropic server) with a fixture file or folder. */
export function aimock(fixtures, extra = []) {
  const bin = join(ROOT, 'node_modules/.bin/llmock');
  const child = spawn(bin, ['--port', '0', '--host', '127.0.0.1', '--log-level', 'info', '--fixtures', fixtures, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  return new Promise((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`aimock did not start: ${log}`)), 15000);
    const read = (chunk) => {
      log += chunk;
      const match = log.match(/http:\/\/127\.0\.0\.1:(\d+)/);
      if (match) {
        clearTimeout(timer);
        ready({ url: `http://127.0.0.1:${match[1]}`, log: () => log, close: () => child.kill() });
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => fail(new Error(`aimock exited (${code}): ${log}`)));
  });
}

/** A provider that allows the page's origin (answers the CORS preflight) and never answers a
 * model request; resolves to { url, open() (how many model requests are still open), close }. */
export function silentServer({ firstBytes } = {}) {
  const sockets = new Set();
  const server = createServer((request, response) => {
    if (request.method === 'OPTIONS') {
      response.writeHead(204, { 'access-control-allow-origin': '*', 'access-control-allow-headers': '*',
        'access-control-allow-methods': 'POST' }).end();
      return;
    }
    // With `firstBytes`, a stream that starts and then stalls: the head and those bytes, then
    // nothing.
    if (firstBytes !== undefined) {
      response.writeHead(200, { 'access-control-allow-origin': '*', 'content-type': 'text/event-stream' });
      response.write(firstBytes);
    }
    sockets.add(request.socket);
    request.socket.on('close', () => sockets.delete(request.socket));
  });
  return new Promise((ready) => {
    server.listen(0, '127.0.0.1', () => ready({
      url: `http://127.0.0.1:${server.address().port}`,
      open: () => sockets.size,
      close: () => new Promise((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(done);
      }),
    }));
  });
}

/** A server on loopback that allows any origin (it answers the CORS preflight) and records every
 * request it gets (`requests`: {method, url, headers}); `answer(request, response)` answers the
 * others (by default an empty 404). Resolves to { url, port, requests, close }. */
export function recordingServer(answer) {
  const requests = [];
  const server = createServer((request, response) => {
    requests.push({ method: request.method, url: request.url, headers: request.headers });
    if (request.method === 'OPTIONS') {
      response.writeHead(204, { 'access-control-allow-origin': '*', 'access-control-allow-headers': '*',
        'access-control-allow-methods': 'POST' }).end();
      return;
    }
    request.resume();
    request.on('end', () => {
      if (answer) answer(request, response);
      else response.writeHead(404, { 'access-control-allow-origin': '*' }).end();
    });
  });
  return new Promise((ready) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      ready({ url: `http://127.0.0.1:${port}`, port, requests, close: () => new Promise((done) => server.close(done)) });
    });
  });
}

/** A proxy in front of `target` (an origin) that records every model request when it arrives:
 * the engine's requests leave from a shared worker, which the browser's request events do not
 * show, and aimock's journal holds only the answered ones (a request cut off by a closed tab
 * would be missed);
 * resolves to { url, bodies (each POST's body, in arrival order), held() (how many POSTs are held
 * open, see `answered`), release(n), close }. */
export function countingProxy(target, { answered = Infinity } = {}) {
  const bodies = [];
  // POSTs open at once (arrived, not yet answered): now, and the most there were.
  let open = 0;
  let mostOpen = 0;
  // The held POSTs, in arrival order: each forwards it when called.
  const held = [];
  const pass = (incoming, outgoing, body) => {
    const upstream = forward(`${target}${incoming.url}`, { method: incoming.method, headers: incoming.headers }, (answer) => {
      outgoing.writeHead(answer.statusCode, answer.headers);
      answer.pipe(outgoing);
    });
    upstream.on('error', () => outgoing.destroy());
    outgoing.on('close', () => upstream.destroy());
    upstream.end(body);
  };
  const server = createServer((incoming, outgoing) => {
    const chunks = [];
    incoming.on('data', (chunk) => chunks.push(chunk));
    incoming.on('end', () => {
      const body = Buffer.concat(chunks);
      if (incoming.method === 'POST') {
        bodies.push(body.toString());
        open += 1;
        mostOpen = Math.max(mostOpen, open);
        outgoing.on('close', () => { open -= 1; });
      }
      // With `answered`, the POSTs after that many are held open, unanswered until `release`
      // (a model request in flight when the engine stops).
      if (incoming.method === 'POST' && bodies.length > answered) {
        const entry = () => pass(incoming, outgoing, body);
        held.push(entry);
        outgoing.on('close', () => {
          const at = held.indexOf(entry);
          if (at >= 0) held.splice(at, 1);
        });
        return;
      }
      pass(incoming, outgoing, body);
    });
  });
  return new Promise((done) => {
    server.listen(0, '127.0.0.1', () => done({
      url: `http://127.0.0.1:${server.address().port}`,
      bodies,
      held: () => held.length,
      /** The most model requests that were open at once. */
      mostOpen: () => mostOpen,
      /** Answers `n` more POSTs: the oldest held ones now, the next ones as they come. */
      release: (n = 1) => {
        answered += n;
        for (const entry of held.splice(0, n)) entry();
      },
      close: () => { server.closeAllConnections(); return new Promise((closed) => server.close(closed)); },
    }));
  });
}
