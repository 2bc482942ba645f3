// Verity for any web page: claim checks and typed steps, run in a Web Worker (the engine's own
// wasm, the same worker as the Verity app), with promises, progress events, AbortSignal cancel
// and typed errors; and the <verity-check> element, defined when this module is imported.
//
//   <script type="module" src="/verity/verity.js"></script>
//   <verity-check claim="The Eiffel Tower is in Paris.">
//     <script type="application/json">[{"id": "e1", "text": "The Eiffel Tower is in Paris."}]</script>
//   </verity-check>
//
// The worker runs in memory (`?storage=memory`): an embedded check never reads or writes the
// page origin's IndexedDB. Everything that comes from a corpus or a model is rendered as text.
// The messages are the worker's contract (crate verity-messages); nothing here reaches into
// the engine.

// The engine with the whole of JSON Schema (`runStep` validates a page's own schemas).
const WORKER_URL = new URL('./verity-worker_loader.js?storage=memory&engine=full', import.meta.url);

/** Runs one of the engine's requests to the model in the tab (see verity-in-tab.js, beside
 * this module with its llama/ and wllama/ folders) and answers on `port`. */
function answerModelCall(message, port) {
  import(new URL('./verity-in-tab.js', import.meta.url).href)
    .then((model) => model.answer(message, port))
    .catch((error) => port.postMessage({ error: `the model in the tab could not start: ${error?.message ?? error}` }));
}

/** A typed failure: `kind` is the core's stable failure kind (`provider`, `turn-limit`,
 * `cancelled`, `config`, ...), `spent` what was spent before it failed. */
export class VerityError extends Error {
  constructor(failure) {
    super(failure?.message ?? String(failure));
    this.name = 'VerityError';
    this.kind = failure?.kind ?? 'worker';
    this.spent = failure?.spent ?? null;
    this.failure = failure;
  }
}

let sequence = 0;
const nextId = (prefix) => `${prefix}-${Date.now().toString(36)}-${++sequence}`;

const NOTHING_SPENT = Object.freeze({
  turns: 0, requests: 0, failedAttempts: 0, retries: 0,
  usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 },
});

const cancelledBeforeStart = () => new VerityError({
  kind: 'cancelled', message: 'cancelled before it started (the signal was already aborted)',
  spent: NOTHING_SPENT,
});

/** The worker's provider choice for `provider`: omitted, null or `"offline"` is the offline
 * baseline (a lexical heuristic, not a language model); an object is the core's provider JSON
 * (`{"api": "openai", "baseUrl": ..., "model": ..., "apiKey": ...}` or `{"api": "anthropic", ...}`). */
function providerChoice(provider) {
  if (provider == null || provider === 'offline' || provider?.kind === 'offline') return { kind: 'offline' };
  if (typeof provider === 'string') return providerChoice(JSON.parse(provider));
  if (provider.kind === 'network') return provider;
  if (typeof provider !== 'object') throw new TypeError('provider: omit it for the offline baseline, or give the provider JSON');
  return { kind: 'network', config: provider };
}

function checkItems(items) {
  if (!Array.isArray(items)) throw new TypeError('corpus items: an array of {id, text}');
  return items.map((item, index) => {
    if (item == null || typeof item.id !== 'string' || typeof item.text !== 'string') {
      throw new TypeError(`corpus items[${index}]: an object with a string id and a string text`);
    }
    return { id: item.id, text: item.text };
  });
}

/** A corpus in the worker, held in memory, indexed (BM25) after every `add`. */
export class VerityCorpus {
  #verity;
  /** The worker's name for it. */
  name;

  constructor(verity, name) {
    this.#verity = verity;
    this.name = name;
  }

  /** Adds items (`[{id, text}]`), all or nothing; resolves to the corpus summary
   * (`{id, items, bytes, indexed, indexMs}`), rejects with a `VerityError` of kind `corpus`
   * naming the item or line at fault. */
  add(items) {
    return this.#verity._addToCorpus(this.name, { items: checkItems(items) });
  }

  /** Adds a file's text (`.txt`/`.md`: one item per paragraph; `.jsonl`/`.json`: `{id, text}`
   * objects; `.csv`: id and text columns), all or nothing, like `add`. */
  addFile(name, text) {
    return this.#verity._addToCorpus(this.name, { files: [{ name: String(name), text: String(text) }] });
  }

  /** Forgets the corpus in the worker (checks already running keep their copy). */
  drop() {
    this.#verity._post({ type: 'dropCorpus', name: this.name });
  }
}

/** The engine, in its own worker. Emits `progress` events (`detail: {id, event}`, the core's
 * event JSON: stages, model calls, tool calls, retries, streamed pieces). */
export class Verity extends EventTarget {
  #worker;
  #provider;
  #concurrency;
  #jobs = new Map(); // id -> { resolve, reject, onEvent, tools, signal, onAbort }
  #corpusWaits = new Map(); // corpus name -> [{ resolve, reject }], answered in order
  #failed = null;
  // Messages wait here until the worker says `ready`: a module worker drops what arrives before
  // its wasm has installed the message listener.
  #outbox = [];

