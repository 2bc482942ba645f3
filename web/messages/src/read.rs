//! Reading the worker's messages and the core's JSON from a parsed [`Value`], without serde's
//! derived deserializers.
//!
//! The page's wasm is the one size that matters most (it paints the page), and serde's derived
//! `Deserialize` for the internally tagged [`FromWorker`] and [`EventView`] was the largest code
//! in it: every variant's visitor, instantiated for a buffered `Content`, about 38 KB gzip of the
//! UI's wasm (measured by building the page without them). The page parses the JSON once into a
//! [`Value`] (serde_json's own code, which it needs anyway) and reads it with [`FromJson`], a few
//! small functions over `Value`. The derived impls stay: the worker and JavaScript pages speak
//! the same JSON, and the tests check that both readers agree on every message.
//!
//! The rules are serde's, as the derives declare them: unknown fields are ignored, a missing
//! `Option` is `None`, `#[serde(default)]` fields may be missing, the aliases are accepted, an
//! unknown `"type"` is an error for [`FromWorker`] and [`EventView::Other`] for events.

use serde_json::{Map, Value};

use crate::{
    AnswerView, AssessmentView, BadLine, CheckKind, CheckRequest, CheckResult, CitationView,
    ClaimView, CorpusStorage, CorpusSummary, DecomposedView, EventView, FailureView, FromWorker,
    Item, MarkView, Outcome, ReportView, SentenceFailureView, SentenceView, SpanView, SpentView,
    StepOutcome, UsageView,
};

/// A type read from its JSON [`Value`]; the error names the field at fault.
pub trait FromJson: Sized {
    /// Reads one.
    fn from_json(value: &Value) -> Result<Self, String>;
}

/// The fields of a JSON object, read by name; errors say which field of what.
struct Fields<'a> {
    what: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn of(what: &'a str, value: &'a Value) -> Result<Self, String> {
        match value {
            Value::Object(map) => Ok(Self { what, map }),
            other => Err(format!("{what}: expected an object, found {}", kind(other))),
        }
    }

    /// The field, `None` when missing or `null` (serde reads `null` as a missing `Option`).
    fn get(&self, names: &[&str]) -> Option<&'a Value> {
        names.iter().find_map(|name| self.map.get(*name)).filter(|value| !value.is_null())
    }

    fn required(&self, names: &[&str]) -> Result<&'a Value, String> {
        names
            .iter()
            .find_map(|name| self.map.get(*name))
            .ok_or_else(|| format!("{}: missing field `{}`", self.what, names[0]))
    }

    fn wrong(&self, name: &str, expected: &str, found: &Value) -> String {
        format!("{}: field `{name}`: expected {expected}, found {}", self.what, kind(found))
    }

    fn string(&self, name: &str) -> Result<String, String> {
        let value = self.required(&[name])?;
        value.as_str().map(str::to_owned).ok_or_else(|| self.wrong(name, "a string", value))
    }

    fn opt_string(&self, name: &str) -> Result<Option<String>, String> {
        self.get(&[name])
            .map(|value| {
                value.as_str().map(str::to_owned).ok_or_else(|| self.wrong(name, "a string", value))
            })
            .transpose()
    }

    fn boolean(&self, name: &str) -> Result<bool, String> {
        let value = self.required(&[name])?;
        value.as_bool().ok_or_else(|| self.wrong(name, "a boolean", value))
    }

    fn unsigned(&self, names: &[&str], max: u64) -> Result<u64, String> {
        let value = self.required(names)?;
        self.number(names[0], value, max)
    }

    fn opt_unsigned(&self, names: &[&str], max: u64) -> Result<Option<u64>, String> {
        self.get(names).map(|value| self.number(names[0], value, max)).transpose()
    }

    fn number(&self, name: &str, value: &Value, max: u64) -> Result<u64, String> {
        value
            .as_u64()
            .filter(|n| *n <= max)
            .ok_or_else(|| self.wrong(name, "a non-negative integer in range", value))
    }

    fn float(&self, name: &str) -> Result<f64, String> {
        let value = self.required(&[name])?;
        value.as_f64().ok_or_else(|| self.wrong(name, "a number", value))
    }

    fn value(&self, name: &str) -> Result<Value, String> {
        self.required(&[name]).cloned()
    }

    fn read<T: FromJson>(&self, name: &str) -> Result<T, String> {
        T::from_json(self.required(&[name])?).map_err(|error| format!("{}.{error}", self.what))
    }

    /// A field with `#[serde(default)]`: missing is the default.
    fn read_or_default<T: FromJson + Default>(&self, name: &str) -> Result<T, String> {
        match self.map.get(name) {
            None => Ok(T::default()),
            Some(value) => T::from_json(value).map_err(|error| format!("{}.{error}", self.what)),
        }
    }

    fn list<T: FromJson>(&self, name: &str) -> Result<Vec<T>, String> {
        list(self, name, self.required(&[name])?)
    }

    fn list_or_empty<T: FromJson>(&self, name: &str) -> Result<Vec<T>, String> {
        match self.map.get(name) {
            None => Ok(Vec::new()),
            Some(value) => list(self, name, value),
        }
    }

    fn strings(&self, name: &str) -> Result<Vec<String>, String> {
        let value = self.required(&[name])?;
        let items = value.as_array().ok_or_else(|| self.wrong(name, "an array", value))?;
        items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).ok_or_else(|| self.wrong(name, "strings", item))
            })
            .collect()
    }
}

