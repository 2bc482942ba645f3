//! Provider-neutral messages: what a model said (whole, or piece by piece as [`Delta`]s while it
//! streams), what tools answered, what a request carries.
//!
//! The wire names follow the design's TypeScript packages (`toolCall`, `stopReason`,
//! `toolUse`), so scripted models and stored transcripts read the same in every host.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_derive::TaggedDeserialize;

use crate::request_failure::ProviderError;

/// Identifies one output (a model call or a tool batch) so the answer can be matched to it.
/// Ids increase within a machine and are never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallId(pub u64);

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Why a model response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum StopReason {
    /// The model finished its turn.
    Stop,
    /// The model asked for tool calls.
    ToolUse,
    /// The output-token limit cut the response off: its tool calls are refused.
    Length,
    /// The request failed (network, provider error, ...).
    Error,
    /// The request was aborted before the response completed.
    Aborted,
}

impl StopReason {
    /// The wire name (`"stop"`, `"toolUse"`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::ToolUse => "toolUse",
            StopReason::Length => "length",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }

    /// A failed request: its content is not a usable answer and its tool calls never run.
    #[must_use]
    pub fn is_failure(self) -> bool {
        matches!(self, StopReason::Error | StopReason::Aborted)
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; results refer to it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model produced them (not coerced, possibly invalid).
    pub arguments: Value,
}

/// One block of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Visible text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning the provider exposed.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The provider's signature of the reasoning (Anthropic), which must be sent back
        /// unchanged for the reasoning to be accepted in a later turn.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call.
    ToolCall(ToolCall),
}

/// Tokens and money spent; adds up across requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    /// Input (prompt) tokens not served from a cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: u64,
    /// Cost in US dollars, as priced by the host's price table.
    pub cost: f64,
}

impl Usage {
    /// Adds `other` into `self`. Counts saturate at `u64::MAX` (a server may report anything)
    /// and the cost stays finite: it saturates at `f64::MAX`, and a cost that is not a number
    /// is not added.
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        let cost = self.cost + other.cost;
        if !cost.is_nan() {
            self.cost = cost.clamp(f64::MIN, f64::MAX);
        }
    }
}

/// A model's response: the answer to one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool calls in the order the model produced them.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Why the response ended. When absent on the wire: `toolUse` if a tool call exists, else
    /// `stop`.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// What went wrong, for `error` and `aborted` responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// For a failed request: how the codec classified it (retryable or not, `Retry-After`).
    /// `None` means not retryable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProviderError>,
    /// What the request cost.
    #[serde(default)]
    pub usage: Usage,
    /// The first output token's probabilities, when the request asked for them
    /// ([`ModelRequest::probe`]) and the provider reported them (OpenAI-compatible servers;
    /// Anthropic reports none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token: Option<FirstToken>,
}

/// A token and its log probability, as the provider reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text (`" Yes"`, `"No"`, ...).
    pub token: String,
    /// Its natural-log probability; `None` when the provider sent something that is not a
    /// finite number. A non-finite value set in code serializes as `null`, so it reads back
    /// as `None`.
    pub logprob: Option<f64>,
}

/// The first output token of a response with its most likely alternatives: OpenAI's
/// `choices[0].logprobs.content[0]` (`token`, `logprob`, `top_logprobs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirstToken {
    /// The token sampled, with its log probability.
    #[serde(flatten)]
    pub sampled: TokenLogprob,
    /// The most likely tokens at that position, most likely first as the provider listed them.
    #[serde(default)]
    pub top: Vec<TokenLogprob>,
}

/// A request for the probabilities of a one-token answer (the claim checker's verifier route,
/// see [`crate::claim::verifier`]): the provider codec asks for one output token at
/// temperature 0, not streamed, with the `top_logprobs` most likely tokens (OpenAI-compatible
/// servers), whatever the provider's configuration says about those; Anthropic has no
/// probabilities and answers with the sampled token only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// How many of the most likely first tokens to report (OpenAI allows 0 to 20).
    pub top_logprobs: u8,
}

