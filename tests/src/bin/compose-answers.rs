//! `compose-answers CLAIMS.jsonl`: composes answers to check from a labelled claim file (the
//! format of `shared/data/vitaminc/claims-dev.jsonl`) and prints them, one JSON object a line:
//! `{"id", "answer", "corpus": {id: text}, "label": "faithful"|"hallucinated", "claims": [..]}`.
//!
//! An answer is three claims joined by spaces, their passages together as its corpus (each
//! passage id prefixed with its claim's place, `c1-e3`, so none collides). A faithful answer is
//! three supported claims; a hallucinated one two supported claims and one contradicted, the
//! contradicted one in the first, second or third place in turn. The claims are taken in file
//! order, each once, with as many answers of each label as the file allows (20 and 20 from the
//! 300 dev claims: 100 supported claims make 20 faithful answers of three and 20 hallucinated
//! ones of two). The same file always gives the same answers:
//!
//! ```text
//! cargo run -q -p verity-tests --bin compose-answers -- \
//!     ../shared/data/vitaminc/claims-dev.jsonl > tests/fixtures/answers/answers-dev.jsonl
//! ```

use std::process::ExitCode;

use serde_json::{Map, Value, json};

fn main() -> ExitCode {
    verity_tests::cli::print_composed("compose-answers", compose)
}

fn compose(path: &str) -> Result<Vec<Value>, String> {
    let mut supported = Vec::new();
    let mut contradicted = Vec::new();
    for row in verity_tests::cli::read_json_lines(path)? {
        match row["label"].as_str() {
            Some("supported") => supported.push(row),
            Some("contradicted") => contradicted.push(row),
            _ => {}
        }
    }
    // Each answer of a pair: faithful takes three supported claims, hallucinated two and one
    // contradicted.
    let pairs = (supported.len() / 5).min(contradicted.len());
    let mut supported = supported.into_iter();
    let mut contradicted = contradicted.into_iter();
    let mut answers = Vec::with_capacity(2 * pairs);
    for n in 0..pairs {
        let faithful: Vec<Value> = supported.by_ref().take(3).collect();
        answers.push(answer(&format!("answer-dev-{:02}-faithful", n + 1), &faithful, "faithful")?);
        let mut mixed: Vec<Value> = supported.by_ref().take(2).collect();
        let wrong = contradicted.next().ok_or("too few contradicted claims")?;
        mixed.insert(n % 3, wrong);
        answers.push(answer(
            &format!("answer-dev-{:02}-hallucinated", n + 1),
            &mixed,
            "hallucinated",
        )?);
    }
    Ok(answers)
}

/// One answer of `claims`, their passages as its corpus.
fn answer(id: &str, claims: &[Value], label: &str) -> Result<Value, String> {
    let mut corpus = Map::new();
    let mut texts = Vec::with_capacity(claims.len());
    let mut ids = Vec::with_capacity(claims.len());
    for (place, row) in claims.iter().enumerate() {
        let claim = row["claim"].as_str().ok_or_else(|| format!("{id}: a claim with no text"))?;
        texts.push(claim.trim().to_owned());
        ids.push(row["id"].clone());
        let passages =
            row["corpus"].as_object().ok_or_else(|| format!("{id}: a claim with no corpus"))?;
        for (passage, text) in passages {
            corpus.insert(format!("c{}-{passage}", place + 1), text.clone());
        }
    }
    Ok(json!({
        "id": id,
        "answer": texts.join(" "),
        "corpus": corpus,
        "label": label,
        "claims": ids,
    }))
}
