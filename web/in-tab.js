// A model in the tab: llama.cpp compiled to WebAssembly answering the engine's
// OpenAI-compatible requests, so a claim is checked with no server and no key. The engine (a
// shared worker) cannot start the worker llama.cpp runs in (a shared worker has no `Worker`),
// so a page runs it: the engine sends a page `{verityModel: "call", body}` with a port, and
// this module answers on the port with `{status, headers, body}` as a server would, after
// `{progress}` messages that tell the engine's idle clock the model is alive (loading it, or
// working on a long prompt).
//
// Two builds of llama.cpp, the same server logic in both (the chat template, tool calls, JSON
// Schema output, `top_logprobs`): in a cross-origin isolated page (the app's), the project's
// own (`llama/`, built by `cargo xtask dist` from web/llama/: ggml's WebAssembly SIMD kernels,
// on several threads); in a page that is not (an embedding site without the headers, where no
// thread can be started), npm's @wllama/wllama (`wllama/`), on one thread.
//
// `web/boot.js` (the app) and `verity.js` (the embedding) import this module only when a call
// comes, so neither build's code nor its wasm loads unless this provider is chosen.
//
// The model is named by the request's `model`: the URL of a `.gguf` file, or `file:NAME` for a
// file the person picked ([`keepModelFile`]). Either is kept in the Cache API (`verity-models`)
// so a reload does not load it from the network again.

const CACHE = "verity-models";
/** How often a call that is still working tells the engine so (its idle clock is 60 s by
 * default, and a person may set it as low as 1 s). */
const ALIVE_EVERY_MS = 500;
/** The context the model is loaded with: a claim check's longest prompt fits in it. */
const CONTEXT_TOKENS = 4096;
/** The most threads the model runs on: past four, llama.cpp's wasm gains little (its threads
 * wait on memory) and takes the cores the page and the engine need. */
const MAX_THREADS = 4;

/** What a tab needs besides the model file's own bytes (llama.cpp's context and buffers, the
 * page, its workers and the engine): measured with Qwen2.5-Coder-0.5B, whose 491 MB took the
 * tab's processes to about 1.44 GB (1,375 MiB) in the project's build (docs/BENCHMARKS.md). */
const NEEDS = { perByte: 1.3, fixed: 800e6 };

/** Why a model of `bytes` cannot run in this tab, or null: the memory the device reports
 * (`navigator.deviceMemory`, in GB, rounded down to a power of two, 8 meaning "8 or more",
 * absent in some browsers, which are not judged) against what the model needs ([`NEEDS`]). */
export function memoryProblem(bytes, device = globalThis.navigator?.deviceMemory) {
  if (!bytes || !Number.isFinite(device) || device <= 0 || device >= 8) return null;
  const needed = bytes * NEEDS.perByte + NEEDS.fixed;
  if (needed <= device * 2 ** 30) return null;
  const GB = (value) => `${(value / 1e9).toFixed(1)} GB`;
  return `the model does not fit in this device's memory: it needs about ${GB(needed)}, and this device has about ${device} GB; choose a smaller model`;
}

/** How many threads the model runs on here: threads need `SharedArrayBuffer`, which only a
 * cross-origin isolated page has (the app's headers make it
 * one: Cross-Origin-Opener-Policy and Cross-Origin-Embedder-Policy); a page that is not, like
 * an embedding site without them, runs it on one. */
export function threads() {
  if (!globalThis.crossOriginIsolated) return 1;
  return Math.max(1, Math.min(navigator.hardwareConcurrency || 1, MAX_THREADS));
}

let loaded = null; // { model, ready }: `ready` resolves to the model's runtime
let turn = Promise.resolve(); // one completion at a time: the model runs one

/** llama.cpp built by the project (web/llama/), in a worker of its own: it needs threads,
 * so only a cross-origin isolated page runs it. */
class OwnBuild {
  constructor() {
    this.worker = new Worker(new URL("./llama/worker.js", import.meta.url));
    this.next = 1;
    this.chats = new Map(); // id -> { resolve, reject }
    this.loading = null;
    this.worker.onmessage = ({ data }) => {
      if (data?.answer) {
        const chat = this.chats.get(data.answer.id);
        this.chats.delete(data.answer.id);
        chat?.resolve({ status: data.answer.status, body: data.answer.body });
      } else if (data?.loaded) {
        this.loading?.resolve();
      } else if (data?.failed) {
        this.loading?.reject(new Error(data.failed));
      } else if (data?.crashed) {
        this.fail(new Error(`llama.cpp stopped: ${data.crashed}`));
        this.onCrash?.();
      }
    };
    this.worker.onerror = (event) => this.fail(new Error(event.message || "the model's worker failed"));
  }

