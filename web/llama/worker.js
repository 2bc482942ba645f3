// The model in the tab's own worker: llama.cpp built for wasm32 with pthreads
// (web/llama/verity-llama.cpp, linked as verity-llama.js and .wasm beside this file by
// `cargo xtask dist`), started by `web/in-tab.js` in a cross-origin isolated page.
//
// Messages in, one at a time per kind:
// - `{load: {blob, contextTokens, threads}}`: the GGUF (a Blob, read where it is kept, never
//   copied whole into this worker's memory but once, by llama.cpp) loaded, answered with
//   `{loaded: true}` or `{failed: "why"}`.
// - `{chat: {id, body}}`: an OpenAI-compatible chat completion's JSON body (not streamed),
//   answered with `{answer: {id, status, body}}` as llama.cpp's server answers it.
// - `{cancel: id}`: stops chat `id` (its answer still comes).
// And out, once, if llama.cpp stops (out of memory in a thread, say): `{crashed: "why"}`,
// after which this worker answers nothing more (the page starts another).

/* global VerityLlama */

const HERE = self.location.href;
/** How often a chat's answer is looked for (the worker's thread never waits on the model). */
const POLL_MS = 4;
/** The threads made before the model loads, besides ggml's: the server's loop, its queue's
 * worker, a request, and one to spare (a request's thread still being joined). */
const OTHER_THREADS = 4;

let llama = null;
let crashed = false;
const printed = []; // llama.cpp's last error lines

function say(text) {
  printed.push(String(text));
  if (printed.length > 20) printed.shift();
}

async function load({ blob, contextTokens, threads }) {
  if (llama) throw new Error('a model is already loaded in this worker');
  const script = new URL('verity-llama.js', HERE).href;
  importScripts(script);
  const module = await VerityLlama({
    pthreadPoolSize: threads + OTHER_THREADS,
    mainScriptUrlOrBlob: script,
    locateFile: (file) => new URL(file, HERE).href,
    print: () => {},
    printErr: say,
    onAbort: (what) => {
      crashed = true;
      postMessage({ crashed: [String(what ?? 'aborted'), ...printed.slice(-3)].join(': ') });
    },
  });
  module.FS.mkdir('/model');
  module.FS.mount(module.WORKERFS, { blobs: [{ name: 'model.gguf', data: blob }] }, '/model');
  const status = module.ccall('verity_llama_load', 'number', ['string', 'number', 'number'], ['/model/model.gguf', contextTokens, threads]);
  if (status !== 0) {
    const why = module.UTF8ToString(module._verity_llama_error());
    throw new Error([why, ...printed.slice(-3)].filter(Boolean).join(': '));
  }
  llama = module;
}

function chat({ id, body }) {
  const handle = llama.ccall('verity_llama_chat', 'number', ['string'], [body]);
  if (handle < 0) throw new Error(llama.UTF8ToString(llama._verity_llama_error()));
  handles.set(id, handle);
  const look = () => {
    if (crashed) return;
    const answer = llama._verity_llama_answer(handle);
    if (!answer) {
      setTimeout(look, POLL_MS);
      return;
    }
    handles.delete(id);
    const text = llama.UTF8ToString(answer);
    postMessage({ answer: { id, status: Number(text.slice(0, 3)), body: text.slice(3) } });
  };
  setTimeout(look, POLL_MS);
}

const handles = new Map(); // the page's chat id -> verity_llama_chat's

self.onmessage = async ({ data }) => {
  if (crashed) return;
  if (data?.load) {
    try {
      await load(data.load);
      postMessage({ loaded: true });
    } catch (error) {
      postMessage({ failed: String(error?.message ?? error) });
    }
  } else if (data?.chat) {
    const refuse = (status, message) =>
      postMessage({ answer: { id: data.chat.id, status, body: JSON.stringify({ error: { message, type: 'server_error' } }) } });
    if (!llama) {
      refuse(503, 'no model is loaded');
      return;
    }
    try {
      chat(data.chat);
    } catch (error) {
      refuse(500, String(error?.message ?? error));
    }
  } else if (data?.cancel !== undefined) {
    const handle = handles.get(data.cancel);
    if (handle !== undefined) llama._verity_llama_cancel(handle);
  }
};
