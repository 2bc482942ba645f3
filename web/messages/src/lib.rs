//! The messages between a page (the Leptos UI, the embedding module `verity.js`) and the engine
//! worker. Plain serde data, camelCase JSON with a `"type"` tag, so the page's wasm does not link
//! the engine and a JavaScript page can speak it too (it is what `postMessage` carries).
//!
//! The engine's own values (a claim report, a typed failure, a job event) travel as the core's
//! JSON; the page reads them with the small views below ([`ReportView`], [`FailureView`],
//! [`EventView`]), which the worker's tests check against the core's real JSON.
#![deny(missing_docs)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_derive::TaggedDeserialize;

pub mod csv;
pub mod markdown;
mod provenance;
pub mod provider;
mod read;
pub mod text;
pub use provenance::{Provenance, public_url};
pub use read::FromJson;

/// A file the page read, by name and text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedText {
    /// The file's name (its extension picks the format).
    pub name: String,
    /// Its contents.
    pub text: String,
}

/// A corpus item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Unique in the corpus.
    pub id: String,
    /// The text.
    pub text: String,
}

/// Where the engine sends model calls.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ProviderChoice {
    /// The offline baseline: a lexical heuristic in the engine, not a language model.
    Offline,
    /// A network provider: the core's provider JSON (`{"api": "openai", "baseUrl": ..,
    /// "model": .., "apiKey": ..}` or `{"api": "anthropic", ..}`).
    Network {
        /// The provider configuration.
        config: Value,
    },
    /// The app's Provider section as the page keeps it ([`provider::ProviderSettings`]'s
    /// serde JSON): the worker makes it `Offline` or `Network` when the message arrives
    /// ([`ProviderChoice::resolved`]), so no other part of the worker ever sees this form.
    Settings {
        /// The settings.
        settings: Value,
    },
}

impl ProviderChoice {
    /// `Offline` or `Network` as they are; `Settings` made one of them, or why they cannot be
    /// (a missing model, base URL or key, a limit that is not a number).
    ///
    /// # Errors
    /// What the settings lack, in words for the person.
    pub fn resolved(self) -> Result<Self, String> {
        match self {
            Self::Settings { settings } => provider::ProviderSettings::read(&settings).choice(),
            other => Ok(other),
        }
    }

    /// The run's spending limit the app's settings carry (`None` for a provider given as
    /// JSON: its run's limit is [`ToWorker::Check`]'s `budget`).
    ///
    /// # Errors
    /// A limit that is not an amount above 0, in words for the person.
    pub fn budget(&self) -> Result<Option<f64>, String> {
        match self {
            Self::Settings { settings } => provider::ProviderSettings::read(settings).budget(),
            _ => Ok(None),
        }
    }
}

/// One claim (or one whole answer) to check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRequest {
    /// The page's id for the check (unique while it lives).
    pub id: String,
    /// The text to check: the claim, or the whole answer when `kind` is `answer`.
    pub claim: String,
    /// `claim` (the default, left out of the JSON) or `answer`: the text is an answer, checked
    /// sentence by sentence (the core's answer job), its report an [`AnswerView`]'s JSON.
    #[serde(default, skip_serializing_if = "CheckKind::is_claim")]
    pub kind: CheckKind,
    /// For an answer: which passage each of its citation marks names (`{"1": "e1"}`); a mark
    /// not in it names the passage whose id it is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub marks: BTreeMap<String, String>,
    /// For an answer: split each sentence into atomic claims before checking them (one more
    /// request a sentence).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decompose: bool,
}

impl CheckRequest {
    /// A check of one claim.
    #[must_use]
    pub fn claim(id: impl Into<String>, claim: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            claim: claim.into(),
            kind: CheckKind::Claim,
            marks: BTreeMap::new(),
            decompose: false,
        }
    }

    /// A check of a whole answer, sentence by sentence.
    #[must_use]
    pub fn answer(id: impl Into<String>, answer: impl Into<String>) -> Self {
        Self { kind: CheckKind::Answer, ..Self::claim(id, answer) }
    }
}

/// What a check checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CheckKind {
    /// One claim.
    #[default]
    Claim,
    /// A whole answer, sentence by sentence.
    Answer,
}

impl CheckKind {
    /// Whether it is [`CheckKind::Claim`].
    #[must_use]
    pub fn is_claim(&self) -> bool {
        *self == Self::Claim
    }
}

