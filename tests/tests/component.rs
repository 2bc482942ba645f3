//! The WebAssembly component (`core/component`, exporting `wit/`) hosted in-process with
//! wasmtime, as any component host would host it: the whole conformance suite through its
//! `job` resource, claim checks end to end through its `provider` codecs against aimock (this
//! file does the HTTP), the component's imports, and the WIT it carries.
//!
//! The component is built by `cargo xtask component` (or `cargo xtask test`), which passes its
//! path in `VERITY_COMPONENT`; without it the release build's usual path is tried. A missing
//! component fails these tests: they never skip.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde_json::{Value, json};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{
    AssistantMessage, ContentBlock, DriveOptions, FailureClass, HttpBody, HttpClient, HttpRequest,
    Job, ModelRequest, ScriptedModel, StopReason, ToolCall, ToolOutput, Tools, drive_with,
};
use verity_tests::http::{Aimock, BlockingClient, workspace_root};
use verity_tests::{Failure, Outcome, Suite, SuiteTools, compare, json_eq};
use wasmtime::component::{Component, Linker, ResourceAny, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

mod bindings {
    wasmtime::component::bindgen!({ path: "../wit", world: "engine" });
}

use bindings::exports::verity::engine::corpus::Item;
use bindings::exports::verity::engine::provider::HttpResponse;
use bindings::exports::verity::engine::types as wit;

// ---- the host ----

/// The store's data: only the WASI context Rust's standard library needs (no preopened
/// directory, no environment, no network), stderr inherited so a guest panic is readable.
struct Host {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.ctx, table: &mut self.table }
    }
}

/// The component file: `VERITY_COMPONENT`, or the release build's usual path.
fn component_path() -> PathBuf {
    std::env::var_os("VERITY_COMPONENT").map_or_else(
        || workspace_root().join("target/wasm32-wasip2/wasm-release/verity_component.wasm"),
        PathBuf::from,
    )
}

struct Compiled {
    engine: Engine,
    component: Component,
    linker: Linker<Host>,
    bytes: Vec<u8>,
}

/// The component, compiled once per test binary.
fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        let path = component_path();
        let bytes = std::fs::read(&path).unwrap_or_else(|error| {
            panic!(
                "cannot read the component {} ({error}): build it with `cargo xtask component`, \
                 or set VERITY_COMPONENT to its path",
                path.display()
            )
        });
        let engine = Engine::new(&Config::new()).expect("a wasmtime engine");
        let started = Instant::now();
        let component = Component::new(&engine, &bytes).expect("the component compiles");
        eprintln!(
            "compiled {} ({} bytes) in {:.1} s",
            path.display(),
            bytes.len(),
            started.elapsed().as_secs_f64()
        );
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).expect("WASI in the linker");
        Compiled { engine, component, linker, bytes }
    })
}

/// One instance of the component with its store.
struct Guest {
    store: Store<Host>,
    /// Shared, so a test can hold an interface's accessor while it uses the store.
    engine: Rc<bindings::Engine>,
}

impl Guest {
    fn new() -> Self {
        let compiled = compiled();
        let host =
            Host { ctx: WasiCtx::builder().inherit_stderr().build(), table: ResourceTable::new() };
        let mut store = Store::new(&compiled.engine, host);
        let engine =
            bindings::Engine::instantiate(&mut store, &compiled.component, &compiled.linker)
                .expect("the component instantiates");
        Self { store, engine: Rc::new(engine) }
    }

    fn corpus(&mut self, items: &[(&str, &str)]) -> ResourceAny {
        let api = self.engine.verity_engine_corpus().corpus();
        let corpus = api.call_constructor(&mut self.store).unwrap();
        let items: Vec<Item> = items
            .iter()
            .map(|(id, text)| Item { id: (*id).to_owned(), text: (*text).to_owned() })
            .collect();
        api.call_add(&mut self.store, corpus, &items).unwrap().expect("distinct ids");
        corpus
    }

    fn corpus_id(&mut self, corpus: ResourceAny) -> String {
        self.engine.verity_engine_corpus().corpus().call_id(&mut self.store, corpus).unwrap()
    }

    fn create(
        &mut self,
        config: &str,
        corpora: &[ResourceAny],
    ) -> Result<ResourceAny, wit::Failure> {
        self.engine.verity_engine_job().job().call_create(&mut self.store, config, corpora).unwrap()
    }

    fn check_answer(
        &mut self,
        answer: &str,
        corpus: ResourceAny,
        options: &str,
    ) -> Result<ResourceAny, wit::Failure> {
        let job = self.engine.verity_engine_job().job();
        job.call_check_answer(&mut self.store, answer, corpus, options).unwrap()
    }

    fn restore(&mut self, saved: &str, corpora: &[ResourceAny]) -> Result<ResourceAny, String> {
        self.engine.verity_engine_job().job().call_restore(&mut self.store, saved, corpora).unwrap()
    }

    fn poll(&mut self, job: ResourceAny) -> wit::Output {
        self.engine.verity_engine_job().job().call_poll(&mut self.store, job).unwrap()
    }

    fn pending(&mut self, job: ResourceAny) -> Vec<wit::Output> {
        self.engine.verity_engine_job().job().call_pending(&mut self.store, job).unwrap()
    }

    fn handle(&mut self, job: ResourceAny, input: &wit::Input) -> Result<(), wit::Misuse> {
        self.engine.verity_engine_job().job().call_handle(&mut self.store, job, input).unwrap()
    }

