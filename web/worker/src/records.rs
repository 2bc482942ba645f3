//! The records the worker keeps in storage, read as plain data, so that what is read and what
//! is kept is decided (and tested) without a browser: each finished result is its own record
//! ([`ResultRecord`], with a version), what an older layout or shape left is moved to the
//! current one ([`read_results`]), and a record that cannot be read is skipped and named
//! ([`Unreadable`]) instead of failing the start. Saved state is untrusted input: nothing here
//! panics on it.
//!
//! The versions of a result record:
//! - 1: a bare `CheckResult` (no `version` field). The first layout kept every result in one
//!   record (`"results"` in the key-value store, a JSON array of them); a record of this shape
//!   is read and rewritten as version 2.
//! - 2: `{"version": 2, "order": n, "result": {…}}` under the check's id; `order` keeps the
//!   order the results finished in (the store sorts records by key).
//!
//! A record of a later version (written by a newer app) is skipped and left as it is.
//!
//! The corpus is stored in parts, one record per chunk of the corpus
//! ([`verity_core::corpus::Chunk`]): its passages as a JSON array, keyed by the chunk's content
//! hash, with the order of the parts in one more record ([`CorpusOrder`]). An edit writes the
//! new chunks and the order, and deletes the chunks no longer in the corpus, in one
//! transaction: adding a file writes its chunks (and the last chunk, cut again), removing an
//! item rewrites its chunk. The first layout kept every passage in one record (`"corpus"`, a
//! JSON array of them): it is read once and moved to parts ([`corpus_parts`]).

use std::collections::HashSet;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_core::corpus::{Corpus, Passage};
use verity_messages::CheckResult;

use crate::saved::{SavedBudget, SessionMeta, Unfinished};

/// The version of the result records this worker writes.
pub const RESULT_VERSION: u64 = 2;

/// A finished result as stored (version 2): one record per check, keyed by the check's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// [`RESULT_VERSION`].
    pub version: u64,
    /// Its place among the results: they are shown in the order they finished.
    pub order: u64,
    /// The result.
    pub result: CheckResult,
}

impl ResultRecord {
    /// The record of `result`, at `order`.
    #[must_use]
    pub fn new(order: u64, result: CheckResult) -> Self {
        Self { version: RESULT_VERSION, order, result }
    }

    /// The record as the text stored.
    #[must_use]
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A stored record that could not be read: skipped (everything else is restored), left in
/// storage, and named to the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// Which record, in words: `result c3`, `the corpus`.
    pub record: String,
    /// Why.
    pub why: String,
    /// The check whose session this record is, when it is one: that check is not started over
    /// (which would write over the record and pay again), it waits.
    pub session_of: Option<String>,
}

impl Unreadable {
    fn new(record: impl Into<String>, why: impl Into<String>) -> Self {
        Self { record: record.into(), why: why.into(), session_of: None }
    }
}

/// What the page is told of the records that were skipped (one message for all of them), or
/// `None` when there were none.
#[must_use]
pub fn unreadable_notice(unreadable: &[Unreadable]) -> Option<String> {
    if unreadable.is_empty() {
        return None;
    }
    let named: Vec<String> =
        unreadable.iter().map(|skipped| format!("{} ({})", skipped.record, skipped.why)).collect();
    Some(format!(
        "Some of what this browser saved could not be read and was skipped; everything else \
         was restored. Skipped: {}.",
        named.join("; ")
    ))
}

/// One stored record as read: its key, and its value as text (`None`: the value is not text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// The key.
    pub key: String,
    /// The value, when it is text.
    pub text: Option<String>,
}

