// The component in Node: transpiled by jco (`cargo xtask component` writes it to
// target/component-js, or VERITY_COMPONENT_JS names its verity.js), driven by host.mjs with
// Node's fetch against aimock. Run by `cargo xtask test` (through the component's checks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

import { checkAnswer, checkClaim, JobFailed } from './host.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const componentJs = process.env.VERITY_COMPONENT_JS ?? path.join(root, 'target/component-js/verity.js');
if (!existsSync(componentJs)) {
  throw new Error(`${componentJs} is missing: run \`cargo xtask component\` (it transpiles the component with jco)`);
}
const engine = await import(pathToFileURL(componentJs).href);

const ITEMS = [
  { id: 'eiffel', text: 'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.' },
  { id: 'louvre', text: "The Louvre is the world's most-visited art museum." },
  { id: 'tokyo', text: 'Tokyo Tower is a communications and observation tower in Minato.' },
  { id: 'height', text: 'Its antenna tops out at three hundred thirty-three metres, finished in 1958.' },
];

/** Starts aimock's `llmock` on a free port, like `Aimock::start` in tests/src/http.rs, with
 * `fixture` (a file of tests/fixtures/aimock, or an absolute path) and `extra` arguments. */
function aimock(t, fixture, extra = []) {
  const bin = path.join(root, 'node_modules/.bin/llmock');
  const child = spawn(process.execPath, [bin, '--port', '0', '--host', '127.0.0.1', '--log-level', 'info',
    '--fixtures', path.resolve(root, 'tests/fixtures/aimock', fixture), ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => child.kill());
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('aimock did not say where it listens within 30 s')), 30_000);
    child.on('error', reject);
    // Every line is read, so the pipe never fills; the first URL is the address.
    createInterface({ input: child.stdout }).on('line', (line) => {
      const found = line.match(/listening on (http:\/\/\S+)/);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
  });
}

const openai = (url, stream) => ({
  api: 'openai', baseUrl: `${url}/v1`, model: 'gpt-4o-mini', apiKey: 'sk-test', stream,
  price: { input: 0.15, output: 0.6 },
});

for (const stream of [false, true]) {
  test(`a claim check through the component with fetch against aimock${stream ? ', streaming' : ''}`, async (t) => {
    const url = await aimock(t, 'claim.json');
    const events = [];
    const report = await checkClaim(engine, {
      provider: openai(url, stream), claim: 'The Eiffel Tower is in Paris.', items: ITEMS,
      onEvent: (event) => events.push(event),
    });
    assert.equal(report.assessment.verdict, 'supported');
    assert.equal(report.route, 'single call');
    assert.equal(report.summary, 'Supported: the evidence places the Eiffel Tower in Paris.');
    assert.equal(report.requests, 2);
    assert.deepEqual([report.usage.input, report.usage.output], [600, 80]);
    assert.ok(Math.abs(report.usage.cost - (600 * 0.15 + 80 * 0.6) / 1e6) < 1e-12, `cost ${report.usage.cost}`);
    const at = (wanted) => events.findIndex(wanted);
    const asked = at((e) => e.tag === 'model-call' && e.val.call === 0n);
    const answered = at((e) => e.tag === 'model-answered' && e.val.call === 0n);
    const pieces = events.filter((e) => e.tag === 'delta' && e.val.call === 0n);
    assert.ok(asked >= 0 && asked < answered, JSON.stringify(events.map((e) => e.tag)));
    if (stream) {
      const piece = at((e) => e.tag === 'delta' && e.val.call === 0n);
      assert.ok(asked < piece && piece < answered);
      assert.ok(pieces.length > 1, `${pieces.length} streamed pieces`);
    } else {
      assert.equal(pieces.length, 0);
    }
    assert.ok(events.some((e) => e.tag === 'stage' && e.val.tag === 'summary'));
  });
}

test('a claim check that escalates to research, streaming', async (t) => {
  const url = await aimock(t, 'claim-escalation.json');
  const events = [];
  const report = await checkClaim(engine, {
    provider: openai(url, true), claim: 'Tokyo Tower is 333 m high.', items: ITEMS,
    onEvent: (event) => events.push(event),
  });
  assert.equal(report.route, 'agent escalation');
  assert.equal(report.assessment.verdict, 'supported');
  assert.equal(report.requests, 5);
  assert.ok(events.some((e) => e.tag === 'stage' && e.val.tag === 'research'));
});