/// What the page asks of the worker.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToWorker {
    /// Read files into the corpus (all or nothing per file; a bad file changes nothing).
    AddFiles {
        /// The files.
        files: Vec<NamedText>,
    },
    /// Add items given as data.
    AddItems {
        /// The items.
        items: Vec<Item>,
    },
    /// Load the small demo corpus.
    LoadDemo,
    /// Remove items by id.
    RemoveItems {
        /// Their ids.
        ids: Vec<String>,
    },
    /// Empty the corpus.
    ClearCorpus,
    /// A page of the corpus's items whose id or text contains `query` (any case).
    ListItems {
        /// The search text ("" for all).
        query: String,
        /// The first match to return.
        offset: usize,
        /// At most this many.
        limit: usize,
    },
    /// Check claims against the corpus, at most `concurrency` at a time.
    Check {
        /// The claims.
        checks: Vec<CheckRequest>,
        /// The model.
        provider: ProviderChoice,
        /// How many checks run at once (at least 1; the engine runs at most its
        /// `MAX_CONCURRENCY`, 8, whatever is asked).
        concurrency: usize,
        /// A named corpus ([`ToWorker::AddToCorpus`]) to check against instead of the main one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        corpus: Option<String>,
        /// The run's spending limit in US dollars (the app's settings may carry it instead):
        /// before each request of these checks the engine adds up what they have spent, and
        /// once it reaches the limit, each check still to request ends `budget`, saying what
        /// was spent. What the model costs comes from the provider's `price`, else from the
        /// cost the provider reports (OpenRouter's base URL only); a limit with neither cannot
        /// be enforced, and the checks end `config` before anything is sent, saying so.
        /// Checks running at once when the limit is reached finish the request they have in
        /// flight: a run overshoots by at most one response per running check.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<f64>,
    },
    /// The page's provider, with its key, sent once after [`FromWorker::Ready`] when checks
    /// were resumed. A network check interrupted by a reload is stored without its key; it
    /// resumes with this provider when it is the same one (same configuration once the key is
    /// set aside) and carries a key, and otherwise ends `cancelled`, saying why. `None`: the
    /// page has no key (it was not remembered on this device).
    Credentials {
        /// The provider as the page would run it now.
        #[serde(default)]
        provider: Option<ProviderChoice>,
    },
    /// Adds items and files to a named corpus, created when missing, all or nothing: answered
    /// by one [`FromWorker::NamedCorpus`] or one [`FromWorker::NamedCorpusRejected`]. Named
    /// corpora live in memory beside the main one (the embedding's corpora, one per
    /// `<verity-check>` element or `Corpus` object) and are indexed at once.
    AddToCorpus {
        /// The corpus's name (the page's choice).
        name: String,
        /// Items given as data.
        #[serde(default)]
        items: Vec<Item>,
        /// Files to read (their extension picks the format).
        #[serde(default)]
        files: Vec<NamedText>,
    },
    /// Forgets a named corpus (checks already running over it keep their copy).
    DropCorpus {
        /// Its name.
        name: String,
    },
    /// Runs a typed step: the core's step `JobConfig` JSON (`{"kind": "step", "prompt": ..,
    /// "schema": .., "tools": [..]}`). Calls of the configuration's tools are the page's to run:
    /// each is posted as [`FromWorker::ToolCall`] and answered by [`ToWorker::ToolResult`].
    /// Ends with [`FromWorker::StepFinished`]; [`ToWorker::Cancel`] with its id stops it.
    RunStep {
        /// The page's id for the step (unique while it lives).
        id: String,
        /// The step's configuration.
        config: Value,
        /// The model.
        provider: ProviderChoice,
    },
    /// The result of a page tool's call ([`FromWorker::ToolCall`]).
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The step's id.
        id: String,
        /// The call's id.
        call: String,
        /// The text the model reads.
        content: String,
        /// Whether the call failed (the model is told so).
        #[serde(default)]
        is_error: bool,
    },
    /// Cancel a check or a step (queued or running).
    Cancel {
        /// The check's id.
        id: String,
    },
    /// Forget finished results.
    ClearResults,
    /// `results` as Markdown, answered by [`FromWorker::Markdown`] (added after the first
    /// version of this contract, so that the page's wasm does not carry the writer).
    ExportMarkdown {
        /// The results, in the order the page shows them.
        results: Vec<CheckResult>,
    },
    /// `results` as CSV, answered by [`FromWorker::Csv`] (added after the first version of
    /// this contract).
    ExportCsv {
        /// The results, in the order the page shows them.
        results: Vec<CheckResult>,
    },
    /// Reads claims from a file (`.txt`: a claim per line; `.csv`: a `claim` column; `.jsonl`:
    /// a `claim` field), answered by [`FromWorker::Claims`] (added after the first version of
    /// this contract).
    ReadClaims {
        /// The file.
        file: NamedText,
    },
    /// Forget one finished result (its card is checked again under a new id, so the old
    /// verdict does not come back after a reload; added after the first version of this
    /// contract).
    ForgetResult {
        /// The finished check's id.
        id: String,
    },
}

