//! The page's view of the engine worker: signals fed by [`FromWorker`] messages ([`Engine::apply`])
//! and the user's actions turned into [`ToWorker`] messages.
//!
//! The real worker ([`crate::bridge`]) and the preview's canned messages go through the same
//! [`Engine::apply`], so what the preview shows is what the worker's messages produce.

use std::rc::Rc;

use leptos::prelude::*;
use serde_json::Value;
use verity_messages::{
    CheckKind, CheckRequest, CheckResult, CorpusSummary, EventView, FromJson, FromWorker, Item,
    NamedText, Outcome, ProviderChoice, SentenceView, ToWorker, UsageView,
};

/// Whether a finished result is an answer's (its report has sentences) or a claim's.
pub fn result_kind(result: &CheckResult) -> CheckKind {
    match &result.outcome {
        Outcome::Report { report } if report.get("sentences").is_some() => CheckKind::Answer,
        _ => CheckKind::Claim,
    }
}

/// Whether a finished answer's sentences were split into claims (any sentence says how).
fn result_decomposed(result: &CheckResult) -> bool {
    match &result.outcome {
        Outcome::Report { report } => report["sentences"]
            .as_array()
            .is_some_and(|sentences| sentences.iter().any(|s| s.get("decomposed").is_some())),
        Outcome::Failed { .. } => false,
    }
}

/// How many table rows one page of the corpus shows.
pub const PAGE_SIZE: usize = 20;
/// The most characters of streamed text a check card keeps (the newest ones).
const LIVE_LIMIT: usize = 1_500;
/// The most progress lines a check card keeps (the newest ones).
const LOG_LIMIT: usize = 60;

/// Whether the engine worker is there.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineStatus {
    /// Started, not ready yet.
    Loading,
    /// Ready for work.
    Ready,
    /// It could not start (the message says why).
    Failed(String),
}

/// A file the worker refused, or another message the person may dismiss.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// Unique while the page lives.
    pub key: u64,
    /// The file at fault, for a refused file.
    pub file: Option<String>,
    /// Its line at fault, if one is.
    pub line: Option<usize>,
    /// What happened.
    pub message: String,
}

impl Notice {
    /// One line naming the file and the line.
    pub fn text(&self) -> String {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => format!("{file}, line {line}: {}", self.message),
            (Some(file), None) => format!("{file}: {}", self.message),
            (None, _) => self.message.clone(),
        }
    }
}

/// The page of corpus items the table shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemsPage {
    /// The search it answers.
    pub query: String,
    /// Its first item's position among the matches.
    pub offset: usize,
    /// How many items match.
    pub total: usize,
    /// The items.
    pub items: Vec<Item>,
}

/// Where a check is.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Waiting for a free slot.
    Queued,
    /// Running (progress events arrive).
    Running,
    /// Ended with a report or a typed failure (boxed: a result with its report and
    /// provenance is far larger than the other phases).
    Finished(Box<CheckResult>),
}

/// One check, as its card shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckState {
    /// The id the worker knows it by (a re-run gets a new one).
    pub id: String,
    /// The claim.
    pub claim: String,
    /// Where it is.
    pub phase: Phase,
    /// The current stage, in words.
    pub stage: Option<String>,
    /// What happened so far, oldest first (model calls, tool calls, retries).
    pub log: Vec<String>,
    /// The current model call's streamed text.
    pub live: String,
    /// Tokens and cost so far.
    pub usage: UsageView,
    /// Model requests answered so far.
    pub requests: u32,
    /// Model calls started so far (retries not counted).
    pub calls: u32,
    /// A cancel was asked for.
    pub cancelling: bool,
    /// Storage was full: its progress or result is kept in memory only.
    pub not_saved: bool,
    /// Asked for by this page and not yet in the saved list of checks to run
    /// ([`FromWorker::Stored`]): closing the app's last tab now would lose it.
    pub saving: bool,
    /// A model call is in flight (sent, not answered).
    pub awaiting: bool,
    /// Events so far (wrapping): each is a sign of life. The "stalled" notice is drawn anew
    /// on each, and the style sheet shows it only after 15 s (the page keeps no clock).
    pub signs: u32,
    /// A claim, or a whole answer checked sentence by sentence.
    pub kind: CheckKind,
    /// An answer's sentences checked so far, in the order they ended.
    pub sentences: Vec<SentenceView>,
    /// An answer's sentences being checked (started, not yet ended), by index.
    pub in_flight: Vec<usize>,
    /// An answer whose sentences are split into claims (kept for a re-run).
    pub decompose: bool,
}

impl CheckState {
    fn new(id: String, claim: String, phase: Phase) -> Self {
        Self {
            id,
            claim,
            phase,
            stage: None,
            log: Vec::new(),
            live: String::new(),
            usage: UsageView::default(),
            requests: 0,
            calls: 0,
            cancelling: false,
            not_saved: false,
            saving: false,
            awaiting: false,
            signs: 0,
            kind: CheckKind::Claim,
            sentences: Vec::new(),
            in_flight: Vec::new(),
            decompose: false,
        }
    }

