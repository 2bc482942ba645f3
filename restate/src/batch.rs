//! `verity-restate batch`: a claim file checked as one durable batch on a local Restate
//! server, with worker processes, a progress line, results as JSONL and the `eval` summary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use verity_core::corpus::Corpus;
use verity_core::provider::Provider;

pub use crate::claims::{Row, inline_rows, parse_claims, read_claims};
use crate::cluster::{self, Ports, Server, Workers};
use crate::corpus::{
    CorpusFile, CorpusPolicy, DEFAULT_MAX_CORPUS_BYTES, is_url, load_bytes, parse, sha256_hex,
};
use crate::summary::{Tally, gold_text, retriever_of};
use crate::workflow::{BatchInput, BatchProgress, BatchResult, CheckResult, ClaimResult, Limits};

mod watch;

pub use watch::{Watch, batch_progress, results, wait};

/// A provider configuration file (the JSON of [`Provider`]); its key, if the file has none,
/// from `VERITY_API_KEY`.
///
/// # Errors
/// Unreadable or not a provider configuration (the key is never in the message).
pub fn read_provider(path: &Path) -> Result<Provider, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut config: Value = serde_json::from_str(&text).map_err(|e| format!("{shown}: {e}"))?;
    if config.get("apiKey").is_none_or(Value::is_null)
        && let Ok(key) = std::env::var("VERITY_API_KEY")
    {
        config["apiKey"] = json!(key);
    }
    serde_json::from_value(config)
        .map_err(|e| format!("{shown} is not a provider configuration: {e}"))
}

/// How to run a batch.
#[derive(Debug, Clone)]
pub struct Options {
    /// The claim file.
    pub claims: PathBuf,
    /// The shared corpus: a file path, or an `http(s)://` URL the workers fetch.
    pub corpus: Option<String>,
    /// A provider configuration (else the offline model).
    pub provider: Option<PathBuf>,
    /// Worker processes.
    pub workers: usize,
    /// Checks in flight and rate limits.
    pub limits: Limits,
    /// The claim job's other fields (`retriever`, `retry`).
    pub job: Map<String, Value>,
    /// Where the results go (JSONL); the summary goes beside it (`.summary.json`).
    pub out: PathBuf,
    /// The server's data directory (kept: the same command run again attaches to the batch).
    pub data_dir: PathBuf,
    /// The batch's key; by default derived from its input (see [`batch_key`]).
    pub batch_id: Option<String>,
    /// This crate's binary (the worker).
    pub binary: PathBuf,
    /// Print a progress line to stderr.
    pub progress: bool,
    /// Claims per part of the batch (see `workflow::DEFAULT_PART_SIZE`).
    pub part_size: Option<u64>,
    /// Give up after this long without progress (see [`Watch`]).
    pub stall_after: Option<Duration>,
    /// Kill and restart every worker halfway, and report how long until the batch moves again
    /// (`batch.replay_seconds` in the summary): the benchmark's replay figure.
    pub measure_replay: bool,
    /// An existing cluster's ingress URLs (its nodes): the batch is submitted there, to
    /// workers its operator registered, instead of to a server and workers this command
    /// starts; when the node asked stops answering, the next one is (see [`Watch`]).
    pub ingress: Vec<String>,
}

/// The batch's input: the rows and the corpus reference (with its hash, computed here from
/// the file, or from the URL fetched once), and the shared corpus itself. The corpus is
/// parsed here, so a broken one is named before anything starts.
///
/// # Errors
/// An unreadable, unreachable or unparsable corpus, or a row without a corpus when there is
/// no shared one.
pub fn batch_input(
    options: &Options,
    rows: &[Row],
) -> Result<(BatchInput, Option<Corpus>), String> {
    let mut shared = None;
    let corpus = match &options.corpus {
        Some(location) => {
            let location = if is_url(location) {
                location.trim().to_owned()
            } else {
                std::fs::canonicalize(location)
                    .map_err(|e| format!("corpus {location}: {e}"))?
                    .display()
                    .to_string()
            };
            // The operator's own file: no policy, no cap (the workers get one that fits it).
            let bytes = load_bytes(&location, u64::MAX)?;
            let sha256 = sha256_hex(&bytes);
            shared = Some(parse(&location, bytes)?);
            Some(CorpusFile { path: location, sha256 })
        }
        None => None,
    };
    if corpus.is_none()
        && let Some(n) = rows.iter().position(|row| row.corpus.is_none())
    {
        return Err(format!(
            "claim {} (id {:?}) has no corpus of its own: give --corpus",
            n + 1,
            rows[n].id
        ));
    }
    // The claims go by reference (the claim file, its path and hash): the batch's input stays
    // the same size however many claims it has.
    let path = std::fs::canonicalize(&options.claims)
        .map_err(|e| format!("{}: {e}", options.claims.display()))?;
    let bytes = load_bytes(&path.display().to_string(), u64::MAX)?;
    let claims_file = CorpusFile { path: path.display().to_string(), sha256: sha256_hex(&bytes) };
    let input = BatchInput {
        corpus,
        claims: Vec::new(),
        claims_file: Some(claims_file),
        job: options.job.clone(),
        limits: options.limits,
        part_size: options.part_size,
    };
    Ok((input, shared))
}

