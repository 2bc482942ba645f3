//! The verifier route of the assess position (issue 28): its requests, the decoding of recorded
//! llama.cpp, OpenAI and Anthropic answers, bad probabilities, whole checks through a scripted
//! model reaching each verdict with the citations that decided it, and a save and restore in
//! the middle of the route.

mod common;

use std::sync::Arc;

use serde_json::{Value, json};
use verity_core::claim::verifier::{
    self, AssessMode, ProbabilityIssue, ScoreSource, VerifierOptions, read_answer,
};
use verity_core::claim::{ClaimCheck, ClaimOptions, prompt};
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::openai::{self, OutputMode};
use verity_core::provider::{HttpResponse, anthropic};
use verity_core::retrieve::Corpus;
use verity_core::{
    AnthropicConfig, AssistantMessage, ClaimFailureKind, FirstToken, Input, Job, Machine, Message,
    OpenAiConfig, Output, OwnedModelRequest, Probe, Provider, Report, Route, ScriptedModel,
    TokenLogprob, Verdict, drive,
};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const LLAMA_YES: &str = include_str!("fixtures/verifier/llama-cpp-yes.json");
const OPENAI_NO: &str = include_str!("fixtures/verifier/openai-no.json");
const LLAMA_STREAM_NO: &str = include_str!("fixtures/verifier/llama-cpp-stream-no.txt");
const ANTHROPIC_YES: &str = include_str!("fixtures/verifier/anthropic-yes.json");
/// Recorded, not written by hand: llama.cpp's server (xllamacpp) with Qwen2.5-Coder-0.5B
/// answering the route's question about a passage that supports the claim (it says No).
const LLAMA_RECORDED: &str = include_str!("fixtures/verifier/llama-cpp-recorded-no.json");

const CLAIM: &str = "A river ferry ran until 1966.";
const SUPPORTS: &str = "The river ferry ran until 1966, when the bridge opened.";
const CONTRADICTS: &str = "The river ferry ran until 1972, when the bridge opened.";
const HALL: &str = "The town hall was rebuilt in brick after the fire.";
const MARKET: &str = "The market square hosts a fair every spring.";
const SCHOOL: &str = "The school moved to a new building on the hill.";

fn corpus() -> Arc<IndexedCorpus> {
    let pairs = [
        ("supports", SUPPORTS),
        ("contradicts", CONTRADICTS),
        ("hall", HALL),
        ("market", MARKET),
        ("school", SCHOOL),
    ];
    IndexedCorpus::new(Corpus::from_pairs(pairs).unwrap())
}

fn verifier_options() -> ClaimOptions {
    ClaimOptions { assess: AssessMode::Verifier(VerifierOptions::default()), ..Default::default() }
}

/// An answer with the first token's probabilities: `P(Yes) = p`, `P(No) = 1 - p`, sampled as
/// the likelier.
fn answer(p: f64) -> AssistantMessage {
    let word = if p >= 0.5 { "Yes" } else { "No" };
    let entry = |token: &str, p: f64| TokenLogprob { token: token.into(), logprob: Some(p.ln()) };
    let top = vec![entry("Yes", p), entry("No", 1.0 - p)];
    let sampled = entry(word, if p >= 0.5 { p } else { 1.0 - p });
    AssistantMessage::text(word).with_first_token(FirstToken { sampled, top })
}

fn summary() -> AssistantMessage {
    AssistantMessage::tool_call("s1", "submit", json!({"text": "The evidence decides it."}))
}

fn user_text(request: &OwnedModelRequest) -> &str {
    match &request.messages[0] {
        Message::User { text } => text,
        other => panic!("not a user message: {other:?}"),
    }
}

/// The passage a verifier request asks about (its Document line, as shown).
fn document(request: &OwnedModelRequest) -> String {
    let text = user_text(request);
    text.lines().next().unwrap().strip_prefix("Document: ").unwrap().to_owned()
}

fn run(check: ClaimCheck, model: &ScriptedModel) -> Result<Report, verity_core::ClaimFailed> {
    pollster::block_on(drive(check, model, &verity_core::NoTools))
}

// ---------------------------------------------------------------- requests and decoding

