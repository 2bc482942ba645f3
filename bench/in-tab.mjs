// The model in the tab and the native llama.cpp server, side by side, on the same number of
// threads: `cargo xtask bench in-tab [ROUNDS] [--model smollm2|qwen0.5|qwen1.5]` (it sets
// VERITY_GGUF to the model's GGUF, SmolLM2-135M-Instruct's by default, and VERITY_LLAMA_URL to
// a native server of the same file on two threads).
// Serves the built app (dist/) with its headers, so the page is cross-origin isolated, and asks
// the app's own module (web/in-tab.js, as the engine does) in headless Chromium for one request
// (the in-tab test's: 48 tokens at most, temperature 0), the GGUF loaded from another loopback
// origin; on the app's thread count (navigator.hardwareConcurrency capped at 4), ROUNDS times in
// turn with the native server; prints
// each run's prompt and generation tokens a second (llama.cpp's own `timings`) and the load
// average, which matters: llama.cpp's threads wait on one another, and a busy machine slows
// several threads far more than one. Each round then asks the native server the same request
// (its prompt cache off, so it reads the whole prompt as the tab does), and the last lines give
// the medians and the tab's share of native speed at the same thread count. The first round
// also prints each side's answer, and every line the prompt tokens each side read: the same
// request, whose answers may still differ (the native CPU kernels round differently).
import { createReadStream, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { serve, browser, recordingServer } from '../tests/browser/harness.mjs';

const GGUF = process.env.VERITY_GGUF;
if (!GGUF) throw new Error('VERITY_GGUF is not set (cargo xtask bench in-tab sets it)');
const rounds = Number(process.argv[2] ?? 3);
const NATIVE = process.env.VERITY_LLAMA_URL;
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const runs = { tab: {}, native: [] };

const REQUEST = {
  messages: [
    { role: 'system', content: 'You check claims against evidence. Answer in one sentence.' },
    { role: 'user', content: 'Claim: The Eiffel Tower is in Paris.\nEvidence: The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It was the tallest structure in the world until 1930.\nIs the claim supported?' },
  ],
  max_tokens: 48,
  temperature: 0,
  // Every round reads the whole prompt, in the tab as natively (both run llama.cpp's server
  // logic, whose prompt cache would otherwise skip it).
  cache_prompt: false,
};

const site = await serve();
const models = await recordingServer((request, response) => {
  response.writeHead(200, { 'access-control-allow-origin': '*', 'content-length': String(statSync(GGUF).size) });
  createReadStream(GGUF).pipe(response);
});
const { page, close } = await browser();
try {
  await page.goto(site.url);
  const { isolated, threads } = await page.evaluate(async () => ({
    isolated: crossOriginIsolated,
    threads: (await import('/verity-in-tab.js')).threads(),
  }));
  console.log(`cross-origin isolated: ${isolated}; the app's thread count here: ${threads}`);
  for (let round = 0; round < rounds; round++) {
    {
      // Through the app's own module, as the engine asks it (web/in-tab.js: its build of
      // llama.cpp in this isolated page), the model loaded by the first round.
      const run = await page.evaluate(async (body) => {
        const model = await import('/verity-in-tab.js');
        const { port1, port2 } = new MessageChannel();
        const answered = new Promise((resolve) => {
          port1.onmessage = ({ data }) => { if (!data.progress) resolve(data); };
        });
        await model.answer({ body: JSON.stringify(body) }, port2);
        const reply = await answered;
        if (reply.status !== 200) throw new Error(`the tab answered ${reply.status}: ${reply.body}`);
        const { timings, choices } = JSON.parse(reply.body);
        return { threads: model.threads(), prompt: timings.prompt_per_second, generation: timings.predicted_per_second, tokens: timings.predicted_n, prompted: timings.prompt_n, text: choices[0].message.content };
      }, { ...REQUEST, model: `${models.url}/model.gguf` });
      console.log(`in the tab, ${run.threads} thread${run.threads === 1 ? ' ' : 's'}: prompt ${run.prompt.toFixed(1)}, generation ${run.generation.toFixed(1)} tokens a second (${run.prompted} read, ${run.tokens} generated; load average ${loadavg()[0].toFixed(2)})`);
      if (round === 0) console.log(`  the tab's answer: ${JSON.stringify(run.text)}`);
      (runs.tab[run.threads] ??= []).push(run);
    }
    if (NATIVE) {
      const response = await fetch(`${NATIVE.replace(/\/$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...REQUEST, model: 'local' }),
      });
      const { timings, choices } = await response.json();
      const run = { prompt: timings.prompt_per_second, generation: timings.predicted_per_second, tokens: timings.predicted_n };
      console.log(`native server, 2 threads: prompt ${run.prompt.toFixed(1)}, generation ${run.generation.toFixed(1)} tokens a second (${timings.prompt_n} read, ${run.tokens} generated; load average ${loadavg()[0].toFixed(2)})`);
      if (round === 0) console.log(`  the native server's answer: ${JSON.stringify(choices[0].message.content)}`);
      runs.native.push(run);
    }
  }
  const figure = (list, key) => median(list.map((run) => run[key]));
  for (const [n, list] of Object.entries(runs.tab)) {
    console.log(`median in the tab, ${n} thread${n === '1' ? ' ' : 's'}: prompt ${figure(list, 'prompt').toFixed(1)}, generation ${figure(list, 'generation').toFixed(1)} tokens a second (${list.length} runs)`);
  }
  if (runs.native.length) {
    const native = { prompt: figure(runs.native, 'prompt'), generation: figure(runs.native, 'generation') };
    console.log(`median native, 2 threads: prompt ${native.prompt.toFixed(1)}, generation ${native.generation.toFixed(1)} tokens a second (${runs.native.length} runs)`);
    const same = runs.tab[2];
    if (same) {
      console.log(`the tab's share of native at 2 threads: prompt ${(figure(same, 'prompt') / native.prompt).toFixed(3)}, generation ${(figure(same, 'generation') / native.generation).toFixed(3)} (goal: 0.333)`);
    }
  }
} finally {
  await close();
  await models.close();
  await site.close();
}