    fn record_delta(&mut self, job: ResourceAny, call: u64, delta: &wit::Delta) {
        self.engine
            .verity_engine_job()
            .job()
            .call_record_delta(&mut self.store, job, call, delta)
            .unwrap()
            .expect("a piece of the pending call");
    }

    fn events(&mut self, job: ResourceAny) -> Vec<wit::Event> {
        self.engine.verity_engine_job().job().call_events(&mut self.store, job).unwrap()
    }

    fn finish(&mut self, job: ResourceAny) -> Result<Value, wit::Failure> {
        let finished =
            self.engine.verity_engine_job().job().call_finish(&mut self.store, job).unwrap();
        finished.map(|value| serde_json::from_str(&value).expect("the value is JSON"))
    }

    fn save(&mut self, job: ResourceAny) -> String {
        self.engine.verity_engine_job().job().call_save(&mut self.store, job).unwrap()
    }

    fn drop_resource(&mut self, resource: ResourceAny) {
        resource.resource_drop(&mut self.store).unwrap();
    }
}

// ---- between the core's types and the WIT's, on the host's side ----

fn kind_name(kind: wit::FailureKind) -> &'static str {
    use wit::FailureKind as K;
    match kind {
        K::Config => "config",
        K::Provider => "provider",
        K::InvalidSubmissions => "invalid-submissions",
        K::TurnLimit => "turn-limit",
        K::NoSubmit => "no-submit",
        K::Cancelled => "cancelled",
        K::AssessRequest => "assess-request",
        K::AssessProse => "assess-prose",
        K::AssessSchema => "assess-schema",
        K::CitationNotInEvidence => "citation-not-in-evidence",
        K::NoNewEvidence => "no-new-evidence",
        K::ResearchTurnLimit => "research-turn-limit",
        K::Budget => "budget",
    }
}

fn failure(failed: wit::Failure) -> Failure {
    Failure { kind: kind_name(failed.kind).to_owned(), message: failed.message }
}

fn usage_to_wit(usage: &verity_core::Usage) -> wit::Usage {
    wit::Usage {
        input: usage.input,
        output: usage.output,
        cache_read: usage.cache_read,
        cache_write: usage.cache_write,
        cost: usage.cost,
    }
}

/// A scripted response as the host hands it to the component.
fn message_to_wit(message: &AssistantMessage) -> wit::AssistantMessage {
    wit::AssistantMessage {
        content: message
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text } => wit::ContentBlock::Text(text.clone()),
                ContentBlock::Thinking { thinking, signature } => {
                    wit::ContentBlock::Thinking(wit::Thinking {
                        thinking: thinking.clone(),
                        signature: signature.clone(),
                    })
                }
                ContentBlock::ToolCall(call) => wit::ContentBlock::ToolCall(wit::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.to_string(),
                }),
                other => panic!("a content block the WIT lacks: {other:?}"),
            })
            .collect(),
        stop_reason: message.stop_reason.map(|reason| match reason {
            StopReason::Stop => wit::StopReason::Stop,
            StopReason::ToolUse => wit::StopReason::ToolUse,
            StopReason::Length => wit::StopReason::Length,
            StopReason::Error => wit::StopReason::Error,
            StopReason::Aborted => wit::StopReason::Aborted,
            other => panic!("a stop reason the WIT lacks: {other:?}"),
        }),
        error_message: message.error_message.clone(),
        error: message.error.as_ref().map(|error| wit::ProviderError {
            class: match error.class {
                FailureClass::Retryable => wit::FailureClass::Retryable,
                FailureClass::NotRetryable => wit::FailureClass::NotRetryable,
                FailureClass::ContextOverflow => wit::FailureClass::ContextOverflow,
                FailureClass::OutputTruncated => wit::FailureClass::OutputTruncated,
                other => panic!("a failure class the WIT lacks: {other:?}"),
            },
            status: error.status,
            retry_after_ms: error.retry_after_ms,
            raw_body: error.raw_body.clone(),
        }),
        usage: usage_to_wit(&message.usage),
        first_token: message.first_token.as_ref().map(|first| {
            let token = |t: &verity_core::TokenLogprob| wit::TokenLogprob {
                token: t.token.clone(),
                logprob: t.logprob,
            };
            wit::FirstToken {
                sampled: token(&first.sampled),
                top: first.top.iter().map(token).collect(),
            }
        }),
    }
}

fn tool_output_to_wit(output: ToolOutput) -> wit::ToolOutput {
    wit::ToolOutput {
        content: output.content,
        details: output.details.to_string(),
        is_error: output.is_error,
        terminate: output.terminate,
    }
}

fn tool_call_from_wit(call: &wit::ToolCall) -> ToolCall {
    ToolCall {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone())),
    }
}

// ---- (a) the conformance suite through the `job` resource ----

