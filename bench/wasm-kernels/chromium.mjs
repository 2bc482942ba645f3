// The harness's web build (BUILD.js, BUILD.wasm, BUILD.worker.js in DIR) in headless Chromium:
// `node chromium.mjs DIR BUILD MODEL THREADS N_PROMPT N_GEN REPS`, run by
// `cargo xtask bench wasm-kernels`. Serves DIR and the GGUF on a loopback origin that is
// cross-origin isolated (Emscripten's threads need SharedArrayBuffer), writes the model into
// the harness's in-memory file system, runs its main on a thread of its own (PROXY_TO_PTHREAD)
// and prints what it prints, line for line, as the Node run does.
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { join, normalize } from 'node:path';
import { browser } from '../../tests/browser/harness.mjs';

const [dir, build, model, threads, prompt, generated, reps] = process.argv.slice(2);
if (!reps) throw new Error('usage: node chromium.mjs DIR BUILD MODEL THREADS N_PROMPT N_GEN REPS');

const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };
const server = createServer((request, response) => {
  const isolation = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
  const path = new URL(request.url, 'http://x').pathname;
  if (path === '/') {
    response.writeHead(200, { ...isolation, 'content-type': 'text/html' }).end('<!doctype html><title>harness</title>');
    return;
  }
  const file = path === '/model.gguf' ? model : normalize(join(dir, path));
  if (path !== '/model.gguf' && !file.startsWith(normalize(dir))) {
    response.writeHead(404, isolation).end();
    return;
  }
  let size;
  try {
    size = statSync(file).size;
  } catch {
    response.writeHead(404, isolation).end();
    return;
  }
  const type = TYPES[file.slice(file.lastIndexOf('.'))] ?? 'application/octet-stream';
  response.writeHead(200, { ...isolation, 'content-type': type, 'content-length': size });
  createReadStream(file).pipe(response);
});
await new Promise((ready) => server.listen(0, '127.0.0.1', ready));
const origin = `http://127.0.0.1:${server.address().port}`;
const { page, errors, close } = await browser();
try {
  let printed = 0;
  const finished = new Promise((done, fail) => {
    page.on('console', (message) => {
      const text = message.text();
      if (text.startsWith('logits: ') || text.startsWith('threads ')) {
        console.log(text);
        if (text.startsWith('threads ') && ++printed === Number(reps)) done();
      } else if (text.startsWith('harness: ')) {
        fail(new Error(text));
      }
    });
    setTimeout(() => fail(new Error(`no figures after 10 minutes: ${errors.join('; ')}`)), 600_000);
  });
  await page.goto(`${origin}/`);
  if (!(await page.evaluate(() => crossOriginIsolated))) throw new Error('the page is not cross-origin isolated');
  await page.evaluate(async ({ build, args }) => {
    const bytes = new Uint8Array(await (await fetch('/model.gguf')).arrayBuffer());
    window.Module = {
      arguments: ['/model.gguf', ...args],
      preRun: [() => window.Module.FS.writeFile('/model.gguf', bytes)],
      print: (text) => console.log(text),
      printErr: (text) => console.log(text),
    };
    const script = document.createElement('script');
    script.src = `/${build}.js`;
    document.body.append(script);
  }, { build, args: [threads, prompt, generated, reps] });
  await finished;
} finally {
  await close();
  server.close();
}
