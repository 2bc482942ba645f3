// The example's own script: the Verity class for a claim check and a typed step with a page
// tool, and a log of the elements' events. Everything shown is set as text, never as HTML.
import { Verity, VerityError } from '../verity.js';

const $ = (id) => document.getElementById(id);

function log(line) {
  const item = document.createElement('li');
  item.textContent = line;
  $('events').append(item);
}

document.addEventListener('verity-result', (event) => {
  // A claim's report has a verdict; an answer's says whether every checked sentence holds.
  const { assessment, sentences, faithful } = event.detail;
  const outcome = sentences ? (faithful ? 'every sentence holds' : 'not every sentence holds') : assessment.verdict;
  log(`verity-result from #${event.target.id || 'verity-check'}: ${outcome}`);
});
document.addEventListener('verity-error', (event) => {
  log(`verity-error from #${event.target.id || 'verity-check'}: ${event.detail.kind}: ${event.detail.message}`);
});

// One engine (one worker) per provider, made when first needed.
const engines = new Map();
function engine() {
  const text = $('provider').value.trim();
  let provider;
  try {
    provider = text ? JSON.parse(text) : undefined;
  } catch (error) {
    throw new VerityError({ kind: 'config', message: `the provider is not JSON: ${error.message}` });
  }
  const key = text || 'offline';
  if (!engines.has(key)) {
    const verity = new Verity({ provider });
    engines.set(key, { verity, corpus: null });
  }
  return engines.get(key);
}

async function corpusOf(entry) {
  if (!entry.corpus) {
    const corpus = entry.verity.createCorpus();
    const response = await fetch('./towers.jsonl');
    await corpus.addFile('towers.jsonl', await response.text());
    entry.corpus = corpus;
  }
  return entry.corpus;
}

function showFailure(target, error) {
  const failed = document.createElement('span');
  failed.className = 'failed';
  failed.textContent = error instanceof VerityError ? error.kind : 'error';
  const spent = error?.spent ? ` (${error.spent.requests} requests made)` : '';
  target.replaceChildren(failed, ` ${error?.message ?? error}${spent}`);
}

function describe(event) {
  if (event.type === 'stage') return event.stage === 'research' ? `research, turn ${event.turn} of ${event.of}` : event.stage;
  if (event.type === 'modelCall') return 'waiting for the model…';
  if (event.type === 'toolCall') return `tool call: ${event.tool}`;
  if (event.type === 'retry') return `retrying: ${event.message}`;
  return null;
}

let checking = null;
$('check-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  checking?.abort();
  const controller = new AbortController();
  checking = controller;
  $('cancel-check').disabled = false;
  $('check-result').replaceChildren();
  $('check-progress').textContent = 'starting…';
  try {
    const entry = engine();
    const corpus = await corpusOf(entry);
    const report = await entry.verity.checkClaim({
      claim: $('claim').value,
      corpus,
      signal: controller.signal,
      onEvent: (e) => { const line = describe(e); if (line) $('check-progress').textContent = line; },
    });
    const verdict = document.createElement('span');
    verdict.className = 'verdict';
    verdict.dataset.testid = 'check-verdict';
    verdict.textContent = report.assessment.verdict;
    $('check-result').replaceChildren(verdict, ` — ${report.summary}`);
    $('check-progress').textContent = `done: ${report.route}, ${report.requests} requests`;
  } catch (error) {
    showFailure($('check-result'), error);
    $('check-progress').textContent = 'ended';
  } finally {
    if (checking === controller) $('cancel-check').disabled = true;
  }
});
$('cancel-check').addEventListener('click', () => checking?.abort());

let stepping = null;
let toolCalls = 0;
$('step-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  stepping?.abort();
  const controller = new AbortController();
  stepping = controller;
  $('cancel-step').disabled = false;
  $('step-result').replaceChildren('running…');
  try {
    const value = await engine().verity.runStep({
      prompt: $('step-prompt').value,
      schema: { type: 'object', required: ['miles'], properties: { miles: { type: 'number' } } },
      tools: [{
        name: 'convert_km_to_miles',
        description: 'Converts a distance in kilometres to miles.',
        parameters: { type: 'object', required: ['km'], properties: { km: { type: 'number' } } },
        run: ({ km }) => {
          toolCalls += 1;
          $('tool-calls').textContent = String(toolCalls);
          log(`page tool convert_km_to_miles(${km})`);
          return `${(km * 0.621371).toFixed(3)} miles`;
        },
      }],
      signal: controller.signal,
    });
    $('step-result').replaceChildren(`submitted: ${JSON.stringify(value)}`);
  } catch (error) {
    showFailure($('step-result'), error);
  } finally {
    if (stepping === controller) $('cancel-step').disabled = true;
  }
});
$('cancel-step').addEventListener('click', () => stepping?.abort());