  /** Every waiting call ends with `error` (the worker stopped). */
  fail(error) {
    this.loading?.reject(error);
    for (const chat of this.chats.values()) chat.reject(error);
    this.chats.clear();
  }

  load(blob, { contextTokens, threads }) {
    this.threads = threads;
    return new Promise((resolve, reject) => {
      this.loading = { resolve, reject };
      this.worker.postMessage({ load: { blob, contextTokens, threads } });
    });
  }

  /** The server's answer to `body`: `{status, body}` (the body JSON text). */
  chat(body, signal) {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.chats.set(id, { resolve, reject });
      this.worker.postMessage({ chat: { id, body: JSON.stringify(body) } });
      signal?.addEventListener("abort", () => this.worker.postMessage({ cancel: id }), { once: true });
    });
  }

  exit() {
    this.fail(new Error("the model was unloaded"));
    this.worker.terminate();
  }
}

/** npm's @wllama/wllama, on one thread: for a page that is not cross-origin isolated. */
class Wllama {
  async load(blob, { contextTokens, threads }) {
    const { Wllama: Runtime } = await import("./wllama/index.js");
    const wasm = new URL("./wllama/wllama.wasm", import.meta.url).href;
    this.wllama = new Runtime({ default: wasm }, { suppressNativeLog: true });
    // Never wllama's compatibility build: it is loaded from a CDN (in browsers without JSPI or
    // 64-bit memory), and the app runs no code from another origin.
    this.wllama.setCompat(null);
    await this.wllama.loadModel([blob], { n_ctx: contextTokens, n_threads: threads });
    this.threads = this.wllama.getNumThreads();
  }

  async chat(body, signal) {
    const completion = await this.wllama.createChatCompletion({ ...body, abortSignal: signal });
    return { status: 200, body: JSON.stringify(completion) };
  }

  exit() {
    return this.wllama?.exit();
  }
}

/** The cache key of a picked file (an address of this origin that nothing serves). */
function fileKey(name) {
  return new URL(`/.verity-models/${encodeURIComponent(name)}`, location.origin).href;
}

/** Where the model `reference` is kept, and where to fetch it when it is not. */
function modelKey(reference) {
  if (reference.startsWith("file:")) return { key: fileKey(reference.slice(5)), fetchable: false };
  const url = new URL(reference, location.href);
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new Error(`the model ${JSON.stringify(reference)} is neither an http(s) URL of a .gguf file nor a picked file`);
  }
  return { key: url.href, fetchable: true };
}

/** Tells whoever shows it how the model is doing (`web/boot.js` shows it on the app's page). */
function announce(detail) {
  globalThis.dispatchEvent(new CustomEvent("verity-model", { detail }));
}

/** Keeps a file the person picked in the browser; answers the model reference for it. */
export async function keepModelFile(file) {
  if (!(await isGguf(file))) {
    throw new Error(`${file.name} is not a GGUF model file (it does not start with "GGUF")`);
  }
  const cache = await caches.open(CACHE);
  await cache.put(fileKey(file.name), new Response(file, { headers: { "content-length": String(file.size) } }));
  announce({ state: "kept", model: `file:${file.name}`, bytes: file.size });
  return `file:${file.name}`;
}

/** Whether `blob` starts as a GGUF file does. */
async function isGguf(blob) {
  const head = new Uint8Array(await blob.slice(0, 4).arrayBuffer());
  return String.fromCharCode(...head) === "GGUF";
}

/** How much of a download is kept at a time: the download is written to the cache in pieces
 * of this size (the last one smaller), so a download that breaks keeps what arrived. */
const PIECE_BYTES = 32 * 2 ** 20;
/** Where the piece of model `key` that starts at byte `start` is kept: an address of this
 * origin that nothing serves (not the model's URL with a fragment: the cache ignores
 * fragments, so every piece would be one entry). */
function pieceKey(key, start) {
  return new URL(`/.verity-model-pieces/${encodeURIComponent(key)}/${start}`, location.origin).href;
}

