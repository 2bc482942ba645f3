// Starts the page's wasm (wasm-bindgen's `--target web` output, verity-web.js beside this
// file). A module file rather than an inline script: the page's Content-Security-Policy runs
// no inline script. Until the wasm runs, the page says it is loading; if it cannot run (an old
// browser, a server that sends the wasm with the wrong type), the page says so instead of
// staying blank.
import init from "./verity-web.js";

// The engine the UI talks to (web/src/bridge.rs calls this): one per origin, so two tabs
// never run a check twice nor overwrite each other's storage (docs/design/web.md, "One
// engine per origin"). A SharedWorker that every tab connects to; without shared workers
// (Chrome on Android, Safari before 16), the tab holding a Web Lock runs the engine in a
// dedicated worker and the others reach it over a BroadcastChannel. Either way the answer is
// an object with a dedicated Worker's members, which is what the UI was written against.
globalThis.verityEngine = (url) => {
  if (url === ENGINE_URL && early) {
    const engine = early;
    early = null;
    return engine;
  }
  return runsModels(url);
};

/** The most messages of the engine kept for a UI that has not listened yet. */
const MAX_UNHEARD = 1000;

// This build's id (`cargo xtask dist` writes it here and in the worker's loader): the engine
// tells every page its own first, and a page of another build says so rather than misread it.
const BUILD = "__VERITY_BUILD__";

/** Keeps the `.gguf` file picked in the Provider section's file field (#provider-gguf) in this
 * browser (web/in-tab.js), then puts its model reference (`file:NAME`), or why it could not be
 * kept, in the model field as if typed, so the UI takes it as it takes typing. */
addEventListener("change", async ({ target }) => {
  const file = target?.id === "provider-gguf" ? target.files?.[0] : null;
  if (!file) return;
  let model;
  try {
    model = await (await import("./verity-in-tab.js")).keepModelFile(file);
  } catch (error) {
    model = `(not kept: ${error?.message ?? error})`;
  }
  const field = document.getElementById("provider-model");
  if (!field) return;
  field.value = model;
  field.dispatchEvent(new Event("input", { bubbles: true }));
});

function engineAt(url) {
  if (typeof SharedWorker === "function") {
    const shared = new SharedWorker(url, { type: "module", name: "verity" });
    const port = shared.port;
    return {
      restartable: true,
      postMessage: (message) => port.postMessage(message),
      set onmessage(listener) { port.onmessage = listener; },
      set onmessageerror(listener) { port.onmessageerror = listener; },
      set onerror(listener) { shared.onerror = listener; },
      terminate: () => port.close(),
    };
  }
  if (!navigator.locks || typeof BroadcastChannel !== "function") {
    // Neither: an engine in this tab only (two tabs would each run their own).
    return Object.assign(new Worker(url, { type: "module" }), { restartable: true });
  }
  return elected(url);
}

/** The engine with this tab offering to run the model in the tab (web/in-tab.js): the engine
 * sends its `in-tab:` requests to a page, since a shared worker cannot start the worker that
 * llama.cpp runs in. Those calls are answered here and never reach the UI; the module and
 * llama.cpp load only when the first call comes. The tab says when it goes, so no call waits on it.
 *
 * The engine's first word is its build: one of another build (a tab left open over a deploy
 * keeps the old engine running; a page may come from a cache) is not talked to, and the page
 * says what to do. An engine that crashes (a trap in its wasm) says so and closes: this page
 * starts a new one, which resumes the checks from their durable sessions, and the UI takes
 * its `ready` as after a reload. Three crashes within a minute stop the restarts. */
