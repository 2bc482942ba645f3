// Starts the page's wasm (wasm-bindgen's `--target web` output, verity-web.js beside this
// file). A module file rather than an inline script: the page's Content-Security-Policy runs
// no inline script. Until the wasm runs, the page says it is loading; if it cannot run (an old
// browser, a server that sends the wasm with the wrong type), the page says so instead of
// staying blank.
import init from "./verity-web.js";

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