/// The workers' corpus arguments for `input`: its shared corpus and its claim file as
/// `--corpus-file`s (each file alone, nothing else in its directory; a URL as a
/// `--corpus-url`), and a cap that fits both; none without files (inline passages and claims
/// need none).
#[must_use]
pub fn corpus_worker_args(input: &BatchInput) -> Vec<String> {
    let mut args = Vec::new();
    let mut largest = DEFAULT_MAX_CORPUS_BYTES;
    for file in input.corpus.iter().chain(&input.claims_file) {
        if is_url(&file.path) {
            args.extend(["--corpus-url".to_owned(), file.path.clone()]);
            continue;
        }
        let path = Path::new(&file.path);
        largest = largest.max(std::fs::metadata(path).map_or(0, |meta| meta.len()));
        args.extend(["--corpus-file".to_owned(), file.path.clone()]);
    }
    if !args.is_empty() {
        args.extend(["--corpus-max-bytes".to_owned(), largest.to_string()]);
    }
    args
}

/// The corpus policy of a worker started with [`corpus_worker_args`] (for a host in this
/// process).
///
/// # Errors
/// The corpus or claim file is gone.
pub fn corpus_policy(input: &BatchInput) -> Result<CorpusPolicy, String> {
    let mut policy = CorpusPolicy::none();
    let mut args = corpus_worker_args(input).into_iter();
    while let (Some(flag), Some(value)) = (args.next(), args.next()) {
        policy = match flag.as_str() {
            "--corpus-url" => policy.with_url_prefix(&value)?,
            "--corpus-root" => policy.with_root(Path::new(&value))?,
            "--corpus-file" => policy.with_file(Path::new(&value))?,
            _ => policy.with_max_bytes(value.parse().unwrap_or(DEFAULT_MAX_CORPUS_BYTES)),
        };
    }
    Ok(policy)
}

/// The key of a batch: `batch-` and the first 32 hex digits of the SHA-256 of `salt` (the
/// deployment's, [`batch_salt`]) and its input (the claims, the corpus's location and hash, the
/// job and the limits). The same command run again on the same deployment has the same key,
/// and attaches to the batch instead of checking the claims again; without the salt, which
/// stays in the deployment's folder, the key cannot be guessed from the input (a caller who
/// reached the ingress first could otherwise start the batch's checks with input of their
/// own).
#[must_use]
pub fn batch_key(input: &BatchInput, salt: &str) -> String {
    let json = serde_json::to_string(input).unwrap_or_default();
    format!("batch-{}", &sha256_hex(format!("{salt}\n{json}").as_bytes())[..32])
}