impl AssistantMessage {
    /// A response holding only text.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_content(vec![ContentBlock::Text { text: text.into() }])
    }

    /// A response holding the given blocks, with the default stop reason.
    #[must_use]
    pub fn from_content(content: Vec<ContentBlock>) -> Self {
        Self {
            content,
            stop_reason: None,
            error_message: None,
            error: None,
            usage: Usage::default(),
            first_token: None,
        }
    }

    /// The same response, carrying the first token's probabilities.
    #[must_use]
    pub fn with_first_token(mut self, first_token: FirstToken) -> Self {
        self.first_token = Some(first_token);
        self
    }

    /// A response holding one tool call.
    #[must_use]
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::from_content(vec![ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        })])
    }

    /// A failed request (`stopReason: "error"`) with its message.
    #[must_use]
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            content: Vec::new(),
            stop_reason: Some(StopReason::Error),
            error_message: Some(message.into()),
            error: None,
            usage: Usage::default(),
            first_token: None,
        }
    }

    /// A request the host aborted (`stopReason: "aborted"`) with its message: never retried.
    #[must_use]
    pub fn aborted(message: impl Into<String>) -> Self {
        Self { stop_reason: Some(StopReason::Aborted), ..Self::failed(message) }
    }

    /// The stop reason, defaulted as the wire format says.
    #[must_use]
    pub fn stop_reason(&self) -> StopReason {
        self.stop_reason.unwrap_or_else(|| {
            if self.tool_calls().next().is_some() { StopReason::ToolUse } else { StopReason::Stop }
        })
    }

    /// The tool calls, in the order the model made them.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The visible text, blocks joined.
    #[must_use]
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// Why a failed request failed: its error message, else its stop reason.
    #[must_use]
    pub fn failure_message(&self) -> String {
        self.error_message.clone().unwrap_or_else(|| self.stop_reason().as_str().to_owned())
    }
}

/// The answer to one tool call, recorded in the transcript: the call it answers and what the
/// tool produced (the output's fields sit beside the ids on the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The name of the tool that was called.
    pub tool_name: String,
    /// What the tool produced.
    #[serde(flatten)]
    pub output: ToolOutput,
}

/// What a tool call produced, as the host (or the core) reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Structured data for the host (never shown to the model).
    #[serde(default)]
    pub details: Value,
    /// The tool failed; `content` says why.
    #[serde(default)]
    pub is_error: bool,
    /// The tool asks the run to end.
    #[serde(default)]
    pub terminate: bool,
}

impl ToolOutput {
    /// A successful result.
    #[must_use]
    pub fn ok(content: impl Into<String>, details: Value) -> Self {
        Self { content: content.into(), details, is_error: false, terminate: false }
    }

    /// A failed result.
    #[must_use]
    pub fn error(content: impl Into<String>) -> Self {
        Self { content: content.into(), details: Value::Null, is_error: true, terminate: false }
    }

    /// The same result, asking the run to end.
    #[must_use]
    pub fn terminating(mut self) -> Self {
        self.terminate = true;
        self
    }
}

/// One entry of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Message {
    /// The user's (or the task's) text.
    User {
        /// The text.
        text: String,
    },
    /// A model response.
    Assistant(AssistantMessage),
    /// A tool's answer.
    ToolResult(ToolResult),
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
    /// A narrower schema of the same arguments, for constrained decoding only: the OpenAI
    /// codec's JSON Schema mode ([`crate::provider::openai::OutputMode::JsonSchema`]) sends it
    /// in place of `parameters`, tool calling never sends it. The assessment's lists the
    /// evidence items a citation may be, so the server's grammar makes a small model copy one
    /// exactly rather than paraphrase it. Arguments are still validated against `parameters`
    /// (and the citation check still runs): this only narrows what the model can write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained: Option<Value>,
}

