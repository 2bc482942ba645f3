//! End to end over loopback HTTP: real machines, the real codecs and the one
//! [`ProviderTransport`], against `@copilotkit/aimock` (a mock OpenAI-compatible and Anthropic
//! server replying from the fixture files in `tests/fixtures/aimock/`) and against a small
//! server that sends raw bytes no real server would (an HTML page, a body cut short).
//!
//! Each test starts its own mock on a free port and stops it when done. Without
//! `node_modules/@copilotkit/aimock` the tests fail, loudly: `cargo xtask test` installs it.
#![cfg(not(target_arch = "wasm32"))]

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use verity_core::claim;
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{
    AnthropicConfig, AssistantMessage, CallId, Cancel, ClaimStage, Delta, DriveOptions, Event,
    FailureClass, Input, Job, Machine, Message, ModelRequest, NoTools, OpenAiConfig, Output, Price,
    PriceTable, Provider, ProviderTransport, Report, RetryPolicy, Route, Step, StepFailed,
    StopReason, Transport, Usage, drive, drive_with, step,
};
use verity_tests::http::{
    Aimock, BlockingClient, CannedServer, RawServer, chunked, endless, reply, silent,
    workspace_root,
};

fn fixtures(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures/aimock").join(name)
}

fn mock(name: &str) -> Aimock {
    Aimock::start(&fixtures(name)).unwrap_or_else(|why| panic!("cannot start aimock: {why}"))
}

const MODEL: &str = "gpt-4o-mini";

fn prices() -> PriceTable {
    PriceTable::from_json(
        r#"{"gpt-4o-mini": {"input": 0.15, "output": 0.6},
            "claude-3-5-haiku": {"input": 0.8, "output": 4, "cacheRead": 0.08}}"#,
    )
    .unwrap()
}

fn openai(server: &Aimock, stream: bool) -> Provider {
    let config = OpenAiConfig::new(format!("{}/v1", server.url()), MODEL)
        .streaming(stream)
        .header("X-Test-Suite", "verity");
    Provider::OpenAi(OpenAiConfig { api_key: Some("sk-test".into()), ..config }).priced(&prices())
}

type Deltas = Rc<RefCell<Vec<Delta>>>;

/// The transport under test, recording the pieces it streams (what a driver receives through
/// [`Transport::complete_streaming`]).
struct Recorded {
    inner: ProviderTransport<BlockingClient>,
    deltas: Deltas,
}

impl Recorded {
    fn client(&self) -> &BlockingClient {
        self.inner.client()
    }
}

impl Transport for Recorded {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        let mut record = |delta| self.deltas.borrow_mut().push(delta);
        self.inner.complete_streaming(request, &mut record).await
    }

    async fn wait(&self, delay_ms: u64) {
        self.inner.wait(delay_ms).await;
    }
}

fn transport(provider: Provider) -> (Recorded, Deltas) {
    let deltas: Deltas = Rc::default();
    let inner = ProviderTransport::new(provider, BlockingClient::new());
    (Recorded { inner, deltas: Rc::clone(&deltas) }, deltas)
}

/// The pieces of tool call arguments the progress callback saw, per call index.
fn argument_pieces(deltas: &[Delta]) -> Vec<String> {
    deltas
        .iter()
        .filter_map(|delta| match delta {
            Delta::ToolCallArguments { arguments, .. } => Some(arguments.clone()),
            _ => None,
        })
        .collect()
}

#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct Answer {
    /// The answer, as text.
    answer: String,
    /// How it was found.
    #[serde(default)]
    working: Option<String>,
}

/// The host's driver loop, written out (as the crate docs show) so the test can read what
/// the step spent and the delays it asked for before it is consumed.
fn run_step<T: serde::de::DeserializeOwned>(
    mut machine: Step<T>,
    transport: &impl Transport,
) -> (Result<T, StepFailed>, Usage, Vec<u64>) {
    let mut delays = Vec::new();
    loop {
        match machine.poll_output() {
            Output::CallModel(call) => {
                let id = call.id;
                delays.push(call.delay_ms);
                if call.delay_ms > 0 {
                    pollster::block_on(transport.wait(call.delay_ms));
                }
                let response = pollster::block_on(transport.complete(call.request));
                machine.handle_input(Input::ModelResponse { call: id, response }).unwrap();
            }
            Output::RunTools(_) => panic!("a step without host tools ran tools"),
            Output::Done => break,
            _ => panic!("an unknown output"),
        }
    }
    let usage = machine.spent().usage;
    (machine.finish(), usage, delays)
}