#[test]
fn a_probe_asks_for_one_token_and_its_probabilities_whatever_the_configuration_says() {
    let messages = vec![Message::User { text: prompt::verifier_prompt(CLAIM, SUPPORTS) }];
    let request = verity_core::ModelRequest {
        system: prompt::VERIFY_SYSTEM,
        messages: &messages,
        tools: &[],
        output_limit: Some(1),
        probe: Some(Probe { top_logprobs: 10 }),
    };
    // The llama.cpp preset's configuration: streamed, 1024 tokens, constrained output.
    let preset: Provider = serde_json::from_value(json!({
        "api": "openai", "baseUrl": "http://127.0.0.1:8080/v1", "model": "qwen0.5",
        "output": "json-schema", "maxTokens": 1024, "temperature": 0.7, "stream": true,
        "reasoningEffort": "low"
    }))
    .unwrap();
    let body = preset.encode(&request).json();
    assert_eq!(body["logprobs"], true);
    assert_eq!(body["top_logprobs"], 10);
    assert_eq!(body["max_tokens"], 1);
    assert_eq!(body["temperature"], 0.0);
    for absent in ["stream", "stream_options", "reasoning_effort", "response_format", "tools"] {
        assert!(body.get(absent).is_none(), "{absent} is not sent: {body}");
    }
    assert!(body.get("cache_prompt").is_none(), "only sent when configured");
    let cached = OpenAiConfig { cache_prompt: Some(true), ..OpenAiConfig::llama_server("q") };
    assert_eq!(openai::encode(&request, &cached).json()["cache_prompt"], true);
    // OpenAI itself: the limit goes in max_completion_tokens; top_logprobs at most 20.
    let gpt = OpenAiConfig::openai("gpt-4o-mini", "sk-test");
    let wide = verity_core::ModelRequest { probe: Some(Probe { top_logprobs: 99 }), ..request };
    let body = openai::encode(&wide, &gpt).json();
    assert_eq!(
        (body["max_completion_tokens"].clone(), body["top_logprobs"].clone()),
        (json!(1), json!(20))
    );
    // Anthropic: one token at temperature 0, no thinking, not streamed, no logprobs field.
    let mut claude = AnthropicConfig::new("claude-haiku-4-5", "k").streaming(true);
    claude.thinking = Some(verity_core::provider::Thinking::Enabled { budget_tokens: 2048 });
    let body = anthropic::encode(&request, &claude).json();
    assert_eq!((body["max_tokens"].clone(), body["temperature"].clone()), (json!(1), json!(0.0)));
    for absent in ["thinking", "stream", "logprobs", "top_logprobs"] {
        assert!(body.get(absent).is_none(), "{absent} is not sent: {body}");
    }
    // An ordinary request is unchanged.
    let ordinary = verity_core::ModelRequest { probe: None, output_limit: None, ..request };
    let body = preset.encode(&ordinary).json();
    assert_eq!((body["max_tokens"].clone(), body["stream"].clone()), (json!(1024), json!(true)));
    assert!(body.get("logprobs").is_none());
}

#[test]
fn a_recorded_llama_cpp_answer_gives_s_from_its_top_logprobs() {
    let config = OpenAiConfig { output: OutputMode::JsonSchema, ..OpenAiConfig::llama_server("q") };
    let response = openai::decode(&HttpResponse::new(200, LLAMA_YES), &config);
    assert_eq!(response.text_content(), "Yes");
    let first = response.first_token.clone().unwrap();
    assert_eq!(first.sampled.token, "Yes");
    assert_eq!(first.top.len(), 10);
    let reading = read_answer(&response);
    assert_eq!(reading.source, ScoreSource::Probabilities);
    // Yes + yes + " Yes" + YES over that plus No + no: (0.9 + 0.01 + 0.005 + 0.0005) / (0.9155
    // + 0.09 + 0.002).
    let expected = 0.9155 / (0.9155 + 0.092);
    assert!((reading.score.unwrap() - expected).abs() < 1e-6, "{reading:?}");
    // The host's path: a streaming configuration's decoder, given the whole JSON body the
    // probe asked for (no `stream`), reads the same.
    let preset = Provider::OpenAi(config.streaming(true));
    let mut decoder = preset.decoder(200, &[("content-type".into(), "application/json".into())]);
    decoder.feed(LLAMA_YES.as_bytes());
    assert_eq!(read_answer(&decoder.finish()), reading);
}

#[test]
fn a_recorded_answer_of_a_real_llama_cpp_server_gives_s_from_its_variants() {
    let response =
        openai::decode(&HttpResponse::new(200, LLAMA_RECORDED), &OpenAiConfig::llama_server("q"));
    assert_eq!(response.usage.cache_read, 21, "the server reused a cached prefix");
    let reading = read_answer(&response);
    assert_eq!(reading.source, ScoreSource::Probabilities);
    // Yes, YES, " Yes" against No, NO, " No"; "None", "Not", "Y" and "To" are neither.
    let p = |l: f64| l.exp();
    let yes = p(-1.034_419_775_009_155_3) + p(-8.356_831_550_598_145) + p(-8.963_664_054_870_605);
    let no = p(-0.442_882_329_225_540_16) + p(-7.848_578_453_063_965) + p(-9.028_755_187_988_281);
    assert!((reading.score.unwrap() - yes / (yes + no)).abs() < 1e-9, "{reading:?}");
}

#[test]
fn a_recorded_openai_answer_gives_s_from_its_top_logprobs() {
    let config = OpenAiConfig::openai("gpt-4o-mini", "sk-test");
    let response = openai::decode(&HttpResponse::new(200, OPENAI_NO), &config);
    assert_eq!(response.usage.cache_read, 128, "the prompt cache is reported");
    let reading = read_answer(&response);
    assert_eq!(reading.source, ScoreSource::Probabilities);
    let s = reading.score.unwrap();
    assert!(s > 3.3e-4 && s < 3.4e-4, "{s}");
}

#[test]
fn a_streamed_llama_cpp_answer_is_read_from_its_first_chunk() {
    let provider = Provider::OpenAi(OpenAiConfig::llama_server("q").streaming(true));
    let mut decoder = provider.decoder(200, &[("Content-Type".into(), "text/event-stream".into())]);
    // In pieces, as a socket delivers it.
    for piece in LLAMA_STREAM_NO.as_bytes().chunks(37) {
        decoder.feed(piece);
    }
    let response = decoder.finish();
    assert_eq!(response.text_content(), "No");
    let reading = read_answer(&response);
    assert_eq!(reading.source, ScoreSource::Probabilities);
    assert!((reading.score.unwrap() - 0.3 / 1.01).abs() < 1e-6, "{reading:?}");
    // The whole body through the same decoder gives the same first token.
    let mut whole = provider.decoder(200, &[]);
    whole.feed(LLAMA_STREAM_NO.as_bytes());
    assert_eq!(whole.finish().first_token, response.first_token);
}