/// Reads a record holding one JSON value (the corpus, the unfinished checks, a session):
/// `Ok(None)` when there is none, the value, or why it is [`Unreadable`].
///
/// # Errors
/// The record is not text or not a `T` in JSON.
pub fn read_json<T: DeserializeOwned>(
    record: &str,
    stored: Option<Option<&str>>,
) -> Result<Option<T>, Unreadable> {
    let Some(text) = stored else { return Ok(None) };
    let text = text.ok_or_else(|| Unreadable::new(record, "it is not text"))?;
    serde_json::from_str(text).map(Some).map_err(|error| Unreadable::new(record, error.to_string()))
}

/// Reads the unfinished checks' record entry by entry: a check (or a run's limit) that cannot
/// be read is skipped and named, never the others. `Unfinished::default()` when there is no
/// record; the whole record is [`Unreadable`] only when it is not text or not a JSON object.
#[must_use]
pub fn read_unfinished(stored: Option<Option<&str>>) -> (Unfinished, Vec<Unreadable>) {
    const RECORD: &str = "the unfinished checks";
    let value = match read_json::<Value>(RECORD, stored) {
        Ok(Some(Value::Object(value))) => value,
        Ok(None) => return (Unfinished::default(), Vec::new()),
        Ok(Some(_)) => {
            return (
                Unfinished::default(),
                vec![Unreadable::new(RECORD, "it is not a JSON object")],
            );
        }
        Err(skipped) => return (Unfinished::default(), vec![skipped]),
    };
    let mut unreadable = Vec::new();
    let mut entries = |field: &str| match value.get(field) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(entries)) => entries.clone(),
        Some(_) => {
            unreadable.push(Unreadable::new(format!("{RECORD}' {field}"), "it is not a list"));
            Vec::new()
        }
    };
    let (checks, budgets) = (entries("checks"), entries("budgets"));
    let concurrency = value.get("concurrency").and_then(Value::as_u64).unwrap_or(1);
    let mut unfinished = Unfinished {
        concurrency: usize::try_from(concurrency).unwrap_or(usize::MAX).max(1),
        ..Unfinished::default()
    };
    for (n, entry) in checks.into_iter().enumerate() {
        let Some(id) = entry.pointer("/check/id").and_then(Value::as_str).map(str::to_owned) else {
            unreadable
                .push(Unreadable::new(format!("unfinished check {}", n + 1), "it names no check"));
            continue;
        };
        match serde_json::from_value::<SessionMeta>(entry) {
            Ok(meta) => unfinished.checks.push(meta),
            Err(error) => {
                unreadable
                    .push(Unreadable::new(format!("unfinished check {id}"), error.to_string()));
            }
        }
    }
    for (n, entry) in budgets.into_iter().enumerate() {
        match serde_json::from_value::<SavedBudget>(entry) {
            Ok(budget) if budget.limit.is_finite() && budget.limit > 0.0 => {
                unfinished.budgets.push(budget);
            }
            Ok(budget) => unreadable.push(Unreadable::new(
                format!("the spending limit of run {}", budget.run),
                "it is not an amount above 0",
            )),
            Err(error) => unreadable
                .push(Unreadable::new(format!("spending limit {}", n + 1), error.to_string())),
        }
    }
    (unfinished, unreadable)
}

/// The version of the corpus order record this worker writes.
pub const CORPUS_VERSION: u64 = 1;

/// The stored corpus's parts, in order: `{"version": 1, "parts": [key, ...]}`, each key the
/// content hash of a chunk, the key of its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusOrder {
    /// [`CORPUS_VERSION`].
    pub version: u64,
    /// The keys of the parts, in corpus order.
    pub parts: Vec<String>,
}

impl CorpusOrder {
    /// An order of these parts (for a corpus whose stored order cannot be read).
    #[must_use]
    pub fn from_parts(parts: Vec<String>) -> Self {
        Self { version: CORPUS_VERSION, parts }
    }

    /// The order of `corpus`'s chunks.
    #[must_use]
    pub fn of(corpus: &Corpus) -> Self {
        Self {
            version: CORPUS_VERSION,
            parts: corpus.chunks().iter().map(|chunk| chunk.digest_hex()).collect(),
        }
    }

