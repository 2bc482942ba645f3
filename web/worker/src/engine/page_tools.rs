//! Typed steps whose tools the page runs: each tool call is posted to the page as `ToolCall`
//! and waits for its `ToolResult`.

use serde_json::Value;
use verity_core::provider::offline::OfflineModel;
use verity_core::{
    Cancel, DriveOptions, Job, JobConfig, ProviderTransport, ToolCall, ToolOutput, Tools,
    drive_with,
};
use verity_messages::{FromWorker, ProviderChoice, StepOutcome};

use super::check::{refused, to_value};
use super::{Engine, Host};

impl<H: Host> Engine<H> {
    /// Starts a typed step whose tools the page runs; posts `StepFinished` when it ends.
    pub(super) fn run_step(&self, id: String, config: Value, provider: ProviderChoice) {
        let finish = |outcome: StepOutcome| FromWorker::StepFinished { id: id.clone(), outcome };
        if config.get("kind").and_then(Value::as_str) != Some("step") {
            let message = "kind: a page runs steps here (`\"kind\": \"step\"`); claim checks \
                           go through `check`";
            let failure = refused(message);
            self.post(&finish(StepOutcome::Failed { failure }));
            return;
        }
        let job = JobConfig::from_value(config)
            .map_err(|error| refused(error.to_string()))
            .and_then(|config| Job::new(config, &[]).map_err(|failed| to_value(&failed)));
        let job = match job {
            Ok(job) => job,
            Err(failure) => {
                self.post(&finish(StepOutcome::Failed { failure }));
                return;
            }
        };
        let cancel = Cancel::new();
        self.inner.state.borrow_mut().steps.push((id.clone(), cancel.clone()));
        let engine = self.clone();
        self.inner.host.spawn(Box::pin(async move {
            let outcome = engine.drive_step(&id, job, &provider, cancel).await;
            {
                let mut state = engine.inner.state.borrow_mut();
                state.steps.retain(|(step, _)| *step != id);
                state.tool_calls.retain(|(step, _), _| *step != id);
            }
            engine.post(&FromWorker::StepFinished { id, outcome });
        }));
    }

    pub(super) async fn drive_step(
        &self,
        id: &str,
        job: Job,
        provider: &ProviderChoice,
        cancel: Cancel,
    ) -> StepOutcome {
        let host = &self.inner.host;
        let step = id.to_owned();
        let options = DriveOptions::new().cancel(cancel.clone()).events(move |event| {
            let event = serde_json::to_value(&event).expect("events serialize");
            host.post(&FromWorker::Progress { id: step.clone(), event });
        });
        let tools = PageTools { engine: self.clone(), step: id.to_owned() };
        let outcome = match provider {
            ProviderChoice::Offline => drive_with(job, &OfflineModel, &tools, options).await,
            ProviderChoice::Network { config } => {
                let provider = match self.network_provider(config) {
                    Ok(provider) => provider,
                    Err(why) => return StepOutcome::Failed { failure: refused(why) },
                };
                let transport = ProviderTransport::new(provider, host.client()).with_cancel(cancel);
                drive_with(job, &transport, &tools, options).await
            }
            // Resolved when the message arrived (`Engine::handle`).
            ProviderChoice::Settings { .. } => {
                return StepOutcome::Failed { failure: refused("the step names no provider") };
            }
        };
        match outcome {
            Ok(value) => StepOutcome::Value { value },
            Err(failed) => StepOutcome::Failed { failure: to_value(&failed) },
        }
    }
}

/// A step's tools, run by the page: each call is posted as `ToolCall` and waits for the
/// page's `ToolResult`.
struct PageTools<H: Host> {
    engine: Engine<H>,
    step: String,
}

impl<H: Host> Tools for PageTools<H> {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        let (sender, receiver) = futures_channel::oneshot::channel();
        self.engine
            .inner
            .state
            .borrow_mut()
            .tool_calls
            .insert((self.step.clone(), call.id.clone()), sender);
        self.engine.post(&FromWorker::ToolCall {
            id: self.step.clone(),
            call: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        receiver.await.unwrap_or_else(|_| {
            ToolOutput::error(format!("the page did not answer the call of {:?}", call.name))
        })
    }
}