#[test]
fn anthropic_gives_no_probabilities_and_the_sampled_token_is_read_instead() {
    let response = anthropic::decode(
        &HttpResponse::new(200, ANTHROPIC_YES),
        &AnthropicConfig::new("claude-haiku-4-5", "k"),
    );
    assert!(response.first_token.is_none());
    let reading = read_answer(&response);
    assert_eq!(reading.score, Some(1.0));
    assert_eq!(reading.source, ScoreSource::SampledToken);
    assert_eq!(reading.issue, Some(ProbabilityIssue::Missing));
}

#[test]
fn bad_probabilities_on_the_wire_are_typed_never_a_panic() {
    let config = OpenAiConfig::llama_server("q");
    let body = |logprobs: Value, content: &str| {
        json!({"choices": [{"finish_reason": "length", "index": 0,
            "message": {"role": "assistant", "content": content}, "logprobs": logprobs}]})
        .to_string()
    };
    let read = |logprobs: Value, content: &str| {
        read_answer(&openai::decode(&HttpResponse::new(200, body(logprobs, content)), &config))
    };
    // No logprobs at all (a server that ignored the field): the sampled text.
    let missing = read(Value::Null, "Yes");
    assert_eq!(
        (missing.source, missing.issue),
        (ScoreSource::SampledToken, Some(ProbabilityIssue::Missing))
    );
    // Log probabilities that are not numbers (JSON has no NaN; a server may send a string or
    // null): not finite, so the sampled token.
    let nan = read(
        json!({"content": [{"token": "No", "logprob": "NaN", "top_logprobs": [
            {"token": "No", "logprob": "NaN"}, {"token": "Yes", "logprob": null}]}]}),
        "No",
    );
    assert_eq!((nan.score, nan.issue), (Some(0.0), Some(ProbabilityIssue::NotFinite)));
    // A list without Yes or No, and a sampled token that is neither: unknown.
    let neither = read(
        json!({"content": [{"token": "The", "logprob": -0.1, "top_logprobs": [
            {"token": "The", "logprob": -0.1}, {"token": "Based", "logprob": -2.3}]}]}),
        "The",
    );
    assert_eq!(neither.source, ScoreSource::Unknown);
    assert_eq!((neither.score, neither.issue), (None, Some(ProbabilityIssue::NoYesNo)));
    // Shapes that are not the format at all.
    for logprobs in [json!([]), json!({"content": []}), json!({"content": [7]}), json!("x")] {
        assert_eq!(read(logprobs, "Maybe").source, ScoreSource::Unknown);
    }
}

// ---------------------------------------------------------------- whole checks

#[test]
fn a_supported_claim_asks_the_top_k_passages_and_cites_the_one_that_supports_it() {
    let evidence: Vec<String> = [HALL, SUPPORTS, MARKET, SCHOOL].map(String::from).to_vec();
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, verifier_options());
    let model =
        ScriptedModel::new([answer(0.5), answer(0.05), answer(0.97), answer(0.02), summary()])
            .recording();
    let report = run(check, &model).unwrap();

    let requests = model.recorded();
    assert_eq!(requests.len(), 5, "the prior, k = 3 questions, then the summary");
    let asked: Vec<String> = requests[..4].iter().map(document).collect();
    assert_eq!(
        asked,
        ["", HALL, SUPPORTS, MARKET],
        "the claim alone first, then the top 3 in order; the 4th is not asked"
    );
    for request in &requests[..4] {
        assert_eq!(request.probe, Some(Probe { top_logprobs: 10 }));
        assert_eq!(request.output_limit, Some(1));
        assert!(request.tools.is_empty());
        assert!(request.system.starts_with(prompt::VERIFY_SYSTEM));
        assert!(user_text(request).contains(&format!("\nClaim: {CLAIM}\n")));
        assert!(
            user_text(request)
                .ends_with("Is the claim supported by the document? Answer Yes or No.")
        );
    }
    assert_eq!(requests[4].probe, None, "the summary is an ordinary call");

    assert_eq!(report.assessment.verdict, Verdict::Supported);
    assert_eq!(report.assessment.citations, [SUPPORTS]);
    assert!(report.assessment.confidence > 0.5);
    let rationale = report.assessment.rationale.clone().unwrap();
    assert!(rationale.starts_with("Verifier route: P(supported) "), "{rationale}");
    assert!(rationale.ends_with("; best passage S 0.97, without a document 0.50."), "{rationale}");
    assert_eq!(report.route, Route::SingleCall);
    assert_eq!(report.requests, 5);
    let record = report.verifier.as_ref().expect("the report says the verifier assessed");
    assert_eq!(record.questions.len(), 4);
    assert!(record.questions[0].question.prior);
    assert!(record.questions.iter().all(|q| q.reading.source == ScoreSource::Probabilities));
    assert!(!record.fallback);
    assert!((record.questions[2].reading.score.unwrap() - 0.97).abs() < 1e-9);
    // The report's JSON names the route's parts.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["verifier"]["questions"][0]["prior"], true);
    assert_eq!(json["verifier"]["questions"][2]["evidence"], 1);
    assert!(json["verifier"]["questions"][2].get("prior").is_none());
    assert_eq!(json["verifier"]["questions"][2]["source"], "probabilities");
}