  /**
   * @param {object} [options]
   * @param {object|string} [options.provider] omitted: the offline baseline; else the provider JSON.
   * @param {number} [options.concurrency] how many claim checks, or an answer's sentences, run at once (default 2).
   * @param {string|URL} [options.workerUrl] where the worker's loader is (default: beside this module).
   */
  constructor({ provider, concurrency = 2, workerUrl } = {}) {
    super();
    this.#provider = providerChoice(provider);
    this.#concurrency = Math.max(1, Math.floor(concurrency));
    this.#worker = new Worker(workerUrl ?? WORKER_URL, { type: 'module', name: 'verity-engine' });
    this.#worker.addEventListener('message', (event) => {
      // The model in the tab (`{"api": "openai", "baseUrl": "in-tab:", "model": URL}`): the
      // engine asks this page to run it (verity-in-tab.js, loaded only then).
      if (event.data?.verityModel === 'call' && event.ports?.[0]) answerModelCall(event.data, event.ports[0]);
      // A trap in the engine's wasm: it closed (its loader says so); what waits on it fails.
      else if (event.data?.verityEngine === 'crashed') this.#fail(`the Verity engine crashed: ${event.data.message}`);
      else this.#receive(event.data);
    });
    this.#worker.addEventListener('error', (event) => {
      event.preventDefault?.();
      this.#fail(`the Verity worker failed to load or crashed: ${event.message || 'no message'} (is ${WORKER_URL.pathname} served beside verity.js?)`);
    });
  }

  /** A new, empty corpus. */
  createCorpus() {
    return new VerityCorpus(this, nextId('corpus'));
  }

  /**
   * Checks `claim` against `corpus`; resolves to the core's report JSON (`claim`, `assessment`
   * with `verdict`, `confidence` and `citations`, `route`, `summary`, `requests`, `usage`)
   * plus `cited`, the corpus items its citations quote (`[{id, text}]`).
   * Rejects with a `VerityError` (kind and what was spent); `signal` cancels it (kind `cancelled`).
   */
  checkClaim({ claim, corpus, signal, onEvent, provider } = {}) {
    if (typeof claim !== 'string' || !claim.trim()) return Promise.reject(new TypeError('checkClaim: claim must be a non-empty string'));
    if (!(corpus instanceof VerityCorpus)) return Promise.reject(new TypeError('checkClaim: corpus must come from verity.createCorpus()'));
    if (signal?.aborted) return Promise.reject(cancelledBeforeStart());
    const id = nextId('check');
    const promise = this.#track(id, { onEvent, signal });
    this._post({
      type: 'check',
      checks: [{ id, claim }],
      provider: provider === undefined ? this.#provider : providerChoice(provider),
      concurrency: this.#concurrency,
      corpus: corpus.name,
    });
    return promise;
  }

  /**
   * Checks a whole answer against `corpus`, sentence by sentence; resolves to the core's
   * answer report JSON (`answer`, `sentences` with each one's `span` in UTF-8 and UTF-16,
   * `status`, `confidence`, located `citations` and checked `marks`, `counts`,
   * `supportedShare`, `faithful`, `requests`, `usage`) plus `cited`, the corpus items quoted.
   * `marks` maps the answer's citation marks to passage ids (`{"1": "e1"}`); `decompose: true`
   * splits each sentence into atomic claims first (one more request a sentence; each
   * sentence's `claims` then says how each fared); `onSentence` is called with each sentence's
   * report as its check ends. Rejects like `checkClaim`.
   */
  checkAnswer({ answer, corpus, marks, decompose, signal, onEvent, onSentence, provider } = {}) {
    if (typeof answer !== 'string' || !answer.trim()) return Promise.reject(new TypeError('checkAnswer: answer must be a non-empty string'));
    if (!(corpus instanceof VerityCorpus)) return Promise.reject(new TypeError('checkAnswer: corpus must come from verity.createCorpus()'));
    if (marks != null && (typeof marks !== 'object' || Object.values(marks).some((id) => typeof id !== 'string'))) {
      return Promise.reject(new TypeError('checkAnswer: marks maps each mark to a passage id ({"1": "e1"})'));
    }
    if (decompose != null && typeof decompose !== 'boolean') return Promise.reject(new TypeError('checkAnswer: decompose must be true or false'));
    if (signal?.aborted) return Promise.reject(cancelledBeforeStart());
    const id = nextId('answer');
    const events = (event) => {
      if (event?.type === 'sentenceChecked') onSentence?.(event.sentence);
      onEvent?.(event);
    };
    const promise = this.#track(id, { onEvent: events, signal });
    const check = { id, claim: answer, kind: 'answer' };
    if (marks) check.marks = { ...marks };
    if (decompose) check.decompose = true;
    this._post({
      type: 'check',
      checks: [check],
      provider: provider === undefined ? this.#provider : providerChoice(provider),
      concurrency: this.#concurrency,
      corpus: corpus.name,
    });
    return promise;
  }

  /**
   * Runs a typed step: resolves to the value the model submitted, valid against `schema`.
   * `tools`: `[{name, description, parameters, run(args, {signal}), replaySafe?, sequential?}]`;
   * `run` is called with arguments already validated against `parameters` and returns a string
   * (or a value, sent as JSON); a throw is reported to the model as the tool's error.
   * Optional: `maxTurns`, `maxAttempts`, `retry` (the core's step configuration).
   */
  runStep({ system, prompt, schema, tools = [], signal, onEvent, provider, maxTurns, maxAttempts, retry } = {}) {
    if (typeof prompt !== 'string' || !prompt) return Promise.reject(new TypeError('runStep: prompt must be a non-empty string'));
    if (signal?.aborted) return Promise.reject(cancelledBeforeStart());
    const byName = new Map();
    const specs = [];
    for (const tool of tools) {
      if (!tool || typeof tool.name !== 'string' || typeof tool.run !== 'function') {
        return Promise.reject(new TypeError('runStep: every tool needs a name and a run function'));
      }
      byName.set(tool.name, tool);
      const spec = { name: tool.name, description: tool.description ?? '', parameters: tool.parameters ?? { type: 'object' } };
      if (tool.replaySafe !== undefined) spec.replaySafe = Boolean(tool.replaySafe);
      if (tool.sequential !== undefined) spec.sequential = Boolean(tool.sequential);
      specs.push(spec);
    }
    const config = { kind: 'step', prompt, schema };
    if (system !== undefined) config.system = system;
    if (specs.length) config.tools = specs;
    if (maxTurns !== undefined) config.maxTurns = maxTurns;
    if (maxAttempts !== undefined) config.maxAttempts = maxAttempts;
    if (retry !== undefined) config.retry = retry;
    const id = nextId('step');
    const promise = this.#track(id, { onEvent, signal, tools: byName });
    this._post({ type: 'runStep', id, config, provider: provider === undefined ? this.#provider : providerChoice(provider) });
    return promise;
  }

  /** Stops the worker; whatever runs is rejected (kind `cancelled`). */
  terminate() {
    this.#worker.terminate();
    this.#fail('the Verity worker was terminated', 'cancelled');
  }

  /** @internal */
  _post(message) {
    if (this.#failed) throw this.#failed;
    if (this.#outbox) this.#outbox.push(message);
    else this.#worker.postMessage(message);
  }

  /** @internal */
  _addToCorpus(name, { items = [], files = [] }) {
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise((resolve, reject) => {
      const waits = this.#corpusWaits.get(name) ?? [];
      waits.push({ resolve, reject });
      this.#corpusWaits.set(name, waits);
      this._post({ type: 'addToCorpus', name, items, files });
    });
  }

  #track(id, { onEvent, signal, tools }) {
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise((resolve, reject) => {
      const job = { resolve, reject, onEvent, tools, signal, onAbort: null };
      if (signal) {
        job.onAbort = () => this._post({ type: 'cancel', id });
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.#jobs.set(id, job);
    });
  }

  #settle(id, settle) {
    const job = this.#jobs.get(id);
    if (!job) return;
    this.#jobs.delete(id);
    if (job.onAbort) job.signal.removeEventListener('abort', job.onAbort);
    settle(job);
  }

  #receive(message) {
    switch (message?.type) {
      case 'ready': {
        const outbox = this.#outbox ?? [];
        this.#outbox = null;
        this.#worker.postMessage({ verityModel: 'runner' });
        for (const queued of outbox) this.#worker.postMessage(queued);
        return;
      }
      case 'namedCorpus':
      case 'namedCorpusRejected': {
        const waits = this.#corpusWaits.get(message.name) ?? [];
        const wait = waits.shift();
        if (!waits.length) this.#corpusWaits.delete(message.name);
        if (!wait) return;
        if (message.type === 'namedCorpus') wait.resolve(message.corpus);
        else {
          const where = message.line ? `${message.file}, line ${message.line}` : message.file;
          wait.reject(new VerityError({ kind: 'corpus', message: `${where}: ${message.message}`, file: message.file, line: message.line ?? null }));
        }
        return;
      }
      case 'progress': {
        const job = this.#jobs.get(message.id);
        if (!job) return;
        job.onEvent?.(message.event);
        this.dispatchEvent(new CustomEvent('progress', { detail: { id: message.id, event: message.event } }));
        return;
      }
      case 'finished': {
        const { result } = message;
        this.#settle(result.id, (job) => {
          if (result.outcome.status === 'report') job.resolve({ ...result.outcome.report, cited: result.cited ?? [] });
          else job.reject(new VerityError(result.outcome.failure));
        });
        return;
      }
      case 'stepFinished': {
        this.#settle(message.id, (job) => {
          if (message.outcome.status === 'value') job.resolve(message.outcome.value);
          else job.reject(new VerityError(message.outcome.failure));
        });
        return;
      }
      case 'toolCall':
        this.#runTool(message);
        return;
      case 'error':
        this.dispatchEvent(new CustomEvent('error', { detail: { message: message.message } }));
        return;
      default:
        // queued, corpus, demo: nothing to do for an embedding.
    }
  }

  async #runTool({ id, call, tool, arguments: args }) {
    const job = this.#jobs.get(id);
    const run = job?.tools?.get(tool)?.run;
    let content;
    let isError = false;
    try {
      if (!run) throw new Error(`no page tool named ${JSON.stringify(tool)}`);
      const value = await run(args, { signal: job.signal });
      content = typeof value === 'string' ? value : JSON.stringify(value ?? null);
    } catch (error) {
      isError = true;
      content = error instanceof Error ? error.message : String(error);
    }
    if (this.#jobs.has(id) && !this.#failed) this._post({ type: 'toolResult', id, call, content, isError });
  }

  #fail(message, kind = 'worker') {
    this.#failed = new VerityError({ kind, message, spent: NOTHING_SPENT });
    for (const id of [...this.#jobs.keys()]) this.#settle(id, (job) => job.reject(this.#failed));
    for (const waits of this.#corpusWaits.values()) for (const wait of waits) wait.reject(this.#failed);
    this.#corpusWaits.clear();
  }
}

// ---------------------------------------------------------------------------------------------
// <verity-check>

const engines = new Map(); // provider JSON -> Verity (one worker per provider, shared by elements)

/** The headers whose values are public, as the core names them (`PUBLIC_HEADERS`): every other
 * header of a provider's `headers` may carry a key (`x-goog-api-key`, `cookie`, a gateway's own). */
const PUBLIC_HEADERS = ['accept', 'accept-encoding', 'accept-language', 'cache-control', 'content-type',
  'user-agent', 'anthropic-version', 'anthropic-beta', 'anthropic-dangerous-direct-browser-access',
  'http-referer', 'referer', 'x-title', 'openai-beta'];

/** Whether a query parameter's name looks like a credential, as the core reads it
 * (`is_credential_parameter`). */
function credentialParameter(name) {
  let decoded = name;
  try { decoded = decodeURIComponent(name.replace(/\+/g, ' ')); } catch { /* kept as written */ }
  return /key|token|secret|sig|auth|pass|credential|session/i.test(decoded);
}

/** The credential-looking query parameters of `url` that carry a value. */
function credentialParameters(url) {
  const at = url.indexOf('?');
  if (at < 0) return [];
  const query = url.slice(at + 1).split('#')[0];
  return query.split(/[&;]/).map((pair) => pair.split('='))
    .filter(([name, value]) => credentialParameter(name) && (value ?? '').trim() !== '')
    .map(([name]) => name);
}

/** The `provider` attribute's provider, refused (a `VerityError` of kind `config`) when it
 * carries an API key: an attribute is the page's markup, which every visitor can read. */
function attributeProvider(text) {
  if (!text) return undefined;
  let provider;
  try { provider = JSON.parse(text); } catch (error) {
    throw new VerityError({ kind: 'config', message: `the provider attribute is not JSON: ${error.message}`, spent: NOTHING_SPENT });
  }
  const config = provider?.kind === 'network' ? provider.config : provider;
  const keys = [];
  if (config && typeof config === 'object') {
    for (const [field, value] of Object.entries(config)) {
      if (/^api[-_]?key$/i.test(field) && value) keys.push(field);
    }
    const headers = Array.isArray(config.headers) ? config.headers : Object.entries(config.headers ?? {});
    for (const header of headers) {
      const name = String(Array.isArray(header) ? header[0] : header?.name ?? '');
      if (!PUBLIC_HEADERS.includes(name.trim().toLowerCase())) keys.push(`headers: ${name}`);
    }
    if (typeof config.baseUrl === 'string') {
      for (const name of credentialParameters(config.baseUrl)) keys.push(`baseUrl: ?${name}=`);
    }
  }
  if (keys.length) {
    throw new VerityError({
      kind: 'config',
      message: `the provider attribute carries an API key (${keys.join(', ')}), which every visitor of this page can read in its markup, so it is refused and nothing was sent. `
        + 'Give the key from script instead: set the element\'s provider property (element.provider = {api, baseUrl, model, apiKey}), '
        + 'or call new Verity({ provider }).checkClaim(...)',
      spent: NOTHING_SPENT,
    });
  }
  return provider;
}

function engineFor(provider) {
  const key = JSON.stringify(providerChoice(provider));
  let engine = engines.get(key);
  if (!engine) {
    engine = new Verity({ provider });
    engines.set(key, engine);
  }
  return engine;
}

const STYLE = `
:host {
  display: block;
  font: var(--verity-font, inherit);
  color: var(--verity-text, inherit);
  background: var(--verity-background, transparent);
  border: var(--verity-border, 1px solid #c9ced6);
  border-radius: var(--verity-radius, 8px);
  padding: var(--verity-padding, 0.75rem 1rem);
  max-width: var(--verity-max-width, 48rem);
}
:host([hidden]) { display: none; }
.claim { margin: 0 0 0.5rem; font-weight: 600; }
.status { margin: 0; color: var(--verity-muted, #5b6470); font-size: 0.9em; }
.head { display: flex; align-items: center; gap: 0.6rem; flex-wrap: wrap; margin: 0 0 0.4rem; }
.badge {
  display: inline-block; padding: 0.1rem 0.55rem; border-radius: 999px; font-size: 0.8em;
  font-weight: 700; text-transform: uppercase; letter-spacing: 0.04em; color: #fff;
  background: var(--verity-insufficient, #7a6a16);
}
.badge.supported { background: var(--verity-supported, #1d7a3e); }
.badge.contradicted { background: var(--verity-contradicted, #b42323); }
.badge.failed { background: var(--verity-failed, #5b6470); }
.confidence { color: var(--verity-muted, #5b6470); font-size: 0.9em; }
.summary { margin: 0 0 0.5rem; }
.cited { margin: 0; padding-left: 1.1rem; }
.cited li { margin: 0.25rem 0; }
.cited .id { font-family: var(--verity-mono, ui-monospace, monospace); font-size: 0.85em; color: var(--verity-muted, #5b6470); }
.cited blockquote { margin: 0.15rem 0 0; padding-left: 0.6rem; border-left: 3px solid var(--verity-accent, #3056d3); }
.meta { margin: 0.5rem 0 0; color: var(--verity-muted, #5b6470); font-size: 0.8em; }
.answer { margin: 0 0 0.5rem; line-height: 1.7; white-space: pre-wrap; }
.sentence { border-radius: 3px; padding: 0 0.1rem; cursor: pointer; text-decoration: underline; text-decoration-thickness: 2px; text-underline-offset: 3px; }
.sentence:focus-visible { outline: 2px solid var(--verity-accent, #3056d3); outline-offset: 1px; }
.sentence.supported { background: var(--verity-supported-bg, #e3f3e8); text-decoration-color: var(--verity-supported, #1d7a3e); }
.sentence.contradicted { background: var(--verity-contradicted-bg, #fbe3e3); text-decoration-color: var(--verity-contradicted, #b42323); text-decoration-style: wavy; }
.sentence.insufficient { background: var(--verity-insufficient-bg, #f6f0d3); text-decoration-color: var(--verity-insufficient, #7a6a16); text-decoration-style: dashed; }
.sentence.failed { background: var(--verity-failed-bg, #eceef1); text-decoration-color: var(--verity-failed, #5b6470); text-decoration-style: dotted; }
.sentence.pending { text-decoration: none; cursor: default; }
.sentence[aria-pressed="true"] { box-shadow: 0 0 0 2px var(--verity-accent, #3056d3); }
.tag { font-size: 0.72em; font-weight: 700; margin: 0 0.25rem 0 0.1rem; vertical-align: 0.15em; white-space: nowrap; }
.tag.supported { color: var(--verity-supported, #1d7a3e); }
.tag.contradicted { color: var(--verity-contradicted, #b42323); }
.tag.insufficient { color: var(--verity-insufficient, #7a6a16); }
.tag.failed { color: var(--verity-failed, #5b6470); }
.evidence { margin: 0.4rem 0 0; padding: 0.5rem 0.75rem; border-left: 3px solid var(--verity-accent, #3056d3); background: var(--verity-evidence-bg, #f5f7fa); }
.evidence p { margin: 0 0 0.35rem; }
.evidence .passage { white-space: pre-wrap; }
.evidence mark { background: var(--verity-quote, #ffe58a); color: inherit; }
`;

let sheet = null;
function styleSheet() {
  // A constructed sheet (CSSOM), not a <style> element: a page whose Content-Security-Policy
  // allows no inline style still styles the element.
  if (!sheet) {
    sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLE);
  }
  return sheet;
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  for (const child of children) node.append(child); // strings become text nodes, never HTML
  return node;
}