fn list<T: FromJson>(fields: &Fields<'_>, name: &str, value: &Value) -> Result<Vec<T>, String> {
    let items = value.as_array().ok_or_else(|| fields.wrong(name, "an array", value))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            T::from_json(item).map_err(|error| format!("{}.{name}[{i}]: {error}", fields.what))
        })
        .collect()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The tag of an internally tagged value.
fn tag<'a>(fields: &Fields<'a>, name: &str) -> Result<&'a str, String> {
    let value = fields.required(&[name])?;
    value.as_str().ok_or_else(|| fields.wrong(name, "a string", value))
}

const U32: u64 = u32::MAX as u64;
const USIZE: u64 = usize::MAX as u64;

impl FromJson for FromWorker {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("message", value)?;
        Ok(match tag(&f, "type")? {
            "ready" => FromWorker::Ready {
                corpus: f.read("corpus")?,
                results: f.list("results")?,
                resumed: f.list("resumed")?,
                queued: f.list_or_empty("queued")?,
            },
            "corpus" => FromWorker::Corpus { corpus: f.read("corpus")? },
            "corpusStored" => FromWorker::CorpusStored {
                id: f.opt_string("id")?,
                storage: storage(&f, "storage")?
                    .ok_or_else(|| format!("{}: missing field `storage`", f.what))?,
            },
            "fileRejected" => FromWorker::FileRejected {
                file: f.string("file")?,
                line: usize_opt(&f, "line")?,
                message: f.string("message")?,
            },
            "items" => FromWorker::Items {
                query: f.string("query")?,
                offset: f.unsigned(&["offset"], USIZE)? as usize,
                total: f.unsigned(&["total"], USIZE)? as usize,
                items: f.list("items")?,
            },
            "queued" => FromWorker::Queued { check: f.read("check")? },
            "progress" => FromWorker::Progress { id: f.string("id")?, event: f.value("event")? },
            "finished" => FromWorker::Finished { result: f.read("result")? },
            "demo" => FromWorker::Demo { claims: f.strings("claims")? },
            "namedCorpus" => {
                FromWorker::NamedCorpus { name: f.string("name")?, corpus: f.read("corpus")? }
            }
            "namedCorpusRejected" => FromWorker::NamedCorpusRejected {
                name: f.string("name")?,
                file: f.string("file")?,
                line: usize_opt(&f, "line")?,
                message: f.string("message")?,
            },
            "toolCall" => FromWorker::ToolCall {
                id: f.string("id")?,
                call: f.string("call")?,
                tool: f.string("tool")?,
                arguments: f.value("arguments")?,
            },
            "stepFinished" => {
                FromWorker::StepFinished { id: f.string("id")?, outcome: f.read("outcome")? }
            }
            "markdown" => FromWorker::Markdown { text: f.string("text")? },
            "csv" => FromWorker::Csv { text: f.string("text")? },
            "claims" => FromWorker::Claims {
                file: f.string("file")?,
                claims: f.strings("claims")?,
                bad: f.list("bad")?,
                message: f.string("message")?,
            },
            "error" => FromWorker::Error { message: f.string("message")? },
            "resultsCleared" => FromWorker::ResultsCleared,
            "notSaved" => {
                FromWorker::NotSaved { id: f.opt_string("id")?, message: f.string("message")? }
            }
            "saved" => FromWorker::Saved { id: f.string("id")? },
            "stored" => FromWorker::Stored { ids: f.strings("ids")? },
            other => return Err(format!("message: unknown type `{other}`")),
        })
    }
}