#[test]
fn a_contradicted_claim_cites_the_passage_about_it() {
    let evidence: Vec<String> = [MARKET, CONTRADICTS, HALL].map(String::from).to_vec();
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, verifier_options());
    // The unrelated market passage gets the highest S; the passage about the ferry is cited.
    let model =
        ScriptedModel::new([answer(0.5), answer(0.12), answer(0.06), answer(0.03), summary()]);
    let report = run(check, &model).unwrap();
    assert_eq!(report.assessment.verdict, Verdict::Contradicted, "{:?}", report.assessment);
    assert_eq!(report.assessment.citations, [CONTRADICTS]);
    assert_eq!(report.requests, 5);
    assert_eq!(report.verifier.unwrap().features.missing_numbers, 1.0);
}

#[test]
fn a_bound_on_a_number_is_checked_against_the_passage_whatever_the_model_says_of_both() {
    // The model gives both claims the same middling S, as a small model does: the bound is
    // arithmetic, and the passage's number keeps one and breaks the other.
    let ferry = "The river ferry carried 1,159 passengers a day until the bridge opened.";
    let check = |claim: &str| {
        let evidence: Vec<String> = [ferry, MARKET].map(String::from).to_vec();
        let check = ClaimCheck::with_evidence(claim, corpus(), evidence, verifier_options());
        let model = ScriptedModel::new([answer(0.5), answer(0.6), answer(0.05), summary()]);
        run(check, &model).unwrap()
    };
    let kept = check("The river ferry carried more than 1,100 passengers a day.");
    let broken = check("The river ferry carried more than 1,500 passengers a day.");
    assert_eq!(kept.assessment.verdict, Verdict::Supported, "{:?}", kept.assessment);
    assert_eq!(kept.verifier.as_ref().unwrap().features.compared_numbers, 1.0);
    assert_eq!(broken.assessment.verdict, Verdict::Contradicted, "{:?}", broken.assessment);
    assert_eq!(broken.assessment.citations, [ferry]);
    assert_eq!(broken.verifier.as_ref().unwrap().features.compared_numbers, -1.0);
    let rationale = broken.assessment.rationale.unwrap();
    assert!(
        rationale.ends_with("; the claim's \"more than 1,500\" fails against the passage's 1,159."),
        "{rationale}"
    );
    // The report's JSON carries the feature, and one written before it is still read.
    let mut json = serde_json::to_value(&kept).unwrap();
    assert_eq!(json["verifier"]["features"]["comparedNumbers"], 1.0);
    json["verifier"]["features"].as_object_mut().unwrap().remove("comparedNumbers");
    let old: Report = serde_json::from_value(json).unwrap();
    assert_eq!(old.verifier.unwrap().features.compared_numbers, 0.0);
}

#[test]
fn insufficient_is_derived_then_research_and_a_reassessment_by_the_same_route() {
    // First round: nothing about the claim. Research finds the supporting passage; the second
    // round asks only about what it found.
    let evidence: Vec<String> = [HALL].map(String::from).to_vec();
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, verifier_options());
    let model = ScriptedModel::new([
        answer(0.5),
        answer(0.1),
        AssistantMessage::tool_call("r1", "lookup_evidence", json!({"query": "river ferry 1966"})),
        AssistantMessage::text("Found it."),
        answer(0.96),
        answer(0.2),
        summary(),
    ])
    .recording();
    let report = run(check, &model).unwrap();
    let requests = model.recorded();
    assert_eq!(document(&requests[0]), "", "the claim alone, once");
    assert_eq!(document(&requests[1]), HALL);
    let second: Vec<String> =
        requests.iter().skip(4).filter(|r| r.probe.is_some()).map(document).collect();
    assert_eq!(second, [SUPPORTS, CONTRADICTS], "only the new passages, best first, no prior");
    assert_eq!(report.route, Route::AgentEscalation);
    assert_eq!(report.assessment.verdict, Verdict::Supported);
    assert_eq!(report.assessment.citations, [SUPPORTS]);
    assert_eq!(report.verifier.unwrap().questions.len(), 4, "both rounds are recorded");
}

#[test]
fn the_reassessment_asks_what_research_found_before_what_the_first_round_left() {
    // Five retrieved items, three asked; research finds the supporting passage, which is asked
    // first in the second round, then the first round's leftovers, k in all.
    let evidence: Vec<String> = [HALL, MARKET, SCHOOL, CONTRADICTS].map(String::from).to_vec();
    let options = ClaimOptions {
        assess: AssessMode::Verifier(VerifierOptions { k: 2, ..Default::default() }),
        ..Default::default()
    };
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, options);
    let model = ScriptedModel::new([
        answer(0.5),
        answer(0.1),
        answer(0.1),
        AssistantMessage::tool_call("r1", "lookup_evidence", json!({"query": "ferry 1966 bridge"})),
        AssistantMessage::text("Found it."),
        answer(0.95),
        answer(0.1),
        summary(),
    ])
    .recording();
    let report = run(check, &model).unwrap();
    let asked: Vec<String> =
        model.recorded().iter().filter(|r| r.probe.is_some()).map(document).collect();
    assert_eq!(asked, ["", HALL, MARKET, SUPPORTS, SCHOOL]);
    assert_eq!(report.assessment.verdict, Verdict::Supported);
    assert_eq!(report.assessment.citations, [SUPPORTS]);
    let record = report.verifier.unwrap();
    assert_eq!(record.questions[3].question.evidence, 4, "research's item follows the first four");
}

#[test]
fn a_claim_nothing_decides_ends_insufficient_without_citations() {
    let evidence: Vec<String> = [HALL].map(String::from).to_vec();
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, verifier_options());
    let model = ScriptedModel::new([
        answer(0.5),
        answer(0.1),
        AssistantMessage::tool_call("r1", "lookup_evidence", json!({"query": "market school"})),
        AssistantMessage::text("Nothing more."),
        answer(0.08),
        answer(0.04),
        summary(),
    ]);
    let report = run(check, &model).unwrap();
    assert_eq!(report.assessment.verdict, Verdict::Insufficient, "{:?}", report.assessment);
    assert!(report.assessment.citations.is_empty());
    assert_eq!(report.route, Route::AgentEscalation);
}

