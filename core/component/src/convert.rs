//! Between the core's types and the WIT's. JSON values cross as JSON text; a text from the
//! host that is not JSON (a model's broken tool arguments) is kept as a JSON string, as the
//! codecs keep it.

use serde_json::Value;
use verity_core::{
    AssistantMessage, CallId, ClaimStage, ContentBlock, Delta, Event, FailureClass, FirstToken,
    Input, JobFailed, JobFailureKind, Message, Misuse, MisuseKind, Output, OwnedModelRequest,
    Probe, ProviderError, Settled, Spent, StopReason, TokenLogprob, ToolCall, ToolOutput,
    ToolResult, ToolSpec, Usage,
};

use crate::exports::verity::engine::types as wit;

/// The largest count a WIT `u32` carries; larger ones saturate.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn json_out(value: &Value) -> String {
    value.to_string()
}

fn json_in(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Null;
    }
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

// ---- core to WIT ----

pub fn output(output: Output<'_>) -> wit::Output {
    match output {
        Output::CallModel(call) => wit::Output::CallModel(wit::ModelCall {
            id: call.id.0,
            delay_ms: call.delay_ms,
            retry: call.retry,
            request: wit::ModelRequest {
                system: call.request.system.to_owned(),
                messages: call.request.messages.iter().filter_map(message_entry_out).collect(),
                tools: call.request.tools.iter().map(tool_spec_out).collect(),
                output_limit: call.request.output_limit,
                probe: call
                    .request
                    .probe
                    .map(|probe| wit::Probe { top_logprobs: probe.top_logprobs }),
            },
        }),
        Output::RunTools(batch) => wit::Output::RunTools(wit::ToolBatch {
            id: batch.id.0,
            calls: batch.calls.iter().map(tool_call_out).collect(),
            sequential: batch.sequential,
            replay_safe: batch.replay_safe.to_vec(),
        }),
        _ => wit::Output::Done,
    }
}

fn message_entry_out(message: &Message) -> Option<wit::Message> {
    Some(match message {
        Message::User { text } => wit::Message::User(text.clone()),
        Message::Assistant(message) => wit::Message::Assistant(message_out(message.clone())),
        Message::ToolResult(result) => wit::Message::ToolResult(wit::ToolResult {
            call_id: result.call_id.clone(),
            tool_name: result.tool_name.clone(),
            output: tool_output_out(&result.output),
        }),
        _ => return None,
    })
}

fn tool_spec_out(tool: &ToolSpec) -> wit::ToolSpec {
    wit::ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: json_out(&tool.parameters),
        constrained: tool.constrained.as_ref().map(json_out),
    }
}

fn tool_call_out(call: &ToolCall) -> wit::ToolCall {
    wit::ToolCall {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: json_out(&call.arguments),
    }
}

fn tool_output_out(output: &ToolOutput) -> wit::ToolOutput {
    wit::ToolOutput {
        content: output.content.clone(),
        details: json_out(&output.details),
        is_error: output.is_error,
        terminate: output.terminate,
    }
}

pub fn message_out(message: AssistantMessage) -> wit::AssistantMessage {
    wit::AssistantMessage {
        content: message
            .content
            .into_iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(wit::ContentBlock::Text(text)),
                ContentBlock::Thinking { thinking, signature } => {
                    Some(wit::ContentBlock::Thinking(wit::Thinking { thinking, signature }))
                }
                ContentBlock::ToolCall(call) => {
                    Some(wit::ContentBlock::ToolCall(tool_call_out(&call)))
                }
                _ => None,
            })
            .collect(),
        stop_reason: message.stop_reason.map(stop_reason_out),
        error_message: message.error_message,
        error: message.error.map(|error| wit::ProviderError {
            class: match error.class {
                FailureClass::Retryable => wit::FailureClass::Retryable,
                FailureClass::ContextOverflow => wit::FailureClass::ContextOverflow,
                FailureClass::OutputTruncated => wit::FailureClass::OutputTruncated,
                _ => wit::FailureClass::NotRetryable,
            },
            status: error.status,
            retry_after_ms: error.retry_after_ms,
            raw_body: error.raw_body,
        }),
        usage: usage_out(&message.usage),
        first_token: message.first_token.map(|first| wit::FirstToken {
            sampled: token_out(first.sampled),
            top: first.top.into_iter().map(token_out).collect(),
        }),
    }
}

fn token_out(token: TokenLogprob) -> wit::TokenLogprob {
    wit::TokenLogprob { token: token.token, logprob: token.logprob }
}

fn token_in(token: wit::TokenLogprob) -> TokenLogprob {
    // A non-finite number from a host is no probability (as the codecs read one).
    TokenLogprob { token: token.token, logprob: token.logprob.filter(|l| l.is_finite()) }
}