/// Drives one scenario's job through the component: the scripted model answers each
/// `call-model`, the suite's tools each `run-tools`. With `resume`, the job is saved after
/// every input, dropped, and restored from its saved state before the next poll.
fn drive_in_component(
    guest: &mut Guest,
    config: &str,
    model: &ScriptedModel,
    tools: &SuiteTools,
    resume: bool,
    events: &mut Vec<Value>,
) -> Outcome {
    let items: Vec<(&str, &str)> = tools
        .corpus()
        .corpus()
        .passages()
        .iter()
        .map(|passage| (passage.id.as_str(), passage.text.as_str()))
        .collect();
    let corpus = guest.corpus(&items);
    assert_eq!(guest.corpus_id(corpus), tools.corpus().id().to_string(), "the same content id");
    let mut job = guest.create(config, &[corpus]).map_err(failure)?;
    loop {
        // Before each output, as `drive_with` does: a pending model call is announced then.
        events.extend(guest.events(job).iter().map(event_json));
        let input = match guest.poll(job) {
            wit::Output::CallModel(call) => {
                // The scripted model reads no request: it answers in order and counts.
                let response = model.answer(ModelRequest {
                    system: "",
                    messages: &[],
                    tools: &[],
                    output_limit: None,
                    probe: None,
                });
                wit::Input::ModelResponse(wit::ModelResponse {
                    call: call.id,
                    response: message_to_wit(&response),
                })
            }
            wit::Output::RunTools(batch) => {
                assert_eq!(batch.calls.len(), batch.replay_safe.len());
                let results = batch
                    .calls
                    .iter()
                    .map(|call| wit::Settled {
                        call_id: call.id.clone(),
                        output: tool_output_to_wit(pollster::block_on(
                            tools.run(&tool_call_from_wit(call)),
                        )),
                    })
                    .collect();
                wit::Input::Seal(wit::Seal { batch: batch.id, results })
            }
            wit::Output::Done => break,
        };
        guest.handle(job, &input).unwrap_or_else(|misuse| panic!("misuse: {misuse:?}"));
        if resume {
            // What the input queued is drained before the job is saved.
            events.extend(guest.events(job).iter().map(event_json));
            let saved = guest.save(job);
            guest.drop_resource(job);
            job = guest.restore(&saved, &[corpus]).expect("the saved job restores");
        }
    }
    let outcome = guest.finish(job).map_err(failure);
    guest.drop_resource(job);
    guest.drop_resource(corpus);
    outcome
}

/// A component event in the core's JSON (`Event`'s serialization), to compare with the native
/// run's events.
fn event_json(event: &wit::Event) -> Value {
    let usage = |usage: &wit::Usage| {
        json!({"input": usage.input, "output": usage.output, "cacheRead": usage.cache_read,
               "cacheWrite": usage.cache_write, "cost": usage.cost})
    };
    match event {
        wit::Event::Stage(stage) => match stage {
            wit::ClaimStage::Retrieve(n) => {
                json!({"type": "stage", "stage": "retrieve", "evidence": n})
            }
            wit::ClaimStage::Assess => json!({"type": "stage", "stage": "assess"}),
            wit::ClaimStage::Research(turn) => {
                json!({"type": "stage", "stage": "research", "turn": turn.turn, "of": turn.of})
            }
            wit::ClaimStage::Reassess(n) => {
                json!({"type": "stage", "stage": "reassess", "evidence": n})
            }
            wit::ClaimStage::Summary => json!({"type": "stage", "stage": "summary"}),
        },
        wit::Event::ModelCall(call) => {
            json!({"type": "modelCall", "call": call.call, "retry": call.retry, "delayMs": call.delay_ms})
        }
        wit::Event::ModelAnswered(answer) => {
            let stop = match answer.stop_reason {
                wit::StopReason::Stop => "stop",
                wit::StopReason::ToolUse => "toolUse",
                wit::StopReason::Length => "length",
                wit::StopReason::Error => "error",
                wit::StopReason::Aborted => "aborted",
            };
            let mut value = json!({"type": "modelAnswered", "call": answer.call, "stopReason": stop,
                                   "toolCalls": answer.tool_calls, "usage": usage(&answer.usage)});
            if let Some(error) = &answer.error {
                value["error"] = json!(error);
            }
            value
        }
        wit::Event::ToolCall(call) => {
            json!({"type": "toolCall", "callId": call.call_id, "tool": call.tool, "host": call.host})
        }
        wit::Event::ToolSettled(settled) => {
            json!({"type": "toolSettled", "callId": settled.call_id,
            "tool": settled.tool, "isError": settled.is_error, "host": settled.host})
        }
        wit::Event::Retry(retry) => json!({"type": "retry", "attempt": retry.attempt,
            "delayMs": retry.delay_ms, "message": retry.message}),
        wit::Event::Compacted(dropped) => json!({"type": "compacted", "dropped": dropped}),
        wit::Event::Delta(piece) => {
            let delta = match &piece.delta {
                wit::Delta::Text(text) => json!({"type": "text", "text": text}),
                wit::Delta::Thinking(thinking) => json!({"type": "thinking", "thinking": thinking}),
                wit::Delta::ToolCallStart(start) => json!({"type": "toolCallStart",
                    "index": start.index, "id": start.id, "name": start.name}),
                wit::Delta::ToolCallArguments(arguments) => json!({"type": "toolCallArguments",
                    "index": arguments.index, "arguments": arguments.arguments}),
            };
            json!({"type": "delta", "call": piece.call, "delta": delta})
        }
        wit::Event::SentenceStarted(index) => json!({"type": "sentenceStarted", "index": index}),
        wit::Event::SentenceChecked(sentence) => json!({"type": "sentenceChecked",
            "sentence": serde_json::from_str::<Value>(sentence).expect("a sentence's JSON")}),
    }
}