    /// [`CheckState::new`] of the check `request` asks for.
    fn of(request: CheckRequest, phase: Phase) -> Self {
        Self {
            kind: request.kind,
            decompose: request.decompose,
            ..Self::new(request.id, request.claim, phase)
        }
    }

    /// Whether it is queued or running.
    pub fn is_active(&self) -> bool {
        !matches!(self.phase, Phase::Finished(_))
    }

    /// Takes in one of the core's events.
    pub fn apply_event(&mut self, event: &Value) {
        if self.phase == Phase::Queued {
            self.phase = Phase::Running;
        }
        let Ok(event) = EventView::from_json(event) else {
            return;
        };
        // Any event is a sign of life; the streamed pieces of an answer are the ones that
        // arrive while a call is in flight.
        self.signs = self.signs.wrapping_add(1);
        match event {
            EventView::Stage { stage, turn, of, evidence } => {
                let text = stage_text(&stage, turn, of, evidence);
                self.push_log(text.clone());
                // An answer's line says which sentences are being checked; their stages,
                // several at once, are in the log.
                if self.kind != CheckKind::Answer {
                    self.stage = Some(text);
                }
            }
            // Call ids are the engine's, not a count: the log counts the calls itself.
            EventView::ModelCall { retry, delay_ms, .. } => {
                self.live.clear();
                self.awaiting = true;
                if retry == 0 {
                    self.calls += 1;
                    self.push_log(format!("Model call {} sent", self.calls));
                } else {
                    self.push_log(format!(
                        "Model call {} sent again (retry {retry}, after {})",
                        self.calls,
                        wait_text(delay_ms)
                    ));
                }
            }
            EventView::ModelAnswered { stop_reason, usage, error, .. } => {
                self.awaiting = false;
                self.requests += 1;
                self.usage.input += usage.input;
                self.usage.output += usage.output;
                self.usage.cache_read += usage.cache_read;
                self.usage.cost += usage.cost;
                self.push_log(match error {
                    Some(error) => format!("Model call {} failed: {error}", self.calls),
                    None => format!(
                        "Model call {} answered ({stop_reason}): {} in, {} out tokens",
                        self.calls, usage.input, usage.output
                    ),
                });
            }
            EventView::ToolCall { tool, host } => self.push_log(if host {
                format!("Tool call: {tool} (run by the page's engine)")
            } else {
                format!("Tool call: {tool}")
            }),
            EventView::ToolSettled { tool, is_error } => self.push_log(if is_error {
                format!("Tool {tool} answered with an error")
            } else {
                format!("Tool {tool} answered")
            }),
            EventView::Retry { attempt, delay_ms, message } => {
                self.push_log(format!("Retry {attempt} in {}: {message}", wait_text(delay_ms)))
            }
            EventView::Delta { delta, .. } => self.push_live(&delta),
            EventView::SentenceStarted { index } => {
                self.push_log(format!("Checking sentence {}", index + 1));
                self.in_flight.push(index);
                self.stage = in_flight_text(&self.in_flight);
            }
            EventView::SentenceChecked { sentence } => {
                self.push_log(format!("Sentence {}: {}", sentence.index + 1, sentence.status));
                self.in_flight.retain(|index| *index != sentence.index);
                self.stage = in_flight_text(&self.in_flight).or(self.stage.take());
                self.sentences.push(*sentence);
            }
            EventView::Other => {}
        }
    }

    /// Takes in a streamed piece of the current model call's answer: its text, or the JSON
    /// arguments of the tool call it is making (a claim check's answers are tool calls); the
    /// newest [`LIVE_LIMIT`] bytes are kept.
    fn push_live(&mut self, delta: &Value) {
        let field = match delta.get("type").and_then(Value::as_str) {
            Some("text") => "text",
            Some("toolCallArguments") => "arguments",
            _ => return,
        };
        if let Some(text) = delta.get(field).and_then(Value::as_str) {
            self.live.push_str(text);
            if self.live.len() > LIVE_LIMIT {
                let mut cut = self.live.len() - LIVE_LIMIT;
                while !self.live.is_char_boundary(cut) {
                    cut += 1;
                }
                self.live.drain(..cut);
            }
        }
    }

    fn push_log(&mut self, line: String) {
        self.log.push(line);
        if self.log.len() > LOG_LIMIT {
            let extra = self.log.len() - LOG_LIMIT;
            self.log.drain(..extra);
        }
    }
}

