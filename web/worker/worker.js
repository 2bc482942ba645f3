// The worker's module entry: `cargo xtask dist` copies it beside the workers' wasm as
// verity-worker_loader.js, the name the page and the embedding start it by. The top-level await matters: a module worker's messages are queued
// until its script has finished evaluating, so nothing the page posts early is lost.
// As a shared worker (the app: one engine for every tab, web/boot.js), a tab's `connect`
// event may come while the wasm loads: its port waits in `verityConnected`, which the wasm
// takes when it starts (web/worker/src/wasm/mod.rs).

// This build's id (`cargo xtask dist` writes it here and in boot.js): each page is told it
// before anything else, so a page of another build (a tab left open over a deploy, or a page
// from a cache) says so instead of misreading the engine's messages.
const BUILD = "__VERITY_BUILD__";
// The pages, as this script sees them: told the build, and told if the engine crashes.
const pages = [];
const meet = (page) => {
  pages.push(page);
  page.postMessage({ verityBuild: BUILD });
};
if ("onconnect" in self) {
  // Added before `onconnect` is first set, so a page hears the build before the engine's
  // first message.
  self.addEventListener("connect", (event) => event.ports.forEach(meet));
  const waiting = [];
  self.verityConnected = waiting;
  self.onconnect = (event) => waiting.push(...event.ports);
} else {
  meet(self);
  // Ports a leader tab passes on (one per other tab, web/boot.js) are pages too.
  self.addEventListener("message", (event) => event.ports.forEach(meet));
}

// A trap in the engine's wasm (a bug: a panic, memory exhausted) leaves it unusable. Every
// page is told and the worker closes: the pages start a new engine, which resumes the checks
// from their durable sessions (web/boot.js).
let crashed = false;
const crash = (error) => {
  if (crashed) return;
  crashed = true;
  const news = { verityEngine: "crashed", message: String(error?.message ?? error) };
  for (const page of pages) page.postMessage(news);
  self.close();
};
self.addEventListener("error", (event) => {
  if (event.error instanceof WebAssembly.RuntimeError) crash(event.error);
});
self.addEventListener("unhandledrejection", (event) => {
  if (event.reason instanceof WebAssembly.RuntimeError) crash(event.reason);
});
// As a dedicated worker, messages the page posts while the wasm loads are dispatched during the
// await below (Chromium does not hold them for a module's top-level await): they wait here and
// are handed to the wasm's listener once it is installed (the page's own messages wait for
// `ready`; a page's offer to run the model in the tab is posted at once).
const early = [];
if (!("onconnect" in self)) self.onmessage = (event) => early.push(event);

// A request to the model in the tab (base URL `in-tab:`), which a page runs (web/in-tab.js):
// sent to `page` with a port of its own; each `{progress}` on the port calls `alive` (the idle
// clock starts again), the answer `{status, headers, body}` resolves as a response with a
// readable body. Aborting `signal` tells the page to stop and rejects; so does a page that
// answers with something else.
self.verityCallInTab = (page, body, signal, alive) =>
  new Promise((resolve, reject) => {
    const { port1, port2 } = new MessageChannel();
    const stop = () => {
      port1.postMessage({ cancel: true });
      port1.close();
      reject(new DOMException("the request was aborted", "AbortError"));
    };
    if (signal.aborted) return stop();
    signal.addEventListener("abort", stop, { once: true });
    port1.onmessage = ({ data }) => {
      if (data?.progress) return alive();
      signal.removeEventListener("abort", stop);
      port1.close();
      if (typeof data?.status !== "number" || typeof data?.body !== "string") {
        return reject(new Error("the tab running the model answered something else than a response"));
      }
      const headers = Array.isArray(data.headers) ? data.headers : [];
      resolve({ status: data.status, headers, body: new Response(data.body).body });
    };
    page.postMessage({ verityModel: "call", body }, [port2]);
  });

// `?engine=full` (verity.js) is the engine with the whole of JSON Schema, for `runStep`'s
// schemas; the app's engine checks claims and answers against the core's own schemas only,
// and is half the size (DESIGN.md, "Dependencies"). Imported here, after the listeners
// above: an import at the top would await before them, and a page's `connect` could be lost.
const FULL = new URLSearchParams(self.location.search).get("engine") === "full";
const { default: init } = await import(FULL ? "./verity-embed-worker.js" : "./verity-worker.js");
await init();
for (const event of early.splice(0)) self.onmessage?.(event);
