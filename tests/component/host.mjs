// A small JavaScript host of Verity's component (transpiled by jco): it runs a claim check
// through the component's `job` resource, encodes each model call with the component's
// `provider` codec, sends it with `fetch`, and hands the decoded answer back. The component
// does no I/O of its own: this file is all of it.

/** A failed job: the failure kind, its message, and what was spent. */
export class JobFailed extends Error {
  constructor(failure) {
    super(`${failure.kind}: ${failure.message}`);
    this.name = 'JobFailed';
    this.kind = failure.kind;
    this.spent = failure.spent;
  }
}

const ZERO_USAGE = { input: 0n, output: 0n, cacheRead: 0n, cacheWrite: 0n, cost: 0 };

/** A request that got no response (refused connection, DNS, timeout) as a failed message. */
function networkFailure(error, clocks) {
  const timedOut = error?.name === 'TimeoutError';
  const message = clocks?.stalled
    ? 'the server stalled (no bytes within the idle timeout)'
    : timedOut || clocks?.timedOut
      ? 'the request timed out'
      : `network: ${error?.cause?.message ?? error}`;
  return {
    content: [],
    stopReason: 'error',
    errorMessage: message,
    error: { class: 'retryable', status: undefined, retryAfterMs: undefined, rawBody: undefined },
    usage: ZERO_USAGE,
  };
}

/** A timer's delay: Node fires a delay over 2^31 - 1 ms at once (1 ms), so it is capped. */
const delayOf = (ms) => Math.min(Number(ms), 2_147_483_647);

/**
 * The request's two clocks: the deadline of the whole exchange (`timeoutMs`) and the longest
 * wait for the next bytes (`idleTimeoutMs`, re-armed by `progress()`), both aborting `signal`.
 */
function clocksOf(request) {
  const controller = new AbortController();
  const clocks = { signal: controller.signal, stalled: false, timedOut: false, idle: undefined };
  const deadline =
    request.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          clocks.timedOut = true;
          controller.abort();
        }, delayOf(request.timeoutMs));
  clocks.progress = () => {
    clearTimeout(clocks.idle);
    if (request.idleTimeoutMs === undefined) return;
    clocks.idle = setTimeout(() => {
      clocks.stalled = true;
      controller.abort();
    }, delayOf(request.idleTimeoutMs));
  };
  clocks.stop = () => {
    clearTimeout(deadline);
    clearTimeout(clocks.idle);
  };
  clocks.progress();
  return clocks;
}

/** Sends one encoded request and decodes the answer (chunk by chunk when streaming). */
async function send(fetch, codec, job, call) {
  const request = codec.encode(call.request);
  const clocks = clocksOf(request);
  try {
    return await exchange(fetch, codec, job, call, request, clocks);
  } finally {
    clocks.stop();
  }
}

async function exchange(fetch, codec, job, call, request, clocks) {
  let response;
  try {
    response = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      signal: clocks.signal,
    });
  } catch (error) {
    return networkFailure(error, clocks);
  }
  clocks.progress();
  const headers = [...response.headers];
  if (!codec.isStreaming()) {
    let body;
    try {
      body = new Uint8Array(await response.arrayBuffer());
    } catch (error) {
      return networkFailure(error, clocks);
    }
    return codec.decode({ status: response.status, headers, body });
  }
  const decoder = codec.decoder(response.status, headers);
  try {
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      clocks.progress();
      for (const delta of decoder.feed(value)) job.recordDelta(call.id, delta);
      if (decoder.isTooLarge()) {
        await reader.cancel();
        break;
      }
    }
    return decoder.finish();
  } catch (error) {
    if (clocks.stalled) return decoder.fail('the server stalled (no bytes within the idle timeout)');
    if (clocks.timedOut) return decoder.fail('the request timed out');
    return decoder.fail(String(error));
  } finally {
    decoder[Symbol.dispose]();
  }
}