/// A stage in words: "Retrieving evidence", "Research turn 2 of 6", ...
pub fn stage_text(
    stage: &str,
    turn: Option<u32>,
    of: Option<u32>,
    evidence: Option<usize>,
) -> String {
    let items = |n: usize| if n == 1 { "1 item".to_owned() } else { format!("{n} items") };
    match (stage, turn, of, evidence) {
        ("retrieve", _, _, Some(n)) => format!("Retrieving evidence ({} found)", items(n)),
        ("retrieve", ..) => "Retrieving evidence".to_owned(),
        ("assess", ..) => "Assessing the claim".to_owned(),
        ("research", Some(turn), Some(of), _) => format!("Research turn {turn} of {of}"),
        ("research", Some(turn), None, _) => format!("Research turn {turn}"),
        ("research", ..) => "Researching".to_owned(),
        ("reassess", _, _, Some(n)) => format!("Reassessing with {}", items(n)),
        ("reassess", ..) => "Reassessing".to_owned(),
        ("summary", ..) => "Writing the summary".to_owned(),
        (other, ..) => format!("Stage: {other}"),
    }
}

pub use verity_messages::text::fixed;

/// A wait in words ("1.5 s", "250 ms").
pub fn wait_text(ms: u64) -> String {
    if ms >= 1_000 { format!("{} s", fixed(ms as f64 / 1_000.0, 1)) } else { format!("{ms} ms") }
}

/// A count with thousands separators ("26,259"). The same as `verity_messages::text::thousands`
/// (the worker's); calling that one from here made the page's wasm 154 B gzip larger.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i != 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Which sentences of an answer are being checked, in words (`None` for none).
fn in_flight_text(in_flight: &[usize]) -> Option<String> {
    let mut numbers: Vec<String> = in_flight.iter().map(|index| (index + 1).to_string()).collect();
    let last = numbers.pop()?;
    Some(if numbers.is_empty() {
        format!("Checking sentence {last}")
    } else {
        format!("Checking sentences {} and {last}", numbers.join(", "))
    })
}

/// A size in bytes in words ("12.3 KB").
pub fn size_text(bytes: usize) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{} KB", fixed(bytes as f64 / 1e3, 1)),
        _ => format!("{} MB", fixed(bytes as f64 / 1e6, 1)),
    }
}

/// One check card: its place in the list (from 1) and its state.
#[derive(Debug, Clone, Copy)]
pub struct CheckCard {
    /// Its place in the list, from 1 (the `check-<n>` test id).
    pub n: usize,
    /// What it shows.
    pub state: RwSignal<CheckState>,
}

type Sender = Rc<dyn Fn(&ToWorker) -> Result<(), String>>;

struct Outbox {
    send: Sender,
    /// Messages asked for before the worker was ready.
    pending: Vec<ToWorker>,
}

/// The page's state of the engine, and the way to ask it for work. `Copy`: pass it to every
/// section.
#[derive(Debug, Clone, Copy)]
pub struct Engine {
    /// Whether the worker is there.
    pub status: RwSignal<EngineStatus>,
    /// The corpus.
    pub corpus: RwSignal<CorpusSummary>,
    /// Refused files and other errors, until dismissed.
    pub notices: RwSignal<Vec<Notice>>,
    /// The table's page of items.
    pub items: RwSignal<ItemsPage>,
    /// The table's search text.
    pub query: RwSignal<String>,
    /// The table's first row among the matches.
    pub offset: RwSignal<usize>,
    /// The check cards, oldest first.
    pub checks: RwSignal<Vec<CheckCard>>,
    /// Files being read by the page.
    pub reading: RwSignal<usize>,
    /// Files read and waiting for the engine to load (sent once it is ready).
    pub waiting: RwSignal<usize>,
    /// Bytes of files sent to the worker and not answered yet (it parses, hashes and indexes
    /// them; a large corpus takes a second or more).
    pub parsing: RwSignal<usize>,
    /// The claims box's text (filled by the demo's suggestions and by a claims file).
    pub claims: RwSignal<String>,
    /// What the worker said of the last claims file read.
    pub claims_read: RwSignal<String>,
    /// The storage line at the foot of the page.
    pub storage: crate::storage::StorageLine,
    counter: StoredValue<u64>,
    prefix: StoredValue<String>,
    outbox: StoredValue<Outbox, LocalStorage>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").field("pending", &self.pending.len()).finish()
    }
}

/// The network provider as this device remembers it (with its key only when the person ticked
/// "Remember on this device"); `None` natively, where there is no browser storage.
fn remembered_provider() -> Option<ProviderChoice> {
    #[cfg(target_arch = "wasm32")]
    {
        let settings = crate::provider::load();
        (settings.kind != crate::provider::ProviderKind::Offline)
            .then(|| crate::provider::for_check(&settings))
    }
    #[cfg(not(target_arch = "wasm32"))]
    None
}