fn usize_opt(f: &Fields<'_>, name: &str) -> Result<Option<usize>, String> {
    Ok(f.opt_unsigned(&[name], USIZE)?.map(|n| n as usize))
}

impl FromJson for CorpusSummary {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("corpus", value)?;
        Ok(CorpusSummary {
            id: f.opt_string("id")?,
            items: f.unsigned(&["items"], USIZE)? as usize,
            bytes: f.unsigned(&["bytes"], USIZE)? as usize,
            indexed: f.boolean("indexed")?,
            index_ms: f
                .get(&["indexMs"])
                .map(|ms| ms.as_f64().ok_or_else(|| f.wrong("indexMs", "a number", ms)))
                .transpose()?,
            stored: storage(&f, "stored")?,
        })
    }
}

/// A [`CorpusStorage`] field, `None` when missing.
fn storage(f: &Fields<'_>, name: &str) -> Result<Option<CorpusStorage>, String> {
    let Some(value) = f.get(&[name]) else { return Ok(None) };
    Ok(Some(match value.as_str() {
        Some("saved") => CorpusStorage::Saved,
        Some("saving") => CorpusStorage::Saving,
        Some("notSaved") => CorpusStorage::NotSaved,
        _ => return Err(f.wrong(name, "\"saved\", \"saving\" or \"notSaved\"", value)),
    }))
}

impl FromJson for BadLine {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("bad line", value)?;
        Ok(BadLine { line: f.unsigned(&["line"], USIZE)? as usize, message: f.string("message")? })
    }
}

impl FromJson for Item {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("item", value)?;
        Ok(Item { id: f.string("id")?, text: f.string("text")? })
    }
}

impl FromJson for CheckRequest {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("check", value)?;
        let kind = match f.opt_string("kind")?.as_deref() {
            None | Some("claim") => CheckKind::Claim,
            Some("answer") => CheckKind::Answer,
            Some(other) => return Err(format!("check: unknown kind `{other}`")),
        };
        let mut marks = std::collections::BTreeMap::new();
        if let Some(given) = f.get(&["marks"]) {
            let given = given.as_object().ok_or_else(|| f.wrong("marks", "an object", given))?;
            for (mark, id) in given {
                let id = id.as_str().ok_or_else(|| f.wrong("marks", "strings", id))?;
                marks.insert(mark.clone(), id.to_owned());
            }
        }
        let decompose = match f.get(&["decompose"]) {
            None => false,
            Some(_) => f.boolean("decompose")?,
        };
        Ok(CheckRequest { id: f.string("id")?, claim: f.string("claim")?, kind, marks, decompose })
    }
}

impl FromJson for SpanView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("span", value)?;
        let at = |name: &str| f.unsigned(&[name], USIZE).map(|n| n as usize);
        Ok(SpanView {
            start: at("start")?,
            end: at("end")?,
            start_utf16: at("startUtf16")?,
            end_utf16: at("endUtf16")?,
        })
    }
}

