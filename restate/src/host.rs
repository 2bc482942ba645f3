//! What a worker process holds: the model it calls, its host tools, and its corpora.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::offline::OfflineModel;
use verity_core::provider::{Provider, ProviderTransport};
use verity_core::{AssistantMessage, ModelRequest, OwnedModelRequest, ToolCall, ToolOutput, Tools};

use crate::corpus::{Corpora, CorpusPolicy, CorpusSource};
use crate::http::ReqwestClient;

/// The model a worker calls: the offline baseline or a provider over [`ReqwestClient`].
#[derive(Debug)]
pub enum Model {
    /// `verity_core::provider::offline`: no network.
    Offline,
    /// A provider (its key from its configuration or `VERITY_API_KEY`).
    Provider(Arc<ProviderTransport<ReqwestClient>>),
}

impl Model {
    /// A provider over a client that does not sleep its retry waits: the core asks for them
    /// as `delay_ms` of the next model call, and the workflow sleeps them durably.
    #[must_use]
    pub fn provider(provider: Provider) -> Self {
        Model::Provider(Arc::new(ProviderTransport::new(provider, ReqwestClient::without_waits())))
    }

    /// Makes one model call. A failed request is a response whose stop reason is `error`.
    pub async fn complete(&self, request: OwnedModelRequest) -> AssistantMessage {
        match self {
            Model::Offline => verity_core::provider::offline::respond(borrow(&request)),
            Model::Provider(transport) => {
                // The core's transport futures are not `Send` (browsers are single-threaded);
                // a Restate side effect must be, so the call runs on a blocking thread that
                // drives it on this runtime.
                let transport = Arc::clone(transport);
                let runtime = tokio::runtime::Handle::current();
                let call = tokio::task::spawn_blocking(move || {
                    runtime.block_on(async move {
                        verity_core::Transport::complete(&*transport, borrow(&request)).await
                    })
                });
                match call.await {
                    Ok(response) => response,
                    Err(error) => {
                        AssistantMessage::failed(format!("the model call panicked: {error}"))
                    }
                }
            }
        }
    }
}

/// The borrowed form of an owned request.
#[must_use]
pub fn borrow(request: &OwnedModelRequest) -> ModelRequest<'_> {
    request.as_request()
}

impl verity_core::Transport for Model {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        match self {
            Model::Offline => OfflineModel.complete(request).await,
            Model::Provider(transport) => transport.complete(request).await,
        }
    }
}

/// The host tools a worker offers step jobs.
///
/// - `tally`: counts its runs in a file (`VERITY_TALLY_FILE`) and answers with the count; it
///   is not replay-safe (running it twice would count twice). With `VERITY_TALLY_HOLD_MS` it
///   holds the result that long after counting, which lets a test kill the worker between the
///   tool starting and its result landing.
#[derive(Debug, Clone, Default)]
pub struct HostTools {
    /// Where `tally` counts.
    pub tally_file: Option<PathBuf>,
    /// How long `tally` holds its result.
    pub tally_hold: Duration,
}

impl HostTools {
    /// The tools as the environment configures them.
    #[must_use]
    pub fn from_env() -> Self {
        let tally_file = std::env::var_os("VERITY_TALLY_FILE").map(PathBuf::from);
        let hold = std::env::var("VERITY_TALLY_HOLD_MS").ok().and_then(|ms| ms.parse().ok());
        Self { tally_file, tally_hold: Duration::from_millis(hold.unwrap_or(0)) }
    }

    async fn tally(&self) -> ToolOutput {
        let Some(file) = &self.tally_file else {
            return ToolOutput::error("tally has no file (set VERITY_TALLY_FILE)");
        };
        let count = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .unwrap_or(0)
            + 1;
        if let Err(error) = std::fs::write(file, count.to_string()) {
            return ToolOutput::error(format!("tally cannot write {}: {error}", file.display()));
        }
        if !self.tally_hold.is_zero() {
            tokio::time::sleep(self.tally_hold).await;
        }
        ToolOutput::ok(format!("counted: this is run {count}"), json!({"count": count}))
    }
}

impl Tools for HostTools {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        match call.name.as_str() {
            "tally" => self.tally().await,
            other => ToolOutput::error(format!("no host tool \"{other}\" is available")),
        }
    }
}

/// Everything a worker's handlers share.
#[derive(Debug)]
pub struct Host {
    /// The model.
    pub model: Model,
    /// The host tools.
    pub tools: HostTools,
    /// The corpora loaded so far.
    pub corpora: Corpora,
    /// Whether `kind: "step"` jobs run: a step is a model call on the worker's key with the
    /// caller's prompt (a free model proxy for whoever reaches the ingress), so only if the
    /// operator turns it on (`--allow-steps`).
    pub allow_steps: bool,
}

impl Host {
    /// A host with `model`, the tools of the environment and no corpus loaded, that reads no
    /// corpus file (inline passages only): see [`Host::with_corpus_policy`].
    #[must_use]
    pub fn new(model: Model) -> Self {
        Self::with_corpus_policy(model, CorpusPolicy::none())
    }

    /// A host that reads the corpus files `policy` allows.
    #[must_use]
    pub fn with_corpus_policy(model: Model, policy: CorpusPolicy) -> Self {
        Self {
            model,
            tools: HostTools::from_env(),
            corpora: Corpora::new(policy),
            allow_steps: false,
        }
    }

    /// The same host, running `kind: "step"` jobs too.
    #[must_use]
    pub fn allowing_steps(mut self) -> Self {
        self.allow_steps = true;
        self
    }

    /// The rows of a claim file (see [`Corpora::claims`]).
    ///
    /// # Errors
    /// Why it cannot be used.
    pub async fn claims(
        &self,
        file: &crate::corpus::CorpusFile,
    ) -> Result<Arc<Vec<crate::claims::ClaimRow>>, String> {
        self.corpora.claims(file).await
    }

    /// The indexed corpus of `source` (see [`Corpora::get`]).
    ///
    /// # Errors
    /// Why it cannot be used.
    pub async fn corpus(&self, source: &CorpusSource) -> Result<Arc<IndexedCorpus>, String> {
        self.corpora.get(source).await
    }
}