#[test]
fn without_probabilities_the_route_reads_the_sampled_token_and_the_report_says_so() {
    let evidence: Vec<String> = [HALL, SUPPORTS, MARKET].map(String::from).to_vec();
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, verifier_options());
    let claude = AnthropicConfig::new("claude-haiku-4-5", "k");
    let yes = anthropic::decode(&HttpResponse::new(200, ANTHROPIC_YES), &claude);
    // The prior is a sampled Yes: no prior to calibrate by, so it is left out (calibrated by
    // it, the supporting passage's Yes would count for nothing).
    let model = ScriptedModel::new([
        yes.clone(),
        AssistantMessage::text("No"),
        yes,
        AssistantMessage::text("No."),
        summary(),
    ]);
    let report = run(check, &model).unwrap();
    assert_eq!(report.assessment.verdict, Verdict::Supported);
    assert_eq!(report.assessment.citations, [SUPPORTS]);
    let record = report.verifier.unwrap();
    assert_eq!(verifier::prior_score(&record.questions), None);
    assert!(record.fallback);
    assert!(record.questions.iter().all(|q| q.reading.source == ScoreSource::SampledToken
        && q.reading.issue == Some(ProbabilityIssue::Missing)));
    assert!(report.assessment.rationale.unwrap().contains("sampled token"));
}

#[test]
fn bad_answers_in_a_check_are_unknown_scores_not_a_failure() {
    let evidence: Vec<String> = [SUPPORTS, HALL, MARKET].map(String::from).to_vec();
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, verifier_options());
    let nan = FirstToken {
        sampled: TokenLogprob { token: "Hmm".into(), logprob: Some(f64::NAN) },
        top: vec![TokenLogprob { token: "Yes".into(), logprob: Some(f64::NAN) }],
    };
    let model = ScriptedModel::new([
        answer(0.5),
        AssistantMessage::text("Hmm").with_first_token(nan),
        AssistantMessage::text("I think"),
        answer(0.05),
        AssistantMessage::tool_call("r1", "lookup_evidence", json!({"query": "school"})),
        AssistantMessage::text("Done."),
        answer(0.05),
        summary(),
    ]);
    let report = run(check, &model).unwrap();
    let record = report.verifier.unwrap();
    let sources: Vec<(ScoreSource, Option<ProbabilityIssue>)> =
        record.questions.iter().map(|q| (q.reading.source, q.reading.issue)).collect();
    assert_eq!(sources[1], (ScoreSource::Unknown, Some(ProbabilityIssue::NotFinite)));
    assert_eq!(sources[2], (ScoreSource::Unknown, Some(ProbabilityIssue::Missing)));
    assert!(report.assessment.confidence.is_finite());
}

#[test]
fn a_long_passage_is_asked_first_where_it_speaks_of_the_claim_within_k_plus_one_requests() {
    let long =
        format!("{} {}", "The mill by the river ground flour for the town. ".repeat(60), SUPPORTS);
    // Fewer passages than k: the long one's chunk with the claim's words is asked first, and
    // its other chunk takes the third place.
    let evidence = vec![long.clone(), HALL.to_owned()];
    let options = ClaimOptions {
        assess: AssessMode::Verifier(VerifierOptions { chunk_chars: 2500, ..Default::default() }),
        ..Default::default()
    };
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, options);
    let model =
        ScriptedModel::new([answer(0.5), answer(0.95), answer(0.1), answer(0.1), summary()])
            .recording();
    let report = run(check, &model).unwrap();
    let asked: Vec<String> = model.recorded()[..4].iter().map(document).collect();
    assert_eq!(asked[0], "", "the prior");
    assert!(long.ends_with(&asked[1]) && asked[1].contains(SUPPORTS), "{asked:?}");
    assert_eq!(asked[2], HALL);
    assert!(long.starts_with(&asked[3]) && !asked[3].contains(SUPPORTS), "{asked:?}");
    assert_eq!(report.requests, 5, "k + 1 questions and the summary");
    assert_eq!(report.assessment.verdict, Verdict::Supported);
    assert_eq!(report.assessment.citations, [long], "the whole passage, quoted verbatim");
}

#[test]
fn the_features_read_the_chunk_the_model_judged_not_the_whole_document() {
    // The chunk about the ferry says 1972; the claim's 1966 is elsewhere in the document, about
    // something else. Read over the whole document, the claim's number would not be missing.
    let filler = "The mill by the river ground flour for the town. ".repeat(60);
    let long = format!("{CONTRADICTS} {filler}The mill closed in 1966.");
    let evidence = vec![long.clone()];
    let options = ClaimOptions {
        assess: AssessMode::Verifier(VerifierOptions { chunk_chars: 1000, ..Default::default() }),
        ..Default::default()
    };
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, options);
    let model = ScriptedModel::new([answer(0.5), answer(0.1), answer(0.1), answer(0.1), summary()])
        .recording();
    let report = run(check, &model).unwrap();
    assert!(document(&model.recorded()[1]).contains("1972"), "the ferry's chunk first");
    let features = report.verifier.expect("the verifier's record").features;
    assert!((features.missing_numbers - 1.0).abs() < 1e-9, "{features:?}");
    assert_eq!(report.assessment.verdict, Verdict::Contradicted);
    assert_eq!(report.assessment.citations, [long], "the passage is cited whole");
}

