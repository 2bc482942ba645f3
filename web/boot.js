// Starts the page's wasm (wasm-bindgen's `--target web` output, verity-web.js beside this
// file). A module file rather than an inline script: the page's Content-Security-Policy runs
// no inline script.
import init from "./verity-web.js";

await init();