let elementCount = 0;

/** How each sentence status reads without colour: an icon and words. */
const STATUS_WORDS = {
  supported: ['✓', 'supported'],
  contradicted: ['✗', 'contradicted'],
  insufficient: ['?', 'not enough evidence'],
  failed: ['!', 'check failed'],
};

/** `<verity-check claim="..." [corpus="same-origin URL"] [provider='{"api": ...}']>`, or
 * `answer="..."` (or the element's own text) for a whole answer, rendered inline with each
 * sentence marked as its check ends (`decompose` splits each sentence into claims first); the `provider` attribute takes no API key (refused,
 * naming why), the `provider` property does. */
export class VerityCheckElement extends HTMLElement {
  static observedAttributes = ['claim', 'answer', 'corpus', 'provider', 'marks', 'decompose'];

  #root;
  #abort = null;
  #scheduled = false;
  #corpus = null; // { key, engine, corpus }
  #name = `verity-check-${++elementCount}`;
  #provider = undefined;

  constructor() {
    super();
    this.#root = this.attachShadow({ mode: 'open' });
    this.#root.adoptedStyleSheets = [styleSheet()];
    // A provider set by script before this module defined the element is an own property
    // that would hide the accessor: take it over.
    if (Object.hasOwn(this, 'provider')) {
      const provider = this.provider;
      delete this.provider;
      this.provider = provider;
    }
  }

