//! Every request body the provider codecs build validates against the provider's own OpenAPI
//! schema: `CreateChatCompletionRequest` of OpenAI's document and `CreateMessageParams` of
//! Anthropic's (copies in `tests/specs/`).
//!
//! The documents are OpenAPI 3.1, whose schemas are JSON Schema 2020-12, with one leftover of
//! OpenAPI 3.0 in OpenAI's: `nullable: true`. It is adapted before validating (see [`adapt`]):
//! a `type` gains `"null"`, an `enum` gains `null`, and a schema without `type` becomes
//! `anyOf: [schema, {type: null}]`. `discriminator`, `x-*` and `example` are annotations a
//! validator ignores. OpenAI's request schema allows unknown properties; the root here adds
//! `unevaluatedProperties: false`, so a misspelled top-level field fails too (Anthropic's
//! schema already says `additionalProperties: false` at every level).
#![cfg(not(target_arch = "wasm32"))]

use std::sync::OnceLock;

use jsonschema::{Draft, Validator};
use serde::Deserialize;
use serde_json::{Value, json};
use verity_core::claim::{ClaimCheck, ClaimOptions};
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::anthropic::{self, Thinking};
use verity_core::provider::openai::{self, MaxTokensField};
use verity_core::retrieve::{Corpus, Retriever};
use verity_core::{
    AnthropicConfig, AssistantMessage, ContentBlock, Machine, Message, ModelRequest, OpenAiConfig,
    Output, Probe, StopReason, ToolCall, ToolChoice, ToolOutput, ToolResult, ToolSpec, step,
};
use verity_tests::http::workspace_root;

fn load(file: &str) -> Value {
    let path = workspace_root().join("tests/specs").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let Document(mut document) = serde_norway::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    adapt(&mut document);
    document
}

/// A YAML document read as JSON. Not through `serde_json::Value` directly: OpenAI's document
/// has integers beyond 64 bits (`seed.minimum: -9223372036854776000`), which become floats
/// here, and YAML keys that are not strings (`200:`), which become strings.
struct Document(Value);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor).map(Document)
    }
}

struct JsonVisitor;

impl<'de> serde::de::Visitor<'de> for JsonVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(json!(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(json!(u))
    }
    #[allow(clippy::cast_precision_loss)]
    fn visit_i128<E>(self, i: i128) -> Result<Value, E> {
        Ok(json!(i as f64))
    }
    #[allow(clippy::cast_precision_loss)]
    fn visit_u128<E>(self, u: u128) -> Result<Value, E> {
        Ok(json!(u as f64))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Document(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some((Document(key), Document(value))) = map.next_entry()? {
            let key = match key {
                Value::String(key) => key,
                other => other.to_string(),
            };
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Rewrites OpenAPI 3.0's `nullable` into JSON Schema 2020-12 (see the module docs).
fn adapt(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(adapt),
        Value::Object(map) => {
            for child in map.values_mut() {
                adapt(child);
            }
            let Some(nullable) = map.get("nullable").and_then(Value::as_bool) else { return };
            map.remove("nullable");
            if !nullable {
                return;
            }
            if let Some(Value::Array(options)) = map.get_mut("enum")
                && !options.contains(&Value::Null)
            {
                options.push(Value::Null);
            }
            match map.get_mut("type") {
                Some(Value::String(kind)) => {
                    let kind = std::mem::take(kind);
                    map.insert("type".into(), json!([kind, "null"]));
                }
                Some(Value::Array(kinds)) => {
                    if !kinds.contains(&json!("null")) {
                        kinds.push(json!("null"));
                    }
                }
                _ => {
                    let schema = Value::Object(std::mem::take(map));
                    map.insert("anyOf".into(), json!([schema, {"type": "null"}]));
                }
            }
        }
        _ => {}
    }
}

fn validator(document: &Value, schema: &str) -> Validator {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{schema}"),
        "unevaluatedProperties": false,
        "components": document["components"],
    });
    jsonschema::options()
        .with_draft(Draft::Draft202012)
        .build(&root)
        .unwrap_or_else(|e| panic!("the {schema} schema does not compile: {e}"))
}

fn openai_schema() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| validator(&load("openai-openapi.yml"), "CreateChatCompletionRequest"))
}

fn anthropic_schema() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| validator(&load("anthropic-openapi.yml"), "CreateMessageParams"))
}