/// What the worker tells the page.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum FromWorker {
    /// The engine is loaded; what it restored from the browser's storage.
    Ready {
        /// The corpus as stored.
        corpus: CorpusSummary,
        /// Finished checks kept from earlier visits.
        results: Vec<CheckResult>,
        /// Checks that were running when the page went away and are resumed now.
        resumed: Vec<CheckRequest>,
        /// Checks that were queued, not started, when the page went away and are queued again
        /// now, in order (added after the first version of this contract).
        #[serde(default)]
        queued: Vec<CheckRequest>,
    },
    /// The corpus changed (or is being indexed).
    Corpus {
        /// Its state.
        corpus: CorpusSummary,
    },
    /// A version of the main corpus was written to storage, or could not be (added after the
    /// first version of this contract; a page that ignores it loses nothing). It applies when
    /// `id` is the id of the corpus the page shows.
    CorpusStored {
        /// The version's content id (`None`: the empty corpus).
        id: Option<String>,
        /// Where it stands now.
        storage: CorpusStorage,
    },
    /// A file was refused; nothing of it was loaded and the corpus is unchanged.
    FileRejected {
        /// The file.
        file: String,
        /// The line at fault, if one is.
        line: Option<usize>,
        /// Why.
        message: String,
    },
    /// A page of items ([`ToWorker::ListItems`]).
    Items {
        /// The query answered.
        query: String,
        /// The offset answered.
        offset: usize,
        /// How many items match.
        total: usize,
        /// The items of this page.
        items: Vec<Item>,
    },
    /// A check was queued.
    Queued {
        /// The check.
        check: CheckRequest,
    },
    /// Something happened in a running check: the core's event JSON (see [`EventView`]).
    Progress {
        /// The check's id.
        id: String,
        /// The event.
        event: Value,
    },
    /// A check ended.
    Finished {
        /// The result.
        result: CheckResult,
    },
    /// Claims to try on the demo corpus, sent after [`ToWorker::LoadDemo`] (added after the
    /// first version of this contract; a page that ignores it loses nothing).
    Demo {
        /// The suggested claims.
        claims: Vec<String>,
    },
    /// A named corpus after [`ToWorker::AddToCorpus`]: its state (indexed).
    NamedCorpus {
        /// Its name.
        name: String,
        /// Its state.
        corpus: CorpusSummary,
    },
    /// [`ToWorker::AddToCorpus`] was refused; the named corpus is unchanged.
    NamedCorpusRejected {
        /// The corpus's name.
        name: String,
        /// The file at fault (`"items"` for items given as data).
        file: String,
        /// The line at fault, if one is.
        line: Option<usize>,
        /// Why.
        message: String,
    },
    /// A running step asks the page to run one of its tools; the arguments were validated
    /// against the tool's parameters schema. Answer with [`ToWorker::ToolResult`].
    ToolCall {
        /// The step's id.
        id: String,
        /// The call's id (echo it in the result).
        call: String,
        /// The tool's name.
        tool: String,
        /// The arguments.
        arguments: Value,
    },
    /// A step ended.
    StepFinished {
        /// The step's id.
        id: String,
        /// Its value or typed failure.
        outcome: StepOutcome,
    },
    /// The finished results as Markdown ([`ToWorker::ExportMarkdown`]; written by
    /// [`markdown::to_markdown`]).
    Markdown {
        /// The document.
        text: String,
    },
    /// The finished results as CSV ([`ToWorker::ExportCsv`]; written by [`csv::to_csv`]).
    Csv {
        /// The document.
        text: String,
    },
    /// The finished results were cleared ([`ToWorker::ClearResults`], from any page): every
    /// page drops its finished cards, so no tab keeps showing results that are gone.
    ResultsCleared,
    /// The claims read from a file ([`ToWorker::ReadClaims`]), at most a bounded number.
    Claims {
        /// The file's name.
        file: String,
        /// The claims, in the file's order.
        claims: Vec<String>,
        /// The lines that held no claim that could be read (the first few).
        bad: Vec<BadLine>,
        /// All of it in words for the person: how many claims were read, the bad lines by
        /// number, what was not read.
        message: String,
    },
    /// Something went wrong outside any check (storage unavailable, a bad message).
    Error {
        /// What.
        message: String,
    },
    /// The browser's storage for the page is full (IndexedDB refused a write with
    /// `QuotaExceededError`): what was to be written is kept in memory and shown, and lost
    /// when the engine stops (added after the first version of this contract; a page that
    /// ignores it loses nothing it had).
    NotSaved {
        /// The check whose result or progress was not saved, if it was one.
        id: Option<String>,
        /// What was not saved and what to free ([`text::not_saved`]).
        message: String,
    },
    /// What a [`FromWorker::NotSaved`] said of a check is no longer so: storage had room again,
    /// and its progress is saved (added after the first version of this contract; a page that
    /// ignores it keeps saying "not saved", which was true when said).
    Saved {
        /// The check.
        id: String,
    },
    /// The list of checks still to run is written with these in it (or storage refused it and
    /// a [`FromWorker::NotSaved`] said so): until then, a tab closed with the app's last would
    /// lose those not started, so a page warns on leaving (added after the first version of
    /// this contract; a page that ignores it warns of nothing, as before).
    Stored {
        /// The checks, each named once in the engine's life.
        ids: Vec<String>,
    },
}

/// A line of a file that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadLine {
    /// Its number, from 1.
    pub line: usize,
    /// Why.
    pub message: String,
}

/// The corpus as the page shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CorpusSummary {
    /// Its content id (`sha256:...`), `None` when empty.
    pub id: Option<String>,
    /// Items.
    pub items: usize,
    /// Total text size in bytes.
    pub bytes: usize,
    /// Whether the search index is built.
    pub indexed: bool,
    /// How long indexing took, once built, in milliseconds.
    pub index_ms: Option<f64>,
    /// Whether the browser's storage holds this version of the corpus (the main corpus only;
    /// `None` for a named corpus, which lives in memory). Added after the first version of
    /// this contract: [`FromWorker::CorpusStored`] tells when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<CorpusStorage>,
}

/// Where a version of the main corpus stands with the browser's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CorpusStorage {
    /// Storage holds it: closing every tab loses nothing of it.
    Saved,
    /// It is being written: closing the last tab of the app now loses the change.
    Saving,
    /// It could not be written (no storage, storage full, or a newer version of the app holds
    /// it): it lives in memory until the last tab closes. The reason was posted as a notice.
    NotSaved,
}

