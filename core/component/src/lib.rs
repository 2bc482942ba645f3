//! Verity's engine as a WebAssembly component: the job protocol, the corpus and the provider
//! codecs of `verity-core`, exported over the WIT package `verity:engine@0.1.0` (`wit/` at the
//! workspace root). The world imports nothing: the host does the HTTP, sleeps the retry delays
//! and runs the tools.
//!
//! This crate only translates between the WIT types and the core's; every behaviour is the
//! core's. Build it with `cargo xtask component` (or `cargo build -p verity-component --target
//! wasm32-wasip2`).
// The bindings wit-bindgen generates (the canonical ABI's exported functions) are unsafe code
// by necessity; none is written by hand here.
#![allow(unsafe_code)]

mod convert;

use std::cell::RefCell;
use std::sync::Arc;

use verity_core::corpus::{Corpus, Passage};
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::StreamDecoder;
use verity_core::{AssistantMessage, CallId, Job, JobConfig, JobFailed, Machine, Provider};

use exports::verity::engine::corpus::{self as wit_corpus, CorpusBorrow, Hit, Item};
use exports::verity::engine::job::{self as wit_job};
use exports::verity::engine::provider::{self as wit_provider, HttpRequest, HttpResponse};
use exports::verity::engine::types::{
    AssistantMessage as WitMessage, Delta as WitDelta, Event as WitEvent, Failure, Input, Misuse,
    ModelRequest as WitRequest, Output, Spent as WitSpent,
};

wit_bindgen::generate!({
    path: "../../wit",
    world: "engine",
});

/// The component: one type implements every exported interface.
struct Engine;

export!(Engine);

// ---- corpus ----

/// A corpus resource: the current passages and index. Adding items replaces the
/// `IndexedCorpus` (its content id changes); jobs created earlier keep theirs.
struct CorpusResource {
    inner: RefCell<Arc<IndexedCorpus>>,
}

impl CorpusResource {
    fn get(&self) -> Arc<IndexedCorpus> {
        Arc::clone(&self.inner.borrow())
    }
}

impl wit_corpus::Guest for Engine {
    type Corpus = CorpusResource;
}

impl wit_corpus::GuestCorpus for CorpusResource {
    fn new() -> Self {
        Self { inner: RefCell::new(IndexedCorpus::new(Corpus::default())) }
    }

    fn add(&self, items: Vec<Item>) -> Result<(), String> {
        let mut passages = self.get().corpus().passages().to_vec();
        passages.extend(items.into_iter().map(|item| Passage { id: item.id, text: item.text }));
        let corpus = Corpus::new(passages).map_err(|error| error.to_string())?;
        *self.inner.borrow_mut() = IndexedCorpus::new(corpus);
        Ok(())
    }

    fn id(&self) -> String {
        self.get().id().to_string()
    }

    fn len(&self) -> u32 {
        u32::try_from(self.get().corpus().len()).unwrap_or(u32::MAX)
    }

    fn search(&self, query: String, k: u32) -> Vec<Hit> {
        let corpus = self.get();
        let passages = corpus.corpus().passages();
        corpus
            .bm25()
            .search(&query, k as usize)
            .into_iter()
            .map(|(index, score)| Hit { id: passages[index].id.clone(), score })
            .collect()
    }
}