/// The deployment's secret for batch keys: 32 random bytes (hex) in `data_dir/batch-salt`,
/// made the first time and read after.
///
/// # Errors
/// The folder cannot be written, the file read, or no randomness is to be had.
pub fn batch_salt(data_dir: &Path) -> Result<String, String> {
    let path = data_dir.join("batch-salt");
    let valid = |text: &str| text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit());
    if let Ok(text) = std::fs::read_to_string(&path) {
        let text = text.trim();
        if valid(text) {
            return Ok(text.to_owned());
        }
        return Err(format!(
            "{}: not a batch salt (64 hex digits); remove it to make a new one",
            path.display()
        ));
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for the batch salt: {e}"))?;
    let salt: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    // Made once: a second process making it at the same time keeps the first one's.
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(mut file) => {
            use std::io::Write as _;
            file.write_all(salt.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(salt)
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => batch_salt(data_dir),
        Err(error) => Err(format!("{}: {error}", path.display())),
    }
}

/// Runs a batch end to end: server, workers, registration, submission, progress, results.
/// Returns the summary (`eval`'s when the rows are labelled, else the counts).
///
/// # Errors
/// Bad input (nothing is submitted then), a process that does not start, or a batch that
/// ends with a terminal error (a corpus the workers refuse).
pub fn run(options: &Options) -> Result<Value, String> {
    let rows = read_claims(&options.claims)?;
    let (input, shared) = batch_input(options, &rows)?;
    if let Some(path) = &options.provider {
        read_provider(path)?;
    }
    let key = match &options.batch_id {
        Some(id) => id.clone(),
        None => batch_key(&input, &batch_salt(&options.data_dir)?),
    };
    if !options.ingress.is_empty() && options.measure_replay {
        return Err(
            "--measure-replay kills the workers this command starts: not with --ingress".to_owned()
        );
    }
    // A server and workers of its own, unless the batch goes to an existing cluster.
    let mut local =
        if options.ingress.is_empty() { Some(start_local(options, &input)?) } else { None };
    let ingress = match &local {
        Some((server, _)) => vec![server.ingress_url()],
        None => options.ingress.clone(),
    };
    let started = Instant::now();
    let input = serde_json::to_value(&input).map_err(|e| e.to_string())?;
    let attached = submit_to_first(&ingress, &key, &input)?;
    if attached && options.progress {
        eprintln!("batch {key} was submitted before: attached to it (nothing is checked twice)");
    }
    // Results go out as they finish (in that order); the file is rewritten in the batch's
    // order at the end.
    let mut arrived = ResultsFile::create(&options.out, &rows)?;
    let watch = Watch {
        ingress,
        current: std::cell::Cell::new(0),
        admin: local.as_ref().map(|(server, _)| server.admin_url()),
        show: options.progress,
        stall_after: options.stall_after,
    };
    let mut replay = Replay::default();
    let result =
        watch.wait_with(&key, &mut |finished| arrived.append(finished), &mut |progress| {
            if options.measure_replay { replay.tick(progress, &mut local) } else { Ok(()) }
        })?;
    let elapsed = started.elapsed();
    let (mut workers_peak, mut server_peak) = (Vec::new(), None);
    if let Some((mut server, workers)) = local {
        workers_peak = workers.workers.iter().filter_map(cluster::Process::peak_rss).collect();
        server_peak = server.peak_rss();
        drop(workers);
        server.stop();
    }
    write_results(&options.out, &rows, &result)?;
    let model = match &options.provider {
        Some(path) => model_name(&read_provider(path)?),
        None => verity_core::provider::offline::OFFLINE_MODEL_NAME.to_owned(),
    };
    let mut summary =
        summarize(&options.claims, &rows, &result, &model, &options.job, shared.as_ref());
    let figures = Figures { elapsed, workers_peak, server_peak, replay: replay.seconds };
    summary["batch"] = batch_figures(options, &key, rows.len(), &result, &figures);
    let summary_path = options.out.with_extension("summary.json");
    std::fs::write(&summary_path, format!("{summary:#}\n"))
        .map_err(|e| format!("{}: {e}", summary_path.display()))?;
    Ok(summary)
}

/// The batch's own server (on the ports its data directory kept) and workers, the workers
/// registered with it.
///
/// # Errors
/// A process that does not start, or a registration refused.
fn start_local(options: &Options, input: &BatchInput) -> Result<(Server, Workers), String> {
    let (ports, deployment) = Ports::kept(&options.data_dir);
    let server = Server::start(&options.data_dir, ports)?;
    let mut worker_args = corpus_worker_args(input);
    if let Some(path) = &options.provider {
        worker_args.push("--provider".to_owned());
        worker_args.push(path.display().to_string());
    }
    let workers =
        Workers::start_at(&options.binary, options.workers, &worker_args, &[], deployment)?;
    cluster::register(&server.admin_url(), &workers.url())?;
    Ok((server, workers))
}

/// Submits batch `key` through the first node of `ingress` that answers: a submission that
/// reached a node whose answer was lost is attached to on the next (the batch's key is its
/// identity). Whether it was submitted before.
///
/// # Errors
/// Every node refused, each refusal named.
fn submit_to_first(ingress: &[String], key: &str, input: &Value) -> Result<bool, String> {
    let mut refusals = Vec::new();
    let submitted =
        ingress.iter().find_map(|url| match cluster::submit_or_attach(url, "Batch", key, input) {
            Ok(attached) => Some(attached),
            Err(error) => {
                refusals.push(error);
                None
            }
        });
    submitted.ok_or_else(|| format!("no ingress took the batch: {}", refusals.join("; ")))
}

/// The replay figure (`measure_replay`): once half the claims are done, every worker is
/// killed (-9) and started again; the time until the next claim finishes is the replay (the
/// running parts' and the batch's journals read again by new workers) and the resumption.
#[derive(Default)]
struct Replay {
    /// When the workers were restarted, and how many claims were done then.
    from: Option<(Instant, u64)>,
    /// The figure, once measured.
    seconds: Option<Duration>,
}

impl Replay {
    /// Looks at `progress`: restarts `local`'s workers at half way, or ends the measure.
    fn tick(
        &mut self,
        progress: &BatchProgress,
        local: &mut Option<(Server, Workers)>,
    ) -> Result<(), String> {
        if self.seconds.is_some() {
            return Ok(());
        }
        let done = progress.progress.done;
        match self.from {
            None if done * 2 >= progress.progress.total && done < progress.progress.total => {
                let Some((_, workers)) = local else { return Ok(()) };
                for worker in &mut workers.workers {
                    worker.kill9();
                }
                for worker in &mut workers.workers {
                    worker.restart()?;
                }
                self.from = Some((Instant::now(), done));
            }
            Some((at, before)) if done > before => self.seconds = Some(at.elapsed()),
            _ => {}
        }
        Ok(())
    }
}

/// What a run measured beyond the results.
struct Figures {
    /// From submission to the batch's result.
    elapsed: Duration,
    /// The workers' peak resident memory, in bytes (the batch's own workers).
    workers_peak: Vec<u64>,
    /// The server's (the batch's own).
    server_peak: Option<u64>,
    /// The replay figure, if measured.
    replay: Option<Duration>,
}

/// The summary's `batch` section: the key, where it ran, how long and how fast, its tokens,
/// cost and parts, and the figures.
fn batch_figures(
    options: &Options,
    key: &str,
    claims: usize,
    result: &BatchResult,
    figures: &Figures,
) -> Value {
    let elapsed = figures.elapsed.as_secs_f64();
    json!({
        "key": key,
        "workers": if options.ingress.is_empty() { json!(options.workers) } else { Value::Null },
        "ingress": options.ingress,
        "seconds": round(elapsed),
        "claims_per_second": round(claims as f64 / elapsed.max(1e-9)),
        "tokens": result.progress.tokens,
        "cost": result.progress.cost,
        "results": options.out.display().to_string(),
        "parts": (claims as u64)
            .div_ceil(options.part_size.unwrap_or(crate::workflow::DEFAULT_PART_SIZE).max(1)),
        "workers_peak_rss_mb": figures.workers_peak.iter().map(|b| round(*b as f64 / 1e6)).collect::<Vec<_>>(),
        "server_peak_rss_mb": figures.server_peak.map(|b| round(b as f64 / 1e6)),
        "replay_seconds": figures.replay.map(|d| round(d.as_secs_f64())),
    })
}

/// The results file while a batch runs: one line per result as it finishes.
struct ResultsFile<'a> {
    file: std::fs::File,
    rows: &'a [Row],
}