/// A finished check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// The check's id.
    pub id: String,
    /// The claim.
    pub claim: String,
    /// The report (the core's `Report` JSON) or the typed failure (the core's `JobFailed`).
    pub outcome: Outcome,
    /// The corpus items the check cited, by text, with their ids, for linking.
    #[serde(default)]
    pub cited: Vec<Item>,
    /// Where the result came from: a [`Provenance`]'s JSON, written by the worker when the
    /// check ended (`None` in results saved before it did), read with
    /// [`CheckResult::provenance`]. JSON rather than the type, like the report: the page only
    /// carries it back to the exports, and reading and writing the type cost its wasm ~1 KB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum Outcome {
    /// A report.
    Report {
        /// The core's `Report` JSON.
        report: Value,
    },
    /// A typed failure.
    Failed {
        /// The core's `JobFailed` JSON (`kind`, `message`, `spent`).
        failure: Value,
    },
}

impl CheckResult {
    /// Where the result came from, if it says (and the JSON is a [`Provenance`]).
    #[must_use]
    pub fn provenance(&self) -> Option<Provenance> {
        self.provenance.clone().and_then(|value| serde_json::from_value(value).ok())
    }

    /// This result with a failure's advice ([`text::advice`] for its kind and message) written into
    /// the failure as `advice` ([`FailureView::advice`]): the worker adds it, so the words
    /// live in the worker's wasm and not in the page's.
    #[must_use]
    pub fn advised(mut self) -> Self {
        if let Outcome::Failed { failure: Value::Object(fields) } = &mut self.outcome {
            let kind = fields.get("kind").and_then(Value::as_str).unwrap_or_default();
            let message = fields.get("message").and_then(Value::as_str).unwrap_or_default();
            let advice = Value::String(text::advice(kind, message).to_owned());
            fields.insert("advice".to_owned(), advice);
        }
        self
    }
}

/// An answer report's verdict key (see [`Outcome::verdict_key`]).
pub fn answer_verdict(report: &Value) -> &'static str {
    let count =
        |status: &str| report.get("counts").and_then(|c| c.get(status)).and_then(Value::as_u64);
    if report.get("faithful").and_then(Value::as_bool) == Some(true) {
        "supported"
    } else if count("contradicted").unwrap_or(0) > 0 {
        "contradicted"
    } else {
        "insufficient"
    }
}

impl Outcome {
    /// The verdict filter it falls under ([`text::VERDICT_FILTERS`]): a report's verdict, the
    /// verdict a failure amounts to, or `failed`. An answer's: `supported` when every checked
    /// sentence is, `contradicted` when one is, else `insufficient` (nothing checked, or a
    /// sentence without enough evidence or whose check failed).
    pub fn verdict_key(&self) -> &'static str {
        if let Self::Report { report } = self
            && report.get("sentences").is_some()
        {
            return answer_verdict(report);
        }
        let verdict = match self {
            Self::Report { report } => report
                .get("assessment")
                .and_then(|assessment| assessment.get("verdict"))
                .and_then(Value::as_str),
            Self::Failed { failure } => {
                failure.get("kind").and_then(Value::as_str).and_then(text::failure_verdict)
            }
        };
        text::VERDICT_FILTERS[1..4]
            .iter()
            .map(|(key, _)| *key)
            .find(|key| Some(*key) == verdict)
            .unwrap_or("failed")
    }

    /// Whether the check reached a verdict: a report, or a failure that amounts to one
    /// ([`text::failure_verdict`]).
    pub fn has_verdict(&self) -> bool {
        match self {
            Self::Report { .. } => true,
            Self::Failed { failure } => failure
                .get("kind")
                .and_then(Value::as_str)
                .and_then(text::failure_verdict)
                .is_some(),
        }
    }
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum StepOutcome {
    /// The submitted value, valid against the step's schema.
    Value {
        /// The value.
        value: Value,
    },
    /// A typed failure.
    Failed {
        /// The core's `JobFailed` JSON (`kind`, `message`, `spent`).
        failure: Value,
    },
}

/// What was spent, as the core reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SpentView {
    /// Turns.
    pub turns: u32,
    /// Requests.
    pub requests: u32,
    /// Retries.
    pub retries: u32,
    /// Tokens and cost.
    pub usage: UsageView,
}

/// Tokens and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UsageView {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cached input tokens read.
    pub cache_read: u64,
    /// US dollars.
    pub cost: f64,
}

/// The parts of a claim report the page shows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportView {
    /// The claim.
    pub claim: String,
    /// The final assessment.
    pub assessment: AssessmentView,
    /// `"single call"` or `"agent escalation"`.
    pub route: String,
    /// The summary sentence.
    pub summary: String,
    /// Requests made.
    pub requests: u32,
    /// Tokens and cost.
    pub usage: UsageView,
}

/// Where a piece of text sits in the text it was cut from: UTF-8 bytes and UTF-16 code units
/// (what JavaScript's strings and the page's text index).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanView {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// First UTF-16 code unit.
    pub start_utf16: usize,
    /// One past the last UTF-16 code unit.
    pub end_utf16: usize,
}