fn stop_reason_out(reason: StopReason) -> wit::StopReason {
    match reason {
        StopReason::Stop => wit::StopReason::Stop,
        StopReason::ToolUse => wit::StopReason::ToolUse,
        StopReason::Length => wit::StopReason::Length,
        StopReason::Aborted => wit::StopReason::Aborted,
        _ => wit::StopReason::Error,
    }
}

fn usage_out(usage: &Usage) -> wit::Usage {
    wit::Usage {
        input: usage.input,
        output: usage.output,
        cache_read: usage.cache_read,
        cache_write: usage.cache_write,
        cost: usage.cost,
    }
}

pub fn spent(spent: Spent) -> wit::Spent {
    wit::Spent {
        turns: spent.turns,
        requests: spent.requests,
        failed_attempts: spent.failed_attempts,
        retries: spent.retries,
        usage: usage_out(&spent.usage),
    }
}

pub fn failure(failed: JobFailed) -> wit::Failure {
    use wit::FailureKind as K;
    let kind = match failed.kind() {
        JobFailureKind::Config => K::Config,
        JobFailureKind::Provider => K::Provider,
        JobFailureKind::InvalidSubmissions => K::InvalidSubmissions,
        JobFailureKind::TurnLimit => K::TurnLimit,
        JobFailureKind::NoSubmit => K::NoSubmit,
        JobFailureKind::Cancelled => K::Cancelled,
        JobFailureKind::AssessRequest => K::AssessRequest,
        JobFailureKind::AssessProse => K::AssessProse,
        JobFailureKind::AssessSchema => K::AssessSchema,
        JobFailureKind::CitationNotInEvidence => K::CitationNotInEvidence,
        JobFailureKind::NoNewEvidence => K::NoNewEvidence,
        JobFailureKind::ResearchTurnLimit => K::ResearchTurnLimit,
        JobFailureKind::Budget => K::Budget,
        // A kind the WIT does not name yet: a trap says so, where a guess would mislead.
        other => unreachable!("failure kind {other} is missing from wit/types.wit"),
    };
    wit::Failure { kind, message: failed.message().to_owned(), spent: spent(failed.spent()) }
}

pub fn misuse(misuse: Misuse) -> wit::Misuse {
    let kind = match misuse.kind {
        MisuseKind::WrongCalls => wit::MisuseKind::WrongCalls,
        MisuseKind::Finished => wit::MisuseKind::Finished,
        _ => wit::MisuseKind::UnexpectedInput,
    };
    wit::Misuse { kind, message: misuse.message }
}

pub fn delta_out(delta: Delta) -> Option<wit::Delta> {
    Some(match delta {
        Delta::Text { text } => wit::Delta::Text(text),
        Delta::Thinking { thinking } => wit::Delta::Thinking(thinking),
        Delta::ToolCallStart { index, id, name } => {
            wit::Delta::ToolCallStart(wit::ToolCallStart { index: count(index), id, name })
        }
        Delta::ToolCallArguments { index, arguments } => {
            wit::Delta::ToolCallArguments(wit::ToolCallArguments { index: count(index), arguments })
        }
        _ => return None,
    })
}

/// An event the WIT names; a newer kind is left out (hosts see the ones they know).
pub fn event(event: Event) -> Option<wit::Event> {
    Some(match event {
        Event::Stage { stage } => wit::Event::Stage(match stage {
            ClaimStage::Retrieve { evidence } => wit::ClaimStage::Retrieve(count(evidence)),
            ClaimStage::Assess => wit::ClaimStage::Assess,
            ClaimStage::Research { turn, of } => {
                wit::ClaimStage::Research(wit::ResearchTurn { turn, of })
            }
            ClaimStage::Reassess { evidence } => wit::ClaimStage::Reassess(count(evidence)),
            ClaimStage::Summary => wit::ClaimStage::Summary,
            _ => return None,
        }),
        Event::ModelCall { call, retry, delay_ms } => {
            wit::Event::ModelCall(wit::ModelCallEvent { call: call.0, retry, delay_ms })
        }
        Event::ModelAnswered { call, stop_reason, tool_calls, usage, error } => {
            wit::Event::ModelAnswered(wit::ModelAnswered {
                call: call.0,
                stop_reason: stop_reason_out(stop_reason),
                tool_calls: count(tool_calls),
                usage: usage_out(&usage),
                error,
            })
        }
        Event::ToolCall { call_id, tool, host } => {
            wit::Event::ToolCall(wit::ToolCallEvent { call_id, tool, host })
        }
        Event::ToolSettled { call_id, tool, is_error, host } => {
            wit::Event::ToolSettled(wit::ToolSettled { call_id, tool, is_error, host })
        }
        Event::Retry { attempt, delay_ms, message } => {
            wit::Event::Retry(wit::RetryEvent { attempt, delay_ms, message })
        }
        Event::Compacted { dropped } => wit::Event::Compacted(count(dropped)),
        Event::Delta { call, delta } => {
            wit::Event::Delta(wit::DeltaEvent { call: call.0, delta: delta_out(delta)? })
        }
        Event::SentenceStarted { index } => wit::Event::SentenceStarted(count(index)),
        Event::SentenceChecked { sentence } => wit::Event::SentenceChecked(
            serde_json::to_string(&sentence).expect("a sentence's report serializes"),
        ),
        _ => return None,
    })
}