/** The pieces of an unfinished download of `key` kept in `cache`, in order, while they follow
 * one another from the first byte: `{request, response, start, size, total}` (`total` 0 when
 * the server did not say the file's size; the response's body not read yet). Pieces that do
 * not follow on are deleted. */
async function keptPieces(cache, key) {
  const pieces = [];
  const prefix = pieceKey(key, "");
  for (const request of await cache.keys()) {
    if (!request.url.startsWith(prefix)) continue;
    const start = Number(request.url.slice(prefix.length));
    const response = await cache.match(request);
    const size = Number(response?.headers.get("content-length"));
    const total = Number(response?.headers.get("x-verity-total")) || 0;
    pieces.push({ request, response, start, size, total });
  }
  pieces.sort((a, b) => a.start - b.start);
  let end = 0;
  let total = 0;
  const following = [];
  for (const piece of pieces) {
    // A size the server did not say (0) agrees with any.
    const agrees = !piece.total || !total || piece.total === total;
    if (piece.start === end && Number.isFinite(piece.size) && piece.size > 0 && agrees) {
      total ||= piece.total;
      following.push(piece);
      end += piece.size;
    } else {
      await cache.delete(piece.request);
    }
  }
  return following;
}

/** Deletes the kept `pieces` of a download (made whole, started over, or given up). */
async function dropPieces(cache, pieces) {
  for (const piece of pieces) await cache.delete(piece.request);
}

/** The size of the whole file from a 206 response's `Content-Range` (`bytes 10-99/100`), or
 * 0 when the server does not expose it. */
function rangeTotal(response) {
  const total = /\/(\d+)$/.exec(response.headers.get("content-range") ?? "")?.[1];
  return Number(total) || 0;
}

/** The first byte a 206 response starts at (`Content-Range`), or null when not exposed. */
function rangeStart(response) {
  const start = /^bytes (\d+)-/.exec(response.headers.get("content-range") ?? "")?.[1];
  return start === undefined ? null : Number(start);
}

/** The model as a Blob: from the cache, else downloaded (with progress) and kept.
 *
 * The download is written to the cache piece by piece ([`PIECE_BYTES`]) and the model is read
 * back from there once whole: a Blob the page builds from a download's thousands of chunks is
 * not reliably readable once it is large (Chromium refused a 128 MB slice of
 * Qwen2.5-Coder-0.5B's 491 MB with `NotReadableError`, which wllama, reading the model slice
 * by slice, stopped on), while the cache's is a file the browser keeps; nor does the page then
 * hold the whole file in its memory while it loads. A download that breaks keeps what arrived,
 * and the next one asks the server for the rest (`Range`); a server that cannot resume sends
 * the whole file again, and the pieces are dropped. */
async function modelBlob(reference, progress) {
  const { key, fetchable } = modelKey(reference);
  const cache = await caches.open(CACHE);
  const kept = await cache.match(key);
  if (kept) return kept.blob();
  if (!fetchable) throw new Error(`the model file ${reference.slice(5)} is no longer kept in this browser: pick it again`);
  let pieces = await keptPieces(cache, key);
  let from = pieces.reduce((sum, piece) => sum + piece.size, 0);
  let total = pieces.find((piece) => piece.total)?.total ?? 0;
  // Every byte already here (a tab closed between the last piece and the whole): no request.
  if (!(total && from === total)) {
    const response = await fetch(key, from ? { headers: { range: `bytes=${from}-` } } : {});
    if (!response.ok) throw new Error(`downloading the model ${key} failed: HTTP ${response.status}`);
    const resumed = from > 0 && response.status === 206 && (rangeStart(response) ?? from) === from;
    if (!resumed) {
      // From the start (the server sent the whole file, or this is the first try).
      await dropPieces(cache, pieces);
      pieces = [];
      from = 0;
    }
    const length = Number(response.headers.get("content-length")) || 0;
    total = resumed ? rangeTotal(response) || total || 0 : length;
    if (resumed && total && length && from + length !== total) {
      // The rest the server sends would not make the file the first pieces began.
      await response.body?.cancel().catch(() => {});
      await dropPieces(cache, pieces);
      throw new Error(`downloading the model ${key} failed: the file changed on the server since its download began (checking again downloads it from the start)`);
    }
    // Known before the download when the server says its size: a model this device cannot
    // hold is not downloaded (`model` judges every model by its file's size too).
    const problem = memoryProblem(total);
    if (problem) {
      await response.body?.cancel().catch(() => {});
      throw new Error(problem);
    }
    const arrived = await download(cache, key, response, from, total, progress);
    if (arrived.memory) return arrived.memory;
    if (arrived.broke || (total && arrived.end !== total)) {
      const mb = (bytes) => (bytes / 1e6).toFixed(1);
      const why = total
        ? `the download broke after ${mb(arrived.end)} of ${mb(total)} MB (what arrived is kept: checking again resumes from there)`
        : arrived.broke?.message ?? String(arrived.broke);
      throw new Error(`downloading the model ${key} failed: ${why}`);
    }
    pieces = await keptPieces(cache, key);
  }
  return wholeModel(cache, key, pieces);
}