function runsModels(url) {
  let listener = null;
  // What the engine says before the UI listens (it starts before the UI's wasm has loaded),
  // given to the UI when it does, in order; a UI that never comes (its wasm failed) keeps at
  // most MAX_UNHEARD.
  let unheard = [];
  const handlers = {};
  let engine = null;
  let differs = false;
  let crashes = [];
  const start = () => {
    engine = engineAt(url);
    engine.onmessage = (event) => {
      const data = event.data;
      if (data?.verityBuild !== undefined) {
        if (data.verityBuild !== BUILD) {
          differs = true;
          engineState("differs", "This page and the Verity engine already running for this site come from different versions (the site was updated). Close the other tabs of this site, then reload this one. Nothing saved is lost.");
        } else {
          // Only a page of the engine's build offers to run the model in the tab: one of
          // another build would drop the calls, and every tab's in-tab checks would stall.
          differs = false;
          engine.postMessage({ verityModel: "runner" });
        }
        return;
      }
      if (data?.verityEngine === "crashed") return restart(data.message);
      if (differs) return;
      if (data?.verityModel === "call" && event.ports?.[0]) {
        const port = event.ports[0];
        import("./verity-in-tab.js")
          .then((model) => model.answer(data, port))
          .catch((error) => port.postMessage({ error: `the model in the tab could not start: ${error?.message ?? error}` }));
        return;
      }
      if (listener) listener(event);
      else if (unheard.length < MAX_UNHEARD) unheard.push(event);
    };
    if (handlers.messageerror) engine.onmessageerror = handlers.messageerror;
    if (handlers.error) engine.onerror = handlers.error;
  };
  const restart = (message) => {
    const now = Date.now();
    crashes = crashes.filter((at) => now - at < 60000);
    if (crashes.length >= 3 || !engine.restartable) {
      engineState("failed", `The engine stopped after an error (${message}). Reload the page: the checks go on from what they had saved.`);
      return;
    }
    crashes.push(now);
    engineState("restarted", `The engine stopped after an error (${message}) and was started again: the checks go on from what they had saved.`);
    // The old worker closes itself first; a new shared worker of the same name is then a new one.
    setTimeout(start, 100);
  };
  start();
  const current = { postMessage: (message) => engine.postMessage(message) };
  addEventListener("pagehide", () => engine.postMessage({ verityModel: "bye" }));
  addEventListener("pageshow", (event) => event.persisted && !differs && engine.postMessage({ verityModel: "runner" }));
  showModelState();
  handsLargeFilesTo(current);
  const post = quietSearch((message) => engine.postMessage(message));
  return {
    postMessage: post,
    set onmessage(next) {
      listener = next;
      const kept = unheard;
      unheard = [];
      for (const event of kept) next?.(event);
    },
    set onmessageerror(next) { handlers.messageerror = next; engine.onmessageerror = next; },
    set onerror(next) { handlers.error = next; engine.onerror = next; },
    terminate: () => engine.terminate(),
  };
}

/** The line at the top of the page named `name` (its class and test id), made the first time. */
function topLine(name, role) {
  let line = document.querySelector(`.${name}`);
  if (!line) {
    line = document.createElement("p");
    line.className = name;
    line.setAttribute("role", role);
    line.dataset.testid = name;
    document.body.prepend(line);
  }
  return line;
}

/** What became of the engine (another build, restarted, stopped), in a line at the top. */
function engineState(state, text) {
  const line = topLine("engine-state", "alert");
  line.dataset.state = state;
  line.textContent = text;
}

/** How long the table's search waits for the typing to pause before it asks the engine. */
const SEARCH_QUIET_MS = 120;

/** `send` with the table's search debounced: a `listItems` for a new query goes at once if
 * none went in the last SEARCH_QUIET_MS, otherwise when that time is up, and only the newest
 * of those that came meanwhile; another page of the query last sent, and every other message,
 * goes at once. */
function quietSearch(send) {
  let timer = null;
  let sent = null;
  let last = -Infinity;
  return (message) => {
    if (message?.type !== "listItems") {
      send(message);
      return;
    }
    clearTimeout(timer);
    const go = () => {
      last = performance.now();
      sent = message.query;
      send(message);
    };
    const wait = last + SEARCH_QUIET_MS - performance.now();
    if (message.query === sent || wait <= 0) go();
    else timer = setTimeout(go, wait);
  };
}