impl Engine {
    /// An engine state whose messages go through `send` once the worker is ready (they wait
    /// until then). `id_prefix` makes this page's check ids unique across visits.
    pub fn new(
        id_prefix: impl Into<String>,
        send: impl Fn(&ToWorker) -> Result<(), String> + 'static,
    ) -> Self {
        Self {
            status: RwSignal::new(EngineStatus::Loading),
            corpus: RwSignal::new(CorpusSummary::default()),
            notices: RwSignal::new(Vec::new()),
            items: RwSignal::new(ItemsPage::default()),
            query: RwSignal::new(String::new()),
            offset: RwSignal::new(0),
            checks: RwSignal::new(Vec::new()),
            reading: RwSignal::new(0),
            waiting: RwSignal::new(0),
            parsing: RwSignal::new(0),
            claims: RwSignal::new(String::new()),
            claims_read: RwSignal::new(String::new()),
            storage: crate::storage::StorageLine::default(),
            counter: StoredValue::new(0),
            prefix: StoredValue::new(id_prefix.into()),
            outbox: StoredValue::new_local(Outbox { send: Rc::new(send), pending: Vec::new() }),
        }
    }

    /// Sends later messages through `send` (the worker, once it is started).
    pub fn set_sender(&self, send: impl Fn(&ToWorker) -> Result<(), String> + 'static) {
        self.outbox.update_value(|outbox| outbox.send = Rc::new(send));
    }

    /// Whether the worker is ready for work.
    pub fn is_ready(&self) -> bool {
        self.status.with(|status| *status == EngineStatus::Ready)
    }

    fn next(&self) -> u64 {
        self.counter.update_value(|n| *n += 1);
        self.counter.get_value()
    }

    fn new_check_id(&self) -> String {
        format!("{}-{}", self.prefix.get_value(), self.next())
    }

    /// Sends a message now, or when the worker is ready.
    pub fn send(&self, message: ToWorker) {
        if !self.status.with_untracked(|status| *status == EngineStatus::Ready) {
            self.outbox.update_value(|outbox| outbox.pending.push(message));
            return;
        }
        let send = self.outbox.with_value(|outbox| Rc::clone(&outbox.send));
        if let Err(error) = send(&message) {
            self.notify(None, None, format!("Could not reach the engine: {error}"));
        }
    }

    /// Adds a dismissable notice.
    pub fn notify(&self, file: Option<String>, line: Option<usize>, message: String) {
        let key = self.next();
        self.notices.update(|notices| notices.push(Notice { key, file, line, message }));
    }

    /// Takes in the worker's failure to start.
    pub fn failed(&self, message: String) {
        self.status.set(EngineStatus::Failed(message));
    }

    /// Takes in one message from the worker.
    pub fn apply(&self, message: FromWorker) {
        match message {
            FromWorker::Ready { corpus, results, resumed, queued } => {
                self.ready(corpus, results, resumed, queued);
            }
            FromWorker::Corpus { corpus } => {
                self.parsing.set(0);
                self.corpus.set(corpus);
                self.request_items();
            }
            FromWorker::CorpusStored { id, storage } => self.corpus.update(|corpus| {
                if corpus.id == id {
                    corpus.stored = Some(storage);
                }
            }),
            FromWorker::FileRejected { file, line, message } => {
                self.parsing.set(0);
                self.notify(Some(file), line, message);
            }
            // An answer to an older search is stale.
            FromWorker::Items { query, offset, total, items }
                if query == self.query.get_untracked() =>
            {
                self.items.set(ItemsPage { query, offset, total, items });
            }
            FromWorker::Queued { check } if self.card(&check.id).is_none() => {
                self.add_card(CheckState::of(check, Phase::Queued));
            }
            FromWorker::Progress { id, event } => {
                if let Some(card) = self.card(&id) {
                    card.state.update(|state| state.apply_event(&event));
                }
            }
            FromWorker::Finished { result } => self.finished(result),
            // The demo corpus comes with claims to try: they fill an empty box.
            FromWorker::Demo { claims }
                if self.claims.with_untracked(|text| text.trim().is_empty()) =>
            {
                self.claims.set(claims.join("\n"));
            }
            FromWorker::Claims { claims, message, .. } => {
                if !claims.is_empty() {
                    self.claims.set(claims.join("\n"));
                }
                self.claims_read.set(message);
            }
            FromWorker::Error { message } => self.notify(None, None, message),
            FromWorker::NotSaved { id, message } => {
                if let Some(card) = id.and_then(|id| self.card(&id)) {
                    card.state.update(|state| state.not_saved = true);
                }
                self.notify(None, None, message);
            }
            FromWorker::Saved { id } => {
                if let Some(card) = self.card(&id) {
                    card.state.update(|state| state.not_saved = false);
                }
            }
            FromWorker::Stored { ids } => {
                for id in ids {
                    if let Some(card) = self.card(&id) {
                        card.state.update(|state| state.saving = false);
                    }
                }
            }
            FromWorker::Markdown { text } => self.save("verity-results.md", "text/markdown", &text),
            FromWorker::Csv { text } => self.save("verity-results.csv", "text/csv", &text),
            FromWorker::ResultsCleared => self.drop_finished(),
            _ => {}
        }
    }