/** Writes `response`'s body to `cache` in pieces from byte `from` on, reporting progress:
 * `{end}` (the byte after the last one kept) and `broke` (why the download stopped short),
 * or `{memory}`: the whole model held in memory when the browser's storage is full. */
async function download(cache, key, response, from, total, progress) {
  const reader = response.body.getReader();
  let end = from;
  let chunks = [];
  let bytes = 0;
  const keep = async () => {
    if (!bytes) return;
    const headers = { "content-type": "application/octet-stream", "content-length": String(bytes), "x-verity-total": String(total) };
    await cache.put(pieceKey(key, end), new Response(new Blob(chunks), { headers }));
    end += bytes;
    chunks = [];
    bytes = 0;
  };
  let broke = null;
  try {
    for (;;) {
      let read;
      try {
        read = await reader.read();
      } catch (error) {
        broke = error;
        break;
      }
      if (read.done) break;
      chunks.push(read.value);
      bytes += read.value.length;
      progress({ loaded: end + bytes, total });
      if (bytes >= PIECE_BYTES) await keep();
    }
    // What arrived before a break is kept too.
    await keep();
  } catch (error) {
    if (error?.name !== "QuotaExceededError") throw error;
    await reader.cancel().catch(() => {});
    await dropPieces(cache, await keptPieces(cache, key));
    // Not kept (the browser's storage is full): downloaded again and held in memory (and
    // downloaded again after a reload).
    announce({ state: "not-kept", model: key, message: String(error?.message ?? error) });
    const again = await fetch(key);
    if (!again.ok) throw new Error(`downloading the model ${key} failed: HTTP ${again.status}`);
    const blob = await again.blob();
    if (!(await isGguf(blob))) throw new Error(`${key} is not a GGUF model file`);
    return { memory: blob };
  }
  return { end, broke };
}

/** The kept pieces made one cache entry (the model), the pieces then deleted, and the model
 * read back from the cache. */
async function wholeModel(cache, key, pieces) {
  const blobs = [];
  for (const piece of pieces) blobs.push(await piece.response.blob());
  const whole = new Blob(blobs);
  if (!(await isGguf(whole))) {
    await dropPieces(cache, pieces);
    throw new Error(`${key} is not a GGUF model file`);
  }
  const headers = { "content-type": "application/octet-stream", "content-length": String(whole.size) };
  try {
    await cache.put(key, new Response(whole, { headers }));
  } catch (error) {
    // No room for the whole beside its pieces: the pieces stay, and the model is read from
    // them (and made whole again by the next load).
    if (error?.name === "QuotaExceededError") return whole;
    throw error;
  }
  await dropPieces(cache, pieces);
  const stored = await cache.match(key);
  if (!stored) throw new Error(`the model ${key} was downloaded but the browser did not keep it`);
  return stored.blob();
}

