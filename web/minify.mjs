// Minifies the app's JavaScript modules in place for a release build (`cargo xtask dist`):
// `node web/minify.mjs FILE...`. Every file is an ES module (the page's boot.js, the
// wasm-bindgen glue, the worker's loader, the model in the tab, verity.js). Whitespace,
// comments and local names go; exported names, property names and string literals stay, so
// the glue's imports object and the build id written by the xtask keep their names. The
// sources in web/ stay readable; dist/ gets what a browser needs. Prints each file's bytes
// before and after, and fails on any file the minifier cannot parse.
import { minifySync } from 'oxc-minify';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node web/minify.mjs FILE...');
  process.exit(2);
}
let failed = false;
for (const file of files) {
  const source = readFileSync(file, 'utf8');
  const { code, errors } = minifySync(basename(file), source, {
    module: true,
    compress: true,
    mangle: { toplevel: false },
    codegen: { removeWhitespace: true },
  });
  if (errors.length > 0) {
    console.error(`${file}: ${errors.map((error) => error.message).join('; ')}`);
    failed = true;
    continue;
  }
  writeFileSync(file, code);
  console.log(`minified ${basename(file)}: ${Buffer.byteLength(source)} -> ${Buffer.byteLength(code)} bytes`);
}
process.exit(failed ? 1 : 0);