    /// The worker is ready: it says which corpus it holds, the results it kept, the checks
    /// it resumed and those still queued. Cards are made for the checks this page does not
    /// show yet, and the messages that waited are sent.
    fn ready(
        &self,
        corpus: CorpusSummary,
        results: Vec<CheckResult>,
        resumed: Vec<CheckRequest>,
        queued: Vec<CheckRequest>,
    ) {
        if !resumed.is_empty() || !queued.is_empty() {
            // Keyed checks resume only with the key remembered on this device (the
            // worker never stores it); without one they end, saying so.
            let provider = remembered_provider();
            // Queued until the status is `Ready` below, then sent with the rest.
            self.send(ToWorker::Credentials { provider });
        }
        self.corpus.set(corpus);
        for result in results {
            let id = result.id.clone();
            match self.card(&id) {
                // A check that ended while the engine was down (it was restarted).
                Some(card) => card.state.update(|state| {
                    if state.is_active() {
                        state.phase = Phase::Finished(Box::new(result));
                    }
                }),
                None => {
                    let kind = result_kind(&result);
                    let decompose = result_decomposed(&result);
                    let claim = result.claim.clone();
                    let state = CheckState::new(id, claim, Phase::Finished(Box::new(result)));
                    self.add_card(CheckState { kind, decompose, ..state });
                }
            }
        }
        for check in resumed {
            match self.card(&check.id) {
                Some(card) => card.state.update(|state| state.phase = Phase::Running),
                None => self.add_card(CheckState::of(check, Phase::Running)),
            }
        }
        for check in queued {
            if self.card(&check.id).is_none() {
                self.add_card(CheckState::of(check, Phase::Queued));
            }
        }
        self.status.set(EngineStatus::Ready);
        self.waiting.set(0);
        let pending = self.outbox.try_update_value(|outbox| std::mem::take(&mut outbox.pending));
        for message in pending.unwrap_or_default() {
            self.send(message);
        }
        self.request_items();
    }

    /// A check ended: its card shows the result (a new card for a check this page did not
    /// show).
    fn finished(&self, result: CheckResult) {
        match self.card(&result.id) {
            // A check ends once; a late second end (a cancel racing the last answer) is
            // not news.
            Some(card) if !card.state.with_untracked(CheckState::is_active) => {}
            Some(card) => card.state.update(|state| {
                state.live.clear();
                state.cancelling = false;
                state.saving = false;
                state.phase = Phase::Finished(Box::new(result));
            }),
            None => {
                let (id, claim) = (result.id.clone(), result.claim.clone());
                self.add_card(CheckState::new(id, claim, Phase::Finished(Box::new(result))));
            }
        }
    }

    /// The card of a check id.
    pub fn card(&self, id: &str) -> Option<CheckCard> {
        self.checks.with_untracked(|cards| {
            cards.iter().copied().find(|card| card.state.with_untracked(|s| s.id == id))
        })
    }

    fn add_card(&self, state: CheckState) {
        let n = self.checks.with_untracked(|cards| cards.len()) + 1;
        let card = CheckCard { n, state: RwSignal::new(state) };
        self.checks.update(|cards| cards.push(card));
    }

    /// Asks for the table's page again (after a change of corpus, search or page).
    pub fn request_items(&self) {
        self.send(ToWorker::ListItems {
            query: self.query.get_untracked(),
            offset: self.offset.get_untracked(),
            limit: PAGE_SIZE,
        });
    }

    /// Searches the corpus table.
    pub fn search(&self, query: String) {
        self.query.set(query);
        self.offset.set(0);
        self.request_items();
    }

    /// Shows the table's page starting at `offset`.
    pub fn page(&self, offset: usize) {
        self.offset.set(offset);
        self.request_items();
    }

    /// Files the page read.
    pub fn add_files(&self, files: Vec<NamedText>) {
        if !files.is_empty() {
            if !self.status.with_untracked(|status| *status == EngineStatus::Ready) {
                self.waiting.update(|n| *n += files.len());
            }
            let bytes = files.iter().map(|file| file.text.len()).sum::<usize>();
            self.parsing.update(|n| *n += bytes.max(1));
            self.send(ToWorker::AddFiles { files });
        }
    }

    /// The demo corpus.
    pub fn load_demo(&self) {
        self.send(ToWorker::LoadDemo);
    }

    /// Removes one item.
    pub fn remove_item(&self, id: String) {
        self.send(ToWorker::RemoveItems { ids: vec![id] });
    }

    /// Empties the corpus.
    pub fn clear_corpus(&self) {
        self.send(ToWorker::ClearCorpus);
    }