impl<'a> ResultsFile<'a> {
    fn create(path: &Path, rows: &'a [Row]) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self { file, rows })
    }

    fn append(&mut self, finished: &[ClaimResult]) -> Result<(), String> {
        let mut text = String::new();
        for claim in finished {
            if let Some(row) = self.rows.get(claim.index) {
                text.push_str(&result_line(row, &claim.result).to_string());
                text.push('\n');
            }
        }
        self.file.write_all(text.as_bytes()).map_err(|e| format!("the results file: {e}"))
    }
}

fn result_line(row: &Row, result: &CheckResult) -> Value {
    match &row.answer {
        Some(answer) => {
            json!({"id": row.id, "answer": answer, "label": row.label, "result": result})
        }
        None => json!({"id": row.id, "claim": row.claim, "label": row.label, "result": result}),
    }
}

/// One JSON line per claim: its id, claim, label (if any) and result.
///
/// # Errors
/// When the file cannot be written.
pub fn write_results(path: &Path, rows: &[Row], result: &BatchResult) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut text = String::new();
    for (row, claim) in rows.iter().zip(&result.results) {
        text.push_str(&result_line(row, &claim.result).to_string());
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn model_name(provider: &Provider) -> String {
    match provider {
        Provider::OpenAi(config) => {
            format!("openai-compatible {} at {}", config.model, config.base_url)
        }
        Provider::Anthropic(config) => format!("anthropic {}", config.model),
        _ => "a provider".to_owned(),
    }
}

/// `eval`'s summary of labelled rows (the same function, [`Tally`]); for unlabelled rows, the
/// counts only. A row's gold passage is looked up in its own corpus, else in `shared`.
#[must_use]
pub fn summarize(
    file: &Path,
    rows: &[Row],
    result: &BatchResult,
    model: &str,
    job: &Map<String, Value>,
    shared: Option<&Corpus>,
) -> Value {
    let mut tally = Tally::new();
    for (row, claim) in rows.iter().zip(&result.results) {
        tally.add(row.label.as_deref(), gold_text(row, shared).as_deref(), &claim.result);
    }
    tally.summary(&file.display().to_string(), model, &retriever_of(job))
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::{
        BatchInput, batch_key, batch_salt, corpus_policy, corpus_worker_args, parse_claims,
    };

    /// The batch command's workers may read its corpus and its claim file, and nothing else in
    /// their directories (it granted the directories before).
    #[test]
    fn a_batch_grants_its_workers_its_files_not_their_directories() {
        let dir = std::env::temp_dir().join(format!("verity-grant-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (corpus, claims, beside) =
            (dir.join("corpus.jsonl"), dir.join("claims.jsonl"), dir.join("private.jsonl"));
        for path in [&corpus, &claims, &beside] {
            std::fs::write(path, "{}").unwrap();
        }
        let named = |path: &std::path::Path| serde_json::json!({"path": path, "sha256": "00"});
        let input: BatchInput = serde_json::from_value(serde_json::json!({
            "corpus": named(&corpus), "claimsFile": named(&claims), "job": {}
        }))
        .unwrap();
        let args = corpus_worker_args(&input);
        assert!(!args.iter().any(|arg| arg == "--corpus-root"), "{args:?}");
        let policy = corpus_policy(&input).unwrap();
        for path in [&corpus, &claims] {
            assert!(policy.admit(&path.display().to_string()).is_ok(), "{}", path.display());
        }
        assert!(policy.admit(&beside.display().to_string()).is_err(), "a file beside them");
        // A granted file replaced by another (renamed over it) is not the file granted.
        std::fs::write(dir.join("new.jsonl"), "{}").unwrap();
        std::fs::rename(dir.join("new.jsonl"), &corpus).unwrap();
        #[cfg(unix)]
        assert!(policy.admit(&corpus.display().to_string()).unwrap_err().contains("replaced"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_batch_key_is_stable_per_deployment_and_not_guessable_from_the_input() {
        let dir = std::env::temp_dir().join(format!("verity-salt-{}", std::process::id()));
        let other = dir.join("other");
        let _ = std::fs::remove_dir_all(&dir);
        let salt = batch_salt(&dir).unwrap();
        assert_eq!(salt.len(), 64);
        assert_eq!(batch_salt(&dir).unwrap(), salt, "made once, read after");
        let input: BatchInput = serde_json::from_value(serde_json::json!({
            "claims": [{"claim": "The bridge opened in 1932."}], "job": {}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let key = batch_key(&input, &salt);
        assert_eq!(key, batch_key(&input, &batch_salt(&dir).unwrap()), "the same command attaches");
        assert_ne!(key, batch_key(&input, &batch_salt(&other).unwrap()), "another deployment's");
        assert_ne!(key, batch_key(&input, ""), "not the input's hash alone");
        std::fs::write(dir.join("batch-salt"), "short").unwrap();
        assert!(batch_salt(&dir).unwrap_err().contains("not a batch salt"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_claim_that_shows_otherwise_than_it_reads_is_refused_by_line() {
        let good = "{\"claim\": \"Paris is in France.\"}\n{\"claim\": \"Tab\\there.\"}\n";
        assert_eq!(parse_claims("c.jsonl", good).unwrap().len(), 2);
        for (hidden, code) in [("\\u202e", "U+202E"), ("\\u200b", "U+200B"), ("\\u2066", "U+2066")]
        {
            let text = format!("{{\"claim\": \"Paris.\"}}\n{{\"claim\": \"Pa{hidden}ris.\"}}\n");
            let error = parse_claims("c.jsonl", &text).unwrap_err();
            assert!(error.starts_with("c.jsonl:2: "), "{error}");
            assert!(error.contains(code), "{error}");
        }
    }
}
