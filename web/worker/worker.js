// The worker's module entry without trunk (trunk's data-loader-shim generates the same as
// verity-worker_loader.js). The top-level await matters: a module worker's messages are queued
// until its script has finished evaluating, so nothing the page posts early is lost.
import init from "./verity-worker.js";
await init();
