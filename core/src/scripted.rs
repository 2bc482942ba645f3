//! A scripted model for tests, benchmarks and conformance: it answers each request with the
//! next response of its script, like the design's "faux" provider.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use crate::drive::Transport;
use crate::message::{AssistantMessage, ModelRequest, OwnedModelRequest};

/// The error message of a request made after the script is used up (it still counts as a
/// request, as in the conformance suite).
pub const SCRIPT_EXHAUSTED: &str = "No more faux responses queued";

/// Answers requests from a list of responses, in order, and counts them.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    script: RefCell<VecDeque<AssistantMessage>>,
    requests: Cell<u32>,
    recorded: Option<RefCell<Vec<OwnedModelRequest>>>,
}

impl ScriptedModel {
    /// A model that will answer with `script`, one response per request.
    #[must_use]
    pub fn new(script: impl IntoIterator<Item = AssistantMessage>) -> Self {
        Self { script: RefCell::new(script.into_iter().collect()), ..Self::default() }
    }

    /// Also keeps a copy of every request, for tests that inspect what the model received.
    #[must_use]
    pub fn recording(mut self) -> Self {
        self.recorded = Some(RefCell::new(Vec::new()));
        self
    }

    /// Answers one request: the next scripted response, or a failed response once the script
    /// is used up.
    pub fn answer(&self, request: ModelRequest<'_>) -> AssistantMessage {
        self.requests.set(self.requests.get() + 1);
        if let Some(recorded) = &self.recorded {
            recorded.borrow_mut().push(request.to_owned_request());
        }
        self.script
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| AssistantMessage::failed(SCRIPT_EXHAUSTED))
    }

    /// Requests answered so far (including ones that found the script used up).
    #[must_use]
    pub fn requests(&self) -> u32 {
        self.requests.get()
    }

    /// Responses not yet used.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.script.borrow().len()
    }

    /// The requests received, if [`recording`](Self::recording) was asked for.
    #[must_use]
    pub fn recorded(&self) -> Vec<OwnedModelRequest> {
        self.recorded.as_ref().map(|recorded| recorded.borrow().clone()).unwrap_or_default()
    }
}

impl Transport for ScriptedModel {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        self.answer(request)
    }
}
