//! `compose-documents CLAIMS.jsonl`: makes long documents out of a labelled claim file (the
//! format of `shared/data/vitaminc/claims-dev.jsonl`) and prints each claim again with one
//! document as its corpus, one JSON object a line:
//! `{"id", "claim", "label", "corpus": {"document": text}, "place": "start"|"middle"|"end"}`.
//! A file of composed answers (`compose-answers`' output) gives each answer again the same
//! way (`{"id", "answer", "corpus": {"document": text}, "label", "claims", "place"}`): an
//! answer checked against one article-like text, as a summary is against its article.
//!
//! VitaminC's passages are single sentences, so a check over them never meets a passage longer
//! than a chunk. Documents (an article, a report) are long: a check asks about a few chunks of
//! them, and which chunks it asks about decides whether it sees the sentence that matters.
//! Each document here is the claim's own passages, together and in their order, set among
//! passages of other claims (the claims that follow it in the file, leaving out any passage
//! whose title, the text before its first `": "`, is one of the claim's), joined by spaces
//! into one text of about 6,000 characters or more with no blank line: one passage when read as a
//! corpus. The claim's passages sit at the start, the middle or the end of it, in turn. The same
//! file always gives the same documents:
//!
//! ```text
//! cargo run -q -p verity-tests --bin compose-documents -- \
//!     ../shared/data/vitaminc/claims-dev.jsonl > tests/fixtures/documents/claims-dev-documents.jsonl
//! cargo run -q -p verity-tests --bin compose-documents -- \
//!     tests/fixtures/answers/answers-dev.jsonl > tests/fixtures/documents/answers-dev-documents.jsonl
//! ```

use std::process::ExitCode;

use serde_json::{Value, json};

/// The least length of a document, in characters: three chunks of the route's default 2,000.
const DOCUMENT_CHARS: usize = 6_000;

fn main() -> ExitCode {
    verity_tests::cli::print_composed("compose-documents", compose)
}

/// A passage's title: the text before its first `": "` (VitaminC's passages start with their
/// article's title), or none.
fn title(passage: &str) -> Option<&str> {
    passage.split_once(": ").map(|(title, _)| title.trim())
}

fn compose(path: &str) -> Result<Vec<Value>, String> {
    let mut rows: Vec<(Value, Vec<String>)> = Vec::new();
    for (n, row) in verity_tests::cli::read_json_lines(path)?.into_iter().enumerate() {
        let passages: Vec<String> = row["corpus"]
            .as_object()
            .ok_or_else(|| format!("{path}, claim {}: a claim with no corpus", n + 1))?
            .values()
            .filter_map(|text| text.as_str().map(|text| text.trim().to_owned()))
            .collect();
        rows.push((row, passages));
    }
    if rows.len() < 2 {
        return Err(format!("{path}: at least two claims are needed"));
    }
    let mut documents = Vec::with_capacity(rows.len());
    for (n, (row, own)) in rows.iter().enumerate() {
        let titles: Vec<&str> = own.iter().filter_map(|passage| title(passage)).collect();
        let own_chars: usize = own.iter().map(|passage| passage.chars().count() + 1).sum();
        let mut filler: Vec<&str> = Vec::new();
        let mut chars = own_chars;
        for step in 1..rows.len() {
            if chars >= DOCUMENT_CHARS {
                break;
            }
            let (_, others) = &rows[(n + step) % rows.len()];
            for passage in others {
                if title(passage).is_some_and(|t| titles.contains(&t)) || own.contains(passage) {
                    continue;
                }
                chars += passage.chars().count() + 1;
                filler.push(passage);
            }
        }
        let (place, at) = match n % 3 {
            0 => ("start", 0),
            1 => ("middle", filler.len() / 2),
            _ => ("end", filler.len()),
        };
        let mut parts: Vec<&str> = filler[..at].to_vec();
        parts.extend(own.iter().map(String::as_str));
        parts.extend(&filler[at..]);
        let document = json!({"document": parts.join(" ")});
        documents.push(match row.get("answer") {
            Some(answer) => json!({
                "id": row["id"],
                "answer": answer,
                "corpus": document,
                "label": row["label"],
                "claims": row["claims"],
                "place": place,
            }),
            None => json!({
                "id": row["id"],
                "claim": row["claim"],
                "label": row["label"],
                "corpus": document,
                "place": place,
            }),
        });
    }
    Ok(documents)
}