impl FromJson for CitationView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("citation", value)?;
        Ok(CitationView {
            passage: f.opt_string("passage")?,
            quote: f.string("quote")?,
            span: f.read("span")?,
            text: f.string("text")?,
        })
    }
}

impl FromJson for MarkView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("mark", value)?;
        Ok(MarkView {
            label: f.string("label")?,
            span: f.read("span")?,
            passage: f.opt_string("passage")?,
            holds: f.string("holds")?,
        })
    }
}

impl FromJson for SentenceFailureView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("failure", value)?;
        Ok(SentenceFailureView { kind: f.string("kind")?, message: f.string("message")? })
    }
}

impl FromJson for ClaimView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("claim", value)?;
        Ok(ClaimView {
            text: f.string("text")?,
            span: f.read("span")?,
            status: f.string("status")?,
            confidence: match f.get(&["confidence"]) {
                None => None,
                Some(_) => Some(f.float("confidence")?),
            },
            citations: f.list_or_empty("citations")?,
            failure: f.get(&["failure"]).map(SentenceFailureView::from_json).transpose()?,
        })
    }
}

impl FromJson for DecomposedView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("decomposed", value)?;
        Ok(DecomposedView {
            ungrounded: f.opt_unsigned(&["ungrounded"], USIZE)?.unwrap_or(0) as usize,
            whole: f.get(&["whole"]).map(SentenceFailureView::from_json).transpose()?,
        })
    }
}

impl FromJson for SentenceView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("sentence", value)?;
        let failure = f.get(&["failure"]).map(SentenceFailureView::from_json).transpose()?;
        Ok(SentenceView {
            index: f.unsigned(&["index"], USIZE)? as usize,
            text: f.string("text")?,
            span: f.read("span")?,
            status: f.string("status")?,
            confidence: match f.get(&["confidence"]) {
                None => None,
                Some(_) => Some(f.float("confidence")?),
            },
            citations: f.list_or_empty("citations")?,
            marks: f.list_or_empty("marks")?,
            failure,
            claims: f.list_or_empty("claims")?,
            decomposed: f.get(&["decomposed"]).map(DecomposedView::from_json).transpose()?,
        })
    }
}

impl FromJson for AnswerView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("report", value)?;
        Ok(AnswerView {
            answer: f.string("answer")?,
            sentences: f.list("sentences")?,
            supported_share: f.float("supportedShare")?,
            faithful: match f.get(&["faithful"]) {
                None => None,
                Some(_) => Some(f.boolean("faithful")?),
            },
            requests: f.unsigned(&["requests"], U32)? as u32,
            usage: f.read("usage")?,
        })
    }
}

impl FromJson for CheckResult {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("result", value)?;
        Ok(CheckResult {
            id: f.string("id")?,
            claim: f.string("claim")?,
            outcome: f.read("outcome")?,
            cited: f.list_or_empty("cited")?,
            provenance: f.get(&["provenance"]).cloned(),
        })
    }
}

impl FromJson for Outcome {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("outcome", value)?;
        match tag(&f, "status")? {
            "report" => Ok(Outcome::Report { report: f.value("report")? }),
            "failed" => Ok(Outcome::Failed { failure: f.value("failure")? }),
            other => Err(format!("outcome: unknown status `{other}`")),
        }
    }
}

impl FromJson for StepOutcome {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("outcome", value)?;
        match tag(&f, "status")? {
            "value" => Ok(StepOutcome::Value { value: f.value("value")? }),
            "failed" => Ok(StepOutcome::Failed { failure: f.value("failure")? }),
            other => Err(format!("outcome: unknown status `{other}`")),
        }
    }
}