/** Resolves after `ms` (capped like the clocks: uncapped, a retry wait past 2^31 - 1 ms ended
 * after 1 ms), or as soon as `signal` aborts. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, delayOf(ms));
    signal?.addEventListener('abort', done);
  });
}

/**
 * Checks `claim` against `items` (`[{id, text}]`) with the model of `provider` (the app's
 * provider JSON, as an object or as its text: a number past 2^53, such as a `timeoutMs` of
 * u64::MAX, survives only as text). Returns the report; throws `JobFailed` with the kind and
 * what was spent. `onEvent` receives every event of the job (stages, model calls, streamed
 * pieces, ...); `assess` and `retriever` go into the claim job as they are. `signal` cancels
 * the check (the failure kind `cancelled`): it ends a retry wait at once and no request is
 * made after it; a request in flight ends on its own clocks.
 */
export async function checkClaim(engine, { provider, claim, items, retry, retriever = 'keyword', assess, signal, fetch = globalThis.fetch, onEvent = () => {} }) {
  const codec = engine.provider.Codec.open(typeof provider === 'string' ? provider : JSON.stringify(provider));
  const corpus = new engine.corpus.Corpus();
  corpus.add(items);
  const config = { kind: 'claim', claim, corpus: corpus.id(), retriever };
  if (retry) config.retry = retry;
  // `"verifier"`: Yes/No questions whose requests carry a probe; the codec asks for the
  // probabilities and hands them back on the decoded message: nothing more for a host to do.
  if (assess) config.assess = assess;
  try {
    return await drive(() => engine.job.Job.create(JSON.stringify(config), [corpus]), codec, { signal, fetch, onEvent });
  } finally {
    corpus[Symbol.dispose]();
    codec[Symbol.dispose]();
  }
}

/** Checks a whole answer over `items` through the component's `check-answer`: `options` are
 * the answer job's other fields (`retriever`, `assess`, `marks`, `retry`); `onSentence` is
 * called with each sentence's report as its check ends. Resolves to the answer's report. */
export async function checkAnswer(engine, { provider, answer, items, options = {}, signal, fetch = globalThis.fetch, onSentence = () => {}, onEvent = () => {} }) {
  const codec = engine.provider.Codec.open(typeof provider === 'string' ? provider : JSON.stringify(provider));
  const corpus = new engine.corpus.Corpus();
  corpus.add(items);
  const events = (event) => {
    if (event.tag === 'sentence-checked') onSentence(JSON.parse(event.val));
    onEvent(event);
  };
  try {
    return await drive(() => engine.job.Job.checkAnswer(answer, corpus, JSON.stringify(options)), codec, { signal, fetch, onEvent: events });
  } finally {
    corpus[Symbol.dispose]();
    codec[Symbol.dispose]();
  }
}

/** Drives the job `create` makes to its end with `codec` and `fetch`: its value, or a
 * `JobFailed`. */
async function drive(create, codec, { signal, fetch, onEvent }) {
  let job;
  try {
    job = create();
    for (;;) {
      for (const event of job.events()) onEvent(event);
      const output = job.poll();
      if (output.tag === 'done') break;
      if (output.tag === 'run-tools') {
        throw new Error(`the job answers its lookups itself, yet asked for ${output.val.calls.length} tool call(s)`);
      }
      const call = output.val;
      if (call.delayMs > 0n) await sleep(call.delayMs, signal);
      if (signal?.aborted) {
        job.handle({ tag: 'cancel', val: 'cancelled by the host' });
        continue;
      }
      const response = await send(fetch, codec, job, call);
      job.handle({ tag: 'model-response', val: { call: call.id, response } });
    }
    return JSON.parse(job.finish());
  } catch (error) {
    // jco throws a result's error value as `ComponentError` with the value in `payload`.
    if (error?.payload?.kind && error.payload.spent) throw new JobFailed(error.payload);
    throw error;
  } finally {
    job?.[Symbol.dispose]();
  }
}
