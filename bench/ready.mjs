// Time to a ready engine on a slow network: `cargo xtask bench ready [ROUNDS]` (after
// `cargo xtask dist`). Serves the built app (dist/) with its headers, behind a proxy that
// makes the network a 10 Mbit/s link with 40 ms of latency, and compresses each file as a
// static host would: gzip -9 (what the size goals count), then Brotli (what hosts that offer it
// send a browser that asks for it).
// Each round opens the app in a fresh headless Chromium profile (a cold cache) and prints, from
// navigation start: the first contentful paint, the moment the page says "Engine ready", and
// the bytes the page and its engine fetched. Then the same on loopback with no throttle.
//
// The throttle is the proxy's, not the DevTools protocol's: the engine runs in a shared worker,
// whose fetches (the engine's wasm, most of the bytes) a page's CDP network emulation does not
// slow. The link is one for all requests (a token bucket shared by every response), and each
// request waits one round trip before its first byte.
import { createServer, get } from 'node:http';
import { gzipSync, brotliCompressSync, constants } from 'node:zlib';
import { loadavg } from 'node:os';
import { serve, browser } from '../tests/browser/harness.mjs';

const rounds = Number(process.argv[2] ?? 3);
const LINK_BITS_PER_SECOND = 10_000_000;
const LATENCY_MS = 40;
const CHUNK = 16 * 1024;

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/** Compresses `body` as a host would with `encoding`: gzip -9, or Brotli at its highest
 * quality (what Netlify, Vercel and Cloudflare send a browser that accepts `br`). */
const ENCODERS = {
  gzip: (body) => gzipSync(body, { level: 9 }),
  br: (body) => brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: body.length } }),
};

/** A proxy to `target` that compresses each body (once per path) with `encoding` and sends it
 * over a shared link of `bitsPerSecond` after `latency` ms; `bytes()` is what it sent since the
 * last call. */
function slowLink(target, { bitsPerSecond, latency, encoding = 'gzip' }) {
  const compressed = new Map();
  let sent = 0;
  let files = [];
  // The time at which the shared link is free again.
  let free = 0;
  const upstream = (path) => new Promise((done, fail) => {
    get(`${target}${path.slice(1)}`, (answer) => {
      const chunks = [];
      answer.on('data', (chunk) => chunks.push(chunk));
      answer.on('end', () => done({ status: answer.statusCode, headers: answer.headers, body: Buffer.concat(chunks) }));
    }).on('error', fail);
  });
  const server = createServer(async (request, response) => {
    const asked = performance.now();
    await sleep(latency);
    const path = request.url;
    let entry = compressed.get(path);
    if (!entry) {
      const { status, headers, body } = await upstream(path);
      entry = { status, headers: { ...headers }, body: ENCODERS[encoding](body) };
      delete entry.headers['content-length'];
      delete entry.headers['transfer-encoding'];
      delete entry.headers.connection;
      entry.headers['content-encoding'] = encoding;
      entry.headers['content-length'] = String(entry.body.length);
      compressed.set(path, entry);
    }
    response.writeHead(entry.status, entry.headers);
    const file = [path, entry.body.length, asked];
    files.push(file);
    if (bitsPerSecond === Infinity) {
      sent += entry.body.length;
      response.end(entry.body);
      return;
    }
    for (let at = 0; at < entry.body.length; at += CHUNK) {
      const piece = entry.body.subarray(at, at + CHUNK);
      const start = Math.max(free, performance.now());
      free = start + (piece.length * 8 * 1000) / bitsPerSecond;
      await sleep(free - performance.now());
      sent += piece.length;
      if (!response.write(piece)) await new Promise((drained) => response.once('drain', drained));
    }
    response.end();
    file.push(performance.now());
  });
  return new Promise((ready) => {
    server.listen(0, '127.0.0.1', () => ready({
      url: `http://127.0.0.1:${server.address().port}/`,
      bytes: () => { const n = sent; sent = 0; return n; },
      files: () => { const list = files; files = []; return list; },
      close: () => new Promise((done) => server.close(done)),
    }));
  });
}

/** One cold load of the app through `link`: ms to the first contentful paint and to "Engine
 * ready", from navigation start, and the bytes sent. */
async function coldLoad(link) {
  const { page, errors, close } = await browser();
  try {
    await page.addInitScript(() => {
      const seen = () => {
        if (window.__ready == null && document.querySelector('.engine-ready')) window.__ready = performance.now();
      };
      new MutationObserver(seen).observe(document, { subtree: true, childList: true, attributes: true });
    });
    link.bytes();
    link.files();
    await page.goto(link.url);
    await page.waitForFunction(() => window.__ready != null, null, { timeout: 120000 });
    const paint = await page.evaluate(() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null);
    const ready = await page.evaluate(() => window.__ready);
    if (errors.length) throw new Error(errors.join('\n'));
    return { paint, ready, bytes: link.bytes(), files: link.files() };
  } finally {
    await close();
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const site = await serve();
try {
  const slow = { bitsPerSecond: LINK_BITS_PER_SECOND, latency: LATENCY_MS };
  const link = `${LINK_BITS_PER_SECOND / 1e6} Mbit/s, ${LATENCY_MS} ms`;
  for (const [name, options] of [
    [`${link}, gzip -9`, slow],
    [`${link}, Brotli 11`, { ...slow, encoding: 'br' }],
    ['loopback, no throttle, gzip -9', { bitsPerSecond: Infinity, latency: 0 }],
  ]) {
    const link = await slowLink(site.url, options);
    const runs = [];
    try {
      // One load untimed: the proxy compresses each file on its first request (Brotli at
      // quality 11 takes seconds for the engine's wasm), which is not the network's time.
      await coldLoad(link);
      for (let round = 0; round < rounds; round++) {
        const run = await coldLoad(link);
        runs.push(run);
        if (round === 0) {
          // Each file's bytes, and when it was asked for and sent in full (ms after the page).
          const zero = run.files[0]?.[2] ?? 0;
          const list = run.files.map(([path, bytes, asked, done]) =>
            `${path} ${bytes.toLocaleString('en')} B (${(asked - zero).toFixed(0)}–${((done ?? asked) - zero).toFixed(0)} ms)`).join(', ');
          console.log(`fetched (bytes on the wire; asked–sent): ${list}`);
        }
        console.log(`${name}: first contentful paint ${run.paint?.toFixed(0)} ms, engine ready ${run.ready.toFixed(0)} ms, ${run.bytes.toLocaleString('en')} B fetched (load average ${loadavg()[0].toFixed(2)})`);
      }
    } finally {
      await link.close();
    }
    console.log(`${name}, median of ${rounds}: first contentful paint ${median(runs.map((r) => r.paint)).toFixed(0)} ms, engine ready ${median(runs.map((r) => r.ready)).toFixed(0)} ms`);
  }
} finally {
  await site.close();
}