  /** The provider set by script (the provider JSON, which may carry `apiKey`), used instead of
   * the `provider` attribute; `null` when none was set. Setting it checks again. */
  get provider() { return this.#provider ?? null; }
  set provider(provider) {
    this.#provider = provider ?? undefined;
    if (this.isConnected) this.#schedule();
  }

  /** The last report (or `null`). */
  report = null;

  connectedCallback() { this.#schedule(); }
  attributeChangedCallback() { if (this.isConnected) this.#schedule(); }
  disconnectedCallback() {
    this.#abort?.abort();
    this.#corpus?.corpus.drop();
    this.#corpus = null;
  }

  /** Checks the claim again. */
  refresh() { this.#schedule(); }

  #schedule() {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      if (this.isConnected) this.#run();
    });
  }

  #show(state, ...children) {
    this.setAttribute('data-state', state);
    this.#root.replaceChildren(...children);
  }

  async #run() {
    this.#abort?.abort();
    const abort = new AbortController();
    this.#abort = abort;
    const claim = (this.getAttribute('claim') ?? '').trim();
    const answer = claim ? '' : this.#answerText();
    if (answer) return this.#runAnswer(answer, abort);
    if (!claim) {
      this.#show('idle', el('p', { class: 'status', part: 'status' }, 'Nothing to check (set the claim or answer attribute).'));
      return;
    }
    const claimLine = el('p', { class: 'claim', part: 'claim' }, claim);
    const status = el('p', { class: 'status', part: 'status', role: 'status' }, 'Loading the corpus…');
    this.#show('running', claimLine, status);
    try {
      const engine = engineFor(this.#provider ?? attributeProvider(this.getAttribute('provider')));
      const corpus = await this.#loadCorpus(engine, abort.signal);
      if (abort.signal.aborted) return;
      status.textContent = 'Checking…';
      const report = await engine.checkClaim({
        claim, corpus, signal: abort.signal,
        onEvent: (event) => { status.textContent = describe(event) ?? status.textContent; },
      });
      if (abort.signal.aborted) return;
      this.report = report;
      this.#showReport(claimLine, report);
      this.dispatchEvent(new CustomEvent('verity-result', { detail: report, bubbles: true, composed: true }));
    } catch (error) {
      if (abort.signal.aborted && this.#abort !== abort) return; // replaced by a newer run
      const failure = error instanceof VerityError
        ? { kind: error.kind, message: error.message, spent: error.spent }
        : { kind: 'config', message: error?.message ?? String(error), spent: NOTHING_SPENT };
      this.report = null;
      this.#show('failed', claimLine,
        el('p', { class: 'head', part: 'head' }, el('span', { class: 'badge failed', part: 'badge failed' }, `not checked: ${failure.kind}`)),
        el('p', { class: 'summary', part: 'message' }, failure.message));
      this.dispatchEvent(new CustomEvent('verity-error', { detail: failure, bubbles: true, composed: true }));
    }
  }