fn run_suite(resume: bool) {
    // The shipped suite, then the project's own scenarios of the answer job.
    let mut count = 0;
    for file in ["scenarios.json", "answers.json"] {
        count += run_file(file, resume);
    }
    assert!(count >= 83, "the whole suite and the answers': {count}");
}

/// Runs one scenario file natively and in the component; returns how many scenarios it has.
fn run_file(file: &str, resume: bool) -> usize {
    let path = workspace_root().join("tests/conformance").join(file);
    let suite = Suite::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut guest = Guest::new();
    let mut failures = Vec::new();
    for scenario in &suite.scenarios {
        let mut native_events = Vec::new();
        let native = suite
            .run_with(scenario, |config, model, tools| {
                let failed = |failed: verity_core::JobFailed| Failure {
                    kind: failed.kind().as_str().to_owned(),
                    message: failed.message().to_owned(),
                };
                let job = Job::from_json(config, &[Arc::clone(tools.corpus())]).map_err(failed)?;
                let options = DriveOptions::new()
                    .events(|event| native_events.push(serde_json::to_value(event).unwrap()));
                pollster::block_on(drive_with(job, model, tools, options)).map_err(failed)
            })
            .expect("the scenario runs natively");
        let mut events = Vec::new();
        let hosted = suite
            .run_with(scenario, |config, model, tools| {
                drive_in_component(&mut guest, config, model, tools, resume, &mut events)
            })
            .expect("the scenario runs");
        if !json_eq(&Value::Array(native_events.clone()), &Value::Array(events.clone())) {
            failures.push(format!(
                "{}: events differ\n  natively:         {}\n  in the component: {}",
                scenario.name,
                Value::Array(native_events),
                Value::Array(events)
            ));
        }
        if let Err(why) = compare(&scenario.expected, &hosted) {
            failures.push(format!("{}: {why}", scenario.name));
        }
        if native != hosted {
            failures
                .push(format!("{}: natively {native}, in the component {hosted}", scenario.name));
        }
    }
    assert!(failures.is_empty(), "{} scenario(s) differ:\n{}", failures.len(), failures.join("\n"));
    suite.scenarios.len()
}

#[test]
fn the_conformance_suite_runs_through_the_components_job_resource() {
    run_suite(false);
}

#[test]
fn the_conformance_suite_runs_with_the_job_saved_and_restored_after_every_input() {
    run_suite(true);
}

