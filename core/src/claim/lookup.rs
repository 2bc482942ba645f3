//! The research agent's `lookup_evidence` tool: who answers it ([`LookupMode`]), its schema,
//! the core-side answer from the corpus ([`Lookup`]) and the search behind it.

use std::collections::HashSet;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::prompt;
use super::verifier::{chunk_bounds, chunk_relevance};
use crate::agent::{Hooks, Tool};
use crate::corpus::Corpus;
use crate::indexed::{CorpusRef, IndexedCorpus};
use crate::message::{ToolCall, ToolOutput};
use crate::retrieve::{Retriever, bm25_terms, retrieve};
use crate::schema::Schema;

/// The research agent's tool.
pub const LOOKUP_EVIDENCE: &str = "lookup_evidence";

/// Who answers the research agent's `lookup_evidence` calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum LookupMode {
    /// The check itself, from its corpus with its retriever (the default): the host runs no
    /// tool at all.
    #[default]
    Core,
    /// The host, as an ordinary tool batch (the call is replay-safe).
    Host,
}

/// The schema of `lookup_evidence`'s arguments.
#[must_use]
pub fn lookup_schema() -> Value {
    json!({
        "type": "object",
        "required": ["query"],
        "properties": {"query": {"type": "string", "minLength": 1}}
    })
}

/// The research agent's core-side policy: answers `lookup_evidence` from the corpus
/// ([`LookupMode::Core`]), or leaves it to the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lookup {
    corpus: CorpusRef,
    retriever: Retriever,
    mode: LookupMode,
    schema: Schema,
}

/// A `lookup_evidence` call's query, empty when it has none.
fn query_of(call: &ToolCall) -> &str {
    call.arguments.get("query").and_then(Value::as_str).unwrap_or_default()
}

impl Hooks for Lookup {
    fn settle(&mut self, call: &ToolCall) -> Option<ToolOutput> {
        if call.name != LOOKUP_EVIDENCE || self.mode == LookupMode::Host {
            return None;
        }
        if let Err(text) = self.schema.check_arguments(LOOKUP_EVIDENCE, &call.arguments) {
            return Some(ToolOutput::error(text));
        }
        let query = query_of(call);
        let hits = search(&self.corpus, &self.retriever, query);
        Some(lookup_evidence(self.corpus.corpus(), &hits, query))
    }

    /// A host's answer to `lookup_evidence` is data for the model like the core's own: its
    /// hits the corpus has are written from the corpus, delimited (`details.hits` keeps only
    /// those); an answer without such hits (an error, a note) is delimited whole. The host's
    /// own text never reaches the prompt outside the markers.
    fn host_result(&mut self, call: &ToolCall, mut output: ToolOutput) -> ToolOutput {
        if call.name != LOOKUP_EVIDENCE {
            return output;
        }
        let corpus = self.corpus.corpus();
        let hits: Vec<usize> = output
            .details
            .get("hits")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter().filter_map(Value::as_str).filter_map(|id| corpus.position(id)).collect()
            })
            .unwrap_or_default();
        if output.is_error || hits.is_empty() {
            output.content = prompt::host_result_text(&output.content);
            return output;
        }
        let rebuilt = lookup_evidence(corpus, &hits, query_of(call));
        output.content = rebuilt.content;
        if let Some(details) = output.details.as_object_mut() {
            details.insert("hits".to_owned(), rebuilt.details["hits"].clone());
        }
        output
    }
}

impl Lookup {
    /// Answers lookups in `corpus` with `retriever`, unless `mode` leaves them to the host.
    pub(super) fn new(corpus: CorpusRef, retriever: Retriever, mode: LookupMode) -> Self {
        let schema = shared_lookup_tool().schema().clone();
        Self { corpus, retriever, mode, schema }
    }
}

/// The research agent's `lookup_evidence` tool, built once per process (every research agent
/// of every check uses it).
pub(super) fn lookup_tool() -> Tool {
    shared_lookup_tool().clone()
}

fn shared_lookup_tool() -> &'static Tool {
    static TOOL: OnceLock<Tool> = OnceLock::new();
    TOOL.get_or_init(|| {
        Tool::new(
            LOOKUP_EVIDENCE,
            "Search the evidence corpus. Returns matching passages with their ids.",
            lookup_schema(),
        )
        .expect("the lookup schema is valid")
        // Constrained decoding: a query of at most 200 characters, so a grammar-held model
        // cannot write one without end (seen: 4,096 tokens of one query).
        .constrained(json!({
            "type": "object",
            "required": ["query"],
            "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 200}},
            "additionalProperties": false
        }))
        // It only reads the corpus: a durable host may run it again after a crash.
        .replay_safe()
    })
}

/// The passages `retriever` chooses for `query` in `corpus`, using (and building once) the
/// corpus's shared BM25 index when the retriever ranks.
#[must_use]
pub fn search(corpus: &IndexedCorpus, retriever: &Retriever, query: &str) -> Vec<usize> {
    let index = matches!(retriever, Retriever::Bm25 { .. }).then(|| corpus.bm25());
    retrieve(corpus.corpus(), index, retriever, query)
}

/// The most characters of one passage a lookup shows the model: a longer passage is shown by
/// its part about the query (see [`lookup_evidence`]), so that a corpus of long documents does
/// not fill the research agent's context in a turn or two (seen: a 6,000-character document
/// found on every turn took a llama.cpp server with a 4,096-token context past it).
pub const LOOKUP_EXCERPT_CHARS: usize = 600;

/// Answers a `lookup_evidence` call for `query` with the passages at `hits` (indices into
/// `corpus`): delimited text for the model, `details.hits` with their ids for the machine.
/// A passage longer than [`LOOKUP_EXCERPT_CHARS`] is shown by its part most about the query (a
/// chunk of [`chunk_bounds`] ranked by [`chunk_relevance`], the earliest among equals), with `…` where the
/// passage goes on; what the check takes as evidence from a hit is the whole passage.
#[must_use]
pub fn lookup_evidence(corpus: &Corpus, hits: &[usize], query: &str) -> ToolOutput {
    let terms: HashSet<String> = bm25_terms(query).into_iter().collect();
    let passages: Vec<(&str, String)> = hits
        .iter()
        .filter_map(|&index| corpus.passages().get(index))
        .map(|passage| (passage.id.as_str(), excerpt(&passage.text, &terms)))
        .collect();
    let shown: Vec<(&str, &str)> = passages.iter().map(|(id, text)| (*id, text.as_str())).collect();
    let ids: Vec<&str> = passages.iter().map(|(id, _)| *id).collect();
    ToolOutput::ok(prompt::lookup_text(&shown), json!({ "hits": ids }))
}

/// `text` whole when it is at most [`LOOKUP_EXCERPT_CHARS`] characters long, else its chunk
/// most about `terms`, marked `…` on each side the passage goes on.
fn excerpt(text: &str, terms: &HashSet<String>) -> String {
    let text = text.trim();
    if text.chars().count() <= LOOKUP_EXCERPT_CHARS {
        return text.to_owned();
    }
    let bounds = chunk_bounds(text, LOOKUP_EXCERPT_CHARS);
    let relevance = chunk_relevance(text, &bounds, terms);
    // The most relevant; among equals the earliest (max_by keeps the last of equals).
    let (start, end) = bounds
        .iter()
        .zip(&relevance)
        .rev()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or((0, text.len()), |(&bound, _)| bound);
    format!(
        "{}{}{}",
        if start > 0 { "\u{2026} " } else { "" },
        &text[start..end],
        if end < text.len() { " \u{2026}" } else { "" }
    )
}
