// The engine worker's code by crate, from twiggy's CSV on stdin (docs/BENCHMARKS.md, "Where the
// engine's bytes go"):
//
//   twiggy top -n 100000 -f csv target/wasm32-unknown-unknown/wasm-release/verity-worker.wasm \
//     | node bench/by-crate.mjs
//
// A function counts to the first crate its symbol names (`<verity_core::claim::ClaimCheck as
// verity_core::machine::Machine>::handle_input` to verity_core; a generic instantiated for a
// crate's type counts to that crate). Sections (function names, data, wasm-bindgen's custom
// section) and wasm-bindgen's `__wbindgen_describe_*` functions, which wasm-bindgen removes, are
// printed apart. twiggy comes from crates.io (`cargo install twiggy`); the xtask does not install it.
import { readFileSync } from 'node:fs';

const GROUPS = [
  ['jsonschema itself', ['jsonschema']],
  ["jsonschema's own dependencies", ['referencing', 'data_encoding', 'num_bigint', 'num', 'fraction', 'fluent_uri',
    'jsonschema_value', 'email_address', 'ahash', 'once_cell', 'bytecount', 'percent_encoding', 'unicode_general_category']],
  ['the regex family (pulled by jsonschema)', ['regex_automata', 'fancy_regex', 'regex_syntax', 'aho_corasick',
    'jsonschema_regex', 'memchr', 'regex', 'bit_set', 'bit_vec']],
  ['the core (verity_core)', ['verity_core']],
  ["serde's libraries", ['serde', 'serde_core', 'serde_json', 'serde_path_to_error']],
  ["Rust's core, alloc and std, and the allocator", ['core', 'alloc', 'std', 'fmt', 'str', 'string', 'raw', 'dlmalloc']],
  ['the worker (verity_worker)', ['verity_worker']],
  ['the messages (verity_messages)', ['verity_messages']],
];
const groupOf = new Map(GROUPS.flatMap(([group, crates]) => crates.map((crate) => [crate, group])));
const SECTION = /^("|data segment|custom section|elem\[|export |import |type\[|global|table|memory)/;

/** One CSV line's fields (twiggy quotes a name with a comma). */
function fields(line) {
  const out = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') { field += '"'; i++; } else if (c === '"') quoted = false; else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { out.push(field); field = ''; } else field += c;
  }
  out.push(field);
  return out;
}

const lines = readFileSync(0, 'utf8').split('\n').slice(1).filter(Boolean);
const byGroup = new Map();
const byCrate = new Map();
const sections = [];
let code = 0;
let describe = 0;
let derived = new Map(); // crate -> bytes of its derived (de)serializers
for (const line of lines) {
  const [name, shallow] = fields(line);
  const size = Number(shallow);
  if (name.startsWith('Σ') || name.startsWith('...')) continue;
  if (SECTION.test(name)) { sections.push([size, name]); continue; }
  if (name.startsWith('__wbindgen_describe')) { describe += size; continue; }
  code += size;
  const crate = name.match(/([A-Za-z_][A-Za-z0-9_]*)::/)?.[1] ?? '?';
  byCrate.set(crate, (byCrate.get(crate) ?? 0) + size);
  const group = groupOf.get(crate) ?? 'the rest';
  byGroup.set(group, (byGroup.get(group) ?? 0) + size);
  if (/serde_core::(de::Deserialize|ser::Serialize) for/.test(name)) derived.set(crate, (derived.get(crate) ?? 0) + size);
}
const pct = (n) => `${((100 * n) / code).toFixed(1)}%`;
console.log(`code: ${code} B (and ${describe} B of wasm-bindgen's describe functions)`);
for (const [group, bytes] of [...byGroup].sort((a, b) => b[1] - a[1])) {
  const crates = (GROUPS.find(([g]) => g === group)?.[1] ?? [...byCrate.keys()].filter((c) => !groupOf.has(c)))
    .map((crate) => [crate, byCrate.get(crate) ?? 0]).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1])
    .slice(0, 8).map(([crate, n]) => `${crate} ${n}`).join(', ');
  console.log(`${String(bytes).padStart(9)} ${pct(bytes).padStart(6)}  ${group}: ${crates}`);
}
for (const crate of ['verity_core', 'verity_messages', 'verity_worker']) {
  console.log(`derived (de)serializers of ${crate}: ${derived.get(crate) ?? 0} B`);
}
console.log('sections:');
for (const [size, name] of sections.sort((a, b) => b[0] - a[0]).slice(0, 4)) console.log(`${String(size).padStart(9)}  ${name}`);
