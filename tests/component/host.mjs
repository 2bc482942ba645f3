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
function networkFailure(error) {
  const timedOut = error?.name === 'TimeoutError';
  return {
    content: [],
    stopReason: 'error',
    errorMessage: timedOut ? 'the request timed out' : `network: ${error?.cause?.message ?? error}`,
    error: { class: 'retryable', status: undefined, retryAfterMs: undefined, rawBody: undefined },
    usage: ZERO_USAGE,
  };
}

/** Sends one encoded request and decodes the answer (chunk by chunk when streaming). */
async function send(fetch, codec, job, call) {
  const request = codec.encode(call.request);
  let response;
  try {
    response = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      signal:
        request.timeoutMs === undefined ? undefined : AbortSignal.timeout(Number(request.timeoutMs)),
    });
  } catch (error) {
    return networkFailure(error);
  }
  const headers = [...response.headers];
  if (!codec.isStreaming()) {
    const body = new Uint8Array(await response.arrayBuffer());
    return codec.decode({ status: response.status, headers, body });
  }
  const decoder = codec.decoder(response.status, headers);
  try {
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const delta of decoder.feed(value)) job.recordDelta(call.id, delta);
      if (decoder.isTooLarge()) {
        await reader.cancel();
        break;
      }
    }
    return decoder.finish();
  } catch (error) {
    return decoder.fail(String(error));
  } finally {
    decoder[Symbol.dispose]();
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Checks `claim` against `items` (`[{id, text}]`) with the model of `provider` (the app's
 * provider JSON). Returns the report; throws `JobFailed` with the kind and what was spent.
 * `onEvent` receives every event of the job (stages, model calls, streamed pieces, ...).
 */
export async function checkClaim(engine, { provider, claim, items, retry, fetch = globalThis.fetch, onEvent = () => {} }) {
  const codec = engine.provider.Codec.open(JSON.stringify(provider));
  const corpus = new engine.corpus.Corpus();
  corpus.add(items);
  const config = { kind: 'claim', claim, corpus: corpus.id(), retriever: 'keyword' };
  if (retry) config.retry = retry;
  let job;
  try {
    job = engine.job.Job.create(JSON.stringify(config), [corpus]);
    for (;;) {
      for (const event of job.events()) onEvent(event);
      const output = job.poll();
      if (output.tag === 'done') break;
      if (output.tag === 'run-tools') {
        throw new Error(`the job answers its lookups itself, yet asked for ${output.val.calls.length} tool call(s)`);
      }
      const call = output.val;
      if (call.delayMs > 0n) await sleep(Number(call.delayMs));
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
    corpus[Symbol.dispose]();
    codec[Symbol.dispose]();
  }
}