#[test]
fn research_is_not_asked_for_when_the_corpus_holds_nothing_beyond_the_evidence() {
    // The whole corpus is the evidence (a document checked alone): the first round finds it
    // insufficient, and no lookup could find another passage, so no research request is made.
    let corpus =
        IndexedCorpus::new(Corpus::from_pairs([("hall", HALL), ("market", MARKET)]).unwrap());
    let evidence = vec![HALL.to_owned(), MARKET.to_owned()];
    let check = ClaimCheck::with_evidence(CLAIM, corpus, evidence, verifier_options());
    let model = ScriptedModel::new([answer(0.5), answer(0.05), answer(0.05)]).recording();
    let failed = run(check, &model).unwrap_err();
    assert_eq!(failed.kind(), ClaimFailureKind::NoNewEvidence, "{}", failed.message());
    assert_eq!(model.recorded().len(), 3, "the prior and two questions, no research");
    assert!(failed.message().contains("nothing beyond"), "{}", failed.message());
}

#[test]
fn a_failed_question_fails_the_check_as_an_assessment_request() {
    let evidence: Vec<String> = [SUPPORTS].map(String::from).to_vec();
    let check = ClaimCheck::with_evidence(CLAIM, corpus(), evidence, verifier_options());
    let failed = run(check, &ScriptedModel::new([])).unwrap_err();
    assert_eq!(failed.kind(), ClaimFailureKind::AssessRequest);
    assert!(failed.message().contains("verifier request failed"), "{}", failed.message());
}

// ---------------------------------------------------------------- the job protocol

fn verifier_job() -> (Job, Arc<IndexedCorpus>) {
    let corpus = corpus();
    let config = json!({
        "kind": "claim",
        "claim": CLAIM,
        "corpus": corpus.id(),
        "assess": {"verifier": {"k": 3, "topLogprobs": 5}},
    });
    (Job::from_json(&config.to_string(), &[Arc::clone(&corpus)]).unwrap(), corpus)
}

#[test]
fn a_job_config_selects_the_route_and_a_restore_mid_route_repeats_no_answered_request() {
    let (mut job, corpus) = verifier_job();
    let retrieved = job.claim_check().unwrap().evidence().len();
    let mut asked: Vec<(u64, String)> = Vec::new();
    let mut answers = vec![answer(0.5), answer(0.9), answer(0.1), answer(0.2)].into_iter();
    // Answer the first question, then save and restore before each further one.
    let report = loop {
        let (id, request) = match job.poll_output() {
            Output::CallModel(call) => (call.id, call.request.to_owned_request()),
            Output::Done => break job.finish().unwrap(),
            other => panic!("unexpected output {other:?}"),
        };
        if request.probe.is_none() {
            job.handle_input(Input::ModelResponse { call: id, response: summary() }).unwrap();
            continue;
        }
        assert_eq!(request.probe, Some(Probe { top_logprobs: 5 }));
        // Level-triggered across a restore: the pending question is the same, with its id.
        let saved = job.save();
        job = Job::restore(&saved, &[Arc::clone(&corpus)]).unwrap();
        let Output::CallModel(again) = job.poll_output() else { panic!("not a model call") };
        assert_eq!(
            (again.id, document(&again.request.to_owned_request())),
            (id, document(&request))
        );
        asked.push((id.0, document(&request)));
        job.handle_input(Input::ModelResponse { call: id, response: answers.next().unwrap() })
            .unwrap();
        // Restored after the answer: the answered question is not asked again.
        job = Job::restore(&job.save(), &[Arc::clone(&corpus)]).unwrap();
    };
    // BM25 retrieves the passages sharing a word with the claim; the top 3 of them are asked.
    assert!(retrieved >= 2, "{retrieved}");
    assert_eq!(asked.len(), retrieved.min(3) + 1, "the prior and the top 3");
    assert_eq!(asked[0].1, "", "the prior first");
    let mut passages: Vec<&String> = asked.iter().map(|(_, p)| p).collect();
    passages.dedup();
    assert_eq!(passages.len(), asked.len(), "each question asked once: {asked:?}");
    let mut ids: Vec<u64> = asked.iter().map(|(id, _)| *id).collect();
    ids.dedup();
    assert_eq!(ids.len(), asked.len(), "fresh ids");
    let report = Report::from_job_value(&report).unwrap();
    assert_eq!(report.requests as usize, asked.len() + 1, "the questions and the summary");
    assert_eq!(report.verifier.unwrap().questions.len(), asked.len());
    assert_eq!(report.assessment.verdict, Verdict::Supported);
}

#[test]
fn the_default_stays_the_agent_assessment() {
    let corpus = corpus();
    let config = json!({"kind": "claim", "claim": CLAIM, "corpus": corpus.id()});
    let job_config = verity_core::JobConfig::from_json(&config.to_string()).unwrap();
    let round = serde_json::to_value(&job_config).unwrap();
    assert!(round.get("assess").is_none(), "the default is left out: {round}");
    let mut job = Job::new(job_config, &[corpus]).unwrap();
    let Output::CallModel(call) = job.poll_output() else { panic!() };
    assert_eq!(call.request.probe, None);
    assert_eq!(call.request.tools[0].name, "record_assessment");
    let bad =
        json!({"kind": "claim", "claim": CLAIM, "corpus": "x", "assess": {"verifier": {"k": 0}}});
    let error = verity_core::JobConfig::from_json(&bad.to_string()).unwrap_err();
    assert_eq!(error.path(), "assess", "{error}");
    let _ = verifier::DEFAULT_K;
}