/** Files this large (8 MiB and more) go to the engine as they are (it reads them a block at a time) instead of
 * being read into the page and sent as text: a corpus of a million passages is ~200 MB, and
 * its text copied through the page's WebAssembly and the message took the tab past its memory. */
const HAND_OVER_BYTES = 8 * 1024 * 1024;

/** Takes the corpus files picked (#corpus-file-input) or dropped (on [data-testid=corpus-drop])
 * before the page's own handlers do, when they are large, and posts them to `engine` as
 * `{verityFiles}`; smaller files go the page's way. What the engine makes of them comes back
 * as it always does (the corpus, or the file refused). */
function handsLargeFilesTo(engine) {
  const large = (files) => [...(files ?? [])].reduce((sum, file) => sum + file.size, 0) >= HAND_OVER_BYTES;
  const handOver = (event, files) => {
    event.stopImmediatePropagation();
    event.preventDefault();
    engine.postMessage({ verityFiles: [...files] });
  };
  addEventListener("change", (event) => {
    const input = event.target;
    if (input?.id !== "corpus-file-input" || !large(input.files)) return;
    handOver(event, input.files);
    input.value = "";
  }, true);
  addEventListener("drop", (event) => {
    const zone = event.target?.closest?.('[data-testid="corpus-drop"]');
    const files = event.dataTransfer?.files;
    if (!zone || !large(files)) return;
    handOver(event, files);
    zone.dispatchEvent(new Event("dragleave", { bubbles: true }));
  }, true);
}

/** The model in the tab's state, in a line at the top of the page (web/in-tab.js announces
 * it): its download (bytes, share and time left), that it is ready and kept in this browser,
 * its speed, or why it failed. */
function showModelState() {
  const MB = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;
  const on = (threads) => (threads ? ` on ${threads} thread${threads === 1 ? "" : "s"}` : "");
  let download = null; // { model, started, from }: the download being shown
  const left = (detail) => {
    if (download?.model !== detail.model) download = { model: detail.model, started: performance.now(), from: detail.loaded };
    const seconds = (performance.now() - download.started) / 1000;
    const rate = (detail.loaded - download.from) / seconds;
    if (!detail.total || seconds < 1 || !(rate > 0)) return "";
    const rest = (detail.total - detail.loaded) / rate;
    return `, about ${rest < 90 ? `${Math.ceil(rest)} s` : `${Math.ceil(rest / 60)} min`} left`;
  };
  const speed = (timings) => {
    // A one-token answer (the verifier's questions) says nothing of the generation speed.
    const parts = [];
    if (timings?.prompt_n > 0) parts.push(`${timings.prompt_per_second.toFixed(0)} prompt`);
    if (timings?.predicted_n > 1) parts.push(`${timings.predicted_per_second.toFixed(0)} generated`);
    return parts.length ? `: ${parts.join(" and ")} tokens a second.` : ".";
  };
  addEventListener("verity-model", ({ detail }) => {
    const line = topLine("model-state", "status");
    line.dataset.state = detail.state;
    if (detail.state !== "loading") download = null;
    const name = detail.model.startsWith("file:") ? detail.model.slice(5) : detail.model.split("/").pop();
    line.textContent = {
      loading: () => `Loading the model ${name} into this tab` + (detail.total
        ? `: ${MB(detail.loaded)} of ${MB(detail.total)} (${Math.floor((100 * detail.loaded) / detail.total)}%)${left(detail)}`
        : detail.loaded ? `: ${MB(detail.loaded)}` : "…"),
      ready: () => `The model ${name} runs in this tab${on(detail.threads)} (${MB(detail.bytes)}, kept in this browser).`,
      kept: () => `The model file ${name} is kept in this browser (${MB(detail.bytes)}).`,
      "not-kept": () => `The model ${name} could not be kept in this browser (${detail.message}); it will be downloaded again after a reload.`,
      answered: () => `The model ${name} runs in this tab${on(detail.threads)}${speed(detail.timings)}`,
      failed: () => `The model ${name} could not be loaded in this tab: ${detail.message}`,
    }[detail.state]?.() ?? "";
  });
}