impl FromJson for UsageView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("usage", value)?;
        let or_zero = |name: &str| -> Result<u64, String> {
            Ok(f.map.get(name).map(|n| f.number(name, n, u64::MAX)).transpose()?.unwrap_or(0))
        };
        Ok(UsageView {
            input: or_zero("input")?,
            output: or_zero("output")?,
            cache_read: or_zero("cacheRead")?,
            cost: match f.map.get("cost") {
                None => 0.0,
                Some(cost) => cost.as_f64().ok_or_else(|| f.wrong("cost", "a number", cost))?,
            },
        })
    }
}

impl FromJson for SpentView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("spent", value)?;
        let or_zero = |name: &str| -> Result<u32, String> {
            Ok(f.map.get(name).map(|n| f.number(name, n, U32)).transpose()?.unwrap_or(0) as u32)
        };
        Ok(SpentView {
            turns: or_zero("turns")?,
            requests: or_zero("requests")?,
            retries: or_zero("retries")?,
            usage: f.read_or_default("usage")?,
        })
    }
}

impl FromJson for AssessmentView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("assessment", value)?;
        Ok(AssessmentView {
            verdict: f.string("verdict")?,
            confidence: f.float("confidence")?,
            citations: f.strings("citations")?,
            rationale: f.opt_string("rationale")?,
        })
    }
}

impl FromJson for ReportView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("report", value)?;
        Ok(ReportView {
            claim: f.string("claim")?,
            assessment: f.read("assessment")?,
            route: f.string("route")?,
            summary: f.string("summary")?,
            requests: f.unsigned(&["requests"], U32)? as u32,
            usage: f.read("usage")?,
        })
    }
}

impl FromJson for FailureView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("failure", value)?;
        Ok(FailureView {
            kind: f.string("kind")?,
            message: f.string("message")?,
            spent: f.read_or_default("spent")?,
            advice: f.opt_string("advice")?.unwrap_or_default(),
        })
    }
}

impl FromJson for EventView {
    fn from_json(value: &Value) -> Result<Self, String> {
        let f = Fields::of("event", value)?;
        Ok(match tag(&f, "type")? {
            "stage" => EventView::Stage {
                stage: f.string("stage")?,
                turn: f.opt_unsigned(&["turn"], U32)?.map(|n| n as u32),
                of: f.opt_unsigned(&["of"], U32)?.map(|n| n as u32),
                evidence: usize_opt(&f, "evidence")?,
            },
            "modelCall" => EventView::ModelCall {
                call: f.unsigned(&["call"], u64::MAX)?,
                retry: f.unsigned(&["retry"], U32)? as u32,
                delay_ms: f.unsigned(&["delayMs", "delay_ms"], u64::MAX)?,
            },
            "modelAnswered" => EventView::ModelAnswered {
                call: f.unsigned(&["call"], u64::MAX)?,
                stop_reason: {
                    let value = f.required(&["stopReason", "stop_reason"])?;
                    value
                        .as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| f.wrong("stopReason", "a string", value))?
                },
                usage: f.read("usage")?,
                error: f.opt_string("error")?,
            },
            "toolCall" => EventView::ToolCall { tool: f.string("tool")?, host: f.boolean("host")? },
            "toolSettled" => EventView::ToolSettled {
                tool: f.string("tool")?,
                is_error: {
                    let value = f.required(&["isError", "is_error"])?;
                    value.as_bool().ok_or_else(|| f.wrong("isError", "a boolean", value))?
                },
            },
            "retry" => EventView::Retry {
                attempt: f.unsigned(&["attempt"], U32)? as u32,
                delay_ms: f.unsigned(&["delayMs", "delay_ms"], u64::MAX)?,
                message: f.string("message")?,
            },
            "delta" => EventView::Delta {
                call: f.unsigned(&["call"], u64::MAX)?,
                delta: f.value("delta")?,
            },
            "sentenceStarted" => {
                EventView::SentenceStarted { index: f.unsigned(&["index"], USIZE)? as usize }
            }
            "sentenceChecked" => {
                EventView::SentenceChecked { sentence: Box::new(f.read("sentence")?) }
            }
            _ => EventView::Other,
        })
    }
}