#[test]
fn a_refused_configuration_and_a_misuse_are_values() {
    let mut guest = Guest::new();
    let failed =
        guest.create(r#"{"kind": "step", "prompt": "x", "schema": {}, "maxTurns": 0}"#, &[]);
    let failed = failed.expect_err("maxTurns 0 is refused");
    assert_eq!(failed.kind, wit::FailureKind::Config);
    assert!(failed.message.starts_with("maxTurns"), "{}", failed.message);
    assert_eq!(failed.spent.requests, 0);

    let job = guest
        .create(r#"{"kind": "step", "prompt": "x", "schema": {"type": "object"}}"#, &[])
        .expect("a valid step");
    let wit::Output::CallModel(call) = guest.poll(job) else { panic!("a model call first") };
    let wrong = wit::Input::Seal(wit::Seal { batch: call.id, results: vec![] });
    let misuse = guest.handle(job, &wrong).expect_err("a seal answers no model call");
    assert_eq!(misuse.kind, wit::MisuseKind::UnexpectedInput);
    // Unchanged: the same call is still pending; a cancel ends the job as cancelled.
    assert!(matches!(guest.poll(job), wit::Output::CallModel(again) if again.id == call.id));
    guest.handle(job, &wit::Input::Cancel("the user pressed stop".into())).unwrap();
    assert!(matches!(guest.poll(job), wit::Output::Done));
    let failed = guest.finish(job).expect_err("cancelled");
    assert_eq!(failed.kind, wit::FailureKind::Cancelled);
    let refused = guest.handle(job, &wit::Input::Cancel("again".into())).expect_err("finished");
    assert_eq!(refused.kind, wit::MisuseKind::Finished);
}

#[test]
fn the_corpus_resource_searches_by_bm25_and_refuses_a_repeated_id() {
    let mut guest = Guest::new();
    let corpus = guest.corpus(&PASSAGES);
    let engine = Rc::clone(&guest.engine);
    let api = engine.verity_engine_corpus().corpus();
    assert_eq!(api.call_len(&mut guest.store, corpus).unwrap(), 4);
    let native = IndexedCorpus::new(Corpus::from_pairs(PASSAGES).unwrap());
    assert_eq!(guest.corpus_id(corpus), native.id().to_string());
    let hits = api.call_search(&mut guest.store, corpus, "Eiffel Tower Paris", 2).unwrap();
    assert_eq!(hits.first().map(|hit| hit.id.as_str()), Some("eiffel"), "{hits:?}");
    let expected: Vec<(String, f32)> = native
        .bm25()
        .search("Eiffel Tower Paris", 2)
        .into_iter()
        .map(|(index, score)| (PASSAGES[index].0.to_owned(), score))
        .collect();
    let got: Vec<(String, f32)> = hits.into_iter().map(|hit| (hit.id, hit.score)).collect();
    assert_eq!(got, expected);
    let again = [Item { id: "louvre".into(), text: "again".into() }];
    let refused = api.call_add(&mut guest.store, corpus, &again).unwrap().expect_err("repeated");
    assert!(refused.contains("louvre"), "{refused}");
    assert_eq!(api.call_len(&mut guest.store, corpus).unwrap(), 4, "nothing added");
}

// ---- (b) a claim check through the `provider` codecs against aimock ----

const PASSAGES: [(&str, &str); 4] = [
    (
        "eiffel",
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
    ),
    ("louvre", "The Louvre is the world's most-visited art museum."),
    ("tokyo", "Tokyo Tower is a communications and observation tower in Minato."),
    ("height", "Its antenna tops out at three hundred thirty-three metres, finished in 1958."),
];

fn provider_config(server: &Aimock, stream: bool) -> String {
    json!({
        "api": "openai",
        "baseUrl": format!("{}/v1", server.url()),
        "model": "gpt-4o-mini",
        "apiKey": "sk-test",
        "stream": stream,
        "price": {"input": 0.15, "output": 0.6},
    })
    .to_string()
}

/// What a claim check through the component produced.
struct Checked {
    report: Value,
    events: Vec<wit::Event>,
    sent: Vec<HttpRequest>,
}

/// A claim check as a component host runs it: the component encodes each model call, this
/// host sends it (the core's blocking test client, ureq over loopback), the component decodes
/// the answer (chunk by chunk when streaming, handing the pieces to the job).
fn check_claim(server: &Aimock, claim: &str, stream: bool) -> Checked {
    let mut guest = Guest::new();
    let engine = Rc::clone(&guest.engine);
    let provider = engine.verity_engine_provider();
    let codec = provider
        .codec()
        .call_open(&mut guest.store, &provider_config(server, stream))
        .unwrap()
        .expect("a provider configuration");
    assert!(provider.codec().call_is_streaming(&mut guest.store, codec).unwrap() == stream);
    let corpus = guest.corpus(&PASSAGES);
    let config = json!({"kind": "claim", "claim": claim, "corpus": guest.corpus_id(corpus),
                        "retriever": "keyword"});
    let job = guest.create(&config.to_string(), &[corpus]).expect("a claim job");
    let client = BlockingClient::new();
    let mut events = guest.events(job);
    loop {
        match guest.poll(job) {
            wit::Output::CallModel(call) => {
                let request =
                    provider.codec().call_encode(&mut guest.store, codec, &call.request).unwrap();
                let request = HttpRequest {
                    method: request.method,
                    url: request.url,
                    headers: request.headers,
                    body: request.body,
                    timeout_ms: request.timeout_ms,
                    idle_timeout_ms: request.idle_timeout_ms,
                };
                let (head, mut body) =
                    pollster::block_on(client.send(&request)).expect("aimock answers");
                let mut bytes = Vec::new();
                while let Some(chunk) = pollster::block_on(body.next_chunk()).unwrap() {
                    bytes.extend(chunk);
                }
                let response = if stream {
                    let decoder = provider
                        .codec()
                        .call_decoder(&mut guest.store, codec, head.status, &head.headers)
                        .unwrap();
                    // Small chunks, as a slow network would deliver them.
                    for chunk in bytes.chunks(64) {
                        let deltas = provider
                            .stream_decoder()
                            .call_feed(&mut guest.store, decoder, chunk)
                            .unwrap();
                        for delta in &deltas {
                            guest.record_delta(job, call.id, delta);
                        }
                    }
                    let message =
                        provider.stream_decoder().call_finish(&mut guest.store, decoder).unwrap();
                    decoder.resource_drop(&mut guest.store).unwrap();
                    message
                } else {
                    let response =
                        HttpResponse { status: head.status, headers: head.headers, body: bytes };
                    provider.codec().call_decode(&mut guest.store, codec, &response).unwrap()
                };
                let input =
                    wit::Input::ModelResponse(wit::ModelResponse { call: call.id, response });
                guest.handle(job, &input).expect("the pending call's answer");
            }
            wit::Output::RunTools(batch) => {
                panic!("the job answers lookups itself; the host was asked {batch:?}")
            }
            wit::Output::Done => break,
        }
        events.extend(guest.events(job));
    }
    let report = guest.finish(job).expect("the claim check succeeds");
    Checked { report, events, sent: client.sent() }
}

fn position(events: &[wit::Event], wanted: impl Fn(&wit::Event) -> bool) -> usize {
    events.iter().position(wanted).unwrap_or_else(|| panic!("not in {events:?}"))
}

fn claim_through_the_codecs(stream: bool) {
    let server = Aimock::start(&workspace_root().join("tests/fixtures/aimock/claim.json"))
        .unwrap_or_else(|why| panic!("cannot start aimock: {why}"));
    let Checked { report, events, sent } =
        check_claim(&server, "The Eiffel Tower is in Paris.", stream);
    assert_eq!(report["assessment"]["verdict"], "supported", "{report}");
    assert_eq!(report["route"], "single call", "{report}");
    assert_eq!(report["summary"], "Supported: the evidence places the Eiffel Tower in Paris.");
    assert_eq!(report["requests"], 2);
    assert_eq!(
        (report["usage"]["input"].as_u64(), report["usage"]["output"].as_u64()),
        (Some(600), Some(80))
    );
    let cost = report["usage"]["cost"].as_f64().unwrap();
    assert!((cost - (600.0 * 0.15 + 80.0 * 0.6) / 1e6).abs() < 1e-12, "cost {cost}");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent[0].json()["stream"].as_bool().unwrap_or(false), stream);
    let asked = position(&events, |e| matches!(e, wit::Event::ModelCall(c) if c.call == 0));
    let answered = position(&events, |e| matches!(e, wit::Event::ModelAnswered(a) if a.call == 0));
    assert!(asked < answered);
    let pieces = events.iter().filter(|e| matches!(e, wit::Event::Delta(d) if d.call == 0)).count();
    if stream {
        let piece = position(&events, |e| matches!(e, wit::Event::Delta(d) if d.call == 0));
        assert!(asked < piece && piece < answered, "{events:?}");
        assert!(pieces > 10, "{pieces} streamed pieces");
    } else {
        assert_eq!(pieces, 0);
    }
    assert!(events.iter().any(|e| matches!(e, wit::Event::Stage(wit::ClaimStage::Summary))));
}

#[test]
fn a_claim_check_through_the_provider_codecs_against_aimock() {
    claim_through_the_codecs(false);
}

#[test]
fn a_claim_check_through_the_provider_codecs_against_aimock_streaming() {
    claim_through_the_codecs(true);
}

#[test]
fn a_claim_check_that_escalates_to_research_through_the_codecs() {
    let server =
        Aimock::start(&workspace_root().join("tests/fixtures/aimock/claim-escalation.json"))
            .unwrap_or_else(|why| panic!("cannot start aimock: {why}"));
    let Checked { report, events, sent } = check_claim(&server, "Tokyo Tower is 333 m high.", true);
    assert_eq!(report["route"], "agent escalation", "{report}");
    assert_eq!(report["assessment"]["verdict"], "supported", "{report}");
    assert_eq!(report["requests"], 5);
    assert_eq!(sent.len(), 5);
    let research = sent[2].json();
    let last = research["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert!(last["content"].as_str().unwrap().contains("antenna"));
    assert!(events.iter().any(|e| matches!(e, wit::Event::Stage(wit::ClaimStage::Research(_)))));
}

/// The verifier route through the component: its Yes/No questions carry a probe through the
/// WIT, the codec asks the server for `top_logprobs`, and the recorded llama.cpp answers'
/// probabilities come back through the WIT (the component dropped them before, so its hosts
/// got the sampled token's fallback). The calibration question (an empty document) is answered
/// No, the passages Yes: the claim is supported, read from probabilities.
#[test]
fn the_verifier_route_reads_probabilities_through_the_component() {
    let fixture = |name: &str| {
        std::fs::read(workspace_root().join("core/tests/fixtures/verifier").join(name)).unwrap()
    };
    let (yes, no) = (fixture("llama-cpp-yes.json"), fixture("llama-cpp-recorded-no.json"));
    let summary = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": null, "tool_calls": [{"id": "s", "type": "function",
        "function": {"name": "submit", "arguments": "{\"text\": \"Supported by the passage.\"}"}}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9}});
    let mut guest = Guest::new();
    let engine = Rc::clone(&guest.engine);
    let provider = engine.verity_engine_provider();
    let config = json!({"api": "openai", "baseUrl": "http://127.0.0.1:9/v1", "model": "qwen",
                        "stream": true});
    let codec = provider
        .codec()
        .call_open(&mut guest.store, &config.to_string())
        .unwrap()
        .expect("a provider configuration");
    let corpus = guest.corpus(&PASSAGES);
    let config = json!({"kind": "claim", "claim": "The Eiffel Tower is in Paris.",
                        "corpus": guest.corpus_id(corpus), "retriever": {"bm25": {"k": 2}},
                        "assess": "verifier"});
    let job = guest.create(&config.to_string(), &[corpus]).expect("a claim job");
    let mut probes = 0;
    loop {
        match guest.poll(job) {
            wit::Output::CallModel(call) => {
                let request =
                    provider.codec().call_encode(&mut guest.store, codec, &call.request).unwrap();
                let body: Value = serde_json::from_str(&request.body).unwrap();
                let answer = if call.request.probe.is_some() {
                    probes += 1;
                    // Asked as the route asks: probabilities, one token, not streamed.
                    assert_eq!(body["logprobs"], true, "{body}");
                    assert_eq!(body["top_logprobs"], 10, "{body}");
                    assert!(!body["stream"].as_bool().unwrap_or(false), "{body}");
                    let asked = body["messages"].to_string();
                    if asked.contains("Document: \\nClaim") { no.clone() } else { yes.clone() }
                } else {
                    summary.to_string().into_bytes()
                };
                let response = HttpResponse {
                    status: 200,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: answer,
                };
                let message =
                    provider.codec().call_decode(&mut guest.store, codec, &response).unwrap();
                if call.request.probe.is_some() {
                    assert!(message.first_token.is_some(), "the probabilities cross the WIT");
                }
                let input = wit::Input::ModelResponse(wit::ModelResponse {
                    call: call.id,
                    response: message,
                });
                guest.handle(job, &input).expect("the pending call's answer");
            }
            wit::Output::RunTools(batch) => panic!("no tools expected: {batch:?}"),
            wit::Output::Done => break,
        }
    }
    let report = guest.finish(job).expect("the claim check succeeds");
    assert_eq!(probes, 3, "the calibration question and two passages");
    assert_eq!(report["assessment"]["verdict"], "supported", "{report}");
    let verifier = &report["verifier"];
    assert_eq!(verifier["fallback"], false, "read from probabilities: {verifier}");
    for question in verifier["questions"].as_array().unwrap() {
        assert_eq!(question["source"], "probabilities", "{question}");
    }
}

