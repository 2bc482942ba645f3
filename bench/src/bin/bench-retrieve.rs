//! Native retrieval benchmark: BM25 over a corpus, one JSON object
//! `{"build_ms","query_us_median","query_us_p95","recall_at_1","recall_at_5","recall_at_10"}`.
//!
//! usage: bench-retrieve CLAIMS CORPUS [BUILDS] [PASSES]
//!
//! The index is built BUILDS times (median reported, default 5); the claims are queried once to
//! warm up, then PASSES times (default 3), each query timed on its own. File reading and JSON
//! parsing are not timed.

use std::time::Instant;

use serde_json::json;
use verity_bench::retrieve::{Claim, RECALL_AT, bm25, parse_corpus, parse_lines, recall};
use verity_core::retrieve::Bm25Index;

fn main() {
    if let Err(message) = run() {
        eprintln!("bench-retrieve: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [claims_path, corpus_path, rest @ ..] = args.as_slice() else {
        return Err("usage: bench-retrieve CLAIMS CORPUS [BUILDS] [PASSES]".to_owned());
    };
    let number = |i: usize, default: usize| {
        rest.get(i).map_or(Ok(default), |s| s.parse().map_err(|e| format!("{s:?}: {e}")))
    };
    let (builds, passes) = (number(0, 5)?, number(1, 3)?);
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"));
    let claims: Vec<Claim> = parse_lines(&read(claims_path)?)?;
    let corpus = parse_corpus(&read(corpus_path)?)?;

    let mut build_ms = Vec::new();
    let mut index = Bm25Index::default();
    for _ in 0..builds.max(1) {
        let start = Instant::now();
        index = Bm25Index::build(&corpus);
        build_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }

    let k = RECALL_AT[RECALL_AT.len() - 1];
    let ranked: Vec<Vec<usize>> =
        claims.iter().map(|claim| bm25(&corpus, &index, &claim.claim, k)).collect();
    let mut query_us = Vec::new();
    for _ in 0..passes.max(1) {
        for claim in &claims {
            let start = Instant::now();
            let found = bm25(&corpus, &index, &claim.claim, k);
            query_us.push(start.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(found);
        }
    }
    let [at1, at5, at10] = recall(&corpus, &claims, &ranked);
    println!(
        "{}",
        json!({
            "build_ms": round(median(&mut build_ms), 1),
            "query_us_median": round(median(&mut query_us), 1),
            "query_us_p95": round(percentile(&mut query_us, 0.95), 1),
            "recall_at_1": round(at1, 4),
            "recall_at_5": round(at5, 4),
            "recall_at_10": round(at10, 4),
        })
    );
    Ok(())
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n % 2 == 1 { samples[n / 2] } else { (samples[n / 2 - 1] + samples[n / 2]) / 2.0 }
}

/// Nearest rank: the smallest sample at or above the fraction `p` of the samples.
fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let rank = (p * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}