// ---------------------------------------------------------------- properties

#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use verity_core::claim::verifier::{ScoredPassage, VerifierWeights, decide, yes_no_score};

    fn logprob() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            Just(None),
            Just(Some(f64::NAN)),
            Just(Some(f64::INFINITY)),
            Just(Some(f64::NEG_INFINITY)),
            Just(Some(-9999.0)),
            (-30.0f64..=5.0).prop_map(Some),
        ]
    }

    fn token() -> impl Strategy<Value = TokenLogprob> {
        let text = prop_oneof![
            Just("Yes".to_owned()),
            Just(" no".to_owned()),
            Just("\u{2581}YES".to_owned()),
            Just("The".to_owned()),
            "\\PC{0,4}",
        ];
        (text, logprob()).prop_map(|(token, logprob)| TokenLogprob { token, logprob })
    }

    fn score() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            Just(None),
            Just(Some(f64::NAN)),
            Just(Some(f64::INFINITY)),
            Just(Some(-1.0)),
            Just(Some(2.0)),
            (0.0f64..=1.0).prop_map(Some),
        ]
    }

    proptest! {
        #[test]
        fn any_probabilities_read_as_a_score_in_range_or_a_typed_issue(
            sampled in token(),
            top in proptest::collection::vec(token(), 0..12),
            text in "\\PC{0,12}",
        ) {
            let first = FirstToken { sampled, top };
            if let Ok(s) = yes_no_score(&first) {
                prop_assert!((0.0..=1.0).contains(&s), "{s}");
            }
            let reading = read_answer(&AssistantMessage::text(text).with_first_token(first));
            match reading.source {
                ScoreSource::Unknown => prop_assert!(reading.score.is_none()),
                _ => prop_assert!(reading.score.is_some_and(|s| (0.0..=1.0).contains(&s))),
            }
        }

        #[test]
        fn any_scores_give_a_verdict_with_a_finite_confidence_and_valid_citations(
            claim in "[a-z0-9 ,.]{0,60}",
            passages in proptest::collection::vec(("[a-z0-9 ,.]{0,80}", score()), 0..6),
            prior in score(),
        ) {
            let scored: Vec<ScoredPassage<'_>> = passages
                .iter()
                .map(|(text, score)| ScoredPassage { text, score: *score })
                .collect();
            let decision = decide(&claim, &scored, prior, VerifierWeights::builtin());
            prop_assert!((0.0..=1.0).contains(&decision.confidence));
            let p = decision.probabilities;
            prop_assert!(((p.supported + p.contradicted + p.insufficient) - 1.0).abs() < 1e-9);
            prop_assert!(decision.cited.iter().all(|&i| i < scored.len()));
            let texts: std::collections::HashSet<&str> =
                decision.cited.iter().map(|&i| scored[i].text).collect();
            prop_assert_eq!(texts.len(), decision.cited.len(), "each text cited once");
            prop_assert_eq!(decision.cited.is_empty(), decision.verdict == Verdict::Insufficient);
            // A passage not about the claim never contradicts it.
            if decision.verdict == Verdict::Contradicted {
                let gate = VerifierWeights::builtin().thresholds.topic_overlap;
                prop_assert!(decision.features.overlap >= gate, "{decision:?}");
            }
            // With weights that always say one verdict, it still needs a judged passage.
            let judged = scored.iter().any(|p| p.score.is_some_and(f64::is_finite));
            for (supported, expected) in [(true, Verdict::Supported), (false, Verdict::Contradicted)] {
                let mut eager = VerifierWeights::builtin().clone();
                // The topic gate is its own rule (below).
                eager.thresholds.topic_overlap = 0.0;
                if supported {
                    eager.classes.supported.bias = 50.0;
                } else {
                    eager.classes.contradicted.bias = 50.0;
                }
                let decision = decide(&claim, &scored, prior, &eager);
                prop_assert_eq!(decision.verdict == expected, judged);
                prop_assert_eq!(decision.cited.is_empty(), !judged);
            }
        }
    }
}

#[test]
fn a_damaged_saved_state_fails_typed_instead_of_panicking() {
    let (mut job, corpus) = verifier_job();
    let Output::CallModel(call) = job.poll_output() else { panic!() };
    let id = call.id;
    let mut saved: Value = serde_json::from_str(&job.save()).unwrap();
    // The questions still to ask point past the evidence and inside a character.
    let queue = &mut saved["check"]["stage"]["queue"];
    assert!(queue.is_array(), "{saved}");
    queue
        .as_array_mut()
        .unwrap()
        .push(json!({"evidence": 99, "chunk": 0, "chunks": 1, "start": 0, "end": 5}));
    queue[1]["end"] = json!(1_000_000);
    let mut job = Job::restore(&saved.to_string(), &[corpus]).unwrap();
    job.handle_input(Input::ModelResponse { call: id, response: answer(0.9) }).unwrap();
    assert!(matches!(job.poll_output(), Output::Done));
    let failed = job.finish().unwrap_err();
    assert_eq!(failed.kind(), verity_core::JobFailureKind::AssessRequest);
    assert!(failed.message().contains("damaged"), "{}", failed.message());
}