/** The loaded model `reference`, loading it (and letting the one loaded before go) if needed. */
function model(reference, progress) {
  if (loaded?.model === reference) return loaded.ready;
  const previous = loaded;
  // The project's build wherever threads can start (even on one core: the server's logic runs
  // its loop on threads of its own), wllama's where they cannot.
  const runtime = globalThis.crossOriginIsolated ? new OwnBuild() : new Wllama();
  // A build that stopped is let go: the next call loads the model again.
  runtime.onCrash = () => {
    if (loaded?.ready === ready) loaded = null;
    runtime.exit();
  };
  const ready = (async () => {
    await previous?.ready.then((old) => old.exit()).catch(() => {});
    announce({ state: "loading", model: reference, loaded: 0, total: 0 });
    const blob = await modelBlob(reference, (done) => {
      progress();
      announce({ state: "loading", model: reference, ...done });
    });
    // Whichever way it came (kept, downloaded, picked from disk): one the device cannot hold
    // is not loaded.
    const problem = memoryProblem(blob.size);
    if (problem) throw new Error(problem);
    try {
      await runtime.load(blob, { contextTokens: CONTEXT_TOKENS, threads: threads() });
    } catch (problem) {
      // The device said nothing, or too much: what llama.cpp's allocation says, in words.
      const text = String(problem?.message ?? problem);
      if (/memory|alloc|RangeError/i.test(text)) throw new Error(`the model does not fit in this tab's memory (${(blob.size / 1e9).toFixed(1)} GB file): ${text}`);
      throw problem;
    }
    announce({ state: "ready", model: reference, bytes: blob.size, threads: runtime.threads });
    return runtime;
  })();
  loaded = { model: reference, ready };
  ready.catch(() => {
    if (loaded?.ready === ready) loaded = null;
    // A runtime that failed to load holds nothing worth keeping (a worker, its memory).
    Promise.resolve(runtime.exit()).catch(() => {});
  });
  return ready;
}

/** The request's OpenAI-compatible body as the runtime takes it: one model (the loaded one),
 * and the whole answer at once (a stream is made of it after: [`asStream`]). */
function options(body) {
  const { model: _model, stream: _stream, stream_options: _streamOptions, ...rest } = body;
  return rest;
}

/** A whole chat completion as the SSE stream a streaming request asked for: one chunk with the
 * message (its calls by index, as a server streams them) and the usage, then `[DONE]`. */
function asStream(completion) {
  const choice = completion.choices?.[0] ?? {};
  const message = choice.message ?? {};
  const delta = { role: "assistant", content: message.content ?? "" };
  if (message.tool_calls?.length) {
    delta.tool_calls = message.tool_calls.map((call, index) => ({ index, ...call }));
  }
  const chunk = {
    id: completion.id,
    object: "chat.completion.chunk",
    model: completion.model,
    choices: [{ index: 0, delta, finish_reason: choice.finish_reason ?? "stop" }],
    usage: completion.usage,
  };
  return `data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`;
}

/** The last completion's speed, as llama.cpp reports it (`timings`): what the tests print. */
export let lastTimings = null;

/** Answers one of the engine's calls on `port` (see the top of this file). */
export async function answer(message, port) {
  const cancel = new AbortController();
  port.onmessage = ({ data }) => {
    if (data?.cancel) cancel.abort();
  };
  const alive = () => port.postMessage({ progress: true });
  const timer = setInterval(alive, ALIVE_EVERY_MS);
  const reply = (status, body, type = "application/json") =>
    port.postMessage({ status, headers: [["content-type", type]], body });
  const error = (status, text) => reply(status, JSON.stringify({ error: { message: text, type: "in_tab_model" } }));
  try {
    let body;
    try {
      body = JSON.parse(message.body);
    } catch (problem) {
      return error(400, `the request is not JSON: ${problem.message}`);
    }
    if (typeof body?.model !== "string" || body.model.trim() === "") {
      return error(400, "no model: set the model to the URL of a .gguf file, or pick a .gguf file");
    }
    let runtime;
    try {
      runtime = await model(body.model.trim(), alive);
    } catch (problem) {
      announce({ state: "failed", model: body.model, message: String(problem?.message ?? problem) });
      return error(400, `the model could not be loaded in this tab: ${problem?.message ?? problem}`);
    }
    const mine = turn.then(async () => {
      if (cancel.signal.aborted) return null;
      return runtime.chat(options(body), cancel.signal);
    });
    turn = mine.catch(() => {});
    const answered = await mine;
    // Cancelled: the engine no longer waits for an answer.
    if (answered === null || cancel.signal.aborted) return;
    if (answered.status !== 200) {
      // The server's own error (a request it refuses, as llama.cpp's server would): passed on.
      return reply(answered.status, answered.body);
    }
    const completion = JSON.parse(answered.body);
    lastTimings = completion.timings ?? null;
    announce({ state: "answered", model: body.model, timings: lastTimings, threads: runtime.threads });
    if (body.stream) reply(200, asStream(completion), "text/event-stream");
    else reply(200, answered.body);
  } catch (problem) {
    if (!cancel.signal.aborted) error(500, `the model in this tab failed: ${problem?.message ?? problem}`);
  } finally {
    clearInterval(timer);
  }
}