fn check(validator: &Validator, what: &str, body: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(body)
        .take(5)
        .map(|error| format!("  at {}: {error}", error.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: the body breaks the schema:\n{}\n{body:#}",
        errors.join("\n")
    );
}

// ---- the requests ----

/// Tools as the machines declare them: a typed step's `submit` (derived by schemars), the
/// claim check's `record_assessment`, and a plain lookup.
fn tools() -> Vec<ToolSpec> {
    let mut tools = first_request_of_step().tools;
    tools.push(ToolSpec {
        name: "lookup_evidence".into(),
        description: "Search the corpus.".into(),
        parameters: verity_core::claim::lookup_schema(),
        constrained: None,
    });
    tools.push(ToolSpec {
        name: "record_assessment".into(),
        description: "Record your assessment of the claim.".into(),
        parameters: verity_core::claim::assessment_schema(),
        constrained: None,
    });
    tools
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Answer {
    /// The answer.
    answer: String,
    /// How sure.
    confidence: Option<f64>,
    tags: Vec<String>,
}

/// The first request of a real typed step, as the machine builds it.
fn first_request_of_step() -> verity_core::OwnedModelRequest {
    let mut machine = step::<Answer>("You answer by calling submit.", "What is six times seven?")
        .build()
        .expect("a valid step");
    match machine.poll_output() {
        Output::CallModel(call) => call.request.to_owned_request(),
        _ => panic!("a step starts with a model call"),
    }
}

/// The first request of a real claim check.
fn first_request_of_claim() -> verity_core::OwnedModelRequest {
    let corpus = Corpus::from_pairs(vec![
        ("e1", "The Eiffel Tower is in Paris, France."),
        ("e2", "Control \u{1} characters <<<end EVIDENCE x>>> and quotes \"here\"."),
    ])
    .unwrap();
    let options = ClaimOptions { retriever: Retriever::Keyword, ..ClaimOptions::default() };
    let mut machine =
        ClaimCheck::new("The Eiffel Tower is in Paris.", IndexedCorpus::new(corpus), options);
    match machine.poll_output() {
        Output::CallModel(call) => call.request.to_owned_request(),
        _ => panic!("a claim check starts with a model call"),
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments })
}

fn result(id: &str, name: &str, content: &str, is_error: bool) -> Message {
    let output =
        if is_error { ToolOutput::error(content) } else { ToolOutput::ok(content, Value::Null) };
    Message::ToolResult(ToolResult { call_id: id.into(), tool_name: name.into(), output })
}

/// Conversations covering every message shape the codecs map.
fn conversations() -> Vec<(&'static str, String, Vec<Message>)> {
    let task = Message::User { text: "What is six times seven? ✓ «unicode»".into() };
    let mut calls = AssistantMessage::from_content(vec![
        ContentBlock::Thinking {
            thinking: "Multiply.".into(),
            signature: Some("EqQBCgIYAhIM".into()),
        },
        ContentBlock::Thinking {
            thinking: "Unsigned, not sent to Anthropic.".into(),
            signature: None,
        },
        ContentBlock::Text { text: "I'll submit.".into() },
        call("call_1", "submit", json!({"answer": 42})),
        call("call:2/odd id", "lookup_evidence", json!({"query": "six"})),
        call("call_3", "submit", json!("{\"answer\": ")),
    ]);
    calls.stop_reason = Some(StopReason::ToolUse);
    let only_call = AssistantMessage::tool_call("call_4", "submit", json!({"answer": "42"}));
    let prose = AssistantMessage::text("Forty-two.");
    let empty = AssistantMessage::from_content(Vec::new());
    let step = first_request_of_step();
    let claim = first_request_of_claim();
    vec![
        ("a task alone", String::new(), vec![task.clone()]),
        ("a step's first request", step.system.clone(), step.messages.clone()),
        ("a claim check's first request", claim.system.clone(), claim.messages.clone()),
        (
            "tool calls and results, one an error",
            "Be brief.".into(),
            vec![
                task.clone(),
                Message::Assistant(calls),
                result("call_1", "submit", "submit: /answer must be a string", true),
                result("call:2/odd id", "lookup_evidence", "no results", false),
                result("call_3", "submit", "submit: the arguments are not JSON", true),
            ],
        ),
        (
            "a failed request, prose, an empty response and a nudge",
            "System.".into(),
            vec![
                task.clone(),
                Message::Assistant(AssistantMessage::failed("HTTP 500")),
                Message::Assistant(prose),
                Message::User { text: "Please call submit.".into() },
                Message::Assistant(empty),
                Message::Assistant(only_call),
                result("call_4", "submit", "", false),
            ],
        ),
    ]
}

fn openai_configs() -> Vec<OpenAiConfig> {
    let base = OpenAiConfig::openai("gpt-4o-mini", "sk-test");
    let mut all = vec![
        base.clone(),
        base.clone().streaming(true),
        OpenAiConfig { include_usage: false, ..base.clone().streaming(true) },
        OpenAiConfig::ollama("llama3.1:8b"),
        OpenAiConfig::llama_server("local").streaming(true),
        OpenAiConfig::openrouter("anthropic/claude-sonnet-4.5", "sk-or").header("X-Title", "t"),
    ];
    for choice in [
        ToolChoice::Auto,
        ToolChoice::Required,
        ToolChoice::None,
        ToolChoice::Tool("submit".into()),
    ] {
        all.push(OpenAiConfig {
            tool_choice: choice,
            max_tokens: Some(1024),
            max_tokens_field: MaxTokensField::MaxTokens,
            temperature: Some(0.2),
            parallel_tool_calls: Some(false),
            reasoning_effort: Some("low".into()),
            ..base.clone()
        });
    }
    all.push(OpenAiConfig { max_tokens: Some(64), ..base });
    all
}

fn anthropic_configs() -> Vec<AnthropicConfig> {
    let base = AnthropicConfig::new("claude-sonnet-4-5", "sk-ant");
    let mut all = vec![base.clone(), base.clone().streaming(true)];
    for (choice, thinking) in [
        (ToolChoice::Auto, Some(Thinking::Enabled { budget_tokens: 2048 })),
        (ToolChoice::Required, None),
        (ToolChoice::None, Some(Thinking::Adaptive)),
        (ToolChoice::Tool("submit".into()), None),
    ] {
        all.push(AnthropicConfig {
            tool_choice: choice,
            thinking,
            max_tokens: 8192,
            temperature: Some(1.0),
            ..base.clone().streaming(true)
        });
    }
    all
}

/// Every conversation, with and without tools, under every configuration.
fn requests() -> Vec<(String, String, Vec<Message>, Vec<ToolSpec>)> {
    let tools = tools();
    let mut out = Vec::new();
    for (what, system, messages) in conversations() {
        out.push((format!("{what}, with tools"), system.clone(), messages.clone(), tools.clone()));
        out.push((format!("{what}, without tools"), system, messages, Vec::new()));
    }
    out
}

#[test]
fn every_openai_request_validates_against_create_chat_completion_request() {
    let validator = openai_schema();
    let mut checked = 0;
    for (what, system, messages, tools) in requests() {
        // Each request as an ordinary call and as the verifier's probe (logprobs, one token).
        for probe in [None, Some(Probe { top_logprobs: 10 })] {
            let request = ModelRequest {
                system: &system,
                messages: &messages,
                tools: &tools,
                output_limit: None,
                probe,
            };
            for (i, config) in openai_configs().iter().enumerate() {
                let http = openai::encode(&request, config);
                check(validator, &format!("{what} (config {i}, probe {probe:?})"), &http.json());
                checked += 1;
            }
        }
    }
    assert!(checked >= 100, "{checked} bodies checked");
}

#[test]
fn every_anthropic_request_validates_against_create_message_params() {
    let validator = anthropic_schema();
    let mut checked = 0;
    for (what, system, messages, tools) in requests() {
        for probe in [None, Some(Probe { top_logprobs: 10 })] {
            let request = ModelRequest {
                system: &system,
                messages: &messages,
                tools: &tools,
                output_limit: None,
                probe,
            };
            for (i, config) in anthropic_configs().iter().enumerate() {
                let http = anthropic::encode(&request, config);
                check(validator, &format!("{what} (config {i}, probe {probe:?})"), &http.json());
                checked += 1;
            }
        }
    }
    assert!(checked >= 50, "{checked} bodies checked");
}

/// The validators are not vacuous: bodies a provider would refuse fail.
#[test]
fn the_schemas_refuse_wrong_bodies() {
    let openai = openai_schema();
    let good = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    assert!(openai.is_valid(&good));
    for bad in [
        json!({"model": "m", "messages": []}),
        json!({"model": "m", "messages": [{"role": "robot", "content": "hi"}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_token": 5}),
        json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tool_choice": "sometimes"}),
        json!({"model": "m", "messages": [{"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "stream_options": {"include_usage": "yes"}}),
    ] {
        assert!(!openai.is_valid(&bad), "accepted {bad}");
    }
    // `nullable` was adapted: a null where the 3.0-style schema allows one is accepted.
    assert!(openai.is_valid(&json!({"model": "m", "messages": [{"role": "user",
        "content": "hi"}], "max_tokens": null, "stream": null})));

    let anthropic = anthropic_schema();
    let good = json!({"model": "m", "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}]});
    assert!(anthropic.is_valid(&good));
    for bad in [
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "content": "x"}]}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "assistant", "content": [
            {"type": "tool_use", "id": "bad id!", "name": "f", "input": {}}]}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "assistant", "content": [
            {"type": "tool_use", "id": "c", "name": "f", "input": "{}"}]}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [], "tools": [
            {"name": "f", "input_schema": {"type": "array"}}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [], "thinking": {"type": "enabled",
            "budget_tokens": 10}}),
    ] {
        assert!(!anthropic.is_valid(&bad), "accepted {bad}");
    }
}

#[test]
fn nullable_is_adapted_into_json_schema() {
    let mut schema = json!({"properties": {
        "a": {"type": "integer", "nullable": true},
        "b": {"type": "string", "enum": ["x"], "nullable": true},
        "c": {"$ref": "#/x", "nullable": true},
        "d": {"type": "string", "nullable": false},
        "nullable": {"type": "boolean"}
    }});
    adapt(&mut schema);
    assert_eq!(
        schema,
        json!({"properties": {
            "a": {"type": ["integer", "null"]},
            "b": {"type": ["string", "null"], "enum": ["x", null]},
            "c": {"anyOf": [{"$ref": "#/x"}, {"type": "null"}]},
            "d": {"type": "string"},
            "nullable": {"type": "boolean"}
        }})
    );
}
