//! The conformance runner: replays scenario files (format `conformance scenarios v1`, see
//! `shared/conformance/`) through the real machines and compares the normative fields.
//!
//! A scenario's scripted model answers every request; the host tools of the suite (`lookup`,
//! `lookup_seq`, `finish`, `explode`, `lookup_evidence`) are implemented here as a host would
//! implement them, and everything else (the loop, validation, budgets, endings) is the core's.

pub mod answers;
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
pub mod http;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use verity_core::indexed::IndexedCorpus;
use verity_core::retrieve::Corpus;
use verity_core::{
    AssistantMessage, Job, JobFailed, ScriptedModel, ToolCall, ToolOutput, Tools, drive,
};

/// A scenario file.
#[derive(Debug, Deserialize)]
pub struct Suite {
    /// Named schemas for `config.schema`.
    #[serde(default)]
    pub schemas: Map<String, Value>,
    /// Named extra tools for `config.extraTools`.
    #[serde(default)]
    pub tools: Map<String, Value>,
    /// The claim pipeline's prompts and schemas.
    #[serde(default, rename = "claimPipeline")]
    pub claim_pipeline: Value,
    /// The scenarios.
    pub scenarios: Vec<Scenario>,
}

/// One scenario.
#[derive(Debug, Deserialize)]
pub struct Scenario {
    /// Its unique name.
    pub name: String,
    /// `step` or `claim`.
    pub kind: String,
    /// The configuration of the machine under test.
    #[serde(default)]
    pub config: Map<String, Value>,
    /// The scripted model's responses.
    #[serde(default)]
    pub script: Vec<Value>,
    /// The outcome this project must produce.
    pub expected: Expected,
}

/// The normative part of an expected outcome.
#[derive(Debug, Deserialize)]
pub struct Expected {
    /// `return` or `throw`.
    pub outcome: String,
    /// The returned value, for `return`.
    #[serde(default)]
    pub value: Option<Value>,
    /// The error, for `throw`.
    #[serde(default)]
    pub error: Option<ExpectedError>,
    /// Requests that reached the model.
    pub requests: u32,
}

/// The normative part of an expected error.
#[derive(Debug, Deserialize)]
pub struct ExpectedError {
    /// The failure kind.
    pub kind: String,
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// A value.
    Return {
        /// The value, as JSON.
        value: Value,
        /// Requests that reached the model.
        requests: u32,
    },
    /// A typed failure.
    Throw {
        /// The failure kind.
        kind: String,
        /// The message (informative).
        message: String,
        /// Requests that reached the model.
        requests: u32,
    },
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Observed::Return { value, requests } => {
                write!(f, "return {value} after {requests} request(s)")
            }
            Observed::Throw { kind, message, requests } => {
                write!(f, "throw {kind} ({message:?}) after {requests} request(s)")
            }
        }
    }
}

