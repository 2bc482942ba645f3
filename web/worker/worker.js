// The worker's module entry: `cargo xtask dist` copies it beside the worker's wasm as
// verity-worker_loader.js, the name the page and the embedding start it by. The top-level await matters: a module worker's messages are queued
// until its script has finished evaluating, so nothing the page posts early is lost.
// As a shared worker (the app: one engine for every tab, web/boot.js), a tab's `connect`
// event may come while the wasm loads: its port waits in `verityConnected`, which the wasm
// takes when it starts (web/worker/src/wasm.rs).
import init from "./verity-worker.js";
if ("onconnect" in self) {
  const waiting = [];
  self.verityConnected = waiting;
  self.onconnect = (event) => waiting.push(...event.ports);
}
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

await init();
for (const event of early.splice(0)) self.onmessage?.(event);