  /** The answer to check: the `answer` attribute, else the element's own text (its
   * `<script>` children, which hold the corpus, left out), its white space collapsed as the
   * page shows it (a line break in the markup is no sentence's end). */
  #answerText() {
    const attribute = this.getAttribute('answer');
    if (attribute != null) return attribute.trim() ? attribute : '';
    const text = [...this.childNodes]
      .filter((node) => node.nodeType === Node.TEXT_NODE || (node.nodeType === Node.ELEMENT_NODE && node.localName !== 'script'))
      .map((node) => node.textContent).join('');
    return text.replace(/\s+/g, ' ').trim();
  }

  async #runAnswer(answer, abort) {
    const status = el('p', { class: 'status', part: 'status', role: 'status' }, 'Loading the corpus…');
    const sentences = new Map(); // index -> the sentence's report
    let open = null; // the index whose evidence is shown
    const render = (final) => {
      const text = el('p', { class: 'answer', part: 'answer' });
      // The sentences' spans index the answer in UTF-16 code units, as JavaScript does.
      let at = 0;
      const ordered = [...sentences.values()].sort((a, b) => a.span.startUtf16 - b.span.startUtf16);
      for (const sentence of ordered) {
        const { startUtf16: start, endUtf16: end } = sentence.span;
        if (start < at || end > answer.length) continue;
        text.append(answer.slice(at, start));
        const [icon, words] = STATUS_WORDS[sentence.status] ?? ['', sentence.status];
        const mark = el('span', {
          class: `sentence ${sentence.status}`, part: `sentence ${sentence.status}`, role: 'button', tabindex: '0',
          'aria-pressed': String(open === sentence.index), 'data-index': String(sentence.index),
          'aria-label': `${answer.slice(start, end)} (${words})`,
        }, answer.slice(start, end));
        const toggle = () => { open = open === sentence.index ? null : sentence.index; render(final); };
        mark.addEventListener('click', toggle);
        mark.addEventListener('keydown', (event) => {
          if (event.key === 'Enter' || event.key === ' ') { event.preventDefault(); toggle(); }
        });
        text.append(mark, el('span', { class: `tag ${sentence.status}`, part: `tag ${sentence.status}`, 'aria-hidden': 'true' }, `${icon} ${words}`));
        at = end;
      }
      text.append(answer.slice(at));
      const children = [text];
      const shown = open == null ? null : sentences.get(open);
      if (shown) children.push(evidence(shown));
      if (final) children.push(...final); else children.push(status);
      this.#show(final ? 'done' : 'running', ...children);
      if (open != null) this.#root.querySelector(`[data-index="${open}"]`)?.focus();
    };
    render(null);
    try {
      const engine = engineFor(this.#provider ?? attributeProvider(this.getAttribute('provider')));
      const marks = this.getAttribute('marks') ? JSON.parse(this.getAttribute('marks')) : undefined;
      const corpus = await this.#loadCorpus(engine, abort.signal);
      if (abort.signal.aborted) return;
      status.textContent = 'Checking…';
      // The sentences being checked (several at once with the engine's concurrency), by number.
      let inFlight = [];
      const checking = () => (inFlight.length === 1
        ? `Checking sentence ${inFlight[0]}…`
        : `Checking sentences ${inFlight.slice(0, -1).join(', ')} and ${inFlight.at(-1)}…`);
      const report = await engine.checkAnswer({
        answer, corpus, marks, decompose: this.hasAttribute('decompose'), signal: abort.signal,
        onEvent: (event) => {
          if (event?.type === 'sentenceStarted') {
            inFlight.push(event.index + 1);
            status.textContent = checking();
          } else if (event?.type === 'sentenceChecked') {
            inFlight = inFlight.filter((n) => n !== event.sentence?.index + 1);
            if (inFlight.length) status.textContent = checking();
          } else if (!inFlight.length) {
            // One sentence's inner stages would hide the others being checked beside it.
            status.textContent = describe(event) ?? status.textContent;
          }
        },
        onSentence: (sentence) => {
          if (abort.signal.aborted) return;
          sentences.set(sentence.index, sentence);
          render(null);
        },
      });
      if (abort.signal.aborted) return;
      this.report = report;
      for (const sentence of report.sentences) {
        if (sentence.status !== 'not-checkable') sentences.set(sentence.index, sentence);
      }
      const { supported = 0, contradicted = 0, insufficient = 0, failed = 0 } = report.counts ?? {};
      const checked = supported + contradicted + insufficient + failed;
      const cost = report.usage?.cost ? `, $${report.usage.cost.toFixed(4)}` : '';
      const head = el('p', { class: 'head', part: 'head' },
        el('span', { class: `badge ${report.faithful ? 'supported' : 'contradicted'}`, part: 'badge' },
          report.faithful ? 'every sentence holds' : `${checked - supported} of ${checked} not shown to hold`),
        el('span', { class: 'confidence', part: 'confidence' }, `${supported} supported, ${contradicted} contradicted, ${insufficient} without enough evidence${failed ? `, ${failed} failed` : ''}`));
      render([head, el('p', { class: 'meta', part: 'meta' }, `Select a sentence to see its evidence. ${report.requests} request${report.requests === 1 ? '' : 's'}${cost}`)]);
      this.dispatchEvent(new CustomEvent('verity-result', { detail: report, bubbles: true, composed: true }));
    } catch (error) {
      if (abort.signal.aborted && this.#abort !== abort) return;
      const failure = error instanceof VerityError
        ? { kind: error.kind, message: error.message, spent: error.spent }
        : { kind: 'config', message: error?.message ?? String(error), spent: NOTHING_SPENT };
      this.report = null;
      this.#show('failed', el('p', { class: 'answer', part: 'answer' }, answer),
        el('p', { class: 'head', part: 'head' }, el('span', { class: 'badge failed', part: 'badge failed' }, `not checked: ${failure.kind}`)),
        el('p', { class: 'summary', part: 'message' }, failure.message));
      this.dispatchEvent(new CustomEvent('verity-error', { detail: failure, bubbles: true, composed: true }));
    }
  }

  async #loadCorpus(engine, signal) {
    const inline = [...this.children].find((child) => child.localName === 'script' && child.type === 'application/json');
    let key;
    let load;
    if (inline) {
      const text = inline.textContent;
      key = `inline:${text}`;
      load = (corpus) => {
        let items;
        try { items = JSON.parse(text); } catch (error) {
          throw new VerityError({ kind: 'corpus', message: `the inline corpus is not JSON: ${error.message}` });
        }
        return corpus.add(items);
      };
    } else if (this.getAttribute('corpus')) {
      const url = new URL(this.getAttribute('corpus'), document.baseURI);
      if (url.origin !== location.origin) {
        throw new VerityError({ kind: 'corpus', message: `the corpus must be on this page's origin (${location.origin}), not ${url.origin}` });
      }
      key = `url:${url.href}`;
      load = async (corpus) => {
        const response = await fetch(url, { signal });
        if (!response.ok) throw new VerityError({ kind: 'corpus', message: `${url.pathname}: HTTP ${response.status}` });
        const name = url.pathname.split('/').pop() || 'corpus.txt';
        return corpus.addFile(name, await response.text());
      };
    } else {
      throw new VerityError({ kind: 'corpus', message: 'no corpus: add a <script type="application/json"> child with [{"id", "text"}] items, or a corpus attribute' });
    }
    if (this.#corpus && this.#corpus.key === key && this.#corpus.engine === engine) return this.#corpus.corpus;
    this.#corpus?.corpus.drop();
    this.#corpus = null;
    const corpus = new VerityCorpus(engine, `${this.#name}-${nextId('corpus')}`);
    await load(corpus);
    this.#corpus = { key, engine, corpus };
    return corpus;
  }

  #showReport(claimLine, report) {
    const { verdict, confidence } = report.assessment;
    const head = el('p', { class: 'head', part: 'head' },
      el('span', { class: `badge ${verdict}`, part: `badge ${verdict}` }, verdict),
      el('span', { class: 'confidence', part: 'confidence' }, `confidence ${Math.round(confidence * 100)}%`));
    const children = [claimLine, head, el('p', { class: 'summary', part: 'summary' }, report.summary)];
    if (report.cited?.length) {
      children.push(el('ul', { class: 'cited', part: 'cited', 'aria-label': 'Cited evidence' },
        ...report.cited.map((item) => el('li', {},
          el('span', { class: 'id' }, item.id),
          el('blockquote', {}, item.text)))));
    }
    const cost = report.usage?.cost ? `, $${report.usage.cost.toFixed(4)}` : '';
    children.push(el('p', { class: 'meta', part: 'meta' }, `${report.route}, ${report.requests} request${report.requests === 1 ? '' : 's'}${cost}`));
    this.#show('done', ...children);
  }
}