impl Suite {
    /// Parses a scenario file.
    ///
    /// # Errors
    /// When the text is not a scenario file.
    pub fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|error| format!("not a scenario file: {error}"))
    }

    /// Runs one scenario through the real machines: the scenario becomes a [`verity_core::JobConfig`]
    /// (JSON), the job is driven by the scripted model and the suite's host tools.
    ///
    /// # Errors
    /// When the scenario cannot be run (unknown kind, schema or tool; malformed script).
    pub fn run(&self, scenario: &Scenario) -> Result<Observed, String> {
        self.run_with(scenario, run_job)
    }

    /// Runs one scenario through another host of the job protocol (the WebAssembly component,
    /// in `tests/tests/component.rs`): `host` gets the job configuration (JSON text), the
    /// scripted model to answer every model call and the suite's tools for every tool batch
    /// (a claim job's corpus is [`SuiteTools::corpus`]), and reports how the job ended.
    ///
    /// # Errors
    /// When the scenario cannot be run (unknown kind, schema or tool; malformed script).
    pub fn run_with(
        &self,
        scenario: &Scenario,
        host: impl FnOnce(&str, &ScriptedModel, &SuiteTools) -> Outcome,
    ) -> Result<Observed, String> {
        let script = scenario
            .script
            .iter()
            .enumerate()
            .map(|(i, response)| {
                AssistantMessage::deserialize(response)
                    .map_err(|error| format!("script[{i}] is not a response: {error}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let model = ScriptedModel::new(script);
        let tools = SuiteTools::from_config(&scenario.config)?;
        let config = self.job_config(scenario, &tools)?;
        let outcome = host(&config.to_string(), &model, &tools);
        let requests = model.requests();
        Ok(match outcome {
            Ok(value) if scenario.kind == "claim" => Observed::Return {
                // The normative part of a report.
                value: json!({
                    "claim": value["claim"],
                    "assessment": value["assessment"],
                    "route": value["route"],
                    "summary": value["summary"],
                }),
                requests,
            },
            Ok(value) if scenario.kind == "answer" => {
                Observed::Return { value: normative_answer(&value), requests }
            }
            Ok(value) => Observed::Return { value, requests },
            Err(Failure { kind, message }) => Observed::Throw { kind, message, requests },
        })
    }

    /// The job configuration of a scenario: named schemas and tools resolved, every other
    /// field passed as it is (a bad value is the job's to refuse).
    ///
    /// # Errors
    /// An unknown kind, schema or tool.
    pub fn job_config(&self, scenario: &Scenario, tools: &SuiteTools) -> Result<Value, String> {
        let config = &scenario.config;
        let mut job = Map::new();
        match scenario.kind.as_str() {
            "step" => {
                let name = config
                    .get("schema")
                    .and_then(Value::as_str)
                    .ok_or("config.schema is missing")?;
                let schema = self.schemas.get(name).ok_or(format!("unknown schema {name:?}"))?;
                job.insert("kind".into(), json!("step"));
                job.insert(
                    "system".into(),
                    config.get("system").cloned().unwrap_or(json!(DEFAULT_SYSTEM)),
                );
                job.insert(
                    "prompt".into(),
                    config.get("input").cloned().unwrap_or(json!(DEFAULT_INPUT)),
                );
                job.insert("schema".into(), schema.clone());
                for bound in ["maxAttempts", "maxTurns"] {
                    if let Some(value) = config.get(bound) {
                        job.insert(bound.into(), value.clone());
                    }
                }
                let mut extra = Vec::new();
                for name in config.get("extraTools").and_then(Value::as_array).into_iter().flatten()
                {
                    let name = name.as_str().ok_or("extraTools holds a non-string")?;
                    extra.push(self.tool(name)?);
                }
                if !extra.is_empty() {
                    job.insert("tools".into(), Value::Array(extra));
                }
            }
            "claim" => {
                let claim =
                    config.get("claim").and_then(Value::as_str).ok_or("config.claim is missing")?;
                job.insert("kind".into(), json!("claim"));
                job.insert("claim".into(), json!(claim));
                job.insert("corpus".into(), json!(tools.corpus.id()));
                // The suite's contract: the design's keyword heuristic, for evidence and lookups.
                job.insert("retriever".into(), json!("keyword"));
                if tools.lookup_script.is_some() {
                    // A scripted lookup is the host's answer, not the corpus's.
                    job.insert("lookup".into(), json!("host"));
                }
            }
            "answer" => {
                let answer = config
                    .get("answer")
                    .and_then(Value::as_str)
                    .ok_or("config.answer is missing")?;
                job.insert("kind".into(), json!("answer"));
                job.insert("answer".into(), json!(answer));
                job.insert("corpus".into(), json!(tools.corpus.id()));
                job.insert("retriever".into(), json!("keyword"));
                for option in ["marks", "decompose"] {
                    if let Some(value) = config.get(option) {
                        job.insert(option.into(), value.clone());
                    }
                }
            }
            other => return Err(format!("unknown scenario kind {other:?}")),
        }
        Ok(Value::Object(job))
    }

    /// A named tool of the suite as a job's tool configuration.
    fn tool(&self, name: &str) -> Result<Value, String> {
        let definition = self.tools.get(name).ok_or(format!("unknown extra tool {name:?}"))?;
        Ok(json!({
            "name": name,
            "description": definition.get("behaviour").cloned().unwrap_or(json!("")),
            "parameters": definition.get("parameters").cloned().unwrap_or(json!({"type": "object"})),
            "sequential": name == "lookup_seq",
        }))
    }
}

/// The normative part of an answer's report: whether it holds, and per sentence its text,
/// status, the ids of the passages cited, its marks and a failed check's kind; with
/// `decompose`, its atomic claims (text and status) and why it was checked whole, if it was.
fn normative_answer(value: &Value) -> Value {
    let sentences: Vec<Value> = value["sentences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|sentence| {
            let cited: Vec<Value> = sentence["citations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|citation| citation["passage"].clone())
                .collect();
            let marks: Vec<Value> = sentence["marks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|mark| json!({"label": mark["label"], "passage": mark["passage"], "holds": mark["holds"]}))
                .collect();
            let mut normative = json!({"text": sentence["text"], "status": sentence["status"],
                "citations": cited, "marks": marks});
            if let Some(kind) = sentence["failure"]["kind"].as_str() {
                normative["failure"] = json!(kind);
            }
            if let Some(claims) = sentence["claims"].as_array().filter(|c| !c.is_empty()) {
                normative["claims"] = claims
                    .iter()
                    .map(|claim| json!({"text": claim["text"], "status": claim["status"]}))
                    .collect();
            }
            if let Some(kind) = sentence["decomposed"]["whole"]["kind"].as_str() {
                normative["whole"] = json!(kind);
            }
            normative
        })
        .collect();
    json!({"faithful": value["faithful"], "sentences": sentences})
}

/// The suite's system prompt and task when a step scenario gives none.
const DEFAULT_SYSTEM: &str = "You answer by calling submit.";
const DEFAULT_INPUT: &str = "What is the answer?";

/// How a job ended, as its host reports it: the value (JSON) or the failure.
pub type Outcome = Result<Value, Failure>;

/// The failure of a job, as any host reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The kind's wire name (`turn-limit`, ...).
    pub kind: String,
    /// The message (informative).
    pub message: String,
}

/// Builds a job from its configuration, as every host does, and drives it with `model` and
/// the suite's tools.
fn run_job(config: &str, model: &impl verity_core::Transport, tools: &SuiteTools) -> Outcome {
    let job = Job::from_json(config, &[Arc::clone(tools.corpus())]).map_err(failure)?;
    pollster::block_on(drive(job, model, tools)).map_err(failure)
}

fn failure(failed: JobFailed) -> Failure {
    Failure { kind: failed.kind().as_str().to_owned(), message: failed.message().to_owned() }
}

/// Compares an observed outcome with the normative fields of the expected one.
///
/// # Errors
/// A description of the first difference.
pub fn compare(expected: &Expected, observed: &Observed) -> Result<(), String> {
    let matches = match (expected.outcome.as_str(), observed) {
        ("return", Observed::Return { value, requests }) => {
            expected.value.as_ref().is_none_or(|want| json_eq(want, value))
                && *requests == expected.requests
        }
        ("throw", Observed::Throw { kind, requests, .. }) => {
            expected.error.as_ref().is_none_or(|want| want.kind == *kind)
                && *requests == expected.requests
        }
        _ => false,
    };
    if matches {
        return Ok(());
    }
    let want = match expected.outcome.as_str() {
        "return" => format!(
            "return {} after {} request(s)",
            expected.value.as_ref().map_or("(any value)".to_owned(), Value::to_string),
            expected.requests
        ),
        other => format!(
            "{other} {} after {} request(s)",
            expected.error.as_ref().map_or("(any kind)", |e| e.kind.as_str()),
            expected.requests
        ),
    };
    Err(format!("expected {want}, got {observed}"))
}

/// Deep JSON equality where key order is irrelevant and numbers compare by value (`1 == 1.0`).
#[must_use]
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// The suite's host tools.
#[derive(Debug)]
pub struct SuiteTools {
    /// `config.corpus` in key order.
    corpus: Arc<IndexedCorpus>,
    /// `config.lookupScript`, consumed in call order.
    lookup_script: Option<RefCell<VecDeque<Value>>>,
}

impl SuiteTools {
    /// The scenario's corpus (`config.corpus`, in key order), which a claim job's
    /// configuration names by its content id.
    #[must_use]
    pub fn corpus(&self) -> &Arc<IndexedCorpus> {
        &self.corpus
    }

    fn from_config(config: &Map<String, Value>) -> Result<Self, String> {
        let mut pairs = Vec::new();
        if let Some(items) = config.get("corpus") {
            let items = items.as_object().ok_or("config.corpus is not an object")?;
            for (id, text) in items {
                let text = text.as_str().ok_or(format!("corpus item {id:?} is not a string"))?;
                pairs.push((id.clone(), text.to_owned()));
            }
        }
        let corpus = IndexedCorpus::new(Corpus::from_pairs(pairs).map_err(|e| e.to_string())?);
        let lookup_script = match config.get("lookupScript") {
            None | Some(Value::Null) => None,
            Some(Value::Array(entries)) => Some(RefCell::new(entries.iter().cloned().collect())),
            Some(_) => return Err("config.lookupScript is not an array".to_owned()),
        };
        Ok(Self { corpus, lookup_script })
    }

    /// `config.lookupScript`'s next entry. Without a script the job answers lookups from its
    /// corpus and never asks the host.
    fn lookup_evidence(&self) -> ToolOutput {
        let Some(script) = &self.lookup_script else {
            return ToolOutput::error("the host was asked a lookup the job should answer itself");
        };
        let Some(entry) = script.borrow_mut().pop_front() else {
            return ToolOutput::error("lookup script exhausted");
        };
        ToolOutput {
            content: entry.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
            details: entry.get("details").cloned().unwrap_or(Value::Null),
            is_error: entry.get("isError").and_then(Value::as_bool).unwrap_or(false),
            terminate: false,
        }
    }
}

impl Tools for SuiteTools {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        let query = call.arguments.get("query").and_then(Value::as_str).unwrap_or_default();
        match call.name.as_str() {
            "lookup" | "lookup_seq" => {
                ToolOutput::ok(format!("results for \"{query}\": none"), json!({ "query": query }))
            }
            "finish" => ToolOutput::ok("finished", json!({})).terminating(),
            "explode" => ToolOutput::error("explode failed"),
            "lookup_evidence" => self.lookup_evidence(),
            other => ToolOutput::error(format!("the suite has no tool {other:?}")),
        }
    }
}

/// The result of one scenario, as the runner prints it.
#[derive(Debug)]
pub struct Verdict {
    /// The scenario's name.
    pub name: String,
    /// `Ok` for a pass, else why it failed (or could not run).
    pub result: Result<(), String>,
}

impl Suite {
    /// Runs every scenario (of `kind`, if given) and compares each with its expectation.
    #[must_use]
    pub fn verdicts(&self, kind: Option<&str>) -> Vec<Verdict> {
        self.scenarios
            .iter()
            .filter(|scenario| kind.is_none_or(|kind| scenario.kind == kind))
            .map(|scenario| Verdict {
                name: scenario.name.clone(),
                result: self
                    .run(scenario)
                    .map_err(|why| format!("cannot run: {why}"))
                    .and_then(|observed| compare(&scenario.expected, &observed)),
            })
            .collect()
    }
}

/// The scripted model seen through the OpenAI codec in constrained-output mode
/// ([`OutputMode::JsonSchema`](verity_core::provider::openai::OutputMode)): each request is
/// encoded as a llama.cpp server would get it (no tools, one `response_format` schema), each
/// scripted answer is written as such a server would send it (the call as one JSON object in
/// the content) and decoded by the codec. A scripted answer that constrained output cannot
/// express (several calls, or text beside a call) makes the scenario not apply.
#[derive(Debug)]
pub struct ConstrainedWire<'a> {
    model: &'a ScriptedModel,
    config: verity_core::provider::OpenAiConfig,
    inexpressible: std::cell::Cell<bool>,
    unconstrained: std::cell::Cell<bool>,
}

impl<'a> ConstrainedWire<'a> {
    /// Wraps `model`.
    #[must_use]
    pub fn new(model: &'a ScriptedModel) -> Self {
        let mut config = verity_core::provider::OpenAiConfig::llama_server("scripted");
        config.output = verity_core::provider::openai::OutputMode::JsonSchema;
        Self {
            model,
            config,
            inexpressible: std::cell::Cell::new(false),
            unconstrained: std::cell::Cell::new(false),
        }
    }

    fn body(&self, answer: &AssistantMessage) -> Option<Value> {
        use verity_core::ContentBlock;
        let mut reasoning = String::new();
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in &answer.content {
            match block {
                ContentBlock::Text { text: piece } => text.push_str(piece),
                ContentBlock::Thinking { thinking, .. } => reasoning.push_str(thinking),
                ContentBlock::ToolCall(call) => calls.push(call),
                _ => return None,
            }
        }
        let content = match calls.as_slice() {
            [] => text,
            [call] if text.trim().is_empty() => {
                json!({"tool": call.name, "arguments": call.arguments}).to_string()
            }
            _ => return None,
        };
        let finish = match answer.stop_reason() {
            verity_core::StopReason::Length => "length",
            _ => "stop",
        };
        let mut message = json!({"role": "assistant", "content": content});
        if !reasoning.is_empty() {
            message["reasoning_content"] = json!(reasoning);
        }
        Some(json!({
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": answer.usage.input, "completion_tokens": answer.usage.output},
        }))
    }
}

impl verity_core::Transport for ConstrainedWire<'_> {
    async fn complete(&self, request: verity_core::ModelRequest<'_>) -> AssistantMessage {
        let http = verity_core::provider::openai::encode(&request, &self.config);
        let sent: Value = serde_json::from_str(&http.body).unwrap_or_default();
        if !request.tools.is_empty()
            && (sent.get("response_format").is_none() || sent.get("tools").is_some())
        {
            self.unconstrained.set(true);
        }
        let answer = self.model.answer(request);
        // A failed answer stands for a transport failure, which the output mode does not change.
        if answer.stop_reason().is_failure() {
            return answer;
        }
        let Some(body) = self.body(&answer) else {
            self.inexpressible.set(true);
            return answer;
        };
        let response = verity_core::HttpResponse::new(200, body.to_string());
        verity_core::provider::openai::decode(&response, &self.config)
    }
}