/// `check-answer`: each sentence through the claim checker inside the component, each one's
/// end a `sentence-checked` event carrying its report, the answer's report from `finish`, with
/// the call ids of every sentence apart; options that would name the answer twice are refused.
#[test]
fn an_answer_is_checked_sentence_by_sentence_through_check_answer() {
    let mut guest = Guest::new();
    let corpus = guest.corpus(&PASSAGES);
    let (eiffel, height) = (PASSAGES[0].1, PASSAGES[3].1);
    let answer =
        "Hello! The Eiffel Tower is in Paris [eiffel]. Its antenna tops out at 500 metres.";
    let options = json!({"retriever": {"bm25": {"k": 2}}}).to_string();
    let job = guest.check_answer(answer, corpus, &options).expect("an answer job");
    let assess = |verdict: &str, cited: &str| {
        AssistantMessage::tool_call(
            "a",
            "record_assessment",
            json!({"verdict": verdict, "confidence": 0.9, "citations": [cited]}),
        )
    };
    let mut script = vec![assess("supported", eiffel), assess("contradicted", height)].into_iter();
    let (mut ids, mut events) = (Vec::new(), Vec::new());
    loop {
        events.extend(guest.events(job).iter().map(event_json));
        match guest.poll(job) {
            wit::Output::CallModel(call) => {
                ids.push(call.id);
                let response = message_to_wit(&script.next().expect("a scripted answer"));
                let input =
                    wit::Input::ModelResponse(wit::ModelResponse { call: call.id, response });
                guest.handle(job, &input).expect("the pending call's answer");
            }
            wit::Output::RunTools(batch) => panic!("no tools expected: {batch:?}"),
            wit::Output::Done => break,
        }
    }
    ids.dedup();
    assert_eq!(ids.len(), 2, "every call has its own id (a sentence asks no summary)");
    let checked: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "sentenceChecked")
        .map(|event| &event["sentence"])
        .collect();
    assert_eq!(checked.len(), 2, "{events:?}");
    assert_eq!(checked[0]["status"], "supported");
    assert_eq!(checked[0]["marks"][0]["holds"], "supports");
    assert_eq!(checked[0]["citations"][0]["passage"], "eiffel");
    assert_eq!(checked[1]["status"], "contradicted");
    let quote = checked[1]["citations"][0]["quote"].as_str().unwrap();
    assert_eq!(quote, height);
    let report = guest.finish(job).expect("the answer's report");
    assert_eq!(report["counts"]["supported"], 1, "{report}");
    assert_eq!(report["counts"]["contradicted"], 1);
    assert_eq!(report["counts"]["notCheckable"], 1);
    assert_eq!(report["faithful"], false);
    let span = &report["sentences"][1]["span"];
    let (start, end) = (span["start"].as_u64().unwrap(), span["end"].as_u64().unwrap());
    assert_eq!(&answer[start as usize..end as usize], "The Eiffel Tower is in Paris [eiffel].");

    for (options, field) in [("[]", "options"), (r#"{"answer": "x"}"#, "options.answer")] {
        let failed = guest.check_answer(answer, corpus, options).unwrap_err();
        assert_eq!(failed.kind, wit::FailureKind::Config);
        assert!(failed.message.starts_with(field), "{}", failed.message);
    }
    let failed = guest.check_answer("  ", corpus, "{}").unwrap_err();
    assert!(failed.message.contains("the answer is empty"), "{}", failed.message);
}