/// A citation located in its passage: the passage's id, the words that hold the claim and
/// where they sit in the passage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CitationView {
    /// The passage's id (absent for evidence the corpus lacks).
    #[serde(default)]
    pub passage: Option<String>,
    /// The quote, verbatim from the passage.
    pub quote: String,
    /// Where the quote is in the passage's text.
    pub span: SpanView,
    /// The passage's text.
    pub text: String,
}

/// One of an answer's own citation marks, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkView {
    /// What it says (`e1` for `[e1]`).
    pub label: String,
    /// Where its bracketed group is in the answer.
    pub span: SpanView,
    /// The passage it names, when the corpus has one.
    #[serde(default)]
    pub passage: Option<String>,
    /// `supports`, `contradicts`, `does-not-support`, `unknown-passage` or `unchecked`.
    pub holds: String,
}

/// One sentence of a checked answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentenceView {
    /// Its place in the answer, from 0.
    pub index: usize,
    /// Its text.
    pub text: String,
    /// Where it is in the answer.
    pub span: SpanView,
    /// `supported`, `contradicted`, `insufficient`, `failed`, `not-checkable` (or `pending`).
    pub status: String,
    /// How sure, from 0 to 1, when there is a verdict.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// The passages that decided it, each with its quote.
    #[serde(default)]
    pub citations: Vec<CitationView>,
    /// The answer's own marks in it.
    #[serde(default)]
    pub marks: Vec<MarkView>,
    /// Why its check failed.
    #[serde(default)]
    pub failure: Option<SentenceFailureView>,
    /// Its atomic claims, each checked, when the check split sentences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimView>,
    /// How it was split, when the check split sentences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decomposed: Option<DecomposedView>,
}

/// One atomic claim of a split sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView {
    /// The claim.
    pub text: String,
    /// Where it comes from in the answer (its sentence's span, or its own when verbatim).
    pub span: SpanView,
    /// As a sentence's.
    pub status: String,
    /// How sure, when there is a verdict.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// The passages that decided it.
    #[serde(default)]
    pub citations: Vec<CitationView>,
    /// Why its check failed.
    #[serde(default)]
    pub failure: Option<SentenceFailureView>,
}

/// How a sentence was split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecomposedView {
    /// Claims dropped because most of their words are not the answer's.
    #[serde(default)]
    pub ungrounded: usize,
    /// Why the sentence was checked whole instead.
    #[serde(default)]
    pub whole: Option<SentenceFailureView>,
}

/// Why a sentence's check failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentenceFailureView {
    /// The claim checker's kind (`assess-prose`, ...).
    pub kind: String,
    /// What happened.
    pub message: String,
}

/// The parts of an answer's report the page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerView {
    /// The answer.
    pub answer: String,
    /// Every sentence, in order.
    pub sentences: Vec<SentenceView>,
    /// The share of checked sentences that are supported.
    pub supported_share: f64,
    /// Whether every checked sentence is supported (absent: nothing was checkable).
    #[serde(default)]
    pub faithful: Option<bool>,
    /// Requests made.
    pub requests: u32,
    /// Tokens and cost.
    pub usage: UsageView,
}

/// The parts of an assessment the page shows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AssessmentView {
    /// `supported`, `contradicted` or `insufficient`.
    pub verdict: String,
    /// From 0 to 1.
    pub confidence: f64,
    /// Evidence items quoted whole.
    pub citations: Vec<String>,
    /// How the verdict was reached: the verifier route's probabilities and the numbers a
    /// bound was checked against, or the model's own words on the agent route.
    #[serde(default)]
    pub rationale: Option<String>,
}

/// The parts of a typed failure the page shows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FailureView {
    /// The stable kind (`provider`, `no-new-evidence`, `cancelled`, ...).
    pub kind: String,
    /// What happened.
    pub message: String,
    /// What was spent.
    #[serde(default)]
    pub spent: SpentView,
    /// What to do about it ([`text::what_to_do`] for its kind), written into the failure by
    /// the worker ([`CheckResult::advised`]), so the page does not carry the words.
    #[serde(default)]
    pub advice: String,
}