    /// Checks claims, a new card each.
    pub fn run(&self, claims: Vec<String>, provider: ProviderChoice, concurrency: usize) {
        let checks: Vec<CheckRequest> = claims
            .into_iter()
            .map(|claim| CheckRequest::claim(self.new_check_id(), claim))
            .collect();
        if checks.is_empty() {
            return;
        }
        for check in &checks {
            let mut state = CheckState::new(check.id.clone(), check.claim.clone(), Phase::Queued);
            state.saving = true;
            self.add_card(state);
        }
        self.send(ToWorker::Check {
            checks,
            provider,
            concurrency: concurrency.max(1),
            corpus: None,
            budget: None,
        });
    }

    /// Checks a whole answer, sentence by sentence, `concurrency` sentences at once, in a new
    /// card.
    pub fn run_answer(
        &self,
        answer: String,
        decompose: bool,
        provider: ProviderChoice,
        concurrency: usize,
    ) {
        let check = CheckRequest { decompose, ..CheckRequest::answer(self.new_check_id(), answer) };
        let mut state = CheckState::of(check.clone(), Phase::Queued);
        state.saving = true;
        self.add_card(state);
        self.send(ToWorker::Check {
            checks: vec![check],
            provider,
            concurrency: concurrency.max(1),
            corpus: None,
            budget: None,
        });
    }

    /// Checks a card's claim again, in the same card: the worker forgets the old result, so
    /// it does not come back as a second card after a reload.
    pub fn rerun(&self, card: CheckCard, provider: ProviderChoice, concurrency: usize) {
        let id = self.new_check_id();
        let (old, claim, kind, decompose) = card.state.with_untracked(|state| {
            (state.id.clone(), state.claim.clone(), state.kind, state.decompose)
        });
        let check = CheckRequest { kind, decompose, ..CheckRequest::claim(id, claim) };
        let mut state = CheckState::of(check.clone(), Phase::Queued);
        state.saving = true;
        card.state.set(state);
        self.send(ToWorker::ForgetResult { id: old });
        self.send(ToWorker::Check {
            checks: vec![check],
            provider,
            concurrency: concurrency.max(1),
            corpus: None,
            budget: None,
        });
    }

    /// Cancels one check.
    pub fn cancel(&self, card: CheckCard) {
        let id = card.state.with_untracked(|state| state.id.clone());
        card.state.update(|state| state.cancelling = true);
        self.send(ToWorker::Cancel { id });
    }

    /// Cancels every queued or running check.
    pub fn cancel_all(&self) {
        for card in self.checks.get_untracked() {
            if card.state.with_untracked(|state| state.is_active() && !state.cancelling) {
                self.cancel(card);
            }
        }
    }

    /// Asks the worker for the finished results as Markdown; it answers with
    /// `FromWorker::Markdown`, which is downloaded.
    pub fn export_markdown(&self) {
        self.send(ToWorker::ExportMarkdown { results: self.results() });
    }

    /// Asks the worker for the finished results as CSV; it answers with `FromWorker::Csv`,
    /// which is downloaded.
    pub fn export_csv(&self) {
        self.send(ToWorker::ExportCsv { results: self.results() });
    }

    /// Offers a document the worker wrote as a download, saying so when that fails.
    fn save(&self, name: &str, mime: &str, text: &str) {
        if let Err(error) = crate::export::download(name, mime, text) {
            self.notify(None, None, format!("The export failed: {error}"));
        }
    }

    /// Forgets finished checks (the running ones stay), in every tab.
    pub fn clear_results(&self) {
        self.drop_finished();
        self.send(ToWorker::ClearResults);
    }

    /// Drops the finished checks' cards (the results were cleared, here or in another tab).
    fn drop_finished(&self) {
        self.checks.update(|cards| {
            cards.retain(|card| card.state.with_untracked(CheckState::is_active));
            for (i, card) in cards.iter_mut().enumerate() {
                card.n = i + 1;
            }
        });
    }

    /// The finished checks' results, in card order.
    pub fn results(&self) -> Vec<CheckResult> {
        self.checks.with(|cards| {
            cards
                .iter()
                .filter_map(|card| {
                    card.state.with(|state| match &state.phase {
                        Phase::Finished(result) => Some(CheckResult::clone(result)),
                        _ => None,
                    })
                })
                .collect()
        })
    }

