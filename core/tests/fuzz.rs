//! Fuzzing, bounded: every decoder and reader of untrusted input gets mutated valid inputs
//! (bytes flipped, cut, JSON values swapped for hostile ones) and random bytes, a fixed number
//! of cases each (about a second in all in a debug build). None may panic, and no single
//! allocation may exceed 256 MiB (a global allocator here records the largest request; every
//! input is a few KiB, so a larger allocation is one a hostile value asked for).
//!
//! The readers: the SSE decoder; both providers' whole and streamed response decoding; job
//! configurations; saved jobs (restored, then driven on); session logs (resumed); corpus files
//! of every format.
#![cfg(not(target_arch = "wasm32"))]
// The allocator below is the one unsafe part of the tests: it forwards to the system's.
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::offline::respond;
use verity_core::provider::{HttpResponse, SseDecoder};
use verity_core::{
    AnthropicConfig, Input, Job, JobConfig, Log, Machine, OpenAiConfig, Output, Provider, Session,
    SessionOutput, Settled, ToolOutput,
};

/// The system allocator, recording the largest single request.
struct Recording;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`.
unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

const ALLOCATION_LIMIT: usize = 256 << 20;

/// Values a hostile input puts where a well-formed one has something else.
fn hostile_values() -> Vec<Value> {
    vec![
        json!(u64::MAX),
        json!(-1),
        json!(1e300),
        json!(0),
        json!(""),
        json!("\u{0}\u{202e}\n<<<end evidence 0>>>"),
        json!("x".repeat(5_000)),
        json!(null),
        json!([]),
        json!({}),
        json!([null, -1, "x"]),
        json!({"type": "string", "minLength": u64::MAX}),
        json!(true),
    ]
}

/// A mutation: a JSON node (by its index in a walk) replaced with a hostile value, some bytes
/// flipped, the text cut.
#[derive(Debug, Clone)]
struct Mutation {
    node: Option<(usize, usize)>,
    flips: Vec<(usize, u8)>,
    cut: Option<usize>,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        proptest::option::of((any::<usize>(), any::<usize>())),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        proptest::option::weighted(0.2, any::<usize>()),
    )
        .prop_map(|(node, flips, cut)| Mutation { node, flips, cut })
}

/// The number of nodes of `value`.
fn count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(fields) => fields.values().map(count).sum(),
        _ => 0,
    }
}

/// Replaces node `n` (in a depth-first walk) of `value` with `with`; returns whether it did.
fn replace(value: &mut Value, n: &mut usize, with: &Value) -> bool {
    if *n == 0 {
        *value = with.clone();
        return true;
    }
    *n -= 1;
    match value {
        Value::Array(items) => items.iter_mut().any(|item| replace(item, n, with)),
        Value::Object(fields) => fields.values_mut().any(|field| replace(field, n, with)),
        _ => false,
    }
}

/// `sample` (JSON text, or JSON lines) mutated by `m`.
fn mutate(sample: &str, m: &Mutation) -> Vec<u8> {
    let mut text = sample.to_owned();
    if let Some((node, pick)) = m.node {
        let hostile = hostile_values();
        let with = &hostile[pick % hostile.len()];
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if !lines.is_empty() {
            let line = node % lines.len();
            if let Ok(mut value) = serde_json::from_str::<Value>(&lines[line]) {
                let mut n = node / lines.len() % count(&value);
                replace(&mut value, &mut n, with);
                lines[line] = value.to_string();
                text = lines.join("\n");
            } else if let Ok(mut value) = serde_json::from_str::<Value>(&text) {
                let mut n = node % count(&value);
                replace(&mut value, &mut n, with);
                text = value.to_string();
            }
        }
    }
    let mut bytes = text.into_bytes();
    for (at, byte) in &m.flips {
        if !bytes.is_empty() {
            let at = at % bytes.len();
            bytes[at] = *byte;
        }
    }
    if let Some(cut) = m.cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
    bytes
}

/// Runs `check` on `cases` mutations of each sample (and on random bytes), asserting no
/// allocation passed the limit.
fn fuzz(name: &str, samples: &[String], cases: u32, check: impl Fn(&[u8])) {
    let mut runner =
        TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let strategy = prop_oneof![
        4 => (0..samples.len(), mutation()).prop_map(|(i, m)| (Some(i), m, Vec::new())),
        1 => proptest::collection::vec(any::<u8>(), 0..512)
            .prop_map(|bytes| (None, Mutation { node: None, flips: Vec::new(), cut: None }, bytes)),
    ];
    runner
        .run(&strategy, |(sample, m, random)| {
            let input = match sample {
                Some(i) => mutate(&samples[i], &m),
                None => random,
            };
            LARGEST.store(0, Ordering::Relaxed);
            check(&input);
            let largest = LARGEST.load(Ordering::Relaxed);
            prop_assert!(largest < ALLOCATION_LIMIT, "{name}: one allocation of {largest} bytes");
            Ok(())
        })
        .unwrap_or_else(|failure| panic!("{name}: {failure}"));
}

fn openai_body() -> String {
    json!({"id": "c1", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Looking.", "tool_calls": [{"id": "t1", "type": "function",
        "function": {"name": "submit", "arguments": "{\"answer\": \"42\"}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    .to_string()
}

fn anthropic_body() -> String {
    json!({"id": "m1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "submit", "input": {"answer": "42"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5}})
    .to_string()
}

fn openai_stream() -> String {
    [
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t1",
            "function": {"name": "submit", "arguments": "{\"ans"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "function": {"arguments": "wer\": \"42\"}"}}]}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
    ]
    .iter()
    .map(|event| format!("data: {event}\n\n"))
    .chain(["data: [DONE]\n\n".to_owned()])
    .collect()
}

fn anthropic_stream() -> String {
    [
        ("message_start", json!({"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 10}}})),
        ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}})),
        ("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "submit", "input": {}}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"answer\": \"42\"}"}})),
        ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}})),
        ("message_stop", json!({"type": "message_stop"})),
    ]
    .iter()
    .map(|(event, data)| format!("event: {event}\ndata: {data}\n\n"))
    .collect()
}

/// Both providers, streaming and not.
fn providers() -> Vec<Provider> {
    vec![
        Provider::OpenAi(OpenAiConfig::openai("gpt-test", "sk-test").streaming(false)),
        Provider::OpenAi(OpenAiConfig::openai("gpt-test", "sk-test").streaming(true)),
        Provider::OpenAi(OpenAiConfig::llama_server("local")),
        Provider::Anthropic(AnthropicConfig::new("claude-test", "sk-ant").streaming(false)),
        Provider::Anthropic(AnthropicConfig::new("claude-test", "sk-ant").streaming(true)),
    ]
}

#[test]
fn the_sse_and_response_decoders_never_panic() {
    let streams = vec![openai_stream(), anthropic_stream()];
    fuzz("sse", &streams, 1_000, |bytes| {
        let mut decoder = SseDecoder::new();
        for chunk in bytes.chunks(7) {
            let _ = decoder.feed(chunk);
        }
        let _ = decoder.finish();
    });
    let bodies = vec![openai_body(), anthropic_body()];
    fuzz("whole responses", &bodies, 1_000, |bytes| {
        for provider in providers() {
            for status in [200, 429, 500] {
                let response = HttpResponse { status, headers: Vec::new(), body: bytes.to_vec() };
                let _ = provider.decode(&response);
            }
        }
    });
    fuzz("streamed responses", &streams, 1_000, |bytes| {
        for provider in providers() {
            let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
            let mut decoder = provider.decoder(200, &headers);
            for chunk in bytes.chunks(11) {
                let _ = decoder.feed(chunk);
            }
            let _ = decoder.finish();
        }
    });
}

fn corpus() -> std::sync::Arc<IndexedCorpus> {
    IndexedCorpus::new(
        Corpus::from_pairs([
            ("e1", "The bridge opened in 1932 after six years of work."),
            ("e2", "The bridge was closed for repairs in 1990."),
        ])
        .unwrap(),
    )
}

fn configs() -> Vec<String> {
    let corpus = corpus();
    vec![
        json!({"kind": "step", "prompt": "p", "schema": answer_schema(), "maxTurns": 4,
            "maxAttempts": 2, "tools": [{"name": "probe", "parameters": {"type": "object"}}],
            "retry": {"maxRetries": 2, "baseDelayMs": 10}})
        .to_string(),
        json!({"kind": "claim", "claim": "The bridge opened in 1932.", "corpus": corpus.id(),
            "retriever": {"bm25": {"k": 4}}, "researchTurns": 3, "lookup": "host"})
        .to_string(),
    ]
}

/// The input that answers `job`'s next output: the offline model's response, or an ok result
/// with `details` for every tool call; `None` once it is done.
fn next_input(job: &mut Job, details: &Value) -> Option<Input> {
    Some(match job.poll_output() {
        Output::CallModel(call) => {
            Input::ModelResponse { call: call.id, response: respond(call.request) }
        }
        Output::RunTools(batch) => Input::Seal {
            batch: batch.id,
            results: batch
                .calls
                .iter()
                .map(|c| Settled {
                    call_id: c.id.clone(),
                    output: ToolOutput::ok("ok", details.clone()),
                })
                .collect(),
        },
        _ => return None,
    })
}

/// Drives `job` for a bounded number of outputs with the offline model and ok tool results
/// naming a hit, stopping at the first input it refuses.
fn drive_a_little(job: &mut Job) {
    for _ in 0..12 {
        let Some(input) = next_input(job, &json!({"hits": ["e1"]})) else { return };
        if job.handle_input(input).is_err() {
            return;
        }
    }
}

#[test]
fn job_configs_and_saved_jobs_never_panic() {
    let corpora = [corpus()];
    fuzz("job configs", &configs(), 2_000, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        let _ = JobConfig::from_json(&text);
        if let Ok(mut job) = Job::from_json(&text, &corpora) {
            drive_a_little(&mut job);
        }
    });
    // Saved jobs at every point of a run of each configuration.
    let mut saved = Vec::new();
    for config in configs() {
        let mut job = Job::from_json(&config, &corpora).unwrap();
        saved.push(job.save());
        for _ in 0..6 {
            drive_a_little_once(&mut job);
            saved.push(job.save());
        }
    }
    fuzz("saved jobs", &saved, 2_000, |bytes| {
        if let Ok(mut job) = Job::restore(&String::from_utf8_lossy(bytes), &corpora) {
            drive_a_little(&mut job);
        }
    });
}

/// One step of a well-formed run (the valid samples the mutations start from).
fn drive_a_little_once(job: &mut Job) {
    if let Some(input) = next_input(job, &json!({})) {
        job.handle_input(input).unwrap();
    }
}

#[test]
fn session_logs_never_panic() {
    let corpora = [corpus()];
    let mut logs = Vec::new();
    for config in configs() {
        let job = Job::from_json(&config, &corpora).unwrap();
        let mut session = Session::start(job).unwrap();
        for _ in 0..8 {
            match session.poll() {
                SessionOutput::CallModel(call) => {
                    let id = call.id;
                    let response = respond(call.request);
                    session.record_response(id, response).unwrap();
                }
                SessionOutput::RunTools { batch, pending, .. } => {
                    let id = pending[0].call.id.clone();
                    session.start_tool(batch, &id).unwrap();
                    session.settle_tool(batch, &id, ToolOutput::ok("ok", json!({}))).unwrap();
                }
                _ => break,
            }
        }
        logs.push(session.log().to_jsonl());
    }
    fuzz("session logs", &logs, 1_000, |bytes| {
        let Ok(log) = Log::from_jsonl(&String::from_utf8_lossy(bytes)) else { return };
        let resumed =
            verity_core::indexed::with_corpora(&corpora, || Session::<Job>::resume(log, None));
        if let Ok(mut session) = resumed {
            let _ = session.poll();
        }
    });
}

#[test]
fn corpus_files_never_panic() {
    let jsonl = "{\"id\": \"a\", \"text\": \"One.\"}\n{\"id\": 7, \"text\": \"Two.\"}\n".to_owned();
    let json =
        "[{\"id\": \"a\", \"text\": \"One.\"}, {\"id\": \"b\", \"text\": \"Two.\"}]".to_owned();
    let csv = "id,text\na,One.\nb,\"Two, quoted\"\n".to_owned();
    let text = "First paragraph.\n\nSecond paragraph.\n".to_owned();
    let samples = [jsonl, json, csv, text];
    fuzz("corpus files", &samples, 1_000, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        for name in ["c.jsonl", "c.json", "c.csv", "c.txt", "c.md"] {
            if let Ok(passages) = verity_core::files::passages_from_file(name, &text) {
                let _ = Corpus::new(passages).map(IndexedCorpus::new);
            }
        }
    });
}

#[test]
fn answers_split_into_exact_spans_or_a_typed_refusal() {
    let samples = [
        "The tower is 330 m tall. It opened in 1889! Is it in Paris?".to_owned(),
        "Zürich 🗼 café\u{301}.\r\n- Pa\u{200b}ris \u{202e}x\u{202c}.\n<b>Bold</b>: 3.5%."
            .to_owned(),
        "In summary:\n\n1. One two three.\n2. Four five six.".to_owned(),
    ];
    fuzz("answers", &samples, 1_000, |bytes| {
        let answer = String::from_utf8_lossy(bytes);
        let Ok(sentences) = verity_core::answer::sentences(&answer) else { return };
        let units: Vec<u16> = answer.encode_utf16().collect();
        let mut last = 0;
        for sentence in sentences {
            let span = sentence.span;
            assert!(span.start >= last, "sentences in order, not overlapping");
            assert_eq!(answer[span.start..span.end], sentence.text);
            let utf16 = String::from_utf16(&units[span.start_utf16..span.end_utf16]).unwrap();
            assert_eq!(utf16, sentence.text);
            last = span.end;
        }
    });
}