/// Everything a provider needs for one model call. Borrowed from the machine: a host that
/// needs to keep it serializes it or clones it with [`ModelRequest::to_owned_request`].
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far.
    pub messages: &'a [Message],
    /// The tools the model may call.
    pub tools: &'a [ToolSpec],
    /// The output limit this kind of call needs (a claim's assessment, research turn or
    /// summary: [`crate::claim::assessment_output_limit`], [`crate::claim::RESEARCH_OUTPUT_LIMIT`],
    /// [`crate::claim::SUMMARY_OUTPUT_LIMIT`]), sent when the provider's configuration sets
    /// none (`maxTokens`) and asks for no reasoning; `None`: the provider's own default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_limit: Option<u32>,
    /// Ask for the first token's probabilities of a one-token answer (see [`Probe`]);
    /// `None` for every ordinary call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
}

/// An owned copy of a [`ModelRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnedModelRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// See [`ModelRequest::output_limit`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_limit: Option<u32>,
    /// See [`ModelRequest::probe`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
}

impl OwnedModelRequest {
    /// The borrowed form, as a provider's `encode` takes it.
    #[must_use]
    pub fn as_request(&self) -> ModelRequest<'_> {
        ModelRequest {
            system: &self.system,
            messages: &self.messages,
            tools: &self.tools,
            output_limit: self.output_limit,
            probe: self.probe,
        }
    }
}

impl ModelRequest<'_> {
    /// Copies the request out of the machine.
    #[must_use]
    pub fn to_owned_request(&self) -> OwnedModelRequest {
        OwnedModelRequest {
            system: self.system.to_owned(),
            messages: self.messages.to_vec(),
            tools: self.tools.to_vec(),
            output_limit: self.output_limit,
            probe: self.probe,
        }
    }

    /// The text of the first user message (the task), if any.
    #[must_use]
    pub fn task(&self) -> Option<&str> {
        self.messages.iter().find_map(|message| match message {
            Message::User { text } => Some(text.as_str()),
            _ => None,
        })
    }
}

/// What a streaming response has produced since the last chunk, for progress display. The
/// machine never sees these: it receives the final message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Delta {
    /// More visible text.
    Text {
        /// The new text.
        text: String,
    },
    /// More reasoning text.
    Thinking {
        /// The new reasoning.
        thinking: String,
    },
    /// A tool call began. `index` is the provider's index for it within the response (OpenAI's
    /// `tool_calls[].index`, Anthropic's content block index).
    ToolCallStart {
        /// The provider's index of the call.
        index: usize,
        /// The call's id (empty if the provider has not said yet).
        id: String,
        /// The tool's name (empty if the provider has not said yet).
        name: String,
    },
    /// A piece of a tool call's JSON arguments, as text.
    ToolCallArguments {
        /// The provider's index of the call.
        index: usize,
        /// The next piece of the arguments' JSON text.
        arguments: String,
    },
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use serde_json::json;

    #[test]
    fn usage_adds_without_overflow_and_cost_stays_finite() {
        // Counts as a hostile or broken server may report them.
        let huge: Usage = serde_json::from_value(json!({
            "input": u64::MAX - 1, "output": u64::MAX, "cacheRead": u64::MAX / 2 + 1,
            "cacheWrite": 7, "cost": f64::MAX
        }))
        .unwrap();
        let mut total = huge;
        total.add(&huge);
        total.add(&Usage { input: 5, output: 1, cache_read: u64::MAX, cache_write: 1, cost: 1.0 });
        assert_eq!(total.input, u64::MAX);
        assert_eq!(total.output, u64::MAX);
        assert_eq!(total.cache_read, u64::MAX);
        assert_eq!(total.cache_write, 15);
        assert!(total.cost.is_finite(), "{}", total.cost);
        assert_eq!(total.cost, f64::MAX);
    }

    #[test]
    fn a_tool_result_keeps_its_output_fields_beside_the_ids_on_the_wire() {
        let result = ToolResult {
            call_id: "c1".into(),
            tool_name: "lookup".into(),
            output: ToolOutput::error("boom").terminating(),
        };
        let wire = serde_json::to_value(&result).unwrap();
        assert_eq!(
            wire,
            json!({"callId": "c1", "toolName": "lookup", "content": "boom", "details": null,
                   "isError": true, "terminate": true})
        );
        assert_eq!(serde_json::from_value::<ToolResult>(wire).unwrap(), result);
    }
}