    /// Whether any check is queued or running.
    pub fn any_active(&self) -> bool {
        self.checks.with(|cards| cards.iter().any(|card| card.state.with(CheckState::is_active)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use verity_messages::Outcome;

    #[test]
    fn fixed_rounds_like_the_float_formatting_it_replaces() {
        for (value, decimals) in [
            (0.0, 4),
            (0.00125, 4),
            (0.8, 0),
            (0.875, 0),
            (99.5, 0),
            (1.25, 1),
            (26.259, 1),
            (1.23456, 4),
            (12345.06, 1),
            (-0.5, 1),
            (-0.00001, 4),
        ] {
            let ours = fixed(value, decimals);
            let std = format!("{value:.prec$}", prec = decimals as usize);
            let parse = |text: &str| text.parse::<f64>().unwrap();
            // The same figure, or one unit of the last digit apart where `{:.N}` rounds a tie
            // to even or sees the binary value below the tie.
            let unit = 1.0 / 10_f64.powi(decimals as i32);
            assert!((parse(&ours) - parse(&std)).abs() <= unit + 1e-12, "{value}: {ours} vs {std}");
        }
        assert_eq!(fixed(0.0125, 4), "0.0125");
        assert_eq!(fixed(87.5, 0), "88");
        assert_eq!(fixed(1_500.0 / 1_000.0, 1), "1.5");
        assert_eq!(fixed(0.0, 0), "0");
        assert_eq!(fixed(-0.00001, 4), "0.0000");
        assert_eq!(size_text(26_259), "26.3 KB");
        assert_eq!(size_text(5_400_000), "5.4 MB");
        assert_eq!(wait_text(1_250), "1.3 s");
    }

    #[test]
    fn a_call_in_flight_is_awaited_and_every_event_is_a_sign_of_life() {
        let mut state = CheckState::new("c1".into(), "A claim.".into(), Phase::Queued);
        assert!(!state.awaiting);
        state.apply_event(&json!({"type": "modelCall", "call": 1, "retry": 0, "delayMs": 0}));
        assert!(state.awaiting);
        let before = state.signs;
        state.apply_event(
            &json!({"type": "delta", "call": 1, "delta": {"type": "text", "text": "{"}}),
        );
        assert_ne!(state.signs, before, "a streamed piece restarts the stalled clock");
        state.apply_event(&json!({"type": "modelAnswered", "call": 1, "stopReason": "stop",
            "toolCalls": 0, "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "cost": 0}}));
        assert!(!state.awaiting, "answered");
    }

    #[test]
    fn events_become_stage_log_live_text_and_usage() {
        let mut state = CheckState::new("c1".into(), "A claim.".into(), Phase::Queued);
        state.apply_event(&json!({"type": "stage", "stage": "research", "turn": 2, "of": 6}));
        assert_eq!(state.phase, Phase::Running);
        assert_eq!(state.stage.as_deref(), Some("Research turn 2 of 6"));
        state.apply_event(&json!({"type": "modelCall", "call": 3, "retry": 0, "delayMs": 0}));
        state.apply_event(
            &json!({"type": "delta", "call": 3, "delta": {"type": "text", "text": "The bri"}}),
        );
        state.apply_event(
            &json!({"type": "delta", "call": 3, "delta": {"type": "text", "text": "dge"}}),
        );
        state.apply_event(
            &json!({"type": "delta", "call": 3, "delta": {"type": "toolCall", "id": "x"}}),
        );
        assert_eq!(state.live, "The bridge");
        state.apply_event(&json!({"type": "delta", "call": 3,
            "delta": {"type": "toolCallArguments", "index": 0, "arguments": "{\"verdict\": \"sup"}}));
        assert_eq!(state.live, "The bridge{\"verdict\": \"sup", "tool-call arguments stream too");
        state.apply_event(&json!({"type": "modelAnswered", "call": 3, "stopReason": "tool_use",
            "usage": {"input": 100, "output": 20, "cost": 0.001}}));
        state.apply_event(
            &json!({"type": "retry", "attempt": 1, "delayMs": 1500, "message": "429"}),
        );
        state.apply_event(&json!({"type": "somethingNew"}));
        assert_eq!(state.requests, 1);
        assert_eq!(state.usage.input, 100);
        assert_eq!(state.log.last().unwrap(), "Retry 1 in 1.5 s: 429");
        state.apply_event(&json!({"type": "modelCall", "call": 4, "retry": 1, "delayMs": 1500}));
        assert!(state.live.is_empty(), "a new call starts a new live text");
    }

    #[test]
    fn the_live_text_keeps_its_newest_characters_on_a_char_boundary() {
        let mut state = CheckState::new("c1".into(), "A claim.".into(), Phase::Running);
        let piece = "é".repeat(500);
        for _ in 0..4 {
            state.apply_event(
                &json!({"type": "delta", "call": 1, "delta": {"type": "text", "text": piece}}),
            );
        }
        assert!(state.live.len() <= LIVE_LIMIT + 1);
        assert!(state.live.chars().all(|c| c == 'é'));
    }

    #[test]
    fn messages_wait_for_ready_and_cards_follow_the_worker() {
        let owner = Owner::new();
        owner.with(|| {
            let sent = Rc::new(std::cell::RefCell::new(Vec::new()));
            let log = Rc::clone(&sent);
            let engine = Engine::new("t", move |message: &ToWorker| {
                log.borrow_mut().push(message.clone());
                Ok(())
            });
            engine.load_demo();
            engine.add_files(vec![NamedText { name: "a.txt".into(), text: "A.".into() }]);
            assert!(sent.borrow().is_empty(), "nothing is sent before the worker is ready");
            assert_eq!(engine.waiting.get_untracked(), 1, "the file waits, and the page says so");
            engine.apply(FromWorker::Ready {
                corpus: CorpusSummary::default(),
                results: vec![CheckResult {
                    id: "old".into(),
                    claim: "Old.".into(),
                    outcome: Outcome::Failed { failure: json!({"kind": "cancelled"}) },
                    cited: Vec::new(),
                    provenance: None,
                }],
                resumed: vec![CheckRequest::claim("r", "Resumed.")],
                queued: vec![CheckRequest::claim("q", "Queued.")],
            });
            assert_eq!(sent.borrow()[0], ToWorker::LoadDemo);
            assert!(matches!(&sent.borrow()[1], ToWorker::AddFiles { files } if files.len() == 1));
            assert_eq!(engine.waiting.get_untracked(), 0);
            assert_eq!(engine.parsing.get_untracked(), 2, "the worker is reading its 2 bytes");
            // A check was resumed: the worker is told which key this device remembers (none
            // here, natively).
            assert_eq!(sent.borrow()[2], ToWorker::Credentials { provider: None });
            assert!(matches!(sent.borrow()[3], ToWorker::ListItems { .. }));
            engine.run(vec!["New.".into()], ProviderChoice::Offline, 2);
            let cards = engine.checks.get_untracked();
            assert_eq!(cards.len(), 4);
            assert_eq!(cards[2].state.get_untracked().phase, Phase::Queued, "queued again");
            assert_eq!(cards[3].n, 4);
            let new_id = cards[3].state.get_untracked().id;
            assert_eq!(new_id, "t-1");
            engine.apply(FromWorker::Progress {
                id: new_id.clone(),
                event: json!({"type": "stage", "stage": "assess"}),
            });
            assert_eq!(cards[3].state.get_untracked().phase, Phase::Running);
            engine.cancel_all();
            let cancels =
                sent.borrow().iter().filter(|m| matches!(m, ToWorker::Cancel { .. })).count();
            assert_eq!(cancels, 3, "the resumed, the queued again and the new check");
            engine.apply(FromWorker::FileRejected {
                file: "a.jsonl".into(),
                line: Some(3),
                message: "bad".into(),
            });
            assert_eq!(engine.notices.get_untracked()[0].text(), "a.jsonl, line 3: bad");
            assert_eq!(engine.parsing.get_untracked(), 0, "the worker answered the files");
            // A re-run forgets the old result, then checks the claim under a new id.
            let finished = engine.checks.get_untracked()[0];
            engine.rerun(finished, ProviderChoice::Offline, 1);
            let sent = sent.borrow();
            assert_eq!(sent[sent.len() - 2], ToWorker::ForgetResult { id: "old".into() });
            assert!(matches!(&sent[sent.len() - 1], ToWorker::Check { checks, .. }
                if checks[0].claim == "Old." && checks[0].id != "old"));
            drop(sent);
            engine.apply(FromWorker::Finished {
                result: CheckResult {
                    id: finished.state.get_untracked().id,
                    claim: "Old.".into(),
                    outcome: Outcome::Failed { failure: json!({"kind": "cancelled"}) },
                    cited: Vec::new(),
                    provenance: None,
                },
            });
            engine.clear_results();
            assert_eq!(engine.checks.get_untracked().len(), 3, "only the finished one goes");
        });
    }

    #[test]
    fn an_answers_line_names_the_sentences_being_checked() {
        let mut state =
            CheckState::of(CheckRequest::answer("a", "One. Two. Three."), Phase::Running);
        let sentence = |index: usize| {
            json!({"type": "sentenceChecked", "sentence": {"index": index, "text": "x",
                "span": {"start": 0, "end": 1, "startUtf16": 0, "endUtf16": 1}, "status": "supported",
                "citations": [], "marks": []}})
        };
        for index in 0..3 {
            state.apply_event(&json!({"type": "sentenceStarted", "index": index}));
        }
        assert_eq!(state.stage.as_deref(), Some("Checking sentences 1, 2 and 3"));
        state.apply_event(&json!({"type": "stage", "stage": "assess"}));
        assert_eq!(
            state.stage.as_deref(),
            Some("Checking sentences 1, 2 and 3"),
            "not one's stage"
        );
        state.apply_event(&sentence(1));
        assert_eq!(state.stage.as_deref(), Some("Checking sentences 1 and 3"));
        state.apply_event(&sentence(0));
        assert_eq!(state.stage.as_deref(), Some("Checking sentence 3"));
        assert_eq!(state.sentences.len(), 2);
    }

    #[test]
    fn sizes_and_waits_read_well() {
        assert_eq!(size_text(999), "999 B");
        assert_eq!(thousands(26_259), "26,259");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(size_text(12_345), "12.3 KB");
        assert_eq!(size_text(4_800_000), "4.8 MB");
        assert_eq!(wait_text(250), "250 ms");
        assert_eq!(
            stage_text("retrieve", None, None, Some(1)),
            "Retrieving evidence (1 item found)"
        );
    }
}
