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
await init();
