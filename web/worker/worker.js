// The worker's module entry: `cargo xtask dist` copies it beside the worker's wasm as
// verity-worker_loader.js, the name the page and the embedding start it by. The top-level await matters: a module worker's messages are queued
// until its script has finished evaluating, so nothing the page posts early is lost.
import init from "./verity-worker.js";
await init();