impl Suite {
    /// Runs one scenario with constrained output (see [`ConstrainedWire`]): `None` when the
    /// scenario does not apply (a scripted answer constrained output cannot express).
    ///
    /// # Errors
    /// When the scenario cannot be run, or a turn with tools was sent unconstrained.
    pub fn run_constrained(&self, scenario: &Scenario) -> Result<Option<Observed>, String> {
        let mut inexpressible = false;
        let mut unconstrained = false;
        let observed = self.run_with(scenario, |config, model, tools| {
            let wire = ConstrainedWire::new(model);
            let outcome = run_job(config, &wire, tools);
            inexpressible = wire.inexpressible.get();
            unconstrained = wire.unconstrained.get();
            outcome
        })?;
        if unconstrained {
            return Err("a turn with tools was sent without response_format".into());
        }
        Ok((!inexpressible).then_some(observed))
    }

    /// [`Suite::verdicts`] with constrained output: the scenarios that apply.
    #[must_use]
    pub fn constrained_verdicts(&self) -> Vec<Verdict> {
        self.scenarios
            .iter()
            .filter_map(|scenario| {
                let result = match self.run_constrained(scenario) {
                    Ok(None) => return None,
                    Ok(Some(observed)) => compare(&scenario.expected, &observed),
                    Err(why) => Err(format!("cannot run: {why}")),
                };
                Some(Verdict { name: scenario.name.clone(), result })
            })
            .collect()
    }
}