fn corpora(borrowed: &[CorpusBorrow<'_>]) -> Vec<Arc<IndexedCorpus>> {
    borrowed.iter().map(|corpus| corpus.get::<CorpusResource>().get()).collect()
}

// ---- job ----

/// A job resource.
struct JobResource {
    job: RefCell<Job>,
}

impl wit_job::Guest for Engine {
    type Job = JobResource;
}

impl wit_job::GuestJob for JobResource {
    fn create(config: String, corpora_: Vec<CorpusBorrow<'_>>) -> Result<wit_job::Job, Failure> {
        let job = Job::from_json(&config, &corpora(&corpora_)).map_err(convert::failure)?;
        Ok(wit_job::Job::new(JobResource { job: RefCell::new(job) }))
    }

    fn restore(saved: String, corpora_: Vec<CorpusBorrow<'_>>) -> Result<wit_job::Job, String> {
        let job = Job::restore(&saved, &corpora(&corpora_)).map_err(|error| error.to_string())?;
        Ok(wit_job::Job::new(JobResource { job: RefCell::new(job) }))
    }

    fn check_answer(
        answer: String,
        corpus: CorpusBorrow<'_>,
        options: String,
    ) -> Result<wit_job::Job, Failure> {
        let refused = |message: String| convert::failure(JobFailed::config(message));
        let options: serde_json::Value =
            serde_json::from_str(&options).map_err(|error| refused(format!("options: {error}")))?;
        let serde_json::Value::Object(mut config) = options else {
            return Err(refused("options: a JSON object of the answer job's fields".to_owned()));
        };
        let corpora = corpora(&[corpus]);
        for (field, value) in [
            ("kind", serde_json::json!("answer")),
            ("answer", serde_json::json!(answer)),
            ("corpus", serde_json::json!(corpora[0].id())),
        ] {
            if config.insert(field.to_owned(), value).is_some() {
                return Err(refused(format!(
                    "options.{field}: given by the call, not the options"
                )));
            }
        }
        let config = JobConfig::from_value(serde_json::Value::Object(config))
            .map_err(|error| refused(error.to_string()))?;
        let job = Job::new(config, &corpora).map_err(convert::failure)?;
        Ok(wit_job::Job::new(JobResource { job: RefCell::new(job) }))
    }

    fn poll(&self) -> Output {
        convert::output(self.job.borrow_mut().poll_output())
    }

    fn pending(&self) -> Vec<Output> {
        self.job.borrow_mut().poll_outputs().into_iter().map(convert::output).collect()
    }

    fn handle(&self, input: Input) -> Result<(), Misuse> {
        let input = convert::input(input);
        self.job.borrow_mut().handle_input(input).map_err(convert::misuse)
    }

    fn record_delta(&self, call: u64, delta: WitDelta) -> Result<(), Misuse> {
        let delta = convert::delta_in(delta);
        self.job.borrow_mut().record_delta(CallId(call), delta).map_err(convert::misuse)
    }

    fn events(&self) -> Vec<WitEvent> {
        self.job.borrow_mut().drain_events().into_iter().filter_map(convert::event).collect()
    }

    fn spent(&self) -> WitSpent {
        convert::spent(self.job.borrow().spent())
    }

    fn finish(&self) -> Result<String, Failure> {
        let job = self.job.borrow().clone();
        job.finish().map(|value| value.to_string()).map_err(convert::failure)
    }

    fn save(&self) -> String {
        self.job.borrow().save()
    }
}

// ---- provider ----

/// A parsed provider configuration.
struct CodecResource {
    provider: Provider,
}

/// A response decoder; `None` once finished.
struct DecoderResource {
    decoder: RefCell<Option<StreamDecoder>>,
}

impl wit_provider::Guest for Engine {
    type Codec = CodecResource;
    type StreamDecoder = DecoderResource;
}

impl wit_provider::GuestCodec for CodecResource {
    fn open(config: String) -> Result<wit_provider::Codec, String> {
        let provider: Provider = serde_json::from_str(&config)
            .map_err(|error| format!("not a provider configuration: {error}"))?;
        Ok(wit_provider::Codec::new(CodecResource { provider }))
    }

    fn model(&self) -> String {
        self.provider.model().to_owned()
    }

    fn is_streaming(&self) -> bool {
        self.provider.is_streaming()
    }

    fn encode(&self, request: WitRequest) -> HttpRequest {
        let request = convert::request_in(request);
        let request = self.provider.encode(&request.as_request());
        HttpRequest {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
            timeout_ms: request.timeout_ms,
            idle_timeout_ms: request.idle_timeout_ms,
        }
    }

    fn decode(&self, response: HttpResponse) -> WitMessage {
        let response = verity_core::HttpResponse {
            status: response.status,
            headers: response.headers,
            body: response.body,
        };
        convert::message_out(self.provider.decode(&response))
    }

    fn decoder(&self, status: u16, headers: Vec<(String, String)>) -> wit_provider::StreamDecoder {
        let decoder = self.provider.decoder(status, &headers);
        wit_provider::StreamDecoder::new(DecoderResource { decoder: RefCell::new(Some(decoder)) })
    }
}

/// What a spent decoder answers.
const SPENT: &str = "the stream decoder has already finished";

impl wit_provider::GuestStreamDecoder for DecoderResource {
    fn feed(&self, chunk: Vec<u8>) -> Vec<WitDelta> {
        match self.decoder.borrow_mut().as_mut() {
            Some(decoder) => {
                decoder.feed(&chunk).into_iter().filter_map(convert::delta_out).collect()
            }
            None => Vec::new(),
        }
    }

    fn is_too_large(&self) -> bool {
        self.decoder.borrow().as_ref().is_some_and(StreamDecoder::is_too_large)
    }

    fn finish(&self) -> WitMessage {
        let message = match self.decoder.borrow_mut().take() {
            Some(decoder) => decoder.finish(),
            None => AssistantMessage::failed(SPENT),
        };
        convert::message_out(message)
    }

    fn fail(&self, error: String) -> WitMessage {
        let message = match self.decoder.borrow_mut().take() {
            Some(decoder) => decoder.fail(&error),
            None => AssistantMessage::failed(SPENT),
        };
        convert::message_out(message)
    }
}