/// An answer job with `concurrency` has its sentences' model calls pending together
/// (`pending`), each answerable in any order: the second sentence's answered first here.
#[test]
fn an_answers_sentences_are_pending_together_and_answered_in_any_order() {
    let mut guest = Guest::new();
    let corpus = guest.corpus(&PASSAGES);
    let (eiffel, height) = (PASSAGES[0].1, PASSAGES[3].1);
    let answer = "The Eiffel Tower is in Paris. Its antenna tops out at 500 metres.";
    let options = json!({"retriever": {"bm25": {"k": 2}}, "concurrency": 2}).to_string();
    let job = guest.check_answer(answer, corpus, &options).expect("an answer job");
    let assess = |verdict: &str, cited: &str| {
        message_to_wit(&AssistantMessage::tool_call(
            "a",
            "record_assessment",
            json!({"verdict": verdict, "confidence": 0.9, "citations": [cited]}),
        ))
    };
    let calls: Vec<u64> = guest
        .pending(job)
        .into_iter()
        .map(|output| match output {
            wit::Output::CallModel(call) => call.id,
            other => panic!("a model call: {other:?}"),
        })
        .collect();
    assert_eq!(calls.len(), 2, "both sentences at once");
    assert_ne!(calls[0], calls[1]);
    assert!(matches!(guest.poll(job), wit::Output::CallModel(call) if call.id == calls[0]));
    for (call, response) in
        [(calls[1], assess("contradicted", height)), (calls[0], assess("supported", eiffel))]
    {
        let input = wit::Input::ModelResponse(wit::ModelResponse { call, response });
        guest.handle(job, &input).expect("a pending call's answer");
    }
    assert!(guest.pending(job).is_empty());
    let report = guest.finish(job).expect("the answer's report");
    assert_eq!(report["sentences"][0]["status"], "supported", "{report}");
    assert_eq!(report["sentences"][1]["status"], "contradicted", "{report}");
}