/// The core's events, as the page reads them; anything newer is [`EventView::Other`].
///
/// The core writes the fields of its events in snake case (`delay_ms`, `stop_reason`,
/// `is_error`, `call_id`); the views read that and the camelCase spelling alike.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum EventView {
    /// A claim check entered a stage: `retrieve`, `assess`, `research` (with `turn` and
    /// `of`), `reassess`, `summary`.
    #[serde(rename_all = "camelCase")]
    Stage {
        /// The stage's name.
        stage: String,
        /// For `research`: which turn.
        #[serde(default)]
        turn: Option<u32>,
        /// For `research`: the bound.
        #[serde(default)]
        of: Option<u32>,
        /// For `retrieve` and `reassess`: how many evidence items.
        #[serde(default)]
        evidence: Option<usize>,
    },
    /// A model call is pending.
    #[serde(rename_all = "camelCase")]
    ModelCall {
        /// Its id.
        call: u64,
        /// Which retry (0 for a first try).
        retry: u32,
        /// The wait before it.
        #[serde(alias = "delay_ms")]
        delay_ms: u64,
    },
    /// A model call was answered.
    #[serde(rename_all = "camelCase")]
    ModelAnswered {
        /// Its id.
        call: u64,
        /// Why it ended.
        #[serde(alias = "stop_reason")]
        stop_reason: String,
        /// Tokens and cost.
        usage: UsageView,
        /// The failure, for a failed request.
        #[serde(default)]
        error: Option<String>,
    },
    /// A tool call the model asked for.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The tool.
        tool: String,
        /// Whether the host runs it.
        host: bool,
    },
    /// A tool call was settled.
    #[serde(rename_all = "camelCase")]
    ToolSettled {
        /// The tool.
        tool: String,
        /// Whether its result is an error.
        #[serde(alias = "is_error")]
        is_error: bool,
    },
    /// A failed request will be retried.
    #[serde(rename_all = "camelCase")]
    Retry {
        /// Which retry.
        attempt: u32,
        /// The wait.
        #[serde(alias = "delay_ms")]
        delay_ms: u64,
        /// The failure.
        message: String,
    },
    /// An answer check started checking a sentence.
    SentenceStarted {
        /// The sentence's place in the answer, from 0.
        index: usize,
    },
    /// An answer check ended a sentence's check.
    SentenceChecked {
        /// The sentence, with its status, citations and marks.
        sentence: Box<SentenceView>,
    },
    /// A streamed piece.
    Delta {
        /// The call.
        call: u64,
        /// The core's delta JSON (`{"type": "text", "text": ..}`, ...).
        delta: Value,
    },
    /// An event this page does not know.
    #[serde(other)]
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A full disk is said with what was not saved, what became of it, and what to free.
    #[test]
    fn the_storage_full_notice_says_what_and_what_to_free() {
        let notice = text::not_saved("The result of “A.” is", "It is shown until the tab closes.");
        assert!(notice.starts_with("The result of “A.” is not saved: this browser's storage"));
        assert!(notice.contains("It is shown until the tab closes. Export the results"));
        assert!(notice.contains("clear old results or the corpus"));
        let message = FromWorker::NotSaved { id: Some("c1".into()), message: notice };
        let wire = serde_json::to_value(&message).unwrap();
        assert_eq!(wire["type"], "notSaved");
        assert_eq!(FromWorker::from_json(&wire).unwrap(), message);
    }

    /// Research that found nothing new (`no-new-evidence`) leaves the claim unsettled by the
    /// corpus: the verdict "insufficient evidence", not a failure without one.
    #[test]
    fn research_that_found_nothing_new_is_the_verdict_insufficient_evidence() {
        let failed = |kind: &str| Outcome::Failed {
            failure: json!({"kind": kind, "message": "escalation found no additional evidence"}),
        };
        assert!(failed("no-new-evidence").has_verdict());
        assert!(!failed("cancelled").has_verdict());
        assert!(failed("research-turn-limit").has_verdict(), "research found nothing new either");
        assert!(!Outcome::Failed { failure: json!("not an object") }.has_verdict());
        assert!(Outcome::Report { report: json!({}) }.has_verdict());
        assert_eq!(text::failure_verdict("no-new-evidence"), Some("insufficient"));
        assert_eq!(text::failure_verdict("provider"), None);
        assert_eq!(text::verdict_text("insufficient"), "Insufficient evidence");
    }

    /// The Results section's filter: each result falls under one verdict (no-new-evidence is
    /// "insufficient", a failure without a verdict is "failed"), counted per verdict.
    #[test]
    fn results_are_counted_per_verdict_for_the_filter() {
        let report = |verdict: &str| Outcome::Report {
            report: json!({"assessment": {"verdict": verdict, "confidence": 1}}),
        };
        let failed = |kind: &str| Outcome::Failed { failure: json!({"kind": kind}) };
        assert_eq!(report("supported").verdict_key(), "supported");
        assert_eq!(report("contradicted").verdict_key(), "contradicted");
        assert_eq!(report("insufficient").verdict_key(), "insufficient");
        assert_eq!(failed("no-new-evidence").verdict_key(), "insufficient");
        assert_eq!(failed("cancelled").verdict_key(), "failed");
        assert_eq!(Outcome::Report { report: json!({}) }.verdict_key(), "failed");
        let result = |outcome: Outcome| CheckResult {
            id: "c".into(),
            claim: "A.".into(),
            outcome,
            cited: Vec::new(),
            provenance: None,
        };
        let results =
            [result(report("supported")), result(report("supported")), result(failed("cancelled"))];
        assert_eq!(
            text::verdict_counts(12, &results),
            "All 12 · Supported 2 · Contradicted 0 · Insufficient 0 · Failed 1"
        );
        // What the results cost, once any did: reports and failures alike.
        let costly = [
            result(Outcome::Report {
                report: json!({"assessment": {"verdict": "supported"}, "usage": {"cost": 0.25}}),
            }),
            result(Outcome::Failed {
                failure: json!({"kind": "budget", "spent": {"usage": {"cost": 0.0125}}}),
            }),
        ];
        assert_eq!(
            text::verdict_counts(2, &costly),
            "All 2 · Supported 1 · Contradicted 0 · Insufficient 0 · Failed 1 · $0.2625 spent"
        );
    }

    #[test]
    fn messages_have_one_json_form() {
        let message = ToWorker::Check {
            checks: vec![CheckRequest::claim("c1", "A claim.")],
            provider: ProviderChoice::Offline,
            concurrency: 2,
            corpus: None,
            budget: None,
        };
        let wire = serde_json::to_value(&message).unwrap();
        assert_eq!(
            wire,
            json!({"type": "check", "checks": [{"id": "c1", "claim": "A claim."}],
                   "provider": {"kind": "offline"}, "concurrency": 2})
        );
        assert_eq!(serde_json::from_value::<ToWorker>(wire).unwrap(), message);
        let finished = FromWorker::Finished {
            result: CheckResult {
                id: "c1".into(),
                claim: "A claim.".into(),
                outcome: Outcome::Failed { failure: json!({"kind": "cancelled"}) },
                cited: Vec::new(),
                provenance: None,
            },
        };
        let wire = serde_json::to_value(&finished).unwrap();
        assert_eq!(wire["result"]["outcome"]["status"], "failed");
        assert_eq!(serde_json::from_value::<FromWorker>(wire).unwrap(), finished);
    }

    /// Every message the worker posts, each variant once, with every optional part both ways.
    fn every_message() -> Vec<FromWorker> {
        let corpus = CorpusSummary {
            id: Some("sha256:ab".into()),
            items: 3,
            bytes: 120,
            indexed: true,
            index_ms: Some(1.5),
            stored: Some(CorpusStorage::Saving),
        };
        let report = json!({"claim": "A.", "assessment": {"verdict": "supported",
            "confidence": 0.8, "citations": ["x"], "rationale": "r"}, "route": "single call",
            "summary": "S.", "requests": 2, "usage": {"input": 5, "output": 7, "cost": 0.25}});
        let result = CheckResult {
            id: "c1".into(),
            claim: "A <img src=x onerror=alert(1)>.".into(),
            outcome: Outcome::Report { report },
            cited: vec![Item { id: "e1".into(), text: "x".into() }],
            provenance: Some(json!({"provider": "openai", "baseUrl": "https://api.example/v1",
                "model": "m", "corpus": "sha256:ab", "items": 3, "appVersion": "0.1.0",
                "date": "2026-01-02T03:04:05.000Z"})),
        };
        let failed = CheckResult {
            id: "c2".into(),
            claim: "B.".into(),
            outcome: Outcome::Failed { failure: json!({"kind": "cancelled", "message": "m"}) },
            cited: Vec::new(),
            provenance: None,
        };
        vec![
            FromWorker::Ready {
                corpus: corpus.clone(),
                results: vec![result.clone(), failed],
                resumed: vec![CheckRequest::claim("c3", "C.")],
                queued: vec![CheckRequest::claim("c5", "E.")],
            },
            FromWorker::Corpus { corpus: CorpusSummary::default() },
            FromWorker::CorpusStored {
                id: Some("sha256:ab".into()),
                storage: CorpusStorage::Saved,
            },
            FromWorker::CorpusStored { id: None, storage: CorpusStorage::NotSaved },
            FromWorker::FileRejected {
                file: "a.jsonl".into(),
                line: Some(3),
                message: "bad".into(),
            },
            FromWorker::FileRejected { file: "b.json".into(), line: None, message: "bad".into() },
            FromWorker::Items {
                query: "q".into(),
                offset: 20,
                total: 41,
                items: vec![Item { id: "e1".into(), text: "t".into() }],
            },
            FromWorker::Queued { check: CheckRequest::claim("c4", "D.") },
            FromWorker::Progress {
                id: "c4".into(),
                event: json!({"type": "stage", "stage": "assess"}),
            },
            FromWorker::Finished { result },
            FromWorker::Demo { claims: vec!["One.".into(), "Two.".into()] },
            FromWorker::NamedCorpus {
                name: "n".into(),
                corpus: CorpusSummary { stored: None, ..corpus },
            },
            FromWorker::NamedCorpusRejected {
                name: "n".into(),
                file: "items".into(),
                line: None,
                message: "dup".into(),
            },
            FromWorker::ToolCall {
                id: "s1".into(),
                call: "k1".into(),
                tool: "convert".into(),
                arguments: json!({"km": 3}),
            },
            FromWorker::StepFinished {
                id: "s1".into(),
                outcome: StepOutcome::Value { value: json!({"miles": 1.8}) },
            },
            FromWorker::StepFinished {
                id: "s2".into(),
                outcome: StepOutcome::Failed { failure: json!({"kind": "turn-limit"}) },
            },
            FromWorker::Markdown { text: "# Verity results\n".into() },
            FromWorker::Csv { text: "\"id\"\r\n".into() },
            FromWorker::Claims {
                file: "c.csv".into(),
                claims: vec!["A.".into()],
                bad: vec![BadLine { line: 3, message: "the claim is empty".into() }],
                message: "1 claim read from c.csv; line 3: the claim is empty.".into(),
            },
            FromWorker::Error { message: "storage".into() },
            FromWorker::NotSaved { id: Some("c1".into()), message: "full".into() },
            FromWorker::NotSaved { id: None, message: "full".into() },
            FromWorker::Saved { id: "c1".into() },
            FromWorker::Stored { ids: vec!["c1".into(), "c2".into()] },
            FromWorker::ResultsCleared,
        ]
    }

    #[test]
    fn the_page_reader_reads_every_message_as_serde_does() {
        for message in every_message() {
            let wire = serde_json::to_value(&message).unwrap();
            assert_eq!(FromWorker::from_json(&wire).as_ref(), Ok(&message), "{wire}");
            assert_eq!(serde_json::from_value::<FromWorker>(wire).unwrap(), message);
        }
    }

    #[test]
    fn the_page_reader_reads_the_views_as_serde_does() {
        let reports = [
            json!({"claim": "A.", "assessment": {"verdict": "contradicted", "confidence": 1,
                "citations": []}, "route": "agent escalation", "summary": "S.", "requests": 4,
                "usage": {"input": 1, "output": 2, "cacheRead": 3, "cost": 0.5}, "extra": true}),
            json!({"claim": "A.", "assessment": {"verdict": "supported", "confidence": 0.25,
                "citations": ["q"]}, "route": "single call", "summary": "S.", "requests": 1,
                "usage": {}}),
        ];
        for report in reports {
            let ours = ReportView::from_json(&report).unwrap();
            assert_eq!(ours, serde_json::from_value::<ReportView>(report).unwrap());
        }
        // The rationale the page shows under "How it was decided", when the report has one.
        let why = "Verifier route: ...; the claim's \"more than 1,500\" fails against the passage's 1,159.";
        let with = json!({"verdict": "contradicted", "confidence": 0.9, "citations": [],
            "rationale": why});
        let ours = AssessmentView::from_json(&with).unwrap();
        assert_eq!(ours.rationale.as_deref(), Some(why));
        assert_eq!(ours, serde_json::from_value::<AssessmentView>(with).unwrap());
        let without = json!({"verdict": "supported", "confidence": 1, "citations": [],
            "rationale": null});
        assert_eq!(AssessmentView::from_json(&without).unwrap().rationale, None);
        let wrong = json!({"verdict": "supported", "confidence": 1, "citations": [],
            "rationale": 3});
        assert!(AssessmentView::from_json(&wrong).unwrap_err().contains("rationale"));
        let failures = [
            json!({"kind": "provider", "message": "m", "spent": {"turns": 1, "requests": 2,
                "retries": 1, "usage": {"input": 9}}}),
            json!({"kind": "cancelled", "message": "m"}),
        ];
        for failure in failures {
            let ours = FailureView::from_json(&failure).unwrap();
            assert_eq!(ours, serde_json::from_value::<FailureView>(failure).unwrap());
        }
        let events = [
            json!({"type": "stage", "stage": "research", "turn": 2, "of": 6}),
            json!({"type": "stage", "stage": "retrieve", "evidence": 4, "turn": null}),
            json!({"type": "model_call", "call": 1}),
            json!({"type": "modelCall", "call": 1, "retry": 0, "delay_ms": 0}),
            json!({"type": "modelCall", "call": 2, "retry": 1, "delayMs": 250}),
            json!({"type": "modelAnswered", "call": 1, "stop_reason": "tool_use",
                "usage": {"input": 3, "output": 4}}),
            json!({"type": "modelAnswered", "call": 1, "stopReason": "error", "usage": {},
                "error": "HTTP 500"}),
            json!({"type": "toolCall", "tool": "lookup_evidence", "host": false}),
            json!({"type": "toolSettled", "tool": "lookup_evidence", "is_error": true}),
            json!({"type": "retry", "attempt": 1, "delay_ms": 500, "message": "429"}),
            json!({"type": "delta", "call": 3, "delta": {"type": "text", "text": "Hi"}}),
            json!({"type": "compacted", "dropped": 2}),
        ];
        for event in events {
            let ours = EventView::from_json(&event).unwrap();
            assert_eq!(
                ours,
                serde_json::from_value::<EventView>(event.clone()).unwrap(),
                "{event}"
            );
        }
    }

    #[test]
    fn the_page_reader_refuses_what_serde_refuses_and_names_the_field() {
        let bad = [
            (json!({"type": "nope"}), "unknown type `nope`"),
            (json!({"type": "corpus"}), "missing field `corpus`"),
            (json!({"type": "fileRejected", "file": 3, "message": "m"}), "field `file`"),
            (
                json!({"type": "items", "query": "", "offset": -1, "total": 0, "items": []}),
                "`offset`",
            ),
            (
                json!({"type": "finished", "result": {"id": "c", "claim": "A.",
                "outcome": {"status": "odd"}}}),
                "unknown status `odd`",
            ),
            (
                json!({"type": "ready", "corpus": {"items": 0, "bytes": 0, "indexed": false},
                "results": [], "resumed": [{"id": "c"}]}),
                "resumed[0]: check: missing field `claim`",
            ),
            (json!([1]), "expected an object, found an array"),
        ];
        for (wire, expected) in bad {
            let error = FromWorker::from_json(&wire).unwrap_err();
            assert!(error.contains(expected), "{error} should say {expected}");
            assert!(serde_json::from_value::<FromWorker>(wire).is_err());
        }
        let error = ReportView::from_json(&json!({"claim": "A."})).unwrap_err();
        assert!(error.contains("missing field `assessment`"), "{error}");
    }

    #[test]
    fn an_unknown_event_is_other() {
        let event: EventView =
            serde_json::from_value(json!({"type": "compacted", "dropped": 2})).unwrap();
        assert_eq!(event, EventView::Other);
        let stage: EventView = serde_json::from_value(
            json!({"type": "stage", "stage": "research", "turn": 2, "of": 6}),
        )
        .unwrap();
        assert!(matches!(stage, EventView::Stage { turn: Some(2), of: Some(6), .. }));
    }
}