fn answer_step() -> Step<Answer> {
    step::<Answer>("You answer by calling submit.", "What is six times seven?")
        .build()
        .expect("a valid step")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn typed_step_over_openai(stream: bool) {
    let server = mock("step.json");
    // Through the core's own driver.
    let (driven, _) = transport(openai(&server, stream));
    let value = pollster::block_on(drive(answer_step(), &driven, &NoTools))
        .expect("the step succeeds after one repair");
    assert_eq!(
        value,
        Answer { answer: "42".into(), working: Some("six times seven is forty-two".into()) }
    );
    assert_eq!(driven.client().sent().len(), 2);
    // Again with the loop written out, to read what the step spent.
    let (transport, deltas) = transport(openai(&server, stream));
    let (value, usage, _) = run_step(answer_step(), &transport);
    assert_eq!(value.expect("the same run again").answer, "42");
    let sent = transport.client().sent();
    assert_eq!(sent.len(), 2, "the invalid submission was answered and repaired");
    // The second request carries the first call and the schema error as its tool result.
    let second = sent[1].json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_bad");
    assert_eq!(messages[2]["tool_calls"][0]["function"]["arguments"], "{\"answer\":42}");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_bad");
    assert_eq!(sent[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent[0].header("x-test-suite"), Some("verity"));
    // Usage from the fixtures, summed over the step, priced from the table.
    assert_eq!((usage.input, usage.output), (120 + 180, 15 + 25));
    assert!(close(usage.cost, (300.0 * 0.15 + 40.0 * 0.6) / 1e6), "cost {}", usage.cost);

    let deltas = deltas.borrow();
    if stream {
        assert_eq!(second["stream"], true);
        assert_eq!(second["stream_options"], json!({"include_usage": true}));
        // The arguments arrived in pieces and were assembled.
        let pieces = argument_pieces(&deltas);
        assert!(pieces.len() > 10, "{} pieces", pieces.len());
        assert!(pieces.iter().all(|piece| piece.len() <= 3));
        let first_call: String = pieces.concat();
        assert!(first_call.starts_with("{\"answer\":42}"), "{first_call}");
        assert!(deltas.iter().any(|d| matches!(d, Delta::Text { .. })), "text was streamed");
        assert!(
            deltas
                .iter()
                .any(|d| matches!(d, Delta::ToolCallStart { name, .. } if name == "submit"))
        );
    } else {
        assert!(second.get("stream").is_none());
        assert!(deltas.is_empty(), "a whole response reports no progress");
    }
}

#[test]
fn a_typed_step_over_the_openai_codec() {
    typed_step_over_openai(false);
}

#[test]
fn a_typed_step_over_the_openai_codec_streaming() {
    typed_step_over_openai(true);
}

fn typed_step_over_anthropic(stream: bool) {
    let server = mock("step-anthropic.json");
    let mut config = AnthropicConfig::new("claude-3-5-haiku-20241022", "sk-ant-test")
        .at(server.url())
        .streaming(stream);
    config.max_tokens = 1024;
    let (transport, deltas) = transport(Provider::Anthropic(config).priced(&prices()));
    let (value, usage, _) = run_step(answer_step(), &transport);
    assert_eq!(value.expect("the step succeeds after one repair").answer, "42");
    let sent = transport.client().sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].header("anthropic-dangerous-direct-browser-access"), Some("true"));
    assert_eq!(sent[0].header("x-api-key"), Some("sk-ant-test"));
    let second = sent[1].json();
    assert_eq!(second["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(second["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(second["messages"][2]["content"][0]["is_error"], true);
    assert_eq!((usage.input, usage.output), (300, 40));
    assert!(close(usage.cost, (300.0 * 0.8 + 40.0 * 4.0) / 1e6), "cost {}", usage.cost);
    if stream {
        assert!(argument_pieces(&deltas.borrow()).len() > 1, "input_json_delta pieces");
    }
}

#[test]
fn a_typed_step_over_the_anthropic_codec() {
    typed_step_over_anthropic(false);
}

#[test]
fn a_typed_step_over_the_anthropic_codec_streaming() {
    typed_step_over_anthropic(true);
}

/// The host's `lookup_evidence`, as the claim check's research agent needs it.
fn corpus() -> Arc<IndexedCorpus> {
    IndexedCorpus::new(
        Corpus::from_pairs(vec![
            (
                "eiffel",
                "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
            ),
            ("louvre", "The Louvre is the world's most-visited art museum."),
            ("tokyo", "Tokyo Tower is a communications and observation tower in Minato."),
            ("height", "Its antenna tops out at three hundred thirty-three metres, finished in 1958."),
        ])
        .unwrap(),
    )
}

/// A claim job over [`corpus`] as every host makes one: from its JSON configuration.
fn claim_job(claim: &str) -> Job {
    let corpus = corpus();
    let config =
        json!({"kind": "claim", "claim": claim, "corpus": corpus.id(), "retriever": "keyword"});
    Job::from_json(&config.to_string(), &[corpus]).expect("a valid claim job")
}

fn report(outcome: Result<Value, verity_core::JobFailed>) -> Report {
    serde_json::from_value(outcome.expect("the claim check succeeds")).expect("a report")
}

fn claim_check_over_openai(stream: bool) {
    let server = mock("claim.json");
    let transport = ProviderTransport::new(openai(&server, stream), BlockingClient::new());
    let check = claim_job("The Eiffel Tower is in Paris.");
    let evidence = check.claim_check().unwrap().evidence();
    assert!(evidence.iter().any(|e| e.starts_with("The Eiffel Tower")));
    // Every event in one stream: the job's stages and calls, the transport's pieces.
    let mut events = Vec::new();
    let options = DriveOptions::new().events(|event| events.push(event));
    let report = report(pollster::block_on(drive_with(check, &transport, &NoTools, options)));
    assert_eq!(report.assessment.verdict, claim::Verdict::Supported);
    assert_eq!(report.route, Route::SingleCall);
    assert_eq!(report.summary, "Supported: the evidence places the Eiffel Tower in Paris.");
    assert_eq!(report.requests, 2);
    assert_eq!((report.usage.input, report.usage.output), (600, 80));
    assert!(close(report.usage.cost, (600.0 * 0.15 + 80.0 * 0.6) / 1e6));
    let deltas: Vec<Delta> = events
        .iter()
        .filter_map(|event| match event {
            Event::Delta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect();
    if stream {
        assert!(argument_pieces(&deltas).len() > 10);
        // A call's pieces come after it was asked for and before it was answered.
        let position = |wanted: &dyn Fn(&Event) -> bool| events.iter().position(wanted).unwrap();
        let asked = position(&|e| matches!(e, Event::ModelCall { call: CallId(0), .. }));
        let piece = position(&|e| matches!(e, Event::Delta { call: CallId(0), .. }));
        let answered = position(&|e| matches!(e, Event::ModelAnswered { call: CallId(0), .. }));
        assert!(asked < piece && piece < answered, "{events:?}");
    } else {
        assert!(deltas.is_empty());
    }
    assert!(events.iter().any(|e| matches!(e, Event::Stage { stage: ClaimStage::Summary })));
}

#[test]
fn a_claim_check_over_the_openai_codec() {
    claim_check_over_openai(false);
}

#[test]
fn a_claim_check_over_the_openai_codec_streaming() {
    claim_check_over_openai(true);
}

#[test]
fn a_claim_check_that_escalates_to_research_streaming() {
    let server = mock("claim-escalation.json");
    let (transport, _) = transport(openai(&server, true));
    let check = claim_job("Tokyo Tower is 333 m high.");
    assert!(
        !check.claim_check().unwrap().evidence().iter().any(|e| e.contains("antenna")),
        "the height passage is found only by research"
    );
    // The host runs no tool: the job answers the research agent's lookup from its corpus.
    let report = report(pollster::block_on(drive(check, &transport, &NoTools)));
    assert_eq!(report.route, Route::AgentEscalation);
    assert_eq!(report.assessment.verdict, claim::Verdict::Supported);
    assert_eq!(report.requests, 5);
    assert_eq!((report.usage.input, report.usage.output), (1100, 112));
    // The research turn sent the lookup's result back as a tool message.
    let sent = transport.client().sent();
    let research = sent[2].json();
    let last = research["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_lookup");
    assert!(last["content"].as_str().unwrap().contains("antenna"));
}

// ---- faults ----

fn task(text: &str) -> Vec<Message> {
    vec![Message::User { text: text.into() }]
}

fn complete(transport: &impl Transport, text: &str) -> AssistantMessage {
    let messages = task(text);
    let request = ModelRequest {
        system: "",
        messages: &messages,
        tools: &[],
        output_limit: None,
        probe: None,
    };
    pollster::block_on(transport.complete(request))
}

#[test]
fn a_500_is_a_retryable_provider_failure() {
    let server = mock("faults.json");
    for stream in [false, true] {
        let (transport, _) = transport(openai(&server, stream));
        let response = complete(&transport, "fault: 500");
        assert_eq!(response.stop_reason(), StopReason::Error);
        let error = response.error.clone().expect("a classified failure");
        assert_eq!((error.class, error.status), (FailureClass::Retryable, Some(500)));
        assert!(response.failure_message().contains("The server had an error"));
        assert_eq!(error.raw_body, None, "a provider error body is read, not kept raw");
    }
}

#[test]
fn a_429_carries_its_retry_after() {
    let server = mock("faults.json");
    let (transport, _) = transport(openai(&server, true));
    let response = complete(&transport, "fault: 429");
    let error = response.error.expect("a classified failure");
    assert_eq!((error.class, error.status), (FailureClass::Retryable, Some(429)));
    assert_eq!(error.retry_after_ms, Some(2_000));
}

#[test]
fn a_connection_closed_mid_stream_fails_typed_and_keeps_what_came() {
    let server = mock("faults.json");
    let (transport, deltas) = transport(openai(&server, true));
    let response = complete(&transport, "fault: cut");
    assert_eq!(response.stop_reason(), StopReason::Error);
    assert!(response.content.is_empty());
    let error = response.error.expect("a classified failure");
    assert_eq!((error.class, error.status), (FailureClass::Retryable, Some(200)));
    let raw = error.raw_body.expect("the partial body is kept");
    assert!(raw.contains("call_cut") && !raw.contains("[DONE]"), "{raw}");
    assert!(!deltas.borrow().is_empty(), "progress was reported before the cut");
}

#[test]
fn the_step_retries_through_503_and_429_honouring_retry_after() {
    let server = mock("faults.json");
    let (transport, _) = transport(openai(&server, true));
    let machine = step::<Answer>("You answer by calling submit.", "flaky")
        .retry(RetryPolicy { seed: 1, ..RetryPolicy::with_retries(3) })
        .build()
        .unwrap();
    let (value, _, delays) = run_step(machine, &transport);
    assert_eq!(value.expect("the third request succeeds").answer, "42");
    assert_eq!(delays.len(), 3);
    assert_eq!(delays[0], 0);
    assert!((250..=500).contains(&delays[1]), "backoff after the 503: {}", delays[1]);
    assert_eq!(delays[2], 1_000, "the 429's Retry-After");
    assert_eq!(transport.client().waits(), delays[1..].to_vec(), "the host waited as asked");
}

fn canned(replies: Vec<Vec<u8>>) -> (CannedServer, ProviderTransport<BlockingClient>) {
    let server = CannedServer::start(replies);
    let config = OpenAiConfig::new(format!("{}/v1", server.url()), MODEL).streaming(true);
    (server, ProviderTransport::new(Provider::OpenAi(config), BlockingClient::new()))
}

#[test]
fn an_html_error_page_is_kept_for_the_user() {
    let page = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
    let (server, transport) =
        canned(vec![reply("502 Bad Gateway", &[("Content-Type", "text/html")], page)]);
    let response = complete(&transport, "hello");
    let error = response.error.clone().expect("a classified failure");
    assert_eq!((error.class, error.status), (FailureClass::Retryable, Some(502)));
    assert_eq!(error.raw_body.as_deref(), Some(std::str::from_utf8(page).unwrap()));
    assert!(response.failure_message().contains("not a provider error"));
    let requests = server.requests();
    assert!(requests[0].starts_with("POST /v1/chat/completions HTTP/1.1"), "{}", requests[0]);
}

#[test]
fn truncated_json_and_streams_without_their_end_fail_typed() {
    let json = [("Content-Type", "application/json")];
    let events = [("Content-Type", "text/event-stream")];
    let first =
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n".as_slice();
    let (server, transport) = canned(vec![
        // A whole body cut short (the server closed the connection; no length was given).
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"choices\":[{\"message\":{\"content\":\"Hel"
            .to_vec(),
        // A 200 HTML page where JSON was expected.
        reply("200 OK", &[("Content-Type", "text/html")], b"<html>Log in to the Wi-Fi</html>"),
        // A stream whose connection dies mid-transfer (no final chunk).
        chunked("200 OK", &events, &[first], false),
        // A stream that ends cleanly but without [DONE].
        chunked("200 OK", &events, &[first], true),
        // A complete stream, for contrast.
        chunked("200 OK", &events, &[first, b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"], true),
        reply("200 OK", &json, br#"{"choices":[{"finish_reason":"stop","message":{"content":"fine"}}]}"#),
    ]);
    let cut = complete(&transport, "one");
    let error = cut.error.expect("truncated JSON fails");
    assert_eq!(error.class, FailureClass::Retryable);
    assert!(error.raw_body.unwrap().ends_with("\"content\":\"Hel"));

    let html = complete(&transport, "two");
    let error = html.error.expect("HTML fails");
    assert_eq!(error.class, FailureClass::NotRetryable);
    assert_eq!(error.raw_body.as_deref(), Some("<html>Log in to the Wi-Fi</html>"));

    let died = complete(&transport, "three");
    let error = died.error.clone().expect("a dead stream fails");
    assert_eq!((error.class, error.status), (FailureClass::Retryable, Some(200)));
    assert!(
        died.failure_message().contains("reading the response failed"),
        "{}",
        died.failure_message()
    );
    assert!(error.raw_body.unwrap().contains("Hel"));

    let no_done = complete(&transport, "four");
    assert!(no_done.failure_message().contains("[DONE]"), "{}", no_done.failure_message());
    assert_eq!(no_done.error.unwrap().class, FailureClass::Retryable);

    let complete_stream = complete(&transport, "five");
    assert_eq!(complete_stream.text_content(), "Hello");
    assert_eq!(complete_stream.stop_reason(), StopReason::Stop);

    // A server that ignored `stream: true` and answered with JSON is decoded whole.
    let whole = complete(&transport, "six");
    assert_eq!(whole.text_content(), "fine");
    assert_eq!(server.requests().len(), 6);
}

#[test]
fn no_server_at_all_is_a_retryable_failure_without_status() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", free.local_addr().unwrap());
    drop(free);
    let transport = ProviderTransport::new(
        Provider::OpenAi(OpenAiConfig::new(url, MODEL)),
        BlockingClient::new(),
    );
    let response = complete(&transport, "anyone there?");
    let error = response.error.expect("a classified failure");
    assert_eq!((error.class, error.status), (FailureClass::Retryable, None));
}

#[test]
fn prices_apply_to_dated_snapshots_and_the_usage_adds_up() {
    // A sanity check of the table the tests use, so a failure above is not a pricing typo.
    let table = prices();
    let price: Price = *table.get("claude-3-5-haiku-20241022").unwrap();
    let usage = Usage { input: 1_000_000, output: 0, cache_read: 0, cache_write: 0, cost: 0.0 };
    assert!(close(price.cost(&usage), 0.8));
}

/// A configuration's `timeoutMs` and `idleTimeoutMs` of `u64::MAX` (a job config is
/// untrusted) are a request without a practical deadline, not a panic when the client adds
/// them to the present instant.
#[test]
fn the_largest_timeouts_a_config_can_give_do_not_panic() {
    let body = br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hi."}}]}"#;
    let server =
        CannedServer::start(vec![reply("200 OK", &[("content-type", "application/json")], body)]);
    let provider: Provider = serde_json::from_value(json!({
        "api": "openai", "baseUrl": format!("{}/v1", server.url()), "model": MODEL,
        "timeoutMs": u64::MAX, "idleTimeoutMs": u64::MAX
    }))
    .unwrap();
    let transport = ProviderTransport::new(provider, BlockingClient::new());
    let response = complete(&transport, "hello?");
    assert_eq!(response.text_content(), "Hi.", "{response:?}");
}

#[test]
fn a_request_past_its_deadline_times_out_as_a_retryable_failure() {
    let server = RawServer::start(silent(Duration::from_secs(20)));
    let provider: Provider = serde_json::from_value(json!({
        "api": "openai", "baseUrl": format!("{}/v1", server.url()), "model": MODEL,
        "timeoutMs": 300
    }))
    .unwrap();
    let transport = ProviderTransport::new(provider, BlockingClient::new());
    let started = Instant::now();
    let response = complete(&transport, "anyone there?");
    let elapsed = started.elapsed();
    assert_eq!(transport.client().sent()[0].timeout_ms, Some(300), "the deadline is sent");
    assert!(elapsed < Duration::from_secs(5), "the deadline was not enforced: {elapsed:?}");
    let error = response.error.clone().expect("a classified failure");
    assert_eq!((error.class, error.status), (FailureClass::Retryable, None));
    assert!(response.failure_message().contains("timed out"), "{}", response.failure_message());
    assert!(server.client_left(), "the client hung up");
}

#[test]
fn a_body_past_the_size_cap_ends_the_request_at_once() {
    // A server that never stops sending (bounded at 60 s for the test's sake).
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
    let server =
        RawServer::start(endless(head.to_owned(), vec![b' '; 64 * 1024], Duration::from_secs(60)));
    let transport = ProviderTransport::new(
        Provider::OpenAi(OpenAiConfig::new(format!("{}/v1", server.url()), MODEL)),
        BlockingClient::new(),
    );
    let started = Instant::now();
    let response = complete(&transport, "hello");
    let elapsed = started.elapsed();
    let error = response.error.clone().expect("a classified failure");
    assert_eq!((error.class, error.status), (FailureClass::NotRetryable, Some(200)));
    assert!(response.failure_message().contains("64 MiB"), "{}", response.failure_message());
    assert!(elapsed < Duration::from_secs(30), "read the runaway body to its end: {elapsed:?}");
    assert!(server.client_left(), "the client stopped reading and hung up");
}

#[test]
fn a_cancel_aborts_the_stream_being_read_and_ends_the_run_cancelled() {
    // One text event, then a stream that never ends.
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\
                data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";
    let server = RawServer::start(endless(
        head.to_owned(),
        b": still here\n".to_vec(),
        Duration::from_secs(60),
    ));
    let config = OpenAiConfig::new(format!("{}/v1", server.url()), MODEL).streaming(true);
    let cancel = Cancel::new();
    let stop = cancel.clone();
    let transport = ProviderTransport::new(Provider::OpenAi(config), BlockingClient::new())
        .with_cancel(cancel.clone());
    // The user presses Stop when the first text arrives.
    let options = DriveOptions::new().cancel(cancel).events(move |event| {
        if matches!(event, Event::Delta { delta: Delta::Text { .. }, .. }) {
            stop.cancel("the user pressed stop");
        }
    });
    let started = Instant::now();
    let error =
        pollster::block_on(drive_with(answer_step(), &transport, &NoTools, options)).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(30), "the stream was read on");
    assert_eq!(error.kind(), verity_core::FailureKind::Cancelled, "{error}");
    assert!(error.message().contains("the user pressed stop"), "{error}");
    assert_eq!(transport.client().sent().len(), 1);
    assert!(server.client_left());

    // The response the transport returns itself is `aborted`, which is never retried.
    let cancel = Cancel::new();
    cancel.cancel("before");
    let transport = ProviderTransport::new(
        Provider::OpenAi(OpenAiConfig::new("http://127.0.0.1:9/v1", MODEL)),
        BlockingClient::new(),
    )
    .with_cancel(cancel);
    let response = complete(&transport, "hello");
    assert_eq!(response.stop_reason(), StopReason::Aborted);
    assert!(transport.client().sent().is_empty(), "nothing is sent after a cancel");
    let policy = RetryPolicy::with_retries(3);
    assert_eq!(verity_core::retry::retry_delay(&policy, 0, &response), None);
}