/** A sentence's evidence: its verdict in words, each cited passage with the quote that holds
 * it highlighted where it sits, and the answer's own marks, each checked. */
function evidence(sentence) {
  const [icon, words] = STATUS_WORDS[sentence.status] ?? ['', sentence.status];
  const confidence = sentence.confidence == null ? '' : ` (confidence ${Math.round(sentence.confidence * 100)}%)`;
  const box = el('div', { class: 'evidence', part: 'evidence', role: 'region', 'aria-label': `Evidence for sentence ${sentence.index + 1}` },
    el('p', {}, `${icon} Sentence ${sentence.index + 1}: ${words}${confidence}`));
  if (sentence.failure) box.append(el('p', {}, `${sentence.failure.kind}: ${sentence.failure.message}`));
  if (sentence.claims?.length) {
    box.append(el('ul', { class: 'claims', part: 'claims', 'aria-label': 'Its claims' }, ...sentence.claims.map((claim) => {
      const [claimIcon, claimWords] = STATUS_WORDS[claim.status] ?? ['', claim.status];
      return el('li', { class: claim.status, part: `claim ${claim.status}` }, `${claimIcon} ${claim.text}: ${claimWords}`);
    })));
  }
  if (sentence.decomposed?.whole) box.append(el('p', {}, `Checked whole: ${sentence.decomposed.whole.message}`));
  for (const citation of sentence.citations ?? []) {
    const { text, span } = citation;
    const ok = span && span.startUtf16 <= span.endUtf16 && span.endUtf16 <= text.length;
    const passage = el('p', { class: 'passage', part: 'passage' }, el('span', { class: 'id' }, `${citation.passage ?? 'evidence'}: `));
    if (ok) passage.append(text.slice(0, span.startUtf16), el('mark', { part: 'quote' }, text.slice(span.startUtf16, span.endUtf16)), text.slice(span.endUtf16));
    else passage.append(text);
    box.append(passage);
  }
  if (!(sentence.citations ?? []).length && sentence.status !== 'failed') box.append(el('p', {}, 'No passage decided it.'));
  for (const mark of sentence.marks ?? []) {
    box.append(el('p', { part: 'mark' }, `Its mark [${mark.label}]: ${mark.passage ? `passage ${mark.passage} ` : ''}${mark.holds.replaceAll('-', ' ')}`));
  }
  return box;
}

/** A short line for a progress event (or undefined to keep the last one). */
function describe(event) {
  switch (event?.type) {
    case 'stage':
      if (event.stage === 'research') return `Researching (turn ${event.turn} of ${event.of})…`;
      return { retrieve: 'Retrieving evidence…', assess: 'Assessing…', reassess: 'Reassessing…', summary: 'Summarising…' }[event.stage];
    case 'retry':
      return `Retrying in ${Math.round((event.delayMs ?? event.delay_ms ?? 0) / 100) / 10} s…`;
    default:
      return undefined;
  }
}

if (typeof customElements !== 'undefined' && !customElements.get('verity-check')) {
  customElements.define('verity-check', VerityCheckElement);
}