#[test]
fn an_answers_sentence_is_decided_by_the_answers_threshold_and_a_claim_is_not() {
    use verity_core::claim::verifier::{BuiltinWeights, Rule, ScoredPassage, decide, decide_by};
    // Each builtin file: the 0.5B's threshold is on P(supported), the 1.5B's on its answer
    // model's P(holds).
    for builtin in BuiltinWeights::ALL {
        let weights = builtin.weights();
        assert!(weights.thresholds.answer_supported.is_some(), "{builtin:?} has one");
        // A score where the answer's rule says supported and the claim's does not: every
        // asked passage gets it (the prior is 0.5, so S is the calibrated score).
        let asked = |p: f64| -> Vec<ScoredPassage<'static>> {
            [SUPPORTS, CONTRADICTS, HALL]
                .map(|text| ScoredPassage { text, score: Some(p) })
                .to_vec()
        };
        let p = (1..100)
            .map(|i| f64::from(i) / 100.0)
            .find(|&p| {
                let passages = asked(p);
                decide(CLAIM, &passages, Some(0.5), weights).verdict != Verdict::Supported
                    && decide_by(CLAIM, &passages, Some(0.5), weights, Rule::AnswerSentence).verdict
                        == Verdict::Supported
            })
            .expect("the answer's threshold is under the claim's most probable class somewhere");

        // The answer job: its one sentence is supported on the first round (no research, no
        // summary: the prior and the questions are all it asks).
        let corpus = corpus();
        let config = json!({"kind": "answer", "answer": CLAIM, "corpus": corpus.id(),
            "retriever": {"bm25": {"k": 3}}, "assess": {"verifier": {"weights": builtin.name()}}});
        let job = Job::from_json(&config.to_string(), &[Arc::clone(&corpus)]).unwrap();
        let model = ScriptedModel::new([answer(0.5), answer(p), answer(p), answer(p)]).recording();
        let value = pollster::block_on(drive(job, &model, &verity_core::NoTools)).unwrap();
        let report = serde_json::to_value(&value).unwrap();
        let sentence = &report["sentences"][0];
        assert_eq!(sentence["status"], "supported", "{report}");
        assert!(model.recorded().iter().all(|r| r.probe.is_some()), "questions only");
        // Decided on the answer model's P(holds) where the file has one: the report says it,
        // and it is the confidence; where it has none, nothing says P(holds).
        let verifier = &sentence["report"]["verifier"];
        let rationale = sentence["report"]["assessment"]["rationale"].as_str().unwrap_or_default();
        if weights.answer.is_some() {
            let holds = verifier["holds"].as_f64().expect("P(holds) reported");
            assert_eq!(sentence["confidence"].as_f64(), Some(holds), "{sentence}");
            assert!(rationale.contains("as a sentence P(holds) "), "{rationale}");
        } else {
            assert!(verifier.get("holds").is_none(), "{verifier}");
            assert_eq!(sentence["confidence"], verifier["probabilities"]["supported"]);
            assert!(!rationale.contains("P(holds)"), "{rationale}");
        }
        // (A claim job decides these scores by the claim's rule: not supported, as `decide`
        // said above.)
    }
    assert!(
        BuiltinWeights::Qwen25Coder15b.weights().answer.is_some(),
        "the 1.5B's file has an answer model"
    );
}

#[test]
fn an_answers_sentence_judged_on_chunks_of_a_document_is_decided_by_the_chunks_threshold() {
    use verity_core::claim::verifier::VerifierWeights;
    let weights = VerifierWeights::builtin();
    let t = weights.thresholds;
    let (Some(whole), Some(in_chunk)) = (t.answer_supported, t.answer_supported_in_chunk) else {
        panic!("the default weights have both answer thresholds: {t:?}");
    };
    assert!(in_chunk < whole, "the default weights' chunk threshold is the lower: {t:?}");
    // One document of several chunks (600 characters each at the most), the sentence that
    // supports the claim in the middle of it.
    let filler = [HALL, MARKET, SCHOOL];
    let mut sentences: Vec<&str> = filler.iter().cycle().take(12).copied().collect();
    sentences.insert(6, SUPPORTS);
    sentences.extend(filler.iter().cycle().take(12));
    let document = sentences.join(" ");
    assert!(document.len() > 1_200, "{}", document.len());
    let corpus = IndexedCorpus::new(Corpus::from_pairs([("article", document.as_str())]).unwrap());
    // The answer's one sentence with every chunk asked scoring `p` (the prior 0.5): the
    // sentence's status and its confidence (its support when supported: `P(holds)` with the
    // weights' answer model).
    let check = |p: f64| {
        let config = json!({"kind": "answer", "answer": CLAIM, "corpus": corpus.id(),
            "assess": "verifier"});
        let job = Job::from_json(&config.to_string(), &[Arc::clone(&corpus)]).unwrap();
        let model = ScriptedModel::new([answer(0.5), answer(p), answer(p), answer(p)]).recording();
        let value = pollster::block_on(drive(job, &model, &verity_core::NoTools)).unwrap();
        let report = serde_json::to_value(&value).unwrap();
        let sentence = report["sentences"][0].clone();
        let chunked = model.recorded().iter().filter(|r| r.probe.is_some()).count();
        assert!(chunked >= 3, "the prior and the document's chunks are asked: {report}");
        (sentence["status"].as_str().unwrap_or_default().to_owned(), sentence["confidence"].clone())
    };
    // The lowest score at which the sentence holds: its support reaches the chunks' threshold
    // and stays under the passages' one, so only the chunks' threshold let it hold.
    let lowest = (1..100)
        .map(|i| f64::from(i) / 100.0)
        .find(|&p| check(p).0 == "supported")
        .expect("a high enough score supports the sentence");
    let (_, confidence) = check(lowest);
    let support = confidence.as_f64().unwrap();
    assert!(support >= in_chunk, "{support} under {in_chunk}");
    assert!(support < whole, "{support} is not under the passages' {whole}");
}
