// Retrieval benchmark under Node: our wasm build (BM25 and the keyword heuristic) against
// MiniSearch (BM25+, default options), on the same claims and corpus, plus the native figures
// measured by `bench-retrieve`. Prints one JSON object.
//
// usage: node bench/retrieve.mjs VERITY_BENCH_JS CLAIMS CORPUS NATIVE_JSON [BUILDS] [PASSES]
//
// Timing, the same for every retriever: file reading and JSON parsing are excluded; an index
// build is one call (`RetrieveBench.build_index`, `MiniSearch.addAll`), built BUILDS times and
// the median reported; queries run once to warm up, then PASSES times, each call timed on its
// own (the keyword heuristic, which scans the whole corpus per query, runs one timed pass).
// Recall@k: a claim is found when any gold id is among the first k passages returned.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import MiniSearch from 'minisearch';

const require = createRequire(import.meta.url);
const [wasmPath, claimsPath, corpusPath, nativeJson, buildsArg, passesArg] = process.argv.slice(2);
if (!nativeJson) {
  console.error('usage: node bench/retrieve.mjs VERITY_BENCH_JS CLAIMS CORPUS NATIVE_JSON [BUILDS] [PASSES]');
  process.exit(2);
}
const builds = Number(buildsArg ?? 5);
const passes = Number(passesArg ?? 3);
const K = 10;
const RECALL_AT = [1, 5, 10];

const wasm = require(resolve(wasmPath));
const readLines = (path) => readFileSync(path, 'utf8').split('\n').filter((line) => line.trim() !== '');
const claims = readLines(claimsPath).map((line) => JSON.parse(line));
const corpusText = readFileSync(corpusPath, 'utf8');
const passages = corpusText.split('\n').filter((line) => line.trim() !== '').map((line) => JSON.parse(line));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
// Nearest rank, as in bench-retrieve.
const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(Math.max(Math.ceil(p * s.length), 1), s.length) - 1];
};
const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;

/// Times `build` BUILDS times; the median in ms.
function timeBuilds(build) {
  const ms = [];
  for (let i = 0; i < builds; i++) {
    const start = performance.now();
    build();
    ms.push(performance.now() - start);
  }
  return median(ms);
}

/// Runs `query(claim) -> ids` over every claim: a warm-up pass that gives the rankings, then
/// `timedPasses` timed passes.
function timeQueries(query, timedPasses) {
  const ranked = claims.map((c) => query(c.claim));
  const us = [];
  for (let pass = 0; pass < timedPasses; pass++) {
    for (const c of claims) {
      const start = performance.now();
      query(c.claim);
      us.push((performance.now() - start) * 1000);
    }
  }
  const recall = RECALL_AT.map((k) =>
    claims.filter((c, i) => ranked[i].slice(0, k).some((id) => c.gold.includes(id))).length / claims.length);
  return {
    query_us_median: round(median(us), 1),
    query_us_p95: round(percentile(us, 0.95), 1),
    recall_at_1: round(recall[0], 4),
    recall_at_5: round(recall[1], 4),
    recall_at_10: round(recall[2], 4),
  };
}

// Ours, in wasm.
const bench = new wasm.RetrieveBench(corpusText);
const bm25Build = timeBuilds(() => bench.build_index());
const idOf = (indices) => Array.from(indices, (i) => passages[i].id);
const bm25Wasm = { build_ms: round(bm25Build, 1), ...timeQueries((q) => idOf(bench.bm25(q, K)), passes) };
const keywordWasm = { build_ms: null, ...timeQueries((q) => idOf(bench.keyword(q, K)), 1) };

// MiniSearch, default options (BM25+, k1 1.2, b 0.7, d 0.5; OR of the query terms; no prefix or
// fuzzy matching), indexing the text and returning ids only. Then the same with our stop words
// dropped (its `processTerm` applies to documents and queries alike): most of its query time
// goes to the passages that match only "the", "of", "in".
const STOP_WORDS = new Set(['a', 'an', 'and', 'are', 'as', 'at', 'be', 'but', 'by', 'for', 'if',
  'in', 'into', 'is', 'it', 'no', 'not', 'of', 'on', 'or', 'such', 'that', 'the', 'their', 'then',
  'there', 'these', 'they', 'this', 'to', 'was', 'will', 'with']);
function miniSearch(options) {
  let mini;
  const build = timeBuilds(() => {
    mini = new MiniSearch({ fields: ['text'], idField: 'id', ...options });
    mini.addAll(passages);
  });
  return { build_ms: round(build, 1), ...timeQueries((q) => mini.search(q).slice(0, K).map((r) => r.id), passes) };
}
const minisearch = miniSearch({});
const minisearchStopWords = miniSearch({
  processTerm: (term) => {
    const lower = term.toLowerCase();
    return STOP_WORDS.has(lower) ? null : lower;
  },
});

const native = JSON.parse(nativeJson);
const ratio = (a, b) => round(a / b, 2);
const versus = (other) => ({
  recall_at_5_difference: round(bm25Wasm.recall_at_5 - other.recall_at_5, 4),
  query_median_speedup: ratio(other.query_us_median, bm25Wasm.query_us_median),
  query_p95_speedup: ratio(other.query_us_p95, bm25Wasm.query_us_p95),
  build_speedup: ratio(other.build_ms, bm25Wasm.build_ms),
  goals_met: {
    recall_at_5: bm25Wasm.recall_at_5 >= other.recall_at_5,
    query_3x: other.query_us_median >= 3 * bm25Wasm.query_us_median,
    build_2x: other.build_ms >= 2 * bm25Wasm.build_ms,
  },
});
console.log(JSON.stringify({
  claims: claims.length,
  passages: passages.length,
  builds,
  query_passes: passes,
  node: process.version,
  minisearch_version: JSON.parse(readFileSync(new URL('../node_modules/minisearch/package.json', import.meta.url), 'utf8')).version,
  retrievers: {
    'bm25-wasm': bm25Wasm,
    'keyword-wasm': keywordWasm,
    'bm25-native': native,
    minisearch,
    'minisearch-stopwords': minisearchStopWords,
  },
  'bm25-wasm_vs_minisearch': versus(minisearch),
  'bm25-wasm_vs_minisearch-stopwords': versus(minisearchStopWords),
}, null, 2));