// ---- WIT to core ----

pub fn input(input: wit::Input) -> Input {
    match input {
        wit::Input::ModelResponse(answer) => Input::ModelResponse {
            call: CallId(answer.call),
            response: message_in(answer.response),
        },
        wit::Input::Seal(seal) => Input::Seal {
            batch: CallId(seal.batch),
            results: seal
                .results
                .into_iter()
                .map(|settled| Settled {
                    call_id: settled.call_id,
                    output: tool_output_in(settled.output),
                })
                .collect(),
        },
        wit::Input::Cancel(reason) => Input::Cancel { reason },
    }
}

fn tool_output_in(output: wit::ToolOutput) -> ToolOutput {
    ToolOutput {
        content: output.content,
        details: json_in(output.details),
        is_error: output.is_error,
        terminate: output.terminate,
    }
}

fn tool_call_in(call: wit::ToolCall) -> ToolCall {
    ToolCall { id: call.id, name: call.name, arguments: json_in(call.arguments) }
}

pub fn message_in(message: wit::AssistantMessage) -> AssistantMessage {
    let mut out = AssistantMessage::from_content(
        message
            .content
            .into_iter()
            .map(|block| match block {
                wit::ContentBlock::Text(text) => ContentBlock::Text { text },
                wit::ContentBlock::Thinking(wit::Thinking { thinking, signature }) => {
                    ContentBlock::Thinking { thinking, signature }
                }
                wit::ContentBlock::ToolCall(call) => ContentBlock::ToolCall(tool_call_in(call)),
            })
            .collect(),
    );
    out.stop_reason = message.stop_reason.map(|reason| match reason {
        wit::StopReason::Stop => StopReason::Stop,
        wit::StopReason::ToolUse => StopReason::ToolUse,
        wit::StopReason::Length => StopReason::Length,
        wit::StopReason::Error => StopReason::Error,
        wit::StopReason::Aborted => StopReason::Aborted,
    });
    out.error_message = message.error_message;
    out.error = message.error.map(|error| ProviderError {
        class: match error.class {
            wit::FailureClass::Retryable => FailureClass::Retryable,
            wit::FailureClass::NotRetryable => FailureClass::NotRetryable,
            wit::FailureClass::ContextOverflow => FailureClass::ContextOverflow,
            wit::FailureClass::OutputTruncated => FailureClass::OutputTruncated,
        },
        status: error.status,
        retry_after_ms: error.retry_after_ms,
        raw_body: error.raw_body,
    });
    out.usage = Usage {
        input: message.usage.input,
        output: message.usage.output,
        cache_read: message.usage.cache_read,
        cache_write: message.usage.cache_write,
        cost: message.usage.cost,
    };
    out.first_token = message.first_token.map(|first| FirstToken {
        sampled: token_in(first.sampled),
        top: first.top.into_iter().map(token_in).collect(),
    });
    out
}

pub fn request_in(request: wit::ModelRequest) -> OwnedModelRequest {
    OwnedModelRequest {
        output_limit: request.output_limit,
        probe: request.probe.map(|probe| Probe { top_logprobs: probe.top_logprobs }),
        system: request.system,
        messages: request
            .messages
            .into_iter()
            .map(|message| match message {
                wit::Message::User(text) => Message::User { text },
                wit::Message::Assistant(message) => Message::Assistant(message_in(message)),
                wit::Message::ToolResult(result) => Message::ToolResult(ToolResult {
                    call_id: result.call_id,
                    tool_name: result.tool_name,
                    output: tool_output_in(result.output),
                }),
            })
            .collect(),
        tools: request
            .tools
            .into_iter()
            .map(|tool| ToolSpec {
                name: tool.name,
                description: tool.description,
                parameters: json_in(tool.parameters),
                constrained: tool.constrained.map(json_in),
            })
            .collect(),
    }
}

pub fn delta_in(delta: wit::Delta) -> Delta {
    match delta {
        wit::Delta::Text(text) => Delta::Text { text },
        wit::Delta::Thinking(thinking) => Delta::Thinking { thinking },
        wit::Delta::ToolCallStart(start) => {
            Delta::ToolCallStart { index: start.index as usize, id: start.id, name: start.name }
        }
        wit::Delta::ToolCallArguments(piece) => {
            Delta::ToolCallArguments { index: piece.index as usize, arguments: piece.arguments }
        }
    }
}