/** The engine of the tab that holds the lock "verity-engine" (the leader); every other tab
 * (a follower) sends its messages over the channel "verity-engine" to the leader, which hands
 * each follower a MessagePort of the worker (posted with "connect") and relays both ways. When
 * the leader's tab closes, the lock goes to a follower, whose own worker resumes from
 * IndexedDB; it says so ({leader: true}) and the others connect to it again. */
function elected(url) {
  const NAME = "verity-engine";
  const tab = `${Date.now()}-${Math.random()}`;
  const bus = new BroadcastChannel(NAME);
  const listeners = {};
  // With its ports: the engine's requests to the model in the tab come with one.
  const deliver = (data, ports = []) => listeners.message?.(new MessageEvent("message", { data, ports: [...ports] }));
  const waiting = [];
  let send = (message) => waiting.push(message);
  const sendWith = (next) => {
    send = next;
    waiting.splice(0).forEach(next);
  };
  const hello = () => bus.postMessage({ to: "leader", from: tab, hello: true });
  const lead = () => {
    const worker = new Worker(url, { type: "module" });
    worker.onmessage = (event) => deliver(event.data, event.ports);
    // The leader's tab runs the model in the tab for its engine (runsModels); a follower
    // cannot (a port does not cross the channel), so its offer is not passed on.
    worker.postMessage({ verityModel: "runner" });
    worker.onerror = (event) => listeners.error?.(event);
    worker.onmessageerror = (event) => listeners.error?.(event);
    const followers = new Map();
    bus.onmessage = ({ data }) => {
      if (data?.to !== "leader") return;
      let port = followers.get(data.from);
      if (!port) {
        const channel = new MessageChannel();
        port = channel.port1;
        port.onmessage = (event) => bus.postMessage({ to: data.from, message: event.data });
        followers.set(data.from, port);
        worker.postMessage("connect", [channel.port2]);
      }
      if ("message" in data && !data.message?.verityModel) port.postMessage(data.message);
    };
    sendWith((message) => worker.postMessage(message));
    bus.postMessage({ leader: true });
    return new Promise(() => {}); // held while the tab lives
  };
  navigator.locks.request(NAME, { ifAvailable: true }, (lock) => {
    if (lock) return lead();
    bus.onmessage = ({ data }) => {
      if (data?.leader) hello();
      else if (data?.to === tab) deliver(data.message);
    };
    hello();
    sendWith((message) => bus.postMessage({ to: "leader", from: tab, message }));
    navigator.locks.request(NAME, lead);
  });
  return {
    postMessage: (message) => send(message),
    set onmessage(listener) { listeners.message = listener; },
    set onmessageerror(listener) { listeners.error = listener; },
    set onerror(listener) { listeners.error = listener; },
    terminate: () => bus.close(),
  };
}

// The engine starts now, before the UI's wasm is fetched, and the UI takes it when it asks
// (web/src/bridge.rs's WORKER_URL): the engine's wasm, most of the page's bytes, then loads
// beside the UI's instead of after it, and on a slow link the engine is ready about 0.2 s
// sooner (docs/BENCHMARKS.md, "Time to a ready engine"). What it says before the UI listens is
// kept for the UI.
const ENGINE_URL = "./verity-worker_loader.js";
let early = runsModels(ENGINE_URL);

const status = document.getElementById("boot-status");
try {
  await init();
  status?.remove();
} catch (error) {
  if (status) {
    status.textContent =
      `Verity could not start in this browser: ${error?.message ?? error}. It needs ` +
      "WebAssembly and JavaScript modules (a current Chrome, Edge, Firefox or Safari), and a " +
      "server that sends .wasm files as application/wasm.";
    status.setAttribute("role", "alert");
  }
  throw error;
}
