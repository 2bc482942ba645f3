//! `bench-answer CORPUS.jsonl CLAIMS.jsonl [--sentences N] [--provider CONFIG.json]
//! [--concurrency N]`: one
//! answer of N sentences (default 10: the first N claims labelled `supported` of the claim
//! file, joined) checked as one answer job against the whole corpus file (read and indexed as
//! the app reads an uploaded `.jsonl`), with the offline baseline or the provider the file
//! names (its `"assess"` chooses the route, as in `eval`), `--concurrency` sentences at once
//! (default 1). Prints one JSON object: the time
//! to index the corpus, to the first and to the last sentence's verdict (from the job's start,
//! as the `sentenceChecked` events arrive), requests in all and per sentence, and each
//! sentence's status.

// Runs natively only (it times a model server's answers); the wasm build of this crate's
// tests builds it too.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    native::main()
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::cell::RefCell;
    use std::process::ExitCode;
    use std::sync::Arc;
    use std::time::Instant;

    use serde_json::{Value, json};
    use verity_core::corpus::Corpus;
    use verity_core::indexed::IndexedCorpus;
    use verity_core::provider::offline::{OFFLINE_MODEL_NAME, OfflineModel};
    use verity_core::{DriveOptions, Event, Job, NoTools, Transport, drive_with};
    use verity_tests::cli::{block_on, provider_name, read_provider, transport};

    const USAGE: &str = "usage: bench-answer CORPUS.jsonl CLAIMS.jsonl [--sentences N] [--provider CONFIG.json] [--concurrency N]";

    pub fn main() -> ExitCode {
        match run() {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("bench-answer: {message}");
                ExitCode::FAILURE
            }
        }
    }

    fn run() -> Result<Value, String> {
        let mut args = std::env::args().skip(1);
        let corpus_path = args.next().ok_or(USAGE)?;
        let claims_path = args.next().ok_or(USAGE)?;
        let (mut sentences, mut provider, mut concurrency) = (10usize, None, 1u32);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--sentences" => {
                    sentences = args
                        .next()
                        .and_then(|n| n.parse().ok())
                        .filter(|n| *n >= 1)
                        .ok_or("--sentences needs a positive number")?;
                }
                "--provider" => provider = Some(args.next().ok_or(USAGE)?),
                "--concurrency" => {
                    concurrency = args
                        .next()
                        .and_then(|n| n.parse().ok())
                        .ok_or("--concurrency needs a positive number")?;
                }
                other => return Err(format!("{other:?}? {USAGE}")),
            }
        }
        let text =
            std::fs::read_to_string(&corpus_path).map_err(|e| format!("{corpus_path}: {e}"))?;
        let started = Instant::now();
        let passages = verity_core::files::passages_from_file(&corpus_path, &text)
            .map_err(|e| e.to_string())?;
        let corpus = IndexedCorpus::new(Corpus::new(passages).map_err(|e| e.to_string())?);
        // The index is built once, here, as the app builds it on upload (not inside the first check).
        let _ = corpus.bm25();
        let index_s = started.elapsed().as_secs_f64();
        let answer = compose(&claims_path, sentences)?;
        let mut config = json!({"kind": "answer", "answer": answer, "corpus": corpus.id(),
                                "retriever": {"bm25": {"k": 4}}, "concurrency": concurrency});
        match provider {
            None => measure(&config, &corpus, &OfflineModel, OFFLINE_MODEL_NAME, index_s),
            Some(path) => {
                let (provider, assess) = read_provider(&path)?;
                if !assess.is_agent() {
                    config["assess"] = json!(assess);
                }
                let name = provider_name(&provider);
                measure(&config, &corpus, &transport(provider)?, &name, index_s)
            }
        }
    }

    /// The first `n` claims labelled `supported` of the claim file, joined into one answer.
    fn compose(path: &str, n: usize) -> Result<String, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let claims: Vec<String> = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|row| row["label"] == "supported")
            .filter_map(|row| row["claim"].as_str().map(|claim| claim.trim().to_owned()))
            .take(n)
            .collect();
        if claims.len() < n {
            return Err(format!("{path} has {} supported claims, not {n}", claims.len()));
        }
        // Each claim one sentence: a full stop where it lacks one.
        let sentences: Vec<String> = claims
            .into_iter()
            .map(|claim| if claim.ends_with(['.', '!', '?']) { claim } else { format!("{claim}.") })
            .collect();
        Ok(sentences.join(" "))
    }

    fn measure(
        config: &Value,
        corpus: &Arc<IndexedCorpus>,
        model: &impl Transport,
        model_name: &str,
        index_s: f64,
    ) -> Result<Value, String> {
        let job = Job::from_json(&config.to_string(), std::slice::from_ref(corpus))
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        let verdicts: RefCell<Vec<(f64, String)>> = RefCell::new(Vec::new());
        let options = DriveOptions::new().events(|event| {
            if let Event::SentenceChecked { sentence } = event {
                let status = serde_json::to_value(sentence.status).unwrap_or_default();
                let status = status.as_str().unwrap_or_default().to_owned();
                verdicts.borrow_mut().push((started.elapsed().as_secs_f64(), status));
            }
        });
        let value =
            block_on(drive_with(job, model, &NoTools, options)).map_err(|e| e.to_string())?;
        let total_s = started.elapsed().as_secs_f64();
        let verdicts = verdicts.into_inner();
        let requests = value["requests"].as_u64().unwrap_or(0);
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        #[allow(clippy::cast_precision_loss)]
        Ok(json!({
            "model": model_name,
            "corpus_passages": corpus.corpus().len(),
            "sentences": value["sentences"].as_array().map_or(0, Vec::len),
            "checked": verdicts.len(),
            "index_s": round(index_s),
            "first_verdict_s": verdicts.first().map(|(at, _)| round(*at)),
            "last_verdict_s": verdicts.last().map(|(at, _)| round(*at)),
            "total_s": round(total_s),
            "requests": requests,
            "requests_per_sentence": round(requests as f64 / verdicts.len().max(1) as f64),
            "statuses": verdicts.iter().map(|(_, status)| status.clone()).collect::<Vec<_>>(),
        }))
    }
}