    /// The record as the text stored.
    #[must_use]
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The record of one part of the corpus, as stored: the chunk's passages as a JSON array.
#[must_use]
pub fn corpus_part_text(passages: &[Passage]) -> String {
    serde_json::to_string(passages).unwrap_or_default()
}

/// Reads the corpus order record (`None`: there is none).
///
/// # Errors
/// It is not text, not an order, or of a later version.
pub fn read_corpus_order(stored: Option<Option<&str>>) -> Result<Option<CorpusOrder>, Unreadable> {
    const RECORD: &str = "the order of the corpus's parts";
    let Some(order) = read_json::<Value>(RECORD, stored)? else { return Ok(None) };
    match order.get("version").and_then(Value::as_u64) {
        Some(CORPUS_VERSION) => CorpusOrder::deserialize(order)
            .map(Some)
            .map_err(|error| Unreadable::new(RECORD, error.to_string())),
        Some(later) if later > CORPUS_VERSION => Err(Unreadable::new(
            RECORD,
            format!("it was written by a newer version of the app (record version {later})"),
        )),
        _ => Err(Unreadable::new(RECORD, "it has no known version")),
    }
}

/// Reads one part of the corpus, the record under `key`.
///
/// # Errors
/// It is missing, not text, or not a JSON array of passages.
pub fn read_corpus_part(
    key: &str,
    stored: Option<Option<&str>>,
) -> Result<Vec<Passage>, Unreadable> {
    let record = format!("part {key} of the corpus");
    read_json::<Vec<Passage>>(&record, stored)?
        .ok_or_else(|| Unreadable::new(record, "it is missing"))
}

/// The first layout's corpus (every passage in one record) cut into the parts stored now:
/// `(key, text)` per part, and the order record. Ids that are not ids, and repeated ids after
/// the first, are left out (as a restored corpus leaves them out).
#[must_use]
pub fn corpus_parts(passages: Vec<Passage>) -> (Vec<(String, String)>, String) {
    let corpus = restorable(passages);
    let parts = corpus
        .chunks()
        .iter()
        .map(|chunk| (chunk.digest_hex(), corpus_part_text(chunk.passages())))
        .collect();
    (parts, CorpusOrder::of(&corpus).to_text())
}

/// A corpus of `passages` as restored: what is not an id, and a repeated id after its first
/// passage, is left out (saved state is untrusted: it never fails the start).
#[must_use]
pub fn restorable(mut passages: Vec<Passage>) -> Corpus {
    let mut seen = HashSet::with_capacity(passages.len());
    passages.retain(|passage| {
        verity_core::corpus::check_id(&passage.id).is_ok() && seen.insert(passage.id.clone())
    });
    Corpus::new(passages).unwrap_or_default()
}

/// What the stored results come to: the results to show, what to write so that storage holds
/// only current records, and what was skipped.
#[derive(Debug, Default, PartialEq)]
pub struct StoredResults {
    /// The results, in the order they finished.
    pub results: Vec<CheckResult>,
    /// Records to write, `(key, text)`: results moved from the older layout or rewritten from
    /// an older shape, and the unreadable entries of the older layout kept as records of
    /// their own. Written in one transaction with the older layout's removal.
    pub rewrite: Vec<(String, String)>,
    /// The older layout's record (all results in one) was moved into `rewrite` and can be
    /// deleted. `false` when there is none, or it cannot be read (then it stays).
    pub blob_moved: bool,
    /// What was skipped.
    pub unreadable: Vec<Unreadable>,
    /// The order the next recorded result takes.
    pub next_order: u64,
}

/// A result record read, by its shape.
enum Shape {
    /// Version 2.
    Current(ResultRecord),
    /// Version 1: a bare result.
    Older(CheckResult),
}

/// Reads one result record's text.
fn read_shape(text: Option<&str>) -> Result<Shape, String> {
    let text = text.ok_or("it is not text")?;
    let value: Value = serde_json::from_str(text).map_err(|error| error.to_string())?;
    match value.get("version") {
        None => CheckResult::deserialize(value).map(Shape::Older).map_err(|e| e.to_string()),
        Some(version) => match version.as_u64() {
            Some(RESULT_VERSION) => {
                ResultRecord::deserialize(value).map(Shape::Current).map_err(|e| e.to_string())
            }
            Some(later) if later > RESULT_VERSION => Err(format!(
                "it was written by a newer version of the app (record version {later})"
            )),
            _ => Err(format!("unknown record version {version}")),
        },
    }
}

/// Reads the stored results: `records` (the results store, one per check) and `blob` (the
/// older layout's one record for all, if it is still there). A record that cannot be read is
/// skipped and named; the others are kept. Records of an older shape and the blob's results
/// are returned in `rewrite` in the current shape; a result stored both ways is taken from its
/// own record (the blob is older).
#[must_use]
pub fn read_results(blob: Option<Option<&str>>, records: &[RawRecord]) -> StoredResults {
    let mut stored = StoredResults::default();
    let mut ordered: Vec<(u64, String, CheckResult)> = Vec::new();
    let mut older: Vec<(String, CheckResult)> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    for RawRecord { key, text } in records {
        taken.insert(key.clone());
        match read_shape(text.as_deref()) {
            Ok(Shape::Current(record)) if record.result.id != *key => stored
                .unreadable
                .push(Unreadable::new(format!("result {key}"), "its key is not its check's id")),
            Ok(Shape::Current(record)) => ordered.push((record.order, key.clone(), record.result)),
            Ok(Shape::Older(result)) if result.id != *key => stored
                .unreadable
                .push(Unreadable::new(format!("result {key}"), "its key is not its check's id")),
            Ok(Shape::Older(result)) => older.push((key.clone(), result)),
            Err(why) => stored.unreadable.push(Unreadable::new(format!("result {key}"), why)),
        }
    }
    let mut moved: Vec<(String, CheckResult)> = Vec::new();
    match blob {
        None => {}
        Some(text) => match read_blob(text) {
            Err(why) => stored.unreadable.push(Unreadable::new(
                "the saved results (all in one record, as first saved)",
                why,
            )),
            Ok(entries) => {
                stored.blob_moved = true;
                for (index, entry) in entries.into_iter().enumerate() {
                    match CheckResult::deserialize(&entry) {
                        Ok(result) if taken.contains(&result.id) => {}
                        Ok(result) => {
                            taken.insert(result.id.clone());
                            moved.push((result.id.clone(), result));
                        }
                        Err(why) => {
                            // Kept as a record of its own (still unreadable, still named), so
                            // that moving the others loses nothing.
                            let key = unused_key(&entry, index, &taken);
                            taken.insert(key.clone());
                            stored.rewrite.push((key.clone(), entry.to_string()));
                            stored.unreadable.push(Unreadable::new(
                                format!("result {key}"),
                                format!("{why} (kept as it was)"),
                            ));
                        }
                    }
                }
            }
        },
    }
    // The blob's results finished first, in its order (the two layouts are not both written:
    // the blob is only read, and moved in one transaction); records of the older shape carry
    // no order and come last, by key.
    let mut all: Vec<(u64, String, CheckResult)> = ordered;
    for (order, (key, result)) in (0..).zip(moved) {
        stored.rewrite.push((key.clone(), ResultRecord::new(order, result.clone()).to_text()));
        all.push((order, key, result));
    }
    let mut next = all.iter().map(|(order, ..)| order.saturating_add(1)).max().unwrap_or(0);
    for (key, result) in older {
        stored.rewrite.push((key.clone(), ResultRecord::new(next, result.clone()).to_text()));
        all.push((next, key, result));
        next = next.saturating_add(1);
    }
    all.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    stored.next_order = next;
    stored.results = all.into_iter().map(|(_, _, result)| result).collect();
    stored
}

/// The older layout's record: a JSON array, each entry read on its own.
fn read_blob(text: Option<&str>) -> Result<Vec<Value>, String> {
    let text = text.ok_or("it is not text")?;
    serde_json::from_str(text).map_err(|error| error.to_string())
}

/// A key for an unreadable entry of the older layout: its `id` when it has one not taken,
/// otherwise one made from its place.
fn unused_key(entry: &Value, index: usize, taken: &HashSet<String>) -> String {
    if let Some(id) = entry.get("id").and_then(Value::as_str).filter(|id| !taken.contains(*id)) {
        return id.to_owned();
    }
    let mut key = format!("unreadable-{index}");
    while taken.contains(&key) {
        key.push('-');
    }
    key
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;
    use verity_messages::Outcome;

    use super::*;

    /// One unreadable check (or limit) in the unfinished record is skipped and named; the
    /// others, and the record's other fields, are kept.
    #[test]
    fn an_unreadable_unfinished_check_never_wipes_the_others() {
        let text = json!({
            "concurrency": 3,
            "checks": [
                {"check": {"id": "c1", "claim": "A."}, "provider": {"kind": "offline"}},
                {"check": {"id": "c2", "claim": 7}, "provider": {"kind": "offline"}},
                {"provider": {"kind": "offline"}},
                {"check": {"id": "c4", "claim": "D."}, "provider": {"kind": "offline"}, "run": "c1"}
            ],
            "budgets": [{"run": "c1", "limit": 2.5, "ended": 0.5}, {"run": "c9", "limit": -1, "ended": 0},
                        {"limit": 1}]
        })
        .to_string();
        let (unfinished, unreadable) = read_unfinished(Some(Some(&text)));
        assert_eq!(unfinished.concurrency, 3);
        let ids: Vec<&str> = unfinished.checks.iter().map(|meta| meta.check.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c4"]);
        assert_eq!(unfinished.checks[1].run.as_deref(), Some("c1"));
        assert_eq!(unfinished.budgets.len(), 1);
        assert_eq!(unfinished.budgets[0].limit, 2.5);
        let named: Vec<&str> = unreadable.iter().map(|skipped| skipped.record.as_str()).collect();
        assert_eq!(
            named,
            [
                "unfinished check c2",
                "unfinished check 3",
                "the spending limit of run c9",
                "spending limit 3"
            ]
        );
        // No record, and a record that is no object at all.
        assert_eq!(read_unfinished(None), (Unfinished::default(), Vec::new()));
        let (none, why) = read_unfinished(Some(Some("[1, 2]")));
        assert_eq!((none, why.len()), (Unfinished::default(), 1));
        let (none, why) = read_unfinished(Some(Some("{\"checks\": ")));
        assert_eq!((none.checks.len(), why[0].record.as_str()), (0, "the unfinished checks"));
    }

    fn result(id: &str) -> CheckResult {
        CheckResult {
            id: id.into(),
            claim: format!("claim {id}"),
            outcome: Outcome::Report { report: json!({"assessment": {"verdict": "supported"}}) },
            cited: Vec::new(),
            provenance: None,
        }
    }

    fn raw(key: &str, text: &str) -> RawRecord {
        RawRecord { key: key.into(), text: Some(text.into()) }
    }

    fn current(order: u64, id: &str) -> RawRecord {
        raw(id, &ResultRecord::new(order, result(id)).to_text())
    }

    fn ids(stored: &StoredResults) -> Vec<&str> {
        stored.results.iter().map(|result| result.id.as_str()).collect()
    }

    fn skipped(stored: &StoredResults) -> Vec<&str> {
        stored.unreadable.iter().map(|skipped| skipped.record.as_str()).collect()
    }

    #[test]
    fn a_corrupt_record_among_good_ones_is_skipped_and_the_good_ones_kept() {
        let records = [
            current(1, "c1"),
            raw("c2", "{\"version\": 2, \"order\": 3, \"resu"),
            current(0, "c3"),
            RawRecord { key: "c4".into(), text: None },
            raw("c5", &json!({"version": 9, "order": 7, "result": {}}).to_string()),
            raw("c6", &json!({"version": 2, "order": 2, "result": {"id": "c6"}}).to_string()),
            raw("c7", &ResultRecord::new(4, result("other")).to_text()),
            raw("c8", &json!({"version": "two"}).to_string()),
        ];
        let stored = read_results(None, &records);
        assert_eq!(ids(&stored), ["c3", "c1"], "in their order, not their keys'");
        assert_eq!(
            skipped(&stored),
            ["result c2", "result c4", "result c5", "result c6", "result c7", "result c8"]
        );
        assert!(stored.unreadable[2].why.contains("newer version of the app (record version 9)"));
        assert_eq!(stored.unreadable[1].why, "it is not text");
        assert!(
            stored.rewrite.is_empty(),
            "nothing is rewritten: unreadable records stay as they are"
        );
        assert!(!stored.blob_moved);
        assert_eq!(stored.next_order, 2);
    }

    #[test]
    fn a_record_of_the_older_shape_is_moved_to_the_current_one() {
        let older = serde_json::to_string(&result("c2")).unwrap();
        let stored = read_results(None, &[current(4, "c1"), raw("c2", &older)]);
        assert_eq!(ids(&stored), ["c1", "c2"]);
        assert!(stored.unreadable.is_empty());
        assert_eq!(
            stored.rewrite,
            [("c2".to_owned(), ResultRecord::new(5, result("c2")).to_text())]
        );
        assert_eq!(stored.next_order, 6);
        // Read again, the rewritten record is current and nothing more is to do.
        let again = read_results(None, &[current(4, "c1"), raw("c2", &stored.rewrite[0].1)]);
        assert_eq!((ids(&again), again.rewrite.len()), (vec!["c1", "c2"], 0));
    }

    #[test]
    fn the_first_layout_is_moved_to_a_record_each_keeping_an_unreadable_entry() {
        let blob =
            json!([result("c1"), {"id": "c2", "claim": 42}, result("c3"), {"claim": "no id"}])
                .to_string();
        let stored = read_results(Some(Some(&blob)), &[]);
        assert_eq!(ids(&stored), ["c1", "c3"]);
        assert!(stored.blob_moved);
        assert_eq!(skipped(&stored), ["result c2", "result unreadable-3"]);
        assert!(stored.unreadable[0].why.ends_with("(kept as it was)"));
        let rewrite: HashMap<&str, &str> =
            stored.rewrite.iter().map(|(key, text)| (key.as_str(), text.as_str())).collect();
        assert_eq!(rewrite.len(), 4);
        assert_eq!(rewrite["c1"], ResultRecord::new(0, result("c1")).to_text());
        assert_eq!(rewrite["c3"], ResultRecord::new(1, result("c3")).to_text());
        assert_eq!(rewrite["c2"], json!({"id": "c2", "claim": 42}).to_string());
        assert_eq!(rewrite["unreadable-3"], json!({"claim": "no id"}).to_string());
        assert_eq!(stored.next_order, 2);
        // Read again from the records it wrote: the same results, the same two skipped.
        let records: Vec<RawRecord> =
            stored.rewrite.iter().map(|(key, text)| raw(key, text)).collect();
        let again = read_results(None, &records);
        assert_eq!(ids(&again), ["c1", "c3"]);
        assert_eq!(skipped(&again), ["result c2", "result unreadable-3"]);
        assert!(again.rewrite.is_empty());
    }

    #[test]
    fn an_unreadable_first_layout_stays_and_a_result_with_its_own_record_is_taken_from_it() {
        let stored = read_results(Some(Some("[{\"id\": ")), &[current(0, "c1")]);
        assert_eq!(ids(&stored), ["c1"]);
        assert!(!stored.blob_moved, "kept: it may be read by a fixed version");
        assert_eq!(skipped(&stored), ["the saved results (all in one record, as first saved)"]);
        assert!(read_results(Some(None), &[]).unreadable[0].why.contains("not text"));

        let mut newer = result("c1");
        newer.claim = "the newer one".into();
        let record = raw("c1", &ResultRecord::new(0, newer).to_text());
        let blob = json!([result("c1"), result("c2")]).to_string();
        let stored = read_results(Some(Some(&blob)), &[record]);
        assert_eq!(ids(&stored), ["c1", "c2"]);
        assert_eq!(stored.results[0].claim, "the newer one");
        assert_eq!(stored.rewrite.len(), 1, "only c2 is moved");
    }

    #[test]
    fn a_single_record_is_read_or_named() {
        let read = |text: Option<Option<&str>>| read_json::<Vec<u32>>("the corpus", text);
        assert_eq!(read(None), Ok(None));
        assert_eq!(read(Some(Some("[1, 2]"))), Ok(Some(vec![1, 2])));
        let Err(unreadable) = read(Some(Some("{\"not\": \"a list\"}"))) else { panic!() };
        assert_eq!(unreadable.record, "the corpus");
        assert_eq!(read(Some(None)).unwrap_err().why, "it is not text");
    }

    fn passages(n: usize) -> Vec<Passage> {
        (0..n).map(|i| Passage { id: format!("p{i}"), text: format!("text {i}") }).collect()
    }

    #[test]
    fn the_first_layouts_corpus_is_cut_into_parts_that_read_back_the_same() {
        let mut old = passages(40_000);
        // What the first layout could hold and a corpus cannot: left out.
        old.push(Passage { id: "p7".into(), text: "again".into() });
        old.push(Passage { id: "bad]".into(), text: "x".into() });
        let (parts, order) = corpus_parts(old);
        assert!(parts.len() >= 2, "40,000 passages are more than one part");
        let order = read_corpus_order(Some(Some(&order))).unwrap().unwrap();
        let keys: Vec<&str> = parts.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(order.parts, keys);
        let mut read = Vec::new();
        for (key, text) in &parts {
            read.extend(read_corpus_part(key, Some(Some(text))).unwrap());
        }
        assert_eq!(read, passages(40_000));
        // The parts are the corpus's chunks: the id the restored corpus has.
        assert_eq!(restorable(read).id(), Corpus::new(passages(40_000)).unwrap().id());
    }

    #[test]
    fn a_corpus_record_that_cannot_be_read_is_named() {
        assert_eq!(read_corpus_order(None), Ok(None));
        let later = json!({"version": 2, "parts": []}).to_string();
        assert!(read_corpus_order(Some(Some(&later))).unwrap_err().why.contains("newer version"));
        assert!(read_corpus_order(Some(Some("[\"a\"]"))).is_err());
        assert!(read_corpus_order(Some(Some("{\"version\": 1, \"parts\": 3}"))).is_err());
        assert_eq!(read_corpus_part("k", None).unwrap_err().why, "it is missing");
        let bad = read_corpus_part("k", Some(Some("{\"id\": 1}"))).unwrap_err();
        assert_eq!(bad.record, "part k of the corpus");
        assert_eq!(read_corpus_part("k", Some(None)).unwrap_err().why, "it is not text");
        assert_eq!(restorable(vec![Passage { id: "]".into(), text: "x".into() }]).len(), 0);
    }

    #[test]
    fn the_notice_names_every_skipped_record() {
        assert_eq!(unreadable_notice(&[]), None);
        let notice = unreadable_notice(&[
            Unreadable::new("result c2", "EOF while parsing"),
            Unreadable::new("the corpus", "it is not text"),
        ])
        .unwrap();
        assert!(
            notice
                .ends_with("Skipped: result c2 (EOF while parsing); the corpus (it is not text).")
        );
    }
}