test('an unreachable provider fails the check with its kind and what was spent', async () => {
  // A port nothing listens on: every request is refused, retried once, then the check fails.
  const provider = openai('http://127.0.0.1:9', false);
  await assert.rejects(
    checkClaim(engine, {
      provider, claim: 'The Eiffel Tower is in Paris.', items: ITEMS,
      retry: { maxRetries: 1, baseDelayMs: 1 },
    }),
    (error) => {
      assert.ok(error instanceof JobFailed, String(error));
      assert.equal(error.kind, 'assess-request');
      assert.equal(error.spent.requests, 2);
      assert.equal(error.spent.retries, 1);
      return true;
    },
  );
});

/** A llama.cpp server as recorded: the verifier's calibration question (an empty document)
 * answered No, every passage Yes, with their top_logprobs; anything else a submit call. Resolves
 * to its URL and the bodies it was asked. */
async function recordedLlamaServer(t) {
  const fixture = (name) => readFileSync(path.join(root, 'core/tests/fixtures/verifier', name));
  const [yes, no] = [fixture('llama-cpp-yes.json'), fixture('llama-cpp-recorded-no.json')];
  const asked = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => { body += chunk; });
    request.on('end', () => {
      const json = JSON.parse(body);
      asked.push(json);
      response.setHeader('content-type', 'application/json');
      if (json.logprobs) {
        response.end(JSON.stringify(json.messages).includes('Document: \\nClaim') ? no : yes);
        return;
      }
      response.end(JSON.stringify({ choices: [{ index: 0, finish_reason: 'tool_calls', message: {
        role: 'assistant', content: null, tool_calls: [{ id: 's', type: 'function', function: {
          name: 'submit', arguments: JSON.stringify({ text: 'Supported by the passage.' }) } }] } }],
        usage: { prompt_tokens: 50, completion_tokens: 9 } }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  return { url: `http://127.0.0.1:${server.address().port}`, asked };
}

test('the verifier route through the component reads the server\'s probabilities', async (t) => {
  const { url, asked } = await recordedLlamaServer(t);
  const report = await checkClaim(engine, {
    provider: { api: 'openai', baseUrl: `${url}/v1`, model: 'qwen', stream: true },
    claim: 'The Eiffel Tower is in Paris.', items: ITEMS, retriever: { bm25: { k: 2 } }, assess: 'verifier',
  });
  const probes = asked.filter((body) => body.logprobs);
  assert.equal(probes.length, 3, 'the calibration question and two passages');
  for (const body of probes) {
    assert.equal(body.top_logprobs, 10);
    assert.ok(!body.stream, 'a probe is not streamed');
  }
  assert.equal(report.assessment.verdict, 'supported');
  assert.equal(report.verifier.fallback, false, JSON.stringify(report.verifier));
  assert.ok(report.verifier.questions.every((q) => q.source === 'probabilities'));
});

test('an answer checked through check-answer with the verifier route: a sentence each, its passage quoted', async (t) => {
  const { url, asked } = await recordedLlamaServer(t);
  const answer = 'Sure. The Eiffel Tower is in Paris [1]. Tokyo Tower is an observation tower in Minato.';
  const sentences = [];
  const report = await checkAnswer(engine, {
    provider: { api: 'openai', baseUrl: `${url}/v1`, model: 'qwen', stream: true },
    answer, items: ITEMS,
    options: { retriever: { bm25: { k: 1 } }, assess: 'verifier', marks: { 1: 'eiffel' } },
    onSentence: (sentence) => sentences.push(sentence),
  });
  assert.deepEqual(sentences.map((s) => [s.index, s.status]), [[1, 'supported'], [2, 'supported']]);
  assert.equal(asked.filter((body) => body.logprobs).length, 4, 'per sentence the calibration question and one passage');
  assert.deepEqual(report.counts, { supported: 2, contradicted: 0, insufficient: 0, failed: 0, notCheckable: 1 });
  assert.equal(report.faithful, true);
  const [, first, second] = report.sentences;
  assert.equal(answer.slice(first.span.startUtf16, first.span.endUtf16), 'The Eiffel Tower is in Paris [1].');
  assert.deepEqual(first.marks.map((m) => [m.label, m.passage, m.holds]), [['1', 'eiffel', 'supports']]);
  assert.equal(first.citations[0].passage, 'eiffel');
  assert.equal(second.citations[0].passage, 'tokyo');
  const { quote, span, text } = second.citations[0];
  assert.equal(text.slice(span.startUtf16, span.endUtf16), quote);
});

for (const stream of [false, true]) {
  test(`timeouts of u64::MAX neither fire at once nor throw: a server that answers after 300 ms is waited for${stream ? ', streaming' : ''}`, async (t) => {
    // Node fires a timer longer than 2^31 - 1 ms after 1 ms (with a TimeoutOverflowWarning):
    // uncapped, both clocks would abort every request long before the server's answer.
    const url = await aimock(t, 'claim.json', ['--chaos-latency', '300']);
    const warnings = [];
    const warned = (warning) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', warned);
    t.after(() => process.off('warning', warned));
    const MAX = '18446744073709551615';
    // As text: JSON.stringify cannot write u64::MAX (a JavaScript number rounds it up).
    const provider = JSON.stringify(openai(url, stream)).replace(/}$/, `,"timeoutMs":${MAX},"idleTimeoutMs":${MAX}}`);
    const started = Date.now();
    const report = await checkClaim(engine, { provider, claim: 'The Eiffel Tower is in Paris.', items: ITEMS });
    assert.equal(report.assessment.verdict, 'supported');
    assert.equal(report.requests, 2);
    assert.ok(Date.now() - started >= 600, 'both requests waited for the server\'s 300 ms');
    // A warning is emitted on the next tick: let it come before looking.
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(warnings, []);
  });
}

test('a retry wait past 2^31 - 1 ms does not fire at once: no request follows the 429 until the host cancels', async (t) => {
  // The assessment is answered 429 with a Retry-After of 2^53 - 1 ms in seconds, which the
  // job's retryAfterCapMs lets it wait for whole; a second request would be answered. Node
  // fires a longer timer after 1 ms: uncapped, the retry would follow at once.
  const dir = mkdtempSync(path.join(tmpdir(), 'verity-component-'));
  const fixture = path.join(dir, 'retry-after.json');
  const retryAfterSeconds = Math.floor(Number.MAX_SAFE_INTEGER / 1000);
  const claim = JSON.parse(readFileSync(path.join(root, 'tests/fixtures/aimock/claim.json'), 'utf8'));
  const limited = { match: { toolName: 'record_assessment', sequenceIndex: 0 }, response: {
    error: { message: 'Rate limit reached for requests.', type: 'rate_limit_error' }, status: 429, retryAfter: retryAfterSeconds } };
  writeFileSync(fixture, JSON.stringify({ fixtures: [limited, ...claim.fixtures] }));
  const url = await aimock(t, fixture);
  const requests = async () => {
    const journal = await (await fetch(`${url}/__aimock/journal`)).json();
    return (Array.isArray(journal) ? journal : journal.entries ?? []).length;
  };
  const warnings = [];
  const warned = (warning) => warnings.push(`${warning.name}: ${warning.message}`);
  process.on('warning', warned);
  t.after(() => process.off('warning', warned));
  const controller = new AbortController();
  const events = [];
  const checking = checkClaim(engine, {
    provider: openai(url, false), claim: 'The Eiffel Tower is in Paris.', items: ITEMS,
    retry: { maxRetries: 1, retryAfterCapMs: Number.MAX_SAFE_INTEGER }, signal: controller.signal,
    onEvent: (event) => events.push(event),
  });
  const outcome = checking.then((report) => ({ report }), (error) => ({ error }));
  const retried = () => events.find((event) => event.tag === 'retry');
  for (let waited = 0; !retried() && waited < 10_000; waited += 20) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.equal(retried()?.val.delayMs, BigInt(retryAfterSeconds) * 1000n, JSON.stringify(events.map((e) => e.tag)));
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  assert.equal(await requests(), 1, 'a request followed the 429 before its wait ended');
  controller.abort();
  const { error } = await outcome;
  assert.ok(error instanceof JobFailed, String(error));
  assert.equal(error.kind, 'cancelled');
  assert.equal(await requests(), 1);
  assert.deepEqual(warnings, []);
});