#[test]
fn a_failed_response_decodes_as_a_classified_failure() {
    let mut guest = Guest::new();
    let engine = Rc::clone(&guest.engine);
    let provider = engine.verity_engine_provider();
    let config = r#"{"api": "anthropic", "model": "claude-3-5-haiku", "apiKey": "sk-secret"}"#;
    let codec = provider.codec().call_open(&mut guest.store, config).unwrap().unwrap();
    let response = HttpResponse {
        status: 429,
        headers: vec![("retry-after".into(), "2".into())],
        body:
            br#"{"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}"#
                .to_vec(),
    };
    let message = provider.codec().call_decode(&mut guest.store, codec, &response).unwrap();
    assert_eq!(message.stop_reason, Some(wit::StopReason::Error));
    let error = message.error.expect("a classified failure");
    assert_eq!(error.class, wit::FailureClass::Retryable);
    assert_eq!((error.status, error.retry_after_ms), (Some(429), Some(2000)));
    let refused = provider.codec().call_open(&mut guest.store, r#"{"api": "nope"}"#).unwrap();
    assert!(refused.is_err());
}

// ---- (c) the component imports only what Rust's std needs on wasm32-wasip2 ----

/// What Rust's standard library imports on wasm32-wasip2 in any component (measured with a
/// probe that only uses `String`, `HashMap`, `format!` and a panic): wasi-libc's start-up
/// (environment, exit, the standard streams and their terminal checks, `wasi:io`) and the
/// `HashMap` seed (`insecure-seed`). See docs/design/component.md.
const STD_IMPORTS: [&str; 14] = [
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/insecure-seed",
];

/// What std imports for the core's dependencies, all of it through jsonschema: the clocks
/// behind `std::time::Instant::now` (parking_lot's lock-fairness timer, in the `referencing`
/// registry; wasi-libc's `clock_gettime` links both clocks) and `wasi:random/random` (getrandom
/// 0.3, for ahash's hash keys). Neither reaches outside the sandbox nor changes a result.
const DEPENDENCY_IMPORTS: [&str; 3] =
    ["wasi:clocks/monotonic-clock", "wasi:clocks/wall-clock", "wasi:random/random"];

#[test]
fn the_component_imports_nothing_beyond_what_std_needs() {
    let compiled = compiled();
    let ty = compiled.component.component_type();
    let imports: BTreeSet<String> = ty
        .imports(&compiled.engine)
        .map(|(name, _)| name.split('@').next().unwrap_or(name).to_owned())
        .collect();
    let beyond: Vec<&String> = imports
        .iter()
        .filter(|name| !STD_IMPORTS.contains(&name.as_str()))
        .filter(|name| !DEPENDENCY_IMPORTS.contains(&name.as_str()))
        .collect();
    assert!(beyond.is_empty(), "imports beyond std's: {beyond:?} (all: {imports:?})");
    let exports: BTreeSet<String> =
        ty.exports(&compiled.engine).map(|(name, _)| name.to_owned()).collect();
    let expected: BTreeSet<String> = ["types", "corpus", "job", "provider"]
        .iter()
        .map(|name| format!("verity:engine/{name}@0.1.0"))
        .collect();
    assert_eq!(exports, expected);
}

// ---- (d) the WIT embedded in the component is wit/ ----

#[test]
fn the_wit_in_the_component_is_the_wit_folder() {
    // A built component carries its interfaces' types, not their docs nor the world's name:
    // compare the interfaces without docs, and the world's exports with the component's.
    let decoded = wit_component::decode(&compiled().bytes).expect("the component's WIT");
    let theirs = decoded.resolve();
    let mut ours = wit_parser::Resolve::default();
    let (folder, _) = ours.push_dir(workspace_root().join("wit")).expect("wit/ parses");
    let world = ours.select_world(&[folder], Some("engine")).expect("wit/ has the world engine");
    assert!(ours.worlds[world].imports.is_empty(), "the world imports nothing");
    let exported: BTreeSet<String> =
        ours.worlds[world].exports.keys().map(|key| ours.name_world_key(key)).collect();
    ours.packages[folder].worlds.clear();
    // The package printed without docs, its interfaces in name order (wit/'s files are read in
    // file-name order, the component lists them in the world's order).
    let print = |resolve: &wit_parser::Resolve, package| {
        let mut printer = wit_component::WitPrinter::default();
        printer.emit_docs(false);
        printer.print(resolve, package, &[]).expect("printable");
        let text = printer.output.to_string();
        let mut blocks: Vec<&str> = text.split("\n\ninterface ").collect();
        blocks[1..].sort_unstable();
        blocks.join("\n\ninterface ")
    };
    let package = theirs
        .packages
        .iter()
        .find(|(_, package)| package.name.to_string() == "verity:engine@0.1.0")
        .map(|(id, _)| id)
        .expect("the component carries verity:engine@0.1.0");
    let wit = print(&ours, folder);
    assert!(wit.contains("resource job") && wit.contains("resource codec"), "{wit}");
    assert_eq!(print(theirs, package), wit, "the component's WIT differs from wit/: rebuild it");
    let wit_parser::decoding::DecodedWasm::Component(_, root) = &decoded else {
        panic!("the file is a component")
    };
    let root = &theirs.worlds[*root];
    let component_exports: BTreeSet<String> =
        root.exports.keys().map(|key| theirs.name_world_key(key)).collect();
    assert_eq!(component_exports, exported);
}
